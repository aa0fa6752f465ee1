/* fsio: one name at a time, never following a symlink. */
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cred.h"
#include "fsio.h"
#include "../no_fchmodat2.h"
#include "../rmtree.h"

struct fx {
	char dir[PATH_MAX];
	int fd;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char canon[PATH_MAX];

	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_fsio.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(fsio_open_root(f->dir, canon, sizeof(canon), &f->fd), 0);
	assert_string_equal(canon, f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fsio_close(f->fd);
	rm_tree(f->dir);
	free(f);
	return 0;
}

static void test_root(void **state)
{
	char canon[PATH_MAX], small[4];
	int fd;

	(void)state;
	assert_int_equal(fsio_open_root("/nonexistent/x", canon, sizeof(canon), &fd), -ENOENT);
	assert_int_equal(fsio_open_root("/etc/passwd", canon, sizeof(canon), &fd), -ENOTDIR);
	assert_int_equal(fsio_open_root("/tmp/../tmp", canon, sizeof(canon), &fd), 0);
	assert_string_equal(canon, "/tmp");
	fsio_close(fd);
	assert_int_equal(fsio_open_root("/tmp", small, sizeof(small), &fd), -ENAMETOOLONG);
}

/* A directory named by path: made with its mode, or found, through symlinks too. */
static void test_make_root(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX + 32];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/state", f->dir);
	assert_int_equal(fsio_make_root(path, 0700), 1);
	assert_int_equal(fsio_statat(f->fd, "state", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(fsio_make_root(path, 0700), 0);
	assert_int_equal(fsio_symlink("state", f->fd, "link"), 0);
	snprintf(path, sizeof(path), "%s/link", f->dir);
	assert_int_equal(fsio_make_root(path, 0700), 0);
	assert_int_equal(fsio_open_file(f->fd, "file", O_WRONLY | O_CREAT, 0644, &fd), 0);
	fsio_close(fd);
	snprintf(path, sizeof(path), "%s/file", f->dir);
	assert_int_equal(fsio_make_root(path, 0700), -ENOTDIR);
	assert_int_equal(fsio_symlink("missing", f->fd, "dangling"), 0);
	snprintf(path, sizeof(path), "%s/dangling", f->dir);
	assert_int_equal(fsio_make_root(path, 0700), -ENOTDIR);
	/* Only the last component is made. */
	snprintf(path, sizeof(path), "%s/missing/state", f->dir);
	assert_int_equal(fsio_make_root(path, 0700), -ENOENT);
}

/* Blocks allocated up front, and the instance lock one open file at a time. */
static void test_allocate_and_lock(void **state)
{
	struct fx *f = *state;
	struct stat st;
	int fd, other;

	assert_int_equal(fsio_open_file(f->fd, "f", O_RDWR | O_CREAT, 0600, &fd), 0);
	assert_int_equal(fsio_allocate(fd, 0, 8192), 0);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_int_equal(st.st_size, 8192);
	assert_true(st.st_blocks * 512 >= 8192);
	/* A range inside the file leaves its size alone. */
	assert_int_equal(fsio_allocate(fd, 0, 1024), 0);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_int_equal(st.st_size, 8192);
	assert_int_equal(fsio_allocate(fd, (uint64_t)INT64_MAX, 2), -EFBIG);

	assert_int_equal(fsio_open_file(f->fd, "f", O_RDWR, 0, &other), 0);
	assert_int_equal(fsio_try_lock(fd), 0);
	assert_int_equal(fsio_try_lock(fd), 0);
	assert_int_equal(fsio_try_lock(other), -EWOULDBLOCK);
	fsio_close(fd);
	assert_int_equal(fsio_try_lock(other), 0);
	fsio_close(other);
}

static void test_symlinks_not_followed(void **state)
{
	struct fx *f = *state;
	char buf[64];
	struct stat st;
	size_t len;
	int fd;

	assert_int_equal(fsio_mkdir(f->fd, "d", 0755), 0);
	assert_int_equal(fsio_symlink("d", f->fd, "ld"), 0);
	assert_int_equal(fsio_symlink("/etc/passwd", f->fd, "lf"), 0);
	assert_int_equal(fsio_open_dir(f->fd, "ld", &fd), -ENOTDIR);
	assert_int_equal(fsio_open_dir(f->fd, "lf", &fd), -ENOTDIR);
	assert_int_equal(fsio_open_file(f->fd, "lf", O_RDONLY, 0, &fd), -ELOOP);
	assert_int_equal(fsio_open_file(f->fd, "lf", O_WRONLY | O_CREAT, 0644, &fd), -ELOOP);
	assert_int_equal(fsio_statat(f->fd, "ld", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(fsio_chmod(f->fd, "lf", 0600), -EOPNOTSUPP);
	assert_int_equal(fsio_open_node(f->fd, "lf", &fd), 0);
	assert_int_equal(fsio_readlink(fd, "", buf, sizeof(buf), &len), 0);
	assert_string_equal(buf, "/etc/passwd");
	assert_int_equal(len, 11);
	assert_int_equal(fsio_readlink(fd, "", buf, 5, &len), -ENAMETOOLONG);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	fsio_close(fd);
	assert_int_equal(fsio_open_dir(f->fd, "d", &fd), 0);
	assert_int_equal(fsio_chmod(fd, "", 0700), 0);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(fsio_fsync_dir(fd), 0);
	fsio_close(fd);
}

static void test_files(void **state)
{
	struct fx *f = *state;
	struct timespec ts[2] = { { 100, 0 }, { 200, 0 } };
	char buf[16];
	struct stat st;
	size_t n;
	int fd;

	assert_int_equal(fsio_open_file(f->fd, "f", O_CREAT | O_EXCL | O_RDWR, 0640, &fd), 0);
	assert_int_equal(fsio_pwrite(fd, "abcdef", 6, 0, &n), 0);
	assert_int_equal(n, 6);
	assert_int_equal(fsio_pread(fd, buf, sizeof(buf), 2, &n), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "cdef", 4);
	assert_int_equal(fsio_fdatasync(fd), 0);
	assert_int_equal(fsio_ftruncate(fd, 2), 0);
	assert_int_equal(fsio_futimens(fd, ts), 0);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_int_equal(st.st_size, 2);
	assert_int_equal(st.st_mtim.tv_sec, 200);
	fsio_close(fd);
	assert_int_equal(fsio_open_file(f->fd, "f", O_CREAT | O_EXCL | O_RDWR, 0640, &fd), -EEXIST);
	assert_int_equal(fsio_link(f->fd, "f", f->fd, "g"), 0);
	assert_int_equal(fsio_statat(f->fd, "g", &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(fsio_rename(f->fd, "g", f->fd, "f", true), -EEXIST);
	assert_int_equal(fsio_rename(f->fd, "g", f->fd, "h", true), 0);
	assert_int_equal(fsio_unlink(f->fd, "h", false), 0);
	assert_int_equal(fsio_unlink(f->fd, "h", false), -ENOENT);
	assert_int_equal(fsio_mknod(f->fd, "p", S_IFIFO | 0600, 0), 0);
	/* A fifo must not block the worker that opens it. */
	assert_int_equal(fsio_open_file(f->fd, "p", O_RDONLY, 0, &fd), 0);
	fsio_close(fd);
	assert_int_equal(fsio_chown(f->fd, "p", (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fsio_utimens(f->fd, "p", ts), 0);
	assert_int_equal(fsio_chmod(f->fd, "p", 0640), 0);
	assert_int_equal(fsio_statat(f->fd, "p", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(fsio_statat(f->fd, "nope", &st), -ENOENT);
}

static void test_copy_sparse(void **state)
{
	struct fx *f = *state;
	static char buf[1 << 20];
	struct stat st;
	size_t n;
	int in, out;

	assert_int_equal(fsio_open_file(f->fd, "src", O_CREAT | O_RDWR, 0644, &in), 0);
	assert_int_equal(fsio_pwrite(in, "head", 4, 0, &n), 0);
	assert_int_equal(fsio_pwrite(in, "tail", 4, 8 << 20, &n), 0);
	assert_int_equal(fsio_open_file(f->fd, "dst", O_CREAT | O_RDWR, 0644, &out), 0);
	assert_int_equal(fsio_copy_data(in, out, (8 << 20) + 4), 0);
	assert_int_equal(fsio_stat(out, &st), 0);
	assert_int_equal(st.st_size, (8 << 20) + 4);
	assert_true(st.st_blocks * 512 < (4 << 20)); /* the hole stayed a hole */
	assert_int_equal(fsio_pread(out, buf, 4, 0, &n), 0);
	assert_memory_equal(buf, "head", 4);
	assert_int_equal(fsio_pread(out, buf, sizeof(buf), 1 << 20, &n), 0);
	assert_int_equal(n, sizeof(buf));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(fsio_pread(out, buf, 16, 8 << 20, &n), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "tail", 4);
	/* Empty and short copies. */
	assert_int_equal(fsio_ftruncate(out, 0), 0);
	assert_int_equal(fsio_copy_data(in, out, 2), 0);
	assert_int_equal(fsio_stat(out, &st), 0);
	assert_int_equal(st.st_size, 2);
	fsio_close(in);
	fsio_close(out);
}

static void test_dir_listing(void **state)
{
	struct fx *f = *state;
	struct fsio_dir *d;
	const char *name;
	unsigned char type;
	uint64_t ino;
	int seen = 0, r;
	struct stat st;

	assert_int_equal(fsio_mkdir(f->fd, "sub", 0755), 0);
	assert_int_equal(fsio_mknod(f->fd, "p", S_IFIFO | 0600, 0), 0);
	assert_int_equal(fsio_dir_open(f->fd, &d), 0);
	while ((r = fsio_dir_next(d, &name, &type, &ino)) == 1) {
		assert_true(strcmp(name, ".") && strcmp(name, ".."));
		assert_int_equal(fsio_statat(f->fd, name, &st), 0);
		assert_int_equal(st.st_ino, ino);
		seen++;
	}
	assert_int_equal(r, 0);
	assert_int_equal(seen, 2);
	fsio_dir_close(d);
}

static void test_xattrs(void **state)
{
	struct fx *f = *state;
	char buf[64];
	struct stat st;
	size_t len;
	int fd;

	assert_int_equal(fsio_mkdir(f->fd, "d", 0755), 0);
	assert_int_equal(fsio_symlink("d", f->fd, "l"), 0);
	assert_int_equal(fsio_setxattr(f->fd, "d", "user.a", "one", 3), 0);
	assert_int_equal(fsio_getxattr(f->fd, "d", "user.a", buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(buf, "one", 3);
	assert_int_equal(fsio_getxattr(f->fd, "d", "user.a", buf, 1, &len), -ERANGE);
	assert_int_equal(fsio_getxattr(f->fd, "d", "user.b", buf, sizeof(buf), &len), -ENODATA);
	/* The directory itself through its own fd, and never through a symlink. */
	assert_int_equal(fsio_open_dir(f->fd, "d", &fd), 0);
	assert_int_equal(fsio_getxattr(fd, "", "user.a", buf, sizeof(buf), &len), 0);
	assert_int_equal(fsio_listxattr(fd, "", buf, sizeof(buf), &len), 0);
	assert_true(len >= 7);
	assert_non_null(memmem(buf, len, "user.a", 7));
	assert_int_equal(fsio_removexattr(fd, "", "user.a"), 0);
	assert_int_equal(fsio_getxattr(fd, "", "user.a", buf, sizeof(buf), &len), -ENODATA);
	fsio_close(fd);
	assert_true(fsio_getxattr(f->fd, "l", "user.a", buf, sizeof(buf), &len) < 0);
	assert_int_equal(fsio_getxattr(f->fd, "a/b", "user.a", buf, sizeof(buf), &len), -EINVAL);
	/* Exchange and whiteout renames. */
	assert_int_equal(fsio_open_file(f->fd, "f", O_CREAT | O_WRONLY, 0644, &fd), 0);
	fsio_close(fd);
	assert_int_equal(fsio_rename2(f->fd, "f", f->fd, "d", FSIO_EXCHANGE), 0);
	assert_int_equal(fsio_statat(f->fd, "f", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fsio_rename2(f->fd, "d", f->fd, "g", FSIO_WHITEOUT), 0);
	assert_int_equal(fsio_statat(f->fd, "d", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(st.st_rdev, 0);
	assert_int_equal(fsio_statat(f->fd, "g", &st), 0);
	assert_true(S_ISREG(st.st_mode));
}

static mode_t mode_of(int dirfd, const char *name)
{
	struct stat st;

	assert_int_equal(fsio_statat(dirfd, name, &st), 0);
	return st.st_mode & 07777;
}

/* Attribute changes through an fd: the object the fd holds, whatever its name is now. */
static void test_attrs_by_fd(void **state)
{
	struct fx *f = *state;
	struct timespec ts[2] = { { 100, 0 }, { 200, 0 } };
	struct stat st, orig;
	int fd, lfd, wfd;

	assert_int_equal(fsio_open_file(f->fd, "f", O_CREAT | O_EXCL | O_WRONLY, 0600, &wfd), 0);
	fsio_close(wfd);
	assert_int_equal(fsio_open_node(f->fd, "f", &fd), 0);
	assert_int_equal(fsio_stat(fd, &orig), 0);
	assert_int_equal(fsio_chmod(fd, "", 0640), 0);
	assert_int_equal(mode_of(f->fd, "f"), 0640);
	assert_int_equal(fsio_utimens(fd, "", ts), 0);
	assert_int_equal(fsio_chown(fd, "", (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fsio_statat(f->fd, "f", &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 200);

	/* A symlink put at the name since: neither it nor its target is changed. */
	assert_int_equal(fsio_symlink("t", f->fd, "s"), 0);
	assert_int_equal(fsio_open_file(f->fd, "t", O_CREAT | O_EXCL | O_WRONLY, 0600, &wfd), 0);
	fsio_close(wfd);
	assert_int_equal(fsio_rename(f->fd, "s", f->fd, "f", false), 0);
	assert_int_equal(fsio_chmod(fd, "", 0604), 0);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	assert_int_equal(mode_of(f->fd, "t"), 0600);
	assert_int_equal(fsio_chmod(f->fd, "f", 0666), -EOPNOTSUPP);
	assert_int_equal(mode_of(f->fd, "t"), 0600);
	assert_int_equal(fsio_open_node(f->fd, "f", &lfd), 0);
	assert_int_equal(fsio_chmod(lfd, "", 0666), -EOPNOTSUPP);
	assert_int_equal(mode_of(f->fd, "t"), 0600);
	assert_int_equal(fsio_reopen_file(lfd, O_WRONLY, &wfd), -EINVAL);
	fsio_close(lfd);

	/* The file reopened for writing is the unlinked original, not what has its name now. */
	assert_int_equal(fsio_reopen_file(fd, O_WRONLY | O_CREAT, &wfd), 0);
	assert_int_equal(fsio_stat(wfd, &st), 0);
	assert_int_equal(st.st_ino, orig.st_ino);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(fsio_ftruncate(wfd, 3), 0);
	fsio_close(wfd);
	fsio_close(fd);
	assert_int_equal(fsio_open_node(f->fd, ".", &fd), 0);
	assert_int_equal(fsio_reopen_file(fd, O_RDONLY, &wfd), -EISDIR);
	fsio_close(fd);
}

/* The calling thread acts as uid:gid (root can, others stay themselves). */
static void act_as(uid_t uid, gid_t gid)
{
	syscall(SYS_setfsgid, gid);
	syscall(SYS_setfsuid, uid);
}

/*
 * The owner of a directory changes its mode, owner and times whatever its mode, as on a
 * local file system: that needs ownership, not search permission on it.
 */
static void test_owner_attrs_any_dir_mode(void **state)
{
	static const mode_t modes[] = { 0000, 0100, 0200, 0400, 0600 };
	struct fx *f = *state;
	struct timespec ts[2] = { { 300, 0 }, { 400, 0 } };
	struct stat st;
	int fd, rfd;

	if (geteuid() != 0)
		skip(); /* needs another identity to act as */
	assert_int_equal(fsio_mkdir(f->fd, "own", 0755), 0);
	assert_int_equal(fsio_chown(f->fd, "own", 1000, 1000), 0);
	assert_int_equal(fsio_open_dir(f->fd, "own", &fd), 0);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(fsio_chmod(fd, "", modes[i]), 0);
		act_as(1000, 1000);
		assert_int_equal(fsio_chmod(fd, "", 0060), 0);
		assert_int_equal(fsio_chown(fd, "", 1000, 1000), 0);
		assert_int_equal(fsio_utimens(fd, "", ts), 0);
		assert_int_equal(fsio_chmod(fd, "", modes[i]), 0);
		/* listing needs read permission, and only that */
		assert_int_equal(fsio_reopen_dir(fd, &rfd), (modes[i] & 0400) ? 0 : -EACCES);
		fsio_close(rfd);
		act_as(0, 0);
		assert_int_equal(fsio_stat(fd, &st), 0);
		assert_int_equal(st.st_mode & 07777, modes[i]);
		assert_int_equal(st.st_mtim.tv_sec, 400);
	}
	/* someone else's: ownership is still what counts */
	act_as(2000, 2000);
	assert_int_equal(fsio_chmod(fd, "", 0777), -EPERM);
	act_as(0, 0);
	assert_int_equal(fsio_chmod(fd, "", 0755), 0);
	fsio_close(fd);
}

static void test_ids(void **state)
{
	struct fsio_ids ids;
	struct stat st = { 0 };
	char a[64], b[64];

	(void)state;
	assert_int_equal(fsio_random_name("x.", a, sizeof(a)), 0);
	assert_int_equal(fsio_random_name("x.", b, sizeof(b)), 0);
	assert_int_equal(strlen(a), 18);
	assert_string_not_equal(a, b);
	assert_int_equal(fsio_random_name("x.", a, 8), -ENAMETOOLONG);
	fsio_become_root(&ids);
	fsio_restore(&ids);
	st.st_uid = 12345;
	st.st_gid = 12345;
	st.st_mode = S_IFREG | 0600;
	if (geteuid() == 0) {
		assert_true(fsio_owns(&st));
		assert_true(fsio_may(-1, "", &st, R_OK | W_OK));
		assert_false(fsio_may(-1, "", &st, X_OK));
	}
	st.st_uid = geteuid();
	assert_true(fsio_owns(&st));
	assert_true(fsio_may(-1, "", &st, R_OK | W_OK));
}

/* One entry of a POSIX access ACL in the kernel's xattr format (little-endian). */
struct acl_ent {
	uint16_t tag;
	uint16_t perm;
	uint32_t id;
};
enum { A_UOBJ = 1, A_U = 2, A_GOBJ = 4, A_G = 8, A_M = 0x10, A_O = 0x20 };
#define A_NOID 0xffffffffu
#define ACL_MAX 6

/* Sets (n > 0) or removes the access ACL of path; false when the file system has none. */
static bool set_acl(const char *path, const struct acl_ent *e, size_t n)
{
	unsigned char buf[4 + ACL_MAX * 8];
	size_t off = 4;

	if (n == 0)
		return removexattr(path, "system.posix_acl_access") == 0 || errno == ENODATA;
	memset(buf, 0, sizeof(buf));
	buf[0] = 2;
	for (size_t i = 0; i < n; i++, off += 8) {
		buf[off] = (unsigned char)e[i].tag;
		buf[off + 2] = (unsigned char)e[i].perm;
		for (int k = 0; k < 4; k++)
			buf[off + 4 + k] = (unsigned char)(e[i].id >> (8 * k));
	}
	if (setxattr(path, "system.posix_acl_access", buf, off, 0) == 0)
		return true;
	if (errno != EOPNOTSUPP)
		fail_msg("setxattr %s: %s", path, strerror(errno));
	return false;
}

struct acl_case {
	mode_t mode;             /* set before the ACL, which then sets the permission bits */
	size_t n;
	struct acl_ent e[ACL_MAX];
};

static const struct acl_case acl_cases[] = {
	{ 0640, 0, { { 0 } } },
	{ 0604, 0, { { 0 } } },
	{ 0075, 0, { { 0 } } },
	{ 0751, 0, { { 0 } } },
	/* user:3000:rw- with the mask letting it through, then holding back write */
	{ 0600, 5, { { A_UOBJ, 6, A_NOID }, { A_U, 6, 3000 }, { A_GOBJ, 4, A_NOID },
		     { A_M, 6, A_NOID }, { A_O, 0, A_NOID } } },
	{ 0600, 5, { { A_UOBJ, 6, A_NOID }, { A_U, 6, 3000 }, { A_GOBJ, 4, A_NOID },
		     { A_M, 4, A_NOID }, { A_O, 0, A_NOID } } },
	/* group:3000:rwx through a mask of r-x; the owning group has nothing */
	{ 0700, 5, { { A_UOBJ, 7, A_NOID }, { A_GOBJ, 0, A_NOID }, { A_G, 7, 3000 },
		     { A_M, 5, A_NOID }, { A_O, 4, A_NOID } } },
	/* user:3000:--- though "other" may read and write */
	{ 0666, 5, { { A_UOBJ, 6, A_NOID }, { A_U, 0, 3000 }, { A_GOBJ, 6, A_NOID },
		     { A_M, 6, A_NOID }, { A_O, 6, A_NOID } } },
	/* a matching group without the bits wanted refuses, whatever "other" grants */
	{ 0606, 6, { { A_UOBJ, 0, A_NOID }, { A_U, 1, 3001 }, { A_GOBJ, 6, A_NOID },
		     { A_G, 4, 3001 }, { A_M, 7, A_NOID }, { A_O, 7, A_NOID } } },
};

static const struct cred acl_creds[] = {
	{ .cr_uid = 1000, .cr_gid = 1000 },                                   /* owner */
	{ .cr_uid = 3000, .cr_gid = 3000 },
	{ .cr_uid = 3001, .cr_gid = 5, .cr_ngroups = 1, .cr_groups = { 3000 } },
	{ .cr_uid = 4000, .cr_gid = 100 },                                    /* owning group */
	{ .cr_uid = 4000, .cr_gid = 5, .cr_ngroups = 2, .cr_groups = { 7, 3001 } },
	{ .cr_uid = 4001, .cr_gid = 5 },
	{ .cr_uid = 0, .cr_gid = 0 },
};

/* fsio_may against the kernel's own answer as the caller, case by case; 1: ACL mattered. */
static int may_case(int fd, const struct stat *st, const struct cred *cr, const char *what)
{
	static const int masks[] = { R_OK, W_OK, X_OK, R_OK | W_OK, R_OK | X_OK,
				     R_OK | W_OK | X_OK };
	int acl_mattered = 0, kernel;
	bool ours;

	assert_int_equal(cred_apply(cr), 0);
	for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
		kernel = fsio_access(fd, masks[m]);
		ours = fsio_may(fd, "", st, masks[m]);
		if ((kernel == 0) != ours) {
			cred_restore();
			fail_msg("%s mode %o uid %u mask %d: kernel %d, fsio_may %d", what,
				 (unsigned)st->st_mode, cr->cr_uid, masks[m], kernel, ours);
		}
		if (ours != fsio_may(-1, "", st, masks[m]))
			acl_mattered = 1;
	}
	cred_restore();
	return acl_mattered;
}

/*
 * fsio_may answers as the kernel does for the caller (faccessat2 with AT_EACCESS), POSIX
 * ACLs included: it decides for copies on read-only branches, where the kernel cannot be
 * asked about writing, and on kernels without faccessat2.
 */
static void test_may_as_kernel(void **state)
{
	struct fx *f = *state;
	const char *names[] = { "file", "dir" };
	char path[PATH_MAX + 8];
	int fd, mattered = 0;
	struct stat st;

	if (geteuid() != 0)
		skip(); /* acting as other users needs root */
	snprintf(path, sizeof(path), "%s/file", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/dir", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	for (size_t o = 0; o < 2; o++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, names[o]);
		assert_int_equal(chown(path, 1000, 100), 0);
	}
	/* The users must be able to reach the objects (search on the directory above). */
	assert_int_equal(chmod(f->dir, 0711), 0);
	for (size_t o = 0; o < 2; o++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, names[o]);
		assert_int_equal(fsio_open_node(f->fd, names[o], &fd), 0);
		if (fsio_access(fd, R_OK) == -ENOSYS)
			skip(); /* no faccessat2 (before Linux 5.8): no kernel answer to compare */
		for (size_t c = 0; c < sizeof(acl_cases) / sizeof(acl_cases[0]); c++) {
			const struct acl_case *k = &acl_cases[c];

			assert_int_equal(chmod(path, k->mode), 0);
			if (!set_acl(path, k->e, k->n))
				skip(); /* no POSIX ACLs on /tmp */
			assert_int_equal(fsio_stat(fd, &st), 0);
			for (size_t i = 0; i < sizeof(acl_creds) / sizeof(acl_creds[0]); i++)
				mattered |= may_case(fd, &st, &acl_creds[i], names[o]);
		}
		fsio_close(fd);
	}
	/* Not a test of the mode bits alone: some answers came from the ACLs. */
	assert_true(mattered);
}


/* Creates an empty file at path (relative to dirfd): set-up, so by path. */
static void touch_at(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	close(fd);
}

/* A directory outside the fixture's tree, standing for what a planted link points at. */
static void outside_dir(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/test_fsio_outside.XXXXXX");
	assert_non_null(mkdtemp(dir));
}

static void test_mkdir_p(void **state)
{
	struct fx *f = *state;
	char outside[PATH_MAX], abs[PATH_MAX + 16], path[PATH_MAX + 32];
	struct stat st;
	int fd;

	assert_int_equal(fsio_mkdir_p(f->fd, "a/b//./c/", 0750, &fd), 1);
	assert_int_equal(fsio_stat(fd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0750);
	fsio_close(fd);
	assert_int_equal(fsio_mkdir_p(f->fd, "a/b/c", 0750, NULL), 0);
	assert_int_equal(fsio_mkdir_p(f->fd, "a/b/d", 0700, NULL), 1);
	snprintf(abs, sizeof(abs), "%s/x/y", f->dir);
	assert_int_equal(fsio_mkdir_p(-1, abs, 0755, NULL), 1);
	assert_int_equal(fsio_statat(f->fd, "x", &st), 0);
	assert_true(S_ISDIR(st.st_mode));

	/* A file, or a symlink to a directory, is no directory to make below. */
	assert_int_equal(fsio_open_file(f->fd, "file", O_WRONLY | O_CREAT, 0644, &fd), 0);
	fsio_close(fd);
	assert_int_equal(fsio_mkdir_p(f->fd, "file/z", 0755, NULL), -ENOTDIR);
	outside_dir(outside, sizeof(outside));
	assert_int_equal(fsio_symlink(outside, f->fd, "link"), 0);
	assert_int_equal(fsio_mkdir_p(f->fd, "link/z", 0755, NULL), -ENOTDIR);
	assert_int_equal(fsio_mkdir_p(f->fd, "link", 0755, NULL), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/z", outside);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(rmdir(outside), 0);
}

/*
 * A tree with a client's symlinks in it: to a directory outside (with a file in it), to a
 * file outside, and the top named through a link. The links go; what they point at stays.
 */
static void test_remove_tree_keeps_link_targets(void **state)
{
	struct fx *f = *state;
	char outside[PATH_MAX], kept[PATH_MAX + 16];
	struct stat st;
	int fd;

	outside_dir(outside, sizeof(outside));
	snprintf(kept, sizeof(kept), "%s/kept", outside);
	touch_at(AT_FDCWD, kept);
	assert_int_equal(fsio_mkdir_p(f->fd, "t/d1/d2/d3", 0755, NULL), 1);
	assert_int_equal(fsio_mkdir_p(f->fd, "t/empty", 0755, NULL), 1);
	assert_int_equal(fsio_mkdir_p(f->fd, "t/d1", 0755, &fd), 0);
	for (int i = 0; i < 50; i++) {
		char name[16];
		int ffd;

		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(fsio_open_file(fd, name, O_WRONLY | O_CREAT, 0644, &ffd), 0);
		fsio_close(ffd);
	}
	assert_int_equal(fsio_symlink(outside, fd, "to_outside_dir"), 0);
	assert_int_equal(fsio_symlink(kept, fd, "to_outside_file"), 0);
	assert_int_equal(fsio_mknod(fd, "fifo", S_IFIFO | 0600, 0), 0);
	fsio_close(fd);
	/* Not writable by its owner: root removes it all the same, as the views' reset did. */
	assert_int_equal(fsio_mkdir_p(f->fd, "t/d1/d2/ro", 0555, NULL), 1);
	assert_int_equal(fsio_symlink(outside, f->fd, "toplink"), 0);

	assert_int_equal(fsio_remove_tree(f->fd, "t"), 0);
	assert_int_equal(fsio_statat(f->fd, "t", &st), -ENOENT);
	/* The top a symlink: the link goes, the directory it points at is not entered. */
	assert_int_equal(fsio_remove_tree(f->fd, "toplink"), 0);
	assert_int_equal(fsio_statat(f->fd, "toplink", &st), -ENOENT);
	assert_int_equal(stat(kept, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(fsio_remove_tree(f->fd, "t"), -ENOENT);
	assert_int_equal(unlink(kept), 0);
	assert_int_equal(rmdir(outside), 0);
}

/* A mount point inside stays, with what holds it; the rest goes. */
static void test_remove_tree_stays_on_its_file_system(void **state)
{
	struct fx *f = *state;
	char mnt[PATH_MAX + 16];
	struct stat st;

	assert_int_equal(fsio_mkdir_p(f->fd, "t/a/mnt", 0755, NULL), 1);
	touch_at(f->fd, "t/gone");
	snprintf(mnt, sizeof(mnt), "%s/t/a/mnt", f->dir);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0) {
		fprintf(stderr, "SKIP mount point case: cannot mount a tmpfs: %s\n", strerror(errno));
		return;
	}
	touch_at(f->fd, "t/a/mnt/inside");
	assert_int_equal(fsio_remove_tree(f->fd, "t"), -EBUSY);
	assert_int_equal(fstatat(f->fd, "t/gone", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(fstatat(f->fd, "t/a/mnt/inside", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(umount(mnt), 0);
	assert_int_equal(fsio_remove_tree(f->fd, "t"), 0);
}

/* The attribute tests, which run again where fchmodat2 fails as before Linux 6.6. */
static const struct CMUnitTest attr_tests[] = {
	cmocka_unit_test_setup_teardown(test_symlinks_not_followed, setup, teardown),
	cmocka_unit_test_setup_teardown(test_files, setup, teardown),
	cmocka_unit_test_setup_teardown(test_attrs_by_fd, setup, teardown),
	cmocka_unit_test_setup_teardown(test_owner_attrs_any_dir_mode, setup, teardown),
};

static void test_no_fchmodat2_in_child(void **state)
{
	(void)state;
	assert_int_equal(syscall(SYS_fchmodat2, AT_FDCWD, "/", 0755, 0), -1);
	assert_int_equal(errno, ENOSYS);
}

static int run_without_fchmodat2(void)
{
	const struct CMUnitTest check[] = { cmocka_unit_test(test_no_fchmodat2_in_child) };
	int status, r;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		r = test_no_fchmodat2();
		if (r < 0) {
			fprintf(stderr, "cannot make fchmodat2 fail (seccomp): %s\n", strerror(-r));
			_exit(1);
		}
		r = cmocka_run_group_tests_name("no_fchmodat2", check, NULL, NULL);
		r += cmocka_run_group_tests_name("attrs_no_fchmodat2", attr_tests, NULL, NULL);
		_exit(r ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* The descriptors a shedder may give back, and how often it was asked. */
static int shed_fds[4096];
static int shed_n, shed_calls, shed_gives;

/* Takes every descriptor left (below the limit) into shed_fds. */
static void take_all(int from)
{
	int fd;

	while (shed_n < (int)(sizeof(shed_fds) / sizeof(shed_fds[0])) &&
	       (fd = dup(from)) >= 0)
		shed_fds[shed_n++] = fd;
	assert_int_equal(errno, EMFILE);
}

static void shed_some(void)
{
	shed_calls++;
	for (int i = 0; i < shed_gives && shed_n > 0; i++)
		close(shed_fds[--shed_n]);
}

/*
 * Out of descriptors, a call that makes one asks the shedder once and tries again: it
 * succeeds when the shedder freed one, and fails with -EMFILE (asking once only) when not.
 */
static void test_shed_on_emfile(void **state)
{
	struct fx *f = *state;
	struct rlimit old, low;
	int fd, r;

	assert_true(fsio_short_of_resources(-EMFILE) && fsio_short_of_resources(ENFILE) &&
		    fsio_short_of_resources(-ENOMEM));
	assert_false(fsio_short_of_resources(-ENOENT) || fsio_short_of_resources(-ESTALE) ||
		     fsio_short_of_resources(0));
	assert_int_equal(mkdirat(f->fd, "d", 0755), 0);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	shed_n = shed_calls = 0;
	take_all(f->fd);

	/* No shedder: nothing to retry. */
	assert_int_equal(fsio_open_dir(f->fd, "d", &fd), -EMFILE);
	fsio_set_shedder(shed_some);
	shed_gives = 0;
	assert_int_equal(fsio_dup(f->fd, &fd), -EMFILE);
	assert_int_equal(shed_calls, 1);
	shed_gives = 1;
	r = fsio_open_dir(f->fd, "d", &fd);
	assert_int_equal(r, 0);
	assert_int_equal(shed_calls, 2);
	fsio_close(fd);
	take_all(f->fd);
	r = fsio_reopen_dir(f->fd, &fd);
	assert_int_equal(r, 0);
	assert_int_equal(shed_calls, 3);
	fsio_close(fd);
	/* Anything but a shortage is no reason to shed. */
	assert_int_equal(fsio_open_node(f->fd, "missing", &fd), -ENOENT);
	assert_int_equal(shed_calls, 3);

	fsio_set_shedder(NULL);
	while (shed_n > 0)
		close(shed_fds[--shed_n]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* Changes in two directories from several threads, each flushed with the shared sync. */
#define SHARED_THREADS 6
#define SHARED_ROUNDS 40

struct shared_arg {
	int sa_dirfd;
	int sa_id;
	int sa_failed;
};

static void *shared_syncer(void *arg)
{
	struct shared_arg *a = arg;
	char name[32];
	int fd;

	for (int k = 0; k < SHARED_ROUNDS; k++) {
		snprintf(name, sizeof(name), "t%d-%d", a->sa_id, k);
		if (fsio_open_file(a->sa_dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644, &fd) < 0 ||
		    fsio_fsync_dir_shared(a->sa_dirfd) != 0)
			a->sa_failed++;
		else
			fsio_close(fd);
	}
	return NULL;
}

static void test_fsync_dir_shared(void **state)
{
	struct fx *f = *state;
	struct shared_arg args[SHARED_THREADS];
	pthread_t t[SHARED_THREADS];
	int dirs[2], fd;

	assert_int_equal(fsio_mkdir(f->fd, "a", 0755), 0);
	assert_int_equal(fsio_mkdir(f->fd, "b", 0755), 0);
	assert_int_equal(fsio_open_dir(f->fd, "a", &dirs[0]), 0);
	assert_int_equal(fsio_open_dir(f->fd, "b", &dirs[1]), 0);
	for (int i = 0; i < SHARED_THREADS; i++) {
		args[i] = (struct shared_arg){ .sa_dirfd = dirs[i % 2], .sa_id = i };
		assert_int_equal(pthread_create(&t[i], NULL, shared_syncer, &args[i]), 0);
	}
	for (int i = 0; i < SHARED_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(args[i].sa_failed, 0);
	}
	/* Every file made is there: a flush waited for is never one of the other directory. */
	for (int i = 0; i < SHARED_THREADS; i++) {
		char name[32];
		struct stat st;

		snprintf(name, sizeof(name), "t%d-%d", i, SHARED_ROUNDS - 1);
		assert_int_equal(fsio_statat(dirs[i % 2], name, &st), 0);
		assert_int_equal(fsio_statat(dirs[(i + 1) % 2], name, &st), -ENOENT);
	}
	fsio_close(dirs[0]);
	fsio_close(dirs[1]);
	/* A descriptor that is no longer open says so, as fsio_fsync_dir does. */
	assert_int_equal(fsio_open_dir(f->fd, "a", &fd), 0);
	fsio_close(fd);
	assert_int_equal(fsio_fsync_dir_shared(fd), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root),
		cmocka_unit_test_setup_teardown(test_make_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocate_and_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_sparse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_listing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattrs, setup, teardown),
		cmocka_unit_test(test_ids),
		cmocka_unit_test_setup_teardown(test_shed_on_emfile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_may_as_kernel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree_keeps_link_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree_stays_on_its_file_system, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_dir_shared, setup, teardown),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	failed += cmocka_run_group_tests_name("attrs", attr_tests, NULL, NULL);
	return failed + run_without_fchmodat2();
}
