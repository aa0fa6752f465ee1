/*
 * A new RPC program drops in with its table alone: a toy program, defined only here,
 * registered like the server's own, is dispatched, bounded by its reply-size class (what
 * the transport reserves through rpc_reply_max) and counted, named and read for errors
 * and STALE replies by the statistics, while src/net and src/stats.c know nothing of it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rpc.h"
#include "stats.h"

/* In the range RFC 5531 leaves to users: no real program has it. */
#define TOY_PROG 0x20000099u
#define TOY_NULL 0
#define TOY_ECHO 1   /* answers the status it is given */
#define TOY_LIST 2   /* answers as many bytes as it is asked for */
#define TOY_HOLE 3   /* named, never served */
#define TOY_CTX 4    /* answers the number its handlers' context points to */
#define TOY_STALE 9  /* the toy's own "handle names nothing" status */
#define TOY_LIST_MAX (64u << 10)

struct toy_res {
	uint32_t tr_status;
	uint32_t tr_len;
	char *tr_data;
};

static bool_t xdr_toy_res(XDR *x, struct toy_res *r)
{
	return xdr_u_int(x, &r->tr_status) &&
	       xdr_bytes(x, &r->tr_data, &r->tr_len, TOY_LIST_MAX);
}

static enum rpc_outcome toy_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	(void)res;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome toy_echo(struct rpc_req *rq, void *args, void *res)
{
	struct toy_res *r = res;

	(void)rq;
	r->tr_status = *(uint32_t *)args;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome toy_list(struct rpc_req *rq, void *args, void *res)
{
	struct toy_res *r = res;

	r->tr_len = *(uint32_t *)args;
	r->tr_data = rpc_alloc(rq, r->tr_len);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome toy_ctx(struct rpc_req *rq, void *args, void *res)
{
	struct toy_res *r = res;

	(void)args;
	r->tr_status = rq->rq_ctx != NULL ? *(const uint32_t *)rq->rq_ctx : 0;
	return RPC_OUT_REPLY;
}

/* Every toy result but NULL's starts with its status. */
static enum rpc_status toy_status(uint32_t vers, uint32_t proc, const void *res)
{
	const struct toy_res *r = res;

	(void)vers;
	if (proc == TOY_NULL || r->tr_status == 0)
		return RPC_STATUS_OK;
	return r->tr_status == TOY_STALE ? RPC_STATUS_STALE : RPC_STATUS_ERROR;
}

#define TOY_PROC(name, fn) \
	{ name, RPC_XDRPROC(xdr_u_int), sizeof(uint32_t), RPC_XDRPROC(xdr_toy_res), \
	  sizeof(struct toy_res), fn }

static const struct rpc_proc toy_v1[] = {
	RPC_PROC_VOID("NULL", toy_null),
	TOY_PROC("ECHO", toy_echo),
	TOY_PROC("LIST", toy_list),
};
static const struct rpc_proc toy_v2[] = {
	RPC_PROC_VOID("NULL", toy_null),
	TOY_PROC("ECHO", toy_echo),
	TOY_PROC("LIST", toy_list),
	RPC_PROC_UNAVAIL("HOLE"),
	TOY_PROC("CTX", toy_ctx),
};
static const struct rpc_proc *const toy_versions[] = { toy_v1, toy_v2 };
static const uint32_t toy_nprocs[] = { 3, 5 };
/* Version 1's LIST may answer up to TOY_LIST_MAX; version 2's is held to small replies. */
static const uint32_t toy_big[] = { 1u << TOY_LIST, 0 };

static const struct rpc_program toy_program = {
	.rg_prog = TOY_PROG,
	.rg_name = "toy",
	.rg_vers_min = 1,
	.rg_vers_max = 2,
	.rg_procs = toy_versions,
	.rg_nprocs = toy_nprocs,
	.rg_big_replies = toy_big,
	.rg_reply_big = TOY_LIST_MAX,
	.rg_status = toy_status,
};

static int t_setup(void **state)
{
	static const struct rpc_program *const programs[] = { &toy_program };

	(void)state;
	rpc_dispatch_init(programs, 1, NULL);
	stats_reset();
	return 0;
}

/* ---- calls and replies ---- */

/* An AUTH_NONE call with one unsigned argument (none for NULL). Returns its length. */
static size_t t_call(uint8_t *buf, size_t cap, uint32_t vers, uint32_t proc, uint32_t arg)
{
	uint32_t words[] = { 0x7000 + proc, CALL, 2, TOY_PROG, vers, proc, AUTH_NONE, 0,
			     AUTH_NONE, 0, arg };
	size_t n = sizeof(words) / sizeof(words[0]) - (proc == TOY_NULL);

	assert_true(n * 4 <= cap);
	for (size_t i = 0; i < n; i++) {
		uint32_t w = htonl(words[i]);

		memcpy(buf + 4 * i, &w, 4);
	}
	return n * 4;
}

struct t_reply {
	uint32_t accept;         /* accept_stat */
	uint32_t status;         /* the toy's status (SUCCESS and not NULL only) */
	uint32_t len;            /* LIST's data length */
	size_t size;             /* the whole reply, record mark included */
};

static void t_serve(uint32_t vers, uint32_t proc, uint32_t arg, struct t_reply *r)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(800) };
	uint8_t call[64];
	uint32_t w[9];
	size_t n = t_call(call, sizeof(call), vers, proc, arg), outlen = 0;
	uint8_t *out;

	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	out = rpc_serve(call, n, (struct sockaddr *)&peer, sizeof(peer), IPPROTO_TCP, &outlen);
	assert_non_null(out);
	assert_true(outlen >= 4 + 24);
	/* mark, xid, REPLY, MSG_ACCEPTED, verifier flavor and length, accept_stat, result */
	memset(w, 0, sizeof(w));
	memcpy(w, out, outlen < sizeof(w) ? outlen : sizeof(w));
	assert_int_equal(ntohl(w[1]), 0x7000 + proc);
	assert_int_equal(ntohl(w[3]), MSG_ACCEPTED);
	memset(r, 0, sizeof(*r));
	r->accept = ntohl(w[6]);
	if (r->accept == SUCCESS && proc != TOY_NULL) {
		r->status = ntohl(w[7]);
		r->len = ntohl(w[8]);
	}
	r->size = outlen;
	rpc_reply_free(out);
}

/* ---- the tests ---- */

static void test_dispatch(void **state)
{
	struct t_reply r;

	(void)state;
	t_serve(1, TOY_NULL, 0, &r);
	assert_int_equal(r.accept, SUCCESS);
	t_serve(2, TOY_ECHO, 5, &r);
	assert_int_equal(r.accept, SUCCESS);
	assert_int_equal(r.status, 5);
	t_serve(2, TOY_HOLE, 0, &r);
	assert_int_equal(r.accept, PROC_UNAVAIL);
	t_serve(1, TOY_HOLE, 0, &r);
	assert_int_equal(r.accept, PROC_UNAVAIL);
	t_serve(3, TOY_ECHO, 0, &r);
	assert_int_equal(r.accept, PROG_MISMATCH);
}

/* A program's own context (rpc_dispatch_set_ctx) reaches its handlers instead of the common one. */
static void test_program_ctx(void **state)
{
	static const struct rpc_program *const programs[] = { &toy_program };
	uint32_t common = 7, own = 11;
	struct t_reply r;

	(void)state;
	rpc_dispatch_init(programs, 1, &common);
	t_serve(2, TOY_CTX, 0, &r);
	assert_int_equal(r.status, 7);
	rpc_dispatch_set_ctx(TOY_PROG, &own);
	t_serve(2, TOY_CTX, 0, &r);
	assert_int_equal(r.status, 11);
	rpc_dispatch_set_ctx(TOY_PROG + 1, &common);  /* not registered: ignored */
	t_serve(2, TOY_CTX, 0, &r);
	assert_int_equal(r.status, 11);
	rpc_dispatch_init(programs, 1, &common);      /* a new registration starts over */
	t_serve(2, TOY_CTX, 0, &r);
	assert_int_equal(r.status, 7);
}

/* What the transport reserves for a call, and the dispatcher holding the reply to it. */
static void test_reply_size_class(void **state)
{
	uint8_t call[64];
	struct t_reply r;
	size_t n;

	(void)state;
	n = t_call(call, sizeof(call), 1, TOY_LIST, 0);
	assert_int_equal(rpc_reply_max(call, n), TOY_LIST_MAX);
	n = t_call(call, sizeof(call), 2, TOY_LIST, 0);
	assert_int_equal(rpc_reply_max(call, n), RPC_REPLY_SMALL);
	n = t_call(call, sizeof(call), 1, TOY_ECHO, 0);
	assert_int_equal(rpc_reply_max(call, n), RPC_REPLY_SMALL);

	/* A large reply where the class allows it; SYSTEM_ERR where it does not. */
	t_serve(1, TOY_LIST, 3 * RPC_REPLY_SMALL, &r);
	assert_int_equal(r.accept, SUCCESS);
	assert_int_equal(r.len, 3 * RPC_REPLY_SMALL);
	assert_true(r.size > RPC_REPLY_SMALL && r.size <= TOY_LIST_MAX);
	t_serve(2, TOY_LIST, 3 * RPC_REPLY_SMALL, &r);
	assert_int_equal(r.accept, SYSTEM_ERR);
	t_serve(2, TOY_LIST, 100, &r);
	assert_int_equal(r.accept, SUCCESS);
	assert_int_equal(r.len, 100);
}

static void test_statistics(void **state)
{
	struct stats_proc sp;
	struct stats_totals t;
	struct t_reply r;
	char *buf = NULL;
	size_t len = 0, cap = 0;

	(void)state;
	t_serve(1, TOY_NULL, 0, &r);
	t_serve(1, TOY_ECHO, 0, &r);
	t_serve(2, TOY_ECHO, 0, &r);
	t_serve(2, TOY_ECHO, 4, &r);
	t_serve(1, TOY_ECHO, TOY_STALE, &r);
	t_serve(2, TOY_HOLE, 0, &r);   /* PROC_UNAVAIL: rejected, counted apart */

	stats_proc_get(TOY_PROG, TOY_ECHO, &sp);
	assert_int_equal(sp.sp_calls, 4);
	assert_int_equal(sp.sp_errors, 2);
	assert_int_equal(sp.sp_stale, 1);
	stats_proc_get(TOY_PROG, TOY_NULL, &sp);
	assert_int_equal(sp.sp_calls, 1);
	assert_int_equal(sp.sp_errors, 0);
	stats_totals_get(&t);
	assert_int_equal(t.st_calls, 5);
	assert_int_equal(t.st_rejected, 1);
	assert_int_equal(t.st_stale, 1);
	assert_int_equal(t.st_stale_by[STATS_STALE_OBJECT_GONE], 1);
	assert_string_equal(stats_proc_name(TOY_PROG, TOY_LIST), "LIST");
	assert_null(stats_proc_name(TOY_PROG, TOY_HOLE + 1));

	assert_int_equal(stats_report(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "\ntoy      NULL                  1        0        0 "));
	assert_non_null(strstr(buf, "\ntoy      ECHO                  4        2        1 "));
	assert_null(strstr(buf, "other"));
	free(buf);
	buf = NULL;
	len = cap = 0;
	assert_int_equal(stats_prometheus(&buf, &len, &cap), 0);
	assert_non_null(strstr(buf, "\nunionnfsd_calls_total{program=\"toy\",procedure=\"ECHO\"} 4\n"));
	assert_non_null(strstr(buf, "\nunionnfsd_call_errors_total{program=\"toy\",procedure=\"ECHO\"} 2\n"));
	assert_non_null(strstr(buf, "\nunionnfsd_stale_replies_total{program=\"toy\",procedure=\"ECHO\"} 1\n"));
	assert_non_null(strstr(buf, "\nunionnfsd_call_duration_seconds_count{program=\"toy\",procedure=\"NULL\"} 1\n"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_dispatch, t_setup),
		cmocka_unit_test_setup(test_program_ctx, t_setup),
		cmocka_unit_test_setup(test_reply_size_class, t_setup),
		cmocka_unit_test_setup(test_statistics, t_setup),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	stats_reset();
	return rc;
}
