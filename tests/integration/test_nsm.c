/*
 * NSM through the real server, in a network namespace of the test's own so that a fake
 * client statd can have port 111 (its portmapper) on 127.0.0.1:
 *  - a server started with a previous run's client list sends that client SM_NOTIFY with
 *    its new state number (2 past the last one) and forgets the entry once answered;
 *  - SM_STAT answers the state number; SM_MON is refused;
 *  - SM_NOTIFY sent to the server reaches the lock service: the client's locks go;
 *  - the clients that locked in one run are told at the next start.
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
#include "nlm4.h"
#include "sm_inter.h"
#include "../unit/fake_rpc.h"
#include "../netns.h"

#define NLM_PORT 4045   /* the namespace is ours: the customary port is free */
#define NLM_PORT_TEXT "4045"
#define WAIT_MS 15000
#define XP(fn) ((xdrproc_t)(void (*)(void))(fn))

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

/* NLM LOCK (exclusive, bytes 0-9, not blocking) from host with caller name caller. */
static nlm4_stats nlm_lock(const char *host, const char *caller, const nfs_fh3 *fh)
{
	CLIENT *c = it_clnt_from(host, NLM_PROG, NLM_VERS4, NLM_PORT, 0, 0, true);
	char oh[] = "owner", ck[] = "cookie";
	nlm4_lockargs a = {
		.cookie = { sizeof(ck) - 1, ck }, .exclusive = true, .state = 1,
		.alock = { .caller_name = (char *)caller, .svid = 1, .l_offset = 0, .l_len = 10,
			   .fh = { fh->data.data_len, fh->data.data_val },
			   .oh = { sizeof(oh) - 1, oh } },
	};
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NLMPROC4_LOCK, XP(xdr_nlm4_lockargs), &a, XP(xdr_nlm4_res), &r),
			 RPC_SUCCESS);
	it_free(XP(xdr_nlm4_res), &r);
	it_clnt_destroy(c);
	return r.stat.stat;
}

static void sm_notify_from(const char *host, const char *mon_name, int state)
{
	CLIENT *c = it_clnt_from(host, SM_PROG, SM_VERS, NLM_PORT, 0, 0, true);
	stat_chge chg = { .mon_name = (char *)mon_name, .state = state };

	assert_int_equal(it_call(c, SM_NOTIFY, XP(xdr_stat_chge), &chg, XP(it_xdr_void), NULL),
			 RPC_SUCCESS);
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
	/* every 127/8 address is a client host with this statd */
	statd = fake_rpc_start("0.0.0.0", 0, false, statd_handler, &sd);
	assert_non_null(statd);
	assert_int_equal(fake_pmap_start(&pm, "0.0.0.0", 111), 0);
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
	s.is_extra[2] = "--grace"; /* locks at once: grace is NLM's business, tested there */
	s.is_extra[3] = "0";
	s.is_extra[4] = NULL;
	if (it_server_start(&s) != 0)
		fail_msg("the server did not start (see its output above)");

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
	sm_stat_is(&s, IPPROTO_UDP, 43);

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

	/*
	 * A client restarted: its statd says so, and its locks go. Client b (127.0.0.3) holds
	 * a lock c (127.0.0.4) wants; SM_NOTIFY from b's address frees it.
	 */
	{
		nfs_fh3 root, file;
		CLIENT *nc;
		char *text;
		size_t len;

		assert_int_equal(it_mnt(&s, IPPROTO_TCP, IT_EXPORT, &root), 0);
		nc = it_nfs_clnt(&s, IPPROTO_TCP);
		it_assert_status(it_create(nc, &root, "f"), NFS3_OK);
		it_assert_status(it_lookup(nc, &root, "f", &file, NULL), NFS3_OK);
		it_clnt_destroy(nc);
		assert_int_equal(nlm_lock("127.0.0.3", "client-b", &file), NLM4_GRANTED);
		assert_int_equal(nlm_lock("127.0.0.4", "client-c", &file), NLM4_DENIED);
		sm_notify_from("127.0.0.3", "client-b", 7);
		assert_true(it_server_log_wait(&s, "SM_NOTIFY from 127.0.0.3: client-b restarted",
					       WAIT_MS));
		assert_int_equal(nlm_lock("127.0.0.4", "client-c", &file), NLM4_GRANTED);
		/*
		 * A stranger's notice naming client c, or c's address, frees nothing: a notice
		 * frees only the host it comes from.
		 */
		sm_notify_from("127.0.0.5", "client-c", 9);
		sm_notify_from("127.0.0.5", "127.0.0.4", 9);
		assert_true(it_server_log_wait(&s, "SM_NOTIFY from 127.0.0.5: 127.0.0.4 restarted",
					       WAIT_MS));
		assert_int_equal(nlm_lock("127.0.0.5", "client-e", &file), NLM4_DENIED);
		/* those granted locks are monitored, durably, with the address they used */
		it_path(path, "%s/nsm/clients", s.is_state);
		text = it_read_file(path, &len);
		assert_non_null(text);
		assert_non_null(strstr(text, "127.0.0.3 =client-b 127.0.0.1\n"));
		assert_non_null(strstr(text, "127.0.0.4 =client-c 127.0.0.1\n"));
		free(text);
		it_fh_free(&root);
		it_fh_free(&file);
	}

	/*
	 * The next start: 2 more, and of this run's two clients the one still holding a lock
	 * at the stop (c) is told; b, freed by its own restart, was dropped at the clean stop.
	 */
	it_server_restart(&s);
	assert_int_equal(state_on_disk(&s), 45);
	sm_stat_is(&s, IPPROTO_TCP, 45);
	if (!statd_wait(&sd, 2)) {
		it_server_dump_log(&s);
		fail_msg("the clients of the last run were not told of the restart");
	}
	/* every notice answered: none to b came */
	assert_true(wait_until(file_gone, &prev, WAIT_MS));
	pthread_mutex_lock(&sd.lock);
	assert_int_equal(sd.got, 2);
	assert_string_equal(sd.mon_name, "127.0.0.1");
	assert_int_equal(sd.state, 45);
	pthread_mutex_unlock(&sd.lock);
	assert_true(wait_until(file_gone, &prev, WAIT_MS));

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
	if (netns_enter_own())
		in_own_netns = true;
	else
		fprintf(stderr, "test_nsm: cannot make a network namespace (%s): needs root; "
			"skipped\n", strerror(errno));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
