/*
 * The protocol handlers: NFS v3 (program 100003) and MOUNT v1/v3 (program 100005).
 * They turn RPC arguments into union calls and union results into replies; this is the
 * only place that knows nfsstat3 and mountstat3.
 */
#ifndef UNFS_NFS_H
#define UNFS_NFS_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "rpc.h"
#include "union.h"

#define NFS_WRITE_VERF_LEN 8

struct mount_entry;
struct view;

/*
 * How nfs reaches the per-client views of exports with upper= (include/views.h), which sit
 * above it and hand nfs these calls at start (nfs_server_set_views). vo_table is theirs.
 *
 * vo_for_client: the view of export index i for the client at addr (nfs_peer_host's text),
 *   made if it has none, for its MNT. Returns 0 with *vw held and its union in *ux, or
 *   -errno with a message naming cause and fix in err (-EACCES: the client has no usable
 *   host name; -ENOSPC: no room under the bounds).
 * vo_by_id: the view with export id for a call from addr, with its export's index in *i,
 *   held in *vw, its union in *ux. Returns 0; -ESTALE when no view has the id (or it cannot
 *   be opened; the cause marked with stats_stale); -EACCES when it belongs to another
 *   client; -EAGAIN when the host name of addr cannot be looked up now or there is no room
 *   to open it (the client is to try again).
 * vo_put: gives back a hold of either.
 */
struct nfs_views_ops {
	int (*vo_for_client)(void *vo_table, int i, const char *addr, struct view **vw,
			     struct union_export **ux, char *err, size_t errlen);
	int (*vo_by_id)(void *vo_table, uint16_t id, const char *addr, int *i, struct view **vw,
			struct union_export **ux);
	void (*vo_put)(struct view *vw);
};

/* Export slots, reloads' included: main allocates ns_exports with this many. */
#define NFS_MAX_EXPORTS 1024

/*
 * Everything the handlers share; built by main, handed to rpc_dispatch_init as ctx. Main
 * fills in ns_exports, ns_nexports and ns_handle_key; other modules use the calls below,
 * which keep to the rules lock.
 */
struct nfs_server {
	struct config *ns_cfg;                 /* its rules change only by nfs_server_swap_rules */
	struct union_export **ns_exports;      /* [i] serves ns_cfg->cf_exports[i]; atomic */
	int ns_nexports;
	uint8_t ns_write_verf[NFS_WRITE_VERF_LEN]; /* new on every start: see nfs_write_verf */
	uint8_t ns_handle_key[STORE_KEY_LEN];
	/*
	 * Guards the client rules (ec_rules, ec_nrules, ec_opts of ns_cfg's exports) and the
	 * host name map (cf_hosts): calls match under the read lock and copy the options out;
	 * nfs_server_swap_rules swaps the tables under the write lock, so no call ever sees a
	 * half-replaced table.
	 */
	pthread_rwlock_t ns_rules_lock;
	_Atomic unsigned ns_names_gen;         /* +1 by every reload: host names may differ */
	pthread_mutex_t ns_mounts_lock;        /* guards ns_mounts (MOUNT DUMP/UMNT) */
	struct mount_entry *ns_mounts;
	_Atomic unsigned ns_base_gen[NFS_MAX_EXPORTS]; /* +1 by every nfs_server_swap_branches */
	const struct nfs_views_ops *ns_views_ops; /* per-client views (upper=); NULL: none */
	void *ns_views;
};

extern const struct rpc_program nfs3_program;

/*
 * The write verifier of WRITE and COMMIT replies: new on every start and after every failed
 * sync (fsio_sync_failures), so a client resends the UNSTABLE data it holds (RFC 1813 3.3.7).
 */
void nfs_write_verf(const struct nfs_server *ns, uint8_t out[NFS_WRITE_VERF_LEN]);
extern const struct rpc_program mount_program;

/* Sets up locks and a fresh write verifier; exports must be filled in by the caller. */
void nfs_server_init(struct nfs_server *ns, struct config *cf);

/*
 * A reload: takes over next's host name map and, for every served export that next has
 * with the same branch stack, its client rules and options; calls in flight finish with
 * the old ones, later calls see the new ones. The old tables go to next, to be freed with
 * it by the caller. Returns how many exports got new rules.
 */
int nfs_server_swap_rules(struct nfs_server *ns, struct config *next);
void nfs_server_free(struct nfs_server *ns);
/* Hands nfs the per-client views (ops NULL takes them away again). */
void nfs_server_set_views(struct nfs_server *ns, const struct nfs_views_ops *ops, void *table);

/*
 * Calls fn for every entry of the MOUNT list (a client's address and the path it mounted)
 * under the list's lock, so fn must not block; stops at fn's first non-zero return and
 * returns it, 0 when done.
 */
int nfs_mounts_each(struct nfs_server *ns,
		    int (*fn)(const char *host, const char *path, void *arg), void *arg);

/*
 * The options of the first rule of export index i admitting rq's peer, copied to *out.
 * False when no rule admits it. An export without rules admits everyone with ec_opts.
 */
bool nfs_rule_for(struct nfs_server *ns, int i, const struct rpc_req *rq,
		  struct export_opts *out);

/*
 * The index of the first client rule of export index i admitting a client at peer (0 for
 * an export without rules, which admits everyone), or -1 when none does.
 */
int nfs_rule_index(struct nfs_server *ns, int i, const struct sockaddr *peer);

/* The specifier of client rule index rule of export i as written, or "*" if it has none. */
void nfs_rule_spec(struct nfs_server *ns, int i, int rule, char *buf, size_t len);

/*
 * Whether any rule of any export admits a client at peer (an export without rules admits
 * everyone): a client no rule admits gets no TCP connection (net_opts.no_admit).
 */
bool nfs_peer_admitted(struct nfs_server *ns, const struct sockaddr *peer);

/*
 * The name the host name map (setting hosts) gives the client at addr, copied to name;
 * false, leaving name alone, when it gives none. When map is not NULL, the map's file is
 * copied there for messages ("" without a map). A reload may replace the map meanwhile.
 */
bool nfs_host_name(struct nfs_server *ns, const char *addr, char *name, size_t namelen,
		   char *map, size_t maplen);

/* How many reloads there were: a host name found before one may be another after it. */
unsigned nfs_names_gen(struct nfs_server *ns);

/*
 * How many export slots ns has: the config's exports in its order, then those reloads
 * added. A slot keeps its export's name (and upper=) for the server's life, so a call may
 * keep an index; an export a reload removed keeps its slot, without a union, until an
 * export of its name comes back.
 */
int nfs_export_count(const struct nfs_server *ns);
/* The union serving export index i; NULL when a reload removed the export. */
struct union_export *nfs_export_union(const struct nfs_server *ns, int i);

/*
 * Changes to the live export table, made by a reload on the loop thread (the one writer);
 * main owns the unions, opened before and closed after (calls may still run on an old one).
 * nfs_server_add_export: takes export j of next (a config being reloaded) into a new slot
 *   served by ux, with its rules; returns the slot, or -ENOSPC when all are used.
 * nfs_server_set_union: serves slot i by ux from now on (NULL: no longer served: its
 *   handles are stale, MNT answers NOENT, its MOUNT list entries go); returns the old one.
 * nfs_server_swap_branches: exchanges slot i's branch stack with next's (a new base).
 */
int nfs_server_add_export(struct nfs_server *ns, struct config *next, int j,
			  struct union_export *ux);
struct union_export *nfs_server_set_union(struct nfs_server *ns, int i, struct union_export *ux);
void nfs_server_swap_branches(struct nfs_server *ns, int i, struct export_conf *next);
/* How many times export i's branches were swapped in this run (a view's base is one of them). */
unsigned nfs_export_base_gen(struct nfs_server *ns, int i);
/*
 * A copy of export i's branch stack as it is now (a reload may change it meanwhile), with
 * every branch's role; free with nfs_export_branches_free. 0 or -ENOMEM.
 */
int nfs_export_branches(struct nfs_server *ns, int i, char ***branches, enum union_role **roles,
			int *n);
void nfs_export_branches_free(char **branches, enum union_role *roles, int n);
/* Export i's base as it is now (config_base_text: malloc()ed; NULL: no memory). */
char *nfs_export_base_text(struct nfs_server *ns, int i);

/*
 * The union object a lock manager's file handle (the NFS handle's bytes) names, for the
 * client of rq, and whether it may lock it. What is checked depends on the use:
 * - NFS_LOCK_RELEASE (UNLOCK, CANCEL, UNSHARE): only that the handle is one of ours. A caller
 *   can release nothing but its own locks, so the object need not exist any more (a file
 *   removed by another client) nor the caller be admitted still.
 * - NFS_LOCK_READ, NFS_LOCK_WRITE (TEST, LOCK, SHARE): the same rules as an NFS call from the
 *   peer (the export admits it; a per-client view's id resolves only for that client, so each
 *   view is its own object space), the object must exist, and the caller (squashed as for an
 *   NFS call) must own it or may read it, as knfsd asks of a lock; NFS_LOCK_WRITE (an
 *   exclusive lock, a share that writes) is refused on a read-only export.
 * 0 with *out filled; -ESTALE: not a handle of ours, or it names nothing now; -EACCES: the
 * peer is not a client of the export, or the caller may not lock the object; -EROFS: a write
 * use on a read-only export; -EAGAIN: its view cannot be opened now; another -errno: failure.
 */
enum nfs_lock_use {
	NFS_LOCK_RELEASE,
	NFS_LOCK_READ,
	NFS_LOCK_WRITE,
};

struct nfs_lock_target {
	uint32_t lt_export;      /* export or view id */
	uint64_t lt_fileid;      /* union ino inside it */
	bool lt_regular;         /* a regular file (always true for NFS_LOCK_RELEASE) */
};
int nfs_lock_object(struct nfs_server *ns, const struct rpc_req *rq, const void *fh, size_t fhlen,
		    enum nfs_lock_use use, struct nfs_lock_target *out);

/* Whether export i is read-only for every client (its "ro" option), as a reload left it. */
bool nfs_export_read_only(struct nfs_server *ns, int i);

#endif
