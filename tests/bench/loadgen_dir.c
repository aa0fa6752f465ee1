/*
 * loadgen directory workloads: create+write+remove chains and complete READDIRPLUS listings.
 */
#include "loadgen.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- cwr: CREATE, WRITE 4 KiB FILE_SYNC, REMOVE as one chain per file --- */

enum { LG_DIR_CWR_CREATE, LG_DIR_CWR_LOOKUP, LG_DIR_CWR_WRITE, LG_DIR_CWR_REMOVE };

static void lg_dir_cwr_step(struct lg_slot *slot, int step);

static void lg_dir_cwr_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	static const char *const what[] = { "CREATE", "LOOKUP", "WRITE", "REMOVE" };
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	int step = slot->s_step, ok, nfsstat = -1;

	(void)rpc;
	ok = lg_end(slot, status, data, what[step]);
	if (ok < 0)
		return;
	if (ok) {
		switch (step) {
		case LG_DIR_CWR_CREATE: {
			CREATE3res *res = data;

			nfsstat = res->status;
			if (nfsstat == NFS3_OK && res->CREATE3res_u.resok.obj.handle_follows) {
				lg_fh_copy(&slot->s_fh,
					   &res->CREATE3res_u.resok.obj.post_op_fh3_u.handle);
				lg_dir_cwr_step(slot, LG_DIR_CWR_WRITE);
				return;
			}
			if (nfsstat == NFS3_OK) {
				lg_dir_cwr_step(slot, LG_DIR_CWR_LOOKUP);
				return;
			}
			break;
		}
		case LG_DIR_CWR_LOOKUP: {
			LOOKUP3res *res = data;

			nfsstat = res->status;
			if (nfsstat == NFS3_OK) {
				lg_fh_copy(&slot->s_fh, &res->LOOKUP3res_u.resok.object);
				lg_dir_cwr_step(slot, LG_DIR_CWR_WRITE);
				return;
			}
			break;
		}
		case LG_DIR_CWR_WRITE:
			nfsstat = ((WRITE3res *)data)->status;
			break;
		default:
			nfsstat = ((REMOVE3res *)data)->status;
			break;
		}
		if (nfsstat != NFS3_OK)
			lg_nfs_error(run, what[step], nfsstat);
	}
	if (nfsstat != NFS3_OK)
		slot->s_failed = 1;
	/* once created, the file is removed whatever failed after */
	if (step == LG_DIR_CWR_LOOKUP || step == LG_DIR_CWR_WRITE) {
		lg_dir_cwr_step(slot, LG_DIR_CWR_REMOVE);
		return;
	}
	if (step == LG_DIR_CWR_REMOVE && !slot->s_failed)
		lg_count(run, 1, 0);
	lg_next(slot);
}

static void lg_dir_cwr_step(struct lg_slot *slot, int step)
{
	struct rpc_context *rpc = slot->s_conn->c_rpc;
	nfs_fh3 dir = lg_fh3(&slot->s_conn->c_fh);
	int rc;

	slot->s_step = step;
	lg_begin(slot);
	if (step == LG_DIR_CWR_CREATE) {
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = dir;
		a.where.name = slot->s_name;
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
		rc = rpc_nfs3_create_async(rpc, lg_dir_cwr_cb, &a, slot);
	} else if (step == LG_DIR_CWR_LOOKUP) {
		LOOKUP3args a;

		memset(&a, 0, sizeof(a));
		a.what.dir = dir;
		a.what.name = slot->s_name;
		rc = rpc_nfs3_lookup_async(rpc, lg_dir_cwr_cb, &a, slot);
	} else if (step == LG_DIR_CWR_WRITE) {
		WRITE3args a;

		memset(&a, 0, sizeof(a));
		a.file = lg_fh3(&slot->s_fh);
		a.count = LG_SMALL;
		a.stable = FILE_SYNC;
		a.data.data_len = LG_SMALL;
		a.data.data_val = slot->s_run->r_buf;
		rc = rpc_nfs3_write_async(rpc, lg_dir_cwr_cb, &a, slot);
	} else {
		REMOVE3args a;

		memset(&a, 0, sizeof(a));
		a.object.dir = dir;
		a.object.name = slot->s_name;
		rc = rpc_nfs3_remove_async(rpc, lg_dir_cwr_cb, &a, slot);
	}
	if (rc)
		lg_issue_failed(slot, "a create+write+remove step");
}

void lg_dir_cwr_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;

	snprintf(slot->s_name, sizeof(slot->s_name), "lg-%d-%u-%llu", (int)getpid(),
		 slot->s_index, (unsigned long long)run->r_seq++);
	slot->s_failed = 0;
	lg_dir_cwr_step(slot, LG_DIR_CWR_CREATE);
}

int lg_dir_cwr_prepare(struct lg_run *run)
{
	run->r_buf = calloc(1, LG_SMALL);
	if (!run->r_buf)
		return -1;
	memset(run->r_buf, 'c', LG_SMALL);
	return lg_open_path(run, O_RDONLY);
}

/*
 * --- readdirplus: --count complete listings of --path, one after the other, counting entries;
 * listing: the same for --seconds, counting listings (a small directory is one call) ---
 */

static void lg_dir_rdp_send(struct lg_slot *slot);

static void lg_dir_rdp_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	READDIRPLUS3res *res = data;
	READDIRPLUS3resok *ok;
	const entryplus3 *ep;
	entryplus3 e;
	uint64_t n = 0;

	(void)rpc;
	if (lg_end(slot, status, data, "READDIRPLUS") <= 0)
		return;
	if (res->status != NFS3_OK) {
		lg_nfs_error(run, "READDIRPLUS", res->status);
		lg_finish(run);
		return;
	}
	ok = &res->READDIRPLUS3res_u.resok;
	for (ep = ok->reply.entries; ep; ep = e.nextentry) {
		lg_wl_entry(ep, &e);
		slot->s_cookie = e.cookie;
		if (!lg_wl_is_dot(e.name))
			n++;
	}
	if (run->r_wl->w_fixed)
		lg_count(run, n, 0);
	if (ok->reply.eof) {
		if (!run->r_wl->w_fixed) {
			lg_count(run, 1, 0);
		} else if (++run->r_listings >= run->r_opt.o_count) {
			lg_finish(run);
			return;
		}
		lg_next(slot);
		return;
	}
	if (!ok->reply.entries) {
		lg_error(run, "READDIRPLUS of --path %s returned no entries and no end of directory; "
			 "the server would make the listing loop forever", run->r_opt.o_path);
		lg_finish(run);
		return;
	}
	memcpy(slot->s_verf, ok->cookieverf, sizeof(slot->s_verf));
	lg_dir_rdp_send(slot);
}

static void lg_dir_rdp_send(struct lg_slot *slot)
{
	READDIRPLUS3args a;

	memset(&a, 0, sizeof(a));
	a.dir = lg_fh3(&slot->s_conn->c_fh);
	a.cookie = slot->s_cookie;
	memcpy(a.cookieverf, slot->s_verf, sizeof(a.cookieverf));
	a.dircount = 8192;
	a.maxcount = 65536;
	if (slot->s_run->r_opt.o_maxcount) {
		a.maxcount = (count3)slot->s_run->r_opt.o_maxcount;
		a.dircount = a.maxcount >> 3;
	}
	lg_begin(slot);
	if (rpc_nfs3_readdirplus_async(slot->s_conn->c_rpc, lg_dir_rdp_cb, &a, slot))
		lg_issue_failed(slot, "READDIRPLUS");
}

void lg_dir_rdp_issue(struct lg_slot *slot)
{
	/* a listing is a chain of calls; they run one at a time on the first slot */
	if (slot->s_index)
		return;
	slot->s_cookie = 0;
	memset(slot->s_verf, 0, sizeof(slot->s_verf));
	lg_dir_rdp_send(slot);
}

/*
 * --- opendir: --count listings of --path through libnfs's nfs_opendir, which reads the
 * whole directory with its own READDIRPLUS sizes, as a program using libnfs lists (its
 * directory cache off, so each listing is the server's work) ---
 */

static void lg_dir_opendir_cb(int err, struct nfs_context *nfs, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	struct nfsdir *dir = data;
	struct nfsdirent *de;
	uint64_t n = 0;

	if (lg_end(slot, RPC_STATUS_SUCCESS, NULL, "nfs_opendir") <= 0) {
		if (err == 0)
			nfs_closedir(nfs, dir);
		return;
	}
	if (err < 0) {
		lg_error(run, "nfs_opendir of --path %s failed: %s", run->r_opt.o_path,
			 data ? (const char *)data : "?");
		lg_finish(run);
		return;
	}
	while ((de = nfs_readdir(nfs, dir)) != NULL)
		if (!lg_wl_is_dot(de->name))
			n++;
	nfs_closedir(nfs, dir);
	lg_count(run, n, 0);
	if (++run->r_listings >= run->r_opt.o_count) {
		lg_finish(run);
		return;
	}
	lg_next(slot);
}

/* Every listing goes to the server: libnfs would answer repeated ones from its own cache. */
int lg_dir_opendir_prepare(struct lg_run *run)
{
	for (int i = 0; i < run->r_nconns; i++)
		nfs_set_dircache(run->r_conns[i].c_nfs, 0);
	return 0;
}

void lg_dir_opendir_issue(struct lg_slot *slot)
{
	const char *path = slot->s_run->r_opt.o_path;
	char abs[4096];

	if (slot->s_index)
		return;
	/* --path is relative to the export root; libnfs wants it from the root */
	snprintf(abs, sizeof(abs), "%s%s", path[0] == '/' ? "" : "/", path);
	lg_begin(slot);
	if (nfs_opendir_async(slot->s_conn->c_nfs, abs, lg_dir_opendir_cb, slot))
		lg_issue_failed(slot, "nfs_opendir");
}
