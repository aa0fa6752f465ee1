/*
 * The resolve cache: where an ino was last found, so a GETATTR, LOOKUP or READ of a
 * known object costs one system call instead of a walk from the branch roots.
 *
 * An entry holds open fds: a directory's copies, or the directory copy holding a file
 * and the file's name there. It is trusted only while nothing changed the union's
 * namespace through the server (every such change bumps the export's epoch) and, for
 * changes made by others in a branch (by hand, another export sharing it), only while
 * change notification (watch.c) reports none where they could change what the entry
 * found: an entry is watched when every copy of its directory (for a directory) is, and
 * the entry of the directory it was found in (ce_parent) is watched too, up to the root,
 * whose copies are the branch roots. A name made, removed or moved in any copy of a
 * directory, a marker (whiteout, opaque, redirect) made there or on a copy, or a copy
 * removed, shows in a count an entry or one of its parents noted when it was made. The
 * counts are noted before what they vouch for is read: a parent's entry exists before
 * its child is looked up in its copies, and a directory's own copies, watched only once
 * found, are looked up once more after (ucache_add_dir). Where that cannot be had (past
 * the watch budget, without notification, for a directory with a redirect (its lower
 * copies lie outside its parent's) and below it, for an object resolved from the roots
 * because no parent of it near enough was cached (resolve.c) an entry is trusted for
 * UNION_CACHE_TRUST_MS, which then bounds how long such a change can go unseen.
 *
 * Even then every use stats the object again and checks it is still the very copy the
 * entry names, so a stale entry costs a miss, never wrong attributes or data. For a file,
 * "the very copy" is its inode number and birth time, which the stat gives in the same
 * system call (statx): a file made since with the number of a removed one has a later
 * birth time. The entry's identity was checked against the map's (fsio_ident) when the
 * entry was made. Birth times come from the kernel's coarse clock (4 ms ticks on ext4), so
 * one is trusted only for a file born at least UCACHE_BIRTH_MARGIN_NS before its entry was
 * made: a file that got its number later was born after that, in a later tick. For a file
 * younger than that, or where the file system keeps no birth time, each use asks
 * fsio_ident.
 *
 * One reader-writer lock guards both hash tables (by ino, and by parent ino and name):
 * hits only read, and misses, which write, are rare once the working set is in.
 * Entries are reference counted; the table holds one reference of its own, and an entry
 * one of its parent's. Dead entries are useless, yet hold descriptors (which pin a
 * directory removed by hand): the sweeper (sweep.c) drops them about once a second.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fsio.h"
#include "uint.h"

#define UCACHE_MAX 65536
/* Longer than a tick of the clock that stamps birth times (jiffies: 10 ms at HZ=100). */
#define UCACHE_BIRTH_MARGIN_NS 20000000LL

struct ucent {
	struct ucent *ce_ino_next;       /* chain in uc_by_ino */
	struct ucent *ce_name_next;      /* chain in uc_by_name */
	struct ucent *ce_older, *ce_newer; /* insertion order, for eviction */
	atomic_int ce_refs;
	bool ce_hashed;
	uint64_t ce_epoch;
	int64_t ce_born_ms;
	uint64_t ce_ino;
	struct store_inode ce_rec;       /* si_parent/si_name: where the file was found */
	struct udirset ce_dirs;          /* directories: every copy */
	/*
	 * The entry of the directory it was found in (a reference), or NULL. Files: the
	 * directory copy holding it is ce_pfd if set, else ce_parent's copy ce_pidx.
	 */
	struct ucent *ce_parent;
	int ce_pidx;
	int ce_pfd;
	bool ce_pfd_owned;               /* else a branch root, which outlives the cache */
	int64_t ce_birth_ns;             /* files: birth time of the copy; 0: none kept */
	bool ce_watched;                 /* trusted while watches say so, else for a while */
	int ce_nwatch;
	struct uwatch **ce_watch;        /* directories: one per copy */
	uint64_t ce_noted;               /* ucent_changes() when it was made */
};

struct ucache {
	pthread_rwlock_t uc_lock;
	size_t uc_nbuckets;              /* a power of two */
	struct ucent **uc_by_ino;
	struct ucent **uc_by_name;
	struct ucent *uc_oldest, *uc_newest;
	size_t uc_n, uc_max;
	atomic_uint_fast64_t uc_epoch;
	_Atomic(union_clock_fn) uc_clock; /* NULL: the system's */
	size_t uc_nwindow;               /* entries trusted for a while, not watched */
	/* What the last sweep saw: unless one changed, no watched entry died since. */
	uint64_t uc_swept_epoch, uc_swept_total;
};

static int64_t ucache_now_ms(struct ucache *c)
{
	union_clock_fn clock = atomic_load_explicit(&c->uc_clock, memory_order_relaxed);
	struct timespec ts;

	if (clock)
		return clock();
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void union_set_clock(struct union_export *ux, union_clock_fn now_ms)
{
	atomic_store(&ux->ux_ucache->uc_clock, now_ms);
}

/* The birth time an entry made now may trust for its file: 0 when none (see above). */
static int64_t ucache_birth_usable(int64_t birth_ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	if (birth_ns == 0 ||
	    birth_ns > (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - UCACHE_BIRTH_MARGIN_NS)
		return 0;
	return birth_ns;
}

static size_t ucache_hash(uint64_t a, uint64_t b)
{
	uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	return (size_t)(h ^ (h >> 29));
}

static size_t ucache_name_hash(uint64_t dir, const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return ucache_hash(dir, h);
}

int ucache_new(int nbranches, struct ucache **out)
{
	struct rlimit rl;
	struct ucache *c;
	size_t max = UCACHE_MAX;

	/* A directory entry holds one fd per branch: leave half the fd budget to clients. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		size_t budget = (size_t)rl.rlim_cur / 2 / (size_t)(nbranches > 0 ? nbranches : 1);

		if (budget < max)
			max = budget;
	}
	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->uc_max = max;
	c->uc_nbuckets = 1;
	while (c->uc_nbuckets < 2 * max)
		c->uc_nbuckets <<= 1;
	c->uc_by_ino = calloc(c->uc_nbuckets, sizeof(*c->uc_by_ino));
	c->uc_by_name = calloc(c->uc_nbuckets, sizeof(*c->uc_by_name));
	if (!c->uc_by_ino || !c->uc_by_name) {
		free(c->uc_by_ino);
		free(c->uc_by_name);
		free(c);
		return -ENOMEM;
	}
	pthread_rwlock_init(&c->uc_lock, NULL);
	*out = c;
	return 0;
}

void ucache_put(struct ucent *e)
{
	while (e && atomic_fetch_sub(&e->ce_refs, 1) == 1) {
		struct ucent *parent = e->ce_parent;

		uds_release(&e->ce_dirs);
		if (e->ce_pfd_owned)
			fsio_close(e->ce_pfd);
		for (int i = 0; i < e->ce_nwatch; i++)
			uwatch_put(e->ce_watch[i]);
		free(e->ce_watch);
		free(e);
		e = parent; /* without recursion: a chain of parents may be long */
	}
}

int ucent_pfd(const struct ucent *e)
{
	return e->ce_pfd >= 0 ? e->ce_pfd : e->ce_parent->ce_dirs.ds_fd[e->ce_pidx];
}

static void ucache_unlink_chain(struct ucent **pp, struct ucent *e, bool by_name)
{
	for (; *pp; pp = by_name ? &(*pp)->ce_name_next : &(*pp)->ce_ino_next)
		if (*pp == e) {
			*pp = by_name ? e->ce_name_next : e->ce_ino_next;
			return;
		}
}

/* Takes e out of the tables (write lock held) and drops the tables' reference. */
static void ucache_unhash(struct ucache *c, struct ucent *e)
{
	size_t mask = c->uc_nbuckets - 1;

	if (!e->ce_hashed)
		return;
	ucache_unlink_chain(&c->uc_by_ino[ucache_hash(e->ce_ino, 0) & mask], e, false);
	ucache_unlink_chain(&c->uc_by_name[ucache_name_hash(e->ce_rec.si_parent,
							      e->ce_rec.si_name) & mask], e, true);
	if (e->ce_older)
		e->ce_older->ce_newer = e->ce_newer;
	else
		c->uc_oldest = e->ce_newer;
	if (e->ce_newer)
		e->ce_newer->ce_older = e->ce_older;
	else
		c->uc_newest = e->ce_older;
	e->ce_hashed = false;
	c->uc_n--;
	if (!e->ce_watched)
		c->uc_nwindow--;
	ucache_put(e);
}

void ucache_free(struct ucache *c)
{
	if (!c)
		return;
	while (c->uc_oldest)
		ucache_unhash(c, c->uc_oldest);
	pthread_rwlock_destroy(&c->uc_lock);
	free(c->uc_by_ino);
	free(c->uc_by_name);
	free(c);
}

void ucache_changed(struct union_export *ux)
{
	atomic_fetch_add(&ux->ux_ucache->uc_epoch, 1);
}

uint64_t ucache_epoch(const struct union_export *ux)
{
	return atomic_load(&ux->ux_ucache->uc_epoch);
}

/* What the watches of an entry's copies have counted, plus one (0: none). */
static uint64_t ucent_changes(const struct ucent *e)
{
	uint64_t n = 1;

	for (int i = 0; i < e->ce_nwatch; i++)
		n += uwatch_names(e->ce_watch[i]);
	return n;
}

/* A watched entry: whether nothing changed in its copies nor in its parents'. */
static bool ucent_unchanged(const struct ucent *e)
{
	for (; e; e = e->ce_parent)
		if (e->ce_nwatch && ucent_changes(e) != e->ce_noted)
			return false;
	return true;
}

static bool ucent_live(const struct ucache *c, const struct ucent *e, int64_t now)
{
	if (e->ce_epoch != atomic_load(&c->uc_epoch))
		return false;
	/* No count moves while nobody drains: the window then bounds what goes unseen. */
	if (e->ce_watched && uwatch_live())
		return ucent_unchanged(e);
	return now - e->ce_born_ms < UNION_CACHE_TRUST_MS;
}

struct ucent *ucache_get(struct union_export *ux, uint64_t ino)
{
	struct ucache *c = ux->ux_ucache;
	int64_t now = ucache_now_ms(c);
	struct ucent *e;

	pthread_rwlock_rdlock(&c->uc_lock);
	for (e = c->uc_by_ino[ucache_hash(ino, 0) & (c->uc_nbuckets - 1)]; e; e = e->ce_ino_next)
		if (e->ce_ino == ino && ucent_live(c, e, now)) {
			atomic_fetch_add(&e->ce_refs, 1);
			break;
		}
	pthread_rwlock_unlock(&c->uc_lock);
	return e;
}

struct ucent *ucache_get_name(struct union_export *ux, uint64_t dir, const char *name)
{
	struct ucache *c = ux->ux_ucache;
	int64_t now = ucache_now_ms(c);
	size_t b = ucache_name_hash(dir, name) & (c->uc_nbuckets - 1);
	struct ucent *e;

	pthread_rwlock_rdlock(&c->uc_lock);
	for (e = c->uc_by_name[b]; e; e = e->ce_name_next)
		if (e->ce_rec.si_parent == dir && !strcmp(e->ce_rec.si_name, name) &&
		    ucent_live(c, e, now)) {
			atomic_fetch_add(&e->ce_refs, 1);
			break;
		}
	pthread_rwlock_unlock(&c->uc_lock);
	return e;
}

/* Adds e (one reference for the caller, one for the tables), replacing older entries. */
static void ucache_insert(struct union_export *ux, struct ucent *e)
{
	struct ucache *c = ux->ux_ucache;
	size_t mask = c->uc_nbuckets - 1;
	size_t bi = ucache_hash(e->ce_ino, 0) & mask;
	size_t bn = ucache_name_hash(e->ce_rec.si_parent, e->ce_rec.si_name) & mask;
	struct ucent *o, *next;

	atomic_init(&e->ce_refs, 2);
	pthread_rwlock_wrlock(&c->uc_lock);
	for (o = c->uc_by_ino[bi]; o; o = next) {
		next = o->ce_ino_next;
		if (o->ce_ino == e->ce_ino)
			ucache_unhash(c, o);
	}
	for (o = c->uc_by_name[bn]; o; o = next) {
		next = o->ce_name_next;
		if (o->ce_rec.si_parent == e->ce_rec.si_parent &&
		    !strcmp(o->ce_rec.si_name, e->ce_rec.si_name))
			ucache_unhash(c, o);
	}
	while (c->uc_n >= c->uc_max && c->uc_oldest)
		ucache_unhash(c, c->uc_oldest);
	e->ce_ino_next = c->uc_by_ino[bi];
	c->uc_by_ino[bi] = e;
	e->ce_name_next = c->uc_by_name[bn];
	c->uc_by_name[bn] = e;
	e->ce_older = c->uc_newest;
	e->ce_newer = NULL;
	if (!e->ce_watched)
		c->uc_nwindow++;
	if (c->uc_newest)
		c->uc_newest->ce_newer = e;
	else
		c->uc_oldest = e;
	c->uc_newest = e;
	e->ce_hashed = true;
	c->uc_n++;
	pthread_rwlock_unlock(&c->uc_lock);
}

static struct ucent *ucent_new(struct ucache *c, uint64_t epoch, uint64_t ino,
			       const struct store_inode *rec)
{
	struct ucent *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ce_epoch = epoch;
	e->ce_born_ms = ucache_now_ms(c);
	e->ce_ino = ino;
	e->ce_rec = *rec;
	uds_init(&e->ce_dirs);
	e->ce_pfd = -1;
	return e;
}

/* Makes e trusted for a while only, giving its watches back. */
static void ucent_unwatch(struct ucent *e)
{
	for (int i = 0; i < e->ce_nwatch; i++)
		uwatch_put(e->ce_watch[i]);
	e->ce_nwatch = 0;
	e->ce_watched = false;
}

/*
 * Watches the copies ds of a directory entry e (none for a file), and makes e watched if
 * up (the entry of the directory it was found in, or NULL for the root) is. Noted now:
 * the caller then reads again whatever ds's watches vouch for.
 */
static void ucent_watch(const struct union_export *ux, struct ucent *e,
			const struct udirset *ds, struct ucent *up, bool root)
{
	if (!uwatch_live() || (!root && (!up || !up->ce_watched)))
		return;
	if (ds && ds->ds_n > 0) {
		e->ce_watch = calloc((size_t)ds->ds_n, sizeof(*e->ce_watch));
		if (!e->ce_watch)
			return;
		for (; e->ce_nwatch < ds->ds_n; e->ce_nwatch++)
			if (!ubr_unchanging(ux, ds->ds_branch[e->ce_nwatch]) &&
			    uwatch_get(ds->ds_fd[e->ce_nwatch], &e->ce_watch[e->ce_nwatch]) < 0) {
				ucent_unwatch(e); /* past the budget: trusted for a while */
				return;
			}
		e->ce_noted = ucent_changes(e);
	}
	e->ce_watched = true;
}

/* What looking a directory up again after watching its copies found (ucent_dir_still). */
enum ucent_still {
	UCENT_CHANGED,           /* other copies: not to be cached */
	UCENT_SAME,
	UCENT_REDIRECTED,        /* the same, merged from outside up's copies: not watchable */
};

/*
 * Whether directory name still has the copies ds in up's copies: looked up again after
 * ds's watches were made, so that a marker made in a copy before (an opaque one) is seen.
 * A redirect sends the merge outside up's copies, where nothing is watched.
 */
static enum ucent_still ucent_dir_still(struct union_export *ux, const struct ucent *up,
					const char *name, const struct udirset *ds,
					uint64_t top_ino)
{
	enum ucent_still still = UCENT_CHANGED;
	struct ufound f;
	int r = ures_find(ux, &up->ce_dirs, name, 0, &f);

	if (r == 0 && f.uf_dir && (uint64_t)f.uf_st.st_ino == top_ino &&
	    f.uf_dirs.ds_n == ds->ds_n &&
	    !memcmp(f.uf_dirs.ds_branch, ds->ds_branch, (size_t)ds->ds_n))
		still = f.uf_redirect ? UCENT_REDIRECTED : UCENT_SAME;
	ufound_release(&f);
	return still;
}

struct ucent *ucache_add_dir(struct union_export *ux, uint64_t epoch, uint64_t ino,
			     const struct store_inode *rec, struct udirset *ds, struct ucent *up)
{
	bool root = ino == STORE_ROOT_INO;
	enum ucent_still still;
	struct ucent *e;

	if (ds->ds_n == 0 || (ds->ds_borrowed && !root))
		return NULL;
	e = ucent_new(ux->ux_ucache, epoch, ino, rec);
	if (!e)
		return NULL;
	/* The root's copies are the branch roots, borrowed: they outlive the cache. */
	e->ce_dirs = *ds;
	if (!ds->ds_borrowed)
		uds_init(ds);
	if (!root && up) {
		e->ce_parent = up;
		atomic_fetch_add(&up->ce_refs, 1);
	}
	ucent_watch(ux, e, &e->ce_dirs, up, root);
	still = e->ce_watched && !root ?
		ucent_dir_still(ux, up, rec->si_name, &e->ce_dirs, rec->si_real_ino) : UCENT_SAME;
	if (still == UCENT_REDIRECTED)
		ucent_unwatch(e);
	if (still == UCENT_CHANGED) {
		/* Changed meanwhile: the next call looks again. */
		atomic_init(&e->ce_refs, 1);
		if (!ds->ds_borrowed) {
			*ds = e->ce_dirs; /* the caller keeps what it found */
			uds_init(&e->ce_dirs);
		}
		ucache_put(e);
		return NULL;
	}
	ucache_insert(ux, e);
	return e;
}

static struct ucent *ucent_new_file(struct ucache *c, uint64_t epoch, uint64_t ino,
				    uint64_t dir, const char *name, uint8_t branch, const struct stat *st)
{
	struct store_inode rec;

	if (strlen(name) > STORE_NAME_MAX)
		return NULL;
	memset(&rec, 0, sizeof(rec));
	rec.si_ino = ino;
	rec.si_parent = dir;
	strcpy(rec.si_name, name);
	rec.si_branch = branch;
	rec.si_real_ino = (uint64_t)st->st_ino;
	rec.si_type = (uint8_t)((st->st_mode & S_IFMT) >> 12);
	return ucent_new(c, epoch, ino, &rec);
}

/*
 * The birth time of the file name in dirfd, if it is still the copy st with identity id
 * (as the map matched it): asked of one O_PATH fd, so both answers are of the same inode.
 */
static int ucent_birth(int dirfd, const char *name, const struct stat *st, uint64_t id,
		       int64_t *birth_ns)
{
	struct stat now;
	uint64_t nid = 0;
	int fd, r = fsio_open_node(dirfd, name, &fd);

	if (r < 0)
		return r;
	r = fsio_ident(fd, "", &nid);
	if (r == 0)
		r = fsio_statat_birth(fd, "", &now, birth_ns);
	if (r == 0 && (now.st_ino != st->st_ino || (id != 0 && nid != id)))
		r = -ESTALE;
	fsio_close(fd);
	return r;
}

void ucache_add_file(struct union_export *ux, uint64_t epoch, uint64_t ino, uint64_t dir,
		     const char *name, uint8_t branch, const struct stat *st, uint64_t id,
		     const struct uobj *parent, int pidx)
{
	struct ucent *e;
	int64_t birth;
	int fd = -1;

	if (ucent_birth(parent->uo_dirs.ds_fd[pidx], name, st, id, &birth) < 0)
		return;
	/* Without an entry of its own the parent's copies are the roots, or must be copied. */
	if (!parent->uo_cent && !parent->uo_dirs.ds_borrowed &&
	    fsio_dup(parent->uo_dirs.ds_fd[pidx], &fd) < 0)
		return;
	e = ucent_new_file(ux->ux_ucache, epoch, ino, dir, name, branch, st);
	if (!e) {
		fsio_close(fd);
		return;
	}
	e->ce_rec.si_real_id = id;
	e->ce_birth_ns = ucache_birth_usable(birth);
	if (parent->uo_cent) {
		e->ce_parent = parent->uo_cent;
		atomic_fetch_add(&e->ce_parent->ce_refs, 1);
		e->ce_pidx = pidx;
	} else {
		e->ce_pfd = fd >= 0 ? fd : parent->uo_dirs.ds_fd[pidx];
		e->ce_pfd_owned = fd >= 0;
	}
	/* The parent's entry was made before the name was looked up in its copies. */
	ucent_watch(ux, e, NULL, parent->uo_cent, false);
	ucache_insert(ux, e);
	ucache_put(e);
}

struct ucent *ucache_add_resolved(struct union_export *ux, uint64_t epoch, struct uobj *o,
				  struct ucent *up)
{
	struct ucent *e;

	e = ucent_new_file(ux->ux_ucache, epoch, o->uo_rec.si_ino, o->uo_rec.si_parent,
			   o->uo_rec.si_name, o->uo_rec.si_branch, &o->uo_st);
	if (!e)
		return NULL;
	e->ce_rec.si_real_id = o->uo_rec.si_real_id;
	e->ce_birth_ns = ucache_birth_usable(o->uo_birth_ns);
	e->ce_pfd = o->uo_pfd;
	e->ce_pfd_owned = true;
	o->uo_pfd = -1;
	if (up) {
		e->ce_parent = up;
		atomic_fetch_add(&up->ce_refs, 1);
	}
	ucent_watch(ux, e, NULL, up, false);
	ucache_insert(ux, e);
	return e;
}

void ucache_forget(struct union_export *ux, struct ucent *e)
{
	struct ucache *c = ux->ux_ucache;

	pthread_rwlock_wrlock(&c->uc_lock);
	ucache_unhash(c, e);
	pthread_rwlock_unlock(&c->uc_lock);
}

bool ucent_is_dir(const struct ucent *e)
{
	return e->ce_dirs.ds_n > 0;
}

/*
 * Stats name in dirfd (st, birth_ns): -ESTALE unless it is still the very copy the file
 * entry e names (device, type, inode number, and birth time or else identity).
 */
static int ucent_check(const struct union_export *ux, const struct ucent *e, int dirfd,
		       const char *name, struct stat *st, int64_t *birth_ns)
{
	uint64_t id;
	int r = fsio_statat_birth(dirfd, name, st, birth_ns);

	if (r == 0 && !ures_same_number(st, ux->ux_dev[e->ce_rec.si_branch],
					e->ce_rec.si_real_ino, e->ce_rec.si_type))
		r = -ESTALE;
	if (r == 0 && e->ce_birth_ns != 0 && *birth_ns != e->ce_birth_ns)
		r = -ESTALE;
	if (r == 0 && e->ce_birth_ns == 0 && e->ce_rec.si_real_id != 0) {
		r = fsio_ident(dirfd, name, &id);
		if (r == 0 && id != 0 && id != e->ce_rec.si_real_id)
			r = -ESTALE;
	}
	return r == -ENOENT ? -ESTALE : r;
}

int ucent_stat(struct union_export *ux, const struct ucent *e, struct stat *st,
	       int64_t *birth_ns)
{
	int r;

	*birth_ns = 0;
	if (ucent_is_dir(e)) {
		r = fsio_stat(e->ce_dirs.ds_fd[0], st);
		return r == 0 && st->st_nlink == 0 ? -ESTALE : r; /* removed by hand */
	}
	return ucent_check(ux, e, ucent_pfd(e), e->ce_rec.si_name, st, birth_ns);
}

void ucent_borrow(const struct ucent *e, struct uobj *o)
{
	o->uo_rec = e->ce_rec;
	if (ucent_is_dir(e)) {
		o->uo_dirs = e->ce_dirs;
		o->uo_dirs.ds_borrowed = true;
	} else {
		o->uo_pfd = ucent_pfd(e);
	}
}

/*
 * LOOKUP answers what an uncached lookup would: that one lstats the name in each copy of
 * the parent down to the one holding it, as the caller, so the kernel checks the caller's
 * search permission in each. A hit therefore asks the kernel about the copies above
 * (uds_may_search) and lstats the name in its own copy of the parent as the caller; any refusal
 * leaves the answer to the uncached path.
 */
int ucache_lookup(struct union_export *ux, const struct udirset *parent, uint64_t dir,
		  const char *name, uint64_t *ino, struct stat *st)
{
	struct ucent *e = ucache_get_name(ux, dir, name);
	int64_t birth;
	int last, r;

	if (!e)
		return -ENOENT;
	last = uds_index_of(parent, e->ce_rec.si_branch);
	r = last < 0 ? -ESTALE : uds_may_search(parent, last);
	if (r == 0)
		r = ucent_check(ux, e, parent->ds_fd[last], name, st, &birth);
	if (r == 0)
		*ino = e->ce_ino;
	else if (r == -ESTALE) /* a refusal says nothing about the entry */
		ucache_forget(ux, e);
	ucache_put(e);
	return r == 0 ? 0 : -ENOENT;
}

void ucache_sweep(struct union_export *ux, bool all)
{
	struct ucache *c = ux->ux_ucache;
	int64_t now = ucache_now_ms(c);
	uint64_t epoch = atomic_load(&c->uc_epoch), total = uwatch_total();
	struct ucent *e, *next;

	pthread_rwlock_wrlock(&c->uc_lock);
	/* Watched entries die only by a change somewhere, or by the epoch. */
	if (all || c->uc_nwindow > 0 || !uwatch_live() || epoch != c->uc_swept_epoch ||
	    total != c->uc_swept_total) {
		for (e = c->uc_oldest; e; e = next) {
			next = e->ce_newer;
			if (all || !ucent_live(c, e, now))
				ucache_unhash(c, e);
		}
		c->uc_swept_epoch = epoch;
		c->uc_swept_total = total;
	}
	pthread_rwlock_unlock(&c->uc_lock);
}

void ucache_forget_ino(struct union_export *ux, uint64_t ino)
{
	struct ucache *c = ux->ux_ucache;
	struct ucent *e, *next;

	pthread_rwlock_wrlock(&c->uc_lock);
	for (e = c->uc_by_ino[ucache_hash(ino, 0) & (c->uc_nbuckets - 1)]; e; e = next) {
		next = e->ce_ino_next;
		if (e->ce_ino == ino)
			ucache_unhash(c, e);
	}
	pthread_rwlock_unlock(&c->uc_lock);
}
