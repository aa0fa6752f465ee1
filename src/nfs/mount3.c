/*
 * MOUNT v1 and v3 (program 100005): hands out root handles of exports (or of directories
 * inside them) and keeps the advisory list of who mounted what, for DUMP.
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
#include "views.h"

/* DUMP is advisory; a client mounting in a loop must not grow the list without bound. */
#define MNT_LIST_MAX 4096

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

/* The path without trailing slashes ("/" stays "/"), in rpc_alloc() memory. */
static char *mnt_normalize(struct rpc_req *rq, const char *path)
{
	size_t len = strlen(path);
	char *p;

	while (len > 1 && path[len - 1] == '/')
		len--;
	p = rpc_alloc(rq, len + 1);
	memcpy(p, path, len);
	return p;
}

/* The export whose name is path or the longest prefix of it ending at a '/'; -1 if none. */
static int mnt_find_export(const struct nfs_server *ns, const char *path, const char **rest)
{
	size_t len, best_len = 0;
	const char *name;
	int i, best = -1;

	for (i = 0; i < ns->ns_nexports; i++) {
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

/* Walks the components of rest (relative to the export root) down to a directory. */
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
		if (strcmp(name, ".") == 0)
			continue;
		/* A mount names a place inside the export; ".." would only confuse that. */
		if (strcmp(name, "..") == 0)
			return MNT3ERR_INVAL;
		err = union_lookup(ux, cur, name, &cur, &st);
	}
	if (err != 0)
		return mnt_status(err);
	if (!S_ISDIR(st.st_mode))
		return MNT3ERR_NOTDIR;
	*ino = cur;
	return MNT3_OK;
}

static void mnt_list_add(struct nfs_server *ns, const char *host, const char *path)
{
	static atomic_bool warned;
	struct mount_entry *me, **pp;
	size_t n = 0;

	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (pp = &ns->ns_mounts; *pp != NULL; pp = &(*pp)->me_next, n++)
		if (strcmp((*pp)->me_host, host) == 0 && strcmp((*pp)->me_path, path) == 0)
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
	me->me_path = strdup(path);
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

/* Removes the entries of host (only those for path, unless path is NULL). */
static void mnt_list_remove(struct nfs_server *ns, const char *host, const char *path)
{
	struct mount_entry *me, **pp;

	pthread_mutex_lock(&ns->ns_mounts_lock);
	pp = &ns->ns_mounts;
	while ((me = *pp) != NULL) {
		if (strcmp(me->me_host, host) == 0 &&
		    (path == NULL || strcmp(me->me_path, path) == 0)) {
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

/* The common part of MNT v1 and v3: the handle of path, in rpc_alloc() memory. */
static mountstat3 mnt_mount(struct rpc_req *rq, const char *arg, nfs_fh3 *fh)
{
	struct nfs_server *ns = rq->rq_ctx;
	char host[INET6_ADDRSTRLEN];
	const struct export_conf *ec;
	struct union_export *ux;
	struct nfs_view *view = NULL;
	struct export_opts eo;
	struct nfs_call nc;
	char verr[512];
	const char *rest;
	mountstat3 st;
	uint64_t ino = STORE_ROOT_INO;
	char *path;
	int i;

	nfs_peer_host(rq, host, sizeof(host));
	path = mnt_normalize(rq, arg != NULL ? arg : "");
	i = mnt_find_export(ns, path, &rest);
	if (i < 0 || ns->ns_exports[i] == NULL) {
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
	ux = ns->ns_exports[i];
	/* With upper= the client mounts its own view: made on its first mount. */
	if (ec->ec_upper) {
		int r = nfs_views_for_client(ns, i, host, &view, &ux, verr, sizeof(verr));

		if (r < 0) {
			log_err("MOUNT of %s from %s refused (mount status %d): %s", path, host,
				(int)mnt_status(r), verr);
			return mnt_status(r);
		}
	}
	st = mnt_walk(rq, ux, rest, &ino);
	if (st != MNT3_OK) {
		nfs_views_put(view);
		log_info("MOUNT of %s from %s refused: mount status %d", path, host, (int)st);
		return st;
	}
	memset(&nc, 0, sizeof(nc));
	nc.nc_rq = rq;
	nc.nc_ns = ns;
	nc.nc_ux = ux;
	nfs_fh_make(&nc, ino, fh);
	/* Listed before the view is let go: a view with a mount is never closed for room. */
	mnt_list_add(ns, host, path);
	nfs_views_put(view);
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

enum rpc_outcome mnt_dump(struct rpc_req *rq, void *args, void *res)
{
	struct nfs_server *ns = rq->rq_ctx;
	mountlist *r = res, *tail = r;
	struct mount_entry *me;
	struct mountbody *mb;
	size_t len;

	(void)args;
	*r = NULL;
	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (me = ns->ns_mounts; me != NULL; me = me->me_next) {
		mb = rpc_alloc(rq, sizeof(*mb));
		len = strlen(me->me_host);
		mb->ml_hostname = memcpy(rpc_alloc(rq, len + 1), me->me_host, len);
		len = strlen(me->me_path);
		mb->ml_directory = memcpy(rpc_alloc(rq, len + 1), me->me_path, len);
		*tail = mb;
		tail = &mb->ml_next;
	}
	pthread_mutex_unlock(&ns->ns_mounts_lock);
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_umnt(struct rpc_req *rq, void *args, void *res)
{
	dirpath *a = args;
	char host[INET6_ADDRSTRLEN];

	(void)res;
	nfs_peer_host(rq, host, sizeof(host));
	mnt_list_remove(rq->rq_ctx, host, mnt_normalize(rq, *a != NULL ? *a : ""));
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_umntall(struct rpc_req *rq, void *args, void *res)
{
	char host[INET6_ADDRSTRLEN];

	(void)args;
	(void)res;
	nfs_peer_host(rq, host, sizeof(host));
	mnt_list_remove(rq->rq_ctx, host, NULL);
	return RPC_OUT_REPLY;
}

enum rpc_outcome mnt_export(struct rpc_req *rq, void *args, void *res)
{
	struct nfs_server *ns = rq->rq_ctx;
	mntexports *r = res, *tail = r;
	const struct export_conf *ec;
	struct exportnode *ex;
	struct groupnode *gr, **gtail;
	const char *name;
	size_t len;
	int i, j;

	(void)args;
	*r = NULL;
	/* The rule specifiers as written, in order: what showmount -e prints as the groups. */
	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	for (i = 0; i < ns->ns_cfg->cf_nexports; i++) {
		ec = &ns->ns_cfg->cf_exports[i];
		name = ec->ec_name;
		len = strlen(name);
		ex = rpc_alloc(rq, sizeof(*ex));
		ex->ex_dir = memcpy(rpc_alloc(rq, len + 1), name, len);
		gtail = &ex->ex_groups;
		for (j = 0; j < (ec->ec_nrules > 0 ? ec->ec_nrules : 1); j++) {
			name = ec->ec_nrules > 0 ? ec->ec_rules[j].er_spec : "*";
			len = strlen(name);
			gr = rpc_alloc(rq, sizeof(*gr));
			gr->gr_name = memcpy(rpc_alloc(rq, len + 1), name, len);
			*gtail = gr;
			gtail = &gr->gr_next;
		}
		*tail = ex;
		tail = &ex->ex_next;
	}
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return RPC_OUT_REPLY;
}
