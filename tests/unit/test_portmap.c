/* The built-in portmapper through rpc_serve(): GETPORT, DUMP, GETADDR and the refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <rpc/rpc.h>
#include <rpc/pmap_prot.h>
#include <rpc/rpcb_prot.h>

#include "portmap.h"
#include "rpc.h"
#include "../netns.h"

static const struct portmap_mapping maps[] = {
	{ 100003, 3, IPPROTO_TCP, 2049 },
	{ 100003, 3, IPPROTO_UDP, 2049 },
	{ 100005, 1, IPPROTO_TCP, 20048 },
	{ 100005, 3, IPPROTO_TCP, 20048 },
	{ 100005, 3, IPPROTO_UDP, 20049 },
};

static int setup(void **state)
{
	static const struct rpc_program *const progs[] = { &portmap_program };

	(void)state;
	rpc_dispatch_init(progs, 1, NULL);
	portmap_builtin_set(maps, (int)(sizeof(maps) / sizeof(maps[0])));
	return 0;
}

/* ---- calls and replies ---- */

struct reply {
	uint8_t *out;
	size_t outlen;
	uint32_t stat, code, low, high;
	XDR body;              /* positioned at the result */
};

typedef bool_t (*encode_fn)(XDR *, void *);

/*
 * Calls program 100000 version vers procedure proc with args encoded by enc, "arriving"
 * at local over protocol. Returns false when no reply came.
 */
static bool call(uint32_t vers, uint32_t proc, encode_fn enc, void *args,
		 const struct sockaddr *local, socklen_t locallen, int protocol, struct reply *r)
{
	uint8_t buf[2048];
	uint32_t hdr[] = { 0x1234, CALL, 2, 100000, vers, proc, AUTH_NONE, 0, AUTH_NONE, 0 };
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(900) };
	XDR x;
	uint32_t xid, mt, vf, vl;
	size_t n;

	xdrmem_create(&x, (char *)buf, sizeof(buf), XDR_ENCODE);
	for (size_t i = 0; i < sizeof(hdr) / sizeof(hdr[0]); i++)
		assert_true(xdr_u_int(&x, &hdr[i]));
	if (enc)
		assert_true(enc(&x, args));
	n = xdr_getpos(&x);
	xdr_destroy(&x);

	memset(r, 0, sizeof(*r));
	r->out = rpc_serve_at(buf, n, (struct sockaddr *)&peer, sizeof(peer), local, locallen,
			      protocol, &r->outlen);
	if (r->out == NULL)
		return false;
	xdrmem_create(&r->body, (char *)r->out + 4, (u_int)(r->outlen - 4), XDR_DECODE);
	assert_true(xdr_u_int(&r->body, &xid) && xdr_u_int(&r->body, &mt) &&
		    xdr_u_int(&r->body, &r->stat));
	assert_int_equal(xid, 0x1234);
	assert_int_equal(r->stat, MSG_ACCEPTED);
	assert_true(xdr_u_int(&r->body, &vf) && xdr_u_int(&r->body, &vl) &&
		    xdr_u_int(&r->body, &r->code));
	if (r->code == PROG_MISMATCH)
		assert_true(xdr_u_int(&r->body, &r->low) && xdr_u_int(&r->body, &r->high));
	return true;
}

static void reply_done(struct reply *r)
{
	/* The whole result was consumed. */
	assert_int_equal(xdr_getpos(&r->body), r->outlen - 4);
	xdr_destroy(&r->body);
	free(r->out);
}

/* A reply whose result the test does not read. */
static void reply_skip(struct reply *r)
{
	xdr_destroy(&r->body);
	free(r->out);
}

static uint32_t getport(uint32_t prog, uint32_t vers, uint32_t prot)
{
	struct pmap p = { prog, vers, prot, 0 };
	struct reply r;
	u_int port;

	assert_true(call(2, PMAPPROC_GETPORT, (encode_fn)xdr_pmap, &p, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_u_int(&r.body, &port));
	reply_done(&r);
	return port;
}

static char *getaddr(uint32_t vers, uint32_t proc, uint32_t prog, uint32_t pvers,
		     const char *netid, const struct sockaddr *local, socklen_t locallen)
{
	rpcb a = { .r_prog = prog, .r_vers = pvers, .r_netid = (char *)netid,
		   .r_addr = (char *)"", .r_owner = (char *)"" };
	struct reply r;
	char *s = NULL, *ret;

	assert_true(call(vers, proc, (encode_fn)xdr_rpcb,
			 &a, local, locallen, IPPROTO_TCP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_wrapstring(&r.body, &s));
	reply_done(&r);
	ret = strdup(s);
	xdr_free((xdrproc_t)xdr_wrapstring, (char *)&s);
	return ret;
}

/* ---- tests ---- */

static void test_getport(void **state)
{
	(void)state;
	assert_int_equal(getport(100003, 3, IPPROTO_TCP), 2049);
	assert_int_equal(getport(100003, 3, IPPROTO_UDP), 2049);
	assert_int_equal(getport(100005, 3, IPPROTO_UDP), 20049);
	assert_int_equal(getport(100005, 1, IPPROTO_TCP), 20048);
	/* Misses. */
	assert_int_equal(getport(100005, 1, IPPROTO_UDP), 20049); /* another version, same protocol */
	assert_int_equal(getport(100227, 3, IPPROTO_TCP), 0);
	assert_int_equal(getport(100003, 3, 99), 0);
	assert_int_equal(getport(100021, 4, IPPROTO_UDP), 0);
}

static void test_dump2(void **state)
{
	struct reply r;
	struct pmaplist *list = NULL, *e;
	size_t i = 0;

	(void)state;
	assert_true(call(2, PMAPPROC_DUMP, NULL, NULL, NULL, 0, IPPROTO_TCP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_pmaplist(&r.body, &list));
	reply_done(&r);
	for (e = list; e != NULL; e = e->pml_next, i++) {
		assert_true(i < sizeof(maps) / sizeof(maps[0]));
		assert_int_equal(e->pml_map.pm_prog, maps[i].pm_prog);
		assert_int_equal(e->pml_map.pm_vers, maps[i].pm_vers);
		assert_int_equal(e->pml_map.pm_prot, maps[i].pm_prot);
		assert_int_equal(e->pml_map.pm_port, maps[i].pm_port);
	}
	assert_int_equal(i, sizeof(maps) / sizeof(maps[0]));
	xdr_free((xdrproc_t)xdr_pmaplist, (char *)&list);
}

/* DUMP over UDP is not answered when turned off (a reflection risk); lookups still are. */
static void test_dump_udp_off(void **state)
{
	struct sockaddr_in l4 = { .sin_family = AF_INET, .sin_port = htons(111) };
	struct reply r;
	struct pmap m = { 100005, 3, IPPROTO_TCP, 0 };
	uint32_t port = 0;

	(void)state;
	inet_pton(AF_INET, "192.0.2.7", &l4.sin_addr);
	portmap_builtin_dump_udp(false);
	assert_false(call(2, PMAPPROC_DUMP, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	assert_false(call(3, RPCBPROC_DUMP, NULL, NULL, (struct sockaddr *)&l4, sizeof(l4),
			  IPPROTO_UDP, &r));
	assert_false(call(4, RPCBPROC_DUMP, NULL, NULL, (struct sockaddr *)&l4, sizeof(l4),
			  IPPROTO_UDP, &r));
	assert_true(call(2, PMAPPROC_DUMP, NULL, NULL, NULL, 0, IPPROTO_TCP, &r));
	reply_skip(&r);
	assert_true(call(2, PMAPPROC_GETPORT, (encode_fn)xdr_pmap, &m, NULL, 0, IPPROTO_UDP, &r));
	assert_true(xdr_u_int(&r.body, &port));
	assert_int_equal(port, 20048);
	reply_done(&r);
	portmap_builtin_dump_udp(true);
	assert_true(call(2, PMAPPROC_DUMP, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	reply_skip(&r);
}

static void test_getaddr(void **state)
{
	struct sockaddr_in l4 = { .sin_family = AF_INET, .sin_port = htons(111) };
	struct sockaddr_in6 l6 = { .sin6_family = AF_INET6, .sin6_port = htons(111) };
	const struct sockaddr *s4 = (struct sockaddr *)&l4, *s6 = (struct sockaddr *)&l6;
	char *a;

	(void)state;
	inet_pton(AF_INET, "192.0.2.7", &l4.sin_addr);
	inet_pton(AF_INET6, "2001:db8::5", &l6.sin6_addr);

	a = getaddr(3, RPCBPROC_GETADDR, 100003, 3, "tcp", s4, sizeof(l4));
	assert_string_equal(a, "192.0.2.7.8.1");
	free(a);
	a = getaddr(4, RPCBPROC_GETADDR, 100005, 3, "udp6", s6, sizeof(l6));
	assert_string_equal(a, "2001:db8::5.78.81");
	free(a);
	/* The family asked for differs from the one the call came in on. */
	a = getaddr(4, RPCBPROC_GETADDR, 100003, 3, "tcp6", s4, sizeof(l4));
	assert_string_equal(a, "::.8.1");
	free(a);
	a = getaddr(3, RPCBPROC_GETADDR, 100003, 3, "udp", NULL, 0);
	assert_string_equal(a, "0.0.0.0.8.1");
	free(a);
	/* An empty netid means this call's transport (TCP here) and family. */
	a = getaddr(4, RPCBPROC_GETADDR, 100005, 3, "", s4, sizeof(l4));
	assert_string_equal(a, "192.0.2.7.78.80");
	free(a);
	/* Misses give the empty string. */
	a = getaddr(4, RPCBPROC_GETADDR, 100227, 3, "tcp", s4, sizeof(l4));
	assert_string_equal(a, "");
	free(a);
	a = getaddr(4, RPCBPROC_GETADDR, 100003, 3, "rdma", s4, sizeof(l4));
	assert_string_equal(a, "");
	free(a);
	/* GETADDR takes any version; GETVERSADDR only the exact one. */
	a = getaddr(4, RPCBPROC_GETADDR, 100003, 4, "tcp", s4, sizeof(l4));
	assert_string_equal(a, "192.0.2.7.8.1");
	free(a);
	a = getaddr(4, RPCBPROC_GETVERSADDR, 100003, 4, "tcp", s4, sizeof(l4));
	assert_string_equal(a, "");
	free(a);
	a = getaddr(4, RPCBPROC_GETVERSADDR, 100003, 3, "tcp", s4, sizeof(l4));
	assert_string_equal(a, "192.0.2.7.8.1");
	free(a);
}

static void test_dump34(void **state)
{
	struct sockaddr_in l4 = { .sin_family = AF_INET, .sin_port = htons(111) };
	struct reply r;
	rpcblist_ptr list = NULL, e;
	int n = 0, v4tcp = 0;

	(void)state;
	inet_pton(AF_INET, "192.0.2.7", &l4.sin_addr);
	assert_true(call(3, RPCBPROC_DUMP, NULL, NULL, (struct sockaddr *)&l4, sizeof(l4),
			 IPPROTO_TCP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_rpcblist_ptr(&r.body, &list));
	reply_done(&r);
	for (e = list; e != NULL; e = e->rpcb_next, n++) {
		if (e->rpcb_map.r_prog == 100003 && strcmp(e->rpcb_map.r_netid, "tcp") == 0) {
			assert_string_equal(e->rpcb_map.r_addr, "192.0.2.7.8.1");
			v4tcp++;
		}
	}
	/* Each mapping for IPv4 and IPv6. */
	assert_int_equal(n, 2 * (int)(sizeof(maps) / sizeof(maps[0])));
	assert_int_equal(v4tcp, 1);
	xdr_free((xdrproc_t)xdr_rpcblist_ptr, (char *)&list);
}

static void test_refusals(void **state)
{
	struct pmap p = { 100003, 3, IPPROTO_TCP, 1 };
	rpcb a = { 100003, 3, (char *)"tcp", (char *)"0.0.0.0.0.1", (char *)"x" };
	struct reply r;
	bool_t ok = TRUE;
	u_int t;

	(void)state;
	assert_true(call(2, PMAPPROC_SET, (encode_fn)xdr_pmap, &p, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_bool(&r.body, &ok));
	assert_false(ok);
	reply_done(&r);
	assert_int_equal(getport(100003, 3, IPPROTO_TCP), 2049);

	ok = TRUE;
	assert_true(call(4, RPCBPROC_UNSET, (encode_fn)xdr_rpcb, &a, NULL, 0, IPPROTO_UDP, &r));
	assert_true(xdr_bool(&r.body, &ok));
	assert_false(ok);
	reply_done(&r);

	/* CALLIT is dropped silently. */
	assert_false(call(2, PMAPPROC_CALLIT, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));

	assert_true(call(4, 11, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, PROC_UNAVAIL);
	reply_done(&r);
	assert_true(call(3, 9, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, PROC_UNAVAIL);
	reply_done(&r);
	assert_true(call(5, 0, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, PROG_MISMATCH);
	assert_int_equal(r.low, 2);
	assert_int_equal(r.high, 4);
	reply_done(&r);

	assert_true(call(3, RPCBPROC_GETTIME, NULL, NULL, NULL, 0, IPPROTO_UDP, &r));
	assert_int_equal(r.code, SUCCESS);
	assert_true(xdr_u_int(&r.body, &t));
	assert_true(t > 1600000000u);
	reply_done(&r);
}

static bool_t enc_hostile(XDR *x, void *arg)
{
	uint32_t v[] = { 100003, 3, 0xfffffff0u };

	(void)arg;
	return xdr_u_int(x, &v[0]) && xdr_u_int(x, &v[1]) && xdr_u_int(x, &v[2]);
}

/* A netid claiming 4 GiB is refused without trying to allocate it. */
static void test_hostile_args(void **state)
{
	struct reply r;

	(void)state;
	assert_true(call(4, RPCBPROC_GETADDR, enc_hostile, NULL, NULL, 0, IPPROTO_TCP, &r));
	assert_int_equal(r.code, GARBAGE_ARGS);
	reply_done(&r);
}

/* ---- the probe for a system rpcbind ---- */

/*
 * The probe asks 127.0.0.1:111, so it runs in a network namespace of its own (a thread's:
 * namespaces are per thread), where this test decides what answers there: nothing, a
 * stand-in rpcbind, or something else on the port.
 */
enum stand_in { NOBODY, RPCBIND_LIKE, DENIES };

struct probe_case {
	enum stand_in pc_who;
	int pc_fd;               /* the stand-in's socket */
	bool pc_netns;           /* a namespace of our own was made */
	bool pc_up;              /* what the probe said */
};

static void *stand_in_run(void *arg)
{
	struct probe_case *pc = arg;
	uint32_t call[64], reply[6];
	struct sockaddr_in from;
	socklen_t fromlen = sizeof(from);
	ssize_t n;

	while ((n = recvfrom(pc->pc_fd, call, sizeof(call), 0, (struct sockaddr *)&from,
			     &fromlen)) > 0) { /* 0: shut down */
		if (n < 40)
			continue;
		reply[0] = call[0];
		reply[1] = htonl(REPLY);
		if (pc->pc_who == RPCBIND_LIKE) {
			/* MSG_ACCEPTED, an empty AUTH_NONE verifier, SUCCESS, no result */
			reply[2] = htonl(MSG_ACCEPTED);
			reply[3] = htonl(AUTH_NONE);
			reply[4] = 0;
			reply[5] = htonl(SUCCESS);
		} else {
			/* MSG_DENIED, AUTH_ERROR, AUTH_TOOWEAK */
			reply[2] = htonl(MSG_DENIED);
			reply[3] = htonl(AUTH_ERROR);
			reply[4] = htonl(AUTH_TOOWEAK);
			reply[5] = 0;
		}
		sendto(pc->pc_fd, reply, sizeof(reply), 0, (struct sockaddr *)&from, fromlen);
	}
	return NULL;
}


static void *probe_run(void *arg)
{
	struct probe_case *pc = arg;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(111) };
	pthread_t th;

	if (!netns_enter_own())
		return NULL;
	pc->pc_netns = true;
	pc->pc_fd = -1;
	if (pc->pc_who != NOBODY) {
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		pc->pc_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_true(pc->pc_fd >= 0);
		assert_int_equal(bind(pc->pc_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		assert_int_equal(pthread_create(&th, NULL, stand_in_run, pc), 0);
	}
	pc->pc_up = portmap_rpcbind_running();
	if (pc->pc_fd >= 0) {
		shutdown(pc->pc_fd, SHUT_RDWR); /* ends stand_in_run's recvfrom */
		pthread_join(th, NULL);
		close(pc->pc_fd);
	}
	return NULL;
}

static bool probe_with(enum stand_in who)
{
	struct probe_case pc = { .pc_who = who };
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, probe_run, &pc), 0);
	pthread_join(th, NULL);
	if (!pc.pc_netns)
		skip(); /* making a network namespace needs CAP_SYS_ADMIN */
	return pc.pc_up;
}

/* Only an accepted, successful reply to its NULL call means a system rpcbind runs. */
static void test_rpcbind_probe(void **state)
{
	(void)state;
	assert_false(probe_with(NOBODY));
	assert_true(probe_with(RPCBIND_LIKE));
	assert_false(probe_with(DENIES));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getport),
		cmocka_unit_test(test_dump2),
		cmocka_unit_test(test_dump_udp_off),
		cmocka_unit_test(test_getaddr),
		cmocka_unit_test(test_dump34),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_hostile_args),
		cmocka_unit_test(test_rpcbind_probe),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
