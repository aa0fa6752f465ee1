/*
 * Namespace changes: create, mkdir, symlink, mknod and link here, with the helpers that
 * remove.c and rename.c share.
 *
 * Every change goes to the upper branch. The file system change and its store update run
 * inside one store write transaction, which serialises them against each other and
 * against lookups that add records, so the map never sees half a rename. NFSv3 wants
 * the result on stable storage before the reply: the directories touched are fsynced.
 * A change whose store update never reaches the map (a full state file system) takes its
 * branch step back (store_on_undo), so a failed reply leaves no trace. The directory's
 * attributes before and after a change (wcc_data) are taken inside that serialisation.
 *
 * New objects are made with the client's identity, so the kernel checks permissions and
 * sets owner, group and inherited ACLs. One made over a whiteout is built under a
 * temporary marker name beside it and renamed over the whiteout, so the name is never
 * free for the lower object to show through; a new directory there is opaque.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "call_ctx.h"
#include "fsio.h"
#include "log.h"
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

void uop_out(struct union_export *ux, const struct stat *st, uint64_t ino,
		    struct stat *out)
{
	if (out) {
		*out = *st;
		ures_fix_stat(ux, out, ino);
	}
}

/* WCC data on failure too: the directory's attributes after the attempt, if it was found. */
void uop_fail_post(struct union_export *ux, const struct uobj *d, uint64_t dir,
			  struct stat *post)
{
	if (post && d->uo_dirs.ds_n > 0 && fsio_stat(d->uo_dirs.ds_fd[0], post) == 0)
		ures_fix_stat(ux, post, dir);
}

void uop_wcc(struct union_export *ux, int fd, uint64_t dir, struct stat *out)
{
	if (!out)
		return;
	if (fsio_stat(fd, out) == 0)
		ures_fix_stat(ux, out, dir);
	else
		memset(out, 0, sizeof(*out));
}

void uop_fail_wcc(struct union_export *ux, const struct uobj *d, uint64_t dir,
		  struct stat *pre, struct stat *post)
{
	/* Other changes may have run between the two: a pair that is not exact is no pair. */
	if (pre)
		memset(pre, 0, sizeof(*pre));
	uop_fail_post(ux, d, dir, post);
}

/* As root, in upper directory fd: a new whiteout takes name's place (directory or not). */
static int uop_whiteout_back(int fd, const char *name, bool dir)
{
	char tmp[64];
	int r;

	r = uwh_tmp_name(tmp, sizeof(tmp));
	if (r == 0)
		r = uwh_make(fd, tmp);
	if (r < 0)
		return r;
	r = fsio_rename2(fd, tmp, fd, name, dir ? FSIO_EXCHANGE : 0);
	if (r == 0 && dir) {
		r = fsio_unlink(fd, tmp, true);
		if (r < 0) /* something went into it since: the directory stays */
			fsio_rename2(fd, tmp, fd, name, FSIO_EXCHANGE);
	}
	if (r < 0)
		uop_drop_tmp(fd, tmp);
	return r;
}

void uop_flush_back(int dirfd)
{
	int r = fsio_fsync_dir(dirfd);

	if (r < 0)
		log_warn("cannot flush a change taken back in the upper branch (%s); a crash of the "
			 "machine now may show it as made", strerror(-r));
}

static void uop_take_back(void *arg)
{
	struct uop_undo *u = arg;
	struct fsio_ids ids;
	struct stat st;
	int r;

	fsio_become_root(&ids);
	r = fsio_statat(u->uu_fd, u->uu_name, &st);
	if (r == 0 && (st.st_dev != u->uu_dev || st.st_ino != u->uu_ino))
		r = -ESTALE; /* a later change put something else there: not ours to remove */
	if (r == 0 && u->uu_whiteout)
		r = uop_whiteout_back(u->uu_fd, u->uu_name, S_ISDIR(st.st_mode));
	else if (r == 0)
		r = fsio_unlink(u->uu_fd, u->uu_name, S_ISDIR(st.st_mode));
	if (r == 0)
		uop_flush_back(u->uu_fd);
	fsio_restore(&ids);
	if (r < 0)
		log_warn("the inode map did not take a change, and its new name %s stays in the "
			 "upper branch (%s); the union shows it as if made since", u->uu_name,
			 strerror(-r));
}

int uop_kept(const char *name, int r)
{
	log_warn("the inode map did not take the change at %s (%s); the change stays in the "
		 "upper branch, and the map keeps what it had before, as after a crash there",
		 name, strerror(-r));
	return 0;
}

void uop_undo_name(struct store_txn *t, struct uop_undo *u, int fd, const char *name,
		   const struct stat *made, bool whiteout)
{
	u->uu_undo.su_fn = uop_take_back;
	u->uu_undo.su_arg = u;
	u->uu_fd = fd;
	u->uu_name = name;
	u->uu_dev = made->st_dev;
	u->uu_ino = made->st_ino;
	u->uu_whiteout = whiteout;
	store_on_undo(t, &u->uu_undo);
}

void union_set_sync(bool sync)
{
	call_ctx()->cc_async = !sync;
}

int uop_sync_file(int fd)
{
	return call_ctx()->cc_async ? 0 : fsio_fsync(fd);
}

int uop_sync_dir(int dirfd)
{
	return call_ctx()->cc_async ? 0 : fsio_fsync_dir(dirfd);
}

int uop_begin(struct union_export *ux, struct store_txn **t)
{
	return store_begin(ux->ux_store, true, t);
}

int uop_end(struct union_export *ux, struct store_txn *t, int r)
{
	return uop_end_durable(ux, t, r, -1, -1, -1);
}

/* A change's flushes in the upper branch: the new file's inode, then the directories'. */
struct uop_flush {
	int uf_file;
	int uf_dir[2];
};

static int uop_flush_run(void *arg)
{
	const struct uop_flush *f = arg;
	int r = f->uf_file >= 0 ? fsio_fsync(f->uf_file) : 0;

	for (int i = 0; i < 2 && r == 0; i++)
		if (f->uf_dir[i] >= 0)
			r = fsio_fsync_dir_shared(f->uf_dir[i]);
	return r;
}

int uop_end_durable(struct union_export *ux, struct store_txn *t, int r, int file, int dir,
		    int dir2)
{
	struct uop_flush f = { .uf_file = file, .uf_dir = { dir, dir2 } };
	struct store_meanwhile m = { .sm_fn = uop_flush_run, .sm_arg = &f };
	bool flush = !call_ctx()->cc_async && (file >= 0 || dir >= 0 || dir2 >= 0);

	if (r < 0)
		store_abort(t);
	else
		r = store_commit_meanwhile(t, flush ? &m : NULL);
	/* Even a failed operation may have changed a branch before it gave up. */
	ucache_changed(ux);
	return r;
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
		/* Not a removed file's temporary name (remove.c sets files aside first). */
		if (ino == real && strcmp(name, skip) && !uwh_marker(name) &&
		    strlen(name) <= STORE_NAME_MAX) {
			strcpy(out, name);
			found = true;
		}
	}
	fsio_dir_close(d);
	return found;
}

int uop_forget(struct union_export *ux, struct store_txn *t, uint64_t dir, int fd,
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
	if (ubr_writable(ux, rec.si_branch) &&
	    uop_other_name(fd, name, rec.si_real_ino, rec.si_name))
		return store_update(t, ux->ux_id, &rec);
	return 0;
}

int uop_links_up(struct union_export *ux, uint64_t dir, const struct uobj *d,
		 const char *name)
{
	struct ufound f;
	struct uobj o;
	uint64_t ino;
	int r;

	uobj_init(&o);
	r = ures_map(ux, NULL, dir, &d->uo_dirs, name, UFIND_STAT, &f, &ino);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	if (!f.uf_dir && !ubr_writable(ux, f.uf_branch) && f.uf_st.st_nlink > 1) {
		r = uobj_may(d, W_OK | X_OK) ? 0 : -EACCES;
		if (r == 0 && !uop_sticky_ok(&d->uo_st, &f.uf_st))
			r = -EPERM;
		ufound_release(&f);
		if (r == 0)
			r = ures_resolve(ux, NULL, ino, 0, &o);
		if (r == 0)
			r = ucopy_up(ux, &o);
		/* Looking the name up again links it to the copy. */
		if (r == 0)
			r = ures_map(ux, NULL, dir, &d->uo_dirs, name, UFIND_STAT, &f, &ino);
	}
	ufound_release(&f);
	uobj_release(&o);
	return r == -ENOENT ? 0 : r;
}

nlink_t uop_nlink(struct union_export *ux, struct store_txn *t, uint64_t dir,
		  const char *name, const struct ufound *f, uint64_t *ino)
{
	*ino = 0;
	if (f->uf_dir)
		return 1;
	if (store_find_name(t, ux->ux_id, dir, name, ino) < 0) {
		*ino = 0;
		return f->uf_st.st_nlink;
	}
	return uhl_nlink(ux, *ino, &f->uf_st);
}

bool uop_sticky_ok(const struct stat *dir, const struct stat *obj)
{
	return !(dir->st_mode & S_ISVTX) || fsio_owns(dir) || fsio_owns(obj);
}

int uop_swap_in(int fd, const char *tmp, const char *name, bool dir)
{
	struct fsio_ids ids;
	int r;

	fsio_become_root(&ids);
	if (!dir) {
		r = fsio_rename(fd, tmp, fd, name, false);
	} else {
		/* A directory cannot replace a non-directory: swap, then drop the whiteout. */
		r = fsio_rename2(fd, tmp, fd, name, FSIO_EXCHANGE);
		if (r == 0)
			fsio_unlink(fd, tmp, false);
	}
	fsio_restore(&ids);
	return r;
}

void uop_drop_tmp(int fd, const char *tmp)
{
	struct fsio_ids ids;
	struct stat st;

	fsio_become_root(&ids);
	if (fsio_statat(fd, tmp, &st) == 0)
		fsio_unlink(fd, tmp, S_ISDIR(st.st_mode));
	fsio_restore(&ids);
}

/*
 * What occupies name in the upper directory fd when the union lookup found nothing there:
 * 1 for a whiteout, 0 for nothing, -EEXIST for anything else (another file system).
 */
int uop_upper_whiteout(int fd, const char *name)
{
	struct stat st;
	int r = fsio_statat(fd, name, &st);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return uwh_is_whiteout(fd, name, &st) ? 1 : -EEXIST;
}

int uop_new_name(uint64_t dir, const char *name)
{
	int r = uname_check(name);

	if (r == 0 && uname_dot(name))
		return -EEXIST;
	/* Marker names mean something else on disk; the work directory is ours. */
	if (r == 0 && uwh_marker(name))
		return -EACCES;
	if (r == 0 && uname_hidden(dir, name))
		return -EACCES;
	return r;
}

/*
 * The verifier's two words as the new file's atime and mtime seconds, each masked to 31
 * bits as knfsd does: file systems without times past 2038 (ext4 with 128-byte inodes, XFS
 * without bigtime) clamp a larger value, and the retransmission would then not match.
 */
#define UOP_VERF_WORD_MASK 0x7fffffffu

static time_t uop_verf_word(const uint8_t *w)
{
	uint32_t v = (uint32_t)w[0] << 24 | (uint32_t)w[1] << 16 | (uint32_t)w[2] << 8 | w[3];

	return (time_t)(v & UOP_VERF_WORD_MASK);
}

static void uop_verf_times(const uint8_t *v, struct timespec ts[2])
{
	ts[0].tv_sec = uop_verf_word(v);
	ts[1].tv_sec = uop_verf_word(v + 4);
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
static int uop_exists(const struct union_export *ux, const struct uop_new *n,
		      const struct ufound *f)
{
	if (n->un_kind != UOP_FILE || n->un_how == UNION_GUARDED)
		return -EEXIST;
	if (n->un_how == UNION_EXCLUSIVE)
		return ubr_writable(ux, f->uf_branch) && uop_verf_match(&f->uf_st, n->un_verf) ?
			       0 : -EEXIST;
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
	int r, node = -1, obj;

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
	/* A new file has its fd already; anything else is opened, never followed. */
	if (n->un_kind != UOP_FILE)
		r = fsio_open_node(fd, name, &node);
	obj = n->un_kind == UOP_FILE ? *nfd : node;
	if (r == 0)
		r = fsio_stat(obj, &st);
	if (r == 0)
		r = uattr_apply(obj, &st, &rest);
	fsio_close(node);
	return r;
}

/*
 * Makes the new object at a name the union shows as free. Over a whiteout, or where a
 * lower directory would merge into a new directory, it is built under a temporary name,
 * made opaque if a directory, and then takes the name in one rename.
 */
static int uop_make_over(struct union_export *ux, const struct uobj *d, int at,
			 const char *name, const struct uop_new *n, int *nfd, bool *over_wh)
{
	int r, upfd = d->uo_dirs.ds_fd[at];
	bool dir = n->un_kind == UOP_DIR, wh, opaque;
	char tmp[64];

	r = uop_upper_whiteout(upfd, name);
	if (r < 0)
		return r;
	wh = *over_wh = r == 1;
	opaque = dir && (wh || ures_lower_has(ux, &d->uo_dirs, at, name));
	if (!wh && !opaque)
		return uop_make(upfd, name, n, nfd);
	r = uwh_tmp_name(tmp, sizeof(tmp));
	if (r == 0)
		r = uop_make(upfd, tmp, n, nfd);
	if (r < 0)
		return r;
	if (opaque)
		r = uwh_set_opaque(upfd, tmp);
	if (r == 0 && wh)
		r = uop_swap_in(upfd, tmp, name, dir);
	else if (r == 0)
		r = fsio_rename(upfd, tmp, upfd, name, true);
	if (r < 0) {
		fsio_close(*nfd);
		*nfd = -1;
		uop_drop_tmp(upfd, tmp);
	}
	return r;
}

/* A create in the branch *b the placement picks (skipping those full). */
static int uop_create_in(struct union_export *ux, uint64_t dir, const char *name,
			 const struct uop_new *n, const bool *full, int *b, uint64_t *ino,
			 struct stat *st, struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t = NULL;
	struct union_setattr size = { 0 };
	struct uop_undo undo;
	struct ufound f;
	struct stat made;
	struct uobj d;
	bool existed = false, wh = false;
	int r, nfd = -1, ndir = -1, upfd, at = 0;

	uobj_init(&d);
	*b = -1;
	r = uop_new_name(dir, name);
	if (r == 0)
		r = uop_place(ux, dir, name, full, &d, b);
	if (r < 0)
		goto out;
	at = uds_index_of(&d.uo_dirs, (uint8_t)*b);
	upfd = d.uo_dirs.ds_fd[at];
	r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpre);
	r = ures_find(ux, &d.uo_dirs, name, UFIND_STAT, &f);
	if (r == 0) {
		existed = true;
		r = uop_exists(ux, n, &f);
	} else if (r == -ENOENT) {
		r = uop_make_over(ux, &d, at, name, n, &nfd, &wh);
		if (r == 0)
			r = nfd >= 0 ? fsio_stat(nfd, &made) : fsio_statat(upfd, name, &made);
		if (r == 0)
			uop_undo_name(t, &undo, upfd, name, &made, wh);
		/*
		 * A new directory's own blocks too: without a journal (ext4's nojournal mode,
		 * ext2) its parent's flush does not write them, and a power cut would take it.
		 */
		if (r == 0 && n->un_kind == UOP_DIR)
			r = fsio_open_dir(upfd, name, &ndir);
	}
	if (r == 0)
		r = ures_map(ux, t, dir, &d.uo_dirs, name, UFIND_STAT, &f, ino);
	if (r == 0) {
		uop_out(ux, &f.uf_st, *ino, st);
		ufound_release(&f);
		if (!existed)
			uop_touch_top(&d, at);
		uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpost);
	}
	r = uop_end_durable(ux, t, r, nfd, existed ? -1 : ndir >= 0 ? ndir : upfd,
			    ndir >= 0 ? upfd : -1);
	if (r < 0)
		goto out;
	if (existed) {
		/* UNCHECKED on an existing file only truncates, as knfsd does. */
		if (n->un_how == UNION_UNCHECKED && n->un_sa && (n->un_sa->ua_mask & USET_SIZE)) {
			size.ua_mask = USET_SIZE;
			size.ua_size = n->un_sa->ua_size;
			r = union_setattr(ux, *ino, &size, NULL, NULL, st);
		}
		goto out;
	}
	udir_invalidate(ux, dir);
out:
	if (r < 0)
		uop_fail_wcc(ux, &d, dir, dirpre, dirpost);
	fsio_close(nfd);
	fsio_close(ndir);
	uobj_release(&d);
	return r;
}

/*
 * A branch out of space (or the user's quota there) makes every policy but tdp try the
 * next; each try marks one more branch full, so it ends.
 */
static int uop_create(struct union_export *ux, uint64_t dir, const char *name,
		      const struct uop_new *n, uint64_t *ino, struct stat *st,
		      struct stat *dirpre, struct stat *dirpost)
{
	bool full[UNION_MAX_BRANCHES] = { false };
	int r, b;

	for (;;) {
		r = uop_create_in(ux, dir, name, n, full, &b, ino, st, dirpre, dirpost);
		if ((r != -ENOSPC && r != -EDQUOT) || b < 0 || !upol_retries(ux))
			return r;
		upol_full(ux, b);
		full[b] = true;
	}
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

/* Links the resolved upper object o as name in upper directory fd, over a whiteout too. */
static int uop_link_over(int fd, const struct uobj *o, const char *name, bool *over_wh)
{
	char tmp[64];
	int r;

	r = uop_upper_whiteout(fd, name);
	*over_wh = r == 1;
	if (r == 0)
		return fsio_link(o->uo_pfd, o->uo_rec.si_name, fd, name);
	if (r < 0)
		return r;
	r = uwh_tmp_name(tmp, sizeof(tmp));
	if (r == 0)
		r = fsio_link(o->uo_pfd, o->uo_rec.si_name, fd, tmp);
	if (r == 0) {
		r = uop_swap_in(fd, tmp, name, false);
		if (r < 0)
			uop_drop_tmp(fd, tmp);
	}
	return r;
}

int union_link(struct union_export *ux, uint64_t ino, uint64_t dir, const char *name,
	       struct stat *post, struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t = NULL;
	struct uop_undo undo;
	struct ufound f;
	struct uobj o, d, now;
	bool wh = false;
	uint8_t b = 0;
	int r, upfd = -1;

	uobj_init(&o);
	uobj_init(&d);
	uobj_init(&now);
	r = uop_new_name(dir, name);
	if (r == 0 && ux->ux_ro)
		r = -EROFS;
	if (r == 0)
		r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r == 0 && S_ISDIR(o.uo_st.st_mode))
		r = -EPERM;
	/* An object in a writable branch is linked where it is, when the name would show. */
	if (r == 0 && o.uo_rec.si_branch != 0 && ubr_writable(ux, o.uo_rec.si_branch)) {
		r = uop_dir_in(ux, dir, name, o.uo_rec.si_branch, &d);
		b = r == 0 ? o.uo_rec.si_branch : 0;
		r = r == 1 ? 0 : r;
	}
	if (r == 0 && b == 0)
		r = uop_dir(ux, dir, NULL, &d);
	if (r == 0) {
		/* No copy-up for a link that cannot be made. */
		r = ures_find(ux, &d.uo_dirs, name, UFIND_STAT, &f);
		ufound_release(&f);
		r = r == 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	/* No copy-up for a link the client may not make (as protected_hardlinks would). */
	if (r == 0 && o.uo_rec.si_branch != b && !uobj_may(&d, W_OK | X_OK))
		r = -EACCES;
	if (r == 0 && o.uo_rec.si_branch != b && !fsio_owns(&o.uo_st) &&
	    !(S_ISREG(o.uo_st.st_mode) && uobj_may(&o, R_OK | W_OK)))
		r = -EPERM;
	if (r == 0 && o.uo_rec.si_branch != b)
		r = ucopy_up(ux, &o);
	/* A metacopy's data is found by its path, which the new name does not have. */
	if (r == 0)
		r = ucopy_data(ux, &o);
	if (r < 0)
		goto out;
	upfd = uds_fd_of(&d.uo_dirs, b);
	r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpre);
	r = ures_find(ux, &d.uo_dirs, name, UFIND_STAT, &f);
	if (r == 0)
		r = -EEXIST;
	else if (r == -ENOENT)
		r = ures_resolve(ux, t, ino, 0, &now); /* where it is now, under the lock */
	if (r == 0 && now.uo_rec.si_branch != b)
		r = -ESTALE;
	if (r == 0)
		r = uop_link_over(upfd, &now, name, &wh);
	if (r == 0)
		r = fsio_stat(now.uo_fd, &now.uo_st);
	if (r == 0)
		uop_undo_name(t, &undo, upfd, name, &now.uo_st, wh);
	if (r == 0)
		r = uop_linked(ux, t, ino, dir, name);
	if (r == 0) {
		uop_out(ux, &now.uo_st, ino, post);
		uop_touch_top(&d, uds_index_of(&d.uo_dirs, b));
		uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpost);
	}
	r = uop_end_durable(ux, t, r, -1, upfd, -1);
	if (r < 0)
		goto out;
	udir_invalidate(ux, dir);
out:
	if (r < 0)
		uop_fail_wcc(ux, &d, dir, dirpre, dirpost);
	uobj_release(&now);
	uobj_release(&o);
	uobj_release(&d);
	return r;
}
