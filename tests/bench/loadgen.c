/*
 * loadgen driver: mounts C connections, keeps N requests in flight over them from one poll()
 * loop, records each request's send->reply time in a fixed histogram and prints one line:
 *   RESULT workload=W ops=N seconds=T rate=R unit=U mbps=B p50_us=X p99_us=Y errors=E
 * mbps is in 10^6 bytes per second.
 */
#include "loadgen.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * libnfs keeps the handle of an open file in a private struct that nfs_get_fh() hands out; its
 * layout has been { int len; char *val; } throughout libnfs 4.x (tests/integration relies on it
 * too, and checks it against handles from MNT/LOOKUP).
 */
struct nfs_fh {
	int len;
	char *val;
};

#define LG_WARMUP_NS 500000000ull
/* generous: a 1 GiB copy-up answered by one WRITE on a busy machine */
#define LG_RPC_TIMEOUT_MS 300000
#define LG_MAX_ERROR_LINES 5

uint64_t lg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lg_fh_copy(struct lg_fh *dst, const nfs_fh3 *src)
{
	uint32_t n = src->data.data_len;

	if (n > sizeof(dst->fh_data))
		n = sizeof(dst->fh_data);
	memcpy(dst->fh_data, src->data.data_val, n);
	dst->fh_len = n;
}

nfs_fh3 lg_fh3(struct lg_fh *fh)
{
	nfs_fh3 r;

	r.data.data_len = fh->fh_len;
	r.data.data_val = fh->fh_data;
	return r;
}

/* --- errors and counting --- */

void lg_error(struct lg_run *run, const char *fmt, ...)
{
	va_list ap;

	run->r_errors++;
	if (run->r_errors > LG_MAX_ERROR_LINES) {
		if (run->r_errors == LG_MAX_ERROR_LINES + 1)
			fprintf(stderr, "loadgen: more errors; only the count is reported from now on\n");
		return;
	}
	fprintf(stderr, "loadgen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *lg_nfsstat_name(int st)
{
	switch (st) {
	case NFS3ERR_PERM: return "NFS3ERR_PERM";
	case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
	case NFS3ERR_IO: return "NFS3ERR_IO";
	case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
	case NFS3ERR_EXIST: return "NFS3ERR_EXIST";
	case NFS3ERR_NOTDIR: return "NFS3ERR_NOTDIR";
	case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
	case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
	case NFS3ERR_FBIG: return "NFS3ERR_FBIG";
	case NFS3ERR_NOSPC: return "NFS3ERR_NOSPC";
	case NFS3ERR_ROFS: return "NFS3ERR_ROFS";
	case NFS3ERR_STALE: return "NFS3ERR_STALE";
	case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
	case NFS3ERR_BAD_COOKIE: return "NFS3ERR_BAD_COOKIE";
	case NFS3ERR_NOTSUPP: return "NFS3ERR_NOTSUPP";
	case NFS3ERR_TOOSMALL: return "NFS3ERR_TOOSMALL";
	case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
	case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
	default: return "unknown status";
	}
}

void lg_nfs_error(struct lg_run *run, const char *what, int nfsstat)
{
	lg_error(run, "%s of --path %s answered %d (%s); check that the path exists with the type "
		 "the workload needs and is writable where it writes",
		 what, run->r_opt.o_path, nfsstat, lg_nfsstat_name(nfsstat));
}

int lg_counting(const struct lg_run *run)
{
	return run->r_phase == LG_MEASURE || (run->r_phase == LG_DRAIN && run->r_wl->w_count_drain);
}

void lg_count(struct lg_run *run, uint64_t ops, uint64_t bytes)
{
	if (!lg_counting(run))
		return;
	run->r_ops += ops;
	run->r_bytes += bytes;
}

/* --- latency histogram: 128 sub-buckets per power of two of nanoseconds (< 1% error) --- */

static unsigned lg_hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * LG_HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - 7u;
	return 2 * LG_HIST_SUB + (shift - 1) * LG_HIST_SUB + (unsigned)((v >> shift) - LG_HIST_SUB);
}

static double lg_hist_value(unsigned idx)
{
	unsigned shift, m;

	if (idx < 2 * LG_HIST_SUB)
		return idx;
	shift = (idx - 2 * LG_HIST_SUB) / LG_HIST_SUB + 1;
	m = (idx - 2 * LG_HIST_SUB) % LG_HIST_SUB + LG_HIST_SUB;
	return ((double)m + 0.5) * (double)(1ull << shift);
}

static double lg_hist_percentile_us(const struct lg_run *run, double p)
{
	uint64_t rank, seen = 0;
	unsigned i;

	if (!run->r_hist_n)
		return 0;
	rank = (uint64_t)(p * (double)run->r_hist_n);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < LG_HIST_BUCKETS; i++) {
		seen += run->r_hist[i];
		if (seen >= rank)
			return lg_hist_value(i) / 1000.0;
	}
	return 0;
}

/* --- request bookkeeping --- */

void lg_begin(struct lg_slot *slot)
{
	slot->s_busy = 1;
	slot->s_run->r_outstanding++;
	slot->s_sent_ns = lg_now_ns();
}

int lg_end(struct lg_slot *slot, int status, void *data, const char *what)
{
	struct lg_run *run = slot->s_run;

	slot->s_busy = 0;
	run->r_outstanding--;
	if (run->r_closing)
		return -1;
	if (slot->s_nolat)
		slot->s_nolat = 0;
	else if (lg_counting(run)) {
		uint64_t ns = lg_now_ns() - slot->s_sent_ns;

		run->r_hist[lg_hist_index(ns)]++;
		run->r_hist_n++;
		if (ns > run->r_max_ns)
			run->r_max_ns = ns;
	}
	if (status != RPC_STATUS_SUCCESS) {
		lg_error(run, "%s failed at the RPC level (%s): %s; check that the server is up and "
			 "answering on the URL's ports",
			 what, status == RPC_STATUS_TIMEOUT ? "timeout" : "error",
			 status == RPC_STATUS_ERROR && data ? (const char *)data : "no reply");
		/* the connection is in trouble: retrying at full speed only multiplies the errors */
		run->r_done = 1;
		return 0;
	}
	return 1;
}

void lg_issue_failed(struct lg_slot *slot, const char *what)
{
	struct lg_run *run = slot->s_run;

	slot->s_busy = 0;
	run->r_outstanding--;
	lg_error(run, "cannot queue %s: %s", what, rpc_get_error(slot->s_conn->c_rpc));
	run->r_done = 1;
}

void lg_set_end(struct lg_run *run)
{
	run->r_tend = lg_now_ns();
	run->r_tend_set = 1;
}

void lg_next(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;

	if (run->r_closing || run->r_done || run->r_phase == LG_DRAIN)
		return;
	run->r_wl->w_issue(slot);
}

void lg_finish(struct lg_run *run)
{
	if (!run->r_tend_set)
		lg_set_end(run);
	run->r_done = 1;
}

/* --- set-up helpers --- */

int lg_conn_wait(struct lg_conn *conn, int *flag)
{
	while (!*flag) {
		struct pollfd p = { .fd = rpc_get_fd(conn->c_rpc),
				    .events = (short)rpc_which_events(conn->c_rpc) };

		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			return -1;
		if (rpc_service(conn->c_rpc, p.revents) < 0) {
			fprintf(stderr, "loadgen: connection failed during set-up: %s\n",
				rpc_get_error(conn->c_rpc));
			return -1;
		}
	}
	return 0;
}

int lg_open_path(struct lg_run *run, int flags)
{
	int i;

	for (i = 0; i < run->r_nconns; i++) {
		struct lg_conn *c = &run->r_conns[i];
		struct nfs_fh *fh;
		/* only the first open creates/truncates; the others find the result */
		int fl = i ? (flags & ~(O_CREAT | O_TRUNC)) : flags;
		int rc = (fl & O_CREAT) ? nfs_open2(c->c_nfs, run->r_opt.o_path, fl, 0644, &c->c_file)
					: nfs_open(c->c_nfs, run->r_opt.o_path, fl, &c->c_file);

		if (rc) {
			fprintf(stderr, "loadgen: cannot open --path %s on the export: %s; create it "
				"under the exported directory first (or pass the right --path)\n",
				run->r_opt.o_path, nfs_get_error(c->c_nfs));
			return -1;
		}
		fh = nfs_get_fh(c->c_file);
		if (!fh || fh->len <= 0 || (size_t)fh->len > sizeof(c->c_fh.fh_data)) {
			fprintf(stderr, "loadgen: libnfs handed out an unusable handle for %s; this "
				"libnfs is not the 4.x loadgen was written for\n", run->r_opt.o_path);
			return -1;
		}
		memcpy(c->c_fh.fh_data, fh->val, (size_t)fh->len);
		c->c_fh.fh_len = (uint32_t)fh->len;
	}
	return 0;
}

/* --- options --- */

static void lg_usage(FILE *f)
{
	fprintf(f,
		"usage: loadgen --url URL --workload W [--inflight N] [--conns C] [--seconds S]\n"
		"               [--path P] [--count K] [--stop-file F] [--nlm-port P]\n"
		"               [--trace F] [--source A] [--pace X] [--read-only]\n"
		"  URL  nfs://127.0.0.1/EXPORT?nfsport=N&mountport=M\n"
		"  W    null getattr access lookup create read write write4k randread cwr\n"
		"       readdirplus listing opendir copyup getattr-lat lock boot\n"
		"  --inflight N  requests in flight in total (default 32; 1 for getattr-lat,\n"
		"                readdirplus, listing and copyup; copyup sends N one-byte WRITEs at\n"
		"                once)\n"
		"  --conns C     connections, each its own mount (default 1)\n"
		"  --seconds S   measured time after a 0.5 s warm-up (default 5)\n"
		"  --path P      object relative to the export root (default the root)\n"
		"  --count K     readdirplus, opendir: listings (default 1); write, write4k: wrap offsets\n"
		"                at K MiB (default 1024)\n"
		"  --stop-file F getattr-lat: stop once F exists (--seconds then defaults to 600)\n"
		"  --nlm-port P  lock: the server's NLM port (default: ask its portmapper)\n"
		"  --maxcount M  readdirplus, listing: READDIRPLUS maxcount M and dircount M/8, as the\n"
		"                Linux client sends them (default maxcount 65536, dircount 8192)\n"
		"  create: CREATEs (GUARDED, mode 0644) of new names lc-PID-N in the directory\n"
		"          --path; the files are left there\n"
		"  opendir: --count listings of --path through libnfs's own nfs_opendir (its\n"
		"           READDIRPLUS sizes, its directory cache off), one after the other;\n"
		"           the rate is entries/s\n"
		"  listing: complete READDIRPLUS listings of --path for --seconds; the rate is\n"
		"           listings/s\n"
		"  lock: NLM4 LOCK + UNLOCK pairs on --path (a file), each slot its own owner\n"
		"        (svid, owner handle) and its own 4 KiB range; the rate is pairs/s\n"
		"  boot: --conns clients each replay the netboot trace --trace F (made by\n"
		"        tests/bench/boot/record-trace) below --path, each from its own source\n"
		"        address (--source A, default 127.1.0.1, then A+1, ...) with its own MNT,\n"
		"        --inflight / --conns calls in flight (default 4 per client); --pace X:\n"
		"        the recorded gap before each call divided by X (default 1; 0: no gaps);\n"
		"        --read-only leaves out the calls that change the tree. It ends when\n"
		"        every client is through; a BOOT line precedes RESULT\n");
}

static int lg_parse_int(const char *opt, const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "loadgen: %s wants a whole number from %ld to %ld, not '%s'\n", opt,
			lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int lg_parse_opts(int argc, char **argv, struct lg_opts *o)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "workload", required_argument, NULL, 'w' },
		{ "inflight", required_argument, NULL, 'n' },
		{ "conns", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "path", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'k' },
		{ "maxcount", required_argument, NULL, 'm' },
		{ "stop-file", required_argument, NULL, 'f' },
		{ "nlm-port", required_argument, NULL, 'l' },
		{ "trace", required_argument, NULL, 't' },
		{ "source", required_argument, NULL, 'a' },
		{ "pace", required_argument, NULL, 'x' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	long v;
	char *end;

	memset(o, 0, sizeof(*o));
	o->o_conns = 1;
	o->o_seconds = 5;
	o->o_count = 1;
	o->o_path = "/";
	o->o_source = "127.1.0.1";
	o->o_pace = 1;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u': o->o_url = optarg; break;
		case 'w': o->o_workload = optarg; break;
		case 'p': o->o_path = optarg; break;
		case 'f': o->o_stop_file = optarg; break;
		case 't': o->o_trace = optarg; break;
		case 'a': o->o_source = optarg; break;
		case 'r': o->o_read_only = 1; break;
		case 'x':
			errno = 0;
			o->o_pace = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->o_pace >= 0) || o->o_pace > 1e9) {
				fprintf(stderr, "loadgen: --pace wants a factor of 0 or more, not '%s'\n",
					optarg);
				return -1;
			}
			break;
		case 'n':
			if (lg_parse_int("--inflight", optarg, 1, 4096, &v))
				return -1;
			o->o_inflight = (int)v;
			o->o_inflight_set = 1;
			break;
		case 'l':
			if (lg_parse_int("--nlm-port", optarg, 1, 65535, &v))
				return -1;
			o->o_nlm_port = (int)v;
			break;
		case 'c':
			if (lg_parse_int("--conns", optarg, 1, 1024, &v))
				return -1;
			o->o_conns = (int)v;
			break;
		case 'k':
			if (lg_parse_int("--count", optarg, 1, 1000000000L, &v))
				return -1;
			o->o_count = v;
			o->o_count_set = 1;
			break;
		case 'm':
			if (lg_parse_int("--maxcount", optarg, 1024, 1L << 20, &v))
				return -1;
			o->o_maxcount = v;
			break;
		case 's':
			errno = 0;
			o->o_seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->o_seconds > 0) ||
			    o->o_seconds > 86400) {
				fprintf(stderr, "loadgen: --seconds wants a number of seconds above 0 "
					"(up to 86400), not '%s'\n", optarg);
				return -1;
			}
			o->o_seconds_set = 1;
			break;
		case 'h': lg_usage(stdout); exit(0);
		default: lg_usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loadgen: unexpected argument '%s'; every setting is an option\n",
			argv[optind]);
		return -1;
	}
	if (!o->o_url || !o->o_workload) {
		fprintf(stderr, "loadgen: --url and --workload are required\n");
		lg_usage(stderr);
		return -1;
	}
	return 0;
}

/* --- connections --- */

static int lg_mount_all(struct lg_run *run)
{
	int i;

	run->r_conns = calloc((size_t)run->r_nconns, sizeof(*run->r_conns));
	if (!run->r_conns)
		return -1;
	for (i = 0; i < run->r_nconns; i++) {
		struct lg_conn *c = &run->r_conns[i];
		struct nfs_url *u;

		c->c_nfs = nfs_init_context();
		if (!c->c_nfs) {
			fprintf(stderr, "loadgen: nfs_init_context failed (out of memory?)\n");
			return -1;
		}
		u = nfs_parse_url_dir(c->c_nfs, run->r_opt.o_url);
		if (!u) {
			fprintf(stderr, "loadgen: cannot parse --url %s: %s; the form is "
				"nfs://127.0.0.1/EXPORT?nfsport=N&mountport=M\n",
				run->r_opt.o_url, nfs_get_error(c->c_nfs));
			return -1;
		}
		nfs_set_timeout(c->c_nfs, LG_RPC_TIMEOUT_MS);
		if (nfs_mount(c->c_nfs, u->server, u->path)) {
			fprintf(stderr, "loadgen: cannot mount %s (connection %d): %s; check that the "
				"server runs and exports that path to this host\n",
				run->r_opt.o_url, i + 1, nfs_get_error(c->c_nfs));
			nfs_destroy_url(u);
			return -1;
		}
		if (!run->r_server && !(run->r_server = strdup(u->server))) {
			nfs_destroy_url(u);
			return -1;
		}
		nfs_destroy_url(u);
		c->c_rpc = nfs_get_rpc_context(c->c_nfs);
	}
	return 0;
}

static void lg_unmount_all(struct lg_run *run)
{
	int i;

	if (!run->r_conns)
		return;
	/* callbacks of requests still queued run during destroy and must do nothing */
	run->r_closing = 1;
	for (i = 0; i < run->r_nconns; i++) {
		struct lg_conn *c = &run->r_conns[i];

		lg_lock_close(c);
		if (c->c_own)
			rpc_destroy_context(c->c_own);
		if (c->c_file)
			nfs_close(c->c_nfs, c->c_file);
		if (c->c_nfs)
			nfs_destroy_context(c->c_nfs);
	}
	free(run->r_conns);
	run->r_conns = NULL;
	free(run->r_server);
	run->r_server = NULL;
}

/* --- the loop --- */

static int lg_loop(struct lg_run *run)
{
	struct pollfd *pfd = calloc((size_t)run->r_nconns, sizeof(*pfd));
	uint64_t start = lg_now_ns(), last_sweep = start, last_stop_check = 0;
	uint64_t limit_ns = (uint64_t)(run->r_opt.o_seconds * 1e9);
	int i, rc = 0;

	if (!pfd)
		return -1;
	if (run->r_wl->w_fixed) {
		run->r_phase = LG_MEASURE;
		run->r_t0 = start;
	} else {
		run->r_phase = LG_WARMUP;
	}
	for (i = 0; i < run->r_nslots; i++)
		lg_next(&run->r_slots[i]);
	for (;;) {
		uint64_t now = lg_now_ns();
		int stop = 0, n;

		if (run->r_phase == LG_WARMUP && now - start >= LG_WARMUP_NS) {
			run->r_phase = LG_MEASURE;
			run->r_t0 = now;
		}
		if (run->r_phase == LG_MEASURE && !run->r_wl->w_fixed && now - run->r_t0 >= limit_ns)
			stop = 1;
		if (run->r_opt.o_stop_file && now - last_stop_check >= 10000000ull) {
			last_stop_check = now;
			if (access(run->r_opt.o_stop_file, F_OK) == 0)
				stop = 1;
		}
		if (run->r_done)
			stop = 1;
		if (stop && run->r_phase != LG_DRAIN) {
			if (run->r_phase == LG_WARMUP)
				run->r_t0 = now;
			run->r_phase = LG_DRAIN;
			if (!run->r_tend_set)
				lg_set_end(run);
		}
		if (run->r_phase == LG_DRAIN && run->r_outstanding == 0)
			break;

		for (i = 0; i < run->r_nconns; i++) {
			pfd[i].fd = rpc_get_fd(run->r_conns[i].c_rpc);
			pfd[i].events = (short)rpc_which_events(run->r_conns[i].c_rpc);
			pfd[i].revents = 0;
		}
		{
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };

			if (run->r_wl->w_tick) {
				uint64_t next = run->r_wl->w_tick(run, lg_now_ns());
				uint64_t t = lg_now_ns();

				if (next && next - t < (uint64_t)ts.tv_nsec)
					ts.tv_nsec = next > t ? (long)(next - t) : 0;
			}
			n = ppoll(pfd, (nfds_t)run->r_nconns, &ts, NULL);
		}
		if (n < 0 && errno != EINTR) {
			lg_error(run, "poll failed: %s", strerror(errno));
			rc = -1;
			break;
		}
		now = lg_now_ns();
		/* rpc_service with no events only scans for timeouts: a few times a second is enough */
		int sweep = now - last_sweep >= 100000000ull;

		if (sweep)
			last_sweep = now;
		for (i = 0; i < run->r_nconns; i++) {
			if (!pfd[i].revents && !sweep)
				continue;
			if (rpc_service(run->r_conns[i].c_rpc, pfd[i].revents) < 0) {
				lg_error(run, "connection %d failed: %s; check the server's log", i + 1,
					 rpc_get_error(run->r_conns[i].c_rpc));
				rc = -1;
				break;
			}
		}
		if (rc)
			break;
	}
	free(pfd);
	if (!run->r_tend_set)
		lg_set_end(run);
	return rc;
}

static void lg_print_result(const struct lg_run *run)
{
	double secs = run->r_tend > run->r_t0 ? (double)(run->r_tend - run->r_t0) / 1e9 : 0;
	double rate = secs > 0 ? (double)run->r_ops / secs : 0;
	double mbps = run->r_wl->w_data && secs > 0 ? (double)run->r_bytes / secs / 1e6 : 0;

	printf("RESULT workload=%s ops=%llu seconds=%.4f rate=%.2f unit=%s mbps=%.1f p50_us=%.1f "
	       "p99_us=%.1f max_us=%.1f errors=%llu\n",
	       run->r_wl->w_name, (unsigned long long)run->r_ops, secs, rate, run->r_wl->w_unit, mbps,
	       lg_hist_percentile_us(run, 0.50), lg_hist_percentile_us(run, 0.99),
	       (double)run->r_max_ns / 1000.0, (unsigned long long)run->r_errors);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct lg_run run;
	char *path = NULL;
	int i, rc = 1, failed = 1;

	memset(&run, 0, sizeof(run));
	/* a server that closes the connection must show up as an error, not kill us */
	signal(SIGPIPE, SIG_IGN);
	if (lg_parse_opts(argc, argv, &run.r_opt))
		return 2;
	run.r_wl = lg_workload_find(run.r_opt.o_workload);
	if (!run.r_wl) {
		fprintf(stderr, "loadgen: unknown --workload %s; one of null getattr access lookup "
			"create read write write4k randread cwr readdirplus listing opendir copyup getattr-lat lock boot\n",
			run.r_opt.o_workload);
		return 2;
	}
	/* libnfs resolves paths from the mount root, which it wants with a leading slash */
	if (run.r_opt.o_path[0] != '/') {
		if (asprintf(&path, "/%s", run.r_opt.o_path) < 0)
			return 1;
		run.r_opt.o_path = path;
	}
	if (run.r_opt.o_stop_file && !run.r_opt.o_seconds_set)
		run.r_opt.o_seconds = 600;
	if (!run.r_opt.o_inflight_set) {
		run.r_opt.o_inflight = run.r_wl->w_inflight_per_conn
					       ? run.r_wl->w_inflight_per_conn * run.r_opt.o_conns
					       : run.r_wl->w_default_inflight;
		if (run.r_opt.o_inflight > 1 && run.r_opt.o_inflight < run.r_opt.o_conns)
			run.r_opt.o_inflight = run.r_opt.o_conns;
	}
	if (run.r_opt.o_inflight < run.r_opt.o_conns && !run.r_wl->w_fixed)
		fprintf(stderr, "loadgen: --inflight %d below --conns %d leaves connections idle\n",
			run.r_opt.o_inflight, run.r_opt.o_conns);
	run.r_nconns = run.r_opt.o_conns;
	run.r_nslots = run.r_opt.o_inflight;
	run.r_rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() ^ lg_now_ns();
	run.r_hist = calloc(LG_HIST_BUCKETS, sizeof(*run.r_hist));
	run.r_slots = calloc((size_t)run.r_nslots, sizeof(*run.r_slots));
	if (!run.r_hist || !run.r_slots) {
		fprintf(stderr, "loadgen: out of memory\n");
		goto out;
	}
	if (run.r_wl->w_connect ? run.r_wl->w_connect(&run) : lg_mount_all(&run))
		goto out;
	for (i = 0; i < run.r_nslots; i++) {
		run.r_slots[i].s_run = &run;
		run.r_slots[i].s_index = (unsigned)i;
		run.r_slots[i].s_conn = &run.r_conns[i % run.r_nconns];
	}
	if (run.r_wl->w_prepare && run.r_wl->w_prepare(&run))
		goto out;
	failed = lg_loop(&run) != 0;
	if (run.r_wl->w_report)
		run.r_wl->w_report(&run);
out:
	/* set-up failures too get their RESULT line, so a script sees errors, not silence */
	if (run.r_wl) {
		if (failed && !run.r_errors)
			run.r_errors = 1;
		lg_print_result(&run);
		rc = run.r_errors ? 1 : 0;
	}
	lg_unmount_all(&run);
	lg_workload_free(&run);
	free(run.r_slots);
	free(run.r_hist);
	free(path);
	return rc;
}
