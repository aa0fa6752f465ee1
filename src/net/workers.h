/*
 * A fixed pool of threads running queued work items (private to src/net). Items go in
 * with workers_submit() from the loop thread; finished items collect on a completion
 * list and the notify callback (ev_async_send in practice) tells the loop to take them
 * with workers_done(). The pool never frees an item: ownership returns with the
 * completion list.
 *
 * An item may park itself (blocking_park, blocking_long_begin in blocking.h): its run then
 * returns with nothing done, the item waits on a queue without a thread, and once woken it
 * is queued again and wk_run runs it anew from the start.
 */
#ifndef UNFS_NET_WORKERS_H
#define UNFS_NET_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

#include "blocking.h"

struct workers;

struct work {
	struct work *wk_next;          /* queue link, owned by the pool while queued */
	void (*wk_run)(struct work *); /* runs on a worker thread */
	bool wk_ran;                   /* false when workers_stop() gave it back unfinished */
	/*
	 * Set by wk_run: its completion need not wake the loop (its reply went out already);
	 * it is taken with the next workers_done() all the same.
	 */
	bool wk_quiet;
	/* The pool's own, under its lock: */
	struct workers *wk_pool;
	struct blocking_parked wk_link; /* on a blocking_queue while parked */
	bool wk_running;
	bool wk_parked;                /* its current or last run parked it */
	bool wk_woken;                 /* woken while its parked run was still unwinding */
	bool wk_long;                  /* holds one of the pool's long-work places */
	uint64_t wk_parked_at;         /* CLOCK_MONOTONIC ns of its park */
	uint64_t wk_parked_ns;         /* time spent parked so far */
};

/*
 * Starts n threads (all signals blocked in them, so the loop thread handles signals).
 * notify(arg) is called from a worker thread when an item that is not quiet completes and
 * no notice is pending since the last workers_done(). Returns 0 or -errno.
 */
int workers_create(int n, void (*notify)(void *), void *arg, struct workers **out);

void workers_submit(struct workers *wp, struct work *w);

/* Takes every completed item, oldest first (NULL when none). */
struct work *workers_done(struct workers *wp);
/* Whether completed items wait to be taken (a hint: read without the lock). */
bool workers_have_done(struct workers *wp);

/*
 * Lets running items finish, joins every thread, and moves items never started (or queued
 * again after a park) onto the completion list with wk_ran false. Idempotent.
 */
void workers_stop(struct workers *wp);

/* Stops (if needed) and frees the pool; completed items not yet taken are lost to the caller. */
void workers_free(struct workers *wp);

#endif
