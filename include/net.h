/*
 * The network side: one libev loop owns every socket. TCP connections reassemble
 * record-marked records (bounded in size); UDP datagrams are records. Each complete record
 * goes to a small pool of worker threads (rpc_serve); replies come back to the loop through
 * an ev_async and are written without ever blocking it.
 */
#ifndef UNFS_NET_H
#define UNFS_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct ev_loop;
struct net_server;

/*
 * Whether a client at peer (IPv4 as AF_INET, never v4-mapped) may hold a TCP connection
 * at all: asked on the loop for every accepted connection before it takes a slot, so it
 * must be quick and must not block.
 */
typedef bool net_admit_fn(void *arg, const struct sockaddr *peer, socklen_t peerlen);

/*
 * Zero in a limit means its default (NET_DEFAULT_*), except no_idle_timeout (0 is off) and
 * no_max_conns_per_host (0: only no_max_conns bounds a host).
 *
 * When no_max_conns connections are open (or the open files limit leaves too few
 * descriptors), a new connection closes the one idle longest instead, where one is idle (no
 * call in flight, no reply queued; a record only partly received counts as idle) and not in
 * use (in use: more than one call received, the last within the last 10 s); only when none
 * may go is the new one closed at once. no_max_conns_per_host bounds one client address in
 * the same way, among its own connections.
 */
struct net_opts {
	const char *no_listen;   /* NULL: all addresses (IPv6 any with v4 mapped, else IPv4 any) */
	int no_workers;
	uint32_t no_max_record;
	unsigned no_max_conns;      /* open TCP connections, all clients together */
	unsigned no_max_conns_per_host; /* open TCP connections of one client address */
	unsigned no_idle_timeout;   /* seconds without a call received or reply bytes sent, and
				       with no call being served; 0: never */
	unsigned no_max_requests;   /* calls in flight per TCP connection */
	uint64_t no_max_buffered;   /* request, reassembly and reply bytes across all connections */
	net_admit_fn *no_admit;     /* NULL: every client may connect */
	void *no_admit_arg;
	bool no_udp;                /* listeners take UDP datagrams too; false: TCP only */
	unsigned no_busy_poll_us;   /* how long the loop polls before it sleeps after a call
				       (an upper bound, see src/net/spin.h); 0: never */
};

/*
 * The defaults of the limits, also what a user who sets nothing gets (config.c takes them
 * from here). A record of 1 MiB + 4 KiB carries the 1 MiB WRITE that FSINFO offers on TCP
 * with its RPC and NFS headers.
 */
#define NET_DEFAULT_WORKERS 32
#define NET_DEFAULT_MAX_RECORD ((1u << 20) + (4u << 10))
#define NET_DEFAULT_MAX_CONNS 1024u
#define NET_DEFAULT_MAX_REQUESTS 64u
#define NET_DEFAULT_MAX_BUFFERED (256ull << 20)
/*
 * Long enough to catch the next call of a client with one call in flight (its turnaround
 * is 20-60 us); a client calling less often shrinks the window to nothing.
 */
#define NET_DEFAULT_BUSY_POLL_US 100u

int net_server_create(struct ev_loop *loop, const struct net_opts *opts, struct net_server **out);

/*
 * Listens on TCP port, and on UDP port too when no_udp is set (0 picks a free port, the
 * same one for both protocols).
 * Every listener serves every registered program. Returns the bound port, or -errno with
 * a message in err naming the port and the cause.
 */
int net_listen(struct net_server *srv, int port, char *err, size_t errlen);
/* net_listen on TCP and UDP whatever no_udp says: for programs clients reach over UDP (NLM). */
int net_listen_udp(struct net_server *srv, int port, char *err, size_t errlen);

/* What the server holds at the moment (tests and fuzzing check the accounting with it). */
struct net_usage {
	uint64_t nu_buffered;       /* bytes counted against no_max_buffered */
	unsigned nu_conns;          /* open TCP connections */
	unsigned nu_inflight;       /* calls being served, TCP and UDP */
};

/* Call on the loop's thread. */
void net_server_usage(const struct net_server *srv, struct net_usage *out);

/* Stops accepting, lets in-flight replies be sent (bounded wait), closes everything. */
void net_server_shutdown(struct net_server *srv);
void net_server_free(struct net_server *srv);

#endif
