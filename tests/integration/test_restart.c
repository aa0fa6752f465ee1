/*
 * A server restart in the middle of use: stop with SIGTERM (exit 0) and start again on the
 * same state directory and ports. Handles taken before must keep working (libnfs keeps its
 * open files and reconnects), fileids and readdir cookies must not change, removed objects
 * must be stale, and the write verifier must change.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check_rc(struct nfs_context *nfs, int rc, const char *what)
{
	if (rc < 0)
		fail_msg("%s: %s (%s)", what, strerror(-rc), nfs_get_error(nfs));
}

static void test_libnfs_handles_survive_restart(void **state)
{
	const size_t len = 256 * 1024;
	char *data = malloc(len), *back = malloc(len), p[PATH_MAX], *disk;
	struct nfs_context *nfs = it_nfs_mount(&it_srv);
	struct nfs_stat_64 st1, st2, in1, in2;
	struct nfsfh *fh = NULL, *rfh = NULL;
	size_t done = 0, dl;
	const uint8_t *raw;
	size_t rawlen;
	nfs_fh3 via_lookup;

	(void)state;
	it_fill(data, len, 1);
	check_rc(nfs, nfs_creat(nfs, "/keep", 0644, &fh), "creat /keep");
	while (done < len) {
		int n = nfs_pwrite(nfs, fh, done, len - done, data + done);

		check_rc(nfs, n, "pwrite");
		done += (size_t)n;
	}
	check_rc(nfs, nfs_fsync(nfs, fh), "fsync");
	check_rc(nfs, nfs_mkdir(nfs, "/d"), "mkdir /d");
	check_rc(nfs, nfs_creat(nfs, "/d/inner", 0600, &rfh), "creat /d/inner");
	check_rc(nfs, nfs_stat64(nfs, "/keep", &st1), "stat /keep");
	check_rc(nfs, nfs_stat64(nfs, "/d/inner", &in1), "stat /d/inner");

	/* libnfs's handle is the server's handle */
	it_nfsfh_bytes(fh, &raw, &rawlen);
	{
		CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
		nfs_fh3 root;

		assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
		it_assert_status(it_lookup(c, &root, "keep", &via_lookup, NULL), NFS3_OK);
		assert_int_equal(via_lookup.data.data_len, rawlen);
		assert_memory_equal(via_lookup.data.data_val, raw, rawlen);
		it_fh_free(&root);
		it_clnt_destroy(c);
	}

	it_server_restart(&it_srv);

	/* the open handles still read and write */
	done = 0;
	while (done < len) {
		int n = nfs_pread(nfs, fh, done, len - done, back + done);

		check_rc(nfs, n, "pread after the restart");
		if (n == 0)
			fail_msg("short read after the restart at %zu", done);
		done += (size_t)n;
	}
	assert_memory_equal(back, data, len);
	assert_int_equal(nfs_pwrite(nfs, fh, len, 4, "tail"), 4);
	check_rc(nfs, nfs_fsync(nfs, fh), "fsync after the restart");
	assert_int_equal(nfs_pwrite(nfs, rfh, 0, 5, "inner"), 5);
	check_rc(nfs, nfs_close(nfs, fh), "close");
	check_rc(nfs, nfs_close(nfs, rfh), "close");
	check_rc(nfs, nfs_stat64(nfs, "/keep", &st2), "stat /keep after the restart");
	check_rc(nfs, nfs_stat64(nfs, "/d/inner", &in2), "stat /d/inner after the restart");
	assert_int_equal(st1.nfs_ino, st2.nfs_ino);
	assert_int_equal(in1.nfs_ino, in2.nfs_ino);
	assert_int_equal(st2.nfs_size, len + 4);
	it_path(p, "%s/keep", it_srv.is_upper);
	disk = it_read_file(p, &dl);
	assert_int_equal(dl, len + 4);
	assert_memory_equal(disk, data, len);
	assert_memory_equal(disk + len, "tail", 4);
	free(disk);
	it_path(p, "%s/d/inner", it_srv.is_upper);
	disk = it_read_file(p, &dl);
	assert_int_equal(dl, 5);
	free(disk);
	/* a fresh mount after the restart sees the same handle */
	{
		CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
		nfs_fh3 root, again;

		assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
		it_assert_status(it_lookup(c, &root, "keep", &again, NULL), NFS3_OK);
		assert_true(it_fh_equal(&again, &via_lookup));
		it_fh_free(&again);
		it_fh_free(&root);
		it_clnt_destroy(c);
	}
	it_fh_free(&via_lookup);
	it_nfs_unmount(nfs);
	free(data);
	free(back);
}

struct saved {
	const char *path;
	nfs_fh3 fh;
	fattr3 attr;
};

static nfsstat3 create_in(CLIENT *c, const nfs_fh3 *dir, const char *name, bool is_dir)
{
	nfsstat3 st;

	if (is_dir) {
		MKDIR3args a;
		MKDIR3res r;

		memset(&a, 0, sizeof(a));
		a.where.dir = *dir;
		a.where.name = (char *)name;
		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &a,
					 (xdrproc_t)xdr_MKDIR3res, &r),
				 RPC_SUCCESS);
		st = r.status;
		it_free((xdrproc_t)xdr_MKDIR3res, &r);
	} else {
		CREATE3args a;
		CREATE3res r;

		memset(&a, 0, sizeof(a));
		a.where.dir = *dir;
		a.where.name = (char *)name;
		a.how.mode = UNCHECKED;
		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a,
					 (xdrproc_t)xdr_CREATE3res, &r),
				 RPC_SUCCESS);
		st = r.status;
		it_free((xdrproc_t)xdr_CREATE3res, &r);
	}
	return st;
}

static void write_verf(CLIENT *c, const nfs_fh3 *f, char verf[NFS3_WRITEVERFSIZE])
{
	WRITE3args a = { .file = *f, .offset = 0, .count = 3, .stable = UNSTABLE,
			 .data = { 3, "abc" } };
	WRITE3res r;

	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a,
				 (xdrproc_t)xdr_WRITE3res, &r),
			 RPC_SUCCESS);
	it_assert_status(r.status, NFS3_OK);
	memcpy(verf, r.WRITE3res_u.resok.verf, NFS3_WRITEVERFSIZE);
	it_free((xdrproc_t)xdr_WRITE3res, &r);
}

static void test_raw_handles_fileids_verifier(void **state)
{
	static const char *const dirs[] = { "a", "a/b", "c" };
	static const char *const files[] = { "a/f", "a/b/g", "c/h", "top", "gone" };
	struct saved s[8];
	int ns = 0;
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	nfs_fh3 root, root2, gone, moved;
	fattr3 moved_attr;
	char v1[NFS3_WRITEVERFSIZE], v2[NFS3_WRITEVERFSIZE];

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	for (size_t i = 0; i < 3; i++) {
		const char *slash = strrchr(dirs[i], '/');
		nfs_fh3 parent;

		if (slash) {
			char pp[64];

			snprintf(pp, sizeof(pp), "%.*s", (int)(slash - dirs[i]), dirs[i]);
			it_assert_status(it_lookup_path(c, &root, pp, &parent, NULL), NFS3_OK);
		} else {
			it_fh_copy(&parent, &root);
		}
		it_assert_status(create_in(c, &parent, slash ? slash + 1 : dirs[i], true), NFS3_OK);
		it_fh_free(&parent);
	}
	for (size_t i = 0; i < 5; i++) {
		const char *slash = strrchr(files[i], '/');
		nfs_fh3 parent;

		if (slash) {
			char pp[64];

			snprintf(pp, sizeof(pp), "%.*s", (int)(slash - files[i]), files[i]);
			it_assert_status(it_lookup_path(c, &root, pp, &parent, NULL), NFS3_OK);
		} else {
			it_fh_copy(&parent, &root);
		}
		it_assert_status(create_in(c, &parent, slash ? slash + 1 : files[i], false), NFS3_OK);
		it_fh_free(&parent);
	}
	const char *keep[] = { "a", "a/b", "c", "a/f", "a/b/g", "c/h", "top" };
	for (size_t i = 0; i < 7; i++) {
		s[ns].path = keep[i];
		it_assert_status(it_lookup_path(c, &root, keep[i], &s[ns].fh, &s[ns].attr), NFS3_OK);
		ns++;
	}
	it_assert_status(it_lookup(c, &root, "gone", &gone, NULL), NFS3_OK);
	/* removed before the restart, and moved across directories */
	{
		REMOVE3args a = { .object = { .dir = root, .name = "gone" } };
		REMOVE3res r;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a,
					 (xdrproc_t)xdr_REMOVE3res, &r),
				 RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_REMOVE3res, &r);
	}
	it_assert_status(it_lookup_path(c, &root, "a/b/g", &moved, &moved_attr), NFS3_OK);
	{
		nfs_fh3 from, to;
		RENAME3args a;
		RENAME3res r;

		it_assert_status(it_lookup_path(c, &root, "a/b", &from, NULL), NFS3_OK);
		it_assert_status(it_lookup_path(c, &root, "c", &to, NULL), NFS3_OK);
		a.from.dir = from;
		a.from.name = "g";
		a.to.dir = to;
		a.to.name = "g-moved";
		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a,
					 (xdrproc_t)xdr_RENAME3res, &r),
				 RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_RENAME3res, &r);
		it_fh_free(&from);
		it_fh_free(&to);
	}
	write_verf(c, &s[3].fh, v1);
	it_clnt_destroy(c);

	it_server_restart(&it_srv);

	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root2), IT_MNT_OK);
	assert_true(it_fh_equal(&root, &root2));
	for (int i = 0; i < ns; i++) {
		fattr3 a;
		nfs_fh3 again;

		if (!strcmp(s[i].path, "a/b/g"))
			continue;
		it_assert_status(it_getattr(c, &s[i].fh, &a), NFS3_OK);
		if (a.fileid != s[i].attr.fileid)
			fail_msg("%s: fileid %llu before the restart, %llu after", s[i].path,
				 (unsigned long long)s[i].attr.fileid, (unsigned long long)a.fileid);
		it_assert_status(it_lookup_path(c, &root2, s[i].path, &again, &a), NFS3_OK);
		if (!it_fh_equal(&again, &s[i].fh))
			fail_msg("%s: LOOKUP gives another handle after the restart", s[i].path);
		assert_int_equal(a.fileid, s[i].attr.fileid);
		it_fh_free(&again);
	}
	{
		fattr3 a;

		it_assert_status(it_getattr(c, &moved, &a), NFS3_OK);
		assert_int_equal(a.fileid, moved_attr.fileid);
		it_assert_status(it_lookup_path(c, &root2, "c/g-moved", NULL, &a), NFS3_OK);
		assert_int_equal(a.fileid, moved_attr.fileid);
		it_assert_status(it_lookup_path(c, &root2, "a/b/g", NULL, NULL), NFS3ERR_NOENT);
		it_assert_status(it_getattr(c, &gone, &a), NFS3ERR_STALE);
	}
	write_verf(c, &s[3].fh, v2);
	if (!memcmp(v1, v2, sizeof(v1)))
		fail_msg("the write verifier did not change across a restart");
	/* new objects never reuse a fileid */
	{
		fattr3 a;

		it_assert_status(create_in(c, &root2, "after-restart", false), NFS3_OK);
		it_assert_status(it_lookup(c, &root2, "after-restart", NULL, &a), NFS3_OK);
		for (int i = 0; i < ns; i++)
			assert_int_not_equal(a.fileid, s[i].attr.fileid);
	}
	for (int i = 0; i < ns; i++)
		it_fh_free(&s[i].fh);
	it_fh_free(&gone);
	it_fh_free(&moved);
	it_fh_free(&root);
	it_fh_free(&root2);
	it_clnt_destroy(c);
}

static int readdir_page(CLIENT *c, const nfs_fh3 *dir, uint64_t *cookie, char verf[8],
			char names[][32], int *n, bool *eof)
{
	READDIR3args a = { .dir = *dir, .cookie = *cookie, .count = 600 };
	READDIR3res r;
	int got = 0;

	memcpy(a.cookieverf, verf, 8);
	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NFSPROC3_READDIR, (xdrproc_t)xdr_READDIR3args, &a,
				 (xdrproc_t)xdr_READDIR3res, &r),
			 RPC_SUCCESS);
	it_assert_status(r.status, NFS3_OK);
	for (entry3 *e = r.READDIR3res_u.resok.reply.entries; e; e = e->nextentry) {
		for (int i = 0; i < *n; i++)
			if (!strcmp(names[i], e->name))
				fail_msg("%s listed twice", e->name);
		snprintf(names[(*n)++], 32, "%s", e->name);
		*cookie = e->cookie;
		got++;
	}
	memcpy(verf, r.READDIR3res_u.resok.cookieverf, 8);
	*eof = r.READDIR3res_u.resok.reply.eof;
	it_free((xdrproc_t)xdr_READDIR3res, &r);
	return got;
}

static void test_readdir_cookie_across_restart(void **state)
{
	enum { N = 80 };
	static char names[N + 8][32];
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	nfs_fh3 root, d;
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	bool eof = false;
	int n = 0;

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	it_assert_status(create_in(c, &root, "listing", true), NFS3_OK);
	it_assert_status(it_lookup(c, &root, "listing", &d, NULL), NFS3_OK);
	for (int i = 0; i < N; i++) {
		char name[32];

		snprintf(name, sizeof(name), "entry-%03d", i);
		it_assert_status(create_in(c, &d, name, false), NFS3_OK);
	}
	readdir_page(c, &d, &cookie, verf, names, &n, &eof);
	assert_false(eof);
	assert_true(n < N);
	it_clnt_destroy(c);

	it_server_restart(&it_srv);

	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	while (!eof) {
		if (readdir_page(c, &d, &cookie, verf, names, &n, &eof) == 0 && !eof)
			fail_msg("an empty page without eof");
		assert_true(n <= N + 2);
	}
	assert_int_equal(n, N + 2);
	it_fh_free(&root);
	it_fh_free(&d);
	it_clnt_destroy(c);
}

/* A hard-linked file whose first name was removed, then renamed away: still found after a restart. */
static void test_hard_link_survivor_across_restart(void **state)
{
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	nfs_fh3 root, f, sub;
	fattr3 before, after;
	char p[PATH_MAX], q[PATH_MAX];

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	it_assert_status(create_in(c, &root, "hl-first", false), NFS3_OK);
	it_assert_status(create_in(c, &root, "hl-dir", true), NFS3_OK);
	it_assert_status(it_lookup(c, &root, "hl-first", &f, &before), NFS3_OK);
	it_assert_status(it_lookup(c, &root, "hl-dir", &sub, NULL), NFS3_OK);
	{
		LINK3args a = { .file = f, .link = { .dir = sub, .name = "hl-second" } };
		LINK3res r;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_LINK, (xdrproc_t)xdr_LINK3args, &a,
					 (xdrproc_t)xdr_LINK3res, &r),
				 RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_LINK3res, &r);
	}
	{
		REMOVE3args a = { .object = { .dir = root, .name = "hl-first" } };
		REMOVE3res r;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a,
					 (xdrproc_t)xdr_REMOVE3res, &r),
				 RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_REMOVE3res, &r);
	}
	it_clnt_destroy(c);

	it_server_restart(&it_srv);

	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_getattr(c, &f, &after), NFS3_OK);
	assert_int_equal(after.fileid, before.fileid);
	it_assert_status(it_lookup_path(c, &root, "hl-dir/hl-second", NULL, &after), NFS3_OK);
	assert_int_equal(after.fileid, before.fileid);
	/* and after the directory holding the last name was renamed */
	{
		RENAME3args a = { .from = { .dir = root, .name = "hl-dir" },
				  .to = { .dir = root, .name = "hl-dir-moved" } };
		RENAME3res r;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a,
					 (xdrproc_t)xdr_RENAME3res, &r),
				 RPC_SUCCESS);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_RENAME3res, &r);
	}
	it_clnt_destroy(c);
	it_server_restart(&it_srv);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_getattr(c, &f, &after), NFS3_OK);
	assert_int_equal(after.fileid, before.fileid);
	it_assert_status(it_getattr(c, &sub, NULL), NFS3_OK);
	it_path(p, "%s/hl-dir-moved/hl-second", it_srv.is_upper);
	it_path(q, "%s/hl-first", it_srv.is_upper);
	assert_true(it_exists(p));
	assert_false(it_exists(q));
	it_fh_free(&f);
	it_fh_free(&sub);
	it_fh_free(&root);
	it_clnt_destroy(c);
}

static void test_stop_leaves_no_lock(void **state)
{
	(void)state;
	/* several quick restarts in a row on the same state directory */
	for (int i = 0; i < 3; i++)
		it_server_restart(&it_srv);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libnfs_handles_survive_restart),
		cmocka_unit_test(test_raw_handles_fileids_verifier),
		cmocka_unit_test(test_readdir_cookie_across_restart),
		cmocka_unit_test(test_hard_link_survivor_across_restart),
		cmocka_unit_test(test_stop_leaves_no_lock),
	};

	return cmocka_run_group_tests_name("restart", tests, it_group_setup_upper,
					   it_group_teardown);
}
