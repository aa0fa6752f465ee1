/*
 * Client rules of an export against the real server: who may mount (a client no rule of
 * any export admits has its TCP connections closed at accept; over UDP it is refused),
 * NFS calls checked on every request (a handle alone is no key), per-rule ro and
 * squashing, and SIGHUP reloads that remove a client, keep the others' sessions and
 * survive a broken config file.
 *
 * Two clients on one host: libtirpc clients bound to 127.0.0.1 or to 127.0.0.2 before
 * connecting (all of 127/8 is loopback on Linux). The rules are 'insecure' so the tests do
 * not depend on reserved source ports.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MNT3ERR_ACCES_ 13
#define RELOADED "SIGHUP: configuration reloaded"

static struct it_server srv;
static char cfgpath[PATH_MAX];

static void write_text(const char *fmt, const char *a, const char *b)
{
	char text[4 * PATH_MAX + 1024];
	int n;

	n = snprintf(text, sizeof(text), fmt, srv.is_state, a, b);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
}

static void write_config(const char *rules)
{
	char text[2 * PATH_MAX + 1024];
	int n;

	n = snprintf(text, sizeof(text),
		     "# written by test_rules\nport 0\nmount-port 0\nportmap off\nstate %s\n"
		     "export %s %s %s\nudp\n",
		     srv.is_state, IT_EXPORT, srv.is_upper, rules);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
}

static void start(const char *rules)
{
	it_server_init(&srv, false);
	/* squashed users must be able to create in the export root */
	chmod(srv.is_upper, 0777);
	it_path(cfgpath, "%s/rules.conf", srv.is_dir);
	write_config(rules);
	srv.is_config = cfgpath;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with the rules %s", rules);
}

static int after_each(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

/* Sends SIGHUP and waits until the server logged `done` once more. */
static void hup_and_wait(const char *done)
{
	int before = it_server_log_count(&srv, done);

	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	if (!it_server_log_wait_count(&srv, done, before + 1, 10000)) {
		it_server_dump_log(&srv);
		fail_msg("no '%s' in the log 10 s after SIGHUP", done);
	}
}

/* Rewrites the config, sends SIGHUP and waits until the server logged `done` once more. */
static void reload(const char *rules, const char *done)
{
	write_config(rules);
	hup_and_wait(done);
}

static CLIENT *clnt_src(const char *src, uint32_t prog, uint32_t vers, int port, uint32_t uid,
			uint32_t gid)
{
	return it_clnt_from(src, prog, vers, port, uid, gid, false);
}

/* A TCP client over IPv6 loopback (::1), or NULL when this host has no IPv6 loopback. */
static CLIENT *tcp6(uint32_t prog, uint32_t vers, int port)
{
	static struct sockaddr_in6 sa;
	struct netbuf nb;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	CLIENT *c;

	if (fd < 0)
		return NULL;
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons(port);
	sa.sin6_addr = in6addr_loopback;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return NULL;
	}
	nb.maxlen = nb.len = sizeof(sa);
	nb.buf = &sa;
	c = clnt_vc_create(fd, &nb, prog, vers, 0, 0);
	if (!c) {
		close(fd);
		fail_msg("clnt_vc_create over ::1: %s", clnt_spcreateerror("clnt"));
	}
	clnt_control(c, CLSET_FD_CLOSE, NULL);
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("rules-test", 0, 0, 0, NULL);
	assert_non_null(c->cl_auth);
	return c;
}

static CLIENT *nfs_from(const char *src, uint32_t uid, uint32_t gid)
{
	return clnt_src(src, NFS_PROGRAM, NFS_V3, srv.is_nfs_port, uid, gid);
}

static int mnt_from(const char *src, nfs_fh3 *fh)
{
	return it_mnt_over(clnt_src(src, IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0), IT_EXPORT,
			   fh);
}

static int mnt_udp_from(const char *src, nfs_fh3 *fh)
{
	return it_mnt_over(it_clnt_udp_from(src, IT_MOUNT_PROG, 3, srv.is_mount_port), IT_EXPORT, fh);
}

/* Whether the server closes fd (connected, nothing sent) within 2 s. */
static bool closed_at_once(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	bool closed;

	closed = poll(&pfd, 1, 2000) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
	close(fd);
	return closed;
}

/* Whether a TCP connection from src is closed at accept: no rule of any export admits src. */
static bool tcp_refused_from(const char *src, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
	    connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		fail_msg("connect from %s to port %d: %s", src, port, strerror(errno));
	return closed_at_once(fd);
}

/* The same over IPv6 loopback (::1). */
static bool tcp6_refused(int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin6_addr = in6addr_loopback;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		fail_msg("connect over ::1 to port %d: %s", port, strerror(errno));
	return closed_at_once(fd);
}

/* The groups MOUNT EXPORT lists for the first export, joined by spaces. */
struct exportres {
	char ex_dir[256];
	char ex_groups[512];
};

static bool_t xdr_exportres(XDR *x, struct exportres *r)
{
	bool_t more, gmore, first = TRUE;
	char *s;

	if (x->x_op != XDR_DECODE)
		return TRUE;
	if (!xdr_bool(x, &more))
		return FALSE;
	while (more) {
		s = NULL;
		if (!xdr_string(x, &s, 1024))
			return FALSE;
		if (first)
			snprintf(r->ex_dir, sizeof(r->ex_dir), "%s", s);
		free(s);
		if (!xdr_bool(x, &gmore))
			return FALSE;
		while (gmore) {
			s = NULL;
			if (!xdr_string(x, &s, 1024))
				return FALSE;
			if (first) {
				size_t l = strlen(r->ex_groups);

				snprintf(r->ex_groups + l, sizeof(r->ex_groups) - l, "%s%s",
					 l ? " " : "", s);
			}
			free(s);
			if (!xdr_bool(x, &gmore))
				return FALSE;
		}
		first = FALSE;
		if (!xdr_bool(x, &more))
			return FALSE;
	}
	return TRUE;
}

static nfsstat3 make_dir(CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	MKDIR3args args;
	MKDIR3res res;
	enum clnt_stat cs;
	nfsstat3 st;

	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	args.where.dir = *dir;
	args.where.name = (char *)name;
	args.attributes.mode.set_it = TRUE;
	args.attributes.mode.set_mode3_u.mode = 0755;
	cs = it_call(c, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &args,
		     (xdrproc_t)xdr_MKDIR3res, &res);
	if (cs != RPC_SUCCESS)
		fail_msg("MKDIR %s: %s", name, clnt_sperrno(cs));
	st = res.status;
	it_free((xdrproc_t)xdr_MKDIR3res, &res);
	return st;
}

static void upper_stat(const char *name, struct stat *st)
{
	char path[PATH_MAX];

	it_path(path, "%s/%s", srv.is_upper, name);
	if (lstat(path, st) != 0)
		fail_msg("%s: %s", path, strerror(errno));
}

static void assert_absent(const char *name)
{
	char path[PATH_MAX];

	it_path(path, "%s/%s", srv.is_upper, name);
	if (it_exists(path))
		fail_msg("%s exists after a refused call", path);
}

/*
 * A client no rule admits cannot mount: its TCP connections are closed at accept, its MNT
 * over UDP is refused, and so is its EXPORT; an admitted client's EXPORT lists the rules'
 * clients.
 */
static void test_mount_refused(void **state)
{
	struct exportres ex;
	nfs_fh3 fh = { 0 };
	CLIENT *c;

	(void)state;
	start("127.0.0.2(rw,insecure) 10.0.0.0/8(ro) fd00::/8()");
	assert_true(tcp_refused_from("127.0.0.1", srv.is_mount_port));
	assert_true(it_server_log_contains(&srv, "no client rule of any export admits it"));
	assert_int_equal(mnt_udp_from("127.0.0.1", NULL), MNT3ERR_ACCES_);
	assert_true(it_server_log_contains(&srv, "no client rule of export /union admits 127.0.0.1"));
	assert_int_equal(mnt_from("127.0.0.2", &fh), IT_MNT_OK);
	it_fh_free(&fh);

	/* EXPORT too is only for clients a rule admits (test_mountlist has the rest). */
	memset(&ex, 0, sizeof(ex));
	c = it_clnt_udp_from("127.0.0.1", IT_MOUNT_PROG, 3, srv.is_mount_port);
	assert_int_equal(it_call(c, IT_MNTPROC_EXPORT, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)xdr_exportres, &ex), RPC_AUTHERROR);
	it_clnt_destroy(c);
	c = clnt_src("127.0.0.2", IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0);
	assert_int_equal(it_call(c, IT_MNTPROC_EXPORT, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)xdr_exportres, &ex), RPC_SUCCESS);
	it_clnt_destroy(c);
	assert_string_equal(ex.ex_dir, IT_EXPORT);
	assert_string_equal(ex.ex_groups, "127.0.0.2 10.0.0.0/8 fd00::/8");
}

/*
 * A handle obtained while admitted is no key after a reload removed the client, on the
 * old connection and on a new one; the client that stays keeps its session (same
 * connection, same handle, no remount); a broken config changes nothing.
 */
static void test_reload(void **state)
{
	nfs_fh3 fh1 = { 0 }, fh2 = { 0 };
	CLIENT *c1, *c2, *c1b;
	fattr3 attr;

	(void)state;
	start("127.0.0.1(rw,insecure,no_root_squash) 127.0.0.2(rw,insecure)");
	assert_int_equal(mnt_from("127.0.0.1", &fh1), IT_MNT_OK);
	assert_int_equal(mnt_from("127.0.0.2", &fh2), IT_MNT_OK);
	c1 = nfs_from("127.0.0.1", 0, 0);
	c2 = nfs_from("127.0.0.2", 1000, 1000);
	it_assert_status(it_getattr(c1, &fh1, &attr), NFS3_OK);
	it_assert_status(it_getattr(c2, &fh2, &attr), NFS3_OK);

	reload("127.0.0.2(rw,insecure)", RELOADED);
	it_assert_status(it_getattr(c1, &fh1, &attr), NFS3ERR_ACCES);
	it_assert_status(it_create(c1, &fh1, "after-removal"), NFS3ERR_ACCES);
	assert_absent("after-removal");
	/* a new TCP connection is not even accepted; over UDP the calls are refused */
	assert_true(tcp_refused_from("127.0.0.1", srv.is_nfs_port));
	c1b = it_clnt_udp_from("127.0.0.1", NFS_PROGRAM, NFS_V3, srv.is_nfs_port);
	it_assert_status(it_getattr(c1b, &fh1, &attr), NFS3ERR_ACCES);
	/* the other client's handle does not help either: the rule is per peer */
	it_assert_status(it_getattr(c1b, &fh2, &attr), NFS3ERR_ACCES);
	it_clnt_destroy(c1b);
	assert_int_equal(mnt_udp_from("127.0.0.1", NULL), MNT3ERR_ACCES_);
	it_assert_status(it_getattr(c2, &fh2, &attr), NFS3_OK);
	it_assert_status(it_create(c2, &fh2, "kept"), NFS3_OK);

	/* a config with an error: the old rules stay, the log names FILE:LINE */
	reload("127.0.0.1(rw,insecure) 127.0.0.2(rw,bogus)", "keeping the running one");
	{
		char want[PATH_MAX + 128];

		snprintf(want, sizeof(want), "%s:6: export /union: unknown export option 'bogus'",
			 cfgpath);
		assert_true(it_server_log_contains(&srv, want));
	}
	it_assert_status(it_getattr(c1, &fh1, &attr), NFS3ERR_ACCES);
	it_assert_status(it_getattr(c2, &fh2, &attr), NFS3_OK);

	/* admitted again: the old handle and connection work again */
	reload("127.0.0.1(rw,insecure,no_root_squash) 127.0.0.2(rw,insecure)", RELOADED);
	it_assert_status(it_getattr(c1, &fh1, &attr), NFS3_OK);
	it_assert_status(it_getattr(c2, &fh2, &attr), NFS3_OK);
	it_clnt_destroy(c1);
	it_clnt_destroy(c2);
	it_fh_free(&fh1);
	it_fh_free(&fh2);
}

/* ro for one client, rw for the rest: the ro client's writes are refused without trace. */
static void test_ro_rule(void **state)
{
	nfs_fh3 fh1 = { 0 }, fh2 = { 0 };
	CLIENT *c1, *c2;
	struct stat st;

	(void)state;
	start("127.0.0.1(ro,insecure,no_root_squash) *(rw,insecure,no_root_squash)");
	assert_int_equal(mnt_from("127.0.0.1", &fh1), IT_MNT_OK);
	assert_int_equal(mnt_from("127.0.0.2", &fh2), IT_MNT_OK);
	c1 = nfs_from("127.0.0.1", 0, 0);
	c2 = nfs_from("127.0.0.2", 0, 0);
	it_assert_status(it_create(c1, &fh1, "ro-file"), NFS3ERR_ROFS);
	it_assert_status(make_dir(c1, &fh1, "ro-dir"), NFS3ERR_ROFS);
	assert_absent("ro-file");
	assert_absent("ro-dir");
	it_assert_status(it_create(c2, &fh2, "rw-file"), NFS3_OK);
	upper_stat("rw-file", &st);
	/* the handle of the rw client does not make the ro client writable */
	it_assert_status(it_create(c1, &fh2, "ro-file2"), NFS3ERR_ROFS);
	assert_absent("ro-file2");
	it_clnt_destroy(c1);
	it_clnt_destroy(c2);
	it_fh_free(&fh1);
	it_fh_free(&fh2);
}

/* root_squash (the default) maps root to the rule's anonuid/anongid; no_root_squash does not. */
static void test_root_squash(void **state)
{
	nfs_fh3 fh1 = { 0 }, fh2 = { 0 };
	CLIENT *c1, *c2;
	struct stat st;

	(void)state;
	start("127.0.0.1(rw,insecure,anonuid=4321,anongid=4322) 127.0.0.2(rw,insecure,no_root_squash)");
	assert_int_equal(mnt_from("127.0.0.1", &fh1), IT_MNT_OK);
	assert_int_equal(mnt_from("127.0.0.2", &fh2), IT_MNT_OK);
	c1 = nfs_from("127.0.0.1", 0, 0);
	c2 = nfs_from("127.0.0.2", 0, 0);
	it_assert_status(it_create(c1, &fh1, "squashed"), NFS3_OK);
	upper_stat("squashed", &st);
	assert_int_equal(st.st_uid, 4321);
	assert_int_equal(st.st_gid, 4322);
	it_assert_status(it_create(c2, &fh2, "root"), NFS3_OK);
	upper_stat("root", &st);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, 0);
	/* a non-root user keeps its identity under root_squash */
	it_clnt_destroy(c1);
	c1 = nfs_from("127.0.0.1", 1000, 1001);
	it_assert_status(it_create(c1, &fh1, "user"), NFS3_OK);
	upper_stat("user", &st);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1001);
	it_clnt_destroy(c1);
	it_clnt_destroy(c2);
	it_fh_free(&fh1);
	it_fh_free(&fh2);
}

/* all_squash maps every user, and a reload changes the mapping for the next call. */
static void test_all_squash(void **state)
{
	nfs_fh3 fh = { 0 };
	struct stat st;
	CLIENT *c;

	(void)state;
	start("127.0.0.1(rw,insecure,all_squash,anonuid=2001,anongid=2002)");
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	c = nfs_from("127.0.0.1", 1000, 1000);
	it_assert_status(it_create(c, &fh, "a"), NFS3_OK);
	upper_stat("a", &st);
	assert_int_equal(st.st_uid, 2001);
	assert_int_equal(st.st_gid, 2002);

	reload("127.0.0.1(rw,insecure,all_squash,anonuid=3001,anongid=3002)", RELOADED);
	it_assert_status(it_create(c, &fh, "b"), NFS3_OK);
	upper_stat("b", &st);
	assert_int_equal(st.st_uid, 3001);
	assert_int_equal(st.st_gid, 3002);
	it_clnt_destroy(c);
	it_fh_free(&fh);
}

/* A host name rule admits the addresses the name resolves to, and only those. */
static void test_host_name(void **state)
{
	nfs_fh3 fh = { 0 };

	(void)state;
	start("localhost(rw,insecure)");
	assert_true(it_server_log_contains(&srv, "export /union: client localhost resolves to "));
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	it_fh_free(&fh);
	assert_true(tcp_refused_from("127.0.0.2", srv.is_mount_port));
	assert_int_equal(mnt_udp_from("127.0.0.2", NULL), MNT3ERR_ACCES_);
}

/* UDP peers are matched like TCP ones. */
static void test_udp(void **state)
{
	nfs_fh3 fh = { 0 };
	CLIENT *c;
	fattr3 attr;

	(void)state;
	start("127.0.0.2(rw,insecure)");
	assert_int_equal(it_mnt_over(it_clnt_udp_from("127.0.0.1", IT_MOUNT_PROG, 3, srv.is_mount_port),
				     IT_EXPORT, NULL),
			 MNT3ERR_ACCES_);
	assert_int_equal(it_mnt_over(it_clnt_udp_from("127.0.0.2", IT_MOUNT_PROG, 3, srv.is_mount_port),
				     IT_EXPORT, &fh),
			 IT_MNT_OK);
	c = it_clnt_udp_from("127.0.0.2", NFS_PROGRAM, NFS_V3, srv.is_nfs_port);
	it_assert_status(it_getattr(c, &fh, &attr), NFS3_OK);
	it_clnt_destroy(c);
	c = it_clnt_udp_from("127.0.0.1", NFS_PROGRAM, NFS_V3, srv.is_nfs_port);
	it_assert_status(it_getattr(c, &fh, &attr), NFS3ERR_ACCES);
	it_clnt_destroy(c);
	it_fh_free(&fh);
}

/* ::1 is not 127.0.0.1: IPv4 rules do not admit it, an IPv6 rule does. */
static void test_ipv6(void **state)
{
	nfs_fh3 fh = { 0 };
	CLIENT *c;

	(void)state;
	start("127.0.0.1(rw,insecure)");
	c = tcp6(IT_MOUNT_PROG, 3, srv.is_mount_port);
	if (!c) {
		fprintf(stderr, "no IPv6 loopback here: test_ipv6 checks nothing\n");
		return;
	}
	it_clnt_destroy(c);
	/* A client no rule admits: its connection is closed at accept. */
	assert_true(tcp6_refused(srv.is_mount_port));
	reload("::1(rw,insecure)", RELOADED);
	assert_int_equal(it_mnt_over(tcp6(IT_MOUNT_PROG, 3, srv.is_mount_port), IT_EXPORT, &fh),
			 IT_MNT_OK);
	it_fh_free(&fh);
	assert_true(tcp_refused_from("127.0.0.1", srv.is_mount_port));
	/* IPv4 peers are compared as ::ffff:a.b.c.d, which ::/0 contains */
	reload("::/0(rw,insecure)", RELOADED);
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	it_fh_free(&fh);
	reload("0.0.0.0/0(rw,insecure)", RELOADED);
	assert_true(tcp6_refused(srv.is_mount_port));
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	it_fh_free(&fh);
}

/*
 * A reload that changes an export's writable branch applies none of that and says so (a new
 * base is a change of read-only branches only); a new export is served.
 */
static void test_reload_needs_restart(void **state)
{
	char other[PATH_MAX];
	nfs_fh3 fh = { 0 };

	(void)state;
	start("127.0.0.1(rw,insecure)");
	it_path(other, "%s/other", srv.is_dir);
	assert_int_equal(mkdir(other, 0755), 0);
	/* new branches and rules that would shut 127.0.0.1 out: neither applies */
	write_text("port 0\nmount-port 0\nportmap off\nstate %s\nworkers 3\n"
		   "export /union %s 127.0.0.2(rw,insecure)\nexport /new %s\n",
		   other, other);
	hup_and_wait(RELOADED);
	assert_true(it_server_log_contains(&srv, "reload: export /union keeps its old branches"));
	assert_true(it_server_log_contains(&srv, "reload: export /new added"));
	assert_true(it_server_log_contains(&srv, "SIGHUP: the setting workers changed; it takes effect only after a restart"));
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	it_fh_free(&fh);
}

/* A burst of SIGHUPs is coalesced, and a SIGTERM right after a SIGHUP still exits cleanly. */
static void test_sighup_burst(void **state)
{
	nfs_fh3 fh = { 0 };
	int i;

	(void)state;
	start("127.0.0.2(rw,insecure)");
	write_config("127.0.0.1(rw,insecure)");
	for (i = 0; i < 50; i++)
		assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	reload("127.0.0.1(rw,insecure) localhost(ro)", RELOADED);
	/* the last reload may still be queued: wait until the rules are the newest ones */
	assert_true(it_server_log_wait(&srv, "clients 127.0.0.1 rw, localhost ro", 10000));
	assert_int_equal(mnt_from("127.0.0.1", &fh), IT_MNT_OK);
	it_fh_free(&fh);
	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	assert_int_equal(it_server_stop(&srv), 0);
}

/* secure is per rule: the rule that admits the client decides whether its port matters. */
static void test_secure_per_rule(void **state)
{
	nfs_fh3 fh = { 0 };
	fattr3 attr;
	CLIENT *c;

	(void)state;
	start("127.0.0.1(rw) 127.0.0.2(rw,insecure)");
	assert_int_equal(mnt_from("127.0.0.1", NULL), MNT3ERR_ACCES_);
	assert_true(it_server_log_contains(&srv, "the export is 'secure'"));
	assert_int_equal(it_mnt_over(it_clnt_from("127.0.0.1", IT_MOUNT_PROG, 3, srv.is_mount_port,
						  0, 0, true), IT_EXPORT, &fh), IT_MNT_OK);
	c = it_clnt_from("127.0.0.1", NFS_PROGRAM, NFS_V3, srv.is_nfs_port, 0, 0, true);
	it_assert_status(it_getattr(c, &fh, &attr), NFS3_OK);
	it_clnt_destroy(c);
	/* the same handle from an unprivileged port of the same host: AUTH_TOOWEAK */
	c = nfs_from("127.0.0.1", 0, 0);
	{
		GETATTR3args args = { .object = fh };
		GETATTR3res res;
		enum clnt_stat cs;

		memset(&res, 0, sizeof(res));
		cs = it_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &args,
			     (xdrproc_t)xdr_GETATTR3res, &res);
		assert_int_equal(cs, RPC_AUTHERROR);
	}
	it_clnt_destroy(c);
	c = nfs_from("127.0.0.2", 0, 0);
	it_assert_status(it_getattr(c, &fh, &attr), NFS3_OK);
	it_clnt_destroy(c);
	it_fh_free(&fh);
}

struct hammer {
	nfs_fh3 h_fh;
	volatile bool h_stop;
	int h_calls;
	int h_errors;
};

static void *hammer_run(void *arg)
{
	struct hammer *h = arg;
	CLIENT *c = nfs_from("127.0.0.2", 1000, 1000);
	fattr3 attr;

	while (!h->h_stop) {
		if (it_getattr(c, &h->h_fh, &attr) != NFS3_OK)
			h->h_errors++;
		h->h_calls++;
	}
	it_clnt_destroy(c);
	return NULL;
}

/* Reloads while a client that stays admitted keeps calling: no call of it ever fails. */
static void test_reload_under_load(void **state)
{
	static const char *const rules[] = {
		"127.0.0.1(ro) 127.0.0.2(rw,insecure) fd00::/8(ro)",
		"10.0.0.0/8(rw) localhost(ro) 127.0.0.0/24(rw,insecure,all_squash)",
	};
	struct hammer h;
	pthread_t t;
	int i;

	(void)state;
	start(rules[0]);
	memset(&h, 0, sizeof(h));
	assert_int_equal(mnt_from("127.0.0.2", &h.h_fh), IT_MNT_OK);
	assert_int_equal(pthread_create(&t, NULL, hammer_run, &h), 0);
	for (i = 0; i < 20; i++)
		reload(rules[i % 2], RELOADED);
	h.h_stop = true;
	pthread_join(t, NULL);
	it_fh_free(&h.h_fh);
	if (h.h_errors != 0)
		fail_msg("%d of %d GETATTRs failed during reloads", h.h_errors, h.h_calls);
	assert_true(h.h_calls > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_mount_refused, after_each),
		cmocka_unit_test_teardown(test_reload, after_each),
		cmocka_unit_test_teardown(test_ro_rule, after_each),
		cmocka_unit_test_teardown(test_root_squash, after_each),
		cmocka_unit_test_teardown(test_all_squash, after_each),
		cmocka_unit_test_teardown(test_host_name, after_each),
		cmocka_unit_test_teardown(test_udp, after_each),
		cmocka_unit_test_teardown(test_ipv6, after_each),
		cmocka_unit_test_teardown(test_reload_needs_restart, after_each),
		cmocka_unit_test_teardown(test_reload_under_load, after_each),
		cmocka_unit_test_teardown(test_secure_per_rule, after_each),
		cmocka_unit_test_teardown(test_sighup_burst, after_each),
	};

	return cmocka_run_group_tests_name("rules", tests, NULL, NULL);
}
