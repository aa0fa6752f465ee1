/*
 * loadgen: the benchmark's NFSv3 load generator (libnfs async raw API).
 * loadgen.c holds the driver (options, connections, the poll loop, latency histogram, the
 * RESULT line); loadgen_wl.c, loadgen_data.c, loadgen_dir.c, loadgen_lock.c and
 * loadgen_boot.c hold the workloads (loadgen_trace.c reads the boot workload's trace).
 * `loadgen --help` describes the command line.
 */
#ifndef LOADGEN_H
#define LOADGEN_H

#include <stdint.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#define LG_MIB (1024u * 1024u)
#define LG_SMALL 4096u

struct lg_fh {
	uint32_t fh_len;
	char fh_data[NFS3_FHSIZE];
};

struct lg_conn {
	struct nfs_context *c_nfs;
	struct rpc_context *c_rpc;
	/* libnfs's open of --path; kept open so its handle stays valid until the end */
	struct nfsfh *c_file;
	struct lg_fh c_fh;
	/* lock workload: the connection to the server's NLM; c_rpc then points to it */
	struct rpc_context *c_nlm;
	/* a connection the workload made itself (boot: from its own source address; no c_nfs) */
	struct rpc_context *c_own;
};

struct lg_run;
struct lg_boot;

/* One request in flight (or one chain of requests for cwr / one listing for readdirplus). */
struct lg_slot {
	struct lg_run *s_run;
	struct lg_conn *s_conn;
	unsigned s_index;
	int s_busy;
	uint64_t s_sent_ns;
	int s_step;
	int s_failed;
	/* this request's latency stays out of the histogram (write's COMMITs) */
	int s_nolat;
	uint64_t s_off;
	uint64_t s_cookie;
	char s_verf[NFS3_COOKIEVERFSIZE];
	struct lg_fh s_fh;
	char s_name[64];
};

enum lg_phase { LG_WARMUP, LG_MEASURE, LG_DRAIN };

struct lg_opts {
	const char *o_url;
	const char *o_workload;
	const char *o_path;
	const char *o_stop_file;
	int o_nlm_port;         /* lock: the server's NLM port; 0: ask its portmapper */
	int o_inflight;
	int o_conns;
	double o_seconds;
	long o_count;
	long o_maxcount;        /* readdirplus, listing: maxcount, dircount = maxcount / 8; 0: 65536/8192 */
	const char *o_trace;    /* boot: the recorded trace */
	const char *o_source;   /* boot: the first client's source address */
	double o_pace;          /* boot: recorded gaps divided by this; 0: none */
	int o_read_only;        /* boot: leave out the calls that change the tree */
	int o_inflight_set;
	int o_seconds_set;
	int o_count_set;
};

struct lg_workload {
	const char *w_name;
	const char *w_unit;
	/* finishes by itself (calls lg_finish): no warm-up, no time limit */
	int w_fixed;
	/* replies that arrive while draining still count (write: its final COMMIT covers them) */
	int w_count_drain;
	int w_default_inflight;
	int w_data; /* report mbps */
	uint32_t w_block; /* write: bytes per WRITE */
	/* default --inflight per connection (over w_default_inflight) */
	int w_inflight_per_conn;
	/* makes the connections itself instead of libnfs's mount of --url (boot) */
	int (*w_connect)(struct lg_run *run);
	int (*w_prepare)(struct lg_run *run);
	/* starts a new unit of work on an idle slot */
	void (*w_issue)(struct lg_slot *slot);
	/* called on every turn of the loop; returns when it wants the next turn (ns), 0: any time */
	uint64_t (*w_tick)(struct lg_run *run, uint64_t now);
	/* prints the workload's own result line, before RESULT */
	void (*w_report)(struct lg_run *run);
};

#define LG_HIST_SUB 128
#define LG_HIST_BUCKETS (2 * LG_HIST_SUB + 56 * LG_HIST_SUB)

struct lg_run {
	struct lg_opts r_opt;
	const struct lg_workload *r_wl;
	struct lg_conn *r_conns;
	int r_nconns;
	struct lg_slot *r_slots;
	int r_nslots;
	enum lg_phase r_phase;
	int r_done;
	int r_closing;
	int r_tend_set;
	uint64_t r_t0;
	uint64_t r_tend;
	uint64_t r_ops;
	uint64_t r_bytes;
	uint64_t r_errors;
	int r_outstanding;
	uint64_t *r_hist;
	uint64_t r_hist_n;
	uint64_t r_max_ns;      /* the slowest request counted */

	/* workload state */
	uint64_t r_size;
	uint64_t r_next_off;
	uint64_t r_wrap;
	uint64_t r_rng;
	uint64_t r_seq;
	char *r_buf;
	char **r_names;
	size_t r_nnames;
	char *r_name_arena;
	uint64_t r_uncommitted;
	int r_commit_busy;
	int r_final_commit;
	long r_listings;
	char *r_server;         /* the URL's host, for connections besides the mount */
	struct lg_boot *r_boot;
};

/* loadgen_wl.c: shared helpers, null, getattr, lookup, create and the table of workloads */
uint64_t lg_wl_rand(struct lg_run *run);
int lg_wl_is_dot(const char *name);
void lg_wl_entry(const void *ep, entryplus3 *out);
/* the size of --path into r_size; fails below min bytes */
int lg_wl_file_size(struct lg_run *run, uint64_t min);
int lg_wl_prepare_open(struct lg_run *run);
/* loadgen_data.c */
int lg_data_read_prepare(struct lg_run *run);
void lg_data_read_issue(struct lg_slot *slot);
int lg_data_randread_prepare(struct lg_run *run);
void lg_data_randread_issue(struct lg_slot *slot);
int lg_data_write_prepare(struct lg_run *run);
void lg_data_write_issue(struct lg_slot *slot);
int lg_data_copyup_prepare(struct lg_run *run);
void lg_data_copyup_issue(struct lg_slot *slot);
/* loadgen_dir.c */
int lg_dir_cwr_prepare(struct lg_run *run);
void lg_dir_cwr_issue(struct lg_slot *slot);
void lg_dir_rdp_issue(struct lg_slot *slot);
int lg_dir_opendir_prepare(struct lg_run *run);
void lg_dir_opendir_issue(struct lg_slot *slot);
/* loadgen_lock.c */
int lg_lock_prepare(struct lg_run *run);
void lg_lock_issue(struct lg_slot *slot);
void lg_lock_close(struct lg_conn *conn);

/* loadgen_boot.c */
int lg_boot_connect_all(struct lg_run *run);
int lg_boot_prepare(struct lg_run *run);
void lg_boot_issue(struct lg_slot *slot);
uint64_t lg_boot_tick(struct lg_run *run, uint64_t now);
void lg_boot_report(struct lg_run *run);
void lg_boot_free(struct lg_run *run);

const struct lg_workload *lg_workload_find(const char *name);
void lg_workload_free(struct lg_run *run);

uint64_t lg_now_ns(void);
void lg_fh_copy(struct lg_fh *dst, const nfs_fh3 *src);
nfs_fh3 lg_fh3(struct lg_fh *fh);
/* Opens --path on every connection (flags as open(2)) and keeps its handle in c_fh. */
int lg_open_path(struct lg_run *run, int flags);
/* Serves one connection until *flag is set (set-up calls made before the measurement). */
int lg_conn_wait(struct lg_conn *conn, int *flag);

void lg_begin(struct lg_slot *slot);
/* Ends a request: 1 = reply to look at, 0 = RPC failed (counted), -1 = shutting down. */
int lg_end(struct lg_slot *slot, int status, void *data, const char *what);
void lg_issue_failed(struct lg_slot *slot, const char *what);
void lg_nfs_error(struct lg_run *run, const char *what, int nfsstat);
void lg_error(struct lg_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int lg_counting(const struct lg_run *run);
void lg_count(struct lg_run *run, uint64_t ops, uint64_t bytes);
/* Puts an idle slot back to work, unless the run is winding down. */
void lg_next(struct lg_slot *slot);
/* A fixed-size workload is complete: the clock stops now. */
void lg_finish(struct lg_run *run);
void lg_set_end(struct lg_run *run);

#endif
