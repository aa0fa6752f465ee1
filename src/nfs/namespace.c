/* REMOVE, RMDIR, RENAME, LINK. */
#include <string.h>

#include "nfs_internal.h"

static enum rpc_outcome ns_remove(struct rpc_req *rq, diropargs3 *obj, bool dir,
				  nfsstat3 *status, wcc_data *wcc)
{
	struct stat pre, post;
	enum rpc_outcome out;
	struct nfs_call nc;
	int err;

	if (!nfs_call_begin(rq, &obj->dir, NFS_CALL_MODIFIES, &nc, status, &out))
		return out;
	*status = nfs_name_check(obj->name, NFS_NAME_REMOVE);
	if (*status == NFS3_OK) {
		memset(&pre, 0, sizeof(pre));
		memset(&post, 0, sizeof(post));
		if (dir)
			err = union_rmdir(nc.nc_ux, nc.nc_ino, obj->name, &pre, &post);
		else
			err = union_remove(nc.nc_ux, nc.nc_ino, obj->name, &pre, &post);
		*status = nfs_status(err);
		nfs_wcc(&nc, &pre, &post, wcc);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_remove(struct rpc_req *rq, void *args, void *res)
{
	REMOVE3args *a = args;
	REMOVE3res *r = res;

	memset(r, 0, sizeof(*r));
	/* resok and resfail are both just the directory's wcc_data. */
	return ns_remove(rq, &a->object, false, &r->status, &r->REMOVE3res_u.resok.dir_wcc);
}

enum rpc_outcome nfs3_rmdir(struct rpc_req *rq, void *args, void *res)
{
	RMDIR3args *a = args;
	RMDIR3res *r = res;

	memset(r, 0, sizeof(*r));
	return ns_remove(rq, &a->object, true, &r->status, &r->RMDIR3res_u.resok.dir_wcc);
}

enum rpc_outcome nfs3_rename(struct rpc_req *rq, void *args, void *res)
{
	RENAME3args *a = args;
	RENAME3res *r = res;
	RENAME3resok *ok = &r->RENAME3res_u.resok;
	struct stat frompre, frompost, topre, topost;
	enum rpc_outcome out;
	struct nfs_call nc;
	uint64_t todir;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->from.dir, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_call_handle(&nc, &a->to.dir, &todir);
	if (r->status == NFS3_OK)
		r->status = nfs_name_check(a->from.name, NFS_NAME_REMOVE);
	if (r->status == NFS3_OK)
		r->status = nfs_name_check(a->to.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	memset(&frompre, 0, sizeof(frompre));
	memset(&frompost, 0, sizeof(frompost));
	memset(&topre, 0, sizeof(topre));
	memset(&topost, 0, sizeof(topost));
	err = union_rename(nc.nc_ux, nc.nc_ino, a->from.name, todir, a->to.name, &frompre,
			   &frompost, &topre, &topost);
	r->status = nfs_status(err);
	/* resok and resfail have the same two wcc_data. */
	nfs_wcc(&nc, &frompre, &frompost, &ok->fromdir_wcc);
	nfs_wcc(&nc, &topre, &topost, &ok->todir_wcc);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_link(struct rpc_req *rq, void *args, void *res)
{
	LINK3args *a = args;
	LINK3res *r = res;
	LINK3resok *ok = &r->LINK3res_u.resok;
	struct stat post, dirpre, dirpost;
	enum rpc_outcome out;
	struct nfs_call nc;
	uint64_t dir;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->file, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_call_handle(&nc, &a->link.dir, &dir);
	if (r->status == NFS3_OK)
		r->status = nfs_name_check(a->link.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	memset(&post, 0, sizeof(post));
	memset(&dirpre, 0, sizeof(dirpre));
	memset(&dirpost, 0, sizeof(dirpost));
	err = union_link(nc.nc_ux, nc.nc_ino, dir, a->link.name, &post, &dirpre, &dirpost);
	r->status = nfs_status(err);
	/* resok and resfail have the same layout. */
	nfs_post_attr(&nc, &post, &ok->file_attributes);
	nfs_wcc(&nc, &dirpre, &dirpost, &ok->linkdir_wcc);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
