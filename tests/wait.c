#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "wait.h"

#define WAIT_STEP_MAX_MS 20

static int64_t wait_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void wait_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

bool wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
	int64_t deadline = wait_now_ms() + timeout_ms;
	int step = 1;

	while (!cond(arg)) {
		int64_t left = deadline - wait_now_ms();

		if (left < 0)
			return cond(arg);
		/* the poll's interval (nothing to block on), never far past the deadline */
		wait_ms(left < step ? (int)left + 1 : step);
		if (step < WAIT_STEP_MAX_MS)
			step *= 2;
	}
	return true;
}

struct wait_child {
	pid_t wc_pid;
	int wc_status;
	int wc_errno;   /* waitpid's, when it failed */
};

static bool child_exited(void *arg)
{
	struct wait_child *wc = arg;
	pid_t r = waitpid(wc->wc_pid, &wc->wc_status, WNOHANG);

	if (r < 0 && errno != EINTR)
		wc->wc_errno = errno;
	return r == wc->wc_pid || wc->wc_errno != 0;
}

int wait_exit(pid_t pid, int timeout_ms)
{
	struct wait_child wc = { .wc_pid = pid };

	if (!wait_until(child_exited, &wc, timeout_ms)) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (wc.wc_errno != 0) {
		errno = wc.wc_errno;
		return -1;
	}
	return WIFEXITED(wc.wc_status) ? WEXITSTATUS(wc.wc_status) : 128 + WTERMSIG(wc.wc_status);
}

/*
 * Sums the receive queues of the sockets in /proc/net/tcp and tcp6 with local port lport
 * and, unless rport is 0, remote port rport; listen says which state: LISTEN (whose
 * receive queue is its accept queue) or any other. -1 when none matched.
 */
static int tcp_rx_queue(int lport, int rport, bool listen)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	int sum = -1;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		FILE *f = fopen(files[i], "r");
		char line[512];

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned lp, rp, st, tx, rx;

			if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x %x:%x", &lp, &rp,
				   &st, &tx, &rx) != 5)
				continue;
			if ((int)lp != lport || (rport && (int)rp != rport) || (st == 0x0A) != listen)
				continue;
			sum = (sum < 0 ? 0 : sum) + (int)rx;
		}
		fclose(f);
	}
	return sum;
}

int tcp_accept_queue(int port)
{
	return tcp_rx_queue(port, 0, true);
}

int tcp_peer_unread(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t melen = sizeof(me), peerlen = sizeof(peer);

	if (getsockname(fd, (struct sockaddr *)&me, &melen) < 0 ||
	    getpeername(fd, (struct sockaddr *)&peer, &peerlen) < 0)
		return -1;
	/* The peer's socket: its local port is our remote one, and the other way round. */
	return tcp_rx_queue(ntohs(((struct sockaddr_in *)&peer)->sin_port),
			    ntohs(((struct sockaddr_in *)&me)->sin_port), false);
}

static bool accepted(void *arg)
{
	return tcp_accept_queue(*(int *)arg) == 0;
}

bool wait_accepted(int port, int timeout_ms)
{
	return wait_until(accepted, &port, timeout_ms);
}

static bool peer_read(void *arg)
{
	return tcp_peer_unread(*(int *)arg) == 0;
}

bool wait_peer_read(int fd, int timeout_ms)
{
	return wait_until(peer_read, &fd, timeout_ms);
}
