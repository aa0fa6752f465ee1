/*
 * RPC call parsing and dispatch: header and credential bounds, truncation at every
 * length, and rpc_serve() against a small fake program covering every reply kind.
 */
#include <stdarg.h>
#include <stdalign.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "rpc.h"

#define FAKE_PROG 200000
#define CTX_MAGIC ((void *)0x5eed)

/* ---- building calls ---- */

struct callspec {
	uint32_t xid, mtype, rpcvers, prog, vers, proc;
	uint32_t flavor;
	const uint8_t *credbody;  /* raw body; NULL: build AUTH_SYS from the fields below */
	uint32_t credlen;
	const char *machine;
	uint32_t machinelen;      /* used when machine is NULL: that many 'm' */
	uint32_t uid, gid, ngroups;
	const uint8_t *args;
	uint32_t argslen;
};

static void put(XDR *x, uint32_t v)
{
	assert_true(xdr_u_int(x, &v));
}

static void put_opaque(XDR *x, const void *p, uint32_t len)
{
	put(x, len);
	if (len)
		assert_true(xdr_opaque(x, (char *)p, len));
}

static uint32_t authsys_body(uint8_t *buf, size_t cap, const struct callspec *c)
{
	XDR x;
	char name[1024];
	uint32_t n;

	xdrmem_create(&x, (char *)buf, (u_int)cap, XDR_ENCODE);
	put(&x, 12345);
	if (c->machine) {
		n = (uint32_t)strlen(c->machine);
		memcpy(name, c->machine, n);
	} else {
		n = c->machinelen;
		memset(name, 'm', n);
	}
	put_opaque(&x, name, n);
	put(&x, c->uid);
	put(&x, c->gid);
	put(&x, c->ngroups);
	for (uint32_t i = 0; i < c->ngroups; i++)
		put(&x, 100 + i);
	n = xdr_getpos(&x);
	xdr_destroy(&x);
	return n;
}

static size_t build_call(uint8_t *buf, size_t cap, const struct callspec *c)
{
	XDR x;
	uint8_t body[2048];
	uint32_t blen;
	size_t n;

	xdrmem_create(&x, (char *)buf, (u_int)cap, XDR_ENCODE);
	put(&x, c->xid);
	put(&x, c->mtype);
	put(&x, c->rpcvers);
	put(&x, c->prog);
	put(&x, c->vers);
	put(&x, c->proc);
	put(&x, c->flavor);
	if (c->credbody) {
		put_opaque(&x, c->credbody, c->credlen);
	} else if (c->flavor == AUTH_SYS) {
		blen = authsys_body(body, sizeof(body), c);
		put_opaque(&x, body, blen);
	} else {
		put(&x, 0);
	}
	put(&x, AUTH_NONE);
	put(&x, 0);
	if (c->argslen)
		assert_true(xdr_opaque(&x, (char *)c->args, c->argslen));
	n = xdr_getpos(&x);
	xdr_destroy(&x);
	return n;
}

static struct callspec spec_sys(void)
{
	return (struct callspec){ .xid = 0xabcd0001, .mtype = CALL, .rpcvers = 2,
				  .prog = FAKE_PROG, .vers = 2, .proc = 0, .flavor = AUTH_SYS,
				  .machine = "client.example", .uid = 1000, .gid = 100,
				  .ngroups = 3 };
}

/* ---- the fake program ---- */

struct echo_res {
	uint32_t er_n;
	char *er_s;
};

static bool_t xdr_echo_res(XDR *x, struct echo_res *r)
{
	return xdr_u_int(x, &r->er_n) && xdr_string(x, &r->er_s, 1024);
}

struct seen {
	uint32_t uid, gid, ngroups, xid;
	int protocol;
	int peerport, localport;
	void *ctx;
};
static struct seen last;

static enum rpc_outcome fake_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args; (void)res;
	return RPC_OUT_REPLY;
}

/* Echoes the argument, with a string from the arena; arguments >= 1000 pick an outcome. */
static enum rpc_outcome fake_echo(struct rpc_req *rq, void *args, void *res)
{
	uint32_t n = *(uint32_t *)args;
	struct echo_res *r = res;

	last.uid = rq->rq_cred.rc_uid;
	last.gid = rq->rq_cred.rc_gid;
	last.ngroups = rq->rq_cred.rc_ngroups;
	last.xid = rq->rq_xid;
	last.protocol = rq->rq_protocol;
	last.ctx = rq->rq_ctx;
	last.peerport = rq->rq_peerlen ? ntohs(((struct sockaddr_in *)&rq->rq_peer)->sin_port) : -1;
	last.localport = rq->rq_locallen ? ntohs(((struct sockaddr_in *)&rq->rq_local)->sin_port) : -1;
	switch (n) {
	case 1000: return RPC_OUT_GARBAGE_ARGS;
	case 1001: return RPC_OUT_SYSTEM_ERR;
	case 1002: return RPC_OUT_AUTH_TOOWEAK;
	case 1003: return RPC_OUT_DROP;
	}
	r->er_n = n + 1;
	r->er_s = rpc_alloc(rq, 6);
	memcpy(r->er_s, "hello", 5);
	/* Exercise big and many small arena allocations too. */
	memset(rpc_alloc(rq, 100000), 1, 100000);
	for (int i = 0; i < 100; i++)
		memset(rpc_alloc(rq, 77), 2, 77);
	return RPC_OUT_REPLY;
}

struct long_res {
	u_int lr_len;
	char *lr_data;
};

static bool_t xdr_long_res(XDR *x, struct long_res *r)
{
	return xdr_bytes(x, &r->lr_data, &r->lr_len, 1u << 20);
}

/* Answers as many bytes as the argument says. */
static enum rpc_outcome fake_long(struct rpc_req *rq, void *args, void *res)
{
	struct long_res *r = res;

	r->lr_len = *(uint32_t *)args;
	r->lr_data = rpc_alloc(rq, r->lr_len);
	return RPC_OUT_REPLY;
}

/* Like fake_long with the argument's low 16 bits, saying its result takes the high 16. */
static enum rpc_outcome fake_bounded(struct rpc_req *rq, void *args, void *res)
{
	uint32_t arg = *(uint32_t *)args;
	struct long_res *r = res;

	r->lr_len = arg & 0xffff;
	r->lr_data = rpc_alloc(rq, r->lr_len);
	for (u_int i = 0; i < r->lr_len; i++)
		r->lr_data[i] = (char)('a' + i % 26);
	rpc_reply_bound(rq, arg >> 16);
	return RPC_OUT_REPLY;
}

#define FAKE_LONG 3
#define FAKE_BIG 4
#define FAKE_BOUNDED 5
#define FAKE_BIG_MAX 20000

static const struct rpc_proc fake_v2[] = {
	RPC_PROC_VOID("NULL", fake_null),
	{ "ECHO", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_echo_res,
	  sizeof(struct echo_res), fake_echo },
	{ "MISSING", RPC_XDRPROC(xdr_void), 0, RPC_XDRPROC(xdr_void), 0, NULL },
	{ "LONG", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_long_res,
	  sizeof(struct long_res), fake_long },
	{ "BIG", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_long_res,
	  sizeof(struct long_res), fake_long },
	{ "BOUNDED", (xdrproc_t)xdr_u_int, sizeof(uint32_t), (xdrproc_t)xdr_long_res,
	  sizeof(struct long_res), fake_bounded },
};
static const struct rpc_proc fake_v3[] = {
	/* NULL encoders mean void too. */
	{ "NULL", NULL, 0, NULL, 0, fake_null },
};
static const struct rpc_proc *const fake_procs[] = { fake_v2, fake_v3 };
static const uint32_t fake_nprocs[] = { 6, 1 };
static const uint32_t fake_big[] = { 1u << FAKE_BIG, 0 };
static const struct rpc_program fake_program = {
	.rg_prog = FAKE_PROG, .rg_vers_min = 2, .rg_vers_max = 3,
	.rg_procs = fake_procs, .rg_nprocs = fake_nprocs,
	.rg_big_replies = fake_big, .rg_reply_big = FAKE_BIG_MAX,
};

static int setup(void **state)
{
	static const struct rpc_program *const progs[] = { &fake_program };

	(void)state;
	rpc_dispatch_init(progs, 1, CTX_MAGIC);
	return 0;
}

/* ---- reading replies ---- */

struct reply {
	uint32_t xid, mtype, stat, code, a, b;
	const uint8_t *rest;
	size_t restlen;
};

static void parse_reply(const uint8_t *out, size_t outlen, int protocol, struct reply *r)
{
	XDR x;
	uint32_t vf, vl;

	assert_true(outlen >= 4 + 20);
	if (protocol == IPPROTO_TCP) {
		uint32_t mark;

		memcpy(&mark, out, 4);
		mark = ntohl(mark);
		assert_true(mark & 0x80000000u);
		assert_int_equal(mark & 0x7fffffffu, outlen - 4);
	}
	memset(r, 0, sizeof(*r));
	xdrmem_create(&x, (char *)out + 4, (u_int)(outlen - 4), XDR_DECODE);
	assert_true(xdr_u_int(&x, &r->xid));
	assert_true(xdr_u_int(&x, &r->mtype));
	assert_int_equal(r->mtype, REPLY);
	assert_true(xdr_u_int(&x, &r->stat));
	if (r->stat == MSG_ACCEPTED) {
		assert_true(xdr_u_int(&x, &vf));
		assert_true(xdr_u_int(&x, &vl));
		assert_int_equal(vf, AUTH_NONE);
		assert_int_equal(vl, 0);
		assert_true(xdr_u_int(&x, &r->code));
		if (r->code == PROG_MISMATCH) {
			assert_true(xdr_u_int(&x, &r->a));
			assert_true(xdr_u_int(&x, &r->b));
		}
	} else {
		assert_true(xdr_u_int(&x, &r->code));
		assert_true(xdr_u_int(&x, &r->a));
		if (r->code == RPC_MISMATCH)
			assert_true(xdr_u_int(&x, &r->b));
	}
	r->rest = out + 4 + xdr_getpos(&x);
	r->restlen = outlen - 4 - xdr_getpos(&x);
	xdr_destroy(&x);
}

static void serve(const struct callspec *c, int protocol, struct reply *r, uint8_t **outp)
{
	uint8_t buf[4096];
	size_t n = build_call(buf, sizeof(buf), c), outlen = 0;
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(777) };
	struct sockaddr_in local = { .sin_family = AF_INET, .sin_port = htons(2049) };
	uint8_t *out;

	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	out = rpc_serve_at(buf, n, (struct sockaddr *)&peer, sizeof(peer),
			   (struct sockaddr *)&local, sizeof(local), protocol, &outlen);
	if (r == NULL) {
		assert_null(out);
		return;
	}
	assert_non_null(out);
	parse_reply(out, outlen, protocol, r);
	if (outp)
		*outp = out;
	else
		free(out);
}

/* ---- parsing ---- */

static void test_parse_authsys(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096];
	struct rpc_call call;
	size_t n;

	(void)state;
	c.proc = 7;
	c.args = (const uint8_t *)"\0\0\0\5";
	c.argslen = 4;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_OK);
	assert_int_equal(call.rc_xid, 0xabcd0001);
	assert_int_equal(call.rc_prog, FAKE_PROG);
	assert_int_equal(call.rc_vers, 2);
	assert_int_equal(call.rc_proc, 7);
	assert_int_equal(call.rc_cred.rc_flavor, AUTH_SYS);
	assert_int_equal(call.rc_cred.rc_uid, 1000);
	assert_int_equal(call.rc_cred.rc_gid, 100);
	assert_int_equal(call.rc_cred.rc_ngroups, 3);
	assert_int_equal(call.rc_cred.rc_groups[0], 100);
	assert_int_equal(call.rc_cred.rc_groups[2], 102);
	assert_string_equal(call.rc_cred.rc_machine, "client.example");
	assert_int_equal(call.rc_args_off, n - 4);

	/* The bounds themselves are accepted. */
	c.machine = NULL;
	c.machinelen = 255;
	c.ngroups = 16;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_OK);
	assert_int_equal(strlen(call.rc_cred.rc_machine), 255);
	assert_int_equal(call.rc_cred.rc_ngroups, 16);
	assert_int_equal(call.rc_cred.rc_groups[15], 115);
}

static void test_parse_authnone(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096];
	struct rpc_call call;
	size_t n;

	(void)state;
	c.flavor = AUTH_NONE;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_OK);
	assert_int_equal(call.rc_cred.rc_flavor, AUTH_NONE);
	assert_int_equal(call.rc_cred.rc_uid, 65534);
	assert_int_equal(call.rc_cred.rc_gid, 65534);
	assert_int_equal(call.rc_cred.rc_ngroups, 0);
	assert_int_equal(call.rc_args_off, n);
}

static void test_parse_bad(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096], body[500] = { 0 };
	struct rpc_call call;
	size_t n;

	(void)state;
	c.ngroups = 17;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_BADCRED);

	c = spec_sys();
	c.machine = NULL;
	c.machinelen = 256;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_BADCRED);

	/* A credential body over 400 bytes. */
	c = spec_sys();
	c.credbody = body;
	c.credlen = 404;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_BADCRED);

	/* An AUTH_SYS body too short for its own fields. */
	c.credlen = 12;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_BADCRED);

	c = spec_sys();
	c.rpcvers = 3;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_RPC_MISMATCH);
	assert_int_equal(call.rc_xid, 0xabcd0001);

	c = spec_sys();
	c.flavor = 6; /* RPCSEC_GSS */
	c.credbody = body;
	c.credlen = 20;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_REJECTEDCRED);

	c = spec_sys();
	c.mtype = REPLY;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_parse_call(buf, n, &call), RPC_PARSE_DROP);

	assert_int_equal(rpc_parse_call(buf, 0, &call), RPC_PARSE_DROP);
}

static void test_parse_truncated(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096];
	struct rpc_call call;
	size_t n, hdr;

	(void)state;
	c.proc = 1;
	c.args = (const uint8_t *)"\0\0\0\5";
	c.argslen = 4;
	n = build_call(buf, sizeof(buf), &c);
	hdr = n - 4;
	for (size_t len = 0; len <= n; len++) {
		/* A copy of exactly len bytes so ASan sees any overread. */
		uint8_t *copy = malloc(len ? len : 1);
		enum rpc_parse st;
		size_t outlen;
		void *out;

		memcpy(copy, buf, len);
		st = rpc_parse_call(copy, len, &call);
		if (len >= hdr)
			assert_int_equal(st, RPC_PARSE_OK);
		else
			assert_int_equal(st, RPC_PARSE_DROP);
		out = rpc_serve(copy, len, NULL, 0, IPPROTO_UDP, &outlen);
		if (len < hdr) {
			assert_null(out);
		} else {
			struct reply r;

			assert_non_null(out);
			parse_reply(out, outlen, IPPROTO_UDP, &r);
			assert_int_equal(r.code, len == n ? SUCCESS : GARBAGE_ARGS);
			free(out);
		}
		free(copy);
	}
}

/* Every byte flipped to a few values: never a crash, never a leak. */
static void test_parse_mutated(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096];
	size_t n, outlen;
	static const uint8_t vals[] = { 0x00, 0x01, 0x7f, 0x80, 0xff };

	(void)state;
	c.proc = 1;
	c.args = (const uint8_t *)"\0\0\0\5";
	c.argslen = 4;
	n = build_call(buf, sizeof(buf), &c);
	for (size_t i = 0; i < n; i++) {
		for (size_t v = 0; v < sizeof(vals); v++) {
			uint8_t *copy = malloc(n);
			void *out;

			memcpy(copy, buf, n);
			copy[i] = vals[v];
			out = rpc_serve(copy, n, NULL, 0, IPPROTO_TCP, &outlen);
			free(out);
			free(copy);
		}
	}
}

/* ---- serving ---- */

static void test_serve_denied(void **state)
{
	struct callspec c = spec_sys();
	struct reply r;
	uint8_t body[32] = { 0 };

	(void)state;
	c.rpcvers = 3;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.xid, 0xabcd0001);
	assert_int_equal(r.stat, MSG_DENIED);
	assert_int_equal(r.code, RPC_MISMATCH);
	assert_int_equal(r.a, 2);
	assert_int_equal(r.b, 2);
	assert_int_equal(r.restlen, 0);

	c = spec_sys();
	c.ngroups = 17;
	serve(&c, IPPROTO_UDP, &r, NULL);
	assert_int_equal(r.stat, MSG_DENIED);
	assert_int_equal(r.code, AUTH_ERROR);
	assert_int_equal(r.a, AUTH_BADCRED);

	c = spec_sys();
	c.flavor = 6;
	c.credbody = body;
	c.credlen = sizeof(body);
	serve(&c, IPPROTO_UDP, &r, NULL);
	assert_int_equal(r.stat, MSG_DENIED);
	assert_int_equal(r.code, AUTH_ERROR);
	assert_int_equal(r.a, AUTH_REJECTEDCRED);
}

static void test_serve_unavail(void **state)
{
	struct callspec c = spec_sys();
	struct reply r;

	(void)state;
	c.prog = 100227; /* NFSACL */
	c.vers = 3;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.stat, MSG_ACCEPTED);
	assert_int_equal(r.code, PROG_UNAVAIL);
	assert_int_equal(r.restlen, 0);

	c = spec_sys();
	c.vers = 4;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROG_MISMATCH);
	assert_int_equal(r.a, 2);
	assert_int_equal(r.b, 3);
	c.vers = 1;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROG_MISMATCH);

	c = spec_sys();
	c.proc = 2; /* a NULL rp_fn */
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROC_UNAVAIL);
	c.proc = 6; /* past the table */
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROC_UNAVAIL);
	c.vers = 3;
	c.proc = 1;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROC_UNAVAIL);
	c.proc = 0xffffffff;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, PROC_UNAVAIL);

	/* NULL in each version is an ordinary procedure. */
	c.proc = 0;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, SUCCESS);
	assert_int_equal(r.restlen, 0);
}

static void test_serve_garbage(void **state)
{
	struct callspec c = spec_sys();
	struct reply r;

	(void)state;
	/* No arguments at all; partial ones are covered by test_parse_truncated. */
	c.proc = 1;
	c.argslen = 0;
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.stat, MSG_ACCEPTED);
	assert_int_equal(r.code, GARBAGE_ARGS);
	assert_int_equal(r.restlen, 0);
}

static void test_serve_success(void **state)
{
	struct callspec c = spec_sys();
	struct reply r;
	uint8_t *out;
	XDR x;
	struct echo_res er = { 0 };

	(void)state;
	memset(&last, 0, sizeof(last));
	c.proc = 1;
	c.args = (const uint8_t *)"\0\0\0\x29";
	c.argslen = 4;
	serve(&c, IPPROTO_TCP, &r, &out);
	assert_int_equal(r.xid, 0xabcd0001);
	assert_int_equal(r.stat, MSG_ACCEPTED);
	assert_int_equal(r.code, SUCCESS);
	xdrmem_create(&x, (char *)r.rest, (u_int)r.restlen, XDR_DECODE);
	assert_true(xdr_echo_res(&x, &er));
	assert_int_equal(xdr_getpos(&x), r.restlen);
	xdr_destroy(&x);
	assert_int_equal(er.er_n, 0x2a);
	assert_string_equal(er.er_s, "hello");
	xdr_free((xdrproc_t)xdr_echo_res, (char *)&er);
	free(out);

	assert_int_equal(last.uid, 1000);
	assert_int_equal(last.gid, 100);
	assert_int_equal(last.ngroups, 3);
	assert_int_equal(last.xid, 0xabcd0001);
	assert_int_equal(last.protocol, IPPROTO_TCP);
	assert_ptr_equal(last.ctx, CTX_MAGIC);
	assert_int_equal(last.peerport, 777);
	assert_int_equal(last.localport, 2049);

	/* UDP: the four reserved bytes are left as zeros. */
	serve(&c, IPPROTO_UDP, &r, &out);
	assert_int_equal(r.code, SUCCESS);
	assert_memory_equal(out, "\0\0\0\0", 4);
	free(out);
}

static void test_serve_outcomes(void **state)
{
	struct callspec c = spec_sys();
	struct reply r;

	(void)state;
	c.proc = 1;
	c.argslen = 4;
	c.args = (const uint8_t *)"\0\0\x03\xe8"; /* 1000 */
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.code, GARBAGE_ARGS);
	c.args = (const uint8_t *)"\0\0\x03\xe9";
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.stat, MSG_ACCEPTED);
	assert_int_equal(r.code, SYSTEM_ERR);
	assert_int_equal(r.restlen, 0);
	c.args = (const uint8_t *)"\0\0\x03\xea";
	serve(&c, IPPROTO_TCP, &r, NULL);
	assert_int_equal(r.stat, MSG_DENIED);
	assert_int_equal(r.code, AUTH_ERROR);
	assert_int_equal(r.a, AUTH_TOOWEAK);
	c.args = (const uint8_t *)"\0\0\x03\xeb";
	serve(&c, IPPROTO_TCP, NULL, NULL);
}

/* A call of proc asking for len bytes; returns the reply code and its size. */
/* The reply (its bytes, their count in *size) to procedure proc of FAKE_PROG v2 with arg. */
static uint8_t *serve_u32(uint32_t proc, uint32_t arg, size_t *size)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096], *out;
	uint32_t net = htonl(arg);
	size_t n;

	c.proc = proc;
	c.args = (const uint8_t *)&net;
	c.argslen = 4;
	n = build_call(buf, sizeof(buf), &c);
	out = rpc_serve(buf, n, NULL, 0, IPPROTO_TCP, size);
	assert_non_null(out);
	return out;
}

static uint32_t serve_long(uint32_t proc, uint32_t len, size_t *size)
{
	uint8_t *out = serve_u32(proc, len, size);
	struct reply r;

	parse_reply(out, *size, IPPROTO_TCP, &r);
	free(out);
	return r.code;
}

/*
 * The bound a transport charges a call in flight: the program's for the procedures it
 * lists as large, RPC_REPLY_SMALL for all else; a reply past its bound is SYSTEM_ERR.
 */
static void test_reply_max(void **state)
{
	struct callspec c = spec_sys();
	uint8_t buf[4096];
	size_t n, size;

	(void)state;
	c.proc = FAKE_BIG;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_reply_max(buf, n), FAKE_BIG_MAX);
	assert_int_equal(rpc_reply_max(buf, 23), RPC_REPLY_SMALL);
	c.proc = FAKE_LONG;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_reply_max(buf, n), RPC_REPLY_SMALL);
	c.proc = FAKE_BIG;
	c.vers = 3;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_reply_max(buf, n), RPC_REPLY_SMALL);
	c.vers = 2;
	c.prog = FAKE_PROG + 1;
	n = build_call(buf, sizeof(buf), &c);
	assert_int_equal(rpc_reply_max(buf, n), RPC_REPLY_SMALL);

	/* the loop serves procedure 0 itself: told from the header, whatever the program */
	assert_false(rpc_call_is_null(buf, n));
	c.proc = 0;
	n = build_call(buf, sizeof(buf), &c);
	assert_true(rpc_call_is_null(buf, n));
	assert_false(rpc_call_is_null(buf, 23));

	assert_int_equal(serve_long(FAKE_LONG, 100, &size), SUCCESS);
	assert_int_equal(serve_long(FAKE_LONG, RPC_REPLY_SMALL, &size), SYSTEM_ERR);
	assert_true(size <= RPC_REPLY_SMALL);
	assert_int_equal(serve_long(FAKE_BIG, RPC_REPLY_SMALL, &size), SUCCESS);
	assert_true(size > RPC_REPLY_SMALL && size <= FAKE_BIG_MAX);
	assert_int_equal(serve_long(FAKE_BIG, FAKE_BIG_MAX, &size), SYSTEM_ERR);
}

/*
 * A handler's bound on its result saves counting it first: the reply is the same whether
 * the bound is exact, generous, too small (counted after all) or not given.
 */
static void test_reply_bound(void **state)
{
	static const uint32_t bounds[] = { 0, 4 + 1000, 4 + 4000, 4 + 999, 1 };
	uint8_t *want, *got;
	size_t wantlen, gotlen;
	struct reply r;

	(void)state;
	want = serve_u32(FAKE_BOUNDED, 1000, &wantlen);
	parse_reply(want, wantlen, IPPROTO_TCP, &r);
	assert_int_equal(r.code, SUCCESS);
	assert_int_equal(r.restlen, 4 + 1000);
	for (size_t i = 1; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		got = serve_u32(FAKE_BOUNDED, bounds[i] << 16 | 1000, &gotlen);
		assert_int_equal(gotlen, wantlen);
		assert_memory_equal(got, want, wantlen);
		free(got);
	}
	free(want);
}

static void test_alloc(void **state)
{
	struct rpc_req rq;
	char *p[300];

	(void)state;
	memset(&rq, 0, sizeof(rq));
	rpc_alloc_free(&rq);
	for (int i = 0; i < 300; i++) {
		size_t sz = (size_t)(i * 37 % 5000) + 1;

		p[i] = rpc_alloc(&rq, sz);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % alignof(max_align_t), 0);
		for (size_t j = 0; j < sz; j++)
			assert_int_equal(p[i][j], 0);
		memset(p[i], 0xa5, sz);
	}
	assert_non_null(rpc_alloc(&rq, 0));
	rpc_alloc_free(&rq);
	assert_null(rq.rq_arena);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_authsys),
		cmocka_unit_test(test_parse_authnone),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_parse_truncated),
		cmocka_unit_test(test_parse_mutated),
		cmocka_unit_test(test_serve_denied),
		cmocka_unit_test(test_serve_unavail),
		cmocka_unit_test(test_serve_garbage),
		cmocka_unit_test(test_serve_success),
		cmocka_unit_test(test_serve_outcomes),
		cmocka_unit_test(test_reply_max),
		cmocka_unit_test(test_reply_bound),
		cmocka_unit_test(test_alloc),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
