/* FSSTAT, FSINFO, PATHCONF. */
#include <stdint.h>
#include <string.h>

#include "nfs_internal.h"

enum rpc_outcome nfs3_fsstat(struct rpc_req *rq, void *args, void *res)
{
	FSSTAT3args *a = args;
	FSSTAT3res *r = res;
	FSSTAT3resok *ok = &r->FSSTAT3res_u.resok;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct statvfs sv;
	struct stat st;
	uint64_t frsize;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->fsroot, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&st, 0, sizeof(st));
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	if (err == 0)
		err = union_statfs(nc.nc_ux, nc.nc_ino, &sv);
	r->status = nfs_status(err);
	if (err == 0) {
		frsize = sv.f_frsize != 0 ? sv.f_frsize : sv.f_bsize;
		nfs_post_attr(&nc, &st, &ok->obj_attributes);
		ok->tbytes = (uint64_t)sv.f_blocks * frsize;
		ok->fbytes = (uint64_t)sv.f_bfree * frsize;
		ok->abytes = (uint64_t)sv.f_bavail * frsize;
		ok->tfiles = sv.f_files;
		ok->ffiles = sv.f_ffree;
		ok->afiles = sv.f_favail;
		ok->invarsec = 0; /* the branches can change at any time */
	} else {
		nfs_post_attr(&nc, &st, &r->FSSTAT3res_u.resfail.obj_attributes);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_fsinfo(struct rpc_req *rq, void *args, void *res)
{
	FSINFO3args *a = args;
	FSINFO3res *r = res;
	FSINFO3resok *ok = &r->FSINFO3res_u.resok;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat st;
	uint32_t io;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->fsroot, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&st, 0, sizeof(st));
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	r->status = nfs_status(err);
	if (err == 0) {
		io = nfs_max_io(rq);
		nfs_post_attr(&nc, &st, &ok->obj_attributes);
		ok->rtmax = ok->rtpref = io;
		ok->wtmax = ok->wtpref = io;
		ok->rtmult = ok->wtmult = 4096;
		ok->dtpref = 65536;
		ok->maxfilesize = union_max_file_size(nc.nc_ux);
		ok->time_delta.seconds = 0;
		ok->time_delta.nseconds = 1;
		ok->properties = FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_pathconf(struct rpc_req *rq, void *args, void *res)
{
	PATHCONF3args *a = args;
	PATHCONF3res *r = res;
	PATHCONF3resok *ok = &r->PATHCONF3res_u.resok;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct statvfs sv;
	struct stat st;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->object, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&st, 0, sizeof(st));
	err = union_getattr(nc.nc_ux, nc.nc_ino, &st);
	r->status = nfs_status(err);
	if (err == 0) {
		nfs_post_attr(&nc, &st, &ok->obj_attributes);
		/* statvfs has no link limit and the union offers no fpathconf: ext4's limit. */
		ok->linkmax = NFS_LINK_MAX;
		ok->name_max = NFS_NAME_MAX;
		if (union_statfs(nc.nc_ux, nc.nc_ino, &sv) == 0 && sv.f_namemax != 0 &&
		    sv.f_namemax < NFS_NAME_MAX)
			ok->name_max = (uint32)sv.f_namemax;
		ok->no_trunc = TRUE;
		ok->chown_restricted = TRUE;
		ok->case_insensitive = FALSE;
		ok->case_preserving = TRUE;
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
