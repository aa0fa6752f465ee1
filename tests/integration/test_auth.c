/*
 * Credentials and export options, checked by who owns what on disk: AUTH_SYS users and
 * groups, AUTH_NONE, root_squash (the default), all_squash with anonuid/anongid, ro, and
 * secure (the default: a client port of 1024 or more is refused) versus insecure.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static struct it_server srv;

static void start(const char *opts)
{
	it_server_init(&srv, false);
	/* squashed and unprivileged users must be able to create in the export root */
	chmod(srv.is_upper, 0777);
	srv.is_opts = opts;
	srv.is_extra[0] = "--udp"; /* the rules are checked over both transports */
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with -o %s", opts);
}

static int after_each(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

/* A client whose source port is reserved (< 1024) or not. */
static CLIENT *clnt_from(int proto, uint32_t prog, int port, bool reserved)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	int fd;
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (reserved && proto == IPPROTO_TCP) {
		fd = it_connect_reserved(&me, &sin);
		if (fd < 0)
			fail_msg("no reserved port could connect: %s", strerror(errno));
	} else if (reserved) {
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		assert_true(fd >= 0);
		if (it_bind_reserved(fd, &me) != 0)
			fail_msg("no reserved port free: %s", strerror(errno));
	} else {
		fd = socket(AF_INET, proto == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM, 0);
		assert_true(fd >= 0);
		assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	}
	if (proto == IPPROTO_TCP) {
		c = clnttcp_create(&sin, prog, 3, &fd, 0, 0);
	} else {
		struct timeval retry = { 1, 0 };

		c = clntudp_bufcreate(&sin, prog, 3, retry, &fd, 65000, 65000);
	}
	if (!c)
		fail_msg("client: %s", clnt_spcreateerror("clnt"));
	/* the client owns the descriptor from here on */
	clnt_control(c, CLSET_FD_CLOSE, NULL);
	return c;
}

static void set_auth_sys(CLIENT *c, uid_t uid, gid_t gid, int ngroups, gid_t *groups)
{
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("unfs-test", uid, gid, ngroups, groups);
	assert_non_null(c->cl_auth);
}

static void set_auth_none(CLIENT *c)
{
	auth_destroy(c->cl_auth);
	c->cl_auth = authnone_create();
}

static nfsstat3 create(CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	CREATE3args a;
	CREATE3res r;
	nfsstat3 st;
	enum clnt_stat cs;

	memset(&a, 0, sizeof(a));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
	a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	memset(&r, 0, sizeof(r));
	cs = it_call(c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a, (xdrproc_t)xdr_CREATE3res,
		     &r);
	if (cs != RPC_SUCCESS)
		fail_msg("CREATE %s: %s", name, clnt_sperrno(cs));
	st = r.status;
	it_free((xdrproc_t)xdr_CREATE3res, &r);
	return st;
}

static void owner_is(const char *name, uid_t uid, gid_t gid)
{
	char p[PATH_MAX];
	struct stat st;

	it_path(p, "%s/%s", srv.is_upper, name);
	if (lstat(p, &st) != 0)
		fail_msg("%s was not created: %s", p, strerror(errno));
	if (st.st_uid != uid || st.st_gid != gid)
		fail_msg("%s is owned by %u:%u, want %u:%u", name, st.st_uid, st.st_gid, uid, gid);
}

static void test_root_squash_default(void **state)
{
	CLIENT *c;
	nfs_fh3 root;
	gid_t groups[2] = { 2000, 3000 };
	char p[PATH_MAX];

	(void)state;
	start("insecure");
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	set_auth_sys(c, 0, 0, 0, NULL);
	it_assert_status(create(c, &root, "by-root"), NFS3_OK);
	owner_is("by-root", 65534, 65534);
	set_auth_sys(c, 1000, 1000, 0, NULL);
	it_assert_status(create(c, &root, "by-1000"), NFS3_OK);
	owner_is("by-1000", 1000, 1000);
	set_auth_none(c);
	it_assert_status(create(c, &root, "by-none"), NFS3_OK);
	owner_is("by-none", 65534, 65534);
	/* permissions are the branch file system's: 1000 may not write into root's 0755 dir */
	it_path(p, "%s/private", srv.is_upper);
	assert_int_equal(mkdir(p, 0755), 0);
	{
		nfs_fh3 d;

		set_auth_sys(c, 1000, 1000, 0, NULL);
		it_assert_status(it_lookup(c, &root, "private", &d, NULL), NFS3_OK);
		it_assert_status(create(c, &d, "nope"), NFS3ERR_ACCES);
		it_fh_free(&d);
	}
	/* supplementary groups count: a root:2000 0770 directory */
	it_path(p, "%s/group-dir", srv.is_upper);
	assert_int_equal(mkdir(p, 0770), 0);
	assert_int_equal(chown(p, 0, 2000), 0);
	assert_int_equal(chmod(p, 0770), 0);
	{
		nfs_fh3 d;

		set_auth_sys(c, 1000, 1000, 2, groups);
		it_assert_status(it_lookup(c, &root, "group-dir", &d, NULL), NFS3_OK);
		it_assert_status(create(c, &d, "via-group"), NFS3_OK);
		owner_is("group-dir/via-group", 1000, 1000);
		set_auth_sys(c, 1000, 1000, 0, NULL);
		it_assert_status(create(c, &d, "without-group"), NFS3ERR_ACCES);
		it_fh_free(&d);
	}
	it_fh_free(&root);
	it_clnt_destroy(c);
}

static void test_all_squash_anonuid(void **state)
{
	CLIENT *c;
	nfs_fh3 root;

	(void)state;
	start("insecure,all_squash,anonuid=1234,anongid=5678");
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	set_auth_sys(c, 1000, 1000, 0, NULL);
	it_assert_status(create(c, &root, "squashed-user"), NFS3_OK);
	owner_is("squashed-user", 1234, 5678);
	set_auth_sys(c, 0, 0, 0, NULL);
	it_assert_status(create(c, &root, "squashed-root"), NFS3_OK);
	owner_is("squashed-root", 1234, 5678);
	it_fh_free(&root);
	it_clnt_destroy(c);
}

static void test_read_only_export(void **state)
{
	CLIENT *c;
	nfs_fh3 root, f;
	char p[PATH_MAX];
	fattr3 a;

	(void)state;
	start("ro,no_root_squash,insecure");
	it_path(p, "%s/existing", srv.is_upper);
	it_write_file(p, "read me", 7);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(create(c, &root, "new"), NFS3ERR_ROFS);
	it_assert_status(it_lookup(c, &root, "existing", &f, &a), NFS3_OK);
	assert_int_equal(a.size, 7);
	{
		WRITE3args wa = { .file = f, .offset = 0, .count = 1, .stable = FILE_SYNC,
				  .data = { 1, "x" } };
		WRITE3res wr;

		memset(&wr, 0, sizeof(wr));
		assert_int_equal(it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
					 (xdrproc_t)xdr_WRITE3res, &wr),
				 RPC_SUCCESS);
		it_assert_status(wr.status, NFS3ERR_ROFS);
		it_free((xdrproc_t)xdr_WRITE3res, &wr);
	}
	{
		SETATTR3args sa;
		SETATTR3res sr;

		memset(&sa, 0, sizeof(sa));
		sa.object = f;
		sa.new_attributes.mode.set_it = TRUE;
		sa.new_attributes.mode.set_mode3_u.mode = 0600;
		memset(&sr, 0, sizeof(sr));
		assert_int_equal(it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &sa,
					 (xdrproc_t)xdr_SETATTR3res, &sr),
				 RPC_SUCCESS);
		it_assert_status(sr.status, NFS3ERR_ROFS);
		it_free((xdrproc_t)xdr_SETATTR3res, &sr);
	}
	{
		REMOVE3args ra = { .object = { .dir = root, .name = "existing" } };
		REMOVE3res rr;

		memset(&rr, 0, sizeof(rr));
		assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &ra,
					 (xdrproc_t)xdr_REMOVE3res, &rr),
				 RPC_SUCCESS);
		it_assert_status(rr.status, NFS3ERR_ROFS);
		it_free((xdrproc_t)xdr_REMOVE3res, &rr);
	}
	/* ACCESS does not offer what ro forbids */
	{
		ACCESS3args aa = { .object = f, .access = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND };
		ACCESS3res ar;

		memset(&ar, 0, sizeof(ar));
		assert_int_equal(it_call(c, NFSPROC3_ACCESS, (xdrproc_t)xdr_ACCESS3args, &aa,
					 (xdrproc_t)xdr_ACCESS3res, &ar),
				 RPC_SUCCESS);
		it_assert_status(ar.status, NFS3_OK);
		assert_int_equal(ar.ACCESS3res_u.resok.access, ACCESS3_READ);
		it_free((xdrproc_t)xdr_ACCESS3res, &ar);
	}
	assert_true(it_exists(p));
	it_fh_free(&f);
	it_fh_free(&root);
	it_clnt_destroy(c);
}

static void test_secure_needs_reserved_port(void **state)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };
	nfs_fh3 root;

	(void)state;
	start("no_root_squash"); /* secure is the default */
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	for (int i = 0; i < 2; i++) {
		CLIENT *ok = clnt_from(protos[i], NFS_PROGRAM, srv.is_nfs_port, true);
		CLIENT *bad = clnt_from(protos[i], NFS_PROGRAM, srv.is_nfs_port, false);
		GETATTR3args a = { .object = root };
		GETATTR3res r;
		enum clnt_stat cs;

		set_auth_sys(ok, 0, 0, 0, NULL);
		set_auth_sys(bad, 0, 0, 0, NULL);
		it_assert_status(it_getattr(ok, &root, NULL), NFS3_OK);
		memset(&r, 0, sizeof(r));
		cs = it_call(bad, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a,
			     (xdrproc_t)xdr_GETATTR3res, &r);
		if (cs == RPC_SUCCESS) {
			it_free((xdrproc_t)xdr_GETATTR3res, &r);
			fail_msg("GETATTR from an unprivileged port on a secure export: status %s",
				 it_nfsstat_name(r.status));
		}
		if (cs != RPC_AUTHERROR)
			fail_msg("GETATTR from an unprivileged port: %s, want an auth error",
				 clnt_sperrno(cs));
		{
			struct rpc_err err;

			clnt_geterr(bad, &err);
			assert_int_equal(err.re_why, AUTH_TOOWEAK);
		}
		it_clnt_destroy(ok);
		it_clnt_destroy(bad);
	}
	it_fh_free(&root);
}

static void test_insecure_allows_any_port(void **state)
{
	CLIENT *c;
	nfs_fh3 root;

	(void)state;
	start("no_root_squash,insecure");
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = clnt_from(IPPROTO_TCP, NFS_PROGRAM, srv.is_nfs_port, false);
	set_auth_sys(c, 0, 0, 0, NULL);
	it_assert_status(it_getattr(c, &root, NULL), NFS3_OK);
	it_clnt_destroy(c);
	it_fh_free(&root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_root_squash_default, after_each),
		cmocka_unit_test_teardown(test_all_squash_anonuid, after_each),
		cmocka_unit_test_teardown(test_read_only_export, after_each),
		cmocka_unit_test_teardown(test_secure_needs_reserved_port, after_each),
		cmocka_unit_test_teardown(test_insecure_allows_any_port, after_each),
	};

	return cmocka_run_group_tests_name("credentials and export options", tests, NULL, NULL);
}
