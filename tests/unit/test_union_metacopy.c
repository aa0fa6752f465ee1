/*
 * Metadata-only copy-up (metacopy.c, copyup.c): a change of a lower file's mode, owner or
 * times makes an upper copy with no data in overlayfs's metacopy=on format; its data is
 * read from the lower copy until a write, a size change, a rename or a link copies it in.
 * Also: metacopy=off, files it does not apply to, metacopies made by hand the overlayfs
 * way (by name and by absolute redirect), a lower copy gone, and the states a kill leaves
 * inside the completion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "union_fixture.h"

#define DATA_LEN 65536
static char data[DATA_LEN + 1];

/* A lower file of DATA_LEN bytes of text: big enough that its metacopy is visibly sparse. */
static void put_big(struct fx *f, const char *rel)
{
	for (int i = 0; i < DATA_LEN; i++)
		data[i] = (char)('a' + (i * 7 + i / 100) % 26);
	data[DATA_LEN] = '\0';
	put_file(f->lo, rel, data, 0644);
}

static bool has_marker(const char *path)
{
	return lgetxattr(path, "trusted.overlay.metacopy", NULL, 0) >= 0 ||
	       lgetxattr(path, "user.overlay.metacopy", NULL, 0) >= 0;
}

static bool has_origin(const char *path)
{
	return lgetxattr(path, "trusted.unionnfsd.origin", NULL, 0) >= 0 ||
	       lgetxattr(path, "user.unionnfsd.origin", NULL, 0) >= 0;
}

static void set_marker(const char *path)
{
	if (setxattr(path, "trusted.overlay.metacopy", "", 0, 0) < 0)
		assert_int_equal(setxattr(path, "user.overlay.metacopy", "", 0, 0), 0);
}

/* A metacopy made by hand in the upper, as overlayfs makes one; redirect may be NULL. */
static void put_metacopy(struct fx *f, const char *rel, off_t size, mode_t mode,
			 const char *redirect)
{
	int fd = open(P(f, 0, rel), O_CREAT | O_WRONLY, mode);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
	set_marker(P(f, 0, rel));
	if (redirect && setxattr(P(f, 0, rel), "trusted.overlay.redirect", redirect,
				 strlen(redirect), 0) < 0)
		assert_int_equal(setxattr(P(f, 0, rel), "user.overlay.redirect", redirect,
					  strlen(redirect), 0), 0);
}

static void chmod_u(struct fx *f, uint64_t ino, mode_t mode)
{
	struct union_setattr sa = { .ua_mask = USET_MODE, .ua_mode = mode };

	assert_int_equal(union_setattr(f->ux, ino, &sa, NULL, NULL, NULL), 0);
}

/* The whole file through the union, compared with want. */
static void read_is(struct fx *f, uint64_t ino, const char *want)
{
	static char buf[DATA_LEN + 64];

	rd(f, ino, buf, sizeof(buf));
	assert_int_equal(strlen(buf), strlen(want));
	assert_memory_equal(buf, want, strlen(want));
}

/* The upper copy at rel is a metacopy of a DATA_LEN file: marker, size, no data of its own. */
static void is_metacopy(struct fx *f, const char *rel)
{
	struct stat st;

	assert_int_equal(lstat(P(f, 0, rel), &st), 0);
	assert_true(has_marker(P(f, 0, rel)));
	assert_false(has_origin(P(f, 0, rel))); /* room for xattrs in the inode: no block */
	assert_int_equal(st.st_size, DATA_LEN);
	/* a block of xattrs at most (ext4 keeps large ones outside the inode) */
	assert_true((long long)st.st_blocks * 512 <= 8192);
}

static void is_whole(struct fx *f, const char *rel)
{
	assert_false(has_marker(P(f, 0, rel)));
}

static int setup(void **state)
{
	struct fx *f = fx_new(2);

	put_big(f, "f");
	put_dir(f->lo, "d", 0755);
	put_file(f->lo, "d/g", "gee", 0600);
	fx_open(f);
	*state = f;
	return 0;
}

/* chmod makes a metacopy: no data copied, the lower unchanged, its data read, fileid kept. */
static void test_chmod_makes_metacopy(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct stat st, lo;

	chmod_u(f, ino, 0600);
	is_metacopy(f, "f");
	assert_int_equal(lstat(P(f, 1, "f"), &lo), 0);
	assert_int_equal(lo.st_mode & 07777, 0644);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, DATA_LEN);
	/* the lower's blocks, in GETATTR and in LOOKUP's attributes alike */
	assert_int_equal(st.st_blocks, lo.st_blocks);
	assert_int_equal(union_lookup(f->ux, 1, "f", &(uint64_t){ 0 }, &st), 0);
	assert_int_equal(st.st_blocks, lo.st_blocks);
	read_is(f, ino, data);
	fx_restart(f);
	assert_int_equal(W(f, "f"), ino);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_blocks, lo.st_blocks);
	read_is(f, ino, data);
	is_metacopy(f, "f");
}

/* chown and utimes make one too, with the new owner and times. */
static void test_chown_utimes(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct union_setattr sa = { .ua_mask = USET_UID | USET_GID, .ua_uid = 1234, .ua_gid = 4321 };
	struct union_setattr tm = { .ua_mask = USET_MTIME, .ua_mtime = { .tv_sec = 1000000000 } };
	struct stat st;

	assert_int_equal(union_setattr(f->ux, ino, &sa, NULL, NULL, NULL), 0);
	is_metacopy(f, "f");
	assert_int_equal(union_setattr(f->ux, ino, &tm, NULL, NULL, &st), 0);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 4321);
	assert_int_equal(st.st_mtim.tv_sec, 1000000000);
	is_metacopy(f, "f");
	read_is(f, ino, data);
}

/* The first write copies the data in place (same upper inode), then writes; times kept before. */
static void test_write_completes(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct stat before, after, st;

	chmod_u(f, ino, 0640);
	assert_int_equal(lstat(P(f, 0, "f"), &before), 0);
	wr(f, ino, 5, "XYZ");
	is_whole(f, "f");
	assert_int_equal(lstat(P(f, 0, "f"), &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_true((long long)after.st_blocks * 512 >= DATA_LEN);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_blocks, after.st_blocks); /* its own now */
	memcpy(data + 5, "XYZ", 3);
	read_is(f, ino, data);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	fx_restart(f);
	assert_int_equal(W(f, "f"), ino);
	read_is(f, ino, data);
}

/* READs through the descriptor cache see the write that ended the metacopy. */
static void test_cached_read_after_completion(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	const char who[] = "client-a";
	char buf[16];
	uint32_t n;
	bool eof;

	chmod_u(f, ino, 0600);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(union_read_as(f->ux, ino, who, sizeof(who), 0, 4, buf, &n, &eof,
					       NULL), 0);
		assert_int_equal(n, 4);
		assert_memory_equal(buf, data, 4);
	}
	wr(f, ino, 0, "QQQQ");
	assert_int_equal(union_read_as(f->ux, ino, who, sizeof(who), 0, 4, buf, &n, &eof, NULL), 0);
	assert_memory_equal(buf, "QQQQ", 4);
}

struct racer {
	struct fx *r_f;
	uint64_t r_ino;
	int r_i;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	enum union_stable c;
	char bytes[2] = { (char)('A' + r->r_i), '\0' };
	uint32_t n;

	/* each writes its own byte at its own page: every one must survive the completion */
	assert_int_equal(union_write(r->r_f->ux, r->r_ino, (uint64_t)r->r_i * 4096, 1, bytes,
				     UNION_FILE_SYNC, &n, &c, NULL, NULL), 0);
	return NULL;
}

/* First writes from many clients at once: one completion, every write kept. */
static void test_concurrent_first_writes(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct racer r[8];
	pthread_t t[8];

	chmod_u(f, ino, 0600);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){ .r_f = f, .r_ino = ino, .r_i = i };
		assert_int_equal(pthread_create(&t[i], NULL, racer_main, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	is_whole(f, "f");
	for (int i = 0; i < 8; i++)
		data[i * 4096] = (char)('A' + i);
	read_is(f, ino, data);
}

/* A size change copies the data first (as overlayfs does), then truncates. */
static void test_truncate_completes(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct union_setattr sz = { .ua_mask = USET_SIZE, .ua_size = 10 };

	chmod_u(f, ino, 0600);
	assert_int_equal(union_setattr(f->ux, ino, &sz, NULL, NULL, NULL), 0);
	is_whole(f, "f");
	data[10] = '\0';
	read_is(f, ino, data);
}

/* A rename or a link would lose the path the data is found by: the data comes up first. */
static void test_rename_link_complete(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f"), g = W(f, "d/g");
	struct stat st;

	chmod_u(f, ino, 0600);
	assert_int_equal(union_rename(f->ux, 1, "f", W(f, "d"), "moved", NULL, NULL, NULL, NULL), 0);
	is_whole(f, "d/moved");
	assert_int_equal(W(f, "d/moved"), ino);
	read_is(f, ino, data);
	chmod_u(f, g, 0644);
	assert_true(has_marker(P(f, 0, "d/g"))); /* 3 bytes: a metacopy as well */
	assert_int_equal(union_link(f->ux, g, 1, "g2", &st, NULL, NULL), 0);
	assert_false(has_marker(P(f, 0, "d/g")));
	read_is(f, W(f, "g2"), "gee");
	fx_restart(f);
	read_is(f, ino, data);
	read_is(f, g, "gee");
}

/* metacopy=off: the old full copy-up. */
static void test_metacopy_off(void **state)
{
	struct fx *f = *state;
	struct union_policy off = { .up_no_metacopy = true, .up_mfs_secs = 30 };
	uint64_t ino = W(f, "f");
	struct stat st;

	f->policy = &off;
	union_set_policy(f->ux, &off);
	chmod_u(f, ino, 0600);
	is_whole(f, "f");
	assert_int_equal(lstat(P(f, 0, "f"), &st), 0);
	assert_true((long long)st.st_blocks * 512 >= DATA_LEN);
	read_is(f, ino, data);
}

/* Files a metacopy does not fit: empty ones, and lower files with several names. */
static void test_not_for_empty_or_linked(void **state)
{
	struct fx *f = *state;
	char buf[64];

	put_file(f->lo, "empty", "", 0644);
	put_file(f->lo, "h1", "linked", 0644);
	assert_int_equal(link(P(f, 1, "h1"), P(f, 1, "h2")), 0);
	chmod_u(f, W(f, "empty"), 0600);
	is_whole(f, "empty");
	chmod_u(f, W(f, "h1"), 0600);
	is_whole(f, "h1");
	get_file(f->up, "h1", buf, sizeof(buf));
	assert_string_equal(buf, "linked");
	read_is(f, W(f, "h2"), "linked");
}

/*
 * Metacopies made by hand as overlayfs makes them: by name, renamed to another directory
 * (absolute redirect) and within one (relative redirect).
 */
static void test_hand_made(void **state)
{
	struct fx *f = *state;
	struct stat st;

	put_dir(f->lo, "a", 0755);
	put_file(f->lo, "a/orig", "original data", 0644);
	put_dir(f->up, "a", 0755);
	put_dir(f->up, "b", 0755);
	/* chmod 600 through overlayfs: an empty file of the lower's size */
	put_metacopy(f, "a/orig", 13, 0600, NULL);
	/* then mv a/orig b/moved: a whiteout at the old name, a redirect on the file */
	put_metacopy(f, "b/moved", 13, 0640, "/a/orig");
	/* and mv a/orig a/same within one directory: a relative redirect, the old name */
	put_metacopy(f, "a/same", 13, 0604, "orig");
	fx_restart(f);
	read_is(f, W(f, "a/same"), "original data");
	read_is(f, W(f, "a/orig"), "original data");
	assert_int_equal(union_getattr(f->ux, W(f, "a/orig"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	read_is(f, W(f, "b/moved"), "original data");
	assert_int_equal(union_getattr(f->ux, W(f, "b/moved"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* its first write completes it from the redirect's data */
	wr(f, W(f, "b/moved"), 0, "O");
	is_whole(f, "b/moved");
	read_is(f, W(f, "b/moved"), "Original data");
}

/* Its lower copy gone: READ fails cleanly (EIO), check reports it, other calls still work. */
static void test_lower_gone(void **state)
{
	struct fx *f = *state;
	struct union_check_sink sink = { 0 };
	struct union_check_counts c;
	uint64_t ino = W(f, "f");
	char buf[16];
	uint32_t n;
	bool eof;
	struct stat st;

	chmod_u(f, ino, 0600);
	assert_int_equal(union_check(f->ux, &sink, false, &c), 0);
	assert_int_equal(c.cnt_errors, 0);
	assert_int_equal(unlink(P(f, 1, "f")), 0);
	fx_restart(f);
	assert_int_equal(union_read(f->ux, ino, 0, sizeof(buf), buf, &n, &eof, NULL), -EIO);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(union_check(f->ux, &sink, false, &c), 0);
	assert_int_equal(c.cnt_errors, 1);
	assert_int_equal(c.cnt_stale, 0);
	/* a write cannot complete it either, and leaves it as it was */
	assert_int_not_equal(union_write(f->ux, ino, 0, 1, "x", UNION_FILE_SYNC, &n,
					 &(enum union_stable){ 0 }, NULL, NULL), 0);
	is_metacopy(f, "f");
	assert_int_equal(union_remove(f->ux, 1, "f", NULL, NULL), 0);
	assert_int_equal(union_check(f->ux, &sink, false, &c), 0);
	assert_int_equal(c.cnt_errors, 0);
}

/*
 * What a kill inside a metacopy's creation leaves: the metacopy renamed into place, the map
 * not yet moved to it. It carries no origin; it is found again by its data, the very lower
 * copy the record names, and the handle keeps working.
 */
static void test_killed_before_map_update(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	struct stat st;

	fx_close(f);
	put_metacopy(f, "f", DATA_LEN, 0604, NULL);
	fx_open(f);
	assert_int_equal(union_getattr(f->ux, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	read_is(f, ino, data);
	assert_int_equal(W(f, "f"), ino);
	/* a metacopy of another lower file is not taken for it */
	put_file(f->lo, "other", "other data", 0644);
	ino = W(f, "other");
	fx_close(f);
	assert_int_equal(rename(P(f, 1, "other"), P(f, 1, "other.old")), 0);
	put_file(f->lo, "other", "new data!!", 0644);
	put_metacopy(f, "other", 10, 0600, NULL);
	fx_open(f);
	assert_int_equal(union_getattr(f->ux, ino, &st), -ESTALE);
}

/*
 * What a kill inside the completion leaves: the data partly or wholly copied in with the
 * marker still on (it is removed only once the data is on disk). Either is still read from
 * the lower copy, and the next write completes it.
 */
static void test_killed_inside_completion(void **state)
{
	struct fx *f = *state;
	uint64_t ino = W(f, "f");
	int fd;

	chmod_u(f, ino, 0600);
	fx_close(f);
	fd = open(P(f, 0, "f"), O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, data, 4096, 0), 4096); /* cut short after one block */
	assert_int_equal(pwrite(fd, "garbage", 7, 20000), 7); /* never what the lower holds */
	close(fd);
	fx_open(f);
	read_is(f, ino, data);
	wr(f, ino, 0, "Z");
	is_whole(f, "f");
	data[0] = 'Z';
	read_is(f, ino, data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_chmod_makes_metacopy, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_chown_utimes, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_write_completes, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cached_read_after_completion, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_first_writes, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_truncate_completes, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_link_complete, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_metacopy_off, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_not_for_empty_or_linked, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hand_made, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_lower_gone, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_killed_before_map_update, setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_killed_inside_completion, setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
