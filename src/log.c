/*
 * Logging. In the foreground each message becomes one write(2) of a whole line, so lines
 * from several threads never interleave; as a daemon it goes to syslog (thread-safe in
 * glibc). Debug messages are dropped unless UNIONNFSD_DEBUG is set in the environment, so
 * per-request tracing costs nothing in normal operation. Messages carry client-supplied text
 * (paths, names, host names), so control characters are replaced before they are written:
 * a hostile client cannot forge log lines with an embedded newline.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024

static bool log_to_stderr = true;
static bool log_debug_on;
static char log_ident[32] = "unionnfsd";

void log_init(bool to_stderr, const char *ident)
{
	const char *dbg = getenv("UNIONNFSD_DEBUG");

	log_to_stderr = to_stderr;
	log_debug_on = dbg && *dbg && strcmp(dbg, "0") != 0;
	if (ident && *ident)
		snprintf(log_ident, sizeof(log_ident), "%s", ident);
	if (!to_stderr)
		openlog(log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Replaces control characters (a trailing newline dropped first) with '?'; returns the length. */
static int log_scrub(char *s, int len)
{
	int i;

	if (len > 0 && s[len - 1] == '\n')
		len--;
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = '?';
	return len;
}

void log_msg(int priority, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;
	int saved = errno;    /* callers may log and then look at errno */
	int n, len;
	ssize_t w;

	if (LOG_PRI(priority) == LOG_DEBUG && !log_debug_on)
		goto out;
	n = log_to_stderr ? snprintf(line, sizeof(line), "%s: ", log_ident) : 0;
	va_start(ap, fmt);
	len = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (len < 0)
		goto out;
	len += n;
	if (len > (int)sizeof(line) - 2)
		len = (int)sizeof(line) - 2;    /* keep room for the newline: truncate, never split */
	len = n + log_scrub(line + n, len - n);
	if (!log_to_stderr) {
		line[len] = '\0';
		syslog(priority, "%s", line);
		goto out;
	}
	line[len++] = '\n';
	for (n = 0; n < len; n += (int)w) {
		w = write(STDERR_FILENO, line + n, (size_t)(len - n));
		if (w < 0 && errno == EINTR) {
			w = 0;
			continue;
		}
		if (w <= 0)
			break;
	}
out:
	errno = saved;
}

void err_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
