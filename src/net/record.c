/*
 * RPC record marking (RFC 5531 section 11). The reassembler is a small state machine:
 * gathering a 4-byte fragment header (rr_hdr_have < 4), then copying the fragment body
 * (rr_hdr_have == 4, rr_frag_left bytes due). A record is complete when the body of a
 * last fragment has been copied; it stays complete until record_take().
 *
 * The buffer grows with the bytes that actually arrive, never with what a header
 * promises, so a peer announcing a huge fragment and then going quiet costs nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "rpc.h"

#define RECORD_MIN_CAP 512
/* What record_body_room() adds at most when the buffer is full. */
#define RECORD_STEP (64u << 10)
/* Records from this size on may take a pooled buffer. */
#define RECORD_POOL_MIN (128u << 10)

void record_init(struct record_rx *rx, uint32_t max)
{
	memset(rx, 0, sizeof(*rx));
	rx->rr_max = max;
}

void record_free(struct record_rx *rx)
{
	free(rx->rr_buf);
	rx->rr_buf = NULL;
	rx->rr_len = 0;
	rx->rr_cap = 0;
}

static int record_complete(const struct record_rx *rx)
{
	return rx->rr_hdr_have == 4 && rx->rr_frag_left == 0 && rx->rr_last;
}

int record_done(const struct record_rx *rx)
{
	return record_complete(rx);
}

/*
 * A large record takes a buffer given back by an earlier call (rpc_buf_take) when there is
 * one: memory already held, so a peer that announces a big fragment and stops costs no
 * new memory, and the pages need not be faulted in again for every 1 MiB WRITE.
 */
static int record_reserve_pooled(struct record_rx *rx, size_t need)
{
	size_t want = rx->rr_len + rx->rr_frag_left, cap;
	uint8_t *buf;

	if (want < need || want < RECORD_POOL_MIN)
		return -1;
	buf = rpc_buf_take(want, &cap);
	if (buf == NULL)
		return -1;
	if (rx->rr_len > 0)
		memcpy(buf, rx->rr_buf, rx->rr_len);
	free(rx->rr_buf);
	rx->rr_buf = buf;
	rx->rr_cap = cap;
	return 0;
}

/* Makes room for need bytes in total; need never exceeds rr_max. */
static int record_reserve(struct record_rx *rx, size_t need)
{
	size_t cap;
	uint8_t *buf;

	if (need <= rx->rr_cap && rx->rr_buf != NULL)
		return 0;
	if (record_reserve_pooled(rx, need) == 0)
		return 0;
	cap = rx->rr_cap ? rx->rr_cap : RECORD_MIN_CAP;
	while (cap < need)
		cap *= 2;
	if (cap > rx->rr_max && need <= rx->rr_max)
		cap = rx->rr_max > 0 ? rx->rr_max : 1;
	if (cap < need)
		cap = need;
	buf = realloc(rx->rr_buf, cap);
	if (buf == NULL)
		return -1;
	rx->rr_buf = buf;
	rx->rr_cap = cap;
	return 0;
}

enum record_status record_feed(struct record_rx *rx, const uint8_t *data, size_t len, size_t *used)
{
	size_t pos = 0;
	enum record_status st = RECORD_MORE;

	while (!record_complete(rx)) {
		if (rx->rr_hdr_have < 4) {
			uint32_t h;

			if (pos == len)
				break;
			rx->rr_hdr[rx->rr_hdr_have++] = data[pos++];
			if (rx->rr_hdr_have < 4)
				continue;
			h = (uint32_t)rx->rr_hdr[0] << 24 | (uint32_t)rx->rr_hdr[1] << 16 |
			    (uint32_t)rx->rr_hdr[2] << 8 | rx->rr_hdr[3];
			rx->rr_last = (h & 0x80000000u) != 0;
			rx->rr_frag_left = h & 0x7fffffffu;
			if (rx->rr_frag_left > rx->rr_max - rx->rr_len) {
				st = RECORD_TOO_BIG;
				goto out;
			}
			continue;
		}
		if (rx->rr_frag_left > 0) {
			size_t n = len - pos;

			if (n == 0)
				break;
			if (n > rx->rr_frag_left)
				n = rx->rr_frag_left;
			if (record_reserve(rx, rx->rr_len + n) < 0) {
				st = RECORD_NOMEM;
				goto out;
			}
			memcpy(rx->rr_buf + rx->rr_len, data + pos, n);
			rx->rr_len += n;
			rx->rr_frag_left -= (uint32_t)n;
			pos += n;
			continue;
		}
		/* End of a fragment that is not the last: expect the next header. */
		rx->rr_hdr_have = 0;
	}
	if (record_complete(rx)) {
		/* record_take() must hand over memory even for an empty record. */
		if (rx->rr_buf == NULL && record_reserve(rx, 1) < 0) {
			st = RECORD_NOMEM;
			goto out;
		}
		st = RECORD_DONE;
	}
out:
	*used = pos;
	return st;
}

uint8_t *record_body_room(struct record_rx *rx, size_t min, size_t *room)
{
	size_t step;

	if (rx->rr_hdr_have < 4 || rx->rr_frag_left == 0 || rx->rr_frag_left < min)
		return NULL;
	step = rx->rr_frag_left < RECORD_STEP ? rx->rr_frag_left : RECORD_STEP;
	if (record_reserve(rx, rx->rr_len + step) < 0)
		return NULL;
	*room = rx->rr_cap - rx->rr_len;
	if (*room > rx->rr_frag_left)
		*room = rx->rr_frag_left;
	return rx->rr_buf + rx->rr_len;
}

void record_body_add(struct record_rx *rx, size_t n)
{
	rx->rr_len += n;
	rx->rr_frag_left -= (uint32_t)n;
}

uint8_t *record_take(struct record_rx *rx, size_t *len)
{
	uint8_t *buf = rx->rr_buf;

	*len = rx->rr_len;
	rx->rr_buf = NULL;
	rx->rr_len = 0;
	rx->rr_cap = 0;
	rx->rr_hdr_have = 0;
	rx->rr_frag_left = 0;
	rx->rr_last = 0;
	return buf;
}

void record_mark(uint8_t hdr[4], uint32_t len)
{
	uint32_t h = 0x80000000u | (len & 0x7fffffffu);

	hdr[0] = (uint8_t)(h >> 24);
	hdr[1] = (uint8_t)(h >> 16);
	hdr[2] = (uint8_t)(h >> 8);
	hdr[3] = (uint8_t)h;
}
