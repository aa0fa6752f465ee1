/*
 * Copy-ups under a crowd: many WRITEs to lower files at once, pipelined on one libnfs
 * connection, while another connection times GETATTRs of the root.
 *
 * - 32 one-byte WRITEs to one large lower file build exactly one temporary copy (watched
 *   with inotify in the work directory, where copies are built as copyup.*); the calls
 *   arriving while it runs wait for it without workers, so the GETATTRs stay fast.
 * - WRITEs to several large lower files on a server of two workers copy them one at a
 *   time (the pool lets half its threads do long work), and the GETATTRs stay fast.
 *
 * Every write must land with the right byte, the rest of each file must be the lower's,
 * and unionnfsd-ctl stats must count the copy-ups (and the waits for a place).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define T_WORK ".unionnfsd.work"         /* the upper's work directory (README) */
#define T_TMP "copyup."                  /* names of copies being built there */
#define T_BIG (64u << 20)                /* one large file: copying it takes a while */
#define T_WRITES 32
#define T_FILES 6                        /* several large files, one WRITE each */
#define T_FILE (8u << 20)
#define T_DEADLINE 120                   /* seconds for every WRITE to be answered */
#define T_GETATTR_MAX_NS 1000000000LL    /* generous: a 2-core CI machine */
#define T_OUT 65536

static struct it_server srv;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int teardown(void **state)
{
	(void)state;
	if (!srv.is_dir[0])
		return 0;
	return it_server_finish(&srv);
}

/* A lower file of len pseudo-random bytes (real data: holes would copy in no time). */
static uint8_t *make_lower(const char *name, size_t len, uint32_t seed)
{
	char path[PATH_MAX];
	uint8_t *data = malloc(len);

	assert_non_null(data);
	it_fill(data, len, seed);
	it_path(path, "%s/%s", srv.is_lower, name);
	it_write_file(path, data, len);
	return data;
}

/* --- the work directory, watched: how many copies are being built at once --- */

struct watch {
	int wa_fd;
	pthread_t wa_thread;
	atomic_bool wa_stop;
	int wa_now;
	int wa_max;                      /* most copies being built at one time */
	int wa_made;                     /* copies started */
	bool wa_overflow;
};

static void watch_events(struct watch *w, const char *buf, ssize_t n)
{
	const struct inotify_event *e;

	for (const char *p = buf; p < buf + n; p += sizeof(*e) + e->len) {
		e = (const struct inotify_event *)(const void *)p;
		if (e->mask & IN_Q_OVERFLOW)
			w->wa_overflow = true;
		if (e->len == 0 || strncmp(e->name, T_TMP, strlen(T_TMP)) != 0)
			continue;
		if (e->mask & IN_CREATE) {
			w->wa_made++;
			if (++w->wa_now > w->wa_max)
				w->wa_max = w->wa_now;
		}
		if (e->mask & (IN_DELETE | IN_MOVED_FROM))
			w->wa_now--;
	}
}

/* Reads events until told to stop and none is left. */
static void *watch_main(void *arg)
{
	struct watch *w = arg;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		struct pollfd p = { .fd = w->wa_fd, .events = POLLIN };
		bool stop = atomic_load(&w->wa_stop);
		int pr = poll(&p, 1, 50);
		ssize_t n;

		if (pr == 0 && stop)
			break;
		if (pr <= 0)
			continue;
		n = read(w->wa_fd, buf, sizeof(buf));
		if (n > 0)
			watch_events(w, buf, n);
	}
	return NULL;
}

/* The work directory made beforehand (the server takes one that exists) and watched. */
static void watch_start(struct watch *w)
{
	char path[PATH_MAX];

	memset(w, 0, sizeof(*w));
	it_path(path, "%s/%s", srv.is_upper, T_WORK);
	assert_int_equal(mkdir(path, 0700), 0);
	w->wa_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	assert_true(w->wa_fd >= 0);
	assert_true(inotify_add_watch(w->wa_fd, path, IN_CREATE | IN_DELETE | IN_MOVED_FROM) >= 0);
	assert_int_equal(pthread_create(&w->wa_thread, NULL, watch_main, w), 0);
}

static void watch_stop(struct watch *w)
{
	atomic_store(&w->wa_stop, true);
	pthread_join(w->wa_thread, NULL);
	close(w->wa_fd);
	assert_false(w->wa_overflow);
}

/* --- another client: GETATTRs of the root one at a time, timed --- */

struct timer {
	CLIENT *ti_clnt;
	nfs_fh3 ti_root;
	pthread_t ti_thread;
	atomic_bool ti_stop;
	int64_t ti_max_ns;
	long ti_calls;
	long ti_failed;
};

static void *timer_main(void *arg)
{
	struct timer *t = arg;

	while (!atomic_load(&t->ti_stop)) {
		GETATTR3args a = { .object = t->ti_root };
		GETATTR3res r;
		int64_t t0 = now_ns(), ns;

		memset(&r, 0, sizeof(r));
		if (it_call(t->ti_clnt, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a,
			    (xdrproc_t)xdr_GETATTR3res, &r) != RPC_SUCCESS || r.status != NFS3_OK)
			t->ti_failed++;
		ns = now_ns() - t0;
		it_free((xdrproc_t)xdr_GETATTR3res, &r);
		if (ns > t->ti_max_ns)
			t->ti_max_ns = ns;
		t->ti_calls++;
	}
	return NULL;
}

static void timer_start(struct timer *t)
{
	memset(t, 0, sizeof(*t));
	it_assert_status(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &t->ti_root), IT_MNT_OK);
	t->ti_clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	assert_int_equal(pthread_create(&t->ti_thread, NULL, timer_main, t), 0);
}

static void timer_stop(struct timer *t)
{
	atomic_store(&t->ti_stop, true);
	pthread_join(t->ti_thread, NULL);
	it_clnt_destroy(t->ti_clnt);
	it_fh_free(&t->ti_root);
	assert_int_equal(t->ti_failed, 0);
	assert_true(t->ti_calls > 0);
}

/* --- the writes --- */

struct pwrite {
	struct nfsfh *pw_fh;
	uint64_t pw_off;
	uint8_t pw_byte;
	bool pw_done;
	int pw_status;
	char pw_err[128];
};

static void pwrite_cb(int status, struct nfs_context *nfs, void *data, void *priv)
{
	struct pwrite *w = priv;

	(void)nfs;
	w->pw_done = true;
	w->pw_status = status;
	if (status < 0 && data)
		snprintf(w->pw_err, sizeof(w->pw_err), "%s", (const char *)data);
}

/*
 * Sends every write at once on nfs, then serves the connection until all are answered.
 * Returns how many failed; *ns is how long it took.
 */
static int pwrite_all(struct nfs_context *nfs, struct pwrite *w, int n, int64_t *ns)
{
	int64_t t0 = now_ns(), deadline = t0 + (int64_t)T_DEADLINE * 1000000000;
	int done = 0, failed = 0;

	for (int i = 0; i < n; i++)
		assert_int_equal(nfs_pwrite_async(nfs, w[i].pw_fh, w[i].pw_off, 1, &w[i].pw_byte,
						  pwrite_cb, &w[i]), 0);
	while (done < n) {
		struct pollfd p = { .fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs) };

		if (now_ns() > deadline)
			fail_msg("%d of %d WRITEs unanswered after %d s", n - done, n, T_DEADLINE);
		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		if (nfs_service(nfs, p.revents) < 0)
			fail_msg("libnfs: %s", nfs_get_error(nfs));
		done = 0;
		for (int i = 0; i < n; i++)
			done += w[i].pw_done;
	}
	*ns = now_ns() - t0;
	for (int i = 0; i < n; i++) {
		if (w[i].pw_status == 1)
			continue;
		if (failed++ == 0)
			fprintf(stderr, "WRITE %d at %llu: status %d (%s)\n", i,
				(unsigned long long)w[i].pw_off, w[i].pw_status, w[i].pw_err);
	}
	return failed;
}

/* The upper copy holds the lower's data with the written bytes, through NFS and on disk. */
static void check_file(struct nfs_context *nfs, const char *name, uint8_t *want, size_t len,
		       const struct pwrite *w, int n)
{
	char path[PATH_MAX];
	uint8_t *got;
	size_t got_len;

	for (int i = 0; i < n; i++) {
		uint8_t b = 0;

		if (w[i].pw_fh == NULL)
			continue;
		want[w[i].pw_off] = w[i].pw_byte;
		assert_int_equal(nfs_pread(nfs, w[i].pw_fh, w[i].pw_off, 1, &b), 1);
		assert_int_equal(b, w[i].pw_byte);
	}
	it_path(path, "%s/%s", srv.is_upper, name);
	got = (uint8_t *)it_read_file(path, &got_len);
	assert_non_null(got);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
	free(got);
}

/* unionnfsd-ctl stats: copy-ups made, calls that waited for one of the same file, for a place. */
static void ctl_stats(unsigned long long *made, unsigned long long *same,
		      unsigned long long *place)
{
	static char out[T_OUT];
	char ctl[PATH_MAX];
	const char *build = getenv("BUILD"), *p;
	char *argv[] = { ctl, "--state", srv.is_state, "stats", NULL };

	it_path(ctl, "%s/unionnfsd-ctl", build && *build ? build : "build");
	assert_int_equal(it_run(argv, 30, out, sizeof(out)), 0);
	p = strstr(out, "copy-ups ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "copy-ups %llu", made), 1);
	p = strstr(out, "copy-up waits: ");
	if (p == NULL)
		fail_msg("no copy-up waits in the stats:\n%s", out);
	assert_int_equal(sscanf(p, "copy-up waits: same file %llu, free place %llu", same, place), 2);
}

static void test_one_file_one_copy(void **state)
{
	struct pwrite w[T_WRITES];
	struct nfs_context *nfs;
	struct nfsfh *fh;
	struct watch watch;
	struct timer timer;
	unsigned long long made, same, place;
	int64_t ns;
	uint8_t *data;
	int failed;

	(void)state;
	it_server_init(&srv, true);
	data = make_lower("big", T_BIG, 11);
	assert_int_equal(it_server_start(&srv), 0);
	nfs = it_nfs_mount(&srv);
	assert_int_equal(nfs_open(nfs, "/big", O_RDWR, &fh), 0);
	for (int i = 0; i < T_WRITES; i++) {
		w[i] = (struct pwrite){ .pw_fh = fh, .pw_off = (uint64_t)i * (T_BIG / T_WRITES) + 7 };
		w[i].pw_byte = (uint8_t)~data[w[i].pw_off];
	}
	watch_start(&watch);
	timer_start(&timer);
	failed = pwrite_all(nfs, w, T_WRITES, &ns);
	timer_stop(&timer);
	watch_stop(&watch);
	printf("%d WRITEs to one %u MiB lower file in %.2f s, %d failed: %d temporary copies made, "
	       "at most %d at once; another client's GETATTR: %ld calls meanwhile, slowest %.1f ms\n",
	       T_WRITES, T_BIG >> 20, ns / 1e9, failed, watch.wa_made, watch.wa_max, timer.ti_calls,
	       timer.ti_max_ns / 1e6);
	assert_int_equal(failed, 0);
	assert_int_equal(watch.wa_max, 1);
	assert_int_equal(watch.wa_made, 1);
	if (timer.ti_max_ns >= T_GETATTR_MAX_NS)
		fail_msg("a GETATTR took %.1f ms during the copy-up", timer.ti_max_ns / 1e6);

	check_file(nfs, "big", data, T_BIG, w, T_WRITES);
	ctl_stats(&made, &same, &place);
	printf("stats: copy-ups %llu, waits for the same file %llu, for a place %llu\n", made, same,
	       place);
	assert_int_equal(made, 1);
	/*
	 * How many WRITEs waited for the copy is timing: all that arrive after it is done
	 * find the file up and wait for nothing, maybe every one. The copier never waits.
	 */
	assert_true(same <= T_WRITES - 1);
	nfs_close(nfs, fh);
	it_nfs_unmount(nfs);
	free(data);
}

static void test_large_copies_bounded(void **state)
{
	struct pwrite w[T_FILES];
	struct nfs_context *nfs;
	struct watch watch;
	struct timer timer;
	unsigned long long made, same, place;
	uint8_t *data[T_FILES];
	char name[32];
	int64_t ns;
	int failed;

	(void)state;
	it_server_init(&srv, true);
	/* Two workers: one may copy, the other keeps serving. */
	srv.is_extra[0] = "--workers";
	srv.is_extra[1] = "2";
	for (int i = 0; i < T_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		data[i] = make_lower(name, T_FILE, 100 + (uint32_t)i);
	}
	assert_int_equal(it_server_start(&srv), 0);
	nfs = it_nfs_mount(&srv);
	for (int i = 0; i < T_FILES; i++) {
		snprintf(name, sizeof(name), "/f%d", i);
		w[i] = (struct pwrite){ .pw_off = T_FILE / 2 };
		assert_int_equal(nfs_open(nfs, name, O_RDWR, &w[i].pw_fh), 0);
		w[i].pw_byte = (uint8_t)~data[i][w[i].pw_off];
	}
	watch_start(&watch);
	timer_start(&timer);
	failed = pwrite_all(nfs, w, T_FILES, &ns);
	timer_stop(&timer);
	watch_stop(&watch);
	printf("%d WRITEs to %d lower files of %u MiB, 2 workers, in %.2f s, %d failed: %d temporary "
	       "copies made, at most %d at once; another client's GETATTR: %ld calls meanwhile, "
	       "slowest %.1f ms\n", T_FILES, T_FILES, T_FILE >> 20, ns / 1e9, failed, watch.wa_made,
	       watch.wa_max, timer.ti_calls, timer.ti_max_ns / 1e6);
	assert_int_equal(failed, 0);
	assert_int_equal(watch.wa_made, T_FILES);
	assert_int_equal(watch.wa_max, 1);
	if (timer.ti_max_ns >= T_GETATTR_MAX_NS)
		fail_msg("a GETATTR took %.1f ms during the copy-ups", timer.ti_max_ns / 1e6);

	for (int i = 0; i < T_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		check_file(nfs, name, data[i], T_FILE, &w[i], 1);
		nfs_close(nfs, w[i].pw_fh);
		free(data[i]);
	}
	ctl_stats(&made, &same, &place);
	printf("stats: copy-ups %llu, waits for the same file %llu, for a place %llu\n", made, same,
	       place);
	assert_int_equal(made, T_FILES);
	assert_int_equal(same, 0);
	assert_true(place >= 1);
	it_nfs_unmount(nfs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_one_file_one_copy, teardown),
		cmocka_unit_test_teardown(test_large_copies_bounded, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
