/*
 * NSM through the real server, in a network namespace of the test's own so that a fake
 * client statd can have port 111 (its portmapper) on 127.0.0.1:
 *  - a server started with a previous run's client list sends that client SM_NOTIFY with
 *    its new state number (2 past the last one) and forgets the entry once answered;
 *  - SM_STAT answers the state number; SM_MON is refused;
 *  - SM_NOTIFY sent to the server reaches the lock service's reboot hook.
 * NSM is served on the lock manager's port (--nlm-port).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "sm_inter.h"
#include "../unit/fake_rpc.h"

#define NLM_PORT 4045   /* the namespace is ours: the customary port is free */
#define NLM_PORT_TEXT "4045"
#define WAIT_MS 15000

static bool in_own_netns;

/* A fake client statd: records the SM_NOTIFY calls it gets. */
struct statd {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int got;
	char mon_name[64];
	int state;
	char peer[64];
};

static size_t statd_handler(void *arg, const struct fake_call *c, uint8_t *out)
{
	struct statd *s = arg;
	stat_chge chg = { 0 };
	size_t len = 0;
	XDR x;

	if (c->prog != SM_PROG || c->vers != SM_VERS || c->proc != SM_NOTIFY)
		return fake_reply(out, c->xid, 1 /* PROG_UNAVAIL */, NULL, 0);
	xdrmem_create(&x, (char *)c->args, (u_int)c->argslen, XDR_DECODE);
	if (xdr_stat_chge(&x, &chg)) {
		pthread_mutex_lock(&s->lock);
		s->got++;
		snprintf(s->mon_name, sizeof(s->mon_name), "%s", chg.mon_name);
		s->state = chg.state;
		snprintf(s->peer, sizeof(s->peer), "%s", c->peer);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		len = fake_reply(out, c->xid, 0, NULL, 0);
	}
	xdr_free((xdrproc_t)xdr_stat_chge, (char *)&chg);
	xdr_destroy(&x);
	return len;
}

static bool statd_wait(struct statd *s, int calls)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&s->lock);
	while (s->got < calls)
		if (pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT)
			break;
	ok = s->got >= calls;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static bool loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	ok = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
	ifr.ifr_flags |= IFF_UP;
	ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	close(fd);
	return ok;
}

static void write_text(const char *path, const char *text)
{
	it_write_file(path, text, strlen(text));
}

static uint32_t state_on_disk(const struct it_server *s)
{
	char path[PATH_MAX];
	size_t len;
	char *text;
	uint32_t v;

	it_path(path, "%s/nsm/state", s->is_state);
	text = it_read_file(path, &len);
	assert_non_null(text);
	v = (uint32_t)strtoul(text, NULL, 10);
	free(text);
	return v;
}

struct gone_arg {
	char path[PATH_MAX];
};

static bool file_gone(void *arg)
{
	return !it_exists(((struct gone_arg *)arg)->path);
}

static void sm_stat_is(const struct it_server *s, int proto, uint32_t want)
{
	CLIENT *c = it_clnt(proto, SM_PROG, SM_VERS, NLM_PORT);
	sm_name name = { .mon_name = "anyone" };
	sm_stat_res res;

	(void)s;
	memset(&res, 0, sizeof(res));
	assert_int_equal(it_call(c, SM_STAT, (xdrproc_t)xdr_sm_name, &name,
				 (xdrproc_t)xdr_sm_stat_res, &res), RPC_SUCCESS);
	assert_int_equal(res.res_stat, STAT_SUCC);
	assert_int_equal((uint32_t)res.state, want);
	it_clnt_destroy(c);
}

static void test_nsm_restart_and_notify(void **state)
{
	struct statd sd = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct fake_pmap pm = { 0 };
	struct fake_rpc *statd;
	struct it_server s;
	struct gone_arg prev;
	char path[PATH_MAX];

	(void)state;
	if (!in_own_netns)
		skip();
	statd = fake_rpc_start("127.0.0.1", 0, false, statd_handler, &sd);
	assert_non_null(statd);
	assert_int_equal(fake_pmap_start(&pm, "127.0.0.1", 111), 0);
	fake_pmap_set(&pm, SM_PROG, SM_VERS, IPPROTO_UDP, statd->fr_udp_port);

	/* the last run: state 41, one client that reached us at 127.0.0.1 */
	it_server_init(&s, false);
	it_path(path, "%s/nsm", s.is_state);
	assert_int_equal(mkdir(s.is_state, 0700), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	it_path(path, "%s/nsm/state", s.is_state);
	write_text(path, "41\n");
	it_path(path, "%s/nsm/clients", s.is_state);
	write_text(path, "unionnfsd-nsm-clients 1\n127.0.0.1 =client-a 127.0.0.1\n");
	s.is_extra[0] = "--nlm-port";
	s.is_extra[1] = NLM_PORT_TEXT;
	s.is_extra[2] = NULL;
	if (it_server_start(&s) != 0) {
		if (it_server_log_contains(&s, "unknown option '--nlm-port'")) {
			/* before branch nlm's wiring of NLM and NSM into main is merged */
			fprintf(stderr, "test_nsm: this server has no --nlm-port (NSM is not served); "
				"skipped\n");
			it_server_cleanup(&s);
			fake_pmap_stop(&pm);
			fake_rpc_stop(statd);
			skip();
		}
		fail_msg("the server did not start (see its output above)");
	}

	/* SM_NOTIFY arrives with the new state, naming the address the client used */
	if (!statd_wait(&sd, 1)) {
		it_server_dump_log(&s);
		fail_msg("no SM_NOTIFY reached the client's statd in %d ms", WAIT_MS);
	}
	pthread_mutex_lock(&sd.lock);
	assert_string_equal(sd.mon_name, "127.0.0.1");
	assert_int_equal(sd.state, 43);
	pthread_mutex_unlock(&sd.lock);
	assert_int_equal(state_on_disk(&s), 43);
	it_path(prev.path, "%s/nsm/clients.previous", s.is_state);
	assert_true(wait_until(file_gone, &prev, WAIT_MS));

	/* SM_STAT over both transports */
	sm_stat_is(&s, IPPROTO_TCP, 43);

	/* SM_MON is the machine's statd's business */
	{
		CLIENT *c = it_clnt(IPPROTO_TCP, SM_PROG, SM_VERS, NLM_PORT);
		mon m = { .mon_id.mon_name = "peer", .mon_id.my_id.my_name = "localhost",
			  .mon_id.my_id.my_prog = 100021, .mon_id.my_id.my_vers = 4,
			  .mon_id.my_id.my_proc = 16 };
		sm_stat_res res;

		memset(&res, 0, sizeof(res));
		assert_int_equal(it_call(c, SM_MON, (xdrproc_t)xdr_mon, &m,
					 (xdrproc_t)xdr_sm_stat_res, &res), RPC_SUCCESS);
		assert_int_equal(res.res_stat, STAT_FAIL);
		it_clnt_destroy(c);
	}

	/* a client says it restarted: the server hands it to the lock service */
	{
		CLIENT *c = it_clnt(IPPROTO_TCP, SM_PROG, SM_VERS, NLM_PORT);
		stat_chge chg = { .mon_name = "client-b", .state = 7 };

		assert_int_equal(it_call(c, SM_NOTIFY, (xdrproc_t)xdr_stat_chge, &chg,
					 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
		it_clnt_destroy(c);
		assert_true(it_server_log_wait(&s, "SM_NOTIFY from 127.0.0.1: client-b restarted",
					       WAIT_MS));
	}

	/* the next start: 2 more, and nobody left to tell */
	it_server_restart(&s);
	assert_int_equal(state_on_disk(&s), 45);
	sm_stat_is(&s, IPPROTO_TCP, 45);
	pthread_mutex_lock(&sd.lock);
	assert_int_equal(sd.got, 1);
	pthread_mutex_unlock(&sd.lock);

	assert_int_equal(it_server_finish(&s), 0);
	fake_pmap_stop(&pm);
	fake_rpc_stop(statd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nsm_restart_and_notify),
	};

	/* port 111 for the fake statd's portmapper: only in a network namespace of our own */
	if (unshare(CLONE_NEWNET) == 0 && loopback_up())
		in_own_netns = true;
	else
		fprintf(stderr, "test_nsm: cannot make a network namespace (%s): needs root; "
			"skipped\n", strerror(errno));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
