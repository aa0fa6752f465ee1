/*
 * Hard links across copy-up: overlayfs's index, in our own form.
 *
 * A lower file with several names is one union object. When it is copied up through one
 * name the others must show the upper copy too, so copy-up also links the copy into the
 * index, <work>/index/<branch>-<lower ino in hex>, and each other lower name is linked
 * to it the next time it is looked up ("link-up"); the upper ends up holding the whole
 * alias set, as overlayfs's would. The index link also keeps the copy alive while lower
 * names still wait for their link-up.
 *
 * Until every name is linked up the upper copy has fewer links than the union has names.
 * The number of lower names still waiting is kept in an xattr of the copy
 * (trusted.unionnfsd.pending, user.* without privilege), and the union nlink is
 *     upper nlink - 1 (the index link) + pending.
 * A lower name removed before its link-up lowers pending. The correction of every indexed
 * object is kept in memory, by union ino, for attributes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

#define UHL_DIR "index"

static const char *const uhl_xattr[] = { "trusted.unionnfsd.pending", "user.unionnfsd.pending" };

struct uhl_ent {
	uint64_t he_ino;         /* union ino */
	uint64_t he_real;        /* st_ino of the upper copy */
	uint8_t he_branch;       /* the lower inode it came from */
	uint64_t he_lower;
	int64_t he_pending;
};

struct uhl_table {
	pthread_mutex_t ht_lock;
	size_t ht_n;
	size_t ht_cap;
	struct uhl_ent *ht_ents; /* sorted by he_ino */
	int ht_dirfd;            /* O_PATH of the index directory, -1 until there is one */
};

static void uhl_key(char *buf, size_t len, uint8_t b, uint64_t lower)
{
	snprintf(buf, len, "%u-%" PRIx64, (unsigned)b, lower);
}

static int uhl_get_pending(int dirfd, const char *name, int64_t *pending)
{
	char buf[32];
	size_t len;
	int r = -ENODATA;

	for (size_t i = 0; i < 2 && r == -ENODATA; i++)
		r = fsio_getxattr(dirfd, name, uhl_xattr[i], buf, sizeof(buf) - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	*pending = strtoll(buf, NULL, 10);
	if (*pending < 0)
		*pending = 0;
	return 0;
}

/* As root: the xattr lives on a file its owner may not even read. */
static int uhl_set_pending(int dirfd, const char *name, int64_t pending)
{
	struct fsio_ids ids;
	char buf[32];
	int r = -EPERM;

	snprintf(buf, sizeof(buf), "%" PRId64, pending < 0 ? 0 : pending);
	fsio_become_root(&ids);
	for (size_t i = 0; i < 2 && (r == -EPERM || r == -ENOTSUP); i++)
		r = fsio_setxattr(dirfd, name, uhl_xattr[i], buf, strlen(buf));
	fsio_restore(&ids);
	return r;
}

static size_t uhl_pos(const struct uhl_table *ht, uint64_t ino)
{
	size_t lo = 0, hi = ht->ht_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ht->ht_ents[mid].he_ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Adds or replaces the entry of e->he_ino (lock held). */
static int uhl_put(struct uhl_table *ht, const struct uhl_ent *e)
{
	size_t i = uhl_pos(ht, e->he_ino);

	if (i < ht->ht_n && ht->ht_ents[i].he_ino == e->he_ino) {
		ht->ht_ents[i] = *e;
		return 0;
	}
	if (ht->ht_n == ht->ht_cap) {
		size_t cap = ht->ht_cap ? 2 * ht->ht_cap : 16;
		struct uhl_ent *n = realloc(ht->ht_ents, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ht->ht_ents = n;
		ht->ht_cap = cap;
	}
	memmove(&ht->ht_ents[i + 1], &ht->ht_ents[i], (ht->ht_n - i) * sizeof(*e));
	ht->ht_ents[i] = *e;
	ht->ht_n++;
	return 0;
}

/* The entry of an upper copy (lock held), or NULL. */
static struct uhl_ent *uhl_by_real(struct uhl_table *ht, uint64_t real)
{
	for (size_t i = 0; i < ht->ht_n; i++)
		if (ht->ht_ents[i].he_real == real)
			return &ht->ht_ents[i];
	return NULL;
}

/*
 * Whether the index entry name's copy says it was copied from lower inode (b, lower) as
 * one of this export's objects: a copy-up cut short after its rename into place left it,
 * and resolving the object (ures_resolve) moves the record to the copy.
 */
static bool uhl_has_origin(struct union_export *ux, const char *name, uint8_t b, uint64_t lower)
{
	struct ucopy_origin org;

	return ucopy_origin_get(ux->ux_hl->ht_dirfd, name, &org) == 0 &&
	       org.co_export == ux->ux_id && org.co_branch == b && org.co_real_ino == lower;
}

/* One index entry found at start-up: remembered, or removed if the map never took it. */
static int uhl_load_one(struct union_export *ux, struct store_txn *t, const char *name,
			bool *later)
{
	struct uhl_table *ht = ux->ux_hl;
	struct uhl_ent e = { 0 };
	unsigned b;
	char *end;
	struct stat st;
	int r;

	if (!strncmp(name, "tmp.", 4) && !ux->ux_ro) {
		fsio_unlink(ht->ht_dirfd, name, false); /* an index link cut short */
		return 0;
	}
	if (sscanf(name, "%u-", &b) != 1 || b >= (unsigned)ux->ux_nbranches || !strchr(name, '-'))
		return 0;
	e.he_branch = (uint8_t)b;
	e.he_lower = strtoull(strchr(name, '-') + 1, &end, 16);
	if (*end)
		return 0;
	r = fsio_statat(ht->ht_dirfd, name, &st);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	e.he_real = (uint64_t)st.st_ino;
	r = store_find_real(t, ux->ux_id, 0, e.he_real, &e.he_ino);
	if (r == -ENOENT && later && !ux->ux_ro && uhl_has_origin(ux, name, e.he_branch, e.he_lower)) {
		*later = true; /* once the map's transaction is over */
		return 0;
	}
	if (r == -ENOENT) {
		/* A copy-up that never finished: the next one starts afresh. */
		if (!ux->ux_ro)
			fsio_unlink(ht->ht_dirfd, name, false);
		return 0;
	}
	if (r == 0 && uhl_get_pending(ht->ht_dirfd, name, &e.he_pending) < 0)
		e.he_pending = 0;
	if (r == 0)
		r = uhl_put(ht, &e);
	return r;
}

/*
 * The entries uhl_open put off: each copy's object is resolved (which moves its record to
 * the copy if the copy took its name), then the entry is loaded, or removed as before.
 */
static int uhl_load_later(struct union_export *ux, const uint64_t *copies, size_t n)
{
	struct uhl_table *ht = ux->ux_hl;
	struct ucopy_origin org;
	struct store_txn *t;
	struct fsio_dir *d = NULL;
	const char *name;
	unsigned char type;
	struct stat st;
	struct uobj o;
	int r;

	r = fsio_dir_open(ht->ht_dirfd, &d);
	while (r == 0 && (r = fsio_dir_next(d, &name, &type, NULL)) == 1) {
		bool mine = false;

		r = fsio_statat(ht->ht_dirfd, name, &st);
		for (size_t i = 0; r == 0 && i < n; i++)
			mine |= copies[i] == (uint64_t)st.st_ino;
		if (r < 0 || !mine || ucopy_origin_get(ht->ht_dirfd, name, &org) < 0) {
			r = r == -ENOENT ? 0 : r;
			continue;
		}
		if (ures_resolve(ux, NULL, org.co_ino, 0, &o) == 0)
			log_info("export %s: ino %" PRIu64 ", a file with several names whose copy-up "
				 "a stop cut short: %s", ux->ux_name, org.co_ino,
				 o.uo_rec.si_branch == 0 ? "the copy is taken" : "the copy is dropped");
		uobj_release(&o);
		r = store_begin(ux->ux_store, false, &t);
		if (r == 0) {
			r = uhl_load_one(ux, t, name, NULL);
			store_abort(t);
		}
	}
	fsio_dir_close(d);
	return r < 0 ? r : 0;
}

int uhl_open(struct union_export *ux)
{
	uint64_t *later = NULL;
	size_t nlater = 0;
	struct uhl_table *ht = calloc(1, sizeof(*ht));
	struct store_txn *t = NULL;
	struct fsio_dir *d = NULL;
	struct fsio_ids ids;
	const char *name;
	unsigned char type;
	int r, wfd = -1;

	if (!ht)
		return -ENOMEM;
	pthread_mutex_init(&ht->ht_lock, NULL);
	ht->ht_dirfd = -1;
	ux->ux_hl = ht;
	fsio_become_root(&ids);
	r = fsio_open_dir(ux->ux_rootfd[0], UNION_WORK_NAME, &wfd);
	if (r == 0)
		r = fsio_open_dir(wfd, UHL_DIR, &ht->ht_dirfd);
	fsio_close(wfd);
	if (r == -ENOENT || r == -ENOTDIR) {
		r = 0; /* nothing was ever indexed */
		goto out;
	}
	if (r == 0)
		r = store_begin(ux->ux_store, false, &t);
	if (r == 0)
		r = fsio_dir_open(ht->ht_dirfd, &d);
	while (r == 0 && (r = fsio_dir_next(d, &name, &type, NULL)) == 1) {
		bool put_off = false;
		struct stat st;

		r = uhl_load_one(ux, t, name, &put_off);
		if (r == 0 && put_off && fsio_statat(ht->ht_dirfd, name, &st) == 0) {
			uint64_t *n = realloc(later, (nlater + 1) * sizeof(*later));

			if (!n) {
				r = -ENOMEM;
				break;
			}
			later = n;
			later[nlater++] = (uint64_t)st.st_ino;
		}
	}
out:
	fsio_dir_close(d);
	if (t)
		store_abort(t);
	if (r >= 0 && nlater)
		r = uhl_load_later(ux, later, nlater);
	free(later);
	fsio_restore(&ids);
	return r < 0 ? r : 0;
}

void uhl_close(struct union_export *ux)
{
	struct uhl_table *ht = ux->ux_hl;

	if (!ht)
		return;
	fsio_close(ht->ht_dirfd);
	pthread_mutex_destroy(&ht->ht_lock);
	free(ht->ht_ents);
	free(ht);
	ux->ux_hl = NULL;
}

void uhl_fix_nlink(const struct union_export *ux, struct stat *st, uint64_t ino)
{
	struct uhl_table *ht = ux->ux_hl;
	size_t i;

	/* An indexed copy has its index name too: a single name is never indexed. */
	if (!ht || S_ISDIR(st->st_mode) || st->st_nlink < 2)
		return;
	pthread_mutex_lock(&ht->ht_lock);
	i = uhl_pos(ht, ino);
	/* Only the upper copy's own attributes: a lower name's are its own business. */
	if (i < ht->ht_n && ht->ht_ents[i].he_ino == ino &&
	    ht->ht_ents[i].he_real == (uint64_t)st->st_ino) {
		int64_t n = (int64_t)st->st_nlink - 1 + ht->ht_ents[i].he_pending;

		st->st_nlink = (nlink_t)(n < 0 ? 0 : n);
	}
	pthread_mutex_unlock(&ht->ht_lock);
}

/* The index directory, made on first use (as root, inside the work directory). */
static int uhl_dir(struct union_export *ux, bool create, int *fd)
{
	struct uhl_table *ht = ux->ux_hl;
	struct fsio_ids ids;
	int r = 0, wfd;

	pthread_mutex_lock(&ht->ht_lock);
	if (ht->ht_dirfd >= 0 || !create)
		goto out;
	pthread_mutex_unlock(&ht->ht_lock);
	r = ucopy_workdir(ux, &wfd);
	if (r < 0)
		return r;
	pthread_mutex_lock(&ht->ht_lock);
	if (ht->ht_dirfd >= 0)
		goto out;
	fsio_become_root(&ids);
	/*
	 * Searchable (not listable) by all: an object whose names all went while lower
	 * names wait is reached here with the client's identity. The work directory around
	 * it keeps everyone else out.
	 */
	r = fsio_mkdir(wfd, UHL_DIR, 0711);
	if (r == 0)
		r = fsio_fsync_dir(wfd);
	if (r == 0 || r == -EEXIST)
		r = fsio_open_dir(wfd, UHL_DIR, &ht->ht_dirfd);
	fsio_restore(&ids);
out:
	*fd = ht->ht_dirfd;
	pthread_mutex_unlock(&ht->ht_lock);
	if (r == 0 && *fd < 0)
		r = -ENOENT;
	return r;
}

int uhl_find(struct union_export *ux, uint8_t b, uint64_t lower, struct stat *st)
{
	char key[40];
	int r, fd;

	r = uhl_dir(ux, false, &fd);
	if (r < 0)
		return r;
	uhl_key(key, sizeof(key), b, lower);
	return fsio_statat(fd, key, st);
}

int uhl_prepare(int dirfd, const char *name, nlink_t lower_nlink)
{
	return uhl_set_pending(dirfd, name, (int64_t)lower_nlink - 1);
}

int uhl_index(struct union_export *ux, int dirfd, const char *name, uint8_t b,
	      uint64_t lower)
{
	struct fsio_ids ids;
	char key[40], tmp[64];
	int r, fd;

	r = uhl_dir(ux, true, &fd);
	if (r < 0)
		return r;
	uhl_key(key, sizeof(key), b, lower);
	r = fsio_random_name("tmp.", tmp, sizeof(tmp));
	if (r < 0)
		return r;
	/* Linked under a temporary name, then renamed over any leftover of a crash. */
	fsio_become_root(&ids);
	r = fsio_link(dirfd, name, fd, tmp);
	if (r == 0) {
		r = fsio_rename(fd, tmp, fd, key, false);
		if (r < 0)
			fsio_unlink(fd, tmp, false);
	}
	if (r == 0)
		r = fsio_fsync_dir(fd);
	fsio_restore(&ids);
	return r;
}

void uhl_unindex(struct union_export *ux, uint8_t b, uint64_t lower)
{
	struct fsio_ids ids;
	char key[40];
	int fd;

	if (uhl_dir(ux, false, &fd) < 0)
		return;
	uhl_key(key, sizeof(key), b, lower);
	fsio_become_root(&ids);
	fsio_unlink(fd, key, false);
	fsio_restore(&ids);
}

int uhl_indexed(struct union_export *ux, uint64_t ino, uint64_t real, uint8_t b,
		uint64_t lower, nlink_t lower_nlink)
{
	struct uhl_table *ht = ux->ux_hl;
	struct uhl_ent e = { .he_ino = ino, .he_real = real, .he_branch = b, .he_lower = lower,
			     .he_pending = (int64_t)lower_nlink - 1 };
	int r;

	pthread_mutex_lock(&ht->ht_lock);
	r = uhl_put(ht, &e);
	pthread_mutex_unlock(&ht->ht_lock);
	return r;
}

/* Changes the pending count of the indexed copy real by d, on disk and in memory. */
static int uhl_pending_add(struct union_export *ux, uint64_t real, int64_t d)
{
	struct uhl_table *ht = ux->ux_hl;
	struct uhl_ent *e;
	char key[40];
	int64_t now;
	int r = 0;

	pthread_mutex_lock(&ht->ht_lock);
	e = uhl_by_real(ht, real);
	if (e) {
		now = e->he_pending + d < 0 ? 0 : e->he_pending + d;
		uhl_key(key, sizeof(key), e->he_branch, e->he_lower);
		r = uhl_set_pending(ht->ht_dirfd, key, now);
		if (r == 0)
			e->he_pending = now;
	}
	pthread_mutex_unlock(&ht->ht_lock);
	return r;
}

int uhl_link_up(struct union_export *ux, uint8_t b, uint64_t lower, int dirfd,
		const char *name)
{
	struct fsio_ids ids;
	struct stat st;
	char key[40];
	int r, fd;

	r = uhl_dir(ux, false, &fd);
	if (r < 0)
		return r;
	uhl_key(key, sizeof(key), b, lower);
	fsio_become_root(&ids);
	r = fsio_statat(fd, key, &st);
	if (r == 0)
		r = fsio_link(fd, key, dirfd, name);
	fsio_restore(&ids);
	if (r == 0)
		r = uhl_pending_add(ux, (uint64_t)st.st_ino, -1);
	return r;
}

int uhl_open_copy(struct union_export *ux, uint64_t ino, uint64_t real, int *dirfd,
		  char *name)
{
	struct uhl_table *ht = ux->ux_hl;
	size_t i;
	int r = -ENOENT;

	pthread_mutex_lock(&ht->ht_lock);
	i = uhl_pos(ht, ino);
	if (i < ht->ht_n && ht->ht_ents[i].he_ino == ino && ht->ht_ents[i].he_real == real &&
	    ht->ht_dirfd >= 0) {
		uhl_key(name, STORE_NAME_MAX + 1, ht->ht_ents[i].he_branch, ht->ht_ents[i].he_lower);
		r = fsio_dup(ht->ht_dirfd, dirfd);
	}
	pthread_mutex_unlock(&ht->ht_lock);
	return r;
}

nlink_t uhl_nlink(struct union_export *ux, uint64_t ino, const struct stat *st)
{
	struct stat tmp = *st;

	uhl_fix_nlink(ux, &tmp, ino);
	return tmp.st_nlink;
}

void uhl_forget(struct union_export *ux, uint64_t ino)
{
	struct uhl_table *ht = ux->ux_hl;
	struct uhl_ent e;
	size_t i;

	pthread_mutex_lock(&ht->ht_lock);
	i = uhl_pos(ht, ino);
	if (i >= ht->ht_n || ht->ht_ents[i].he_ino != ino) {
		pthread_mutex_unlock(&ht->ht_lock);
		return;
	}
	e = ht->ht_ents[i];
	memmove(&ht->ht_ents[i], &ht->ht_ents[i + 1], (ht->ht_n - i - 1) * sizeof(e));
	ht->ht_n--;
	pthread_mutex_unlock(&ht->ht_lock);
	uhl_unindex(ux, e.he_branch, e.he_lower);
}
