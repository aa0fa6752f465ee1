/*
 * Fuzzes the network server (net/server.c) through real sockets: connection handling,
 * record reassembly on the socket, UDP, flow control and the memory accounting of
 * max-buffered. Two servers run in-process on this thread's libev loop over the served
 * world of serve_env.c, with limits scaled down so the pressure paths are reached by
 * small inputs (FUZZ_SERVERS below). Clients are sockets of this process on the same
 * loop. The input is a script:
 *   byte 0       bit 0: which server
 *   then ops     op & 7 is the operation, k = op >> 3 & 7 the client, v = op >> 6:
 *     0 OPEN     connect client k; v & 1: from a privileged port, as NFS clients do;
 *                v & 2: with a small receive buffer, so replies back up in the server
 *     1 SEND     n = next byte + 1: the next n bytes as they are
 *     2 RECORD   h = next 2 bytes (& 0x3fff), f = next byte: a last-fragment mark for
 *                h + f KiB (none if v & 1), the next h bytes, then f KiB of zeros (a
 *                WRITE's body); the loop runs only when the socket takes no more
 *     3 UDP      n = next 2 bytes: a datagram of the next n bytes (v & 1: privileged port)
 *     4 SHUT     v = 0: shutdown(SHUT_WR); 1: close(); 2, 3: close with a reset
 *     5 READ     client k stops reading its replies, or starts again
 *     6 PUMP     runs the loop (next byte & 15) + 1 times without waiting
 *     7 SETTLE   runs the loop until no call is being served
 * Afterwards every client half-closes, reads to the end and closes, and the server must
 * let go of everything. Checked beyond crashes and leaks:
 *   - the buffered bytes never exceed a bound computed from the limits (no runaway and
 *     no wrap of the unsigned count), and are 0 again once every connection is closed;
 *   - the server closes every connection whose client went away and serves every call
 *     within FUZZ_DEADLINE (no stall);
 *   - every reply is one last-fragment record (a datagram on UDP) of an RPC REPLY whose
 *     xid the client sent, and no call is answered more often than it was sent.
 * FUZZ_CONN_RESET (default 64) inputs run on the tree before it is reset to pristine;
 * FUZZ_CONN_STATS=1 prints the replies each input got and, at exit, the largest overshoot
 * of max-buffered seen.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "record.h"
#include "serve_env.h"

#define FUZZ_CLIENTS 8
#define FUZZ_SEND_TRIES 64           /* turns of the loop a blocked send waits */
#define FUZZ_SEND_TURN 0.002         /* seconds one such turn may wait for an event */
#define FUZZ_SMALL_RCVBUF 4096
#define FUZZ_XIDS 256
#define FUZZ_DEADLINE 5.0            /* seconds the server may take to settle */
#define FUZZ_REPLY_MAX (2u << 20)    /* larger than any reply the server makes */
#define FUZZ_PIECE (64u << 10)       /* bytes sent between two turns of the loop */
/* Generous ceilings of what one connection may hold beyond max-buffered (server.c). */
#define FUZZ_CALL_MAX ((1u << 20) + (64u << 10))  /* a call's reserved reply, plus slack */
#define FUZZ_OUTQ_MAX (6u << 20)
#define FUZZ_SECURE_PORTS 400        /* privileged source ports tried, from 600 up */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_conn: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/*
 * The limits of the two servers: tight (and fewer connections per host than the script
 * has clients, all of them from 127.0.0.1), and records larger than max-buffered.
 */
static const struct net_opts fuzz_opts[2] = {
	{ .no_listen = "127.0.0.1", .no_workers = 2, .no_max_record = 16u << 10,
	  .no_max_requests = 4, .no_max_buffered = 48u << 10, .no_max_conns = 8,
	  .no_max_conns_per_host = 6 },
	{ .no_listen = "127.0.0.1", .no_workers = 2, .no_max_record = 512u << 10,
	  .no_max_requests = 2, .no_max_buffered = 128u << 10, .no_max_conns = 8 },
};

/* The xids sent and not yet answered (a multiset); past FUZZ_XIDS nothing is checked. */
struct fuzz_xids {
	uint32_t fx_xid[FUZZ_XIDS];
	unsigned fx_n;
	bool fx_lost;
};

struct fuzz_client {
	int fc_fd;                   /* -1: not open */
	bool fc_reading;
	bool fc_ended;               /* the server closed (end of file or reset) */
	struct record_rx fc_sent;    /* what was sent, reassembled for its xids */
	struct fuzz_xids fc_xids;
	uint8_t fc_head[12];         /* reply parser: mark, xid, message type */
	unsigned fc_headhave;
	size_t fc_skip;              /* rest of the reply being read */
	ev_io fc_io;
};

static struct {
	struct ev_loop *fz_loop;
	struct net_server *fz_srv[2];
	int fz_port[2];
	int fz_udp[2];               /* [1] bound to a privileged port */
	ev_io fz_udp_io[2];
	struct fuzz_xids fz_udp_xids;
	struct fuzz_client fz_cl[FUZZ_CLIENTS];
	unsigned fz_next_port;
	unsigned fz_count, fz_reset_every;
	uint64_t fz_peak_over;
	unsigned fz_replies;         /* of the current input */
	bool fz_stats;
} fz;

static uint8_t fuzz_zeros[FUZZ_PIECE];
static uint8_t fuzz_buf[FUZZ_PIECE];

static void fuzz_die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz_conn: %s: %s\n", what, why);
	abort();
}

static uint32_t fuzz_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fuzz_xid_add(struct fuzz_xids *x, const uint8_t *rec, size_t len)
{
	if (len < 4)
		return;
	if (x->fx_n == FUZZ_XIDS)
		x->fx_lost = true;
	else
		x->fx_xid[x->fx_n++] = fuzz_be32(rec);
}

/* A reply must answer a call that was sent and not answered yet. */
static void fuzz_xid_take(struct fuzz_xids *x, uint32_t xid)
{
	for (unsigned i = 0; i < x->fx_n; i++) {
		if (x->fx_xid[i] == xid) {
			x->fx_xid[i] = x->fx_xid[--x->fx_n];
			return;
		}
	}
	if (!x->fx_lost)
		fuzz_die("reply", "an xid that was never sent (or answered twice)");
}

/* The head of one reply: a single last fragment carrying an RPC REPLY. */
static void fuzz_reply_head(struct fuzz_xids *x, const uint8_t *body, size_t len)
{
	fuzz_check(len >= 12 && len <= FUZZ_REPLY_MAX);
	fuzz_check(fuzz_be32(body + 4) == 1);
	fuzz_xid_take(x, fuzz_be32(body));
	fz.fz_replies++;
}

static void fuzz_parse_replies(struct fuzz_client *c, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t take;

		if (c->fc_skip > 0) {
			take = n < c->fc_skip ? n : c->fc_skip;
			c->fc_skip -= take;
		} else {
			take = sizeof(c->fc_head) - c->fc_headhave;
			if (take > n)
				take = n;
			memcpy(c->fc_head + c->fc_headhave, p, take);
			c->fc_headhave += (unsigned)take;
			if (c->fc_headhave == sizeof(c->fc_head)) {
				uint32_t mark = fuzz_be32(c->fc_head);

				fuzz_check(mark & 0x80000000u);
				fuzz_reply_head(&c->fc_xids, c->fc_head + 4, mark & 0x7fffffffu);
				c->fc_skip = (mark & 0x7fffffffu) - 8;
				c->fc_headhave = 0;
			}
		}
		p += take;
		n -= take;
	}
}

static void fuzz_client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fuzz_client *c = w->data;
	ssize_t n;

	(void)revents;
	for (;;) {
		n = recv(c->fc_fd, fuzz_buf, sizeof(fuzz_buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		fuzz_parse_replies(c, fuzz_buf, (size_t)n);
	}
	/* A reply cut short by the close is fine: the server may drop a connection's queue. */
	c->fc_ended = true;
	ev_io_stop(loop, w);
}

static void fuzz_udp_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	ssize_t n;

	(void)loop;
	(void)revents;
	while ((n = recv(w->fd, fuzz_buf, sizeof(fuzz_buf), MSG_DONTWAIT)) >= 0)
		fuzz_reply_head(&fz.fz_udp_xids, fuzz_buf, (size_t)n);
}

/* Binds fd to a free privileged port of 127.0.0.1: the NFS export wants "secure" clients. */
static void fuzz_bind_secure(int fd)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	for (int i = 0; i < FUZZ_SECURE_PORTS; i++) {
		sin.sin_port = htons((uint16_t)(600 + fz.fz_next_port++ % FUZZ_SECURE_PORTS));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
			return;
	}
}

static void fuzz_udp_open(int i)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	fz.fz_udp[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fz.fz_udp[i] < 0)
		fuzz_die("udp socket", strerror(errno));
	if (i == 1)
		fuzz_bind_secure(fz.fz_udp[i]);
	else if (bind(fz.fz_udp[i], (struct sockaddr *)&sin, sizeof(sin)) < 0)
		fuzz_die("udp bind", strerror(errno));
	ev_io_init(&fz.fz_udp_io[i], fuzz_udp_cb, fz.fz_udp[i], EV_READ);
	ev_io_start(fz.fz_loop, &fz.fz_udp_io[i]);
}

static void fuzz_cleanup(void)
{
	for (int i = 0; i < 2; i++) {
		net_server_free(fz.fz_srv[i]);
		ev_io_stop(fz.fz_loop, &fz.fz_udp_io[i]);
		close(fz.fz_udp[i]);
	}
	if (fz.fz_stats)
		fprintf(stderr, "fuzz_conn: largest overshoot of max-buffered: %llu bytes\n",
			(unsigned long long)fz.fz_peak_over);
	ev_loop_destroy(fz.fz_loop);
	senv_close();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *e = getenv("FUZZ_CONN_RESET");
	char err[512];

	(void)argc;
	(void)argv;
	fz.fz_reset_every = e != NULL && atoi(e) > 0 ? (unsigned)atoi(e) : 64;
	fz.fz_stats = getenv("FUZZ_CONN_STATS") != NULL;
	senv_open();
	fz.fz_loop = ev_loop_new(EVFLAG_AUTO);
	if (fz.fz_loop == NULL)
		fuzz_die("ev_loop_new", "failed");
	for (int i = 0; i < 2; i++) {
		if (net_server_create(fz.fz_loop, &fuzz_opts[i], &fz.fz_srv[i]) != 0)
			fuzz_die("net_server_create", "failed");
		fz.fz_port[i] = net_listen(fz.fz_srv[i], 0, err, sizeof(err));
		if (fz.fz_port[i] <= 0)
			fuzz_die("net_listen", err);
		fuzz_udp_open(i);
	}
	for (int k = 0; k < FUZZ_CLIENTS; k++)
		fz.fz_cl[k].fc_fd = -1;
	atexit(fuzz_cleanup);
	return 0;
}

/* ---- the script ---- */

struct fuzz_in {
	const uint8_t *fi_p;
	size_t fi_left;
};

static unsigned fuzz_byte(struct fuzz_in *in)
{
	if (in->fi_left == 0)
		return 0;
	in->fi_left--;
	return *in->fi_p++;
}

/* A 2-byte big-endian number (the two reads in sequence: call order is unspecified). */
static size_t fuzz_u16(struct fuzz_in *in)
{
	size_t hi = fuzz_byte(in);

	return hi << 8 | fuzz_byte(in);
}

static const uint8_t *fuzz_take(struct fuzz_in *in, size_t *n)
{
	const uint8_t *p = in->fi_p;

	if (*n > in->fi_left)
		*n = in->fi_left;
	in->fi_p += *n;
	in->fi_left -= *n;
	return p;
}

/*
 * The bound on buffered bytes: max-buffered twice over, plus what each connection may add,
 * plus the calls in flight (those of closed connections stay counted until served).
 */
static void fuzz_check_usage(int s)
{
	const struct net_opts *o = &fuzz_opts[s];
	struct net_usage u;
	uint64_t per_conn, bound;

	net_server_usage(fz.fz_srv[s], &u);
	per_conn = (uint64_t)o->no_max_requests * (o->no_max_record + FUZZ_CALL_MAX) +
		   2ull * o->no_max_record + 2ull * FUZZ_PIECE + FUZZ_OUTQ_MAX + FUZZ_CALL_MAX;
	bound = 2 * o->no_max_buffered + (uint64_t)u.nu_conns * per_conn +
		(uint64_t)u.nu_inflight * (o->no_max_record + FUZZ_CALL_MAX);
	if (u.nu_buffered > o->no_max_buffered && u.nu_buffered - o->no_max_buffered > fz.fz_peak_over)
		fz.fz_peak_over = u.nu_buffered - o->no_max_buffered;
	if (u.nu_buffered > bound) {
		fprintf(stderr, "fuzz_conn: %llu bytes buffered over %u connections, bound %llu\n",
			(unsigned long long)u.nu_buffered, u.nu_conns, (unsigned long long)bound);
		abort();
	}
}

static void fuzz_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

/* One turn of the loop that waits up to FUZZ_SEND_TURN for an event (a call served). */
static void fuzz_turn(int s)
{
	bool timed_out = false;
	ev_timer t;

	ev_timer_init(&t, fuzz_timeout_cb, FUZZ_SEND_TURN, 0);
	t.data = &timed_out;
	ev_timer_start(fz.fz_loop, &t);
	ev_run(fz.fz_loop, EVRUN_ONCE);
	ev_timer_stop(fz.fz_loop, &t);
	fuzz_check_usage(s);
}

static void fuzz_pump(int s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		ev_run(fz.fz_loop, EVRUN_NOWAIT);
		fuzz_check_usage(s);
	}
}


enum fuzz_wait { FUZZ_SERVED, FUZZ_ENDED, FUZZ_EMPTY };

static bool fuzz_waited(int s, enum fuzz_wait what)
{
	struct net_usage u;

	net_server_usage(fz.fz_srv[s], &u);
	if (what == FUZZ_SERVED)
		return u.nu_inflight == 0;
	if (what == FUZZ_EMPTY)
		return u.nu_inflight == 0 && u.nu_conns == 0;
	for (int k = 0; k < FUZZ_CLIENTS; k++)
		if (fz.fz_cl[k].fc_fd >= 0 && !fz.fz_cl[k].fc_ended)
			return false;
	return true;
}

/* Runs the loop until what is reached; not within FUZZ_DEADLINE is a stall. */
static void fuzz_wait(int s, enum fuzz_wait what)
{
	static const char *const names[] = { "calls being served", "connections not answered",
					     "connections not closed" };
	bool timed_out = false;
	ev_timer deadline;

	ev_timer_init(&deadline, fuzz_timeout_cb, FUZZ_DEADLINE, 0);
	deadline.data = &timed_out;
	ev_timer_start(fz.fz_loop, &deadline);
	while (!fuzz_waited(s, what) && !timed_out) {
		ev_run(fz.fz_loop, EVRUN_ONCE);
		fuzz_check_usage(s);
	}
	ev_timer_stop(fz.fz_loop, &deadline);
	if (timed_out) {
		struct net_usage u;

		net_server_usage(fz.fz_srv[s], &u);
		fprintf(stderr, "fuzz_conn: stall: %s after %.0f s (%u connections, %u calls, %llu bytes buffered)\n",
			names[what], FUZZ_DEADLINE, u.nu_conns, u.nu_inflight,
			(unsigned long long)u.nu_buffered);
		abort();
	}
}

static void fuzz_open(int s, struct fuzz_client *c, bool secure, bool small)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)fz.fz_port[s]),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	if (c->fc_fd >= 0)
		return;
	c->fc_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fc_fd < 0)
		fuzz_die("socket", strerror(errno));
	if (secure)
		fuzz_bind_secure(c->fc_fd);
	if (small)
		setsockopt(c->fc_fd, SOL_SOCKET, SO_RCVBUF, &(int){ FUZZ_SMALL_RCVBUF }, sizeof(int));
	/* Blocking: the listener's backlog has room, so this returns at once. */
	if (connect(c->fc_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    fcntl(c->fc_fd, F_SETFL, O_NONBLOCK) < 0)
		fuzz_die("connect", strerror(errno));
	setsockopt(c->fc_fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	c->fc_reading = true;
	c->fc_ended = false;
	c->fc_headhave = 0;
	c->fc_skip = 0;
	c->fc_xids.fx_n = 0;
	c->fc_xids.fx_lost = false;
	record_init(&c->fc_sent, 1u << 30);
	ev_io_init(&c->fc_io, fuzz_client_cb, c->fc_fd, EV_READ);
	c->fc_io.data = c;
	ev_io_start(fz.fz_loop, &c->fc_io);
}

static void fuzz_close(struct fuzz_client *c, bool reset)
{
	if (c->fc_fd < 0)
		return;
	if (reset)
		setsockopt(c->fc_fd, SOL_SOCKET, SO_LINGER,
			   &(struct linger){ .l_onoff = 1, .l_linger = 0 }, sizeof(struct linger));
	ev_io_stop(fz.fz_loop, &c->fc_io);
	close(c->fc_fd);
	c->fc_fd = -1;
	record_free(&c->fc_sent);
}

/* Notes the records in what went out, so their replies can be recognised. */
static void fuzz_track_sent(struct fuzz_client *c, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t used = 0, len;
		enum record_status st = record_feed(&c->fc_sent, p, n, &used);

		p += used;
		n -= used;
		if (st == RECORD_DONE) {
			uint8_t *rec = record_take(&c->fc_sent, &len);

			fuzz_xid_add(&c->fc_xids, rec, len);
			free(rec);
		} else if (st != RECORD_MORE) {
			/* A mark no server would take: what follows is not tracked. */
			c->fc_xids.fx_lost = true;
			record_free(&c->fc_sent);
			record_init(&c->fc_sent, 1u << 30);
			return;
		}
	}
}

/*
 * Sends all n bytes, letting the server run only while the socket takes no more, so what
 * one op sends arrives together. What a server that stopped reading leaves is dropped, as
 * a stream cut short. False when not all went out.
 */
static bool fuzz_send(int s, struct fuzz_client *c, const uint8_t *p, size_t n)
{
	int tries = 0;

	while (n > 0 && c->fc_fd >= 0) {
		ssize_t r = send(c->fc_fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && tries++ < FUZZ_SEND_TRIES) {
			fuzz_turn(s);
			continue;
		}
		if (r <= 0)
			return false;
		fuzz_track_sent(c, p, (size_t)r);
		p += r;
		n -= (size_t)r;
		tries = 0;
	}
	return n == 0;
}

static void fuzz_record(int s, struct fuzz_client *c, bool raw, struct fuzz_in *in)
{
	size_t h = fuzz_u16(in) & 0x3fff;
	size_t fill = (size_t)fuzz_byte(in) << 10;
	const uint8_t *head = fuzz_take(in, &h);
	uint8_t mark[4];

	record_mark(mark, (uint32_t)(h + fill));
	if ((!raw && !fuzz_send(s, c, mark, 4)) || (h > 0 && !fuzz_send(s, c, head, h)))
		return;
	while (fill > 0) {
		size_t piece = fill < FUZZ_PIECE ? fill : FUZZ_PIECE;

		if (!fuzz_send(s, c, fuzz_zeros, piece))
			return;
		fill -= piece;
	}
}

static void fuzz_udp(int s, bool secure, struct fuzz_in *in)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)fz.fz_port[s]),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	size_t n = fuzz_u16(in);
	const uint8_t *p = fuzz_take(in, &n);

	if (sendto(fz.fz_udp[secure], p, n, MSG_DONTWAIT, (struct sockaddr *)&sin, sizeof(sin)) ==
	    (ssize_t)n && n > 0)
		fuzz_xid_add(&fz.fz_udp_xids, p, n);
}

static void fuzz_op(int s, struct fuzz_in *in)
{
	unsigned op = fuzz_byte(in), v = op >> 6;
	struct fuzz_client *c = &fz.fz_cl[op >> 3 & 7];
	const uint8_t *p;
	size_t n;

	switch (op & 7) {
	case 0:
		fuzz_open(s, c, v & 1, v & 2);
		break;
	case 1:
		n = fuzz_byte(in) + 1;
		p = fuzz_take(in, &n);   /* shortens n to what the input has left */
		fuzz_send(s, c, p, n);
		break;
	case 2:
		fuzz_record(s, c, v & 1, in);
		break;
	case 3:
		fuzz_udp(s, v & 1, in);
		break;
	case 4:
		if (v == 0 && c->fc_fd >= 0)
			shutdown(c->fc_fd, SHUT_WR);
		else
			fuzz_close(c, v >= 2);
		break;
	case 5:
		if (c->fc_fd >= 0 && !c->fc_ended) {
			c->fc_reading = !c->fc_reading;
			if (c->fc_reading)
				ev_io_start(fz.fz_loop, &c->fc_io);
			else
				ev_io_stop(fz.fz_loop, &c->fc_io);
		}
		break;
	case 6:
		fuzz_pump(s, (fuzz_byte(in) & 15) + 1);
		break;
	default:
		fuzz_wait(s, FUZZ_SERVED);
		break;
	}
	fuzz_pump(s, 1);
}

/* Every client says it is done and reads the rest; then the server must hold nothing. */
static void fuzz_finish(int s)
{
	struct net_usage u;

	for (int k = 0; k < FUZZ_CLIENTS; k++) {
		struct fuzz_client *c = &fz.fz_cl[k];

		if (c->fc_fd < 0 || c->fc_ended)
			continue;
		shutdown(c->fc_fd, SHUT_WR);
		if (!c->fc_reading) {
			c->fc_reading = true;
			ev_io_start(fz.fz_loop, &c->fc_io);
		}
	}
	fuzz_wait(s, FUZZ_ENDED);
	for (int k = 0; k < FUZZ_CLIENTS; k++)
		fuzz_close(&fz.fz_cl[k], false);
	fuzz_wait(s, FUZZ_EMPTY);
	fuzz_udp_cb(fz.fz_loop, &fz.fz_udp_io[0], 0);
	fuzz_udp_cb(fz.fz_loop, &fz.fz_udp_io[1], 0);
	net_server_usage(fz.fz_srv[s], &u);
	if (u.nu_buffered != 0) {
		fprintf(stderr, "fuzz_conn: %llu bytes still counted as buffered with no connection and no call\n",
			(unsigned long long)u.nu_buffered);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	int s = fuzz_byte(&in) & 1;

	if (fz.fz_count++ % fz.fz_reset_every == 0 && fz.fz_count > 1)
		senv_reset();
	fz.fz_udp_xids.fx_n = 0;
	fz.fz_udp_xids.fx_lost = false;
	fz.fz_replies = 0;
	while (in.fi_left > 0)
		fuzz_op(s, &in);
	fuzz_finish(s);
	if (fz.fz_stats)
		fprintf(stderr, "fuzz_conn: %u replies\n", fz.fz_replies);
	return 0;
}
