/*
 * A tiny ONC RPC server for tests of outbound calls: one thread serving a UDP socket and,
 * optionally, a TCP listener (one call per connection) on a loopback address. Each call
 * goes to the test's handler, which writes the whole reply (or nothing, to drop it).
 * fake_pmap_* make one a portmapper v2 answering GETPORT from a table.
 */
#ifndef TESTS_FAKE_RPC_H
#define TESTS_FAKE_RPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_REPLY_MAX 2048
#define FAKE_CALL_MAX 65536
#define FAKE_HELD_MAX 128       /* TCP connections left open without an answer */

struct fake_call {
	uint32_t xid, prog, vers, proc;
	const uint8_t *args;    /* after the credential and verifier */
	size_t argslen;
	uint32_t cred_flavor;
	bool tcp;
	uint16_t peer_port;     /* the caller's source port */
	char peer[64];          /* the caller's address, text */
};

/* Writes the reply into out (FAKE_REPLY_MAX bytes); returns its length, 0 to send nothing. */
typedef size_t (*fake_handler)(void *arg, const struct fake_call *c, uint8_t *out);

struct fake_rpc {
	uint16_t fr_udp_port;
	uint16_t fr_tcp_port;   /* 0 without TCP */
	atomic_uint fr_calls;   /* calls received (both transports) */
	/* private */
	fake_handler fr_fn;
	void *fr_arg;
	int fr_udp, fr_tcp, fr_stop;
	int fr_held[FAKE_HELD_MAX], fr_nheld;
	uint8_t *fr_buf;        /* the call being served (FAKE_CALL_MAX bytes) */
	void *fr_thread;
};

/* Starts a server on addr ("127.0.0.1"): udp_port 0 for any free port; tcp: listen too. */
struct fake_rpc *fake_rpc_start(const char *addr, uint16_t udp_port, bool tcp, fake_handler fn,
				void *arg);
void fake_rpc_stop(struct fake_rpc *f);

/* An accepted reply to xid with accept_stat and results (rlen bytes); returns its length. */
size_t fake_reply(uint8_t *out, uint32_t xid, uint32_t accept_stat, const void *res, size_t rlen);
/* A MSG_DENIED (AUTH_ERROR, AUTH_TOOWEAK) reply to xid. */
size_t fake_reply_denied(uint8_t *out, uint32_t xid);

void fake_put32(uint8_t *b, uint32_t v);
uint32_t fake_get32(const uint8_t *b);

/* A portmapper: GETPORT answers the port of (prog, vers, prot) in its table, else 0. */
#define FAKE_PMAP_MAX 8
struct fake_pmap {
	uint32_t prog[FAKE_PMAP_MAX], vers[FAKE_PMAP_MAX], prot[FAKE_PMAP_MAX], port[FAKE_PMAP_MAX];
	_Atomic unsigned n;
	atomic_uint getports;
	atomic_bool refuse;     /* answer PROG_MISMATCH instead */
	struct fake_rpc *srv;
};
/* Starts it on addr:port (0: any free port, then srv->fr_udp_port). */
int fake_pmap_start(struct fake_pmap *pm, const char *addr, uint16_t port);
void fake_pmap_set(struct fake_pmap *pm, uint32_t prog, uint32_t vers, uint32_t prot, uint32_t port);
void fake_pmap_stop(struct fake_pmap *pm);

#endif
