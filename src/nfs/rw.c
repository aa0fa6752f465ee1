/* READ, WRITE, COMMIT. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_internal.h"

/* READ3resok in front of its data: status, post_op_attr with attributes, count, eof, length. */
#define RW_READ_HEAD (4 + 4 + 84 + 4 + 4 + 4)

/* The bytes of cr that say who acts (the unused group slots are not part of it). */
static size_t rw_cred_len(const struct cred *cr)
{
	uint32_t n = cr->cr_ngroups < RPC_MAX_GROUPS ? cr->cr_ngroups : RPC_MAX_GROUPS;

	return offsetof(struct cred, cr_groups) + n * sizeof(cr->cr_groups[0]);
}

enum rpc_outcome nfs3_read(struct rpc_req *rq, void *args, void *res)
{
	READ3args *a = args;
	READ3res *r = res;
	READ3resok *ok = &r->READ3res_u.resok;
	uint32_t count, nread = 0;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat post;
	bool eof = false;
	void *buf;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->file, NFS_CALL_READS, &nc, &r->status, &out))
		return out;
	memset(&post, 0, sizeof(post));
	/* RFC 1813 3.3.6: a server may return less than asked; never more than FSINFO said. */
	count = a->count < nfs_max_io(rq) ? a->count : nfs_max_io(rq);
	buf = rpc_alloc_bulk(rq, count, RW_READ_HEAD);
	err = union_read_as(nc.nc_ux, nc.nc_ino, &nc.nc_cred, rw_cred_len(&nc.nc_cred), a->offset,
			    count, buf, &nread, &eof, &post);
	r->status = nfs_status(err);
	if (err == 0) {
		if (nread > count)
			nread = count;
		nfs_post_attr(&nc, &post, &ok->file_attributes);
		ok->count = nread;
		ok->eof = eof;
		ok->data.data_len = nread;
		ok->data.data_val = buf;
	} else {
		nfs_post_attr(&nc, &post, &r->READ3res_u.resfail.file_attributes);
	}
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

static enum union_stable rw_stable(stable_how how)
{
	switch (how) {
	case UNSTABLE: return UNION_UNSTABLE;
	case DATA_SYNC: return UNION_DATA_SYNC;
	default: return UNION_FILE_SYNC;
	}
}

static stable_how rw_committed(enum union_stable st)
{
	switch (st) {
	case UNION_UNSTABLE: return UNSTABLE;
	case UNION_DATA_SYNC: return DATA_SYNC;
	default: return FILE_SYNC;
	}
}

/* Larger data cannot be in a record (the largest --max-record); no copy is tried for it. */
#define RW_MAX_DATA (64u << 20)

/*
 * WRITE3args with the data left in the record: a 1 MiB WRITE is neither allocated, zeroed
 * nor copied again. A stream that cannot point into its buffer (a record that is not
 * 4-byte aligned) gets a copy, owned by the arguments.
 */
bool_t nfs3_xdr_write_args(XDR *xdrs, struct nfs3_write_args *a)
{
	WRITE3args *w = &a->wa_args;
	u_int len, padded;
	void *p;

	if (xdrs->x_op == XDR_ENCODE)
		return xdr_WRITE3args(xdrs, w);
	if (xdrs->x_op == XDR_FREE) {
		if (a->wa_owned)
			free(w->data.data_val);
		a->wa_owned = false;
		w->data.data_val = NULL;
		w->data.data_len = 0;
		return xdr_nfs_fh3(xdrs, &w->file);
	}
	if (!xdr_nfs_fh3(xdrs, &w->file) || !xdr_offset3(xdrs, &w->offset) ||
	    !xdr_count3(xdrs, &w->count) || !xdr_stable_how(xdrs, &w->stable) ||
	    !xdr_u_int(xdrs, &len))
		return FALSE;
	if (len > RW_MAX_DATA)
		return FALSE;
	w->data.data_len = len;
	w->data.data_val = NULL;
	if (len == 0)
		return TRUE;
	padded = (len + 3) & ~3u;
	p = XDR_INLINE(xdrs, (int)padded);
	if (p != NULL) {
		w->data.data_val = p;
		return TRUE;
	}
	p = malloc(len);
	if (p == NULL)
		return FALSE;
	w->data.data_val = p;
	a->wa_owned = true;
	return xdr_opaque(xdrs, p, len);
}

_Static_assert(NFS_WRITE_VERF_LEN == NFS3_WRITEVERFSIZE, "write verifier size");

enum rpc_outcome nfs3_write(struct rpc_req *rq, void *args, void *res)
{
	WRITE3args *a = args;
	WRITE3res *r = res;
	WRITE3resok *ok = &r->WRITE3res_u.resok;
	enum union_stable stable, committed;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat pre, post;
	uint32_t nwritten = 0;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->file, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	memset(&pre, 0, sizeof(pre));
	memset(&post, 0, sizeof(post));
	if (a->data.data_len < a->count || (uint32_t)a->stable > FILE_SYNC) {
		/* The client promised more data than it sent, or a stability that does not exist. */
		r->status = NFS3ERR_INVAL;
		goto done;
	}
	if (a->offset > (uint64_t)INT64_MAX - a->count) {
		/* Past the largest offset there is: as knfsd, before anything is copied up. */
		r->status = NFS3ERR_FBIG;
		goto done;
	}
	stable = rw_stable(a->stable);
	committed = stable;
	err = union_write_as(nc.nc_ux, nc.nc_ino, &nc.nc_cred, rw_cred_len(&nc.nc_cred),
			     a->offset, a->count, a->data.data_val, stable, &nwritten, &committed,
			     &pre, &post);
	r->status = nfs_status(err);
	if (err == 0) {
		/* What the union reports, never more: the union promises at least stable. */
		ok->count = nwritten;
		ok->committed = rw_committed(committed);
		nfs_write_verf(nc.nc_ns, (uint8_t *)ok->verf);
	}
done:
	/* resok and resfail both begin with the file's wcc_data. */
	nfs_wcc(&nc, &pre, &post, &ok->file_wcc);
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}

enum rpc_outcome nfs3_commit(struct rpc_req *rq, void *args, void *res)
{
	COMMIT3args *a = args;
	COMMIT3res *r = res;
	COMMIT3resok *ok = &r->COMMIT3res_u.resok;
	enum rpc_outcome out;
	struct nfs_call nc;
	struct stat pre, post;
	int err;

	memset(r, 0, sizeof(*r));
	if (!nfs_call_begin(rq, &a->file, NFS_CALL_MODIFIES, &nc, &r->status, &out))
		return out;
	memset(&pre, 0, sizeof(pre));
	memset(&post, 0, sizeof(post));
	/* The whole file is made durable whatever range was asked: RFC 1813 allows it. */
	err = union_commit(nc.nc_ux, nc.nc_ino, &pre, &post);
	r->status = nfs_status(err);
	if (err == 0)
		nfs_write_verf(nc.nc_ns, (uint8_t *)ok->verf);
	nfs_wcc(&nc, &pre, &post, &ok->file_wcc);
	nfs_call_end(&nc);
	return RPC_OUT_REPLY;
}
