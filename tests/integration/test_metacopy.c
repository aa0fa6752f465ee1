/*
 * Metadata-only copy-up through the real server: a SETATTR of a lower file's mode makes a
 * metacopy (no data in the upper, the lower's data read), the first WRITE copies the data
 * in, and the export option metacopy=off brings the full copy-up back.
 *
 * A kill -9 inside the data completion, made deterministic as test_inflight does: strace
 * holds the server's copy_file_range (the data copied in, the marker still on) or its
 * removexattr (the marker just removed) on the way back, inotify on the upper says when
 * it got there, and the server is killed then. Also a kill inside the metacopy's own
 * creation, its renameat2 into place held: the handle must still work after the restart. After a restart the kept handle answers
 * with its fileid and new mode, READ gives exactly the lower's bytes (the WRITE was never
 * answered), never a file reading as zeros or half copied, the next WRITE completes it,
 * and `unionnfsd-ctl check` is clean. A metacopy whose lower copy is removed by hand:
 * READ answers NFS3ERR_IO and check names it.
 *
 * The kill cases are skipped with a message when strace is missing.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define T_LEN (256 * 1024)
#define T_DELAY_US 1500000L
#define T_EVENT_MS 20000
#define T_OUT 16384

static struct it_server srv;
static nfs_fh3 root;
static char lower_data[T_LEN];
static bool have_strace;

static bool has_marker(const char *path)
{
	return lgetxattr(path, "trusted.overlay.metacopy", NULL, 0) >= 0 ||
	       lgetxattr(path, "user.overlay.metacopy", NULL, 0) >= 0;
}

static void upper_path(char *out, const char *name)
{
	it_path(out, "%s/%s", srv.is_upper, name);
}

static void lower_file(const char *name)
{
	char p[PATH_MAX];

	it_fill(lower_data, sizeof(lower_data), 34);
	it_path(p, "%s/%s", srv.is_lower, name);
	it_write_file(p, lower_data, sizeof(lower_data));
	assert_int_equal(chmod(p, 0644), 0);
}

static void chmod_nfs(CLIENT *c, const nfs_fh3 *fh, mode_t mode)
{
	SETATTR3args a = { .object = *fh };
	SETATTR3res r;

	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = mode;
	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &a,
				 (xdrproc_t)xdr_SETATTR3res, &r), RPC_SUCCESS);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
}

static enum clnt_stat write_nfs(CLIENT *c, const nfs_fh3 *fh, const char *bytes, int *status)
{
	WRITE3args a = { .file = *fh, .offset = 0, .count = (count3)strlen(bytes),
			 .stable = FILE_SYNC };
	WRITE3res r;
	enum clnt_stat rpc;

	a.data.data_len = (u_int)strlen(bytes);
	a.data.data_val = (char *)bytes;
	memset(&r, 0, sizeof(r));
	rpc = it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a, (xdrproc_t)xdr_WRITE3res,
		      &r);
	*status = r.status;
	if (rpc == RPC_SUCCESS)
		it_free((xdrproc_t)xdr_WRITE3res, &r);
	return rpc;
}

/* The whole file through NFS, in the 64 KiB READs a client makes, equals want (T_LEN bytes). */
static void read_is(CLIENT *c, const nfs_fh3 *fh, const char *want, const char *what)
{
	fattr3 attr;

	it_assert_status(it_getattr(c, fh, &attr), NFS3_OK);
	if (attr.size != T_LEN)
		fail_msg("%s: size %llu, want %d", what, (unsigned long long)attr.size, T_LEN);
	for (size_t off = 0; off <= T_LEN; off += 65536) {
		READ3args a = { .file = *fh, .offset = off, .count = 65536 };
		READ3res r;
		size_t n;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &a,
					 (xdrproc_t)xdr_READ3res, &r), RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		n = r.READ3res_u.resok.data.data_len;
		if (n != (off < T_LEN ? 65536 : 0) || r.READ3res_u.resok.eof != (off + n >= T_LEN) ||
		    (n > 0 && memcmp(r.READ3res_u.resok.data.data_val, want + off, n) != 0))
			fail_msg("%s: READ at %zu: %zu bytes, eof %d, not as they should be", what,
				 off, n, r.READ3res_u.resok.eof);
		it_free((xdrproc_t)xdr_READ3res, &r);
	}
}

/* unionnfsd-ctl check: exit 0, nothing stale, no error. */
static void check_clean(void)
{
	static char out[T_OUT];
	char *argv[] = { (char *)it_ctl_binary(), "--state", srv.is_state, "check", NULL };
	int rc = it_run(argv, 60, out, sizeof(out));

	if (rc != 0 || !strstr(out, "\n0 stale, 0 dropped, 0 errors"))
		fail_msg("unionnfsd-ctl check exited %d:\n%s", rc, out);
}

/* chmod through NFS, then the data read; a WRITE completes it; all of it after a restart. */
static void test_metacopy_served(void **state)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	char up[PATH_MAX];
	static char want[T_LEN];
	struct stat st;
	fattr3 a;
	nfs_fh3 fh;
	int status;

	(void)state;
	lower_file("f");
	it_assert_status(it_lookup(c, &root, "f", &fh, &a), NFS3_OK);
	chmod_nfs(c, &fh, 0600);
	upper_path(up, "f");
	assert_int_equal(lstat(up, &st), 0);
	assert_true(has_marker(up));
	assert_int_equal(st.st_size, T_LEN);
	assert_true((long long)st.st_blocks * 512 <= 8192);
	read_is(c, &fh, lower_data, "the metacopy");
	it_clnt_destroy(c);
	it_server_restart(&srv);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	read_is(c, &fh, lower_data, "the metacopy after a restart");
	assert_int_equal(write_nfs(c, &fh, "written", &status), RPC_SUCCESS);
	it_assert_status(status, NFS3_OK);
	assert_false(has_marker(up));
	memcpy(want, lower_data, T_LEN);
	memcpy(want, "written", 7);
	read_is(c, &fh, want, "the metacopy after its first WRITE");
	it_assert_status(it_getattr(c, &fh, &a), NFS3_OK);
	assert_int_equal(a.mode & 07777, 0600);
	it_clnt_destroy(c);
	check_clean();
	it_fh_free(&fh);
}

/* Its lower copy removed by hand: READ answers NFS3ERR_IO, check names it. */
static void test_lower_gone(void **state)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	static char out[T_OUT], buf[16];
	char *argv[] = { (char *)it_ctl_binary(), "--state", srv.is_state, "check", NULL };
	char lo[PATH_MAX];
	nfs_fh3 fh;
	int rc;

	(void)state;
	lower_file("g");
	it_assert_status(it_lookup(c, &root, "g", &fh, NULL), NFS3_OK);
	chmod_nfs(c, &fh, 0600);
	it_path(lo, "%s/g", srv.is_lower);
	assert_int_equal(unlink(lo), 0);
	it_assert_status(it_read_all(c, &fh, buf, sizeof(buf)), NFS3ERR_IO);
	it_clnt_destroy(c);
	rc = it_run(argv, 60, out, sizeof(out));
	if (rc == 0 || !strstr(out, "a metacopy whose data is gone"))
		fail_msg("check should name the metacopy without data; exited %d:\n%s", rc, out);
	it_fh_free(&fh);
}

/* metacopy=off: SETATTR copies the data up, as before. */
static void test_metacopy_off(void **state)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	char up[PATH_MAX];
	struct stat st;
	nfs_fh3 fh;

	(void)state;
	lower_file("h");
	it_assert_status(it_lookup(c, &root, "h", &fh, NULL), NFS3_OK);
	chmod_nfs(c, &fh, 0600);
	upper_path(up, "h");
	assert_int_equal(lstat(up, &st), 0);
	assert_false(has_marker(up));
	assert_true((long long)st.st_blocks * 512 >= T_LEN);
	read_is(c, &fh, lower_data, "the full copy");
	it_clnt_destroy(c);
	it_fh_free(&fh);
}

/* --- a kill -9 inside the completion --- */

struct writer {
	const nfs_fh3 *w_fh;
	enum clnt_stat w_rpc;
	int w_status;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);

	w->w_rpc = write_nfs(c, w->w_fh, "never answered", &w->w_status);
	it_clnt_destroy(c);
	return NULL;
}

/*
 * A metacopy's first WRITE, killed inside syscall (held on its way back) once the upper
 * shows mask on the file; then what must hold after the restart.
 */
static void kill_case(const char *name, const char *syscall, uint32_t mask, bool marker_after)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	struct writer w;
	static char upper[T_LEN];
	char up[PATH_MAX];
	size_t len;
	char *got;
	fattr3 a;
	uint64_t fileid;
	nfs_fh3 fh;
	pthread_t t;
	pid_t tracer;
	int ino, status;

	if (!have_strace) {
		fprintf(stderr, "SKIP: strace is not installed (deploy/install-deps installs it)\n");
		return;
	}
	lower_file(name);
	it_assert_status(it_lookup(c, &root, name, &fh, &a), NFS3_OK);
	fileid = a.fileid;
	chmod_nfs(c, &fh, 0640);
	it_clnt_destroy(c);
	upper_path(up, name);
	assert_true(has_marker(up));
	ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, srv.is_upper, mask) >= 0);
	tracer = it_server_strace_delay(&srv, syscall, T_DELAY_US);
	w = (struct writer){ .w_fh = &fh };
	assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
	/* the held syscall's event: for the marker's removal, the first after which it is gone */
	do
		it_inotify_wait(ino, mask, name, T_EVENT_MS);
	while (!marker_after && has_marker(up));
	it_server_kill_traced(&srv, tracer);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(ino);
	if (w.w_rpc == RPC_SUCCESS)
		fail_msg("the WRITE was answered (%s) before the kill", it_nfsstat_name(w.w_status));
	assert_int_equal(it_server_start(&srv), 0);

	assert_int_equal(has_marker(up), marker_after);
	if (!marker_after) { /* whole: its own bytes are the lower's */
		got = it_read_file(up, &len);
		assert_int_equal(len, T_LEN);
		assert_memory_equal(got, lower_data, T_LEN);
		free(got);
	}
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(c, &fh, &a), NFS3_OK);
	assert_int_equal(a.fileid, fileid);
	assert_int_equal(a.mode & 07777, 0640);
	read_is(c, &fh, lower_data, "after a kill inside the completion");
	assert_int_equal(write_nfs(c, &fh, "second", &status), RPC_SUCCESS);
	it_assert_status(status, NFS3_OK);
	assert_false(has_marker(up));
	memcpy(upper, lower_data, T_LEN);
	memcpy(upper, "second", 6);
	read_is(c, &fh, upper, "the WRITE after the restart");
	it_clnt_destroy(c);
	check_clean();
	it_fh_free(&fh);
}

struct chmoder {
	const nfs_fh3 *c_fh;
	enum clnt_stat c_rpc;
	int c_status;
};

static void *chmoder_main(void *arg)
{
	struct chmoder *m = arg;
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	SETATTR3args a = { .object = *m->c_fh };
	SETATTR3res r;

	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = 0600;
	memset(&r, 0, sizeof(r));
	m->c_rpc = it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &a,
			   (xdrproc_t)xdr_SETATTR3res, &r);
	m->c_status = r.status;
	if (m->c_rpc == RPC_SUCCESS)
		it_free((xdrproc_t)xdr_SETATTR3res, &r);
	it_clnt_destroy(c);
	return NULL;
}

/*
 * A kill -9 in a metacopy's creation: renamed into place, the map not yet moved to it. The
 * handle still answers with its fileid and the lower's bytes; a chmod then works.
 */
static void test_kill_in_metacopy_creation(void **state)
{
	CLIENT *c;
	struct chmoder m;
	char up[PATH_MAX];
	uint64_t fileid;
	fattr3 a;
	nfs_fh3 fh;
	pthread_t t;
	pid_t tracer;
	int ino;

	(void)state;
	if (!have_strace) {
		fprintf(stderr, "SKIP: strace is not installed (deploy/install-deps installs it)\n");
		return;
	}
	lower_file("m");
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &root, "m", &fh, &a), NFS3_OK);
	it_clnt_destroy(c);
	fileid = a.fileid;
	ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, srv.is_upper, IN_MOVED_TO) >= 0);
	tracer = it_server_strace_delay(&srv, "renameat2", T_DELAY_US);
	m = (struct chmoder){ .c_fh = &fh };
	assert_int_equal(pthread_create(&t, NULL, chmoder_main, &m), 0);
	it_inotify_wait(ino, IN_MOVED_TO, "m", T_EVENT_MS);
	it_server_kill_traced(&srv, tracer);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(ino);
	if (m.c_rpc == RPC_SUCCESS)
		fail_msg("the SETATTR was answered (%s) before the kill", it_nfsstat_name(m.c_status));
	assert_int_equal(it_server_start(&srv), 0);
	upper_path(up, "m");
	assert_true(has_marker(up));
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(c, &fh, &a), NFS3_OK);
	assert_int_equal(a.fileid, fileid);
	read_is(c, &fh, lower_data, "a metacopy whose creation was cut short");
	chmod_nfs(c, &fh, 0600);
	it_assert_status(it_getattr(c, &fh, &a), NFS3_OK);
	assert_int_equal(a.mode & 07777, 0600);
	it_clnt_destroy(c);
	check_clean();
	it_fh_free(&fh);
}

/* The data copied in, not yet on disk, the marker on: still the metacopy. */
static void test_kill_in_data_copy(void **state)
{
	(void)state;
	kill_case("k1", "copy_file_range", IN_MODIFY, true);
}

/* The marker just removed (the data was synced before): the whole file. */
static void test_kill_at_marker_removal(void **state)
{
	(void)state;
	kill_case("k2", "removexattr", IN_ATTRIB, false);
}

static int setup(void **state)
{
	(void)state;
	it_server_init(&srv, true);
	if (it_server_start(&srv) != 0)
		return -1;
	return it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) == IT_MNT_OK ? 0 : -1;
}

static int setup_off(void **state)
{
	(void)state;
	it_server_init(&srv, true);
	srv.is_opts = "no_root_squash,insecure,metacopy=off";
	if (it_server_start(&srv) != 0)
		return -1;
	return it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) == IT_MNT_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	it_fh_free(&root);
	return it_server_finish(&srv);
}

int main(void)
{
	have_strace = system("command -v strace >/dev/null 2>&1") == 0;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_metacopy_served, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lower_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metacopy_off, setup_off, teardown),
		cmocka_unit_test_setup_teardown(test_kill_in_metacopy_creation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_in_data_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_at_marker_removal, setup, teardown),
	};

	return cmocka_run_group_tests_name("metacopy", tests, NULL, NULL);
}
