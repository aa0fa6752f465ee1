/*
 * Unit tests for src/exports.c: export options, client specifiers, matching order,
 * v4-mapped peers, CIDR edges.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exports.h"

static struct sockaddr_storage peer(const char *text)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(700);
	} else {
		assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(700);
	}
	return ss;
}

/* Parses NULL-terminated specifiers into a table (resolving host names). */
static struct export_rule *table(int *n, const char *const *specs)
{
	struct export_rule *r;
	char err[256];
	int i;

	for (*n = 0; specs[*n]; (*n)++)
		;
	r = calloc((size_t)*n, sizeof(*r));
	assert_non_null(r);
	for (i = 0; i < *n; i++) {
		if (exports_parse_spec(specs[i], &r[i], err, sizeof(err)) != 0)
			fail_msg("%s: %s", specs[i], err);
		if (exports_rule_resolve(&r[i], err, sizeof(err)) != 0)
			fail_msg("%s: %s", specs[i], err);
	}
	return r;
}

#define TABLE(n, ...) table((n), (const char *const[]){ __VA_ARGS__, NULL })

static int match(const struct export_rule *r, int n, const char *addr)
{
	struct sockaddr_storage ss = peer(addr);

	return exports_match(r, n, (struct sockaddr *)&ss);
}

static void test_kinds(void **state)
{
	struct export_rule *r;
	int n;

	(void)state;
	r = TABLE(&n, "192.168.1.7", "10.0.0.0/8", "2001:db8::1", "fd00::/8", "localhost", "*");
	assert_int_equal(r[0].er_kind, EXPORTS_NET);
	assert_int_equal(r[4].er_kind, EXPORTS_HOST);
	assert_int_equal(r[5].er_kind, EXPORTS_ANY);
	assert_int_equal(match(r, n, "192.168.1.7"), 0);
	assert_int_equal(match(r, n, "10.255.1.2"), 1);
	assert_int_equal(match(r, n, "2001:db8::1"), 2);
	assert_int_equal(match(r, n, "fdab::5"), 3);
	assert_int_equal(match(r, n, "127.0.0.1"), 4);
	assert_int_equal(match(r, n, "192.168.1.8"), 5);
	/* without the "*" rule, nobody else gets in */
	assert_int_equal(match(r, n - 1, "192.168.1.8"), -1);
	assert_int_equal(match(r, n - 1, "2001:db8::2"), -1);
	assert_int_equal(match(r, n - 1, "11.0.0.1"), -1);
	exports_rules_free(r, n);
}

static void test_first_match_wins(void **state)
{
	struct export_rule *r;
	int n;

	(void)state;
	r = TABLE(&n, "10.1.0.0/16", "10.0.0.0/8", "10.1.2.3", "*");
	assert_int_equal(match(r, n, "10.1.2.3"), 0);
	assert_int_equal(match(r, n, "10.2.2.3"), 1);
	assert_int_equal(match(r, n, "9.2.2.3"), 3);
	exports_rules_free(r, n);
	r = TABLE(&n, "*", "10.1.2.3");
	assert_int_equal(match(r, n, "10.1.2.3"), 0);
	exports_rules_free(r, n);
	{
		struct sockaddr_storage ss = peer("10.1.2.3");

		assert_int_equal(exports_match(NULL, 0, (struct sockaddr *)&ss), -1);
	}
}

/* An IPv4 peer reaching a dual-stack socket shows up as ::ffff:a.b.c.d. */
static void test_v4_mapped(void **state)
{
	struct export_rule *r;
	int n;

	(void)state;
	r = TABLE(&n, "192.168.1.7", "10.0.0.0/8", "::1");
	assert_int_equal(match(r, n, "::ffff:192.168.1.7"), 0);
	assert_int_equal(match(r, n, "::ffff:10.9.9.9"), 1);
	assert_int_equal(match(r, n, "::ffff:11.9.9.9"), -1);
	/* ::1 is not 127.0.0.1, and an IPv4 rule never admits a native IPv6 peer */
	assert_int_equal(match(r, n, "::1"), 2);
	assert_int_equal(match(r, n, "127.0.0.1"), -1);
	assert_int_equal(match(r, n, "::c0a8:107"), -1);
	exports_rules_free(r, n);
}

static void test_cidr_edges(void **state)
{
	struct export_rule *r;
	int n;

	(void)state;
	r = TABLE(&n, "0.0.0.0/0");
	assert_int_equal(match(r, n, "255.255.255.255"), 0);
	assert_int_equal(match(r, n, "::ffff:1.2.3.4"), 0);
	assert_int_equal(match(r, n, "::1"), -1);
	exports_rules_free(r, n);
	r = TABLE(&n, "::/0");
	assert_int_equal(match(r, n, "::1"), 0);
	assert_int_equal(match(r, n, "1.2.3.4"), 0);
	exports_rules_free(r, n);
	r = TABLE(&n, "10.0.0.5/32", "2001:db8::5/128", "10.0.0.128/25", "2001:db8:0:3::/63");
	assert_int_equal(match(r, n, "10.0.0.5"), 0);
	assert_int_equal(match(r, n, "10.0.0.4"), -1);
	assert_int_equal(match(r, n, "2001:db8::5"), 1);
	assert_int_equal(match(r, n, "2001:db8::4"), -1);
	assert_int_equal(match(r, n, "10.0.0.127"), -1);
	assert_int_equal(match(r, n, "10.0.0.128"), 2);
	assert_int_equal(match(r, n, "10.0.0.255"), 2);
	assert_int_equal(match(r, n, "2001:db8:0:2:ffff::"), 3);
	assert_int_equal(match(r, n, "2001:db8:0:3:ffff::1"), 3);
	assert_int_equal(match(r, n, "2001:db8:0:4::"), -1);
	assert_int_equal(match(r, n, "2001:db8:0:1:ffff:ffff:ffff:ffff"), -1);
	exports_rules_free(r, n);
	/* host bits past the prefix are ignored, as exports(5) users expect */
	r = TABLE(&n, "10.1.2.3/8");
	assert_int_equal(match(r, n, "10.200.0.1"), 0);
	exports_rules_free(r, n);
}

static void expect_bad(const char *spec, const char *want)
{
	struct export_rule r;
	char err[256];

	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(exports_parse_spec(spec, &r, err, sizeof(err)), -1);
	assert_null(r.er_spec);
	assert_null(r.er_nets);
	if (strstr(err, want) == NULL)
		fail_msg("'%s': got '%s', want '%s'", spec, err, want);
}

static void test_bad_specs(void **state)
{
	char longname[300];

	(void)state;
	expect_bad("", "is empty or longer than 255 bytes");
	expect_bad("10.0.0.0/33", "'33' is not an IPv4 prefix length 0..32");
	expect_bad("10.0.0.0/", "'' is not an IPv4 prefix length");
	expect_bad("10.0.0.0/-1", "'-1' is not an IPv4 prefix length");
	expect_bad("10.0.0.0/ 8", "is not an IPv4 prefix length");
	expect_bad("10.0.0.0/0008", "is not an IPv4 prefix length");
	expect_bad("::/129", "'129' is not an IPv6 prefix length 0..128");
	expect_bad("host/8", "is not *, an IPv4 or IPv6 address");
	expect_bad("a b", "is not *, an IPv4 or IPv6 address");
	expect_bad("-host", "is not *, an IPv4 or IPv6 address");
	expect_bad("**", "is not *, an IPv4 or IPv6 address");
	expect_bad("@netgroup", "is not *, an IPv4 or IPv6 address");
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	expect_bad(longname, "longer than 255 bytes");
}

static void test_unresolvable(void **state)
{
	struct export_rule r;
	char err[256];

	(void)state;
	assert_int_equal(exports_parse_spec("no-such-host.invalid", &r, err, sizeof(err)), 0);
	assert_int_equal(r.er_kind, EXPORTS_HOST);
	assert_int_equal(exports_rule_resolve(&r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'no-such-host.invalid' does not resolve"));
	/* an unresolved host rule admits nobody */
	{
		struct sockaddr_storage ss = peer("127.0.0.1");

		assert_int_equal(exports_match(&r, 1, (struct sockaddr *)&ss), -1);
	}
	exports_rule_free(&r);
}

static void test_addrs_text(void **state)
{
	struct export_rule *r;
	char buf[128];
	int n;

	(void)state;
	r = TABLE(&n, "10.0.0.0/8", "::1", "*");
	exports_rule_addrs(&r[0], buf, sizeof(buf));
	assert_string_equal(buf, "10.0.0.0");
	exports_rule_addrs(&r[1], buf, sizeof(buf));
	assert_string_equal(buf, "::1");
	exports_rule_addrs(&r[2], buf, sizeof(buf));
	assert_string_equal(buf, "");
	exports_rules_free(r, n);
}

/* A peer of another family (AF_UNIX) only matches "*". */
static void test_other_family(void **state)
{
	struct sockaddr_storage ss;
	struct export_rule *r;
	int n;

	(void)state;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	r = TABLE(&n, "0.0.0.0/0", "::/0", "*");
	assert_int_equal(exports_match(r, n, (struct sockaddr *)&ss), 2);
	assert_int_equal(exports_match(r, n - 1, (struct sockaddr *)&ss), -1);
	exports_rules_free(r, n);
}

static void test_each_export_option(void **state)
{
	struct export_opts o;
	char err[512];
	size_t n = sizeof(err);

	(void)state;
	memset(&o, 0, sizeof(o));
	o.eo_secure = true;
	assert_int_equal(exports_parse_opts(&o, "ro", err, n), 0);
	assert_true(o.eo_ro);
	assert_int_equal(exports_parse_opts(&o, "rw", err, n), 0);
	assert_false(o.eo_ro);
	assert_int_equal(exports_parse_opts(&o, "no_root_squash", err, n), 0);
	assert_int_equal(o.eo_squash, SQUASH_NONE);
	assert_int_equal(exports_parse_opts(&o, "all_squash", err, n), 0);
	assert_int_equal(o.eo_squash, SQUASH_ALL);
	assert_int_equal(exports_parse_opts(&o, "root_squash", err, n), 0);
	assert_int_equal(o.eo_squash, SQUASH_ROOT);
	assert_int_equal(exports_parse_opts(&o, "insecure", err, n), 0);
	assert_false(o.eo_secure);
	assert_int_equal(exports_parse_opts(&o, "secure", err, n), 0);
	assert_true(o.eo_secure);
	assert_false(o.eo_async);
	assert_int_equal(exports_parse_opts(&o, "async", err, n), 0);
	assert_true(o.eo_async);
	assert_int_equal(exports_parse_opts(&o, "sync", err, n), 0);
	assert_false(o.eo_async);
	assert_int_equal(exports_parse_opts(&o, "anonuid=1000,anongid=0", err, n), 0);
	assert_int_equal(o.eo_anonuid, 1000);
	assert_int_equal(o.eo_anongid, 0);
	assert_int_equal(exports_parse_opts(&o, "anonuid=4294967294", err, n), 0);
	assert_int_equal(o.eo_anonuid, 4294967294u);
	assert_int_equal(exports_parse_opts(&o, "ro,no_root_squash,insecure", err, n), 0);
	assert_true(o.eo_ro);
	assert_int_equal(o.eo_squash, SQUASH_NONE);
	assert_false(o.eo_secure);
}

static void test_bad_export_options(void **state)
{
	struct export_opts o, before;
	char err[512];
	size_t n = sizeof(err);

	(void)state;
	memset(&o, 0, sizeof(o));
	before = o;
	assert_int_equal(exports_parse_opts(&o, "ro,rww", err, n), -1);
	assert_string_equal(err, "unknown export option 'rww' (expected ro, rw, root_squash, "
				 "no_root_squash, all_squash, anonuid=N, anongid=N, secure, insecure, sync, "
				 "async, upper=TEMPLATE)");
	/* All or nothing: the good "ro" before the bad word did not stick. */
	assert_memory_equal(&o, &before, sizeof(o));
	assert_int_equal(exports_parse_opts(&o, "ro,,rw", err, n), -1);
	assert_non_null(strstr(err, "empty export option in 'ro,,rw'"));
	assert_int_equal(exports_parse_opts(&o, "", err, n), -1);
	assert_int_equal(exports_parse_opts(&o, "anonuid=-1", err, n), -1);
	assert_string_equal(err, "export option 'anonuid=-1': '-1' is not an id in 0..4294967294");
	assert_int_equal(exports_parse_opts(&o, "anongid=4294967295", err, n), -1);
	assert_int_equal(exports_parse_opts(&o, "anonuid=", err, n), -1);
	assert_int_equal(exports_parse_opts(&o, "anonuid", err, n), -1);
	assert_int_equal(exports_parse_opts(&o, "RO", err, n), -1);
	assert_int_equal(exports_parse_opts(
				 &o, "a_very_long_export_option_word_that_is_longer_than_sixty_four_bytes_xx",
				 err, n),
			 -1);
	assert_non_null(strstr(err, "unknown export option 'a_very_long"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_cidr_edges),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_unresolvable),
		cmocka_unit_test(test_addrs_text),
		cmocka_unit_test(test_other_family),
		cmocka_unit_test(test_each_export_option),
		cmocka_unit_test(test_bad_export_options),
	};

	return cmocka_run_group_tests_name("exports", tests, NULL, NULL);
}
