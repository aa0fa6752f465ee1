/*
 * The NLM v4 handlers and dispatch table. A request's object is the union object its handle
 * names for this client (nfs_lock_object); its owner is (the peer's address, svid, oh). The
 * *_MSG procedures run the synchronous one, reply nothing and send the result as a *_RES
 * call to the caller's lock manager.
 */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "nlm_internal.h"

static struct nlm_service *nlm_of(const struct rpc_req *rq)
{
	return rq->rq_ctx;
}

/* Results are encoded after the arguments are freed: what they repeat is copied. */
static void nlm_netobj_copy(struct rpc_req *rq, const nlm4_netobj *in, nlm4_netobj *out)
{
	out->nlm4_netobj_len = in->nlm4_netobj_len;
	out->nlm4_netobj_val = in->nlm4_netobj_len ? rpc_alloc(rq, in->nlm4_netobj_len) : NULL;
	if (in->nlm4_netobj_len)
		memcpy(out->nlm4_netobj_val, in->nlm4_netobj_val, in->nlm4_netobj_len);
}

static nlm4_stats nlm_stat_of(enum locks_status st)
{
	switch (st) {
	case LOCKS_OK:
	case LOCKS_NOENT:
		return NLM4_GRANTED;
	case LOCKS_DENIED:
		return NLM4_DENIED;
	case LOCKS_BLOCKED:
	case LOCKS_ALREADY_BLOCKED:
		return NLM4_BLOCKED;
	case LOCKS_NOLOCKS:
	case LOCKS_NOMEM:
		return NLM4_DENIED_NOLOCKS;
	case LOCKS_INVAL:
	default:
		return NLM4_FAILED;
	}
}

/* The object a handle names, checked for the use (nfs.h): 0 or -errno (nfs_lock_object). */
static int nlm_object(struct nlm_service *s, const struct rpc_req *rq, const nlm4_netobj *fh,
		      enum nfs_lock_use use, struct locks_object *o)
{
	struct nfs_lock_target t;
	int err;

	if (s->s_hooks.nh_object != NULL)
		err = s->s_hooks.nh_object(s->s_hooks.nh_arg, rq, fh->nlm4_netobj_val,
					   fh->nlm4_netobj_len, use, &t);
	else
		err = nfs_lock_object(s->s_ns, rq, fh->nlm4_netobj_val, fh->nlm4_netobj_len, use,
				      &t);
	/* Byte ranges mean something in regular files only (knfsd and ganesha agree). */
	if (err == 0 && !t.lt_regular)
		err = -EINVAL;
	if (err == 0) {
		o->lo_export = t.lt_export;
		o->lo_fileid = t.lt_fileid;
	}
	return err;
}

/* What a lock call answers when its object cannot be had (refused: FAILED, as knfsd). */
static nlm4_stats nlm_object_stat(int err)
{
	return err == 0 ? NLM4_GRANTED : err == -ESTALE ? NLM4_STALE_FH : NLM4_FAILED;
}

/* A table request for lock l of the caller; key receives the caller's host key. */
static nlm4_stats nlm_request(struct nlm_service *s, const struct rpc_req *rq, const nlm4_lock *l,
			      bool exclusive, enum nfs_lock_use use, char key[NLM_KEY_LEN],
			      struct locks_request *out)
{
	nlm4_stats st;

	memset(out, 0, sizeof(*out));
	st = nlm_object_stat(nlm_object(s, rq, &l->fh, use, &out->lq_object));
	if (st != NLM4_GRANTED)
		return st;
	nlm_addr_key((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, key);
	out->lq_owner = (struct locks_owner){ key, l->svid, l->oh.nlm4_netobj_val,
					      l->oh.nlm4_netobj_len };
	out->lq_type = exclusive ? LOCKS_EXCLUSIVE : LOCKS_SHARED;
	out->lq_offset = l->l_offset;
	out->lq_len = l->l_len;
	return NLM4_GRANTED;
}

/* Taking a lock: an exclusive one is a use for writing. */
static enum nfs_lock_use nlm_lock_use(bool exclusive)
{
	return exclusive ? NFS_LOCK_WRITE : NFS_LOCK_READ;
}

/* ---- the synchronous procedures ---- */

static void nlm_do_test(struct rpc_req *rq, nlm4_testargs *a, nlm4_testres *r)
{
	struct nlm_service *s = nlm_of(rq);
	struct locks_request req;
	struct locks_holder h;
	char key[NLM_KEY_LEN];
	nlm4_stats st;

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	st = nlm_in_grace(s) ? NLM4_DENIED_GRACE_PERIOD
			     : nlm_request(s, rq, &a->alock, a->exclusive,
					   nlm_lock_use(a->exclusive), key, &req);
	if (st == NLM4_GRANTED && locks_test(s->s_locks, &req, &h) == LOCKS_DENIED) {
		nlm4_holder *ho = &r->stat.nlm4_testrply_u.holder;
		nlm4_netobj oh = { (u_int)h.lh_ohlen, (char *)h.lh_oh };

		st = NLM4_DENIED;
		ho->exclusive = h.lh_type == LOCKS_EXCLUSIVE;
		ho->svid = h.lh_svid;
		nlm_netobj_copy(rq, &oh, &ho->oh);
		ho->l_offset = h.lh_offset;
		ho->l_len = h.lh_len;
	}
	r->stat.stat = st;
}

/*
 * A reclaim is granted only during the grace period and a new lock only outside it (as
 * Linux lockd): a reclaim later could take a lock another client has held since.
 */
static bool nlm_grace_refuses(struct nlm_service *s, bool reclaim)
{
	return reclaim != nlm_in_grace(s);
}

/* LOCK (monitored: may block, NSM watches the host) and NM_LOCK (neither). */
static void nlm_do_lock(struct rpc_req *rq, nlm4_lockargs *a, nlm4_res *r, bool monitored)
{
	struct nlm_service *s = nlm_of(rq);
	struct locks_event *events = NULL;
	struct nlm_waiter *w = NULL;
	struct locks_request req;
	char key[NLM_KEY_LEN];
	bool entered = false;
	enum locks_status ls;
	nlm4_stats st;

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	if (nlm_grace_refuses(s, a->reclaim))
		st = NLM4_DENIED_GRACE_PERIOD;
	else
		st = nlm_request(s, rq, &a->alock, a->exclusive, nlm_lock_use(a->exclusive), key,
				 &req);
	if (st != NLM4_GRANTED)
		goto out;
	req.lq_block = monitored && a->block;
	if (monitored) {
		st = nlm_host_enter(s, rq, key);
		entered = st == NLM4_GRANTED;
	}
	/*
	 * A host is monitored from its first lock on: not for a request that is refused. Only
	 * a host not monitored yet needs the TEST first; for the others NSM has nothing to do.
	 */
	if (entered && !nlm_host_monitored(s, key, a->alock.caller_name)) {
		if (!req.lq_block && locks_test(s->s_locks, &req, NULL) == LOCKS_DENIED) {
			st = NLM4_DENIED;
			goto out;
		}
		st = nlm_monitor_host(s, rq, key, a->alock.caller_name);
	}
	if (st != NLM4_GRANTED)
		goto out;
	if (req.lq_block) {
		w = nlm_waiter_new(rq, &a->alock, a->exclusive);
		if (w == NULL) {
			st = NLM4_DENIED_NOLOCKS;
			goto out;
		}
	}
	ls = locks_lock(s->s_locks, &req, w, NULL, &events);
	if (ls != LOCKS_BLOCKED)
		nlm_waiter_free(w);  /* not queued (ALREADY_BLOCKED keeps the first cookie) */
	nlm_events(s, events);
	st = nlm_stat_of(ls);
	if (st == NLM4_GRANTED && a->reclaim)
		nlm_host_reclaimed(s, rq);
out:
	if (entered)
		nlm_host_leave(s, key);
	r->stat.stat = st;
}

static void nlm_do_cancel(struct rpc_req *rq, nlm4_cancargs *a, nlm4_res *r)
{
	struct nlm_service *s = nlm_of(rq);
	struct locks_request req;
	char key[NLM_KEY_LEN];
	void *cookie = NULL;
	nlm4_stats st;

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	st = nlm_request(s, rq, &a->alock, a->exclusive, NFS_LOCK_RELEASE, key, &req);
	if (st == NLM4_GRANTED && locks_cancel(s->s_locks, &req, &cookie) == LOCKS_OK) {
		nlm_waiter_free(cookie);
		nlm_host_settle(s, key);
	}
	/* Not waiting any more (granted meanwhile, or never queued): nothing to cancel. */
	r->stat.stat = st;
}

static void nlm_do_unlock(struct rpc_req *rq, nlm4_unlockargs *a, nlm4_res *r)
{
	struct nlm_service *s = nlm_of(rq);
	struct locks_event *events = NULL;
	struct locks_request req;
	char key[NLM_KEY_LEN];
	nlm4_stats st;

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	st = nlm_request(s, rq, &a->alock, false, NFS_LOCK_RELEASE, key, &req);
	if (st == NLM4_GRANTED) {
		st = nlm_stat_of(locks_unlock(s->s_locks, &req, &events));
		nlm_events(s, events);
		nlm_host_settle(s, key);
	}
	r->stat.stat = st;
}

/* We are a server only: no lock of ours waits for a grant. */
static void nlm_do_granted(struct rpc_req *rq, nlm4_testargs *a, nlm4_res *r)
{
	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	r->stat.stat = NLM4_DENIED;
}

/* ---- handlers ---- */

static enum rpc_outcome nlm_h_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_test(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_test(rq, args, res);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_lock(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_lock(rq, args, res, true);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_nm_lock(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_lock(rq, args, res, false);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_cancel(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_cancel(rq, args, res);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_unlock(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_unlock(rq, args, res);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_granted(struct rpc_req *rq, void *args, void *res)
{
	nlm_do_granted(rq, args, res);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_test_msg(struct rpc_req *rq, void *args, void *res)
{
	nlm4_testres *r = rpc_alloc(rq, sizeof(*r));

	(void)res;
	nlm_do_test(rq, args, r);
	nlm_send_res(nlm_of(rq), rq, NLMPROC4_TEST_RES, RPC_XDRPROC(xdr_nlm4_testres), r);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_lock_msg(struct rpc_req *rq, void *args, void *res)
{
	nlm4_res *r = rpc_alloc(rq, sizeof(*r));

	(void)res;
	nlm_do_lock(rq, args, r, true);
	nlm_send_res(nlm_of(rq), rq, NLMPROC4_LOCK_RES, RPC_XDRPROC(xdr_nlm4_res), r);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_cancel_msg(struct rpc_req *rq, void *args, void *res)
{
	nlm4_res *r = rpc_alloc(rq, sizeof(*r));

	(void)res;
	nlm_do_cancel(rq, args, r);
	nlm_send_res(nlm_of(rq), rq, NLMPROC4_CANCEL_RES, RPC_XDRPROC(xdr_nlm4_res), r);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_unlock_msg(struct rpc_req *rq, void *args, void *res)
{
	nlm4_res *r = rpc_alloc(rq, sizeof(*r));

	(void)res;
	nlm_do_unlock(rq, args, r);
	nlm_send_res(nlm_of(rq), rq, NLMPROC4_UNLOCK_RES, RPC_XDRPROC(xdr_nlm4_res), r);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_granted_msg(struct rpc_req *rq, void *args, void *res)
{
	nlm4_res *r = rpc_alloc(rq, sizeof(*r));

	(void)res;
	nlm_do_granted(rq, args, r);
	nlm_send_res(nlm_of(rq), rq, NLMPROC4_GRANTED_RES, RPC_XDRPROC(xdr_nlm4_res), r);
	return RPC_OUT_REPLY;
}

/* Results of our own *_MSG calls: only a refused grant matters. */
static enum rpc_outcome nlm_h_res_ignored(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_granted_res(struct rpc_req *rq, void *args, void *res)
{
	nlm4_res *a = args;

	(void)res;
	nlm_granted_res(nlm_of(rq), rq, &a->cookie, a->stat.stat);
	return RPC_OUT_REPLY;
}

/* A share reservation is an open: one the caller may not make is DENIED, as a conflict. */
static enum rpc_outcome nlm_h_share(struct rpc_req *rq, void *args, void *res)
{
	struct nlm_service *s = nlm_of(rq);
	nlm4_shareargs *a = args;
	nlm4_shareres *r = res;
	enum nfs_lock_use use = (a->share.access & fsa_W) ? NFS_LOCK_WRITE : NFS_LOCK_READ;
	struct locks_object o;
	char key[NLM_KEY_LEN];
	bool entered = false;
	nlm4_stats st;
	int err;

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	nlm_addr_key((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, key);
	if (!a->reclaim && nlm_in_grace(s)) {
		st = NLM4_DENIED_GRACE_PERIOD;
	} else {
		err = nlm_object(s, rq, &a->share.fh, use, &o);
		st = err == -EACCES || err == -EROFS ? NLM4_DENIED : nlm_object_stat(err);
	}
	if (st == NLM4_GRANTED) {
		st = nlm_host_enter(s, rq, key);
		entered = st == NLM4_GRANTED;
	}
	if (st == NLM4_GRANTED)
		st = nlm_monitor_host(s, rq, key, a->share.caller_name);
	if (st == NLM4_GRANTED) {
		pthread_mutex_lock(&s->s_mu);
		st = nlm_share_add(s, &o, key, &a->share);
		pthread_mutex_unlock(&s->s_mu);
	}
	if (entered)
		nlm_host_leave(s, key);
	r->stat = st;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome nlm_h_unshare(struct rpc_req *rq, void *args, void *res)
{
	struct nlm_service *s = nlm_of(rq);
	nlm4_shareargs *a = args;
	nlm4_shareres *r = res;
	struct locks_object o;
	char key[NLM_KEY_LEN];

	nlm_netobj_copy(rq, &a->cookie, &r->cookie);
	nlm_addr_key((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, key);
	r->stat = nlm_object_stat(nlm_object(s, rq, &a->share.fh, NFS_LOCK_RELEASE, &o));
	if (r->stat == NLM4_GRANTED) {
		pthread_mutex_lock(&s->s_mu);
		nlm_share_remove(s, &o, key, &a->share);
		pthread_mutex_unlock(&s->s_mu);
		nlm_host_settle(s, key);
	}
	return RPC_OUT_REPLY;
}

/*
 * FREE_ALL (a client without statd restarted) frees the host it comes from, as Linux lockd
 * finds it by the caller's address: the name it gives could be anybody's.
 */
static enum rpc_outcome nlm_h_free_all(struct rpc_req *rq, void *args, void *res)
{
	nlm4_notify *a = args;
	char key[NLM_KEY_LEN];

	(void)res;
	nlm_addr_key((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, key);
	log_info("nlm: FREE_ALL from %s (as %s): its locks are freed", key, a->name);
	nlm_free_host(nlm_of(rq), key);
	return RPC_OUT_REPLY;
}

/* ---- the table ---- */

static enum rpc_status nlm_rpc_status(nlm4_stats st)
{
	switch (st) {
	case NLM4_GRANTED:
	case NLM4_DENIED:
	case NLM4_BLOCKED:
	case NLM4_DENIED_GRACE_PERIOD:
		return RPC_STATUS_OK;
	case NLM4_STALE_FH:
		return RPC_STATUS_STALE;
	default:
		return RPC_STATUS_ERROR;
	}
}

static enum rpc_status nlm4_status(uint32_t vers, uint32_t proc, const void *res)
{
	(void)vers;
	switch (proc) {
	case NLMPROC4_TEST:
		return nlm_rpc_status(((const nlm4_testres *)res)->stat.stat);
	case NLMPROC4_LOCK:
	case NLMPROC4_CANCEL:
	case NLMPROC4_UNLOCK:
	case NLMPROC4_NM_LOCK:
		return nlm_rpc_status(((const nlm4_res *)res)->stat.stat);
	case NLMPROC4_SHARE:
	case NLMPROC4_UNSHARE:
		return nlm_rpc_status(((const nlm4_shareres *)res)->stat);
	default:
		return RPC_STATUS_OK;
	}
}

static const struct rpc_proc nlm4_procs[] = {
	[NLMPROC4_NULL] = RPC_PROC_VOID("NULL", nlm_h_null),
	[NLMPROC4_TEST] = RPC_PROC("TEST", nlm4_testargs, nlm4_testres, nlm_h_test),
	[NLMPROC4_LOCK] = RPC_PROC("LOCK", nlm4_lockargs, nlm4_res, nlm_h_lock),
	[NLMPROC4_CANCEL] = RPC_PROC("CANCEL", nlm4_cancargs, nlm4_res, nlm_h_cancel),
	[NLMPROC4_UNLOCK] = RPC_PROC("UNLOCK", nlm4_unlockargs, nlm4_res, nlm_h_unlock),
	[NLMPROC4_GRANTED] = RPC_PROC("GRANTED", nlm4_testargs, nlm4_res, nlm_h_granted),
	[NLMPROC4_TEST_MSG] = RPC_PROC_NORES("TEST_MSG", nlm4_testargs, nlm_h_test_msg),
	[NLMPROC4_LOCK_MSG] = RPC_PROC_NORES("LOCK_MSG", nlm4_lockargs, nlm_h_lock_msg),
	[NLMPROC4_CANCEL_MSG] = RPC_PROC_NORES("CANCEL_MSG", nlm4_cancargs, nlm_h_cancel_msg),
	[NLMPROC4_UNLOCK_MSG] = RPC_PROC_NORES("UNLOCK_MSG", nlm4_unlockargs, nlm_h_unlock_msg),
	[NLMPROC4_GRANTED_MSG] = RPC_PROC_NORES("GRANTED_MSG", nlm4_testargs, nlm_h_granted_msg),
	[NLMPROC4_TEST_RES] = RPC_PROC_NORES("TEST_RES", nlm4_testres, nlm_h_res_ignored),
	[NLMPROC4_LOCK_RES] = RPC_PROC_NORES("LOCK_RES", nlm4_res, nlm_h_res_ignored),
	[NLMPROC4_CANCEL_RES] = RPC_PROC_NORES("CANCEL_RES", nlm4_res, nlm_h_res_ignored),
	[NLMPROC4_UNLOCK_RES] = RPC_PROC_NORES("UNLOCK_RES", nlm4_res, nlm_h_res_ignored),
	[NLMPROC4_GRANTED_RES] = RPC_PROC_NORES("GRANTED_RES", nlm4_res, nlm_h_granted_res),
	[16] = RPC_PROC_UNAVAIL(NULL), [17] = RPC_PROC_UNAVAIL(NULL),
	[18] = RPC_PROC_UNAVAIL(NULL), [19] = RPC_PROC_UNAVAIL(NULL),
	[NLMPROC4_SHARE] = RPC_PROC("SHARE", nlm4_shareargs, nlm4_shareres, nlm_h_share),
	[NLMPROC4_UNSHARE] = RPC_PROC("UNSHARE", nlm4_shareargs, nlm4_shareres, nlm_h_unshare),
	[NLMPROC4_NM_LOCK] = RPC_PROC("NM_LOCK", nlm4_lockargs, nlm4_res, nlm_h_nm_lock),
	[NLMPROC4_FREE_ALL] = RPC_PROC_NORES("FREE_ALL", nlm4_notify, nlm_h_free_all),
};

/*
 * A retransmitted UNLOCK must not drop a lock its owner took again after the first one, nor a
 * retransmitted LOCK_MSG send a second LOCK_RES: the calls that change state get the reply
 * the original got (drc.h). TEST, the results and GRANTED change nothing.
 */
#define NLM_BIT(p) (1u << (p))
static const uint32_t nlm4_nonidempotent[] = {
	NLM_BIT(NLMPROC4_LOCK) | NLM_BIT(NLMPROC4_CANCEL) | NLM_BIT(NLMPROC4_UNLOCK) |
	NLM_BIT(NLMPROC4_LOCK_MSG) | NLM_BIT(NLMPROC4_CANCEL_MSG) |
	NLM_BIT(NLMPROC4_UNLOCK_MSG) | NLM_BIT(NLMPROC4_SHARE) | NLM_BIT(NLMPROC4_UNSHARE) |
	NLM_BIT(NLMPROC4_NM_LOCK) | NLM_BIT(NLMPROC4_FREE_ALL),
};

static const struct rpc_proc *const nlm4_versions[] = { nlm4_procs };
static const uint32_t nlm4_nprocs[] = { sizeof(nlm4_procs) / sizeof(nlm4_procs[0]) };

const struct rpc_program nlm_program = {
	.rg_prog = NLM_PROG,
	.rg_name = "nlm",
	.rg_vers_min = NLM_VERS4,
	.rg_vers_max = NLM_VERS4,
	.rg_procs = nlm4_versions,
	.rg_nprocs = nlm4_nprocs,
	.rg_nonidempotent = nlm4_nonidempotent,
	.rg_status = nlm4_status,
};
