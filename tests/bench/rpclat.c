/*
 * rpclat: one blocking libtirpc client (clnt_call, one call in flight), the way a simple
 * program or a thread of a synchronous client waits for each reply. Prints one line:
 *   RESULT workload=W ops=N seconds=T rate=R unit=calls/s p50_us=X p99_us=Y errors=E
 *   rpclat --port N [--mount-port M --export PATH] --call null|getattr [--seconds S]
 * null is NFSv3's NULL (program 100003 version 3), which any responder may answer; getattr
 * first mounts PATH through MOUNT v3 on --mount-port and then asks GETATTR of its root.
 * loadgen (libnfs, event-driven) wakes up on poll(); this client sleeps in read(): the kernel
 * client behaves like neither, so the benchmark measures both.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rpc/rpc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mount3.h"
#include "nfs3.h"

#define RL_WARMUP_NS 500000000ull
#define RL_TIMEOUT_S 30
/* xdr_void takes no arguments; a cast through void (*)(void) says the mismatch is meant */
#define RL_XDR_VOID ((xdrproc_t)(void (*)(void))xdr_void)

struct rl_opts {
	int o_port;
	int o_mount_port;
	const char *o_export;
	const char *o_call;
	double o_seconds;
};

static uint64_t rl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rl_usage(FILE *f)
{
	fprintf(f, "usage: rpclat --port N [--mount-port M --export PATH] --call null|getattr "
		"[--seconds S]\n");
}

/* A TCP client of PROG/VERS on 127.0.0.1:PORT, Nagle off as every NFS client has it. */
static CLIENT *rl_connect(int port, rpcprog_t prog, rpcvers_t vers)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct netbuf nb = { .maxlen = sizeof(sin), .len = sizeof(sin), .buf = &sin };
	int fd, one = 1;
	CLIENT *clnt;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		fprintf(stderr, "rpclat: cannot connect to 127.0.0.1:%d: %s\n", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	clnt = clnt_vc_create(fd, &nb, prog, vers, 0, 0);
	if (!clnt) {
		fprintf(stderr, "rpclat: %s\n", clnt_spcreateerror("clnt_vc_create"));
		close(fd);
		return NULL;
	}
	clnt_control(clnt, CLSET_FD_CLOSE, NULL);
	clnt->cl_auth = authunix_create_default();
	return clnt;
}

/* The root handle of EXPORT from MOUNT v3's MNT; 0 on success. */
static int rl_mount(const struct rl_opts *o, nfs_fh3 *fh)
{
	struct timeval tv = { RL_TIMEOUT_S, 0 };
	mountres3 res;
	dirpath path = (char *)o->o_export;
	CLIENT *clnt = rl_connect(o->o_mount_port, MOUNT_PROGRAM, MOUNT_V3);
	int rc = -1;

	if (!clnt)
		return -1;
	memset(&res, 0, sizeof(res));
	if (clnt_call(clnt, MOUNTPROC3_MNT, (xdrproc_t)xdr_dirpath, (char *)&path,
		      (xdrproc_t)xdr_mountres3, (char *)&res, tv) != RPC_SUCCESS) {
		fprintf(stderr, "rpclat: MNT %s: %s\n", o->o_export, clnt_sperror(clnt, "call"));
	} else if (res.fhs_status != MNT3_OK) {
		fprintf(stderr, "rpclat: MNT %s refused with status %d\n", o->o_export,
			(int)res.fhs_status);
	} else {
		fhandle3 *h = &res.mountres3_u.mountinfo.fhandle;

		fh->data.data_len = h->fhandle3_len;
		fh->data.data_val = malloc(h->fhandle3_len);
		if (fh->data.data_val) {
			memcpy(fh->data.data_val, h->fhandle3_val, h->fhandle3_len);
			rc = 0;
		}
	}
	clnt_freeres(clnt, (xdrproc_t)xdr_mountres3, (char *)&res);
	auth_destroy(clnt->cl_auth);
	clnt_destroy(clnt);
	return rc;
}

/* One call; 0 when it succeeded at the RPC and the NFS level. */
static int rl_call(CLIENT *clnt, int getattr, nfs_fh3 *fh)
{
	struct timeval tv = { RL_TIMEOUT_S, 0 };
	GETATTR3args a;
	GETATTR3res res;
	int rc;

	if (!getattr)
		return clnt_call(clnt, NFSPROC3_NULL, RL_XDR_VOID, NULL, RL_XDR_VOID, NULL, tv) ==
		       RPC_SUCCESS ? 0 : -1;
	a.object = *fh;
	memset(&res, 0, sizeof(res));
	if (clnt_call(clnt, NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args, (char *)&a,
		      (xdrproc_t)xdr_GETATTR3res, (char *)&res, tv) != RPC_SUCCESS)
		return -1;
	rc = res.status == NFS3_OK ? 0 : -1;
	clnt_freeres(clnt, (xdrproc_t)xdr_GETATTR3res, (char *)&res);
	return rc;
}

static int rl_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int rl_parse(int argc, char **argv, struct rl_opts *o)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "mount-port", required_argument, NULL, 'm' },
		{ "export", required_argument, NULL, 'e' },
		{ "call", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->o_seconds = 5;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': o->o_port = atoi(optarg); break;
		case 'm': o->o_mount_port = atoi(optarg); break;
		case 'e': o->o_export = optarg; break;
		case 'c': o->o_call = optarg; break;
		case 's': o->o_seconds = atof(optarg); break;
		case 'h': rl_usage(stdout); exit(0);
		default: rl_usage(stderr); return -1;
		}
	}
	if (o->o_port <= 0 || o->o_port > 65535 || !o->o_call || o->o_seconds <= 0 ||
	    (strcmp(o->o_call, "null") && strcmp(o->o_call, "getattr"))) {
		rl_usage(stderr);
		return -1;
	}
	if (!strcmp(o->o_call, "getattr") && (!o->o_export || o->o_mount_port <= 0)) {
		fprintf(stderr, "rpclat: --call getattr needs --mount-port and --export\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rl_opts o = { 0 };
	nfs_fh3 fh = { { 0, NULL } };
	uint32_t *lat = NULL;
	size_t n = 0, cap = 0;
	uint64_t t0, tend, start, errors = 0;
	int getattr;
	CLIENT *clnt;

	if (rl_parse(argc, argv, &o))
		return 2;
	getattr = !strcmp(o.o_call, "getattr");
	if (getattr && rl_mount(&o, &fh))
		return 1;
	clnt = rl_connect(o.o_port, NFS_PROGRAM, NFS_V3);
	if (!clnt)
		return 1;
	t0 = rl_now_ns() + RL_WARMUP_NS;
	tend = t0 + (uint64_t)(o.o_seconds * 1e9);
	for (;;) {
		uint64_t now;

		start = rl_now_ns();
		if (start >= tend)
			break;
		if (rl_call(clnt, getattr, &fh)) {
			if (++errors == 1)
				fprintf(stderr, "rpclat: %s failed: %s\n", o.o_call,
					clnt_sperror(clnt, "call"));
			if (errors > 100)
				break;
			continue;
		}
		now = rl_now_ns();
		if (start < t0)
			continue;
		if (n == cap) {
			uint32_t *p;

			cap = cap ? 2 * cap : 65536;
			p = realloc(lat, cap * sizeof(*lat));
			if (!p) {
				fprintf(stderr, "rpclat: out of memory\n");
				return 1;
			}
			lat = p;
		}
		lat[n++] = now - start > UINT32_MAX ? UINT32_MAX : (uint32_t)(now - start);
	}
	qsort(lat, n, sizeof(*lat), rl_cmp);
	printf("RESULT workload=%s ops=%zu seconds=%.3f rate=%.1f unit=calls/s p50_us=%.1f "
	       "p99_us=%.1f errors=%llu\n", o.o_call, n, o.o_seconds, n / o.o_seconds,
	       n ? lat[n / 2] / 1000.0 : 0, n ? lat[n * 99 / 100] / 1000.0 : 0,
	       (unsigned long long)errors);
	free(lat);
	free(fh.data.data_val);
	auth_destroy(clnt->cl_auth);
	clnt_destroy(clnt);
	return errors ? 1 : 0;
}
