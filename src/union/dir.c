/*
 * Merged directory listings with cookies that survive anything.
 *
 * A listing is every branch copy's names, a higher branch's name winning, internal names
 * dropped, sorted by cookie: a keyed 63-bit hash of the name. A whiteout that wins hides
 * its name, so names deleted through the union or in an upper layer of an image vanish
 * (the opaque and redirect markers already shaped the set of copies listed). Each name is
 * then looked up properly before it is returned, which catches whiteouts that only an
 * attribute tells apart from a file. A cookie therefore means
 * "after this name" in every listing of the directory, before and after entries come
 * and go and across restarts (the key lives in the store).
 *
 * Listings are cached per directory so that paging through N entries costs O(N). A
 * listing stays valid while every branch copy keeps its identity, mtime and ctime, and
 * changes made through the union drop it at once. Changes made behind our back within
 * the file system's timestamp granularity are caught by not trusting a listing made
 * within UDIR_RACY_NS of the directory's last change.
 *
 * A listing also keeps the attributes READDIRPLUS read of its names, while change
 * notification (watch.c) on every copy reports no change there since they were read: a
 * name's attributes change without its directory changing (a write, a chmod). Not kept:
 * those of directories (a change inside one is not reported in its parent) and of files
 * with several names (a change through another name is reported in that name's directory).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsio.h"
#include "uint.h"

#define UDIR_MAX_LISTS 64
#define UDIR_MAX_ENTRIES (2u << 20)
#define UDIR_CHUNK 64
/* Names mapped per write transaction: bounds how long a listing holds the store's lock. */
#define UDIR_FILL 2048
/* de_ino of a name that turned out not to be there (a whiteout, or gone). */
#define UDIR_GONE UINT64_MAX
#define UDIR_RACY_NS 20000000LL
#define UDIR_COOKIE_DOT 1
#define UDIR_COOKIE_DOTDOT 2
#define UDIR_COOKIE_FIRST 3
/* What a name's kept attributes weigh against UDIR_MAX_ENTRIES, in listing entries. */
#define UDIR_ATTR_WEIGHT 2

struct udir_ent {
	uint64_t de_cookie;
	uint64_t de_ino;         /* 0 until known, or UDIR_GONE; written atomically, listings
	                          * are shared */
	size_t de_name;          /* offset into dl_pool */
	uint8_t de_type;         /* S_IFMT >> 12, which is also the d_type */
	uint8_t de_branch;
	bool de_wh;              /* a whiteout of the name, not the name */
	int de_order;            /* index of the copy that listed it; the lowest wins */
};

/* A name's attributes as a listing keeps them: the fields of a stat the replies use. */
struct udir_attr {
	uint64_t da_changes;     /* udir_changes() when read; 0: none kept */
	mode_t da_mode;
	uid_t da_uid;
	gid_t da_gid;
	off_t da_size;
	blkcnt_t da_blocks;
	dev_t da_rdev;
	struct timespec da_atim, da_mtim, da_ctim;
};

struct udir_src {
	uint8_t us_branch;
	ino_t us_ino;
	struct timespec us_mtim;
	struct timespec us_ctim;
};

struct udir_list {
	uint64_t dl_ino;
	int dl_nsrc;
	struct udir_src *dl_src;
	size_t dl_n;
	size_t dl_cap;
	struct udir_ent *dl_ents;
	char *dl_pool;
	size_t dl_pool_len;
	size_t dl_pool_cap;
	struct uwatch **dl_watch; /* one per copy; NULL: no attributes kept */
	pthread_mutex_t dl_attr_lock;
	struct udir_attr *dl_attrs; /* one per entry, made at first use */
	size_t dl_charge;        /* what it counts against UDIR_MAX_ENTRIES */
	int dl_refs;             /* guarded by the cache lock */
	bool dl_cached;          /* on the cache's list */
	bool dl_racy;            /* serve once, then make anew */
	struct udir_list *dl_prev;
	struct udir_list *dl_next;
};

struct udir_cache {
	pthread_mutex_t dc_lock;
	struct udir_list *dc_head;   /* most recently used */
	struct udir_list *dc_tail;
	int dc_count;
	size_t dc_entries;
};

int udir_cache_new(struct udir_cache **out)
{
	struct udir_cache *dc = calloc(1, sizeof(*dc));

	if (!dc)
		return -ENOMEM;
	pthread_mutex_init(&dc->dc_lock, NULL);
	*out = dc;
	return 0;
}

static void udir_list_free(struct udir_list *l)
{
	if (!l)
		return;
	for (int i = 0; l->dl_watch && i < l->dl_nsrc; i++)
		uwatch_put(l->dl_watch[i]);
	free(l->dl_watch);
	pthread_mutex_destroy(&l->dl_attr_lock);
	free(l->dl_attrs);
	free(l->dl_src);
	free(l->dl_ents);
	free(l->dl_pool);
	free(l);
}

/* Takes l off the cache's list (lock held); frees it unless someone still reads it. */
static void udir_unlink(struct udir_cache *dc, struct udir_list *l)
{
	if (l->dl_prev)
		l->dl_prev->dl_next = l->dl_next;
	else
		dc->dc_head = l->dl_next;
	if (l->dl_next)
		l->dl_next->dl_prev = l->dl_prev;
	else
		dc->dc_tail = l->dl_prev;
	l->dl_prev = l->dl_next = NULL;
	l->dl_cached = false;
	dc->dc_count--;
	dc->dc_entries -= l->dl_charge;
	if (l->dl_refs == 0)
		udir_list_free(l);
}

static void udir_push(struct udir_cache *dc, struct udir_list *l)
{
	l->dl_prev = NULL;
	l->dl_next = dc->dc_head;
	if (dc->dc_head)
		dc->dc_head->dl_prev = l;
	else
		dc->dc_tail = l;
	dc->dc_head = l;
	l->dl_cached = true;
	dc->dc_count++;
	dc->dc_entries += l->dl_charge;
}

/* Moves a held listing to the front (lock held). */
static void udir_touch(struct udir_cache *dc, struct udir_list *l)
{
	if (dc->dc_head == l)
		return;
	l->dl_prev->dl_next = l->dl_next;
	if (l->dl_next)
		l->dl_next->dl_prev = l->dl_prev;
	else
		dc->dc_tail = l->dl_prev;
	l->dl_prev = NULL;
	l->dl_next = dc->dc_head;
	dc->dc_head->dl_prev = l;
	dc->dc_head = l;
}

void udir_cache_free(struct udir_cache *dc)
{
	if (!dc)
		return;
	while (dc->dc_head)
		udir_unlink(dc, dc->dc_head);
	pthread_mutex_destroy(&dc->dc_lock);
	free(dc);
}

static struct udir_list *udir_find(struct udir_cache *dc, uint64_t ino)
{
	for (struct udir_list *l = dc->dc_head; l; l = l->dl_next)
		if (l->dl_ino == ino)
			return l;
	return NULL;
}

void udir_invalidate(struct union_export *ux, uint64_t dir)
{
	struct udir_cache *dc = ux->ux_dcache;
	struct udir_list *l;

	ucache_changed(ux);
	pthread_mutex_lock(&dc->dc_lock);
	l = udir_find(dc, dir);
	if (l)
		udir_unlink(dc, l);
	pthread_mutex_unlock(&dc->dc_lock);
}

static void udir_put(struct union_export *ux, struct udir_list *l)
{
	struct udir_cache *dc = ux->ux_dcache;

	pthread_mutex_lock(&dc->dc_lock);
	if (--l->dl_refs == 0 && !l->dl_cached)
		udir_list_free(l);
	pthread_mutex_unlock(&dc->dc_lock);
}

static uint64_t udir_cookie(const struct union_export *ux, const char *name)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t c = 0;

	crypto_shorthash(h, (const unsigned char *)name, strlen(name), ux->ux_cookie_key);
	for (int i = 0; i < 8; i++)
		c |= (uint64_t)h[i] << (8 * i);
	c &= INT64_MAX;
	return c < UDIR_COOKIE_FIRST ? c + UDIR_COOKIE_FIRST : c;
}

/* The identity of each copy now: a listing is valid while this stays the same. */
static int udir_sources(const struct udirset *ds, struct udir_src *src)
{
	struct stat st;
	int r;

	for (int i = 0; i < ds->ds_n; i++) {
		r = fsio_stat(ds->ds_fd[i], &st);
		if (r < 0)
			return r;
		src[i].us_branch = ds->ds_branch[i];
		src[i].us_ino = st.st_ino;
		src[i].us_mtim = st.st_mtim;
		src[i].us_ctim = st.st_ctim;
	}
	return 0;
}

static bool udir_same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static bool udir_valid(const struct udir_list *l, int nsrc, const struct udir_src *src)
{
	if (l->dl_racy || l->dl_nsrc != nsrc)
		return false;
	for (int i = 0; i < nsrc; i++) {
		const struct udir_src *a = &l->dl_src[i], *b = &src[i];

		if (a->us_branch != b->us_branch || a->us_ino != b->us_ino ||
		    !udir_same_time(&a->us_mtim, &b->us_mtim) ||
		    !udir_same_time(&a->us_ctim, &b->us_ctim))
			return false;
	}
	return true;
}

static long long udir_ns(const struct timespec *ts)
{
	return (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/*
 * Whether a change at t may share its timestamp with a later one. Times far in the
 * future (another clock) are not held against the listing, or it would never be trusted.
 */
static bool udir_recent(const struct timespec *now, const struct timespec *t)
{
	long long d = udir_ns(now) - udir_ns(t);

	return d < UDIR_RACY_NS && d > -1000000000LL;
}

static int udir_add(struct udir_list *l, const char *name, uint64_t cookie, uint8_t type,
		    uint8_t branch, int order, bool wh)
{
	size_t len = strlen(name) + 1;
	struct udir_ent *e;

	if (l->dl_n == l->dl_cap) {
		size_t cap = l->dl_cap ? 2 * l->dl_cap : 64;

		e = realloc(l->dl_ents, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		l->dl_ents = e;
		l->dl_cap = cap;
	}
	if (l->dl_pool_len + len > l->dl_pool_cap) {
		size_t cap = l->dl_pool_cap ? 2 * l->dl_pool_cap : 4096;
		char *p;

		while (cap < l->dl_pool_len + len)
			cap *= 2;
		p = realloc(l->dl_pool, cap);
		if (!p)
			return -ENOMEM;
		l->dl_pool = p;
		l->dl_pool_cap = cap;
	}
	memcpy(l->dl_pool + l->dl_pool_len, name, len);
	e = &l->dl_ents[l->dl_n++];
	e->de_cookie = cookie;
	e->de_ino = 0;
	e->de_name = l->dl_pool_len;
	e->de_type = type;
	e->de_branch = branch;
	e->de_wh = wh;
	e->de_order = order;
	l->dl_pool_len += len;
	return 0;
}

static const char *udir_name(const struct udir_list *l, const struct udir_ent *e)
{
	return l->dl_pool + e->de_name;
}

/* qsort has no context argument; the pool is passed through this per-thread pointer. */
static __thread const char *udir_sort_pool;

static int udir_cmp(const void *a, const void *b)
{
	const struct udir_ent *x = a, *y = b;
	int c;

	if (x->de_cookie != y->de_cookie)
		return x->de_cookie < y->de_cookie ? -1 : 1;
	c = strcmp(udir_sort_pool + x->de_name, udir_sort_pool + y->de_name);
	if (c)
		return c;
	if (x->de_order != y->de_order)
		return x->de_order - y->de_order;
	/* In one branch the name itself beats its OCI whiteout, which hides only below. */
	return (int)x->de_wh - (int)y->de_wh;
}

static int udir_read_copy(struct union_export *ux, uint64_t dir, struct udir_list *l, int fd,
			  uint8_t branch, int order)
{
	struct fsio_dir *d;
	const char *name;
	unsigned char type;
	struct stat st;
	int r;

	r = fsio_dir_open(fd, &d);
	if (r < 0)
		return r;
	while ((r = fsio_dir_next(d, &name, &type, NULL)) == 1) {
		bool wh = false;

		if (strlen(name) > STORE_NAME_MAX)
			continue;
		if (uwh_marker(name)) {
			/* ".wh.<name>" hides <name> below; the rest are markers and our own. */
			name += strlen(UWH_PREFIX);
			if (!*name || uwh_marker(name) || uname_hidden(dir, name))
				continue;
			wh = true;
			type = DT_UNKNOWN;
		} else if (uname_hidden(dir, name)) {
			continue;
		} else if (type == DT_UNKNOWN || type == DT_CHR) {
			r = uwh_statat(fd, name, &st);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				break;
			type = (unsigned char)((st.st_mode & S_IFMT) >> 12);
			wh = uwh_is_whiteout(fd, name, &st);
		}
		r = udir_add(l, name, udir_cookie(ux, name), type, branch, order, wh);
		if (r < 0)
			break;
	}
	fsio_dir_close(d);
	return r;
}

static int udir_build(struct union_export *ux, uint64_t dir, const struct udirset *ds,
		      const struct udir_src *src, struct udir_list **out)
{
	struct udir_list *l = calloc(1, sizeof(*l));
	struct timespec now;
	size_t keep = 0;
	int r = 0;

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->dl_attr_lock, NULL);
	l->dl_ino = dir;
	l->dl_nsrc = ds->ds_n;
	l->dl_src = malloc((size_t)(ds->ds_n ? ds->ds_n : 1) * sizeof(*l->dl_src));
	if (!l->dl_src) {
		r = -ENOMEM;
		goto fail;
	}
	memcpy(l->dl_src, src, (size_t)ds->ds_n * sizeof(*src));
	clock_gettime(CLOCK_REALTIME, &now);
	for (int i = 0; i < ds->ds_n; i++) {
		if (udir_recent(&now, &src[i].us_mtim) || udir_recent(&now, &src[i].us_ctim))
			l->dl_racy = true;
		r = udir_read_copy(ux, dir, l, ds->ds_fd[i], ds->ds_branch[i], i);
		if (r < 0)
			goto fail;
	}
	udir_sort_pool = l->dl_pool;
	if (l->dl_n)
		qsort(l->dl_ents, l->dl_n, sizeof(*l->dl_ents), udir_cmp);
	/* Equal names sort together, the highest branch's first: keep only that one. */
	for (size_t i = 0; i < l->dl_n; i++) {
		if (keep && l->dl_ents[keep - 1].de_cookie == l->dl_ents[i].de_cookie &&
		    !strcmp(udir_name(l, &l->dl_ents[keep - 1]), udir_name(l, &l->dl_ents[i])))
			continue;
		l->dl_ents[keep++] = l->dl_ents[i];
	}
	l->dl_n = keep;
	/* ... and if that one is a whiteout, the name is gone. */
	keep = 0;
	for (size_t i = 0; i < l->dl_n; i++)
		if (!l->dl_ents[i].de_wh)
			l->dl_ents[keep++] = l->dl_ents[i];
	l->dl_n = keep;
	l->dl_charge = l->dl_n;
	l->dl_refs = 1;
	*out = l;
	return 0;
fail:
	udir_list_free(l);
	return r;
}

/* Watches every copy of a listing to be kept, so that it can keep its names' attributes. */
static void udir_watch(const struct union_export *ux, struct udir_list *l,
		       const struct udirset *ds)
{
	struct uwatch **w;

	if (l->dl_racy || ds->ds_n == 0)
		return;
	w = calloc((size_t)ds->ds_n, sizeof(*w));
	if (!w)
		return;
	for (int i = 0; i < ds->ds_n; i++) {
		if (!ubr_unchanging(ux, ds->ds_branch[i]) && uwatch_get(ds->ds_fd[i], &w[i]) < 0) {
			while (i-- > 0)
				uwatch_put(w[i]);
			free(w);
			return;
		}
	}
	l->dl_watch = w;
	l->dl_charge = l->dl_n * (1 + UDIR_ATTR_WEIGHT);
}

/* The current listing of dir, held (udir_put it). */
static int udir_get(struct union_export *ux, uint64_t dir, const struct udirset *ds,
		    struct udir_list **out)
{
	struct udir_cache *dc = ux->ux_dcache;
	struct udir_src *src;
	struct udir_list *l, *old;
	int r;

	src = malloc((size_t)(ds->ds_n ? ds->ds_n : 1) * sizeof(*src));
	if (!src)
		return -ENOMEM;
	r = udir_sources(ds, src);
	if (r < 0)
		goto out;
	pthread_mutex_lock(&dc->dc_lock);
	l = udir_find(dc, dir);
	if (l && udir_valid(l, ds->ds_n, src)) {
		l->dl_refs++;
		udir_touch(dc, l);
		pthread_mutex_unlock(&dc->dc_lock);
		*out = l;
		goto out;
	}
	if (l)
		udir_unlink(dc, l);
	pthread_mutex_unlock(&dc->dc_lock);
	r = udir_build(ux, dir, ds, src, &l);
	if (r < 0)
		goto out;
	if (l->dl_n * (1 + UDIR_ATTR_WEIGHT) <= UDIR_MAX_ENTRIES)
		udir_watch(ux, l, ds);
	pthread_mutex_lock(&dc->dc_lock);
	old = udir_find(dc, dir);
	if (old)
		udir_unlink(dc, old);
	if (l->dl_charge <= UDIR_MAX_ENTRIES)
		udir_push(dc, l);
	while (dc->dc_tail && dc->dc_tail != l &&
	       (dc->dc_count > UDIR_MAX_LISTS || dc->dc_entries > UDIR_MAX_ENTRIES))
		udir_unlink(dc, dc->dc_tail);
	pthread_mutex_unlock(&dc->dc_lock);
	*out = l;
out:
	free(src);
	return r;
}

int udir_empty(struct union_export *ux, const struct udirset *ds)
{
	struct udir_list *l = NULL;
	struct udir_src *src;
	struct ufound f;
	int r;

	src = malloc((size_t)(ds->ds_n ? ds->ds_n : 1) * sizeof(*src));
	if (!src)
		return -ENOMEM;
	r = udir_sources(ds, src);
	if (r == 0)
		r = udir_build(ux, 0, ds, src, &l);
	for (size_t i = 0; r == 0 && i < l->dl_n; i++) {
		r = ures_find(ux, ds, udir_name(l, &l->dl_ents[i]), UFIND_STAT, &f);
		ufound_release(&f);
		if (r == 0)
			r = -ENOTEMPTY;
		else if (r == -ENOENT)
			r = 0;
	}
	udir_list_free(l);
	free(src);
	return r;
}

/* What every copy's watch has counted, plus one: kept attributes are good while it stays. */
static uint64_t udir_changes(const struct udir_list *l)
{
	uint64_t n = 1;

	for (int i = 0; i < l->dl_nsrc; i++)
		n += uwatch_changes(l->dl_watch[i]);
	return n;
}

/* Copies the attributes kept for entries [from, from + n) to a; da_changes 0 where none. */
static void udir_attrs_take(struct udir_list *l, size_t from, size_t n, uint64_t changes,
			    struct udir_attr *a)
{
	pthread_mutex_lock(&l->dl_attr_lock);
	for (size_t k = 0; k < n; k++) {
		if (l->dl_attrs && l->dl_attrs[from + k].da_changes == changes)
			a[k] = l->dl_attrs[from + k];
		else
			a[k].da_changes = 0;
	}
	pthread_mutex_unlock(&l->dl_attr_lock);
}

/* The listing's kept attributes, made at first use (NULL short of memory). Lock held. */
static struct udir_attr *udir_attrs_room(struct udir_list *l)
{
	if (!l->dl_attrs)
		l->dl_attrs = calloc(l->dl_n, sizeof(*l->dl_attrs));
	return l->dl_attrs;
}

/* Keeps the attributes read for entries [from, from + n) where fresh says so. */
static void udir_attrs_keep(struct udir_list *l, size_t from, size_t n,
			    const struct udir_attr *a, const bool *fresh)
{
	pthread_mutex_lock(&l->dl_attr_lock);
	for (size_t k = 0; udir_attrs_room(l) && k < n; k++)
		if (fresh[k])
			l->dl_attrs[from + k] = a[k];
	pthread_mutex_unlock(&l->dl_attr_lock);
}

static void udir_attr_set(struct udir_attr *a, const struct stat *st, uint64_t changes)
{
	a->da_changes = changes;
	a->da_mode = st->st_mode;
	a->da_uid = st->st_uid;
	a->da_gid = st->st_gid;
	a->da_size = st->st_size;
	a->da_blocks = st->st_blocks;
	a->da_rdev = st->st_rdev;
	a->da_atim = st->st_atim;
	a->da_mtim = st->st_mtim;
	a->da_ctim = st->st_ctim;
}

static void udir_attr_get(const struct udir_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = a->da_mode;
	st->st_nlink = 1;
	st->st_uid = a->da_uid;
	st->st_gid = a->da_gid;
	st->st_size = a->da_size;
	st->st_blocks = a->da_blocks;
	st->st_rdev = a->da_rdev;
	st->st_atim = a->da_atim;
	st->st_mtim = a->da_mtim;
	st->st_ctim = a->da_ctim;
}

/* What udir_fill hands to the store in one go. */
struct udir_batch {
	const char *db_names[UDIR_FILL];
	size_t db_idx[UDIR_FILL];
	int db_pidx[UDIR_FILL];
	struct stat db_st[UDIR_FILL];
	uint64_t db_inos[UDIR_FILL];
};

/* What may be kept of what udir_fill_names read (the attributes its names will be listed with). */
static bool udir_keepable(const struct stat *st)
{
	return !S_ISDIR(st->st_mode) && st->st_nlink == 1;
}

/*
 * Keeps the attributes the store was told of, read in the copy each name is listed from:
 * the first listing then reads each name once.
 */
static void udir_attrs_keep_batch(struct udir_list *l, const struct udir_batch *b, size_t n,
				  uint64_t changes)
{
	pthread_mutex_lock(&l->dl_attr_lock);
	for (size_t k = 0; udir_attrs_room(l) && k < n; k++)
		if (b->db_pidx[k] >= 0 && b->db_inos[k] && udir_keepable(&b->db_st[k]))
			udir_attr_set(&l->dl_attrs[b->db_idx[k]], &b->db_st[k], changes);
	pthread_mutex_unlock(&l->dl_attr_lock);
}

struct udir_fresh {
	const struct udir_list *uf_list;
	const struct udirset *uf_ds;
};

/*
 * Whether the copies are still as when the listing was made: then every name is still
 * where the listing (and the lstat after it) found it.
 */
static bool udir_still(void *ctx)
{
	struct udir_fresh *fr = ctx;
	struct udir_src src[UNION_MAX_BRANCHES];

	return udir_sources(fr->uf_ds, src) == 0 && udir_valid(fr->uf_list, fr->uf_ds->ds_n, src);
}

/*
 * Finds inos for the entries [from, to) that have none yet. The listing says which copy
 * wins, so one lstat there usually tells the store all it needs; names without a record
 * get theirs in one write transaction for the whole range.
 */
static int udir_fill_names(struct union_export *ux, uint64_t dir, const struct udirset *ds,
			   struct udir_list *l, size_t from, size_t to, uint64_t changes)
{
	struct udir_batch *b;
	size_t n = 0;
	int r;

	b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = from; i < to && n < UDIR_FILL; i++) {
		struct udir_ent *e = &l->dl_ents[i];
		int pidx;

		if (__atomic_load_n(&e->de_ino, __ATOMIC_ACQUIRE))
			continue;
		b->db_idx[n] = i;
		b->db_names[n] = udir_name(l, e);
		pidx = uds_index_of(ds, e->de_branch);
		if (pidx >= 0 && (fsio_statat(ds->ds_fd[pidx], b->db_names[n], &b->db_st[n]) < 0 ||
				  b->db_st[n].st_dev != ux->ux_dev[e->de_branch]))
			pidx = -1; /* moved or a mount point: the store's lookup decides */
		if (pidx >= 0 && uwh_is_whiteout(ds->ds_fd[pidx], b->db_names[n], &b->db_st[n])) {
			/* One an attribute makes: it hides the name. */
			__atomic_store_n(&e->de_ino, UDIR_GONE, __ATOMIC_RELEASE);
			continue;
		}
		b->db_pidx[n++] = pidx;
	}
	if (n) {
		struct udir_fresh fr = { .uf_list = l, .uf_ds = ds };
		struct ures_hints h = { .uh_pidx = b->db_pidx, .uh_st = b->db_st,
					.uh_fresh = udir_still, .uh_ctx = &fr };

		r = ures_map_batch(ux, dir, ds, n, b->db_names, &h, b->db_inos);
	} else {
		r = 0;
	}
	for (size_t k = 0; r == 0 && k < n; k++)
		__atomic_store_n(&l->dl_ents[b->db_idx[k]].de_ino,
				 b->db_inos[k] ? b->db_inos[k] : UDIR_GONE, __ATOMIC_RELEASE);
	if (r == 0 && changes)
		udir_attrs_keep_batch(l, b, n, changes);
	free(b);
	return r;
}

/*
 * udir_fill_names for a reader who may read the directory: one who may not search it
 * still gets the inos of its names (d_ino on a local file system), found with the
 * server's rights.
 */
static int udir_fill(struct union_export *ux, uint64_t dir, const struct uobj *d,
		     struct udir_list *l, size_t from, size_t to, uint64_t changes)
{
	bool search = uds_may_search(&d->uo_dirs, d->uo_dirs.ds_n) == 0;
	struct fsio_ids ids;
	int r;

	if (!search)
		fsio_become_root(&ids);
	r = udir_fill_names(ux, dir, &d->uo_dirs, l, from, to, changes);
	if (!search)
		fsio_restore(&ids);
	return r;
}

/* Whether an entry of [from, to) has no ino yet. */
static bool udir_unmapped(const struct udir_list *l, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (!__atomic_load_n(&l->dl_ents[i].de_ino, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

static size_t udir_search(const struct udir_list *l, uint64_t cookie)
{
	size_t lo = 0, hi = l->dl_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->dl_ents[mid].de_cookie <= cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* "." and "..": 1 when fn asked to stop. */
static int udir_dots(struct union_export *ux, const struct uobj *d, uint64_t cookie,
		     bool with_attrs, union_dirent_fn fn, void *ctx, int *r)
{
	struct union_dirent de = { .ud_type = S_IFDIR };
	struct stat st;

	*r = 0;
	if (cookie < UDIR_COOKIE_DOT) {
		de.ud_name = ".";
		de.ud_ino = d->uo_rec.si_ino;
		de.ud_cookie = UDIR_COOKIE_DOT;
		st = d->uo_st;
		ures_fix_stat(ux, &st, de.ud_ino);
		de.ud_st = with_attrs ? &st : NULL;
		if (fn(ctx, &de))
			return 1;
	}
	if (cookie < UDIR_COOKIE_DOTDOT) {
		de.ud_name = "..";
		de.ud_ino = d->uo_rec.si_ino == STORE_ROOT_INO ? STORE_ROOT_INO :
								 d->uo_rec.si_parent;
		de.ud_cookie = UDIR_COOKIE_DOTDOT;
		de.ud_st = NULL;
		if (with_attrs) {
			*r = union_getattr(ux, de.ud_ino, &st);
			if (*r < 0)
				return 1;
			de.ud_st = &st;
		}
		if (fn(ctx, &de))
			return 1;
	}
	return 0;
}

/*
 * The attributes of entry e, object ino: from a when it holds them for changes (nonzero),
 * else read; those read that may be kept go into a, and *fresh says so.
 */
static int udir_entry_attrs(struct union_export *ux, const struct uobj *d,
			    const struct udir_list *l, const struct udir_ent *e, uint64_t ino,
			    uint64_t changes, struct udir_attr *a, bool *fresh, struct stat *st)
{
	int fd, r;

	if (changes && a->da_changes == changes) {
		udir_attr_get(a, st);
		ures_fix_stat(ux, st, ino);
		return 0;
	}
	fd = uds_fd_of(&d->uo_dirs, e->de_branch);
	r = fd < 0 ? -ENOENT : fsio_statat(fd, udir_name(l, e), st);
	if (r < 0)
		return r;
	/* A lower name of a file with several may have been linked up. */
	if (e->de_branch != 0 && !S_ISDIR(st->st_mode) && st->st_nlink > 1)
		return union_getattr(ux, ino, st);
	if (changes && udir_keepable(st)) {
		udir_attr_set(a, st, changes);
		*fresh = true;
	}
	ures_fix_stat(ux, st, ino);
	return 0;
}

int union_readdir(struct union_export *ux, uint64_t dir, uint64_t cookie, bool with_attrs,
		  union_dirent_fn fn, void *ctx, bool *eof)
{
	struct udir_attr kept[UDIR_CHUNK];
	bool fresh[UDIR_CHUNK];
	struct udir_list *l = NULL;
	uint64_t changes = 0;    /* 0: attributes are read anew */
	bool stop = false;
	struct uobj d;
	size_t i;
	int r;

	*eof = false;
	r = ures_resolve_cached(ux, dir, &d);
	if (r == 0 && !S_ISDIR(d.uo_st.st_mode))
		r = -ENOTDIR;
	/*
	 * A listing (cached or not) shows every copy: the caller must be allowed to read each,
	 * as the kernel decides when the uncached path opens them (knfsd: read permission).
	 */
	if (r == 0)
		r = uds_may_list(&d.uo_dirs);
	if (r < 0)
		goto out;
	if (udir_dots(ux, &d, cookie, with_attrs, fn, ctx, &r))
		goto out;
	r = udir_get(ux, dir, &d.uo_dirs, &l);
	if (r < 0)
		goto out;
	/* Kept attributes are for callers who could read them anew: stat needs search. */
	if (with_attrs && l->dl_watch && uds_may_search(&d.uo_dirs, d.uo_dirs.ds_n) == 0) {
		uwatch_drain();
		changes = udir_changes(l);
	}
	i = udir_search(l, cookie);
	while (i < l->dl_n && !stop) {
		size_t from = i;
		size_t end = i + UDIR_CHUNK < l->dl_n ? i + UDIR_CHUNK : l->dl_n;
		/* Ahead of this reply, so that the next ones find their inos: one commit for
		 * many. A listing made anew for each call only gets what it needs now. */
		size_t ahead = l->dl_racy ? UDIR_CHUNK : UDIR_FILL;

		if (udir_unmapped(l, i, end)) {
			r = udir_fill(ux, dir, &d, l, i,
				      i + ahead < l->dl_n ? i + ahead : l->dl_n, changes);
			if (r < 0)
				goto out;
		}
		if (changes)
			udir_attrs_take(l, from, end - from, changes, kept);
		memset(fresh, 0, sizeof(fresh));
		for (; i < end && !stop; i++) {
			const struct udir_ent *e = &l->dl_ents[i];
			struct union_dirent de = { 0 };
			struct stat st;

			de.ud_ino = __atomic_load_n(&e->de_ino, __ATOMIC_ACQUIRE);
			if (!de.ud_ino || de.ud_ino == UDIR_GONE)
				continue; /* vanished since the listing was made */
			de.ud_name = udir_name(l, e);
			de.ud_cookie = e->de_cookie;
			de.ud_type = (mode_t)e->de_type << 12;
			if (with_attrs) {
				r = udir_entry_attrs(ux, &d, l, e, de.ud_ino, changes,
						     &kept[i - from], &fresh[i - from], &st);
				/* Short of descriptors is no reason to leave a name out. */
				if (fsio_short_of_resources(r))
					break;
				if (r < 0) {
					r = 0;
					continue; /* gone since the listing was made */
				}
				de.ud_st = &st;
				de.ud_type = st.st_mode & S_IFMT;
			}
			stop = fn(ctx, &de);
		}
		if (changes)
			udir_attrs_keep(l, from, end - from, kept, fresh);
		if (r < 0)
			goto out;
	}
	*eof = !stop;
out:
	if (l)
		udir_put(ux, l);
	uobj_release(&d);
	return r;
}
