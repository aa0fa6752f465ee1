/* Busy polling's window (src/net/spin.h): how it grows, shrinks and ends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/net/spin.h"

#define US 1000

/* Polls for the whole window after a call, and not a nanosecond longer. */
static void test_window_after_call(void **state)
{
	struct spin sp;

	(void)state;
	spin_init(&sp, 100);
	assert_false(spin_keep(&sp, 1));
	spin_call(&sp, 1000 * US);
	assert_true(spin_keep(&sp, 1000 * US));
	assert_true(spin_keep(&sp, 1099 * US));
	assert_false(spin_keep(&sp, 1100 * US));
	/* a reply sent later moves the window's start */
	spin_event(&sp, 1050 * US);
	assert_true(spin_keep(&sp, 1149 * US));
	assert_false(spin_keep(&sp, 1150 * US));
}

/* Calls that come later than the window halve it, down to nothing; one that comes in time
 * brings it back whole. */
static void test_window_adapts(void **state)
{
	struct spin sp;
	int64_t t = 1000 * US;

	(void)state;
	spin_init(&sp, 100);
	spin_call(&sp, t);
	t += 150 * US;
	spin_call(&sp, t);
	assert_true(spin_keep(&sp, t + 49 * US));
	assert_false(spin_keep(&sp, t + 50 * US));
	t += 150 * US;
	spin_call(&sp, t);
	assert_true(spin_keep(&sp, t + 24 * US));
	assert_false(spin_keep(&sp, t + 25 * US));
	t += 150 * US;
	spin_call(&sp, t);          /* 12.5 us */
	assert_true(spin_keep(&sp, t + 12 * US));
	t += 150 * US;
	spin_call(&sp, t);          /* 6.25 us is below SPIN_MIN_NS: off */
	assert_false(spin_keep(&sp, t));
	t += 5000 * US;
	spin_call(&sp, t);
	assert_false(spin_keep(&sp, t));
	/* back to back again: the whole window at once */
	t += 40 * US;
	spin_call(&sp, t);
	assert_true(spin_keep(&sp, t + 99 * US));
	assert_false(spin_keep(&sp, t + 100 * US));
}

/* 0 (and anything below SPIN_MIN_NS) never polls. */
static void test_off(void **state)
{
	struct spin sp;

	(void)state;
	spin_init(&sp, 0);
	spin_call(&sp, 1000 * US);
	spin_call(&sp, 1001 * US);
	spin_event(&sp, 1002 * US);
	assert_false(spin_keep(&sp, 1002 * US));
	spin_init(&sp, 5);
	spin_call(&sp, 1000 * US);
	spin_call(&sp, 1001 * US);
	assert_false(spin_keep(&sp, 1001 * US));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_after_call),
		cmocka_unit_test(test_window_adapts),
		cmocka_unit_test(test_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
