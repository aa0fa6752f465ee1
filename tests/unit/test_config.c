/*
 * Unit tests for src/config.c: flags, config files, the settings table, config_diff, the
 * resolve step after parsing, and their messages.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "exports.h"

struct fixture {
	struct config cf;
	char err[CONFIG_ERRLEN];
	char path[64];           /* a temporary config file, "" when none */
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	config_init(&fx->cf);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	config_free(&fx->cf);
	if (fx->path[0])
		unlink(fx->path);
	free(fx);
	return 0;
}

/* Parses a NULL-terminated list of arguments (argv[0] is added). */
#define PARSE(fx, ...) parse_list((fx), (const char *[]){ "unionnfsd", __VA_ARGS__, NULL })

static int parse_list(struct fixture *fx, const char **args)
{
	int argc = 0;

	while (args[argc])
		argc++;
	fx->err[0] = '\0';
	return config_parse_args(&fx->cf, argc, (char **)args, fx->err, sizeof(fx->err));
}

/* Writes text to a fresh temporary file and remembers its path for teardown. */
static const char *write_file(struct fixture *fx, const char *text)
{
	int fd;
	size_t len = strlen(text);

	strcpy(fx->path, "/tmp/test_config_XXXXXX");
	fd = mkstemp(fx->path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return fx->path;
}

static void test_defaults(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;

	assert_false(cf->cf_foreground);
	assert_false(cf->cf_udp);
	assert_null(cf->cf_listen);
	assert_int_equal(cf->cf_port, 2049);
	assert_int_equal(cf->cf_mount_port, 20048);
	assert_int_equal(cf->cf_portmap_port, 111);
	assert_string_equal(cf->cf_state_dir, "/var/lib/unionnfsd");
	assert_int_equal(cf->cf_portmap, PORTMAP_AUTO);
	assert_int_equal(cf->cf_workers, 32);
	assert_int_equal(cf->cf_max_record, 1052672);
	assert_int_equal(cf->cf_nexports, 0);
	assert_int_equal(PARSE(fx, "-e", "/u=/a"), 0);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
}

static void test_every_flag(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;

	assert_int_equal(PARSE(fx, "-f", "--listen", "127.0.0.1", "--port", "0", "--mount-port",
			       "65535", "--state", "/tmp/st", "--portmap", "off", "--workers", "3",
			       "--max-record", "2097152", "--portmap-port", "1111", "-e",
			       "/union=/srv/upper:/srv/base", "-o", "insecure"),
			 0);
	assert_true(cf->cf_foreground);
	assert_string_equal(cf->cf_listen, "127.0.0.1");
	assert_int_equal(cf->cf_port, 0);
	assert_int_equal(cf->cf_mount_port, 65535);
	assert_string_equal(cf->cf_state_dir, "/tmp/st");
	assert_int_equal(cf->cf_portmap, PORTMAP_OFF);
	assert_int_equal(cf->cf_workers, 3);
	assert_int_equal(cf->cf_max_record, 2097152);
	assert_int_equal(cf->cf_portmap_port, 1111);
	assert_int_equal(cf->cf_nexports, 1);
	assert_string_equal(cf->cf_exports[0].ec_name, "/union");
	assert_int_equal(cf->cf_exports[0].ec_nbranches, 2);
	assert_string_equal(cf->cf_exports[0].ec_branches[0], "/srv/upper");
	assert_string_equal(cf->cf_exports[0].ec_branches[1], "/srv/base");
	assert_false(cf->cf_exports[0].ec_opts.eo_secure);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
}

static void test_inline_values_and_ipv6(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "--port=1234", "--listen=::1", "--mount-port=0"), 0);
	assert_int_equal(fx->cf.cf_port, 1234);
	assert_int_equal(fx->cf.cf_mount_port, 0);
	assert_string_equal(fx->cf.cf_listen, "::1");
}

static void test_portmap_modes(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "--portmap", "rpcbind"), 0);
	assert_int_equal(fx->cf.cf_portmap, PORTMAP_RPCBIND);
	assert_int_equal(PARSE(fx, "--portmap", "builtin"), 0);
	assert_int_equal(fx->cf.cf_portmap, PORTMAP_BUILTIN);
	assert_int_equal(PARSE(fx, "--portmap", "auto"), 0);
	assert_int_equal(fx->cf.cf_portmap, PORTMAP_AUTO);
	assert_int_equal(PARSE(fx, "--portmap", "off"), 0);
	assert_int_equal(fx->cf.cf_portmap, PORTMAP_OFF);
	assert_int_equal(PARSE(fx, "--portmap", "maybe"), -1);
	assert_string_equal(fx->err, "option --portmap: unknown portmap mode 'maybe' "
				     "(expected auto, rpcbind, builtin or off)");
}

static void test_bad_numbers(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "--port", "65536"), -1);
	assert_string_equal(fx->err, "option --port: '65536' is not a number in 0..65535");
	assert_int_equal(PARSE(fx, "--port", "-1"), -1);
	assert_string_equal(fx->err, "option --port: '-1' is not a number in 0..65535");
	assert_int_equal(PARSE(fx, "--mount-port", "20x"), -1);
	assert_string_equal(fx->err, "option --mount-port: '20x' is not a number in 0..65535");
	assert_int_equal(PARSE(fx, "--port", ""), -1);
	assert_int_equal(PARSE(fx, "--port", "99999999999999999999999"), -1);
	assert_int_equal(PARSE(fx, "--workers", "0"), -1);
	assert_string_equal(fx->err, "option --workers: '0' is not a number in 1..256");
	assert_int_equal(PARSE(fx, "--max-record", "1052671"), -1);
	assert_string_equal(fx->err, "option --max-record: '1052671' is not a number in "
				     "1052672..67108864 (smaller records could not carry the 1 MiB "
				     "writes the server offers)");
	assert_int_equal(PARSE(fx, "--max-record", "67108865"), -1);
	assert_int_equal(PARSE(fx, "--max-record", "67108864"), 0);
	assert_int_equal(fx->cf.cf_max_record, 67108864);
	assert_int_equal(PARSE(fx, "--max-record", "1052672"), 0);
	/* Failed settings leave the old values. */
	assert_int_equal(fx->cf.cf_port, 2049);
	assert_int_equal(fx->cf.cf_workers, 32);
}

static void expect_file_error(struct fixture *fx, const char *text, const char *expect);

/* The network limits: flags, file directives, defaults and the bounds in the messages. */
static void test_net_limits(void **state)
{
	struct fixture *fx = *state;
	const char *path;

	assert_int_equal(fx->cf.cf_max_conns, 1024);
	assert_int_equal(fx->cf.cf_idle_timeout, 300);
	assert_int_equal(fx->cf.cf_max_requests, 64);
	assert_true(fx->cf.cf_max_buffered == 268435456ull);
	assert_int_equal(PARSE(fx, "--max-connections", "10", "--idle-timeout", "0",
			       "--max-requests-per-connection=4", "--max-buffered", "4194304"), 0);
	assert_int_equal(fx->cf.cf_max_conns, 10);
	assert_int_equal(fx->cf.cf_idle_timeout, 0);
	assert_int_equal(fx->cf.cf_max_requests, 4);
	assert_true(fx->cf.cf_max_buffered == 4194304ull);

	assert_int_equal(PARSE(fx, "--max-connections", "0"), -1);
	assert_string_equal(fx->err, "option --max-connections: '0' is not a number in 1..1000000");
	assert_int_equal(PARSE(fx, "--idle-timeout", "604801"), -1);
	assert_string_equal(fx->err, "option --idle-timeout: '604801' is not a number in 0..604800");
	assert_int_equal(PARSE(fx, "--max-requests-per-connection", "4097"), -1);
	assert_string_equal(fx->err, "option --max-requests-per-connection: '4097' is not a number "
				     "in 1..4096");
	assert_int_equal(PARSE(fx, "--max-buffered", "1m"), -1);
	assert_string_equal(fx->err, "option --max-buffered: '1m' is not a number in "
				     "4194304..1099511627776");
	assert_int_equal(fx->cf.cf_max_conns, 10);

	path = write_file(fx, "max-connections 2000\nidle-timeout 2\n"
			      "max-requests-per-connection 128\nmax-buffered 1099511627776\n");
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(fx->cf.cf_max_conns, 2000);
	assert_int_equal(fx->cf.cf_idle_timeout, 2);
	assert_int_equal(fx->cf.cf_max_requests, 128);
	assert_true(fx->cf.cf_max_buffered == 1099511627776ull);
	expect_file_error(fx, "idle-timeout -1\n",
			  "1: idle-timeout: '-1' is not a number in 0..604800");
}

/* The slot bounds against one client address and one client rule: defaults, both forms, bounds. */
static void test_per_client_limits(void **state)
{
	struct fixture *fx = *state;
	const char *path;

	assert_int_equal(fx->cf.cf_max_conns_per_host, 128);
	assert_int_equal(fx->cf.cf_max_views_per_rule, 1024);
	assert_int_equal(PARSE(fx, "--max-connections-per-host", "3", "--max-views-per-rule=7"), 0);
	assert_int_equal(fx->cf.cf_max_conns_per_host, 3);
	assert_int_equal(fx->cf.cf_max_views_per_rule, 7);
	assert_int_equal(PARSE(fx, "--max-connections-per-host", "0"), -1);
	assert_string_equal(fx->err, "option --max-connections-per-host: '0' is not a number in "
				     "1..1000000");
	assert_int_equal(PARSE(fx, "--max-views-per-rule", "65536"), -1);
	assert_string_equal(fx->err, "option --max-views-per-rule: '65536' is not a number in "
				     "1..65535");
	path = write_file(fx, "max-connections-per-host 16\nmax-views-per-rule 300\n");
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(fx->cf.cf_max_conns_per_host, 16);
	assert_int_equal(fx->cf.cf_max_views_per_rule, 300);
	expect_file_error(fx, "max-views-per-rule none\n",
			  "1: max-views-per-rule: 'none' is not a number in 1..65535");
}

static void test_bad_strings(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "--listen", "localhost"), -1);
	assert_string_equal(fx->err, "option --listen: 'localhost' is not a numeric IPv4 or IPv6 "
				     "address, e.g. 0.0.0.0 or ::1");
	assert_int_equal(PARSE(fx, "--state", "st"), -1);
	assert_string_equal(fx->err, "option --state: 'st' is not an absolute path; give the full "
				     "path, e.g. /var/lib/unionnfsd");
}

static void test_unknown_and_missing(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "--prot", "1"), -1);
	assert_string_equal(fx->err, "unknown option '--prot'; see unionnfsd --help");
	assert_int_equal(PARSE(fx, "-x"), -1);
	assert_string_equal(fx->err, "unknown option '-x'; see unionnfsd --help");
	assert_int_equal(PARSE(fx, "--port"), -1);
	assert_string_equal(fx->err, "option --port needs a value; see unionnfsd --help");
	assert_int_equal(PARSE(fx, "-e"), -1);
	assert_string_equal(fx->err, "option -e needs a value; see unionnfsd --help");
	assert_int_equal(PARSE(fx, "stray"), -1);
	assert_string_equal(fx->err, "unexpected argument 'stray'; exports are given as "
				     "-e NAME=BRANCH[:BRANCH...]");
}

/* UDP is opt-in: --udp, or "udp" ("udp yes", "udp no") in a file; later settings win. */
static void test_udp_switch(void **state)
{
	struct fixture *fx = *state;
	const char *path;

	assert_int_equal(PARSE(fx, "--udp"), 0);
	assert_true(fx->cf.cf_udp);
	assert_int_equal(PARSE(fx, "--udp=yes"), -1);
	assert_string_equal(fx->err, "option --udp takes no value ('--udp=yes'); give --udp alone to "
				     "serve UDP as well as TCP, leave it out for TCP only");
	path = write_file(fx, "udp no\n");
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	assert_false(fx->cf.cf_udp);
	unlink(fx->path);
	path = write_file(fx, "udp\n");
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	assert_true(fx->cf.cf_udp);
	unlink(fx->path);
	path = write_file(fx, "udp yes # with a comment\n");
	fx->cf.cf_udp = false;
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	assert_true(fx->cf.cf_udp);
}

static void test_help(void **state)
{
	struct fixture *fx = *state;
	char big[4096];
	const char *args[] = { "unionnfsd", "-f", "--help", NULL };

	assert_int_equal(config_parse_args(&fx->cf, 3, (char **)args, big, sizeof(big)), 1);
	assert_non_null(strstr(big, "usage: unionnfsd"));
	assert_non_null(strstr(big, "--mount-port"));
	assert_non_null(strstr(big, "no_root_squash"));
	assert_int_equal(PARSE(fx, "-h"), 1);
}

static void test_export_defaults(void **state)
{
	struct fixture *fx = *state;
	struct export_opts *o;

	assert_int_equal(PARSE(fx, "-e", "/single=/srv/one"), 0);
	o = &fx->cf.cf_exports[0].ec_opts;
	assert_false(o->eo_ro);
	assert_int_equal(o->eo_squash, SQUASH_ROOT);
	assert_int_equal(o->eo_anonuid, 65534);
	assert_int_equal(o->eo_anongid, 65534);
	assert_true(o->eo_secure);
	assert_int_equal(fx->cf.cf_exports[0].ec_nbranches, 1);
}

static void test_o_flag(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;

	assert_int_equal(PARSE(fx, "-e", "/a=/x", "-o", "ro", "-e", "/b=/y", "-f", "-o",
			       "all_squash,anonuid=7", "-o", "insecure"),
			 0);
	assert_int_equal(cf->cf_nexports, 2);
	assert_true(cf->cf_exports[0].ec_opts.eo_ro);
	assert_int_equal(cf->cf_exports[0].ec_opts.eo_squash, SQUASH_ROOT);
	assert_true(cf->cf_exports[0].ec_opts.eo_secure);
	assert_false(cf->cf_exports[1].ec_opts.eo_ro);
	assert_int_equal(cf->cf_exports[1].ec_opts.eo_squash, SQUASH_ALL);
	assert_int_equal(cf->cf_exports[1].ec_opts.eo_anonuid, 7);
	assert_false(cf->cf_exports[1].ec_opts.eo_secure);
}

static void test_o_bad_word(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-e", "/a=/x", "-o", "rww"), -1);
	assert_string_equal(fx->err, "option -o: unknown export option 'rww' (expected ro, rw, "
				     "root_squash, no_root_squash, all_squash, anonuid=N, anongid=N, "
				     "secure, insecure, sync, async, upper=TEMPLATE)");
}

static void test_o_without_e(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-o", "ro"), -1);
	assert_string_equal(fx->err, "option -o: 'ro' must follow the -e it applies to, "
				     "e.g. -e /union=/srv/upper -o ro");
	assert_int_equal(PARSE(fx, "-o"), -1);
	assert_string_equal(fx->err, "option -o needs a value; see unionnfsd --help");
}

static void test_export_spec_errors(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-e", "/union"), -1);
	assert_string_equal(fx->err, "option -e: '/union' is not NAME=BRANCH[:BRANCH...]; "
				     "e.g. -e /union=/srv/upper:/srv/base");
	assert_int_equal(PARSE(fx, "-e", "union=/a"), -1);
	assert_string_equal(fx->err, "option -e: export name 'union' must start with '/', e.g. /union");
	assert_int_equal(PARSE(fx, "-e", "/union="), -1);
	assert_string_equal(fx->err, "option -e: export /union has no branches; give at least one "
				     "directory");
	assert_int_equal(PARSE(fx, "-e", "/union=/a::/b"), -1);
	assert_string_equal(fx->err, "option -e: export /union: empty branch path in '/a::/b'; "
				     "separate branches with one ':'");
	assert_int_equal(PARSE(fx, "-e", "/union=/a:/b/"), 0);
	assert_int_equal(PARSE(fx, "-e", "/u2=/a:/a/"), -1);
	assert_string_equal(fx->err, "option -e: export /u2: branch /a is listed twice; list each "
				     "directory once");
	assert_int_equal(PARSE(fx, "-e", "/x/../y=/a"), -1);
	assert_non_null(strstr(fx->err, "contains '.' or '..'"));
	assert_int_equal(fx->cf.cf_nexports, 1);
}

/* Branch words and the export-wide create= and statfs= (issue 33). */
static void test_branch_roles_and_policy(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;
	const struct export_conf *ec;
	const char *path;

	assert_int_equal(PARSE(fx, "-e", "/u=/a=rw:/b=rw:/c=ro:/d=rr", "-o",
			       "create=mfs:5,statfs=policy,insecure"), 0);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
	ec = &cf->cf_exports[0];
	assert_int_equal(ec->ec_nbranches, 4);
	assert_string_equal(ec->ec_branches[0], "/a");
	assert_string_equal(ec->ec_branches[3], "/d");
	assert_int_equal(ec->ec_roles[0], UNION_BRANCH_RW);
	assert_int_equal(ec->ec_roles[1], UNION_BRANCH_RW);
	assert_int_equal(ec->ec_roles[2], UNION_BRANCH_RO);
	assert_int_equal(ec->ec_roles[3], UNION_BRANCH_RR);
	assert_int_equal(ec->ec_policy.up_create, UNION_CREATE_MFS);
	assert_int_equal(ec->ec_policy.up_mfs_secs, 5);
	assert_int_equal(ec->ec_policy.up_statfs, UNION_STATFS_POLICY);
	assert_false(ec->ec_opts.eo_secure); /* the rest still applies per client */
	config_free(cf);

	/* Today's form keeps its meaning: first writable, the rest read-only, tdp, sum. */
	config_init(cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a:/b"), 0);
	ec = &cf->cf_exports[0];
	assert_int_equal(ec->ec_roles[0], UNION_BRANCH_RW);
	assert_int_equal(ec->ec_roles[1], UNION_BRANCH_RO);
	assert_int_equal(ec->ec_policy.up_create, UNION_CREATE_TDP);
	assert_int_equal(ec->ec_policy.up_mfs_secs, UNION_MFS_DEFAULT_SECS);
	assert_int_equal(ec->ec_policy.up_statfs, UNION_STATFS_SUM);
	config_free(cf);

	/* Under upper= the listed branches are lowers, unless marked writable (shared). */
	config_init(cf);
	assert_int_equal(PARSE(fx, "-e", "/v=/s=rw:/b", "-o", "upper=/srv/c/%a", "-e",
			       "/w=/b", "-o", "upper=/srv/c/%a"), 0);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(cf->cf_exports[0].ec_roles[0], UNION_BRANCH_RW);
	assert_int_equal(cf->cf_exports[1].ec_roles[0], UNION_BRANCH_RO);
	config_free(cf);

	/* A path with '=' in it ends with a word. */
	config_init(cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a=b=rw"), 0);
	assert_string_equal(cf->cf_exports[0].ec_branches[0], "/a=b");
	config_free(cf);

	config_init(cf);
	path = write_file(fx, "export /u /a=rw:/b=rw:/c create=rr,statfs=sum\n");
	assert_int_equal(config_parse_file(cf, path, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
	ec = &cf->cf_exports[0];
	assert_int_equal(ec->ec_roles[1], UNION_BRANCH_RW);
	assert_int_equal(ec->ec_roles[2], UNION_BRANCH_RO);
	assert_int_equal(ec->ec_policy.up_create, UNION_CREATE_RR);
	assert_false(ec->ec_policy.up_no_metacopy); /* metacopies by default */
}

/* metacopy=on|off, in -o and in the config file (issue 34). */
static void test_metacopy_option(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;
	const char *path;

	assert_int_equal(PARSE(fx, "-e", "/u=/a:/b", "-o", "metacopy=off,insecure", "-e", "/v=/c:/d",
			       "-o", "metacopy=on"), 0);
	assert_true(cf->cf_exports[0].ec_policy.up_no_metacopy);
	assert_false(cf->cf_exports[0].ec_opts.eo_secure);
	assert_false(cf->cf_exports[1].ec_policy.up_no_metacopy);
	config_free(cf);

	config_init(cf);
	path = write_file(fx, "export /u /a:/b metacopy=off\n");
	assert_int_equal(config_parse_file(cf, path, fx->err, sizeof(fx->err)), 0);
	assert_true(cf->cf_exports[0].ec_policy.up_no_metacopy);
	config_free(cf);

	config_init(cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a:/b", "-o", "metacopy=yes"), -1);
	assert_non_null(strstr(fx->err, "export /u: unknown metacopy= word 'yes'; give "
				       "metacopy=on or metacopy=off"));
}

static void test_branch_roles_errors(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;

	assert_int_equal(PARSE(fx, "-e", "/u=/a=rx:/b"), -1);
	assert_string_equal(fx->err, "option -e: export /u: unknown branch word 'rx' in '/a=rx'; "
				     "give =rw, =ro or =rr after the path");
	assert_int_equal(PARSE(fx, "-e", "/u=/a:/b", "-o", "create=mst"), -1);
	assert_non_null(strstr(fx->err, "unknown create policy 'mst'; give create=tdp, rr, "
				       "mfs[:SECONDS] or pmfs"));
	assert_int_equal(PARSE(fx, "-e", "/u2=/a:/b", "-o", "create=rr:5"), -1);
	assert_non_null(strstr(fx->err, "'rr:5': only mfs takes seconds, as create=mfs:30"));
	assert_int_equal(PARSE(fx, "-e", "/u3=/a:/b", "-o", "create=mfs:x"), -1);
	assert_non_null(strstr(fx->err, "create=mfs:x: give whole seconds from 0 to 86400"));
	assert_int_equal(PARSE(fx, "-e", "/u4=/a:/b", "-o", "statfs=max"), -1);
	assert_non_null(strstr(fx->err, "unknown statfs= word 'max'; give statfs=sum or "
				       "statfs=policy"));
	config_free(cf);

	config_init(cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a:/b=ro:/c=rw"), 0);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, "export /u: branch /c is =rw below the read-only branch /b; "
				     "list the writable branches first");
}

static void test_relative_branch(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-e", "/union=/srv/upper:srv/base"), -1);
	assert_string_equal(fx->err, "option -e: export /union: branch 'srv/base' is not an absolute "
				     "path; give the full path, e.g. /srv/upper");
	assert_int_equal(fx->cf.cf_nexports, 0);
}

static void test_branch_count(void **state)
{
	struct fixture *fx = *state;
	char spec[8 + 129 * 8];
	char *p;
	int i;

	p = spec + sprintf(spec, "/u=");
	for (i = 0; i < 128; i++)
		p += sprintf(p, "%s/b%d", i ? ":" : "", i);
	assert_int_equal(PARSE(fx, "-e", spec), 0);
	assert_int_equal(fx->cf.cf_exports[0].ec_nbranches, 128);
	assert_string_equal(fx->cf.cf_exports[0].ec_branches[127], "/b127");

	spec[1] = 'v';
	sprintf(p, ":/b128");
	assert_int_equal(PARSE(fx, "-e", spec), -1);
	assert_string_equal(fx->err, "option -e: export /v has 129 branches; at most 128 are "
				     "supported");
	assert_int_equal(fx->cf.cf_nexports, 1);
}

static void test_names_canonical_and_unique(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-e", "//union//=/a/"), 0);
	assert_string_equal(fx->cf.cf_exports[0].ec_name, "/union");
	assert_string_equal(fx->cf.cf_exports[0].ec_branches[0], "/a");
	assert_int_equal(PARSE(fx, "-e", "/union/=/b"), -1);
	assert_string_equal(fx->err, "option -e: export /union is given twice; give each export a "
				     "different name");
	assert_int_equal(PARSE(fx, "-e", "/=/"), 0);
	assert_string_equal(fx->cf.cf_exports[1].ec_name, "/");
	assert_string_equal(fx->cf.cf_exports[1].ec_branches[0], "/");
	assert_int_equal(PARSE(fx, "-e", "/a=b=/c"), -1);    /* the name ends at the first '=' */
}

static void test_name_length(void **state)
{
	struct fixture *fx = *state;
	char spec[512];

	spec[0] = '/';
	memset(spec + 1, 'n', 399);
	strcpy(spec + 400, "=/b");
	assert_int_equal(PARSE(fx, "-e", spec), 0);
	spec[0] = '/';
	memset(spec + 1, 'm', 400);
	strcpy(spec + 401, "=/b");
	assert_int_equal(PARSE(fx, "-e", spec), -1);
	assert_string_equal(fx->err, "option -e: export name is longer than 400 bytes; use a shorter one");
}

static void test_validate(void **state)
{
	struct fixture *fx = *state;
	struct export_conf *ec;

	assert_int_equal(config_validate(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, "nothing to export; give -e NAME=BRANCH[:BRANCH...] (e.g. -e "
				     "/union=/srv/upper:/srv/base) or an export line in the config file");
	assert_int_equal(PARSE(fx, "-e", "/a=/x", "-e", "/b=/y"), 0);
	assert_int_equal(config_validate(&fx->cf, fx->err, sizeof(fx->err)), 0);
	/* A struct built by hand (not through the parser) is still checked. */
	ec = &fx->cf.cf_exports[1];
	ec->ec_name[1] = 'a';
	assert_int_equal(config_validate(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, "export /a is given twice; give each export a different name");
}

static void test_file_good(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;
	const char *path = write_file(fx,
				      "# unionnfsd test config\n"
				      "\n"
				      "listen 0.0.0.0\n"
				      "port 2050   # trailing comment\n"
				      "\tmount-port\t20049\r\n"
				      "state /var/lib/unionnfsd-test\n"
				      "portmap builtin\n"
				      "portmap-port 1111\n"
				      "workers 4\n"
				      "max-record 1052672\n"
				      "foreground\n"
				      "export /union /srv/upper:/srv/base rw,no_root_squash,insecure\n"
				      "export /ro /srv/base ro,all_squash,anonuid=1,anongid=2\n"
				      "export /plain /srv/plain\n"
				      "   # indented comment");

	assert_int_equal(config_parse_file(cf, path, fx->err, sizeof(fx->err)), 0);
	assert_string_equal(cf->cf_listen, "0.0.0.0");
	assert_int_equal(cf->cf_port, 2050);
	assert_int_equal(cf->cf_mount_port, 20049);
	assert_string_equal(cf->cf_state_dir, "/var/lib/unionnfsd-test");
	assert_int_equal(cf->cf_portmap, PORTMAP_BUILTIN);
	assert_int_equal(cf->cf_portmap_port, 1111);
	assert_int_equal(cf->cf_workers, 4);
	assert_int_equal(cf->cf_max_record, 1052672);
	assert_true(cf->cf_foreground);
	assert_int_equal(cf->cf_nexports, 3);
	assert_string_equal(cf->cf_exports[0].ec_name, "/union");
	assert_int_equal(cf->cf_exports[0].ec_nbranches, 2);
	assert_string_equal(cf->cf_exports[0].ec_branches[1], "/srv/base");
	assert_int_equal(cf->cf_exports[0].ec_opts.eo_squash, SQUASH_NONE);
	assert_false(cf->cf_exports[0].ec_opts.eo_secure);
	assert_false(cf->cf_exports[0].ec_opts.eo_ro);
	assert_true(cf->cf_exports[1].ec_opts.eo_ro);
	assert_int_equal(cf->cf_exports[1].ec_opts.eo_squash, SQUASH_ALL);
	assert_int_equal(cf->cf_exports[1].ec_opts.eo_anonuid, 1);
	assert_int_equal(cf->cf_exports[1].ec_opts.eo_anongid, 2);
	assert_true(cf->cf_exports[2].ec_opts.eo_secure);
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
}

/* Parses text as a config file and checks the error is exactly "PATH:" + expect. */
static void expect_file_error(struct fixture *fx, const char *text, const char *expect)
{
	char want[CONFIG_ERRLEN];
	const char *path;

	config_free(&fx->cf);
	config_init(&fx->cf);
	if (fx->path[0])
		unlink(fx->path);
	path = write_file(fx, text);
	snprintf(want, sizeof(want), "%s:%s", path, expect);
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, want);
}

static void test_file_bad_lines(void **state)
{
	struct fixture *fx = *state;

	expect_file_error(fx, "port 2049\n\nrww 1\n",
			  "3: unknown option 'rww' (expected listen, port, mount-port, portmap-port, "
			  "nlm-port, grace, nlm-retry, state, portmap, workers, max-record, "
			  "max-connections, max-connections-per-host, idle-timeout, "
			  "max-requests-per-connection, max-buffered, max-views-per-rule, metrics, "
			  "hosts, export, foreground, udp, busy-poll, check-pace)");
	expect_file_error(fx, "export /union /srv/upper rww\n",
			  "1: unknown export option 'rww' (expected ro, rw, root_squash, "
			  "no_root_squash, all_squash, anonuid=N, anongid=N, secure, insecure, sync, "
				 "async, upper=TEMPLATE)");
	expect_file_error(fx, "# c\nport 70000\n", "2: port: '70000' is not a number in 0..65535");
	expect_file_error(fx, "port\n", "1: port takes exactly one value");
	expect_file_error(fx, "port 1 2\n", "1: port takes exactly one value");
	expect_file_error(fx, "export /union\n",
			  "1: export takes NAME BRANCH[:BRANCH...] [OPTIONS | CLIENT(OPTIONS)...], "
			  "e.g. export /union /srv/upper:/srv/base 10.0.0.0/8(rw) *(ro)");
	expect_file_error(fx, "export /u /a ro extra\n",
			  "1: export /u: client rule 'ro' is not CLIENT(OPTIONS); write e.g. "
			  "10.0.0.0/8(rw,no_root_squash) or *(ro), CLIENT() for the defaults");
	expect_file_error(fx, "export /u a/b\n",
			  "1: export /u: branch 'a/b' is not an absolute path; give the full path, "
			  "e.g. /srv/upper");
	expect_file_error(fx, "export /u /a\nexport /u /b\n",
			  "2: export /u is given twice; give each export a different name");
	expect_file_error(fx, "portmap sometimes\n",
			  "1: portmap: unknown portmap mode 'sometimes' (expected auto, rpcbind, "
			  "builtin or off)");
	expect_file_error(fx, "state relative/dir\n",
			  "1: state: 'relative/dir' is not an absolute path; give the full path, e.g. "
			  "/var/lib/unionnfsd");
	expect_file_error(fx, "foreground maybe\n", "1: foreground takes no value, yes or no");
	expect_file_error(fx, "udp maybe\n", "1: udp takes no value, yes or no");
	expect_file_error(fx, "listen\t0.0.0.0\nlisten host\n",
			  "2: listen: 'host' is not a numeric IPv4 or IPv6 address, e.g. 0.0.0.0 or ::1");
}

static void test_file_nul_byte(void **state)
{
	struct fixture *fx = *state;
	char want[CONFIG_ERRLEN];
	int fd;

	strcpy(fx->path, "/tmp/test_config_XXXXXX");
	fd = mkstemp(fx->path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "port 1\nport\0 2\n", 15), 15);
	close(fd);
	snprintf(want, sizeof(want), "%s:2: NUL byte in line; the config file must be text", fx->path);
	assert_int_equal(config_parse_file(&fx->cf, fx->path, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, want);
}

static void test_file_missing(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(PARSE(fx, "-c", "/nonexistent/unionnfsd.conf"), -1);
	assert_string_equal(fx->err, "cannot read config file /nonexistent/unionnfsd.conf: No such "
				     "file or directory; check the path given to -c");
	assert_int_equal(PARSE(fx, "-c"), -1);
	assert_string_equal(fx->err, "option -c needs a value; see unionnfsd --help");
}

static void test_mix_file_and_flags(void **state)
{
	struct fixture *fx = *state;
	struct config *cf = &fx->cf;
	const char *path = write_file(fx, "port 3000\n"
					  "mount-port 3001\n"
					  "workers 2\n"
					  "export /file /srv/f insecure\n");

	/* Flags before -c are overridden by the file, flags after it override the file. */
	assert_int_equal(PARSE(fx, "--port", "1000", "--workers", "5", "-e", "/first=/srv/a", "-o",
			       "ro", "-c", path, "--mount-port", "4001", "-e", "/last=/srv/b"),
			 0);
	assert_int_equal(cf->cf_port, 3000);
	assert_int_equal(cf->cf_mount_port, 4001);
	assert_int_equal(cf->cf_workers, 2);
	assert_int_equal(cf->cf_nexports, 3);
	assert_string_equal(cf->cf_exports[0].ec_name, "/first");
	assert_true(cf->cf_exports[0].ec_opts.eo_ro);
	assert_string_equal(cf->cf_exports[1].ec_name, "/file");
	assert_false(cf->cf_exports[1].ec_opts.eo_secure);
	assert_string_equal(cf->cf_exports[2].ec_name, "/last");
	assert_int_equal(config_validate(cf, fx->err, sizeof(fx->err)), 0);
}

static void test_o_after_c(void **state)
{
	struct fixture *fx = *state;
	const char *path = write_file(fx, "export /file /srv/f\n");

	assert_int_equal(PARSE(fx, "-e", "/a=/x", "-c", path, "-o", "ro"), -1);
	assert_string_equal(fx->err, "option -o: 'ro' must follow the -e it applies to, e.g. "
				     "-e /union=/srv/upper -o ro");
}

static void test_file_error_via_flag(void **state)
{
	struct fixture *fx = *state;
	const char *path = write_file(fx, "workers 1\nexport /u /a bogus\n");
	char want[CONFIG_ERRLEN];

	snprintf(want, sizeof(want), "%s:2: unknown export option 'bogus' (expected ro, rw, "
				     "root_squash, no_root_squash, all_squash, anonuid=N, anongid=N, "
				     "secure, insecure, sync, async, upper=TEMPLATE)", path);
	assert_int_equal(PARSE(fx, "-c", path), -1);
	assert_string_equal(fx->err, want);
}

static void test_small_error_buffer(void **state)
{
	struct fixture *fx = *state;
	char small[16];
	const char *args[] = { "unionnfsd", "-e", "/a=/x", "-o", "nonsense", NULL };

	assert_int_equal(config_parse_args(&fx->cf, 5, (char **)args, small, sizeof(small)), -1);
	assert_string_equal(small, "option -o: unkn");
}

/* Client rules in the config file: order kept, options per rule, the one-rule forms. */
static void test_file_rules(void **state)
{
	struct fixture *fx = *state;
	const struct export_conf *ec;
	const char *path;

	path = write_file(fx, "export /u /a 10.0.0.0/8(rw,no_root_squash) 192.168.1.7(ro) "
			      "fd00::/8(all_squash,anonuid=5,anongid=6) localhost() *(ro,insecure)\n"
			      "export /v /b ro,insecure\n"
			      "export /w /c\n");
	assert_int_equal(config_parse_file(&fx->cf, path, fx->err, sizeof(fx->err)), 0);
	ec = &fx->cf.cf_exports[0];
	assert_int_equal(ec->ec_nrules, 5);
	assert_false(ec->ec_opts.eo_ro);
	assert_string_equal(ec->ec_rules[0].er_spec, "10.0.0.0/8");
	assert_int_equal(ec->ec_rules[0].er_kind, EXPORTS_NET);
	assert_false(ec->ec_rules[0].er_opts.eo_ro);
	assert_int_equal(ec->ec_rules[0].er_opts.eo_squash, SQUASH_NONE);
	assert_true(ec->ec_rules[0].er_opts.eo_secure);
	assert_true(ec->ec_rules[1].er_opts.eo_ro);
	assert_int_equal(ec->ec_rules[1].er_opts.eo_squash, SQUASH_ROOT);
	assert_int_equal(ec->ec_rules[2].er_opts.eo_squash, SQUASH_ALL);
	assert_int_equal(ec->ec_rules[2].er_opts.eo_anonuid, 5);
	assert_int_equal(ec->ec_rules[2].er_opts.eo_anongid, 6);
	/* host names are resolved after parsing, by config_resolve */
	assert_int_equal(ec->ec_rules[3].er_kind, EXPORTS_HOST);
	assert_int_equal(ec->ec_rules[3].er_nnets, 0);
	assert_int_equal(config_resolve(&fx->cf, fx->err, sizeof(fx->err)), 0);
	assert_true(ec->ec_rules[3].er_nnets >= 1);
	assert_int_equal(ec->ec_rules[3].er_opts.eo_anonuid, 65534);
	assert_int_equal(ec->ec_rules[4].er_kind, EXPORTS_ANY);
	assert_true(ec->ec_rules[4].er_opts.eo_ro);
	assert_false(ec->ec_rules[4].er_opts.eo_secure);

	ec = &fx->cf.cf_exports[1];
	assert_int_equal(ec->ec_nrules, 1);
	assert_string_equal(ec->ec_rules[0].er_spec, "*");
	assert_true(ec->ec_rules[0].er_opts.eo_ro);
	assert_false(ec->ec_rules[0].er_opts.eo_secure);
	assert_true(ec->ec_opts.eo_ro);
	ec = &fx->cf.cf_exports[2];
	assert_int_equal(ec->ec_nrules, 1);
	assert_int_equal(ec->ec_rules[0].er_kind, EXPORTS_ANY);
	assert_int_equal(ec->ec_rules[0].er_opts.eo_squash, SQUASH_ROOT);
	assert_true(ec->ec_rules[0].er_opts.eo_secure);
}

static void test_file_bad_rules(void **state)
{
	struct fixture *fx = *state;

	expect_file_error(fx, "\nexport /u /a 10.0.0.0/33(rw)\n",
			  "2: export /u: client '10.0.0.0/33': '33' is not an IPv4 prefix length "
			  "0..32; write e.g. 10.0.0.0/8");
	expect_file_error(fx, "export /u /a *(rw,bogus)\n",
			  "1: export /u: unknown export option 'bogus' (expected ro, rw, root_squash, "
			  "no_root_squash, all_squash, anonuid=N, anongid=N, secure, insecure, sync, "
				 "async, upper=TEMPLATE)");
	expect_file_error(fx, "export /u /a *(rw\n",
			  "1: export /u: client rule '*(rw' is not CLIENT(OPTIONS); write e.g. "
			  "10.0.0.0/8(rw,no_root_squash) or *(ro), CLIENT() for the defaults");
	expect_file_error(fx, "export /u /a *(rw) 10.0.0.1\n",
			  "1: export /u: client rule '10.0.0.1' is not CLIENT(OPTIONS); write e.g. "
			  "10.0.0.0/8(rw,no_root_squash) or *(ro), CLIENT() for the defaults");
	/*
	 * the resolver's own words vary (no DNS at all, NXDOMAIN): only our parts are fixed.
	 * Parsing does no DNS: the name fails only in the resolve step, which still names the
	 * line it came from.
	 */
	config_free(&fx->cf);
	config_init(&fx->cf);
	unlink(fx->path);
	assert_int_equal(config_parse_file(&fx->cf, write_file(fx, "export /u /a no-such-host.invalid(ro)\n"),
					   fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_resolve(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_non_null(strstr(fx->err, ":1: export /u: client host name 'no-such-host.invalid' does not resolve ("));
	assert_non_null(strstr(fx->err, "); fix the name, add it to /etc/hosts, or give its address"));
	unlink(fx->path);
	fx->path[0] = '\0';
	expect_file_error(fx, "export /u /a a!b(ro)\n",
			  "1: export /u: client 'a!b' is not *, an IPv4 or IPv6 address, a CIDR "
			  "network (10.0.0.0/8, fd00::/8) or a host name");
}

/* -e with -o is the rule *(OPTS); --client gives rules; the two do not mix. */
static void test_client_flag(void **state)
{
	struct fixture *fx = *state;
	const struct export_conf *ec;

	assert_int_equal(PARSE(fx, "-e", "/u=/a", "-o", "ro", "-e", "/v=/b", "--client",
			       "127.0.0.1(rw,insecure)", "--client=::1/128(ro)", "-e", "/w=/c"),
			 0);
	ec = &fx->cf.cf_exports[0];
	assert_int_equal(ec->ec_nrules, 1);
	assert_string_equal(ec->ec_rules[0].er_spec, "*");
	assert_true(ec->ec_rules[0].er_opts.eo_ro);
	ec = &fx->cf.cf_exports[1];
	assert_int_equal(ec->ec_nrules, 2);
	assert_string_equal(ec->ec_rules[0].er_spec, "127.0.0.1");
	assert_false(ec->ec_rules[0].er_opts.eo_secure);
	assert_string_equal(ec->ec_rules[1].er_spec, "::1/128");
	assert_true(ec->ec_rules[1].er_opts.eo_ro);
	ec = &fx->cf.cf_exports[2];
	assert_int_equal(ec->ec_nrules, 1);
	assert_false(ec->ec_rules[0].er_opts.eo_ro);

	config_free(&fx->cf);
	config_init(&fx->cf);
	assert_int_equal(PARSE(fx, "--client", "*(ro)"), -1);
	assert_non_null(strstr(fx->err, "option --client: '*(ro)' must follow the -e"));
	config_free(&fx->cf);
	config_init(&fx->cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a", "-o", "ro", "--client", "*(ro)"), -1);
	assert_non_null(strstr(fx->err, "without -o"));
	config_free(&fx->cf);
	config_init(&fx->cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a", "--client", "*(ro)", "-o", "rw"), -1);
	assert_string_equal(fx->err, "option -o: 'rw' follows --client rules of the same -e; put "
				     "the options in the rules, e.g. --client '*(rw)'");
	config_free(&fx->cf);
	config_init(&fx->cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/a", "--client", "1.2.3.4/40(rw)"), -1);
	assert_string_equal(fx->err, "option --client: client '1.2.3.4/40': '40' is not an IPv4 "
				     "prefix length 0..32; write e.g. 10.0.0.0/8");
}

/*
 * Every getaddrinfo of this test binary passes here, so a test can tell whether a step
 * asked the resolver at all; the real one answers.
 */
static unsigned dns_calls;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

	dns_calls++;
	*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
	return real(node, service, hints, res);
}

/* A value every setting of its kind accepts, and one it refuses (NULL: none). */
static void sample_values(enum config_setting s, char *good, char *bad, size_t len)
{
	uint64_t min, max;

	bad[0] = '\0';
	if (config_setting_bounds(s, &min, &max)) {
		snprintf(good, len, "%llu", (unsigned long long)max);
		snprintf(bad, len, "%llu", (unsigned long long)max + 1);
		return;
	}
	switch (s) {
	case CONFIG_LISTEN:
		snprintf(good, len, "::1");
		snprintf(bad, len, "localhost");
		break;
	case CONFIG_PORTMAP:
		snprintf(good, len, "builtin");
		snprintf(bad, len, "sometimes");
		break;
	case CONFIG_NLM_PORT:
		snprintf(good, len, "off");
		snprintf(bad, len, "65536");
		break;
	case CONFIG_METRICS:
		snprintf(good, len, "127.0.0.1:9249");
		snprintf(bad, len, "127.0.0.1");
		break;
	case CONFIG_FOREGROUND:
	case CONFIG_UDP:
		snprintf(good, len, "yes");
		snprintf(bad, len, "maybe");
		break;
	default:                 /* the paths */
		snprintf(good, len, "/no/such/dir/%s", config_setting_name(s));
		snprintf(bad, len, "relative");
		break;
	}
}

/*
 * Every row of the settings table: the file directive parses a good value, refuses a bad
 * one naming itself, and the parsed value differs from the default in that setting only.
 */
static void test_every_setting_parses(void **state)
{
	struct fixture *fx = *state;
	struct config def;
	char good[64], bad[64], text[160], want[96];

	config_init(&def);
	for (int s = 0; s < CONFIG_NSETTINGS; s++) {
		const char *name = config_setting_name(s);
		/* switches have flags of their own (-f, --udp), tested with the flags */
		bool sw = s == CONFIG_FOREGROUND || s == CONFIG_UDP;

		sample_values(s, good, bad, sizeof(good));
		config_free(&fx->cf);
		config_init(&fx->cf);
		snprintf(text, sizeof(text), "%s %s\n", name, good);
		unlink(fx->path);
		assert_int_equal(config_parse_file(&fx->cf, write_file(fx, text), fx->err,
						   sizeof(fx->err)), 0);
		assert_int_equal(config_diff(&def, &fx->cf), 1ull << s);
		if (!sw) {
			/* the same on the command line, --NAME VALUE */
			config_free(&fx->cf);
			config_init(&fx->cf);
			snprintf(want, sizeof(want), "--%s", name);
			assert_int_equal(PARSE(fx, want, good), 0);
			assert_int_equal(config_diff(&def, &fx->cf), 1ull << s);
			assert_int_equal(PARSE(fx, want, bad), -1);
			snprintf(want, sizeof(want), "option --%s: ", name);
			assert_ptr_equal(strstr(fx->err, want), fx->err);
			snprintf(want, sizeof(want), "'%s'", bad);
			assert_non_null(strstr(fx->err, want));
		}
	}
	config_free(&def);
}

/* The bounds of every number setting, at both ends, with the table's own message. */
static void test_setting_bounds(void **state)
{
	struct fixture *fx = *state;
	char opt[64], val[32], want[160];
	uint64_t min, max;
	int numbers = 0;

	for (int s = 0; s < CONFIG_NSETTINGS; s++) {
		if (!config_setting_bounds(s, &min, &max))
			continue;
		numbers++;
		snprintf(opt, sizeof(opt), "--%s", config_setting_name(s));
		snprintf(val, sizeof(val), "%llu", (unsigned long long)min);
		assert_int_equal(PARSE(fx, opt, val), 0);
		snprintf(val, sizeof(val), "%llu", (unsigned long long)max);
		assert_int_equal(PARSE(fx, opt, val), 0);
		snprintf(val, sizeof(val), "%llu", (unsigned long long)max + 1);
		assert_int_equal(PARSE(fx, opt, val), -1);
		snprintf(want, sizeof(want), "option %s: '%s' is not a number in %llu..%llu", opt, val,
			 (unsigned long long)min, (unsigned long long)max);
		assert_non_null(strstr(fx->err, want));
		if (min > 0) {
			snprintf(val, sizeof(val), "%llu", (unsigned long long)min - 1);
			assert_int_equal(PARSE(fx, opt, val), -1);
			assert_non_null(strstr(fx->err, "is not a number in"));
		}
	}
	assert_int_equal(numbers, 15);
	/* a value set by hand outside the bounds is caught by config_validate */
	assert_int_equal(PARSE(fx, "-e", "/u=/srv/a"), 0);
	fx->cf.cf_workers = 0;
	assert_int_equal(config_validate(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_string_equal(fx->err, "workers must be 1..256");
}

/* The defaults the user gets are the ones the owning modules define, and --help says so. */
/* --nlm-port: a port, or off (no locking); --grace: seconds. */
static void test_nlm_settings(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(fx->cf.cf_nlm_port, 0);
	assert_int_equal(fx->cf.cf_grace, CONFIG_DEFAULT_GRACE);
	assert_int_equal(PARSE(fx, "--nlm-port", "4045"), 0);
	assert_int_equal(fx->cf.cf_nlm_port, 4045);
	assert_int_equal(PARSE(fx, "--nlm-port", "off"), 0);
	assert_int_equal(fx->cf.cf_nlm_port, CONFIG_NLM_OFF);
	assert_int_equal(PARSE(fx, "--nlm-port", "of"), -1);
	assert_string_equal(fx->err, "option --nlm-port: 'of' is neither a port in 0..65535 nor off");
	assert_int_equal(PARSE(fx, "--grace", "0"), 0);
	assert_int_equal(fx->cf.cf_grace, 0);
	assert_int_equal(config_setting_apply(CONFIG_NLM_PORT), CONFIG_RESTART);
	assert_int_equal(config_setting_apply(CONFIG_GRACE), CONFIG_RESTART);
}

static void test_setting_defaults(void **state)
{
	struct fixture *fx = *state;
	static char big[8192];
	char opt[64];
	const char *p;
	uint64_t min, max;

	assert_int_equal(fx->cf.cf_workers, NET_DEFAULT_WORKERS);
	assert_int_equal(fx->cf.cf_max_record, NET_DEFAULT_MAX_RECORD);
	assert_int_equal(fx->cf.cf_max_record, 1024 * 1024 + 4096);
	assert_int_equal(fx->cf.cf_max_conns, NET_DEFAULT_MAX_CONNS);
	assert_int_equal(fx->cf.cf_max_requests, NET_DEFAULT_MAX_REQUESTS);
	assert_int_equal(fx->cf.cf_max_buffered, NET_DEFAULT_MAX_BUFFERED);
	assert_int_equal(config_parse_args(&fx->cf, 2, (char *[]){ "unionnfsd", "--help", NULL },
					   big, sizeof(big)), 1);
	config_free(&fx->cf);
	config_init(&fx->cf);
	for (int s = 0; s < CONFIG_NSETTINGS; s++) {
		struct config one;
		unsigned long long shown;
		char text[64];

		if (!config_setting_bounds(s, &min, &max))
			continue;
		/* the option's own line of the usage text, then its "(default N)" */
		snprintf(opt, sizeof(opt), "\n  --%s ", config_setting_name(s));
		p = strstr(big, opt);
		assert_non_null(p);
		p = strstr(p, "(default ");
		assert_non_null(p);
		shown = strtoull(p + 9, NULL, 10);
		/* the default parsed back is no change from config_init */
		config_init(&one);
		snprintf(text, sizeof(text), "--%s=%llu", config_setting_name(s), shown);
		assert_int_equal(config_parse_args(&one, 2, (char *[]){ "unionnfsd", text, NULL },
						   fx->err, sizeof(fx->err)), 0);
		assert_int_equal(config_diff(&fx->cf, &one), 0);
		config_free(&one);
	}
}

/* config_diff names exactly the settings that differ; only hosts is applied by a reload. */
static void test_config_diff(void **state)
{
	struct fixture *fx = *state;
	struct config b;

	config_init(&b);
	assert_int_equal(config_diff(&fx->cf, &b), 0);
	assert_int_equal(config_parse_args(&b, 5, (char *[]){ "unionnfsd", "--port", "2050",
				"--listen=::1", "--workers=8", NULL }, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_diff(&fx->cf, &b),
			 (1ull << CONFIG_PORT) | (1ull << CONFIG_LISTEN) | (1ull << CONFIG_WORKERS));
	assert_int_equal(config_diff(&b, &fx->cf), config_diff(&fx->cf, &b));
	/* exports and their rules are no settings */
	assert_int_equal(PARSE(fx, "-e", "/u=/srv/a", "--port", "2050", "--listen", "::1",
			       "--workers", "8"), 0);
	assert_int_equal(config_diff(&fx->cf, &b), 0);
	/* a string setting unset on one side */
	assert_int_equal(PARSE(fx, "--metrics", "127.0.0.1:9249", "--hosts", "/etc/h"), 0);
	assert_int_equal(config_diff(&fx->cf, &b), (1ull << CONFIG_METRICS) | (1ull << CONFIG_HOSTS));
	config_free(&b);

	for (int s = 0; s < CONFIG_NSETTINGS; s++)
		assert_int_equal(config_setting_apply(s),
				 s == CONFIG_HOSTS ? CONFIG_RELOAD : CONFIG_RESTART);
	assert_string_equal(config_setting_name(CONFIG_MAX_REQUESTS), "max-requests-per-connection");
}

/*
 * config_diff_export: what a reload cannot apply to an export. Client rules and options
 * alone are no such change; a new, removed or restacked export is; another upper= and an
 * export served read-only that is no longer 'ro' may come together.
 */
static void test_config_diff_export(void **state)
{
	struct fixture *fx = *state;
	struct config b;

	assert_int_equal(PARSE(fx, "-e", "/u=/srv/a:/srv/b", "-o", "ro", "-e", "/gone=/srv/g",
			       "-e", "/v=/srv/v", "-o", "upper=/srv/c/%a"), 0);
	config_init(&b);
	assert_int_equal(config_parse_args(&b, 11, (char *[]){ "unionnfsd", "-e", "/u=/srv/a:/srv/b",
				"--client", "10.0.0.0/8(rw)", "-e", "/new=/srv/n", "-e", "/v=/srv/v",
				"-o", "upper=/srv/d/%a", NULL }, fx->err, sizeof(fx->err)), 0);
	/* other rules and options: a reload applies them, unless it was opened read-only */
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", false), 0);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", true), CONFIG_EXPORT_WRITABLE);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/gone", false), CONFIG_EXPORT_GONE);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/new", false), CONFIG_EXPORT_NEW);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/none", false), 0);
	/* an upper= export is served read-only and stays 'ro' */
	assert_int_equal(config_diff_export(&fx->cf, &b, "/v", true), CONFIG_EXPORT_UPPER);
	assert_int_equal(config_diff_export(&fx->cf, &fx->cf, "/v", true), 0);
	config_free(&b);

	config_init(&b);
	assert_int_equal(config_parse_args(&b, 5, (char *[]){ "unionnfsd", "-e", "/u=/srv/b:/srv/a",
				"-e", "/v=/srv/v", NULL }, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", true), CONFIG_EXPORT_BRANCHES);
	/* upper= dropped: another template, and the export is writable now */
	assert_int_equal(config_diff_export(&fx->cf, &b, "/v", true),
			 CONFIG_EXPORT_UPPER | CONFIG_EXPORT_WRITABLE);
	config_free(&b);

	/* create= and statfs= apply at once; branch words are another stack */
	config_init(&b);
	assert_int_equal(config_parse_args(&b, 7, (char *[]){ "unionnfsd", "-e", "/u=/srv/a:/srv/b",
				"-o", "create=mfs:5,statfs=policy", "-e", "/v=/srv/v", NULL },
				fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", false), CONFIG_EXPORT_POLICY);
	config_free(&b);
	config_init(&b);
	assert_int_equal(config_parse_args(&b, 3, (char *[]){ "unionnfsd", "-e",
				"/u=/srv/a=rw:/srv/b=rw", NULL }, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", false), CONFIG_EXPORT_BRANCHES);
	config_free(&b);
	config_init(&b);
	assert_int_equal(config_parse_args(&b, 3, (char *[]){ "unionnfsd", "-e",
				"/u=/srv/a=rw:/srv/b=ro", NULL }, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(config_diff_export(&fx->cf, &b, "/u", false), 0); /* the defaults */
	config_free(&b);
}

/*
 * Parsing asks no resolver and reads no file but the config text: a host name that does
 * not resolve and a --hosts map that does not exist both parse; config_resolve fails on
 * them, naming where each was written.
 */
static void test_parse_no_dns(void **state)
{
	struct fixture *fx = *state;

	dns_calls = 0;
	assert_int_equal(PARSE(fx, "-e", "/u=/srv/a", "--client", "no-such-host.invalid(ro)",
			       "--client", "localhost(rw)"), 0);
	assert_int_equal(dns_calls, 0);
	assert_int_equal(fx->cf.cf_exports[0].ec_rules[0].er_kind, EXPORTS_HOST);
	assert_int_equal(fx->cf.cf_exports[0].ec_rules[0].er_nnets, 0);
	assert_int_equal(config_validate(&fx->cf, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(dns_calls, 0);
	assert_int_equal(config_resolve(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_true(dns_calls >= 1);
	assert_non_null(strstr(fx->err, "option --client: client host name 'no-such-host.invalid' "
				   "does not resolve ("));

	config_free(&fx->cf);
	config_init(&fx->cf);
	assert_int_equal(PARSE(fx, "-e", "/u=/srv/a", "--hosts", "/no/such/hosts/map"), 0);
	assert_null(fx->cf.cf_hosts);
	assert_int_equal(config_resolve(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_non_null(strstr(fx->err, "option --hosts: "));
	assert_non_null(strstr(fx->err, "/no/such/hosts/map"));

	/* the file form names FILE:LINE of the rule */
	config_free(&fx->cf);
	config_init(&fx->cf);
	dns_calls = 0;
	assert_int_equal(config_parse_file(&fx->cf, write_file(fx, "\nexport /u /a no-such-host.invalid(ro)\n"),
					   fx->err, sizeof(fx->err)), 0);
	assert_int_equal(dns_calls, 0);
	assert_int_equal(config_resolve(&fx->cf, fx->err, sizeof(fx->err)), -1);
	assert_non_null(strstr(fx->err, ":2: export /u: client host name 'no-such-host.invalid'"));
}

/* An export's base: the branches below its writable ones, read and replaced as text. */
static void test_config_base(void **state)
{
	struct fixture *fx = *state;
	struct export_conf *plain, *lab;
	char *text;

	assert_int_equal(PARSE(fx, "-e", "/u=/up:/lo1:/lo2", "-e", "/lab=/v1", "-o",
			       "upper=/clients/%a"), 0);
	plain = &fx->cf.cf_exports[config_find_export(&fx->cf, "/u")];
	lab = &fx->cf.cf_exports[config_find_export(&fx->cf, "/lab")];
	assert_int_equal(config_writable_count(plain), 1);
	assert_int_equal(config_writable_count(lab), 0);
	text = config_base_text(plain);
	assert_string_equal(text, "/lo1\n/lo2");
	free(text);
	text = config_base_text(lab);
	assert_string_equal(text, "/v1");
	free(text);

	assert_int_equal(config_set_base(plain, "/n1"), 0);
	assert_int_equal(plain->ec_nbranches, 2);
	assert_string_equal(plain->ec_branches[0], "/up");
	assert_string_equal(plain->ec_branches[1], "/n1");
	assert_int_equal(plain->ec_roles[0], UNION_BRANCH_RW);
	assert_int_equal(plain->ec_roles[1], UNION_BRANCH_RO);
	assert_int_equal(config_set_base(lab, "/v2\n/extra"), 0);
	assert_int_equal(lab->ec_nbranches, 2);
	assert_string_equal(lab->ec_branches[1], "/extra");
	assert_int_equal(lab->ec_roles[0], UNION_BRANCH_RO);
	/* a relative path or an empty base: refused, the export unchanged */
	assert_int_equal(config_set_base(lab, "/ok\nrelative"), -EINVAL);
	assert_int_equal(config_set_base(plain, ""), -EINVAL);
	assert_int_equal(lab->ec_nbranches, 2);
	assert_string_equal(lab->ec_branches[0], "/v2");
	assert_string_equal(plain->ec_branches[0], "/up");
	assert_string_equal(plain->ec_branches[1], "/n1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inline_values_and_ipv6, setup, teardown),
		cmocka_unit_test_setup_teardown(test_portmap_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_numbers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_client_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_net_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_strings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_and_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_switch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_help, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_o_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_o_bad_word, setup, teardown),
		cmocka_unit_test_setup_teardown(test_o_without_e, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_spec_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_branch_roles_and_policy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metacopy_option, setup, teardown),
		cmocka_unit_test_setup_teardown(test_branch_roles_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_relative_branch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_branch_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_canonical_and_unique, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_validate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_good, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_bad_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_bad_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_nul_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mix_file_and_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_o_after_c, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_error_via_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_error_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_setting_parses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setting_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nlm_settings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setting_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_diff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_diff_export, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_no_dns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_base, setup, teardown),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
