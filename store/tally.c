/* Per-branch record counts of the inode map (tally.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally.h"

struct stally_counts {
	struct stally_counts *tc_retired_next;   /* in tt_retired, once forgotten */
	int tc_n;
	_Atomic int64_t tc_count[];
};

struct stally_page {
	struct stally_counts *_Atomic tp_exp[STALLY_SPAN];
};

void stally_table_init(struct stally_table *tt)
{
	pthread_mutex_init(&tt->tt_lock, NULL);
	for (int i = 0; i < STALLY_PAGES; i++)
		atomic_init(&tt->tt_page[i], NULL);
	tt->tt_retired = NULL;
}

void stally_table_destroy(struct stally_table *tt)
{
	for (int i = 0; i < STALLY_PAGES; i++) {
		struct stally_page *pg = atomic_load(&tt->tt_page[i]);

		if (!pg)
			continue;
		for (int j = 0; j < STALLY_SPAN; j++)
			free(atomic_load(&pg->tp_exp[j]));
		free(pg);
	}
	while (tt->tt_retired) {
		struct stally_counts *c = tt->tt_retired;

		tt->tt_retired = c->tc_retired_next;
		free(c);
	}
	pthread_mutex_destroy(&tt->tt_lock);
}

static struct stally_counts *stally_find(struct stally_table *tt, uint16_t exp)
{
	struct stally_page *pg = atomic_load(&tt->tt_page[exp / STALLY_SPAN]);

	return pg ? atomic_load(&pg->tp_exp[exp % STALLY_SPAN]) : NULL;
}

/* exp's counts, made (all 0) with n branches if it has none; NULL when out of memory. */
static struct stally_counts *stally_make(struct stally_table *tt, uint16_t exp, int n)
{
	struct stally_page *pg;
	struct stally_counts *c = NULL;

	pthread_mutex_lock(&tt->tt_lock);
	pg = atomic_load(&tt->tt_page[exp / STALLY_SPAN]);
	if (!pg) {
		pg = calloc(1, sizeof(*pg));
		if (!pg)
			goto out;
		atomic_store(&tt->tt_page[exp / STALLY_SPAN], pg);
	}
	c = atomic_load(&pg->tp_exp[exp % STALLY_SPAN]);
	if (!c) {
		c = calloc(1, sizeof(*c) + (size_t)n * sizeof(c->tc_count[0]));
		if (!c)
			goto out;
		c->tc_n = n;
		atomic_store(&pg->tp_exp[exp % STALLY_SPAN], c);
	}
out:
	pthread_mutex_unlock(&tt->tt_lock);
	return c;
}

int stally_set(struct stally_table *tt, uint16_t exp, const uint64_t *count, int n)
{
	struct stally_counts *c = stally_make(tt, exp, n);

	if (!c)
		return -ENOMEM;
	if (c->tc_n != n)
		return -EINVAL;
	for (int b = 0; b < n; b++)
		atomic_store(&c->tc_count[b], (int64_t)count[b]);
	return 0;
}

void stally_forget(struct stally_table *tt, uint16_t exp)
{
	struct stally_page *pg;
	struct stally_counts *c;

	pthread_mutex_lock(&tt->tt_lock);
	pg = atomic_load(&tt->tt_page[exp / STALLY_SPAN]);
	c = pg ? atomic_exchange(&pg->tp_exp[exp % STALLY_SPAN], NULL) : NULL;
	if (c) {
		c->tc_retired_next = tt->tt_retired;
		tt->tt_retired = c;
	}
	pthread_mutex_unlock(&tt->tt_lock);
}

void stally_clear(struct stally_table *tt, uint16_t exp)
{
	struct stally_counts *c = stally_find(tt, exp);

	for (int b = 0; c && b < c->tc_n; b++)
		atomic_store(&c->tc_count[b], 0);
}

int stally_get(struct stally_table *tt, uint16_t exp, int b, uint64_t *count)
{
	struct stally_counts *c = stally_find(tt, exp);
	int64_t v;

	if (!c || b < 0 || b >= c->tc_n)
		return -ENOENT;
	v = atomic_load(&c->tc_count[b]);
	*count = v > 0 ? (uint64_t)v : 0;
	return 0;
}

void stally_notes_init(struct stally_notes *ns)
{
	ns->ns_n = 0;
	ns->ns_cap = STALLY_INLINE;
	ns->ns_note = ns->ns_inline;
}

int stally_notes_reserve(struct stally_notes *ns, int more)
{
	struct stally_note *bigger;
	int cap;

	if (ns->ns_n + more <= ns->ns_cap)
		return 0;
	cap = 2 * (ns->ns_n + more);
	bigger = malloc((size_t)cap * sizeof(*bigger));
	if (!bigger)
		return -ENOMEM;
	memcpy(bigger, ns->ns_note, (size_t)ns->ns_n * sizeof(*bigger));
	if (ns->ns_note != ns->ns_inline)
		free(ns->ns_note);
	ns->ns_note = bigger;
	ns->ns_cap = cap;
	return 0;
}

void stally_note(struct stally_notes *ns, uint16_t exp, uint8_t branch, int64_t delta)
{
	for (int i = 0; i < ns->ns_n; i++)
		if (ns->ns_note[i].tn_exp == exp && ns->ns_note[i].tn_branch == branch) {
			ns->ns_note[i].tn_delta += delta;
			return;
		}
	ns->ns_note[ns->ns_n++] = (struct stally_note){ exp, branch, delta };
}

void stally_apply(struct stally_table *tt, struct stally_notes *ns)
{
	for (int i = 0; i < ns->ns_n; i++) {
		const struct stally_note *n = &ns->ns_note[i];
		struct stally_counts *c;

		if (n->tn_delta == 0)
			continue;
		c = stally_find(tt, n->tn_exp);
		/* Not kept (no export counts them), or a record's branch past its stack. */
		if (c && n->tn_branch < c->tc_n)
			atomic_fetch_add(&c->tc_count[n->tn_branch], n->tn_delta);
	}
	ns->ns_n = 0;
}

void stally_notes_free(struct stally_notes *ns)
{
	if (ns->ns_note != ns->ns_inline)
		free(ns->ns_note);
	stally_notes_init(ns);
}
