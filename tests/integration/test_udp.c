/*
 * Transports and program/version handling: NFS over UDP and TCP side by side, NFSACL and
 * other NFS versions refused the way clients expect, and hostile records (bad RPC version,
 * unknown credential flavors, truncated or oversized records, tiny TCP fragments) answered
 * or dropped without harming the server.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <rpc/pmap_prot.h>
#include <rpc/rpcb_prot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static nfs_fh3 root;

static int setup(void **state)
{
	char p[PATH_MAX], data[40000];

	(void)state;
	if (it_group_setup_udp(false) != 0)
		return -1;
	it_path(p, "%s/readme", it_srv.is_upper);
	it_fill(data, sizeof(data), 5);
	it_write_file(p, data, sizeof(data));
	if (it_mnt(&it_srv, IPPROTO_UDP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	it_fh_free(&root);
	return it_group_teardown(state);
}

static void check_basic_ops(int proto)
{
	CLIENT *c = it_nfs_clnt(&it_srv, proto);
	char want[40000];
	nfs_fh3 f;
	fattr3 a, b;
	READ3args ra;
	READ3res rr;
	uint32_t got = 0;
	enum clnt_stat cs;

	it_fill(want, sizeof(want), 5);
	assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_assert_status(it_getattr(c, &root, &a), NFS3_OK);
	assert_int_equal(a.type, NF3DIR);
	it_assert_status(it_lookup(c, &root, "readme", &f, &b), NFS3_OK);
	assert_true(b.size >= sizeof(want));
	/* 32 KiB per READ: several datagrams' worth over UDP */
	while (got < sizeof(want)) {
		ra.file = f;
		ra.offset = got;
		ra.count = 32768;
		memset(&rr, 0, sizeof(rr));
		cs = it_call(c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &ra, (xdrproc_t)xdr_READ3res,
			     &rr);
		if (cs != RPC_SUCCESS)
			fail_msg("READ over %s: %s", proto == IPPROTO_UDP ? "udp" : "tcp",
				 clnt_sperrno(cs));
		it_assert_status(rr.status, NFS3_OK);
		assert_true(rr.READ3res_u.resok.count > 0);
		{
			/* the file may have grown past the pattern (earlier writes) */
			uint32_t n = rr.READ3res_u.resok.count;

			if (n > sizeof(want) - got)
				n = sizeof(want) - got;
			assert_memory_equal(rr.READ3res_u.resok.data.data_val, want + got, n);
			got += n;
		}
		if (got < sizeof(want))
			assert_false(rr.READ3res_u.resok.eof);
		it_free((xdrproc_t)xdr_READ3res, &rr);
	}
	{
		WRITE3args wa;
		WRITE3res wr;
		char p[PATH_MAX], *disk;
		size_t len;

		/* past the compared bytes, at a place of its own per transport */
		wa.file = f;
		wa.offset = sizeof(want) + (proto == IPPROTO_UDP ? 0 : 8);
		wa.count = 5;
		wa.stable = FILE_SYNC;
		wa.data.data_len = 5;
		wa.data.data_val = proto == IPPROTO_UDP ? "UDP!!" : "TCP!!";
		memset(&wr, 0, sizeof(wr));
		cs = it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
			     (xdrproc_t)xdr_WRITE3res, &wr);
		assert_int_equal(cs, RPC_SUCCESS);
		it_assert_status(wr.status, NFS3_OK);
		it_free((xdrproc_t)xdr_WRITE3res, &wr);
		it_path(p, "%s/readme", it_srv.is_upper);
		disk = it_read_file(p, &len);
		assert_true(len >= wa.offset + 5);
		assert_memory_equal(disk + wa.offset, wa.data.data_val, 5);
		free(disk);
	}
	it_fh_free(&f);
	it_clnt_destroy(c);
}

static void test_udp_ops(void **state)
{
	(void)state;
	check_basic_ops(IPPROTO_UDP);
}

static void test_tcp_ops(void **state)
{
	(void)state;
	check_basic_ops(IPPROTO_TCP);
}

static void expect_call_error(int proto, uint32_t prog, uint32_t vers, uint32_t proc,
			      enum clnt_stat want, uint32_t low, uint32_t high)
{
	CLIENT *c = it_clnt(proto, prog, vers, it_srv.is_nfs_port);
	enum clnt_stat cs;

	cs = it_call(c, proc, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void, NULL);
	if (cs != want)
		fail_msg("program %u v%u proc %u over %s: %s, want %s", prog, vers, proc,
			 proto == IPPROTO_TCP ? "tcp" : "udp", clnt_sperrno(cs), clnt_sperrno(want));
	if (want == RPC_PROGVERSMISMATCH) {
		struct rpc_err err;

		clnt_geterr(c, &err);
		assert_int_equal(err.re_vers.low, low);
		assert_int_equal(err.re_vers.high, high);
	}
	it_clnt_destroy(c);
}

static void test_programs_and_versions(void **state)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };

	(void)state;
	for (int i = 0; i < 2; i++) {
		/* NFSACL probes: PROG_UNAVAIL, so the Linux client carries on without ACLs */
		expect_call_error(protos[i], 100227, 3, 0, RPC_PROGUNAVAIL, 0, 0);
		expect_call_error(protos[i], NFS_PROGRAM, 2, 0, RPC_PROGVERSMISMATCH, 3, 3);
		expect_call_error(protos[i], NFS_PROGRAM, 4, 0, RPC_PROGVERSMISMATCH, 3, 3);
		expect_call_error(protos[i], NFS_PROGRAM, 3, 22, RPC_PROCUNAVAIL, 0, 0);
		expect_call_error(protos[i], NFS_PROGRAM, 3, 1000000, RPC_PROCUNAVAIL, 0, 0);
	}
}

static void test_garbage_args(void **state)
{
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	uint32_t junk = htonl(0xffffffffu); /* a handle length of 4 GiB */
	enum clnt_stat cs;

	(void)state;
	cs = it_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_u_int, &junk, (xdrproc_t)it_xdr_void,
		     NULL);
	assert_int_equal(cs, RPC_CANTDECODEARGS);
	/* the connection stays usable */
	assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
}

/* --- raw records --- */

/* A call header: xid, CALL, rpcvers, prog, vers, proc, cred flavor/len, verf AUTH_NONE. */
static size_t call_hdr(uint8_t *b, uint32_t xid, uint32_t rpcvers, uint32_t prog, uint32_t vers,
		       uint32_t proc, uint32_t flavor, uint32_t credlen)
{
	size_t o = 0;

	o = it_put32(b, o, xid);
	o = it_put32(b, o, 0);
	o = it_put32(b, o, rpcvers);
	o = it_put32(b, o, prog);
	o = it_put32(b, o, vers);
	o = it_put32(b, o, proc);
	o = it_put32(b, o, flavor);
	o = it_put32(b, o, credlen);
	/* a credential longer than 400 bytes is announced but not sent (a lie to be caught) */
	if (credlen <= 400) {
		memset(b + o, 0, (credlen + 3) & ~3u);
		o += (credlen + 3) & ~3u;
	}
	o = it_put32(b, o, 0);
	o = it_put32(b, o, 0);
	return o;
}

static int udp_sock(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	struct timeval tv = { 2, 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/*
 * Sends one datagram, again after each 2 s without a reply, as a UDP client retransmits (a
 * loaded machine may take longer than that to answer); returns the reply length (0: none
 * after three sends).
 */
static ssize_t udp_exchange_tries(const uint8_t *msg, size_t len, uint8_t *reply, size_t rlen,
				  int sends)
{
	int fd = udp_sock();
	ssize_t n = -1;

	for (int tries = 0; tries < sends && n < 0; tries++) {
		assert_int_equal(send(fd, msg, len, 0), (ssize_t)len);
		n = recv(fd, reply, rlen, 0);
	}
	close(fd);
	return n < 0 ? 0 : n;
}

static ssize_t udp_exchange(const uint8_t *msg, size_t len, uint8_t *reply, size_t rlen)
{
	return udp_exchange_tries(msg, len, reply, rlen, 3);
}

/* A NULL call over UDP to port: true when answered, false when refused (nothing listens). */
/*
 * Whether a UDP NULL call of prog/vers to port is answered within wait_ms: a closed port
 * refuses at once (loopback's port unreachable); a dropped call gets no reply.
 */
static bool udp_proc_answered(int port, uint32_t prog, uint32_t vers, uint32_t proc, int wait_ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	uint8_t msg[128], reply[2048];
	size_t len = call_hdr(msg, 0x0dd, 2, prog, vers, proc, 0, 0);
	struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;
	int e;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(send(fd, msg, len, 0), (ssize_t)len);
	n = recv(fd, reply, sizeof(reply), 0);
	e = errno;
	close(fd);
	if (n < 0 && e != ECONNREFUSED && e != EAGAIN)
		fail_msg("UDP call to port %d: %s, want a reply, a refusal or silence", port,
			 strerror(e));
	return n >= 24 && it_get32(reply, 0) == 0x0dd;
}

static bool udp_null_answered(int port)
{
	return udp_proc_answered(port, NFS_PROGRAM, 3, 0, IT_CALL_TIMEOUT * 1000);
}

/*
 * With locking on and no --udp, the UDP ports locking opens (NLM's, the built-in
 * portmapper's) answer NLM, NSM and portmapper lookups only: NFS and MOUNT calls and
 * portmapper DUMPs, whose replies can be many times their calls, go unanswered there.
 */
static void test_locking_udp_serves_only_locking(void **state)
{
	struct it_server s;
	char pmport[16], nlmport[16];
	int port = 40400, nlm;

	(void)state;
	/* The portmapper and NLM listen on UDP too: a port some other process holds there fails. */
	while (port < 40500 && !it_tcp_udp_port_free(port))
		port++;
	nlm = port + 1;
	while (nlm < 40600 && !it_tcp_udp_port_free(nlm))
		nlm++;
	snprintf(pmport, sizeof(pmport), "%d", port);
	snprintf(nlmport, sizeof(nlmport), "%d", nlm);
	it_server_init(&s, false);
	s.is_portmap = "builtin";
	s.is_extra[0] = "--portmap-port";
	s.is_extra[1] = pmport;
	s.is_extra[2] = "--nlm-port";
	s.is_extra[3] = nlmport;
	if (it_server_start(&s) != 0) {
		it_server_cleanup(&s);
		fail_msg("the server did not start with --nlm-port %d", nlm);
	}
	assert_true(udp_proc_answered(nlm, 100021, 4, 0, IT_CALL_TIMEOUT * 1000));
	assert_true(udp_proc_answered(nlm, 100024, 1, 0, IT_CALL_TIMEOUT * 1000));
	assert_true(udp_proc_answered(port, PMAPPROG, PMAPVERS, PMAPPROC_NULL,
				      IT_CALL_TIMEOUT * 1000));
	/* the answered calls above show the server is up: silence now means dropped */
	assert_false(udp_proc_answered(nlm, NFS_PROGRAM, 3, 0, 500));
	assert_false(udp_proc_answered(port, NFS_PROGRAM, 3, 0, 500));
	assert_false(udp_proc_answered(nlm, 100005, 3, 0, 500));
	assert_false(udp_proc_answered(port, PMAPPROG, PMAPVERS, PMAPPROC_DUMP, 500));
	assert_false(udp_proc_answered(port, 100000, 3, RPCBPROC_DUMP, 500));
	assert_int_equal(it_server_finish(&s), 0);
}

/*
 * A NULL call is served on the event loop, and a UDP reply goes out only when the loop
 * takes the call's completion: without busy polling nothing else wakes the loop, so the
 * loop must take it before it sleeps. Every call must be answered, not just the lucky ones.
 */
static void test_udp_null_without_busy_poll(void **state)
{
	struct it_server s;

	(void)state;
	it_server_init(&s, false);
	s.is_extra[0] = "--udp";
	s.is_extra[1] = "--busy-poll";
	s.is_extra[2] = "0";
	if (it_server_start(&s) != 0) {
		it_server_cleanup(&s);
		fail_msg("the server did not start with --busy-poll 0");
	}
	for (int i = 0; i < 20; i++)
		if (!udp_null_answered(s.is_nfs_port))
			fail_msg("UDP NULL call %d went unanswered with --busy-poll 0", i);
	assert_int_equal(it_server_finish(&s), 0);
}

/*
 * Without --udp (and without locking, whose NLM and NSM, and with them the built-in
 * portmapper, answer on UDP too: test_portmap) nothing listens on UDP, and the portmapper
 * offers TCP only.
 */
static void test_udp_off_by_default(void **state)
{
	struct it_server tcp_only;
	char pmport[16];
	int port = 40300;
	CLIENT *c;
	struct pmap q = { NFS_PROGRAM, NFS_V3, IPPROTO_UDP, 0 };
	u_int got = 1;

	(void)state;
	/* answered by the group's server, which runs with --udp */
	assert_true(udp_null_answered(it_srv.is_nfs_port));
	while (port < 40400 && !it_tcp_port_free(port))
		port++;
	snprintf(pmport, sizeof(pmport), "%d", port);
	it_server_init(&tcp_only, false);
	tcp_only.is_portmap = "builtin";
	tcp_only.is_extra[0] = "--portmap-port";
	tcp_only.is_extra[1] = pmport;
	tcp_only.is_extra[2] = "--nlm-port";
	tcp_only.is_extra[3] = "off";
	if (it_server_start(&tcp_only) != 0) {
		it_server_cleanup(&tcp_only);
		fail_msg("the server did not start without --udp");
	}
	if (udp_null_answered(tcp_only.is_nfs_port) || udp_null_answered(tcp_only.is_mount_port) ||
	    udp_null_answered(port))
		fail_msg("a server started without --udp answered a UDP call");
	c = it_clnt(IPPROTO_TCP, PMAPPROG, PMAPVERS, port);
	assert_int_equal(it_call(c, PMAPPROC_GETPORT, (xdrproc_t)xdr_pmap, &q, (xdrproc_t)xdr_u_int,
				 &got),
			 RPC_SUCCESS);
	assert_int_equal(got, 0);
	q.pm_prot = IPPROTO_TCP;
	assert_int_equal(it_call(c, PMAPPROC_GETPORT, (xdrproc_t)xdr_pmap, &q, (xdrproc_t)xdr_u_int,
				 &got),
			 RPC_SUCCESS);
	assert_int_equal(got, tcp_only.is_nfs_port);
	it_clnt_destroy(c);
	c = it_nfs_clnt(&tcp_only, IPPROTO_TCP);
	assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
	assert_int_equal(it_server_finish(&tcp_only), 0);
}

static void test_rpc_version_mismatch(void **state)
{
	uint8_t msg[128], reply[256];
	size_t len = call_hdr(msg, 0x1234, 3, NFS_PROGRAM, 3, 0, 0, 0);
	ssize_t n;

	(void)state;
	n = udp_exchange(msg, len, reply, sizeof(reply));
	assert_true(n >= 24);
	assert_int_equal(it_get32(reply, 0), 0x1234);
	assert_int_equal(it_get32(reply, 4), 1);   /* REPLY */
	assert_int_equal(it_get32(reply, 8), 1);   /* MSG_DENIED */
	assert_int_equal(it_get32(reply, 12), 0);  /* RPC_MISMATCH */
	assert_int_equal(it_get32(reply, 16), 2);  /* low */
	assert_int_equal(it_get32(reply, 20), 2);  /* high */
}

static void test_unknown_flavor_denied(void **state)
{
	uint8_t msg[128], reply[256];
	size_t len = call_hdr(msg, 0x2345, 2, NFS_PROGRAM, 3, 0, 6 /* RPCSEC_GSS */, 8);
	ssize_t n;

	(void)state;
	n = udp_exchange(msg, len, reply, sizeof(reply));
	assert_true(n >= 16);
	assert_int_equal(it_get32(reply, 0), 0x2345);
	assert_int_equal(it_get32(reply, 8), 1);   /* MSG_DENIED */
	assert_int_equal(it_get32(reply, 12), 1);  /* AUTH_ERROR */
	{
		uint32_t why = it_get32(reply, 16);

		if (why != 1 && why != 2 && why != 5) /* BADCRED, REJECTEDCRED, TOOWEAK */
			fail_msg("auth_stat %u for an unknown flavor", why);
	}
}

static void test_malformed_datagrams(void **state)
{
	uint8_t msg[600], reply[256];
	size_t len;

	(void)state;
	/* AUTH_SYS with a credential length beyond the datagram */
	len = call_hdr(msg, 0x3456, 2, NFS_PROGRAM, 3, 0, 1, 4000);
	udp_exchange_tries(msg, len, reply, sizeof(reply), 1); /* dropped or refused: either */
	/* AUTH_SYS with 100 groups inside */
	{
		size_t o = 0;

		o = it_put32(msg, o, 0x4567);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 2);
		o = it_put32(msg, o, NFS_PROGRAM);
		o = it_put32(msg, o, 3);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 1);
		o = it_put32(msg, o, 4 + 4 + 4 + 4 + 4 + 100 * 4);
		o = it_put32(msg, o, 0);   /* stamp */
		o = it_put32(msg, o, 0);   /* machine name, empty */
		o = it_put32(msg, o, 0);   /* uid */
		o = it_put32(msg, o, 0);   /* gid */
		o = it_put32(msg, o, 100); /* groups */
		for (int i = 0; i < 100; i++)
			o = it_put32(msg, o, i);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 0);
		/* AUTH_SYS allows 16 groups: this credential is malformed */
		assert_true(udp_exchange(msg, o, reply, sizeof(reply)) >= 20);
		assert_int_equal(it_get32(reply, 0), 0x4567);
		assert_int_equal(it_get32(reply, 8), 1);  /* MSG_DENIED */
		assert_int_equal(it_get32(reply, 12), 1); /* AUTH_ERROR */
		assert_int_equal(it_get32(reply, 16), 1); /* AUTH_BADCRED */
	}
	/* the same with 16 groups is fine */
	{
		size_t o = 0;

		o = it_put32(msg, o, 0x4568);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 2);
		o = it_put32(msg, o, NFS_PROGRAM);
		o = it_put32(msg, o, 3);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 1);
		o = it_put32(msg, o, 4 + 4 + 4 + 4 + 4 + 16 * 4);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 16);
		for (int i = 0; i < 16; i++)
			o = it_put32(msg, o, i);
		o = it_put32(msg, o, 0);
		o = it_put32(msg, o, 0);
		assert_true(udp_exchange(msg, o, reply, sizeof(reply)) >= 24);
		assert_int_equal(it_get32(reply, 0), 0x4568);
		assert_int_equal(it_get32(reply, 8), 0);  /* MSG_ACCEPTED */
		assert_int_equal(it_get32(reply, 20), 0); /* SUCCESS */
	}
	/* truncated headers of every length, a reply instead of a call, random bytes */
	len = call_hdr(msg, 0x5678, 2, NFS_PROGRAM, 3, 0, 0, 0);
	{
		int fd = udp_sock();

		for (size_t cut = 0; cut < len; cut++)
			send(fd, msg, cut, 0);
		it_put32(msg, 4, 1);
		send(fd, msg, len, 0);
		it_fill(msg, sizeof(msg), 77);
		send(fd, msg, sizeof(msg), 0);
		close(fd);
	}
	/* and still serving */
	len = call_hdr(msg, 0x6789, 2, NFS_PROGRAM, 3, 0, 0, 0);
	assert_true(udp_exchange(msg, len, reply, sizeof(reply)) >= 24);
	assert_int_equal(it_get32(reply, 0), 0x6789);
	assert_int_equal(it_get32(reply, 8), 0);   /* MSG_ACCEPTED */
	assert_int_equal(it_get32(reply, 20), 0);  /* SUCCESS */
}

static int tcp_sock(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			fail_msg("send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Reads one reply record (single or multiple fragments); returns its length, 0 on EOF. */
static size_t recv_record(int fd, uint8_t *buf, size_t cap)
{
	size_t have = 0;

	for (;;) {
		uint8_t hdr[4];
		uint32_t mark, len;
		size_t got = 0;

		while (got < 4) {
			ssize_t n = recv(fd, hdr + got, 4 - got, 0);

			if (n <= 0)
				return 0;
			got += (size_t)n;
		}
		mark = it_get32(hdr, 0);
		len = mark & 0x7fffffffu;
		assert_true(have + len <= cap);
		got = 0;
		while (got < len) {
			ssize_t n = recv(fd, buf + have + got, len - got, 0);

			if (n <= 0)
				return 0;
			got += (size_t)n;
		}
		have += len;
		if (mark & 0x80000000u)
			return have;
	}
}

static void test_tcp_tiny_fragments(void **state)
{
	uint8_t msg[128], wire[1024], reply[256];
	size_t len, o = 0;
	unsigned xids;
	int fd;

	(void)state;
	len = call_hdr(msg, 0x789a, 2, NFS_PROGRAM, 3, 0, 0, 0);
	/* one record as fragments of 4 bytes, and a second record right behind it */
	for (size_t i = 0; i < len; i += 4) {
		o = it_put32(wire, o, 4 | (i + 4 >= len ? 0x80000000u : 0));
		memcpy(wire + o, msg + i, 4);
		o += 4;
	}
	it_put32(msg, 0, 0x789b);
	o = it_put32(wire, o, (uint32_t)len | 0x80000000u);
	memcpy(wire + o, msg, len);
	o += len;
	fd = tcp_sock();
	/* byte by byte */
	for (size_t i = 0; i < o; i++)
		send_all(fd, wire + i, 1);
	/* Both answered; replies on one connection may come in either order (matched by xid). */
	xids = 0;
	for (int k = 0; k < 2; k++) {
		assert_true(recv_record(fd, reply, sizeof(reply)) >= 24);
		assert_int_equal(it_get32(reply, 20), 0);
		assert_true(it_get32(reply, 0) == 0x789a || it_get32(reply, 0) == 0x789b);
		xids |= it_get32(reply, 0) == 0x789a ? 1u : 2u;
	}
	assert_int_equal(xids, 3);
	/* an empty fragment before the last one is legal */
	it_put32(msg, 0, 0x789c);
	o = it_put32(wire, 0, 0);
	o = it_put32(wire, o, (uint32_t)len | 0x80000000u);
	memcpy(wire + o, msg, len);
	send_all(fd, wire, o + len);
	assert_true(recv_record(fd, reply, sizeof(reply)) >= 24);
	assert_int_equal(it_get32(reply, 0), 0x789c);
	close(fd);
}

static void test_tcp_oversized_record(void **state)
{
	uint8_t hdr[4], buf[64];
	int fd = tcp_sock();
	ssize_t n;

	(void)state;
	/* a record that claims 2 GiB: the server must hang up rather than buffer it */
	it_put32(hdr, 0, 0xffffffffu);
	send_all(fd, hdr, 4);
	{
		uint8_t chunk[65536];

		memset(chunk, 0, sizeof(chunk));
		for (int i = 0; i < 64; i++)
			if (send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) <= 0)
				break;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n > 0)
		fail_msg("the server answered a 2 GiB record");
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		fail_msg("the server kept a connection with a 2 GiB record open");
	close(fd);
	/* a connection that sends half a header and goes away */
	fd = tcp_sock();
	send_all(fd, hdr, 2);
	close(fd);
	/* still serving */
	{
		CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);

		assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
					 (xdrproc_t)it_xdr_void, NULL),
				 RPC_SUCCESS);
		it_clnt_destroy(c);
	}
}

static void test_many_connections(void **state)
{
	enum { N = 64 };
	CLIENT *c[N];

	(void)state;
	for (int i = 0; i < N; i++)
		c[i] = it_nfs_clnt(&it_srv, i % 2 ? IPPROTO_UDP : IPPROTO_TCP);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < N; i++) {
			fattr3 a;

			it_assert_status(it_getattr(c[i], &root, &a), NFS3_OK);
		}
	for (int i = 0; i < N; i++)
		it_clnt_destroy(c[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_ops),
		cmocka_unit_test(test_udp_off_by_default),
		cmocka_unit_test(test_udp_null_without_busy_poll),
		cmocka_unit_test(test_locking_udp_serves_only_locking),
		cmocka_unit_test(test_tcp_ops),
		cmocka_unit_test(test_programs_and_versions),
		cmocka_unit_test(test_garbage_args),
		cmocka_unit_test(test_rpc_version_mismatch),
		cmocka_unit_test(test_unknown_flavor_denied),
		cmocka_unit_test(test_malformed_datagrams),
		cmocka_unit_test(test_tcp_tiny_fragments),
		cmocka_unit_test(test_tcp_oversized_record),
		cmocka_unit_test(test_many_connections),
	};

	return cmocka_run_group_tests_name("transports and programs", tests, setup, teardown);
}
