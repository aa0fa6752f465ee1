/*
 * Client credentials on the server side: squashing per export (exports(5) root_squash,
 * all_squash, anonuid, anongid) and applying the result to the calling worker thread only.
 *
 * Linux keeps fsuid, fsgid and the supplementary groups per thread at the system call
 * level, but glibc's setgroups()/setfsuid() wrappers broadcast to every thread of the
 * process; cred_apply() therefore uses raw system calls, so each worker can act for a
 * different client at the same time. The branch file systems then enforce permissions.
 */
#ifndef UNFS_CRED_H
#define UNFS_CRED_H

#include <stdint.h>

#include "exports.h"
#include "rpc.h"

struct cred {
	uint32_t cr_uid;
	uint32_t cr_gid;
	uint32_t cr_ngroups;
	uint32_t cr_groups[RPC_MAX_GROUPS];
};

/*
 * The identity a call acts with on an export: AUTH_NONE and all_squash become
 * anonuid/anongid with no groups; root_squash maps uid 0 to anonuid and gid 0 (also in
 * the supplementary groups) to anongid; no_root_squash keeps everything.
 */
void cred_squash(const struct rpc_cred *rc, const struct export_opts *eo, struct cred *out);

/*
 * Makes the calling thread act as cr for file system access (groups, fsgid, fsuid).
 * The thread keeps that identity until the next cred_apply() or cred_restore(): code
 * that must act as the server itself calls cred_restore() first (cheap when it is).
 * Returns 0, or -errno when the kernel refused (the thread is then back to root).
 * A server not running as root cannot switch identities: it acts as itself, and this
 * returns 0 after logging that once.
 */
int cred_apply(const struct cred *cr);

/* Back to root for the calling thread: fsuid 0, fsgid 0, no supplementary groups. */
void cred_restore(void);

#endif
