/*
 * Keeping the inode map's pages out of the server's memory (private to store/).
 *
 * LMDB reads through a shared mapping of the map file, so every page a client ever made us
 * read stays counted in the server's resident memory. This finds LMDB's mapping once, in
 * /proc/self/maps (mdb_env_info reports its address only for MDB_FIXEDMAP), and unmaps the
 * map's pages when the process has more file pages mapped than a budget (/proc/self/statm):
 * they stay in the page cache, and the next read maps them again with a minor fault.
 *
 * The /proc reads go through fsio, like every other file system call: fsio depends on
 * nothing of store's, so store may sit on it.
 */
#ifndef UNFS_STORE_TRIM_H
#define UNFS_STORE_TRIM_H

#include <lmdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct strim {
	void *tr_map;            /* LMDB's read-only mapping of the map file; NULL: not found */
	size_t tr_maplen;
	_Atomic bool tr_off;     /* trimming failed once: said so, do not retry */
};

/* Finds env's mapping of its data file; without it trimming does nothing. */
void strim_find_map(struct strim *tr, MDB_env *env);

/* store_trim (store.h): 1 when it trimmed, 0 when under budget, or -errno. */
int strim_trim(struct strim *tr, MDB_env *env, size_t budget);

/* A thread looks at its page faults every this many reads (strim_tick). */
#define STRIM_EVERY 64

/* strim_tick's look: dir names the map in the one warning given when trimming fails. */
void strim_look(struct strim *tr, MDB_env *env, const char *dir);

extern __thread unsigned strim_reads;

/*
 * Called on every read, so inline: a thread that keeps faulting pages in looks at the
 * budget every STRIM_EVERY reads.
 */
static inline void strim_tick(struct strim *tr, MDB_env *env, const char *dir)
{
	if (++strim_reads % STRIM_EVERY == 0)
		strim_look(tr, env, dir);
}

#endif
