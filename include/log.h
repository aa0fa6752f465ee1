/* Logging: stderr in the foreground (-f), syslog as a daemon. Thread-safe. */
#ifndef UNFS_LOG_H
#define UNFS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

/* Call once at start-up, before any thread starts. */
void log_init(bool to_stderr, const char *ident);
void log_msg(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Formats a one-line message into a caller's error buffer (the "char *err, size_t errlen"
 * convention of the start-up functions); does nothing when err is NULL or errlen is 0.
 */
void err_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
