/*
 * The network server end to end on loopback: a loop in the test thread, a client thread
 * talking TCP (fragmented, pipelined, large, oversized records) and UDP, then a shutdown
 * that still delivers the replies of calls in flight.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <ev.h>
#include <cmocka.h>

#include "net.h"
#include "record.h"
#include "rpc.h"
#include "../wait.h"

#define TEST_PROG 300000
#define P_ECHO 1
#define P_SLOW 2
#define P_WHERE 3
#define WAIT_MS 5000             /* for the server to take in what a test sent */

/* ---- the fake program ---- */

struct blob {
	u_int b_len;
	char *b_val;
};

static bool_t xdr_blob(XDR *x, struct blob *b)
{
	return xdr_bytes(x, &b->b_val, &b->b_len, 4u << 20);
}

struct where {
	uint32_t w_peer_family, w_local_family, w_local_port, w_local_addr4;
	int w_protocol;
};

static bool_t xdr_where(XDR *x, struct where *w)
{
	return xdr_u_int(x, &w->w_peer_family) && xdr_u_int(x, &w->w_local_family) &&
	       xdr_u_int(x, &w->w_local_port) && xdr_u_int(x, &w->w_local_addr4) &&
	       xdr_int(x, &w->w_protocol);
}

static enum rpc_outcome t_null(struct rpc_req *rq, void *a, void *r)
{
	(void)rq; (void)a; (void)r;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome t_echo(struct rpc_req *rq, void *a, void *r)
{
	struct blob *in = a, *out = r;

	out->b_len = in->b_len;
	out->b_val = rpc_alloc(rq, in->b_len);
	memcpy(out->b_val, in->b_val, in->b_len);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome t_slow(struct rpc_req *rq, void *a, void *r)
{
	(void)rq; (void)a; (void)r;
	usleep(200 * 1000);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome t_where(struct rpc_req *rq, void *a, void *r)
{
	struct where *w = r;

	(void)a;
	w->w_peer_family = rq->rq_peer.ss_family;
	w->w_local_family = rq->rq_locallen ? rq->rq_local.ss_family : 0;
	w->w_protocol = rq->rq_protocol;
	if (rq->rq_locallen && rq->rq_local.ss_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&rq->rq_local;

		w->w_local_port = ntohs(s->sin_port);
		w->w_local_addr4 = ntohl(s->sin_addr.s_addr);
	} else if (rq->rq_locallen && rq->rq_local.ss_family == AF_INET6) {
		w->w_local_port = ntohs(((struct sockaddr_in6 *)&rq->rq_local)->sin6_port);
	}
	return RPC_OUT_REPLY;
}

static const struct rpc_proc t_v1[] = {
	RPC_PROC_VOID("NULL", t_null),
	{ "ECHO", (xdrproc_t)xdr_blob, sizeof(struct blob), (xdrproc_t)xdr_blob, sizeof(struct blob), t_echo },
	RPC_PROC_VOID("SLOW", t_slow),
	{ "WHERE", RPC_XDRPROC(xdr_void), 0, RPC_XDRPROC(xdr_where), sizeof(struct where),
	  t_where },
};
static const struct rpc_proc *const t_procs[] = { t_v1 };
static const uint32_t t_nprocs[] = { 4 };
/* ECHO answers with what it got: as large as a record may be (no_max_record). */
static const uint32_t t_big[] = { 1u << P_ECHO };
static const struct rpc_program t_program = {
	.rg_prog = TEST_PROG, .rg_vers_min = 1, .rg_vers_max = 1,
	.rg_procs = t_procs, .rg_nprocs = t_nprocs,
	.rg_big_replies = t_big, .rg_reply_big = (2u << 20) + 4096,
};

/* ---- client side ---- */

/* Encodes a call (AUTH_SYS) into buf; returns its length. */
static size_t mkcall(uint8_t *buf, size_t cap, uint32_t xid, uint32_t prog, uint32_t proc,
		     const void *data, uint32_t datalen, bool with_blob)
{
	XDR x;
	uint32_t v[] = { xid, CALL, 2, prog, 1, proc, AUTH_SYS };
	uint8_t cred[64];
	XDR cx;
	uint32_t credlen;
	size_t n;
	char *name = "t";
	u_int zero = 0, stamp = 1, uid = 1000, gid = 1000;

	xdrmem_create(&cx, (char *)cred, sizeof(cred), XDR_ENCODE);
	assert_true(xdr_u_int(&cx, &stamp) && xdr_string(&cx, &name, 255) &&
		    xdr_u_int(&cx, &uid) && xdr_u_int(&cx, &gid) && xdr_u_int(&cx, &zero));
	credlen = xdr_getpos(&cx);
	xdr_destroy(&cx);

	xdrmem_create(&x, (char *)buf, (u_int)cap, XDR_ENCODE);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_true(xdr_u_int(&x, &v[i]));
	assert_true(xdr_u_int(&x, &credlen) && xdr_opaque(&x, (char *)cred, credlen));
	assert_true(xdr_u_int(&x, &zero) && xdr_u_int(&x, &zero));
	if (with_blob) {
		char *p = (char *)data;
		u_int l = datalen;

		assert_true(xdr_bytes(&x, &p, &l, 4u << 20));
	}
	n = xdr_getpos(&x);
	xdr_destroy(&x);
	return n;
}

struct rep {
	uint32_t xid, stat, code;
	uint8_t *body;       /* the whole reply record, body at off */
	size_t off, len;
};

static void parse_rep(uint8_t *rec, size_t len, struct rep *r)
{
	XDR x;
	uint32_t mt, vf, vl;

	memset(r, 0, sizeof(*r));
	xdrmem_create(&x, (char *)rec, (u_int)len, XDR_DECODE);
	assert_true(xdr_u_int(&x, &r->xid) && xdr_u_int(&x, &mt) && xdr_u_int(&x, &r->stat));
	assert_int_equal(mt, REPLY);
	assert_int_equal(r->stat, MSG_ACCEPTED);
	assert_true(xdr_u_int(&x, &vf) && xdr_u_int(&x, &vl) && xdr_u_int(&x, &r->code));
	r->body = rec;
	r->off = xdr_getpos(&x);
	r->len = len;
	xdr_destroy(&x);
}

static void write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t k = write(fd, b, n);

		if (k < 0 && errno == EINTR)
			continue;
		assert_true(k > 0);
		b += k;
		n -= (size_t)k;
	}
}

/* A client connection with its own reassembly state. */
struct cconn {
	int cc_fd;
	struct record_rx cc_rx;
	uint8_t cc_buf[4096];
	size_t cc_have, cc_off;
};

static int tcp_connect(int family, int port);

static struct cconn *cc_open(int port)
{
	struct cconn *cc = calloc(1, sizeof(*cc));

	assert_non_null(cc);
	cc->cc_fd = tcp_connect(AF_INET, port);
	assert_true(cc->cc_fd >= 0);
	record_init(&cc->cc_rx, 8u << 20);
	return cc;
}

static void cc_close(struct cconn *cc)
{
	close(cc->cc_fd);
	record_free(&cc->cc_rx);
	free(cc);
}

/* Reads one record (5 s timeout); NULL at EOF or error. */
static uint8_t *read_record(struct cconn *cc, size_t *len)
{
	size_t used;

	for (;;) {
		struct pollfd pfd = { .fd = cc->cc_fd, .events = POLLIN };
		ssize_t k;

		if (cc->cc_off < cc->cc_have) {
			enum record_status st = record_feed(&cc->cc_rx, cc->cc_buf + cc->cc_off,
							    cc->cc_have - cc->cc_off, &used);

			cc->cc_off += used;
			if (st == RECORD_DONE)
				return record_take(&cc->cc_rx, len);
			assert_int_equal(st, RECORD_MORE);
			continue;
		}
		if (poll(&pfd, 1, 5000) != 1)
			return NULL;
		k = read(cc->cc_fd, cc->cc_buf, sizeof(cc->cc_buf));
		if (k <= 0)
			return NULL;
		cc->cc_have = (size_t)k;
		cc->cc_off = 0;
	}
}

static void frame(uint8_t *hdr, uint32_t len, bool last)
{
	uint32_t h = htonl(len | (last ? 0x80000000u : 0));

	memcpy(hdr, &h, 4);
}

static int tcp_connect(int family, int port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	int fd = socket(family, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		s->sin6_addr = in6addr_loopback;
		sl = sizeof(*s);
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int udp_socket(int family, int port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	int fd = socket(family, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		s->sin6_addr = in6addr_loopback;
		sl = sizeof(*s);
	}
	/* Connected, as the kernel client's is: replies from another address are dropped. */
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
	return fd;
}

/* One UDP call; returns the reply length (0 on timeout) with the reply in buf. */
static size_t udp_call(int fd, const uint8_t *req, size_t reqlen, uint8_t *buf, size_t cap)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t k;

	assert_int_equal(send(fd, req, reqlen, 0), (ssize_t)reqlen);
	if (poll(&pfd, 1, 5000) != 1)
		return 0;
	k = recv(fd, buf, cap, 0);
	return k > 0 ? (size_t)k : 0;
}

/* ---- the test harness: the loop in its own thread, the client in the test thread ---- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

struct harness {
	int fds_before;
	struct ev_loop *loop;
	struct net_server *srv;
	ev_async stop;
	pthread_t thread;
	int port;
};

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w; (void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until stopped, then shuts the server down from the loop's own thread. */
static void *loop_main(void *arg)
{
	struct harness *h = arg;

	ev_run(h->loop, 0);
	net_server_shutdown(h->srv);
	return NULL;
}

static void harness_start_opts(struct harness *h, const struct net_opts *opts);

static void harness_start(struct harness *h, const char *listen)
{
	struct net_opts no = { .no_listen = listen, .no_workers = 3, .no_max_record = 2u << 20,
			       .no_udp = true, .no_busy_poll_us = NET_DEFAULT_BUSY_POLL_US };

	harness_start_opts(h, &no);
}

static void harness_start_opts(struct harness *h, const struct net_opts *opts)
{
	static const struct rpc_program *const progs[] = { &t_program };
	char err[256];

	memset(h, 0, sizeof(*h));
	h->fds_before = count_fds();
	rpc_dispatch_init(progs, 1, NULL);
	h->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(h->loop);
	ev_async_init(&h->stop, stop_cb);
	ev_async_start(h->loop, &h->stop);
	assert_int_equal(net_server_create(h->loop, opts, &h->srv), 0);
	h->port = net_listen(h->srv, 0, err, sizeof(err));
	if (h->port < 0)
		fail_msg("net_listen: %s", err);
	assert_true(h->port > 0);
	assert_int_equal(pthread_create(&h->thread, NULL, loop_main, h), 0);
}

/* Asks the loop to stop; shutdown then runs in the loop thread. */
static void harness_stop(struct harness *h)
{
	ev_async_send(h->loop, &h->stop);
}

static void harness_finish(struct harness *h)
{
	pthread_join(h->thread, NULL);
	net_server_free(h->srv);
	ev_async_stop(h->loop, &h->stop);
	ev_loop_destroy(h->loop);
	/* Every socket the server opened is closed again. */
	assert_int_equal(count_fds(), h->fds_before);
}

/* ---- clients ---- */

static void client_tcp(struct harness *h)
{
	uint8_t req[4096], *rec, hdr[4];
	size_t n, len;
	struct rep r;
	struct cconn *cc = cc_open(h->port);
	int fd = cc->cc_fd;

	/* One call split into three fragments, written piecemeal. */
	n = mkcall(req, sizeof(req), 0x1001, TEST_PROG, P_ECHO, "fragmented!", 11, true);
	frame(hdr, 10, false);
	write_all(fd, hdr, 4);
	write_all(fd, req, 10);
	assert_true(wait_peer_read(fd, WAIT_MS)); /* so the server reads it apart */
	frame(hdr, 20, false);
	write_all(fd, hdr, 2);
	assert_true(wait_peer_read(fd, WAIT_MS));
	write_all(fd, hdr + 2, 2);
	write_all(fd, req + 10, 20);
	frame(hdr, (uint32_t)(n - 30), true);
	write_all(fd, hdr, 4);
	write_all(fd, req + 30, n - 30);
	rec = read_record(cc, &len);
	assert_non_null(rec);
	parse_rep(rec, len, &r);
	assert_int_equal(r.xid, 0x1001);
	assert_int_equal(r.code, SUCCESS);
	assert_int_equal(r.len - r.off, 4 + 12);
	assert_memory_equal(r.body + r.off + 4, "fragmented!", 11);
	free(rec);

	/* 300 pipelined calls in one write: more than a connection may have in flight. */
	{
		size_t cap = 300 * 128, off = 0;
		uint8_t *big = malloc(cap);
		bool seen[300] = { false };

		for (uint32_t i = 0; i < 300; i++) {
			n = mkcall(big + off + 4, cap - off - 4, 0x2000 + i, TEST_PROG, P_ECHO, &i, 4, true);
			frame(big + off, (uint32_t)n, true);
			off += 4 + n;
		}
		write_all(fd, big, off);
		free(big);
		for (int i = 0; i < 300; i++) {
			rec = read_record(cc, &len);
			assert_non_null(rec);
			parse_rep(rec, len, &r);
			assert_int_equal(r.code, SUCCESS);
			assert_true(r.xid >= 0x2000 && r.xid < 0x2000 + 300);
			assert_false(seen[r.xid - 0x2000]);
			seen[r.xid - 0x2000] = true;
			assert_memory_equal(r.body + r.off + 4, &(uint32_t){ r.xid - 0x2000 }, 4);
			free(rec);
		}
	}

	/* Large replies to a client that reads late: the server must not block. */
	{
		size_t blen = 1u << 20, cap = blen + 256;
		uint8_t *data = malloc(blen), *call = malloc(cap + 4);

		for (size_t i = 0; i < blen; i++)
			data[i] = (uint8_t)(i * 13);
		n = mkcall(call + 4, cap, 0x3000, TEST_PROG, P_ECHO, data, (uint32_t)blen, true);
		frame(call, (uint32_t)n, true);
		for (int k = 0; k < 4; k++)
			write_all(fd, call, n + 4);
		/* Meanwhile other connections are served. */
		{
			struct cconn *cc2 = cc_open(h->port);

			n = mkcall(req + 4, sizeof(req) - 4, 0x3100, TEST_PROG, 0, NULL, 0, false);
			frame(req, (uint32_t)n, true);
			write_all(cc2->cc_fd, req, n + 4);
			rec = read_record(cc2, &len);
			assert_non_null(rec);
			free(rec);
			cc_close(cc2);
		}
		for (int k = 0; k < 4; k++) {
			rec = read_record(cc, &len);
			assert_non_null(rec);
			parse_rep(rec, len, &r);
			assert_int_equal(r.xid, 0x3000);
			assert_int_equal(r.len - r.off, 4 + blen);
			assert_memory_equal(r.body + r.off + 4, data, blen);
			free(rec);
		}
		free(data);
		free(call);
	}

	/* Our local address as the handler saw it. */
	n = mkcall(req + 4, sizeof(req) - 4, 0x4000, TEST_PROG, P_WHERE, NULL, 0, false);
	frame(req, (uint32_t)n, true);
	write_all(fd, req, n + 4);
	rec = read_record(cc, &len);
	assert_non_null(rec);
	parse_rep(rec, len, &r);
	{
		struct where w;
		XDR x;

		xdrmem_create(&x, (char *)r.body + r.off, (u_int)(r.len - r.off), XDR_DECODE);
		assert_true(xdr_where(&x, &w));
		xdr_destroy(&x);
		assert_int_equal(w.w_peer_family, AF_INET);
		assert_int_equal(w.w_local_family, AF_INET);
		assert_int_equal(w.w_local_port, h->port);
		assert_int_equal(w.w_local_addr4, INADDR_LOOPBACK);
		assert_int_equal(w.w_protocol, IPPROTO_TCP);
	}
	free(rec);
	cc_close(cc);

	/* An oversized record closes the connection. */
	cc = cc_open(h->port);
	fd = cc->cc_fd;
	frame(hdr, 64u << 20, true);
	write_all(fd, hdr, 4);
	assert_null(read_record(cc, &len));
	cc_close(cc);

	/* Half-close after a call still gets the reply. */
	cc = cc_open(h->port);
	fd = cc->cc_fd;
	n = mkcall(req + 4, sizeof(req) - 4, 0x5000, TEST_PROG, P_SLOW, NULL, 0, false);
	frame(req, (uint32_t)n, true);
	write_all(fd, req, n + 4);
	shutdown(fd, SHUT_WR);
	rec = read_record(cc, &len);
	assert_non_null(rec);
	parse_rep(rec, len, &r);
	assert_int_equal(r.xid, 0x5000);
	free(rec);
	assert_null(read_record(cc, &len));
	cc_close(cc);
}

static void client_udp(struct harness *h, int family)
{
	uint8_t req[4096], rep[65536];
	size_t n, k;
	struct rep r;
	int fd = udp_socket(family, h->port);

	n = mkcall(req, sizeof(req), 0x6000, TEST_PROG, P_ECHO, "datagram", 8, true);
	k = udp_call(fd, req, n, rep, sizeof(rep));
	assert_true(k > 0);
	parse_rep(rep, k, &r);
	assert_int_equal(r.xid, 0x6000);
	assert_int_equal(r.code, SUCCESS);
	assert_memory_equal(r.body + r.off + 4, "datagram", 8);

	n = mkcall(req, sizeof(req), 0x6001, 100227, 0, NULL, 0, false);
	k = udp_call(fd, req, n, rep, sizeof(rep));
	assert_true(k > 0);
	parse_rep(rep, k, &r);
	assert_int_equal(r.code, PROG_UNAVAIL);

	n = mkcall(req, sizeof(req), 0x6002, TEST_PROG, P_WHERE, NULL, 0, false);
	k = udp_call(fd, req, n, rep, sizeof(rep));
	assert_true(k > 0);
	parse_rep(rep, k, &r);
	{
		struct where w;
		XDR x;

		xdrmem_create(&x, (char *)r.body + r.off, (u_int)(r.len - r.off), XDR_DECODE);
		assert_true(xdr_where(&x, &w));
		xdr_destroy(&x);
		assert_int_equal(w.w_peer_family, family);
		assert_int_equal(w.w_local_family, family);
		assert_int_equal(w.w_local_port, h->port);
		if (family == AF_INET)
			assert_int_equal(w.w_local_addr4, INADDR_LOOPBACK);
		assert_int_equal(w.w_protocol, IPPROTO_UDP);
	}
	/* Garbage is dropped without a reply and without harm. */
	assert_int_equal(send(fd, "junk", 4, 0), 4);
	close(fd);
}

static void test_net_v4(void **state)
{
	struct harness h;

	(void)state;
	harness_start(&h, "127.0.0.1");
	client_tcp(&h);
	client_udp(&h, AF_INET);
	harness_stop(&h);
	harness_finish(&h);
}

static void test_net_dual(void **state)
{
	struct harness h;
	int fd;

	(void)state;
	harness_start(&h, NULL);
	client_udp(&h, AF_INET);
	fd = socket(AF_INET6, SOCK_DGRAM, 0);
	if (fd >= 0) {
		struct sockaddr_in6 s = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };

		/* Only where the host has IPv6 loopback. */
		bool v6 = bind(fd, (struct sockaddr *)&s, sizeof(s)) == 0;

		close(fd);
		if (v6) {
			client_udp(&h, AF_INET6);
			fd = tcp_connect(AF_INET6, h.port);
			assert_true(fd >= 0);
			close(fd);
		}
	}
	fd = tcp_connect(AF_INET, h.port);
	assert_true(fd >= 0);
	close(fd);
	harness_stop(&h);
	harness_finish(&h);
}

/* Without no_udp nothing listens on UDP: a datagram meets a closed port, TCP still works. */
static void test_net_tcp_only(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2 };
	struct pollfd pfd;
	struct harness h;
	uint8_t req[256], rep[256];
	size_t n;
	int fd;

	(void)state;
	harness_start_opts(&h, &no);
	fd = udp_socket(AF_INET, h.port);
	n = mkcall(req, sizeof(req), 0x6100, TEST_PROG, 0, NULL, 0, false);
	assert_int_equal(send(fd, req, n, 0), (ssize_t)n);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	/* The ICMP port unreachable of loopback comes at once; a reply would be a failure. */
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(recv(fd, rep, sizeof(rep), 0), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	client_tcp(&h);
	harness_stop(&h);
	harness_finish(&h);
}

/* Calls in flight when shutdown starts are still answered, then the connection closes. */
static void test_net_shutdown(void **state)
{
	struct harness h;
	uint8_t req[8192], *rec;
	size_t n, off = 0, len;
	struct cconn *cc, *idle;
	int got = 0;

	(void)state;
	harness_start(&h, "127.0.0.1");
	cc = cc_open(h.port);
	idle = cc_open(h.port);
	for (uint32_t i = 0; i < 3; i++) {
		n = mkcall(req + off + 4, sizeof(req) - off - 4, 0x7000 + i, TEST_PROG, P_SLOW, NULL, 0, false);
		frame(req + off, (uint32_t)n, true);
		off += n + 4;
	}
	write_all(cc->cc_fd, req, off);
	assert_true(wait_peer_read(cc->cc_fd, WAIT_MS)); /* the calls are in flight */
	harness_stop(&h);
	while ((rec = read_record(cc, &len)) != NULL) {
		struct rep r;

		parse_rep(rec, len, &r);
		assert_true(r.xid >= 0x7000 && r.xid < 0x7003);
		free(rec);
		got++;
	}
	assert_int_equal(got, 3);
	/* The idle connection was closed too. */
	assert_null(read_record(idle, &len));
	cc_close(cc);
	cc_close(idle);
	harness_finish(&h);
}

static struct rlimit saved_nofile;
static bool have_saved_nofile;

/* Puts the descriptor limit back even when test_net_emfile fails half-way. */
static int restore_nofile(void **state)
{
	(void)state;
	if (have_saved_nofile)
		setrlimit(RLIMIT_NOFILE, &saved_nofile);
	have_saved_nofile = false;
	return 0;
}

/* Out of file descriptors: accepting pauses, and resumes once descriptors are free. */
static void test_net_emfile(void **state)
{
	struct harness h;
	struct rlimit old, low;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint8_t req[512], *rec;
	int fds[4], first, second;
	size_t n, len;
	struct cconn cc[4];

	(void)state;
	/* valgrind emulates the descriptor limit for some calls only (not accept4). */
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload"))
		skip();
	harness_start(&h, "127.0.0.1");
	sin.sin_port = htons((uint16_t)h.port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 4; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fds[i] >= 0);
	}
	/* Leave the server exactly two descriptors: the two lowest free ones. */
	first = dup(0);
	second = dup(0);
	close(first);
	close(second);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	saved_nofile = old;
	have_saved_nofile = true;
	low = old;
	low.rlim_cur = (rlim_t)second + 1;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	memset(cc, 0, sizeof(cc));
	for (int i = 0; i < 4; i++) {
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)), 0);
		cc[i].cc_fd = fds[i];
		record_init(&cc[i].cc_rx, 1 << 20);
	}
	n = mkcall(req + 4, sizeof(req) - 4, 0x8000, TEST_PROG, 0, NULL, 0, false);
	frame(req, (uint32_t)n, true);
	for (int i = 0; i < 4; i++)
		write_all(fds[i], req, n + 4);
	/* Two are served; the others wait in the backlog. */
	for (int i = 0; i < 2; i++) {
		rec = read_record(&cc[i], &len);
		assert_non_null(rec);
		free(rec);
	}
	{
		struct pollfd pfd = { .fd = fds[2], .events = POLLIN };

		assert_int_equal(poll(&pfd, 1, 300), 0);
	}
	for (int i = 0; i < 2; i++) {
		close(fds[i]);
		record_free(&cc[i].cc_rx);
	}
	for (int i = 2; i < 4; i++) {
		rec = read_record(&cc[i], &len);
		assert_non_null(rec);
		free(rec);
		close(fds[i]);
		record_free(&cc[i].cc_rx);
	}
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	have_saved_nofile = false;
	harness_stop(&h);
	harness_finish(&h);
}

/* A client that sends and never reads: the server stops reading instead of buffering. */
static void test_net_backpressure(void **state)
{
	struct harness h;
	size_t blen = 64u << 10, n, total = 0;
	uint8_t *data = calloc(1, blen), *call = malloc(blen + 512);
	int fd, stalls = 0;

	(void)state;
	harness_start(&h, "127.0.0.1");
	fd = tcp_connect(AF_INET, h.port);
	assert_true(fd >= 0);
	n = mkcall(call + 4, blen + 508, 0x9000, TEST_PROG, P_ECHO, data, (uint32_t)blen, true);
	frame(call, (uint32_t)n, true);
	n += 4;
	while (total < (256u << 20) && stalls < 5) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		size_t off = 0;

		if (poll(&pfd, 1, 200) != 1) {
			stalls++;
			continue;
		}
		while (off < n) {
			ssize_t k = send(fd, call + off, n - off, MSG_DONTWAIT);

			if (k < 0) {
				assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
				poll(&pfd, 1, 200);
				if (++stalls >= 5)
					break;
				continue;
			}
			off += (size_t)k;
			total += (size_t)k;
		}
	}
	/* Socket buffers plus the server's bounds, far below what was offered. */
	print_message("offered %zu bytes before the server stopped reading\n", total);
	assert_true(stalls >= 5);
	assert_true(total < (64u << 20));
	close(fd);
	free(data);
	free(call);
	harness_stop(&h);
	harness_finish(&h);
}

/* Sends one call of proc on cc (no reply read). */
static void send_call(struct cconn *cc, uint32_t xid, uint32_t proc)
{
	uint8_t req[512];
	size_t n = mkcall(req + 4, sizeof(req) - 4, xid, TEST_PROG, proc, NULL, 0, false);

	frame(req, (uint32_t)n, true);
	write_all(cc->cc_fd, req, n + 4);
}

/*
 * Whether cc gets a reply (true) or EOF (false). Replies to pipelined calls may come in
 * any order, so a reply is checked to answer one of the xids from xid up to xid+span.
 */
static bool reply_in(struct cconn *cc, uint32_t xid, uint32_t span)
{
	size_t len;
	uint8_t *rec = read_record(cc, &len);
	struct rep r;

	if (rec == NULL)
		return false;
	parse_rep(rec, len, &r);
	if (r.xid < xid || r.xid > xid + span)
		fail_msg("reply xid %u, want %u..%u", r.xid, xid, xid + span);
	free(rec);
	return true;
}

static bool reply_or_eof(struct cconn *cc, uint32_t xid)
{
	return reply_in(cc, xid, 0);
}

/* A NULL call on cc that must be answered. */
static void null_ok(struct cconn *cc, uint32_t xid)
{
	send_call(cc, xid, 0);
	assert_true(reply_or_eof(cc, xid));
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A client connection from source address src (all of 127.0.0.0/8 is loopback). */
static struct cconn *cc_open_from(const char *src, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	struct cconn *cc = calloc(1, sizeof(*cc));

	assert_non_null(cc);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
	cc->cc_fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(cc->cc_fd >= 0);
	assert_int_equal(bind(cc->cc_fd, (struct sockaddr *)&from, sizeof(from)), 0);
	assert_int_equal(connect(cc->cc_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	record_init(&cc->cc_rx, 8u << 20);
	return cc;
}

/* Whether the server closes cc within ms milliseconds (EOF or reset, nothing else sent). */
static bool cc_closed_within(struct cconn *cc, int ms)
{
	struct pollfd pfd = { .fd = cc->cc_fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, ms) != 1)
		return false;
	return recv(cc->cc_fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* Keeps cc's connection busy: n slow calls from xid on, their replies read later. */
static void cc_busy(struct cconn *cc, uint32_t xid, int n)
{
	for (int i = 0; i < n; i++)
		send_call(cc, xid + (uint32_t)i, P_SLOW);
}

static void cc_busy_done(struct cconn *cc, uint32_t xid, int n)
{
	for (int i = 0; i < n; i++)
		assert_true(reply_in(cc, xid, (uint32_t)n - 1));
}

/*
 * Past max_conns a new connection closes the one idle longest and is served; only when
 * every open one has calls in flight is the new one closed at once.
 */
/*
 * A reply too large for the socket, written in part by its worker (the connection's one
 * call), is finished before any other reply starts: an echo of almost 2 MiB while the
 * client reads nothing, then a NULL; both come back whole, the echo first.
 */
static void test_net_worker_reply_finished_first(void **state)
{
	size_t blen = (2u << 20) - 4096, n, len;
	uint8_t *data = malloc(blen), *call = malloc(blen + 512), *rec;
	struct pollfd pfd;
	struct harness h;
	struct cconn *cc;
	struct rep r;
	uint32_t echoed;

	(void)state;
	assert_non_null(data);
	assert_non_null(call);
	for (size_t i = 0; i < blen; i++)
		data[i] = (uint8_t)(i * 7 + (i >> 12));
	harness_start(&h, "127.0.0.1");
	cc = cc_open(h.port);
	n = mkcall(call + 4, blen + 508, 0x7001, TEST_PROG, P_ECHO, data, (uint32_t)blen, true);
	frame(call, (uint32_t)n, true);
	write_all(cc->cc_fd, call, n + 4);
	/* The echo's first bytes are here: its worker wrote what the socket took. */
	pfd = (struct pollfd){ .fd = cc->cc_fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	send_call(cc, 0x7002, 0);
	rec = read_record(cc, &len);
	assert_non_null(rec);
	parse_rep(rec, len, &r);
	assert_int_equal(r.xid, 0x7001);
	memcpy(&echoed, rec + r.off, 4);
	assert_int_equal(ntohl(echoed), blen);
	assert_true(len >= r.off + 4 + blen);
	assert_memory_equal(rec + r.off + 4, data, blen);
	free(rec);
	assert_true(reply_or_eof(cc, 0x7002));
	cc_close(cc);
	harness_stop(&h);
	harness_finish(&h);
	free(data);
	free(call);
}

/*
 * NULL calls are served on the loop (rpc_call_is_null): with the one worker held by a slow
 * call, a NULL pipelined behind it on the same connection, and one over UDP, are answered
 * first, and the slow call's reply still follows.
 */
static void test_net_null_on_loop(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 1, .no_udp = true,
			       .no_busy_poll_us = 100 };
	uint8_t req[512], rep[4096];
	struct harness h;
	struct cconn *cc;
	struct rep r;
	size_t n, k;
	int ufd;

	(void)state;
	harness_start_opts(&h, &no);
	cc = cc_open(h.port);
	send_call(cc, 0x8001, P_SLOW);
	send_call(cc, 0x8002, 0);
	assert_true(reply_or_eof(cc, 0x8002));
	ufd = udp_socket(AF_INET, h.port);
	n = mkcall(req, sizeof(req), 0x8003, TEST_PROG, 0, NULL, 0, false);
	k = udp_call(ufd, req, n, rep, sizeof(rep));
	assert_true(k > 0);
	parse_rep(rep, k, &r);
	assert_int_equal(r.xid, 0x8003);
	assert_int_equal(r.code, SUCCESS);
	close(ufd);
	assert_true(reply_or_eof(cc, 0x8001));
	null_ok(cc, 0x8004);
	cc_close(cc);
	harness_stop(&h);
	harness_finish(&h);
}

static void test_net_max_conns(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_max_conns = 2 };
	struct cconn *a, *b, *c, *d;
	struct harness h;

	(void)state;
	harness_start_opts(&h, &no);
	a = cc_open(h.port);
	null_ok(a, 1);
	b = cc_open(h.port);
	null_ok(b, 2);
	c = cc_open(h.port);
	null_ok(c, 3);
	assert_true(cc_closed_within(a, 2000));
	null_ok(b, 4);
	/* Both busy for a while (8 slow calls each, two workers): nothing can make room. */
	cc_busy(b, 100, 8);
	cc_busy(c, 200, 8);
	assert_true(wait_peer_read(b->cc_fd, WAIT_MS) && wait_peer_read(c->cc_fd, WAIT_MS));
	d = cc_open(h.port);
	send_call(d, 5, 0);
	assert_false(reply_or_eof(d, 5));
	cc_busy_done(b, 100, 8);
	cc_busy_done(c, 200, 8);
	cc_close(d);
	cc_close(a);
	cc_close(b);
	cc_close(c);
	harness_stop(&h);
	harness_finish(&h);
}

/*
 * One address past max_conns_per_host closes its own connection idle longest (or, all
 * busy, its new one), while another address is served next to it.
 */
static void test_net_per_host(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 3, .no_max_conns = 10,
			       .no_max_conns_per_host = 2 };
	struct cconn *a1, *a2, *a3, *a4, *b1;
	struct harness h;

	(void)state;
	harness_start_opts(&h, &no);
	a1 = cc_open_from("127.0.0.1", h.port);
	null_ok(a1, 1);
	a2 = cc_open_from("127.0.0.1", h.port);
	null_ok(a2, 2);
	b1 = cc_open_from("127.0.0.2", h.port);
	null_ok(b1, 3);
	a3 = cc_open_from("127.0.0.1", h.port);
	null_ok(a3, 4);
	assert_true(cc_closed_within(a1, 2000));
	null_ok(b1, 5);
	null_ok(a2, 6);
	/* Both of its connections busy: its next one is closed, the other address's is not. */
	cc_busy(a2, 100, 4);
	cc_busy(a3, 200, 4);
	assert_true(wait_peer_read(a2->cc_fd, WAIT_MS) && wait_peer_read(a3->cc_fd, WAIT_MS));
	a4 = cc_open_from("127.0.0.1", h.port);
	send_call(a4, 7, 0);
	assert_false(reply_or_eof(a4, 7));
	null_ok(b1, 8);
	cc_busy_done(a2, 100, 4);
	cc_busy_done(a3, 200, 4);
	cc_close(a1);
	cc_close(a2);
	cc_close(a3);
	cc_close(a4);
	cc_close(b1);
	harness_stop(&h);
	harness_finish(&h);
}

/*
 * A connection in use (more than one call, the last one recent) is not closed to make
 * room even while it is idle longest: one that made a single call goes instead, and when
 * only connections in use are idle the new connection is closed itself.
 */
static void test_net_in_use_kept(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_max_conns = 2 };
	struct cconn *a, *b, *c, *d;
	struct harness h;

	(void)state;
	harness_start_opts(&h, &no);
	a = cc_open(h.port);
	null_ok(a, 1);
	null_ok(a, 2);
	b = cc_open(h.port);
	null_ok(b, 3);
	/* a is idle longest, but b made one call only. */
	c = cc_open(h.port);
	null_ok(c, 4);
	assert_true(cc_closed_within(b, 2000));
	null_ok(a, 5);
	/* c in use too: both idle, neither may go, so the newest is closed. */
	null_ok(c, 6);
	d = cc_open(h.port);
	send_call(d, 7, 0);
	assert_false(reply_or_eof(d, 7));
	null_ok(a, 8);
	null_ok(c, 9);
	cc_close(a);
	cc_close(b);
	cc_close(c);
	cc_close(d);
	harness_stop(&h);
	harness_finish(&h);
}

/* A record mark sent a byte at a time is no call: such connections make room for others. */
static void test_net_trickle_is_idle(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_max_conns = 2 };
	struct cconn *x, *y, *z;
	struct harness h;
	uint8_t mark = 0x80;

	(void)state;
	harness_start_opts(&h, &no);
	x = cc_open_from("127.0.0.1", h.port);
	write_all(x->cc_fd, &mark, 1);
	assert_true(wait_peer_read(x->cc_fd, WAIT_MS));
	y = cc_open_from("127.0.0.1", h.port);
	write_all(y->cc_fd, &mark, 1);
	assert_true(wait_peer_read(y->cc_fd, WAIT_MS));
	/* The newest byte does not make x newer than y: x holds no call. */
	write_all(x->cc_fd, &mark, 1);
	assert_true(wait_peer_read(x->cc_fd, WAIT_MS));
	z = cc_open_from("127.0.0.2", h.port);
	send_call(z, 1, 0);
	assert_true(reply_or_eof(z, 1));
	assert_true(cc_closed_within(x, 2000));
	assert_false(cc_closed_within(y, 100));
	cc_close(x);
	cc_close(y);
	cc_close(z);
	harness_stop(&h);
	harness_finish(&h);
}

static bool admit_not_dot2(void *arg, const struct sockaddr *peer, socklen_t len)
{
	const struct sockaddr_in *s = (const struct sockaddr_in *)peer;

	(void)arg;
	assert_true(len >= sizeof(*s));
	assert_int_equal(peer->sa_family, AF_INET);
	return ntohl(s->sin_addr.s_addr) != 0x7f000002u;
}

/* A client the admission callback refuses is closed at once and costs no slot. */
static void test_net_admit(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_max_conns = 1,
			       .no_admit = admit_not_dot2 };
	struct cconn *a, *r;
	struct harness h;

	(void)state;
	harness_start_opts(&h, &no);
	a = cc_open_from("127.0.0.1", h.port);
	send_call(a, 1, 0);
	assert_true(reply_or_eof(a, 1));
	for (int i = 0; i < 3; i++) {
		r = cc_open_from("127.0.0.2", h.port);
		send_call(r, 10, 0);
		assert_false(reply_or_eof(r, 10));
		cc_close(r);
	}
	/* The one slot stayed a's: it was never closed to make room. */
	send_call(a, 2, 0);
	assert_true(reply_or_eof(a, 2));
	cc_close(a);
	harness_stop(&h);
	harness_finish(&h);
}

/*
 * The idle timeout counts from the last call received or reply sent: a record trickled a
 * byte at a time does not keep its connection open.
 */
static void test_net_idle_trickle(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_idle_timeout = 1 };
	uint8_t mark[4];
	struct cconn *t;
	struct harness h;
	double t0;
	bool closed = false;

	(void)state;
	harness_start_opts(&h, &no);
	t = cc_open(h.port);
	frame(mark, 100, true);
	write_all(t->cc_fd, mark, sizeof(mark));
	t0 = mono_now();
	/* A byte every 0.2 s: traffic, but never a call. */
	while (!closed && mono_now() - t0 < 4.0) {
		uint8_t b = 0;

		closed = send(t->cc_fd, &b, 1, MSG_NOSIGNAL) != 1 || cc_closed_within(t, 200);
	}
	print_message("a trickling connection was %s after %.1f s (idle timeout 1 s)\n",
		      closed ? "closed" : "still open", mono_now() - t0);
	assert_true(closed);
	cc_close(t);
	harness_stop(&h);
	harness_finish(&h);
}

/* A connection without traffic is closed after the idle timeout, but not while a call runs. */
static void test_net_idle_timeout(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_idle_timeout = 1 };
	struct cconn *a, *busy;
	struct harness h;
	double t0;

	(void)state;
	harness_start_opts(&h, &no);
	a = cc_open(h.port);
	busy = cc_open(h.port);
	send_call(a, 1, 0);
	assert_true(reply_or_eof(a, 1));
	t0 = mono_now();
	/* Eight slow calls back to back keep busy's connection in use for 1.6 s at least. */
	for (uint32_t i = 0; i < 8; i++)
		send_call(busy, 100 + i, P_SLOW);
	assert_false(reply_or_eof(a, 2));
	assert_true(mono_now() - t0 >= 0.9);
	assert_true(mono_now() - t0 < 4.0);
	for (uint32_t i = 0; i < 8; i++)
		assert_true(reply_in(busy, 100, 7));
	/* Idle afterwards: closed too. */
	assert_false(reply_or_eof(busy, 0));
	cc_close(a);
	cc_close(busy);
	harness_stop(&h);
	harness_finish(&h);
}

/* max_requests bounds the calls of one connection served at once. */
static void test_net_max_requests(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 3, .no_max_requests = 1 };
	struct cconn *a;
	struct harness h;
	double t0, dt;

	(void)state;
	harness_start_opts(&h, &no);
	a = cc_open(h.port);
	t0 = mono_now();
	for (uint32_t i = 0; i < 6; i++)
		send_call(a, 10 + i, P_SLOW);
	for (uint32_t i = 0; i < 6; i++)
		assert_true(reply_or_eof(a, 10 + i));
	dt = mono_now() - t0;
	/* One at a time: 6 x 200 ms; three workers in parallel would take 400 ms. */
	print_message("6 slow calls with max_requests 1 took %.2f s\n", dt);
	assert_true(dt >= 1.1);
	cc_close(a);
	harness_stop(&h);
	harness_finish(&h);
}

/*
 * A tiny max_buffered: a client that never reads blocks only itself; another client that
 * holds nothing is still served one call at a time.
 */
static void test_net_max_buffered(void **state)
{
	struct net_opts no = { .no_listen = "127.0.0.1", .no_workers = 2, .no_max_record = 2u << 20,
			       .no_max_buffered = 1u << 20 };
	size_t blen = 256u << 10;
	uint8_t *data = calloc(1, blen), *call = malloc(blen + 512);
	struct cconn *good;
	struct harness h;
	int fd, rcv = 4096;
	size_t n;

	(void)state;
	harness_start_opts(&h, &no);
	fd = tcp_connect(AF_INET, h.port);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	n = mkcall(call + 4, blen + 508, 0x7000, TEST_PROG, P_ECHO, data, (uint32_t)blen, true);
	frame(call, (uint32_t)n, true);
	n += 4;
	/* Echoes of 256 KiB, never read: soon past the 1 MiB limit. */
	for (int i = 0; i < 40; i++) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		size_t off = 0;

		while (off < n && poll(&pfd, 1, 300) == 1) {
			ssize_t k = send(fd, call + off, n - off, MSG_DONTWAIT);

			if (k > 0)
				off += (size_t)k;
		}
		if (off < n)
			break;
	}
	good = cc_open(h.port);
	for (uint32_t i = 0; i < 20; i++) {
		send_call(good, 500 + i, 0);
		assert_true(reply_or_eof(good, 500 + i));
	}
	cc_close(good);
	close(fd);
	free(data);
	free(call);
	harness_stop(&h);
	harness_finish(&h);
}

static void test_net_bad_listen(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct net_opts no = { .no_listen = "not-an-address" };
	struct net_server *srv;
	char err[256];

	(void)state;
	assert_int_equal(net_server_create(loop, &no, &srv), 0);
	assert_true(net_listen(srv, 0, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "not-an-address"));
	net_server_free(srv);

	/* The same port twice: the second bind fails with a message naming it. */
	no.no_listen = "127.0.0.1";
	assert_int_equal(net_server_create(loop, &no, &srv), 0);
	{
		int port = net_listen(srv, 0, err, sizeof(err));
		char want[32];

		assert_true(port > 0);
		assert_true(net_listen(srv, port, err, sizeof(err)) < 0);
		snprintf(want, sizeof(want), "port %d", port);
		assert_non_null(strstr(err, want));
	}
	net_server_free(srv);
	ev_loop_destroy(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_net_v4),
		cmocka_unit_test(test_net_tcp_only),
		cmocka_unit_test(test_net_dual),
		cmocka_unit_test(test_net_shutdown),
		cmocka_unit_test_teardown(test_net_emfile, restore_nofile),
		cmocka_unit_test(test_net_backpressure),
		cmocka_unit_test(test_net_worker_reply_finished_first),
		cmocka_unit_test(test_net_null_on_loop),
		cmocka_unit_test(test_net_max_conns),
		cmocka_unit_test(test_net_per_host),
		cmocka_unit_test(test_net_in_use_kept),
		cmocka_unit_test(test_net_trickle_is_idle),
		cmocka_unit_test(test_net_admit),
		cmocka_unit_test(test_net_idle_trickle),
		cmocka_unit_test(test_net_idle_timeout),
		cmocka_unit_test(test_net_max_requests),
		cmocka_unit_test(test_net_max_buffered),
		cmocka_unit_test(test_net_bad_listen),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
