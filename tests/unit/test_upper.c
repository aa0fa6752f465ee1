/*
 * Unit tests for the export option upper=TEMPLATE (src/config.c): template checks and
 * expansion, and how the option is taken from -o, --client rules and config file lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "exports.h"
#include "views.h"

#define PARSE(cf, err, ...) \
	parse_list((cf), (err), (const char *[]){ "unionnfsd", __VA_ARGS__, NULL })

static int parse_list(struct config *cf, char *err, const char **args)
{
	int argc = 0;

	while (args[argc])
		argc++;
	err[0] = '\0';
	return config_parse_args(cf, argc, (char **)args, err, CONFIG_ERRLEN);
}

static void test_expand(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(views_upper_expand("/srv/c/%a", "10.0.0.5", out, sizeof(out)), 0);
	assert_string_equal(out, "/srv/c/10.0.0.5");
	assert_int_equal(views_upper_expand("/srv/%a/%a", "fd00::1", out, sizeof(out)), 0);
	assert_string_equal(out, "/srv/fd00::1/fd00::1");
	assert_int_equal(views_upper_expand("/srv/100%%/%a", "1.2.3.4", out, sizeof(out)), 0);
	assert_string_equal(out, "/srv/100%/1.2.3.4");
	/* Exactly full, then one byte short. */
	assert_int_equal(views_upper_expand("/%a", "1.2.3.4", out, 9), 0);
	assert_string_equal(out, "/1.2.3.4");
	assert_int_equal(views_upper_expand("/%a", "1.2.3.4", out, 8), -1);
	assert_int_equal(views_upper_expand("/abcdefgh/%a", "1", out, 8), -1);
	/* %h takes the host name the same way. */
	assert_int_equal(views_upper_expand("/srv/%h/up", "lab01", out, sizeof(out)), 0);
	assert_string_equal(out, "/srv/lab01/up");
}

static void test_by_name(void **state)
{
	(void)state;
	assert_true(views_upper_by_name("/srv/%h"));
	assert_false(views_upper_by_name("/srv/%a"));
	assert_false(views_upper_by_name("/srv/%%h/%a"));
	assert_true(views_upper_by_name("/srv/%%/%h"));
}

static void test_check(void **state)
{
	char err[CONFIG_ERRLEN];

	(void)state;
	assert_int_equal(views_upper_check("/srv/clients/%a", err, sizeof(err)), 0);
	assert_int_equal(views_upper_check("/srv/%%x/%a", err, sizeof(err)), 0);
	assert_int_equal(views_upper_check("srv/%a", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an absolute path"));
	assert_int_equal(views_upper_check("/srv/clients", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "has no %a or %h"));
	assert_int_equal(views_upper_check("/srv/%%a", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "has no %a or %h"));
	assert_int_equal(views_upper_check("/srv/%h", err, sizeof(err)), 0);
	assert_int_equal(views_upper_check("/srv/%h/%a", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "both %a and %h"));
	assert_int_equal(views_upper_check("/srv/%a/%x", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown '%x'"));
	assert_int_equal(views_upper_check("/srv/%a%", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown '% '"));
}

static void test_o_flag(void **state)
{
	struct config cf;
	char err[CONFIG_ERRLEN];
	const struct export_conf *ec;

	(void)state;
	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "-o",
			       "insecure,upper=/srv/c/%a,no_root_squash"), 0);
	ec = &cf.cf_exports[0];
	assert_string_equal(ec->ec_upper, "/srv/c/%a");
	/* The export itself is read-only; the client rule keeps rw for the views. */
	assert_true(ec->ec_opts.eo_ro);
	assert_int_equal(ec->ec_nrules, 1);
	assert_false(ec->ec_rules[0].er_opts.eo_ro);
	assert_false(ec->ec_rules[0].er_opts.eo_secure);
	assert_int_equal(ec->ec_rules[0].er_opts.eo_squash, SQUASH_NONE);
	config_free(&cf);

	/* upper= alone is a complete -o. */
	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "-o", "upper=/c/%a"), 0);
	assert_string_equal(cf.cf_exports[0].ec_upper, "/c/%a");
	assert_true(cf.cf_exports[0].ec_opts.eo_ro);
	assert_false(cf.cf_exports[0].ec_rules[0].er_opts.eo_ro);
	config_free(&cf);

	/* Without upper= nothing changes. */
	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/up:/srv/base", "-o", "insecure"), 0);
	assert_null(cf.cf_exports[0].ec_upper);
	assert_false(cf.cf_exports[0].ec_opts.eo_ro);
	config_free(&cf);

	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "-o", "upper=/c/%h"), 0);
	assert_string_equal(cf.cf_exports[0].ec_upper, "/c/%h");
	assert_null(cf.cf_hosts);
	config_free(&cf);

	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "-o", "upper=/c/%h%a"), -1);
	assert_non_null(strstr(err, "option -o: upper=/c/%h%a names the client by both"));
	config_free(&cf);
}

/* --hosts and the config file's hosts: config_resolve reads the map, errors name its line. */
static void test_hosts(void **state)
{
	char map[] = "/tmp/unfs-hosts-XXXXXX", conf[] = "/tmp/unfs-hconf-XXXXXX";
	char err[CONFIG_ERRLEN], text[256];
	struct config cf;
	int fd, n;

	(void)state;
	fd = mkstemp(map);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "10.0.0.5 lab05\n", 15), 15);
	close(fd);
	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "--hosts", map, "-e", "/u=/srv/b", "-o", "upper=/c/%h"), 0);
	assert_int_equal(config_resolve(&cf, err, sizeof(err)), 0);
	assert_non_null(cf.cf_hosts);
	config_free(&cf);

	fd = mkstemp(conf);
	assert_true(fd >= 0);
	n = snprintf(text, sizeof(text), "# lab\nhosts %s\nexport /u /srv/b upper=/c/%%h\n", map);
	assert_int_equal(write(fd, text, (size_t)n), n);
	close(fd);
	config_init(&cf);
	assert_int_equal(config_parse_file(&cf, conf, err, sizeof(err)), 0);
	assert_int_equal(config_resolve(&cf, err, sizeof(err)), 0);
	assert_non_null(cf.cf_hosts);
	config_free(&cf);

	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "--hosts", "rel/hosts"), -1);
	assert_non_null(strstr(err, "option --hosts: 'rel/hosts' is not an absolute path"));
	config_free(&cf);

	fd = open(map, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "10.0.0.5\n", 9), 9);
	close(fd);
	config_init(&cf);
	assert_int_equal(config_parse_file(&cf, conf, err, sizeof(err)), 0);
	assert_int_equal(config_resolve(&cf, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ":2: "));
	assert_non_null(strstr(err, ":1: '10.0.0.5' has no host name"));
	config_free(&cf);
	unlink(map);
	unlink(conf);
}

static void test_client_rules(void **state)
{
	struct config cf;
	char err[CONFIG_ERRLEN];

	(void)state;
	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "--client",
			       "127.0.0.1(rw,upper=/c/%a)", "--client", "*(ro)"), 0);
	assert_string_equal(cf.cf_exports[0].ec_upper, "/c/%a");
	assert_true(cf.cf_exports[0].ec_opts.eo_ro);
	assert_false(cf.cf_exports[0].ec_rules[0].er_opts.eo_ro);
	assert_true(cf.cf_exports[0].ec_rules[1].er_opts.eo_ro);
	config_free(&cf);

	config_init(&cf);
	assert_int_equal(PARSE(&cf, err, "-e", "/union=/srv/base", "--client",
			       "127.0.0.1(upper=/c/%a)", "--client", "*(upper=/d/%a)"), -1);
	assert_non_null(strstr(err, "two upper= templates (/c/%a and /d/%a)"));
	config_free(&cf);
}

static void test_file(void **state)
{
	char path[] = "/tmp/unfs-upper-XXXXXX", err[CONFIG_ERRLEN];
	const char *text = "export /union /srv/a:/srv/b upper=/srv/c/%a/up,insecure\n"
			   "export /plain /srv/up:/srv/b\n";
	struct config cf;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	config_init(&cf);
	assert_int_equal(config_parse_file(&cf, path, err, sizeof(err)), 0);
	assert_int_equal(cf.cf_nexports, 2);
	assert_string_equal(cf.cf_exports[0].ec_upper, "/srv/c/%a/up");
	assert_int_equal(cf.cf_exports[0].ec_nbranches, 2);
	assert_true(cf.cf_exports[0].ec_opts.eo_ro);
	assert_false(cf.cf_exports[0].ec_rules[0].er_opts.eo_ro);
	assert_null(cf.cf_exports[1].ec_upper);
	assert_false(cf.cf_exports[1].ec_opts.eo_ro);
	assert_int_equal(config_validate(&cf, err, sizeof(err)), 0);
	config_free(&cf);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_by_name),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_o_flag),
		cmocka_unit_test(test_client_rules),
		cmocka_unit_test(test_file),
	};

	return cmocka_run_group_tests_name("upper", tests, NULL, NULL);
}
