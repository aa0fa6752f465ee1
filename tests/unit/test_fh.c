/* File handles: round trips, the padded MOUNT v1 form, and every way a handle can be bad. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fh.h"

static const uint8_t key[STORE_KEY_LEN] = "0123456789abcdef";
static const uint8_t key2[STORE_KEY_LEN] = "fedcba9876543210";

static void test_round_trip(void **state)
{
	struct fh in = { .fh_export = 0x1234, .fh_ino = 0x0102030405060708ull, .fh_gen = 7 };
	struct fh out;
	uint8_t buf[FH_LEN];

	(void)state;
	fh_encode(&in, key, buf);
	assert_int_equal(buf[0], FH_VERSION);
	assert_int_equal(fh_decode(buf, sizeof(buf), key, &out), 0);
	assert_int_equal(out.fh_export, in.fh_export);
	assert_true(out.fh_ino == in.fh_ino);
	assert_int_equal(out.fh_gen, in.fh_gen);
}

static void test_layout_stable(void **state)
{
	struct fh in = { .fh_export = 1, .fh_ino = 1, .fh_gen = 0 };
	const uint8_t body[16] = { 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0 };
	uint8_t a[FH_LEN], b[FH_LEN];

	(void)state;
	fh_encode(&in, key, a);
	fh_encode(&in, key, b);
	/* Handles must survive restarts: the same object always gets the same bytes. */
	assert_memory_equal(a, b, FH_LEN);
	assert_memory_equal(a, body, sizeof(body));
}

static void test_padded(void **state)
{
	struct fh in = { .fh_export = 3, .fh_ino = 99, .fh_gen = 0 };
	struct fh out;
	uint8_t buf[32];

	(void)state;
	memset(buf, 0, sizeof(buf));
	fh_encode(&in, key, buf);
	assert_int_equal(fh_decode(buf, 32, key, &out), 0);
	assert_true(out.fh_ino == 99);
	buf[31] = 1;
	assert_int_equal(fh_decode(buf, 32, key, &out), -1);
}

static void test_bad_lengths(void **state)
{
	struct fh in = { .fh_export = 3, .fh_ino = 99, .fh_gen = 0 };
	struct fh out;
	uint8_t buf[64];
	size_t len;

	(void)state;
	memset(buf, 0, sizeof(buf));
	fh_encode(&in, key, buf);
	for (len = 0; len <= sizeof(buf); len++)
		if (len != FH_LEN && len != 32)
			assert_int_equal(fh_decode(buf, len, key, &out), -1);
	assert_int_equal(fh_decode(NULL, 0, key, &out), -1);
	assert_int_equal(fh_decode(NULL, FH_LEN, key, &out), -1);
}

static void test_tampered(void **state)
{
	struct fh in = { .fh_export = 3, .fh_ino = 99, .fh_gen = 0 };
	struct fh out;
	uint8_t buf[FH_LEN], bad[FH_LEN];
	int i, bit;

	(void)state;
	fh_encode(&in, key, buf);
	/* Any single flipped bit, body or MAC, must be caught. */
	for (i = 0; i < FH_LEN; i++)
		for (bit = 0; bit < 8; bit++) {
			memcpy(bad, buf, FH_LEN);
			bad[i] ^= (uint8_t)(1 << bit);
			assert_int_equal(fh_decode(bad, FH_LEN, key, &out), -1);
		}
	assert_int_equal(fh_decode(buf, FH_LEN, key2, &out), -1);
}

static void test_wrong_version(void **state)
{
	struct fh in = { .fh_export = 3, .fh_ino = 99, .fh_gen = 0 };
	struct fh out;
	uint8_t buf[FH_LEN];

	(void)state;
	fh_encode(&in, key, buf);
	buf[0] = FH_VERSION + 1;
	assert_int_equal(fh_decode(buf, FH_LEN, key, &out), -1);
}

static void test_zero_ino_refused(void **state)
{
	struct fh in = { .fh_export = 3, .fh_ino = 0, .fh_gen = 0 };
	struct fh out;
	uint8_t buf[FH_LEN];

	(void)state;
	fh_encode(&in, key, buf);
	assert_int_equal(fh_decode(buf, FH_LEN, key, &out), -1);
	in.fh_ino = 5;
	in.fh_export = 0;
	fh_encode(&in, key, buf);
	assert_int_equal(fh_decode(buf, FH_LEN, key, &out), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_layout_stable),
		cmocka_unit_test(test_padded),
		cmocka_unit_test(test_bad_lengths),
		cmocka_unit_test(test_tampered),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_zero_ino_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
