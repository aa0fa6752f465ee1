/*
 * Handles of the lock manager: NLM names the file a lock is on by its NFS handle, and a lock
 * belongs to the union object the handle names. Taking a lock follows the rules of an NFS
 * call (the export must admit the peer, a view id resolves only for its own client) and
 * knfsd's permission for a lock, so a lock call can reach nothing an NFS call from the same
 * peer could not; releasing one needs only a handle of ours (nfs.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "nfs_internal.h"

static int lockobj_begin_error(nfsstat3 status, enum rpc_outcome out)
{
	if (out != RPC_OUT_REPLY)
		return -EACCES;
	switch (status) {
	case NFS3ERR_BADHANDLE:
	case NFS3ERR_STALE:
		return -ESTALE;
	case NFS3ERR_ACCES:
	case NFS3ERR_PERM:
		return -EACCES;
	case NFS3ERR_JUKEBOX:
		return -EAGAIN;
	default:
		return -EIO;
	}
}

/*
 * A lock is a use of the file: knfsd asks for read permission, or ownership. The owner and
 * root (unsquashed) need no question to the kernel, which costs a descriptor.
 */
static int lockobj_may_lock(const struct nfs_call *nc, enum nfs_lock_use use, struct stat *st)
{
	uint32_t uid = nc->nc_cred.cr_uid;
	int granted = 0, err;

	if (use == NFS_LOCK_WRITE && nc->nc_ro)
		return -EROFS;
	err = union_getattr(nc->nc_ux, nc->nc_ino, st);
	if (err < 0 || st->st_uid == uid || uid == 0)
		return err;
	err = union_access(nc->nc_ux, nc->nc_ino, R_OK, &granted, st);
	if (err == 0 && !(granted & R_OK))
		err = -EACCES;
	return err;
}

int nfs_lock_object(struct nfs_server *ns, const struct rpc_req *rq, const void *fh, size_t fhlen,
		    enum nfs_lock_use use, struct nfs_lock_target *out)
{
	struct rpc_req nfs_rq = *rq;  /* an NFS call's view of the request: ctx is the server */
	nfs_fh3 handle = { .data = { .data_len = (u_int)fhlen, .data_val = (char *)fh } };
	enum rpc_outcome outcome;
	struct nfs_call nc;
	nfsstat3 status;
	struct stat st;
	struct fh h;
	int err;

	memset(out, 0, sizeof(*out));
	if (fh_decode(fh, fhlen, ns->ns_handle_key, &h) != 0)
		return -ESTALE;
	if (use == NFS_LOCK_RELEASE) {
		out->lt_export = h.fh_export;
		out->lt_fileid = h.fh_ino;
		out->lt_regular = true;
		return 0;
	}
	nfs_rq.rq_ctx = ns;
	nfs_rq.rq_arena = NULL;
	if (!nfs_call_begin(&nfs_rq, &handle, NFS_CALL_READS, &nc, &status, &outcome))
		return lockobj_begin_error(status, outcome);
	memset(&st, 0, sizeof(st));
	err = lockobj_may_lock(&nc, use, &st);
	if (err == 0) {
		out->lt_export = union_export_id(nc.nc_ux);
		out->lt_fileid = nc.nc_ino;
		out->lt_regular = S_ISREG(st.st_mode);
	}
	nfs_call_end(&nc);
	/* The lock service goes on as the server (NSM's files), not as the caller. */
	cred_restore();
	rpc_alloc_free(&nfs_rq);
	if (err == -ENOENT)
		err = -ESTALE;
	return err;
}
