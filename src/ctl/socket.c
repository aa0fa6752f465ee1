/*
 * The control socket (include/control.h): accept, read one bounded line, hand it to
 * control.c, write its reply, close; and the --metrics listener's connections. All on the
 * loop; every socket is non-blocking.
 *
 * The socket's file is an exception to fsio (include/README): bind(2) names the socket by
 * a path, not by a directory fd and a name, so clearing it (ctl_clear_path), setting its
 * mode, noting its identity (control_open) and removing it (control_close) go by that same
 * path, resolved as bind resolves it, or they could act on another file than the one bound.
 */
#include <errno.h>
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "ctl_internal.h"
#include "log.h"
#include "metrics.h"

#define CTL_ACCEPT_BACKOFF 1.0      /* seconds accepting pauses when out of descriptors */
#define CTL_WARN_EVERY 60.0         /* seconds between repeated warnings */

/* Takes a descriptor back into reserve once the connection that used it is gone. */
static void ctl_spare_take(struct control *ctl)
{
	if (ctl->ct_spare < 0)
		ctl->ct_spare = eventfd(0, EFD_CLOEXEC);
}

static void ctl_conn_close(struct ctl_conn *c)
{
	struct control *ctl = c->cn_ctl;

	ev_io_stop(ctl->ct_loop, &c->cn_rio);
	ev_io_stop(ctl->ct_loop, &c->cn_wio);
	ev_timer_stop(ctl->ct_loop, &c->cn_timer);
	if (ctl->ct_check_conn == c)
		ctl->ct_check_conn = NULL;
	close(c->cn_fd);
	if (c->cn_prev)
		c->cn_prev->cn_next = c->cn_next;
	else
		ctl->ct_conns = c->cn_next;
	if (c->cn_next)
		c->cn_next->cn_prev = c->cn_prev;
	if (c->cn_http)
		ctl->ct_nhttp--;
	else
		ctl->ct_nconns--;
	/* Its descriptor is free now: the reserve is taken back if it was used or lost. */
	ctl_spare_take(ctl);
	free(c->cn_out);
	free(c);
}

/* Writes what the socket takes; closes the connection once all is out or on an error. */
void ctl_conn_flush(struct ctl_conn *c)
{
	ssize_t n;

	while (c->cn_outoff < c->cn_outlen) {
		n = send(c->cn_fd, c->cn_out + c->cn_outoff, c->cn_outlen - c->cn_outoff, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(c->cn_ctl->ct_loop, &c->cn_wio);
			return;
		}
		if (n <= 0)
			break;
		c->cn_outoff += (size_t)n;
	}
	if (c->cn_streaming && c->cn_outoff == c->cn_outlen) {
		free(c->cn_out);
		c->cn_out = NULL;
		c->cn_outlen = c->cn_outoff = 0;
		return;
	}
	ctl_conn_close(c);
}

/* out after what is still to go out of c (a progress line); out is freed. */
static char *ctl_conn_queue(struct ctl_conn *c, char *out)
{
	size_t left = c->cn_outlen - c->cn_outoff;
	char *all;

	if (c->cn_out == NULL || out == NULL)
		return out;
	all = malloc(left + strlen(out) + 1);
	if (all != NULL) {
		memcpy(all, c->cn_out + c->cn_outoff, left);
		strcpy(all + left, out);
	}
	free(out);
	free(c->cn_out);
	c->cn_out = NULL;
	c->cn_outlen = c->cn_outoff = 0;
	return all;
}

/* Stops reading and sends out (malloc()ed; NULL: out of memory), then closes. */
void ctl_conn_send(struct ctl_conn *c, char *out)
{
	static const char oom[] = "error: out of memory in the server; try again\n";

	ev_io_stop(c->cn_ctl->ct_loop, &c->cn_rio);
	c->cn_streaming = false;
	out = ctl_conn_queue(c, out);
	free(c->cn_out);
	c->cn_out = out;
	c->cn_outoff = 0;
	if (c->cn_out == NULL)
		c->cn_out = strdup(oom);
	if (c->cn_out == NULL) {
		ctl_conn_close(c);
		return;
	}
	c->cn_outlen = strlen(c->cn_out);
	ctl_conn_flush(c);
}

/*
 * Appends what the peer sent (up to room bytes) to cn_in, NUL-terminated: the count (0 at
 * end of file), or -1 when there is nothing to do now (nothing to read, or c was closed).
 */
static ssize_t ctl_recv(struct ctl_conn *c, size_t room)
{
	ssize_t n = recv(c->cn_fd, c->cn_in + c->cn_inlen, room, 0);

	if (n < 0) {
		if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			ctl_conn_close(c);
		return -1;
	}
	c->cn_inlen += (size_t)n;
	c->cn_in[c->cn_inlen] = '\0';
	return n;
}

/* Reads a request head up to its blank line; the body, if any, is never read. */
static void ctl_http_read(struct ctl_conn *c)
{
	ssize_t n = ctl_recv(c, METRICS_HEAD_MAX - c->cn_inlen);

	if (n < 0)
		return;
	if (memchr(c->cn_in, '\0', c->cn_inlen) != NULL) {
		ctl_conn_send(c, metrics_response("400 Bad Request", "NUL byte in the request\n"));
		return;
	}
	if (strstr(c->cn_in, "\r\n\r\n") == NULL && strstr(c->cn_in, "\n\n") == NULL) {
		if (n > 0 && c->cn_inlen < METRICS_HEAD_MAX)
			return;
		if (n > 0) {
			ctl_conn_send(c, metrics_response("431 Request Header Fields Too Large",
							  "request head too large\n"));
			return;
		}
	}
	ctl_conn_send(c, ctl_metrics(c->cn_ctl, c->cn_in));
}

static void ctl_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_conn *c = w->data;
	size_t room = CONTROL_MAX_REQUEST - c->cn_inlen;
	char *nl;
	ssize_t n;

	(void)loop;
	(void)revents;
	if (c->cn_http) {
		ctl_http_read(c);
		return;
	}
	n = ctl_recv(c, room);
	if (n < 0)
		return;
	nl = memchr(c->cn_in, '\n', c->cn_inlen);
	if (nl != NULL) {
		*nl = '\0';
	} else if (n > 0 && c->cn_inlen < CONTROL_MAX_REQUEST) {
		return;
	} else if (n > 0) {
		/* Longer than a request may be: answer without reading the rest. */
		ctl_conn_send(c, strdup("error: the request line is too long; send one command such as `status` and a newline\n"));
		return;
	}
	/* A NUL inside the line would hide the rest of it from the parser. */
	if (memchr(c->cn_in, '\0', nl != NULL ? (size_t)(nl - c->cn_in) : c->cn_inlen) != NULL)
		ctl_conn_send(c, strdup("error: the request has a NUL byte; send one line of text such as `status`\n"));
	else
		ctl_request(c);
}

static void ctl_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_conn *c = w->data;

	(void)revents;
	ev_io_stop(loop, w);
	ctl_conn_flush(c);
}

static void ctl_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	ctl_conn_close(w->data);
}

/* Only root and the server's own user may steer it, whatever the socket's mode says. */
static bool ctl_peer_allowed(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return false;
	return uc.uid == 0 || uc.uid == geteuid();
}

/* Out of descriptors: accepting again at once would spin, so the listener rests a while. */
static void ctl_accept_pause(struct control *ctl, ev_io *w)
{
	ev_timer *t = w == &ctl->ct_accept ? &ctl->ct_backoff : &ctl->ct_http_backoff;

	if (ev_now(ctl->ct_loop) - ctl->ct_emfile_warned >= CTL_WARN_EVERY) {
		ctl->ct_emfile_warned = ev_now(ctl->ct_loop);
		log_warn("%s: cannot accept a connection: %s; pausing for %.0f s (raise the open files limit, e.g. ulimit -n or LimitNOFILE=)",
			 w == &ctl->ct_accept ? "control socket" : "--metrics", strerror(errno),
			 CTL_ACCEPT_BACKOFF);
	}
	ev_io_stop(ctl->ct_loop, w);
	ev_timer_set(t, CTL_ACCEPT_BACKOFF, 0.);
	ev_timer_start(ctl->ct_loop, t);
}

static void ctl_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct control *ctl = w->data;

	(void)revents;
	ev_timer_stop(loop, w);
	ev_io_start(loop, w == &ctl->ct_backoff ? &ctl->ct_accept : &ctl->ct_http_accept);
}

/*
 * Accepts on w's socket. Without a descriptor left, the control socket uses its reserve
 * one (one connection at a time): `unionnfsd-ctl status` works while client connections
 * or views hold every other. Returns the descriptor, or -1 with errno set.
 */
static int ctl_accept_one(struct control *ctl, ev_io *w)
{
	int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || w != &ctl->ct_accept ||
	    ctl->ct_spare < 0)
		return fd;
	close(ctl->ct_spare);
	ctl->ct_spare = -1;
	fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		ctl_spare_take(ctl);
		errno = e;
	}
	return fd;
}

/* Closes the oldest metrics connection still waiting for its request, for a new one. */
static bool ctl_http_make_room(struct control *ctl)
{
	struct ctl_conn *c, *oldest = NULL;

	/* The list is newest first. */
	for (c = ctl->ct_conns; c != NULL; c = c->cn_next)
		if (c->cn_http && c->cn_out == NULL)
			oldest = c;
	if (oldest == NULL)
		return false;
	ctl_conn_close(oldest);
	return true;
}

/* Whether the new connection on w may be served: within its budget, and an allowed user. */
static bool ctl_admit(struct control *ctl, ev_io *w, int fd)
{
	if (w == &ctl->ct_http_accept)
		return ctl->ct_nhttp < CONTROL_HTTP_MAX_CONNS || ctl_http_make_room(ctl);
	return ctl->ct_nconns < CONTROL_MAX_CONNS && ctl_peer_allowed(fd);
}

static void ctl_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct control *ctl = w->data;
	struct ctl_conn *c;
	int fd;

	(void)revents;
	for (int i = 0; i < CONTROL_MAX_CONNS; i++) {
		fd = ctl_accept_one(ctl, w);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				ctl_accept_pause(ctl, w);
			else if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		if (!ctl_admit(ctl, w, fd) || (c = calloc(1, sizeof(*c))) == NULL) {
			close(fd);
			ctl_spare_take(ctl);
			continue;
		}
		c->cn_http = w == &ctl->ct_http_accept;
		c->cn_ctl = ctl;
		c->cn_fd = fd;
		ev_io_init(&c->cn_rio, ctl_read_cb, fd, EV_READ);
		ev_io_init(&c->cn_wio, ctl_write_cb, fd, EV_WRITE);
		ev_timer_init(&c->cn_timer, ctl_timeout_cb,
			      c->cn_http ? CONTROL_HTTP_TIMEOUT : CONTROL_TIMEOUT, 0);
		c->cn_rio.data = c->cn_wio.data = c->cn_timer.data = c;
		c->cn_next = ctl->ct_conns;
		if (c->cn_next)
			c->cn_next->cn_prev = c;
		ctl->ct_conns = c;
		if (c->cn_http)
			ctl->ct_nhttp++;
		else
			ctl->ct_nconns++;
		ev_io_start(loop, &c->cn_rio);
		ev_timer_start(loop, &c->cn_timer);
	}
}

/* Replaces a stale socket file; anything else at the path is the admin's and stays. */
static int ctl_clear_path(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : (err_set(err, errlen, "%s: %s", path, strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		err_set(err, errlen, "%s exists and is not a socket; move it away so the control socket can be made there",
			path);
		return -1;
	}
	if (unlink(path) < 0) {
		err_set(err, errlen, "cannot remove the stale control socket %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int control_open(struct ev_loop *loop, const struct control_env *env, struct control **out,
		 char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct control *ctl;
	struct stat st;
	int n;

	*out = NULL;
	ctl = calloc(1, sizeof(*ctl));
	if (ctl == NULL) {
		err_set(err, errlen, "control socket: out of memory");
		return -1;
	}
	ctl->ct_loop = loop;
	ctl->ct_env = *env;
	ctl->ct_fd = -1;
	ctl->ct_http_fd = -1;
	ctl->ct_spare = -1;
	ctl->ct_started = time(NULL);
	n = snprintf(ctl->ct_path, sizeof(ctl->ct_path), "%s/%s", env->ce_cfg->cf_state_dir,
		     CONTROL_SOCKET_NAME);
	if (n < 0 || (size_t)n >= sizeof(ctl->ct_path)) {
		err_set(err, errlen, "the control socket path %s/%s is longer than a UNIX socket path may be (%zu bytes); use a shorter --state directory",
			env->ce_cfg->cf_state_dir, CONTROL_SOCKET_NAME, sizeof(ctl->ct_path) - 1);
		free(ctl);
		return -1;
	}
	memcpy(sun.sun_path, ctl->ct_path, (size_t)n + 1);
	if (ctl_clear_path(ctl->ct_path, err, errlen) < 0) {
		free(ctl);
		return -1;
	}
	ctl->ct_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* Linux gives the socket file the mode of the unbound socket: 0600 from the start. */
	if (ctl->ct_fd < 0 || fchmod(ctl->ct_fd, 0600) < 0 ||
	    bind(ctl->ct_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(ctl->ct_path, 0600) < 0 || stat(ctl->ct_path, &st) < 0 ||
	    listen(ctl->ct_fd, CONTROL_MAX_CONNS) < 0) {
		err_set(err, errlen, "cannot make the control socket %s: %s; check that the state directory is writable",
			ctl->ct_path, strerror(errno));
		if (ctl->ct_fd >= 0)
			close(ctl->ct_fd);
		free(ctl);
		return -1;
	}
	ctl->ct_dev = st.st_dev;
	ctl->ct_ino = st.st_ino;
	ctl_spare_take(ctl);
	if (ctl->ct_spare < 0)
		log_warn("control socket: cannot keep a descriptor in reserve: %s; it may not answer while clients hold every descriptor",
			 strerror(errno));
	ev_timer_init(&ctl->ct_backoff, ctl_backoff_cb, CTL_ACCEPT_BACKOFF, 0.);
	ctl->ct_backoff.data = ctl;
	ev_timer_init(&ctl->ct_http_backoff, ctl_backoff_cb, CTL_ACCEPT_BACKOFF, 0.);
	ctl->ct_http_backoff.data = ctl;
	ctl_jobs_init(ctl);
	ev_io_init(&ctl->ct_accept, ctl_accept_cb, ctl->ct_fd, EV_READ);
	ctl->ct_accept.data = ctl;
	ev_io_start(loop, &ctl->ct_accept);
	*out = ctl;
	return 0;
}

void control_close(struct control *ctl)
{
	struct stat st;

	if (ctl == NULL)
		return;
	ctl_jobs_close(ctl);
	while (ctl->ct_conns != NULL)
		ctl_conn_close(ctl->ct_conns);
	ev_io_stop(ctl->ct_loop, &ctl->ct_accept);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_backoff);
	ev_timer_stop(ctl->ct_loop, &ctl->ct_http_backoff);
	close(ctl->ct_fd);
	if (ctl->ct_spare >= 0)
		close(ctl->ct_spare);
	if (ctl->ct_http_fd >= 0) {
		ev_io_stop(ctl->ct_loop, &ctl->ct_http_accept);
		close(ctl->ct_http_fd);
	}
	if (lstat(ctl->ct_path, &st) == 0 && st.st_dev == ctl->ct_dev && st.st_ino == ctl->ct_ino)
		unlink(ctl->ct_path);
	free(ctl);
}

int control_metrics_open(struct control *ctl, const char *addrport, char *err, size_t errlen)
{
	int fd = metrics_listen(addrport, err, errlen);

	if (fd < 0)
		return -1;
	ctl->ct_http_fd = fd;
	ev_io_init(&ctl->ct_http_accept, ctl_accept_cb, fd, EV_READ);
	ctl->ct_http_accept.data = ctl;
	ev_io_start(ctl->ct_loop, &ctl->ct_http_accept);
	return 0;
}
