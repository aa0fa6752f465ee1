/*
 * Duplicate request cache: hits, misses, retransmissions of a call still running, xid reuse,
 * the bound on entries, aging, many threads at once, and the dispatcher answering a
 * retransmitted non-idempotent call without running it again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <cmocka.h>

#include "drc.h"
#include "rpc.h"

static struct sockaddr_in peer4(const char *addr, uint16_t port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, addr, &sin.sin_addr), 1);
	return sin;
}

/* A key for a REMOVE-like call from 10.0.0.1:port with the given xid and argument bytes. */
static void key(struct drc_key *k, int protocol, uint16_t port, uint32_t xid, const char *args)
{
	struct sockaddr_in sin = peer4("10.0.0.1", port);

	drc_key_make(k, (struct sockaddr *)&sin, sizeof(sin), protocol, xid, 100003, 3, 12, args,
		     strlen(args));
}

/* Looks k up expecting a miss, and stores reply for it. */
static void miss_store(struct drc *d, const struct drc_key *k, const char *reply)
{
	struct drc_ticket t;
	void *out = NULL;
	size_t len = 0;

	assert_int_equal(drc_lookup(d, k, &t, &out, &len), DRC_MISS);
	assert_non_null(t.dt_drc);
	drc_store(&t, reply, strlen(reply));
	assert_null(t.dt_drc);
}

static void expect_hit(struct drc *d, const struct drc_key *k, const char *reply)
{
	struct drc_ticket t;
	void *out = NULL;
	size_t len = 0;

	assert_int_equal(drc_lookup(d, k, &t, &out, &len), DRC_HIT);
	assert_null(t.dt_drc);
	assert_int_equal(len, strlen(reply));
	assert_memory_equal(out, reply, len);
	free(out);
}

/* Expects a miss and forgets the call again (nothing stored). */
static void expect_miss(struct drc *d, const struct drc_key *k)
{
	struct drc_ticket t;
	void *out = NULL;
	size_t len = 0;

	assert_int_equal(drc_lookup(d, k, &t, &out, &len), DRC_MISS);
	assert_null(out);
	drc_store(&t, NULL, 0);
}

static void test_hit_and_miss(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k, other;

	(void)state;
	key(&k, IPPROTO_UDP, 800, 1, "remove a");
	miss_store(d, &k, "reply one");
	expect_hit(d, &k, "reply one");
	expect_hit(d, &k, "reply one");
	assert_int_equal(drc_count(d), 1);
	/* another xid from the same client is another call */
	key(&other, IPPROTO_UDP, 800, 2, "remove a");
	expect_miss(d, &other);
	/* another client's call with the same xid too */
	{
		struct sockaddr_in sin = peer4("10.0.0.2", 800);

		drc_key_make(&other, (struct sockaddr *)&sin, sizeof(sin), IPPROTO_UDP, 1, 100003, 3,
			     12, "remove a", 8);
		expect_miss(d, &other);
	}
	/* and another procedure */
	{
		struct sockaddr_in sin = peer4("10.0.0.1", 800);

		drc_key_make(&other, (struct sockaddr *)&sin, sizeof(sin), IPPROTO_UDP, 1, 100003, 3,
			     13, "remove a", 8);
		expect_miss(d, &other);
	}
	/* forgotten calls leave nothing behind */
	assert_int_equal(drc_count(d), 1);
	drc_free(d);
}

static void test_xid_reuse_other_args(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k, reuse;

	(void)state;
	key(&k, IPPROTO_UDP, 800, 7, "remove a");
	key(&reuse, IPPROTO_UDP, 800, 7, "remove b");
	miss_store(d, &k, "first");
	/* a client that wrapped its xids around asks something else: run it */
	miss_store(d, &reuse, "second");
	expect_hit(d, &k, "first");
	expect_hit(d, &reuse, "second");
	drc_free(d);
}

static void test_ports(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k, moved;

	(void)state;
	/* TCP: the retransmission comes over a new connection from a new port */
	key(&k, IPPROTO_TCP, 900, 3, "rename x y");
	key(&moved, IPPROTO_TCP, 901, 3, "rename x y");
	miss_store(d, &k, "renamed");
	expect_hit(d, &moved, "renamed");
	/* UDP: the port is part of who asked */
	key(&k, IPPROTO_UDP, 900, 3, "rename x y");
	key(&moved, IPPROTO_UDP, 901, 3, "rename x y");
	miss_store(d, &k, "udp renamed");
	expect_miss(d, &moved);
	expect_hit(d, &k, "udp renamed");
	drc_free(d);
}

static void test_in_progress(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k;
	struct drc_ticket t, t2;
	void *out = NULL;
	size_t len = 0;

	(void)state;
	key(&k, IPPROTO_UDP, 800, 9, "create f");
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	/* retransmitted while the original runs: dropped, not run again */
	assert_int_equal(drc_lookup(d, &k, &t2, &out, &len), DRC_BUSY);
	assert_null(t2.dt_drc);
	assert_null(out);
	assert_int_equal(drc_lookup(d, &k, &t2, &out, &len), DRC_BUSY);
	drc_store(&t, "created", 7);
	expect_hit(d, &k, "created");
	drc_free(d);
}

/* A call parked and run again takes its own running entry back; retransmissions meanwhile drop. */
static void test_resumed(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k;
	struct drc_ticket t, t2;
	void *out = NULL;
	size_t len = 0;

	(void)state;
	key(&k, IPPROTO_UDP, 800, 11, "rename big x");
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	/* parked: the entry stays running, a retransmission is dropped */
	assert_int_equal(drc_lookup(d, &k, &t2, &out, &len), DRC_BUSY);
	/* run again: its own entry, the same one */
	assert_int_equal(drc_resume(d, &k, &t2, &out, &len), DRC_MISS);
	assert_ptr_equal(t2.dt_drc, d);
	assert_int_equal(t2.dt_way, t.dt_way);
	assert_int_equal(t2.dt_seq, t.dt_seq);
	assert_int_equal(drc_count(d), 1);
	drc_store(&t2, "renamed", 7);
	expect_hit(d, &k, "renamed");
	/* once answered, a late run again is answered from the cache too */
	assert_int_equal(drc_resume(d, &k, &t2, &out, &len), DRC_HIT);
	free(out);
	/* a call that could claim no entry at first claims one when run again */
	key(&k, IPPROTO_UDP, 800, 12, "remove f");
	assert_int_equal(drc_resume(d, &k, &t, &out, &len), DRC_MISS);
	assert_ptr_equal(t.dt_drc, d);
	drc_store(&t, "removed", 7);
	expect_hit(d, &k, "removed");
	drc_free(d);
}

static void test_forget_and_oversized(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	struct drc_key k;
	struct drc_ticket t;
	void *out = NULL, *big;
	size_t len = 0;

	(void)state;
	/* nothing sent (the handler dropped the call): a retransmission runs it */
	key(&k, IPPROTO_UDP, 800, 10, "write");
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	drc_store(&t, NULL, 0);
	assert_int_equal(drc_count(d), 0);
	/* a reply too large to keep is not kept */
	big = calloc(1, DRC_REPLY_MAX + 1);
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	drc_store(&t, big, DRC_REPLY_MAX + 1);
	assert_int_equal(drc_count(d), 0);
	/* the largest that is */
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	memset(big, 0x5a, DRC_REPLY_MAX);
	drc_store(&t, big, DRC_REPLY_MAX);
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_HIT);
	assert_int_equal(len, DRC_REPLY_MAX);
	assert_memory_equal(out, big, DRC_REPLY_MAX);
	free(out);
	free(big);
	drc_free(d);
}

static void test_disabled(void **state)
{
	struct drc *d = drc_new(0, DRC_DEFAULT_TTL);
	struct drc_key k;
	struct drc_ticket t;
	void *out = NULL;
	size_t len = 0;

	(void)state;
	assert_null(d);
	key(&k, IPPROTO_UDP, 800, 1, "x");
	assert_int_equal(drc_lookup(d, &k, &t, &out, &len), DRC_MISS);
	assert_null(t.dt_drc);
	drc_store(&t, "r", 1);
	assert_int_equal(drc_count(d), 0);
	drc_free(d);
}

static void test_eviction_bound(void **state)
{
	struct drc *d = drc_new(64, DRC_DEFAULT_TTL);
	struct drc_key k;
	char reply[32];

	(void)state;
	for (uint32_t xid = 0; xid < 10000; xid++) {
		key(&k, IPPROTO_UDP, 800, xid, "mkdir d");
		snprintf(reply, sizeof(reply), "reply %u", xid);
		miss_store(d, &k, reply);
		assert_true(drc_count(d) <= 64);
		/* the newest entry is never the one recycled */
		expect_hit(d, &k, reply);
	}
	assert_int_equal(drc_count(d), 64);
	drc_free(d);
}

static void test_bucket_full_of_running_calls(void **state)
{
	/* one bucket: every key lands in it */
	struct drc *d = drc_new(1, DRC_DEFAULT_TTL);
	struct drc_ticket t[9];
	struct drc_key k[9];
	void *out = NULL;
	size_t len = 0;

	(void)state;
	for (int i = 0; i < 9; i++)
		key(&k[i], IPPROTO_UDP, 800, (uint32_t)i, "link");
	for (int i = 0; i < 8; i++) {
		assert_int_equal(drc_lookup(d, &k[i], &t[i], &out, &len), DRC_MISS);
		assert_non_null(t[i].dt_drc);
	}
	/* nothing to recycle: the call runs, unprotected */
	assert_int_equal(drc_lookup(d, &k[8], &t[8], &out, &len), DRC_MISS);
	assert_null(t[8].dt_drc);
	drc_store(&t[8], "lost", 4);
	for (int i = 0; i < 8; i++)
		drc_store(&t[i], "linked", 6);
	for (int i = 0; i < 8; i++)
		expect_hit(d, &k[i], "linked");
	/* now the oldest finished entry makes room */
	miss_store(d, &k[8], "linked 8");
	expect_hit(d, &k[8], "linked 8");
	assert_int_equal(drc_count(d), 8);
	drc_free(d);
}

static uint32_t fake_now;

static uint32_t fake_clock(void)
{
	return fake_now;
}

static void test_aging(void **state)
{
	struct drc *d = drc_new(DRC_DEFAULT_ENTRIES, 120);
	struct drc_key k, run;
	struct drc_ticket t;
	void *out = NULL;
	size_t len = 0;

	(void)state;
	fake_now = 0xfffffff0u; /* and the clock wraps on the way */
	drc_set_clock(d, fake_clock);
	key(&k, IPPROTO_UDP, 800, 1, "setattr");
	miss_store(d, &k, "set");
	fake_now += 119;
	expect_hit(d, &k, "set");
	fake_now += 1;
	expect_miss(d, &k);
	assert_int_equal(drc_count(d), 0);
	/* a call still running does not age out under its retransmissions */
	key(&run, IPPROTO_UDP, 800, 2, "setattr");
	assert_int_equal(drc_lookup(d, &run, &t, &out, &len), DRC_MISS);
	fake_now += 1000;
	assert_int_equal(drc_lookup(d, &run, &(struct drc_ticket){ 0 }, &out, &len), DRC_BUSY);
	/* the entry's life counts from the reply */
	drc_store(&t, "done", 4);
	fake_now += 100;
	expect_hit(d, &run, "done");
	drc_free(d);
}

/* --- many threads retransmitting the same calls --- */

#define CONC_THREADS 8
#define CONC_KEYS 200
#define CONC_ROUNDS 20

static struct drc *conc_drc;
static int conc_runs[CONC_KEYS];
static int conc_bad;

static void *conc_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int round = 0; round < CONC_ROUNDS; round++) {
		for (int i = 0; i < CONC_KEYS; i++) {
			int n = (int)((unsigned)i * 7919u + seed * 31u + (unsigned)round) % CONC_KEYS;
			struct drc_key k;
			struct drc_ticket t;
			char reply[16];
			void *out = NULL;
			size_t len = 0;

			key(&k, IPPROTO_TCP, (uint16_t)(1000 + seed), (uint32_t)n, "rmdir");
			snprintf(reply, sizeof(reply), "r%d", n);
			switch (drc_lookup(conc_drc, &k, &t, &out, &len)) {
			case DRC_MISS:
				__atomic_add_fetch(&conc_runs[n], 1, __ATOMIC_RELAXED);
				drc_store(&t, reply, strlen(reply));
				break;
			case DRC_HIT:
				if (len != strlen(reply) || memcmp(out, reply, len) != 0)
					__atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
				free(out);
				break;
			case DRC_BUSY:
				break;
			}
		}
	}
	return NULL;
}

static void test_concurrency(void **state)
{
	pthread_t th[CONC_THREADS];

	(void)state;
	conc_drc = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
	for (int i = 0; i < CONC_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, conc_thread, (void *)(uintptr_t)i), 0);
	for (int i = 0; i < CONC_THREADS; i++)
		pthread_join(th[i], NULL);
	/* TCP keys ignore the port: every thread asked the same CONC_KEYS calls */
	for (int n = 0; n < CONC_KEYS; n++)
		assert_int_equal(conc_runs[n], 1);
	assert_int_equal(conc_bad, 0);
	assert_int_equal(drc_count(conc_drc), CONC_KEYS);
	drc_free(conc_drc);
}

/* --- through the dispatcher --- */

#define FAKE_PROG 400123u

static int fake_runs;

static enum rpc_outcome fake_count(struct rpc_req *rq, void *args, void *res)
{
	(void)rq;
	(void)args;
	/* the reply tells how often the procedure ran: a second run would show */
	*(uint32_t *)res = (uint32_t)++fake_runs;
	return RPC_OUT_REPLY;
}

static const struct rpc_proc fake_v1[] = {
	{ "NULL", NULL, 0, NULL, 0, fake_count },
	{ "REMOVE", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_u_int, sizeof(uint32_t),
	  fake_count },
	{ "GETATTR", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_u_int, sizeof(uint32_t),
	  fake_count },
};
static const struct rpc_proc *const fake_procs[] = { fake_v1 };
static const uint32_t fake_nprocs[] = { 3 };
static const uint32_t fake_nonidempotent[] = { 1u << 1 };
static const struct rpc_program fake_program = {
	.rg_prog = FAKE_PROG, .rg_vers_min = 1, .rg_vers_max = 1,
	.rg_procs = fake_procs, .rg_nprocs = fake_nprocs,
	.rg_nonidempotent = fake_nonidempotent,
};

static size_t put32(uint8_t *b, size_t off, uint32_t v)
{
	v = htonl(v);
	memcpy(b + off, &v, 4);
	return off + 4;
}

static size_t call(uint8_t *b, uint32_t xid, uint32_t proc, uint32_t arg)
{
	size_t o = 0;

	o = put32(b, o, xid);
	o = put32(b, o, 0);       /* CALL */
	o = put32(b, o, 2);
	o = put32(b, o, FAKE_PROG);
	o = put32(b, o, 1);
	o = put32(b, o, proc);
	o = put32(b, o, 0);       /* AUTH_NONE credential and verifier */
	o = put32(b, o, 0);
	o = put32(b, o, 0);
	o = put32(b, o, 0);
	return put32(b, o, arg);
}

static uint32_t serve(const uint8_t *rec, size_t len, int protocol, uint16_t port, void **keep,
		      size_t *keeplen)
{
	struct sockaddr_in sin = peer4("127.0.0.1", port);
	size_t outlen = 0;
	uint8_t *out = rpc_serve(rec, len, (struct sockaddr *)&sin, sizeof(sin), protocol, &outlen);
	uint32_t v;

	assert_non_null(out);
	assert_int_equal(outlen, 4 + 28);
	memcpy(&v, out + outlen - 4, 4);
	if (keep != NULL) {
		*keep = out;
		*keeplen = outlen;
	} else {
		free(out);
	}
	return ntohl(v);
}

static void test_dispatch(void **state)
{
	const struct rpc_program *progs[] = { &fake_program };
	uint8_t rec[64];
	void *a, *b;
	size_t alen, blen, len;

	(void)state;
	rpc_dispatch_init(progs, 1, NULL);
	fake_runs = 0;
	/* UDP: the same datagram twice runs once, answered alike */
	len = call(rec, 0xabc, 1, 5);
	assert_int_equal(serve(rec, len, IPPROTO_UDP, 700, &a, &alen), 1);
	assert_int_equal(serve(rec, len, IPPROTO_UDP, 700, &b, &blen), 1);
	assert_int_equal(fake_runs, 1);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
	/* TCP from another port (a reconnection): the cached reply, record mark and all */
	len = call(rec, 0xabd, 1, 5);
	assert_int_equal(serve(rec, len, IPPROTO_TCP, 701, &a, &alen), 2);
	assert_int_equal(serve(rec, len, IPPROTO_TCP, 702, &b, &blen), 2);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
	/* a new xid is a new call */
	len = call(rec, 0xabe, 1, 5);
	assert_int_equal(serve(rec, len, IPPROTO_UDP, 700, NULL, NULL), 3);
	/* idempotent procedures never go through the cache */
	len = call(rec, 0xabf, 2, 5);
	assert_int_equal(serve(rec, len, IPPROTO_UDP, 700, NULL, NULL), 4);
	assert_int_equal(serve(rec, len, IPPROTO_UDP, 700, NULL, NULL), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_and_miss),
		cmocka_unit_test(test_xid_reuse_other_args),
		cmocka_unit_test(test_ports),
		cmocka_unit_test(test_in_progress),
		cmocka_unit_test(test_resumed),
		cmocka_unit_test(test_forget_and_oversized),
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_eviction_bound),
		cmocka_unit_test(test_bucket_full_of_running_calls),
		cmocka_unit_test(test_aging),
		cmocka_unit_test(test_concurrency),
		cmocka_unit_test(test_dispatch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
