/* Data and attributes of one object: read, write, commit, setattr, readlink. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsio.h"
#include "uint.h"

/*
 * Opens a resolved non-directory for I/O and checks it is still the copy resolved. Like
 * knfsd, the owner may read and write whatever the mode bits say: the client checked
 * permissions when its application opened the file, which may since have been chmodded.
 */
static int uio_open(struct uobj *o, int flags, int *fd)
{
	struct fsio_ids ids;
	struct stat st;
	int r;

	r = fsio_open_file(o->uo_pfd, o->uo_rec.si_name, flags, 0, fd);
	if (r == -EACCES && fsio_owns(&o->uo_st)) {
		fsio_become_root(&ids);
		r = fsio_open_file(o->uo_pfd, o->uo_rec.si_name, flags, 0, fd);
		fsio_restore(&ids);
	}
	if (r == -ENOENT || r == -ELOOP)
		return -ESTALE;
	if (r < 0)
		return r;
	r = fsio_stat(*fd, &st);
	if (r == 0 && st.st_ino != o->uo_st.st_ino)
		r = -ESTALE;
	if (r < 0) {
		fsio_close(*fd);
		*fd = -1;
	}
	return r;
}

static int uio_need_file(const struct uobj *o)
{
	if (S_ISDIR(o->uo_st.st_mode))
		return -EISDIR;
	return S_ISREG(o->uo_st.st_mode) ? 0 : -EINVAL;
}

static void uio_out(struct union_export *ux, const struct stat *st, uint64_t ino,
		    struct stat *out)
{
	if (out) {
		*out = *st;
		ures_fix_stat(ux, out, ino);
	}
}

/* Whether st is still the object cur described: the same file (device, inode) and type. */
static bool uattr_same(const struct stat *st, const struct stat *cur)
{
	return st->st_dev == cur->st_dev && st->st_ino == cur->st_ino &&
	       (st->st_mode & S_IFMT) == (cur->st_mode & S_IFMT);
}

static int uattr_truncate(int fd, const struct stat *cur, uint64_t size)
{
	struct fsio_ids ids;
	int r, wfd;

	if (S_ISDIR(cur->st_mode))
		return -EISDIR;
	if (!S_ISREG(cur->st_mode))
		return -EINVAL;
	r = fsio_reopen_file(fd, O_WRONLY, &wfd);
	if (r == -EACCES && fsio_owns(cur)) {
		fsio_become_root(&ids);
		r = fsio_reopen_file(fd, O_WRONLY, &wfd);
		fsio_restore(&ids);
	}
	if (r < 0)
		return r;
	r = fsio_ftruncate(wfd, size);
	fsio_close(wfd);
	return r;
}

int uattr_apply(int fd, const struct stat *cur, const struct union_setattr *sa)
{
	unsigned m = sa->ua_mask;
	struct timespec ts[2];
	struct stat st;
	int r;

	r = fsio_stat(fd, &st);
	if (r == 0 && !uattr_same(&st, cur))
		r = -ESTALE;
	if (r == 0 && (m & USET_SIZE))
		r = uattr_truncate(fd, cur, sa->ua_size);
	if (r == 0 && (m & (USET_UID | USET_GID)))
		r = fsio_chown(fd, "", (m & USET_UID) ? sa->ua_uid : (uid_t)-1,
			       (m & USET_GID) ? sa->ua_gid : (gid_t)-1);
	/* Symlinks have no mode of their own; knfsd ignores the request too. */
	if (r == 0 && (m & USET_MODE) && !S_ISLNK(cur->st_mode))
		r = fsio_chmod(fd, "", sa->ua_mode & 07777);
	if (r == 0 && (m & (USET_ATIME | USET_MTIME))) {
		ts[0].tv_sec = ts[1].tv_sec = 0;
		ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
		if (m & USET_ATIME)
			ts[0] = sa->ua_atime;
		if (m & USET_MTIME)
			ts[1] = sa->ua_mtime;
		r = fsio_utimens(fd, "", ts);
	}
	return r;
}

/* Whether the client may make the change at all: no copy-up when it may not. */
static int uattr_may(const struct uobj *o, const struct union_setattr *sa)
{
	unsigned m = sa->ua_mask;
	bool owner = fsio_owns(&o->uo_st);

	if ((m & (USET_MODE | USET_UID | USET_GID)) && !owner)
		return -EPERM;
	if ((m & USET_SIZE) && !owner && !uobj_may(o, W_OK))
		return -EACCES;
	if (m & (USET_ATIME | USET_MTIME)) {
		bool now = (!(m & USET_ATIME) || sa->ua_atime.tv_nsec == UTIME_NOW) &&
			   (!(m & USET_MTIME) || sa->ua_mtime.tv_nsec == UTIME_NOW);

		if (!owner && !(now && uobj_may(o, W_OK)))
			return now ? -EACCES : -EPERM;
	}
	return 0;
}

/* Gives a lower object its upper copy, once the client may make the change at all. */
static int uattr_copy_up(struct union_export *ux, uint64_t ino,
			 const struct union_setattr *sa, struct uobj *o)
{
	int r;

	r = uattr_may(o, sa);
	if (r == 0 && (sa->ua_mask & USET_SIZE))
		r = uio_need_file(o);
	if (r < 0)
		return r;
	if (!S_ISDIR(o->uo_st.st_mode))
		return ucopy_up(ux, o);
	uobj_release(o);
	return ures_resolve(ux, NULL, ino, URES_UPPER, o);
}

int union_setattr(struct union_export *ux, uint64_t ino, const struct union_setattr *sa,
		  const struct timespec *guard_ctime, struct stat *pre, struct stat *post)
{
	struct uobj o;
	bool dir;
	int r;

	r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r < 0)
		goto out;
	if (guard_ctime && (guard_ctime->tv_sec != o.uo_st.st_ctim.tv_sec ||
			    guard_ctime->tv_nsec != o.uo_st.st_ctim.tv_nsec)) {
		r = -EAGAIN;
		goto out;
	}
	uio_out(ux, &o.uo_st, ino, pre);
	dir = S_ISDIR(o.uo_st.st_mode);
	if (sa->ua_mask && ux->ux_ro)
		r = -EROFS;
	if (r == 0 && sa->ua_mask && o.uo_rec.si_branch != 0)
		r = uattr_copy_up(ux, ino, sa, &o);
	/* On the object resolved itself: no name is looked up between check and change. */
	if (r == 0 && sa->ua_mask)
		r = uattr_apply(dir ? o.uo_dirs.ds_fd[0] : o.uo_fd, &o.uo_st, sa);
	/* Who may look into a directory changed: cached lookups must ask again. */
	if (sa->ua_mask & (USET_MODE | USET_UID | USET_GID))
		ucache_changed(ux);
	if (r == 0 && sa->ua_mask)
		r = fsio_stat(dir ? o.uo_dirs.ds_fd[0] : o.uo_fd, &o.uo_st);
	if (r == 0)
		uio_out(ux, &o.uo_st, ino, post);
out:
	uobj_release(&o);
	return r;
}

int union_readlink(struct union_export *ux, uint64_t ino, char *buf, size_t bufsize,
		   size_t *len, struct stat *post)
{
	struct uobj o;
	int r;

	r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r == 0 && !S_ISLNK(o.uo_st.st_mode))
		r = -EINVAL;
	if (r == 0)
		r = fsio_readlink(o.uo_fd, "", buf, bufsize, len);
	if (r == 0)
		uio_out(ux, &o.uo_st, ino, post);
	uobj_release(&o);
	return r;
}

/*
 * Files each worker thread recently opened for READ, so a stream of READs costs no open
 * and close. A file is reused only for the same identity (byte for byte) and the same
 * (dev, ino, ctime) the resolve just found: the kernel checked that identity's access
 * when the file was opened, and any change of mode, owner or ACL moves the ctime, so the
 * check's answer still holds. Unused files are closed after a while, so a removed file's
 * space does not stay held long by a busy thread.
 */
#define URD_SLOTS 8
#define URD_KEY_MAX 128
#define URD_IDLE_NS 2000000000LL

struct urd_slot {
	bool us_open;
	int us_fd;
	dev_t us_dev;
	ino_t us_ino;
	struct timespec us_ctime;
	long long us_used;           /* CLOCK_MONOTONIC_COARSE, ns */
	size_t us_keylen;
	unsigned char us_key[URD_KEY_MAX];
};

static __thread struct urd_slot urd_slots[URD_SLOTS];
/*
 * Files opened for WRITE, by the same rules. Our own write moves the ctime, so after a
 * successful write the slot takes the ctime the file has after it; a change by anyone else
 * (mode, owner, a write through another fd) then no longer matches and the file is opened
 * again. What this cannot see is a change within the same ctime tick as the last write or
 * open, the window READ's files have too.
 */
static __thread struct urd_slot uwr_slots[URD_SLOTS];

static long long urd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void urd_drop(struct urd_slot *s)
{
	fsio_close(s->us_fd);
	s->us_open = false;
}

/* The slot opened for who on exactly the file st describes, or NULL; closes idle files. */
static struct urd_slot *urd_find(struct urd_slot *slots, const struct stat *st, const void *who,
				 size_t wholen, long long now)
{
	struct urd_slot *found = NULL;

	for (int i = 0; i < URD_SLOTS; i++) {
		struct urd_slot *s = &slots[i];

		if (!s->us_open)
			continue;
		if (s->us_dev == st->st_dev && s->us_ino == st->st_ino &&
		    s->us_ctime.tv_sec == st->st_ctim.tv_sec &&
		    s->us_ctime.tv_nsec == st->st_ctim.tv_nsec && s->us_keylen == wholen &&
		    !memcmp(s->us_key, who, wholen) && found == NULL) {
			s->us_used = now;
			found = s;
		} else if (now - s->us_used > URD_IDLE_NS) {
			urd_drop(s);
		}
	}
	return found;
}

/* Keeps fd (opened for who on the file st describes), replacing the least recently used. */
static void urd_keep(struct urd_slot *slots, int fd, const struct stat *st, const void *who,
		     size_t wholen, long long now)
{
	struct urd_slot *s = &slots[0];

	for (int i = 0; i < URD_SLOTS; i++) {
		if (!slots[i].us_open) {
			s = &slots[i];
			break;
		}
		if (slots[i].us_used < s->us_used)
			s = &slots[i];
	}
	if (s->us_open)
		urd_drop(s);
	s->us_open = true;
	s->us_fd = fd;
	s->us_dev = st->st_dev;
	s->us_ino = st->st_ino;
	s->us_ctime = st->st_ctim;
	s->us_used = now;
	s->us_keylen = wholen;
	memcpy(s->us_key, who, wholen);
}

int union_read_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		  uint64_t off, uint32_t count, void *buf, uint32_t *nread, bool *eof,
		  struct stat *post)
{
	bool cache = who != NULL && wholen <= URD_KEY_MAX;
	long long now = 0;
	struct stat st;
	struct uobj o;
	size_t done = 0;
	int r, fd = -1, own = -1;

	*nread = 0;
	*eof = false;
	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = uio_need_file(&o);
	if (r == 0 && cache) {
		struct urd_slot *s;

		now = urd_now();
		s = urd_find(urd_slots, &o.uo_st, who, wholen, now);
		fd = s ? s->us_fd : -1;
	}
	if (r == 0 && fd < 0) {
		r = uio_open(&o, O_RDONLY, &own);
		fd = own;
	}
	/* Past the largest possible file there is nothing to read, and no error either. */
	if (r == 0 && count && off < (uint64_t)INT64_MAX)
		r = fsio_pread(fd, buf, count, off, &done);
	if (r == 0)
		r = fsio_stat(fd, &st);
	if (r == 0) {
		*nread = (uint32_t)done;
		*eof = off >= (uint64_t)st.st_size || off + done >= (uint64_t)st.st_size;
		uio_out(ux, &st, ino, post);
		if (own >= 0 && cache) {
			urd_keep(urd_slots, own, &o.uo_st, who, wholen, now);
			own = -1;
		}
	}
	fsio_close(own);
	uobj_release(&o);
	return r;
}

int union_read(struct union_export *ux, uint64_t ino, uint64_t off, uint32_t count, void *buf,
	       uint32_t *nread, bool *eof, struct stat *post)
{
	return union_read_as(ux, ino, NULL, 0, off, count, buf, nread, eof, post);
}

int union_write_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		   uint64_t off, uint32_t count, const void *buf, enum union_stable stable,
		   uint32_t *nwritten, enum union_stable *committed, struct stat *pre,
		   struct stat *post)
{
	bool cache = who != NULL && wholen <= URD_KEY_MAX;
	struct urd_slot *slot = NULL;
	long long now = 0;
	struct stat st;
	struct uobj o;
	size_t done = 0;
	int r, fd = -1, own = -1;

	*nwritten = 0;
	*committed = stable;
	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = uio_need_file(&o);
	if (r == 0 && ux->ux_ro)
		r = -EROFS;
	if (r == 0 && o.uo_rec.si_branch != 0) {
		if (!fsio_owns(&o.uo_st) && !uobj_may(&o, W_OK))
			r = -EACCES;
		else
			r = ucopy_up(ux, &o);
	}
	if (r == 0 && cache) {
		now = urd_now();
		slot = urd_find(uwr_slots, &o.uo_st, who, wholen, now);
	}
	if (slot != NULL) {
		/* The resolve just stat'ed this very file: that is the state before the write. */
		fd = slot->us_fd;
		st = o.uo_st;
	} else if (r == 0) {
		r = uio_open(&o, O_WRONLY, &own);
		fd = own;
		if (r == 0)
			r = fsio_stat(fd, &st);
	}
	if (r < 0)
		goto out;
	uio_out(ux, &st, ino, pre);
	r = fsio_pwrite(fd, buf, count, off, &done);
	if (r == 0 && stable == UNION_DATA_SYNC)
		r = fsio_fdatasync(fd);
	else if (r == 0 && stable == UNION_FILE_SYNC)
		r = fsio_fsync(fd);
	if (r == 0)
		r = fsio_stat(fd, &st);
	if (r == 0) {
		*nwritten = (uint32_t)done;
		uio_out(ux, &st, ino, post);
		if (slot != NULL) {
			slot->us_ctime = st.st_ctim;
		} else if (own >= 0 && cache) {
			urd_keep(uwr_slots, own, &st, who, wholen, now);
			own = -1;
		}
	} else if (slot != NULL) {
		urd_drop(slot);
	}
out:
	fsio_close(own);
	uobj_release(&o);
	return r;
}

int union_write(struct union_export *ux, uint64_t ino, uint64_t off, uint32_t count,
		const void *buf, enum union_stable stable, uint32_t *nwritten,
		enum union_stable *committed, struct stat *pre, struct stat *post)
{
	return union_write_as(ux, ino, NULL, 0, off, count, buf, stable, nwritten, committed,
			      pre, post);
}

int union_commit(struct union_export *ux, uint64_t ino, struct stat *pre, struct stat *post)
{
	struct uobj o;
	int r, fd = -1;

	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = uio_need_file(&o);
	if (r < 0)
		goto out;
	uio_out(ux, &o.uo_st, ino, pre);
	/* A lower copy was never written through us; copy-ups were synced when made. */
	if (o.uo_rec.si_branch == 0) {
		r = uio_open(&o, O_RDONLY, &fd);
		if (r == -EACCES)
			r = uio_open(&o, O_WRONLY, &fd);
		if (r == 0)
			r = fsio_fsync(fd);
		if (r == 0)
			r = fsio_stat(fd, &o.uo_st);
		if (r < 0)
			goto out;
	}
	uio_out(ux, &o.uo_st, ino, post);
out:
	fsio_close(fd);
	uobj_release(&o);
	return r;
}
