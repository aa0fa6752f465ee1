/*
 * Metadata-only copies (overlayfs's metacopy=on): a change of a lower file's mode, owner
 * or times gives it an upper copy holding the new attributes and no data: a sparse file
 * of the lower's size marked trusted.overlay.metacopy (copyup.c makes it). Its data stays
 * the lower copy's, found as overlayfs finds it: the next copy of its name below it in
 * the merged parent, or, when the file carries a redirect (overlayfs sets one on a metacopy
 * it renames or links), that path from the lower branches' roots, or that name in the
 * parent for a plain name (a rename within one directory). The first write completes the
 * copy (ucopy_data): nothing else ever reads the upper's own blocks while the marker is on.
 *
 * A metacopy's blocks are its lower copy's, as overlayfs shows them: what umc_learn found
 * is kept by the metacopy's (device, inode, ctime), so any change of it (the completion
 * included) forgets it, and every attribute reply (ures_fix_stat) shows it at no cost.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

#define UMC_BLOCKS_SLOTS 4096 /* direct-mapped: a clash only costs a later look again */

struct umc_blocks {
	dev_t mb_dev;
	ino_t mb_ino;
	struct timespec mb_ctime;
	blkcnt_t mb_blocks;          /* -1: no metacopy */
};

static pthread_mutex_t umc_blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct umc_blocks umc_blocks[UMC_BLOCKS_SLOTS];

static struct umc_blocks *umc_slot(const struct stat *st)
{
	uint64_t h = ((uint64_t)st->st_dev * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)st->st_ino;

	return &umc_blocks[(h ^ (h >> 29)) % UMC_BLOCKS_SLOTS];
}

static bool umc_same(const struct umc_blocks *b, const struct stat *st)
{
	return b->mb_ino == st->st_ino && b->mb_dev == st->st_dev && b->mb_ino != 0 &&
	       b->mb_ctime.tv_sec == st->st_ctim.tv_sec && b->mb_ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* Whether st looks like a metacopy's: fewer blocks than its size needs (sparse). */
static bool umc_sparse(const struct stat *st)
{
	return S_ISREG(st->st_mode) && (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size;
}

/* What is known of st's object: 1 with its lower blocks, 0 no metacopy, -1 unknown. */
static int umc_known(const struct stat *st, blkcnt_t *blocks)
{
	struct umc_blocks *b = umc_slot(st);
	int r = -1;

	pthread_mutex_lock(&umc_blocks_lock);
	if (umc_same(b, st)) {
		*blocks = b->mb_blocks;
		r = b->mb_blocks >= 0;
	}
	pthread_mutex_unlock(&umc_blocks_lock);
	return r;
}

static void umc_note(const struct stat *st, blkcnt_t blocks)
{
	struct umc_blocks *b = umc_slot(st);

	pthread_mutex_lock(&umc_blocks_lock);
	*b = (struct umc_blocks){ .mb_dev = st->st_dev, .mb_ino = st->st_ino,
				  .mb_ctime = st->st_ctim, .mb_blocks = blocks };
	pthread_mutex_unlock(&umc_blocks_lock);
}

void umc_fix_blocks(struct stat *st)
{
	blkcnt_t blocks;

	if (umc_sparse(st) && umc_known(st, &blocks) == 1)
		st->st_blocks = blocks;
}

void umc_learn(struct union_export *ux, const struct uobj *o)
{
	struct stat lst;
	blkcnt_t blocks;
	bool metacopy;
	int fd;

	if (!umc_sparse(&o->uo_st) || !umc_candidate(ux, o) || umc_known(&o->uo_st, &blocks) >= 0)
		return;
	if (umc_is(ux, o, -1, &metacopy) < 0)
		return;
	if (metacopy && umc_data_open(ux, o, &fd, &lst) == 0) {
		umc_note(&o->uo_st, lst.st_blocks);
		fsio_close(fd);
	} else if (!metacopy) {
		umc_note(&o->uo_st, -1);
	}
}

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

/*
 * The data at name in the copies of a directory from index at down: its index with it
 * opened into *fd, or -ENOENT when none holds it (or a marker hides it), or -errno.
 */
static int umc_in_copies(const struct udirset *ds, int at, const char *name, int *fd)
{
	int r = 0;

	for (; at < ds->ds_n && r == 0; at++)
		r = umc_try(ds->ds_fd[at], name, fd);
	return r == 1 ? at - 1 : r < 0 ? r : -ENOENT;
}

/* The copies of name (its own, or a relative redirect's) below it in its merged parent. */
static int umc_by_name(struct union_export *ux, const struct uobj *o, const char *name, int *fd)
{
	struct uobj parent;
	int r, at = 0;

	r = ures_resolve_cached(ux, o->uo_rec.si_parent, &parent);
	if (r == 0 && !S_ISDIR(parent.uo_st.st_mode))
		r = -ESTALE;
	/* The copies are top-down: those below it follow its own branch's. */
	while (r == 0 && at < parent.uo_dirs.ds_n &&
	       parent.uo_dirs.ds_branch[at] <= o->uo_rec.si_branch)
		at++;
	if (r == 0)
		r = umc_in_copies(&parent.uo_dirs, at, name, fd);
	uobj_release(&parent);
	return r < 0 ? r : 0;
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
		r = redirect && redirect[0] == '/' ?
			    umc_by_redirect(ux, o->uo_rec.si_branch, redirect, fd) :
			    umc_by_name(ux, o, redirect ? redirect : o->uo_rec.si_name, fd);
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

	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0 && !S_ISDIR(o.uo_st.st_mode))
		r = umc_is(ux, &o, -1, &metacopy);
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

bool umc_made_of(struct union_export *ux, const struct udirset *parent, int pidx,
		 const char *name, const struct stat *st, const struct store_inode *rec)
{
	struct stat lst;
	bool metacopy = false, same = false;
	uint64_t id = 0;
	int fd = -1, i;

	if (!S_ISREG(st->st_mode) || st->st_size <= 0 ||
	    uwh_metacopy_read(parent->ds_fd[pidx], name, &metacopy, NULL) < 0 || !metacopy)
		return false;
	i = umc_in_copies(parent, pidx + 1, name, &fd);
	if (i < 0)
		return false;
	if (parent->ds_branch[i] == rec->si_branch && fsio_stat(fd, &lst) == 0 &&
	    ures_same_number(&lst, ux->ux_dev[rec->si_branch], rec->si_real_ino, rec->si_type))
		same = rec->si_real_id == 0 ||
		       (fsio_ident(fd, "", &id) == 0 && (id == 0 || id == rec->si_real_id));
	fsio_close(fd);
	return same;
}
