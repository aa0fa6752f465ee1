/*
 * NSM program 100024 v1 as served by unionnfsd: SM_NOTIFY (a client restarted: its locks
 * go, through the reboot hook) and SM_STAT (our state number). SM_MON, SM_UNMON,
 * SM_UNMON_ALL and SM_SIMU_CRASH are what a local lock manager asks of the machine's own
 * statd, which we are not: they are refused (stat_fail) or ignored, and said once in the
 * log. Handlers find the struct nsm in rq_ctx.
 */
#include <arpa/inet.h>
#include <stdio.h>

#include "log.h"
#include "nsm_int.h"
#include "sm_inter.h"

static void peer_text(const struct rpc_req *rq, char *buf, size_t len)
{
	if (!rpc_addr_text((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, buf, len))
		snprintf(buf, len, "?");
}

static void not_our_statd(struct rpc_req *rq, const char *proc)
{
	struct nsm *n = rq->rq_ctx;
	char peer[INET6_ADDRSTRLEN];

	if (atomic_exchange(&n->sm_mon_logged, true))
		return;
	peer_text(rq, peer, sizeof(peer));
	log_warn("nsm: %s from %s refused: unionnfsd answers NSM only for its own lock service "
		 "and is not this machine's rpc.statd (a local lock manager must use the system's "
		 "statd, on another port); said once", proc, peer);
}

static enum rpc_outcome sm_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args; (void)res;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome sm_stat_proc(struct rpc_req *rq, void *args, void *res)
{
	sm_stat_res *r = res;

	(void)args;
	r->res_stat = STAT_SUCC;
	r->state = (int)nsm_state(rq->rq_ctx);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome sm_mon_proc(struct rpc_req *rq, void *args, void *res)
{
	sm_stat_res *r = res;

	(void)args;
	not_our_statd(rq, "SM_MON");
	r->res_stat = STAT_FAIL;
	r->state = (int)nsm_state(rq->rq_ctx);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome sm_unmon_proc(struct rpc_req *rq, void *args, void *res)
{
	(void)args;
	not_our_statd(rq, rq->rq_proc == SM_UNMON ? "SM_UNMON" : "SM_UNMON_ALL");
	((sm_stat *)res)->state = (int)nsm_state(rq->rq_ctx);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome sm_simu_crash_proc(struct rpc_req *rq, void *args, void *res)
{
	struct nsm *n = rq->rq_ctx;
	char peer[INET6_ADDRSTRLEN];

	(void)args; (void)res;
	if (!atomic_exchange(&n->sm_crash_logged, true)) {
		peer_text(rq, peer, sizeof(peer));
		log_warn("nsm: SM_SIMU_CRASH from %s ignored: our state changes only when the "
			 "server restarts; said once", peer);
	}
	return RPC_OUT_REPLY;
}

static enum rpc_outcome sm_notify_proc(struct rpc_req *rq, void *args, void *res)
{
	const stat_chge *a = args;
	struct nsm *n = rq->rq_ctx;
	char peer[INET6_ADDRSTRLEN];
	nsm_reboot_fn fn;
	void *arg;

	(void)res;
	peer_text(rq, peer, sizeof(peer));
	log_info("nsm: SM_NOTIFY from %s: %s restarted (state %d); its locks go", peer,
		 a->mon_name, a->state);
	pthread_mutex_lock(&n->sm_prev_lock);
	fn = n->sm_hook;
	arg = n->sm_hook_arg;
	pthread_mutex_unlock(&n->sm_prev_lock);
	if (fn)
		fn(arg, a->mon_name, (const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen);
	return RPC_OUT_REPLY;
}

static enum rpc_status nsm_status(uint32_t vers, uint32_t proc, const void *res)
{
	(void)vers;
	if (proc == SM_STAT || proc == SM_MON)
		return ((const sm_stat_res *)res)->res_stat == STAT_SUCC ? RPC_STATUS_OK :
									   RPC_STATUS_ERROR;
	return RPC_STATUS_OK;
}

static const struct rpc_proc nsm_procs[] = {
	RPC_PROC_VOID("NULL", sm_null),
	RPC_PROC("STAT", sm_name, sm_stat_res, sm_stat_proc),
	RPC_PROC("MON", mon, sm_stat_res, sm_mon_proc),
	RPC_PROC("UNMON", mon_id, sm_stat, sm_unmon_proc),
	RPC_PROC("UNMON_ALL", my_id, sm_stat, sm_unmon_proc),
	RPC_PROC_VOID("SIMU_CRASH", sm_simu_crash_proc),
	RPC_PROC_NORES("NOTIFY", stat_chge, sm_notify_proc),
};

static const struct rpc_proc *const nsm_versions[] = { nsm_procs };
static const uint32_t nsm_nprocs[] = { sizeof(nsm_procs) / sizeof(nsm_procs[0]) };
static const uint32_t nsm_nonidempotent[] = { 0 };

const struct rpc_program nsm_program = {
	.rg_prog = SM_PROG,
	.rg_name = "nsm",
	.rg_vers_min = SM_VERS,
	.rg_vers_max = SM_VERS,
	.rg_procs = nsm_versions,
	.rg_nprocs = nsm_nprocs,
	.rg_nonidempotent = nsm_nonidempotent,
	.rg_status = nsm_status,
};
