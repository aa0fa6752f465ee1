/*
 * The union view of one export: a stack of branch directories, [0] the writable upper
 * (unless the export is read-only), the rest read-only lowers, looked up top-down.
 * It speaks union inode numbers (from the store) and negative errno values, never NFS.
 *
 * Every path is resolved component by component from a branch root directory fd with
 * O_NOFOLLOW; the server never follows a symlink and never leaves a branch.
 *
 * Attributes come back as struct stat with st_ino replaced by the union inode number
 * and st_dev by the export's fsid, so callers never see a real inode number.
 *
 * Callers run on worker threads with the client's fsuid/fsgid/groups already applied
 * (see cred.h), so the branch file systems enforce permissions.
 *
 * A call that needs a lower object copied up while another call copies it, or while the
 * worker pool runs as many large copy-ups as it allows, parks (blocking.h): it returns
 * -EINPROGRESS having changed nothing, and the whole call is to be run again. Off a worker
 * pool it waits in place instead.
 */
#ifndef UNFS_UNION_H
#define UNFS_UNION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "store.h"

/* Branches in one union, the upper included (a branch index fits a byte). */
#define UNION_MAX_BRANCHES 128

struct union_export;

/* What SETATTR (and CREATE/MKDIR attributes) asks to change. */
enum {
	USET_MODE = 1 << 0,
	USET_UID = 1 << 1,
	USET_GID = 1 << 2,
	USET_SIZE = 1 << 3,
	USET_ATIME = 1 << 4,     /* to ua_atime; tv_nsec UTIME_NOW for server time */
	USET_MTIME = 1 << 5,
};

struct union_setattr {
	unsigned ua_mask;
	mode_t ua_mode;
	uid_t ua_uid;
	gid_t ua_gid;
	uint64_t ua_size;
	struct timespec ua_atime;
	struct timespec ua_mtime;
};

enum union_create_how { UNION_UNCHECKED = 0, UNION_GUARDED = 1, UNION_EXCLUSIVE = 2 };
enum union_stable { UNION_UNSTABLE = 0, UNION_DATA_SYNC = 1, UNION_FILE_SYNC = 2 };

/* union_open flags. */
enum {
	UNION_OPEN_RO = 1 << 0,   /* no writes at all, not even to writable branches */
	/*
	 * A new base: the map's stack may have other read-only branches below the same
	 * writable ones (by path and root inode); the union moves to the given stack
	 * (store_rebind_export) instead of refusing it. Objects of the writable branches keep
	 * their inos; files of the old read-only branches go stale (a file of the new base
	 * gets a new ino); directories keep theirs and follow their path.
	 */
	UNION_OPEN_NEW_BASE = 1 << 1,
};

/*
 * What the union may do to a branch: the branch words "=rw", "=ro" and "=rr". A read-only
 * branch may be hidden by whiteouts in a writable branch above it; "rr" (really read-only)
 * also promises nobody changes it. Writable branches come first in a stack.
 */
enum union_role { UNION_BRANCH_RO = 0, UNION_BRANCH_RW, UNION_BRANCH_RR };
#define UNION_ROLE_NAMES { "ro", "rw", "rr" }

/* Which writable branch a new object goes to: the export option create=. */
enum union_create {
	UNION_CREATE_TDP = 0,    /* the topmost writable branch holding the parent */
	UNION_CREATE_RR,         /* round robin */
	UNION_CREATE_MFS,        /* most free space */
	UNION_CREATE_PMFS,       /* most free space among those holding the parent */
};
#define UNION_CREATE_NAMES { "tdp", "rr", "mfs", "pmfs" }
/* What FSSTAT reports: the export option statfs=. */
enum union_statfs_mode {
	UNION_STATFS_SUM = 0,    /* the writable branches' space added up */
	UNION_STATFS_POLICY,     /* the space of the branch the policy would create in */
};
#define UNION_STATFS_NAMES { "sum", "policy" }
/* mfs re-measures free space at most this often by default (create=mfs:SECONDS). */
#define UNION_MFS_DEFAULT_SECS 30

struct union_policy {
	enum union_create up_create;
	unsigned up_mfs_secs;
	enum union_statfs_mode up_statfs;
	/*
	 * The export option metacopy=off: a change of a lower file's attributes copies its
	 * data up too, instead of making a metadata-only copy (the default).
	 */
	bool up_no_metacopy;
};

/*
 * Opens the union named name (the export path clients mount) of the nbranches directories
 * in branches, top first (each must be an existing directory), whose roles are roles[i]
 * (NULL: [0] writable, the rest read-only; writable branches must come first; under
 * UNION_OPEN_RO none is written), binds it in the store (refusing a stack the map was not
 * built for, but see UNION_OPEN_NEW_BASE) and returns it in *out, creating by the default policy (union_set_policy).
 * On failure returns -errno with a message naming the cause in err, followed where the
 * branch list is at fault by fix: the caller's advice on changing it, in the words of its
 * own interface (e.g. "fix -e").
 */
int union_open(const char *name, char *const *branches, int nbranches,
	       const enum union_role *roles, unsigned flags, const char *fix, struct store *st,
	       struct union_export **out, char *err, size_t errlen);
/* Sets where new objects go and what FSSTAT sums; safe while the export serves. */
void union_set_policy(struct union_export *ux, const struct union_policy *p);
/* How many branches, from the top, the union writes to (0: a read-only union). */
int union_writable_branches(const struct union_export *ux);
void union_close(struct union_export *ux);
/* How many branches the union has (the upper included). */
int union_branch_count(const struct union_export *ux);

/*
 * What `status` shows of branch b: read from memory alone, never from a file system, so the
 * event loop may ask. Records are counted by the inode map as changes commit; space is
 * measured when the union opens and then every UNION_SPACE_EVERY_S seconds by a thread.
 */
#define UNION_SPACE_EVERY_S 5
struct union_branch_usage {
	int bu_records_err;      /* 0, or -errno: not counted */
	uint64_t bu_records;     /* records of the map whose served copy is in b */
	int bu_space_err;        /* 0, -errno of the last statvfs, or -EAGAIN: not measured yet */
	uint64_t bu_avail;       /* bytes available to unprivileged writers */
	uint64_t bu_total;       /* bytes in all */
	int64_t bu_age_ms;       /* how long ago the space was measured */
};
void union_branch_usage(const struct union_export *ux, int b, struct union_branch_usage *out);

/*
 * Whether the current call's namespace changes (create, remove, rename, link...) must be
 * on disk before they return (the default), or may be answered first (the export option
 * "async"): a per-call setting, made before the call like the caller's identity, kept in
 * the call's context (call_ctx.h), so it ends with the call.
 * The inode map and copy-ups are durable either way.
 */
void union_set_sync(bool sync);

uint16_t union_export_id(const struct union_export *ux);
/* The inode map the export is bound in (its per-client views are bound in the same one). */
struct store *union_store(const struct union_export *ux);
uint64_t union_fsid(const struct union_export *ux);
bool union_read_only(const struct union_export *ux);
/* The largest file the upper branch's file system holds (2^63 - 1 when unknown). */
uint64_t union_max_file_size(const struct union_export *ux);

/* Attributes of an object. -ESTALE when the ino no longer names anything. */
int union_getattr(struct union_export *ux, uint64_t ino, struct stat *st);

/*
 * What the caller may do to ino (R_OK, W_OK, X_OK, asked for in want) into *granted, as the
 * kernel decides it for the caller: mode bits, groups, POSIX ACLs, privilege. For a lower
 * object W_OK says what the caller may do once it is copied up (the copy keeps mode, owner
 * and ACL); a read-only export grants no W_OK. st receives the attributes, as
 * union_getattr.
 */
int union_access(struct union_export *ux, uint64_t ino, int want, int *granted,
		 struct stat *st);

/*
 * Repair: drops the record of ino when, checked again inside a write transaction, no branch
 * has its object any more (removed behind the server's back; its handles were stale
 * already). Returns 1 when dropped, 0 when it resolves (or is gone already), or -errno.
 */
int union_forget_stale(struct union_export *ux, uint64_t ino);

/* What union_check found. */
struct union_check_counts {
	uint64_t cnt_records;      /* records checked */
	uint64_t cnt_stale;        /* no branch has their object any more */
	uint64_t cnt_dropped;      /* of those, records repair dropped */
	uint64_t cnt_errors;       /* records that could not be checked */
};

/* Where union_check reports; its functions are called one at a time, from its threads. */
struct union_check_sink {
	unsigned cs_threads;      /* records resolved at once (0: one) */
	unsigned cs_pace_us;      /* a pause after each record, per thread (slow storage) */
	/*
	 * A record that does not resolve: r -ESTALE (stale), 1 (stale, its record dropped) or
	 * another -errno (not checked). NULL: only counted.
	 */
	void (*cs_record)(void *arg, uint64_t ino, int r);
	/* done of total records checked, every few dozen records; false stops the check. */
	bool (*cs_progress)(void *arg, uint64_t done, uint64_t total);
	void *cs_arg;
};

/*
 * Resolves every record of the export's map as a client's call would (records of objects
 * that moved are updated on the way) and counts those no branch has an object for any
 * more; with repair, drops them (union_forget_stale). Reads the map in one pass and
 * resolves in sink->cs_threads threads of lower CPU priority than client calls. Returns 0,
 * -ECANCELED when cs_progress stopped it, or -errno when the map cannot be read.
 */
int union_check(struct union_export *ux, const struct union_check_sink *sink, bool repair,
		struct union_check_counts *out);

/*
 * Looks name up in directory dir ("." and ".." included; ".." of the root is the root).
 * Like knfsd, only for a caller allowed to search dir: -EACCES otherwise, from the cache
 * as without it.
 */
int union_lookup(struct union_export *ux, uint64_t dir, const char *name, uint64_t *ino,
		 struct stat *st);
/*
 * union_lookup that also fills dirst with dir's attributes as the lookup found them
 * (st_ino 0 when dir itself could not be resolved), on failure too.
 */
int union_lookup_in(struct union_export *ux, uint64_t dir, const char *name, uint64_t *ino,
		    struct stat *st, struct stat *dirst);

/*
 * Changes attributes. pre (may be NULL) receives the attributes just before the change,
 * post those just after. If guard_ctime is not NULL and differs from the object's ctime,
 * fails with -EAGAIN (NFS3ERR_NOT_SYNC) without changing anything, pre and post then both
 * the attributes it has. The check and the change are atomic against other union_setattr
 * calls on the same object.
 */
int union_setattr(struct union_export *ux, uint64_t ino, const struct union_setattr *sa,
		  const struct timespec *guard_ctime, struct stat *pre, struct stat *post);

int union_readlink(struct union_export *ux, uint64_t ino, char *buf, size_t bufsize,
		   size_t *len, struct stat *post);

/* Reads up to count bytes at off into buf. */
int union_read(struct union_export *ux, uint64_t ino, uint64_t off, uint32_t count, void *buf,
	       uint32_t *nread, bool *eof, struct stat *post);
/*
 * union_read for the identity the calling thread acts as, described by the wholen bytes
 * at who: the thread may then keep the file open for further reads by the same identity.
 */
int union_read_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		  uint64_t off, uint32_t count, void *buf, uint32_t *nread, bool *eof,
		  struct stat *post);

/* Writes; *committed receives how stable the data is now (never less than stable). */
int union_write(struct union_export *ux, uint64_t ino, uint64_t off, uint32_t count,
		const void *buf, enum union_stable stable, uint32_t *nwritten,
		enum union_stable *committed, struct stat *pre, struct stat *post);

/* union_write() on behalf of who, by the rules of union_read_as(): the file may stay open. */
int union_write_as(struct union_export *ux, uint64_t ino, const void *who, size_t wholen,
		   uint64_t off, uint32_t count, const void *buf, enum union_stable stable,
		   uint32_t *nwritten, enum union_stable *committed, struct stat *pre,
		   struct stat *post);

/* Makes all written data and metadata of the object durable (fsync). */
int union_commit(struct union_export *ux, uint64_t ino, struct stat *pre, struct stat *post);

/*
 * Creates a regular file. EXCLUSIVE keeps verf in the file's times so a retransmitted
 * create with the same verifier succeeds and returns the same file (RFC 1813 3.3.8);
 * sa is ignored for EXCLUSIVE. dirpre/dirpost: the directory's attributes around it.
 */
int union_create(struct union_export *ux, uint64_t dir, const char *name,
		 enum union_create_how how, const struct union_setattr *sa, const uint8_t verf[8],
		 uint64_t *ino, struct stat *st, struct stat *dirpre, struct stat *dirpost);
int union_mkdir(struct union_export *ux, uint64_t dir, const char *name,
		const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		struct stat *dirpre, struct stat *dirpost);
int union_symlink(struct union_export *ux, uint64_t dir, const char *name, const char *target,
		  const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		  struct stat *dirpre, struct stat *dirpost);
/* type is S_IFCHR, S_IFBLK, S_IFIFO or S_IFSOCK. */
int union_mknod(struct union_export *ux, uint64_t dir, const char *name, mode_t type,
		dev_t rdev, const struct union_setattr *sa, uint64_t *ino, struct stat *st,
		struct stat *dirpre, struct stat *dirpost);

int union_remove(struct union_export *ux, uint64_t dir, const char *name,
		 struct stat *dirpre, struct stat *dirpost);
int union_rmdir(struct union_export *ux, uint64_t dir, const char *name,
		struct stat *dirpre, struct stat *dirpost);
int union_rename(struct union_export *ux, uint64_t fromdir, const char *fromname,
		 uint64_t todir, const char *toname, struct stat *frompre, struct stat *frompost,
		 struct stat *topre, struct stat *topost);
/* Links object ino as name in dir; the new name has the same union ino. */
int union_link(struct union_export *ux, uint64_t ino, uint64_t dir, const char *name,
	       struct stat *post, struct stat *dirpre, struct stat *dirpost);

/*
 * One directory entry of a listing. Cookies are stable across independent calls and
 * server restarts: "." is 1, ".." is 2, every other name a 63-bit hash of the name (>= 3),
 * and entries come in cookie order, so a listing resumes after any cookie even when
 * entries were added or removed in between.
 */
struct union_dirent {
	const char *ud_name;
	uint64_t ud_ino;
	uint64_t ud_cookie;
	mode_t ud_type;          /* S_IFMT bits */
	const struct stat *ud_st;/* full attributes when the listing asked for them, else NULL */
};

/* Return 0 to continue, 1 to stop (the reply is full; the entry was not used). */
typedef int (*union_dirent_fn)(void *ctx, const struct union_dirent *de);

/*
 * Lists dir from the first entry whose cookie is greater than cookie, calling fn for each.
 * With_attrs fills ud_st. *eof says the listing reached the end. The merged listing is
 * cached per directory, so listing N entries over many calls costs O(N) in total.
 */
int union_readdir(struct union_export *ux, uint64_t dir, uint64_t cookie, bool with_attrs,
		  union_dirent_fn fn, void *ctx, bool *eof);

/*
 * Closes every descriptor the union layer keeps open only to save work later: the files
 * kept open for READ and WRITE (shared by all exports) and the resolve cache's directory
 * and parent descriptors of ux, or of every open export when ux is NULL. The directory
 * listing cache holds no descriptors. Every file system call that runs out of descriptors
 * (EMFILE/ENFILE) does this for every open export by itself (fsio's shedder) and tries once
 * more; a call that still finds none fails with -EMFILE or -ENFILE, which clients see as
 * NFS3ERR_JUKEBOX and retry. Safe from any thread, at any time.
 */
void union_shed_fds(struct union_export *ux);

/*
 * File system statistics: by the export's statfs= policy, the writable branches' added
 * up or the one the create policy picks now (the first branch's if read-only).
 */
int union_statfs(struct union_export *ux, uint64_t ino, struct statvfs *sv);

/*
 * How long the resolve cache trusts where it found a name in a directory it does not watch
 * (past the watch budget, without change notification, below a redirect): a change made by
 * hand there (a new copy of a directory, a copy or whiteout over a name) is seen within this.
 */
#define UNION_CACHE_TRUST_MS 1000

/* Milliseconds on a monotonic clock. */
typedef int64_t (*union_clock_fn)(void);

/*
 * Replaces the clock by which the resolve cache of ux ages its entries (NULL: the system's
 * monotonic clock), so a test can let UNION_CACHE_TRUST_MS pass without waiting for it.
 * Set it right after union_open: entries made on another clock would get meaningless ages.
 */
void union_set_clock(struct union_export *ux, union_clock_fn now_ms);

/*
 * Test hooks of change notification (watch.c). union_watch_settle counts every change made
 * so far in a watched branch directory, as the server's thread does as soon as it runs;
 * union_watch_budget sets how many directories may be watched at once (SIZE_MAX: the
 * default), for watches made after it.
 */
void union_watch_settle(void);
void union_watch_budget(size_t dirs);

/*
 * Base versions (rebase.c): a client's upper kept over a new stack of lower branches.
 * "The base at P" of a stack is what a union of those branches alone shows at P (their own
 * whiteouts and opaque directories count). union_conflicts reports each entry of the upper
 * that hides a base path whose base differs between the old and the new stack: presence,
 * type, mode, owner, group, a regular file's bytes, a symlink's target, a device's number,
 * and for a directory everything under it.
 */
enum union_upper_kind {
	UNION_UPPER_COPY,              /* the client's own file, symlink, device, directory */
	UNION_UPPER_WHITEOUT,          /* the client deleted it */
	UNION_UPPER_METACOPY,          /* the client changed only attributes; data is the base's */
	UNION_UPPER_OPAQUE,            /* a directory of the client's hiding the base's */
	/* A renamed directory or metacopy whose redirect's target the old stack had (as a
	 * directory, for a directory) and the new one has not. */
	UNION_UPPER_REDIRECT_MISSING,
};

enum union_base_change {
	UNION_BASE_CHANGED,
	UNION_BASE_ADDED,              /* absent in the old stack, present in the new */
	UNION_BASE_REMOVED,            /* present in the old stack, absent in the new */
};

struct union_conflict {
	const char *uc_path;           /* from the union's root: "/etc/motd" */
	enum union_upper_kind uc_kind;
	enum union_base_change uc_change;
};

/* "copy", "whiteout", "metacopy", "opaque", "redirect-missing". */
const char *union_upper_kind_name(enum union_upper_kind kind);
/* "changed", "added", "removed". */
const char *union_base_change_name(enum union_base_change change);

/*
 * Walks the upper directory (as root, never through a symlink, skipping the union's own
 * names) and calls fn for each conflict, in the order of their paths (strcmp). Stacks are
 * top first, 1 to UNION_MAX_BRANCHES paths each. A non-zero return of fn stops the walk and
 * is returned; otherwise 0, or -errno with the cause and the fix in err.
 */
int union_conflicts(const char *upper, char *const *old_base, int nold, char *const *new_base,
		    int nnew, int (*fn)(const struct union_conflict *c, void *arg), void *arg,
		    char *err, size_t errlen);

/*
 * Makes every metacopy of the upper whole from the old stack (top first, 1 to
 * UNION_MAX_BRANCHES paths), before the upper moves to a new one: a metacopy's data is
 * its base's, so over the new base it would show other bytes. Each gets its data copied
 * in from where the union finds it in the old stack (its own path, or its redirect), in
 * place, keeping its size, times, mode, owner and other attributes; the data is on disk
 * before the metacopy marker (and its redirect) is removed, so an interrupted run leaves
 * metacopies or whole files, and running again finishes it. As root, never through a
 * symlink, skipping the union's own names. Run it while no union serves the upper (a
 * client's write could race the copy). *done: how many were completed. 0, or the first
 * failure's -errno with the cause and the fix in err, after every other metacopy was
 * done (-ENOENT: the old stack lacks one's data; that one stays a metacopy).
 */
int union_complete_metacopies(const char *upper, char *const *old_base, int nold, int *done,
			      char *err, size_t errlen);

/*
 * Drops the upper's own entry at path ("/a/b": from the union's root, no empty, "." or ".."
 * components, not the root) so the base shows there: a non-directory or whiteout with the
 * OCI whiteout ".wh.NAME" beside it, or a directory with everything in it. Its parent
 * directories stay. 0, or -errno with the cause and the fix in err (-ENOENT: the upper has
 * nothing there).
 */
int union_take_base(const char *upper, const char *path, char *err, size_t errlen);

#endif
