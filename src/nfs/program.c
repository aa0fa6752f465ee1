/*
 * The dispatch tables of NFS v3 and MOUNT v1-v3: for each procedure its XDR routines,
 * argument and result sizes, handler and how its result tells its status; for each
 * program its name in the statistics and which replies may be large.
 */
#include <string.h>

#include "nfs_internal.h"

/* Every NFS v3 result (but NULL's) is a union switched on its nfsstat3, first. */
static enum rpc_status nfs3_status(uint32_t vers, uint32_t proc, const void *res)
{
	nfsstat3 status;

	(void)vers;
	if (proc == NFSPROC3_NULL)
		return RPC_STATUS_OK;
	memcpy(&status, res, sizeof(status));
	if (status == NFS3_OK)
		return RPC_STATUS_OK;
	return status == NFS3ERR_STALE ? RPC_STATUS_STALE : RPC_STATUS_ERROR;
}

static const struct rpc_proc nfs3_procs[] = {
	RPC_PROC_VOID("NULL", nfs3_null),
	RPC_PROC("GETATTR", GETATTR3args, GETATTR3res, nfs3_getattr),
	RPC_PROC("SETATTR", SETATTR3args, SETATTR3res, nfs3_setattr),
	RPC_PROC("LOOKUP", LOOKUP3args, LOOKUP3res, nfs3_lookup),
	RPC_PROC("ACCESS", ACCESS3args, ACCESS3res, nfs3_access),
	RPC_PROC("READLINK", READLINK3args, READLINK3res, nfs3_readlink),
	RPC_PROC("READ", READ3args, READ3res, nfs3_read),
	{ "WRITE", RPC_XDRPROC(nfs3_xdr_write_args), sizeof(struct nfs3_write_args),
	  RPC_XDRPROC(xdr_WRITE3res), sizeof(WRITE3res), nfs3_write },
	RPC_PROC("CREATE", CREATE3args, CREATE3res, nfs3_create),
	RPC_PROC("MKDIR", MKDIR3args, MKDIR3res, nfs3_mkdir),
	RPC_PROC("SYMLINK", SYMLINK3args, SYMLINK3res, nfs3_symlink),
	RPC_PROC("MKNOD", MKNOD3args, MKNOD3res, nfs3_mknod),
	RPC_PROC("REMOVE", REMOVE3args, REMOVE3res, nfs3_remove),
	RPC_PROC("RMDIR", RMDIR3args, RMDIR3res, nfs3_rmdir),
	RPC_PROC("RENAME", RENAME3args, RENAME3res, nfs3_rename),
	RPC_PROC("LINK", LINK3args, LINK3res, nfs3_link),
	RPC_PROC("READDIR", READDIR3args, READDIR3res, nfs3_readdir),
	{ "READDIRPLUS", RPC_XDRPROC(xdr_READDIRPLUS3args), sizeof(READDIRPLUS3args),
	  RPC_XDRPROC(nfs3_xdr_readdirplus_res), sizeof(READDIRPLUS3res), nfs3_readdirplus },
	RPC_PROC("FSSTAT", FSSTAT3args, FSSTAT3res, nfs3_fsstat),
	RPC_PROC("FSINFO", FSINFO3args, FSINFO3res, nfs3_fsinfo),
	RPC_PROC("PATHCONF", PATHCONF3args, PATHCONF3res, nfs3_pathconf),
	RPC_PROC("COMMIT", COMMIT3args, COMMIT3res, nfs3_commit),
};

static const struct rpc_proc *const nfs3_versions[] = { nfs3_procs };
static const uint32_t nfs3_nprocs[] = { sizeof(nfs3_procs) / sizeof(nfs3_procs[0]) };
/* Running these twice differs from running them once: retransmissions go through drc.h. */
static const uint32_t nfs3_nonidempotent[] = {
	1u << NFSPROC3_SETATTR | 1u << NFSPROC3_WRITE | 1u << NFSPROC3_CREATE |
	1u << NFSPROC3_MKDIR | 1u << NFSPROC3_SYMLINK | 1u << NFSPROC3_MKNOD |
	1u << NFSPROC3_REMOVE | 1u << NFSPROC3_RMDIR | 1u << NFSPROC3_RENAME | 1u << NFSPROC3_LINK,
};

/* Replies that carry data or a listing up to the transfer size. */
static const uint32_t nfs3_big_replies[] = {
	1u << NFSPROC3_READ | 1u << NFSPROC3_READDIR | 1u << NFSPROC3_READDIRPLUS,
};

const struct rpc_program nfs3_program = {
	.rg_prog = NFS_PROGRAM,
	.rg_name = "nfs",
	.rg_vers_min = NFS_V3,
	.rg_vers_max = NFS_V3,
	.rg_procs = nfs3_versions,
	.rg_nprocs = nfs3_nprocs,
	.rg_nonidempotent = nfs3_nonidempotent,
	.rg_big_replies = nfs3_big_replies,
	.rg_reply_big = NFS_REPLY_MAX_BIG,
	.rg_status = nfs3_status,
};

/* Versions 1 and 2 differ from 3 only in MNT's reply (v2's extra PATHCONF is not served). */
static const struct rpc_proc mnt1_procs[] = {
	RPC_PROC_VOID("NULL", mnt_null),
	RPC_PROC("MNT", dirpath, fhstatus, mnt_mnt1),
	RPC_PROC_NOARGS("DUMP", mountlist, mnt_dump),
	RPC_PROC_NORES("UMNT", dirpath, mnt_umnt),
	RPC_PROC_VOID("UMNTALL", mnt_umntall),
	RPC_PROC_NOARGS("EXPORT", mntexports, mnt_export),
};

static const struct rpc_proc mnt3_procs[] = {
	RPC_PROC_VOID("NULL", mnt_null),
	RPC_PROC("MNT", dirpath, mountres3, mnt_mnt3),
	RPC_PROC_NOARGS("DUMP", mountlist, mnt_dump),
	RPC_PROC_NORES("UMNT", dirpath, mnt_umnt),
	RPC_PROC_VOID("UMNTALL", mnt_umntall),
	RPC_PROC_NOARGS("EXPORT", mntexports, mnt_export),
};

static const struct rpc_proc *const mnt_versions[] = { mnt1_procs, mnt1_procs, mnt3_procs };
static const uint32_t mnt_nprocs[] = {
	sizeof(mnt1_procs) / sizeof(mnt1_procs[0]),
	sizeof(mnt1_procs) / sizeof(mnt1_procs[0]),
	sizeof(mnt3_procs) / sizeof(mnt3_procs[0]),
};

/* The lists: DUMP (the MOUNT list) and EXPORT, each held to MNT_REPLY_MAX_TCP. */
#define MNT_BIG_REPLIES (1u << MOUNTPROC_DUMP | 1u << MOUNTPROC_EXPORT)
static const uint32_t mnt_big_replies[] = { MNT_BIG_REPLIES, MNT_BIG_REPLIES, MNT_BIG_REPLIES };

const struct rpc_program mount_program = {
	.rg_prog = MOUNT_PROGRAM,
	.rg_name = "mount",
	.rg_vers_min = MOUNT_V1,
	.rg_vers_max = MOUNT_V3,
	.rg_procs = mnt_versions,
	.rg_nprocs = mnt_nprocs,
	.rg_big_replies = mnt_big_replies,
	.rg_reply_big = MNT_REPLY_MAX_TCP,
};
