/* LOOKUP, READLINK. */
#include <limits.h>
#include <string.h>

#include "nfs_internal.h"

enum rpc_outcome nfs3_lookup(struct rpc_req *rq, void *args, void *res)
{
	LOOKUP3args *a = args;
	LOOKUP3res *r = res;
	LOOKUP3resok *ok = &r->LOOKUP3res_u.resok;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat st, dirst;
	uint64_t ino;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->what.dir, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&dirst, 0, sizeof(dirst));
	r->status = nfs_name_check(a->what.name, NFS_NAME_LOOKUP);
	if (r->status == NFS3_OK) {
		memset(&st, 0, sizeof(st));
		err = union_lookup_in(nc.nc_ux, nc.nc_ino, a->what.name, &ino, &st, &dirst);
		r->status = nfs_status(err);
		if (err == 0) {
			nfs_fh_make(&nc, ino, &ok->object);
			nfs_post_attr(&nc, &st, &ok->obj_attributes);
		}
	}
	if (r->status == NFS3_OK)
		nfs_post_attr(&nc, &dirst, &ok->dir_attributes);
	else if (dirst.st_ino != 0)
		nfs_post_attr(&nc, &dirst, &r->LOOKUP3res_u.resfail.dir_attributes);
	else
		nfs_post_attr_of(&nc, nc.nc_ino, &r->LOOKUP3res_u.resfail.dir_attributes);
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_readlink(struct rpc_req *rq, void *args, void *res)
{
	READLINK3args *a = args;
	READLINK3res *r = res;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat post;
	size_t len = 0;
	char *buf;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->symlink, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&post, 0, sizeof(post));
	/* One byte more than the union may fill, so the target is always terminated. */
	buf = rpc_alloc(rq, PATH_MAX + 1);
	err = union_readlink(nc.nc_ux, nc.nc_ino, buf, PATH_MAX, &len, &post);
	r->status = nfs_status(err);
	if (err == 0) {
		buf[len < PATH_MAX ? len : PATH_MAX] = '\0';
		r->READLINK3res_u.resok.data = buf;
		nfs_post_attr(&nc, &post, &r->READLINK3res_u.resok.symlink_attributes);
	} else {
		nfs_post_attr(&nc, &post, &r->READLINK3res_u.resfail.symlink_attributes);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
