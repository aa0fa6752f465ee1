/*
 * What the caller may do to an object (ACCESS), and the permission checks made before a
 * copy-up, decided as the kernel decides them for the caller: mode bits, groups, POSIX
 * ACLs, privilege.
 */
#include <errno.h>
#include <unistd.h>

#include "fsio.h"
#include "uint.h"

bool uobj_may(const struct uobj *o, int mask)
{
	if (S_ISDIR(o->uo_st.st_mode))
		return fsio_may(o->uo_dirs.ds_fd[0], "", &o->uo_st, mask);
	if (o->uo_fd >= 0)
		return fsio_may(o->uo_fd, "", &o->uo_st, mask);
	return fsio_may(o->uo_pfd, o->uo_rec.si_name, &o->uo_st, mask);
}

/*
 * An O_PATH fd of the copy o serves, checked to be that very copy: *own says whether the
 * caller closes it. Opened as root if need be, like a handle is resolved: the caller's
 * rights are asked of the object itself, not of the directory above it.
 */
static int uacc_fd(const struct uobj *o, int *fd, bool *own)
{
	struct fsio_ids ids;
	struct stat st;
	int r;

	*own = false;
	*fd = S_ISDIR(o->uo_st.st_mode) ? o->uo_dirs.ds_fd[0] : o->uo_fd;
	if (*fd >= 0)
		return 0;
	r = fsio_open_node(o->uo_pfd, o->uo_rec.si_name, fd);
	if (r == -EACCES) {
		fsio_become_root(&ids);
		r = fsio_open_node(o->uo_pfd, o->uo_rec.si_name, fd);
		fsio_restore(&ids);
	}
	if (r == -ENOENT || r == -ENOTDIR)
		return -ESTALE;
	if (r < 0)
		return r;
	*own = true;
	r = fsio_stat(*fd, &st);
	if (r == 0 && (st.st_dev != o->uo_st.st_dev || st.st_ino != o->uo_st.st_ino))
		r = -ESTALE;
	if (r < 0) {
		fsio_close(*fd);
		*own = false;
	}
	return r;
}

/*
 * The kernel is asked about the copy itself, except for writing a copy on a read-only
 * branch: it would refuse for the branch (EROFS), where the question is what the caller
 * may do once copy-up has made the upper copy, which keeps mode, owner and ACL.
 */
static bool uacc_may(int fd, const struct stat *st, bool ask_kernel, int bit)
{
	int r = ask_kernel ? fsio_access(fd, bit) : -ENOSYS;

	return r == -ENOSYS ? fsio_may(fd, "", st, bit) : r == 0;
}

int union_access(struct union_export *ux, uint64_t ino, int want, int *granted,
		 struct stat *st)
{
	static const int bits[] = { R_OK, W_OK, X_OK };
	bool own = false, upper;
	struct uobj o;
	int r, fd = -1;

	*granted = 0;
	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = uacc_fd(&o, &fd, &own);
	if (r < 0)
		goto out;
	upper = ubr_writable(ux, S_ISDIR(o.uo_st.st_mode) ? o.uo_dirs.ds_branch[0] :
						   o.uo_rec.si_branch);
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		if (!(want & bits[i]) || (bits[i] == W_OK && ux->ux_ro))
			continue;
		if (uacc_may(fd, &o.uo_st, bits[i] != W_OK || upper, bits[i]))
			*granted |= bits[i];
	}
	*st = o.uo_st;
	ures_fix_stat(ux, st, ino);
out:
	if (own)
		fsio_close(fd);
	uobj_release(&o);
	return r;
}
