/*
 * READDIR and READDIRPLUS. The union gives entries in cookie order; we take them until
 * the next one would push the encoded reply past the client's limit, computed from the
 * XDR sizes of what we have put in so far. READDIRPLUS fills up to maxcount: its dircount
 * is only a hint (RFC 1813 lets the server ignore it, and knfsd does), and taking it as a
 * limit would cost clients a round trip per few hundred entries (Linux sends maxcount/8).
 */
#include <string.h>

#include "nfs_internal.h"

#define XDR_UNIT 4
#define XDR_PAD(n) (((n) + 3u) & ~3u)
/* A post_op_attr: the flag, and the attributes when they follow. */
#define DIR_ATTR_XDR(present) (XDR_UNIT + ((present) ? NFS_FATTR3_XDR : 0))
/* The resok parts around the entries: cookie verifier, list terminator and eof. */
#define DIR_FIXED_XDR (NFS3_COOKIEVERFSIZE + XDR_UNIT + XDR_UNIT)

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
		size += DIR_ATTR_XDR(de->ud_st != NULL) + XDR_UNIT + XDR_UNIT + FH_LEN;
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
