/*
 * The served world of fuzz_serve and gen_seeds (see serve_env.h). Everything lives under
 * one mkdtemp() directory in $TMPDIR, removed by senv_close() (libFuzzer ends with
 * _exit, so `make fuzz` points TMPDIR into build/fuzz/tmp); the server never follows
 * symlinks, so nothing a fuzzed call does can land outside it.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cred.h"
#include "exports.h"
#include "nfs.h"
#include "nlm.h"
#include "nsm.h"
#include "portmap.h"
#include "rpc.h"
#include "store.h"
#include "sm_inter.h"
#include "union.h"
#include "serve_env.h"
#include "../rmtree.h"

const char *const senv_names[SENV_NOBJ] = { "", "file", "dir", "inner", "link", "upfile", "big" };

static const char *const senv_rules[] = {
	"10.0.0.0/8(ro)", "::1(rw,all_squash)", "127.0.0.1(rw,no_root_squash)", "*(ro)",
};

static struct {
	char se_root[256];
	char se_upper[272];
	char se_lower[272];
	char se_state[272];
	char *se_branches[2];
	struct export_conf se_ec;
	struct config se_cf;
	struct store *se_store;
	struct union_export *se_ux;
	struct union_export *se_exports[1];
	struct nfs_server se_ns;
	struct nsm *se_nsm;
	struct nlm_service *se_nlm;
	struct fh se_fh[SENV_NOBJ];
	int se_open;
} senv;

static void senv_die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz serve env: %s: %s\n", what, why);
	abort();
}

static void senv_file(const char *dir, const char *name, const char *data)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		senv_die(path, "cannot write");
	close(fd);
}

static void senv_mkdir(const char *path)
{
	if (mkdir(path, 0755) != 0)
		senv_die(path, "cannot create the directory");
}

static void senv_wipe(void)
{
	/* rm_tree never follows a symlink, such as one a fuzzed call made. */
	rm_tree(senv.se_upper);
	rm_tree(senv.se_lower);
	rm_tree(senv.se_state);
}

/*
 * A call served here has no local address (rpc_serve takes none), which NSM's list needs:
 * monitoring is left out, so locks are granted and the lock table is what gets fuzzed.
 */
static int senv_no_monitor(void *arg, const struct sockaddr *client, socklen_t len,
			   const char *caller_name, const struct sockaddr *local, socklen_t locallen)
{
	(void)arg;
	(void)client;
	(void)len;
	(void)caller_name;
	(void)local;
	(void)locallen;
	return 0;
}

/*
 * The lock programs over the same exports: NLM with no grace and no callbacks (nothing may
 * leave the process: its *_RES calls and GRANTED callbacks are dropped) nor monitoring, NSM
 * on the world's state directory.
 */
static void senv_locks_start(void)
{
	static const struct nlm_hooks hooks = { .nh_monitor = senv_no_monitor };
	struct nlm_opts o = { .no_grace_seconds = 0, .no_hooks = &hooks };
	char err[512];

	if (nsm_open(senv.se_state, NULL, &senv.se_nsm, err, sizeof(err)) != 0)
		senv_die("nsm_open", err);
	if (nlm_service_new(&senv.se_ns, senv.se_nsm, NULL, &o, &senv.se_nlm, err, sizeof(err)) != 0)
		senv_die("nlm_service_new", err);
	rpc_dispatch_set_ctx(NLM_PROG, senv.se_nlm);
	rpc_dispatch_set_ctx(SM_PROG, senv.se_nsm);
}

static void senv_start(void)
{
	static const struct rpc_program *const programs[] = {
		&nfs3_program, &mount_program, &portmap_program, &nlm_program, &nsm_program,
	};
	static const struct portmap_mapping maps[] = {
		{ 100003, 3, IPPROTO_TCP, 2049 }, { 100003, 3, IPPROTO_UDP, 2049 },
		{ 100005, 1, IPPROTO_TCP, 20048 }, { 100005, 3, IPPROTO_TCP, 20048 },
		{ 100005, 3, IPPROTO_UDP, 20048 },
	};
	char err[512], sub[512];
	uint64_t parent[SENV_NOBJ] = { 0, STORE_ROOT_INO, STORE_ROOT_INO, 0, STORE_ROOT_INO,
				       STORE_ROOT_INO, STORE_ROOT_INO };

	senv_mkdir(senv.se_upper);
	senv_mkdir(senv.se_lower);
	senv_mkdir(senv.se_state);
	senv_file(senv.se_lower, "file", "hello, lower\n");
	snprintf(sub, sizeof(sub), "%s/dir", senv.se_lower);
	senv_mkdir(sub);
	senv_file(sub, "inner", "inner\n");
	snprintf(sub, sizeof(sub), "%s/link", senv.se_lower);
	if (symlink("file", sub) != 0)
		senv_die(sub, "cannot create the symlink");
	senv_file(senv.se_upper, "upfile", "upper\n");
	senv_file(senv.se_lower, "big", "");
	snprintf(sub, sizeof(sub), "%s/big", senv.se_lower);
	if (truncate(sub, SENV_BIG_SIZE) != 0)
		senv_die(sub, "cannot make it 1 MiB");

	if (store_open(senv.se_state, &senv.se_store, err, sizeof(err)) != 0)
		senv_die("store_open", err);
	if (union_open(senv.se_ec.ec_name, senv.se_ec.ec_branches, senv.se_ec.ec_nbranches, NULL,
		       senv.se_ec.ec_opts.eo_ro ? UNION_OPEN_RO : 0, "fix -e", senv.se_store,
		       &senv.se_ux, err, sizeof(err)) != 0)
		senv_die("union_open", err);
	nfs_server_init(&senv.se_ns, &senv.se_cf);
	senv.se_exports[0] = senv.se_ux;
	senv.se_ns.ns_exports = senv.se_exports;
	senv.se_ns.ns_nexports = 1;
	/* A fixed key instead of the store's random one: seeds on disk hold valid handles. */
	memset(senv.se_ns.ns_handle_key, 0x5a, sizeof(senv.se_ns.ns_handle_key));
	portmap_builtin_set(maps, (int)(sizeof(maps) / sizeof(maps[0])));
	rpc_dispatch_init(programs, (int)(sizeof(programs) / sizeof(programs[0])), &senv.se_ns);
	senv_locks_start();

	/* Looked up in a fixed order on a fresh store, so the inode numbers are fixed too. */
	senv.se_fh[SENV_ROOT] = (struct fh){ .fh_export = union_export_id(senv.se_ux),
					     .fh_ino = STORE_ROOT_INO };
	for (int i = SENV_FILE; i < SENV_NOBJ; i++) {
		uint64_t dir = parent[i] ? parent[i] : senv.se_fh[SENV_DIR].fh_ino;
		struct stat st;
		int rc = union_lookup(senv.se_ux, dir, senv_names[i], &senv.se_fh[i].fh_ino, &st);

		if (rc != 0)
			senv_die(senv_names[i], strerror(-rc));
		senv.se_fh[i].fh_export = senv.se_fh[SENV_ROOT].fh_export;
	}
	senv.se_open = 1;
}

static void senv_stop(void)
{
	if (!senv.se_open)
		return;
	rpc_dispatch_init(NULL, 0, NULL);
	nlm_service_free(senv.se_nlm);
	nsm_close(senv.se_nsm);
	senv.se_nlm = NULL;
	senv.se_nsm = NULL;
	union_close(senv.se_ux);
	store_close(senv.se_store);
	nfs_server_free(&senv.se_ns);
	senv.se_ux = NULL;
	senv.se_store = NULL;
	senv.se_open = 0;
}

void senv_open(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(senv.se_root, sizeof(senv.se_root), "%s/fuzz_serve.XXXXXX",
		 tmp && *tmp == '/' && strlen(tmp) < 200 ? tmp : "/tmp");
	if (mkdtemp(senv.se_root) == NULL)
		senv_die(senv.se_root, "mkdtemp failed");
	snprintf(senv.se_upper, sizeof(senv.se_upper), "%s/upper", senv.se_root);
	snprintf(senv.se_lower, sizeof(senv.se_lower), "%s/lower", senv.se_root);
	snprintf(senv.se_state, sizeof(senv.se_state), "%s/state", senv.se_root);
	senv.se_branches[0] = senv.se_upper;
	senv.se_branches[1] = senv.se_lower;
	senv.se_ec.ec_name = "/union";
	senv.se_ec.ec_branches = senv.se_branches;
	senv.se_ec.ec_nbranches = 2;
	senv.se_ec.ec_opts.eo_squash = SQUASH_NONE;
	senv.se_ec.ec_opts.eo_anonuid = 65534;
	senv.se_ec.ec_opts.eo_anongid = 65534;
	senv.se_ec.ec_opts.eo_secure = true;
	senv.se_cf.cf_exports = &senv.se_ec;
	senv.se_cf.cf_nexports = 1;
	/* Client rules, so every call goes through matching; the fuzzed peer is 127.0.0.1:700. */
	for (size_t i = 0; i < sizeof(senv_rules) / sizeof(senv_rules[0]); i++) {
		char err[512];

		if (config_add_rule(&senv.se_ec, senv_rules[i], NULL, err, sizeof(err)) != 0)
			senv_die(senv_rules[i], err);
	}
	senv_start();
}

void senv_reset(void)
{
	cred_restore(); /* a served call leaves this thread acting as its caller */
	senv_stop();
	senv_wipe();
	senv_start();
}

void senv_close(void)
{
	cred_restore();
	senv_stop();
	senv_wipe();
	rmdir(senv.se_root);
	exports_rules_free(senv.se_ec.ec_rules, senv.se_ec.ec_nrules);
	senv.se_ec.ec_rules = NULL;
	senv.se_ec.ec_nrules = 0;
}

void senv_handle(enum senv_obj o, uint8_t out[FH_LEN])
{
	fh_encode(&senv.se_fh[o], senv.se_ns.ns_handle_key, out);
}

const struct config *senv_config(void)
{
	return &senv.se_cf;
}

struct nfs_server *senv_nfs(void)
{
	return &senv.se_ns;
}

const char *senv_dir(void)
{
	return senv.se_root;
}
