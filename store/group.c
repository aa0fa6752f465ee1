/* Group commit of the inode map: see group.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include "blocking.h"
#include "group.h"

struct sgroup {
	MDB_env *g_env;
	pthread_mutex_t g_lock;
	pthread_cond_t g_turn;           /* changes waiting to begin */
	pthread_cond_t g_done;           /* changes waiting for their parent to be on disk */
	pthread_cond_t g_wake;           /* the committer's */
	pthread_t g_thread;
	MDB_txn *g_parent;               /* open parent, or NULL */
	int g_parent_rc;                 /* why the last parent could not be begun */
	bool g_child;                    /* a change is in progress */
	bool g_committing;
	bool g_stop;
	unsigned g_want;                 /* changes waiting to begin */
	unsigned g_pending;              /* changes in the parent, not yet on disk */
	uint64_t g_gen;                  /* the parent's number, from 1 */
	uint64_t g_durable;              /* parents up to this one are on disk (or failed) */
	uint64_t g_failed_gen;           /* the last parent whose commit failed ... */
	int g_failed_rc;                 /* ... and why */
	uint64_t g_attempts;             /* parents the committer tried to begin */
	struct store_undo *g_undo;       /* the parent's changes' undos, newest first */
};

/* Changes that may wait in one parent for more to join it before it is committed. */
#define SGROUP_BATCH 64

/* Lock held (dropped meanwhile). Begins a parent for the changes waiting. */
static int sgroup_begin_parent(struct sgroup *g)
{
	MDB_txn *p;
	int rc;

	pthread_mutex_unlock(&g->g_lock);
	rc = mdb_txn_begin(g->g_env, NULL, 0, &p);
	pthread_mutex_lock(&g->g_lock);
	g->g_attempts++;
	g->g_parent_rc = rc;
	if (rc == 0) {
		g->g_parent = p;
		g->g_gen++;
		pthread_cond_signal(&g->g_turn);
	} else {
		pthread_cond_broadcast(&g->g_turn); /* every waiter hears why */
	}
	return rc;
}

/* Lock held. Begins, commits or drops the parent as the state asks; false when idle. */
static bool sgroup_step(struct sgroup *g)
{
	struct store_undo *undo;
	MDB_txn *p;
	uint64_t gen;
	int rc;

	if (g->g_child || g->g_committing)
		return false;
	/* Let the changes already waiting join the parent first: one wait for all of them. */
	if (g->g_parent && g->g_pending > 0 &&
	    (g->g_want == 0 || g->g_pending >= SGROUP_BATCH || g->g_stop)) {
		p = g->g_parent;
		gen = g->g_gen;
		undo = g->g_undo;
		g->g_undo = NULL;
		g->g_committing = true;
		pthread_mutex_unlock(&g->g_lock);
		rc = mdb_txn_commit(p);
		/*
		 * The map never took these changes: take back their branch steps while no
		 * other change may begin (still committing), so none sees them undone halfway.
		 */
		if (rc != 0)
			sgroup_run_undo(undo);
		pthread_mutex_lock(&g->g_lock);
		g->g_committing = false;
		g->g_parent = NULL;
		g->g_pending = 0;
		/* The next changes may start while the meta page goes to disk. */
		if (rc == 0 && g->g_want > 0)
			sgroup_begin_parent(g);
		pthread_mutex_unlock(&g->g_lock);
		if (rc == 0)
			rc = mdb_env_sync(g->g_env, 1);
		pthread_mutex_lock(&g->g_lock);
		g->g_durable = gen;
		if (rc != 0) {
			g->g_failed_gen = gen;
			g->g_failed_rc = rc;
		}
		pthread_cond_broadcast(&g->g_done);
		return true;
	}
	if (!g->g_parent && g->g_want > 0)
		return sgroup_begin_parent(g) == 0;
	if (g->g_parent && g->g_want == 0) {
		/* Nothing to commit and nobody waiting: let LMDB's writer lock go. */
		mdb_txn_abort(g->g_parent);
		g->g_parent = NULL;
		g->g_durable = g->g_gen;
		return true;
	}
	return false;
}

static void *sgroup_main(void *arg)
{
	struct sgroup *g = arg;

	pthread_mutex_lock(&g->g_lock);
	for (;;) {
		if (sgroup_step(g))
			continue;
		if (g->g_stop && !g->g_parent && g->g_want == 0)
			break;
		pthread_cond_wait(&g->g_wake, &g->g_lock);
	}
	pthread_mutex_unlock(&g->g_lock);
	return NULL;
}

int sgroup_new(MDB_env *env, struct sgroup **out)
{
	sigset_t all, old;
	struct sgroup *g;
	int rc;

	*out = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return ENOMEM;
	g->g_env = env;
	pthread_mutex_init(&g->g_lock, NULL);
	pthread_cond_init(&g->g_turn, NULL);
	pthread_cond_init(&g->g_done, NULL);
	pthread_cond_init(&g->g_wake, NULL);
	/* Signals are for the loop thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&g->g_thread, NULL, sgroup_main, g);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_cond_destroy(&g->g_wake);
		pthread_cond_destroy(&g->g_done);
		pthread_cond_destroy(&g->g_turn);
		pthread_mutex_destroy(&g->g_lock);
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void sgroup_free(struct sgroup *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->g_lock);
	g->g_stop = true;
	pthread_cond_signal(&g->g_wake);
	pthread_mutex_unlock(&g->g_lock);
	pthread_join(g->g_thread, NULL);
	pthread_cond_destroy(&g->g_wake);
	pthread_cond_destroy(&g->g_done);
	pthread_cond_destroy(&g->g_turn);
	pthread_mutex_destroy(&g->g_lock);
	free(g);
}

int sgroup_begin(struct sgroup *g, MDB_txn **child)
{
	MDB_txn *parent;
	uint64_t asked_at = 0;
	bool asked = false;
	int rc;

	bool blocked = false;

	*child = NULL;
	pthread_mutex_lock(&g->g_lock);
	g->g_want++;
	while (!g->g_parent || g->g_child || g->g_committing) {
		/* Waiting for a commit or another change (no lock order: the hooks take only theirs). */
		if (!blocked) {
			blocking_enter();
			blocked = true;
		}
		if (!g->g_parent && !g->g_committing) {
			/* The committer tried since we asked, and LMDB said no: say so. */
			if (asked && g->g_attempts > asked_at && g->g_parent_rc != 0) {
				rc = g->g_parent_rc;
				g->g_want--;
				pthread_mutex_unlock(&g->g_lock);
				blocking_leave();
				return rc;
			}
			if (!asked) {
				asked = true;
				asked_at = g->g_attempts;
			}
			pthread_cond_signal(&g->g_wake);
		}
		pthread_cond_wait(&g->g_turn, &g->g_lock);
	}
	g->g_want--;
	g->g_child = true;
	parent = g->g_parent;
	pthread_mutex_unlock(&g->g_lock);
	if (blocked)
		blocking_leave();

	rc = mdb_txn_begin(g->g_env, parent, 0, child);
	if (rc != 0) {
		pthread_mutex_lock(&g->g_lock);
		g->g_child = false;
		pthread_cond_signal(&g->g_turn);
		pthread_cond_signal(&g->g_wake);
		pthread_mutex_unlock(&g->g_lock);
	}
	return rc;
}

/* Lock held: the change is over; the next one may begin, or the parent go to disk. */
static void sgroup_hand_over(struct sgroup *g, bool added)
{
	g->g_child = false;
	if (added)
		g->g_pending++;
	/* The next change, or the commit when none waits or the parent is full. */
	if (g->g_want == 0 || g->g_pending >= SGROUP_BATCH)
		pthread_cond_signal(&g->g_wake);
	else
		pthread_cond_signal(&g->g_turn);
}

/* Lock held: waits until parent gen, which holds everything of this change, is on disk. */
static int sgroup_wait_durable(struct sgroup *g, uint64_t gen)
{
	if (g->g_durable < gen) {
		blocking_enter();
		while (g->g_durable < gen)
			pthread_cond_wait(&g->g_done, &g->g_lock);
		blocking_leave();
	}
	return g->g_failed_gen == gen ? g->g_failed_rc : 0;
}

/* Lock held: the change is over; wait until the parent that holds everything is on disk. */
static int sgroup_finish(struct sgroup *g, bool added)
{
	uint64_t gen = g->g_gen;

	sgroup_hand_over(g, added);
	if (!added && g->g_pending == 0)
		return 0;
	return sgroup_wait_durable(g, gen);
}

void sgroup_run_undo(struct store_undo *undo)
{
	for (struct store_undo *u = undo, *next; u; u = next) {
		next = u->su_next;
		u->su_fn(u->su_arg);
	}
}

int sgroup_commit(struct sgroup *g, MDB_txn *child, struct store_undo *undo,
		  struct store_meanwhile *meanwhile)
{
	struct store_undo *last = undo;
	uint64_t gen;
	int rc = mdb_txn_commit(child);

	if (meanwhile)
		meanwhile->sm_rc = 0;
	/* Still this change's turn: nothing else saw its branch step yet. */
	if (rc != 0)
		sgroup_run_undo(undo);
	pthread_mutex_lock(&g->g_lock);
	if (rc != 0) {
		sgroup_finish(g, false);
	} else {
		while (last && last->su_next)
			last = last->su_next;
		if (last) {
			last->su_next = g->g_undo;
			g->g_undo = undo;
		}
		gen = g->g_gen;
		sgroup_hand_over(g, true);
		if (meanwhile) {
			/*
			 * The change's own waits for the disk (its branch's) overlap the parent's
			 * commit instead of following it: the reply still waits for both.
			 */
			pthread_mutex_unlock(&g->g_lock);
			meanwhile->sm_rc = meanwhile->sm_fn(meanwhile->sm_arg);
			pthread_mutex_lock(&g->g_lock);
		}
		rc = sgroup_wait_durable(g, gen);
	}
	pthread_mutex_unlock(&g->g_lock);
	return rc;
}

void sgroup_abort(struct sgroup *g, MDB_txn *child)
{
	mdb_txn_abort(child);
	pthread_mutex_lock(&g->g_lock);
	sgroup_finish(g, false);
	pthread_mutex_unlock(&g->g_lock);
}
