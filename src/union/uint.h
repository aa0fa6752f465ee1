/* Internals shared by the union layer's files; nothing outside src/union includes this. */
#ifndef UNFS_UNION_INT_H
#define UNFS_UNION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "config.h"
#include "store.h"
#include "union.h"

/* Copy-up's scratch directory at the upper's root; never visible through the union. */
#define UNION_WORK_NAME ".unionnfsd.work"
/* Deeper than any real tree; a longer parent chain in the map is a cycle. */
#define UNION_MAX_DEPTH 2048

struct udir_cache;

struct union_export {
	uint16_t ux_id;
	bool ux_ro;
	struct store *ux_store;
	char *ux_name;
	int ux_nbranches;
	int *ux_rootfd;          /* O_PATH, top-down */
	dev_t *ux_dev;           /* each root's st_dev: nothing on another device is served */
	char **ux_paths;         /* canonical */
	uint8_t ux_cookie_key[STORE_KEY_LEN];
	pthread_mutex_t ux_work_lock;
	int ux_workfd;           /* O_PATH of the work directory, -1 until copy-up needs it */
	struct udir_cache *ux_dcache;
};

/* The copies of one union directory, top-down. */
struct udirset {
	int ds_n;
	bool ds_borrowed;        /* the fds are the branch roots: never closed */
	int ds_fd[CONFIG_MAX_BRANCHES];
	uint8_t ds_branch[CONFIG_MAX_BRANCHES];
};

void uds_init(struct udirset *ds);
void uds_root(const struct union_export *ux, struct udirset *ds);
void uds_release(struct udirset *ds);
/* An owned fd for entry i (moved out, or duplicated from borrowed roots), or -errno. */
int uds_take(struct udirset *ds, int i);
/* The fd of branch b's copy, or -1. */
int uds_fd_of(const struct udirset *ds, uint8_t b);

/* What one name in a union directory is. */
struct ufound {
	bool uf_dir;
	uint8_t uf_branch;       /* of the topmost copy, which decides */
	int uf_pidx;             /* index of that copy's directory in the parent set */
	struct stat uf_st;       /* lstat of the topmost copy (real st_ino) */
	struct udirset uf_dirs;  /* directories (unless UFIND_STAT): every merged copy */
	bool uf_below;           /* UFIND_BELOW: a branch below the topmost has the name too */
	bool uf_below_dir;       /* ... and one of those is a directory */
};

enum {
	UFIND_STAT = 1 << 0,     /* only the topmost copy's identity, open nothing */
	UFIND_BELOW = 1 << 1,    /* look at every branch to fill uf_below */
};

void ufound_release(struct ufound *f);
/* Looks name up in the copies of a directory, union style. -ENOENT when absent. */
int ures_find(struct union_export *ux, const struct udirset *parent, const char *name,
	      int flags, struct ufound *f);

/* A resolved object. */
struct uobj {
	struct store_inode uo_rec;   /* si_branch/si_real_ino: the copy served */
	struct stat uo_st;           /* real attributes of that copy (topmost for directories) */
	struct udirset uo_dirs;      /* directories: every copy */
	int uo_pfd;                  /* non-directories: O_PATH of the parent copy holding it */
	int uo_fd;                   /* non-directories: O_PATH of the object itself */
	int uo_upfd;                 /* non-directories: O_PATH of the parent's upper copy, or -1 */
};

enum {
	URES_UPPER = 1 << 0,     /* make sure the directory (or a file's parent) is in the upper */
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
 * The union ino of name in directory pino (whose copies are parent): finds the name again,
 * and returns its ino, creating or re-keying the record as needed. f receives what was
 * found (release it). wtxn as for ures_resolve.
 */
int ures_map(struct union_export *ux, struct store_txn *wtxn, uint64_t pino,
	     const struct udirset *parent, const char *name, int flags, struct ufound *f,
	     uint64_t *ino);
/*
 * Inos of many names in one directory at once: one read transaction for those already
 * known, one write transaction for the rest. inos[i] is 0 for a name that has vanished.
 */
int ures_map_batch(struct union_export *ux, uint64_t pino, const struct udirset *parent,
		   size_t n, const char *const *names, uint64_t *inos);
/* Replaces the real identity in st by the union one. */
void ures_fix_stat(const struct union_export *ux, struct stat *st, uint64_t ino);

/* Name checks: 0, -EINVAL ("", '/'), -ENAMETOOLONG. */
int uname_check(const char *name);
bool uname_dot(const char *name);
/* Internal names that clients never see. */
bool uname_hidden(uint64_t dir, const char *name);

/* Copy-up (copyup.c). */
/* Creates the upper copy of directory name (found as f) inside parent, whose [0] is the upper. */
int ucopy_dir(struct union_export *ux, uint64_t pino, const struct udirset *parent,
	      const char *name, struct ufound *f);
/* Copies a lower non-directory up and re-resolves o to the upper copy, same ino. */
int ucopy_up(struct union_export *ux, struct uobj *o);

/* Listing cache (dir.c). */
int udir_cache_new(struct udir_cache **out);
void udir_cache_free(struct udir_cache *dc);
void udir_invalidate(struct union_export *ux, uint64_t dir);

/* Attribute changes on (dirfd, name); directories are (fd, "."). io.c */
int uattr_apply(int dirfd, const char *name, const struct stat *cur,
		const struct union_setattr *sa);

#endif
