/*
 * NSM (src/nsm/): the state number across opens, the monitored clients' files (crashes
 * between writes, corrupt and over-long files, the bound, clients giving their places
 * back), the program's handlers called
 * directly, and SM_NOTIFY to the last run's clients through the RPC client to a fake
 * statd behind a fake portmapper.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <rpc/rpc.h>

#include "../wait.h"
#include "fake_rpc.h"
#include "log.h"
#include "nsm.h"
#include "rpc.h"
#include "rpc_client.h"
#include "sm_inter.h"
#include "../netns.h"
#include "../rmtree.h"

/*
 * The reserved ports (below 1024) are few and shared by everything on the machine, and
 * other test suites may hold them all in TIME_WAIT: the test runs in a network namespace of
 * its own when it can (root), where they are all free.
 */
static bool own_netns;


struct fixture {
	char dir[64];
	char nsmdir[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_nsm.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->nsmdir, sizeof(f->nsmdir), "%s/nsm", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(rm_tree(f->dir), 0);
	free(f);
	return 0;
}

static void path_of(const struct fixture *f, const char *name, char *out)
{
	snprintf(out, 160, "%s/%s", f->nsmdir, name);
}

static char *slurp(const struct fixture *f, const char *name)
{
	char path[160];
	FILE *fp;
	char *buf;
	long len;

	path_of(f, name, path);
	fp = fopen(path, "r");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	buf = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
	fclose(fp);
	return buf;
}

static void spit(const struct fixture *f, const char *name, const char *text, size_t len)
{
	char path[160];
	FILE *fp;

	path_of(f, name, path);
	fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, len, fp), len);
	fclose(fp);
}

static bool exists(const struct fixture *f, const char *name)
{
	char path[160];
	struct stat st;

	path_of(f, name, path);
	return stat(path, &st) == 0;
}

static struct nsm *open_nsm(const struct fixture *f, struct rpc_client *rc)
{
	struct nsm *n = NULL;
	char err[512] = "";

	if (nsm_open(f->dir, rc, &n, err, sizeof(err)) != 0)
		fail_msg("nsm_open: %s", err);
	return n;
}

static struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(1000) };

	assert_int_equal(inet_pton(AF_INET, a, &sin.sin_addr), 1);
	return sin;
}

static int monitor(struct nsm *n, const char *client, const char *name, const char *local)
{
	struct sockaddr_in c = v4(client), l = v4(local);

	return nsm_monitor(n, (struct sockaddr *)&c, sizeof(c), name, (struct sockaddr *)&l, sizeof(l));
}

/* Odd while running, 2 more at each start, on disk before nsm_open returns. */
static void test_state_numbers(void **state)
{
	struct fixture *f = *state;
	uint32_t last = 0;

	for (int i = 0; i < 4; i++) {
		struct nsm *n = open_nsm(f, NULL);
		char *text = slurp(f, "state");
		char want[16];

		assert_true(nsm_state(n) & 1);
		if (i > 0)
			assert_int_equal(nsm_state(n), last + 2);
		last = nsm_state(n);
		snprintf(want, sizeof(want), "%u\n", last);
		assert_string_equal(text, want);
		free(text);
		nsm_close(n);
	}
	/* an even number (not ours) becomes the next odd one */
	spit(f, "state", "10\n", 3);
	{
		struct nsm *n = open_nsm(f, NULL);

		assert_int_equal(nsm_state(n), 11);
		nsm_close(n);
	}
	/* wrapping stays odd */
	spit(f, "state", "4294967295\n", 11);
	{
		struct nsm *n = open_nsm(f, NULL);

		assert_int_equal(nsm_state(n), 1);
		nsm_close(n);
	}
}

/* A corrupt state file: reported, and the new number (odd) comes from the clock. */
static void test_state_corrupt(void **state)
{
	struct fixture *f = *state;
	static const char *bad[] = { "", "x\n", "12", "99999999999\n", "-3\n", "7\n7\n" };
	struct nsm *n = open_nsm(f, NULL);

	nsm_close(n);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		spit(f, "state", bad[i], strlen(bad[i]));
		n = open_nsm(f, NULL);
		assert_true(nsm_state(n) & 1);
		assert_true(nsm_state(n) > 1000); /* from the clock */
		nsm_close(n);
	}
}

/* A kill between writing the temporary file and renaming it: the old file stands. */
static void test_killed_before_rename(void **state)
{
	struct fixture *f = *state;
	struct nsm *n = open_nsm(f, NULL);
	uint32_t s = nsm_state(n);

	assert_int_equal(monitor(n, "10.0.0.1", "a", "10.0.0.100"), 0);
	nsm_close(n);
	n = open_nsm(f, NULL); /* moves the client to clients.previous */
	s = nsm_state(n);
	nsm_close(n);
	spit(f, "state.tmp", "12", 2);
	spit(f, "clients.previous.tmp", "unionnfsd-nsm-clients 1\n10.0.0.", 32);
	n = open_nsm(f, NULL);
	assert_int_equal(nsm_state(n), s + 2);
	assert_true(nsm_previous_clients(n));
	assert_false(exists(f, "state.tmp"));
	assert_false(exists(f, "clients.previous.tmp"));
	nsm_close(n);
}

/* Clients of one run are the next run's previous clients, until told; names escaped. */
static void test_clients_persist(void **state)
{
	struct fixture *f = *state;
	struct nsm *n = open_nsm(f, NULL);
	struct sockaddr_in6 mapped = { .sin6_family = AF_INET6 };
	struct sockaddr_in l = v4("192.168.1.1");
	char *text;

	assert_false(nsm_previous_clients(n));
	assert_false(exists(f, "clients"));
	assert_int_equal(monitor(n, "10.0.0.1", "host-a.example", "192.168.1.1"), 0);
	assert_int_equal(monitor(n, "10.0.0.1", "host-a.example", "192.168.1.1"), 0); /* listed */
	assert_int_equal(monitor(n, "10.0.0.2", "we ird%\n=", "192.168.1.1"), 0);
	inet_pton(AF_INET6, "::ffff:10.0.0.3", &mapped.sin6_addr);
	assert_int_equal(nsm_monitor(n, (struct sockaddr *)&mapped, sizeof(mapped), "c",
				     (struct sockaddr *)&l, sizeof(l)), 0);
	text = slurp(f, "clients");
	assert_string_equal(text, "unionnfsd-nsm-clients 1\n"
				  "10.0.0.1 =host-a.example 192.168.1.1\n"
				  "10.0.0.2 =we%20ird%25%0A%3D 192.168.1.1\n"
				  "10.0.0.3 =c 192.168.1.1\n");
	free(text);
	/* not an address */
	assert_int_equal(nsm_monitor(n, (struct sockaddr *)&l, 2, "x", (struct sockaddr *)&l,
				     sizeof(l)), -EINVAL);
	nsm_close(n);

	n = open_nsm(f, NULL);
	assert_true(nsm_previous_clients(n));
	assert_false(exists(f, "clients"));
	text = slurp(f, "clients.previous");
	assert_non_null(strstr(text, "10.0.0.2 =we%20ird%25%0A%3D 192.168.1.1\n"));
	free(text);
	/* this run's client joins the untold ones at the next start */
	assert_int_equal(monitor(n, "10.0.0.9", "nine", "192.168.1.2"), 0);
	nsm_close(n);
	n = open_nsm(f, NULL);
	text = slurp(f, "clients.previous");
	assert_non_null(strstr(text, "10.0.0.1 =host-a.example 192.168.1.1\n"));
	assert_non_null(strstr(text, "10.0.0.3 =c 192.168.1.1\n"));
	assert_non_null(strstr(text, "10.0.0.9 =nine 192.168.1.2\n"));
	free(text);
	nsm_close(n);
}

/* An append cut short by a crash: the complete lines count, the torn one does not. */
static void test_torn_append(void **state)
{
	struct fixture *f = *state;
	static const char text[] = "unionnfsd-nsm-clients 1\n10.0.0.1 =a 10.0.0.100\n10.0.0.2 =b 10.0";
	struct nsm *n = open_nsm(f, NULL);
	char *prev;

	nsm_close(n);
	spit(f, "clients", text, strlen(text));
	n = open_nsm(f, NULL);
	assert_true(nsm_previous_clients(n));
	prev = slurp(f, "clients.previous");
	assert_string_equal(prev, "unionnfsd-nsm-clients 1\n10.0.0.1 =a 10.0.0.100\n");
	free(prev);
	nsm_close(n);
}

/* Files we cannot read as ours are reported and treated as empty, never a crash. */
static void test_corrupt_files(void **state)
{
	struct fixture *f = *state;
	static const char *bad[] = {
		"garbage\n",
		"unionnfsd-nsm-clients 1\nnot an address line\n",
		"unionnfsd-nsm-clients 1\n10.0.0.1 a 10.0.0.2\n",         /* no '=' */
		"unionnfsd-nsm-clients 1\n10.0.0.1 =a%zz 10.0.0.2\n",      /* bad escape */
		"unionnfsd-nsm-clients 1\n10.0.0.1 =a%00 10.0.0.2\n",      /* NUL in the name */
		"unionnfsd-nsm-clients 1\n10.0.0.1 =a 10.0.0.2 extra\n",
		"unionnfsd-nsm-clients 1\n10.0.0.1 =a\t 10.0.0.2\n",
		"unionnfsd-nsm-clients 2\n10.0.0.1 =a 10.0.0.2\n",
	};
	struct nsm *n = open_nsm(f, NULL);
	char path[160], *big;
	size_t bigsz = 8u << 20;

	nsm_close(n);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *names[] = { "clients", "clients.previous" };

		for (int k = 0; k < 2; k++) {
			spit(f, names[k], bad[i], strlen(bad[i]));
			n = open_nsm(f, NULL);
			assert_false(nsm_previous_clients(n));
			nsm_close(n);
			path_of(f, names[k], path);
			unlink(path);
		}
	}
	/* a file with a NUL byte */
	spit(f, "clients.previous", "unionnfsd-nsm-clients 1\n10.0.0.1 =a\0 10.0.0.2\n", 45);
	n = open_nsm(f, NULL);
	assert_false(nsm_previous_clients(n));
	nsm_close(n);
	/* over-long: more than any list we write */
	big = malloc(bigsz);
	assert_non_null(big);
	memset(big, 'a', bigsz);
	memcpy(big, "unionnfsd-nsm-clients 1\n", 24);
	spit(f, "clients.previous", big, bigsz);
	free(big);
	n = open_nsm(f, NULL);
	assert_false(nsm_previous_clients(n));
	nsm_close(n);
	/* a name longer than NSM_MAX_NAME */
	{
		char *line = malloc(NSM_MAX_NAME + 128);
		int o = sprintf(line, "unionnfsd-nsm-clients 1\n10.0.0.1 =");

		memset(line + o, 'n', NSM_MAX_NAME + 1);
		strcpy(line + o + NSM_MAX_NAME + 1, " 10.0.0.2\n");
		spit(f, "clients.previous", line, strlen(line));
		free(line);
		n = open_nsm(f, NULL);
		assert_false(nsm_previous_clients(n));
		nsm_close(n);
	}
}

/* NSM_MAX_CLIENTS are listed; the next new one is refused with -ENOSPC, listed ones pass. */
static void test_client_bound(void **state)
{
	struct fixture *f = *state;
	struct nsm *n = open_nsm(f, NULL);
	char addr[32];

	for (int i = 0; i < NSM_MAX_CLIENTS; i++) {
		snprintf(addr, sizeof(addr), "10.1.%d.%d", i / 256, i % 256);
		assert_int_equal(monitor(n, addr, "c", "10.0.0.100"), 0);
	}
	assert_int_equal(monitor(n, "10.9.9.9", "c", "10.0.0.100"), -ENOSPC);
	assert_int_equal(monitor(n, "10.1.0.5", "c", "10.0.0.100"), 0);
	nsm_close(n);
	/* all of them are the next run's previous clients */
	n = open_nsm(f, NULL);
	assert_true(nsm_previous_clients(n));
	nsm_close(n);
	/* a file listing one more than the bound is not ours */
	{
		size_t cap = 64 + (NSM_MAX_CLIENTS + 1) * 40, o;
		char *text = malloc(cap);

		o = (size_t)sprintf(text, "unionnfsd-nsm-clients 1\n");
		for (int i = 0; i <= NSM_MAX_CLIENTS; i++)
			o += (size_t)sprintf(text + o, "10.2.%d.%d =c 10.0.0.100\n", i / 256, i % 256);
		spit(f, "clients.previous", text, o);
		free(text);
		n = open_nsm(f, NULL);
		assert_false(nsm_previous_clients(n));
		nsm_close(n);
	}
}

static void unmonitor(struct nsm *n, const char *client)
{
	struct sockaddr_in c = v4(client);

	nsm_unmonitor(n, (struct sockaddr *)&c, sizeof(c));
}

static size_t lines_of(const struct fixture *f, const char *name)
{
	char *text = slurp(f, name);
	size_t lines = 0;

	for (char *p = text; p != NULL && *p; p++)
		lines += *p == '\n';
	free(text);
	return lines;
}

/*
 * Clients that hold nothing give their place back: far more than the bound come and go, the
 * file stays short and keeps every client still holding something, and a clean close
 * leaves only those (none: no file, so no grace at the next start).
 */
static void test_clients_come_and_go(void **state)
{
	struct fixture *f = *state;
	struct nsm *n = open_nsm(f, NULL);
	char addr[32], *text;

	assert_int_equal(monitor(n, "10.7.0.1", "keeper", "10.0.0.100"), 0);
	for (int i = 0; i < 3 * NSM_MAX_CLIENTS; i++) {
		snprintf(addr, sizeof(addr), "10.1.%d.%d", i / 256, i % 256);
		assert_int_equal(monitor(n, addr, "c", "10.0.0.100"), 0);
		unmonitor(n, addr);
	}
	/* the header, the keeper, fewer than NSM_COMPACT_IDLE idle ones, one more at most */
	assert_true(lines_of(f, "clients") <= 3 + 64);
	text = slurp(f, "clients");
	assert_non_null(strstr(text, "10.7.0.1 =keeper"));
	free(text);
	/* an idle client that locks again is busy again, with no new line */
	assert_int_equal(monitor(n, addr, "c", "10.0.0.100"), 0);
	nsm_close(n);
	n = open_nsm(f, NULL);
	assert_true(nsm_previous_clients(n));
	assert_int_equal(lines_of(f, "clients.previous"), 3);
	unmonitor(n, "10.7.0.1");
	nsm_close(n);
	/* a run whose only client released everything leaves no clients file */
	n = open_nsm(f, NULL);
	assert_int_equal(monitor(n, "10.7.0.1", "keeper", "10.0.0.100"), 0);
	unmonitor(n, "10.7.0.1");
	nsm_close(n);
	assert_false(exists(f, "clients"));
}

/* ---- the program's handlers ---- */

struct hook_seen {
	int calls;
	char mon_name[64];
	char from[64];
};

static void reboot_hook(void *arg, const char *mon_name, const struct sockaddr *from, socklen_t len)
{
	struct hook_seen *h = arg;

	assert_int_equal(len, sizeof(struct sockaddr_in));
	h->calls++;
	snprintf(h->mon_name, sizeof(h->mon_name), "%s", mon_name);
	inet_ntop(AF_INET, &((const struct sockaddr_in *)from)->sin_addr, h->from, sizeof(h->from));
}

static enum rpc_outcome call_proc(struct nsm *n, uint32_t proc, void *args, void *res)
{
	const struct rpc_proc *p = rpc_program_proc(&nsm_program, SM_VERS, proc);
	struct sockaddr_in peer = v4("10.3.3.3");
	struct rpc_req rq;
	enum rpc_outcome out;

	assert_non_null(p);
	memset(&rq, 0, sizeof(rq));
	rq.rq_prog = SM_PROG;
	rq.rq_vers = SM_VERS;
	rq.rq_proc = proc;
	rq.rq_ctx = n;
	memcpy(&rq.rq_peer, &peer, sizeof(peer));
	rq.rq_peerlen = sizeof(peer);
	out = p->rp_fn(&rq, args, res);
	rpc_alloc_free(&rq);
	return out;
}

static void test_handlers(void **state)
{
	struct fixture *f = *state;
	struct nsm *n = open_nsm(f, NULL);
	struct hook_seen h = { 0 };
	sm_stat_res sr;
	sm_stat st;
	sm_name name = { .mon_name = "x" };
	mon m = { .mon_id.mon_name = "peer", .mon_id.my_id.my_name = "localhost" };
	stat_chge chg = { .mon_name = "client-7", .state = 5 };

	assert_int_equal(call_proc(n, SM_NULL, NULL, NULL), RPC_OUT_REPLY);
	memset(&sr, 0, sizeof(sr));
	assert_int_equal(call_proc(n, SM_STAT, &name, &sr), RPC_OUT_REPLY);
	assert_int_equal(sr.res_stat, STAT_SUCC);
	assert_int_equal((uint32_t)sr.state, nsm_state(n));
	memset(&sr, 0, sizeof(sr));
	assert_int_equal(call_proc(n, SM_MON, &m, &sr), RPC_OUT_REPLY);
	assert_int_equal(sr.res_stat, STAT_FAIL);
	assert_int_equal((uint32_t)sr.state, nsm_state(n));
	assert_int_equal(nsm_program.rg_status(SM_VERS, SM_MON, &sr), RPC_STATUS_ERROR);
	st.state = 0;
	assert_int_equal(call_proc(n, SM_UNMON, &m.mon_id, &st), RPC_OUT_REPLY);
	assert_int_equal((uint32_t)st.state, nsm_state(n));
	st.state = 0;
	assert_int_equal(call_proc(n, SM_UNMON_ALL, &m.mon_id.my_id, &st), RPC_OUT_REPLY);
	assert_int_equal((uint32_t)st.state, nsm_state(n));
	assert_int_equal(call_proc(n, SM_SIMU_CRASH, NULL, NULL), RPC_OUT_REPLY);
	/* no hook yet: nothing to call */
	assert_int_equal(call_proc(n, SM_NOTIFY, &chg, NULL), RPC_OUT_REPLY);
	nsm_set_reboot_hook(n, reboot_hook, &h);
	assert_int_equal(call_proc(n, SM_NOTIFY, &chg, NULL), RPC_OUT_REPLY);
	assert_int_equal(h.calls, 1);
	assert_string_equal(h.mon_name, "client-7");
	assert_string_equal(h.from, "10.3.3.3");
	nsm_close(n);
}

/* ---- SM_NOTIFY to the last run's clients ---- */

struct statd {
	pthread_mutex_t lock;
	int drop;                /* datagrams still to drop */
	int got;
	char mon_name[64];
	uint32_t state;
	bool root_port_ok;       /* every call came from a reserved port (as root) */
	const char *silent_mon;  /* SM_NOTIFY naming this mon_name gets no answer */
};

static size_t statd_handler(void *arg, const struct fake_call *c, uint8_t *out)
{
	struct statd *s = arg;
	stat_chge chg = { 0 };
	XDR x;
	size_t len = 0;

	if (c->prog != SM_PROG || c->vers != SM_VERS || c->proc != SM_NOTIFY)
		return fake_reply(out, c->xid, 1, NULL, 0);
	xdrmem_create(&x, (char *)c->args, (u_int)c->argslen, XDR_DECODE);
	pthread_mutex_lock(&s->lock);
	if (xdr_stat_chge(&x, &chg)) {
		if (s->silent_mon && strcmp(chg.mon_name, s->silent_mon) == 0) {
			/* no answer */
		} else if (s->drop > 0) {
			s->drop--;
		} else {
			s->got++;
			snprintf(s->mon_name, sizeof(s->mon_name), "%s", chg.mon_name);
			s->state = (uint32_t)chg.state;
			if (geteuid() == 0 && own_netns && c->peer_port >= 1024)
				s->root_port_ok = false;
			len = fake_reply(out, c->xid, 0, NULL, 0);
		}
	}
	pthread_mutex_unlock(&s->lock);
	xdr_free((xdrproc_t)xdr_stat_chge, (char *)&chg);
	xdr_destroy(&x);
	return len;
}

static bool previous_gone(void *arg)
{
	return !exists(arg, "clients.previous");
}

static void test_notify_previous(void **state)
{
	struct fixture *f = *state;
	struct statd sd = { .lock = PTHREAD_MUTEX_INITIALIZER, .drop = 1, .root_port_ok = true };
	struct fake_rpc *srv = fake_rpc_start("127.0.0.1", 0, false, statd_handler, &sd);
	struct fake_pmap pm = { 0 };
	struct rpc_client *rc;
	struct nsm *n;
	char err[256];

	assert_non_null(srv);
	assert_int_equal(fake_pmap_start(&pm, "127.0.0.1", 0), 0);
	fake_pmap_set(&pm, SM_PROG, SM_VERS, IPPROTO_UDP, srv->fr_udp_port);
	assert_int_equal(rpc_client_start(&rc, err, sizeof(err)), 0);
	rpc_client_set_pmap_port(rc, pm.srv->fr_udp_port);

	n = open_nsm(f, rc);
	assert_int_equal(monitor(n, "127.0.0.1", "me", "127.0.0.2"), 0);
	nsm_close(n);
	n = open_nsm(f, rc);
	assert_true(nsm_previous_clients(n));
	nsm_notify_previous(n);
	/* the first datagram is lost: the next try, a second later, gets through */
	assert_true(wait_until(previous_gone, f, 10000));
	assert_false(nsm_previous_clients(n));
	pthread_mutex_lock(&sd.lock);
	assert_int_equal(sd.got, 1);
	assert_string_equal(sd.mon_name, "127.0.0.2");
	assert_int_equal(sd.state, nsm_state(n));
	assert_true(sd.root_port_ok);
	pthread_mutex_unlock(&sd.lock);
	nsm_close(n);
	/* told: the next start has nobody to tell */
	n = open_nsm(f, rc);
	assert_false(nsm_previous_clients(n));
	nsm_close(n);
	rpc_client_stop(rc);
	fake_rpc_stop(srv);
	fake_pmap_stop(&pm);
}

/* Until clients.previous holds exactly `want`. */
struct file_is {
	const struct fixture *f;
	const char *want;
};

static bool previous_is(void *arg)
{
	struct file_is *fi = arg;
	char *text = slurp(fi->f, "clients.previous");
	bool same = text && strcmp(text, fi->want) == 0;

	free(text);
	return same;
}

/*
 * Many clients (several batches of rewrites) and one whose statd never answers: the file
 * keeps only that one once the others answered (and its call left the fast schedule).
 */
static void test_notify_many(void **state)
{
	struct fixture *f = *state;
	enum { N = 300 };
	struct statd sd = { .lock = PTHREAD_MUTEX_INITIALIZER, .silent_mon = "127.0.0.9" };
	struct fake_rpc *srv = fake_rpc_start("0.0.0.0", 0, false, statd_handler, &sd);
	struct fake_pmap pm = { 0 };
	struct file_is fi = { f, "unionnfsd-nsm-clients 1\n127.0.9.9 =silent 127.0.0.9\n" };
	struct rpc_client *rc;
	struct nsm *n;
	char err[256], addr[32];

	assert_non_null(srv);
	assert_int_equal(fake_pmap_start(&pm, "0.0.0.0", 0), 0);
	fake_pmap_set(&pm, SM_PROG, SM_VERS, IPPROTO_UDP, srv->fr_udp_port);
	assert_int_equal(rpc_client_start(&rc, err, sizeof(err)), 0);
	rpc_client_set_pmap_port(rc, pm.srv->fr_udp_port);
	n = open_nsm(f, rc);
	for (int i = 0; i < N; i++) {
		snprintf(addr, sizeof(addr), "127.0.%d.%d", 1 + i / 200, 1 + i % 200);
		assert_int_equal(monitor(n, addr, "c", "127.0.0.1"), 0);
	}
	assert_int_equal(monitor(n, "127.0.9.9", "silent", "127.0.0.9"), 0);
	nsm_close(n);
	n = open_nsm(f, rc);
	/* the silent client's fast tries end sooner; the schedule's shape is the same */
	nsm_set_notify_interval(n, 50);
	nsm_notify_previous(n);
	assert_true(wait_until(previous_is, &fi, 20000));
	pthread_mutex_lock(&sd.lock);
	assert_int_equal(sd.got, N);
	assert_string_equal(sd.mon_name, "127.0.0.1");
	pthread_mutex_unlock(&sd.lock);
	assert_true(nsm_previous_clients(n));
	nsm_close(n);
	rpc_client_stop(rc);
	fake_rpc_stop(srv);
	fake_pmap_stop(&pm);
}

/* A client that never answers stays listed; closing with the call in flight is safe. */
static void test_notify_unreachable(void **state)
{
	struct fixture *f = *state;
	struct statd sd = { .lock = PTHREAD_MUTEX_INITIALIZER, .drop = 1 << 30 };
	struct fake_rpc *srv = fake_rpc_start("127.0.0.1", 0, false, statd_handler, &sd);
	struct fake_pmap pm = { 0 };
	struct rpc_client *rc;
	struct nsm *n;
	char err[256];

	assert_non_null(srv);
	assert_int_equal(fake_pmap_start(&pm, "127.0.0.1", 0), 0);
	fake_pmap_set(&pm, SM_PROG, SM_VERS, IPPROTO_UDP, srv->fr_udp_port);
	assert_int_equal(rpc_client_start(&rc, err, sizeof(err)), 0);
	rpc_client_set_pmap_port(rc, pm.srv->fr_udp_port);
	n = open_nsm(f, rc);
	assert_int_equal(monitor(n, "127.0.0.1", "me", "127.0.0.2"), 0);
	nsm_close(n);
	n = open_nsm(f, rc);
	nsm_notify_previous(n);
	assert_true(wait_until(previous_gone, f, 300) == false);
	nsm_close(n);        /* the call is still in flight: the struct waits for it */
	rpc_client_stop(rc); /* cancels it, and the struct goes */
	assert_true(exists(f, "clients.previous"));
	n = open_nsm(f, NULL);
	assert_true(nsm_previous_clients(n));
	nsm_close(n);
	fake_rpc_stop(srv);
	fake_pmap_stop(&pm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_state_numbers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed_before_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clients_persist, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clients_come_and_go, setup, teardown),
		cmocka_unit_test_setup_teardown(test_handlers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notify_previous, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notify_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notify_unreachable, setup, teardown),
	};

	log_init(true, "test_nsm");
	own_netns = netns_enter_own();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
