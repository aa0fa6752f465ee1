/*
 * The contract between the transport (src/net, src/rpc) and the protocol handlers
 * (src/nfs): ONC RPC calls (RFC 5531) decoded from a record, dispatched through a static
 * table of programs, answered with XDR-encoded replies.
 *
 * Handlers run on worker threads. A handler fills its result struct and returns an
 * rpc_outcome; the dispatcher encodes the reply. Memory a result points to must come
 * from rpc_alloc() (freed after the reply is encoded): results are never xdr_free()d.
 * Decoded arguments belong to the dispatcher, which frees them after the handler.
 */
#ifndef UNFS_RPC_H
#define UNFS_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <rpc/rpc.h>

#define RPC_MAX_GROUPS 16
#define RPC_MAX_MACHINE 255
/*
 * Largest reply, record mark included, of a procedure a program does not list among its
 * large ones (rg_big_replies): see rpc_reply_max().
 */
#define RPC_REPLY_SMALL (8u << 10)

struct rpc_cred {
	uint32_t rc_flavor;      /* AUTH_NONE or AUTH_SYS */
	uint32_t rc_uid;         /* AUTH_NONE: 65534 */
	uint32_t rc_gid;
	uint32_t rc_ngroups;
	uint32_t rc_groups[RPC_MAX_GROUPS];
	char rc_machine[RPC_MAX_MACHINE + 1];
};

struct rpc_arena;

/* One call being served. Read-only for handlers except through rpc_alloc(). */
struct rpc_req {
	uint32_t rq_xid;
	uint32_t rq_prog;
	uint32_t rq_vers;
	uint32_t rq_proc;
	struct rpc_cred rq_cred;
	struct sockaddr_storage rq_peer;  /* the client */
	socklen_t rq_peerlen;
	int rq_protocol;                  /* IPPROTO_TCP or IPPROTO_UDP */
	void *rq_ctx;                     /* rpc_dispatch_init's or rpc_dispatch_set_ctx's context */
	struct rpc_arena *rq_arena;
	struct sockaddr_storage rq_local; /* our address as the client sees it (rq_locallen 0: unknown) */
	socklen_t rq_locallen;
};

/* Zeroed memory that lives until the reply is encoded. Never returns NULL (aborts on OOM). */
void *rpc_alloc(struct rpc_req *rq, size_t size);
/*
 * Uninitialized memory for data the result ends with (an opaque, e.g. READ's data): when
 * the result's encoding ends with these bytes, the reply is encoded around them in the
 * same allocation instead of copying them. head: the bytes the result encodes in front
 * of the data, a guess (any value is correct; the exact one saves a move). One per call;
 * lives like rpc_alloc() memory. Never returns NULL.
 */
void *rpc_alloc_bulk(struct rpc_req *rq, size_t size, size_t head);
/*
 * Says the result encodes in at most bytes (the procedure's result alone, without the RPC
 * header): the reply is then encoded once, into that much, instead of counted first. A
 * bound too small costs the counting pass after all, never a wrong reply.
 */
void rpc_reply_bound(struct rpc_req *rq, size_t bytes);
/*
 * Frees a reply rpc_serve() returned (free() is fine too): a large one is kept, within a
 * bound, for a later call's bulk, so its pages need not be faulted in again.
 */
void rpc_reply_free(void *reply);
/*
 * A buffer of at least size bytes from the pool rpc_reply_free() fills, or NULL when none
 * is there (no new memory is taken); *cap receives its usable size. For request records:
 * free them with rpc_reply_free() too.
 */
void *rpc_buf_take(size_t size, size_t *cap);
/*
 * Frees everything rpc_alloc() gave out for rq (rq_arena NULL is fine). The dispatcher
 * calls it after encoding; tests that call handlers directly with a zeroed rpc_req use it.
 */
void rpc_alloc_free(struct rpc_req *rq);

enum rpc_outcome {
	RPC_OUT_REPLY = 0,       /* encode the result (accept_stat SUCCESS) */
	RPC_OUT_GARBAGE_ARGS,    /* arguments were semantically unusable */
	RPC_OUT_SYSTEM_ERR,
	RPC_OUT_AUTH_TOOWEAK,    /* denied: e.g. a "secure" export and a source port >= 1024 */
	RPC_OUT_DROP,            /* send nothing */
};

typedef enum rpc_outcome (*rpc_handler_fn)(struct rpc_req *rq, void *args, void *res);

/* What a result says about the call, for the statistics (errors and STALE replies). */
enum rpc_status {
	RPC_STATUS_OK = 0,
	RPC_STATUS_ERROR,        /* the program's own status is a failure */
	RPC_STATUS_STALE,        /* a failure because a handle names nothing (counted as an error too) */
};

struct rpc_proc {
	const char *rp_name;     /* in logs, `unionnfsd-ctl stats` and Prometheus labels */
	xdrproc_t rp_xdr_args;
	size_t rp_args_size;
	xdrproc_t rp_xdr_res;
	size_t rp_res_size;
	rpc_handler_fn rp_fn;
};

/*
 * Writing procedure tables. rpcgen's routines take typed pointers and xdr_void() none; a
 * table (and an outbound call, rpc_client.h) holds the generic xdrproc_t, reached through
 * void (*)(void), which any function pointer becomes without a warning.
 */
#define RPC_XDRPROC(fn) ((xdrproc_t)(void (*)(void))(fn))
/* Arguments of XDR type argt, result of type rest: xdr_argt and sizeof(argt), and so on. */
#define RPC_PROC(name, argt, rest, fn) \
	{ name, RPC_XDRPROC(xdr_##argt), sizeof(argt), RPC_XDRPROC(xdr_##rest), sizeof(rest), fn }
/* No arguments (void), a result of type rest. */
#define RPC_PROC_NOARGS(name, rest, fn) \
	{ name, RPC_XDRPROC(xdr_void), 0, RPC_XDRPROC(xdr_##rest), sizeof(rest), fn }
/* Arguments of type argt, an empty (void) result. */
#define RPC_PROC_NORES(name, argt, fn) \
	{ name, RPC_XDRPROC(xdr_##argt), sizeof(argt), RPC_XDRPROC(xdr_void), 0, fn }
/* Neither arguments nor result (every program's NULL). */
#define RPC_PROC_VOID(name, fn) \
	{ name, RPC_XDRPROC(xdr_void), 0, RPC_XDRPROC(xdr_void), 0, fn }
/* A procedure number not served: PROC_UNAVAIL (name NULL for a number without a name). */
#define RPC_PROC_UNAVAIL(name) { name, NULL, 0, NULL, 0, NULL }

/*
 * One program served: everything the transport, the dispatcher and the statistics need to
 * know about it, so a new program is one such table and its handlers, listed in the
 * programs main hands to rpc_dispatch_init (src/nfs/program.c is an example; so is the
 * toy program of tests/unit/test_rpc_dropin.c). Procedure numbers above 31 cannot be
 * flagged in the per-version bit masks.
 */
struct rpc_program {
	uint32_t rg_prog;
	const char *rg_name;        /* the statistics' program label ("nfs"); NULL: "other" */
	uint32_t rg_vers_min;
	uint32_t rg_vers_max;
	/* procs[vers - rg_vers_min][proc]; a NULL rp_fn means PROC_UNAVAIL */
	const struct rpc_proc *const *rg_procs;
	const uint32_t *rg_nprocs;  /* per version */
	/* per version, bit p: a retransmission of procedure p gets the cached reply (drc.h) */
	const uint32_t *rg_nonidempotent;
	/*
	 * per version, bit p: procedure p may reply with up to rg_reply_big bytes (READ's
	 * data, a long list); NULL: every reply is at most RPC_REPLY_SMALL
	 */
	const uint32_t *rg_big_replies;
	size_t rg_reply_big;
	/*
	 * What the result res of procedure proc of version vers says, res being what the
	 * handler filled for a reply accepted with SUCCESS; NULL: results carry no status
	 * (every reply counts as RPC_STATUS_OK)
	 */
	enum rpc_status (*rg_status)(uint32_t vers, uint32_t proc, const void *res);
};

/* Parsed call header. Parsing never allocates; hostile input gives a clean error. */
struct rpc_call {
	uint32_t rc_xid;
	uint32_t rc_prog;
	uint32_t rc_vers;
	uint32_t rc_proc;
	struct rpc_cred rc_cred;
	size_t rc_args_off;      /* offset of the procedure arguments in the record */
};

enum rpc_parse {
	RPC_PARSE_OK = 0,
	RPC_PARSE_DROP,          /* not a call, or too short to answer: drop silently */
	RPC_PARSE_RPC_MISMATCH,  /* rpcvers != 2: reply MSG_DENIED RPC_MISMATCH */
	RPC_PARSE_BADCRED,       /* malformed credentials: MSG_DENIED AUTH_BADCRED */
	RPC_PARSE_REJECTEDCRED,  /* unsupported flavor: MSG_DENIED AUTH_REJECTEDCRED */
};

enum rpc_parse rpc_parse_call(const void *rec, size_t len, struct rpc_call *call);

/*
 * Whether rec names procedure 0, every program's NULL procedure (RFC 5531 section 12: no
 * arguments, no work), read from the header without parsing it (as rpc_reply_max): a NULL
 * handler must neither block nor touch a file, and a malformed record is refused by the
 * dispatcher before any handler, so the transport may serve such records on the event
 * loop, sparing them a worker's wake-up. Any thread.
 */
bool rpc_call_is_null(const void *rec, size_t len);

/*
 * The largest reply, record mark included, the dispatcher may send for the call in rec
 * (its program, version and procedure; RPC_REPLY_SMALL for anything it cannot tell or does
 * not serve). A reply that would be longer is replaced by SYSTEM_ERR, so a transport may
 * count on this bound for the memory a call in flight will need. Any thread, once the
 * programs are registered.
 */
size_t rpc_reply_max(const void *rec, size_t len);

/*
 * The text of sa's address, without the port, into buf (INET6_ADDRSTRLEN bytes are enough):
 * an IPv4-mapped IPv6 address is written as IPv4, so a client is named alike whether it
 * came over IPv4 or a dual-stack socket. False for sa NULL, a family other than AF_INET and
 * AF_INET6, a len too short for the family, or a buf too small. Any thread.
 */
bool rpc_addr_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t buflen);

#define RPC_MAX_PROGRAMS 16

/*
 * Registers the programs served and the context handed to their handlers. Call once,
 * before serving (tests may call it again between runs).
 */
void rpc_dispatch_init(const struct rpc_program *const *programs, int nprograms, void *ctx);
/*
 * The context handed to the handlers of program prog instead of rpc_dispatch_init's (each
 * program may have its own: NLM's is its lock service). After rpc_dispatch_init, before
 * serving; a program not registered is ignored.
 */
void rpc_dispatch_set_ctx(uint32_t prog, void *ctx);
/*
 * Whether calls of program prog are served over UDP (default yes): a program off there has
 * its UDP calls dropped unanswered on every listener, so a UDP port opened for another
 * program (NLM's) does not serve it. After rpc_dispatch_init, before serving.
 */
void rpc_dispatch_set_udp(uint32_t prog, bool served);

/*
 * The registered programs, for whoever reports on them (the statistics): how many, the
 * one at index i (0 <= i < rpc_program_count(), in rpc_dispatch_init's order; NULL past
 * them), and the one numbered prog with its index in *index (NULL and -1: not
 * registered). Any thread, once registered.
 */
int rpc_program_count(void);
const struct rpc_program *rpc_program_at(int i);
const struct rpc_program *rpc_program_find(uint32_t prog, int *index);

/* Procedure proc of version vers of pg, or NULL when pg has no such version or procedure. */
const struct rpc_proc *rpc_program_proc(const struct rpc_program *pg, uint32_t vers, uint32_t proc);

/*
 * The name of procedure proc of pg in its lowest version (the statistics count a
 * procedure number across versions), or NULL when it has none.
 */
const char *rpc_proc_name(const struct rpc_program *pg, uint32_t proc);

/*
 * Serves one complete record (worker thread): parses, dispatches, encodes. Returns a
 * malloc()ed reply of *outlen bytes, with 4 bytes reserved at the front for a TCP record
 * mark (filled in for TCP, skipped for UDP), or NULL when nothing is to be sent.
 */
void *rpc_serve(const void *rec, size_t len, const struct sockaddr *peer, socklen_t peerlen,
		int protocol, size_t *outlen);

/* rpc_serve() that also tells handlers the local address the call arrived at (may be NULL). */
void *rpc_serve_at(const void *rec, size_t len, const struct sockaddr *peer, socklen_t peerlen,
		   const struct sockaddr *local, socklen_t locallen, int protocol, size_t *outlen);

#endif
