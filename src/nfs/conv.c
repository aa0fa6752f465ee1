/* Conversions between struct stat / union types and their NFSv3 wire forms. */
#include <string.h>
#include <sys/sysmacros.h>

#include "nfs_internal.h"

static ftype3 conv_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return NF3DIR;
	case S_IFBLK: return NF3BLK;
	case S_IFCHR: return NF3CHR;
	case S_IFLNK: return NF3LNK;
	case S_IFSOCK: return NF3SOCK;
	case S_IFIFO: return NF3FIFO;
	default: return NF3REG;
	}
}

static void conv_time(const struct timespec *ts, nfstime3 *t)
{
	/* nfstime3 is unsigned 32-bit: times before 1970 or after 2106 wrap, as in every v3 server. */
	t->seconds = (uint32)ts->tv_sec;
	t->nseconds = (uint32)ts->tv_nsec;
}

void nfs_fattr(const struct nfs_call *nc, const struct stat *st, fattr3 *fa)
{
	fa->type = conv_type(st->st_mode);
	fa->mode = st->st_mode & 07777;
	fa->nlink = (uint32)st->st_nlink;
	fa->uid = st->st_uid;
	fa->gid = st->st_gid;
	fa->size = (size3)st->st_size;
	fa->used = (size3)st->st_blocks * 512;
	fa->rdev.specdata1 = major(st->st_rdev);
	fa->rdev.specdata2 = minor(st->st_rdev);
	fa->fsid = union_fsid(nc->nc_ux);
	fa->fileid = nfs_fileid(nc, st->st_ino);
	conv_time(&st->st_atim, &fa->atime);
	conv_time(&st->st_mtim, &fa->mtime);
	conv_time(&st->st_ctim, &fa->ctime);
}

void nfs_post_attr(const struct nfs_call *nc, const struct stat *st, post_op_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	if (st == NULL || st->st_ino == 0)
		return;
	pa->attributes_follow = TRUE;
	nfs_fattr(nc, st, &pa->post_op_attr_u.attributes);
}

void nfs_pre_attr(const struct stat *st, pre_op_attr *pa)
{
	wcc_attr *wa = &pa->pre_op_attr_u.attributes;

	memset(pa, 0, sizeof(*pa));
	if (st == NULL || st->st_ino == 0)
		return;
	pa->attributes_follow = TRUE;
	wa->size = (size3)st->st_size;
	conv_time(&st->st_mtim, &wa->mtime);
	conv_time(&st->st_ctim, &wa->ctime);
}

void nfs_wcc(const struct nfs_call *nc, const struct stat *pre, const struct stat *post,
	     wcc_data *wcc)
{
	nfs_pre_attr(pre, &wcc->before);
	nfs_post_attr(nc, post, &wcc->after);
}

void nfs_post_attr_of(const struct nfs_call *nc, uint64_t ino, post_op_attr *pa)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	if (union_getattr(nc->nc_ux, ino, &st) != 0)
		st.st_ino = 0;
	nfs_post_attr(nc, &st, pa);
}

static void conv_set_time(time_how how, const nfstime3 *t, unsigned bit,
			  struct timespec *ts, unsigned *mask)
{
	if (how == SET_TO_SERVER_TIME) {
		ts->tv_sec = 0;
		ts->tv_nsec = UTIME_NOW;
		*mask |= bit;
	} else if (how == SET_TO_CLIENT_TIME) {
		ts->tv_sec = t->seconds;
		/* A bad nsec would make utimensat fail with EINVAL; clamp instead. */
		ts->tv_nsec = t->nseconds < 1000000000u ? t->nseconds : 999999999;
		*mask |= bit;
	}
}

void nfs_sattr(const sattr3 *in, struct union_setattr *out)
{
	memset(out, 0, sizeof(*out));
	if (in->mode.set_it) {
		out->ua_mask |= USET_MODE;
		out->ua_mode = in->mode.set_mode3_u.mode & 07777;
	}
	if (in->uid.set_it) {
		out->ua_mask |= USET_UID;
		out->ua_uid = in->uid.set_uid3_u.uid;
	}
	if (in->gid.set_it) {
		out->ua_mask |= USET_GID;
		out->ua_gid = in->gid.set_gid3_u.gid;
	}
	if (in->size.set_it) {
		out->ua_mask |= USET_SIZE;
		out->ua_size = in->size.set_size3_u.size;
	}
	conv_set_time(in->atime.set_it, &in->atime.set_atime_u.atime, USET_ATIME,
		      &out->ua_atime, &out->ua_mask);
	conv_set_time(in->mtime.set_it, &in->mtime.set_mtime_u.mtime, USET_MTIME,
		      &out->ua_mtime, &out->ua_mask);
}

void nfs_fh_make(const struct nfs_call *nc, uint64_t ino, nfs_fh3 *out)
{
	/* Generation 0: the store never reuses an ino, so the ino alone names one object. */
	struct fh h = { .fh_export = union_export_id(nc->nc_ux), .fh_ino = ino, .fh_gen = 0 };
	uint8_t *buf = rpc_alloc(nc->nc_rq, FH_LEN);

	fh_encode(&h, nc->nc_ns->ns_handle_key, buf);
	out->data.data_len = FH_LEN;
	out->data.data_val = (char *)buf;
}

void nfs_post_fh(const struct nfs_call *nc, uint64_t ino, post_op_fh3 *out)
{
	out->handle_follows = TRUE;
	nfs_fh_make(nc, ino, &out->post_op_fh3_u.handle);
}

uint64_t nfs_fileid(const struct nfs_call *nc, uint64_t ino)
{
	if (!nc->nc_view)
		return ino;
	return (uint64_t)union_export_id(nc->nc_ux) << 48 | (ino & ((UINT64_C(1) << 48) - 1));
}
