/*
 * Integration test plumbing; see common.h. Runs the server as a child process whose stderr
 * goes to a log file, so a chatty server can never block on a full pipe.
 */
#include "common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct it_server it_srv;

/*
 * libnfs keeps the handle of an open file in a private struct; nfs_get_fh() (declared in
 * <nfsc/libnfs-raw.h>, which clashes with <rpc/rpc.h>) hands it out. Its layout has been
 * { int len; char *val; } throughout libnfs 4.x; the tests compare the bytes with a handle
 * from MNT/LOOKUP, so a change of layout shows up as a test failure, not silently.
 */
struct nfs_fh {
	int len;
	char *val;
};
struct nfs_fh *nfs_get_fh(struct nfsfh *nfsfh);

static double it_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *it_server_binary(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("UNIONNFSD");
	const char *build = getenv("BUILD");

	if (env && *env)
		return env;
	snprintf(path, sizeof(path), "%s/unionnfsd", build && *build ? build : "build");
	return path;
}

const char *it_ctl_binary(void)
{
	static char path[PATH_MAX];
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/unionnfsd-ctl", build && *build ? build : "build");
	return path;
}

void it_path(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= PATH_MAX)
		fail_msg("path too long: %s", fmt);
}

static void it_mkdir(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", path, strerror(errno));
}

void it_server_init(struct it_server *s, bool with_lower)
{
	char tmpl[] = "/tmp/unfs-it.XXXXXX";

	/* libnfs and tirpc write to sockets the server may just have closed. */
	signal(SIGPIPE, SIG_IGN);
	memset(s, 0, sizeof(*s));
	if (!mkdtemp(tmpl))
		fail_msg("mkdtemp: %s", strerror(errno));
	/* The server runs as root with root_squash off, but keep the tree traversable. */
	chmod(tmpl, 0755);
	it_path(s->is_dir, "%s", tmpl);
	it_path(s->is_upper, "%s/upper", s->is_dir);
	it_mkdir(s->is_upper);
	if (with_lower) {
		it_path(s->is_lower, "%s/lower", s->is_dir);
		it_mkdir(s->is_lower);
	}
	it_path(s->is_state, "%s/state", s->is_dir);
	it_path(s->is_log, "%s/server.log", s->is_dir);
	s->is_portmap = "off";
	s->is_opts = "no_root_squash,insecure";
}

static char *it_log_text(const struct it_server *s, off_t from)
{
	size_t len;
	char *all = it_read_file(s->is_log, &len);
	char *out;

	if (!all)
		return strdup("");
	if ((size_t)from > len)
		from = len;
	out = strdup(all + from);
	free(all);
	return out;
}

void it_server_dump_log(const struct it_server *s)
{
	char *text = it_log_text(s, s->is_log_off);

	fprintf(stderr, "---- server output (%s) ----\n%s---- end of server output ----\n",
		s->is_log, text);
	free(text);
}

bool it_server_log_contains(const struct it_server *s, const char *text)
{
	char *all = it_log_text(s, 0);
	bool found = strstr(all, text) != NULL;

	free(all);
	return found;
}

struct it_log_want {
	const struct it_server *lt_srv;
	const char *lt_text;
	int lt_n;        /* how many times (it_log_has_n) */
};

static bool it_log_has(void *arg)
{
	const struct it_log_want *lt = arg;

	return it_server_log_contains(lt->lt_srv, lt->lt_text);
}

bool it_server_log_wait(const struct it_server *s, const char *text, int timeout_ms)
{
	struct it_log_want lt = { s, text, 1 };

	return wait_until(it_log_has, &lt, timeout_ms);
}

int it_server_log_count(const struct it_server *s, const char *text)
{
	char *all = it_log_text(s, 0);
	int n = 0;

	for (const char *p = all; (p = strstr(p, text)) != NULL; p += strlen(text))
		n++;
	free(all);
	return n;
}

static bool it_log_has_n(void *arg)
{
	const struct it_log_want *lt = arg;

	return it_server_log_count(lt->lt_srv, lt->lt_text) >= lt->lt_n;
}

bool it_server_log_wait_count(const struct it_server *s, const char *text, int n, int timeout_ms)
{
	struct it_log_want lt = { s, text, n };

	return wait_until(it_log_has_n, &lt, timeout_ms);
}

/* Finds "<key> N" in text and returns N, or 0. */
static int it_find_port(const char *text, const char *key)
{
	const char *p = text;

	while ((p = strstr(p, key)) != NULL) {
		char *end;
		long v;

		p += strlen(key);
		v = strtol(p, &end, 10);
		if (end != p && v > 0 && v < 65536)
			return (int)v;
	}
	return 0;
}

bool_t it_xdr_void(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

/* A NULL call over TCP with a short timeout: is the program answering on port? */
/*
 * Whether prog answers NULL on port of 127.0.0.1: over TCP, else over UDP (a server whose
 * rules do not admit 127.0.0.1 closes its TCP connections at once).
 */
static bool it_probe(int port, uint32_t prog, uint32_t vers)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { 2, 0 }, retry = { 0, 200000 };
	int sock = RPC_ANYSOCK;
	CLIENT *c;
	bool ok;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c = clnttcp_create(&sin, prog, vers, &sock, 0, 0);
	if (!c)
		return false;
	ok = clnt_call(c, 0, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void, NULL, tv) ==
	     RPC_SUCCESS;
	clnt_destroy(c);
	if (ok)
		return true;
	sock = RPC_ANYSOCK;
	c = clntudp_create(&sin, prog, vers, retry, &sock);
	if (!c)
		return false;
	ok = clnt_call(c, 0, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void, NULL, tv) ==
	     RPC_SUCCESS;
	clnt_destroy(c);
	return ok;
}

struct it_start {
	struct it_server *st_srv;
	bool st_exited;
	int st_status;   /* when it exited */
};

/* Whether the starting server exited, or logged its ports and answers on both. */
static bool it_started(void *arg)
{
	struct it_start *st = arg;
	struct it_server *s = st->st_srv;

	if (waitpid(s->is_pid, &st->st_status, WNOHANG) == s->is_pid) {
		st->st_exited = true;
		return true;
	}
	if (s->is_nfs_port == 0 || s->is_mount_port == 0) {
		char *text = it_log_text(s, s->is_log_off);

		if (s->is_nfs_port == 0)
			s->is_nfs_port = it_find_port(text, "nfs port ");
		if (s->is_mount_port == 0)
			s->is_mount_port = it_find_port(text, "mount port ");
		free(text);
	}
	return s->is_nfs_port && s->is_mount_port && it_probe(s->is_nfs_port, NFS_PROGRAM, 3) &&
	       it_probe(s->is_mount_port, IT_MOUNT_PROG, 3);
}

int it_server_start(struct it_server *s)
{
	const char *bin = it_server_binary();
	char nport[16], mport[16], exp[4 * PATH_MAX + 32];
	char *argv[32];
	int argc = 0, fd;
	struct it_start st = { .st_srv = s };
	bool ready;
	pid_t pid;

	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "server binary %s is missing; run make (or set BUILD)\n", bin);
		return -1;
	}
	snprintf(nport, sizeof(nport), "%d", s->is_nfs_port);
	snprintf(mport, sizeof(mport), "%d", s->is_mount_port);
	if (s->is_branches)
		snprintf(exp, sizeof(exp), "%s=%s", IT_EXPORT, s->is_branches);
	else if (s->is_lower[0])
		snprintf(exp, sizeof(exp), "%s=%s:%s", IT_EXPORT, s->is_upper, s->is_lower);
	else
		snprintf(exp, sizeof(exp), "%s=%s", IT_EXPORT, s->is_upper);
	argv[argc++] = (char *)bin;
	argv[argc++] = "-f";
	argv[argc++] = "--port";
	argv[argc++] = nport;
	argv[argc++] = "--mount-port";
	argv[argc++] = mport;
	argv[argc++] = "--portmap";
	argv[argc++] = (char *)s->is_portmap;
	argv[argc++] = "--state";
	argv[argc++] = s->is_state;
	for (int i = 0; i < 7 && s->is_extra[i]; i++)
		argv[argc++] = (char *)s->is_extra[i];
	argv[argc++] = "-e";
	argv[argc++] = exp;
	if (s->is_opts && *s->is_opts) {
		argv[argc++] = "-o";
		argv[argc++] = (char *)s->is_opts;
	}
	argv[argc] = NULL;
	if (s->is_config) {
		argc = 2;
		argv[argc++] = "-c";
		argv[argc++] = (char *)s->is_config;
		argv[argc] = NULL;
	}

	fd = open(s->is_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", s->is_log, strerror(errno));
		return -1;
	}
	s->is_log_off = lseek(fd, 0, SEEK_END);
	dprintf(fd, "==== test harness: starting %s (ports %s/%s)\n", bin, nport, mport);
	s->is_log_off = lseek(fd, 0, SEEK_END);
	pid = fork();
	if (pid < 0) {
		close(fd);
		fprintf(stderr, "fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		/* A crashed test binary must not leave servers behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		signal(SIGPIPE, SIG_DFL);
		if (s->is_nofile) {
			struct rlimit rl = { s->is_nofile, s->is_nofile };

			if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
				dprintf(2, "setrlimit RLIMIT_NOFILE %lu: %s\n", s->is_nofile,
					strerror(errno));
		}
		execv(bin, argv);
		dprintf(2, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(fd);
	s->is_pid = pid;

	ready = wait_until(it_started, &st, IT_START_TIMEOUT * 1000);
	if (st.st_exited) {
		s->is_pid = 0;
		fprintf(stderr, "server exited during start-up (status 0x%x)\n", st.st_status);
		it_server_dump_log(s);
		return -1;
	}
	if (!ready) {
		fprintf(stderr, "server did not become ready in %d s (ports nfs %d, mount %d)\n",
			IT_START_TIMEOUT, s->is_nfs_port, s->is_mount_port);
		it_server_dump_log(s);
		it_server_stop(s);
		return -1;
	}
	return 0;
}

static int it_wait_exit(pid_t pid, int timeout_s)
{
	int rc = wait_exit(pid, timeout_s * 1000);

	if (rc < 0 && errno == ETIMEDOUT) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return rc;
}

int it_server_stop(struct it_server *s)
{
	int rc;

	if (s->is_pid <= 0)
		return -1;
	kill(s->is_pid, SIGTERM);
	rc = it_wait_exit(s->is_pid, IT_STOP_TIMEOUT);
	s->is_pid = 0;
	if (rc != 0) {
		fprintf(stderr, "server stop: exit status %d (-1: still running after %d s, killed)\n",
			rc, IT_STOP_TIMEOUT);
		it_server_dump_log(s);
	}
	return rc;
}

void it_server_restart(struct it_server *s)
{
	int rc = it_server_stop(s);

	if (rc != 0)
		fail_msg("server did not exit cleanly on SIGTERM (status %d)", rc);
	if (it_server_start(s) != 0)
		fail_msg("server did not start again on the same state directory");
}

void it_server_cleanup(struct it_server *s)
{
	if (s->is_pid > 0) {
		kill(s->is_pid, SIGKILL);
		waitpid(s->is_pid, NULL, 0);
		s->is_pid = 0;
	}
	if (s->is_dir[0] && !getenv("IT_KEEP"))
		rm_tree(s->is_dir);
	s->is_dir[0] = '\0';
}

int it_run(char *const argv[], int timeout_s, char *out, size_t outlen)
{
	int pfd[2], status = 0;
	size_t have = 0;
	double deadline;
	pid_t pid;

	if (outlen)
		out[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	deadline = it_now() + timeout_s;
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		int left = (int)((deadline - it_now()) * 1000);
		char buf[4096];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(pfd[0]);
			return -1;
		}
		if (poll(&p, 1, left) <= 0)
			continue;
		n = read(pfd[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		if (outlen && have < outlen - 1) {
			size_t take = (size_t)n < outlen - 1 - have ? (size_t)n : outlen - 1 - have;

			memcpy(out + have, buf, take);
			have += take;
			out[have] = '\0';
		}
	}
	close(pfd[0]);
	status = it_wait_exit(pid, (int)(deadline - it_now()) + 1);
	return status;
}

/* it_run that says what failed. */
static int it_run_loud(char *const argv[], char *out, size_t outlen)
{
	int rc = it_run(argv, 60, out, outlen);

	if (rc != 0)
		fprintf(stderr, "%s: exit %d: %s\n", argv[0], rc, out);
	return rc;
}

int it_ext4_mount(const char *image, int size_mib, const char *const *mkfs_opts, const char *dir,
		  char *loopdev, size_t loopdev_len)
{
	char *mkfs[16] = { "mkfs.ext4", "-q", "-F" };
	char out[512], size[32];
	int n = 3;

	for (; mkfs_opts && *mkfs_opts && n < 14; mkfs_opts++)
		mkfs[n++] = (char *)*mkfs_opts;
	mkfs[n++] = (char *)image;
	mkfs[n] = NULL;
	snprintf(size, sizeof(size), "%dM", size_mib);
	loopdev[0] = '\0';
	if (it_run_loud((char *const[]){ "truncate", "-s", size, (char *)image, NULL }, out,
			sizeof(out)) ||
	    it_run_loud(mkfs, out, sizeof(out)) ||
	    it_run_loud((char *const[]){ "losetup", "-f", "--show", (char *)image, NULL }, out,
			sizeof(out)))
		return -1;
	snprintf(loopdev, loopdev_len, "%.*s", (int)strcspn(out, "\n"), out);
	if (mount(loopdev, dir, "ext4", 0, NULL) < 0) {
		fprintf(stderr, "mount %s (%s) at %s: %s\n", image, loopdev, dir, strerror(errno));
		return -1;
	}
	return 0;
}

void it_ext4_umount(const char *dir, char *loopdev)
{
	char out[256];

	umount2(dir, MNT_DETACH);
	if (loopdev[0])
		it_run_loud((char *const[]){ "losetup", "-d", loopdev, NULL }, out, sizeof(out));
	loopdev[0] = '\0';
}

static bool it_port_free(int type, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	int one = 1;
	bool ok;

	if (fd < 0)
		return false;
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
	close(fd);
	return ok;
}

bool it_tcp_port_free(int port)
{
	return it_port_free(SOCK_STREAM, port);
}

bool it_tcp_udp_port_free(int port)
{
	return it_port_free(SOCK_STREAM, port) && it_port_free(SOCK_DGRAM, port);
}

void it_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const char *p = data;

	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			fail_msg("write %s: %s", path, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

char *it_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, have = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	for (;;) {
		ssize_t n;

		if (have == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
		n = read(fd, buf + have, cap - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	if (len)
		*len = have;
	return buf;
}

bool it_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

void it_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* --- libnfs --- */

void it_nfs_url(const struct it_server *s, char *out, size_t outlen)
{
	snprintf(out, outlen, "nfs://127.0.0.1%s?nfsport=%d&mountport=%d", IT_EXPORT,
		 s->is_nfs_port, s->is_mount_port);
}

struct nfs_context *it_nfs_mount_url(const char *url)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u;

	if (!nfs) {
		fprintf(stderr, "nfs_init_context failed\n");
		return NULL;
	}
	u = nfs_parse_url_dir(nfs, url);
	if (!u) {
		fprintf(stderr, "libnfs cannot parse %s: %s\n", url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_set_timeout(nfs, IT_CALL_TIMEOUT * 1000);
	if (nfs_mount(nfs, u->server, u->path) != 0) {
		fprintf(stderr, "libnfs mount of %s failed: %s\n", url, nfs_get_error(nfs));
		nfs_destroy_url(u);
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_destroy_url(u);
	return nfs;
}

struct nfs_context *it_nfs_mount(const struct it_server *s)
{
	char url[256];
	struct nfs_context *nfs;

	it_nfs_url(s, url, sizeof(url));
	nfs = it_nfs_mount_url(url);
	if (!nfs) {
		it_server_dump_log(s);
		fail_msg("cannot mount %s with libnfs", url);
	}
	return nfs;
}

void it_nfs_unmount(struct nfs_context *nfs)
{
	if (nfs)
		nfs_destroy_context(nfs);
}

void it_nfsfh_bytes(struct nfsfh *fh, const uint8_t **data, size_t *len)
{
	struct nfs_fh *raw = nfs_get_fh(fh);

	assert_non_null(raw);
	*data = (const uint8_t *)raw->val;
	*len = (size_t)raw->len;
}

/* --- libtirpc --- */

CLIENT *it_clnt(int proto, uint32_t prog, uint32_t vers, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int sock = RPC_ANYSOCK;
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (proto == IPPROTO_TCP) {
		c = clnttcp_create(&sin, prog, vers, &sock, 0, 0);
	} else {
		struct timeval retry = { 1, 0 };

		/* Big enough buffers for 32 KiB READs over UDP. */
		c = clntudp_bufcreate(&sin, prog, vers, retry, &sock, 65000, 65000);
	}
	if (!c)
		fail_msg("cannot create an RPC client for program %u v%u on %s port %d: %s", prog, vers,
			 proto == IPPROTO_TCP ? "tcp" : "udp", port, clnt_spcreateerror("clnt"));
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("unfs-test", 0, 0, 0, NULL);
	if (!c->cl_auth)
		fail_msg("authunix_create failed");
	return c;
}

void it_clnt_destroy(CLIENT *c)
{
	if (!c)
		return;
	if (c->cl_auth)
		auth_destroy(c->cl_auth);
	c->cl_auth = NULL;
	clnt_destroy(c);
}

enum clnt_stat it_call(CLIENT *c, uint32_t proc, xdrproc_t xargs, void *args, xdrproc_t xres,
		       void *res)
{
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };

	return clnt_call(c, proc, xargs, args, xres, res, tv);
}

void it_free(xdrproc_t xres, void *res)
{
	xdr_free(xres, res);
}

struct it_mntres {
	int mr_status;
	nfs_fh3 mr_fh;
	int *mr_flavors;
	u_int mr_nflavors;
};

static bool_t it_xdr_dirpath(XDR *x, char **path)
{
	return xdr_string(x, path, 1024);
}

static bool_t it_xdr_mntres(XDR *x, struct it_mntres *r)
{
	if (!xdr_int(x, &r->mr_status))
		return FALSE;
	if (r->mr_status != IT_MNT_OK)
		return TRUE;
	if (!xdr_bytes(x, &r->mr_fh.data.data_val, &r->mr_fh.data.data_len, NFS3_FHSIZE))
		return FALSE;
	return xdr_array(x, (char **)&r->mr_flavors, &r->mr_nflavors, 64, sizeof(int),
			 (xdrproc_t)xdr_int);
}

int it_mnt_over(CLIENT *c, const char *path, nfs_fh3 *fh)
{
	struct it_mntres res;
	enum clnt_stat cs;
	char *p = (char *)path;

	memset(&res, 0, sizeof(res));
	cs = it_call(c, IT_MNTPROC_MNT, (xdrproc_t)it_xdr_dirpath, &p, (xdrproc_t)it_xdr_mntres,
		     &res);
	if (cs != RPC_SUCCESS)
		fail_msg("MOUNT MNT %s: %s", path, clnt_sperrno(cs));
	if (res.mr_status == IT_MNT_OK) {
		bool has_sys = false;

		for (u_int i = 0; i < res.mr_nflavors; i++)
			has_sys |= res.mr_flavors[i] == AUTH_SYS;
		if (!has_sys)
			fail_msg("MNT %s: AUTH_SYS is not among the %u flavors offered", path,
				 res.mr_nflavors);
		if (fh) {
			fh->data = res.mr_fh.data;
			res.mr_fh.data.data_val = NULL;
		}
	}
	free(res.mr_fh.data.data_val);
	free(res.mr_flavors);
	it_clnt_destroy(c);
	return res.mr_status;
}

int it_mnt(const struct it_server *s, int proto, const char *path, nfs_fh3 *fh)
{
	return it_mnt_over(it_clnt(proto, IT_MOUNT_PROG, 3, s->is_mount_port), path, fh);
}

static _Atomic unsigned it_reserved_calls;

int it_bind_reserved(int fd, const struct sockaddr_in *me)
{
	struct sockaddr_in at = *me;
	int one = 1, first, port;
	unsigned step;

	/*
	 * bindresvport gives up when the ~400 ports it tries are taken, and a test suite's
	 * closed connections keep them in TIME_WAIT for a minute. SO_REUSEADDR lets a port
	 * held only by TIME_WAIT be bound again; each test server listens on its own port, so
	 * the new connection's address pair is still unique.
	 */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return -1;
	/*
	 * Each call starts at another port: a port this process used a moment ago to reach the
	 * same server may still be in TIME_WAIT for that very address pair, and connect would
	 * then fail with EADDRNOTAVAIL.
	 */
	step = (unsigned)getpid() + 37 * atomic_fetch_add(&it_reserved_calls, 1);
	first = IT_RESERVED_LOW + (int)(step % (IT_RESERVED_HIGH - IT_RESERVED_LOW + 1));
	port = first;
	do {
		at.sin_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&at, sizeof(at)) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
		port = port == IT_RESERVED_HIGH ? IT_RESERVED_LOW : port + 1;
	} while (port != first);
	errno = EADDRINUSE;
	return -1;
}

int it_connect_reserved(const struct sockaddr_in *me, const struct sockaddr_in *to)
{
	for (int tries = 0; tries < IT_RESERVED_HIGH - IT_RESERVED_LOW + 1; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			return -1;
		if (it_bind_reserved(fd, me) != 0) {
			close(fd);
			return -1;
		}
		if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) == 0)
			return fd;
		close(fd);
		/*
		 * The port's earlier connection to this very address (a server port number the
		 * kernel handed out again) is still in TIME_WAIT: the next port.
		 */
		if (errno != EADDRNOTAVAIL)
			return -1;
	}
	errno = EADDRNOTAVAIL;
	return -1;
}

CLIENT *it_clnt_from(const char *src, uint32_t prog, uint32_t vers, int port, uint32_t uid,
		     uint32_t gid, bool reserved)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	int fd;
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	if (reserved) {
		fd = it_connect_reserved(&me, &sin);
		if (fd < 0)
			fail_msg("no reserved port on %s could connect to port %d: %s", src, port,
				 strerror(errno));
	} else {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fd >= 0);
		if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0)
			fail_msg("bind to %s: %s", src, strerror(errno));
	}
	c = clnttcp_create(&sin, prog, vers, &fd, 0, 0);
	if (!c)
		fail_msg("cannot connect from %s to port %d: %s", src, port,
			 clnt_spcreateerror("clnt"));
	clnt_control(c, CLSET_FD_CLOSE, NULL);
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("it-client", uid, gid, 0, NULL);
	assert_non_null(c->cl_auth);
	return c;
}

CLIENT *it_clnt_udp_from(const char *src, uint32_t prog, uint32_t vers, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	struct timeval retry = { 1, 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0)
		fail_msg("bind to %s: %s", src, strerror(errno));
	c = clntudp_bufcreate(&sin, prog, vers, retry, &fd, 65000, 65000);
	if (!c)
		fail_msg("cannot create a UDP client from %s: %s", src, clnt_spcreateerror("clnt"));
	clnt_control(c, CLSET_FD_CLOSE, NULL);
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("it-client", 0, 0, 0, NULL);
	assert_non_null(c->cl_auth);
	return c;
}

void it_fh_free(nfs_fh3 *fh)
{
	free(fh->data.data_val);
	fh->data.data_val = NULL;
	fh->data.data_len = 0;
}

void it_fh_copy(nfs_fh3 *dst, const nfs_fh3 *src)
{
	dst->data.data_len = src->data.data_len;
	dst->data.data_val = malloc(src->data.data_len ? src->data.data_len : 1);
	memcpy(dst->data.data_val, src->data.data_val, src->data.data_len);
}

bool it_fh_equal(const nfs_fh3 *a, const nfs_fh3 *b)
{
	return a->data.data_len == b->data.data_len &&
	       memcmp(a->data.data_val, b->data.data_val, a->data.data_len) == 0;
}

CLIENT *it_nfs_clnt(const struct it_server *s, int proto)
{
	return it_clnt(proto, NFS_PROGRAM, NFS_V3, s->is_nfs_port);
}

nfsstat3 it_create(CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	CREATE3args args;
	CREATE3res res;
	enum clnt_stat cs;
	nfsstat3 st;

	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	args.where.dir = *dir;
	args.where.name = (char *)name;
	args.how.mode = UNCHECKED;
	args.how.createhow3_u.obj_attributes.mode.set_it = TRUE;
	args.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	cs = it_call(c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &args,
		     (xdrproc_t)xdr_CREATE3res, &res);
	if (cs != RPC_SUCCESS)
		fail_msg("CREATE %s: %s", name, clnt_sperrno(cs));
	st = res.status;
	it_free((xdrproc_t)xdr_CREATE3res, &res);
	return st;
}

nfsstat3 it_getattr(CLIENT *c, const nfs_fh3 *fh, fattr3 *attr)
{
	GETATTR3args args = { .object = *fh };
	GETATTR3res res;
	enum clnt_stat cs;
	nfsstat3 st;

	memset(&res, 0, sizeof(res));
	cs = it_call(c, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, &args,
		     (xdrproc_t)xdr_GETATTR3res, &res);
	if (cs != RPC_SUCCESS)
		fail_msg("GETATTR: %s", clnt_sperrno(cs));
	st = res.status;
	if (st == NFS3_OK && attr)
		*attr = res.GETATTR3res_u.resok.obj_attributes;
	it_free((xdrproc_t)xdr_GETATTR3res, &res);
	return st;
}

nfsstat3 it_lookup(CLIENT *c, const nfs_fh3 *dir, const char *name, nfs_fh3 *fh, fattr3 *attr)
{
	LOOKUP3args args = { .what = { .dir = *dir, .name = (char *)name } };
	LOOKUP3res res;
	enum clnt_stat cs;
	nfsstat3 st;

	memset(&res, 0, sizeof(res));
	cs = it_call(c, NFSPROC3_LOOKUP, (xdrproc_t)xdr_LOOKUP3args, &args,
		     (xdrproc_t)xdr_LOOKUP3res, &res);
	if (cs != RPC_SUCCESS)
		fail_msg("LOOKUP %s: %s", name, clnt_sperrno(cs));
	st = res.status;
	if (st == NFS3_OK) {
		LOOKUP3resok *ok = &res.LOOKUP3res_u.resok;

		if (fh)
			it_fh_copy(fh, &ok->object);
		if (attr) {
			if (!ok->obj_attributes.attributes_follow)
				fail_msg("LOOKUP %s: no object attributes", name);
			*attr = ok->obj_attributes.post_op_attr_u.attributes;
		}
	}
	it_free((xdrproc_t)xdr_LOOKUP3res, &res);
	return st;
}

nfsstat3 it_read_all(CLIENT *c, const nfs_fh3 *fh, char *buf, size_t len)
{
	READ3args a = { .file = *fh, .offset = 0, .count = (count3)(len - 1) };
	READ3res r;
	nfsstat3 st;

	memset(&r, 0, sizeof(r));
	if (it_call(c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &a, (xdrproc_t)xdr_READ3res,
		    &r) != RPC_SUCCESS)
		fail_msg("READ: no reply");
	st = r.status;
	buf[0] = '\0';
	if (st == NFS3_OK) {
		size_t n = r.READ3res_u.resok.data.data_len;

		if (n > 0) /* an empty reply's data may be NULL */
			memcpy(buf, r.READ3res_u.resok.data.data_val, n);
		buf[n] = '\0';
	}
	it_free((xdrproc_t)xdr_READ3res, &r);
	return st;
}

nfsstat3 it_lookup_path(CLIENT *c, const nfs_fh3 *dir, const char *path, nfs_fh3 *fh,
			fattr3 *attr)
{
	char *copy = strdup(path), *save = NULL, *comp;
	nfs_fh3 cur;
	nfsstat3 st = NFS3_OK;
	fattr3 a;

	it_fh_copy(&cur, dir);
	memset(&a, 0, sizeof(a));
	for (comp = strtok_r(copy, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		nfs_fh3 next;

		st = it_lookup(c, &cur, comp, &next, &a);
		if (st != NFS3_OK)
			break;
		it_fh_free(&cur);
		cur = next;
	}
	free(copy);
	if (st == NFS3_OK && fh)
		*fh = cur;
	else
		it_fh_free(&cur);
	if (st == NFS3_OK && attr)
		*attr = a;
	return st;
}

const char *it_nfsstat_name(int status)
{
	static const struct {
		int code;
		const char *name;
	} names[] = {
		{ NFS3_OK, "NFS3_OK" },
		{ NFS3ERR_PERM, "NFS3ERR_PERM" },
		{ NFS3ERR_NOENT, "NFS3ERR_NOENT" },
		{ NFS3ERR_IO, "NFS3ERR_IO" },
		{ NFS3ERR_NXIO, "NFS3ERR_NXIO" },
		{ NFS3ERR_ACCES, "NFS3ERR_ACCES" },
		{ NFS3ERR_EXIST, "NFS3ERR_EXIST" },
		{ NFS3ERR_XDEV, "NFS3ERR_XDEV" },
		{ NFS3ERR_NODEV, "NFS3ERR_NODEV" },
		{ NFS3ERR_NOTDIR, "NFS3ERR_NOTDIR" },
		{ NFS3ERR_ISDIR, "NFS3ERR_ISDIR" },
		{ NFS3ERR_INVAL, "NFS3ERR_INVAL" },
		{ NFS3ERR_FBIG, "NFS3ERR_FBIG" },
		{ NFS3ERR_NOSPC, "NFS3ERR_NOSPC" },
		{ NFS3ERR_ROFS, "NFS3ERR_ROFS" },
		{ NFS3ERR_MLINK, "NFS3ERR_MLINK" },
		{ NFS3ERR_NAMETOOLONG, "NFS3ERR_NAMETOOLONG" },
		{ NFS3ERR_NOTEMPTY, "NFS3ERR_NOTEMPTY" },
		{ NFS3ERR_DQUOT, "NFS3ERR_DQUOT" },
		{ NFS3ERR_STALE, "NFS3ERR_STALE" },
		{ NFS3ERR_REMOTE, "NFS3ERR_REMOTE" },
		{ NFS3ERR_BADHANDLE, "NFS3ERR_BADHANDLE" },
		{ NFS3ERR_NOT_SYNC, "NFS3ERR_NOT_SYNC" },
		{ NFS3ERR_BAD_COOKIE, "NFS3ERR_BAD_COOKIE" },
		{ NFS3ERR_NOTSUPP, "NFS3ERR_NOTSUPP" },
		{ NFS3ERR_TOOSMALL, "NFS3ERR_TOOSMALL" },
		{ NFS3ERR_SERVERFAULT, "NFS3ERR_SERVERFAULT" },
		{ NFS3ERR_BADTYPE, "NFS3ERR_BADTYPE" },
		{ NFS3ERR_JUKEBOX, "NFS3ERR_JUKEBOX" },
	};
	static __thread char other[32];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == status)
			return names[i].name;
	snprintf(other, sizeof(other), "status %d", status);
	return other;
}

/* --- group fixtures --- */

static int it_group_setup(bool with_lower, bool udp)
{
	it_server_init(&it_srv, with_lower);
	if (udp) {
		it_srv.is_extra[0] = "--udp";
		it_srv.is_extra[1] = NULL;
	}
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	return 0;
}

int it_group_setup_upper(void **state)
{
	(void)state;
	return it_group_setup(false, false);
}

int it_group_setup_union(void **state)
{
	(void)state;
	return it_group_setup(true, false);
}

int it_group_setup_udp(bool with_lower)
{
	return it_group_setup(with_lower, true);
}

int it_server_finish(struct it_server *s)
{
	int rc = 0;

	if (s->is_pid > 0) {
		rc = it_server_stop(s);
		if (rc != 0)
			fprintf(stderr, "server exit status %d after SIGTERM, want 0\n", rc);
		else if (it_server_log_contains(s, "AddressSanitizer") ||
			 it_server_log_contains(s, "runtime error:") ||
			 it_server_log_contains(s, "LeakSanitizer")) {
			fprintf(stderr, "sanitizer report in the server output\n");
			it_server_dump_log(s);
			rc = -1;
		}
	}
	it_server_cleanup(s);
	return rc == 0 ? 0 : -1;
}

int it_group_teardown(void **state)
{
	(void)state;
	if (!it_srv.is_dir[0])
		return 0; /* the setup failed and cleaned up already */
	return it_server_finish(&it_srv);
}

size_t it_put32(uint8_t *b, size_t off, uint32_t v)
{
	v = htonl(v);
	memcpy(b + off, &v, 4);
	return off + 4;
}

uint32_t it_get32(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, 4);
	return ntohl(v);
}

void it_server_nofile(const struct it_server *s, unsigned long long n)
{
	struct rlimit rl;

	if (prlimit(s->is_pid, RLIMIT_NOFILE, NULL, &rl) < 0)
		fail_msg("prlimit: %s", strerror(errno));
	rl.rlim_cur = n;
	if (prlimit(s->is_pid, RLIMIT_NOFILE, &rl, NULL) < 0)
		fail_msg("prlimit of the server to %llu descriptors: %s", n, strerror(errno));
}

pid_t it_server_strace_delay(const struct it_server *s, const char *syscalls, long delay_us)
{
	char pid[32], trace[256], inject[320], line[512];
	size_t len = 0;
	pid_t sp;
	int pfd[2];

	snprintf(pid, sizeof(pid), "%d", (int)s->is_pid);
	snprintf(trace, sizeof(trace), "trace=%s", syscalls);
	snprintf(inject, sizeof(inject), "inject=%s:delay_exit=%ld", syscalls, delay_us);
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	sp = fork();
	assert_true(sp >= 0);
	if (sp == 0) {
		dup2(pfd[1], 2);
		execlp("strace", "strace", "-f", "-o", "/dev/null", "-p", pid, "-e", trace, "-e",
		       inject, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	/* "strace: Process N attached with M threads": every thread is traced from then on. */
	for (;;) {
		ssize_t n = read(pfd[0], line + len, sizeof(line) - 1 - len);

		if (n <= 0)
			fail_msg("strace did not attach to the server: %.*s", (int)len, line);
		len += (size_t)n;
		line[len] = '\0';
		if (strstr(line, "attached"))
			break;
		if (len == sizeof(line) - 1)
			len = 0;
	}
	close(pfd[0]);
	return sp;
}

void it_server_kill_traced(struct it_server *s, pid_t tracer)
{
	int status;

	assert_int_equal(kill(s->is_pid, SIGKILL), 0);
	assert_int_equal(kill(tracer, SIGKILL), 0);
	assert_int_equal(waitpid(tracer, &status, 0), tracer);
	assert_int_equal(waitpid(s->is_pid, &status, 0), s->is_pid);
	s->is_pid = 0;
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

void it_inotify_wait(int fd, uint32_t mask, const char *name, int timeout_ms)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (;;) {
		ssize_t n;

		if (poll(&p, 1, timeout_ms) != 1)
			fail_msg("no inotify event for %s within %d ms", name, timeout_ms);
		n = read(fd, buf, sizeof(buf));
		assert_true(n > 0);
		for (char *at = buf; at < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)at;

			if ((e->mask & mask) && e->len && !strcmp(e->name, name))
				return;
			at += sizeof(*e) + e->len;
		}
	}
}

int it_server_fds(const struct it_server *s)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)s->is_pid);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}
