/*
 * RPC record marking over TCP (RFC 5531 section 11): fragments of up to 2^31-1 bytes,
 * each behind a 4-byte header whose top bit marks the last fragment. The reassembler is
 * pure (no I/O) so it can be tested and fuzzed alone.
 */
#ifndef UNFS_RECORD_H
#define UNFS_RECORD_H

#include <stddef.h>
#include <stdint.h>

struct record_rx {
	uint32_t rr_max;         /* largest record accepted */
	uint8_t rr_hdr[4];
	unsigned rr_hdr_have;    /* header bytes gathered so far */
	uint32_t rr_frag_left;   /* bytes still due in the current fragment */
	int rr_last;             /* current fragment is the last one */
	uint8_t *rr_buf;         /* the record being assembled (malloc) */
	size_t rr_len;
	size_t rr_cap;
};

enum record_status {
	RECORD_MORE = 0,         /* consumed everything, need more bytes */
	RECORD_DONE,             /* a record is complete: take it with record_take() */
	RECORD_TOO_BIG,          /* the record would exceed rr_max: close the connection */
	RECORD_NOMEM,
};

void record_init(struct record_rx *rx, uint32_t max);
void record_free(struct record_rx *rx);

/*
 * Feeds bytes; *used receives how many were consumed (stops right after a record
 * completes so the caller can take it before feeding the rest).
 */
enum record_status record_feed(struct record_rx *rx, const uint8_t *data, size_t len, size_t *used);

/*
 * Room to read the current fragment's body into directly, skipping record_feed's copy:
 * NULL unless a body of at least min bytes is due (or memory ran out: record_feed then
 * says so). The buffer still grows only with bytes that arrive, a step at a time.
 * record_body_add() then counts the n <= *room bytes that were put there.
 */
uint8_t *record_body_room(struct record_rx *rx, size_t min, size_t *room);
void record_body_add(struct record_rx *rx, size_t n);
/* Whether a record is complete (waiting for record_take()). */
int record_done(const struct record_rx *rx);

/* Hands over the completed record (free with rpc_reply_free) and resets for the next one. */
uint8_t *record_take(struct record_rx *rx, size_t *len);

/* Writes a last-fragment header for a reply of len bytes. */
void record_mark(uint8_t hdr[4], uint32_t len);

#endif
