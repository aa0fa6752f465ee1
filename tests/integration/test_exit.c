/*
 * Start-up refusals and their exit codes: a bad flag, a missing branch, a state directory
 * another instance holds, a branch stack the inode map was not built for. Each must exit 2
 * with a message naming the cause, and change nothing on disk. Also SIGINT/SIGTERM exit 0.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

static char out[16384];

/* Runs the server with the given arguments after the binary name; returns its exit status. */
static int run_server(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	const char *a;

	argv[argc++] = (char *)it_server_binary();
	va_start(ap, first);
	for (a = first; a && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return it_run(argv, 30, out, sizeof(out));
}

static void expect_exit2(int rc, const char *what, const char *must_mention)
{
	if (rc != 2)
		fail_msg("%s: exit status %d, want 2; output:\n%s", what, rc, out);
	if (must_mention && !strstr(out, must_mention))
		fail_msg("%s: the message does not name %s; output:\n%s", what, must_mention, out);
	if (strlen(out) < 10)
		fail_msg("%s: no useful message (\"%s\")", what, out);
}

/* A cheap fingerprint of a directory tree: names, sizes, mtimes and contents. */
static unsigned long long tree_fingerprint(const char *dir)
{
	unsigned long long h = 1469598103934665603ULL;
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);

	if (n < 0)
		return 0;
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX];
		struct stat st;
		const char *name = ents[i]->d_name;

		size_t nl = strlen(name);
		/* lock files are touched by every attempt to open; they hold no data */
		bool lockfile = !strcmp(name, "lock") || (nl > 5 && !strcmp(name + nl - 5, "-lock")) ||
				!strcmp(name, "lock.mdb");

		if (strcmp(name, ".") && strcmp(name, "..") && !lockfile) {
			it_path(p, "%s/%s", dir, name);
			for (const char *c = name; *c; c++)
				h = (h ^ (unsigned char)*c) * 1099511628211ULL;
			if (lstat(p, &st) == 0) {
				h = (h ^ (unsigned long long)st.st_size) * 1099511628211ULL;
				h = (h ^ (unsigned long long)st.st_mtim.tv_sec) * 1099511628211ULL;
				h = (h ^ (unsigned long long)st.st_mtim.tv_nsec) * 1099511628211ULL;
				if (S_ISDIR(st.st_mode)) {
					h ^= tree_fingerprint(p);
				} else if (S_ISREG(st.st_mode)) {
					size_t len;
					char *data = it_read_file(p, &len);

					for (size_t k = 0; data && k < len; k++)
						h = (h ^ (unsigned char)data[k]) * 1099511628211ULL;
					free(data);
				}
			}
		}
		free(ents[i]);
	}
	free(ents);
	return h;
}

static struct it_server srv;

static int setup(void **state)
{
	(void)state;
	it_server_init(&srv, false);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	it_server_cleanup(&srv);
	return 0;
}

static void test_bad_flags(void **state)
{
	char exp[PATH_MAX + 16];

	(void)state;
	snprintf(exp, sizeof(exp), "/union=%s", srv.is_upper);
	expect_exit2(run_server("-f", "--bogus", "--state", srv.is_state, "-e", exp, NULL),
		     "unknown flag", "--bogus");
	expect_exit2(run_server("-f", "--port", "notanumber", "--state", srv.is_state, "-e", exp,
				NULL),
		     "bad port", "notanumber");
	expect_exit2(run_server("-f", "--port", "70000", "--state", srv.is_state, "-e", exp, NULL),
		     "port out of range", NULL);
	expect_exit2(run_server("-f", "--portmap", "sometimes", "--state", srv.is_state, "-e", exp,
				NULL),
		     "bad portmap mode", "sometimes");
	expect_exit2(run_server("-f", "--state", srv.is_state, "-e", exp, "-o", "rw,bogusword", NULL),
		     "bad export option", "bogusword");
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, NULL),
		     "no export", NULL);
	expect_exit2(run_server("-f", "--state", srv.is_state, "-e", "/union=relative/dir", NULL),
		     "relative branch", "relative/dir");
	assert_false(it_exists(srv.is_state));
}

static void test_help_exits_zero(void **state)
{
	int rc;

	(void)state;
	rc = run_server("--help", NULL);
	if (rc != 0)
		fail_msg("--help: exit status %d, want 0; output:\n%s", rc, out);
	assert_non_null(strstr(out, "--port"));
	assert_non_null(strstr(out, "--mount-port"));
	assert_non_null(strstr(out, "--portmap"));
	/* all of it, to its last line (it once stopped at 4095 bytes) */
	assert_non_null(strstr(out, "--hosts FILE"));
	assert_non_null(strstr(out, "  -h, --help          show this text\n"));
}

static void test_missing_branch(void **state)
{
	char exp[2 * PATH_MAX + 16], file[PATH_MAX];

	(void)state;
	snprintf(exp, sizeof(exp), "/union=%s/nonexistent", srv.is_dir);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, NULL),
		     "missing upper branch", "nonexistent");
	assert_false(it_exists(srv.is_state));
	snprintf(exp, sizeof(exp), "/union=%s:%s/no-lower", srv.is_upper, srv.is_dir);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, NULL),
		     "missing lower branch", "no-lower");
	assert_false(it_exists(srv.is_state));
	it_path(file, "%s/a-file", srv.is_dir);
	it_write_file(file, "x", 1);
	snprintf(exp, sizeof(exp), "/union=%s", file);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, NULL),
		     "branch is a file", "a-file");
	assert_false(it_exists(srv.is_state));
}

static void test_second_instance_refused(void **state)
{
	char exp[PATH_MAX + 16];
	unsigned long long before;

	(void)state;
	assert_int_equal(it_server_start(&srv), 0);
	before = tree_fingerprint(srv.is_state);
	snprintf(exp, sizeof(exp), "/union=%s", srv.is_upper);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, "-o", "no_root_squash,insecure",
				NULL),
		     "second instance", srv.is_state);
	assert_true(tree_fingerprint(srv.is_state) == before);
	/* the first instance is unharmed */
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
	assert_int_equal(it_server_stop(&srv), 0);
}

static void test_changed_branch_stack(void **state)
{
	char exp[2 * PATH_MAX + 16], other[PATH_MAX];
	unsigned long long before;

	(void)state;
	/* the state directory was bound to /union=UPPER by the previous test */
	assert_true(it_exists(srv.is_state));
	before = tree_fingerprint(srv.is_state);
	it_path(other, "%s/other", srv.is_dir);
	mkdir(other, 0755);
	snprintf(exp, sizeof(exp), "/union=%s", other);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, NULL),
		     "another upper", other);
	snprintf(exp, sizeof(exp), "/union=%s:%s", srv.is_upper, other);
	expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
				"--state", srv.is_state, "-e", exp, NULL),
		     "an added lower", NULL);
	/* the same path, but another directory behind it */
	{
		char moved[PATH_MAX];

		it_path(moved, "%s/upper-was", srv.is_dir);
		assert_int_equal(rename(srv.is_upper, moved), 0);
		assert_int_equal(mkdir(srv.is_upper, 0755), 0);
		snprintf(exp, sizeof(exp), "/union=%s", srv.is_upper);
		expect_exit2(run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off",
					"--state", srv.is_state, "-e", exp, NULL),
			     "a replaced upper directory", NULL);
		assert_int_equal(rmdir(srv.is_upper), 0);
		assert_int_equal(rename(moved, srv.is_upper), 0);
	}
	assert_true(tree_fingerprint(srv.is_state) == before);
	/* and the original stack still starts */
	assert_int_equal(it_server_start(&srv), 0);
	assert_int_equal(it_server_stop(&srv), 0);
}

static void test_sigint_and_sigterm_exit_zero(void **state)
{
	(void)state;
	assert_int_equal(it_server_start(&srv), 0);
	assert_int_equal(it_server_stop(&srv), 0);
	assert_int_equal(it_server_start(&srv), 0);
	/* SIGINT with a client connected */
	{
		CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
		int rc;

		kill(srv.is_pid, SIGINT);
		rc = wait_exit(srv.is_pid, 20000);
		it_clnt_destroy(c);
		if (rc < 0)
			fail_msg("the server did not exit within 20 s of SIGINT");
		srv.is_pid = 0;
		if (rc != 0)
			fail_msg("SIGINT: exit status %d", rc);
	}
}

static void test_busy_port(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	char exp[PATH_MAX + 16], port[16];
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc;

	(void)state;
	/* hold a port on all addresses, the way another NFS server would */
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	snprintf(port, sizeof(port), "%d", ntohs(sin.sin_port));
	snprintf(exp, sizeof(exp), "/union=%s", srv.is_upper);
	rc = run_server("-f", "--port", port, "--mount-port", "0", "--portmap", "off", "--state",
			srv.is_state, "-e", exp, NULL);
	close(fd);
	if (rc == 0 || rc == -1)
		fail_msg("a busy NFS port: exit status %d; output:\n%s", rc, out);
	if (!strstr(out, port))
		fail_msg("the message does not name port %s:\n%s", port, out);
}

static void write_config(const char *path, const char *text)
{
	it_write_file(path, text, strlen(text));
}

static void test_config_file(void **state)
{
	struct it_server c;
	char conf[PATH_MAX], text[4 * PATH_MAX];

	(void)state;
	it_server_init(&c, false);
	it_path(conf, "%s/unionnfsd.conf", c.is_dir);
	snprintf(text, sizeof(text),
		 "# a comment, then settings\n"
		 "port 0\n"
		 "mount-port 0\n"
		 "portmap off\n"
		 "\n"
		 "state %s\n"
		 "export /union %s no_root_squash,insecure\n",
		 c.is_state, c.is_upper);
	write_config(conf, text);
	c.is_config = conf;
	if (it_server_start(&c) != 0) {
		it_server_cleanup(&c);
		fail_msg("the server did not start from a config file");
	}
	assert_int_equal(it_mnt(&c, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
	assert_int_equal(it_server_stop(&c), 0);
	it_server_cleanup(&c);
}

static void test_config_file_errors(void **state)
{
	char conf[PATH_MAX], text[4 * PATH_MAX], where[PATH_MAX + 8];

	(void)state;
	it_path(conf, "%s/bad.conf", srv.is_dir);
	snprintf(text, sizeof(text), "port 0\n# fine so far\nno-such-directive 1\nstate %s\n",
		 srv.is_state);
	write_config(conf, text);
	snprintf(where, sizeof(where), "%s:3", conf);
	expect_exit2(run_server("-f", "-c", conf, NULL), "unknown directive", where);
	snprintf(text, sizeof(text), "port 0\nport\n");
	write_config(conf, text);
	snprintf(where, sizeof(where), "%s:2", conf);
	expect_exit2(run_server("-f", "-c", conf, NULL), "directive without a value", where);
	snprintf(text, sizeof(text), "export /union %s bogusopt\n", srv.is_upper);
	write_config(conf, text);
	snprintf(where, sizeof(where), "%s:1", conf);
	expect_exit2(run_server("-f", "-c", conf, NULL), "bad export option", where);
	it_path(where, "%s/missing.conf", srv.is_dir);
	expect_exit2(run_server("-f", "-c", where, NULL), "missing config file", "missing.conf");
}

/* The pid of a running unionnfsd whose command line mentions text, or 0. */
static pid_t find_server(const char *text)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	while (d && (e = readdir(d)) != NULL) {
		char p[PATH_MAX], *cmd;
		size_t len;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		it_path(p, "/proc/%s/cmdline", e->d_name);
		cmd = it_read_file(p, &len);
		if (!cmd)
			continue;
		for (size_t i = 0; i + 1 < len; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		if (strstr(cmd, "unionnfsd") && strstr(cmd, text))
			found = atoi(e->d_name);
		free(cmd);
	}
	if (d)
		closedir(d);
	return found;
}

/* Whether process *(pid_t *)arg is gone; a zombie counts: our test runner may not be its reaper. */
static bool process_gone(void *arg)
{
	pid_t pid = *(pid_t *)arg;
	char p[64], *st;
	bool zombie;

	if (kill(pid, 0) != 0)
		return true;
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	st = it_read_file(p, NULL);
	zombie = st && strstr(st, ") Z ");
	free(st);
	return zombie;
}

static pid_t daemon_pid;

static int daemon_cleanup(void **state)
{
	(void)state;
	if (daemon_pid > 0)
		kill(daemon_pid, SIGKILL);
	daemon_pid = 0;
	return 0;
}

/*
 * The state directory holds the handle key: one its group or others may read gets a
 * warning at start-up naming the fix; the 0700 one the server makes gets none.
 */
static void test_state_dir_mode_warning(void **state)
{
	struct it_server open_dir, own_dir;
	char want[2 * PATH_MAX + 256];

	(void)state;
	it_server_init(&open_dir, false);
	assert_int_equal(mkdir(open_dir.is_state, 0755), 0);
	if (it_server_start(&open_dir) != 0) {
		it_server_cleanup(&open_dir);
		fail_msg("the server did not start with a state directory of mode 0755");
	}
	snprintf(want, sizeof(want), "state directory %s is accessible to its group or others "
		 "(mode 0755); it holds the file handle key, with which handles can be forged: "
		 "chmod 700 %s", open_dir.is_state, open_dir.is_state);
	if (!it_server_log_contains(&open_dir, want)) {
		it_server_dump_log(&open_dir);
		fail_msg("no warning about the state directory's mode 0755, want: %s", want);
	}
	assert_int_equal(it_server_finish(&open_dir), 0);

	it_server_init(&own_dir, false);
	if (it_server_start(&own_dir) != 0) {
		it_server_cleanup(&own_dir);
		fail_msg("the server did not start");
	}
	assert_false(it_server_log_contains(&own_dir, "is accessible to its group or others"));
	assert_int_equal(it_server_finish(&own_dir), 0);
}

static void test_daemon_mode(void **state)
{
	char exp[PATH_MAX + 16], state_dir[PATH_MAX];
	struct it_server d;
	int rc;

	(void)state;
	it_server_init(&d, false);
	it_path(state_dir, "%s/daemon-state", srv.is_dir);
	snprintf(exp, sizeof(exp), "/union=%s", d.is_upper);
	/* the parent returns once the daemon serves, and the daemon keeps no terminal fds */
	rc = run_server("--port", "0", "--mount-port", "0", "--portmap", "off", "--state",
			state_dir, "-e", exp, "-o", "no_root_squash,insecure", NULL);
	daemon_pid = find_server(state_dir);
	if (rc != 0)
		fail_msg("starting as a daemon: exit status %d (-1: the parent did not return or the "
			 "daemon kept its output open); output:\n%s", rc, out);
	if (daemon_pid <= 0)
		fail_msg("no daemon process found after a successful start");
	{
		const char *np = strstr(out, "nfs port "), *mp = strstr(out, "mount port ");

		if (!np || !mp)
			fail_msg("the daemon's parent did not report the ports:\n%s", out);
		d.is_nfs_port = atoi(np + 9);
		d.is_mount_port = atoi(mp + 11);
	}
	assert_int_equal(it_mnt(&d, IPPROTO_TCP, IT_EXPORT, NULL), IT_MNT_OK);
	/* a second instance names the daemon's pid */
	rc = run_server("-f", "--port", "0", "--mount-port", "0", "--portmap", "off", "--state",
			state_dir, "-e", exp, NULL);
	assert_int_equal(rc, 2);
	{
		char pidtext[32];

		snprintf(pidtext, sizeof(pidtext), "%d", (int)daemon_pid);
		if (!strstr(out, pidtext))
			fail_msg("the refusal does not name the running daemon (pid %s):\n%s", pidtext,
				 out);
	}
	kill(daemon_pid, SIGTERM);
	wait_until(process_gone, &daemon_pid, 20000);
	daemon_pid = find_server(state_dir);
	assert_int_equal(daemon_pid, 0);
	/* a daemon's start-up failure still reaches the terminal with status 2 */
	snprintf(exp, sizeof(exp), "/union=%s/absent", d.is_dir);
	rc = run_server("--port", "0", "--mount-port", "0", "--portmap", "off", "--state",
			state_dir, "-e", exp, NULL);
	daemon_pid = find_server(state_dir);
	expect_exit2(rc, "daemon with a missing branch", "absent");
	it_server_cleanup(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_help_exits_zero),
		cmocka_unit_test(test_missing_branch),
		cmocka_unit_test(test_second_instance_refused),
		cmocka_unit_test(test_changed_branch_stack),
		cmocka_unit_test(test_sigint_and_sigterm_exit_zero),
		cmocka_unit_test(test_busy_port),
		cmocka_unit_test(test_config_file),
		cmocka_unit_test(test_config_file_errors),
		cmocka_unit_test(test_state_dir_mode_warning),
		cmocka_unit_test_teardown(test_daemon_mode, daemon_cleanup),
	};

	return cmocka_run_group_tests_name("exit codes", tests, setup, teardown);
}
