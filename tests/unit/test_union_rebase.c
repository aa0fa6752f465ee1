/*
 * A new base (union_open with UNION_OPEN_NEW_BASE, store_rebind_export): an export over an
 * upper and a read-only base v1 is opened again over the same upper and a base v2. What
 * was copied up keeps its ino and shows the upper's copy; directories keep their inos and
 * follow their path; a file served from v1 goes stale (its old handle never reaches v2's
 * file of that name, which gets a new ino); v2's new files appear. Without the flag the
 * other base is refused, and neither base is ever written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "union_fixture.h"

#define SNAP_MAX 8192

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends to out every entry under dir/rel (sorted, recursively): path, mode and content. */
static void snap_dir(const char *dir, const char *rel, char *out)
{
	char path[PATH_MAX], sub[PATH_MAX], data[256];
	char *names[64];
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *d;

	assert_true(snprintf(path, sizeof(path), "%s/%s", dir, rel) < (int)sizeof(path));
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		assert_true(n < 64);
		names[n] = strdup(de->d_name);
		assert_non_null(names[n++]);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), by_name);
	for (int i = 0; i < n; i++) {
		assert_true(snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", names[i]) <
			    (int)sizeof(sub));
		assert_true(snprintf(path, sizeof(path), "%s/%s", dir, sub) < (int)sizeof(path));
		assert_int_equal(lstat(path, &st), 0);
		data[0] = '\0';
		if (S_ISREG(st.st_mode))
			get_file(dir, sub, data, sizeof(data));
		assert_true(strlen(out) + strlen(sub) + strlen(data) + 32 < SNAP_MAX);
		sprintf(out + strlen(out), "%s %o %lu [%s]\n", sub, (unsigned)st.st_mode,
			(unsigned long)st.st_mtim.tv_nsec, data);
		if (S_ISDIR(st.st_mode))
			snap_dir(dir, sub, out);
		free(names[i]);
	}
}

static void snap(const char *dir, char *out)
{
	out[0] = '\0';
	snap_dir(dir, "", out);
}

/* The upper, the base v1 ("middle") and the base v2 ("lower"); open over upper and v1. */
static int setup(void **state)
{
	struct fx *f = fx_new(3);

	f->n = 2;
	f->branches[1] = f->br[1];
	put_file(f->br[1], "a", "a-v1", 0644);
	put_file(f->br[1], "b", "b-v1", 0644);
	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/x", "x-v1", 0644);
	put_dir(f->br[1], "e", 0755);
	put_file(f->br[1], "e/f", "f-v1", 0644);
	put_dir(f->br[1], "old", 0755);

	put_file(f->br[2], "a", "a-v2 is longer", 0644);
	put_file(f->br[2], "b", "b-v2 changed", 0644);
	put_dir(f->br[2], "d", 0755);
	put_file(f->br[2], "d/x", "x-v2", 0644);
	put_dir(f->br[2], "e", 0755);
	put_file(f->br[2], "e/g", "g-v2", 0644);
	put_file(f->br[2], "n", "new in v2", 0644);
	/* A base made as a hard-linked snapshot of the last shares this file's inode with it. */
	put_file(f->br[1], "h", "h-shared", 0644);
	assert_int_equal(link(P(f, 1, "h"), P(f, 2, "h")), 0);
	fx_open(f);
	*state = f;
	return 0;
}

static int open_over(struct fx *f, unsigned flags, char *err, size_t errlen)
{
	return union_open("/union", f->branches, f->n, f->roles, flags, "fix -e", f->st, &f->ux,
			  err, errlen);
}

static void test_new_base(void **state)
{
	struct fx *f = *state;
	char v1[SNAP_MAX], v2[SNAP_MAX], now[SNAP_MAX], buf[64], err[1024] = "";
	uint64_t ia, ib, id, ix, ie, iold, ia2, in, ih;
	struct stat st;
	uint32_t n;
	bool eof;
	char **paths;
	int np;

	snap(f->br[1], v1);
	snap(f->br[2], v2);
	ia = W(f, "a");
	rd(f, ia, buf, sizeof(buf));
	assert_string_equal(buf, "a-v1");
	ib = W(f, "b");
	wr(f, ib, 0, "B-UP");           /* copies b up */
	id = W(f, "d");
	ix = W(f, "d/x");
	wr(f, ix, 0, "X-UP");           /* copies d and d/x up */
	ie = W(f, "e");
	assert_true(walk(f, "e/f") != 0);
	iold = W(f, "old");
	ih = W(f, "h");
	union_close(f->ux);
	f->ux = NULL;

	/* Another base without the flag: refused, naming both stacks. */
	f->branches[1] = f->br[2];
	assert_int_equal(open_over(f, 0, err, sizeof(err)), -EINVAL);
	assert_null(f->ux);
	assert_non_null(strstr(err, f->br[1]));
	assert_non_null(strstr(err, f->br[2]));

	/* With it: moved to v2. */
	err[0] = '\0';
	if (open_over(f, UNION_OPEN_NEW_BASE, err, sizeof(err)) < 0)
		fail_msg("union_open: %s", err);
	assert_int_equal(store_export_stack(f->st, "/union", true, &paths, &np), 0);
	assert_int_equal(np, 2);
	assert_string_equal(paths[0], f->br[0]);
	assert_string_equal(paths[1], f->br[1]);
	store_export_stack_free(paths, np);

	/* The old handle of a file of v1 is stale: never v2's file of that name. */
	assert_int_equal(union_getattr(f->ux, ia, &st), -ESTALE);
	assert_int_equal(union_read(f->ux, ia, 0, sizeof(buf) - 1, buf, &n, &eof, NULL), -ESTALE);
	assert_int_equal(union_getattr(f->ux, iold, &st), -ESTALE);
	gone(f, "old");
	/* Even where v2's copy is the very inode v1's was: the map forgot v1's files. */
	assert_int_equal(union_getattr(f->ux, ih, &st), -ESTALE);
	assert_true(W(f, "h") != ih);

	/* What was copied up keeps its ino and shows the upper's copy. */
	assert_int_equal(W(f, "b"), ib);
	rd(f, ib, buf, sizeof(buf));
	assert_string_equal(buf, "B-UP");
	assert_int_equal(W(f, "d"), id);
	assert_int_equal(W(f, "d/x"), ix);
	rd(f, ix, buf, sizeof(buf));
	assert_string_equal(buf, "X-UP");

	/* A directory of the base only keeps its ino and shows v2's entries. */
	assert_int_equal(union_getattr(f->ux, ie, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(W(f, "e"), ie);
	gone(f, "e/f");
	rd(f, W(f, "e/g"), buf, sizeof(buf));
	assert_string_equal(buf, "g-v2");

	/* a is v2's file, under a new ino; the old one stays stale. */
	ia2 = W(f, "a");
	assert_true(ia2 != ia);
	rd(f, ia2, buf, sizeof(buf));
	assert_string_equal(buf, "a-v2 is longer");
	assert_int_equal(union_getattr(f->ux, ia, &st), -ESTALE);
	in = W(f, "n");
	rd(f, in, buf, sizeof(buf));
	assert_string_equal(buf, "new in v2");

	/* Bound to v2 for good: a plain restart keeps every ino. */
	fx_restart(f);
	assert_int_equal(W(f, "b"), ib);
	assert_int_equal(W(f, "d/x"), ix);
	assert_int_equal(W(f, "e"), ie);
	assert_int_equal(W(f, "a"), ia2);
	assert_int_equal(W(f, "n"), in);
	assert_int_equal(union_getattr(f->ux, ia, &st), -ESTALE);

	/* Neither base was written. */
	snap(f->br[1], now);
	assert_string_equal(now, v1);
	snap(f->br[2], now);
	assert_string_equal(now, v2);
}

/* The same stack with the flag is a plain open; a changed upper is refused even with it. */
static void test_same_base_and_changed_upper(void **state)
{
	struct fx *f = *state;
	char err[1024] = "", other[PATH_MAX];
	uint64_t ia, ib;
	struct stat st;

	ia = W(f, "a");
	ib = W(f, "b");
	wr(f, ib, 0, "B-UP");
	union_close(f->ux);
	f->ux = NULL;
	if (open_over(f, UNION_OPEN_NEW_BASE, err, sizeof(err)) < 0)
		fail_msg("union_open: %s", err);
	assert_int_equal(W(f, "a"), ia);
	assert_int_equal(union_getattr(f->ux, ia, &st), 0);
	union_close(f->ux);
	f->ux = NULL;

	/* Another upper over v2: the writable branch differs, so no new base. */
	fx_path(f, other, f->base, "upper2");
	put_dir(f->base, "upper2", 0755);
	f->branches[0] = other;
	f->branches[1] = f->br[2];
	assert_int_equal(open_over(f, UNION_OPEN_NEW_BASE, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "writable"));
	assert_non_null(strstr(err, other));
	f->branches[0] = f->br[0];
	f->branches[1] = f->br[1];
	fx_restart(f);
	assert_int_equal(W(f, "a"), ia);
	assert_int_equal(W(f, "b"), ib);
}

/* Opened read-only, the upper is still the upper: its objects keep their inos. */
static void test_new_base_read_only(void **state)
{
	struct fx *f = *state;
	char err[1024] = "", buf[64];
	uint64_t ia, ib;
	struct stat st;

	ia = W(f, "a");
	ib = W(f, "b");
	wr(f, ib, 0, "B-UP");
	union_close(f->ux);
	f->ux = NULL;
	f->branches[1] = f->br[2];
	if (open_over(f, UNION_OPEN_RO | UNION_OPEN_NEW_BASE, err, sizeof(err)) < 0)
		fail_msg("union_open: %s", err);
	assert_int_equal(W(f, "b"), ib);
	rd(f, ib, buf, sizeof(buf));
	assert_string_equal(buf, "B-UP");
	assert_int_equal(union_getattr(f->ux, ia, &st), -ESTALE);
	rd(f, W(f, "a"), buf, sizeof(buf));
	assert_string_equal(buf, "a-v2 is longer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_new_base, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_same_base_and_changed_upper, setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_new_base_read_only, setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
