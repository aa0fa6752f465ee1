/*
 * Outbound ONC RPC calls (RFC 5531) for the lock service: NLM callbacks to clients and
 * SM_NOTIFY to their statd. Calls are asynchronous: rpc_client_send() only encodes the
 * arguments and appends to a bounded queue; one thread of the client's own finds the port
 * (the target host's portmapper, v2 GETPORT over UDP, cached briefly), sends, retries on
 * schedule and hands the reply to the call's `done`. Nothing here blocks the event loop
 * or a worker.
 *
 * Credentials: AUTH_UNIX (AUTH_SYS) with uid 0, gid 0 and our host name. Linux lockd
 * accepts AUTH_NULL and AUTH_UNIX alike (lockd_authenticate), rpc.statd does not look at
 * the credential of SM_NOTIFY; some other lock managers refuse AUTH_NULL, none refuses
 * AUTH_UNIX. When running as root the source port is a reserved one (bindresvport), as
 * lock managers may require of a peer's calls; failing that, any port.
 */
#ifndef UNFS_RPC_CLIENT_H
#define UNFS_RPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <rpc/rpc.h>

/* Calls queued or in flight at most; rpc_client_send() answers -EAGAIN beyond. */
#define RPC_CLIENT_QUEUE_MAX 4096
/* Calls in flight at once (each holds a socket); the rest wait in the queue. */
#define RPC_CLIENT_ACTIVE_MAX 64
/* Encoded arguments larger than this are refused (-EMSGSIZE). */
#define RPC_CLIENT_ARGS_MAX (32u << 10)
/* Largest reply accepted (a larger one fails the attempt). */
#define RPC_CLIENT_REPLY_MAX (64u << 10)
/* How long a port learnt from a portmapper is used without asking again. */
#define RPC_CLIENT_PMAP_TTL_MS 30000

struct rpc_client;

int rpc_client_start(struct rpc_client **out, char *err, size_t errlen);
/*
 * Fails every call queued or in flight with -ECANCELED (their `done` runs, on the calling
 * thread or the client's), then joins the client's thread and frees everything. NULL is
 * fine. No rpc_client_send() may start after it began.
 */
void rpc_client_stop(struct rpc_client *c);

struct rpc_client_call {
	/*
	 * The server. Port 0: found through the portmapper of that host (port 111, v2
	 * GETPORT); any other port is used as it is. AF_INET or AF_INET6.
	 */
	const struct sockaddr *to;
	socklen_t tolen;
	int protocol;                 /* IPPROTO_TCP or IPPROTO_UDP */
	uint32_t prog, vers, proc;
	xdrproc_t xdr_args;
	const void *args;
	/*
	 * The retry schedule: up to `attempts` tries (0 counts as 1), each given interval_ms
	 * (0: 1000) to find the port and get the reply before the next one starts; UDP
	 * retransmits with the same xid, TCP opens a new connection.
	 */
	unsigned attempts;
	unsigned interval_ms;
	/*
	 * Runs once, on the client's thread (or in rpc_client_stop), with no lock held: it
	 * may call rpc_client_send(). status: 0 delivered (accepted, SUCCESS: reply is
	 * positioned at the results, valid during the call only), -ETIMEDOUT (no reply in
	 * the schedule), -ECONNREFUSED (the last try was refused, or the program is not
	 * registered with the host's portmapper), -EPROTO (MSG_DENIED or accept_stat other
	 * than SUCCESS), -ECANCELED (rpc_client_stop); reply NULL on failure.
	 */
	void (*done)(void *arg, int status, XDR *reply);
	void *arg;
};

/*
 * Queues a call; the arguments are encoded now, so the caller's memory may go right after.
 * 0, or -EAGAIN (queue full), -EMSGSIZE (arguments too large, or that libtirpc cannot
 * size and that do not encode in RPC_CLIENT_ARGS_MAX), -EINVAL (bad address or protocol,
 * arguments that do not encode), -ECANCELED (stopping), -ENOMEM. On failure
 * `done` is not called.
 */
int rpc_client_send(struct rpc_client *c, const struct rpc_client_call *call);

/*
 * For tests: the port the portmapper of every host is asked on (default 111), so a test
 * can run a fake one. Takes effect for calls that look a port up afterwards.
 */
void rpc_client_set_pmap_port(struct rpc_client *c, uint16_t port);

#endif
