/*
 * The MOUNT protocol (program 100005, versions 1 and 3): NULL, MNT, DUMP, UMNT, UMNTALL,
 * EXPORT over TCP and UDP. The replies are decoded here by hand rather than with the
 * generated routines, so the server's encoding is checked against a second reading.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
	(void)state;
	return it_group_setup_udp(false);
}

struct strlist {
	char *items[64];
	int n;
};

static void strlist_free(struct strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->items[i]);
	l->n = 0;
}

/* mountlist: (hostname, directory)*; keeps "host dir" strings. */
static bool_t xdr_dump_list(XDR *x, struct strlist *l)
{
	bool_t more;

	for (;;) {
		char *host = NULL, *dir = NULL;

		if (!xdr_bool(x, &more))
			return FALSE;
		if (!more)
			return TRUE;
		if (!xdr_string(x, &host, 255) || !xdr_string(x, &dir, 1024)) {
			free(host);
			free(dir);
			return FALSE;
		}
		if (l->n < 64 && asprintf(&l->items[l->n], "%s %s", host, dir) > 0)
			l->n++;
		free(host);
		free(dir);
	}
}

/* exports: (dir, groups*)*; keeps the directories. */
static bool_t xdr_export_list(XDR *x, struct strlist *l)
{
	bool_t more, gmore;

	for (;;) {
		char *dir = NULL;

		if (!xdr_bool(x, &more))
			return FALSE;
		if (!more)
			return TRUE;
		if (!xdr_string(x, &dir, 1024))
			return FALSE;
		if (l->n < 64)
			l->items[l->n++] = dir;
		else
			free(dir);
		for (;;) {
			char *g = NULL;

			if (!xdr_bool(x, &gmore))
				return FALSE;
			if (!gmore)
				break;
			if (!xdr_string(x, &g, 255))
				return FALSE;
			free(g);
		}
	}
}

static bool_t xdr_path(XDR *x, char **p)
{
	return xdr_string(x, p, 1024);
}

struct fhstatus {
	u_int fs_status;
	char fs_fh[32];
};

static bool_t xdr_fhstatus_v1(XDR *x, struct fhstatus *f)
{
	if (!xdr_u_int(x, &f->fs_status))
		return FALSE;
	if (f->fs_status != 0)
		return TRUE;
	return xdr_opaque(x, f->fs_fh, 32);
}

static void dump(CLIENT *c, struct strlist *l)
{
	enum clnt_stat cs;

	memset(l, 0, sizeof(*l));
	cs = it_call(c, IT_MNTPROC_DUMP, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)xdr_dump_list, l);
	if (cs != RPC_SUCCESS)
		fail_msg("MOUNT DUMP: %s", clnt_sperrno(cs));
}

static bool dump_has_union(const struct strlist *l)
{
	for (int i = 0; i < l->n; i++) {
		const char *sp = strchr(l->items[i], ' ');

		if (sp && !strcmp(sp + 1, IT_EXPORT))
			return true;
	}
	return false;
}

static void test_null_both_versions(void **state)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };

	(void)state;
	for (int i = 0; i < 2; i++) {
		for (uint32_t v = 1; v <= 3; v += 2) {
			CLIENT *c = it_clnt(protos[i], IT_MOUNT_PROG, v, it_srv.is_mount_port);

			assert_int_equal(it_call(c, IT_MNTPROC_NULL, (xdrproc_t)it_xdr_void, NULL,
						 (xdrproc_t)it_xdr_void, NULL),
					 RPC_SUCCESS);
			it_clnt_destroy(c);
		}
	}
}

static void test_mnt_tcp_and_udp_agree(void **state)
{
	nfs_fh3 a, b;

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &a), IT_MNT_OK);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_UDP, IT_EXPORT, &b), IT_MNT_OK);
	assert_true(it_fh_equal(&a, &b));
	assert_true(a.data.data_len > 0 && a.data.data_len <= 32);
	/* a trailing slash names the same export */
	it_fh_free(&b);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT "/", &b), IT_MNT_OK);
	assert_true(it_fh_equal(&a, &b));
	it_fh_free(&a);
	it_fh_free(&b);
}

static void test_mnt_unknown(void **state)
{
	char longpath[1100];

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, "/nope", NULL), IT_MNT_NOENT);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, "/unionx", NULL), IT_MNT_NOENT);
	assert_int_not_equal(it_mnt(&it_srv, IPPROTO_TCP, "", NULL), IT_MNT_OK);
	assert_int_not_equal(it_mnt(&it_srv, IPPROTO_TCP, "union", NULL), IT_MNT_OK);
	/* The export's real upper directory is not a mount path. */
	assert_int_not_equal(it_mnt(&it_srv, IPPROTO_TCP, it_srv.is_upper, NULL), IT_MNT_OK);
	/* longer than MNTPATHLEN: the call is refused one way or another, the server lives on */
	memset(longpath, 'a', sizeof(longpath));
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	{
		CLIENT *c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, 3, it_srv.is_mount_port);
		char *p = longpath;
		int status = -1;
		enum clnt_stat cs;

		/* encode with a larger bound than the protocol allows */
		cs = it_call(c, IT_MNTPROC_MNT, (xdrproc_t)xdr_wrapstring, &p, (xdrproc_t)xdr_int,
			     &status);
		if (cs == RPC_SUCCESS)
			assert_int_not_equal(status, IT_MNT_OK);
		it_clnt_destroy(c);
	}
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
}

static void test_export_lists_union(void **state)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };

	(void)state;
	for (int i = 0; i < 2; i++) {
		for (uint32_t v = 1; v <= 3; v += 2) {
			CLIENT *c = it_clnt(protos[i], IT_MOUNT_PROG, v, it_srv.is_mount_port);
			struct strlist l = { 0 };
			enum clnt_stat cs;

			cs = it_call(c, IT_MNTPROC_EXPORT, (xdrproc_t)it_xdr_void, NULL,
				     (xdrproc_t)xdr_export_list, &l);
			if (cs != RPC_SUCCESS)
				fail_msg("EXPORT v%u: %s", v, clnt_sperrno(cs));
			assert_int_equal(l.n, 1);
			assert_string_equal(l.items[0], IT_EXPORT);
			strlist_free(&l);
			it_clnt_destroy(c);
		}
	}
}

static void test_dump_umnt_umntall(void **state)
{
	CLIENT *c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, 3, it_srv.is_mount_port);
	struct strlist l;
	char *p = IT_EXPORT;

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
	dump(c, &l);
	if (!dump_has_union(&l))
		fail_msg("DUMP after MNT does not list %s (%d entries)", IT_EXPORT, l.n);
	strlist_free(&l);
	assert_int_equal(it_call(c, IT_MNTPROC_UMNT, (xdrproc_t)xdr_path, &p,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	dump(c, &l);
	if (dump_has_union(&l))
		fail_msg("DUMP still lists %s after UMNT", IT_EXPORT);
	strlist_free(&l);
	/* UMNT of something never mounted is harmless */
	p = "/never";
	assert_int_equal(it_call(c, IT_MNTPROC_UMNT, (xdrproc_t)xdr_path, &p,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
	assert_int_equal(it_mnt(&it_srv, IPPROTO_UDP, IT_EXPORT, NULL), IT_MNT_OK);
	dump(c, &l);
	assert_true(dump_has_union(&l));
	strlist_free(&l);
	assert_int_equal(it_call(c, IT_MNTPROC_UMNTALL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	dump(c, &l);
	if (dump_has_union(&l))
		fail_msg("DUMP still lists %s after UMNTALL", IT_EXPORT);
	strlist_free(&l);
	it_clnt_destroy(c);
}

static void test_mnt_v1(void **state)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };
	nfs_fh3 v3;

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &v3), IT_MNT_OK);
	for (int i = 0; i < 2; i++) {
		CLIENT *c = it_clnt(protos[i], IT_MOUNT_PROG, 1, it_srv.is_mount_port);
		struct fhstatus f;
		char *p = IT_EXPORT;
		enum clnt_stat cs;

		memset(&f, 0, sizeof(f));
		cs = it_call(c, IT_MNTPROC_MNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)xdr_fhstatus_v1,
			     &f);
		if (cs != RPC_SUCCESS)
			fail_msg("MOUNT v1 MNT: %s", clnt_sperrno(cs));
		assert_int_equal(f.fs_status, 0);
		/* the same handle, zero-padded to 32 bytes */
		assert_memory_equal(f.fs_fh, v3.data.data_val, v3.data.data_len);
		for (u_int k = v3.data.data_len; k < 32; k++)
			assert_int_equal(f.fs_fh[k], 0);
		p = "/nope";
		memset(&f, 0, sizeof(f));
		cs = it_call(c, IT_MNTPROC_MNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)xdr_fhstatus_v1,
			     &f);
		assert_int_equal(cs, RPC_SUCCESS);
		assert_int_not_equal(f.fs_status, 0);
		it_clnt_destroy(c);
	}
	it_fh_free(&v3);
}

/* Version 2 (version 1 plus PATHCONF) may be served as version 1; others are refused. */
static void test_other_versions_mismatch(void **state)
{
	uint32_t bad[] = { 4, 0, 100 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CLIENT *c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, bad[i], it_srv.is_mount_port);
		struct rpc_err err;
		enum clnt_stat cs;

		cs = it_call(c, IT_MNTPROC_NULL, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void,
			     NULL);
		if (cs != RPC_PROGVERSMISMATCH)
			fail_msg("MOUNT v%u NULL: %s, want a version mismatch", bad[i],
				 clnt_sperrno(cs));
		clnt_geterr(c, &err);
		assert_int_equal(err.re_vers.low, 1);
		assert_int_equal(err.re_vers.high, 3);
		it_clnt_destroy(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null_both_versions),
		cmocka_unit_test(test_mnt_tcp_and_udp_agree),
		cmocka_unit_test(test_mnt_unknown),
		cmocka_unit_test(test_export_lists_union),
		cmocka_unit_test(test_dump_umnt_umntall),
		cmocka_unit_test(test_mnt_v1),
		cmocka_unit_test(test_other_versions_mismatch),
	};

	return cmocka_run_group_tests_name("mount protocol", tests, setup, it_group_teardown);
}
