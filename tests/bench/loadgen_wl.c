/*
 * loadgen workloads. Each one issues its requests with rpc_nfs3_*_async on the slot's
 * connection; its callback ends the request (lg_end), counts what it did and either continues a
 * chain on the same slot or hands the slot back (lg_next).
 */
#include "loadgen.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t lg_wl_rand(struct lg_run *run)
{
	uint64_t x = run->r_rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	run->r_rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * libnfs 4.0 decodes directory entries into memory that is not always aligned for entryplus3
 * (UBSan catches it), so every entry is copied out before its fields are read.
 */
void lg_wl_entry(const void *ep, entryplus3 *out)
{
	memcpy(out, ep, sizeof(*out));
}

int lg_wl_is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

int lg_wl_file_size(struct lg_run *run, uint64_t min)
{
	struct nfs_stat_64 st;
	struct lg_conn *c = &run->r_conns[0];

	if (nfs_fstat64(c->c_nfs, c->c_file, &st)) {
		fprintf(stderr, "loadgen: cannot stat --path %s: %s\n", run->r_opt.o_path,
			nfs_get_error(c->c_nfs));
		return -1;
	}
	if (st.nfs_size < min) {
		fprintf(stderr, "loadgen: --path %s holds %llu bytes; workload %s needs a regular "
			"file of at least %llu bytes\n", run->r_opt.o_path,
			(unsigned long long)st.nfs_size, run->r_wl->w_name, (unsigned long long)min);
		return -1;
	}
	run->r_size = st.nfs_size;
	return 0;
}

int lg_wl_prepare_open(struct lg_run *run)
{
	return lg_open_path(run, O_RDONLY);
}

/* --- null --- */

static void lg_wl_null_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;

	(void)rpc;
	if (lg_end(slot, status, data, "NULL") < 0)
		return;
	if (status == RPC_STATUS_SUCCESS)
		lg_count(slot->s_run, 1, 0);
	lg_next(slot);
}

static void lg_wl_null_issue(struct lg_slot *slot)
{
	lg_begin(slot);
	if (rpc_nfs3_null_async(slot->s_conn->c_rpc, lg_wl_null_cb, slot))
		lg_issue_failed(slot, "NULL");
}

static int lg_wl_null_prepare(struct lg_run *run)
{
	(void)run;
	return 0;
}

/*
 * Ends a call whose reply counts by its status alone: one op, or the error; then the slot
 * goes on. Every NFSv3 result begins with its nfsstat3, so data may be read as one.
 */
static void lg_wl_status_end(struct lg_slot *slot, int status, void *data, const char *what,
			     const char *context)
{
	const nfsstat3 *st = data;

	if (lg_end(slot, status, data, what) < 0)
		return;
	if (status == RPC_STATUS_SUCCESS) {
		if (*st == NFS3_OK)
			lg_count(slot->s_run, 1, 0);
		else
			lg_nfs_error(slot->s_run, context, *st);
	}
	lg_next(slot);
}

/* --- getattr, getattr-lat --- */

static void lg_wl_getattr_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	(void)rpc;
	lg_wl_status_end(priv, status, data, "GETATTR", "GETATTR");
}

static void lg_wl_getattr_issue(struct lg_slot *slot)
{
	GETATTR3args a;

	memset(&a, 0, sizeof(a));
	a.object = lg_fh3(&slot->s_conn->c_fh);
	lg_begin(slot);
	if (rpc_nfs3_getattr_async(slot->s_conn->c_rpc, lg_wl_getattr_cb, &a, slot))
		lg_issue_failed(slot, "GETATTR");
}

/* --- access: ACCESS of --path asking every bit, as a client checks before opening --- */

static void lg_wl_access_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	(void)rpc;
	lg_wl_status_end(priv, status, data, "ACCESS", "ACCESS");
}

static void lg_wl_access_issue(struct lg_slot *slot)
{
	ACCESS3args a;

	memset(&a, 0, sizeof(a));
	a.object = lg_fh3(&slot->s_conn->c_fh);
	a.access = ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND |
		   ACCESS3_DELETE | ACCESS3_EXECUTE;
	lg_begin(slot);
	if (rpc_nfs3_access_async(slot->s_conn->c_rpc, lg_wl_access_cb, &a, slot))
		lg_issue_failed(slot, "ACCESS");
}

/* --- lookup: names from one READDIRPLUS of --path, cycled --- */

struct lg_wl_names {
	struct lg_run *n_run;
	int n_done;
	int n_failed;
};

static void lg_wl_names_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_wl_names *ctx = priv;
	struct lg_run *run = ctx->n_run;
	READDIRPLUS3res *res = data;
	const entryplus3 *ep;
	entryplus3 e;
	size_t bytes = 0, n = 0;
	char *p;

	(void)rpc;
	ctx->n_done = 1;
	ctx->n_failed = 1;
	if (status != RPC_STATUS_SUCCESS || res->status != NFS3_OK) {
		fprintf(stderr, "loadgen: READDIRPLUS of --path %s failed (%s); lookup needs a "
			"readable directory\n", run->r_opt.o_path,
			status != RPC_STATUS_SUCCESS ? "RPC error" : "NFS error");
		return;
	}
	for (ep = res->READDIRPLUS3res_u.resok.reply.entries; ep; ep = e.nextentry) {
		lg_wl_entry(ep, &e);
		if (lg_wl_is_dot(e.name))
			continue;
		bytes += strlen(e.name) + 1;
		n++;
	}
	if (!n) {
		fprintf(stderr, "loadgen: directory --path %s is empty; lookup needs names to look "
			"up\n", run->r_opt.o_path);
		return;
	}
	run->r_names = calloc(n, sizeof(*run->r_names));
	run->r_name_arena = malloc(bytes);
	if (!run->r_names || !run->r_name_arena)
		return;
	p = run->r_name_arena;
	for (ep = res->READDIRPLUS3res_u.resok.reply.entries; ep; ep = e.nextentry) {
		size_t len;

		lg_wl_entry(ep, &e);
		if (lg_wl_is_dot(e.name))
			continue;
		len = strlen(e.name) + 1;
		memcpy(p, e.name, len);
		run->r_names[run->r_nnames++] = p;
		p += len;
	}
	ctx->n_failed = 0;
}

static int lg_wl_lookup_prepare(struct lg_run *run)
{
	struct lg_conn *c = &run->r_conns[0];
	struct lg_wl_names ctx = { .n_run = run };
	READDIRPLUS3args a;

	if (lg_open_path(run, O_RDONLY))
		return -1;
	memset(&a, 0, sizeof(a));
	a.dir = lg_fh3(&c->c_fh);
	a.dircount = 8192;
	a.maxcount = 65536;
	if (rpc_nfs3_readdirplus_async(c->c_rpc, lg_wl_names_cb, &a, &ctx)) {
		fprintf(stderr, "loadgen: cannot queue READDIRPLUS: %s\n", rpc_get_error(c->c_rpc));
		return -1;
	}
	if (lg_conn_wait(c, &ctx.n_done) || ctx.n_failed)
		return -1;
	return 0;
}

static void lg_wl_lookup_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	(void)rpc;
	lg_wl_status_end(priv, status, data, "LOOKUP", "LOOKUP in the directory");
}

static void lg_wl_lookup_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	LOOKUP3args a;

	memset(&a, 0, sizeof(a));
	a.what.dir = lg_fh3(&slot->s_conn->c_fh);
	a.what.name = run->r_names[run->r_seq++ % run->r_nnames];
	lg_begin(slot);
	if (rpc_nfs3_lookup_async(slot->s_conn->c_rpc, lg_wl_lookup_cb, &a, slot))
		lg_issue_failed(slot, "LOOKUP");
}

/* --- create: CREATE (GUARDED) of new names in the directory --path; the files stay --- */

static void lg_wl_create_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	(void)rpc;
	lg_wl_status_end(priv, status, data, "CREATE", "CREATE in the directory");
}

static void lg_wl_create_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	CREATE3args a;

	snprintf(slot->s_name, sizeof(slot->s_name), "lc-%d-%llu", (int)getpid(),
		 (unsigned long long)run->r_seq++);
	memset(&a, 0, sizeof(a));
	a.where.dir = lg_fh3(&slot->s_conn->c_fh);
	a.where.name = slot->s_name;
	a.how.mode = GUARDED;
	a.how.createhow3_u.obj_attributes.mode.set_it = 1;
	a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	lg_begin(slot);
	if (rpc_nfs3_create_async(slot->s_conn->c_rpc, lg_wl_create_cb, &a, slot))
		lg_issue_failed(slot, "CREATE");
}

void lg_workload_free(struct lg_run *run)
{
	free(run->r_names);
	free(run->r_name_arena);
	free(run->r_buf);
	lg_boot_free(run);
	run->r_names = NULL;
	run->r_name_arena = NULL;
	run->r_buf = NULL;
}

static const struct lg_workload lg_wl_table[] = {
	{ .w_name = "null", .w_unit = "ops/s", .w_default_inflight = 32,
	  .w_prepare = lg_wl_null_prepare, .w_issue = lg_wl_null_issue },
	{ .w_name = "getattr", .w_unit = "ops/s", .w_default_inflight = 32,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_wl_getattr_issue },
	{ .w_name = "getattr-lat", .w_unit = "ops/s", .w_default_inflight = 1,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_wl_getattr_issue },
	{ .w_name = "lookup", .w_unit = "ops/s", .w_default_inflight = 32,
	  .w_prepare = lg_wl_lookup_prepare, .w_issue = lg_wl_lookup_issue },
	{ .w_name = "read", .w_unit = "ops/s", .w_default_inflight = 32, .w_data = 1,
	  .w_prepare = lg_data_read_prepare, .w_issue = lg_data_read_issue },
	{ .w_name = "randread", .w_unit = "ops/s", .w_default_inflight = 32, .w_data = 1,
	  .w_prepare = lg_data_randread_prepare, .w_issue = lg_data_randread_issue },
	{ .w_name = "access", .w_unit = "ops/s", .w_default_inflight = 32,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_wl_access_issue },
	{ .w_name = "write", .w_unit = "ops/s", .w_default_inflight = 32, .w_data = 1,
	  .w_count_drain = 1, .w_block = LG_MIB, .w_prepare = lg_data_write_prepare,
	  .w_issue = lg_data_write_issue },
	{ .w_name = "write4k", .w_unit = "ops/s", .w_default_inflight = 32, .w_data = 1,
	  .w_count_drain = 1, .w_block = LG_SMALL, .w_prepare = lg_data_write_prepare,
	  .w_issue = lg_data_write_issue },
	{ .w_name = "create", .w_unit = "files/s", .w_default_inflight = 32,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_wl_create_issue },
	{ .w_name = "cwr", .w_unit = "files/s", .w_default_inflight = 32,
	  .w_prepare = lg_dir_cwr_prepare, .w_issue = lg_dir_cwr_issue },
	{ .w_name = "readdirplus", .w_unit = "entries/s", .w_default_inflight = 1, .w_fixed = 1,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_dir_rdp_issue },
	{ .w_name = "listing", .w_unit = "listings/s", .w_default_inflight = 1,
	  .w_prepare = lg_wl_prepare_open, .w_issue = lg_dir_rdp_issue },
	{ .w_name = "opendir", .w_unit = "entries/s", .w_default_inflight = 1, .w_fixed = 1,
	  .w_prepare = lg_dir_opendir_prepare, .w_issue = lg_dir_opendir_issue },
	{ .w_name = "copyup", .w_unit = "ops/s", .w_default_inflight = 1, .w_fixed = 1,
	  .w_prepare = lg_data_copyup_prepare, .w_issue = lg_data_copyup_issue },
	{ .w_name = "lock", .w_unit = "pairs/s", .w_default_inflight = 32,
	  .w_prepare = lg_lock_prepare, .w_issue = lg_lock_issue },
	{ .w_name = "boot", .w_unit = "calls/s", .w_fixed = 1, .w_inflight_per_conn = 4,
	  .w_connect = lg_boot_connect_all, .w_prepare = lg_boot_prepare,
	  .w_issue = lg_boot_issue, .w_tick = lg_boot_tick, .w_report = lg_boot_report },
};

const struct lg_workload *lg_workload_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(lg_wl_table) / sizeof(lg_wl_table[0]); i++)
		if (!strcmp(lg_wl_table[i].w_name, name))
			return &lg_wl_table[i];
	return NULL;
}

