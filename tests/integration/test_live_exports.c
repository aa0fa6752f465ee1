/*
 * Exports changed while serving: a reload (SIGHUP) adds exports, removes them (their
 * handles go stale, MNT answers NOENT), serves them again, and changes their options,
 * while a libnfs client of an export the reload leaves alone keeps calling without one
 * error. A configuration with an error changes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define RELOADED "SIGHUP: configuration reloaded"
#define KEPT "the new configuration has an error, keeping the running one"

static struct it_server srv;
static char cfgpath[PATH_MAX], dir_a[PATH_MAX], dir_b[PATH_MAX], dir_c[PATH_MAX];

/* The config: /a always, then the export lines in more (may be ""). */
static void write_config(const char *more)
{
	char text[4 * PATH_MAX + 1024];
	int n;

	n = snprintf(text, sizeof(text),
		     "port 0\nmount-port 0\nportmap off\nnlm-port off\nstate %s\n"
		     "export /a %s *(rw,insecure)\n%s",
		     srv.is_state, dir_a, more);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
}

/* "export /b DIR_B *(rw,insecure)\n" and the like, for write_config. */
static void export_line(char *out, size_t len, const char *name, const char *dir,
			const char *opts)
{
	int n = snprintf(out, len, "export %s %s %s\n", name, dir, opts);

	assert_true(n > 0 && (size_t)n < len);
}

static void reload(const char *more, const char *done)
{
	int before = it_server_log_count(&srv, done);

	write_config(more);
	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	if (!it_server_log_wait_count(&srv, done, before + 1, 10000)) {
		it_server_dump_log(&srv);
		fail_msg("no '%s' in the log 10 s after SIGHUP", done);
	}
}

static void make_dir_with_file(char *dir, const char *name, const char *file)
{
	char p[PATH_MAX];

	it_path(dir, "%s/%s", srv.is_dir, name);
	assert_int_equal(mkdir(dir, 0777), 0);
	assert_int_equal(chmod(dir, 0777), 0); /* the test's calls are not root's */
	it_path(p, "%s/%s", dir, file);
	it_write_file(p, file, strlen(file));
}

static int before_each(void **state)
{
	(void)state;
	it_server_init(&srv, false);
	make_dir_with_file(dir_a, "a", "in-a");
	make_dir_with_file(dir_b, "b", "in-b");
	make_dir_with_file(dir_c, "c", "in-c");
	it_path(cfgpath, "%s/live.conf", srv.is_dir);
	return 0;
}

static void start(const char *more)
{
	write_config(more);
	srv.is_config = cfgpath;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with %s", cfgpath);
}

static int after_each(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

/* A libnfs client of /a reading a.txt over and over: a reload must never fail it. */
struct reader {
	struct nfs_context *r_nfs;
	atomic_bool r_stop;
	int r_calls;
	int r_errors;
	char r_first_error[256];
};

static void *reader_run(void *arg)
{
	struct reader *r = arg;
	char buf[64];

	while (!atomic_load(&r->r_stop)) {
		struct nfsfh *fh = NULL;
		struct nfs_stat_64 st;
		int n = -1;

		if (nfs_stat64(r->r_nfs, "/in-a", &st) == 0 &&
		    nfs_open(r->r_nfs, "/in-a", O_RDONLY, &fh) == 0) {
			n = nfs_pread(r->r_nfs, fh, 0, sizeof(buf), buf);
			nfs_close(r->r_nfs, fh);
		}
		if (n != 4 || memcmp(buf, "in-a", 4) != 0) {
			if (r->r_errors++ == 0)
				snprintf(r->r_first_error, sizeof(r->r_first_error), "%s",
					 nfs_get_error(r->r_nfs));
		}
		r->r_calls++;
	}
	return NULL;
}

static void reader_start(struct reader *r, pthread_t *t)
{
	char url[PATH_MAX];

	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "nfs://127.0.0.1/a?nfsport=%d&mountport=%d", srv.is_nfs_port,
		 srv.is_mount_port);
	r->r_nfs = it_nfs_mount_url(url);
	assert_non_null(r->r_nfs);
	assert_int_equal(pthread_create(t, NULL, reader_run, r), 0);
}

static void reader_stop(struct reader *r, pthread_t t)
{
	atomic_store(&r->r_stop, true);
	pthread_join(t, NULL);
	it_nfs_unmount(r->r_nfs);
	if (r->r_errors)
		fail_msg("%d of %d reads of /a failed across the reloads; the first: %s", r->r_errors,
			 r->r_calls, r->r_first_error);
	assert_true(r->r_calls > 0);
}

static nfsstat3 getattr_of(const nfs_fh3 *fh)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	fattr3 attr;
	nfsstat3 st = it_getattr(c, fh, &attr);

	it_clnt_destroy(c);
	return st;
}

/* Looks name up in the export root fh and reads it: its bytes must be want. */
static void assert_reads(const nfs_fh3 *root, const char *name, const char *want)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	char buf[64] = "";
	nfs_fh3 fh;
	fattr3 attr;

	it_assert_status(it_lookup(c, root, name, &fh, &attr), NFS3_OK);
	it_assert_status(it_read_all(c, &fh, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, want);
	it_fh_free(&fh);
	it_clnt_destroy(c);
}

/*
 * Add /c, remove /b, serve /b again, change /a's options: each by a reload, while a
 * libnfs client reads from /a all along.
 */
static void test_add_remove_change_under_load(void **state)
{
	char line_b[PATH_MAX + 64], line_c[PATH_MAX + 64], both[2 * PATH_MAX + 128];
	nfs_fh3 root_b, root_c, fh;
	struct reader r;
	pthread_t t;

	(void)state;
	export_line(line_b, sizeof(line_b), "/b", dir_b, "*(rw,insecure)");
	start(line_b);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/b", &root_b), IT_MNT_OK);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/c", &fh), IT_MNT_NOENT);
	reader_start(&r, &t);

	/* added: mountable and served at once */
	export_line(line_c, sizeof(line_c), "/c", dir_c, "*(rw,insecure)");
	snprintf(both, sizeof(both), "%s%s", line_b, line_c);
	reload(both, RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /c added"));
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/c", &root_c), IT_MNT_OK);
	assert_reads(&root_c, "in-c", "in-c");

	/* removed: its handles are stale, MNT says it is not there, the others go on */
	reload(line_c, RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /b removed"));
	it_assert_status(getattr_of(&root_b), NFS3ERR_STALE);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/b", &fh), IT_MNT_NOENT);
	assert_reads(&root_c, "in-c", "in-c");

	/* back with the same branches: the old handles work again */
	reload(both, RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /b is served again"));
	it_assert_status(getattr_of(&root_b), NFS3_OK);
	assert_reads(&root_b, "in-b", "in-b");

	/* /c's options change: read-only now */
	export_line(line_c, sizeof(line_c), "/c", dir_c, "*(ro,insecure)");
	snprintf(both, sizeof(both), "%s%s", line_b, line_c);
	reload(both, RELOADED);
	{
		CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);

		it_assert_status(it_create(c, &root_c, "new-file"), NFS3ERR_ROFS);
		it_assert_status(it_create(c, &root_b, "new-file"), NFS3_OK);
		it_clnt_destroy(c);
	}
	reader_stop(&r, t);
	it_fh_free(&root_b);
	it_fh_free(&root_c);
}

/* A reload with an error, or an export that cannot be opened, leaves what runs alone. */
static void test_bad_config_keeps_running(void **state)
{
	char line_b[PATH_MAX + 64], bad[2 * PATH_MAX + 128], missing[PATH_MAX];
	nfs_fh3 root_b, fh;
	struct reader r;
	pthread_t t;

	(void)state;
	export_line(line_b, sizeof(line_b), "/b", dir_b, "*(rw,insecure)");
	start(line_b);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/b", &root_b), IT_MNT_OK);
	reader_start(&r, &t);

	/* a syntax error: nothing changes, /b is not removed */
	reload("export /b\n", KEPT);
	it_assert_status(getattr_of(&root_b), NFS3_OK);

	/* a new export whose branch is missing: not served, the rest is */
	it_path(missing, "%s/missing", srv.is_dir);
	snprintf(bad, sizeof(bad), "%sexport /m %s *(rw,insecure)\n", line_b, missing);
	reload(bad, RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /m is not served"));
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/m", &fh), IT_MNT_NOENT);
	it_assert_status(getattr_of(&root_b), NFS3_OK);
	assert_reads(&root_b, "in-b", "in-b");
	reader_stop(&r, t);
	it_fh_free(&root_b);
}

/*
 * An export without upper= given another read-only branch by a reload is served from it at
 * once: the upper's files keep their handles, the old lower's files go stale, the new
 * lower's show.
 */
static void test_plain_export_new_lower(void **state)
{
	char line_b[2 * PATH_MAX + 64], lower1[PATH_MAX], lower2[PATH_MAX];
	nfs_fh3 root_b, fh_up, fh_low;
	CLIENT *c;
	fattr3 attr;

	(void)state;
	make_dir_with_file(lower1, "lower1", "low");
	make_dir_with_file(lower2, "lower2", "low");
	it_path(line_b, "%s/low", lower2);
	it_write_file(line_b, "v2", 2);
	snprintf(line_b, sizeof(line_b), "export /b %s:%s *(rw,insecure)\n", dir_b, lower1);
	start(line_b);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, "/b", &root_b), IT_MNT_OK);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &root_b, "in-b", &fh_up, &attr), NFS3_OK);
	it_assert_status(it_lookup(c, &root_b, "low", &fh_low, &attr), NFS3_OK);
	assert_reads(&root_b, "low", "low");

	snprintf(line_b, sizeof(line_b), "export /b %s:%s *(rw,insecure)\n", dir_b, lower2);
	reload(line_b, RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /b is served from its new branches"));
	it_assert_status(it_getattr(c, &fh_up, &attr), NFS3_OK);
	it_assert_status(it_getattr(c, &fh_low, &attr), NFS3ERR_STALE);
	assert_reads(&root_b, "low", "v2");
	assert_reads(&root_b, "in-b", "in-b");
	it_clnt_destroy(c);
	it_fh_free(&fh_up);
	it_fh_free(&fh_low);
	it_fh_free(&root_b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_add_remove_change_under_load, before_each, after_each),
		cmocka_unit_test_setup_teardown(test_bad_config_keeps_running, before_each, after_each),
		cmocka_unit_test_setup_teardown(test_plain_export_new_lower, before_each, after_each),
	};

	return cmocka_run_group_tests_name("live exports", tests, NULL, NULL);
}
