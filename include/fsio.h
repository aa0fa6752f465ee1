/*
 * The only code that makes file system system calls (include/README lists the exceptions
 * and why). Every path is one name relative to a directory fd: no function here follows a
 * symlink in its last component or accepts a path with '/' (except where said below: the
 * directories the administrator names, trees walked a name at a time), so nothing can
 * leave a branch. Callers validate names (union layer).
 *
 * Every function returns 0 (or a count where noted) or a negative errno. Every fd it
 * hands out is O_CLOEXEC and owned by the caller.
 */
#ifndef UNFS_FSIO_H
#define UNFS_FSIO_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

/* Process set-up: clears the umask, because NFS clients apply their own. */
void fsio_init(void);

/*
 * Descriptors held only to save work later (caches) can be given back when the process has
 * none left. shed, set once before serving, closes such descriptors; every call here that
 * makes a descriptor and fails with EMFILE or ENFILE calls it and tries once more.
 */
void fsio_set_shedder(void (*shed)(void));
/* Runs the shedder now (if one is set): for descriptors wanted outside this module. */
void fsio_shed(void);
/*
 * Whether err (negative or not) says the process or the system ran short of a resource
 * (descriptors, memory) rather than anything about the object: such a failure is
 * temporary and never means the object is absent.
 */
bool fsio_short_of_resources(int err);

/*
 * Directories the administrator names by path (branches, the state directory): unlike
 * everything else here, these follow symbolic links in the path, as he would expect.
 *
 * fsio_open_root canonicalises path (realpath) into canon and opens it as an O_PATH
 * directory fd. fsio_make_root makes the directory path with mode, its parent only (which
 * must exist): 1 when it made it, 0 when a directory (or a symlink to one) is there,
 * -ENOTDIR when anything else is.
 */
int fsio_open_root(const char *path, char *canon, size_t canonlen, int *fd);
int fsio_make_root(const char *path, mode_t mode);

/* O_PATH fd of the directory name in dirfd; -ENOTDIR for any non-directory, symlinks too. */
int fsio_open_dir(int dirfd, const char *name, int *fd);
/* O_PATH fd of whatever name is (a symlink itself, a device without opening it). */
int fsio_open_node(int dirfd, const char *name, int *fd);
/*
 * Opens name for I/O with flags (O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, ...); O_NOFOLLOW,
 * O_NONBLOCK (a fifo must not block a worker) and O_NOCTTY are always added.
 */
int fsio_open_file(int dirfd, const char *name, int flags, mode_t mode, int *fd);
/*
 * Opens the directory behind an O_PATH fd for reading. Through /proc/self/fd (which must
 * be mounted): nothing is looked up by name, and read permission is enough.
 */
int fsio_reopen_dir(int pathfd, int *fd);

/*
 * Change notification (inotify) on directories: every change the kernel makes to a watched
 * directory or to a name in it is queued before the system call making it returns, so
 * reading the queue to its end sees every change completed before the read.
 * fsio_watch_open makes a non-blocking queue; fsio_watch_dir watches the directory behind
 * pathfd (through /proc/self/fd: read permission on it is enough) for mask, and gives its
 * watch number (the same one for the same directory); fsio_watch_forget stops it;
 * fsio_watch_read reads queued events into buf: a count of bytes, or -EAGAIN when none.
 * fsio_watch_wait waits until events are queued (a thread cancellation point).
 */
int fsio_watch_open(int *fd);
int fsio_watch_dir(int watchfd, int pathfd, uint32_t mask, int *wd);
void fsio_watch_forget(int watchfd, int wd);
ssize_t fsio_watch_read(int watchfd, void *buf, size_t len);
void fsio_watch_wait(int watchfd);
/*
 * Opens the regular file behind an O_PATH fd for I/O with flags (O_CREAT and O_EXCL are
 * ignored), the same way: the very file the fd holds, never another one put at its name
 * since. -EISDIR for a directory, -EINVAL for anything else that is not a regular file.
 */
int fsio_reopen_file(int pathfd, int flags, int *fd);
void fsio_close(int fd);
int fsio_dup(int fd, int *out);

int fsio_stat(int fd, struct stat *st);
/* lstat semantics; name "" stats fd itself. */
int fsio_statat(int dirfd, const char *name, struct stat *st);
int fsio_statvfs(int fd, struct statvfs *sv);
/* The file system type of fd (statfs's f_type, a magic number of <linux/magic.h>). */
int fsio_fs_type(int fd, long *type);
/*
 * fsio_statat that also gives the object's birth time (statx, in the same system call), in
 * nanoseconds since the epoch; *birth_ns is 0 when the file system keeps none (ext4 with
 * 128-byte inodes, for one).
 */
int fsio_statat_birth(int dirfd, const char *name, struct stat *st, int64_t *birth_ns);
/*
 * The identity the file system gives the object name in dirfd ("" for dirfd itself, never
 * following a symbolic link): a digest of its kernel file handle (name_to_handle_at), which
 * tells a reused inode number apart (ext4, xfs and tmpfs put the inode's generation in it).
 * Never 0; *id is 0 when the file system gives no handles (then the inode number is all
 * there is).
 */
int fsio_ident(int dirfd, const char *name, uint64_t *id);

/* Reads until count bytes or end of file; *done receives the bytes read. */
int fsio_pread(int fd, void *buf, size_t count, uint64_t off, size_t *done);
/* Writes all count bytes unless an error stops it; *done receives the bytes written. */
int fsio_pwrite(int fd, const void *buf, size_t count, uint64_t off, size_t *done);
int fsio_fsync(int fd);
int fsio_fdatasync(int fd);
/*
 * How many fsync/fdatasync calls have failed since start (any file, any thread). Data
 * written before a failure may be lost even if a later sync of the same file succeeds, so
 * whoever promised "written, not yet durable" must tell its clients when this moves.
 */
uint64_t fsio_sync_failures(void);
/* fsync of a directory given by an O_PATH fd (opened for reading, as root if needed). */
int fsio_fsync_dir(int pathfd);
/*
 * As fsio_fsync_dir, for a caller whose change in the directory is complete: a flush of
 * the same directory that another thread begins after that serves it too (src/fsio/dsync.c),
 * so concurrent changes in one directory share flushes. Waits for the disk meanwhile.
 */
int fsio_fsync_dir_shared(int pathfd);
/* -EFBIG for a size (or, in fsio_pwrite, an end) beyond what an off_t holds. */
int fsio_ftruncate(int fd, uint64_t size);
/*
 * Allocates the blocks of [off, off + len), growing the file to cover it (posix_fallocate),
 * so that writing there later needs no space. -EOPNOTSUPP or -EINVAL where it cannot.
 */
int fsio_allocate(int fd, uint64_t off, uint64_t len);
/*
 * Takes the exclusive flock(2) of fd's open file without waiting: -EWOULDBLOCK while
 * another open of the file holds it. Closing the last descriptor of that open releases it.
 */
int fsio_try_lock(int fd);
/*
 * The largest size a file may have on the file system of directory dirfd (O_PATH will do),
 * as the kernel holds writes to it: probed with lseek, which checks offsets against the
 * same limit, on an unnamed temporary file (O_TMPFILE) that leaves nothing behind. On
 * failure (a read-only file system, one without O_TMPFILE) *max is 2^63 - 1 and -errno
 * is returned.
 */
int fsio_max_file_size(int dirfd, uint64_t *max);
/* Copies size bytes of in to out from offset 0, keeping holes. */
int fsio_copy_data(int in, int out, uint64_t size);

int fsio_mkdir(int dirfd, const char *name, mode_t mode);
int fsio_symlink(const char *target, int dirfd, const char *name);
int fsio_mknod(int dirfd, const char *name, mode_t mode, dev_t dev);
int fsio_unlink(int dirfd, const char *name, bool dir);
/* noreplace: fail with -EEXIST instead of replacing an existing name. */
int fsio_rename(int fromfd, const char *from, int tofd, const char *to, bool noreplace);
/*
 * FSIO_EXCHANGE swaps the two names atomically (both must exist, of any types);
 * FSIO_WHITEOUT renames and leaves a whiteout (character device 0/0) at from, atomically.
 */
enum { FSIO_EXCHANGE = 1, FSIO_WHITEOUT = 2 };
int fsio_rename2(int fromfd, const char *from, int tofd, const char *to, unsigned how);
int fsio_link(int fromfd, const char *from, int tofd, const char *to);
/*
 * Trees, walked a name at a time from directory fds and never through a symbolic link, so
 * a link planted in a tree a client can write is removed, never entered.
 *
 * fsio_mkdir_p makes the missing directories of path (relative to dirfd; an absolute path
 * starts at "/") with mode and opens the last (O_PATH, in *fd unless fd is NULL). Returns
 * 1 when it made the last directory, 0 when it was there, -ENOTDIR when a component is
 * anything but a directory (a symlink too). fsio_open_dir_path opens path the same way
 * and makes nothing (-ENOENT for a missing directory).
 *
 * fsio_remove_tree removes name in dirfd and, for a directory, everything in it. It stays
 * on the file system of name: a mount point below (and the directories holding it) stay,
 * and so does a tree deeper than 1024 levels. Returns the first failure (-EBUSY for a
 * mount point, -ELOOP for the depth) after removing all else it could.
 */
int fsio_mkdir_p(int dirfd, const char *path, mode_t mode, int *fd);
int fsio_open_dir_path(int dirfd, const char *path, int *fd);
int fsio_remove_tree(int dirfd, const char *name);
/* name "" reads the symlink an O_PATH fd refers to. *len excludes the NUL added. */
int fsio_readlink(int dirfd, const char *name, char *buf, size_t size, size_t *len);

/*
 * Attribute changes on name in dirfd, never following a symlink, on every kernel. Name ""
 * changes the object dirfd itself refers to (any fd, O_PATH too): no name is looked up
 * again, and no search permission on the object is needed, only what the change itself
 * needs (ownership or privilege). Symlinks have no mode on Linux: fsio_chmod returns
 * -EOPNOTSUPP. uid/gid (uid_t)-1 / (gid_t)-1 leave that part alone; ts as for utimensat.
 */
int fsio_chmod(int dirfd, const char *name, mode_t mode);
int fsio_chown(int dirfd, const char *name, uid_t uid, gid_t gid);
int fsio_utimens(int dirfd, const char *name, const struct timespec ts[2]);
int fsio_fchmod(int fd, mode_t mode);
int fsio_fchown(int fd, uid_t uid, gid_t gid);
int fsio_futimens(int fd, const struct timespec ts[2]);

/*
 * Extended attributes of name in dirfd ("" for dirfd itself), never following a symlink in
 * name. The xattr system calls take no directory fd and refuse O_PATH fds, so these go
 * through /proc/self/fd, which must be mounted. -ENODATA when the attribute is absent.
 * fsio_getxattr: *len receives the value's size; -ERANGE when size is too small.
 * fsio_listxattr: the names, each NUL-terminated, one after another.
 */
int fsio_getxattr(int dirfd, const char *name, const char *attr, void *buf, size_t size,
		  size_t *len);
int fsio_setxattr(int dirfd, const char *name, const char *attr, const void *val, size_t len);
int fsio_removexattr(int dirfd, const char *name, const char *attr);
int fsio_listxattr(int dirfd, const char *name, char *buf, size_t size, size_t *len);

/* Reading a directory given by an O_PATH fd. */
struct fsio_dir;
int fsio_dir_open(int pathfd, struct fsio_dir **out);
/*
 * 1 with the next entry ("." and ".." skipped), 0 at the end, or -errno. ino (may be
 * NULL) receives d_ino, which is st_ino except at mount points.
 */
int fsio_dir_next(struct fsio_dir *d, const char **name, unsigned char *dtype, uint64_t *ino);
void fsio_dir_close(struct fsio_dir *d);

/* Fills buf with a fresh random name "prefix<hex>". */
int fsio_random_name(const char *prefix, char *buf, size_t len);

/*
 * The calling thread's file system identity. fsio_become_root switches only this thread
 * to fsuid/fsgid 0 (for copy-up, which must keep owners) and fsio_restore switches back;
 * a server not running as root stays itself.
 */
struct fsio_ids {
	uid_t fi_uid;
	gid_t fi_gid;
};
void fsio_become_root(struct fsio_ids *saved);
void fsio_restore(const struct fsio_ids *saved);
/*
 * Whether the calling thread's identity may access the object behind fd (O_PATH will do)
 * with mask (R_OK, W_OK, X_OK), as the kernel decides for it: mode bits, groups, POSIX
 * ACLs, capabilities; no search permission on the object itself is needed. 0, -EACCES or
 * -errno; -ENOSYS before Linux 5.8 (no faccessat2), without asking again once seen.
 */
int fsio_access(int fd, int mask);
/*
 * CAP_SYS_RESOURCE follows the file system identity, as in knfsd (nfsd_setuser): the
 * calling thread has it in its effective set while it acts as fsuid 0 (copy-up, the work
 * directory) and not while it acts as anyone else, so a client's (squashed) user can
 * neither exceed a quota nor take the blocks a file system reserves for root. The kernel
 * takes away only the file system capabilities (CAP_DAC_OVERRIDE, CAP_CHOWN, ...) when the
 * fsuid leaves 0. Call after every change of the thread's fsuid (fsio_become_root and
 * fsio_restore do); no system call unless the capability must change. Does nothing for a
 * process without it. Returns 0 or -errno.
 */
int fsio_fit_caps(uid_t fsuid);
/*
 * Whether the calling thread's identity may access the object st, name in dirfd ("" for
 * dirfd itself; dirfd -1: mode bits only), with mask, as the kernel would decide on a
 * writable file system: mode bits, groups, the object's POSIX access ACL, root's
 * privilege. For objects the kernel cannot be asked about (writing a copy on a read-only
 * branch, which copy-up will give the same mode, owner and ACL) and for kernels without
 * faccessat2 (fsio_access answers -ENOSYS there, once it has found out).
 */
bool fsio_may(int dirfd, const char *name, const struct stat *st, int mask);
/* Whether the calling thread acts as the owner of st (or as root). */
bool fsio_owns(const struct stat *st);

#endif
