/*
 * The worker pool: one mutex guards both lists; a condition variable wakes idle threads.
 * Threads inherit a fully blocked signal mask so SIGTERM and friends reach the loop thread.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "workers.h"

struct workers {
	pthread_mutex_t wp_lock;
	pthread_cond_t wp_cond;
	struct work *wp_head, *wp_tail;        /* queued */
	struct work *wp_done, *wp_done_tail;   /* completed, oldest first */
	bool wp_stop;
	bool wp_joined;
	int wp_nthreads;
	pthread_t *wp_threads;
	void (*wp_notify)(void *);
	void *wp_arg;
};

static void workers_append_done(struct workers *wp, struct work *w, bool *was_empty)
{
	w->wk_next = NULL;
	*was_empty = wp->wp_done == NULL;
	if (wp->wp_done_tail)
		wp->wp_done_tail->wk_next = w;
	else
		wp->wp_done = w;
	wp->wp_done_tail = w;
}

static void *workers_main(void *arg)
{
	struct workers *wp = arg;
	struct work *w;
	bool was_empty;

	pthread_mutex_lock(&wp->wp_lock);
	for (;;) {
		while (!wp->wp_stop && wp->wp_head == NULL)
			pthread_cond_wait(&wp->wp_cond, &wp->wp_lock);
		if (wp->wp_stop)
			break;
		w = wp->wp_head;
		wp->wp_head = w->wk_next;
		if (wp->wp_head == NULL)
			wp->wp_tail = NULL;
		pthread_mutex_unlock(&wp->wp_lock);

		w->wk_run(w);
		w->wk_ran = true;

		pthread_mutex_lock(&wp->wp_lock);
		workers_append_done(wp, w, &was_empty);
		if (was_empty) {
			/* Outside the lock: the notifier may take its own locks. */
			pthread_mutex_unlock(&wp->wp_lock);
			wp->wp_notify(wp->wp_arg);
			pthread_mutex_lock(&wp->wp_lock);
		}
	}
	pthread_mutex_unlock(&wp->wp_lock);
	return NULL;
}

int workers_create(int n, void (*notify)(void *), void *arg, struct workers **out)
{
	struct workers *wp;
	sigset_t all, old;
	int rc = 0;

	*out = NULL;
	if (n < 1)
		return -EINVAL;
	wp = calloc(1, sizeof(*wp));
	if (wp == NULL)
		return -ENOMEM;
	wp->wp_threads = calloc((size_t)n, sizeof(*wp->wp_threads));
	if (wp->wp_threads == NULL) {
		free(wp);
		return -ENOMEM;
	}
	pthread_mutex_init(&wp->wp_lock, NULL);
	pthread_cond_init(&wp->wp_cond, NULL);
	wp->wp_notify = notify;
	wp->wp_arg = arg;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n; i++) {
		rc = pthread_create(&wp->wp_threads[i], NULL, workers_main, wp);
		if (rc != 0) {
			rc = -rc;
			break;
		}
		wp->wp_nthreads++;
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
	w->wk_next = NULL;
	w->wk_ran = false;
	pthread_mutex_lock(&wp->wp_lock);
	if (wp->wp_tail)
		wp->wp_tail->wk_next = w;
	else
		wp->wp_head = w;
	wp->wp_tail = w;
	pthread_cond_signal(&wp->wp_cond);
	pthread_mutex_unlock(&wp->wp_lock);
}

struct work *workers_done(struct workers *wp)
{
	struct work *w;

	pthread_mutex_lock(&wp->wp_lock);
	w = wp->wp_done;
	wp->wp_done = wp->wp_done_tail = NULL;
	pthread_mutex_unlock(&wp->wp_lock);
	return w;
}

void workers_stop(struct workers *wp)
{
	struct work *w, *next;
	bool was_empty;

	if (wp->wp_joined)
		return;
	pthread_mutex_lock(&wp->wp_lock);
	wp->wp_stop = true;
	pthread_cond_broadcast(&wp->wp_cond);
	pthread_mutex_unlock(&wp->wp_lock);
	for (int i = 0; i < wp->wp_nthreads; i++)
		pthread_join(wp->wp_threads[i], NULL);
	wp->wp_joined = true;

	pthread_mutex_lock(&wp->wp_lock);
	for (w = wp->wp_head; w != NULL; w = next) {
		next = w->wk_next;
		workers_append_done(wp, w, &was_empty);
	}
	wp->wp_head = wp->wp_tail = NULL;
	pthread_mutex_unlock(&wp->wp_lock);
}

void workers_free(struct workers *wp)
{
	if (wp == NULL)
		return;
	workers_stop(wp);
	pthread_cond_destroy(&wp->wp_cond);
	pthread_mutex_destroy(&wp->wp_lock);
	free(wp->wp_threads);
	free(wp);
}
