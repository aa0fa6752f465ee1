/*
 * The lock table (include/nlm_locks.h).
 *
 * Hosts (by key) own owners (host, svid, handle), which own lock records and waiters. Every lock
 * record is on two lists: its object's (for conflicts) and its host's (for release by host and
 * the per-host count). Objects live in a hash table while they have locks or waiters; owners
 * while locks or waiters (or a running call) refer to them; hosts while they have owners.
 * A range is kept as [start, end], end inclusive, so "to end of file" is end = UINT64_MAX and no
 * sum can overflow.
 *
 * A call changes nothing until it knows it can finish: it counts what a change will add against
 * the limits and allocates the records it needs before it unlinks anything.
 *
 * A grant (a waiter given its lock) is remembered until the caller keeps or undoes it: the
 * owner's locks it replaced, clipped to the waiter's range, are kept as unlinked lock records
 * with one spare record for a split, so undoing it needs no allocation. The kept records count
 * against the host's limit like held ones, so a host's records stay bounded. A later lock or
 * unlock by the owner on that range (or another grant to it there) marks the grant changed:
 * it can no longer be undone, and its records go at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "nlm_locks.h"

/* glibc's <sys/queue.h> lacks the BSD _SAFE forms */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar) \
	for ((var) = TAILQ_FIRST(head); (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1); \
	     (var) = (tvar))
#endif

#define OBJECT_BUCKETS 1024      /* power of two */
#define HOST_BUCKETS 256         /* power of two */

struct lock;
struct waiter;
struct grant;

struct host {
	struct host *h_hash_next;
	TAILQ_ENTRY(host) h_all;
	TAILQ_HEAD(, lock) h_locks;
	TAILQ_HEAD(, waiter) h_waiters;
	LIST_HEAD(, owner) h_owners;
	size_t h_nlocks;
	size_t h_nsaved;         /* lock records its owners' unsettled grants keep for an undo */
	unsigned h_pins;         /* a release walking this host keeps it alive */
	char h_name[];
};

struct owner {
	LIST_ENTRY(owner) o_link;
	struct host *o_host;
	size_t o_refs;           /* locks, waiters, grants and running calls */
	LIST_HEAD(, grant) o_grants;
	int32_t o_svid;
	size_t o_ohlen;
	uint8_t o_oh[];
};

struct object {
	struct object *ob_hash_next;
	struct object *ob_dirty_next;
	bool ob_dirty;           /* on a release's list of objects to retry */
	struct locks_object ob_key;
	TAILQ_HEAD(, lock) ob_locks;
	TAILQ_HEAD(, waiter) ob_waiters;
	size_t ob_nwaiters;
};

struct lock {
	TAILQ_ENTRY(lock) l_obj_link;
	TAILQ_ENTRY(lock) l_host_link;
	struct object *l_obj;
	struct owner *l_owner;
	enum locks_type l_type;
	uint64_t l_start;
	uint64_t l_end;
};

/* The event is first: a waiter leaves the table as its own event, with no allocation. */
struct waiter {
	struct locks_event w_ev;
	TAILQ_ENTRY(waiter) w_obj_link;
	TAILQ_ENTRY(waiter) w_host_link;
	struct object *w_obj;
	struct owner *w_owner;
	uint64_t w_start;
	uint64_t w_end;
	char w_copy[];           /* the event's host key and owner handle */
};

/* How to undo a grant: what the owner held in its range just before (see the top). */
struct grant {
	TAILQ_ENTRY(grant) g_all;
	LIST_ENTRY(grant) g_owner_link;
	uint64_t g_id;
	struct owner *g_owner;   /* holds a reference */
	struct locks_object g_key;
	uint64_t g_start;
	uint64_t g_end;
	bool g_changed;          /* the owner changed its locks on the range since */
	struct lock *g_spare;    /* for the split an undo may need; NULL once used */
	TAILQ_HEAD(, lock) g_saved;  /* linked by l_obj_link, owner and object unset */
	size_t g_nsaved;         /* counted in the host's h_nsaved once committed */
};

struct locks_table {
	pthread_mutex_t t_mutex;
	struct locks_limits t_limits;
	struct object *t_objects[OBJECT_BUCKETS];
	struct host *t_hosts[HOST_BUCKETS];
	TAILQ_HEAD(, host) t_host_list;
	size_t t_nhosts;
	size_t t_nobjects;
	size_t t_nlocks;
	size_t t_nwaiters;
	TAILQ_HEAD(, grant) t_grants;
	uint64_t t_last_grant;
};

/* Events gathered under the mutex, handed to the caller after. */
struct event_list {
	struct locks_event *el_head;
	struct locks_event **el_tail;
};

static void events_init(struct event_list *el)
{
	el->el_head = NULL;
	el->el_tail = &el->el_head;
}

static void events_push(struct event_list *el, struct locks_event *ev)
{
	ev->le_next = NULL;
	*el->el_tail = ev;
	el->el_tail = &ev->le_next;
}

static void events_hand_over(struct event_list *el, struct locks_event **events)
{
	struct locks_event **end = events;

	if (el->el_head == NULL)
		return;
	if (events == NULL) {
		locks_events_free(el->el_head);
		return;
	}
	while (*end != NULL)
		end = &(*end)->le_next;
	*end = el->el_head;
}

/* ---- ranges ---- */

static void range_of(uint64_t offset, uint64_t len, uint64_t *start, uint64_t *end)
{
	*start = offset;
	if (len == 0 || len - 1 > UINT64_MAX - offset)
		*end = UINT64_MAX;
	else
		*end = offset + (len - 1);
}

static uint64_t len_of(uint64_t start, uint64_t end)
{
	return end == UINT64_MAX ? 0 : end - start + 1;
}

static bool overlaps(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
	return s1 <= e2 && s2 <= e1;
}

static bool touches(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
	return overlaps(s1, e1, s2, e2) || (e1 != UINT64_MAX && e1 + 1 == s2) ||
	       (e2 != UINT64_MAX && e2 + 1 == s1);
}

/* ---- hosts and owners ---- */

static uint32_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static struct host **host_slot(struct locks_table *t, const char *name)
{
	struct host **slot = &t->t_hosts[hash_bytes(name, strlen(name)) & (HOST_BUCKETS - 1)];

	while (*slot != NULL && strcmp((*slot)->h_name, name) != 0)
		slot = &(*slot)->h_hash_next;
	return slot;
}

static enum locks_status host_get(struct locks_table *t, const char *name, struct host **out)
{
	struct host **slot = host_slot(t, name);
	size_t len = strlen(name);
	struct host *h;

	if (*slot != NULL) {
		*out = *slot;
		return LOCKS_OK;
	}
	if (t->t_nhosts >= t->t_limits.ll_hosts)
		return LOCKS_NOLOCKS;
	h = calloc(1, sizeof(*h) + len + 1);
	if (h == NULL)
		return LOCKS_NOMEM;
	memcpy(h->h_name, name, len + 1);
	TAILQ_INIT(&h->h_locks);
	TAILQ_INIT(&h->h_waiters);
	LIST_INIT(&h->h_owners);
	*slot = h;
	TAILQ_INSERT_TAIL(&t->t_host_list, h, h_all);
	t->t_nhosts++;
	*out = h;
	return LOCKS_OK;
}

static void host_put_if_idle(struct locks_table *t, struct host *h)
{
	struct host **slot;

	if (!LIST_EMPTY(&h->h_owners) || h->h_pins > 0)
		return;
	slot = host_slot(t, h->h_name);
	*slot = h->h_hash_next;
	TAILQ_REMOVE(&t->t_host_list, h, h_all);
	t->t_nhosts--;
	free(h);
}

static bool owner_is(const struct owner *o, int32_t svid, const void *oh, size_t ohlen)
{
	return o->o_svid == svid && o->o_ohlen == ohlen && (ohlen == 0 || memcmp(o->o_oh, oh, ohlen) == 0);
}

/* The owner of a request if it has any lock or waiter, else NULL. */
static struct owner *owner_find(struct locks_table *t, const struct locks_owner *w)
{
	struct host *h = *host_slot(t, w->lw_host);
	struct owner *o;

	if (h == NULL)
		return NULL;
	LIST_FOREACH(o, &h->h_owners, o_link)
		if (owner_is(o, w->lw_svid, w->lw_oh, w->lw_ohlen))
			return o;
	return NULL;
}

static void owner_unref(struct locks_table *t, struct owner *o)
{
	struct host *h = o->o_host;

	if (--o->o_refs > 0)
		return;
	LIST_REMOVE(o, o_link);
	free(o);
	host_put_if_idle(t, h);
}

/* The owner of a request, made if need be, with a reference for the caller. */
static enum locks_status owner_get(struct locks_table *t, const struct locks_owner *w,
				   struct owner **out)
{
	struct owner *o = owner_find(t, w);
	struct host *h;
	enum locks_status st;

	if (o == NULL) {
		st = host_get(t, w->lw_host, &h);
		if (st != LOCKS_OK)
			return st;
		o = calloc(1, sizeof(*o) + w->lw_ohlen);
		if (o == NULL) {
			host_put_if_idle(t, h);
			return LOCKS_NOMEM;
		}
		o->o_host = h;
		o->o_svid = w->lw_svid;
		o->o_ohlen = w->lw_ohlen;
		if (w->lw_ohlen > 0)
			memcpy(o->o_oh, w->lw_oh, w->lw_ohlen);
		LIST_INSERT_HEAD(&h->h_owners, o, o_link);
	}
	o->o_refs++;
	*out = o;
	return LOCKS_OK;
}

/* ---- objects ---- */

static uint32_t object_hash(const struct locks_object *k)
{
	uint64_t x = k->lo_fileid ^ ((uint64_t)k->lo_export << 32 | k->lo_export);

	/* splitmix64's finalizer: fileids are sequential, their low bits alone cluster */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(x ^ (x >> 31));
}

static struct object **object_slot(struct locks_table *t, const struct locks_object *k)
{
	struct object **slot = &t->t_objects[object_hash(k) & (OBJECT_BUCKETS - 1)];

	while (*slot != NULL &&
	       ((*slot)->ob_key.lo_export != k->lo_export || (*slot)->ob_key.lo_fileid != k->lo_fileid))
		slot = &(*slot)->ob_hash_next;
	return slot;
}

static struct object *object_get(struct locks_table *t, const struct locks_object *k)
{
	struct object **slot = object_slot(t, k);
	struct object *ob = *slot;

	if (ob != NULL)
		return ob;
	ob = calloc(1, sizeof(*ob));
	if (ob == NULL)
		return NULL;
	ob->ob_key = *k;
	TAILQ_INIT(&ob->ob_locks);
	TAILQ_INIT(&ob->ob_waiters);
	*slot = ob;
	t->t_nobjects++;
	return ob;
}

static void object_put_if_idle(struct locks_table *t, struct object *ob)
{
	struct object **slot;

	if (!TAILQ_EMPTY(&ob->ob_locks) || !TAILQ_EMPTY(&ob->ob_waiters) || ob->ob_dirty)
		return;
	slot = object_slot(t, &ob->ob_key);
	*slot = ob->ob_hash_next;
	t->t_nobjects--;
	free(ob);
}

/* ---- lock records ---- */

static void lock_link(struct locks_table *t, struct lock *l, struct object *ob, struct owner *o,
		      enum locks_type type, uint64_t start, uint64_t end)
{
	l->l_obj = ob;
	l->l_owner = o;
	l->l_type = type;
	l->l_start = start;
	l->l_end = end;
	TAILQ_INSERT_TAIL(&ob->ob_locks, l, l_obj_link);
	TAILQ_INSERT_TAIL(&o->o_host->h_locks, l, l_host_link);
	o->o_refs++;
	o->o_host->h_nlocks++;
	t->t_nlocks++;
}

static void lock_unlink(struct locks_table *t, struct lock *l)
{
	struct owner *o = l->l_owner;

	TAILQ_REMOVE(&l->l_obj->ob_locks, l, l_obj_link);
	TAILQ_REMOVE(&o->o_host->h_locks, l, l_host_link);
	o->o_host->h_nlocks--;
	t->t_nlocks--;
	free(l);
	owner_unref(t, o);
}

static bool lock_conflicts(const struct lock *l, const struct owner *o, enum locks_type type,
			   uint64_t start, uint64_t end)
{
	return l->l_owner != o && overlaps(l->l_start, l->l_end, start, end) &&
	       (type == LOCKS_EXCLUSIVE || l->l_type == LOCKS_EXCLUSIVE);
}

/* The conflicting lock of lowest offset, or NULL. o may be NULL (an owner with nothing held). */
static struct lock *first_conflict(struct object *ob, const struct owner *o, enum locks_type type,
				   uint64_t start, uint64_t end)
{
	struct lock *l, *first = NULL;

	TAILQ_FOREACH(l, &ob->ob_locks, l_obj_link)
		if (lock_conflicts(l, o, type, start, end) && (first == NULL || l->l_start < first->l_start))
			first = l;
	return first;
}

static void holder_fill(struct locks_holder *h, const struct lock *l)
{
	const struct owner *o = l->l_owner;

	memset(h, 0, sizeof(*h));
	strcpy(h->lh_host, o->o_host->h_name);
	h->lh_svid = o->o_svid;
	h->lh_ohlen = o->o_ohlen;
	memcpy(h->lh_oh, o->o_oh, o->o_ohlen);
	h->lh_type = l->l_type;
	h->lh_offset = l->l_start;
	h->lh_len = len_of(l->l_start, l->l_end);
}

static bool host_can_add(const struct locks_table *t, const struct host *h, long added)
{
	return added <= 0 ||
	       h->h_nlocks + h->h_nsaved + (size_t)added <= t->t_limits.ll_locks_per_host;
}

/*
 * Takes [start, end] out of l (on ob): trims it, unlinks it when covered, or splits it in two,
 * the upper part going into *split (allocated by the caller beforehand, NULL once used).
 */
static void lock_cut(struct locks_table *t, struct object *ob, struct lock *l, uint64_t start,
		     uint64_t end, struct lock **split)
{
	if (l->l_start < start && end < l->l_end) {
		lock_link(t, *split, ob, l->l_owner, l->l_type, end + 1, l->l_end);
		*split = NULL;
		l->l_end = start - 1;
	} else if (l->l_start < start) {
		l->l_end = start - 1;
	} else if (end < l->l_end) {
		l->l_start = end + 1;
	} else {
		lock_unlink(t, l);
	}
}

/* Frees the records a grant kept for its undo (and the host's count of them). */
static void grant_drop_saved(struct grant *g, struct host *h)
{
	struct lock *l;

	while ((l = TAILQ_FIRST(&g->g_saved)) != NULL) {
		TAILQ_REMOVE(&g->g_saved, l, l_obj_link);
		free(l);
	}
	if (h != NULL)
		h->h_nsaved -= g->g_nsaved;
	g->g_nsaved = 0;
	free(g->g_spare);
	g->g_spare = NULL;
}

/* Owner o changes its locks on [start, end] of ob: an undo of its grants there would be blind. */
static void grants_mark_changed(struct object *ob, struct owner *o, uint64_t start, uint64_t end)
{
	struct grant *g;

	LIST_FOREACH(g, &o->o_grants, g_owner_link)
		if (!g->g_changed && g->g_key.lo_export == ob->ob_key.lo_export &&
		    g->g_key.lo_fileid == ob->ob_key.lo_fileid &&
		    overlaps(g->g_start, g->g_end, start, end)) {
			g->g_changed = true;
			grant_drop_saved(g, o->o_host);
		}
}

/*
 * Gives owner o the lock [start, end] of the given type on ob, replacing o's own locks there
 * (the parts of other-type locks outside the range stay) and merging o's locks of the same type
 * that overlap or touch it. Conflicts with other owners are the caller's business. saving:
 * records a grant keeps besides, counted against the host's limit with the change.
 */
static enum locks_status lock_apply(struct locks_table *t, struct object *ob, struct owner *o,
				    enum locks_type type, uint64_t start, uint64_t end,
				    size_t saving)
{
	struct lock *l, *next, *fresh, *split = NULL;
	uint64_t new_start = start, new_end = end;
	long added = 1;
	bool splits = false;       /* the range lies inside one of o's locks of the other type */

	TAILQ_FOREACH(l, &ob->ob_locks, l_obj_link) {
		if (l->l_owner != o)
			continue;
		if (l->l_type == type && touches(l->l_start, l->l_end, start, end))
			added--;
		else if (l->l_type != type && start <= l->l_start && l->l_end <= end)
			added--;
		else if (l->l_type != type && l->l_start < start && end < l->l_end) {
			splits = true;
			added++;
		}
	}
	if (!host_can_add(t, o->o_host, added + (long)saving))
		return LOCKS_NOLOCKS;
	fresh = malloc(sizeof(*fresh));
	if (fresh == NULL)
		return LOCKS_NOMEM;
	if (splits && (split = malloc(sizeof(*split))) == NULL) {
		free(fresh);
		return LOCKS_NOMEM;
	}
	TAILQ_FOREACH_SAFE(l, &ob->ob_locks, l_obj_link, next) {
		if (l->l_owner != o)
			continue;
		if (l->l_type == type && touches(l->l_start, l->l_end, start, end)) {
			new_start = l->l_start < new_start ? l->l_start : new_start;
			new_end = l->l_end > new_end ? l->l_end : new_end;
			lock_unlink(t, l);
		} else if (l->l_type != type && overlaps(l->l_start, l->l_end, start, end)) {
			lock_cut(t, ob, l, start, end, &split);
		}
	}
	free(split);
	lock_link(t, fresh, ob, o, type, new_start, new_end);
	grants_mark_changed(ob, o, start, end);
	return LOCKS_OK;
}

/* Removes o's locks on [start, end] of ob; *changed tells whether any went or shrank. */
static enum locks_status lock_remove_range(struct locks_table *t, struct object *ob,
					   struct owner *o, uint64_t start, uint64_t end, bool *changed)
{
	struct lock *l, *next, *split = NULL;

	*changed = false;
	TAILQ_FOREACH(l, &ob->ob_locks, l_obj_link) {
		if (l->l_owner == o && l->l_start < start && end < l->l_end) {
			if (!host_can_add(t, o->o_host, 1))
				return LOCKS_NOLOCKS;
			split = malloc(sizeof(*split));
			if (split == NULL)
				return LOCKS_NOMEM;
			break;
		}
	}
	TAILQ_FOREACH_SAFE(l, &ob->ob_locks, l_obj_link, next) {
		if (l->l_owner != o || !overlaps(l->l_start, l->l_end, start, end))
			continue;
		*changed = true;
		lock_cut(t, ob, l, start, end, &split);
	}
	free(split);
	if (*changed)
		grants_mark_changed(ob, o, start, end);
	return LOCKS_OK;
}

/* Merges two of o's locks on ob of one type that overlap or touch; false if none do. */
static bool owner_merge_one(struct locks_table *t, struct object *ob, struct owner *o)
{
	struct lock *a, *b;

	TAILQ_FOREACH(a, &ob->ob_locks, l_obj_link) {
		if (a->l_owner != o)
			continue;
		TAILQ_FOREACH(b, &ob->ob_locks, l_obj_link) {
			if (b == a || b->l_owner != o || b->l_type != a->l_type ||
			    !touches(a->l_start, a->l_end, b->l_start, b->l_end))
				continue;
			a->l_start = b->l_start < a->l_start ? b->l_start : a->l_start;
			a->l_end = b->l_end > a->l_end ? b->l_end : a->l_end;
			lock_unlink(t, b);
			return true;
		}
	}
	return false;
}

/* ---- grants ---- */

static void grant_free(struct locks_table *t, struct grant *g)
{
	grant_drop_saved(g, g->g_owner != NULL ? g->g_owner->o_host : NULL);
	if (g->g_owner != NULL)
		owner_unref(t, g->g_owner);
	free(g);
}

/*
 * Before o is granted [start, end] on ob: a grant holding copies of o's locks there, clipped
 * to the range, and the spare record. NULL when out of memory.
 */
static struct grant *grant_prepare(struct object *ob, struct owner *o, uint64_t start,
				   uint64_t end)
{
	struct grant *g = calloc(1, sizeof(*g));
	struct lock *l, *copy;

	if (g == NULL)
		return NULL;
	TAILQ_INIT(&g->g_saved);
	g->g_key = ob->ob_key;
	g->g_start = start;
	g->g_end = end;
	g->g_spare = malloc(sizeof(*g->g_spare));
	if (g->g_spare == NULL)
		goto nomem;
	TAILQ_FOREACH(l, &ob->ob_locks, l_obj_link) {
		if (l->l_owner != o || !overlaps(l->l_start, l->l_end, start, end))
			continue;
		copy = calloc(1, sizeof(*copy));
		if (copy == NULL)
			goto nomem;
		copy->l_type = l->l_type;
		copy->l_start = l->l_start > start ? l->l_start : start;
		copy->l_end = l->l_end < end ? l->l_end : end;
		TAILQ_INSERT_TAIL(&g->g_saved, copy, l_obj_link);
		g->g_nsaved++;
	}
	return g;
nomem:
	grant_free(NULL, g);
	return NULL;
}

/* The grant is made: it is remembered under a new id (the event's le_grant). */
static void grant_commit(struct locks_table *t, struct grant *g, struct owner *o)
{
	g->g_id = ++t->t_last_grant;
	g->g_owner = o;
	o->o_refs++;
	o->o_host->h_nsaved += g->g_nsaved;
	LIST_INSERT_HEAD(&o->o_grants, g, g_owner_link);
	TAILQ_INSERT_TAIL(&t->t_grants, g, g_all);
}

static struct grant *grant_take(struct locks_table *t, uint64_t id)
{
	struct grant *g;

	TAILQ_FOREACH(g, &t->t_grants, g_all)
		if (g->g_id == id) {
			TAILQ_REMOVE(&t->t_grants, g, g_all);
			LIST_REMOVE(g, g_owner_link);
			return g;
		}
	return NULL;
}

/* Forgets every grant of o (its locks are going). */
static void owner_drop_grants(struct locks_table *t, struct owner *o)
{
	struct grant *g;

	o->o_refs++;
	while ((g = LIST_FIRST(&o->o_grants)) != NULL) {
		TAILQ_REMOVE(&t->t_grants, g, g_all);
		LIST_REMOVE(g, g_owner_link);
		grant_free(t, g);
	}
	owner_unref(t, o);
}

/*
 * Puts back on ob what the grant's owner held in its range before the grant. A saved exclusive
 * lock another owner now shares can only be where the grant was a shared lock (an exclusive
 * grant let no one in): it comes back shared, as the grant had it, rather than break that
 * owner's lock. Limits are not checked: the kept records were counted already, and at most
 * the spare is added.
 */
static void grant_restore(struct locks_table *t, struct object *ob, struct grant *g)
{
	struct owner *o = g->g_owner;
	struct lock *l, *next;

	TAILQ_FOREACH_SAFE(l, &ob->ob_locks, l_obj_link, next)
		if (l->l_owner == o && overlaps(l->l_start, l->l_end, g->g_start, g->g_end))
			lock_cut(t, ob, l, g->g_start, g->g_end, &g->g_spare);
	while ((l = TAILQ_FIRST(&g->g_saved)) != NULL) {
		enum locks_type type = l->l_type;

		TAILQ_REMOVE(&g->g_saved, l, l_obj_link);
		g->g_nsaved--;
		o->o_host->h_nsaved--;
		if (type == LOCKS_EXCLUSIVE &&
		    first_conflict(ob, o, LOCKS_EXCLUSIVE, l->l_start, l->l_end) != NULL)
			type = LOCKS_SHARED;
		lock_link(t, l, ob, o, type, l->l_start, l->l_end);
	}
	while (owner_merge_one(t, ob, o))
		;
}

/* ---- waiters ---- */

static enum locks_status waiter_queue(struct locks_table *t, struct object *ob, struct owner *o,
				      const struct locks_request *rq, uint64_t start, uint64_t end,
				      void *cookie)
{
	size_t hostlen = strlen(o->o_host->h_name) + 1;
	struct waiter *w;

	if (ob->ob_nwaiters >= t->t_limits.ll_waiters_per_object)
		return LOCKS_NOLOCKS;
	w = calloc(1, sizeof(*w) + hostlen + o->o_ohlen);
	if (w == NULL)
		return LOCKS_NOMEM;
	memcpy(w->w_copy, o->o_host->h_name, hostlen);
	memcpy(w->w_copy + hostlen, o->o_oh, o->o_ohlen);
	w->w_ev.le_cookie = cookie;
	w->w_ev.le_object = ob->ob_key;
	w->w_ev.le_owner.lw_host = w->w_copy;
	w->w_ev.le_owner.lw_svid = o->o_svid;
	w->w_ev.le_owner.lw_oh = w->w_copy + hostlen;
	w->w_ev.le_owner.lw_ohlen = o->o_ohlen;
	w->w_ev.le_type = rq->lq_type;
	w->w_ev.le_offset = rq->lq_offset;
	w->w_ev.le_len = rq->lq_len;
	w->w_obj = ob;
	w->w_owner = o;
	w->w_start = start;
	w->w_end = end;
	TAILQ_INSERT_TAIL(&ob->ob_waiters, w, w_obj_link);
	TAILQ_INSERT_TAIL(&o->o_host->h_waiters, w, w_host_link);
	o->o_refs++;
	ob->ob_nwaiters++;
	t->t_nwaiters++;
	return LOCKS_OK;
}

static struct waiter *waiter_find(struct object *ob, const struct owner *o, enum locks_type type,
				  uint64_t start, uint64_t end)
{
	struct waiter *w;

	TAILQ_FOREACH(w, &ob->ob_waiters, w_obj_link)
		if (w->w_owner == o && w->w_ev.le_type == type && w->w_start == start && w->w_end == end)
			return w;
	return NULL;
}

/* Takes w out of the table; it is then only an event (or freed by the caller). */
static void waiter_unlink(struct locks_table *t, struct waiter *w)
{
	struct owner *o = w->w_owner;

	TAILQ_REMOVE(&w->w_obj->ob_waiters, w, w_obj_link);
	TAILQ_REMOVE(&o->o_host->h_waiters, w, w_host_link);
	w->w_obj->ob_nwaiters--;
	t->t_nwaiters--;
	w->w_obj = NULL;
	w->w_owner = NULL;
	owner_unref(t, o);
}

static void waiter_leave(struct locks_table *t, struct waiter *w, enum locks_event_kind kind,
			 enum locks_status why, struct event_list *el)
{
	waiter_unlink(t, w);
	w->w_ev.le_kind = kind;
	w->w_ev.le_why = why;
	events_push(el, &w->w_ev);
}

/*
 * Grants, in the order they came, the waiters of ob no held lock conflicts with. Granting one
 * can only add locks, except an owner's grant replacing its own exclusive lock by a shared
 * one: so the pass is repeated after a grant, until one grants nothing.
 */
static void waiters_retry(struct locks_table *t, struct object *ob, struct event_list *el)
{
	struct waiter *w, *next;
	bool granted = true;

	while (granted) {
		granted = false;
		TAILQ_FOREACH_SAFE(w, &ob->ob_waiters, w_obj_link, next) {
			struct owner *o = w->w_owner;
			enum locks_status st = LOCKS_NOMEM;
			struct grant *g;

			if (first_conflict(ob, o, w->w_ev.le_type, w->w_start, w->w_end) != NULL)
				continue;
			g = grant_prepare(ob, o, w->w_start, w->w_end);
			if (g != NULL)
				st = lock_apply(t, ob, o, w->w_ev.le_type, w->w_start, w->w_end,
						g->g_nsaved);
			if (st == LOCKS_OK) {
				grant_commit(t, g, o);
				w->w_ev.le_grant = g->g_id;
				waiter_leave(t, w, LOCKS_EV_GRANTED, LOCKS_OK, el);
				granted = true;
				break;
			}
			if (g != NULL)
				grant_free(t, g);
			waiter_leave(t, w, LOCKS_EV_DENIED, st, el);
		}
	}
}

/* ---- releases ---- */

static void object_mark_dirty(struct object *ob, struct object **dirty)
{
	if (ob->ob_dirty)
		return;
	ob->ob_dirty = true;
	ob->ob_dirty_next = *dirty;
	*dirty = ob;
}

static void objects_retry(struct locks_table *t, struct object *dirty, struct event_list *el)
{
	while (dirty != NULL) {
		struct object *ob = dirty;

		dirty = ob->ob_dirty_next;
		ob->ob_dirty = false;
		waiters_retry(t, ob, el);
		object_put_if_idle(t, ob);
	}
}

/* Drops the locks and waiters of host h held by owner o, or by every owner of h if o is NULL. */
static void host_release(struct locks_table *t, struct host *h, const struct owner *o,
			 struct object **dirty, struct event_list *el)
{
	struct lock *l, *lnext;
	struct waiter *w, *wnext;

	h->h_pins++;
	for (struct owner *each = LIST_FIRST(&h->h_owners), *onext; each != NULL; each = onext) {
		onext = LIST_NEXT(each, o_link);
		if (o == NULL || each == o)
			owner_drop_grants(t, each);
	}
	TAILQ_FOREACH_SAFE(w, &h->h_waiters, w_host_link, wnext) {
		if (o != NULL && w->w_owner != o)
			continue;
		object_mark_dirty(w->w_obj, dirty);
		waiter_leave(t, w, LOCKS_EV_DROPPED, LOCKS_OK, el);
	}
	TAILQ_FOREACH_SAFE(l, &h->h_locks, l_host_link, lnext) {
		if (o != NULL && l->l_owner != o)
			continue;
		object_mark_dirty(l->l_obj, dirty);
		lock_unlink(t, l);
	}
	h->h_pins--;
	host_put_if_idle(t, h);
}

/* ---- the interface ---- */

static bool owner_valid(const struct locks_owner *w)
{
	return w->lw_host != NULL && w->lw_host[0] != '\0' &&
	       strnlen(w->lw_host, LOCKS_HOST_MAX + 1) <= LOCKS_HOST_MAX &&
	       w->lw_ohlen <= LOCKS_OH_MAX && (w->lw_ohlen == 0 || w->lw_oh != NULL);
}

static bool request_valid(const struct locks_request *rq)
{
	return owner_valid(&rq->lq_owner) &&
	       (rq->lq_type == LOCKS_SHARED || rq->lq_type == LOCKS_EXCLUSIVE);
}

enum locks_status locks_table_create(const struct locks_limits *limits, struct locks_table **out)
{
	static const struct locks_limits defaults = {
		.ll_locks_per_host = LOCKS_DEFAULT_LOCKS_PER_HOST,
		.ll_hosts = LOCKS_DEFAULT_HOSTS,
		.ll_waiters_per_object = LOCKS_DEFAULT_WAITERS_PER_OBJECT,
	};
	struct locks_table *t;

	if (limits == NULL)
		limits = &defaults;
	if (limits->ll_locks_per_host == 0 || limits->ll_hosts == 0 ||
	    limits->ll_waiters_per_object == 0)
		return LOCKS_INVAL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return LOCKS_NOMEM;
	if (pthread_mutex_init(&t->t_mutex, NULL) != 0) {
		free(t);
		return LOCKS_NOMEM;
	}
	t->t_limits = *limits;
	TAILQ_INIT(&t->t_host_list);
	TAILQ_INIT(&t->t_grants);
	*out = t;
	return LOCKS_OK;
}

void locks_table_free(struct locks_table *t)
{
	struct locks_event *events = NULL;

	if (t == NULL)
		return;
	locks_release_all(t, &events);
	locks_events_free(events);
	pthread_mutex_destroy(&t->t_mutex);
	free(t);
}

enum locks_status locks_lock(struct locks_table *t, const struct locks_request *rq, void *cookie,
			     struct locks_holder *conflict, struct locks_event **events)
{
	struct event_list el;
	struct object *ob;
	struct owner *o = NULL;
	struct lock *blocker;
	uint64_t start, end;
	enum locks_status st;

	if (!request_valid(rq))
		return LOCKS_INVAL;
	range_of(rq->lq_offset, rq->lq_len, &start, &end);
	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	ob = object_get(t, &rq->lq_object);
	if (ob == NULL) {
		st = LOCKS_NOMEM;
		goto leave;
	}
	st = owner_get(t, &rq->lq_owner, &o);
	if (st != LOCKS_OK)
		goto leave;
	blocker = first_conflict(ob, o, rq->lq_type, start, end);
	if (blocker != NULL) {
		if (conflict != NULL)
			holder_fill(conflict, blocker);
		if (!rq->lq_block)
			st = LOCKS_DENIED;
		else if (waiter_find(ob, o, rq->lq_type, start, end) != NULL)
			st = LOCKS_ALREADY_BLOCKED;
		else if ((st = waiter_queue(t, ob, o, rq, start, end, cookie)) == LOCKS_OK)
			st = LOCKS_BLOCKED;
		goto leave;
	}
	st = lock_apply(t, ob, o, rq->lq_type, start, end, 0);
	if (st == LOCKS_OK)
		waiters_retry(t, ob, &el);
leave:
	if (o != NULL)
		owner_unref(t, o);
	if (ob != NULL)
		object_put_if_idle(t, ob);
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
	return st;
}

enum locks_status locks_test(struct locks_table *t, const struct locks_request *rq,
			     struct locks_holder *conflict)
{
	struct object *ob;
	struct lock *blocker = NULL;
	uint64_t start, end;

	if (!request_valid(rq))
		return LOCKS_INVAL;
	range_of(rq->lq_offset, rq->lq_len, &start, &end);
	pthread_mutex_lock(&t->t_mutex);
	ob = *object_slot(t, &rq->lq_object);
	if (ob != NULL)
		blocker = first_conflict(ob, owner_find(t, &rq->lq_owner), rq->lq_type, start, end);
	if (blocker != NULL && conflict != NULL)
		holder_fill(conflict, blocker);
	pthread_mutex_unlock(&t->t_mutex);
	return blocker != NULL ? LOCKS_DENIED : LOCKS_OK;
}

enum locks_status locks_unlock(struct locks_table *t, const struct locks_request *rq,
			       struct locks_event **events)
{
	struct event_list el;
	struct object *ob;
	struct owner *o;
	uint64_t start, end;
	enum locks_status st = LOCKS_OK;
	bool changed = false;

	if (!owner_valid(&rq->lq_owner))
		return LOCKS_INVAL;
	range_of(rq->lq_offset, rq->lq_len, &start, &end);
	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	ob = *object_slot(t, &rq->lq_object);
	o = owner_find(t, &rq->lq_owner);
	if (ob != NULL && o != NULL) {
		o->o_refs++;
		st = lock_remove_range(t, ob, o, start, end, &changed);
		if (changed)
			waiters_retry(t, ob, &el);
		owner_unref(t, o);
		object_put_if_idle(t, ob);
	}
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
	return st;
}

enum locks_status locks_cancel(struct locks_table *t, const struct locks_request *rq,
			       void **cookie)
{
	struct object *ob;
	struct owner *o;
	struct waiter *w = NULL;
	uint64_t start, end;

	if (!request_valid(rq))
		return LOCKS_INVAL;
	range_of(rq->lq_offset, rq->lq_len, &start, &end);
	pthread_mutex_lock(&t->t_mutex);
	ob = *object_slot(t, &rq->lq_object);
	o = owner_find(t, &rq->lq_owner);
	if (ob != NULL && o != NULL)
		w = waiter_find(ob, o, rq->lq_type, start, end);
	if (w != NULL) {
		waiter_unlink(t, w);
		object_put_if_idle(t, ob);
	}
	pthread_mutex_unlock(&t->t_mutex);
	if (w == NULL)
		return LOCKS_NOENT;
	if (cookie != NULL)
		*cookie = w->w_ev.le_cookie;
	free(w);
	return LOCKS_OK;
}

void locks_release_owner(struct locks_table *t, const struct locks_owner *owner,
			 struct locks_event **events)
{
	struct event_list el;
	struct object *dirty = NULL;
	struct owner *o;

	if (!owner_valid(owner))
		return;
	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	o = owner_find(t, owner);
	if (o != NULL) {
		struct host *h = o->o_host;

		o->o_refs++;
		h->h_pins++;
		host_release(t, h, o, &dirty, &el);
		owner_unref(t, o);
		h->h_pins--;
		host_put_if_idle(t, h);
		objects_retry(t, dirty, &el);
	}
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
}

void locks_release_host(struct locks_table *t, const char *host, struct locks_event **events)
{
	struct event_list el;
	struct object *dirty = NULL;
	struct host *h;

	if (host == NULL || strnlen(host, LOCKS_HOST_MAX + 1) > LOCKS_HOST_MAX)
		return;
	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	h = *host_slot(t, host);
	if (h != NULL) {
		host_release(t, h, NULL, &dirty, &el);
		objects_retry(t, dirty, &el);
	}
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
}

/* Waiters go first, so none is granted a lock only to be released with the rest. */
void locks_release_all(struct locks_table *t, struct locks_event **events)
{
	struct event_list el;
	struct host *h;

	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	TAILQ_FOREACH(h, &t->t_host_list, h_all) {
		struct waiter *w, *next;

		TAILQ_FOREACH_SAFE(w, &h->h_waiters, w_host_link, next) {
			struct object *ob = w->w_obj;

			/* the host stays: its owners hold locks, or it is pinned below */
			h->h_pins++;
			waiter_leave(t, w, LOCKS_EV_DROPPED, LOCKS_OK, &el);
			h->h_pins--;
			object_put_if_idle(t, ob);
		}
	}
	while ((h = TAILQ_FIRST(&t->t_host_list)) != NULL) {
		struct object *dirty = NULL;

		host_release(t, h, NULL, &dirty, &el);
		objects_retry(t, dirty, &el);
	}
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
}

enum locks_status locks_ungrant(struct locks_table *t, uint64_t grant, struct locks_event **events)
{
	struct event_list el;
	struct object *ob = NULL;
	struct grant *g;
	enum locks_status st = LOCKS_NOENT;

	events_init(&el);
	pthread_mutex_lock(&t->t_mutex);
	g = grant_take(t, grant);
	if (g != NULL) {
		ob = *object_slot(t, &g->g_key);
		/* unchanged, the granted lock is still there, and so its object */
		st = g->g_changed || ob == NULL ? LOCKS_CHANGED : LOCKS_OK;
	}
	if (st == LOCKS_OK) {
		grant_restore(t, ob, g);
		waiters_retry(t, ob, &el);
		object_put_if_idle(t, ob);
	}
	if (g != NULL)
		grant_free(t, g);
	pthread_mutex_unlock(&t->t_mutex);
	events_hand_over(&el, events);
	return st;
}

void locks_grant_keep(struct locks_table *t, uint64_t grant)
{
	struct grant *g;

	pthread_mutex_lock(&t->t_mutex);
	g = grant_take(t, grant);
	if (g != NULL)
		grant_free(t, g);
	pthread_mutex_unlock(&t->t_mutex);
}

size_t locks_grants(struct locks_table *t)
{
	struct grant *g;
	size_t n = 0;

	pthread_mutex_lock(&t->t_mutex);
	TAILQ_FOREACH(g, &t->t_grants, g_all)
		n++;
	pthread_mutex_unlock(&t->t_mutex);
	return n;
}

void locks_events_free(struct locks_event *events)
{
	while (events != NULL) {
		struct locks_event *next = events->le_next;

		free(events);          /* the event is the first member of its waiter */
		events = next;
	}
}

size_t locks_host_locks(struct locks_table *t, const char *host)
{
	struct host *h;
	size_t n = 0;

	if (host == NULL)
		return 0;
	pthread_mutex_lock(&t->t_mutex);
	h = *host_slot(t, host);
	if (h != NULL)
		n = h->h_nlocks;
	pthread_mutex_unlock(&t->t_mutex);
	return n;
}

bool locks_host_active(struct locks_table *t, const char *host)
{
	bool active;

	if (host == NULL || strnlen(host, LOCKS_HOST_MAX + 1) > LOCKS_HOST_MAX)
		return false;
	pthread_mutex_lock(&t->t_mutex);
	active = *host_slot(t, host) != NULL;
	pthread_mutex_unlock(&t->t_mutex);
	return active;
}

size_t locks_object_waiters(struct locks_table *t, const struct locks_object *object)
{
	struct object *ob;
	size_t n = 0;

	pthread_mutex_lock(&t->t_mutex);
	ob = *object_slot(t, object);
	if (ob != NULL)
		n = ob->ob_nwaiters;
	pthread_mutex_unlock(&t->t_mutex);
	return n;
}

void locks_counts(struct locks_table *t, struct locks_counts *out)
{
	pthread_mutex_lock(&t->t_mutex);
	out->lc_locks = t->t_nlocks;
	out->lc_waiters = t->t_nwaiters;
	out->lc_hosts = t->t_nhosts;
	out->lc_objects = t->t_nobjects;
	pthread_mutex_unlock(&t->t_mutex);
}

int locks_each(struct locks_table *t, locks_each_fn fn, void *arg)
{
	struct locks_holder holder;
	struct host *h;
	struct lock *l;
	int rc = 0;

	pthread_mutex_lock(&t->t_mutex);
	TAILQ_FOREACH(h, &t->t_host_list, h_all) {
		TAILQ_FOREACH(l, &h->h_locks, l_host_link) {
			holder_fill(&holder, l);
			rc = fn(&l->l_obj->ob_key, &holder, arg);
			if (rc != 0)
				goto leave;
		}
	}
leave:
	pthread_mutex_unlock(&t->t_mutex);
	return rc;
}

int locks_each_waiter(struct locks_table *t, locks_each_fn fn, void *arg)
{
	struct locks_holder holder;
	const struct owner *o;
	struct waiter *w;
	struct host *h;
	int rc = 0;

	pthread_mutex_lock(&t->t_mutex);
	TAILQ_FOREACH(h, &t->t_host_list, h_all) {
		TAILQ_FOREACH(w, &h->h_waiters, w_host_link) {
			o = w->w_owner;
			memset(&holder, 0, sizeof(holder));
			strcpy(holder.lh_host, h->h_name);
			holder.lh_svid = o->o_svid;
			holder.lh_ohlen = o->o_ohlen;
			memcpy(holder.lh_oh, o->o_oh, o->o_ohlen);
			holder.lh_type = w->w_ev.le_type;
			holder.lh_offset = w->w_start;
			holder.lh_len = len_of(w->w_start, w->w_end);
			rc = fn(&w->w_obj->ob_key, &holder, arg);
			if (rc != 0)
				goto leave;
		}
	}
leave:
	pthread_mutex_unlock(&t->t_mutex);
	return rc;
}

const char *locks_strerror(enum locks_status status)
{
	switch (status) {
	case LOCKS_OK: return "granted";
	case LOCKS_DENIED: return "another owner holds a conflicting lock";
	case LOCKS_BLOCKED: return "queued behind a conflicting lock";
	case LOCKS_ALREADY_BLOCKED: return "the same request is already queued";
	case LOCKS_NOLOCKS: return "lock table limit reached (locks per host, hosts or waiters per file)";
	case LOCKS_NOMEM: return "out of memory";
	case LOCKS_NOENT: return "no such waiting request";
	case LOCKS_INVAL: return "invalid lock request (host key or owner handle size)";
	case LOCKS_CHANGED: return "the owner changed its locks on the granted range since";
	}
	return "unknown lock table status";
}
