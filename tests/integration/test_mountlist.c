/*
 * The MOUNT list and who MOUNT answers: a client spelling one mount many ways
 * ("/union//./.") gets one entry in DUMP; DUMP replies stay within their bound over TCP
 * and UDP however many clients mounted; a client no rule admits gets only NULL answered
 * over UDP (MNT: MNT3ERR_ACCES; DUMP, UMNT, UMNTALL, EXPORT: an RPC authentication
 * error), and nothing over TCP.
 *
 * One server whose only rule admits 127.0.0.0/9: all of 127/8 is loopback, so a socket
 * bound to 127.x.y.z is a client of its own, and 127.200.0.1 is one no rule admits.
 */
#include "common.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RULE "127.0.0.0/9(rw,no_root_squash,insecure)"
#define STRANGER "127.200.0.1"
#define MNT3ERR_ACCES_ 13
#define MNT3ERR_INVAL_ 22
/* What a DUMP reply may take, record mark included (README, Limits). */
#define DUMP_MAX_TCP (64u << 10)
#define DUMP_MAX_UDP (8u << 10)
/* Clients 127.1.x.y have 32-byte entries: this many are more than a TCP reply holds. */
#define MANY_CLIENTS 2100

static struct it_server srv;

/* What a DUMP reply held. */
struct dump_sum {
	unsigned ds_entries;
	unsigned ds_local;         /* entries of 127.0.0.1 */
	bool ds_local_export;      /* every one of them names IT_EXPORT */
	size_t ds_bytes;           /* the reply's size as encoded, record mark included */
};

static size_t xdr_string_size(size_t len)
{
	return 4 + ((len + 3) & ~(size_t)3);
}

/* Decodes a mountlist into a dump_sum. */
static bool_t xdr_dump_sum(XDR *x, struct dump_sum *d)
{
	bool_t more;

	memset(d, 0, sizeof(*d));
	d->ds_local_export = true;
	/* record mark, accepted reply header (xid .. accept_stat), the list's end */
	d->ds_bytes = 4 + 24 + 4;
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
		d->ds_entries++;
		if (!strcmp(host, "127.0.0.1")) {
			d->ds_local++;
			d->ds_local_export &= !strcmp(dir, IT_EXPORT);
		}
		d->ds_bytes += 4 + xdr_string_size(strlen(host)) + xdr_string_size(strlen(dir));
		free(host);
		free(dir);
	}
}

static bool_t xdr_path(XDR *x, char **p)
{
	return xdr_string(x, p, 1024);
}

/* Skips an EXPORT list, counting the exports. */
static bool_t xdr_export_count(XDR *x, unsigned *n)
{
	bool_t more, gmore;

	for (*n = 0;; (*n)++) {
		char *dir = NULL;

		if (!xdr_bool(x, &more))
			return FALSE;
		if (!more)
			return TRUE;
		if (!xdr_string(x, &dir, 1024))
			return FALSE;
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

static void dump_over(int proto, struct dump_sum *d)
{
	CLIENT *c = it_clnt(proto, IT_MOUNT_PROG, 3, srv.is_mount_port);
	enum clnt_stat cs;

	cs = it_call(c, IT_MNTPROC_DUMP, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)xdr_dump_sum, d);
	if (cs != RPC_SUCCESS)
		fail_msg("DUMP over %s: %s", proto == IPPROTO_TCP ? "TCP" : "UDP", clnt_sperrno(cs));
	it_clnt_destroy(c);
}

static void umntall_local(void)
{
	CLIENT *c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, 3, srv.is_mount_port);

	assert_int_equal(it_call(c, IT_MNTPROC_UMNTALL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
}

/* "/union" spelled the k-th way: repeated slashes, "." components, a trailing slash. */
static void spelling(char *out, size_t cap, unsigned k)
{
	size_t n = (size_t)snprintf(out, cap, "%s", IT_EXPORT);

	for (unsigned i = 0; i < k; i++)
		n += (size_t)snprintf(out + n, cap - n, i % 3 ? "/." : "//");
	if (k % 2)
		snprintf(out + n, cap - n, "/");
}

/* MNT v3 of path over c; only the status is read. */
static void mnt_ok(CLIENT *c, const char *path)
{
	char *p = (char *)path;
	int status = -1;
	enum clnt_stat cs;

	cs = it_call(c, IT_MNTPROC_MNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)xdr_int, &status);
	if (cs != RPC_SUCCESS || status != 0)
		fail_msg("MNT of \"%s\": %s, status %d", path, clnt_sperrno(cs), status);
}

/* Many spellings of one mount, long ones too, from one client: one entry, a short DUMP. */
static void test_spellings_one_entry(void **state)
{
	char path[1100], sub[PATH_MAX];
	struct dump_sum d;
	int status = -1;
	CLIENT *c;
	char *p;

	(void)state;
	umntall_local();
	/* One connection for all: a root client's each takes a reserved port (TIME_WAIT). */
	c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, 3, srv.is_mount_port);
	for (unsigned k = 0; k < 300; k++) {
		spelling(path, sizeof(path), k);
		assert_true(strlen(path) <= 1024);
		mnt_ok(c, path);
	}
	dump_over(IPPROTO_TCP, &d);
	fprintf(stderr, "# 300 MNTs of one export from one client: DUMP has %u entries of it, "
		"%zu bytes\n", d.ds_local, d.ds_bytes);
	if (d.ds_local != 1 || !d.ds_local_export)
		fail_msg("DUMP lists 127.0.0.1 %u times, want once, as %s", d.ds_local, IT_EXPORT);
	assert_true(d.ds_bytes <= 64);
	/* the export under other spellings, and a directory inside it: the same entry */
	it_path(sub, "%s/sub", srv.is_upper);
	mkdir(sub, 0755);
	mnt_ok(c, "//union");
	mnt_ok(c, "/./union/");
	mnt_ok(c, "//union/./sub/");
	dump_over(IPPROTO_TCP, &d);
	assert_int_equal(d.ds_local, 1);
	/* ".." is refused, however spelled */
	p = "/union/sub/..";
	assert_int_equal(it_call(c, IT_MNTPROC_MNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)xdr_int,
				 &status),
			 RPC_SUCCESS);
	assert_int_equal(status, MNT3ERR_INVAL_);
	/* UMNT under any spelling removes it */
	p = "//union/./";
	assert_int_equal(it_call(c, IT_MNTPROC_UMNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)it_xdr_void,
				 NULL),
			 RPC_SUCCESS);
	it_clnt_destroy(c);
	dump_over(IPPROTO_TCP, &d);
	assert_int_equal(d.ds_local, 0);
}

/* An RPC call that must be refused with an authentication error (AUTH_TOOWEAK). */
static void want_auth_error(CLIENT *c, uint32_t proc, xdrproc_t xargs, void *args, xdrproc_t xres,
			    void *res, const char *what)
{
	struct rpc_err e;
	enum clnt_stat cs = it_call(c, proc, xargs, args, xres, res);

	if (cs != RPC_AUTHERROR)
		fail_msg("%s from " STRANGER ", whom no rule admits: %s, want an authentication error",
			 what, clnt_sperrno(cs));
	clnt_geterr(c, &e);
	assert_int_equal(e.re_why, AUTH_TOOWEAK);
}

static CLIENT *stranger(int proto, uint32_t vers)
{
	if (proto == IPPROTO_TCP)
		return it_clnt_from(STRANGER, IT_MOUNT_PROG, vers, srv.is_mount_port, 0, 0, false);
	return it_clnt_udp_from(STRANGER, IT_MOUNT_PROG, vers, srv.is_mount_port);
}

/*
 * A client no rule admits: over TCP its connection is closed at accept (nothing is
 * answered); over UDP NULL is answered, MNT refused with MNT3ERR_ACCES, and DUMP, EXPORT,
 * UMNT and UMNTALL with an authentication error, in MOUNT v1 and v3.
 */
static void test_stranger_gets_only_null(void **state)
{
	struct dump_sum d;
	enum clnt_stat cs;
	unsigned n = 0;
	CLIENT *c;

	(void)state;
	/* somebody is in the list, and there is an export to list */
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, NULL), 0);
	c = stranger(IPPROTO_TCP, 3);
	cs = it_call(c, IT_MNTPROC_DUMP, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)xdr_dump_sum, &d);
	if (cs == RPC_SUCCESS)
		fail_msg("DUMP over TCP from " STRANGER ", whom no rule admits, was answered");
	it_clnt_destroy(c);
	for (uint32_t v = 1; v <= 3; v += 2) {
		char *p = IT_EXPORT;

		c = stranger(IPPROTO_UDP, v);
		assert_int_equal(it_call(c, IT_MNTPROC_NULL, (xdrproc_t)it_xdr_void, NULL,
					 (xdrproc_t)it_xdr_void, NULL),
				 RPC_SUCCESS);
		want_auth_error(c, IT_MNTPROC_DUMP, (xdrproc_t)it_xdr_void, NULL,
				(xdrproc_t)xdr_dump_sum, &d, "DUMP");
		want_auth_error(c, IT_MNTPROC_EXPORT, (xdrproc_t)it_xdr_void, NULL,
				(xdrproc_t)xdr_export_count, &n, "EXPORT");
		want_auth_error(c, IT_MNTPROC_UMNT, (xdrproc_t)xdr_path, &p, (xdrproc_t)it_xdr_void,
				NULL, "UMNT");
		want_auth_error(c, IT_MNTPROC_UMNTALL, (xdrproc_t)it_xdr_void, NULL,
				(xdrproc_t)it_xdr_void, NULL, "UMNTALL");
		it_clnt_destroy(c);
	}
	assert_int_equal(it_mnt_over(stranger(IPPROTO_UDP, 3), IT_EXPORT, NULL), MNT3ERR_ACCES_);
	assert_true(it_server_log_contains(&srv, "MOUNT DUMP from " STRANGER " refused"));
	/* an admitted client still gets both lists */
	dump_over(IPPROTO_TCP, &d);
	assert_int_equal(d.ds_local, 1);
	c = it_clnt(IPPROTO_TCP, IT_MOUNT_PROG, 3, srv.is_mount_port);
	assert_int_equal(it_call(c, IT_MNTPROC_EXPORT, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)xdr_export_count, &n),
			 RPC_SUCCESS);
	assert_int_equal(n, 1);
	it_clnt_destroy(c);
	umntall_local();
}

/* More clients than a DUMP reply can name: the reply is cut at its bound, over TCP and UDP. */
static void test_dump_bounded(void **state)
{
	struct dump_sum d;
	char src[32];

	(void)state;
	for (unsigned i = 0; i < MANY_CLIENTS; i++) {
		snprintf(src, sizeof(src), "127.1.%u.%u", i / 250, i % 250 + 1);
		if (it_mnt_over(it_clnt_udp_from(src, IT_MOUNT_PROG, 3, srv.is_mount_port), IT_EXPORT,
				NULL) != 0)
			fail_msg("MNT from %s failed", src);
	}
	dump_over(IPPROTO_TCP, &d);
	fprintf(stderr, "# %d clients mounted: DUMP over TCP names %u in %zu bytes (bound %u)\n",
		MANY_CLIENTS, d.ds_entries, d.ds_bytes, DUMP_MAX_TCP);
	if (d.ds_bytes > DUMP_MAX_TCP)
		fail_msg("a DUMP reply over TCP of %zu bytes, more than %u", d.ds_bytes, DUMP_MAX_TCP);
	/* cut at the bound, not emptied */
	assert_true(d.ds_bytes > DUMP_MAX_TCP - 64);
	dump_over(IPPROTO_UDP, &d);
	fprintf(stderr, "# DUMP over UDP names %u in %zu bytes (bound %u)\n", d.ds_entries,
		d.ds_bytes, DUMP_MAX_UDP);
	if (d.ds_bytes > DUMP_MAX_UDP)
		fail_msg("a DUMP reply over UDP of %zu bytes, more than %u", d.ds_bytes, DUMP_MAX_UDP);
	assert_true(d.ds_bytes > DUMP_MAX_UDP - 64);
	assert_true(it_server_log_contains(&srv, "MOUNT DUMP reply to 127.0.0.1 shortened"));
}

static int setup(void **state)
{
	static char cfg[PATH_MAX];
	char text[2 * PATH_MAX + 256];
	int n;

	(void)state;
	it_server_init(&srv, false);
	it_path(cfg, "%s/mountlist.conf", srv.is_dir);
	n = snprintf(text, sizeof(text),
		     "port 0\nmount-port 0\nportmap off\nudp\nstate %s\nexport %s %s " RULE "\n",
		     srv.is_state, IT_EXPORT, srv.is_upper);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfg, text, (size_t)n);
	srv.is_config = cfg;
	if (it_server_start(&srv) != 0) {
		it_server_cleanup(&srv);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spellings_one_entry),
		cmocka_unit_test(test_stranger_gets_only_null),
		/* last: it leaves the list full of clients */
		cmocka_unit_test(test_dump_bounded),
	};

	return cmocka_run_group_tests_name("MOUNT list", tests, setup, teardown);
}
