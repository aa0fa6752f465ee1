/*
 * Hostile clients against the real server, started with small limits: oversize and
 * endless fragments, truncated records, garbage UDP, a thousand idle connections (and the
 * connection limit), clients that never read their replies, and a flood of pipelined calls
 * on one connection. While each attack runs a well-behaved client keeps calling GETATTR and
 * must be answered within PROBE_MAX_LATENCY; the server's memory is sampled from
 * /proc/PID/status and must stay under a stated bound; the server must survive it all and
 * exit 0 on SIGTERM (checked by the group teardown).
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IDLE_TIMEOUT 4                   /* --idle-timeout, seconds */
#define MAX_CONNS 1050                   /* --max-connections */
#define MAX_BUFFERED (32u << 20)         /* --max-buffered */
#define MAX_RECORD 1052672u              /* the default --max-record */
#define IDLE_CONNS 1000
#define EXTRA_CONNS 100
#define PROBE_MAX_LATENCY 2.0            /* seconds for one GETATTR of the good client */
/*
 * Memory bound on VmRSS/VmHWM: max-buffered plus a generous base; sanitizers need more.
 * The growth checks of each attack are the tight ones; this catches a runaway server.
 */
#define RSS_BOUND_MB 224
#define RSS_BOUND_ASAN_MB 768
#define BIG_FILE_LEN (4u << 20)

static nfs_fh3 root_fh, big_fh;
static unsigned long rss_bound_kb;

/* ---- time, memory ---- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* VmRSS or VmHWM of the server in KiB; 0 when it cannot be read. */
static unsigned long server_mem_kb(const char *field)
{
	char path[64], line[256];
	unsigned long kb = 0;
	size_t flen = strlen(field);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)it_srv.is_pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, flen) && line[flen] == ':')
			kb = strtoul(line + flen + 1, NULL, 10);
	fclose(f);
	return kb;
}

/*
 * The server's largest VmRSS in KiB, sampled every 50 ms for ms: memory over a stretch of
 * time, so there is no condition to wait for.
 */
static unsigned long server_rss_peak_kb(int ms)
{
	unsigned long peak = 0;

	for (double end = now_s() + ms / 1e3; now_s() < end; wait_ms(50)) {
		unsigned long rss = server_mem_kb("VmRSS");

		if (rss > peak)
			peak = rss;
	}
	return peak;
}

static bool server_alive(void)
{
	return it_srv.is_pid > 0 && kill(it_srv.is_pid, 0) == 0 && server_mem_kb("VmRSS") > 0;
}

/* Whether the server binary was built with AddressSanitizer (it then needs far more memory). */
static bool server_is_asan(void)
{
	size_t len;
	char *bin = it_read_file(it_server_binary(), &len);
	bool asan = bin != NULL && memmem(bin, len, "__asan_init", 11) != NULL;

	free(bin);
	return asan;
}

/* ---- the well-behaved client ---- */

struct probe {
	pthread_t p_thread;
	atomic_bool p_stop;
	unsigned p_calls;
	unsigned p_failures;
	double p_max_latency;
	unsigned long p_max_rss_kb;
	char p_first_error[200];
};

static bool probe_stopping(void *arg)
{
	struct probe *p = arg;

	return atomic_load(&p->p_stop);
}

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	int sock = RPC_ANYSOCK;
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c = clnttcp_create(&sin, NFS_PROGRAM, NFS_V3, &sock, 0, 0);
	if (c == NULL) {
		p->p_failures++;
		snprintf(p->p_first_error, sizeof(p->p_first_error), "connect: %s",
			 clnt_spcreateerror("clnttcp_create"));
		return NULL;
	}
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("unfs-probe", 0, 0, 0, NULL);
	while (!atomic_load(&p->p_stop)) {
		GETATTR3args a = { .object = root_fh };
		GETATTR3res r;
		struct timeval tv = { 10, 0 };
		double t0 = now_s(), dt;
		enum clnt_stat cs;
		unsigned long rss;

		memset(&r, 0, sizeof(r));
		cs = clnt_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, (char *)&a,
			       (xdrproc_t)xdr_GETATTR3res, (char *)&r, tv);
		dt = now_s() - t0;
		if (cs != RPC_SUCCESS || r.status != NFS3_OK) {
			if (p->p_failures++ == 0)
				snprintf(p->p_first_error, sizeof(p->p_first_error),
					 "GETATTR after %.2f s: %s / %s", dt, clnt_sperrno(cs),
					 it_nfsstat_name(r.status));
		}
		if (cs == RPC_SUCCESS)
			xdr_free((xdrproc_t)xdr_GETATTR3res, (char *)&r);
		p->p_calls++;
		if (dt > p->p_max_latency)
			p->p_max_latency = dt;
		rss = server_mem_kb("VmRSS");
		if (rss > p->p_max_rss_kb)
			p->p_max_rss_kb = rss;
		if (cs != RPC_SUCCESS)
			break;
		wait_until(probe_stopping, p, 20); /* the probe's pace: one call per 20 ms */
	}
	auth_destroy(c->cl_auth);
	clnt_destroy(c);
	return NULL;
}

/* A wait for the probe: until it has made pc_calls calls in all, or failed. */
struct probe_calls {
	const struct probe *pc_probe;
	unsigned pc_calls;
};

static bool probe_called(void *arg)
{
	const struct probe_calls *pc = arg;

	return pc->pc_probe->p_calls >= pc->pc_calls || pc->pc_probe->p_failures > 0;
}

static void probe_start(struct probe *p)
{
	struct probe_calls first = { p, 1 };

	memset(p, 0, sizeof(*p));
	atomic_init(&p->p_stop, false);
	assert_int_equal(pthread_create(&p->p_thread, NULL, probe_main, p), 0);
	/* The probe's connection must exist before an attack can fill the server. */
	wait_until(probe_called, &first, 10000);
}

/* Stops the probe and checks it was served throughout, and memory stayed bounded. */
static void probe_finish_within(struct probe *p, const char *attack, double max_latency)
{
	struct probe_calls after = { p, p->p_calls + 3 };
	unsigned long hwm;

	/* A few answers after the attack, too: the server must have come through it. */
	wait_until(probe_called, &after, 5000);
	atomic_store(&p->p_stop, true);
	pthread_join(p->p_thread, NULL);
	hwm = server_mem_kb("VmHWM");
	fprintf(stderr,
		"# %s: good client made %u calls, %u failed, slowest %.3f s; server VmRSS max %lu KiB, VmHWM %lu KiB (bound %lu KiB)\n",
		attack, p->p_calls, p->p_failures, p->p_max_latency, p->p_max_rss_kb, hwm,
		rss_bound_kb);
	if (!server_alive()) {
		it_server_dump_log(&it_srv);
		fail_msg("%s: the server is gone", attack);
	}
	if (p->p_failures > 0)
		fail_msg("%s: the good client failed %u times; first: %s", attack, p->p_failures,
			 p->p_first_error);
	if (p->p_calls < 3)
		fail_msg("%s: the good client got only %u answers", attack, p->p_calls);
	if (p->p_max_latency > max_latency)
		fail_msg("%s: a GETATTR of the good client took %.2f s (bound %.1f s)", attack,
			 p->p_max_latency, max_latency);
	if (p->p_max_rss_kb > rss_bound_kb || hwm > rss_bound_kb)
		fail_msg("%s: server memory VmRSS %lu KiB / VmHWM %lu KiB exceeds %lu KiB", attack,
			 p->p_max_rss_kb, hwm, rss_bound_kb);
}

static void probe_finish(struct probe *p, const char *attack)
{
	probe_finish_within(p, attack, PROBE_MAX_LATENCY);
}

/* ---- raw sockets and records ---- */

static int raw_connect(int type, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		fail_msg("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		fail_msg("connect to port %d: %s", port, strerror(errno));
	return fd;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Whether the peer closed fd (EOF or reset) within timeout; drains anything it sent. */
static bool wait_closed(int fd, double timeout)
{
	char buf[65536];
	double end = now_s() + timeout;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = end - now_s();
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
}

/* Whether fd already shows the peer's close (without waiting). */
static bool is_closed_now(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, 0) <= 0)
		return false;
	if (pfd.revents & (POLLHUP | POLLERR))
		return true;
	return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}

/*
 * Until one of the n sockets fds (but those skip marks; skip may be NULL) can take more
 * bytes, or timeout_ms pass. A socket with an error or a hang-up never will: it is left out.
 */
static void wait_writable(const int *fds, const bool *skip, int n, int timeout_ms)
{
	enum { MAX_FDS = 64 };
	struct pollfd pfd[MAX_FDS];
	double end = now_s() + timeout_ms / 1e3;

	assert_true(n <= MAX_FDS);
	for (int i = 0; i < n; i++)
		pfd[i] = (struct pollfd){ .fd = skip && skip[i] ? -1 : fds[i], .events = POLLOUT };
	for (;;) {
		int left = (int)((end - now_s()) * 1000);

		if (left <= 0 || poll(pfd, (nfds_t)n, left) <= 0)
			return;
		for (int i = 0; i < n; i++) {
			if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				pfd[i].fd = -1;
			else if (pfd[i].revents & POLLOUT)
				return;
		}
	}
}

static void send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail_msg("send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void put32(uint8_t **p, uint32_t v)
{
	v = htonl(v);
	memcpy(*p, &v, 4);
	*p += 4;
}

/*
 * Encodes one call of prog/vers (AUTH_SYS root) as a record with its mark into buf.
 * Returns the length with the mark.
 */
static size_t encode_prog_call(uint8_t *buf, size_t cap, uint32_t xid, uint32_t prog,
			       uint32_t vers, uint32_t proc, xdrproc_t xargs, void *args)
{
	uint8_t *p = buf + 4;
	XDR x;
	size_t len;

	put32(&p, xid);
	put32(&p, 0);                 /* CALL */
	put32(&p, 2);
	put32(&p, prog);
	put32(&p, vers);
	put32(&p, proc);
	put32(&p, 1);                 /* AUTH_SYS */
	put32(&p, 24);
	put32(&p, 0);                 /* stamp */
	put32(&p, 1);                 /* machine name "h" */
	memcpy(p, "h\0\0\0", 4);
	p += 4;
	put32(&p, 0);                 /* uid */
	put32(&p, 0);                 /* gid */
	put32(&p, 0);                 /* no groups */
	put32(&p, 0);                 /* verifier AUTH_NONE */
	put32(&p, 0);
	len = (size_t)(p - buf);
	if (xargs != NULL) {
		xdrmem_create(&x, (char *)p, (u_int)(cap - len), XDR_ENCODE);
		assert_true(xargs(&x, args));
		len += xdr_getpos(&x);
		xdr_destroy(&x);
	}
	p = buf;
	put32(&p, 0x80000000u | (uint32_t)(len - 4));
	return len;
}

/* One NFSv3 call, as encode_prog_call. */
static size_t encode_call(uint8_t *buf, size_t cap, uint32_t xid, uint32_t proc, xdrproc_t xargs,
			  void *args)
{
	return encode_prog_call(buf, cap, xid, NFS_PROGRAM, NFS_V3, proc, xargs, args);
}

/* ---- the attacks ---- */

/* A record mark claiming 2^31-1 bytes: the connection is closed at once. */
static void test_oversize_header(void **state)
{
	struct probe p;

	(void)state;
	probe_start(&p);
	for (int i = 0; i < 200; i++) {
		uint8_t hdr[8] = { 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0 };
		int fd = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);

		if (i % 2)
			hdr[0] = 0xff; /* the same size as a last fragment */
		send_all(fd, hdr, sizeof(hdr));
		if (!wait_closed(fd, 10))
			fail_msg("a connection announcing a 2^31-1 byte record was not closed");
		close(fd);
	}
	probe_finish(&p, "oversize record header");
}

/*
 * Fragments that never end, on 50 connections at once: each is closed once its record
 * passes max-record, or (paused by max-buffered) by the idle timeout.
 */
static void test_endless_fragments(void **state)
{
	enum { CONNS = 50, FRAG = 32768 };
	static uint8_t frag[FRAG + 4];
	int fds[CONNS];
	size_t sent[CONNS] = { 0 };
	bool closed[CONNS] = { false };
	int nclosed = 0;
	double end;
	struct probe p;

	(void)state;
	it_fill(frag, sizeof(frag), 7);
	frag[0] = 0;
	frag[1] = 0;
	frag[2] = FRAG >> 8;
	frag[3] = FRAG & 0xff;
	probe_start(&p);
	for (int i = 0; i < CONNS; i++) {
		fds[i] = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);
		set_nonblock(fds[i]);
	}
	end = now_s() + 3 * IDLE_TIMEOUT + 15;
	while (nclosed < CONNS && now_s() < end) {
		bool progress = false;

		for (int i = 0; i < CONNS; i++) {
			ssize_t n;

			if (closed[i])
				continue;
			/* Whole fragments only, so the stream stays well-formed but endless. */
			n = send(fds[i], frag, sizeof(frag), MSG_NOSIGNAL);
			if (n > 0) {
				sent[i] += (size_t)n;
				progress = true;
				if ((size_t)n < sizeof(frag)) {
					/* Finish this fragment blocking; the server reads or closes. */
					struct pollfd pfd = { .fd = fds[i], .events = POLLOUT };
					size_t off = (size_t)n;

					while (off < sizeof(frag) && poll(&pfd, 1, 100) >= 0) {
						n = send(fds[i], frag + off, sizeof(frag) - off, MSG_NOSIGNAL);
						if (n > 0) {
							off += (size_t)n;
							sent[i] += (size_t)n;
						} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
							break;
						}
						if (is_closed_now(fds[i]))
							break;
					}
				}
			}
			if ((n < 0 && errno != EAGAIN && errno != EINTR) || is_closed_now(fds[i])) {
				closed[i] = true;
				nclosed++;
			}
		}
		if (!progress)
			wait_writable(fds, closed, CONNS, 50);
	}
	for (int i = 0; i < CONNS; i++) {
		close(fds[i]);
		/* Socket buffers on both sides take some bytes beyond the limit. */
		if (closed[i] && sent[i] > MAX_RECORD + (16u << 20))
			fail_msg("connection %d sent %zu bytes of one record before being closed", i,
				 sent[i]);
	}
	if (nclosed < CONNS)
		fail_msg("%d of %d connections sending endless fragments were never closed",
			 CONNS - nclosed, CONNS);
	probe_finish(&p, "endless fragments");
}

/* Records cut short: the header promises more than comes, then the client closes or half-closes. */
static void test_truncated_records(void **state)
{
	static uint8_t call[512];
	struct probe p;
	GETATTR3args a = { .object = root_fh };

	(void)state;
	probe_start(&p);
	for (int i = 0; i < 300; i++) {
		size_t len = encode_call(call, sizeof(call), (uint32_t)i, NFSPROC3_GETATTR,
					 (xdrproc_t)xdr_GETATTR3args, &a);
		size_t cut = 1 + (size_t)i % (len - 1);
		int fd = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);

		send_all(fd, call, cut);
		if (i % 2) {
			/* Half-close: the server must drop the partial record and close. */
			shutdown(fd, SHUT_WR);
			if (!wait_closed(fd, 10))
				fail_msg("a half-closed connection with a partial record (%zu of %zu bytes) was not closed",
					 cut, len);
		}
		close(fd);
	}
	probe_finish(&p, "truncated records");
}

/* Random datagrams and broken calls on UDP: no reply, or a well-formed RPC reply. */
static void test_garbage_udp(void **state)
{
	static uint8_t buf[2048];
	struct probe p;
	int fd, replies = 0;
	uint32_t seed = 12345;

	(void)state;
	probe_start(&p);
	fd = raw_connect(SOCK_DGRAM, it_srv.is_nfs_port);
	set_nonblock(fd);
	for (int i = 0; i < 5000; i++) {
		size_t len;

		seed = seed * 1103515245u + 12345u;
		len = 1 + (seed >> 8) % 1400;
		it_fill(buf, len, seed);
		if (i % 4 == 0 && len >= 64) {
			/* A real call header with garbage behind it reaches the decoders. */
			uint8_t hdr[128];
			size_t hl = encode_call(hdr, sizeof(hdr), seed, (uint32_t)(i / 4) % 24, NULL, NULL);

			memcpy(buf, hdr + 4, hl - 4);
		}
		if (send(fd, buf, len, 0) < 0 && errno != EAGAIN && errno != ECONNREFUSED)
			fail_msg("UDP send: %s", strerror(errno));
		for (;;) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			uint32_t mtype;

			if (n < 0)
				break;
			replies++;
			if (n < 12)
				fail_msg("a UDP reply of %zd bytes is no RPC reply", n);
			memcpy(&mtype, buf + 4, 4);
			if (ntohl(mtype) != 1)
				fail_msg("a UDP reply has message type %u, not REPLY", ntohl(mtype));
		}
	}
	close(fd);
	fprintf(stderr, "# garbage UDP: %d replies to 5000 datagrams\n", replies);
	probe_finish(&p, "garbage UDP");
}

/* Until cc_want of the cc_n sockets cc_fds show the peer's close; cc_closed: how many do. */
struct closed_count {
	const int *cc_fds;
	int cc_n, cc_want, cc_closed;
};

static bool count_closed(void *arg)
{
	struct closed_count *cc = arg;

	cc->cc_closed = 0;
	for (int i = 0; i < cc->cc_n; i++)
		if (is_closed_now(cc->cc_fds[i]))
			cc->cc_closed++;
	return cc->cc_closed >= cc->cc_want;
}

/*
 * A thousand idle connections are all accepted and the good client is still served; past
 * max-connections each new one closes the one idle longest (the oldest of the thousand,
 * never the busy good client); after the idle timeout all idle ones are gone.
 */
static void test_idle_connections(void **state)
{
	enum { MADE_ROOM = EXTRA_CONNS - (MAX_CONNS - IDLE_CONNS - 1) };
	static int fds[IDLE_CONNS + EXTRA_CONNS];
	int alive = 0, evicted = 0, closed = 0, newest_evicted = -1;
	double t_first, end;
	struct probe p;
	bool accepted;

	(void)state;
	probe_start(&p);
	t_first = now_s();
	for (int i = 0; i < IDLE_CONNS; i++)
		fds[i] = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);
	/* The probe holds one connection: 1001 open, 49 below the limit. Once all are accepted: */
	accepted = wait_accepted(it_srv.is_nfs_port,
				 (int)((t_first + IDLE_TIMEOUT - 1.0 - now_s()) * 1000));
	if (accepted && now_s() < t_first + IDLE_TIMEOUT - 0.5) {
		for (int i = 0; i < IDLE_CONNS; i++)
			if (is_closed_now(fds[i]))
				fail_msg("idle connection %d of %d was closed early (below max-connections %d)",
					 i, IDLE_CONNS, MAX_CONNS);
	}
	/*
	 * The good client calls after the thousand came in, so its last call is newer than
	 * theirs: a probe thread the scheduler held back meanwhile would be the idle longest.
	 */
	{
		struct probe_calls next = { &p, p.p_calls + 1 };

		wait_until(probe_called, &next, 5000);
	}
	for (int i = IDLE_CONNS; i < IDLE_CONNS + EXTRA_CONNS; i++)
		fds[i] = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);
	/*
	 * All at once: waiting on each in turn could run into the idle timeout. A loaded
	 * machine may take a while to accept them all, but none is idle-closed before 4 s.
	 */
	{
		struct closed_count cc = { fds, IDLE_CONNS, MADE_ROOM, 0 };

		wait_until(count_closed, &cc, 3000);
		evicted = cc.cc_closed;
	}
	for (int i = 0; i < IDLE_CONNS; i++)
		if (is_closed_now(fds[i]))
			newest_evicted = i;
	for (int i = IDLE_CONNS; i < IDLE_CONNS + EXTRA_CONNS; i++)
		alive += !is_closed_now(fds[i]);
	fprintf(stderr, "# idle: %d connections past %d open: %d kept, %d of the oldest closed to make room (newest of them: #%d)\n",
		EXTRA_CONNS, IDLE_CONNS + 1, alive, evicted, newest_evicted);
	if (alive != EXTRA_CONNS)
		fail_msg("%d of %d new connections past max-connections were closed; each should have closed an idle one instead",
			 EXTRA_CONNS - alive, EXTRA_CONNS);
	/* 49 fit; connections of earlier tests the server has not yet reaped may go first. */
	if (evicted < MADE_ROOM - 10 || evicted > MADE_ROOM)
		fail_msg("%d idle connections were closed to make room for %d new ones; want %d",
			 evicted, EXTRA_CONNS, MADE_ROOM);
	if (newest_evicted >= MADE_ROOM)
		fail_msg("idle connection #%d was closed to make room while older ones stayed",
			 newest_evicted);
	/* Every idle connection goes after the idle timeout; the busy probe stays. */
	end = now_s() + IDLE_TIMEOUT + 15;
	for (int i = 0; i < IDLE_CONNS + EXTRA_CONNS; i++) {
		if (wait_closed(fds[i], end - now_s() > 0 ? end - now_s() : 0.01))
			closed++;
		close(fds[i]);
	}
	if (closed < IDLE_CONNS + EXTRA_CONNS)
		fail_msg("%d idle connections were still open %d s after the idle timeout",
			 IDLE_CONNS + EXTRA_CONNS - closed, 15);
	probe_finish(&p, "1000 idle connections");
	/* With them gone a new client gets in. */
	probe_start(&p);
	probe_finish(&p, "a new client after the idle timeout");
}

/* Clients flooding 1 MiB READs without ever reading a reply. */
static void test_nonreaders(void **state)
{
	enum { CONNS = 20 };
	static uint8_t call[512];
	READ3args a;
	int fds[CONNS];
	size_t total = 0;
	double end;
	struct probe p;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.file = big_fh;
	a.count = 1u << 20;
	probe_start(&p);
	for (int i = 0; i < CONNS; i++) {
		fds[i] = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);
		set_nonblock(fds[i]);
	}
	end = now_s() + 6;
	for (uint32_t xid = 1; now_s() < end; xid++) {
		bool progress = false;

		for (int i = 0; i < CONNS; i++) {
			size_t len;
			ssize_t n;

			a.offset = (uint64_t)(xid % 4) << 20;
			len = encode_call(call, sizeof(call), xid, NFSPROC3_READ, (xdrproc_t)xdr_READ3args,
					  &a);
			n = send(fds[i], call, len, MSG_NOSIGNAL);
			if (n > 0) {
				total += (size_t)n;
				progress = true;
				if ((size_t)n < len) {
					/* Keep the stream well-formed: finish the record blocking briefly. */
					struct pollfd pfd = { .fd = fds[i], .events = POLLOUT };
					size_t off = (size_t)n;

					while (off < len && now_s() < end + 5 && poll(&pfd, 1, 100) >= 0) {
						n = send(fds[i], call + off, len - off, MSG_NOSIGNAL);
						if (n > 0)
							off += (size_t)n;
					}
				}
			}
		}
		if (!progress)
			wait_writable(fds, NULL, CONNS, 50);
	}
	fprintf(stderr, "# non-readers: %d connections wrote %zu bytes of READ calls\n", CONNS, total);
	probe_finish(&p, "clients that never read");
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
}

/*
 * Two hundred clients each slipping in a few 1 MiB READs they never read: far more than
 * max-buffered. At twice the limit their READs wait parked, so memory stays bounded, while
 * the good client's small calls still go through.
 */
static void test_many_nonreaders(void **state)
{
	enum { CONNS = 200, CALLS = 4 };
	static uint8_t call[512];
	static int fds[CONNS];
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	READ3args a;
	struct probe p;
	unsigned long before = server_mem_kb("VmRSS"), peak = 0;

	(void)state;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&a, 0, sizeof(a));
	a.file = big_fh;
	a.count = 1u << 20;
	probe_start(&p);
	for (int i = 0; i < CONNS; i++) {
		int small = 4096;

		/* A small receive window keeps the replies in the server rather than our kernel. */
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		if (connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)) < 0)
			fail_msg("connect: %s", strerror(errno));
		for (uint32_t k = 0; k < CALLS; k++) {
			size_t len;

			a.offset = (uint64_t)k << 20;
			len = encode_call(call, sizeof(call), k, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &a);
			send_all(fds[i], call, len);
		}
	}
	peak = server_rss_peak_kb(2000);
	fprintf(stderr, "# %d non-readers x %d READs of 1 MiB: server VmRSS %lu KiB before, %lu KiB at most\n",
		CONNS, CALLS, before, peak);
	/*
	 * Twice max-buffered, plus slack for the heap's fragmentation (replies are allocated
	 * by the workers' arenas and freed by the loop) and per-connection buffers. Measured:
	 * about 125 MiB with 200 connections, 140 MiB with 400.
	 */
	if (peak > before + 2 * (MAX_BUFFERED >> 10) + (96u << 10) && !server_is_asan())
		fail_msg("server memory grew by %lu KiB with %d non-readers (max-buffered %u KiB)",
			 peak - before, CONNS, MAX_BUFFERED >> 10);
	probe_finish(&p, "200 clients that never read");
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
}

/*
 * DUMPs of a long MOUNT list, pipelined by 40 clients that never read (to make the server
 * buffer long replies without bound): every client mounted under a 1000-byte spelling of the export, and a 40-byte
 * call draws a long reply. The list must not grow with spellings, a reply must stay within
 * its bound, and that bound must count against max-buffered from the moment the call is
 * taken, not once the reply exists. The good client must still be served.
 */
static void test_dump_nonreaders(void **state)
{
	enum { CLIENTS = 600, CONNS = 40, CALLS = 16 };
	static int fds[CONNS];
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_mount_port) };
	unsigned long before, peak = 0;
	char src[32], path[1024];
	uint8_t call[128];
	struct probe p;
	size_t n;

	(void)state;
	n = (size_t)snprintf(path, sizeof(path), "%s", IT_EXPORT);
	while (n + 2 < sizeof(path) - 16)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "/.");
	/* 600 clients: 600 KiB per DUMP if each spelling counted, 20 KiB once canonical. */
	for (unsigned i = 0; i < CLIENTS; i++) {
		snprintf(src, sizeof(src), "127.2.%u.%u", i / 250, i % 250 + 1);
		if (it_mnt_over(it_clnt_udp_from(src, IT_MOUNT_PROG, 3, it_srv.is_mount_port), path,
				NULL) != 0)
			fail_msg("MNT from %s failed", src);
	}
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	before = server_mem_kb("VmRSS");
	probe_start(&p);
	for (int i = 0; i < CONNS; i++) {
		int small = 4096;

		/* A small receive window keeps the replies in the server rather than our kernel. */
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		if (connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)) < 0)
			fail_msg("connect: %s", strerror(errno));
		for (uint32_t k = 0; k < CALLS; k++)
			send_all(fds[i], call, encode_prog_call(call, sizeof(call), k, IT_MOUNT_PROG, 3,
								IT_MNTPROC_DUMP, NULL, NULL));
	}
	peak = server_rss_peak_kb(2000);
	fprintf(stderr, "# %d non-readers x %d DUMPs of a %d-client list: server VmRSS %lu KiB before, %lu KiB at most\n",
		CONNS, CALLS, CLIENTS, before, peak);
	/* Twice max-buffered, plus slack as in test_many_nonreaders. */
	if (peak > before + 2 * (MAX_BUFFERED >> 10) + (48u << 10) && !server_is_asan())
		fail_msg("server memory grew by %lu KiB with %d DUMP non-readers (max-buffered %u KiB)",
			 peak - before, CONNS, MAX_BUFFERED >> 10);
	probe_finish(&p, "DUMP non-readers");
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
}

struct flood {
	int f_fd;
	unsigned f_calls;        /* written, each to be answered */
	unsigned f_replies;
	bool f_error;
};

/* Whether every call of the flood is answered, or its connection failed. */
static bool flood_done(void *arg)
{
	const struct flood *f = arg;

	return f->f_replies >= f->f_calls || f->f_error;
}

/* Counts reply records on the flood connection until EOF. */
static void *flood_reader(void *arg)
{
	struct flood *f = arg;
	static uint8_t buf[65536];
	uint8_t hdr[4];
	unsigned have = 0;
	uint32_t left = 0;

	for (;;) {
		ssize_t n = recv(f->f_fd, buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			f->f_error = n < 0;
			return NULL;
		}
		for (ssize_t i = 0; i < n;) {
			if (left > 0) {
				uint32_t take = (uint32_t)(n - i) < left ? (uint32_t)(n - i) : left;

				i += take;
				left -= take;
				if (left == 0)
					f->f_replies++;
				continue;
			}
			hdr[have++] = buf[i++];
			if (have == 4) {
				have = 0;
				left = ((uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
					(uint32_t)hdr[2] << 8 | hdr[3]) & 0x7fffffffu;
				if (left == 0)
					f->f_replies++;
			}
		}
	}
}

/* 100,000 calls written back to back on one connection: all answered, others served. */
static void test_pipeline_flood(void **state)
{
	enum { CALLS = 100000, BATCH = 1000 };
	static uint8_t buf[BATCH * 160];
	GETATTR3args a = { .object = root_fh };
	struct flood f = { .f_calls = CALLS };
	pthread_t reader;
	struct probe p;
	double t0;

	(void)state;
	probe_start(&p);
	f.f_fd = raw_connect(SOCK_STREAM, it_srv.is_nfs_port);
	assert_int_equal(pthread_create(&reader, NULL, flood_reader, &f), 0);
	t0 = now_s();
	for (uint32_t xid = 0; xid < CALLS;) {
		size_t len = 0;

		for (int b = 0; b < BATCH; b++, xid++)
			len += encode_call(buf + len, sizeof(buf) - len, xid,
					   xid % 2 ? NFSPROC3_GETATTR : NFSPROC3_NULL,
					   xid % 2 ? (xdrproc_t)xdr_GETATTR3args : NULL, &a);
		send_all(f.f_fd, buf, len);
	}
	shutdown(f.f_fd, SHUT_WR);
	wait_until(flood_done, &f, (int)((t0 + 45 - now_s()) * 1000));
	fprintf(stderr, "# flood: %u of %d pipelined calls answered in %.1f s\n", f.f_replies, CALLS,
		now_s() - t0);
	/* The server closes the half-closed connection once everything is answered. */
	if (f.f_replies == CALLS && !wait_closed(f.f_fd, 10))
		fail_msg("the flood connection was not closed after its last reply");
	shutdown(f.f_fd, SHUT_RDWR);
	pthread_join(reader, NULL);
	close(f.f_fd);
	if (f.f_replies != CALLS)
		fail_msg("%u of %d pipelined calls were answered", f.f_replies, CALLS);
	probe_finish(&p, "pipelined flood");
}

/* ---- setup ---- */

static int group_setup(void **state)
{
	static char idle[32], conns[32], conns_per_host[48], buffered[48];
	char path[PATH_MAX];
	uint8_t *data;
	CLIENT *c;
	struct rlimit rl = { 4096, 4096 };

	(void)state;
	/* The server inherits this: it must hold the thousand idle connections. */
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 4096) {
		rl.rlim_cur = 4096;
		if (rl.rlim_max < 4096)
			rl.rlim_max = 4096;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			fprintf(stderr, "cannot raise the open files limit to 4096: %s\n", strerror(errno));
			return -1;
		}
	}
	rss_bound_kb = (unsigned long)(server_is_asan() ? RSS_BOUND_ASAN_MB : RSS_BOUND_MB) * 1024;
	snprintf(idle, sizeof(idle), "--idle-timeout=%d", IDLE_TIMEOUT);
	snprintf(conns, sizeof(conns), "--max-connections=%d", MAX_CONNS);
	snprintf(conns_per_host, sizeof(conns_per_host), "--max-connections-per-host=%d", MAX_CONNS);
	snprintf(buffered, sizeof(buffered), "--max-buffered=%u", MAX_BUFFERED);
	it_server_init(&it_srv, false);
	it_srv.is_extra[0] = idle;
	it_srv.is_extra[1] = conns;
	it_srv.is_extra[2] = buffered;
	it_srv.is_extra[3] = "--max-requests-per-connection=16";
	/* One address (127.0.0.1) plays every client here. */
	it_srv.is_extra[4] = conns_per_host;
	it_srv.is_extra[5] = "--udp"; /* garbage UDP */
	it_srv.is_extra[6] = NULL;
	data = malloc(BIG_FILE_LEN);
	if (data == NULL)
		return -1;
	it_fill(data, BIG_FILE_LEN, 99);
	it_path(path, "%s/big", it_srv.is_upper);
	it_write_file(path, data, BIG_FILE_LEN);
	free(data);
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root_fh) != IT_MNT_OK) {
		fprintf(stderr, "cannot mount %s\n", IT_EXPORT);
		return -1;
	}
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &root_fh, "big", &big_fh, NULL), NFS3_OK);
	it_clnt_destroy(c);
	return 0;
}

static int group_teardown(void **state)
{
	it_fh_free(&root_fh);
	it_fh_free(&big_fh);
	if (it_srv.is_pid > 0)
		fprintf(stderr, "# server VmHWM at the end: %lu KiB\n", server_mem_kb("VmHWM"));
	return it_group_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oversize_header),
		cmocka_unit_test(test_endless_fragments),
		cmocka_unit_test(test_truncated_records),
		cmocka_unit_test(test_garbage_udp),
		cmocka_unit_test(test_idle_connections),
		cmocka_unit_test(test_nonreaders),
		cmocka_unit_test(test_many_nonreaders),
		cmocka_unit_test(test_dump_nonreaders),
		cmocka_unit_test(test_pipeline_flood),
	};

	return cmocka_run_group_tests_name("hostile clients", tests, group_setup, group_teardown);
}
