/*
 * The NLM v4 service (include/nlm.h) through the dispatcher, with its outside calls replaced
 * (struct nlm_hooks): a handle is "F" and a fileid, callbacks are recorded instead of sent,
 * NSM monitoring is counted. Covers host keying by address (two clients both called
 * "guest" with the same svid and oh), grace refusals and reclaims, the *_MSG forms and their
 * *_RES calls, a blocked LOCK granted by GRANTED_MSG and given back by a refusing
 * GRANTED_RES or a callback that never arrives, CANCEL, FREE_ALL and the reboot hook (the
 * caller's own host only), reclaims outside grace, hosts given back once they hold nothing,
 * UDP callers' bounded costs, permission, releases on removed files, SHARE conflicts,
 * NM_LOCK, GRANTED, stale handles and limits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nfs.h"
#include "nlm.h"
#include "rpc_client.h"

#define A "127.0.0.1"
#define B "127.0.0.2"
#define C "127.0.0.3"
#define FILE1 101
#define FILE2 102
#define DIR1 200
#define SENT_MAX 16

/* ---- the hooks ---- */

struct sent {
	uint32_t proc;
	int protocol;
	char to[INET6_ADDRSTRLEN];
	uint16_t port;
	nlm4_stats stat;            /* *_RES */
	uint8_t cookie[16];         /* GRANTED_MSG: ours; *_RES: the caller's, repeated */
	size_t cookielen;
	int32_t svid;
	uint64_t offset;
	unsigned attempts;
	void (*done)(void *arg, int status, XDR *reply);
	void *arg;
};

static struct {
	struct sent sent[SENT_MAX];
	int nsent;
	int monitors;
	int unmonitors;
	int monitor_err;
	bool previous;
} h;

static int hook_send(void *arg, const struct rpc_client_call *c)
{
	struct sent *s = &h.sent[h.nsent++];
	const nlm4_netobj *cookie = NULL;

	(void)arg;
	assert_true(h.nsent <= SENT_MAX);
	assert_int_equal(c->prog, NLM_PROG);
	assert_int_equal(c->vers, NLM_VERS4);
	memset(s, 0, sizeof(*s));
	s->proc = c->proc;
	s->protocol = c->protocol;
	inet_ntop(AF_INET, &((const struct sockaddr_in *)c->to)->sin_addr, s->to, sizeof(s->to));
	s->port = ntohs(((const struct sockaddr_in *)c->to)->sin_port);
	s->done = c->done;
	s->arg = c->arg;
	s->attempts = c->attempts;
	if (c->proc == NLMPROC4_GRANTED_MSG) {
		const nlm4_testargs *a = c->args;

		cookie = &a->cookie;
		s->svid = a->alock.svid;
		s->offset = a->alock.l_offset;
	} else if (c->proc == NLMPROC4_TEST_RES) {
		const nlm4_testres *r = c->args;

		cookie = &r->cookie;
		s->stat = r->stat.stat;
	} else {
		const nlm4_res *r = c->args;

		cookie = &r->cookie;
		s->stat = r->stat.stat;
	}
	assert_true(cookie->nlm4_netobj_len <= sizeof(s->cookie));
	memcpy(s->cookie, cookie->nlm4_netobj_val, cookie->nlm4_netobj_len);
	s->cookielen = cookie->nlm4_netobj_len;
	return 0;
}

static int hook_monitor(void *arg, const struct sockaddr *client, socklen_t len,
			const char *caller_name, const struct sockaddr *local, socklen_t locallen)
{
	(void)arg;
	(void)client;
	(void)len;
	(void)caller_name;
	(void)local;
	(void)locallen;
	h.monitors++;
	return h.monitor_err;
}

/* A handle: 'F' or 'D' and a fileid; anything else names nothing. */
static void hook_unmonitor(void *arg, const struct sockaddr *client, socklen_t len)
{
	(void)arg;
	(void)client;
	(void)len;
	h.unmonitors++;
}

/*
 * A handle: a kind and a fileid. 'F' a file, 'D' a directory, 'P' a file the caller may not
 * lock, 'R' a file of a read-only export, 'G' a file since removed; anything else names
 * nothing. As nfs_lock_object, a release needs only the handle.
 */
static int hook_object(void *arg, const struct rpc_req *rq, const void *fh, size_t fhlen,
		       enum nfs_lock_use use, struct nfs_lock_target *out)
{
	const uint8_t *p = fh;

	(void)arg;
	(void)rq;
	if (fhlen != 9 || strchr("FDPRG", p[0]) == NULL || p[0] == '\0')
		return -ESTALE;
	memset(out, 0, sizeof(*out));
	out->lt_export = 3;
	memcpy(&out->lt_fileid, p + 1, 8);
	out->lt_regular = p[0] != 'D';
	if (use == NFS_LOCK_RELEASE)
		return 0;
	if (p[0] == 'G')
		return -ESTALE;
	if (p[0] == 'P')
		return -EACCES;
	if (p[0] == 'R' && use == NFS_LOCK_WRITE)
		return -EROFS;
	return 0;
}

static bool hook_previous(void *arg)
{
	(void)arg;
	return h.previous;
}

static const struct nlm_hooks hooks = { hook_send, hook_monitor, hook_object, hook_previous,
					 hook_unmonitor, NULL };

/* ---- the service under test ---- */

static struct nlm_service *svc;

static void t_start(unsigned grace, const struct locks_limits *limits)
{
	static const struct rpc_program *const programs[] = { &nlm_program };
	struct nlm_opts o = { .no_grace_seconds = grace, .no_limits = limits, .no_hooks = &hooks,
			      .no_shares = 4 };
	char err[256];

	assert_int_equal(nlm_service_new(NULL, NULL, NULL, &o, &svc, err, sizeof(err)), 0);
	rpc_dispatch_init(programs, 1, NULL);
	rpc_dispatch_set_ctx(NLM_PROG, svc);
}

static int t_setup(void **state)
{
	(void)state;
	memset(&h, 0, sizeof(h));
	t_start(0, NULL);
	return 0;
}

static int t_teardown(void **state)
{
	(void)state;
	nlm_service_free(svc);
	svc = NULL;
	return 0;
}

/* ---- calls ---- */

/* Calls proc from host with args; decodes the result into res (xdr_res NULL: none). */
static void t_call(const char *host, int protocol, uint32_t proc, xdrproc_t xdr_args,
		   const void *args, xdrproc_t xdr_res, void *res)
{
	static uint32_t xid = 1;
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(700) };
	uint32_t head[] = { htonl(xid++), htonl(CALL), htonl(2), htonl(NLM_PROG),
			    htonl(NLM_VERS4), htonl(proc), htonl(AUTH_NONE), 0, htonl(AUTH_NONE), 0 };
	uint8_t call[4096], *out;
	size_t outlen = 0;
	uint32_t w[7];
	XDR x;

	inet_pton(AF_INET, host, &peer.sin_addr);
	memcpy(call, head, sizeof(head));
	xdrmem_create(&x, (char *)call + sizeof(head), sizeof(call) - sizeof(head), XDR_ENCODE);
	assert_true(xdr_args(&x, (void *)args));
	out = rpc_serve(call, sizeof(head) + xdr_getpos(&x), (struct sockaddr *)&peer,
			sizeof(peer), protocol, &outlen);
	xdr_destroy(&x);
	assert_non_null(out);
	assert_true(outlen >= 4 + 24);
	memcpy(w, out, sizeof(w));
	assert_int_equal(ntohl(w[3]), MSG_ACCEPTED);
	assert_int_equal(ntohl(w[6]), SUCCESS);
	if (xdr_res != NULL) {
		xdrmem_create(&x, (char *)out + 28, (u_int)(outlen - 28), XDR_DECODE);
		assert_true(xdr_res(&x, res));
		xdr_destroy(&x);
	} else {
		assert_int_equal(outlen, 28);
	}
	rpc_reply_free(out);
}

struct fhbuf {
	uint8_t b[9];
};

static struct fhbuf fh_of(char kind, uint64_t fileid)
{
	struct fhbuf f = { { (uint8_t)kind } };

	memcpy(f.b + 1, &fileid, 8);
	return f;
}

/* The lock of a "guest" (every client below calls itself that) process svid. */
static nlm4_lock t_lock(struct fhbuf *fh, int32_t svid, uint64_t offset, uint64_t len)
{
	static char guest[] = "guest", oh[] = "owner-handle";
	nlm4_lock l = { .caller_name = guest, .svid = svid, .l_offset = offset, .l_len = len };

	l.fh.nlm4_netobj_len = sizeof(fh->b);
	l.fh.nlm4_netobj_val = (char *)fh->b;
	l.oh.nlm4_netobj_len = sizeof(oh) - 1;
	l.oh.nlm4_netobj_val = oh;
	return l;
}

static char cookie_bytes[] = "ck";
static const nlm4_netobj cookie = { 2, cookie_bytes };

static nlm4_stats t_lockx(const char *host, int protocol, uint32_t proc, nlm4_lock l, bool excl,
			  bool block, bool reclaim)
{
	nlm4_lockargs a = { .cookie = cookie, .block = block, .exclusive = excl, .alock = l,
			    .reclaim = reclaim, .state = 1 };
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	t_call(host, protocol, proc, RPC_XDRPROC(xdr_nlm4_lockargs), &a, RPC_XDRPROC(xdr_nlm4_res),
	       &r);
	assert_int_equal(r.cookie.nlm4_netobj_len, 2);
	assert_memory_equal(r.cookie.nlm4_netobj_val, "ck", 2);
	xdr_free(RPC_XDRPROC(xdr_nlm4_res), (char *)&r);
	return r.stat.stat;
}

static nlm4_stats t_lockp(const char *host, uint32_t proc, nlm4_lock l, bool excl, bool block,
			  bool reclaim)
{
	return t_lockx(host, IPPROTO_TCP, proc, l, excl, block, reclaim);
}

static nlm4_stats t_do_lock(const char *host, nlm4_lock l, bool excl, bool block)
{
	return t_lockp(host, NLMPROC4_LOCK, l, excl, block, false);
}

static nlm4_stats t_test(const char *host, nlm4_lock l, bool excl, nlm4_holder *holder)
{
	nlm4_testargs a = { .cookie = cookie, .exclusive = excl, .alock = l };
	nlm4_testres r;
	nlm4_stats st;

	memset(&r, 0, sizeof(r));
	t_call(host, IPPROTO_UDP, NLMPROC4_TEST, RPC_XDRPROC(xdr_nlm4_testargs), &a,
	       RPC_XDRPROC(xdr_nlm4_testres), &r);
	st = r.stat.stat;
	if (st == NLM4_DENIED && holder != NULL) {
		*holder = r.stat.nlm4_testrply_u.holder;
		holder->oh.nlm4_netobj_val = NULL;
	}
	xdr_free(RPC_XDRPROC(xdr_nlm4_testres), (char *)&r);
	return st;
}

static nlm4_stats t_unlock(const char *host, nlm4_lock l)
{
	nlm4_unlockargs a = { .cookie = cookie, .alock = l };
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	t_call(host, IPPROTO_TCP, NLMPROC4_UNLOCK, RPC_XDRPROC(xdr_nlm4_unlockargs), &a,
	       RPC_XDRPROC(xdr_nlm4_res), &r);
	xdr_free(RPC_XDRPROC(xdr_nlm4_res), (char *)&r);
	return r.stat.stat;
}

static nlm4_stats t_share(const char *host, uint32_t proc, struct fhbuf *fh, fsh4_mode mode,
			  fsh4_access access, bool reclaim)
{
	static char guest[] = "guest", oh[] = "share-owner";
	nlm4_shareargs a = { .cookie = cookie, .reclaim = reclaim };
	nlm4_shareres r;

	a.share.caller_name = guest;
	a.share.fh.nlm4_netobj_len = sizeof(fh->b);
	a.share.fh.nlm4_netobj_val = (char *)fh->b;
	a.share.oh.nlm4_netobj_len = sizeof(oh) - 1;
	a.share.oh.nlm4_netobj_val = oh;
	a.share.mode = mode;
	a.share.access = access;
	memset(&r, 0, sizeof(r));
	t_call(host, IPPROTO_TCP, proc, RPC_XDRPROC(xdr_nlm4_shareargs), &a,
	       RPC_XDRPROC(xdr_nlm4_shareres), &r);
	xdr_free(RPC_XDRPROC(xdr_nlm4_shareres), (char *)&r);
	return r.stat;
}

/* ---- the tests ---- */

/* Two clients with one name, one svid and one oh are two owners: the address keys them. */
static void test_hosts_by_address(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	nlm4_holder ho;

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 100), true, false), NLM4_GRANTED);
	assert_int_equal(h.monitors, 1);
	assert_int_equal(t_do_lock(B, t_lock(&f, 1, 50, 10), true, false), NLM4_DENIED);
	assert_int_equal(t_test(B, t_lock(&f, 1, 99, 1), false, &ho), NLM4_DENIED);
	assert_true(ho.exclusive);
	assert_int_equal(ho.svid, 1);
	assert_int_equal(ho.l_offset, 0);
	assert_int_equal(ho.l_len, 100);
	assert_int_equal(t_test(A, t_lock(&f, 1, 0, 0), true, NULL), NLM4_GRANTED);
	/* The same owner again: held already; monitored already */
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), false, false), NLM4_GRANTED);
	assert_int_equal(h.monitors, 1);
	assert_int_equal(t_test(B, t_lock(&f, 1, 100, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&f, 1, 50, 10), true, false), NLM4_GRANTED);
	assert_int_equal(h.monitors, 2);
}

static void test_grace(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);

	(void)state;
	nlm_service_free(svc);
	h.previous = true;
	t_start(60, NULL);
	assert_true(nlm_in_grace(svc));
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false),
			 NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(t_lockp(A, NLMPROC4_NM_LOCK, t_lock(&f, 1, 0, 10), true, false, false),
			 NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(t_test(A, t_lock(&f, 1, 0, 10), true, NULL), NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DN, fsa_R, false),
			 NLM4_DENIED_GRACE_PERIOD);
	/* reclaims, UNLOCK and UNSHARE are served */
	assert_int_equal(t_lockp(A, NLMPROC4_LOCK, t_lock(&f, 1, 0, 10), true, false, true),
			 NLM4_GRANTED);
	assert_int_equal(t_lockp(B, NLMPROC4_LOCK, t_lock(&f, 1, 5, 10), true, false, true),
			 NLM4_DENIED);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DN, fsa_R, true), NLM4_GRANTED);
	assert_int_equal(t_share(A, NLMPROC4_UNSHARE, &f, fsm_DN, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);

	/* No previous clients: no grace, whatever is configured */
	nlm_service_free(svc);
	h.previous = false;
	t_start(60, NULL);
	assert_false(nlm_in_grace(svc));
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	/* grace 0: none either */
	nlm_service_free(svc);
	h.previous = true;
	t_start(0, NULL);
	assert_false(nlm_in_grace(svc));
}

/* LOCK_MSG and TEST_MSG reply nothing and send LOCK_RES and TEST_RES to the caller. */
static void test_msg_res(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	nlm4_lockargs la = { .cookie = cookie, .exclusive = true, .alock = t_lock(&f, 7, 0, 1) };
	nlm4_testargs ta = { .cookie = cookie, .exclusive = true, .alock = t_lock(&f, 8, 0, 1) };
	nlm4_unlockargs ua = { .cookie = cookie, .alock = t_lock(&f, 7, 0, 1) };

	(void)state;
	t_call(A, IPPROTO_UDP, NLMPROC4_LOCK_MSG, RPC_XDRPROC(xdr_nlm4_lockargs), &la, NULL, NULL);
	assert_int_equal(h.nsent, 1);
	assert_int_equal(h.sent[0].proc, NLMPROC4_LOCK_RES);
	assert_int_equal(h.sent[0].stat, NLM4_GRANTED);
	assert_int_equal(h.sent[0].protocol, IPPROTO_UDP);
	assert_string_equal(h.sent[0].to, A);
	assert_int_equal(h.sent[0].port, 0);  /* its lock manager's port: the portmapper's */
	assert_int_equal(h.sent[0].cookielen, 2);
	assert_memory_equal(h.sent[0].cookie, "ck", 2);
	t_call(B, IPPROTO_TCP, NLMPROC4_TEST_MSG, RPC_XDRPROC(xdr_nlm4_testargs), &ta, NULL, NULL);
	assert_int_equal(h.nsent, 2);
	assert_int_equal(h.sent[1].proc, NLMPROC4_TEST_RES);
	assert_int_equal(h.sent[1].stat, NLM4_DENIED);
	assert_string_equal(h.sent[1].to, B);
	t_call(A, IPPROTO_TCP, NLMPROC4_UNLOCK_MSG, RPC_XDRPROC(xdr_nlm4_unlockargs), &ua, NULL,
	       NULL);
	assert_int_equal(h.sent[2].proc, NLMPROC4_UNLOCK_RES);
	assert_int_equal(h.sent[2].stat, NLM4_GRANTED);
	assert_int_equal(t_test(B, t_lock(&f, 8, 0, 1), true, NULL), NLM4_GRANTED);
}

/* B's blocked LOCK is granted by A's UNLOCK: GRANTED_MSG to B, with our cookie. */
static struct sent *t_block_and_grant(struct fhbuf *f)
{
	assert_int_equal(t_do_lock(A, t_lock(f, 1, 0, 0), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(f, 2, 10, 5), true, true), NLM4_BLOCKED);
	assert_int_equal(h.nsent, 0);
	assert_int_equal(t_unlock(A, t_lock(f, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(h.nsent, 1);
	assert_int_equal(h.sent[0].proc, NLMPROC4_GRANTED_MSG);
	assert_string_equal(h.sent[0].to, B);
	assert_int_equal(h.sent[0].port, 0);
	assert_int_equal(h.sent[0].protocol, IPPROTO_TCP);
	assert_int_equal(h.sent[0].svid, 2);
	assert_int_equal(h.sent[0].offset, 10);
	/* B holds it now */
	assert_int_equal(t_test(C, t_lock(f, 3, 12, 1), false, NULL), NLM4_DENIED);
	return &h.sent[0];
}

static void t_granted_res(const char *host, const struct sent *s, nlm4_stats stat)
{
	nlm4_res a = { .stat = { stat } };

	a.cookie.nlm4_netobj_len = (u_int)s->cookielen;
	a.cookie.nlm4_netobj_val = (char *)s->cookie;
	t_call(host, IPPROTO_TCP, NLMPROC4_GRANTED_RES, RPC_XDRPROC(xdr_nlm4_res), &a, NULL, NULL);
}

static void test_granted_res(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), g = fh_of('F', FILE2);
	struct sent *s;

	(void)state;
	s = t_block_and_grant(&f);
	s->done(s->arg, 0, NULL);  /* delivered */
	t_granted_res(B, s, NLM4_GRANTED);
	assert_int_equal(t_test(C, t_lock(&f, 3, 12, 1), false, NULL), NLM4_DENIED);

	/* a refusing GRANTED_RES gives the lock back; only from the host it was granted to */
	h.nsent = 0;
	s = t_block_and_grant(&g);
	s->done(s->arg, 0, NULL);
	t_granted_res(C, s, NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&g, 3, 12, 1), true, NULL), NLM4_DENIED);
	t_granted_res(B, s, NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&g, 3, 12, 1), true, NULL), NLM4_GRANTED);
}

/* The callback never arrives (its retries ran out): the lock is given back. */
static void test_callback_fails(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	struct sent *s;

	(void)state;
	s = t_block_and_grant(&f);
	s->done(s->arg, -ETIMEDOUT, NULL);
	assert_int_equal(t_test(C, t_lock(&f, 3, 12, 1), true, NULL), NLM4_GRANTED);
}

/*
 * A holds a shared lock and asks to upgrade part of it (F_SETLKW) while B shares that part:
 * queued. B unlocks: A is granted the exclusive lock by GRANTED_MSG, a callback pending.
 */
static struct sent *t_upgrade_granted(struct fhbuf *f)
{
	h.nsent = 0;
	assert_int_equal(t_do_lock(A, t_lock(f, 1, 0, 100), false, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(f, 2, 40, 10), false, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(A, t_lock(f, 1, 20, 40), true, true), NLM4_BLOCKED);
	assert_int_equal(nlm_service_callbacks_pending(svc), 0);
	assert_int_equal(t_unlock(B, t_lock(f, 2, 0, 0)), NLM4_GRANTED);
	assert_int_equal(h.nsent, 1);
	assert_int_equal(h.sent[0].proc, NLMPROC4_GRANTED_MSG);
	assert_string_equal(h.sent[0].to, A);
	assert_int_equal(nlm_service_callbacks_pending(svc), 1);
	assert_int_equal(t_test(C, t_lock(f, 3, 30, 1), false, NULL), NLM4_DENIED);
	return &h.sent[0];
}

/* A's process still holds its shared lock: nobody may lock any of it exclusively. */
static void t_shared_lock_kept(struct fhbuf *f)
{
	assert_int_equal(t_test(C, t_lock(f, 3, 0, 100), false, NULL), NLM4_GRANTED);
	for (uint64_t at = 0; at < 100; at += 10)
		assert_int_equal(t_test(C, t_lock(f, 3, at, 10), true, NULL), NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(f, 3, 100, 0), true, NULL), NLM4_GRANTED);
}

/* A refuses the upgrade it was granted (its F_SETLKW was interrupted): its shared lock stays. */
static void test_refused_upgrade_keeps_the_shared_lock(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	struct sent *s;

	(void)state;
	s = t_upgrade_granted(&f);
	s->done(s->arg, 0, NULL);  /* delivered */
	assert_int_equal(nlm_service_callbacks_pending(svc), 0);
	t_granted_res(A, s, NLM4_DENIED);
	t_shared_lock_kept(&f);
}

/* The upgrade's callback never arrives: given back, the shared lock stays as well. */
static void test_undelivered_upgrade_keeps_the_shared_lock(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	struct sent *s;

	(void)state;
	s = t_upgrade_granted(&f);
	s->done(s->arg, -ETIMEDOUT, NULL);
	assert_int_equal(nlm_service_callbacks_pending(svc), 0);
	t_shared_lock_kept(&f);
}

/* A took the upgrade: the exclusive lock stays, and a late refusal changes nothing. */
static void test_accepted_upgrade_stays(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	struct sent *s;

	(void)state;
	s = t_upgrade_granted(&f);
	s->done(s->arg, 0, NULL);
	t_granted_res(A, s, NLM4_GRANTED);
	t_granted_res(A, s, NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&f, 3, 30, 1), false, NULL), NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&f, 3, 10, 1), false, NULL), NLM4_GRANTED);
}

static void test_cancel(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);
	nlm4_cancargs ca = { .cookie = cookie, .block = true, .exclusive = true,
			     .alock = t_lock(&f, 2, 10, 5) };
	nlm4_res r;

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 0), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&f, 2, 10, 5), true, true), NLM4_BLOCKED);
	memset(&r, 0, sizeof(r));
	t_call(B, IPPROTO_TCP, NLMPROC4_CANCEL, RPC_XDRPROC(xdr_nlm4_cancargs), &ca,
	       RPC_XDRPROC(xdr_nlm4_res), &r);
	assert_int_equal(r.stat.stat, NLM4_GRANTED);
	xdr_free(RPC_XDRPROC(xdr_nlm4_res), (char *)&r);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(h.nsent, 0);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_GRANTED);
}

static void t_free_all(const char *from, int protocol, char *name)
{
	nlm4_notify n = { .name = name, .state = 3 };

	t_call(from, protocol, NLMPROC4_FREE_ALL, RPC_XDRPROC(xdr_nlm4_notify), &n, NULL, NULL);
}

static void t_rebooted(const char *mon_name, const char *from)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	inet_pton(AF_INET, from, &sa.sin_addr);
	nlm_host_rebooted(svc, mon_name, (struct sockaddr *)&sa, sizeof(sa));
}

/* FREE_ALL frees the host it comes from, whatever name it gives, and never another host. */
static void test_free_all_frees_the_caller_only(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), g = fh_of('F', FILE2);
	char guest[] = "guest", addr_a[] = A, addr_b[] = B;

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&g, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DW, fsa_R, false), NLM4_GRANTED);
	/* a stranger naming both "guest"s, or A's address, over UDP and TCP: nothing goes */
	t_free_all(C, IPPROTO_UDP, guest);
	t_free_all(C, IPPROTO_TCP, addr_a);
	t_free_all(C, IPPROTO_UDP, addr_b);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&g, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(t_share(C, NLMPROC4_SHARE, &f, fsm_DN, fsa_W, false), NLM4_DENIED);
	/* B's own, even naming A: only B's locks go */
	t_free_all(B, IPPROTO_UDP, addr_a);
	assert_int_equal(t_test(C, t_lock(&g, 3, 0, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_DENIED);
	/* A's, lock and share */
	t_free_all(A, IPPROTO_TCP, guest);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(t_share(C, NLMPROC4_SHARE, &f, fsm_DN, fsa_W, false), NLM4_GRANTED);
	/* B, A, and C after its refused share */
	assert_int_equal(h.unmonitors, 3);
}

/*
 * A reboot notice frees the host it comes from: not the hosts a stranger names, nor another
 * client of the same name when the one that restarted came back on a new address.
 */
static void test_reboot_frees_the_sender_only(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), g = fh_of('F', FILE2);

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&g, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&f, 2, 0, 10), true, true), NLM4_BLOCKED);
	/* a stranger (or A back at C's address) names "guest", then A's address */
	t_rebooted("guest", C);
	t_rebooted(A, C);
	nlm_host_rebooted(svc, "guest", NULL, 0);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(t_test(C, t_lock(&g, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(h.nsent, 0);
	/* from A's address, under any name: A's lock goes, B's waiter is called, B keeps g */
	t_rebooted("another-name", A);
	assert_int_equal(t_test(C, t_lock(&g, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(h.nsent, 1);
	assert_int_equal(h.sent[0].proc, NLMPROC4_GRANTED_MSG);
	assert_string_equal(h.sent[0].to, B);
	h.sent[0].done(h.sent[0].arg, 0, NULL);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_DENIED);
	assert_int_equal(h.unmonitors, 1);
	t_rebooted("guest", B);
	assert_int_equal(t_test(C, t_lock(&f, 3, 0, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(t_test(C, t_lock(&g, 3, 0, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(h.unmonitors, 2);
}

/* A reclaim is for the grace period only (Linux lockd says DENIED_GRACE_PERIOD too). */
static void test_reclaim_outside_grace(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);

	(void)state;
	assert_false(nlm_in_grace(svc));
	assert_int_equal(t_lockp(A, NLMPROC4_LOCK, t_lock(&f, 1, 0, 10), true, false, true),
			 NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(t_lockp(A, NLMPROC4_NM_LOCK, t_lock(&f, 1, 0, 10), true, false, true),
			 NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(t_test(B, t_lock(&f, 2, 0, 0), true, NULL), NLM4_GRANTED);
	assert_int_equal(h.monitors, 0);
}

static void t_host_addr(char *buf, size_t len, int net, int i)
{
	snprintf(buf, len, "127.0.%u.%u", (unsigned char)net, (unsigned char)i);
}

/*
 * A host keeps its place (and NSM watches it) only while it holds something: hosts far past
 * the bound that each lock and release are all served, each given back to NSM.
 */
static void test_hosts_held_only_while_holding(void **state)
{
	struct locks_limits lim = { .ll_locks_per_host = 8, .ll_hosts = 4,
				    .ll_waiters_per_object = 4 };
	struct fhbuf f = fh_of('F', FILE1), g = fh_of('F', FILE2);
	char host[INET_ADDRSTRLEN];

	(void)state;
	nlm_service_free(svc);
	t_start(0, &lim);
	for (int i = 1; i <= 20; i++) {
		t_host_addr(host, sizeof(host), 1, i);
		assert_int_equal(t_do_lock(host, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
		assert_int_equal(t_unlock(host, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);
	}
	assert_int_equal(h.monitors, 20);
	assert_int_equal(h.unmonitors, 20);
	/* a lock, a waiter, a share, a part of a lock each keep their host */
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(B, t_lock(&f, 2, 0, 10), true, true), NLM4_BLOCKED);
	assert_int_equal(t_share(C, NLMPROC4_SHARE, &g, fsm_DN, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 5)), NLM4_GRANTED);
	assert_int_equal(h.unmonitors, 20);
	/* a fourth host holds something: the bound is reached, counting only those */
	assert_int_equal(t_do_lock("127.0.0.4", t_lock(&g, 4, 0, 1), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock("127.0.0.5", t_lock(&g, 5, 10, 1), true, false),
			 NLM4_DENIED_NOLOCKS);
	/* the waiter's CANCEL, the share's UNSHARE, the last UNLOCK: each host goes */
	{
		nlm4_cancargs ca = { .cookie = cookie, .block = true, .exclusive = true,
				     .alock = t_lock(&f, 2, 0, 10) };
		nlm4_res r;

		memset(&r, 0, sizeof(r));
		t_call(B, IPPROTO_TCP, NLMPROC4_CANCEL, RPC_XDRPROC(xdr_nlm4_cancargs), &ca,
		       RPC_XDRPROC(xdr_nlm4_res), &r);
		assert_int_equal(r.stat.stat, NLM4_GRANTED);
		xdr_free(RPC_XDRPROC(xdr_nlm4_res), (char *)&r);
	}
	assert_int_equal(h.unmonitors, 21);
	assert_int_equal(t_share(C, NLMPROC4_UNSHARE, &g, fsm_DN, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(h.unmonitors, 22);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(h.unmonitors, 23);
	assert_int_equal(t_do_lock("127.0.0.5", t_lock(&g, 5, 10, 1), true, false), NLM4_GRANTED);
	assert_int_equal(h.nsent, 0);
}

/*
 * A UDP caller may be a forged address: its *_RES goes once, a GRANTED callback is tried
 * NLM_UDP_CALLBACK_ATTEMPTS times, and UDP-only hosts hold at most NLM_UDP_HOSTS_MAX places.
 */
static void test_udp_costs_bounded(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), g = fh_of('F', FILE2);
	nlm4_lockargs a = { .cookie = cookie, .exclusive = true, .alock = t_lock(&f, 1, 0, 10),
			    .state = 1 };
	char host[INET_ADDRSTRLEN];

	(void)state;
	t_call(A, IPPROTO_UDP, NLMPROC4_LOCK_MSG, RPC_XDRPROC(xdr_nlm4_lockargs), &a, NULL, NULL);
	a.alock = t_lock(&g, 1, 0, 10);
	t_call(B, IPPROTO_TCP, NLMPROC4_LOCK_MSG, RPC_XDRPROC(xdr_nlm4_lockargs), &a, NULL, NULL);
	assert_int_equal(h.nsent, 2);
	assert_int_equal(h.sent[0].proc, NLMPROC4_LOCK_RES);
	assert_int_equal(h.sent[0].attempts, 1);
	assert_int_equal(h.sent[1].attempts, 3);
	h.sent[0].done(h.sent[0].arg, 0, NULL);
	h.sent[1].done(h.sent[1].arg, 0, NULL);
	assert_int_equal(t_lockx(C, IPPROTO_UDP, NLMPROC4_LOCK, t_lock(&f, 3, 0, 10), true, true,
				 false), NLM4_BLOCKED);
	assert_int_equal(t_unlock(A, t_lock(&f, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(h.nsent, 3);
	assert_int_equal(h.sent[2].proc, NLMPROC4_GRANTED_MSG);
	assert_int_equal(h.sent[2].attempts, 3);
	h.sent[2].done(h.sent[2].arg, 0, NULL);
	/* C and 63 more hosts lock over UDP only (A holds nothing now); then UDP-only ones wait */
	for (int i = 1; i <= 63; i++) {
		t_host_addr(host, sizeof(host), 2, i);
		assert_int_equal(t_lockx(host, IPPROTO_UDP, NLMPROC4_LOCK, t_lock(&g, i, 100 + i, 1),
					 true, false, false), NLM4_GRANTED);
	}
	assert_int_equal(t_lockx("127.0.3.1", IPPROTO_UDP, NLMPROC4_LOCK, t_lock(&g, 1, 2000, 1), true,
				 false, false), NLM4_DENIED_NOLOCKS);
	assert_int_equal(t_lockx("127.0.3.2", IPPROTO_TCP, NLMPROC4_LOCK, t_lock(&g, 1, 1000, 1),
				 true, false, false), NLM4_GRANTED);
	/* a UDP host that calls over TCP once is no longer counted as one */
	assert_int_equal(t_do_lock(C, t_lock(&f, 3, 20, 1), true, false), NLM4_GRANTED);
	assert_int_equal(t_lockx("127.0.3.1", IPPROTO_UDP, NLMPROC4_LOCK, t_lock(&g, 1, 2000, 1), true,
				 false, false), NLM4_GRANTED);
}

/*
 * Locking needs what knfsd asks: read permission or ownership ('P' has neither), and no
 * exclusive lock or writing share on a read-only export ('R'); releasing needs neither.
 */
static void test_lock_needs_permission(void **state)
{
	struct fhbuf p = fh_of('P', FILE1), r = fh_of('R', FILE2);

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&p, 1, 0, 10), false, false), NLM4_FAILED);
	assert_int_equal(t_do_lock(A, t_lock(&p, 1, 0, 10), true, true), NLM4_FAILED);
	assert_int_equal(t_test(A, t_lock(&p, 1, 0, 10), false, NULL), NLM4_FAILED);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &p, fsm_DRW, fsa_R, false), NLM4_DENIED);
	assert_int_equal(t_unlock(A, t_lock(&p, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(t_share(A, NLMPROC4_UNSHARE, &p, fsm_DRW, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(h.monitors, 0);
	assert_int_equal(t_do_lock(A, t_lock(&r, 1, 0, 10), true, false), NLM4_FAILED);
	assert_int_equal(t_lockp(A, NLMPROC4_NM_LOCK, t_lock(&r, 1, 0, 10), true, false, false),
			 NLM4_FAILED);
	assert_int_equal(t_test(A, t_lock(&r, 1, 0, 10), true, NULL), NLM4_FAILED);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &r, fsm_DN, fsa_RW, false), NLM4_DENIED);
	assert_int_equal(t_do_lock(A, t_lock(&r, 1, 0, 10), false, false), NLM4_GRANTED);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &r, fsm_DW, fsa_R, false), NLM4_GRANTED);
}

/* A file removed meanwhile ('G', same fileid): its locks can still be released. */
static void test_release_on_removed_file(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), gone = fh_of('G', FILE1);

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 20, 10), false, false), NLM4_GRANTED);
	assert_int_equal(locks_host_locks(nlm_service_locks(svc), A), 2);
	assert_int_equal(t_do_lock(A, t_lock(&gone, 1, 40, 10), true, false), NLM4_STALE_FH);
	assert_int_equal(t_unlock(A, t_lock(&gone, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(locks_host_locks(nlm_service_locks(svc), A), 0);
	assert_int_equal(h.unmonitors, 1);
	assert_int_equal(t_test(B, t_lock(&f, 2, 0, 0), true, NULL), NLM4_GRANTED);
}

/* Conflict: the new access is what a held one denies, or it denies what a held one does. */
static void test_shares(void **state)
{
	struct fhbuf f = fh_of('F', FILE1);

	(void)state;
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DW, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, fsm_DN, fsa_W, false), NLM4_DENIED);
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, fsm_DR, fsa_R, false), NLM4_DENIED);
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, fsm_DW, fsa_R, false), NLM4_GRANTED);
	/* an owner's new reservation replaces its own */
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DN, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_share(B, NLMPROC4_UNSHARE, &f, fsm_DW, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_share(C, NLMPROC4_SHARE, &f, fsm_DN, fsa_RW, false), NLM4_GRANTED);
	assert_int_equal(t_share(A, NLMPROC4_UNSHARE, &f, fsm_DN, fsa_R, false), NLM4_GRANTED);
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, fsm_DRW, fsa_R, false), NLM4_DENIED);
	/* modes and accesses outside the protocol's four */
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, (fsh4_mode)4, fsa_R, false), NLM4_FAILED);
	assert_int_equal(t_share(B, NLMPROC4_SHARE, &f, fsm_DN, (fsh4_access)8, false),
			 NLM4_FAILED);
	/* bounded: 4 reservations */
	for (uint64_t i = 0; i < 3; i++) {
		struct fhbuf o = fh_of('F', 300 + i);

		assert_int_equal(t_share(A, NLMPROC4_SHARE, &o, fsm_DN, fsa_R, false),
				 NLM4_GRANTED);
	}
	f = fh_of('F', 400);
	assert_int_equal(t_share(A, NLMPROC4_SHARE, &f, fsm_DN, fsa_R, false),
			 NLM4_DENIED_NOLOCKS);
}

static void test_nm_lock_granted_stale(void **state)
{
	struct fhbuf f = fh_of('F', FILE1), d = fh_of('D', DIR1), bad = fh_of('X', 1);
	nlm4_testargs ga = { .cookie = cookie, .exclusive = true, .alock = t_lock(&f, 1, 0, 1) };
	nlm4_res r;

	(void)state;
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 10), true, false), NLM4_GRANTED);
	/* NM_LOCK: never monitored, never blocks */
	assert_int_equal(t_lockp(B, NLMPROC4_NM_LOCK, t_lock(&f, 2, 0, 10), true, true, false),
			 NLM4_DENIED);
	assert_int_equal(t_lockp(B, NLMPROC4_NM_LOCK, t_lock(&f, 2, 10, 10), true, true, false),
			 NLM4_GRANTED);
	assert_int_equal(h.monitors, 1);
	/* we hold no lock of a client's: a GRANTED to us is refused */
	memset(&r, 0, sizeof(r));
	t_call(A, IPPROTO_TCP, NLMPROC4_GRANTED, RPC_XDRPROC(xdr_nlm4_testargs), &ga,
	       RPC_XDRPROC(xdr_nlm4_res), &r);
	assert_int_equal(r.stat.stat, NLM4_DENIED);
	xdr_free(RPC_XDRPROC(xdr_nlm4_res), (char *)&r);
	assert_int_equal(t_do_lock(A, t_lock(&bad, 1, 0, 10), true, false), NLM4_STALE_FH);
	assert_int_equal(t_test(A, t_lock(&bad, 1, 0, 10), true, NULL), NLM4_STALE_FH);
	assert_int_equal(t_do_lock(A, t_lock(&d, 1, 0, 10), true, false), NLM4_FAILED);
	/* NSM cannot note the host: no lock */
	h.monitor_err = -EIO;
	assert_int_equal(t_do_lock(C, t_lock(&f, 3, 100, 10), true, false), NLM4_DENIED_NOLOCKS);
}

static void test_limits(void **state)
{
	struct locks_limits lim = { .ll_locks_per_host = 2, .ll_hosts = 8,
				    .ll_waiters_per_object = 1 };
	struct fhbuf f = fh_of('F', FILE1);

	(void)state;
	nlm_service_free(svc);
	t_start(0, &lim);
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 0, 1), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 10, 1), true, false), NLM4_GRANTED);
	assert_int_equal(t_do_lock(A, t_lock(&f, 1, 20, 1), true, false), NLM4_DENIED_NOLOCKS);
	assert_int_equal(t_do_lock(B, t_lock(&f, 2, 0, 1), true, true), NLM4_BLOCKED);
	assert_int_equal(t_do_lock(C, t_lock(&f, 3, 0, 1), true, true), NLM4_DENIED_NOLOCKS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hosts_by_address, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_grace, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_msg_res, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_granted_res, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_callback_fails, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_refused_upgrade_keeps_the_shared_lock, t_setup,
						t_teardown),
		cmocka_unit_test_setup_teardown(test_undelivered_upgrade_keeps_the_shared_lock,
						t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_accepted_upgrade_stays, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_cancel, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_free_all_frees_the_caller_only, t_setup,
						t_teardown),
		cmocka_unit_test_setup_teardown(test_reboot_frees_the_sender_only, t_setup,
						t_teardown),
		cmocka_unit_test_setup_teardown(test_reclaim_outside_grace, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_hosts_held_only_while_holding, t_setup,
						t_teardown),
		cmocka_unit_test_setup_teardown(test_udp_costs_bounded, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_lock_needs_permission, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_release_on_removed_file, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_shares, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_nm_lock_granted_stale, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_limits, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
