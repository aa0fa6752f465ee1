/*
 * Running out of descriptors. The caches keep descriptors open only to save work later;
 * when a file system call finds the process (or the system) out of them, every open union
 * gives back what it caches, and the call tries once more (fsio's shedder). Descriptors
 * belong to the process, not to an export: the shortage of one client's view is relieved
 * by what any union holds.
 *
 * A failure for want of descriptors is never taken for an absent object anywhere: it
 * reaches the client as NFS3ERR_JUKEBOX, and once descriptors are free again everything
 * works as before, without a restart.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

/* Seconds between two warnings about the shortage. */
#define USHED_LOG_INTERVAL 60

static pthread_mutex_t ushed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct union_export *ushed_head;

void union_shed_fds(struct union_export *ux)
{
	ucache_shed(ux);
	uio_shed();
}

static void ushed_warn(void)
{
	static _Atomic time_t last;
	time_t now = time(NULL), was = atomic_load(&last);
	struct rlimit rl;

	if (now - was < USHED_LOG_INTERVAL || !atomic_compare_exchange_strong(&last, &was, now))
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = RLIM_INFINITY;
	if (rl.rlim_cur == RLIM_INFINITY)
		log_warn("out of file descriptors: cached ones were closed to make room; calls "
			 "that still find none get NFS3ERR_JUKEBOX and are retried by clients "
			 "(raise the system's file limit, fs.file-max)");
	else
		log_warn("out of file descriptors (the open files limit is %llu): cached ones "
			 "were closed to make room; calls that still find none get NFS3ERR_JUKEBOX "
			 "and are retried by clients (raise the limit, e.g. ulimit -n or "
			 "LimitNOFILE=)", (unsigned long long)rl.rlim_cur);
}

/*
 * fsio's shedder. The list's lock is taken only here and to add or remove a union, and
 * no file system call that makes a descriptor runs under a cache's lock, so this may run
 * wherever such a call fails.
 */
static void ushed_all(void)
{
	pthread_mutex_lock(&ushed_lock);
	for (struct union_export *ux = ushed_head; ux; ux = ux->ux_shed_next)
		ucache_shed(ux);
	pthread_mutex_unlock(&ushed_lock);
	uio_shed();
	ushed_warn();
}

void ushed_register(struct union_export *ux)
{
	pthread_mutex_lock(&ushed_lock);
	ux->ux_shed_prev = NULL;
	ux->ux_shed_next = ushed_head;
	if (ushed_head)
		ushed_head->ux_shed_prev = ux;
	ushed_head = ux;
	ux->ux_shed_listed = true;
	pthread_mutex_unlock(&ushed_lock);
	fsio_set_shedder(ushed_all);
}

void ushed_unregister(struct union_export *ux)
{
	pthread_mutex_lock(&ushed_lock);
	if (ux->ux_shed_listed) {
		if (ux->ux_shed_prev)
			ux->ux_shed_prev->ux_shed_next = ux->ux_shed_next;
		else
			ushed_head = ux->ux_shed_next;
		if (ux->ux_shed_next)
			ux->ux_shed_next->ux_shed_prev = ux->ux_shed_prev;
		ux->ux_shed_listed = false;
	}
	pthread_mutex_unlock(&ushed_lock);
}
