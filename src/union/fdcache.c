/*
 * Files kept open for READ and WRITE, shared by every worker thread, so a stream of calls
 * on one file costs no open and close.
 *
 * An entry is one descriptor opened with one access mode for one identity (the caller's
 * credential bytes) on one object: (device, inode) and the ctime the object had when it
 * was opened. It is reused only for the same identity, mode and (device, inode, ctime) a
 * resolve just found: the kernel checked that identity's access when the file was opened,
 * and any change of mode, owner or ACL moves the ctime, so the check's answer still holds.
 * A WRITE through an entry moves the ctime itself: the entry then takes the ctime after the
 * write (ufd_wrote), so a change by anyone else (mode, owner, a write through another
 * descriptor) no longer matches and the file is opened again. What this cannot see is a
 * change within the same ctime tick as the last write or open. Only one entry is kept per
 * (object, mode, identity): a newer open replaces it.
 *
 * A descriptor pins its file: a removed file's blocks are not freed, nor its inode number
 * reused, while one is open. So every path that unlinks an object drops its entries before
 * it replies (ufd_forget), a call that finds an object stale drops those of a file whose
 * link count is 0 (ufd_forget_dead), and ufd_sweep closes entries idle for UFD_IDLE_NS and
 * those of files removed behind the server's back (the sweeper, sweep.c, about once a
 * second), or every entry when the process runs out of descriptors (union_shed_fds).
 *
 * The table is split in shards by (device, inode), each with its own lock, so all entries
 * of one object are in one shard; a hit is one lock, a compare and a reference. Entries are
 * reference counted (the table holds one): an entry dropped while a call uses it is closed
 * when that call is done with it. Descriptors are closed outside the shard locks: the last
 * close of a removed file frees its blocks, which may take a while.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsio.h"
#include "uint.h"

#define UFD_SHARDS 32
#define UFD_PER_SHARD 8
#define UFD_IDLE_NS 2000000000LL

struct ufd_ent {
	struct ufd_ent *fe_next;
	atomic_int fe_refs;
	int fe_fd;
	int fe_mode;                 /* O_RDONLY or O_WRONLY */
	dev_t fe_dev;
	ino_t fe_ino;
	struct timespec fe_ctime;    /* shard lock */
	long long fe_used;           /* shard lock; CLOCK_MONOTONIC_COARSE, ns */
	size_t fe_keylen;
	unsigned char fe_key[UFD_KEY_MAX];
};

struct ufd_shard {
	pthread_mutex_t fs_lock;
	struct ufd_ent *fs_head;
	int fs_n;
	uint64_t fs_forgets;         /* ufd_forget calls on the shard's objects so far */
} __attribute__((aligned(64)));

static struct ufd_shard ufd_shards[UFD_SHARDS] = {
	[0 ... UFD_SHARDS - 1] = { .fs_lock = PTHREAD_MUTEX_INITIALIZER },
};

static long long ufd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct ufd_shard *ufd_shard_of(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull ^ (uint64_t)ino) * 0xff51afd7ed558ccdull;

	return &ufd_shards[(h >> 32) % UFD_SHARDS];
}

int ufd_fd(const struct ufd_ent *e)
{
	return e->fe_fd;
}

void ufd_put(struct ufd_ent *e)
{
	if (e && atomic_fetch_sub(&e->fe_refs, 1) == 1) {
		fsio_close(e->fe_fd);
		free(e);
	}
}

/* Drops the table's reference of every entry on the list (unlinked, no lock held). */
static void ufd_put_list(struct ufd_ent *e)
{
	while (e) {
		struct ufd_ent *next = e->fe_next;

		ufd_put(e);
		e = next;
	}
}

/* Moves *pp (shard lock held) from the shard to the list *doomed; returns the next link. */
static struct ufd_ent **ufd_unlink(struct ufd_shard *s, struct ufd_ent **pp,
				   struct ufd_ent **doomed)
{
	struct ufd_ent *e = *pp;

	*pp = e->fe_next;
	e->fe_next = *doomed;
	*doomed = e;
	s->fs_n--;
	return pp;
}

static bool ufd_same_key(const struct ufd_ent *e, int mode, const void *who, size_t wholen)
{
	return e->fe_mode == mode && e->fe_keylen == wholen && !memcmp(e->fe_key, who, wholen);
}

struct ufd_ent *ufd_get(const struct stat *st, int mode, const void *who, size_t wholen)
{
	struct ufd_shard *s = ufd_shard_of(st->st_dev, st->st_ino);
	struct ufd_ent *e;

	pthread_mutex_lock(&s->fs_lock);
	for (e = s->fs_head; e; e = e->fe_next)
		if (e->fe_dev == st->st_dev && e->fe_ino == st->st_ino &&
		    e->fe_ctime.tv_sec == st->st_ctim.tv_sec &&
		    e->fe_ctime.tv_nsec == st->st_ctim.tv_nsec && ufd_same_key(e, mode, who, wholen)) {
			e->fe_used = ufd_now();
			atomic_fetch_add(&e->fe_refs, 1);
			break;
		}
	pthread_mutex_unlock(&s->fs_lock);
	return e;
}

void ufd_keep_since(int fd, const struct stat *st, int mode, const void *who, size_t wholen,
		    uint64_t seen)
{
	struct ufd_shard *s = ufd_shard_of(st->st_dev, st->st_ino);
	struct ufd_ent *e, **pp, **lru = NULL, *doomed = NULL;

	if (wholen > UFD_KEY_MAX || (e = malloc(sizeof(*e))) == NULL) {
		fsio_close(fd);
		return;
	}
	atomic_init(&e->fe_refs, 1);
	e->fe_fd = fd;
	e->fe_mode = mode;
	e->fe_dev = st->st_dev;
	e->fe_ino = st->st_ino;
	e->fe_ctime = st->st_ctim;
	e->fe_used = ufd_now();
	e->fe_keylen = wholen;
	memcpy(e->fe_key, who, wholen);
	pthread_mutex_lock(&s->fs_lock);
	if (seen != UFD_ALWAYS && seen != s->fs_forgets) {
		pthread_mutex_unlock(&s->fs_lock);
		fsio_close(fd);
		free(e);
		return;
	}
	for (pp = &s->fs_head; *pp;) {
		if ((*pp)->fe_dev == st->st_dev && (*pp)->fe_ino == st->st_ino &&
		    ufd_same_key(*pp, mode, who, wholen)) {
			pp = ufd_unlink(s, pp, &doomed);
			continue;
		}
		if (!lru || (*pp)->fe_used < (*lru)->fe_used)
			lru = pp;
		pp = &(*pp)->fe_next;
	}
	if (s->fs_n >= UFD_PER_SHARD && lru)
		ufd_unlink(s, lru, &doomed);
	e->fe_next = s->fs_head;
	s->fs_head = e;
	s->fs_n++;
	pthread_mutex_unlock(&s->fs_lock);
	ufd_put_list(doomed);
}

void ufd_keep(int fd, const struct stat *st, int mode, const void *who, size_t wholen)
{
	ufd_keep_since(fd, st, mode, who, wholen, UFD_ALWAYS);
}

uint64_t ufd_forgets(const struct stat *st)
{
	struct ufd_shard *s = ufd_shard_of(st->st_dev, st->st_ino);
	uint64_t n;

	pthread_mutex_lock(&s->fs_lock);
	n = s->fs_forgets;
	pthread_mutex_unlock(&s->fs_lock);
	return n;
}

void ufd_wrote(struct ufd_ent *e, const struct stat *st)
{
	struct ufd_shard *s = ufd_shard_of(e->fe_dev, e->fe_ino);

	pthread_mutex_lock(&s->fs_lock);
	e->fe_ctime = st->st_ctim;
	pthread_mutex_unlock(&s->fs_lock);
}

/*
 * Drops the entries of (dev, ino) that dead says to (every one when dead is NULL); the
 * predicate runs under the shard lock.
 */
static void ufd_forget_if(dev_t dev, ino_t ino, bool (*dead)(const struct ufd_ent *))
{
	struct ufd_shard *s = ufd_shard_of(dev, ino);
	struct ufd_ent **pp, *doomed = NULL;

	pthread_mutex_lock(&s->fs_lock);
	if (!dead)
		s->fs_forgets++;
	for (pp = &s->fs_head; *pp;) {
		if ((*pp)->fe_dev == dev && (*pp)->fe_ino == ino && (!dead || dead(*pp)))
			pp = ufd_unlink(s, pp, &doomed);
		else
			pp = &(*pp)->fe_next;
	}
	pthread_mutex_unlock(&s->fs_lock);
	ufd_put_list(doomed);
}

void ufd_drop(struct ufd_ent *e)
{
	struct ufd_shard *s = ufd_shard_of(e->fe_dev, e->fe_ino);
	struct ufd_ent **pp, *doomed = NULL;

	pthread_mutex_lock(&s->fs_lock);
	for (pp = &s->fs_head; *pp; pp = &(*pp)->fe_next)
		if (*pp == e) {
			ufd_unlink(s, pp, &doomed);
			break;
		}
	pthread_mutex_unlock(&s->fs_lock);
	ufd_put_list(doomed);
}

void ufd_forget(const struct stat *st)
{
	ufd_forget_if(st->st_dev, st->st_ino, NULL);
}

/* Whether the entry's file has no name left (removed), or cannot be asked. */
static bool ufd_unlinked(const struct ufd_ent *e)
{
	struct stat st;

	return fsio_stat(e->fe_fd, &st) < 0 || st.st_nlink == 0;
}

void ufd_forget_dead(dev_t dev, ino_t ino)
{
	ufd_forget_if(dev, ino, ufd_unlinked);
}

void ufd_sweep(bool all)
{
	long long now = ufd_now();

	for (int i = 0; i < UFD_SHARDS; i++) {
		struct ufd_shard *s = &ufd_shards[i];
		struct ufd_ent **pp, *doomed = NULL;

		pthread_mutex_lock(&s->fs_lock);
		for (pp = &s->fs_head; *pp;) {
			if (all || now - (*pp)->fe_used > UFD_IDLE_NS || ufd_unlinked(*pp))
				pp = ufd_unlink(s, pp, &doomed);
			else
				pp = &(*pp)->fe_next;
		}
		pthread_mutex_unlock(&s->fs_lock);
		ufd_put_list(doomed);
	}
}
