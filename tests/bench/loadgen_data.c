/*
 * loadgen data workloads: sequential 1 MiB READ, random 4 KiB READ, 1 MiB UNSTABLE WRITE with
 * COMMITs, and the single-WRITE copy-up.
 */
#include "loadgen.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LG_DATA_COMMIT_EVERY (64ull * LG_MIB)

/* --- read, randread --- */

static void lg_data_read_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	READ3res *res = data;

	(void)rpc;
	if (lg_end(slot, status, data, "READ") < 0)
		return;
	if (status == RPC_STATUS_SUCCESS) {
		if (res->status == NFS3_OK)
			lg_count(slot->s_run, 1, res->READ3res_u.resok.count);
		else
			lg_nfs_error(slot->s_run, "READ", res->status);
	}
	lg_next(slot);
}

static void lg_data_read_send(struct lg_slot *slot, uint64_t off, uint32_t count)
{
	READ3args a;

	memset(&a, 0, sizeof(a));
	a.file = lg_fh3(&slot->s_conn->c_fh);
	a.offset = off;
	a.count = count;
	lg_begin(slot);
	if (rpc_nfs3_read_async(slot->s_conn->c_rpc, lg_data_read_cb, &a, slot))
		lg_issue_failed(slot, "READ");
}

void lg_data_read_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	uint64_t off = run->r_next_off;

	run->r_next_off += LG_MIB;
	if (run->r_next_off >= run->r_size)
		run->r_next_off = 0;
	lg_data_read_send(slot, off, LG_MIB);
}

void lg_data_randread_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;

	lg_data_read_send(slot, (lg_wl_rand(run) % (run->r_size / LG_SMALL)) * LG_SMALL, LG_SMALL);
}

int lg_data_read_prepare(struct lg_run *run)
{
	if (lg_open_path(run, O_RDONLY))
		return -1;
	return lg_wl_file_size(run, 1);
}

int lg_data_randread_prepare(struct lg_run *run)
{
	if (lg_open_path(run, O_RDONLY))
		return -1;
	return lg_wl_file_size(run, LG_SMALL);
}

/* --- write, write4k: 1 MiB or 4 KiB UNSTABLE, a COMMIT every 64 MiB and one at the end --- */

static void lg_data_write_after(struct lg_slot *slot);

static void lg_data_commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	COMMIT3res *res = data;

	(void)rpc;
	run->r_commit_busy = 0;
	if (lg_end(slot, status, data, "COMMIT") < 0)
		return;
	if (status == RPC_STATUS_SUCCESS && res->status != NFS3_OK)
		lg_nfs_error(run, "COMMIT", res->status);
	if (slot->s_step == 2) {
		/* the final COMMIT: the clock stops when the data is stable */
		lg_set_end(run);
		return;
	}
	lg_data_write_after(slot);
}

static void lg_data_commit_send(struct lg_slot *slot, int final)
{
	struct lg_run *run = slot->s_run;
	COMMIT3args a;

	memset(&a, 0, sizeof(a));
	a.file = lg_fh3(&slot->s_conn->c_fh);
	slot->s_step = final ? 2 : 1;
	slot->s_nolat = 1;
	run->r_commit_busy = 1;
	run->r_uncommitted = 0;
	lg_begin(slot);
	if (rpc_nfs3_commit_async(slot->s_conn->c_rpc, lg_data_commit_cb, &a, slot)) {
		run->r_commit_busy = 0;
		slot->s_nolat = 0;
		lg_issue_failed(slot, "COMMIT");
	}
}

static void lg_data_write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	WRITE3res *res = data;

	(void)rpc;
	if (lg_end(slot, status, data, "WRITE") < 0)
		return;
	if (status == RPC_STATUS_SUCCESS) {
		if (res->status == NFS3_OK) {
			lg_count(run, 1, res->WRITE3res_u.resok.count);
			run->r_uncommitted += res->WRITE3res_u.resok.count;
		} else {
			lg_nfs_error(run, "WRITE", res->status);
		}
	}
	lg_data_write_after(slot);
}

static void lg_data_write_after(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;

	if (run->r_phase == LG_DRAIN || run->r_done) {
		/* the last reply of the run sends the COMMIT that makes it all stable */
		if (run->r_outstanding == 0 && !run->r_final_commit) {
			run->r_final_commit = 1;
			lg_data_commit_send(slot, 1);
		}
		return;
	}
	lg_next(slot);
}

void lg_data_write_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	WRITE3args a;

	if (run->r_uncommitted >= LG_DATA_COMMIT_EVERY && !run->r_commit_busy) {
		lg_data_commit_send(slot, 0);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.file = lg_fh3(&slot->s_conn->c_fh);
	a.offset = run->r_next_off;
	a.count = run->r_wl->w_block;
	a.stable = UNSTABLE;
	a.data.data_len = run->r_wl->w_block;
	a.data.data_val = run->r_buf;
	run->r_next_off += run->r_wl->w_block;
	if (run->r_next_off >= run->r_wrap)
		run->r_next_off = 0;
	slot->s_step = 0;
	lg_begin(slot);
	if (rpc_nfs3_write_async(slot->s_conn->c_rpc, lg_data_write_cb, &a, slot))
		lg_issue_failed(slot, "WRITE");
}

int lg_data_write_prepare(struct lg_run *run)
{
	size_t i;

	/* offsets wrap so that a long run does not fill the disk (--count sets the MiB) */
	run->r_wrap = (uint64_t)(run->r_opt.o_count_set ? run->r_opt.o_count : 1024) * LG_MIB;
	run->r_buf = malloc(LG_MIB);
	if (!run->r_buf)
		return -1;
	for (i = 0; i < LG_MIB; i++)
		run->r_buf[i] = (char)(lg_wl_rand(run) >> 56);
	return lg_open_path(run, O_WRONLY | O_CREAT | O_TRUNC);
}

/*
 * --- copyup: 1-byte FILE_SYNC WRITEs at offset 0 (the byte already there), one per slot,
 * all sent at once (--inflight N: N writers of the file that must be copied up) ---
 */

struct lg_data_byte {
	int b_done;
	int b_ok;
	char b_byte;
};

static void lg_data_byte_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_data_byte *b = priv;
	READ3res *res = data;

	(void)rpc;
	b->b_done = 1;
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK &&
	    res->READ3res_u.resok.data.data_len >= 1) {
		b->b_byte = res->READ3res_u.resok.data.data_val[0];
		b->b_ok = 1;
	}
}

int lg_data_copyup_prepare(struct lg_run *run)
{
	struct lg_conn *c = &run->r_conns[0];
	struct lg_data_byte b = { 0 };
	READ3args a;

	if (lg_open_path(run, O_RDONLY) || lg_wl_file_size(run, 1))
		return -1;
	/* writing back the byte that is there keeps the data the same for the next run */
	memset(&a, 0, sizeof(a));
	a.file = lg_fh3(&c->c_fh);
	a.count = 1;
	if (rpc_nfs3_read_async(c->c_rpc, lg_data_byte_cb, &a, &b)) {
		fprintf(stderr, "loadgen: cannot queue READ: %s\n", rpc_get_error(c->c_rpc));
		return -1;
	}
	if (lg_conn_wait(c, &b.b_done))
		return -1;
	if (!b.b_ok) {
		fprintf(stderr, "loadgen: cannot read the first byte of --path %s\n",
			run->r_opt.o_path);
		return -1;
	}
	run->r_buf = malloc(1);
	if (!run->r_buf)
		return -1;
	run->r_buf[0] = b.b_byte;
	return 0;
}

static void lg_data_copyup_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	WRITE3res *res = data;

	(void)rpc;
	if (lg_end(slot, status, data, "WRITE") < 0)
		return;
	/* the last answer stops the clock */
	if (slot->s_run->r_outstanding == 0)
		lg_finish(slot->s_run);
	if (status != RPC_STATUS_SUCCESS)
		return;
	if (res->status == NFS3_OK)
		lg_count(slot->s_run, 1, 0);
	else
		lg_nfs_error(slot->s_run, "WRITE", res->status);
}

void lg_data_copyup_issue(struct lg_slot *slot)
{
	WRITE3args a;

	if (slot->s_step++)
		return;
	memset(&a, 0, sizeof(a));
	a.file = lg_fh3(&slot->s_conn->c_fh);
	a.count = 1;
	a.stable = FILE_SYNC;
	a.data.data_len = 1;
	a.data.data_val = slot->s_run->r_buf;
	lg_begin(slot);
	if (rpc_nfs3_write_async(slot->s_conn->c_rpc, lg_data_copyup_cb, &a, slot))
		lg_issue_failed(slot, "WRITE");
}
