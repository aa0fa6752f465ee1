/*
 * Handles of the lock manager: NLM names the file a lock is on by its NFS handle, and a lock
 * belongs to the union object the handle names. The same rules as an NFS call apply (the
 * export must admit the peer, a view id resolves only for its own client), so a lock call
 * can reach nothing an NFS call from the same peer could not.
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

int nfs_lock_object(struct nfs_server *ns, const struct rpc_req *rq, const void *fh, size_t fhlen,
		    struct nfs_lock_target *out)
{
	struct rpc_req nfs_rq = *rq;  /* an NFS call's view of the request: ctx is the server */
	nfs_fh3 handle = { .data = { .data_len = (u_int)fhlen, .data_val = (char *)fh } };
	enum rpc_outcome outcome;
	struct nfs_call nc;
	nfsstat3 status;
	struct stat st;
	int err;

	memset(out, 0, sizeof(*out));
	if (fhlen > NFS3_FHSIZE)
		return -ESTALE;
	nfs_rq.rq_ctx = ns;
	nfs_rq.rq_arena = NULL;
	if (!nfs_call_begin(&nfs_rq, &handle, NFS_CALL_READS, &nc, &status, &outcome))
		return lockobj_begin_error(status, outcome);
	memset(&st, 0, sizeof(st));
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	if (err == 0) {
		out->lt_export = union_export_id(nc.nc_ux);
		out->lt_fileid = nc.nc_ino;
		out->lt_regular = S_ISREG(st.st_mode);
		out->lt_read_only = nc.nc_ro;
	}
	nfs_call_end(&nc);
	/* The lock service goes on as the server (NSM's files), not as the caller. */
	cred_restore();
	rpc_alloc_free(&nfs_rq);
	if (err == -ENOENT)
		err = -ESTALE;
	return err;
}
