/* NULL, GETATTR, SETATTR, ACCESS. */
#include <string.h>

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

uint32_t nfs_access_compute(const struct stat *st, const struct cred *cr, bool read_only,
			    uint32_t requested)
{
	bool dir = S_ISDIR(st->st_mode);
	bool r, w, x, in_group = false;
	unsigned bits;
	uint32_t i, granted = 0;

	if (cr->cr_uid == 0) {
		r = w = true;
		x = dir || (st->st_mode & 0111) != 0;
	} else {
		in_group = cr->cr_gid == st->st_gid;
		for (i = 0; i < cr->cr_ngroups && i < RPC_MAX_GROUPS && !in_group; i++)
			in_group = cr->cr_groups[i] == st->st_gid;
		if (cr->cr_uid == st->st_uid)
			bits = (st->st_mode >> 6) & 7;
		else if (in_group)
			bits = (st->st_mode >> 3) & 7;
		else
			bits = st->st_mode & 7;
		r = bits & 4;
		w = bits & 2;
		x = bits & 1;
	}
	if (r)
		granted |= ACCESS3_READ;
	if (x)
		granted |= ACCESS3_EXECUTE;
	if (dir) {
		/* Changing a directory's entries needs search permission too. */
		if (x)
			granted |= ACCESS3_LOOKUP;
		if (w && x)
			granted |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
	} else if (w) {
		granted |= ACCESS3_MODIFY | ACCESS3_EXTEND;
	}
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
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->object, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&st, 0, sizeof(st));
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	r->status = nfs_status(err);
	if (err == 0) {
		nfs_post_attr(&nc, &st, &r->ACCESS3res_u.resok.obj_attributes);
		r->ACCESS3res_u.resok.access = nfs_access_compute(&st, &nc.nc_cred, nc.nc_ro,
								  a->access);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
