/*
 * rpc_addr_text: IPv4, IPv6, IPv4-mapped IPv6 written as IPv4, and what it refuses (no
 * address, another family, a length short of the family's, a buffer too small).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <cmocka.h>

#include "rpc.h"

static struct sockaddr_in v4(const char *text)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(2049) };

	assert_int_equal(inet_pton(AF_INET, text, &sin.sin_addr), 1);
	return sin;
}

static struct sockaddr_in6 v6(const char *text)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(2049) };

	assert_int_equal(inet_pton(AF_INET6, text, &sin6.sin6_addr), 1);
	return sin6;
}

static void test_families(void **state)
{
	struct sockaddr_in a4 = v4("192.0.2.7");
	struct sockaddr_in6 a6 = v6("2001:db8::1"), mapped = v6("::ffff:192.0.2.8");
	struct sockaddr_storage ss = { 0 };
	char buf[INET6_ADDRSTRLEN];

	(void)state;
	assert_true(rpc_addr_text((struct sockaddr *)&a4, sizeof(a4), buf, sizeof(buf)));
	assert_string_equal(buf, "192.0.2.7");
	assert_true(rpc_addr_text((struct sockaddr *)&a6, sizeof(a6), buf, sizeof(buf)));
	assert_string_equal(buf, "2001:db8::1");
	assert_true(rpc_addr_text((struct sockaddr *)&mapped, sizeof(mapped), buf, sizeof(buf)));
	assert_string_equal(buf, "192.0.2.8");
	/* a sockaddr_storage's length is fine */
	memcpy(&ss, &mapped, sizeof(mapped));
	assert_true(rpc_addr_text((struct sockaddr *)&ss, sizeof(ss), buf, sizeof(buf)));
	assert_string_equal(buf, "192.0.2.8");
}

static void test_refused(void **state)
{
	struct sockaddr_in a4 = v4("192.0.2.7");
	struct sockaddr_in6 a6 = v6("2001:db8::1");
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/x" };
	char buf[INET6_ADDRSTRLEN], small[4];

	(void)state;
	assert_false(rpc_addr_text(NULL, sizeof(a4), buf, sizeof(buf)));
	assert_false(rpc_addr_text((struct sockaddr *)&un, sizeof(un), buf, sizeof(buf)));
	assert_false(rpc_addr_text((struct sockaddr *)&a4, sizeof(a4) - 1, buf, sizeof(buf)));
	assert_false(rpc_addr_text((struct sockaddr *)&a6, sizeof(a6) - 1, buf, sizeof(buf)));
	assert_false(rpc_addr_text((struct sockaddr *)&a4, 0, buf, sizeof(buf)));
	assert_false(rpc_addr_text((struct sockaddr *)&a4, sizeof(a4), small, sizeof(small)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_families),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
