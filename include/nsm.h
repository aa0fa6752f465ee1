/*
 * The Network Status Monitor (NSM, program 100024 v1) as far as the lock service needs it:
 * our state number, the clients that hold (or held) locks, SM_NOTIFY to them after a
 * restart so they reclaim their locks, and SM_NOTIFY from them when they restart so their
 * locks are released. unionnfsd is not the machine's rpc.statd: SM_MON and friends,
 * which a local lock manager would send, are refused.
 *
 * On disk, STATE_DIR/nsm/ (written through fsio only):
 *   state             the state number in decimal: odd while we run, 2 more at each start;
 *                     replaced atomically (temporary file, fsync, rename, directory fsync)
 *                     before we serve
 *   clients           the clients monitored in this run: a first line
 *                     "unionnfsd-nsm-clients 1", then one a line "ADDRESS =CALLER LOCAL"
 *                     (the client's address, its caller name escaped as %XX outside
 *                     [A-Za-z0-9._-], the address of ours it reached: what its statd
 *                     monitors), each line durable (fdatasync) before nsm_monitor returns;
 *                     a last line cut short by a crash is ignored. Lines of clients that
 *                     hold nothing any more (nsm_unmonitor) go when the file is rewritten
 *                     atomically: once NSM_COMPACT_IDLE of them or NSM_MAX_CLIENTS lines
 *                     are there and a new client comes, and at nsm_close (a clean stop), so
 *                     a run whose clients released everything leaves no file and no grace
 *   clients.previous  the same for what earlier runs left that still awaits SM_NOTIFY;
 *                     an entry goes when its client's statd answered (rewritten atomically,
 *                     in batches)
 * A file that cannot be read as such (corrupt, too long, more than NSM_MAX_CLIENTS lines)
 * is reported with its path and the fix and treated as empty.
 */
#ifndef UNFS_NSM_H
#define UNFS_NSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rpc.h"
#include "sm_inter.h"   /* generated from rpc/sm_inter.x */

struct rpc_client;

/*
 * Clients holding something listed at most. NLM has NSM monitor each host holding locks:
 * it checks its bound on those hosts is no larger.
 */
#define NSM_MAX_CLIENTS 1024
/* Longest caller name kept: a name NSM monitors a host under (mon_name<SM_MAXSTRLEN>). */
#define NSM_MAX_NAME SM_MAXSTRLEN
/*
 * SM_NOTIFY's schedule: NSM_NOTIFY_FAST_TRIES tries 1 s apart, then one every
 * NSM_NOTIFY_SLOW_MS until about NSM_NOTIFY_GIVE_UP_MS after the start; a client not
 * reached by then stays in clients.previous for the next start.
 */
#define NSM_NOTIFY_FAST_TRIES 10
#define NSM_NOTIFY_FAST_MS 1000
#define NSM_NOTIFY_SLOW_MS 10000
#define NSM_NOTIFY_GIVE_UP_MS (5 * 60 * 1000)

struct nsm;

/*
 * Opens STATE_DIR/nsm (made if missing), moves the last run's clients to
 * clients.previous, and writes the new state number durably. rc (may be NULL: then
 * nsm_notify_previous sends nothing) carries SM_NOTIFY; it must outlive the struct nsm's
 * calls: stop it before nsm_close (or after: nsm_close leaves the memory to the last
 * call's end).
 */
int nsm_open(const char *state_dir, struct rpc_client *rc, struct nsm **out, char *err,
	     size_t errlen);
uint32_t nsm_state(const struct nsm *n);
/* Tests: SM_NOTIFY's fast tries this many ms apart, not NSM_NOTIFY_FAST_MS (before notifying). */
void nsm_set_notify_interval(struct nsm *n, unsigned ms);
/* The last run left clients that have not been told of this start: grace applies. */
bool nsm_previous_clients(const struct nsm *n);
/*
 * Notes that client (reaching us at local; its caller name from NLM) holds locks, so it is
 * told when we restart. Durable (fsync) before it returns when the client is new; a lookup
 * only when listed. 0, -ENOSPC when NSM_MAX_CLIENTS that hold something are listed (logged
 * once until there is room again), -EINVAL for an address that is not AF_INET/AF_INET6 or a
 * caller name longer than NSM_MAX_NAME, or -errno of the write.
 */
int nsm_monitor(struct nsm *n, const struct sockaddr *client, socklen_t len,
		const char *caller_name, const struct sockaddr *local, socklen_t locallen);
/*
 * The client at this address (IPv4-mapped as IPv4) holds nothing any more: its entries stop
 * counting against NSM_MAX_CLIENTS and leave the clients file at its next rewrite, unless
 * nsm_monitor takes it up again first. In memory only: never waits for the disk.
 */
void nsm_unmonitor(struct nsm *n, const struct sockaddr *client, socklen_t len);
/*
 * The client at this address reclaimed a lock: it has learned of this start, so it is told
 * no more (as if its statd had answered SM_NOTIFY), and leaves clients.previous.
 */
void nsm_reclaimed(struct nsm *n, const struct sockaddr *client, socklen_t len);
/* SM_NOTIFY to the last run's clients, asynchronously (schedule above). Call once. */
void nsm_notify_previous(struct nsm *n);
/*
 * fn runs (on a worker thread) for each SM_NOTIFY received: mon_name restarted, the call
 * came from `from` (its statd). Set before serving.
 */
void nsm_set_reboot_hook(struct nsm *n, void (*fn)(void *arg, const char *mon_name,
						   const struct sockaddr *from, socklen_t fromlen),
			 void *arg);
/* Program 100024 v1; its handlers' rq_ctx is the struct nsm. */
extern const struct rpc_program nsm_program;
/* A clean stop: the clients file keeps only the clients still holding something. */
void nsm_close(struct nsm *n);

#endif
