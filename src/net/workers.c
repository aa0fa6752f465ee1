/*
 * The worker pool: one mutex guards both lists; a condition variable wakes idle threads.
 * Threads inherit a fully blocked signal mask so SIGTERM and friends reach the loop thread.
 *
 * Waking every idle thread for every item makes them fight over the CPUs: on two cores,
 * eight threads serving GETATTRs do half the work one thread does. So only as many
 * workers run as there are CPUs, and a worker keeps taking items while there are any.
 * A worker whose item has taken longer than WORKERS_STALL_NS is probably waiting for the
 * disk: it stops counting, and the monitor thread wakes another worker for the queue, so
 * a long copy-up or fsync never holds up the calls behind it.
 *
 * A waiting thread is still a thread, though: 32 calls waiting for one copy-up held all 32
 * and the next GETATTR waited for the copy. So an item that must wait for another's work
 * parks (blocking.h): its run returns, it sits on the other work's queue holding nothing
 * but its memory (still counted against its connection's limits), and once woken it goes
 * back to the tail of the queue and runs again from the start. Long work (a large
 * copy-up) is also bounded: only wp_long_max items hold a long-work place at once, the
 * rest park in arrival order and each place freed goes straight to the next of them.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "blocking.h"
#include "clock.h"
#include "workers.h"

#define WORKERS_STALL_NS 500000          /* an item running this long is blocked */
#define WORKERS_WATCH_NS 500000          /* how often the monitor looks while items wait */

struct worker {
	struct workers *w_pool;
	pthread_t w_thread;
	struct work *w_item;             /* the item running, for its own thread only */
	_Atomic int64_t w_since;         /* when the current item started; 0: none */
	bool w_blocked;                  /* waiting for the disk (blocking.h), lock held to change */
};

static __thread struct worker *workers_self;

struct workers {
	pthread_mutex_t wp_lock;
	pthread_cond_t wp_cond;
	pthread_cond_t wp_watch;         /* the monitor sleeps on it while nothing waits */
	struct work *wp_head, *wp_tail;        /* queued */
	struct work *wp_done, *wp_done_tail;   /* completed, oldest first */
	_Atomic bool wp_have_done;             /* wp_done != NULL, for workers_have_done */
	bool wp_notified;                      /* notify called since the last workers_done */
	bool wp_stop;
	bool wp_joined;
	int wp_nthreads;
	int wp_idle;                     /* threads waiting on wp_cond */
	int wp_waking;                   /* signalled but not yet running */
	int wp_cpus;
	int wp_long_max;                 /* long-work places */
	int wp_long_used;
	struct blocking_queue wp_long_q; /* items parked for a place */
	struct worker *wp_workers;
	bool wp_monitor_on;
	bool wp_monitor_idle;            /* waiting for the queue to fill, untimed */
	pthread_t wp_monitor;
	void (*wp_notify)(void *);
	void *wp_arg;
};

/* Lock held. Whether the loop should be told: the item is not quiet and no notice is due. */
static bool workers_append_done(struct workers *wp, struct work *w)
{
	bool notify = !w->wk_quiet && !wp->wp_notified;

	w->wk_next = NULL;
	if (wp->wp_done_tail)
		wp->wp_done_tail->wk_next = w;
	else
		wp->wp_done = w;
	wp->wp_done_tail = w;
	atomic_store_explicit(&wp->wp_have_done, true, memory_order_release);
	wp->wp_notified |= notify;
	return notify;
}

static struct work *workers_of_link(struct blocking_parked *p)
{
	return (struct work *)(void *)((char *)p - offsetof(struct work, wk_link));
}

/* Workers on the CPU now: running an item that has not stalled, or about to. Lock held. */
static int workers_running(struct workers *wp, int64_t now)
{
	int n = wp->wp_waking;

	for (int i = 0; i < wp->wp_nthreads; i++) {
		int64_t since = atomic_load_explicit(&wp->wp_workers[i].w_since,
						     memory_order_relaxed);

		if (since != 0 && now - since < WORKERS_STALL_NS && !wp->wp_workers[i].w_blocked)
			n++;
	}
	return n;
}

/* Whether an idle worker should be woken for the queue; counts it as waking. Lock held. */
static bool workers_kick_due(struct workers *wp)
{
	if (wp->wp_head == NULL || wp->wp_idle == wp->wp_waking)
		return false;
	if (workers_running(wp, net_now_ns()) >= wp->wp_cpus)
		return false;
	wp->wp_waking++;
	return true;
}

/* Wakes an idle worker if the queue needs one; whether one was woken. Lock held. */
static bool workers_kick(struct workers *wp)
{
	if (!workers_kick_due(wp))
		return false;
	pthread_cond_signal(&wp->wp_cond);
	return true;
}

enum workers_wakeup { WORKERS_WAKE_NONE, WORKERS_WAKE_WORKER, WORKERS_WAKE_MONITOR };

/* Appends w to the queue; returns who should be woken to take it. Lock held. */
static enum workers_wakeup workers_append(struct workers *wp, struct work *w)
{
	w->wk_next = NULL;
	if (wp->wp_tail)
		wp->wp_tail->wk_next = w;
	else
		wp->wp_head = w;
	wp->wp_tail = w;
	/*
	 * The monitor watches items that wait behind running workers. One a worker was just
	 * woken for is taken at once: waking the monitor too would cost every call a second
	 * thread's wake-up.
	 */
	if (workers_kick_due(wp))
		return WORKERS_WAKE_WORKER;
	return wp->wp_monitor_idle ? WORKERS_WAKE_MONITOR : WORKERS_WAKE_NONE;
}

static void workers_send_wakeup(struct workers *wp, enum workers_wakeup who)
{
	if (who == WORKERS_WAKE_WORKER)
		pthread_cond_signal(&wp->wp_cond);
	else if (who == WORKERS_WAKE_MONITOR)
		pthread_cond_signal(&wp->wp_watch);
}

/* Appends w to the queue and wakes whoever should take it. Lock held. */
static void workers_enqueue(struct workers *wp, struct work *w)
{
	workers_send_wakeup(wp, workers_append(wp, w));
}

/* A woken item runs again: now, or when its parked run has unwound. Lock held. */
static void workers_unpark(struct workers *wp, struct work *w)
{
	if (w->wk_running) {
		w->wk_woken = true;
		return;
	}
	w->wk_parked = false;
	/* At least 1: a run after a park knows it is one (blocking_resumed). */
	w->wk_parked_ns += (uint64_t)(net_now_ns() - (int64_t)w->wk_parked_at) + 1;
	workers_enqueue(wp, w);
}

/* w gives its long-work place up: to the first item waiting for one, if any. Lock held. */
static void workers_long_release(struct workers *wp, struct work *w)
{
	struct blocking_parked *next = wp->wp_long_q.bq_head;

	w->wk_long = false;
	if (next == NULL) {
		wp->wp_long_used--;
		return;
	}
	wp->wp_long_q.bq_head = next->bp_next;
	if (wp->wp_long_q.bq_head == NULL)
		wp->wp_long_q.bq_tail = NULL;
	next->bp_next = NULL;
	workers_of_link(next)->wk_long = true;
	workers_unpark(wp, workers_of_link(next));
}

/* After an item's run: done, parked until woken, or woken already and queued again. Lock held. */
static void workers_ran(struct workers *wp, struct work *w, bool *notify)
{
	w->wk_running = false;
	*notify = false;
	if (w->wk_parked && w->wk_woken) {
		w->wk_woken = false;
		workers_unpark(wp, w);
		return;
	}
	/* A place is held across a park only when it was handed over while unwinding. */
	if (w->wk_long)
		workers_long_release(wp, w);
	if (w->wk_parked)
		return;
	w->wk_ran = true;
	*notify = workers_append_done(wp, w);
}

static void *workers_main(void *arg)
{
	struct worker *me = arg;
	struct workers *wp = me->w_pool;
	struct work *w;
	bool notify;

	workers_self = me;
	pthread_mutex_lock(&wp->wp_lock);
	for (;;) {
		while (!wp->wp_stop && wp->wp_head == NULL) {
			wp->wp_idle++;
			pthread_cond_wait(&wp->wp_cond, &wp->wp_lock);
			wp->wp_idle--;
			if (wp->wp_waking > 0)
				wp->wp_waking--;
		}
		if (wp->wp_stop)
			break;
		w = wp->wp_head;
		wp->wp_head = w->wk_next;
		if (wp->wp_head == NULL)
			wp->wp_tail = NULL;
		w->wk_running = true;
		me->w_item = w;
		atomic_store_explicit(&me->w_since, net_now_ns(), memory_order_relaxed);
		pthread_mutex_unlock(&wp->wp_lock);

		w->wk_run(w);

		pthread_mutex_lock(&wp->wp_lock);
		me->w_item = NULL;
		atomic_store_explicit(&me->w_since, 0, memory_order_relaxed);
		workers_ran(wp, w, &notify);
		if (notify) {
			/* Outside the lock: the notifier may take its own locks. */
			pthread_mutex_unlock(&wp->wp_lock);
			wp->wp_notify(wp->wp_arg);
			pthread_mutex_lock(&wp->wp_lock);
		}
	}
	pthread_mutex_unlock(&wp->wp_lock);
	return NULL;
}

/* A worker about to wait for the disk stops counting as running: another may take the queue. */
static void workers_block_enter(void)
{
	struct worker *me = workers_self;
	struct workers *wp;

	if (!me)
		return;
	wp = me->w_pool;
	pthread_mutex_lock(&wp->wp_lock);
	me->w_blocked = true;
	workers_kick(wp);
	pthread_mutex_unlock(&wp->wp_lock);
}

static void workers_block_leave(void)
{
	struct worker *me = workers_self;

	if (!me)
		return;
	pthread_mutex_lock(&me->w_pool->wp_lock);
	me->w_blocked = false;
	pthread_mutex_unlock(&me->w_pool->wp_lock);
}

/* The calling thread's item, or NULL off the pool. */
static struct work *workers_current(void)
{
	return workers_self ? workers_self->w_item : NULL;
}

/* Parks the running item w on q: the pool holds it once its run returns. Lock held. */
static void workers_park_on(struct work *w, struct blocking_queue *q)
{
	w->wk_parked = true;
	w->wk_woken = false;
	w->wk_parked_at = (uint64_t)net_now_ns();
	w->wk_link.bp_next = NULL;
	if (q->bq_tail)
		q->bq_tail->bp_next = &w->wk_link;
	else
		q->bq_head = &w->wk_link;
	q->bq_tail = &w->wk_link;
}

static bool workers_park(struct blocking_queue *q)
{
	struct work *w = workers_current();

	if (w == NULL)
		return false;
	pthread_mutex_lock(&w->wk_pool->wp_lock);
	/* One queue at a time: parked already, it runs again when that one is woken. */
	if (!w->wk_parked)
		workers_park_on(w, q);
	pthread_mutex_unlock(&w->wk_pool->wp_lock);
	return true;
}

static void workers_wake(struct blocking_parked *p)
{
	struct work *w = workers_of_link(p);
	struct workers *wp = w->wk_pool;

	pthread_mutex_lock(&wp->wp_lock);
	workers_unpark(wp, w);
	pthread_mutex_unlock(&wp->wp_lock);
}

/* Read by the item's own thread, the only one that sets it while the item runs. */
static bool workers_parked(void)
{
	struct work *w = workers_current();

	return w != NULL && w->wk_parked;
}

static uint64_t workers_parked_ns(void)
{
	struct work *w = workers_current();

	return w != NULL ? w->wk_parked_ns : 0;
}

static bool workers_long_begin(void)
{
	struct work *w = workers_current();
	struct workers *wp;
	bool go = true;

	if (w == NULL)
		return true;
	wp = w->wk_pool;
	pthread_mutex_lock(&wp->wp_lock);
	if (w->wk_long) {
		/* handed over while it waited */
	} else if (wp->wp_long_used < wp->wp_long_max) {
		wp->wp_long_used++;
		w->wk_long = true;
	} else {
		if (!w->wk_parked)
			workers_park_on(w, &wp->wp_long_q);
		go = false;
	}
	pthread_mutex_unlock(&wp->wp_lock);
	return go;
}

static void workers_long_end(void)
{
	struct work *w = workers_current();

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->wk_pool->wp_lock);
	if (w->wk_long)
		workers_long_release(w->wk_pool, w);
	pthread_mutex_unlock(&w->wk_pool->wp_lock);
}

static const struct blocking_hooks workers_hooks = {
	.bh_enter = workers_block_enter,
	.bh_leave = workers_block_leave,
	.bh_park = workers_park,
	.bh_wake = workers_wake,
	.bh_parked = workers_parked,
	.bh_parked_ns = workers_parked_ns,
	.bh_long_begin = workers_long_begin,
	.bh_long_end = workers_long_end,
};

/* While items wait, looks every WORKERS_WATCH_NS for workers that stalled. */
static void *workers_monitor(void *arg)
{
	struct workers *wp = arg;
	struct timespec until;

	pthread_mutex_lock(&wp->wp_lock);
	while (!wp->wp_stop) {
		if (wp->wp_head == NULL) {
			wp->wp_monitor_idle = true;
			pthread_cond_wait(&wp->wp_watch, &wp->wp_lock);
			wp->wp_monitor_idle = false;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += WORKERS_WATCH_NS;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&wp->wp_watch, &wp->wp_lock, &until);
		workers_kick(wp);
	}
	pthread_mutex_unlock(&wp->wp_lock);
	return NULL;
}

int workers_create(int n, void (*notify)(void *), void *arg, struct workers **out)
{
	pthread_condattr_t ca;
	struct workers *wp;
	sigset_t all, old;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int rc = 0;

	*out = NULL;
	if (n < 1)
		return -EINVAL;
	wp = calloc(1, sizeof(*wp));
	if (wp == NULL)
		return -ENOMEM;
	wp->wp_workers = calloc((size_t)n, sizeof(*wp->wp_workers));
	if (wp->wp_workers == NULL) {
		free(wp);
		return -ENOMEM;
	}
	pthread_mutex_init(&wp->wp_lock, NULL);
	pthread_cond_init(&wp->wp_cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wp->wp_watch, &ca);
	pthread_condattr_destroy(&ca);
	wp->wp_notify = notify;
	wp->wp_arg = arg;
	blocking_set_hooks(&workers_hooks);
	/* The loop thread needs a CPU of its own. */
	wp->wp_cpus = cpus > 1 ? (int)cpus - 1 : 1;
	/* Long work may take half of the rest and half of the threads, at least one. */
	wp->wp_long_max = wp->wp_cpus / 2 < n / 2 ? wp->wp_cpus / 2 : n / 2;
	if (wp->wp_long_max < 1)
		wp->wp_long_max = 1;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n; i++) {
		wp->wp_workers[i].w_pool = wp;
		rc = pthread_create(&wp->wp_workers[i].w_thread, NULL, workers_main,
				    &wp->wp_workers[i]);
		if (rc != 0) {
			rc = -rc;
			break;
		}
		wp->wp_nthreads++;
	}
	if (rc == 0) {
		rc = -pthread_create(&wp->wp_monitor, NULL, workers_monitor, wp);
		wp->wp_monitor_on = rc == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		workers_free(wp);
		return rc;
	}
	*out = wp;
	return 0;
}

void workers_submit(struct workers *wp, struct work *w)
{
	enum workers_wakeup who;

	w->wk_ran = false;
	w->wk_quiet = false;
	w->wk_pool = wp;
	w->wk_running = w->wk_parked = w->wk_woken = w->wk_long = false;
	w->wk_parked_ns = 0;
	pthread_mutex_lock(&wp->wp_lock);
	who = workers_append(wp, w);
	pthread_mutex_unlock(&wp->wp_lock);
	/*
	 * After the unlock: a worker woken while the lock is still held runs only to block on
	 * it, and the loop pays two more switches for every call.
	 */
	workers_send_wakeup(wp, who);
}

struct work *workers_done(struct workers *wp)
{
	struct work *w;

	pthread_mutex_lock(&wp->wp_lock);
	w = wp->wp_done;
	wp->wp_done = wp->wp_done_tail = NULL;
	wp->wp_notified = false;
	atomic_store_explicit(&wp->wp_have_done, false, memory_order_relaxed);
	pthread_mutex_unlock(&wp->wp_lock);
	return w;
}

bool workers_have_done(struct workers *wp)
{
	return atomic_load_explicit(&wp->wp_have_done, memory_order_acquire);
}

void workers_stop(struct workers *wp)
{
	struct work *w, *next;

	if (wp->wp_joined)
		return;
	pthread_mutex_lock(&wp->wp_lock);
	wp->wp_stop = true;
	pthread_cond_broadcast(&wp->wp_cond);
	pthread_cond_broadcast(&wp->wp_watch);
	pthread_mutex_unlock(&wp->wp_lock);
	for (int i = 0; i < wp->wp_nthreads; i++)
		pthread_join(wp->wp_workers[i].w_thread, NULL);
	if (wp->wp_monitor_on)
		pthread_join(wp->wp_monitor, NULL);
	wp->wp_joined = true;

	pthread_mutex_lock(&wp->wp_lock);
	for (w = wp->wp_head; w != NULL; w = next) {
		next = w->wk_next;
		w->wk_ran = false;
		(void)workers_append_done(wp, w);
	}
	/*
	 * Nothing is left parked: each item waited for a run that has ended since, and woke it
	 * (a long-work place goes to the next item as it is given up), so it is queued above.
	 */
	wp->wp_head = wp->wp_tail = NULL;
	pthread_mutex_unlock(&wp->wp_lock);
}

void workers_free(struct workers *wp)
{
	if (wp == NULL)
		return;
	workers_stop(wp);
	pthread_cond_destroy(&wp->wp_cond);
	pthread_cond_destroy(&wp->wp_watch);
	pthread_mutex_destroy(&wp->wp_lock);
	free(wp->wp_workers);
	free(wp);
}
