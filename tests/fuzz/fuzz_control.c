/*
 * Fuzzes the control socket and the metrics endpoint (ctl/socket.c, ctl/control.c, ctl/metrics.c) through their real
 * sockets: the control server runs on this thread's libev loop over the served world of
 * serve_env.c (so `status`, `check` and `reset` have exports, a store and a MOUNT list to
 * report on), with its UNIX socket in the world's directory and --metrics on a free
 * loopback port.
 * Input: byte 0 is flags, the rest is up to FUZZ_CONNS requests separated by FUZZ_SEP,
 * each sent on a connection of its own, all open at once. Flag bit i makes request i an
 * HTTP request to the metrics port (else a control line); bits 4-5 pick how the bytes go
 * out: whole, one byte at a time, or in pseudo-random chunks, the server's loop running
 * between chunks. Then every client half-closes and reads the reply to the end.
 * Checked beyond crashes and leaks: every request is answered and the connection closed
 * within FUZZ_DEADLINE (no hang), a control reply is text ending in a newline, an HTTP
 * reply is a response whose Content-Length is its body.
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
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "nlm_locks.h"
#include "serve_env.h"

#define FUZZ_CONNS 4
#define FUZZ_SEP "\xff\xfe"
#define FUZZ_DEADLINE 8.0         /* seconds; below CONTROL_TIMEOUT, so a stall is ours */
#define FUZZ_REPLY_MAX (256u << 10)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_control: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

struct fuzz_client {
	int fc_fd;
	bool fc_http;
	const uint8_t *fc_req;
	size_t fc_reqlen, fc_sent;
	bool fc_send_failed;        /* the server closed before taking everything */
	char *fc_reply;
	size_t fc_replylen;
	bool fc_done;
	bool fc_reset;              /* ended by ECONNRESET: the reply may be cut short */
	ev_io fc_io;
};

static struct {
	struct ev_loop *fz_loop;
	struct config fz_cf;
	struct control *fz_ctl;
	struct locks_table *fz_locks;
	struct sockaddr_un fz_sun;
	struct sockaddr_in fz_metrics;
	unsigned fz_reloads;
} fz;

static void fuzz_die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz_control: %s: %s\n", what, why);
	abort();
}

static void fuzz_reload(void *arg)
{
	(void)arg;
	fz.fz_reloads++;
}

/* A lock table with two held locks and a waiter, for `locks`, `stats` and the gauges. */
static void fuzz_locks(void)
{
	static const struct {
		const char *host; int32_t svid; bool x, block; uint64_t off, len;
	} rqs[] = {
		{ "127.0.0.1", 1, true, false, 0, 100 }, { "::1", 2, false, false, 200, 0 },
		{ "::1", 3, false, true, 50, 10 },  /* waits for the first */
	};

	if (locks_table_create(NULL, &fz.fz_locks) != LOCKS_OK)
		fuzz_die("locks_table_create", "failed");
	for (size_t i = 0; i < sizeof(rqs) / sizeof(rqs[0]); i++) {
		struct locks_request rq = {
			.lq_object = { .lo_export = 1, .lo_fileid = 2 },
			.lq_owner = { .lw_host = rqs[i].host, .lw_svid = rqs[i].svid, .lw_oh = "o",
				      .lw_ohlen = 1 },
			.lq_type = rqs[i].x ? LOCKS_EXCLUSIVE : LOCKS_SHARED,
			.lq_offset = rqs[i].off, .lq_len = rqs[i].len, .lq_block = rqs[i].block,
		};

		locks_lock(fz.fz_locks, &rq, NULL, NULL, NULL);
	}
}

/* A free loopback port for --metrics: the kernel picks one, which is then given back. */
static int fuzz_free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		fuzz_die("metrics port", strerror(errno));
	close(fd);
	return ntohs(sin.sin_port);
}

static void fuzz_cleanup(void)
{
	control_close(fz.fz_ctl);
	locks_release_all(fz.fz_locks, NULL);
	locks_table_free(fz.fz_locks);
	ev_loop_destroy(fz.fz_loop);
	senv_close();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct control_env env = { .ce_cfg = &fz.fz_cf, .ce_reload = fuzz_reload };
	char err[512], addr[64];
	int port = 0, rc = -1;

	(void)argc;
	(void)argv;
	senv_open();
	fz.fz_loop = ev_loop_new(EVFLAG_AUTO);
	if (fz.fz_loop == NULL)
		fuzz_die("ev_loop_new", "failed");
	/* The served exports; the control socket goes in the world's directory. */
	fz.fz_cf = *senv_config();
	fz.fz_cf.cf_state_dir = (char *)senv_dir();
	env.ce_nfs = senv_nfs();
	fuzz_locks();
	env.ce_locks = fz.fz_locks;
	if (control_open(fz.fz_loop, &env, &fz.fz_ctl, err, sizeof(err)) != 0)
		fuzz_die("control_open", err);
	/* Another process may take the port between the probe and the bind: try again. */
	for (int i = 0; i < 8 && rc != 0; i++) {
		port = fuzz_free_port();
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		rc = control_metrics_open(fz.fz_ctl, addr, err, sizeof(err));
	}
	if (rc != 0)
		fuzz_die("control_metrics_open", err);
	fz.fz_sun.sun_family = AF_UNIX;
	snprintf(fz.fz_sun.sun_path, sizeof(fz.fz_sun.sun_path), "%s/%s", senv_dir(),
		 CONTROL_SOCKET_NAME);
	fz.fz_metrics.sin_family = AF_INET;
	fz.fz_metrics.sin_port = htons((uint16_t)port);
	fz.fz_metrics.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	atexit(fuzz_cleanup);
	return 0;
}

/* Reads what the server sends until it closes; keeps at most FUZZ_REPLY_MAX bytes. */
static void fuzz_client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fuzz_client *c = w->data;
	char buf[4096];
	ssize_t n;

	(void)revents;
	for (;;) {
		n = recv(c->fc_fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		fuzz_check(c->fc_replylen + (size_t)n <= FUZZ_REPLY_MAX);
		memcpy(c->fc_reply + c->fc_replylen, buf, (size_t)n);
		c->fc_replylen += (size_t)n;
	}
	c->fc_reset = n < 0;
	c->fc_done = true;
	ev_io_stop(loop, w);
}

static void fuzz_connect(struct fuzz_client *c)
{
	const struct sockaddr *sa = c->fc_http ? (const struct sockaddr *)&fz.fz_metrics
					       : (const struct sockaddr *)&fz.fz_sun;
	socklen_t len = c->fc_http ? sizeof(fz.fz_metrics) : sizeof(fz.fz_sun);

	c->fc_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* Blocking: both listeners have backlog room, so this returns at once. */
	if (c->fc_fd < 0 || connect(c->fc_fd, sa, len) < 0 ||
	    fcntl(c->fc_fd, F_SETFL, O_NONBLOCK) < 0)
		fuzz_die("connect", strerror(errno));
	/* Every chunk goes out at once, not held back by Nagle for an ACK. */
	if (c->fc_http)
		setsockopt(c->fc_fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	ev_io_init(&c->fc_io, fuzz_client_cb, c->fc_fd, EV_READ);
	c->fc_io.data = c;
	ev_io_start(fz.fz_loop, &c->fc_io);
}

/* Sends up to n more bytes of the request; a server that already answered may refuse. */
static void fuzz_send(struct fuzz_client *c, size_t n)
{
	ssize_t r;

	if (n > c->fc_reqlen - c->fc_sent)
		n = c->fc_reqlen - c->fc_sent;
	if (n == 0 || c->fc_send_failed)
		return;
	r = send(c->fc_fd, c->fc_req + c->fc_sent, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (r < 0)
		c->fc_send_failed = true;
	else
		c->fc_sent += (size_t)r;
}

/* A whole response: status line, head, and a body of exactly Content-Length bytes. */
static void fuzz_check_http(const char *r, size_t len)
{
	const char *end = memmem(r, len, "\r\n\r\n", 4), *cl;
	unsigned long body;

	fuzz_check(len > 9 && !memcmp(r, "HTTP/1.0 ", 9));
	fuzz_check(end != NULL);
	cl = memmem(r, (size_t)(end - r), "\r\nContent-Length: ", 18);
	fuzz_check(cl != NULL);
	body = strtoul(cl + 18, NULL, 10);
	fuzz_check((size_t)(end + 4 - r) + body == len);
}

static void fuzz_check_reply(const struct fuzz_client *c)
{
	/* FUZZ_CONTROL_VERBOSE=1: the first line of each reply, to see where seeds get. */
	if (getenv("FUZZ_CONTROL_VERBOSE") != NULL)
		fprintf(stderr, "  %s reply, %zu bytes%s: %.*s\n", c->fc_http ? "HTTP" : "control",
			c->fc_replylen, c->fc_reset ? " (reset)" : "",
			(int)strcspn(c->fc_reply, "\n"), c->fc_reply);
	/*
	 * A server that answers before reading everything closes with unread bytes: that
	 * resets the connection, and TCP may drop reply bytes not yet read (a UNIX socket
	 * keeps them), so a reset HTTP reply may be cut short.
	 */
	if (c->fc_reset && c->fc_http)
		return;
	fuzz_check(c->fc_replylen > 0);
	if (c->fc_http) {
		fuzz_check_http(c->fc_reply, c->fc_replylen);
		return;
	}
	fuzz_check(c->fc_reply[c->fc_replylen - 1] == '\n');
	fuzz_check(memchr(c->fc_reply, '\0', c->fc_replylen) == NULL);
}

static void fuzz_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

/* Splits the input into requests at FUZZ_SEP; returns how many. */
static int fuzz_split(const uint8_t *data, size_t size, uint8_t flags,
		      struct fuzz_client *cl)
{
	int n = 0;

	while (n < FUZZ_CONNS) {
		const uint8_t *sep = n < FUZZ_CONNS - 1 ? memmem(data, size, FUZZ_SEP, 2) : NULL;
		size_t len = sep ? (size_t)(sep - data) : size;

		cl[n].fc_req = data;
		cl[n].fc_reqlen = len;
		cl[n].fc_http = flags >> n & 1;
		n++;
		if (sep == NULL)
			break;
		data = sep + 2;
		size -= len + 2;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Static reply buffers: a fresh large one per input would cost more than the input. */
	static char replies[FUZZ_CONNS][FUZZ_REPLY_MAX];
	struct fuzz_client cl[FUZZ_CONNS];
	unsigned mode, rng;
	bool timed_out = false, left;
	ev_timer deadline;
	int n;

	if (size == 0)
		return 0;
	memset(cl, 0, sizeof(cl));
	for (int i = 0; i < FUZZ_CONNS; i++)
		cl[i].fc_reply = replies[i];
	mode = data[0] >> 4 & 3;
	rng = data[0] * 2654435761u + 1;
	n = fuzz_split(data + 1, size - 1, data[0], cl);
	for (int i = 0; i < n; i++)
		fuzz_connect(&cl[i]);
	do {
		left = false;
		for (int i = 0; i < n; i++) {
			rng = rng * 1103515245u + 12345u;
			fuzz_send(&cl[i], mode == 0 ? SIZE_MAX : mode == 1 ? 1 : 1 + (rng >> 16) % 300);
			left = left || (cl[i].fc_sent < cl[i].fc_reqlen && !cl[i].fc_send_failed);
		}
		ev_run(fz.fz_loop, EVRUN_NOWAIT);
	} while (left);
	for (int i = 0; i < n; i++)
		shutdown(cl[i].fc_fd, SHUT_WR);

	ev_timer_init(&deadline, fuzz_timeout_cb, FUZZ_DEADLINE, 0);
	deadline.data = &timed_out;
	ev_timer_start(fz.fz_loop, &deadline);
	for (;;) {
		bool all = true;

		for (int i = 0; i < n; i++)
			all = all && cl[i].fc_done;
		if (all || timed_out)
			break;
		ev_run(fz.fz_loop, EVRUN_ONCE);
	}
	ev_timer_stop(fz.fz_loop, &deadline);
	if (timed_out)
		fuzz_die("a request", "not answered within the deadline: the control server hangs");
	for (int i = 0; i < n; i++) {
		fuzz_check_reply(&cl[i]);
		close(cl[i].fc_fd);
	}
	return 0;
}
