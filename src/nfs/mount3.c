/*
 * MOUNT v1 and v3 (program 100005): hands out root handles of exports (or of directories
 * inside them) and keeps the advisory list of who mounted what, for DUMP.
 *
 * Only NULL is answered to everyone. MNT refuses a client no rule of the export admits
 * (MNT3ERR_ACCES); DUMP, UMNT, UMNTALL and EXPORT have no status to say no with, so a
 * client no rule of any export admits gets an RPC authentication error instead, and
 * learns neither who mounted what nor which exports and networks exist. (Over TCP such a
 * client only gets here on a connection a reload left without a rule: net closes its new
 * connections at accept.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cred.h"
#include "exports.h"
#include "log.h"
#include "nfs_internal.h"

/* DUMP is advisory; a client mounting in a loop must not grow the list without bound. */
#define MNT_LIST_MAX 4096
/* A reply around a DUMP or EXPORT list: record mark, accepted reply header, the list's end. */
#define MNT_REPLY_HEAD (4 + 24 + 4)

enum rpc_outcome mnt_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

static mountstat3 mnt_status(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return MNT3_OK;
	case EPERM: return MNT3ERR_PERM;
	case ENOENT: case ESTALE: return MNT3ERR_NOENT;
	case EACCES: return MNT3ERR_ACCES;
	case ENOTDIR: return MNT3ERR_NOTDIR;
	case EINVAL: return MNT3ERR_INVAL;
	case ENAMETOOLONG: return MNT3ERR_NAMETOOLONG;
	default: return MNT3ERR_IO;
	}
}

/*
 * path with empty and "." components and trailing slashes dropped ("/union//./a/" is
 * "/union/a"), in rpc_alloc() memory: one spelling per place, so spelling one mount many
 * ways cannot grow the MOUNT list. NULL when path has "..", which a mount has no use for.
 * A relative path stays relative, and no export matches it.
 */
static char *mnt_canonical(struct rpc_req *rq, const char *path)
{
	char *out = rpc_alloc(rq, strlen(path) + 2);
	const char *p = path, *end;
	size_t n = 0, len;

	for (;;) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchrnul(p, '/');
		len = (size_t)(end - p);
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return NULL;
		if (!(len == 1 && p[0] == '.')) {
			if (n > 0 || path[0] == '/')
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p = end;
	}
	if (n == 0 && path[0] == '/')
		out[n++] = '/';
	out[n] = '\0';
	return out;
}

/* The export whose name is path or the longest prefix of it ending at a '/'; -1 if none. */
static int mnt_find_export(const struct nfs_server *ns, const char *path, const char **rest)
{
	size_t len, best_len = 0;
	const char *name;
	int i, best = -1;

	for (i = 0; i < nfs_export_count(ns); i++) {
		if (!nfs_export_union(ns, i))
			continue; /* removed by a reload */
		name = ns->ns_cfg->cf_exports[i].ec_name;
		len = strlen(name);
		while (len > 1 && name[len - 1] == '/')
			len--;
		if (strncmp(path, name, len) != 0)
			continue;
		if (path[len] != '\0' && path[len] != '/' && !(len == 1 && name[0] == '/'))
			continue;
		if (best < 0 || len > best_len) {
			best = i;
			best_len = len;
		}
	}
	if (best >= 0)
		*rest = path + best_len;
	return best;
}

/* Walks the components of rest (canonical, relative to the export root) down to a directory. */
static mountstat3 mnt_walk(struct rpc_req *rq, struct union_export *ux, const char *rest,
			   uint64_t *ino)
{
	uint64_t cur = STORE_ROOT_INO;
	const char *p = rest, *end;
	struct stat st;
	size_t len;
	char *name;
	int err;

	memset(&st, 0, sizeof(st));
	cred_restore(); /* a mount looks as the server, not as whoever the thread served last */
	err = union_getattr(ux, cur, &st);
	while (err == 0) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchrnul(p, '/');
		len = (size_t)(end - p);
		if (len > NFS_NAME_MAX)
			return MNT3ERR_NAMETOOLONG;
		name = rpc_alloc(rq, len + 1);
		memcpy(name, p, len);
		p = end;
		err = union_lookup(ux, cur, name, &cur, &st);
	}
	if (err != 0)
		return mnt_status(err);
	if (!S_ISDIR(st.st_mode))
		return MNT3ERR_NOTDIR;
	*ino = cur;
	return MNT3_OK;
}

/*
 * Records that host mounted export (its name): one entry per client and export, however
 * often and under whichever directory of it the client mounts.
 */
static void mnt_list_add(struct nfs_server *ns, const char *host, const char *export)
{
	static atomic_bool warned;
	struct mount_entry *me, **pp;
	size_t n = 0;

	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (pp = &ns->ns_mounts; *pp != NULL; pp = &(*pp)->me_next, n++)
		if (strcmp((*pp)->me_host, host) == 0 && strcmp((*pp)->me_path, export) == 0)
			goto out;
	if (n >= MNT_LIST_MAX) {
		if (!atomic_exchange(&warned, true))
			log_warn("the MOUNT list is full (%d entries); DUMP will not show newer "
				 "mounts until clients unmount", MNT_LIST_MAX);
		goto out;
	}
	me = calloc(1, sizeof(*me));
	if (me == NULL)
		goto out;
	me->me_host = strdup(host);
	me->me_path = strdup(export);
	if (me->me_host == NULL || me->me_path == NULL) {
		free(me->me_host);
		free(me->me_path);
		free(me);
		goto out;
	}
	*pp = me;
out:
	pthread_mutex_unlock(&ns->ns_mounts_lock);
}

/* Removes the entries of host (any, if NULL) for export (any, if NULL). */
static void mnt_list_remove(struct nfs_server *ns, const char *host, const char *export)
{
	struct mount_entry *me, **pp;

	pthread_mutex_lock(&ns->ns_mounts_lock);
	pp = &ns->ns_mounts;
	while ((me = *pp) != NULL) {
		if ((host == NULL || strcmp(me->me_host, host) == 0) &&
		    (export == NULL || strcmp(me->me_path, export) == 0)) {
			*pp = me->me_next;
			free(me->me_host);
			free(me->me_path);
			free(me);
		} else {
			pp = &me->me_next;
		}
	}
	pthread_mutex_unlock(&ns->ns_mounts_lock);
}

void nfs_mounts_forget(struct nfs_server *ns, const char *export)
{
	mnt_list_remove(ns, NULL, export);
}

int nfs_mounts_each(struct nfs_server *ns,
		    int (*fn)(const char *host, const char *path, void *arg), void *arg)
{
	int r = 0;

	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (struct mount_entry *me = ns->ns_mounts; me && r == 0; me = me->me_next)
		r = fn(me->me_host, me->me_path, arg);
	pthread_mutex_unlock(&ns->ns_mounts_lock);
	return r;
}

/* The common part of MNT v1 and v3: the handle of path, in rpc_alloc() memory. */
static mountstat3 mnt_mount(struct rpc_req *rq, const char *arg, nfs_fh3 *fh)
{
	struct nfs_server *ns = rq->rq_ctx;
	char host[INET6_ADDRSTRLEN];
	const struct export_conf *ec;
	struct union_export *ux;
	struct view *view = NULL;
	struct export_opts eo;
	struct nfs_call nc;
	char verr[512];
	const char *rest;
	mountstat3 st;
	uint64_t ino = STORE_ROOT_INO;
	char *path;
	int i;

	nfs_peer_host(rq, host, sizeof(host));
	path = mnt_canonical(rq, arg != NULL ? arg : "");
	if (path == NULL) {
		log_info("MOUNT of %.200s from %s refused: a mount path may not contain '..'",
			 arg != NULL ? arg : "", host);
		return MNT3ERR_INVAL;
	}
	i = mnt_find_export(ns, path, &rest);
	ux = i >= 0 ? nfs_export_union(ns, i) : NULL;
	if (!ux) {
		log_info("MOUNT of %s from %s refused: no such export", path, host);
		return MNT3ERR_NOENT;
	}
	ec = &ns->ns_cfg->cf_exports[i];
	if (!nfs_rule_for(ns, i, rq, &eo)) {
		log_warn("MOUNT of %s from %s refused (MNT3ERR_ACCES): no client rule of export %s "
			 "admits %s; add a rule for it to the export if it should mount",
			 path, host, ec->ec_name, host);
		return MNT3ERR_ACCES;
	}
	if (!nfs_peer_secure(rq, &eo)) {
		log_warn("MOUNT of %s from %s port %d refused: the export is 'secure' (source port "
			 "must be below 1024); add 'insecure' to the export options to allow it",
			 path, host, nfs_peer_port(rq));
		return MNT3ERR_ACCES;
	}
	/* With upper= the client mounts its own view: made on its first mount. */
	if (ec->ec_upper) {
		int r = nfs_view_for_client(ns, i, host, &view, &ux, verr, sizeof(verr));

		if (r < 0) {
			log_err("MOUNT of %s from %s refused (mount status %d): %s", path, host,
				(int)mnt_status(r), verr);
			return mnt_status(r);
		}
	}
	st = mnt_walk(rq, ux, rest, &ino);
	if (st != MNT3_OK) {
		nfs_view_put(ns, view);
		log_info("MOUNT of %s from %s refused: mount status %d", path, host, (int)st);
		return st;
	}
	memset(&nc, 0, sizeof(nc));
	nc.nc_rq = rq;
	nc.nc_ns = ns;
	nc.nc_ux = ux;
	nfs_fh_make(&nc, ino, fh);
	/* Listed before the view is let go: a view with a mount is never closed for room. */
	mnt_list_add(ns, host, ec->ec_name);
	nfs_view_put(ns, view);
	return MNT3_OK;
}

enum rpc_outcome mnt_mnt3(struct rpc_req *rq, void *args, void *res)
{
	dirpath *a = args;
	mountres3 *r = res;
	mountres3_ok *ok = &r->mountres3_u.mountinfo;
	nfs_fh3 fh;
	int *flavors;

	memset(r, 0, sizeof(*r));
	r->fhs_status = mnt_mount(rq, *a, &fh);
	if (r->fhs_status != MNT3_OK)
		return RPC_OUT_REPLY;
	ok->fhandle.fhandle3_len = fh.data.data_len;
	ok->fhandle.fhandle3_val = fh.data.data_val;
	flavors = rpc_alloc(rq, 2 * sizeof(*flavors));
	flavors[0] = AUTH_SYS;
	flavors[1] = AUTH_NONE;
	ok->auth_flavors.auth_flavors_len = 2;
	ok->auth_flavors.auth_flavors_val = flavors;
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_mnt1(struct rpc_req *rq, void *args, void *res)
{
	dirpath *a = args;
	fhstatus *r = res;
	mountstat3 st;
	nfs_fh3 fh;

	memset(r, 0, sizeof(*r));
	st = mnt_mount(rq, *a, &fh);
	/* v1 statuses are errno values, which the v3 ones we use are equal to. */
	r->fhs_status = (u_int)st;
	if (st == MNT3_OK)
		memcpy(r->fhstatus_u.fhs_fhandle, fh.data.data_val, fh.data.data_len);
	return RPC_OUT_REPLY;
}

/*
 * Whether some rule of some export admits the caller (its address; "secure" is MNT's and
 * the NFS calls' business). Logs a refusal at most once a minute.
 */
static bool mnt_admitted(struct rpc_req *rq, const char *what)
{
	static _Atomic time_t last;
	struct nfs_server *ns = rq->rq_ctx;
	char host[INET6_ADDRSTRLEN];
	struct export_opts eo;
	int i;

	for (i = 0; i < nfs_export_count(ns); i++)
		if (nfs_export_union(ns, i) && nfs_rule_for(ns, i, rq, &eo))
			return true;
	if (nfs_log_due(&last)) {
		nfs_peer_host(rq, host, sizeof(host));
		log_warn("MOUNT %s from %s refused (RPC auth error): no client rule of any export "
			 "admits %s; add a rule for it to an export if it should see the server's "
			 "exports and mounts", what, host, host);
	}
	return false;
}

/*
 * Bytes a DUMP or EXPORT list may take in the reply. Over UDP less: a reply there goes to
 * whatever address the datagram claims to be from.
 */
static size_t mnt_list_budget(const struct rpc_req *rq)
{
	return (rq->rq_protocol == IPPROTO_UDP ? MNT_REPLY_MAX_UDP : MNT_REPLY_MAX_TCP) -
	       MNT_REPLY_HEAD;
}

/* XDR size of a string: length word, bytes, padding to 4. */
static size_t mnt_xdr_string(size_t len)
{
	return 4 + ((len + 3) & ~(size_t)3);
}

static void mnt_log_truncated(const struct rpc_req *rq, const char *what, int shown)
{
	static _Atomic time_t last;
	char host[INET6_ADDRSTRLEN];

	if (!nfs_log_due(&last))
		return;
	nfs_peer_host(rq, host, sizeof(host));
	log_warn("MOUNT %s reply to %s shortened to its first %d entries: a reply holds at most "
		 "%u bytes of them over TCP and %u over UDP", what, host, shown,
		 MNT_REPLY_MAX_TCP - MNT_REPLY_HEAD, MNT_REPLY_MAX_UDP - MNT_REPLY_HEAD);
}

enum rpc_outcome mnt_dump(struct rpc_req *rq, void *args, void *res)
{
	struct nfs_server *ns = rq->rq_ctx;
	mountlist *r = res, *tail = r;
	size_t budget = mnt_list_budget(rq), hlen, plen, need;
	struct mount_entry *me;
	struct mountbody *mb;
	int n = 0;

	(void)args;
	*r = NULL;
	if (!mnt_admitted(rq, "DUMP"))
		return RPC_OUT_AUTH_TOOWEAK;
	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (me = ns->ns_mounts; me != NULL; me = me->me_next, n++) {
		hlen = strlen(me->me_host);
		plen = strlen(me->me_path);
		need = 4 + mnt_xdr_string(hlen) + mnt_xdr_string(plen);
		if (need > budget) {
			mnt_log_truncated(rq, "DUMP", n);
			break;
		}
		budget -= need;
		mb = rpc_alloc(rq, sizeof(*mb));
		mb->ml_hostname = memcpy(rpc_alloc(rq, hlen + 1), me->me_host, hlen);
		mb->ml_directory = memcpy(rpc_alloc(rq, plen + 1), me->me_path, plen);
		*tail = mb;
		tail = &mb->ml_next;
	}
	pthread_mutex_unlock(&ns->ns_mounts_lock);
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_umnt(struct rpc_req *rq, void *args, void *res)
{
	struct nfs_server *ns = rq->rq_ctx;
	dirpath *a = args;
	char host[INET6_ADDRSTRLEN];
	const char *path, *rest;
	int i;

	(void)res;
	if (!mnt_admitted(rq, "UMNT"))
		return RPC_OUT_AUTH_TOOWEAK;
	path = mnt_canonical(rq, *a != NULL ? *a : "");
	i = path != NULL ? mnt_find_export(ns, path, &rest) : -1;
	if (i < 0)
		return RPC_OUT_REPLY;
	nfs_peer_host(rq, host, sizeof(host));
	mnt_list_remove(ns, host, ns->ns_cfg->cf_exports[i].ec_name);
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_umntall(struct rpc_req *rq, void *args, void *res)
{
	char host[INET6_ADDRSTRLEN];

	(void)args;
	(void)res;
	if (!mnt_admitted(rq, "UMNTALL"))
		return RPC_OUT_AUTH_TOOWEAK;
	nfs_peer_host(rq, host, sizeof(host));
	mnt_list_remove(rq->rq_ctx, host, NULL);
	return RPC_OUT_REPLY;
}

/* An EXPORT entry: the export's name and its rules' client specifiers as groups. */
static struct exportnode *mnt_export_node(struct rpc_req *rq, const struct export_conf *ec,
					  size_t *size)
{
	struct exportnode *ex = rpc_alloc(rq, sizeof(*ex));
	struct groupnode *gr, **gtail = &ex->ex_groups;
	const char *name = ec->ec_name;
	size_t len = strlen(name);
	int j;

	ex->ex_dir = memcpy(rpc_alloc(rq, len + 1), name, len);
	*size = 4 + mnt_xdr_string(len) + 4;
	for (j = 0; j < (ec->ec_nrules > 0 ? ec->ec_nrules : 1); j++) {
		name = ec->ec_nrules > 0 ? ec->ec_rules[j].er_spec : "*";
		len = strlen(name);
		gr = rpc_alloc(rq, sizeof(*gr));
		gr->gr_name = memcpy(rpc_alloc(rq, len + 1), name, len);
		*gtail = gr;
		gtail = &gr->gr_next;
		*size += 4 + mnt_xdr_string(len);
	}
	return ex;
}

enum rpc_outcome mnt_export(struct rpc_req *rq, void *args, void *res)
{
	struct nfs_server *ns = rq->rq_ctx;
	mntexports *r = res, *tail = r;
	size_t budget = mnt_list_budget(rq), size;
	struct exportnode *ex;
	int i;

	(void)args;
	*r = NULL;
	if (!mnt_admitted(rq, "EXPORT"))
		return RPC_OUT_AUTH_TOOWEAK;
	/* The rule specifiers as written, in order: what showmount -e prints as the groups. */
	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	for (i = 0; i < ns->ns_cfg->cf_nexports; i++) {
		if (!nfs_export_union(ns, i))
			continue; /* removed by a reload */
		ex = mnt_export_node(rq, &ns->ns_cfg->cf_exports[i], &size);
		if (size > budget) {
			mnt_log_truncated(rq, "EXPORT", i);
			break;
		}
		budget -= size;
		*tail = ex;
		tail = &ex->ex_next;
	}
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return RPC_OUT_REPLY;
}
