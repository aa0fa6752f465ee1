/*
 * Shared by the NFS and MOUNT handlers in src/nfs/ only: the per-call context, the
 * attribute and handle conversions, and the handler prototypes the dispatch tables use.
 */
#ifndef UNFS_NFS_INTERNAL_H
#define UNFS_NFS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "cred.h"
#include "fh.h"
#include "mount3.h"
#include "nfs.h"
#include "nfs3.h"
#include "rpc.h"
#include "union.h"

/* Largest READ/WRITE per call: what FSINFO advertises, and the cap READ applies. */
#define NFS_MAX_IO_TCP (1024 * 1024)
#define NFS_MAX_IO_UDP (32 * 1024)
/* Largest READ, READDIR or READDIRPLUS reply: the data and the headers around it. */
#define NFS_REPLY_MAX_BIG (NFS_MAX_IO_TCP + 8192)
/*
 * Largest MOUNT DUMP or EXPORT reply, record mark included. The dispatcher holds replies to
 * their bound, and the transport charges a call in flight that much (rpc.h).
 */
#define MNT_REPLY_MAX_TCP (64u << 10)
/* Over UDP a reply goes wherever the datagram claims to come from: a reflection. */
#define MNT_REPLY_MAX_UDP (8u << 10)
/* No way to ask the branch file system through the union; ext4's limit. */
#define NFS_LINK_MAX 65000
#define NFS_NAME_MAX 255
/* XDR size of a fattr3: 5 words, 5 hypers, rdev (2 words) and 3 nfstime3 (2 words each). */
#define NFS_FATTR3_XDR 84

/* One entry of the MOUNT list (DUMP), guarded by ns_mounts_lock. */
struct mount_entry {
	char *me_host;
	char *me_path;
	struct mount_entry *me_next;
};

/* What a procedure does to the export: modifying ones fail with ROFS on a read-only export. */
enum nfs_call_kind { NFS_CALL_READS = 0, NFS_CALL_MODIFIES = 1 };

/* One NFS call between nfs_call_begin() and nfs_call_end(). */
struct nfs_call {
	struct rpc_req *nc_rq;
	struct nfs_server *nc_ns;
	struct union_export *nc_ux;
	struct view *nc_view;        /* held while the call runs when nc_ux is a client's view */
	struct export_opts nc_opts;  /* of the client rule that admitted the caller */
	uint64_t nc_ino;         /* object named by the call's first handle */
	struct cred nc_cred;     /* squashed identity, applied to this thread */
	bool nc_ro;              /* read-only export */
};

/*
 * Decodes the call's first handle, finds its export, checks the export's port rule and
 * applies the squashed credentials to this thread. Returns true when the handler should
 * go on (and later call nfs_call_end()). Otherwise it returns false with the answer in
 * *out: RPC_OUT_REPLY with the error in *status, or a denied RPC.
 */
bool nfs_call_begin(struct rpc_req *rq, const nfs_fh3 *fh, enum nfs_call_kind kind,
		    struct nfs_call *nc, nfsstat3 *status, enum rpc_outcome *out);
/* Gives the thread back its root identity. */
void nfs_call_end(struct nfs_call *nc);
/* Resolves a second handle of the call (RENAME's target dir, LINK's dir): same export only. */
nfsstat3 nfs_call_handle(const struct nfs_call *nc, const nfs_fh3 *fh, uint64_t *ino);

/*
 * The NFS fileid of union inode ino in the call's export: ino itself for an export of the
 * config; in a client's view, ino with the view's export id in the top 16 bits, so copies
 * of one path in two clients' views never share a fileid (each view numbers its inodes
 * from 1).
 */
uint64_t nfs_fileid(const struct nfs_call *nc, uint64_t ino);

/* The calls of ns_views_ops (nfs.h), answering as if there were no views when none are set. */
int nfs_view_for_client(struct nfs_server *ns, int i, const char *addr, struct view **vw,
			struct union_export **ux, char *err, size_t errlen);
nfsstat3 nfs_view_by_id(struct nfs_server *ns, uint16_t id, const char *addr, int *i,
			struct view **vw, struct union_export **ux);
void nfs_view_put(struct nfs_server *ns, struct view *vw);
/* Drops every MOUNT list entry of export (its name): a reload removed it. */
void nfs_mounts_forget(struct nfs_server *ns, const char *export);

/* errno (negative or positive) to nfsstat3, through the one table in status.c. */
nfsstat3 nfs_status(int err);

/* What a name in a diropargs3 is used for: the dot names are checked differently. */
enum nfs_name_use { NFS_NAME_LOOKUP, NFS_NAME_CREATE, NFS_NAME_REMOVE };
/* Rejects names no branch file system could hold, before any union call. */
nfsstat3 nfs_name_check(const char *name, enum nfs_name_use use);

/*
 * Attribute conversions. A struct stat counts as valid when st_ino is not 0 (union inos
 * never are): handlers zero their stat buffers, so a union call that failed before it
 * could fill them yields attributes_follow = FALSE.
 */
void nfs_fattr(const struct nfs_call *nc, const struct stat *st, fattr3 *fa);
void nfs_post_attr(const struct nfs_call *nc, const struct stat *st, post_op_attr *pa);
void nfs_pre_attr(const struct stat *st, pre_op_attr *pa);
void nfs_wcc(const struct nfs_call *nc, const struct stat *pre, const struct stat *post,
	     wcc_data *wcc);
/* Post-op attributes fetched afresh (for replies whose union call returns none). */
void nfs_post_attr_of(const struct nfs_call *nc, uint64_t ino, post_op_attr *pa);
void nfs_sattr(const sattr3 *in, struct union_setattr *out);

/* A handle in rpc_alloc() memory. */
void nfs_fh_make(const struct nfs_call *nc, uint64_t ino, nfs_fh3 *out);
void nfs_post_fh(const struct nfs_call *nc, uint64_t ino, post_op_fh3 *out);

/* Largest READ or WRITE for the transport of rq. */
uint32_t nfs_max_io(const struct rpc_req *rq);

/* True at most once a minute per *last: for warnings clients can trigger at will. */
bool nfs_log_due(_Atomic time_t *last);

/* The client's source port, or -1 for an address family without one. */
int nfs_peer_port(const struct rpc_req *rq);
/* The client's address as text (rpc_addr_text), or "unknown". */
void nfs_peer_host(const struct rpc_req *rq, char *buf, size_t len);
/* The "secure" export option: a source port below 1024. */
bool nfs_peer_secure(const struct rpc_req *rq, const struct export_opts *eo);

/*
 * ACCESS in two steps around union_access(), which asks the kernel as the caller: the
 * R_OK, W_OK and X_OK checks the requested ACCESS3_* bits need, and the ACCESS3_* bits
 * what the caller may do (may) grants, limited to requested. Changing a directory's
 * entries needs W_OK and X_OK; a read-only export never grants MODIFY, EXTEND or DELETE.
 */
int nfs_access_want(uint32_t requested);
uint32_t nfs_access_bits(bool dir, int may, bool read_only, uint32_t requested);

/* The READDIR cookie verifier of an export: constant, never zero. */
void nfs_cookieverf(const struct nfs_call *nc, cookieverf3 out);

/*
 * WRITE's arguments as nfs3_xdr_write_args decodes them: the data points into the call's
 * record (which lives until the reply is encoded) instead of a copy.
 */
struct nfs3_write_args {
	WRITE3args wa_args;
	bool wa_owned;           /* the data is a copy (record not 4-byte aligned), freed with it */
};
bool_t nfs3_xdr_write_args(XDR *xdrs, struct nfs3_write_args *a);

/*
 * READDIRPLUS's result, encoded an entry at a time straight into the reply where the
 * stream lets it (rpcgen's encoder makes some twenty calls per attribute set and recurses
 * once per entry); the same bytes as xdr_READDIRPLUS3res, which does all else.
 */
bool_t nfs3_xdr_readdirplus_res(XDR *xdrs, READDIRPLUS3res *r);

/* Handlers; args and results are the rpcgen types of each procedure. */
enum rpc_outcome nfs3_null(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_getattr(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_setattr(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_lookup(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_access(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_readlink(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_read(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_write(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_create(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_mkdir(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_symlink(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_mknod(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_remove(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_rmdir(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_rename(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_link(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_readdir(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_readdirplus(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_fsstat(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_fsinfo(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_pathconf(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome nfs3_commit(struct rpc_req *rq, void *args, void *res);

enum rpc_outcome mnt_null(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_mnt1(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_mnt3(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_dump(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_umnt(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_umntall(struct rpc_req *rq, void *args, void *res);
enum rpc_outcome mnt_export(struct rpc_req *rq, void *args, void *res);

#endif
