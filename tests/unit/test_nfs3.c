/*
 * The NFS and MOUNT handlers called directly, as the dispatcher would, against a real
 * union over temporary directories and a real store.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_internal.h"
#include "../rmtree.h"

#define NFILES 60

struct env {
	char e_root[64];
	char e_upper[96];
	char e_lower[96];
	char e_state[96];
	char *e_branches[2];
	struct export_conf e_ec;
	struct config e_cf;
	struct store *e_store;
	struct union_export *e_ux;
	struct union_export *e_exports[1];
	struct nfs_server e_ns;
	struct rpc_req e_rq;
	nfs_fh3 e_rootfh;
	char e_rootbuf[FH_LEN];
};

static void write_file(const char *dir, const char *name, const char *data)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

/* A fresh call: arena freed, peer on a privileged port, root with AUTH_SYS. */
static struct rpc_req *req(struct env *e)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&e->e_rq.rq_peer;

	rpc_alloc_free(&e->e_rq);
	memset(&e->e_rq, 0, sizeof(e->e_rq));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(700);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	e->e_rq.rq_peerlen = sizeof(*sin);
	e->e_rq.rq_protocol = IPPROTO_TCP;
	e->e_rq.rq_ctx = &e->e_ns;
	e->e_rq.rq_cred.rc_flavor = AUTH_SYS;
	return &e->e_rq;
}

static int env_setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	char err[256], sub[160];
	int rc;

	assert_non_null(e);
	strcpy(e->e_root, "/tmp/test_nfs3.XXXXXX");
	assert_non_null(mkdtemp(e->e_root));
	snprintf(e->e_upper, sizeof(e->e_upper), "%s/upper", e->e_root);
	snprintf(e->e_lower, sizeof(e->e_lower), "%s/lower", e->e_root);
	snprintf(e->e_state, sizeof(e->e_state), "%s/state", e->e_root);
	assert_int_equal(mkdir(e->e_upper, 0755), 0);
	assert_int_equal(mkdir(e->e_lower, 0755), 0);
	write_file(e->e_lower, "lowfile", "hello");
	snprintf(sub, sizeof(sub), "%s/sub", e->e_lower);
	assert_int_equal(mkdir(sub, 0755), 0);
	write_file(sub, "inner", "in");

	/* The handlers read only the exports; e_cf is zeroed by calloc. */
	e->e_branches[0] = e->e_upper;
	e->e_branches[1] = e->e_lower;
	e->e_ec.ec_name = "/union";
	e->e_ec.ec_branches = e->e_branches;
	e->e_ec.ec_nbranches = 2;
	e->e_ec.ec_opts.eo_squash = SQUASH_NONE;
	e->e_ec.ec_opts.eo_anonuid = 65534;
	e->e_ec.ec_opts.eo_anongid = 65534;
	e->e_ec.ec_opts.eo_secure = true;
	e->e_cf.cf_exports = &e->e_ec;
	e->e_cf.cf_nexports = 1;

	rc = store_open(e->e_state, &e->e_store, err, sizeof(err));
	if (rc != 0)
		fail_msg("store_open: %s", err);
	rc = union_open(e->e_ec.ec_name, e->e_ec.ec_branches, e->e_ec.ec_nbranches, NULL, 0, "fix -e",
			e->e_store, &e->e_ux, err, sizeof(err));
	if (rc != 0)
		fail_msg("union_open: %s", err);
	nfs_server_init(&e->e_ns, &e->e_cf);
	e->e_exports[0] = e->e_ux;
	e->e_ns.ns_exports = e->e_exports;
	e->e_ns.ns_nexports = 1;
	store_handle_key(e->e_store, e->e_ns.ns_handle_key);
	{
		struct fh h = { .fh_export = union_export_id(e->e_ux), .fh_ino = STORE_ROOT_INO };

		fh_encode(&h, e->e_ns.ns_handle_key, (uint8_t *)e->e_rootbuf);
		e->e_rootfh.data.data_len = FH_LEN;
		e->e_rootfh.data.data_val = e->e_rootbuf;
	}
	*state = e;
	return 0;
}

static int env_teardown(void **state)
{
	struct env *e = *state;

	rpc_alloc_free(&e->e_rq);
	nfs_server_free(&e->e_ns);
	union_close(e->e_ux);
	store_close(e->e_store);
	rm_tree(e->e_root);
	free(e);
	return 0;
}

/* Copies a handle out of the arena so it survives the next call. */
static void keep_fh(const nfs_fh3 *in, nfs_fh3 *out, char *buf)
{
	assert_int_equal(in->data.data_len, FH_LEN);
	memcpy(buf, in->data.data_val, FH_LEN);
	out->data.data_len = FH_LEN;
	out->data.data_val = buf;
}

static nfsstat3 do_lookup(struct env *e, const nfs_fh3 *dir, const char *name, nfs_fh3 *out,
			  char *buf, fattr3 *attr)
{
	LOOKUP3args a = { .what = { .dir = *dir, .name = (char *)name } };
	LOOKUP3res r;

	assert_int_equal(nfs3_lookup(req(e), &a, &r), RPC_OUT_REPLY);
	if (r.status == NFS3_OK) {
		assert_true(r.LOOKUP3res_u.resok.obj_attributes.attributes_follow);
		assert_true(r.LOOKUP3res_u.resok.dir_attributes.attributes_follow);
		if (out != NULL)
			keep_fh(&r.LOOKUP3res_u.resok.object, out, buf);
		if (attr != NULL)
			*attr = r.LOOKUP3res_u.resok.obj_attributes.post_op_attr_u.attributes;
	}
	return r.status;
}

static nfsstat3 do_getattr(struct env *e, const nfs_fh3 *fh, fattr3 *attr)
{
	GETATTR3args a = { .object = *fh };
	GETATTR3res r;

	assert_int_equal(nfs3_getattr(req(e), &a, &r), RPC_OUT_REPLY);
	if (r.status == NFS3_OK && attr != NULL)
		*attr = r.GETATTR3res_u.resok.obj_attributes;
	return r.status;
}

static nfsstat3 do_create(struct env *e, const nfs_fh3 *dir, const char *name,
			  createmode3 mode, const char *verf, nfs_fh3 *out, char *buf, fattr3 *attr)
{
	CREATE3args a;
	CREATE3res r;

	memset(&a, 0, sizeof(a));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.how.mode = mode;
	if (mode == EXCLUSIVE) {
		memcpy(a.how.createhow3_u.verf, verf, 8);
	} else {
		a.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	}
	assert_int_equal(nfs3_create(req(e), &a, &r), RPC_OUT_REPLY);
	if (r.status == NFS3_OK) {
		assert_true(r.CREATE3res_u.resok.obj.handle_follows);
		assert_true(r.CREATE3res_u.resok.obj_attributes.attributes_follow);
		assert_true(r.CREATE3res_u.resok.dir_wcc.after.attributes_follow);
		if (out != NULL)
			keep_fh(&r.CREATE3res_u.resok.obj.post_op_fh3_u.handle, out, buf);
		if (attr != NULL)
			*attr = r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes;
	}
	return r.status;
}

static void test_getattr_root(void **state)
{
	struct env *e = *state;
	fattr3 fa;

	assert_int_equal(do_getattr(e, &e->e_rootfh, &fa), NFS3_OK);
	assert_int_equal(fa.type, NF3DIR);
	assert_true(fa.fileid == STORE_ROOT_INO);
	assert_true(fa.fsid == union_fsid(e->e_ux));
}

static void test_bad_handles(void **state)
{
	struct env *e = *state;
	char buf[32];
	nfs_fh3 fh = { .data = { .data_len = 5, .data_val = buf } };
	struct fh h = { .fh_export = 999, .fh_ino = 1 };

	memset(buf, 0, sizeof(buf));
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3ERR_BADHANDLE);
	fh.data.data_len = 0;
	fh.data.data_val = NULL;
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3ERR_BADHANDLE);
	/* A forged MAC. */
	memcpy(buf, e->e_rootbuf, FH_LEN);
	buf[FH_LEN - 1] ^= 1;
	fh.data.data_val = buf;
	fh.data.data_len = FH_LEN;
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3ERR_BADHANDLE);
	/* A real handle of an export we no longer serve. */
	fh_encode(&h, e->e_ns.ns_handle_key, (uint8_t *)buf);
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3ERR_STALE);
	/* An ino that never existed. */
	h.fh_export = union_export_id(e->e_ux);
	h.fh_ino = 987654;
	fh_encode(&h, e->e_ns.ns_handle_key, (uint8_t *)buf);
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3ERR_STALE);
	/* The zero-padded 32-byte form is accepted. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, e->e_rootbuf, FH_LEN);
	fh.data.data_len = 32;
	assert_int_equal(do_getattr(e, &fh, NULL), NFS3_OK);
}

static void test_secure_port(void **state)
{
	struct env *e = *state;
	GETATTR3args a = { .object = e->e_rootfh };
	GETATTR3res r;
	struct rpc_req *rq = req(e);

	((struct sockaddr_in *)&rq->rq_peer)->sin_port = htons(40000);
	assert_int_equal(nfs3_getattr(rq, &a, &r), RPC_OUT_AUTH_TOOWEAK);
	e->e_ec.ec_opts.eo_secure = false;
	rq = req(e);
	((struct sockaddr_in *)&rq->rq_peer)->sin_port = htons(40000);
	assert_int_equal(nfs3_getattr(rq, &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	e->e_ec.ec_opts.eo_secure = true;
}

static void test_lookup(void **state)
{
	struct env *e = *state;
	char b1[FH_LEN], b2[FH_LEN];
	nfs_fh3 sub, inner;
	fattr3 fa, fb;

	assert_int_equal(do_lookup(e, &e->e_rootfh, "lowfile", NULL, NULL, &fa), NFS3_OK);
	assert_int_equal(fa.type, NF3REG);
	assert_true(fa.size == 5);
	assert_true(fa.fileid > STORE_ROOT_INO);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "nothing", NULL, NULL, NULL), NFS3ERR_NOENT);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "sub", &sub, b1, &fa), NFS3_OK);
	assert_int_equal(fa.type, NF3DIR);
	assert_int_equal(do_lookup(e, &sub, "inner", &inner, b2, &fb), NFS3_OK);
	assert_true(fb.size == 2);
	/* ".." of sub is the root; ".." of the root is the root. */
	assert_int_equal(do_lookup(e, &sub, "..", NULL, NULL, &fb), NFS3_OK);
	assert_true(fb.fileid == STORE_ROOT_INO);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "..", NULL, NULL, &fb), NFS3_OK);
	assert_true(fb.fileid == STORE_ROOT_INO);
	/* LOOKUP in a file. */
	assert_int_equal(do_lookup(e, &inner, "x", NULL, NULL, NULL), NFS3ERR_NOTDIR);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "a/b", NULL, NULL, NULL), NFS3ERR_NOENT);
	/* The fileid is stable. */
	assert_int_equal(do_getattr(e, &sub, &fb), NFS3_OK);
	assert_true(fb.fileid == fa.fileid);
}

static void test_create_write_read_commit(void **state)
{
	struct env *e = *state;
	char b[FH_LEN], data[] = "abcdefgh";
	WRITE3args wa;
	WRITE3res wr;
	READ3args ra;
	READ3res rr;
	COMMIT3args ca;
	COMMIT3res cr;
	nfs_fh3 f;
	fattr3 fa;

	assert_int_equal(do_create(e, &e->e_rootfh, "f", UNCHECKED, NULL, &f, b, &fa), NFS3_OK);
	assert_int_equal(fa.type, NF3REG);
	assert_int_equal(fa.mode, 0644);
	assert_true(fa.size == 0);

	memset(&wa, 0, sizeof(wa));
	wa.file = f;
	wa.count = 8;
	wa.stable = FILE_SYNC;
	wa.data.data_len = 8;
	wa.data.data_val = data;
	assert_int_equal(nfs3_write(req(e), &wa, &wr), RPC_OUT_REPLY);
	assert_int_equal(wr.status, NFS3_OK);
	assert_int_equal(wr.WRITE3res_u.resok.count, 8);
	assert_int_equal(wr.WRITE3res_u.resok.committed, FILE_SYNC);
	assert_memory_equal(wr.WRITE3res_u.resok.verf, e->e_ns.ns_write_verf, 8);
	assert_true(wr.WRITE3res_u.resok.file_wcc.before.attributes_follow);
	assert_true(wr.WRITE3res_u.resok.file_wcc.after.attributes_follow);
	assert_true(wr.WRITE3res_u.resok.file_wcc.after.post_op_attr_u.attributes.size == 8);

	wa.offset = 8;
	wa.stable = UNSTABLE;
	assert_int_equal(nfs3_write(req(e), &wa, &wr), RPC_OUT_REPLY);
	assert_int_equal(wr.status, NFS3_OK);
	assert_true(wr.WRITE3res_u.resok.committed >= UNSTABLE);

	/* Less data than promised. */
	wa.count = 9;
	assert_int_equal(nfs3_write(req(e), &wa, &wr), RPC_OUT_REPLY);
	assert_int_equal(wr.status, NFS3ERR_INVAL);

	memset(&ca, 0, sizeof(ca));
	ca.file = f;
	assert_int_equal(nfs3_commit(req(e), &ca, &cr), RPC_OUT_REPLY);
	assert_int_equal(cr.status, NFS3_OK);
	assert_memory_equal(cr.COMMIT3res_u.resok.verf, e->e_ns.ns_write_verf, 8);

	memset(&ra, 0, sizeof(ra));
	ra.file = f;
	ra.count = 100;
	assert_int_equal(nfs3_read(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.status, NFS3_OK);
	assert_int_equal(rr.READ3res_u.resok.count, 16);
	assert_true(rr.READ3res_u.resok.eof);
	assert_memory_equal(rr.READ3res_u.resok.data.data_val, "abcdefghabcdefgh", 16);
	ra.count = 4;
	ra.offset = 2;
	assert_int_equal(nfs3_read(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.READ3res_u.resok.count, 4);
	assert_false(rr.READ3res_u.resok.eof);
	assert_memory_equal(rr.READ3res_u.resok.data.data_val, "cdef", 4);
	/* READ of a directory. */
	ra.file = e->e_rootfh;
	assert_int_equal(nfs3_read(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_not_equal(rr.status, NFS3_OK);
}

static void test_read_caps(void **state)
{
	struct env *e = *state;
	char path[160], *big;
	READ3args ra;
	READ3res rr;
	struct rpc_req *rq;
	nfs_fh3 f;
	char b[FH_LEN];
	int fd;

	snprintf(path, sizeof(path), "%s/big", e->e_lower);
	big = calloc(1, 2 << 20);
	assert_non_null(big);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(write(fd, big, 2 << 20), 2 << 20);
	close(fd);
	free(big);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "big", &f, b, NULL), NFS3_OK);
	memset(&ra, 0, sizeof(ra));
	ra.file = f;
	ra.count = 4 << 20;
	assert_int_equal(nfs3_read(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.status, NFS3_OK);
	assert_int_equal(rr.READ3res_u.resok.count, NFS_MAX_IO_TCP);
	assert_false(rr.READ3res_u.resok.eof);
	rq = req(e);
	rq->rq_protocol = IPPROTO_UDP;
	assert_int_equal(nfs3_read(rq, &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.READ3res_u.resok.count, NFS_MAX_IO_UDP);
	ra.offset = (2 << 20) - 10;
	assert_int_equal(nfs3_read(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.READ3res_u.resok.count, 10);
	assert_true(rr.READ3res_u.resok.eof);
}

static void test_create_modes(void **state)
{
	struct env *e = *state;
	char b1[FH_LEN], b2[FH_LEN];
	nfs_fh3 f1, f2;
	fattr3 a1, a2;

	assert_int_equal(do_create(e, &e->e_rootfh, "x", EXCLUSIVE, "verf0001", &f1, b1, &a1),
			 NFS3_OK);
	/* A retransmission with the same verifier succeeds with the same file. */
	assert_int_equal(do_create(e, &e->e_rootfh, "x", EXCLUSIVE, "verf0001", &f2, b2, &a2),
			 NFS3_OK);
	assert_true(a1.fileid == a2.fileid);
	assert_int_equal(do_create(e, &e->e_rootfh, "x", EXCLUSIVE, "verf0002", NULL, NULL, NULL),
			 NFS3ERR_EXIST);
	assert_int_equal(do_create(e, &e->e_rootfh, "x", GUARDED, NULL, NULL, NULL, NULL),
			 NFS3ERR_EXIST);
	assert_int_equal(do_create(e, &e->e_rootfh, "lowfile", GUARDED, NULL, NULL, NULL, NULL),
			 NFS3ERR_EXIST);
	assert_int_equal(do_create(e, &e->e_rootfh, "x", UNCHECKED, NULL, NULL, NULL, &a2),
			 NFS3_OK);
	assert_true(a1.fileid == a2.fileid);
	assert_int_equal(do_create(e, &e->e_rootfh, "", UNCHECKED, NULL, NULL, NULL, NULL),
			 NFS3ERR_ACCES);
	assert_int_equal(do_create(e, &e->e_rootfh, "..", UNCHECKED, NULL, NULL, NULL, NULL),
			 NFS3ERR_EXIST);
}

static void test_mkdir_symlink_mknod(void **state)
{
	struct env *e = *state;
	MKDIR3args ma;
	MKDIR3res mr;
	SYMLINK3args sa;
	SYMLINK3res sr;
	READLINK3args la;
	READLINK3res lr;
	MKNOD3args na;
	MKNOD3res nr;

	memset(&ma, 0, sizeof(ma));
	ma.where.dir = e->e_rootfh;
	ma.where.name = "d";
	ma.attributes.mode.set_it = TRUE;
	ma.attributes.mode.set_mode3_u.mode = 0750;
	assert_int_equal(nfs3_mkdir(req(e), &ma, &mr), RPC_OUT_REPLY);
	assert_int_equal(mr.status, NFS3_OK);
	assert_int_equal(mr.MKDIR3res_u.resok.obj_attributes.post_op_attr_u.attributes.type, NF3DIR);
	assert_int_equal(mr.MKDIR3res_u.resok.obj_attributes.post_op_attr_u.attributes.mode, 0750);
	assert_true(mr.MKDIR3res_u.resok.dir_wcc.before.attributes_follow);
	assert_int_equal(nfs3_mkdir(req(e), &ma, &mr), RPC_OUT_REPLY);
	assert_int_equal(mr.status, NFS3ERR_EXIST);

	memset(&sa, 0, sizeof(sa));
	sa.where.dir = e->e_rootfh;
	sa.where.name = "l";
	sa.symlink.symlink_data = "some/target";
	assert_int_equal(nfs3_symlink(req(e), &sa, &sr), RPC_OUT_REPLY);
	assert_int_equal(sr.status, NFS3_OK);
	assert_int_equal(sr.SYMLINK3res_u.resok.obj_attributes.post_op_attr_u.attributes.type,
			 NF3LNK);
	memset(&la, 0, sizeof(la));
	la.symlink = sr.SYMLINK3res_u.resok.obj.post_op_fh3_u.handle;
	assert_int_equal(nfs3_readlink(&e->e_rq, &la, &lr), RPC_OUT_REPLY);
	assert_int_equal(lr.status, NFS3_OK);
	assert_string_equal(lr.READLINK3res_u.resok.data, "some/target");
	assert_true(lr.READLINK3res_u.resok.symlink_attributes.attributes_follow);
	/* READLINK of a directory. */
	la.symlink = e->e_rootfh;
	assert_int_equal(nfs3_readlink(req(e), &la, &lr), RPC_OUT_REPLY);
	assert_int_not_equal(lr.status, NFS3_OK);

	memset(&na, 0, sizeof(na));
	na.where.dir = e->e_rootfh;
	na.where.name = "fifo";
	na.what.type = NF3FIFO;
	assert_int_equal(nfs3_mknod(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3_OK);
	assert_int_equal(nr.MKNOD3res_u.resok.obj_attributes.post_op_attr_u.attributes.type,
			 NF3FIFO);
	na.where.name = "reg";
	na.what.type = NF3REG;
	assert_int_equal(nfs3_mknod(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3ERR_BADTYPE);
	na.what.type = NF3DIR;
	assert_int_equal(nfs3_mknod(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3ERR_BADTYPE);
	na.where.name = "chr";
	na.what.type = NF3CHR;
	na.what.mknoddata3_u.device.spec.specdata1 = 1;
	na.what.mknoddata3_u.device.spec.specdata2 = 3;
	assert_int_equal(nfs3_mknod(req(e), &na, &nr), RPC_OUT_REPLY);
	if (nr.status == NFS3_OK) {
		assert_int_equal(nr.MKNOD3res_u.resok.obj_attributes.post_op_attr_u.attributes.type,
				 NF3CHR);
		assert_int_equal(nr.MKNOD3res_u.resok.obj_attributes.post_op_attr_u.attributes
				 .rdev.specdata1, 1);
		assert_int_equal(nr.MKNOD3res_u.resok.obj_attributes.post_op_attr_u.attributes
				 .rdev.specdata2, 3);
	}
}

static void test_setattr(void **state)
{
	struct env *e = *state;
	SETATTR3args a;
	SETATTR3res r;
	char b[FH_LEN];
	nfs_fh3 f;
	fattr3 fa;

	assert_int_equal(do_create(e, &e->e_rootfh, "s", UNCHECKED, NULL, &f, b, &fa), NFS3_OK);
	memset(&a, 0, sizeof(a));
	a.object = f;
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = 0600;
	a.new_attributes.size.set_it = TRUE;
	a.new_attributes.size.set_size3_u.size = 1000;
	a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	a.new_attributes.mtime.set_mtime_u.mtime.seconds = 1000000;
	a.new_attributes.atime.set_it = SET_TO_SERVER_TIME;
	assert_int_equal(nfs3_setattr(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	assert_true(r.SETATTR3res_u.resok.obj_wcc.before.attributes_follow);
	assert_true(r.SETATTR3res_u.resok.obj_wcc.after.attributes_follow);
	fa = r.SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u.attributes;
	assert_int_equal(fa.mode, 0600);
	assert_true(fa.size == 1000);
	assert_int_equal(fa.mtime.seconds, 1000000);

	/* A guard that does not match the ctime: nothing changes. */
	memset(&a.new_attributes, 0, sizeof(a.new_attributes));
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = 0640;
	a.guard.check = TRUE;
	a.guard.sattrguard3_u.obj_ctime.seconds = 1;
	assert_int_equal(nfs3_setattr(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3ERR_NOT_SYNC);
	assert_int_equal(do_getattr(e, &f, &fa), NFS3_OK);
	assert_int_equal(fa.mode, 0600);
	/* The right guard. */
	a.guard.sattrguard3_u.obj_ctime = fa.ctime;
	assert_int_equal(nfs3_setattr(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	assert_int_equal(r.SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u.attributes.mode, 0640);
}

static void test_namespace(void **state)
{
	struct env *e = *state;
	char b[FH_LEN], bd[FH_LEN];
	LINK3args la;
	LINK3res lr;
	RENAME3args na;
	RENAME3res nr;
	REMOVE3args ra;
	REMOVE3res rr;
	MKDIR3args ma;
	MKDIR3res mr;
	nfs_fh3 f, d;
	fattr3 fa, fb;

	assert_int_equal(do_create(e, &e->e_rootfh, "n", UNCHECKED, NULL, &f, b, &fa), NFS3_OK);
	memset(&ma, 0, sizeof(ma));
	ma.where.dir = e->e_rootfh;
	ma.where.name = "dd";
	assert_int_equal(nfs3_mkdir(req(e), &ma, &mr), RPC_OUT_REPLY);
	assert_int_equal(mr.status, NFS3_OK);
	keep_fh(&mr.MKDIR3res_u.resok.obj.post_op_fh3_u.handle, &d, bd);

	memset(&la, 0, sizeof(la));
	la.file = f;
	la.link.dir = d;
	la.link.name = "n2";
	assert_int_equal(nfs3_link(req(e), &la, &lr), RPC_OUT_REPLY);
	assert_int_equal(lr.status, NFS3_OK);
	assert_true(lr.LINK3res_u.resok.file_attributes.attributes_follow);
	assert_int_equal(lr.LINK3res_u.resok.file_attributes.post_op_attr_u.attributes.nlink, 2);
	assert_true(lr.LINK3res_u.resok.linkdir_wcc.after.attributes_follow);
	assert_int_equal(do_lookup(e, &d, "n2", NULL, NULL, &fb), NFS3_OK);
	assert_true(fb.fileid == fa.fileid);
	assert_int_equal(nfs3_link(req(e), &la, &lr), RPC_OUT_REPLY);
	assert_int_equal(lr.status, NFS3ERR_EXIST);

	memset(&na, 0, sizeof(na));
	na.from.dir = d;
	na.from.name = "n2";
	na.to.dir = e->e_rootfh;
	na.to.name = "n3";
	assert_int_equal(nfs3_rename(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3_OK);
	assert_true(nr.RENAME3res_u.resok.fromdir_wcc.after.attributes_follow);
	assert_true(nr.RENAME3res_u.resok.todir_wcc.after.attributes_follow);
	assert_int_equal(do_lookup(e, &e->e_rootfh, "n3", NULL, NULL, &fb), NFS3_OK);
	assert_true(fb.fileid == fa.fileid);
	assert_int_equal(do_lookup(e, &d, "n2", NULL, NULL, NULL), NFS3ERR_NOENT);
	assert_int_equal(nfs3_rename(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3ERR_NOENT);
	/* A target handle that is garbage. */
	na.to.dir.data.data_len = 3;
	assert_int_equal(nfs3_rename(req(e), &na, &nr), RPC_OUT_REPLY);
	assert_int_equal(nr.status, NFS3ERR_BADHANDLE);

	memset(&ra, 0, sizeof(ra));
	ra.object.dir = e->e_rootfh;
	ra.object.name = "n3";
	assert_int_equal(nfs3_remove(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.status, NFS3_OK);
	assert_true(rr.REMOVE3res_u.resok.dir_wcc.before.attributes_follow);
	assert_true(rr.REMOVE3res_u.resok.dir_wcc.after.attributes_follow);
	assert_int_equal(nfs3_remove(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.status, NFS3ERR_NOENT);
	ra.object.name = "dd";
	assert_int_equal(nfs3_remove(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_not_equal(rr.status, NFS3_OK);
	assert_int_equal(nfs3_rmdir(req(e), &ra, &rr), RPC_OUT_REPLY);
	assert_int_equal(rr.status, NFS3_OK);
	/* The removed directory's handle is stale now. */
	assert_int_equal(do_getattr(e, &d, NULL), NFS3ERR_STALE);
	/* The other name of the file still works. */
	assert_int_equal(do_getattr(e, &f, &fb), NFS3_OK);
	assert_int_equal(fb.nlink, 1);
}

/* Lists the root with READDIR (plus: READDIRPLUS) in small pages; returns the names seen. */
static int list_all(struct env *e, bool plus, uint32_t count, char names[][32], int max)
{
	READDIRPLUS3args pa;
	READDIRPLUS3res pr;
	READDIR3args a;
	READDIR3res r;
	entryplus3 *ep;
	entry3 *en;
	uint64_t cookie = 0;
	char verf[8];
	bool eof = false;
	int n = 0, rounds = 0;

	memset(verf, 0, sizeof(verf));
	while (!eof) {
		assert_true(++rounds < 1000);
		if (plus) {
			memset(&pa, 0, sizeof(pa));
			pa.dir = e->e_rootfh;
			pa.cookie = cookie;
			memcpy(pa.cookieverf, verf, 8);
			pa.dircount = count / 2;
			pa.maxcount = count;
			assert_int_equal(nfs3_readdirplus(req(e), &pa, &pr), RPC_OUT_REPLY);
			assert_int_equal(pr.status, NFS3_OK);
			assert_true(xdr_sizeof((xdrproc_t)xdr_READDIRPLUS3resok,
					       &pr.READDIRPLUS3res_u.resok) <= count);
			memcpy(verf, pr.READDIRPLUS3res_u.resok.cookieverf, 8);
			for (ep = pr.READDIRPLUS3res_u.resok.reply.entries; ep; ep = ep->nextentry) {
				fattr3 fa;

				assert_true(n < max);
				snprintf(names[n++], 32, "%s", ep->name);
				cookie = ep->cookie;
				assert_true(ep->name_handle.handle_follows);
				assert_true(ep->name_attributes.attributes_follow);
				assert_true(ep->name_attributes.post_op_attr_u.attributes.fileid ==
					    ep->fileid);
				/* The entry's handle names the same object. */
				{
					char hb[FH_LEN];
					nfs_fh3 h;

					GETATTR3args ga;
					GETATTR3res gr;
					struct rpc_req rq2 = e->e_rq;

					keep_fh(&ep->name_handle.post_op_fh3_u.handle, &h, hb);
					ga.object = h;
					/* Its own arena: the listing lives in e_rq's. */
					rq2.rq_arena = NULL;
					assert_int_equal(nfs3_getattr(&rq2, &ga, &gr), RPC_OUT_REPLY);
					assert_int_equal(gr.status, NFS3_OK);
					fa = gr.GETATTR3res_u.resok.obj_attributes;
					assert_true(fa.fileid == ep->fileid);
					rpc_alloc_free(&rq2);
				}
			}
			eof = pr.READDIRPLUS3res_u.resok.reply.eof;
		} else {
			memset(&a, 0, sizeof(a));
			a.dir = e->e_rootfh;
			a.cookie = cookie;
			memcpy(a.cookieverf, verf, 8);
			a.count = count;
			assert_int_equal(nfs3_readdir(req(e), &a, &r), RPC_OUT_REPLY);
			assert_int_equal(r.status, NFS3_OK);
			assert_true(xdr_sizeof((xdrproc_t)xdr_READDIR3resok,
					       &r.READDIR3res_u.resok) <= count);
			memcpy(verf, r.READDIR3res_u.resok.cookieverf, 8);
			for (en = r.READDIR3res_u.resok.reply.entries; en; en = en->nextentry) {
				assert_true(n < max);
				assert_true(en->fileid != 0);
				snprintf(names[n++], 32, "%s", en->name);
				cookie = en->cookie;
			}
			eof = r.READDIR3res_u.resok.reply.eof;
		}
	}
	return n;
}

static void check_listing(char names[][32], int n)
{
	int i, j, found;
	char want[32];

	/* ".", "..", lowfile, sub, and the NFILES created: each exactly once. */
	assert_int_equal(n, NFILES + 4);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			assert_string_not_equal(names[i], names[j]);
	for (i = 0; i < NFILES; i++) {
		snprintf(want, sizeof(want), "file-%03d", i);
		for (found = 0, j = 0; j < n; j++)
			found |= strcmp(names[j], want) == 0;
		assert_true(found);
	}
}

static void test_readdir(void **state)
{
	struct env *e = *state;
	char names[NFILES + 10][32], name[32];
	READDIR3args a;
	READDIR3res r;
	READDIRPLUS3args pa;
	READDIRPLUS3res pr;
	int i, n;

	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "file-%03d", i);
		assert_int_equal(do_create(e, &e->e_rootfh, name, UNCHECKED, NULL, NULL, NULL, NULL),
				 NFS3_OK);
	}
	n = list_all(e, false, 400, names, NFILES + 10);
	check_listing(names, n);
	n = list_all(e, false, 65536, names, NFILES + 10);
	check_listing(names, n);
	n = list_all(e, true, 1200, names, NFILES + 10);
	check_listing(names, n);

	memset(&a, 0, sizeof(a));
	a.dir = e->e_rootfh;
	a.count = 100;
	assert_int_equal(nfs3_readdir(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3ERR_TOOSMALL);
	a.count = 4096;
	a.cookie = 5;
	memcpy(a.cookieverf, "notours!", 8);
	assert_int_equal(nfs3_readdir(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3ERR_BAD_COOKIE);
	/* A zero verifier with a cookie is accepted (our cookies never expire). */
	memset(a.cookieverf, 0, 8);
	assert_int_equal(nfs3_readdir(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	/* READDIR of a file. */
	assert_int_equal(do_create(e, &e->e_rootfh, "plain", UNCHECKED, NULL, NULL, NULL, NULL),
			 NFS3_OK);
	{
		char b[FH_LEN];

		assert_int_equal(do_lookup(e, &e->e_rootfh, "plain", &a.dir, b, NULL), NFS3_OK);
		a.cookie = 0;
		assert_int_equal(nfs3_readdir(req(e), &a, &r), RPC_OUT_REPLY);
		assert_int_equal(r.status, NFS3ERR_NOTDIR);
	}

	memset(&pa, 0, sizeof(pa));
	pa.dir = e->e_rootfh;
	pa.dircount = 4096;
	pa.maxcount = 200;
	assert_int_equal(nfs3_readdirplus(req(e), &pa, &pr), RPC_OUT_REPLY);
	assert_int_equal(pr.status, NFS3ERR_TOOSMALL);
	/* dircount is a hint: too small for one entry, maxcount still has room for all. */
	pa.maxcount = 65536;
	pa.dircount = 10;
	assert_int_equal(nfs3_readdirplus(req(e), &pa, &pr), RPC_OUT_REPLY);
	assert_int_equal(pr.status, NFS3_OK);
	assert_non_null(pr.READDIRPLUS3res_u.resok.reply.entries);
	assert_true(pr.READDIRPLUS3res_u.resok.reply.eof);
}

static void test_fs_procs(void **state)
{
	struct env *e = *state;
	FSSTAT3args sa = { .fsroot = e->e_rootfh };
	FSSTAT3res sr;
	FSINFO3args ia = { .fsroot = e->e_rootfh };
	FSINFO3res ir;
	PATHCONF3args pa = { .object = e->e_rootfh };
	PATHCONF3res pr;
	struct rpc_req *rq;

	assert_int_equal(nfs3_fsstat(req(e), &sa, &sr), RPC_OUT_REPLY);
	assert_int_equal(sr.status, NFS3_OK);
	assert_true(sr.FSSTAT3res_u.resok.tbytes > 0);
	assert_true(sr.FSSTAT3res_u.resok.tbytes >= sr.FSSTAT3res_u.resok.fbytes);
	assert_true(sr.FSSTAT3res_u.resok.fbytes >= sr.FSSTAT3res_u.resok.abytes);
	assert_true(sr.FSSTAT3res_u.resok.obj_attributes.attributes_follow);

	assert_int_equal(nfs3_fsinfo(req(e), &ia, &ir), RPC_OUT_REPLY);
	assert_int_equal(ir.status, NFS3_OK);
	assert_int_equal(ir.FSINFO3res_u.resok.rtmax, 1048576);
	assert_int_equal(ir.FSINFO3res_u.resok.wtmax, 1048576);
	assert_int_equal(ir.FSINFO3res_u.resok.time_delta.nseconds, 1);
	assert_int_equal(ir.FSINFO3res_u.resok.properties,
			 FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME);
	rq = req(e);
	rq->rq_protocol = IPPROTO_UDP;
	assert_int_equal(nfs3_fsinfo(rq, &ia, &ir), RPC_OUT_REPLY);
	assert_int_equal(ir.FSINFO3res_u.resok.rtmax, 32768);

	assert_int_equal(nfs3_pathconf(req(e), &pa, &pr), RPC_OUT_REPLY);
	assert_int_equal(pr.status, NFS3_OK);
	assert_int_equal(pr.PATHCONF3res_u.resok.name_max, 255);
	assert_true(pr.PATHCONF3res_u.resok.no_trunc);
	assert_true(pr.PATHCONF3res_u.resok.case_preserving);
	assert_false(pr.PATHCONF3res_u.resok.case_insensitive);
}

static void test_read_only(void **state)
{
	struct env *e = *state;
	ACCESS3args aa = { .object = e->e_rootfh, .access = 0x3f };
	ACCESS3res ar;

	e->e_ec.ec_opts.eo_ro = true;
	assert_int_equal(do_create(e, &e->e_rootfh, "ro", UNCHECKED, NULL, NULL, NULL, NULL),
			 NFS3ERR_ROFS);
	assert_int_equal(nfs3_access(req(e), &aa, &ar), RPC_OUT_REPLY);
	assert_int_equal(ar.status, NFS3_OK);
	assert_int_equal(ar.ACCESS3res_u.resok.access,
			 ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE);
	e->e_ec.ec_opts.eo_ro = false;
	assert_int_equal(nfs3_access(req(e), &aa, &ar), RPC_OUT_REPLY);
	assert_int_equal(ar.ACCESS3res_u.resok.access, 0x3f);
	assert_true(ar.ACCESS3res_u.resok.obj_attributes.attributes_follow);
}

static void test_credentials(void **state)
{
	struct env *e = *state;
	CREATE3args a;
	CREATE3res r;
	ACCESS3args aa = { .object = e->e_rootfh, .access = 0x3f };
	ACCESS3res ar;
	struct rpc_req *rq;
	char path[160];
	struct stat st;

	if (geteuid() != 0)
		skip();
	memset(&a, 0, sizeof(a));
	a.where.dir = e->e_rootfh;
	a.how.mode = UNCHECKED;

	/* root_squash: root creates as anonuid; the upper root must let it. */
	assert_int_equal(chmod(e->e_upper, 0777), 0);
	e->e_ec.ec_opts.eo_squash = SQUASH_ROOT;
	e->e_ec.ec_opts.eo_anonuid = 4242;
	e->e_ec.ec_opts.eo_anongid = 4343;
	a.where.name = "squashed";
	assert_int_equal(nfs3_create(req(e), &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	assert_int_equal(r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes.uid, 4242);
	assert_int_equal(r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes.gid, 4343);
	cred_restore(); /* the thread acts as the caller until it is told otherwise */
	snprintf(path, sizeof(path), "%s/squashed", e->e_upper);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, 4242);

	/* A plain user is itself; the thread is the server again once restored. */
	rq = req(e);
	rq->rq_cred.rc_uid = 1000;
	rq->rq_cred.rc_gid = 1000;
	a.where.name = "user";
	assert_int_equal(nfs3_create(rq, &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	assert_int_equal(r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes.uid, 1000);
	cred_restore();
	snprintf(path, sizeof(path), "%s/owned-by-test-thread", e->e_upper);
	write_file(e->e_upper, "owned-by-test-thread", "");
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);

	/* Permission is enforced by the branch: a user cannot create in a 0755 root dir. */
	assert_int_equal(chmod(e->e_upper, 0755), 0);
	rq = req(e);
	rq->rq_cred.rc_uid = 1000;
	rq->rq_cred.rc_gid = 1000;
	a.where.name = "denied";
	assert_int_equal(nfs3_create(rq, &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3ERR_ACCES);
	cred_restore();
	rq = req(e);
	rq->rq_cred.rc_uid = 1000;
	rq->rq_cred.rc_gid = 1000;
	assert_int_equal(nfs3_access(rq, &aa, &ar), RPC_OUT_REPLY);
	assert_int_equal(ar.ACCESS3res_u.resok.access,
			 ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE);

	/* AUTH_NONE is anonymous. */
	cred_restore();
	assert_int_equal(chmod(e->e_upper, 0777), 0);
	rq = req(e);
	rq->rq_cred.rc_flavor = AUTH_NONE;
	a.where.name = "anon";
	assert_int_equal(nfs3_create(rq, &a, &r), RPC_OUT_REPLY);
	assert_int_equal(r.status, NFS3_OK);
	assert_int_equal(r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes.uid, 4242);
	cred_restore();
	e->e_ec.ec_opts.eo_squash = SQUASH_NONE;
}

static void test_mount(void **state)
{
	struct env *e = *state;
	char *path;
	mountres3 m3;
	fhstatus f1;
	mountlist ml;
	mntexports ex;
	struct rpc_req *rq;
	nfs_fh3 fh;
	fattr3 fa;
	int n;
	struct mountbody *mb;

	path = "/union";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3_OK);
	assert_int_equal(m3.mountres3_u.mountinfo.fhandle.fhandle3_len, FH_LEN);
	assert_memory_equal(m3.mountres3_u.mountinfo.fhandle.fhandle3_val, e->e_rootbuf, FH_LEN);
	assert_int_equal(m3.mountres3_u.mountinfo.auth_flavors.auth_flavors_len, 2);
	assert_int_equal(m3.mountres3_u.mountinfo.auth_flavors.auth_flavors_val[0], AUTH_SYS);
	assert_int_equal(m3.mountres3_u.mountinfo.auth_flavors.auth_flavors_val[1], AUTH_NONE);
	path = "/union/";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3_OK);

	/* A directory inside the export. */
	path = "/union/sub";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3_OK);
	fh.data.data_len = m3.mountres3_u.mountinfo.fhandle.fhandle3_len;
	fh.data.data_val = m3.mountres3_u.mountinfo.fhandle.fhandle3_val;
	{
		GETATTR3args ga = { .object = fh };
		GETATTR3res gr;

		assert_int_equal(nfs3_getattr(&e->e_rq, &ga, &gr), RPC_OUT_REPLY);
		assert_int_equal(gr.status, NFS3_OK);
		assert_int_equal(gr.GETATTR3res_u.resok.obj_attributes.type, NF3DIR);
	}
	path = "/union/lowfile";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3ERR_NOTDIR);
	path = "/union/../etc";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_not_equal(m3.fhs_status, MNT3_OK);
	path = "/nope";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3ERR_NOENT);
	path = "/unionx";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3ERR_NOENT);
	path = "";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3ERR_NOENT);

	/* Insecure source port: a MOUNT error, not a denied RPC. */
	rq = req(e);
	((struct sockaddr_in *)&rq->rq_peer)->sin_port = htons(50000);
	path = "/union";
	assert_int_equal(mnt_mnt3(rq, &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3ERR_ACCES);

	/* v1: a fixed 32-byte handle, our 24 bytes zero-padded, usable as is. */
	assert_int_equal(mnt_mnt1(req(e), &path, &f1), RPC_OUT_REPLY);
	assert_int_equal(f1.fhs_status, 0);
	assert_memory_equal(f1.fhstatus_u.fhs_fhandle, e->e_rootbuf, FH_LEN);
	fh.data.data_len = 32;
	fh.data.data_val = f1.fhstatus_u.fhs_fhandle;
	assert_int_equal(do_getattr(e, &fh, &fa), NFS3_OK);
	path = "/nope";
	assert_int_equal(mnt_mnt1(req(e), &path, &f1), RPC_OUT_REPLY);
	assert_int_equal(f1.fhs_status, 2);

	/* DUMP: one entry per host and export, however often and wherever in it mounted. */
	assert_int_equal(mnt_dump(req(e), NULL, &ml), RPC_OUT_REPLY);
	for (n = 0, mb = ml; mb != NULL; mb = mb->ml_next, n++) {
		assert_string_equal(mb->ml_hostname, "127.0.0.1");
		assert_string_equal(mb->ml_directory, "/union");
	}
	assert_int_equal(n, 1);
	/* UMNT of any path of the export, however spelled, ends the entry. */
	path = "/union//sub/.";
	assert_int_equal(mnt_umnt(req(e), &path, NULL), RPC_OUT_REPLY);
	assert_int_equal(mnt_dump(req(e), NULL, &ml), RPC_OUT_REPLY);
	assert_null(ml);
	path = "/union";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);
	assert_int_equal(m3.fhs_status, MNT3_OK);
	assert_int_equal(mnt_umntall(req(e), NULL, NULL), RPC_OUT_REPLY);
	assert_int_equal(mnt_dump(req(e), NULL, &ml), RPC_OUT_REPLY);
	assert_null(ml);
	/* Leave one behind for nfs_server_free to free. */
	path = "/union";
	assert_int_equal(mnt_mnt3(req(e), &path, &m3), RPC_OUT_REPLY);

	assert_int_equal(mnt_export(req(e), NULL, &ex), RPC_OUT_REPLY);
	assert_non_null(ex);
	assert_string_equal(ex->ex_dir, "/union");
	assert_string_equal(ex->ex_groups->gr_name, "*");
	assert_null(ex->ex_groups->gr_next);
	assert_null(ex->ex_next);
}

/* One call through the real dispatcher, to check the table and the encoded reply. */
static void test_dispatch(void **state)
{
	struct env *e = *state;
	const struct rpc_program *progs[] = { &nfs3_program, &mount_program };
	struct sockaddr_in peer;
	char call[256];
	GETATTR3args ga = { .object = e->e_rootfh };
	GETATTR3res gr;
	struct rpc_msg msg;
	size_t outlen;
	uint8_t *out;
	u_int len;
	XDR x;

	rpc_dispatch_init(progs, 2, &e->e_ns);
	memset(&peer, 0, sizeof(peer));
	peer.sin_family = AF_INET;
	peer.sin_port = htons(800);
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&msg, 0, sizeof(msg));
	msg.rm_xid = 77;
	msg.rm_direction = CALL;
	msg.rm_call.cb_rpcvers = 2;
	msg.rm_call.cb_prog = NFS_PROGRAM;
	msg.rm_call.cb_vers = NFS_V3;
	msg.rm_call.cb_proc = NFSPROC3_GETATTR;
	msg.rm_call.cb_cred.oa_flavor = AUTH_NONE;
	msg.rm_call.cb_verf.oa_flavor = AUTH_NONE;
	xdrmem_create(&x, call, sizeof(call), XDR_ENCODE);
	assert_true(xdr_callmsg(&x, &msg));
	assert_true(xdr_GETATTR3args(&x, &ga));
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	out = rpc_serve(call, len, (struct sockaddr *)&peer, sizeof(peer), IPPROTO_UDP, &outlen);
	assert_non_null(out);
	/* Skip the record mark room, then the 6-word accepted reply header with AUTH_NONE verf. */
	assert_true(outlen >= 4 + 24 + 4 + NFS_FATTR3_XDR);
	memset(&gr, 0, sizeof(gr));
	xdrmem_create(&x, (char *)out + 4 + 24, (u_int)(outlen - 4 - 24), XDR_DECODE);
	assert_true(xdr_GETATTR3res(&x, &gr));
	xdr_destroy(&x);
	assert_int_equal(gr.status, NFS3_OK);
	assert_true(gr.GETATTR3res_u.resok.obj_attributes.fileid == STORE_ROOT_INO);
	free(out);
}

/*
 * A reload hands nfs a new configuration: exports with the same branch stack take its
 * rules (calls see them at once), others keep theirs; the old tables go back to the caller.
 */
static void test_swap_rules(void **state)
{
	struct env *e = *state;
	struct export_opts eo;
	struct config next;
	char spec[256], err[CONFIG_ERRLEN];

	assert_true(nfs_rule_for(&e->e_ns, 0, req(e), &eo));
	snprintf(spec, sizeof(spec), "/union=%s:%s", e->e_upper, e->e_lower);
	config_init(&next);
	assert_int_equal(config_parse_args(&next, 5, (char *[]){ "unionnfsd", "-e", spec,
				"--client", "10.0.0.0/8(ro)", NULL }, err, sizeof(err)), 0);
	assert_int_equal(config_resolve(&next, err, sizeof(err)), 0);
	assert_int_equal(nfs_server_swap_rules(&e->e_ns, &next), 1);
	assert_int_equal(e->e_ec.ec_nrules, 1);
	assert_int_equal(next.cf_exports[0].ec_nrules, 0);
	/* the loopback peer is no longer admitted; a 10/8 one is, read-only */
	assert_false(nfs_rule_for(&e->e_ns, 0, req(e), &eo));
	((struct sockaddr_in *)&req(e)->rq_peer)->sin_addr.s_addr = htonl(0x0a000001);
	assert_true(nfs_rule_for(&e->e_ns, 0, &e->e_rq, &eo));
	assert_true(eo.eo_ro);
	/* swapping back restores the hand-built export; next owns the parsed rules again */
	assert_int_equal(nfs_server_swap_rules(&e->e_ns, &next), 1);
	assert_int_equal(e->e_ec.ec_nrules, 0);
	assert_true(nfs_rule_for(&e->e_ns, 0, req(e), &eo));
	config_free(&next);

	/* another branch stack under the same name keeps the running rules */
	snprintf(spec, sizeof(spec), "/union=%s", e->e_lower);
	config_init(&next);
	assert_int_equal(config_parse_args(&next, 5, (char *[]){ "unionnfsd", "-e", spec,
				"--client", "10.0.0.0/8(ro)", NULL }, err, sizeof(err)), 0);
	assert_int_equal(nfs_server_swap_rules(&e->e_ns, &next), 0);
	assert_int_equal(e->e_ec.ec_nrules, 0);
	assert_true(nfs_rule_for(&e->e_ns, 0, req(e), &eo));
	config_free(&next);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_getattr_root, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_bad_handles, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_secure_port, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_lookup, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_create_write_read_commit, env_setup,
						env_teardown),
		cmocka_unit_test_setup_teardown(test_read_caps, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_create_modes, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_symlink_mknod, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_setattr, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_namespace, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_readdir, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_fs_procs, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_read_only, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_credentials, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_mount, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_dispatch, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_swap_rules, env_setup, env_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
