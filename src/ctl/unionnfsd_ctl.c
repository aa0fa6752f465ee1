/*
 * unionnfsd-ctl: sends one command to a running unionnfsd over STATE_DIR/control.sock and
 * prints the reply. Exit 0 when the server carried the command out, 1 when it refused it
 * (its reply begins with "error: ") or cannot be reached, 2 on a usage error.
 *
 *   unionnfsd-ctl [--state DIR] COMMAND [ARGS]
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
#define CTL_REPLY_TIMEOUT 30        /* seconds; a reply is composed from memory at once */
#define CTL_ERROR_PREFIX "error: "

static void ctl_usage(FILE *f)
{
	fprintf(f,
		"usage: unionnfsd-ctl [--state DIR] COMMAND [ARGS]\n"
		"  talks to the unionnfsd whose state directory is DIR (default %s)\n"
		"%s",
		CTL_DEFAULT_STATE, CONTROL_COMMANDS_HELP);
}

static int ctl_connect(const char *state, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = CTL_REPLY_TIMEOUT };
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

int main(int argc, char **argv)
{
	const char *state = CTL_DEFAULT_STATE;
	char line[CONTROL_MAX_REQUEST], path[4096], buf[65536];
	size_t used = 0, got = 0;
	bool failed = false, first = true;
	ssize_t n;
	int i, fd;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			ctl_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--state") && i + 1 < argc) {
			state = argv[++i];
		} else if (!strncmp(argv[i], "--state=", 8)) {
			state = argv[i] + 8;
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
		return 2;
	}
	for (; i < argc; i++) {
		n = snprintf(line + used, sizeof(line) - used, "%s%s", used ? " " : "", argv[i]);
		if (n < 0 || (size_t)n >= sizeof(line) - used - 1 || strchr(argv[i], '\n')) {
			fprintf(stderr, "unionnfsd-ctl: the command must be one line shorter than %d bytes\n",
				CONTROL_MAX_REQUEST);
			return 2;
		}
		used += (size_t)n;
	}
	line[used++] = '\n';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", state, CONTROL_SOCKET_NAME) >= sizeof(path)) {
		fprintf(stderr, "unionnfsd-ctl: --state %s is too long\n", state);
		return 1;
	}
	fd = ctl_connect(state, path);
	if (fd < 0)
		return 1;
	if (ctl_send_all(fd, line, used) < 0) {
		fprintf(stderr, "unionnfsd-ctl: cannot send the command to %s: %s\n", path, strerror(errno));
		close(fd);
		return 1;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "unionnfsd-ctl: no complete reply from %s: %s\n", path,
				errno == EAGAIN ? "timed out" : strerror(errno));
			close(fd);
			return 1;
		}
		if (n == 0)
			break;
		if (first) {
			failed = (size_t)n >= strlen(CTL_ERROR_PREFIX) &&
				 !memcmp(buf, CTL_ERROR_PREFIX, strlen(CTL_ERROR_PREFIX));
			first = false;
		}
		fwrite(buf, 1, (size_t)n, failed ? stderr : stdout);
		got += (size_t)n;
	}
	close(fd);
	if (got == 0) {
		fprintf(stderr, "unionnfsd-ctl: the server closed %s without a reply; see its log\n", path);
		return 1;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "unionnfsd-ctl: cannot write the reply: %s\n", strerror(errno));
		return 1;
	}
	return failed ? 1 : 0;
}
