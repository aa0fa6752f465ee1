/* Data and attributes of one object: read, write, commit, setattr, readlink. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blocking.h"
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
	uint64_t id = 0;
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
	/* Its number alone could be another file's since: the map's identity decides. */
	if (r == 0 && o->uo_rec.si_real_id != 0)
		r = fsio_ident(*fd, "", &id);
	if (r == 0 && id != 0 && id != o->uo_rec.si_real_id)
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

/* Whether st, of an fd on the object, is still the object cur described. */
static bool uattr_same(const struct stat *st, const struct stat *cur)
{
	return ures_same_number(st, cur->st_dev, (uint64_t)cur->st_ino,
				(uint8_t)((cur->st_mode & S_IFMT) >> 12));
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
		return (sa->ua_mask & USET_SIZE) ? ucopy_up(ux, o) : ucopy_meta_up(ux, o);
	uobj_release(o);
	return ures_resolve(ux, NULL, ino, URES_UPPER, o);
}

/*
 * SETATTR checks its guard and makes its change in a turn of its own on the object (union
 * ino), so that of two guarded SETATTRs with the same ctime only one passes and no other
 * SETATTR changes the object between a check and its change. A turn may last a copy-up:
 * a SETATTR of the same object meanwhile parks (blocking.h) and runs again when the turn
 * ends, holding no worker, as calls waiting for a copy-up do; off a worker pool it waits.
 */
struct uattr_turn {
	struct uattr_turn *at_next;
	uint64_t at_ino;
	struct blocking_queue at_parked; /* SETATTRs to run again when it ends */
};

static pthread_mutex_t uattr_turns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t uattr_turns_ended = PTHREAD_COND_INITIALIZER;
static struct uattr_turn *uattr_turns; /* the turns in progress: a few at most */

static struct uattr_turn *uattr_turn_find(uint64_t ino)
{
	struct uattr_turn *t = uattr_turns;

	while (t != NULL && t->at_ino != ino)
		t = t->at_next;
	return t;
}

/* 0: the object is the caller's until uattr_turn_end(me); -EINPROGRESS: parked. */
static int uattr_turn_begin(uint64_t ino, struct uattr_turn *me)
{
	struct uattr_turn *other;

	pthread_mutex_lock(&uattr_turns_lock);
	while ((other = uattr_turn_find(ino)) != NULL) {
		if (blocking_park(&other->at_parked)) {
			pthread_mutex_unlock(&uattr_turns_lock);
			return -EINPROGRESS;
		}
		blocking_enter();
		pthread_cond_wait(&uattr_turns_ended, &uattr_turns_lock);
		blocking_leave();
	}
	*me = (struct uattr_turn){ .at_next = uattr_turns, .at_ino = ino };
	uattr_turns = me;
	pthread_mutex_unlock(&uattr_turns_lock);
	return 0;
}

static void uattr_turn_end(struct uattr_turn *me)
{
	struct blocking_queue parked;
	struct uattr_turn **p;

	pthread_mutex_lock(&uattr_turns_lock);
	for (p = &uattr_turns; *p != me; p = &(*p)->at_next)
		;
	*p = me->at_next;
	parked = me->at_parked;
	pthread_cond_broadcast(&uattr_turns_ended);
	pthread_mutex_unlock(&uattr_turns_lock);
	blocking_wake(&parked);
}

static bool uattr_guard_ok(const struct timespec *guard_ctime, const struct stat *st)
{
	return !guard_ctime || (guard_ctime->tv_sec == st->st_ctim.tv_sec &&
				guard_ctime->tv_nsec == st->st_ctim.tv_nsec);
}

int union_setattr(struct union_export *ux, uint64_t ino, const struct union_setattr *sa,
		  const struct timespec *guard_ctime, struct stat *pre, struct stat *post)
{
	struct uattr_turn turn;
	struct uobj o;
	bool dir;
	int r;

	r = uattr_turn_begin(ino, &turn);
	if (r < 0)
		return r;
	r = ures_resolve(ux, NULL, ino, 0, &o);
	if (r < 0)
		goto out;
	uio_out(ux, &o.uo_st, ino, pre);
	if (!uattr_guard_ok(guard_ctime, &o.uo_st)) {
		/* Nothing changed: the attributes after are those before (RFC 1813's wcc). */
		uio_out(ux, &o.uo_st, ino, post);
		r = -EAGAIN;
		goto out;
	}
	dir = S_ISDIR(o.uo_st.st_mode);
	if (sa->ua_mask && ux->ux_ro)
		r = -EROFS;
	if (r == 0 && sa->ua_mask &&
	    !ubr_writable(ux, dir ? o.uo_dirs.ds_branch[0] : o.uo_rec.si_branch))
		r = uattr_copy_up(ux, ino, sa, &o);
	else if (r == 0 && (sa->ua_mask & USET_SIZE))
		r = ucopy_data(ux, &o); /* a metacopy gets its data first, as in overlayfs */
	/* On the object resolved itself: no name is looked up between check and change. */
	if (r == 0 && sa->ua_mask)
		r = uattr_apply(dir ? o.uo_dirs.ds_fd[0] : o.uo_fd, &o.uo_st, sa);
	/* Who may look into a directory changed: cached lookups must ask again. */
	if (dir && (sa->ua_mask & (USET_MODE | USET_UID | USET_GID)))
		ucache_changed(ux);
	if (r == 0 && sa->ua_mask)
		r = fsio_stat(dir ? o.uo_dirs.ds_fd[0] : o.uo_fd, &o.uo_st);
	if (r == 0 && !dir)
		umc_learn(ux, &o);
	if (r == 0)
		uio_out(ux, &o.uo_st, ino, post);
out:
	uobj_release(&o);
	uattr_turn_end(&turn);
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
 * READ's descriptor for o when none is cached: o's own, opened as the caller (the kernel
 * checks the access), or, for a metacopy, its lower data, opened as root once o's own
 * open said the caller may read. *seen: ufd_forgets before a metacopy was seen, which
 * ufd_keep_since needs; UFD_ALWAYS for o's own.
 */
static int uio_open_read(struct union_export *ux, struct uobj *o, int *fd, uint64_t *seen)
{
	struct stat lst;
	bool metacopy = false;
	int r, data;

	*seen = UFD_ALWAYS;
	if (umc_candidate(ux, o))
		*seen = ufd_forgets(&o->uo_st);
	r = uio_open(o, O_RDONLY, fd);
	if (r == 0)
		r = umc_is(ux, o, *fd, &metacopy);
	if (r < 0 || !metacopy) {
		*seen = UFD_ALWAYS;
		return r;
	}
	r = umc_data_open(ux, o, &data, &lst);
	if (r == -ENODATA) { /* made whole meanwhile: its own data is right */
		*seen = UFD_ALWAYS;
		return 0;
	}
	fsio_close(*fd);
	*fd = data;
	return r;
}

/* READ and WRITE keep the files they open in the shared descriptor cache (fdcache.c). */
int union_read_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		  uint64_t off, uint32_t count, void *buf, uint32_t *nread, bool *eof,
		  struct stat *post)
{
	bool cache = who != NULL && wholen <= UFD_KEY_MAX;
	struct ufd_ent *ent = NULL;
	struct stat st;
	struct uobj o;
	uint64_t seen = UFD_ALWAYS, size;
	size_t done = 0;
	int r, fd = -1, own = -1;

	*nread = 0;
	*eof = false;
	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = uio_need_file(&o);
	if (r == 0 && cache) {
		ent = ufd_get(&o.uo_st, O_RDONLY, who, wholen);
		fd = ent ? ufd_fd(ent) : -1;
	}
	if (r == 0 && fd < 0) {
		r = uio_open_read(ux, &o, &own, &seen);
		fd = own;
	}
	/* Past the largest possible file there is nothing to read, and no error either. */
	if (r == 0 && count && off < (uint64_t)INT64_MAX)
		r = fsio_pread(fd, buf, count, off, &done);
	if (r == 0)
		r = fsio_stat(fd, &st);
	/* A metacopy's data came from its lower copy: the attributes are its own. */
	if (r == 0 && !uattr_same(&st, &o.uo_st)) {
		blkcnt_t blocks = st.st_blocks;

		st = o.uo_st;
		st.st_blocks = blocks;
		size = (uint64_t)st.st_size;
		done = off >= size ? 0 : done < size - off ? done : (size_t)(size - off);
	}
	if (r == 0) {
		*nread = (uint32_t)done;
		*eof = off >= (uint64_t)st.st_size || off + done >= (uint64_t)st.st_size;
		uio_out(ux, &st, ino, post);
		if (own >= 0 && cache) {
			ufd_keep_since(own, &o.uo_st, O_RDONLY, who, wholen, seen);
			own = -1;
		}
	}
	ufd_put(ent);
	fsio_close(own);
	uobj_release(&o);
	return r;
}

int union_read(struct union_export *ux, uint64_t ino, uint64_t off, uint32_t count, void *buf,
	       uint32_t *nread, bool *eof, struct stat *post)
{
	return union_read_as(ux, ino, NULL, 0, off, count, buf, nread, eof, post);
}

/* WRITE's descriptor for o when none is cached; a metacopy is made whole first. */
static int uio_open_write(struct union_export *ux, struct uobj *o, int *fd)
{
	bool metacopy;
	int r = uio_open(o, O_WRONLY, fd);

	if (r == 0)
		r = umc_is(ux, o, *fd, &metacopy);
	if (r < 0 || !metacopy)
		return r;
	fsio_close(*fd);
	*fd = -1;
	r = ucopy_data(ux, o);
	return r < 0 ? r : uio_open(o, O_WRONLY, fd);
}

int union_write_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		   uint64_t off, uint32_t count, const void *buf, enum union_stable stable,
		   uint32_t *nwritten, enum union_stable *committed, struct stat *pre,
		   struct stat *post)
{
	bool cache = who != NULL && wholen <= UFD_KEY_MAX;
	struct ufd_ent *ent = NULL;
	pthread_mutex_t *wl;
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
	if (r == 0 && !ubr_writable(ux, o.uo_rec.si_branch)) {
		if (!fsio_owns(&o.uo_st) && !uobj_may(&o, W_OK))
			r = -EACCES;
		else
			r = ucopy_up(ux, &o);
	}
	if (r == 0 && cache)
		ent = ufd_get(&o.uo_st, O_WRONLY, who, wholen);
	if (ent != NULL) {
		fd = ufd_fd(ent);
	} else if (r == 0) {
		r = uio_open_write(ux, &o, &own);
		fd = own;
	}
	if (r < 0)
		goto out;
	/*
	 * wcc_data: the attributes just before and after this write, none other between. The
	 * lock is the file's the resolve found, which fd holds.
	 */
	wl = uwl_lock(&o.uo_st);
	r = fsio_stat(fd, &st);
	if (r == 0) {
		uio_out(ux, &st, ino, pre);
		r = fsio_pwrite(fd, buf, count, off, &done);
	}
	if (r == 0)
		r = fsio_stat(fd, &st);
	uwl_unlock(wl);
	if (r == 0 && stable == UNION_DATA_SYNC)
		r = fsio_fdatasync(fd);
	else if (r == 0 && stable == UNION_FILE_SYNC)
		r = fsio_fsync(fd);
	if (r == 0) {
		*nwritten = (uint32_t)done;
		uio_out(ux, &st, ino, post);
		if (ent != NULL) {
			ufd_wrote(ent, &st);
		} else if (own >= 0 && cache) {
			ufd_keep(own, &st, O_WRONLY, who, wholen);
			own = -1;
		}
	} else if (ent != NULL) {
		ufd_drop(ent);
	}
out:
	ufd_put(ent);
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
	if (ubr_writable(ux, o.uo_rec.si_branch)) {
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
