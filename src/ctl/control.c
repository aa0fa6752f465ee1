/*
 * The control commands (include/control.h): a request line parsed, its reply formatted
 * from the statistics, the configuration, the MOUNT list and the views; `check` and
 * `reset` as jobs on a thread of their own, with check's progress. The socket and its
 * connections are socket.c's.
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "ctl_internal.h"
#include "hostmap.h"
#include "log.h"
#include "stats.h"
#include "store.h"
#include "metrics.h"
#include "nfs.h"
#include "nlm_locks.h"
#include "union.h"
#include "views.h"

#define CTL_MAX_WORDS 4
#define CTL_CHECK_LIST 20          /* stale records named one by one; more are only counted */
#define CTL_CHECK_THREADS_PER_CPU 2 /* resolving waits on the disk too */
/* `locks` lists this many locks and waiters; past it only the counts say how many more */
#define CTL_LOCKS_LIST 1000
#define CTL_LOCKS_HOST_SHOWN 40    /* bytes of a client's host key shown */


static void ctl_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	if (t == 0 || gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "-");
}

static void ctl_duration(long long s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s >= 86400)
		snprintf(buf, len, "%lldd%02lldh%02lldm%02llds", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
	else if (s >= 3600)
		snprintf(buf, len, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
	else
		snprintf(buf, len, "%llds", s);
}

static void ctl_uptime(struct control *ctl, struct ctl_out *o)
{
	char since[64], up[48];

	ctl_time(ctl->ct_started, since, sizeof(since));
	ctl_duration((long long)(time(NULL) - ctl->ct_started), up, sizeof(up));
	ctl_put(o, "unionnfsd %s, pid %d, up %s (since %s)\n", UNIONNFSD_VERSION, (int)getpid(),
		up, since);
}

static int ctl_count_mount(const char *host, const char *path, void *arg)
{
	(void)host;
	(void)path;
	(*(unsigned *)arg)++;
	return 0;
}

static unsigned ctl_count_mounts(struct nfs_server *ns)
{
	unsigned n = 0;

	nfs_mounts_each(ns, ctl_count_mount, &n);
	return n;
}

static bool ctl_count_client(const struct stats_client *c, void *arg)
{
	(void)c;
	(*(unsigned *)arg)++;
	return true;
}

/* Bytes for people: "512 B", "12.3 GiB". */
static void ctl_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u + 1 < (int)(sizeof(units) / sizeof(units[0]))) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

/*
 * One branch of export ec: its role and path, then (when its union is open) its space and
 * records, which the union layer keeps in memory: status runs on the loop, so it reads no
 * file system and no inode map (union_branch_usage).
 */
static void ctl_status_branch(struct ctl_out *o, const struct export_conf *ec, int j,
			      struct union_export *ux)
{
	static const char *const roles[] = UNION_ROLE_NAMES;
	enum union_role role = ec->ec_roles ? ec->ec_roles[j]
				: j == 0 && ec->ec_upper == NULL ? UNION_BRANCH_RW : UNION_BRANCH_RO;
	struct union_branch_usage u;
	char avail[32], total[32], age[48];

	ctl_put(o, "  %s %s", roles[role], ec->ec_branches[j]);
	if (ux == NULL || j >= union_branch_count(ux)) {
		ctl_put(o, " (export not open: see the log)\n");
		return;
	}
	union_branch_usage(ux, j, &u);
	if (u.bu_space_err == -EAGAIN) {
		ctl_put(o, ": space not measured yet");
	} else if (u.bu_space_err < 0) {
		ctl_duration(u.bu_age_ms / 1000, age, sizeof(age));
		ctl_put(o, ": space unknown (statvfs: %s, %s ago)", strerror(-u.bu_space_err), age);
	} else {
		ctl_bytes(u.bu_avail, avail, sizeof(avail));
		ctl_bytes(u.bu_total, total, sizeof(total));
		ctl_duration(u.bu_age_ms / 1000, age, sizeof(age));
		ctl_put(o, ": %s free of %s (measured %s ago)", avail, total, age);
	}
	if (u.bu_records_err < 0)
		ctl_put(o, ", objects not counted (%s)\n", strerror(-u.bu_records_err));
	else
		ctl_put(o, ", %llu object%s\n", (unsigned long long)u.bu_records,
			u.bu_records == 1 ? "" : "s");
}

static void ctl_status(struct control *ctl, struct ctl_out *o)
{
	const struct config *cf = ctl->ct_env.ce_cfg;
	struct nfs_server *ns = ctl->ct_env.ce_nfs;
	struct stats_totals t;
	unsigned clients = 0;
	bool ro;

	ctl_uptime(ctl, o);
	ctl_put(o, "state directory %s\n", cf->cf_state_dir);
	for (int i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];

		if (!nfs_export_union(ns, i))
			continue; /* removed by a reload */
		ro = nfs_export_read_only(ns, i);
		ctl_put(o, "export %s (%d branch%s%s)\n", ec->ec_name, ec->ec_nbranches,
			ec->ec_nbranches == 1 ? "" : "es", ro && ec->ec_upper == NULL ? ", read-only" : "");
		/*
		 * With upper= each client writes to its own upper (and to listed =rw branches); the
		 * branches' objects are the export's own records, its views' are not counted.
		 */
		if (ec->ec_upper != NULL) {
			int views = views_open_count(ctl->ct_env.ce_views, i);

			ctl_put(o, "  upper %s (one per client; %d client view%s open)\n",
				ec->ec_upper, views, views == 1 ? "" : "s");
		}
		for (int j = 0; j < ec->ec_nbranches; j++)
			ctl_status_branch(o, ec, j, nfs_export_union(ns, i));
	}
	stats_clients_each(ctl_count_client, &clients);
	stats_totals_get(&t);
	ctl_put(o, "mounts %u (MOUNT list: mounted and not unmounted), clients seen %u, calls %llu\n",
		ctl_count_mounts(ns), clients, (unsigned long long)t.st_calls);
}

struct ctl_clients {
	struct ctl_out *cl_out;
	const struct config *cl_cfg;
	struct nfs_server *cl_ns;
	struct views *cl_views;
	time_t cl_now;
};

/* For exports with upper=: where this client's own layer is (whether or not made yet). */
static void ctl_client_layers(struct ctl_clients *cl, const char *addr)
{
	const struct config *cf = cl->cl_cfg;
	char dir[4096];

	for (int i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];

		if (ec->ec_upper == NULL)
			continue;
		if (views_upper_of(cl->cl_views, i, addr, dir, sizeof(dir)) < 0)
			ctl_put(cl->cl_out, "  its upper in %s: not known yet (its host name is "
				"looked up when it mounts)\n", ec->ec_name);
		else
			ctl_put(cl->cl_out, "  its upper in %s: %s\n", ec->ec_name, dir);
	}
}

/* The paths one client mounted, comma-separated, as far as they fit. */
struct ctl_mounted {
	const char *cm_host;
	char cm_list[512];
	size_t cm_used;
};

/* Stops (1) once the list is full. */
static int ctl_mounted_path(const char *host, const char *path, void *arg)
{
	struct ctl_mounted *m = arg;
	size_t room = sizeof(m->cm_list) - m->cm_used;
	int n;

	if (strcmp(host, m->cm_host) != 0)
		return 0;
	n = snprintf(m->cm_list + m->cm_used, room, "%s%s", m->cm_used ? "," : "", path);
	if (n < 0 || (size_t)n >= room) {
		m->cm_list[m->cm_used] = '\0';
		return 1;
	}
	m->cm_used += (size_t)n;
	return 0;
}

static bool ctl_client_line(const struct stats_client *c, void *arg)
{
	struct ctl_clients *cl = arg;
	struct ctl_mounted m = { .cm_host = c->sc_addr };
	char first[64], last[64], ago[48];

	nfs_mounts_each(cl->cl_ns, ctl_mounted_path, &m);
	ctl_time(c->sc_first, first, sizeof(first));
	ctl_time(c->sc_last, last, sizeof(last));
	ctl_duration((long long)(cl->cl_now - c->sc_last), ago, sizeof(ago));
	ctl_put(cl->cl_out, "%-20s %-16s %-23s %-23s %-9s %10llu %12llu\n", c->sc_addr,
		m.cm_used ? m.cm_list : "-", first, last, ago, (unsigned long long)c->sc_calls,
		(unsigned long long)c->sc_bytes);
	ctl_client_layers(cl, c->sc_addr);
	return cl->cl_out->co_err == 0;
}

/* One line per client address seen since start, with the paths the MOUNT list has for it. */
static void ctl_clients(struct control *ctl, struct ctl_out *o)
{
	struct ctl_clients cl = { .cl_out = o, .cl_cfg = ctl->ct_env.ce_cfg,
				  .cl_ns = ctl->ct_env.ce_nfs, .cl_views = ctl->ct_env.ce_views,
				  .cl_now = time(NULL) };

	ctl_put(o, "%-20s %-16s %-23s %-23s %-9s %10s %12s\n", "client", "mounted", "first seen",
		"last seen", "idle", "calls", "bytes");
	stats_clients_each(ctl_client_line, &cl);
}

static uint64_t ctl_lock_callbacks(struct control *ctl)
{
	if (ctl->ct_env.ce_lock_callbacks == NULL)
		return 0;
	return ctl->ct_env.ce_lock_callbacks(ctl->ct_env.ce_lock_callbacks_arg);
}

static void ctl_lock_counts(struct control *ctl, struct ctl_out *o)
{
	struct locks_counts lc;

	locks_counts(ctl->ct_env.ce_locks, &lc);
	ctl_put(o, "locks held %llu, waiters %llu, clients with locks or waiting %llu, "
		"files locked %llu\n", (unsigned long long)lc.lc_locks,
		(unsigned long long)lc.lc_waiters, (unsigned long long)lc.lc_hosts,
		(unsigned long long)lc.lc_objects);
	if (ctl->ct_env.ce_lock_callbacks != NULL)
		ctl_put(o, "lock callbacks pending %llu (granted waiters not yet told, retried)\n",
			(unsigned long long)ctl_lock_callbacks(ctl));
}

static void ctl_stats(struct control *ctl, struct ctl_out *o)
{
	ctl_uptime(ctl, o);
	if (o->co_err == 0)
		o->co_err = stats_report(&o->co_buf, &o->co_len, &o->co_cap);
	if (ctl->ct_env.ce_locks != NULL)
		ctl_lock_counts(ctl, o);
}

/* The listing of `locks`, filled under the lock table's mutex: text only, no table calls. */
struct ctl_locks {
	struct control *lk_ctl;
	struct ctl_out *lk_out;
	const char *lk_state;             /* "held" or "waiting" */
	unsigned lk_shown;
};

/* The export a lock's object id belongs to; a per-client view has an id of its own. */
static void ctl_lock_export(struct control *ctl, uint32_t id, char *buf, size_t len)
{
	const struct config *cf = ctl->ct_env.ce_cfg;
	struct nfs_server *ns = ctl->ct_env.ce_nfs;

	for (int i = 0; ns != NULL && i < cf->cf_nexports && i < nfs_export_count(ns); i++) {
		struct union_export *ux = nfs_export_union(ns, i);

		if (ux != NULL && union_export_id(ux) == id) {
			snprintf(buf, len, "%s", cf->cf_exports[i].ec_name);
			return;
		}
	}
	snprintf(buf, len, "view#%u", id);
}

/* A host key as text that cannot break the listing: printable, bounded. */
static void ctl_lock_host(const char *host, char *buf, size_t len)
{
	size_t n = 0;

	for (; *host != '\0' && n + 1 < len; host++, n++)
		buf[n] = (unsigned char)*host < 0x20 || (unsigned char)*host >= 0x7f ? '?' : *host;
	buf[n] = '\0';
	if (*host != '\0' && n >= 3)
		memcpy(buf + n - 3, "...", 3);
}

static int ctl_lock_line(const struct locks_object *ob, const struct locks_holder *h, void *arg)
{
	struct ctl_locks *lk = arg;
	char host[CTL_LOCKS_HOST_SHOWN + 1], export[256], length[24];

	if (lk->lk_shown >= CTL_LOCKS_LIST)
		return 1;
	ctl_lock_host(h->lh_host, host, sizeof(host));
	ctl_lock_export(lk->lk_ctl, ob->lo_export, export, sizeof(export));
	if (h->lh_len == 0)
		snprintf(length, sizeof(length), "to EOF");
	else
		snprintf(length, sizeof(length), "%llu", (unsigned long long)h->lh_len);
	ctl_put(lk->lk_out, "%-24s %-16s %12llu %11d %-9s %20llu %20s %s\n", host, export,
		(unsigned long long)ob->lo_fileid, (int)h->lh_svid,
		h->lh_type == LOCKS_EXCLUSIVE ? "exclusive" : "shared",
		(unsigned long long)h->lh_offset, length, lk->lk_state);
	lk->lk_shown++;
	return lk->lk_out->co_err != 0;
}

/*
 * Held locks, then waiters, each grouped by client (its host key: the address NLM calls
 * came from). A file is named by export and fileid, the union inode number a client's stat
 * shows: the path is not kept with the lock.
 */
static void ctl_locks(struct control *ctl, struct ctl_out *o)
{
	struct ctl_locks lk = { .lk_ctl = ctl, .lk_out = o };
	struct locks_table *t = ctl->ct_env.ce_locks;
	struct locks_counts lc;

	if (t == NULL) {
		ctl_put(o, "error: this server serves no file locking (started with --nlm-port off); "
			"restart it without that option to serve NLM\n");
		return;
	}
	ctl_lock_counts(ctl, o);
	ctl_put(o, "(fileid: the union inode number; `find MOUNT -inum FILEID` on a client's "
		"mount of the export names the file)\n");
	ctl_put(o, "%-24s %-16s %12s %11s %-9s %20s %20s %s\n", "client", "export", "fileid",
		"svid", "type", "offset", "length", "state");
	lk.lk_state = "held";
	locks_each(t, ctl_lock_line, &lk);
	lk.lk_state = "waiting";
	locks_each_waiter(t, ctl_lock_line, &lk);
	locks_counts(t, &lc);
	if (lk.lk_shown >= CTL_LOCKS_LIST && lc.lc_locks + lc.lc_waiters > lk.lk_shown)
		ctl_put(o, "(only the first %u are listed; about %llu more)\n", CTL_LOCKS_LIST,
			(unsigned long long)(lc.lc_locks + lc.lc_waiters - lk.lk_shown));
}

static void ctl_help(struct ctl_out *o)
{
	ctl_put(o, "%s", CONTROL_COMMANDS_HELP);
}

/* `reset` with a usable CLIENT runs on the job thread (ctl_job_of); this answers the rest. */
static void ctl_reset(struct control *ctl, struct ctl_out *o, int nwords, char **words)
{
	(void)ctl;
	if (nwords < 2 || nwords > 3 || (nwords == 3 && strcmp(words[2], "--force")))
		ctl_put(o, "error: usage: reset CLIENT [--force] (CLIENT as `clients` shows it)\n");
	else
		ctl_put(o, "error: reset: '%.80s' is neither a client address nor a host name\n",
			words[1]);
}

static bool ctl_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			if (*s != '\t')
				return false;
	return true;
}

/* What one check job found, over every union it walked. */
struct ctl_check {
	struct control *ck_ctl;
	struct ctl_out *ck_out;
	unsigned ck_threads;
	unsigned ck_pace_us;
	const char *ck_export;            /* the export being walked */
	const char *ck_label;             /* which of its unions ("records", "client X"...) */
	struct union_check_counts ck_total;
	uint64_t ck_listed;
	uint64_t ck_views;
};

/* Called by union_check one at a time: the first CTL_CHECK_LIST records are named. */
static void ctl_check_record(void *arg, uint64_t ino, int r)
{
	struct ctl_check *ck = arg;

	if (ck->ck_listed++ < CTL_CHECK_LIST)
		ctl_put(ck->ck_out, "  %s ino %llu: %s\n", ck->ck_label, (unsigned long long)ino,
			r == -ESTALE ? "stale: no branch has the object any more"
			: r == -ENOLINK ? "a metacopy whose data is gone: no lower branch has the file "
					  "its data is read from, so READ answers NFS3ERR_IO; put the "
					  "file back in the lower branch, or remove it"
			: r > 0 ? "stale: no branch has the object any more; record dropped"
			: strerror(-r));
}

/* Where the walk is, for the loop's progress lines (ctl_progress_cb). */
static bool ctl_check_progress(void *arg, uint64_t done, uint64_t total)
{
	struct ctl_check *ck = arg;
	struct control *ctl = ck->ck_ctl;

	pthread_mutex_lock(&ctl->ct_prog_lock);
	/* "export /x" for its own records, "export /x, client ADDR" for a view of it. */
	snprintf(ctl->ct_prog_label, sizeof(ctl->ct_prog_label), "export %s%s%s", ck->ck_export,
		 strncmp(ck->ck_label, "client ", 7) ? "" : ", ",
		 strncmp(ck->ck_label, "client ", 7) ? "" : ck->ck_label);
	ctl->ct_prog_done = done;
	ctl->ct_prog_total = total;
	ctl->ct_prog_gen++;
	pthread_mutex_unlock(&ctl->ct_prog_lock);
	return !atomic_load(&ctl->ct_check_cancel);
}

/*
 * One union's walk: every record resolved as a client's call would resolve it; with
 * --repair the records found stale are dropped (union_forget_stale checks each again).
 */
static int ctl_check_union(struct ctl_check *ck, const char *label, struct union_export *ux)
{
	struct control *ctl = ck->ck_ctl;
	struct ctl_out *o = ck->ck_out;
	struct union_check_sink sink = { .cs_threads = ck->ck_threads, .cs_pace_us = ck->ck_pace_us,
					 .cs_record = ctl_check_record,
					 .cs_progress = ctl_check_progress, .cs_arg = ck };
	struct union_check_counts n;
	int r;

	ck->ck_label = label;
	r = union_check(ux, &sink, ctl->ct_check_repair, &n);
	if (r == -ECANCELED) {
		ctl_put(o, "  interrupted: the server is stopping\n");
		return r;
	}
	if (r < 0) {
		ctl_put(o, "  %s: error: reading the inode map: %s; see the log\n", label, strerror(-r));
		ck->ck_total.cnt_errors++;
		return 0;
	}
	ctl_put(o, "  %s: %llu records, %llu resolve, %llu stale%s, %llu errors\n", label,
		(unsigned long long)n.cnt_records,
		(unsigned long long)(n.cnt_records - n.cnt_stale - n.cnt_errors),
		(unsigned long long)n.cnt_stale, n.cnt_dropped ? " (dropped)" : "",
		(unsigned long long)n.cnt_errors);
	ck->ck_total.cnt_records += n.cnt_records;
	ck->ck_total.cnt_stale += n.cnt_stale;
	ck->ck_total.cnt_dropped += n.cnt_dropped;
	ck->ck_total.cnt_errors += n.cnt_errors;
	return 0;
}

static int ctl_check_view(struct union_export *ux, const char *key, void *arg)
{
	struct ctl_check *ck = arg;
	char label[300];

	snprintf(label, sizeof(label), "client %s", key);
	ck->ck_views++;
	if (ux == NULL) {
		ctl_put(ck->ck_out, "  %s: its view cannot be opened (upper removed? see the log); "
			"its handles get NFS3ERR_STALE; `reset %s --force` discards it\n", label, key);
		ck->ck_total.cnt_errors++;
		return 0;
	}
	return ctl_check_union(ck, label, ux);
}

/* One export: its own records, then every client's view of it (upper=). */
static void ctl_check_export(struct ctl_check *ck, int i)
{
	struct nfs_server *ns = ck->ck_ctl->ct_env.ce_nfs;
	const struct export_conf *ec = &ck->ck_ctl->ct_env.ce_cfg->cf_exports[i];
	struct union_export *ux = nfs_export_union(ns, i);

	if (ux == NULL)
		return;
	ctl_put(ck->ck_out, "export %s:\n", ec->ec_name);
	ck->ck_export = ec->ec_name;
	if (ctl_check_union(ck, ec->ec_upper ? "shared lowers" : "records", ux) < 0)
		return;
	if (ec->ec_upper)
		views_walk(ck->ck_ctl->ct_env.ce_views, i, ctl_check_view, ck);
}

/* Discarding a client's layer removes a directory tree: never on the loop. */
static void ctl_reset_client(struct control *ctl, struct ctl_out *o)
{
	char msg[1024];
	int r;

	r = views_reset(ctl->ct_env.ce_views, ctl->ct_reset_addr, ctl->ct_reset_force, msg,
			    sizeof(msg));
	ctl_put(o, "%s%s\n", r < 0 ? "error: reset: " : "", msg);
}

/*
 * Records resolved at once: as many as the workers serving clients (the check runs at a
 * lower priority than they do), but no more than a few per CPU.
 */
static unsigned ctl_check_threads(const struct control *ctl)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int workers = ctl->ct_env.ce_cfg->cf_workers;
	unsigned n = (unsigned)(cpus > 0 ? cpus : 1) * CTL_CHECK_THREADS_PER_CPU;

	if (workers > 0 && (unsigned)workers < n)
		n = (unsigned)workers;
	return n;
}

static void *ctl_check_thread(void *arg)
{
	struct control *ctl = arg;
	struct ctl_out o = { 0 };

	switch (ctl->ct_job) {
	case CTL_JOB_RESET:
		ctl_reset_client(ctl, &o);
		goto out;
	case CTL_JOB_CONFLICTS:
		ctl_conflicts(ctl, &o, ctl->ct_job_line);
		goto out;
	case CTL_JOB_TAKE_BASE:
		ctl_take_base(ctl, &o, ctl->ct_job_line);
		goto out;
	case CTL_JOB_BASE:
		ctl_base(ctl, &o, ctl->ct_job_line);
		goto out;
	case CTL_JOB_CHECK:
		break;
	}
	struct ctl_check ck = { .ck_ctl = ctl, .ck_out = &o, .ck_threads = ctl_check_threads(ctl),
				.ck_pace_us = ctl->ct_env.ce_cfg->cf_check_pace_us };

	for (int i = 0; i < nfs_export_count(ctl->ct_env.ce_nfs); i++)
		ctl_check_export(&ck, i);
	if (ck.ck_listed > CTL_CHECK_LIST)
		ctl_put(&o, "(%llu more records not listed)\n",
			(unsigned long long)(ck.ck_listed - CTL_CHECK_LIST));
	ctl_put(&o, CONTROL_CHECK_TOTALS ", %llu client view%s\n",
		(unsigned long long)ck.ck_total.cnt_stale, (unsigned long long)ck.ck_total.cnt_dropped,
		(unsigned long long)ck.ck_total.cnt_errors, (unsigned long long)ck.ck_views,
		ck.ck_views == 1 ? "" : "s");
	if (ctl->ct_check_repair)
		ctl_put(&o, "a stale record is an object removed from the branches behind the server's "
			"back; --repair dropped those records (their handles were NFS3ERR_STALE already "
			"and stay so). Records of objects that moved were updated\n");
	else
		ctl_put(&o, "a stale record is an object removed from the branches behind the server's "
			"back; clients holding its handle get NFS3ERR_STALE. Records of objects that "
			"moved were updated, as a client's call would have; nothing was removed "
			"(`check --repair` drops the stale records)\n");
out:
	if (o.co_err != 0) {
		free(o.co_buf);
		o.co_buf = NULL;
	}
	ctl->ct_check_report = o.co_buf;
	ev_async_send(ctl->ct_loop, &ctl->ct_check_done);
	return NULL;
}

static void ctl_check_join(struct control *ctl)
{
	if (!ctl->ct_checking)
		return;
	pthread_join(ctl->ct_check_thread, NULL);
	ctl->ct_checking = false;
}

char *control_answer(struct control *ctl, const char *line)
{
	struct ctl_out o = { 0 };
	char copy[CONTROL_MAX_REQUEST + 1], *words[CTL_MAX_WORDS], *save = NULL, *w;
	size_t len = strlen(line);
	int n = 0;

	while (len > 0 && line[len - 1] == '\r')
		len--;
	if (len >= sizeof(copy)) {
		ctl_put(&o, "error: the request is longer than %d bytes; send one command such as `status`\n",
			CONTROL_MAX_REQUEST);
		return o.co_err ? (free(o.co_buf), NULL) : o.co_buf;
	}
	memcpy(copy, line, len);
	copy[len] = '\0';
	if (!ctl_printable(copy)) {
		ctl_put(&o, "error: the request has control or non-ASCII bytes; send one line of text such as `status` (try `help`)\n");
		return o.co_err ? (free(o.co_buf), NULL) : o.co_buf;
	}
	for (w = strtok_r(copy, " \t", &save); w != NULL && n < CTL_MAX_WORDS;
	     w = strtok_r(NULL, " \t", &save))
		words[n++] = w;
	if (n == 0)
		ctl_put(&o, "error: empty request; send a command such as `status` (try `help`)\n");
	else if (!strcmp(words[0], "status"))
		ctl_status(ctl, &o);
	else if (!strcmp(words[0], "clients"))
		ctl_clients(ctl, &o);
	else if (!strcmp(words[0], "stats"))
		ctl_stats(ctl, &o);
	else if (!strcmp(words[0], "locks"))
		ctl_locks(ctl, &o);
	else if (!strcmp(words[0], "help"))
		ctl_help(&o);
	else if (!strcmp(words[0], "check"))
		ctl_put(&o, "error: usage: check [--repair]\n");
	else if (!strcmp(words[0], "reset"))
		ctl_reset(ctl, &o, n, words);
	else if (!strcmp(words[0], "reload")) {
		if (ctl->ct_env.ce_reload == NULL) {
			ctl_put(&o, "error: reload is not available in this process\n");
		} else {
			log_info("control socket: reload requested");
			ctl->ct_env.ce_reload(ctl->ct_env.ce_reload_arg);
			ctl_put(&o, "reload started (as SIGHUP): the configuration is re-read; the result and any setting that needs a restart are logged\n");
		}
	} else {
		ctl_put(&o, "error: unknown command \"%.64s\"; commands: status, clients, stats, locks, check, reload, reset CLIENT, base EXPORT [set DIR...], conflicts CLIENT, take-base CLIENT PATH..., help\n",
			words[0]);
	}
	if (o.co_err != 0) {
		free(o.co_buf);
		return NULL;
	}
	return o.co_buf;
}

/*
 * Every CONTROL_PROGRESS_EVERY while a check runs: a progress line to the connection that
 * asked, if the check moved on since the last one (a check that stopped moving sends
 * nothing, so the tool's own timeout tells it) and the last one is out.
 */
static void ctl_progress_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct control *ctl = w->data;
	struct ctl_conn *c = ctl->ct_check_conn;
	struct ctl_out o = { 0 };
	uint64_t gen;

	(void)loop;
	(void)revents;
	if (c == NULL || !c->cn_streaming || c->cn_out != NULL)
		return;
	pthread_mutex_lock(&ctl->ct_prog_lock);
	gen = ctl->ct_prog_gen;
	if (gen != ctl->ct_prog_sent)
		ctl_put(&o, CONTROL_PROGRESS_PREFIX "%s: %llu/%llu records\n", ctl->ct_prog_label,
			(unsigned long long)ctl->ct_prog_done,
			(unsigned long long)ctl->ct_prog_total);
	pthread_mutex_unlock(&ctl->ct_prog_lock);
	if (o.co_err != 0 || o.co_buf == NULL) {
		free(o.co_buf);
		return;
	}
	ctl->ct_prog_sent = gen;
	c->cn_out = o.co_buf;
	c->cn_outlen = o.co_len;
	c->cn_outoff = 0;
	ctl_conn_flush(c);
}

/*
 * Whether line asks for a job of the job thread: `check`, or `reset CLIENT [--force]` with
 * an address or a host name (anything else about reset is answered on the loop).
 */
static bool ctl_job_of(struct control *ctl, const char *line)
{
	char copy[CONTROL_MAX_REQUEST + 1], *w[4], *save = NULL;
	int n = 0;

	if (strlen(line) >= sizeof(copy))
		return false;
	strcpy(copy, line);
	for (char *t = strtok_r(copy, " \t\r", &save); t && n < 4; t = strtok_r(NULL, " \t\r", &save))
		w[n++] = t;
	if (n == 0)
		return false;
	if (!strcmp(w[0], "check") && (n == 1 || (n == 2 && !strcmp(w[1], "--repair")))) {
		if (ctl->ct_checking)
			return true; /* ctl_check_start says a job runs; the fields belong to it */
		ctl->ct_job = CTL_JOB_CHECK;
		ctl->ct_check_repair = n == 2;
		return true;
	}
	/* their arguments are checked on the job thread, which answers them */
	if (!strcmp(w[0], "conflicts") || !strcmp(w[0], "take-base") || !strcmp(w[0], "base")) {
		if (ctl->ct_checking)
			return true;
		ctl->ct_job = !strcmp(w[0], "conflicts") ? CTL_JOB_CONFLICTS :
			      !strcmp(w[0], "base") ? CTL_JOB_BASE : CTL_JOB_TAKE_BASE;
		ctl->ct_job_reload = false;
		strcpy(ctl->ct_job_line, line);
		return true;
	}
	if (n < 2 || n > 3 || strcmp(w[0], "reset") || (n == 3 && strcmp(w[2], "--force")) ||
	    strlen(w[1]) >= sizeof(ctl->ct_reset_addr) ||
	    !(hostmap_is_address(w[1]) || hostmap_name_ok(w[1])))
		return false;
	if (ctl->ct_checking)
		return true; /* ctl_check_start says a job runs; the fields belong to it */
	ctl->ct_job = CTL_JOB_RESET;
	strcpy(ctl->ct_reset_addr, w[1]);
	ctl->ct_reset_force = n == 3;
	return true;
}

/* Starts the walk; the connection waits without a deadline until the report is back. */
static void ctl_check_start(struct ctl_conn *c)
{
	struct control *ctl = c->cn_ctl;
	int rc;

	if (ctl->ct_checking) {
		ctl_conn_send(c, strdup("error: a check, reset, conflicts or take-base is already running; try again when it has finished\n"));
		return;
	}
	ev_io_stop(ctl->ct_loop, &c->cn_rio);
	ev_timer_stop(ctl->ct_loop, &c->cn_timer);
	atomic_store(&ctl->ct_check_cancel, false);
	ctl->ct_check_report = NULL;
	rc = pthread_create(&ctl->ct_check_thread, NULL, ctl_check_thread, ctl);
	if (rc != 0) {
		ctl_conn_send(c, strdup("error: cannot start the check thread; try again\n"));
		return;
	}
	if (ctl->ct_job == CTL_JOB_CHECK)
		log_info("control socket: checking the inode map against the branches");
	ctl->ct_checking = true;
	ctl->ct_check_conn = c;
	c->cn_streaming = true;
	ev_timer_again(ctl->ct_loop, &ctl->ct_progress);
}

static void ctl_check_done_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct control *ctl = w->data;
	struct ctl_conn *c;

	(void)revents;
	if (!ctl->ct_checking)
		return;
	ctl_check_join(ctl);
	ev_timer_stop(loop, &ctl->ct_progress);
	if (ctl->ct_job_reload && ctl->ct_env.ce_reload) {
		ctl->ct_job_reload = false;
		log_info("control socket: reload requested (a new base)");
		ctl->ct_env.ce_reload(ctl->ct_env.ce_reload_arg);
	}
	c = ctl->ct_check_conn;
	ctl->ct_check_conn = NULL;
	if (c == NULL) {
		free(ctl->ct_check_report);
	} else {
		/* The reply gets the usual deadline to be read. */
		ev_timer_set(&c->cn_timer, CONTROL_TIMEOUT, 0);
		ev_timer_start(loop, &c->cn_timer);
		ctl_conn_send(c, ctl->ct_check_report);
	}
	ctl->ct_check_report = NULL;
}

void ctl_request(struct ctl_conn *c)
{
	if (ctl_job_of(c->cn_ctl, c->cn_in))
		ctl_check_start(c);
	else
		ctl_conn_send(c, control_answer(c->cn_ctl, c->cn_in));
}

char *ctl_metrics(struct control *ctl, const char *head)
{
	struct locks_counts lc;

	if (ctl->ct_env.ce_locks != NULL)
		locks_counts(ctl->ct_env.ce_locks, &lc);
	return metrics_answer(head, (long long)(time(NULL) - ctl->ct_started),
			      ctl_count_mounts(ctl->ct_env.ce_nfs),
			      ctl->ct_env.ce_locks != NULL ? &lc : NULL, ctl_lock_callbacks(ctl));
}

void ctl_jobs_init(struct control *ctl)
{
	pthread_mutex_init(&ctl->ct_prog_lock, NULL);
	ev_timer_init(&ctl->ct_progress, ctl_progress_cb, 0., CONTROL_PROGRESS_EVERY);
	ctl->ct_progress.data = ctl;
	ev_async_init(&ctl->ct_check_done, ctl_check_done_cb);
	ctl->ct_check_done.data = ctl;
	ev_async_start(ctl->ct_loop, &ctl->ct_check_done);
}

void ctl_jobs_close(struct control *ctl)
{
	atomic_store(&ctl->ct_check_cancel, true);
	ctl_check_join(ctl);
	free(ctl->ct_check_report);
	ctl->ct_check_report = NULL;
	ev_async_stop(ctl->ct_loop, &ctl->ct_check_done);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_progress);
	pthread_mutex_destroy(&ctl->ct_prog_lock);
}
