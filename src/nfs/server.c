/*
 * The server state shared by all handlers, and the prologue every NFS handler runs:
 * handle -> export -> port rule -> credentials.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exports.h"
#include "fsio.h"
#include "hostmap.h"
#include "log.h"
#include "nfs_internal.h"
#include "stats.h"

void nfs_server_init(struct nfs_server *ns, struct config *cf)
{
	struct timespec ts;
	uint64_t now;
	int i;

	ns->ns_cfg = cf;
	/*
	 * The verifier must differ between runs (RFC 1813 3.3.7). Random bytes alone would do;
	 * mixing in the start time keeps it unique even if the random source misbehaves.
	 */
	if (sodium_init() < 0)
		log_warn("libsodium failed to initialise; write verifiers fall back to the clock");
	else
		randombytes_buf(ns->ns_write_verf, sizeof(ns->ns_write_verf));
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (i = 0; i < NFS_WRITE_VERF_LEN; i++)
		ns->ns_write_verf[i] ^= (uint8_t)(now >> (8 * i));
	pthread_mutex_init(&ns->ns_mounts_lock, NULL);
	pthread_rwlock_init(&ns->ns_rules_lock, NULL);
	ns->ns_mounts = NULL;
}

void nfs_server_set_views(struct nfs_server *ns, const struct nfs_views_ops *ops, void *table)
{
	ns->ns_views_ops = ops;
	ns->ns_views = ops ? table : NULL;
}

int nfs_view_for_client(struct nfs_server *ns, int i, const char *addr, struct view **vw,
			struct union_export **ux, char *err, size_t errlen)
{
	*vw = NULL;
	if (!ns->ns_views_ops) {
		snprintf(err, errlen, "export %s: the server has no table of client views (out of "
			 "memory at start); restart it", ns->ns_cfg->cf_exports[i].ec_name);
		return -ENOMEM;
	}
	return ns->ns_views_ops->vo_for_client(ns->ns_views, i, addr, vw, ux, err, errlen);
}

nfsstat3 nfs_view_by_id(struct nfs_server *ns, uint16_t id, const char *addr, int *i,
			struct view **vw, struct union_export **ux)
{
	int r;

	*vw = NULL;
	if (!ns->ns_views_ops)
		return (nfsstat3)stats_stale(NFS3ERR_STALE, STATS_STALE_UNKNOWN_EXPORT);
	r = ns->ns_views_ops->vo_by_id(ns->ns_views, id, addr, i, vw, ux);
	switch (r) {
	case 0:
		return NFS3_OK;
	case -EAGAIN: /* not now: the client retries, its handle is not stale */
		return NFS3ERR_JUKEBOX;
	default:
		return nfs_status(r);
	}
}

void nfs_view_put(struct nfs_server *ns, struct view *vw)
{
	if (vw)
		ns->ns_views_ops->vo_put(vw);
}

int nfs_server_swap_rules(struct nfs_server *ns, struct config *next)
{
	struct config *live = ns->ns_cfg;
	struct hostmap *hm;
	int n = 0;

	pthread_rwlock_wrlock(&ns->ns_rules_lock);
	/* Views read the host map under the rules lock. */
	hm = live->cf_hosts;
	live->cf_hosts = next->cf_hosts;
	next->cf_hosts = hm;
	atomic_fetch_add(&ns->ns_names_gen, 1);
	for (int i = 0; i < live->cf_nexports; i++) {
		struct export_conf *o = &live->cf_exports[i], *ne, tmp;
		int j = config_find_export(next, o->ec_name);

		if (j < 0 || !config_same_branches(o, &next->cf_exports[j]))
			continue;
		ne = &next->cf_exports[j];
		tmp = *o;
		o->ec_rules = ne->ec_rules;
		o->ec_nrules = ne->ec_nrules;
		o->ec_opts = ne->ec_opts;
		ne->ec_rules = tmp.ec_rules;
		ne->ec_nrules = tmp.ec_nrules;
		ne->ec_opts = tmp.ec_opts;
		n++;
	}
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return n;
}

void nfs_write_verf(const struct nfs_server *ns, uint8_t out[NFS_WRITE_VERF_LEN])
{
	/* Times an odd constant: every count of failures gives another verifier. */
	uint64_t mix = fsio_sync_failures() * 0x9e3779b97f4a7c15u;

	for (int i = 0; i < NFS_WRITE_VERF_LEN; i++)
		out[i] = ns->ns_write_verf[i] ^ (uint8_t)(mix >> (8 * i));
}

bool nfs_export_read_only(struct nfs_server *ns, int i)
{
	bool ro;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	ro = ns->ns_cfg->cf_exports[i].ec_opts.eo_ro;
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return ro;
}

/*
 * The first rule of ec admitting peer, as nfs_rule_index, with its options in *out unless
 * out is NULL (rules lock held). Inline: nfs_rule_for runs on every call.
 */
static inline int nfs_rule_match_locked(const struct export_conf *ec, const struct sockaddr *peer,
					struct export_opts *out)
{
	int r;

	if (ec->ec_nrules == 0) {
		if (out)
			*out = ec->ec_opts;
		return 0;
	}
	r = exports_match(ec->ec_rules, ec->ec_nrules, peer);
	if (r >= 0 && out)
		*out = ec->ec_rules[r].er_opts;
	return r;
}

bool nfs_rule_for(struct nfs_server *ns, int i, const struct rpc_req *rq,
		  struct export_opts *out)
{
	int r;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	r = nfs_rule_match_locked(&ns->ns_cfg->cf_exports[i],
				  (const struct sockaddr *)&rq->rq_peer, out);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return r >= 0;
}

int nfs_rule_index(struct nfs_server *ns, int i, const struct sockaddr *peer)
{
	int r;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	r = nfs_rule_match_locked(&ns->ns_cfg->cf_exports[i], peer, NULL);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return r;
}

void nfs_rule_spec(struct nfs_server *ns, int i, int rule, char *buf, size_t len)
{
	const struct export_conf *ec;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	ec = &ns->ns_cfg->cf_exports[i];
	snprintf(buf, len, "%s", ec->ec_nrules > rule ? ec->ec_rules[rule].er_spec : "*");
	pthread_rwlock_unlock(&ns->ns_rules_lock);
}

bool nfs_peer_admitted(struct nfs_server *ns, const struct sockaddr *peer)
{
	bool ok = false;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	for (int i = 0; i < ns->ns_cfg->cf_nexports && !ok; i++)
		ok = nfs_export_union(ns, i) &&
		     nfs_rule_match_locked(&ns->ns_cfg->cf_exports[i], peer, NULL) >= 0;
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return ok;
}

bool nfs_host_name(struct nfs_server *ns, const char *addr, char *name, size_t namelen,
		   char *map, size_t maplen)
{
	const struct hostmap *hm;
	const char *found;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	hm = ns->ns_cfg->cf_hosts;
	found = hostmap_find(hm, addr);
	if (found)
		snprintf(name, namelen, "%s", found);
	if (map)
		snprintf(map, maplen, "%s", hm ? hostmap_path(hm) : "");
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return found != NULL;
}

unsigned nfs_names_gen(struct nfs_server *ns)
{
	return atomic_load(&ns->ns_names_gen);
}

int nfs_export_count(const struct nfs_server *ns)
{
	return __atomic_load_n(&ns->ns_nexports, __ATOMIC_ACQUIRE);
}

struct union_export *nfs_export_union(const struct nfs_server *ns, int i)
{
	return __atomic_load_n(&ns->ns_exports[i], __ATOMIC_ACQUIRE);
}

/* ---- the live export table (reloads) ---- */

int nfs_server_add_export(struct nfs_server *ns, struct config *next, int j,
			  struct union_export *ux)
{
	struct config *live = ns->ns_cfg;
	int i = live->cf_nexports;

	if (i >= NFS_MAX_EXPORTS)
		return -ENOSPC;
	pthread_rwlock_wrlock(&ns->ns_rules_lock);
	config_take_export(live, next, j);
	__atomic_store_n(&ns->ns_exports[i], ux, __ATOMIC_RELEASE);
	__atomic_store_n(&ns->ns_nexports, live->cf_nexports, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return i;
}

struct union_export *nfs_server_set_union(struct nfs_server *ns, int i, struct union_export *ux)
{
	struct union_export *old;

	/* Under the rules lock: a rule check that saw the export served finishes first. */
	pthread_rwlock_wrlock(&ns->ns_rules_lock);
	old = __atomic_exchange_n(&ns->ns_exports[i], ux, __ATOMIC_ACQ_REL);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	if (!ux)
		nfs_mounts_forget(ns, ns->ns_cfg->cf_exports[i].ec_name);
	return old;
}

void nfs_server_swap_branches(struct nfs_server *ns, int i, struct export_conf *next)
{
	pthread_rwlock_wrlock(&ns->ns_rules_lock);
	config_swap_branches(&ns->ns_cfg->cf_exports[i], next);
	atomic_fetch_add(&ns->ns_base_gen[i], 1);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
}

unsigned nfs_export_base_gen(struct nfs_server *ns, int i)
{
	return atomic_load(&ns->ns_base_gen[i]);
}

int nfs_export_branches(struct nfs_server *ns, int i, char ***branches, enum union_role **roles,
			int *n)
{
	const struct export_conf *ec;
	int r = 0;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	ec = &ns->ns_cfg->cf_exports[i];
	*n = ec->ec_nbranches;
	*branches = calloc((size_t)*n + 1, sizeof(**branches));
	*roles = calloc((size_t)*n + 1, sizeof(**roles));
	for (int k = 0; *branches && *roles && k < *n && r == 0; k++) {
		(*roles)[k] = config_branch_role(ec, k);
		(*branches)[k] = strdup(ec->ec_branches[k]);
		if (!(*branches)[k])
			r = -ENOMEM;
	}
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	if (!*branches || !*roles)
		r = -ENOMEM;
	if (r < 0)
		nfs_export_branches_free(*branches, *roles, *n);
	return r;
}

char *nfs_export_base_text(struct nfs_server *ns, int i)
{
	char *text;

	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	text = config_base_text(&ns->ns_cfg->cf_exports[i]);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return text;
}

void nfs_export_branches_free(char **branches, enum union_role *roles, int n)
{
	for (int k = 0; branches && k < n; k++)
		free(branches[k]);
	free(branches);
	free(roles);
}

void nfs_server_free(struct nfs_server *ns)
{
	struct mount_entry *me, *next;

	for (me = ns->ns_mounts; me != NULL; me = next) {
		next = me->me_next;
		free(me->me_host);
		free(me->me_path);
		free(me);
	}
	ns->ns_mounts = NULL;
	pthread_mutex_destroy(&ns->ns_mounts_lock);
	pthread_rwlock_destroy(&ns->ns_rules_lock);
}

uint32_t nfs_max_io(const struct rpc_req *rq)
{
	return rq->rq_protocol == IPPROTO_UDP ? NFS_MAX_IO_UDP : NFS_MAX_IO_TCP;
}

int nfs_peer_port(const struct rpc_req *rq)
{
	const struct sockaddr_storage *ss = &rq->rq_peer;

	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

void nfs_peer_host(const struct rpc_req *rq, char *buf, size_t len)
{
	if (!rpc_addr_text((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, buf, len))
		snprintf(buf, len, "unknown");
}

bool nfs_peer_secure(const struct rpc_req *rq, const struct export_opts *eo)
{
	int port;

	if (!eo->eo_secure)
		return true;
	port = nfs_peer_port(rq);
	return port >= 0 && port < 1024;
}

void nfs_cookieverf(const struct nfs_call *nc, cookieverf3 out)
{
	uint16_t id = union_export_id(nc->nc_ux);

	/* Cookies are name hashes, valid forever: the verifier only has to be ours. */
	memcpy(out, "UNFS", 4);
	out[4] = 0;
	out[5] = 1;
	out[6] = (char)(id >> 8);
	out[7] = (char)id;
}

/* The served export with id, its union in *ux; -1 when none. */
static int nfs_export_index(const struct nfs_server *ns, uint16_t id, struct union_export **ux)
{
	int n = nfs_export_count(ns);

	for (int i = 0; i < n; i++)
		if ((*ux = nfs_export_union(ns, i)) != NULL && union_export_id(*ux) == id)
			return i;
	return -1;
}

/* True at most once a minute per *last: a refused client retries forever. */
bool nfs_log_due(_Atomic time_t *last)
{
	time_t now = time(NULL), prev = atomic_load(last);

	return now - prev >= 60 && atomic_compare_exchange_strong(last, &prev, now);
}

static void nfs_log_refused(const struct rpc_req *rq, const char *export)
{
	static _Atomic time_t last;
	char host[INET6_ADDRSTRLEN];

	if (!nfs_log_due(&last))
		return;
	nfs_peer_host(rq, host, sizeof(host));
	log_warn("refusing NFS call from %s to %s with NFS3ERR_ACCES: no client rule of the "
		 "export admits it (was it removed by a reload?); add a rule for it to the export",
		 host, export);
}

static void nfs_log_insecure(const struct rpc_req *rq, const char *export)
{
	static _Atomic time_t last;
	char host[INET6_ADDRSTRLEN];

	if (!nfs_log_due(&last))
		return;
	nfs_peer_host(rq, host, sizeof(host));
	log_warn("refusing NFS call from %s port %d to %s: the export is 'secure' (source "
		 "port must be below 1024); add 'insecure' to the export options to allow it",
		 host, nfs_peer_port(rq), export);
}

bool nfs_call_begin(struct rpc_req *rq, const nfs_fh3 *fh, enum nfs_call_kind kind,
		    struct nfs_call *nc, nfsstat3 *status, enum rpc_outcome *out)
{
	struct nfs_server *ns = rq->rq_ctx;
	const struct export_conf *ec;
	struct union_export *ux;
	struct view *view = NULL;
	char host[INET6_ADDRSTRLEN];
	struct fh h;
	int i;

	memset(nc, 0, sizeof(*nc));
	*out = RPC_OUT_REPLY;
	if (fh_decode((const uint8_t *)fh->data.data_val, fh->data.data_len, ns->ns_handle_key,
		      &h) != 0) {
		*status = NFS3ERR_BADHANDLE;
		return false;
	}
	i = nfs_export_index(ns, h.fh_export, &ux);
	if (i < 0) {
		/* Not an export of the config: a client's view of one (upper=), or stale. */
		nfs_peer_host(rq, host, sizeof(host));
		*status = nfs_view_by_id(ns, h.fh_export, host, &i, &view, &ux);
		if (*status != NFS3_OK)
			return false;
	}
	ec = &ns->ns_cfg->cf_exports[i];
	/* The handle only names the export: the caller must still be one of its clients. */
	if (!nfs_rule_for(ns, i, rq, &nc->nc_opts)) {
		nfs_log_refused(rq, ec->ec_name);
		*status = NFS3ERR_ACCES;
		goto refused;
	}
	if (!nfs_peer_secure(rq, &nc->nc_opts)) {
		nfs_log_insecure(rq, ec->ec_name);
		*out = RPC_OUT_AUTH_TOOWEAK;
		goto refused;
	}
	nc->nc_rq = rq;
	nc->nc_ns = ns;
	nc->nc_ux = ux;
	nc->nc_ino = h.fh_ino;
	nc->nc_ro = nc->nc_opts.eo_ro || union_read_only(nc->nc_ux);
	if (kind == NFS_CALL_MODIFIES && nc->nc_ro) {
		*status = NFS3ERR_ROFS;
		goto refused;
	}
	union_set_sync(!nc->nc_opts.eo_async);
	cred_squash(&rq->rq_cred, &nc->nc_opts, &nc->nc_cred);
	if (cred_apply(&nc->nc_cred) != 0) {
		*status = NFS3ERR_SERVERFAULT;
		goto refused;
	}
	nc->nc_view = view;
	return true;
refused:
	nfs_view_put(ns, view);
	return false;
}

/*
 * Lets go of the client's view the call used; the thread keeps the caller's identity:
 * the next call most likely has the same one.
 */
void nfs_call_end(struct nfs_call *nc)
{
	nfs_view_put(nc->nc_ns, nc->nc_view);
	nc->nc_view = NULL;
}

nfsstat3 nfs_call_handle(const struct nfs_call *nc, const nfs_fh3 *fh, uint64_t *ino)
{
	struct union_export *other;
	struct fh h;

	if (fh_decode((const uint8_t *)fh->data.data_val, fh->data.data_len,
		      nc->nc_ns->ns_handle_key, &h) != 0)
		return NFS3ERR_BADHANDLE;

	if (h.fh_export != union_export_id(nc->nc_ux))
		return nfs_export_index(nc->nc_ns, h.fh_export, &other) < 0
			       ? (nfsstat3)stats_stale(NFS3ERR_STALE, STATS_STALE_UNKNOWN_EXPORT)
			       : NFS3ERR_XDEV;
	*ino = h.fh_ino;
	return NFS3_OK;
}

/*
 * Only codes RFC 1813 lists for every procedure of the use: a name no directory can hold
 * is not there for LOOKUP (NOENT) and may not be made or removed (ACCES); a dot name
 * exists already (EXIST) and may not be removed (ACCES, as knfsd answers).
 */
nfsstat3 nfs_name_check(const char *name, enum nfs_name_use use)
{
	bool bad;

	/* A name is one path component; a slash would let a client walk paths. */
	bad = name == NULL || name[0] == '\0' || strchr(name, '/') != NULL;
	if (!bad && strlen(name) > NFS_NAME_MAX)
		return NFS3ERR_NAMETOOLONG;
	if (bad)
		return use == NFS_NAME_LOOKUP ? NFS3ERR_NOENT : NFS3ERR_ACCES;
	if (use != NFS_NAME_LOOKUP && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
		return use == NFS_NAME_CREATE ? NFS3ERR_EXIST : NFS3ERR_ACCES;
	return NFS3_OK;
}
