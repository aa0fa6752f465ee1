/*
 * Copy-up: giving a lower object an upper copy before it is changed.
 *
 * Copies are made with the server's own identity (as overlayfs does with the mounter's),
 * so owners, modes and times survive; callers check beforehand that the client may do
 * what it asked. A file is built complete in the work directory and renamed into place,
 * so a crash never leaves a partial copy visible, and its record is re-keyed to the upper
 * copy so the union ino never changes.
 *
 * One copy-up per object at a time: the calls that want the same object copied meanwhile
 * park on the one in flight (blocking.h) and run again once it is done, finding the upper
 * copy; they hold no worker while they wait, and no second copy is ever built. Copying a
 * large file is long work, of which the worker pool lets only a few calls do at once.
 *
 * A change of a file's attributes alone may make a metacopy instead (metacopy.c): the same
 * steps, with the size and a marker where the data would be. Its first write copies the
 * data in later (ucopy_data), in place, under the same one-at-a-time rule.
 *
 * Copy-up and resolve (resolve.c) call each other, and must: a copy needs its parent
 * directories in the upper, which resolving the object with URES_UPPER makes on the way
 * down (ucopy_resolve -> ures_resolve -> ucopy_dir), and after copying, the object is
 * resolved again to find its record moved to the copy (ucopy_run). It ends there:
 * ucopy_dir copies one directory and resolves nothing, resolving without URES_UPPER
 * (ucopy_run, and hlink.c looking for a link's copy) never copies, and a walk down takes
 * at most UNION_MAX_DEPTH steps. So the recursion is at most two calls deep.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blocking.h"
#include "fsio.h"
#include "log.h"
#include "stats.h"
#include "uint.h"

#define UCOPY_TMP_PREFIX "copyup."
/* Data a copy-up may copy before it counts as long work (blocking_long_begin). */
#define UCOPY_LONG_BYTES (1u << 20)

/* A copy-up in progress, on its caller's stack; the object is (export or view, ino). */
struct ucopy_flight {
	struct ucopy_flight *cf_next;
	const struct union_export *cf_ux;
	uint64_t cf_ino;
	uint64_t cf_seq;                 /* tells it from a later copy-up of the same object */
	struct blocking_queue cf_parked; /* calls to run again when it ends */
};

static pthread_mutex_t ucopy_flights_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ucopy_flights_ended = PTHREAD_COND_INITIALIZER;
static struct ucopy_flight *ucopy_flights;
static uint64_t ucopy_flights_seq;

/* Removes what an interrupted copy-up left in the work directory. */
static void ucopy_sweep(int workfd)
{
	struct fsio_dir *d;
	const char *name;
	unsigned char type;

	if (fsio_dir_open(workfd, &d) < 0)
		return;
	while (fsio_dir_next(d, &name, &type, NULL) == 1)
		if (!strncmp(name, UCOPY_TMP_PREFIX, strlen(UCOPY_TMP_PREFIX)))
			fsio_unlink(workfd, name, false);
	fsio_dir_close(d);
}

int ucopy_workdir(struct union_export *ux, int *fd)
{
	struct fsio_ids ids;
	int r = 0;

	pthread_mutex_lock(&ux->ux_work_lock);
	if (ux->ux_workfd >= 0)
		goto out;
	fsio_become_root(&ids);
	r = fsio_mkdir(ux->ux_rootfd[0], UNION_WORK_NAME, 0700);
	if (r == 0)
		r = fsio_fsync_dir(ux->ux_rootfd[0]);
	if (r == 0 || r == -EEXIST)
		r = fsio_open_dir(ux->ux_rootfd[0], UNION_WORK_NAME, &ux->ux_workfd);
	if (r == 0)
		ucopy_sweep(ux->ux_workfd);
	fsio_restore(&ids);
	if (r < 0)
		log_err("export %s: work directory %s/%s: %s; make the upper branch writable",
			ux->ux_name, ux->ux_paths[0], UNION_WORK_NAME, strerror(-r));
out:
	*fd = ux->ux_workfd;
	pthread_mutex_unlock(&ux->ux_work_lock);
	return r;
}

/* One attribute: its size first, as it may be large (an ACL). */
static int ucopy_xattr(int sfd, const char *sname, int dfd, const char *dname,
		       const char *attr)
{
	char *val = NULL;
	size_t len, got;
	int r;

	r = fsio_getxattr(sfd, sname, attr, NULL, 0, &len);
	if (r == 0 && len > 0 && !(val = malloc(len)))
		r = -ENOMEM;
	if (r == 0 && len > 0)
		r = fsio_getxattr(sfd, sname, attr, val, len, &got);
	if (r == 0)
		r = fsio_setxattr(dfd, dname, attr, val, len > 0 ? got : 0);
	free(val);
	/* Gone meanwhile, or a kind the upper cannot hold (user.* on a symlink). */
	if (r == -ENODATA || r == -ENOTSUP || r == -EPERM)
		r = 0;
	return r;
}

/*
 * Copies the extended attributes of (sfd, sname) to (dfd, dname), except overlay
 * metadata, which describes the lower copy's place in its own stack, and ours. As root.
 */
static int ucopy_xattrs(int sfd, const char *sname, int dfd, const char *dname)
{
	char *list = NULL;
	size_t len, got;
	int r;

	r = fsio_listxattr(sfd, sname, NULL, 0, &len);
	if (r == -ENOTSUP)
		return 0;
	if (r < 0 || len == 0)
		return r;
	list = malloc(len + 1);
	if (!list)
		return -ENOMEM;
	r = fsio_listxattr(sfd, sname, list, len, &got);
	if (r == 0) {
		list[got] = '\0';
		for (size_t off = 0; r == 0 && off < got; off += strlen(list + off) + 1)
			if (!uwh_internal_xattr(list + off))
				r = ucopy_xattr(sfd, sname, dfd, dname, list + off);
	}
	free(list);
	return r;
}

static void ucopy_times(const struct stat *st, struct timespec ts[2])
{
	ts[0] = st->st_atim;
	ts[1] = st->st_mtim;
}

int ucopy_dir(struct union_export *ux, uint64_t pino, const struct udirset *parent,
	      const char *name, struct ufound *f)
{
	return ucopy_dir_in(ux, pino, parent, 0, name, f);
}

int ucopy_dir_in(struct union_export *ux, uint64_t pino, const struct udirset *parent,
		 uint8_t b, const char *name, struct ufound *f)
{
	struct udirset *ds = &f->uf_dirs;
	struct timespec ts[2];
	struct fsio_ids ids;
	struct stat st;
	int r, at = 0, fd = -1, upfd = uds_fd_of(parent, b);

	if (upfd < 0 || !ubr_writable(ux, b) || ds->ds_n >= UNION_MAX_BRANCHES)
		return -EROFS;
	if (uds_index_of(ds, b) >= 0)
		return 0;
	ucopy_times(&f->uf_st, ts);
	fsio_become_root(&ids);
	r = fsio_mkdir(upfd, name, f->uf_st.st_mode & 07777);
	if (r == 0) {
		r = fsio_chown(upfd, name, f->uf_st.st_uid, f->uf_st.st_gid);
		if (r == 0) /* after chown, which clears set-id bits */
			r = fsio_chmod(upfd, name, f->uf_st.st_mode & 07777);
		if (r == 0)
			r = ucopy_xattrs(parent->ds_fd[f->uf_pidx], name, upfd, name);
		if (r == 0)
			r = fsio_utimens(upfd, name, ts);
	} else if (r == -EEXIST) {
		r = 0; /* made meanwhile by another request */
	}
	if (r == 0)
		r = fsio_open_dir(upfd, name, &fd);
	fsio_restore(&ids);
	if (r == 0)
		r = fsio_stat(fd, &st);
	/* The directory and its entry durable before anything is put in it. */
	if (r == 0)
		r = fsio_fsync_dir(fd);
	if (r == 0)
		r = fsio_fsync_dir(upfd);
	if (r < 0) {
		fsio_close(fd);
		return r == -ENOTDIR ? -ESTALE : r;
	}
	/* The copies stay top-down; a copy above the topmost one becomes what decides. */
	while (at < ds->ds_n && ds->ds_branch[at] < b)
		at++;
	memmove(&ds->ds_fd[at + 1], &ds->ds_fd[at], (size_t)(ds->ds_n - at) * sizeof(ds->ds_fd[0]));
	memmove(&ds->ds_branch[at + 1], &ds->ds_branch[at],
		(size_t)(ds->ds_n - at) * sizeof(ds->ds_branch[0]));
	ds->ds_fd[at] = fd;
	ds->ds_branch[at] = b;
	ds->ds_n++;
	if (at == 0) {
		f->uf_branch = b;
		f->uf_pidx = uds_index_of(parent, b);
		f->uf_st = st;
	}
	udir_invalidate(ux, pino);
	return 0;
}

/*
 * The next directory on the way down to ino that lacks a copy in branch b: its parent
 * (resolved into *parent, which has one) and its name. 1 when ino itself has one (then
 * *parent is ino), or -errno.
 */
static int ucopy_chain_gap(struct union_export *ux, uint64_t ino, uint8_t b, struct uobj *parent,
			   char *name)
{
	struct uobj cur;
	int r;

	uobj_init(&cur);
	r = ures_resolve(ux, NULL, ino, 0, &cur);
	if (r == 0 && !S_ISDIR(cur.uo_st.st_mode))
		r = -ENOTDIR;
	if (r == 0 && uds_index_of(&cur.uo_dirs, b) >= 0) {
		*parent = cur;
		return 1;
	}
	for (int depth = 0; r == 0 && depth < UNION_MAX_DEPTH; depth++) {
		strcpy(name, cur.uo_rec.si_name);
		ino = cur.uo_rec.si_parent;
		uobj_release(&cur);
		r = ures_resolve(ux, NULL, ino, 0, &cur);
		if (r == 0 && uds_index_of(&cur.uo_dirs, b) >= 0) {
			*parent = cur;
			return 0;
		}
	}
	uobj_release(&cur);
	return r < 0 ? r : -ELOOP;
}

int ucopy_dir_into(struct union_export *ux, uint64_t ino, uint8_t b, struct uobj *d)
{
	char name[STORE_NAME_MAX + 1];
	struct fsio_ids ids;
	struct ufound f;
	struct stat st;
	struct uobj p;
	bool seen;
	int r;

	for (int depth = 0; depth < UNION_MAX_DEPTH; depth++) {
		uobj_init(&p);
		ufound_init(&f);
		r = ucopy_chain_gap(ux, ino, b, &p, name);
		if (r == 1) {
			*d = p;
			return 0;
		}
		if (r == 0)
			r = ures_find(ux, &p.uo_dirs, name, 0, &f);
		if (r == 0 && !f.uf_dir)
			r = -ESTALE;
		/* Something there already, yet not merged: a copy made there would not show. */
		if (r == 0 && fsio_statat(uds_fd_of(&p.uo_dirs, b), name, &st) != -ENOENT)
			r = -EXDEV;
		if (r == 0)
			r = ucopy_dir_in(ux, p.uo_rec.si_ino, &p.uo_dirs, b, name, &f);
		ufound_release(&f);
		/* A copy below an opaque one, or off a redirected directory's path, would not show. */
		if (r == 0) {
			r = ures_find(ux, &p.uo_dirs, name, 0, &f);
			seen = r == 0 && uds_index_of(&f.uf_dirs, b) >= 0;
			ufound_release(&f);
			if (r == 0 && !seen) {
				fsio_become_root(&ids);
				fsio_unlink(uds_fd_of(&p.uo_dirs, b), name, true);
				fsio_restore(&ids);
				r = -EXDEV;
			}
		}
		uobj_release(&p);
		if (r < 0)
			return r;
	}
	return -ELOOP;
}

/*
 * Builds the copy of o as tmp in the work directory; runs as root. meta: a regular file's
 * copy gets its size and the metacopy marker instead of its data (metacopy.c).
 */
static int ucopy_make(struct uobj *o, int workfd, const char *tmp, bool meta, struct stat *out)
{
	const struct stat *st = &o->uo_st;
	const char *name = o->uo_rec.si_name;
	char target[PATH_MAX + 1];
	struct timespec ts[2];
	struct stat in_st;
	int r, in = -1, cp = -1;
	size_t len;

	ucopy_times(st, ts);
	if (S_ISREG(st->st_mode)) {
		r = fsio_open_file(o->uo_pfd, name, O_RDONLY, 0, &in);
		if (r == 0)
			r = fsio_stat(in, &in_st);
		if (r == 0 && in_st.st_ino != st->st_ino)
			r = -ESTALE;
		if (r == 0)
			r = fsio_open_file(workfd, tmp, O_CREAT | O_EXCL | O_WRONLY, 0600, &cp);
		if (r == 0)
			r = meta ? fsio_ftruncate(cp, (uint64_t)in_st.st_size) :
				   fsio_copy_data(in, cp, (uint64_t)in_st.st_size);
		if (r == 0)
			r = fsio_fchown(cp, st->st_uid, st->st_gid);
		if (r == 0)
			r = fsio_fchmod(cp, st->st_mode & 07777);
		if (r == 0) /* after chown, which drops file capabilities */
			r = ucopy_xattrs(o->uo_pfd, name, workfd, tmp);
		if (r == 0 && meta)
			r = uwh_set_metacopy(workfd, tmp);
		if (r == 0)
			r = fsio_futimens(cp, ts);
		/*
		 * Data must be on disk before its name is; a metacopy has none, and its inode's
		 * changes reach the disk with or before the rename that names it (file systems
		 * journal metadata in order), which its directory's flush makes durable.
		 */
		if (r == 0 && !meta)
			r = fsio_fsync(cp);
		if (r == 0)
			r = fsio_stat(cp, out);
		fsio_close(in);
		fsio_close(cp);
		return r;
	}
	if (S_ISLNK(st->st_mode)) {
		r = fsio_readlink(o->uo_fd, "", target, sizeof(target), &len);
		if (r == 0)
			r = fsio_symlink(target, workfd, tmp);
	} else {
		r = fsio_mknod(workfd, tmp, st->st_mode & (S_IFMT | 07777), st->st_rdev);
	}
	if (r == 0)
		r = fsio_chown(workfd, tmp, st->st_uid, st->st_gid);
	if (r == 0 && !S_ISLNK(st->st_mode))
		r = fsio_chmod(workfd, tmp, st->st_mode & 07777);
	if (r == 0)
		r = ucopy_xattrs(o->uo_pfd, name, workfd, tmp);
	if (r == 0)
		r = fsio_utimens(workfd, tmp, ts);
	if (r == 0)
		r = fsio_statat(workfd, tmp, out);
	return r;
}

static const char *const ucopy_origin_xattr[] = { "trusted.unionnfsd.origin",
						  "user.unionnfsd.origin" };

/*
 * Names on the copy tmp what it copies (rec), so that the map's record of the lower copy
 * finds it again if the process dies between the copy's rename into place and the map's
 * update. As root; a file system without xattrs leaves the copy without (then that crash
 * makes the object's handles stale, as it always did).
 */
static void ucopy_origin_set(const struct union_export *ux, int workfd, const char *tmp,
			     const struct store_inode *rec)
{
	char buf[96];
	int n, r = -EPERM;

	n = snprintf(buf, sizeof(buf), "1 %u %" PRIu64 " %u %" PRIu64 " %" PRIx64, ux->ux_id,
		     rec->si_ino, rec->si_branch, rec->si_real_ino, rec->si_real_id);
	for (size_t i = 0; i < 2 && (r == -EPERM || r == -ENOTSUP); i++)
		r = fsio_setxattr(workfd, tmp, ucopy_origin_xattr[i], buf, (size_t)n);
	if (r < 0)
		log_debug("copy-up of ino %" PRIu64 ": no origin on the copy: %s", rec->si_ino,
			  strerror(-r));
}

int ucopy_origin_get(int dirfd, const char *name, struct ucopy_origin *org)
{
	char buf[96];
	unsigned int exp, branch;
	size_t len = 0;
	int r = -ENODATA;

	for (size_t i = 0; i < 2 && r == -ENODATA; i++)
		r = fsio_getxattr(dirfd, name, ucopy_origin_xattr[i], buf, sizeof(buf) - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	if (sscanf(buf, "1 %u %" SCNu64 " %u %" SCNu64 " %" SCNx64, &exp, &org->co_ino, &branch,
		   &org->co_real_ino, &org->co_real_id) != 5 || exp > UINT16_MAX || branch > UINT8_MAX)
		return -ENODATA; /* not one of ours */
	org->co_export = (uint16_t)exp;
	org->co_branch = (uint8_t)branch;
	return 0;
}

/*
 * Under the write lock, once this copy-up has won: a lower file with other names goes
 * into the hard-link index before it takes its name, so no name can miss it.
 */
static int ucopy_index(struct union_export *ux, const struct store_inode *rec, int workfd,
		       const char *tmp, bool *indexed)
{
	int r = uhl_index(ux, workfd, tmp, rec->si_branch, rec->si_real_ino);

	*indexed = r == 0;
	return r;
}

/* Whether o's copy-up may be a metacopy, when one is wanted: data and a single name. */
static bool ucopy_meta_fits(const struct uobj *o)
{
	return S_ISREG(o->uo_st.st_mode) && o->uo_st.st_size > 0 && o->uo_st.st_nlink == 1;
}

/* The directory *arg to disk (a store_meanwhile: while the map's commit goes there). */
static int ucopy_flush_dir(void *arg)
{
	return fsio_fsync_dir_shared(*(const int *)arg);
}

/*
 * Copies the lower object o (resolved with URES_UPPER) up and resolves o to the copy;
 * meta: a metacopy when it fits.
 */
static int ucopy_run(struct union_export *ux, struct uobj *o, bool meta)
{
	uint64_t ino = o->uo_rec.si_ino, pino = o->uo_rec.si_parent;
	struct store_meanwhile flush = { .sm_fn = ucopy_flush_dir, .sm_arg = &o->uo_upfd };
	struct store_inode lower;
	struct store_txn *t = NULL;
	struct fsio_ids ids;
	struct stat cst;
	struct uobj now;
	uint64_t cid = 0;
	char tmp[64];
	bool made = false, links, indexed = false;
	nlink_t nlink;
	int r, workfd;

	lower = o->uo_rec;
	nlink = o->uo_st.st_nlink;
	links = !S_ISDIR(o->uo_st.st_mode) && nlink > 1;
	meta = meta && ucopy_meta_fits(o);
	r = ucopy_workdir(ux, &workfd);
	if (r == 0)
		r = fsio_random_name(UCOPY_TMP_PREFIX, tmp, sizeof(tmp));
	if (r < 0)
		return r;
	fsio_become_root(&ids);
	r = ucopy_make(o, workfd, tmp, meta, &cst);
	made = r != -EEXIST; /* a name clash is someone else's file */
	if (r == 0 && !meta) /* a metacopy is found again by its data (umc_made_of) */
		ucopy_origin_set(ux, workfd, tmp, &lower);
	if (r == 0) /* the work directory is the server's own */
		r = fsio_ident(workfd, tmp, &cid);
	fsio_restore(&ids);
	if (r == 0 && links)
		r = uhl_prepare(workfd, tmp, nlink);
	if (r < 0)
		goto out;
	r = store_begin(ux->ux_store, true, &t);
	if (r < 0)
		goto out;
	/* Under the write lock: is it still that lower copy, or did another request win? */
	r = ures_resolve(ux, t, ino, 0, &now);
	if (r == 0 && now.uo_rec.si_branch == 0) {
		uobj_release(&now);
		goto out;
	}
	uobj_release(&now);
	if (r == 0 && links)
		r = ucopy_index(ux, &lower, workfd, tmp, &indexed);
	if (r < 0)
		goto out;
	fsio_become_root(&ids);
	r = fsio_rename(workfd, tmp, o->uo_upfd, o->uo_rec.si_name, true);
	fsio_restore(&ids);
	if (r == -EEXIST)
		r = -ESTALE; /* an upper object appeared behind our back */
	if (r < 0)
		goto out;
	made = false;
	now.uo_rec = o->uo_rec;
	now.uo_rec.si_branch = 0;
	now.uo_rec.si_real_ino = (uint64_t)cst.st_ino;
	now.uo_rec.si_real_id = cid;
	r = store_update(t, ux->ux_id, &now.uo_rec);
	/*
	 * Indexed before the commit: other changes may run as soon as it is in (group commit),
	 * and whoever sees the map take the copy must find it in the index too.
	 */
	if (r == 0 && indexed)
		r = uhl_indexed(ux, ino, (uint64_t)cst.st_ino, lower.si_branch, lower.si_real_ino,
				nlink);
	/*
	 * The copy's new name goes to disk while the map's commit does. The work directory's
	 * loss of it needs no flush: a name left there by a crash is swept at the next start.
	 */
	if (r == 0)
		r = store_commit_meanwhile(t, &flush);
	else
		store_abort(t);
	ucache_changed(ux);
	t = NULL;
	if (r < 0 && indexed)
		uhl_forget(ux, ino); /* the table entry, if it was made, and the index name */
	indexed = false;
	stats_copyup(r);
	udir_invalidate(ux, pino);
out:
	if (t)
		store_abort(t);
	if (indexed)
		uhl_unindex(ux, lower.si_branch, lower.si_real_ino);
	if (made) {
		fsio_become_root(&ids);
		fsio_unlink(workfd, tmp, false);
		fsio_restore(&ids);
	}
	uobj_release(o);
	if (r == 0)
		r = ures_resolve(ux, NULL, ino, 0, o);
	return r;
}

/* The copy-up of (ux, ino) in flight, or NULL. Lock held. */
static struct ucopy_flight *ucopy_flight_find(const struct union_export *ux, uint64_t ino)
{
	struct ucopy_flight *fl;

	for (fl = ucopy_flights; fl != NULL; fl = fl->cf_next)
		if (fl->cf_ux == ux && fl->cf_ino == ino)
			return fl;
	return NULL;
}

/* Whether the flight numbered seq still runs. Lock held. */
static bool ucopy_flight_runs(uint64_t seq)
{
	for (struct ucopy_flight *fl = ucopy_flights; fl != NULL; fl = fl->cf_next)
		if (fl->cf_seq == seq)
			return true;
	return false;
}

/*
 * With no copy-up of (ux, ino) in flight: 0, and fl, unless NULL, becomes it. With one, the
 * call parks on it (-EINPROGRESS) or, off a worker pool, waits until it ends (-EAGAIN: look
 * again).
 */
static int ucopy_flight_begin(struct union_export *ux, uint64_t ino, struct ucopy_flight *fl)
{
	struct ucopy_flight *other;
	uint64_t seq;
	int r = 0;

	pthread_mutex_lock(&ucopy_flights_lock);
	other = ucopy_flight_find(ux, ino);
	if (other == NULL && fl != NULL) {
		*fl = (struct ucopy_flight){ .cf_next = ucopy_flights, .cf_ux = ux, .cf_ino = ino,
					     .cf_seq = ++ucopy_flights_seq };
		ucopy_flights = fl;
	} else if (other != NULL) {
		stats_copyup_join();
		r = blocking_park(&other->cf_parked) ? -EINPROGRESS : -EAGAIN;
	}
	if (r == -EAGAIN) {
		seq = other->cf_seq;
		blocking_enter();
		while (ucopy_flight_runs(seq))
			pthread_cond_wait(&ucopy_flights_ended, &ucopy_flights_lock);
		blocking_leave();
	}
	pthread_mutex_unlock(&ucopy_flights_lock);
	return r;
}

/* Ends the flight fl: the calls parked on it run again, those waiting in place look again. */
static void ucopy_flight_end(struct ucopy_flight *fl)
{
	struct blocking_queue parked;
	struct ucopy_flight **p;

	pthread_mutex_lock(&ucopy_flights_lock);
	for (p = &ucopy_flights; *p != fl; p = &(*p)->cf_next)
		;
	*p = fl->cf_next;
	parked = fl->cf_parked;
	pthread_cond_broadcast(&ucopy_flights_ended);
	pthread_mutex_unlock(&ucopy_flights_lock);
	blocking_wake(&parked);
}

/*
 * Makes fl the copy of (ux, ino) in flight: 0, or -EINPROGRESS (parked on the one in flight,
 * or queued for a place for long work, lng), or -EAGAIN (one ended meanwhile: look again).
 * One in flight is joined first: a place in the pool is for copying, not waiting.
 */
static int ucopy_flight_take(struct union_export *ux, uint64_t ino, bool lng,
			     struct ucopy_flight *fl)
{
	int r = ucopy_flight_begin(ux, ino, NULL);

	if (r < 0)
		return r;
	if (lng && !blocking_long_begin()) {
		stats_copyup_queued();
		return -EINPROGRESS;
	}
	r = ucopy_flight_begin(ux, ino, fl);
	if (r < 0 && lng)
		blocking_long_end();
	return r;
}

static void ucopy_flight_give(struct ucopy_flight *fl, bool lng)
{
	ucopy_flight_end(fl);
	if (lng)
		blocking_long_end();
}

/* o resolved anew for a copy-up of ino: 0 while it is a lower copy, 1 once it is up. */
static int ucopy_resolve(struct union_export *ux, uint64_t ino, struct uobj *o)
{
	int r;

	uobj_release(o);
	r = ures_resolve(ux, NULL, ino, URES_UPPER, o);
	if (r < 0)
		return r;
	if (o->uo_rec.si_branch == 0)
		return 1;
	return o->uo_upfd < 0 ? -EROFS : 0;
}

/* Whether copying st up is long work: the data it holds, holes left out, is large. */
static bool ucopy_long(const struct stat *st)
{
	return S_ISREG(st->st_mode) && (uint64_t)st->st_blocks * 512 > UCOPY_LONG_BYTES;
}

static int ucopy_up_as(struct union_export *ux, struct uobj *o, bool meta)
{
	uint64_t ino = o->uo_rec.si_ino;
	struct ucopy_flight fl;
	bool lng = false;
	int r;

	if (ux->ux_ro)
		return -EROFS;
	do {
		r = ucopy_resolve(ux, ino, o);
		if (r != 0)
			return r < 0 ? r : 0;
		lng = ucopy_long(&o->uo_st) && !(meta && ucopy_meta_fits(o));
		r = ucopy_flight_take(ux, ino, lng, &fl);
	} while (r == -EAGAIN);
	if (r < 0)
		return r;
	/* Once it is ours: a copy-up that ended since the look above leaves nothing to do. */
	r = ucopy_resolve(ux, ino, o);
	if (r == 0)
		r = ucopy_run(ux, o, meta);
	ucopy_flight_give(&fl, lng);
	return r < 0 ? r : 0;
}

int ucopy_up(struct union_export *ux, struct uobj *o)
{
	return ucopy_up_as(ux, o, false);
}

int ucopy_meta_up(struct union_export *ux, struct uobj *o)
{
	return ucopy_up_as(ux, o, upol_metacopy(ux));
}

int ucopy_fill_metacopy(int fd, int in, const struct stat *st)
{
	char caps[128];
	size_t capslen = 0;
	struct timespec ts[2];
	struct stat now;
	bool has_caps;
	int r;

	has_caps = fsio_getxattr(fd, "", UCOPY_CAPS_XATTR, caps, sizeof(caps), &capslen) == 0;
	r = fsio_copy_data(in, fd, (uint64_t)st->st_size);
	ucopy_times(st, ts);
	if (r == 0)
		r = fsio_futimens(fd, ts);
	if (r == 0 && has_caps)
		r = fsio_setxattr(fd, "", UCOPY_CAPS_XATTR, caps, capslen);
	/* Writing may clear set-id bits where the writer may not keep them. */
	if (r == 0)
		r = fsio_stat(fd, &now);
	if (r == 0 && now.st_mode != st->st_mode)
		r = fsio_fchmod(fd, st->st_mode & 07777);
	/* The data on disk before the marker goes: a crash in between leaves a metacopy. */
	if (r == 0)
		r = fsio_fsync(fd);
	if (r == 0)
		r = uwh_clear_metacopy(fd, "");
	if (r == 0)
		r = fsio_fsync(fd);
	return r;
}

/* The data of metacopy fd (whose stat is st) copied in from its lower copy. As root. */
static int ucopy_data_in(struct union_export *ux, const struct uobj *o, int fd,
			 const struct stat *st)
{
	struct stat lst;
	int r, in = -1;

	r = umc_data_open(ux, o, &in, &lst);
	if (r == 0)
		r = ucopy_fill_metacopy(fd, in, st);
	fsio_close(in);
	return r;
}

/* Under the flight of o: its data copied in, unless it is whole already. */
static int ucopy_data_run(struct union_export *ux, struct uobj *o)
{
	struct fsio_ids ids;
	struct stat st;
	bool metacopy = false;
	int r, fd = -1;

	fsio_become_root(&ids);
	r = fsio_open_file(o->uo_pfd, o->uo_rec.si_name, O_WRONLY, 0, &fd);
	if (r == -ENOENT || r == -ELOOP)
		r = -ESTALE;
	if (r == 0)
		r = fsio_stat(fd, &st);
	if (r == 0 && !ures_same_number(&st, o->uo_st.st_dev, (uint64_t)o->uo_st.st_ino,
					ures_type(&o->uo_st)))
		r = -ESTALE;
	if (r == 0)
		r = uwh_metacopy_read(fd, "", &metacopy, NULL);
	if (r == 0 && metacopy)
		r = ucopy_data_in(ux, o, fd, &st);
	fsio_restore(&ids);
	if (r == 0 && metacopy) {
		stats_copyup(r);
		/* Descriptors kept of its lower data must not serve it any more. */
		ufd_forget(&st);
	}
	if (r == 0)
		r = fsio_stat(fd, &o->uo_st);
	fsio_close(fd);
	return r;
}

int ucopy_data(struct union_export *ux, struct uobj *o)
{
	uint64_t ino = o->uo_rec.si_ino;
	struct ucopy_flight fl;
	bool lng = (uint64_t)o->uo_st.st_size > UCOPY_LONG_BYTES, metacopy;
	int r = umc_is(ux, o, o->uo_fd, &metacopy);

	if (r < 0 || !metacopy)
		return r;
	do
		r = ucopy_flight_take(ux, ino, lng, &fl);
	while (r == -EAGAIN);
	if (r < 0)
		return r;
	r = ucopy_data_run(ux, o);
	ucopy_flight_give(&fl, lng);
	return r;
}
