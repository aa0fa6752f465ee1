/*
 * Several writable branches (spec: "Several writable branches"): three writable branches
 * w0, w1, w2 over a read-only base. Where creates land under each policy, writes in place,
 * copy-up only to the top, removes and renames across branches, fileids across restart.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "union_fixture.h"

#define BASE 3

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* How many of the names "NAME.i" (i < n) branch b holds in directory rel. */
static int count_in(struct fx *f, int b, const char *rel, const char *prefix, int n)
{
	char name[PATH_MAX];
	int c = 0;

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%s%s.%d", rel, *rel ? "/" : "", prefix, i);
		c += exists(P(f, b, name));
	}
	return c;
}

static void reopen_with(struct fx *f, const struct union_policy *p)
{
	f->policy = p;
	union_set_policy(f->ux, p);
}

static void mk_files(struct fx *f, uint64_t dir, const char *prefix, int n)
{
	char name[64];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s.%d", prefix, i);
		mk_file(f, dir, name);
	}
}

/* A file in a middle writable branch is written where it is; its fileid stays. */
static void test_write_in_place(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0600 };
	struct stat st;
	char buf[64];
	uint64_t ino;

	put_file(f->br[1], "mid", "old", 0644);
	put_file(f->br[BASE], "mid", "base copy", 0644);
	ino = W(f, "mid");
	wr(f, ino, 0, "new");
	assert_int_equal(union_setattr(f->ux, ino, &sa, NULL, NULL, NULL), 0);
	get_file(f->br[1], "mid", buf, sizeof(buf));
	assert_string_equal(buf, "new");
	assert_int_equal(stat(P(f, 1, "mid"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_false(exists(P(f, 0, "mid")));
	get_file(f->br[BASE], "mid", buf, sizeof(buf));
	assert_string_equal(buf, "base copy");
	fx_restart(f);
	assert_int_equal(W(f, "mid"), ino);
}

/* A file in the read-only base under three writable branches copies to the top one. */
static void test_copy_up_to_top(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t ino;

	put_dir(f->br[2], "d", 0755);
	put_dir(f->br[BASE], "d", 0755);
	put_file(f->br[BASE], "d/f", "base", 0644);
	ino = W(f, "d/f");
	wr(f, ino, 0, "BASE");
	get_file(f->br[0], "d/f", buf, sizeof(buf));
	assert_string_equal(buf, "BASE");
	assert_false(exists(P(f, 1, "d/f")));
	assert_false(exists(P(f, 2, "d/f")));
	get_file(f->br[BASE], "d/f", buf, sizeof(buf));
	assert_string_equal(buf, "base");
	fx_restart(f);
	assert_int_equal(W(f, "d/f"), ino);
}

/* tdp: next to the parent's topmost writable copy; the top branch when none has one. */
static void test_create_tdp(void **state)
{
	struct fx *f = *state;
	uint64_t d, b;

	put_dir(f->br[1], "d", 0755);
	put_dir(f->br[2], "d", 0755);
	put_dir(f->br[BASE], "b", 0755);
	d = W(f, "d");
	b = W(f, "b");
	mk_files(f, d, "f", 100);
	assert_int_equal(count_in(f, 1, "d", "f", 100), 100);
	assert_int_equal(count_in(f, 2, "d", "f", 100), 0);
	assert_false(exists(P(f, 0, "d")));
	mk_files(f, b, "g", 3);
	assert_int_equal(count_in(f, 0, "b", "g", 3), 3);
	mk_files(f, STORE_ROOT_INO, "r", 3);
	assert_int_equal(count_in(f, 0, "", "r", 3), 3);
}

/* rr: evenly over the writable branches, parent directories made as needed. */
static void test_create_rr(void **state)
{
	struct fx *f = *state;
	struct union_policy p = { .up_create = UNION_CREATE_RR };
	uint64_t d, inos[99];
	char name[32];
	struct stat st;

	reopen_with(f, &p);
	put_dir(f->br[BASE], "d", 0750);
	assert_int_equal(chown(P(f, BASE, "d"), 12, 34), 0);
	d = W(f, "d");
	for (int i = 0; i < 99; i++) {
		snprintf(name, sizeof(name), "f.%d", i);
		inos[i] = mk_file(f, d, name);
	}
	for (int b = 0; b < 3; b++) {
		assert_int_equal(count_in(f, b, "d", "f", 99), 33);
		/* the merged directory's owner and mode */
		assert_int_equal(stat(P(f, b, "d"), &st), 0);
		assert_int_equal(st.st_mode & 07777, 0750);
		assert_int_equal(st.st_uid, 12);
		assert_int_equal(st.st_gid, 34);
	}
	fx_restart(f);
	for (int i = 0; i < 99; i++) {
		snprintf(name, sizeof(name), "d/f.%d", i);
		assert_int_equal(W(f, name), inos[i]);
	}
}

/* A name made in a copy below the top one moves the directory's times, as clients see them. */
static void test_create_below_moves_times(void **state)
{
	struct fx *f = *state;
	struct union_policy p = { .up_create = UNION_CREATE_RR };
	struct timespec old[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
	struct stat before, after, pre, post;
	uint64_t d, ino;

	reopen_with(f, &p);
	for (int b = 0; b < 3; b++) {
		put_dir(f->br[b], "d", 0755);
		assert_int_equal(utimensat(AT_FDCWD, P(f, b, "d"), old, 0), 0);
	}
	d = W(f, "d");
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n.%d", i);
		assert_int_equal(union_getattr(f->ux, d, &before), 0);
		assert_int_equal(union_create(f->ux, d, name, UNION_GUARDED, &no_sa, NULL, &ino,
					      &after, &pre, &post), 0);
		assert_int_equal(union_getattr(f->ux, d, &after), 0);
		assert_true(after.st_mtim.tv_sec > 1000);
		assert_int_equal(post.st_mtim.tv_sec, after.st_mtim.tv_sec);
		assert_int_equal(post.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
		assert_int_equal(pre.st_mtim.tv_sec, before.st_mtim.tv_sec);
		old[1] = after.st_mtim;
	}
	/* one each, two of them below the top copy */
	for (int b = 0; b < 3; b++)
		assert_int_equal(count_in(f, b, "d", "n", 3), 1);
}

/* pmfs: only among branches holding the parent. */
static void test_create_pmfs(void **state)
{
	struct fx *f = *state;
	struct union_policy p = { .up_create = UNION_CREATE_PMFS };
	uint64_t d;

	reopen_with(f, &p);
	put_dir(f->br[2], "d", 0755);
	d = W(f, "d");
	mk_files(f, d, "f", 10);
	assert_int_equal(count_in(f, 2, "d", "f", 10), 10);
	assert_false(exists(P(f, 0, "d")));
	assert_false(exists(P(f, 1, "d")));
}

/* A name whited out in a writable branch is made there, whatever the policy says. */
static void test_create_over_whiteout(void **state)
{
	struct fx *f = *state;
	struct union_policy p = { .up_create = UNION_CREATE_RR };
	uint64_t ino;

	reopen_with(f, &p);
	put_file(f->br[BASE], "x", "base", 0644);
	assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "x", NULL, NULL), 0);
	gone(f, "x");
	for (int i = 0; i < 4; i++) {
		ino = mk_file(f, STORE_ROOT_INO, "x");
		assert_true(exists(P(f, 0, "x")));
		assert_false(exists(P(f, 1, "x")));
		assert_false(exists(P(f, 2, "x")));
		assert_int_equal(W(f, "x"), ino);
		assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "x", NULL, NULL), 0);
		gone(f, "x");
	}
}

/* A directory made opaque in w0 hides w1's copy: rr never puts a name there. */
static void test_create_under_opaque(void **state)
{
	struct fx *f = *state;
	struct union_policy p = { .up_create = UNION_CREATE_RR };
	uint64_t d;

	put_dir(f->br[BASE], "d", 0755);
	put_file(f->br[BASE], "d/old", "x", 0644);
	d = W(f, "d");
	assert_int_equal(union_rmdir(f->ux, STORE_ROOT_INO, "d", NULL, NULL), -ENOTEMPTY);
	assert_int_equal(union_remove(f->ux, d, "old", NULL, NULL), 0);
	assert_int_equal(union_rmdir(f->ux, STORE_ROOT_INO, "d", NULL, NULL), 0);
	d = mk_dir(f, STORE_ROOT_INO, "d"); /* opaque in w0, over the base's */
	reopen_with(f, &p);
	mk_files(f, d, "f", 6);
	assert_int_equal(count_in(f, 0, "d", "f", 6), 6);
	assert_false(exists(P(f, 1, "d")));
	assert_false(exists(P(f, 2, "d")));
}

static bool is_whiteout(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == 0;
}

/* A name in two writable branches and the base: both copies go, one whiteout stays. */
static void test_remove_across(void **state)
{
	struct fx *f = *state;

	put_file(f->br[1], "x", "w1", 0644);
	put_file(f->br[2], "x", "w2", 0644);
	put_file(f->br[BASE], "x", "base", 0644);
	W(f, "x");
	assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "x", NULL, NULL), 0);
	gone(f, "x");
	assert_false(exists(P(f, 0, "x")));
	assert_true(is_whiteout(P(f, 1, "x")));
	assert_false(exists(P(f, 2, "x")));
	assert_true(exists(P(f, BASE, "x")));
	fx_restart(f);
	gone(f, "x");
}

/* A name only in writable branches: every copy goes, no whiteout is left behind. */
static void test_remove_writable_only(void **state)
{
	struct fx *f = *state;

	put_file(f->br[0], "x", "w0", 0644);
	put_file(f->br[2], "x", "w2", 0644);
	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/y", "w1", 0644);
	W(f, "x");
	assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "x", NULL, NULL), 0);
	assert_int_equal(union_remove(f->ux, W(f, "d"), "y", NULL, NULL), 0);
	for (int b = 0; b <= BASE; b++) {
		assert_false(exists(P(f, b, "x")));
		assert_false(exists(P(f, b, "d/y")));
	}
	assert_false(exists(P(f, 0, "d"))); /* nothing was copied to the top to remove it */
	fx_restart(f);
	gone(f, "x");
	gone(f, "d/y");
}

/* rmdir of a directory merged over the three writable branches, with and without the base. */
static void test_rmdir_spread(void **state)
{
	struct fx *f = *state;
	uint64_t d;

	for (int b = 0; b < 3; b++) {
		put_dir(f->br[b], "d", 0755);
		put_dir(f->br[b], "e", 0755);
	}
	put_dir(f->br[BASE], "e", 0755);
	put_file(f->br[1], "d/f1", "1", 0644);
	put_file(f->br[2], "d/f2", "2", 0644);
	d = W(f, "d");
	assert_int_equal(union_rmdir(f->ux, STORE_ROOT_INO, "d", NULL, NULL), -ENOTEMPTY);
	assert_int_equal(union_remove(f->ux, d, "f1", NULL, NULL), 0);
	assert_int_equal(union_remove(f->ux, d, "f2", NULL, NULL), 0);
	assert_int_equal(union_rmdir(f->ux, STORE_ROOT_INO, "d", NULL, NULL), 0);
	assert_int_equal(union_rmdir(f->ux, STORE_ROOT_INO, "e", NULL, NULL), 0);
	for (int b = 0; b < 3; b++)
		assert_false(exists(P(f, b, "d")));
	assert_true(is_whiteout(P(f, 0, "e")));
	assert_false(exists(P(f, 1, "e")));
	assert_false(exists(P(f, 2, "e")));
	assert_true(exists(P(f, BASE, "e")));
	fx_restart(f);
	gone(f, "d");
	gone(f, "e");
}

static void ren(struct fx *f, uint64_t from, const char *fname, uint64_t to, const char *tname)
{
	assert_int_equal(union_rename(f->ux, from, fname, to, tname, NULL, NULL, NULL, NULL), 0);
}

/* A file moves within its writable branch; a lower copy of its old name gets a whiteout. */
static void test_rename_in_place(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t y, z;

	put_file(f->br[1], "y", "w1 y", 0644);
	put_file(f->br[1], "z", "w1 z", 0644);
	put_file(f->br[BASE], "z", "base z", 0644);
	y = W(f, "y");
	z = W(f, "z");
	ren(f, STORE_ROOT_INO, "y", STORE_ROOT_INO, "y2");
	ren(f, STORE_ROOT_INO, "z", STORE_ROOT_INO, "z2");
	get_file(f->br[1], "y2", buf, sizeof(buf));
	assert_string_equal(buf, "w1 y");
	assert_false(exists(P(f, 1, "y")));
	assert_true(is_whiteout(P(f, 1, "z")));
	for (int b = 0; b < 3; b += 2) {
		assert_false(exists(P(f, b, "y2")));
		assert_false(exists(P(f, b, "z")));
	}
	fx_restart(f);
	assert_int_equal(W(f, "y2"), y);
	assert_int_equal(W(f, "z2"), z);
	gone(f, "y");
	gone(f, "z");
}

/* From branch 2 into a directory only branch 1 has: no EXDEV, the fileid stays. */
static void test_rename_across_branches(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t ino;

	put_file(f->br[2], "f", "from w2", 0644);
	put_dir(f->br[1], "d", 0755);
	ino = W(f, "f");
	ren(f, STORE_ROOT_INO, "f", W(f, "d"), "g");
	gone(f, "f");
	assert_int_equal(W(f, "d/g"), ino);
	rd(f, ino, buf, sizeof(buf));
	assert_string_equal(buf, "from w2");
	assert_false(exists(P(f, 2, "f")));
	assert_false(exists(P(f, 0, "f")));
	fx_restart(f);
	assert_int_equal(W(f, "d/g"), ino);
	gone(f, "f");
}

/* Over a name another writable branch holds: that copy never shows again. */
static void test_rename_over_other_branch(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t y;

	put_file(f->br[0], "x", "w0 x", 0644);
	put_file(f->br[2], "x", "w2 x", 0644);
	put_file(f->br[1], "y", "w1 y", 0644);
	y = W(f, "y");
	ren(f, STORE_ROOT_INO, "y", STORE_ROOT_INO, "x");
	gone(f, "y");
	assert_int_equal(W(f, "x"), y);
	rd(f, y, buf, sizeof(buf));
	assert_string_equal(buf, "w1 y");
	assert_false(exists(P(f, 1, "y"))); /* its hidden copy went with it */
	assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "x", NULL, NULL), 0);
	gone(f, "x");
	for (int b = 0; b <= BASE; b++)
		assert_false(exists(P(f, b, "x")));
	fx_restart(f);
	gone(f, "x");
	gone(f, "y");
}

/* A link to a file in a middle writable branch is made there, not by a copy-up. */
static void test_link_in_place(void **state)
{
	struct fx *f = *state;
	struct stat st;
	char buf[64];
	uint64_t ino;

	put_file(f->br[1], "f", "one", 0644);
	put_dir(f->br[BASE], "d", 0755);
	ino = W(f, "f");
	assert_int_equal(union_link(f->ux, ino, W(f, "d"), "g", &st, NULL, NULL), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(W(f, "d/g"), ino);
	wr(f, ino, 0, "two");
	get_file(f->br[1], "d/g", buf, sizeof(buf));
	assert_string_equal(buf, "two");
	assert_false(exists(P(f, 0, "f")));
	assert_false(exists(P(f, 0, "d")));
	fx_restart(f);
	assert_int_equal(W(f, "f"), ino);
}

/* FSSTAT adds the writable branches' space up (counted once per file system). */
static void test_statfs_sum(void **state)
{
	struct fx *f = *state;
	struct statvfs sv, one;

	assert_int_equal(union_statfs(f->ux, STORE_ROOT_INO, &sv), 0);
	assert_int_equal(statvfs(f->br[0], &one), 0);
	/* every branch here is on one file system */
	assert_int_equal(sv.f_blocks, one.f_blocks);
}

/* Writable branches come first: one below a read-only branch is refused at open. */
static void test_writable_below_readonly(void **state)
{
	struct fx *f = *state;
	static const enum union_role bad[FX_MAXB] = { UNION_BRANCH_RW, UNION_BRANCH_RO,
						       UNION_BRANCH_RW, UNION_BRANCH_RO };
	struct union_export *ux = NULL;
	char err[512];

	assert_int_equal(union_open("/other", f->branches, 4, bad, 0, "fix -e", union_store(f->ux),
				    &ux, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is writable below the read-only branch"));
	assert_null(ux);
}

/* Records per branch, as status shows them, must be n[0..4). */
static void usage_is(struct fx *f, const uint64_t *n)
{
	struct union_branch_usage u;

	assert_int_equal(union_branch_count(f->ux), 4);
	for (int b = 0; b < 4; b++) {
		union_branch_usage(f->ux, b, &u);
		assert_int_equal(u.bu_records_err, 0);
		if (u.bu_records != n[b])
			fail_msg("branch %d holds %llu records, want %llu", b,
				 (unsigned long long)u.bu_records, (unsigned long long)n[b]);
	}
}

/*
 * What status shows of each branch: the records whose copy is there, moved by creates, a
 * copy-up, a remove and a repair as they commit and recounted the same after a restart;
 * each branch's space as measured at open.
 */
static void test_branch_usage(void **state)
{
	static const uint64_t at_open[] = { 1, 0, 0, 0 }, made[] = { 3, 1, 0, 1 },
			      moved[] = { 3, 1, 0, 0 }, repaired[] = { 3, 0, 0, 0 };
	struct fx *f = *state;
	struct union_branch_usage u;
	struct statvfs sv;
	uint64_t mid;

	usage_is(f, at_open);                  /* the root, served from its top copy */
	mk_file(f, STORE_ROOT_INO, "new");     /* tdp: into w0 */
	mk_dir(f, STORE_ROOT_INO, "d");
	put_file(f->br[1], "mid", "m", 0644);
	put_file(f->br[BASE], "base", "b", 0644);
	mid = W(f, "mid");
	W(f, "base");
	usage_is(f, made);
	wr(f, W(f, "base"), 0, "copied up"); /* base to w0 */
	assert_int_equal(union_remove(f->ux, STORE_ROOT_INO, "new", NULL, NULL), 0);
	usage_is(f, moved);
	assert_int_equal(union_rename(f->ux, STORE_ROOT_INO, "mid", STORE_ROOT_INO, "mid2", NULL,
				      NULL, NULL, NULL), 0);
	usage_is(f, moved);                    /* renamed within w1 */

	for (int b = 0; b < 4; b++) {
		union_branch_usage(f->ux, b, &u);
		assert_int_equal(u.bu_space_err, 0);
		assert_int_equal(statvfs(f->br[b], &sv), 0);
		assert_int_equal(u.bu_total, (uint64_t)sv.f_blocks * sv.f_frsize);
		assert_true(u.bu_total > 0 && u.bu_avail <= u.bu_total);
		assert_true(u.bu_age_ms >= 0);
	}

	fx_restart(f);
	usage_is(f, moved);
	/* Removed behind the server's back: check --repair drops the record. */
	assert_int_equal(unlink(P(f, 1, "mid2")), 0);
	assert_int_equal(union_forget_stale(f->ux, mid), 1);
	usage_is(f, repaired);
	fx_restart(f);
	usage_is(f, repaired);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_in_place, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_copy_up_to_top, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_tdp, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_rr, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_below_moves_times, fx_setup_rw3,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_pmfs, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_over_whiteout, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_under_opaque, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_remove_across, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_remove_writable_only, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rmdir_spread, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_in_place, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_across_branches, fx_setup_rw3,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_over_other_branch, fx_setup_rw3,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_link_in_place, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_statfs_sum, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_branch_usage, fx_setup_rw3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_writable_below_readonly, fx_setup_rw3,
						fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
