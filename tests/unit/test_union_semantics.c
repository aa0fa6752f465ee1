/*
 * Union semantics against real temporary branches (2 and 3 of them): whiteouts and opaque
 * directories in overlayfs and OCI formats in every branch, removal, creation over
 * whiteouts, renames in every layer combination, directory renames with redirects, hard
 * links across copy-up, branches changed by hand. Each case is checked again after the
 * union and the store are closed and reopened (a server restart).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cred.h"
#include "union_fixture.h"

static int setup2(void **state)
{
	if (geteuid() != 0)
		skip(); /* whiteouts and trusted.* xattrs need root */
	return fx_setup2(state);
}

static int setup3(void **state)
{
	if (geteuid() != 0)
		skip();
	return fx_setup3(state);
}

/* ---- building branches by hand ---- */

static void pwh(struct fx *f, int b, const char *rel)
{
	assert_int_equal(mknod(P(f, b, rel), S_IFCHR, makedev(0, 0)), 0);
}

static void pxattr(struct fx *f, int b, const char *rel, const char *attr, const char *val)
{
	assert_int_equal(lsetxattr(P(f, b, rel), attr, val, strlen(val), 0), 0);
}

static bool on_disk(struct fx *f, int b, const char *rel, struct stat *st)
{
	struct stat tmp;

	return lstat(P(f, b, rel), st ? st : &tmp) == 0;
}

static bool is_wh(struct fx *f, int b, const char *rel)
{
	struct stat st;

	return lstat(P(f, b, rel), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == 0;
}

static bool xattr_is(struct fx *f, int b, const char *rel, const char *attr, const char *val)
{
	char buf[PATH_MAX];
	ssize_t n = lgetxattr(P(f, b, rel), attr, buf, sizeof(buf) - 1);

	if (n < 0)
		return false;
	buf[n] = '\0';
	return !strcmp(buf, val);
}

/* Whether an upper directory holds any of our temporary names. */
static bool has_tmp(struct fx *f, const char *rel)
{
	DIR *d = opendir(P(f, 0, rel));
	struct dirent *de;
	bool found = false;

	assert_non_null(d);
	while ((de = readdir(d)))
		found |= !strncmp(de->d_name, ".wh..unionnfsd.", 15);
	closedir(d);
	return found;
}

/* Entries in an upper directory. */
static int count_dir(struct fx *f, const char *rel)
{
	DIR *d = opendir(P(f, 0, rel));
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* ---- through the union ---- */

static mode_t type_of(struct fx *f, uint64_t ino)
{
	struct stat st;

	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_ino, ino);
	return st.st_mode & S_IFMT;
}

static void expect_data(struct fx *f, const char *path, const char *data)
{
	char buf[256];

	rd(f, W(f, path), buf, sizeof(buf));
	assert_string_equal(buf, data);
}

struct names {
	int n;
	char v[64][64];
	uint64_t ino[64];
	mode_t type[64];
	bool attrs;
};

static int names_add(void *ctx, const struct union_dirent *de)
{
	struct names *l = ctx;

	if (!strcmp(de->ud_name, ".") || !strcmp(de->ud_name, ".."))
		return 0;
	assert_true(l->n < 64);
	snprintf(l->v[l->n], sizeof(l->v[0]), "%s", de->ud_name);
	l->ino[l->n] = de->ud_ino;
	l->type[l->n] = de->ud_type;
	if (de->ud_st)
		assert_int_equal(de->ud_st->st_ino, de->ud_ino);
	l->n++;
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * The listing of a directory as "a,b,c" (sorted), checked both ways (plain and with
 * attributes), each entry's fileid and type equal to a lookup's.
 */
static const char *ls(struct fx *f, const char *path)
{
	static char out[4096];
	struct names l = { 0 }, la = { 0 };
	uint64_t dir = W(f, path);
	bool eof;

	assert_int_equal(union_readdir(f->ux, dir, 0, false, names_add, &l, &eof), 0);
	assert_true(eof);
	assert_int_equal(union_readdir(f->ux, dir, 0, true, names_add, &la, &eof), 0);
	assert_int_equal(la.n, l.n);
	for (int i = 0; i < l.n; i++) {
		struct stat st;
		uint64_t ino;

		assert_int_equal(union_lookup(f->ux, dir, l.v[i], &ino, &st), 0);
		assert_int_equal(ino, l.ino[i]);
		assert_int_equal(ino, la.ino[i]);
		assert_int_equal(st.st_mode & S_IFMT, l.type[i]);
	}
	qsort(l.v, (size_t)l.n, sizeof(l.v[0]), names_cmp);
	out[0] = '\0';
	for (int i = 0; i < l.n; i++) {
		if (i)
			strcat(out, ",");
		strcat(out, l.v[i]);
	}
	return out;
}

static int rm(struct fx *f, const char *dirpath, const char *name)
{
	return union_remove(f->ux, W(f, dirpath), name, NULL, NULL);
}

static int rmd(struct fx *f, const char *dirpath, const char *name)
{
	return union_rmdir(f->ux, W(f, dirpath), name, NULL, NULL);
}

static int mv(struct fx *f, const char *fd, const char *fn, const char *td, const char *tn)
{
	return union_rename(f->ux, W(f, fd), fn, W(f, td), tn, NULL, NULL, NULL, NULL);
}

static nlink_t nlink_of(struct fx *f, uint64_t ino);
static void plink(struct fx *f, int b, const char *from, const char *to);

/* ---- 1. reading markers ---- */

/* Markers of both formats in all three branches, and what the union makes of them. */
static void build_markers(struct fx *f)
{
	/* lower: the oldest layer */
	put_file(f->br[2], "a", "lower a", 0644);
	put_file(f->br[2], "b", "lower b", 0644);
	put_file(f->br[2], "c", "lower c", 0644);
	put_file(f->br[2], "keep", "lower keep", 0644);
	put_dir(f->br[2], "d", 0755);
	put_file(f->br[2], "d/x", "", 0644);
	put_dir(f->br[2], "e", 0755);
	put_file(f->br[2], "e/z", "", 0644);
	put_file(f->br[2], "f", "lower file f", 0644);
	put_dir(f->br[2], "g", 0755);
	put_file(f->br[2], "g/k", "", 0644);
	put_dir(f->br[2], "w", 0755);
	put_file(f->br[2], "w/old", "", 0644);
	put_dir(f->br[2], "s", 0755);
	put_file(f->br[2], "s/deep", "", 0644);
	put_file(f->br[2], "s/both", "lower both", 0644);
	/* middle: overlayfs and OCI markers over the lower */
	pwh(f, 1, "a");
	put_file(f->br[1], ".wh.b", "", 0644);
	put_dir(f->br[1], "d", 0755);
	pxattr(f, 1, "d", "trusted.overlay.opaque", "y");
	put_file(f->br[1], "d/m", "", 0644);
	put_dir(f->br[1], "e", 0755);
	put_file(f->br[1], "e/.wh..wh..opq", "", 0644);
	put_file(f->br[1], "e/n", "", 0644);
	put_dir(f->br[1], "f", 0755);
	put_file(f->br[1], "f/q", "", 0644);
	put_file(f->br[1], "g", "middle file g", 0644);
	pwh(f, 1, "w");
	put_dir(f->br[1], "s", 0755);
	put_file(f->br[1], "s/.wh.deep", "", 0644);
	put_file(f->br[1], "s/both", "middle both", 0644);
	put_file(f->br[1], "s/.wh.both", "", 0644); /* hides only below: the middle's own stays */
	/* upper */
	put_file(f->br[0], "c", "", 0644);
	pxattr(f, 0, "c", "user.overlay.whiteout", "y");
	put_dir(f->br[0], "w", 0755);
	put_file(f->br[0], "w/new", "", 0644);
	put_file(f->br[0], "empty", "", 0644);
	pwh(f, 0, "ghost"); /* a whiteout hiding nothing is no file either */
}

static void check_markers(struct fx *f)
{
	gone(f, "a");
	gone(f, "b");
	gone(f, "c");
	gone(f, "ghost");
	gone(f, ".wh.b");
	expect_data(f, "keep", "lower keep");
	expect_data(f, "empty", "");
	assert_string_equal(ls(f, "/"), "d,e,empty,f,g,keep,s,w");
	/* An opaque directory hides the lower children, in both formats. */
	assert_string_equal(ls(f, "d"), "m");
	gone(f, "d/x");
	assert_string_equal(ls(f, "e"), "n");
	gone(f, "e/z");
	gone(f, "e/.wh..wh..opq");
	/* A directory shadows a file below, and a file a directory. */
	assert_int_equal(type_of(f, W(f, "f")), S_IFDIR);
	assert_string_equal(ls(f, "f"), "q");
	assert_int_equal(type_of(f, W(f, "g")), S_IFREG);
	expect_data(f, "g", "middle file g");
	/* A whiteout in the middle stops the merge of the directories around it. */
	assert_string_equal(ls(f, "w"), "new");
	gone(f, "w/old");
	assert_string_equal(ls(f, "s"), "both");
	expect_data(f, "s/both", "middle both");
}

static void test_read_markers(void **state)
{
	struct fx *f = *state;

	build_markers(f);
	fx_open(f);
	check_markers(f);
	fx_restart(f);
	check_markers(f);
}

static void test_marker_names(void **state)
{
	struct fx *f = *state;
	struct stat st;
	uint64_t ino, a;

	put_file(f->br[1], "lf", "x", 0644);
	fx_open(f);
	a = mk_file(f, W(f, "/"), "a");
	assert_int_equal(union_create(f->ux, 1, ".wh.a", UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -EACCES);
	assert_int_equal(union_create(f->ux, 1, ".wh..wh..opq", UNION_UNCHECKED, &no_sa, NULL, &ino,
				      &st, NULL, NULL), -EACCES);
	assert_int_equal(union_mkdir(f->ux, 1, ".wh.d", &no_sa, &ino, &st, NULL, NULL), -EACCES);
	assert_int_equal(union_symlink(f->ux, 1, ".wh.s", "t", &no_sa, &ino, &st, NULL, NULL),
			 -EACCES);
	assert_int_equal(union_mknod(f->ux, 1, ".wh.p", S_IFIFO, 0, &no_sa, &ino, &st, NULL,
				     NULL), -EACCES);
	assert_int_equal(union_link(f->ux, a, 1, ".wh.l", NULL, NULL, NULL), -EACCES);
	assert_int_equal(mv(f, "/", "a", "/", ".wh.lf"), -EACCES);
	/* A character device 0/0 is a whiteout on disk: clients may not make one. */
	assert_int_equal(union_mknod(f->ux, 1, "c", S_IFCHR, 0, &no_sa, &ino, &st, NULL, NULL),
			 -EPERM);
	assert_false(on_disk(f, 0, ".wh.a", NULL));
	assert_false(on_disk(f, 0, ".wh.lf", NULL));
	put_file(f->br[0], ".wh.zz", "", 0644);
	assert_int_equal(rm(f, "/", ".wh.zz"), -ENOENT);
	assert_int_equal(union_lookup(f->ux, 1, ".wh.zz", &ino, &st), -ENOENT);
	assert_string_equal(ls(f, "/"), "a,lf");
}

/* ---- 2. writing markers ---- */

static void test_remove(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t lo, bo;
	struct stat st;

	put_file(f->br[1], "lowonly", "low", 0644);
	put_file(f->br[1], "both", "lower", 0644);
	put_file(f->br[0], "both", "upper", 0644);
	put_file(f->br[0], "pure", "pure", 0644);
	put_dir(f->br[1], "ld", 0755);
	put_file(f->br[1], "ld/x", "", 0644);
	fx_open(f);
	lo = W(f, "lowonly");
	bo = W(f, "both");
	assert_int_equal(rm(f, "/", "lowonly"), 0);
	assert_int_equal(rm(f, "/", "both"), 0);
	assert_int_equal(rm(f, "/", "pure"), 0);
	assert_int_equal(rm(f, "/", "ld"), -EISDIR);
	assert_int_equal(rmd(f, "ld", "x"), -ENOTDIR);
	assert_int_equal(rm(f, "/", "lowonly"), -ENOENT);
	assert_int_equal(union_getattr(f->ux, lo, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, bo, &st), -ESTALE);
	for (int pass = 0; pass < 2; pass++) {
		gone(f, "lowonly");
		gone(f, "both");
		gone(f, "pure");
		assert_string_equal(ls(f, "/"), "ld");
		/* A whiteout where a lower has the name; nothing at all for a pure-upper one. */
		assert_true(is_wh(f, 0, "lowonly"));
		assert_true(is_wh(f, 0, "both"));
		assert_false(on_disk(f, 0, "pure", NULL));
		get_file(f->br[1], "lowonly", buf, sizeof(buf));
		assert_string_equal(buf, "low");
		assert_false(has_tmp(f, ""));
		fx_restart(f);
	}
	/* A lower name removed inside a lower-only directory: the directory comes up alone. */
	assert_int_equal(rm(f, "ld", "x"), 0);
	assert_true(is_wh(f, 0, "ld/x"));
	assert_string_equal(ls(f, "ld"), "");
}

static void test_rmdir(void **state)
{
	struct fx *f = *state;
	uint64_t d, ino;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/a", "", 0644);
	put_file(f->br[1], "d/b", "", 0644);
	put_dir(f->br[0], "d", 0755);
	put_file(f->br[0], "d/u", "", 0644);
	put_dir(f->br[1], "ld", 0755);
	put_dir(f->br[1], "ld/sub", 0755);
	put_file(f->br[1], "ld/sub/x", "", 0644);
	put_dir(f->br[0], "pd", 0755);
	pwh(f, 0, "pd/stray");
	put_dir(f->br[1], "t", 0755);
	put_dir(f->br[1], "t/x", 0755);
	put_dir(f->br[1], "t/x/y", 0755);
	put_file(f->br[1], "t/x/y/z", "", 0644);
	put_file(f->br[1], "t/x/f", "", 0644);
	fx_open(f);
	d = W(f, "d");
	assert_int_equal(rmd(f, "/", "d"), -ENOTEMPTY);
	assert_int_equal(rm(f, "d", "a"), 0);
	assert_int_equal(rmd(f, "/", "d"), -ENOTEMPTY);
	assert_int_equal(rm(f, "d", "b"), 0);
	assert_int_equal(rmd(f, "/", "d"), -ENOTEMPTY); /* an upper file is left */
	assert_int_equal(rm(f, "d", "u"), 0);
	/* Only whiteouts remain: the upper copy goes with them, a whiteout takes its place. */
	assert_int_equal(rmd(f, "/", "d"), 0);
	assert_true(is_wh(f, 0, "d"));
	assert_int_equal(union_getattr(f->ux, d, &(struct stat){ 0 }), -ESTALE);
	/* A lower-only directory with lower entries is not empty. */
	assert_int_equal(rmd(f, "/", "ld"), -ENOTEMPTY);
	assert_int_equal(rm(f, "ld/sub", "x"), 0);
	assert_int_equal(rmd(f, "ld", "sub"), 0);
	assert_int_equal(rmd(f, "/", "ld"), 0);
	assert_true(is_wh(f, 0, "ld"));
	/* A pure-upper directory holding a stray whiteout goes without leaving one. */
	assert_int_equal(rmd(f, "/", "pd"), 0);
	assert_false(on_disk(f, 0, "pd", NULL));
	/* rm -rf of a lower tree, bottom up. */
	assert_int_equal(rm(f, "t/x/y", "z"), 0);
	assert_int_equal(rmd(f, "t/x", "y"), 0);
	assert_int_equal(rm(f, "t/x", "f"), 0);
	assert_int_equal(rmd(f, "t", "x"), 0);
	assert_int_equal(rmd(f, "/", "t"), 0);
	assert_false(has_tmp(f, ""));
	for (int pass = 0; pass < 2; pass++) {
		assert_string_equal(ls(f, "/"), "");
		fx_restart(f);
	}
	/* mkdir where a lower directory was removed: a new, empty, opaque directory. */
	ino = mk_dir(f, W(f, "/"), "d");
	assert_true(ino != d);
	mk_dir(f, W(f, "/"), "ld");
	mk_dir(f, W(f, "/"), "t");
	for (int pass = 0; pass < 2; pass++) {
		assert_string_equal(ls(f, "d"), "");
		assert_string_equal(ls(f, "ld"), "");
		assert_string_equal(ls(f, "t"), "");
		gone(f, "d/a");
		gone(f, "t/x");
		assert_true(xattr_is(f, 0, "d", "trusted.overlay.opaque", "y"));
		assert_true(xattr_is(f, 0, "t", "trusted.overlay.opaque", "y"));
		assert_int_equal(W(f, "d"), ino);
		fx_restart(f);
	}
	/* ... and it is then an ordinary directory to remove again. */
	mk_file(f, W(f, "d"), "n");
	assert_int_equal(rmd(f, "/", "d"), -ENOTEMPTY);
	assert_int_equal(rm(f, "d", "n"), 0);
	assert_int_equal(rmd(f, "/", "d"), 0);
	assert_true(is_wh(f, 0, "d"));
	assert_int_equal(rmd(f, "/", "keep"), -ENOENT);
}

static void test_create_over_whiteout(void **state)
{
	uint8_t v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct fx *f = *state;
	uint64_t ino[8], x, e, e2;
	struct stat st;
	char buf[64];
	size_t len;

	for (int i = 1; i <= 7; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		put_file(f->br[1], name, "old lower data", 0644);
	}
	put_dir(f->br[1], "D", 0755);
	put_file(f->br[1], "D/c", "", 0644);
	put_dir(f->br[1], "E", 0755);
	put_file(f->br[1], "E/c", "", 0644);
	fx_open(f);
	for (int i = 1; i <= 7; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		ino[i] = W(f, name);
		assert_int_equal(rm(f, "/", name), 0);
	}
	assert_int_equal(rm(f, "D", "c"), 0);
	assert_int_equal(rmd(f, "/", "D"), 0);
	assert_int_equal(rm(f, "E", "c"), 0);
	assert_int_equal(rmd(f, "/", "E"), 0);
	x = mk_file(f, W(f, "/"), "x");
	wr(f, x, 0, "xdata");
	/* Each kind of object over a whiteout: the new object only. */
	assert_int_equal(union_create(f->ux, 1, "f1", UNION_GUARDED, &no_sa, NULL, &e, &st, NULL,
				      NULL), 0);
	assert_true(e != ino[1]);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(union_symlink(f->ux, 1, "f2", "target", &no_sa, &e, &st, NULL, NULL), 0);
	assert_int_equal(union_mknod(f->ux, 1, "f3", S_IFIFO, 0, &no_sa, &e, &st, NULL, NULL), 0);
	assert_int_equal(union_link(f->ux, x, 1, "f4", &st, NULL, NULL), 0);
	assert_int_equal(st.st_nlink, 2);
	mk_dir(f, W(f, "/"), "f5");
	assert_int_equal(union_create(f->ux, 1, "f6", UNION_EXCLUSIVE, NULL, v, &e, &st, NULL,
				      NULL), 0);
	assert_int_equal(union_create(f->ux, 1, "f6", UNION_EXCLUSIVE, NULL, v, &e2, &st, NULL,
				      NULL), 0);
	assert_int_equal(e2, e);
	assert_int_equal(union_create(f->ux, 1, "f7", UNION_UNCHECKED, &no_sa, NULL, &e, &st, NULL,
				      NULL), 0);
	mk_file(f, W(f, "/"), "D");
	mk_dir(f, W(f, "/"), "E");
	assert_false(has_tmp(f, ""));
	for (int pass = 0; pass < 2; pass++) {
		expect_data(f, "f1", "");
		assert_int_equal(union_readlink(f->ux, W(f, "f2"), buf, sizeof(buf), &len, NULL), 0);
		assert_string_equal(buf, "target");
		assert_int_equal(type_of(f, W(f, "f3")), S_IFIFO);
		assert_int_equal(W(f, "f4"), x);
		expect_data(f, "f4", "xdata");
		assert_string_equal(ls(f, "f5"), "");
		assert_true(xattr_is(f, 0, "f5", "trusted.overlay.opaque", "y"));
		expect_data(f, "f7", "");
		assert_int_equal(type_of(f, W(f, "D")), S_IFREG);
		assert_string_equal(ls(f, "E"), "");
		assert_string_equal(ls(f, "/"), "D,E,f1,f2,f3,f4,f5,f6,f7,x");
		fx_restart(f);
	}
	/* Without a whiteout, mkdir over a name only a lower has never happens (EEXIST). */
	assert_int_equal(union_mkdir(f->ux, 1, "f1", &no_sa, &e, &st, NULL, NULL), -EEXIST);
}

/* ---- renames of files ---- */

static void test_rename_files(void **state)
{
	struct fx *f = *state;
	uint64_t lo1, both, pu, pu2, lt, la, lb, x, w;
	struct stat st;

	put_file(f->br[1], "lo1", "lo1 data", 0644);
	put_file(f->br[1], "both", "both lower", 0644);
	put_file(f->br[0], "both", "both upper", 0644);
	put_file(f->br[0], "pu", "pu data", 0644);
	put_file(f->br[0], "pu2", "pu2 data", 0644);
	put_file(f->br[1], "lt", "lt lower", 0644);
	put_file(f->br[1], "la", "la data", 0644);
	put_file(f->br[1], "lb", "lb data", 0644);
	put_file(f->br[0], "x", "x data", 0644);
	put_file(f->br[1], "w", "w lower", 0644);
	put_dir(f->br[1], "ldir", 0755);
	put_file(f->br[1], "ldir/old", "", 0644);
	put_dir(f->br[1], "ldir2", 0755);
	fx_open(f);
	lo1 = W(f, "lo1");
	both = W(f, "both");
	pu = W(f, "pu");
	pu2 = W(f, "pu2");
	lt = W(f, "lt");
	la = W(f, "la");
	lb = W(f, "lb");
	x = W(f, "x");
	w = W(f, "w");
	assert_int_equal(mv(f, "/", "lo1", "/", "n1"), 0);          /* lower only */
	assert_int_equal(mv(f, "/", "both", "/", "n2"), 0);         /* upper over lower */
	assert_int_equal(mv(f, "/", "pu", "/", "n3"), 0);           /* upper only */
	assert_int_equal(mv(f, "/", "pu2", "/", "lt"), 0);          /* over a lower file */
	assert_int_equal(mv(f, "/", "la", "/", "lb"), 0);           /* lower over lower */
	assert_int_equal(mv(f, "/", "x", "ldir", "x"), 0);          /* into a lower dir */
	assert_int_equal(rm(f, "/", "w"), 0);
	assert_int_equal(mv(f, "/", "n3", "/", "w"), 0);            /* over a whiteout */
	assert_int_equal(mv(f, "/", "n1", "/", "n1"), 0);           /* over itself */
	assert_int_equal(mv(f, "/", "n2", "ldir2", "n2"), 0);       /* and back, via a lower dir */
	assert_int_equal(mv(f, "ldir2", "n2", "/", "both"), 0);
	assert_int_equal(mv(f, "/", "n1", "/", "ldir"), -EISDIR);
	assert_int_equal(mv(f, "/", "nope", "/", "zz"), -ENOENT);
	assert_int_equal(union_getattr(f->ux, lt, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, lb, &st), -ESTALE);
	assert_false(has_tmp(f, ""));
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "n1"), lo1);
		expect_data(f, "n1", "lo1 data");
		assert_int_equal(W(f, "both"), both);
		expect_data(f, "both", "both upper");
		assert_int_equal(W(f, "w"), pu);
		expect_data(f, "w", "pu data");
		assert_int_equal(W(f, "lt"), pu2);
		expect_data(f, "lt", "pu2 data");
		assert_int_equal(W(f, "lb"), la);
		expect_data(f, "lb", "la data");
		assert_int_equal(W(f, "ldir/x"), x);
		expect_data(f, "ldir/x", "x data");
		assert_string_equal(ls(f, "/"), "both,lb,ldir,ldir2,lt,n1,w");
		assert_string_equal(ls(f, "ldir"), "old,x");
		assert_string_equal(ls(f, "ldir2"), "");
		/* Whiteouts where lower names were left; none for a pure-upper one. */
		assert_true(is_wh(f, 0, "lo1"));
		assert_true(is_wh(f, 0, "la"));
		assert_false(on_disk(f, 0, "pu", NULL));
		assert_false(on_disk(f, 0, "n2", NULL));
		assert_int_equal(union_getattr(f->ux, w, &st), -ESTALE);
		fx_restart(f);
	}
}

/* ---- 3. directory renames with redirects ---- */

static void test_rename_dirs(void **state)
{
	struct fx *f = *state;
	uint64_t A, f1, sub, g, B, bl, bu, E;
	struct stat st;
	char buf[64];

	put_dir(f->br[1], "A", 0755);
	put_file(f->br[1], "A/f1", "f1 data", 0644);
	put_dir(f->br[1], "A/sub", 0755);
	put_file(f->br[1], "A/sub/g", "g data", 0644);
	put_dir(f->br[1], "B", 0755);
	put_file(f->br[1], "B/l", "l", 0644);
	put_dir(f->br[0], "B", 0755);
	put_file(f->br[0], "B/u", "u", 0644);
	put_dir(f->br[1], "full", 0755);
	put_file(f->br[1], "full/x", "", 0644);
	fx_open(f);
	A = W(f, "A");
	f1 = W(f, "A/f1");
	sub = W(f, "A/sub");
	g = W(f, "A/sub/g");
	B = W(f, "B");
	bl = W(f, "B/l");
	bu = W(f, "B/u");
	/* A lower directory: only the directory is copied, with a redirect. */
	assert_int_equal(mv(f, "/", "A", "/", "C"), 0);
	assert_true(is_wh(f, 0, "A"));
	assert_true(xattr_is(f, 0, "C", "trusted.overlay.redirect", "/A"));
	assert_false(on_disk(f, 0, "C/f1", NULL));
	assert_false(on_disk(f, 0, "C/sub", NULL));
	/* A merged directory into a new one. */
	mk_dir(f, W(f, "/"), "D");
	assert_int_equal(mv(f, "/", "B", "D", "B2"), 0);
	assert_true(xattr_is(f, 0, "D/B2", "trusted.overlay.redirect", "/B"));
	/* A child of a renamed directory: its redirect names its lower place, not the union's. */
	assert_int_equal(mv(f, "C", "sub", "/", "E"), 0);
	assert_true(xattr_is(f, 0, "E", "trusted.overlay.redirect", "/A/sub"));
	E = sub;
	/* Renaming a redirected directory again keeps the redirect. */
	assert_int_equal(mv(f, "/", "C", "/", "F"), 0);
	assert_true(xattr_is(f, 0, "F", "trusted.overlay.redirect", "/A"));
	/* The old name is free for a new, empty directory. */
	mk_dir(f, W(f, "/"), "A");
	/* Errors leave everything as it was. */
	assert_int_equal(mv(f, "/", "F", "/", "full"), -ENOTEMPTY);
	assert_int_equal(mv(f, "/", "F", "F", "inside"), -EINVAL);
	assert_int_equal(mv(f, "/", "E", "F", "f1"), -ENOTDIR);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "F"), A);
		assert_int_equal(W(f, "F/f1"), f1);
		assert_int_equal(W(f, "E"), E);
		assert_int_equal(W(f, "E/g"), g);
		assert_int_equal(W(f, "D/B2"), B);
		assert_int_equal(W(f, "D/B2/l"), bl);
		assert_int_equal(W(f, "D/B2/u"), bu);
		assert_int_equal(walk(f, "E/.."), STORE_ROOT_INO);
		expect_data(f, "F/f1", "f1 data");
		expect_data(f, "E/g", "g data");
		assert_string_equal(ls(f, "/"), "A,D,E,F,full");
		assert_string_equal(ls(f, "F"), "f1");
		assert_string_equal(ls(f, "E"), "g");
		assert_string_equal(ls(f, "D/B2"), "l,u");
		assert_string_equal(ls(f, "A"), "");
		assert_string_equal(ls(f, "full"), "x");
		gone(f, "C");
		gone(f, "B");
		assert_int_equal(union_getattr(f->ux, sub, &st), 0);
		fx_restart(f);
	}
	/* Writing through the renamed directory copies the file up there, ino kept. */
	wr(f, f1, 0, "F1");
	fx_restart(f);
	assert_int_equal(W(f, "F/f1"), f1);
	expect_data(f, "F/f1", "F1 data");
	get_file(f->br[0], "F/f1", buf, sizeof(buf));
	assert_string_equal(buf, "F1 data");
	get_file(f->br[1], "A/f1", buf, sizeof(buf));
	assert_string_equal(buf, "f1 data");
	/* A pure-upper directory over an empty lower one becomes opaque. */
	put_dir(f->br[1], "elow", 0755);
	mk_dir(f, W(f, "/"), "nd");
	mk_file(f, W(f, "nd"), "inside");
	assert_int_equal(mv(f, "/", "nd", "/", "elow"), 0);
	assert_true(xattr_is(f, 0, "elow", "trusted.overlay.opaque", "y"));
	assert_string_equal(ls(f, "elow"), "inside");
}

/* Directories moved onto names that whiteouts or whiteout-only directories hold. */
static void test_rename_dir_targets(void **state)
{
	struct fx *f = *state;
	uint64_t y, p, q;

	put_dir(f->br[1], "X", 0755);
	put_file(f->br[1], "X/oldx", "", 0644);
	put_dir(f->br[1], "Y", 0755);
	put_file(f->br[1], "Y/y", "y", 0644);
	put_dir(f->br[1], "D", 0755);
	put_file(f->br[1], "D/a", "", 0644);
	put_dir(f->br[1], "E", 0755);
	put_file(f->br[1], "E/e", "", 0644);
	fx_open(f);
	/* A lower directory over the whiteout of a removed lower directory. */
	assert_int_equal(rm(f, "X", "oldx"), 0);
	assert_int_equal(rmd(f, "/", "X"), 0);
	y = W(f, "Y");
	assert_int_equal(mv(f, "/", "Y", "/", "X"), 0);
	/* A pure-upper directory over one holding only whiteouts. */
	assert_int_equal(rm(f, "D", "a"), 0);
	p = mk_dir(f, W(f, "/"), "P");
	mk_file(f, W(f, "P"), "pf");
	assert_int_equal(mv(f, "/", "P", "/", "D"), 0);
	/* A pure-upper directory over a whiteout, where nothing else needs one. */
	assert_int_equal(rm(f, "E", "e"), 0);
	assert_int_equal(rmd(f, "/", "E"), 0);
	q = mk_dir(f, W(f, "/"), "Q");
	assert_int_equal(mv(f, "/", "Q", "/", "E"), 0);
	assert_false(has_tmp(f, ""));
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "X"), y);
		assert_string_equal(ls(f, "X"), "y");
		expect_data(f, "X/y", "y");
		gone(f, "Y");
		assert_true(is_wh(f, 0, "Y"));
		assert_int_equal(W(f, "D"), p);
		assert_string_equal(ls(f, "D"), "pf");
		assert_int_equal(W(f, "E"), q);
		assert_string_equal(ls(f, "E"), "");
		assert_false(on_disk(f, 0, "Q", NULL));
		assert_false(on_disk(f, 0, "P", NULL));
		assert_string_equal(ls(f, "/"), "D,E,X");
		fx_restart(f);
	}
}

/* Cycles of renames over lower files, a hard-linked pair among them. */
static void test_rename_cycles(void **state)
{
	struct fx *f = *state;
	uint64_t a, b, c, h;

	put_file(f->br[1], "a", "A", 0644);
	put_file(f->br[1], "b", "B", 0644);
	put_file(f->br[1], "c", "C", 0644);
	put_file(f->br[1], "h", "H", 0644);
	plink(f, 1, "h", "h2");
	fx_open(f);
	a = W(f, "a");
	b = W(f, "b");
	c = W(f, "c");
	h = W(f, "h");
	for (int round = 0; round < 3; round++) {
		assert_int_equal(mv(f, "/", "a", "/", "t"), 0);
		assert_int_equal(mv(f, "/", "b", "/", "a"), 0);
		assert_int_equal(mv(f, "/", "c", "/", "b"), 0);
		assert_int_equal(mv(f, "/", "t", "/", "c"), 0);
		assert_int_equal(mv(f, "/", "h", "/", "hx"), 0);
		assert_int_equal(mv(f, "/", "hx", "/", "h"), 0);
		fx_restart(f);
		/* After each round the contents moved one name back. */
		uint64_t want[3][3] = { { b, c, a }, { c, a, b }, { a, b, c } };
		const char *data[3][3] = { { "B", "C", "A" }, { "C", "A", "B" }, { "A", "B", "C" } };

		assert_int_equal(W(f, "a"), want[round][0]);
		assert_int_equal(W(f, "b"), want[round][1]);
		assert_int_equal(W(f, "c"), want[round][2]);
		expect_data(f, "a", data[round][0]);
		expect_data(f, "b", data[round][1]);
		expect_data(f, "c", data[round][2]);
		assert_int_equal(W(f, "h"), h);
		assert_int_equal(W(f, "h2"), h);
		assert_int_equal(nlink_of(f, h), 2);
		assert_string_equal(ls(f, "/"), "a,b,c,h,h2");
	}
}

/* Directories merged over three branches keep every layer's entries through a rename. */
static void test_rename_dir_three(void **state)
{
	struct fx *f = *state;
	uint64_t a, m, l;

	put_dir(f->br[1], "A", 0755);
	put_file(f->br[1], "A/m", "m", 0644);
	put_dir(f->br[2], "A", 0755);
	put_file(f->br[2], "A/l", "l", 0644);
	put_file(f->br[2], "A/hid", "", 0644);
	put_file(f->br[1], "A/.wh.hid", "", 0644);
	fx_open(f);
	a = W(f, "A");
	m = W(f, "A/m");
	l = W(f, "A/l");
	assert_string_equal(ls(f, "A"), "l,m");
	assert_int_equal(mv(f, "/", "A", "/", "Z"), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "Z"), a);
		assert_int_equal(W(f, "Z/m"), m);
		assert_int_equal(W(f, "Z/l"), l);
		assert_string_equal(ls(f, "Z"), "l,m");
		assert_string_equal(ls(f, "/"), "Z");
		fx_restart(f);
	}
}

/* ---- OCI image layers as lowers ---- */

static void test_oci_layers(void **state)
{
	struct fx *f = *state;
	uint64_t keep;

	/* The older layer. */
	put_file(f->br[2], "gone", "", 0644);
	put_dir(f->br[2], "dir", 0755);
	put_file(f->br[2], "dir/old", "", 0644);
	put_file(f->br[2], "keep", "keep", 0644);
	put_dir(f->br[2], "sub", 0755);
	put_file(f->br[2], "sub/a", "", 0644);
	put_file(f->br[2], "sub/b", "", 0644);
	put_dir(f->br[2], "same", 0755);
	put_file(f->br[2], "same/lowest", "", 0644);
	/* The newer layer, as an image unpacks it. */
	put_file(f->br[1], ".wh.gone", "", 0644);
	put_dir(f->br[1], "dir", 0755);
	put_file(f->br[1], "dir/.wh..wh..opq", "", 0644);
	put_file(f->br[1], "dir/new", "", 0644);
	put_dir(f->br[1], "sub", 0755);
	put_file(f->br[1], "sub/.wh.a", "", 0644);
	put_dir(f->br[1], "same", 0755);
	put_file(f->br[1], "same/mine", "", 0644);
	put_file(f->br[1], ".wh.same", "", 0644); /* replaced in this layer: its own copy shows, alone */
	fx_open(f);
	for (int pass = 0; pass < 2; pass++) {
		gone(f, "gone");
		assert_string_equal(ls(f, "/"), "dir,keep,same,sub");
		assert_string_equal(ls(f, "dir"), "new");
		assert_string_equal(ls(f, "sub"), "b");
		assert_string_equal(ls(f, "same"), "mine");
		gone(f, "dir/.wh..wh..opq");
		gone(f, "sub/.wh.a");
		fx_restart(f);
	}
	/* Changes through the union go to the upper in overlayfs format. */
	keep = W(f, "keep");
	assert_int_equal(rm(f, "sub", "b"), 0);
	assert_true(is_wh(f, 0, "sub/b"));
	assert_int_equal(rmd(f, "/", "sub"), 0);
	assert_int_equal(mv(f, "/", "keep", "dir", "kept"), 0);
	fx_restart(f);
	assert_string_equal(ls(f, "/"), "dir,same");
	assert_int_equal(W(f, "dir/kept"), keep);
	expect_data(f, "dir/kept", "keep");
}

/* A whiteout in a middle branch (as after rotating an upper down) hides everything below. */
static void test_middle_whiteout(void **state)
{
	struct fx *f = *state;
	uint64_t ino;

	put_file(f->br[2], "f", "lowest", 0644);
	pwh(f, 1, "f");
	put_file(f->br[2], "g", "lowest", 0644);
	put_file(f->br[1], ".wh.g", "", 0644);
	put_dir(f->br[2], "m", 0755);
	put_file(f->br[2], "m/old", "", 0644);
	pwh(f, 1, "m");
	put_dir(f->br[0], "m", 0755);
	put_file(f->br[0], "m/new", "", 0644);
	fx_open(f);
	gone(f, "f");
	gone(f, "g");
	assert_string_equal(ls(f, "m"), "new");
	/* Made again through the union: the new object only, here to stay. */
	ino = mk_file(f, W(f, "/"), "f");
	mk_dir(f, W(f, "/"), "g");
	assert_int_equal(rm(f, "m", "new"), 0);
	assert_int_equal(rmd(f, "/", "m"), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "f"), ino);
		expect_data(f, "f", "");
		assert_string_equal(ls(f, "g"), "");
		gone(f, "m");
		assert_string_equal(ls(f, "/"), "f,g");
		fx_restart(f);
	}
	/* No whiteout was needed for m in the upper: the middle one hides the lowest. */
	assert_false(on_disk(f, 0, "m", NULL));
}

/* ---- 4. hard links across copy-up ---- */

static nlink_t nlink_of(struct fx *f, uint64_t ino)
{
	struct stat st;

	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	return st.st_nlink;
}

static void plink(struct fx *f, int b, const char *from, const char *to)
{
	char p1[PATH_MAX];

	snprintf(p1, sizeof(p1), "%s", P(f, b, from));
	assert_int_equal(link(p1, P(f, b, to)), 0);
}

static bool same_inode(struct fx *f, int b, const char *x, const char *y)
{
	struct stat a, c;

	return lstat(P(f, b, x), &a) == 0 && lstat(P(f, b, y), &c) == 0 && a.st_ino == c.st_ino;
}

/* Write through one name of a lower file with three: every name shows it, always. */
static void test_hardlink_write(void **state)
{
	struct fx *f = *state;
	struct stat st;
	uint64_t ino;

	put_file(f->br[1], "foo", "old data", 0644);
	put_dir(f->br[1], "d", 0755);
	put_dir(f->br[1], "e", 0755);
	plink(f, 1, "foo", "d/bar");
	plink(f, 1, "foo", "e/baz");
	fx_open(f);
	ino = W(f, "foo");
	assert_int_equal(W(f, "d/bar"), ino);
	assert_int_equal(nlink_of(f, ino), 3);
	wr(f, ino, 0, "NEW");
	assert_int_equal(nlink_of(f, ino), 3);
	expect_data(f, "foo", "NEW data");
	/* The other names see the new data before they are even looked up again. */
	fx_restart(f);
	assert_int_equal(nlink_of(f, ino), 3);
	assert_int_equal(W(f, "d/bar"), ino);
	expect_data(f, "d/bar", "NEW data");
	assert_true(same_inode(f, 0, "foo", "d/bar"));
	assert_int_equal(union_lookup(f->ux, W(f, "d"), "bar", &ino, &st), 0);
	assert_int_equal(st.st_nlink, 3);
	assert_int_equal(st.st_size, 8);
	fx_restart(f);
	assert_int_equal(W(f, "e/baz"), ino);
	expect_data(f, "e/baz", "NEW data");
	assert_int_equal(nlink_of(f, ino), 3);
	assert_true(same_inode(f, 0, "foo", "e/baz"));
	/* Listings with attributes agree. */
	assert_string_equal(ls(f, "e"), "baz");
	fx_restart(f);
	assert_int_equal(nlink_of(f, ino), 3);
	expect_data(f, "foo", "NEW data");
}

/* chmod through one name; then a name removed, renamed, linked, before and after restarts. */
static void test_hardlink_names(void **state)
{
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0600 };
	struct fx *f = *state;
	uint64_t x, p, r, s;
	struct stat st;

	put_file(f->br[1], "x", "x", 0644);
	plink(f, 1, "x", "y");
	put_file(f->br[1], "p", "p data", 0644);
	plink(f, 1, "p", "q");
	put_file(f->br[1], "r1", "r", 0644);
	plink(f, 1, "r1", "r2");
	put_file(f->br[1], "s1", "s", 0644);
	plink(f, 1, "s1", "s2");
	fx_open(f);
	x = W(f, "x");
	assert_int_equal(union_setattr(f->ux, W(f, "y"), &sa, NULL, NULL, &st), 0);
	assert_int_equal(st.st_ino, x);
	p = W(f, "p");
	assert_int_equal(rm(f, "/", "q"), 0);
	r = W(f, "r1");
	assert_int_equal(mv(f, "/", "r1", "/", "r3"), 0);
	s = W(f, "s1");
	assert_int_equal(union_link(f->ux, s, 1, "s3", &st, NULL, NULL), 0);
	assert_int_equal(st.st_nlink, 3);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(W(f, "x"), x);
		assert_int_equal(type_of(f, x), S_IFREG);
		assert_int_equal(union_getattr(f->ux, x, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		assert_int_equal(st.st_nlink, 2);
		assert_int_equal(W(f, "p"), p);
		assert_int_equal(nlink_of(f, p), 1);
		expect_data(f, "p", "p data");
		gone(f, "q");
		assert_int_equal(W(f, "r3"), r);
		assert_int_equal(W(f, "r2"), r);
		assert_int_equal(nlink_of(f, r), 2);
		gone(f, "r1");
		assert_int_equal(W(f, "s3"), s);
		assert_int_equal(W(f, "s2"), s);
		assert_int_equal(nlink_of(f, s), 3);
		fx_restart(f);
	}
	/* The last name goes: so does the object, and its index entry. */
	assert_int_equal(count_dir(f, ".unionnfsd.work/index"), 4);
	assert_int_equal(rm(f, "/", "p"), 0);
	assert_int_equal(union_getattr(f->ux, p, &st), -ESTALE);
	assert_int_equal(count_dir(f, ".unionnfsd.work/index"), 3);
	fx_restart(f);
	gone(f, "p");
	assert_string_equal(ls(f, "/"), "r2,r3,s1,s2,s3,x,y");
}

/* Every upper name removed while a lower name still waits: the object lives on. */
static void test_hardlink_waiting(void **state)
{
	struct fx *f = *state;
	uint64_t t;

	put_file(f->br[1], "t1", "old", 0644);
	put_dir(f->br[1], "far", 0755);
	plink(f, 1, "t1", "far/t2");
	fx_open(f);
	t = W(f, "t1");
	wr(f, t, 0, "new");
	assert_int_equal(rm(f, "/", "t1"), 0);
	assert_int_equal(nlink_of(f, t), 1);
	fx_restart(f);
	assert_int_equal(nlink_of(f, t), 1);
	assert_int_equal(W(f, "far/t2"), t);
	expect_data(f, "far/t2", "new");
	assert_int_equal(nlink_of(f, t), 1);
	gone(f, "t1");
	assert_int_equal(rm(f, "far", "t2"), 0);
	assert_int_equal(union_getattr(f->ux, t, &(struct stat){ 0 }), -ESTALE);
}

/* Concurrent first writes and lookups through several names: one copy, all data in it. */
struct racer {
	struct fx *rc_fx;
	uint64_t rc_ino;
	int rc_id;
	int rc_err;
};

static void *race_run(void *arg)
{
	struct racer *rc = arg;
	char name[16], data[2] = { (char)('A' + rc->rc_id), 0 };
	enum union_stable c;
	uint64_t ino;
	struct stat st;
	uint32_t n;

	snprintf(name, sizeof(name), "h%d", rc->rc_id);
	if (union_lookup(rc->rc_fx->ux, 1, name, &ino, &st) < 0 || ino != rc->rc_ino)
		rc->rc_err++;
	if (union_write(rc->rc_fx->ux, rc->rc_ino, (uint64_t)rc->rc_id, 1, data, UNION_UNSTABLE,
			&n, &c, NULL, NULL) < 0 || n != 1)
		rc->rc_err++;
	if (union_lookup(rc->rc_fx->ux, 1, name, &ino, &st) < 0 || ino != rc->rc_ino)
		rc->rc_err++;
	return NULL;
}

static void test_hardlink_race(void **state)
{
	struct fx *f = *state;
	struct racer rc[4];
	pthread_t th[4];
	uint64_t ino;

	put_file(f->br[1], "h0", "....", 0644);
	for (int i = 1; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "h%d", i);
		plink(f, 1, "h0", name);
	}
	fx_open(f);
	ino = W(f, "h0");
	for (int i = 0; i < 4; i++) {
		rc[i] = (struct racer){ .rc_fx = f, .rc_ino = ino, .rc_id = i };
		assert_int_equal(pthread_create(&th[i], NULL, race_run, &rc[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(rc[i].rc_err, 0);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 4; i++) {
			char name[16];

			snprintf(name, sizeof(name), "h%d", i);
			assert_int_equal(W(f, name), ino);
			expect_data(f, name, "ABCD");
		}
		assert_int_equal(nlink_of(f, ino), 4);
		assert_int_equal(count_dir(f, ".unionnfsd.work"), 1); /* only the index */
		fx_restart(f);
	}
}

/* ---- with a client's identity ---- */

static void as_user(uid_t uid)
{
	struct cred cr = { .cr_uid = uid, .cr_gid = uid };

	assert_int_equal(cred_apply(&cr), 0);
}

static void pown(struct fx *f, int b, const char *rel, uid_t uid, mode_t mode)
{
	assert_int_equal(lchown(P(f, b, rel), uid, uid), 0);
	assert_int_equal(chmod(P(f, b, rel), mode), 0);
}

/* The kernel checks the client for every change; refused ones copy nothing up. */
static void test_as_client(void **state)
{
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0600 };
	struct fx *f = *state;
	struct stat st;
	uint64_t ino;

	pown(f, 0, "", 1000, 0755);
	pown(f, 1, "", 1000, 0755);
	put_file(f->br[1], "mine", "m", 0644);
	pown(f, 1, "mine", 1000, 0644);
	put_dir(f->br[1], "d", 0755);
	pown(f, 1, "d", 1000, 0755);
	put_file(f->br[1], "d/f", "f", 0644);
	put_dir(f->br[1], "ro", 0755);
	put_file(f->br[1], "ro/x", "x", 0644);
	put_dir(f->br[1], "tmp", 0755);
	pown(f, 1, "tmp", 0, 01777);
	put_file(f->br[1], "tmp/other", "o", 0644);
	pown(f, 1, "tmp/other", 2000, 0666);
	put_file(f->br[1], "tmp/own", "o", 0644);
	pown(f, 1, "tmp/own", 1000, 0644);
	put_file(f->br[1], "hl1", "old", 0644);
	pown(f, 1, "hl1", 1000, 0600);
	put_dir(f->br[1], "far", 0755);
	plink(f, 1, "hl1", "far/hl2");
	fx_open(f);
	as_user(1000);
	/* Hard links: a copy reached through the index, linked up later, as the client. */
	ino = W(f, "hl1");
	wr(f, ino, 0, "new");
	assert_int_equal(rm(f, "/", "hl1"), 0);
	{
		char buf[16];

		rd(f, ino, buf, sizeof(buf));
		assert_string_equal(buf, "new");
	}
	expect_data(f, "far/hl2", "new");
	assert_int_equal(W(f, "far/hl2"), ino);
	assert_int_equal(rm(f, "/", "mine"), 0);
	assert_int_equal(mv(f, "/", "d", "/", "d2"), 0);
	assert_int_equal(rm(f, "ro", "x"), -EACCES);
	assert_int_equal(union_create(f->ux, W(f, "ro"), "n", UNION_GUARDED, &no_sa, NULL, &ino,
				      &st, NULL, NULL), -EACCES);
	assert_int_equal(union_setattr(f->ux, W(f, "ro/x"), &sa, NULL, NULL, NULL), -EPERM);
	assert_int_equal(rm(f, "tmp", "other"), -EPERM);
	assert_int_equal(mv(f, "tmp", "other", "tmp", "o2"), -EPERM);
	assert_int_equal(rm(f, "tmp", "own"), 0);
	mk_dir(f, W(f, "/"), "mine");
	assert_int_equal(rmd(f, "/", "d2"), -ENOTEMPTY);
	cred_restore();
	assert_false(on_disk(f, 0, "ro", NULL));
	assert_false(on_disk(f, 0, "tmp/other", NULL));
	assert_true(is_wh(f, 0, "tmp/own"));
	assert_true(on_disk(f, 0, "mine", &st));
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, 1000);
	assert_true(xattr_is(f, 0, "mine", "trusted.overlay.opaque", "y"));
	assert_true(xattr_is(f, 0, "d2", "trusted.overlay.redirect", "/d"));
	assert_true(on_disk(f, 0, "d2", &st));
	assert_int_equal(st.st_uid, 1000);
	fx_restart(f);
	expect_data(f, "d2/f", "f");
	assert_string_equal(ls(f, "/"), "d2,far,mine,ro,tmp");
	assert_string_equal(ls(f, "tmp"), "other");
}

/* ---- copy-up details ---- */

static void test_copy_up_xattrs(void **state)
{
	struct fx *f = *state;
	char buf[64];
	uint64_t a, d;

	put_file(f->br[1], "a", "a", 0644);
	pxattr(f, 1, "a", "user.note", "kept");
	pxattr(f, 1, "a", "trusted.overlay.origin", "theirs");
	put_dir(f->br[1], "d", 0755);
	pxattr(f, 1, "d", "user.dirnote", "kept too");
	pxattr(f, 1, "d", "trusted.overlay.redirect", "/elsewhere");
	fx_open(f);
	a = W(f, "a");
	d = W(f, "d");
	wr(f, a, 0, "A");
	mk_file(f, W(f, "d"), "new");
	assert_true(xattr_is(f, 0, "a", "user.note", "kept"));
	assert_false(xattr_is(f, 0, "a", "trusted.overlay.origin", "theirs"));
	assert_true(xattr_is(f, 0, "d", "user.dirnote", "kept too"));
	assert_false(xattr_is(f, 0, "d", "trusted.overlay.redirect", "/elsewhere"));
	get_file(f->br[1], "a", buf, sizeof(buf));
	assert_string_equal(buf, "a");
	assert_int_equal(W(f, "d"), d);
	assert_string_equal(ls(f, "d"), "new");
}

/* ---- 5. lower branches changed by hand while serving ---- */

static void test_lower_changed(void **state)
{
	struct fx *f = *state;
	uint64_t a, d, x, r, r2;
	struct stat st;
	char buf[32];
	uint32_t n;
	bool eof;

	put_file(f->br[1], "a", "a", 0644);
	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/x", "x", 0644);
	put_file(f->br[1], "r", "first", 0644);
	put_file(f->br[1], "m", "before", 0644);
	f->clock = fx_clock_now;
	fx_open(f);
	a = W(f, "a");
	d = W(f, "d");
	x = W(f, "d/x");
	r = W(f, "r");
	assert_string_equal(ls(f, "/"), "a,d,m,r");
	put_file(f->br[1], "new", "n", 0644);
	assert_string_equal(ls(f, "/"), "a,d,m,new,r");
	assert_int_equal(unlink(P(f, 1, "a")), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	assert_int_equal(union_read(f->ux, a, 0, 10, buf, &n, &eof, NULL), -ESTALE);
	gone(f, "a");
	assert_int_equal(unlink(P(f, 1, "d/x")), 0);
	assert_int_equal(rmdir(P(f, 1, "d")), 0);
	assert_int_equal(union_getattr(f->ux, x, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, d, &st), -ESTALE);
	gone(f, "d");
	/* Replaced by another file: the old handle is stale, the name a new object. */
	assert_int_equal(unlink(P(f, 1, "r")), 0);
	put_file(f->br[1], "r", "second", 0644);
	assert_int_equal(union_read(f->ux, r, 0, 10, buf, &n, &eof, NULL), -ESTALE);
	r2 = W(f, "r");
	assert_true(r2 != r);
	expect_data(f, "r", "second");
	/* Changed in place: the same file, its new data. */
	put_file(f->br[1], "m", "after", 0644);
	expect_data(f, "m", "after");
	/* A whiteout put in the upper by hand hides the lower file at once (the clock stands). */
	pwh(f, 0, "m");
	union_watch_settle();
	gone(f, "m");
	assert_string_equal(ls(f, "/"), "new,r");
	fx_restart(f);
	assert_string_equal(ls(f, "/"), "new,r");
	assert_int_equal(W(f, "r"), r2);
}

/*
 * README, "Branches changed while serving": past the watch budget (here 0, as without change
 * notification) a directory made by hand in the upper over one that was only in the lowers
 * shows in the merged listing, with whatever is put in it, within 1 s, when the resolve
 * cache next looks for the directory's copies; until then the listing merges the copies it
 * knew. The cache runs on the fixture's clock, so the second passes at once.
 */
/* The bound README.md promises past the budget ("within 1 s"). */
#define README_UNWATCHED_MS 1000

static void test_hand_made_upper_dir_unwatched(void **state)
{
	struct fx *f = *state;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/low", "l", 0644);
	f->clock = fx_clock_now;
	union_watch_budget(0);
	fx_open(f);
	assert_string_equal(ls(f, "d"), "low");
	put_dir(f->br[0], "d", 0755);
	put_file(f->br[0], "d/new", "n", 0644);
	union_watch_settle();
	fx_clock_advance(UNION_CACHE_TRUST_MS - 1); /* the entry of d is still fresh */
	assert_string_equal(ls(f, "d"), "low");
	fx_clock_advance(README_UNWATCHED_MS - (UNION_CACHE_TRUST_MS - 1));
	assert_string_equal(ls(f, "d"), "low,new");
	expect_data(f, "d/new", "n");
	/* Once seen, never hidden again: not by the next listings, nor by a restart. */
	fx_clock_advance(UNION_CACHE_TRUST_MS);
	assert_string_equal(ls(f, "d"), "low,new");
	fx_restart(f);
	assert_string_equal(ls(f, "d"), "low,new");
}

/*
 * A branch marked =rr is promised never to change: its directories take none of the watch
 * budget, so with room for the upper's directories alone a change there is seen at once.
 * With the lower =ro the same budget is too small, and the window applies.
 */
static void test_rr_branch_unwatched(void **state)
{
	static const enum union_role rr[FX_MAXB] = { UNION_BRANCH_RW, UNION_BRANCH_RR };
	static const enum union_role ro[FX_MAXB] = { UNION_BRANCH_RW, UNION_BRANCH_RO };
	struct fx *f = *state;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/a", "lower a", 0644);
	put_file(f->br[1], "d/b", "lower b", 0644);
	put_dir(f->br[0], "d", 0755);
	f->clock = fx_clock_now;
	union_watch_budget(2); /* the upper's root and d */
	f->roles = rr;
	fx_open(f);
	expect_data(f, "d/a", "lower a");
	put_file(f->br[0], "d/a", "upper a", 0644); /* a copy by hand over the cached one */
	union_watch_settle();
	expect_data(f, "d/a", "upper a");
	fx_close(f);

	f->roles = ro;
	fx_open(f);
	expect_data(f, "d/b", "lower b");
	put_file(f->br[0], "d/b", "upper b", 0644);
	union_watch_settle();
	expect_data(f, "d/b", "lower b"); /* past the budget: trusted for the window */
	fx_clock_advance(README_UNWATCHED_MS);
	expect_data(f, "d/b", "upper b");
}

/*
 * What `unionnfsd-ctl check` must find after changes by hand: records it cannot check, none;
 * records of objects gone, which --repair drops, after which the map is clean.
 */
static void check_clean(struct fx *f)
{
	struct union_check_sink sink = { 0 };
	struct union_check_counts c;

	assert_int_equal(union_check(f->ux, &sink, false, &c), 0);
	assert_int_equal(c.cnt_errors, 0);
	assert_int_equal(union_check(f->ux, &sink, true, &c), 0);
	assert_int_equal(c.cnt_errors, 0);
	assert_int_equal(union_check(f->ux, &sink, false, &c), 0);
	assert_int_equal(c.cnt_stale, 0);
	assert_int_equal(c.cnt_errors, 0);
}

/*
 * README, "Branches changed while serving", files: with change notification every change
 * by hand is seen by the next call, while the fixture's clock stands still (so the
 * fallback window never runs out). union_watch_settle stands for the server's thread
 * having read the queue, which it does as soon as it runs.
 */
static void test_notify_files(void **state)
{
	struct fx *f = *state;
	uint64_t d, r, r2, g, ino;
	struct stat st;
	char buf[32];
	uint32_t n;
	bool eof;

	put_dir(f->br[2], "d", 0755);
	put_file(f->br[2], "d/r", "first", 0644);
	put_file(f->br[2], "d/gone", "g", 0644);
	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/mid", "middle", 0644);
	f->clock = fx_clock_now;
	fx_open(f);
	d = W(f, "d");
	r = W(f, "d/r");
	g = W(f, "d/gone");
	expect_data(f, "d/r", "first");
	expect_data(f, "d/mid", "middle");
	assert_int_equal(union_getattr(f->ux, r, &st), 0); /* cached from here on */

	/* Replaced in the lowest branch by another file (a new inode renamed over it). */
	put_file(f->br[2], "d/r.tmp", "second", 0644);
	assert_int_equal(rename(P(f, 2, "d/r.tmp"), P(f, 2, "d/r")), 0);
	union_watch_settle();
	assert_int_equal(union_getattr(f->ux, r, &st), -ESTALE);
	assert_int_equal(union_read(f->ux, r, 0, sizeof(buf), buf, &n, &eof, NULL), -ESTALE);
	r2 = W(f, "d/r");
	assert_true(r2 != r);
	expect_data(f, "d/r", "second");

	/* Removed by hand: NOENT by name, STALE by handle. */
	assert_int_equal(unlink(P(f, 2, "d/gone")), 0);
	union_watch_settle();
	assert_int_equal(union_lookup(f->ux, d, "gone", &ino, &st), -ENOENT);
	assert_int_equal(union_getattr(f->ux, g, &st), -ESTALE);

	/* Added by hand in a lower branch. */
	put_file(f->br[2], "d/new", "n", 0644);
	union_watch_settle();
	expect_data(f, "d/new", "n");

	/* A copy put by hand in a branch above hides the one served until now. */
	put_dir(f->br[0], "d", 0755);
	put_file(f->br[0], "d/mid", "upper", 0644);
	union_watch_settle();
	expect_data(f, "d/mid", "upper");

	/* A whiteout made by hand in the upper hides the lower file; an OCI one in the middle
	 * too. */
	pwh(f, 0, "d/new");
	union_watch_settle();
	gone(f, "d/new");
	put_file(f->br[1], "d/.wh.r", "", 0644);
	union_watch_settle();
	gone(f, "d/r");
	assert_int_equal(union_getattr(f->ux, r2, &st), -ESTALE);
	assert_int_equal(unlink(P(f, 1, "d/.wh.r")), 0);
	union_watch_settle();

	/* An unchanged object keeps its handle; one truncated underneath reads as it is now. */
	assert_int_equal(W(f, "d/r"), r2);
	assert_int_equal(truncate(P(f, 2, "d/r"), 3), 0);
	assert_int_equal(union_read(f->ux, r2, 0, sizeof(buf), buf, &n, &eof, NULL), 0);
	assert_int_equal(n, 3);
	assert_true(eof);
	assert_memory_equal(buf, "sec", 3);
	assert_string_equal(ls(f, "d"), "mid,r");
	check_clean(f);
}

/*
 * A directory renamed through the union merges lower copies found through its redirect,
 * outside its parent's copies, where nothing is watched: below it a whiteout made by hand is
 * seen within the fallback bound (README: "below a directory renamed through the union"),
 * and at once again once the name is in a watched directory.
 */
static void test_notify_redirect_unwatched(void **state)
{
	struct fx *f = *state;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/low", "l", 0644);
	put_file(f->br[1], "d/low2", "l2", 0644);
	f->clock = fx_clock_now;
	fx_open(f);
	assert_int_equal(mv(f, "", "d", "", "e"), 0);
	assert_true(xattr_is(f, 0, "e", "trusted.overlay.redirect", "/d"));
	expect_data(f, "e/low", "l");
	pwh(f, 0, "e/low");
	union_watch_settle();
	fx_clock_advance(UNION_CACHE_TRUST_MS - 1);
	expect_data(f, "e/low", "l");
	fx_clock_advance(README_UNWATCHED_MS - (UNION_CACHE_TRUST_MS - 1));
	gone(f, "e/low");
	assert_string_equal(ls(f, "e"), "low2");
	check_clean(f);
}

/*
 * Directories changed by hand, seen at once: removed, made, merged with a new upper copy,
 * made opaque (OCI marker), and an ancestor renamed away in a lower, which every entry
 * below it depends on.
 */
static void test_notify_dirs(void **state)
{
	struct fx *f = *state;
	uint64_t e, ex, deep;
	struct stat st;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/low", "l", 0644);
	put_dir(f->br[1], "e", 0755);
	put_file(f->br[1], "e/x", "x", 0644);
	put_dir(f->br[1], "a", 0755);
	put_dir(f->br[1], "a/b", 0755);
	put_dir(f->br[1], "a/b/c", 0755);
	put_file(f->br[1], "a/b/c/f", "deep", 0644);
	f->clock = fx_clock_now;
	fx_open(f);
	e = W(f, "e");
	ex = W(f, "e/x");
	deep = W(f, "a/b/c/f");
	expect_data(f, "a/b/c/f", "deep");
	assert_string_equal(ls(f, "d"), "low");
	assert_string_equal(ls(f, "/"), "a,d,e");

	/* Removed by hand. */
	assert_int_equal(unlink(P(f, 1, "e/x")), 0);
	assert_int_equal(rmdir(P(f, 1, "e")), 0);
	union_watch_settle();
	assert_int_equal(union_getattr(f->ux, e, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, ex, &st), -ESTALE);
	gone(f, "e");

	/* Made by hand in the lower, and in the upper over a lower-only one: merged at once. */
	put_dir(f->br[1], "n", 0755);
	put_file(f->br[1], "n/y", "y", 0644);
	put_dir(f->br[0], "d", 0755);
	put_file(f->br[0], "d/new", "n", 0644);
	union_watch_settle();
	assert_string_equal(ls(f, "/"), "a,d,n");
	expect_data(f, "n/y", "y");
	assert_string_equal(ls(f, "d"), "low,new");
	expect_data(f, "d/low", "l");

	/* Made opaque by hand: the lower copy's names are hidden. */
	put_file(f->br[0], "d/.wh..wh..opq", "", 0644);
	union_watch_settle();
	assert_string_equal(ls(f, "d"), "new");
	gone(f, "d/low");

	/* An ancestor renamed away in the lower: everything below it goes at once. */
	assert_int_equal(rename(P(f, 1, "a"), P(f, 1, "a2")), 0);
	union_watch_settle();
	assert_int_equal(union_getattr(f->ux, deep, &st), -ESTALE);
	gone(f, "a/b/c/f");
	expect_data(f, "a2/b/c/f", "deep");
	check_clean(f);
}

/*
 * Directories removed by hand: the upper copy of a merged directory (what was only in it
 * leaves the listing, the lower copy's entries stay), and a whole lower-only directory. The
 * listings change at once, since every copy a listing merges is stat'ed again at each use;
 * the removed objects' handles answer STALE and their names NOENT.
 */
static void test_hand_removed_dir(void **state)
{
	struct fx *f = *state;
	uint64_t up, e, ex;
	struct stat st;

	put_dir(f->br[1], "d", 0755);
	put_file(f->br[1], "d/low", "l", 0644);
	put_dir(f->br[0], "d", 0755);
	put_file(f->br[0], "d/up", "u", 0644);
	put_dir(f->br[1], "e", 0755);
	put_file(f->br[1], "e/x", "x", 0644);
	f->clock = fx_clock_now;
	fx_open(f);
	up = W(f, "d/up");
	e = W(f, "e");
	ex = W(f, "e/x");
	assert_string_equal(ls(f, "d"), "low,up");
	assert_string_equal(ls(f, "e"), "x");
	assert_string_equal(ls(f, "/"), "d,e");
	assert_int_equal(unlink(P(f, 0, "d/up")), 0);
	assert_int_equal(rmdir(P(f, 0, "d")), 0);
	assert_int_equal(unlink(P(f, 1, "e/x")), 0);
	assert_int_equal(rmdir(P(f, 1, "e")), 0);
	assert_string_equal(ls(f, "d"), "low");
	assert_string_equal(ls(f, "/"), "d");
	gone(f, "d/up");
	gone(f, "e");
	assert_int_equal(union_getattr(f->ux, up, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, e, &st), -ESTALE);
	assert_int_equal(union_getattr(f->ux, ex, &st), -ESTALE);
	expect_data(f, "d/low", "l");
	/* Nothing comes back when the cache's trust runs out, nor after a restart. */
	fx_clock_advance(UNION_CACHE_TRUST_MS);
	assert_string_equal(ls(f, "d"), "low");
	assert_string_equal(ls(f, "/"), "d");
	fx_restart(f);
	assert_string_equal(ls(f, "d"), "low");
	assert_string_equal(ls(f, "/"), "d");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_markers, setup3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_marker_names, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_remove, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rmdir, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_over_whiteout, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_files, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_dirs, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_dir_targets, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_cycles, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_dir_three, setup3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_oci_layers, setup3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_middle_whiteout, setup3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_write, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_names, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_waiting, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_race, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_copy_up_xattrs, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_as_client, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_lower_changed, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hand_made_upper_dir_unwatched, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rr_branch_unwatched, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_notify_files, setup3, fx_teardown),
		cmocka_unit_test_setup_teardown(test_notify_dirs, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_notify_redirect_unwatched, setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hand_removed_dir, setup2, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
