/*
 * Directory flushes shared by concurrent changes (fsio_fsync_dir_shared in fsio.h).
 *
 * Many changes in one directory at once (an untar, rm -rf, a build) each want the directory
 * on disk before their reply. An fsync that begins after a change is complete covers that
 * change, so a caller that finds a flush of its directory in progress waits for it to end
 * and then for the next one, which it or another waiter starts: the concurrent callers of a
 * burst share one or two flushes instead of one each.
 *
 * Each caller takes a ticket once its change is complete; a flush records the last ticket
 * handed out before it began, and covers every caller whose ticket is not above that. A
 * directory is known by (device, inode): it cannot be freed, and its inode number reused,
 * while the callers waiting on it hold it open.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "blocking.h"
#include "fsio.h"

/* Directories flushed at once, hashed; two that share a slot take turns. */
#define DSYNC_SLOTS 64

struct dsync_slot {
	pthread_mutex_t ds_lock;
	pthread_cond_t ds_done_cv;
	bool ds_busy;                /* a flush of ds_dev/ds_ino is in progress */
	dev_t ds_dev;                /* the directory of the flush in progress or last ended */
	ino_t ds_ino;
	uint64_t ds_covered;         /* the last ended flush covers tickets up to this */
	int ds_rc;                   /* ... with this result */
};

static struct dsync_slot dsync_slots[DSYNC_SLOTS];
static pthread_once_t dsync_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t dsync_tickets;

static void dsync_init(void)
{
	for (int i = 0; i < DSYNC_SLOTS; i++) {
		pthread_mutex_init(&dsync_slots[i].ds_lock, NULL);
		pthread_cond_init(&dsync_slots[i].ds_done_cv, NULL);
	}
}

static bool dsync_same(const struct dsync_slot *s, const struct stat *st)
{
	return s->ds_dev == st->st_dev && s->ds_ino == st->st_ino;
}

int fsio_fsync_dir_shared(int pathfd)
{
	struct dsync_slot *s;
	struct stat st;
	uint64_t ticket, covers;
	int r;

	pthread_once(&dsync_once, dsync_init);
	r = fsio_stat(pathfd, &st);
	if (r < 0)
		return r;
	/* After the change, which the caller completed before calling. */
	ticket = atomic_fetch_add(&dsync_tickets, 1) + 1;
	s = &dsync_slots[((uint64_t)st.st_dev * 31 + (uint64_t)st.st_ino) % DSYNC_SLOTS];
	pthread_mutex_lock(&s->ds_lock);
	for (;;) {
		if (!s->ds_busy && dsync_same(s, &st) && s->ds_covered >= ticket) {
			r = s->ds_rc;
			pthread_mutex_unlock(&s->ds_lock);
			return r;
		}
		if (!s->ds_busy)
			break;
		/* Waiting for the disk, as in fsync itself (no lock order: the hooks take only theirs). */
		blocking_enter();
		pthread_cond_wait(&s->ds_done_cv, &s->ds_lock);
		blocking_leave();
	}
	s->ds_busy = true;
	s->ds_dev = st.st_dev;
	s->ds_ino = st.st_ino;
	/* Every ticket handed out so far belongs to a change complete before the fsync below. */
	covers = atomic_load(&dsync_tickets);
	pthread_mutex_unlock(&s->ds_lock);
	r = fsio_fsync_dir(pathfd);
	pthread_mutex_lock(&s->ds_lock);
	s->ds_busy = false;
	s->ds_covered = covers;
	s->ds_rc = r;
	pthread_cond_broadcast(&s->ds_done_cv);
	pthread_mutex_unlock(&s->ds_lock);
	return r;
}
