/*
 * The NFS procedures through libnfs's high-level API, as an application would use them,
 * checked against what lands in the branch directories on disk.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

static struct nfs_context *nfs;

static int setup(void **state)
{
	if (it_group_setup_union(state) != 0)
		return -1;
	/* Files the lower branch holds before the server starts. */
	{
		char p[PATH_MAX];

		it_path(p, "%s/lowerfile", it_srv.is_lower);
		it_write_file(p, "from the lower branch\n", 22);
		it_path(p, "%s/lowerdir", it_srv.is_lower);
		mkdir(p, 0755);
		it_path(p, "%s/lowerdir/inner", it_srv.is_lower);
		it_write_file(p, "inner\n", 6);
	}
	{
		char url[256];

		it_nfs_url(&it_srv, url, sizeof(url));
		nfs = it_nfs_mount_url(url);
	}
	if (!nfs) {
		it_server_dump_log(&it_srv);
		it_server_stop(&it_srv);
		it_server_cleanup(&it_srv);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	it_nfs_unmount(nfs);
	nfs = NULL;
	return it_group_teardown(state);
}

static void upper_path(char *out, const char *rel)
{
	it_path(out, "%s/%s", it_srv.is_upper, rel);
}

static void disk_stat(const char *rel, struct stat *st)
{
	char p[PATH_MAX];

	upper_path(p, rel);
	if (lstat(p, st) != 0)
		fail_msg("%s is not in the upper branch: %s", p, strerror(errno));
}

static void check_rc(int rc, const char *what)
{
	if (rc < 0)
		fail_msg("%s: %s (%s)", what, strerror(-rc), nfs_get_error(nfs));
}

/* Writes len bytes of pattern seed through NFS into a new file at path. */
static void nfs_put(const char *path, size_t len, uint32_t seed)
{
	struct nfsfh *fh = NULL;
	char *buf = malloc(len ? len : 1);
	size_t done = 0;

	it_fill(buf, len, seed);
	check_rc(nfs_creat(nfs, path, 0644, &fh), path);
	while (done < len) {
		int n = nfs_pwrite(nfs, fh, done, len - done, buf + done);

		check_rc(n, "pwrite");
		assert_true(n > 0);
		done += (size_t)n;
	}
	check_rc(nfs_close(nfs, fh), "close");
	free(buf);
}

static void test_root_attributes(void **state)
{
	struct nfs_stat_64 st;

	(void)state;
	check_rc(nfs_stat64(nfs, "/", &st), "stat /");
	assert_true(S_ISDIR(st.nfs_mode));
	assert_int_not_equal(st.nfs_ino, 0);
}

static void test_write_then_read_matches_disk(void **state)
{
	const size_t len = 3 * 1024 * 1024 + 1234; /* several maximal WRITEs and a short one */
	struct nfsfh *fh = NULL;
	char *want = malloc(len), *got = malloc(len), *disk;
	char p[PATH_MAX];
	size_t disk_len, done = 0;
	struct nfs_stat_64 st;

	(void)state;
	nfs_put("/big", len, 7);
	it_fill(want, len, 7);
	upper_path(p, "big");
	disk = it_read_file(p, &disk_len);
	assert_non_null(disk);
	assert_int_equal(disk_len, len);
	assert_memory_equal(disk, want, len);
	free(disk);

	check_rc(nfs_stat64(nfs, "/big", &st), "stat /big");
	assert_int_equal(st.nfs_size, len);
	assert_true(S_ISREG(st.nfs_mode));

	check_rc(nfs_open(nfs, "/big", O_RDONLY, &fh), "open /big");
	while (done < len) {
		int n = nfs_pread(nfs, fh, done, len - done, got + done);

		check_rc(n, "pread");
		if (n == 0)
			fail_msg("short read at %zu of %zu", done, len);
		done += (size_t)n;
	}
	assert_memory_equal(got, want, len);
	/* Reading at and past the end gives nothing. */
	assert_int_equal(nfs_pread(nfs, fh, len, 100, got), 0);
	assert_int_equal(nfs_pread(nfs, fh, len + 5000, 100, got), 0);
	check_rc(nfs_close(nfs, fh), "close");
	free(want);
	free(got);
}

static void test_host_file_visible(void **state)
{
	char p[PATH_MAX], buf[64];
	struct nfsfh *fh = NULL;
	struct nfs_stat_64 st;
	int n;

	(void)state;
	upper_path(p, "from-host");
	it_write_file(p, "written on the server's disk\n", 29);
	check_rc(nfs_stat64(nfs, "/from-host", &st), "stat /from-host");
	assert_int_equal(st.nfs_size, 29);
	check_rc(nfs_open(nfs, "/from-host", O_RDONLY, &fh), "open");
	n = nfs_pread(nfs, fh, 0, sizeof(buf), buf);
	assert_int_equal(n, 29);
	assert_memory_equal(buf, "written on the server's disk\n", 29);
	nfs_close(nfs, fh);
}

static void test_overwrite_middle(void **state)
{
	struct nfsfh *fh = NULL;
	char p[PATH_MAX], *disk;
	size_t len;

	(void)state;
	nfs_put("/mid", 10, 1);
	check_rc(nfs_open(nfs, "/mid", O_RDWR, &fh), "open");
	assert_int_equal(nfs_pwrite(nfs, fh, 3, 4, "ABCD"), 4);
	/* A write past the end leaves a hole of zeros. */
	assert_int_equal(nfs_pwrite(nfs, fh, 20, 2, "ZZ"), 2);
	check_rc(nfs_fsync(nfs, fh), "fsync (COMMIT)");
	nfs_close(nfs, fh);
	upper_path(p, "mid");
	disk = it_read_file(p, &len);
	assert_int_equal(len, 22);
	assert_memory_equal(disk + 3, "ABCD", 4);
	for (int i = 10; i < 20; i++)
		assert_int_equal(disk[i], 0);
	assert_memory_equal(disk + 20, "ZZ", 2);
	free(disk);
}

static void test_mkdir_rmdir(void **state)
{
	struct stat st;
	struct nfs_stat_64 ns;
	char p[PATH_MAX];

	(void)state;
	check_rc(nfs_mkdir2(nfs, "/dir1", 0750), "mkdir /dir1");
	check_rc(nfs_mkdir(nfs, "/dir1/sub"), "mkdir /dir1/sub");
	disk_stat("dir1/sub", &st);
	assert_true(S_ISDIR(st.st_mode));
	disk_stat("dir1", &st);
	assert_int_equal(st.st_mode & 07777, 0750);
	check_rc(nfs_stat64(nfs, "/dir1", &ns), "stat /dir1");
	assert_true(S_ISDIR(ns.nfs_mode));
	assert_int_equal(ns.nfs_mode & 07777, 0750);
	assert_int_equal(nfs_rmdir(nfs, "/dir1"), -ENOTEMPTY);
	check_rc(nfs_rmdir(nfs, "/dir1/sub"), "rmdir /dir1/sub");
	check_rc(nfs_rmdir(nfs, "/dir1"), "rmdir /dir1");
	upper_path(p, "dir1");
	assert_false(it_exists(p));
	assert_int_equal(nfs_stat64(nfs, "/dir1", &ns), -ENOENT);
}

static void test_unlink(void **state)
{
	char p[PATH_MAX];
	struct nfs_stat_64 ns;

	(void)state;
	nfs_put("/gone", 100, 2);
	upper_path(p, "gone");
	assert_true(it_exists(p));
	check_rc(nfs_unlink(nfs, "/gone"), "unlink");
	assert_false(it_exists(p));
	assert_int_equal(nfs_stat64(nfs, "/gone", &ns), -ENOENT);
	assert_int_equal(nfs_unlink(nfs, "/gone"), -ENOENT);
}

static void test_rename_keeps_handle_and_fileid(void **state)
{
	struct nfsfh *fh = NULL;
	struct nfs_stat_64 before, after;
	char p[PATH_MAX], buf[16];

	(void)state;
	check_rc(nfs_mkdir(nfs, "/ra"), "mkdir /ra");
	check_rc(nfs_mkdir(nfs, "/rb"), "mkdir /rb");
	nfs_put("/ra/f", 16, 3);
	check_rc(nfs_stat64(nfs, "/ra/f", &before), "stat");
	check_rc(nfs_open(nfs, "/ra/f", O_RDWR, &fh), "open");
	check_rc(nfs_rename(nfs, "/ra/f", "/ra/g"), "rename within a directory");
	check_rc(nfs_rename(nfs, "/ra/g", "/rb/h"), "rename across directories");
	upper_path(p, "rb/h");
	assert_true(it_exists(p));
	upper_path(p, "ra/f");
	assert_false(it_exists(p));
	check_rc(nfs_stat64(nfs, "/rb/h", &after), "stat after rename");
	assert_int_equal(before.nfs_ino, after.nfs_ino);
	/* The handle taken before both renames still works. */
	assert_int_equal(nfs_pread(nfs, fh, 0, 16, buf), 16);
	assert_int_equal(nfs_pwrite(nfs, fh, 0, 2, "xy"), 2);
	nfs_close(nfs, fh);
	/* Rename over an existing file replaces it. */
	nfs_put("/rb/victim", 5, 4);
	check_rc(nfs_rename(nfs, "/rb/h", "/rb/victim"), "rename over a file");
	check_rc(nfs_stat64(nfs, "/rb/victim", &after), "stat");
	assert_int_equal(after.nfs_ino, before.nfs_ino);
	assert_int_equal(after.nfs_size, 16);
	/* Renaming a directory moves its contents. */
	check_rc(nfs_rename(nfs, "/rb", "/ra/rb2"), "rename a directory");
	check_rc(nfs_stat64(nfs, "/ra/rb2/victim", &after), "stat in the moved directory");
	assert_int_equal(after.nfs_ino, before.nfs_ino);
	upper_path(p, "ra/rb2/victim");
	assert_true(it_exists(p));
}

static void test_hard_link(void **state)
{
	struct nfs_stat_64 a, b;
	struct stat da, db;

	(void)state;
	nfs_put("/l1", 10, 5);
	check_rc(nfs_link(nfs, "/l1", "/l2"), "link");
	check_rc(nfs_stat64(nfs, "/l1", &a), "stat l1");
	check_rc(nfs_stat64(nfs, "/l2", &b), "stat l2");
	assert_int_equal(a.nfs_ino, b.nfs_ino);
	assert_int_equal(a.nfs_nlink, 2);
	assert_int_equal(b.nfs_nlink, 2);
	disk_stat("l1", &da);
	disk_stat("l2", &db);
	assert_int_equal(da.st_ino, db.st_ino);
	assert_int_equal(da.st_nlink, 2);
	assert_int_equal(nfs_link(nfs, "/l1", "/l2"), -EEXIST);
	check_rc(nfs_unlink(nfs, "/l1"), "unlink l1");
	check_rc(nfs_stat64(nfs, "/l2", &b), "stat l2 after unlinking l1");
	assert_int_equal(b.nfs_nlink, 1);
	assert_int_equal(b.nfs_ino, a.nfs_ino);
}

static void test_symlink_readlink(void **state)
{
	char buf[256], p[PATH_MAX];
	struct nfs_stat_64 st;
	ssize_t n;

	(void)state;
	check_rc(nfs_symlink(nfs, "some/where/else", "/sl"), "symlink");
	upper_path(p, "sl");
	n = readlink(p, buf, sizeof(buf));
	assert_int_equal(n, 15);
	assert_memory_equal(buf, "some/where/else", 15);
	memset(buf, 0, sizeof(buf));
	check_rc(nfs_readlink(nfs, "/sl", buf, sizeof(buf)), "readlink");
	assert_string_equal(buf, "some/where/else");
	check_rc(nfs_lstat64(nfs, "/sl", &st), "lstat");
	assert_true(S_ISLNK(st.nfs_mode));
	assert_int_equal(st.nfs_size, 15);
	/* A symlink made on disk pointing out of the branch is only data, never followed. */
	upper_path(p, "escape");
	assert_int_equal(symlink("/etc", p), 0);
	memset(buf, 0, sizeof(buf));
	check_rc(nfs_readlink(nfs, "/escape", buf, sizeof(buf)), "readlink escape");
	assert_string_equal(buf, "/etc");
}

static void test_chmod_chown_utimes(void **state)
{
	struct timeval tv[2] = { { 1000000000, 0 }, { 1234567890, 0 } };
	struct nfs_stat_64 ns;
	struct stat st;

	(void)state;
	nfs_put("/attrs", 1, 6);
	check_rc(nfs_chmod(nfs, "/attrs", 0640), "chmod");
	disk_stat("attrs", &st);
	assert_int_equal(st.st_mode & 07777, 0640);
	check_rc(nfs_chown(nfs, "/attrs", 1234, 5678), "chown");
	disk_stat("attrs", &st);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 5678);
	check_rc(nfs_utimes(nfs, "/attrs", tv), "utimes");
	disk_stat("attrs", &st);
	assert_int_equal(st.st_atime, 1000000000);
	assert_int_equal(st.st_mtime, 1234567890);
	check_rc(nfs_stat64(nfs, "/attrs", &ns), "stat");
	assert_int_equal(ns.nfs_mode & 07777, 0640);
	assert_int_equal(ns.nfs_uid, 1234);
	assert_int_equal(ns.nfs_gid, 5678);
	assert_int_equal(ns.nfs_mtime, 1234567890);
	assert_int_equal(ns.nfs_atime, 1000000000);
}

static void test_truncate(void **state)
{
	struct nfsfh *fh = NULL;
	struct stat st;
	char p[PATH_MAX], *disk;
	size_t len;

	(void)state;
	nfs_put("/trunc", 5000, 8);
	check_rc(nfs_truncate(nfs, "/trunc", 10), "truncate");
	disk_stat("trunc", &st);
	assert_int_equal(st.st_size, 10);
	check_rc(nfs_open(nfs, "/trunc", O_RDWR, &fh), "open");
	check_rc(nfs_ftruncate(nfs, fh, 1 << 20), "ftruncate up");
	nfs_close(nfs, fh);
	disk_stat("trunc", &st);
	assert_int_equal(st.st_size, 1 << 20);
	upper_path(p, "trunc");
	disk = it_read_file(p, &len);
	for (size_t i = 10; i < len; i++)
		if (disk[i] != 0)
			fail_msg("byte %zu after extending truncate is %d", i, disk[i]);
	free(disk);
	/* O_TRUNC on open */
	check_rc(nfs_open(nfs, "/trunc", O_WRONLY | O_TRUNC, &fh), "open O_TRUNC");
	nfs_close(nfs, fh);
	disk_stat("trunc", &st);
	assert_int_equal(st.st_size, 0);
}

static void test_statvfs(void **state)
{
	struct nfs_statvfs_64 sv;
	struct statvfs local;
	double nfs_total, disk_total;

	(void)state;
	check_rc(nfs_statvfs64(nfs, "/", &sv), "statvfs (FSSTAT)");
	assert_int_equal(statvfs(it_srv.is_upper, &local), 0);
	nfs_total = (double)sv.f_blocks * (double)sv.f_frsize;
	disk_total = (double)local.f_blocks * (double)local.f_frsize;
	assert_true(nfs_total > 0);
	if (nfs_total < disk_total * 0.99 || nfs_total > disk_total * 1.01)
		fail_msg("FSSTAT total bytes %.0f, the upper's file system has %.0f", nfs_total,
			 disk_total);
	assert_true(sv.f_bfree <= sv.f_blocks);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_opendir_readdirplus(void **state)
{
	enum { N = 120 };
	struct nfsdir *dir = NULL;
	struct nfsdirent *de;
	char *names[N + 8];
	int n = 0, dots = 0;

	(void)state;
	check_rc(nfs_mkdir(nfs, "/many"), "mkdir /many");
	for (int i = 0; i < N; i++) {
		char path[128];

		snprintf(path, sizeof(path), "/many/entry-with-a-longish-name-%03d", i);
		nfs_put(path, (size_t)i, (uint32_t)i);
	}
	check_rc(nfs_opendir(nfs, "/many", &dir), "opendir (READDIRPLUS)");
	while ((de = nfs_readdir(nfs, dir)) != NULL) {
		if (!strcmp(de->name, ".") || !strcmp(de->name, "..")) {
			dots++;
			continue;
		}
		assert_true(n < N + 8);
		names[n++] = strdup(de->name);
		assert_int_not_equal(de->inode, 0);
		{
			char path[256];
			struct nfs_stat_64 st;
			int idx = atoi(de->name + strlen("entry-with-a-longish-name-"));

			snprintf(path, sizeof(path), "/many/%s", de->name);
			check_rc(nfs_stat64(nfs, path, &st), path);
			/* fileid in READDIRPLUS must equal the one GETATTR gives */
			assert_int_equal(st.nfs_ino, de->inode);
			assert_int_equal(de->size, (uint64_t)idx);
			assert_int_equal(de->type, NF3REG);
			assert_int_equal(de->mode & 0777, 0644);
		}
	}
	nfs_closedir(nfs, dir);
	assert_int_equal(dots, 2);
	assert_int_equal(n, N);
	qsort(names, n, sizeof(names[0]), name_cmp);
	for (int i = 0; i < n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "entry-with-a-longish-name-%03d", i);
		assert_string_equal(names[i], want);
		free(names[i]);
	}
}

static void test_fsync_commit(void **state)
{
	struct nfsfh *fh = NULL;

	(void)state;
	check_rc(nfs_creat(nfs, "/synced", 0644, &fh), "creat");
	assert_int_equal(nfs_pwrite(nfs, fh, 0, 6, "durable"), 6);
	check_rc(nfs_fsync(nfs, fh), "fsync (COMMIT)");
	nfs_close(nfs, fh);
}

static void test_access(void **state)
{
	(void)state;
	nfs_put("/acc", 1, 9);
	check_rc(nfs_access(nfs, "/acc", R_OK | W_OK), "access rw");
	check_rc(nfs_access(nfs, "/", R_OK | W_OK | X_OK), "access on the root");
	assert_int_equal(nfs_access(nfs, "/no-such", R_OK), -ENOENT);
}

static void test_mknod_fifo(void **state)
{
	struct stat st;
	struct nfs_stat_64 ns;

	(void)state;
	check_rc(nfs_mknod(nfs, "/fifo", S_IFIFO | 0640, 0), "mknod fifo");
	disk_stat("fifo", &st);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	check_rc(nfs_lstat64(nfs, "/fifo", &ns), "lstat fifo");
	assert_true(S_ISFIFO(ns.nfs_mode));
	assert_int_equal(nfs_mknod(nfs, "/fifo", S_IFIFO | 0640, 0), -EEXIST);
}

static void test_error_codes(void **state)
{
	struct nfsfh *fh = NULL;
	struct nfs_stat_64 st;

	(void)state;
	nfs_put("/plain", 3, 10);
	check_rc(nfs_mkdir(nfs, "/edir"), "mkdir");
	nfs_put("/edir/x", 3, 11);
	assert_int_equal(nfs_open(nfs, "/missing", O_RDONLY, &fh), -ENOENT);
	assert_int_equal(nfs_stat64(nfs, "/missing/deeper", &st), -ENOENT);
	assert_int_equal(nfs_mkdir(nfs, "/edir"), -EEXIST);
	assert_int_equal(nfs_mkdir(nfs, "/plain"), -EEXIST);
	assert_int_equal(nfs_create(nfs, "/plain", O_CREAT | O_EXCL | O_RDWR, 0644, &fh), -EEXIST);
	assert_int_equal(nfs_rmdir(nfs, "/edir"), -ENOTEMPTY);
	assert_int_equal(nfs_rmdir(nfs, "/plain"), -ENOTDIR);
	assert_int_equal(nfs_stat64(nfs, "/plain/x", &st), -ENOTDIR);
	assert_int_equal(nfs_mkdir(nfs, "/plain/x"), -ENOTDIR);
	assert_int_equal(nfs_rename(nfs, "/plain", "/edir"), -EISDIR);
	assert_int_equal(nfs_rename(nfs, "/edir", "/plain"), -ENOTDIR);
	assert_int_equal(nfs_rename(nfs, "/missing", "/x"), -ENOENT);
	assert_int_equal(nfs_unlink(nfs, "/missing"), -ENOENT);
	assert_int_equal(nfs_rmdir(nfs, "/missing"), -ENOENT);
	/* Still intact after all that. */
	check_rc(nfs_stat64(nfs, "/edir/x", &st), "stat /edir/x");
	check_rc(nfs_stat64(nfs, "/plain", &st), "stat /plain");
	assert_int_equal(st.nfs_size, 3);
}

static void test_lower_branch_visible(void **state)
{
	struct nfs_stat_64 st;
	struct nfsfh *fh = NULL;
	struct nfsdir *dir = NULL;
	struct nfsdirent *de;
	char buf[64];
	bool seen_file = false, seen_dir = false;

	(void)state;
	check_rc(nfs_stat64(nfs, "/lowerfile", &st), "stat a lower-branch file");
	assert_int_equal(st.nfs_size, 22);
	check_rc(nfs_open(nfs, "/lowerfile", O_RDONLY, &fh), "open a lower-branch file");
	assert_int_equal(nfs_pread(nfs, fh, 0, sizeof(buf), buf), 22);
	assert_memory_equal(buf, "from the lower branch\n", 22);
	nfs_close(nfs, fh);
	check_rc(nfs_stat64(nfs, "/lowerdir/inner", &st), "stat /lowerdir/inner");
	assert_int_equal(st.nfs_size, 6);
	check_rc(nfs_opendir(nfs, "/", &dir), "opendir /");
	while ((de = nfs_readdir(nfs, dir)) != NULL) {
		seen_file |= !strcmp(de->name, "lowerfile");
		seen_dir |= !strcmp(de->name, "lowerdir");
	}
	nfs_closedir(nfs, dir);
	assert_true(seen_file);
	assert_true(seen_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_attributes),
		cmocka_unit_test(test_write_then_read_matches_disk),
		cmocka_unit_test(test_host_file_visible),
		cmocka_unit_test(test_overwrite_middle),
		cmocka_unit_test(test_mkdir_rmdir),
		cmocka_unit_test(test_unlink),
		cmocka_unit_test(test_rename_keeps_handle_and_fileid),
		cmocka_unit_test(test_hard_link),
		cmocka_unit_test(test_symlink_readlink),
		cmocka_unit_test(test_chmod_chown_utimes),
		cmocka_unit_test(test_truncate),
		cmocka_unit_test(test_statvfs),
		cmocka_unit_test(test_opendir_readdirplus),
		cmocka_unit_test(test_fsync_commit),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_mknod_fifo),
		cmocka_unit_test(test_error_codes),
		cmocka_unit_test(test_lower_branch_visible),
	};

	return cmocka_run_group_tests_name("procs (libnfs)", tests, setup, teardown);
}
