/*
 * The persistent inode map (LMDB, in the state directory). It gives every object of an
 * export's union view a union inode number that never changes and is never reused,
 * and remembers where that object lives: its union parent and name, and the branch and
 * real inode number of the copy that currently represents it.
 *
 * Tables (all keys big-endian so LMDB orders them numerically):
 *   inodes:  (export, ino)                  -> struct store_inode
 *   names:   (export, parent ino, name)     -> ino
 *   reals:   (export, branch, real ino)     -> ino     (lower hard links share one ino)
 *   meta:    schema version, handle key, next ino per export, export bindings
 *
 * Errors are negative errno values: -ENOENT when a key is absent, -EIO for LMDB
 * failures (logged), -ENOSPC when the map is full. <lmdb.h> is included nowhere else.
 * All functions are thread-safe; a transaction belongs to one thread at a time.
 */
#ifndef UNFS_STORE_H
#define UNFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ROOT_INO 1
#define STORE_NAME_MAX 255
#define STORE_KEY_LEN 16
/* Longest export name: the map keys exports by name, and meta keys stay under LMDB's 511 bytes. */
#define STORE_EXPORT_NAME_MAX 400

struct store;
struct store_txn;

struct store_inode {
	uint64_t si_ino;
	uint64_t si_parent;      /* union parent ino; the root is its own parent */
	uint32_t si_gen;         /* generation, carried in handles */
	uint8_t si_type;         /* S_IFMT >> 12 of the object */
	uint8_t si_branch;       /* index of the branch holding the copy we serve */
	uint64_t si_real_ino;    /* st_ino of that copy on its branch */
	/*
	 * Non-directories: fsio_ident of that copy, which tells a reused inode number apart;
	 * 0 when not known yet (a record from an older map, filled on its next match) or when
	 * the branch's file system gives no identity.
	 */
	uint64_t si_real_id;
	char si_name[STORE_NAME_MAX + 1]; /* name in si_parent; "" for the root */
};

/* Identity of one branch, recorded when an export is first bound. */
struct store_branch_id {
	const char *sb_path;     /* canonical absolute path */
	uint64_t sb_root_ino;    /* st_ino of the branch root directory */
};

/*
 * Opens (creating if needed, mode 0700) the state directory and the map in it, and takes
 * an exclusive lock on it (flock on DIR/lock). On failure returns -errno and writes a
 * message naming the cause and the fix into err, e.g. "state directory /x is in use by
 * another unionnfsd (pid 123); stop it or use --state".
 */
int store_open(const char *dir, struct store **out, char *err, size_t errlen);
void store_close(struct store *st);

/* The secret key for handle MACs, created randomly on first open and kept in meta. */
void store_handle_key(const struct store *st, uint8_t key[STORE_KEY_LEN]);

/*
 * Binds an export name to its branch stack. The first time, it records the stack and
 * creates the root inode (ino 1, type directory, branch 0, real ino of branch 0's root).
 * Later, it checks the stack is the same (count, paths, root inos) and otherwise fails
 * with -EINVAL and a message listing both stacks and the fix. Returns the export id
 * (1..65535, stable across restarts) in *export_id.
 */
int store_bind_export(struct store *st, const char *name, const struct store_branch_id *branches,
		      int nbranches, uint16_t *export_id, char *err, size_t errlen);

/*
 * Moves export name to a new base: branches replaces its recorded stack when only the
 * read-only branches below its first nwritable (the writable ones, which must be the
 * recorded first nwritable by path and root ino, else -EINVAL and a message naming both
 * stacks and the fix) differ. In one durable write transaction it keeps the export id, its
 * inode counter and the records of the writable branches (their handles stay valid), and
 * forgets the old base: a non-directory record whose copy is in branch nwritable or below
 * is deleted (as store_delete, and names left pointing at no record go too); a directory
 * record there is set to branch 0, real ino 0, which no copy matches, so the union finds it
 * again by its path. The replaced stack is kept as the export's previous one (one level: a
 * second rebind replaces it), see store_export_stack. Call store_tally_start again after,
 * with the new branch count. An equal stack changes nothing; an export not bound yet is
 * bound as by store_bind_export. Returns the export id in *export_id.
 */
int store_rebind_export(struct store *st, const char *name, const struct store_branch_id *branches,
			int nbranches, int nwritable, uint16_t *export_id, char *err, size_t errlen);
/*
 * The branch paths of export name's recorded stack, or with previous those of the stack a
 * store_rebind_export replaced, into *paths (n of them, malloc()ed: free them with
 * store_export_stack_free). -ENOENT when the export is not bound or had no other stack.
 */
int store_export_stack(struct store *st, const char *name, bool previous, char ***paths, int *n);
void store_export_stack_free(char **paths, int n);

/*
 * The lower branches an admin gave export name at run time (`unionnfsd-ctl base`), kept
 * across restarts with the config's lower branches of that time, so that a later edit of
 * the config wins over it. Both are paths joined by '\n'. store_base_set stores them
 * durably (set_lowers NULL forgets them); store_base_get returns malloc()ed copies, or
 * -ENOENT when none were set.
 */
int store_base_set(struct store *st, const char *name, const char *set_lowers,
		   const char *config_lowers);
int store_base_get(struct store *st, const char *name, char **set_lowers, char **config_lowers);

/*
 * The name an export id was bound under (per-client views are bound lazily after a restart
 * from the handles clients still hold). Returns 0, -ENOENT when no export has the id,
 * -ENAMETOOLONG when the name does not fit len bytes with its NUL, or -EIO.
 */
int store_export_name(struct store *st, uint16_t id, char *name, size_t len);
/*
 * Forgets export name: its binding, its inode counter and every record of it. Its id is
 * never handed out again, so its handles stay stale for good. -ENOENT when not bound.
 */
int store_unbind_export(struct store *st, const char *name);

int store_begin(struct store *st, bool write, struct store_txn **out);

/*
 * How to take back what a change did outside the map (its branch step) when the map never
 * takes the change: the write transaction is aborted, or its commit fails (a full state
 * file system: group commit shares one commit among several changes, and all of them
 * fail together). su_fn(su_arg) runs at most once, while no other change runs (the undos
 * of one failed commit newest first, so a later change is taken back before the one it
 * built on), on the changer's thread or on the committer's (with the process's
 * credentials). The struct must stay valid until store_commit or store_abort returns.
 */
struct store_undo {
	void (*su_fn)(void *arg);
	void *su_arg;
	struct store_undo *su_next;      /* the store's */
};
/* Adds u to write transaction txn's undos. */
void store_on_undo(struct store_txn *txn, struct store_undo *u);
/* Commits a write transaction (durably) or ends a read one. Frees txn either way. */
int store_commit(struct store_txn *txn);
/*
 * What a change does while its commit goes to disk: sm_fn(sm_arg) runs on the caller's
 * thread once the change is in the map's pending commit and before waiting for it (never
 * when the change did not get into it), so the change's own flushes (its branch's) and
 * the map's overlap. Returns 0 or -errno.
 */
struct store_meanwhile {
	int (*sm_fn)(void *arg);
	void *sm_arg;
	int sm_rc;                       /* the store's: what sm_fn returned */
};
/*
 * As store_commit, with meanwhile (may be NULL) run as said: the map's error when its
 * commit failed, else meanwhile's result.
 */
int store_commit_meanwhile(struct store_txn *txn, struct store_meanwhile *meanwhile);
void store_abort(struct store_txn *txn);

int store_get(struct store_txn *txn, uint16_t exp, uint64_t ino, struct store_inode *out);
int store_find_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name, uint64_t *ino);
int store_find_real(struct store_txn *txn, uint16_t exp, uint8_t branch, uint64_t real_ino, uint64_t *ino);

/*
 * Creates a record with a fresh ino (write txn). Fills rec->si_ino and si_gen, and adds the
 * names and reals index entries. An existing names entry for (parent, name) is replaced.
 */
int store_insert(struct store_txn *txn, uint16_t exp, struct store_inode *rec);

/*
 * Rewrites a record (write txn) and moves its index entries: the names entry of the old
 * (parent, name) and the reals entry of the old (branch, real ino) are removed if they
 * point at this ino, and the new ones are added.
 */
int store_update(struct store_txn *txn, uint16_t exp, const struct store_inode *rec);

/* Adds a names entry only (a hard link's second name). */
int store_add_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name, uint64_t ino);
/* Removes a names entry only. */
int store_del_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name);

/*
 * Removes a record with its own names entry (si_parent, si_name) and reals entry (write txn).
 * A names entry of another alias may remain: readers always check the record it names.
 */
int store_delete(struct store_txn *txn, uint16_t exp, uint64_t ino);

/*
 * Intents: what a namespace change is about to do to a branch, so that a restart after a
 * kill -9 between the branch change and the map commit that records it can bring the map
 * in line with the branches (from what is on disk) instead of leaving a stale record.
 *
 * Kept in DIR/intents, outside LMDB: an intent must be on record before the branch changes,
 * and an LMDB commit at that point would add a wait for the disk to every change. A slot is
 * written with pwrite, which survives the death of the process as the branch change does;
 * it is freed once the map commit holding the change's outcome is on disk. Neither write
 * waits for the disk (a power cut is not covered: see README, "State directory").
 */
enum store_intent_op {
	STORE_INTENT_RENAME = 1,
	STORE_INTENT_REMOVE = 2,
};

struct store_intent {
	uint8_t sn_op;           /* enum store_intent_op */
	uint8_t sn_branch;       /* the copy the change acts on: branch, real ino and type */
	uint16_t sn_exp;
	uint32_t sn_type;        /* S_IFMT bits */
	uint64_t sn_real_ino;
	uint64_t sn_ino;         /* the union ino moved or removed (0: none had a record) */
	uint64_t sn_from;        /* its parent and name before the change */
	uint64_t sn_to;          /* RENAME: its parent and name after it */
	char sn_from_name[STORE_NAME_MAX + 1];
	char sn_to_name[STORE_NAME_MAX + 1];
};

/* Puts an intent on record; returns its slot (>= 0) for store_intent_end, or -errno. */
int store_intent_begin(struct store *st, const struct store_intent *in);
/* The change's outcome is in the map, on disk (or the change did not happen). slot < 0: no-op. */
void store_intent_end(struct store *st, int slot);
/*
 * Calls fn for every intent of export exp left by an earlier run: an intent is dropped when
 * fn returns 0, kept when it returns 1. Stops at, and returns, fn's first error (< 0).
 */
int store_intent_recover(struct store *st, uint16_t exp,
			 int (*fn)(void *arg, const struct store_intent *in), void *arg);

/*
 * LMDB reads through a shared mapping of the map file, so every page a client ever made us
 * read stays counted in the server's RSS (a walk of a million-entry map: ~95 MiB). When the
 * process has more than budget bytes of file pages mapped, this unmaps the map's pages; they
 * stay in the page cache and the next read maps them again (a minor fault). Pointers into
 * the map stay valid. Reads call it themselves (a thread that keeps faulting looks every 64
 * reads, with a 12 MiB budget); any thread may call it too. Returns 1 when it trimmed, 0
 * when under budget, or -errno (-ENOENT: the mapping was not found in /proc/self/maps).
 */
int store_trim(struct store *st, size_t budget);

/*
 * Per-branch record counts, kept in memory so that reading them touches no disk (status
 * runs on the event loop). store_tally_start counts export exp's records by si_branch
 * (0..nbranches-1) in one pass over them; from then on each write transaction moves the
 * counts by what its inserts, updates and deletes did, once its commit is on disk (an
 * aborted transaction, or one whose commit failed, moves nothing). Call it before anything
 * writes exp's records in this run (union_open does, right after binding); a second call
 * counts afresh, with the same nbranches (else -EINVAL) unless store_rebind_export gave
 * exp another stack since. 0 or -errno.
 */
int store_tally_start(struct store *st, uint16_t exp, int nbranches);
/* Records of exp whose copy is in branch b, as of the last commit; -ENOENT when not kept. */
int store_tally(struct store *st, uint16_t exp, int branch, uint64_t *count);

/* Number of inode records of an export (for status and tests). */
int store_count(struct store_txn *txn, uint16_t exp, uint64_t *count);
/*
 * Calls fn for every ino of exp in ascending order, in one pass of one cursor; stops at the
 * first nonzero fn returns and returns it (0 when all were seen, or -errno).
 */
int store_each_ino(struct store_txn *txn, uint16_t exp, int (*fn)(uint64_t ino, void *arg),
		   void *arg);
/* The smallest ino above after that has a record in exp (a walk of the map): 0 or -ENOENT. */
int store_next_ino(struct store_txn *txn, uint16_t exp, uint64_t after, uint64_t *ino);

#endif
