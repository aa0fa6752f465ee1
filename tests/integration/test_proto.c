/*
 * The NFS v3 procedures at the protocol level (a libtirpc client with the XDR routines
 * generated from rpc/nfs3.x): handle validity, stability and verifiers, exclusive create,
 * readdir cookies across independent calls, FSINFO/PATHCONF/FSSTAT, and the error paths.
 */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static nfs_fh3 root;
static CLIENT *clnt;

static int setup(void **state)
{
	if (it_group_setup_upper(state) != 0)
		return -1;
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK) {
		fprintf(stderr, "MNT %s failed\n", IT_EXPORT);
		return -1;
	}
	clnt = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	return 0;
}

static int teardown(void **state)
{
	it_clnt_destroy(clnt);
	clnt = NULL;
	it_fh_free(&root);
	return it_group_teardown(state);
}

#define CALL(proc, argx, args, resx, res) \
	do { \
		enum clnt_stat cs_; \
		memset((res), 0, sizeof(*(res))); \
		cs_ = it_call(clnt, (proc), (xdrproc_t)(argx), (args), (xdrproc_t)(resx), (res)); \
		if (cs_ != RPC_SUCCESS) \
			fail_msg("%s:%d: RPC " #proc " failed: %s", __FILE__, __LINE__, \
				 clnt_sperrno(cs_)); \
	} while (0)

static sattr3 no_attrs(void)
{
	sattr3 sa;

	memset(&sa, 0, sizeof(sa));
	return sa;
}

static sattr3 mode_attrs(mode3 mode)
{
	sattr3 sa = no_attrs();

	sa.mode.set_it = TRUE;
	sa.mode.set_mode3_u.mode = mode;
	return sa;
}

/* CREATE; fh (optional) receives the handle. Returns the status. */
static nfsstat3 do_create(const nfs_fh3 *dir, const char *name, createmode3 how, const char *verf,
			  nfs_fh3 *fh, fattr3 *attr)
{
	CREATE3args a;
	CREATE3res r;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.how.mode = how;
	if (how == EXCLUSIVE)
		memcpy(a.how.createhow3_u.verf, verf, NFS3_CREATEVERFSIZE);
	else
		a.how.createhow3_u.obj_attributes = mode_attrs(0644);
	CALL(NFSPROC3_CREATE, xdr_CREATE3args, &a, xdr_CREATE3res, &r);
	st = r.status;
	if (st == NFS3_OK) {
		CREATE3resok *ok = &r.CREATE3res_u.resok;

		if (fh) {
			if (ok->obj.handle_follows)
				it_fh_copy(fh, &ok->obj.post_op_fh3_u.handle);
			else
				assert_int_equal(it_lookup(clnt, dir, name, fh, NULL), NFS3_OK);
		}
		if (attr) {
			if (!ok->obj_attributes.attributes_follow)
				fail_msg("CREATE %s: no attributes", name);
			*attr = ok->obj_attributes.post_op_attr_u.attributes;
		}
		if (!ok->dir_wcc.after.attributes_follow)
			fail_msg("CREATE %s: no post-op directory attributes", name);
	}
	it_free((xdrproc_t)xdr_CREATE3res, &r);
	return st;
}

static void create_ok(const nfs_fh3 *dir, const char *name, nfs_fh3 *fh)
{
	it_assert_status(do_create(dir, name, UNCHECKED, NULL, fh, NULL), NFS3_OK);
}

static nfsstat3 do_mkdir(const nfs_fh3 *dir, const char *name, nfs_fh3 *fh)
{
	MKDIR3args a;
	MKDIR3res r;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.attributes = mode_attrs(0755);
	CALL(NFSPROC3_MKDIR, xdr_MKDIR3args, &a, xdr_MKDIR3res, &r);
	st = r.status;
	if (st == NFS3_OK && fh) {
		if (r.MKDIR3res_u.resok.obj.handle_follows)
			it_fh_copy(fh, &r.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
		else
			assert_int_equal(it_lookup(clnt, dir, name, fh, NULL), NFS3_OK);
	}
	it_free((xdrproc_t)xdr_MKDIR3res, &r);
	return st;
}

static nfsstat3 do_remove(const nfs_fh3 *dir, const char *name, bool rmdir)
{
	REMOVE3args a; /* RMDIR3args has the same shape */
	REMOVE3res r;
	nfsstat3 st;

	a.object.dir = *dir;
	a.object.name = (char *)name;
	if (rmdir)
		CALL(NFSPROC3_RMDIR, xdr_RMDIR3args, &a, xdr_RMDIR3res, &r);
	else
		CALL(NFSPROC3_REMOVE, xdr_REMOVE3args, &a, xdr_REMOVE3res, &r);
	st = r.status;
	it_free(rmdir ? (xdrproc_t)xdr_RMDIR3res : (xdrproc_t)xdr_REMOVE3res, &r);
	return st;
}

static nfsstat3 do_rename(const nfs_fh3 *fd, const char *fn, const nfs_fh3 *td, const char *tn)
{
	RENAME3args a;
	RENAME3res r;
	nfsstat3 st;

	a.from.dir = *fd;
	a.from.name = (char *)fn;
	a.to.dir = *td;
	a.to.name = (char *)tn;
	CALL(NFSPROC3_RENAME, xdr_RENAME3args, &a, xdr_RENAME3res, &r);
	st = r.status;
	it_free((xdrproc_t)xdr_RENAME3res, &r);
	return st;
}

static nfsstat3 do_write(const nfs_fh3 *fh, uint64_t off, const void *data, uint32_t len,
			 stable_how stable, WRITE3resok *out)
{
	WRITE3args a;
	WRITE3res r;
	nfsstat3 st;

	a.file = *fh;
	a.offset = off;
	a.count = len;
	a.stable = stable;
	a.data.data_len = len;
	a.data.data_val = (char *)data;
	CALL(NFSPROC3_WRITE, xdr_WRITE3args, &a, xdr_WRITE3res, &r);
	st = r.status;
	if (st == NFS3_OK && out)
		*out = r.WRITE3res_u.resok;
	it_free((xdrproc_t)xdr_WRITE3res, &r);
	return st;
}

/* READ into buf (up to count bytes); returns the status, *n and *eof. */
static nfsstat3 do_read(const nfs_fh3 *fh, uint64_t off, uint32_t count, void *buf, uint32_t *n,
			bool *eof)
{
	READ3args a = { .file = *fh, .offset = off, .count = count };
	READ3res r;
	nfsstat3 st;

	CALL(NFSPROC3_READ, xdr_READ3args, &a, xdr_READ3res, &r);
	st = r.status;
	if (st == NFS3_OK) {
		READ3resok *ok = &r.READ3res_u.resok;

		if (ok->count != ok->data.data_len)
			fail_msg("READ: count %u but %u data bytes", ok->count, ok->data.data_len);
		if (ok->count > count)
			fail_msg("READ returned %u bytes for a count of %u", ok->count, count);
		memcpy(buf, ok->data.data_val, ok->count);
		*n = ok->count;
		*eof = ok->eof;
	}
	it_free((xdrproc_t)xdr_READ3res, &r);
	return st;
}

static void test_null(void **state)
{
	enum clnt_stat cs;

	(void)state;
	cs = it_call(clnt, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void,
		     NULL);
	assert_int_equal(cs, RPC_SUCCESS);
}

static void test_root_handle_and_attrs(void **state)
{
	fattr3 a, b;
	nfs_fh3 dot, dotdot;

	(void)state;
	if (root.data.data_len == 0 || root.data.data_len > 32)
		fail_msg("root handle is %u bytes; netboot loaders need 1..32", root.data.data_len);
	it_assert_status(it_getattr(clnt, &root, &a), NFS3_OK);
	assert_int_equal(a.type, NF3DIR);
	assert_int_not_equal(a.fileid, 0);
	/* "." and ".." of the export root are the root itself. */
	it_assert_status(it_lookup(clnt, &root, ".", &dot, &b), NFS3_OK);
	assert_int_equal(b.fileid, a.fileid);
	it_fh_free(&dot);
	it_assert_status(it_lookup(clnt, &root, "..", &dotdot, &b), NFS3_OK);
	assert_int_equal(b.fileid, a.fileid);
	it_fh_free(&dotdot);
}

static void test_bad_handles(void **state)
{
	nfs_fh3 bad;
	char junk[64];
	fattr3 a;

	(void)state;
	/* one flipped bit anywhere */
	for (u_int i = 0; i < root.data.data_len; i++) {
		it_fh_copy(&bad, &root);
		bad.data.data_val[i] ^= 0x10;
		it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
		it_fh_free(&bad);
	}
	/* empty, truncated, extended, garbage */
	bad.data.data_len = 0;
	bad.data.data_val = junk;
	it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
	bad.data.data_len = root.data.data_len - 1;
	bad.data.data_val = root.data.data_val;
	it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
	memset(junk, 0, sizeof(junk));
	memcpy(junk, root.data.data_val, root.data.data_len);
	bad.data.data_len = root.data.data_len + 1;
	bad.data.data_val = junk;
	it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
	memset(junk, 0xab, sizeof(junk));
	bad.data.data_len = 64;
	it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
	bad.data.data_len = 24;
	it_assert_status(it_getattr(clnt, &bad, &a), NFS3ERR_BADHANDLE);
	it_assert_status(it_lookup(clnt, &bad, "x", NULL, NULL), NFS3ERR_BADHANDLE);
	/* still serving */
	it_assert_status(it_getattr(clnt, &root, &a), NFS3_OK);
}

static void test_stale_handles(void **state)
{
	nfs_fh3 f, d, g;
	fattr3 a;
	char buf[8], p[PATH_MAX];
	uint32_t n;
	bool eof;

	(void)state;
	/* removed through NFS */
	create_ok(&root, "stale-file", &f);
	it_assert_status(do_remove(&root, "stale-file", false), NFS3_OK);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3ERR_STALE);
	it_assert_status(do_read(&f, 0, 8, buf, &n, &eof), NFS3ERR_STALE);
	it_assert_status(do_write(&f, 0, "x", 1, FILE_SYNC, NULL), NFS3ERR_STALE);
	it_fh_free(&f);
	/* removed directly on the server's disk */
	create_ok(&root, "stale-disk", &g);
	it_path(p, "%s/stale-disk", it_srv.is_upper);
	assert_int_equal(unlink(p), 0);
	it_assert_status(it_getattr(clnt, &g, &a), NFS3ERR_STALE);
	it_fh_free(&g);
	/* a removed directory */
	it_assert_status(do_mkdir(&root, "stale-dir", &d), NFS3_OK);
	it_assert_status(do_remove(&root, "stale-dir", true), NFS3_OK);
	it_assert_status(it_getattr(clnt, &d, &a), NFS3ERR_STALE);
	it_assert_status(it_lookup(clnt, &d, "x", NULL, NULL), NFS3ERR_STALE);
	it_assert_status(do_create(&d, "x", UNCHECKED, NULL, NULL, NULL), NFS3ERR_STALE);
	it_fh_free(&d);
}

static void test_fileid_consistent(void **state)
{
	nfs_fh3 d, f;
	fattr3 ca, ga, la, rootattr;
	bool seen = false, seen_plus = false;

	(void)state;
	it_assert_status(do_mkdir(&root, "ids", &d), NFS3_OK);
	it_assert_status(do_create(&d, "file", UNCHECKED, NULL, &f, &ca), NFS3_OK);
	it_assert_status(it_getattr(clnt, &f, &ga), NFS3_OK);
	it_assert_status(it_lookup(clnt, &d, "file", NULL, &la), NFS3_OK);
	it_assert_status(it_getattr(clnt, &root, &rootattr), NFS3_OK);
	assert_int_not_equal(ca.fileid, 0);
	assert_int_equal(ca.fileid, ga.fileid);
	assert_int_equal(la.fileid, ga.fileid);
	assert_int_equal(ga.fsid, rootattr.fsid);
	{
		READDIR3args a = { .dir = d, .cookie = 0, .count = 4096 };
		READDIR3res r;

		CALL(NFSPROC3_READDIR, xdr_READDIR3args, &a, xdr_READDIR3res, &r);
		it_assert_status(r.status, NFS3_OK);
		for (entry3 *e = r.READDIR3res_u.resok.reply.entries; e; e = e->nextentry) {
			assert_int_not_equal(e->fileid, 0);
			if (!strcmp(e->name, "file")) {
				assert_int_equal(e->fileid, ga.fileid);
				seen = true;
			}
		}
		it_free((xdrproc_t)xdr_READDIR3res, &r);
	}
	{
		READDIRPLUS3args a = { .dir = d, .cookie = 0, .dircount = 4096, .maxcount = 32768 };
		READDIRPLUS3res r;

		CALL(NFSPROC3_READDIRPLUS, xdr_READDIRPLUS3args, &a, xdr_READDIRPLUS3res, &r);
		it_assert_status(r.status, NFS3_OK);
		for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry) {
			assert_int_not_equal(e->fileid, 0);
			if (e->name_attributes.attributes_follow)
				assert_int_equal(e->name_attributes.post_op_attr_u.attributes.fileid,
						 e->fileid);
			if (!strcmp(e->name, "file")) {
				assert_int_equal(e->fileid, ga.fileid);
				assert_true(e->name_handle.handle_follows);
				assert_true(it_fh_equal(&e->name_handle.post_op_fh3_u.handle, &f));
				seen_plus = true;
			}
		}
		it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	}
	assert_true(seen);
	assert_true(seen_plus);
	it_fh_free(&d);
	it_fh_free(&f);
}

static void test_write_stability_and_commit(void **state)
{
	nfs_fh3 f;
	WRITE3resok w1, w2, w3;
	char data[4096], back[4096], verf[NFS3_WRITEVERFSIZE];
	uint32_t n;
	bool eof;

	(void)state;
	it_fill(data, sizeof(data), 42);
	create_ok(&root, "stable", &f);
	it_assert_status(do_write(&f, 0, data, 4096, FILE_SYNC, &w1), NFS3_OK);
	assert_int_equal(w1.count, 4096);
	if (w1.committed != FILE_SYNC)
		fail_msg("FILE_SYNC write answered committed=%d", w1.committed);
	assert_true(w1.file_wcc.after.attributes_follow);
	assert_int_equal(w1.file_wcc.after.post_op_attr_u.attributes.size, 4096);
	it_assert_status(do_write(&f, 4096, data, 100, DATA_SYNC, &w2), NFS3_OK);
	if (w2.committed < DATA_SYNC)
		fail_msg("DATA_SYNC write answered committed=%d", w2.committed);
	it_assert_status(do_write(&f, 100, data, 1000, UNSTABLE, &w3), NFS3_OK);
	assert_int_equal(w3.count, 1000);
	/* One verifier per server instance. */
	assert_memory_equal(w1.verf, w2.verf, NFS3_WRITEVERFSIZE);
	assert_memory_equal(w1.verf, w3.verf, NFS3_WRITEVERFSIZE);
	memcpy(verf, w3.verf, sizeof(verf));
	{
		COMMIT3args a = { .file = f, .offset = 0, .count = 0 };
		COMMIT3res r;

		CALL(NFSPROC3_COMMIT, xdr_COMMIT3args, &a, xdr_COMMIT3res, &r);
		it_assert_status(r.status, NFS3_OK);
		assert_memory_equal(r.COMMIT3res_u.resok.verf, verf, NFS3_WRITEVERFSIZE);
		assert_true(r.COMMIT3res_u.resok.file_wcc.after.attributes_follow);
		it_free((xdrproc_t)xdr_COMMIT3res, &r);
		a.offset = 100;
		a.count = 10;
		CALL(NFSPROC3_COMMIT, xdr_COMMIT3args, &a, xdr_COMMIT3res, &r);
		it_assert_status(r.status, NFS3_OK);
		assert_memory_equal(r.COMMIT3res_u.resok.verf, verf, NFS3_WRITEVERFSIZE);
		it_free((xdrproc_t)xdr_COMMIT3res, &r);
	}
	it_assert_status(do_read(&f, 100, 1000, back, &n, &eof), NFS3_OK);
	assert_int_equal(n, 1000);
	assert_memory_equal(back, data, 1000);
	it_assert_status(do_read(&f, 4096, 4096, back, &n, &eof), NFS3_OK);
	assert_int_equal(n, 100);
	assert_true(eof);
	it_fh_free(&f);
}

/* One READ and one WRITE of 1 MiB each (FSINFO's maximum), sent by tirpc in many fragments. */
static void test_one_mib_transfers(void **state)
{
	const uint32_t len = 1024 * 1024;
	char *data = malloc(len), *back = malloc(len), p[PATH_MAX], *disk;
	nfs_fh3 f;
	WRITE3resok w;
	uint32_t n;
	bool eof;
	size_t dl;

	(void)state;
	it_fill(data, len, 99);
	create_ok(&root, "onemib", &f);
	it_assert_status(do_write(&f, 0, data, len, UNSTABLE, &w), NFS3_OK);
	assert_int_equal(w.count, len);
	it_assert_status(do_read(&f, 0, len, back, &n, &eof), NFS3_OK);
	assert_int_equal(n, len);
	assert_true(eof);
	assert_memory_equal(back, data, len);
	it_path(p, "%s/onemib", it_srv.is_upper);
	disk = it_read_file(p, &dl);
	assert_int_equal(dl, len);
	assert_memory_equal(disk, data, len);
	free(disk);
	free(data);
	free(back);
	it_fh_free(&f);
}

static void test_exclusive_create(void **state)
{
	nfs_fh3 h1, h2;
	fattr3 a1, a2;

	(void)state;
	it_assert_status(do_create(&root, "excl", EXCLUSIVE, "ABCDEFGH", &h1, NULL), NFS3_OK);
	/* the retransmission of the same call succeeds with the same file */
	it_assert_status(do_create(&root, "excl", EXCLUSIVE, "ABCDEFGH", &h2, NULL), NFS3_OK);
	it_assert_status(it_getattr(clnt, &h1, &a1), NFS3_OK);
	it_assert_status(it_getattr(clnt, &h2, &a2), NFS3_OK);
	assert_int_equal(a1.fileid, a2.fileid);
	assert_true(it_fh_equal(&h1, &h2));
	/* another client's create with another verifier fails */
	it_assert_status(do_create(&root, "excl", EXCLUSIVE, "12345678", NULL, NULL), NFS3ERR_EXIST);
	it_assert_status(do_create(&root, "excl", GUARDED, NULL, NULL, NULL), NFS3ERR_EXIST);
	/* clients follow up with SETATTR; the file must then look normal */
	{
		SETATTR3args a;
		SETATTR3res r;

		memset(&a, 0, sizeof(a));
		a.object = h1;
		a.new_attributes = mode_attrs(0640);
		a.new_attributes.mtime.set_it = SET_TO_SERVER_TIME;
		a.new_attributes.atime.set_it = SET_TO_SERVER_TIME;
		CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &a, xdr_SETATTR3res, &r);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_SETATTR3res, &r);
	}
	it_assert_status(it_getattr(clnt, &h1, &a1), NFS3_OK);
	assert_int_equal(a1.mode & 07777, 0640);
	assert_int_equal(a1.size, 0);
	/* UNCHECKED on an existing file succeeds and keeps it */
	it_assert_status(do_create(&root, "excl", UNCHECKED, NULL, NULL, &a2), NFS3_OK);
	assert_int_equal(a2.fileid, a1.fileid);
	it_fh_free(&h1);
	it_fh_free(&h2);
}

static void test_setattr_guard(void **state)
{
	nfs_fh3 f;
	fattr3 a;
	SETATTR3args sa;
	SETATTR3res r;

	(void)state;
	create_ok(&root, "guarded", &f);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	memset(&sa, 0, sizeof(sa));
	sa.object = f;
	sa.new_attributes = mode_attrs(0600);
	sa.guard.check = TRUE;
	sa.guard.sattrguard3_u.obj_ctime = a.ctime;
	sa.guard.sattrguard3_u.obj_ctime.seconds -= 1000;
	CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &sa, xdr_SETATTR3res, &r);
	it_assert_status(r.status, NFS3ERR_NOT_SYNC);
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	assert_int_equal(a.mode & 07777, 0644);
	sa.guard.sattrguard3_u.obj_ctime = a.ctime;
	CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &sa, xdr_SETATTR3res, &r);
	it_assert_status(r.status, NFS3_OK);
	assert_true(r.SETATTR3res_u.resok.obj_wcc.after.attributes_follow);
	assert_int_equal(r.SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u.attributes.mode & 07777,
			 0600);
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
	/* size change */
	sa.new_attributes = no_attrs();
	sa.new_attributes.size.set_it = TRUE;
	sa.new_attributes.size.set_size3_u.size = 12345;
	sa.guard.check = FALSE;
	CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &sa, xdr_SETATTR3res, &r);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	assert_int_equal(a.size, 12345);
	it_fh_free(&f);
}

struct listing {
	char **names;
	uint64_t *ids;
	int n;
};

static void listing_add(struct listing *l, const char *name, uint64_t id)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			fail_msg("readdir returned %s twice", name);
	l->names = realloc(l->names, sizeof(char *) * (l->n + 1));
	l->ids = realloc(l->ids, sizeof(uint64_t) * (l->n + 1));
	l->names[l->n] = strdup(name);
	l->ids[l->n] = id;
	l->n++;
}

static bool listing_has(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			return true;
	return false;
}

static void listing_free(struct listing *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->ids);
	memset(l, 0, sizeof(*l));
}

/*
 * One READDIR (plus=false) or READDIRPLUS page on a fresh connection, as a client that
 * resumes a listing later would send it. Returns the number of entries; updates cookie/verf.
 */
static int readdir_page(const nfs_fh3 *dir, bool plus, uint32_t count, uint64_t *cookie,
			char verf[8], struct listing *l, bool *eof)
{
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };
	enum clnt_stat cs;
	int n = 0;

	if (!plus) {
		READDIR3args a = { .dir = *dir, .cookie = *cookie, .count = count };
		READDIR3res r;

		memcpy(a.cookieverf, verf, 8);
		memset(&r, 0, sizeof(r));
		cs = clnt_call(c, NFSPROC3_READDIR, (xdrproc_t)xdr_READDIR3args, (char *)&a,
			       (xdrproc_t)xdr_READDIR3res, (char *)&r, tv);
		if (cs != RPC_SUCCESS)
			fail_msg("READDIR: %s", clnt_sperrno(cs));
		it_assert_status(r.status, NFS3_OK);
		for (entry3 *e = r.READDIR3res_u.resok.reply.entries; e; e = e->nextentry) {
			listing_add(l, e->name, e->fileid);
			*cookie = e->cookie;
			n++;
		}
		memcpy(verf, r.READDIR3res_u.resok.cookieverf, 8);
		*eof = r.READDIR3res_u.resok.reply.eof;
		it_free((xdrproc_t)xdr_READDIR3res, &r);
	} else {
		READDIRPLUS3args a = { .dir = *dir, .cookie = *cookie, .dircount = count / 2,
				       .maxcount = count };
		READDIRPLUS3res r;

		memcpy(a.cookieverf, verf, 8);
		memset(&r, 0, sizeof(r));
		cs = clnt_call(c, NFSPROC3_READDIRPLUS, (xdrproc_t)xdr_READDIRPLUS3args, (char *)&a,
			       (xdrproc_t)xdr_READDIRPLUS3res, (char *)&r, tv);
		if (cs != RPC_SUCCESS)
			fail_msg("READDIRPLUS: %s", clnt_sperrno(cs));
		it_assert_status(r.status, NFS3_OK);
		for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry) {
			listing_add(l, e->name, e->fileid);
			*cookie = e->cookie;
			n++;
		}
		memcpy(verf, r.READDIRPLUS3res_u.resok.cookieverf, 8);
		*eof = r.READDIRPLUS3res_u.resok.reply.eof;
		it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	}
	it_clnt_destroy(c);
	return n;
}

static void make_many(const nfs_fh3 *dir, const char *prefix, int count)
{
	for (int i = 0; i < count; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s-%04d", prefix, i);
		create_ok(dir, name, NULL);
	}
}

static void check_pagination(bool plus)
{
	enum { N = 300 };
	nfs_fh3 d;
	struct listing l = { 0 };
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	bool eof = false;
	int pages = 0;
	const char *dname = plus ? "pages-plus" : "pages";

	it_assert_status(do_mkdir(&root, dname, &d), NFS3_OK);
	make_many(&d, "file-with-a-name", N);
	while (!eof) {
		int n = readdir_page(&d, plus, plus ? 2048 : 512, &cookie, verf, &l, &eof);

		if (n == 0 && !eof)
			fail_msg("a READDIR page with no entries and no eof (cookie %llu)",
				 (unsigned long long)cookie);
		if (++pages > 2 * N)
			fail_msg("listing does not end");
	}
	assert_true(pages > 3); /* the small count really paginated */
	assert_int_equal(l.n, N + 2);
	assert_true(listing_has(&l, "."));
	assert_true(listing_has(&l, ".."));
	for (int i = 0; i < N; i++) {
		char name[64];

		snprintf(name, sizeof(name), "file-with-a-name-%04d", i);
		if (!listing_has(&l, name))
			fail_msg("%s missing from the paginated listing", name);
	}
	listing_free(&l);
	it_fh_free(&d);
}

static void test_readdir_pagination(void **state)
{
	(void)state;
	check_pagination(false);
}

static void test_readdirplus_pagination(void **state)
{
	(void)state;
	check_pagination(true);
}

/* Entries removed and added between pages neither duplicate nor hide the others. */
static void test_readdir_changes_between_pages(void **state)
{
	enum { N = 100 };
	nfs_fh3 d;
	struct listing l = { 0 };
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	bool eof = false, changed = false;
	char gone_unseen[64] = "";

	(void)state;
	it_assert_status(do_mkdir(&root, "churn", &d), NFS3_OK);
	make_many(&d, "c", N);
	while (!eof) {
		readdir_page(&d, false, 512, &cookie, verf, &l, &eof);
		if (!changed && l.n > N / 3 && !eof) {
			/* remove one seen and one unseen name, add a new one */
			for (int i = 0; i < N; i++) {
				char name[64];

				snprintf(name, sizeof(name), "c-%04d", i);
				if (!listing_has(&l, name)) {
					snprintf(gone_unseen, sizeof(gone_unseen), "%s", name);
					break;
				}
			}
			assert_true(gone_unseen[0] != '\0');
			it_assert_status(do_remove(&d, gone_unseen, false), NFS3_OK);
			for (int i = l.n - 1; i >= 0; i--) {
				if (!strncmp(l.names[i], "c-", 2)) {
					it_assert_status(do_remove(&d, l.names[i], false), NFS3_OK);
					break;
				}
			}
			create_ok(&d, "added-late", NULL);
			changed = true;
		}
	}
	assert_true(changed);
	for (int i = 0; i < N; i++) {
		char name[64];

		snprintf(name, sizeof(name), "c-%04d", i);
		if (strcmp(name, gone_unseen) && !listing_has(&l, name))
			fail_msg("%s disappeared from a listing changed in between", name);
	}
	if (listing_has(&l, gone_unseen))
		fail_msg("%s was listed after its removal", gone_unseen);
	listing_free(&l);
	it_fh_free(&d);
}

static void test_readdir_toosmall_and_bad_cookie_dir(void **state)
{
	READDIR3args a;
	READDIR3res r;
	nfs_fh3 f;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.dir = root;
	a.count = 10;
	CALL(NFSPROC3_READDIR, xdr_READDIR3args, &a, xdr_READDIR3res, &r);
	it_assert_status(r.status, NFS3ERR_TOOSMALL);
	it_free((xdrproc_t)xdr_READDIR3res, &r);
	/* READDIR of a file */
	create_ok(&root, "not-a-dir", &f);
	a.dir = f;
	a.count = 4096;
	CALL(NFSPROC3_READDIR, xdr_READDIR3args, &a, xdr_READDIR3res, &r);
	it_assert_status(r.status, NFS3ERR_NOTDIR);
	it_free((xdrproc_t)xdr_READDIR3res, &r);
	it_fh_free(&f);
}

static void test_fsinfo(void **state)
{
	FSINFO3args a = { .fsroot = root };
	FSINFO3res r;
	FSINFO3resok *ok;

	(void)state;
	CALL(NFSPROC3_FSINFO, xdr_FSINFO3args, &a, xdr_FSINFO3res, &r);
	it_assert_status(r.status, NFS3_OK);
	ok = &r.FSINFO3res_u.resok;
	assert_int_equal(ok->rtmax, 1024 * 1024);
	assert_int_equal(ok->wtmax, 1024 * 1024);
	assert_true(ok->rtpref > 0 && ok->rtpref <= ok->rtmax);
	assert_true(ok->wtpref > 0 && ok->wtpref <= ok->wtmax);
	assert_true(ok->dtpref > 0);
	assert_true(ok->maxfilesize >= (1ULL << 40));
	assert_true(ok->properties & FSF3_LINK);
	assert_true(ok->properties & FSF3_SYMLINK);
	assert_true(ok->properties & FSF3_CANSETTIME);
	it_free((xdrproc_t)xdr_FSINFO3res, &r);
}

static void test_pathconf(void **state)
{
	PATHCONF3args a = { .object = root };
	PATHCONF3res r;

	(void)state;
	CALL(NFSPROC3_PATHCONF, xdr_PATHCONF3args, &a, xdr_PATHCONF3res, &r);
	it_assert_status(r.status, NFS3_OK);
	assert_int_equal(r.PATHCONF3res_u.resok.name_max, 255);
	assert_true(r.PATHCONF3res_u.resok.linkmax > 1);
	assert_true(r.PATHCONF3res_u.resok.no_trunc);
	assert_false(r.PATHCONF3res_u.resok.case_insensitive);
	it_free((xdrproc_t)xdr_PATHCONF3res, &r);
}

static void test_fsstat(void **state)
{
	FSSTAT3args a = { .fsroot = root };
	FSSTAT3res r;
	FSSTAT3resok *ok;

	(void)state;
	CALL(NFSPROC3_FSSTAT, xdr_FSSTAT3args, &a, xdr_FSSTAT3res, &r);
	it_assert_status(r.status, NFS3_OK);
	ok = &r.FSSTAT3res_u.resok;
	assert_true(ok->tbytes > 0);
	assert_true(ok->fbytes <= ok->tbytes);
	assert_true(ok->abytes <= ok->fbytes);
	assert_true(ok->afiles <= ok->ffiles || ok->ffiles == 0);
	it_free((xdrproc_t)xdr_FSSTAT3res, &r);
}

static void test_access_bits(void **state)
{
	ACCESS3args a;
	ACCESS3res r;
	nfs_fh3 f;
	const uint32_t all = ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND |
			     ACCESS3_DELETE | ACCESS3_EXECUTE;

	(void)state;
	a.object = root;
	a.access = all;
	CALL(NFSPROC3_ACCESS, xdr_ACCESS3args, &a, xdr_ACCESS3res, &r);
	it_assert_status(r.status, NFS3_OK);
	assert_true(r.ACCESS3res_u.resok.access & ACCESS3_LOOKUP);
	assert_true(r.ACCESS3res_u.resok.access & ACCESS3_MODIFY);
	assert_int_equal(r.ACCESS3res_u.resok.access & ~all, 0);
	it_free((xdrproc_t)xdr_ACCESS3res, &r);
	create_ok(&root, "acc", &f);
	a.object = f;
	a.access = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND;
	CALL(NFSPROC3_ACCESS, xdr_ACCESS3args, &a, xdr_ACCESS3res, &r);
	it_assert_status(r.status, NFS3_OK);
	assert_int_equal(r.ACCESS3res_u.resok.access,
			 ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND);
	it_free((xdrproc_t)xdr_ACCESS3res, &r);
	it_fh_free(&f);
}

static nfsstat3 do_mknod(const char *name, ftype3 type, uint32_t major, uint32_t minor)
{
	MKNOD3args a;
	MKNOD3res r;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	a.where.dir = root;
	a.where.name = (char *)name;
	a.what.type = type;
	if (type == NF3CHR || type == NF3BLK) {
		a.what.mknoddata3_u.device.dev_attributes = mode_attrs(0600);
		a.what.mknoddata3_u.device.spec.specdata1 = major;
		a.what.mknoddata3_u.device.spec.specdata2 = minor;
	} else if (type == NF3FIFO || type == NF3SOCK) {
		a.what.mknoddata3_u.pipe_attributes = mode_attrs(0600);
	}
	CALL(NFSPROC3_MKNOD, xdr_MKNOD3args, &a, xdr_MKNOD3res, &r);
	st = r.status;
	it_free((xdrproc_t)xdr_MKNOD3res, &r);
	return st;
}

static void test_mknod(void **state)
{
	char p[PATH_MAX];
	struct stat st;
	fattr3 a;

	(void)state;
	it_assert_status(do_mknod("chr", NF3CHR, 1, 3), NFS3_OK);
	it_path(p, "%s/chr", it_srv.is_upper);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(major(st.st_rdev), 1);
	assert_int_equal(minor(st.st_rdev), 3);
	it_assert_status(it_lookup(clnt, &root, "chr", NULL, &a), NFS3_OK);
	assert_int_equal(a.type, NF3CHR);
	assert_int_equal(a.rdev.specdata1, 1);
	assert_int_equal(a.rdev.specdata2, 3);
	it_assert_status(do_mknod("blk", NF3BLK, 7, 0), NFS3_OK);
	it_assert_status(do_mknod("fifo", NF3FIFO, 0, 0), NFS3_OK);
	it_assert_status(do_mknod("sock", NF3SOCK, 0, 0), NFS3_OK);
	it_path(p, "%s/sock", it_srv.is_upper);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	it_assert_status(do_mknod("reg", NF3REG, 0, 0), NFS3ERR_BADTYPE);
	it_assert_status(do_mknod("dir", NF3DIR, 0, 0), NFS3ERR_BADTYPE);
	it_assert_status(do_mknod("fifo", NF3FIFO, 0, 0), NFS3ERR_EXIST);
}

static void test_symlink_never_followed(void **state)
{
	SYMLINK3args a;
	SYMLINK3res r;
	nfs_fh3 l;
	fattr3 at;
	char p[PATH_MAX];

	(void)state;
	memset(&a, 0, sizeof(a));
	a.where.dir = root;
	a.where.name = "to-etc";
	a.symlink.symlink_attributes = no_attrs();
	a.symlink.symlink_data = "/etc";
	CALL(NFSPROC3_SYMLINK, xdr_SYMLINK3args, &a, xdr_SYMLINK3res, &r);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SYMLINK3res, &r);
	it_assert_status(it_lookup(clnt, &root, "to-etc", &l, &at), NFS3_OK);
	assert_int_equal(at.type, NF3LNK);
	/* the server must not resolve through the link */
	it_assert_status(it_lookup(clnt, &l, "passwd", NULL, NULL), NFS3ERR_NOTDIR);
	it_assert_status(do_create(&l, "pwned", UNCHECKED, NULL, NULL, NULL), NFS3ERR_NOTDIR);
	{
		READLINK3args ra = { .symlink = l };
		READLINK3res rr;

		CALL(NFSPROC3_READLINK, xdr_READLINK3args, &ra, xdr_READLINK3res, &rr);
		it_assert_status(rr.status, NFS3_OK);
		assert_string_equal(rr.READLINK3res_u.resok.data, "/etc");
		it_free((xdrproc_t)xdr_READLINK3res, &rr);
	}
	/* READLINK of a non-link */
	{
		READLINK3args ra = { .symlink = root };
		READLINK3res rr;

		CALL(NFSPROC3_READLINK, xdr_READLINK3args, &ra, xdr_READLINK3res, &rr);
		if (rr.status == NFS3_OK)
			fail_msg("READLINK of a directory succeeded");
		it_free((xdrproc_t)xdr_READLINK3res, &rr);
	}
	/* a symlink planted on disk as a directory component */
	it_path(p, "%s/planted", it_srv.is_upper);
	assert_int_equal(symlink("/", p), 0);
	it_assert_status(it_lookup_path(clnt, &root, "planted/etc", NULL, NULL), NFS3ERR_NOTDIR);
	it_fh_free(&l);
}

/* cp -a sets a symlink's times (lutimes): SETATTR on a symlink's handle, never followed. */
static void test_setattr_symlink_times(void **state)
{
	SYMLINK3args a;
	SYMLINK3res r;
	SETATTR3args sa;
	SETATTR3res sr;
	nfs_fh3 l;
	fattr3 at;
	char p[PATH_MAX];
	struct stat st;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.where.dir = root;
	a.where.name = "timed-link";
	a.symlink.symlink_attributes = no_attrs();
	a.symlink.symlink_data = "timed-target";
	CALL(NFSPROC3_SYMLINK, xdr_SYMLINK3args, &a, xdr_SYMLINK3res, &r);
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SYMLINK3res, &r);
	create_ok(&root, "timed-target", NULL);
	it_assert_status(it_lookup(clnt, &root, "timed-link", &l, NULL), NFS3_OK);
	memset(&sa, 0, sizeof(sa));
	sa.object = l;
	sa.new_attributes = no_attrs();
	sa.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	sa.new_attributes.mtime.set_mtime_u.mtime.seconds = 1000000000;
	sa.new_attributes.atime.set_it = SET_TO_CLIENT_TIME;
	sa.new_attributes.atime.set_atime_u.atime.seconds = 1000000001;
	CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &sa, xdr_SETATTR3res, &sr);
	it_assert_status(sr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &sr);
	it_assert_status(it_getattr(clnt, &l, &at), NFS3_OK);
	assert_int_equal(at.type, NF3LNK);
	if (at.mtime.seconds != 1000000000)
		fail_msg("SETATTR mtime on a symlink: GETATTR says %u", at.mtime.seconds);
	it_path(p, "%s/timed-link", it_srv.is_upper);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mtime, 1000000000);
	/* the target was not touched */
	it_path(p, "%s/timed-target", it_srv.is_upper);
	assert_int_equal(stat(p, &st), 0);
	assert_int_not_equal(st.st_mtime, 1000000000);
	/* ownership of the link itself (cp -a does lchown) */
	sa.new_attributes = no_attrs();
	sa.new_attributes.uid.set_it = TRUE;
	sa.new_attributes.uid.set_uid3_u.uid = 4321;
	CALL(NFSPROC3_SETATTR, xdr_SETATTR3args, &sa, xdr_SETATTR3res, &sr);
	it_assert_status(sr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &sr);
	it_path(p, "%s/timed-link", it_srv.is_upper);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_uid, 4321);
	it_path(p, "%s/timed-target", it_srv.is_upper);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 0);
	it_fh_free(&l);
}

static void test_hostile_names(void **state)
{
	char longname[300];
	nfs_fh3 f;

	(void)state;
	memset(longname, 'n', sizeof(longname));
	longname[256] = '\0';
	it_assert_status(do_create(&root, longname, UNCHECKED, NULL, NULL, NULL),
			 NFS3ERR_NAMETOOLONG);
	it_assert_status(it_lookup(clnt, &root, longname, NULL, NULL), NFS3ERR_NAMETOOLONG);
	longname[255] = '\0';
	it_assert_status(do_create(&root, longname, UNCHECKED, NULL, NULL, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &root, longname, NULL, NULL), NFS3_OK);
	/* names that are not single components */
	assert_int_not_equal(do_create(&root, "a/b", UNCHECKED, NULL, NULL, NULL), NFS3_OK);
	assert_int_not_equal(do_create(&root, "", UNCHECKED, NULL, NULL, NULL), NFS3_OK);
	assert_int_not_equal(do_create(&root, ".", UNCHECKED, NULL, NULL, NULL), NFS3_OK);
	assert_int_not_equal(do_create(&root, "..", UNCHECKED, NULL, NULL, NULL), NFS3_OK);
	assert_int_not_equal(do_mkdir(&root, "..", NULL), NFS3_OK);
	assert_int_not_equal(it_lookup(clnt, &root, "../../../etc", NULL, NULL), NFS3_OK);
	assert_int_not_equal(it_lookup(clnt, &root, "", NULL, NULL), NFS3_OK);
	{
		char p[PATH_MAX];

		it_path(p, "%s/../escaped", it_srv.is_upper);
		assert_false(it_exists(p));
	}
	create_ok(&root, "sp ace\tand\nnewline", &f);
	it_fh_free(&f);
}

static void test_error_paths(void **state)
{
	nfs_fh3 d, f, sub;
	char buf[16];
	uint32_t n;
	bool eof;

	(void)state;
	it_assert_status(do_mkdir(&root, "errs", &d), NFS3_OK);
	create_ok(&d, "file", &f);
	it_assert_status(do_mkdir(&d, "sub", &sub), NFS3_OK);
	create_ok(&sub, "inner", NULL);

	it_assert_status(it_lookup(clnt, &d, "absent", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(do_remove(&d, "absent", false), NFS3ERR_NOENT);
	it_assert_status(do_remove(&d, "absent", true), NFS3ERR_NOENT);
	it_assert_status(do_rename(&d, "absent", &d, "x"), NFS3ERR_NOENT);
	it_assert_status(do_create(&d, "file", GUARDED, NULL, NULL, NULL), NFS3ERR_EXIST);
	it_assert_status(do_mkdir(&d, "file", NULL), NFS3ERR_EXIST);
	it_assert_status(do_mkdir(&d, "sub", NULL), NFS3ERR_EXIST);
	it_assert_status(do_remove(&d, "sub", true), NFS3ERR_NOTEMPTY);
	it_assert_status(it_lookup(clnt, &f, "x", NULL, NULL), NFS3ERR_NOTDIR);
	it_assert_status(do_create(&f, "x", UNCHECKED, NULL, NULL, NULL), NFS3ERR_NOTDIR);
	it_assert_status(do_mkdir(&f, "x", NULL), NFS3ERR_NOTDIR);
	it_assert_status(do_remove(&d, "file", true), NFS3ERR_NOTDIR);
	it_assert_status(do_rename(&d, "sub", &d, "file"), NFS3ERR_NOTDIR);
	it_assert_status(do_rename(&d, "file", &d, "sub"), NFS3ERR_ISDIR);
	it_assert_status(do_read(&d, 0, 16, buf, &n, &eof), NFS3ERR_ISDIR);
	it_assert_status(do_write(&d, 0, "x", 1, FILE_SYNC, NULL), NFS3ERR_ISDIR);
	assert_int_not_equal(do_remove(&d, "sub", false), NFS3_OK);
	/* a directory into its own subtree */
	assert_int_not_equal(do_rename(&d, "sub", &sub, "loop"), NFS3_OK);
	/* LINK of a directory */
	{
		LINK3args a = { .file = sub, .link = { .dir = d, .name = "dirlink" } };
		LINK3res r;

		CALL(NFSPROC3_LINK, xdr_LINK3args, &a, xdr_LINK3res, &r);
		assert_int_not_equal(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_LINK3res, &r);
	}
	/* everything is still there */
	it_assert_status(it_lookup_path(clnt, &d, "sub/inner", NULL, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &d, "file", NULL, NULL), NFS3_OK);
	it_fh_free(&d);
	it_fh_free(&f);
	it_fh_free(&sub);
}

static void test_wcc_on_remove(void **state)
{
	REMOVE3args a;
	REMOVE3res r;
	fattr3 before;
	wcc_data *w;

	(void)state;
	create_ok(&root, "wcc", NULL);
	it_assert_status(it_getattr(clnt, &root, &before), NFS3_OK);
	a.object.dir = root;
	a.object.name = "wcc";
	CALL(NFSPROC3_REMOVE, xdr_REMOVE3args, &a, xdr_REMOVE3res, &r);
	it_assert_status(r.status, NFS3_OK);
	w = &r.REMOVE3res_u.resok.dir_wcc;
	assert_true(w->after.attributes_follow);
	assert_int_equal(w->after.post_op_attr_u.attributes.fileid, before.fileid);
	if (w->before.attributes_follow) {
		assert_int_equal(w->before.pre_op_attr_u.attributes.mtime.seconds,
				 before.mtime.seconds);
		assert_int_equal(w->before.pre_op_attr_u.attributes.mtime.nseconds,
				 before.mtime.nseconds);
	}
	it_free((xdrproc_t)xdr_REMOVE3res, &r);
}

static void test_link_and_rename(void **state)
{
	nfs_fh3 f, g;
	fattr3 a, b;

	(void)state;
	create_ok(&root, "orig", &f);
	{
		LINK3args la = { .file = f, .link = { .dir = root, .name = "alias" } };
		LINK3res r;

		CALL(NFSPROC3_LINK, xdr_LINK3args, &la, xdr_LINK3res, &r);
		it_assert_status(r.status, NFS3_OK);
		assert_true(r.LINK3res_u.resok.file_attributes.attributes_follow);
		assert_int_equal(r.LINK3res_u.resok.file_attributes.post_op_attr_u.attributes.nlink, 2);
		it_free((xdrproc_t)xdr_LINK3res, &r);
	}
	it_assert_status(it_lookup(clnt, &root, "alias", &g, &b), NFS3_OK);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	assert_int_equal(a.fileid, b.fileid);
	assert_int_equal(a.nlink, 2);
	/* rename onto its own hard link: nothing happens, both names stay */
	it_assert_status(do_rename(&root, "orig", &root, "alias"), NFS3_OK);
	it_assert_status(it_lookup(clnt, &root, "alias", NULL, NULL), NFS3_OK);
	/* rename to the same name */
	it_assert_status(do_rename(&root, "alias", &root, "alias"), NFS3_OK);
	it_assert_status(it_getattr(clnt, &g, &b), NFS3_OK);
	it_fh_free(&f);
	it_fh_free(&g);

	/* removing one name of a hard-linked file keeps its handle alive */
	create_ok(&root, "first-name", &f);
	{
		LINK3args la = { .file = f, .link = { .dir = root, .name = "second-name" } };
		LINK3res r;

		CALL(NFSPROC3_LINK, xdr_LINK3args, &la, xdr_LINK3res, &r);
		it_assert_status(r.status, NFS3_OK);
		it_free((xdrproc_t)xdr_LINK3res, &r);
	}
	it_assert_status(it_lookup(clnt, &root, "second-name", &g, &b), NFS3_OK);
	it_assert_status(do_remove(&root, "first-name", false), NFS3_OK);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3_OK);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.fileid, b.fileid);
	it_assert_status(it_getattr(clnt, &g, &a), NFS3_OK);
	it_assert_status(it_lookup(clnt, &root, "second-name", NULL, &a), NFS3_OK);
	assert_int_equal(a.fileid, b.fileid);
	it_assert_status(do_write(&f, 0, "still", 5, FILE_SYNC, NULL), NFS3_OK);
	/* the other way round: the name made first survives */
	it_assert_status(do_rename(&root, "second-name", &root, "renamed-survivor"), NFS3_OK);
	it_assert_status(it_getattr(clnt, &g, &a), NFS3_OK);
	it_assert_status(do_remove(&root, "renamed-survivor", false), NFS3_OK);
	it_assert_status(it_getattr(clnt, &f, &a), NFS3ERR_STALE);
	it_assert_status(it_getattr(clnt, &g, &a), NFS3ERR_STALE);
	it_fh_free(&f);
	it_fh_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null),
		cmocka_unit_test(test_root_handle_and_attrs),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_stale_handles),
		cmocka_unit_test(test_fileid_consistent),
		cmocka_unit_test(test_write_stability_and_commit),
		cmocka_unit_test(test_one_mib_transfers),
		cmocka_unit_test(test_exclusive_create),
		cmocka_unit_test(test_setattr_guard),
		cmocka_unit_test(test_readdir_pagination),
		cmocka_unit_test(test_readdirplus_pagination),
		cmocka_unit_test(test_readdir_changes_between_pages),
		cmocka_unit_test(test_readdir_toosmall_and_bad_cookie_dir),
		cmocka_unit_test(test_fsinfo),
		cmocka_unit_test(test_pathconf),
		cmocka_unit_test(test_fsstat),
		cmocka_unit_test(test_access_bits),
		cmocka_unit_test(test_mknod),
		cmocka_unit_test(test_symlink_never_followed),
		cmocka_unit_test(test_setattr_symlink_times),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_error_paths),
		cmocka_unit_test(test_wcc_on_remove),
		cmocka_unit_test(test_link_and_rename),
	};

	return cmocka_run_group_tests_name("protocol (libtirpc)", tests, setup, teardown);
}
