/*
 * errno -> nfsstat3: the one table. The union layer and the branch file systems speak
 * errno; this is where it becomes NFS.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "log.h"
#include "nfs_internal.h"

static const struct {
	int se_errno;
	nfsstat3 se_status;
} status_table[] = {
	{ EPERM, NFS3ERR_PERM },
	{ ENOENT, NFS3ERR_NOENT },
	{ EIO, NFS3ERR_IO },
	{ ENXIO, NFS3ERR_NXIO },
	{ EACCES, NFS3ERR_ACCES },
	{ EEXIST, NFS3ERR_EXIST },
	{ EXDEV, NFS3ERR_XDEV },
	{ ENODEV, NFS3ERR_NODEV },
	{ ENOTDIR, NFS3ERR_NOTDIR },
	{ EISDIR, NFS3ERR_ISDIR },
	{ EINVAL, NFS3ERR_INVAL },
	{ EFBIG, NFS3ERR_FBIG },
	{ ENOSPC, NFS3ERR_NOSPC },
	{ EROFS, NFS3ERR_ROFS },
	{ EMLINK, NFS3ERR_MLINK },
	{ ENAMETOOLONG, NFS3ERR_NAMETOOLONG },
	{ ENOTEMPTY, NFS3ERR_NOTEMPTY },
	{ EDQUOT, NFS3ERR_DQUOT },
	{ ESTALE, NFS3ERR_STALE },
	/* The union layer's SETATTR guard mismatch (RFC 1813 3.3.2). */
	{ EAGAIN, NFS3ERR_NOT_SYNC },
	/* A call parked to wait for a copy-up: the dispatcher drops this answer and runs it again. */
	{ EINPROGRESS, NFS3ERR_JUKEBOX },
	/*
	 * Out of descriptors or memory, even after the caches gave theirs back: a moment's
	 * shortage, never the object's fault; the client waits and tries again.
	 */
	{ EMFILE, NFS3ERR_JUKEBOX },
	{ ENFILE, NFS3ERR_JUKEBOX },
	{ ENOMEM, NFS3ERR_JUKEBOX },
	{ ENOTSUP, NFS3ERR_NOTSUPP },
#if EOPNOTSUPP != ENOTSUP
	{ EOPNOTSUPP, NFS3ERR_NOTSUPP },
#endif
	/*
	 * The server never follows symlinks (O_NOFOLLOW everywhere), so ELOOP means a call
	 * applied to a symlink something only another type supports, e.g. READ or WRITE:
	 * RFC 1813 answers those with INVAL (Linux nfsd does the same for v3).
	 */
	{ ELOOP, NFS3ERR_INVAL },
	{ EOVERFLOW, NFS3ERR_FBIG },
	{ ETXTBSY, NFS3ERR_ACCES },
};

#define STATUS_LOGGED_MAX 512

nfsstat3 nfs_status(int err)
{
	static atomic_bool logged[STATUS_LOGGED_MAX + 1];
	size_t i;

	if (err < 0)
		err = -err;
	if (err == 0)
		return NFS3_OK;
	for (i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++)
		if (status_table[i].se_errno == err)
			return status_table[i].se_status;
	/* Unknown errors are rare and may come in floods: say each one once. */
	if (!atomic_exchange(&logged[err < STATUS_LOGGED_MAX ? err : STATUS_LOGGED_MAX], true))
		log_warn("file system error %d (%s) has no NFS equivalent; clients see NFS3ERR_IO",
			 err, strerror(err));
	return NFS3ERR_IO;
}
