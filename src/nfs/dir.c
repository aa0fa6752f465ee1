/*
 * READDIR and READDIRPLUS. The union gives entries in cookie order; we take them until
 * the next one would push the encoded reply past the client's limit, computed from the
 * XDR sizes of what we have put in so far. READDIRPLUS fills up to maxcount: its dircount
 * is only a hint (RFC 1813 lets the server ignore it, and knfsd does), and taking it as a
 * limit would cost clients a round trip per few hundred entries (Linux sends maxcount/8).
 */
#include <arpa/inet.h>
#include <string.h>

#include "nfs_internal.h"

#define XDR_UNIT 4
#define XDR_PAD(n) (((n) + 3u) & ~3u)
/* A post_op_attr: the flag, and the attributes when they follow. */
#define DIR_ATTR_XDR(present) (XDR_UNIT + ((present) ? NFS_FATTR3_XDR : 0))
/* The resok parts around the entries: cookie verifier, list terminator and eof. */
#define DIR_FIXED_XDR (NFS3_COOKIEVERFSIZE + XDR_UNIT + XDR_UNIT)
/* filename3's bound in rpc/nfs3.x (rpcgen makes no constant of it). */
#define DIR_NAME_XDR_MAX 4096

struct dir_fill {
	const struct nfs_call *df_nc;
	bool df_plus;
	uint32_t df_max;         /* READDIR count / READDIRPLUS maxcount */
	uint32_t df_used;
	uint32_t df_n;
	bool df_full;
	entry3 **df_tail;
	entryplus3 **df_tailplus;
};

/* fileid, name and cookie. */
static uint32_t dir_entry_core(size_t namelen)
{
	return 8 + XDR_UNIT + XDR_PAD((uint32_t)namelen) + 8;
}

/* What READDIRPLUS adds to an entry: its post_op_attr and its post_op_fh3. */
static uint32_t dir_entry_plus(bool attrs, bool handle, uint32_t fhlen)
{
	return DIR_ATTR_XDR(attrs) + XDR_UNIT + (handle ? XDR_UNIT + XDR_PAD(fhlen) : 0);
}

static int dir_add(void *ctx, const struct union_dirent *de)
{
	struct dir_fill *df = ctx;
	struct rpc_req *rq = df->df_nc->nc_rq;
	size_t namelen = strlen(de->ud_name);
	/* the "next entry follows" flag, then the entry */
	uint32_t size = XDR_UNIT + dir_entry_core(namelen);
	entryplus3 *ep;
	entry3 *e;
	char *name;

	if (df->df_plus)
		size += dir_entry_plus(de->ud_st != NULL, true, FH_LEN);
	if (size > df->df_max - df->df_used) {
		df->df_full = true;
		return 1;
	}
	name = rpc_alloc(rq, namelen + 1);
	memcpy(name, de->ud_name, namelen);
	if (df->df_plus) {
		ep = rpc_alloc(rq, sizeof(*ep));
		ep->fileid = nfs_fileid(df->df_nc, de->ud_ino);
		ep->name = name;
		ep->cookie = de->ud_cookie;
		nfs_post_attr(df->df_nc, de->ud_st, &ep->name_attributes);
		/* For ".." the union gives the parent's ino, so this is the parent's handle. */
		nfs_post_fh(df->df_nc, de->ud_ino, &ep->name_handle);
		*df->df_tailplus = ep;
		df->df_tailplus = &ep->nextentry;
	} else {
		e = rpc_alloc(rq, sizeof(*e));
		e->fileid = nfs_fileid(df->df_nc, de->ud_ino);
		e->name = name;
		e->cookie = de->ud_cookie;
		*df->df_tail = e;
		df->df_tail = &e->nextentry;
	}
	df->df_used += size;
	df->df_n++;
	return 0;
}

/*
 * The common part: checks the cookie verifier, lists, and says whether the reply is
 * complete. dirst receives the directory's attributes (st_ino 0 when there are none).
 */
static nfsstat3 dir_list(const struct nfs_call *nc, uint64_t cookie, const cookieverf3 verf,
			 struct dir_fill *df, struct stat *dirst, bool *eof)
{
	static const cookieverf3 zero;
	cookieverf3 ours;
	uint32_t fixed;
	int err;

	memset(dirst, 0, sizeof(*dirst));
	err = union_getattr(nc->nc_ux, nc->nc_ino, dirst);
	if (err != 0) {
		dirst->st_ino = 0;
		return nfs_status(err);
	}
	if (!S_ISDIR(dirst->st_mode))
		return NFS3ERR_NOTDIR;
	nfs_cookieverf(nc, ours);
	/* Our cookies never expire; only a verifier from another server is a bad sign. */
	if (cookie != 0 && memcmp(verf, zero, sizeof(zero)) != 0 &&
	    memcmp(verf, ours, sizeof(ours)) != 0)
		return NFS3ERR_BAD_COOKIE;
	fixed = DIR_ATTR_XDR(true) + DIR_FIXED_XDR;
	if (df->df_max < fixed)
		return NFS3ERR_TOOSMALL;
	df->df_used = fixed;
	*eof = false;
	err = union_readdir(nc->nc_ux, nc->nc_ino, cookie, df->df_plus, dir_add, df, eof);
	if (err != 0)
		return nfs_status(err);
	if (df->df_full) {
		*eof = false;
		if (df->df_n == 0)
			return NFS3ERR_TOOSMALL;
	}
	return NFS3_OK;
}

/* Replies larger than the transport carries would be lost; clamp what the client asked. */
static uint32_t dir_clamp(const struct rpc_req *rq, uint32_t count)
{
	return count < nfs_max_io(rq) ? count : nfs_max_io(rq);
}

enum rpc_outcome nfs3_readdir(struct rpc_req *rq, void *args, void *res)
{
	READDIR3args *a = args;
	READDIR3res *r = res;
	READDIR3resok *ok = &r->READDIR3res_u.resok;
	struct dir_fill df;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat dirst;
	bool eof = false;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->dir, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&df, 0, sizeof(df));
	df.df_nc = &nc;
	df.df_max = dir_clamp(rq, a->count);
	df.df_tail = &ok->reply.entries;
	r->status = dir_list(&nc, a->cookie, a->cookieverf, &df, &dirst, &eof);
	if (r->status == NFS3_OK) {
		nfs_post_attr(&nc, &dirst, &ok->dir_attributes);
		nfs_cookieverf(&nc, ok->cookieverf);
		ok->reply.eof = eof;
		/* df_used counted every byte of the resok: one encoding pass will do. */
		rpc_reply_bound(rq, XDR_UNIT + df.df_used);
	} else {
		/* Drop any entries taken before the failure: the failure reply has none. */
		memset(&r->READDIR3res_u, 0, sizeof(r->READDIR3res_u));
		nfs_post_attr(&nc, &dirst, &r->READDIR3res_u.resfail.dir_attributes);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_readdirplus(struct rpc_req *rq, void *args, void *res)
{
	READDIRPLUS3args *a = args;
	READDIRPLUS3res *r = res;
	READDIRPLUS3resok *ok = &r->READDIRPLUS3res_u.resok;
	struct dir_fill df;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat dirst;
	bool eof = false;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->dir, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&df, 0, sizeof(df));
	df.df_nc = &nc;
	df.df_plus = true;
	df.df_max = dir_clamp(rq, a->maxcount);
	df.df_tailplus = &ok->reply.entries;
	r->status = dir_list(&nc, a->cookie, a->cookieverf, &df, &dirst, &eof);
	if (r->status == NFS3_OK) {
		nfs_post_attr(&nc, &dirst, &ok->dir_attributes);
		nfs_cookieverf(&nc, ok->cookieverf);
		ok->reply.eof = eof;
		/* df_used counted every byte of the resok: one encoding pass will do. */
		rpc_reply_bound(rq, XDR_UNIT + df.df_used);
	} else {
		memset(&r->READDIRPLUS3res_u, 0, sizeof(r->READDIRPLUS3res_u));
		nfs_post_attr(&nc, &dirst, &r->READDIRPLUS3res_u.resfail.dir_attributes);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

/* ---- READDIRPLUS's result, encoded fast ---- */

static uint32_t *dir_put32(uint32_t *p, uint32_t v)
{
	*p = htonl(v);
	return p + 1;
}

static uint32_t *dir_put64(uint32_t *p, uint64_t v)
{
	return dir_put32(dir_put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* A variable-length opaque (or string) with its padding. */
static uint32_t *dir_put_opaque(uint32_t *p, const void *data, uint32_t len)
{
	char *c = (char *)dir_put32(p, len);

	memcpy(c, data, len);
	memset(c + len, 0, XDR_PAD(len) - len);
	return (uint32_t *)(void *)(c + XDR_PAD(len));
}

static uint32_t *dir_put_time(uint32_t *p, const nfstime3 *t)
{
	return dir_put32(dir_put32(p, t->seconds), t->nseconds);
}

static uint32_t *dir_put_fattr(uint32_t *p, const fattr3 *a)
{
	p = dir_put32(p, (uint32_t)a->type);
	p = dir_put32(p, a->mode);
	p = dir_put32(p, a->nlink);
	p = dir_put32(p, a->uid);
	p = dir_put32(p, a->gid);
	p = dir_put64(p, a->size);
	p = dir_put64(p, a->used);
	p = dir_put32(p, a->rdev.specdata1);
	p = dir_put32(p, a->rdev.specdata2);
	p = dir_put64(p, a->fsid);
	p = dir_put64(p, a->fileid);
	p = dir_put_time(p, &a->atime);
	p = dir_put_time(p, &a->mtime);
	return dir_put_time(p, &a->ctime);
}

/* The "an entry follows" flag and entry e, as xdr_pointer and xdr_entryplus3 put them. */
static bool_t dir_put_entry(XDR *xdrs, entryplus3 *e)
{
	uint32_t namelen = (uint32_t)strlen(e->name);
	const post_op_fh3 *fh = &e->name_handle;
	uint32_t fhlen = fh->handle_follows ? fh->post_op_fh3_u.handle.data.data_len : 0;
	u_int size = XDR_UNIT + dir_entry_core(namelen) +
		     dir_entry_plus(e->name_attributes.attributes_follow, fh->handle_follows, fhlen);
	bool_t follows = TRUE;
	uint32_t *p;

	if (namelen > DIR_NAME_XDR_MAX || fhlen > NFS3_FHSIZE)
		return FALSE;
	p = (uint32_t *)(void *)XDR_INLINE(xdrs, (int)size);
	if (p == NULL)
		return xdr_bool(xdrs, &follows) && xdr_fileid3(xdrs, &e->fileid) &&
		       xdr_filename3(xdrs, &e->name) && xdr_cookie3(xdrs, &e->cookie) &&
		       xdr_post_op_attr(xdrs, &e->name_attributes) &&
		       xdr_post_op_fh3(xdrs, &e->name_handle);
	p = dir_put32(p, 1);
	p = dir_put64(p, e->fileid);
	p = dir_put_opaque(p, e->name, namelen);
	p = dir_put64(p, e->cookie);
	p = dir_put32(p, e->name_attributes.attributes_follow);
	if (e->name_attributes.attributes_follow)
		p = dir_put_fattr(p, &e->name_attributes.post_op_attr_u.attributes);
	p = dir_put32(p, fh->handle_follows);
	if (fh->handle_follows)
		dir_put_opaque(p, fh->post_op_fh3_u.handle.data.data_val, fhlen);
	return TRUE;
}

bool_t nfs3_xdr_readdirplus_res(XDR *xdrs, READDIRPLUS3res *r)
{
	READDIRPLUS3resok *ok = &r->READDIRPLUS3res_u.resok;
	bool_t last = FALSE;

	if (xdrs->x_op != XDR_ENCODE || r->status != NFS3_OK)
		return xdr_READDIRPLUS3res(xdrs, r);
	if (!xdr_nfsstat3(xdrs, &r->status) || !xdr_post_op_attr(xdrs, &ok->dir_attributes) ||
	    !xdr_cookieverf3(xdrs, ok->cookieverf))
		return FALSE;
	for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry)
		if (!dir_put_entry(xdrs, e))
			return FALSE;
	return xdr_bool(xdrs, &last) && xdr_bool(xdrs, &ok->reply.eof);
}
