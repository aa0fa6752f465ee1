/*
 * Namespace changes: create, mkdir, symlink, mknod, remove, rmdir, rename, link.
 *
 * Every change goes to the upper branch. The file system change and its store update run
 * inside one store write transaction, which serialises them against each other and
 * against lookups that add records, so the map never sees half a rename. NFSv3 wants
 * the result on stable storage before the reply: the directories touched are fsynced.
 *
 * Removing or renaming away a name that a lower branch also has needs a whiteout (the
 * union semantics issue); until then such requests fail with -EROFS.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "uint.h"

enum uop_kind { UOP_FILE, UOP_DIR, UOP_SYMLINK, UOP_NODE };

struct uop_new {
	enum uop_kind un_kind;
	enum union_create_how un_how;        /* UOP_FILE */
	const uint8_t *un_verf;              /* UOP_FILE, EXCLUSIVE */
	const char *un_target;               /* UOP_SYMLINK */
	mode_t un_type;                      /* UOP_NODE */
	dev_t un_rdev;                       /* UOP_NODE */
	const struct union_setattr *un_sa;   /* may be NULL */
};

static void uop_out(struct union_export *ux, const struct stat *st, uint64_t ino,
		    struct stat *out)
{
	if (out) {
		*out = *st;
		ures_fix_stat(ux, out, ino);
	}
}

/* WCC data on failure too: the directory's attributes after the attempt, if it was found. */
static void uop_fail_post(struct union_export *ux, const struct uobj *d, uint64_t dir,
			  struct stat *post)
{
	if (post && d->uo_dirs.ds_n > 0 && fsio_stat(d->uo_dirs.ds_fd[0], post) == 0)
		ures_fix_stat(ux, post, dir);
}

/*
 * Resolves the directory a change happens in and gives it an upper copy. The client must
 * be allowed to change the directory before any copy is made for it.
 */
static int uop_dir(struct union_export *ux, uint64_t dir, struct uobj *d)
{
	int r;

	if (ux->ux_ro)
		return -EROFS;
	r = ures_resolve(ux, NULL, dir, 0, d);
	if (r < 0)
		return r;
	if (!S_ISDIR(d->uo_st.st_mode))
		return -ENOTDIR;
	if (d->uo_rec.si_branch == 0)
		return 0;
	if (!fsio_may(&d->uo_st, W_OK | X_OK))
		return -EACCES;
	uobj_release(d);
	return ures_resolve(ux, NULL, dir, URES_UPPER, d);
}

static int uop_begin(struct union_export *ux, struct store_txn **t)
{
	return store_begin(ux->ux_store, true, t);
}

static int uop_end(struct store_txn *t, int r)
{
	if (r < 0) {
		store_abort(t);
		return r;
	}
	return store_commit(t);
}

/* Another name in directory fd for inode real, if there is one (hard links). */
static bool uop_other_name(int fd, const char *skip, uint64_t real, char *out)
{
	struct fsio_dir *d;
	const char *name;
	unsigned char type;
	uint64_t ino;
	bool found = false;

	if (fsio_dir_open(fd, &d) < 0)
		return false;
	while (!found && fsio_dir_next(d, &name, &type, &ino) == 1) {
		if (ino == real && strcmp(name, skip) && strlen(name) <= STORE_NAME_MAX) {
			strcpy(out, name);
			found = true;
		}
	}
	fsio_dir_close(d);
	return found;
}

/*
 * The store side of a name going away from directory dir (upper copy fd): last says the
 * object itself is gone, so its record goes and its handles become stale.
 */
static int uop_forget(struct union_export *ux, struct store_txn *t, uint64_t dir, int fd,
		      const char *name, const struct ufound *f, bool last)
{
	struct store_inode rec;
	uint64_t ino;
	int r;

	r = store_find_name(t, ux->ux_id, dir, name, &ino);
	if (r == 0)
		r = store_get(t, ux->ux_id, ino, &rec);
	if (r == -ENOENT || (r == 0 && (rec.si_branch != f->uf_branch ||
					rec.si_real_ino != (uint64_t)f->uf_st.st_ino))) {
		/* No names entry for it: the record may still be known by its identity. */
		r = store_find_real(t, ux->ux_id, f->uf_branch, (uint64_t)f->uf_st.st_ino, &ino);
		if (r == 0)
			r = store_get(t, ux->ux_id, ino, &rec);
		if (r == 0 && (rec.si_parent != dir || strcmp(rec.si_name, name)) && !last)
			return 0;
	}
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (last)
		return store_delete(t, ux->ux_id, ino);
	if (rec.si_parent != dir || strcmp(rec.si_name, name)) {
		r = store_del_name(t, ux->ux_id, dir, name);
		return r == -ENOENT ? 0 : r;
	}
	/* The record's own name goes but the file lives on: follow a sibling link if any. */
	if (uop_other_name(fd, name, rec.si_real_ino, rec.si_name))
		return store_update(t, ux->ux_id, &rec);
	return 0;
}

static void uop_verf_times(const uint8_t *v, struct timespec ts[2])
{
	ts[0].tv_sec = (time_t)((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
				(uint32_t)v[2] << 8 | v[3]);
	ts[1].tv_sec = (time_t)((uint32_t)v[4] << 24 | (uint32_t)v[5] << 16 |
				(uint32_t)v[6] << 8 | v[7]);
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
}

static bool uop_verf_match(const struct stat *st, const uint8_t *v)
{
	struct timespec ts[2];

	uop_verf_times(v, ts);
	return S_ISREG(st->st_mode) && st->st_atim.tv_sec == ts[0].tv_sec &&
	       st->st_mtim.tv_sec == ts[1].tv_sec;
}

/* An existing name: what each kind of create makes of it. */
static int uop_exists(const struct uop_new *n, const struct ufound *f)
{
	if (n->un_kind != UOP_FILE || n->un_how == UNION_GUARDED)
		return -EEXIST;
	if (n->un_how == UNION_EXCLUSIVE)
		return f->uf_branch == 0 && uop_verf_match(&f->uf_st, n->un_verf) ? 0 : -EEXIST;
	return S_ISREG(f->uf_st.st_mode) ? 0 : -EEXIST;
}

/* Makes the new object in the upper directory fd; fd of a new file goes to *nfd. */
static int uop_make(int fd, const char *name, const struct uop_new *n, int *nfd)
{
	const struct union_setattr *sa = n->un_sa;
	struct union_setattr rest = { 0 };
	mode_t mode = (sa && (sa->ua_mask & USET_MODE)) ? sa->ua_mode & 07777 : 0;
	struct timespec ts[2];
	struct stat st;
	int r;

	switch (n->un_kind) {
	case UOP_FILE:
		if (n->un_how == UNION_EXCLUSIVE)
			mode = 0600; /* the client sets the real attributes next */
		else if (!(sa && (sa->ua_mask & USET_MODE)))
			mode = 0644;
		r = fsio_open_file(fd, name, O_CREAT | O_EXCL | O_WRONLY, mode, nfd);
		if (r == 0 && n->un_how == UNION_EXCLUSIVE) {
			uop_verf_times(n->un_verf, ts);
			return fsio_futimens(*nfd, ts);
		}
		break;
	case UOP_DIR:
		if (!(sa && (sa->ua_mask & USET_MODE)))
			mode = 0755;
		r = fsio_mkdir(fd, name, mode);
		break;
	case UOP_SYMLINK:
		r = fsio_symlink(n->un_target, fd, name);
		break;
	default:
		r = fsio_mknod(fd, name, n->un_type | mode, n->un_rdev);
		break;
	}
	if (r < 0 || !sa)
		return r;
	rest = *sa;
	rest.ua_mask &= ~USET_MODE;
	if (n->un_kind != UOP_FILE)
		rest.ua_mask &= ~USET_SIZE;
	if (!rest.ua_mask)
		return 0;
	r = fsio_statat(fd, name, &st);
	if (r == 0)
		r = uattr_apply(fd, name, &st, &rest);
	return r;
}

static int uop_create(struct union_export *ux, uint64_t dir, const char *name,
		      const struct uop_new *n, uint64_t *ino, struct stat *st,
		      struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t = NULL;
	struct union_setattr size = { 0 };
	struct ufound f;
	struct uobj d;
	bool existed = false;
	int r, nfd = -1, upfd;

	uobj_init(&d);
	r = uname_check(name);
	if (r == 0 && uname_dot(name))
		r = -EEXIST;
	if (r == 0 && uname_hidden(dir, name))
		r = -EACCES;
	if (r == 0)
		r = uop_dir(ux, dir, &d);
	if (r < 0)
		goto out;
	upfd = d.uo_dirs.ds_fd[0];
	uop_out(ux, &d.uo_st, dir, dirpre);
	r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	r = ures_find(ux, &d.uo_dirs, name, UFIND_STAT, &f);
	if (r == 0) {
		existed = true;
		r = uop_exists(n, &f);
	} else if (r == -ENOENT) {
		r = uop_make(upfd, name, n, &nfd);
	}
	if (r == 0)
		r = ures_map(ux, t, dir, &d.uo_dirs, name, UFIND_STAT, &f, ino);
	if (r == 0) {
		uop_out(ux, &f.uf_st, *ino, st);
		ufound_release(&f);
	}
	r = uop_end(t, r);
	if (r < 0)
		goto out;
	if (existed) {
		/* UNCHECKED on an existing file only truncates, as knfsd does. */
		if (n->un_how == UNION_UNCHECKED && n->un_sa && (n->un_sa->ua_mask & USET_SIZE)) {
			size.ua_mask = USET_SIZE;
			size.ua_size = n->un_sa->ua_size;
			r = union_setattr(ux, *ino, &size, NULL, NULL, st);
		}
		uop_out(ux, &d.uo_st, dir, dirpost);
		goto out;
	}
	if (nfd >= 0)
		r = fsio_fsync(nfd);
	if (r == 0)
		r = fsio_fsync_dir(upfd);
	udir_invalidate(ux, dir);
	if (r == 0 && dirpost) {
		r = fsio_stat(upfd, dirpost);
		ures_fix_stat(ux, dirpost, dir);
	}
out:
	if (r < 0)
		uop_fail_post(ux, &d, dir, dirpost);
	fsio_close(nfd);
	uobj_release(&d);
	return r;
}

int union_create(struct union_export *ux, uint64_t dir, const char *name,
		 enum union_create_how how, const struct union_setattr *sa, const uint8_t verf[8],
		 uint64_t *ino, struct stat *st, struct stat *dirpre, struct stat *dirpost)
{
	struct uop_new n = { .un_kind = UOP_FILE, .un_how = how, .un_verf = verf, .un_sa = sa };

	if (how == UNION_EXCLUSIVE)
		n.un_sa = NULL;
	if (how > UNION_EXCLUSIVE || (how == UNION_EXCLUSIVE && !verf))
		return -EINVAL;
	return uop_create(ux, dir, name, &n, ino, st, dirpre, dirpost);
}

int union_mkdir(struct union_export *ux, uint64_t dir, const char *name,
		const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		struct stat *dirpre, struct stat *dirpost)
{
	struct uop_new n = { .un_kind = UOP_DIR, .un_sa = sa };

	return uop_create(ux, dir, name, &n, ino, st, dirpre, dirpost);
}

int union_symlink(struct union_export *ux, uint64_t dir, const char *name, const char *target,
		  const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		  struct stat *dirpre, struct stat *dirpost)
{
	struct uop_new n = { .un_kind = UOP_SYMLINK, .un_target = target, .un_sa = sa };

	if (!target || !*target)
		return -EINVAL;
	if (strlen(target) >= 4096)
		return -ENAMETOOLONG;
	return uop_create(ux, dir, name, &n, ino, st, dirpre, dirpost);
}

int union_mknod(struct union_export *ux, uint64_t dir, const char *name, mode_t type,
		dev_t rdev, const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		struct stat *dirpre, struct stat *dirpost)
{
	struct uop_new n = { .un_kind = UOP_NODE, .un_type = type, .un_rdev = rdev, .un_sa = sa };

	if (type != S_IFCHR && type != S_IFBLK && type != S_IFIFO && type != S_IFSOCK)
		return -EINVAL;
	if (type == S_IFIFO || type == S_IFSOCK)
		n.un_rdev = 0;
	/* A 0/0 character device is how an upper branch says "deleted"; never make one. */
	if (type == S_IFCHR && rdev == 0)
		return -EPERM;
	return uop_create(ux, dir, name, &n, ino, st, dirpre, dirpost);
}

/* Inside the write transaction: removes name from the upper copy of d. */
static int uop_unlink_txn(struct union_export *ux, struct store_txn *t, uint64_t dir,
			  const struct uobj *d, const char *name, bool rmdir, uint64_t *gone)
{
	int upfd = d->uo_dirs.ds_fd[0];
	struct ufound f;
	int r;

	r = ures_find(ux, &d->uo_dirs, name, UFIND_STAT | UFIND_BELOW, &f);
	if (r < 0)
		return r;
	if (f.uf_branch != 0 || f.uf_below)
		return -EROFS; /* a lower copy would show through: needs a whiteout */
	if (rmdir && !f.uf_dir)
		return -ENOTDIR;
	if (!rmdir && f.uf_dir)
		return -EISDIR;
	r = fsio_unlink(upfd, name, rmdir);
	if (r == 0 && rmdir && store_find_name(t, ux->ux_id, dir, name, gone) < 0)
		*gone = 0;
	if (r == 0)
		r = uop_forget(ux, t, dir, upfd, name, &f, rmdir || f.uf_st.st_nlink <= 1);
	return r;
}

static int uop_unlink(struct union_export *ux, uint64_t dir, const char *name, bool rmdir,
		      struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t;
	struct uobj d;
	uint64_t gone = 0;
	int r;

	uobj_init(&d);
	r = uname_check(name);
	if (r == 0 && uname_dot(name))
		r = rmdir && !strcmp(name, ".") ? -EINVAL : -EACCES;
	if (r == 0 && uname_hidden(dir, name))
		r = -ENOENT;
	if (r == 0 && ux->ux_ro)
		r = -EROFS;
	if (r == 0)
		r = ures_resolve(ux, NULL, dir, 0, &d);
	if (r == 0 && !S_ISDIR(d.uo_st.st_mode))
		r = -ENOTDIR;
	if (r == 0) {
		uop_out(ux, &d.uo_st, dir, dirpre);
		r = uop_begin(ux, &t);
	}
	if (r == 0)
		r = uop_end(t, uop_unlink_txn(ux, t, dir, &d, name, rmdir, &gone));
	if (r < 0)
		goto out;
	r = fsio_fsync_dir(d.uo_dirs.ds_fd[0]);
	udir_invalidate(ux, dir);
	if (gone)
		udir_invalidate(ux, gone);
	if (r == 0 && dirpost) {
		r = fsio_stat(d.uo_dirs.ds_fd[0], dirpost);
		ures_fix_stat(ux, dirpost, dir);
	}
out:
	if (r < 0)
		uop_fail_post(ux, &d, dir, dirpost);
	uobj_release(&d);
	return r;
}

int union_remove(struct union_export *ux, uint64_t dir, const char *name,
		 struct stat *dirpre, struct stat *dirpost)
{
	return uop_unlink(ux, dir, name, false, dirpre, dirpost);
}

int union_rmdir(struct union_export *ux, uint64_t dir, const char *name,
		struct stat *dirpre, struct stat *dirpost)
{
	return uop_unlink(ux, dir, name, true, dirpre, dirpost);
}

/* Whether the target of a rename may be replaced in the upper alone. */
static int uop_rename_target(const struct ufound *src, const struct ufound *dst)
{
	if (dst->uf_branch == 0) {
		/* A directory over a lower directory, or a merged target: needs opaque dirs. */
		if ((src->uf_dir && dst->uf_below_dir) || (dst->uf_dir && dst->uf_below))
			return -EROFS;
		return 0;
	}
	if (src->uf_dir && !dst->uf_dir)
		return -ENOTDIR;
	if (!src->uf_dir && dst->uf_dir)
		return -EISDIR;
	return src->uf_dir ? -EROFS : 0;
}

/* The store side of a rename: the object keeps its ino under its new name. */
static int uop_moved(struct union_export *ux, struct store_txn *t, uint64_t ino,
		     uint64_t fromdir, const char *fromname, uint64_t todir, const char *toname)
{
	struct store_inode rec;
	int r;

	r = store_get(t, ux->ux_id, ino, &rec);
	if (r < 0)
		return r;
	if (rec.si_parent == fromdir && !strcmp(rec.si_name, fromname)) {
		rec.si_parent = todir;
		strcpy(rec.si_name, toname);
		return store_update(t, ux->ux_id, &rec);
	}
	r = store_del_name(t, ux->ux_id, fromdir, fromname);
	if (r == 0 || r == -ENOENT)
		r = store_add_name(t, ux->ux_id, todir, toname, ino);
	return r;
}

/* Inside the write transaction: moves fromname of fd to toname of td, in the upper. */
static int uop_rename_txn(struct union_export *ux, struct store_txn *t, uint64_t fromdir,
			  const struct uobj *fd, const char *fromname, uint64_t todir,
			  const struct uobj *td, const char *toname, uint64_t *gone)
{
	struct ufound sf, tf;
	bool target = false;
	uint64_t ino;
	int r;

	r = ures_find(ux, &fd->uo_dirs, fromname, UFIND_STAT | UFIND_BELOW, &sf);
	if (r < 0)
		return r;
	if (sf.uf_branch != 0 || sf.uf_below)
		return -EROFS; /* the old name needs a whiteout */
	r = ures_find(ux, &td->uo_dirs, toname, UFIND_STAT | UFIND_BELOW, &tf);
	if (r == 0) {
		target = tf.uf_branch == 0;
		r = uop_rename_target(&sf, &tf);
		if (r == 0 && target && tf.uf_st.st_ino == sf.uf_st.st_ino)
			return 0; /* two names of one file: rename does nothing */
	} else if (r == -ENOENT) {
		r = 0;
	}
	if (r == 0)
		r = ures_map(ux, t, fromdir, &fd->uo_dirs, fromname, UFIND_STAT, &sf, &ino);
	if (r < 0)
		return r;
	if (target && tf.uf_dir && store_find_name(t, ux->ux_id, todir, toname, gone) < 0)
		*gone = 0;
	r = fsio_rename(fd->uo_dirs.ds_fd[0], fromname, td->uo_dirs.ds_fd[0], toname, false);
	if (r == 0 && target)
		r = uop_forget(ux, t, todir, td->uo_dirs.ds_fd[0], toname, &tf,
			       tf.uf_dir || tf.uf_st.st_nlink <= 1);
	if (r == 0)
		r = uop_moved(ux, t, ino, fromdir, fromname, todir, toname);
	return r;
}

int union_rename(struct union_export *ux, uint64_t fromdir, const char *fromname,
		 uint64_t todir, const char *toname, struct stat *frompre, struct stat *frompost,
		 struct stat *topre, struct stat *topost)
{
	struct store_txn *t;
	struct uobj fd, td;
	uint64_t gone = 0;
	int r, sfd, tfd;

	uobj_init(&fd);
	uobj_init(&td);
	r = uname_check(fromname);
	if (r == 0)
		r = uname_check(toname);
	if (r == 0 && (uname_dot(fromname) || uname_dot(toname)))
		r = -EINVAL;
	if (r == 0 && uname_hidden(fromdir, fromname))
		r = -ENOENT;
	if (r == 0 && uname_hidden(todir, toname))
		r = -EACCES;
	if (r == 0)
		r = uop_dir(ux, fromdir, &fd);
	if (r == 0)
		r = uop_dir(ux, todir, &td);
	if (r == 0) {
		uop_out(ux, &fd.uo_st, fromdir, frompre);
		uop_out(ux, &td.uo_st, todir, topre);
		r = uop_begin(ux, &t);
	}
	if (r == 0)
		r = uop_end(t, uop_rename_txn(ux, t, fromdir, &fd, fromname, todir, &td, toname,
					      &gone));
	if (r < 0)
		goto out;
	sfd = fd.uo_dirs.ds_fd[0];
	tfd = td.uo_dirs.ds_fd[0];
	r = fsio_fsync_dir(sfd);
	if (r == 0 && fromdir != todir)
		r = fsio_fsync_dir(tfd);
	udir_invalidate(ux, fromdir);
	udir_invalidate(ux, todir);
	if (gone)
		udir_invalidate(ux, gone);
	if (r == 0 && frompost) {
		r = fsio_stat(sfd, frompost);
		ures_fix_stat(ux, frompost, fromdir);
	}
	if (r == 0 && topost) {
		r = fsio_stat(tfd, topost);
		ures_fix_stat(ux, topost, todir);
	}
out:
	if (r < 0) {
		uop_fail_post(ux, &fd, fromdir, frompost);
		uop_fail_post(ux, &td, todir, topost);
	}
	uobj_release(&fd);
	uobj_release(&td);
	return r;
}

/*
 * The store side of a new link. The newest name becomes the record's own: links are
 * mostly made to keep a file while its older names go (git objects, snapshot trees), and
 * the record must name a path that still exists to resolve.
 */
static int uop_linked(struct union_export *ux, struct store_txn *t, uint64_t ino,
		      uint64_t dir, const char *name)
{
	struct store_inode rec;
	uint64_t oldparent;
	char oldname[STORE_NAME_MAX + 1];
	int r;

	r = store_get(t, ux->ux_id, ino, &rec);
	if (r < 0)
		return r;
	oldparent = rec.si_parent;
	strcpy(oldname, rec.si_name);
	rec.si_parent = dir;
	strcpy(rec.si_name, name);
	r = store_update(t, ux->ux_id, &rec);
	if (r == 0)
		r = store_add_name(t, ux->ux_id, oldparent, oldname, ino);
	return r;
}

int union_link(struct union_export *ux, uint64_t ino, uint64_t dir, const char *name,
	       struct stat *post, struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t = NULL;
	struct ufound f;
	struct uobj o, d, now;
	int r, upfd = -1;

	uobj_init(&o);
	uobj_init(&d);
	uobj_init(&now);
	r = uname_check(name);
	if (r == 0 && uname_dot(name))
		r = -EEXIST;
	if (r == 0 && uname_hidden(dir, name))
		r = -EACCES;
	if (r == 0 && ux->ux_ro)
		r = -EROFS;
	if (r == 0)
		r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r == 0 && S_ISDIR(o.uo_st.st_mode))
		r = -EPERM;
	if (r == 0)
		r = uop_dir(ux, dir, &d);
	if (r == 0 && o.uo_rec.si_branch != 0)
		r = ucopy_up(ux, &o);
	if (r < 0)
		goto out;
	upfd = d.uo_dirs.ds_fd[0];
	uop_out(ux, &d.uo_st, dir, dirpre);
	r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	r = ures_find(ux, &d.uo_dirs, name, UFIND_STAT, &f);
	if (r == 0)
		r = -EEXIST;
	else if (r == -ENOENT)
		r = ures_resolve(ux, t, ino, 0, &now); /* where it is now, under the lock */
	if (r == 0 && now.uo_rec.si_branch != 0)
		r = -ESTALE;
	if (r == 0)
		r = fsio_link(now.uo_pfd, now.uo_rec.si_name, upfd, name);
	if (r == 0)
		r = uop_linked(ux, t, ino, dir, name);
	r = uop_end(t, r);
	if (r < 0)
		goto out;
	r = fsio_fsync_dir(upfd);
	udir_invalidate(ux, dir);
	if (r == 0)
		r = fsio_stat(now.uo_fd, &now.uo_st);
	if (r == 0)
		uop_out(ux, &now.uo_st, ino, post);
	if (r == 0 && dirpost) {
		r = fsio_stat(upfd, dirpost);
		ures_fix_stat(ux, dirpost, dir);
	}
out:
	if (r < 0)
		uop_fail_post(ux, &d, dir, dirpost);
	uobj_release(&now);
	uobj_release(&o);
	uobj_release(&d);
	return r;
}
