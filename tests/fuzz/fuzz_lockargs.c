/*
 * Fuzzes the argument decoders of the lock programs, NLM (100021) and NSM (100024), exactly
 * as the dispatcher runs them: the procedure's rp_xdr_args from the program's own table on
 * the bytes after the call header, into rp_args_size bytes, then xdr_free.
 * Input: byte 0 picks the program, byte 1 the procedure (modulo their counts), the rest
 * are the arguments.
 * Checked beyond crashes and leaks: what decodes encodes again (no field was left half
 * made) into exactly as many bytes as it came from (a string cut short at a NUL, or a
 * length taken past its bound, would not).
 */
#include <rpc/rpc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nlm.h"
#include "nsm.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_lockargs: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

static const struct rpc_program *const fuzz_programs[] = { &nlm_program, &nsm_program };

/* Every version of a program counts: NLM's 1 and 3 share decoders with 4 only in part. */
static const struct rpc_proc *fuzz_pick(uint8_t prog, uint8_t proc)
{
	const struct rpc_program *pg = fuzz_programs[prog % 2];
	unsigned nvers = pg->rg_vers_max - pg->rg_vers_min + 1, total = 0, k;

	for (unsigned v = 0; v < nvers; v++)
		total += pg->rg_procs[v] ? pg->rg_nprocs[v] : 0;
	if (total == 0)
		return NULL;
	k = proc % total;
	for (unsigned v = 0; v < nvers; v++) {
		unsigned n = pg->rg_procs[v] ? pg->rg_nprocs[v] : 0;

		if (k < n)
			return &pg->rg_procs[v][k];
		k -= n;
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct rpc_proc *p;
	uint8_t *args, *in, *out;
	size_t inlen;
	XDR x;

	if (size < 2)
		return 0;
	p = fuzz_pick(data[0], data[1]);
	if (p == NULL || p->rp_xdr_args == NULL)
		return 0;
	inlen = size - 2;
	/* Exact-size heap copies, so ASan sees any read past the record. */
	in = malloc(inlen ? inlen : 1);
	args = calloc(1, p->rp_args_size ? p->rp_args_size : 1);
	out = malloc(inlen ? inlen : 1);
	fuzz_check(in != NULL && args != NULL && out != NULL);
	memcpy(in, data + 2, inlen);
	xdrmem_create(&x, (char *)in, (u_int)inlen, XDR_DECODE);
	if (p->rp_xdr_args(&x, args)) {
		u_int used = xdr_getpos(&x);
		XDR e;

		fuzz_check(used <= inlen);
		xdrmem_create(&e, (char *)out, used, XDR_ENCODE);
		fuzz_check(p->rp_xdr_args(&e, args));
		fuzz_check(xdr_getpos(&e) == used);
		xdr_destroy(&e);
	}
	xdr_destroy(&x);
	xdr_free(p->rp_xdr_args, (char *)args);
	free(out);
	free(args);
	free(in);
	return 0;
}
