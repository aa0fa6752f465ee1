/*
 * The duplicate request cache against the real server: REMOVE, CREATE and RENAME sent
 * twice with the same xid, as a client does when a reply is lost (UDP: from the same
 * port; TCP: over a new connection, as after a reconnect), get the same reply twice
 * instead of a spurious NOENT or EXIST; the same call under a new xid runs again; and
 * idempotent calls are not cached.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DRC_BUF 4096

static nfs_fh3 root;
static uint32_t next_xid = 0x5d0c0000u;

static int setup(void **state)
{
	(void)state;
	if (it_group_setup_udp(true) != 0)
		return -1;
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK) {
		fprintf(stderr, "MNT %s failed\n", IT_EXPORT);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	it_fh_free(&root);
	return it_group_teardown(state);
}

/* An NFSv3 call record, AUTH_SYS uid (gid the same, no groups), arguments encoded by xargs. */
static size_t build_call_as(uint8_t *b, size_t cap, uint32_t xid, uint32_t proc, uint32_t uid,
			    xdrproc_t xargs, void *args)
{
	size_t o = 0;
	XDR x;

	o = it_put32(b, o, xid);
	o = it_put32(b, o, 0);          /* CALL */
	o = it_put32(b, o, 2);
	o = it_put32(b, o, NFS_PROGRAM);
	o = it_put32(b, o, NFS_V3);
	o = it_put32(b, o, proc);
	o = it_put32(b, o, 1);          /* AUTH_SYS: stamp, "drc", uid, gid, no groups */
	o = it_put32(b, o, 24);
	o = it_put32(b, o, 0);
	o = it_put32(b, o, 3);
	memcpy(b + o, "drc\0", 4);
	o += 4;
	o = it_put32(b, o, uid);
	o = it_put32(b, o, uid);
	o = it_put32(b, o, 0);
	o = it_put32(b, o, 0);          /* verifier AUTH_NONE */
	o = it_put32(b, o, 0);
	xdrmem_create(&x, (char *)b + o, (u_int)(cap - o), XDR_ENCODE);
	if (!xargs(&x, args))
		fail_msg("cannot encode the arguments of procedure %u", proc);
	o += xdr_getpos(&x);
	xdr_destroy(&x);
	return o;
}

/* The same, as root. */
static size_t build_call(uint8_t *b, size_t cap, uint32_t xid, uint32_t proc, xdrproc_t xargs,
			 void *args)
{
	return build_call_as(b, cap, xid, proc, 0, xargs, args);
}

/* The nfsstat3 of an accepted, successful reply. */
static int reply_status(const uint8_t *r, size_t len, uint32_t xid)
{
	assert_true(len >= 28);
	assert_int_equal(it_get32(r, 0), xid);
	assert_int_equal(it_get32(r, 4), 1);   /* REPLY */
	assert_int_equal(it_get32(r, 8), 0);   /* MSG_ACCEPTED */
	assert_int_equal(it_get32(r, 20), 0);  /* SUCCESS */
	return (int)it_get32(r, 24);
}

/* --- UDP: one socket, so the retransmission leaves from the same port --- */

static int udp_sock(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static size_t udp_exchange(int fd, const uint8_t *msg, size_t len, uint8_t *reply)
{
	ssize_t n;

	assert_int_equal(send(fd, msg, len, 0), (ssize_t)len);
	n = recv(fd, reply, DRC_BUF, 0);
	if (n <= 0)
		fail_msg("no UDP reply within %d s: %s", IT_CALL_TIMEOUT,
			 n < 0 ? strerror(errno) : "empty datagram");
	return (size_t)n;
}

/* --- TCP: a connection per call, so the retransmission comes from a new port --- */

static int tcp_sock(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void recv_all(int fd, uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = recv(fd, buf, len, 0);

		if (n <= 0)
			fail_msg("TCP reply cut short: %s", n < 0 ? strerror(errno) : "connection closed");
		buf += n;
		len -= (size_t)n;
	}
}

static size_t tcp_exchange(const uint8_t *msg, size_t len, uint8_t *reply)
{
	uint8_t wire[DRC_BUF + 4];
	size_t have = 0;
	int fd = tcp_sock();

	it_put32(wire, 0, 0x80000000u | (uint32_t)len);
	memcpy(wire + 4, msg, len);
	assert_int_equal(send(fd, wire, len + 4, MSG_NOSIGNAL), (ssize_t)(len + 4));
	for (;;) {
		uint8_t hdr[4];
		uint32_t mark, n;

		recv_all(fd, hdr, 4);
		mark = it_get32(hdr, 0);
		n = mark & 0x7fffffffu;
		assert_true(have + n <= DRC_BUF);
		recv_all(fd, reply + have, n);
		have += n;
		if (mark & 0x80000000u)
			break;
	}
	close(fd);
	return have;
}

static size_t exchange(int proto, int udp_fd, const uint8_t *msg, size_t len, uint8_t *reply)
{
	return proto == IPPROTO_UDP ? udp_exchange(udp_fd, msg, len, reply)
				    : tcp_exchange(msg, len, reply);
}

/*
 * Sends the call twice under one xid and expects two identical replies with status want;
 * then once more under a new xid and expects status again.
 */
static void retransmit(int proto, uint32_t proc, xdrproc_t xargs, void *args, int want,
		       int again)
{
	uint8_t msg[DRC_BUF], r1[DRC_BUF], r2[DRC_BUF];
	uint32_t xid = next_xid++;
	size_t len = build_call(msg, sizeof(msg), xid, proc, xargs, args);
	size_t n1, n2;
	int fd = proto == IPPROTO_UDP ? udp_sock() : -1;

	n1 = exchange(proto, fd, msg, len, r1);
	it_assert_status(reply_status(r1, n1, xid), want);
	n2 = exchange(proto, fd, msg, len, r2);
	if (n1 != n2 || memcmp(r1, r2, n1) != 0)
		fail_msg("procedure %u over %s: the retransmission got %s (%zu bytes), not the "
			 "original reply (%zu bytes)", proc, proto == IPPROTO_UDP ? "udp" : "tcp",
			 it_nfsstat_name(reply_status(r2, n2, xid)), n2, n1);
	xid = next_xid++;
	len = build_call(msg, sizeof(msg), xid, proc, xargs, args);
	n1 = exchange(proto, fd, msg, len, r1);
	it_assert_status(reply_status(r1, n1, xid), again);
	if (fd >= 0)
		close(fd);
}

static void upper_file(const char *name)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", it_srv.is_upper, name);
	it_write_file(p, "data", 4);
}

static void check_remove(int proto, const char *name, bool in_lower)
{
	REMOVE3args a = { .object = { .dir = root, .name = (char *)name } };
	char p[PATH_MAX];

	it_path(p, "%s/%s", in_lower ? it_srv.is_lower : it_srv.is_upper, name);
	it_write_file(p, "data", 4);
	retransmit(proto, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a, NFS3_OK,
		   NFS3ERR_NOENT);
}

static void test_remove_udp(void **state)
{
	(void)state;
	check_remove(IPPROTO_UDP, "rm-udp", false);
	/* a lower file: the removal is a whiteout, and that too happens once */
	check_remove(IPPROTO_UDP, "rm-udp-lower", true);
}

static void test_remove_tcp(void **state)
{
	(void)state;
	check_remove(IPPROTO_TCP, "rm-tcp", false);
	check_remove(IPPROTO_TCP, "rm-tcp-lower", true);
}

static void check_create(int proto, const char *name)
{
	CREATE3args a;
	char p[PATH_MAX];

	memset(&a, 0, sizeof(a));
	a.where.dir = root;
	a.where.name = (char *)name;
	a.how.mode = GUARDED;
	a.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
	a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	retransmit(proto, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a, NFS3_OK,
		   NFS3ERR_EXIST);
	it_path(p, "%s/%s", it_srv.is_upper, name);
	assert_true(it_exists(p));
}

static void test_create_udp(void **state)
{
	(void)state;
	check_create(IPPROTO_UDP, "new-udp");
}

static void test_create_tcp(void **state)
{
	(void)state;
	check_create(IPPROTO_TCP, "new-tcp");
}

static void check_rename(int proto, const char *from, const char *to)
{
	RENAME3args a = { .from = { .dir = root, .name = (char *)from },
			  .to = { .dir = root, .name = (char *)to } };
	char p[PATH_MAX];

	upper_file(from);
	retransmit(proto, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a, NFS3_OK,
		   NFS3ERR_NOENT);
	it_path(p, "%s/%s", it_srv.is_upper, to);
	assert_true(it_exists(p));
	it_path(p, "%s/%s", it_srv.is_upper, from);
	assert_false(it_exists(p));
}

static void test_rename_udp(void **state)
{
	(void)state;
	check_rename(IPPROTO_UDP, "mv-udp-a", "mv-udp-b");
}

static void test_rename_tcp(void **state)
{
	(void)state;
	check_rename(IPPROTO_TCP, "mv-tcp-a", "mv-tcp-b");
}

/*
 * Another user on the client's host who sends root's SETATTR again under its xid gets no
 * copy of root's reply: the call runs as that user, who does not own the file.
 */
static void test_other_identity_runs(void **state)
{
	uint8_t msg[DRC_BUF], reply[DRC_BUF];
	uint32_t xid = next_xid++;
	SETATTR3args a;
	nfs_fh3 fh;
	size_t len, n;
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);

	(void)state;
	upper_file("drc-roots");
	it_assert_status(it_lookup(c, &root, "drc-roots", &fh, NULL), NFS3_OK);
	it_clnt_destroy(c);
	memset(&a, 0, sizeof(a));
	a.object = fh;
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = 0600;
	len = build_call_as(msg, sizeof(msg), xid, NFSPROC3_SETATTR, 0,
			    (xdrproc_t)xdr_SETATTR3args, &a);
	n = tcp_exchange(msg, len, reply);
	it_assert_status(reply_status(reply, n, xid), NFS3_OK);
	len = build_call_as(msg, sizeof(msg), xid, NFSPROC3_SETATTR, 1001,
			    (xdrproc_t)xdr_SETATTR3args, &a);
	n = tcp_exchange(msg, len, reply);
	it_assert_status(reply_status(reply, n, xid), NFS3ERR_PERM);
	it_fh_free(&fh);
}

/* GETATTR under one xid twice, the file changed between: the second reply is fresh. */
static void test_idempotent_not_cached(void **state)
{
	uint8_t msg[DRC_BUF], r1[DRC_BUF], r2[DRC_BUF];
	char p[PATH_MAX];
	nfs_fh3 fh;
	GETATTR3args a;
	GETATTR3res res;
	uint32_t xid = next_xid++;
	size_t len, n;
	int fd = udp_sock();
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	XDR x;

	(void)state;
	upper_file("stat-me");
	it_assert_status(it_lookup(c, &root, "stat-me", &fh, NULL), NFS3_OK);
	it_clnt_destroy(c);
	a.object = fh;
	len = build_call(msg, sizeof(msg), xid, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a);
	n = udp_exchange(fd, msg, len, r1);
	it_assert_status(reply_status(r1, n, xid), NFS3_OK);
	it_path(p, "%s/stat-me", it_srv.is_upper);
	it_write_file(p, "longer data", 11);
	n = udp_exchange(fd, msg, len, r2);
	it_assert_status(reply_status(r2, n, xid), NFS3_OK);
	memset(&res, 0, sizeof(res));
	xdrmem_create(&x, (char *)r2 + 24, (u_int)(n - 24), XDR_DECODE);
	assert_true(xdr_GETATTR3res(&x, &res));
	xdr_destroy(&x);
	assert_int_equal(res.GETATTR3res_u.resok.obj_attributes.size, 11);
	xdr_free((xdrproc_t)xdr_GETATTR3res, (char *)&res);
	it_fh_free(&fh);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remove_udp),
		cmocka_unit_test(test_remove_tcp),
		cmocka_unit_test(test_create_udp),
		cmocka_unit_test(test_create_tcp),
		cmocka_unit_test(test_rename_udp),
		cmocka_unit_test(test_rename_tcp),
		cmocka_unit_test(test_idempotent_not_cached),
		cmocka_unit_test(test_other_identity_runs),
	};

	return cmocka_run_group_tests_name("duplicate request cache", tests, setup, teardown);
}
