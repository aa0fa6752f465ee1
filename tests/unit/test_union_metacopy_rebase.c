/*
 * Base versions (rebase.c): union_complete_metacopies makes an upper's metacopies whole
 * from the old stack of lower branches, with metacopies made by hand in overlayfs's format.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/fs.h>

#include "../rmtree.h"
#include "union.h"

#define BIG_SIZE (3 * 1024 * 1024)  /* a file with a hole in its middle */

struct mx {
	char dir[PATH_MAX];
	char oldtop[PATH_MAX];       /* the old base: oldtop over oldbot */
	char oldbot[PATH_MAX];
	char upper[PATH_MAX];
	char outside[PATH_MAX];      /* beside the upper, reached only through a symlink */
};

static void path_of(char *out, const char *root, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", root, rel);

	assert_true(n > 0 && n < PATH_MAX);
}

static void mkd(const char *root, const char *rel)
{
	char p[PATH_MAX];

	path_of(p, root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void put(const char *root, const char *rel, const char *text, mode_t mode)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, root, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void whiteout(const char *root, const char *rel)
{
	char p[PATH_MAX];

	path_of(p, root, rel);
	assert_int_equal(mknod(p, S_IFCHR, makedev(0, 0)), 0);
}

/* An overlay attribute as the union writes it: trusted.* as root, else user.*. */
static void mark(const char *root, const char *rel, const char *sfx, const char *val)
{
	char p[PATH_MAX], attr[64];

	path_of(p, root, rel);
	snprintf(attr, sizeof(attr), "trusted.overlay.%s", sfx);
	if (lsetxattr(p, attr, val, strlen(val), 0) == 0)
		return;
	snprintf(attr, sizeof(attr), "user.overlay.%s", sfx);
	assert_int_equal(lsetxattr(p, attr, val, strlen(val), 0), 0);
}

/* Whether an overlay attribute is on, in either namespace. */
static bool marked(const char *root, const char *rel, const char *sfx)
{
	char p[PATH_MAX], attr[64];

	path_of(p, root, rel);
	snprintf(attr, sizeof(attr), "trusted.overlay.%s", sfx);
	if (lgetxattr(p, attr, NULL, 0) >= 0)
		return true;
	snprintf(attr, sizeof(attr), "user.overlay.%s", sfx);
	return lgetxattr(p, attr, NULL, 0) >= 0;
}

/* The attributes a metacopy keeps: they are what its completion must not change. */
#define MC_UID 1234
#define MC_GID 5678
#define MC_MODE 04750
static const struct timespec mc_times[2] = { { 1000000000, 111 }, { 1200000000, 222333444 } };

/*
 * A metacopy as overlayfs makes one: size of the data, no bytes, the marker, and here
 * attributes of its own (owner, set-uid mode, times, a user xattr).
 */
static void metacopy(const char *root, const char *rel, off_t size, const char *redirect)
{
	char p[PATH_MAX];

	put(root, rel, "", 0644);
	path_of(p, root, rel);
	assert_int_equal(truncate(p, size), 0);
	mark(root, rel, "metacopy", "");
	if (redirect)
		mark(root, rel, "redirect", redirect);
	assert_int_equal(lsetxattr(p, "user.keep", "kept", 4, 0), 0);
	assert_int_equal(lchown(p, MC_UID, MC_GID), 0);
	assert_int_equal(chmod(p, MC_MODE), 0);
	assert_int_equal(utimensat(AT_FDCWD, p, mc_times, AT_SYMLINK_NOFOLLOW), 0);
}

/* The whole content of a file (malloc), *len its length. */
static char *slurp(const char *root, const char *rel, size_t *len)
{
	char p[PATH_MAX], *buf;
	struct stat st;
	int fd;

	path_of(p, root, rel);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	buf[st.st_size] = '\0';
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* rel in root holds exactly the first len bytes of want. */
static void holds(const char *root, const char *rel, const char *want, size_t len)
{
	size_t got_len;
	char *got = slurp(root, rel, &got_len);

	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
	free(got);
}

/* A completed metacopy: whole, no marker nor redirect, its own attributes kept. */
static void whole(const char *root, const char *rel, const char *want, size_t len)
{
	char p[PATH_MAX], val[16];
	struct stat st;

	path_of(p, root, rel);
	assert_int_equal(lstat(p, &st), 0); /* before reading it moves its atime */
	holds(root, rel, want, len);
	assert_false(marked(root, rel, "metacopy"));
	assert_false(marked(root, rel, "redirect"));
	assert_int_equal(st.st_mode, S_IFREG | MC_MODE);
	assert_int_equal(st.st_uid, MC_UID);
	assert_int_equal(st.st_gid, MC_GID);
	assert_int_equal(st.st_mtim.tv_sec, mc_times[1].tv_sec);
	assert_int_equal(st.st_mtim.tv_nsec, mc_times[1].tv_nsec);
	assert_int_equal(st.st_atim.tv_sec, mc_times[0].tv_sec);
	assert_int_equal(lgetxattr(p, "user.keep", val, sizeof(val)), 4);
	assert_memory_equal(val, "kept", 4);
}

/* A metacopy left as it was: marked, its size, no data. */
static void still_metacopy(const char *root, const char *rel, off_t size)
{
	char p[PATH_MAX];
	struct stat st;
	int fd;

	assert_true(marked(root, rel, "metacopy"));
	path_of(p, root, rel);
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, size);
	errno = 0;
	assert_int_equal(lseek(fd, 0, SEEK_DATA), -1);
	assert_int_equal(errno, ENXIO);
	close(fd);
}

/* A listing of a tree: each entry's path, type, mode, owner, size, mtime, bytes' hash. */
static char *snap;
static size_t snap_len;

static int snap_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	uint64_t h = 14695981039346656037ULL;
	char buf[4096];
	ssize_t n;
	int fd, len;

	(void)flag;
	(void)ftw;
	if (S_ISREG(st->st_mode) && (fd = open(path, O_RDONLY)) >= 0) {
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			for (ssize_t i = 0; i < n; i++)
				h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
		close(fd);
	}
	len = snprintf(NULL, 0, "%s %o %u %u %lld %lld.%ld %llx\n", path, st->st_mode,
		       st->st_uid, st->st_gid, (long long)st->st_size,
		       (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (unsigned long long)h);
	snap = realloc(snap, snap_len + (size_t)len + 1);
	assert_non_null(snap);
	snprintf(snap + snap_len, (size_t)len + 1, "%s %o %u %u %lld %lld.%ld %llx\n", path,
		 st->st_mode, st->st_uid, st->st_gid, (long long)st->st_size,
		 (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (unsigned long long)h);
	snap_len += (size_t)len;
	return 0;
}

static char *snapshot(const char *root)
{
	char *s;

	snap = NULL;
	snap_len = 0;
	assert_int_equal(nftw(root, snap_one, 16, FTW_PHYS), 0);
	s = snap;
	snap = NULL;
	return s;
}

static int complete(struct mx *x, int *done, char *err, size_t len)
{
	char *old[] = { x->oldtop, x->oldbot };

	err[0] = '\0';
	return union_complete_metacopies(x->upper, old, 2, done, err, len);
}

static int setup(void **state)
{
	struct mx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	strcpy(x->dir, "/tmp/test_mc_rebase.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	path_of(x->oldtop, x->dir, "oldtop");
	path_of(x->oldbot, x->dir, "oldbot");
	path_of(x->upper, x->dir, "upper");
	path_of(x->outside, x->dir, "outside");
	assert_int_equal(mkdir(x->oldtop, 0755), 0);
	assert_int_equal(mkdir(x->oldbot, 0755), 0);
	assert_int_equal(mkdir(x->upper, 0755), 0);
	assert_int_equal(mkdir(x->outside, 0755), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct mx *x = *state;

	assert_int_equal(rm_tree(x->dir), 0);
	free(x);
	return 0;
}

/* Metacopies found by their own path, by each kind of redirect, and under a moved directory. */
static void test_complete(void **state)
{
	struct mx *x = *state;
	char err[512], p[PATH_MAX], *before, *after, *big;
	struct stat st, own;
	int done = -1, fd;

	mkd(x->oldtop, "data");
	mkd(x->oldbot, "data");
	mkd(x->upper, "data");
	/* By its own path, in the lower branch (the top one has the directory, not the file). */
	put(x->oldbot, "data/bypath", "by its own path\n", 0644);
	metacopy(x->upper, "data/bypath", 16, NULL);
	/* The top branch decides over the bottom one. */
	put(x->oldtop, "data/both", "top's", 0644);
	put(x->oldbot, "data/both", "bot's", 0644);
	metacopy(x->upper, "data/both", 5, NULL);
	/* An absolute redirect (a metacopy renamed across directories). */
	mkd(x->oldbot, "orig");
	put(x->oldbot, "orig/src", "absolute redirect", 0644);
	metacopy(x->upper, "data/abs", 17, "/orig/src");
	/* A plain-name redirect (renamed within its directory). */
	put(x->oldbot, "data/before_rename", "plain redirect", 0644);
	metacopy(x->upper, "data/after_rename", 14, "before_rename");
	/* Cut to its own size: the base grew after it was made, the client saw the start. */
	put(x->oldbot, "data/cut", "0123456789", 0644);
	metacopy(x->upper, "data/cut", 4, NULL);
	/* In a directory renamed by the client: its base is the redirect's. */
	mkd(x->oldbot, "was");
	put(x->oldbot, "was/f", "moved dir", 0644);
	mkd(x->upper, "now");
	mark(x->upper, "now", "redirect", "/was");
	metacopy(x->upper, "now/f", 9, NULL);
	/* A large one with a hole, which the copy keeps. */
	path_of(p, x->oldbot, "data/big");
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "head", 4, 0), 4);
	assert_int_equal(pwrite(fd, "tail", 4, BIG_SIZE - 4), 4);
	close(fd);
	metacopy(x->upper, "data/big", BIG_SIZE, NULL);
	/* The client's own file: no metacopy, untouched (its ctime too). */
	put(x->upper, "data/own", "client's own", 0600);
	path_of(p, x->upper, "data/own");
	assert_int_equal(lstat(p, &own), 0);
	before = snapshot(x->oldtop);
	after = snapshot(x->oldbot);
	before = realloc(before, strlen(before) + strlen(after) + 1);
	strcat(before, after);
	free(after);

	assert_int_equal(complete(x, &done, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(done, 7);
	whole(x->upper, "data/bypath", "by its own path\n", 16);
	whole(x->upper, "data/both", "top's", 5);
	whole(x->upper, "data/abs", "absolute redirect", 17);
	whole(x->upper, "data/after_rename", "plain redirect", 14);
	whole(x->upper, "data/cut", "0123", 4);
	whole(x->upper, "now/f", "moved dir", 9);
	big = calloc(1, BIG_SIZE);
	assert_non_null(big);
	memcpy(big, "head", 4);
	memcpy(big + BIG_SIZE - 4, "tail", 4);
	whole(x->upper, "data/big", big, BIG_SIZE);
	free(big);
	path_of(p, x->upper, "data/big");
	assert_int_equal(lstat(p, &st), 0);
	assert_true((uint64_t)st.st_blocks * 512 < BIG_SIZE / 2);
	/* The directory's redirect is the directory's: it stays. */
	assert_true(marked(x->upper, "now", "redirect"));
	path_of(p, x->upper, "data/own");
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_ctim.tv_sec, own.st_ctim.tv_sec);
	assert_int_equal(st.st_ctim.tv_nsec, own.st_ctim.tv_nsec);
	holds(x->upper, "data/own", "client's own", 12);

	after = snapshot(x->oldtop);
	{
		char *bot = snapshot(x->oldbot);

		after = realloc(after, strlen(after) + strlen(bot) + 1);
		strcat(after, bot);
		free(bot);
	}
	assert_string_equal(before, after);
	free(after);

	/* Done once: nothing is left to do, and the upper stays as it is. */
	after = snapshot(x->upper);
	assert_int_equal(complete(x, &done, err, sizeof(err)), 0);
	assert_int_equal(done, 0);
	{
		char *again = snapshot(x->upper);

		assert_string_equal(after, again);
		free(again);
	}
	free(after);
	free(before);
}

/* Metacopies with no data in the old stack are left and reported; the others are done. */
static void test_missing(void **state)
{
	struct mx *x = *state;
	char err[512];
	int done = -1;

	mkd(x->oldtop, "data");
	mkd(x->oldbot, "data");
	mkd(x->upper, "data");
	/* Whited out in the top branch: the bottom's copy does not show. */
	put(x->oldbot, "data/gone", "hidden", 0644);
	whiteout(x->oldtop, "data/gone");
	metacopy(x->upper, "data/gone", 6, NULL);
	/* An OCI whiteout hides it the same way. */
	put(x->oldbot, "data/oci", "hidden", 0644);
	put(x->oldtop, "data/.wh.oci", "", 0644);
	metacopy(x->upper, "data/oci", 6, NULL);
	/* Under an opaque directory of the top branch. */
	mkd(x->oldtop, "opq");
	mark(x->oldtop, "opq", "opaque", "y");
	mkd(x->oldbot, "opq");
	put(x->oldbot, "opq/f", "hidden", 0644);
	mkd(x->upper, "opq");
	metacopy(x->upper, "opq/f", 6, NULL);
	/* A redirect to nothing, and one to a directory. */
	metacopy(x->upper, "data/nowhere", 6, "/no/such");
	mkd(x->oldbot, "adir");
	metacopy(x->upper, "data/todir", 6, "/adir");
	/* In an opaque directory of the client's: its own path has no base. */
	put(x->oldbot, "data/f2", "hidden", 0644);
	mkd(x->upper, "mine");
	mark(x->upper, "mine", "opaque", "y");
	metacopy(x->upper, "mine/f2", 6, NULL);
	/* ... but an absolute redirect still has. */
	metacopy(x->upper, "mine/abs", 6, "/data/f2");
	/* Empty: the union reads no data for it, so none is needed. */
	metacopy(x->upper, "data/empty", 0, NULL);
	/* One that can be done, between them. */
	put(x->oldbot, "data/ok", "fine", 0644);
	metacopy(x->upper, "data/ok", 4, NULL);

	assert_int_equal(complete(x, &done, err, sizeof(err)), -ENOENT);
	assert_int_equal(done, 2);
	whole(x->upper, "data/ok", "fine", 4);
	whole(x->upper, "mine/abs", "hidden", 6);
	/* The first in the walk's order is named, with what to do. */
	assert_non_null(strstr(err, "/data/gone"));
	assert_non_null(strstr(err, "take-base"));
	assert_non_null(strstr(err, "old base"));
	still_metacopy(x->upper, "data/gone", 6);
	still_metacopy(x->upper, "data/oci", 6);
	still_metacopy(x->upper, "opq/f", 6);
	still_metacopy(x->upper, "data/nowhere", 6);
	assert_true(marked(x->upper, "data/nowhere", "redirect"));
	still_metacopy(x->upper, "data/todir", 6);
	still_metacopy(x->upper, "mine/f2", 6);
	still_metacopy(x->upper, "data/empty", 0);

	/* Again: the same report, nothing more done. */
	assert_int_equal(complete(x, &done, err, sizeof(err)), -ENOENT);
	assert_int_equal(done, 0);
	assert_non_null(strstr(err, "/data/gone"));
}

/*
 * What completion leaves alone: the union's own names, whiteouts, what a symlink points
 * at; and a run killed after the copy, before the marker went, is finished.
 */
static void test_internal_and_crash(void **state)
{
	struct mx *x = *state;
	char err[512], p[PATH_MAX];
	int done = -1;

	mkd(x->oldbot, "data");
	put(x->oldbot, "data/f", "base data", 0644);
	put(x->oldbot, "data/.wh..unionnfsd.tmp1", "base data", 0644);
	put(x->oldbot, "data/.wh.x", "base data", 0644);
	put(x->oldbot, ".unionnfsd.work", "base data", 0644);
	mkd(x->upper, "data");
	/* Temporary and marker names, and the work directory, even when marked. */
	metacopy(x->upper, "data/.wh..unionnfsd.tmp1", 9, NULL);
	metacopy(x->upper, "data/.wh.x", 9, NULL);
	mkd(x->upper, ".unionnfsd.work");
	metacopy(x->upper, ".unionnfsd.work/f", 9, NULL);
	whiteout(x->upper, "data/w");
	/* A symlink to a directory with a metacopy in it: not followed. */
	put(x->outside, "f", "", 0644);
	mark(x->outside, "f", "metacopy", "");
	path_of(p, x->outside, "f");
	assert_int_equal(truncate(p, 9), 0);
	path_of(p, x->upper, "data/sl");
	assert_int_equal(symlink(x->outside, p), 0);
	put(x->oldbot, "data/sl", "x", 0644);
	/* Killed after its data was in and its times were set back, before the marker went. */
	metacopy(x->upper, "data/f", 9, NULL);
	path_of(p, x->upper, "data/f");
	{
		int fd = open(p, O_WRONLY);

		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, "base data", 9, 0), 9);
		assert_int_equal(futimens(fd, mc_times), 0);
		close(fd);
	}
	assert_int_equal(chmod(p, MC_MODE), 0);

	assert_int_equal(complete(x, &done, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(done, 1);
	whole(x->upper, "data/f", "base data", 9);
	still_metacopy(x->upper, "data/.wh..unionnfsd.tmp1", 9);
	still_metacopy(x->upper, "data/.wh.x", 9);
	still_metacopy(x->upper, ".unionnfsd.work/f", 9);
	still_metacopy(x->outside, "f", 9);
}

/* Sets or clears a file's immutable flag: 0, or -1 where the file system has none. */
static int immutable(const char *root, const char *rel, bool on)
{
	char p[PATH_MAX];
	int fd, flags, r = -1;

	path_of(p, root, rel);
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	assert_true(fd >= 0);
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
		r = ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
	return r;
}

/* A metacopy that cannot be written is told (with its path) after the others are done. */
static void test_unwritable(void **state)
{
	struct mx *x = *state;
	char err[512];
	int done = -1;

	mkd(x->oldbot, "data");
	put(x->oldbot, "data/a", "aaaa", 0644);
	put(x->oldbot, "data/b", "bbbb", 0644);
	put(x->oldbot, "data/c", "cccc", 0644);
	mkd(x->upper, "data");
	metacopy(x->upper, "data/a", 4, NULL);
	metacopy(x->upper, "data/b", 4, NULL);
	metacopy(x->upper, "data/c", 4, NULL);
	if (immutable(x->upper, "data/b", true) < 0)
		skip(); /* no immutable flag on this file system */

	assert_int_equal(complete(x, &done, err, sizeof(err)), -EPERM);
	assert_int_equal(immutable(x->upper, "data/b", false), 0);
	assert_int_equal(done, 2);
	assert_non_null(strstr(err, "/data/b"));
	assert_non_null(strstr(err, "writable"));
	whole(x->upper, "data/a", "aaaa", 4);
	whole(x->upper, "data/c", "cccc", 4);
	still_metacopy(x->upper, "data/b", 4);

	assert_int_equal(complete(x, &done, err, sizeof(err)), 0);
	assert_int_equal(done, 1);
	whole(x->upper, "data/b", "bbbb", 4);
}

/* Bad arguments are refused with the cause. */
static void test_errors(void **state)
{
	struct mx *x = *state;
	char err[512], *old[] = { x->oldtop }, *bad[] = { "/nonexistent/base" };
	int done = -1;

	assert_int_equal(union_complete_metacopies(x->upper, old, 0, &done, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(done, 0);
	assert_non_null(strstr(err, "branches"));
	assert_int_equal(union_complete_metacopies(x->upper, bad, 1, &done, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/base"));
	assert_int_equal(union_complete_metacopies("/nonexistent/upper", old, 1, &done, err,
						   sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/upper"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_complete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_internal_and_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
