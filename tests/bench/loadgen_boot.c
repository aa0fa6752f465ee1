/*
 * loadgen's boot workload: --conns N simulated clients each replay a recorded netboot trace
 * (--trace, tests/bench/boot/README) against the export, all at once; the run ends when the
 * last client has replayed the whole trace.
 *
 * Every client connects from a source address of its own (--source, then the next
 * addresses), so a server with per-client views (unionnfsd's upper=...%a) gives each its own
 * view, and mounts the export itself (MNT from that address). It then resolves the trace's
 * paths as a kernel does: from the root, one LOOKUP per component it holds no handle for,
 * keeping every handle it got (a dentry cache that never forgets). Each client works
 * through the trace in order with --inflight / --conns calls in flight at most; a call waits
 * for the LOOKUPs its path needs, and, unless --pace is 0, until its recorded gap after the
 * call before it (divided by --pace) has passed: the booting machine's own work between its
 * calls. --read-only leaves out the calls that change the tree (the reference server serves
 * the base read-only); its gaps still count.
 *
 * A BOOT line before RESULT gives the counts: calls sent, LOOKUPs the replay added to resolve
 * paths, calls skipped (a path the replay could not reach) and calls answered otherwise than
 * in the recording (the first three are logged); LG_BOOT_DEBUG=1 logs the first skipped ones.
 */
#include "loadgen.h"
#include "loadgen_trace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nfsc/libnfs-raw-mount.h>

enum lg_boot_state { LB_UNKNOWN, LB_KNOWN, LB_ABSENT, LB_WAIT };

struct lg_boot_handle {
	uint8_t h_state;        /* LB_UNKNOWN, LB_KNOWN or LB_ABSENT */
	/* calls in flight whose reply makes or finds the name: the calls after them wait */
	uint8_t h_waits;
	uint8_t h_len;
	char h_data[NFS3_FHSIZE];
};

/*
 * What one slot does now. LB_BUSY: it holds a call and is being worked on, so neither a pump
 * (looking for an idle slot) nor a wake-up (looking for parked ones) may take it meanwhile.
 */
enum lg_boot_phase { LB_IDLE, LB_BUSY, LB_RESOLVING, LB_CALLING, LB_PARKED };

struct lg_boot_slot {
	enum lg_boot_phase b_phase;
	uint32_t b_call;        /* the trace call it works on */
	uint32_t b_node;        /* LB_RESOLVING: the node its LOOKUP resolves */
};

struct lg_boot_client {
	struct lg_boot_handle *c_handles; /* one per node */
	uint32_t c_next;        /* the next trace call to start */
	uint64_t c_due_ns;      /* when it may start */
	int c_active;           /* slots working on a call */
	int c_done;
	uint64_t c_end_ns;
};

struct lg_boot {
	struct lg_trace b_trace;
	struct lg_boot_client *b_clients;
	struct lg_boot_slot *b_slots;
	int b_clients_done;
	uint64_t b_sent, b_resolves, b_skipped, b_unexpected, b_setup_ns;
};

void lg_boot_free(struct lg_run *run)
{
	struct lg_boot *b = run->r_boot;
	int i;

	if (!b)
		return;
	lg_trace_free(&b->b_trace);
	if (b->b_clients)
		for (i = 0; i < run->r_nconns; i++)
			free(b->b_clients[i].c_handles);
	free(b->b_clients);
	free(b->b_slots);
	free(b);
	run->r_boot = NULL;
}

/* --- connections from a source address of each client's own --- */

struct lg_boot_wait {
	int w_done;
	int w_failed;
	struct lg_fh w_fh;
};

static void lg_boot_connected(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_boot_wait *w = priv;

	(void)rpc;
	w->w_done = 1;
	if (status != RPC_STATUS_SUCCESS) {
		w->w_failed = 1;
		fprintf(stderr, "loadgen: cannot connect: %s\n", data ? (const char *)data : "no reason");
	}
}

/*
 * libnfs connects from the address the kernel picks; the connection is then swapped for one
 * from src to the same server port (dup2 onto libnfs's descriptor, before any call went out):
 * libnfs has no option for the source address.
 */
static int lg_boot_connect(struct lg_run *run, struct lg_conn *conn, const struct in_addr *src,
			   const char *server, int port, int prog, int vers)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = *src };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct lg_boot_wait w = { 0 };
	int fd, one = 1;

	(void)run;
	conn->c_own = rpc_init_context();
	if (!conn->c_own)
		return -1;
	conn->c_rpc = conn->c_own;
	if (inet_pton(AF_INET, server, &to.sin_addr) != 1) {
		fprintf(stderr, "loadgen: the boot workload wants the server as an IPv4 address in "
			"--url, not %s\n", server);
		return -1;
	}
	if (rpc_connect_port_async(conn->c_own, server, port, prog, vers, lg_boot_connected, &w) ||
	    lg_conn_wait(conn, &w.w_done) || w.w_failed) {
		fprintf(stderr, "loadgen: cannot connect to %s port %d: %s; check that the server "
			"runs and listens there (the ports of --url)\n", server, port,
			rpc_get_error(conn->c_own));
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to))) {
		char a[INET_ADDRSTRLEN];

		fprintf(stderr, "loadgen: cannot connect from %s to %s port %d: %s; the source "
			"addresses (--source and the next --conns - 1) must be local (127.0.0.0/8 "
			"is)\n", inet_ntop(AF_INET, src, a, sizeof(a)), server, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
	    dup2(fd, rpc_get_fd(conn->c_own)) < 0) {
		fprintf(stderr, "loadgen: cannot take over libnfs's connection: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static void lg_boot_mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_boot_wait *w = priv;
	mountres3 *res = data;

	(void)rpc;
	w->w_done = 1;
	if (status != RPC_STATUS_SUCCESS || res->fhs_status != MNT3_OK ||
	    res->mountres3_u.mountinfo.fhandle.fhandle3_len > NFS3_FHSIZE) {
		w->w_failed = 1;
		fprintf(stderr, "loadgen: MNT failed (%s %d); check that the export exists and admits "
			"the client addresses\n", status != RPC_STATUS_SUCCESS ? "RPC status" : "MNT status",
			status != RPC_STATUS_SUCCESS ? status : (int)res->fhs_status);
		return;
	}
	w->w_fh.fh_len = res->mountres3_u.mountinfo.fhandle.fhandle3_len;
	memcpy(w->w_fh.fh_data, res->mountres3_u.mountinfo.fhandle.fhandle3_val, w->w_fh.fh_len);
}

static void lg_boot_lookup_setup_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_boot_wait *w = priv;
	LOOKUP3res *res = data;

	(void)rpc;
	w->w_done = 1;
	if (status != RPC_STATUS_SUCCESS || res->status != NFS3_OK) {
		w->w_failed = 1;
		return;
	}
	lg_fh_copy(&w->w_fh, &res->LOOKUP3res_u.resok.object);
}

/* The URL's host, export and ports (nfs://HOST/EXPORT?nfsport=N&mountport=M). */
static int lg_boot_url(const char *url, char *host, size_t hostlen, char *exp, size_t explen,
		       int *nfsport, int *mountport)
{
	const char *p = url, *slash, *q, *v;

	if (strncmp(p, "nfs://", 6))
		goto bad;
	p += 6;
	slash = strchr(p, '/');
	if (!slash || (size_t)(slash - p) >= hostlen)
		goto bad;
	memcpy(host, p, (size_t)(slash - p));
	host[slash - p] = 0;
	q = strchr(slash, '?');
	if ((size_t)((q ? q : slash + strlen(slash)) - slash) >= explen)
		goto bad;
	snprintf(exp, explen, "%.*s", (int)((q ? q : slash + strlen(slash)) - slash), slash);
	*nfsport = (v = q ? strstr(q, "nfsport=") : NULL) ? atoi(v + 8) : 2049;
	*mountport = (v = q ? strstr(q, "mountport=") : NULL) ? atoi(v + 10) : 0;
	if (*mountport <= 0 || *nfsport <= 0)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "loadgen: the boot workload wants --url nfs://IPV4/EXPORT?nfsport=N&"
		"mountport=M (no portmapper), not %s\n", url);
	return -1;
}

/* Each client: MNT from its own address, then its NFS connection from the same address. */
int lg_boot_connect_all(struct lg_run *run)
{
	char host[64], exp[1024];
	int nfsport, mountport, i;
	struct in_addr src;
	uint64_t t0 = lg_now_ns();

	if (lg_boot_url(run->r_opt.o_url, host, sizeof(host), exp, sizeof(exp), &nfsport,
			&mountport))
		return -1;
	if (inet_pton(AF_INET, run->r_opt.o_source, &src) != 1) {
		fprintf(stderr, "loadgen: --source wants an IPv4 address, not %s\n", run->r_opt.o_source);
		return -1;
	}
	run->r_conns = calloc((size_t)run->r_nconns, sizeof(*run->r_conns));
	if (!run->r_conns || !(run->r_server = strdup(host)))
		return -1;
	for (i = 0; i < run->r_nconns; i++) {
		struct lg_conn *c = &run->r_conns[i];
		struct lg_boot_wait w = { 0 };
		struct in_addr me = { .s_addr = htonl(ntohl(src.s_addr) + (uint32_t)i) };

		if (lg_boot_connect(run, c, &me, host, mountport, MOUNT_PROGRAM, MOUNT_V3))
			return -1;
		if (rpc_mount3_mnt_async(c->c_rpc, lg_boot_mnt_cb, exp, &w) ||
		    lg_conn_wait(c, &w.w_done) || w.w_failed)
			return -1;
		rpc_destroy_context(c->c_own);
		c->c_own = c->c_rpc = NULL;
		if (lg_boot_connect(run, c, &me, host, nfsport, NFS_PROGRAM, NFS_V3))
			return -1;
		c->c_fh = w.w_fh;
	}
	if (run->r_boot || (run->r_boot = calloc(1, sizeof(*run->r_boot))))
		run->r_boot->b_setup_ns = lg_now_ns() - t0;
	return 0;
}

/* --path: the tree's root below the export's, looked up once per client before the clock. */
static int lg_boot_descend(struct lg_run *run, struct lg_conn *c)
{
	char *path = strdup(run->r_opt.o_path), *save = NULL, *comp;
	int rc = 0;

	if (!path)
		return -1;
	for (comp = strtok_r(path, "/", &save); comp && !rc; comp = strtok_r(NULL, "/", &save)) {
		struct lg_boot_wait w = { 0 };
		LOOKUP3args a;

		memset(&a, 0, sizeof(a));
		a.what.dir = lg_fh3(&c->c_fh);
		a.what.name = comp;
		if (rpc_nfs3_lookup_async(c->c_rpc, lg_boot_lookup_setup_cb, &a, &w) ||
		    lg_conn_wait(c, &w.w_done) || w.w_failed) {
			fprintf(stderr, "loadgen: cannot look up --path %s (at %s) on the export\n",
				run->r_opt.o_path, comp);
			rc = -1;
		} else {
			c->c_fh = w.w_fh;
		}
	}
	free(path);
	return rc;
}

int lg_boot_prepare(struct lg_run *run)
{
	struct lg_boot *b = run->r_boot;
	int i;

	if (!run->r_opt.o_trace) {
		fprintf(stderr, "loadgen: the boot workload needs --trace FILE "
			"(tests/bench/boot/trace.txt)\n");
		return -1;
	}
	if (run->r_nslots < run->r_nconns) {
		fprintf(stderr, "loadgen: the boot workload wants --inflight at least --conns (a "
			"slot per client at least)\n");
		return -1;
	}
	if (!b && !(b = run->r_boot = calloc(1, sizeof(*b))))
		return -1;
	if (lg_trace_load(&b->b_trace, run->r_opt.o_trace))
		return -1;
	b->b_clients = calloc((size_t)run->r_nconns, sizeof(*b->b_clients));
	b->b_slots = calloc((size_t)run->r_nslots, sizeof(*b->b_slots));
	run->r_buf = calloc(1, LG_MIB);
	if (!b->b_clients || !b->b_slots || !run->r_buf)
		return -1;
	for (i = 0; i < run->r_nconns; i++) {
		struct lg_boot_client *cl = &b->b_clients[i];
		struct lg_conn *c = &run->r_conns[i];

		if (lg_boot_descend(run, c))
			return -1;
		cl->c_handles = calloc(b->b_trace.t_nnodes, sizeof(*cl->c_handles));
		if (!cl->c_handles)
			return -1;
		cl->c_handles[0].h_state = LB_KNOWN;
		cl->c_handles[0].h_len = (uint8_t)c->c_fh.fh_len;
		memcpy(cl->c_handles[0].h_data, c->c_fh.fh_data, c->c_fh.fh_len);
	}
	return 0;
}

/* --- the replay --- */

static struct lg_boot_client *lg_boot_client_of(struct lg_slot *slot)
{
	return &slot->s_run->r_boot->b_clients[slot->s_conn - slot->s_run->r_conns];
}

static nfs_fh3 lg_boot_fh(struct lg_boot_client *cl, uint32_t node)
{
	nfs_fh3 r;

	r.data.data_len = cl->c_handles[node].h_len;
	r.data.data_val = cl->c_handles[node].h_data;
	return r;
}

static void lg_boot_learn(struct lg_boot_client *cl, uint32_t node, const nfs_fh3 *fh)
{
	struct lg_boot_handle *h = &cl->c_handles[node];

	if (fh->data.data_len > sizeof(h->h_data)) {
		h->h_state = LB_UNKNOWN;
		return;
	}
	h->h_len = (uint8_t)fh->data.data_len;
	memcpy(h->h_data, fh->data.data_val, fh->data.data_len);
	h->h_state = LB_KNOWN;
}

static void lg_boot_pump(struct lg_run *run, struct lg_boot_client *cl);
static void lg_boot_step(struct lg_slot *slot);

static void lg_boot_unexpected(struct lg_run *run, const struct lg_trace_call *k, int st)
{
	struct lg_boot *b = run->r_boot;

	b->b_unexpected++;
	/* the first few for the log; a replay against another tree differs a little */
	if (b->b_unexpected <= 3)
		fprintf(stderr, "loadgen: trace call %u (%s) answered %d, unlike the recording\n",
			(unsigned)(k - b->b_trace.t_calls) + 1, lg_trace_procs[k->k_proc].name, st);
}

/* A call's slot is free again: the client goes on. */
static void lg_boot_call_done(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	struct lg_boot_client *cl = lg_boot_client_of(slot);

	run->r_boot->b_slots[slot->s_index].b_phase = LB_IDLE;
	cl->c_active--;
	lg_boot_pump(run, cl);
}

/* Slots that waited for a LOOKUP of their client try again. */
static void lg_boot_wake(struct lg_run *run, struct lg_boot_client *cl)
{
	int i;

	for (i = 0; i < run->r_nslots; i++) {
		struct lg_slot *s = &run->r_slots[i];

		if (run->r_boot->b_slots[i].b_phase == LB_PARKED && lg_boot_client_of(s) == cl)
			lg_boot_step(s);
	}
}

/* Ends a request of the replay: 1 = reply to look at. */
static int lg_boot_end(struct lg_slot *slot, int status, void *data, const char *what)
{
	int r = lg_end(slot, status, data, what);

	if (r > 0)
		lg_count(slot->s_run, 1, 0);
	return r;
}

static void lg_boot_resolve_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	struct lg_boot_slot *bs;
	struct lg_boot_client *cl;
	LOOKUP3res *res = data;

	(void)rpc;
	if (lg_boot_end(slot, status, data, "LOOKUP") <= 0)
		return;
	bs = &run->r_boot->b_slots[slot->s_index];
	cl = lg_boot_client_of(slot);
	if (res->status == NFS3_OK)
		lg_boot_learn(cl, bs->b_node, &res->LOOKUP3res_u.resok.object);
	else
		cl->c_handles[bs->b_node].h_state = LB_ABSENT;
	cl->c_handles[bs->b_node].h_waits--;
	lg_boot_wake(run, cl);
	lg_boot_step(slot);
}

/*
 * Makes node's handle known: LB_KNOWN when it is, LB_WAIT when the slot now waits for a
 * LOOKUP (its own, just sent, or another slot's), LB_ABSENT when a component does not exist.
 */
static int lg_boot_resolve(struct lg_slot *slot, uint32_t node)
{
	struct lg_run *run = slot->s_run;
	struct lg_boot *b = run->r_boot;
	struct lg_boot_client *cl = lg_boot_client_of(slot);
	struct lg_boot_slot *bs = &b->b_slots[slot->s_index];
	uint32_t top = node, n;
	LOOKUP3args a;

	if (cl->c_handles[node].h_state == LB_KNOWN)
		return LB_KNOWN;
	/* the component nearest the root whose handle is not known */
	for (n = node; n; n = b->b_trace.t_nodes[n].n_parent)
		if (cl->c_handles[n].h_state != LB_KNOWN)
			top = n;
	if (cl->c_handles[top].h_waits) {
		bs->b_phase = LB_PARKED;
		return LB_WAIT;
	}
	if (cl->c_handles[top].h_state == LB_ABSENT)
		return LB_ABSENT;
	cl->c_handles[top].h_waits++;
	bs->b_phase = LB_RESOLVING;
	bs->b_node = top;
	memset(&a, 0, sizeof(a));
	a.what.dir = lg_boot_fh(cl, b->b_trace.t_nodes[top].n_parent);
	a.what.name = b->b_trace.t_nodes[top].n_name;
	b->b_resolves++;
	lg_begin(slot);
	if (rpc_nfs3_lookup_async(slot->s_conn->c_rpc, lg_boot_resolve_cb, &a, slot))
		lg_issue_failed(slot, "LOOKUP");
	return LB_WAIT;
}

static void lg_boot_call_cb(struct rpc_context *rpc, int status, void *data, void *priv);

static void lg_boot_sattr(sattr3 *s, uint32_t mode, uint64_t size)
{
	memset(s, 0, sizeof(*s));
	if (mode != LT_NO_VALUE) {
		s->mode.set_it = 1;
		s->mode.set_mode3_u.mode = mode;
	}
	if (size != UINT64_MAX) {
		s->size.set_it = 1;
		s->size.set_size3_u.size = size;
	}
}

/* The handles a call needs before it can go out: its object's, or for a name its directory's. */
static int lg_boot_needs_dir(int proc)
{
	return proc == LT_LOOKUP || proc == LT_CREATE || proc == LT_MKDIR || proc == LT_SYMLINK ||
	       proc == LT_REMOVE || proc == LT_RMDIR || proc == LT_RENAME;
}

/* The node whose handle the call's reply gives (LOOKUP, CREATE, ...), or UINT32_MAX. */
static uint32_t lg_boot_made(const struct lg_trace_call *k)
{
	if (k->k_proc == LT_RENAME)
		return k->k_node2;
	if (lg_boot_needs_dir(k->k_proc) && k->k_proc != LT_REMOVE && k->k_proc != LT_RMDIR)
		return k->k_node;
	return UINT32_MAX;
}

/* Sends the trace call itself; every handle it needs is known. */
static void lg_boot_send(struct lg_slot *slot, const struct lg_trace_call *k)
{
	struct lg_run *run = slot->s_run;
	struct lg_boot *b = run->r_boot;
	struct lg_boot_client *cl = lg_boot_client_of(slot);
	struct rpc_context *rpc = slot->s_conn->c_rpc;
	uint32_t dir = b->b_trace.t_nodes[k->k_node].n_parent;
	char *name = b->b_trace.t_nodes[k->k_node].n_name;
	nfs_fh3 fh = lg_boot_fh(cl, k->k_node);
	int rc = -1;

	b->b_slots[slot->s_index].b_phase = LB_CALLING;
	b->b_sent++;

	lg_begin(slot);
	switch (k->k_proc) {
	case LT_GETATTR: {
		GETATTR3args a = { .object = fh };
		rc = rpc_nfs3_getattr_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_SETATTR: {
		SETATTR3args a;
		memset(&a, 0, sizeof(a));
		a.object = fh;
		lg_boot_sattr(&a.new_attributes, k->k_arg, k->k_off);
		rc = rpc_nfs3_setattr_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_LOOKUP: {
		LOOKUP3args a;
		a.what.dir = lg_boot_fh(cl, dir);
		a.what.name = name;
		rc = rpc_nfs3_lookup_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_ACCESS: {
		ACCESS3args a = { .object = fh, .access = k->k_arg };
		rc = rpc_nfs3_access_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_READLINK: {
		READLINK3args a = { .symlink = fh };
		rc = rpc_nfs3_readlink_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_READ: {
		READ3args a = { .file = fh, .offset = k->k_off, .count = k->k_count };
		rc = rpc_nfs3_read_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_WRITE: {
		WRITE3args a;
		memset(&a, 0, sizeof(a));
		a.file = fh;
		a.offset = k->k_off;
		a.count = k->k_count;
		a.stable = k->k_arg == LT_NO_VALUE ? UNSTABLE : (stable_how)k->k_arg;
		a.data.data_len = k->k_count;
		a.data.data_val = run->r_buf;
		rc = rpc_nfs3_write_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_COMMIT: {
		COMMIT3args a = { .file = fh, .offset = k->k_off, .count = k->k_count };
		rc = rpc_nfs3_commit_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_CREATE: {
		CREATE3args a;
		memset(&a, 0, sizeof(a));
		a.where.dir = lg_boot_fh(cl, dir);
		a.where.name = name;
		a.how.mode = UNCHECKED;
		lg_boot_sattr(&a.how.createhow3_u.obj_attributes,
			      k->k_arg == LT_NO_VALUE ? 0644 : k->k_arg, UINT64_MAX);
		rc = rpc_nfs3_create_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_MKDIR: {
		MKDIR3args a;
		a.where.dir = lg_boot_fh(cl, dir);
		a.where.name = name;
		lg_boot_sattr(&a.attributes, k->k_arg == LT_NO_VALUE ? 0755 : k->k_arg, UINT64_MAX);
		rc = rpc_nfs3_mkdir_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_SYMLINK: {
		SYMLINK3args a;
		memset(&a, 0, sizeof(a));
		a.where.dir = lg_boot_fh(cl, dir);
		a.where.name = name;
		a.symlink.symlink_data = k->k_text;
		rc = rpc_nfs3_symlink_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_REMOVE:
	case LT_RMDIR: {
		REMOVE3args a;
		a.object.dir = lg_boot_fh(cl, dir);
		a.object.name = name;
		rc = k->k_proc == LT_REMOVE
			     ? rpc_nfs3_remove_async(rpc, lg_boot_call_cb, &a, slot)
			     : rpc_nfs3_rmdir_async(rpc, lg_boot_call_cb, (RMDIR3args *)&a, slot);
		break;
	}
	case LT_RENAME: {
		RENAME3args a;
		a.from.dir = lg_boot_fh(cl, dir);
		a.from.name = name;
		a.to.dir = lg_boot_fh(cl, b->b_trace.t_nodes[k->k_node2].n_parent);
		a.to.name = b->b_trace.t_nodes[k->k_node2].n_name;
		rc = rpc_nfs3_rename_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_READDIR: {
		READDIR3args a;
		memset(&a, 0, sizeof(a));
		a.dir = fh;
		a.cookie = slot->s_cookie;
		memcpy(a.cookieverf, slot->s_verf, sizeof(a.cookieverf));
		a.count = k->k_count == LT_NO_VALUE ? 8192 : k->k_count;
		rc = rpc_nfs3_readdir_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_READDIRPLUS: {
		READDIRPLUS3args a;
		memset(&a, 0, sizeof(a));
		a.dir = fh;
		a.cookie = slot->s_cookie;
		memcpy(a.cookieverf, slot->s_verf, sizeof(a.cookieverf));
		a.dircount = k->k_count == LT_NO_VALUE ? 8192 : k->k_count;
		a.maxcount = k->k_arg == LT_NO_VALUE ? 65536 : k->k_arg;
		rc = rpc_nfs3_readdirplus_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_FSSTAT: {
		FSSTAT3args a = { .fsroot = fh };
		rc = rpc_nfs3_fsstat_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_FSINFO: {
		FSINFO3args a = { .fsroot = fh };
		rc = rpc_nfs3_fsinfo_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	case LT_PATHCONF: {
		PATHCONF3args a = { .object = fh };
		rc = rpc_nfs3_pathconf_async(rpc, lg_boot_call_cb, &a, slot);
		break;
	}
	}
	if (rc)
		lg_issue_failed(slot, lg_trace_procs[k->k_proc].name);
}

/* Works on the slot's call: the LOOKUPs its paths need first, then the call. */
static void lg_boot_step(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;
	struct lg_boot *b = run->r_boot;
	struct lg_boot_slot *bs = &b->b_slots[slot->s_index];
	const struct lg_trace_call *k = &b->b_trace.t_calls[bs->b_call];
	struct lg_boot_client *cl = lg_boot_client_of(slot);
	uint32_t need[2];
	int n = 0, i, st;

	bs->b_phase = LB_BUSY;
	need[n++] = lg_boot_needs_dir(k->k_proc) ? b->b_trace.t_nodes[k->k_node].n_parent : k->k_node;
	if (k->k_proc == LT_RENAME)
		need[n++] = b->b_trace.t_nodes[k->k_node2].n_parent;
	for (i = 0; i < n; i++) {
		st = lg_boot_resolve(slot, need[i]);
		if (st == LB_WAIT)
			return;
		if (st == LB_ABSENT) {
			uint32_t made = lg_boot_made(k);

			/* a path the replay cannot reach (e.g. what --read-only left uncreated) */
			if (++b->b_skipped <= 3 && getenv("LG_BOOT_DEBUG"))
				fprintf(stderr, "loadgen: trace call %u (%s of node %u '%s') skipped\n",
					bs->b_call + 1, lg_trace_procs[k->k_proc].name, need[i],
					b->b_trace.t_nodes[need[i]].n_name);
			if (made != UINT32_MAX)
				cl->c_handles[made].h_waits--;
			lg_boot_call_done(slot);
			if (made != UINT32_MAX)
				lg_boot_wake(run, cl);
			return;
		}
	}
	slot->s_cookie = 0;
	memset(slot->s_verf, 0, sizeof(slot->s_verf));
	lg_boot_send(slot, k);
}

static void lg_boot_call_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct lg_slot *slot = priv;
	struct lg_run *run = slot->s_run;
	struct lg_boot *b;
	const struct lg_trace_call *k;
	struct lg_boot_client *cl;
	nfsstat3 st;
	int learned = 0;

	(void)rpc;
	b = run->r_boot;
	k = &b->b_trace.t_calls[b->b_slots[slot->s_index].b_call];
	if (lg_boot_end(slot, status, data, lg_trace_procs[k->k_proc].name) <= 0)
		return;
	cl = lg_boot_client_of(slot);
	st = *(nfsstat3 *)data; /* every NFSv3 result begins with its status */
	if (lg_boot_made(k) != UINT32_MAX)
		cl->c_handles[lg_boot_made(k)].h_waits--;
	switch (k->k_proc) {
	case LT_LOOKUP:
		if (st == NFS3_OK)
			lg_boot_learn(cl, k->k_node, &((LOOKUP3res *)data)->LOOKUP3res_u.resok.object);
		else
			cl->c_handles[k->k_node].h_state = LB_ABSENT;
		learned = 1;
		if (k->k_arg != LT_NO_VALUE && (uint32_t)st != k->k_arg)
			lg_boot_unexpected(run, k, (int)st);
		break;
	case LT_CREATE:
	case LT_MKDIR:
	case LT_SYMLINK: {
		/* the three results share their layout up to the handle */
		post_op_fh3 *obj = &((CREATE3res *)data)->CREATE3res_u.resok.obj;

		learned = 1;
		if (st != NFS3_OK) {
			lg_boot_unexpected(run, k, (int)st);
			break;
		}
		if (obj->handle_follows)
			lg_boot_learn(cl, k->k_node, &obj->post_op_fh3_u.handle);
		else
			cl->c_handles[k->k_node].h_state = LB_UNKNOWN;
		break;
	}
	case LT_REMOVE:
	case LT_RMDIR:
		if (st == NFS3_OK)
			cl->c_handles[k->k_node].h_state = LB_ABSENT;
		else
			lg_boot_unexpected(run, k, (int)st);
		break;
	case LT_RENAME:
		if (st == NFS3_OK) {
			struct lg_boot_handle *from = &cl->c_handles[k->k_node];
			struct lg_boot_handle *to = &cl->c_handles[k->k_node2];

			to->h_state = from->h_state;
			to->h_len = from->h_len;
			memcpy(to->h_data, from->h_data, sizeof(to->h_data));
			cl->c_handles[k->k_node].h_state = LB_ABSENT;
			learned = 1;
		} else {
			lg_boot_unexpected(run, k, (int)st);
			learned = 1;
		}
		break;
	case LT_READDIRPLUS:
	case LT_READDIR: {
		/* the whole listing, as the recording's client read it from its start */
		READDIRPLUS3res *rp = data;
		READDIR3res *rd = data;
		const entryplus3 *ep;
		const entry3 *e;
		uint64_t last = 0;
		int eof;

		if (st != NFS3_OK) {
			lg_boot_unexpected(run, k, (int)st);
			break;
		}
		if (k->k_proc == LT_READDIRPLUS) {
			entryplus3 c;

			for (ep = rp->READDIRPLUS3res_u.resok.reply.entries; ep; ep = c.nextentry) {
				lg_wl_entry(ep, &c);
				last = c.cookie;
			}
			eof = rp->READDIRPLUS3res_u.resok.reply.eof;
			memcpy(slot->s_verf, rp->READDIRPLUS3res_u.resok.cookieverf, sizeof(slot->s_verf));
		} else {
			entry3 c;

			for (e = rd->READDIR3res_u.resok.reply.entries; e; e = c.nextentry) {
				memcpy(&c, e, sizeof(c));
				last = c.cookie;
			}
			eof = rd->READDIR3res_u.resok.reply.eof;
			memcpy(slot->s_verf, rd->READDIR3res_u.resok.cookieverf, sizeof(slot->s_verf));
		}
		if (!eof && last) {
			slot->s_cookie = last;
			lg_boot_send(slot, k);
			return;
		}
		break;
	}
	default:
		if (st != NFS3_OK)
			lg_boot_unexpected(run, k, (int)st);
		break;
	}
	if (learned)
		lg_boot_wake(run, cl);
	lg_boot_call_done(slot);
}

/* Starts the client's next calls while it has a free slot and their time has come. */
static void lg_boot_pump(struct lg_run *run, struct lg_boot_client *cl)
{
	struct lg_boot *b = run->r_boot;
	int ci = (int)(cl - b->b_clients), i;

	while (!cl->c_done && !run->r_done && !run->r_closing) {
		uint64_t now;
		struct lg_slot *slot = NULL;
		const struct lg_trace_call *k;

		if (cl->c_next == b->b_trace.t_ncalls) {
			if (!cl->c_active) {
				cl->c_done = 1;
				cl->c_end_ns = lg_now_ns();
				if (++b->b_clients_done == run->r_nconns)
					lg_finish(run);
			}
			return;
		}
		k = &b->b_trace.t_calls[cl->c_next];
		if (run->r_opt.o_read_only && lg_trace_procs[k->k_proc].changes) {
			/* left out; the time the machine spent after it still passes */
			if (++cl->c_next < b->b_trace.t_ncalls && run->r_opt.o_pace > 0)
				cl->c_due_ns += (uint64_t)(b->b_trace.t_calls[cl->c_next].k_gap_us * 1000.0 /
							   run->r_opt.o_pace);
			continue;
		}
		now = lg_now_ns();
		if (now < cl->c_due_ns)
			return;
		/*
		 * A change of a name waits for the calls before it, as the program that makes it has
		 * seen the answers it depends on (rm -r removes a directory after its entries).
		 */
		if (cl->c_active && lg_boot_needs_dir(k->k_proc) && k->k_proc != LT_LOOKUP)
			return;
		for (i = ci; i < run->r_nslots; i += run->r_nconns)
			if (b->b_slots[i].b_phase == LB_IDLE) {
				slot = &run->r_slots[i];
				break;
			}
		if (!slot)
			return;
		b->b_slots[i].b_call = cl->c_next++;
		b->b_slots[i].b_phase = LB_BUSY;
		cl->c_active++;
		/*
		 * A call that makes or finds a name: the calls after it that need the name wait for
		 * its reply, as a program that opens a file waits for the open.
		 */
		if (lg_boot_made(k) != UINT32_MAX)
			cl->c_handles[lg_boot_made(k)].h_waits++;
		if (cl->c_next < b->b_trace.t_ncalls && run->r_opt.o_pace > 0)
			cl->c_due_ns = now + (uint64_t)(b->b_trace.t_calls[cl->c_next].k_gap_us * 1000.0 /
							run->r_opt.o_pace);
		lg_boot_step(slot);
	}
}

/* The driver hands every slot over once at the start; the clients' pumps run them after. */
void lg_boot_issue(struct lg_slot *slot)
{
	struct lg_run *run = slot->s_run;

	if (slot->s_index < (unsigned)run->r_nconns)
		lg_boot_pump(run, lg_boot_client_of(slot));
}

uint64_t lg_boot_tick(struct lg_run *run, uint64_t now)
{
	struct lg_boot *b = run->r_boot;
	uint64_t next = 0;
	int i;

	for (i = 0; i < run->r_nconns; i++) {
		struct lg_boot_client *cl = &b->b_clients[i];

		if (cl->c_done || cl->c_next == b->b_trace.t_ncalls)
			continue;
		if (cl->c_due_ns <= now)
			lg_boot_pump(run, cl);
		if (!cl->c_done && cl->c_next < b->b_trace.t_ncalls && cl->c_due_ns > now &&
		    (!next || cl->c_due_ns < next))
			next = cl->c_due_ns;
	}
	return next;
}

void lg_boot_report(struct lg_run *run)
{
	struct lg_boot *b = run->r_boot;
	double sum = 0, max = 0;
	int i, done = 0;

	if (!b || !b->b_clients)
		return;
	for (i = 0; i < run->r_nconns; i++) {
		const struct lg_boot_client *cl = &b->b_clients[i];
		double s;

		if (!cl->c_done)
			continue;
		s = (double)(cl->c_end_ns - run->r_t0) / 1e9;
		sum += s;
		if (s > max)
			max = s;
		done++;
	}
	printf("BOOT clients=%d done=%d trace_calls=%u sent=%llu resolve_lookups=%llu skipped=%llu "
	       "unexpected=%llu boot_mean_s=%.4f boot_max_s=%.4f setup_s=%.4f pace=%g\n",
	       run->r_nconns, done, b->b_trace.t_ncalls, (unsigned long long)b->b_sent,
	       (unsigned long long)b->b_resolves, (unsigned long long)b->b_skipped,
	       (unsigned long long)b->b_unexpected, done ? sum / done : 0, max,
	       (double)b->b_setup_ns / 1e9, run->r_opt.o_pace);
}
