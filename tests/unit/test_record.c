/* Record marking: reassembly of fragmented records, size bounds, byte-at-a-time feeding. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "record.h"

/* Appends a fragment header and body to buf at *off. */
static void frag(uint8_t *buf, size_t *off, const void *data, uint32_t len, int last)
{
	uint32_t h = len | (last ? 0x80000000u : 0);

	buf[(*off)++] = (uint8_t)(h >> 24);
	buf[(*off)++] = (uint8_t)(h >> 16);
	buf[(*off)++] = (uint8_t)(h >> 8);
	buf[(*off)++] = (uint8_t)h;
	memcpy(buf + *off, data, len);
	*off += len;
}

static void test_single(void **state)
{
	struct record_rx rx;
	uint8_t buf[64];
	size_t off = 0, used, len;
	uint8_t *rec;

	(void)state;
	record_init(&rx, 1024);
	frag(buf, &off, "hello", 5, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	assert_int_equal(used, off);
	rec = record_take(&rx, &len);
	assert_non_null(rec);
	assert_int_equal(len, 5);
	assert_memory_equal(rec, "hello", 5);
	free(rec);
	record_free(&rx);
}

static void test_multi_fragment(void **state)
{
	struct record_rx rx;
	uint8_t buf[64];
	size_t off = 0, used, len;
	uint8_t *rec;

	(void)state;
	record_init(&rx, 1024);
	frag(buf, &off, "abc", 3, 0);
	frag(buf, &off, "defg", 4, 0);
	frag(buf, &off, "h", 1, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	assert_int_equal(used, off);
	rec = record_take(&rx, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(rec, "abcdefgh", 8);
	free(rec);
	record_free(&rx);
}

static void test_byte_at_a_time(void **state)
{
	struct record_rx rx;
	uint8_t buf[2048], body[1500];
	size_t off = 0, used, len;
	uint8_t *rec = NULL;
	int done = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)(i * 7);
	record_init(&rx, 4096);
	frag(buf, &off, body, 700, 0);
	frag(buf, &off, body + 700, 0, 0);
	frag(buf, &off, body + 700, 800, 1);
	for (size_t i = 0; i < off; i++) {
		enum record_status st = record_feed(&rx, buf + i, 1, &used);

		assert_int_equal(used, 1);
		if (i + 1 < off) {
			assert_int_equal(st, RECORD_MORE);
		} else {
			assert_int_equal(st, RECORD_DONE);
			done = 1;
		}
	}
	assert_true(done);
	rec = record_take(&rx, &len);
	assert_int_equal(len, sizeof(body));
	assert_memory_equal(rec, body, sizeof(body));
	free(rec);
	record_free(&rx);
}

static void test_too_big(void **state)
{
	struct record_rx rx;
	uint8_t buf[256], body[100] = { 0 };
	size_t off = 0, used;

	(void)state;
	/* Two fragments that are fine alone but together exceed the bound. */
	record_init(&rx, 150);
	frag(buf, &off, body, 100, 0);
	frag(buf, &off, body, 60, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_TOO_BIG);
	record_free(&rx);

	/* A header alone announcing 2^31-1 bytes is refused before any byte arrives. */
	record_init(&rx, 1 << 20);
	assert_int_equal(record_feed(&rx, (const uint8_t *)"\xff\xff\xff\xff", 4, &used),
			 RECORD_TOO_BIG);
	record_free(&rx);

	/* Exactly the bound is accepted. */
	record_init(&rx, 100);
	off = 0;
	frag(buf, &off, body, 100, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	record_free(&rx);
}

static void test_zero_length(void **state)
{
	struct record_rx rx;
	uint8_t buf[64];
	size_t off = 0, used, len;
	uint8_t *rec;

	(void)state;
	record_init(&rx, 1024);
	frag(buf, &off, "", 0, 0);
	frag(buf, &off, "xy", 2, 0);
	frag(buf, &off, "", 0, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	assert_int_equal(used, off);
	rec = record_take(&rx, &len);
	assert_int_equal(len, 2);
	assert_memory_equal(rec, "xy", 2);
	free(rec);

	/* An entirely empty record still hands over memory. */
	off = 0;
	frag(buf, &off, "", 0, 1);
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	rec = record_take(&rx, &len);
	assert_non_null(rec);
	assert_int_equal(len, 0);
	free(rec);
	record_free(&rx);
}

static void test_two_records(void **state)
{
	struct record_rx rx;
	uint8_t buf[64];
	size_t off = 0, used, used2, len;
	uint8_t *rec;

	(void)state;
	record_init(&rx, 1024);
	frag(buf, &off, "one", 3, 1);
	frag(buf, &off, "tw", 2, 0);
	frag(buf, &off, "o", 1, 1);
	frag(buf, &off, "th", 2, 0); /* a third, incomplete */
	assert_int_equal(record_feed(&rx, buf, off, &used), RECORD_DONE);
	assert_int_equal(used, 7);
	/* Feeding again before taking consumes nothing. */
	assert_int_equal(record_feed(&rx, buf + used, off - used, &used2), RECORD_DONE);
	assert_int_equal(used2, 0);
	rec = record_take(&rx, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(rec, "one", 3);
	free(rec);
	assert_int_equal(record_feed(&rx, buf + used, off - used, &used2), RECORD_DONE);
	assert_int_equal(used2, 11);
	rec = record_take(&rx, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(rec, "two", 3);
	free(rec);
	used += used2;
	assert_int_equal(record_feed(&rx, buf + used, off - used, &used2), RECORD_MORE);
	assert_int_equal(used2, off - used);
	record_free(&rx);
}

static void test_mark(void **state)
{
	uint8_t h[4];

	(void)state;
	record_mark(h, 0x1234);
	assert_memory_equal(h, "\x80\x00\x12\x34", 4);
	record_mark(h, 0);
	assert_memory_equal(h, "\x80\x00\x00\x00", 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single),
		cmocka_unit_test(test_multi_fragment),
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_two_records),
		cmocka_unit_test(test_mark),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
