/*
 * Fuzzes a whole call as the server gets it: the input is one record handed to
 * rpc_serve() with NFS v3, MOUNT v1-v3 and the built-in portmapper over a real union
 * (serve_env.c). Handles use a fixed key, so seeds from gen_seeds reach every handler.
 * The tree is reset to pristine every FUZZ_SERVE_RESET inputs (env, default 64; 1 makes
 * every input independent of the ones before) so it stays small.
 * The low byte of the xid picks how the call arrives, so the client rules, squashing and
 * UDP limits are fuzzed too: bit 0 UDP, bit 1 an unprivileged source port, bits 2-3 the
 * peer (127.0.0.1 rw no_root_squash, 10.1.2.3 ro, ::1 all_squash, 192.0.2.1 "*" ro).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"
#include "serve_env.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned serve_every = 64;
static unsigned serve_count;

static void serve_cleanup(void)
{
	senv_close();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *e = getenv("FUZZ_SERVE_RESET");

	(void)argc;
	(void)argv;
	if (e != NULL && atoi(e) > 0)
		serve_every = (unsigned)atoi(e);
	senv_open();
	atexit(serve_cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t addrs[] = { 0x7f000001, 0x0a010203, 0, 0xc0000201 };
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	uint8_t how = size >= 4 ? data[3] : 0;
	int protocol = how & 1 ? IPPROTO_UDP : IPPROTO_TCP;
	uint16_t port = how & 2 ? 40000 : 700;
	socklen_t sslen;
	size_t outlen = 0;
	uint8_t *rec, *out;

	if (serve_count++ % serve_every == 0 && serve_count > 1)
		senv_reset();
	/* A heap copy of the exact size, so ASan sees any read past the record. */
	rec = malloc(size ? size : 1);
	if (rec == NULL)
		abort();
	memcpy(rec, data, size);
	memset(&ss, 0, sizeof(ss));
	if ((how >> 2 & 3) == 2) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		sin6->sin6_addr = in6addr_loopback;
		sslen = sizeof(*sin6);
	} else {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr.s_addr = htonl(addrs[how >> 2 & 3]);
		sslen = sizeof(*sin);
	}
	out = rpc_serve(rec, size, (struct sockaddr *)&ss, sslen, protocol, &outlen);
	if (out != NULL) {
		/* At least the mark, xid, REPLY and reply_stat; for TCP the mark gives the rest. */
		uint32_t mark;

		if (outlen < 16)
			abort();
		memcpy(&mark, out, 4);
		if (protocol == IPPROTO_TCP && ntohl(mark) != (0x80000000u | (uint32_t)(outlen - 4)))
			abort();
		free(out);
	}
	free(rec);
	return 0;
}
