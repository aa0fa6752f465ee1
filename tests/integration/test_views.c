/*
 * Per-client views (export option upper=TEMPLATE) against the real server: two clients on
 * one host (libtirpc clients bound to 127.0.0.1 and 127.0.0.2, all of 127/8 is loopback)
 * mount one export; each writes only to its own upper, the other sees the pristine base,
 * the lowers never change, a handle works for its own client only, and survives a restart.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define BASE_TEXT "pristine base\n"
#define MNT3ERR_IO_ 5
#define VIEWS_PER_RULE 4         /* max-views-per-rule of test_view_bounds */
#define VIEW_IDLE_WAIT 2500      /* ms: the server's idle time for closing a view, and some */

static struct it_server srv;
static char cfgpath[PATH_MAX];
static char clients[PATH_MAX];
static char opts[PATH_MAX + 64];
static const char *conf_extra = ""; /* more config file lines for start_in(true, ...) */
static const char *upper_word = ""; /* the export's first branch's word, for start_in(true, ...) */

/*
 * Starts the server with upper= given in a config file line (from_file) or with -o (which
 * keeps the ports over a restart); the uppers go to a directory of their own, or into the
 * lower (in_lower), which the server must refuse.
 */
static void start_in(bool from_file, bool in_lower)
{
	char text[4 * PATH_MAX], path[PATH_MAX];
	int n;

	it_server_init(&srv, true);
	/* Both branches are lowers: upper= gives each client its own upper elsewhere. */
	it_path(path, "%s/base.txt", srv.is_lower);
	it_write_file(path, BASE_TEXT, strlen(BASE_TEXT));
	it_path(path, "%s/gone.txt", srv.is_lower);
	it_write_file(path, "x", 1);
	it_path(path, "%s/top.txt", srv.is_upper);
	it_write_file(path, "top", 3);
	assert_int_equal(chmod(srv.is_upper, 0751), 0);
	assert_int_equal(chown(srv.is_upper, 1234, 1235), 0);
	if (in_lower)
		it_path(clients, "%s/c", srv.is_lower);
	else
		it_path(clients, "%s/clients/sub", srv.is_dir);
	it_path(cfgpath, "%s/views.conf", srv.is_dir);
	n = snprintf(text, sizeof(text),
		     "port 0\nmount-port 0\nportmap off\nstate %s\n%s"
		     "export %s %s%s:%s upper=%s/%%a,insecure,no_root_squash\n",
		     srv.is_state, conf_extra, IT_EXPORT, srv.is_upper, upper_word, srv.is_lower,
		     clients);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
	n = snprintf(opts, sizeof(opts), "upper=%s/%%a,insecure,no_root_squash", clients);
	assert_true(n > 0 && (size_t)n < sizeof(opts));
	if (from_file)
		srv.is_config = cfgpath;
	else
		srv.is_opts = opts;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with upper=");
}

static void start(bool from_file)
{
	start_in(from_file, false);
}

static int after_each(void **state)
{
	(void)state;
	conf_extra = "";
	upper_word = "";
	return it_server_finish(&srv);
}

static CLIENT *nfs_from(const char *src)
{
	return it_clnt_from(src, NFS_PROGRAM, NFS_V3, srv.is_nfs_port, 0, 0, false);
}

static int mnt_status_from(const char *src, nfs_fh3 *fh)
{
	return it_mnt_over(it_clnt_from(src, IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0, false),
			   IT_EXPORT, fh);
}

/* MNT from src that must succeed; the root handle into fh (it_fh_free). */
static void mnt_from(const char *src, nfs_fh3 *fh)
{
	int st = mnt_status_from(src, fh);

	if (st != IT_MNT_OK) {
		it_server_dump_log(&srv);
		fail_msg("MNT from %s: status %d", src, st);
	}
}

static nfsstat3 remove_file(CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	REMOVE3args args;
	REMOVE3res res;
	nfsstat3 st;

	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	args.object.dir = *dir;
	args.object.name = (char *)name;
	assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &args,
				 (xdrproc_t)xdr_REMOVE3res, &res), RPC_SUCCESS);
	st = res.status;
	it_free((xdrproc_t)xdr_REMOVE3res, &res);
	return st;
}

/* Truncates the file fh to 0 bytes (a change that copies a lower file up). */
static nfsstat3 truncate_file(CLIENT *c, const nfs_fh3 *fh)
{
	SETATTR3args args;
	SETATTR3res res;
	nfsstat3 st;

	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	args.object = *fh;
	args.new_attributes.size.set_it = TRUE;
	args.new_attributes.size.set_size3_u.size = 0;
	assert_int_equal(it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &args,
				 (xdrproc_t)xdr_SETATTR3res, &res), RPC_SUCCESS);
	st = res.status;
	it_free((xdrproc_t)xdr_SETATTR3res, &res);
	return st;
}

static void assert_file(const char *dir, const char *name, const char *want)
{
	char path[PATH_MAX], *data;
	size_t len;

	it_path(path, "%s/%s", dir, name);
	data = it_read_file(path, &len);
	if (!data)
		fail_msg("%s is gone", path);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(data, want, len);
	free(data);
}

static bool exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	it_path(path, "%s/%s", dir, name);
	return it_exists(path);
}

static void test_isolation(void **state)
{
	nfs_fh3 fha, fhb, base;
	CLIENT *ca, *cb;
	fattr3 attr, ra, rb;
	char upa[PATH_MAX], upb[PATH_MAX];
	struct stat st;

	(void)state;
	start(true);
	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	assert_false(it_fh_equal(&fha, &fhb));
	it_path(upa, "%s/127.0.0.1", clients);
	it_path(upb, "%s/127.0.0.2", clients);
	/* Made at the first MNT with the mode of the top lower's root. */
	assert_int_equal(stat(upa, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0751);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 1235);
	assert_int_equal(stat(upb, &st), 0);

	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_getattr(ca, &fha, &ra), NFS3_OK);
	it_assert_status(it_getattr(cb, &fhb, &rb), NFS3_OK);
	assert_true(ra.fsid != rb.fsid);

	/* Each view numbers its own inodes, yet no fileid is shared between views. */
	assert_true(ra.fileid != rb.fileid);
	it_assert_status(it_lookup(ca, &fha, "top.txt", NULL, &ra), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "top.txt", NULL, &rb), NFS3_OK);
	assert_true(ra.fileid != rb.fileid);
	assert_true(ra.fsid != rb.fsid);

	/* A changes its view: a new file, a removed base file, a truncated base file. */
	it_assert_status(it_create(ca, &fha, "a-new"), NFS3_OK);
	it_assert_status(remove_file(ca, &fha, "gone.txt"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "base.txt", &base, NULL), NFS3_OK);
	it_assert_status(truncate_file(ca, &base), NFS3_OK);
	it_assert_status(it_getattr(ca, &base, &attr), NFS3_OK);
	assert_int_equal(attr.size, 0);
	it_assert_status(it_lookup(ca, &fha, "gone.txt", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(it_lookup(ca, &fha, "top.txt", NULL, NULL), NFS3_OK);

	/* B sees the pristine base. */
	it_assert_status(it_lookup(cb, &fhb, "a-new", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(it_lookup(cb, &fhb, "gone.txt", NULL, NULL), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "base.txt", NULL, &attr), NFS3_OK);
	assert_int_equal(attr.size, strlen(BASE_TEXT));

	/* A's changes are in A's upper only; the lowers are unchanged. */
	assert_true(exists_in(upa, "a-new"));
	assert_true(exists_in(upa, "base.txt"));
	assert_false(exists_in(upb, "a-new"));
	assert_false(exists_in(upb, "base.txt"));
	assert_false(exists_in(srv.is_lower, "a-new"));
	assert_false(exists_in(srv.is_upper, "a-new"));
	assert_file(srv.is_lower, "base.txt", BASE_TEXT);
	assert_file(srv.is_lower, "gone.txt", "x");
	assert_file(srv.is_upper, "top.txt", "top");

	/* A handle is no key to another client's view. */
	it_assert_status(it_getattr(cb, &fha, &attr), NFS3ERR_ACCES);
	it_assert_status(it_getattr(cb, &base, &attr), NFS3ERR_ACCES);
	it_assert_status(it_create(cb, &fha, "b-in-a"), NFS3ERR_ACCES);
	it_assert_status(it_getattr(ca, &fhb, &attr), NFS3ERR_ACCES);
	assert_false(exists_in(upa, "b-in-a"));

	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_fh_free(&base);
	it_fh_free(&fha);
	it_fh_free(&fhb);
}

/*
 * A listed branch marked =rw is shared by every view, below each client's own upper: a
 * new name in a directory only it holds lands there (create=tdp) and every client sees
 * it; new names elsewhere and copy-ups stay in the client's upper.
 */
static void test_shared_writable(void **state)
{
	nfs_fh3 fha, fhb, shared, base;
	char upa[PATH_MAX], path[PATH_MAX];
	CLIENT *ca, *cb;

	(void)state;
	upper_word = "=rw";
	start(true);
	it_path(path, "%s/shared", srv.is_upper);
	assert_int_equal(mkdir(path, 0777), 0);
	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	it_path(upa, "%s/127.0.0.1", clients);
	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_lookup(ca, &fha, "shared", &shared, NULL), NFS3_OK);
	it_assert_status(it_create(ca, &shared, "from-a"), NFS3_OK);
	it_assert_status(it_create(ca, &fha, "own"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "base.txt", &base, NULL), NFS3_OK);
	it_assert_status(truncate_file(ca, &base), NFS3_OK);
	assert_true(exists_in(path, "from-a"));
	assert_false(exists_in(upa, "shared"));
	assert_true(exists_in(upa, "own"));
	assert_true(exists_in(upa, "base.txt"));
	assert_false(exists_in(srv.is_upper, "own"));
	assert_false(exists_in(srv.is_upper, "base.txt"));
	assert_file(srv.is_lower, "base.txt", BASE_TEXT);
	it_fh_free(&shared);
	/* B sees the shared name, not A's own. */
	it_assert_status(it_lookup(cb, &fhb, "shared", &shared, NULL), NFS3_OK);
	it_assert_status(it_lookup(cb, &shared, "from-a", NULL, NULL), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "own", NULL, NULL), NFS3ERR_NOENT);
	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_fh_free(&shared);
	it_fh_free(&base);
	it_fh_free(&fha);
	it_fh_free(&fhb);
}

static void test_restart(void **state)
{
	nfs_fh3 fha, file;
	CLIENT *ca, *cb;
	fattr3 attr;

	(void)state;
	start(false);
	mnt_from("127.0.0.1", &fha);
	ca = nfs_from("127.0.0.1");
	it_assert_status(it_create(ca, &fha, "kept"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "kept", &file, NULL), NFS3_OK);
	it_clnt_destroy(ca);

	it_server_restart(&srv);
	/* No MNT after the restart: the handles name the view, which is opened again. */
	ca = nfs_from("127.0.0.1");
	it_assert_status(it_getattr(ca, &file, &attr), NFS3_OK);
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3_OK);
	it_assert_status(it_create(ca, &fha, "after"), NFS3_OK);
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_getattr(cb, &file, &attr), NFS3ERR_ACCES);
	it_clnt_destroy(cb);
	it_clnt_destroy(ca);
	it_fh_free(&file);
	it_fh_free(&fha);
}

/*
 * A chmod of a base file through one client makes a metacopy in that client's upper only;
 * its first WRITE copies the data in there; the other client and the base see neither.
 */
static void test_metacopy_per_view(void **state)
{
	SETATTR3args sa = { 0 };
	SETATTR3res sr;
	WRITE3args wa = { .offset = 0, .count = 1, .stable = FILE_SYNC };
	WRITE3res wr;
	nfs_fh3 fha, fhb, fa, fb;
	char upa[PATH_MAX], buf[64];
	CLIENT *ca, *cb;
	fattr3 attr;

	(void)state;
	start(false);
	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_lookup(ca, &fha, "base.txt", &fa, NULL), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "base.txt", &fb, &attr), NFS3_OK);
	sa.object = fa;
	sa.new_attributes.mode.set_it = TRUE;
	sa.new_attributes.mode.set_mode3_u.mode = 0600;
	memset(&sr, 0, sizeof(sr));
	assert_int_equal(it_call(ca, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &sa,
				 (xdrproc_t)xdr_SETATTR3res, &sr), RPC_SUCCESS);
	it_assert_status(sr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &sr);
	it_path(upa, "%s/127.0.0.1/base.txt", clients);
	assert_true(lgetxattr(upa, "trusted.overlay.metacopy", NULL, 0) >= 0 ||
		    lgetxattr(upa, "user.overlay.metacopy", NULL, 0) >= 0);
	it_assert_status(it_read_all(ca, &fa, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, BASE_TEXT);
	it_assert_status(it_getattr(cb, &fb, &attr), NFS3_OK);
	assert_int_not_equal(attr.mode & 07777, 0600);
	wa.file = fa;
	wa.data.data_len = 1;
	wa.data.data_val = "P";
	memset(&wr, 0, sizeof(wr));
	assert_int_equal(it_call(ca, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
				 (xdrproc_t)xdr_WRITE3res, &wr), RPC_SUCCESS);
	it_assert_status(wr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_WRITE3res, &wr);
	assert_file(clients, "127.0.0.1/base.txt", "Pristine base\n");
	it_assert_status(it_read_all(cb, &fb, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, BASE_TEXT);
	assert_file(srv.is_lower, "base.txt", BASE_TEXT);
	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_fh_free(&fa);
	it_fh_free(&fb);
	it_fh_free(&fha);
	it_fh_free(&fhb);
}

/* An upper inside a lower would change the base: the MNT is refused before anything is made. */
static void test_upper_in_lower(void **state)
{
	char dir[PATH_MAX];
	nfs_fh3 fh;

	(void)state;
	start_in(false, true);
	assert_int_not_equal(mnt_status_from("127.0.0.1", &fh), IT_MNT_OK);
	it_path(dir, "%s/c", srv.is_lower);
	assert_false(it_exists(dir));
	assert_true(it_server_log_contains(&srv, "would overlap the branch"));
}

/* unionnfsd-ctl reset: refused while mounted, then the client's layer is gone for good. */
static int ctl_reset(const char *client, bool force, char *out, size_t outlen)
{
	char bin[PATH_MAX];
	const char *build = getenv("BUILD");
	char *argv[] = { bin, "--state", srv.is_state, "reset", (char *)client,
			 force ? "--force" : NULL, NULL };

	it_path(bin, "%s/unionnfsd-ctl", build && *build ? build : "build");
	return it_run(argv, 30, out, outlen);
}

static void test_reset(void **state)
{
	char upa[PATH_MAX], out[4096];
	nfs_fh3 fha, fha2;
	fattr3 attr;
	CLIENT *ca;

	(void)state;
	start(false); /* -o keeps the ports over the restart */
	mnt_from("127.0.0.1", &fha);
	it_path(upa, "%s/127.0.0.1", clients);
	ca = nfs_from("127.0.0.1");
	it_assert_status(it_create(ca, &fha, "a-new"), NFS3_OK);
	it_assert_status(remove_file(ca, &fha, "gone.txt"), NFS3_OK);
	assert_true(exists_in(upa, "a-new"));

	/* Mounted (the MOUNT list): refused, nothing changes. */
	assert_int_equal(ctl_reset("127.0.0.1", false, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "has " IT_EXPORT " mounted"));
	assert_true(exists_in(upa, "a-new"));
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3_OK);
	/* A client without a layer. */
	assert_int_equal(ctl_reset("127.0.0.9", false, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no layer of its own"));

	assert_int_equal(ctl_reset("127.0.0.1", true, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "1 layer discarded"));
	assert_false(it_exists(upa));
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3ERR_STALE);

	/* The next mount starts from the pristine base, in a fresh upper. */
	mnt_from("127.0.0.1", &fha2);
	assert_false(it_fh_equal(&fha, &fha2));
	it_assert_status(it_lookup(ca, &fha2, "a-new", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(it_lookup(ca, &fha2, "gone.txt", NULL, NULL), NFS3_OK);
	assert_true(it_exists(upa));
	assert_false(exists_in(upa, "a-new"));
	assert_file(srv.is_lower, "gone.txt", "x");
	/* And it survives a restart like any view. */
	it_server_restart(&srv);
	it_clnt_destroy(ca);
	ca = nfs_from("127.0.0.1");
	it_assert_status(it_getattr(ca, &fha2, &attr), NFS3_OK);
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3ERR_STALE);
	it_clnt_destroy(ca);
	it_fh_free(&fha);
	it_fh_free(&fha2);
}

/*
 * A reset removes a client's upper without following the symlinks the client made in it
 * (to a directory outside, at the top and deeper down): the links go, their targets stay.
 */
static void test_reset_planted_links(void **state)
{
	char upa[PATH_MAX], outside[PATH_MAX], path[PATH_MAX + 32], out[4096];
	nfs_fh3 fha;
	CLIENT *ca;

	(void)state;
	start(false);
	mnt_from("127.0.0.1", &fha);
	it_path(upa, "%s/127.0.0.1", clients);
	ca = nfs_from("127.0.0.1");
	it_assert_status(it_create(ca, &fha, "mine"), NFS3_OK);
	it_clnt_destroy(ca);
	it_path(outside, "%s/outside", srv.is_dir);
	assert_int_equal(mkdir(outside, 0755), 0);
	it_path(path, "%s/keep", outside);
	it_write_file(path, "keep", 4);
	it_path(path, "%s/to-outside", upa);
	assert_int_equal(symlink(outside, path), 0);
	it_path(path, "%s/d", upa);
	assert_int_equal(mkdir(path, 0755), 0);
	it_path(path, "%s/d/to-outside", upa);
	assert_int_equal(symlink(outside, path), 0);

	assert_int_equal(ctl_reset("127.0.0.1", true, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "1 layer discarded"));
	assert_false(it_exists(upa));
	assert_file(outside, "keep", "keep");
	it_fh_free(&fha);
}

static char hostsmap[PATH_MAX];

static void write_hosts(const char *text)
{
	it_write_file(hostsmap, text, strlen(text));
}

/* SIGHUP, then waits for the reload's log line (the nth of the run). */
static void reload(int nth)
{
	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	if (it_server_log_wait_count(&srv, "configuration reloaded", nth, 5000))
		return;
	it_server_dump_log(&srv);
	fail_msg("no 'configuration reloaded' in the log after SIGHUP (reload %d)", nth);
}

/* unionnfsd-ctl COMMAND (clients, stats) against the test's server. */
static int ctl_cmd(const char *cmd, char *out, size_t outlen)
{
	char bin[PATH_MAX];
	const char *build = getenv("BUILD");
	char *argv[] = { bin, "--state", srv.is_state, (char *)cmd, NULL };

	it_path(bin, "%s/unionnfsd-ctl", build && *build ? build : "build");
	return it_run(argv, 30, out, outlen);
}

/*
 * upper=.../%h: layers named by host name from the --hosts map. A layer follows the name:
 * after the map moves a name to another address (SIGHUP), that address owns the layer and
 * the old one no longer does; a restart keeps it; reset takes the name.
 */
static void test_by_name(void **state)
{
	char upa[PATH_MAX], upb[PATH_MAX], out[4096];
	const char *extra[] = { "--hosts", hostsmap, NULL };
	nfs_fh3 fha, fhb, file;
	CLIENT *ca, *cb;
	fattr3 attr;

	(void)state;
	it_server_init(&srv, true);
	it_path(upa, "%s/base.txt", srv.is_lower);
	it_write_file(upa, BASE_TEXT, strlen(BASE_TEXT));
	it_path(clients, "%s/clients", srv.is_dir);
	it_path(hostsmap, "%s/hosts", srv.is_dir);
	write_hosts("# lab\n127.0.0.1 Alpha\n127.0.0.2 beta beta.lab\n");
	snprintf(opts, sizeof(opts), "upper=%s/%%h,insecure,no_root_squash", clients);
	srv.is_opts = opts;
	memcpy(srv.is_extra, extra, sizeof(extra));
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with upper=%%h and --hosts");

	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	it_path(upa, "%s/alpha", clients);
	it_path(upb, "%s/beta", clients);
	assert_true(it_exists(upa));
	assert_true(it_exists(upb));
	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_create(ca, &fha, "alpha-file"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "alpha-file", &file, NULL), NFS3_OK);
	assert_true(exists_in(upa, "alpha-file"));
	assert_false(exists_in(upb, "alpha-file"));
	it_assert_status(it_lookup(cb, &fhb, "alpha-file", NULL, NULL), NFS3ERR_NOENT);
	it_assert_status(it_getattr(cb, &file, &attr), NFS3ERR_ACCES);
	assert_int_equal(ctl_cmd("clients", out, sizeof(out)), 0);
	assert_non_null(strstr(out, upa));
	assert_non_null(strstr(out, upb));
	assert_int_equal(ctl_cmd("status", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "/%h (one per client; 2 client views open)"));

	/* The name alpha moves to 127.0.0.2 (a new lease): the layer goes with it. */
	write_hosts("127.0.0.2 alpha\n127.0.0.1 gamma\n");
	reload(1);
	it_assert_status(it_getattr(cb, &file, &attr), NFS3_OK);
	it_assert_status(it_getattr(ca, &file, &attr), NFS3ERR_ACCES);

	/* A restart reopens the view by name from the handle. */
	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_server_restart(&srv);
	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_getattr(cb, &file, &attr), NFS3_OK);
	it_assert_status(it_getattr(ca, &file, &attr), NFS3ERR_ACCES);

	/* A malformed map on SIGHUP keeps the old one (and says why). */
	write_hosts("127.0.0.2\n");
	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	assert_true(it_server_log_wait(&srv, "has no host name", 5000));
	it_assert_status(it_getattr(cb, &file, &attr), NFS3_OK);

	/* reset by name; the name's layer is gone, its handles stale. */
	assert_int_equal(ctl_reset("ALPHA", true, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "1 layer discarded"));
	assert_false(it_exists(upa));
	assert_true(it_exists(upb));
	it_assert_status(it_getattr(cb, &file, &attr), NFS3ERR_STALE);
	assert_int_equal(ctl_reset("delta", true, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no layer of its own"));
	assert_int_equal(ctl_reset("no/such", true, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "neither a client address nor a host name"));

	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_fh_free(&file);
	it_fh_free(&fha);
	it_fh_free(&fhb);
	memset(srv.is_extra, 0, sizeof(srv.is_extra));
}

/*
 * %h for a client the hosts map does not name: reverse DNS is asked (127.0.0.2 has no name
 * that resolves back to it), the MNT is refused with the line to add, and the address is
 * not looked up again for a minute; once the map names it (SIGHUP), it mounts.
 */
static void test_no_name(void **state)
{
	const char *extra[] = { "--hosts", hostsmap, NULL };
	nfs_fh3 fh;

	(void)state;
	it_server_init(&srv, true);
	it_path(clients, "%s/clients", srv.is_dir);
	it_path(hostsmap, "%s/hosts", srv.is_dir);
	write_hosts("127.0.0.1 alpha\n");
	snprintf(opts, sizeof(opts), "upper=%s/%%h,insecure,no_root_squash", clients);
	srv.is_opts = opts;
	memcpy(srv.is_extra, extra, sizeof(extra));
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start with upper=%%h and --hosts");
	assert_int_equal(mnt_status_from("127.0.0.2", &fh), 13 /* MNT3ERR_ACCES */);
	assert_true(it_server_log_contains(&srv, "client 127.0.0.2 has none"));
	assert_true(it_server_log_contains(&srv, "add the line '127.0.0.2 NAME' to"));
	assert_int_equal(mnt_status_from("127.0.0.2", &fh), 13);
	assert_true(it_server_log_contains(&srv, "no name was found for it less than 60 s ago"));
	assert_false(it_exists(clients) && exists_in(clients, "127.0.0.2"));

	write_hosts("127.0.0.1 alpha\n127.0.0.2 beta\n");
	reload(1);
	mnt_from("127.0.0.2", &fh);
	assert_true(exists_in(clients, "beta"));
	it_fh_free(&fh);
	memset(srv.is_extra, 0, sizeof(srv.is_extra));
}

/*
 * Each way a handle goes stale is counted under its cause in `unionnfsd-ctl stats`: a view
 * whose upper was removed by hand, an object removed through the server, one removed
 * behind its back, a view reset.
 */
static void test_stale_causes(void **state)
{
	nfs_fh3 fha, fhb, gone, handmade;
	char path[PATH_MAX], out[8192];
	CLIENT *ca, *cb;
	fattr3 attr;

	(void)state;
	start(false); /* -o keeps the ports over the restart */
	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	it_assert_status(it_server_stop(&srv), 0);
	it_path(path, "%s/127.0.0.2", clients);
	rm_tree(path);
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start again");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_getattr(cb, &fhb, &attr), NFS3ERR_STALE);        /* view_unavailable */

	ca = nfs_from("127.0.0.1");
	it_assert_status(it_create(ca, &fha, "f"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "f", &gone, NULL), NFS3_OK);
	it_assert_status(remove_file(ca, &fha, "f"), NFS3_OK);
	it_assert_status(it_getattr(ca, &gone, &attr), NFS3ERR_STALE);       /* no_record */
	it_assert_status(it_create(ca, &fha, "g"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "g", &handmade, NULL), NFS3_OK);
	it_path(path, "%s/127.0.0.1/g", clients);
	assert_int_equal(unlink(path), 0);
	it_assert_status(it_getattr(ca, &handmade, &attr), NFS3ERR_STALE);   /* object_gone */
	assert_int_equal(ctl_reset("127.0.0.1", true, out, sizeof(out)), 0);
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3ERR_STALE);        /* unknown_export */

	assert_int_equal(ctl_cmd("stats", out, sizeof(out)), 0);
	if (!strstr(out, "STALE replies by cause: object_gone 1 no_record 1 unknown_export 1 "
			 "view_unavailable 1\n"))
		fail_msg("stats output:\n%s", out);
	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_fh_free(&fha);
	it_fh_free(&fhb);
	it_fh_free(&gone);
	it_fh_free(&handmade);
}

/* unionnfsd-ctl check [--repair] into out; its exit status. */
static int ctl_check(bool repair, char *out, size_t outlen)
{
	char bin[PATH_MAX];
	const char *build = getenv("BUILD");
	char *argv[] = { bin, "--state", srv.is_state, "check", repair ? "--repair" : NULL, NULL };

	it_path(bin, "%s/unionnfsd-ctl", build && *build ? build : "build");
	return it_run(argv, 60, out, outlen);
}

/*
 * check walks every client's view, not only the shared lowers: a file removed by hand from
 * one client's upper is reported there; --repair drops its record; a view whose upper was
 * removed by hand is reported as one that cannot be opened.
 */
static void test_check_views(void **state)
{
	char path[PATH_MAX], out[16384];
	nfs_fh3 fha, fhb, handmade;
	CLIENT *ca, *cb;
	fattr3 attr;

	(void)state;
	start(false);
	mnt_from("127.0.0.1", &fha);
	mnt_from("127.0.0.2", &fhb);
	ca = nfs_from("127.0.0.1");
	cb = nfs_from("127.0.0.2");
	it_assert_status(it_create(ca, &fha, "handmade"), NFS3_OK);
	it_assert_status(it_lookup(ca, &fha, "handmade", &handmade, NULL), NFS3_OK);
	it_assert_status(it_create(cb, &fhb, "kept"), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "base.txt", NULL, NULL), NFS3_OK);
	it_path(path, "%s/127.0.0.1/handmade", clients);
	assert_int_equal(unlink(path), 0);

	/* Exit status 3: stale records are left in the map. */
	assert_int_equal(ctl_check(false, out, sizeof(out)), 3);
	if (!strstr(out, "client 127.0.0.1 ino ") || !strstr(out, "1 stale, 0 dropped, 0 errors, 2 client views") ||
	    !strstr(out, "client 127.0.0.2: ") || !strstr(out, "shared lowers: "))
		fail_msg("check output:\n%s", out);
	assert_non_null(strstr(out, "`check --repair` drops the stale records"));
	it_assert_status(it_getattr(ca, &handmade, &attr), NFS3ERR_STALE);

	assert_int_equal(ctl_check(true, out, sizeof(out)), 0);
	if (!strstr(out, "record dropped") || !strstr(out, "1 stale, 1 dropped, 0 errors"))
		fail_msg("check --repair output:\n%s", out);
	assert_int_equal(ctl_check(false, out, sizeof(out)), 0);
	if (!strstr(out, "0 stale, 0 dropped, 0 errors, 2 client views"))
		fail_msg("check after the repair:\n%s", out);
	/* Still stale for the client; the view and its other files are untouched. */
	it_assert_status(it_getattr(ca, &handmade, &attr), NFS3ERR_STALE);
	it_assert_status(it_getattr(ca, &fha, &attr), NFS3_OK);
	it_assert_status(it_lookup(cb, &fhb, "kept", NULL, NULL), NFS3_OK);

	it_clnt_destroy(ca);
	it_clnt_destroy(cb);
	it_assert_status(it_server_stop(&srv), 0);
	it_path(path, "%s/127.0.0.2", clients);
	rm_tree(path);
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start again");
	/* Exit status 4: something could not be checked. */
	assert_int_equal(ctl_check(false, out, sizeof(out)), 4);
	if (!strstr(out, "client 127.0.0.2: its view cannot be opened") ||
	    !strstr(out, "1 errors, 2 client views"))
		fail_msg("check with a removed upper:\n%s", out);
	it_fh_free(&fha);
	it_fh_free(&fhb);
	it_fh_free(&handmade);
}

static bool_t xdr_dirpath_arg(XDR *x, char **path)
{
	return xdr_string(x, path, 1024);
}

/* UMNT of the export from src: the client leaves the MOUNT list. */
static void umnt_from(const char *src)
{
	CLIENT *c = it_clnt_from(src, IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0, false);
	char *path = IT_EXPORT;

	assert_int_equal(it_call(c, IT_MNTPROC_UMNT, (xdrproc_t)xdr_dirpath_arg, &path,
				 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
	it_clnt_destroy(c);
}

/* The client views open, as `unionnfsd-ctl status` counts them. */
static int views_open(void)
{
	char out[8192];
	const char *p;

	assert_int_equal(ctl_cmd("status", out, sizeof(out)), 0);
	p = strstr(out, "client view");
	if (!p)
		fail_msg("status says nothing about client views:\n%s", out);
	while (p > out && p[-1] == ' ')
		p--;
	while (p > out && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return atoi(p);
}

/* A client at src mounts, leaves a file in its own upper, and unmounts (or stays mounted). */
static void client_visit(const char *src, bool stay, nfs_fh3 *root)
{
	CLIENT *c;

	mnt_from(src, root);
	c = nfs_from(src);
	it_assert_status(it_create(c, root, "mine"), NFS3_OK);
	it_clnt_destroy(c);
	if (!stay)
		umnt_from(src);
}

/*
 * max-views-per-rule: clients from more addresses than the bound each get a view, the
 * views of clients that unmounted and went quiet being closed for them, so open views and
 * descriptors stay bounded; a closed view keeps its upper and opens again on its client's
 * next call; when every open view has a mount, a new client's MNT fails and the log
 * names the limit.
 */
static void test_view_bounds(void **state)
{
	nfs_fh3 old[VIEWS_PER_RULE], cur[VIEWS_PER_RULE], none;
	char src[32], path[PATH_MAX];
	int fds0, fds1, fds2;
	CLIENT *c;

	(void)state;
	conf_extra = "max-views-per-rule 4\n";
	start(true);
	fds0 = it_server_fds(&srv);
	for (int k = 0; k < VIEWS_PER_RULE; k++) {
		snprintf(src, sizeof(src), "127.1.0.%d", 1 + k);
		client_visit(src, false, &old[k]);
	}
	fds1 = it_server_fds(&srv);
	assert_int_equal(views_open(), VIEWS_PER_RULE);
	usleep(VIEW_IDLE_WAIT * 1000);
	/* As many new clients again, staying mounted: each takes the place of an old view. */
	for (int k = 0; k < VIEWS_PER_RULE; k++) {
		snprintf(src, sizeof(src), "127.1.1.%d", 1 + k);
		client_visit(src, true, &cur[k]);
	}
	fds2 = it_server_fds(&srv);
	fprintf(stderr, "# views open: %d after %d clients, %d after %d; server descriptors %d, %d, %d (no view, %d views, %d views)\n",
		VIEWS_PER_RULE, VIEWS_PER_RULE, views_open(), 2 * VIEWS_PER_RULE, fds0, fds1, fds2,
		VIEWS_PER_RULE, views_open());
	assert_int_equal(views_open(), VIEWS_PER_RULE);
	/* Closed views gave their descriptors back: no growth like the first clients' (a few
	 * descriptors of the new views' caches may differ). */
	if (fds2 - fds1 > (fds1 - fds0) / 2)
		fail_msg("the server holds %d descriptors after %d clients, %d after the first %d and %d with none",
			 fds2, 2 * VIEWS_PER_RULE, fds1, VIEWS_PER_RULE, fds0);
	/* Every open view has a mount: nothing may close, the next client is refused. */
	assert_int_equal(mnt_status_from("127.1.2.1", &none), MNT3ERR_IO_);
	if (!it_server_log_contains(&srv, "max-views-per-rule"))
		fail_msg("the refused MNT's log line does not name max-views-per-rule");
	assert_int_equal(views_open(), VIEWS_PER_RULE);
	/* The old clients' uppers stayed; one of them comes back once a view may close. */
	for (int k = 0; k < VIEWS_PER_RULE; k++) {
		snprintf(path, sizeof(path), "127.1.0.%d", 1 + k);
		assert_true(exists_in(clients, path));
	}
	umnt_from("127.1.1.1");
	usleep(VIEW_IDLE_WAIT * 1000);
	c = nfs_from("127.1.0.1");
	it_assert_status(it_lookup(c, &old[0], "mine", NULL, NULL), NFS3_OK);
	it_clnt_destroy(c);
	assert_int_equal(views_open(), VIEWS_PER_RULE);
	for (int k = 0; k < VIEWS_PER_RULE; k++) {
		it_fh_free(&old[k]);
		it_fh_free(&cur[k]);
	}
}


/* --- opening a view holds up no other client (strace holds the upper's mkdir) --- */

#define LATCH_DELAY_MS 2000      /* how long strace holds the return of a mkdir */
#define LATCH_DELAY_US (LATCH_DELAY_MS * 1000L)

static pid_t latch_strace;

/* A failed test_open_latch may leave strace attached: it goes first, then the server. */
static int after_latch(void **state)
{
	int status;

	if (latch_strace > 0) {
		kill(latch_strace, SIGKILL);
		waitpid(latch_strace, &status, 0);
		latch_strace = 0;
	}
	return after_each(state);
}

struct first_mnt {
	const char *fm_src;
	nfs_fh3 fm_fh;
	int fm_status;
	_Atomic bool fm_done;
};

static void *first_mnt_main(void *arg)
{
	struct first_mnt *fm = arg;

	fm->fm_status = mnt_status_from(fm->fm_src, &fm->fm_fh);
	atomic_store(&fm->fm_done, true);
	return NULL;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How many lines of the server's log since its start contain text. */
static int log_count(const char *text)
{
	char *log, *at;
	size_t len;
	int n = 0;

	log = it_read_file(srv.is_log, &len);
	assert_non_null(log);
	for (at = log + srv.is_log_off; (at = strstr(at, text)) != NULL; at += strlen(text))
		n++;
	free(log);
	return n;
}

/*
 * Two first MNTs of one client while the mkdir of its upper is held: the view is made and
 * opened once, the second MNT waits for it and gets the same root handle. Meanwhile a
 * MNT of another client (whose view is open: it makes no directory) is answered at once,
 * not after the held mkdir: no table lock is held across the file system work.
 */
static void test_open_latch(void **state)
{
	struct first_mnt a1 = { .fm_src = "127.0.0.1" }, a2 = { .fm_src = "127.0.0.1" };
	pthread_t t1, t2;
	long long t0, took;
	bool a1_done, a2_done;
	nfs_fh3 fhb;
	pid_t sp;
	int ino, status, status_b;

	(void)state;
	if (system("command -v strace >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP: strace is not installed (deploy/install-deps installs it); "
				"this test holds the server's mkdir with it\n");
		return;
	}
	start(true);
	/* 127.0.0.3 has its view open (its next MNT makes no directory); 127.0.0.1 has none. */
	mnt_from("127.0.0.3", &fhb);
	it_fh_free(&fhb);
	ino = inotify_init1(IN_CLOEXEC);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, clients, IN_CREATE) >= 0);
	sp = latch_strace = it_server_strace_delay(&srv, "/^mkdir(at)?$", LATCH_DELAY_US);

	assert_int_equal(pthread_create(&t1, NULL, first_mnt_main, &a1), 0);
	/* Made, and the mkdir's return held: the view is being opened. */
	for (bool made = false; !made;) {
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		struct pollfd p = { .fd = ino, .events = POLLIN };
		ssize_t n;

		/* Long: a server that makes each parent by path has each of their mkdirs held. */
		if (poll(&p, 1, 60000) != 1)
			fail_msg("the first MNT of 127.0.0.1 made no upper within 60 s");
		n = read(ino, buf, sizeof(buf));
		assert_true(n > 0);
		for (char *at = buf; at < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)at;

			made |= e->len && !strcmp(e->name, "127.0.0.1");
			at += sizeof(*e) + e->len;
		}
	}
	close(ino);
	assert_int_equal(pthread_create(&t2, NULL, first_mnt_main, &a2), 0);

	t0 = now_ms();
	status_b = mnt_status_from("127.0.0.3", &fhb);
	took = now_ms() - t0;
	a1_done = atomic_load(&a1.fm_done);
	a2_done = atomic_load(&a2.fm_done);
	/* Everything back to normal before any assertion: strace detaches, no call is held. */
	assert_int_equal(pthread_join(t1, NULL), 0);
	assert_int_equal(pthread_join(t2, NULL), 0);
	assert_int_equal(kill(sp, SIGTERM), 0);
	assert_int_equal(waitpid(sp, &status, 0), sp);
	latch_strace = 0;

	fprintf(stderr, "# MNT of another client while a view opens: %lld ms (mkdir held %d ms)\n",
		took, LATCH_DELAY_MS);
	assert_int_equal(status_b, IT_MNT_OK);
	if (took >= LATCH_DELAY_MS / 2 || a1_done)
		fail_msg("the MNT of 127.0.0.3 waited %lld ms, for the view of 127.0.0.1 being "
			 "opened (its mkdir held %d ms)", took, LATCH_DELAY_MS);
	assert_false(a2_done);
	assert_int_equal(a1.fm_status, IT_MNT_OK);
	assert_int_equal(a2.fm_status, IT_MNT_OK);
	assert_true(it_fh_equal(&a1.fm_fh, &a2.fm_fh));
	assert_int_equal(log_count("client 127.0.0.1 served from its own upper"), 1);
	assert_int_equal(log_count("client 127.0.0.3 served from its own upper"), 1);
	it_fh_free(&a1.fm_fh);
	it_fh_free(&a2.fm_fh);
	it_fh_free(&fhb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_isolation, after_each),
		cmocka_unit_test_teardown(test_shared_writable, after_each),
		cmocka_unit_test_teardown(test_restart, after_each),
		cmocka_unit_test_teardown(test_metacopy_per_view, after_each),
		cmocka_unit_test_teardown(test_upper_in_lower, after_each),
		cmocka_unit_test_teardown(test_reset, after_each),
		cmocka_unit_test_teardown(test_reset_planted_links, after_each),
		cmocka_unit_test_teardown(test_by_name, after_each),
		cmocka_unit_test_teardown(test_no_name, after_each),
		cmocka_unit_test_teardown(test_stale_causes, after_each),
		cmocka_unit_test_teardown(test_check_views, after_each),
		cmocka_unit_test_teardown(test_view_bounds, after_each),
		cmocka_unit_test_teardown(test_open_latch, after_latch),
	};

	return cmocka_run_group_tests_name("views", tests, NULL, NULL);
}
