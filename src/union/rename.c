/*
 * Rename, in every combination of layers, keeping the object's ino.
 *
 * The source is brought to the upper first: a lower file is copied up; a lower or merged
 * directory gets an upper copy of itself alone, with a redirect to where its lower copies
 * are, so its contents follow it without a recursive copy (overlayfs's redirect_dir). The
 * move is then one rename in the upper that leaves a whiteout at the old name when a lower
 * branch has it, and replaces whatever is at the new name, a whiteout included. A
 * directory moved over a name a lower branch has is made opaque unless it carries a
 * redirect, so that lower directory does not merge into it.
 *
 * With several writable branches, a file (or a directory of one copy) whose topmost copy
 * is in a writable branch moves within that branch, the target directory getting a copy
 * there if need be, when nothing above it in the target directory would hide it; else it
 * goes the way above, through the top branch. Hidden copies of a moved file's old name in
 * writable branches go with it, so none shows again.
 *
 * When the inode map cannot take the move (a full state file system), a file moved to a
 * name the upper had free (or held a whiteout at) goes back. A move that replaced an upper
 * object, or moved a directory, stays: the reply says what the client will see, success.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

/* Taking back the move of a non-directory that replaced nothing but a whiteout. */
struct urn_undo {
	struct store_undo nu_undo;
	int nu_ffd, nu_tfd;
	const char *nu_from, *nu_to;
	dev_t nu_dev;
	ino_t nu_ino;
	bool nu_left_wh;         /* the move left a whiteout at from */
	bool nu_over_wh;         /* ... and replaced one at to */
};

/* As root: whether from may take the object back (free, or the whiteout the move left). */
static int urn_from_free(const struct urn_undo *u)
{
	struct stat st;
	int r = fsio_statat(u->nu_ffd, u->nu_from, &st);

	if (r == -ENOENT)
		return u->nu_left_wh ? -ESTALE : 0;
	if (r < 0)
		return r;
	return u->nu_left_wh && uwh_is_whiteout(u->nu_ffd, u->nu_from, &st) ? 0 : -EEXIST;
}

static void urn_take_back(void *arg)
{
	struct urn_undo *u = arg;
	unsigned how = u->nu_over_wh ? FSIO_WHITEOUT : 0;
	struct fsio_ids ids;
	struct stat st;
	int r;

	fsio_become_root(&ids);
	r = fsio_statat(u->nu_tfd, u->nu_to, &st);
	if (r == 0 && (st.st_dev != u->nu_dev || st.st_ino != u->nu_ino))
		r = -ESTALE; /* a later change put something else there */
	if (r == 0)
		r = urn_from_free(u);
	if (r == 0)
		r = fsio_rename2(u->nu_tfd, u->nu_to, u->nu_ffd, u->nu_from, how);
	if (r == -EINVAL && how == FSIO_WHITEOUT) {
		r = fsio_rename2(u->nu_tfd, u->nu_to, u->nu_ffd, u->nu_from, 0);
		if (r == 0)
			r = uwh_make(u->nu_tfd, u->nu_to);
	}
	if (r == 0) {
		uop_flush_back(u->nu_ffd);
		if (u->nu_tfd != u->nu_ffd)
			uop_flush_back(u->nu_tfd);
	}
	fsio_restore(&ids);
	if (r < 0)
		log_warn("the inode map did not take a rename, and %s stays at its new name %s (%s)",
			 u->nu_from, u->nu_to, strerror(-r));
}

static void urn_arm_undo(struct store_txn *t, struct urn_undo *u, int ffd, const char *from,
			 int tfd, const char *to, const struct stat *st, bool left_wh,
			 bool over_wh)
{
	u->nu_undo.su_fn = urn_take_back;
	u->nu_undo.su_arg = u;
	u->nu_ffd = ffd;
	u->nu_tfd = tfd;
	u->nu_from = from;
	u->nu_to = to;
	u->nu_dev = st->st_dev;
	u->nu_ino = st->st_ino;
	u->nu_left_wh = left_wh;
	u->nu_over_wh = over_wh;
	store_on_undo(t, &u->nu_undo);
}

/* The store side: the object keeps its ino under its new name. */
static int urn_moved(struct union_export *ux, struct store_txn *t, uint64_t ino,
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

/* Before the transaction (copy-up takes its own): a lower non-directory source goes up. */
static int urn_copy_source(struct union_export *ux, uint64_t fromdir, const struct uobj *fd,
			   const char *fromname)
{
	struct ufound f;
	struct uobj o;
	uint64_t ino;
	int r;

	uobj_init(&o);
	r = ures_map(ux, NULL, fromdir, &fd->uo_dirs, fromname, UFIND_STAT, &f, &ino);
	if (r < 0)
		return r;
	/* A metacopy's data is found by its path, which the rename changes: it is copied in. */
	if (!f.uf_dir && (f.uf_branch != 0 || (S_ISREG(f.uf_st.st_mode) && f.uf_st.st_size > 0))) {
		/* No copy-up for a rename the client may not make. */
		r = uobj_may(fd, W_OK | X_OK) ? 0 : -EACCES;
		if (r == 0 && !uop_sticky_ok(&fd->uo_st, &f.uf_st))
			r = -EPERM;
		if (r == 0)
			r = ures_resolve(ux, NULL, ino, 0, &o);
		if (r == 0 && o.uo_rec.si_branch != 0)
			r = ucopy_up(ux, &o);
		else if (r == 0)
			r = ucopy_data(ux, &o);
	}
	ufound_release(&f);
	uobj_release(&o);
	return r;
}

/*
 * Gives directory ino an upper copy of its own and the marker that keeps its contents
 * right at its new place: a redirect to its lower copies, or opacity over a lower name.
 */
static int urn_dir_marks(struct union_export *ux, struct store_txn *t, uint64_t ino,
			 const struct uobj *td, const char *toname, uint64_t *real)
{
	char *redirect = NULL;
	struct stat ust;
	struct uobj so;
	bool opaque;
	int r, fd;

	r = ures_resolve(ux, t, ino, URES_UPPER | URES_ORIGIN, &so);
	if (r == 0 && so.uo_dirs.ds_branch[0] != 0)
		r = -EROFS;
	if (r < 0)
		goto out;
	fd = so.uo_dirs.ds_fd[0];
	r = fsio_stat(fd, &ust);
	*real = (uint64_t)ust.st_ino; /* the copy the rename moves */
	if (r == 0)
		r = uwh_dir_read(fd, &opaque, &redirect);
	if (r < 0 || opaque)
		goto out;
	if (so.uo_dirs.ds_n > 1 || redirect) {
		/* Always absolute: a plain name would mean a sibling at the new place. */
		if (!redirect || strcmp(redirect, so.uo_origin))
			r = uwh_set_redirect(fd, "", so.uo_origin);
	} else if (ures_lower_has(ux, &td->uo_dirs, 0, toname)) {
		r = uwh_set_opaque(fd, "");
	} else {
		goto out;
	}
	if (r == 0)
		r = fsio_fsync_dir(fd);
out:
	free(redirect);
	uobj_release(&so);
	return r;
}

/*
 * An upper directory at the target holds whiteouts, so the kernel would not replace it:
 * swap a whiteout in for it (the name stays hidden below) and keep it at *tmp.
 */
static int urn_clear_target(int fd, const char *toname, char *tmp, size_t len)
{
	int r;

	r = uwh_tmp_name(tmp, len);
	if (r == 0)
		r = uwh_make(fd, tmp);
	if (r < 0)
		return r;
	r = fsio_rename2(fd, tmp, fd, toname, FSIO_EXCHANGE);
	if (r < 0)
		uop_drop_tmp(fd, tmp);
	return r;
}

/*
 * The move itself, with the client's identity so the kernel checks it; over a whiteout
 * owned by someone else in a sticky directory, as root once the source side is checked.
 */
static int urn_move(int ffd, const char *fromname, int tfd, const char *toname, bool dir,
		    bool over_wh, bool whiteout, const struct stat *fromst,
		    const struct stat *srcst)
{
	unsigned how = whiteout ? FSIO_WHITEOUT : 0;
	struct fsio_ids ids;
	int r;

	/* A directory cannot replace a whiteout: swap them, the whiteout lands at the source. */
	if (dir && over_wh)
		how = FSIO_EXCHANGE;
	r = fsio_rename2(ffd, fromname, tfd, toname, how);
	if (r == -EINVAL && how == FSIO_WHITEOUT) {
		/* A file system without RENAME_WHITEOUT: the whiteout follows the rename. */
		r = fsio_rename2(ffd, fromname, tfd, toname, 0);
		if (r == 0)
			r = uwh_make(ffd, fromname);
		return r;
	}
	if (r == -EPERM && over_wh && uop_sticky_ok(fromst, srcst)) {
		fsio_become_root(&ids);
		r = fsio_rename2(ffd, fromname, tfd, toname, how);
		fsio_restore(&ids);
	}
	if (r == 0 && dir && over_wh && !whiteout) {
		fsio_become_root(&ids);
		r = fsio_unlink(ffd, fromname, false);
		fsio_restore(&ids);
		if (r < 0) /* the whiteout would hide nothing: harmless, but say so */
			log_warn("a stray whiteout was left at %s: %s", fromname, strerror(-r));
		r = 0;
	}
	return r;
}

/* The target: whether it may be replaced, and whether it is the source itself. */
static int urn_target(const struct ufound *sf, const struct ufound *tf, uint64_t sino,
		      uint64_t tino)
{
	if (sino == tino)
		return 1; /* the same object: rename does nothing */
	if (sf->uf_dir && !tf->uf_dir)
		return -ENOTDIR;
	if (!sf->uf_dir && tf->uf_dir)
		return -EISDIR;
	return 0;
}

/*
 * Inside the write transaction: moves fromname of fd to toname of td. *moved once a move
 * that cannot be taken back is made; undo is armed for one that can. Before the first
 * branch change that the map must follow, in (names filled) goes on record at *slot.
 */
static int urn_txn(struct union_export *ux, struct store_txn *t, uint64_t fromdir,
		   const struct uobj *fd, const char *fromname, uint64_t todir,
		   const struct uobj *td, const char *toname, uint8_t b, uint64_t *gone,
		   bool *moved, struct urn_undo *undo, struct store_intent *in, int *slot)
{
	int ffd = uds_fd_of(&fd->uo_dirs, b), tfd = uds_fd_of(&td->uo_dirs, b);
	struct ufound sf, tf;
	bool target, whiteout, over_wh, cleared = false;
	uint64_t sino, tino = 0, real;
	char tmp[64];
	int r;

	ufound_init(&tf);
	if (ffd < 0 || tfd < 0)
		return -ESTALE;
	r = ures_map(ux, t, fromdir, &fd->uo_dirs, fromname, UFIND_STAT | UFIND_BELOW, &sf, &sino);
	if (r == 0 && !sf.uf_dir && sf.uf_branch == b && sf.uf_below && ux->ux_nwritable > 1) {
		urm_hidden_copies(ux, &fd->uo_dirs, fromname, &sf);
		ufound_release(&sf);
		r = ures_map(ux, t, fromdir, &fd->uo_dirs, fromname, UFIND_STAT | UFIND_BELOW,
			     &sf, &sino);
	}
	if (r < 0)
		return r;
	r = ures_map(ux, t, todir, &td->uo_dirs, toname, 0, &tf, &tino);
	target = r == 0;
	if (r == -ENOENT)
		r = 0;
	if (r == 0 && target)
		r = urn_target(&sf, &tf, sino, tino);
	if (r == 0 && target && tf.uf_dir)
		r = udir_empty(ux, &tf.uf_dirs);
	if (r == 0 && sf.uf_branch != b && (!sf.uf_dir || b != 0))
		r = -ESTALE; /* copied up before, replaced since; or moved meanwhile */
	if (r != 0)
		goto out;
	whiteout = sf.uf_branch != b || sf.uf_below;
	real = (uint64_t)sf.uf_st.st_ino;
	if (sf.uf_dir && b == 0)
		r = urn_dir_marks(ux, t, sino, td, toname, &real);
	if (r == 0) {
		/* A directory's marks need no intent: they are right where it stays, too. */
		in->sn_ino = sino;
		*slot = uint_intent_begin(ux, in, STORE_INTENT_RENAME, b, real, sf.uf_st.st_mode);
		r = *slot < 0 ? *slot : 0;
	}
	if (r == 0 && target && tf.uf_dir && tf.uf_branch == b) {
		r = urn_clear_target(tfd, toname, tmp, sizeof(tmp));
		cleared = r == 0;
	}
	if (r == 0)
		r = uop_upper_whiteout(tfd, toname);
	if (r == -EEXIST && target && tf.uf_branch == b)
		r = 0; /* an object in this branch to replace */
	if (r < 0)
		goto out;
	over_wh = r == 1;
	r = urn_move(ffd, fromname, tfd, toname, sf.uf_dir, over_wh, whiteout, &fd->uo_st,
		     &sf.uf_st);
	if (r < 0 && cleared)
		fsio_rename2(tfd, tmp, tfd, toname, FSIO_EXCHANGE); /* put the target back */
	if (r < 0)
		goto out;
	if (sf.uf_dir || (target && tf.uf_branch == b && !over_wh))
		*moved = true;
	else
		urn_arm_undo(t, undo, ffd, fromname, tfd, toname, &sf.uf_st, whiteout, over_wh);
	if (cleared && uwh_purge_dir(tfd, tmp) < 0)
		log_warn("could not remove %s (a replaced directory's whiteouts)", tmp);
	if (target && tf.uf_dir)
		*gone = tino;
	if (target) {
		uint64_t ino;
		bool last = uop_nlink(ux, t, todir, toname, &tf, &ino) <= 1;

		ufd_forget(&tf.uf_st); /* the replaced object's space comes back before the reply */

		r = uop_forget(ux, t, todir, tfd, toname, &tf, last);
		if (r == 0 && last && ino)
			uhl_forget(ux, ino);
	}
	if (r == 0)
		r = urn_moved(ux, t, sino, fromdir, fromname, todir, toname);
out:
	ufound_release(&sf);
	ufound_release(&tf);
	return r < 0 ? r : 0;
}

/*
 * The object a rename replaced, whose record still names the place the moved object now
 * holds: a directory goes (it had to be empty and has one name); a file goes unless a
 * sibling link or the hard-link index keeps it, as uop_forget decides during a rename.
 */
static int urn_settle_replaced(struct union_export *ux, struct store_txn *t, int tfd,
			       const struct store_intent *in, uint64_t tino)
{
	struct store_inode rec;
	struct ufound tf;
	struct uobj o;
	int r;

	r = store_get(t, ux->ux_id, tino, &rec);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	if (rec.si_type != (S_IFDIR >> 12)) {
		ufound_init(&tf);
		tf.uf_branch = rec.si_branch;
		tf.uf_st.st_ino = (ino_t)rec.si_real_ino;
		r = uop_forget(ux, t, in->sn_to, tfd, in->sn_to_name, &tf, false);
		if (r < 0)
			return r;
		r = ures_resolve(ux, t, tino, 0, &o);
		uobj_release(&o);
		if (r != -ESTALE)
			return r;
		uhl_forget(ux, tino);
	}
	r = store_delete(t, ux->ux_id, tino);
	return r == -ENOENT ? 0 : r;
}

int urn_settle(struct union_export *ux, struct store_txn *t, const struct store_intent *in)
{
	struct store_inode rec;
	struct ufound f;
	struct uobj td;
	uint64_t tino;
	int r;

	ufound_init(&f);
	r = ures_resolve(ux, t, in->sn_to, 0, &td);
	if (r == 0)
		r = ures_find(ux, &td.uo_dirs, in->sn_to_name, UFIND_STAT, &f);
	/* Not at the new name: the rename did not happen, and the map is right as it is. */
	if (r < 0 || !uint_is_object(in, &f) || in->sn_ino == 0)
		goto out;
	r = store_get(t, ux->ux_id, in->sn_ino, &rec);
	if (r < 0 || (rec.si_parent == in->sn_to && !strcmp(rec.si_name, in->sn_to_name)))
		goto out; /* no record to move, or the map has the move already */
	if (store_find_name(t, ux->ux_id, in->sn_to, in->sn_to_name, &tino) == 0 &&
	    tino != in->sn_ino)
		r = urn_settle_replaced(ux, t, uds_fd_or_top(&td.uo_dirs, in->sn_branch), in,
					tino);
	/* A directory moves as its upper copy, made inside the rename's lost transaction. */
	if (r == 0 && (rec.si_branch != in->sn_branch || rec.si_real_ino != in->sn_real_ino)) {
		rec.si_branch = in->sn_branch;
		rec.si_real_ino = in->sn_real_ino;
		r = store_update(t, ux->ux_id, &rec);
	}
	if (r == 0)
		r = urn_moved(ux, t, in->sn_ino, in->sn_from, in->sn_from_name, in->sn_to,
			      in->sn_to_name);
	if (r == 0)
		log_info("export %s: a rename of %s to %s cut short by a crash had moved the "
			 "object: the inode map follows it", ux->ux_name, in->sn_from_name,
			 in->sn_to_name);
out:
	ufound_release(&f);
	uobj_release(&td);
	return r == -ENOENT || r == -ESTALE ? 0 : r;
}

/*
 * Whether fromname of fromdir can move within the writable branch of its topmost copy, b
 * (0: the top branch, where every other move goes): a file, or a directory of one copy,
 * with nothing above b in the target directory at toname (not even a whiteout), nor a
 * directory below for a moved directory to merge with. fd and td get a copy in b.
 */
static int urn_place(struct union_export *ux, uint64_t fromdir, const char *fromname,
		     uint64_t todir, const char *toname, struct uobj *fd, struct uobj *td,
		     uint8_t *b)
{
	struct ufound sf;
	bool dir = false;
	int r;

	*b = 0;
	if (ux->ux_nwritable <= 1)
		goto top;
	r = uop_dir_as_is(ux, fromdir, fd);
	if (r == 0)
		r = ures_find(ux, &fd->uo_dirs, fromname, 0, &sf);
	if (r < 0)
		return r;
	if (ubr_writable(ux, sf.uf_branch) && sf.uf_branch != 0 &&
	    (!sf.uf_dir || (sf.uf_dirs.ds_n == 1 && !sf.uf_redirect)))
		*b = sf.uf_branch;
	dir = sf.uf_dir;
	ufound_release(&sf);
	if (*b == 0)
		goto top_again;
	r = uop_dir_in(ux, todir, toname, *b, td);
	if (r < 0)
		return r;
	if (r == 1 || (dir && ures_lower_has(ux, &td->uo_dirs, uds_index_of(&td->uo_dirs, *b),
					     toname)))
		goto top_again;
	return 0;
top_again:
	uobj_release(fd);
	uobj_release(td);
	*b = 0;
top:
	r = uop_dir(ux, fromdir, fromname, fd);
	if (r == 0)
		r = uop_dir(ux, todir, NULL, td);
	return r;
}

/* A rename of a name onto itself changes nothing, once the name is known to exist. */
static int urn_itself(struct union_export *ux, const struct uobj *d, const char *name)
{
	struct ufound f;
	int r = ures_find(ux, &d->uo_dirs, name, UFIND_STAT, &f);

	ufound_release(&f);
	return r;
}

int union_rename(struct union_export *ux, uint64_t fromdir, const char *fromname,
		 uint64_t todir, const char *toname, struct stat *frompre, struct stat *frompost,
		 struct stat *topre, struct stat *topost)
{
	struct store_txn *t;
	struct urn_undo undo;
	struct uobj fd, td;
	uint64_t gone = 0;
	struct store_intent in = { .sn_from = fromdir, .sn_to = todir };
	bool moved = false;
	uint8_t b = 0;
	int r, sfd, tfd, slot = -1;

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
		r = urn_place(ux, fromdir, fromname, todir, toname, &fd, &td, &b);
	if (r == 0 && fromdir == todir && !strcmp(fromname, toname)) {
		r = urn_itself(ux, &fd, fromname);
		uop_out(ux, &fd.uo_st, fromdir, frompre);
		uop_out(ux, &fd.uo_st, fromdir, frompost);
		uop_out(ux, &fd.uo_st, todir, topre);
		uop_out(ux, &fd.uo_st, todir, topost);
		goto out;
	}
	if (r == 0 && b == 0)
		r = urn_copy_source(ux, fromdir, &fd, fromname);
	if (r == 0)
		r = uop_links_up(ux, todir, &td, toname);
	if (r == 0)
		r = uop_begin(ux, &t);
	if (r < 0)
		goto out;
	snprintf(in.sn_from_name, sizeof(in.sn_from_name), "%s", fromname);
	snprintf(in.sn_to_name, sizeof(in.sn_to_name), "%s", toname);
	sfd = uds_fd_of(&fd.uo_dirs, b);
	tfd = uds_fd_of(&td.uo_dirs, b);
	uop_wcc(ux, fd.uo_dirs.ds_fd[0], fromdir, frompre);
	uop_wcc(ux, td.uo_dirs.ds_fd[0], todir, topre);
	r = urn_txn(ux, t, fromdir, &fd, fromname, todir, &td, toname, b, &gone, &moved, &undo,
		    &in, &slot);
	if (r == 0 || moved) {
		uop_touch_top(&fd, uds_index_of(&fd.uo_dirs, b));
		uop_touch_top(&td, uds_index_of(&td.uo_dirs, b));
		uop_wcc(ux, fd.uo_dirs.ds_fd[0], fromdir, frompost);
		uop_wcc(ux, td.uo_dirs.ds_fd[0], todir, topost);
	}
	r = uop_end_durable(ux, t, r, -1, sfd, fromdir != todir ? tfd : -1);
	/* Not taken by the map: the branch is settled with it again (now, or at the next start). */
	uint_intent_end(ux, slot, &in, r < 0, urn_settle);
	if (r < 0 && moved) {
		uop_kept(toname, r);
		r = uop_sync_dir(sfd);
		if (r == 0 && fromdir != todir)
			r = uop_sync_dir(tfd);
	}
	if (r < 0)
		goto out;
	udir_invalidate(ux, fromdir);
	udir_invalidate(ux, todir);
	if (gone) {
		udir_invalidate(ux, gone);
		ucache_forget_ino(ux, gone); /* its descriptors */
	}
out:
	if (r < 0) {
		uop_fail_wcc(ux, &fd, fromdir, frompre, frompost);
		uop_fail_wcc(ux, &td, todir, topre, topost);
	}
	uobj_release(&fd);
	uobj_release(&td);
	return r;
}
