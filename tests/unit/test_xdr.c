/*
 * Round trips through the rpcgen XDR routines of rpc/nfs3.x and rpc/mount3.x, the sizes
 * the READDIR limits rely on, and truncated input that must fail cleanly; the lock
 * protocols' names (rpc/nlm4.x, rpc/sm_inter.x) refuse a NUL inside, as file names do.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_internal.h"
#include "nlm4.h"
#include "sm_inter.h"

#define BUFSZ 65536

/* Encodes in, decodes into out (zeroed), returns the encoded length. */
static u_int round_trip(xdrproc_t fn, void *in, void *out, size_t size, char *buf)
{
	XDR x;
	u_int len;

	xdrmem_create(&x, buf, BUFSZ, XDR_ENCODE);
	assert_true(fn(&x, in));
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	memset(out, 0, size);
	xdrmem_create(&x, buf, len, XDR_DECODE);
	assert_true(fn(&x, out));
	assert_int_equal(xdr_getpos(&x), len);
	xdr_destroy(&x);
	assert_int_equal(xdr_sizeof(fn, in), len);
	return len;
}

/* Every strict prefix of a valid encoding must fail to decode, without crashing or leaking. */
static void truncations(xdrproc_t fn, const char *buf, u_int len, size_t size)
{
	void *obj = malloc(size);
	u_int cut;
	XDR x;

	assert_non_null(obj);
	for (cut = 0; cut < len; cut++) {
		memset(obj, 0, size);
		xdrmem_create(&x, (char *)buf, cut, XDR_DECODE);
		assert_false(fn(&x, obj));
		xdr_destroy(&x);
		xdr_free(fn, obj);
	}
	free(obj);
}

static void fill_fattr(fattr3 *fa, uint64_t ino)
{
	memset(fa, 0, sizeof(*fa));
	fa->type = NF3REG;
	fa->mode = 0644;
	fa->nlink = 2;
	fa->uid = 1000;
	fa->gid = 100;
	fa->size = 0x123456789ull;
	fa->used = 4096;
	fa->rdev.specdata1 = 8;
	fa->rdev.specdata2 = 1;
	fa->fsid = 0xfeedfacecafebeefull;
	fa->fileid = ino;
	fa->atime.seconds = 1;
	fa->mtime.nseconds = 999999999;
	fa->ctime.seconds = 0xffffffffu;
}

static void test_fattr_size(void **state)
{
	fattr3 fa;

	(void)state;
	fill_fattr(&fa, 1);
	assert_int_equal(xdr_sizeof((xdrproc_t)xdr_fattr3, &fa), NFS_FATTR3_XDR);
}

static void test_getattr_res(void **state)
{
	char *buf = malloc(BUFSZ);
	GETATTR3res in, out;
	u_int len;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.status = NFS3_OK;
	fill_fattr(&in.GETATTR3res_u.resok.obj_attributes, 42);
	len = round_trip((xdrproc_t)xdr_GETATTR3res, &in, &out, sizeof(out), buf);
	assert_int_equal(len, 4 + NFS_FATTR3_XDR);
	assert_memory_equal(&in, &out, sizeof(in));
	truncations((xdrproc_t)xdr_GETATTR3res, buf, len, sizeof(out));

	in.status = NFS3ERR_STALE;
	len = round_trip((xdrproc_t)xdr_GETATTR3res, &in, &out, sizeof(out), buf);
	assert_int_equal(len, 4);
	assert_int_equal(out.status, NFS3ERR_STALE);
	free(buf);
}

static void test_write_args(void **state)
{
	char *buf = malloc(BUFSZ);
	char fh[FH_LEN], data[1001];
	WRITE3args in, out;
	u_int len;

	(void)state;
	memset(fh, 7, sizeof(fh));
	memset(data, 'x', sizeof(data));
	memset(&in, 0, sizeof(in));
	in.file.data.data_len = sizeof(fh);
	in.file.data.data_val = fh;
	in.offset = 1ull << 40;
	in.count = sizeof(data);
	in.stable = FILE_SYNC;
	in.data.data_len = sizeof(data);
	in.data.data_val = data;
	len = round_trip((xdrproc_t)xdr_WRITE3args, &in, &out, sizeof(out), buf);
	assert_int_equal(len, 4 + 24 + 8 + 4 + 4 + 4 + 1004);
	assert_int_equal(out.file.data.data_len, FH_LEN);
	assert_memory_equal(out.file.data.data_val, fh, FH_LEN);
	assert_true(out.offset == in.offset);
	assert_int_equal(out.stable, FILE_SYNC);
	assert_int_equal(out.data.data_len, sizeof(data));
	assert_memory_equal(out.data.data_val, data, sizeof(data));
	xdr_free((xdrproc_t)xdr_WRITE3args, (char *)&out);
	truncations((xdrproc_t)xdr_WRITE3args, buf, len, sizeof(out));
	free(buf);
}

static void test_oversized_handle(void **state)
{
	char *buf = malloc(BUFSZ);
	char fh[NFS3_FHSIZE + 1];
	GETATTR3args in, out;
	XDR x;

	(void)state;
	memset(fh, 1, sizeof(fh));
	/* Encode a 65-byte handle by hand: the decoder must refuse it. */
	in.object.data.data_len = sizeof(fh);
	in.object.data.data_val = fh;
	xdrmem_create(&x, buf, BUFSZ, XDR_ENCODE);
	assert_true(xdr_bytes(&x, &in.object.data.data_val, &in.object.data.data_len, 1000));
	xdr_destroy(&x);
	memset(&out, 0, sizeof(out));
	xdrmem_create(&x, buf, BUFSZ, XDR_DECODE);
	assert_false(xdr_GETATTR3args(&x, &out));
	xdr_destroy(&x);
	xdr_free((xdrproc_t)xdr_GETATTR3args, (char *)&out);
	free(buf);
}

static void test_create_args(void **state)
{
	char *buf = malloc(BUFSZ);
	char fh[FH_LEN], name[] = "file.txt";
	CREATE3args in, out;
	u_int len;

	(void)state;
	memset(fh, 3, sizeof(fh));
	memset(&in, 0, sizeof(in));
	in.where.dir.data.data_len = sizeof(fh);
	in.where.dir.data.data_val = fh;
	in.where.name = name;
	in.how.mode = EXCLUSIVE;
	memcpy(in.how.createhow3_u.verf, "ABCDEFGH", 8);
	len = round_trip((xdrproc_t)xdr_CREATE3args, &in, &out, sizeof(out), buf);
	assert_int_equal(out.how.mode, EXCLUSIVE);
	assert_memory_equal(out.how.createhow3_u.verf, "ABCDEFGH", 8);
	assert_string_equal(out.where.name, name);
	xdr_free((xdrproc_t)xdr_CREATE3args, (char *)&out);
	truncations((xdrproc_t)xdr_CREATE3args, buf, len, sizeof(out));

	in.how.mode = GUARDED;
	memset(&in.how.createhow3_u.obj_attributes, 0, sizeof(sattr3));
	in.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
	in.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0600;
	in.how.createhow3_u.obj_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	in.how.createhow3_u.obj_attributes.mtime.set_mtime_u.mtime.seconds = 77;
	round_trip((xdrproc_t)xdr_CREATE3args, &in, &out, sizeof(out), buf);
	assert_int_equal(out.how.mode, GUARDED);
	assert_true(out.how.createhow3_u.obj_attributes.mode.set_it);
	assert_int_equal(out.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode, 0600);
	assert_int_equal(out.how.createhow3_u.obj_attributes.mtime.set_mtime_u.mtime.seconds, 77);
	xdr_free((xdrproc_t)xdr_CREATE3args, (char *)&out);
	free(buf);
}

static void test_readdir_res(void **state)
{
	char *buf = malloc(BUFSZ);
	READDIR3res in, out;
	entry3 e[3];
	char *names[3] = { ".", "..", "a-longer-name" };
	u_int len, expect;
	entry3 *p;
	int i;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.status = NFS3_OK;
	in.READDIR3res_u.resok.dir_attributes.attributes_follow = TRUE;
	fill_fattr(&in.READDIR3res_u.resok.dir_attributes.post_op_attr_u.attributes, 1);
	memcpy(in.READDIR3res_u.resok.cookieverf, "UNFS\0\1\0\1", 8);
	expect = 4 + 4 + NFS_FATTR3_XDR + 8 + 4 + 4;
	for (i = 0; i < 3; i++) {
		e[i].fileid = (uint64_t)i + 1;
		e[i].name = names[i];
		e[i].cookie = (uint64_t)i + 1;
		e[i].nextentry = i < 2 ? &e[i + 1] : NULL;
		expect += 4 + 8 + 4 + ((strlen(names[i]) + 3) & ~3u) + 8;
	}
	in.READDIR3res_u.resok.reply.entries = &e[0];
	in.READDIR3res_u.resok.reply.eof = TRUE;
	len = round_trip((xdrproc_t)xdr_READDIR3res, &in, &out, sizeof(out), buf);
	/* The entry size formula src/nfs/dir.c uses for its count limit. */
	assert_int_equal(len, expect);
	for (p = out.READDIR3res_u.resok.reply.entries, i = 0; p != NULL; p = p->nextentry, i++) {
		assert_string_equal(p->name, names[i]);
		assert_true(p->cookie == (uint64_t)i + 1);
	}
	assert_int_equal(i, 3);
	assert_true(out.READDIR3res_u.resok.reply.eof);
	xdr_free((xdrproc_t)xdr_READDIR3res, (char *)&out);
	truncations((xdrproc_t)xdr_READDIR3res, buf, len, sizeof(out));
	free(buf);
}

static void test_readdirplus_res(void **state)
{
	char *buf = malloc(BUFSZ);
	char fh[FH_LEN], name[] = "abcde";
	READDIRPLUS3res in, out;
	entryplus3 e;
	u_int len;

	(void)state;
	memset(fh, 9, sizeof(fh));
	memset(&in, 0, sizeof(in));
	memset(&e, 0, sizeof(e));
	e.fileid = 77;
	e.name = name;
	e.cookie = 1234567;
	e.name_attributes.attributes_follow = TRUE;
	fill_fattr(&e.name_attributes.post_op_attr_u.attributes, 77);
	e.name_handle.handle_follows = TRUE;
	e.name_handle.post_op_fh3_u.handle.data.data_len = FH_LEN;
	e.name_handle.post_op_fh3_u.handle.data.data_val = fh;
	in.status = NFS3_OK;
	in.READDIRPLUS3res_u.resok.reply.entries = &e;
	len = round_trip((xdrproc_t)xdr_READDIRPLUS3res, &in, &out, sizeof(out), buf);
	assert_int_equal(len, 4 + 4 + 8 + (4 + 8 + 4 + 8 + 8 + 4 + NFS_FATTR3_XDR + 4 + 4 + FH_LEN) +
			 4 + 4);
	assert_non_null(out.READDIRPLUS3res_u.resok.reply.entries);
	assert_memory_equal(out.READDIRPLUS3res_u.resok.reply.entries->name_handle.post_op_fh3_u
			    .handle.data.data_val, fh, FH_LEN);
	xdr_free((xdrproc_t)xdr_READDIRPLUS3res, (char *)&out);
	truncations((xdrproc_t)xdr_READDIRPLUS3res, buf, len, sizeof(out));
	free(buf);
}

static int32_t *no_inline(XDR *x, u_int len)
{
	(void)x;
	(void)len;
	return NULL;
}

/* Encodes r with fn into buf, through a stream that gives no inline room when plain. */
static u_int encode_with(xdrproc_t fn, READDIRPLUS3res *r, char *buf, u_int size, bool plain,
			 bool *ok)
{
	struct xdr_ops ops;
	XDR x;
	u_int len;

	xdrmem_create(&x, buf, size, XDR_ENCODE);
	if (plain) {
		ops = *x.x_ops;
		ops.x_inline = no_inline;
		x.x_ops = &ops;
	}
	*ok = fn(&x, r);
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	return len;
}

/*
 * READDIRPLUS's own encoder gives rpcgen's bytes: entries with and without attributes
 * and handles, names of every padding, inline or not, a failure status, too little room.
 */
static void test_readdirplus_fast(void **state)
{
	enum { N = 9 };
	char *want = malloc(BUFSZ), *got = malloc(BUFSZ);
	static const char *names[N] = { "a", "ab", "abc", "abcd", "abcde", "", "f00001",
					"a-much-longer-name-than-the-others", "x" };
	char fh[FH_LEN];
	READDIRPLUS3res in;
	entryplus3 e[N];
	u_int wlen, glen;
	bool ok;

	(void)state;
	memset(fh, 7, sizeof(fh));
	memset(&in, 0, sizeof(in));
	memset(e, 0, sizeof(e));
	for (int i = 0; i < N; i++) {
		e[i].fileid = 1000 + (uint64_t)i * 0x100000001ull;
		e[i].name = (char *)names[i];
		e[i].cookie = 0x7000000000000000ull + (uint64_t)i;
		e[i].name_attributes.attributes_follow = i % 3 != 1;
		fill_fattr(&e[i].name_attributes.post_op_attr_u.attributes, 50 + (uint64_t)i);
		e[i].name_handle.handle_follows = i % 4 != 2;
		e[i].name_handle.post_op_fh3_u.handle.data.data_len = FH_LEN - (u_int)(i % 3);
		e[i].name_handle.post_op_fh3_u.handle.data.data_val = fh;
		e[i].nextentry = i + 1 < N ? &e[i + 1] : NULL;
	}
	in.status = NFS3_OK;
	in.READDIRPLUS3res_u.resok.dir_attributes.attributes_follow = TRUE;
	fill_fattr(&in.READDIRPLUS3res_u.resok.dir_attributes.post_op_attr_u.attributes, 3);
	memset(in.READDIRPLUS3res_u.resok.cookieverf, 5, NFS3_COOKIEVERFSIZE);
	in.READDIRPLUS3res_u.resok.reply.entries = &e[0];
	in.READDIRPLUS3res_u.resok.reply.eof = TRUE;
	for (int plain = 0; plain < 2; plain++) {
		wlen = encode_with((xdrproc_t)xdr_READDIRPLUS3res, &in, want, BUFSZ, false, &ok);
		assert_true(ok);
		glen = encode_with((xdrproc_t)nfs3_xdr_readdirplus_res, &in, got, BUFSZ, plain, &ok);
		assert_true(ok);
		assert_int_equal(glen, wlen);
		assert_memory_equal(got, want, wlen);
		/* Short of room anywhere: a clean failure, never a write past the end. */
		for (u_int room = 0; room < wlen; room += 4) {
			encode_with((xdrproc_t)nfs3_xdr_readdirplus_res, &in, got, room, plain, &ok);
			assert_false(ok);
		}
	}
	in.status = NFS3ERR_BAD_COOKIE;
	wlen = encode_with((xdrproc_t)xdr_READDIRPLUS3res, &in, want, BUFSZ, false, &ok);
	glen = encode_with((xdrproc_t)nfs3_xdr_readdirplus_res, &in, got, BUFSZ, false, &ok);
	assert_int_equal(glen, wlen);
	assert_memory_equal(got, want, wlen);
	free(want);
	free(got);
}

static void test_wcc_res(void **state)
{
	char *buf = malloc(BUFSZ);
	WRITE3res in, out;
	u_int len;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.status = NFS3ERR_NOSPC;
	in.WRITE3res_u.resfail.file_wcc.before.attributes_follow = TRUE;
	in.WRITE3res_u.resfail.file_wcc.before.pre_op_attr_u.attributes.size = 10;
	in.WRITE3res_u.resfail.file_wcc.after.attributes_follow = TRUE;
	fill_fattr(&in.WRITE3res_u.resfail.file_wcc.after.post_op_attr_u.attributes, 5);
	len = round_trip((xdrproc_t)xdr_WRITE3res, &in, &out, sizeof(out), buf);
	assert_int_equal(len, 4 + 4 + 24 + 4 + NFS_FATTR3_XDR);
	assert_memory_equal(&in, &out, sizeof(in));
	free(buf);
}

static void test_mount_types(void **state)
{
	char *buf = malloc(BUFSZ);
	char fh[FH_LEN], dir[] = "/union", star[] = "*", host[] = "10.0.0.1";
	int flavors[2] = { AUTH_SYS, AUTH_NONE };
	mountres3 m3, m3o;
	fhstatus f1, f1o;
	struct groupnode g = { star, NULL };
	struct exportnode ex = { dir, &g, NULL };
	mntexports exl = &ex, exlo = NULL;
	struct mountbody mb = { host, dir, NULL };
	mountlist ml = &mb, mlo = NULL;
	u_int len;

	(void)state;
	memset(fh, 5, sizeof(fh));
	memset(&m3, 0, sizeof(m3));
	m3.fhs_status = MNT3_OK;
	m3.mountres3_u.mountinfo.fhandle.fhandle3_len = FH_LEN;
	m3.mountres3_u.mountinfo.fhandle.fhandle3_val = fh;
	m3.mountres3_u.mountinfo.auth_flavors.auth_flavors_len = 2;
	m3.mountres3_u.mountinfo.auth_flavors.auth_flavors_val = flavors;
	len = round_trip((xdrproc_t)xdr_mountres3, &m3, &m3o, sizeof(m3o), buf);
	assert_int_equal(len, 4 + 4 + FH_LEN + 4 + 8);
	assert_int_equal(m3o.mountres3_u.mountinfo.auth_flavors.auth_flavors_val[1], AUTH_NONE);
	xdr_free((xdrproc_t)xdr_mountres3, (char *)&m3o);
	truncations((xdrproc_t)xdr_mountres3, buf, len, sizeof(m3o));

	memset(&f1, 0, sizeof(f1));
	memcpy(f1.fhstatus_u.fhs_fhandle, fh, FH_LEN);
	len = round_trip((xdrproc_t)xdr_fhstatus, &f1, &f1o, sizeof(f1o), buf);
	/* v1 handles are fixed 32-byte opaques: no length word. */
	assert_int_equal(len, 4 + 32);
	assert_memory_equal(&f1, &f1o, sizeof(f1));

	len = round_trip((xdrproc_t)xdr_mntexports, &exl, &exlo, sizeof(exlo), buf);
	assert_string_equal(exlo->ex_dir, "/union");
	assert_string_equal(exlo->ex_groups->gr_name, "*");
	xdr_free((xdrproc_t)xdr_mntexports, (char *)&exlo);

	len = round_trip((xdrproc_t)xdr_mountlist, &ml, &mlo, sizeof(mlo), buf);
	assert_string_equal(mlo->ml_hostname, host);
	assert_null(mlo->ml_next);
	xdr_free((xdrproc_t)xdr_mountlist, (char *)&mlo);
	free(buf);
}

/*
 * Decodes a string field written as len bytes of text (a NUL at nul when it is below len)
 * followed by the words after it; whether fn takes it.
 */
static bool decodes_name(xdrproc_t fn, size_t size, const uint8_t *before, size_t beforelen,
			 const char *text, uint32_t len, const uint8_t *after, size_t afterlen)
{
	uint8_t buf[256];
	size_t n = 0;
	uint32_t be = htonl(len);
	void *obj = calloc(1, size);
	bool ok;
	XDR x;

	assert_non_null(obj);
	if (beforelen > 0)
		memcpy(buf + n, before, beforelen);
	n += beforelen;
	memcpy(buf + n, &be, 4);
	n += 4;
	memset(buf + n, 0, (len + 3) & ~3u);
	memcpy(buf + n, text, len);
	n += (len + 3) & ~3u;
	memcpy(buf + n, after, afterlen);
	n += afterlen;
	xdrmem_create(&x, (char *)buf, (u_int)n, XDR_DECODE);
	ok = fn(&x, obj);
	xdr_destroy(&x);
	xdr_free(fn, obj);
	free(obj);
	return ok;
}

static void test_lock_names_strict(void **state)
{
	static const uint8_t state_word[4] = { 0, 0, 0, 7 };
	static const uint8_t ids[12] = { 0, 1, 0x86, 0xb5, 0, 0, 0, 4, 0, 0, 0, 16 };
	/* nlm4_lockargs up to caller_name: an empty cookie, block, exclusive */
	static const uint8_t lock_head[12] = { 0 };
	/* after caller_name: empty fh and oh, svid, offset, length; reclaim, state */
	static const uint8_t lock_tail[4 * 9] = { 0 };

	(void)state;
	/* SM_NOTIFY's mon_name, SM_UNMON_ALL's my_name */
	assert_true(decodes_name((xdrproc_t)xdr_stat_chge, sizeof(stat_chge), NULL, 0, "abcd", 4,
				 state_word, 4));
	assert_false(decodes_name((xdrproc_t)xdr_stat_chge, sizeof(stat_chge), NULL, 0, "ab\0d", 4,
				  state_word, 4));
	assert_false(decodes_name((xdrproc_t)xdr_my_id, sizeof(my_id), NULL, 0, "h\0st", 4, ids,
				  sizeof(ids)));
	/* FREE_ALL's name, LOCK's caller_name */
	assert_false(decodes_name((xdrproc_t)xdr_nlm4_notify, sizeof(nlm4_notify), NULL, 0,
				  "cl\0ent", 6, state_word, 4));
	assert_true(decodes_name((xdrproc_t)xdr_nlm4_lockargs, sizeof(nlm4_lockargs), lock_head,
				 sizeof(lock_head), "client", 6, lock_tail, sizeof(lock_tail)));
	assert_false(decodes_name((xdrproc_t)xdr_nlm4_lockargs, sizeof(nlm4_lockargs), lock_head,
				  sizeof(lock_head), "cli\0nt", 6, lock_tail, sizeof(lock_tail)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fattr_size),
		cmocka_unit_test(test_getattr_res),
		cmocka_unit_test(test_write_args),
		cmocka_unit_test(test_oversized_handle),
		cmocka_unit_test(test_create_args),
		cmocka_unit_test(test_readdir_res),
		cmocka_unit_test(test_readdirplus_res),
		cmocka_unit_test(test_readdirplus_fast),
		cmocka_unit_test(test_wcc_res),
		cmocka_unit_test(test_mount_types),
		cmocka_unit_test(test_lock_names_strict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
