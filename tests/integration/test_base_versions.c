/*
 * Base versions of an export with per-client uppers (upper=): a reload gives the export a
 * new base; a client keeps the base it mounted until it mounts again, also across a
 * restart of the server, and then sees the new base under its own changes, with the
 * handles of its own files unchanged. The base directories are never written.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"

#define RELOADED "SIGHUP: configuration reloaded"
#define LAB "/lab"

static struct it_server srv;
static char cfgpath[PATH_MAX], v1[PATH_MAX], v2[PATH_MAX], clients[PATH_MAX];

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", dir, name);
	it_write_file(p, text, strlen(text));
}

static void make_dir(const char *dir, const char *name)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void write_config(const char *base)
{
	char text[4 * PATH_MAX];
	/* the ports it got at start, so that a restart keeps them */
	int n = snprintf(text, sizeof(text),
			 "port %d\nmount-port %d\nportmap off\nnlm-port off\nstate %s\n"
			 "export %s %s upper=%s/%%a,insecure,no_root_squash\n",
			 srv.is_nfs_port, srv.is_mount_port, srv.is_state, LAB, base, clients);

	assert_true(n > 0 && (size_t)n < sizeof(text));
	it_write_file(cfgpath, text, (size_t)n);
}

static int before_each(void **state)
{
	(void)state;
	it_server_init(&srv, false);
	it_path(v1, "%s/v1", srv.is_dir);
	it_path(v2, "%s/v2", srv.is_dir);
	it_path(clients, "%s/clients", srv.is_dir);
	assert_int_equal(mkdir(v1, 0755), 0);
	assert_int_equal(mkdir(v2, 0755), 0);
	put(v1, "keep", "keep");
	put(v1, "changed", "old");
	put(v1, "removed", "removed");
	put(v1, "both", "b1");
	put(v1, "meta", "meta-v1");
	put(v1, "gone-by-client", "x");
	make_dir(v1, "d");
	put(v1, "d/f", "f");
	put(v2, "keep", "keep");
	put(v2, "changed", "new");
	put(v2, "added", "added");
	put(v2, "both", "b2");
	put(v2, "meta", "meta-v2-longer");
	put(v2, "gone-by-client", "x2");
	make_dir(v2, "d");
	put(v2, "d/f", "f");
	put(v2, "d/new", "new");
	it_path(cfgpath, "%s/base.conf", srv.is_dir);
	write_config(v1);
	srv.is_config = cfgpath;
	if (it_server_start(&srv) != 0)
		fail_msg("the server did not start on base v1");
	return 0;
}

static int after_each(void **state)
{
	(void)state;
	return it_server_finish(&srv);
}

static void mnt_as(const char *src, nfs_fh3 *root)
{
	CLIENT *c = it_clnt_from(src, IT_MOUNT_PROG, 3, srv.is_mount_port, 0, 0, false);

	assert_int_equal(it_mnt_over(c, LAB, root), IT_MNT_OK);
}

static CLIENT *nfs_as(const char *src)
{
	return it_clnt_from(src, NFS_PROGRAM, NFS_V3, srv.is_nfs_port, 0, 0, false);
}

/* LOOKUP of name under root by src: its status, and its bytes in buf ("" unless NFS3_OK). */
static nfsstat3 read_name(const char *src, const nfs_fh3 *root, const char *name, char *buf,
			  size_t len, nfs_fh3 *fh_out)
{
	CLIENT *c = nfs_as(src);
	nfs_fh3 fh;
	fattr3 attr;
	nfsstat3 st = it_lookup(c, root, name, &fh, &attr);

	buf[0] = '\0';
	if (st == NFS3_OK) {
		st = it_read_all(c, &fh, buf, len);
		if (fh_out)
			*fh_out = fh;
		else
			it_fh_free(&fh);
	}
	it_clnt_destroy(c);
	return st;
}

static nfsstat3 read_fh(const char *src, const nfs_fh3 *fh, char *buf, size_t len)
{
	CLIENT *c = nfs_as(src);
	nfsstat3 st = it_read_all(c, fh, buf, len);

	it_clnt_destroy(c);
	return st;
}

/* The client's own change: "both" rewritten as "mine" (a copy-up into its upper). */
static void write_both(const char *src, const nfs_fh3 *root)
{
	CLIENT *c = nfs_as(src);
	nfs_fh3 fh;
	fattr3 attr;
	WRITE3args wa;
	WRITE3res wr;

	it_assert_status(it_lookup(c, root, "both", &fh, &attr), NFS3_OK);
	memset(&wa, 0, sizeof(wa));
	memset(&wr, 0, sizeof(wr));
	wa.file = fh;
	wa.count = 4;
	wa.stable = FILE_SYNC;
	wa.data.data_len = 4;
	wa.data.data_val = "mine";
	assert_int_equal(it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
				 (xdrproc_t)xdr_WRITE3res, &wr), RPC_SUCCESS);
	it_assert_status(wr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_WRITE3res, &wr);
	it_fh_free(&fh);
	it_clnt_destroy(c);
}

/*
 * The client deletes "gone-by-client" (a whiteout) and replaces directory "d" by an empty
 * one of its own (an opaque directory).
 */
static void delete_and_replace(const char *src, const nfs_fh3 *root)
{
	CLIENT *c = nfs_as(src);
	REMOVE3args ra = { .object = { .dir = *root, .name = "gone-by-client" } };
	REMOVE3res rr;
	RMDIR3args da = { .object = { .dir = *root, .name = "d" } };
	RMDIR3res dr;
	MKDIR3args ma;
	MKDIR3res mr;
	nfs_fh3 d;
	fattr3 attr;

	memset(&rr, 0, sizeof(rr));
	assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &ra,
				 (xdrproc_t)xdr_REMOVE3res, &rr), RPC_SUCCESS);
	it_assert_status(rr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_REMOVE3res, &rr);
	it_assert_status(it_lookup(c, root, "d", &d, &attr), NFS3_OK);
	ra.object.dir = d;
	ra.object.name = "f";
	memset(&rr, 0, sizeof(rr));
	assert_int_equal(it_call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &ra,
				 (xdrproc_t)xdr_REMOVE3res, &rr), RPC_SUCCESS);
	it_assert_status(rr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_REMOVE3res, &rr);
	it_fh_free(&d);
	memset(&dr, 0, sizeof(dr));
	assert_int_equal(it_call(c, NFSPROC3_RMDIR, (xdrproc_t)xdr_RMDIR3args, &da,
				 (xdrproc_t)xdr_RMDIR3res, &dr), RPC_SUCCESS);
	it_assert_status(dr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_RMDIR3res, &dr);
	memset(&ma, 0, sizeof(ma));
	memset(&mr, 0, sizeof(mr));
	ma.where.dir = *root;
	ma.where.name = "d";
	assert_int_equal(it_call(c, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &ma,
				 (xdrproc_t)xdr_MKDIR3res, &mr), RPC_SUCCESS);
	it_assert_status(mr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_MKDIR3res, &mr);
	it_clnt_destroy(c);
}

/* chmod of name: over a base file, a metadata-only copy in the client's upper. */
static void chmod_name(const char *src, const nfs_fh3 *root, const char *name, mode_t mode)
{
	CLIENT *c = nfs_as(src);
	SETATTR3args sa;
	SETATTR3res sr;
	nfs_fh3 fh;
	fattr3 attr;

	it_assert_status(it_lookup(c, root, name, &fh, &attr), NFS3_OK);
	memset(&sa, 0, sizeof(sa));
	memset(&sr, 0, sizeof(sr));
	sa.object = fh;
	sa.new_attributes.mode.set_it = TRUE;
	sa.new_attributes.mode.set_mode3_u.mode = mode;
	assert_int_equal(it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &sa,
				 (xdrproc_t)xdr_SETATTR3res, &sr), RPC_SUCCESS);
	it_assert_status(sr.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &sr);
	it_fh_free(&fh);
	it_clnt_destroy(c);
}

static void assert_name(const char *src, const nfs_fh3 *root, const char *name, const char *want)
{
	char buf[64];

	if (!want) {
		it_assert_status(read_name(src, root, name, buf, sizeof(buf), NULL), NFS3ERR_NOENT);
		return;
	}
	it_assert_status(read_name(src, root, name, buf, sizeof(buf), NULL), NFS3_OK);
	if (strcmp(buf, want))
		fail_msg("%s reads %s as \"%s\", want \"%s\"", src, name, buf, want);
}

static void assert_base_untouched(void)
{
	static const char *const names[][2] = {
		{ "v1/keep", "keep" }, { "v1/changed", "old" }, { "v1/removed", "removed" },
		{ "v1/both", "b1" }, { "v1/meta", "meta-v1" }, { "v2/keep", "keep" },
		{ "v2/changed", "new" }, { "v2/meta", "meta-v2-longer" }, { "v1/d/f", "f" },
		{ "v2/d/new", "new" }, { "v1/gone-by-client", "x" }, { "v2/gone-by-client", "x2" },
		{ "v2/added", "added" }, { "v2/both", "b2" },
	};

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		char p[PATH_MAX];
		size_t len;
		char *text;

		it_path(p, "%s/%s", srv.is_dir, names[k][0]);
		text = it_read_file(p, &len);
		assert_non_null(text);
		if (len != strlen(names[k][1]) || memcmp(text, names[k][1], len))
			fail_msg("the base file %s was changed", p);
		free(text);
	}
}

static void reload_to(const char *base)
{
	int before = it_server_log_count(&srv, RELOADED);

	write_config(base);
	assert_int_equal(kill(srv.is_pid, SIGHUP), 0);
	if (!it_server_log_wait_count(&srv, RELOADED, before + 1, 10000)) {
		it_server_dump_log(&srv);
		fail_msg("no reload in the log 10 s after SIGHUP");
	}
	assert_true(it_server_log_contains(&srv, "has a new base"));
}

/*
 * Client A mounts v1 and changes "both"; the admin publishes v2. A keeps v1 until it mounts
 * again, then sees v2 under its change; its own file keeps its handle, the handle of a
 * base file that changed is stale; a client that mounts first after the switch gets v2.
 */
static void test_client_moves_at_its_next_mount(void **state)
{
	nfs_fh3 root, root2, fh_both, fh_changed, fh_keep;
	char buf[64];

	(void)state;
	mnt_as("127.0.0.1", &root);
	write_both("127.0.0.1", &root);
	chmod_name("127.0.0.1", &root, "meta", 0600);
	delete_and_replace("127.0.0.1", &root);
	it_assert_status(read_name("127.0.0.1", &root, "both", buf, sizeof(buf), &fh_both), NFS3_OK);
	it_assert_status(read_name("127.0.0.1", &root, "changed", buf, sizeof(buf), &fh_changed),
			 NFS3_OK);
	it_assert_status(read_name("127.0.0.1", &root, "keep", buf, sizeof(buf), &fh_keep), NFS3_OK);

	reload_to(v2);
	/* mid-session: still v1 */
	assert_name("127.0.0.1", &root, "changed", "old");
	assert_name("127.0.0.1", &root, "removed", "removed");
	assert_name("127.0.0.1", &root, "added", NULL);

	/* its next mount (a reboot): v2 under its own change */
	mnt_as("127.0.0.1", &root2);
	assert_true(it_fh_equal(&root, &root2));
	assert_name("127.0.0.1", &root2, "changed", "new");
	assert_name("127.0.0.1", &root2, "added", "added");
	assert_name("127.0.0.1", &root2, "removed", NULL);
	assert_name("127.0.0.1", &root2, "keep", "keep");
	assert_name("127.0.0.1", &root2, "both", "mine");
	/* its chmod kept what it saw: the old base's data, not the new one's */
	assert_name("127.0.0.1", &root2, "meta", "meta-v1");
	/* its deletion and its own directory keep their meaning over the new base */
	assert_name("127.0.0.1", &root2, "gone-by-client", NULL);
	{
		CLIENT *c = nfs_as("127.0.0.1");
		nfs_fh3 d, x;
		fattr3 attr;

		it_assert_status(it_lookup(c, &root2, "d", &d, &attr), NFS3_OK);
		it_assert_status(it_lookup(c, &d, "new", &x, &attr), NFS3ERR_NOENT);
		it_assert_status(it_lookup(c, &d, "f", &x, &attr), NFS3ERR_NOENT);
		it_fh_free(&d);
		it_clnt_destroy(c);
	}
	it_assert_status(read_fh("127.0.0.1", &fh_both, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "mine");
	it_assert_status(read_fh("127.0.0.1", &fh_changed, buf, sizeof(buf)), NFS3ERR_STALE);

	/* a client new to the export gets v2, without the other's change */
	it_fh_free(&root2);
	mnt_as("127.0.0.2", &root2);
	assert_name("127.0.0.2", &root2, "both", "b2");
	assert_name("127.0.0.2", &root2, "changed", "new");
	assert_base_untouched();
	it_fh_free(&root);
	it_fh_free(&root2);
	it_fh_free(&fh_both);
	it_fh_free(&fh_changed);
	it_fh_free(&fh_keep);
}

/* unionnfsd-ctl with args; its exit status, its output in out. */
static int ctl(char *out, size_t outlen, const char *a, const char *b, const char *c)
{
	char *argv[] = { (char *)it_ctl_binary(), "--state", srv.is_state, (char *)a, (char *)b,
			 (char *)c, NULL };

	return it_run(argv, 60, out, outlen);
}

/*
 * conflicts lists exactly the file the client changed and the new base changed too, before
 * and after the client moved; take-base drops the client's copy, so its next mount shows
 * the new base's version there.
 */
static void test_conflicts_and_take_base(void **state)
{
	static char out[8192];
	static const char want[] =
		"{\"client\":\"127.0.0.1\",\"conflicts\":[{\"export\":\"/lab\",\"path\":\"/both\","
		"\"upper\":\"copy\",\"base\":\"changed\"}],\"exports_compared\":1}\n";
	nfs_fh3 root;

	(void)state;
	mnt_as("127.0.0.1", &root);
	write_both("127.0.0.1", &root);
	{
		CLIENT *c = nfs_as("127.0.0.1");

		it_assert_status(it_create(c, &root, "own"), NFS3_OK); /* new in both: no conflict */
		it_clnt_destroy(c);
	}
	assert_int_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.1", NULL), 0);
	assert_non_null(strstr(out, "has been on one base only"));
	reload_to(v2);
	/* not moved yet: its base and the export's new one */
	assert_int_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.1", "--json"), 0);
	assert_string_equal(out, want);
	it_fh_free(&root);
	mnt_as("127.0.0.1", &root);
	/* moved: its base before and the one it is on */
	assert_int_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.1", "--json"), 0);
	assert_string_equal(out, want);
	assert_int_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.1", NULL), 0);
	assert_non_null(strstr(out, "/lab /both: changed in the base; its own copy hides the base's"));
	assert_int_equal(ctl(out, sizeof(out), "take-base", "127.0.0.1", "/both"), 0);
	assert_int_not_equal(ctl(out, sizeof(out), "take-base", "127.0.0.1", "/keep"), 0);
	assert_non_null(strstr(out, "has no copy of its own at /keep"));
	assert_int_not_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.9", NULL), 0);
	assert_non_null(strstr(out, "has no layer of its own"));
	it_fh_free(&root);
	mnt_as("127.0.0.1", &root);
	assert_name("127.0.0.1", &root, "both", "b2");
	assert_name("127.0.0.1", &root, "own", "");
	assert_int_equal(ctl(out, sizeof(out), "conflicts", "127.0.0.1", "--json"), 0);
	assert_non_null(strstr(out, "\"conflicts\":[]"));
	assert_base_untouched();
	it_fh_free(&root);
}

/*
 * unionnfsd-ctl base EXPORT set DIR: a new base without editing the configuration, kept
 * over a restart, until the configuration's base changes.
 */
static void test_base_set_by_ctl(void **state)
{
	static char out[8192];
	char want[3 * PATH_MAX];
	nfs_fh3 root;
	int before;

	(void)state;
	mnt_as("127.0.0.1", &root);
	assert_int_equal(ctl(out, sizeof(out), "base", LAB, NULL), 0);
	snprintf(want, sizeof(want), "export %s: base %s (from the configuration)\n", LAB, v1);
	assert_string_equal(out, want);
	assert_int_not_equal(ctl(out, sizeof(out), "base", "/nope", NULL), 0);
	before = it_server_log_count(&srv, RELOADED);
	{
		char *argv[] = { (char *)it_ctl_binary(), "--state", srv.is_state, "base", LAB, "set",
				 v2, NULL };

		assert_int_equal(it_run(argv, 60, out, sizeof(out)), 0);
	}
	assert_true(it_server_log_wait_count(&srv, RELOADED, before + 1, 10000));
	assert_true(it_server_log_contains(&srv, "has a new base"));
	assert_name("127.0.0.1", &root, "changed", "old"); /* until it mounts again */
	it_fh_free(&root);
	mnt_as("127.0.0.1", &root);
	assert_name("127.0.0.1", &root, "changed", "new");

	/* kept over a restart, the configuration still naming v1 (with the ports it got) */
	write_config(v1);
	it_server_restart(&srv);
	it_fh_free(&root);
	mnt_as("127.0.0.2", &root);
	assert_name("127.0.0.2", &root, "changed", "new");
	assert_int_equal(ctl(out, sizeof(out), "base", LAB, NULL), 0);
	snprintf(want, sizeof(want), "export %s: base %s (set by `base %s set`; the configuration "
		 "has %s)\n", LAB, v2, LAB, v1);
	assert_string_equal(out, want);

	/* the configuration's base is edited: from then on it is what counts */
	reload_to(v2);
	assert_true(it_server_log_contains(&srv, "changed since `unionnfsd-ctl base ... set`"));
	assert_int_equal(ctl(out, sizeof(out), "base", LAB, NULL), 0);
	snprintf(want, sizeof(want), "export %s: base %s (from the configuration)\n", LAB, v2);
	assert_string_equal(out, want);
	assert_base_untouched();
	it_fh_free(&root);
}

/*
 * The map records the base each client last mounted: a restart in the middle of a
 * roll-out serves a client that has not mounted since on its old base, until it does.
 */
static void test_restart_during_rollout(void **state)
{
	nfs_fh3 root, fh_changed;
	char buf[64];

	(void)state;
	mnt_as("127.0.0.1", &root);
	it_assert_status(read_name("127.0.0.1", &root, "changed", buf, sizeof(buf), &fh_changed),
			 NFS3_OK);
	reload_to(v2);
	it_server_restart(&srv);
	it_assert_status(read_fh("127.0.0.1", &fh_changed, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "old");
	assert_name("127.0.0.1", &root, "removed", "removed");
	it_fh_free(&root);
	mnt_as("127.0.0.1", &root);
	assert_name("127.0.0.1", &root, "changed", "new");
	assert_name("127.0.0.1", &root, "removed", NULL);
	assert_base_untouched();
	it_fh_free(&root);
	it_fh_free(&fh_changed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_client_moves_at_its_next_mount, before_each,
						after_each),
		cmocka_unit_test_setup_teardown(test_restart_during_rollout, before_each, after_each),
		cmocka_unit_test_setup_teardown(test_conflicts_and_take_base, before_each, after_each),
		cmocka_unit_test_setup_teardown(test_base_set_by_ctl, before_each, after_each),
	};

	return cmocka_run_group_tests_name("base versions", tests, NULL, NULL);
}
