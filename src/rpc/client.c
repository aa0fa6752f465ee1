/*
 * Outbound RPC calls (include/rpc_client.h). One thread runs every call in flight as a
 * small state machine around one socket (portmapper lookup, UDP exchange, TCP connect /
 * send / receive) under a single poll(): its timeout is the nearest deadline of the retry
 * schedules, and an eventfd in the same poll wakes it for new calls and for stop. Nothing
 * sleeps; a call waiting for its next try holds no socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <rpc/rpc.h>

#include "log.h"
#include "record.h"
#include "rpc.h"
#include "rpc_client.h"

#define PMAP_PROG 100000
#define PMAP_VERS 2
#define PMAP_PROC_GETPORT 3
#define PMAP_PORT_DEFAULT 111
#define PMAP_CACHE_MAX 256
#define RPC_MSG_CALL 0
#define RPC_MSG_REPLY 1
#define RPC_REPLY_ACCEPTED 0
#define RPC_ACCEPT_SUCCESS 0
#define RPC_VERF_MAX 400
#define RPC_AUTH_NULL_FLAVOR 0
#define RPC_AUTH_UNIX_FLAVOR 1
/* Room for the record mark, call header and AUTH_UNIX credential (machine name <= 255). */
#define CALL_HDR_MAX 512
#define DEFAULT_INTERVAL_MS 1000
#define TCP_READ_CHUNK 4096

enum phase {
	PH_START,     /* a try is due: find the port, then send */
	PH_PMAP,      /* GETPORT sent to the host's portmapper (UDP) */
	PH_UDP,       /* call sent over UDP, waiting for the reply */
	PH_CONNECT,   /* TCP connect in progress */
	PH_SEND,      /* TCP: writing the record */
	PH_RECV,      /* TCP: reading the reply record */
	PH_IDLE,      /* this try failed early: waiting for its deadline, no socket */
};

struct job {
	struct job *next;
	struct sockaddr_storage to;
	socklen_t tolen;
	bool fixed_port;         /* the caller gave the port: never ask a portmapper */
	int protocol;
	uint32_t prog, vers;
	uint8_t *msg;            /* record mark (4 bytes) + call; the xid at msg + 4 */
	size_t msglen;
	unsigned tries_left;
	unsigned interval_ms;
	void (*done)(void *arg, int status, XDR *reply);
	void *arg;
	uint32_t xid;
	enum phase ph;
	int fd;
	uint16_t port;           /* of the program on the host for this try, 0 unknown */
	int64_t deadline;        /* end of the current try (monotonic ms) */
	int err;                 /* why the current try failed so far (0: no answer yet) */
	size_t sent;             /* TCP: bytes of msg written */
	struct record_rx rx;     /* TCP: the reply */
	bool rx_init;
};

struct pmap_entry {
	struct sockaddr_storage host; /* port zeroed */
	uint32_t prog, vers, prot;
	uint16_t port;
	int64_t expires;
};

struct rpc_client {
	pthread_t thread;
	pthread_mutex_t lock;
	int wakefd;
	/* under lock */
	struct job *queue_head, **queue_tail;
	unsigned count;          /* queued + active */
	bool stopping;
	uint32_t next_xid;
	_Atomic uint16_t pmap_port;
	/* the thread's own */
	struct job *active;
	unsigned nactive;
	struct pmap_entry pmap[PMAP_CACHE_MAX];
	unsigned npmap;
	uint8_t *rbuf;           /* UDP receive buffer, RPC_CLIENT_REPLY_MAX */
	char machine[MAX_MACHINE_NAME + 1];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static void sa_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

static bool sa_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
	       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
}

/* ---- the portmapper cache ---- */

static struct pmap_entry *pmap_find(struct rpc_client *c, const struct job *j)
{
	int64_t now = now_ms();

	for (unsigned i = 0; i < c->npmap; i++) {
		struct pmap_entry *e = &c->pmap[i];

		if (e->prog == j->prog && e->vers == j->vers && e->prot == (uint32_t)j->protocol &&
		    sa_same_host(&e->host, &j->to))
			return e->expires > now ? e : NULL;
	}
	return NULL;
}

static void pmap_drop(struct rpc_client *c, const struct job *j)
{
	for (unsigned i = 0; i < c->npmap; i++) {
		struct pmap_entry *e = &c->pmap[i];

		if (e->prog == j->prog && e->vers == j->vers && e->prot == (uint32_t)j->protocol &&
		    sa_same_host(&e->host, &j->to)) {
			c->pmap[i] = c->pmap[--c->npmap];
			return;
		}
	}
}

static void pmap_store(struct rpc_client *c, const struct job *j, uint16_t port)
{
	struct pmap_entry *e = NULL;
	int64_t now = now_ms();

	pmap_drop(c, j);
	if (c->npmap < PMAP_CACHE_MAX) {
		e = &c->pmap[c->npmap++];
	} else {
		e = &c->pmap[0]; /* full: replace the one closest to expiry */
		for (unsigned i = 1; i < c->npmap; i++)
			if (c->pmap[i].expires < e->expires)
				e = &c->pmap[i];
	}
	e->host = j->to;
	sa_set_port(&e->host, 0);
	e->prog = j->prog;
	e->vers = j->vers;
	e->prot = (uint32_t)j->protocol;
	e->port = port;
	e->expires = now + RPC_CLIENT_PMAP_TTL_MS;
}

/* ---- messages ---- */

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/*
 * Where the results of a reply to xid start. -EPROTO: a reply to xid that is denied or not
 * SUCCESS; -EBADMSG: not a well-formed reply to xid at all (ignored over UDP).
 */
static int parse_reply(const uint8_t *b, size_t len, uint32_t xid, size_t *res_off)
{
	size_t off = 12;
	uint32_t vlen;

	if (len < 12 || get32(b) != xid || get32(b + 4) != RPC_MSG_REPLY)
		return -EBADMSG;
	if (get32(b + 8) != RPC_REPLY_ACCEPTED)
		return -EPROTO;
	if (len < off + 8)
		return -EBADMSG;
	vlen = get32(b + off + 4);
	if (vlen > RPC_VERF_MAX)
		return -EBADMSG;
	off += 8 + ((vlen + 3) & ~3u);
	if (len < off + 4)
		return -EBADMSG;
	if (get32(b + off) != RPC_ACCEPT_SUCCESS)
		return -EPROTO;
	*res_off = off + 4;
	return 0;
}

/* Encodes the call behind 4 bytes left for the record mark; the xid is filled per call. */
static int encode_call(const struct rpc_client *c, const struct rpc_client_call *call,
		       uint8_t **out, size_t *outlen)
{
	unsigned long argsize = xdr_sizeof(call->xdr_args, (void *)call->args);
	uint32_t flavor = RPC_AUTH_UNIX_FLAVOR, zero = 0, two = 2, mtype = RPC_MSG_CALL;
	uint32_t prog = call->prog, vers = call->vers, proc = call->proc;
	uint32_t stamp = (uint32_t)time(NULL);
	uint32_t credlen = 4 + 4 + (((uint32_t)strlen(c->machine) + 3) & ~3u) + 4 + 4 + 4;
	char *machine = (char *)c->machine;
	size_t cap;
	uint8_t *b;
	XDR x;
	bool ok;

	/* xdr_sizeof says 0 for what it cannot size (a long string): try the largest buffer */
	if (argsize > RPC_CLIENT_ARGS_MAX)
		return -EMSGSIZE;
	cap = CALL_HDR_MAX + (argsize ? argsize : RPC_CLIENT_ARGS_MAX);
	b = malloc(cap);
	if (!b)
		return -ENOMEM;
	xdrmem_create(&x, (char *)b + 4, (u_int)(cap - 4), XDR_ENCODE);
	ok = xdr_u_int(&x, &zero) && xdr_u_int(&x, &mtype) && xdr_u_int(&x, &two) &&
	     xdr_u_int(&x, &prog) && xdr_u_int(&x, &vers) && xdr_u_int(&x, &proc) &&
	     xdr_u_int(&x, &flavor) && xdr_u_int(&x, &credlen) && xdr_u_int(&x, &stamp) &&
	     xdr_string(&x, &machine, MAX_MACHINE_NAME) &&
	     xdr_u_int(&x, &zero) && xdr_u_int(&x, &zero) && xdr_u_int(&x, &zero) &&
	     xdr_u_int(&x, &zero) && xdr_u_int(&x, &zero) && /* verifier: AUTH_NULL */
	     call->xdr_args(&x, (void *)call->args);
	if (!ok) {
		xdr_destroy(&x);
		free(b);
		return argsize ? -EINVAL : -EMSGSIZE;
	}
	*outlen = 4 + xdr_getpos(&x);
	xdr_destroy(&x);
	*out = b;
	return 0;
}

/* ---- sockets ---- */

static int open_socket(const struct sockaddr_storage *to, int protocol, bool reserved)
{
	int type = protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM;
	int fd = socket(to->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);

	if (fd < 0)
		return -errno;
	/*
	 * Lock managers may want a privileged port; without the privilege, or when all are
	 * taken, any port will do. No SO_REUSEADDR: bindresvport would then hand out the same
	 * port again and the connection would collide with the one before.
	 */
	if (reserved && geteuid() == 0)
		(void)bindresvport_sa(fd, NULL);
	return fd;
}

static socklen_t sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void job_close(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	if (j->rx_init)
		record_free(&j->rx);
	j->rx_init = false;
}

/* The try failed before its deadline: no socket until the next one. */
static void job_idle(struct job *j, int err)
{
	job_close(j);
	j->err = err;
	j->ph = PH_IDLE;
}

static void job_finish(struct rpc_client *c, struct job *j, int status, XDR *reply)
{
	struct job **pp;

	for (pp = &c->active; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			c->nactive--;
			break;
		}
	job_close(j);
	j->done(j->arg, status, reply);
	free(j->msg);
	free(j);
	pthread_mutex_lock(&c->lock);
	c->count--;
	pthread_mutex_unlock(&c->lock);
}

static void job_send_udp(struct job *j)
{
	if (send(j->fd, j->msg + 4, j->msglen - 4, 0) < 0 && errno != EAGAIN && errno != EINTR)
		job_idle(j, errno == ECONNREFUSED ? -ECONNREFUSED : -errno);
}

/* Opens the call's transport to j->port on the host and starts sending. */
static void job_call(struct job *j)
{
	struct sockaddr_storage to = j->to;
	int fd;

	sa_set_port(&to, j->port);
	fd = open_socket(&to, j->protocol, true);
	if (fd < 0) {
		job_idle(j, fd);
		return;
	}
	j->fd = fd;
	if (connect(fd, (struct sockaddr *)&to, sa_len(&to)) < 0 && errno != EINPROGRESS) {
		job_idle(j, errno == ECONNREFUSED ? -ECONNREFUSED : -errno);
		return;
	}
	if (j->protocol == IPPROTO_UDP) {
		j->ph = PH_UDP;
		job_send_udp(j);
		return;
	}
	record_mark(j->msg, (uint32_t)(j->msglen - 4));
	j->sent = 0;
	record_init(&j->rx, RPC_CLIENT_REPLY_MAX);
	j->rx_init = true;
	j->ph = PH_CONNECT;
}

static void job_pmap(struct rpc_client *c, struct job *j)
{
	struct sockaddr_storage to = j->to;
	uint8_t m[56];
	int fd;

	sa_set_port(&to, c->pmap_port);
	fd = open_socket(&to, IPPROTO_UDP, false);
	if (fd < 0) {
		job_idle(j, fd);
		return;
	}
	j->fd = fd;
	j->ph = PH_PMAP;
	put32(m, j->xid ^ 0x80000000u); /* not the call's xid: a stray reply cannot pass for it */
	put32(m + 4, RPC_MSG_CALL);
	put32(m + 8, 2);
	put32(m + 12, PMAP_PROG);
	put32(m + 16, PMAP_VERS);
	put32(m + 20, PMAP_PROC_GETPORT);
	memset(m + 24, 0, 16); /* AUTH_NULL credential and verifier */
	put32(m + 40, j->prog);
	put32(m + 44, j->vers);
	put32(m + 48, (uint32_t)j->protocol);
	put32(m + 52, 0);
	if (connect(fd, (struct sockaddr *)&to, sa_len(&to)) < 0 || send(fd, m, sizeof(m), 0) < 0)
		job_idle(j, errno == ECONNREFUSED ? -ECONNREFUSED : -errno);
}

/* Starts a try: the port from the caller, the cache or the portmapper, then the call. */
static void job_try(struct rpc_client *c, struct job *j, int64_t now)
{
	struct pmap_entry *e;

	j->deadline = now + j->interval_ms;
	j->err = 0;
	if (!j->fixed_port && j->port == 0 && (e = pmap_find(c, j)) != NULL)
		j->port = e->port;
	if (j->port == 0)
		job_pmap(c, j);
	else
		job_call(j);
}

/* The current try's time is up: retransmit, try again, or give up. */
static void job_expire(struct rpc_client *c, struct job *j, int64_t now)
{
	if (!j->fixed_port && j->ph != PH_PMAP) {
		/* the port may have changed (the service restarted): ask again */
		pmap_drop(c, j);
		j->port = 0;
	}
	if (--j->tries_left == 0) {
		job_finish(c, j, j->err ? j->err : -ETIMEDOUT, NULL);
		return;
	}
	if (j->ph == PH_UDP && j->fixed_port) {
		/* same socket, same xid: a late reply to an earlier send still counts */
		j->deadline = now + j->interval_ms;
		j->err = 0;
		job_send_udp(j);
		return;
	}
	job_close(j);
	job_try(c, j, now);
}

static void job_replied(struct rpc_client *c, struct job *j, const uint8_t *b, size_t len,
			bool ignore_bad)
{
	size_t off;
	int r = parse_reply(b, len, j->xid, &off);
	XDR x;

	if (r == -EBADMSG) {
		if (!ignore_bad)
			job_idle(j, -EPROTO);
		return;
	}
	if (r < 0) {
		job_finish(c, j, r, NULL);
		return;
	}
	xdrmem_create(&x, (char *)b + off, (u_int)(len - off), XDR_DECODE);
	job_finish(c, j, 0, &x);
	xdr_destroy(&x);
}

static void job_pmap_reply(struct rpc_client *c, struct job *j)
{
	ssize_t n = recv(j->fd, c->rbuf, RPC_CLIENT_REPLY_MAX, 0);
	size_t off;
	uint32_t port;
	int r;

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			job_idle(j, errno == ECONNREFUSED ? -ECONNREFUSED : -errno);
		return;
	}
	r = parse_reply(c->rbuf, (size_t)n, j->xid ^ 0x80000000u, &off);
	if (r == -EPROTO) {
		job_idle(j, r); /* the portmapper refused the question */
		return;
	}
	if (r < 0 || (size_t)n < off + 4)
		return; /* not the answer: keep waiting for it until the deadline */
	port = get32(c->rbuf + off);
	if (port == 0 || port > 65535) {
		job_idle(j, -ECONNREFUSED); /* not registered (yet) */
		return;
	}
	pmap_store(c, j, (uint16_t)port);
	j->port = (uint16_t)port;
	job_close(j);
	job_call(j);
}

static void job_udp_reply(struct rpc_client *c, struct job *j)
{
	ssize_t n = recv(j->fd, c->rbuf, RPC_CLIENT_REPLY_MAX, 0);

	if (n < 0) {
		if (errno == ECONNREFUSED) /* nothing listens there now: wait for the next try */
			job_idle(j, -ECONNREFUSED);
		else if (errno != EAGAIN && errno != EINTR)
			job_idle(j, -errno);
		return;
	}
	job_replied(c, j, c->rbuf, (size_t)n, true);
}

static void job_tcp_io(struct rpc_client *c, struct job *j)
{
	if (j->ph == PH_CONNECT) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		getsockopt(j->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			job_idle(j, soerr == ECONNREFUSED ? -ECONNREFUSED : -soerr);
			return;
		}
		j->ph = PH_SEND;
	}
	if (j->ph == PH_SEND) {
		ssize_t n = send(j->fd, j->msg + j->sent, j->msglen - j->sent, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				job_idle(j, -errno);
			return;
		}
		j->sent += (size_t)n;
		if (j->sent == j->msglen)
			j->ph = PH_RECV;
		return;
	}
	uint8_t buf[TCP_READ_CHUNK];
	ssize_t n = recv(j->fd, buf, sizeof(buf), 0);
	size_t off = 0;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		job_idle(j, n == 0 ? -EPROTO : -errno); /* closed before the whole reply */
		return;
	}
	while (n > 0 && off < (size_t)n) {
		size_t used = 0, len;
		enum record_status st = record_feed(&j->rx, buf + off, (size_t)n - off, &used);
		uint8_t *rec;

		off += used;
		if (st == RECORD_MORE)
			continue;
		if (st != RECORD_DONE) {
			job_idle(j, st == RECORD_NOMEM ? -ENOMEM : -EPROTO);
			return;
		}
		rec = record_take(&j->rx, &len);
		job_replied(c, j, rec, len, false);
		rpc_reply_free(rec);
		return; /* finished, or idle after a bad reply */
	}
}

static void job_io(struct rpc_client *c, struct job *j, short revents)
{
	switch (j->ph) {
	case PH_PMAP:
		job_pmap_reply(c, j);
		break;
	case PH_UDP:
		job_udp_reply(c, j);
		break;
	case PH_CONNECT:
	case PH_SEND:
	case PH_RECV:
		if ((revents & (POLLERR | POLLHUP)) && j->ph != PH_CONNECT && j->ph != PH_RECV) {
			job_idle(j, -ECONNRESET);
			break;
		}
		job_tcp_io(c, j);
		break;
	default:
		break;
	}
}

static short job_events(const struct job *j)
{
	switch (j->ph) {
	case PH_PMAP:
	case PH_UDP:
	case PH_RECV:
		return POLLIN;
	case PH_CONNECT:
	case PH_SEND:
		return POLLOUT;
	default:
		return 0;
	}
}

/* ---- the thread ---- */

static void cancel_all(struct rpc_client *c)
{
	struct job *q;

	while (c->active)
		job_finish(c, c->active, -ECANCELED, NULL);
	pthread_mutex_lock(&c->lock);
	q = c->queue_head;
	c->queue_head = NULL;
	c->queue_tail = &c->queue_head;
	pthread_mutex_unlock(&c->lock);
	while (q) {
		struct job *next = q->next;

		q->next = c->active;
		c->active = q;
		c->nactive++;
		job_finish(c, q, -ECANCELED, NULL);
		q = next;
	}
}

/* Moves queued calls into flight while there is room; false when stopping. */
static bool take_queued(struct rpc_client *c)
{
	bool stopping;

	pthread_mutex_lock(&c->lock);
	stopping = c->stopping;
	while (!stopping && c->queue_head && c->nactive < RPC_CLIENT_ACTIVE_MAX) {
		struct job *j = c->queue_head;

		c->queue_head = j->next;
		if (!c->queue_head)
			c->queue_tail = &c->queue_head;
		j->next = c->active;
		c->active = j;
		c->nactive++;
	}
	pthread_mutex_unlock(&c->lock);
	return !stopping;
}

static void *client_thread(void *arg)
{
	struct rpc_client *c = arg;
	struct pollfd *pfd = calloc(RPC_CLIENT_ACTIVE_MAX + 1, sizeof(*pfd));
	struct job **pj = calloc(RPC_CLIENT_ACTIVE_MAX + 1, sizeof(*pj));

	if (!pfd || !pj) {
		log_err("rpc client: out of memory; outbound calls (lock callbacks, SM_NOTIFY) fail");
		free(pfd);
		free(pj);
		pfd = NULL;
	}
	while (pfd && take_queued(c)) {
		int64_t now = now_ms(), wait = -1;
		struct job *j, *next;
		nfds_t n = 1;

		for (j = c->active; j; j = next) {
			next = j->next;
			if (j->ph == PH_START)
				job_try(c, j, now);
			else if (j->deadline <= now)
				job_expire(c, j, now);
		}
		pfd[0] = (struct pollfd){ .fd = c->wakefd, .events = POLLIN };
		for (j = c->active; j; j = j->next) {
			int64_t left = j->deadline - now;

			if (wait < 0 || left < wait)
				wait = left < 0 ? 0 : left;
			if (j->fd < 0 || !job_events(j))
				continue;
			pfd[n] = (struct pollfd){ .fd = j->fd, .events = job_events(j) };
			pj[n++] = j;
		}
		if (poll(pfd, n, wait > INT32_MAX ? INT32_MAX : (int)wait) <= 0)
			continue;
		if (pfd[0].revents) {
			uint64_t v;

			(void)!read(c->wakefd, &v, sizeof(v));
		}
		for (nfds_t i = 1; i < n; i++)
			if (pfd[i].revents)
				job_io(c, pj[i], pfd[i].revents); /* may free pj[i]: each once */
	}
	free(pfd);
	free(pj);
	cancel_all(c);
	return NULL;
}

static void wake(struct rpc_client *c)
{
	uint64_t one = 1;

	(void)!write(c->wakefd, &one, sizeof(one));
}

int rpc_client_start(struct rpc_client **out, char *err, size_t errlen)
{
	struct rpc_client *c = calloc(1, sizeof(*c));
	int r;

	if (!c || !(c->rbuf = malloc(RPC_CLIENT_REPLY_MAX))) {
		free(c);
		err_set(err, errlen, "rpc client: out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->queue_tail = &c->queue_head;
	c->pmap_port = PMAP_PORT_DEFAULT;
	if (gethostname(c->machine, sizeof(c->machine) - 1) < 0)
		strcpy(c->machine, "localhost");
	c->machine[sizeof(c->machine) - 1] = '\0';
	if (getentropy(&c->next_xid, sizeof(c->next_xid)) < 0)
		c->next_xid = (uint32_t)time(NULL) ^ (uint32_t)getpid();
	c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wakefd < 0) {
		r = -errno;
		err_set(err, errlen, "rpc client: eventfd: %s", strerror(errno));
		goto fail;
	}
	r = -pthread_create(&c->thread, NULL, client_thread, c);
	if (r < 0) {
		err_set(err, errlen, "rpc client: cannot start its thread: %s", strerror(-r));
		close(c->wakefd);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	pthread_mutex_destroy(&c->lock);
	free(c->rbuf);
	free(c);
	return r;
}

void rpc_client_stop(struct rpc_client *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_mutex_unlock(&c->lock);
	wake(c);
	pthread_join(c->thread, NULL);
	close(c->wakefd);
	pthread_mutex_destroy(&c->lock);
	free(c->rbuf);
	free(c);
}

void rpc_client_set_pmap_port(struct rpc_client *c, uint16_t port)
{
	c->pmap_port = port;
}

static int job_new(const struct rpc_client *c, const struct rpc_client_call *call, struct job **out)
{
	struct job *j;
	int r;

	if (!call->to || !call->done || !call->xdr_args ||
	    (call->protocol != IPPROTO_UDP && call->protocol != IPPROTO_TCP) ||
	    !((call->to->sa_family == AF_INET && call->tolen >= sizeof(struct sockaddr_in)) ||
	      (call->to->sa_family == AF_INET6 && call->tolen >= sizeof(struct sockaddr_in6))))
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	r = encode_call(c, call, &j->msg, &j->msglen);
	if (r < 0) {
		free(j);
		return r;
	}
	memcpy(&j->to, call->to, sa_len((const struct sockaddr_storage *)call->to));
	j->fixed_port = sa_port(&j->to) != 0;
	j->port = sa_port(&j->to);
	j->protocol = call->protocol;
	j->prog = call->prog;
	j->vers = call->vers;
	j->tries_left = call->attempts ? call->attempts : 1;
	j->interval_ms = call->interval_ms ? call->interval_ms : DEFAULT_INTERVAL_MS;
	j->done = call->done;
	j->arg = call->arg;
	j->fd = -1;
	j->ph = PH_START;
	*out = j;
	return 0;
}

int rpc_client_send(struct rpc_client *c, const struct rpc_client_call *call)
{
	struct job *j;
	int r = job_new(c, call, &j);

	if (r < 0)
		return r;
	pthread_mutex_lock(&c->lock);
	if (c->stopping)
		r = -ECANCELED;
	else if (c->count >= RPC_CLIENT_QUEUE_MAX)
		r = -EAGAIN;
	if (r == 0) {
		j->xid = c->next_xid++;
		put32(j->msg + 4, j->xid);
		*c->queue_tail = j;
		c->queue_tail = &j->next;
		c->count++;
	}
	pthread_mutex_unlock(&c->lock);
	if (r < 0) {
		free(j->msg);
		free(j);
		return r;
	}
	wake(c);
	return 0;
}
