/*
 * Branch directories watched for changes (inotify), so that what the server keeps about the
 * names in one (a listing's attributes) is used exactly while nothing changed there, whoever
 * made the change: a client through us, another export sharing the branch, or someone in a
 * shell on the server.
 *
 * One queue for the process: the kernel gives one watch per directory per queue, and
 * per-client views share their lower branches. A watch counts the changes reported for its
 * directory. A user notes the count (uwatch_changes) after draining the queue
 * (uwatch_drain), and trusts what it learnt after noting it for as long as a later drain
 * leaves the count as noted: the kernel queues a change before the system call making it
 * returns, so a drain counts every change completed before it began. A lost queue
 * (overflow) counts as a change of every directory.
 *
 * While any export is open a thread drains the queue as soon as the kernel queues a change
 * (it is woken before the system call making the change returns), so that users on the hot
 * path (the resolve cache, cache.c) read counts without a system call of their own: they
 * see a change once that thread has run, normally long before the next call arrives.
 * Users that need every change completed before a point (listings' kept attributes)
 * drain themselves.
 *
 * Not reported, so not seen: writes through a shared mmap, and changes to a file made
 * through a hard link in another directory (users keep nothing of files with several links).
 * Nor anything done on another machine to a network or cluster file system: directories
 * there are never watched (uwatch_get: -EOPNOTSUPP).
 * Reads are not watched: an access time a read moves is seen at the next other change.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/inotify.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

/* Bounds the kernel memory and the descriptors' marks: past it, nothing is watched. */
#define UWATCH_MAX 8192
#define UWATCH_BUCKETS 1024
/* Changes to the directory itself and to every name in it, short of reading. */
#define UWATCH_MASK (IN_ATTRIB | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | \
		     IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

struct uwatch {
	struct uwatch *uw_next;          /* chain of its bucket */
	int uw_wd;
	int uw_refs;                     /* guarded by the table's lock */
	atomic_uint_fast64_t uw_changes;
	atomic_uint_fast64_t uw_names;   /* of those, all but writes to a file's data */
};

static struct {
	pthread_mutex_t lock;
	bool tried;                      /* the queue was opened, or failed to open */
	int fd;
	size_t n;
	size_t max;                      /* the budget: UWATCH_MAX unless a test set it */
	struct uwatch *buckets[UWATCH_BUCKETS];
	atomic_uint_fast64_t lost;       /* overflows */
	atomic_uint_fast64_t names;      /* every watch's uw_names together */
	bool wanted;                     /* an export is open: the drainer should run */
	atomic_bool drains;              /* the drainer runs */
	pthread_t drainer;
	alignas(struct inotify_event) char events[65536];
} uwatch_table = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .max = UWATCH_MAX };

static void uwatch_read(bool to_end);

static void *uwatch_drainer_main(void *arg)
{
	sigset_t signals;

	(void)arg;
	sigfillset(&signals);
	pthread_sigmask(SIG_BLOCK, &signals, NULL); /* signals are the event loop's */
	for (;;) {
		/* Stopped (cancelled) only while it waits, never holding the lock. */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		fsio_watch_wait(uwatch_table.fd);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		/* One read: the wait says at once whether more came. */
		uwatch_read(false);
	}
	return NULL;
}

/* Starts the drainer if it is wanted and can run (lock held). */
static void uwatch_drainer_start(void)
{
	int r;

	if (!uwatch_table.wanted || uwatch_table.fd < 0 || atomic_load(&uwatch_table.drains))
		return;
	r = pthread_create(&uwatch_table.drainer, NULL, uwatch_drainer_main, NULL);
	if (r != 0) {
		log_msg(LOG_WARNING, "cannot start the thread reading change notifications (%s): changes made in the branches by others are seen within %d ms",
			strerror(r), UNION_CACHE_TRUST_MS);
		return;
	}
	atomic_store(&uwatch_table.drains, true);
}

/* Opens the queue on first use, and starts the drainer if wanted (lock held). */
static void uwatch_open(void)
{
	int r;

	if (!uwatch_table.tried) {
		uwatch_table.tried = true;
		r = fsio_watch_open(&uwatch_table.fd);
		if (r < 0)
			log_msg(LOG_WARNING, "change notification unavailable (%s): listings' attributes are read anew each time and changes made in the branches by others are seen within %d ms; raise fs.inotify.max_user_instances",
				strerror(-r), UNION_CACHE_TRUST_MS);
	}
	uwatch_drainer_start();
}

void uwatch_start(void)
{
	pthread_mutex_lock(&uwatch_table.lock);
	uwatch_table.wanted = true;
	uwatch_open();
	pthread_mutex_unlock(&uwatch_table.lock);
}

void uwatch_stop(void)
{
	bool drains;

	pthread_mutex_lock(&uwatch_table.lock);
	uwatch_table.wanted = false;
	drains = atomic_exchange(&uwatch_table.drains, false);
	pthread_mutex_unlock(&uwatch_table.lock);
	if (drains) {
		pthread_cancel(uwatch_table.drainer);
		pthread_join(uwatch_table.drainer, NULL);
	}
}

bool uwatch_live(void)
{
	return atomic_load_explicit(&uwatch_table.drains, memory_order_relaxed);
}

void union_watch_budget(size_t dirs)
{
	pthread_mutex_lock(&uwatch_table.lock);
	uwatch_table.max = dirs == SIZE_MAX ? UWATCH_MAX : dirs;
	pthread_mutex_unlock(&uwatch_table.lock);
}

void union_watch_settle(void)
{
	uwatch_drain();
}

/* File systems whose changes made elsewhere than through this kernel are not reported. */
static const long uwatch_unreported[] = {
	NFS_SUPER_MAGIC, SMB_SUPER_MAGIC, 0xff534d42 /* cifs */, 0xfe534d42 /* smb2 */,
	FUSE_SUPER_MAGIC, CEPH_SUPER_MAGIC, V9FS_MAGIC, AFS_SUPER_MAGIC, AFS_FS_MAGIC,
	CODA_SUPER_MAGIC, NCP_SUPER_MAGIC, OCFS2_SUPER_MAGIC, 0x01161970 /* gfs2 */,
};

static bool uwatch_reported(int dirfd)
{
	long type;

	if (fsio_fs_type(dirfd, &type) < 0)
		return false;
	for (size_t i = 0; i < sizeof(uwatch_unreported) / sizeof(uwatch_unreported[0]); i++)
		if (type == uwatch_unreported[i])
			return false;
	return true;
}

static struct uwatch **uwatch_slot(int wd)
{
	struct uwatch **p = &uwatch_table.buckets[(unsigned)wd % UWATCH_BUCKETS];

	while (*p && (*p)->uw_wd != wd)
		p = &(*p)->uw_next;
	return p;
}

int uwatch_get(int dirfd, struct uwatch **out)
{
	struct uwatch *w;
	int r, wd;

	*out = NULL;
	pthread_mutex_lock(&uwatch_table.lock);
	uwatch_open();
	if (uwatch_table.fd < 0) {
		r = -ENOSYS;
		goto out;
	}
	if (uwatch_table.n >= uwatch_table.max) {
		r = -ENOSPC;
		goto out;
	}
	r = fsio_watch_dir(uwatch_table.fd, dirfd, UWATCH_MASK, &wd);
	if (r < 0)
		goto out;
	w = *uwatch_slot(wd);
	/* A directory watched already was found reported then: one file system type check. */
	if (!w && !uwatch_reported(dirfd)) {
		fsio_watch_forget(uwatch_table.fd, wd);
		r = -EOPNOTSUPP;
		goto out;
	}
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			fsio_watch_forget(uwatch_table.fd, wd);
			r = -ENOMEM;
			goto out;
		}
		w->uw_wd = wd;
		w->uw_next = uwatch_table.buckets[(unsigned)wd % UWATCH_BUCKETS];
		uwatch_table.buckets[(unsigned)wd % UWATCH_BUCKETS] = w;
		uwatch_table.n++;
	}
	w->uw_refs++;
	*out = w;
out:
	pthread_mutex_unlock(&uwatch_table.lock);
	return r;
}

void uwatch_put(struct uwatch *w)
{
	struct uwatch **p;

	if (!w)
		return;
	pthread_mutex_lock(&uwatch_table.lock);
	if (--w->uw_refs == 0) {
		p = uwatch_slot(w->uw_wd);
		*p = w->uw_next;
		uwatch_table.n--;
		fsio_watch_forget(uwatch_table.fd, w->uw_wd);
		free(w);
	}
	pthread_mutex_unlock(&uwatch_table.lock);
}

static void uwatch_count(const struct inotify_event *ev)
{
	struct uwatch *w;

	if (ev->mask & IN_Q_OVERFLOW) {
		atomic_fetch_add(&uwatch_table.lost, 1);
		return;
	}
	/* Events of a watch given up are still queued after it: nobody counts on it. */
	w = *uwatch_slot(ev->wd);
	if (!w)
		return;
	atomic_fetch_add(&w->uw_changes, 1);
	if (ev->mask & ~(uint32_t)(IN_MODIFY | IN_ISDIR)) {
		atomic_fetch_add(&w->uw_names, 1);
		atomic_fetch_add(&uwatch_table.names, 1);
	}
}

/* Counts queued events: one read, or (to_end) reads until the queue is empty. */
static void uwatch_read(bool to_end)
{
	ssize_t n;

	pthread_mutex_lock(&uwatch_table.lock);
	while (uwatch_table.fd >= 0 &&
	       (n = fsio_watch_read(uwatch_table.fd, uwatch_table.events,
				    sizeof(uwatch_table.events))) > 0) {
		for (ssize_t at = 0; at + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev =
				(const void *)(uwatch_table.events + at);

			uwatch_count(ev);
			at += (ssize_t)sizeof(*ev) + ev->len;
		}
		if (!to_end)
			break;
	}
	pthread_mutex_unlock(&uwatch_table.lock);
}

void uwatch_drain(void)
{
	uwatch_read(true);
}

uint64_t uwatch_changes(const struct uwatch *w)
{
	if (!w)
		return 0; /* a directory of a branch that never changes */
	return atomic_load(&w->uw_changes) + atomic_load(&uwatch_table.lost);
}

uint64_t uwatch_names(const struct uwatch *w)
{
	if (!w)
		return 0;
	return atomic_load_explicit(&w->uw_names, memory_order_acquire) +
	       atomic_load_explicit(&uwatch_table.lost, memory_order_acquire);
}

uint64_t uwatch_total(void)
{
	return atomic_load(&uwatch_table.names) + atomic_load(&uwatch_table.lost);
}
