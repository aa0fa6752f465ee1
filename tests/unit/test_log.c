/* Logging: one line per message, control characters from clients never reach the log raw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

/* Logs through a pipe standing in for stderr and returns what was written. */
static void capture(char *out, size_t outlen, const char *fmt, const char *arg)
{
	int fds[2], saved;
	ssize_t n;

	assert_int_equal(pipe(fds), 0);
	saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	log_msg(LOG_INFO, fmt, arg);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	n = read(fds[0], out, outlen - 1);
	close(fds[0]);
	assert_true(n > 0);
	out[n] = '\0';
}

static void test_plain_line(void **state)
{
	char out[256];

	(void)state;
	capture(out, sizeof(out), "MOUNT of %s refused", "/union");
	assert_string_equal(out, "unionnfsd: MOUNT of /union refused\n");
}

static void test_control_characters_replaced(void **state)
{
	char out[256];

	(void)state;
	capture(out, sizeof(out), "MOUNT of %s refused", "/x\nunionnfsd: forged\r\x1b[2J");
	assert_string_equal(out, "unionnfsd: MOUNT of /x?unionnfsd: forged??[2J refused\n");
}

static void test_trailing_newline_kept_single(void **state)
{
	char out[256];

	(void)state;
	capture(out, sizeof(out), "%s\n", "done");
	assert_string_equal(out, "unionnfsd: done\n");
}

static void test_long_message_truncated_to_one_line(void **state)
{
	char arg[4000], out[4096];

	(void)state;
	memset(arg, 'a', sizeof(arg) - 1);
	arg[sizeof(arg) - 1] = '\0';
	capture(out, sizeof(out), "%s", arg);
	assert_true(strlen(out) < 1024);
	assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_line),
		cmocka_unit_test(test_control_characters_replaced),
		cmocka_unit_test(test_trailing_newline_kept_single),
		cmocka_unit_test(test_long_message_truncated_to_one_line),
	};

	log_init(true, "unionnfsd");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
