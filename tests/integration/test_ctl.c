/*
 * The control socket and build/unionnfsd-ctl against a real server: status, clients and
 * stats after a libnfs mount and some calls (a copy-up, a whiteout), reload, reset before
 * per-client uppers exist, check after a lower file vanished, hostile input on the socket,
 * the error without a server, a stale socket file replaced at start, the --metrics
 * Prometheus endpoint, and `locks` with the lock figures of `stats` and /metrics after
 * locks taken through raw NLM calls.
 */
#include "common.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nlm.h"

#define T_OUT 65536
#define T_IDLE_CONNS 20          /* more than the server's CONTROL_MAX_CONNS */
#define T_HTTP_IDLE 24           /* more than the server's CONTROL_HTTP_MAX_CONNS */
#define T_HTTP_CLOSED_WITHIN 4.0 /* seconds: its CONTROL_HTTP_TIMEOUT and some slack */
#define T_NFS_CONNS 100
#define T_ACCEPTED_WITHIN_MS 5000
#define T_STATUS_WITHIN 5.0      /* seconds for `status` to answer */
#define T_EXIT_STALE 3           /* unionnfsd-ctl check: stale records left in the map */
#define T_LONG_FILES 1000        /* records of the long check, besides the others */
#define T_LONG_PACE_US 3000      /* per record: the check takes 3 s and more */
#define T_LONG_TIMEOUT "1"       /* seconds unionnfsd-ctl waits for a word */

static int setup(void **state)
{
	return it_group_setup_union(state);
}

/* Runs unionnfsd-ctl --state STATE args...; returns its exit status, output in out. */
static int ctl(const char *state, char *out, const char *a1, const char *a2)
{
	char *argv[] = { (char *)it_ctl_binary(), "--state", (char *)state, (char *)a1, (char *)a2, NULL };

	return it_run(argv, 30, out, T_OUT);
}

static void sock_path(struct sockaddr_un *sun)
{
	char path[PATH_MAX];

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	it_path(path, "%s/control.sock", it_srv.is_state);
	assert_true(strlen(path) < sizeof(sun->sun_path));
	memcpy(sun->sun_path, path, strlen(path) + 1);
}

static int sock_connect(void)
{
	struct sockaddr_un sun;
	struct timeval tv = { .tv_sec = 20 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sock_path(&sun);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Sends raw bytes and reads the whole reply (the server closes after it). */
static void sock_exchange(const void *req, size_t len, char *out, size_t outlen)
{
	int fd = sock_connect();
	size_t have = 0;
	ssize_t n;

	assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
	shutdown(fd, SHUT_WR);
	while (have < outlen - 1 && (n = recv(fd, out + have, outlen - 1 - have, 0)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	close(fd);
}

static void test_status_clients_stats(void **state)
{
	static char out[T_OUT];
	char path[PATH_MAX], want[PATH_MAX + 16];
	struct nfs_context *nfs;
	struct nfs_stat_64 st;
	struct nfsfh *fh;

	(void)state;
	it_path(path, "%s/base-file", it_srv.is_lower);
	it_write_file(path, "base\n", 5);
	it_path(path, "%s/doomed", it_srv.is_lower);
	it_write_file(path, "gone\n", 5);

	nfs = it_nfs_mount(&it_srv);
	assert_int_equal(nfs_stat64(nfs, "/base-file", &st), 0);
	/* Writing a lower file copies it up; removing one leaves a whiteout. */
	assert_int_equal(nfs_open(nfs, "/base-file", O_WRONLY, &fh), 0);
	assert_int_equal(nfs_write(nfs, fh, 3, "new"), 3);
	assert_int_equal(nfs_close(nfs, fh), 0);
	assert_int_equal(nfs_unlink(nfs, "/doomed"), 0);
	assert_int_not_equal(nfs_stat64(nfs, "/no-such-file", &st), 0);

	assert_int_equal(ctl(it_srv.is_state, out, "status", NULL), 0);
	assert_non_null(strstr(out, "unionnfsd "));
	assert_non_null(strstr(out, "export " IT_EXPORT " (2 branches)"));
	snprintf(want, sizeof(want), "  rw %s: ", it_srv.is_upper);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "  ro %s: ", it_srv.is_lower);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "mounts 1 "));

	assert_int_equal(ctl(it_srv.is_state, out, "clients", NULL), 0);
	assert_non_null(strstr(out, "127.0.0.1"));
	assert_non_null(strstr(out, IT_EXPORT));

	assert_int_equal(ctl(it_srv.is_state, out, "stats", NULL), 0);
	assert_non_null(strstr(out, "p99_us"));
	assert_non_null(strstr(out, "LOOKUP"));
	assert_non_null(strstr(out, "WRITE"));
	assert_non_null(strstr(out, "MNT"));
	assert_non_null(strstr(out, "copy-ups 1, whiteouts made 1"));

	it_nfs_unmount(nfs);
	/* Whether or not the client said UMNT, it stays in the list of clients seen. */
	assert_int_equal(ctl(it_srv.is_state, out, "clients", NULL), 0);
	assert_non_null(strstr(out, "127.0.0.1"));
}

/* A branch's line in status output out: "  ROLE PATH: ..." */
struct branch_line {
	double bl_avail, bl_total;
	char bl_avail_unit[8], bl_total_unit[8];
	unsigned long long bl_objects;
};

static void branch_line(const char *out, const char *role, const char *path,
			struct branch_line *bl)
{
	char want[PATH_MAX + 16], age[32];
	const char *p;

	snprintf(want, sizeof(want), "\n  %s %s: ", role, path);
	p = strstr(out, want);
	if (!p)
		fail_msg("no line \"%s\" in status:\n%s", want + 1, out);
	p += strlen(want);
	if (sscanf(p, "%lf %7s free of %lf %7s (measured %31[^)]), %llu object", &bl->bl_avail,
		   bl->bl_avail_unit, &bl->bl_total, bl->bl_total_unit, age, &bl->bl_objects) != 6)
		fail_msg("branch line of %s: %.200s", path, p);
	if (strcmp(bl->bl_total_unit, "B") && strcmp(bl->bl_total_unit, "KiB") &&
	    strcmp(bl->bl_total_unit, "MiB") && strcmp(bl->bl_total_unit, "GiB") &&
	    strcmp(bl->bl_total_unit, "TiB"))
		fail_msg("branch line of %s: unit %s", path, bl->bl_total_unit);
	if (bl->bl_total <= 0)
		fail_msg("branch line of %s: total %.1f", path, bl->bl_total);
}

/* Each branch's objects in `status` of server s: want[0..3) for a, b and c. */
static void status_objects(struct it_server *s, char *const *dirs, const unsigned long long *want)
{
	static const char *const roles[] = { "rw", "rw", "ro" };
	static char out[T_OUT];
	struct branch_line bl;

	assert_int_equal(ctl(s->is_state, out, "status", NULL), 0);
	assert_non_null(strstr(out, "export /multi (3 branches)\n"));
	for (int i = 0; i < 3; i++) {
		branch_line(out, roles[i], dirs[i], &bl);
		if (bl.bl_objects != want[i])
			fail_msg("branch %s: %llu objects, want %llu:\n%s", dirs[i], bl.bl_objects,
				 want[i], out);
	}
}

/*
 * status over two writable branches and a read-only one: each branch's role, its space and
 * how many objects the map has there, from names made through NFS (create=tdp: into the
 * first branch) and names put in by hand and looked up; the same after a restart; one
 * fewer after check --repair dropped the record of a name removed by hand.
 */
static void test_status_branches(void **state)
{
	static const unsigned long long made[] = { 3, 1, 1 }, repaired[] = { 3, 0, 1 };
	static char out[T_OUT];
	static struct it_server srv;
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], spec[3 * PATH_MAX + 32], url[256];
	char path[PATH_MAX];
	char *dirs[] = { a, b, c };
	struct nfs_context *nfs;
	struct nfs_stat_64 st;
	struct nfsfh *fh;

	(void)state;
	it_server_init(&srv, true);
	it_path(a, "%s/a", srv.is_dir);
	it_path(b, "%s/b", srv.is_dir);
	it_path(c, "%s/c", srv.is_dir);
	for (int i = 0; i < 3; i++)
		assert_int_equal(mkdir(dirs[i], 0755), 0);
	snprintf(spec, sizeof(spec), "/multi=%s=rw:%s=rw:%s=ro", a, b, c);
	srv.is_extra[0] = "-e";
	srv.is_extra[1] = spec;
	srv.is_extra[2] = "-o";
	srv.is_extra[3] = "no_root_squash,insecure";
	srv.is_extra[4] = NULL;
	assert_int_equal(it_server_start(&srv), 0);
	it_path(path, "%s/handmade", b);
	it_write_file(path, "b\n", 2);
	it_path(path, "%s/base", c);
	it_write_file(path, "c\n", 2);

	snprintf(url, sizeof(url), "nfs://127.0.0.1/multi?nfsport=%d&mountport=%d",
		 srv.is_nfs_port, srv.is_mount_port);
	nfs = it_nfs_mount_url(url);
	assert_non_null(nfs);
	assert_int_equal(nfs_creat(nfs, "/one", 0644, &fh), 0);
	assert_int_equal(nfs_close(nfs, fh), 0);
	assert_int_equal(nfs_creat(nfs, "/two", 0644, &fh), 0);
	assert_int_equal(nfs_close(nfs, fh), 0);
	assert_int_equal(nfs_mkdir(nfs, "/dir"), 0);
	assert_int_equal(nfs_unlink(nfs, "/two"), 0);
	assert_int_equal(nfs_stat64(nfs, "/handmade", &st), 0);
	assert_int_equal(nfs_stat64(nfs, "/base", &st), 0);
	it_nfs_unmount(nfs);
	it_path(path, "%s/one", a);
	assert_true(it_exists(path));

	/* a: the root, one and dir; b: handmade; c: base. */
	status_objects(&srv, dirs, made);
	it_server_restart(&srv);
	status_objects(&srv, dirs, made);

	it_path(path, "%s/handmade", b);
	assert_int_equal(unlink(path), 0);
	ctl(srv.is_state, out, "check", "--repair");
	if (!strstr(out, "1 stale, 1 dropped, 0 errors"))
		fail_msg("check --repair:\n%s", out);
	status_objects(&srv, dirs, repaired);
	assert_int_equal(it_server_finish(&srv), 0);
}

static void test_reload_and_reset(void **state)
{
	static char out[T_OUT];

	(void)state;
	assert_int_equal(ctl(it_srv.is_state, out, "reload", NULL), 0);
	assert_non_null(strstr(out, "reload started"));
	assert_true(it_server_log_wait(&it_srv, "configuration reloaded", 5000));

	assert_int_equal(ctl(it_srv.is_state, out, "reset", "192.0.2.1"), 1);
	assert_non_null(strstr(out, "error: reset: no export has per-client upper branches"));
	assert_int_equal(ctl(it_srv.is_state, out, "reset", NULL), 1);
	assert_non_null(strstr(out, "usage: reset CLIENT"));
	assert_int_equal(ctl(it_srv.is_state, out, "frobnicate", NULL), 1);
	assert_non_null(strstr(out, "unknown command"));
	assert_int_equal(ctl(it_srv.is_state, out, "help", NULL), 0);
	assert_non_null(strstr(out, "clients"));
}

static void test_garbage(void **state)
{
	static char out[T_OUT];
	static char big[8192];
	int fds[T_IDLE_CONNS];
	struct nfs_context *nfs;
	struct nfs_stat_64 st;

	(void)state;
	memset(big, 'x', sizeof(big));
	sock_exchange(big, sizeof(big), out, sizeof(out));
	assert_non_null(strstr(out, "error: the request line is too long"));
	sock_exchange("st\0atus\n", 8, out, sizeof(out));
	assert_non_null(strstr(out, "error: "));
	sock_exchange("\x01\xff\xfe\n", 4, out, sizeof(out));
	assert_non_null(strstr(out, "error: the request has control or non-ASCII bytes"));
	sock_exchange("\n", 1, out, sizeof(out));
	assert_non_null(strstr(out, "error: empty request"));
	/* No newline, then EOF: still one request. */
	sock_exchange("status", 6, out, sizeof(out));
	assert_non_null(strstr(out, "export " IT_EXPORT));
	/* Connections that say nothing: past the limit they are closed; the loop goes on. */
	for (int i = 0; i < T_IDLE_CONNS; i++)
		fds[i] = sock_connect();
	nfs = it_nfs_mount(&it_srv);
	assert_int_equal(nfs_stat64(nfs, "/", &st), 0);
	it_nfs_unmount(nfs);
	for (int i = 0; i < T_IDLE_CONNS; i++)
		close(fds[i]);
	assert_int_equal(ctl(it_srv.is_state, out, "status", NULL), 0);
}

/* check: a lower file removed behind the server's back is reported, nothing else. */
static void test_check(void **state)
{
	static char out[T_OUT];
	char path[PATH_MAX];
	struct nfs_context *nfs;
	struct nfs_stat_64 st;

	(void)state;
	it_path(path, "%s/check-keep", it_srv.is_lower);
	it_write_file(path, "k\n", 2);
	it_path(path, "%s/check-gone", it_srv.is_lower);
	it_write_file(path, "g\n", 2);
	nfs = it_nfs_mount(&it_srv);
	assert_int_equal(nfs_stat64(nfs, "/check-keep", &st), 0);
	assert_int_equal(nfs_stat64(nfs, "/check-gone", &st), 0);
	it_nfs_unmount(nfs);
	assert_int_equal(unlink(path), 0);

	/* Stale records left in the map: exit status 3, for scripts. */
	assert_int_equal(ctl(it_srv.is_state, out, "check", NULL), T_EXIT_STALE);
	assert_non_null(strstr(out, "export " IT_EXPORT ":"));
	assert_non_null(strstr(out, " resolve, 1 stale, 0 errors"));
	assert_non_null(strstr(out, "stale: no branch has the object any more"));
	assert_int_equal(ctl(it_srv.is_state, out, "check", "now"), 1);
	/* --repair drops them: the map is clean again, so 0, and so is the next check. */
	assert_int_equal(ctl(it_srv.is_state, out, "check", "--repair"), 0);
	assert_non_null(strstr(out, "1 stale, 1 dropped, 0 errors"));
	assert_int_equal(ctl(it_srv.is_state, out, "check", NULL), 0);
	assert_non_null(strstr(out, "0 stale, 0 dropped, 0 errors"));
}

/* Lists a directory through a client, so that the server records every name in it. */
static void list_dir(const char *dir, int want)
{
	struct nfs_context *nfs = it_nfs_mount(&it_srv);
	struct nfsdirent *de;
	struct nfsdir *d;
	int n = 0;

	assert_int_equal(nfs_opendir(nfs, dir, &d), 0);
	while ((de = nfs_readdir(nfs, d)) != NULL)
		n += de->name[0] != '.';
	nfs_closedir(nfs, d);
	it_nfs_unmount(nfs);
	assert_int_equal(n, want);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `check` over the raw socket: the number of progress lines before its reply, into out. */
static int check_progress_lines(char *out, size_t outlen)
{
	int lines = 0;

	sock_exchange("check\n", 6, out, outlen);
	for (const char *p = out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, "progress: ", 10) != 0)
			break;
		lines++;
	}
	return lines;
}

/*
 * A check that takes longer than unionnfsd-ctl's timeout: progress lines (records done /
 * total) come before the reply while it runs, and the tool, given a timeout well below the
 * check's length, waits for the end because they keep coming. A server that says nothing
 * (stopped) still times out, with the cause and the fix. The server resolves one record at
 * a time (--workers 1) and pauses after each (--check-pace, as for a slow disk), so a
 * small map takes seconds.
 */
static void test_check_long(void **state)
{
	static char out[T_OUT];
	char path[PATH_MAX], name[32];
	char *argv[] = { (char *)it_ctl_binary(), "--state", it_srv.is_state, "--timeout",
			 T_LONG_TIMEOUT, "check", NULL };
	char *argv_status[] = { (char *)it_ctl_binary(), "--state", it_srv.is_state, "--timeout",
				T_LONG_TIMEOUT, "status", NULL };
	unsigned long long done, total;
	const char *last;
	double t0, took;
	int lines;

	(void)state;
	it_path(path, "%s/long", it_srv.is_lower);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int i = 0; i < T_LONG_FILES; i++) {
		it_path(path, "%s/long/f%05d", it_srv.is_lower, i);
		it_write_file(path, "x", 1);
	}
	assert_int_equal(it_server_stop(&it_srv), 0);
	snprintf(name, sizeof(name), "--check-pace=%d", T_LONG_PACE_US);
	it_srv.is_extra[0] = "--workers=1";
	it_srv.is_extra[1] = name;
	it_srv.is_extra[2] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
	list_dir("/long", T_LONG_FILES);

	t0 = now_s();
	lines = check_progress_lines(out, sizeof(out));
	took = now_s() - t0;
	fprintf(stderr, "# check took %.1f s, %d progress lines\n", took, lines);
	if (lines < 2 || !strstr(out, "0 stale, 0 dropped, 0 errors"))
		fail_msg("check over the socket (%.1f s):\n%s", took, out);
	/* The last progress line counts every record but the last few chunks. */
	last = out;
	for (int i = 1; i < lines; i++)
		last = strchr(last, '\n') + 1;
	if (sscanf(last, "progress: export " IT_EXPORT ": %llu/%llu records", &done, &total) != 2 ||
	    total < T_LONG_FILES || done > total)
		fail_msg("progress line: %.80s", last);

	t0 = now_s();
	assert_int_equal(it_run(argv, 60, out, T_OUT), 0);
	took = now_s() - t0;
	if (took < 2 * atof(T_LONG_TIMEOUT) || !strstr(out, "0 stale, 0 dropped, 0 errors"))
		fail_msg("unionnfsd-ctl --timeout %s check, %.1f s:\n%s", T_LONG_TIMEOUT, took, out);
	/* Not a terminal: the progress lines are not shown, the reply is as it was. */
	assert_null(strstr(out, "progress: "));

	/* A server that sends nothing: the tool gives up after its timeout and says why. */
	assert_int_equal(kill(it_srv.is_pid, SIGSTOP), 0);
	assert_int_equal(it_run(argv_status, 60, out, T_OUT), 1);
	assert_int_equal(kill(it_srv.is_pid, SIGCONT), 0);
	if (!strstr(out, "nothing came for " T_LONG_TIMEOUT " s") || !strstr(out, "raise --timeout"))
		fail_msg("unionnfsd-ctl against a stopped server:\n%s", out);

	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
}

static void test_no_server(void **state)
{
	static char out[T_OUT];
	char dir[PATH_MAX], want[PATH_MAX + 64];

	(void)state;
	it_path(dir, "%s/not-a-state-dir", it_srv.is_dir);
	assert_int_equal(ctl(dir, out, "status", NULL), 1);
	snprintf(want, sizeof(want), "no unionnfsd is running with state directory %s", dir);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "pass --state"));
	/* No command is a usage error. */
	{
		char *argv[] = { (char *)it_ctl_binary(), NULL };

		assert_int_equal(it_run(argv, 30, out, T_OUT), 2);
	}
}

/* The socket goes with the server; a stale one (a crash) is replaced at start. */
static void test_stale_socket(void **state)
{
	static char out[T_OUT];
	struct sockaddr_un sun;
	struct stat st;
	int fd;

	(void)state;
	sock_path(&sun);
	assert_int_equal(it_server_stop(&it_srv), 0);
	assert_int_equal(lstat(sun.sun_path, &st), -1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	assert_int_equal(ctl(it_srv.is_state, out, "status", NULL), 1);
	assert_non_null(strstr(out, "nothing answers"));
	assert_int_equal(it_server_start(&it_srv), 0);
	assert_int_equal(lstat(sun.sun_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(ctl(it_srv.is_state, out, "status", NULL), 0);
}

/* A loopback TCP port nobody listens on right now (the kernel's choice). */
static int free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static void http_get(int port, const char *req, char *out, size_t outlen)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 20 };
	size_t have = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	while (have < outlen - 1 && (n = recv(fd, out + have, outlen - 1 - have, 0)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	close(fd);
}

/* A TCP connection to 127.0.0.1:port that says nothing (yet). */
static int tcp_open(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Whether the peer closed fd by the time deadline (monotonic seconds) passes. */
static bool closed_by(int fd, double deadline)
{
	char c;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = deadline - now_s();

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) == 1)
			return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
	}
}

/* `unionnfsd-ctl status`, which must answer (rc 0) within T_STATUS_WITHIN; its time in ms. */
/* Waits until the server has accepted (and kept or closed) every connection offered on port. */
static void taken_in(int port)
{
	if (!wait_accepted(port, T_ACCEPTED_WITHIN_MS))
		fail_msg("port %d: connections still wait to be accepted after %d ms (%d of them)",
			 port, T_ACCEPTED_WITHIN_MS, tcp_accept_queue(port));
}

static double status_ms(const char *when)
{
	static char out[T_OUT];
	double t0 = now_s(), ms;
	int rc = ctl(it_srv.is_state, out, "status", NULL);

	ms = (now_s() - t0) * 1000;
	fprintf(stderr, "# status %s: rc %d in %.0f ms\n", when, rc, ms);
	if (rc != 0 || ms > T_STATUS_WITHIN * 1000) {
		it_server_dump_log(&it_srv);
		fail_msg("unionnfsd-ctl status %s: rc %d after %.0f ms: %s", when, rc, ms, out);
	}
	assert_non_null(strstr(out, "export " IT_EXPORT));
	return ms;
}

/* --metrics: Prometheus text over HTTP on the loop, with the same figures. */
static void test_metrics(void **state)
{
	static char out[T_OUT];
	char addr[64];
	struct nfs_context *nfs;
	struct nfs_stat_64 st;
	int port = free_port();

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = "--metrics";
	it_srv.is_extra[1] = addr;
	it_srv.is_extra[2] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
	nfs = it_nfs_mount(&it_srv);
	assert_int_equal(nfs_stat64(nfs, "/", &st), 0);
	it_nfs_unmount(nfs);

	http_get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.0 200 OK"));
	assert_non_null(strstr(out, "# TYPE unionnfsd_calls_total counter"));
	assert_non_null(strstr(out, "unionnfsd_calls_total{program=\"mount\",procedure=\"MNT\"} 1"));
	assert_non_null(strstr(out, "unionnfsd_call_duration_seconds_bucket{program=\"nfs\",procedure=\"GETATTR\",le=\"+Inf\"}"));
	assert_non_null(strstr(out, "unionnfsd_mounts "));
	http_get(port, "GET /nope HTTP/1.0\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "404"));
	http_get(port, "\x01\x02garbage\n\n", out, sizeof(out));
	assert_non_null(strstr(out, "405"));
	/* Still serving after the garbage. */
	http_get(port, "GET / HTTP/1.0\n\n", out, sizeof(out));
	assert_non_null(strstr(out, "200 OK"));
	it_srv.is_extra[0] = NULL;
}

/*
 * Idle connections to --metrics lock out neither the control socket (a budget of its own)
 * nor a new scrape (which closes the oldest idle one), and each is closed after a short
 * timeout.
 */
static void test_metrics_idle(void **state)
{
	static char out[T_OUT];
	int fds[T_HTTP_IDLE], port = free_port(), closed = 0;
	char addr[64];
	double t_open, deadline;

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = "--metrics";
	it_srv.is_extra[1] = addr;
	it_srv.is_extra[2] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
	it_srv.is_extra[0] = NULL;
	t_open = now_s();
	for (int i = 0; i < T_HTTP_IDLE; i++)
		fds[i] = tcp_open(port);
	taken_in(port);
	status_ms("with idle --metrics connections");
	http_get(port, "GET /metrics HTTP/1.0\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.0 200 OK"));
	deadline = t_open + T_HTTP_CLOSED_WITHIN;
	for (int i = 0; i < T_HTTP_IDLE; i++) {
		closed += closed_by(fds[i], deadline);
		close(fds[i]);
	}
	fprintf(stderr, "# %d of %d idle --metrics connections closed within %.1f s\n", closed,
		T_HTTP_IDLE, T_HTTP_CLOSED_WITHIN);
	if (closed != T_HTTP_IDLE)
		fail_msg("%d idle --metrics connections were still open %.1f s after they opened",
			 T_HTTP_IDLE - closed, T_HTTP_CLOSED_WITHIN);
}

/*
 * The control socket answers while NFS connections are at --max-connections, while they
 * fill what the open files limit allows, and while every descriptor is taken.
 */
static void test_status_at_limits(void **state)
{
	static int fds[T_NFS_CONNS];
	struct rlimit old;
	int base, after;
	rlim_t limit;

	(void)state;
	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = "--max-connections=16";
	it_srv.is_extra[1] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
	for (int i = 0; i < 24; i++)
		fds[i] = tcp_open(it_srv.is_nfs_port);
	taken_in(it_srv.is_nfs_port);
	status_ms("with NFS connections at max-connections");
	for (int i = 0; i < 24; i++)
		close(fds[i]);

	/* The default max-connections, but descriptors for far fewer connections. */
	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);
	assert_int_equal(prlimit(it_srv.is_pid, RLIMIT_NOFILE, NULL, &old), 0);
	base = it_server_fds(&it_srv);
	limit = (rlim_t)base + 64;
	it_server_nofile(&it_srv, limit);
	for (int i = 0; i < T_NFS_CONNS; i++)
		fds[i] = tcp_open(it_srv.is_nfs_port);
	taken_in(it_srv.is_nfs_port);
	after = it_server_fds(&it_srv);
	fprintf(stderr, "# server descriptors: %d idle, %d with %d connections offered (limit %llu)\n",
		base, after, T_NFS_CONNS, (unsigned long long)limit);
	status_ms("with NFS connections filling the open files limit");
	if ((rlim_t)after >= limit || it_server_log_contains(&it_srv, "Too many open files"))
		fail_msg("connections took every descriptor (%d of %llu)", after,
			 (unsigned long long)limit);
	/* Not one descriptor left: the control socket's reserve one answers. */
	for (int round = 0; round < 3; round++) {
		it_server_nofile(&it_srv, (rlim_t)it_server_fds(&it_srv));
		status_ms("with no descriptor left");
	}
	for (int i = 0; i < T_NFS_CONNS; i++)
		close(fds[i]);
	if (prlimit(it_srv.is_pid, RLIMIT_NOFILE, &old, NULL) < 0)
		fail_msg("prlimit back: %s", strerror(errno));
}

/* ---- `locks`: locks taken through NLM, listed by client and file ---- */

static nfs_fh3 lock_fh;

static void t_lock_of(nlm4_lock *lk, int32_t svid, uint64_t off, uint64_t len)
{
	memset(lk, 0, sizeof(*lk));
	lk->caller_name = "ctl-test";
	lk->fh.nlm4_netobj_len = lock_fh.data.data_len;
	lk->fh.nlm4_netobj_val = lock_fh.data.data_val;
	lk->oh.nlm4_netobj_len = 5;
	lk->oh.nlm4_netobj_val = "owner";
	lk->svid = svid;
	lk->l_offset = off;
	lk->l_len = len;
}

/* LOCK (proc NLMPROC4_LOCK), CANCEL or UNLOCK; returns the nlm4_stats. */
static int t_nlm(CLIENT *c, uint32_t proc, int32_t svid, bool exclusive, uint64_t off,
		 uint64_t len, bool block)
{
	nlm4_lockargs la;
	nlm4_cancargs ca;
	nlm4_unlockargs ua;
	nlm4_res res;
	void *args;
	xdrproc_t xargs;

	memset(&res, 0, sizeof(res));
	if (proc == NLMPROC4_LOCK) {
		memset(&la, 0, sizeof(la));
		la.block = block;
		la.exclusive = exclusive;
		la.state = 1;
		t_lock_of(&la.alock, svid, off, len);
		args = &la;
		xargs = (xdrproc_t)xdr_nlm4_lockargs;
	} else if (proc == NLMPROC4_CANCEL) {
		memset(&ca, 0, sizeof(ca));
		ca.block = block;
		ca.exclusive = exclusive;
		t_lock_of(&ca.alock, svid, off, len);
		args = &ca;
		xargs = (xdrproc_t)xdr_nlm4_cancargs;
	} else {
		memset(&ua, 0, sizeof(ua));
		t_lock_of(&ua.alock, svid, off, len);
		args = &ua;
		xargs = (xdrproc_t)xdr_nlm4_unlockargs;
	}
	assert_int_equal(it_call(c, proc, xargs, args, (xdrproc_t)xdr_nlm4_res, &res), RPC_SUCCESS);
	it_free((xdrproc_t)xdr_nlm4_res, &res);
	return (int)res.stat.stat;
}

/* The line of text that has every one of the words given, in order. */
static bool t_has_line(const char *text, const char *const words[], size_t n)
{
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *end = strchr(line, '\n'), *p = line;
		size_t i;

		for (i = 0; i < n; i++) {
			p = strstr(p, words[i]);
			if (p == NULL || (end != NULL && p > end))
				break;
			p += strlen(words[i]);
		}
		if (i == n)
			return true;
		line = end ? end + 1 : NULL;
	}
	return false;
}

static void test_locks(void **state)
{
	static char out[T_OUT];
	char addr[64], nlmport[16], fileid[32];
	int mport = free_port(), lport = free_port();
	nfs_fh3 root;
	fattr3 attr;
	CLIENT *c;

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", mport);
	snprintf(nlmport, sizeof(nlmport), "%d", lport);
	assert_int_equal(it_server_stop(&it_srv), 0);
	it_srv.is_extra[0] = "--metrics";
	it_srv.is_extra[1] = addr;
	it_srv.is_extra[2] = "--nlm-port";
	it_srv.is_extra[3] = nlmport;
	it_srv.is_extra[4] = NULL;
	assert_int_equal(it_server_start(&it_srv), 0);

	assert_int_equal(ctl(it_srv.is_state, out, "locks", NULL), 0);
	assert_non_null(strstr(out, "locks held 0, waiters 0,"));

	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), 0);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_create(c, &root, "locked-file"), NFS3_OK);
	it_assert_status(it_lookup(c, &root, "locked-file", &lock_fh, &attr), NFS3_OK);
	it_clnt_destroy(c);
	it_fh_free(&root);
	snprintf(fileid, sizeof(fileid), " %llu ", (unsigned long long)attr.fileid);

	c = it_clnt(IPPROTO_TCP, NLM_PROG, NLM_VERS4, lport);
	assert_int_equal(t_nlm(c, NLMPROC4_LOCK, 7, true, 100, 0, false), NLM4_GRANTED);
	assert_int_equal(t_nlm(c, NLMPROC4_LOCK, 8, false, 0, 50, false), NLM4_GRANTED);
	assert_int_equal(t_nlm(c, NLMPROC4_LOCK, 9, false, 120, 10, true), NLM4_BLOCKED);

	assert_int_equal(ctl(it_srv.is_state, out, "locks", NULL), 0);
	if (!t_has_line(out, (const char *const[]){ "127.0.0.1", IT_EXPORT, fileid, " 7 ",
						    "exclusive", " 100 ", "to EOF", "held" }, 8) ||
	    !t_has_line(out, (const char *const[]){ "127.0.0.1", IT_EXPORT, fileid, " 8 ",
						    "shared", " 0 ", " 50 ", "held" }, 8) ||
	    !t_has_line(out, (const char *const[]){ "127.0.0.1", IT_EXPORT, fileid, " 9 ",
						    "shared", " 120 ", " 10 ", "waiting" }, 8))
		fail_msg("`locks` does not list the two locks and the waiter on fileid%s:\n%s",
			 fileid, out);
	assert_non_null(strstr(out, "locks held 2, waiters 1, clients with locks or waiting 1, "
				    "files locked 1\n"));
	assert_int_equal(ctl(it_srv.is_state, out, "stats", NULL), 0);
	assert_non_null(strstr(out, "locks held 2, waiters 1,"));
	assert_non_null(strstr(out, "\nlock callbacks pending 0 "));   /* nothing granted yet */
	assert_non_null(strstr(out, "\nnlm "));
	http_get(mport, "GET /metrics HTTP/1.0\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "\nunionnfsd_locks_held 2\n"));
	assert_non_null(strstr(out, "\nunionnfsd_lock_waiters 1\n"));
	assert_non_null(strstr(out, "\nunionnfsd_lock_hosts 1\n"));
	assert_non_null(strstr(out, "\nunionnfsd_locked_files 1\n"));
	assert_non_null(strstr(out, "\nunionnfsd_lock_callbacks_pending 0\n"));
	assert_non_null(strstr(out, "unionnfsd_calls_total{program=\"nlm\",procedure=\"LOCK\"} 3\n"));

	/* the waiter cancelled, the locks gone: an empty list */
	assert_int_equal(t_nlm(c, NLMPROC4_CANCEL, 9, false, 120, 10, true), NLM4_GRANTED);
	assert_int_equal(t_nlm(c, NLMPROC4_UNLOCK, 7, false, 0, 0, false), NLM4_GRANTED);
	assert_int_equal(t_nlm(c, NLMPROC4_UNLOCK, 8, false, 0, 0, false), NLM4_GRANTED);
	it_clnt_destroy(c);
	it_fh_free(&lock_fh);
	assert_int_equal(ctl(it_srv.is_state, out, "locks", NULL), 0);
	assert_non_null(strstr(out, "locks held 0, waiters 0,"));
	assert_null(strstr(out, "held\n"));
	it_srv.is_extra[0] = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_clients_stats),
		cmocka_unit_test(test_status_branches),
		cmocka_unit_test(test_reload_and_reset),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_check_long),
		cmocka_unit_test(test_no_server),
		cmocka_unit_test(test_stale_socket),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_metrics_idle),
		cmocka_unit_test(test_status_at_limits),
		cmocka_unit_test(test_locks),
	};

	return cmocka_run_group_tests(tests, setup, it_group_teardown);
}
