/*
 * RFC 1813 points where the letter of the protocol and what clients rely on meet:
 *
 * - EXCLUSIVE CREATE keeps its verifier where the file system clamps times at 2^31-1
 *   (ext4 with 128-byte inodes): a retransmission after a restart still matches;
 * - SETATTR's guard: NOT_SYNC carries the object's wcc attributes, and of concurrent
 *   SETATTRs guarded by the same ctime exactly one passes;
 * - READDIRPLUS fills its reply up to maxcount, dircount being only a hint.
 */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CALL(clnt, proc, argx, args, resx, res) \
	do { \
		enum clnt_stat cs_; \
		memset((res), 0, sizeof(*(res))); \
		cs_ = it_call((clnt), (proc), (xdrproc_t)(argx), (args), (xdrproc_t)(resx), (res)); \
		if (cs_ != RPC_SUCCESS) \
			fail_msg("%s:%d: RPC " #proc " failed: %s", __FILE__, __LINE__, \
				 clnt_sperrno(cs_)); \
	} while (0)

/* The group's server (an upper and a lower branch), its root handle and a client. */
static nfs_fh3 root;
static CLIENT *clnt;

static int group_setup(void **state)
{
	if (it_group_setup_union(state) != 0)
		return -1;
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK) {
		fprintf(stderr, "MNT %s failed\n", IT_EXPORT);
		return -1;
	}
	clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	return 0;
}

static int group_teardown(void **state)
{
	it_clnt_destroy(clnt);
	clnt = NULL;
	it_fh_free(&root);
	return it_group_teardown(state);
}

/* ---- EXCLUSIVE CREATE on a file system that clamps times ---- */

/* Both words with the high bit set, as Linux's first word (jiffies) often has. */
static const char VERF_HIGH[NFS3_CREATEVERFSIZE] = "\x80\x01\x02\x03\x90\x04\x05\x06";
/* Differs in the low 31 bits of both words. */
static const char VERF_OTHER[NFS3_CREATEVERFSIZE] = "\x80\x01\x02\x04\x90\x04\x05\x07";

static struct it_server ext4_srv;
static char ext4_img[PATH_MAX];
static bool ext4_mounted;

static int run_quiet(char *const argv[])
{
	char out[2048];
	int rc = it_run(argv, 60, out, sizeof(out));

	if (rc != 0)
		fprintf(stderr, "%s: exit %d: %s\n", argv[0], rc, out);
	return rc;
}

/* The test's upper branch: a fresh ext4 with 128-byte inodes (times end at 2^31-1). */
static int ext4_setup(void **state)
{
	char *mkimg[] = { "truncate", "-s", "16M", ext4_img, NULL };
	char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-I", "128", ext4_img, NULL };
	char *mnt[] = { "mount", "-o", "loop", ext4_img, ext4_srv.is_upper, NULL };

	(void)state;
	it_server_init(&ext4_srv, false);
	it_path(ext4_img, "%s/upper.img", ext4_srv.is_dir);
	if (run_quiet(mkimg) != 0 || run_quiet(mkfs) != 0)
		return -1;
	ext4_mounted = run_quiet(mnt) == 0;
	return 0;
}

static int ext4_teardown(void **state)
{
	char *umnt[] = { "umount", ext4_srv.is_upper, NULL };
	int rc = 0;

	(void)state;
	if (ext4_srv.is_pid > 0 && it_server_stop(&ext4_srv) != 0)
		rc = -1;
	if (ext4_mounted && run_quiet(umnt) != 0)
		rc = -1;
	ext4_mounted = false;
	it_server_cleanup(&ext4_srv);
	return rc;
}

/* EXCLUSIVE CREATE of name in dir with verf; fh (optional) receives the handle. */
static nfsstat3 create_exclusive(CLIENT *c, const nfs_fh3 *dir, const char *name,
				 const char *verf, nfs_fh3 *fh)
{
	CREATE3args a;
	CREATE3res r;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.how.mode = EXCLUSIVE;
	memcpy(a.how.createhow3_u.verf, verf, NFS3_CREATEVERFSIZE);
	CALL(c, NFSPROC3_CREATE, xdr_CREATE3args, &a, xdr_CREATE3res, &r);
	st = r.status;
	if (st == NFS3_OK && fh) {
		if (r.CREATE3res_u.resok.obj.handle_follows)
			it_fh_copy(fh, &r.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
		else
			it_assert_status(it_lookup(c, dir, name, fh, NULL), NFS3_OK);
	}
	it_free((xdrproc_t)xdr_CREATE3res, &r);
	return st;
}

static void test_exclusive_create_clamped_times(void **state)
{
	nfs_fh3 top, first, again;
	CLIENT *c;

	(void)state;
	if (!ext4_mounted) {
		fprintf(stderr, "SKIP: cannot loop-mount an ext4 image here (no loop devices?);"
			" EXCLUSIVE CREATE on clamped times is not tested\n");
		skip();
	}
	assert_int_equal(it_server_start(&ext4_srv), 0);
	assert_int_equal(it_mnt(&ext4_srv, IPPROTO_TCP, IT_EXPORT, &top), IT_MNT_OK);
	c = it_nfs_clnt(&ext4_srv, IPPROTO_TCP);
	it_assert_status(create_exclusive(c, &top, "excl", VERF_HIGH, &first), NFS3_OK);
	it_clnt_destroy(c);
	/* A restart: the retransmission can only be answered from the file on disk. */
	it_server_restart(&ext4_srv);
	c = it_nfs_clnt(&ext4_srv, IPPROTO_TCP);
	it_assert_status(create_exclusive(c, &top, "excl", VERF_HIGH, &again), NFS3_OK);
	assert_true(it_fh_equal(&first, &again));
	it_assert_status(create_exclusive(c, &top, "excl", VERF_OTHER, NULL), NFS3ERR_EXIST);
	it_clnt_destroy(c);
	it_fh_free(&again);
	it_fh_free(&first);
	it_fh_free(&top);
}

/* ---- SETATTR guard ---- */

static nfsstat3 setattr_guarded(CLIENT *c, const nfs_fh3 *fh, const nfstime3 *guard,
				mode3 mode, wcc_data *wcc)
{
	SETATTR3args a;
	SETATTR3res r;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	a.object = *fh;
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = mode;
	a.guard.check = TRUE;
	a.guard.sattrguard3_u.obj_ctime = *guard;
	CALL(c, NFSPROC3_SETATTR, xdr_SETATTR3args, &a, xdr_SETATTR3res, &r);
	st = r.status;
	/* resok and resfail are the same wcc_data at the same place. */
	if (wcc)
		*wcc = r.SETATTR3res_u.resok.obj_wcc;
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
	return st;
}

static bool nfstime_equal(const nfstime3 *a, const nfstime3 *b)
{
	return a->seconds == b->seconds && a->nseconds == b->nseconds;
}

static void test_setattr_not_sync_wcc(void **state)
{
	nfs_fh3 f;
	fattr3 a;
	nfstime3 wrong;
	wcc_data wcc;
	const wcc_attr *pre;
	const fattr3 *post;

	(void)state;
	it_assert_status(it_create(clnt, &root, "guard-wcc"), NFS3_OK);
	it_assert_status(it_lookup(clnt, &root, "guard-wcc", &f, &a), NFS3_OK);
	wrong = a.ctime;
	wrong.seconds -= 1000;
	it_assert_status(setattr_guarded(clnt, &f, &wrong, 0600, &wcc), NFS3ERR_NOT_SYNC);
	if (!wcc.before.attributes_follow || !wcc.after.attributes_follow)
		fail_msg("NOT_SYNC without wcc attributes (before %d, after %d)",
			 wcc.before.attributes_follow, wcc.after.attributes_follow);
	pre = &wcc.before.pre_op_attr_u.attributes;
	post = &wcc.after.post_op_attr_u.attributes;
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	assert_int_equal(pre->size, a.size);
	assert_true(nfstime_equal(&pre->mtime, &a.mtime));
	assert_true(nfstime_equal(&pre->ctime, &a.ctime));
	assert_int_equal(post->fileid, a.fileid);
	assert_int_equal(post->mode, a.mode);
	assert_int_equal(post->mode & 07777, 0644);
	assert_int_equal(post->size, a.size);
	assert_true(nfstime_equal(&post->mtime, &a.mtime));
	assert_true(nfstime_equal(&post->ctime, &a.ctime));
	it_fh_free(&f);
}

#define RACERS 4
#define RACE_ROUNDS 30

struct racer {
	CLIENT *rc_clnt;
	const nfs_fh3 *rc_fh;
	nfstime3 rc_guard;
	mode3 rc_mode;
	pthread_barrier_t *rc_start;
	nfsstat3 rc_status;
	enum clnt_stat rc_rpc;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	SETATTR3args a;
	SETATTR3res res;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.object = *r->rc_fh;
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = r->rc_mode;
	a.guard.check = TRUE;
	a.guard.sattrguard3_u.obj_ctime = r->rc_guard;
	pthread_barrier_wait(r->rc_start);
	r->rc_rpc = it_call(r->rc_clnt, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &a,
			    (xdrproc_t)xdr_SETATTR3res, &res);
	r->rc_status = res.status;
	if (r->rc_rpc == RPC_SUCCESS)
		it_free((xdrproc_t)xdr_SETATTR3res, &res);
	return NULL;
}

/*
 * Until the kernel's coarse clock (what it stamps ctimes with) is past t: a change made
 * after this moves the ctime for sure.
 */
static void wait_clock_past(const nfstime3 *t)
{
	struct timespec now;

	do {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
	} while ((uint64_t)now.tv_sec < t->seconds ||
		 ((uint64_t)now.tv_sec == t->seconds && (uint32_t)now.tv_nsec <= t->nseconds));
}

/* The racers' SETATTRs of fh, all guarded by guard, at once; returns how many passed. */
static int race_setattrs(struct racer *racers, const nfs_fh3 *fh, const nfstime3 *guard,
			 int round)
{
	pthread_t threads[RACERS];
	pthread_barrier_t start;
	int i, ok = 0, not_sync = 0;

	assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
	for (i = 0; i < RACERS; i++) {
		racers[i].rc_fh = fh;
		racers[i].rc_guard = *guard;
		/* Every racer a mode of its own: the winner's is the one left. */
		racers[i].rc_mode = 0700 + (mode3)i;
		racers[i].rc_start = &start;
		assert_int_equal(pthread_create(&threads[i], NULL, racer_main, &racers[i]), 0);
	}
	for (i = 0; i < RACERS; i++) {
		pthread_join(threads[i], NULL);
		if (racers[i].rc_rpc != RPC_SUCCESS)
			fail_msg("round %d: SETATTR RPC failed: %s", round,
				 clnt_sperrno(racers[i].rc_rpc));
		ok += racers[i].rc_status == NFS3_OK;
		not_sync += racers[i].rc_status == NFS3ERR_NOT_SYNC;
	}
	pthread_barrier_destroy(&start);
	if (ok + not_sync != RACERS)
		fail_msg("round %d: %d SETATTRs passed and %d got NOT_SYNC of %d", round, ok,
			 not_sync, RACERS);
	return ok;
}

/*
 * Guarded SETATTRs of a lower directory at once: the first to pass gives it its upper
 * copy (a new ctime) and changes its mode; the others must see that and fail. The
 * directory lies deep, so that its copy-up (its parents' first) takes a while.
 */
#define RACE_DEPTH "/a/b/c/d/e/f"

static void mkdir_p(const char *path)
{
	char p[PATH_MAX];

	it_path(p, "%s", path);
	for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		if (!s)
			return;
		*s = '/';
	}
}

static void test_setattr_guard_race(void **state)
{
	struct racer racers[RACERS];
	char name[64], p[PATH_MAX];
	nfs_fh3 d;
	fattr3 a;
	int round, i, ok;

	(void)state;
	for (i = 0; i < RACERS; i++)
		racers[i].rc_clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	for (round = 0; round < RACE_ROUNDS; round++) {
		snprintf(name, sizeof(name), "guard-race-%d" RACE_DEPTH, round);
		it_path(p, "%s/%s", it_srv.is_lower, name);
		mkdir_p(p);
		it_assert_status(it_lookup_path(clnt, &root, name, &d, &a), NFS3_OK);
		wait_clock_past(&a.ctime);
		ok = race_setattrs(racers, &d, &a.ctime, round);
		if (ok != 1)
			fail_msg("round %d: %d of %d SETATTRs guarded by the same ctime passed; "
				 "want exactly one", round, ok, RACERS);
		it_assert_status(it_getattr(clnt, &d, &a), NFS3_OK);
		for (i = 0; racers[i].rc_status != NFS3_OK; i++)
			;
		assert_int_equal(a.mode & 07777, racers[i].rc_mode);
		it_fh_free(&d);
	}
	for (i = 0; i < RACERS; i++)
		it_clnt_destroy(racers[i].rc_clnt);
}

/* ---- READDIRPLUS fills to maxcount ---- */

#define BIG_DIR_FILES 302

struct rdp_reply {
	nfsstat3 rr_status;
	int rr_entries;
	bool rr_eof;
	unsigned long rr_bytes;   /* the reply's XDR size */
};

static void readdirplus(const nfs_fh3 *dir, uint32_t dircount, uint32_t maxcount,
			struct rdp_reply *out)
{
	READDIRPLUS3args a;
	READDIRPLUS3res r;

	memset(&a, 0, sizeof(a));
	a.dir = *dir;
	a.dircount = dircount;
	a.maxcount = maxcount;
	CALL(clnt, NFSPROC3_READDIRPLUS, xdr_READDIRPLUS3args, &a, xdr_READDIRPLUS3res, &r);
	memset(out, 0, sizeof(*out));
	out->rr_status = r.status;
	out->rr_bytes = xdr_sizeof((xdrproc_t)xdr_READDIRPLUS3res, &r);
	if (r.status == NFS3_OK) {
		for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry)
			out->rr_entries++;
		out->rr_eof = r.READDIRPLUS3res_u.resok.reply.eof;
	}
	it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
}

/* A directory of n empty files made on the upper branch directly. */
static void big_dir(const char *name, int n, nfs_fh3 *fh)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", it_srv.is_upper, name);
	if (mkdir(p, 0755) != 0)
		fail_msg("mkdir %s: %s", p, strerror(errno));
	for (int i = 0; i < n; i++) {
		it_path(p, "%s/%s/entry-%04d", it_srv.is_upper, name, i);
		it_write_file(p, "", 0);
	}
	it_assert_status(it_lookup(clnt, &root, name, fh, NULL), NFS3_OK);
}

/* What Linux sends (dircount maxcount/8): the whole directory in one reply. */
static void test_readdirplus_fills_maxcount(void **state)
{
	struct rdp_reply r;
	nfs_fh3 d;

	(void)state;
	big_dir("rdp-big", BIG_DIR_FILES, &d);
	readdirplus(&d, 8192, 65536, &r);
	it_assert_status(r.rr_status, NFS3_OK);
	if (r.rr_entries != BIG_DIR_FILES + 2 || !r.rr_eof)
		fail_msg("READDIRPLUS dircount 8192 maxcount 65536 of %d names: %d entries, eof %d;"
			 " want all %d in one reply", BIG_DIR_FILES, r.rr_entries, r.rr_eof,
			 BIG_DIR_FILES + 2);
	assert_true(r.rr_bytes <= 65536);
	it_fh_free(&d);
}

static void test_readdirplus_dircount_hint(void **state)
{
	struct rdp_reply r;
	nfs_fh3 d;

	(void)state;
	big_dir("rdp-small", 10, &d);
	/* A dircount too small for one entry, with room in maxcount. */
	readdirplus(&d, 16, 8192, &r);
	it_assert_status(r.rr_status, NFS3_OK);
	assert_true(r.rr_entries > 0);
	assert_true(r.rr_bytes <= 8192);
	/* A maxcount with room for the reply's fixed part and no entry. */
	readdirplus(&d, 8192, 128, &r);
	it_assert_status(r.rr_status, NFS3ERR_TOOSMALL);
	it_fh_free(&d);
}

int main(void)
{
	const struct CMUnitTest shared[] = {
		cmocka_unit_test(test_setattr_not_sync_wcc),
		cmocka_unit_test(test_setattr_guard_race),
		cmocka_unit_test(test_readdirplus_fills_maxcount),
		cmocka_unit_test(test_readdirplus_dircount_hint),
	};
	const struct CMUnitTest own[] = {
		cmocka_unit_test_setup_teardown(test_exclusive_create_clamped_times, ext4_setup,
						ext4_teardown),
	};
	int failed;

	failed = cmocka_run_group_tests_name("RFC 1813 conformance", shared, group_setup,
					     group_teardown);
	failed += cmocka_run_group_tests_name("RFC 1813 on ext4 with 128-byte inodes", own,
					      NULL, NULL);
	return failed;
}
