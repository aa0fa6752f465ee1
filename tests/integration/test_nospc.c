/*
 * A change the inode map cannot take leaves no trace. The server's state
 * directory is a small tmpfs, filled up until the map's commits fail; then every kind of
 * namespace change that first touches the upper branch and then the map (CREATE in each
 * mode, MKDIR, SYMLINK, MKNOD, LINK, CREATE and MKDIR over a whiteout, REMOVE of a lower
 * file) is tried until it fails: it must answer NFS3ERR_NOSPC, and the upper branch must
 * hold what it held before (no new name, the whiteout still there, no new whiteout, a
 * renamed or removed file back at its name). An RMDIR of an upper directory cannot be taken
 * back: it answers success, and `unionnfsd-ctl check` later finds its record stale. With
 * space freed, the same changes succeed and, once that record is repaired, check finds
 * nothing wrong.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define T_TMPFS_SIZE "size=2m,mode=0700"
#define T_TRIES 400          /* changes of one kind tried before one must have failed */
#define T_MAPPED 300         /* ... of a kind whose names are mapped before (slow to map) */
#define T_OUT 65536

enum kind {
	K_UNCHECKED, K_GUARDED, K_EXCLUSIVE, K_MKDIR, K_SYMLINK, K_MKNOD, K_LINK,
	K_FILE_OVER_WH, K_DIR_OVER_WH, K_REMOVE_LOWER, K_RENAME, K_REMOVE_UPPER, K_COUNT
};

static const char *const kind_name[K_COUNT] = {
	"CREATE UNCHECKED", "CREATE GUARDED", "CREATE EXCLUSIVE", "MKDIR", "SYMLINK", "MKNOD",
	"LINK", "CREATE over a whiteout", "MKDIR over a whiteout", "REMOVE of a lower file",
	"RENAME of an upper file", "REMOVE of an upper file",
};

static struct it_server srv;
static bool mounted;
static nfs_fh3 root, linked;
static CLIENT *clnt;

static nfsstat3 call(uint32_t proc, xdrproc_t xa, void *a, xdrproc_t xr, void *res)
{
	enum clnt_stat cs = it_call(clnt, proc, xa, a, xr, res);

	if (cs != RPC_SUCCESS)
		fail_msg("NFS procedure %u: %s", proc, clnt_sperrno(cs));
	return *(nfsstat3 *)res; /* every result starts with its status */
}

static nfsstat3 do_create(const char *name, createmode3 mode)
{
	CREATE3args a;
	CREATE3res res;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.where.dir = root;
	a.where.name = (char *)name;
	a.how.mode = mode;
	if (mode == EXCLUSIVE)
		memcpy(a.how.createhow3_u.verf, "verf1234", NFS3_CREATEVERFSIZE);
	st = call(NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a, (xdrproc_t)xdr_CREATE3res, &res);
	it_free((xdrproc_t)xdr_CREATE3res, &res);
	return st;
}

/* The name a renamed file gets. */
static void moved_name(const char *name, char *out, size_t len)
{
	/* Long: each rename grows the map, so that the full map soon fails one. */
	snprintf(out, len, "%.40s-moved-%0200d", name, 0);
}

static nfsstat3 do_rename(const char *name)
{
	RENAME3args a;
	RENAME3res res;
	char to[256];
	nfsstat3 st;

	moved_name(name, to, sizeof(to));
	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.from.dir = root;
	a.from.name = (char *)name;
	a.to.dir = root;
	a.to.name = to;
	st = call(NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a, (xdrproc_t)xdr_RENAME3res, &res);
	it_free((xdrproc_t)xdr_RENAME3res, &res);
	return st;
}

static nfsstat3 do_remove(const char *name)
{
	REMOVE3args a;
	REMOVE3res res;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.object.dir = root;
	a.object.name = (char *)name;
	st = call(NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a, (xdrproc_t)xdr_REMOVE3res, &res);
	it_free((xdrproc_t)xdr_REMOVE3res, &res);
	return st;
}

static nfsstat3 do_rmdir(const char *name)
{
	RMDIR3args a;
	RMDIR3res res;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	memset(&res, 0, sizeof(res));
	a.object.dir = root;
	a.object.name = (char *)name;
	st = call(NFSPROC3_RMDIR, (xdrproc_t)xdr_RMDIR3args, &a, (xdrproc_t)xdr_RMDIR3res, &res);
	it_free((xdrproc_t)xdr_RMDIR3res, &res);
	return st;
}

static nfsstat3 do_change(enum kind k, const char *name)
{
	MKDIR3args md;
	SYMLINK3args sl;
	MKNOD3args mn;
	LINK3args ln;
	union { MKDIR3res md; SYMLINK3res sl; MKNOD3res mn; LINK3res ln; } res;
	nfsstat3 st;

	memset(&res, 0, sizeof(res));
	switch (k) {
	case K_UNCHECKED:
	case K_FILE_OVER_WH:
		return do_create(name, UNCHECKED);
	case K_GUARDED:
		return do_create(name, GUARDED);
	case K_EXCLUSIVE:
		return do_create(name, EXCLUSIVE);
	case K_MKDIR:
	case K_DIR_OVER_WH:
		memset(&md, 0, sizeof(md));
		md.where.dir = root;
		md.where.name = (char *)name;
		st = call(NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &md, (xdrproc_t)xdr_MKDIR3res, &res);
		it_free((xdrproc_t)xdr_MKDIR3res, &res);
		return st;
	case K_SYMLINK:
		memset(&sl, 0, sizeof(sl));
		sl.where.dir = root;
		sl.where.name = (char *)name;
		sl.symlink.symlink_data = "target";
		st = call(NFSPROC3_SYMLINK, (xdrproc_t)xdr_SYMLINK3args, &sl,
			  (xdrproc_t)xdr_SYMLINK3res, &res);
		it_free((xdrproc_t)xdr_SYMLINK3res, &res);
		return st;
	case K_MKNOD:
		memset(&mn, 0, sizeof(mn));
		mn.where.dir = root;
		mn.where.name = (char *)name;
		mn.what.type = NF3FIFO;
		st = call(NFSPROC3_MKNOD, (xdrproc_t)xdr_MKNOD3args, &mn, (xdrproc_t)xdr_MKNOD3res, &res);
		it_free((xdrproc_t)xdr_MKNOD3res, &res);
		return st;
	case K_LINK:
		memset(&ln, 0, sizeof(ln));
		ln.file = linked;
		ln.link.dir = root;
		ln.link.name = (char *)name;
		st = call(NFSPROC3_LINK, (xdrproc_t)xdr_LINK3args, &ln, (xdrproc_t)xdr_LINK3res, &res);
		it_free((xdrproc_t)xdr_LINK3res, &res);
		return st;
	case K_RENAME:
		return do_rename(name);
	case K_REMOVE_LOWER:
	case K_REMOVE_UPPER:
		return do_remove(name);
	default:
		fail_msg("no change of kind %d", k);
	}
	return NFS3ERR_INVAL;
}

static void change_name(enum kind k, int i, char *out, size_t len)
{
	snprintf(out, len, "k%d-%d", (int)k, i);
}

/* 1 a whiteout, 0 nothing, -1 something else at name in the upper branch. */
static int upper_has(const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	it_path(p, "%s/%s", srv.is_upper, name);
	if (lstat(p, &st) < 0) {
		if (errno != ENOENT)
			fail_msg("lstat %s: %s", p, strerror(errno));
		return 0;
	}
	return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) ? 1 : -1;
}

/* What the upper holds at a kind's name before its change: the state it must come back to. */
static int upper_before(enum kind k)
{
	if (k == K_FILE_OVER_WH || k == K_DIR_OVER_WH)
		return 1;
	return k == K_RENAME || k == K_REMOVE_UPPER ? -1 : 0;
}

/* What the upper holds at a kind's name after its change succeeded. */
static void assert_done(enum kind k, const char *name)
{
	int has = upper_has(name);
	int want = k == K_REMOVE_LOWER ? 1 : k == K_RENAME || k == K_REMOVE_UPPER ? 0 : -1;
	char to[256];

	if (has != want)
		fail_msg("%s %s succeeded but the upper holds %d at the name", kind_name[k], name, has);
	moved_name(name, to, sizeof(to));
	if (k == K_RENAME && upper_has(to) != -1)
		fail_msg("%s %s succeeded but nothing is at %s", kind_name[k], name, to);
}

/* A failed change: the upper holds what it held before, at the new name of a rename too. */
static void assert_no_trace(enum kind k, const char *name)
{
	char to[256];

	if (upper_has(name) != upper_before(k))
		fail_msg("%s %s answered NFS3ERR_NOSPC but the upper holds %d at the name (want %d)",
			 kind_name[k], name, upper_has(name), upper_before(k));
	moved_name(name, to, sizeof(to));
	if (k == K_RENAME && upper_has(to) != 0)
		fail_msg("%s %s answered NFS3ERR_NOSPC but %s exists", kind_name[k], name, to);
}

/* Names the server uses for a moment in the upper (.wh..unionnfsd.*) left behind. */
static int upper_temporaries(void)
{
	DIR *d = opendir(srv.is_upper);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, ".wh..unionnfsd.", 15)) {
			fprintf(stderr, "left in the upper: %s\n", e->d_name);
			n++;
		}
	closedir(d);
	return n;
}

/* Lower files for the kinds that need one, and whiteouts over those that need them. */
static void make_lower_names(void)
{
	char name[64], p[PATH_MAX];

	for (int k = K_FILE_OVER_WH; k <= K_REMOVE_LOWER; k++)
		for (int i = 0; i <= T_TRIES; i++) {
			change_name(k, i, name, sizeof(name));
			it_path(p, "%s/%s", srv.is_lower, name);
			if (k == K_DIR_OVER_WH)
				assert_int_equal(mkdir(p, 0755), 0);
			else
				it_write_file(p, "lower\n", 6);
			if (k == K_REMOVE_LOWER)
				continue;
			it_path(p, "%s/%s", srv.is_upper, name);
			if (mknod(p, S_IFCHR | 0600, makedev(0, 0)) < 0)
				fail_msg("mknod %s: %s", p, strerror(errno));
		}
}

/* Fills the state file system with one file until it is full; returns its path. */
static void fill_state(char *path)
{
	static char block[65536];
	int fd;

	it_path(path, "%s/filler", srv.is_state);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (;;) {
		ssize_t n = write(fd, block, sizeof(block));

		if (n < 0 && errno == ENOSPC)
			break;
		if (n <= 0)
			fail_msg("filling %s: %s", path, n < 0 ? strerror(errno) : "wrote nothing");
	}
	/* The last partial block too. */
	while (write(fd, block, 1) == 1)
		;
	close(fd);
}

static int setup(void **state)
{
	char p[PATH_MAX];

	(void)state;
	it_server_init(&srv, true);
	assert_int_equal(mkdir(srv.is_state, 0700), 0);
	if (mount("unfs-test-state", srv.is_state, "tmpfs", 0, T_TMPFS_SIZE) < 0) {
		fprintf(stderr, "cannot mount a tmpfs (%s): this test needs root; skipped\n",
			strerror(errno));
		return 0;
	}
	mounted = true;
	it_path(p, "%s/linked", srv.is_upper);
	it_write_file(p, "l\n", 2);
	for (int i = 0; i <= T_MAPPED; i++) {
		char name[64];

		change_name(K_RENAME, i, name, sizeof(name));
		it_path(p, "%s/%s", srv.is_upper, name);
		it_write_file(p, "r\n", 2);
		change_name(K_REMOVE_UPPER, i, name, sizeof(name));
		it_path(p, "%s/%s", srv.is_upper, name);
		it_write_file(p, "u\n", 2);
		it_path(p, "%s/gone-%d", srv.is_upper, i);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	make_lower_names();
	if (it_server_start(&srv) < 0)
		return -1;
	if (it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_lookup(clnt, &root, "linked", &linked, NULL), NFS3_OK);
	return 0;
}

static int teardown(void **state)
{
	int r = 0;

	(void)state;
	if (clnt)
		it_clnt_destroy(clnt);
	it_fh_free(&root);
	it_fh_free(&linked);
	if (srv.is_pid)
		r = it_server_stop(&srv) == 0 ? 0 : -1;
	if (mounted && umount2(srv.is_state, MNT_DETACH) < 0)
		r = -1;
	it_server_cleanup(&srv);
	return r;
}

/* unionnfsd-ctl --state STATE a1 [a2]: must exit with status code and say want. */
static void run_ctl_check(const char *a1, const char *a2, int code, const char *want)
{
	static char out[T_OUT];
	const char *build = getenv("BUILD");
	char ctl[PATH_MAX];
	int rc;

	it_path(ctl, "%s/unionnfsd-ctl", build && *build ? build : "build");
	char *argv[] = { ctl, "--state", srv.is_state, (char *)a1, (char *)a2, NULL };
	rc = it_run(argv, 60, out, sizeof(out));
	if (rc != code || !strstr(out, want))
		fail_msg("unionnfsd-ctl %s %s exited %d, want \"%s\":\n%s", a1, a2 ? a2 : "", rc,
			 want, out);
}

static void test_full_state_leaves_no_trace(void **state)
{
	char filler[PATH_MAX], name[64];
	int failed_at[K_COUNT];
	fattr3 attr;
	nfsstat3 st;

	(void)state;
	if (!mounted)
		skip();
	/* Names mapped first, so that changes to them get as far as the branch. */
	for (int i = 0; i <= T_MAPPED; i++) {
		change_name(K_REMOVE_LOWER, i, name, sizeof(name));
		it_assert_status(it_lookup(clnt, &root, name, NULL, &attr), NFS3_OK);
		change_name(K_RENAME, i, name, sizeof(name));
		it_assert_status(it_lookup(clnt, &root, name, NULL, &attr), NFS3_OK);
		change_name(K_REMOVE_UPPER, i, name, sizeof(name));
		it_assert_status(it_lookup(clnt, &root, name, NULL, &attr), NFS3_OK);
		snprintf(name, sizeof(name), "gone-%d", i);
		it_assert_status(it_lookup(clnt, &root, name, NULL, &attr), NFS3_OK);
	}
	fill_state(filler);
	for (int k = 0; k < K_COUNT; k++) {
		failed_at[k] = -1;
		int tries = k >= K_REMOVE_LOWER ? T_MAPPED : T_TRIES;

		for (int i = 0; i < tries && failed_at[k] < 0; i++) {
			change_name(k, i, name, sizeof(name));
			st = do_change(k, name);
			if (st == NFS3_OK) {
				assert_done(k, name);
				continue;
			}
			if (st != NFS3ERR_NOSPC)
				it_server_dump_log(&srv);
			if (st != NFS3ERR_NOSPC)
				fail_msg("%s %s: got %s, want NFS3ERR_NOSPC", kind_name[k], name,
					 it_nfsstat_name(st));
			assert_no_trace(k, name);
			/* The union shows nothing new (a lookup of a mapped lower name would add). */
			if (k < K_REMOVE_LOWER)
				it_assert_status(it_lookup(clnt, &root, name, NULL, &attr),
						 NFS3ERR_NOENT);
			failed_at[k] = i;
		}
		if (failed_at[k] < 0)
			fail_msg("%s never failed on a full state file system", kind_name[k]);
		fprintf(stderr, "%s: failed (NOSPC, no trace) after %d successes\n", kind_name[k],
			failed_at[k]);
	}
	assert_true(it_server_log_contains(&srv, "free space on that file system"));

	/* A removed upper directory cannot come back: success, whatever the map managed. */
	for (int i = 0; !it_server_log_contains(&srv, "did not take the change at gone-"); i++) {
		if (i == T_MAPPED)
			fail_msg("no RMDIR of an upper directory met a full map");
		snprintf(name, sizeof(name), "gone-%d", i);
		it_assert_status(do_rmdir(name), NFS3_OK);
		assert_int_equal(upper_has(name), 0);
	}

	/*
	 * Space again. The removed directory's record is stale, as after a crash between the
	 * unlink and the map's commit (checked before new files may reuse its inode number).
	 */
	assert_int_equal(unlink(filler), 0);
	/* Exit status 3: stale records are left in the map. */
	run_ctl_check("check", NULL, 3, "\n1 stale, 0 dropped, 0 errors");
	run_ctl_check("check", "--repair", 0, "1 dropped, 0 errors");
	/* The same changes succeed, and the map agrees with the branches. */
	for (int k = 0; k < K_COUNT; k++) {
		change_name(k, failed_at[k], name, sizeof(name));
		st = do_change(k, name);
		if (st != NFS3_OK)
			fail_msg("%s %s with space again: %s", kind_name[k], name, it_nfsstat_name(st));
		assert_done(k, name);
	}
	run_ctl_check("check", NULL, 0, "\n0 stale, 0 dropped, 0 errors");
	assert_int_equal(upper_temporaries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_state_leaves_no_trace),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
