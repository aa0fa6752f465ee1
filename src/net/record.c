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

#define RECORD_MIN_CAP 512

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

/* Makes room for need bytes in total; need never exceeds rr_max. */
static int record_reserve(struct record_rx *rx, size_t need)
{
	size_t cap;
	uint8_t *buf;

	if (need <= rx->rr_cap && rx->rr_buf != NULL)
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
