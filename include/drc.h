/*
 * Duplicate request cache: a client that retransmits a non-idempotent call (its reply
 * was lost, or the TCP connection broke before it arrived) must get the reply the
 * original got, not the result of running the call a second time (a REMOVE answered
 * NOENT because the first one worked). A retransmission that arrives while the original
 * is still running is dropped; the client retransmits again and then finds the reply.
 *
 * Only procedures a program flags in rg_nonidempotent come here, so idempotent traffic pays nothing.
 * The cache is a fixed table of small buckets, each with its own lock; a bucket that is
 * full recycles its oldest finished entry, and entries older than the time to live count
 * as absent. Replies larger than DRC_REPLY_MAX are not kept.
 */
#ifndef UNFS_DRC_H
#define UNFS_DRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rpc.h"

#define DRC_DEFAULT_ENTRIES 4096
#define DRC_DEFAULT_TTL 120        /* seconds; longer than any client's retransmission span */
#define DRC_REPLY_MAX 1024         /* bytes, record mark included; our largest is ~320 */
#define DRC_SUM_BYTES 128          /* argument bytes the checksum covers */

/*
 * Who asked what. UDP keys on address and port; TCP on the address alone, because a
 * client reconnects from a new port before it retransmits. Laid out without padding so
 * keys compare with memcmp.
 */
struct drc_key {
	uint8_t dk_addr[16];       /* IPv4 in the first 4 bytes */
	uint32_t dk_xid;
	uint32_t dk_prog;
	uint32_t dk_vers;
	uint32_t dk_proc;
	uint32_t dk_sum;           /* checksum of the first argument bytes: tells xid reuse apart */
	uint32_t dk_arglen;
	uint32_t dk_cred;          /* checksum of the credentials (drc_begin): a call under
	                            * another identity runs, as the kernel checks it, and is
	                            * never answered with the reply this one got */
	uint16_t dk_port;          /* 0 for TCP */
	uint8_t dk_family;
	uint8_t dk_protocol;
};

enum drc_verdict {
	DRC_MISS = 0,              /* run the call; hand the reply to drc_store() */
	DRC_HIT,                   /* *reply holds a copy of the original reply: send it */
	DRC_BUSY,                  /* the original is still running: send nothing */
};

struct drc;

/* A claim on an entry between drc_lookup() (DRC_MISS) and drc_store(). */
struct drc_ticket {
	struct drc *dt_drc;        /* NULL: nothing to store */
	uint32_t dt_bucket;
	uint32_t dt_way;
	uint64_t dt_seq;           /* tells whether the entry still belongs to this call */
};

/*
 * A cache of about entries entries (rounded to whole buckets) whose entries live ttl
 * seconds. entries 0 returns NULL: no cache. Aborts on out of memory, like rpc_alloc().
 */
struct drc *drc_new(unsigned entries, unsigned ttl);
void drc_free(struct drc *d);

/* For tests: the clock in seconds (default: CLOCK_MONOTONIC_COARSE). */
void drc_set_clock(struct drc *d, uint32_t (*now)(void));

/* Number of entries (finished or running) present; for tests and diagnostics. */
unsigned drc_count(struct drc *d);

void drc_key_make(struct drc_key *k, const struct sockaddr *peer, socklen_t peerlen,
		  int protocol, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		  const void *args, size_t arglen);

/*
 * DRC_MISS: the call is now recorded as running and *t names its entry (t->dt_drc is NULL
 * when no entry could be claimed: every entry of the bucket is running; the call then
 * runs unprotected). DRC_HIT: *reply is a malloc()ed copy of the stored reply, *replylen
 * its length. DRC_BUSY: drop the call.
 */
enum drc_verdict drc_lookup(struct drc *d, const struct drc_key *k, struct drc_ticket *t,
			    void **reply, size_t *replylen);

/*
 * drc_lookup() for a call run again after it parked (blocking.h) with its entry left
 * running: a running entry of its key is its own, taken back as a DRC_MISS with a ticket
 * (a retransmission that came meanwhile found it running and was dropped).
 */
enum drc_verdict drc_resume(struct drc *d, const struct drc_key *k, struct drc_ticket *t,
			    void **reply, size_t *replylen);

/* Finishes a DRC_MISS: keeps reply (copied) for retransmissions, or forgets the call
 * when reply is NULL (nothing was sent) or too large. */
void drc_store_slow(struct drc_ticket *t, const void *reply, size_t len);
static inline void drc_store(struct drc_ticket *t, const void *reply, size_t len)
{
	if (t->dt_drc != NULL)
		drc_store_slow(t, reply, len);
}

/*
 * The dispatcher's entry point, on the process-wide cache (DRC_DEFAULT_ENTRIES, made on
 * first use): drc_lookup() for the call in rec as parsed into call, or drc_resume() when
 * resumed.
 */
enum drc_verdict drc_begin(const struct rpc_call *call, const void *rec, size_t len,
			   const struct sockaddr *peer, socklen_t peerlen, int protocol,
			   bool resumed, struct drc_ticket *t, void **reply, size_t *replylen);

#endif
