/*
 * Remove and rmdir.
 *
 * A name only the upper has is simply removed. A name a lower branch shows (or would show
 * once the upper's copy is gone) is replaced by a whiteout in one rename, never removed
 * first, so a crash cannot bring the lower object back. A merged directory may go when
 * all that is left in it are whiteouts: the upper copy goes with them, swapped for a
 * whiteout in one rename.
 *
 * With several writable branches, a name whose topmost copy is in a writable branch is
 * removed there, after its hidden copies in writable branches below (none may show once
 * it goes), and a whiteout is left, in that branch, only where a copy below remains: in
 * a read-only branch, or a directory that still holds hidden entries. A name whose
 * topmost copy is read-only is whited out in the top branch, as with one upper.
 *
 * A file leaves the union's sight first under a temporary name in its directory (with a
 * whiteout at its name when a lower branch has the name), and goes for good only once the
 * map took the change: when the map cannot (a full state file system), it comes back, and
 * a whiteout made over a lower name goes again. A removed upper directory cannot come
 * back: the reply says what the client will see, success, and the map keeps a record of
 * a name that is gone (as after a crash between the two).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

/* Puts a whiteout where the upper object name is, in one rename; the object goes. */
static int urm_whiteout_over(int fd, const char *name, bool dir)
{
	char tmp[64];
	int r;

	r = uwh_tmp_name(tmp, sizeof(tmp));
	if (r == 0)
		r = uwh_make(fd, tmp);
	if (r < 0)
		return r;
	/* With the client's identity: the kernel checks it may remove name. */
	r = fsio_rename2(fd, tmp, fd, name, dir ? FSIO_EXCHANGE : 0);
	if (r < 0) {
		uop_drop_tmp(fd, tmp);
		return r;
	}
	/* The name is settled; what is left over is only hidden clutter. */
	if (dir && uwh_purge_dir(fd, tmp) < 0)
		log_warn("could not remove %s (a removed directory's whiteouts)", tmp);
	return 0;
}

/* A file set aside in upper directory fd, until the map takes its removal. */
struct urm_aside {
	struct store_undo ua_undo;
	int ua_fd;
	const char *ua_name;
	char ua_tmp[64];         /* "" when nothing is set aside */
	dev_t ua_dev;
	ino_t ua_ino;
	bool ua_whiteout;        /* a whiteout took the name */
};

/* The map did not take the removal: the file takes its name back (as root). */
static void urm_take_back(void *arg)
{
	struct urm_aside *a = arg;
	struct fsio_ids ids;
	struct stat st;
	int r;

	fsio_become_root(&ids);
	r = fsio_statat(a->ua_fd, a->ua_tmp, &st);
	if (r == 0 && (st.st_dev != a->ua_dev || st.st_ino != a->ua_ino))
		r = -ESTALE;
	if (r == 0 && a->ua_whiteout) {
		r = fsio_statat(a->ua_fd, a->ua_name, &st);
		if (r == 0 && !uwh_is_whiteout(a->ua_fd, a->ua_name, &st))
			r = -EEXIST; /* a later change put something there */
		if (r == 0)
			r = fsio_rename2(a->ua_fd, a->ua_tmp, a->ua_fd, a->ua_name, FSIO_EXCHANGE);
		if (r == 0)
			fsio_unlink(a->ua_fd, a->ua_tmp, false);
	} else if (r == 0) {
		r = fsio_rename(a->ua_fd, a->ua_tmp, a->ua_fd, a->ua_name, true);
	}
	if (r == 0)
		uop_flush_back(a->ua_fd);
	fsio_restore(&ids);
	if (r == 0)
		a->ua_tmp[0] = '\0';
	else
		log_warn("the inode map did not take the removal of %s, which cannot come back (%s)",
			 a->ua_name, strerror(-r));
}

/*
 * Moves the upper file name out of sight under a temporary name, with the client's
 * identity (the kernel checks it may remove name), leaving a whiteout when whiteout.
 */
static int urm_set_aside(struct store_txn *t, int fd, const char *name, bool whiteout,
			 struct urm_aside *a)
{
	struct stat st;
	int r;

	a->ua_fd = fd;
	a->ua_name = name;
	a->ua_whiteout = whiteout;
	r = uwh_tmp_name(a->ua_tmp, sizeof(a->ua_tmp));
	if (r == 0 && whiteout) {
		r = uwh_make(fd, a->ua_tmp);
		if (r == 0) {
			r = fsio_rename2(fd, a->ua_tmp, fd, name, FSIO_EXCHANGE);
			if (r < 0)
				uop_drop_tmp(fd, a->ua_tmp);
		}
	} else if (r == 0) {
		r = fsio_rename(fd, name, fd, a->ua_tmp, true);
	}
	if (r == 0)
		r = fsio_statat(fd, a->ua_tmp, &st);
	if (r < 0) {
		a->ua_tmp[0] = '\0';
		return r;
	}
	a->ua_dev = st.st_dev;
	a->ua_ino = st.st_ino;
	a->ua_undo.su_fn = urm_take_back;
	a->ua_undo.su_arg = a;
	store_on_undo(t, &a->ua_undo);
	return 0;
}

/* Removes an upper directory no lower branch has; whiteouts in it go along. */
static int urm_rmdir_upper(int fd, const char *name)
{
	char tmp[64];
	int r;

	r = fsio_unlink(fd, name, true);
	if (r != -ENOTEMPTY && r != -EEXIST)
		return r;
	/* Only markers are left (the union showed it empty): move it aside at once. */
	r = uwh_tmp_name(tmp, sizeof(tmp));
	if (r == 0)
		r = fsio_rename(fd, name, fd, tmp, true);
	if (r == 0 && uwh_purge_dir(fd, tmp) < 0)
		log_warn("could not remove %s (a removed directory's whiteouts)", tmp);
	return r;
}

void urm_hidden_copies(struct union_export *ux, const struct udirset *parent,
		       const char *name, const struct ufound *f)
{
	struct fsio_ids ids;
	struct stat st, cst;
	int k;

	fsio_become_root(&ids);
	for (int i = parent->ds_n - 1; i > f->uf_pidx; i--) {
		int pfd = parent->ds_fd[i];

		if (!ubr_writable(ux, parent->ds_branch[i]) || fsio_statat(pfd, name, &st) < 0 ||
		    uwh_is_whiteout(pfd, name, &st))
			continue;
		if (!f->uf_dir && !S_ISDIR(st.st_mode)) {
			fsio_unlink(pfd, name, false);
			continue;
		}
		k = f->uf_dir ? uds_index_of(&f->uf_dirs, parent->ds_branch[i]) : -1;
		if (k >= 0 && fsio_stat(f->uf_dirs.ds_fd[k], &cst) == 0 &&
		    cst.st_dev == st.st_dev && cst.st_ino == st.st_ino)
			uwh_purge_dir(pfd, name);
	}
	fsio_restore(&ids);
}

/* name in d: what it is (f), and whether it is the kind the call removes. */
static int urm_find(struct union_export *ux, const struct uobj *d, const char *name,
		    bool rmdir, struct ufound *f)
{
	int r = ures_find(ux, &d->uo_dirs, name, UFIND_BELOW | (rmdir ? 0 : UFIND_STAT), f);

	if (r < 0)
		return r;
	if (rmdir && !f->uf_dir)
		r = -ENOTDIR;
	else if (!rmdir && f->uf_dir)
		r = -EISDIR;
	else if (rmdir)
		r = udir_empty(ux, &f->uf_dirs);
	return r;
}

/*
 * Inside the write transaction: removes name from directory d, in the copy of d at index
 * *at: the one holding the name's topmost copy when that is writable, else the top one
 * (-EAGAIN when d has none there: resolve d with one and try again). *done: the branch
 * step happened and cannot be taken back (a directory went). A file is set aside in
 * *aside; *forget: the ino whose hard-link index entry goes. Before the branch changes,
 * the change's intent goes on record: in (names filled), *slot.
 */
static int urm_txn(struct union_export *ux, struct store_txn *t, uint64_t dir,
		   const struct uobj *d, const char *name, bool rmdir, uint64_t *gone,
		   struct uop_undo *undo, struct urm_aside *aside, bool *done, uint64_t *forget,
		   struct store_intent *in, int *slot, int *at)
{
	struct ufound f;
	struct stat wh;
	bool whiteout, last, in_place;
	uint64_t ino;
	int r, upfd;

	r = urm_find(ux, d, name, rmdir, &f);
	in_place = r == 0 && ubr_writable(ux, f.uf_branch);
	if (in_place && ux->ux_nwritable > 1) {
		urm_hidden_copies(ux, &d->uo_dirs, name, &f);
		ufound_release(&f);
		r = urm_find(ux, d, name, rmdir, &f);
		in_place = r == 0 && ubr_writable(ux, f.uf_branch);
	}
	if (r == 0 && !in_place && !ubr_writable(ux, d->uo_dirs.ds_branch[0]))
		r = -EAGAIN;
	if (r < 0)
		goto out;
	*at = in_place ? f.uf_pidx : 0;
	upfd = d->uo_dirs.ds_fd[*at];
	whiteout = !in_place || f.uf_below;
	if (rmdir && store_find_name(t, ux->ux_id, dir, name, gone) < 0)
		*gone = 0;
	if (store_find_name(t, ux->ux_id, dir, name, &in->sn_ino) < 0)
		in->sn_ino = 0;
	*slot = uint_intent_begin(ux, in, STORE_INTENT_REMOVE, f.uf_branch,
				  (uint64_t)f.uf_st.st_ino, f.uf_st.st_mode);
	if (*slot < 0) {
		r = *slot;
		goto out;
	}
	if (in_place && !rmdir) {
		r = urm_set_aside(t, upfd, name, whiteout, aside);
	} else if (in_place && !whiteout) {
		r = urm_rmdir_upper(upfd, name);
		*done = r == 0;
	} else if (in_place) {
		r = urm_whiteout_over(upfd, name, rmdir);
		*done = r == 0;
	} else {
		/* Nothing of it in the upper: the kernel sees a create, so check as unlink would. */
		r = uop_sticky_ok(&d->uo_st, &f.uf_st) ? uwh_make(upfd, name) : -EPERM;
		if (r == 0)
			r = fsio_statat(upfd, name, &wh);
		if (r == 0)
			uop_undo_name(t, undo, upfd, name, &wh, false);
	}
	if (r == 0)
		ufd_forget(&f.uf_st); /* its space comes back before the reply */
	last = rmdir || uop_nlink(ux, t, dir, name, &f, &ino) <= 1;
	if (r == 0)
		r = uop_forget(ux, t, dir, upfd, name, &f, last);
	if (r == 0 && last && !rmdir)
		*forget = ino;
out:
	ufound_release(&f);
	return r;
}

int urm_settle(struct union_export *ux, struct store_txn *t, const struct store_intent *in)
{
	struct ufound f, gone;
	struct uobj d, o;
	int r;

	ufound_init(&f);
	r = ures_resolve(ux, t, in->sn_from, 0, &d);
	if (r == 0) {
		r = ures_find(ux, &d.uo_dirs, in->sn_from_name, UFIND_STAT, &f);
		if (r == 0 && uint_is_object(in, &f))
			goto out; /* still there: the remove did not happen */
		if (r == 0 || r == -ENOENT) {
			/* Gone from the branches: the map side of urm_txn, for the name ... */
			ufound_init(&gone);
			gone.uf_dir = S_ISDIR(in->sn_type);
			gone.uf_branch = in->sn_branch;
			gone.uf_st.st_ino = (ino_t)in->sn_real_ino;
			r = uop_forget(ux, t, in->sn_from, uds_fd_or_top(&d.uo_dirs, in->sn_branch),
				       in->sn_from_name, &gone, false);
		}
	}
	/* (a directory gone too: its records are stale, the object's included) */
	if (r < 0 && r != -ESTALE && r != -ENOENT)
		goto out;
	/* ... and for the object, unless another name (a hard link) keeps it. */
	r = in->sn_ino ? ures_resolve(ux, t, in->sn_ino, 0, &o) : 0;
	if (in->sn_ino)
		uobj_release(&o);
	if (r == -ESTALE) {
		if (!S_ISDIR(in->sn_type))
			uhl_forget(ux, in->sn_ino);
		r = store_delete(t, ux->ux_id, in->sn_ino);
		if (r == 0)
			log_info("export %s: a remove of %s cut short by a crash had removed the "
				 "object: its record goes", ux->ux_name, in->sn_from_name);
	}
out:
	ufound_release(&f);
	uobj_release(&d);
	return r == -ENOENT ? 0 : r;
}

static int urm_unlink(struct union_export *ux, uint64_t dir, const char *name, bool rmdir,
		      struct stat *dirpre, struct stat *dirpost)
{
	struct store_txn *t;
	struct uop_undo undo;
	struct urm_aside aside = { .ua_tmp = "" };
	struct uobj d;
	uint64_t gone = 0, forget = 0;
	struct store_intent in = { .sn_from = dir };
	bool done = false, top = false;
	int r, slot = -1, at = 0;

	uobj_init(&d);
	r = uname_check(name);
	if (r == 0 && uname_dot(name))
		r = rmdir && !strcmp(name, ".") ? -EINVAL : -EACCES;
	if (r == 0 && uname_hidden(dir, name))
		r = -ENOENT;
	if (r < 0)
		goto out;
again:
	r = top ? uop_dir(ux, dir, name, &d) : uop_dir_of(ux, dir, name, &d);
	if (r == 0 && !rmdir)
		r = uop_links_up(ux, dir, &d, name);
	if (r == 0)
		r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	snprintf(in.sn_from_name, sizeof(in.sn_from_name), "%s", name);
	uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpre);
	r = urm_txn(ux, t, dir, &d, name, rmdir, &gone, &undo, &aside, &done, &forget, &in,
		    &slot, &at);
	if (r == 0 || done) {
		uop_touch_top(&d, at);
		uop_wcc(ux, d.uo_dirs.ds_fd[0], dir, dirpost);
	}
	r = uop_end_durable(ux, t, r, -1, d.uo_dirs.ds_fd[at], -1);
	if (r == -EAGAIN && !top) {
		/* The name's topmost copy went read-only meanwhile: the top branch whites it out. */
		top = true;
		uobj_release(&d);
		goto again;
	}
	/* Not taken by the map: the branch is settled with it again (now, or at the next start). */
	uint_intent_end(ux, slot, &in, r < 0, urm_settle);
	if (r < 0 && done) {
		uop_kept(name, r);
		r = uop_sync_dir(d.uo_dirs.ds_fd[at]);
	}
	if (r < 0)
		goto out;
	/*
	 * The map took it: what was set aside goes for good, and the hard-link index entry.
	 * The name's removal is on disk already; a crash may keep the set-aside file (hidden
	 * under its temporary name), as a kill -9 just before this would.
	 */
	if (aside.ua_tmp[0])
		uop_drop_tmp(d.uo_dirs.ds_fd[at], aside.ua_tmp);
	if (forget)
		uhl_forget(ux, forget);
	udir_invalidate(ux, dir);
	if (gone) {
		udir_invalidate(ux, gone);
		ucache_forget_ino(ux, gone); /* its descriptors */
	}
out:
	if (r < 0)
		uop_fail_wcc(ux, &d, dir, dirpre, dirpost);
	uobj_release(&d);
	return r;
}

int union_remove(struct union_export *ux, uint64_t dir, const char *name,
		 struct stat *dirpre, struct stat *dirpost)
{
	return urm_unlink(ux, dir, name, false, dirpre, dirpost);
}

int union_rmdir(struct union_export *ux, uint64_t dir, const char *name,
		struct stat *dirpre, struct stat *dirpost)
{
	return urm_unlink(ux, dir, name, true, dirpre, dirpost);
}
