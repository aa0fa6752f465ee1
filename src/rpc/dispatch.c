/*
 * Dispatch: one record in, one encoded reply out (RFC 5531 section 9). Runs on worker
 * threads; the program table is set once before serving and only read afterwards.
 *
 * Per call the dispatcher owns three allocations: the decoded arguments (calloc, freed
 * with xdr_free after the reply is encoded, so a result may still point into them), the
 * request arena behind rpc_alloc() (results and everything they point to), and the
 * reply buffer handed to the caller. A call may also hold one bulk buffer (rpc_alloc_bulk):
 * the reply is then encoded around it, in the same allocation, and the bulk becomes the
 * reply buffer.
 *
 * A handler may park its call (blocking.h) to wait for another call's work: whatever it
 * answered is dropped, nothing is counted, and the call runs again from its record later,
 * its duplicate request cache entry kept running meanwhile.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "blocking.h"
#include "call_ctx.h"
#include "drc.h"
#include "log.h"
#include "rpc.h"
#include "stats.h"

#define RPC_VERSION 2
#define ARENA_BLOCK 4096
#define ARENA_ALIGN alignof(max_align_t)
/* Record mark plus the accepted reply header in front of a result (dispatch_header_size). */
#define BULK_RPC_HEAD (4 + 24)
/* Room behind a bulk for the opaque's padding. */
#define BULK_TAIL 4
/* Largest head a handler may ask for in front of its bulk data. */
#define BULK_MAX_HEAD 4096

struct arena_block {
	struct arena_block *ab_next;
	size_t ab_size;                  /* usable bytes in ab_data */
	size_t ab_used;
	alignas(max_align_t) unsigned char ab_data[];
};

struct rpc_arena {
	struct arena_block *ra_head;     /* the block with free space first */
	unsigned char *ra_bulk;          /* rpc_alloc_bulk's allocation, NULL once the reply took it */
	size_t ra_bulk_off;              /* where the data starts in ra_bulk */
	size_t ra_bulk_cap;              /* bytes in ra_bulk */
	size_t ra_result_max;            /* rpc_reply_bound's, 0: none given */
};

/*
 * Large reply buffers given back by rpc_reply_free(), for the next bulk. From malloc
 * each would be a fresh mmap (or memory just trimmed off a thread's heap), so every 1 MiB
 * READ would fault in and zero 256 new pages; the pool is bounded, so memory still goes
 * back to the system after a burst.
 */
#define POOL_MIN (128u << 10)            /* smaller buffers are cheap for malloc */
#define POOL_MAX_BYTES (32u << 20)
#define POOL_MAX_BUFS 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *pool_bufs[POOL_MAX_BUFS];
static size_t pool_sizes[POOL_MAX_BUFS];
static size_t pool_n, pool_bytes;

__thread struct call_ctx call_ctx_self;

static const struct rpc_program *dispatch_programs[RPC_MAX_PROGRAMS];
static int dispatch_nprograms;
static void *dispatch_ctxs[RPC_MAX_PROGRAMS];  /* rq_ctx of each program's handlers */
static bool dispatch_no_udp[RPC_MAX_PROGRAMS];  /* its calls over UDP are dropped */

static struct rpc_arena *arena_get(struct rpc_req *rq)
{
	if (rq->rq_arena == NULL) {
		rq->rq_arena = calloc(1, sizeof(*rq->rq_arena));
		if (rq->rq_arena == NULL)
			abort();
	}
	return rq->rq_arena;
}

void *rpc_alloc(struct rpc_req *rq, size_t size)
{
	struct rpc_arena *ar;
	struct arena_block *b;
	size_t bsize;
	void *p;

	if (size == 0)
		size = 1;
	if (size > SIZE_MAX / 2)
		abort();
	size = (size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	ar = arena_get(rq);
	b = ar->ra_head;
	if (b != NULL && b->ab_size - b->ab_used >= size) {
		p = b->ab_data + b->ab_used;
		b->ab_used += size;
		return p;
	}
	bsize = size > ARENA_BLOCK / 2 ? size : ARENA_BLOCK;
	b = calloc(1, sizeof(*b) + bsize);
	if (b == NULL)
		abort();
	b->ab_size = bsize;
	b->ab_used = size;
	/* A large allocation gets a block of its own, behind the block still being filled. */
	if (bsize == size && ar->ra_head != NULL) {
		b->ab_next = ar->ra_head->ab_next;
		ar->ra_head->ab_next = b;
	} else {
		b->ab_next = ar->ra_head;
		ar->ra_head = b;
	}
	return b->ab_data;
}

/* A pooled buffer of at least cap bytes, or NULL. */
static void *pool_take(size_t cap)
{
	void *p = NULL;

	if (cap < POOL_MIN)
		return NULL;
	pthread_mutex_lock(&pool_lock);
	for (size_t i = pool_n; i-- > 0;) {
		if (pool_sizes[i] >= cap) {
			p = pool_bufs[i];
			pool_bytes -= pool_sizes[i];
			pool_n--;
			pool_bufs[i] = pool_bufs[pool_n];
			pool_sizes[i] = pool_sizes[pool_n];
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	return p;
}

void *rpc_buf_take(size_t size, size_t *cap)
{
	void *p = pool_take(size);

	if (p != NULL)
		*cap = malloc_usable_size(p);
	return p;
}

void rpc_reply_free(void *reply)
{
	size_t size;

	if (reply == NULL)
		return;
	size = malloc_usable_size(reply);
	if (size >= POOL_MIN) {
		pthread_mutex_lock(&pool_lock);
		if (pool_n < POOL_MAX_BUFS && pool_bytes + size <= POOL_MAX_BYTES) {
			pool_bufs[pool_n] = reply;
			pool_sizes[pool_n] = size;
			pool_n++;
			pool_bytes += size;
			reply = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(reply);
}

void *rpc_alloc_bulk(struct rpc_req *rq, size_t size, size_t head)
{
	struct rpc_arena *ar = arena_get(rq);
	size_t off;

	if (size > SIZE_MAX / 2)
		abort();
	/* One per call: a second one is only memory. */
	if (ar->ra_bulk != NULL || head > BULK_MAX_HEAD)
		return rpc_alloc(rq, size);
	off = BULK_RPC_HEAD + head;
	ar->ra_bulk_cap = off + size + BULK_TAIL;
	ar->ra_bulk_off = off;
	/* Not zeroed: the handler fills what it hands out, and only that is encoded. */
	ar->ra_bulk = pool_take(ar->ra_bulk_cap);
	if (ar->ra_bulk == NULL)
		ar->ra_bulk = malloc(ar->ra_bulk_cap);
	if (ar->ra_bulk == NULL)
		abort();
	return ar->ra_bulk + off;
}

void rpc_reply_bound(struct rpc_req *rq, size_t bytes)
{
	arena_get(rq)->ra_result_max = bytes;
}

void rpc_alloc_free(struct rpc_req *rq)
{
	struct rpc_arena *ar = rq->rq_arena;
	struct arena_block *b, *next;

	if (ar == NULL)
		return;
	rpc_reply_free(ar->ra_bulk);
	for (b = ar->ra_head; b != NULL; b = next) {
		next = b->ab_next;
		free(b);
	}
	free(ar);
	rq->rq_arena = NULL;
}

void rpc_dispatch_init(const struct rpc_program *const *programs, int nprograms, void *ctx)
{
	if (nprograms > RPC_MAX_PROGRAMS) {
		log_err("rpc: %d programs registered, only %d are served; raise RPC_MAX_PROGRAMS",
			nprograms, RPC_MAX_PROGRAMS);
		nprograms = RPC_MAX_PROGRAMS;
	}
	for (int i = 0; i < nprograms; i++) {
		dispatch_programs[i] = programs[i];
		dispatch_ctxs[i] = ctx;
		dispatch_no_udp[i] = false;
	}
	dispatch_nprograms = nprograms < 0 ? 0 : nprograms;
}

void rpc_dispatch_set_ctx(uint32_t prog, void *ctx)
{
	for (int i = 0; i < dispatch_nprograms; i++)
		if (dispatch_programs[i]->rg_prog == prog)
			dispatch_ctxs[i] = ctx;
}

void rpc_dispatch_set_udp(uint32_t prog, bool served)
{
	for (int i = 0; i < dispatch_nprograms; i++)
		if (dispatch_programs[i]->rg_prog == prog)
			dispatch_no_udp[i] = !served;
}

/* Static, so that the per-call paths (rpc_serve_at, rpc_reply_max) inline them. */
static const struct rpc_program *dispatch_find(uint32_t prog, void **ctx, bool *no_udp)
{
	for (int i = 0; i < dispatch_nprograms; i++) {
		if (dispatch_programs[i]->rg_prog == prog) {
			*ctx = dispatch_ctxs[i];
			*no_udp = dispatch_no_udp[i];
			return dispatch_programs[i];
		}
	}
	return NULL;
}

static const struct rpc_proc *dispatch_proc(const struct rpc_program *pg, uint32_t vers,
					    uint32_t proc)
{
	uint32_t v;

	if (vers < pg->rg_vers_min || vers > pg->rg_vers_max)
		return NULL;
	v = vers - pg->rg_vers_min;
	if (pg->rg_procs[v] == NULL || proc >= pg->rg_nprocs[v])
		return NULL;
	return &pg->rg_procs[v][proc];
}

int rpc_program_count(void)
{
	return dispatch_nprograms;
}

const struct rpc_program *rpc_program_at(int i)
{
	return i >= 0 && i < dispatch_nprograms ? dispatch_programs[i] : NULL;
}

const struct rpc_program *rpc_program_find(uint32_t prog, int *index)
{
	for (int i = 0; i < dispatch_nprograms; i++) {
		if (dispatch_programs[i]->rg_prog == prog) {
			*index = i;
			return dispatch_programs[i];
		}
	}
	*index = -1;
	return NULL;
}

const struct rpc_proc *rpc_program_proc(const struct rpc_program *pg, uint32_t vers, uint32_t proc)
{
	return dispatch_proc(pg, vers, proc);
}

const char *rpc_proc_name(const struct rpc_program *pg, uint32_t proc)
{
	const struct rpc_proc *p = rpc_program_proc(pg, pg->rg_vers_min, proc);

	return p != NULL ? p->rp_name : NULL;
}

/* What to say in the reply, short of the result itself. */
struct dispatch_reply {
	uint32_t dr_stat;        /* MSG_ACCEPTED or MSG_DENIED */
	uint32_t dr_code;        /* accept_stat, or reject_stat when denied */
	uint32_t dr_auth;        /* auth_stat for AUTH_ERROR */
	uint32_t dr_low;         /* PROG_MISMATCH / RPC_MISMATCH range */
	uint32_t dr_high;
	xdrproc_t dr_xdr;        /* result encoder (SUCCESS only) */
	void *dr_res;
};

static bool dispatch_put(XDR *xdrs, uint32_t v)
{
	return xdr_u_int(xdrs, &v);
}

static bool dispatch_encode_header(XDR *xdrs, uint32_t xid, const struct dispatch_reply *r)
{
	if (!dispatch_put(xdrs, xid) || !dispatch_put(xdrs, REPLY) || !dispatch_put(xdrs, r->dr_stat))
		return false;
	if (r->dr_stat == MSG_DENIED) {
		if (!dispatch_put(xdrs, r->dr_code))
			return false;
		if (r->dr_code == RPC_MISMATCH)
			return dispatch_put(xdrs, r->dr_low) && dispatch_put(xdrs, r->dr_high);
		return dispatch_put(xdrs, r->dr_auth);
	}
	/* Our verifier is always AUTH_NONE with an empty body. */
	if (!dispatch_put(xdrs, AUTH_NONE) || !dispatch_put(xdrs, 0) || !dispatch_put(xdrs, r->dr_code))
		return false;
	if (r->dr_code == PROG_MISMATCH)
		return dispatch_put(xdrs, r->dr_low) && dispatch_put(xdrs, r->dr_high);
	return true;
}

/* Header bytes for r: xid, mtype, reply_stat, then the variant. */
static size_t dispatch_header_size(const struct dispatch_reply *r)
{
	if (r->dr_stat == MSG_DENIED)
		return 4 * (r->dr_code == RPC_MISMATCH ? 6 : 5);
	return 4 * (r->dr_code == PROG_MISMATCH ? 8 : 6);
}

/*
 * Counting pass of an encoding (what xdr_sizeof does) that also notes where the bulk
 * buffer's bytes go, so the reply can be laid out around them.
 */
struct dispatch_measure {
	const char *dm_bulk;             /* the bulk data to look for, or NULL */
	size_t dm_pos;
	size_t dm_bulk_pos;              /* SIZE_MAX: not in the encoding */
	size_t dm_bulk_len;
};

static struct dispatch_measure *measure_of(XDR *x)
{
	return (struct dispatch_measure *)(void *)x->x_public;
}

static bool_t measure_putlong(XDR *x, const long *v)
{
	(void)v;
	measure_of(x)->dm_pos += 4;
	return TRUE;
}

static bool_t measure_putbytes(XDR *x, const char *p, u_int n)
{
	struct dispatch_measure *m = measure_of(x);

	if (p == m->dm_bulk && n > 0 && m->dm_bulk_pos == SIZE_MAX) {
		m->dm_bulk_pos = m->dm_pos;
		m->dm_bulk_len = n;
	}
	m->dm_pos += n;
	return TRUE;
}

static u_int measure_getpos(XDR *x)
{
	return (u_int)measure_of(x)->dm_pos;
}

static bool_t measure_no_setpos(XDR *x, u_int pos)
{
	(void)x;
	(void)pos;
	return FALSE;
}

/* Encoders take the slow path when there is nothing to inline into. */
static int32_t *measure_no_inline(XDR *x, u_int len)
{
	(void)x;
	(void)len;
	return NULL;
}

static void measure_destroy(XDR *x)
{
	(void)x;
}

static bool_t measure_no_control(XDR *x, int req, void *info)
{
	(void)x;
	(void)req;
	(void)info;
	return FALSE;
}

static bool dispatch_measure(xdrproc_t fn, void *res, struct dispatch_measure *m)
{
	static const struct xdr_ops ops = {
		.x_putlong = measure_putlong,
		.x_putbytes = measure_putbytes,
		.x_getpostn = measure_getpos,
		.x_setpostn = measure_no_setpos,
		.x_inline = measure_no_inline,
		.x_destroy = measure_destroy,
		.x_control = measure_no_control,
	};
	XDR x;

	memset(&x, 0, sizeof(x));
	x.x_op = XDR_ENCODE;
	x.x_ops = &ops;
	x.x_public = (char *)m;
	m->dm_pos = 0;
	m->dm_bulk_pos = SIZE_MAX;
	return fn(&x, res);
}

/* Encoding into a bulk buffer: the data already sits where it goes and is stepped over. */
struct dispatch_inplace {
	const struct xdr_ops *di_mem;    /* the memory stream's own operations */
	const char *di_base;             /* where the stream's position 0 is */
};

static bool_t inplace_putbytes(XDR *x, const char *p, u_int n)
{
	const struct dispatch_inplace *di = (const struct dispatch_inplace *)(void *)x->x_public;
	u_int pos = XDR_GETPOS(x);

	if (n > 0 && p == di->di_base + pos)
		return XDR_SETPOS(x, pos + n);
	return di->di_mem->x_putbytes(x, p, n);
}

/*
 * The reply laid out around the bulk data when the result ends with it (and its padding):
 * the bulk allocation then holds the whole reply and the data is never copied. NULL when
 * the result does not end with the bulk.
 */
static unsigned char *dispatch_take_bulk(struct rpc_arena *ar, const struct dispatch_measure *m,
					 size_t head, size_t body)
{
	size_t pad, pre;
	unsigned char *out;

	if (ar == NULL || ar->ra_bulk == NULL || m->dm_bulk_pos == SIZE_MAX)
		return NULL;
	pad = (4 - m->dm_bulk_len % 4) % 4;
	if (m->dm_bulk_pos + m->dm_bulk_len + pad != body)
		return NULL;
	pre = head + m->dm_bulk_pos;
	if (pre + m->dm_bulk_len + pad > ar->ra_bulk_cap)
		return NULL;
	/* The handler's guess of its head was off: rare, and still one copy at most. */
	if (pre != ar->ra_bulk_off)
		memmove(ar->ra_bulk + pre, ar->ra_bulk + ar->ra_bulk_off, m->dm_bulk_len);
	out = ar->ra_bulk;
	ar->ra_bulk = NULL;
	return out;
}

/* Puts the record mark (TCP) or nothing (UDP) in the 4 bytes before a reply of total. */
static void dispatch_mark(unsigned char *out, int protocol, size_t total)
{
	if (protocol == IPPROTO_TCP) {
		uint32_t mark = htonl(0x80000000u | (uint32_t)(total - 4));

		memcpy(out, &mark, 4);
	} else {
		memset(out, 0, 4);
	}
}

/*
 * A successful result without bulk data encoded in one pass into the room its handler said
 * is enough (rpc_reply_bound); NULL when it said nothing or was wrong.
 */
static void *dispatch_encode_bounded(uint32_t xid, int protocol, struct dispatch_reply *r,
				     const struct rpc_arena *ar, size_t *outlen)
{
	size_t cap, total;
	unsigned char *out;
	XDR xdrs;
	bool ok;

	if (ar == NULL || ar->ra_result_max == 0 || ar->ra_bulk != NULL ||
	    r->dr_stat != MSG_ACCEPTED || r->dr_code != SUCCESS || r->dr_xdr == NULL ||
	    ar->ra_result_max > 0x7fffffffu)
		return NULL;
	cap = 4 + dispatch_header_size(r) + ar->ra_result_max;
	out = malloc(cap);
	if (out == NULL)
		return NULL;
	xdrmem_create(&xdrs, (char *)out + 4, (u_int)(cap - 4), XDR_ENCODE);
	ok = dispatch_encode_header(&xdrs, xid, r) && r->dr_xdr(&xdrs, r->dr_res);
	total = 4 + xdr_getpos(&xdrs);
	xdr_destroy(&xdrs);
	if (!ok) {
		free(out);
		return NULL;
	}
	dispatch_mark(out, protocol, total);
	*outlen = total;
	return out;
}

static void *dispatch_encode(uint32_t xid, int protocol, struct dispatch_reply *r,
			     struct rpc_arena *ar, size_t *outlen)
{
	struct dispatch_measure m = { .dm_bulk_pos = SIZE_MAX };
	struct dispatch_inplace di;
	struct xdr_ops inplace_ops;
	size_t body = 0, head, total;
	unsigned char *out;
	XDR xdrs;
	bool ok;

	out = dispatch_encode_bounded(xid, protocol, r, ar, outlen);
	if (out != NULL)
		return out;
	/* A failed count leaves body 0; encoding below then fails and says so. */
	if (r->dr_stat == MSG_ACCEPTED && r->dr_code == SUCCESS && r->dr_xdr != NULL) {
		if (ar != NULL && ar->ra_bulk != NULL)
			m.dm_bulk = (const char *)ar->ra_bulk + ar->ra_bulk_off;
		if (dispatch_measure(r->dr_xdr, r->dr_res, &m))
			body = m.dm_pos;
		else
			m.dm_bulk_pos = SIZE_MAX;
	}
	head = 4 + dispatch_header_size(r);
	total = head + body;
	if (total - 4 > 0x7fffffffu) {
		log_err("rpc: reply to xid %#x of %zu bytes is too large to send", xid, total);
		return NULL;
	}
	out = dispatch_take_bulk(ar, &m, head, body);
	if (out == NULL) {
		m.dm_bulk_pos = SIZE_MAX;
		out = malloc(total);
	}
	if (out == NULL) {
		log_err("rpc: out of memory for a %zu-byte reply", total);
		return NULL;
	}
	xdrmem_create(&xdrs, (char *)out + 4, (u_int)(total - 4), XDR_ENCODE);
	if (m.dm_bulk_pos != SIZE_MAX) {
		di.di_mem = xdrs.x_ops;
		di.di_base = (const char *)out + 4;
		inplace_ops = *xdrs.x_ops;
		inplace_ops.x_putbytes = inplace_putbytes;
		xdrs.x_ops = &inplace_ops;
		xdrs.x_public = (char *)&di;
	}
	ok = dispatch_encode_header(&xdrs, xid, r);
	if (ok && r->dr_stat == MSG_ACCEPTED && r->dr_code == SUCCESS && r->dr_xdr != NULL)
		ok = r->dr_xdr(&xdrs, r->dr_res);
	if (ok && xdr_getpos(&xdrs) != total - 4)
		ok = false;
	xdr_destroy(&xdrs);
	if (!ok) {
		struct dispatch_reply err = { .dr_stat = MSG_ACCEPTED, .dr_code = SYSTEM_ERR };

		rpc_reply_free(out);
		if (r->dr_code == SYSTEM_ERR)
			return NULL;
		log_err("rpc: cannot encode the result for xid %#x; answering SYSTEM_ERR", xid);
		return dispatch_encode(xid, protocol, &err, NULL, outlen);
	}
	dispatch_mark(out, protocol, total);
	*outlen = total;
	return out;
}

static size_t dispatch_reply_max(uint32_t prog, uint32_t vers, uint32_t proc)
{
	void *ctx;
	bool no_udp;
	const struct rpc_program *pg = dispatch_find(prog, &ctx, &no_udp);

	if (pg == NULL || pg->rg_big_replies == NULL || vers < pg->rg_vers_min ||
	    vers > pg->rg_vers_max || proc >= 32 ||
	    !(pg->rg_big_replies[vers - pg->rg_vers_min] >> proc & 1))
		return RPC_REPLY_SMALL;
	return pg->rg_reply_big;
}

/*
 * Program, version and procedure of the call in rec, read where they stand (after xid,
 * message type and RPC version) without parsing it. False when rec is too short for them.
 */
static bool dispatch_peek(const void *rec, size_t len, uint32_t w[3])
{
	if (len < 24)
		return false;
	memcpy(w, (const uint8_t *)rec + 12, 3 * sizeof(w[0]));
	for (int i = 0; i < 3; i++)
		w[i] = ntohl(w[i]);
	return true;
}

size_t rpc_reply_max(const void *rec, size_t len)
{
	uint32_t w[3];

	if (!dispatch_peek(rec, len, w))
		return RPC_REPLY_SMALL;
	return dispatch_reply_max(w[0], w[1], w[2]);
}

bool rpc_call_is_null(const void *rec, size_t len)
{
	uint32_t w[3];

	return dispatch_peek(rec, len, w) && w[2] == NULLPROC;
}

/*
 * Whether a reply of len bytes keeps to its procedure's bound. The transport counted on
 * the bound for its memory, so a longer reply is a bug: logged, and answered SYSTEM_ERR.
 */
static bool dispatch_within_bound(const struct rpc_call *call, const struct rpc_proc *proc,
				  size_t len)
{
	size_t max = dispatch_reply_max(call->rc_prog, call->rc_vers, call->rc_proc);

	if (len <= max)
		return true;
	log_err("rpc: the %zu-byte reply of %s (program %u version %u) exceeds its bound of %zu "
		"bytes; answering SYSTEM_ERR", len, proc->rp_name ? proc->rp_name : "?",
		call->rc_prog, call->rc_vers, max);
	return false;
}

static void *dispatch_serve(const void *rec, size_t len, const struct sockaddr *peer,
			    socklen_t peerlen, const struct sockaddr *local, socklen_t locallen,
			    int protocol, size_t *outlen)
{
	struct rpc_call call;
	struct rpc_req rq;
	struct dispatch_reply r = { .dr_stat = MSG_ACCEPTED, .dr_code = SUCCESS };
	const struct rpc_program *prog;
	const struct rpc_proc *proc = NULL;
	void *args = NULL, *out = NULL, *ctx = NULL;
	bool no_udp = false;
	struct drc_ticket drc = { 0 };
	enum rpc_outcome outcome;
	XDR xdrs;
	bool decoded;
	/* A call run again after a park counts its wait too. */
	uint64_t stats_t0 = stats_clock() - blocking_parked_ns();

	memset(&rq, 0, sizeof(rq));
	switch (rpc_parse_call(rec, len, &call)) {
	case RPC_PARSE_OK:
		break;
	case RPC_PARSE_RPC_MISMATCH:
		r = (struct dispatch_reply){ .dr_stat = MSG_DENIED, .dr_code = RPC_MISMATCH,
					     .dr_low = RPC_VERSION, .dr_high = RPC_VERSION };
		goto encode;
	case RPC_PARSE_BADCRED:
		r = (struct dispatch_reply){ .dr_stat = MSG_DENIED, .dr_code = AUTH_ERROR,
					     .dr_auth = AUTH_BADCRED };
		goto encode;
	case RPC_PARSE_REJECTEDCRED:
		r = (struct dispatch_reply){ .dr_stat = MSG_DENIED, .dr_code = AUTH_ERROR,
					     .dr_auth = AUTH_REJECTEDCRED };
		goto encode;
	case RPC_PARSE_DROP:
	default:
		return NULL;
	}

	prog = dispatch_find(call.rc_prog, &ctx, &no_udp);
	if (prog == NULL) {
		r.dr_code = PROG_UNAVAIL;
		goto encode;
	}
	if (no_udp && protocol == IPPROTO_UDP)
		return NULL;
	if (call.rc_vers < prog->rg_vers_min || call.rc_vers > prog->rg_vers_max) {
		r.dr_code = PROG_MISMATCH;
		r.dr_low = prog->rg_vers_min;
		r.dr_high = prog->rg_vers_max;
		goto encode;
	}
	proc = dispatch_proc(prog, call.rc_vers, call.rc_proc);
	if (proc == NULL || proc->rp_fn == NULL) {
		proc = NULL;
		r.dr_code = PROC_UNAVAIL;
		goto encode;
	}
	if (prog->rg_nonidempotent != NULL && call.rc_proc < 32 &&
	    (prog->rg_nonidempotent[call.rc_vers - prog->rg_vers_min] >> call.rc_proc & 1) &&
	    drc_begin(&call, rec, len, peer, peerlen, protocol, blocking_resumed(), &drc, &out,
		      outlen) != DRC_MISS)
		goto out;

	args = calloc(1, proc->rp_args_size ? proc->rp_args_size : 1);
	if (args == NULL) {
		r.dr_code = SYSTEM_ERR;
		goto encode;
	}
	xdrmem_create(&xdrs, (char *)rec + call.rc_args_off, (u_int)(len - call.rc_args_off),
		      XDR_DECODE);
	decoded = proc->rp_xdr_args == NULL || proc->rp_xdr_args(&xdrs, args);
	xdr_destroy(&xdrs);
	if (!decoded) {
		log_debug("rpc: undecodable arguments for %s (program %u version %u)",
			  proc->rp_name ? proc->rp_name : "?", call.rc_prog, call.rc_vers);
		r.dr_code = GARBAGE_ARGS;
		goto encode;
	}

	rq.rq_xid = call.rc_xid;
	rq.rq_prog = call.rc_prog;
	rq.rq_vers = call.rc_vers;
	rq.rq_proc = call.rc_proc;
	rq.rq_cred = call.rc_cred;
	if (peer != NULL && peerlen > 0 && peerlen <= sizeof(rq.rq_peer)) {
		memcpy(&rq.rq_peer, peer, peerlen);
		rq.rq_peerlen = peerlen;
	}
	if (local != NULL && locallen > 0 && locallen <= sizeof(rq.rq_local)) {
		memcpy(&rq.rq_local, local, locallen);
		rq.rq_locallen = locallen;
	}
	rq.rq_protocol = protocol;
	rq.rq_ctx = ctx;
	r.dr_res = rpc_alloc(&rq, proc->rp_res_size);
	r.dr_xdr = proc->rp_xdr_res;

	outcome = proc->rp_fn(&rq, args, r.dr_res);
	if (blocking_parked()) {
		/* Its cache entry stays running: retransmissions are dropped, the next run takes it. */
		if (proc->rp_xdr_args != NULL)
			xdr_free(proc->rp_xdr_args, args);
		free(args);
		rpc_alloc_free(&rq);
		return NULL;
	}
	switch (outcome) {
	case RPC_OUT_REPLY:
		break;
	case RPC_OUT_GARBAGE_ARGS:
		r.dr_code = GARBAGE_ARGS;
		break;
	case RPC_OUT_SYSTEM_ERR:
		r.dr_code = SYSTEM_ERR;
		break;
	case RPC_OUT_AUTH_TOOWEAK:
		r = (struct dispatch_reply){ .dr_stat = MSG_DENIED, .dr_code = AUTH_ERROR,
					     .dr_auth = AUTH_TOOWEAK };
		break;
	case RPC_OUT_DROP:
	default:
		goto out;
	}

encode:
	out = dispatch_encode(call.rc_xid, protocol, &r, rq.rq_arena, outlen);
	if (out != NULL && proc != NULL && !dispatch_within_bound(&call, proc, *outlen)) {
		rpc_reply_free(out);
		r = (struct dispatch_reply){ .dr_stat = MSG_ACCEPTED, .dr_code = SYSTEM_ERR };
		out = dispatch_encode(call.rc_xid, protocol, &r, NULL, outlen);
	}
out:
	drc_store(&drc, out, out != NULL ? *outlen : 0);
	if (args != NULL) {
		if (proc != NULL && proc->rp_xdr_args != NULL)
			xdr_free(proc->rp_xdr_args, args);
		free(args);
	}
	stats_call(proc != NULL ? &call : NULL, stats_t0, len, out != NULL ? *outlen : 0, peer, peerlen,
		   r.dr_stat == MSG_ACCEPTED && r.dr_code == SUCCESS ? r.dr_res : NULL);
	rpc_alloc_free(&rq);
	return out;
}

/* The one place a call's context (call_ctx.h) is set up and cleared. */
void *rpc_serve_at(const void *rec, size_t len, const struct sockaddr *peer, socklen_t peerlen,
		   const struct sockaddr *local, socklen_t locallen, int protocol, size_t *outlen)
{
	void *out;

	call_ctx_clear(); /* whatever ran on this thread since the last call is not this call */
	out = dispatch_serve(rec, len, peer, peerlen, local, locallen, protocol, outlen);
	call_ctx_clear();
	return out;
}

void *rpc_serve(const void *rec, size_t len, const struct sockaddr *peer, socklen_t peerlen,
		int protocol, size_t *outlen)
{
	return rpc_serve_at(rec, len, peer, peerlen, NULL, 0, protocol, outlen);
}
