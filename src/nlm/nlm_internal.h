/*
 * Shared by the NLM service files in src/nlm/ (not locks.c): the service's state, the host
 * and share tables, the callbacks. program.c holds the handlers, service.c the state, hosts,
 * grace and callbacks, shares.c the DOS share reservations.
 */
#ifndef UNFS_NLM_INTERNAL_H
#define UNFS_NLM_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "nfs.h"
#include "nlm.h"
#include "nlm4.h"
#include "nlm_locks.h"
#include "rpc.h"

/* A host key: the peer's address as text (the lock table's lw_host), with its NUL. */
#define NLM_KEY_LEN INET6_ADDRSTRLEN
_Static_assert(NLM_KEY_LEN - 1 <= LOCKS_HOST_MAX, "the lock table takes every host key");

/* Granted callbacks awaiting GRANTED_RES: bound. */
#define NLM_GRANTS_MAX 1024
/*
 * A datagram's source address may be forged: hosts none of whose lock calls came over TCP
 * hold at most this many of the monitored hosts' places, and calls back to a UDP caller
 * are tried this many times (not retried for a minute).
 */
#define NLM_UDP_HOSTS_MAX 64
#define NLM_UDP_CALLBACK_ATTEMPTS 3

/*
 * A host that holds something (locks, waiters, shares) or has a LOCK or SHARE under way:
 * whom NSM monitors, by which name. It goes once it holds nothing (nlm_host_settle), and
 * NSM forgets it then, so only hosts holding something count against the bound.
 */
struct nlm_host {
	struct nlm_host *h_next;
	char h_key[NLM_KEY_LEN];
	char *h_name;               /* its caller_name NSM monitors it under; NULL: not yet */
	struct sockaddr_storage h_addr;  /* for NSM */
	socklen_t h_addrlen;
	unsigned h_calls;           /* its LOCKs and SHAREs under way (nlm_host_enter) */
	bool h_udp;                 /* none of its calls came over TCP */
};

/* A GRANTED_MSG sent, until its GRANTED_RES comes (or the callback fails). */
struct nlm_grant {
	struct nlm_grant *g_next;
	uint64_t g_seq;             /* our cookie */
	uint64_t g_grant;           /* the table's grant, to keep or undo */
	char g_key[NLM_KEY_LEN];
};

/* A queued LOCK: how to call the client back once it is granted (the table's cookie). */
struct nlm_waiter {
	struct sockaddr_storage w_addr;
	socklen_t w_addrlen;
	int w_protocol;
	bool w_exclusive;
	nlm4_lock w_lock;           /* its strings point into this allocation */
};

struct nlm_share {
	struct locks_object sh_object;
	char sh_key[NLM_KEY_LEN];
	uint32_t sh_mode;           /* fsh4_mode: what it denies others */
	uint32_t sh_access;         /* fsh4_access: what it does */
	size_t sh_ohlen;
	uint8_t sh_oh[MAXNETOBJ_SZ];
};

struct nlm_service {
	struct nfs_server *s_ns;
	struct nsm *s_nsm;
	struct rpc_client *s_rc;
	struct nlm_hooks s_hooks;
	struct locks_table *s_locks;
	unsigned s_retry_ms, s_retry_total_ms;
	_Atomic uint64_t s_seq;     /* our cookies */
	_Atomic uint64_t s_callbacks;  /* GRANTED_MSG calls queued or being retried */

	pthread_mutex_t s_mu;       /* guards hosts, grants and shares */
	struct nlm_host *s_hosts;
	unsigned s_nhosts, s_hosts_max;
	unsigned s_nudp;            /* of s_hosts, those with h_udp */
	time_t s_udp_warned;
	struct nlm_grant *s_grants;
	unsigned s_ngrants;
	struct nlm_share *s_shares; /* [s_nshares] of [s_shares_max] */
	unsigned s_nshares, s_shares_max;

	/* the last run left clients and a grace is configured; false once seen over */
	atomic_bool s_grace_on;
	struct timespec s_grace_end;  /* CLOCK_MONOTONIC */
};

/* The peer's address as a host key (rpc_addr_text; "unknown" when it has none). */
void nlm_addr_key(const struct sockaddr *sa, socklen_t len, char key[NLM_KEY_LEN]);

/* service.c */
/*
 * A LOCK or SHARE of rq's host (key) begins: its host entry is made if need be and kept until
 * nlm_host_leave, whatever the host releases meanwhile. NLM4_DENIED_NOLOCKS when the hosts
 * are at their bound (or UDP-only hosts at theirs).
 */
nlm4_stats nlm_host_enter(struct nlm_service *s, const struct rpc_req *rq, const char *key);
void nlm_host_leave(struct nlm_service *s, const char *key);
/* rq's host reclaimed a lock: it knows of this start, NSM need not tell it. */
void nlm_host_reclaimed(struct nlm_service *s, const struct rpc_req *rq);
/* Whether NSM already monitors the host at key under caller_name (no call to NSM needed). */
bool nlm_host_monitored(struct nlm_service *s, const char *key, const char *caller_name);
/* Has NSM monitor the entered host at key under caller_name (if it does not already). */
nlm4_stats nlm_monitor_host(struct nlm_service *s, const struct rpc_req *rq, const char *key,
			    const char *caller_name);
/*
 * The host at key may hold nothing any more (it released something, or a waiter of it
 * went): if so, and no LOCK or SHARE of it is under way, its entry goes and NSM forgets it.
 */
void nlm_host_settle(struct nlm_service *s, const char *key);
/* Acts on the table's events: calls back granted waiters, frees dropped ones. Frees events. */
void nlm_events(struct nlm_service *s, struct locks_event *events);
void nlm_waiter_free(struct nlm_waiter *w);
struct nlm_waiter *nlm_waiter_new(const struct rpc_req *rq, const nlm4_lock *l, bool exclusive);
/* A GRANTED_RES from rq's peer: a status other than GRANTED gives its granted lock back. */
void nlm_granted_res(struct nlm_service *s, const struct rpc_req *rq, const nlm4_netobj *cookie,
		     nlm4_stats stat);
/* Sends a *_RES call with res to the caller of rq (the *_MSG procedures). */
void nlm_send_res(struct nlm_service *s, const struct rpc_req *rq, uint32_t proc, xdrproc_t xdr,
		  const void *res);
/* Frees every lock, waiter and share of the host at key (FREE_ALL, a reboot notice). */
void nlm_free_host(struct nlm_service *s, const char *key);

/* shares.c: under s_mu */
nlm4_stats nlm_share_add(struct nlm_service *s, const struct locks_object *o, const char *key,
			 const nlm4_share *sh);
void nlm_share_remove(struct nlm_service *s, const struct locks_object *o, const char *key,
		      const nlm4_share *sh);
void nlm_shares_drop_host(struct nlm_service *s, const char *key);
bool nlm_shares_held(const struct nlm_service *s, const char *key);

#endif
