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
 * link count is 0 (ufd_forget_dead), and a sweeper thread closes, about once a second,
 * entries idle for UFD_IDLE_NS and those of files removed behind the server's back; it also
 * drops the resolve cache's expired entries (which hold directory descriptors) of every
 * open export. When the process runs out of descriptors, all of these are given back at
 * once (union_shed_fds, fsio's shedder) and the failed call tries again.
 *
 * The table is split in shards by (device, inode), each with its own lock, so all entries
 * of one object are in one shard; a hit is one lock, a compare and a reference. Entries are
 * reference counted (the table holds one): an entry dropped while a call uses it is closed
 * when that call is done with it. Descriptors are closed outside the shard locks: the last
 * close of a removed file frees its blocks, which may take a while.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

#define UFD_SHARDS 32
#define UFD_PER_SHARD 8
#define UFD_IDLE_NS 2000000000LL
#define UFD_SWEEP_NS 1000000000LL

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
} __attribute__((aligned(64)));

static struct ufd_shard ufd_shards[UFD_SHARDS] = {
	[0 ... UFD_SHARDS - 1] = { .fs_lock = PTHREAD_MUTEX_INITIALIZER },
};

/* Open exports, whose resolve caches the sweeper visits; the sweeper runs while any is. */
static pthread_mutex_t ufd_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ufd_reg_cond;
static struct union_export **ufd_reg;
static size_t ufd_reg_n, ufd_reg_cap;
static bool ufd_sweeper_stop;
/* Serializes starting and stopping the sweeper (never taken by the sweeper). */
static pthread_mutex_t ufd_life_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t ufd_sweeper;
static bool ufd_sweeper_runs;

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

void ufd_keep(int fd, const struct stat *st, int mode, const void *who, size_t wholen)
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

/* Drops every entry, or (all false) those idle too long or of removed files. */
static void ufd_sweep_fds(bool all)
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

static void *ufd_sweeper_main(void *arg)
{
	struct timespec at;
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the event loop's */
	pthread_mutex_lock(&ufd_reg_lock);
	while (!ufd_sweeper_stop) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += UFD_SWEEP_NS / 1000000000LL;
		while (!ufd_sweeper_stop &&
		       pthread_cond_timedwait(&ufd_reg_cond, &ufd_reg_lock, &at) != ETIMEDOUT)
			;
		if (ufd_sweeper_stop)
			break;
		/* Under the registry lock: no export closes while its cache is swept. */
		for (size_t i = 0; i < ufd_reg_n; i++)
			ucache_sweep(ufd_reg[i], false);
		pthread_mutex_unlock(&ufd_reg_lock);
		ufd_sweep_fds(false);
		pthread_mutex_lock(&ufd_reg_lock);
	}
	pthread_mutex_unlock(&ufd_reg_lock);
	return NULL;
}

static int ufd_sweeper_start(void)
{
	pthread_condattr_t ca;
	int r;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ufd_reg_cond, &ca);
	pthread_condattr_destroy(&ca);
	ufd_sweeper_stop = false;
	r = pthread_create(&ufd_sweeper, NULL, ufd_sweeper_main, NULL);
	if (r != 0) {
		pthread_cond_destroy(&ufd_reg_cond);
		return -r;
	}
	ufd_sweeper_runs = true;
	return 0;
}

/* Seconds between two warnings about running out of descriptors. */
#define UFD_SHORT_LOG_INTERVAL 60

static void ufd_warn_short(void)
{
	static _Atomic time_t last;
	time_t now = time(NULL), was = atomic_load(&last);
	struct rlimit rl;

	if (now - was < UFD_SHORT_LOG_INTERVAL || !atomic_compare_exchange_strong(&last, &was, now))
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
 * fsio's shedder, run where a call that makes a descriptor finds none. Descriptors belong
 * to the process, not to an export: one client's view is relieved by what any union holds.
 * No call that makes a descriptor runs under this file's or the resolve cache's locks, so
 * this may run wherever such a call fails.
 */
static void ufd_shed_all(void)
{
	union_shed_fds(NULL);
	ufd_warn_short();
}

int ufd_register(struct union_export *ux)
{
	int r = 0;

	pthread_mutex_lock(&ufd_life_lock);
	pthread_mutex_lock(&ufd_reg_lock);
	if (ufd_reg_n == ufd_reg_cap) {
		size_t cap = ufd_reg_cap ? 2 * ufd_reg_cap : 16;
		struct union_export **n = realloc(ufd_reg, cap * sizeof(*n));

		if (n) {
			ufd_reg = n;
			ufd_reg_cap = cap;
		} else {
			r = -ENOMEM;
		}
	}
	if (r == 0)
		ufd_reg[ufd_reg_n++] = ux;
	pthread_mutex_unlock(&ufd_reg_lock);
	fsio_set_shedder(ufd_shed_all);
	if (r == 0 && !ufd_sweeper_runs) {
		r = ufd_sweeper_start();
		if (r < 0)
			log_warn("cannot start the thread closing idle and removed files: %s; "
				 "they are closed when the next call on them finds them",
				 strerror(-r));
		r = 0; /* the cache still works, only closes lazily */
	}
	pthread_mutex_unlock(&ufd_life_lock);
	return r;
}

void ufd_unregister(struct union_export *ux)
{
	bool last;

	pthread_mutex_lock(&ufd_life_lock);
	pthread_mutex_lock(&ufd_reg_lock);
	for (size_t i = 0; i < ufd_reg_n; i++)
		if (ufd_reg[i] == ux) {
			ufd_reg[i] = ufd_reg[--ufd_reg_n];
			break;
		}
	last = ufd_reg_n == 0;
	if (last && ufd_sweeper_runs) {
		ufd_sweeper_stop = true;
		pthread_cond_signal(&ufd_reg_cond);
	}
	pthread_mutex_unlock(&ufd_reg_lock);
	if (last && ufd_sweeper_runs) {
		pthread_join(ufd_sweeper, NULL);
		pthread_cond_destroy(&ufd_reg_cond);
		ufd_sweeper_runs = false;
	}
	if (last) {
		/* Nothing is served any more: nothing stays open either. */
		ufd_sweep_fds(true);
		free(ufd_reg);
		ufd_reg = NULL;
		ufd_reg_cap = 0;
	}
	pthread_mutex_unlock(&ufd_life_lock);
}

void union_shed_fds(struct union_export *ux)
{
	ufd_sweep_fds(true);
	if (ux) {
		ucache_sweep(ux, true);
		return;
	}
	pthread_mutex_lock(&ufd_reg_lock);
	for (size_t i = 0; i < ufd_reg_n; i++)
		ucache_sweep(ufd_reg[i], true);
	pthread_mutex_unlock(&ufd_reg_lock);
}
