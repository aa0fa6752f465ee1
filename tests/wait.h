/*
 * Waiting for a condition instead of sleeping for a guessed time, for unit and integration
 * tests: a bounded poll, and what the kernel says of a local TCP server's sockets (its
 * accept queue, and what it has not yet read of a connection).
 */
#ifndef TESTS_WAIT_H
#define TESTS_WAIT_H

#include <stdbool.h>
#include <sys/types.h>

/* Polls cond(arg) until it holds (true) or timeout_ms pass (false). */
bool wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

/*
 * A pause where there is no condition to wait for: sampling over a stretch of time. Anything
 * that waits for something to happen uses wait_until instead.
 */
void wait_ms(int ms);

/*
 * Until child pid exits, reaping it: its exit status, or 128 + the signal that ended it.
 * -1 with errno ETIMEDOUT when timeout_ms pass first (it still runs), or with waitpid's errno
 * (ECHILD: no child of ours).
 */
int wait_exit(pid_t pid, int timeout_ms);

/* Connections waiting to be accepted by the listening TCP socket(s) of port; -1: none. */
int tcp_accept_queue(int port);

/* Bytes the local peer of connected TCP socket fd has received but not read; -1: unknown. */
int tcp_peer_unread(int fd);

/* Until the listener of port has accepted every connection offered to it. */
bool wait_accepted(int port, int timeout_ms);

/* Until the local peer of fd has read everything sent to it. */
bool wait_peer_read(int fd, int timeout_ms);

#endif
