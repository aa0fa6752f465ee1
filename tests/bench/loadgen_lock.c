/*
 * loadgen's lock workload: NLM4 LOCK then UNLOCK of one range, over and over, as pairs per
 * second. Each slot is its own lock owner (svid and owner handle) on its own 4 KiB range of
 * --path, so no two requests ever conflict: the row measures the lock manager's cost, not
 * waiting. The handle comes from the NFS mount (--url); the NLM connection goes to
 * --nlm-port, or to the port the server's portmapper names.
 */
#include "loadgen.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfsc/libnfs-raw-nlm.h>

#define LG_LOCK_RANGE 4096u
/*
 * The caller name is the lock owner's host for the server (and ganesha asks the host's statd to
 * monitor it): a name that resolves on any machine.
 */
#define LG_LOCK_CALLER "localhost"

enum lg_lock_step { LG_LOCK_LOCKING, LG_LOCK_UNLOCKING };

struct lg_lock_connect {
	int k_done;
	int k_failed;
};

static const char *lg_nlm_stat_name(int st)
{
	switch (st) {
	case NLM4_GRANTED: return "NLM4_GRANTED";
	case NLM4_DENIED: return "NLM4_DENIED";
	case NLM4_DENIED_NOLOCKS: return "NLM4_DENIED_NOLOCKS";
	case NLM4_BLOCKED: return "NLM4_BLOCKED";
	case NLM4_DENIED_GRACE_PERIOD: return "NLM4_DENIED_GRACE_PERIOD";
	case NLM4_DEADLCK: return "NLM4_DEADLCK";
	case NLM4_ROFS: return "NLM4_ROFS";
	case NLM4_STALE_FH: return "NLM4_STALE_FH";
	case NLM4_FBIG: return "NLM4_FBIG";
	case NLM4_FAILED: return "NLM4_FAILED";
	default: return "unknown status";
	}
}

static void lg_lock_connected(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_lock_connect *k = priv;

	(void)rpc;
	k->k_done = 1;
	if (status != RPC_STATUS_SUCCESS) {
		k->k_failed = 1;
		fprintf(stderr, "loadgen: cannot connect to the server's NLM: %s\n",
			data ? (const char *)data : "no reason given");
	}
}

/* Connects one mount's NLM and makes it the connection the loop serves. */
static int lg_lock_connect(struct lg_run *run, struct lg_conn *c)
{
	struct lg_lock_connect k = { 0 };
	int rc;

	c->c_nlm = rpc_init_context();
	if (!c->c_nlm) {
		fprintf(stderr, "loadgen: rpc_init_context failed (out of memory?)\n");
		return -1;
	}
	if (run->r_opt.o_nlm_port)
		rc = rpc_connect_port_async(c->c_nlm, run->r_server, run->r_opt.o_nlm_port,
					    NLM_PROGRAM, NLM_V4, lg_lock_connected, &k);
	else
		rc = rpc_connect_program_async(c->c_nlm, run->r_server, NLM_PROGRAM, NLM_V4,
					       lg_lock_connected, &k);
	if (rc) {
		fprintf(stderr, "loadgen: cannot start connecting to the NLM of %s: %s\n",
			run->r_server, rpc_get_error(c->c_nlm));
		return -1;
	}
	c->c_rpc = c->c_nlm;
	if (lg_conn_wait(c, &k.k_done) || k.k_failed) {
		fprintf(stderr, "loadgen: no NLM version 4 on %s %s%d; start the server with its "
			"lock manager on (ganesha: Enable_NLM, unionnfsd: --nlm-port) or pass the "
			"right --nlm-port\n", run->r_server,
			run->r_opt.o_nlm_port ? "port " : "(portmapper lookup) port ",
			run->r_opt.o_nlm_port);
		return -1;
	}
	return 0;
}

int lg_lock_prepare(struct lg_run *run)
{
	int i;

	if (lg_open_path(run, O_RDONLY))
		return -1;
	for (i = 0; i < run->r_nconns; i++)
		if (lg_lock_connect(run, &run->r_conns[i]))
			return -1;
	/* every slot's owner handle, kept in s_name for the run */
	for (i = 0; i < run->r_nslots; i++)
		snprintf(run->r_slots[i].s_name, sizeof(run->r_slots[i].s_name), "loadgen.%ld.%d",
			 (long)getpid(), i);
	return 0;
}

void lg_lock_close(struct lg_conn *conn)
{
	if (!conn->c_nlm)
		return;
	rpc_destroy_context(conn->c_nlm);
	conn->c_nlm = NULL;
	conn->c_rpc = nfs_get_rpc_context(conn->c_nfs);
}

static void lg_lock_fill(struct lg_slot *slot, nlm_cookie *cookie, nlm4_lock *lk)
{
	struct lg_conn *c = slot->s_conn;

	slot->s_cookie++;
	cookie->data.data_len = sizeof(slot->s_cookie);
	cookie->data.data_val = (char *)&slot->s_cookie;
	lk->caller_name = LG_LOCK_CALLER;
	lk->fh.data.data_len = c->c_fh.fh_len;
	lk->fh.data.data_val = c->c_fh.fh_data;
	lk->oh = slot->s_name;
	lk->svid = slot->s_index + 1;
	lk->l_offset = (uint64_t)slot->s_index * LG_LOCK_RANGE;
	lk->l_len = LG_LOCK_RANGE;
}

static void lg_lock_issue_unlock(struct lg_slot *slot);

static void lg_lock_reply(struct lg_slot *slot, int status, void *data, const char *what,
			  int nlmstat)
{
	struct lg_run *run = slot->s_run;

	if (lg_end(slot, status, data, what) <= 0)
		return;
	if (nlmstat != NLM4_GRANTED) {
		lg_error(run, "%s of --path %s answered %d (%s); every slot locks its own range, so "
			 "nothing should conflict (a grace period after the server's start? a "
			 "lock left by another client?)", what, run->r_opt.o_path, nlmstat,
			 lg_nlm_stat_name(nlmstat));
		/* a refusal here means the set-up is wrong: stop rather than measure refusals */
		slot->s_step = LG_LOCK_LOCKING;
		run->r_done = 1;
		return;
	}
	if (slot->s_step == LG_LOCK_LOCKING) {
		slot->s_step = LG_LOCK_UNLOCKING;
		lg_lock_issue_unlock(slot);
		return;
	}
	slot->s_step = LG_LOCK_LOCKING;
	lg_count(run, 1, 0);
	lg_next(slot);
}

static void lg_lock_lock_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	NLM4_LOCKres *res = data;

	(void)rpc;
	lg_lock_reply(priv, status, data, "NLM4 LOCK",
		      status == RPC_STATUS_SUCCESS ? (int)res->status : NLM4_FAILED);
}

static void lg_lock_unlock_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	NLM4_UNLOCKres *res = data;

	(void)rpc;
	lg_lock_reply(priv, status, data, "NLM4 UNLOCK",
		      status == RPC_STATUS_SUCCESS ? (int)res->status : NLM4_FAILED);
}

static void lg_lock_issue_unlock(struct lg_slot *slot)
{
	NLM4_UNLOCKargs a;

	memset(&a, 0, sizeof(a));
	lg_lock_fill(slot, &a.cookie, &a.lock);
	lg_begin(slot);
	if (rpc_nlm4_unlock_async(slot->s_conn->c_rpc, lg_lock_unlock_cb, &a, slot))
		lg_issue_failed(slot, "NLM4 UNLOCK");
}

void lg_lock_issue(struct lg_slot *slot)
{
	NLM4_LOCKargs a;

	memset(&a, 0, sizeof(a));
	lg_lock_fill(slot, &a.cookie, &a.lock);
	a.exclusive = 1;
	slot->s_step = LG_LOCK_LOCKING;
	lg_begin(slot);
	if (rpc_nlm4_lock_async(slot->s_conn->c_rpc, lg_lock_lock_cb, &a, slot))
		lg_issue_failed(slot, "NLM4 LOCK");
}
