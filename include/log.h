/* Logging: stderr in the foreground (-f), syslog as a daemon. Thread-safe. */
#ifndef UNFS_LOG_H
#define UNFS_LOG_H

#include <stdbool.h>
#include <syslog.h>

/* Call once at start-up, before any thread starts. */
void log_init(bool to_stderr, const char *ident);
void log_msg(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
