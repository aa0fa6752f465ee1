/*
 * The lock table (include/nlm_locks.h): conflicts, split and merge of an owner's ranges,
 * upgrade and downgrade, lengths to end of file and offsets near 2^64, releases, waiters
 * granted in order, cancel, limits, export ids, iteration; and random operations checked
 * against a byte map of who holds what.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "nlm_locks.h"

#define FILE_A 1001
#define FILE_B 1002
#define EXPORT 7

#define S LOCKS_SHARED
#define X LOCKS_EXCLUSIVE

/* An owner: host "hostH", svid, handle "ohN". */
struct who {
	const char *host;
	int32_t svid;
	const char *oh;
};

static const struct who alice = { "alpha", 1, "oh-alice" };
static const struct who bob = { "beta", 2, "oh-bob" };
static const struct who carol = { "gamma", 3, "oh-carol" };
static const struct who dave = { "alpha", 4, "oh-dave" };   /* alice's host, another process */

static struct locks_request rq_on(uint32_t export, uint64_t fileid, const struct who *w, int type,
				  uint64_t offset, uint64_t len, bool block)
{
	struct locks_request rq = {
		.lq_object = { .lo_export = export, .lo_fileid = fileid },
		.lq_owner = { .lw_host = w->host, .lw_svid = w->svid, .lw_oh = w->oh,
			      .lw_ohlen = strlen(w->oh) },
		.lq_type = (enum locks_type)type,
		.lq_offset = offset,
		.lq_len = len,
		.lq_block = block,
	};
	return rq;
}

static struct locks_request rq(const struct who *w, int type, uint64_t offset, uint64_t len)
{
	return rq_on(EXPORT, FILE_A, w, type, offset, len, false);
}

static enum locks_status lock(struct locks_table *t, const struct who *w, int type,
			      uint64_t offset, uint64_t len)
{
	struct locks_request r = rq(w, type, offset, len);
	struct locks_event *ev = NULL;
	enum locks_status st = locks_lock(t, &r, NULL, NULL, &ev);

	assert_null(ev);
	return st;
}

static enum locks_status unlock(struct locks_table *t, const struct who *w, uint64_t offset,
				uint64_t len)
{
	struct locks_request r = rq(w, S, offset, len);
	struct locks_event *ev = NULL;
	enum locks_status st = locks_unlock(t, &r, &ev);

	assert_null(ev);
	return st;
}

static enum locks_status test(struct locks_table *t, const struct who *w, int type,
			      uint64_t offset, uint64_t len, struct locks_holder *h)
{
	struct locks_request r = rq(w, type, offset, len);

	return locks_test(t, &r, h);
}

static struct locks_table *table(uint32_t per_host, uint32_t hosts, uint32_t waiters)
{
	struct locks_limits lim = { .ll_locks_per_host = per_host, .ll_hosts = hosts,
				    .ll_waiters_per_object = waiters };
	struct locks_table *t = NULL;

	assert_int_equal(locks_table_create(&lim, &t), LOCKS_OK);
	return t;
}

/* ---- what locks_each reports, as text ---- */

struct listing {
	char text[4096];
	size_t len;
	int stop_after;            /* 0: never */
	int seen;
};

static int list_one(const struct locks_object *ob, const struct locks_holder *h, void *arg)
{
	struct listing *li = arg;

	li->len += snprintf(li->text + li->len, sizeof(li->text) - li->len,
			    "%u:%llu %s/%d/%.*s %c %llu+%llu\n", ob->lo_export,
			    (unsigned long long)ob->lo_fileid, h->lh_host, h->lh_svid,
			    (int)h->lh_ohlen, (const char *)h->lh_oh, h->lh_type == X ? 'X' : 'S',
			    (unsigned long long)h->lh_offset, (unsigned long long)h->lh_len);
	li->seen++;
	return li->stop_after != 0 && li->seen >= li->stop_after ? 42 : 0;
}

/* The held locks, one line each, sorted (the table promises grouping by host only). */
static char *listing(struct locks_table *t)
{
	static struct listing li;
	char *lines[128], *p, *save = NULL;
	static char sorted[4096];
	size_t n = 0;

	memset(&li, 0, sizeof(li));
	assert_int_equal(locks_each(t, list_one, &li), 0);
	for (p = strtok_r(li.text, "\n", &save); p != NULL; p = strtok_r(NULL, "\n", &save))
		lines[n++] = p;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
			char *tmp = lines[j];
			lines[j] = lines[j - 1];
			lines[j - 1] = tmp;
		}
	sorted[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(sorted, lines[i]);
		strcat(sorted, "\n");
	}
	return sorted;
}

static size_t count_events(const struct locks_event *ev, enum locks_event_kind kind)
{
	size_t n = 0;

	for (; ev != NULL; ev = ev->le_next)
		n += ev->le_kind == kind;
	return n;
}

/* ---- conflicts ---- */

static void test_conflict_matrix(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_holder h;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 5, 10), LOCKS_OK);            /* shared + shared */
	assert_int_equal(lock(t, &carol, X, 8, 1), LOCKS_DENIED);       /* excl vs shared */
	assert_int_equal(lock(t, &carol, X, 15, 5), LOCKS_OK);          /* past both: free */
	assert_int_equal(lock(t, &alice, S, 14, 2), LOCKS_DENIED);      /* shared vs excl at 15 */
	assert_int_equal(lock(t, &carol, X, 17, 1), LOCKS_OK);          /* own lock: no conflict */
	assert_int_equal(lock(t, &carol, S, 15, 1), LOCKS_OK);          /* own, other type */
	assert_int_equal(lock(t, &dave, S, 0, 1), LOCKS_OK);            /* same host, other svid */
	assert_int_equal(lock(t, &dave, X, 0, 1), LOCKS_DENIED);        /* ... is another owner */

	/* the same host and svid with another handle is another owner too */
	struct who alice2 = { "alpha", 1, "oh-alice-2" };
	assert_int_equal(lock(t, &alice2, X, 0, 1), LOCKS_DENIED);

	/* TEST reports the conflicting lock of lowest offset, with its owner */
	assert_int_equal(test(t, &carol, X, 0, 0, &h), LOCKS_DENIED);
	assert_string_equal(h.lh_host, "alpha");
	assert_int_equal(h.lh_svid, 1);
	assert_int_equal(h.lh_ohlen, strlen("oh-alice"));
	assert_memory_equal(h.lh_oh, "oh-alice", h.lh_ohlen);
	assert_int_equal(h.lh_type, S);
	assert_int_equal(h.lh_offset, 0);
	assert_int_equal(h.lh_len, 10);
	assert_int_equal(test(t, &alice, S, 15, 1, &h), LOCKS_OK);      /* carol downgraded 15 */
	assert_int_equal(test(t, &alice, X, 15, 1, &h), LOCKS_DENIED);
	assert_string_equal(h.lh_host, "gamma");
	assert_int_equal(h.lh_type, S);
	assert_int_equal(h.lh_offset, 15);
	assert_int_equal(h.lh_len, 1);
	assert_int_equal(test(t, &alice, S, 16, 2, &h), LOCKS_DENIED);
	assert_int_equal(h.lh_type, X);
	assert_int_equal(h.lh_offset, 16);
	assert_int_equal(h.lh_len, 4);
	assert_int_equal(test(t, &alice, S, 0, 15, NULL), LOCKS_OK);    /* own and shared only */
	assert_int_equal(test(t, &carol, S, 0, 20, NULL), LOCKS_OK);
	assert_int_equal(test(t, &carol, X, 20, 0, NULL), LOCKS_OK);

	/* a denied request leaves nothing behind */
	struct locks_counts c;
	locks_counts(t, &c);
	assert_int_equal(c.lc_hosts, 3);
	assert_int_equal(c.lc_waiters, 0);
	locks_table_free(t);
}

static void test_exports_never_conflict(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request a = rq_on(1, FILE_A, &alice, X, 0, 0, false);
	struct locks_request b = rq_on(2, FILE_A, &bob, X, 0, 0, false);
	struct locks_request c = rq_on(1, FILE_B, &carol, X, 0, 0, false);
	struct locks_request d = rq_on(1, FILE_A, &dave, X, 0, 0, false);

	(void)state;
	assert_int_equal(locks_lock(t, &a, NULL, NULL, NULL), LOCKS_OK);
	assert_int_equal(locks_lock(t, &b, NULL, NULL, NULL), LOCKS_OK);
	assert_int_equal(locks_lock(t, &c, NULL, NULL, NULL), LOCKS_OK);
	assert_int_equal(locks_lock(t, &d, NULL, NULL, NULL), LOCKS_DENIED);
	assert_int_equal(locks_test(t, &d, NULL), LOCKS_DENIED);
	d.lq_object.lo_export = 3;
	assert_int_equal(locks_test(t, &d, NULL), LOCKS_OK);
	struct locks_counts cnt;
	locks_counts(t, &cnt);
	assert_int_equal(cnt.lc_objects, 3);
	assert_int_equal(cnt.lc_locks, 3);
	locks_table_free(t);
}

/* ---- an owner's ranges ---- */

static void test_split_on_partial_unlock(void **state)
{
	struct locks_table *t = table(100, 10, 10);

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 100), LOCKS_OK);
	assert_int_equal(unlock(t, &alice, 40, 10), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 0+40\n"
					"7:1001 alpha/1/oh-alice X 50+50\n");
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	assert_int_equal(lock(t, &bob, X, 40, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, X, 39, 1), LOCKS_DENIED);
	assert_int_equal(lock(t, &bob, X, 50, 1), LOCKS_DENIED);
	/* trimming either end, and unlocking what is not held */
	assert_int_equal(unlock(t, &alice, 0, 5), LOCKS_OK);
	assert_int_equal(unlock(t, &alice, 95, 0), LOCKS_OK);
	assert_int_equal(unlock(t, &alice, 200, 5), LOCKS_OK);
	assert_int_equal(unlock(t, &carol, 0, 0), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 5+35\n"
					"7:1001 alpha/1/oh-alice X 50+45\n"
					"7:1001 beta/2/oh-bob X 40+10\n");
	/* unlocking across both pieces and the gap */
	assert_int_equal(unlock(t, &alice, 0, 0), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 beta/2/oh-bob X 40+10\n");
	assert_int_equal(locks_host_locks(t, "alpha"), 0);
	locks_table_free(t);
}

static void test_merge_adjacent_and_overlapping(void **state)
{
	struct locks_table *t = table(100, 10, 10);

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 10, 10), LOCKS_OK);         /* adjacent after */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+20\n");
	assert_int_equal(lock(t, &alice, S, 30, 10), LOCKS_OK);         /* a gap: two */
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	assert_int_equal(lock(t, &alice, S, 15, 20), LOCKS_OK);         /* bridges both */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n");
	assert_int_equal(lock(t, &alice, S, 5, 5), LOCKS_OK);           /* inside: no change */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n");
	assert_int_equal(lock(t, &alice, X, 40, 10), LOCKS_OK);         /* other type: apart */
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	assert_int_equal(lock(t, &bob, S, 50, 10), LOCKS_OK);           /* other owner: apart */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n"
					"7:1001 alpha/1/oh-alice X 40+10\n"
					"7:1001 beta/2/oh-bob S 50+10\n");
	assert_int_equal(lock(t, &alice, S, 100, 0), LOCKS_OK);         /* to end */
	assert_int_equal(lock(t, &alice, S, 60, 40), LOCKS_OK);         /* adjacent before */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n"
					"7:1001 alpha/1/oh-alice S 60+0\n"
					"7:1001 alpha/1/oh-alice X 40+10\n"
					"7:1001 beta/2/oh-bob S 50+10\n");
	locks_table_free(t);
}

static void test_upgrade_downgrade(void **state)
{
	struct locks_table *t = table(100, 10, 10);

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 20, 10), LOCKS_OK);         /* upgrade the middle */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+20\n"
					"7:1001 alpha/1/oh-alice S 30+70\n"
					"7:1001 alpha/1/oh-alice X 20+10\n");
	assert_int_equal(lock(t, &bob, S, 25, 1), LOCKS_DENIED);
	assert_int_equal(lock(t, &bob, S, 30, 1), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 20, 10), LOCKS_OK);         /* downgrade: one again */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+100\n"
					"7:1001 beta/2/oh-bob S 30+1\n");
	/* an upgrade that conflicts is refused and leaves the shared lock as it was */
	assert_int_equal(lock(t, &alice, X, 0, 0), LOCKS_DENIED);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+100\n"
					"7:1001 beta/2/oh-bob S 30+1\n");
	/* upgrading the whole of one lock and more */
	assert_int_equal(lock(t, &alice, X, 0, 30), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 40, 70), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 30+10\n"
					"7:1001 alpha/1/oh-alice X 0+30\n"
					"7:1001 alpha/1/oh-alice X 40+70\n"
					"7:1001 beta/2/oh-bob S 30+1\n");
	locks_table_free(t);
}

static void test_length_zero_and_offsets_near_2_64(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_holder h;

	(void)state;
	assert_int_equal(lock(t, &alice, X, UINT64_MAX - 9, 100), LOCKS_OK);  /* past 2^64: to end */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 18446744073709551606+0\n");
	assert_int_equal(lock(t, &bob, S, UINT64_MAX, 1), LOCKS_DENIED);      /* the last byte */
	assert_int_equal(lock(t, &bob, S, UINT64_MAX - 10, 1), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 1ull << 63, UINT64_MAX), LOCKS_DENIED);
	assert_int_equal(test(t, &carol, S, 0, 0, &h), LOCKS_DENIED);
	assert_string_equal(h.lh_host, "alpha");
	assert_int_equal(h.lh_offset, UINT64_MAX - 9);
	assert_int_equal(h.lh_len, 0);
	/* a lock ending exactly at the second-to-last byte is not "to end" */
	assert_int_equal(unlock(t, &alice, 0, 0), LOCKS_OK);
	assert_int_equal(unlock(t, &bob, 0, 0), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 0, UINT64_MAX), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, UINT64_MAX, 1), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 0+18446744073709551615\n"
					"7:1001 beta/2/oh-bob S 18446744073709551615+0\n");
	assert_int_equal(lock(t, &carol, S, UINT64_MAX - 1, 1), LOCKS_DENIED);
	/* merging up to the end, around an unlocked last byte */
	assert_int_equal(unlock(t, &alice, 0, 0), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, UINT64_MAX - 20, 10), LOCKS_OK);
	assert_int_equal(unlock(t, &bob, UINT64_MAX, 1), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, UINT64_MAX - 10, 0), LOCKS_OK);
	assert_int_equal(locks_host_locks(t, "beta"), 1);
	assert_int_equal(lock(t, &alice, X, 0, UINT64_MAX - 20), LOCKS_OK);
	assert_int_equal(lock(t, &carol, X, UINT64_MAX - 20, 1), LOCKS_DENIED);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 0+18446744073709551595\n"
					"7:1001 beta/2/oh-bob S 18446744073709551595+0\n");
	locks_table_free(t);
}

/* ---- releases ---- */

static void test_release_owner_host_all(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request w = rq(&carol, X, 0, 1);
	struct locks_event *ev = NULL;
	struct locks_counts c;
	int cookie;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 20, 10), LOCKS_OK);
	assert_int_equal(lock(t, &dave, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	w.lq_block = true;
	assert_int_equal(locks_lock(t, &w, &cookie, NULL, &ev), LOCKS_BLOCKED);

	/* the owner: alice's locks go, dave's (same host) stay, carol still waits for dave */
	struct locks_request gone = rq(&alice, S, 0, 0);
	locks_release_owner(t, &gone.lq_owner, &ev);
	assert_null(ev);
	assert_string_equal(listing(t), "7:1001 alpha/4/oh-dave S 0+10\n"
					"7:1001 beta/2/oh-bob S 40+10\n");
	/* the host: dave goes, so carol gets her lock */
	locks_release_host(t, "alpha", &ev);
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_GRANTED);
	assert_ptr_equal(ev->le_cookie, &cookie);
	assert_string_equal(ev->le_owner.lw_host, "gamma");
	assert_null(ev->le_next);
	locks_events_free(ev);
	ev = NULL;
	assert_string_equal(listing(t), "7:1001 beta/2/oh-bob S 40+10\n"
					"7:1001 gamma/3/oh-carol X 0+1\n");
	assert_int_equal(locks_host_locks(t, "alpha"), 0);
	locks_release_host(t, "nobody", &ev);
	assert_null(ev);

	/* a waiter goes with its host: a DROPPED event hands its cookie back */
	w = rq(&alice, S, 0, 0);
	w.lq_block = true;
	assert_int_equal(locks_lock(t, &w, &cookie, NULL, &ev), LOCKS_BLOCKED);
	locks_release_host(t, "alpha", &ev);
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_DROPPED);
	assert_ptr_equal(ev->le_cookie, &cookie);
	locks_events_free(ev);
	ev = NULL;

	/* all: waiters are dropped, not granted */
	w = rq(&alice, X, 0, 0);
	w.lq_block = true;
	assert_int_equal(locks_lock(t, &w, &cookie, NULL, &ev), LOCKS_BLOCKED);
	locks_release_all(t, &ev);
	assert_int_equal(count_events(ev, LOCKS_EV_DROPPED), 1);
	assert_int_equal(count_events(ev, LOCKS_EV_GRANTED), 0);
	locks_events_free(ev);
	locks_counts(t, &c);
	assert_int_equal(c.lc_locks, 0);
	assert_int_equal(c.lc_waiters, 0);
	assert_int_equal(c.lc_hosts, 0);
	assert_int_equal(c.lc_objects, 0);
	assert_string_equal(listing(t), "");
	locks_table_free(t);
}

/* ---- waiters ---- */

static enum locks_status wait_for(struct locks_table *t, const struct who *w, int type,
				  uint64_t offset, uint64_t len, void *cookie)
{
	struct locks_request r = rq(w, type, offset, len);
	struct locks_event *ev = NULL;
	enum locks_status st;

	r.lq_block = true;
	st = locks_lock(t, &r, cookie, NULL, &ev);
	assert_null(ev);
	return st;
}

static void test_waiters_granted_in_order(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq(&alice, X, 0, 10);
	struct locks_event *ev = NULL;
	int c1, c2, c3;
	struct locks_object ob = { EXPORT, FILE_A };

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &bob, S, 0, 5, &c1), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &carol, X, 2, 5, &c2), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &dave, S, 4, 1, &c3), LOCKS_BLOCKED);
	assert_int_equal(locks_object_waiters(t, &ob), 3);
	assert_int_equal(unlock(t, &bob, 0, 0), LOCKS_OK);            /* holds nothing: no grant */

	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	/* bob first; carol (exclusive) now conflicts with bob and waits; dave shares with bob */
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_GRANTED);
	assert_ptr_equal(ev->le_cookie, &c1);
	assert_int_equal(ev->le_type, S);
	assert_int_equal(ev->le_offset, 0);
	assert_int_equal(ev->le_len, 5);
	assert_int_equal(ev->le_object.lo_fileid, FILE_A);
	assert_int_equal(ev->le_owner.lw_svid, 2);
	assert_memory_equal(ev->le_owner.lw_oh, "oh-bob", ev->le_owner.lw_ohlen);
	assert_non_null(ev->le_next);
	assert_ptr_equal(ev->le_next->le_cookie, &c3);
	assert_null(ev->le_next->le_next);
	locks_events_free(ev);
	ev = NULL;
	assert_int_equal(locks_object_waiters(t, &ob), 1);
	assert_string_equal(listing(t), "7:1001 alpha/4/oh-dave S 4+1\n"
					"7:1001 beta/2/oh-bob S 0+5\n");

	/* bob goes; carol still conflicts with dave and stays queued */
	r = rq(&bob, S, 0, 0);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_null(ev);
	assert_int_equal(locks_object_waiters(t, &ob), 1);
	/* dave goes: carol's turn */
	r = rq(&dave, S, 0, 0);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_ptr_equal(ev->le_cookie, &c2);
	assert_null(ev->le_next);
	locks_events_free(ev);
	assert_int_equal(locks_object_waiters(t, &ob), 0);
	assert_string_equal(listing(t), "7:1001 gamma/3/oh-carol X 2+5\n");
	locks_table_free(t);
}

static void test_waiter_needs_every_blocker_gone(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r;
	struct locks_event *ev = NULL;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 5, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &carol, X, 0, 20, &c), LOCKS_BLOCKED);
	r = rq(&alice, S, 0, 0);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_null(ev);
	r = rq(&bob, S, 5, 5);                                        /* part of bob's: still 10..14 */
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_null(ev);
	r = rq(&bob, S, 10, 5);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_ptr_equal(ev->le_cookie, &c);
	locks_events_free(ev);
	locks_table_free(t);
}

static void test_downgrade_lets_waiters_in(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq(&alice, S, 0, 10);
	struct locks_event *ev = NULL;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &bob, S, 3, 3, &c), LOCKS_BLOCKED);
	assert_int_equal(locks_lock(t, &r, NULL, NULL, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_GRANTED);
	assert_ptr_equal(ev->le_cookie, &c);
	locks_events_free(ev);
	locks_table_free(t);
}

/* ---- grants given back ---- */

/* The single event in ev: a grant of the waiter with that cookie; its id. Frees ev. */
static uint64_t granted_only(struct locks_event *ev, const void *cookie)
{
	uint64_t id;

	assert_non_null(ev);
	assert_null(ev->le_next);
	assert_int_equal(ev->le_kind, LOCKS_EV_GRANTED);
	assert_ptr_equal(ev->le_cookie, cookie);
	id = ev->le_grant;
	assert_true(id != 0);
	locks_events_free(ev);
	return id;
}

/* bob unlocks everything; alice's waiter with cookie c is granted: the grant's id. */
static uint64_t bob_goes_alice_granted(struct locks_table *t, const void *c)
{
	struct locks_request r = rq(&bob, S, 0, 0);
	struct locks_event *ev = NULL;

	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	return granted_only(ev, c);
}

/*
 * An upgrade from shared to exclusive granted to a waiter and given back leaves the shared
 * lock the owner held before, whole: another owner cannot take it exclusively. The removed
 * exclusive part lets a shared waiter in; the restored shared lock keeps an exclusive one out.
 */
static void test_ungrant_restores_upgraded_lock(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_object ob = { EXPORT, FILE_A };
	struct locks_event *ev = NULL;
	uint64_t g;
	int c, c_carol, c_dave;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+20\n"
					"7:1001 alpha/1/oh-alice S 60+40\n"
					"7:1001 alpha/1/oh-alice X 20+40\n");
	assert_int_equal(locks_grants(t), 1);
	assert_int_equal(wait_for(t, &carol, X, 30, 1, &c_carol), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &dave, S, 25, 5, &c_dave), LOCKS_BLOCKED);

	assert_int_equal(locks_ungrant(t, g, &ev), LOCKS_OK);
	g = granted_only(ev, &c_dave);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+100\n"
					"7:1001 alpha/4/oh-dave S 25+5\n");
	assert_int_equal(locks_object_waiters(t, &ob), 1);        /* carol still waits */
	assert_int_equal(test(t, &bob, X, 20, 40, NULL), LOCKS_DENIED);
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	locks_grant_keep(t, g);
	assert_int_equal(locks_grants(t), 0);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_NOENT);  /* settled */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+100\n"
					"7:1001 alpha/4/oh-dave S 25+5\n");
	locks_table_free(t);
}

/* An owner that held nothing there: the undo removes the whole grant, as before. */
static void test_ungrant_of_a_fresh_lock(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_event *ev = NULL;
	uint64_t g;
	int c;

	(void)state;
	assert_int_equal(lock(t, &bob, X, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 50, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 5, 10, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 5+10\n"
					"7:1001 alpha/1/oh-alice X 50+10\n");
	assert_int_equal(locks_ungrant(t, g, &ev), LOCKS_OK);
	assert_null(ev);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 50+10\n");
	locks_table_free(t);
}

/*
 * The grant merged with the owner's locks on both sides: the undo splits the merged lock,
 * with the record it kept, so it works with every allocation failing.
 */
static void test_ungrant_splits_without_memory(void **state);

/* A shared grant that replaced an exclusive lock, and another owner shares it since: that
 * part comes back shared (as the grant had it) rather than break the other owner's lock. */
static void test_ungrant_of_a_downgrade_shared_meanwhile(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	uint64_t g;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 30, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, X, 10, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, S, 0, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n");
	assert_int_equal(lock(t, &carol, S, 5, 1), LOCKS_OK);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+10\n"
					"7:1001 alpha/1/oh-alice X 30+10\n"
					"7:1001 gamma/3/oh-carol S 5+1\n");
	locks_table_free(t);
}

/*
 * The owner locked or unlocked on the granted range since the grant: its client knows what it
 * asked for last, so the undo leaves that alone (neither drops the new lock nor resurrects the
 * unlocked one).
 */
static void test_ungrant_after_the_owner_changed_its_locks(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	uint64_t g;
	int c;

	(void)state;
	/* a new lock on part of the range */
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_int_equal(lock(t, &alice, S, 20, 10), LOCKS_OK);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_CHANGED);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+30\n"
					"7:1001 alpha/1/oh-alice S 60+40\n"
					"7:1001 alpha/1/oh-alice X 30+30\n");
	assert_int_equal(locks_grants(t), 0);

	/* an unlock of everything */
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_DENIED);
	assert_int_equal(unlock(t, &alice, 30, 30), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_int_equal(unlock(t, &alice, 0, 0), LOCKS_OK);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_CHANGED);
	assert_string_equal(listing(t), "");

	/* a change elsewhere on the file does not count */
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 0, 10, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_int_equal(lock(t, &alice, X, 50, 10), LOCKS_OK);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+10\n"
					"7:1001 alpha/1/oh-alice X 50+10\n");
	locks_table_free(t);
}

/* A grant goes with its owner's locks: released, it cannot be undone any more. */
static void test_grant_released_with_its_owner(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq(&alice, S, 0, 0);
	struct locks_event *ev = NULL;
	uint64_t g;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 0, 10, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	locks_release_owner(t, &r.lq_owner, &ev);
	assert_null(ev);
	assert_int_equal(locks_grants(t), 0);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_NOENT);
	assert_string_equal(listing(t), "");

	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 0, 10, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	locks_release_host(t, "alpha", NULL);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_NOENT);
	locks_table_free(t);     /* and an unsettled grant is freed with the table */
	t = table(100, 10, 10);
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 0, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 0, 10, &c), LOCKS_BLOCKED);
	bob_goes_alice_granted(t, &c);
	locks_table_free(t);
}

/*
 * The records a grant keeps for its undo count against the host's limit until it is settled,
 * or until the owner's own change makes them useless: a host cannot pile them up.
 */
static void test_kept_records_count_against_the_limit(void **state)
{
	struct locks_table *t = table(3, 10, 10);
	struct locks_event *ev = NULL;
	struct locks_request r = rq(&bob, S, 0, 0);
	uint64_t g;
	int c;

	(void)state;
	/* S 0..19, X 20..59, S 60..99 held and S 20..59 kept: 4 records, one too many */
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_DENIED);
	assert_int_equal(ev->le_why, LOCKS_NOLOCKS);
	locks_events_free(ev);
	locks_table_free(t);

	t = table(4, 10, 10);
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_int_equal(locks_host_locks(t, "alpha"), 3);         /* held only */
	assert_int_equal(lock(t, &dave, S, 200, 1), LOCKS_NOLOCKS); /* alice's host is full */
	locks_grant_keep(t, g);
	assert_int_equal(lock(t, &dave, S, 200, 1), LOCKS_OK);

	assert_int_equal(unlock(t, &dave, 0, 0), LOCKS_OK);
	assert_int_equal(unlock(t, &alice, 0, 0), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 0, 100), LOCKS_OK);
	assert_int_equal(lock(t, &bob, S, 40, 10), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, X, 20, 40, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_int_equal(unlock(t, &alice, 20, 40), LOCKS_OK);      /* changed: nothing kept */
	assert_int_equal(lock(t, &dave, S, 200, 1), LOCKS_OK);
	assert_int_equal(lock(t, &dave, S, 300, 1), LOCKS_OK);
	assert_int_equal(locks_ungrant(t, g, NULL), LOCKS_CHANGED);
	locks_table_free(t);
}

static void test_cancel(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq(&bob, S, 0, 5);
	struct locks_event *ev = NULL;
	struct locks_object ob = { EXPORT, FILE_A };
	void *back = NULL;
	int c1, c2;

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 0), LOCKS_OK);
	assert_int_equal(wait_for(t, &bob, S, 0, 5, &c1), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &bob, S, 0, 5, &c2), LOCKS_ALREADY_BLOCKED);
	assert_int_equal(wait_for(t, &bob, X, 0, 5, &c2), LOCKS_BLOCKED);
	assert_int_equal(locks_object_waiters(t, &ob), 2);
	/* only the exact request is cancelled */
	r.lq_len = 6;
	assert_int_equal(locks_cancel(t, &r, &back), LOCKS_NOENT);
	r.lq_len = 5;
	assert_int_equal(locks_cancel(t, &r, &back), LOCKS_OK);
	assert_ptr_equal(back, &c1);
	assert_int_equal(locks_cancel(t, &r, &back), LOCKS_NOENT);
	r.lq_type = LOCKS_EXCLUSIVE;
	r.lq_owner.lw_svid = 99;
	assert_int_equal(locks_cancel(t, &r, &back), LOCKS_NOENT);
	r.lq_owner.lw_svid = bob.svid;
	assert_int_equal(locks_cancel(t, &r, &back), LOCKS_OK);
	assert_ptr_equal(back, &c2);
	assert_int_equal(locks_object_waiters(t, &ob), 0);
	r = rq(&alice, X, 0, 0);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_null(ev);
	struct locks_counts cnt;
	locks_counts(t, &cnt);
	assert_int_equal(cnt.lc_hosts, 0);
	assert_int_equal(cnt.lc_objects, 0);
	locks_table_free(t);
}

/* A caller that passes no event list gets its grants done and the events freed (no leak). */
static void test_events_null(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq(&alice, X, 0, 0);
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 0), LOCKS_OK);
	assert_int_equal(wait_for(t, &bob, S, 0, 1, &c), LOCKS_BLOCKED);
	assert_int_equal(locks_unlock(t, &r, NULL), LOCKS_OK);
	assert_string_equal(listing(t), "7:1001 beta/2/oh-bob S 0+1\n");
	locks_table_free(t);
}

/* ---- limits ---- */

static void test_limits(void **state)
{
	struct locks_table *t = table(3, 2, 2);
	struct locks_event *ev = NULL;
	struct locks_request r;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 1), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 10, 1), LOCKS_OK);
	assert_int_equal(lock(t, &dave, S, 20, 1), LOCKS_OK);          /* same host: counts */
	assert_int_equal(lock(t, &alice, S, 30, 1), LOCKS_NOLOCKS);
	assert_int_equal(lock(t, &alice, S, 1, 1), LOCKS_OK);          /* merges: no new record */
	assert_int_equal(lock(t, &alice, X, 5, 1), LOCKS_NOLOCKS);
	assert_int_equal(unlock(t, &alice, 10, 1), LOCKS_OK);
	assert_int_equal(lock(t, &alice, X, 0, 100), LOCKS_DENIED);    /* dave's */
	assert_int_equal(lock(t, &alice, X, 0, 20), LOCKS_OK);         /* covers both of its own */
	assert_int_equal(unlock(t, &alice, 5, 1), LOCKS_OK);           /* split: 3 records */
	assert_int_equal(unlock(t, &alice, 8, 1), LOCKS_NOLOCKS);      /* a 4th: refused */
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice X 0+5\n"
					"7:1001 alpha/1/oh-alice X 6+14\n"
					"7:1001 alpha/4/oh-dave S 20+1\n");
	assert_int_equal(unlock(t, &alice, 6, 1), LOCKS_OK);           /* a trim is fine */
	assert_int_equal(locks_host_locks(t, "alpha"), 3);

	/* hosts */
	assert_int_equal(lock(t, &bob, S, 50, 1), LOCKS_OK);
	assert_int_equal(lock(t, &carol, S, 60, 1), LOCKS_NOLOCKS);
	assert_int_equal(test(t, &carol, X, 0, 0, NULL), LOCKS_DENIED); /* TEST needs no room */

	/* waiters per object */
	assert_int_equal(wait_for(t, &bob, X, 0, 1, &c), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &bob, X, 20, 1, &c), LOCKS_BLOCKED);
	assert_int_equal(wait_for(t, &bob, X, 0, 0, &c), LOCKS_NOLOCKS);
	r = rq_on(EXPORT, FILE_B, &bob, X, 0, 1, true);
	assert_int_equal(locks_lock(t, &r, &c, NULL, &ev), LOCKS_OK);  /* other object */
	assert_null(ev);

	/* a host gone makes room for another */
	locks_release_host(t, "beta", &ev);
	assert_int_equal(count_events(ev, LOCKS_EV_DROPPED), 2);
	locks_events_free(ev);
	ev = NULL;
	assert_int_equal(lock(t, &carol, S, 60, 1), LOCKS_OK);
	locks_table_free(t);
}

static void test_waiter_denied_when_its_host_is_full(void **state)
{
	struct locks_table *t = table(1, 10, 10);
	struct locks_request r = rq(&alice, X, 0, 0);
	struct locks_event *ev = NULL;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, X, 0, 0), LOCKS_OK);
	assert_int_equal(wait_for(t, &bob, X, 0, 1, &c), LOCKS_BLOCKED);
	struct locks_request other = rq_on(EXPORT, FILE_B, &bob, S, 0, 1, false);
	assert_int_equal(locks_lock(t, &other, NULL, NULL, &ev), LOCKS_OK);
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_int_equal(ev->le_kind, LOCKS_EV_DENIED);
	assert_int_equal(ev->le_why, LOCKS_NOLOCKS);
	assert_ptr_equal(ev->le_cookie, &c);
	locks_events_free(ev);
	struct locks_counts cnt;
	locks_counts(t, &cnt);
	assert_int_equal(cnt.lc_waiters, 0);
	assert_int_equal(cnt.lc_locks, 1);
	locks_table_free(t);
}

static void test_invalid_requests(void **state)
{
	struct locks_table *t = NULL;
	struct locks_limits zero = { 0, 1, 1 };
	struct who empty = { "", 1, "x" };
	static char longhost[LOCKS_HOST_MAX + 2];
	static char maxhost[LOCKS_HOST_MAX + 1];
	static uint8_t oh[LOCKS_OH_MAX + 1];
	struct locks_request r;
	struct locks_holder h;

	(void)state;
	assert_int_equal(locks_table_create(&zero, &t), LOCKS_INVAL);
	assert_int_equal(locks_table_create(NULL, &t), LOCKS_OK);
	assert_int_equal(lock(t, &empty, S, 0, 1), LOCKS_INVAL);
	memset(longhost, 'h', LOCKS_HOST_MAX + 1);
	memset(maxhost, 'h', LOCKS_HOST_MAX);
	r = rq(&alice, S, 0, 1);
	r.lq_owner.lw_host = longhost;
	assert_int_equal(locks_lock(t, &r, NULL, NULL, NULL), LOCKS_INVAL);
	r.lq_owner.lw_oh = oh;
	r.lq_owner.lw_ohlen = LOCKS_OH_MAX + 1;
	r.lq_owner.lw_host = maxhost;
	assert_int_equal(locks_lock(t, &r, NULL, NULL, NULL), LOCKS_INVAL);
	/* the largest host key and handle are kept whole */
	memset(oh, 0xab, sizeof(oh));
	r.lq_owner.lw_ohlen = LOCKS_OH_MAX;
	assert_int_equal(locks_lock(t, &r, NULL, NULL, NULL), LOCKS_OK);
	struct locks_request other = rq(&bob, X, 0, 1);
	assert_int_equal(locks_test(t, &other, &h), LOCKS_DENIED);
	assert_string_equal(h.lh_host, maxhost);
	assert_int_equal(h.lh_ohlen, LOCKS_OH_MAX);
	assert_memory_equal(h.lh_oh, oh, LOCKS_OH_MAX);
	r.lq_type = (enum locks_type)7;
	assert_int_equal(locks_lock(t, &r, NULL, NULL, NULL), LOCKS_INVAL);
	assert_string_equal(locks_strerror(LOCKS_NOLOCKS),
			    "lock table limit reached (locks per host, hosts or waiters per file)");
	locks_table_free(t);
}

/* ---- iteration ---- */

static void test_iteration(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_request r = rq_on(9, FILE_B, &bob, X, 5, 0, false);
	struct listing li;

	(void)state;
	assert_int_equal(lock(t, &bob, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(locks_lock(t, &r, NULL, NULL, NULL), LOCKS_OK);
	assert_int_equal(lock(t, &dave, S, 20, 10), LOCKS_OK);
	memset(&li, 0, sizeof(li));
	assert_int_equal(locks_each(t, list_one, &li), 0);
	/* grouped by host, hosts in the order they came */
	assert_string_equal(li.text, "7:1001 beta/2/oh-bob S 0+10\n"
				     "9:1002 beta/2/oh-bob X 5+0\n"
				     "7:1001 alpha/1/oh-alice S 0+10\n"
				     "7:1001 alpha/4/oh-dave S 20+10\n");
	memset(&li, 0, sizeof(li));
	li.stop_after = 2;
	assert_int_equal(locks_each(t, list_one, &li), 42);
	assert_int_equal(li.seen, 2);

	/* waiters: carol for alice's and bob's range, dave for bob's on file B */
	struct locks_request wc = rq_on(EXPORT, FILE_A, &carol, X, 2, 3, true);
	struct locks_request wd = rq_on(9, FILE_B, &dave, S, 6, 0, true);
	memset(&li, 0, sizeof(li));
	assert_int_equal(locks_each_waiter(t, list_one, &li), 0);
	assert_string_equal(li.text, "");
	assert_int_equal(locks_lock(t, &wc, NULL, NULL, NULL), LOCKS_BLOCKED);
	assert_int_equal(locks_lock(t, &wd, NULL, NULL, NULL), LOCKS_BLOCKED);
	memset(&li, 0, sizeof(li));
	assert_int_equal(locks_each_waiter(t, list_one, &li), 0);
	/* grouped by host, hosts in the order they came: alpha (alice's) before gamma */
	assert_string_equal(li.text, "9:1002 alpha/4/oh-dave S 6+0\n"
				     "7:1001 gamma/3/oh-carol X 2+3\n");
	memset(&li, 0, sizeof(li));
	li.stop_after = 1;
	assert_int_equal(locks_each_waiter(t, list_one, &li), 42);
	assert_int_equal(li.seen, 1);
	memset(&li, 0, sizeof(li));
	assert_int_equal(locks_each(t, list_one, &li), 0);
	assert_int_equal(li.seen, 4);
	assert_int_equal(locks_cancel(t, &wc, &(void *){ NULL }), LOCKS_OK);
	assert_int_equal(locks_cancel(t, &wd, &(void *){ NULL }), LOCKS_OK);
	struct locks_counts c;
	locks_counts(t, &c);
	assert_int_equal(c.lc_locks, 4);
	assert_int_equal(c.lc_hosts, 2);
	assert_int_equal(c.lc_objects, 2);
	assert_int_equal(locks_host_locks(t, "beta"), 2);
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	assert_int_equal(locks_host_locks(t, "gamma"), 0);
	locks_table_free(t);
}

/* ---- threads ---- */

#define THREADS 4
#define ROUNDS 20000

struct contender {
	struct locks_table *t;
	int id;
	int *inside;               /* threads holding the exclusive lock now: never above 1 */
	int wins;
};

static void *contend(void *arg)
{
	struct contender *c = arg;
	char host[16], oh[16];
	struct who me = { host, c->id, oh };

	snprintf(host, sizeof(host), "host%d", c->id % 2);
	snprintf(oh, sizeof(oh), "oh%d", c->id);
	for (int i = 0; i < ROUNDS; i++) {
		struct locks_request r = rq(&me, i % 3 == 0 ? S : X, 0, 0);
		struct locks_event *ev = NULL;
		enum locks_status st = locks_lock(c->t, &r, NULL, NULL, &ev);

		if (st != LOCKS_OK) {
			if (st != LOCKS_DENIED)
				return "unexpected status";
			continue;
		}
		if (r.lq_type == X) {
			if (__atomic_add_fetch(c->inside, 1, __ATOMIC_SEQ_CST) != 1)
				return "two exclusive holders";
			c->wins++;
			__atomic_sub_fetch(c->inside, 1, __ATOMIC_SEQ_CST);
		}
		if (locks_unlock(c->t, &r, &ev) != LOCKS_OK || ev != NULL)
			return "unlock failed";
	}
	return NULL;
}

static void test_threads_exclude_each_other(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct contender c[THREADS];
	pthread_t th[THREADS];
	int inside = 0, wins = 0;
	struct locks_counts cnt;

	(void)state;
	for (int i = 0; i < THREADS; i++) {
		c[i] = (struct contender){ t, i, &inside, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, contend, &c[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		void *err;

		assert_int_equal(pthread_join(th[i], &err), 0);
		if (err != NULL)
			fail_msg("thread %d: %s", i, (const char *)err);
		wins += c[i].wins;
	}
	assert_true(wins > 0);
	locks_counts(t, &cnt);
	assert_int_equal(cnt.lc_locks, 0);
	assert_int_equal(cnt.lc_hosts, 0);
	assert_int_equal(cnt.lc_objects, 0);
	locks_table_free(t);
}

/* ---- allocation failures ---- */

/* The build links this test with --wrap=malloc,calloc: the table's allocations come here. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);

static int alloc_countdown;        /* n > 0: the n-th allocation from now fails */
static int alloc_denied_grants;     /* waiters denied for want of memory */

static bool alloc_fails(void)
{
	return alloc_countdown > 0 && --alloc_countdown == 0;
}

void *__wrap_malloc(size_t size)
{
	return alloc_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

/* The listing, taken with allocations working. */
static char *listing_unarmed(struct locks_table *t, char *copy)
{
	int armed = alloc_countdown;

	alloc_countdown = 0;
	strcpy(copy, listing(t));
	alloc_countdown = armed;
	return copy;
}

/*
 * One step of the script: with allocations working it returns want; with one failing, either
 * that, or LOCKS_NOMEM having changed nothing (and the script stops there).
 */
static bool alloc_step(struct locks_table *t, enum locks_status got, enum locks_status want,
		       const char *before)
{
	static char after[4096];

	if (got == LOCKS_NOMEM) {
		assert_string_equal(listing_unarmed(t, after), before);
		return false;
	}
	assert_int_equal(got, want);
	return true;
}

/* Runs the script with the k-th allocation failing; true if no allocation failed. */
static bool alloc_script(int k)
{
	static char before[4096];
	struct locks_table *t = NULL;
	struct locks_request r;
	struct locks_event *ev = NULL;
	struct locks_counts cnt;
	bool whole = false;
	int c;

	alloc_countdown = k;
	if (locks_table_create(NULL, &t) == LOCKS_NOMEM) {
		alloc_countdown = 0;
		return false;
	}
	r = rq(&alice, S, 0, 100);
	listing_unarmed(t, before);
	if (!alloc_step(t, locks_lock(t, &r, NULL, NULL, &ev), LOCKS_OK, before))
		goto leave;
	r = rq(&alice, X, 20, 10);                     /* splits alice's shared lock */
	listing_unarmed(t, before);
	if (!alloc_step(t, locks_lock(t, &r, NULL, NULL, &ev), LOCKS_OK, before))
		goto leave;
	r = rq_on(EXPORT, FILE_A, &bob, X, 50, 1, true);
	listing_unarmed(t, before);
	if (!alloc_step(t, locks_lock(t, &r, &c, NULL, &ev), LOCKS_BLOCKED, before))
		goto leave;
	r = rq(&alice, S, 40, 5);                      /* splits again */
	listing_unarmed(t, before);
	if (!alloc_step(t, locks_unlock(t, &r, &ev), LOCKS_OK, before))
		goto leave;
	r = rq(&alice, S, 0, 0);                       /* bob's turn: a grant needs a record */
	assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
	assert_non_null(ev);
	assert_ptr_equal(ev->le_cookie, &c);
	if (ev->le_kind == LOCKS_EV_DENIED) {
		assert_int_equal(ev->le_why, LOCKS_NOMEM);
		alloc_denied_grants++;
	}
	else
		assert_int_equal(ev->le_kind, LOCKS_EV_GRANTED);
	whole = alloc_countdown > 0;
leave:
	alloc_countdown = 0;
	locks_events_free(ev);
	ev = NULL;
	locks_release_all(t, &ev);
	locks_events_free(ev);
	locks_counts(t, &cnt);
	assert_int_equal(cnt.lc_locks + cnt.lc_waiters + cnt.lc_hosts + cnt.lc_objects, 0);
	locks_table_free(t);
	return whole;
}

static void test_ungrant_splits_without_memory(void **state)
{
	struct locks_table *t = table(100, 10, 10);
	struct locks_event *ev = NULL;
	uint64_t g;
	int c;

	(void)state;
	assert_int_equal(lock(t, &alice, S, 0, 10), LOCKS_OK);
	assert_int_equal(lock(t, &alice, S, 30, 10), LOCKS_OK);
	assert_int_equal(lock(t, &bob, X, 10, 20), LOCKS_OK);
	assert_int_equal(wait_for(t, &alice, S, 10, 20, &c), LOCKS_BLOCKED);
	g = bob_goes_alice_granted(t, &c);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+40\n");
	alloc_countdown = 1;
	assert_int_equal(locks_ungrant(t, g, &ev), LOCKS_OK);
	assert_int_equal(alloc_countdown, 1);                  /* nothing was allocated */
	alloc_countdown = 0;
	assert_null(ev);
	assert_string_equal(listing(t), "7:1001 alpha/1/oh-alice S 0+10\n"
					"7:1001 alpha/1/oh-alice S 30+10\n");
	assert_int_equal(locks_host_locks(t, "alpha"), 2);
	locks_table_free(t);
}

static void test_allocation_failures(void **state)
{
	int k = 1;

	(void)state;
	while (!alloc_script(k))
		k++;
	assert_true(k > 10);           /* the script allocates that often: each failure was seen */
	/* the grant's three allocations: its undo record, the spare for the undo, the lock */
	assert_int_equal(alloc_denied_grants, 3);
}

/* ---- random operations against a byte map ---- */

#define CELLS 65                   /* bytes 0..63, and cell 64 for [64, end of file) */
#define OWNERS 3
#define MAX_QUEUED 64
#define MAX_GRANTS 64

static const struct who model_owner[OWNERS] = {
	{ "alpha", 1, "oh-1" }, { "alpha", 2, "oh-2" }, { "beta", 1, "oh-1" },
};

struct queued {
	int owner;
	int type;
	uint64_t offset;
	uint64_t len;
	void *cookie;              /* a slot of cookie_pool: stays put while the queue moves */
};

static int cookie_pool[4096];

/* A grant not settled yet: what its owner held on its range just before it. */
struct pending {
	uint64_t id;
	int owner;
	int first, last;           /* cells */
	uint8_t before[CELLS];
	bool changed;              /* the owner changed its locks on the range since */
};

struct model {
	uint8_t held[OWNERS][CELLS];   /* 0, 1 + S, 1 + X */
	struct queued q[MAX_QUEUED];
	int nq;
	int next_cookie;
	struct pending g[MAX_GRANTS];
	int ng;
};

static void cells_of(uint64_t offset, uint64_t len, int *first, int *last)
{
	*first = (int)offset;
	*last = len == 0 ? CELLS - 1 : (int)(offset + len - 1);
}

/* The lowest cell where owner o's request conflicts, or -1. */
static int model_conflict(const struct model *m, int o, int type, uint64_t offset, uint64_t len)
{
	int first, last;

	cells_of(offset, len, &first, &last);
	for (int c = first; c <= last; c++)
		for (int q = 0; q < OWNERS; q++)
			if (q != o && m->held[q][c] != 0 && (type == X || m->held[q][c] == 1 + X))
				return c;
	return -1;
}

/* Owner o changes its locks on the range: its grants there cannot be undone blindly. */
static void model_grants_changed(struct model *m, int o, uint64_t offset, uint64_t len)
{
	int first, last;

	cells_of(offset, len, &first, &last);
	for (int i = 0; i < m->ng; i++)
		if (m->g[i].owner == o && m->g[i].first <= last && first <= m->g[i].last)
			m->g[i].changed = true;
}

static bool model_holds_any(const struct model *m, int o, uint64_t offset, uint64_t len)
{
	int first, last;

	cells_of(offset, len, &first, &last);
	for (int c = first; c <= last; c++)
		if (m->held[o][c] != 0)
			return true;
	return false;
}

static void model_set(struct model *m, int o, int value, uint64_t offset, uint64_t len)
{
	int first, last;

	cells_of(offset, len, &first, &last);
	for (int c = first; c <= last; c++)
		m->held[o][c] = (uint8_t)value;
}

/* The run of owner o's lock type around cell c, as (offset, len) in the table's terms. */
static void model_run(const struct model *m, int o, int c, uint64_t *offset, uint64_t *len)
{
	int a = c, b = c;

	while (a > 0 && m->held[o][a - 1] == m->held[o][c])
		a--;
	while (b < CELLS - 1 && m->held[o][b + 1] == m->held[o][c])
		b++;
	*offset = (uint64_t)a;
	*len = b == CELLS - 1 ? 0 : (uint64_t)(b - a + 1);
}

static int owner_index(const char *host, int32_t svid)
{
	for (int o = 0; o < OWNERS; o++)
		if (strcmp(model_owner[o].host, host) == 0 && model_owner[o].svid == svid)
			return o;
	fail_msg("unknown owner %s/%d", host, svid);
	return -1;
}

static void model_events(struct locks_table *t, struct model *m, struct locks_event *ev);

/*
 * Undoes a grant in the model: the owner's cells on its range as they were before, except an
 * exclusive run that another owner now shares, which comes back shared.
 */
static void model_ungrant(struct model *m, const struct pending *p)
{
	for (int a = p->first, b; a <= p->last; a = b + 1) {
		uint8_t value = p->before[a];
		bool shared_since = false;

		for (b = a; b < p->last && p->before[b + 1] == value; b++)
			;
		for (int c = a; c <= b; c++)
			for (int q = 0; q < OWNERS; q++)
				shared_since |= q != p->owner && m->held[q][c] != 0;
		if (value == 1 + X && shared_since)
			value = 1 + S;
		for (int c = a; c <= b; c++)
			m->held[p->owner][c] = value;
	}
}

static int undone[2];             /* grants undone: [0] restored, [1] left (owner changed) */

/* Keeps or undoes a random pending grant. */
static void random_settle(struct locks_table *t, struct model *m, unsigned *seed)
{
	int i = rand_r(seed) % m->ng;
	struct pending p = m->g[i];
	struct locks_event *ev = NULL;

	m->g[i] = m->g[--m->ng];
	if (rand_r(seed) % 3 == 0) {
		locks_grant_keep(t, p.id);
		return;
	}
	if (p.changed) {
		assert_int_equal(locks_ungrant(t, p.id, &ev), LOCKS_CHANGED);
		assert_null(ev);
		undone[1]++;
		return;
	}
	assert_int_equal(locks_ungrant(t, p.id, &ev), LOCKS_OK);
	undone[0]++;
	model_ungrant(m, &p);
	model_events(t, m, ev);
}

/* Owners released: their grants go with them. */
static void model_drop_grants(struct model *m, int o, bool host)
{
	for (int i = 0; i < m->ng;) {
		int p = m->g[i].owner;

		if (p == o || (host && strcmp(model_owner[p].host, model_owner[o].host) == 0))
			m->g[i] = m->g[--m->ng];
		else
			i++;
	}
}

/* The table's lock list must be the model's maximal runs, exactly. */
struct expect {
	const struct model *m;
	uint8_t seen[OWNERS][CELLS];
	int records[OWNERS];
};

static int check_one(const struct locks_object *ob, const struct locks_holder *h, void *arg)
{
	struct expect *e = arg;
	int o = owner_index(h->lh_host, h->lh_svid);
	int first, last;
	uint64_t run_off, run_len;

	assert_int_equal(ob->lo_fileid, FILE_A);
	cells_of(h->lh_offset, h->lh_len, &first, &last);
	assert_true(h->lh_len == 0 || last < CELLS - 1);
	model_run(e->m, o, first, &run_off, &run_len);
	assert_int_equal(e->m->held[o][first], 1 + h->lh_type);
	assert_int_equal(run_off, h->lh_offset);
	assert_int_equal(run_len, h->lh_len);
	for (int c = first; c <= last; c++) {
		assert_int_equal(e->seen[o][c], 0);
		e->seen[o][c] = 1;
	}
	e->records[o]++;
	return 0;
}

static void model_check(struct locks_table *t, const struct model *m)
{
	struct expect e;
	struct locks_object ob = { EXPORT, FILE_A };
	size_t held = 0;

	memset(&e, 0, sizeof(e));
	e.m = m;
	assert_int_equal(locks_each(t, check_one, &e), 0);
	for (int o = 0; o < OWNERS; o++)
		for (int c = 0; c < CELLS; c++) {
			assert_int_equal(e.seen[o][c], m->held[o][c] != 0);
			held += m->held[o][c] != 0 && (c == 0 || m->held[o][c - 1] != m->held[o][c]);
		}
	assert_int_equal(locks_host_locks(t, "alpha") + locks_host_locks(t, "beta"), held);
	assert_int_equal(locks_object_waiters(t, &ob), (size_t)m->nq);
	assert_int_equal(locks_grants(t), (size_t)m->ng);
	/* every waiter still queued is blocked by a holder */
	for (int i = 0; i < m->nq; i++)
		assert_true(model_conflict(m, m->q[i].owner, m->q[i].type, m->q[i].offset,
					   m->q[i].len) >= 0);
}

static int queued_find_cookie(const struct model *m, const void *cookie)
{
	for (int i = 0; i < m->nq; i++)
		if (m->q[i].cookie == cookie)
			return i;
	fail_msg("an event for no queued request");
	return -1;
}

/* Remembers a grant the table made, before the model applies it. */
static void model_grant(struct locks_table *t, struct model *m, struct queued q, uint64_t id)
{
	struct pending *p;

	model_grants_changed(m, q.owner, q.offset, q.len);
	if (m->ng == MAX_GRANTS) {
		locks_grant_keep(t, id);
		return;
	}
	p = &m->g[m->ng++];
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->owner = q.owner;
	cells_of(q.offset, q.len, &p->first, &p->last);
	memcpy(p->before, m->held[q.owner], CELLS);
}

/* Applies the table's events to the model, checking each grant was due. */
static void model_events(struct locks_table *t, struct model *m, struct locks_event *ev)
{
	for (struct locks_event *e = ev; e != NULL; e = e->le_next) {
		int i = queued_find_cookie(m, e->le_cookie);
		struct queued q = m->q[i];

		assert_int_equal(owner_index(e->le_owner.lw_host, e->le_owner.lw_svid), q.owner);
		assert_int_equal(e->le_offset, q.offset);
		assert_int_equal(e->le_len, q.len);
		if (e->le_kind == LOCKS_EV_GRANTED) {
			assert_int_equal(model_conflict(m, q.owner, q.type, q.offset, q.len), -1);
			model_grant(t, m, q, e->le_grant);
			model_set(m, q.owner, 1 + q.type, q.offset, q.len);
		} else {
			assert_int_equal(e->le_kind, LOCKS_EV_DROPPED);
		}
		m->q[i] = m->q[m->nq - 1];
		m->nq--;
	}
	locks_events_free(ev);
}

static void random_op(struct locks_table *t, struct model *m, unsigned *seed)
{
	int o = rand_r(seed) % OWNERS;
	int type = rand_r(seed) % 2 ? X : S;
	uint64_t offset = (uint64_t)(rand_r(seed) % (CELLS - 1));
	uint64_t len = rand_r(seed) % 8 == 0 ? 0 : 1 + (uint64_t)(rand_r(seed) % (CELLS - 1 - offset));
	struct locks_request r = rq(&model_owner[o], type, offset, len);
	struct locks_event *ev = NULL;
	struct locks_holder h;
	int op = rand_r(seed) % 100;
	int blocked_at = model_conflict(m, o, type, offset, len);

	if (op < 30) {                                 /* TEST */
		assert_int_equal(locks_test(t, &r, &h), blocked_at < 0 ? LOCKS_OK : LOCKS_DENIED);
		if (blocked_at >= 0) {
			int q = owner_index(h.lh_host, h.lh_svid);
			uint64_t run_off, run_len;
			int first, last;

			assert_true(q != o);
			cells_of(h.lh_offset, h.lh_len, &first, &last);
			assert_true(first <= blocked_at && blocked_at <= last);
			assert_int_equal(m->held[q][blocked_at], 1 + h.lh_type);
			model_run(m, q, blocked_at, &run_off, &run_len);
			assert_int_equal(run_off, h.lh_offset);
			assert_int_equal(run_len, h.lh_len);
			/* lowest offset among the conflicting holders at that byte */
			for (int p = 0; p < OWNERS; p++)
				if (p != o && m->held[p][blocked_at] != 0 &&
				    (type == X || m->held[p][blocked_at] == 1 + X)) {
					model_run(m, p, blocked_at, &run_off, &run_len);
					assert_true(h.lh_offset <= run_off);
				}
		}
	} else if (op < 60) {                          /* LOCK, sometimes blocking */
		bool block = rand_r(seed) % 2 && m->nq < MAX_QUEUED;
		void *cookie = &cookie_pool[m->next_cookie];
		bool queued_same = false;
		enum locks_status st;

		for (int i = 0; i < m->nq; i++)
			queued_same |= m->q[i].owner == o && m->q[i].type == type &&
				       m->q[i].offset == offset && m->q[i].len == len;
		r.lq_block = block;
		st = locks_lock(t, &r, cookie, NULL, &ev);
		if (blocked_at < 0) {
			assert_int_equal(st, LOCKS_OK);
			model_grants_changed(m, o, offset, len);
			model_set(m, o, 1 + type, offset, len);
		} else if (!block) {
			assert_int_equal(st, LOCKS_DENIED);
		} else if (queued_same) {
			assert_int_equal(st, LOCKS_ALREADY_BLOCKED);
		} else {
			assert_int_equal(st, LOCKS_BLOCKED);
			m->q[m->nq++] = (struct queued){ o, type, offset, len, cookie };
			m->next_cookie++;
		}
		model_events(t, m, ev);
	} else if (op < 82) {                          /* UNLOCK */
		assert_int_equal(locks_unlock(t, &r, &ev), LOCKS_OK);
		if (model_holds_any(m, o, offset, len))
			model_grants_changed(m, o, offset, len);
		model_set(m, o, 0, offset, len);
		model_events(t, m, ev);
	} else if (op < 90 && m->ng > 0) {             /* GRANTED_RES, or the callback failed */
		random_settle(t, m, seed);
	} else if (op < 96 && m->nq > 0) {             /* CANCEL */
		int i = rand_r(seed) % m->nq;
		void *cookie = NULL;

		r = rq(&model_owner[m->q[i].owner], m->q[i].type, m->q[i].offset, m->q[i].len);
		assert_int_equal(locks_cancel(t, &r, &cookie), LOCKS_OK);
		assert_ptr_equal(cookie, m->q[i].cookie);
		m->q[i] = m->q[m->nq - 1];
		m->nq--;
	} else {                                       /* the owner, or its whole host, goes */
		bool host = rand_r(seed) % 2;
		const char *name = model_owner[o].host;

		if (host)
			locks_release_host(t, name, &ev);
		else
			locks_release_owner(t, &r.lq_owner, &ev);
		for (int p = 0; p < OWNERS; p++)
			if (p == o || (host && strcmp(model_owner[p].host, name) == 0))
				model_set(m, p, 0, 0, 0);
		model_drop_grants(m, o, host);
		for (struct locks_event *e = ev; e != NULL; e = e->le_next) {
			int p = owner_index(e->le_owner.lw_host, e->le_owner.lw_svid);

			if (e->le_kind == LOCKS_EV_DROPPED)
				assert_true(p == o || (host && strcmp(model_owner[p].host, name) == 0));
		}
		model_events(t, m, ev);
		for (int i = 0; i < m->nq; i++)
			assert_true(m->q[i].owner != o &&
				    !(host && strcmp(model_owner[m->q[i].owner].host, name) == 0));
	}
	model_check(t, m);
}

static void test_random_against_model(void **state)
{
	(void)state;
	for (unsigned run = 0; run < 20; run++) {
		struct locks_table *t = table(1000, 10, MAX_QUEUED);
		static struct model m;
		unsigned seed = 12345 + run;
		struct locks_event *ev = NULL;

		memset(&m, 0, sizeof(m));
		for (int i = 0; i < 2000; i++)
			random_op(t, &m, &seed);
		locks_release_all(t, &ev);
		assert_int_equal(count_events(ev, LOCKS_EV_DROPPED), m.nq);
		locks_events_free(ev);
		locks_table_free(t);
	}
	assert_true(undone[0] > 50 && undone[1] > 50);   /* both ways were tried (115, 105) */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conflict_matrix),
		cmocka_unit_test(test_exports_never_conflict),
		cmocka_unit_test(test_split_on_partial_unlock),
		cmocka_unit_test(test_merge_adjacent_and_overlapping),
		cmocka_unit_test(test_upgrade_downgrade),
		cmocka_unit_test(test_length_zero_and_offsets_near_2_64),
		cmocka_unit_test(test_release_owner_host_all),
		cmocka_unit_test(test_waiters_granted_in_order),
		cmocka_unit_test(test_waiter_needs_every_blocker_gone),
		cmocka_unit_test(test_downgrade_lets_waiters_in),
		cmocka_unit_test(test_ungrant_restores_upgraded_lock),
		cmocka_unit_test(test_ungrant_of_a_fresh_lock),
		cmocka_unit_test(test_ungrant_splits_without_memory),
		cmocka_unit_test(test_ungrant_of_a_downgrade_shared_meanwhile),
		cmocka_unit_test(test_ungrant_after_the_owner_changed_its_locks),
		cmocka_unit_test(test_grant_released_with_its_owner),
		cmocka_unit_test(test_kept_records_count_against_the_limit),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_events_null),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_waiter_denied_when_its_host_is_full),
		cmocka_unit_test(test_invalid_requests),
		cmocka_unit_test(test_iteration),
		cmocka_unit_test(test_threads_exclude_each_other),
		cmocka_unit_test(test_allocation_failures),
		cmocka_unit_test(test_random_against_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
