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

/* Everything the handlers share; built by main, handed to rpc_dispatch_init as ctx. */
struct nfs_server {
	struct config *ns_cfg;                 /* its rules change only by nfs_server_swap_rules */
	struct union_export **ns_exports;      /* [i] serves ns_cfg->cf_exports[i] */
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
	struct nfs_views *ns_views;            /* per-client views (upper=), views.h */
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
void nfs_server_destroy(struct nfs_server *ns);

/*
 * The options of the first rule of export index i admitting rq's peer, copied to *out.
 * False when no rule admits it. An export without rules admits everyone with ec_opts.
 */
bool nfs_rule_for(struct nfs_server *ns, int i, const struct rpc_req *rq,
		  struct export_opts *out);

/*
 * Whether any rule of any export admits a client at peer (an export without rules admits
 * everyone): a client no rule admits gets no TCP connection (net_opts.no_admit).
 */
bool nfs_peer_admitted(struct nfs_server *ns, const struct sockaddr *peer);

#endif
