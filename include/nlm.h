/*
 * The NLM v4 server (program 100021 version 4): byte-range locks and DOS share reservations
 * for NFSv3 clients, kept in one lock table (nlm_locks.h) per server.
 *
 * A lock is on a union object (export or per-client view id, union fileid: nfs_lock_object),
 * never on the backing file: processes on the server do not see NFS clients' locks. A lock
 * owner is (the peer's address as text, svid, oh): the caller_name alone is not unique (two
 * kernel clients may both call themselves "guest").
 *
 * Blocking LOCKs that wait get NLM4_BLOCKED; when the table grants them, the service calls the
 * client back (GRANTED_MSG through rpc_client_send, retried). A grant whose callback is never
 * delivered, or that the client refuses in GRANTED_RES, is undone (locks_ungrant): the
 * owner's locks on that range are again what they were before it, so an interrupted upgrade
 * leaves the shared lock held. The *_MSG procedures reply
 * through a *_RES call to the caller. The first lock or share of a host has NSM monitor it,
 * until it holds nothing again; NSM's reboot notice, or FREE_ALL, from the host's address
 * frees what it held. Taking a lock needs what knfsd asks (read permission or ownership;
 * exclusive locks not on read-only exports); releasing one works on objects since removed. After a restart with monitored clients,
 * a grace period (nlm_opts.no_grace_seconds) refuses new locks so clients can reclaim theirs.
 *
 * Handlers run on worker threads; callbacks go out on the rpc_client thread, never under the
 * table's mutex and never on the event loop.
 */
#ifndef UNFS_NLM_H
#define UNFS_NLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nfs.h"        /* nfs_lock_object's types */
#include "nlm4.h"       /* generated from rpc/nlm4.x */
#include "nlm_locks.h"
#include "rpc.h"

/* NLM_PROG, NLM_VERS4 and the NLMPROC4_* numbers are in rpc/nlm4.x. */
#define NLM_DEFAULT_SHARES 4096            /* share reservations held at once */

struct nsm;
struct rpc_client;
struct rpc_client_call;
struct nlm_service;

/*
 * What the service calls outside itself, replaceable for tests (each NULL: the real one):
 * nh_send for rpc_client_send, nh_monitor for nsm_monitor, nh_object for nfs_lock_object,
 * nh_previous for nsm_previous_clients, nh_unmonitor for nsm_unmonitor. nh_arg is handed
 * to each.
 */
struct nlm_hooks {
	int (*nh_send)(void *arg, const struct rpc_client_call *call);
	int (*nh_monitor)(void *arg, const struct sockaddr *client, socklen_t len,
			  const char *caller_name, const struct sockaddr *local, socklen_t locallen);
	int (*nh_object)(void *arg, const struct rpc_req *rq, const void *fh, size_t fhlen,
			 enum nfs_lock_use use, struct nfs_lock_target *out);
	bool (*nh_previous)(void *arg);
	void (*nh_unmonitor)(void *arg, const struct sockaddr *client, socklen_t len);
	void *nh_arg;
};

struct nlm_opts {
	unsigned no_grace_seconds;   /* grace after a restart with previous clients; 0: none */
	unsigned no_retry_ms;        /* GRANTED callback interval; 0: CONFIG_DEFAULT_NLM_RETRY_MS */
	unsigned no_retry_total_ms;  /* and how long it is retried; 0: CONFIG_NLM_RETRY_TOTAL_MS */
	unsigned no_shares;          /* share reservations; 0: NLM_DEFAULT_SHARES */
	const struct locks_limits *no_limits;  /* NULL: the table's defaults */
	const struct nlm_hooks *no_hooks;      /* NULL: none (tests only) */
};

/* Handlers' rq_ctx: the struct nlm_service (rpc_dispatch_set_ctx(NLM_PROG, s)). */
extern const struct rpc_program nlm_program;

/*
 * A service over ns's exports. nsm and rc may be NULL (no monitoring, no callbacks: blocked
 * waiters are then never told, so a test only). Registers the reboot hook with nsm. The grace
 * period starts now when nsm says the last run left clients. -errno with err filled.
 */
int nlm_service_new(struct nfs_server *ns, struct nsm *nsm, struct rpc_client *rc,
		    const struct nlm_opts *o, struct nlm_service **out, char *err, size_t len);
/* Stop sending callbacks first (rpc_client_stop): pending ones reference the service. */
void nlm_service_free(struct nlm_service *s);
/* The table, for `unionnfsd-ctl locks` and the statistics. */
struct locks_table *nlm_service_locks(struct nlm_service *s);
/* GRANTED callbacks queued or being retried (not yet delivered nor given up), for the stats. */
uint64_t nlm_service_callbacks_pending(struct nlm_service *s);
/* Whether the grace period runs; the first call to find it over says so in the log. */
bool nlm_in_grace(struct nlm_service *s);

/*
 * NSM's reboot notice (the hook nlm_service_new registers with nsm): frees every lock, waiter
 * and share of the host at from's address, whatever mon_name says (a name proves nothing,
 * and two clients may share one), and calls back the waiters that frees. Any thread.
 */
void nlm_host_rebooted(struct nlm_service *s, const char *mon_name, const struct sockaddr *from,
		       socklen_t fromlen);

#endif
