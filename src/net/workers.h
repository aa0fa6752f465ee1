/*
 * A fixed pool of threads running queued work items (private to src/net). Items go in
 * with workers_submit() from the loop thread; finished items collect on a completion
 * list and the notify callback (ev_async_send in practice) tells the loop to take them
 * with workers_done(). The pool never frees an item: ownership returns with the
 * completion list.
 */
#ifndef UNFS_NET_WORKERS_H
#define UNFS_NET_WORKERS_H

#include <stdbool.h>

struct work {
	struct work *wk_next;          /* queue link, owned by the pool while queued */
	void (*wk_run)(struct work *); /* runs on a worker thread */
	bool wk_ran;                   /* false when workers_stop() gave it back unrun */
};

struct workers;

/*
 * Starts n threads (all signals blocked in them, so the loop thread handles signals).
 * notify(arg) is called from a worker thread whenever the completion list goes from empty
 * to non-empty. Returns 0 or -errno.
 */
int workers_create(int n, void (*notify)(void *), void *arg, struct workers **out);

void workers_submit(struct workers *wp, struct work *w);

/* Takes every completed item, oldest first (NULL when none). */
struct work *workers_done(struct workers *wp);

/*
 * Lets running items finish, joins every thread, and moves items never started onto the
 * completion list with wk_ran false. Idempotent.
 */
void workers_stop(struct workers *wp);

/* Stops (if needed) and frees the pool; completed items not yet taken are lost to the caller. */
void workers_free(struct workers *wp);

#endif
