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

static struct it_server srv;
static char cfgpath[PATH_MAX];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start(void)
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
		     srv.is_state, MAX_CONNS, MAX_PER_HOST, IT_EXPORT, srv.is_upper);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
	srv.is_config = cfgpath;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_hogs_do_not_lock_out, after_each),
		cmocka_unit_test_teardown(test_unadmitted_costs_no_slot, after_each),
	};

	return cmocka_run_group_tests_name("connection slots", tests, NULL, NULL);
}
