/*
 * SETATTR applies to the object its handle names and to nothing else: a client racing
 * SETATTR(mode) on a file against SYMLINK + RENAME over that file from a second connection
 * never changes the symlink's target outside the export. The owner of a directory changes
 * its mode, owner and times whatever its mode bits (as on a local file system: no search
 * permission on the object itself is needed), and the union's markers inside a directory
 * its owner may not search are still honoured.
 *
 * Everything runs twice: with fchmodat2 as the kernel has it, then with fchmodat2 failing
 * with ENOSYS (tests/no_fchmodat2.h; the server inherits the filter), so that the path for
 * kernels before 6.6 runs on every kernel.
 */
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "../no_fchmodat2.h"

#define RACE_MS 2000          /* how long the race runs ... */
#define RACE_MIN_SWAPS 20     /* ... once it ran this many rounds */
#define RACE_MAX_MS 10000     /* but never longer than this, however loaded the machine */
#define RACE_FEW_SWAPS 5      /* fewer rounds than this prove nothing: a failure */
#define RACE_CHMODDERS 3      /* connections sending SETATTR(mode) */
#define OWNER_UID 1000
#define OWNER_GID 1000
#define OTHER_UID 2000

static nfs_fh3 root;
static CLIENT *clnt;
static char target[PATH_MAX];   /* root-owned 0600, outside the export */

/* Trees for the marker and listing cases, made before the server sees them. */
static void make_marker_trees(void)
{
	char p[PATH_MAX];

	it_path(p, "%s/od", it_srv.is_lower);
	assert_int_equal(mkdir(p, 0755), 0);
	it_path(p, "%s/od/hidden", it_srv.is_lower);
	it_write_file(p, "x", 1);
	it_path(p, "%s/od", it_srv.is_upper);
	assert_int_equal(mkdir(p, 0700), 0);
	it_path(p, "%s/od/mine", it_srv.is_upper);
	it_write_file(p, "x", 1);
	it_path(p, "%s/od/.wh..wh..opq", it_srv.is_upper);
	it_write_file(p, "", 0);

	it_path(p, "%s/wd", it_srv.is_lower);
	assert_int_equal(mkdir(p, 0755), 0);
	it_path(p, "%s/wd/gone", it_srv.is_lower);
	it_write_file(p, "x", 1);
	it_path(p, "%s/wd/kept", it_srv.is_lower);
	it_write_file(p, "x", 1);
	it_path(p, "%s/wd", it_srv.is_upper);
	assert_int_equal(mkdir(p, 0700), 0);
	it_path(p, "%s/wd/gone", it_srv.is_upper);
	assert_int_equal(mknod(p, S_IFCHR | 0600, makedev(0, 0)), 0);

	it_path(p, "%s/private", it_srv.is_upper);
	assert_int_equal(mkdir(p, 0700), 0);
	it_path(p, "%s/private/secret", it_srv.is_upper);
	it_write_file(p, "x", 1);

	for (const char *const *n = (const char *const[]){ "od", "od/mine", "od/.wh..wh..opq",
							   "wd", "wd/gone", NULL }; *n; n++) {
		it_path(p, "%s/%s", it_srv.is_upper, *n);
		assert_int_equal(lchown(p, OWNER_UID, OWNER_GID), 0);
	}
}

static int setup(void **state)
{
	char p[PATH_MAX];

	(void)state;
	it_server_init(&it_srv, true);
	/* the unprivileged owner creates its directory in the export root */
	chmod(it_srv.is_upper, 0777);
	make_marker_trees();
	it_path(p, "%s/outside", it_srv.is_dir);
	assert_int_equal(mkdir(p, 0755), 0);
	it_path(target, "%s/outside/target", it_srv.is_dir);
	it_write_file(target, "secret", 6);
	assert_int_equal(chmod(target, 0600), 0);
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	return 0;
}

static int teardown(void **state)
{
	it_clnt_destroy(clnt);
	it_fh_free(&root);
	return it_group_teardown(state);
}

static int setup_no_fchmodat2(void **state)
{
	int r = test_no_fchmodat2();

	if (r < 0) {
		fprintf(stderr, "cannot make fchmodat2 fail (seccomp): %s\n", strerror(-r));
		return -1;
	}
	return setup(state);
}

static sattr3 no_attrs(void)
{
	sattr3 sa;

	memset(&sa, 0, sizeof(sa));
	return sa;
}

/* SETATTR without a guard; returns the status, or -1 when the RPC itself failed. */
static int setattr(CLIENT *c, const nfs_fh3 *fh, const sattr3 *sa)
{
	SETATTR3args a;
	SETATTR3res r;
	int st;

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.object = *fh;
	a.new_attributes = *sa;
	if (it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &a,
		    (xdrproc_t)xdr_SETATTR3res, &r) != RPC_SUCCESS)
		return -1;
	st = r.status;
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
	return st;
}

static int setattr_mode(CLIENT *c, const nfs_fh3 *fh, mode3 mode)
{
	sattr3 sa = no_attrs();

	sa.mode.set_it = TRUE;
	sa.mode.set_mode3_u.mode = mode;
	return setattr(c, fh, &sa);
}

/* --- the race --- */

struct race {
	pthread_mutex_t rc_lock;
	char rc_fh[NFS3_FHSIZE];     /* the current handle of "f" (rc_fhlen 0: none yet) */
	unsigned rc_fhlen;
	atomic_bool rc_stop;
	atomic_uint rc_setattrs;     /* SETATTRs answered */
	atomic_uint rc_swaps;        /* rounds of CREATE, SYMLINK, RENAME over */
	int rc_enough;               /* eventfd: RACE_MIN_SWAPS rounds ran */
	atomic_uint rc_rpc_errors;
};

struct racer {
	struct race *r_race;
	CLIENT *r_clnt;
};

static void *race_chmodder(void *arg)
{
	struct racer *me = arg;
	struct race *rc = me->r_race;
	char data[NFS3_FHSIZE];
	nfs_fh3 fh = { .data = { 0, data } };

	while (!atomic_load(&rc->rc_stop)) {
		pthread_mutex_lock(&rc->rc_lock);
		memcpy(data, rc->rc_fh, rc->rc_fhlen);
		fh.data.data_len = rc->rc_fhlen;
		pthread_mutex_unlock(&rc->rc_lock);
		if (fh.data.data_len == 0)
			continue;
		if (setattr_mode(me->r_clnt, &fh, 0666) < 0)
			atomic_fetch_add(&rc->rc_rpc_errors, 1);
		else
			atomic_fetch_add(&rc->rc_setattrs, 1);
	}
	return NULL;
}

/* One round: f is a fresh file whose handle the chmodders get, then a symlink out. */
static bool race_round(struct race *rc, CLIENT *c)
{
	REMOVE3args ra = { .object = { .dir = root, .name = "f" } };
	REMOVE3res rr;
	CREATE3args ca;
	CREATE3res cr;
	SYMLINK3args sa;
	SYMLINK3res sr;
	RENAME3args na = { .from = { .dir = root, .name = "s" }, .to = { .dir = root, .name = "f" } };
	RENAME3res nr;
	bool ok;

	memset(&rr, 0, sizeof(rr));
	if (it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &ra,
		    (xdrproc_t)xdr_REMOVE3res, &rr) != RPC_SUCCESS)
		return false;
	it_free((xdrproc_t)xdr_REMOVE3res, &rr);

	memset(&ca, 0, sizeof(ca));
	memset(&cr, 0, sizeof(cr));
	ca.where.dir = root;
	ca.where.name = "f";
	ca.how.mode = GUARDED;
	ca.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
	ca.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	if (it_call(c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &ca,
		    (xdrproc_t)xdr_CREATE3res, &cr) != RPC_SUCCESS)
		return false;
	ok = cr.status == NFS3_OK && cr.CREATE3res_u.resok.obj.handle_follows;
	if (ok) {
		nfs_fh3 *h = &cr.CREATE3res_u.resok.obj.post_op_fh3_u.handle;

		pthread_mutex_lock(&rc->rc_lock);
		memcpy(rc->rc_fh, h->data.data_val, h->data.data_len);
		rc->rc_fhlen = h->data.data_len;
		pthread_mutex_unlock(&rc->rc_lock);
	}
	it_free((xdrproc_t)xdr_CREATE3res, &cr);
	if (!ok)
		return false;

	memset(&sa, 0, sizeof(sa));
	memset(&sr, 0, sizeof(sr));
	sa.where.dir = root;
	sa.where.name = "s";
	sa.symlink.symlink_data = target;
	if (it_call(c, NFSPROC3_SYMLINK, (xdrproc_t)xdr_SYMLINK3args, &sa,
		    (xdrproc_t)xdr_SYMLINK3res, &sr) != RPC_SUCCESS)
		return false;
	ok = sr.status == NFS3_OK;
	it_free((xdrproc_t)xdr_SYMLINK3res, &sr);
	if (!ok)
		return false;

	memset(&nr, 0, sizeof(nr));
	if (it_call(c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &na,
		    (xdrproc_t)xdr_RENAME3res, &nr) != RPC_SUCCESS)
		return false;
	ok = nr.status == NFS3_OK;
	it_free((xdrproc_t)xdr_RENAME3res, &nr);
	return ok;
}

static void *race_swapper(void *arg)
{
	struct racer *me = arg;
	struct race *rc = me->r_race;

	while (!atomic_load(&rc->rc_stop)) {
		if (!race_round(rc, me->r_clnt)) {
			atomic_fetch_add(&rc->rc_rpc_errors, 1);
			break;
		}
		if (atomic_fetch_add(&rc->rc_swaps, 1) + 1 == RACE_MIN_SWAPS &&
		    eventfd_write(rc->rc_enough, 1) != 0)
			atomic_fetch_add(&rc->rc_rpc_errors, 1);
	}
	return NULL;
}

static long race_elapsed_ms(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

/*
 * Waits until the race has run RACE_MS and RACE_MIN_SWAPS rounds (or RACE_MAX_MS), or
 * until the target's attributes change (inotify).
 */
static void race_watch(int inotify_fd, int enough_fd)
{
	struct pollfd pfd[2] = { { .fd = inotify_fd, .events = POLLIN },
				 { .fd = enough_fd, .events = POLLIN } };
	struct timespec start;
	bool enough = false;
	eventfd_t v;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		long left = (enough ? RACE_MS : RACE_MAX_MS) - race_elapsed_ms(&start);

		if (left <= 0 || poll(pfd, enough ? 1 : 2, (int)left) < 0 || pfd[0].revents)
			return;
		if (!enough && pfd[1].revents)
			enough = eventfd_read(enough_fd, &v) == 0;
	}
}

static void test_setattr_mode_vs_symlink_swap(void **state)
{
	struct race rc = { .rc_lock = PTHREAD_MUTEX_INITIALIZER };
	struct racer racers[RACE_CHMODDERS + 1];
	pthread_t threads[RACE_CHMODDERS + 1];
	struct stat st;
	int ino;

	(void)state;
	rc.rc_enough = eventfd(0, EFD_CLOEXEC);
	assert_true(rc.rc_enough >= 0);
	ino = inotify_init1(IN_CLOEXEC);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, target, IN_ATTRIB) >= 0);
	for (int i = 0; i <= RACE_CHMODDERS; i++) {
		racers[i].r_race = &rc;
		racers[i].r_clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	}
	assert_int_equal(pthread_create(&threads[0], NULL, race_swapper, &racers[0]), 0);
	for (int i = 1; i <= RACE_CHMODDERS; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, race_chmodder, &racers[i]), 0);
	race_watch(ino, rc.rc_enough);
	atomic_store(&rc.rc_stop, true);
	for (int i = 0; i <= RACE_CHMODDERS; i++) {
		pthread_join(threads[i], NULL);
		it_clnt_destroy(racers[i].r_clnt);
	}
	close(ino);
	close(rc.rc_enough);
	assert_int_equal(stat(target, &st), 0);
	fprintf(stderr, "race: %u rounds, %u SETATTRs, target mode %04o\n",
		atomic_load(&rc.rc_swaps), atomic_load(&rc.rc_setattrs), st.st_mode & 07777);
	if ((st.st_mode & 07777) != 0600)
		fail_msg("SETATTR(mode) on the export's f changed %s (outside the export) to "
			 "%04o after %u rounds", target, st.st_mode & 07777,
			 atomic_load(&rc.rc_swaps));
	assert_int_equal(atomic_load(&rc.rc_rpc_errors), 0);
	if (atomic_load(&rc.rc_swaps) < RACE_FEW_SWAPS)
		fail_msg("only %u rounds of the race ran in %d ms", atomic_load(&rc.rc_swaps),
			 RACE_MAX_MS);
	assert_true(atomic_load(&rc.rc_setattrs) > 0);
}

/* --- the owner's own directory, whatever its mode --- */

static void mode_on_disk_is(const char *name, mode_t want)
{
	char p[PATH_MAX];
	struct stat st;

	it_path(p, "%s/%s", it_srv.is_upper, name);
	assert_int_equal(lstat(p, &st), 0);
	if ((st.st_mode & 07777) != want)
		fail_msg("%s has mode %04o, want %04o", name, st.st_mode & 07777, want);
}

#define OWNER_SETATTR_OK(c, fh, sa, what, mode) \
	do { \
		int st_ = setattr((c), (fh), (sa)); \
		if (st_ != NFS3_OK) \
			fail_msg("owner's SETATTR %s on its directory (mode %04o): %s", \
				 (what), (mode), it_nfsstat_name(st_)); \
	} while (0)

/* Every SETATTR field but size, as the owner, on its directory while it has mode m. */
static void owner_setattr_all(CLIENT *u, const nfs_fh3 *d, const char *name, mode_t m)
{
	char p[PATH_MAX];
	struct stat st;
	sattr3 sa;
	fattr3 at;

	sa = no_attrs();
	sa.mode.set_it = TRUE;
	sa.mode.set_mode3_u.mode = m;
	OWNER_SETATTR_OK(u, d, &sa, "mode", m);
	mode_on_disk_is(name, m);

	sa = no_attrs();
	sa.uid.set_it = TRUE;
	sa.uid.set_uid3_u.uid = OWNER_UID;
	sa.gid.set_it = TRUE;
	sa.gid.set_gid3_u.gid = OWNER_GID;
	OWNER_SETATTR_OK(u, d, &sa, "uid+gid", m);

	sa = no_attrs();
	sa.atime.set_it = SET_TO_CLIENT_TIME;
	sa.atime.set_atime_u.atime.seconds = 1000000001;
	sa.mtime.set_it = SET_TO_CLIENT_TIME;
	sa.mtime.set_mtime_u.mtime.seconds = 1000000000;
	OWNER_SETATTR_OK(u, d, &sa, "client times", m);
	it_path(p, "%s/%s", it_srv.is_upper, name);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mtime, 1000000000);
	assert_int_equal(st.st_atime, 1000000001);

	sa = no_attrs();
	sa.mtime.set_it = SET_TO_SERVER_TIME;
	OWNER_SETATTR_OK(u, d, &sa, "server mtime", m);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(st.st_mtime > 1000000000);

	/* the case of the report: from one mode without owner x to another */
	sa = no_attrs();
	sa.mode.set_it = TRUE;
	sa.mode.set_mode3_u.mode = 0060;
	OWNER_SETATTR_OK(u, d, &sa, "mode 0060", m);
	mode_on_disk_is(name, 0060);
	it_assert_status(it_getattr(u, d, &at), NFS3_OK);
	assert_int_equal(at.mode & 07777, 0060);
	assert_int_equal(at.uid, OWNER_UID);
}

static void test_owner_setattr_any_dir_mode(void **state)
{
	static const mode_t modes[] = { 0000, 0100, 0200, 0400, 0600 };
	CLIENT *u;
	MKDIR3args a;
	MKDIR3res r;
	nfs_fh3 d;

	(void)state;
	u = it_clnt_from("127.0.0.1", NFS_PROGRAM, NFS_V3, it_srv.is_nfs_port, OWNER_UID,
			 OWNER_GID, false);
	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.where.dir = root;
	a.where.name = "owned";
	a.attributes.mode.set_it = TRUE;
	a.attributes.mode.set_mode3_u.mode = 0755;
	assert_int_equal(it_call(u, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &a,
				 (xdrproc_t)xdr_MKDIR3res, &r),
			 RPC_SUCCESS);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_MKDIR3res, &r);
	it_assert_status(it_lookup(u, &root, "owned", &d, NULL), NFS3_OK);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		owner_setattr_all(u, &d, "owned", modes[i]);
	/* someone else's: still refused */
	it_assert_status(setattr_mode(u, &root, 0700), NFS3ERR_PERM);
	/* back to a mode the test tree can be removed with */
	it_assert_status(setattr_mode(u, &d, 0755), NFS3_OK);
	it_fh_free(&d);
	it_clnt_destroy(u);
}

/* --- markers inside a directory its owner may read but not search --- */

/* READDIR's names as ",a,b,": returns the status. */
static int readdir_names(CLIENT *c, const nfs_fh3 *dir, char *out, size_t outlen)
{
	READDIR3args a = { .dir = *dir, .cookie = 0, .count = 8192 };
	READDIR3res r;
	int st;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NFSPROC3_READDIR, (xdrproc_t)xdr_READDIR3args, &a,
				 (xdrproc_t)xdr_READDIR3res, &r),
			 RPC_SUCCESS);
	st = r.status;
	snprintf(out, outlen, ",");
	if (st == NFS3_OK) {
		assert_true(r.READDIR3res_u.resok.reply.eof);
		for (entry3 *e = r.READDIR3res_u.resok.reply.entries; e; e = e->nextentry)
			if (strcmp(e->name, ".") && strcmp(e->name, ".."))
				snprintf(out + strlen(out), outlen - strlen(out), "%s,", e->name);
	}
	it_free((xdrproc_t)xdr_READDIR3res, &r);
	return st;
}

static void names_are(CLIENT *c, const nfs_fh3 *dir, const char *who, const char *want)
{
	char got[1024];
	int st = readdir_names(c, dir, got, sizeof(got));

	if (st != NFS3_OK)
		fail_msg("READDIR as %s: %s", who, it_nfsstat_name(st));
	if (strcmp(got, want))
		fail_msg("READDIR as %s lists %s, want %s", who, got, want);
}

static void test_markers_in_unsearchable_dir(void **state)
{
	CLIENT *u;
	nfs_fh3 od, wd;
	fattr3 at;

	(void)state;
	u = it_clnt_from("127.0.0.1", NFS_PROGRAM, NFS_V3, it_srv.is_nfs_port, OWNER_UID,
			 OWNER_GID, false);
	it_assert_status(it_lookup(u, &root, "od", &od, NULL), NFS3_OK);
	it_assert_status(it_lookup(u, &root, "wd", &wd, NULL), NFS3_OK);
	/* read but no search: the names can be listed, as with ls on a local file system */
	it_assert_status(setattr_mode(u, &od, 0600), NFS3_OK);
	it_assert_status(setattr_mode(u, &wd, 0600), NFS3_OK);
	it_assert_status(it_getattr(u, &od, &at), NFS3_OK);
	it_assert_status(it_getattr(u, &wd, &at), NFS3_OK);
	/* the opaque marker hides the lower od/hidden; the whiteout hides wd/gone */
	names_are(u, &od, "the owner", ",mine,");
	names_are(u, &wd, "the owner", ",kept,");
	/* and what the owner's requests saw is what everyone sees */
	names_are(clnt, &od, "root", ",mine,");
	names_are(clnt, &wd, "root", ",kept,");
	it_assert_status(it_lookup(clnt, &od, "hidden", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(it_lookup(clnt, &wd, "gone", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(setattr_mode(u, &od, 0755), NFS3_OK);
	it_assert_status(setattr_mode(u, &wd, 0755), NFS3_OK);
	it_fh_free(&od);
	it_fh_free(&wd);
	it_clnt_destroy(u);
}

/* A listing cached for root is no listing for one who may not read the directory. */
static void test_cached_listing_needs_read(void **state)
{
	CLIENT *other;
	nfs_fh3 d;
	char got[1024];

	(void)state;
	it_assert_status(it_lookup(clnt, &root, "private", &d, NULL), NFS3_OK);
	/* made at setup: old enough for the listing to be kept */
	names_are(clnt, &d, "root", ",secret,");
	other = it_clnt_from("127.0.0.1", NFS_PROGRAM, NFS_V3, it_srv.is_nfs_port, OTHER_UID,
			     OTHER_UID, false);
	it_assert_status(readdir_names(other, &d, got, sizeof(got)), NFS3ERR_ACCES);
	it_clnt_destroy(other);
	it_fh_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_setattr_mode_vs_symlink_swap),
		cmocka_unit_test(test_owner_setattr_any_dir_mode),
		cmocka_unit_test(test_markers_in_unsearchable_dir),
		cmocka_unit_test(test_cached_listing_needs_read),
	};
	int failed;

	fprintf(stderr, "== fchmodat2 as the kernel has it\n");
	failed = cmocka_run_group_tests_name("kernel", tests, setup, teardown);
	fprintf(stderr, "== fchmodat2 failing with ENOSYS (kernels before 6.6)\n");
	failed += cmocka_run_group_tests_name("no_fchmodat2", tests, setup_no_fchmodat2, teardown);
	return failed;
}
