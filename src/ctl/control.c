/*
 * The control socket (include/control.h): accept, read one bounded line, answer from
 * the statistics, the configuration and the MOUNT list, write, close. All on the loop;
 * every socket is non-blocking.
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "hostmap.h"
#include "log.h"
#include "stats.h"
#include "store.h"
#include "metrics.h"
#include "nfs.h"
#include "union.h"
#include "views.h"

#define CTL_MAX_WORDS 4
#define CTL_CHECK_LIST 20          /* stale records named one by one; more are only counted */
#define CTL_CHECK_THREADS_PER_CPU 2 /* resolving waits on the disk too */
/*
 * Microseconds each check thread pauses after a record (default none): spares a slow disk,
 * and lets tests have a check outlast unionnfsd-ctl's timeout on a small map.
 */
#define CTL_CHECK_PACE_ENV "UNIONNFSD_CHECK_PACE_US"
#define CTL_CHECK_PACE_MAX 1000000
#define CTL_ACCEPT_BACKOFF 1.0      /* seconds accepting pauses when out of descriptors */
#define CTL_WARN_EVERY 60.0         /* seconds between repeated warnings */

struct ctl_conn {
	struct ctl_conn *cc_prev, *cc_next;
	struct control *cc_ctl;
	int cc_fd;
	ev_io cc_rio;
	ev_io cc_wio;
	ev_timer cc_timer;
	bool cc_http;                     /* a metrics scrape, not a control command */
	bool cc_streaming;                /* progress lines go out; the reply is yet to come */
	char cc_in[METRICS_HEAD_MAX + 1];
	size_t cc_inlen;
	char *cc_out;
	size_t cc_outlen, cc_outoff;
};

struct control {
	struct ev_loop *ct_loop;
	struct control_env ct_env;
	int ct_fd;
	ev_io ct_accept;
	int ct_http_fd;                   /* --metrics listener, -1 if none */
	ev_io ct_http_accept;
	ev_timer ct_backoff;              /* accepting paused: out of descriptors */
	ev_timer ct_http_backoff;
	int ct_spare;                     /* a descriptor kept free for one control connection */
	ev_tstamp ct_emfile_warned;
	char ct_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t ct_dev;                     /* the socket file we made, so close removes only it */
	ino_t ct_ino;
	time_t ct_started;
	struct ctl_conn *ct_conns;
	unsigned ct_nconns;               /* control socket connections */
	unsigned ct_nhttp;                /* --metrics connections */
	/*
	 * `check` walks the whole map, so it runs on a thread of its own; the connection that
	 * asked waits (ct_check_conn, NULL if it went away) and ct_check_done brings the report
	 * back to the loop.
	 */
	bool ct_checking;
	bool ct_job_reset;                /* the thread resets a client instead of checking */
	char ct_reset_addr[HOSTMAP_NAME_MAX + 1]; /* an address, or a host name (upper=...%h) */
	bool ct_reset_force;
	bool ct_check_repair;             /* check --repair: drop the stale records found */
	pthread_t ct_check_thread;
	struct ctl_conn *ct_check_conn;
	atomic_bool ct_check_cancel;
	char *ct_check_report;
	ev_async ct_check_done;
	/* Where the check is (ctl_check_progress), sent to its connection now and then. */
	pthread_mutex_t ct_prog_lock;
	char ct_prog_label[320];
	uint64_t ct_prog_done, ct_prog_total;
	uint64_t ct_prog_gen;             /* +1 by every update */
	uint64_t ct_prog_sent;            /* the update last sent (loop only) */
	ev_timer ct_progress;
};

/* A reply being composed: stats_appendf's growing string and its first error. */
struct ctl_out {
	char *co_buf;
	size_t co_len, co_cap;
	int co_err;
};

#define ctl_put(o, ...) \
	do { \
		if ((o)->co_err == 0) \
			(o)->co_err = stats_appendf(&(o)->co_buf, &(o)->co_len, &(o)->co_cap, __VA_ARGS__); \
	} while (0)

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

		ro = nfs_export_read_only(ns, i);
		ctl_put(o, "export %s (%d branch%s%s)\n", ec->ec_name, ec->ec_nbranches,
			ec->ec_nbranches == 1 ? "" : "es", ro && ec->ec_upper == NULL ? ", read-only" : "");
		/* With upper= every listed branch is a lower; each client writes to its own. */
		if (ec->ec_upper != NULL) {
			int views = views_open_count(ctl->ct_env.ce_views, i);

			ctl_put(o, "  upper %s (one per client; %d client view%s open)\n",
				ec->ec_upper, views, views == 1 ? "" : "s");
		}
		for (int j = 0; j < ec->ec_nbranches; j++)
			ctl_put(o, "  %s %s\n", j == 0 && !ro && ec->ec_upper == NULL ? "upper" : "lower",
				ec->ec_branches[j]);
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

static void ctl_stats(struct control *ctl, struct ctl_out *o)
{
	ctl_uptime(ctl, o);
	if (o->co_err == 0)
		o->co_err = stats_report(&o->co_buf, &o->co_len, &o->co_cap);
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
	const char *ck_label;             /* of the union being walked */
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
			: r > 0 ? "stale: no branch has the object any more; record dropped"
			: strerror(-r));
}

/* Where the walk is, for the loop's progress lines (ctl_progress_cb). */
static bool ctl_check_progress(void *arg, uint64_t done, uint64_t total)
{
	struct ctl_check *ck = arg;
	struct control *ctl = ck->ck_ctl;

	pthread_mutex_lock(&ctl->ct_prog_lock);
	snprintf(ctl->ct_prog_label, sizeof(ctl->ct_prog_label), "%s", ck->ck_label);
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
		ck->ck_total.cc_errors++;
		return 0;
	}
	ctl_put(o, "  %s: %llu records, %llu resolve, %llu stale%s, %llu errors\n", label,
		(unsigned long long)n.cc_records,
		(unsigned long long)(n.cc_records - n.cc_stale - n.cc_errors),
		(unsigned long long)n.cc_stale, n.cc_dropped ? " (dropped)" : "",
		(unsigned long long)n.cc_errors);
	ck->ck_total.cc_records += n.cc_records;
	ck->ck_total.cc_stale += n.cc_stale;
	ck->ck_total.cc_dropped += n.cc_dropped;
	ck->ck_total.cc_errors += n.cc_errors;
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
		ck->ck_total.cc_errors++;
		return 0;
	}
	return ctl_check_union(ck, label, ux);
}

/* One export: its own records, then every client's view of it (upper=). */
static void ctl_check_export(struct ctl_check *ck, int i)
{
	struct nfs_server *ns = ck->ck_ctl->ct_env.ce_nfs;
	const struct export_conf *ec = &ck->ck_ctl->ct_env.ce_cfg->cf_exports[i];

	if (ns->ns_exports[i] == NULL)
		return;
	ctl_put(ck->ck_out, "export %s:\n", ec->ec_name);
	if (ctl_check_union(ck, ec->ec_upper ? "shared lowers" : "records", ns->ns_exports[i]) < 0)
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

static unsigned ctl_check_pace(void)
{
	const char *v = getenv(CTL_CHECK_PACE_ENV);
	unsigned long us = v ? strtoul(v, NULL, 10) : 0;

	return us > CTL_CHECK_PACE_MAX ? CTL_CHECK_PACE_MAX : (unsigned)us;
}

static void *ctl_check_thread(void *arg)
{
	struct control *ctl = arg;
	struct ctl_out o = { 0 };

	if (ctl->ct_job_reset) {
		ctl_reset_client(ctl, &o);
		goto out;
	}
	struct ctl_check ck = { .ck_ctl = ctl, .ck_out = &o, .ck_threads = ctl_check_threads(ctl),
				.ck_pace_us = ctl_check_pace() };

	for (int i = 0; i < ctl->ct_env.ce_nfs->ns_nexports; i++)
		ctl_check_export(&ck, i);
	if (ck.ck_listed > CTL_CHECK_LIST)
		ctl_put(&o, "(%llu more records not listed)\n",
			(unsigned long long)(ck.ck_listed - CTL_CHECK_LIST));
	ctl_put(&o, CONTROL_CHECK_TOTALS ", %llu client view%s\n",
		(unsigned long long)ck.ck_total.cc_stale, (unsigned long long)ck.ck_total.cc_dropped,
		(unsigned long long)ck.ck_total.cc_errors, (unsigned long long)ck.ck_views,
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
		ctl_put(&o, "error: unknown command \"%.64s\"; commands: status, clients, stats, check, reload, reset CLIENT, help\n",
			words[0]);
	}
	if (o.co_err != 0) {
		free(o.co_buf);
		return NULL;
	}
	return o.co_buf;
}

/* Takes a descriptor back into reserve once the connection that used it is gone. */
static void ctl_spare_take(struct control *ctl)
{
	if (ctl->ct_spare < 0)
		ctl->ct_spare = eventfd(0, EFD_CLOEXEC);
}

static void ctl_conn_close(struct ctl_conn *c)
{
	struct control *ctl = c->cc_ctl;

	ev_io_stop(ctl->ct_loop, &c->cc_rio);
	ev_io_stop(ctl->ct_loop, &c->cc_wio);
	ev_timer_stop(ctl->ct_loop, &c->cc_timer);
	if (ctl->ct_check_conn == c)
		ctl->ct_check_conn = NULL;
	close(c->cc_fd);
	if (c->cc_prev)
		c->cc_prev->cc_next = c->cc_next;
	else
		ctl->ct_conns = c->cc_next;
	if (c->cc_next)
		c->cc_next->cc_prev = c->cc_prev;
	if (c->cc_http)
		ctl->ct_nhttp--;
	else
		ctl->ct_nconns--;
	/* Its descriptor is free now: the reserve is taken back if it was used or lost. */
	ctl_spare_take(ctl);
	free(c->cc_out);
	free(c);
}

/* Writes what the socket takes; closes the connection once all is out or on an error. */
static void ctl_conn_flush(struct ctl_conn *c)
{
	ssize_t n;

	while (c->cc_outoff < c->cc_outlen) {
		n = send(c->cc_fd, c->cc_out + c->cc_outoff, c->cc_outlen - c->cc_outoff, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(c->cc_ctl->ct_loop, &c->cc_wio);
			return;
		}
		if (n <= 0)
			break;
		c->cc_outoff += (size_t)n;
	}
	if (c->cc_streaming && c->cc_outoff == c->cc_outlen) {
		free(c->cc_out);
		c->cc_out = NULL;
		c->cc_outlen = c->cc_outoff = 0;
		return;
	}
	ctl_conn_close(c);
}

/* out after what is still to go out of c (a progress line); out is freed. */
static char *ctl_conn_queue(struct ctl_conn *c, char *out)
{
	size_t left = c->cc_outlen - c->cc_outoff;
	char *all;

	if (c->cc_out == NULL || out == NULL)
		return out;
	all = malloc(left + strlen(out) + 1);
	if (all != NULL) {
		memcpy(all, c->cc_out + c->cc_outoff, left);
		strcpy(all + left, out);
	}
	free(out);
	free(c->cc_out);
	c->cc_out = NULL;
	c->cc_outlen = c->cc_outoff = 0;
	return all;
}

/* Stops reading and sends out (malloc()ed; NULL: out of memory), then closes. */
static void ctl_conn_send(struct ctl_conn *c, char *out)
{
	static const char oom[] = "error: out of memory in the server; try again\n";

	ev_io_stop(c->cc_ctl->ct_loop, &c->cc_rio);
	c->cc_streaming = false;
	out = ctl_conn_queue(c, out);
	free(c->cc_out);
	c->cc_out = out;
	c->cc_outoff = 0;
	if (c->cc_out == NULL)
		c->cc_out = strdup(oom);
	if (c->cc_out == NULL) {
		ctl_conn_close(c);
		return;
	}
	c->cc_outlen = strlen(c->cc_out);
	ctl_conn_flush(c);
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
	if (c == NULL || !c->cc_streaming || c->cc_out != NULL)
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
	c->cc_out = o.co_buf;
	c->cc_outlen = o.co_len;
	c->cc_outoff = 0;
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
		ctl->ct_job_reset = false;
		ctl->ct_check_repair = n == 2;
		return true;
	}
	if (n < 2 || n > 3 || strcmp(w[0], "reset") || (n == 3 && strcmp(w[2], "--force")) ||
	    strlen(w[1]) >= sizeof(ctl->ct_reset_addr) ||
	    !(hostmap_is_address(w[1]) || hostmap_name_ok(w[1])))
		return false;
	if (ctl->ct_checking)
		return true; /* ctl_check_start says a job runs; the fields belong to it */
	ctl->ct_job_reset = true;
	strcpy(ctl->ct_reset_addr, w[1]);
	ctl->ct_reset_force = n == 3;
	return true;
}

/* Starts the walk; the connection waits without a deadline until the report is back. */
static void ctl_check_start(struct ctl_conn *c)
{
	struct control *ctl = c->cc_ctl;
	int rc;

	if (ctl->ct_checking) {
		ctl_conn_send(c, strdup("error: a check or reset is already running; try again when it has finished\n"));
		return;
	}
	ev_io_stop(ctl->ct_loop, &c->cc_rio);
	ev_timer_stop(ctl->ct_loop, &c->cc_timer);
	atomic_store(&ctl->ct_check_cancel, false);
	ctl->ct_check_report = NULL;
	rc = pthread_create(&ctl->ct_check_thread, NULL, ctl_check_thread, ctl);
	if (rc != 0) {
		ctl_conn_send(c, strdup("error: cannot start the check thread; try again\n"));
		return;
	}
	log_info("control socket: checking the inode map against the branches");
	ctl->ct_checking = true;
	ctl->ct_check_conn = c;
	c->cc_streaming = true;
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
	c = ctl->ct_check_conn;
	ctl->ct_check_conn = NULL;
	if (c == NULL) {
		free(ctl->ct_check_report);
	} else {
		/* The reply gets the usual deadline to be read. */
		ev_timer_set(&c->cc_timer, CONTROL_TIMEOUT, 0);
		ev_timer_start(loop, &c->cc_timer);
		ctl_conn_send(c, ctl->ct_check_report);
	}
	ctl->ct_check_report = NULL;
}

/*
 * Appends what the peer sent (up to room bytes) to cc_in, NUL-terminated: the count (0 at
 * end of file), or -1 when there is nothing to do now (nothing to read, or c was closed).
 */
static ssize_t ctl_recv(struct ctl_conn *c, size_t room)
{
	ssize_t n = recv(c->cc_fd, c->cc_in + c->cc_inlen, room, 0);

	if (n < 0) {
		if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			ctl_conn_close(c);
		return -1;
	}
	c->cc_inlen += (size_t)n;
	c->cc_in[c->cc_inlen] = '\0';
	return n;
}

/* Reads a request head up to its blank line; the body, if any, is never read. */
static void ctl_http_read(struct ctl_conn *c)
{
	ssize_t n = ctl_recv(c, METRICS_HEAD_MAX - c->cc_inlen);

	if (n < 0)
		return;
	if (memchr(c->cc_in, '\0', c->cc_inlen) != NULL) {
		ctl_conn_send(c, metrics_response("400 Bad Request", "NUL byte in the request\n"));
		return;
	}
	if (strstr(c->cc_in, "\r\n\r\n") == NULL && strstr(c->cc_in, "\n\n") == NULL) {
		if (n > 0 && c->cc_inlen < METRICS_HEAD_MAX)
			return;
		if (n > 0) {
			ctl_conn_send(c, metrics_response("431 Request Header Fields Too Large",
							  "request head too large\n"));
			return;
		}
	}
	ctl_conn_send(c, metrics_answer(c->cc_in, (long long)(time(NULL) - c->cc_ctl->ct_started),
					ctl_count_mounts(c->cc_ctl->ct_env.ce_nfs)));
}

static void ctl_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_conn *c = w->data;
	size_t room = CONTROL_MAX_REQUEST - c->cc_inlen;
	char *nl;
	ssize_t n;

	(void)loop;
	(void)revents;
	if (c->cc_http) {
		ctl_http_read(c);
		return;
	}
	n = ctl_recv(c, room);
	if (n < 0)
		return;
	nl = memchr(c->cc_in, '\n', c->cc_inlen);
	if (nl != NULL) {
		*nl = '\0';
	} else if (n > 0 && c->cc_inlen < CONTROL_MAX_REQUEST) {
		return;
	} else if (n > 0) {
		/* Longer than a request may be: answer without reading the rest. */
		ctl_conn_send(c, strdup("error: the request line is too long; send one command such as `status` and a newline\n"));
		return;
	}
	/* A NUL inside the line would hide the rest of it from the parser. */
	if (memchr(c->cc_in, '\0', nl != NULL ? (size_t)(nl - c->cc_in) : c->cc_inlen) != NULL)
		ctl_conn_send(c, strdup("error: the request has a NUL byte; send one line of text such as `status`\n"));
	else if (ctl_job_of(c->cc_ctl, c->cc_in))
		ctl_check_start(c);
	else
		ctl_conn_send(c, control_answer(c->cc_ctl, c->cc_in));
}

static void ctl_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_conn *c = w->data;

	(void)revents;
	ev_io_stop(loop, w);
	ctl_conn_flush(c);
}

static void ctl_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	ctl_conn_close(w->data);
}

/* Only root and the server's own user may steer it, whatever the socket's mode says. */
static bool ctl_peer_allowed(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return false;
	return uc.uid == 0 || uc.uid == geteuid();
}

/* Out of descriptors: accepting again at once would spin, so the listener rests a while. */
static void ctl_accept_pause(struct control *ctl, ev_io *w)
{
	ev_timer *t = w == &ctl->ct_accept ? &ctl->ct_backoff : &ctl->ct_http_backoff;

	if (ev_now(ctl->ct_loop) - ctl->ct_emfile_warned >= CTL_WARN_EVERY) {
		ctl->ct_emfile_warned = ev_now(ctl->ct_loop);
		log_warn("%s: cannot accept a connection: %s; pausing for %.0f s (raise the open files limit, e.g. ulimit -n or LimitNOFILE=)",
			 w == &ctl->ct_accept ? "control socket" : "--metrics", strerror(errno),
			 CTL_ACCEPT_BACKOFF);
	}
	ev_io_stop(ctl->ct_loop, w);
	ev_timer_set(t, CTL_ACCEPT_BACKOFF, 0.);
	ev_timer_start(ctl->ct_loop, t);
}

static void ctl_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct control *ctl = w->data;

	(void)revents;
	ev_timer_stop(loop, w);
	ev_io_start(loop, w == &ctl->ct_backoff ? &ctl->ct_accept : &ctl->ct_http_accept);
}

/*
 * Accepts on w's socket. Without a descriptor left, the control socket uses its reserve
 * one (one connection at a time): `unionnfsd-ctl status` works while client connections
 * or views hold every other. Returns the descriptor, or -1 with errno set.
 */
static int ctl_accept_one(struct control *ctl, ev_io *w)
{
	int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || w != &ctl->ct_accept ||
	    ctl->ct_spare < 0)
		return fd;
	close(ctl->ct_spare);
	ctl->ct_spare = -1;
	fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		ctl_spare_take(ctl);
		errno = e;
	}
	return fd;
}

/* Closes the oldest metrics connection still waiting for its request, for a new one. */
static bool ctl_http_make_room(struct control *ctl)
{
	struct ctl_conn *c, *oldest = NULL;

	/* The list is newest first. */
	for (c = ctl->ct_conns; c != NULL; c = c->cc_next)
		if (c->cc_http && c->cc_out == NULL)
			oldest = c;
	if (oldest == NULL)
		return false;
	ctl_conn_close(oldest);
	return true;
}

/* Whether the new connection on w may be served: within its budget, and an allowed user. */
static bool ctl_admit(struct control *ctl, ev_io *w, int fd)
{
	if (w == &ctl->ct_http_accept)
		return ctl->ct_nhttp < CONTROL_HTTP_MAX_CONNS || ctl_http_make_room(ctl);
	return ctl->ct_nconns < CONTROL_MAX_CONNS && ctl_peer_allowed(fd);
}

static void ctl_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct control *ctl = w->data;
	struct ctl_conn *c;
	int fd;

	(void)revents;
	for (int i = 0; i < CONTROL_MAX_CONNS; i++) {
		fd = ctl_accept_one(ctl, w);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				ctl_accept_pause(ctl, w);
			else if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		if (!ctl_admit(ctl, w, fd) || (c = calloc(1, sizeof(*c))) == NULL) {
			close(fd);
			ctl_spare_take(ctl);
			continue;
		}
		c->cc_http = w == &ctl->ct_http_accept;
		c->cc_ctl = ctl;
		c->cc_fd = fd;
		ev_io_init(&c->cc_rio, ctl_read_cb, fd, EV_READ);
		ev_io_init(&c->cc_wio, ctl_write_cb, fd, EV_WRITE);
		ev_timer_init(&c->cc_timer, ctl_timeout_cb,
			      c->cc_http ? CONTROL_HTTP_TIMEOUT : CONTROL_TIMEOUT, 0);
		c->cc_rio.data = c->cc_wio.data = c->cc_timer.data = c;
		c->cc_next = ctl->ct_conns;
		if (c->cc_next)
			c->cc_next->cc_prev = c;
		ctl->ct_conns = c;
		if (c->cc_http)
			ctl->ct_nhttp++;
		else
			ctl->ct_nconns++;
		ev_io_start(loop, &c->cc_rio);
		ev_timer_start(loop, &c->cc_timer);
	}
}

/* Replaces a stale socket file; anything else at the path is the admin's and stays. */
static int ctl_clear_path(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : (err_set(err, errlen, "%s: %s", path, strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		err_set(err, errlen, "%s exists and is not a socket; move it away so the control socket can be made there",
			path);
		return -1;
	}
	if (unlink(path) < 0) {
		err_set(err, errlen, "cannot remove the stale control socket %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int control_open(struct ev_loop *loop, const struct control_env *env, struct control **out,
		 char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct control *ctl;
	struct stat st;
	int n;

	*out = NULL;
	ctl = calloc(1, sizeof(*ctl));
	if (ctl == NULL) {
		err_set(err, errlen, "control socket: out of memory");
		return -1;
	}
	ctl->ct_loop = loop;
	ctl->ct_env = *env;
	ctl->ct_fd = -1;
	ctl->ct_http_fd = -1;
	ctl->ct_spare = -1;
	ctl->ct_started = time(NULL);
	n = snprintf(ctl->ct_path, sizeof(ctl->ct_path), "%s/%s", env->ce_cfg->cf_state_dir,
		     CONTROL_SOCKET_NAME);
	if (n < 0 || (size_t)n >= sizeof(ctl->ct_path)) {
		err_set(err, errlen, "the control socket path %s/%s is longer than a UNIX socket path may be (%zu bytes); use a shorter --state directory",
			env->ce_cfg->cf_state_dir, CONTROL_SOCKET_NAME, sizeof(ctl->ct_path) - 1);
		free(ctl);
		return -1;
	}
	memcpy(sun.sun_path, ctl->ct_path, (size_t)n + 1);
	if (ctl_clear_path(ctl->ct_path, err, errlen) < 0) {
		free(ctl);
		return -1;
	}
	ctl->ct_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* Linux gives the socket file the mode of the unbound socket: 0600 from the start. */
	if (ctl->ct_fd < 0 || fchmod(ctl->ct_fd, 0600) < 0 ||
	    bind(ctl->ct_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(ctl->ct_path, 0600) < 0 || stat(ctl->ct_path, &st) < 0 ||
	    listen(ctl->ct_fd, CONTROL_MAX_CONNS) < 0) {
		err_set(err, errlen, "cannot make the control socket %s: %s; check that the state directory is writable",
			ctl->ct_path, strerror(errno));
		if (ctl->ct_fd >= 0)
			close(ctl->ct_fd);
		free(ctl);
		return -1;
	}
	ctl->ct_dev = st.st_dev;
	ctl->ct_ino = st.st_ino;
	ctl_spare_take(ctl);
	if (ctl->ct_spare < 0)
		log_warn("control socket: cannot keep a descriptor in reserve: %s; it may not answer while clients hold every descriptor",
			 strerror(errno));
	ev_timer_init(&ctl->ct_backoff, ctl_backoff_cb, CTL_ACCEPT_BACKOFF, 0.);
	ctl->ct_backoff.data = ctl;
	ev_timer_init(&ctl->ct_http_backoff, ctl_backoff_cb, CTL_ACCEPT_BACKOFF, 0.);
	ctl->ct_http_backoff.data = ctl;
	pthread_mutex_init(&ctl->ct_prog_lock, NULL);
	ev_timer_init(&ctl->ct_progress, ctl_progress_cb, 0., CONTROL_PROGRESS_EVERY);
	ctl->ct_progress.data = ctl;
	ev_async_init(&ctl->ct_check_done, ctl_check_done_cb);
	ctl->ct_check_done.data = ctl;
	ev_async_start(loop, &ctl->ct_check_done);
	ev_io_init(&ctl->ct_accept, ctl_accept_cb, ctl->ct_fd, EV_READ);
	ctl->ct_accept.data = ctl;
	ev_io_start(loop, &ctl->ct_accept);
	*out = ctl;
	return 0;
}

void control_close(struct control *ctl)
{
	struct stat st;

	if (ctl == NULL)
		return;
	atomic_store(&ctl->ct_check_cancel, true);
	ctl_check_join(ctl);
	free(ctl->ct_check_report);
	ev_async_stop(ctl->ct_loop, &ctl->ct_check_done);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_progress);
	pthread_mutex_destroy(&ctl->ct_prog_lock);
	while (ctl->ct_conns != NULL)
		ctl_conn_close(ctl->ct_conns);
	ev_io_stop(ctl->ct_loop, &ctl->ct_accept);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_backoff);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_http_backoff);
	close(ctl->ct_fd);
	if (ctl->ct_spare >= 0)
		close(ctl->ct_spare);
	if (ctl->ct_http_fd >= 0) {
		ev_io_stop(ctl->ct_loop, &ctl->ct_http_accept);
		close(ctl->ct_http_fd);
	}
	if (lstat(ctl->ct_path, &st) == 0 && st.st_dev == ctl->ct_dev && st.st_ino == ctl->ct_ino)
		unlink(ctl->ct_path);
	free(ctl);
}

int control_metrics_open(struct control *ctl, const char *addrport, char *err, size_t errlen)
{
	int fd = metrics_listen(addrport, err, errlen);

	if (fd < 0)
		return -1;
	ctl->ct_http_fd = fd;
	ev_io_init(&ctl->ct_http_accept, ctl_accept_cb, fd, EV_READ);
	ctl->ct_http_accept.data = ctl;
	ev_io_start(ctl->ct_loop, &ctl->ct_http_accept);
	return 0;
}
