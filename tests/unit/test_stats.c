/*
 * Statistics (src/stats.c): bucketing, percentiles, the per-procedure and client
 * figures of the call hook, NFS error and STALE counting from the result, and counts
 * that stay exact when several threads count at once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nfs.h"
#include "portmap.h"
#include "rpc.h"
#include "stats.h"

#define T_THREADS 4
#define T_PER_THREAD 20000
#define T_NFS 100003u
#define T_MOUNT 100005u

/* The server's programs, registered as main does: the statistics name and read them. */
static int t_setup(void **state)
{
	static const struct rpc_program *const programs[] = {
		&nfs3_program, &mount_program, &portmap_program,
	};

	(void)state;
	rpc_dispatch_init(programs, 3, NULL);
	stats_reset();
	return 0;
}

static void test_buckets(void **state)
{
	(void)state;
	assert_int_equal(stats_bucket(0), 0);
	assert_int_equal(stats_bucket(999), 0);
	assert_int_equal(stats_bucket(1000), 1);      /* 1 us: [1, 2) */
	assert_int_equal(stats_bucket(1999), 1);
	assert_int_equal(stats_bucket(2000), 2);
	assert_int_equal(stats_bucket(1000000), 10);  /* 1 ms: [512, 1024) us */
	assert_int_equal(stats_bucket(UINT64_MAX), STATS_BUCKETS - 1);
}

static void test_percentiles(void **state)
{
	uint64_t h[STATS_BUCKETS] = { 0 };

	(void)state;
	assert_int_equal(stats_percentile(h, 50), 0);
	/* 90 calls of about 3 us, 9 of about 100 us, one of about 5 ms. */
	h[stats_bucket(3000)] = 90;
	h[stats_bucket(100000)] = 9;
	h[stats_bucket(5000000)] = 1;
	assert_int_equal(stats_percentile(h, 50), 4);
	assert_int_equal(stats_percentile(h, 90), 4);
	assert_int_equal(stats_percentile(h, 91), 128);
	assert_int_equal(stats_percentile(h, 99), 128);
	assert_int_equal(stats_percentile(h, 100), 8192);
	/* One call: every percentile is its bucket. */
	memset(h, 0, sizeof(h));
	h[0] = 1;
	assert_int_equal(stats_percentile(h, 1), 1);
	assert_int_equal(stats_percentile(h, 99), 1);
}

static void t_peer(struct sockaddr_in *sin, const char *addr, int port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, addr, &sin->sin_addr);
}

struct t_seen {
	int ts_n;
	uint64_t ts_calls;
	char ts_addr[64];
};

static bool t_client(const struct stats_client *c, void *arg)
{
	struct t_seen *s = arg;

	s->ts_n++;
	s->ts_calls += c->sc_calls;
	strcpy(s->ts_addr, c->sc_addr);
	return true;
}

static void test_call_hook(void **state)
{
	struct rpc_call call = { .rc_prog = 100003, .rc_vers = 3, .rc_proc = 1 };
	uint32_t ok = 0, stale = 70, noent = 2;
	struct sockaddr_in a, b;
	struct stats_totals t;
	struct stats_proc sp;
	struct t_seen seen = { 0 };
	char *buf = NULL;
	size_t len = 0, cap = 0;

	(void)state;
	t_peer(&a, "192.0.2.7", 700);
	t_peer(&b, "192.0.2.7", 901);  /* same client, another port */
	stats_call(&call, stats_clock(), 100, 120, (struct sockaddr *)&a, sizeof(a), &ok);
	stats_call(&call, stats_clock(), 100, 40, (struct sockaddr *)&b, sizeof(b), &stale);
	stats_call(&call, stats_clock(), 100, 40, (struct sockaddr *)&a, sizeof(a), &noent);
	stats_call(&call, stats_clock(), 100, 40, (struct sockaddr *)&a, sizeof(a), NULL);
	stats_call(NULL, stats_clock(), 10, 24, (struct sockaddr *)&a, sizeof(a), NULL);
	assert_int_equal(stats_copyup(0), 0);
	assert_int_equal(stats_copyup(-5), -5);
	assert_int_equal(stats_whiteout(0), 0);
	assert_int_equal(stats_whiteout(0), 0);
	stats_copyup_join();
	stats_copyup_join();
	stats_copyup_join();
	stats_copyup_queued();

	stats_proc_get(T_NFS, 1, &sp);
	assert_int_equal(sp.sp_calls, 4);
	assert_int_equal(sp.sp_errors, 2);
	assert_int_equal(sp.sp_stale, 1);
	stats_totals_get(&t);
	assert_int_equal(t.st_calls, 4);
	assert_int_equal(t.st_rejected, 1);
	assert_int_equal(t.st_req_bytes, 410);
	assert_int_equal(t.st_reply_bytes, 264);
	assert_int_equal(t.st_copyups, 1);
	assert_int_equal(t.st_copyup_joins, 3);
	assert_int_equal(t.st_copyup_queued, 1);
	assert_int_equal(t.st_whiteouts, 2);
	assert_int_equal(t.st_stale, 1);

	stats_clients_each(t_client, &seen);
	assert_int_equal(seen.ts_n, 1);
	assert_int_equal(seen.ts_calls, 5);
	assert_string_equal(seen.ts_addr, "192.0.2.7");

	assert_int_equal(stats_report(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "GETATTR"));
	assert_non_null(strstr(buf, "copy-ups 1, whiteouts made 2, STALE replies 1\n"
				    "copy-up waits: same file 3, free place 1\n"));
	assert_int_equal(strlen(buf), len);
	free(buf);

	buf = NULL;
	len = cap = 0;
	assert_int_equal(stats_prometheus(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "unionnfsd_calls_total{program=\"nfs\",procedure=\"GETATTR\"} 4\n"));
	assert_non_null(strstr(buf, "unionnfsd_stale_replies_total{program=\"nfs\",procedure=\"GETATTR\"} 1\n"));
	assert_non_null(strstr(buf, "unionnfsd_call_duration_seconds_count{program=\"nfs\",procedure=\"GETATTR\"} 4\n"));
	assert_non_null(strstr(buf, "le=\"+Inf\"} 4\n"));
	assert_non_null(strstr(buf, "unionnfsd_whiteouts_total 2\n"));
	assert_non_null(strstr(buf, "unionnfsd_copyup_joins_total 3\n"));
	assert_non_null(strstr(buf, "unionnfsd_copyup_queued_total 1\n"));
	assert_int_equal(strlen(buf), len);
	free(buf);
}

/*
 * The per-program families carry the program as a label, so their HELP texts must fit every
 * program (NLM and NSM calls are counted there too): none may speak of NFS alone.
 */
static void test_prometheus_help_neutral(void **state)
{
	static const char *const families[] = {
		"unionnfsd_calls_total ", "unionnfsd_call_errors_total ",
		"unionnfsd_stale_replies_total ", "unionnfsd_call_duration_seconds ",
	};
	char *buf = NULL, *help, *eol;
	size_t len = 0, cap = 0;

	(void)state;
	assert_int_equal(stats_prometheus(&buf, &len, &cap), 0);
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		char want[128];

		snprintf(want, sizeof(want), "# HELP %s", families[i]);
		help = strstr(buf, want);
		assert_non_null(help);
		eol = strchr(help, '\n');
		assert_non_null(eol);
		*eol = '\0';
		if (strstr(help, "NFS") != NULL && strstr(help, "NLM") == NULL)
			fail_msg("HELP text only about NFS for a per-program family: %s", help);
		*eol = '\n';
	}
	free(buf);
}

/*
 * STALE by cause: the cause the call's thread marked, object_gone when none was; a mark
 * lives only until its call is counted, whatever the call's result.
 */
static void test_stale_causes(void **state)
{
	struct rpc_call call = { .rc_prog = 100003, .rc_vers = 3, .rc_proc = 3 };
	uint32_t ok = 0, stale = 70;
	struct stats_totals t;
	char *buf = NULL;
	size_t len = 0, cap = 0;

	(void)state;
	assert_int_equal(stats_stale(-116, STATS_STALE_NO_RECORD), -116);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_stale(70, STATS_STALE_UNKNOWN_EXPORT);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &ok);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_stale(70, STATS_STALE_VIEW_UNAVAILABLE);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_stale(70, STATS_STALE_UNKNOWN_EXPORT);
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_stale(70, (enum stats_stale_cause)99); /* out of range: ignored */
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, &stale);
	stats_totals_get(&t);
	assert_int_equal(t.st_stale, 6);
	assert_int_equal(t.st_stale_by[STATS_STALE_NO_RECORD], 1);
	assert_int_equal(t.st_stale_by[STATS_STALE_OBJECT_GONE], 3);
	assert_int_equal(t.st_stale_by[STATS_STALE_VIEW_UNAVAILABLE], 1);
	assert_int_equal(t.st_stale_by[STATS_STALE_UNKNOWN_EXPORT], 1);
	assert_string_equal(stats_stale_cause_name(STATS_STALE_NO_RECORD), "no_record");

	assert_int_equal(stats_report(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "STALE replies by cause: object_gone 3 no_record 1 "
				    "unknown_export 1 view_unavailable 1\n"));
	free(buf);
	buf = NULL;
	len = cap = 0;
	assert_int_equal(stats_prometheus(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "# TYPE unionnfsd_stale_replies_by_cause_total counter\n"));
	assert_non_null(strstr(buf, "unionnfsd_stale_replies_by_cause_total{cause=\"object_gone\"} 3\n"));
	assert_non_null(strstr(buf, "unionnfsd_stale_replies_by_cause_total{cause=\"view_unavailable\"} 1\n"));
	free(buf);

	stats_reset();
	stats_totals_get(&t);
	assert_int_equal(t.st_stale_by[STATS_STALE_OBJECT_GONE], 0);
}

/* Out-of-range procedure numbers and other programs are counted, never out of bounds. */
static void test_odd_calls(void **state)
{
	struct rpc_call call = { .rc_prog = 42, .rc_vers = 1, .rc_proc = 1000000 };
	struct stats_proc sp;

	(void)state;
	stats_call(&call, stats_clock(), 1, 1, NULL, 0, NULL);
	stats_proc_get(STATS_PROG_OTHER, STATS_MAX_PROCS - 1, &sp);
	assert_int_equal(sp.sp_calls, 1);
	stats_proc_get(STATS_PROG_OTHER, STATS_MAX_PROCS, &sp);
	assert_int_equal(sp.sp_calls, 0);
	assert_null(stats_proc_name(T_NFS, 22));
	assert_string_equal(stats_proc_name(T_NFS, 21), "COMMIT");
}

static void *t_counter(void *arg)
{
	struct rpc_call call = { .rc_prog = 100005, .rc_vers = 3, .rc_proc = 1 };
	struct sockaddr_in a;
	char addr[32];
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < T_PER_THREAD; i++) {
		/* 64 clients shared by all threads, so new entries race with lookups. */
		snprintf(addr, sizeof(addr), "10.0.%d.%d", (i + id) % 64 / 8, (i + id) % 8);
		t_peer(&a, addr, 1000 + id);
		stats_call(&call, stats_clock(), 3, 5, (struct sockaddr *)&a, sizeof(a), NULL);
		stats_whiteout(0);
	}
	return NULL;
}

static void test_concurrency(void **state)
{
	pthread_t th[T_THREADS];
	struct stats_totals t;
	struct stats_proc sp;
	struct t_seen seen = { 0 };
	uint64_t n = 0;

	(void)state;
	for (int i = 0; i < T_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, t_counter, (void *)(intptr_t)i), 0);
	for (int i = 0; i < T_THREADS; i++)
		pthread_join(th[i], NULL);
	stats_proc_get(T_MOUNT, 1, &sp);
	assert_int_equal(sp.sp_calls, T_THREADS * T_PER_THREAD);
	for (int b = 0; b < STATS_BUCKETS; b++)
		n += sp.sp_hist[b];
	assert_int_equal(n, T_THREADS * T_PER_THREAD);
	stats_totals_get(&t);
	assert_int_equal(t.st_req_bytes, 3ull * T_THREADS * T_PER_THREAD);
	assert_int_equal(t.st_whiteouts, T_THREADS * T_PER_THREAD);
	stats_clients_each(t_client, &seen);
	assert_int_equal(seen.ts_n, 64);
	assert_int_equal(seen.ts_calls, T_THREADS * T_PER_THREAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_buckets, t_setup),
		cmocka_unit_test_setup(test_percentiles, t_setup),
		cmocka_unit_test_setup(test_call_hook, t_setup),
		cmocka_unit_test_setup(test_stale_causes, t_setup),
		cmocka_unit_test_setup(test_prometheus_help_neutral, t_setup),
		cmocka_unit_test_setup(test_odd_calls, t_setup),
		cmocka_unit_test_setup(test_concurrency, t_setup),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	stats_reset();
	return rc;
}
