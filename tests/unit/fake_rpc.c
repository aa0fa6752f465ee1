#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_rpc.h"

#define FAKE_TCP_TIMEOUT_MS 2000

void fake_put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

uint32_t fake_get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

size_t fake_reply(uint8_t *out, uint32_t xid, uint32_t accept_stat, const void *res, size_t rlen)
{
	fake_put32(out, xid);
	fake_put32(out + 4, 1);          /* REPLY */
	fake_put32(out + 8, 0);          /* MSG_ACCEPTED */
	fake_put32(out + 12, 0);         /* verifier AUTH_NULL */
	fake_put32(out + 16, 0);
	fake_put32(out + 20, accept_stat);
	if (rlen)
		memcpy(out + 24, res, rlen);
	return 24 + rlen;
}

size_t fake_reply_denied(uint8_t *out, uint32_t xid)
{
	fake_put32(out, xid);
	fake_put32(out + 4, 1);
	fake_put32(out + 8, 1);          /* MSG_DENIED */
	fake_put32(out + 12, 1);         /* AUTH_ERROR */
	fake_put32(out + 16, 5);         /* AUTH_TOOWEAK */
	return 20;
}

/* Parses a call; false when it is not one. */
static bool parse_call(const uint8_t *b, size_t len, struct fake_call *c)
{
	size_t off = 24;
	uint32_t l;

	if (len < 40 || fake_get32(b + 4) != 0)
		return false;
	c->xid = fake_get32(b);
	c->prog = fake_get32(b + 12);
	c->vers = fake_get32(b + 16);
	c->proc = fake_get32(b + 20);
	c->cred_flavor = fake_get32(b + off);
	l = fake_get32(b + off + 4);
	if (l > 400 || off + 8 + l + 8 > len)
		return false;
	off += 8 + ((l + 3) & ~3u);
	l = fake_get32(b + off + 4);
	if (l > 400 || off + 8 + l > len)
		return false;
	off += 8 + ((l + 3) & ~3u);
	c->args = b + off;
	c->argslen = len - off;
	return true;
}

static void peer_of(const struct sockaddr_in *sin, struct fake_call *c)
{
	inet_ntop(AF_INET, &sin->sin_addr, c->peer, sizeof(c->peer));
	c->peer_port = ntohs(sin->sin_port);
}

/*
 * Replies leave from the address the call was sent to (IP_PKTINFO), as rpcbind and statd
 * do: a server bound to 0.0.0.0 then answers for every loopback address, and a caller's
 * connected socket takes the answer.
 */
static void serve_udp(struct fake_rpc *f)
{
	uint8_t *in = f->fr_buf, out[FAKE_REPLY_MAX];
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	} ctl;
	struct sockaddr_in from;
	struct iovec iov = { in, FAKE_CALL_MAX };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov,
			     .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(f->fr_udp, &mh, 0);
	struct fake_call c = { 0 };
	struct cmsghdr *cm;
	size_t rl;

	if (n <= 0 || !parse_call(in, (size_t)n, &c))
		return;
	peer_of(&from, &c);
	atomic_fetch_add(&f->fr_calls, 1);
	rl = f->fr_fn(f->fr_arg, &c, out);
	if (!rl)
		return;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo *pi = (struct in_pktinfo *)CMSG_DATA(cm);

			pi->ipi_spec_dst = pi->ipi_addr;
			pi->ipi_ifindex = 0;
		}
	iov = (struct iovec){ out, rl };
	mh.msg_namelen = sizeof(from);
	sendmsg(f->fr_udp, &mh, 0);
}

static bool read_full(int fd, uint8_t *b, size_t len)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, FAKE_TCP_TIMEOUT_MS) <= 0)
			return false;
		n = read(fd, b + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

static void serve_tcp(struct fake_rpc *f)
{
	uint8_t mark[4], *in = f->fr_buf, out[FAKE_REPLY_MAX + 4];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int fd = accept(f->fr_tcp, (struct sockaddr *)&from, &fl);
	struct fake_call c = { .tcp = true };
	uint32_t len;
	size_t rl;

	if (fd < 0)
		return;
	if (!read_full(fd, mark, 4) || !((len = fake_get32(mark) & 0x7fffffffu) <= FAKE_CALL_MAX) ||
	    !read_full(fd, in, len) || !parse_call(in, len, &c))
		goto out;
	peer_of(&from, &c);
	atomic_fetch_add(&f->fr_calls, 1);
	rl = f->fr_fn(f->fr_arg, &c, out + 4);
	if (rl) {
		fake_put32(out, 0x80000000u | (uint32_t)rl);
		(void)!write(fd, out, rl + 4);
	} else if (f->fr_nheld < FAKE_HELD_MAX) {
		/* no answer, and the connection stays open: the caller must time out */
		f->fr_held[f->fr_nheld++] = fd;
		return;
	}
out:
	close(fd);
}

static void *fake_thread(void *arg)
{
	struct fake_rpc *f = arg;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = f->fr_stop, .events = POLLIN },
			{ .fd = f->fr_udp, .events = POLLIN },
			{ .fd = f->fr_tcp, .events = POLLIN },
		};

		if (poll(p, f->fr_tcp >= 0 ? 3 : 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (p[1].revents)
			serve_udp(f);
		if (f->fr_tcp >= 0 && p[2].revents)
			serve_tcp(f);
	}
	return NULL;
}

static int bound(int type, const char *addr, uint16_t port, uint16_t *got)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t sl = sizeof(sin);
	int one = 1, fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, addr, &sin.sin_addr);
	/* not for UDP: two such sockets asking for any port could be given the same one */
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 16) < 0) ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*got = ntohs(sin.sin_port);
	return fd;
}

struct fake_rpc *fake_rpc_start(const char *addr, uint16_t udp_port, bool tcp, fake_handler fn,
				void *arg)
{
	struct fake_rpc *f = calloc(1, sizeof(*f));
	pthread_t *t = calloc(1, sizeof(*t));

	if (!f || !t || !(f->fr_buf = malloc(FAKE_CALL_MAX)))
		abort();
	f->fr_fn = fn;
	f->fr_arg = arg;
	f->fr_tcp = -1;
	f->fr_udp = bound(SOCK_DGRAM, addr, udp_port, &f->fr_udp_port);
	if (f->fr_udp >= 0) {
		int one = 1;

		setsockopt(f->fr_udp, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	}
	if (tcp)
		f->fr_tcp = bound(SOCK_STREAM, addr, 0, &f->fr_tcp_port);
	f->fr_stop = eventfd(0, EFD_CLOEXEC);
	if (f->fr_udp < 0 || (tcp && f->fr_tcp < 0) || f->fr_stop < 0 ||
	    pthread_create(t, NULL, fake_thread, f) != 0) {
		free(t);
		free(f->fr_buf);
		free(f);
		return NULL;
	}
	f->fr_thread = t;
	return f;
}

void fake_rpc_stop(struct fake_rpc *f)
{
	uint64_t one = 1;

	if (!f)
		return;
	(void)!write(f->fr_stop, &one, sizeof(one));
	pthread_join(*(pthread_t *)f->fr_thread, NULL);
	free(f->fr_thread);
	close(f->fr_stop);
	close(f->fr_udp);
	for (int i = 0; i < f->fr_nheld; i++)
		close(f->fr_held[i]);
	if (f->fr_tcp >= 0)
		close(f->fr_tcp);
	free(f->fr_buf);
	free(f);
}

static size_t pmap_handler(void *arg, const struct fake_call *c, uint8_t *out)
{
	struct fake_pmap *pm = arg;
	uint8_t port[4] = { 0 };

	if (c->prog != 100000 || c->vers != 2 || c->proc != 3 || c->argslen < 16)
		return fake_reply(out, c->xid, 1 /* PROG_UNAVAIL */, NULL, 0);
	atomic_fetch_add(&pm->getports, 1);
	if (pm->refuse)
		return fake_reply(out, c->xid, 2 /* PROG_MISMATCH */, "\0\0\0\2\0\0\0\2", 8);
	for (unsigned i = 0; i < pm->n; i++)
		if (pm->prog[i] == fake_get32(c->args) && pm->vers[i] == fake_get32(c->args + 4) &&
		    pm->prot[i] == fake_get32(c->args + 8))
			fake_put32(port, pm->port[i]);
	return fake_reply(out, c->xid, 0, port, 4);
}

int fake_pmap_start(struct fake_pmap *pm, const char *addr, uint16_t port)
{
	pm->srv = fake_rpc_start(addr, port, false, pmap_handler, pm);
	return pm->srv ? 0 : -1;
}

void fake_pmap_set(struct fake_pmap *pm, uint32_t prog, uint32_t vers, uint32_t prot, uint32_t port)
{
	unsigned i;

	for (i = 0; i < pm->n; i++)
		if (pm->prog[i] == prog && pm->vers[i] == vers && pm->prot[i] == prot)
			break;
	if (i == FAKE_PMAP_MAX)
		abort();
	pm->prog[i] = prog;
	pm->vers[i] = vers;
	pm->prot[i] = prot;
	pm->port[i] = port;
	if (i == pm->n)
		pm->n = i + 1;
}

void fake_pmap_stop(struct fake_pmap *pm)
{
	fake_rpc_stop(pm->srv);
	pm->srv = NULL;
}
