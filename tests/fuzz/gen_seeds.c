/*
 * Writes the hand-made seeds of the fuzz corpus: a valid call with valid handles (fixed
 * key, see serve_env.h) for every NFS v3, MOUNT v1/v3 and portmapper procedure, encoded
 * with the generated XDR routines. Each seed is served once on a pristine tree and its
 * reply status printed, so a seed that stops reaching its handler shows up.
 * A few of the calls are also kept to script fuzz_conn's seeds: the same calls sent to a
 * real server over TCP and UDP, pipelined, under memory pressure, fragmented, cut short.
 * The NLM and NSM calls' arguments alone are also fuzz_lockargs's seeds.
 *   gen_seeds CORPUS   (writes CORPUS/fuzz_serve, fuzz_call, fuzz_record, fuzz_conn and
 *                       fuzz_lockargs)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <rpc/rpc.h>
#include <rpc/pmap_prot.h>

#include "cred.h"
#include "mount3.h"
#include "nfs3.h"
#include "nlm.h"
#include "rpc.h"
#include "serve_env.h"
#include "sm_inter.h"

#define SEED_MAX 8192

static const char *gen_dir;
static uint8_t gen_fh[SENV_NOBJ][FH_LEN];
static unsigned gen_n;
static uint8_t gen_how;    /* the xid's low byte: how fuzz_serve delivers the call */

/* The calls fuzz_conn's seeds send, kept as encoded. */
static struct gen_call {
	const char *gc_name;
	uint8_t gc_buf[SEED_MAX];
	size_t gc_n;
} gen_kept[] = {
	{ .gc_name = "nfs-null" }, { .gc_name = "nfs-getattr" }, { .gc_name = "nfs-read" },
	{ .gc_name = "nfs-write-upper" }, { .gc_name = "nfs-readdirplus" },
	{ .gc_name = "mnt3-mnt" }, { .gc_name = "pm2-dump" },
};

static nfs_fh3 fh(enum senv_obj o)
{
	nfs_fh3 f = { .data = { .data_len = FH_LEN, .data_val = (char *)gen_fh[o] } };

	return f;
}

static diropargs3 dirop(enum senv_obj dir, const char *name)
{
	diropargs3 d = { .dir = fh(dir), .name = (char *)name };

	return d;
}

static void gen_write(const char *target, const char *name, const uint8_t *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", gen_dir, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		perror(path);
		senv_close();
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/seed-%s", gen_dir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		senv_close();
		exit(1);
	}
}

/*
 * The call header: xid with a zero low byte (fuzz_serve: TCP from 127.0.0.1:700), AUTH_SYS
 * as root (or AUTH_NONE when uid is -1), AUTH_NONE verifier. */
static bool gen_header(XDR *x, uint32_t prog, uint32_t vers, uint32_t proc, int64_t uid)
{
	uint32_t w[] = { (0x10 + gen_n) << 8 | gen_how, CALL, 2, prog, vers, proc };
	bool ok = true;

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		ok = ok && xdr_u_int(x, &w[i]);
	if (uid < 0) {
		uint32_t none[] = { AUTH_NONE, 0 };

		ok = ok && xdr_u_int(x, &none[0]) && xdr_u_int(x, &none[1]);
	} else {
		char *machine = "fuzzhost";
		uint32_t flavor = AUTH_SYS, len = 4 + 4 + 8 + 4 + 4 + 4 + 2 * 4, stamp = 7;
		uint32_t id = (uint32_t)uid, ng = 2, g1 = 0, g2 = 100;

		ok = ok && xdr_u_int(x, &flavor) && xdr_u_int(x, &len) && xdr_u_int(x, &stamp) &&
		     xdr_string(x, &machine, 255) && xdr_u_int(x, &id) && xdr_u_int(x, &id) &&
		     xdr_u_int(x, &ng) && xdr_u_int(x, &g1) && xdr_u_int(x, &g2);
	}
	{
		uint32_t verf[] = { AUTH_NONE, 0 };

		ok = ok && xdr_u_int(x, &verf[0]) && xdr_u_int(x, &verf[1]);
	}
	return ok;
}

/* The reply's accept_stat and, for a successful call, its first result word. */
static void gen_check(const char *name, const uint8_t *rec, size_t n)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(700) };
	size_t outlen = 0;
	uint8_t *out;
	uint32_t w[8] = { 0 };

	senv_reset();
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	out = rpc_serve(rec, n, (struct sockaddr *)&peer, sizeof(peer), IPPROTO_TCP, &outlen);
	cred_restore(); /* the call left this thread acting as its caller: write seeds as us */
	if (out == NULL) {
		printf("%-24s no reply\n", name);
		return;
	}
	memcpy(w, out + 4, outlen - 4 < sizeof(w) ? outlen - 4 : sizeof(w));
	if (ntohl(w[2]) != MSG_ACCEPTED)
		printf("%-24s denied (%u)\n", name, ntohl(w[3]));
	else if (ntohl(w[5]) != SUCCESS)
		printf("%-24s accept_stat %u\n", name, ntohl(w[5]));
	else
		printf("%-24s ok, first result word %u\n", name, outlen >= 32 ? ntohl(w[6]) : 0);
	free(out);
}

/* Encodes the call into buf (SEED_MAX bytes); returns its length. */
static size_t gen_encode(const char *name, uint32_t prog, uint32_t vers, uint32_t proc,
			 xdrproc_t fn, void *args, int64_t uid, uint8_t *buf)
{
	XDR x;
	size_t n;

	xdrmem_create(&x, (char *)buf, SEED_MAX, XDR_ENCODE);
	if (!gen_header(&x, prog, vers, proc, uid) || (fn != NULL && !fn(&x, args))) {
		fprintf(stderr, "%s: cannot encode\n", name);
		exit(1);
	}
	n = xdr_getpos(&x);
	xdr_destroy(&x);
	return n;
}

static void gen_uid(const char *name, uint32_t prog, uint32_t vers, uint32_t proc,
		    xdrproc_t fn, void *args, int64_t uid)
{
	uint8_t buf[SEED_MAX], rec[SEED_MAX + 8];
	size_t n = gen_encode(name, prog, vers, proc, fn, args, uid, buf);
	uint8_t hdr[3] = { 0x0f, 0xff, (uint8_t)gen_n };
	uint32_t mark;

	gen_n++;
	for (size_t i = 0; i < sizeof(gen_kept) / sizeof(gen_kept[0]); i++) {
		if (!strcmp(gen_kept[i].gc_name, name)) {
			memcpy(gen_kept[i].gc_buf, buf, n);
			gen_kept[i].gc_n = n;
		}
	}
	gen_write("fuzz_serve", name, buf, n);
	gen_write("fuzz_call", name, buf, n);
	/* fuzz_record: max 4095, then the call as two fragments. */
	memcpy(rec, hdr, 3);
	mark = htonl((uint32_t)(n / 2));
	memcpy(rec + 3, &mark, 4);
	memcpy(rec + 7, buf, n / 2);
	mark = htonl(0x80000000u | (uint32_t)(n - n / 2));
	memcpy(rec + 7 + n / 2, &mark, 4);
	memcpy(rec + 11 + n / 2, buf + n / 2, n - n / 2);
	gen_write("fuzz_record", name, rec, n + 8 + 3);
	if (gen_how == 0)
		gen_check(name, buf, n);
}

static void gen(const char *name, uint32_t prog, uint32_t vers, uint32_t proc, xdrproc_t fn,
		void *args)
{
	gen_uid(name, prog, vers, proc, fn, args, 0);
}

static sattr3 attrs_mode(uint32_t mode)
{
	sattr3 s;

	memset(&s, 0, sizeof(s));
	s.mode.set_it = TRUE;
	s.mode.set_mode3_u.mode = mode;
	return s;
}

static void gen_nfs(void)
{
	static char data[] = "fuzz data";
	static char target[] = "file";
	const uint32_t P = NFS_PROGRAM, V = NFS_V3;

	gen("nfs-null", P, V, 0, RPC_XDRPROC(xdr_void), NULL);
	gen_uid("nfs-null-authnone", P, V, 0, RPC_XDRPROC(xdr_void), NULL, -1);
	{
		GETATTR3args a = { .object = fh(SENV_FILE) };

		gen("nfs-getattr", P, V, 1, RPC_XDRPROC(xdr_GETATTR3args), &a);
		a.object = fh(SENV_ROOT);
		gen("nfs-getattr-root", P, V, 1, RPC_XDRPROC(xdr_GETATTR3args), &a);
	}
	{
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = fh(SENV_FILE);
		a.new_attributes = attrs_mode(0600);
		a.new_attributes.size.set_it = TRUE;
		a.new_attributes.size.set_size3_u.size = 3;
		a.new_attributes.mtime.set_it = SET_TO_SERVER_TIME;
		gen("nfs-setattr", P, V, 2, RPC_XDRPROC(xdr_SETATTR3args), &a);
		a.object = fh(SENV_UPFILE);
		a.new_attributes.uid.set_it = TRUE;
		a.new_attributes.uid.set_uid3_u.uid = 1000;
		a.guard.check = TRUE;
		gen("nfs-setattr-guard", P, V, 2, RPC_XDRPROC(xdr_SETATTR3args), &a);
	}
	{
		LOOKUP3args a = { .what = dirop(SENV_ROOT, "file") };

		gen("nfs-lookup", P, V, 3, RPC_XDRPROC(xdr_LOOKUP3args), &a);
		a.what = dirop(SENV_DIR, "..");
		gen("nfs-lookup-dotdot", P, V, 3, RPC_XDRPROC(xdr_LOOKUP3args), &a);
		a.what = dirop(SENV_DIR, "inner");
		gen("nfs-lookup-inner", P, V, 3, RPC_XDRPROC(xdr_LOOKUP3args), &a);
	}
	{
		ACCESS3args a = { .object = fh(SENV_DIR), .access = 0x3f };

		gen("nfs-access", P, V, 4, RPC_XDRPROC(xdr_ACCESS3args), &a);
		gen_uid("nfs-access-user", P, V, 4, RPC_XDRPROC(xdr_ACCESS3args), &a, 1000);
	}
	{
		READLINK3args a = { .symlink = fh(SENV_LINK) };

		gen("nfs-readlink", P, V, 5, RPC_XDRPROC(xdr_READLINK3args), &a);
	}
	{
		READ3args a = { .file = fh(SENV_FILE), .offset = 2, .count = 100 };

		gen("nfs-read", P, V, 6, RPC_XDRPROC(xdr_READ3args), &a);
	}
	{
		WRITE3args a = { .file = fh(SENV_FILE), .offset = 4, .count = sizeof(data) - 1,
				 .stable = FILE_SYNC, .data = { sizeof(data) - 1, data } };

		gen("nfs-write", P, V, 7, RPC_XDRPROC(xdr_WRITE3args), &a);
		a.file = fh(SENV_UPFILE);
		a.stable = UNSTABLE;
		gen("nfs-write-upper", P, V, 7, RPC_XDRPROC(xdr_WRITE3args), &a);
	}
	{
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		a.where = dirop(SENV_ROOT, "new");
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes = attrs_mode(0644);
		gen("nfs-create", P, V, 8, RPC_XDRPROC(xdr_CREATE3args), &a);
		a.where = dirop(SENV_DIR, "excl");
		a.how.mode = EXCLUSIVE;
		memcpy(a.how.createhow3_u.verf, "verifier", NFS3_CREATEVERFSIZE);
		gen("nfs-create-excl", P, V, 8, RPC_XDRPROC(xdr_CREATE3args), &a);
	}
	{
		MKDIR3args a = { .where = dirop(SENV_DIR, "sub"), .attributes = attrs_mode(0755) };

		gen("nfs-mkdir", P, V, 9, RPC_XDRPROC(xdr_MKDIR3args), &a);
	}
	{
		SYMLINK3args a = { .where = dirop(SENV_ROOT, "sl") };

		a.symlink.symlink_attributes = attrs_mode(0777);
		a.symlink.symlink_data = target;
		gen("nfs-symlink", P, V, 10, RPC_XDRPROC(xdr_SYMLINK3args), &a);
	}
	{
		MKNOD3args a;

		memset(&a, 0, sizeof(a));
		a.where = dirop(SENV_ROOT, "fifo");
		a.what.type = NF3FIFO;
		a.what.mknoddata3_u.pipe_attributes = attrs_mode(0644);
		gen("nfs-mknod-fifo", P, V, 11, RPC_XDRPROC(xdr_MKNOD3args), &a);
		a.where = dirop(SENV_ROOT, "chr");
		a.what.type = NF3CHR;
		a.what.mknoddata3_u.device.dev_attributes = attrs_mode(0600);
		a.what.mknoddata3_u.device.spec.specdata1 = 1;
		a.what.mknoddata3_u.device.spec.specdata2 = 3;
		gen("nfs-mknod-chr", P, V, 11, RPC_XDRPROC(xdr_MKNOD3args), &a);
	}
	{
		REMOVE3args a = { .object = dirop(SENV_ROOT, "file") };

		gen("nfs-remove", P, V, 12, RPC_XDRPROC(xdr_REMOVE3args), &a);
		a.object = dirop(SENV_ROOT, "upfile");
		gen("nfs-remove-upper", P, V, 12, RPC_XDRPROC(xdr_REMOVE3args), &a);
	}
	{
		RMDIR3args a = { .object = dirop(SENV_ROOT, "dir") };

		gen("nfs-rmdir", P, V, 13, RPC_XDRPROC(xdr_RMDIR3args), &a);
	}
	{
		RENAME3args a = { .from = dirop(SENV_ROOT, "file"), .to = dirop(SENV_DIR, "moved") };

		gen("nfs-rename", P, V, 14, RPC_XDRPROC(xdr_RENAME3args), &a);
		a.from = dirop(SENV_ROOT, "dir");
		a.to = dirop(SENV_ROOT, "dir2");
		gen("nfs-rename-dir", P, V, 14, RPC_XDRPROC(xdr_RENAME3args), &a);
	}
	{
		LINK3args a = { .file = fh(SENV_FILE), .link = dirop(SENV_DIR, "hard") };

		gen("nfs-link", P, V, 15, RPC_XDRPROC(xdr_LINK3args), &a);
	}
	{
		READDIR3args a = { .dir = fh(SENV_ROOT), .cookie = 0, .count = 1024 };

		gen("nfs-readdir", P, V, 16, RPC_XDRPROC(xdr_READDIR3args), &a);
		a.cookie = 2;
		gen("nfs-readdir-cookie", P, V, 16, RPC_XDRPROC(xdr_READDIR3args), &a);
	}
	{
		READDIRPLUS3args a = { .dir = fh(SENV_DIR), .dircount = 512, .maxcount = 4096 };

		gen("nfs-readdirplus", P, V, 17, RPC_XDRPROC(xdr_READDIRPLUS3args), &a);
	}
	{
		FSSTAT3args a = { .fsroot = fh(SENV_ROOT) };

		gen("nfs-fsstat", P, V, 18, RPC_XDRPROC(xdr_FSSTAT3args), &a);
	}
	{
		FSINFO3args a = { .fsroot = fh(SENV_ROOT) };

		gen("nfs-fsinfo", P, V, 19, RPC_XDRPROC(xdr_FSINFO3args), &a);
	}
	{
		PATHCONF3args a = { .object = fh(SENV_FILE) };

		gen("nfs-pathconf", P, V, 20, RPC_XDRPROC(xdr_PATHCONF3args), &a);
	}
	{
		COMMIT3args a = { .file = fh(SENV_UPFILE), .offset = 0, .count = 0 };

		gen("nfs-commit", P, V, 21, RPC_XDRPROC(xdr_COMMIT3args), &a);
	}
}

/* A few calls as other clients make them (see fuzz_serve.c for the bits). */
static void gen_variants(void)
{
	static char data[] = "x";
	WRITE3args w = { .file = fh(SENV_UPFILE), .count = 1, .stable = FILE_SYNC,
			 .data = { 1, data } };
	READ3args r = { .file = fh(SENV_FILE), .count = 100000 };
	static const struct { const char *name; uint8_t how; } v[] = {
		{ "udp", 1 }, { "insecure", 2 }, { "ro-client", 4 }, { "squash-client", 8 },
		{ "star-client", 12 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char name[48];

		gen_how = v[i].how;
		snprintf(name, sizeof(name), "nfs-write-%s", v[i].name);
		gen(name, NFS_PROGRAM, NFS_V3, 7, RPC_XDRPROC(xdr_WRITE3args), &w);
		snprintf(name, sizeof(name), "nfs-read-%s", v[i].name);
		gen(name, NFS_PROGRAM, NFS_V3, 6, RPC_XDRPROC(xdr_READ3args), &r);
	}
	gen_how = 0;
}

static void gen_mount(void)
{
	static char *path = "/union";
	static char *bad = "/nope";

	for (uint32_t v = 1; v <= 3; v += 2) {
		char name[32];

#define GEN_MNT(label, proc, fn, args) \
		snprintf(name, sizeof(name), "mnt%u-%s", v, label); \
		gen(name, MOUNT_PROGRAM, v, proc, RPC_XDRPROC(fn), args)
		GEN_MNT("null", 0, xdr_void, NULL);
		GEN_MNT("mnt", 1, xdr_dirpath, &path);
		GEN_MNT("mnt-bad", 1, xdr_dirpath, &bad);
		GEN_MNT("dump", 2, xdr_void, NULL);
		GEN_MNT("umnt", 3, xdr_dirpath, &path);
		GEN_MNT("umntall", 4, xdr_void, NULL);
		GEN_MNT("export", 5, xdr_void, NULL);
#undef GEN_MNT
	}
}

static bool_t gen_xdr_rpcb(XDR *x, void *p)
{
	char **s = p;
	uint32_t prog = 100003, vers = 3;

	return xdr_u_int(x, &prog) && xdr_u_int(x, &vers) && xdr_string(x, &s[0], 64) &&
	       xdr_string(x, &s[1], 128) && xdr_string(x, &s[2], 255);
}

static void gen_portmap(void)
{
	struct pmap pm = { .pm_prog = 100003, .pm_vers = 3, .pm_prot = IPPROTO_TCP };
	char *rb[3] = { "tcp", "", "" };
	char *rb6[3] = { "udp6", "::1.8.1", "me" };

	gen("pm2-null", 100000, 2, 0, RPC_XDRPROC(xdr_void), NULL);
	gen("pm2-set", 100000, 2, 1, RPC_XDRPROC(xdr_pmap), &pm);
	gen("pm2-unset", 100000, 2, 2, RPC_XDRPROC(xdr_pmap), &pm);
	gen("pm2-getport", 100000, 2, 3, RPC_XDRPROC(xdr_pmap), &pm);
	gen("pm2-dump", 100000, 2, 4, RPC_XDRPROC(xdr_void), NULL);
	for (uint32_t v = 3; v <= 4; v++) {
		char name[32];

		snprintf(name, sizeof(name), "pm%u-null", v);
		gen(name, 100000, v, 0, RPC_XDRPROC(xdr_void), NULL);
		snprintf(name, sizeof(name), "pm%u-set", v);
		gen(name, 100000, v, 1, RPC_XDRPROC(gen_xdr_rpcb), rb);
		snprintf(name, sizeof(name), "pm%u-getaddr", v);
		gen(name, 100000, v, 3, RPC_XDRPROC(gen_xdr_rpcb), rb);
		snprintf(name, sizeof(name), "pm%u-getaddr6", v);
		gen(name, 100000, v, 3, RPC_XDRPROC(gen_xdr_rpcb), rb6);
		snprintf(name, sizeof(name), "pm%u-dump", v);
		gen(name, 100000, v, 4, RPC_XDRPROC(xdr_void), NULL);
		snprintf(name, sizeof(name), "pm%u-gettime", v);
		gen(name, 100000, v, 6, RPC_XDRPROC(xdr_void), NULL);
	}
	gen("pm4-getversaddr", 100000, 4, 9, RPC_XDRPROC(gen_xdr_rpcb), rb);
}

/*
 * fuzz_lockargs's input: the program's index there (0 NLM, 1 NSM), the procedure, the
 * arguments alone.
 */
static void gen_lockargs(const char *name, uint8_t prog, uint8_t proc, xdrproc_t fn, void *args)
{
	uint8_t buf[SEED_MAX];
	XDR x;

	buf[0] = prog;
	buf[1] = proc;
	xdrmem_create(&x, (char *)buf + 2, SEED_MAX - 2, XDR_ENCODE);
	if (!fn(&x, args)) {
		fprintf(stderr, "%s: cannot encode\n", name);
		exit(1);
	}
	gen_write("fuzz_lockargs", name, buf, 2 + xdr_getpos(&x));
	xdr_destroy(&x);
}

/* Served as calls (fuzz_serve and the others) and as arguments alone (fuzz_lockargs). */
static void gen_lock_call(const char *name, uint32_t prog, uint32_t vers, uint32_t proc,
			  xdrproc_t fn, void *args)
{
	gen(name, prog, vers, proc, fn, args);
	if (fn != RPC_XDRPROC(xdr_void))
		gen_lockargs(name, prog == NLM_PROG ? 0 : 1, (uint8_t)proc, fn, args);
}

/*
 * NLM v4 on the world's "file": a lock taken, tested, unlocked; a blocked request and its
 * cancel (another owner holds the range: the seeds are served one by one on a fresh world,
 * so each stands alone); the asynchronous forms, shares, FREE_ALL. NSM: SM_NOTIFY, SM_STAT,
 * SM_MON (refused).
 */
static void gen_locks(void)
{
	nlm4_lock lk = {
		.caller_name = "fuzzhost",
		.fh = { .nlm4_netobj_len = FH_LEN, .nlm4_netobj_val = (char *)gen_fh[SENV_FILE] },
		.oh = { .nlm4_netobj_len = 6, .nlm4_netobj_val = "owner1" },
		.svid = 42, .l_offset = 100, .l_len = 0,
	};
	nlm4_netobj cookie = { .nlm4_netobj_len = 8, .nlm4_netobj_val = "cookie01" };
	nlm4_lockargs la = { .cookie = cookie, .block = 0, .exclusive = 1, .alock = lk,
			     .reclaim = 0, .state = 3 };
	nlm4_lockargs lb = la;
	nlm4_cancargs ca = { .cookie = cookie, .block = 1, .exclusive = 1, .alock = lk };
	nlm4_testargs ta = { .cookie = cookie, .exclusive = 0, .alock = lk };
	nlm4_unlockargs ua = { .cookie = cookie, .alock = lk };
	nlm4_res res = { .cookie = cookie, .stat = { NLM4_GRANTED } };
	nlm4_testres tres = { .cookie = cookie, .stat = { .stat = NLM4_GRANTED } };
	nlm4_shareargs sa = {
		.cookie = cookie,
		.share = { .caller_name = "fuzzhost", .fh = lk.fh, .oh = lk.oh, .mode = fsm_DW,
			   .access = fsa_RW },
	};
	nlm4_notify nn = { .name = "fuzzhost", .state = 5 };
	stat_chge sc = { .mon_name = "fuzzhost", .state = 5 };
	sm_name smn = { .mon_name = "fuzzhost" };
	mon mn = { .mon_id = { .mon_name = "fuzzhost",
			       .my_id = { .my_name = "localhost", .my_prog = 100021,
					  .my_vers = 4, .my_proc = 16 } } };

	lb.block = 1;
	lb.alock.l_len = 10;
	gen_lock_call("nlm-null", NLM_PROG, NLM_VERS4, NLMPROC4_NULL, RPC_XDRPROC(xdr_void), NULL);
	gen_lock_call("nlm-test", NLM_PROG, NLM_VERS4, NLMPROC4_TEST,
		      RPC_XDRPROC(xdr_nlm4_testargs), &ta);
	gen_lock_call("nlm-lock", NLM_PROG, NLM_VERS4, NLMPROC4_LOCK,
		      RPC_XDRPROC(xdr_nlm4_lockargs), &la);
	gen_lock_call("nlm-lock-block", NLM_PROG, NLM_VERS4, NLMPROC4_LOCK,
		      RPC_XDRPROC(xdr_nlm4_lockargs), &lb);
	gen_lock_call("nlm-cancel", NLM_PROG, NLM_VERS4, NLMPROC4_CANCEL,
		      RPC_XDRPROC(xdr_nlm4_cancargs), &ca);
	gen_lock_call("nlm-unlock", NLM_PROG, NLM_VERS4, NLMPROC4_UNLOCK,
		      RPC_XDRPROC(xdr_nlm4_unlockargs), &ua);
	gen_lock_call("nlm-granted", NLM_PROG, NLM_VERS4, NLMPROC4_GRANTED,
		      RPC_XDRPROC(xdr_nlm4_testargs), &ta);
	gen_lock_call("nlm-test-msg", NLM_PROG, NLM_VERS4, NLMPROC4_TEST_MSG,
		      RPC_XDRPROC(xdr_nlm4_testargs), &ta);
	gen_lock_call("nlm-lock-msg", NLM_PROG, NLM_VERS4, NLMPROC4_LOCK_MSG,
		      RPC_XDRPROC(xdr_nlm4_lockargs), &la);
	gen_lock_call("nlm-cancel-msg", NLM_PROG, NLM_VERS4, NLMPROC4_CANCEL_MSG,
		      RPC_XDRPROC(xdr_nlm4_cancargs), &ca);
	gen_lock_call("nlm-unlock-msg", NLM_PROG, NLM_VERS4, NLMPROC4_UNLOCK_MSG,
		      RPC_XDRPROC(xdr_nlm4_unlockargs), &ua);
	gen_lock_call("nlm-granted-msg", NLM_PROG, NLM_VERS4, NLMPROC4_GRANTED_MSG,
		      RPC_XDRPROC(xdr_nlm4_testargs), &ta);
	gen_lock_call("nlm-test-res", NLM_PROG, NLM_VERS4, NLMPROC4_TEST_RES,
		      RPC_XDRPROC(xdr_nlm4_testres), &tres);
	gen_lock_call("nlm-lock-res", NLM_PROG, NLM_VERS4, NLMPROC4_LOCK_RES,
		      RPC_XDRPROC(xdr_nlm4_res), &res);
	gen_lock_call("nlm-granted-res", NLM_PROG, NLM_VERS4, NLMPROC4_GRANTED_RES,
		      RPC_XDRPROC(xdr_nlm4_res), &res);
	gen_lock_call("nlm-share", NLM_PROG, NLM_VERS4, NLMPROC4_SHARE,
		      RPC_XDRPROC(xdr_nlm4_shareargs), &sa);
	gen_lock_call("nlm-unshare", NLM_PROG, NLM_VERS4, NLMPROC4_UNSHARE,
		      RPC_XDRPROC(xdr_nlm4_shareargs), &sa);
	gen_lock_call("nlm-nm-lock", NLM_PROG, NLM_VERS4, NLMPROC4_NM_LOCK,
		      RPC_XDRPROC(xdr_nlm4_lockargs), &la);
	gen_lock_call("nlm-free-all", NLM_PROG, NLM_VERS4, NLMPROC4_FREE_ALL,
		      RPC_XDRPROC(xdr_nlm4_notify), &nn);
	gen_lock_call("sm-null", SM_PROG, SM_VERS, SM_NULL, RPC_XDRPROC(xdr_void), NULL);
	gen_lock_call("sm-stat", SM_PROG, SM_VERS, SM_STAT, RPC_XDRPROC(xdr_sm_name), &smn);
	gen_lock_call("sm-mon", SM_PROG, SM_VERS, SM_MON, RPC_XDRPROC(xdr_mon), &mn);
	gen_lock_call("sm-unmon-all", SM_PROG, SM_VERS, SM_UNMON_ALL, RPC_XDRPROC(xdr_my_id),
		      &mn.mon_id.my_id);
	gen_lock_call("sm-notify", SM_PROG, SM_VERS, SM_NOTIFY, RPC_XDRPROC(xdr_stat_chge), &sc);
}

/* ---- fuzz_conn: scripts of client operations (see fuzz_conn.c for the op codes) ---- */

enum { GS_OPEN, GS_SEND, GS_RECORD, GS_UDP, GS_SHUT, GS_READ, GS_PUMP, GS_SETTLE };

struct gen_script {
	uint8_t gs_b[SEED_MAX * 4];
	size_t gs_n;
};

static const struct gen_call *gen_call(const char *name)
{
	for (size_t i = 0; i < sizeof(gen_kept) / sizeof(gen_kept[0]); i++)
		if (!strcmp(gen_kept[i].gc_name, name) && gen_kept[i].gc_n > 0)
			return &gen_kept[i];
	fprintf(stderr, "gen_seeds: the call %s was not generated\n", name);
	senv_close();
	exit(1);
}

static void gs_bytes(struct gen_script *s, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (s->gs_n + n > sizeof(s->gs_b)) {
		fprintf(stderr, "gen_seeds: a fuzz_conn script is too long\n");
		senv_close();
		exit(1);
	}
	memcpy(s->gs_b + s->gs_n, p, n);
	s->gs_n += n;
}

static void gs_byte(struct gen_script *s, unsigned b)
{
	uint8_t v = (uint8_t)b;

	gs_bytes(s, &v, 1);
}

static void gs_op(struct gen_script *s, unsigned op, unsigned k, unsigned v)
{
	gs_byte(s, op | k << 3 | v << 6);
}

/* RECORD: head bytes, then fill KiB of zeros, all one last fragment (no mark if raw). */
static void gs_record_fill(struct gen_script *s, unsigned k, const uint8_t *head, size_t h,
			   unsigned fill, bool raw)
{
	gs_op(s, GS_RECORD, k, raw);
	gs_byte(s, (unsigned)(h >> 8));
	gs_byte(s, (unsigned)h);
	gs_byte(s, fill);
	gs_bytes(s, head, h);
}

static void gs_record(struct gen_script *s, unsigned k, const char *call)
{
	const struct gen_call *c = gen_call(call);

	gs_record_fill(s, k, c->gc_buf, c->gc_n, 0, false);
}

static void gs_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/*
 * The head of a WRITE of kib KiB of zeros at offset: the kept WRITE with its offset, count
 * and data length changed, up to the data (the RECORD op's fill). Returns its length.
 */
static size_t gs_write_head(uint8_t *head, uint64_t offset, unsigned kib)
{
	const struct gen_call *w = gen_call("nfs-write-upper");
	size_t h = w->gc_n - 24;   /* up to count; then stable, the data's length, data */

	memcpy(head, w->gc_buf, h);
	gs_put32(head + h - 8, (uint32_t)(offset >> 32));
	gs_put32(head + h - 4, (uint32_t)offset);
	gs_put32(head + h, kib << 10);
	memcpy(head + h + 4, w->gc_buf + h + 4, 4);
	gs_put32(head + h + 8, kib << 10);
	return h + 12;
}

static void gs_write_big(struct gen_script *s, unsigned k, uint64_t offset, unsigned kib)
{
	uint8_t head[SEED_MAX];

	gs_record_fill(s, k, head, gs_write_head(head, offset, kib), kib, false);
}

/* A READ of count bytes of o from its start; *n receives its length. */
static const uint8_t *gs_read_call(enum senv_obj o, uint32_t count, size_t *n)
{
	static uint8_t buf[SEED_MAX];
	READ3args r = { .file = fh(o), .count = count };

	*n = gen_encode("read", NFS_PROGRAM, NFS_V3, 6, RPC_XDRPROC(xdr_READ3args), &r, 0, buf);
	return buf;
}

static void gs_udp(struct gen_script *s, bool secure, const char *call)
{
	const struct gen_call *c = gen_call(call);

	gs_op(s, GS_UDP, 0, secure);
	gs_byte(s, (unsigned)(c->gc_n >> 8));
	gs_byte(s, (unsigned)c->gc_n);
	gs_bytes(s, c->gc_buf, c->gc_n);
}

static void gs_send(struct gen_script *s, unsigned k, const uint8_t *p, size_t n)
{
	gs_op(s, GS_SEND, k, 0);
	gs_byte(s, (unsigned)(n - 1));
	gs_bytes(s, p, n);
}

static void gs_write(struct gen_script *s, const char *name)
{
	gen_write("fuzz_conn", name, s->gs_b, s->gs_n);
	gen_n++;
	s->gs_n = 0;
}

/*
 * Stalls found by fuzz_conn, as scripts that repeat them every time. Both on server 1,
 * where max-buffered (128 KiB) is below max-record, as --max-buffered 4M with WRITEs of
 * 1 MiB in flight from several clients would be.
 */
static void gen_conn_regress(struct gen_script *s)
{
	uint8_t head[SEED_MAX], mark[4];
	const uint8_t *read;
	size_t h, n;

	/*
	 * Two clients each send part of a 200 KiB WRITE (40 KiB): together past max-buffered,
	 * neither was read again (both waited for memory only they held).
	 */
	h = gs_write_head(head + 4, 4, 200);
	gs_put32(head, 0x80000000u | (uint32_t)(h + (200u << 10)));
	gs_byte(s, 1);
	for (unsigned k = 0; k < 2; k++)
		gs_op(s, GS_OPEN, k, 1);
	for (unsigned k = 0; k < 2; k++) {
		gs_send(s, k, head, h + 4);
		gs_record_fill(s, k, NULL, 0, 40, true);
	}
	gs_write(s, "regress-writers-stall");

	/*
	 * A client that stops reading 1 MiB READ replies holds max-buffered twice over, so six
	 * clients' READs are parked, each with the 64 KiB read behind it; once the first client
	 * reads again, the parked connections' own bytes kept them parked (and unread) forever.
	 */
	gs_byte(s, 1);
	gs_op(s, GS_OPEN, 0, 3);
	gs_op(s, GS_READ, 0, 0);
	read = gs_read_call(SENV_BIG, SENV_BIG_SIZE, &n);
	for (int i = 0; i < 10; i++)
		gs_record_fill(s, 0, read, n, 0, false);
	gs_op(s, GS_SETTLE, 0, 0);
	read = gs_read_call(SENV_FILE, 100, &n);
	gs_put32(head, 0x80000000u | (uint32_t)n);
	memcpy(head + 4, read, n);
	gs_put32(mark, 0x80000000u | (64u << 10));
	memcpy(head + 4 + n, mark, 4);
	h = n + 8;
	for (unsigned k = 1; k < 7; k++) {
		gs_op(s, GS_OPEN, k, 1);
		gs_record_fill(s, k, head, h, 64, true);
	}
	gs_write(s, "regress-parked-pending");

	/*
	 * Like the last one, but the client holding the memory fills its reply queue (so the
	 * server only writes to it) and then resets: its connection ended in the write path,
	 * which did not let the parked client go on.
	 */
	gs_byte(s, 1);
	gs_op(s, GS_OPEN, 0, 3);
	gs_op(s, GS_READ, 0, 0);
	read = gs_read_call(SENV_BIG, SENV_BIG_SIZE, &n);
	for (int i = 0; i < 16; i++)
		gs_record_fill(s, 0, read, n, 0, false);
	gs_op(s, GS_SETTLE, 0, 0);
	gs_op(s, GS_OPEN, 1, 1);
	gs_record_fill(s, 1, head, h, 64, true);
	gs_op(s, GS_SETTLE, 0, 0);
	gs_op(s, GS_SHUT, 0, 2);
	gs_write(s, "regress-reset-relieve");
}

static void gen_conn(void)
{
	static const char *const calls[] = { "nfs-null", "nfs-getattr", "nfs-read",
					     "nfs-readdirplus", "mnt3-mnt", "pm2-dump" };
	const struct gen_call *ga = gen_call("nfs-getattr");
	struct gen_script s = { .gs_n = 0 };
	uint8_t frag[SEED_MAX + 8];
	uint32_t mark;

	/* Server 0 (tight limits), one client from a privileged port, one of each call. */
	gs_byte(&s, 0);
	gs_op(&s, GS_OPEN, 0, 1);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		gs_record(&s, 0, calls[i]);
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_write(&s, "conn-calls");

	/* More READs than max-requests from a client that does not read, then reads. */
	gs_byte(&s, 0);
	gs_op(&s, GS_OPEN, 0, 1);
	gs_op(&s, GS_READ, 0, 0);
	for (int i = 0; i < 6; i++)
		gs_record(&s, 0, "nfs-read");
	gs_op(&s, GS_PUMP, 0, 0);
	gs_byte(&s, 15);
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_op(&s, GS_READ, 0, 0);
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_write(&s, "conn-pipeline");

	/* Two clients that do not read fill max-buffered; a third still gets its GETATTR. */
	gs_byte(&s, 0);
	for (unsigned k = 0; k < 3; k++)
		gs_op(&s, GS_OPEN, k, 1);
	gs_op(&s, GS_READ, 0, 0);
	gs_op(&s, GS_READ, 1, 0);
	for (int i = 0; i < 3; i++) {
		gs_record(&s, 0, "nfs-read");
		gs_record(&s, 1, "nfs-readdirplus");
	}
	gs_record(&s, 2, "nfs-getattr");
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_write(&s, "conn-pressure");

	/* Server 1 (records larger than max-buffered): a 200 KiB WRITE, read in place. */
	gs_byte(&s, 1);
	gs_op(&s, GS_OPEN, 0, 1);
	gs_write_big(&s, 0, 4, 200);
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_record(&s, 0, "nfs-getattr");
	gs_write(&s, "conn-bigwrite");

	/* A GETATTR in two fragments. */
	mark = htonl((uint32_t)(ga->gc_n / 2));
	memcpy(frag, &mark, 4);
	memcpy(frag + 4, ga->gc_buf, ga->gc_n / 2);
	mark = htonl(0x80000000u | (uint32_t)(ga->gc_n - ga->gc_n / 2));
	memcpy(frag + 4 + ga->gc_n / 2, &mark, 4);
	memcpy(frag + 8 + ga->gc_n / 2, ga->gc_buf + ga->gc_n / 2, ga->gc_n - ga->gc_n / 2);
	gs_byte(&s, 0);
	gs_op(&s, GS_OPEN, 0, 1);
	gs_send(&s, 0, frag, ga->gc_n + 8);
	gs_write(&s, "conn-fragments");

	/* A record larger than max-record: the connection is closed. */
	mark = htonl(0x80000000u | (64u << 10));
	gs_byte(&s, 0);
	gs_op(&s, GS_OPEN, 0, 0);
	gs_send(&s, 0, (const uint8_t *)&mark, 4);
	gs_send(&s, 0, ga->gc_buf, ga->gc_n);
	gs_write(&s, "conn-toobig");

	/* Half a call and a reset; another client half-closes after its call. */
	mark = htonl(0x80000000u | (uint32_t)ga->gc_n);
	gs_byte(&s, 1);
	gs_op(&s, GS_OPEN, 0, 1);
	gs_send(&s, 0, (const uint8_t *)&mark, 4);
	gs_send(&s, 0, ga->gc_buf, ga->gc_n / 2);
	gs_op(&s, GS_SHUT, 0, 2);
	gs_op(&s, GS_OPEN, 1, 1);
	gs_record(&s, 1, "nfs-getattr");
	gs_op(&s, GS_SHUT, 1, 0);
	gs_write(&s, "conn-reset");

	/* UDP from a privileged and an unprivileged port. */
	gs_byte(&s, 0);
	gs_udp(&s, true, "nfs-getattr");
	gs_udp(&s, false, "nfs-null");
	gs_udp(&s, true, "nfs-read");
	gs_udp(&s, true, "pm2-dump");
	gs_op(&s, GS_SETTLE, 0, 0);
	gs_write(&s, "conn-udp");

	/* A client from an unprivileged port: NFS refuses it, MOUNT answers. */
	gs_byte(&s, 1);
	gs_op(&s, GS_OPEN, 0, 0);
	gs_record(&s, 0, "nfs-getattr");
	gs_record(&s, 0, "mnt3-mnt");
	gs_write(&s, "conn-insecure");
	gen_conn_regress(&s);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	gen_dir = argv[1];
	senv_open();
	for (int i = 0; i < SENV_NOBJ; i++)
		senv_handle((enum senv_obj)i, gen_fh[i]);
	gen_nfs();
	gen_variants();
	gen_mount();
	gen_portmap();
	gen_conn();
	gen_locks();    /* after the others: their seeds (and xids) stay as they were */
	senv_close();
	printf("%u seeds written to %s\n", gen_n, gen_dir);
	return 0;
}
