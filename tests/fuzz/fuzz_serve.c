/*
 * Fuzzes a whole call as the server gets it: the input is one record handed to
 * rpc_serve() with NFS v3, MOUNT v1-v3 and the built-in portmapper over a real union
 * (serve_env.c). Handles use a fixed key, so seeds from gen_seeds reach every handler.
 * The tree is reset to pristine every FUZZ_SERVE_RESET inputs (env, default 64; 1 makes
 * every input independent of the ones before) so it stays small.
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
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(700) };
	size_t outlen = 0;
	uint8_t *rec, *out;

	if (serve_count++ % serve_every == 0 && serve_count > 1)
		senv_reset();
	/* A heap copy of the exact size, so ASan sees any read past the record. */
	rec = malloc(size ? size : 1);
	if (rec == NULL)
		abort();
	memcpy(rec, data, size);
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	out = rpc_serve(rec, size, (struct sockaddr *)&peer, sizeof(peer), IPPROTO_TCP, &outlen);
	if (out != NULL) {
		/* At least the mark, xid, REPLY and reply_stat; the mark gives the rest. */
		uint32_t mark;

		if (outlen < 16)
			abort();
		memcpy(&mark, out, 4);
		if (ntohl(mark) != (0x80000000u | (uint32_t)(outlen - 4)))
			abort();
		free(out);
	}
	free(rec);
	return 0;
}
