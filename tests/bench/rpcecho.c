/*
 * rpcecho: the benchmark's "limit" — the least any RPC server can do per call on this machine.
 * One thread answers every call on TCP 127.0.0.1:PORT with an empty success (what NULL
 * returns), reading the record marking and nothing else.
 *   rpcecho --port N [--sleep]
 * By default it polls its sockets without ever sleeping, so no call pays a thread's wake-up;
 * --sleep waits in poll() instead, which shows what waking an idle CPU costs here. Runs until
 * killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RE_MAX_CONNS 64
#define RE_BUF 65536
#define RE_LAST_FRAGMENT 0x80000000u

struct re_conn {
	int rc_fd;
	size_t rc_have;
	unsigned char rc_buf[RE_BUF];
};

static struct re_conn re_conns[RE_MAX_CONNS];

static void re_close(struct re_conn *c)
{
	close(c->rc_fd);
	c->rc_fd = -1;
	c->rc_have = 0;
}

/* Answers every complete record in the buffer; a record that cannot fit closes the link. */
static void re_serve(struct re_conn *c)
{
	size_t off = 0;

	for (;;) {
		uint32_t mark, len, reply[7];

		if (c->rc_have - off < 8)
			break;
		memcpy(&mark, c->rc_buf + off, 4);
		len = ntohl(mark) & ~RE_LAST_FRAGMENT;
		if (len + 4 > RE_BUF || len < 4) {
			re_close(c);
			return;
		}
		if (c->rc_have - off < 4 + (size_t)len)
			break;
		reply[0] = htonl(RE_LAST_FRAGMENT | 24);
		memcpy(&reply[1], c->rc_buf + off + 4, 4); /* xid */
		reply[2] = htonl(1); /* REPLY */
		reply[3] = 0;        /* MSG_ACCEPTED */
		reply[4] = 0;        /* AUTH_NONE verifier, empty */
		reply[5] = 0;
		reply[6] = 0;        /* SUCCESS */
		if (send(c->rc_fd, reply, sizeof(reply), MSG_NOSIGNAL) != sizeof(reply)) {
			re_close(c);
			return;
		}
		off += 4 + len;
	}
	memmove(c->rc_buf, c->rc_buf + off, c->rc_have - off);
	c->rc_have -= off;
}

static int re_listen(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 64)) {
		close(fd);
		return -1;
	}
	return fd;
}

static void re_accept(int lfd)
{
	int fd, one = 1, i;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (i = 0; i < RE_MAX_CONNS && re_conns[i].rc_fd >= 0; i++)
			;
		if (i == RE_MAX_CONNS) {
			close(fd);
			continue;
		}
		re_conns[i].rc_fd = fd;
		re_conns[i].rc_have = 0;
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "sleep", no_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct pollfd pfd[RE_MAX_CONNS + 1];
	int port = 0, timeout = 0, lfd, c, i;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'p')
			port = atoi(optarg);
		else if (c == 's')
			timeout = -1;
		else
			return 2;
	}
	if (port <= 0 || port > 65535) {
		fprintf(stderr, "usage: rpcecho --port N [--sleep]\n");
		return 2;
	}
	lfd = re_listen(port);
	if (lfd < 0) {
		fprintf(stderr, "rpcecho: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return 1;
	}
	for (i = 0; i < RE_MAX_CONNS; i++)
		re_conns[i].rc_fd = -1;
	for (;;) {
		int n = 0;

		pfd[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < RE_MAX_CONNS; i++)
			if (re_conns[i].rc_fd >= 0)
				pfd[n++] = (struct pollfd){ .fd = re_conns[i].rc_fd, .events = POLLIN };
		if (poll(pfd, n, timeout) <= 0)
			continue;
		if (pfd[0].revents)
			re_accept(lfd);
		for (i = 0; i < RE_MAX_CONNS; i++) {
			struct re_conn *rc = &re_conns[i];
			ssize_t got;

			if (rc->rc_fd < 0)
				continue;
			got = recv(rc->rc_fd, rc->rc_buf + rc->rc_have, RE_BUF - rc->rc_have,
				   MSG_DONTWAIT);
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
				re_close(rc);
				continue;
			}
			if (got > 0) {
				rc->rc_have += (size_t)got;
				re_serve(rc);
			}
		}
	}
}
