/*
 * Server statistics: what `unionnfsd-ctl stats` (and the control socket) reports.
 *
 * Every counter is a relaxed atomic in static storage, so the hooks (one per served RPC
 * call, per copy-up, per whiteout made) cost a few uncontended-in-the-common-case atomic
 * adds and never take a lock; a report reads them without stopping anybody, so its
 * figures are each exact but not a snapshot of one instant.
 *
 * Latencies go to log2 histograms of microseconds: bucket 0 holds calls under 1 us,
 * bucket b (b >= 1) those of [2^(b-1), 2^b) us. A percentile is reported as the upper
 * edge of the bucket it falls in, so it is never under the true value and at most twice it.
 *
 * Clients are remembered by address (no port) in a bounded insert-only table: the call
 * hook finds its entry without a lock and updates it with atomics.
 */
#ifndef UNFS_STATS_H
#define UNFS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#define STATS_BUCKETS 32          /* up to 2^31 us, about 36 minutes */
#define STATS_MAX_PROCS 32        /* per program; higher procedure numbers count as one */
#define STATS_MAX_CLIENTS 4096    /* addresses remembered; later ones are only counted */
/*
 * Calls are counted per program registered with the dispatcher (rpc_dispatch_init), shown
 * in its order under the program's rg_name and its procedures' rp_name, and per every
 * other program together ("other"): STATS_PROG_OTHER, or any unregistered number, names
 * those counters.
 */
#define STATS_PROG_OTHER UINT32_MAX

struct rpc_call;

/* A monotonic clock in nanoseconds, for the start of a call. */
uint64_t stats_clock(void);

/*
 * One served record: call is NULL when the record was not a call to a procedure we have
 * (rejected, wrong program or version); res is the handler's result when the reply was
 * accepted with SUCCESS, else NULL (its program's rg_status tells errors and STALE
 * replies from it). t0 comes from stats_clock().
 */
void stats_call(const struct rpc_call *call, uint64_t t0, size_t reqlen, size_t replylen,
		const struct sockaddr *peer, socklen_t peerlen, const void *res);
/*
 * Why a handle is stale, for the NFS3ERR_STALE replies counted by cause. The code that finds
 * the cause marks it in the call's context (call_ctx.h); the dispatcher's stats_call counts
 * it with the reply and the mark ends there, or with the call.
 */
enum stats_stale_cause {
	STATS_STALE_OBJECT_GONE = 0,  /* the map knows the object, no branch has it as recorded
				       * (removed or replaced behind the server's back) */
	STATS_STALE_NO_RECORD,        /* the inode map has no record of it (removed through the
				       * server, or the state directory was replaced) */
	STATS_STALE_UNKNOWN_EXPORT,   /* its export id is no export or view of this server
				       * (export removed, view reset, another server's handle) */
	STATS_STALE_VIEW_UNAVAILABLE, /* its per-client view cannot be opened (upper removed) */
	STATS_STALE_NCAUSES
};
/* Marks the cause of the STALE the current call may answer; returns err. */
int stats_stale(int err, enum stats_stale_cause cause);
/* A cause's name, as in `stats` and the Prometheus label ("no_record"). */
const char *stats_stale_cause_name(enum stats_stale_cause cause);

/* A copy-up finished with r (counted when 0); returns r. */
int stats_copyup(int r);
/* A call waits for another call's copy-up of the same object instead of copying it too. */
void stats_copyup_join(void);
/* A copy-up waits for a place: too many large copy-ups run already. */
void stats_copyup_queued(void);
/* A whiteout was made with result r (counted when 0); returns r. */
int stats_whiteout(int r);

/* The histogram's percentile p (0 < p <= 100) in microseconds; 0 when it is empty. */
uint64_t stats_percentile(const uint64_t hist[STATS_BUCKETS], unsigned p);
/* Bucket of a latency in nanoseconds. */
unsigned stats_bucket(uint64_t ns);

/* A copy of one procedure's figures. */
struct stats_proc {
	uint64_t sp_calls;
	uint64_t sp_errors;           /* results whose rg_status says RPC_STATUS_ERROR or _STALE */
	uint64_t sp_stale;            /* results whose rg_status says RPC_STATUS_STALE */
	uint64_t sp_ns;               /* summed latency */
	uint64_t sp_hist[STATS_BUCKETS];
};
/* Program prog's (its number) procedure proc. */
void stats_proc_get(uint32_t prog, unsigned proc, struct stats_proc *out);

struct stats_totals {
	uint64_t st_calls;
	uint64_t st_rejected;         /* records answered without reaching a procedure */
	uint64_t st_req_bytes;
	uint64_t st_reply_bytes;
	uint64_t st_copyups;
	uint64_t st_copyup_joins;
	uint64_t st_copyup_queued;
	uint64_t st_whiteouts;
	uint64_t st_stale;
	uint64_t st_stale_by[STATS_STALE_NCAUSES];
	uint64_t st_clients_dropped;  /* calls from addresses beyond STATS_MAX_CLIENTS */
};
void stats_totals_get(struct stats_totals *out);

/* A procedure's name ("GETATTR"), or NULL when the program has none at that number. */
const char *stats_proc_name(uint32_t prog, unsigned proc);

/* One remembered client, for `clients`. */
struct stats_client {
	char sc_addr[64];             /* numeric, IPv4-mapped addresses shown as IPv4 */
	time_t sc_first;              /* wall clock of its first and last call */
	time_t sc_last;
	uint64_t sc_calls;
	uint64_t sc_bytes;            /* request plus reply */
};
/* Calls fn for every remembered client; stops early when fn returns false. */
void stats_clients_each(bool (*fn)(const struct stats_client *c, void *arg), void *arg);

/*
 * Appends the text report (`stats`) through stats_appendf (buf, len, cap as there).
 * Returns 0 or -ENOMEM.
 */
int stats_report(char **buf, size_t *len, size_t *cap);

/*
 * Appends the same figures in the Prometheus text format (version 0.0.4): counters per
 * program and procedure, latency histograms in seconds, totals. Returns 0 or -ENOMEM.
 */
int stats_prometheus(char **buf, size_t *len, size_t *cap);

/* printf onto a growing malloc()ed string (*buf may start NULL). Returns 0 or -ENOMEM. */
int stats_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Forgets everything (tests). Not safe while calls are being counted. */
void stats_reset(void);

#endif
