/*
 * Several writable branches through a real client (libnfs): three writable branches, each a
 * small tmpfs of its own size, over a read-only base. Where creates land under mfs (the
 * emptiest branch; one out of inodes is skipped, never an error), under tdp (that error is
 * the client's), under rr (evenly, parents made in every branch); removes and renames across
 * branches; FSSTAT's sum; fileids across restarts; `unionnfsd-ctl check` clean after.
 * Needs root for the tmpfs mounts (skipped without).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define NW 3
#define T_OUT 65536

/* Branch sizes: w1 has the most room, w2 the least; w0 runs out of inodes first. */
static const char *const tmpfs_opts[NW] = { "size=8m,nr_inodes=12", "size=16m",
					    "size=4m" };
static const long long tmpfs_bytes[NW] = { 8 << 20, 16 << 20, 4 << 20 };

static struct it_server srv;
static char wb[NW][PATH_MAX], branches[5 * PATH_MAX];
static bool mounted[NW];

static void check_rc(struct nfs_context *nfs, int rc, const char *what)
{
	if (rc < 0)
		fail_msg("%s: %s (%s)", what, strerror(-rc), nfs_get_error(nfs));
}

static void unmount_all(void)
{
	for (int b = 0; b < NW; b++)
		if (mounted[b] && umount2(wb[b], MNT_DETACH) == 0)
			mounted[b] = false;
}

/* The branches and the server, opts its -o; false (test skipped) without tmpfs mounts. */
static bool start(const char *opts)
{
	it_server_init(&srv, true);
	for (int b = 0; b < NW; b++) {
		it_path(wb[b], "%s/w%d", srv.is_dir, b);
		assert_int_equal(mkdir(wb[b], 0755), 0);
		if (mount("unfs-test-w", wb[b], "tmpfs", 0, tmpfs_opts[b]) < 0) {
			fprintf(stderr, "cannot mount a tmpfs (%s): this test needs root; skipped\n",
				strerror(errno));
			unmount_all();
			return false;
		}
		mounted[b] = true;
	}
	snprintf(branches, sizeof(branches), "%s=rw:%s=rw:%s=rw:%s=ro", wb[0], wb[1], wb[2],
		 srv.is_lower);
	srv.is_branches = branches;
	srv.is_opts = opts;
	assert_int_equal(it_server_start(&srv), 0);
	return true;
}

static int teardown(void **state)
{
	int r = 0;

	(void)state;
	if (srv.is_dir[0] && srv.is_pid)
		r = it_server_stop(&srv) == 0 ? 0 : -1;
	unmount_all();
	if (srv.is_dir[0] && it_server_finish(&srv) < 0)
		r = -1;
	return r;
}

static bool in_branch(int b, const char *rel)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", wb[b], rel);
	return it_exists(p);
}

static void make(struct nfs_context *nfs, const char *path)
{
	struct nfsfh *fh;

	check_rc(nfs, nfs_creat(nfs, path, 0644, &fh), path);
	nfs_close(nfs, fh);
}

static void ctl_check_clean(void)
{
	char out[T_OUT];
	char *argv[] = { (char *)it_ctl_binary(), "--state", srv.is_state, "check", NULL };

	if (it_run(argv, 60, out, sizeof(out)) != 0)
		fail_msg("unionnfsd-ctl check is not clean:\n%s", out);
}

/*
 * mfs: the emptiest branch first; a branch that fills up stops being chosen; one out of
 * inodes answers ENOSPC to the server, which tries the next one: the client sees no error.
 * statfs=policy: FSSTAT reports the branch mfs would pick.
 */
static void test_mfs(void **state)
{
	char data[64 * 1024], path[64];
	struct nfs_context *nfs;
	struct statvfs sv;
	struct nfsfh *fh;
	int in[NW] = { 0 };

	(void)state;
	if (!start("create=mfs:0,statfs=policy,no_root_squash,insecure"))
		return;
	nfs = it_nfs_mount(&srv);
	/* statfs=policy: the space of the branch mfs would pick now, w1 */
	check_rc(nfs, nfs_statvfs(nfs, "/", &sv), "statvfs");
	assert_int_equal((long long)sv.f_blocks * (long long)sv.f_frsize, tmpfs_bytes[1]);
	make(nfs, "/first");
	assert_true(in_branch(1, "first"));
	/* 13 MiB in w1 leaves it the least room: the next ones go to w0 (8 MiB) ... */
	check_rc(nfs, nfs_open(nfs, "/first", O_WRONLY, &fh), "open /first");
	memset(data, 'x', sizeof(data));
	for (int i = 0; i < 13 * 16; i++)
		assert_int_equal(nfs_pwrite(nfs, fh, (uint64_t)i * sizeof(data), sizeof(data), data),
				 (int)sizeof(data));
	nfs_close(nfs, fh);
	/* ... until w0 runs out of inodes; then w2 (4 MiB) and w1 (3 MiB) share the rest. */
	for (int i = 0; i < 30; i++) {
		snprintf(path, sizeof(path), "/f.%d", i);
		make(nfs, path);
		for (int b = 0; b < NW; b++)
			in[b] += in_branch(b, path + 1);
	}
	assert_int_equal(in[0] + in[1] + in[2], 30);
	assert_true(in[0] >= 5 && in[0] < 12);
	assert_true(in[2] > 0);
	it_nfs_unmount(nfs);
	it_server_restart(&srv);
	nfs = it_nfs_mount(&srv);
	for (int i = 0; i < 30; i++) {
		struct nfs_stat_64 st;

		snprintf(path, sizeof(path), "/f.%d", i);
		check_rc(nfs, nfs_stat64(nfs, path, &st), path);
	}
	it_nfs_unmount(nfs);
	ctl_check_clean();
}

/* tdp: the top branch out of inodes is the client's NFS3ERR_NOSPC; FSSTAT sums the space. */
static void test_tdp_nospc_and_fsstat(void **state)
{
	struct nfs_context *nfs;
	struct nfsfh *fh;
	struct statvfs sv;
	char path[64];
	long long total;
	int r = 0, i;

	(void)state;
	if (!start("no_root_squash,insecure"))
		return;
	nfs = it_nfs_mount(&srv);
	for (i = 0; i < 20 && r == 0; i++) {
		snprintf(path, sizeof(path), "/t.%d", i);
		r = nfs_creat(nfs, path, 0644, &fh);
		if (r == 0) {
			nfs_close(nfs, fh);
			assert_true(in_branch(0, path + 1));
		}
	}
	assert_int_equal(r, -ENOSPC);
	check_rc(nfs, nfs_statvfs(nfs, "/", &sv), "statvfs");
	total = (long long)sv.f_blocks * (long long)sv.f_frsize;
	assert_int_equal(total, tmpfs_bytes[0] + tmpfs_bytes[1] + tmpfs_bytes[2]);
	it_nfs_unmount(nfs);
	ctl_check_clean();
}

/* rr: evenly, each branch getting the parent directory; fileids stay across a restart. */
static void test_rr(void **state)
{
	struct nfs_stat_64 before[24], after;
	struct nfs_context *nfs;
	char path[PATH_MAX];
	int in[NW] = { 0 };

	(void)state;
	if (!start("create=rr,no_root_squash,insecure"))
		return;
	it_path(path, "%s/d", srv.is_lower);
	assert_int_equal(mkdir(path, 0755), 0);
	nfs = it_nfs_mount(&srv);
	for (int i = 0; i < 24; i++) {
		snprintf(path, sizeof(path), "/d/f.%d", i);
		make(nfs, path);
		check_rc(nfs, nfs_stat64(nfs, path, &before[i]), path);
		for (int b = 0; b < NW; b++)
			in[b] += in_branch(b, path + 1);
	}
	for (int b = 0; b < NW; b++)
		assert_int_equal(in[b], 8);
	it_nfs_unmount(nfs);
	it_server_restart(&srv);
	nfs = it_nfs_mount(&srv);
	for (int i = 0; i < 24; i++) {
		snprintf(path, sizeof(path), "/d/f.%d", i);
		check_rc(nfs, nfs_stat64(nfs, path, &after), path);
		assert_int_equal(after.nfs_ino, before[i].nfs_ino);
	}
	it_nfs_unmount(nfs);
	ctl_check_clean();
}

/* Remove and rename across branches, as a client sees them and as the branches hold them. */
static void test_remove_rename(void **state)
{
	struct nfs_stat_64 st, moved;
	struct nfs_context *nfs;
	char p[PATH_MAX];

	(void)state;
	if (!start("no_root_squash,insecure"))
		return;
	for (int b = 1; b < NW; b++) {
		it_path(p, "%s/x", wb[b]);
		it_write_file(p, "w", 1);
	}
	it_path(p, "%s/x", srv.is_lower);
	it_write_file(p, "base", 4);
	it_path(p, "%s/f", wb[2]);
	it_write_file(p, "from w2", 7);
	it_path(p, "%s/d", wb[1]);
	assert_int_equal(mkdir(p, 0755), 0);
	nfs = it_nfs_mount(&srv);
	check_rc(nfs, nfs_unlink(nfs, "/x"), "unlink /x");
	assert_int_equal(nfs_stat64(nfs, "/x", &st), -ENOENT);
	assert_false(in_branch(2, "x"));
	check_rc(nfs, nfs_stat64(nfs, "/f", &st), "stat /f");
	check_rc(nfs, nfs_rename(nfs, "/f", "/d/g"), "rename /f /d/g");
	check_rc(nfs, nfs_stat64(nfs, "/d/g", &moved), "stat /d/g");
	assert_int_equal(moved.nfs_ino, st.nfs_ino);
	assert_int_equal(nfs_stat64(nfs, "/f", &st), -ENOENT);
	it_nfs_unmount(nfs);
	it_server_restart(&srv);
	nfs = it_nfs_mount(&srv);
	assert_int_equal(nfs_stat64(nfs, "/x", &st), -ENOENT);
	assert_int_equal(nfs_stat64(nfs, "/f", &st), -ENOENT);
	check_rc(nfs, nfs_stat64(nfs, "/d/g", &st), "stat /d/g after the restart");
	assert_int_equal(st.nfs_ino, moved.nfs_ino);
	it_nfs_unmount(nfs);
	ctl_check_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_mfs, teardown),
		cmocka_unit_test_teardown(test_tdp_nospc_and_fsstat, teardown),
		cmocka_unit_test_teardown(test_rr, teardown),
		cmocka_unit_test_teardown(test_remove_rename, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
