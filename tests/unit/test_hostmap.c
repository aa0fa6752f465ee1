/*
 * Unit tests for src/hostmap.c: the host name map file (its form and its error messages),
 * lookups in any address text form, which names may name a directory, and reverse lookups
 * (through /etc/hosts for 127.0.0.1, so no DNS server is asked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostmap.h"

static char path[64];

static void write_map(const char *text)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/unfs-hostmap.%d", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* Loads text as a map that must be refused; err receives the message. */
static void refused(const char *text, char *err, size_t errlen)
{
	struct hostmap *hm = (struct hostmap *)1;

	write_map(text);
	assert_int_equal(hostmap_load(path, &hm, err, errlen), -1);
	assert_null(hm);
	assert_non_null(strstr(err, path));
}

static void test_load_and_find(void **state)
{
	struct hostmap *hm;
	char err[512];

	(void)state;
	write_map("# the lab\n"
		  "192.168.50.101 Lab01 lab01.example.org   # first name counts\n"
		  "\n"
		  "   192.168.50.102\tlab02\n"
		  "fd00::0:1 lab-v6\n"
		  "::ffff:10.0.0.9 mapped_one\n");
	assert_int_equal(hostmap_load(path, &hm, err, sizeof(err)), 0);
	assert_string_equal(hostmap_path(hm), path);
	assert_string_equal(hostmap_find(hm, "192.168.50.101"), "lab01");
	assert_string_equal(hostmap_find(hm, "192.168.50.102"), "lab02");
	/* Any text form of the address finds it: the server prints the canonical one. */
	assert_string_equal(hostmap_find(hm, "fd00::1"), "lab-v6");
	assert_string_equal(hostmap_find(hm, "fd00:0:0:0:0:0:0:1"), "lab-v6");
	assert_string_equal(hostmap_find(hm, "10.0.0.9"), "mapped_one");
	assert_string_equal(hostmap_find(hm, "::ffff:192.168.50.101"), "lab01");
	assert_null(hostmap_find(hm, "192.168.50.103"));
	assert_null(hostmap_find(hm, "lab01"));
	assert_null(hostmap_find(NULL, "192.168.50.101"));
	hostmap_free(hm);
}

static void test_empty_map(void **state)
{
	struct hostmap *hm;
	char err[512];

	(void)state;
	write_map("# nobody yet\n");
	assert_int_equal(hostmap_load(path, &hm, err, sizeof(err)), 0);
	assert_null(hostmap_find(hm, "10.0.0.1"));
	hostmap_free(hm);
}

static void test_errors(void **state)
{
	struct hostmap *hm;
	char err[512];

	(void)state;
	refused("10.0.0.1 a\n10.0.0.2\n", err, sizeof(err));
	assert_non_null(strstr(err, ":2: '10.0.0.2' has no host name"));
	refused("lab01 10.0.0.1\n", err, sizeof(err));
	assert_non_null(strstr(err, ":1: 'lab01' is not a numeric IPv4 or IPv6 address"));
	refused("10.0.0.1 ../etc\n", err, sizeof(err));
	assert_non_null(strstr(err, ":1: host name '../etc' cannot name a directory"));
	refused("10.0.0.1 a/b\n", err, sizeof(err));
	assert_non_null(strstr(err, "cannot name a directory"));
	refused("10.0.0.1 -rf\n", err, sizeof(err));
	assert_non_null(strstr(err, "cannot name a directory"));
	refused("10.0.0.1 a\n10.0.0.2 b\n10.0.0.1 c\n", err, sizeof(err));
	assert_non_null(strstr(err, ":3: 10.0.0.1 is already named a on line 1"));
	/* The same address in two spellings is still one address. */
	refused("::ffff:10.0.0.1 a\n10.0.0.1 b\n", err, sizeof(err));
	assert_non_null(strstr(err, "already named a"));
	assert_int_equal(hostmap_load("/nonexistent/unfs-hosts", &hm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/unfs-hosts: No such file or directory"));
}

static void test_long_line(void **state)
{
	char text[6000], err[512];

	(void)state;
	memset(text, 'x', sizeof(text) - 2);
	memcpy(text, "10.0.0.1 a ", 11);
	text[sizeof(text) - 2] = '\n';
	text[sizeof(text) - 1] = '\0';
	refused(text, err, sizeof(err));
	assert_non_null(strstr(err, ":1: line longer than"));
}

static void test_names(void **state)
{
	char big[300], small[14];

	(void)state;
	assert_true(hostmap_name_ok("lab01"));
	assert_true(hostmap_name_ok("lab01.example.org"));
	assert_true(hostmap_name_ok("Lab_01-b"));
	assert_false(hostmap_name_ok(""));
	assert_false(hostmap_name_ok("."));
	assert_false(hostmap_name_ok(".."));
	assert_false(hostmap_name_ok(".hidden"));
	assert_false(hostmap_name_ok("-x"));
	assert_false(hostmap_name_ok("a b"));
	assert_false(hostmap_name_ok("a%h"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_false(hostmap_name_ok(big));
	big[HOSTMAP_NAME_MAX] = '\0';
	assert_true(hostmap_name_ok(big));
	assert_true(hostmap_name_key("Lab01.Example", small, sizeof(small)));
	assert_string_equal(small, "lab01.example");
	assert_false(hostmap_name_key("lab01.example.org", small, sizeof(small))); /* no room */
	assert_false(hostmap_name_key("../x", small, sizeof(small)));
	assert_true(hostmap_is_address("10.1.2.3"));
	assert_true(hostmap_is_address("::1"));
	assert_false(hostmap_is_address("lab01"));
	assert_false(hostmap_is_address("10.1.2"));
}

/* The name glibc gives 127.0.0.1 from /etc/hosts, confirmed forward, in lower case. */
static void test_reverse(void **state)
{
	char name[HOSTMAP_NAME_MAX + 1], err[512];

	(void)state;
	if (hostmap_reverse("127.0.0.1", name, sizeof(name), err, sizeof(err)) != 0)
		fail_msg("127.0.0.1 has no confirmed name (is it in /etc/hosts?): %s", err);
	assert_true(hostmap_name_ok(name));
	for (const char *p = name; *p; p++)
		assert_false(*p >= 'A' && *p <= 'Z');
	assert_int_equal(hostmap_reverse("127.0.0.1", name, 3, err, sizeof(err)), -1);
	assert_int_equal(hostmap_reverse("not-an-address", name, sizeof(name), err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "not a numeric address"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_load_and_find, teardown),
		cmocka_unit_test_teardown(test_empty_map, teardown),
		cmocka_unit_test_teardown(test_errors, teardown),
		cmocka_unit_test_teardown(test_long_line, teardown),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_reverse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
