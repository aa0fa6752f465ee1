/*
 * What one RPC call carries through the layers that serve it, besides its arguments: the
 * few facts a lower layer needs about the call it runs for, which no function between
 * them should have to pass along.
 *
 * The RPC dispatcher owns it: rpc_serve_at() starts every call, on its worker thread, with
 * a clean context and clears it again when the call is done (answered, dropped or parked),
 * so nothing one call sets is seen by the next call on that thread. Code running outside
 * a call (start-up, the control socket, tests) sees a clean context too.
 *
 * All-zero is the clean state, so starting and ending a call are one small store each.
 * Each field is written by the layer named beside it and read only while the call runs.
 */
#ifndef UNFS_CALL_CTX_H
#define UNFS_CALL_CTX_H

#include <stdbool.h>
#include <stdint.h>

struct call_ctx {
	bool cc_async;           /* union (union_set_sync, from the export's "async"): changes
				  * need not be on disk before the reply */
	uint8_t cc_stale_mark;   /* stats (stats_stale): 1 + why the STALE this call may
				  * answer is stale; 0 when nothing marked it */
};

/* The calling thread's context: its current call's, or a clean one between calls. */
extern __thread struct call_ctx call_ctx_self;

static inline struct call_ctx *call_ctx(void)
{
	return &call_ctx_self;
}

/* The dispatcher's, at the start and the end of each call: the thread's context is clean. */
static inline void call_ctx_clear(void)
{
	call_ctx_self = (struct call_ctx){ 0 };
}

#endif
