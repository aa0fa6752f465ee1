/*
 * A call's context (call_ctx.h) ends with the call: what one call set on its worker thread
 * (a STALE cause, "async") is not seen by the next call that thread serves, whether the
 * first call was answered or parked to run again later.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "blocking.h"
#include "call_ctx.h"
#include "rpc.h"
#include "stats.h"
#include "union.h"

/* A program of the test's own, whose results are one status word. */
#define T_PROG 400300
#define T_VERS 1
#define T_STALE 70u

enum { T_NULL, T_MARK_AND_PARK, T_MARK, T_STALE_UNMARKED, T_NPROCS };

/* The fake pool's answer to blocking_parked(): the handler parks by setting it. */
static bool t_parked;
/* What the last T_STALE_UNMARKED call found in its context. */
static struct call_ctx t_seen;

static bool t_park_no(struct blocking_queue *q)
{
	(void)q;
	return false;
}

static bool t_is_parked(void)
{
	return t_parked;
}

static uint64_t t_parked_ns(void)
{
	return 0;
}

static bool t_long_begin(void)
{
	return true;
}

static void t_nothing(void)
{
}

static void t_wake_none(struct blocking_parked *p)
{
	(void)p;
}

static const struct blocking_hooks t_hooks = {
	.bh_enter = t_nothing, .bh_leave = t_nothing, .bh_park = t_park_no,
	.bh_wake = t_wake_none, .bh_parked = t_is_parked, .bh_parked_ns = t_parked_ns,
	.bh_long_begin = t_long_begin, .bh_long_end = t_nothing,
};

static enum rpc_outcome t_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

/* Marks a cause and asks for async as a handler does before it finds it must wait. */
static enum rpc_outcome t_mark_and_park(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	*(uint32_t *)res = stats_stale(T_STALE, STATS_STALE_UNKNOWN_EXPORT);
	union_set_sync(false);
	t_parked = true;
	return RPC_OUT_REPLY;
}

/* Marks a cause but answers OK: the mark is not about this reply. */
static enum rpc_outcome t_mark(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	stats_stale(T_STALE, STATS_STALE_VIEW_UNAVAILABLE);
	union_set_sync(false);
	*(uint32_t *)res = 0;
	return RPC_OUT_REPLY;
}

/* STALE with no cause of its own: the object is not as recorded. */
static enum rpc_outcome t_stale_unmarked(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	t_seen = *call_ctx();
	*(uint32_t *)res = T_STALE;
	return RPC_OUT_REPLY;
}

static enum rpc_status t_status(uint32_t vers, uint32_t proc, const void *res)
{
	uint32_t status;

	(void)vers;
	if (proc == T_NULL)
		return RPC_STATUS_OK;
	memcpy(&status, res, sizeof(status));
	return status == T_STALE ? RPC_STATUS_STALE : status ? RPC_STATUS_ERROR : RPC_STATUS_OK;
}

static const struct rpc_proc t_procs[T_NPROCS] = {
	[T_NULL] = { .rp_name = "NULL", .rp_fn = t_null },
	[T_MARK_AND_PARK] = { .rp_name = "MARK_AND_PARK", .rp_xdr_res = (xdrproc_t)xdr_u_int,
			      .rp_res_size = sizeof(uint32_t), .rp_fn = t_mark_and_park },
	[T_MARK] = { .rp_name = "MARK", .rp_xdr_res = (xdrproc_t)xdr_u_int,
		     .rp_res_size = sizeof(uint32_t), .rp_fn = t_mark },
	[T_STALE_UNMARKED] = { .rp_name = "STALE", .rp_xdr_res = (xdrproc_t)xdr_u_int,
			       .rp_res_size = sizeof(uint32_t), .rp_fn = t_stale_unmarked },
};
static const struct rpc_proc *const t_versions[] = { t_procs };
static const uint32_t t_nprocs[] = { T_NPROCS };
static const struct rpc_program t_program = {
	.rg_prog = T_PROG, .rg_name = "test", .rg_vers_min = T_VERS, .rg_vers_max = T_VERS,
	.rg_procs = t_versions, .rg_nprocs = t_nprocs, .rg_status = t_status,
};

static void t_put(XDR *x, uint32_t v)
{
	assert_true(xdr_u_int(x, &v));
}

/* Serves one AUTH_NONE call of procedure proc; returns whether it was answered. */
static bool t_serve(uint32_t proc)
{
	static uint32_t xid = 1;
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(700),
				    .sin_addr.s_addr = htonl(0x7f000001) };
	uint8_t rec[64];
	size_t len, outlen = 0;
	void *out;
	XDR x;

	xdrmem_create(&x, (char *)rec, sizeof(rec), XDR_ENCODE);
	t_put(&x, xid++);
	t_put(&x, CALL);
	t_put(&x, 2);
	t_put(&x, T_PROG);
	t_put(&x, T_VERS);
	t_put(&x, proc);
	t_put(&x, AUTH_NONE);
	t_put(&x, 0);
	t_put(&x, AUTH_NONE);
	t_put(&x, 0);
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	out = rpc_serve(rec, len, (struct sockaddr *)&peer, sizeof(peer), IPPROTO_UDP, &outlen);
	rpc_reply_free(out);
	t_parked = false; /* the pool would run a parked call again later; this one never */
	return out != NULL;
}

static int t_setup(void **state)
{
	static const struct rpc_program *const progs[] = { &t_program };

	(void)state;
	rpc_dispatch_init(progs, 1, NULL);
	blocking_set_hooks(&t_hooks);
	stats_reset();
	t_parked = false;
	memset(&t_seen, 0, sizeof(t_seen));
	return 0;
}

static int t_teardown(void **state)
{
	(void)state;
	blocking_set_hooks(NULL);
	return 0;
}

/*
 * A call parks after marking why its object is stale: the next call on the thread answers
 * a STALE of its own, which is counted as "object gone", not with the parked call's cause.
 */
static void test_parked_call_mark_ends_with_it(void **state)
{
	struct stats_totals t;

	(void)state;
	assert_false(t_serve(T_MARK_AND_PARK));
	assert_true(t_serve(T_STALE_UNMARKED));
	stats_totals_get(&t);
	assert_int_equal(t.st_stale, 1);
	assert_int_equal(t.st_stale_by[STATS_STALE_UNKNOWN_EXPORT], 0);
	assert_int_equal(t.st_stale_by[STATS_STALE_OBJECT_GONE], 1);
}

/* Neither an answered nor a parked call leaves anything in the next call's context. */
static void test_next_call_starts_clean(void **state)
{
	static const struct call_ctx clean;

	(void)state;
	assert_true(t_serve(T_MARK));
	assert_true(t_serve(T_STALE_UNMARKED));
	assert_memory_equal(&t_seen, &clean, sizeof(clean));
	assert_false(t_serve(T_MARK_AND_PARK));
	assert_true(t_serve(T_STALE_UNMARKED));
	assert_memory_equal(&t_seen, &clean, sizeof(clean));
	/* Nor is anything left on the thread between calls. */
	assert_memory_equal(call_ctx(), &clean, sizeof(clean));
}

/* Whatever code outside a call left on the thread is not the next call's either. */
static void test_left_outside_a_call(void **state)
{
	static const struct call_ctx clean;
	struct stats_totals t;

	(void)state;
	stats_stale(T_STALE, STATS_STALE_NO_RECORD);
	union_set_sync(false);
	assert_true(t_serve(T_STALE_UNMARKED));
	assert_memory_equal(&t_seen, &clean, sizeof(clean));
	stats_totals_get(&t);
	assert_int_equal(t.st_stale_by[STATS_STALE_NO_RECORD], 0);
	assert_int_equal(t.st_stale_by[STATS_STALE_OBJECT_GONE], 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parked_call_mark_ends_with_it, t_setup,
						t_teardown),
		cmocka_unit_test_setup_teardown(test_next_call_starts_clean, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_left_outside_a_call, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
