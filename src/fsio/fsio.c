/* File system system calls, one name relative to a directory fd at a time. */
#include "blocking.h"
#include "fsio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef SYS_faccessat2
#define SYS_faccessat2 439 /* the same number on every architecture */
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* the same number on every architecture */
#endif

#define FSIO_MAX_GROUPS 65536
/* Room for "/proc/self/fd/" and any fd number. */
#define FSIO_PROC_FD_LEN 32

static int fsio_err(void)
{
	return errno ? -errno : -EIO;
}

/* The /proc path of name in dirfd; "" names dirfd itself (the magic link, followed). */
static int fsio_proc_path(int dirfd, const char *name, char *buf, size_t len)
{
	int w;

	if (dirfd < 0 || strchr(name, '/'))
		return -EINVAL;
	if (*name)
		w = snprintf(buf, len, "/proc/self/fd/%d/%s", dirfd, name);
	else
		w = snprintf(buf, len, "/proc/self/fd/%d", dirfd);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

void fsio_init(void)
{
	umask(0);
}

static void (*_Atomic fsio_shedder)(void);

void fsio_set_shedder(void (*shed)(void))
{
	atomic_store(&fsio_shedder, shed);
}

bool fsio_short_of_resources(int err)
{
	if (err < 0)
		err = -err;
	return err == EMFILE || err == ENFILE || err == ENOMEM;
}

void fsio_shed(void)
{
	void (*shed)(void) = atomic_load(&fsio_shedder);

	if (shed)
		shed();
}

/*
 * After a call that makes a descriptor failed: whether to try it once more, because it
 * failed for want of descriptors and the shedder closed cached ones (errno is kept).
 */
static bool fsio_shed_retry(void)
{
	int err = errno;

	if ((err != EMFILE && err != ENFILE) || atomic_load(&fsio_shedder) == NULL)
		return false;
	fsio_shed();
	errno = err;
	return true;
}

int fsio_open_root(const char *path, char *canon, size_t canonlen, int *fd)
{
	char buf[PATH_MAX];

	if (!realpath(path, buf))
		return fsio_err();
	if (strlen(buf) >= canonlen)
		return -ENAMETOOLONG;
	strcpy(canon, buf);
	*fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0 && fsio_shed_retry())
		*fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *fd < 0 ? fsio_err() : 0;
}

int fsio_make_root(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 1;
	if (errno != EEXIST)
		return fsio_err();
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int fsio_open_dir(int dirfd, const char *name, int *fd)
{
	*fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && fsio_shed_retry())
		*fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd >= 0)
		return 0;
	/* A symlink is not a directory to us, whatever it points at. */
	return errno == ELOOP ? -ENOTDIR : fsio_err();
}

int fsio_open_node(int dirfd, const char *name, int *fd)
{
	*fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && fsio_shed_retry())
		*fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return *fd < 0 ? fsio_err() : 0;
}

int fsio_open_file(int dirfd, const char *name, int flags, mode_t mode, int *fd)
{
	const int always = O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
	struct stat st;

	*fd = openat(dirfd, name, flags | always | O_NONBLOCK, mode);
	if (*fd < 0 && fsio_shed_retry())
		*fd = openat(dirfd, name, flags | always | O_NONBLOCK, mode);
	/*
	 * A regular file under a lease answers a non-blocking open with EWOULDBLOCK; wait
	 * for the lease break like any other opener (the kernel bounds it).
	 */
	if (*fd < 0 && errno == EWOULDBLOCK && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode))
		*fd = openat(dirfd, name, (flags & ~(O_CREAT | O_EXCL)) | always, mode);
	return *fd < 0 ? fsio_err() : 0;
}

int fsio_watch_open(int *fd)
{
	*fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	return *fd < 0 ? fsio_err() : 0;
}

int fsio_watch_dir(int watchfd, int pathfd, uint32_t mask, int *wd)
{
	char path[FSIO_PROC_FD_LEN];
	int r;

	r = fsio_proc_path(pathfd, "", path, sizeof(path));
	if (r < 0)
		return r;
	*wd = inotify_add_watch(watchfd, path, mask | IN_ONLYDIR);
	return *wd < 0 ? fsio_err() : 0;
}

void fsio_watch_forget(int watchfd, int wd)
{
	inotify_rm_watch(watchfd, wd);
}

ssize_t fsio_watch_read(int watchfd, void *buf, size_t len)
{
	ssize_t n = read(watchfd, buf, len);

	return n < 0 ? fsio_err() : n;
}

void fsio_watch_wait(int watchfd)
{
	struct pollfd p = { .fd = watchfd, .events = POLLIN };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

int fsio_reopen_dir(int pathfd, int *fd)
{
	char path[FSIO_PROC_FD_LEN];
	int r;

	/*
	 * Through the magic link, not as ".", which would need search permission on the
	 * directory: listing a directory needs only read permission.
	 */
	*fd = -1;
	r = fsio_proc_path(pathfd, "", path, sizeof(path));
	if (r < 0)
		return r;
	*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0 && fsio_shed_retry())
		*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return *fd < 0 ? fsio_err() : 0;
}

int fsio_reopen_file(int pathfd, int flags, int *fd)
{
	const int always = O_NOCTTY | O_CLOEXEC;
	char path[FSIO_PROC_FD_LEN];
	struct stat st;
	int r;

	*fd = -1;
	if (fstat(pathfd, &st) < 0)
		return fsio_err();
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	r = fsio_proc_path(pathfd, "", path, sizeof(path));
	if (r < 0)
		return r;
	flags &= ~(O_CREAT | O_EXCL);
	*fd = open(path, flags | always | O_NONBLOCK);
	if (*fd < 0 && fsio_shed_retry())
		*fd = open(path, flags | always | O_NONBLOCK);
	/* Under a lease: wait for its break like any other opener (the kernel bounds it). */
	if (*fd < 0 && errno == EWOULDBLOCK)
		*fd = open(path, flags | always);
	return *fd < 0 ? fsio_err() : 0;
}

void fsio_close(int fd)
{
	if (fd >= 0)
		close(fd);
}

int fsio_dup(int fd, int *out)
{
	*out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (*out < 0 && fsio_shed_retry())
		*out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return *out < 0 ? fsio_err() : 0;
}

int fsio_stat(int fd, struct stat *st)
{
	return fstat(fd, st) < 0 ? fsio_err() : 0;
}

int fsio_statat(int dirfd, const char *name, struct stat *st)
{
	int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);

	return fstatat(dirfd, name, st, flags) < 0 ? fsio_err() : 0;
}

static struct timespec fsio_ts(const struct statx_timestamp *t)
{
	return (struct timespec){ .tv_sec = t->tv_sec, .tv_nsec = t->tv_nsec };
}

int fsio_statat_birth(int dirfd, const char *name, struct stat *st, int64_t *birth_ns)
{
	int flags = AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT | (*name ? 0 : AT_EMPTY_PATH);
	struct statx sx;

	*birth_ns = 0;
	if (statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0)
		return fsio_err();
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	st->st_ino = sx.stx_ino;
	st->st_mode = sx.stx_mode;
	st->st_nlink = sx.stx_nlink;
	st->st_uid = sx.stx_uid;
	st->st_gid = sx.stx_gid;
	st->st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
	st->st_size = (off_t)sx.stx_size;
	st->st_blksize = (blksize_t)sx.stx_blksize;
	st->st_blocks = (blkcnt_t)sx.stx_blocks;
	st->st_atim = fsio_ts(&sx.stx_atime);
	st->st_mtim = fsio_ts(&sx.stx_mtime);
	st->st_ctim = fsio_ts(&sx.stx_ctime);
	if (sx.stx_mask & STATX_BTIME)
		*birth_ns = (int64_t)sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec;
	return 0;
}

int fsio_ident(int dirfd, const char *name, uint64_t *id)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	uint64_t d = 1469598103934665603ull;
	int mnt, flags = *name ? 0 : AT_EMPTY_PATH;

	*id = 0;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, &h.fh, &mnt, flags) < 0)
		return errno == EOPNOTSUPP ? 0 : fsio_err();
	d = (d ^ (uint32_t)h.fh.handle_type) * 1099511628211ull;
	for (unsigned int i = 0; i < h.fh.handle_bytes; i++)
		d = (d ^ (unsigned char)h.fh.f_handle[i]) * 1099511628211ull;
	*id = d ? d : 1;
	return 0;
}

int fsio_fs_type(int fd, long *type)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return fsio_err();
	*type = (long)sf.f_type;
	return 0;
}

int fsio_statvfs(int fd, struct statvfs *sv)
{
	return fstatvfs(fd, sv) < 0 ? fsio_err() : 0;
}

int fsio_pread(int fd, void *buf, size_t count, uint64_t off, size_t *done)
{
	*done = 0;
	while (*done < count) {
		ssize_t n = pread(fd, (char *)buf + *done, count - *done, (off_t)(off + *done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fsio_err();
		if (n == 0)
			break;
		*done += (size_t)n;
	}
	return 0;
}

int fsio_pwrite(int fd, const void *buf, size_t count, uint64_t off, size_t *done)
{
	*done = 0;
	/* The kernel answers EINVAL past off_t; it is a file that would grow too large. */
	if (off > (uint64_t)INT64_MAX || count > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	while (*done < count) {
		ssize_t n = pwrite(fd, (const char *)buf + *done, count - *done,
				   (off_t)(off + *done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return *done ? 0 : fsio_err();
		if (n == 0)
			return *done ? 0 : -EIO;
		*done += (size_t)n;
	}
	return 0;
}

/*
 * The kernel reports a write-back error to one fsync per open file description, and a
 * descriptor opened after someone saw it hears nothing: so every failure is counted here,
 * whoever's sync it was, for those who promised durability before it (fsio.h).
 */
static _Atomic uint64_t fsio_sync_failed;

static int fsio_sync_result(int rc)
{
	int r = rc < 0 ? fsio_err() : 0;

	/* EBADF and EINVAL say the fd cannot be synced at all, not that data was lost. */
	if (r < 0 && r != -EBADF && r != -EINVAL)
		atomic_fetch_add(&fsio_sync_failed, 1);
	return r;
}

uint64_t fsio_sync_failures(void)
{
	return atomic_load_explicit(&fsio_sync_failed, memory_order_acquire);
}

int fsio_fsync(int fd)
{
	int r;

	blocking_enter();
	r = fsio_sync_result(fsync(fd));
	blocking_leave();
	return r;
}

int fsio_fdatasync(int fd)
{
	int r;

	blocking_enter();
	r = fsio_sync_result(fdatasync(fd));
	blocking_leave();
	return r;
}

int fsio_fsync_dir(int pathfd)
{
	struct fsio_ids ids;
	int fd, r;

	r = fsio_reopen_dir(pathfd, &fd);
	if (r == -EACCES) {
		/* Durability must not depend on the client being allowed to list the directory. */
		fsio_become_root(&ids);
		r = fsio_reopen_dir(pathfd, &fd);
		fsio_restore(&ids);
	}
	if (r < 0)
		return r;
	r = fsio_fsync(fd);
	close(fd);
	return r;
}

/* Whether lseek accepts off: the kernel holds it to the file system's largest file size. */
static bool fsio_seekable(int fd, uint64_t off)
{
	return lseek(fd, (off_t)off, SEEK_SET) == (off_t)off;
}

int fsio_max_file_size(int dirfd, uint64_t *max)
{
	uint64_t ok = 0, bad = (uint64_t)INT64_MAX;
	int fd;

	*max = (uint64_t)INT64_MAX;
	fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return fsio_err();
	if (fsio_seekable(fd, bad))
		ok = bad;
	while (bad - ok > 1) {
		uint64_t mid = ok + (bad - ok) / 2;

		if (fsio_seekable(fd, mid))
			ok = mid;
		else
			bad = mid;
	}
	close(fd);
	*max = ok;
	return 0;
}

int fsio_ftruncate(int fd, uint64_t size)
{
	if (size > (uint64_t)INT64_MAX)
		return -EFBIG;
	return ftruncate(fd, (off_t)size) < 0 ? fsio_err() : 0;
}

int fsio_allocate(int fd, uint64_t off, uint64_t len)
{
	int e;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	/* posix_fallocate returns the error rather than setting errno. */
	e = posix_fallocate(fd, (off_t)off, (off_t)len);
	return -e;
}

int fsio_try_lock(int fd)
{
	return flock(fd, LOCK_EX | LOCK_NB) < 0 ? fsio_err() : 0;
}

/* Copies [off, end) from in to out at the same offsets. */
static int fsio_copy_range(int in, int out, off_t off, off_t end)
{
	static const size_t bufsize = 1 << 20;
	char *buf = NULL;
	int r = 0;

	while (off < end) {
		loff_t ioff = off, ooff = off;
		ssize_t n = copy_file_range(in, &ioff, out, &ooff, (size_t)(end - off), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP))
			break;
		if (n < 0) {
			r = fsio_err();
			goto out;
		}
		if (n == 0) /* the file shrank while we copied */
			goto out;
		off += n;
	}
	if (off < end && !(buf = malloc(bufsize))) {
		r = -ENOMEM;
		goto out;
	}
	while (off < end) {
		size_t want = (size_t)(end - off) < bufsize ? (size_t)(end - off) : bufsize;
		size_t got, put;

		r = fsio_pread(in, buf, want, (uint64_t)off, &got);
		if (r < 0 || got == 0)
			goto out;
		r = fsio_pwrite(out, buf, got, (uint64_t)off, &put);
		if (r < 0)
			goto out;
		if (put < got) {
			r = -EIO;
			goto out;
		}
		off += (off_t)got;
	}
out:
	free(buf);
	return r;
}

static int fsio_copy_data_marked(int in, int out, uint64_t size);

/* Copies the first size bytes of in to out, holes kept, waiting for the disk as it goes. */
int fsio_copy_data(int in, int out, uint64_t size)
{
	int r;

	blocking_enter();
	r = fsio_copy_data_marked(in, out, size);
	blocking_leave();
	return r;
}

static int fsio_copy_data_marked(int in, int out, uint64_t size)
{
	off_t end = (off_t)size, off = 0;
	int r;

	while (off < end) {
		off_t data = lseek(in, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break; /* only a hole remains */
		if (data < 0) {
			/* No hole support: copy everything. */
			r = fsio_copy_range(in, out, off, end);
			if (r < 0)
				return r;
			break;
		}
		if (data >= end)
			break;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0 || hole > end)
			hole = end;
		r = fsio_copy_range(in, out, data, hole);
		if (r < 0)
			return r;
		off = hole;
	}
	return fsio_ftruncate(out, size);
}

int fsio_mkdir(int dirfd, const char *name, mode_t mode)
{
	return mkdirat(dirfd, name, mode) < 0 ? fsio_err() : 0;
}

int fsio_symlink(const char *target, int dirfd, const char *name)
{
	return symlinkat(target, dirfd, name) < 0 ? fsio_err() : 0;
}

int fsio_mknod(int dirfd, const char *name, mode_t mode, dev_t dev)
{
	return mknodat(dirfd, name, mode, dev) < 0 ? fsio_err() : 0;
}

int fsio_unlink(int dirfd, const char *name, bool dir)
{
	return unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? fsio_err() : 0;
}

int fsio_rename(int fromfd, const char *from, int tofd, const char *to, bool noreplace)
{
	return renameat2(fromfd, from, tofd, to, noreplace ? RENAME_NOREPLACE : 0) < 0 ?
		fsio_err() : 0;
}

int fsio_rename2(int fromfd, const char *from, int tofd, const char *to, unsigned how)
{
	unsigned flags = 0;

	if (how & FSIO_EXCHANGE)
		flags |= RENAME_EXCHANGE;
	if (how & FSIO_WHITEOUT)
		flags |= RENAME_WHITEOUT;
	return renameat2(fromfd, from, tofd, to, flags) < 0 ? fsio_err() : 0;
}

int fsio_link(int fromfd, const char *from, int tofd, const char *to)
{
	/* No AT_SYMLINK_FOLLOW: a symlink is linked itself. */
	return linkat(fromfd, from, tofd, to, 0) < 0 ? fsio_err() : 0;
}

int fsio_readlink(int dirfd, const char *name, char *buf, size_t size, size_t *len)
{
	ssize_t n;

	if (size < 2)
		return -ENAMETOOLONG;
	n = readlinkat(dirfd, name, buf, size);
	if (n < 0)
		return fsio_err();
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	*len = (size_t)n;
	return 0;
}

/* Set once fchmodat2 answered ENOSYS (Linux before 6.6): it is not asked again. */
static atomic_bool fsio_no_fchmodat2;

/*
 * Before Linux 6.6: chmod of the magic link /proc/self/fd/N reaches the very object fd
 * holds, with the caller's rights on it and no search permission on it. An fd's type
 * never changes: once it is not a symlink, nothing is followed past it.
 */
static int fsio_chmod_proc(int fd, mode_t mode)
{
	char path[FSIO_PROC_FD_LEN];
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return fsio_err();
	if (S_ISLNK(st.st_mode))
		return -EOPNOTSUPP;
	r = fsio_proc_path(fd, "", path, sizeof(path));
	if (r < 0)
		return r;
	return chmod(path, mode) < 0 ? fsio_err() : 0;
}

int fsio_chmod(int dirfd, const char *name, mode_t mode)
{
	int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
	int fd, r;

	if (!atomic_load_explicit(&fsio_no_fchmodat2, memory_order_relaxed)) {
		if (syscall(SYS_fchmodat2, dirfd, name, mode, flags) == 0)
			return 0;
		if (errno != ENOSYS)
			return fsio_err();
		atomic_store_explicit(&fsio_no_fchmodat2, true, memory_order_relaxed);
	}
	/* fchmodat would follow a symlink put at name: the object is pinned by an fd first. */
	if (!*name)
		return fsio_chmod_proc(dirfd, mode);
	r = fsio_open_node(dirfd, name, &fd);
	if (r < 0)
		return r;
	r = fsio_chmod_proc(fd, mode);
	close(fd);
	return r;
}

int fsio_chown(int dirfd, const char *name, uid_t uid, gid_t gid)
{
	int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);

	return fchownat(dirfd, name, uid, gid, flags) < 0 ? fsio_err() : 0;
}

int fsio_utimens(int dirfd, const char *name, const struct timespec ts[2])
{
	int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);

	return utimensat(dirfd, name, ts, flags) < 0 ? fsio_err() : 0;
}

int fsio_fchmod(int fd, mode_t mode)
{
	return fchmod(fd, mode) < 0 ? fsio_err() : 0;
}

int fsio_fchown(int fd, uid_t uid, gid_t gid)
{
	return fchown(fd, uid, gid) < 0 ? fsio_err() : 0;
}

int fsio_futimens(int fd, const struct timespec ts[2])
{
	return futimens(fd, ts) < 0 ? fsio_err() : 0;
}

int fsio_getxattr(int dirfd, const char *name, const char *attr, void *buf, size_t size,
		  size_t *len)
{
	char path[PATH_MAX];
	ssize_t n;
	int r;

	r = fsio_proc_path(dirfd, name, path, sizeof(path));
	if (r < 0)
		return r;
	n = *name ? lgetxattr(path, attr, buf, size) : getxattr(path, attr, buf, size);
	if (n < 0)
		return fsio_err();
	*len = (size_t)n;
	return 0;
}

int fsio_setxattr(int dirfd, const char *name, const char *attr, const void *val, size_t len)
{
	char path[PATH_MAX];
	int r;

	r = fsio_proc_path(dirfd, name, path, sizeof(path));
	if (r < 0)
		return r;
	r = *name ? lsetxattr(path, attr, val, len, 0) : setxattr(path, attr, val, len, 0);
	return r < 0 ? fsio_err() : 0;
}

int fsio_removexattr(int dirfd, const char *name, const char *attr)
{
	char path[PATH_MAX];
	int r;

	r = fsio_proc_path(dirfd, name, path, sizeof(path));
	if (r < 0)
		return r;
	r = *name ? lremovexattr(path, attr) : removexattr(path, attr);
	return r < 0 ? fsio_err() : 0;
}

int fsio_listxattr(int dirfd, const char *name, char *buf, size_t size, size_t *len)
{
	char path[PATH_MAX];
	ssize_t n;
	int r;

	r = fsio_proc_path(dirfd, name, path, sizeof(path));
	if (r < 0)
		return r;
	n = *name ? llistxattr(path, buf, size) : listxattr(path, buf, size);
	if (n < 0)
		return fsio_err();
	*len = (size_t)n;
	return 0;
}

struct fsio_dir {
	DIR *fd_dir;
};

int fsio_dir_open(int pathfd, struct fsio_dir **out)
{
	struct fsio_dir *d;
	int fd, r;

	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	r = fsio_reopen_dir(pathfd, &fd);
	if (r < 0)
		goto fail;
	d->fd_dir = fdopendir(fd);
	if (!d->fd_dir) {
		r = fsio_err();
		close(fd);
		goto fail;
	}
	*out = d;
	return 0;
fail:
	free(d);
	return r;
}

int fsio_dir_next(struct fsio_dir *d, const char **name, unsigned char *dtype, uint64_t *ino)
{
	struct dirent *de;

	for (;;) {
		errno = 0;
		de = readdir(d->fd_dir);
		if (!de)
			return errno ? -errno : 0;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		*name = de->d_name;
		*dtype = de->d_type;
		if (ino)
			*ino = de->d_ino;
		return 1;
	}
}

void fsio_dir_close(struct fsio_dir *d)
{
	if (!d)
		return;
	closedir(d->fd_dir);
	free(d);
}

int fsio_random_name(const char *prefix, char *buf, size_t len)
{
	uint8_t rnd[8];
	ssize_t n = getrandom(rnd, sizeof(rnd), 0);
	int w;

	if (n != (ssize_t)sizeof(rnd))
		return n < 0 ? fsio_err() : -EIO;
	w = snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, rnd[0], rnd[1],
		     rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/*
 * setfsuid(-1) changes nothing and returns the current value. Raw system calls: the
 * identity is per thread, and glibc's wrappers would not be (see cred.h).
 */
static uid_t fsio_cur_uid(void)
{
	return (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
}

static gid_t fsio_cur_gid(void)
{
	return (gid_t)syscall(SYS_setfsgid, (gid_t)-1);
}

/* Where the calling thread's CAP_SYS_RESOURCE stands: a call that changes nothing costs nothing. */
enum fsio_sysres { FSIO_SYSRES_UNKNOWN = 0, FSIO_SYSRES_ON, FSIO_SYSRES_OFF, FSIO_SYSRES_NONE };
static __thread enum fsio_sysres fsio_sysres;

int fsio_fit_caps(uid_t fsuid)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	const uint32_t bit = CAP_TO_MASK(CAP_SYS_RESOURCE);
	const int word = CAP_TO_INDEX(CAP_SYS_RESOURCE);
	enum fsio_sysres want = fsuid == 0 ? FSIO_SYSRES_ON : FSIO_SYSRES_OFF;

	if (fsio_sysres == want || fsio_sysres == FSIO_SYSRES_NONE)
		return 0;
	/* capget/capset with pid 0 read and change the calling thread only. */
	if (syscall(SYS_capget, &h, d) != 0)
		return fsio_err();
	if (!(d[word].permitted & bit)) {
		/* Never had it (an unprivileged server, a bounding set without it): nothing to do. */
		fsio_sysres = FSIO_SYSRES_NONE;
		return 0;
	}
	if (!(d[word].effective & bit) != (want == FSIO_SYSRES_OFF)) {
		d[word].effective ^= bit;
		if (syscall(SYS_capset, &h, d) != 0) {
			fsio_sysres = FSIO_SYSRES_UNKNOWN;
			return fsio_err();
		}
	}
	fsio_sysres = want;
	return 0;
}

/*
 * fsio_fit_caps cannot fail here: raising a permitted capability and lowering one are
 * always allowed.
 */
void fsio_become_root(struct fsio_ids *saved)
{
	saved->fi_uid = fsio_cur_uid();
	saved->fi_gid = fsio_cur_gid();
	syscall(SYS_setfsuid, (uid_t)0);
	syscall(SYS_setfsgid, (gid_t)0);
	fsio_fit_caps(0);
}

void fsio_restore(const struct fsio_ids *saved)
{
	syscall(SYS_setfsgid, saved->fi_gid);
	syscall(SYS_setfsuid, saved->fi_uid);
	fsio_fit_caps(saved->fi_uid);
}

static bool fsio_in_groups(gid_t gid)
{
	gid_t *groups;
	long n;
	bool found = false;

	if (gid == fsio_cur_gid())
		return true;
	n = syscall(SYS_getgroups, 0, NULL);
	if (n <= 0 || n > FSIO_MAX_GROUPS)
		return false;
	groups = malloc((size_t)n * sizeof(*groups));
	if (!groups)
		return false;
	n = syscall(SYS_getgroups, n, groups);
	for (long i = 0; i < n && !found; i++)
		found = groups[i] == gid;
	free(groups);
	return found;
}

/* Set once faccessat2 answered ENOSYS (Linux before 5.8): it is not asked again. */
static atomic_bool fsio_no_faccessat2;

int fsio_access(int fd, int mask)
{
	if (atomic_load_explicit(&fsio_no_faccessat2, memory_order_relaxed))
		return -ENOSYS;
	/* AT_EACCESS: the fsuid, fsgid and groups this thread acts with, not the real ids. */
	if (syscall(SYS_faccessat2, fd, "", mask, AT_EMPTY_PATH | AT_EACCESS) == 0)
		return 0;
	if (errno == ENOSYS)
		atomic_store_explicit(&fsio_no_faccessat2, true, memory_order_relaxed);
	return fsio_err();
}

/* The POSIX access ACL as the kernel stores it in the xattr (linux/posix_acl_xattr.h). */
#define FSIO_ACL_XATTR "system.posix_acl_access"
#define FSIO_ACL_VERSION 2
#define FSIO_ACL_HEADER 4
#define FSIO_ACL_ENTRY 8
/* Entries read without an allocation; longer ACLs are read into a heap buffer. */
#define FSIO_ACL_INLINE 32
enum {
	FSIO_ACL_USER_OBJ = 0x01,
	FSIO_ACL_USER = 0x02,
	FSIO_ACL_GROUP_OBJ = 0x04,
	FSIO_ACL_GROUP = 0x08,
	FSIO_ACL_MASK = 0x10,
	FSIO_ACL_OTHER = 0x20,
};

struct fsio_acl_entry {
	unsigned ae_tag;
	unsigned ae_perm;
	uint32_t ae_id;
};

static uint32_t fsio_le(const unsigned char *p, int bytes)
{
	uint32_t v = 0;

	while (bytes-- > 0)
		v = (v << 8) | p[bytes];
	return v;
}

static struct fsio_acl_entry fsio_acl_at(const unsigned char *acl, size_t i)
{
	const unsigned char *p = acl + FSIO_ACL_HEADER + i * FSIO_ACL_ENTRY;
	struct fsio_acl_entry e = {
		.ae_tag = fsio_le(p, 2), .ae_perm = fsio_le(p + 2, 2), .ae_id = fsio_le(p + 4, 4),
	};

	return e;
}

/* A matching named entry (or the owning group) counts only as far as the mask allows. */
static bool fsio_acl_masked(const unsigned char *acl, size_t n, size_t i, unsigned want)
{
	unsigned perm = fsio_acl_at(acl, i).ae_perm;

	for (size_t m = i + 1; m < n; m++)
		if (fsio_acl_at(acl, m).ae_tag == FSIO_ACL_MASK)
			return (perm & fsio_acl_at(acl, m).ae_perm & want) == want;
	return (perm & want) == want;
}

/*
 * The kernel's posix_acl_permission() for a caller that does not own the object: 0,
 * -EACCES, or -EAGAIN for a malformed ACL (the mode bits decide then).
 */
static int fsio_acl_check(const unsigned char *acl, size_t len, const struct stat *st,
			  uid_t uid, unsigned want)
{
	struct fsio_acl_entry e;
	bool found = false;
	size_t n;

	if (len < FSIO_ACL_HEADER || fsio_le(acl, 4) != FSIO_ACL_VERSION ||
	    (len - FSIO_ACL_HEADER) % FSIO_ACL_ENTRY != 0)
		return -EAGAIN;
	n = (len - FSIO_ACL_HEADER) / FSIO_ACL_ENTRY;
	for (size_t i = 0; i < n; i++) {
		e = fsio_acl_at(acl, i);
		switch (e.ae_tag) {
		case FSIO_ACL_USER_OBJ:
			if (st->st_uid == uid)
				return (e.ae_perm & want) == want ? 0 : -EACCES;
			break;
		case FSIO_ACL_USER:
			if (e.ae_id == uid)
				return fsio_acl_masked(acl, n, i, want) ? 0 : -EACCES;
			break;
		case FSIO_ACL_GROUP_OBJ:
		case FSIO_ACL_GROUP:
			if (!fsio_in_groups(e.ae_tag == FSIO_ACL_GROUP ? e.ae_id : st->st_gid))
				break;
			found = true;
			if ((e.ae_perm & want) == want)
				return fsio_acl_masked(acl, n, i, want) ? 0 : -EACCES;
			break;
		case FSIO_ACL_MASK:
			break;
		case FSIO_ACL_OTHER:
			if (found)
				return -EACCES;
			return (e.ae_perm & want) == want ? 0 : -EACCES;
		default:
			return -EAGAIN;
		}
	}
	return -EAGAIN;
}

/* The access ACL of name in dirfd checked for want: 0, -EACCES, or -EAGAIN when none. */
static int fsio_acl_may(int dirfd, const char *name, const struct stat *st, uid_t uid,
			unsigned want)
{
	unsigned char inline_buf[FSIO_ACL_HEADER + FSIO_ACL_INLINE * FSIO_ACL_ENTRY];
	unsigned char *buf = inline_buf;
	size_t len = 0;
	int r;

	r = fsio_getxattr(dirfd, name, FSIO_ACL_XATTR, buf, sizeof(inline_buf), &len);
	if (r == -ERANGE) {
		r = fsio_getxattr(dirfd, name, FSIO_ACL_XATTR, NULL, 0, &len);
		buf = r == 0 ? malloc(len) : NULL;
		if (r == 0 && !buf)
			r = -ENOMEM;
		if (r == 0)
			r = fsio_getxattr(dirfd, name, FSIO_ACL_XATTR, buf, len, &len);
	}
	r = r == 0 ? fsio_acl_check(buf, len, st, uid, want) : -EAGAIN;
	if (buf != inline_buf)
		free(buf);
	return r;
}

bool fsio_may(int dirfd, const char *name, const struct stat *st, int mask)
{
	uid_t uid = fsio_cur_uid();
	unsigned want = (unsigned)mask & (R_OK | W_OK | X_OK);
	mode_t mode = st->st_mode;
	int r;

	if (uid == 0) /* root may do all but execute a file nobody may execute */
		return !(want & X_OK) || S_ISDIR(mode) || (mode & 0111);
	if (uid == st->st_uid)
		return (want & ~((mode >> 6) & 7)) == 0;
	/* As the kernel: with an ACL, the group bits are its mask; none, and it is not asked. */
	if ((mode & S_IRWXG) && !S_ISLNK(mode) && dirfd >= 0) {
		r = fsio_acl_may(dirfd, name, st, uid, want);
		if (r != -EAGAIN)
			return r == 0;
	}
	if (fsio_in_groups(st->st_gid))
		mode >>= 3;
	return (want & ~(mode & 7)) == 0;
}

bool fsio_owns(const struct stat *st)
{
	uid_t uid = fsio_cur_uid();

	return uid == 0 || uid == st->st_uid;
}

/*
 * Trees, walked one name at a time from directory fds: a tree a client can write may hold
 * symbolic links anywhere, and a path given to the kernel whole would follow them.
 */

/* Deeper trees are left (-ELOOP): every level holds a descriptor and a stack frame. */
#define FSIO_TREE_DEPTH_MAX 1024

/* Walks path's directories from dirfd, making missing ones when create; see fsio_mkdir_p. */
static int fsio_walk_dirs(int dirfd, const char *path, bool create, mode_t mode, int *fd)
{
	char name[NAME_MAX + 1];
	const char *p = path, *end;
	int cur, next, r = 0, made = 0;

	cur = openat(*p == '/' ? AT_FDCWD : dirfd, *p == '/' ? "/" : ".",
		     O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return fsio_err();
	for (; *p; p = end) {
		while (*p == '/')
			p++;
		end = strchrnul(p, '/');
		if (end == p || (end - p == 1 && *p == '.'))
			continue;
		if (end - p > NAME_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		memcpy(name, p, (size_t)(end - p));
		name[end - p] = '\0';
		made = 0;
		r = fsio_open_dir(cur, name, &next);
		if (r == -ENOENT && create) {
			r = fsio_mkdir(cur, name, mode);
			made = r == 0;
			if (r == 0 || r == -EEXIST) /* EEXIST: made by someone else meanwhile */
				r = fsio_open_dir(cur, name, &next);
		}
		if (r < 0)
			break;
		close(cur);
		cur = next;
	}
	if (r < 0 || !fd)
		close(cur);
	else
		*fd = cur;
	return r < 0 ? r : made;
}

int fsio_mkdir_p(int dirfd, const char *path, mode_t mode, int *fd)
{
	return fsio_walk_dirs(dirfd, path, true, mode, fd);
}

int fsio_open_dir_path(int dirfd, const char *path, int *fd)
{
	return fsio_walk_dirs(dirfd, path, false, 0, fd);
}

struct fsio_tree {
	dev_t ft_dev; /* the file system of the tree's top: mount points below it stay */
	int ft_err;   /* the first failure; the walk goes on with the rest */
};

static void fsio_tree_fail(struct fsio_tree *t, int err)
{
	if (!t->ft_err)
		t->ft_err = err;
}

/* Opens directory name for reading; -ENOTDIR for anything else, a symlink too. */
static int fsio_tree_enter(int dirfd, const char *name, int *fd)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

	*fd = openat(dirfd, name, flags);
	if (*fd < 0 && fsio_shed_retry())
		*fd = openat(dirfd, name, flags);
	if (*fd >= 0)
		return 0;
	return errno == ELOOP ? -ENOTDIR : fsio_err();
}

static void fsio_tree_empty(struct fsio_tree *t, int fd, int depth);

/* Removes entry name of directory dirfd, emptying it first if it is a directory. */
static bool fsio_tree_remove(struct fsio_tree *t, int dirfd, const char *name,
			     unsigned char dtype, int depth)
{
	struct stat st;
	int fd, r;

	if (dtype != DT_DIR && dtype != DT_UNKNOWN) {
		if (unlinkat(dirfd, name, 0) == 0)
			return true;
		if (errno != EISDIR) { /* EISDIR: a directory took the name since */
			fsio_tree_fail(t, fsio_err());
			return false;
		}
	}
	r = fsio_tree_enter(dirfd, name, &fd);
	if (r == -ENOTDIR) /* a file or a symlink took the name: the link goes, not its target */
		r = unlinkat(dirfd, name, 0) < 0 ? fsio_err() : 1;
	if (r != 0) {
		if (r < 0)
			fsio_tree_fail(t, r);
		return r > 0;
	}
	if (fstat(fd, &st) < 0 || st.st_dev != t->ft_dev || depth >= FSIO_TREE_DEPTH_MAX) {
		fsio_tree_fail(t, depth >= FSIO_TREE_DEPTH_MAX ? -ELOOP : -EBUSY);
		close(fd);
		return false;
	}
	fsio_tree_empty(t, fd, depth + 1);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0) {
		fsio_tree_fail(t, fsio_err());
		return false;
	}
	return true;
}

/*
 * Removes what directory fd holds (fd is closed). Passes repeat while one removes
 * something: a directory read while its entries go may skip some.
 */
static void fsio_tree_empty(struct fsio_tree *t, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	bool removed = true;

	if (!d) {
		fsio_tree_fail(t, fsio_err());
		close(fd);
		return;
	}
	while (removed) {
		removed = false;
		rewinddir(d);
		for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				removed |= fsio_tree_remove(t, dirfd(d), de->d_name, de->d_type, depth);
		}
		if (errno)
			fsio_tree_fail(t, -errno);
	}
	closedir(d);
}

int fsio_remove_tree(int dirfd, const char *name)
{
	struct fsio_tree t = { 0 };
	struct stat st;
	int fd, r;

	if (!*name || strchr(name, '/'))
		return -EINVAL;
	r = fsio_tree_enter(dirfd, name, &fd);
	if (r == -ENOTDIR)
		return fsio_unlink(dirfd, name, false);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0) {
		r = fsio_err();
		close(fd);
		return r;
	}
	t.ft_dev = st.st_dev;
	fsio_tree_empty(&t, fd, 1);
	r = fsio_unlink(dirfd, name, true);
	return t.ft_err ? t.ft_err : r;
}
