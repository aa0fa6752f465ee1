/*
 * Namespace changes cut short by a kill: a RENAME, REMOVE or RMDIR settled at the next start.
 *
 * A RENAME or REMOVE changes a branch first and commits the inode map after it: a kill -9
 * in between would leave the map naming the old place of an object that moved or went, so
 * the moved object's handle turned stale and `check` blamed someone else for its record.
 * Instead, the change puts an intent on record before it touches a branch (store.h:
 * store_intent_begin: one pwrite, no wait for the disk) and drops it once the map commit
 * holding its outcome is on disk. Ordering, for a kill at any point:
 *
 *   intent written -> branch changed -> map committed and on disk -> intent dropped
 *
 * The intent is in the kernel before the branch change is, and stays until the map is on
 * disk; so after a kill, either the map holds the change's outcome (an intent left behind
 * changes nothing when looked at again), or the intent is there. At the next start the
 * export looks at what the branches have (never at what the intent says happened): when the
 * object is at its new place, the map follows it, as the change would have; when it is
 * still at its old place, the map stays. The same settles a change that failed after it had
 * written its intent, at once.
 *
 * An object is recognised by branch, real inode number and type. No other object can
 * take its inode number in the window (the server, the only writer, is dead or inside the
 * change); a stronger identity (generation, birth time) would be checked in uint_is_object.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "uint.h"

bool uint_is_object(const struct store_intent *in, const struct ufound *f)
{
	return f->uf_branch == in->sn_branch && (uint64_t)f->uf_st.st_ino == in->sn_real_ino &&
	       (uint32_t)(f->uf_st.st_mode & S_IFMT) == in->sn_type;
}

int uint_intent_begin(struct union_export *ux, struct store_intent *in, uint8_t op,
		      uint8_t branch, uint64_t real_ino, mode_t mode)
{
	in->sn_op = op;
	in->sn_exp = ux->ux_id;
	in->sn_branch = branch;
	in->sn_real_ino = real_ino;
	in->sn_type = (uint32_t)(mode & S_IFMT);
	return store_intent_begin(ux->ux_store, in);
}

/* Brings the map in line with what the branches show of the change in. */
static int uint_settle(struct union_export *ux, const struct store_intent *in,
		       uint_settle_fn *settle)
{
	struct store_txn *t;
	int r;

	r = uop_begin(ux, &t);
	if (r < 0)
		return r;
	r = settle(ux, t, in);
	return uop_end(ux, t, r);
}

/* Kept for the next start when it cannot be settled now. */
static int uint_settle_or_keep(struct union_export *ux, const struct store_intent *in,
			       uint_settle_fn *settle)
{
	int r = uint_settle(ux, in, settle);

	if (r < 0)
		log_warn("export %s: cannot bring the inode map in line with the branch after a "
			 "%s of %s that did not complete: %s; it is tried again at the next start",
			 ux->ux_name, in->sn_op == STORE_INTENT_RENAME ? "RENAME" : "REMOVE",
			 in->sn_from_name, strerror(-r));
	return r < 0 ? 1 : 0;
}

struct uint_recovery {
	struct union_export *ur_ux;
	uint_settle_fn *ur_settle;
};

static int uint_recover_one(void *arg, const struct store_intent *in)
{
	const struct uint_recovery *rc = arg;

	return uint_settle_or_keep(rc->ur_ux, in, rc->ur_settle);
}

int uint_recover(struct union_export *ux, uint_settle_fn *settle)
{
	struct uint_recovery rc = { .ur_ux = ux, .ur_settle = settle };

	return store_intent_recover(ux->ux_store, ux->ux_id, uint_recover_one, &rc);
}

void uint_intent_end(struct union_export *ux, int slot, const struct store_intent *in,
		     bool failed, uint_settle_fn *settle)
{
	if (slot < 0)
		return;
	/* A failed change may have changed the branch before it gave up. */
	if (failed && uint_settle_or_keep(ux, in, settle) != 0)
		return;
	store_intent_end(ux->ux_store, slot);
}
