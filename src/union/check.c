/*
 * union_check (union.h): every record of the inode map resolved as a client's call would
 * resolve it. The map is read in one pass (one read transaction, one cursor) into a list
 * of inos; the list is then resolved by a few threads of their own, each taking chunks of
 * it in turn.
 *
 * Why threads of its own and not the worker pool: union sits below the transport and does
 * not reach its pool, and the pool has no notion of a lower-priority job: a chunk of a
 * check would hold a worker slot a client call waits for. The check threads run at a
 * lower CPU priority (nice), so with every core busy the client calls on the workers are
 * served first and the check takes what is left.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "uint.h"

#define UCHECK_CHUNK 32            /* records a thread takes at once; progress after each */
#define UCHECK_NICE 10             /* how much a check thread yields to client calls */
#define UCHECK_MAX_THREADS 64

struct ucheck_list {
	uint64_t *ul_inos;
	size_t ul_n, ul_cap;
};

struct ucheck {
	struct union_export *uk_ux;
	const struct union_check_sink *uk_sink;
	bool uk_repair;
	const struct ucheck_list *uk_list;
	atomic_size_t uk_next;           /* first record no thread has taken yet */
	atomic_bool uk_stop;
	pthread_mutex_t uk_lock;         /* the counts and the sink's calls */
	uint64_t uk_done;
	struct union_check_counts uk_counts;
};

static int ucheck_list_add(uint64_t ino, void *arg)
{
	struct ucheck_list *l = arg;

	if (l->ul_n == l->ul_cap) {
		size_t cap = l->ul_cap ? 2 * l->ul_cap : 4096;
		uint64_t *n = realloc(l->ul_inos, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		l->ul_inos = n;
		l->ul_cap = cap;
	}
	l->ul_inos[l->ul_n++] = ino;
	return 0;
}

/* Every ino of the export, as one read transaction sees the map. */
static int ucheck_list_read(struct union_export *ux, struct ucheck_list *l)
{
	struct store_txn *t;
	int r = store_begin(ux->ux_store, false, &t);

	if (r < 0)
		return r;
	r = store_each_ino(t, ux->ux_id, ucheck_list_add, l);
	store_abort(t);
	return r;
}

/*
 * One record: 0 when it resolves, -ESTALE when no branch has its object any more (1 when
 * repair dropped its record), -ENOLINK for a metacopy whose data no lower branch holds,
 * another -errno when it could not be told.
 */
static int ucheck_one(struct union_export *ux, uint64_t ino, bool repair)
{
	int r = ures_check_record(ux, ino);

	if (r == -ENOENT)
		r = -ESTALE;
	/* 0 from the repair: it resolves again (made again meanwhile), so it is no longer stale. */
	if (r == -ESTALE && repair)
		r = union_forget_stale(ux, ino);
	if (r == 0) {
		r = umc_check(ux, ino);
		if (r == -ESTALE || r == -ENOENT)
			r = 0; /* removed since it resolved: nothing to report */
	}
	return r;
}

/* What a chunk found, into the totals; the sink hears of it under the lock. */
static void ucheck_account(struct ucheck *k, const uint64_t *inos, const int *res, size_t n)
{
	const struct union_check_sink *s = k->uk_sink;
	bool go = true;

	pthread_mutex_lock(&k->uk_lock);
	for (size_t i = 0; i < n; i++) {
		if (res[i] == 0)
			continue;
		if (res[i] == -ESTALE || res[i] > 0)
			k->uk_counts.cnt_stale++;
		else
			k->uk_counts.cnt_errors++;
		if (res[i] > 0)
			k->uk_counts.cnt_dropped++;
		if (s->cs_record)
			s->cs_record(s->cs_arg, inos[i], res[i]);
	}
	k->uk_done += n;
	if (s->cs_progress)
		go = s->cs_progress(s->cs_arg, k->uk_done, k->uk_list->ul_n);
	pthread_mutex_unlock(&k->uk_lock);
	if (!go)
		atomic_store(&k->uk_stop, true);
}

static void ucheck_pause(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	if (us > 0)
		nanosleep(&ts, NULL);
}

static void *ucheck_thread(void *arg)
{
	struct ucheck *k = arg;
	const struct ucheck_list *l = k->uk_list;
	int res[UCHECK_CHUNK];
	size_t first, n;

	for (;;) {
		if (atomic_load(&k->uk_stop))
			break;
		first = atomic_fetch_add(&k->uk_next, UCHECK_CHUNK);
		if (first >= l->ul_n)
			break;
		n = l->ul_n - first < UCHECK_CHUNK ? l->ul_n - first : UCHECK_CHUNK;
		for (size_t i = 0; i < n; i++) {
			res[i] = ucheck_one(k->uk_ux, l->ul_inos[first + i], k->uk_repair);
			ucheck_pause(k->uk_sink->cs_pace_us);
		}
		ucheck_account(k, l->ul_inos + first, res, n);
	}
	return NULL;
}

/* A helper thread of the check, at the check's lower priority; its own result. */
static void *ucheck_helper(void *arg)
{
	/*
	 * Linux: a thread's nice value is its own (setpriority on its thread id). Should it
	 * fail, the thread still works, only at the usual priority.
	 */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), UCHECK_NICE);
	return ucheck_thread(arg);
}

int union_check(struct union_export *ux, const struct union_check_sink *sink, bool repair,
		struct union_check_counts *out)
{
	struct ucheck_list l = { 0 };
	struct ucheck k = { .uk_ux = ux, .uk_sink = sink, .uk_repair = repair, .uk_list = &l };
	pthread_t tids[UCHECK_MAX_THREADS];
	unsigned want = sink->cs_threads, started = 0;
	int r;

	*out = (struct union_check_counts){ 0 };
	r = ucheck_list_read(ux, &l);
	if (r < 0) {
		free(l.ul_inos);
		return r;
	}
	pthread_mutex_init(&k.uk_lock, NULL);
	if (want > UCHECK_MAX_THREADS)
		want = UCHECK_MAX_THREADS;
	if (sink->cs_progress && !sink->cs_progress(sink->cs_arg, 0, l.ul_n))
		atomic_store(&k.uk_stop, true);
	/* Every thread is a helper, the caller only waits: all run at the same priority. */
	for (; started < (want ? want : 1) && (size_t)started * UCHECK_CHUNK < l.ul_n; started++)
		if (pthread_create(&tids[started], NULL, ucheck_helper, &k) != 0)
			break;
	if (started == 0)
		ucheck_thread(&k);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&k.uk_lock);
	k.uk_counts.cnt_records = k.uk_done;
	*out = k.uk_counts;
	free(l.ul_inos);
	return atomic_load(&k.uk_stop) && k.uk_done < l.ul_n ? -ECANCELED : 0;
}
