/*
 * Connection slots against hosts that hog them, on a server with small limits
 * (max-connections 8, max-connections-per-host 6): one host opening many connections that
 * each hold one byte of a record mark keeps at most its own bound of them; when other
 * such connections fill every slot a second host still mounts and is served at once (the
 * connection idle longest makes room); a client no rule admits is closed at accept and
 * costs nobody a slot.
 *
 * The hosts are source addresses on loopback (all of 127/8 reaches lo on Linux):
 * 127.0.0.1 the hog, 127.0.0.4 a second hog, 127.0.0.2 the good client, 127.0.0.3 a
 * client no rule admits.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 8
#define MAX_PER_HOST 6
#define HOG_CONNS 20
#define SERVED_WITHIN 2.0        /* seconds for the good client's MNT, NULL and GETATTR */
#define TAKEN_IN_WITHIN_MS 5000  /* for the server to accept and read what hogs send */
#define FLOOD_TIMES 3            /* flood connections per wave: times the limit */
#define FLOOD_WAVES 5
#define FLOOD_PAUSE_MS 200       /* between waves */
#define FLOOD_REPLY_MS 5000      /* for a flood connection's reply or close */
#define ACTIVE_PERIOD_MS 50      /* between the active client's calls */
#define ACTIVE_WARM_CALLS 2      /* before the flood starts */
#define ACTIVE_MIN_CALLS 20
#define ACTIVE_WITHIN_S 8.0      /* for the whole flood and the active client's calls */
#define NOFILE_LOW 128           /* leaves the server 64 descriptors for clients */

static struct it_server srv;
static char cfgpath[PATH_MAX];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The server with these limits; nofile 0 keeps the test's own open files limit. */
static void start_with(int max_conns, int max_per_host, unsigned long nofile)
{
	char text[2 * PATH_MAX + 1024];
	int n;

	it_server_init(&srv, false);
	it_path(cfgpath, "%s/slots.conf", srv.is_dir);
	n = snprintf(text, sizeof(text),
		     "port 0\nmount-port 0\nportmap off\nstate %s\nidle-timeout 300\n"
		     "max-connections %d\nmax-connections-per-host %d\n"
		     "export %s %s 127.0.0.1(rw,insecure) 127.0.0.2(rw,no_root_squash,insecure) "
		     "127.0.0.4(rw,insecure)\n",
		     srv.is_state, max_conns, max_per_host, IT_EXPORT, srv.is_upper);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
	srv.is_config = cfgpath;
	srv.is_nofile = nofile;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start");
}

static void start(void)
{
	start_with(MAX_CONNS, MAX_PER_HOST, 0);
}

static int after_each(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

/* A connection from src to the server that sends the first byte of a record mark. */
static int hog_connect(const char *src)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(srv.is_nfs_port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	uint8_t mark = 0x80;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0)
		fail_msg("bind to %s: %s", src, strerror(errno));
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0)
		fail_msg("connect from %s: %s", src, strerror(errno));
	assert_int_equal(send(fd, &mark, 1, MSG_NOSIGNAL), 1);
	return fd;
}

/* Whether the server has closed fd (without waiting). */
static bool is_closed(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, 0) != 1)
		return false;
	return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) <= 0;
}

struct conns {
	const int *c_fds;
	int c_n;
};

/* Whether the server has taken in every connection: accepted it, read its byte or closed it. */
static bool taken_in(void *arg)
{
	const struct conns *c = arg;

	if (tcp_accept_queue(srv.is_nfs_port) != 0)
		return false;
	for (int i = 0; i < c->c_n; i++)
		if (!is_closed(c->c_fds[i]) && tcp_peer_unread(c->c_fds[i]) != 0)
			return false;
	return true;
}

static void wait_taken_in(const int *fds, int n)
{
	struct conns c = { fds, n };

	if (!wait_until(taken_in, &c, TAKEN_IN_WITHIN_MS))
		fail_msg("the server did not take in %d connections within %d ms", n,
			 TAKEN_IN_WITHIN_MS);
}

/* Whether the server closes fd within ms milliseconds. */
static bool closed_within(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, ms) != 1)
		return false;
	return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) <= 0;
}

static int count_open(const int *fds, int n)
{
	int open = 0;

	for (int i = 0; i < n; i++)
		open += !is_closed(fds[i]);
	return open;
}

/* The good client: MNT, NULL and GETATTR from 127.0.0.2. Returns the seconds it took. */
static double good_client(void)
{
	GETATTR3args a;
	GETATTR3res r;
	nfs_fh3 root = { 0 };
	double t0 = now_s();
	CLIENT *c;

	c = it_clnt_from("127.0.0.2", IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0, false);
	if (it_mnt_over(c, IT_EXPORT, &root) != IT_MNT_OK)
		fail_msg("MNT from 127.0.0.2 failed");
	c = it_clnt_from("127.0.0.2", NFS_PROGRAM, NFS_V3, srv.is_nfs_port, 0, 0, false);
	assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
	memset(&r, 0, sizeof(r));
	a.object = root;
	assert_int_equal(it_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a,
				 (xdrproc_t)xdr_GETATTR3res, &r), RPC_SUCCESS);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_GETATTR3res, &r);
	it_clnt_destroy(c);
	it_fh_free(&root);
	return now_s() - t0;
}

/*
 * A host with many connections each holding a byte of a record mark keeps only its own
 * bound of them; a second such host fills the rest; the good host is still served, fast.
 */
static void test_hogs_do_not_lock_out(void **state)
{
	int hog[HOG_CONNS], hog2[MAX_CONNS - MAX_PER_HOST];
	int open1, open2;
	double took;

	(void)state;
	start();
	for (int i = 0; i < HOG_CONNS; i++)
		hog[i] = hog_connect("127.0.0.1");
	wait_taken_in(hog, HOG_CONNS);
	open1 = count_open(hog, HOG_CONNS);
	fprintf(stderr, "# one host opened %d connections holding a byte each: %d kept (per-host bound %d)\n",
		HOG_CONNS, open1, MAX_PER_HOST);
	if (open1 != MAX_PER_HOST)
		fail_msg("the hog kept %d connections; want max-connections-per-host %d", open1,
			 MAX_PER_HOST);
	/* Its newest ones stay: each new one closed its oldest. */
	for (int i = HOG_CONNS - MAX_PER_HOST; i < HOG_CONNS; i++)
		if (is_closed(hog[i]))
			fail_msg("the hog's connection #%d was closed while older ones stayed", i);
	for (int i = 0; i < MAX_CONNS - MAX_PER_HOST; i++)
		hog2[i] = hog_connect("127.0.0.4");
	wait_taken_in(hog2, MAX_CONNS - MAX_PER_HOST);
	open2 = count_open(hog2, MAX_CONNS - MAX_PER_HOST);
	assert_int_equal(open1 + open2, MAX_CONNS);
	assert_int_equal(count_open(hog, HOG_CONNS), MAX_PER_HOST);

	took = good_client();
	fprintf(stderr, "# every slot held by idle connections: a second host mounted and got NULL and GETATTR in %.0f ms\n",
		took * 1000);
	if (took > SERVED_WITHIN)
		fail_msg("the good client took %.2f s (bound %.1f s)", took, SERVED_WITHIN);
	fprintf(stderr, "# hog connections left: %d + %d of %d slots\n",
		count_open(hog, HOG_CONNS), count_open(hog2, MAX_CONNS - MAX_PER_HOST), MAX_CONNS);
	for (int i = 0; i < HOG_CONNS; i++)
		close(hog[i]);
	for (int i = 0; i < MAX_CONNS - MAX_PER_HOST; i++)
		close(hog2[i]);
}

/* A client no rule admits is closed at accept; the slots stay with those holding them. */
static void test_unadmitted_costs_no_slot(void **state)
{
	int hog[MAX_CONNS], stranger;
	int closed_at_once = 0;

	(void)state;
	start();
	for (int i = 0; i < MAX_PER_HOST; i++)
		hog[i] = hog_connect("127.0.0.1");
	for (int i = MAX_PER_HOST; i < MAX_CONNS; i++)
		hog[i] = hog_connect("127.0.0.4");
	wait_taken_in(hog, MAX_CONNS);
	assert_int_equal(count_open(hog, MAX_CONNS), MAX_CONNS);
	for (int i = 0; i < 10; i++) {
		stranger = hog_connect("127.0.0.3");
		closed_at_once += closed_within(stranger, 1000);
		close(stranger);
	}
	wait_taken_in(hog, MAX_CONNS);
	fprintf(stderr, "# a client no rule admits: %d of 10 connections closed at once; slots held by others: %d of %d\n",
		closed_at_once, count_open(hog, MAX_CONNS), MAX_CONNS);
	assert_int_equal(closed_at_once, 10);
	if (count_open(hog, MAX_CONNS) != MAX_CONNS)
		fail_msg("a client no rule admits made the server close %d connections of others",
			 MAX_CONNS - count_open(hog, MAX_CONNS));
	if (!it_server_log_contains(&srv, "no client rule of any export admits it"))
		fail_msg("the log does not say why 127.0.0.3 was closed");
	for (int i = 0; i < MAX_CONNS; i++)
		close(hog[i]);
}

/* ---- an active client during a connection flood ---- */

struct flood {
	const char *f_src;           /* the flood's source address */
	int f_per_wave;
	int *f_fds;                  /* f_per_wave */
	atomic_bool f_done;
	int f_answered, f_refused;   /* flood calls answered; connections closed unanswered */
	int f_evicted;               /* closed by the server within the wave (answered or not) */
	char f_err[160];             /* set when the flood itself could not run */
};

/* An NFS NULL call with AUTH_NONE, record mark first. */
static size_t null_call(uint8_t *buf, uint32_t xid)
{
	/* After the xid: CALL, RPC version 2, the program, no credential, no verifier. */
	static const uint32_t words[] = { 0, 2, NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, 0, 0, 0, 0 };
	size_t n = 0;

	n = it_put32(buf, n, 0x80000000u | (uint32_t)(4 + sizeof(words)));
	n = it_put32(buf, n, xid);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		n = it_put32(buf, n, words[i]);
	return n;
}

/* A flood connection from f->f_src that sent one call; -1 (f_err set) when it could not. */
static int flood_connect(struct flood *f, uint32_t xid)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(srv.is_nfs_port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint8_t call[64];
	size_t len = null_call(call, xid);

	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	inet_pton(AF_INET, f->f_src, &from.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		snprintf(f->f_err, sizeof(f->f_err), "flood connection from %s: %s", f->f_src,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* Refused by the server at once, the call may not go out: that is its answer. */
	(void)!send(fd, call, len, MSG_NOSIGNAL);
	return fd;
}

/* Whether fd's call was answered (true) or the connection closed first (false). */
static bool flood_answered(struct flood *f, int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t reply[64];

	if (poll(&pfd, 1, FLOOD_REPLY_MS) != 1) {
		snprintf(f->f_err, sizeof(f->f_err), "a flood call got no reply nor close in %d ms",
			 FLOOD_REPLY_MS);
		return false;
	}
	return recv(fd, reply, sizeof(reply), 0) > 0;
}

/*
 * Waves of connections that each make one call: all of a wave connect and send at once,
 * then read their replies, and stay open until the wave ends.
 */
static void *flood_run(void *arg)
{
	const struct timespec pause = { 0, FLOOD_PAUSE_MS * 1000000L };
	struct flood *f = arg;
	uint32_t xid = 1;

	for (int w = 0; w < FLOOD_WAVES && !f->f_err[0]; w++) {
		int made = 0;

		while (made < f->f_per_wave && !f->f_err[0]) {
			f->f_fds[made] = flood_connect(f, xid++);
			made += f->f_fds[made] >= 0;
		}
		for (int i = 0; i < made && !f->f_err[0]; i++) {
			bool r = flood_answered(f, f->f_fds[i]);

			f->f_answered += r;
			f->f_refused += !r;
		}
		/* The server closes what it evicts before it reads the next call: all seen now. */
		for (int i = 0; i < made; i++) {
			f->f_evicted += is_closed(f->f_fds[i]);
			close(f->f_fds[i]);
		}
		/* Waves apart, so the flood lasts over many of the active client's calls. */
		nanosleep(&pause, NULL);
	}
	atomic_store(&f->f_done, true);
	return NULL;
}

/* One GETATTR of root on c; false (why filled in) unless it was answered NFS3_OK. */
static bool active_call(CLIENT *c, const nfs_fh3 *root, char *why, size_t whylen)
{
	GETATTR3args a = { .object = *root };
	GETATTR3res r;
	enum clnt_stat cs;

	memset(&r, 0, sizeof(r));
	cs = it_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a,
		     (xdrproc_t)xdr_GETATTR3res, &r);
	if (cs != RPC_SUCCESS) {
		snprintf(why, whylen, "%s", clnt_sperrno(cs));
		return false;
	}
	if (r.status != NFS3_OK) {
		snprintf(why, whylen, "%s", it_nfsstat_name(r.status));
		return false;
	}
	it_free((xdrproc_t)xdr_GETATTR3res, &r);
	return true;
}

/*
 * The active client from 127.0.0.2: GETATTR of the root every ACTIVE_PERIOD_MS on one
 * connection. Its first ACTIVE_WARM_CALLS (a mount's first calls) come before the flood
 * starts: a connection's first call looks like any flood connection's one call, the
 * server can tell a client at work only from its second on. Then it calls until the
 * flood is over (and at least ACTIVE_MIN_CALLS times). Returns the calls answered;
 * *failed is the first that was not (0: none).
 */
static int active_client(struct flood *f, pthread_t *flood, const nfs_fh3 *root, int *failed,
			 char *why, size_t whylen)
{
	const struct timespec period = { 0, ACTIVE_PERIOD_MS * 1000000L };
	double end = now_s() + ACTIVE_WITHIN_S;
	CLIENT *c = it_clnt_from("127.0.0.2", NFS_PROGRAM, NFS_V3, srv.is_nfs_port, 0, 0, false);
	int ok = 0;

	*failed = 0;
	for (; ok < ACTIVE_WARM_CALLS; ok++)
		if (!active_call(c, root, why, whylen))
			fail_msg("the active client's call #%d failed before the flood: %s", ok + 1,
				 why);
	assert_int_equal(pthread_create(flood, NULL, flood_run, f), 0);
	while ((!atomic_load(&f->f_done) || ok < ACTIVE_MIN_CALLS) && now_s() < end) {
		/* The pace is the point: a client calling now and then, idle in between. */
		nanosleep(&period, NULL);
		if (!active_call(c, root, why, whylen)) {
			*failed = ok + 1;
			break;
		}
		ok++;
	}
	it_clnt_destroy(c);
	return ok;
}

/*
 * Waves of FLOOD_TIMES x limit connections from src, each making one call, while a client
 * calls every 50 ms on one connection: every one of its calls must be answered there.
 */
static void flood_against_active(const char *src, int limit, const char *what)
{
	struct flood f = { .f_src = src, .f_per_wave = FLOOD_TIMES * limit };
	char why[128] = "";
	nfs_fh3 root = { 0 };
	pthread_t th;
	int ok, failed;

	f.f_fds = calloc((size_t)f.f_per_wave, sizeof(*f.f_fds));
	assert_non_null(f.f_fds);
	if (it_mnt_over(it_clnt_from("127.0.0.2", IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0,
				     false), IT_EXPORT, &root) != IT_MNT_OK)
		fail_msg("MNT from 127.0.0.2 failed");
	ok = active_client(&f, &th, &root, &failed, why, sizeof(why));
	pthread_join(th, NULL);
	fprintf(stderr, "# %s: %d waves of %d connections from %s, one call each (%d answered, %d closed unanswered; %d closed by the end of their wave); the client calling every %d ms: %d calls answered%s%s\n",
		what, FLOOD_WAVES, f.f_per_wave, src, f.f_answered, f.f_refused, f.f_evicted,
		ACTIVE_PERIOD_MS, ok, failed ? ", then failed: " : "", why);
	free(f.f_fds);
	it_fh_free(&root);
	if (f.f_err[0])
		fail_msg("%s", f.f_err);
	if (failed)
		fail_msg("%s: the active client's call #%d failed (%s) during the flood: its connection was closed to make room",
			 what, failed, why);
	/* The flood did reach the limit: some of its connections were closed for others. */
	if (f.f_evicted == 0)
		fail_msg("%s: no flood connection was closed; the limit was never reached", what);
	if (ok < ACTIVE_MIN_CALLS)
		fail_msg("%s: the active client made only %d calls", what, ok);
}

static void test_active_kept_max_conns(void **state)
{
	(void)state;
	start_with(MAX_CONNS, 1024, 0);
	flood_against_active("127.0.0.4", MAX_CONNS, "max-connections 8");
}

static void test_active_kept_per_host(void **state)
{
	(void)state;
	start_with(1024, MAX_PER_HOST, 0);
	flood_against_active("127.0.0.2", MAX_PER_HOST, "max-connections-per-host 6");
}

static void test_active_kept_nofile(void **state)
{
	(void)state;
	start_with(1024, 1024, NOFILE_LOW);
	flood_against_active("127.0.0.4", NOFILE_LOW, "open files limit 128");
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_hogs_do_not_lock_out, after_each),
		cmocka_unit_test_teardown(test_unadmitted_costs_no_slot, after_each),
		cmocka_unit_test_teardown(test_active_kept_max_conns, after_each),
		cmocka_unit_test_teardown(test_active_kept_per_host, after_each),
		cmocka_unit_test_teardown(test_active_kept_nofile, after_each),
	};

	return cmocka_run_group_tests_name("connection slots", tests, NULL, NULL);
}
