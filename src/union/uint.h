/* Internals shared by the union layer's files; nothing outside src/union includes this. */
#ifndef UNFS_UNION_INT_H
#define UNFS_UNION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store.h"
#include "union.h"

/* Copy-up's scratch directory at the upper's root; never visible through the union. */
#define UNION_WORK_NAME ".unionnfsd.work"
/* Deeper than any real tree; a longer parent chain in the map is a cycle. */
#define UNION_MAX_DEPTH 2048

struct udir_cache;
struct uhl_table;
struct upolicy;
struct uspace;
struct ucache;
struct ucent;

struct union_export {
	uint16_t ux_id;
	bool ux_ro;
	struct store *ux_store;
	char *ux_name;
	int ux_nbranches;
	int ux_nwritable;        /* branches [0, ux_nwritable) are written; 0 when ux_ro */
	enum union_role *ux_roles;
	struct upolicy *ux_policy;   /* where new objects go (policy.c) */
	struct uspace *ux_space;     /* each branch's space as last measured (space.c) */
	int *ux_rootfd;          /* O_PATH, top-down */
	dev_t *ux_dev;           /* each root's st_dev: nothing on another device is served */
	char **ux_paths;         /* canonical */
	uint8_t ux_cookie_key[STORE_KEY_LEN];
	pthread_mutex_t ux_work_lock;
	int ux_workfd;           /* O_PATH of the work directory, -1 until copy-up needs it */
	struct udir_cache *ux_dcache;
	struct uhl_table *ux_hl;     /* hard links across copy-up (hlink.c) */
	struct ucache *ux_ucache;    /* where inos were last found (cache.c) */
	uint64_t ux_max_size;        /* largest file the upper's file system holds */
	/* The root's record, made with the export and never changed: read once, at open. */
	struct store_inode ux_root_rec;
};

/*
 * Whether an object in branch b is changed where it is: b is writable. Copy-up (to branch
 * 0, the topmost writable) is only for objects in read-only branches.
 */
static inline bool ubr_writable(const struct union_export *ux, unsigned b)
{
	return b < (unsigned)ux->ux_nwritable;
}

/* Milliseconds on the coarse monotonic clock: for the ages of measurements. */
static inline int64_t umono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether branch b is promised never to change (=rr): none of its directories is watched. */
static inline bool ubr_unchanging(const struct union_export *ux, unsigned b)
{
	return ux->ux_roles[b] == UNION_BRANCH_RR;
}

#define UNION_FSID_BASE 0x756e696f6e000000ULL /* "union" */

/* The file system id the export shows (st_dev, FSINFO's fsid): union_fsid. */
static inline uint64_t uexp_fsid(const struct union_export *ux)
{
	return UNION_FSID_BASE | ux->ux_id;
}

/* The copies of one union directory, top-down. */
struct udirset {
	int ds_n;
	bool ds_borrowed;        /* the fds are the branch roots: never closed */
	int ds_fd[UNION_MAX_BRANCHES];
	uint8_t ds_branch[UNION_MAX_BRANCHES];
};

/* Its operations (dirset.c). */
void uds_init(struct udirset *ds);
void uds_root(const struct union_export *ux, struct udirset *ds);
void uds_release(struct udirset *ds);
/* An owned fd for entry i (moved out, or duplicated from borrowed roots), or -errno. */
int uds_take(struct udirset *ds, int i);
/* The index of branch b's copy, or -1. */
int uds_index_of(const struct udirset *ds, uint8_t b);
/* The fd of branch b's copy, or -1. */
int uds_fd_of(const struct udirset *ds, uint8_t b);
/* The fd of branch b's copy, else of the top one. */
int uds_fd_or_top(const struct udirset *ds, uint8_t b);
/*
 * Answers served from a cache must not grant what the uncached path, whose system calls
 * the kernel checks as the caller, would refuse; these make the same kind of call, so the
 * kernel decides (mode bits, groups, POSIX ACLs, capabilities). 0, -EACCES or -errno.
 * uds_may_search: may the caller look names up in each of the first n copies (search).
 * uds_may_list: may the caller read every copy, as a listing does (read permission).
 */
int uds_may_search(const struct udirset *ds, int n);
int uds_may_list(const struct udirset *ds);

/* What one name in a union directory is. */
struct ufound {
	bool uf_dir;
	uint8_t uf_branch;       /* of the topmost copy, which decides */
	int uf_pidx;             /* index of that copy's directory in the parent set */
	struct stat uf_st;       /* lstat of the topmost copy (real st_ino) */
	struct udirset uf_dirs;  /* directories (unless UFIND_STAT): every merged copy */
	bool uf_below;           /* UFIND_BELOW: a branch below the topmost has the name too */
	bool uf_below_dir;       /* ... and the first of those is a directory */
	char *uf_redirect;       /* directories: the upper copy's redirect, if any (malloc) */
	uint64_t uf_id;          /* non-directories ures_map matched: fsio_ident of the copy */
};

enum {
	UFIND_STAT = 1 << 0,     /* only the topmost copy's identity, open nothing */
	UFIND_BELOW = 1 << 1,    /* look at every branch to fill uf_below */
};

void ufound_init(struct ufound *f);
void ufound_release(struct ufound *f);
/*
 * Looks name up in the copies of a directory, union style (find.c): -ENOENT when absent
 * or hidden by a whiteout. f is initialised either way; release it.
 */
int ures_find(struct union_export *ux, const struct udirset *parent, const char *name,
	      int flags, struct ufound *f);
/*
 * The directory in branch b that holds the last component of the absolute path (an owned
 * fd), and that component (STORE_NAME_MAX + 1 bytes). -ENOENT: not in this branch;
 * -ENOTDIR: something in the way (a whiteout, a file) hides it.
 */
int ufind_walk(const struct union_export *ux, uint8_t b, const char *path, int *pfd,
	       char *last);
/* Whether a copy of the directory below its copy at index at has an entry name, hidden or not. */
bool ures_lower_has(struct union_export *ux, const struct udirset *parent, int at,
		    const char *name);

/* A resolved object. */
struct uobj {
	struct store_inode uo_rec;   /* si_branch/si_real_ino: the copy served */
	struct stat uo_st;           /* real attributes of that copy (topmost for directories) */
	int64_t uo_birth_ns;         /* non-directories: its birth time (fsio_statat_birth) */
	struct udirset uo_dirs;      /* directories: every copy */
	int uo_pfd;                  /* non-directories: O_PATH of the parent copy holding it */
	int uo_fd;                   /* non-directories: O_PATH of the object itself */
	int uo_upfd;                 /* non-directories: O_PATH of the parent's upper copy, or -1 */
	char *uo_origin;             /* URES_ORIGIN: where its lower copies are, "/a/b" (malloc) */
	struct ucent *uo_cent;       /* from the resolve cache: uo_pfd/uo_dirs are its, borrowed */
};

enum {
	URES_UPPER = 1 << 0,     /* make sure the directory (or a file's parent) is in the upper */
	URES_ORIGIN = 1 << 1,    /* directories: fill uo_origin */
};

void uobj_init(struct uobj *o);
void uobj_release(struct uobj *o);
/*
 * Resolves ino to its current copies. wtxn: a write transaction the caller holds (all store
 * access then goes through it), or NULL. -ESTALE when the ino names nothing any more.
 */
int ures_resolve(struct union_export *ux, struct store_txn *wtxn, uint64_t ino, int flags,
		 struct uobj *o);
/*
 * Whether the caller may access o with mask as the kernel would on a writable file system
 * (fsio_may): for the checks before a copy-up, which gives the copy o's mode, owner and ACL.
 */
bool uobj_may(const struct uobj *o, int mask);
/*
 * ures_resolve(ux, NULL, ino, 0, o) served from the resolve cache when it can: then
 * uo_fd and uo_upfd are -1 (callers needing them use ures_resolve).
 */
int ures_resolve_cached(struct union_export *ux, uint64_t ino, struct uobj *o);
/*
 * union_check's test of one record: 0 when it resolves, else what union_getattr answers.
 * A file whose identity the record keeps is matched in its parent directory reached
 * through the cache (as a cache hit would be), and not put in the cache itself.
 */
int ures_check_record(struct union_export *ux, uint64_t ino);
/*
 * The union ino of name in directory pino (whose copies are parent): finds the name again,
 * and returns its ino, creating or re-keying the record as needed. f receives what was
 * found (release it). wtxn as for ures_resolve.
 */
int ures_map(struct union_export *ux, struct store_txn *wtxn, uint64_t pino,
	     const struct udirset *parent, const char *name, int flags, struct ufound *f,
	     uint64_t *ino);
/* What a caller of ures_map_batch already knows about the names. */
struct ures_hints {
	const int *uh_pidx;          /* the copy of the parent each name was found in; -1: none */
	const struct stat *uh_st;    /* its lstat there */
	/* Under the store's write lock: whether all of that still holds (NULL: never). */
	bool (*uh_fresh)(void *ctx);
	void *uh_ctx;
};
/*
 * Inos of many names in one directory at once: one read transaction for those already
 * known, one write transaction for the rest. Names are looked up, unless hints (or NULL)
 * tell where they are; before a record is made a name is looked up again, unless the
 * hints are still fresh. inos[i] is 0 for a vanished name.
 */
int ures_map_batch(struct union_export *ux, uint64_t pino, const struct udirset *parent,
		   size_t n, const char *const *names, const struct ures_hints *hints,
		   uint64_t *inos);
/* A record's type of st (si_type): its S_IFMT bits, shifted down to one byte. */
static inline uint8_t ures_type(const struct stat *st)
{
	return (uint8_t)((st->st_mode & S_IFMT) >> 12);
}
/*
 * Whether st shows the copy (device, inode number, type) a record or an earlier stat named:
 * the one check by number. An fd held on the copy keeps its number from passing to another
 * file, so against a stat of that fd this is its identity; a copy found again by name also
 * needs its identity (si_real_id) or birth time compared.
 */
static inline bool ures_same_number(const struct stat *st, dev_t dev, uint64_t ino,
				    uint8_t type)
{
	return st->st_dev == dev && (uint64_t)st->st_ino == ino && ures_type(st) == type;
}
/* Replaces the real identity in st by the union one. */
void ures_fix_stat(const struct union_export *ux, struct stat *st, uint64_t ino);

/* fsync of a namespace change's objects, unless the call is "async" (union_set_sync). */
int uop_sync_file(int fd);
int uop_sync_dir(int dirfd);

/* Name checks (names.c): 0, -EINVAL ("", '/'), -ENAMETOOLONG. */
int uname_check(const char *name);
bool uname_dot(const char *name);
/* Internal names that clients never see: the work directory and every marker name. */
bool uname_hidden(uint64_t dir, const char *name);

/* Markers (whiteout.c). */
#define UWH_PREFIX ".wh."

/* Whether name is a marker name (".wh.*"), which clients never see or make. */
static inline bool uwh_marker(const char *name)
{
	return !strncmp(name, UWH_PREFIX, sizeof(UWH_PREFIX) - 1);
}
#define UWH_OPAQUE ".wh..wh..opq"
/* Temporary names in upper directories; marker names, so never visible. */
#define UWH_TMP_PREFIX ".wh..unionnfsd."

/*
 * lstat of an entry for telling markers apart: with the server's identity when the
 * client's may not search the directory (markers are the server's own metadata; whether
 * the client may look in is checked on its own).
 */
int uwh_statat(int dirfd, const char *name, struct stat *st);
/* Whether the object st at name in dirfd is an overlayfs whiteout. */
bool uwh_is_whiteout(int dirfd, const char *name, const struct stat *st);
/* Whether dirfd holds the OCI whiteout ".wh.<name>". */
bool uwh_oci(int dirfd, const char *name);
/*
 * The markers of the directory dirfd (an O_PATH fd): opaque, or else a redirect (malloc,
 * NULL when none; malformed ones are ignored).
 */
int uwh_dir_read(int dirfd, bool *opaque, char **redirect);
/*
 * Whether the regular file name in dirfd is a metacopy (attributes only; its data is a
 * lower copy's) and, unless redirect is NULL, its redirect: "/a/b/f" from the roots, or a
 * plain name in the same parent (malloc, NULL: none).
 */
int uwh_metacopy_read(int dirfd, const char *name, bool *metacopy, char **redirect);
/* Marks a file a metacopy, or makes it a whole file again (both markers go); as root. */
int uwh_set_metacopy(int dirfd, const char *name);
int uwh_clear_metacopy(int dirfd, const char *name);
/* Makes a whiteout at name, which must not exist, with the caller's identity if possible. */
int uwh_make(int dirfd, const char *name);
/* Marks a directory opaque, or sets its redirect (name "" for dirfd itself); as root. */
int uwh_set_opaque(int dirfd, const char *name);
int uwh_set_redirect(int dirfd, const char *name, const char *path);
/* A fresh temporary name (UWH_TMP_PREFIX...). */
int uwh_tmp_name(char *buf, size_t len);
/* Whether an xattr is overlay metadata or ours, never copied or shown. */
bool uwh_internal_xattr(const char *attr);
/* Removes directory name of parentfd with the markers in it, as root; -ENOTEMPTY if more. */
int uwh_purge_dir(int parentfd, const char *name);

/* Copy-up (copyup.c). */
/* Creates the upper copy of directory name (found as f) inside parent, whose [0] is the upper. */
int ucopy_dir(struct union_export *ux, uint64_t pino, const struct udirset *parent,
	      const char *name, struct ufound *f);
/* The same in writable branch b, which parent has a copy in, at its place among f's copies. */
int ucopy_dir_in(struct union_export *ux, uint64_t pino, const struct udirset *parent,
		 uint8_t b, const char *name, struct ufound *f);
/*
 * Makes directory ino (and each directory above it) have a copy in writable branch b, each
 * made as copy-up makes one, and resolves it into d. -EXDEV when a copy there would not
 * be merged (an opaque or redirected directory above it); that one is not left made.
 */
int ucopy_dir_into(struct union_export *ux, uint64_t ino, uint8_t b, struct uobj *d);
/* Copies a lower non-directory up and re-resolves o to the upper copy, same ino. */
int ucopy_up(struct union_export *ux, struct uobj *o);
/*
 * What an upper copy was copied up from (its origin, an xattr the copy gets before it is
 * renamed into place): the union object and the lower copy the map named then.
 */
struct ucopy_origin {
	uint16_t co_export;
	uint64_t co_ino;
	uint8_t co_branch;
	uint64_t co_real_ino;
	uint64_t co_real_id;
};
/* The origin of name in dirfd: 0, -ENODATA when it has none, or -errno. */
int ucopy_origin_get(int dirfd, const char *name, struct ucopy_origin *org);
/* The work directory (an O_PATH fd owned by ux), made on first use. */
int ucopy_workdir(struct union_export *ux, int *fd);

/*
 * Completes the copy-up of a metacopy (copyup.c): its lower data copied into it in
 * place, made durable, then the marker removed, so a kill at any point leaves either the
 * metacopy or the whole file. One at a time per object, as copy-ups are. 0 at once when
 * o is no metacopy (any more); o is stat'ed again when it was one. Before a size change,
 * and before a rename or link, which would lose the path its data is found by.
 */
int ucopy_data(struct union_export *ux, struct uobj *o);
/* The attribute that names a file's capabilities, which a write to the file drops. */
#define UCOPY_CAPS_XATTR "security.capability"
/*
 * SETATTR's copy-up (copyup.c): a regular file with one name and some data gets a
 * metacopy when the export allows (union_policy's up_no_metacopy unset), else a copy.
 */
/*
 * Makes metacopy fd (whose stat is st) whole from in, its data: copied in (holes kept),
 * with its own times, capabilities and mode kept, on disk before the marker (and a
 * redirect) goes, then on disk again. As root. 0 or -errno.
 */
int ucopy_fill_metacopy(int fd, int in, const struct stat *st);
int ucopy_meta_up(struct union_export *ux, struct uobj *o);

/* Metadata-only copies (metacopy.c). */
/* Whether o, resolved, might be a metacopy: data to find below, in a writable branch. */
bool umc_candidate(const struct union_export *ux, const struct uobj *o);
/* Whether o is a metacopy, asked of fd (an fd of o) or, when fd is -1, of its name. */
int umc_is(const struct union_export *ux, const struct uobj *o, int fd, bool *metacopy);
/*
 * The lower copy holding metacopy o's data, opened read-only as root, and its stat:
 * -ENODATA when o is no metacopy (any more), -EIO when no lower copy has its data.
 */
int umc_data_open(struct union_export *ux, const struct uobj *o, int *fd, struct stat *st);
/*
 * union_check's test of a record that resolves: -ENOLINK when it is a metacopy no lower copy
 * holds the data of (its READs fail), else 0 (or -errno when that could not be told).
 */
int umc_check(struct union_export *ux, uint64_t ino);
/*
 * A metacopy's blocks: umc_learn finds them for a resolved o that may be one (a look at
 * its markers and its lower copy, once per change of it); umc_fix_blocks puts them into
 * any real stat of it, unchanged since (ures_fix_stat does, for every reply).
 */
void umc_learn(struct union_export *ux, const struct uobj *o);
void umc_fix_blocks(struct stat *st);
/*
 * Whether name in copy pidx of the directory parent (st: its attributes) is a metacopy of
 * the lower copy rec names: what a metacopy's creation cut short between its rename into
 * place and the map's update leaves (a metacopy carries no origin, which would cost an
 * inode's room for xattrs, a block per file on ext4).
 */
bool umc_made_of(struct union_export *ux, const struct udirset *parent, int pidx,
		 const char *name, const struct stat *st, const struct store_inode *rec);
/* Whether the export makes metacopies (policy.c). */
bool upol_metacopy(const struct union_export *ux);

/* Hard links across copy-up (hlink.c). */
/* Loads the index at start-up; forgets entries of copy-ups that never finished. */
int uhl_open(struct union_export *ux);
void uhl_close(struct union_export *ux);
/* Corrects st_nlink of the upper copy of an indexed object to the union's count. */
void uhl_fix_nlink(const struct union_export *ux, struct stat *st, uint64_t ino);
/* The union nlink of ino whose copy has attributes st. */
nlink_t uhl_nlink(struct union_export *ux, uint64_t ino, const struct stat *st);
/* The indexed upper copy of lower inode (b, lower): its attributes, -ENOENT if none. */
int uhl_find(struct union_export *ux, uint8_t b, uint64_t lower, struct stat *st);
/* Copy-up of a file with lower_nlink names: records the names still to link up on it. */
int uhl_prepare(int dirfd, const char *name, nlink_t lower_nlink);
/* Links the copy (dirfd, name) into the index as lower inode (b, lower); as root. */
int uhl_index(struct union_export *ux, int dirfd, const char *name, uint8_t b,
	      uint64_t lower);
void uhl_unindex(struct union_export *ux, uint8_t b, uint64_t lower);
/* After the map took the copy-up: object ino is indexed, its copy is real. */
int uhl_indexed(struct union_export *ux, uint64_t ino, uint64_t real, uint8_t b,
		uint64_t lower, nlink_t lower_nlink);
/* Links the indexed copy of (b, lower) as name in upper directory dirfd, one name less due. */
int uhl_link_up(struct union_export *ux, uint8_t b, uint64_t lower, int dirfd,
		const char *name);
/* The object ino is gone: its index entry goes too. */
void uhl_forget(struct union_export *ux, uint64_t ino);
/* Where the copy of indexed object ino (upper inode real) can be reached: the index. */
int uhl_open_copy(struct union_export *ux, uint64_t ino, uint64_t real, int *dirfd,
		  char *name);

/* Resolve cache (cache.c). */
int ucache_new(int nbranches, struct ucache **out);
void ucache_free(struct ucache *c);
/* The namespace changed (after the change, before the reply): forget every entry. */
void ucache_changed(struct union_export *ux);
/* Read before resolving; entries made from that resolution carry it. */
uint64_t ucache_epoch(const struct union_export *ux);
/* A live entry (a reference, give it back with ucache_put), or NULL. */
struct ucent *ucache_get(struct union_export *ux, uint64_t ino);
struct ucent *ucache_get_name(struct union_export *ux, uint64_t dir, const char *name);
void ucache_put(struct ucent *e);
/*
 * LOOKUP of name in directory dir, whose copies are parent, from the cache: 0 with the ino
 * and real attributes; -ENOENT when not known, or when the kernel did not let the caller
 * search the copies an uncached lookup would search (which then gives its answer).
 */
int ucache_lookup(struct union_export *ux, const struct udirset *parent, uint64_t dir,
		  const char *name, uint64_t *ino, struct stat *st);
/* Drops an entry that turned out stale. */
void ucache_forget(struct union_export *ux, struct ucent *e);
/*
 * Caches a resolved directory, taking its copies (borrowed ones, the root's, stay so);
 * returns a reference, or NULL with ds left to the caller. up: the live entry of the
 * directory it was found in, taken before it was looked up there (NULL: none, or the root).
 */
struct ucent *ucache_add_dir(struct union_export *ux, uint64_t epoch, uint64_t ino,
			     const struct store_inode *rec, struct udirset *ds, struct ucent *up);
/*
 * Caches a non-directory found as name in copy pidx of the resolved directory parent,
 * whose identity (fsio_ident) ures_map matched as id: unless the file there now has it,
 * nothing is cached.
 */
void ucache_add_file(struct union_export *ux, uint64_t epoch, uint64_t ino, uint64_t dir,
		     const char *name, uint8_t branch, const struct stat *st, uint64_t id,
		     const struct uobj *parent, int pidx);
/*
 * Caches a resolved non-directory, taking its uo_pfd and uo_fd; returns a reference (or
 * NULL, and o unchanged), which o may then borrow from. up as for ucache_add_dir.
 */
struct ucent *ucache_add_resolved(struct union_export *ux, uint64_t epoch, struct uobj *o,
				  struct ucent *up);
bool ucent_is_dir(const struct ucent *e);
/*
 * Real attributes of the entry's copy (files: and its birth time); -ESTALE when it is not
 * that copy any more.
 */
int ucent_stat(struct union_export *ux, const struct ucent *e, struct stat *st,
	       int64_t *birth_ns);
/* The directory copy holding a file entry's object (borrowed). */
int ucent_pfd(const struct ucent *e);
/* Points o's record and fds at the entry's (borrowed: o must hold the reference). */
void ucent_borrow(const struct ucent *e, struct uobj *o);

/*
 * Drops dead entries (all: every entry), closing what they hold; the sweeper (sweep.c)
 * calls it about once a second.
 */
void ucache_sweep(struct union_export *ux, bool all);
/* An object went away through the server: its entry goes at once, live or not. */
void ucache_forget_ino(struct union_export *ux, uint64_t ino);

/*
 * Files kept open for READ and WRITE, shared by the workers (fdcache.c). An entry is a
 * descriptor opened with mode (O_RDONLY or O_WRONLY) for one identity (who, wholen bytes
 * of the caller's credentials) on the object (st_dev, st_ino) whose ctime was st_ctim.
 */
#define UFD_KEY_MAX 128
struct ufd_ent;
/* The entry for exactly that object, mode and identity (a reference), or NULL. */
struct ufd_ent *ufd_get(const struct stat *st, int mode, const void *who, size_t wholen);
int ufd_fd(const struct ufd_ent *e);
/* Gives a reference back (NULL is fine). */
void ufd_put(struct ufd_ent *e);
/* Keeps fd, opened on the object st describes (takes it; closes it if it cannot). */
void ufd_keep(int fd, const struct stat *st, int mode, const void *who, size_t wholen);
/*
 * For a descriptor that is not the object's own (a metacopy's lower data, kept under the
 * metacopy's key): ufd_forgets before it is opened, ufd_keep_since after, which keeps it
 * only if no ufd_forget of the object (or of its shard) came between, so a forget that
 * ends the metacopy can never be outrun by a keep of its data.
 */
uint64_t ufd_forgets(const struct stat *st);
#define UFD_ALWAYS UINT64_MAX /* a seen that keeps the descriptor whatever came between */
void ufd_keep_since(int fd, const struct stat *st, int mode, const void *who, size_t wholen,
		    uint64_t seen);
/* A WRITE through the entry succeeded: st is the file's state after it. */
void ufd_wrote(struct ufd_ent *e, const struct stat *st);
/* The entry failed: it goes from the cache (the caller's reference stays valid). */
void ufd_drop(struct ufd_ent *e);
/*
 * The object st describes was unlinked or replaced through the server: every cached
 * descriptor of it is closed (or, if a call uses it, as soon as that call is done). Called
 * by every unlink path before its reply, so the space comes back at once.
 */
void ufd_forget(const struct stat *st);
/* A call found the object (dev, ino) stale: its descriptors go if it has no name left. */
void ufd_forget_dead(dev_t dev, ino_t ino);
/* Closes every entry, or (all false) those idle for a while or of removed files. */
void ufd_sweep(bool all);

/* The open exports (registry.c). -ENOMEM */
int ureg_add(struct union_export *ux);
/* Whether ux was the last one open. */
bool ureg_remove(struct union_export *ux);
/* Runs fn on every open export, under the registry's lock: none closes meanwhile. */
void ureg_each(void (*fn)(struct union_export *ux, void *arg), void *arg);

/*
 * An export opens and closes (sweep.c): it joins the registry, and while any is open a
 * thread sweeps the caches (ufd_sweep, ucache_sweep); when the last closes, every cached
 * descriptor is closed.
 */
int usw_export_open(struct union_export *ux);
void usw_export_close(struct union_export *ux);

/*
 * Watched branch directories (watch.c). uwatch_get watches the directory behind dirfd
 * (-ENOSPC past the budget, -ENOSYS without change notification); uwatch_put gives it
 * back. uwatch_changes counts the changes seen in it so far, uwatch_names those that are
 * not writes to a file's data (names made, removed, moved; attributes and markers);
 * uwatch_total all of the latter together. uwatch_drain counts every change completed
 * before the call. While an export is open (uwatch_start .. uwatch_stop) a thread drains
 * as changes come; uwatch_live says it runs, without which counts move only at drains.
 * A NULL watch stands for a directory of a branch that never changes (ubr_unchanging):
 * no change is ever counted for it, and putting it does nothing.
 */
struct uwatch;
int uwatch_get(int dirfd, struct uwatch **out);
void uwatch_put(struct uwatch *w);
void uwatch_drain(void);
uint64_t uwatch_changes(const struct uwatch *w);
uint64_t uwatch_names(const struct uwatch *w);
uint64_t uwatch_total(void);
void uwatch_start(void);
void uwatch_stop(void);
bool uwatch_live(void);

/* Listing cache (dir.c). */
int udir_cache_new(struct udir_cache **out);
void udir_cache_free(struct udir_cache *dc);
void udir_invalidate(struct union_export *ux, uint64_t dir);
/* 0 when the merged directory with copies ds shows no entry, else -ENOTEMPTY (or -errno). */
int udir_empty(struct union_export *ux, const struct udirset *ds);

/*
 * The lock a WRITE to the file st describes holds around its stat, write and stat, so that
 * its wcc_data brackets it alone (wlock.c). Never held across a sync.
 */
pthread_mutex_t *uwl_lock(const struct stat *st);
void uwl_unlock(pthread_mutex_t *m);

/*
 * Namespace changes (ops.c, shared with remove.c and rename.c; the uop_dir family,
 * uop_place, uop_touch_top and uop_dir_in are place.c's).
 */
void uop_out(struct union_export *ux, const struct stat *st, uint64_t ino, struct stat *out);
/* WCC data on failure too: the directory's attributes after the attempt, if it was found. */
void uop_fail_post(struct union_export *ux, const struct uobj *d, uint64_t dir,
		   struct stat *post);
/*
 * Resolves the directory a change happens in and gives it an upper copy. The client must
 * be allowed to change the directory before any copy is made for it, and name (unless
 * NULL) must exist in it: a change that fails anyway copies nothing.
 */
int uop_dir(struct union_export *ux, uint64_t dir, const char *name, struct uobj *d);
/*
 * For a change to name in directory dir: as uop_dir, but when name's topmost copy is in a
 * writable branch, d as it is (the change is made there).
 */
int uop_dir_of(struct union_export *ux, uint64_t dir, const char *name, struct uobj *d);
/*
 * For a new name in directory dir: the writable branch *b it goes to (a whiteout of the
 * name in a writable copy decides, else the export's create policy, skipping branches b
 * with full[b]), and d resolved with a copy there, made as copy-up makes them.
 */
int uop_place(struct union_export *ux, uint64_t dir, const char *name, const bool *full,
	      struct uobj *d, int *b);
/* After a change in d's copy at index at: the top copy's times move, which clients see. */
void uop_touch_top(const struct uobj *d, int at);
/* Directory dir resolved into d as it is (-ENOTDIR when it is no directory). */
int uop_dir_as_is(struct union_export *ux, uint64_t dir, struct uobj *d);
/*
 * For name moved or linked into directory dir within writable branch b: dir resolved into
 * d with a copy in b (made as copy-up makes one), where nothing above b hides name. 0, or
 * 1 when the change must go through the top branch instead (d released).
 */
int uop_dir_in(struct union_export *ux, uint64_t dir, const char *name, uint8_t b,
	       struct uobj *d);
int uop_begin(struct union_export *ux, struct store_txn **t);
/* Commits t if r is 0, else aborts it; returns the outcome. */
int uop_end(struct union_export *ux, struct store_txn *t, int r);
/*
 * As uop_end, and makes the change durable in the upper branch too (unless the call is
 * "async"): file (a new file, or -1) and the directories dir and then dir2 (or -1: a
 * new directory before its parent) are flushed while the map's commit goes to disk, not
 * after it. The reply waits for both, so a change acknowledged is on disk in the branch
 * and in the map; a crash before that may leave either one ahead of the other, as a kill
 * -9 between them would.
 */
int uop_end_durable(struct union_export *ux, struct store_txn *t, int r, int file, int dir,
		    int dir2);
/*
 * For a change's take-back (store_undo): its directory dirfd to disk. The change's own
 * flush runs while the map commits, so it may be on disk already; the failed reply must
 * not leave it there. A failure is logged.
 */
void uop_flush_back(int dirfd);
/*
 * A directory's attributes for wcc_data, taken between uop_begin and uop_end: changes are
 * serialised there, so the attributes before and after a change bracket it alone. Zeroed
 * (absent) when the stat fails.
 */
void uop_wcc(struct union_export *ux, int fd, uint64_t dir, struct stat *out);
/* A failed change's wcc_data: post-op attributes only, taken after it (see uop_fail_post). */
void uop_fail_wcc(struct union_export *ux, const struct uobj *d, uint64_t dir,
		  struct stat *pre, struct stat *post);

/*
 * Taking back a name a change made in upper directory fd, when the map never takes the
 * change (see store_on_undo): the object at name goes if it is still the one made (same
 * device and inode), and a whiteout it replaced comes back. Lives as long as the change.
 */
struct uop_undo {
	struct store_undo uu_undo;
	int uu_fd;
	const char *uu_name;
	dev_t uu_dev;
	ino_t uu_ino;
	bool uu_whiteout;
};
/*
 * A change whose branch step cannot be taken back (an object removed or replaced) when the
 * map did not take it (error r): says so in the log and returns 0, for the reply must say
 * what the client will see. The map keeps the old record, as after a crash at that point.
 */
int uop_kept(const char *name, int r);
/* Arms u in t for the object made at name (its stat in made); whiteout: it replaced one. */
void uop_undo_name(struct store_txn *t, struct uop_undo *u, int fd, const char *name,
		   const struct stat *made, bool whiteout);
/* Checks a name for a new object: -EEXIST for dots, -EINVAL for markers, -EACCES for ours. */
int uop_new_name(uint64_t dir, const char *name);
/*
 * The store side of a name going away from directory dir (upper copy fd): last says the
 * object itself is gone, so its record goes and its handles become stale.
 */
int uop_forget(struct union_export *ux, struct store_txn *t, uint64_t dir, int fd,
	       const char *name, const struct ufound *f, bool last);
/*
 * Before a lower name of a file with several names is removed or replaced: the file is
 * copied up (into the hard-link index) and the name linked up, so that the union's count
 * of the file's names can go down (overlayfs does the same with its index).
 */
int uop_links_up(struct union_export *ux, uint64_t dir, const struct uobj *d,
		 const char *name);
/* The union nlink of what f found at name in dir (1 for directories); *ino its ino or 0. */
nlink_t uop_nlink(struct union_export *ux, struct store_txn *t, uint64_t dir,
		  const char *name, const struct ufound *f, uint64_t *ino);
/* Whether the caller may remove obj from a directory dir that may have the sticky bit. */
bool uop_sticky_ok(const struct stat *dir, const struct stat *obj);
/*
 * In upper directory fd, as root: tmp takes name's place, replacing what is there (a
 * whiteout). A directory is swapped in and the whiteout it displaced removed.
 */
int uop_swap_in(int fd, const char *tmp, const char *name, bool dir);
/* Removes a temporary left by a failed change, as root. */
void uop_drop_tmp(int fd, const char *tmp);
/* What the union saw as free at name in upper fd: 1 a whiteout, 0 nothing, -EEXIST other. */
int uop_upper_whiteout(int fd, const char *name);

/* Changes cut short by a kill (intent.c, with rename.c and remove.c). */
/* Whether f found the very object the change of in acts on. */
bool uint_is_object(const struct store_intent *in, const struct ufound *f);
/*
 * Puts change in (op, and the ino and names the caller filled) on record before it touches
 * a branch; branch, real_ino and mode: the copy of the object the change acts on. Returns
 * the slot for uint_intent_end, or -errno.
 */
int uint_intent_begin(struct union_export *ux, struct store_intent *in, uint8_t op,
		      uint8_t branch, uint64_t real_ino, mode_t mode);
/*
 * Inside t: the map follows what the branches show of change in. Each kind of change has
 * its own (urn_settle, urm_settle), which intent.c is handed rather than calls by name:
 * it sits below the changes it records.
 */
typedef int uint_settle_fn(struct union_export *ux, struct store_txn *t,
			   const struct store_intent *in);
/* After the map commit (slot < 0: none); failed: settles the map with the branch first. */
void uint_intent_end(struct union_export *ux, int slot, const struct store_intent *in,
		     bool failed, uint_settle_fn *settle);
/* At start: settles the changes an earlier run was killed in, each with settle. */
int uint_recover(struct union_export *ux, uint_settle_fn *settle);
/*
 * The copies of name below its topmost one (f) in writable branches of the directory
 * parent: hidden now, and none may show once the name goes or moves. As root: the right
 * to change the name is checked on the topmost copy. A directory (f found with its merged
 * copies) goes only while it holds nothing but markers, and only the very copy that
 * merges; one that stays calls for a whiteout. remove.c
 */
void urm_hidden_copies(struct union_export *ux, const struct udirset *parent,
		       const char *name, const struct ufound *f);
/* A RENAME's / a REMOVE's. */
uint_settle_fn urn_settle;
uint_settle_fn urm_settle;

/* Branch space for status (space.c). */
int uspace_new(int nbranches, struct uspace **out);
void uspace_free(struct uspace *sp);
/* Measures every branch's space now (a statvfs each): at open, then from the sweeper. */
void uspace_measure(struct union_export *ux);

/* Create policies (policy.c). */
int upol_new(struct upolicy **out);
void upol_free(struct upolicy *p);
/*
 * The writable branch a new name in the directory whose copies are parent goes to, by the
 * export's create policy, skipping branches b with full[b]; -ENOSPC when none is left.
 */
int upol_choose(const struct union_export *ux, const struct udirset *parent, const bool *full);
/* Whether the policy is tdp: a new name goes to the parent's topmost writable copy. */
bool upol_top_down(const struct union_export *ux);
/* Whether a create that found its branch full tries another (every policy but tdp). */
bool upol_retries(const struct union_export *ux);
/* Branch b answered ENOSPC: counted full until free space is measured again. */
void upol_full(const struct union_export *ux, int b);
/* FSSTAT's numbers by the export's statfs= policy. */
int upol_statfs(const struct union_export *ux, struct statvfs *sv);

/*
 * Attribute changes on the object fd (an O_PATH fd, or any fd of it) refers to, whose
 * attributes cur holds (-ESTALE when fd is not that object). Nothing is looked up by name,
 * so nothing put at the object's name meanwhile is changed instead. io.c
 */
int uattr_apply(int fd, const struct stat *cur, const struct union_setattr *sa);

#endif
