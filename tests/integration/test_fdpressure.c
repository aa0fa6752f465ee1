/*
 * Running out of descriptors: a server whose open files limit is far below what
 * its clients' working set wants must answer NFS3ERR_JUKEBOX while descriptors are short
 * (the client retries), never NFS3ERR_IO, and must shed the descriptors its caches hold to
 * make room. Once the load stops it must serve everything again without a restart: every
 * file reads back with its bytes and `unionnfsd-ctl check` finds nothing stale.
 *
 * The server runs with T_NOFILE descriptors; T_THREADS connections look up and read
 * T_DIRS x T_PER files (directories merged from both branches, files in the lower) and
 * rewrite files of the upper with their own bytes, all at once.
 */
#include "common.h"

#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	T_NOFILE = 96,       /* the server's whole open files limit */
	T_DIRS = 50,
	T_PER = 50,          /* T_DIRS * T_PER = 2,500 files */
	T_WFILES = 40,       /* upper files rewritten during the pressure */
	T_THREADS = 8,       /* readers; one more thread writes */
	T_LEN = 300,         /* bytes per file */
	T_READ = 4096,
	T_ACCEPT_WITHIN = 5, /* seconds for a new connection to be served */
};

static nfs_fh3 root;

/* What one connection saw. */
struct tally {
	int t_id;
	unsigned long t_calls;
	unsigned long t_io;          /* NFS3ERR_IO: the defect */
	unsigned long t_jukebox;     /* allowed while descriptors are short */
	unsigned long t_other;       /* any other error */
	unsigned long t_wrong;       /* OK, but the wrong bytes */
	char t_first[256];           /* the first IO or other error */
};

static uint32_t file_seed(int d, int f)
{
	return (uint32_t)(d * 1000 + f + 1);
}

static void dir_name(char *out, size_t len, int d)
{
	snprintf(out, len, "d%02d", d);
}

static void file_name(char *out, size_t len, int f)
{
	snprintf(out, len, "f%03d", f);
}

static void make_tree(const struct it_server *s)
{
	char path[PATH_MAX], dn[16], fn[16];
	char data[T_LEN];

	for (int d = 0; d < T_DIRS; d++) {
		dir_name(dn, sizeof(dn), d);
		it_path(path, "%s/%s", s->is_lower, dn);
		assert_int_equal(mkdir(path, 0755), 0);
		/* The upper has every directory too: each resolves to two copies, two fds. */
		it_path(path, "%s/%s", s->is_upper, dn);
		assert_int_equal(mkdir(path, 0755), 0);
		for (int f = 0; f < T_PER; f++) {
			file_name(fn, sizeof(fn), f);
			it_fill(data, sizeof(data), file_seed(d, f));
			it_path(path, "%s/%s/%s", s->is_lower, dn, fn);
			it_write_file(path, data, sizeof(data));
		}
	}
	it_path(path, "%s/w", s->is_upper);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int f = 0; f < T_WFILES; f++) {
		file_name(fn, sizeof(fn), f);
		it_fill(data, sizeof(data), file_seed(T_DIRS, f));
		it_path(path, "%s/w/%s", s->is_upper, fn);
		it_write_file(path, data, sizeof(data));
	}
}

/* Counts a status; true when it is NFS3_OK. */
static bool tally_status(struct tally *t, const char *what, const char *name, nfsstat3 st)
{
	t->t_calls++;
	if (st == NFS3_OK)
		return true;
	if (st == NFS3ERR_JUKEBOX) {
		t->t_jukebox++;
		return false;
	}
	if (st == NFS3ERR_IO)
		t->t_io++;
	else
		t->t_other++;
	if (!t->t_first[0])
		snprintf(t->t_first, sizeof(t->t_first), "%s %s: %s", what, name,
			 it_nfsstat_name(st));
	return false;
}

/* One RPC; an RPC failure counts as an "other" error. */
static bool rpc(struct tally *t, CLIENT *c, uint32_t proc, xdrproc_t xa, void *a,
		xdrproc_t xr, void *r, const char *what)
{
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };
	enum clnt_stat cs = clnt_call(c, proc, xa, a, xr, r, tv);

	if (cs == RPC_SUCCESS)
		return true;
	t->t_other++;
	if (!t->t_first[0])
		snprintf(t->t_first, sizeof(t->t_first), "%s: %s", what, clnt_sperrno(cs));
	return false;
}

static bool lookup(struct tally *t, CLIENT *c, const nfs_fh3 *dir, const char *name,
		   nfs_fh3 *fh)
{
	LOOKUP3args a = { .what = { .dir = *dir, .name = (char *)name } };
	LOOKUP3res r;
	bool ok;

	memset(&r, 0, sizeof(r));
	if (!rpc(t, c, NFSPROC3_LOOKUP, (xdrproc_t)xdr_LOOKUP3args, &a,
		 (xdrproc_t)xdr_LOOKUP3res, &r, "LOOKUP"))
		return false;
	ok = tally_status(t, "LOOKUP", name, r.status);
	if (ok)
		it_fh_copy(fh, &r.LOOKUP3res_u.resok.object);
	it_free((xdrproc_t)xdr_LOOKUP3res, &r);
	return ok;
}

/* READs the file and compares it with its bytes; false on an error or other bytes. */
static bool read_check(struct tally *t, CLIENT *c, const nfs_fh3 *fh, const char *name,
		       uint32_t seed)
{
	READ3args a = { .file = *fh, .offset = 0, .count = T_READ };
	READ3res r;
	char want[T_LEN];
	bool ok;

	memset(&r, 0, sizeof(r));
	if (!rpc(t, c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &a, (xdrproc_t)xdr_READ3res,
		 &r, "READ"))
		return false;
	ok = tally_status(t, "READ", name, r.status);
	if (ok) {
		READ3resok *rok = &r.READ3res_u.resok;

		it_fill(want, sizeof(want), seed);
		if (rok->data.data_len != T_LEN || memcmp(rok->data.data_val, want, T_LEN)) {
			t->t_wrong++;
			ok = false;
		}
	}
	it_free((xdrproc_t)xdr_READ3res, &r);
	return ok;
}

static bool getattr(struct tally *t, CLIENT *c, const nfs_fh3 *fh, const char *name)
{
	GETATTR3args a = { .object = *fh };
	GETATTR3res r;
	bool ok;

	memset(&r, 0, sizeof(r));
	if (!rpc(t, c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &a,
		 (xdrproc_t)xdr_GETATTR3res, &r, "GETATTR"))
		return false;
	ok = tally_status(t, "GETATTR", name, r.status);
	it_free((xdrproc_t)xdr_GETATTR3res, &r);
	return ok;
}

/* Rewrites a file with the bytes it has, so reading it back later still checks them. */
static bool rewrite(struct tally *t, CLIENT *c, const nfs_fh3 *fh, const char *name,
		    uint32_t seed)
{
	char data[T_LEN];
	WRITE3args a;
	WRITE3res r;
	bool ok;

	it_fill(data, sizeof(data), seed);
	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.file = *fh;
	a.count = T_LEN;
	a.stable = UNSTABLE;
	a.data.data_len = T_LEN;
	a.data.data_val = data;
	if (!rpc(t, c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a, (xdrproc_t)xdr_WRITE3res,
		 &r, "WRITE"))
		return false;
	ok = tally_status(t, "WRITE", name, r.status);
	it_free((xdrproc_t)xdr_WRITE3res, &r);
	return ok;
}

/* LOOKUP of d/f, then READ (and check) it: the walk every reader does for each file. */
static bool read_one(struct tally *t, CLIENT *c, int d, int f)
{
	char dn[16], fn[16];
	nfs_fh3 dfh, ffh;
	bool ok = false;

	dir_name(dn, sizeof(dn), d);
	file_name(fn, sizeof(fn), f);
	if (!lookup(t, c, &root, dn, &dfh))
		return false;
	if (lookup(t, c, &dfh, fn, &ffh)) {
		ok = read_check(t, c, &ffh, fn, file_seed(d, f)) && getattr(t, c, &ffh, fn);
		it_fh_free(&ffh);
	}
	it_fh_free(&dfh);
	return ok;
}

struct worker {
	struct tally w_t;
	CLIENT *w_c;
};

/* Reader i walks half the directories, starting at its own: together they walk all. */
static void *reader(void *arg)
{
	struct worker *w = arg;

	for (int k = 0; k < T_DIRS / 2; k++) {
		int d = (k + w->w_t.t_id * (T_DIRS / T_THREADS)) % T_DIRS;

		for (int f = 0; f < T_PER; f++)
			read_one(&w->w_t, w->w_c, d, f);
	}
	return NULL;
}

static volatile int readers_done;

/* The writer rewrites the upper files until the readers are done. */
static void *writer(void *arg)
{
	struct worker *w = arg;
	char fn[16];
	nfs_fh3 wdir, fh;

	if (!lookup(&w->w_t, w->w_c, &root, "w", &wdir))
		return NULL;
	for (int round = 0; !__atomic_load_n(&readers_done, __ATOMIC_ACQUIRE); round++) {
		int f = round % T_WFILES;

		file_name(fn, sizeof(fn), f);
		if (lookup(&w->w_t, w->w_c, &wdir, fn, &fh)) {
			rewrite(&w->w_t, w->w_c, &fh, fn, file_seed(T_DIRS, f));
			it_fh_free(&fh);
		}
	}
	it_fh_free(&wdir);
	return NULL;
}

static void tally_add(struct tally *sum, const struct tally *t)
{
	sum->t_calls += t->t_calls;
	sum->t_io += t->t_io;
	sum->t_jukebox += t->t_jukebox;
	sum->t_other += t->t_other;
	sum->t_wrong += t->t_wrong;
	if (!sum->t_first[0])
		memcpy(sum->t_first, t->t_first, sizeof(sum->t_first));
}

/* All readers and the writer at once; returns what they saw in total. */
static struct tally pressure(void)
{
	static struct worker w[T_THREADS + 1];
	pthread_t th[T_THREADS + 1];
	struct tally sum;

	memset(&sum, 0, sizeof(sum));
	memset(w, 0, sizeof(w));
	readers_done = 0;
	for (int i = 0; i <= T_THREADS; i++) {
		w[i].w_t.t_id = i;
		w[i].w_c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	}
	pthread_create(&th[T_THREADS], NULL, writer, &w[T_THREADS]);
	for (int i = 0; i < T_THREADS; i++)
		pthread_create(&th[i], NULL, reader, &w[i]);
	for (int i = 0; i < T_THREADS; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&readers_done, 1, __ATOMIC_RELEASE);
	pthread_join(th[T_THREADS], NULL);
	for (int i = 0; i <= T_THREADS; i++) {
		tally_add(&sum, &w[i].w_t);
		it_clnt_destroy(w[i].w_c);
	}
	return sum;
}

static const char *ctl_binary(void)
{
	static char path[PATH_MAX];
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/unionnfsd-ctl", build && *build ? build : "build");
	return path;
}

static void test_fd_pressure(void **state)
{
	static char out[65536];
	char *argv[] = { (char *)ctl_binary(), "--state", it_srv.is_state, "check", NULL };
	struct tally during, after;
	pid_t pid = it_srv.is_pid;
	unsigned long unread = 0;
	CLIENT *c;
	int rc;

	(void)state;
	during = pressure();
	fprintf(stderr, "# under %d descriptors: %lu calls, %lu NFS3ERR_IO, %lu NFS3ERR_JUKEBOX, "
		"%lu other errors, %lu wrong bytes%s%s\n", T_NOFILE, during.t_calls, during.t_io,
		during.t_jukebox, during.t_other, during.t_wrong, during.t_first[0] ? "; first: " : "",
		during.t_first);
	fprintf(stderr, "# server descriptors after the load: %d (limit %d)\n",
		it_server_fds(&it_srv), T_NOFILE);

	/* The load is over: everything must read back, the first time, from the same server. */
	memset(&after, 0, sizeof(after));
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	for (int d = 0; d < T_DIRS; d++)
		for (int f = 0; f < T_PER; f++)
			unread += !read_one(&after, c, d, f);
	it_clnt_destroy(c);
	fprintf(stderr, "# after the load: %lu of %d files did not read back (%lu NFS3ERR_IO, "
		"%lu NFS3ERR_JUKEBOX, %lu other, %lu wrong bytes)%s%s\n", unread, T_DIRS * T_PER,
		after.t_io, after.t_jukebox, after.t_other, after.t_wrong,
		after.t_first[0] ? "; first: " : "", after.t_first);
	rc = it_run(argv, 60, out, sizeof(out));
	fprintf(stderr, "# unionnfsd-ctl check: exit %d\n%s", rc, out);
	fprintf(stderr, "# server descriptors at the end: %d\n", it_server_fds(&it_srv));

	if (during.t_io || during.t_other || during.t_wrong)
		fail_msg("under fd pressure: %lu NFS3ERR_IO, %lu other errors, %lu wrong bytes "
			 "(first: %s)", during.t_io, during.t_other, during.t_wrong, during.t_first);
	if (unread)
		fail_msg("after the pressure, %lu of %d files did not read back (first: %s)", unread,
			 T_DIRS * T_PER, after.t_first);
	if (rc != 0 || !strstr(out, "\n0 stale, 0 dropped, 0 errors"))
		fail_msg("unionnfsd-ctl check after the pressure: exit %d: %s", rc, out);
	assert_int_equal(it_srv.is_pid, pid);
	assert_int_equal(kill(pid, 0), 0);
}

static int pressure_setup(void **state)
{
	(void)state;
	it_server_init(&it_srv, true);
	it_srv.is_nofile = T_NOFILE;
	make_tree(&it_srv);
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK) {
		it_server_dump_log(&it_srv);
		it_server_cleanup(&it_srv);
		return -1;
	}
	return 0;
}

static int pressure_teardown(void **state)
{
	it_fh_free(&root);
	return it_group_teardown(state);
}

/*
 * Leaves the running server no descriptor to make: its limit becomes the lowest number
 * it has free (a descriptor is always the lowest free number below the limit).
 */
static void server_no_fd_left(void)
{
	char path[PATH_MAX];
	int fd = 0;

	for (;; fd++) {
		it_path(path, "/proc/%d/fd/%d", (int)it_srv.is_pid, fd);
		if (access(path, F_OK) != 0 && errno == ENOENT)
			break;
	}
	it_server_nofile(&it_srv, (rlim_t)fd);
}

/*
 * A client's view (upper=) is opened again on its first call after a restart: when no
 * descriptor is left for it then, the call is to be retried (NFS3ERR_JUKEBOX), not told
 * its handles are stale, and it works once descriptors are free.
 */
static void test_view_short_of_fds(void **state)
{
	static char opts[PATH_MAX + 64];
	struct rlimit old;
	nfs_fh3 fh;
	fattr3 attr;
	CLIENT *c;
	nfsstat3 st;

	(void)state;
	it_server_init(&it_srv, true);
	snprintf(opts, sizeof(opts), "upper=%s/clients/%%a,insecure,no_root_squash",
		 it_srv.is_dir);
	it_srv.is_opts = opts;
	if (it_server_start(&it_srv) != 0)
		fail_msg("the server did not start with upper=");
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &fh), IT_MNT_OK);
	/* After a restart the view is closed until the client's next call. */
	it_server_restart(&it_srv);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	assert_int_equal(it_call(c, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL,
				 (xdrproc_t)it_xdr_void, NULL), RPC_SUCCESS);
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, NULL, &old), 0);
	server_no_fd_left();
	st = it_getattr(c, &fh, &attr);
	fprintf(stderr, "# GETATTR needing the view opened, no descriptor left: %s\n",
		it_nfsstat_name(st));
	it_assert_status(st, NFS3ERR_JUKEBOX);
	assert_true(it_server_log_contains(&it_srv, "out of file descriptors (the open files limit"));
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, &old, NULL), 0);
	it_assert_status(it_getattr(c, &fh, &attr), NFS3_OK);
	it_clnt_destroy(c);
	it_fh_free(&fh);
}

static int server_teardown(void **state)
{
	return it_group_teardown(state);
}

/*
 * READDIRPLUS of a directory: the status, and in names (when OK) the names listed, one
 * per line.
 */
static nfsstat3 readdirplus(CLIENT *c, const nfs_fh3 *dir, char *names, size_t len)
{
	READDIRPLUS3args a;
	READDIRPLUS3res r;
	nfsstat3 st;
	size_t used = 0;

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.dir = *dir;
	a.dircount = 8192;
	a.maxcount = 65536;
	assert_int_equal(it_call(c, NFSPROC3_READDIRPLUS, (xdrproc_t)xdr_READDIRPLUS3args, &a,
				 (xdrproc_t)xdr_READDIRPLUS3res, &r), RPC_SUCCESS);
	st = r.status;
	names[0] = '\0';
	if (st == NFS3_OK) {
		assert_true(r.READDIRPLUS3res_u.resok.reply.eof);
		for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry)
			used += (size_t)snprintf(names + used, len - used, "%s\n", e->name);
		assert_true(used < len);
	}
	it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	return st;
}

/*
 * READDIRPLUS looks up a lower file with several names on its own (one of its names may
 * have been linked up): when that finds no descriptor, the listing is to be retried
 * (NFS3ERR_JUKEBOX), not sent without the name.
 */
static void test_readdirplus_short_of_fds(void **state)
{
	char path[PATH_MAX], to[PATH_MAX], names[1024];
	struct rlimit old;
	nfs_fh3 dir;
	CLIENT *c;
	nfsstat3 st;

	(void)state;
	it_server_init(&it_srv, true);
	it_path(path, "%s/sub", it_srv.is_lower);
	assert_int_equal(mkdir(path, 0755), 0);
	it_path(path, "%s/sub", it_srv.is_upper);
	assert_int_equal(mkdir(path, 0755), 0);
	it_path(path, "%s/sub/one", it_srv.is_lower);
	it_write_file(path, "x", 1);
	it_path(path, "%s/sub/linked", it_srv.is_lower);
	it_write_file(path, "y", 1);
	it_path(to, "%s/sub/linked2", it_srv.is_lower);
	assert_int_equal(link(path, to), 0);
	if (it_server_start(&it_srv) != 0)
		fail_msg("the server did not start");
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &root, "sub", &dir, NULL), NFS3_OK);
	/* The listing is made and cached while descriptors are there. */
	it_assert_status(readdirplus(c, &dir, names, sizeof(names)), NFS3_OK);
	assert_non_null(strstr(names, "\nlinked\n"));
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, NULL, &old), 0);
	server_no_fd_left();
	st = readdirplus(c, &dir, names, sizeof(names));
	fprintf(stderr, "# READDIRPLUS with no descriptor left: %s, names: %s\n",
		it_nfsstat_name(st), names);
	it_assert_status(st, NFS3ERR_JUKEBOX);
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, &old, NULL), 0);
	it_assert_status(readdirplus(c, &dir, names, sizeof(names)), NFS3_OK);
	assert_non_null(strstr(names, "\nlinked\n"));
	assert_non_null(strstr(names, "\nlinked2\n"));
	it_clnt_destroy(c);
	it_fh_free(&dir);
	it_fh_free(&root);
}

/*
 * The resolve cache keeps descriptors after the calls that filled it: when they are all
 * that is left, a new client is still accepted (the cache gives them back) instead of
 * waiting in the listen queue until some call frees one.
 */
static void test_accept_short_of_fds(void **state)
{
	struct timeval tv = { T_ACCEPT_WITHIN, 0 };
	char dn[16], path[PATH_MAX];
	struct rlimit old;
	enum clnt_stat cs;
	nfs_fh3 fh;
	CLIENT *c, *late;

	(void)state;
	it_server_init(&it_srv, true);
	for (int d = 0; d < 8; d++) {
		dir_name(dn, sizeof(dn), d);
		it_path(path, "%s/%s", it_srv.is_lower, dn);
		assert_int_equal(mkdir(path, 0755), 0);
		it_path(path, "%s/%s", it_srv.is_upper, dn);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	if (it_server_start(&it_srv) != 0)
		fail_msg("the server did not start");
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	/* Each merged directory looked up leaves a cache entry holding two descriptors. */
	for (int d = 0; d < 8; d++) {
		dir_name(dn, sizeof(dn), d);
		it_assert_status(it_lookup(c, &root, dn, &fh, NULL), NFS3_OK);
		it_assert_status(it_lookup(c, &fh, "nothing", NULL, NULL), NFS3ERR_NOENT);
		it_fh_free(&fh);
	}
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, NULL, &old), 0);
	server_no_fd_left();
	late = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	cs = clnt_call(late, NFSPROC3_NULL, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void,
		       NULL, tv);
	fprintf(stderr, "# NULL on a connection made with no descriptor left: %s\n",
		clnt_sperrno(cs));
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, &old, NULL), 0);
	if (cs != RPC_SUCCESS)
		fail_msg("a new connection was not served within %d s when only the caches held "
			 "descriptors: %s", T_ACCEPT_WITHIN, clnt_sperrno(cs));
	it_clnt_destroy(late);
	it_clnt_destroy(c);
	it_fh_free(&root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fd_pressure, pressure_setup,
						pressure_teardown),
		cmocka_unit_test_teardown(test_view_short_of_fds, server_teardown),
		cmocka_unit_test_teardown(test_readdirplus_short_of_fds, server_teardown),
		cmocka_unit_test_teardown(test_accept_short_of_fds, server_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
