/*
 * Portmapper support (RFC 1833): registering with the system rpcbind, or answering
 * portmapper calls ourselves from a small table.
 *
 * The built-in service answers read-only questions only: v2 NULL/GETPORT/DUMP and v3/v4
 * NULL/GETADDR/DUMP/GETTIME (v4 also GETVERSADDR). SET and UNSET are refused (FALSE),
 * CALLIT/BCAST are dropped silently as RFC 1833 asks of calls it cannot forward, and the
 * rest are PROC_UNAVAIL.
 *
 * GETPORT and GETADDR return the port of the exact version when registered, else of any
 * version of the program on that protocol (as rpcbind does, so a client asking for a
 * version we lack learns so from PROG_MISMATCH); GETVERSADDR wants the exact version.
 * Universal addresses carry the address the client reached us on (rq_local).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rpc/rpc.h>
#include <rpc/pmap_clnt.h>
#include <rpc/pmap_prot.h>
#include <rpc/rpcb_clnt.h>
#include <rpc/rpcb_prot.h>

#include "log.h"
#include "portmap.h"

#define PORTMAP_PROG 100000
#define PORTMAP_MAX_MAPS 64
#define PORTMAP_MAX_NETID 32     /* "tcp6" and friends */
#define PORTMAP_MAX_UADDR 128    /* an IPv6 text address and ".p1.p2" */
#define PORTMAP_MAX_OWNER 255
#define PORTMAP_UADDR_LEN (INET6_ADDRSTRLEN + 12)
#define PORTMAP_OWNER "unionnfsd"
#define PORTMAP_PROBE_MS 400
#define PORTMAP_PROBE_TRIES 2

static pthread_mutex_t portmap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct portmap_mapping portmap_table[PORTMAP_MAX_MAPS];
static int portmap_n;
static _Atomic bool portmap_dump_udp = true;

void portmap_builtin_dump_udp(bool answer)
{
	portmap_dump_udp = answer;
}

/*
 * A DUMP reply is many times its call: over UDP, whose source address anyone can forge, it
 * would reflect traffic at others. Lookups answer with less than they are asked.
 */
static bool portmap_dump_refused(const struct rpc_req *rq)
{
	return rq->rq_protocol == IPPROTO_UDP && !portmap_dump_udp;
}

void portmap_builtin_set(const struct portmap_mapping *maps, int n)
{
	if (n > PORTMAP_MAX_MAPS) {
		log_warn("portmap: only the first %d of %d mappings are served", PORTMAP_MAX_MAPS, n);
		n = PORTMAP_MAX_MAPS;
	}
	pthread_mutex_lock(&portmap_lock);
	if (n > 0)
		memcpy(portmap_table, maps, (size_t)n * sizeof(*maps));
	portmap_n = n < 0 ? 0 : n;
	pthread_mutex_unlock(&portmap_lock);
}

/* The port for (prog, vers, prot); any version when anyvers and the exact one is missing. */
static uint32_t portmap_lookup(uint32_t prog, uint32_t vers, uint32_t prot, bool anyvers)
{
	uint32_t port = 0;

	pthread_mutex_lock(&portmap_lock);
	for (int i = 0; i < portmap_n; i++) {
		const struct portmap_mapping *m = &portmap_table[i];

		if (m->pm_prog != prog || m->pm_prot != prot)
			continue;
		if (m->pm_vers == vers) {
			port = m->pm_port;
			break;
		}
		if (anyvers && port == 0)
			port = m->pm_port;
	}
	pthread_mutex_unlock(&portmap_lock);
	return port;
}

/* A snapshot of the table, so no lock is held while building replies. */
static int portmap_snapshot(struct portmap_mapping *out)
{
	int n;

	pthread_mutex_lock(&portmap_lock);
	n = portmap_n;
	memcpy(out, portmap_table, (size_t)n * sizeof(*out));
	pthread_mutex_unlock(&portmap_lock);
	return n;
}

/* ---- universal addresses ---- */

/*
 * "h1.h2.h3.h4.p1.p2" or "x:...:x.p1.p2" for port on the local address of family
 * (AF_INET/AF_INET6) the client reached; the unspecified address when unknown.
 */
static char *portmap_uaddr(struct rpc_req *rq, int family, uint32_t port)
{
	char host[INET6_ADDRSTRLEN];
	char *s = rpc_alloc(rq, PORTMAP_UADDR_LEN);

	if (family == AF_INET6) {
		struct in6_addr a = in6addr_any;

		if (rq->rq_locallen && rq->rq_local.ss_family == AF_INET6)
			a = ((struct sockaddr_in6 *)&rq->rq_local)->sin6_addr;
		inet_ntop(AF_INET6, &a, host, sizeof(host));
	} else {
		struct in_addr a = { .s_addr = htonl(INADDR_ANY) };

		if (rq->rq_locallen && rq->rq_local.ss_family == AF_INET)
			a = ((struct sockaddr_in *)&rq->rq_local)->sin_addr;
		inet_ntop(AF_INET, &a, host, sizeof(host));
	}
	snprintf(s, PORTMAP_UADDR_LEN, "%s.%u.%u", host, (port >> 8) & 0xff, port & 0xff);
	return s;
}

/*
 * Reads a netid: protocol and family. An empty netid means the transport and family of
 * the call itself. False for netids we do not serve.
 */
static bool portmap_netid(const struct rpc_req *rq, const char *netid, uint32_t *prot, int *family)
{
	if (netid == NULL || netid[0] == '\0') {
		*prot = (uint32_t)rq->rq_protocol;
		*family = rq->rq_locallen ? rq->rq_local.ss_family : rq->rq_peer.ss_family;
		if (*family != AF_INET6)
			*family = AF_INET;
		return true;
	}
	if (strcmp(netid, "tcp") == 0 || strcmp(netid, "tcp6") == 0)
		*prot = IPPROTO_TCP;
	else if (strcmp(netid, "udp") == 0 || strcmp(netid, "udp6") == 0)
		*prot = IPPROTO_UDP;
	else
		return false;
	*family = netid[3] == '6' ? AF_INET6 : AF_INET;
	return true;
}

/* rpcb arguments with bounded strings: a hostile length never becomes a huge allocation. */
static bool_t portmap_xdr_rpcb_args(XDR *x, rpcb *r)
{
	return xdr_u_int(x, &r->r_prog) && xdr_u_int(x, &r->r_vers) &&
	       xdr_string(x, &r->r_netid, PORTMAP_MAX_NETID) &&
	       xdr_string(x, &r->r_addr, PORTMAP_MAX_UADDR) &&
	       xdr_string(x, &r->r_owner, PORTMAP_MAX_OWNER);
}

/* ---- handlers ---- */

static enum rpc_outcome pm_null(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args; (void)res;
	return RPC_OUT_REPLY;
}

/* SET/UNSET: the table is ours alone. */
static enum rpc_outcome pm_refuse(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args;
	*(bool_t *)res = FALSE;
	return RPC_OUT_REPLY;
}

/* CALLIT/BCAST: no forwarding, and no error reply either (RFC 1833). */
static enum rpc_outcome pm_drop(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args; (void)res;
	return RPC_OUT_DROP;
}

static enum rpc_outcome pm_getport(struct rpc_req *rq, void *args, void *res)
{
	const struct pmap *p = args;

	(void)rq;
	if (p->pm_prog > UINT32_MAX || p->pm_vers > UINT32_MAX || p->pm_prot > UINT32_MAX)
		*(u_int *)res = 0;
	else
		*(u_int *)res = portmap_lookup((uint32_t)p->pm_prog, (uint32_t)p->pm_vers,
					       (uint32_t)p->pm_prot, true);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome pm_dump2(struct rpc_req *rq, void *args, void *res)
{
	struct portmap_mapping maps[PORTMAP_MAX_MAPS];
	struct pmaplist **tail = res;
	int n;

	(void)args;
	if (portmap_dump_refused(rq))
		return RPC_OUT_DROP;
	n = portmap_snapshot(maps);
	for (int i = 0; i < n; i++) {
		struct pmaplist *e = rpc_alloc(rq, sizeof(*e));

		e->pml_map.pm_prog = maps[i].pm_prog;
		e->pml_map.pm_vers = maps[i].pm_vers;
		e->pml_map.pm_prot = maps[i].pm_prot;
		e->pml_map.pm_port = maps[i].pm_port;
		*tail = e;
		tail = &e->pml_next;
	}
	*tail = NULL;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome pm_getaddr_common(struct rpc_req *rq, const rpcb *r, char **res, bool anyvers)
{
	uint32_t prot, port = 0;
	int family;

	if (portmap_netid(rq, r->r_netid, &prot, &family))
		port = portmap_lookup(r->r_prog, r->r_vers, prot, anyvers);
	/* Not registered: the empty string, never a NULL pointer. */
	*res = port ? portmap_uaddr(rq, family, port) : rpc_alloc(rq, 1);
	return RPC_OUT_REPLY;
}

static enum rpc_outcome pm_getaddr(struct rpc_req *rq, void *args, void *res)
{
	return pm_getaddr_common(rq, args, res, true);
}

static enum rpc_outcome pm_getversaddr(struct rpc_req *rq, void *args, void *res)
{
	return pm_getaddr_common(rq, args, res, false);
}

static enum rpc_outcome pm_dump34(struct rpc_req *rq, void *args, void *res)
{
	static const char *const netids[2][2] = { { "tcp", "tcp6" }, { "udp", "udp6" } };
	struct portmap_mapping maps[PORTMAP_MAX_MAPS];
	rpcblist_ptr *tail = res;
	int n;

	(void)args;
	if (portmap_dump_refused(rq))
		return RPC_OUT_DROP;
	n = portmap_snapshot(maps);
	for (int i = 0; i < n; i++) {
		int p = maps[i].pm_prot == IPPROTO_UDP;

		if (maps[i].pm_prot != IPPROTO_TCP && maps[i].pm_prot != IPPROTO_UDP)
			continue;
		for (int f = 0; f < 2; f++) {
			rp__list *e = rpc_alloc(rq, sizeof(*e));

			e->rpcb_map.r_prog = maps[i].pm_prog;
			e->rpcb_map.r_vers = maps[i].pm_vers;
			e->rpcb_map.r_netid = (char *)netids[p][f];
			e->rpcb_map.r_addr = portmap_uaddr(rq, f ? AF_INET6 : AF_INET, maps[i].pm_port);
			e->rpcb_map.r_owner = (char *)PORTMAP_OWNER;
			*tail = e;
			tail = &e->rpcb_next;
		}
	}
	*tail = NULL;
	return RPC_OUT_REPLY;
}

static enum rpc_outcome pm_gettime(struct rpc_req *rq, void *args, void *res)
{
	(void)rq; (void)args;
	*(u_int *)res = (u_int)time(NULL);
	return RPC_OUT_REPLY;
}

static const struct rpc_proc portmap_v2[] = {
	RPC_PROC_VOID("NULL", pm_null),
	{ "SET", RPC_XDRPROC(xdr_pmap), sizeof(struct pmap), RPC_XDRPROC(xdr_bool), sizeof(bool_t),
	  pm_refuse },
	{ "UNSET", RPC_XDRPROC(xdr_pmap), sizeof(struct pmap), RPC_XDRPROC(xdr_bool),
	  sizeof(bool_t), pm_refuse },
	{ "GETPORT", RPC_XDRPROC(xdr_pmap), sizeof(struct pmap), RPC_XDRPROC(xdr_u_int),
	  sizeof(u_int), pm_getport },
	{ "DUMP", RPC_XDRPROC(xdr_void), 0, RPC_XDRPROC(xdr_pmaplist), sizeof(struct pmaplist *),
	  pm_dump2 },
	{ "CALLIT", NULL, 0, NULL, 0, pm_drop },
};

#define PM_RPCB_COMMON \
	RPC_PROC_VOID("NULL", pm_null), \
	{ "SET", RPC_XDRPROC(portmap_xdr_rpcb_args), sizeof(rpcb), RPC_XDRPROC(xdr_bool), \
	  sizeof(bool_t), pm_refuse }, \
	{ "UNSET", RPC_XDRPROC(portmap_xdr_rpcb_args), sizeof(rpcb), RPC_XDRPROC(xdr_bool), \
	  sizeof(bool_t), pm_refuse }, \
	{ "GETADDR", RPC_XDRPROC(portmap_xdr_rpcb_args), sizeof(rpcb), \
	  RPC_XDRPROC(xdr_wrapstring), sizeof(char *), pm_getaddr }, \
	RPC_PROC_NOARGS("DUMP", rpcblist_ptr, pm_dump34), \
	{ "CALLIT", NULL, 0, NULL, 0, pm_drop }, \
	RPC_PROC_NOARGS("GETTIME", u_int, pm_gettime), \
	RPC_PROC_UNAVAIL("UADDR2TADDR"), \
	RPC_PROC_UNAVAIL("TADDR2UADDR")

static const struct rpc_proc portmap_v3[] = { PM_RPCB_COMMON };
static const struct rpc_proc portmap_v4[] = {
	PM_RPCB_COMMON,
	{ "GETVERSADDR", RPC_XDRPROC(portmap_xdr_rpcb_args), sizeof(rpcb),
	  RPC_XDRPROC(xdr_wrapstring), sizeof(char *), pm_getversaddr },
	RPC_PROC_UNAVAIL("INDIRECT"),
	RPC_PROC_UNAVAIL("GETADDRLIST"),
	RPC_PROC_UNAVAIL("GETSTAT"),
};

static const struct rpc_proc *const portmap_procs[] = { portmap_v2, portmap_v3, portmap_v4 };
static const uint32_t portmap_nprocs[] = {
	sizeof(portmap_v2) / sizeof(portmap_v2[0]),
	sizeof(portmap_v3) / sizeof(portmap_v3[0]),
	sizeof(portmap_v4) / sizeof(portmap_v4[0]),
};

const struct rpc_program portmap_program = {
	.rg_prog = PORTMAP_PROG,
	.rg_name = "portmap",
	.rg_vers_min = 2,
	.rg_vers_max = 4,
	.rg_procs = portmap_procs,
	.rg_nprocs = portmap_nprocs,
};

/* ---- the system rpcbind ---- */

/* One NULL call over UDP to 127.0.0.1:111, program 100000 version 2. */
static bool portmap_probe_once(int fd, uint32_t xid)
{
	uint32_t call[10] = {
		htonl(xid), htonl(CALL), htonl(2), htonl(PORTMAP_PROG), htonl(2), htonl(0),
		htonl(AUTH_NONE), 0, htonl(AUTH_NONE), 0,
	};
	uint32_t reply[8];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (send(fd, call, sizeof(call), 0) != (ssize_t)sizeof(call))
		return false;
	while (poll(&pfd, 1, PORTMAP_PROBE_MS) == 1) {
		n = recv(fd, reply, sizeof(reply), 0);
		if (n < 0)
			return false;  /* ECONNREFUSED: nothing listens */
		/* xid, REPLY, MSG_ACCEPTED, verifier (2 words, empty body), SUCCESS */
		if (n >= 24 && reply[0] == htonl(xid) && reply[1] == htonl(REPLY) &&
		    reply[2] == htonl(MSG_ACCEPTED) && reply[5] == htonl(SUCCESS))
			return true;
	}
	return false;
}

bool portmap_rpcbind_running(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(111) };
	uint32_t xid = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	bool up = false;
	int fd;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		for (int i = 0; i < PORTMAP_PROBE_TRIES && !up; i++)
			up = portmap_probe_once(fd, xid + (uint32_t)i);
	close(fd);
	return up;
}

uint16_t portmap_rpcbind_port(uint32_t prog, uint32_t vers, uint32_t prot)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(111) };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return pmap_getport(&sin, prog, vers, prot);
}

static bool portmap_have_ipv6(void)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Registers one mapping for one netid at the wildcard address. */
static bool portmap_rpcb_set(const struct portmap_mapping *m, const char *netid, int family)
{
	struct netconfig *nc = getnetconfigent(netid);
	struct sockaddr_storage ss;
	struct netbuf nb;
	bool ok;

	if (nc == NULL)
		return false;
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		s->sin6_family = AF_INET6;
		s->sin6_addr = in6addr_any;
		s->sin6_port = htons((uint16_t)m->pm_port);
		nb.len = nb.maxlen = sizeof(*s);
	} else {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		s->sin_family = AF_INET;
		s->sin_addr.s_addr = htonl(INADDR_ANY);
		s->sin_port = htons((uint16_t)m->pm_port);
		nb.len = nb.maxlen = sizeof(*s);
	}
	nb.buf = &ss;
	ok = rpcb_set(m->pm_prog, m->pm_vers, nc, &nb);
	freenetconfigent(nc);
	return ok;
}

/* True when (prog, vers) already appeared earlier in maps. */
static bool portmap_seen(const struct portmap_mapping *maps, int i)
{
	for (int k = 0; k < i; k++)
		if (maps[k].pm_prog == maps[i].pm_prog && maps[k].pm_vers == maps[i].pm_vers)
			return true;
	return false;
}

int portmap_register(const struct portmap_mapping *maps, int n)
{
	bool v6 = portmap_have_ipv6();

	/* Stale entries from an earlier run that died would shadow ours. */
	for (int i = 0; i < n; i++)
		if (!portmap_seen(maps, i))
			rpcb_unset(maps[i].pm_prog, maps[i].pm_vers, NULL);

	for (int i = 0; i < n; i++) {
		const struct portmap_mapping *m = &maps[i];
		const char *v4id, *v6id;

		if (m->pm_prot == IPPROTO_TCP) {
			v4id = "tcp";
			v6id = "tcp6";
		} else if (m->pm_prot == IPPROTO_UDP) {
			v4id = "udp";
			v6id = "udp6";
		} else {
			continue;
		}
		if (!portmap_rpcb_set(m, v4id, AF_INET) &&
		    !pmap_set(m->pm_prog, m->pm_vers, (int)m->pm_prot, (int)m->pm_port)) {
			log_err("portmap: rpcbind refused program %u version %u on %s port %u",
				m->pm_prog, m->pm_vers, v4id, m->pm_port);
			portmap_unregister(maps, n);
			return -EACCES;
		}
		if (v6 && !portmap_rpcb_set(m, v6id, AF_INET6))
			log_debug("portmap: rpcbind did not take program %u version %u on %s",
				  m->pm_prog, m->pm_vers, v6id);
	}
	return 0;
}

void portmap_unregister(const struct portmap_mapping *maps, int n)
{
	for (int i = 0; i < n; i++) {
		if (portmap_seen(maps, i))
			continue;
		if (!rpcb_unset(maps[i].pm_prog, maps[i].pm_vers, NULL))
			pmap_unset(maps[i].pm_prog, maps[i].pm_vers);
	}
}
