/*
 * The control commands' lock reports (src/ctl/control.c, metrics.c): `locks` lists held
 * locks and waiters by client and file, `stats` and /metrics carry the lock table's counts,
 * and a server without a lock manager says so. The table is filled directly (NLM is not
 * involved); tests/integration/test_ctl.c takes locks through NLM calls.
 */
#include <ev.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "control.h"
#include "nlm_locks.h"
#include "../../src/ctl/metrics.h"

struct fixture {
	char dir[64];
	struct ev_loop *loop;
	struct config cf;
	struct locks_table *locks;
	struct control *ctl;
};

static uint64_t callbacks_pending;   /* what the fake NLM service reports */

static uint64_t lock_callbacks(void *arg)
{
	assert_ptr_equal(arg, &callbacks_pending);
	return callbacks_pending;
}

static struct control *open_control(struct fixture *f, struct locks_table *locks)
{
	struct control_env env = { .ce_cfg = &f->cf, .ce_locks = locks };

	if (locks != NULL) {
		env.ce_lock_callbacks = lock_callbacks;
		env.ce_lock_callbacks_arg = &callbacks_pending;
	}
	char err[256];

	if (control_open(f->loop, &env, &f->ctl, err, sizeof(err)) != 0)
		fail_msg("control_open: %s", err);
	return f->ctl;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_control.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->cf.cf_state_dir = f->dir;
	f->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(f->loop);
	assert_int_equal(locks_table_create(NULL, &f->locks), LOCKS_OK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	control_close(f->ctl);
	locks_table_free(f->locks);
	ev_loop_destroy(f->loop);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void take(struct locks_table *t, const char *host, int32_t svid, enum locks_type type,
		 uint64_t offset, uint64_t len, bool block, enum locks_status want)
{
	struct locks_request rq = {
		.lq_object = { .lo_export = 7, .lo_fileid = 4242 },
		.lq_owner = { .lw_host = host, .lw_svid = svid, .lw_oh = "oh", .lw_ohlen = 2 },
		.lq_type = type, .lq_offset = offset, .lq_len = len, .lq_block = block,
	};
	struct locks_event *ev = NULL;

	assert_int_equal(locks_lock(t, &rq, (void *)1, NULL, &ev), want);
	locks_events_free(ev);
}

/* The line of the listing that has every one of the words given, in order. */
static void assert_line(const char *text, const char *const words[], size_t n)
{
	const char *line = text;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n'), *p = line;
		size_t i;

		for (i = 0; i < n; i++) {
			p = strstr(p, words[i]);
			if (p == NULL || (end != NULL && p > end))
				break;
			p += strlen(words[i]);
		}
		if (i == n)
			return;
		line = end ? end + 1 : NULL;
	}
	fail_msg("no line with %s ... %s in:\n%s", words[0], words[n - 1], text);
}

static void test_locks_lists_held_and_waiting(void **state)
{
	struct fixture *f = *state;
	struct control *ctl = open_control(f, f->locks);
	char *out;

	take(f->locks, "192.0.2.1", 11, LOCKS_EXCLUSIVE, 100, 0, false, LOCKS_OK);
	take(f->locks, "192.0.2.1", 12, LOCKS_SHARED, 0, 50, false, LOCKS_OK);
	take(f->locks, "198.51.100.9", 31, LOCKS_SHARED, 120, 10, true, LOCKS_BLOCKED);
	out = control_answer(ctl, "locks");
	assert_non_null(out);
	assert_non_null(strstr(out, "locks held 2, waiters 1, clients with locks or waiting 2, "
				    "files locked 1\n"));
	assert_line(out, (const char *const[]){ "192.0.2.1", "view#7", "4242", "11", "exclusive",
						"100", "to EOF", "held" }, 8);
	assert_line(out, (const char *const[]){ "192.0.2.1", "view#7", "4242", "12", "shared",
						"0", "50", "held" }, 8);
	assert_line(out, (const char *const[]){ "198.51.100.9", "view#7", "4242", "31", "shared",
						"120", "10", "waiting" }, 8);
	assert_non_null(strstr(out, "-inum FILEID"));
	free(out);

	out = control_answer(ctl, "stats");
	assert_non_null(out);
	assert_non_null(strstr(out, "locks held 2, waiters 1,"));
	assert_non_null(strstr(out, "\nlock callbacks pending 0 "));
	free(out);
	callbacks_pending = 3;
	out = control_answer(ctl, "stats");
	assert_non_null(strstr(out, "\nlock callbacks pending 3 "));
	free(out);
	callbacks_pending = 0;
	locks_release_all(f->locks, NULL);
}

/* A host key that is not plain text, or very long, cannot break the listing's lines. */
static void test_locks_host_shown_safely(void **state)
{
	struct fixture *f = *state;
	struct control *ctl = open_control(f, f->locks);
	char host[300], *out;

	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	host[3] = '\n';
	take(f->locks, host, 1, LOCKS_SHARED, 0, 1, false, LOCKS_OK);
	out = control_answer(ctl, "locks");
	assert_non_null(out);
	assert_non_null(strstr(out, "\nhhh?hhh"));
	assert_null(strstr(out, "\nhhhhhhh"));
	assert_non_null(strstr(out, "h... view#7"));
	free(out);
	locks_release_all(f->locks, NULL);
}

/* A long list stops at CTL_LOCKS_LIST lines and says how many more there are. */
static void test_locks_list_bounded(void **state)
{
	struct fixture *f = *state;
	struct control *ctl = open_control(f, f->locks);
	unsigned lines = 0;
	char *out, *p;

	for (uint64_t i = 0; i < 1003; i++)
		take(f->locks, "192.0.2.1", 5, LOCKS_SHARED, 2 * i, 1, false, LOCKS_OK);
	take(f->locks, "192.0.2.2", 6, LOCKS_EXCLUSIVE, 0, 0, true, LOCKS_BLOCKED);
	out = control_answer(ctl, "locks");
	assert_non_null(out);
	for (p = out; (p = strstr(p, " held\n")) != NULL; p++)
		lines++;
	assert_int_equal(lines, 1000);
	assert_null(strstr(out, " waiting\n"));
	assert_non_null(strstr(out, "locks held 1003, waiters 1,"));
	assert_non_null(strstr(out, "(only the first 1000 are listed; about 4 more)\n"));
	free(out);
	locks_release_all(f->locks, NULL);
}

static void test_no_lock_manager(void **state)
{
	struct fixture *f = *state;
	struct control *ctl = open_control(f, NULL);
	char *out;

	out = control_answer(ctl, "locks");
	assert_non_null(out);
	assert_string_equal(out, "error: this server serves no file locking (started with "
				 "--nlm-port off); restart it without that option to serve NLM\n");
	free(out);
	out = control_answer(ctl, "stats");
	assert_non_null(out);
	assert_null(strstr(out, "locks held"));
	assert_null(strstr(out, "lock callbacks"));
	free(out);
	out = control_answer(ctl, "help");
	assert_non_null(strstr(out, "  locks "));
	free(out);
}

static void test_metrics_lock_gauges(void **state)
{
	struct locks_counts lc = { .lc_locks = 5, .lc_waiters = 2, .lc_hosts = 3, .lc_objects = 4 };
	char *out;

	(void)state;
	out = metrics_answer("GET /metrics HTTP/1.0\r\n", 1, 0, &lc, 6);
	assert_non_null(out);
	assert_non_null(strstr(out, "\nunionnfsd_lock_callbacks_pending 6\n"));
	assert_non_null(strstr(out, "# TYPE unionnfsd_locks_held gauge\nunionnfsd_locks_held 5\n"));
	assert_non_null(strstr(out, "\nunionnfsd_lock_waiters 2\n"));
	assert_non_null(strstr(out, "\nunionnfsd_lock_hosts 3\n"));
	assert_non_null(strstr(out, "\nunionnfsd_locked_files 4\n"));
	free(out);
	out = metrics_answer("GET /metrics HTTP/1.0\r\n", 1, 0, NULL, 0);
	assert_non_null(out);
	assert_null(strstr(out, "unionnfsd_locks_held"));
	assert_null(strstr(out, "unionnfsd_lock_callbacks_pending"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_locks_lists_held_and_waiting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_host_shown_safely, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locks_list_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_lock_manager, setup, teardown),
		cmocka_unit_test(test_metrics_lock_gauges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
