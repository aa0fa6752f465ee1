/*
 * The union layer against real temporary branches and a real inode map.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred.h"
#include "union_fixture.h"
#include "../wait.h"

/* ---- single branch ---- */

static void test_lookup_getattr(void **state)
{
	struct fx *f = *state;
	struct stat st;
	uint64_t a, b, d, ino;

	assert_int_equal(union_getattr(f->ux, STORE_ROOT_INO, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_ino, STORE_ROOT_INO);
	put_file(f->up, "a", "hello", 0644);
	put_dir(f->up, "d", 0755);
	put_file(f->up, "d/b", "x", 0600);
	a = lk(f, 1, "a");
	d = lk(f, 1, "d");
	b = lk(f, d, "b");
	assert_true(a != d && a != b && d != b && a != 1);
	assert_int_equal(lk(f, 1, "a"), a);
	assert_int_equal(lk(f, d, "b"), b);
	assert_int_equal(union_getattr(f->ux, b, &st), 0);
	assert_int_equal(st.st_ino, b);
	assert_int_equal(st.st_size, 1);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(lk(f, d, ".."), 1);
	assert_int_equal(lk(f, d, "."), d);
	assert_int_equal(lk(f, 1, ".."), 1);
	assert_int_equal(union_lookup(f->ux, 1, "nope", &ino, &st), -ENOENT);
	assert_int_equal(union_lookup(f->ux, a, "x", &ino, &st), -ENOTDIR);
	assert_int_equal(union_getattr(f->ux, 999999, &st), -ESTALE);
	assert_int_equal(union_export_id(f->ux) != 0, 1);
	{
		struct statvfs sv;

		assert_int_equal(union_statfs(f->ux, d, &sv), 0);
		assert_true(sv.f_blocks > 0);
		assert_int_equal(union_statfs(f->ux, 999999, &sv), -ESTALE);
	}
	assert_false(union_read_only(f->ux));
}

static void test_bad_names(void **state)
{
	struct fx *f = *state;
	char longname[300];
	struct stat st;
	uint64_t ino;

	memset(longname, 'x', 256);
	longname[256] = '\0';
	assert_int_equal(union_lookup(f->ux, 1, "a/b", &ino, &st), -EINVAL);
	assert_int_equal(union_lookup(f->ux, 1, "", &ino, &st), -EINVAL);
	assert_int_equal(union_lookup(f->ux, 1, longname, &ino, &st), -ENAMETOOLONG);
	assert_int_equal(union_create(f->ux, 1, longname, UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -ENAMETOOLONG);
	assert_int_equal(union_create(f->ux, 1, "a/b", UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -EINVAL);
	assert_int_equal(union_create(f->ux, 1, "..", UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -EEXIST);
	assert_int_equal(union_mkdir(f->ux, 1, ".", &no_sa, &ino, &st, NULL, NULL), -EEXIST);
	assert_int_equal(union_remove(f->ux, 1, "..", NULL, NULL), -EACCES);
	assert_int_equal(union_rename(f->ux, 1, "..", 1, "x", NULL, NULL, NULL, NULL), -EINVAL);
	longname[255] = '\0';
	mk_file(f, 1, longname);
	assert_true(lk(f, 1, longname) > 1);
}

static void test_symlink_never_followed(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX], buf[256];
	struct stat st;
	size_t len;
	uint64_t s, ino;

	put_dir(f->base, "outside", 0755);
	put_file(f->base, "outside/secret", "secret", 0644);
	fx_path(f, p, f->base, "outside");
	fx_path(f, buf, f->up, "esc");
	assert_int_equal(symlink(p, buf), 0);
	s = lk(f, 1, "esc");
	assert_int_equal(union_getattr(f->ux, s, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(union_lookup(f->ux, s, "secret", &ino, &st), -ENOTDIR);
	assert_int_equal(union_readlink(f->ux, s, buf, sizeof(buf), &len, &st), 0);
	assert_string_equal(buf, p);
	assert_int_equal(union_read(f->ux, s, 0, 10, buf, (uint32_t *)&len, (bool *)&p[0], NULL),
			 -EINVAL);
	assert_int_equal(union_create(f->ux, s, "x", UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -ENOTDIR);
	/* Creating over the symlink's name must not write through it. */
	assert_int_equal(union_create(f->ux, 1, "esc", UNION_UNCHECKED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -EEXIST);
}

static void test_create_modes(void **state)
{
	struct fx *f = *state;
	uint8_t v1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, v2[8] = { 9, 9, 9, 9, 9, 9, 9, 9 };
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0640 };
	struct stat st, pre, post;
	uint64_t a, b, e, e2;
	char buf[64];

	assert_int_equal(union_create(f->ux, 1, "u", UNION_UNCHECKED, &sa, NULL, &a, &st, &pre,
				      &post), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_ino, a);
	assert_int_equal(pre.st_ino, 1);
	assert_int_equal(post.st_ino, 1);
	wr(f, a, 0, "data");
	/* UNCHECKED on an existing file: the same file, truncated when asked. */
	sa.ua_mask = USET_SIZE;
	sa.ua_size = 0;
	assert_int_equal(union_create(f->ux, 1, "u", UNION_UNCHECKED, &sa, NULL, &b, &st, NULL,
				      NULL), 0);
	assert_int_equal(b, a);
	assert_int_equal(st.st_size, 0);
	memset(&post, 0, sizeof(post));
	assert_int_equal(union_create(f->ux, 1, "u", UNION_GUARDED, &no_sa, NULL, &b, &st, &pre,
				      &post), -EEXIST);
	assert_int_equal(post.st_ino, 1); /* WCC data on failure too */
	assert_int_equal(union_create(f->ux, 1, "x", UNION_EXCLUSIVE, NULL, v1, &e, &st, NULL,
				      NULL), 0);
	assert_int_equal(union_create(f->ux, 1, "x", UNION_EXCLUSIVE, NULL, v1, &e2, &st, NULL,
				      NULL), 0);
	assert_int_equal(e2, e);
	assert_int_equal(union_create(f->ux, 1, "x", UNION_EXCLUSIVE, NULL, v2, &e2, &st, NULL,
				      NULL), -EEXIST);
	assert_int_equal(union_create(f->ux, 1, "u", UNION_EXCLUSIVE, NULL, v1, &e2, &st, NULL,
				      NULL), -EEXIST);
	mk_dir(f, 1, "dir");
	assert_int_equal(union_create(f->ux, 1, "dir", UNION_UNCHECKED, &no_sa, NULL, &e2, &st,
				      NULL, NULL), -EEXIST);
	get_file(f->up, "u", buf, sizeof(buf));
	assert_string_equal(buf, "");
}

static void test_mkdir_symlink_mknod(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0710 };
	struct stat st;
	uint64_t d, s, p, ino;
	char buf[64];
	size_t len;

	assert_int_equal(union_mkdir(f->ux, 1, "d", &sa, &d, &st, NULL, NULL), 0);
	assert_int_equal(st.st_mode & 07777, 0710);
	assert_int_equal(union_mkdir(f->ux, 1, "d", &sa, &ino, &st, NULL, NULL), -EEXIST);
	assert_int_equal(union_symlink(f->ux, d, "s", "../target", &no_sa, &s, &st, NULL, NULL), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(union_readlink(f->ux, s, buf, sizeof(buf), &len, &st), 0);
	assert_string_equal(buf, "../target");
	assert_int_equal(len, 9);
	assert_int_equal(union_readlink(f->ux, d, buf, sizeof(buf), &len, &st), -EINVAL);
	sa.ua_mode = 0600;
	assert_int_equal(union_mknod(f->ux, d, "p", S_IFIFO, 0, &sa, &p, &st, NULL, NULL), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(lk(f, d, "p"), p);
	assert_int_equal(union_mknod(f->ux, d, "c", S_IFCHR, 0, &sa, &ino, &st, NULL, NULL), -EPERM);
	assert_int_equal(union_mknod(f->ux, d, "r", S_IFREG, 0, &sa, &ino, &st, NULL, NULL), -EINVAL);
	assert_int_equal(union_getattr(f->ux, d, &st), 0);
	assert_int_equal(st.st_nlink, 2);
}

static void test_rw_commit(void **state)
{
	struct fx *f = *state;
	struct stat pre, post;
	enum union_stable c;
	char buf[64];
	uint32_t n;
	uint64_t a;
	bool eof;

	a = mk_file(f, 1, "f");
	assert_int_equal(union_write(f->ux, a, 0, 5, "hello", UNION_UNSTABLE, &n, &c, &pre, &post),
			 0);
	assert_int_equal(n, 5);
	assert_true(c >= UNION_UNSTABLE);
	assert_int_equal(pre.st_size, 0);
	assert_int_equal(post.st_size, 5);
	assert_int_equal(post.st_ino, a);
	assert_int_equal(union_write(f->ux, a, 5, 6, " world", UNION_DATA_SYNC, &n, &c, NULL, NULL),
			 0);
	assert_true(c >= UNION_DATA_SYNC);
	assert_int_equal(union_write(f->ux, a, 0, 1, "H", UNION_FILE_SYNC, &n, &c, NULL, NULL), 0);
	assert_int_equal(c, UNION_FILE_SYNC);
	assert_int_equal(union_read(f->ux, a, 0, 5, buf, &n, &eof, &post), 0);
	assert_int_equal(n, 5);
	assert_false(eof);
	assert_memory_equal(buf, "Hello", 5);
	assert_int_equal(union_read(f->ux, a, 6, 60, buf, &n, &eof, &post), 0);
	assert_int_equal(n, 5);
	assert_true(eof);
	assert_memory_equal(buf, "world", 5);
	assert_int_equal(union_read(f->ux, a, 100, 10, buf, &n, &eof, &post), 0);
	assert_int_equal(n, 0);
	assert_true(eof);
	assert_int_equal(union_read(f->ux, a, UINT64_MAX - 1, 10, buf, &n, &eof, &post), 0);
	assert_int_equal(n, 0);
	assert_true(eof);
	assert_true(union_write(f->ux, a, UINT64_MAX - 1, 1, "x", UNION_UNSTABLE, &n, &c, NULL,
				NULL) < 0);
	assert_int_equal(union_commit(f->ux, a, &pre, &post), 0);
	assert_int_equal(post.st_size, 11);
	assert_int_equal(union_read(f->ux, 1, 0, 5, buf, &n, &eof, &post), -EISDIR);
	assert_int_equal(union_write(f->ux, 1, 0, 1, "x", UNION_UNSTABLE, &n, &c, NULL, NULL),
			 -EISDIR);
}

static void test_setattr(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { 0 };
	struct stat pre, post, st;
	struct timespec guard;
	uint64_t a, d;

	a = mk_file(f, 1, "f");
	wr(f, a, 0, "0123456789");
	sa.ua_mask = USET_MODE | USET_SIZE | USET_ATIME | USET_MTIME;
	sa.ua_mode = 0604;
	sa.ua_size = 3;
	sa.ua_atime.tv_sec = 1000000;
	sa.ua_mtime.tv_sec = 2000000;
	assert_int_equal(union_setattr(f->ux, a, &sa, NULL, &pre, &post), 0);
	assert_int_equal(pre.st_size, 10);
	assert_int_equal(post.st_size, 3);
	assert_int_equal(post.st_mode & 07777, 0604);
	assert_int_equal(post.st_atim.tv_sec, 1000000);
	assert_int_equal(post.st_mtim.tv_sec, 2000000);
	assert_int_equal(post.st_ino, a);
	/* A stale guard changes nothing. */
	guard = post.st_ctim;
	guard.tv_sec--;
	sa.ua_mask = USET_MODE;
	sa.ua_mode = 0600;
	assert_int_equal(union_setattr(f->ux, a, &sa, &guard, &pre, &post), -EAGAIN);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	guard = st.st_ctim;
	assert_int_equal(union_setattr(f->ux, a, &sa, &guard, &pre, &post), 0);
	assert_int_equal(post.st_mode & 07777, 0600);
	sa.ua_mask = USET_MTIME;
	sa.ua_mtime.tv_nsec = UTIME_NOW;
	assert_int_equal(union_setattr(f->ux, a, &sa, NULL, NULL, &post), 0);
	assert_true(post.st_mtim.tv_sec > 2000000);
	d = mk_dir(f, 1, "d");
	sa.ua_mask = USET_MODE;
	sa.ua_mode = 0700;
	assert_int_equal(union_setattr(f->ux, d, &sa, NULL, NULL, &post), 0);
	assert_int_equal(post.st_mode & 07777, 0700);
	sa.ua_mask = USET_SIZE;
	assert_int_equal(union_setattr(f->ux, d, &sa, NULL, NULL, &post), -EISDIR);
	sa.ua_mask = USET_MODE;
	assert_int_equal(union_setattr(f->ux, 1, &sa, NULL, NULL, &post), 0);
	assert_int_equal(post.st_mode & 07777, 0700);
}

static void test_remove_rmdir(void **state)
{
	struct fx *f = *state;
	struct stat st, pre, post;
	uint64_t a, d, b;

	a = mk_file(f, 1, "a");
	d = mk_dir(f, 1, "d");
	b = mk_file(f, d, "b");
	assert_int_equal(union_remove(f->ux, 1, "a", &pre, &post), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	assert_int_equal(union_lookup(f->ux, 1, "a", &a, &st), -ENOENT);
	assert_int_equal(union_remove(f->ux, 1, "a", NULL, NULL), -ENOENT);
	assert_int_equal(union_remove(f->ux, 1, "d", NULL, NULL), -EISDIR);
	assert_int_equal(union_rmdir(f->ux, 1, "d", NULL, NULL), -ENOTEMPTY);
	assert_int_equal(union_rmdir(f->ux, d, "b", NULL, NULL), -ENOTDIR);
	assert_int_equal(union_remove(f->ux, d, "b", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, b, &st), -ESTALE);
	assert_int_equal(union_rmdir(f->ux, 1, "d", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, d, &st), -ESTALE);
	/* A name made again is a new object. */
	assert_true(mk_file(f, 1, "a") != a);
}

static void test_rename(void **state)
{
	struct fx *f = *state;
	struct stat st;
	uint64_t a, d, e, c, x, ino;
	char buf[32];

	a = mk_file(f, 1, "a");
	wr(f, a, 0, "A");
	d = mk_dir(f, 1, "d");
	e = mk_dir(f, 1, "e");
	c = mk_file(f, d, "child");
	assert_int_equal(union_rename(f->ux, 1, "a", 1, "b", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, 1, "b"), a);
	assert_int_equal(union_lookup(f->ux, 1, "a", &ino, &st), -ENOENT);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(union_rename(f->ux, 1, "b", d, "b2", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, d, "b2"), a);
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "A");
	/* A directory moves with its children's inos intact. */
	assert_int_equal(union_rename(f->ux, 1, "d", e, "dd", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, e, "dd"), d);
	assert_int_equal(lk(f, d, "child"), c);
	assert_int_equal(union_getattr(f->ux, c, &st), 0);
	assert_int_equal(lk(f, d, ".."), e);
	/* Over an existing file: the target's ino goes stale. */
	x = mk_file(f, e, "x");
	assert_int_equal(union_rename(f->ux, d, "child", e, "x", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, e, "x"), c);
	assert_int_equal(union_getattr(f->ux, x, &st), -ESTALE);
	assert_int_equal(union_rename(f->ux, e, "x", e, "dd", NULL, NULL, NULL, NULL), -EISDIR);
	assert_int_equal(union_rename(f->ux, e, "dd", e, "x", NULL, NULL, NULL, NULL), -ENOTDIR);
	assert_int_equal(union_rename(f->ux, e, "dd", d, "sub", NULL, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(union_rename(f->ux, e, "nope", e, "y", NULL, NULL, NULL, NULL), -ENOENT);
	assert_int_equal(union_rename(f->ux, e, "x", e, "x", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, e, "x"), c);
}

static void test_link(void **state)
{
	struct fx *f = *state;
	struct stat st, post;
	uint64_t a, d;

	a = mk_file(f, 1, "a");
	d = mk_dir(f, 1, "d");
	assert_int_equal(union_link(f->ux, a, d, "l", &post, NULL, NULL), 0);
	assert_int_equal(post.st_nlink, 2);
	assert_int_equal(post.st_ino, a);
	assert_int_equal(lk(f, d, "l"), a);
	assert_int_equal(lk(f, 1, "a"), a);
	assert_int_equal(union_link(f->ux, a, d, "l", &post, NULL, NULL), -EEXIST);
	assert_int_equal(union_link(f->ux, d, 1, "dl", &post, NULL, NULL), -EPERM);
	/* Older names go while newer ones remain (a snapshot tree, git's objects). */
	assert_int_equal(union_remove(f->ux, 1, "a", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(lk(f, d, "l"), a);
	assert_int_equal(union_link(f->ux, a, d, "m", &post, NULL, NULL), 0);
	assert_int_equal(union_remove(f->ux, d, "l", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(lk(f, d, "m"), a);
	/* The newest name goes first: a sibling in the same directory takes over. */
	assert_int_equal(union_link(f->ux, a, d, "n", &post, NULL, NULL), 0);
	assert_int_equal(union_remove(f->ux, d, "n", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	/*
	 * ... a name in another directory once it is looked up (the map keeps no list of
	 * a file's names).
	 */
	assert_int_equal(union_link(f->ux, a, 1, "o", &post, NULL, NULL), 0);
	assert_int_equal(union_remove(f->ux, 1, "o", NULL, NULL), 0);
	assert_int_equal(lk(f, d, "m"), a);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(union_remove(f->ux, d, "m", NULL, NULL), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
}

struct cookies {
	int n;
	uint64_t c[8];
	uint64_t ino[8];
};

static int cookie_add(void *ctx, const struct union_dirent *de)
{
	struct cookies *c = ctx;

	if (c->n == 8)
		return 1;
	c->c[c->n] = de->ud_cookie;
	c->ino[c->n++] = de->ud_ino;
	return 0;
}

static void test_reopen_keeps_inos(void **state)
{
	struct fx *f = *state;
	struct cookies c1 = { 0 }, c2 = { 0 };
	uint64_t a, d, b;
	struct stat st;
	bool eof;

	a = mk_file(f, 1, "a");
	d = mk_dir(f, 1, "d");
	b = mk_file(f, d, "b");
	assert_int_equal(union_readdir(f->ux, 1, 0, false, cookie_add, &c1, &eof), 0);
	assert_int_equal(c1.n, 4);
	fx_close(f);
	fx_open(f);
	/* Cookies and fileids of a listing are the same after a restart. */
	assert_int_equal(union_readdir(f->ux, 1, 0, false, cookie_add, &c2, &eof), 0);
	assert_int_equal(c2.n, 4);
	assert_memory_equal(c1.c, c2.c, sizeof(c1.c));
	assert_memory_equal(c1.ino, c2.ino, sizeof(c1.ino));
	assert_int_equal(union_getattr(f->ux, b, &st), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(lk(f, 1, "a"), a);
	assert_int_equal(lk(f, 1, "d"), d);
	assert_int_equal(lk(f, d, "b"), b);
	assert_true(mk_file(f, 1, "c") > b);
}

static void test_replaced_behind_back(void **state)
{
	struct fx *f = *state;
	char from[PATH_MAX], to[PATH_MAX];
	struct stat st;
	uint64_t a, a2;

	put_file(f->up, "a", "old", 0644);
	a = lk(f, 1, "a");
	put_file(f->up, "tmp", "new", 0644);
	fx_path(f, from, f->up, "tmp");
	fx_path(f, to, f->up, "a");
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	a2 = lk(f, 1, "a");
	assert_true(a2 != a);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	assert_int_equal(unlink(to), 0);
	assert_int_equal(union_getattr(f->ux, a2, &st), -ESTALE);
}

/* ---- readdir ---- */

struct page {
	int max;
	int n;
	uint64_t last;
	char names[4096][32];
	uint64_t inos[4096];
	struct stat sts[4096];
	bool attrs;
};

static int page_add(void *ctx, const struct union_dirent *de)
{
	struct page *p = ctx;

	if (p->n == p->max)
		return 1;
	if (snprintf(p->names[p->n], sizeof(p->names[0]), "%s", de->ud_name) >= 32)
		p->names[p->n][0] = '?';
	p->inos[p->n] = de->ud_ino;
	if (de->ud_st)
		p->sts[p->n] = *de->ud_st;
	p->attrs = de->ud_st != NULL;
	p->last = de->ud_cookie;
	p->n++;
	return 0;
}

/* Lists the whole directory in pages of size n, running between() after each page. */
static int list_all(struct fx *f, uint64_t dir, int n, bool attrs, char (*names)[32],
		    uint64_t *inos, void (*between)(struct fx *, int), int max)
{
	static struct page p;
	uint64_t cookie = 0;
	int total = 0, pages = 0;
	bool eof = false;

	while (!eof) {
		memset(&p, 0, sizeof(p));
		p.max = n;
		assert_int_equal(union_readdir(f->ux, dir, cookie, attrs, page_add, &p, &eof), 0);
		for (int i = 0; i < p.n; i++) {
			assert_true(total < max);
			strcpy(names[total], p.names[i]);
			inos[total++] = p.inos[i];
			if (attrs) {
				assert_true(p.attrs);
				assert_int_equal(p.sts[i].st_ino, p.inos[i]);
			}
		}
		if (p.n)
			cookie = p.last;
		if (between)
			between(f, pages);
		pages++;
		assert_true(pages < 10000);
	}
	return total;
}

static int find_name(char (*names)[32], int n, const char *name)
{
	int found = 0;

	for (int i = 0; i < n; i++)
		found += !strcmp(names[i], name);
	return found;
}

static char (*g_names)[32];
static uint64_t *g_inos;

static void churn(struct fx *f, int page)
{
	char name[32];
	uint64_t ino;
	struct stat st;

	/* Remove some not-yet-seen names, add new ones. */
	snprintf(name, sizeof(name), "f%03d", 199 - page);
	union_remove(f->ux, 1, name, NULL, NULL);
	snprintf(name, sizeof(name), "new%03d", page);
	assert_int_equal(union_create(f->ux, 1, name, UNION_GUARDED, &no_sa, NULL, &ino, &st, NULL,
				      NULL), 0);
}

static void test_readdir(void **state)
{
	struct fx *f = *state;
	char name[32];
	int n;

	g_names = calloc(4096, sizeof(*g_names));
	g_inos = calloc(4096, sizeof(*g_inos));
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "f%03d", i);
		mk_file(f, 1, name);
	}
	mk_dir(f, 1, "sub");
	n = list_all(f, 1, 7, false, g_names, g_inos, NULL, 4096);
	assert_int_equal(n, 203);
	assert_string_equal(g_names[0], ".");
	assert_string_equal(g_names[1], "..");
	assert_int_equal(g_inos[0], 1);
	assert_int_equal(g_inos[1], 1);
	for (int i = 2; i < n; i++) {
		assert_int_equal(find_name(g_names, n, g_names[i]), 1);
		assert_int_equal(lk(f, 1, g_names[i]), g_inos[i]);
	}
	/* With attributes, in one page: the fileids equal the lookups'. */
	n = list_all(f, 1, 1000, true, g_names, g_inos, NULL, 4096);
	assert_int_equal(n, 203);
	/* Changes between pages: no duplicates, every survivor once. */
	n = list_all(f, 1, 10, false, g_names, g_inos, churn, 4096);
	for (int i = 0; i < n; i++)
		assert_int_equal(find_name(g_names, n, g_names[i]), 1);
	for (int i = 0; i < 200; i++) {
		struct stat st;
		uint64_t ino;

		snprintf(name, sizeof(name), "f%03d", i);
		if (union_lookup(f->ux, 1, name, &ino, &st) == 0)
			assert_int_equal(find_name(g_names, n, name), 1);
	}
	/* A listing starting at the last cookie is empty and at its end. */
	{
		static struct page p;
		uint64_t ino;
		struct stat st;
		bool eof = false;

		memset(&p, 0, sizeof(p));
		p.max = 1;
		assert_int_equal(union_readdir(f->ux, 1, 0, false, page_add, &p, &eof), 0);
		assert_false(eof);
		assert_int_equal(union_lookup(f->ux, 1, "sub", &ino, &st), 0);
		assert_int_equal(union_readdir(f->ux, ino, 2, false, page_add, &p, &eof), 0);
		assert_true(eof);
		assert_int_equal(union_readdir(f->ux, ino, UINT64_MAX >> 1, false, page_add, &p,
					       &eof), 0);
		assert_true(eof);
		assert_int_equal(union_readdir(f->ux, lk(f, 1, "f000"), 0, false, page_add, &p,
					       &eof), -ENOTDIR);
	}
	free(g_names);
	free(g_inos);
}

static void test_readdir_behind_back(void **state)
{
	struct fx *f = *state;
	char names[64][32];
	uint64_t inos[64];
	int n;

	put_file(f->up, "a", "", 0644);
	n = list_all(f, 1, 100, false, names, inos, NULL, 64);
	assert_int_equal(n, 3);
	put_file(f->up, "b", "", 0644);
	n = list_all(f, 1, 100, false, names, inos, NULL, 64);
	assert_int_equal(n, 4);
	assert_int_equal(find_name(names, n, "b"), 1);
}

/* The attributes READDIRPLUS gives for name in dir (listed in one page). */
static void listed_stat(struct fx *f, uint64_t dir, const char *name, struct stat *st)
{
	static struct page p;
	bool eof = false;

	memset(&p, 0, sizeof(p));
	p.max = 64;
	assert_int_equal(union_readdir(f->ux, dir, 0, true, page_add, &p, &eof), 0);
	assert_true(eof);
	for (int i = 0; i < p.n; i++) {
		if (!strcmp(p.names[i], name)) {
			*st = p.sts[i];
			return;
		}
	}
	fail_msg("%s is not listed", name);
}

/* What a listing gives must equal what GETATTR gives. */
static void same_attrs(struct fx *f, uint64_t dir, const char *name)
{
	struct stat listed, now;

	listed_stat(f, dir, name, &listed);
	assert_int_equal(union_getattr(f->ux, lk(f, dir, name), &now), 0);
	assert_int_equal(listed.st_mode, now.st_mode);
	assert_int_equal(listed.st_nlink, now.st_nlink);
	assert_int_equal(listed.st_uid, now.st_uid);
	assert_int_equal(listed.st_size, now.st_size);
	assert_int_equal(listed.st_ino, now.st_ino);
	assert_int_equal(listed.st_mtim.tv_sec, now.st_mtim.tv_sec);
	assert_int_equal(listed.st_mtim.tv_nsec, now.st_mtim.tv_nsec);
	assert_int_equal(listed.st_ctim.tv_nsec, now.st_ctim.tv_nsec);
}

/*
 * A listing keeps its names' attributes, and every change made since shows in the next
 * one, by hand in either branch or through the union: data, mode, a file changed through a
 * hard link in another directory, a directory changed inside.
 */
static void test_two_listing_attrs_change(void **state)
{
	static const char *names[] = { "big", "u", "h", "sub", "made" };
	struct fx *f = *state;
	uint64_t made;
	char path[PATH_MAX];

	put_file(f->lo, "big", "0123456789", 0644);
	put_file(f->up, "u", "x", 0644);
	put_dir(f->lo, "sub", 0755);
	put_file(f->lo, "h", "hh", 0644);
	fx_path(f, path, f->lo, "sub/h2");
	assert_int_equal(link(P(f, 1, "h"), path), 0);
	fx_open(f);
	made = mk_file(f, 1, "made");
	/* A listing made within UDIR_RACY_NS of its directory's change is not kept. */
	wait_ms(40);
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			same_attrs(f, 1, names[i]);

	put_file(f->lo, "big", "01234", 0600);        /* rewritten in place, by hand */
	assert_int_equal(chmod(P(f, 0, "u"), 0640), 0);
	put_file(f->lo, "sub/new", "n", 0644);
	put_file(f->lo, "sub/h2", "changed!", 0644);  /* h, through its other name */
	wr(f, made, 0, "through the union");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		same_attrs(f, 1, names[i]);
	{
		struct stat st;

		listed_stat(f, 1, "big", &st);
		assert_int_equal(st.st_size, 5);
		assert_int_equal(st.st_mode & 07777, 0600);
		listed_stat(f, 1, "u", &st);
		assert_int_equal(st.st_mode & 07777, 0640);
		listed_stat(f, 1, "h", &st);
		assert_int_equal(st.st_size, 8);
		listed_stat(f, 1, "made", &st);
		assert_int_equal(st.st_size, strlen("through the union"));
	}
}

static void test_read_only(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0600 };
	enum union_stable c;
	struct stat st;
	uint64_t a, ino;
	uint32_t n;
	int may;

	put_file(f->up, "a", "x", 0644);
	a = lk(f, 1, "a");
	assert_int_equal(union_access(f->ux, a, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK | W_OK);
	assert_true(union_max_file_size(f->ux) > (1ULL << 32));
	fx_close(f);
	f->ro = true;
	fx_open(f);
	assert_true(union_read_only(f->ux));
	a = lk(f, 1, "a");
	/* ACCESS: nothing may be written through a read-only export */
	assert_int_equal(union_access(f->ux, a, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK);
	assert_int_equal(union_access(f->ux, 1, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK | X_OK);
	assert_int_equal(union_max_file_size(f->ux), (uint64_t)INT64_MAX);
	assert_int_equal(union_write(f->ux, a, 0, 1, "y", UNION_UNSTABLE, &n, &c, NULL, NULL),
			 -EROFS);
	assert_int_equal(union_setattr(f->ux, a, &sa, NULL, NULL, NULL), -EROFS);
	assert_int_equal(union_create(f->ux, 1, "b", UNION_GUARDED, &no_sa, NULL, &ino, &st, NULL,
				      NULL), -EROFS);
	assert_int_equal(union_mkdir(f->ux, 1, "b", &no_sa, &ino, &st, NULL, NULL), -EROFS);
	assert_int_equal(union_remove(f->ux, 1, "a", NULL, NULL), -EROFS);
	assert_int_equal(union_rename(f->ux, 1, "a", 1, "b", NULL, NULL, NULL, NULL), -EROFS);
	assert_int_equal(union_link(f->ux, a, 1, "b", NULL, NULL, NULL), -EROFS);
}

/*
 * ACCESS of a lower object answers for its upper copy: the kernel would refuse writing on
 * a read-only lower branch (EROFS), which copy-up makes no obstacle. The lower branch is
 * a read-only bind mount here.
 */
static void test_access_read_only_lower(void **state)
{
	struct fx *f = *state;
	struct cred user = { .cr_uid = 1000, .cr_gid = 1000 };
	struct stat st;
	uint64_t lf, ld, own;
	int may;

	put_file(f->lo, "lf", "x", 0644);
	put_file(f->lo, "own", "x", 0600);
	assert_int_equal(chown(f->lo, 0, 0), 0);
	{
		char p[PATH_MAX];

		fx_path(f, p, f->lo, "own");
		assert_int_equal(chown(p, 1000, 1000), 0);
	}
	put_dir(f->lo, "ld", 0755);
	if (geteuid() != 0 || mount(f->lo, f->lo, NULL, MS_BIND, NULL) != 0)
		skip(); /* no bind mounts here: nothing to check */
	if (mount(NULL, f->lo, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
		umount2(f->lo, MNT_DETACH);
		skip();
	}
	fx_open(f);
	lf = lk(f, 1, "lf");
	ld = lk(f, 1, "ld");
	own = lk(f, 1, "own");
	assert_int_equal(union_access(f->ux, lf, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK | W_OK);
	assert_int_equal(union_access(f->ux, ld, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK | W_OK | X_OK);
	assert_int_equal(cred_apply(&user), 0);
	assert_int_equal(union_access(f->ux, lf, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK);
	assert_int_equal(union_access(f->ux, own, R_OK | W_OK | X_OK, &may, &st), 0);
	assert_int_equal(may, R_OK | W_OK);
	cred_restore();
	/* and the copy-up that answer promised works */
	{
		enum union_stable c;
		uint32_t n;

		assert_int_equal(cred_apply(&user), 0);
		assert_int_equal(union_write(f->ux, own, 0, 1, "y", UNION_UNSTABLE, &n, &c, NULL,
					     NULL), 0);
		cred_restore();
	}
}

static int teardown_unmount(void **state)
{
	struct fx *f = *state;

	cred_restore();
	if (f->ux)
		fx_close(f);
	umount2(f->lo, MNT_DETACH);
	return fx_teardown(state);
}

static void test_open_errors(void **state)
{
	struct fx *f = *state;
	struct union_export *ux = NULL;
	char err[512] = "", missing[PATH_MAX], inner[PATH_MAX];
	char *br[2];
	int nbr = 2, r;

#define OPEN_BR() union_open("/union", br, nbr, NULL, 0, "fix -e", f->st, &ux, err, sizeof(err))
	r = store_open(f->state, &f->st, err, sizeof(err));
	assert_int_equal(r, 0);
	fx_path(f, missing, f->base, "missing");
	br[0] = f->up;
	br[1] = missing;
	assert_int_equal(OPEN_BR(), -ENOENT);
	assert_non_null(strstr(err, "missing: No such file or directory; create it or fix -e"));
	br[1] = f->up;
	assert_int_equal(OPEN_BR(), -EINVAL);
	assert_non_null(strstr(err, "listed twice"));
	fx_path(f, inner, f->lo, "inner");
	put_dir(f->lo, "inner", 0755);
	br[0] = inner;
	br[1] = f->lo;
	assert_int_equal(OPEN_BR(), -EINVAL);
	assert_non_null(strstr(err, "inside"));
	assert_null(ux);
	/* Once bound, the export refuses another stack. */
	br[0] = f->up;
	assert_int_equal(OPEN_BR(), 0);
	union_close(ux);
	nbr = 1;
	assert_true(OPEN_BR() < 0);
#undef OPEN_BR
	store_close(f->st);
	f->st = NULL;
}

/* ---- two branches ---- */

static void test_two_shadow_and_merge(void **state)
{
	struct fx *f = *state;
	char names[64][32];
	uint64_t inos[64], d, ino;
	struct stat st;
	char buf[32];
	int n;

	put_file(f->up, "both", "upper", 0644);
	put_file(f->lo, "both", "lower", 0644);
	put_file(f->lo, "lowonly", "low", 0644);
	put_dir(f->up, "d", 0755);
	put_dir(f->lo, "d", 0755);
	put_file(f->up, "d/u", "", 0644);
	put_file(f->lo, "d/l", "", 0644);
	put_file(f->lo, "d/u", "hidden", 0644);
	put_file(f->up, "filedir", "", 0644);
	put_dir(f->lo, "filedir", 0755);
	put_file(f->lo, "filedir/x", "", 0644);
	put_file(f->lo, "h1", "", 0644);
	{
		char p1[PATH_MAX], p2[PATH_MAX];

		fx_path(f, p1, f->lo, "h1");
		fx_path(f, p2, f->lo, "d/h2");
		assert_int_equal(link(p1, p2), 0);
	}
	fx_open(f);
	/* Hard links in a lower branch are one object. */
	ino = lk(f, 1, "h1");
	assert_int_equal(lk(f, lk(f, 1, "d"), "h2"), ino);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_nlink, 2);
	rd(f, lk(f, 1, "both"), buf, sizeof(buf));
	assert_string_equal(buf, "upper");
	rd(f, lk(f, 1, "lowonly"), buf, sizeof(buf));
	assert_string_equal(buf, "low");
	d = lk(f, 1, "d");
	assert_true(lk(f, d, "l") > 1);
	rd(f, lk(f, d, "u"), buf, sizeof(buf));
	assert_string_equal(buf, "");
	/* A file in the upper hides a directory below. */
	ino = lk(f, 1, "filedir");
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(union_lookup(f->ux, ino, "x", &ino, &st), -ENOTDIR);
	n = list_all(f, 1, 2, true, names, inos, NULL, 64);
	assert_int_equal(n, 7);
	assert_int_equal(find_name(names, n, "both"), 1);
	assert_int_equal(find_name(names, n, "lowonly"), 1);
	assert_int_equal(find_name(names, n, "filedir"), 1);
	n = list_all(f, d, 100, false, names, inos, NULL, 64);
	assert_int_equal(n, 5);
	assert_int_equal(find_name(names, n, "u"), 1);
	assert_int_equal(find_name(names, n, "l"), 1);
	for (int i = 2; i < n; i++)
		assert_int_equal(lk(f, d, names[i]), inos[i]);
	/* A merged directory with entries in it is not empty, whichever branch has them. */
	assert_int_equal(union_rmdir(f->ux, 1, "d", NULL, NULL), -ENOTEMPTY);
	assert_int_equal(union_create(f->ux, 1, "lowonly", UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), -EEXIST);
}

static void test_two_create_in_lower_dir(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	uint64_t a, b, c, ino;
	struct stat st;

	put_dir(f->lo, "a", 0751);
	put_dir(f->lo, "a/b", 0705);
	put_file(f->lo, "a/b/old", "", 0644);
	fx_open(f);
	a = lk(f, 1, "a");
	b = lk(f, a, "b");
	c = mk_file(f, b, "new");
	assert_int_equal(lk(f, b, "new"), c);
	fx_path(f, p, f->up, "a");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0751);
	fx_path(f, p, f->up, "a/b");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0705);
	fx_path(f, p, f->up, "a/b/new");
	assert_int_equal(stat(p, &st), 0);
	fx_path(f, p, f->up, "a/b/old");
	assert_int_equal(stat(p, &st), -1);
	/* The directories kept their inos although their topmost copies changed. */
	assert_int_equal(lk(f, 1, "a"), a);
	assert_int_equal(lk(f, a, "b"), b);
	assert_true(lk(f, b, "old") > 1);
	assert_int_equal(union_lookup(f->ux, 1, ".unionnfsd.work", &ino, &st), -ENOENT);
}

static void test_two_copy_up(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0600 };
	char names[64][32], buf[64], p[PATH_MAX];
	uint64_t inos[64], a, d, s, ino;
	struct stat st, lst;
	size_t len;
	int n;

	put_dir(f->lo, "d", 0755);
	put_file(f->lo, "d/file", "lower data", 0640);
	put_file(f->lo, "d/other", "other", 0644);
	fx_path(f, p, f->lo, "d/sym");
	assert_int_equal(symlink("file", p), 0);
	fx_path(f, p, f->lo, "d/file");
	assert_int_equal(stat(p, &lst), 0);
	fx_open(f);
	d = lk(f, 1, "d");
	a = lk(f, d, "file");
	wr(f, a, 0, "UPPER");
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(st.st_ino, a);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_size, 10);
	assert_int_equal(lk(f, d, "file"), a);
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "UPPER data");
	get_file(f->lo, "d/file", buf, sizeof(buf));
	assert_string_equal(buf, "lower data");
	get_file(f->up, "d/file", buf, sizeof(buf));
	assert_string_equal(buf, "UPPER data");
	fx_path(f, p, f->up, "d/file");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, lst.st_uid);
	assert_int_equal(st.st_mtim.tv_sec >= lst.st_mtim.tv_sec, 1);
	/* setattr copies up too; a symlink copies as a symlink. */
	ino = lk(f, d, "other");
	assert_int_equal(union_setattr(f->ux, ino, &sa, NULL, NULL, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_ino, ino);
	fx_path(f, p, f->lo, "d/other");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	s = lk(f, d, "sym");
	assert_int_equal(union_link(f->ux, s, d, "sym2", &st, NULL, NULL), 0);
	assert_int_equal(lk(f, d, "sym2"), s);
	assert_int_equal(union_readlink(f->ux, s, buf, sizeof(buf), &len, NULL), 0);
	assert_string_equal(buf, "file");
	/* The work directory never shows. */
	n = list_all(f, 1, 100, false, names, inos, NULL, 64);
	assert_int_equal(n, 3);
	assert_int_equal(find_name(names, n, ".unionnfsd.work"), 0);
	/* And everything survives a restart. */
	fx_close(f);
	fx_open(f);
	assert_int_equal(lk(f, d, "file"), a);
	assert_int_equal(lk(f, 1, "d"), d);
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	/* Pure-upper objects in a merged directory are plain to remove. */
	assert_int_equal(union_remove(f->ux, d, "sym2", NULL, NULL), 0);
	/* A copied-up one leaves a whiteout, and the lower copy stays hidden. */
	assert_int_equal(union_remove(f->ux, d, "file", NULL, NULL), 0);
	assert_int_equal(union_lookup(f->ux, d, "file", &ino, &st), -ENOENT);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	get_file(f->lo, "d/file", buf, sizeof(buf));
	assert_string_equal(buf, "lower data");
}

static void test_two_rename_and_dirs(void **state)
{
	struct fx *f = *state;
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0700 };
	char p[PATH_MAX], buf[32];
	uint64_t a, d, ld, ino;
	struct stat st;

	put_file(f->lo, "target", "lower", 0644);
	put_dir(f->lo, "ldir", 0755);
	put_file(f->lo, "ldir/child", "c", 0644);
	put_dir(f->lo, "ldir2", 0755);
	fx_open(f);
	a = mk_file(f, 1, "a");
	wr(f, a, 0, "upper");
	/* Over a lower-only file: the upper name shadows it, the ino moves along. */
	assert_int_equal(union_rename(f->ux, 1, "a", 1, "target", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, 1, "target"), a);
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "upper");
	get_file(f->lo, "target", buf, sizeof(buf));
	assert_string_equal(buf, "lower");
	d = mk_dir(f, 1, "newdir");
	assert_int_equal(union_rename(f->ux, 1, "newdir", 1, "target", NULL, NULL, NULL, NULL),
			 -ENOTDIR);
	assert_int_equal(union_rename(f->ux, 1, "target", 1, "ldir2", NULL, NULL, NULL, NULL),
			 -EISDIR);
	/* A new directory over an empty lower one takes its name. */
	assert_int_equal(union_rename(f->ux, 1, "newdir", 1, "ldir2", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(lk(f, 1, "ldir2"), d);
	assert_int_equal(union_lookup(f->ux, 1, "newdir", &ino, &st), -ENOENT);
	mk_file(f, 1, "b");
	assert_int_equal(union_rename(f->ux, 1, "b", 1, "ldir2", NULL, NULL, NULL, NULL),
			 -EISDIR);
	/* setattr on a lower directory copies the directory alone. */
	ld = lk(f, 1, "ldir");
	assert_int_equal(union_setattr(f->ux, ld, &sa, NULL, NULL, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_ino, ld);
	fx_path(f, p, f->up, "ldir/child");
	assert_int_equal(lstat(p, &st), -1);
	fx_path(f, p, f->lo, "ldir");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(lk(f, 1, "ldir"), ld);
	ino = lk(f, ld, "child");
	/* A link to a lower file copies it up first; both names share the ino. */
	assert_int_equal(union_link(f->ux, ino, 1, "child-link", &st, NULL, NULL), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(lk(f, 1, "child-link"), ino);
	assert_int_equal(lk(f, ld, "child"), ino);
	fx_path(f, p, f->up, "ldir/child");
	assert_int_equal(lstat(p, &st), 0);
}

/* ---- concurrency ---- */

#define CONC_THREADS 4
#define CONC_NAMES 60

struct conc {
	struct fx *c_fx;
	int c_id;
	uint64_t c_inos[CONC_NAMES];
	int c_err;
};

static int conc_count(void *ctx, const struct union_dirent *de)
{
	(*(int *)ctx)++;
	return de->ud_ino == 0;
}

static void *conc_run(void *arg)
{
	struct conc *c = arg;
	char name[32];
	struct stat st;
	bool eof;

	for (int k = 0; k < CONC_NAMES; k++) {
		/* Each thread walks the names in a different order. */
		int i = (c->c_id & 1 ? CONC_NAMES - 1 - k : k + c->c_id * 17) % CONC_NAMES;
		int n = 0;

		snprintf(name, sizeof(name), "n%02d", i);
		if (union_lookup(c->c_fx->ux, 1, name, &c->c_inos[i], &st) < 0)
			c->c_err++;
		if (k % 10 == c->c_id &&
		    union_readdir(c->c_fx->ux, 1, 0, c->c_id & 1, conc_count, &n, &eof) < 0)
			c->c_err++;
	}
	return NULL;
}

static void test_concurrent_lookups(void **state)
{
	struct fx *f = *state;
	struct conc c[CONC_THREADS];
	pthread_t th[CONC_THREADS];
	char name[32];

	for (int i = 0; i < CONC_NAMES; i++) {
		snprintf(name, sizeof(name), "n%02d", i);
		put_file(f->up, name, "", 0644);
	}
	for (int t = 0; t < CONC_THREADS; t++) {
		c[t] = (struct conc){ .c_fx = f, .c_id = t };
		assert_int_equal(pthread_create(&th[t], NULL, conc_run, &c[t]), 0);
	}
	for (int t = 0; t < CONC_THREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < CONC_THREADS; t++) {
		assert_int_equal(c[t].c_err, 0);
		for (int i = 0; i < CONC_NAMES; i++)
			assert_int_equal(c[t].c_inos[i], c[0].c_inos[i]);
	}
	for (int i = 0; i < CONC_NAMES; i++)
		for (int j = i + 1; j < CONC_NAMES; j++)
			assert_true(c[0].c_inos[i] != c[0].c_inos[j]);
}

/* Writers create, rename and remove their own names while readers list and look up. */
struct churner {
	struct fx *ch_fx;
	uint64_t ch_sub;
	int ch_id;
	int ch_bad;
};

static int churn_look(void *ctx, const struct union_dirent *de)
{
	struct churner *c = ctx;
	struct stat st;
	int r;

	if (de->ud_ino == 0)
		c->ch_bad++;
	r = union_getattr(c->ch_fx->ux, de->ud_ino, &st);
	if (r < 0 && r != -ESTALE)
		c->ch_bad++;
	return 0;
}

static void *churn_run(void *arg)
{
	struct churner *c = arg;
	struct union_export *ux = c->ch_fx->ux;
	char a[32], b[32];
	uint64_t ino, d;
	struct stat st;
	bool eof;
	int r;

	for (int i = 0; i < 80; i++) {
		if (c->ch_id < 2) {
			snprintf(a, sizeof(a), "w%d-%d", c->ch_id, i);
			snprintf(b, sizeof(b), "w%d-%d-moved", c->ch_id, i);
			if (union_create(ux, 1, a, UNION_GUARDED, &no_sa, NULL, &ino, &st, NULL,
					 NULL) < 0 ||
			    union_rename(ux, 1, a, c->ch_sub, b, NULL, NULL, NULL, NULL) < 0 ||
			    union_lookup(ux, c->ch_sub, b, &d, &st) < 0 || d != ino)
				c->ch_bad++;
			if (i % 2 && union_remove(ux, c->ch_sub, b, NULL, NULL) < 0)
				c->ch_bad++;
		} else {
			r = union_readdir(ux, i % 2 ? 1 : c->ch_sub, 0, c->ch_id == 2, churn_look, c,
					  &eof);
			if (r < 0 || !eof)
				c->ch_bad++;
		}
	}
	return NULL;
}

static void test_concurrent_changes(void **state)
{
	struct fx *f = *state;
	struct churner c[4];
	pthread_t th[4];
	uint64_t sub = mk_dir(f, 1, "sub");

	for (int t = 0; t < 4; t++) {
		c[t] = (struct churner){ .ch_fx = f, .ch_sub = sub, .ch_id = t };
		assert_int_equal(pthread_create(&th[t], NULL, churn_run, &c[t]), 0);
	}
	for (int t = 0; t < 4; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(c[t].ch_bad, 0);
	}
}

/* ---- the resolve cache never serves what is no longer there ---- */

/*
 * Past the watch budget (1 here: the root's second copy is past it), a copy put into the
 * upper by hand is seen once the cache's 1 s trust runs out (with notification, at once:
 * test_union_semantics.c).
 */
static void test_two_cache_hand_shadow(void **state)
{
	struct fx *f = *state;
	char buf[64];
	struct stat st;
	uint64_t d, a;

	put_dir(f->lo, "d", 0755);
	put_file(f->lo, "d/a", "lower", 0644);
	f->clock = fx_clock_now;
	union_watch_budget(1);
	fx_open(f);
	d = lk(f, 1, "d");
	a = lk(f, d, "a");
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "lower");
	put_dir(f->up, "d", 0755);
	put_file(f->up, "d/a", "upper!", 0644);
	union_watch_settle();
	fx_clock_advance(UNION_CACHE_TRUST_MS - 1);
	assert_int_equal(lk(f, d, "a"), a);
	fx_clock_advance(1);
	assert_int_equal(union_getattr(f->ux, a, &st), -ESTALE);
	a = lk(f, d, "a");
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "upper!");
}

/* A copy-up through the union is seen at once, by ino and by name. */
static void test_two_cache_copy_up(void **state)
{
	struct fx *f = *state;
	char buf[64];
	struct stat st;
	uint64_t a;

	put_file(f->lo, "a", "abc", 0644);
	fx_open(f);
	a = lk(f, 1, "a");
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	wr(f, a, 3, "defg");
	assert_int_equal(union_getattr(f->ux, a, &st), 0);
	assert_int_equal(st.st_size, 7);
	assert_int_equal(lk(f, 1, "a"), a);
	rd(f, a, buf, sizeof(buf));
	assert_string_equal(buf, "abcdefg");
	get_file(f->lo, "a", buf, sizeof(buf));
	assert_string_equal(buf, "abc");
}

/* A directory closed to others through the union closes cached names in it too. */
static void test_two_cache_chmod_dir(void **state)
{
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = 0700 };
	struct fx *f = *state;
	struct stat st;
	uint64_t d, a, ino;
	struct cred user = { .cr_uid = 1000, .cr_gid = 1000 };

	if (geteuid() != 0)
		skip();
	put_dir(f->up, "d", 0755); /* merged: the lower copy keeps its mode */
	put_dir(f->lo, "d", 0755);
	put_file(f->lo, "d/a", "x", 0644);
	fx_open(f);
	d = lk(f, 1, "d");
	assert_int_equal(cred_apply(&user), 0);
	a = lk(f, d, "a");
	assert_int_equal(lk(f, d, "a"), a); /* the first look made the record: now cached */
	cred_restore();
	assert_int_equal(union_setattr(f->ux, d, &sa, NULL, NULL, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(cred_apply(&user), 0);
	assert_int_equal(union_lookup(f->ux, d, "a", &ino, &st), -EACCES);
	cred_restore();
	assert_int_equal(lk(f, d, "a"), a);
}

/*
 * A name cached for one user is served to another only with search permission in the
 * directory, and then from the cache: in a 0750 directory whose lower copy (holding the
 * name) is open to all, a member of the group gets the cached answer (past the watch
 * budget, 0 here, a copy put in the upper by hand is not seen within the cache's second),
 * anyone else EACCES.
 */
static void test_two_cache_search_permission(void **state)
{
	struct cred alice = { .cr_uid = 1000, .cr_gid = 1000 };
	struct cred member = { .cr_uid = 1001, .cr_gid = 1001, .cr_ngroups = 1,
			       .cr_groups = { 1000 } };
	struct cred other = { .cr_uid = 1001, .cr_gid = 1001 };
	struct fx *f = *state;
	char p[PATH_MAX];
	struct stat st;
	uint64_t d, a, ino;

	if (geteuid() != 0)
		skip();
	put_dir(f->up, "d", 0750);
	put_dir(f->lo, "d", 0755);
	fx_path(f, p, f->up, "d");
	assert_int_equal(chown(p, 1000, 1000), 0);
	put_file(f->lo, "d/a", "lower", 0644);
	f->clock = fx_clock_now;
	union_watch_budget(0);
	fx_open(f);
	d = lk(f, 1, "d");
	assert_int_equal(cred_apply(&alice), 0);
	a = lk(f, d, "a");
	assert_int_equal(lk(f, d, "a"), a); /* the first look made the record: now cached */
	cred_restore();
	put_file(f->up, "d/a", "upper", 0644);
	assert_int_equal(cred_apply(&member), 0);
	assert_int_equal(union_lookup(f->ux, d, "a", &ino, &st), 0);
	assert_int_equal(ino, a);
	assert_int_equal(cred_apply(&other), 0);
	assert_int_equal(union_lookup(f->ux, d, "a", &ino, &st), -EACCES);
	assert_int_equal(union_lookup(f->ux, d, ".", &ino, &st), -EACCES);
	cred_restore();
}

/* ---- descriptors kept for READ and WRITE ---- */

/* This process's descriptors whose target starts with prefix (and, if deleted, is removed). */
static int open_fds(const char *prefix, bool deleted)
{
	static const char mark[] = " (deleted)";
	char link[64], target[PATH_MAX];
	int n = 0;

	for (int fd = 0; fd < 4096; fd++) {
		ssize_t len;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, prefix, strlen(prefix)))
			continue;
		if (!deleted || ((size_t)len > strlen(mark) &&
				 !strcmp(target + len - strlen(mark), mark)))
			n++;
	}
	return n;
}

/* READs and WRITEs of ino as two identities, so the file is kept open four times. */
static void use_cached(struct fx *f, uint64_t ino)
{
	static const char *who[] = { "identity one", "identity two" };
	enum union_stable c;
	char buf[8];
	uint32_t n;
	bool eof;

	for (int i = 0; i < 2; i++) {
		assert_int_equal(union_write_as(f->ux, ino, who[i], strlen(who[i]), 0, 4, "data",
						UNION_UNSTABLE, &n, &c, NULL, NULL), 0);
		assert_int_equal(union_read_as(f->ux, ino, who[i], strlen(who[i]), 0, sizeof(buf),
					       buf, &n, &eof, NULL), 0);
		assert_int_equal(n, 4);
	}
}

static void test_unlink_closes_cached(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	uint64_t a, b, d;

	a = mk_file(f, 1, "a");
	use_cached(f, a);
	fx_path(f, p, f->up, "a");
	assert_true(open_fds(p, false) >= 1); /* kept open: the cache works */
	assert_int_equal(union_remove(f->ux, 1, "a", NULL, NULL), 0);
	assert_int_equal(open_fds(f->up, true), 0);

	b = mk_file(f, 1, "b");
	mk_file(f, 1, "c");
	use_cached(f, b);
	assert_int_equal(union_rename(f->ux, 1, "c", 1, "b", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(open_fds(f->up, true), 0);

	d = mk_file(f, 1, "d");
	use_cached(f, d);
	fx_path(f, p, f->up, "d");
	assert_true(open_fds(p, false) >= 1);
	union_shed_fds(f->ux);
	assert_int_equal(open_fds(p, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lookup_getattr, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_symlink_never_followed, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_modes, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_symlink_mknod, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rw_commit, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_setattr, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_remove_rmdir, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_link, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_inos, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_replaced_behind_back, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_readdir, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_readdir_behind_back, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_read_only, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_lookups, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_changes, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_unlink_closes_cached, fx_setup1, fx_teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_access_read_only_lower, fx_setup2,
						teardown_unmount),
		cmocka_unit_test_setup_teardown(test_two_shadow_and_merge, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_create_in_lower_dir, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_copy_up, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_rename_and_dirs, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_cache_hand_shadow, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_cache_copy_up, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_cache_chmod_dir, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_cache_search_permission, fx_setup2, fx_teardown),
		cmocka_unit_test_setup_teardown(test_two_listing_attrs_change, fx_setup2, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
