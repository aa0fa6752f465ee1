/*
 * Giving back the descriptors the union layer keeps only to save work: the files kept open
 * for READ and WRITE (fdcache.c) and the resolve caches' directories and parents (cache.c)
 * of the open exports (registry.c). While any export is open, a sweeper thread closes,
 * about once a second, the cached files idle for a while or removed behind the server's
 * back and the resolve caches' expired entries, and measures every branch's space for
 * `status` every UNION_SPACE_EVERY_S seconds (space.c). When the process runs out of
 * descriptors, all of them are given back at once (union_shed_fds, fsio's shedder) and the
 * failed call tries again.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

#define USW_EVERY_NS 1000000000LL
/* Sweeps between two measurements of the branches' space (uspace_measure). */
#define USW_SPACE_EVERY (UNION_SPACE_EVERY_S * 1000000000LL / USW_EVERY_NS)
/* Seconds between two warnings about running out of descriptors. */
#define USW_SHORT_LOG_INTERVAL 60

/* Serializes starting and stopping the sweeper (never taken by the sweeper). */
static pthread_mutex_t usw_life_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t usw_sweeper;
static bool usw_runs;                /* life lock */
/* The sweeper's sleep, which a stop cuts short. */
static pthread_mutex_t usw_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t usw_cond;
static bool usw_stop;                /* usw_lock */

static void usw_sweep_cache(struct union_export *ux, void *all)
{
	ucache_sweep(ux, *(const bool *)all);
}

static void usw_measure_space(struct union_export *ux, void *arg)
{
	(void)arg;
	uspace_measure(ux);
}

static void *usw_sweeper_main(void *arg)
{
	struct timespec at;
	sigset_t signals;
	bool all = false;
	unsigned long long sweeps = 0;

	(void)arg;
	sigfillset(&signals);
	pthread_sigmask(SIG_BLOCK, &signals, NULL); /* signals are the event loop's */
	pthread_mutex_lock(&usw_lock);
	while (!usw_stop) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += USW_EVERY_NS / 1000000000LL;
		while (!usw_stop && pthread_cond_timedwait(&usw_cond, &usw_lock, &at) != ETIMEDOUT)
			;
		if (usw_stop)
			break;
		pthread_mutex_unlock(&usw_lock);
		/* Under the registry's lock: no export closes while its cache is swept. */
		ureg_each(usw_sweep_cache, &all);
		ufd_sweep(false);
		/*
		 * A statvfs per branch, under the registry's lock (so no export closes meanwhile;
		 * one opening waits): a branch whose statvfs hangs would hang the calls served
		 * from it as well, and never holds up the event loop.
		 */
		if (++sweeps % USW_SPACE_EVERY == 0)
			ureg_each(usw_measure_space, NULL);
		pthread_mutex_lock(&usw_lock);
	}
	pthread_mutex_unlock(&usw_lock);
	return NULL;
}

static int usw_sweeper_start(void)
{
	pthread_condattr_t ca;
	int r;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&usw_cond, &ca);
	pthread_condattr_destroy(&ca);
	usw_stop = false;
	r = pthread_create(&usw_sweeper, NULL, usw_sweeper_main, NULL);
	if (r != 0) {
		pthread_cond_destroy(&usw_cond);
		return -r;
	}
	usw_runs = true;
	return 0;
}

static void usw_sweeper_stop(void)
{
	pthread_mutex_lock(&usw_lock);
	usw_stop = true;
	pthread_cond_signal(&usw_cond);
	pthread_mutex_unlock(&usw_lock);
	pthread_join(usw_sweeper, NULL);
	pthread_cond_destroy(&usw_cond);
	usw_runs = false;
}

static void usw_warn_short(void)
{
	static _Atomic time_t last;
	time_t now = time(NULL), was = atomic_load(&last);
	struct rlimit rl;

	if (now - was < USW_SHORT_LOG_INTERVAL || !atomic_compare_exchange_strong(&last, &was, now))
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = RLIM_INFINITY;
	if (rl.rlim_cur == RLIM_INFINITY)
		log_warn("out of file descriptors: cached ones were closed to make room; calls "
			 "that still find none fail as a temporary shortage, which clients retry "
			 "(raise the system's file limit, fs.file-max)");
	else
		log_warn("out of file descriptors (the open files limit is %llu): cached ones "
			 "were closed to make room; calls that still find none fail as a "
			 "temporary shortage, which clients retry (raise the limit, e.g. ulimit -n "
			 "or LimitNOFILE=)", (unsigned long long)rl.rlim_cur);
}

/*
 * fsio's shedder, run where a call that makes a descriptor finds none. Descriptors belong
 * to the process, not to an export: one client's view is relieved by what any union holds.
 * No call that makes a descriptor runs under the registry's, the descriptor cache's or the
 * resolve cache's locks, so this may run wherever such a call fails.
 */
static void usw_shed_all(void)
{
	union_shed_fds(NULL);
	usw_warn_short();
}

int usw_export_open(struct union_export *ux)
{
	int r;

	pthread_mutex_lock(&usw_life_lock);
	r = ureg_add(ux);
	fsio_set_shedder(usw_shed_all);
	if (r == 0)
		uwatch_start();
	if (r == 0 && !usw_runs) {
		r = usw_sweeper_start();
		if (r < 0)
			log_warn("cannot start the thread closing idle and removed files: %s; "
				 "they are closed when the next call on them finds them",
				 strerror(-r));
		r = 0; /* the cache still works, only closes lazily */
	}
	pthread_mutex_unlock(&usw_life_lock);
	return r;
}

void usw_export_close(struct union_export *ux)
{
	bool last;

	pthread_mutex_lock(&usw_life_lock);
	last = ureg_remove(ux);
	if (last && usw_runs)
		usw_sweeper_stop();
	if (last)
		uwatch_stop();
	/* Nothing is served any more: nothing stays open either. */
	if (last)
		ufd_sweep(true);
	pthread_mutex_unlock(&usw_life_lock);
}

void union_shed_fds(struct union_export *ux)
{
	bool all = true;

	ufd_sweep(true);
	if (ux)
		ucache_sweep(ux, true);
	else
		ureg_each(usw_sweep_cache, &all);
}
