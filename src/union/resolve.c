/*
 * From union inos to branch objects and back.
 *
 * A record names its object by (parent ino, name); resolving walks those names down from
 * the branch roots, union style, one O_NOFOLLOW step at a time. A non-directory must
 * still be the very copy the record names (branch, real ino and the file system's
 * identity of it, which tells a reused inode number apart), or the ino is stale; a
 * directory is whatever directory sits at its path, and the record follows it.
 *
 * A copy-up names in its copy the object it copies (the origin, as overlayfs does), so a
 * record still naming the lower copy after a crash between the copy's rename into place
 * and the map's update finds its object again in the upper copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "log.h"
#include "stats.h"
#include "uint.h"

void uobj_init(struct uobj *o)
{
	memset(&o->uo_rec, 0, sizeof(o->uo_rec));
	uds_init(&o->uo_dirs);
	o->uo_pfd = o->uo_fd = o->uo_upfd = -1;
	o->uo_origin = NULL;
	o->uo_cent = NULL;
	o->uo_birth_ns = 0;
}

void uobj_release(struct uobj *o)
{
	if (o->uo_cent) {
		o->uo_pfd = -1; /* the entry's, like a borrowed uo_dirs */
		ucache_put(o->uo_cent);
		o->uo_cent = NULL;
	}
	uds_release(&o->uo_dirs);
	fsio_close(o->uo_pfd);
	fsio_close(o->uo_fd);
	fsio_close(o->uo_upfd);
	o->uo_pfd = o->uo_fd = o->uo_upfd = -1;
	free(o->uo_origin);
	o->uo_origin = NULL;
}

/*
 * The origin of a child directory: where its lower copies are, given its parent's. A
 * redirect on the child's upper copy replaces the path ("/a/b") or the last name ("b").
 */
static int ures_origin_step(char *path, const char *name, const char *redirect)
{
	size_t len = strlen(path);

	if (redirect && redirect[0] == '/') {
		if (strlen(redirect) >= PATH_MAX)
			return -ENAMETOOLONG;
		strcpy(path, redirect);
		return 0;
	}
	if (redirect)
		name = redirect;
	if (len + 1 + strlen(name) >= PATH_MAX)
		return -ENAMETOOLONG;
	path[len] = '/';
	strcpy(path + len + 1, name);
	return 0;
}

/* Store reads go through the caller's write transaction, or a read one of our own. */
static int ures_txn(struct union_export *ux, struct store_txn *wtxn, struct store_txn **t)
{
	if (wtxn) {
		*t = wtxn;
		return 0;
	}
	return store_begin(ux->ux_store, false, t);
}

static void ures_txn_end(struct store_txn *wtxn, struct store_txn *t)
{
	if (t && t != wtxn)
		store_abort(t);
}

/* The chain of records from ino up to (not including) the root. */
struct uchain {
	int uc_n;
	int uc_cap;
	struct store_inode *uc_recs;     /* [0] the object, [n-1] a child of the root */
};

static void uchain_free(struct uchain *c)
{
	free(c->uc_recs);
	c->uc_recs = NULL;
	c->uc_n = c->uc_cap = 0;
}

static int uchain_load(struct union_export *ux, struct store_txn *wtxn, uint64_t ino,
		       struct store_inode *rec, struct uchain *c)
{
	struct store_txn *t = NULL;
	struct store_inode cur;
	int r;

	memset(c, 0, sizeof(*c));
	if (ino == STORE_ROOT_INO) {
		*rec = ux->ux_root_rec;
		return 0;
	}
	r = ures_txn(ux, wtxn, &t);
	if (r < 0)
		return r;
	r = store_get(t, ux->ux_id, ino, rec);
	if (r < 0)
		goto out;
	cur = *rec;
	while (cur.si_ino != STORE_ROOT_INO) {
		if (c->uc_n == UNION_MAX_DEPTH || cur.si_parent == cur.si_ino) {
			r = -ESTALE; /* a cycle in the map */
			goto out;
		}
		if (c->uc_n == c->uc_cap) {
			int cap = c->uc_cap ? 2 * c->uc_cap : 16;
			struct store_inode *n = realloc(c->uc_recs, (size_t)cap * sizeof(*n));

			if (!n) {
				r = -ENOMEM;
				goto out;
			}
			c->uc_recs = n;
			c->uc_cap = cap;
		}
		c->uc_recs[c->uc_n++] = cur;
		r = store_get(t, ux->ux_id, cur.si_parent, &cur);
		if (r < 0)
			goto out;
	}
out:
	ures_txn_end(wtxn, t);
	if (r == -ENOENT)
		r = stats_stale(-ESTALE, STATS_STALE_NO_RECORD);
	if (r < 0)
		uchain_free(c);
	return r;
}

static bool ures_is_dir_rec(const struct store_inode *rec)
{
	return rec->si_type == (S_IFDIR >> 12);
}


void ures_fix_stat(const struct union_export *ux, struct stat *st, uint64_t ino)
{
	uhl_fix_nlink(ux, st, ino);
	umc_fix_blocks(st);
	st->st_ino = (ino_t)ino;
	st->st_dev = (dev_t)uexp_fsid(ux);
}

/*
 * Whether a found object is the copy a non-directory record names, by inode number (its
 * identity is checked with ures_same_id, which needs one more system call).
 */
static bool ures_same_file(const struct store_inode *rec, const struct ufound *f)
{
	return !f->uf_dir && !ures_is_dir_rec(rec) && rec->si_branch == f->uf_branch &&
	       rec->si_real_ino == (uint64_t)f->uf_st.st_ino && rec->si_type == ures_type(&f->uf_st);
}

/*
 * Whether a copy whose inode number a record names, with identity id, is the record's
 * object and not another one that got the number since. Unknown on either side (a record
 * from an older map, a file system without identities): the number is all there is.
 */
static bool ures_same_id(const struct store_inode *rec, uint64_t id)
{
	return rec->si_real_id == 0 || id == 0 || rec->si_real_id == id;
}

/* The identity of what f found as name in parent (0 for directories, which need none). */
static int ures_found_id(const struct udirset *parent, const char *name,
			 const struct ufound *f, uint64_t *id)
{
	*id = 0;
	if (f->uf_dir || f->uf_pidx < 0 || f->uf_pidx >= parent->ds_n)
		return 0;
	return fsio_ident(parent->ds_fd[f->uf_pidx], name, id);
}

/* Whether f, found as name in parent, is exactly the copy rec names (identity included). */
static int ures_found_is(const struct store_inode *rec, const struct udirset *parent,
			 const char *name, const struct ufound *f, uint64_t *id)
{
	int r;

	*id = 0;
	if (!ures_same_file(rec, f))
		return 0;
	r = ures_found_id(parent, name, f, id);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	return ures_same_id(rec, *id);
}

/* Ends t if this call began it (t is not the caller's wtxn): commits on success. */
static int ures_end_own(struct store_txn *t, struct store_txn *wtxn, int r)
{
	if (t == wtxn)
		return r;
	if (r == 0)
		return store_commit(t);
	store_abort(t);
	return r;
}

/*
 * A record from before identities were kept learns its copy's on its first match. In
 * wtxn, or a write transaction of its own.
 */
static int ures_fill_id(struct union_export *ux, struct store_txn *wtxn,
			const struct store_inode *seen, uint64_t id)
{
	struct store_txn *t = wtxn;
	struct store_inode rec;
	int r;

	if (id == 0 || seen->si_real_id != 0)
		return 0;
	if (!t) {
		r = store_begin(ux->ux_store, true, &t);
		if (r < 0)
			return r;
	}
	r = store_get(t, ux->ux_id, seen->si_ino, &rec);
	if (r == 0 && rec.si_real_id == 0 && rec.si_branch == seen->si_branch &&
	    rec.si_real_ino == seen->si_real_ino) {
		rec.si_real_id = id;
		r = store_update(t, ux->ux_id, &rec);
	}
	r = ures_end_own(t, wtxn, r);
	return r == -ENOENT ? 0 : r;
}

/*
 * Whether the upper copy name in dirfd (attributes st) was copied up from the lower copy
 * rec names: its origin names the same union ino and lower identity. A copy-up cut short
 * between the copy's rename into place and the map's update leaves exactly that.
 */
static bool ures_origin_is(struct union_export *ux, const struct udirset *parent, int pidx,
			   const char *name, const struct stat *st, const struct store_inode *rec)
{
	int dirfd = parent->ds_fd[pidx];
	struct ucopy_origin org;

	if (ures_is_dir_rec(rec) || rec->si_branch == 0 || S_ISDIR(st->st_mode) ||
	    ures_type(st) != rec->si_type)
		return false;
	/* A metacopy carries no origin: the lower copy holding its data is that record's. */
	if (ucopy_origin_get(dirfd, name, &org) < 0)
		return umc_made_of(ux, parent, pidx, name, st, rec);
	return org.co_export == ux->ux_id && org.co_ino == rec->si_ino &&
	       org.co_branch == rec->si_branch && org.co_real_ino == rec->si_real_ino &&
	       (org.co_real_id == 0 || rec->si_real_id == 0 || org.co_real_id == rec->si_real_id);
}

/* Moves rec (in the map too) to its upper copy name in dirfd, attributes st. */
static int ures_adopt(struct union_export *ux, struct store_txn *wtxn, struct store_inode *rec,
		      int dirfd, const char *name, const struct stat *st)
{
	struct store_txn *t = wtxn;
	struct store_inode cur;
	uint64_t id;
	int r;

	r = fsio_ident(dirfd, name, &id);
	if (r < 0)
		return r == -ENOENT ? -ESTALE : r;
	if (!t) {
		r = store_begin(ux->ux_store, true, &t);
		if (r < 0)
			return r;
	}
	r = store_get(t, ux->ux_id, rec->si_ino, &cur);
	if (r == 0 && cur.si_branch == 0 && cur.si_real_ino == (uint64_t)st->st_ino) {
		*rec = cur; /* the copy-up finished meanwhile */
		if (t != wtxn)
			store_abort(t);
		return 0;
	}
	if (r == 0 && (cur.si_branch != rec->si_branch || cur.si_real_ino != rec->si_real_ino))
		r = -ESTALE; /* someone else moved it meanwhile: look again */
	if (r == 0) {
		cur.si_branch = 0;
		cur.si_real_ino = (uint64_t)st->st_ino;
		cur.si_real_id = id;
		r = store_update(t, ux->ux_id, &cur);
	}
	r = ures_end_own(t, wtxn, r);
	ucache_changed(ux);
	if (r == 0) {
		log_info("export %s: ino %" PRIu64 " found again in its upper copy %s (a copy-up "
			 "was cut short)", ux->ux_name, rec->si_ino, name);
		*rec = cur;
	}
	return r == -ENOENT ? -ESTALE : r;
}

/* Points a directory record at its current topmost copy. */
static int ures_rekey(struct union_export *ux, struct store_txn *wtxn,
		      const struct store_inode *seen, const struct ufound *f)
{
	struct store_txn *t = wtxn;
	struct store_inode rec;
	int r;

	if (!t) {
		r = store_begin(ux->ux_store, true, &t);
		if (r < 0)
			return r;
	}
	r = store_get(t, ux->ux_id, seen->si_ino, &rec);
	if (r == 0 && rec.si_parent == seen->si_parent && !strcmp(rec.si_name, seen->si_name) &&
	    (rec.si_branch != f->uf_branch || rec.si_real_ino != (uint64_t)f->uf_st.st_ino)) {
		rec.si_branch = f->uf_branch;
		rec.si_real_ino = (uint64_t)f->uf_st.st_ino;
		r = store_update(t, ux->ux_id, &rec);
	}
	r = ures_end_own(t, wtxn, r);
	ucache_changed(ux);
	return r == -ENOENT ? -ESTALE : r;
}

/*
 * Walks one directory level down: set becomes the copies of name; opath follows. With
 * URES_UPPER the directory is copied up on the way (with ures_final_dir, the only calls
 * from resolve into copy-up, both ucopy_dir; copyup.c says why that recursion ends).
 */
static int ures_step(struct union_export *ux, struct udirset *set, uint64_t pino,
		     const char *name, int flags, char *opath)
{
	struct ufound f;
	int r;

	r = ures_find(ux, set, name, 0, &f);
	if (r == -ENOENT || (r == 0 && !f.uf_dir))
		r = -ESTALE;
	if (r == 0 && opath)
		r = ures_origin_step(opath, name, f.uf_redirect);
	if (r == 0 && (flags & URES_UPPER) && f.uf_dirs.ds_branch[0] != 0)
		r = ucopy_dir(ux, pino, set, name, &f);
	if (r < 0) {
		ufound_release(&f);
		return r;
	}
	uds_release(set);
	*set = f.uf_dirs;
	uds_init(&f.uf_dirs);
	ufound_release(&f);
	return 0;
}

/* The last step for a directory: whatever directory is at its path; the record follows. */
static int ures_final_dir(struct union_export *ux, struct store_txn *wtxn, int flags,
			  const struct udirset *set, struct ufound *f, struct uobj *o)
{
	int r = 0;

	if (!f->uf_dir)
		return -ESTALE;
	if ((flags & URES_UPPER) && f->uf_branch != 0)
		r = ucopy_dir(ux, o->uo_rec.si_parent, set, o->uo_rec.si_name, f);
	if (r == 0 && (o->uo_rec.si_branch != f->uf_branch ||
		       o->uo_rec.si_real_ino != (uint64_t)f->uf_st.st_ino)) {
		r = ures_rekey(ux, wtxn, &o->uo_rec, f);
		o->uo_rec.si_branch = f->uf_branch;
		o->uo_rec.si_real_ino = (uint64_t)f->uf_st.st_ino;
	}
	if (r == 0)
		r = fsio_stat(f->uf_dirs.ds_fd[0], &o->uo_st);
	if (r == 0 && o->uo_origin)
		r = ures_origin_step(o->uo_origin, o->uo_rec.si_name, f->uf_redirect);
	if (r == 0) {
		o->uo_dirs = f->uf_dirs;
		uds_init(&f->uf_dirs);
	}
	return r;
}

/* The last step for anything else: it must still be the very copy the record names. */
static int ures_final_file(struct union_export *ux, struct store_txn *wtxn,
			   struct udirset *set, const struct ufound *f, struct uobj *o)
{
	uint64_t id = 0;
	int r;

	if (!ures_same_file(&o->uo_rec, f) && f->uf_branch == 0 &&
	    ures_origin_is(ux, set, f->uf_pidx, o->uo_rec.si_name, &f->uf_st, &o->uo_rec)) {
		r = ures_adopt(ux, wtxn, &o->uo_rec, set->ds_fd[f->uf_pidx], o->uo_rec.si_name,
			       &f->uf_st);
		if (r < 0)
			return r;
	}
	if (!ures_same_file(&o->uo_rec, f))
		return -ESTALE;
	r = o->uo_pfd = uds_take(set, f->uf_pidx);
	if (r >= 0 && f->uf_branch != 0 && set->ds_n > 0 && set->ds_branch[0] == 0)
		r = o->uo_upfd = uds_take(set, 0);
	if (r >= 0)
		r = fsio_open_node(o->uo_pfd, o->uo_rec.si_name, &o->uo_fd);
	if (r >= 0)
		r = fsio_statat_birth(o->uo_fd, "", &o->uo_st, &o->uo_birth_ns);
	/* Asked of the open fd: it holds the inode, so its number cannot pass to another. */
	if (r >= 0)
		r = fsio_ident(o->uo_fd, "", &id);
	/* Replaced between the look and the open, or the number reused: the copy is gone. */
	if (r == -ENOENT || (r >= 0 && ((uint64_t)o->uo_st.st_ino != o->uo_rec.si_real_ino ||
					!ures_same_id(&o->uo_rec, id))))
		r = -ESTALE;
	if (r >= 0 && o->uo_rec.si_real_id == 0) {
		r = ures_fill_id(ux, wtxn, &o->uo_rec, id);
		o->uo_rec.si_real_id = id;
	}
	return r < 0 ? r : 0;
}

/*
 * An indexed file whose names are all gone while lower names still wait for their link-up
 * lives on in the index: it is reached there.
 */
static int ures_from_index(struct union_export *ux, struct uobj *o)
{
	char name[STORE_NAME_MAX + 1];
	uint64_t id;
	int r;

	fsio_close(o->uo_pfd);
	fsio_close(o->uo_fd);
	fsio_close(o->uo_upfd);
	o->uo_pfd = o->uo_fd = o->uo_upfd = -1;
	r = uhl_open_copy(ux, o->uo_rec.si_ino, o->uo_rec.si_real_ino, &o->uo_pfd, name);
	if (r == 0)
		r = fsio_open_node(o->uo_pfd, name, &o->uo_fd);
	if (r == 0)
		r = fsio_statat_birth(o->uo_fd, "", &o->uo_st, &o->uo_birth_ns);
	if (r == 0)
		r = fsio_ident(o->uo_fd, "", &id);
	if (r == 0 && ((uint64_t)o->uo_st.st_ino != o->uo_rec.si_real_ino ||
		       !ures_same_id(&o->uo_rec, id)))
		r = -ESTALE;
	if (r == 0)
		strcpy(o->uo_rec.si_name, name);
	/* A shortage of descriptors says nothing about the copy: not stale, try again later. */
	if (r < 0 && !fsio_short_of_resources(r))
		r = -ESTALE;
	return r;
}

static int ures_resolve_once(struct union_export *ux, struct store_txn *wtxn, uint64_t ino,
			     int flags, struct uobj *o)
{
	struct udirset set;
	struct uchain c;
	struct ufound f;
	int r;

	uobj_init(o);
	ufound_init(&f);
	if (ux->ux_ro)
		flags &= ~URES_UPPER;
	r = uchain_load(ux, wtxn, ino, &o->uo_rec, &c);
	if (r < 0)
		return r;
	if (flags & URES_ORIGIN) {
		o->uo_origin = calloc(1, PATH_MAX);
		if (!o->uo_origin) {
			uchain_free(&c);
			return -ENOMEM;
		}
	}
	uds_root(ux, &set);
	if (c.uc_n == 0) {
		r = fsio_stat(ux->ux_rootfd[0], &o->uo_st);
		o->uo_dirs = set;
		uds_init(&set);
		goto out;
	}
	for (int k = c.uc_n - 1; k >= 1 && r == 0; k--)
		r = ures_step(ux, &set, c.uc_recs[k].si_parent, c.uc_recs[k].si_name, flags,
			      o->uo_origin);
	if (r == 0)
		r = ures_find(ux, &set, o->uo_rec.si_name, 0, &f);
	if (r == -ENOENT)
		r = -ESTALE;
	if (r < 0)
		goto out;
	if (ures_is_dir_rec(&o->uo_rec))
		r = ures_final_dir(ux, wtxn, flags, &set, &f, o);
	else
		r = ures_final_file(ux, wtxn, &set, &f, o);
out:
	if (r == -ESTALE && c.uc_n > 0 && !ures_is_dir_rec(&o->uo_rec) && o->uo_rec.si_branch == 0)
		r = ures_from_index(ux, o);
	/* Removed behind our back: what is kept open of it must not hold its blocks. */
	if (r == -ESTALE && c.uc_n > 0 && !ures_is_dir_rec(&o->uo_rec) &&
	    o->uo_rec.si_branch < ux->ux_nbranches)
		ufd_forget_dead(ux->ux_dev[o->uo_rec.si_branch], (ino_t)o->uo_rec.si_real_ino);
	ufound_release(&f);
	uds_release(&set);
	if (r < 0)
		uobj_release(o);
	uchain_free(&c);
	return r;
}

int ures_resolve(struct union_export *ux, struct store_txn *wtxn, uint64_t ino, int flags,
		 struct uobj *o)
{
	struct store_txn *t;
	int r = ures_resolve_once(ux, wtxn, ino, flags, o);

	/*
	 * A copy-up renames its copy into the upper and then, in the same write transaction,
	 * moves the record to it: a reader in between sees a copy the record does not name yet.
	 * Waiting for the writer (taking and dropping the write lock) and looking again tells
	 * that apart from an object that is really gone.
	 */
	if (r == -ESTALE && wtxn == NULL && store_begin(ux->ux_store, true, &t) == 0) {
		store_abort(t);
		r = ures_resolve_once(ux, NULL, ino, flags, o);
	}
	return r;
}

/*
 * Keeps what a resolution found in the cache; o then borrows from the entry. up: the
 * live entry of its parent directory, taken before the resolution looked in its copies.
 */
static void ures_remember(struct union_export *ux, uint64_t epoch, uint64_t ino, struct uobj *o,
			  struct ucent *up)
{
	struct ucent *e;

	if (ures_is_dir_rec(&o->uo_rec)) {
		e = ucache_add_dir(ux, epoch, ino, &o->uo_rec, &o->uo_dirs, up);
		if (e) {
			uds_release(&o->uo_dirs); /* the root's borrowed copies */
			ucent_borrow(e, o);
			o->uo_cent = e;
		}
	} else if (o->uo_st.st_nlink == 1) {
		/* Files with more names may have been reached through the hard-link index. */
		e = ucache_add_resolved(ux, epoch, o, up);
		if (e) {
			o->uo_pfd = ucent_pfd(e);
			o->uo_cent = e;
		}
	}
}

/*
 * The last step of a resolution from the copies of the object's parent (set): what
 * ures_resolve_once does after its walk, short of what only a walk from the roots settles
 * (an ino found through the hard-link index, a copy-up in flight), for which the caller
 * resolves from the roots on -ESTALE.
 */
static int ures_resolve_in(struct union_export *ux, struct udirset *set, struct uobj *o)
{
	struct ufound f;
	int r = ures_find(ux, set, o->uo_rec.si_name, 0, &f);

	if (r == -ENOENT)
		r = -ESTALE;
	if (r == 0 && ures_is_dir_rec(&o->uo_rec))
		r = ures_final_dir(ux, NULL, 0, set, &f, o);
	else if (r == 0)
		r = ures_final_file(ux, NULL, set, &f, o);
	ufound_release(&f);
	if (r < 0)
		uobj_release(o);
	return r;
}

/*
 * Parents are resolved through the cache first, so that an object's entry can be watched
 * (cache.c) and a miss costs one step from its parent's copies. Deeper than this below
 * the first cached parent, the object is resolved from the roots and trusted for a while.
 */
#define URES_CHAIN_MAX 32

static int ures_resolve_cached_at(struct union_export *ux, uint64_t ino, int depth,
				  struct uobj *o)
{
	uint64_t epoch = ucache_epoch(ux);
	struct ucent *e = ucache_get(ux, ino), *up = NULL;
	struct store_txn *t;
	struct uobj parent;
	int r;

	uobj_init(o);
	if (e) {
		r = ucent_stat(ux, e, &o->uo_st, &o->uo_birth_ns);
		if (r == 0) {
			ucent_borrow(e, o);
			o->uo_cent = e;
			return 0;
		}
		ucache_forget(ux, e);
		ucache_put(e);
	}
	uobj_init(&parent);
	r = -ESTALE;
	if (ino != STORE_ROOT_INO && depth < URES_CHAIN_MAX && uwatch_live() &&
	    store_begin(ux->ux_store, false, &t) == 0) {
		r = store_get(t, ux->ux_id, ino, &o->uo_rec);
		store_abort(t);
		if (r == 0)
			r = ures_resolve_cached_at(ux, o->uo_rec.si_parent, depth + 1, &parent);
		if (r == 0 && parent.uo_cent && S_ISDIR(parent.uo_st.st_mode)) {
			up = parent.uo_cent;
			r = ures_resolve_in(ux, &parent.uo_dirs, o);
		} else {
			r = -ESTALE;
		}
	}
	if (r < 0)
		r = ures_resolve(ux, NULL, ino, 0, o);
	if (r == 0)
		ures_remember(ux, epoch, ino, o, up);
	uobj_release(&parent);
	return r;
}

int ures_resolve_cached(struct union_export *ux, uint64_t ino, struct uobj *o)
{
	return ures_resolve_cached_at(ux, ino, 0, o);
}

/*
 * Whether a file's record is matched by its name in its parent directory reached through
 * the cache, as a cache hit of the file itself is checked (ucent_stat): one lookup in the
 * parent's copies, not a walk from the root.
 */
static bool ures_check_by_parent(struct union_export *ux, const struct store_inode *rec)
{
	struct uobj parent;
	struct ufound f;
	uint64_t id;
	bool match = false;

	ufound_init(&f);
	if (ures_resolve_cached(ux, rec->si_parent, &parent) == 0 && S_ISDIR(parent.uo_st.st_mode) &&
	    ures_find(ux, &parent.uo_dirs, rec->si_name, UFIND_STAT, &f) == 0)
		match = ures_found_is(rec, &parent.uo_dirs, rec->si_name, &f, &id) == 1 &&
			f.uf_st.st_nlink > 0;
	ufound_release(&f);
	uobj_release(&parent);
	return match;
}

int ures_check_record(struct union_export *ux, uint64_t ino)
{
	struct store_txn *t;
	struct store_inode rec;
	struct stat st;
	int r = store_begin(ux->ux_store, false, &t);

	if (r == 0) {
		r = store_get(t, ux->ux_id, ino, &rec);
		store_abort(t);
	}
	if (r == 0 && ino != STORE_ROOT_INO && !ures_is_dir_rec(&rec) && rec.si_real_id != 0 &&
	    ures_check_by_parent(ux, &rec))
		return 0;
	/* Anything else, and every doubt, is settled as a client's GETATTR settles it. */
	return union_getattr(ux, ino, &st);
}

/* Whether a record still names a live object at its own (parent, name). */
static int ures_alive(struct union_export *ux, struct store_txn *wtxn, uint64_t ino)
{
	struct uobj o;
	int r = ures_resolve(ux, wtxn, ino, 0, &o);

	uobj_release(&o);
	return r;
}

int union_forget_stale(struct union_export *ux, uint64_t ino)
{
	struct store_txn *t;
	int r;

	if (ino == STORE_ROOT_INO)
		return 0; /* the root is the export itself: a missing root is a branch problem */
	r = store_begin(ux->ux_store, true, &t);
	if (r < 0)
		return r;
	/* Checked again in the write transaction: no change can slip in between. */
	r = ures_alive(ux, t, ino);
	if (r != -ESTALE) {
		store_abort(t);
		return r;
	}
	r = store_delete(t, ux->ux_id, ino);
	if (r == -ENOENT) {
		store_abort(t);
		return 0;
	}
	if (r < 0) {
		store_abort(t);
		return r;
	}
	r = store_commit(t);
	ucache_changed(ux);
	return r < 0 ? r : 1;
}

/* Whether the record of ino matches what f found, without changing anything. */
static bool ures_matches(const struct store_inode *rec, const struct ufound *f)
{
	if (f->uf_dir)
		return ures_is_dir_rec(rec);
	return ures_same_file(rec, f);
}

/* The fast path: a names entry whose record already names exactly what was found. */
static int ures_map_read(struct union_export *ux, uint64_t pino, const struct udirset *parent,
			 const char *name, struct ufound *f, uint64_t *ino)
{
	struct store_txn *t;
	struct store_inode rec;
	bool primary;
	uint64_t id;
	int r;

	r = store_begin(ux->ux_store, false, &t);
	if (r < 0)
		return r;
	r = store_find_name(t, ux->ux_id, pino, name, ino);
	if (r == 0)
		r = store_get(t, ux->ux_id, *ino, &rec);
	store_abort(t);
	if (r < 0)
		return r;
	if (!ures_matches(&rec, f))
		return -ENOENT;
	if (!f->uf_dir) {
		/* Not the same object, or one whose identity is still to be recorded. */
		r = ures_found_is(&rec, parent, name, f, &id);
		if (r <= 0 || (rec.si_real_id == 0 && id != 0))
			return r < 0 ? r : -ENOENT;
		f->uf_id = id;
	}
	if (f->uf_dir && (rec.si_branch != f->uf_branch ||
			  rec.si_real_ino != (uint64_t)f->uf_st.st_ino))
		return -ENOENT; /* needs re-keying */
	primary = rec.si_parent == pino && !strcmp(rec.si_name, name);
	/* Another alias of a hard link: fine while the record's own name still holds. */
	if (!primary && ures_alive(ux, NULL, *ino) < 0)
		return -ENOENT;
	return 0;
}

/*
 * A lower name of a file with several names, whose copy-up (through another name) put
 * it in the index: the name is linked to the upper copy here and now, and f describes
 * that link. -ENOENT when the file was never copied up.
 */
static int ures_link_up(struct union_export *ux, struct store_txn *t, uint64_t pino,
			const struct udirset *parent, const char *name, struct ufound *f)
{
	struct stat ist;
	struct uobj d;
	uint64_t ino;
	int r, upfd = -1;

	uobj_init(&d);
	r = uhl_find(ux, f->uf_branch, (uint64_t)f->uf_st.st_ino, &ist);
	if (r == 0) /* a copy the map took, not the leftover of a copy-up cut short */
		r = store_find_real(t, ux->ux_id, 0, (uint64_t)ist.st_ino, &ino);
	if (r < 0)
		return r;
	if (parent->ds_n > 0 && parent->ds_branch[0] == 0) {
		upfd = parent->ds_fd[0];
	} else {
		r = ures_resolve(ux, t, pino, URES_UPPER, &d);
		if (r == 0 && d.uo_dirs.ds_branch[0] != 0)
			r = -EROFS;
		if (r == 0)
			upfd = d.uo_dirs.ds_fd[0];
	}
	if (r == 0)
		r = uhl_link_up(ux, f->uf_branch, (uint64_t)f->uf_st.st_ino, upfd, name);
	if (r == 0)
		r = fsio_fsync_dir(upfd);
	if (r == 0)
		r = fsio_statat(upfd, name, &f->uf_st);
	if (r == 0)
		r = fsio_ident(upfd, name, &f->uf_id);
	if (r == 0) {
		f->uf_branch = 0;
		f->uf_below = true;
		udir_invalidate(ux, pino);
	}
	uobj_release(&d);
	return r;
}

/* The slow path, inside a write transaction, on a fresh look at the name. */
static int ures_map_write(struct union_export *ux, struct store_txn *t, uint64_t pino,
			  const struct udirset *parent, const char *name, struct ufound *f,
			  uint64_t *ino, bool *moved)
{
	struct store_inode rec;
	uint64_t other, fid;
	bool linked = false;
	int r;

	/* Writable branches below the top too: a file there may be copied up to move it. */
	if (!f->uf_dir && f->uf_branch != 0 && f->uf_st.st_nlink > 1 && !ux->ux_ro) {
		r = ures_link_up(ux, t, pino, parent, name, f);
		*moved = true;
		if (r < 0 && r != -ENOENT)
			return r;
		linked = r == 0;
	}
	/* A name linked up just now is in an upper copy the parent set may not hold. */
	fid = f->uf_id;
	r = linked ? 0 : ures_found_id(parent, name, f, &fid);
	if (r < 0)
		return r;
	f->uf_id = fid;

	r = store_find_name(t, ux->ux_id, pino, name, ino);
	if (r == 0)
		r = store_get(t, ux->ux_id, *ino, &rec);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && !ures_matches(&rec, f) && !f->uf_dir && f->uf_branch == 0 &&
	    f->uf_pidx >= 0 && f->uf_pidx < parent->ds_n &&
	    ures_origin_is(ux, parent, f->uf_pidx, name, &f->uf_st, &rec)) {
		*moved = true;
		r = ures_adopt(ux, t, &rec, parent->ds_fd[f->uf_pidx], name, &f->uf_st);
		if (r < 0)
			return r;
	}
	if (r == 0 && ures_matches(&rec, f) && (f->uf_dir || ures_same_id(&rec, fid))) {
		bool primary = rec.si_parent == pino && !strcmp(rec.si_name, name);

		if (primary) {
			if (rec.si_branch == f->uf_branch &&
			    rec.si_real_ino == (uint64_t)f->uf_st.st_ino &&
			    (rec.si_real_id != 0 || fid == 0))
				return 0;
			/* A directory's topmost copy changed, or a file's identity is learnt. */
			rec.si_branch = f->uf_branch;
			rec.si_real_ino = (uint64_t)f->uf_st.st_ino;
			rec.si_real_id = fid;
			*moved = true;
			return store_update(t, ux->ux_id, &rec);
		}
		if (!f->uf_dir) {
			/* A hard link's other name; if the record's own name died, take this one. */
			r = ures_alive(ux, t, *ino);
			if (r != -ESTALE)
				return r;
			rec.si_parent = pino;
			strcpy(rec.si_name, name);
			*moved = true;
			return store_update(t, ux->ux_id, &rec);
		}
	}
	/* A record for this very copy under another name: a hard link, or a moved object. */
	r = store_find_real(t, ux->ux_id, f->uf_branch, (uint64_t)f->uf_st.st_ino, &other);
	if (r == 0)
		r = store_get(t, ux->ux_id, other, &rec);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && ures_matches(&rec, f) && rec.si_branch == f->uf_branch &&
	    rec.si_real_ino == (uint64_t)f->uf_st.st_ino &&
	    (f->uf_dir || ures_same_id(&rec, fid))) {
		r = ures_alive(ux, t, other);
		if (r == 0 && !f->uf_dir) {
			*ino = other;
			return store_add_name(t, ux->ux_id, pino, name, other);
		}
		if (r == -ESTALE) {
			/* Its old name is gone: the object moved here, and keeps its ino. */
			*ino = other;
			rec.si_parent = pino;
			strcpy(rec.si_name, name);
			*moved = true;
			return store_update(t, ux->ux_id, &rec);
		}
		if (r < 0)
			return r;
	}
	memset(&rec, 0, sizeof(rec));
	rec.si_parent = pino;
	strcpy(rec.si_name, name);
	rec.si_type = ures_type(&f->uf_st);
	rec.si_branch = f->uf_branch;
	rec.si_real_ino = (uint64_t)f->uf_st.st_ino;
	rec.si_real_id = fid;
	r = store_insert(t, ux->ux_id, &rec);
	if (r == 0)
		*ino = rec.si_ino;
	return r;
}

int ures_map(struct union_export *ux, struct store_txn *wtxn, uint64_t pino,
	     const struct udirset *parent, const char *name, int flags, struct ufound *f,
	     uint64_t *ino)
{
	struct store_txn *t = wtxn;
	bool moved = false;
	int r;

	r = ures_find(ux, parent, name, flags, f);
	if (r < 0)
		return r;
	if (!wtxn) {
		r = ures_map_read(ux, pino, parent, name, f, ino);
		if (r != -ENOENT)
			goto out;
		ufound_release(f);
		r = store_begin(ux->ux_store, true, &t);
		if (r < 0)
			return r;
		/* Look again under the write lock: namespace changes hold it too. */
		r = ures_find(ux, parent, name, flags, f);
		if (r < 0)
			goto out;
	}
	r = ures_map_write(ux, t, pino, parent, name, f, ino, &moved);
out:
	if (t != wtxn) {
		r = ures_end_own(t, wtxn, r);
		/* A new name changes nothing cached; a record that moved does. */
		if (moved)
			ucache_changed(ux);
	}
	if (r < 0)
		ufound_release(f);
	return r;
}

int union_getattr(struct union_export *ux, uint64_t ino, struct stat *st)
{
	struct uobj o;
	int r;

	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0) {
		umc_learn(ux, &o);
		*st = o.uo_st;
		ures_fix_stat(ux, st, ino);
	}
	uobj_release(&o);
	return r;
}

/* "." and "..": like knfsd, the caller must be allowed to search the directory itself. */
static int ures_lookup_dot(struct union_export *ux, const struct uobj *d, uint64_t dir,
			   const char *name, uint64_t *ino, struct stat *st)
{
	int r = uds_may_search(&d->uo_dirs, 1);

	if (r < 0)
		return r;
	if (!strcmp(name, ".")) {
		*ino = dir;
		*st = d->uo_st;
		ures_fix_stat(ux, st, dir);
		return 0;
	}
	*ino = dir == STORE_ROOT_INO ? STORE_ROOT_INO : d->uo_rec.si_parent;
	return union_getattr(ux, *ino, st);
}

/*
 * Every other name needs search permission in each copy of the directory down to the one
 * holding it (all of them for a name that is not there): the uncached lookup asks the
 * kernel there as the caller, and the cache (ucache_lookup) asks it before it answers.
 */
int union_lookup_in(struct union_export *ux, uint64_t dir, const char *name, uint64_t *ino,
		    struct stat *st, struct stat *dirst)
{
	struct ufound f;
	struct uobj d;
	uint64_t epoch;
	int r;

	if (dirst)
		dirst->st_ino = 0;
	r = uname_check(name);
	if (r < 0)
		return r;
	epoch = ucache_epoch(ux);
	r = ures_resolve_cached(ux, dir, &d);
	if (r < 0)
		goto out;
	if (dirst) {
		*dirst = d.uo_st;
		ures_fix_stat(ux, dirst, dir);
	}
	if (!S_ISDIR(d.uo_st.st_mode)) {
		r = -ENOTDIR;
		goto out;
	}
	if (uname_dot(name)) {
		r = ures_lookup_dot(ux, &d, dir, name, ino, st);
		goto out;
	}
	if (uname_hidden(dir, name)) {
		r = uds_may_search(&d.uo_dirs, d.uo_dirs.ds_n);
		if (r == 0)
			r = -ENOENT;
		goto out;
	}
	if (ucache_lookup(ux, &d.uo_dirs, dir, name, ino, st) == 0) {
		ures_fix_stat(ux, st, *ino);
		goto out;
	}
	r = ures_map(ux, NULL, dir, &d.uo_dirs, name, UFIND_STAT, &f, ino);
	if (r < 0)
		goto out;
	*st = f.uf_st;
	if (!f.uf_dir)
		ucache_add_file(ux, epoch, *ino, dir, name, f.uf_branch, &f.uf_st, f.uf_id, &d,
				f.uf_pidx);
	ures_fix_stat(ux, st, *ino);
	ufound_release(&f);
out:
	uobj_release(&d);
	return r;
}

int union_lookup(struct union_export *ux, uint64_t dir, const char *name, uint64_t *ino,
		 struct stat *st)
{
	return union_lookup_in(ux, dir, name, ino, st, NULL);
}

/* The hinted finding of name i, as ures_find with UFIND_STAT would make it; false: none. */
static bool ures_hinted(const struct udirset *parent, const struct ures_hints *h, size_t i,
			struct ufound *f)
{
	ufound_init(f);
	if (!h || h->uh_pidx[i] < 0)
		return false;
	f->uf_pidx = h->uh_pidx[i];
	f->uf_branch = parent->ds_branch[f->uf_pidx];
	f->uf_st = h->uh_st[i];
	f->uf_dir = S_ISDIR(f->uf_st.st_mode);
	return true;
}

/* Whether a file found by a listing has the identity its record names (learnt already). */
static bool ures_batch_id_ok(const struct udirset *parent, const char *name,
			     const struct ufound *f, const struct store_inode *rec)
{
	uint64_t id;

	if (f->uf_dir)
		return true;
	return ures_found_id(parent, name, f, &id) == 0 && ures_same_id(rec, id) &&
	       (rec->si_real_id != 0 || id == 0);
}

int ures_map_batch(struct union_export *ux, uint64_t pino, const struct udirset *parent,
		   size_t n, const char *const *names, const struct ures_hints *hints,
		   uint64_t *inos)
{
	struct store_txn *t = NULL;
	struct store_inode rec;
	struct ufound f;
	bool moved = false, fresh;
	size_t misses = 0;
	int r = 0;

	r = store_begin(ux->ux_store, false, &t);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		inos[i] = 0;
		r = store_find_name(t, ux->ux_id, pino, names[i], &inos[i]);
		if (r == 0)
			r = store_get(t, ux->ux_id, inos[i], &rec);
		if (r == -ENOENT) {
			/* No record yet (a first listing): only the write path can help. */
			inos[i] = UINT64_MAX;
			misses++;
			continue;
		}
		if (r < 0)
			goto fail;
		if (!ures_hinted(parent, hints, i, &f)) {
			r = ures_find(ux, parent, names[i], UFIND_STAT, &f);
			ufound_release(&f);
			if (r == -ENOENT) {
				inos[i] = 0;
				continue; /* gone since the listing was made */
			}
			if (r < 0)
				goto fail;
		}
		/* Aliases, re-keying and identities to check or learn take the write path. */
		if (!ures_matches(&rec, &f) || rec.si_branch != f.uf_branch ||
		    rec.si_real_ino != (uint64_t)f.uf_st.st_ino || rec.si_parent != pino ||
		    strcmp(rec.si_name, names[i]) || !ures_batch_id_ok(parent, names[i], &f, &rec)) {
			inos[i] = UINT64_MAX;
			misses++;
		}
	}
	store_abort(t);
	t = NULL;
	if (!misses)
		return 0;
	/* All the new records in one transaction: each commit waits for the disk. */
	r = store_begin(ux->ux_store, true, &t);
	if (r < 0)
		goto fail;
	/* Namespace changes hold the write lock too: after it is taken, what the caller found
	 * is either still true, or each name is looked up again. */
	fresh = hints && hints->uh_fresh && hints->uh_fresh(hints->uh_ctx);
	for (size_t i = 0; i < n; i++) {
		if (inos[i] != UINT64_MAX)
			continue;
		inos[i] = 0;
		r = 0;
		if (!fresh || !ures_hinted(parent, hints, i, &f))
			r = ures_find(ux, parent, names[i], UFIND_STAT, &f);
		if (r == 0)
			r = ures_map_write(ux, t, pino, parent, names[i], &f, &inos[i], &moved);
		ufound_release(&f);
		if (r == -ENOENT) {
			inos[i] = 0;
			continue;
		}
		if (r < 0)
			goto fail;
	}
	r = store_commit(t);
	t = NULL;
	/* A new name changes nothing cached; a record that moved does. */
	if (moved)
		ucache_changed(ux);
	if (r == 0)
		return 0;
fail:
	if (t)
		store_abort(t);
	for (size_t i = 0; i < n; i++)
		inos[i] = 0;
	return r;
}
