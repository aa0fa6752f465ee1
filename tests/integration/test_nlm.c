/*
 * The NLM v4 lock manager of the real server, over raw RPC from loopback clients: every
 * procedure over TCP and UDP; conflicts between two owners and between two hosts
 * (127.0.0.1 and 127.0.0.2, both calling themselves "guest" with the same svid); 64-bit
 * offsets and length 0; splits and merges as TEST sees them; a lock that holds across the
 * copy-up of a lower file; a blocked LOCK granted by a GRANTED_MSG callback (a fake
 * portmapper on port 111 and a fake client lock manager record it); the grace period after
 * a restart with a lock-holding client, none after one whose clients released everything,
 * reclaims refused outside it; permission (read or ownership; exclusive locks not on a
 * read-only export, squashed root); UNLOCK of a file another client removed; the waiter
 * limit (DENIED_NOLOCKS); per-client views
 * as separate lock spaces; the portmapper's entries; --nlm-port off.
 *
 * The process runs in a network namespace of its own (unshare(CLONE_NEWNET), lo up), so the
 * fake portmapper may take port 111 and the server's callbacks can reach nothing else.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "nlm4.h"
#include "../netns.h"

#include <rpc/pmap_prot.h>

#define XP(fn) ((xdrproc_t)(void (*)(void))(fn))
#define HOST_A "127.0.0.1"
#define HOST_B "127.0.0.2"
#define HOST_C "127.0.0.3"
#define PMAP_PORT 111
#define EOF_LEN 0

static bool netns;           /* the process has its own network namespace */

/* ---- the server and its lock port ---- */

static int nlm_port_of(const struct it_server *s)
{
	size_t len;
	char *text = it_read_file(s->is_log, &len), *p, *last = NULL;
	int port = 0;

	assert_non_null(text);
	for (p = text + s->is_log_off; (p = strstr(p, "nlm port ")) != NULL; p++)
		last = p;
	if (last != NULL)
		port = atoi(last + strlen("nlm port "));
	free(text);
	assert_true(port > 0);
	return port;
}

struct env {
	struct it_server srv;
	int port;                /* NLM */
	nfs_fh3 root, file, lower;
};

static void env_start(struct env *e, const char *grace)
{
	static const char *extra_grace[] = { "--grace", NULL, NULL };

	extra_grace[1] = grace;
	it_server_init(&e->srv, true);
	if (grace != NULL)
		memcpy(e->srv.is_extra, extra_grace, sizeof(extra_grace));
	assert_int_equal(it_server_start(&e->srv), 0);
	e->port = nlm_port_of(&e->srv);
}

/* Files: "f" made in the upper, "low" in the lower (made before the start). */
static void env_files(struct env *e)
{
	CLIENT *c;

	assert_int_equal(it_mnt(&e->srv, IPPROTO_TCP, IT_EXPORT, &e->root), 0);
	c = it_nfs_clnt(&e->srv, IPPROTO_TCP);
	it_assert_status(it_create(c, &e->root, "f"), NFS3_OK);
	it_assert_status(it_lookup(c, &e->root, "f", &e->file, NULL), NFS3_OK);
	it_assert_status(it_lookup(c, &e->root, "low", &e->lower, NULL), NFS3_OK);
	it_clnt_destroy(c);
}

static int setup(void **state)
{
	/* GRANTED callbacks retried quickly, so a lost datagram costs little */
	static const char *quick[] = { "--nlm-retry", "300", NULL };
	struct env *e = calloc(1, sizeof(*e));
	char path[PATH_MAX];

	*state = e;
	it_server_init(&e->srv, true);
	memcpy(e->srv.is_extra, quick, sizeof(quick));
	it_path(path, "%s/low", e->srv.is_lower);
	it_write_file(path, "lower data", 10);
	if (it_server_start(&e->srv) != 0)
		return -1;
	e->port = nlm_port_of(&e->srv);
	env_files(e);
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	int rc = it_server_finish(&e->srv);

	it_fh_free(&e->root);
	it_fh_free(&e->file);
	it_fh_free(&e->lower);
	free(e);
	return rc;
}

/* ---- NLM calls ---- */

static CLIENT *nlm_clnt(const struct env *e, const char *host, int proto)
{
	if (proto == IPPROTO_UDP)
		return it_clnt_udp_from(host, NLM_PROG, NLM_VERS4, e->port);
	return it_clnt_from(host, NLM_PROG, NLM_VERS4, e->port, 0, 0, true);
}

static char guest[] = "guest";
static char oh_bytes[] = "process-owner";
static char cookie_bytes[] = "c00k1e";

static nlm4_lock lk(const nfs_fh3 *fh, int32_t svid, uint64_t off, uint64_t len)
{
	nlm4_lock l = { .caller_name = guest, .svid = svid, .l_offset = off, .l_len = len };

	l.fh.nlm4_netobj_len = fh->data.data_len;
	l.fh.nlm4_netobj_val = fh->data.data_val;
	l.oh.nlm4_netobj_len = sizeof(oh_bytes) - 1;
	l.oh.nlm4_netobj_val = oh_bytes;
	return l;
}

static const nlm4_netobj cookie = { sizeof(cookie_bytes) - 1, cookie_bytes };

static nlm4_stats lock_call(CLIENT *c, uint32_t proc, nlm4_lock l, bool excl, bool block,
			    bool reclaim)
{
	nlm4_lockargs a = { .cookie = cookie, .block = block, .exclusive = excl, .alock = l,
			    .reclaim = reclaim, .state = 3 };
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, proc, XP(xdr_nlm4_lockargs), &a, XP(xdr_nlm4_res), &r),
			 RPC_SUCCESS);
	assert_int_equal(r.cookie.nlm4_netobj_len, cookie.nlm4_netobj_len);
	assert_memory_equal(r.cookie.nlm4_netobj_val, cookie_bytes, cookie.nlm4_netobj_len);
	it_free(XP(xdr_nlm4_res), &r);
	return r.stat.stat;
}

static nlm4_stats do_lock(CLIENT *c, nlm4_lock l, bool excl)
{
	return lock_call(c, 2 /* LOCK */, l, excl, false, false);
}

static nlm4_stats do_test(CLIENT *c, nlm4_lock l, bool excl, nlm4_holder *holder)
{
	nlm4_testargs a = { .cookie = cookie, .exclusive = excl, .alock = l };
	nlm4_testres r;
	nlm4_stats st;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NLMPROC4_TEST, XP(xdr_nlm4_testargs), &a,
				 XP(xdr_nlm4_testres), &r), RPC_SUCCESS);
	st = r.stat.stat;
	if (st == NLM4_DENIED && holder != NULL) {
		*holder = r.stat.nlm4_testrply_u.holder;
		holder->oh.nlm4_netobj_val = NULL;
	}
	it_free(XP(xdr_nlm4_testres), &r);
	return st;
}

static nlm4_stats do_unlock(CLIENT *c, nlm4_lock l)
{
	nlm4_unlockargs a = { .cookie = cookie, .alock = l };
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NLMPROC4_UNLOCK, XP(xdr_nlm4_unlockargs), &a,
				 XP(xdr_nlm4_res), &r), RPC_SUCCESS);
	it_free(XP(xdr_nlm4_res), &r);
	return r.stat.stat;
}

static nlm4_stats do_share(CLIENT *c, uint32_t proc, const nfs_fh3 *fh, fsh4_mode mode,
			   fsh4_access access)
{
	nlm4_shareargs a = { .cookie = cookie };
	nlm4_shareres r;

	a.share.caller_name = guest;
	a.share.fh.nlm4_netobj_len = fh->data.data_len;
	a.share.fh.nlm4_netobj_val = fh->data.data_val;
	a.share.oh.nlm4_netobj_len = sizeof(oh_bytes) - 1;
	a.share.oh.nlm4_netobj_val = oh_bytes;
	a.share.mode = mode;
	a.share.access = access;
	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, proc, XP(xdr_nlm4_shareargs), &a, XP(xdr_nlm4_shareres), &r),
			 RPC_SUCCESS);
	it_free(XP(xdr_nlm4_shareres), &r);
	return r.stat;
}

static nlm4_stats do_res_call(CLIENT *c, uint32_t proc, xdrproc_t xargs, void *args)
{
	nlm4_res r;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, proc, xargs, args, XP(xdr_nlm4_res), &r), RPC_SUCCESS);
	it_free(XP(xdr_nlm4_res), &r);
	return r.stat.stat;
}

static void void_call(CLIENT *c, uint32_t proc, xdrproc_t xargs, void *args)
{
	assert_int_equal(it_call(c, proc, xargs, args, (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
}

/* ---- the tests ---- */

/* Every procedure answers, over TCP and over UDP. */
static void test_every_procedure(void **state)
{
	struct env *e = *state;
	static const int protos[] = { IPPROTO_TCP, IPPROTO_UDP };

	for (int i = 0; i < 2; i++) {
		CLIENT *c = nlm_clnt(e, HOST_A, protos[i]);
		nlm4_lock mine = lk(&e->file, 10 + i, 0, 10), other = lk(&e->file, 20 + i, 5, 1);
		nlm4_cancargs ca = { .cookie = cookie, .exclusive = true, .alock = other };
		nlm4_testargs ta = { .cookie = cookie, .exclusive = true, .alock = other };
		nlm4_unlockargs ua = { .cookie = cookie, .alock = other };
		nlm4_lockargs la = { .cookie = cookie, .exclusive = false, .alock = other };
		nlm4_res res = { .cookie = cookie, .stat = { NLM4_GRANTED } };
		nlm4_testres tres = { .cookie = cookie, .stat = { .stat = NLM4_GRANTED } };
		char nobody[] = "nobody-here";
		nlm4_notify n = { .name = nobody, .state = 1 };
		nlm4_holder ho;
		nfs_fh3 bad;

		void_call(c, NLMPROC4_NULL, (xdrproc_t)it_xdr_void, NULL);
		assert_int_equal(do_test(c, mine, true, NULL), NLM4_GRANTED);
		assert_int_equal(do_lock(c, mine, true), NLM4_GRANTED);
		assert_int_equal(do_test(c, other, false, &ho), NLM4_DENIED);
		assert_true(ho.exclusive);
		assert_int_equal(ho.svid, 10 + i);
		assert_int_equal(ho.l_offset, 0);
		assert_int_equal(ho.l_len, 10);
		assert_int_equal(do_res_call(c, NLMPROC4_CANCEL, XP(xdr_nlm4_cancargs), &ca),
				 NLM4_GRANTED);
		/* we hold no client's lock: GRANTED to us is refused */
		assert_int_equal(do_res_call(c, NLMPROC4_GRANTED, XP(xdr_nlm4_testargs), &ta),
				 NLM4_DENIED);
		assert_int_equal(lock_call(c, NLMPROC4_NM_LOCK, other, true, true, false),
				 NLM4_DENIED);
		/* the *_MSG forms reply nothing (their results go out as *_RES calls) */
		void_call(c, NLMPROC4_TEST_MSG, XP(xdr_nlm4_testargs), &ta);
		void_call(c, NLMPROC4_LOCK_MSG, XP(xdr_nlm4_lockargs), &la);
		void_call(c, NLMPROC4_CANCEL_MSG, XP(xdr_nlm4_cancargs), &ca);
		void_call(c, NLMPROC4_UNLOCK_MSG, XP(xdr_nlm4_unlockargs), &ua);
		void_call(c, NLMPROC4_GRANTED_MSG, XP(xdr_nlm4_testargs), &ta);
		for (uint32_t p = NLMPROC4_LOCK_RES; p <= NLMPROC4_GRANTED_RES; p++)
			void_call(c, p, XP(xdr_nlm4_res), &res);
		void_call(c, NLMPROC4_TEST_RES, XP(xdr_nlm4_testres), &tres);
		assert_int_equal(do_unlock(c, mine), NLM4_GRANTED);
		assert_int_equal(do_test(c, other, true, NULL), NLM4_GRANTED);
		assert_int_equal(do_share(c, NLMPROC4_SHARE, &e->file, fsm_DW, fsa_R), NLM4_GRANTED);
		assert_int_equal(do_share(c, NLMPROC4_UNSHARE, &e->file, fsm_DW, fsa_R),
				 NLM4_GRANTED);
		void_call(c, NLMPROC4_FREE_ALL, XP(xdr_nlm4_notify), &n);
		/* a handle that names nothing of ours; a directory */
		it_fh_copy(&bad, &e->file);
		bad.data.data_val[bad.data.data_len - 1] ^= 0x55;
		assert_int_equal(do_lock(c, lk(&bad, 1, 0, 1), true), NLM4_STALE_FH);
		it_fh_free(&bad);
		assert_int_equal(do_lock(c, lk(&e->root, 1, 0, 1), true), NLM4_FAILED);
		/* procedures 16..19 do not exist */
		assert_int_equal(it_call(c, 17, (xdrproc_t)it_xdr_void, NULL,
					 (xdrproc_t)it_xdr_void, NULL), RPC_PROCUNAVAIL);
		it_clnt_destroy(c);
	}
}

/*
 * Two kernels both called "guest", each with a process of pid 1: two owners, because the
 * host is the address. Ranges near 2^64 and to the end of file; a split and a merge.
 */
static void test_hosts_ranges(void **state)
{
	struct env *e = *state;
	CLIENT *a = nlm_clnt(e, HOST_A, IPPROTO_TCP), *b = nlm_clnt(e, HOST_B, IPPROTO_UDP);
	const uint64_t big = 1ull << 63;
	nlm4_holder ho;

	assert_int_equal(do_lock(a, lk(&e->file, 1, big, EOF_LEN), true), NLM4_GRANTED);
	assert_int_equal(do_lock(b, lk(&e->file, 1, UINT64_MAX - 1, 1), false), NLM4_DENIED);
	assert_int_equal(do_lock(b, lk(&e->file, 1, 0, big), true), NLM4_GRANTED);
	assert_int_equal(do_test(a, lk(&e->file, 2, big - 1, 2), false, &ho), NLM4_DENIED);
	assert_int_equal(ho.l_offset, 0);
	assert_int_equal(ho.l_len, big);
	assert_int_equal(do_test(b, lk(&e->file, 2, UINT64_MAX, 1), false, &ho), NLM4_DENIED);
	assert_int_equal(ho.l_offset, big);
	assert_int_equal(ho.l_len, 0);  /* to the end of file */
	/* the same owner again is no conflict */
	assert_int_equal(do_test(a, lk(&e->file, 1, UINT64_MAX, 1), true, NULL), NLM4_GRANTED);
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(do_unlock(b, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);

	/* split: unlock the middle of 0..99; a TEST of the hole is granted */
	assert_int_equal(do_lock(a, lk(&e->file, 1, 0, 100), true), NLM4_GRANTED);
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 40, 20)), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 1, 40, 20), true, NULL), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 1, 60, 1), true, &ho), NLM4_DENIED);
	assert_int_equal(ho.l_offset, 60);
	assert_int_equal(ho.l_len, 40);
	/* merge: filling the hole gives one lock 0..99 again */
	assert_int_equal(do_lock(a, lk(&e->file, 1, 40, 20), true), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 1, 99, 1), true, &ho), NLM4_DENIED);
	assert_int_equal(ho.l_offset, 0);
	assert_int_equal(ho.l_len, 100);
	/* shared locks of two hosts coexist; an exclusive one does not */
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(do_lock(a, lk(&e->file, 1, 0, 10), false), NLM4_GRANTED);
	assert_int_equal(do_lock(b, lk(&e->file, 1, 0, 10), false), NLM4_GRANTED);
	assert_int_equal(do_lock(b, lk(&e->file, 2, 5, 1), true), NLM4_DENIED);
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(do_unlock(b, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
}

/*
 * A retransmitted UNLOCK (same xid: its reply was lost) gets the first one's reply and does
 * not drop the lock its owner took again meanwhile; over TCP and UDP.
 */
static void check_unlock_retransmitted(struct env *e, int proto)
{
	CLIENT *a = nlm_clnt(e, HOST_A, proto), *b = nlm_clnt(e, HOST_B, proto);
	u_int32_t xid = proto == IPPROTO_TCP ? 0x4e4c0001u : 0x4e4c0002u;

	assert_int_equal(do_lock(a, lk(&e->file, 7, 0, 10), true), NLM4_GRANTED);
	assert_true(clnt_control(a, CLSET_XID, (char *)&xid));
	assert_int_equal(do_unlock(a, lk(&e->file, 7, 0, 10)), NLM4_GRANTED);
	assert_int_equal(do_lock(a, lk(&e->file, 7, 0, 10), true), NLM4_GRANTED);
	assert_true(clnt_control(a, CLSET_XID, (char *)&xid));
	assert_int_equal(do_unlock(a, lk(&e->file, 7, 0, 10)), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 7, 0, 10), true, NULL), NLM4_DENIED);
	assert_int_equal(do_unlock(a, lk(&e->file, 7, 0, 10)), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 7, 0, 10), true, NULL), NLM4_GRANTED);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
}

static void test_unlock_retransmitted(void **state)
{
	check_unlock_retransmitted(*state, IPPROTO_TCP);
	check_unlock_retransmitted(*state, IPPROTO_UDP);
}

/* A lock on a lower file holds after a WRITE copied the file up. */
static void test_lock_survives_copyup(void **state)
{
	struct env *e = *state;
	CLIENT *a = nlm_clnt(e, HOST_A, IPPROTO_TCP), *b = nlm_clnt(e, HOST_B, IPPROTO_TCP);
	CLIENT *nfs = it_nfs_clnt(&e->srv, IPPROTO_TCP);
	char data[] = "upper";
	char path[PATH_MAX];
	WRITE3args wa = { .file = e->lower, .offset = 0, .count = 5, .stable = FILE_SYNC };
	WRITE3res wr;

	assert_int_equal(do_lock(a, lk(&e->lower, 1, 0, 0), true), NLM4_GRANTED);
	wa.data.data_len = 5;
	wa.data.data_val = data;
	memset(&wr, 0, sizeof(wr));
	assert_int_equal(it_call(nfs, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
				 (xdrproc_t)xdr_WRITE3res, &wr), RPC_SUCCESS);
	it_assert_status(wr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_WRITE3res, &wr);
	it_path(path, "%s/low", e->srv.is_upper);
	assert_true(it_exists(path));  /* copied up */
	assert_int_equal(do_test(b, lk(&e->lower, 2, 3, 1), false, NULL), NLM4_DENIED);
	assert_int_equal(do_lock(b, lk(&e->lower, 2, 3, 1), false), NLM4_DENIED);
	assert_int_equal(do_unlock(a, lk(&e->lower, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(do_lock(b, lk(&e->lower, 2, 3, 1), false), NLM4_GRANTED);
	assert_int_equal(do_unlock(b, lk(&e->lower, 2, 0, 0)), NLM4_GRANTED);
	it_clnt_destroy(nfs);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
}

/*
 * A client's first lock, from a process that is not root: NSM notes the client in the state
 * directory as the server itself, not with the caller's identity the handle check took on.
 */
static void test_first_lock_of_a_user(void **state)
{
	struct env *e = *state;
	CLIENT *c = it_clnt_from(HOST_C, NLM_PROG, NLM_VERS4, e->port, 1000, 1000, true);

	assert_int_equal(do_lock(c, lk(&e->file, 4, 0, 1), true), NLM4_GRANTED);
	assert_int_equal(do_unlock(c, lk(&e->file, 4, 0, 1)), NLM4_GRANTED);
	it_clnt_destroy(c);
}

/*
 * Locking needs what knfsd asks: read permission or ownership. uid 1000 can neither lock,
 * test nor share-deny root's 0600 file (and so cannot lock its owner out), but locks its
 * own mode-0 file.
 */
static void test_lock_needs_permission(void **state)
{
	struct env *e = *state;
	char path[PATH_MAX];
	nfs_fh3 secret, mine;
	CLIENT *nc, *user, *root;

	it_path(path, "%s/secret", e->srv.is_upper);
	it_write_file(path, "root only", 9);
	assert_int_equal(chmod(path, 0600), 0);
	it_path(path, "%s/mine", e->srv.is_upper);
	it_write_file(path, "x", 1);
	assert_int_equal(chown(path, 1000, 1000), 0);
	assert_int_equal(chmod(path, 0), 0);
	nc = it_nfs_clnt(&e->srv, IPPROTO_TCP);
	it_assert_status(it_lookup(nc, &e->root, "secret", &secret, NULL), NFS3_OK);
	it_assert_status(it_lookup(nc, &e->root, "mine", &mine, NULL), NFS3_OK);
	it_clnt_destroy(nc);
	user = it_clnt_from(HOST_C, NLM_PROG, NLM_VERS4, e->port, 1000, 1000, true);
	assert_int_equal(do_lock(user, lk(&secret, 7, 0, 1), false), NLM4_FAILED);
	assert_int_equal(do_lock(user, lk(&secret, 7, 0, 1), true), NLM4_FAILED);
	assert_int_equal(do_test(user, lk(&secret, 7, 0, 1), true, NULL), NLM4_FAILED);
	assert_int_equal(do_share(user, NLMPROC4_SHARE, &secret, fsm_DRW, fsa_R), NLM4_DENIED);
	assert_int_equal(do_lock(user, lk(&mine, 7, 0, 1), true), NLM4_GRANTED);
	assert_int_equal(do_unlock(user, lk(&mine, 7, 0, 0)), NLM4_GRANTED);
	/* root (no_root_squash here) may */
	root = nlm_clnt(e, HOST_C, IPPROTO_TCP);
	assert_int_equal(do_lock(root, lk(&secret, 8, 0, 1), true), NLM4_GRANTED);
	assert_int_equal(do_unlock(root, lk(&secret, 8, 0, 0)), NLM4_GRANTED);
	it_clnt_destroy(root);
	it_clnt_destroy(user);
	it_fh_free(&secret);
	it_fh_free(&mine);
}

/* "locks held N" of `unionnfsd-ctl stats`. */
static unsigned long locks_held(const struct env *e)
{
	char out[8192], *p;
	char *argv[] = { (char *)it_ctl_binary(), "--state", (char *)e->srv.is_state, "stats",
			 NULL };

	assert_int_equal(it_run(argv, 30, out, sizeof(out)), 0);
	p = strstr(out, "locks held ");
	assert_non_null(p);
	return strtoul(p + strlen("locks held "), NULL, 10);
}

/*
 * A file another client removed: its locks can still be released (knfsd keeps the file
 * open; unionnfsd keys a lock by the handle's object), and none is left behind.
 */
static void test_unlock_of_removed_file(void **state)
{
	struct env *e = *state;
	CLIENT *nc = it_nfs_clnt(&e->srv, IPPROTO_TCP), *a = nlm_clnt(e, HOST_A, IPPROTO_TCP);
	REMOVE3args ra = { .object = { .dir = e->root, .name = "doomed" } };
	unsigned long before = locks_held(e);
	REMOVE3res rr;
	nfs_fh3 doomed;

	it_assert_status(it_create(nc, &e->root, "doomed"), NFS3_OK);
	it_assert_status(it_lookup(nc, &e->root, "doomed", &doomed, NULL), NFS3_OK);
	assert_int_equal(do_lock(a, lk(&doomed, 9, 0, 10), true), NLM4_GRANTED);
	assert_int_equal(do_lock(a, lk(&doomed, 9, 20, 10), false), NLM4_GRANTED);
	assert_int_equal(locks_held(e), before + 2);
	memset(&rr, 0, sizeof(rr));
	assert_int_equal(it_call(nc, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &ra,
				 (xdrproc_t)xdr_REMOVE3res, &rr), RPC_SUCCESS);
	it_assert_status(rr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_REMOVE3res, &rr);
	assert_int_equal(do_lock(a, lk(&doomed, 9, 40, 10), true), NLM4_STALE_FH);
	assert_int_equal(do_unlock(a, lk(&doomed, 9, 0, 0)), NLM4_GRANTED);
	assert_int_equal(locks_held(e), before);
	it_clnt_destroy(a);
	it_clnt_destroy(nc);
	it_fh_free(&doomed);
}

/* Waiters per object are bounded (64 by default): past it, DENIED_NOLOCKS. */
static void test_waiter_limit(void **state)
{
	struct env *e = *state;
	CLIENT *a = nlm_clnt(e, HOST_A, IPPROTO_TCP), *b = nlm_clnt(e, HOST_B, IPPROTO_TCP);
	int svid;

	assert_int_equal(do_lock(a, lk(&e->file, 1, 0, 0), true), NLM4_GRANTED);
	for (svid = 100; svid < 100 + 64; svid++)
		assert_int_equal(lock_call(b, 2, lk(&e->file, svid, 0, 1), true, true, false),
				 NLM4_BLOCKED);
	assert_int_equal(lock_call(b, 2, lk(&e->file, svid, 0, 1), true, true, false),
			 NLM4_DENIED_NOLOCKS);
	/* cancel them all, then unlock: nobody is called back */
	for (svid = 100; svid < 100 + 64; svid++) {
		nlm4_cancargs ca = { .cookie = cookie, .block = true, .exclusive = true,
				     .alock = lk(&e->file, svid, 0, 1) };

		assert_int_equal(do_res_call(b, NLMPROC4_CANCEL, XP(xdr_nlm4_cancargs), &ca),
				 NLM4_GRANTED);
	}
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	assert_int_equal(do_test(b, lk(&e->file, 9, 0, 0), true, NULL), NLM4_GRANTED);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
}

/* ---- callbacks: a fake portmapper and a fake client lock manager ---- */

struct fake {
	int pmap_fd;             /* UDP 127.0.0.2:111 */
	int nlm_fd;              /* UDP 127.0.0.2:N: the client's lock manager */
	uint16_t nlm_port;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int granted;             /* GRANTED_MSG calls received */
	nlm4_testargs last;      /* the last one's arguments (decoded, freed at the end) */
	bool stop;
};

static int udp_bound(const char *addr, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (addr != NULL)
		inet_pton(AF_INET, addr, &sin.sin_addr);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		fail_msg("bind %s:%u: %s", addr ? addr : "*", port, strerror(errno));
	return fd;
}

/* An accepted SUCCESS reply to xid, with one result word when with_word. */
static size_t reply_head(uint8_t *out, uint32_t xid, bool with_word, uint32_t word)
{
	size_t off = 0;

	off = it_put32(out, off, xid);
	off = it_put32(out, off, 1);  /* REPLY */
	off = it_put32(out, off, 0);  /* MSG_ACCEPTED */
	off = it_put32(out, off, 0);  /* verifier AUTH_NONE */
	off = it_put32(out, off, 0);
	off = it_put32(out, off, 0);  /* SUCCESS */
	if (with_word)
		off = it_put32(out, off, word);
	return off;
}

/* Offset of the arguments of a call (after the credential and verifier). */
static size_t call_args(const uint8_t *b, size_t len)
{
	size_t off = 24;
	uint32_t n;

	if (len < off + 8)
		return 0;
	n = it_get32(b, off + 4);
	off += 8 + ((n + 3) & ~3u);
	if (len < off + 8)
		return 0;
	n = it_get32(b, off + 4);
	return off + 8 + ((n + 3) & ~3u);
}

static void fake_pmap(struct fake *f)
{
	uint8_t b[512], out[64];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(f->pmap_fd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	size_t a;
	uint32_t port = 0;

	if (n < 28 || (a = call_args(b, (size_t)n)) == 0)
		return;
	/* GETPORT(prog, vers, prot, port): our lock manager; nothing else is here */
	if (it_get32(b, 20) == 3 && (size_t)n >= a + 16 && it_get32(b, a) == NLM_PROG)
		port = f->nlm_port;
	sendto(f->pmap_fd, out, reply_head(out, it_get32(b, 0), true, port), 0,
	       (struct sockaddr *)&from, fl);
}

static void fake_nlm(struct fake *f)
{
	uint8_t b[4096], out[64];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(f->nlm_fd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	size_t a;
	XDR x;

	if (n < 28 || (a = call_args(b, (size_t)n)) == 0)
		return;
	if (it_get32(b, 12) == NLM_PROG && it_get32(b, 20) == NLMPROC4_GRANTED_MSG) {
		pthread_mutex_lock(&f->mu);
		xdr_free(XP(xdr_nlm4_testargs), (char *)&f->last);
		memset(&f->last, 0, sizeof(f->last));
		xdrmem_create(&x, (char *)b + a, (u_int)((size_t)n - a), XDR_DECODE);
		assert_true(xdr_nlm4_testargs(&x, &f->last));
		xdr_destroy(&x);
		f->granted++;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->mu);
	}
	sendto(f->nlm_fd, out, reply_head(out, it_get32(b, 0), false, 0), 0,
	       (struct sockaddr *)&from, fl);
}

static void *fake_run(void *arg)
{
	struct fake *f = arg;

	while (!f->stop) {
		struct pollfd p[2] = { { f->pmap_fd, POLLIN, 0 }, { f->nlm_fd, POLLIN, 0 } };

		if (poll(p, 2, 100) <= 0)
			continue;
		if (p[0].revents & POLLIN)
			fake_pmap(f);
		if (p[1].revents & POLLIN)
			fake_nlm(f);
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	/* bound to B: a reply from another address would not pass the caller's connected socket */
	f->pmap_fd = udp_bound(HOST_B, PMAP_PORT);
	f->nlm_fd = udp_bound(HOST_B, 0);
	assert_int_equal(getsockname(f->nlm_fd, (struct sockaddr *)&sin, &sl), 0);
	f->nlm_port = ntohs(sin.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_stop(struct fake *f)
{
	f->stop = true;
	pthread_join(f->th, NULL);
	close(f->pmap_fd);
	close(f->nlm_fd);
	xdr_free(XP(xdr_nlm4_testargs), (char *)&f->last);
}

/* Until n GRANTED_MSG calls came (true) or 10 s passed. */
static bool fake_wait(struct fake *f, int n)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&f->mu);
	while (f->granted < n &&
	       pthread_cond_timedwait(&f->cond, &f->mu, &until) == 0)
		;
	ok = f->granted >= n;
	pthread_mutex_unlock(&f->mu);
	return ok;
}

/* B's blocking LOCK waits; A's UNLOCK grants it, and B's lock manager is told. */
static void test_blocked_lock_granted(void **state)
{
	struct env *e = *state;
	CLIENT *a, *b;
	struct fake f;

	if (!netns)
		skip();
	fake_start(&f);
	a = nlm_clnt(e, HOST_A, IPPROTO_TCP);
	b = nlm_clnt(e, HOST_B, IPPROTO_UDP);
	assert_int_equal(do_lock(a, lk(&e->file, 1, 0, 0), true), NLM4_GRANTED);
	assert_int_equal(lock_call(b, 2, lk(&e->file, 7, 100, 50), true, true, false),
			 NLM4_BLOCKED);
	assert_int_equal(do_unlock(a, lk(&e->file, 1, 0, 0)), NLM4_GRANTED);
	if (!fake_wait(&f, 1))
		it_server_dump_log(&e->srv);
	assert_true(f.granted >= 1);
	assert_true(f.last.exclusive);
	assert_int_equal(f.last.alock.svid, 7);
	assert_int_equal(f.last.alock.l_offset, 100);
	assert_int_equal(f.last.alock.l_len, 50);
	assert_string_equal(f.last.alock.caller_name, "guest");
	assert_int_equal(f.last.alock.fh.nlm4_netobj_len, e->file.data.data_len);
	assert_memory_equal(f.last.alock.fh.nlm4_netobj_val, e->file.data.data_val,
			    e->file.data.data_len);
	/* B holds it now */
	assert_int_equal(do_test(a, lk(&e->file, 1, 120, 1), false, NULL), NLM4_DENIED);
	/* B's lock manager refuses the grant (GRANTED_RES DENIED): the lock is given back */
	{
		nlm4_res r = { .cookie = f.last.cookie, .stat = { NLM4_DENIED } };

		void_call(b, NLMPROC4_GRANTED_RES, XP(xdr_nlm4_res), &r);
	}
	assert_int_equal(do_test(a, lk(&e->file, 1, 120, 1), true, NULL), NLM4_GRANTED);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
	fake_stop(&f);
}

/* ---- grace after a restart, and locking off: servers of their own ---- */

/*
 * On a read-only export with root squashed: squashed root cannot lock root's 0600 file, and
 * exclusive locks and writing shares are refused (knfsd since 5.15: NLM4_FAILED).
 */
static void test_lock_on_ro_squashed_export(void **state)
{
	struct env e;
	char path[PATH_MAX];
	nfs_fh3 secret, open;
	CLIENT *c;

	(void)state;
	memset(&e, 0, sizeof(e));
	it_server_init(&e.srv, true);
	e.srv.is_opts = "ro,root_squash,insecure";
	it_path(path, "%s/secret", e.srv.is_upper);
	it_write_file(path, "root only", 9);
	assert_int_equal(chmod(path, 0600), 0);
	it_path(path, "%s/open", e.srv.is_upper);
	it_write_file(path, "anyone", 6);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(it_server_start(&e.srv), 0);
	e.port = nlm_port_of(&e.srv);
	assert_int_equal(it_mnt(&e.srv, IPPROTO_TCP, IT_EXPORT, &e.root), 0);
	c = it_nfs_clnt(&e.srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &e.root, "secret", &secret, NULL), NFS3_OK);
	it_assert_status(it_lookup(c, &e.root, "open", &open, NULL), NFS3_OK);
	it_clnt_destroy(c);
	c = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	assert_int_equal(do_lock(c, lk(&secret, 1, 0, 1), false), NLM4_FAILED);
	assert_int_equal(do_lock(c, lk(&open, 1, 0, 1), true), NLM4_FAILED);
	assert_int_equal(do_test(c, lk(&open, 1, 0, 1), true, NULL), NLM4_FAILED);
	assert_int_equal(do_share(c, NLMPROC4_SHARE, &open, fsm_DN, fsa_RW), NLM4_DENIED);
	assert_int_equal(do_lock(c, lk(&open, 1, 0, 1), false), NLM4_GRANTED);
	assert_int_equal(do_share(c, NLMPROC4_SHARE, &open, fsm_DW, fsa_R), NLM4_GRANTED);
	it_clnt_destroy(c);
	it_fh_free(&secret);
	it_fh_free(&open);
	it_fh_free(&e.root);
	assert_int_equal(it_server_finish(&e.srv), 0);
}

/*
 * Two exports over one directory are two lock spaces: both exclusive locks are granted, and
 * the start-up log says so, naming the directory.
 */
static void test_exports_sharing_a_branch(void **state)
{
	const char *extra[] = { "-e", NULL, NULL };
	char spec[PATH_MAX + 16], text[PATH_MAX + 64];
	nfs_fh3 again_root, again_file;
	struct env e;
	CLIENT *c;

	(void)state;
	memset(&e, 0, sizeof(e));
	it_server_init(&e.srv, true);
	it_path(text, "%s/low", e.srv.is_lower);
	it_write_file(text, "lower data", 10);
	snprintf(spec, sizeof(spec), "/again=%s", e.srv.is_upper);
	extra[1] = spec;
	memcpy(e.srv.is_extra, extra, sizeof(extra));
	assert_int_equal(it_server_start(&e.srv), 0);
	e.port = nlm_port_of(&e.srv);
	snprintf(text, sizeof(text), "exports /again and /union both serve the directory %s",
		 e.srv.is_upper);
	assert_true(it_server_log_contains(&e.srv, text));
	env_files(&e);
	assert_int_equal(it_mnt(&e.srv, IPPROTO_TCP, "/again", &again_root), 0);
	c = it_nfs_clnt(&e.srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &again_root, "f", &again_file, NULL), NFS3_OK);
	it_clnt_destroy(c);
	c = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	assert_int_equal(do_lock(c, lk(&e.file, 1, 0, 0), true), NLM4_GRANTED);
	it_clnt_destroy(c);
	c = nlm_clnt(&e, HOST_B, IPPROTO_TCP);
	assert_int_equal(do_lock(c, lk(&again_file, 1, 0, 0), true), NLM4_GRANTED);
	it_clnt_destroy(c);
	it_fh_free(&again_root);
	it_fh_free(&again_file);
	it_fh_free(&e.root);
	it_fh_free(&e.file);
	it_fh_free(&e.lower);
	assert_int_equal(it_server_finish(&e.srv), 0);
}

/* The server logs the grace period's end when a call first finds it over: TEST changes nothing. */
struct grace_probe {
	struct env *gp_env;
	CLIENT *gp_clnt;
};

static bool grace_over_logged(void *arg)
{
	struct grace_probe *p = arg;

	do_test(p->gp_clnt, lk(&p->gp_env->file, 2, 0, 10), true, NULL);
	return it_server_log_contains(&p->gp_env->srv, "grace period over");
}

static void test_grace_after_restart(void **state)
{
	struct env e;
	CLIENT *c;

	(void)state;
	memset(&e, 0, sizeof(e));
	env_start(&e, "3");
	assert_int_equal(it_mnt(&e.srv, IPPROTO_TCP, IT_EXPORT, &e.root), 0);
	c = it_nfs_clnt(&e.srv, IPPROTO_TCP);
	it_assert_status(it_create(c, &e.root, "g"), NFS3_OK);
	it_assert_status(it_lookup(c, &e.root, "g", &e.file, NULL), NFS3_OK);
	it_clnt_destroy(c);
	/* no previous clients: no grace */
	c = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	assert_int_equal(do_lock(c, lk(&e.file, 1, 0, 10), true), NLM4_GRANTED);
	it_clnt_destroy(c);

	it_server_restart(&e.srv);
	e.port = nlm_port_of(&e.srv);
	c = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	assert_true(it_server_log_contains(&e.srv, "grace period of 3 s"));
	assert_int_equal(do_lock(c, lk(&e.file, 1, 0, 10), true), NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(do_test(c, lk(&e.file, 1, 0, 10), true, NULL), NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(lock_call(c, 2, lk(&e.file, 1, 0, 10), true, false, true), NLM4_GRANTED);
	assert_int_equal(do_unlock(c, lk(&e.file, 1, 0, 10)), NLM4_GRANTED);
	assert_true(wait_until(grace_over_logged, &(struct grace_probe){ &e, c }, 10000));
	assert_int_equal(do_lock(c, lk(&e.file, 2, 20, 10), true), NLM4_GRANTED);
	assert_int_equal(do_test(c, lk(&e.file, 2, 0, 10), true, NULL), NLM4_GRANTED);
	/* a reclaim after the grace period could take a lock held since: refused */
	assert_int_equal(lock_call(c, 2, lk(&e.file, 3, 40, 10), true, false, true),
			 NLM4_DENIED_GRACE_PERIOD);
	assert_int_equal(do_unlock(c, lk(&e.file, 2, 20, 10)), NLM4_GRANTED);
	it_clnt_destroy(c);

	/* everything released before a clean stop: nobody to wait for at the next start */
	it_server_restart(&e.srv);
	e.port = nlm_port_of(&e.srv);
	c = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	assert_int_equal(do_lock(c, lk(&e.file, 1, 0, 10), true), NLM4_GRANTED);
	it_clnt_destroy(c);
	it_fh_free(&e.root);
	it_fh_free(&e.file);
	assert_int_equal(it_server_finish(&e.srv), 0);
}

/*
 * Per-client views (upper=): each client's view is its own object space, so the same path
 * locked in two views is two objects, and a handle of another client's view is refused.
 */
static void test_views_are_separate(void **state)
{
	struct it_server s;
	char opts[PATH_MAX + 64], path[PATH_MAX];
	nfs_fh3 root_a, root_b, fa, fb;
	struct env e;
	CLIENT *c, *a, *b;

	(void)state;
	it_server_init(&s, true);
	it_path(path, "%s/shared.txt", s.is_lower);
	it_write_file(path, "base", 4);
	snprintf(opts, sizeof(opts), "upper=%s/clients/%%a,insecure,no_root_squash", s.is_dir);
	s.is_opts = opts;
	assert_int_equal(it_server_start(&s), 0);
	e.port = nlm_port_of(&s);
	assert_int_equal(it_mnt_over(it_clnt_from(HOST_A, IT_MOUNT_PROG, 3, s.is_mount_port, 0, 0,
						  false), IT_EXPORT, &root_a), 0);
	assert_int_equal(it_mnt_over(it_clnt_from(HOST_B, IT_MOUNT_PROG, 3, s.is_mount_port, 0, 0,
						  false), IT_EXPORT, &root_b), 0);
	c = it_clnt_from(HOST_A, NFS_PROGRAM, NFS_V3, s.is_nfs_port, 0, 0, false);
	it_assert_status(it_lookup(c, &root_a, "shared.txt", &fa, NULL), NFS3_OK);
	it_clnt_destroy(c);
	c = it_clnt_from(HOST_B, NFS_PROGRAM, NFS_V3, s.is_nfs_port, 0, 0, false);
	it_assert_status(it_lookup(c, &root_b, "shared.txt", &fb, NULL), NFS3_OK);
	it_clnt_destroy(c);

	a = nlm_clnt(&e, HOST_A, IPPROTO_TCP);
	b = nlm_clnt(&e, HOST_B, IPPROTO_TCP);
	assert_int_equal(do_lock(a, lk(&fa, 1, 0, 0), true), NLM4_GRANTED);
	assert_int_equal(do_lock(b, lk(&fb, 1, 0, 0), true), NLM4_GRANTED);
	/* A's view is not B's: its handles name nothing B may lock */
	assert_int_equal(do_lock(b, lk(&fa, 2, 0, 0), true), NLM4_FAILED);
	assert_int_equal(do_test(b, lk(&fa, 2, 0, 0), true, NULL), NLM4_FAILED);
	it_clnt_destroy(a);
	it_clnt_destroy(b);
	it_fh_free(&root_a);
	it_fh_free(&root_b);
	it_fh_free(&fa);
	it_fh_free(&fb);
	assert_int_equal(it_server_finish(&s), 0);
}

static int port_after(const struct it_server *s, const char *text)
{
	size_t len;
	char *log = it_read_file(s->is_log, &len), *p;
	int port = 0;

	assert_non_null(log);
	p = strstr(log + s->is_log_off, text);
	if (p != NULL)
		port = atoi(p + strlen(text));
	free(log);
	return port;
}

static unsigned getport(CLIENT *c, unsigned long prog, unsigned long vers, unsigned long prot)
{
	struct pmap m = { prog, vers, prot, 0 };
	u_int port = 0;

	assert_int_equal(it_call(c, PMAPPROC_GETPORT, (xdrproc_t)xdr_pmap, &m, (xdrproc_t)xdr_u_int,
				 &port), RPC_SUCCESS);
	return port;
}

/* The built-in portmapper tells where NLM v4 and NSM v1 are, over TCP and UDP. */
static void test_portmapper_lists_locking(void **state)
{
	static const char *extra[] = { "--portmap-port", "0", NULL };
	struct it_server s;
	CLIENT *c;
	int pmap, nlm;

	(void)state;
	it_server_init(&s, false);
	s.is_portmap = "builtin";
	memcpy(s.is_extra, extra, sizeof(extra));
	assert_int_equal(it_server_start(&s), 0);
	nlm = nlm_port_of(&s);
	pmap = port_after(&s, "built-in portmapper on port ");
	assert_true(pmap > 0);
	c = it_clnt(IPPROTO_TCP, PMAPPROG, PMAPVERS, pmap);
	assert_int_equal(getport(c, NLM_PROG, NLM_VERS4, IPPROTO_TCP), nlm);
	assert_int_equal(getport(c, NLM_PROG, NLM_VERS4, IPPROTO_UDP), nlm);
	assert_int_equal(getport(c, 100024, 1, IPPROTO_TCP), nlm);
	assert_int_equal(getport(c, 100024, 1, IPPROTO_UDP), nlm);
	it_clnt_destroy(c);
	assert_int_equal(it_server_finish(&s), 0);
}

/* The lock manager and the built-in portmapper may share one port: both want UDP there. */
static void test_nlm_port_is_portmap_port(void **state)
{
	static const char *extra[] = { "--portmap-port", NULL, "--nlm-port", NULL, NULL };
	struct it_server s;
	char port[16];
	int p = 21000 + (int)(getpid() % 20000);
	CLIENT *c;

	(void)state;
	while (!it_tcp_port_free(p))
		p++;
	snprintf(port, sizeof(port), "%d", p);
	it_server_init(&s, false);
	s.is_portmap = "builtin";
	extra[1] = extra[3] = port;
	memcpy(s.is_extra, extra, sizeof(extra));
	assert_int_equal(it_server_start(&s), 0);
	assert_int_equal(nlm_port_of(&s), p);
	c = it_clnt(IPPROTO_UDP, PMAPPROG, PMAPVERS, p);
	assert_int_equal(getport(c, NLM_PROG, NLM_VERS4, IPPROTO_UDP), p);
	assert_int_equal(getport(c, 100024, 1, IPPROTO_UDP), p);
	it_clnt_destroy(c);
	assert_int_equal(it_server_finish(&s), 0);
}

/*
 * --nlm-port, or with locking the built-in portmapper's port, on the NFS port needs UDP there
 * too (--udp): said so, naming the option, not "address in use".
 */
static void test_nlm_port_on_nfs_port(void **state)
{
	static const char *extra[] = { "--nlm-port", NULL, NULL };
	struct it_server s;
	char port[16];
	int p = 20000 + (int)(getpid() % 20000);

	(void)state;
	while (!it_tcp_port_free(p))
		p++;
	snprintf(port, sizeof(port), "%d", p);
	it_server_init(&s, false);
	s.is_nfs_port = p;
	extra[1] = port;
	memcpy(s.is_extra, extra, sizeof(extra));
	assert_int_equal(it_server_start(&s), -1);
	assert_true(it_server_log_contains(&s, "is the NFS or MOUNT port too, served over TCP only"));
	assert_true(it_server_log_contains(&s, "another --nlm-port"));
	it_server_cleanup(&s);

	/* the built-in portmapper answers UDP when locking is served: the same, naming its option */
	it_server_init(&s, false);
	s.is_nfs_port = p;
	s.is_portmap = "builtin";
	s.is_extra[0] = "--portmap-port";
	s.is_extra[1] = port;
	assert_int_equal(it_server_start(&s), -1);
	assert_true(it_server_log_contains(&s, "another --portmap-port"));
	it_server_cleanup(&s);
}

static void test_locking_off(void **state)
{
	struct it_server s;
	static const char *off[] = { "--nlm-port", "off", NULL };
	char want[128];
	CLIENT *c;

	(void)state;
	it_server_init(&s, false);
	memcpy(s.is_extra, off, sizeof(off));
	assert_int_equal(it_server_start(&s), 0);
	assert_true(it_server_log_contains(&s, "file locking is off"));
	assert_false(it_server_log_contains(&s, "nlm port "));
	/* --portmap off (it_server's default): the log gives the whole mount option list */
	snprintf(want, sizeof(want), "clients mount with -o port=%d,mountport=%d,nolock",
		 s.is_nfs_port, s.is_mount_port);
	assert_true(it_server_log_contains(&s, want));
	c = it_clnt(IPPROTO_TCP, NLM_PROG, NLM_VERS4, s.is_nfs_port);
	assert_int_equal(it_call(c, NLMPROC4_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL), RPC_PROGUNAVAIL);
	it_clnt_destroy(c);
	assert_int_equal(it_server_finish(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_procedure),
		cmocka_unit_test(test_hosts_ranges),
		cmocka_unit_test(test_unlock_retransmitted),
		cmocka_unit_test(test_lock_survives_copyup),
		cmocka_unit_test(test_first_lock_of_a_user),
		cmocka_unit_test(test_lock_needs_permission),
		cmocka_unit_test(test_unlock_of_removed_file),
		cmocka_unit_test(test_waiter_limit),
		cmocka_unit_test(test_blocked_lock_granted),
	};
	const struct CMUnitTest alone[] = {
		cmocka_unit_test(test_grace_after_restart),
		cmocka_unit_test(test_lock_on_ro_squashed_export),
		cmocka_unit_test(test_exports_sharing_a_branch),
		cmocka_unit_test(test_views_are_separate),
		cmocka_unit_test(test_portmapper_lists_locking),
		cmocka_unit_test(test_nlm_port_is_portmap_port),
		cmocka_unit_test(test_nlm_port_on_nfs_port),
		cmocka_unit_test(test_locking_off),
	};
	int rc;

	netns = netns_enter_own();
	if (!netns)
		fprintf(stderr, "no network namespace of our own (needs CAP_SYS_ADMIN): the "
			"callback test is skipped\n");
	rc = cmocka_run_group_tests_name("nlm", tests, setup, teardown);
	return rc | cmocka_run_group_tests_name("nlm restarts", alone, NULL, NULL);
}
