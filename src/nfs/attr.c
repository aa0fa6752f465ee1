/* NULL, GETATTR, SETATTR, ACCESS. */
#include <string.h>
#include <unistd.h>

#include "nfs_internal.h"

enum rpc_outcome nfs3_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_getattr(struct rpc_req *rq, void *args, void *res)
{
	GETATTR3args *a = args;
	GETATTR3res *r = res;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat st;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->object, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	r->status = nfs_status(err);
	if (err == 0)
		nfs_fattr(&nc, &st, &r->GETATTR3res_u.resok.obj_attributes);
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_setattr(struct rpc_req *rq, void *args, void *res)
{
	SETATTR3args *a = args;
	SETATTR3res *r = res;
	struct timespec guard;
	struct union_setattr sa;
	struct stat pre, post;
	enum rpc_outcome out;
	struct nfs_call nc;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->object, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	memset(&pre, 0, sizeof(pre));
	memset(&post, 0, sizeof(post));
	nfs_sattr(&a->new_attributes, &sa);
	if (a->guard.check) {
		guard.tv_sec = a->guard.sattrguard3_u.obj_ctime.seconds;
		guard.tv_nsec = a->guard.sattrguard3_u.obj_ctime.nseconds;
	}
	err = union_setattr(nc.nc_ux, nc.nc_ino, &sa, a->guard.check ? &guard : NULL, &pre, &post);
	r->status = nfs_status(err);
	/* resok and resfail are the same wcc_data at the same place. */
	nfs_wcc(&nc, &pre, &post, &r->SETATTR3res_u.resok.obj_wcc);
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

int nfs_access_want(uint32_t requested)
{
	int want = 0;

	if (requested & ACCESS3_READ)
		want |= R_OK;
	/* A directory's entries are changed only by who may also search it. */
	if (requested & (ACCESS3_LOOKUP | ACCESS3_EXECUTE | ACCESS3_MODIFY | ACCESS3_EXTEND |
			 ACCESS3_DELETE))
		want |= X_OK;
	if (requested & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE))
		want |= W_OK;
	return want;
}

uint32_t nfs_access_bits(bool dir, int may, bool read_only, uint32_t requested)
{
	uint32_t granted = 0;

	if (may & R_OK)
		granted |= ACCESS3_READ;
	if (may & X_OK)
		granted |= dir ? ACCESS3_LOOKUP | ACCESS3_EXECUTE : ACCESS3_EXECUTE;
	if (dir && (may & (W_OK | X_OK)) == (W_OK | X_OK))
		granted |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
	else if (!dir && (may & W_OK))
		granted |= ACCESS3_MODIFY | ACCESS3_EXTEND;
	if (read_only)
		granted &= ~(uint32_t)(ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE);
	return granted & requested;
}

enum rpc_outcome nfs3_access(struct rpc_req *rq, void *args, void *res)
{
	ACCESS3args *a = args;
	ACCESS3res *r = res;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat st;
	int err, may;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->object, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&st, 0, sizeof(st));
	err = union_access(nc.nc_ux, nc.nc_ino, nfs_access_want(a->access), &may, &st);
	r->status = nfs_status(err);
	if (err == 0) {
		nfs_post_attr(&nc, &st, &r->ACCESS3res_u.resok.obj_attributes);
		r->ACCESS3res_u.resok.access = nfs_access_bits(S_ISDIR(st.st_mode), may, nc.nc_ro,
							       a->access);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
