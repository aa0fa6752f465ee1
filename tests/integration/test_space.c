/*
 * Removed files give their space and descriptors back, also when removed behind the server's
 * back.
 *
 * - test_remove_frees_space_{tmpfs,ext4}: the upper is a small tmpfs, or a small ext4 image
 *   (which reuses a freed inode number at once). Several connections (so several
 *   worker threads) write and read one big file, the rest of the upper is filled until
 *   NFS3ERR_NOSPC, the big file is removed: at once the server holds no descriptor of it,
 *   a WRITE that needs its space succeeds, and every file reads back the bytes written.
 * - test_removed_by_hand_closed: a lower file read through the server and removed by hand
 *   is closed within a few seconds without any call; another one read and removed is
 *   closed by the first call that finds its handle stale.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#define SP_TMPFS_SIZE "size=8m,mode=0755"
#define SP_EXT4_SIZE "8M"
#define SP_CONNS 6
#define SP_BIG (3u << 20)            /* removed to make room */
#define SP_PART (SP_BIG / SP_CONNS)  /* each connection writes its part of it */
#define SP_FILL_CHUNK (256u << 10)
#define SP_AFTER (2u << 20)          /* written after the remove: needs the big file's space */
#define SP_LOWER (1u << 20)
#define SP_CLOSED_WITHIN_S 5.0       /* "within a few seconds without traffic" */

static struct it_server srv;
static bool upper_mounted;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Descriptors the server holds on removed files under dir ("... (deleted)" links). */
static int deleted_fds(const char *dir)
{
	static const char mark[] = " (deleted)";
	char path[64], fdpath[384], target[PATH_MAX];
	struct dirent *de;
	size_t dirlen = strlen(dir);
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)srv.is_pid);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
		len = readlink(fdpath, target, sizeof(target) - 1);
		if (len < 0)
			continue; /* closed meanwhile */
		target[len] = '\0';
		if ((size_t)len > strlen(mark) && !strncmp(target, dir, dirlen) &&
		    !strcmp(target + len - strlen(mark), mark))
			n++;
	}
	closedir(d);
	return n;
}

struct deleted_fds_count {
	const char *dc_dir;
	int dc_n;        /* at the last look */
};

static bool no_deleted_fds(void *arg)
{
	struct deleted_fds_count *dc = arg;

	dc->dc_n = deleted_fds(dc->dc_dir);
	return dc->dc_n == 0;
}

/* Waits until the server holds no descriptor of a removed file under dir; how many it holds. */
static int deleted_fds_within(const char *dir, double seconds)
{
	struct deleted_fds_count dc = { dir, 0 };

	wait_until(no_deleted_fds, &dc, (int)(seconds * 1000));
	return dc.dc_n;
}

static void mount_failed(const char *what, const char *why)
{
	fprintf(stderr, "cannot mount %s on %s (%s): this test needs root\n", what, srv.is_upper,
		why);
	it_server_cleanup(&srv);
	skip();
}

static void mount_tmpfs_upper(void)
{
	if (mount("tmpfs", srv.is_upper, "tmpfs", 0, SP_TMPFS_SIZE) < 0)
		mount_failed("a tmpfs", strerror(errno));
	upper_mounted = true;
}

/* ext4 reuses a freed inode number at once, unlike tmpfs: an image file on a loop device. */
static void mount_ext4_upper(void)
{
	char img[PATH_MAX], out[1024];
	char *mkfs[] = { "mkfs.ext4", "-q", "-F", img, SP_EXT4_SIZE, NULL };
	char *mnt[] = { "mount", "-o", "loop", img, srv.is_upper, NULL };
	int fd;

	it_path(img, "%s/upper.img", srv.is_dir);
	fd = open(img, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	if (it_run(mkfs, 60, out, sizeof(out)) != 0)
		mount_failed("an ext4 image", out);
	if (it_run(mnt, 60, out, sizeof(out)) != 0)
		mount_failed("an ext4 image", out);
	upper_mounted = true;
}

static int after_each(void **state)
{
	int rc = 0;

	(void)state;
	if (srv.is_pid > 0 && it_server_stop(&srv) != 0)
		rc = -1;
	/* it_server_finish's checks; its clean-up must wait for the upper's unmount. */
	if (srv.is_dir[0] && (it_server_log_contains(&srv, "AddressSanitizer") ||
			      it_server_log_contains(&srv, "runtime error:") ||
			      it_server_log_contains(&srv, "LeakSanitizer"))) {
		fprintf(stderr, "sanitizer report in the server output\n");
		it_server_dump_log(&srv);
		rc = -1;
	}
	if (upper_mounted && umount2(srv.is_upper, MNT_DETACH) < 0)
		rc = -1;
	upper_mounted = false;
	if (srv.is_dir[0])
		it_server_cleanup(&srv);
	return rc;
}

struct sp_conn {
	struct nfs_context *sc_nfs;
	int sc_index;
	const uint8_t *sc_big;
	int sc_err;                  /* first libnfs error, 0 if none */
	char sc_what[128];
};

static void conn_fail(struct sp_conn *c, int err, const char *what)
{
	if (c->sc_err == 0) {
		c->sc_err = err ? err : -EIO;
		snprintf(c->sc_what, sizeof(c->sc_what), "%s: %s", what,
			 nfs_get_error(c->sc_nfs));
	}
}

/* Writes this connection's part of /big, then reads the whole file a few times. */
static void *conn_big(void *arg)
{
	struct sp_conn *c = arg;
	uint8_t *buf = malloc(SP_BIG);
	uint64_t off = (uint64_t)c->sc_index * SP_PART;
	struct nfsfh *fh;
	int r;

	if (!buf) {
		c->sc_err = -ENOMEM;
		return NULL;
	}
	r = nfs_open(c->sc_nfs, "/big", O_RDWR, &fh);
	if (r < 0) {
		conn_fail(c, r, "open /big");
		free(buf);
		return NULL;
	}
	r = nfs_pwrite(c->sc_nfs, fh, off, SP_PART, c->sc_big + off);
	if (r != (int)SP_PART)
		conn_fail(c, r, "write /big");
	for (int round = 0; round < 3 && c->sc_err == 0; round++) {
		r = nfs_pread(c->sc_nfs, fh, 0, SP_BIG, buf);
		if (r < 0)
			conn_fail(c, r, "read /big");
	}
	nfs_close(c->sc_nfs, fh);
	free(buf);
	return NULL;
}

static uint8_t *pattern(size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len);

	assert_non_null(b);
	it_fill(b, len, seed);
	return b;
}

/* The bytes fill_until_nospc writes at chunk k of a file. */
static void fill_chunk(uint8_t *chunk, uint64_t k, uint32_t seed)
{
	it_fill(chunk, SP_FILL_CHUNK, seed);
	chunk[0] = (uint8_t)k;
}

/*
 * Writes path in chunks until the server refuses (NFS3ERR_NOSPC) or writes less; returns
 * the bytes acknowledged, and in data (malloc) what the file holds: the last WRITE may
 * have stored part of its chunk before the space ran out.
 */
static uint64_t fill_until_nospc(struct nfs_context *nfs, const char *path, uint32_t seed,
				 uint8_t **data)
{
	uint64_t off = 0, cap = 16u << 20;
	struct nfsfh *fh;
	int r;

	*data = malloc(cap);
	assert_non_null(*data);
	assert_int_equal(nfs_creat(nfs, path, 0644, &fh), 0);
	for (;;) {
		assert_true(off + SP_FILL_CHUNK <= cap);
		fill_chunk(*data + off, off / SP_FILL_CHUNK, seed);
		r = nfs_pwrite(nfs, fh, off, SP_FILL_CHUNK, *data + off);
		if (r < 0) {
			printf("%s: the WRITE at %llu failed: %d (%s)\n", path,
			       (unsigned long long)off, r, nfs_get_error(nfs));
			break;
		}
		off += (uint64_t)r;
		if ((unsigned)r < SP_FILL_CHUNK)
			break; /* a short write: the file system is full */
	}
	nfs_close(nfs, fh);
	return off;
}

/* Reads path back and compares it with want, naming the first byte that differs. */
static void check_bytes(struct nfs_context *nfs, const char *path, const uint8_t *want,
			uint64_t len)
{
	struct nfs_stat_64 st;
	struct nfsfh *fh;
	uint8_t *got = malloc(len + 1);
	int r;

	assert_non_null(got);
	assert_int_equal(nfs_stat64(nfs, path, &st), 0);
	if (st.nfs_size != len)
		fail_msg("%s: size %llu, want %llu", path, (unsigned long long)st.nfs_size,
			 (unsigned long long)len);
	assert_int_equal(nfs_open(nfs, path, O_RDONLY, &fh), 0);
	r = nfs_pread(nfs, fh, 0, len, got);
	nfs_close(nfs, fh);
	if (r != (int)len)
		fail_msg("%s: read %d bytes, want %llu", path, r, (unsigned long long)len);
	for (uint64_t i = 0; i < len; i++)
		if (got[i] != want[i])
			fail_msg("%s: byte %llu is %#x, want %#x (wrong content)", path,
				 (unsigned long long)i, got[i], want[i]);
	free(got);
}

static void remove_frees_space(void (*mount_upper)(void))
{
	struct sp_conn conns[SP_CONNS];
	struct nfs_stat_64 st;
	pthread_t th[SP_CONNS];
	struct nfs_context *nfs;
	struct nfsfh *fh;
	uint8_t *big, *after, *fill;
	uint64_t filled;
	int held, r;

	it_server_init(&srv, false);
	mount_upper();
	assert_int_equal(it_server_start(&srv), 0);
	nfs = it_nfs_mount(&srv);
	big = pattern(SP_BIG, 18);
	after = pattern(SP_AFTER, 19);

	assert_int_equal(nfs_creat(nfs, "/big", 0644, &fh), 0);
	nfs_close(nfs, fh);
	for (int i = 0; i < SP_CONNS; i++) {
		conns[i] = (struct sp_conn){ .sc_nfs = it_nfs_mount(&srv), .sc_index = i,
					     .sc_big = big };
		assert_int_equal(pthread_create(&th[i], NULL, conn_big, &conns[i]), 0);
	}
	for (int i = 0; i < SP_CONNS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (conns[i].sc_err)
			fail_msg("connection %d: %s (%d)", i, conns[i].sc_what, conns[i].sc_err);
	}
	check_bytes(nfs, "/big", big, SP_BIG);
	filled = fill_until_nospc(nfs, "/fill", 20, &fill);
	printf("filled %llu bytes until NOSPC\n", (unsigned long long)filled);
	assert_int_equal(deleted_fds(srv.is_upper), 0);

	assert_int_equal(nfs_unlink(nfs, "/big"), 0);
	held = deleted_fds(srv.is_upper);
	printf("descriptors of the removed file right after REMOVE: %d\n", held);
	if (held != 0)
		fail_msg("the server still holds %d descriptors of the removed file", held);

	assert_int_equal(nfs_creat(nfs, "/after", 0644, &fh), 0);
	r = nfs_pwrite(nfs, fh, 0, SP_AFTER, after);
	nfs_close(nfs, fh);
	if (r != (int)SP_AFTER)
		fail_msg("a %u MiB WRITE after the remove: %d (%s)", SP_AFTER >> 20, r,
			 nfs_get_error(nfs));
	check_bytes(nfs, "/after", after, SP_AFTER);
	/* The WRITE that failed may have stored part of its chunk: the file holds that too. */
	assert_int_equal(nfs_stat64(nfs, "/fill", &st), 0);
	assert_true(st.nfs_size >= filled && st.nfs_size <= filled + SP_FILL_CHUNK);
	check_bytes(nfs, "/fill", fill, st.nfs_size);

	for (int i = 0; i < SP_CONNS; i++)
		it_nfs_unmount(conns[i].sc_nfs);
	it_nfs_unmount(nfs);
	free(big);
	free(after);
	free(fill);
}

static void test_remove_frees_space_tmpfs(void **state)
{
	(void)state;
	remove_frees_space(mount_tmpfs_upper);
}

static void test_remove_frees_space_ext4(void **state)
{
	(void)state;
	remove_frees_space(mount_ext4_upper);
}

/* Reads path through SP_CONNS connections at once, so several workers open it. */
static void read_from_many(const char *path, const uint8_t *want, size_t len)
{
	struct nfs_context *nfs[SP_CONNS];
	struct nfsfh *fh[SP_CONNS];
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	for (int i = 0; i < SP_CONNS; i++) {
		nfs[i] = it_nfs_mount(&srv);
		assert_int_equal(nfs_open(nfs[i], path, O_RDONLY, &fh[i]), 0);
	}
	for (int i = 0; i < SP_CONNS; i++) {
		assert_int_equal(nfs_pread(nfs[i], fh[i], 0, len, buf), (int)len);
		assert_memory_equal(buf, want, len);
	}
	for (int i = 0; i < SP_CONNS; i++) {
		nfs_close(nfs[i], fh[i]);
		it_nfs_unmount(nfs[i]);
	}
	free(buf);
}

static void test_removed_by_hand_closed(void **state)
{
	char quiet[PATH_MAX], stale[PATH_MAX];
	struct nfs_context *nfs;
	struct nfsfh *fh;
	uint8_t *data = pattern(SP_LOWER, 22);
	uint8_t buf[16];
	double t0;
	int held;

	(void)state;
	it_server_init(&srv, true);
	it_path(quiet, "%s/quiet", srv.is_lower);
	it_path(stale, "%s/stale", srv.is_lower);
	it_write_file(quiet, data, SP_LOWER);
	it_write_file(stale, data, SP_LOWER);
	assert_int_equal(it_server_start(&srv), 0);

	/* Without traffic: closed by the server on its own. */
	read_from_many("/quiet", data, SP_LOWER);
	assert_int_equal(unlink(quiet), 0);
	t0 = now_s();
	held = deleted_fds_within(srv.is_lower, SP_CLOSED_WITHIN_S);
	printf("a lower file removed by hand: %d descriptors after %.2f s without a call\n", held,
	       now_s() - t0);
	if (held != 0)
		fail_msg("%d descriptors of a file removed by hand still open after %.0f s", held,
			 SP_CLOSED_WITHIN_S);

	/* A call that finds the handle stale closes what is cached of it. */
	nfs = it_nfs_mount(&srv);
	assert_int_equal(nfs_open(nfs, "/stale", O_RDONLY, &fh), 0);
	read_from_many("/stale", data, SP_LOWER);
	assert_int_equal(unlink(stale), 0);
	t0 = now_s();
	assert_true(nfs_pread(nfs, fh, 0, sizeof(buf), buf) < 0); /* NFS3ERR_STALE */
	held = deleted_fds(srv.is_lower);
	printf("after a READ that found it stale (%.3f s after the rm): %d descriptors\n",
	       now_s() - t0, held);
	if (held != 0)
		fail_msg("a READ found the handle stale, yet %d descriptors of the file are open",
			 held);
	nfs_close(nfs, fh);
	it_nfs_unmount(nfs);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_remove_frees_space_tmpfs, after_each),
		cmocka_unit_test_teardown(test_remove_frees_space_ext4, after_each),
		cmocka_unit_test_teardown(test_removed_by_hand_closed, after_each),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
