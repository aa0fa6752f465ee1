/*
 * The --metrics endpoint (metrics.h): the statistics as Prometheus text over HTTP/1.0,
 * one GET per connection.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "log.h"
#include "metrics.h"
#include "nlm_locks.h"
#include "stats.h"

/* A response being composed: stats_appendf's growing string and its first error. */
struct metrics_out {
	char *mo_buf;
	size_t mo_len, mo_cap;
	int mo_err;
};

#define metrics_put(o, ...) \
	do { \
		if ((o)->mo_err == 0) \
			(o)->mo_err = stats_appendf(&(o)->mo_buf, &(o)->mo_len, &(o)->mo_cap, __VA_ARGS__); \
	} while (0)

static char *metrics_done(struct metrics_out *o)
{
	if (o->mo_err != 0) {
		free(o->mo_buf);
		return NULL;
	}
	return o->mo_buf;
}

char *metrics_response(const char *status, const char *body)
{
	struct metrics_out o = { 0 };

	metrics_put(&o, "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", status,
		    body ? strlen(body) : 0, body ? body : "");
	return metrics_done(&o);
}

char *metrics_answer(const char *head, long long uptime, unsigned mounts,
		     const struct locks_counts *locks, uint64_t lock_callbacks)
{
	struct metrics_out o = { 0 };
	size_t plen;
	const char *path;
	char *body, *resp;

	if (strncmp(head, "GET ", 4) != 0)
		return metrics_response("405 Method Not Allowed", "only GET /metrics is served\n");
	path = head + 4;
	plen = strcspn(path, " \r\n?");
	if (!(plen == 1 && path[0] == '/') && !(plen == 8 && !strncmp(path, "/metrics", 8)))
		return metrics_response("404 Not Found", "the statistics are at /metrics\n");
	o.mo_err = stats_prometheus(&o.mo_buf, &o.mo_len, &o.mo_cap);
	metrics_put(&o, "# HELP unionnfsd_uptime_seconds Seconds since the server started.\n"
		    "# TYPE unionnfsd_uptime_seconds gauge\nunionnfsd_uptime_seconds %lld\n"
		    "# HELP unionnfsd_mounts Entries of the MOUNT list (mounted and not unmounted).\n"
		    "# TYPE unionnfsd_mounts gauge\nunionnfsd_mounts %u\n", uptime, mounts);
	if (locks != NULL)
		metrics_put(&o, "# HELP unionnfsd_locks_held NLM byte-range locks held (ranges: a lock "
			    "split by a partial unlock counts twice).\n"
			    "# TYPE unionnfsd_locks_held gauge\nunionnfsd_locks_held %llu\n"
			    "# HELP unionnfsd_lock_waiters Blocked NLM lock requests waiting for a "
			    "conflicting lock to go.\n"
			    "# TYPE unionnfsd_lock_waiters gauge\nunionnfsd_lock_waiters %llu\n"
			    "# HELP unionnfsd_lock_hosts Clients holding NLM locks or waiting for one.\n"
			    "# TYPE unionnfsd_lock_hosts gauge\nunionnfsd_lock_hosts %llu\n"
			    "# HELP unionnfsd_locked_files Files with NLM locks or waiters.\n"
			    "# TYPE unionnfsd_locked_files gauge\nunionnfsd_locked_files %llu\n"
			    "# HELP unionnfsd_lock_callbacks_pending NLM GRANTED callbacks to clients "
			    "queued or being retried.\n"
			    "# TYPE unionnfsd_lock_callbacks_pending gauge\n"
			    "unionnfsd_lock_callbacks_pending %llu\n",
			    (unsigned long long)locks->lc_locks,
			    (unsigned long long)locks->lc_waiters,
			    (unsigned long long)locks->lc_hosts,
			    (unsigned long long)locks->lc_objects,
			    (unsigned long long)lock_callbacks);
	body = metrics_done(&o);
	if (body == NULL)
		return NULL;
	resp = metrics_response("200 OK", body);
	free(body);
	return resp;
}

int metrics_listen(const char *addrport, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon = strrchr(addrport, ':');
	bool v6 = addrport[0] == '[';
	size_t len;
	int one = 1, fd;

	/* config.c checked the form; this only takes it apart. */
	memset(&ss, 0, sizeof(ss));
	len = colon ? (size_t)(colon - addrport) - (v6 ? 2 : 0) : 0;
	if (colon == NULL || len == 0 || len >= sizeof(host)) {
		err_set(err, errlen, "--metrics %s: not ADDR:PORT", addrport);
		return -1;
	}
	memcpy(host, addrport + (v6 ? 1 : 0), len);
	host[len] = '\0';
	if (v6) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			len = 0;
	} else {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			len = 0;
	}
	if (len == 0) {
		err_set(err, errlen, "--metrics %s: not a numeric address", addrport);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, v6 ? sizeof(*sin6) : sizeof(*sin)) < 0 ||
	    listen(fd, CONTROL_HTTP_MAX_CONNS) < 0) {
		err_set(err, errlen, "--metrics %s: %s; pick another address or port, or stop what uses it",
			addrport, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}
