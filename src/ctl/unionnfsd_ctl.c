/*
 * unionnfsd-ctl: sends one command to a running unionnfsd over STATE_DIR/control.sock and
 * prints the reply. Exit 0 when the server carried the command out, 1 when it refused it
 * (its reply begins with "error: ") or cannot be reached, 2 on a usage error; for check,
 * 3 when stale records are left in the map and 4 when some records could not be checked.
 * Progress lines of a long command go to stderr on a terminal, nowhere otherwise.
 *
 *   unionnfsd-ctl [--state DIR] [--timeout SECONDS] COMMAND [ARGS]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"

#define CTL_DEFAULT_STATE "/var/lib/unionnfsd"
/*
 * Seconds without a byte from the server before giving up (--timeout, or the environment's
 * UNIONNFSD_CTL_TIMEOUT): a reply is composed from memory at once, and a long command
 * sends progress lines while it moves on.
 */
#define CTL_REPLY_TIMEOUT 30
#define CTL_TIMEOUT_ENV "UNIONNFSD_CTL_TIMEOUT"
#define CTL_ERROR_PREFIX "error: "

enum {
	CTL_EXIT_OK = 0,
	CTL_EXIT_FAILED = 1,          /* refused, or the server cannot be reached */
	CTL_EXIT_USAGE = 2,
	CTL_EXIT_STALE = 3,           /* check: stale records are left in the map */
	CTL_EXIT_CHECK_ERRORS = 4,    /* check: records that could not be checked */
};

/* The reply as it arrives, line by line. */
struct ctl_reply {
	bool cr_tty;                  /* stderr is a terminal: progress is shown there */
	bool cr_progress_shown;       /* a progress line is on the terminal */
	bool cr_first;                /* no line of the reply itself yet */
	bool cr_failed;               /* it begins with "error: " */
	bool cr_totals;               /* check's totals line was seen */
	unsigned long long cr_stale, cr_dropped, cr_errors;
	char cr_line[8192];
	size_t cr_len;
	size_t cr_got;                /* bytes of the reply itself */
};

static void ctl_usage(FILE *f)
{
	fprintf(f,
		"usage: unionnfsd-ctl [--state DIR] [--timeout SECONDS] COMMAND [ARGS]\n"
		"       unionnfsd-ctl --help\n"
		"  talks to the unionnfsd whose state directory is DIR (default %s);\n"
		"  gives up after SECONDS without a word from it (default %d, or $%s)\n"
		"%s"
		"exit status: 0 done, 1 refused or no server, 2 usage; check: 3 stale records\n"
		"  left in the map, 4 records that could not be checked\n",
		CTL_DEFAULT_STATE, CTL_REPLY_TIMEOUT, CTL_TIMEOUT_ENV, CONTROL_COMMANDS_HELP);
}

static int ctl_connect(const char *state, const char *path, int timeout)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout };
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "unionnfsd-ctl: %s is too long for a UNIX socket path; use a shorter state directory\n",
			path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "unionnfsd-ctl: cannot make a socket: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return fd;
	switch (errno) {
	case ENOENT:
	case ENOTDIR:
		fprintf(stderr, "unionnfsd-ctl: no unionnfsd is running with state directory %s (no %s); start it or pass --state\n",
			state, path);
		break;
	case ECONNREFUSED:
		fprintf(stderr, "unionnfsd-ctl: nothing answers on %s (left behind by a unionnfsd that died?); start unionnfsd with --state %s, it replaces the socket\n",
			path, state);
		break;
	case EACCES:
	case EPERM:
		fprintf(stderr, "unionnfsd-ctl: permission denied on %s; run unionnfsd-ctl as root or as the user unionnfsd runs as\n",
			path);
		break;
	default:
		fprintf(stderr, "unionnfsd-ctl: cannot connect to %s: %s\n", path, strerror(errno));
	}
	close(fd);
	return -1;
}

static int ctl_send_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A progress line: on a terminal it replaces the one before; elsewhere it is dropped. */
static void ctl_show_progress(struct ctl_reply *r, const char *what)
{
	if (!r->cr_tty)
		return;
	fprintf(stderr, "\r%s\033[K", what);
	fflush(stderr);
	r->cr_progress_shown = true;
}

/* One line of the reply (newline included, when it has one). */
static void ctl_reply_line(struct ctl_reply *r, const char *line, size_t len)
{
	const size_t plen = strlen(CONTROL_PROGRESS_PREFIX);
	unsigned long long stale, dropped, errors;

	if (r->cr_first && len > plen && !memcmp(line, CONTROL_PROGRESS_PREFIX, plen)) {
		char what[sizeof(r->cr_line)];
		size_t n = len - plen;

		memcpy(what, line + plen, n);
		while (n > 0 && (what[n - 1] == '\n' || what[n - 1] == '\r'))
			n--;
		what[n] = '\0';
		ctl_show_progress(r, what);
		return;
	}
	if (r->cr_progress_shown) {
		fprintf(stderr, "\r\033[K");
		r->cr_progress_shown = false;
	}
	if (r->cr_first) {
		r->cr_failed = len >= strlen(CTL_ERROR_PREFIX) &&
			       !memcmp(line, CTL_ERROR_PREFIX, strlen(CTL_ERROR_PREFIX));
		r->cr_first = false;
	}
	if (sscanf(line, CONTROL_CHECK_TOTALS, &stale, &dropped, &errors) == 3) {
		r->cr_totals = true;
		r->cr_stale = stale;
		r->cr_dropped = dropped;
		r->cr_errors = errors;
	}
	fwrite(line, 1, len, r->cr_failed ? stderr : stdout);
	r->cr_got += len;
}

/* Bytes as they arrive, cut into lines (a line longer than the buffer goes out in parts). */
static void ctl_reply_feed(struct ctl_reply *r, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		r->cr_line[r->cr_len++] = buf[i];
		if (buf[i] == '\n' || r->cr_len == sizeof(r->cr_line) - 1) {
			r->cr_line[r->cr_len] = '\0';
			ctl_reply_line(r, r->cr_line, r->cr_len);
			r->cr_len = 0;
		}
	}
}

static void ctl_reply_end(struct ctl_reply *r)
{
	if (r->cr_len > 0) {
		r->cr_line[r->cr_len] = '\0';
		ctl_reply_line(r, r->cr_line, r->cr_len);
		r->cr_len = 0;
	}
	if (r->cr_progress_shown)
		fprintf(stderr, "\r\033[K");
	r->cr_progress_shown = false;
}

/* The exit status a finished reply to command (its first word) calls for. */
static int ctl_exit_status(const struct ctl_reply *r, const char *command)
{
	if (r->cr_failed)
		return CTL_EXIT_FAILED;
	if (strcmp(command, "check") != 0)
		return CTL_EXIT_OK;
	if (!r->cr_totals)
		return CTL_EXIT_FAILED; /* cut short (the server stopping): no verdict */
	if (r->cr_errors > 0)
		return CTL_EXIT_CHECK_ERRORS;
	return r->cr_stale > r->cr_dropped ? CTL_EXIT_STALE : CTL_EXIT_OK;
}

/* SECONDS of --timeout or the environment: 1 to a day, else -1. */
static int ctl_parse_timeout(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 86400)
		return -1;
	return (int)v;
}

int main(int argc, char **argv)
{
	const char *state = CTL_DEFAULT_STATE, *env = getenv(CTL_TIMEOUT_ENV), *command;
	char line[CONTROL_MAX_REQUEST], path[4096], buf[65536];
	static struct ctl_reply reply;
	size_t used = 0;
	ssize_t n;
	int i, fd, timeout = CTL_REPLY_TIMEOUT;

	if (env != NULL && *env != '\0' && (timeout = ctl_parse_timeout(env)) < 0) {
		fprintf(stderr, "unionnfsd-ctl: %s=%s: not a number of seconds from 1 to 86400\n",
			CTL_TIMEOUT_ENV, env);
		return CTL_EXIT_USAGE;
	}

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			ctl_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--state") && i + 1 < argc) {
			state = argv[++i];
		} else if (!strncmp(argv[i], "--state=", 8)) {
			state = argv[i] + 8;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			if ((timeout = ctl_parse_timeout(argv[++i])) < 0) {
				fprintf(stderr, "unionnfsd-ctl: --timeout %s: not a number of seconds from 1 to 86400\n",
					argv[i]);
				return CTL_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else {
			/* Not ours: an argument of the command, such as reset's --force. */
			break;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "unionnfsd-ctl: no command given\n");
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	command = argv[i];
	for (; i < argc; i++) {
		n = snprintf(line + used, sizeof(line) - used, "%s%s", used ? " " : "", argv[i]);
		if (n < 0 || (size_t)n >= sizeof(line) - used - 1 || strchr(argv[i], '\n')) {
			fprintf(stderr, "unionnfsd-ctl: the command must be one line shorter than %d bytes\n",
				CONTROL_MAX_REQUEST);
			return CTL_EXIT_USAGE;
		}
		used += (size_t)n;
	}
	line[used++] = '\n';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", state, CONTROL_SOCKET_NAME) >= sizeof(path)) {
		fprintf(stderr, "unionnfsd-ctl: --state %s is too long\n", state);
		return 1;
	}
	fd = ctl_connect(state, path, timeout);
	if (fd < 0)
		return 1;
	if (ctl_send_all(fd, line, used) < 0) {
		fprintf(stderr, "unionnfsd-ctl: cannot send the command to %s: %s\n", path, strerror(errno));
		close(fd);
		return 1;
	}
	shutdown(fd, SHUT_WR);
	reply.cr_tty = isatty(STDERR_FILENO);
	reply.cr_first = true;
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ctl_reply_end(&reply);
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				fprintf(stderr, "unionnfsd-ctl: no complete reply from %s: nothing came for %d s (no progress either): the server is stuck or overloaded (see its log); if it is only slow, raise --timeout\n",
					path, timeout);
			else
				fprintf(stderr, "unionnfsd-ctl: no complete reply from %s: %s\n", path,
					strerror(errno));
			close(fd);
			return CTL_EXIT_FAILED;
		}
		if (n == 0)
			break;
		ctl_reply_feed(&reply, buf, (size_t)n);
	}
	close(fd);
	ctl_reply_end(&reply);
	if (reply.cr_got == 0) {
		fprintf(stderr, "unionnfsd-ctl: the server closed %s without a reply; see its log\n", path);
		return 1;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "unionnfsd-ctl: cannot write the reply: %s\n", strerror(errno));
		return 1;
	}
	return ctl_exit_status(&reply, command);
}
