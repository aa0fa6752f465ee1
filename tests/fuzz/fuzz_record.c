/*
 * Fuzzes the TCP record reassembler: the input is a byte stream fed to record_feed() in
 * chunks of pseudo-random size under a small rr_max, checked against a naive reference
 * parse of the same stream (same records, same TOO_BIG point).
 * Layout: max (2 bytes, big-endian, taken mod 4096), chunk seed (1 byte), then the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reference: the next record at *pos, or -1 (incomplete) / -2 (too big). */
static int ref_next(const uint8_t *s, size_t n, size_t *pos, uint32_t max, uint8_t *out, size_t *outlen)
{
	size_t p = *pos, len = 0;

	for (;;) {
		uint32_t h, flen;

		if (n - p < 4)
			return -1;
		h = (uint32_t)s[p] << 24 | (uint32_t)s[p + 1] << 16 | (uint32_t)s[p + 2] << 8 | s[p + 3];
		p += 4;
		flen = h & 0x7fffffffu;
		if (flen > max - len)
			return -2;
		if (n - p < flen)
			return -1;
		memcpy(out + len, s + p, flen);
		len += flen;
		p += flen;
		if (h & 0x80000000u)
			break;
	}
	*pos = p;
	*outlen = len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct record_rx rx;
	uint32_t max, rng;
	const uint8_t *s;
	size_t n, pos = 0, refpos = 0;
	uint8_t *ref;
	int refst = 0;

	if (size < 3)
		return 0;
	max = ((uint32_t)data[0] << 8 | data[1]) % 4096;
	rng = data[2] * 2654435761u + 1;
	s = data + 3;
	n = size - 3;
	ref = malloc(max + 1);
	if (ref == NULL)
		abort();
	record_init(&rx, max);
	while (pos < n) {
		size_t chunk, used = 0;
		enum record_status st;

		rng = rng * 1103515245u + 12345u;
		chunk = 1 + (rng >> 16) % 64;
		if (chunk > n - pos)
			chunk = n - pos;
		st = record_feed(&rx, s + pos, chunk, &used);
		if (used > chunk)
			abort();
		pos += used;
		if (st == RECORD_DONE) {
			size_t len, reflen = 0;
			uint8_t *rec = record_take(&rx, &len);

			if (rec == NULL || len > max)
				abort();
			refst = ref_next(s, n, &refpos, max, ref, &reflen);
			if (refst != 0 || reflen != len || memcmp(ref, rec, len) != 0 || refpos != pos)
				abort();
			free(rec);
		} else if (st == RECORD_TOO_BIG) {
			size_t reflen;

			do
				refst = ref_next(s, n, &refpos, max, ref, &reflen);
			while (refst == 0);
			if (refst != -2)
				abort();
			break;
		} else if (st == RECORD_NOMEM) {
			abort();
		} else if (used != chunk) {
			abort();
		}
	}
	if (pos == n) {
		size_t reflen;

		/* Everything consumed: the reference must find no further complete record. */
		refst = ref_next(s, n, &refpos, max, ref, &reflen);
		if (refst == 0)
			abort();
	}
	record_free(&rx);
	free(ref);
	return 0;
}
