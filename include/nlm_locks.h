/*
 * The lock table: POSIX byte-range locks on union objects, for the NLM server (NSM's reboot
 * notices reach it through NLM).
 *
 * A lock belongs to a union object, named by (export or view id, union fileid) and never by a
 * backing file, so a lock taken before a copy-up still holds after it and locks of different
 * per-client views never meet. Its owner is (client host, svid, owner handle): for NLM the
 * peer's address as text (not the caller_name, which two clients may share), svid and oh.
 * This module knows nothing of NLM: it has its own status codes, and the NLM layer maps them
 * (LOCKS_NOLOCKS to NLM4_DENIED_NOLOCKS, LOCKS_BLOCKED to NLM4_BLOCKED, ...).
 *
 * Semantics are those of POSIX fcntl locks between owners:
 * - a range is (offset, len); len 0, or an offset + len past 2^64, means "to the end of file";
 * - shared locks of different owners coexist, an exclusive one conflicts with every lock of
 *   another owner it overlaps; an owner never conflicts with itself;
 * - a new lock replaces its owner's own locks on the range (upgrade and downgrade in place, the
 *   rest of a wider lock of the other type stays), and an owner's ranges of one type that
 *   overlap or touch are merged into one;
 * - unlocking part of a range splits it.
 *
 * Blocking: a conflicting request made with lq_block is queued as a waiter with the caller's
 * cookie. Whenever locks of an object go or change (unlock, a downgrade, release by owner, host
 * or all), the table retries that object's waiters in the order they came and hands back the
 * ones it granted as a list of events; the caller then sends NLM GRANTED and frees the list.
 * The table never calls out while it holds its mutex, and granting needs no allocation the
 * waiter did not make when it was queued, except lock records and the grant's undo record
 * (a failure there, or the waiter's host at its limit, gives a LOCKS_EV_DENIED event and the
 * waiter is gone).
 *
 * Undoing a grant: the client may never learn of it, or refuse it (its process stopped
 * waiting). Each grant (le_grant) keeps the owner's locks it replaced in the waiter's range
 * until the caller settles it: locks_grant_keep forgets them, locks_ungrant puts them back
 * exactly (so an upgrade from shared to exclusive given back leaves the shared lock held)
 * and grants the waiters the removed part lets in. An undo needs no allocation and never
 * fails for a limit. If the owner locked or unlocked on that range since the grant (or was
 * granted another waiter there), the undo changes nothing (LOCKS_CHANGED): the owner's later
 * request is what its client now believes it holds, and an undo could drop or resurrect a
 * lock behind its back; keeping a lock too long only makes others wait. The records a grant
 * keeps count against its host's limit of lock records until it is settled or changed (not
 * as held locks in the counts); a grant goes with its owner's release.
 * Fairness: waiters are tried first come first served, but a waiter is granted as soon as no
 * held lock conflicts, even if an earlier waiter is still blocked, and a new request is
 * granted if no held lock conflicts, whatever waits (as the Linux and BSD lock managers do).
 * So a stream of shared locks can delay an exclusive waiter. Refusing to overtake a blocked
 * waiter was not chosen: an owner upgrading a range while another owner waits for it would
 * then wait for that waiter, which waits for the owner, a deadlock. There is no deadlock
 * detection (NLM has none; the client's F_SETLKW may wait for ever, as against knfsd).
 *
 * Limits, given at creation, bound every allocation: lock records per host (a split by unlock
 * counts too, and so do those kept to undo a grant), hosts with locks or waiters, waiters per
 * object. Past any of them a call fails
 * with LOCKS_NOLOCKS (NLM4_DENIED_NOLOCKS) and changes nothing.
 *
 * Thread safety: one mutex per table; every function may be called from any thread and holds
 * it only for its own work. Callbacks of locks_each run under the mutex: they must not call into
 * the table, and should only copy out (they are for `unionnfsd-ctl locks`).
 *
 * Grace period: not the table's business; the NLM layer refuses non-reclaims during it.
 * Lock state is in memory only.
 */
#ifndef UNFS_NLM_LOCKS_H
#define UNFS_NLM_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOCKS_HOST_MAX 1024   /* bytes of a host key at most (NLM's, an address, are fewer) */
#define LOCKS_OH_MAX 1024     /* bytes of an owner handle: NLM's MAXNETOBJ_SZ */

#define LOCKS_DEFAULT_LOCKS_PER_HOST 4096
#define LOCKS_DEFAULT_WAITERS_PER_OBJECT 64
#define LOCKS_DEFAULT_HOSTS 1024

enum locks_status {
	LOCKS_OK = 0,
	LOCKS_DENIED,          /* another owner holds a conflicting lock (see the holder) */
	LOCKS_BLOCKED,         /* queued as a waiter; a LOCKS_EV_GRANTED event comes later */
	LOCKS_ALREADY_BLOCKED, /* the same request already waits; the new cookie was not taken */
	LOCKS_NOLOCKS,         /* a limit is reached; nothing changed */
	LOCKS_NOMEM,           /* out of memory; nothing changed */
	LOCKS_NOENT,           /* CANCEL: no such waiter */
	LOCKS_INVAL,           /* bad argument: empty or too long host, too long owner handle */
	LOCKS_CHANGED,         /* ungrant: the owner changed its locks there since; left alone */
};

enum locks_type {
	LOCKS_SHARED,
	LOCKS_EXCLUSIVE,
};

/* A union object: an export (or per-client view) id and the union fileid inside it. */
struct locks_object {
	uint32_t lo_export;
	uint64_t lo_fileid;
};

/*
 * An owner. lw_host is the client's host key (NUL-terminated, 1..LOCKS_HOST_MAX bytes,
 * compared as bytes; the caller chooses it: NLM's is the peer's address as text). The table
 * copies what it keeps: the pointers need only live for the call.
 */
struct locks_owner {
	const char *lw_host;
	int32_t lw_svid;
	const void *lw_oh;
	size_t lw_ohlen;       /* at most LOCKS_OH_MAX */
};

/* One lock or request: who, on what, which bytes, how. */
struct locks_request {
	struct locks_object lq_object;
	struct locks_owner lq_owner;
	enum locks_type lq_type;
	uint64_t lq_offset;
	uint64_t lq_len;       /* 0: to the end of file */
	bool lq_block;         /* locks_lock: queue the request if it conflicts */
};

/*
 * A held lock, as TEST reports the first conflicting one and locks_each reports each lock.
 * lh_len is 0 for a lock to the end of file. The host and handle are copies.
 */
struct locks_holder {
	char lh_host[LOCKS_HOST_MAX + 1];
	int32_t lh_svid;
	uint8_t lh_oh[LOCKS_OH_MAX];
	size_t lh_ohlen;
	enum locks_type lh_type;
	uint64_t lh_offset;
	uint64_t lh_len;
};

enum locks_event_kind {
	LOCKS_EV_GRANTED,      /* a waiter now holds its lock: send NLM GRANTED */
	LOCKS_EV_DENIED,       /* a waiter could not be given its lock (le_why); it is gone */
	LOCKS_EV_DROPPED,      /* a waiter went with its owner or host (release); it is gone */
};

/*
 * What happened to a waiter, handed back to the caller in a list (le_next) it owns and frees
 * with locks_events_free. le_owner points into the event itself; le_offset and le_len are the
 * request as it was queued (what NLM GRANTED repeats).
 */
struct locks_event {
	struct locks_event *le_next;
	enum locks_event_kind le_kind;
	enum locks_status le_why;  /* LOCKS_EV_DENIED: LOCKS_NOLOCKS or LOCKS_NOMEM */
	void *le_cookie;
	struct locks_object le_object;
	struct locks_owner le_owner;
	enum locks_type le_type;
	uint64_t le_offset;
	uint64_t le_len;
	uint64_t le_grant;         /* LOCKS_EV_GRANTED: for locks_ungrant or locks_grant_keep */
};

struct locks_limits {
	uint32_t ll_locks_per_host;      /* lock records (ranges) one host may hold */
	uint32_t ll_hosts;               /* hosts holding locks or waiting at once */
	uint32_t ll_waiters_per_object;  /* waiters queued on one object */
};

/* Figures for `unionnfsd-ctl stats`: held lock records, waiters, hosts, objects locked. */
struct locks_counts {
	uint64_t lc_locks;
	uint64_t lc_waiters;
	uint64_t lc_hosts;
	uint64_t lc_objects;
};

struct locks_table;

/*
 * Every call that can hand back events appends them to *events (a list the caller starts
 * empty, NULL). Passing events NULL frees them unseen: only for a caller that never queues
 * waiters, since their cookies and grants would be lost.
 */

/* A table with the given limits (NULL: the defaults). LOCKS_NOMEM or LOCKS_INVAL (a zero limit). */
enum locks_status locks_table_create(const struct locks_limits *limits, struct locks_table **out);
/*
 * Frees the table and everything in it. Waiters' cookies are not handed back: call
 * locks_release_all first to get them.
 */
void locks_table_free(struct locks_table *t);

/*
 * Takes a lock (NLM LOCK). LOCKS_OK: held (also when the owner already held it). On a conflict,
 * LOCKS_DENIED, or with lq_block LOCKS_BLOCKED (cookie queued) or LOCKS_ALREADY_BLOCKED; the
 * first conflicting lock (lowest offset) goes to *conflict if not NULL. A downgrade can let
 * waiters in: their events are added to *events (which may be set whatever the status).
 */
enum locks_status locks_lock(struct locks_table *t, const struct locks_request *rq, void *cookie,
			     struct locks_holder *conflict, struct locks_event **events);

/*
 * NLM TEST: LOCKS_OK if rq could be granted now, else LOCKS_DENIED with the first conflicting
 * lock (lowest offset) in *conflict (if not NULL). Changes nothing.
 */
enum locks_status locks_test(struct locks_table *t, const struct locks_request *rq,
			     struct locks_holder *conflict);

/*
 * NLM UNLOCK: the owner's locks on the range (lq_type ignored) are gone; LOCKS_OK also when
 * there were none. LOCKS_NOLOCKS if it would split a lock with the host at its limit. Waiters
 * granted as a result are added to *events.
 */
enum locks_status locks_unlock(struct locks_table *t, const struct locks_request *rq,
			       struct locks_event **events);

/*
 * NLM CANCEL: removes the waiter queued with exactly this request (object, owner, type, range);
 * its cookie goes to *cookie. LOCKS_NOENT if none waits (it may have been granted already).
 */
enum locks_status locks_cancel(struct locks_table *t, const struct locks_request *rq,
			       void **cookie);

/*
 * Releases every lock of an owner, of a host (NSM SM_NOTIFY, NLM FREE_ALL), or of everybody,
 * and their waiters (LOCKS_EV_DROPPED events, for the caller to free their cookies). Other
 * waiters granted as a result are added to *events as well.
 */
void locks_release_owner(struct locks_table *t, const struct locks_owner *owner,
			 struct locks_event **events);
void locks_release_host(struct locks_table *t, const char *host, struct locks_event **events);
void locks_release_all(struct locks_table *t, struct locks_event **events);

/*
 * Settles a grant (an event's le_grant). locks_ungrant gives it back: the owner's locks in the
 * waiter's range become what they were just before the grant, and waiters that lets in are
 * added to *events. LOCKS_OK; LOCKS_CHANGED when the owner changed its locks on that range
 * since (nothing is undone); LOCKS_NOENT when the grant is unknown (settled, or its owner
 * released). locks_grant_keep: the client took the lock, the undo record goes. Every grant
 * must be settled one way or the other (or released with its owner), or its record stays.
 */
enum locks_status locks_ungrant(struct locks_table *t, uint64_t grant, struct locks_event **events);
void locks_grant_keep(struct locks_table *t, uint64_t grant);
/* Grants not settled yet. */
size_t locks_grants(struct locks_table *t);

/* Frees an event list (not the cookies: they are the caller's). */
void locks_events_free(struct locks_event *events);

/* Lock records a host holds now; waiters queued on an object now. */
size_t locks_host_locks(struct locks_table *t, const char *host);
/* Whether a host has anything in the table: locks, waiters, unsettled grants, a call under way. */
bool locks_host_active(struct locks_table *t, const char *host);
size_t locks_object_waiters(struct locks_table *t, const struct locks_object *object);
void locks_counts(struct locks_table *t, struct locks_counts *out);

/*
 * Calls fn for every held lock, grouped by host (hosts in the order they came), until fn
 * returns non-zero (which locks_each returns; 0 otherwise). Under the table's mutex: fn must
 * not call into the table. object and holder live for the call only.
 */
typedef int (*locks_each_fn)(const struct locks_object *object, const struct locks_holder *holder,
			     void *arg);
int locks_each(struct locks_table *t, locks_each_fn fn, void *arg);
/*
 * The same for every queued waiter (grouped by host, each host's in the order they came):
 * the holder is the owner and the range and type it waits for.
 */
int locks_each_waiter(struct locks_table *t, locks_each_fn fn, void *arg);

/* A short English text for a status. */
const char *locks_strerror(enum locks_status status);

#endif
