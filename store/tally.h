/*
 * Per-branch record counts of the inode map, kept in memory (private to store/; see
 * store_tally_start in store.h).
 *
 * A write transaction notes what each of its record changes does to the counts (a record
 * made in branch b: +1 there; one moved from a to b: -1 and +1; one removed: -1), and the
 * notes are applied once its commit is on disk, so an aborted transaction, or one whose
 * commit failed, changes nothing. Notes of one transaction are merged by export and
 * branch: a transaction touches few of them, so a few notes live in the transaction itself.
 *
 * The counts of export id e are found in two steps (a page of STALLY_SPAN exports, then
 * the export's counts), each an atomic pointer set once and kept until the store closes:
 * applying notes takes no lock. Counts forgotten (an export given another number of
 * branches) are kept aside until then too, since a reader may still hold them.
 */
#ifndef UNFS_STORE_TALLY_H
#define UNFS_STORE_TALLY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define STALLY_SPAN 256
#define STALLY_PAGES (65536 / STALLY_SPAN)   /* export ids are 16 bits */
#define STALLY_INLINE 4                      /* notes a transaction keeps without malloc */

struct stally_page;
struct stally_counts;

struct stally_table {
	pthread_mutex_t tt_lock;                 /* installs pages and counts */
	struct stally_page *_Atomic tt_page[STALLY_PAGES];
	struct stally_counts *tt_retired;        /* forgotten counts (tt_lock), freed at destroy */
};

struct stally_note {
	uint16_t tn_exp;
	uint8_t tn_branch;
	int64_t tn_delta;
};

/* One transaction's notes. */
struct stally_notes {
	int ns_n, ns_cap;
	struct stally_note *ns_note;             /* ns_inline, or malloc()ed when more */
	struct stally_note ns_inline[STALLY_INLINE];
};

void stally_table_init(struct stally_table *tt);
void stally_table_destroy(struct stally_table *tt);
/*
 * Sets export exp's counts to count[0..n) (-ENOMEM). Its counts keep their n: -EINVAL
 * when they had another.
 */
int stally_set(struct stally_table *tt, uint16_t exp, const uint64_t *count, int n);
/* Drops exp's counts: the next stally_set makes new ones, with any n. */
void stally_forget(struct stally_table *tt, uint16_t exp);
/* Every count of exp to 0 (its records were dropped), if it has counts. */
void stally_clear(struct stally_table *tt, uint16_t exp);
/* Branch b's count of exp: 0, or -ENOENT when exp's are not kept (or b is past them). */
int stally_get(struct stally_table *tt, uint16_t exp, int b, uint64_t *count);

void stally_notes_init(struct stally_notes *ns);
/* Makes room for more notes, so that noting them cannot fail (-ENOMEM). */
int stally_notes_reserve(struct stally_notes *ns, int more);
/* Notes delta for (exp, branch); room must have been reserved. */
void stally_note(struct stally_notes *ns, uint16_t exp, uint8_t branch, int64_t delta);
/* Applies the notes (their transaction committed) to tt; ns is emptied. */
void stally_apply(struct stally_table *tt, struct stally_notes *ns);
/* Drops the notes and what they hold. */
void stally_notes_free(struct stally_notes *ns);

#endif
