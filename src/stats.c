/*
 * Server statistics (include/stats.h): relaxed atomics in static storage, fed by one-line
 * hooks in the dispatcher, the copy-up and the whiteout code, read by the control socket.
 * What a program is called, what its procedures are called and what its results say
 * come from its table (rpc.h): nothing here knows one program from another.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_ctx.h"
#include "rpc.h"
#include "stats.h"

#define STATS_CLIENT_CHAINS 1024u
/* Counters of the registered programs by their index (rpc_program_find), then of all others. */
#define STATS_SLOT_OTHER RPC_MAX_PROGRAMS
#define STATS_SLOTS (RPC_MAX_PROGRAMS + 1)

struct stats_counters {
	atomic_uint_fast64_t sc_calls;
	atomic_uint_fast64_t sc_errors;
	atomic_uint_fast64_t sc_stale;
	atomic_uint_fast64_t sc_ns;
	atomic_uint_fast64_t sc_hist[STATS_BUCKETS];
};

/* Insert-only: an entry, once published in its chain, lives until stats_reset(). */
struct stats_client_ent {
	_Atomic(struct stats_client_ent *) ce_next;
	uint8_t ce_addr[16];                   /* IPv6, IPv4 as ::ffff:a.b.c.d */
	atomic_llong ce_first;
	atomic_llong ce_last;
	atomic_uint_fast64_t ce_calls;
	atomic_uint_fast64_t ce_bytes;
};

static struct stats_counters stats_procs[STATS_SLOTS][STATS_MAX_PROCS];
static atomic_uint_fast64_t stats_rejected, stats_req_bytes, stats_reply_bytes;
static atomic_uint_fast64_t stats_copyups, stats_whiteouts, stats_clients_dropped;
static atomic_uint_fast64_t stats_copyup_joins, stats_copyup_queues;
static atomic_uint_fast64_t stats_stale_by[STATS_STALE_NCAUSES];
/* The cause marked by this thread's current call; cleared when the call is counted. */
static const char *const stats_stale_names[STATS_STALE_NCAUSES] = {
	[STATS_STALE_OBJECT_GONE] = "object_gone",
	[STATS_STALE_NO_RECORD] = "no_record",
	[STATS_STALE_UNKNOWN_EXPORT] = "unknown_export",
	[STATS_STALE_VIEW_UNAVAILABLE] = "view_unavailable",
};
static _Atomic(struct stats_client_ent *) stats_chains[STATS_CLIENT_CHAINS];
static atomic_uint stats_nclients;
/* Only inserts take it: two first calls of one new client must not make two entries. */
static pthread_mutex_t stats_insert_lock = PTHREAD_MUTEX_INITIALIZER;

#define ADD(c, v) atomic_fetch_add_explicit(&(c), (v), memory_order_relaxed)
#define GET(c) atomic_load_explicit(&(c), memory_order_relaxed)

uint64_t stats_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

unsigned stats_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b;

	if (us == 0)
		return 0;
	b = 64u - (unsigned)__builtin_clzll(us);
	return b < STATS_BUCKETS ? b : STATS_BUCKETS - 1;
}

uint64_t stats_percentile(const uint64_t hist[STATS_BUCKETS], unsigned p)
{
	uint64_t n = 0, rank, seen = 0;
	unsigned b;

	for (b = 0; b < STATS_BUCKETS; b++)
		n += hist[b];
	if (n == 0 || p == 0)
		return 0;
	if (p > 100)
		p = 100;
	/* The smallest value at or above p percent of the calls: rank ceil(n * p / 100). */
	rank = (n / 100) * p + ((n % 100) * p + 99) / 100;
	if (rank == 0)
		rank = 1;
	for (b = 0; b < STATS_BUCKETS; b++) {
		seen += hist[b];
		if (seen >= rank)
			break;
	}
	if (b >= STATS_BUCKETS)
		b = STATS_BUCKETS - 1;
	return (uint64_t)1 << b;
}

static unsigned stats_slot(uint32_t prog)
{
	int i;

	return rpc_program_find(prog, &i) != NULL ? (unsigned)i : STATS_SLOT_OTHER;
}

/* Whether a report shows slot's counters: a registered program's, or the others'. */
static bool stats_slot_shown(unsigned slot)
{
	return slot == STATS_SLOT_OTHER || (int)slot < rpc_program_count();
}

static const char *stats_slot_name(unsigned slot)
{
	const struct rpc_program *pg = rpc_program_at((int)slot);

	return pg != NULL && pg->rg_name != NULL ? pg->rg_name : "other";
}

static const char *stats_slot_proc_name(unsigned slot, unsigned proc)
{
	const struct rpc_program *pg = rpc_program_at((int)slot);

	return pg != NULL ? rpc_proc_name(pg, proc) : NULL;
}


/* The peer as 16 address bytes; false for anything but IPv4 and IPv6. */
static bool stats_key(const struct sockaddr *sa, socklen_t len, uint8_t key[16])
{
	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		memset(key, 0, 10);
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &in->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

static unsigned stats_hash(const uint8_t key[16])
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % STATS_CLIENT_CHAINS;
}

static struct stats_client_ent *stats_find(struct stats_client_ent *e, const uint8_t key[16])
{
	for (; e != NULL; e = atomic_load_explicit(&e->ce_next, memory_order_acquire))
		if (memcmp(e->ce_addr, key, 16) == 0)
			return e;
	return NULL;
}

static void stats_seen(const struct sockaddr *peer, socklen_t peerlen, uint64_t bytes)
{
	struct stats_client_ent *head, *e;
	uint8_t key[16];
	unsigned h;
	time_t now;

	if (!stats_key(peer, peerlen, key))
		return;
	h = stats_hash(key);
	head = atomic_load_explicit(&stats_chains[h], memory_order_acquire);
	e = stats_find(head, key);
	now = time(NULL);
	if (e == NULL) {
		pthread_mutex_lock(&stats_insert_lock);
		head = atomic_load_explicit(&stats_chains[h], memory_order_acquire);
		e = stats_find(head, key);
		if (e == NULL && atomic_load(&stats_nclients) < STATS_MAX_CLIENTS &&
		    (e = calloc(1, sizeof(*e))) != NULL) {
			memcpy(e->ce_addr, key, 16);
			atomic_init(&e->ce_first, (long long)now);
			atomic_init(&e->ce_next, head);
			atomic_fetch_add(&stats_nclients, 1);
			atomic_store_explicit(&stats_chains[h], e, memory_order_release);
		}
		pthread_mutex_unlock(&stats_insert_lock);
		if (e == NULL) {
			ADD(stats_clients_dropped, 1);
			return;
		}
	}
	atomic_store_explicit(&e->ce_last, (long long)now, memory_order_relaxed);
	ADD(e->ce_calls, 1);
	ADD(e->ce_bytes, bytes);
}

void stats_call(const struct rpc_call *call, uint64_t t0, size_t reqlen, size_t replylen,
		const struct sockaddr *peer, socklen_t peerlen, const void *res)
{
	const struct rpc_program *pg;
	struct stats_counters *c;
	enum rpc_status status;
	unsigned slot;
	int i;
	uint64_t ns = stats_clock() - t0;
	unsigned mark = call_ctx()->cc_stale_mark;

	call_ctx()->cc_stale_mark = 0; /* taken by its count: a mark is about one reply */
	ADD(stats_req_bytes, reqlen);
	ADD(stats_reply_bytes, replylen);
	stats_seen(peer, peerlen, (uint64_t)reqlen + replylen);
	if (call == NULL) {
		ADD(stats_rejected, 1);
		return;
	}
	pg = rpc_program_find(call->rc_prog, &i);
	slot = pg != NULL ? (unsigned)i : STATS_SLOT_OTHER;
	c = &stats_procs[slot][call->rc_proc < STATS_MAX_PROCS ? call->rc_proc : STATS_MAX_PROCS - 1];
	ADD(c->sc_calls, 1);
	ADD(c->sc_ns, ns);
	ADD(c->sc_hist[stats_bucket(ns)], 1);
	/* res: the result of a reply accepted with SUCCESS, which its program can read */
	if (res != NULL && pg != NULL && pg->rg_status != NULL &&
	    (status = pg->rg_status(call->rc_vers, call->rc_proc, res)) != RPC_STATUS_OK) {
		ADD(c->sc_errors, 1);
		if (status == RPC_STATUS_STALE) {
			ADD(c->sc_stale, 1);
			/* Unmarked STALE comes from the union layer: the object is not as recorded. */
			ADD(stats_stale_by[mark > 0 ? mark - 1 : STATS_STALE_OBJECT_GONE], 1);
		}
	}
}

int stats_stale(int err, enum stats_stale_cause cause)
{
	if ((unsigned)cause < STATS_STALE_NCAUSES)
		call_ctx()->cc_stale_mark = (uint8_t)(cause + 1);
	return err;
}

const char *stats_stale_cause_name(enum stats_stale_cause cause)
{
	return (unsigned)cause < STATS_STALE_NCAUSES ? stats_stale_names[cause] : "unknown";
}

int stats_copyup(int r)
{
	if (r == 0)
		ADD(stats_copyups, 1);
	return r;
}

void stats_copyup_join(void)
{
	ADD(stats_copyup_joins, 1);
}

void stats_copyup_queued(void)
{
	ADD(stats_copyup_queues, 1);
}

int stats_whiteout(int r)
{
	if (r == 0)
		ADD(stats_whiteouts, 1);
	return r;
}

static void stats_slot_get(unsigned slot, unsigned proc, struct stats_proc *out)
{
	struct stats_counters *c;

	memset(out, 0, sizeof(*out));
	if (slot >= STATS_SLOTS || proc >= STATS_MAX_PROCS)
		return;
	c = &stats_procs[slot][proc];
	out->sp_calls = GET(c->sc_calls);
	out->sp_errors = GET(c->sc_errors);
	out->sp_stale = GET(c->sc_stale);
	out->sp_ns = GET(c->sc_ns);
	for (unsigned b = 0; b < STATS_BUCKETS; b++)
		out->sp_hist[b] = GET(c->sc_hist[b]);
}

void stats_proc_get(uint32_t prog, unsigned proc, struct stats_proc *out)
{
	stats_slot_get(stats_slot(prog), proc, out);
}

void stats_totals_get(struct stats_totals *out)
{
	struct stats_proc sp;

	memset(out, 0, sizeof(*out));
	for (unsigned p = 0; p < STATS_SLOTS; p++) {
		for (unsigned i = 0; i < STATS_MAX_PROCS; i++) {
			stats_slot_get(p, i, &sp);
			out->st_calls += sp.sp_calls;
			out->st_stale += sp.sp_stale;
		}
	}
	out->st_rejected = GET(stats_rejected);
	out->st_req_bytes = GET(stats_req_bytes);
	out->st_reply_bytes = GET(stats_reply_bytes);
	out->st_copyups = GET(stats_copyups);
	out->st_copyup_joins = GET(stats_copyup_joins);
	out->st_copyup_queued = GET(stats_copyup_queues);
	out->st_whiteouts = GET(stats_whiteouts);
	out->st_clients_dropped = GET(stats_clients_dropped);
	for (unsigned k = 0; k < STATS_STALE_NCAUSES; k++)
		out->st_stale_by[k] = GET(stats_stale_by[k]);
}

const char *stats_proc_name(uint32_t prog, unsigned proc)
{
	return stats_slot_proc_name(stats_slot(prog), proc);
}

void stats_clients_each(bool (*fn)(const struct stats_client *c, void *arg), void *arg)
{
	struct stats_client_ent *e;
	struct stats_client c;
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };

	for (unsigned h = 0; h < STATS_CLIENT_CHAINS; h++) {
		for (e = atomic_load_explicit(&stats_chains[h], memory_order_acquire); e != NULL;
		     e = atomic_load_explicit(&e->ce_next, memory_order_acquire)) {
			memset(&c, 0, sizeof(c));
			memcpy(&a6.sin6_addr, e->ce_addr, sizeof(a6.sin6_addr));
			rpc_addr_text((const struct sockaddr *)&a6, sizeof(a6), c.sc_addr,
				      sizeof(c.sc_addr));
			c.sc_first = (time_t)atomic_load_explicit(&e->ce_first, memory_order_relaxed);
			c.sc_last = (time_t)atomic_load_explicit(&e->ce_last, memory_order_relaxed);
			c.sc_calls = GET(e->ce_calls);
			c.sc_bytes = GET(e->ce_bytes);
			if (!fn(&c, arg))
				return;
		}
	}
}

int stats_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	size_t need;
	char *nb;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if (*buf && (size_t)n < *cap - *len) {
			*len += (size_t)n;
			return 0;
		}
		need = *len + (size_t)n + 1;
		if (need < 2 * *cap)
			need = 2 * *cap;
		if (need < 1024)
			need = 1024;
		nb = realloc(*buf, need);
		if (nb == NULL)
			return -ENOMEM;
		*buf = nb;
		*cap = need;
	}
}

int stats_report(char **buf, size_t *len, size_t *cap)
{
	struct stats_totals t;
	struct stats_proc sp;
	const char *name;
	char num[16];
	int r;

	stats_totals_get(&t);
	r = stats_appendf(buf, len, cap,
			  "calls %llu (rejected before a procedure: %llu)\n"
			  "bytes received %llu, sent %llu\n"
			  "copy-ups %llu, whiteouts made %llu, STALE replies %llu\n"
			  "copy-up waits: same file %llu, free place %llu\n",
			  (unsigned long long)t.st_calls, (unsigned long long)t.st_rejected,
			  (unsigned long long)t.st_req_bytes, (unsigned long long)t.st_reply_bytes,
			  (unsigned long long)t.st_copyups, (unsigned long long)t.st_whiteouts,
			  (unsigned long long)t.st_stale, (unsigned long long)t.st_copyup_joins,
			  (unsigned long long)t.st_copyup_queued);
	if (r == 0 && t.st_stale > 0) {
		r = stats_appendf(buf, len, cap, "STALE replies by cause:");
		for (unsigned k = 0; r == 0 && k < STATS_STALE_NCAUSES; k++)
			r = stats_appendf(buf, len, cap, " %s %llu", stats_stale_names[k],
					  (unsigned long long)t.st_stale_by[k]);
		if (r == 0)
			r = stats_appendf(buf, len, cap, "\n");
	}
	if (r == 0 && t.st_clients_dropped > 0)
		r = stats_appendf(buf, len, cap,
				  "calls from clients beyond the first %d addresses (not in `clients`): %llu\n",
				  STATS_MAX_CLIENTS, (unsigned long long)t.st_clients_dropped);
	if (r == 0)
		r = stats_appendf(buf, len, cap, "%-8s %-12s %10s %8s %8s %9s %9s %9s %9s\n",
				  "program", "procedure", "calls", "errors", "stale", "avg_us",
				  "p50_us", "p90_us", "p99_us");
	for (unsigned p = 0; r == 0 && p < STATS_SLOTS; p++) {
		for (unsigned i = 0; r == 0 && stats_slot_shown(p) && i < STATS_MAX_PROCS; i++) {
			stats_slot_get(p, i, &sp);
			if (sp.sp_calls == 0)
				continue;
			name = stats_slot_proc_name(p, i);
			if (name == NULL) {
				snprintf(num, sizeof(num), "%s%u", i == STATS_MAX_PROCS - 1 ? ">=" : "#", i);
				name = num;
			}
			r = stats_appendf(buf, len, cap,
					  "%-8s %-12s %10llu %8llu %8llu %9llu %9llu %9llu %9llu\n",
					  stats_slot_name(p), name,
					  (unsigned long long)sp.sp_calls,
					  (unsigned long long)sp.sp_errors,
					  (unsigned long long)sp.sp_stale,
					  (unsigned long long)(sp.sp_ns / sp.sp_calls / 1000),
					  (unsigned long long)stats_percentile(sp.sp_hist, 50),
					  (unsigned long long)stats_percentile(sp.sp_hist, 90),
					  (unsigned long long)stats_percentile(sp.sp_hist, 99));
		}
	}
	return r;
}

/* A procedure's label value: its name, or its number when it has none. */
static const char *stats_prom_procedure(unsigned slot, unsigned proc, char num[16])
{
	const char *name = stats_slot_proc_name(slot, proc);

	if (name)
		return name;
	snprintf(num, 16, "%u", proc);
	return num;
}

/* Counter families per procedure: name, help, and which figure of stats_proc. */
static int stats_prom_family(char **buf, size_t *len, size_t *cap, const char *name,
			     const char *help, size_t field)
{
	struct stats_proc sp;
	const char *pname;
	char num[16];
	int r;

	r = stats_appendf(buf, len, cap, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (unsigned p = 0; r == 0 && p < STATS_SLOTS; p++) {
		for (unsigned i = 0; r == 0 && stats_slot_shown(p) && i < STATS_MAX_PROCS; i++) {
			stats_slot_get(p, i, &sp);
			if (sp.sp_calls == 0)
				continue;
			pname = stats_prom_procedure(p, i, num);
			r = stats_appendf(buf, len, cap, "%s{program=\"%s\",procedure=\"%s\"} %llu\n", name,
					  stats_slot_name(p), pname,
					  (unsigned long long)*(const uint64_t *)(const void *)((const char *)&sp + field));
		}
	}
	return r;
}

static int stats_prom_histograms(char **buf, size_t *len, size_t *cap)
{
	static const char name[] = "unionnfsd_call_duration_seconds";
	struct stats_proc sp;
	const char *pname;
	char num[16];
	uint64_t cum;
	int r;

	r = stats_appendf(buf, len, cap,
			  "# HELP %s Time from a call's arrival at a worker to its encoded reply.\n"
			  "# TYPE %s histogram\n", name, name);
	for (unsigned p = 0; r == 0 && p < STATS_SLOTS; p++) {
		for (unsigned i = 0; r == 0 && stats_slot_shown(p) && i < STATS_MAX_PROCS; i++) {
			stats_slot_get(p, i, &sp);
			if (sp.sp_calls == 0)
				continue;
			pname = stats_prom_procedure(p, i, num);
			cum = 0;
			/* Bucket b holds calls under 2^b us: the "le" bound of bucket b. */
			for (unsigned b = 0; r == 0 && b < STATS_BUCKETS - 1; b++) {
				cum += sp.sp_hist[b];
				r = stats_appendf(buf, len, cap,
						  "%s_bucket{program=\"%s\",procedure=\"%s\",le=\"%g\"} %llu\n",
						  name, stats_slot_name(p), pname,
						  (double)((uint64_t)1 << b) / 1e6, (unsigned long long)cum);
			}
			if (r == 0)
				r = stats_appendf(buf, len, cap,
						  "%s_bucket{program=\"%s\",procedure=\"%s\",le=\"+Inf\"} %llu\n"
						  "%s_sum{program=\"%s\",procedure=\"%s\"} %.9f\n"
						  "%s_count{program=\"%s\",procedure=\"%s\"} %llu\n",
						  name, stats_slot_name(p), pname,
						  (unsigned long long)sp.sp_calls,
						  name, stats_slot_name(p), pname,
						  (double)sp.sp_ns / 1e9,
						  name, stats_slot_name(p), pname,
						  (unsigned long long)sp.sp_calls);
		}
	}
	return r;
}

int stats_prometheus(char **buf, size_t *len, size_t *cap)
{
	struct stats_totals t;
	int r;

	r = stats_prom_family(buf, len, cap, "unionnfsd_calls_total",
			      "RPC calls served, by program and procedure.",
			      offsetof(struct stats_proc, sp_calls));
	if (r == 0)
		r = stats_prom_family(buf, len, cap, "unionnfsd_call_errors_total",
				      "Replies whose program's own status says the call failed (NFS: "
				      "not NFS3_OK; NLM: NLM4_DENIED_NOLOCKS, NLM4_FAILED, ..., not a "
				      "lock refused for a conflict), by program and procedure.",
				      offsetof(struct stats_proc, sp_errors));
	if (r == 0)
		r = stats_prom_family(buf, len, cap, "unionnfsd_stale_replies_total",
				      "Replies refusing a file handle that names nothing (NFS3ERR_STALE, "
				      "NLM4_STALE_FH), by program and procedure.",
				      offsetof(struct stats_proc, sp_stale));
	if (r == 0)
		r = stats_prom_histograms(buf, len, cap);
	stats_totals_get(&t);
#define STATS_PROM_TOTAL(n, h, v) \
	do { \
		if (r == 0) \
			r = stats_appendf(buf, len, cap, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", \
					  n, h, n, n, (unsigned long long)(v)); \
	} while (0)
	STATS_PROM_TOTAL("unionnfsd_rejected_calls_total",
			 "Records answered without reaching a procedure.", t.st_rejected);
	STATS_PROM_TOTAL("unionnfsd_request_bytes_total", "Bytes of RPC records received.",
			 t.st_req_bytes);
	STATS_PROM_TOTAL("unionnfsd_reply_bytes_total", "Bytes of RPC replies sent.",
			 t.st_reply_bytes);
	STATS_PROM_TOTAL("unionnfsd_copyups_total", "Files copied up to the writable branch.",
			 t.st_copyups);
	STATS_PROM_TOTAL("unionnfsd_copyup_joins_total",
			 "Calls that waited for a copy-up of the same file instead of copying it too.",
			 t.st_copyup_joins);
	STATS_PROM_TOTAL("unionnfsd_copyup_queued_total",
			 "Copy-ups that waited for a place among the large copy-ups allowed at once.",
			 t.st_copyup_queued);
	STATS_PROM_TOTAL("unionnfsd_whiteouts_total", "Whiteouts made.", t.st_whiteouts);
#undef STATS_PROM_TOTAL
	if (r == 0)
		r = stats_appendf(buf, len, cap,
				  "# HELP unionnfsd_stale_replies_by_cause_total NFS3ERR_STALE replies, by why the handle is stale.\n"
				  "# TYPE unionnfsd_stale_replies_by_cause_total counter\n");
	for (unsigned k = 0; r == 0 && k < STATS_STALE_NCAUSES; k++)
		r = stats_appendf(buf, len, cap,
				  "unionnfsd_stale_replies_by_cause_total{cause=\"%s\"} %llu\n",
				  stats_stale_names[k], (unsigned long long)t.st_stale_by[k]);
	return r;
}

void stats_reset(void)
{
	struct stats_client_ent *e, *next;

	memset(stats_procs, 0, sizeof(stats_procs));
	atomic_store(&stats_rejected, 0);
	atomic_store(&stats_req_bytes, 0);
	atomic_store(&stats_reply_bytes, 0);
	atomic_store(&stats_copyups, 0);
	atomic_store(&stats_copyup_joins, 0);
	atomic_store(&stats_copyup_queues, 0);
	atomic_store(&stats_whiteouts, 0);
	atomic_store(&stats_clients_dropped, 0);
	for (unsigned k = 0; k < STATS_STALE_NCAUSES; k++)
		atomic_store(&stats_stale_by[k], 0);
	for (unsigned h = 0; h < STATS_CLIENT_CHAINS; h++) {
		for (e = atomic_exchange(&stats_chains[h], NULL); e != NULL; e = next) {
			next = atomic_load(&e->ce_next);
			free(e);
		}
	}
	atomic_store(&stats_nclients, 0);
}
