/*
 * What a call running on a worker thread tells the pool that owns the thread:
 *
 * - where it waits for the disk (fsync, a group commit, a long copy), so the pool can run
 *   another thread meanwhile (blocking_enter/blocking_leave);
 * - that it must wait for another call's work (a copy-up of the same file): instead of
 *   holding its thread, it is parked on a queue and unwinds, and once the queue is woken
 *   the pool runs the whole call again from the start (blocking_park/blocking_wake);
 * - that it is about to do long work (copying a large file up): the pool lets only a few
 *   calls do that at once and parks the others until one is done (blocking_long_begin).
 *
 * A parked call's result is thrown away (blocking_parked() says so): only code with no
 * side effects before its park may park. Outside a worker pool nothing parks and the marks
 * cost a load and a branch.
 */
#ifndef UNFS_BLOCKING_H
#define UNFS_BLOCKING_H

#include <stdbool.h>
#include <stdint.h>

/* Embedded in the pool's work item: its link while it is parked on a queue. */
struct blocking_parked {
	struct blocking_parked *bp_next;
};

/* Calls parked until something is done; guarded by its owner's lock. Zero it to start. */
struct blocking_queue {
	struct blocking_parked *bq_head, *bq_tail;
};

struct blocking_hooks {
	void (*bh_enter)(void);
	void (*bh_leave)(void);
	bool (*bh_park)(struct blocking_queue *q);
	void (*bh_wake)(struct blocking_parked *p);
	bool (*bh_parked)(void);
	uint64_t (*bh_parked_ns)(void);
	bool (*bh_long_begin)(void);
	void (*bh_long_end)(void);
};

/* Set once, before serving, by whoever owns the threads. */
void blocking_set_hooks(const struct blocking_hooks *h);

void blocking_enter(void);
void blocking_leave(void);

/*
 * Parks the calling thread's call on q (the caller holds q's lock): true when it is parked
 * (return at once, changing nothing; the call runs again once q is woken), false when it
 * cannot be (not on a worker thread): then wait in place.
 */
bool blocking_park(struct blocking_queue *q);

/* Empties q (its lock held, or q taken out from under it) and runs every call on it again. */
void blocking_wake(struct blocking_queue *q);

/* Whether the calling thread's call parked: it is to be run again, its result dropped. */
bool blocking_parked(void);

/*
 * How long the calling thread's call has spent parked before this run, in nanoseconds:
 * 0 only in its first run.
 */
uint64_t blocking_parked_ns(void);

/* Whether this is a run again after a park (a call's state from its first run is its own). */
bool blocking_resumed(void);

/*
 * Before long work: true when the call may go ahead (then blocking_long_end() when done;
 * the pool also ends it when the call does), false when it was parked until another call's
 * long work is done (return at once, changing nothing). Always true outside a pool.
 */
bool blocking_long_begin(void);
void blocking_long_end(void);

#endif
