/*
 * Group commit of the inode map (private to store/).
 *
 * Every namespace change must be durable before its reply, and an LMDB commit waits for
 * the disk twice. Done one change at a time under LMDB's single writer lock, that caps the
 * whole server at a few hundred creates or removes a second. Instead, each change runs as
 * a nested transaction inside one shared parent transaction; a committer thread commits
 * the parent (one wait for the disk) as soon as no change is in progress, and every change
 * that went into it is answered then. Changes stay serialized, as before; only the waits
 * for the disk are shared.
 *
 * The parent is begun and committed on the committer thread, which therefore owns LMDB's
 * writer lock while a parent is open; with no change waiting it lets the lock go.
 */
#ifndef UNFS_STORE_GROUP_H
#define UNFS_STORE_GROUP_H

#include <lmdb.h>
#include <stdint.h>

#include "store.h"

struct sgroup;

int sgroup_new(MDB_env *env, struct sgroup **out);
/* Commits what is pending, stops the committer and frees g. */
void sgroup_free(struct sgroup *g);

/* Begins a change: a child of the current parent (waits for its turn). LMDB error code. */
int sgroup_begin(struct sgroup *g, MDB_txn **child);
/*
 * Commits the change into the parent and returns once the parent is on disk. When the
 * change cannot go into the parent, undo (a list, newest first, may be NULL) runs at once;
 * when the parent's commit fails, the committer runs the undos of all its changes, newest
 * first, before any other change begins. Once the change is in the parent, meanwhile
 * (may be NULL) runs on the caller's thread while the parent goes to disk, and its result
 * goes to its sm_rc (0 when it did not run). Returns LMDB's error code.
 */
int sgroup_commit(struct sgroup *g, MDB_txn *child, struct store_undo *undo,
		  struct store_meanwhile *meanwhile);
/* Runs a list of undos, newest first. */
void sgroup_run_undo(struct store_undo *undo);
/*
 * Drops the change, then waits until every change committed before it is on disk: after
 * it, a read transaction sees all changes whose writers have finished.
 */
void sgroup_abort(struct sgroup *g, MDB_txn *child);

#endif
