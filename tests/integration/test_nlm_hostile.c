/*
 * Hostile lock clients against the real server's NLM (100021 v4) and NSM (100024 v1), over
 * TCP and UDP: arguments past their bounds (caller_name, owner handle, cookie, SM_NOTIFY's
 * mon_name) and malformed ones get GARBAGE_ARGS, never a crash; a lock flood past the
 * per-host limit and a waiter flood past the per-file limit get NLM4_DENIED_NOLOCKS and
 * change nothing, and the server serves normally afterwards; FREE_ALL from a stranger frees
 * nothing; clients far past the monitored bound that come and go are all served. The
 * server must exit 0 on
 * SIGTERM with no sanitizer report (group teardown).
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlm.h"
#include "nlm_locks.h"
#include "nsm.h"
#include "sm_inter.h"

#define T_FILE "locked"

static char nlm_port_arg[16];
static int nlm_port;
static nfs_fh3 file_fh;

/* ---- raw arguments: what a correct client could not encode ---- */

struct raw {
	uint8_t r_b[8192];
	size_t r_n;
};

static void raw_u32(struct raw *r, uint32_t v)
{
	assert_true(r->r_n + 4 <= sizeof(r->r_b));
	r->r_n = it_put32(r->r_b, r->r_n, v);
}

static void raw_u64(struct raw *r, uint64_t v)
{
	raw_u32(r, (uint32_t)(v >> 32));
	raw_u32(r, (uint32_t)v);
}

/* Variable-length opaque or string: the length word says len, fill bytes follow, padded. */
static void raw_bytes(struct raw *r, uint32_t len, const void *data, char fill)
{
	size_t padded = ((size_t)len + 3) & ~(size_t)3;

	raw_u32(r, len);
	assert_true(r->r_n + padded <= sizeof(r->r_b));
	memset(r->r_b + r->r_n, 0, padded);
	if (data != NULL)
		memcpy(r->r_b + r->r_n, data, len);
	else
		memset(r->r_b + r->r_n, fill, len);
	r->r_n += padded;
}

static bool_t xdr_raw(XDR *x, void *p)
{
	struct raw *r = p;

	return XDR_PUTBYTES(x, (char *)r->r_b, (u_int)r->r_n);
}

/* Sizes of the three variable parts of an nlm4_lock and its call's cookie. */
struct lock_sizes {
	uint32_t ls_cookie;
	uint32_t ls_caller;
	uint32_t ls_oh;
};

static void raw_lock(struct raw *r, const struct lock_sizes *s, int32_t svid)
{
	raw_bytes(r, s->ls_caller, NULL, 'c');
	raw_bytes(r, file_fh.data.data_len, file_fh.data.data_val, 0);
	raw_bytes(r, s->ls_oh, NULL, 'o');
	raw_u32(r, (uint32_t)svid);
	raw_u64(r, 0);
	raw_u64(r, 1);
}

/* nlm4_lockargs (LOCK, NM_LOCK), nlm4_testargs, nlm4_unlockargs, nlm4_cancargs. */
static void raw_args(struct raw *r, uint32_t proc, const struct lock_sizes *s)
{
	r->r_n = 0;
	raw_bytes(r, s->ls_cookie, NULL, 'k');
	if (proc == NLMPROC4_LOCK || proc == NLMPROC4_CANCEL || proc == NLMPROC4_NM_LOCK)
		raw_u32(r, 0);                     /* block */
	if (proc != NLMPROC4_UNLOCK)
		raw_u32(r, 1);                     /* exclusive */
	raw_lock(r, s, 77);
	if (proc == NLMPROC4_LOCK || proc == NLMPROC4_NM_LOCK) {
		raw_u32(r, 0);                     /* reclaim */
		raw_u32(r, 1);                     /* state */
	}
}

/* ---- calls ---- */

static CLIENT *nlm_clnt(int proto)
{
	return it_clnt(proto, NLM_PROG, NLM_VERS4, nlm_port);
}

/* A call whose arguments the server must refuse to decode. */
static void expect_garbage(CLIENT *c, uint32_t proc, struct raw *r, const char *what)
{
	nlm4_res res;
	enum clnt_stat st;

	memset(&res, 0, sizeof(res));
	st = it_call(c, proc, (xdrproc_t)xdr_raw, r, (xdrproc_t)xdr_nlm4_res, &res);
	if (st != RPC_CANTDECODEARGS)
		fail_msg("%s: RPC status %s, want GARBAGE_ARGS (RPC_CANTDECODEARGS)", what,
			 clnt_sperrno(st));
}

/* The server still answers: NLM NULL over a fresh TCP client. */
static void assert_alive(void)
{
	CLIENT *c = nlm_clnt(IPPROTO_TCP);

	assert_int_equal(it_call(c, NLMPROC4_NULL, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
}

static void lock_of(nlm4_lock *lk, const char *oh, int32_t svid, uint64_t off, uint64_t len)
{
	memset(lk, 0, sizeof(*lk));
	lk->caller_name = "hostile";
	lk->fh.nlm4_netobj_len = file_fh.data.data_len;
	lk->fh.nlm4_netobj_val = file_fh.data.data_val;
	lk->oh.nlm4_netobj_len = (u_int)strlen(oh);
	lk->oh.nlm4_netobj_val = (char *)oh;
	lk->svid = svid;
	lk->l_offset = off;
	lk->l_len = len;
}

static nlm4_stats nlm_lock(CLIENT *c, const char *oh, int32_t svid, uint64_t off, uint64_t len,
			   bool block)
{
	nlm4_lockargs a;
	nlm4_res res;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.cookie.nlm4_netobj_len = 4;
	a.cookie.nlm4_netobj_val = "ck01";
	a.block = block;
	a.exclusive = 1;
	a.state = 1;
	lock_of(&a.alock, oh, svid, off, len);
	assert_int_equal(it_call(c, NLMPROC4_LOCK, (xdrproc_t)xdr_nlm4_lockargs, &a,
				 (xdrproc_t)xdr_nlm4_res, &res), RPC_SUCCESS);
	it_free((xdrproc_t)xdr_nlm4_res, &res);
	return res.stat.stat;
}

static nlm4_stats nlm_unlock(CLIENT *c, const char *oh, int32_t svid, uint64_t off, uint64_t len)
{
	nlm4_unlockargs a;
	nlm4_res res;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.cookie.nlm4_netobj_len = 4;
	a.cookie.nlm4_netobj_val = "ck02";
	lock_of(&a.alock, oh, svid, off, len);
	assert_int_equal(it_call(c, NLMPROC4_UNLOCK, (xdrproc_t)xdr_nlm4_unlockargs, &a,
				 (xdrproc_t)xdr_nlm4_res, &res), RPC_SUCCESS);
	it_free((xdrproc_t)xdr_nlm4_res, &res);
	return res.stat.stat;
}

static nlm4_stats nlm_cancel(CLIENT *c, const char *oh, int32_t svid, uint64_t off, uint64_t len)
{
	nlm4_cancargs a;
	nlm4_res res;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.cookie.nlm4_netobj_len = 4;
	a.cookie.nlm4_netobj_val = "ck03";
	a.block = 1;
	a.exclusive = 1;
	lock_of(&a.alock, oh, svid, off, len);
	assert_int_equal(it_call(c, NLMPROC4_CANCEL, (xdrproc_t)xdr_nlm4_cancargs, &a,
				 (xdrproc_t)xdr_nlm4_res, &res), RPC_SUCCESS);
	it_free((xdrproc_t)xdr_nlm4_res, &res);
	return res.stat.stat;
}

/* ---- the attacks ---- */

/* Each variable part one byte past its bound, for every procedure that carries it. */
static void overlong_over(int proto)
{
	static const uint32_t procs[] = { NLMPROC4_TEST, NLMPROC4_LOCK, NLMPROC4_CANCEL,
					  NLMPROC4_UNLOCK, NLMPROC4_NM_LOCK };
	const struct lock_sizes ok = { 8, 16, 8 };
	CLIENT *c = nlm_clnt(proto);
	struct raw r;
	char what[96];

	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		struct lock_sizes s;

		s = ok;
		s.ls_caller = LM_MAXSTRLEN + 1;
		raw_args(&r, procs[i], &s);
		snprintf(what, sizeof(what), "proc %u, caller_name of %u bytes", procs[i], s.ls_caller);
		expect_garbage(c, procs[i], &r, what);
		s = ok;
		s.ls_oh = MAXNETOBJ_SZ + 1;
		raw_args(&r, procs[i], &s);
		snprintf(what, sizeof(what), "proc %u, oh of %u bytes", procs[i], s.ls_oh);
		expect_garbage(c, procs[i], &r, what);
		s = ok;
		s.ls_cookie = MAXNETOBJ_SZ + 1;
		raw_args(&r, procs[i], &s);
		snprintf(what, sizeof(what), "proc %u, cookie of %u bytes", procs[i], s.ls_cookie);
		expect_garbage(c, procs[i], &r, what);
		/* a length word far past the record */
		s = ok;
		s.ls_caller = 0xfffffff0u;
		r.r_n = 0;
		raw_bytes(&r, 4, "ck04", 0);
		raw_u32(&r, 1);
		raw_u32(&r, s.ls_caller);
		snprintf(what, sizeof(what), "proc %u, caller_name length 0x%x", procs[i], s.ls_caller);
		expect_garbage(c, procs[i], &r, what);
	}
	/* the bounds themselves are fine: a full-size caller name, owner and cookie lock */
	raw_args(&r, NLMPROC4_LOCK, &(struct lock_sizes){ MAXNETOBJ_SZ, LM_MAXSTRLEN, MAXNETOBJ_SZ });
	{
		nlm4_res res;

		memset(&res, 0, sizeof(res));
		assert_int_equal(it_call(c, NLMPROC4_LOCK, (xdrproc_t)xdr_raw, &r, (xdrproc_t)xdr_nlm4_res, &res),
				 RPC_SUCCESS);
		assert_int_equal(res.stat.stat, NLM4_GRANTED);
		assert_int_equal(res.cookie.nlm4_netobj_len, MAXNETOBJ_SZ);
		it_free((xdrproc_t)xdr_nlm4_res, &res);
	}
	raw_args(&r, NLMPROC4_UNLOCK, &(struct lock_sizes){ MAXNETOBJ_SZ, LM_MAXSTRLEN, MAXNETOBJ_SZ });
	{
		nlm4_res res;

		memset(&res, 0, sizeof(res));
		assert_int_equal(it_call(c, NLMPROC4_UNLOCK, (xdrproc_t)xdr_raw, &r, (xdrproc_t)xdr_nlm4_res,
					 &res), RPC_SUCCESS);
		assert_int_equal(res.stat.stat, NLM4_GRANTED);
		it_free((xdrproc_t)xdr_nlm4_res, &res);
	}
	it_clnt_destroy(c);
	assert_alive();
}

static void test_overlong_tcp(void **state)
{
	(void)state;
	overlong_over(IPPROTO_TCP);
}

static void test_overlong_udp(void **state)
{
	(void)state;
	overlong_over(IPPROTO_UDP);
}

/*
 * One owner takes ranges that neither touch nor merge until its host holds the most the
 * table allows; one more is NLM4_DENIED_NOLOCKS, and so is a split that would need a
 * record more. Unlocking everything makes room again.
 */
static void test_lock_flood(void **state)
{
	CLIENT *c = nlm_clnt(IPPROTO_TCP);
	uint64_t n = LOCKS_DEFAULT_LOCKS_PER_HOST;

	(void)state;
	for (uint64_t i = 0; i < n; i++) {
		nlm4_stats st = nlm_lock(c, "flood", 1, 2 * i, 1, false);

		if (st != NLM4_GRANTED)
			fail_msg("lock %llu of %llu: status %d, want NLM4_GRANTED",
				 (unsigned long long)i + 1, (unsigned long long)n, (int)st);
	}
	assert_int_equal(nlm_lock(c, "flood", 1, 2 * n, 1, false), NLM4_DENIED_NOLOCKS);
	/* another owner of the same host counts against the same limit */
	assert_int_equal(nlm_lock(c, "other", 2, 4 * n, 1, false), NLM4_DENIED_NOLOCKS);
	/* a merge needs no record: [1, 2) joins [0, 1) and [2, 3) into one, a record freed */
	assert_int_equal(nlm_lock(c, "flood", 1, 1, 1, false), NLM4_GRANTED);
	assert_int_equal(nlm_lock(c, "flood", 1, 2 * n, 1, false), NLM4_GRANTED);
	assert_int_equal(nlm_lock(c, "flood", 1, 2 * n + 2, 1, false), NLM4_DENIED_NOLOCKS);
	/* full again: unlocking the middle of [0, 3) would split it into two records */
	assert_int_equal(nlm_unlock(c, "flood", 1, 1, 1), NLM4_DENIED_NOLOCKS);
	/* ... and changed nothing: the range is still held */
	assert_int_equal(nlm_lock(c, "other", 2, 1, 1, false), NLM4_DENIED);
	assert_int_equal(nlm_unlock(c, "flood", 1, 0, 0), NLM4_GRANTED);
	assert_int_equal(nlm_lock(c, "other", 2, 4 * n, 1, false), NLM4_GRANTED);
	assert_int_equal(nlm_unlock(c, "other", 2, 0, 0), NLM4_GRANTED);
	it_clnt_destroy(c);
	assert_alive();
}

/*
 * One owner holds the whole file; as many other owners as a file may queue wait for it
 * (NLM4_BLOCKED); one more is NLM4_DENIED_NOLOCKS. The waiters are cancelled (nobody here
 * takes GRANTED callbacks), and the file is free again.
 */
static void test_waiter_flood(void **state)
{
	CLIENT *c = nlm_clnt(IPPROTO_TCP);
	unsigned n = LOCKS_DEFAULT_WAITERS_PER_OBJECT;

	(void)state;
	assert_int_equal(nlm_lock(c, "holder", 1, 0, 0, false), NLM4_GRANTED);
	for (unsigned i = 0; i < n; i++) {
		nlm4_stats st = nlm_lock(c, "waiter", (int32_t)(100 + i), 0, 0, true);

		if (st != NLM4_BLOCKED)
			fail_msg("waiter %u of %u: status %d, want NLM4_BLOCKED", i + 1, n, (int)st);
	}
	assert_int_equal(nlm_lock(c, "waiter", (int32_t)(100 + n), 0, 0, true), NLM4_DENIED_NOLOCKS);
	/* a non-blocking request is only refused, as before */
	assert_int_equal(nlm_lock(c, "waiter", (int32_t)(100 + n), 0, 0, false), NLM4_DENIED);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(nlm_cancel(c, "waiter", (int32_t)(100 + i), 0, 0), NLM4_GRANTED);
	assert_int_equal(nlm_unlock(c, "holder", 1, 0, 0), NLM4_GRANTED);
	assert_int_equal(nlm_lock(c, "waiter", (int32_t)(100 + n), 0, 0, false), NLM4_GRANTED);
	assert_int_equal(nlm_unlock(c, "waiter", (int32_t)(100 + n), 0, 0), NLM4_GRANTED);
	it_clnt_destroy(c);
	assert_alive();
}

/* SM_NOTIFY with a mon_name past its bound, cut short, with a NUL inside, or none at all. */
static void garbage_notify_over(int proto)
{
	CLIENT *c = it_clnt(proto, SM_PROG, SM_VERS, nlm_port);
	struct raw r;
	stat_chge ok = { .mon_name = "nobody-has-locks", .state = 3 };

	r.r_n = 0;
	raw_bytes(&r, SM_MAXSTRLEN + 1, NULL, 'm');
	raw_u32(&r, 3);
	expect_garbage(c, SM_NOTIFY, &r, "SM_NOTIFY, mon_name past SM_MAXSTRLEN");
	r.r_n = 0;
	raw_u32(&r, 100);
	raw_u32(&r, 0x61616161);
	expect_garbage(c, SM_NOTIFY, &r, "SM_NOTIFY, mon_name cut short");
	r.r_n = 0;
	raw_bytes(&r, 8, "ab\0cdefg", 0);
	raw_u32(&r, 3);
	expect_garbage(c, SM_NOTIFY, &r, "SM_NOTIFY, NUL inside mon_name");
	r.r_n = 0;
	raw_bytes(&r, 4, "name", 0);
	expect_garbage(c, SM_NOTIFY, &r, "SM_NOTIFY without its state");
	r.r_n = 0;
	raw_u32(&r, 0xffffffffu);
	expect_garbage(c, SM_NOTIFY, &r, "SM_NOTIFY, mon_name length 2^32-1");
	/* a well-formed notice from a host that holds nothing: answered, nothing else */
	assert_int_equal(it_call(c, SM_NOTIFY, (xdrproc_t)xdr_stat_chge, &ok, (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
	assert_alive();
}

static void test_garbage_notify_tcp(void **state)
{
	(void)state;
	garbage_notify_over(IPPROTO_TCP);
}

static void test_garbage_notify_udp(void **state)
{
	(void)state;
	garbage_notify_over(IPPROTO_UDP);
}

/*
 * After each test, whatever it left (a failed one may leave locks and waiters): FREE_ALL for
 * our caller name frees everything of this host.
 */
static void free_all_from(CLIENT *c, const char *name)
{
	nlm4_notify n = { .name = (char *)name, .state = 0 };

	assert_int_equal(it_call(c, NLMPROC4_FREE_ALL, (xdrproc_t)xdr_nlm4_notify, &n,
				 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
}

/*
 * FREE_ALL frees the locks of the host it comes from only: another address naming the
 * holder's caller name or address, over TCP or UDP, unprivileged, frees nothing.
 */
static void test_free_all_from_another_host(void **state)
{
	CLIENT *holder = nlm_clnt(IPPROTO_TCP);
	CLIENT *tcp = it_clnt_from("127.0.0.2", NLM_PROG, NLM_VERS4, nlm_port, 1000, 1000, false);
	CLIENT *udp = it_clnt_udp_from("127.0.0.2", NLM_PROG, NLM_VERS4, nlm_port);

	(void)state;
	assert_int_equal(nlm_lock(holder, "victim", 1, 0, 10, false), NLM4_GRANTED);
	free_all_from(tcp, "hostile");
	free_all_from(tcp, "127.0.0.1");
	free_all_from(udp, "hostile");
	free_all_from(udp, "127.0.0.1");
	assert_int_equal(nlm_lock(tcp, "thief", 2, 0, 10, false), NLM4_DENIED);
	/* the holder's own FREE_ALL does, whatever name it gives */
	free_all_from(holder, "another-name");
	assert_int_equal(nlm_lock(tcp, "thief", 2, 0, 10, false), NLM4_GRANTED);
	assert_int_equal(nlm_unlock(tcp, "thief", 2, 0, 0), NLM4_GRANTED);
	it_clnt_destroy(udp);
	it_clnt_destroy(tcp);
	it_clnt_destroy(holder);
}

/*
 * Clients come and go (DHCP, temporary IPv6 addresses): far more than the 1024 monitored
 * places each lock and release a byte, and a new client is still granted its lock; the
 * clients file keeps only clients that hold something (it is rewritten as they go).
 */
static void test_clients_come_and_go(void **state)
{
	int n = NSM_MAX_CLIENTS + 6;
	char host[INET_ADDRSTRLEN], path[PATH_MAX], *text;
	size_t len, lines = 0;
	CLIENT *c;

	(void)state;
	for (int i = 0; i <= n; i++) {
		snprintf(host, sizeof(host), "127.1.%u.%u", (unsigned char)(i / 250), (unsigned char)(1 + i % 250));
		c = it_clnt_from(host, NLM_PROG, NLM_VERS4, nlm_port, 0, 0, false);
		if (nlm_lock(c, "churn", 1, (uint64_t)i, 1, false) != NLM4_GRANTED)
			fail_msg("client %d of %d (%s): its lock was refused", i + 1, n + 1, host);
		if (i < n)
			assert_int_equal(nlm_unlock(c, "churn", 1, 0, 0), NLM4_GRANTED);
		it_clnt_destroy(c);
	}
	it_path(path, "%s/nsm/clients", it_srv.is_state);
	text = it_read_file(path, &len);
	assert_non_null(text);
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	free(text);
	/* the header, the last client, at most NSM_COMPACT_IDLE (64) idle ones */
	assert_true(lines >= 2 && lines <= 2 + 64);
	/* the last client releases its own lock (the teardown's FREE_ALL frees 127.0.0.1's only) */
	snprintf(host, sizeof(host), "127.1.%u.%u", (unsigned char)(n / 250), (unsigned char)(1 + n % 250));
	c = it_clnt_from(host, NLM_PROG, NLM_VERS4, nlm_port, 0, 0, false);
	assert_int_equal(nlm_unlock(c, "churn", 1, 0, 0), NLM4_GRANTED);
	it_clnt_destroy(c);
}

static int free_all(void **state)
{
	CLIENT *c = nlm_clnt(IPPROTO_TCP);
	nlm4_notify n = { .name = "hostile", .state = 0 };

	(void)state;
	assert_int_equal(it_call(c, NLMPROC4_FREE_ALL, (xdrproc_t)xdr_nlm4_notify, &n,
				 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
	it_clnt_destroy(c);
	return 0;
}

/* ---- the server ---- */

/* A port free on 127.0.0.1 for both TCP and UDP: the kernel picks one, which is given back. */
static int free_port(void)
{
	for (int tries = 0; tries < 16; tries++) {
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sin);
		int t = socket(AF_INET, SOCK_STREAM, 0), u = socket(AF_INET, SOCK_DGRAM, 0);
		int port = -1;

		if (t >= 0 && u >= 0 && bind(t, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    getsockname(t, (struct sockaddr *)&sin, &len) == 0 &&
		    bind(u, (struct sockaddr *)&sin, sizeof(sin)) == 0)
			port = ntohs(sin.sin_port);
		if (t >= 0)
			close(t);
		if (u >= 0)
			close(u);
		if (port > 0)
			return port;
	}
	fail_msg("no port free for both TCP and UDP on 127.0.0.1");
	return -1;
}

static int group_setup(void **state)
{
	CLIENT *c;
	nfs_fh3 root;

	(void)state;
	it_server_init(&it_srv, false);
	nlm_port = free_port();
	snprintf(nlm_port_arg, sizeof(nlm_port_arg), "%d", nlm_port);
	it_srv.is_extra[0] = "--udp";
	it_srv.is_extra[1] = "--nlm-port";
	it_srv.is_extra[2] = nlm_port_arg;
	it_srv.is_extra[3] = NULL;
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != 0) {
		fprintf(stderr, "MNT of %s failed\n", IT_EXPORT);
		return -1;
	}
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_create(c, &root, T_FILE), NFS3_OK);
	it_assert_status(it_lookup(c, &root, T_FILE, &file_fh, NULL), NFS3_OK);
	it_clnt_destroy(c);
	it_fh_free(&root);
	return 0;
}

static int group_teardown(void **state)
{
	it_fh_free(&file_fh);
	return it_group_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_overlong_tcp, free_all),
		cmocka_unit_test_teardown(test_overlong_udp, free_all),
		cmocka_unit_test_teardown(test_lock_flood, free_all),
		cmocka_unit_test_teardown(test_waiter_flood, free_all),
		cmocka_unit_test_teardown(test_garbage_notify_tcp, free_all),
		cmocka_unit_test_teardown(test_garbage_notify_udp, free_all),
		cmocka_unit_test_teardown(test_free_all_from_another_host, free_all),
		cmocka_unit_test_teardown(test_clients_come_and_go, free_all),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
