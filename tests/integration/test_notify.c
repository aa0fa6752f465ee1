/*
 * Branches changed by hand while the real server serves them (README, "Branches changed
 * while serving"): between two calls of a client, files are replaced, removed, added,
 * shadowed by a copy above and whited out, directories removed and made, and a file is
 * truncated, directly in the branches. The next call sees each change: the handle of a
 * replaced file answers NFS3ERR_STALE to GETATTR and READ (never the new file's bytes),
 * names answer as the branches now say, a handle of an unchanged object keeps working,
 * and a READ of the truncated file returns what it now holds. Afterwards the server still
 * runs, `unionnfsd-ctl check` finds no record it cannot check, --repair drops the records
 * of the objects gone, and the next check is clean.
 *
 * The server's thread reading change notification is woken as each change is made, before
 * the change's system call returns here; the next call then reaches the server through
 * loopback RPC.
 *
 * Needs root (whiteouts are character devices).
 */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define T_OUT 8192
#define T_EXIT_STALE 3           /* unionnfsd-ctl check: stale records left in the map */

static CLIENT *clnt;
static nfs_fh3 root;

static int setup(void **state)
{
	if (geteuid() != 0) {
		fprintf(stderr, "# skipped: needs root (whiteouts are character devices)\n");
		return -1;
	}
	if (it_group_setup_union(state) < 0)
		return -1;
	clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	it_fh_free(&root);
	it_clnt_destroy(clnt);
	return it_group_teardown(state);
}

static const char *lower(const char *rel)
{
	static char path[2][PATH_MAX];
	static int k;

	k = !k;
	it_path(path[k], "%s/%s", it_srv.is_lower, rel);
	return path[k];
}

static const char *upper(const char *rel)
{
	static char path[PATH_MAX];

	it_path(path, "%s/%s", it_srv.is_upper, rel);
	return path;
}

static void put(const char *path, const char *data)
{
	it_write_file(path, data, strlen(data));
}

/* LOOKUP of path, which must succeed, and a READ of what it names: its bytes. */
static void expect_data(const char *path, const char *data)
{
	char buf[256];
	nfs_fh3 fh;

	it_assert_status(it_lookup_path(clnt, &root, path, &fh, NULL), NFS3_OK);
	it_assert_status(it_read_all(clnt, &fh, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, data);
	it_fh_free(&fh);
}

static void expect_gone(const char *path)
{
	it_assert_status(it_lookup_path(clnt, &root, path, NULL, NULL), NFS3ERR_NOENT);
}

static int ctl(char *out, const char *a1, const char *a2)
{
	char *argv[] = { (char *)it_ctl_binary(), "--state", it_srv.is_state, (char *)a1,
			 (char *)a2, NULL };

	return it_run(argv, 30, out, T_OUT);
}

static void test_changed_by_hand(void **state)
{
	static char out[T_OUT];
	nfs_fh3 d, r, e, gone;
	fattr3 a;
	char buf[256];
	int rc;

	(void)state;
	assert_int_equal(mkdir(lower("d"), 0755), 0);
	assert_int_equal(mkdir(lower("e"), 0755), 0);
	put(lower("d/r"), "first");
	put(lower("d/gone"), "g");
	put(lower("d/mid"), "middle");
	put(lower("e/x"), "x");
	it_assert_status(it_lookup_path(clnt, &root, "d", &d, NULL), NFS3_OK);
	it_assert_status(it_lookup_path(clnt, &root, "e", &e, NULL), NFS3_OK);
	it_assert_status(it_lookup_path(clnt, &root, "d/r", &r, NULL), NFS3_OK);
	it_assert_status(it_lookup_path(clnt, &root, "d/gone", &gone, NULL), NFS3_OK);
	it_assert_status(it_read_all(clnt, &r, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "first");
	expect_data("d/mid", "middle");
	it_assert_status(it_getattr(clnt, &r, &a), NFS3_OK);

	/* Replaced in the lower by another file: the old handle is stale, never the new data. */
	put(lower("d/r.tmp"), "second");
	assert_int_equal(rename(lower("d/r.tmp"), lower("d/r")), 0);
	it_assert_status(it_getattr(clnt, &r, &a), NFS3ERR_STALE);
	it_assert_status(it_read_all(clnt, &r, buf, sizeof(buf)), NFS3ERR_STALE);
	expect_data("d/r", "second");

	/* Removed, added. */
	assert_int_equal(unlink(lower("d/gone")), 0);
	expect_gone("d/gone");
	it_assert_status(it_getattr(clnt, &gone, &a), NFS3ERR_STALE);
	put(lower("d/new"), "n");
	expect_data("d/new", "n");

	/* A copy put above (with a new upper copy of the directory), a whiteout made there. */
	assert_int_equal(mkdir(upper("d"), 0755), 0);
	put(upper("d/mid"), "upper");
	expect_data("d/mid", "upper");
	assert_int_equal(mknod(upper("d/new"), S_IFCHR, makedev(0, 0)), 0);
	expect_gone("d/new");

	/* A directory removed, one made. */
	assert_int_equal(unlink(lower("e/x")), 0);
	assert_int_equal(rmdir(lower("e")), 0);
	it_assert_status(it_getattr(clnt, &e, &a), NFS3ERR_STALE);
	expect_gone("e/x");
	assert_int_equal(mkdir(lower("n"), 0755), 0);
	put(lower("n/y"), "y");
	expect_data("n/y", "y");

	/* Truncated underneath: READ returns what the file holds now. */
	assert_int_equal(truncate(lower("d/r"), 3), 0);
	expect_data("d/r", "sec");
	/* The directory itself never changed identity: its handle still works. */
	it_assert_status(it_getattr(clnt, &d, &a), NFS3_OK);

	/* The map: no record it cannot check; the records of objects gone, dropped on repair. */
	rc = ctl(out, "check", NULL);
	if (rc != 0 && rc != T_EXIT_STALE)
		fail_msg("unionnfsd-ctl check: exit %d\n%s", rc, out);
	assert_non_null(strstr(out, " 0 errors"));
	assert_int_equal(ctl(out, "check", "--repair"), 0);
	assert_int_equal(ctl(out, "check", NULL), 0);
	assert_non_null(strstr(out, "0 stale, 0 dropped, 0 errors"));
	expect_data("d/r", "sec");
	it_fh_free(&d);
	it_fh_free(&e);
	it_fh_free(&r);
	it_fh_free(&gone);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_changed_by_hand),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
