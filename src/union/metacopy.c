/*
 * Metadata-only copies (overlayfs's metacopy=on): a change of a lower file's mode, owner
 * or times gives it an upper copy holding the new attributes and no data: a sparse file
 * of the lower's size marked trusted.overlay.metacopy (copyup.c makes it). Its data stays
 * the lower copy's, found as overlayfs finds it: the next copy of its name below it in
 * the merged parent, or, when the file carries an absolute redirect (overlayfs sets one
 * on a metacopy it renames or links), that path from the lower branches' roots. The first
 * write completes the copy (ucopy_data): nothing else ever reads the upper's own blocks
 * while the marker is on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

bool umc_candidate(const struct union_export *ux, const struct uobj *o)
{
	return S_ISREG(o->uo_st.st_mode) && o->uo_st.st_size > 0 &&
	       ubr_writable(ux, o->uo_rec.si_branch) &&
	       o->uo_rec.si_branch + 1 < ux->ux_nbranches;
}

int umc_is(const struct union_export *ux, const struct uobj *o, int fd, bool *metacopy)
{
	*metacopy = false;
	if (!umc_candidate(ux, o))
		return 0;
	return fd >= 0 ? uwh_metacopy_read(fd, "", metacopy, NULL) :
			 uwh_metacopy_read(o->uo_pfd, o->uo_rec.si_name, metacopy, NULL);
}

/*
 * The data at name in dirfd (branch b): 1 with it opened (as root) into *fd, 0 when
 * nothing is there and the next branch may have it, -ENOENT when something there hides
 * it (a whiteout, a directory, ...).
 */
static int umc_try(int dirfd, const char *name, int *fd)
{
	struct fsio_ids ids;
	struct stat st;
	int r;

	r = uwh_statat(dirfd, name, &st);
	if (r == -ENOENT)
		return uwh_oci(dirfd, name) ? -ENOENT : 0;
	if (r < 0)
		return r;
	if (!S_ISREG(st.st_mode) || uwh_is_whiteout(dirfd, name, &st))
		return -ENOENT;
	fsio_become_root(&ids);
	r = fsio_open_file(dirfd, name, O_RDONLY | O_NOATIME, 0, fd);
	if (r == -EPERM) /* O_NOATIME on a file system that refuses it */
		r = fsio_open_file(dirfd, name, O_RDONLY, 0, fd);
	fsio_restore(&ids);
	return r < 0 ? r : 1;
}

/* Follows an absolute redirect through the branches below branch top. */
static int umc_by_redirect(struct union_export *ux, uint8_t top, const char *path, int *fd)
{
	char last[STORE_NAME_MAX + 1];
	int r = 0, dirfd;

	for (int b = top + 1; b < ux->ux_nbranches && r == 0; b++) {
		r = ufind_walk(ux, (uint8_t)b, path, &dirfd, last);
		if (r == -ENOENT) {
			r = 0;
			continue;
		}
		if (r == -ENOTDIR)
			return -ENOENT;
		if (r < 0)
			return r;
		r = umc_try(dirfd, last, fd);
		fsio_close(dirfd);
	}
	return r == 1 ? 0 : r < 0 ? r : -ENOENT;
}

/* The copies of its own name below it in its merged parent. */
static int umc_by_name(struct union_export *ux, const struct uobj *o, int *fd)
{
	struct uobj parent;
	int r;

	r = ures_resolve_cached(ux, o->uo_rec.si_parent, &parent);
	if (r == 0 && !S_ISDIR(parent.uo_st.st_mode))
		r = -ESTALE;
	for (int i = 0; r == 0 && i < parent.uo_dirs.ds_n; i++)
		if (parent.uo_dirs.ds_branch[i] > o->uo_rec.si_branch)
			r = umc_try(parent.uo_dirs.ds_fd[i], o->uo_rec.si_name, fd);
	uobj_release(&parent);
	return r == 1 ? 0 : r < 0 ? r : -ENOENT;
}

int umc_data_open(struct union_export *ux, const struct uobj *o, int *fd, struct stat *st)
{
	char *redirect = NULL;
	bool metacopy;
	int r;

	*fd = -1;
	r = uwh_metacopy_read(o->uo_pfd, o->uo_rec.si_name, &metacopy, &redirect);
	if (r == 0 && !metacopy)
		r = -ENODATA;
	if (r == 0)
		r = redirect ? umc_by_redirect(ux, o->uo_rec.si_branch, redirect, fd) :
			       umc_by_name(ux, o, fd);
	if (r == 0)
		r = fsio_stat(*fd, st);
	if (r == -ENOENT)
		log_debug("export %s: metacopy ino %" PRIu64 " (%s): no lower copy holds its data",
			  ux->ux_name, o->uo_rec.si_ino, redirect ? redirect : o->uo_rec.si_name);
	free(redirect);
	if (r < 0) {
		fsio_close(*fd);
		*fd = -1;
	}
	/* Its data gone is no error of the call's making, nor of the client's. */
	return r == -ENOENT || r == -ENOTDIR ? -EIO : r;
}

int umc_check(struct union_export *ux, uint64_t ino)
{
	struct stat st;
	struct uobj o;
	bool metacopy = false;
	int r, fd = -1;

	r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r == 0 && !S_ISDIR(o.uo_st.st_mode))
		r = umc_is(ux, &o, o.uo_fd, &metacopy);
	if (r == 0 && metacopy) {
		r = umc_data_open(ux, &o, &fd, &st);
		fsio_close(fd);
		if (r == -EIO)
			r = -ENOLINK;
		else if (r == -ENODATA)
			r = 0; /* made whole meanwhile */
	}
	uobj_release(&o);
	return r;
}
