/*
 * The network server: one libev loop owns every socket; worker threads run rpc_serve() on
 * a copy of a record and hand the reply back through an ev_async. The exceptions, all for
 * a client that waits for each reply: a worker whose call is the only one of its
 * connection writes the reply itself (job_send), sparing the loop's wake-up; its
 * completion comes back without waking the loop, and is taken right after the loop's next
 * wake-up. NULL calls, which do no work, are served on the loop (net_serve_here). And
 * after a call the loop polls for a while instead of sleeping (spin.h), so the client's
 * next call does not wait for an idle CPU to wake up.
 *
 * Ownership and lifetime:
 * - struct net_listener: one per net_listen() call (a TCP and a UDP socket on one port);
 *   freed only by net_server_free(), after the workers are joined, so UDP jobs may point
 *   at it freely.
 * - struct net_conn: one per accepted TCP connection, reference counted. The open socket
 *   holds one reference and every job in flight one more; conn_close() is the only way a
 *   connection ends and the last conn_unref() frees it, so a late reply finds a closed
 *   connection and is dropped. Code that may close a connection never touches it
 *   afterwards unless it holds a reference of its own.
 * - struct net_job: one per record; owned by the loop, then by the pool while it runs,
 *   then by the loop again, which queues its reply for writing or frees it.
 *
 * Memory is bounded per connection: reading pauses while max_requests calls (or
 * NET_MAX_INBYTES of them) are being served, or while NET_MAX_OUTQ reply bytes wait for a
 * client that does not read. It is bounded across connections too: sv_buffered counts
 * request, reassembly, pending and reply bytes of every connection (a call in flight
 * counts the reply it may produce, see net_reply_estimate()), and once it reaches
 * max_buffered only connections holding (almost) nothing may read, so a crowd of clients
 * that never read cannot exhaust memory while a well-behaved client still gets its small
 * calls through; at twice max_buffered a call that may produce a large reply waits
 * parked instead of being served. Under pressure one connection at a time may finish a
 * large record it is in the middle of (sv_finisher), so connections that each hold part of
 * a large WRITE cannot fill max_buffered together and wait for each other forever; parked
 * bytes do not hold back their own calls either. Connections stuck without progress are
 * closed after idle_timeout.
 *
 * Connection slots: a connection from an address no client rule admits (sv_admit) is
 * closed at accept, before it costs anything. Past max_conns_per_host connections of one
 * address, or max_conns (or the descriptors the open files limit leaves for clients) in
 * all, a new connection closes the one idle longest (of that address, or of all) instead,
 * as knfsd does: a host holding slots without calls in flight (a record mark trickled a
 * byte at a time counts as idle) cannot shut others out. A connection in use is not
 * closed for room even between its calls (conn_in_use): by idle time alone, a client
 * calling every 50 ms would be the "idle longest" once a flood of connections had each
 * made one call since, and a flood could close every working client that way. Only when
 * every connection is busy or in use is the new connection closed at once. sv_lru orders
 * connections by their last progress (a call received or reply bytes sent), so the one
 * idle longest is found from its head.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blocking.h"
#include "clock.h"
#include "fsio.h"
#include "log.h"
#include "net.h"
#include "record.h"
#include "rpc.h"
#include "spin.h"
#include "stages.h"
#include "workers.h"

#define NET_MAX_INBYTES (16u << 20)         /* request bytes in flight per TCP connection */
#define NET_MAX_OUTQ (4u << 20)             /* queued reply bytes per TCP connection */
#define NET_UDP_MAX_INFLIGHT 256           /* calls per UDP socket */
#define NET_READ_CHUNK (64u << 10)
/* Fragment bodies from this size on are read into their record directly. */
#define NET_DIRECT_MIN (8u << 10)
#define NET_UDP_BUF 65536
#define NET_BATCH 64                       /* accepts / datagrams / iovecs per round */
#define NET_ACCEPT_BACKOFF 1.0
#define NET_SHUTDOWN_WAIT 5.0
#define NET_PORT0_TRIES 8
#define NET_ADDRSTR (INET6_ADDRSTRLEN + 8)
#define NET_PRESSURE_RX (64u << 10)         /* partial record a connection may grow under pressure */
#define NET_WARN_EVERY 60.0                 /* seconds between repeated limit warnings */
/* Descriptors kept from clients: a quarter of the open files limit, at least this many. */
#define NET_FD_RESERVE_MIN 64
/* Connections looked at for one to close; the ones passed over are all busy or in use. */
#define NET_EVICT_SCAN 4096
/*
 * In use, not closed to make room (conn_in_use): a connection that made more calls than a
 * flood's one each, the last within the window. A client working on files calls at least
 * that often: it revalidates attributes every 3 s (acregmin) while a file is used.
 */
#define NET_IN_USE_CALLS 2
#define NET_IN_USE_WINDOW 10.0
#define NET_HOST_BUCKETS_MAX 65536u
/* Seconds: how late a completion whose worker wrote the reply is taken, at most (idle loop). */
#define NET_COLLECT_EVERY 0.1

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

struct net_conn;

/* Where a UDP request arrived, so the reply leaves from the same address. */
struct net_pktinfo {
	int np_level;                      /* 0: none */
	union {
		struct in_pktinfo np_v4;
		struct in6_pktinfo np_v6;
	};
};

struct net_job {
	struct work nj_work;
	struct net_job *nj_next;           /* connection send queue */
	struct net_conn *nj_conn;          /* TCP: holds a reference */
	struct net_listener *nj_lst;       /* UDP */
	uint8_t *nj_rec;                   /* freed by the worker once served */
	size_t nj_len;
	struct sockaddr_storage nj_peer;
	socklen_t nj_peerlen;
	struct sockaddr_storage nj_local;
	socklen_t nj_locallen;
	struct net_pktinfo nj_pkt;
	uint8_t *nj_reply;                 /* from rpc_serve_at(), 4 reserved bytes first */
	size_t nj_replylen;
	size_t nj_reserve;                 /* TCP: counted in sv_buffered while in flight */
	size_t nj_sent;                    /* TCP: bytes its worker wrote itself (job_send) */
#ifdef NET_STAGE_TIMES
	struct net_stamps nj_stamps;
#endif
};

struct net_listener {
	struct net_listener *nl_next;
	struct net_server *nl_srv;
	int nl_port;
	int nl_family;
	int nl_tcp;
	int nl_udp;
	ev_io nl_accept;
	ev_timer nl_backoff;               /* accepting paused after EMFILE and friends */
	ev_io nl_udp_io;
	unsigned nl_udp_inflight;
	struct sockaddr_storage nl_addr;   /* bound address, the UDP fallback local address */
	socklen_t nl_addrlen;
};

/* One client address with open connections; freed with its last connection. */
struct net_host {
	struct net_host *nh_next;              /* hash chain of sv_hosts */
	struct in6_addr nh_addr;               /* IPv4 as ::ffff:a.b.c.d */
	unsigned nh_nconns;
	struct net_conn *nh_conns;             /* nc_hnext */
};

struct net_conn {
	struct net_conn *nc_prev, *nc_next;    /* sv_conns, while open */
	struct net_conn *nc_lru_prev, *nc_lru_next; /* sv_lru, while open */
	struct net_conn *nc_hprev, *nc_hnext;  /* nc_host's connections, while open */
	struct net_host *nc_host;
	struct net_conn *nc_dirty_next;        /* completion batch */
	struct net_server *nc_srv;
	int nc_fd;
	unsigned nc_refs;
	unsigned nc_inflight;
	unsigned nc_calls;                     /* calls received, counted up to NET_IN_USE_CALLS */
	size_t nc_inbytes;                     /* request bytes of the calls in flight */
	size_t nc_rxacct;                      /* reassembly buffer counted in sv_buffered */
	ev_tstamp nc_last;                     /* last progress: opened, a call received, reply bytes sent */
	bool nc_open;
	bool nc_eof;                           /* peer finished sending: close once answered */
	bool nc_dirty;
	ev_io nc_rio;
	ev_io nc_wio;
	struct record_rx nc_rx;
	uint8_t *nc_park;                      /* a large-reply call waiting out the pressure */
	size_t nc_parklen;
	uint8_t *nc_pend;                      /* read but not yet fed while paused */
	size_t nc_pendlen, nc_pendoff;
	struct net_job *nc_outq, *nc_outtail;  /* replies to write, nc_outoff into the first */
	size_t nc_outoff;
	/*
	 * The socket's writes, shared with the workers that write their own replies
	 * (job_send): each write and these fields under nc_wmu. A reply half written leaves
	 * the socket to its writer until it is whole: nc_wpartial for a worker's (the loop
	 * takes it over with its completion), nc_outoff for the loop's.
	 */
	pthread_mutex_t nc_wmu;
	/*
	 * Calls submitted whose reply is neither written by their worker nor taken back by
	 * the loop: a worker writes its reply only when it is the one call (job_send).
	 */
	_Atomic unsigned nc_unsent;
	bool nc_wopen;                         /* nc_fd may be written */
	bool nc_wpartial;                      /* a worker left a reply half written */
	size_t nc_outbytes;
	struct sockaddr_storage nc_peer, nc_local;
	socklen_t nc_peerlen, nc_locallen;
};

struct net_server {
	struct ev_loop *sv_loop;
	char *sv_listen;
	uint32_t sv_max_record;
	unsigned sv_max_conns;
	unsigned sv_max_per_host;              /* 0: no bound per address */
	unsigned sv_max_requests;
	unsigned sv_idle;                      /* seconds, 0: off */
	uint64_t sv_max_buffered;
	uint64_t sv_buffered;                  /* see the comment at the top */
	bool sv_udp;                           /* listeners take UDP too */
	bool sv_pressured;                     /* a connection was paused by sv_max_buffered */
	uint64_t sv_parked;                    /* bytes of parked calls (in sv_buffered too) */
	uint64_t sv_pending;                   /* bytes read but not yet fed (nc_pend, same) */
	struct net_conn *sv_finisher;          /* may finish its partial record under pressure */
	bool sv_finisher_freed;                /* paused connections should look for the turn */
	unsigned sv_nconns;
	ev_tstamp sv_full_warned, sv_buf_warned, sv_host_warned, sv_admit_warned, sv_evict_warned;
	net_admit_fn *sv_admit;
	void *sv_admit_arg;
	struct net_host **sv_hosts;            /* hash table by address */
	size_t sv_nbuckets;                    /* a power of two */
	uint8_t sv_hash_key[crypto_shorthash_KEYBYTES]; /* addresses are the clients' to choose */
	struct net_conn *sv_lru, *sv_lru_tail; /* open connections, least recent progress first */
	ev_timer sv_idle_timer;
	bool sv_idle_on;
	struct workers *sv_workers;
	struct work *sv_here, *sv_here_tail;   /* served on the loop, completions not yet taken */
	ev_async sv_async;
	bool sv_async_on;
	ev_check sv_collect;                   /* takes quiet completions after each wake-up */
	ev_prepare sv_here_prep;               /* takes sv_here before the loop sleeps */
	ev_timer sv_collect_timer;             /* ... and while calls are in flight, every so often */
	struct spin sv_spin;                   /* busy polling after calls (spin.h) */
	ev_idle sv_poll;                       /* active: the loop polls instead of sleeping */
	struct net_listener *sv_listeners;
	struct net_conn *sv_conns;
	unsigned sv_inflight;
	bool sv_shutting;
	bool sv_down;
	uint8_t *sv_rbuf;                      /* NET_READ_CHUNK, loop thread only */
	uint8_t *sv_ubuf;                      /* NET_UDP_BUF, loop thread only */
#ifdef NET_STAGE_TIMES
	struct net_stage_sums sv_stages;
#endif
};

static void conn_close(struct net_conn *c);
static void conn_after_io(struct net_conn *c);
static void net_relieve(struct net_server *srv);

/* ---- addresses ---- */

/* Turns an IPv4-mapped IPv6 address into plain IPv4 so handlers and logs see one form. */
static socklen_t net_unmap(const struct sockaddr_storage *in, socklen_t len,
			   struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)in;

	if (len >= sizeof(*s6) && in->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = s6->sin6_port };

		memcpy(&s4.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
		memset(out, 0, sizeof(*out));
		memcpy(out, &s4, sizeof(s4));
		return sizeof(s4);
	}
	if (len > sizeof(*out))
		len = sizeof(*out);
	memcpy(out, in, len);
	return len;
}

static const char *net_addrstr(const struct sockaddr_storage *ss, socklen_t len, char *buf)
{
	struct sockaddr_storage u;
	char host[INET6_ADDRSTRLEN];

	len = net_unmap(ss, len, &u);
	if (!rpc_addr_text((const struct sockaddr *)&u, len, host, sizeof(host)))
		snprintf(buf, NET_ADDRSTR, "?");
	else if (u.ss_family == AF_INET)
		snprintf(buf, NET_ADDRSTR, "%s:%u", host,
			 ntohs(((const struct sockaddr_in *)&u)->sin_port));
	else
		snprintf(buf, NET_ADDRSTR, "[%s]:%u", host,
			 ntohs(((const struct sockaddr_in6 *)&u)->sin6_port));
	return buf;
}

/* ---- jobs ---- */

static void job_free(struct net_job *j)
{
	rpc_reply_free(j->nj_rec);
	rpc_reply_free(j->nj_reply);
	free(j);
}

/*
 * Worker thread: a client with one call at a time waits for each reply, so the job's
 * worker writes it itself when it is the connection's only call and the socket is free (no
 * reply half written): the reply does not wait for the loop to wake up and take it. With
 * more calls in flight the loop writes the replies, several in one sendmsg. Replies of one
 * connection may go in any order; each goes whole or leaves the socket to the loop
 * (nc_wpartial) once its completion is taken. Whatever cannot be written now (a full
 * socket) is written by the loop, as every reply was before. A reply written whole need
 * not wake the loop: its completion is taken when the loop next wakes (net_collect_cb).
 */
static void job_send(struct net_job *j)
{
	struct net_conn *c = j->nj_conn;
	ssize_t n = -1;

	if (atomic_load_explicit(&c->nc_unsent, memory_order_relaxed) != 1)
		return;
	pthread_mutex_lock(&c->nc_wmu);
	if (c->nc_wopen && !c->nc_wpartial && c->nc_outoff == 0) {
		/* Counted as sent before the client can see it: it may call again at once. */
		atomic_fetch_sub_explicit(&c->nc_unsent, 1, memory_order_relaxed);
		do
			n = send(c->nc_fd, j->nj_reply, j->nj_replylen, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n > 0) {
			j->nj_sent = (size_t)n;
			c->nc_wpartial = j->nj_sent < j->nj_replylen;
		}
		if (j->nj_sent < j->nj_replylen)
			atomic_fetch_add_explicit(&c->nc_unsent, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->nc_wmu);
	j->nj_work.wk_quiet = j->nj_sent == j->nj_replylen;
#ifdef NET_STAGE_TIMES
	if (j->nj_work.wk_quiet) {
		j->nj_stamps.ts_at[NET_ST_DONE] = j->nj_stamps.ts_at[NET_ST_END];
		NET_STAMP(&j->nj_stamps, NET_ST_SENT);
	}
#endif
}

/* Worker thread: serve the record, keep the reply, let go of the request bytes. */
static void job_run(struct work *w)
{
	struct net_job *j = container_of(w, struct net_job, nj_work);
	struct sockaddr_storage peer, local;
	socklen_t peerlen, locallen = 0;
	int protocol = j->nj_conn ? IPPROTO_TCP : IPPROTO_UDP;

	NET_STAMP(&j->nj_stamps, NET_ST_START);
	peerlen = net_unmap(&j->nj_peer, j->nj_peerlen, &peer);
	if (j->nj_locallen > 0)
		locallen = net_unmap(&j->nj_local, j->nj_locallen, &local);
	j->nj_reply = rpc_serve_at(j->nj_rec, j->nj_len, (struct sockaddr *)&peer, peerlen,
				   locallen ? (struct sockaddr *)&local : NULL, locallen, protocol,
				   &j->nj_replylen);
	/* Parked: the pool runs it again, record and all, once what it waits for is done. */
	if (blocking_parked())
		return;
	/* A large record goes back to the pool, for the next one or a READ reply. */
	rpc_reply_free(j->nj_rec);
	j->nj_rec = NULL;
	NET_STAMP(&j->nj_stamps, NET_ST_END);
	if (j->nj_conn != NULL && j->nj_reply != NULL)
		job_send(j);
}

static void net_notify(void *arg)
{
	struct net_server *srv = arg;

	ev_async_send(srv->sv_loop, &srv->sv_async);
}

/* Polls rather than sleeps for the spin window after now, if it has one. */
static void net_poll_on(struct net_server *srv, int64_t now)
{
	if (!ev_is_active(&srv->sv_poll) && spin_keep(&srv->sv_spin, now))
		ev_idle_start(srv->sv_loop, &srv->sv_poll);
}

/*
 * Runs when the loop found nothing to do: an active idle watcher makes it poll again at
 * once. Once the window is over it sleeps as usual. The yield lets a thread that shares
 * this CPU (a worker, on a small machine) run while the loop has nothing to do.
 */
static void net_poll_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_server, sv_poll);

	(void)revents;
	if (!spin_keep(&srv->sv_spin, net_now_ns()))
		ev_idle_stop(loop, w);
	else
		sched_yield();
}

/*
 * Serves a NULL call on the loop thread (rpc_call_is_null): its reply goes out as a
 * worker's would, and its completion is taken with the workers' ones, after the callback
 * that read it has returned (it may close the connection).
 */
static void net_serve_here(struct net_server *srv, struct net_job *j)
{
	struct work *w = &j->nj_work;

	job_run(w);
	w->wk_ran = true;
	w->wk_next = NULL;
	if (srv->sv_here_tail)
		srv->sv_here_tail->wk_next = w;
	else
		srv->sv_here = w;
	srv->sv_here_tail = w;
}

static void net_submit(struct net_server *srv, struct net_job *j)
{
	int64_t now = net_now_ns();

	j->nj_work.wk_run = job_run;
	srv->sv_inflight++;
	spin_call(&srv->sv_spin, now);
	net_poll_on(srv, now);
	if (rpc_call_is_null(j->nj_rec, j->nj_len)) {
		net_serve_here(srv, j);
		return;
	}
	/*
	 * A reply its worker wrote wakes nobody (job_send): the loop takes the completion at
	 * its next turn, and this timer bounds how late that is when no client calls again.
	 */
	if (!ev_is_active(&srv->sv_collect_timer))
		ev_timer_start(srv->sv_loop, &srv->sv_collect_timer);
	workers_submit(srv->sv_workers, &j->nj_work);
}

/* ---- TCP connections ---- */

static void conn_unref(struct net_conn *c)
{
	if (--c->nc_refs == 0) {
		pthread_mutex_destroy(&c->nc_wmu);
		free(c);
	}
}

/* ---- client addresses and connection slots ---- */

/* The client address of peer as IPv6 (IPv4 mapped): the key of its struct net_host. */
static void net_host_key(const struct sockaddr_storage *peer, socklen_t len, struct in6_addr *out)
{
	struct sockaddr_storage u;

	len = net_unmap(peer, len, &u);
	memset(out, 0, sizeof(*out));
	if (u.ss_family == AF_INET) {
		out->s6_addr[10] = out->s6_addr[11] = 0xff;
		memcpy(&out->s6_addr[12], &((const struct sockaddr_in *)&u)->sin_addr, 4);
	} else if (u.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		*out = ((const struct sockaddr_in6 *)&u)->sin6_addr;
	}
}

/* Where addr's entry is in its hash chain, or where it would go (then *result is NULL). */
static struct net_host **net_host_slot(struct net_server *srv, const struct in6_addr *addr)
{
	uint8_t mac[crypto_shorthash_BYTES];
	struct net_host **p;
	uint64_t h;

	crypto_shorthash(mac, addr->s6_addr, sizeof(addr->s6_addr), srv->sv_hash_key);
	memcpy(&h, mac, sizeof(h));
	for (p = &srv->sv_hosts[h & (srv->sv_nbuckets - 1)]; *p != NULL; p = &(*p)->nh_next)
		if (!memcmp(&(*p)->nh_addr, addr, sizeof(*addr)))
			break;
	return p;
}

/* Moves c to the end of sv_lru: it just made progress. */
static void conn_touch(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;

	c->nc_last = ev_now(srv->sv_loop);
	if (srv->sv_lru_tail == c)
		return;
	if (c->nc_lru_prev)
		c->nc_lru_prev->nc_lru_next = c->nc_lru_next;
	else if (srv->sv_lru == c)
		srv->sv_lru = c->nc_lru_next;
	if (c->nc_lru_next)
		c->nc_lru_next->nc_lru_prev = c->nc_lru_prev;
	c->nc_lru_next = NULL;
	c->nc_lru_prev = srv->sv_lru_tail;
	if (srv->sv_lru_tail)
		srv->sv_lru_tail->nc_lru_next = c;
	else
		srv->sv_lru = c;
	srv->sv_lru_tail = c;
}

/* Takes c off sv_lru and its host's list, freeing the host entry with its last connection. */
static void conn_unlink_slots(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	struct net_host *h = c->nc_host, **slot;

	if (c->nc_lru_prev)
		c->nc_lru_prev->nc_lru_next = c->nc_lru_next;
	else
		srv->sv_lru = c->nc_lru_next;
	if (c->nc_lru_next)
		c->nc_lru_next->nc_lru_prev = c->nc_lru_prev;
	else
		srv->sv_lru_tail = c->nc_lru_prev;
	c->nc_lru_prev = c->nc_lru_next = NULL;
	if (c->nc_hprev)
		c->nc_hprev->nc_hnext = c->nc_hnext;
	else
		h->nh_conns = c->nc_hnext;
	if (c->nc_hnext)
		c->nc_hnext->nc_hprev = c->nc_hprev;
	c->nc_hprev = c->nc_hnext = NULL;
	c->nc_host = NULL;
	if (--h->nh_nconns > 0)
		return;
	slot = net_host_slot(srv, &h->nh_addr);
	*slot = h->nh_next;
	free(h);
}

/*
 * Idle, for making room: nothing in flight, parked, left unread or queued. A record only
 * partly received is no call yet, so a client trickling one does not keep its slot.
 */
static bool conn_idle(struct net_conn *c)
{
	/* nc_unsent, not nc_inflight: a reply its worker wrote is done for the client. */
	return atomic_load_explicit(&c->nc_unsent, memory_order_relaxed) == 0 &&
	       c->nc_outq == NULL && c->nc_park == NULL && c->nc_pend == NULL;
}

/*
 * In use between its calls: a client that keeps calling on its connection, however
 * short its pauses, against connections that made a single call (a flood's) or have been
 * quiet for NET_IN_USE_WINDOW. Quiet ones go by idle time again, as knfsd's do, so a host
 * cannot keep slots with two calls each and silence.
 */
static bool conn_in_use(const struct net_conn *c, ev_tstamp now)
{
	return c->nc_calls >= NET_IN_USE_CALLS && now - c->nc_last < NET_IN_USE_WINDOW;
}

/* May be closed to make room for a new connection. */
static bool conn_evictable(struct net_conn *c, ev_tstamp now)
{
	return conn_idle(c) && !conn_in_use(c, now);
}

/*
 * Under pressure a connection holding nothing but a large partial record may finish it if
 * no other connection is finishing one: without the turn, connections that each hold part
 * of a large record could fill max_buffered between them and never be read again. The
 * turn ends with the record (conn_sync_rx), so it costs at most one record.
 */
static bool conn_take_turn(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;

	if (srv->sv_finisher == NULL)
		srv->sv_finisher = c;
	return srv->sv_finisher == c;
}

/*
 * Under global pressure a connection may still read while it holds no calls or replies
 * and only a small partial record: that keeps each well-behaved client moving (one call
 * at a time) while the clients holding data wait. Those single calls overshoot the limit
 * by a small reply each; a call that may produce a large reply waits parked while the
 * count is at twice the limit (conn_park), so a crowd of connections each slipping in
 * one large READ cannot take memory without bound either.
 */
static bool conn_full(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	char a[NET_ADDRSTR];

	if (c->nc_inflight >= srv->sv_max_requests || c->nc_inbytes >= NET_MAX_INBYTES ||
	    c->nc_outbytes >= NET_MAX_OUTQ || c->nc_park != NULL)
		return true;
	if (srv->sv_buffered < srv->sv_max_buffered)
		return false;
	if (c->nc_inflight == 0 && c->nc_outbytes == 0 &&
	    (c->nc_rxacct < NET_PRESSURE_RX || conn_take_turn(c)))
		return false;
	if (!srv->sv_pressured && ev_now(srv->sv_loop) - srv->sv_buf_warned >= NET_WARN_EVERY) {
		srv->sv_buf_warned = ev_now(srv->sv_loop);
		log_warn("net: %llu bytes are buffered for clients, the max-buffered limit; pausing reads from connections holding data (first %s) until replies drain (raise max-buffered if legitimate clients stall)",
			 (unsigned long long)srv->sv_buffered,
			 net_addrstr(&c->nc_peer, c->nc_peerlen, a));
	}
	srv->sv_pressured = true;
	return true;
}

/*
 * At twice max_buffered even calls of idle connections wait if their reply may be large.
 * What the calls, replies and partial records hold counts; parked calls and the bytes read
 * behind them do not: they only move once the parked call goes, so counting them, parked
 * calls could wait for themselves forever.
 */
static bool conn_hard_pressed(const struct net_server *srv)
{
	return (srv->sv_buffered - srv->sv_parked - srv->sv_pending) / 2 >= srv->sv_max_buffered;
}

/* Keeps sv_buffered in step with the reassembly buffer's size; ends a finished turn. */
static void conn_sync_rx(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;

	srv->sv_buffered -= c->nc_rxacct;
	c->nc_rxacct = c->nc_rx.rr_cap;
	srv->sv_buffered += c->nc_rxacct;
	if (c->nc_rxacct == 0 && srv->sv_finisher == c) {
		srv->sv_finisher = NULL;
		srv->sv_finisher_freed = true;
	}
}

static void conn_unpark(struct net_conn *c)
{
	c->nc_srv->sv_buffered -= c->nc_parklen;
	c->nc_srv->sv_parked -= c->nc_parklen;
	c->nc_park = NULL;
	c->nc_parklen = 0;
}

static void conn_drop_pend(struct net_conn *c)
{
	c->nc_srv->sv_buffered -= c->nc_pendlen;
	c->nc_srv->sv_pending -= c->nc_pendlen;
	free(c->nc_pend);
	c->nc_pend = NULL;
	c->nc_pendlen = c->nc_pendoff = 0;
}

/* The one destructor of an open connection. Drops the socket's reference. */
static void conn_close(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	struct net_job *j, *next;

	if (!c->nc_open)
		return;
	c->nc_open = false;
	ev_io_stop(srv->sv_loop, &c->nc_rio);
	ev_io_stop(srv->sv_loop, &c->nc_wio);
	/* No worker writes to the descriptor once it is closed (its number is reused). */
	pthread_mutex_lock(&c->nc_wmu);
	c->nc_wopen = false;
	close(c->nc_fd);
	c->nc_fd = -1;
	pthread_mutex_unlock(&c->nc_wmu);
	if (c->nc_prev)
		c->nc_prev->nc_next = c->nc_next;
	else
		srv->sv_conns = c->nc_next;
	if (c->nc_next)
		c->nc_next->nc_prev = c->nc_prev;
	c->nc_prev = c->nc_next = NULL;
	conn_unlink_slots(c);
	for (j = c->nc_outq; j != NULL; j = next) {
		next = j->nj_next;
		job_free(j);
	}
	c->nc_outq = c->nc_outtail = NULL;
	srv->sv_buffered -= c->nc_outbytes;
	c->nc_outbytes = 0;
	conn_drop_pend(c);
	free(c->nc_park);
	conn_unpark(c);
	record_free(&c->nc_rx);
	conn_sync_rx(c);
	srv->sv_nconns--;
	conn_unref(c);
}

/*
 * What a call may need for its reply, counted while it is in flight: small requests can
 * ask for large replies (READ, READDIR, a MOUNT list), so counting request bytes alone
 * would let pipelined calls of clients that never read pile up far past max_buffered.
 * Each call is charged the most its procedure may answer, a bound the dispatcher enforces
 * (rpc_reply_max); the real size replaces it when the reply comes back.
 */
static size_t net_reply_estimate(const uint8_t *rec, size_t len)
{
	return rpc_reply_max(rec, len);
}

/* Hands a complete record to the pool. False when memory ran out (connection closed). */
static bool conn_submit(struct net_conn *c, uint8_t *rec, size_t len)
{
	struct net_job *j;

	if (len == 0) {
		free(rec);
		return true;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		free(rec);
		log_err("net: out of memory for a request; closing the connection");
		conn_close(c);
		return false;
	}
	j->nj_conn = c;
	j->nj_rec = rec;
	j->nj_len = len;
	memcpy(&j->nj_peer, &c->nc_peer, c->nc_peerlen);
	j->nj_peerlen = c->nc_peerlen;
	memcpy(&j->nj_local, &c->nc_local, c->nc_locallen);
	j->nj_locallen = c->nc_locallen;
	c->nc_refs++;
	j->nj_reserve = len + net_reply_estimate(rec, len);
	c->nc_inflight++;
	c->nc_inbytes += len;
	c->nc_srv->sv_buffered += j->nj_reserve;
	atomic_fetch_add_explicit(&c->nc_unsent, 1, memory_order_relaxed);
	NET_STAMP(&j->nj_stamps, NET_ST_READ);
	net_submit(c->nc_srv, j);
	return true;
}

/* Submits (or parks) the record just completed. False when the connection was closed. */
static bool conn_record_done(struct net_conn *c)
{
	size_t rlen;
	uint8_t *rec;

	rec = record_take(&c->nc_rx, &rlen);
	conn_sync_rx(c);
	conn_touch(c);
	if (c->nc_calls < NET_IN_USE_CALLS)
		c->nc_calls++;
	if (conn_hard_pressed(c->nc_srv) && net_reply_estimate(rec, rlen) > RPC_REPLY_SMALL) {
		c->nc_park = rec;
		c->nc_parklen = rlen;
		c->nc_srv->sv_buffered += rlen;
		c->nc_srv->sv_parked += rlen;
		return true;
	}
	return conn_submit(c, rec, rlen);
}

/*
 * Feeds received bytes to the reassembler, submitting each complete record, until the
 * bytes run out or the connection is full. Returns the bytes consumed, or -1 when the
 * connection was closed.
 */
static ssize_t conn_feed(struct net_conn *c, const uint8_t *data, size_t len)
{
	size_t pos = 0, used;
	char a[NET_ADDRSTR];

	while (pos < len && !conn_full(c)) {
		enum record_status st = record_feed(&c->nc_rx, data + pos, len - pos, &used);

		conn_sync_rx(c);
		switch (st) {
		case RECORD_MORE:
			pos += used;
			break;
		case RECORD_DONE:
			pos += used;
			if (!conn_record_done(c))
				return -1;
			break;
		case RECORD_TOO_BIG:
			log_warn("net: %s sent a record larger than %u bytes; closing the connection (raise max_record if the client is legitimate)",
				 net_addrstr(&c->nc_peer, c->nc_peerlen, a), c->nc_rx.rr_max);
			conn_close(c);
			return -1;
		case RECORD_NOMEM:
		default:
			log_err("net: out of memory reassembling a record from %s; closing the connection",
				net_addrstr(&c->nc_peer, c->nc_peerlen, a));
			conn_close(c);
			return -1;
		}
	}
	return (ssize_t)pos;
}

/* Reading runs exactly when the connection can take more and nothing is left over. */
static void conn_update_reading(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	bool want = c->nc_open && !c->nc_eof && !srv->sv_shutting && !conn_full(c) &&
		    c->nc_pend == NULL;

	if (want && !ev_is_active(&c->nc_rio))
		ev_io_start(srv->sv_loop, &c->nc_rio);
	else if (!want && ev_is_active(&c->nc_rio))
		ev_io_stop(srv->sv_loop, &c->nc_rio);
}

/* Feeds bytes left over from a pause. Returns -1 when the connection was closed. */
static int conn_feed_pending(struct net_conn *c)
{
	ssize_t n;

	if (c->nc_park != NULL) {
		uint8_t *rec = c->nc_park;
		size_t len = c->nc_parklen;

		if (conn_hard_pressed(c->nc_srv))
			return 0;
		conn_unpark(c);
		if (!conn_submit(c, rec, len))
			return -1;
	}
	if (c->nc_pend == NULL || conn_full(c))
		return 0;
	n = conn_feed(c, c->nc_pend + c->nc_pendoff, c->nc_pendlen - c->nc_pendoff);
	if (n < 0)
		return -1;
	c->nc_pendoff += (size_t)n;
	if (c->nc_pendoff == c->nc_pendlen)
		conn_drop_pend(c);
	return 0;
}

/*
 * Writes queued replies until done or the socket is full. Returns -1 when the
 * connection was closed. Not while a worker's reply is half written: that one goes first,
 * once its completion is taken (net_complete_all flushes then).
 */
static int conn_flush(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	struct iovec iov[NET_BATCH];
	struct msghdr msg;
	struct net_job *j;
	ssize_t n;
	int cnt, err = 0;
	char a[NET_ADDRSTR];

	pthread_mutex_lock(&c->nc_wmu);
	while (c->nc_outq != NULL && !c->nc_wpartial) {
		cnt = 0;
		for (j = c->nc_outq; j != NULL && cnt < NET_BATCH; j = j->nj_next) {
			size_t off = cnt == 0 ? c->nc_outoff : 0;

			iov[cnt].iov_base = j->nj_reply + off;
			iov[cnt].iov_len = j->nj_replylen - off;
			cnt++;
		}
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = iov;
		msg.msg_iovlen = (size_t)cnt;
		n = sendmsg(c->nc_fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		c->nc_outbytes -= (size_t)n;
		srv->sv_buffered -= (uint64_t)n;
		if (n > 0)
			conn_touch(c);
		while (n > 0) {
			size_t left;

			j = c->nc_outq;
			left = j->nj_replylen - c->nc_outoff;
			if ((size_t)n < left) {
				c->nc_outoff += (size_t)n;
				break;
			}
			n -= (ssize_t)left;
			c->nc_outoff = 0;
			c->nc_outq = j->nj_next;
			if (c->nc_outq == NULL)
				c->nc_outtail = NULL;
			NET_STAMP(&j->nj_stamps, NET_ST_SENT);
			NET_STAGES_ADD(&srv->sv_stages, &j->nj_stamps);
			job_free(j);
		}
	}
	pthread_mutex_unlock(&c->nc_wmu);
	if (err == EAGAIN || err == EWOULDBLOCK) {
		if (!ev_is_active(&c->nc_wio))
			ev_io_start(srv->sv_loop, &c->nc_wio);
		return 0;
	}
	if (err != 0) {
		log_debug("net: writing to %s: %s; closing the connection",
			  net_addrstr(&c->nc_peer, c->nc_peerlen, a), strerror(err));
		conn_close(c);
		return -1;
	}
	if (ev_is_active(&c->nc_wio))
		ev_io_stop(srv->sv_loop, &c->nc_wio);
	return 0;
}

/* After replies were written or completed: finish, or resume reading. */
static void conn_after_io(struct net_conn *c)
{
	struct net_server *srv = c->nc_srv;
	bool idle = c->nc_inflight == 0 && c->nc_outq == NULL;

	if (idle && (c->nc_eof || srv->sv_shutting)) {
		conn_close(c);
		return;
	}
	if (!srv->sv_shutting && conn_feed_pending(c) < 0)
		return;
	conn_update_reading(c);
}

static void conn_read(struct ev_loop *loop, ev_io *w)
{
	struct net_conn *c = container_of(w, struct net_conn, nc_rio);
	uint8_t *buf = c->nc_srv->sv_rbuf, *body = NULL;
	size_t room = 0;
	ssize_t n, used;
	char a[NET_ADDRSTR];

	(void)loop;
	/* A large body (a WRITE's data) goes straight into its record, not through buf. */
	if (c->nc_pend == NULL)
		body = record_body_room(&c->nc_rx, NET_DIRECT_MIN, &room);
	n = body ? read(c->nc_fd, body, room) : read(c->nc_fd, buf, NET_READ_CHUNK);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		log_debug("net: reading from %s: %s; closing the connection",
			  net_addrstr(&c->nc_peer, c->nc_peerlen, a), strerror(errno));
		conn_close(c);
		return;
	}
	if (n == 0) {
		/* Answer what was asked, then close; a half-finished record is dropped. */
		c->nc_eof = true;
		record_free(&c->nc_rx);
		record_init(&c->nc_rx, c->nc_srv->sv_max_record);
		conn_sync_rx(c);
		conn_after_io(c);
		return;
	}
	if (body != NULL) {
		record_body_add(&c->nc_rx, (size_t)n);
		conn_sync_rx(c);
		if (record_done(&c->nc_rx) && !conn_record_done(c))
			return;
		conn_update_reading(c);
		return;
	}
	used = conn_feed(c, buf, (size_t)n);
	if (used < 0)
		return;
	if (used < n) {
		c->nc_pend = malloc((size_t)(n - used));
		if (c->nc_pend == NULL) {
			log_err("net: out of memory buffering input from %s; closing the connection",
				net_addrstr(&c->nc_peer, c->nc_peerlen, a));
			conn_close(c);
			return;
		}
		memcpy(c->nc_pend, buf + used, (size_t)(n - used));
		c->nc_pendlen = (size_t)(n - used);
		c->nc_pendoff = 0;
		c->nc_srv->sv_buffered += c->nc_pendlen;
		c->nc_srv->sv_pending += c->nc_pendlen;
	}
	conn_update_reading(c);
}

/* Bytes freed by a close here may end a max-buffered pause of other connections. */
static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_conn, nc_rio)->nc_srv;

	(void)revents;
	conn_read(loop, w);
	net_relieve(srv);
}

/* A close on a write error frees bytes too (see conn_read_cb). */
static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct net_conn *c = container_of(w, struct net_conn, nc_wio);
	struct net_server *srv = c->nc_srv;

	(void)loop;
	(void)revents;
	if (conn_flush(c) == 0)
		conn_after_io(c);
	net_relieve(srv);
}

/* The entry of the client at addr, made if it has none. NULL when out of memory. */
static struct net_host *net_host_get(struct net_server *srv, const struct in6_addr *addr)
{
	struct net_host **slot = net_host_slot(srv, addr);

	if (*slot == NULL) {
		*slot = calloc(1, sizeof(**slot));
		if (*slot != NULL)
			(*slot)->nh_addr = *addr;
	}
	return *slot;
}

static void conn_new(struct net_server *srv, int fd, const struct sockaddr_storage *peer,
		     socklen_t peerlen, const struct in6_addr *addr)
{
	struct net_conn *c;
	struct net_host *h;
	int one = 1;

	c = calloc(1, sizeof(*c));
	h = c != NULL ? net_host_get(srv, addr) : NULL;
	if (h == NULL) {
		log_err("net: out of memory for a new connection; refusing it");
		free(c);
		close(fd);
		return;
	}
	c->nc_srv = srv;
	c->nc_fd = fd;
	c->nc_refs = 1;
	c->nc_open = true;
	c->nc_wopen = true;
	pthread_mutex_init(&c->nc_wmu, NULL);
	c->nc_host = h;
	c->nc_hnext = h->nh_conns;
	if (h->nh_conns)
		h->nh_conns->nc_hprev = c;
	h->nh_conns = c;
	h->nh_nconns++;
	conn_touch(c);
	srv->sv_nconns++;
	memcpy(&c->nc_peer, peer, peerlen);
	c->nc_peerlen = peerlen;
	c->nc_locallen = sizeof(c->nc_local);
	if (getsockname(fd, (struct sockaddr *)&c->nc_local, &c->nc_locallen) < 0)
		c->nc_locallen = 0;
	/* Replies go out whole; Nagle would only delay the last segment of each. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	record_init(&c->nc_rx, srv->sv_max_record);
	ev_io_init(&c->nc_rio, conn_read_cb, fd, EV_READ);
	ev_io_init(&c->nc_wio, conn_write_cb, fd, EV_WRITE);
	c->nc_next = srv->sv_conns;
	if (srv->sv_conns)
		srv->sv_conns->nc_prev = c;
	srv->sv_conns = c;
	ev_io_start(srv->sv_loop, &c->nc_rio);
}

/* ---- listeners ---- */

static void listener_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct net_listener *l = container_of(w, struct net_listener, nl_backoff);

	(void)revents;
	ev_timer_stop(loop, w);
	if (!l->nl_srv->sv_shutting && l->nl_tcp >= 0)
		ev_io_start(loop, &l->nl_accept);
}

/*
 * How many connections may be open: max_conns, or fewer where the open files limit
 * would not leave enough descriptors for the rest of the server (the branches, the
 * client views, the inode map, the control socket): a quarter of the limit, at least
 * NET_FD_RESERVE_MIN and at most half. Read at every accept round, so a limit changed
 * from outside (prlimit) counts at once.
 */
static unsigned net_conn_cap(const struct net_server *srv, rlim_t *limit)
{
	struct rlimit rl;
	rlim_t reserve, room;

	*limit = RLIM_INFINITY;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return srv->sv_max_conns;
	*limit = rl.rlim_cur;
	reserve = rl.rlim_cur / 4 > NET_FD_RESERVE_MIN ? rl.rlim_cur / 4 : NET_FD_RESERVE_MIN;
	if (reserve > rl.rlim_cur / 2)
		reserve = rl.rlim_cur / 2;
	room = rl.rlim_cur - reserve;
	return room < srv->sv_max_conns ? (unsigned)(room > 0 ? room : 1) : srv->sv_max_conns;
}

/* True at most once per NET_WARN_EVERY for *last: a flood must not flood the log. */
static bool net_warn_due(struct net_server *srv, ev_tstamp *last)
{
	if (ev_now(srv->sv_loop) - *last < NET_WARN_EVERY)
		return false;
	*last = ev_now(srv->sv_loop);
	return true;
}

/*
 * Closes the connection idle longest, of host h (NULL: of any host), to make room for a
 * new one, as knfsd does: a client that left a connection idle reconnects when it needs
 * it. Connections in use are passed over (conn_in_use). False when none may be closed
 * (of the first NET_EVICT_SCAN looked at).
 */
static bool net_evict(struct net_server *srv, struct net_host *h, const char *limit)
{
	struct net_conn *c, *victim = NULL;
	ev_tstamp now = ev_now(srv->sv_loop);
	unsigned seen = 0;
	char a[NET_ADDRSTR];

	if (h != NULL) {
		/* Newest first: on a tie the later one in the list is the older. */
		for (c = h->nh_conns; c != NULL && seen++ < NET_EVICT_SCAN; c = c->nc_hnext)
			if (conn_evictable(c, now) && (victim == NULL || c->nc_last <= victim->nc_last))
				victim = c;
	} else {
		for (c = srv->sv_lru; c != NULL && victim == NULL && seen++ < NET_EVICT_SCAN;
		     c = c->nc_lru_next)
			if (conn_evictable(c, now))
				victim = c;
	}
	if (victim == NULL)
		return false;
	log_debug("net: closing %s, idle for %.0f s, to make room for a new connection (%s)",
		  net_addrstr(&victim->nc_peer, victim->nc_peerlen, a),
		  ev_now(srv->sv_loop) - victim->nc_last, limit);
	if (net_warn_due(srv, &srv->sv_evict_warned))
		log_info("net: %s reached: closing the connection idle longest (first %s, idle %.0f s) for each new one (raise %s if clients keep reconnecting)",
			 limit, net_addrstr(&victim->nc_peer, victim->nc_peerlen, a),
			 ev_now(srv->sv_loop) - victim->nc_last, limit);
	conn_close(victim);
	return true;
}

/*
 * When no room can be made a connection is accepted and closed at once rather than left
 * in the backlog: the client learns immediately, and the backlog cannot hide a flood.
 */
static void listener_refuse(struct net_listener *l, int fd, const struct sockaddr_storage *peer,
			    socklen_t peerlen, const struct net_host *h)
{
	struct net_server *srv = l->nl_srv;
	char a[NET_ADDRSTR];

	close(fd);
	if (h != NULL) {
		if (net_warn_due(srv, &srv->sv_host_warned))
			log_warn("net: %s has %u connections open, the max-connections-per-host limit, and each is busy or in use (calls within the last %.0f s); closing its new ones (raise max-connections-per-host if it is a legitimate client, e.g. a NAT gateway)",
				 net_addrstr(peer, peerlen, a), h->nh_nconns, NET_IN_USE_WINDOW);
		return;
	}
	if (net_warn_due(srv, &srv->sv_full_warned))
		log_warn("net: %u connections are open, the max-connections limit (or what the open files limit leaves for clients), and each is busy or in use (calls within the last %.0f s); closing new ones (first from %s) until some end (raise max-connections, or the open files limit, if the clients are legitimate)",
			 srv->sv_nconns, NET_IN_USE_WINDOW, net_addrstr(peer, peerlen, a));
}

/* A client no rule admits gets nothing, not even a slot: closed before it costs one. */
static bool listener_admitted(struct net_server *srv, const struct sockaddr_storage *peer,
			      socklen_t peerlen)
{
	struct sockaddr_storage u;
	socklen_t len;
	char a[NET_ADDRSTR];

	if (srv->sv_admit == NULL)
		return true;
	len = net_unmap(peer, peerlen, &u);
	if (srv->sv_admit(srv->sv_admit_arg, (const struct sockaddr *)&u, len))
		return true;
	log_debug("net: closing the connection of %s: no client rule admits it",
		  net_addrstr(peer, peerlen, a));
	if (net_warn_due(srv, &srv->sv_admit_warned))
		log_warn("net: closing connections from %s (first of this minute): no client rule of any export admits it (add a rule for it if it is a client)",
			 net_addrstr(peer, peerlen, a));
	return false;
}

/* An accepted connection: admitted, given a slot (made by closing an idle one), or closed. */
static void listener_take(struct net_listener *l, int fd, const struct sockaddr_storage *peer,
			  socklen_t peerlen, unsigned cap)
{
	struct net_server *srv = l->nl_srv;
	struct net_host *h;
	struct in6_addr addr;

	if (!listener_admitted(srv, peer, peerlen)) {
		close(fd);
		return;
	}
	net_host_key(peer, peerlen, &addr);
	h = *net_host_slot(srv, &addr);
	if (h != NULL && srv->sv_max_per_host > 0 && h->nh_nconns >= srv->sv_max_per_host &&
	    !net_evict(srv, h, "max-connections-per-host")) {
		listener_refuse(l, fd, peer, peerlen, h);
		return;
	}
	/* h may be gone now: the connection closed may have been its last. */
	if (srv->sv_nconns >= cap &&
	    !net_evict(srv, NULL, cap < srv->sv_max_conns ? "the open files limit" : "max-connections")) {
		listener_refuse(l, fd, peer, peerlen, NULL);
		return;
	}
	conn_new(srv, fd, peer, peerlen, &addr);
}

static void listener_accept(struct ev_loop *loop, struct net_listener *l)
{
	struct sockaddr_storage peer;
	socklen_t peerlen;
	rlim_t limit;
	unsigned cap = net_conn_cap(l->nl_srv, &limit);
	bool shed = false;
	int fd;

	for (int i = 0; i < NET_BATCH; i++) {
		peerlen = sizeof(peer);
		fd = accept4(l->nl_tcp, (struct sockaddr *)&peer, &peerlen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			listener_take(l, fd, &peer, peerlen, cap);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			return;
		case EMFILE:
		case ENFILE:
			/* The caches may hold descriptors only to save work: room for a client. */
			if (!shed) {
				shed = true;
				fsio_shed();
				continue;
			}
			/* fall through */
		case ENOBUFS:
		case ENOMEM:
			/* The pending connection stays queued; retrying at once would spin. */
			log_warn("net: cannot accept on port %d: %s; pausing new connections for %.0f s (raise the open files limit, e.g. ulimit -n or LimitNOFILE=)",
				 l->nl_port, strerror(errno), NET_ACCEPT_BACKOFF);
			ev_io_stop(loop, &l->nl_accept);
			ev_timer_set(&l->nl_backoff, NET_ACCEPT_BACKOFF, 0.);
			ev_timer_start(loop, &l->nl_backoff);
			return;
		default:
			log_warn("net: accept on port %d: %s", l->nl_port, strerror(errno));
			return;
		}
	}
}

/* Connections closed to make room free bytes that may end a max-buffered pause. */
static void listener_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct net_listener *l = container_of(w, struct net_listener, nl_accept);

	(void)revents;
	listener_accept(loop, l);
	net_relieve(l->nl_srv);
}

/* ---- UDP ---- */

static void udp_update_reading(struct net_listener *l)
{
	struct ev_loop *loop = l->nl_srv->sv_loop;
	bool want = l->nl_udp >= 0 && !l->nl_srv->sv_shutting &&
		    l->nl_udp_inflight < NET_UDP_MAX_INFLIGHT;

	if (want && !ev_is_active(&l->nl_udp_io))
		ev_io_start(loop, &l->nl_udp_io);
	else if (!want && ev_is_active(&l->nl_udp_io))
		ev_io_stop(loop, &l->nl_udp_io);
}

/* Records where a datagram was addressed, for the local address and the reply's source. */
static void udp_take_pktinfo(struct net_listener *l, struct msghdr *msg, struct net_job *j)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO &&
		    l->nl_family == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)&j->nj_local;

			memcpy(&j->nj_pkt.np_v4, CMSG_DATA(cm), sizeof(j->nj_pkt.np_v4));
			j->nj_pkt.np_level = IPPROTO_IP;
			memset(s, 0, sizeof(*s));
			s->sin_family = AF_INET;
			s->sin_port = htons((uint16_t)l->nl_port);
			s->sin_addr = j->nj_pkt.np_v4.ipi_spec_dst;
			j->nj_locallen = sizeof(*s);
			return;
		}
		if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO &&
		    l->nl_family == AF_INET6) {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&j->nj_local;

			memcpy(&j->nj_pkt.np_v6, CMSG_DATA(cm), sizeof(j->nj_pkt.np_v6));
			j->nj_pkt.np_level = IPPROTO_IPV6;
			memset(s, 0, sizeof(*s));
			s->sin6_family = AF_INET6;
			s->sin6_port = htons((uint16_t)l->nl_port);
			s->sin6_addr = j->nj_pkt.np_v6.ipi6_addr;
			if (IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
				s->sin6_scope_id = (uint32_t)j->nj_pkt.np_v6.ipi6_ifindex;
			j->nj_locallen = sizeof(*s);
			if (IN6_IS_ADDR_MULTICAST(&s->sin6_addr))
				j->nj_pkt.np_level = 0;
			return;
		}
	}
	memcpy(&j->nj_local, &l->nl_addr, l->nl_addrlen);
	j->nj_locallen = l->nl_addrlen;
}

static void udp_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct net_listener *l = container_of(w, struct net_listener, nl_udp_io);
	struct net_server *srv = l->nl_srv;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
	} ctl;
	struct sockaddr_storage peer;
	struct iovec iov;
	struct msghdr msg;
	struct net_job *j;
	ssize_t n;

	(void)loop;
	(void)revents;
	for (int i = 0; i < NET_BATCH && l->nl_udp_inflight < NET_UDP_MAX_INFLIGHT; i++) {
		iov.iov_base = srv->sv_ubuf;
		iov.iov_len = NET_UDP_BUF;
		memset(&msg, 0, sizeof(msg));
		msg.msg_name = &peer;
		msg.msg_namelen = sizeof(peer);
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(l->nl_udp, &msg, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			/* ICMP errors and the like are per datagram; the socket is fine. */
			continue;
		}
		if ((msg.msg_flags & MSG_TRUNC) || n == 0)
			continue;
		j = calloc(1, sizeof(*j));
		if (j == NULL || (j->nj_rec = malloc((size_t)n)) == NULL) {
			free(j);
			log_err("net: out of memory for a UDP request; dropped");
			continue;
		}
		memcpy(j->nj_rec, srv->sv_ubuf, (size_t)n);
		j->nj_len = (size_t)n;
		j->nj_lst = l;
		memcpy(&j->nj_peer, &peer, msg.msg_namelen);
		j->nj_peerlen = msg.msg_namelen;
		udp_take_pktinfo(l, &msg, j);
		l->nl_udp_inflight++;
		net_submit(srv, j);
	}
	udp_update_reading(l);
}

/* Sends a UDP reply from the address the request went to; failures only lose the reply. */
static void udp_reply(struct net_listener *l, struct net_job *j)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} ctl;
	struct iovec iov = { .iov_base = j->nj_reply + 4, .iov_len = j->nj_replylen - 4 };
	struct msghdr msg;
	struct cmsghdr *cm;
	char a[NET_ADDRSTR];
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &j->nj_peer;
	msg.msg_namelen = j->nj_peerlen;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	memset(&ctl, 0, sizeof(ctl));
	if (j->nj_pkt.np_level == IPPROTO_IP) {
		struct in_pktinfo pi = { .ipi_spec_dst = j->nj_pkt.np_v4.ipi_spec_dst };

		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else if (j->nj_pkt.np_level == IPPROTO_IPV6) {
		struct in6_pktinfo pi = { .ipi6_addr = j->nj_pkt.np_v6.ipi6_addr };

		/* The interface matters only where the address alone is ambiguous. */
		if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr))
			pi.ipi6_ifindex = j->nj_pkt.np_v6.ipi6_ifindex;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
	n = sendmsg(l->nl_udp, &msg, MSG_DONTWAIT);
	if (n < 0 && errno == EINVAL && msg.msg_control != NULL) {
		/* A source address the kernel will not use (gone meanwhile): let routing pick. */
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		n = sendmsg(l->nl_udp, &msg, MSG_DONTWAIT);
	}
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		log_debug("net: UDP reply of %zu bytes to %s lost: %s", iov.iov_len,
			  net_addrstr(&j->nj_peer, j->nj_peerlen, a), strerror(errno));
}

/* ---- limits across connections ---- */

/*
 * Lets every paused connection go on once the buffered bytes fell below the limit, the
 * turn to finish a record went free, or parked calls may go (conn_hard_pressed: waiting
 * for the buffered bytes to fall below the limit instead, the bytes parked connections
 * hold could keep them waiting forever).
 */
static void net_relieve(struct net_server *srv)
{
	struct net_conn *c, *next;
	bool parks_go = srv->sv_parked > 0 && !conn_hard_pressed(srv);

	if (srv->sv_shutting)
		return;
	if (!parks_go && !srv->sv_finisher_freed &&
	    (!srv->sv_pressured || srv->sv_buffered >= srv->sv_max_buffered))
		return;
	srv->sv_finisher_freed = false;
	srv->sv_pressured = false;
	for (c = srv->sv_conns; c != NULL; c = next) {
		next = c->nc_next;
		conn_after_io(c);
	}
}

/*
 * Closes connections without a byte read or written for sv_idle seconds and no call
 * being served: idle clients, clients that stopped reading their replies, and clients
 * stuck in the middle of a record. A client the server itself stopped reading (under
 * max_buffered) that holds nothing is only waiting for its turn, and stays.
 */
static void net_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_server, sv_idle_timer);
	struct net_conn *c, *next;
	ev_tstamp now = ev_now(loop);
	unsigned closed = 0;
	char a[NET_ADDRSTR];

	(void)revents;
	for (c = srv->sv_conns; c != NULL; c = next) {
		next = c->nc_next;
		if (c->nc_inflight > 0 || now - c->nc_last < (ev_tstamp)srv->sv_idle)
			continue;
		if (!ev_is_active(&c->nc_rio) && !c->nc_eof && c->nc_outq == NULL &&
		    c->nc_rx.rr_len == 0 && c->nc_rx.rr_hdr_have == 0)
			continue;
		log_debug("net: closing %s: no traffic for %u s (idle-timeout)",
			  net_addrstr(&c->nc_peer, c->nc_peerlen, a), srv->sv_idle);
		conn_close(c);
		closed++;
	}
	if (closed > 0)
		log_info("net: closed %u connections idle for %u s (idle-timeout)", closed, srv->sv_idle);
	net_relieve(srv);
}

/* ---- completions ---- */

/* Queues a reply for conn_flush; one its worker half wrote goes first, and frees the socket. */
static void conn_queue_reply(struct net_conn *c, struct net_job *j)
{
	size_t left = j->nj_replylen - j->nj_sent;

	pthread_mutex_lock(&c->nc_wmu);
	if (j->nj_sent > 0) {
		j->nj_next = c->nc_outq;
		c->nc_outq = j;
		if (c->nc_outtail == NULL)
			c->nc_outtail = j;
		c->nc_outoff = j->nj_sent;
		c->nc_wpartial = false;
	} else {
		j->nj_next = NULL;
		if (c->nc_outtail)
			c->nc_outtail->nj_next = j;
		else
			c->nc_outq = j;
		c->nc_outtail = j;
	}
	pthread_mutex_unlock(&c->nc_wmu);
	c->nc_outbytes += left;
	c->nc_srv->sv_buffered += left;
}

static void net_complete_all(struct net_server *srv)
{
	struct work *w, *next;
	struct net_conn *dirty = NULL, *c;
	bool done = false;

	if (srv->sv_here != NULL) {
		w = srv->sv_here;
		srv->sv_here_tail->wk_next = srv->sv_workers ? workers_done(srv->sv_workers) : NULL;
		srv->sv_here = srv->sv_here_tail = NULL;
	} else {
		w = workers_done(srv->sv_workers);
	}
	for (; w != NULL; w = next) {
		struct net_job *j = container_of(w, struct net_job, nj_work);

		next = w->wk_next;
		done = true;
		srv->sv_inflight--;
		if (j->nj_lst != NULL) {
			struct net_listener *l = j->nj_lst;

			l->nl_udp_inflight--;
			if (l->nl_udp >= 0 && j->nj_reply != NULL && j->nj_replylen > 4)
				udp_reply(l, j);
			job_free(j);
			udp_update_reading(l);
			continue;
		}
		c = j->nj_conn;
		c->nc_inflight--;
		c->nc_inbytes -= j->nj_len;
		srv->sv_buffered -= j->nj_reserve;
		if (j->nj_reply != NULL && j->nj_sent == j->nj_replylen) {
			/* its worker wrote it: progress, if the connection is still there */
			if (c->nc_open)
				conn_touch(c);
			NET_STAGES_ADD(&srv->sv_stages, &j->nj_stamps);
			job_free(j);
		} else if (c->nc_open && j->nj_reply != NULL) {
			atomic_fetch_sub_explicit(&c->nc_unsent, 1, memory_order_relaxed);
			NET_STAMP(&j->nj_stamps, NET_ST_DONE);
			conn_queue_reply(c, j);
		} else {
			atomic_fetch_sub_explicit(&c->nc_unsent, 1, memory_order_relaxed);
			job_free(j);
		}
		/* The job's reference moves to the dirty list, or is dropped if already there. */
		if (c->nc_dirty) {
			conn_unref(c);
		} else {
			c->nc_dirty = true;
			c->nc_dirty_next = dirty;
			dirty = c;
		}
	}
	/* Write each connection's batch with as few syscalls as it takes. */
	while (dirty != NULL) {
		c = dirty;
		dirty = c->nc_dirty_next;
		c->nc_dirty = false;
		c->nc_dirty_next = NULL;
		/* A pending write watcher flushes on its own; conn_flush() < 0 means closed. */
		if (c->nc_open && (ev_is_active(&c->nc_wio) || conn_flush(c) == 0))
			conn_after_io(c);
		conn_unref(c);
	}
	net_relieve(srv);
	if (done) {
		int64_t now = net_now_ns();

		spin_event(&srv->sv_spin, now);
		net_poll_on(srv, now);
	}
}

static void net_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	net_complete_all(container_of(w, struct net_server, sv_async));
}

static void net_collect_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_server, sv_collect);

	(void)loop;
	(void)revents;
	if (srv->sv_here != NULL || (srv->sv_workers != NULL && workers_have_done(srv->sv_workers)))
		net_complete_all(srv);
}

/*
 * Before the loop sleeps: a NULL call served on it (net_serve_here) after this turn's
 * check would otherwise wait for the next wake-up, and a UDP one's reply goes out only
 * with its completion.
 */
static void net_here_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_server, sv_here_prep);

	(void)loop;
	(void)revents;
	if (srv->sv_here != NULL)
		net_complete_all(srv);
}

static void net_collect_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct net_server *srv = container_of(w, struct net_server, sv_collect_timer);

	(void)revents;
	net_complete_all(srv);
	if (srv->sv_inflight == 0)
		ev_timer_stop(loop, w);
}

/* ---- creating and listening ---- */


int net_server_create(struct ev_loop *loop, const struct net_opts *opts, struct net_server **out)
{
	struct net_server *srv;
	rlim_t limit;
	int rc = -ENOMEM;

	*out = NULL;
	srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return -ENOMEM;
	srv->sv_loop = loop;
	srv->sv_max_record = opts->no_max_record ? opts->no_max_record : NET_DEFAULT_MAX_RECORD;
	srv->sv_max_conns = opts->no_max_conns ? opts->no_max_conns : NET_DEFAULT_MAX_CONNS;
	srv->sv_max_requests = opts->no_max_requests ? opts->no_max_requests : NET_DEFAULT_MAX_REQUESTS;
	srv->sv_max_buffered = opts->no_max_buffered ? opts->no_max_buffered : NET_DEFAULT_MAX_BUFFERED;
	srv->sv_max_per_host = opts->no_max_conns_per_host;
	srv->sv_admit = opts->no_admit;
	srv->sv_admit_arg = opts->no_admit_arg;
	srv->sv_idle = opts->no_idle_timeout;
	srv->sv_udp = opts->no_udp;
	srv->sv_full_warned = srv->sv_buf_warned = srv->sv_host_warned = -NET_WARN_EVERY;
	srv->sv_admit_warned = srv->sv_evict_warned = -NET_WARN_EVERY;
	if (opts->no_listen != NULL && (srv->sv_listen = strdup(opts->no_listen)) == NULL)
		goto fail;
	if (sodium_init() < 0) {
		rc = -ENOSYS;
		goto fail;
	}
	randombytes_buf(srv->sv_hash_key, sizeof(srv->sv_hash_key));
	srv->sv_nbuckets = 64;
	while (srv->sv_nbuckets < srv->sv_max_conns && srv->sv_nbuckets < NET_HOST_BUCKETS_MAX)
		srv->sv_nbuckets <<= 1;
	srv->sv_hosts = calloc(srv->sv_nbuckets, sizeof(*srv->sv_hosts));
	if (srv->sv_hosts == NULL)
		goto fail;
	if (net_conn_cap(srv, &limit) < srv->sv_max_conns)
		log_warn("net: the open files limit (%llu) leaves client connections fewer descriptors than max-connections (%u): at most %u connections are kept open (raise the limit, e.g. ulimit -n or LimitNOFILE=, or lower max-connections)",
			 (unsigned long long)limit, srv->sv_max_conns, net_conn_cap(srv, &limit));
	srv->sv_rbuf = malloc(NET_READ_CHUNK);
	srv->sv_ubuf = malloc(NET_UDP_BUF);
	if (srv->sv_rbuf == NULL || srv->sv_ubuf == NULL)
		goto fail;
	ev_async_init(&srv->sv_async, net_async_cb);
	ev_async_start(loop, &srv->sv_async);
	/* First after each wake-up: what a call or accept then sees is up to date. */
	ev_check_init(&srv->sv_collect, net_collect_cb);
	ev_set_priority(&srv->sv_collect, EV_MAXPRI);
	ev_check_start(loop, &srv->sv_collect);
	ev_prepare_init(&srv->sv_here_prep, net_here_cb);
	ev_prepare_start(loop, &srv->sv_here_prep);
	spin_init(&srv->sv_spin, opts->no_busy_poll_us);
	ev_idle_init(&srv->sv_poll, net_poll_cb);
	ev_timer_init(&srv->sv_collect_timer, net_collect_timer_cb, NET_COLLECT_EVERY,
		      NET_COLLECT_EVERY);
	/* The async, check and prepare watchers alone must not keep ev_run() from returning. */
	ev_unref(loop);
	ev_unref(loop);
	ev_unref(loop);
	srv->sv_async_on = true;
	if (srv->sv_idle > 0) {
		/* A sweep a few times per timeout: one timer, however many connections. */
		ev_tstamp every = srv->sv_idle / 4.0;

		if (every < 0.25)
			every = 0.25;
		if (every > 30.0)
			every = 30.0;
		ev_timer_init(&srv->sv_idle_timer, net_idle_cb, every, every);
		ev_timer_start(loop, &srv->sv_idle_timer);
		ev_unref(loop);
		srv->sv_idle_on = true;
	}
	rc = workers_create(opts->no_workers > 0 ? opts->no_workers : NET_DEFAULT_WORKERS,
			    net_notify, srv, &srv->sv_workers);
	if (rc < 0)
		goto fail;
	*out = srv;
	return 0;
fail:
	net_server_free(srv);
	return rc;
}

static const char *net_bind_hint(int err)
{
	switch (err) {
	case EADDRINUSE:
		return "another program uses it (see ss -ltnup); stop it or choose another port";
	case EACCES:
	case EPERM:
		return "ports below 1024 need root or CAP_NET_BIND_SERVICE; run as root or choose a port of 1024 or more";
	case EADDRNOTAVAIL:
		return "the address is not configured on this host; check --listen";
	case EAFNOSUPPORT:
		return "this address family is not available on this host; check --listen";
	default:
		return "check --listen and --port";
	}
}

static int net_socket(int family, int type, int *fd)
{
	*fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return *fd < 0 ? -errno : 0;
}

/* Binds one socket of type to addr (whose port is set); returns 0 or -errno. */
static int net_bind_one(const struct sockaddr_storage *addr, socklen_t addrlen, int type, int *out)
{
	int fd, rc, one = 1, zero = 0;

	rc = net_socket(addr->ss_family, type, &fd);
	if (rc < 0)
		return rc;
	/*
	 * TCP only: it lets a restart bind while old connections sit in TIME_WAIT. On UDP it
	 * would let a second process bind the same port and silently take half the datagrams.
	 */
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (type == SOCK_DGRAM) {
		int big = 1 << 20;

		if (addr->ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
		else
			setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		/* Room for bursts of requests and large READ replies. */
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	}
	if (bind(fd, (const struct sockaddr *)addr, addrlen) < 0 ||
	    (type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

static void net_set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

static int net_get_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/*
 * Binds TCP, and with want_udp UDP on the same port of addr (*udp -1 otherwise). Port 0
 * lets TCP pick and retries when UDP finds that port taken. On failure err names the
 * protocol and *failed_tcp says which.
 */
static int net_bind_pair(struct sockaddr_storage *addr, socklen_t addrlen, int port,
			 bool want_udp, int *tcp, int *udp, bool *failed_tcp)
{
	int rc = 0;

	*udp = -1;
	for (int attempt = 0; attempt < NET_PORT0_TRIES; attempt++) {
		net_set_port(addr, port);
		*failed_tcp = true;
		rc = net_bind_one(addr, addrlen, SOCK_STREAM, tcp);
		if (rc < 0)
			return rc;
		rc = net_get_port(*tcp);
		if (rc < 0) {
			close(*tcp);
			return rc;
		}
		if (!want_udp)
			return 0;
		net_set_port(addr, rc);
		*failed_tcp = false;
		rc = net_bind_one(addr, addrlen, SOCK_DGRAM, udp);
		if (rc == 0)
			return 0;
		close(*tcp);
		if (port != 0 || rc != -EADDRINUSE)
			return rc;
	}
	return rc;
}

static int net_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;

	if (getaddrinfo(text, NULL, &hints, &ai) != 0 || ai == NULL)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int net_listen_on(struct net_server *srv, int port, bool with_udp, char *err, size_t errlen)
{
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct net_listener *l;
	const char *where = srv->sv_listen ? srv->sv_listen : "all addresses";
	int tcp = -1, udp = -1, rc, bound;
	bool failed_tcp = true;

	if (port < 0 || port > 65535) {
		snprintf(err, errlen, "port %d is out of range; use 0 to 65535", port);
		return -EINVAL;
	}
	memset(&addr, 0, sizeof(addr));
	if (srv->sv_listen != NULL) {
		if (net_parse_listen(srv->sv_listen, &addr, &addrlen) < 0) {
			snprintf(err, errlen,
				 "listen address \"%s\" is not a numeric IPv4 or IPv6 address; give e.g. 0.0.0.0, ::, 127.0.0.1 or ::1",
				 srv->sv_listen);
			return -EINVAL;
		}
		rc = net_bind_pair(&addr, addrlen, port, with_udp, &tcp, &udp, &failed_tcp);
	} else {
		/* IPv6 any also takes IPv4 (V6ONLY off); hosts without IPv6 get IPv4 any. */
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&addr;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		addrlen = sizeof(*s6);
		rc = net_bind_pair(&addr, addrlen, port, with_udp, &tcp, &udp, &failed_tcp);
		if (rc == -EAFNOSUPPORT || rc == -EADDRNOTAVAIL || rc == -EPROTONOSUPPORT) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&addr;

			memset(&addr, 0, sizeof(addr));
			s4->sin_family = AF_INET;
			s4->sin_addr.s_addr = htonl(INADDR_ANY);
			addrlen = sizeof(*s4);
			rc = net_bind_pair(&addr, addrlen, port, with_udp, &tcp, &udp, &failed_tcp);
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot listen on %s port %d on %s: %s; %s",
			 failed_tcp ? "TCP" : "UDP", port, where, strerror(-rc), net_bind_hint(-rc));
		return rc;
	}
	bound = net_get_port(tcp);
	l = calloc(1, sizeof(*l));
	if (l == NULL || bound < 0) {
		free(l);
		close(tcp);
		if (udp >= 0)
			close(udp);
		snprintf(err, errlen, "cannot listen on port %d: out of memory", port);
		return -ENOMEM;
	}
	l->nl_srv = srv;
	l->nl_port = bound;
	l->nl_family = addr.ss_family;
	l->nl_tcp = tcp;
	l->nl_udp = udp;
	net_set_port(&addr, bound);
	memcpy(&l->nl_addr, &addr, addrlen);
	l->nl_addrlen = addrlen;
	ev_io_init(&l->nl_accept, listener_accept_cb, tcp, EV_READ);
	ev_timer_init(&l->nl_backoff, listener_backoff_cb, NET_ACCEPT_BACKOFF, 0.);
	ev_io_init(&l->nl_udp_io, udp_read_cb, udp, EV_READ);
	l->nl_next = srv->sv_listeners;
	srv->sv_listeners = l;
	if (!srv->sv_shutting) {
		ev_io_start(srv->sv_loop, &l->nl_accept);
		if (udp >= 0)
			ev_io_start(srv->sv_loop, &l->nl_udp_io);
	}
	return bound;
}

int net_listen(struct net_server *srv, int port, char *err, size_t errlen)
{
	return net_listen_on(srv, port, srv->sv_udp, err, errlen);
}

int net_listen_udp(struct net_server *srv, int port, char *err, size_t errlen)
{
	return net_listen_on(srv, port, true, err, errlen);
}

void net_server_usage(const struct net_server *srv, struct net_usage *out)
{
	out->nu_buffered = srv->sv_buffered;
	out->nu_conns = srv->sv_nconns;
	out->nu_inflight = srv->sv_inflight;
}

/* ---- shutting down ---- */

static void net_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/*
 * Call after ev_run() returned (or from a callback that then breaks the loop): it runs
 * the loop itself for up to NET_SHUTDOWN_WAIT seconds so pending replies get written.
 */
void net_server_shutdown(struct net_server *srv)
{
	struct ev_loop *loop = srv->sv_loop;
	struct net_listener *l;
	struct net_conn *c, *next;
	ev_timer tick;
	ev_tstamp deadline;

	if (srv->sv_shutting)
		return;
	srv->sv_shutting = true;
	ev_idle_stop(loop, &srv->sv_poll);
	if (srv->sv_idle_on) {
		ev_ref(loop);
		ev_timer_stop(loop, &srv->sv_idle_timer);
		srv->sv_idle_on = false;
	}
	for (l = srv->sv_listeners; l != NULL; l = l->nl_next) {
		ev_io_stop(loop, &l->nl_accept);
		ev_timer_stop(loop, &l->nl_backoff);
		ev_io_stop(loop, &l->nl_udp_io);
		if (l->nl_tcp >= 0)
			close(l->nl_tcp);
		l->nl_tcp = -1;
	}
	for (c = srv->sv_conns; c != NULL; c = next) {
		next = c->nc_next;
		conn_after_io(c);
	}

	ev_timer_init(&tick, net_tick_cb, 0.05, 0.05);
	ev_timer_start(loop, &tick);
	deadline = ev_time() + NET_SHUTDOWN_WAIT;
	while ((srv->sv_inflight > 0 || srv->sv_conns != NULL) && ev_time() < deadline)
		ev_run(loop, EVRUN_ONCE);
	ev_timer_stop(loop, &tick);
	if (srv->sv_inflight > 0 || srv->sv_conns != NULL)
		log_warn("net: shutting down with %u calls unanswered or replies unsent after %.0f s",
			 srv->sv_inflight, NET_SHUTDOWN_WAIT);

	while (srv->sv_conns != NULL)
		conn_close(srv->sv_conns);
	for (l = srv->sv_listeners; l != NULL; l = l->nl_next) {
		if (l->nl_udp >= 0)
			close(l->nl_udp);
		l->nl_udp = -1;
	}
	if (srv->sv_workers != NULL) {
		workers_stop(srv->sv_workers);
		net_complete_all(srv);
	}
	if (srv->sv_async_on) {
		ev_ref(loop);
		ev_async_stop(loop, &srv->sv_async);
		ev_ref(loop);
		ev_check_stop(loop, &srv->sv_collect);
		ev_ref(loop);
		ev_prepare_stop(loop, &srv->sv_here_prep);
		ev_idle_stop(loop, &srv->sv_poll);
		ev_timer_stop(loop, &srv->sv_collect_timer);
		srv->sv_async_on = false;
	}
	srv->sv_down = true;
}

#ifdef NET_STAGE_TIMES
static void net_stages_log(const struct net_stage_sums *s)
{
	static const char *const names[NET_ST_N] = {
		"", "queued for a worker", "served", "back to the loop", "written",
	};
	double n = s->ss_calls ? (double)s->ss_calls : 1;

	log_info("net: stage times of %llu TCP calls (mean us):", (unsigned long long)s->ss_calls);
	for (int i = 1; i < NET_ST_N; i++)
		log_info("net:   %-20s %8.1f", names[i], (double)s->ss_ns[i] / n / 1000.0);
}
#endif

void net_server_free(struct net_server *srv)
{
	struct net_listener *l, *next;

	if (srv == NULL)
		return;
	net_server_shutdown(srv);
#ifdef NET_STAGE_TIMES
	net_stages_log(&srv->sv_stages);
#endif
	workers_free(srv->sv_workers);
	for (l = srv->sv_listeners; l != NULL; l = next) {
		next = l->nl_next;
		free(l);
	}
	free(srv->sv_hosts);
	free(srv->sv_listen);
	free(srv->sv_rbuf);
	free(srv->sv_ubuf);
	free(srv);
}
