/* Credential squashing and per-thread identity switching (see include/cred.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "cred.h"
#include "fsio.h"
#include "log.h"

void cred_squash(const struct rpc_cred *rc, const struct export_opts *eo, struct cred *out)
{
	uint32_t i, n;

	memset(out, 0, sizeof(*out));
	if (rc->rc_flavor != AUTH_SYS || eo->eo_squash == SQUASH_ALL) {
		out->cr_uid = eo->eo_anonuid;
		out->cr_gid = eo->eo_anongid;
		return;
	}
	out->cr_uid = rc->rc_uid;
	out->cr_gid = rc->rc_gid;
	n = rc->rc_ngroups < RPC_MAX_GROUPS ? rc->rc_ngroups : RPC_MAX_GROUPS;
	for (i = 0; i < n; i++)
		out->cr_groups[i] = rc->rc_groups[i];
	out->cr_ngroups = n;
	if (eo->eo_squash != SQUASH_ROOT)
		return;
	if (out->cr_uid == 0)
		out->cr_uid = eo->eo_anonuid;
	if (out->cr_gid == 0)
		out->cr_gid = eo->eo_anongid;
	for (i = 0; i < n; i++)
		if (out->cr_groups[i] == 0)
			out->cr_groups[i] = eo->eo_anongid;
}

/*
 * What this thread acts as right now. Switching costs three system calls (and the kernel
 * copies the credentials each time), while most calls in a row come from the same user:
 * a thread keeps its identity between calls and switches only when the next differs.
 * So this is not part of a call's context (call_ctx.h), which ends with each call: it is
 * what the kernel holds for the thread, and every call that touches a branch sets the
 * identity it needs (cred_apply, or cred_restore to act as the server) before it does.
 */
static __thread struct cred cred_current;
static __thread bool cred_known;

/* setfsuid/setfsgid report nothing useful; asking with an invalid id returns the current one. */
static uint32_t cred_fsuid(void)
{
	return (uint32_t)syscall(SYS_setfsuid, (uid_t)-1);
}

static uint32_t cred_fsgid(void)
{
	return (uint32_t)syscall(SYS_setfsgid, (gid_t)-1);
}

static bool cred_is_root(void)
{
	static int euid = -1;

	if (euid < 0)
		euid = (int)geteuid(); /* the server never changes its euid */
	return euid == 0;
}

static bool cred_can_switch(void)
{
	static atomic_bool warned;

	if (cred_is_root())
		return true;
	if (!atomic_exchange(&warned, true))
		log_warn("not running as root: every client acts as uid %u on the branches; "
			 "run unionnfsd as root for per-client permissions", (unsigned)geteuid());
	return false;
}

static bool cred_same(const struct cred *a, const struct cred *b)
{
	return a->cr_uid == b->cr_uid && a->cr_gid == b->cr_gid &&
	       a->cr_ngroups == b->cr_ngroups &&
	       !memcmp(a->cr_groups, b->cr_groups, a->cr_ngroups * sizeof(a->cr_groups[0]));
}

int cred_apply(const struct cred *cr)
{
	gid_t groups[RPC_MAX_GROUPS];
	uint32_t i;
	int rc = 0;

	if (!cred_can_switch())
		return 0;
	if (cred_known && cred_same(&cred_current, cr))
		return 0;
	cred_known = false;
	for (i = 0; i < cr->cr_ngroups && i < RPC_MAX_GROUPS; i++)
		groups[i] = cr->cr_groups[i];
	/* Groups and fsgid first: setting a non-zero fsuid drops the capabilities they need. */
	if (cred_fsuid() != 0)
		syscall(SYS_setfsuid, (uid_t)0);
	if (syscall(SYS_setgroups, (size_t)i, groups) != 0) {
		rc = -errno;
		goto fail;
	}
	syscall(SYS_setfsgid, (gid_t)cr->cr_gid);
	syscall(SYS_setfsuid, (uid_t)cr->cr_uid);
	if (cred_fsgid() != cr->cr_gid || cred_fsuid() != cr->cr_uid) {
		rc = -EPERM;
		goto fail;
	}
	rc = fsio_fit_caps(cr->cr_uid);
	if (rc != 0)
		goto fail;
	memset(&cred_current, 0, sizeof(cred_current));
	cred_current.cr_uid = cr->cr_uid;
	cred_current.cr_gid = cr->cr_gid;
	cred_current.cr_ngroups = i;
	memcpy(cred_current.cr_groups, cr->cr_groups, i * sizeof(cr->cr_groups[0]));
	cred_known = true;
	return 0;
fail:
	log_err("cannot act as uid %u gid %u: %s; is unionnfsd running with CAP_SETUID "
		"and CAP_SETGID?", cr->cr_uid, cr->cr_gid, strerror(-rc));
	cred_restore();
	return rc;
}

void cred_restore(void)
{
	static const struct cred root;

	if (!cred_is_root() || (cred_known && cred_same(&cred_current, &root)))
		return;
	/* fsuid 0 first: it brings back the file system capabilities the others rely on. */
	syscall(SYS_setfsuid, (uid_t)0);
	fsio_fit_caps(0); /* raising a permitted capability cannot fail */
	syscall(SYS_setfsgid, (gid_t)0);
	syscall(SYS_setgroups, (size_t)0, NULL);
	memset(&cred_current, 0, sizeof(cred_current));
	cred_known = true;
}
