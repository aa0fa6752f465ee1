/*
 * A kill -9 inside the window of a RENAME or REMOVE between its branch change and the inode
 * map commit that records it (settled from its intent at start), made deterministic: strace holds the
 * server's renameat2/unlinkat/mknodat on their way back (inject=...:delay_exit), inotify on
 * the upper directory says when the branch change is done, and the server is killed then,
 * while the syscall has not returned. After a restart on the same state directory:
 *
 * - RENAME (to a new name, to another directory, over an existing file, of a lower file, of
 *   a lower directory): the handle taken before answers with its fileid, the new name has
 *   that fileid, the old name is gone, and a replaced file's handle is stale;
 * - REMOVE and RMDIR (upper file, lower file, upper directory): the handle is stale and the
 *   name gone;
 * - the same in place in a writable lower branch (several writable branches): a RENAME within
 *   it, a REMOVE of a name only it holds;
 * - `unionnfsd-ctl check` exits 0 with no stale record (the record of the moved or removed
 *   object is not "removed behind the server's back").
 *
 * Skipped with a message when strace is missing (deploy/install-deps installs it).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Long enough for the test to see the change and kill; each held syscall costs this. */
#define T_DELAY_US 1500000L
#define T_EVENT_MS 20000
#define T_OUT 16384

static struct it_server srv;
static nfs_fh3 root;
static char branches[2 * PATH_MAX + 16];
static const char *changed_branch; /* the branch a change happens in; NULL: the upper */

/* --- the server under strace --- */

static pid_t strace_pid;

/* Holds the syscalls of branch changes on every thread of the server. */
static void strace_attach(void)
{
	strace_pid = it_server_strace_delay(&srv, "renameat2,unlinkat,mknodat", T_DELAY_US);
}

static void kill_server(void)
{
	it_server_kill_traced(&srv, strace_pid);
	strace_pid = 0;
}

/* --- the change, sent from a thread: its reply never comes --- */

struct change {
	bool c_rename;
	const nfs_fh3 *c_dir, *c_todir;
	const char *c_name, *c_toname;
	enum clnt_stat c_rpc;
	int c_status;
};

static void *change_main(void *arg)
{
	struct change *ch = arg;
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);

	if (ch->c_rename) {
		RENAME3args a = { .from = { .dir = *ch->c_dir, .name = (char *)ch->c_name },
				  .to = { .dir = *ch->c_todir, .name = (char *)ch->c_toname } };
		RENAME3res r;

		memset(&r, 0, sizeof(r));
		ch->c_rpc = it_call(c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a,
				    (xdrproc_t)xdr_RENAME3res, &r);
		ch->c_status = r.status;
		if (ch->c_rpc == RPC_SUCCESS)
			it_free((xdrproc_t)xdr_RENAME3res, &r);
	} else {
		REMOVE3args a = { .object = { .dir = *ch->c_dir, .name = (char *)ch->c_name } };
		REMOVE3res r;
		uint32_t proc = ch->c_toname ? NFSPROC3_RMDIR : NFSPROC3_REMOVE;

		memset(&r, 0, sizeof(r));
		/* RMDIR3args and REMOVE3args are both a diropargs3 */
		ch->c_rpc = it_call(c, proc, (xdrproc_t)xdr_REMOVE3args, &a,
				    (xdrproc_t)xdr_REMOVE3res, &r);
		ch->c_status = r.status;
		if (ch->c_rpc == RPC_SUCCESS)
			it_free((xdrproc_t)xdr_REMOVE3res, &r);
	}
	it_clnt_destroy(c);
	return NULL;
}


/*
 * Sends the change, and kills the server once the upper directory updir (a path below
 * the upper branch) shows event mask on name: inside the held syscall, before the reply.
 */
static void change_and_kill(struct change *ch, const char *updir, uint32_t mask,
			    const char *name)
{
	char path[PATH_MAX];
	pthread_t t;
	int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

	assert_true(ino >= 0);
	it_path(path, "%s/%s", changed_branch ? changed_branch : srv.is_upper, updir);
	assert_true(inotify_add_watch(ino, path, mask) >= 0);
	strace_attach();
	assert_int_equal(pthread_create(&t, NULL, change_main, ch), 0);
	it_inotify_wait(ino, mask, name, T_EVENT_MS);
	kill_server();
	assert_int_equal(pthread_join(t, NULL), 0);
	close(ino);
	if (ch->c_rpc == RPC_SUCCESS)
		fail_msg("the change was answered (%s) before the kill: not inside the window",
			 it_nfsstat_name(ch->c_status));
	assert_int_equal(it_server_start(&srv), 0);
}

/* --- checks after the restart --- */

static const char *ctl_binary(void)
{
	static char path[PATH_MAX];
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/unionnfsd-ctl", build && *build ? build : "build");
	return path;
}

/* unionnfsd-ctl check: exit 0, nothing stale, no error. */
static void check_clean(void)
{
	static char out[T_OUT];
	char *argv[] = { (char *)ctl_binary(), "--state", srv.is_state, "check", NULL };
	int rc = it_run(argv, 60, out, sizeof(out));

	if (rc != 0 || !strstr(out, "\n0 stale, 0 dropped, 0 errors"))
		fail_msg("unionnfsd-ctl check exited %d:\n%s", rc, out);
}

static void lookup_fh(CLIENT *c, const char *path, nfs_fh3 *fh, uint64_t *fileid)
{
	fattr3 a;

	it_assert_status(it_lookup_path(c, &root, path, fh, &a), NFS3_OK);
	*fileid = a.fileid;
}

/* The kept handle answers with its fileid, which the new name has; the old name is gone. */
static void check_moved(const nfs_fh3 *fh, uint64_t fileid, const char *from, const char *to)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	fattr3 a;
	int st;

	st = it_getattr(c, fh, &a);
	if (st != NFS3_OK)
		fail_msg("%s -> %s (killed in the window): the kept handle answers %s", from, to,
			 it_nfsstat_name(st));
	assert_int_equal(a.fileid, fileid);
	it_assert_status(it_lookup_path(c, &root, to, NULL, &a), NFS3_OK);
	assert_int_equal(a.fileid, fileid);
	it_assert_status(it_lookup_path(c, &root, from, NULL, NULL), NFS3ERR_NOENT);
	it_clnt_destroy(c);
}

static void check_gone(const nfs_fh3 *fh, const char *path)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	fattr3 a;

	it_assert_status(it_getattr(c, fh, &a), NFS3ERR_STALE);
	it_assert_status(it_lookup_path(c, &root, path, NULL, NULL), NFS3ERR_NOENT);
	it_clnt_destroy(c);
}

/* --- the cases --- */

static void upper_file(const char *rel)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", srv.is_upper, rel);
	it_write_file(p, rel, strlen(rel));
}

static void lower_file(const char *rel)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", srv.is_lower, rel);
	it_write_file(p, rel, strlen(rel));
}

static void make_dir(const char *branch, const char *rel)
{
	char p[PATH_MAX];

	it_path(p, "%s/%s", branch, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* A rename of from (in directory fromdir) to to, killed once to shows up in the upper. */
static void rename_case(const char *fromdir, const char *from, const char *todir,
			const char *to, const char *replaced)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	char frompath[PATH_MAX], topath[PATH_MAX];
	nfs_fh3 fdir, tdir, fh, rfh;
	uint64_t fileid, rfileid = 0;
	struct change ch = { .c_rename = true, .c_name = from, .c_toname = to };

	it_path(frompath, "%s/%s", fromdir, from);
	it_path(topath, "%s/%s", todir, to);
	lookup_fh(c, fromdir, &fdir, &fileid);
	lookup_fh(c, todir, &tdir, &fileid);
	lookup_fh(c, frompath, &fh, &fileid);
	if (replaced)
		lookup_fh(c, topath, &rfh, &rfileid);
	it_clnt_destroy(c);
	ch.c_dir = &fdir;
	ch.c_todir = &tdir;
	change_and_kill(&ch, todir, IN_MOVED_TO, to);
	check_moved(&fh, fileid, frompath, topath);
	if (replaced) {
		c = it_nfs_clnt(&srv, IPPROTO_TCP);
		it_assert_status(it_getattr(c, &rfh, NULL), NFS3ERR_STALE);
		it_clnt_destroy(c);
		it_fh_free(&rfh);
	}
	check_clean();
	it_fh_free(&fdir);
	it_fh_free(&tdir);
	it_fh_free(&fh);
}

static void test_rename_new_name_same_dir(void **state)
{
	(void)state;
	make_dir(srv.is_upper, "r1");
	upper_file("r1/a");
	rename_case("r1", "a", "r1", "b", NULL);
}

static void test_rename_to_other_dir(void **state)
{
	(void)state;
	make_dir(srv.is_upper, "r2");
	make_dir(srv.is_upper, "r2/sub");
	upper_file("r2/a");
	rename_case("r2", "a", "r2/sub", "b", NULL);
}

static void test_rename_over_existing_file(void **state)
{
	(void)state;
	make_dir(srv.is_upper, "r3");
	upper_file("r3/a");
	upper_file("r3/b");
	rename_case("r3", "a", "r3", "b", "b");
}

static void test_rename_lower_file(void **state)
{
	(void)state;
	make_dir(srv.is_lower, "r4");
	make_dir(srv.is_upper, "r4"); /* a merged directory: inotify watches its upper copy */
	lower_file("r4/a");
	rename_case("r4", "a", "r4", "b", NULL);
}

static void test_rename_lower_dir(void **state)
{
	(void)state;
	make_dir(srv.is_lower, "r5");
	make_dir(srv.is_upper, "r5"); /* a merged directory: inotify watches its upper copy */
	make_dir(srv.is_lower, "r5/d");
	lower_file("r5/d/f");
	rename_case("r5", "d", "r5", "e", NULL);
	{
		CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);

		/* its lower contents follow it */
		it_assert_status(it_lookup_path(c, &root, "r5/e/f", NULL, NULL), NFS3_OK);
		it_clnt_destroy(c);
	}
}

/* A remove of name in dir, killed once mask shows name changing in the upper. */
static void remove_case(const char *dir, const char *name, bool rmdir, uint32_t mask)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	char path[PATH_MAX];
	nfs_fh3 d, fh;
	uint64_t fileid;
	struct change ch = { .c_name = name, .c_toname = rmdir ? name : NULL };

	it_path(path, "%s/%s", dir, name);
	lookup_fh(c, dir, &d, &fileid);
	lookup_fh(c, path, &fh, &fileid);
	it_clnt_destroy(c);
	ch.c_dir = &d;
	change_and_kill(&ch, dir, mask, name);
	check_gone(&fh, path);
	check_clean();
	it_fh_free(&d);
	it_fh_free(&fh);
}

static void test_remove_upper_file(void **state)
{
	(void)state;
	make_dir(srv.is_upper, "m1");
	upper_file("m1/a");
	remove_case("m1", "a", false, IN_DELETE | IN_MOVED_FROM); /* set aside first */
}

static void test_remove_lower_file(void **state)
{
	(void)state;
	make_dir(srv.is_lower, "m2");
	make_dir(srv.is_upper, "m2"); /* a merged directory: inotify watches its upper copy */
	lower_file("m2/a");
	remove_case("m2", "a", false, IN_CREATE);
}

static void test_rmdir_upper(void **state)
{
	(void)state;
	make_dir(srv.is_upper, "m3");
	make_dir(srv.is_upper, "m3/d");
	remove_case("m3", "d", true, IN_DELETE);
}

static void test_rename_in_writable_lower(void **state)
{
	(void)state;
	make_dir(srv.is_lower, "w1");
	lower_file("w1/a");
	rename_case("w1", "a", "w1", "b", NULL);
}

static void test_remove_in_writable_lower(void **state)
{
	(void)state;
	make_dir(srv.is_lower, "w2");
	lower_file("w2/a");
	remove_case("w2", "a", false, IN_DELETE | IN_MOVED_FROM); /* set aside first */
}

static int start(void)
{
	if (it_server_start(&srv) != 0)
		return -1;
	return it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) == IT_MNT_OK ? 0 : -1;
}

/* A fresh server for each case: check must be clean of what other cases did. */
static int setup(void **state)
{
	(void)state;
	it_server_init(&srv, true);
	changed_branch = NULL;
	return start();
}

/* Both branches writable: the changes of the lower's names happen in the lower. */
static int setup_rw(void **state)
{
	(void)state;
	it_server_init(&srv, true);
	snprintf(branches, sizeof(branches), "%s=rw:%s=rw", srv.is_upper, srv.is_lower);
	srv.is_branches = branches;
	changed_branch = srv.is_lower;
	return start();
}

static int teardown(void **state)
{
	(void)state;
	it_fh_free(&root);
	return it_server_finish(&srv);
}

int main(void)
{
	if (system("command -v strace >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP: strace is not installed (deploy/install-deps installs it); "
				"these tests hold the server's syscalls with it\n");
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rename_new_name_same_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_to_other_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_over_existing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_lower_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_lower_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_upper_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_lower_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rmdir_upper, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_in_writable_lower, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(test_remove_in_writable_lower, setup_rw, teardown),
	};

	return cmocka_run_group_tests_name("inflight", tests, NULL, NULL);
}
