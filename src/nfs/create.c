/* CREATE, MKDIR, SYMLINK, MKNOD: each makes one object and answers with the same shape. */
#include <string.h>
#include <sys/sysmacros.h>

#include "nfs_internal.h"

/* Attributes a creating union call reports; zeroed so unfilled ones read as absent. */
struct create_out {
	uint64_t co_ino;
	struct stat co_st;
	struct stat co_dirpre;
	struct stat co_dirpost;
};

static void create_reply(const struct nfs_call *nc, int err, const struct create_out *co,
			 nfsstat3 *status, CREATE3resok *ok, CREATE3resfail *fail)
{
	*status = nfs_status(err);
	if (err != 0) {
		nfs_wcc(nc, &co->co_dirpre, &co->co_dirpost, &fail->dir_wcc);
		return;
	}
	nfs_post_fh(nc, co->co_ino, &ok->obj);
	nfs_post_attr(nc, &co->co_st, &ok->obj_attributes);
	nfs_wcc(nc, &co->co_dirpre, &co->co_dirpost, &ok->dir_wcc);
}

enum rpc_outcome nfs3_create(struct rpc_req *rq, void *args, void *res)
{
	CREATE3args *a = args;
	CREATE3res *r = res;
	enum union_create_how how;
	struct union_setattr sa;
	const uint8_t *verf = NULL;
	struct create_out co;
	enum rpc_outcome out;
	struct nfs_call nc;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->where.dir, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_name_check(a->where.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	memset(&co, 0, sizeof(co));
	memset(&sa, 0, sizeof(sa));
	switch (a->how.mode) {
	case EXCLUSIVE:
		how = UNION_EXCLUSIVE;
		verf = (const uint8_t *)a->how.createhow3_u.verf;
		break;
	case GUARDED:
		how = UNION_GUARDED;
		nfs_sattr(&a->how.createhow3_u.obj_attributes, &sa);
		break;
	default:
		how = UNION_UNCHECKED;
		nfs_sattr(&a->how.createhow3_u.obj_attributes, &sa);
		break;
	}
	err = union_create(nc.nc_ux, nc.nc_ino, a->where.name, how, &sa, verf, &co.co_ino,
			   &co.co_st, &co.co_dirpre, &co.co_dirpost);
	create_reply(&nc, err, &co, &r->status, &r->CREATE3res_u.resok, &r->CREATE3res_u.resfail);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_mkdir(struct rpc_req *rq, void *args, void *res)
{
	MKDIR3args *a = args;
	MKDIR3res *r = res;
	struct union_setattr sa;
	struct create_out co;
	enum rpc_outcome out;
	struct nfs_call nc;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->where.dir, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_name_check(a->where.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	memset(&co, 0, sizeof(co));
	nfs_sattr(&a->attributes, &sa);
	err = union_mkdir(nc.nc_ux, nc.nc_ino, a->where.name, &sa, &co.co_ino, &co.co_st,
			  &co.co_dirpre, &co.co_dirpost);
	create_reply(&nc, err, &co, &r->status, &r->MKDIR3res_u.resok, &r->MKDIR3res_u.resfail);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_symlink(struct rpc_req *rq, void *args, void *res)
{
	SYMLINK3args *a = args;
	SYMLINK3res *r = res;
	struct union_setattr sa;
	struct create_out co;
	enum rpc_outcome out;
	struct nfs_call nc;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->where.dir, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_name_check(a->where.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	if (a->symlink.symlink_data == NULL || a->symlink.symlink_data[0] == '\0') {
		/* symlink(2) refuses an empty target; say so before touching the branch. */
		r->status = NFS3ERR_INVAL;
		goto done;
	}
	memset(&co, 0, sizeof(co));
	nfs_sattr(&a->symlink.symlink_attributes, &sa);
	err = union_symlink(nc.nc_ux, nc.nc_ino, a->where.name, a->symlink.symlink_data, &sa,
			    &co.co_ino, &co.co_st, &co.co_dirpre, &co.co_dirpost);
	create_reply(&nc, err, &co, &r->status, &r->SYMLINK3res_u.resok,
		     &r->SYMLINK3res_u.resfail);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_mknod(struct rpc_req *rq, void *args, void *res)
{
	MKNOD3args *a = args;
	MKNOD3res *r = res;
	mknoddata3 *what = &a->what;
	struct union_setattr sa;
	struct create_out co;
	enum rpc_outcome out;
	struct nfs_call nc;
	dev_t rdev = 0;
	mode_t type;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->where.dir, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	r->status = nfs_name_check(a->where.name, NFS_NAME_CREATE);
	if (r->status != NFS3_OK)
		goto done;
	switch (what->type) {
	case NF3CHR:
	case NF3BLK:
		type = what->type == NF3CHR ? S_IFCHR : S_IFBLK;
		rdev = makedev(what->mknoddata3_u.device.spec.specdata1,
			       what->mknoddata3_u.device.spec.specdata2);
		nfs_sattr(&what->mknoddata3_u.device.dev_attributes, &sa);
		break;
	case NF3SOCK:
	case NF3FIFO:
		type = what->type == NF3SOCK ? S_IFSOCK : S_IFIFO;
		nfs_sattr(&what->mknoddata3_u.pipe_attributes, &sa);
		break;
	default:
		/* Regular files, directories and symlinks have their own procedures. */
		r->status = NFS3ERR_BADTYPE;
		goto done;
	}
	memset(&co, 0, sizeof(co));
	err = union_mknod(nc.nc_ux, nc.nc_ino, a->where.name, type, rdev, &sa, &co.co_ino,
			  &co.co_st, &co.co_dirpre, &co.co_dirpost);
	create_reply(&nc, err, &co, &r->status, &r->MKNOD3res_u.resok, &r->MKNOD3res_u.resfail);
done:
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
