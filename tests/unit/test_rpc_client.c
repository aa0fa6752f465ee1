/*
 * The outbound RPC client (src/rpc/client.c) against small servers of the test's own on
 * loopback (fake_rpc.c): delivery over UDP and TCP, retransmission after a lost datagram,
 * giving up, the portmapper lookup and its cache, stop with calls in flight, hostile
 * replies, the queue's bound.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <rpc/rpc.h>

#include "fake_rpc.h"
#include "rpc_client.h"
#include "../netns.h"

/*
 * The reserved ports (below 1024) are few and shared by everything on the machine, and
 * other test suites may hold them all in TIME_WAIT: the test runs in a network namespace of
 * its own when it can (root), where they are all free.
 */
static bool own_netns;


#define TEST_PROG 0x20000099u
#define TEST_VERS 1
#define TEST_PROC 1
#define WAIT_MS 10000

enum behaviour {
	B_ANSWER,            /* result = argument + 1 */
	B_DROP_FIRST,        /* drops the first call, answers the others */
	B_SILENT,            /* never answers */
	B_WRONG_XID_FIRST,   /* a reply with another xid, then the right one (UDP) */
	B_TRUNCATED,         /* the right xid, cut after the reply status */
	B_DENIED,
	B_PROC_UNAVAIL,
	B_GARBAGE,           /* bytes that are no RPC message */
	B_RANDOM,            /* the call's xid, then random words, often plausible ones */
};

struct server {
	_Atomic int behaviour;
	unsigned seed;       /* B_RANDOM's generator (the server's thread only) */
	atomic_uint seen;
	atomic_uint flavor;  /* credential flavour of the last call */
	atomic_uint port;    /* source port of the last call */
	struct fake_rpc *srv;
};

/*
 * A reply of up to 15 words after the xid: each word is random, or the value a
 * well-formed accepted reply has there (so the parser gets past its first checks), or a
 * huge length.
 */
static size_t random_reply(struct server *s, uint32_t xid, uint8_t *out)
{
	static const uint32_t plausible[] = { 1, 0, 0, 0, 0, 4 };
	unsigned words = (unsigned)rand_r(&s->seed) % 16;

	fake_put32(out, xid);
	for (unsigned i = 0; i < words; i++) {
		unsigned pick = (unsigned)rand_r(&s->seed) % 4;
		uint32_t v = (uint32_t)rand_r(&s->seed);

		if (pick < 2 && i < sizeof(plausible) / sizeof(plausible[0]))
			v = plausible[i];
		else if (pick == 2)
			v = 0xfffffff0u + (v & 15);
		fake_put32(out + 4 + 4 * i, v);
	}
	return 4 + 4 * (size_t)words - (size_t)(rand_r(&s->seed) % 3); /* sometimes not whole words */
}

static size_t test_handler(void *arg, const struct fake_call *c, uint8_t *out)
{
	struct server *s = arg;
	unsigned n = atomic_fetch_add(&s->seen, 1);
	uint8_t res[4];
	size_t len;

	s->flavor = c->cred_flavor;
	s->port = c->peer_port;
	if (c->argslen < 4)
		return fake_reply(out, c->xid, 4 /* GARBAGE_ARGS */, NULL, 0);
	fake_put32(res, fake_get32(c->args) + 1);
	switch (s->behaviour) {
	case B_DROP_FIRST:
		return n == 0 ? 0 : fake_reply(out, c->xid, 0, res, 4);
	case B_SILENT:
		return 0;
	case B_WRONG_XID_FIRST:
		/* two datagrams cannot come from one handler call: the wrong one now, the
		 * right one at the client's retransmission */
		return fake_reply(out, n == 0 ? c->xid + 1 : c->xid, 0, res, 4);
	case B_TRUNCATED:
		len = fake_reply(out, c->xid, 0, res, 4);
		return len - 16;
	case B_DENIED:
		return fake_reply_denied(out, c->xid);
	case B_PROC_UNAVAIL:
		return fake_reply(out, c->xid, 3, NULL, 0);
	case B_GARBAGE:
		memset(out, 0xff, 7);
		return 7;
	case B_RANDOM:
		return random_reply(s, c->xid, out);
	default:
		return fake_reply(out, c->xid, 0, res, 4);
	}
}

/* What a call's `done` saw, waited for without sleeping. */
struct outcome {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls;           /* how many times done ran */
	int status;
	uint32_t result;
	bool decoded;
};

static void outcome_init(struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
}

static void on_done(void *arg, int status, XDR *reply)
{
	struct outcome *o = arg;

	pthread_mutex_lock(&o->lock);
	o->calls++;
	o->status = status;
	if (reply)
		o->decoded = xdr_u_int(reply, &o->result);
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

/* Until done ran `calls` times in all (true), or WAIT_MS pass. */
static bool outcome_wait(struct outcome *o, int calls)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&o->lock);
	while (o->calls < calls)
		if (pthread_cond_timedwait(&o->cond, &o->lock, &until) == ETIMEDOUT)
			break;
	ok = o->calls >= calls;
	pthread_mutex_unlock(&o->lock);
	return ok;
}

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

static int send_call(struct rpc_client *c, uint16_t port, int protocol, uint32_t *arg,
		     unsigned attempts, unsigned interval_ms, struct outcome *o)
{
	struct sockaddr_in to = loopback(port);
	struct rpc_client_call call = {
		.to = (struct sockaddr *)&to, .tolen = sizeof(to), .protocol = protocol,
		.prog = TEST_PROG, .vers = TEST_VERS, .proc = TEST_PROC,
		.xdr_args = (xdrproc_t)xdr_u_int, .args = arg,
		.attempts = attempts, .interval_ms = interval_ms,
		.done = on_done, .arg = o,
	};

	return rpc_client_send(c, &call);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct fixture {
	struct server s;
	struct rpc_client *c;
	struct fake_pmap pm;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	f->s.srv = fake_rpc_start("127.0.0.1", 0, true, test_handler, &f->s);
	assert_non_null(f->s.srv);
	assert_int_equal(fake_pmap_start(&f->pm, "127.0.0.1", 0), 0);
	assert_int_equal(rpc_client_start(&f->c, err, sizeof(err)), 0);
	rpc_client_set_pmap_port(f->c, f->pm.srv->fr_udp_port);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rpc_client_stop(f->c);
	fake_rpc_stop(f->s.srv);
	fake_pmap_stop(&f->pm);
	free(f);
	return 0;
}

/* One call on each transport, the port given: the result comes back decoded. */
static void test_delivery(void **state)
{
	struct fixture *f = *state;
	int protos[] = { IPPROTO_UDP, IPPROTO_TCP };

	for (int i = 0; i < 2; i++) {
		uint16_t port = protos[i] == IPPROTO_UDP ? f->s.srv->fr_udp_port : f->s.srv->fr_tcp_port;
		struct outcome o;
		uint32_t arg = 41 + (uint32_t)i;

		outcome_init(&o);
		assert_int_equal(send_call(f->c, port, protos[i], &arg, 1, 2000, &o), 0);
		arg = 0; /* encoded at send: the caller's memory is free again */
		assert_true(outcome_wait(&o, 1));
		assert_int_equal(o.status, 0);
		assert_true(o.decoded);
		assert_int_equal(o.result, 42 + (uint32_t)i);
		/* as root, from a reserved port: lock managers may insist */
		if (geteuid() == 0 && own_netns)
			assert_true(f->s.port < 1024);
	}
	/* AUTH_UNIX: lock managers may refuse AUTH_NULL */
	assert_int_equal(f->s.flavor, 1);
}

/* A lost datagram: the next try gets through. */
static void test_udp_retry(void **state)
{
	struct fixture *f = *state;
	struct outcome o;
	uint32_t arg = 7;

	f->s.behaviour = B_DROP_FIRST;
	outcome_init(&o);
	assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, IPPROTO_UDP, &arg, 3, 200, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, 0);
	assert_int_equal(o.result, 8);
	assert_int_equal(f->s.seen, 2);
}

/* No answer: exactly `attempts` tries over about attempts * interval, then -ETIMEDOUT. */
static void test_give_up(void **state)
{
	struct fixture *f = *state;
	int protos[] = { IPPROTO_UDP, IPPROTO_TCP };

	f->s.behaviour = B_SILENT;
	for (int i = 0; i < 2; i++) {
		uint16_t port = protos[i] == IPPROTO_UDP ? f->s.srv->fr_udp_port : f->s.srv->fr_tcp_port;
		struct outcome o;
		uint32_t arg = 1;
		int64_t start = mono_ms(), took;

		f->s.seen = 0;
		outcome_init(&o);
		assert_int_equal(send_call(f->c, port, protos[i], &arg, 3, 150, &o), 0);
		assert_true(outcome_wait(&o, 1));
		took = mono_ms() - start;
		assert_int_equal(o.status, -ETIMEDOUT);
		assert_int_equal(f->s.seen, 3);
		assert_true(took >= 3 * 150 - 10);
		assert_true(took < 3000);
	}
}

/* Nothing listens on the port: -ECONNREFUSED after the tries. */
static void test_refused(void **state)
{
	struct fixture *f = *state;
	struct fake_rpc *gone = fake_rpc_start("127.0.0.1", 0, true, test_handler, &f->s);
	uint16_t udp = gone->fr_udp_port, tcp = gone->fr_tcp_port;
	struct outcome o;
	uint32_t arg = 1;

	fake_rpc_stop(gone);
	outcome_init(&o);
	assert_int_equal(send_call(f->c, tcp, IPPROTO_TCP, &arg, 2, 100, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, -ECONNREFUSED);
	outcome_init(&o);
	assert_int_equal(send_call(f->c, udp, IPPROTO_UDP, &arg, 2, 100, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, -ECONNREFUSED);
}

/*
 * Port 0: the portmapper is asked once and its answer kept; a failure drops it, so the
 * next call asks again; an unregistered program is -ECONNREFUSED.
 */
static void test_getport_cache(void **state)
{
	struct fixture *f = *state;
	struct outcome o;
	uint32_t arg = 1;

	fake_pmap_set(&f->pm, TEST_PROG, TEST_VERS, IPPROTO_UDP, f->s.srv->fr_udp_port);
	fake_pmap_set(&f->pm, TEST_PROG, TEST_VERS, IPPROTO_TCP, f->s.srv->fr_tcp_port);
	for (int i = 0; i < 3; i++) {
		outcome_init(&o);
		assert_int_equal(send_call(f->c, 0, IPPROTO_UDP, &arg, 2, 1000, &o), 0);
		assert_true(outcome_wait(&o, 1));
		assert_int_equal(o.status, 0);
		assert_int_equal(o.result, 2);
	}
	assert_int_equal(f->pm.getports, 1);
	/* TCP is another mapping */
	outcome_init(&o);
	assert_int_equal(send_call(f->c, 0, IPPROTO_TCP, &arg, 2, 1000, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, 0);
	assert_int_equal(f->pm.getports, 2);

	/* the server stops answering: the cached port is dropped after the failed try */
	f->s.behaviour = B_SILENT;
	outcome_init(&o);
	assert_int_equal(send_call(f->c, 0, IPPROTO_UDP, &arg, 1, 150, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, -ETIMEDOUT);
	f->s.behaviour = B_ANSWER;
	outcome_init(&o);
	assert_int_equal(send_call(f->c, 0, IPPROTO_UDP, &arg, 1, 1000, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, 0);
	assert_int_equal(f->pm.getports, 3);

	/* not registered */
	fake_pmap_set(&f->pm, TEST_PROG, TEST_VERS, IPPROTO_UDP, 0);
	f->s.seen = 0;
	outcome_init(&o);
	{
		struct sockaddr_in to = loopback(0);
		struct rpc_client_call call = {
			.to = (struct sockaddr *)&to, .tolen = sizeof(to), .protocol = IPPROTO_UDP,
			.prog = TEST_PROG, .vers = TEST_VERS + 1, .proc = TEST_PROC,
			.xdr_args = (xdrproc_t)xdr_u_int, .args = &arg,
			.attempts = 2, .interval_ms = 100, .done = on_done, .arg = &o,
		};

		assert_int_equal(rpc_client_send(f->c, &call), 0);
	}
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, -ECONNREFUSED);
	assert_int_equal(f->s.seen, 0);

	/* a portmapper that refuses the question: -EPROTO, not a wait through the tries */
	f->pm.refuse = true;
	outcome_init(&o);
	{
		struct sockaddr_in to = loopback(0);
		struct rpc_client_call call = {
			.to = (struct sockaddr *)&to, .tolen = sizeof(to), .protocol = IPPROTO_UDP,
			.prog = TEST_PROG, .vers = TEST_VERS + 2, .proc = TEST_PROC,
			.xdr_args = (xdrproc_t)xdr_u_int, .args = &arg,
			.attempts = 2, .interval_ms = 100, .done = on_done, .arg = &o,
		};

		assert_int_equal(rpc_client_send(f->c, &call), 0);
	}
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, -EPROTO);
}

/* Stop with calls queued and in flight: each `done` runs once with -ECANCELED, at once. */
static void test_stop_pending(void **state)
{
	struct fixture *f = *state;
	enum { N = RPC_CLIENT_ACTIVE_MAX + 10 };
	struct outcome o;
	uint32_t arg = 1;
	int64_t start;

	f->s.behaviour = B_SILENT;
	outcome_init(&o);
	for (int i = 0; i < N; i++)
		assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, i % 2 ? IPPROTO_UDP : IPPROTO_TCP,
					   &arg, 100, 60000, &o), 0);
	start = mono_ms();
	rpc_client_stop(f->c);
	f->c = NULL;
	assert_true(mono_ms() - start < 2000);
	assert_int_equal(o.calls, N);
	assert_int_equal(o.status, -ECANCELED);
}

/* The queue is bounded: -EAGAIN past RPC_CLIENT_QUEUE_MAX, and nothing is lost. */
static void test_queue_bound(void **state)
{
	struct fixture *f = *state;
	struct outcome o;
	uint32_t arg = 1;

	f->s.behaviour = B_SILENT;
	outcome_init(&o);
	for (int i = 0; i < RPC_CLIENT_QUEUE_MAX; i++)
		assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, IPPROTO_UDP, &arg, 1, 60000, &o), 0);
	assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, IPPROTO_UDP, &arg, 1, 60000, &o), -EAGAIN);
	rpc_client_stop(f->c);
	f->c = NULL;
	assert_int_equal(o.calls, RPC_CLIENT_QUEUE_MAX);
}

/* A reply with another xid is not ours: ignored, and the right one still counts. */
static void test_wrong_xid(void **state)
{
	struct fixture *f = *state;
	struct outcome o;
	uint32_t arg = 9;

	f->s.behaviour = B_WRONG_XID_FIRST;
	outcome_init(&o);
	assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, IPPROTO_UDP, &arg, 3, 200, &o), 0);
	assert_true(outcome_wait(&o, 1));
	assert_int_equal(o.status, 0);
	assert_int_equal(o.result, 10);
	assert_int_equal(f->s.seen, 2);
}

/* Hostile or unhappy replies on both transports: an error or a timeout, never a crash. */
static void test_hostile(void **state)
{
	struct fixture *f = *state;
	static const struct {
		enum behaviour b;
		int udp, tcp;
	} cases[] = {
		{ B_TRUNCATED, -ETIMEDOUT, -EPROTO },
		{ B_GARBAGE, -ETIMEDOUT, -EPROTO },
		{ B_DENIED, -EPROTO, -EPROTO },
		{ B_PROC_UNAVAIL, -EPROTO, -EPROTO },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct outcome o;
		uint32_t arg = 1;

		f->s.behaviour = cases[i].b;
		outcome_init(&o);
		assert_int_equal(send_call(f->c, f->s.srv->fr_udp_port, IPPROTO_UDP, &arg, 2, 100, &o), 0);
		assert_true(outcome_wait(&o, 1));
		assert_int_equal(o.status, cases[i].udp);
		outcome_init(&o);
		assert_int_equal(send_call(f->c, f->s.srv->fr_tcp_port, IPPROTO_TCP, &arg, 2, 100, &o), 0);
		assert_true(outcome_wait(&o, 1));
		assert_int_equal(o.status, cases[i].tcp);
	}
}

/*
 * Random replies (mostly malformed, some almost right) on both transports: each call ends
 * once, delivered or with an error, and nothing reads outside the reply (run under the
 * sanitizers by make check).
 */
static void test_random_replies(void **state)
{
	struct fixture *f = *state;

	f->s.behaviour = B_RANDOM;
	f->s.seed = 12345;
	for (int i = 0; i < 120; i++) {
		int proto = i % 3 ? IPPROTO_TCP : IPPROTO_UDP;
		uint16_t port = proto == IPPROTO_UDP ? f->s.srv->fr_udp_port : f->s.srv->fr_tcp_port;
		struct outcome o;
		uint32_t arg = 1;

		outcome_init(&o);
		assert_int_equal(send_call(f->c, port, proto, &arg, 1, 50, &o), 0);
		assert_true(outcome_wait(&o, 1));
		assert_int_equal(o.calls, 1);
		assert_true(o.status == 0 || o.status == -EPROTO || o.status == -ETIMEDOUT);
	}
}

/* What rpc_client_send refuses, with done never called. */
static void test_send_refusals(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in to = loopback(1);
	struct outcome o;
	uint32_t arg = 1;
	struct rpc_client_call call = {
		.to = (struct sockaddr *)&to, .tolen = sizeof(to), .protocol = IPPROTO_SCTP,
		.prog = TEST_PROG, .vers = TEST_VERS, .proc = TEST_PROC,
		.xdr_args = (xdrproc_t)xdr_u_int, .args = &arg, .done = on_done, .arg = &o,
	};
	static char big[RPC_CLIENT_ARGS_MAX + 1];
	char *bigp = big;

	outcome_init(&o);
	assert_int_equal(rpc_client_send(f->c, &call), -EINVAL);
	call.protocol = IPPROTO_UDP;
	call.tolen = 4;
	assert_int_equal(rpc_client_send(f->c, &call), -EINVAL);
	call.tolen = sizeof(to);
	memset(big, 'a', sizeof(big) - 1);
	call.xdr_args = (xdrproc_t)xdr_wrapstring;
	call.args = &bigp;
	assert_int_equal(rpc_client_send(f->c, &call), -EMSGSIZE);
	assert_int_equal(o.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_delivery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_give_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getport_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_xid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_replies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send_refusals, setup, teardown),
	};

	own_netns = netns_enter_own();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
