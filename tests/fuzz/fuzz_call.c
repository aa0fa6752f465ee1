/*
 * Fuzzes the RPC call header and credential parser (rpc_parse_call) on the whole input,
 * checking what a successful parse promises its callers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_call call;
	enum rpc_parse st;

	/* A heap copy of the exact size, so ASan sees any read past the record. */
	uint8_t *rec = malloc(size ? size : 1);

	if (rec == NULL)
		abort();
	memcpy(rec, data, size);
	st = rpc_parse_call(rec, size, &call);
	if (st == RPC_PARSE_OK) {
		if (call.rc_args_off > size || call.rc_args_off % 4 != 0)
			abort();
		if (call.rc_cred.rc_ngroups > RPC_MAX_GROUPS)
			abort();
		if (call.rc_cred.rc_flavor != AUTH_NONE && call.rc_cred.rc_flavor != AUTH_SYS)
			abort();
		if (strnlen(call.rc_cred.rc_machine, sizeof(call.rc_cred.rc_machine)) >
		    RPC_MAX_MACHINE)
			abort();
	} else if (st != RPC_PARSE_DROP && st != RPC_PARSE_RPC_MISMATCH && st != RPC_PARSE_BADCRED &&
		   st != RPC_PARSE_REJECTEDCRED) {
		abort();
	}
	free(rec);
	return 0;
}
