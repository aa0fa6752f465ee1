/*
 * The worker pool's parking (src/net/workers.c through blocking.h): an item that parks
 * gives its thread back and runs again from the start once woken, whether the wake comes
 * after its run returned or while it still unwinds; the time it spent parked is told to
 * its next run; long work is bounded to the pool's places, the others park in order and
 * get a place as one is given up; and stopping the pool loses no item.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "blocking.h"
#include "../../src/net/workers.h"

#define T_MAX_RUNS 4
#define T_WAIT_S 10

enum t_kind {
	T_PARK_ONCE,          /* parks on t_queue in its first run */
	T_PARK_SELF_WAKE,     /* parks, and wakes its queue before returning */
	T_LONG_HOLD,          /* takes a long-work place and holds it until t_hold drops */
	T_LONG,               /* takes a long-work place, or parks for one */
};

struct t_item {
	struct work ti_work;
	enum t_kind ti_kind;
	int ti_runs;
	bool ti_park_ok;                 /* blocking_park()'s answer in the first run */
	bool ti_long[T_MAX_RUNS];        /* blocking_long_begin()'s answer in each run */
	int ti_granted;                  /* T_LONG: the how-manieth to get a place */
	bool ti_parked[T_MAX_RUNS];      /* blocking_parked() as each run ends */
	uint64_t ti_parked_ns[T_MAX_RUNS];
};

static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t t_cond = PTHREAD_COND_INITIALIZER;
static struct blocking_queue t_queue;    /* under t_lock */
static int t_runs;                       /* runs ended, all items */
static int t_holding;                    /* T_LONG_HOLD items holding their place */
static int t_granted;                    /* T_LONG items that got a place */
static bool t_hold;
static unsigned t_notified;

static void t_notify(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&t_lock);
	t_notified++;
	pthread_cond_broadcast(&t_cond);
	pthread_mutex_unlock(&t_lock);
}

static void t_run(struct work *w)
{
	struct t_item *it = (struct t_item *)(void *)((char *)w - offsetof(struct t_item, ti_work));
	int run = it->ti_runs++;
	struct blocking_queue q;

	it->ti_parked_ns[run] = blocking_parked_ns();
	switch (it->ti_kind) {
	case T_PARK_ONCE:
	case T_PARK_SELF_WAKE:
		if (run > 0)
			break;
		pthread_mutex_lock(&t_lock);
		it->ti_park_ok = blocking_park(&t_queue);
		q = t_queue;
		if (it->ti_kind == T_PARK_SELF_WAKE)
			memset(&t_queue, 0, sizeof(t_queue));
		pthread_mutex_unlock(&t_lock);
		if (it->ti_kind == T_PARK_SELF_WAKE)
			blocking_wake(&q);
		break;
	case T_LONG_HOLD:
		it->ti_long[run] = blocking_long_begin();
		pthread_mutex_lock(&t_lock);
		t_holding++;
		pthread_cond_broadcast(&t_cond);
		while (t_hold)
			pthread_cond_wait(&t_cond, &t_lock);
		t_holding--;
		pthread_mutex_unlock(&t_lock);
		break; /* the place goes back as the run ends */
	case T_LONG:
		it->ti_long[run] = blocking_long_begin();
		if (it->ti_long[run]) {
			pthread_mutex_lock(&t_lock);
			it->ti_granted = ++t_granted;
			pthread_mutex_unlock(&t_lock);
			blocking_long_end();
		}
		break;
	}
	it->ti_parked[run] = blocking_parked();
	pthread_mutex_lock(&t_lock);
	t_runs++;
	pthread_cond_broadcast(&t_cond);
	pthread_mutex_unlock(&t_lock);
}

static void t_item_init(struct t_item *it, enum t_kind kind)
{
	memset(it, 0, sizeof(*it));
	it->ti_kind = kind;
	it->ti_work.wk_run = t_run;
}

static void t_deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += T_WAIT_S;
}

/* Waits (t_lock held) until *count reaches want. */
static void t_wait_count(const int *count, int want)
{
	struct timespec until;

	t_deadline(&until);
	while (*count < want)
		if (pthread_cond_timedwait(&t_cond, &t_lock, &until) != 0)
			fail_msg("waited %d s for %d, have %d", T_WAIT_S, want, *count);
}

static void t_wait_runs(int want)
{
	pthread_mutex_lock(&t_lock);
	t_wait_count(&t_runs, want);
	pthread_mutex_unlock(&t_lock);
}

/* Collects n completed items from the pool. */
static void t_collect(struct workers *wp, int n)
{
	struct timespec until;
	int got = 0;

	t_deadline(&until);
	while (got < n) {
		unsigned seen;

		pthread_mutex_lock(&t_lock);
		seen = t_notified;
		pthread_mutex_unlock(&t_lock);
		for (struct work *w = workers_done(wp); w != NULL; w = w->wk_next)
			got++;
		if (got >= n)
			break;
		pthread_mutex_lock(&t_lock);
		while (t_notified == seen)
			if (pthread_cond_timedwait(&t_cond, &t_lock, &until) != 0)
				fail_msg("%d of %d items never completed", n - got, n);
		pthread_mutex_unlock(&t_lock);
	}
	assert_int_equal(got, n);
}

static int t_setup(void **state)
{
	(void)state;
	memset(&t_queue, 0, sizeof(t_queue));
	t_runs = t_holding = t_granted = 0;
	t_hold = false;
	return 0;
}

static void test_park_then_wake(void **state)
{
	struct workers *wp;
	struct t_item it;
	struct blocking_queue q;

	(void)state;
	assert_int_equal(workers_create(2, t_notify, NULL, &wp), 0);
	t_item_init(&it, T_PARK_ONCE);
	workers_submit(wp, &it.ti_work);
	t_wait_runs(1);
	pthread_mutex_lock(&t_lock);
	q = t_queue;
	memset(&t_queue, 0, sizeof(t_queue));
	pthread_mutex_unlock(&t_lock);
	assert_true(it.ti_park_ok);
	/* Parked, not done: nothing completes until it is woken. */
	assert_null(workers_done(wp));
	blocking_wake(&q);
	t_collect(wp, 1);
	assert_int_equal(it.ti_runs, 2);
	assert_true(it.ti_parked[0]);
	assert_false(it.ti_parked[1]);
	assert_int_equal(it.ti_parked_ns[0], 0);
	assert_true(it.ti_parked_ns[1] > 0);
	assert_true(it.ti_work.wk_ran);
	workers_free(wp);
}

static void test_woken_while_unwinding(void **state)
{
	struct workers *wp;
	struct t_item it;

	(void)state;
	assert_int_equal(workers_create(2, t_notify, NULL, &wp), 0);
	t_item_init(&it, T_PARK_SELF_WAKE);
	workers_submit(wp, &it.ti_work);
	t_collect(wp, 1);
	assert_int_equal(it.ti_runs, 2);
	assert_true(it.ti_park_ok);
	assert_true(it.ti_parked[0]);
	assert_false(it.ti_parked[1]);
	workers_free(wp);
}

/* Off a pool nothing parks and long work always goes ahead. */
static void test_off_pool(void **state)
{
	struct blocking_queue q = { NULL, NULL };

	(void)state;
	assert_false(blocking_park(&q));
	assert_null(q.bq_head);
	assert_false(blocking_parked());
	assert_int_equal(blocking_parked_ns(), 0);
	assert_true(blocking_long_begin());
	blocking_long_end();
}

/* Two threads, so one long-work place: the others wait for it, in order. */
static void test_long_work_bounded(void **state)
{
	struct workers *wp;
	struct t_item hold, a, b;

	(void)state;
	assert_int_equal(workers_create(2, t_notify, NULL, &wp), 0);
	t_item_init(&hold, T_LONG_HOLD);
	t_item_init(&a, T_LONG);
	t_item_init(&b, T_LONG);
	t_hold = true;
	workers_submit(wp, &hold.ti_work);
	pthread_mutex_lock(&t_lock);
	t_wait_count(&t_holding, 1);
	pthread_mutex_unlock(&t_lock);
	workers_submit(wp, &a.ti_work);
	workers_submit(wp, &b.ti_work);
	t_wait_runs(2);
	/* Both found the place taken and parked, holding no thread: the second ran too. */
	assert_int_equal(a.ti_runs, 1);
	assert_int_equal(b.ti_runs, 1);
	assert_false(a.ti_long[0]);
	assert_false(b.ti_long[0]);
	assert_true(a.ti_parked[0] && b.ti_parked[0]);
	assert_null(workers_done(wp));
	pthread_mutex_lock(&t_lock);
	t_hold = false;
	pthread_cond_broadcast(&t_cond);
	pthread_mutex_unlock(&t_lock);
	t_collect(wp, 3);
	assert_true(hold.ti_long[0]);
	assert_int_equal(a.ti_runs, 2);
	assert_int_equal(b.ti_runs, 2);
	assert_true(a.ti_long[1]);
	assert_true(b.ti_long[1]);
	/* In the order they asked, and the time they waited is counted. */
	assert_int_equal(a.ti_granted, 1);
	assert_int_equal(b.ti_granted, 2);
	assert_true(a.ti_parked_ns[1] > 0 && b.ti_parked_ns[1] > 0);
	workers_free(wp);
}

static void *t_stop_main(void *arg)
{
	workers_stop(arg);
	return NULL;
}

/* Stopping while an item waits for a place: every item comes back. */
static void test_stop_loses_nothing(void **state)
{
	struct workers *wp;
	struct t_item hold, a;
	pthread_t stopper;

	(void)state;
	assert_int_equal(workers_create(2, t_notify, NULL, &wp), 0);
	t_item_init(&hold, T_LONG_HOLD);
	t_item_init(&a, T_LONG);
	t_hold = true;
	workers_submit(wp, &hold.ti_work);
	pthread_mutex_lock(&t_lock);
	t_wait_count(&t_holding, 1);
	pthread_mutex_unlock(&t_lock);
	workers_submit(wp, &a.ti_work);
	t_wait_runs(1);
	assert_int_equal(pthread_create(&stopper, NULL, t_stop_main, wp), 0);
	pthread_mutex_lock(&t_lock);
	t_hold = false;
	pthread_cond_broadcast(&t_cond);
	pthread_mutex_unlock(&t_lock);
	pthread_join(stopper, NULL);
	t_collect(wp, 2);
	assert_true(hold.ti_work.wk_ran);
	/* Either it got the place and finished before the stop, or it came back unfinished. */
	assert_true(a.ti_work.wk_ran ? a.ti_runs == 2 && a.ti_long[1] : a.ti_runs == 1);
	workers_free(wp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_park_then_wake, t_setup),
		cmocka_unit_test_setup(test_woken_while_unwinding, t_setup),
		cmocka_unit_test_setup(test_off_pool, t_setup),
		cmocka_unit_test_setup(test_long_work_bounded, t_setup),
		cmocka_unit_test_setup(test_stop_loses_nothing, t_setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
