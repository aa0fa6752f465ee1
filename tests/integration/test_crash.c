/*
 * kill -9 durability: clients keep the server busy, the server is killed with
 * SIGKILL at a random moment (or in the middle of a copy-up), restarted on the same state
 * directory, and everything it acknowledged before the kill must be there:
 *
 * - bytes written FILE_SYNC, and bytes written UNSTABLE then COMMITted with the verifier of
 *   their WRITE replies, read back the same (through the kept handle and through the name);
 * - names created, made, renamed (files and directories, made ones and lower ones) with an
 *   OK reply exist with the same fileid (the storms making them work in pairs in one
 *   directory, so several changes of one directory are in flight and share its flushes); names removed or renamed away with an OK reply stay
 *   away, also where a lower branch still has the name (a whiteout must hide it), and a name
 *   created again over a removed one is the new object, never the removed one;
 * - every kept handle of a live object answers GETATTR with its fileid and READ with its bytes;
 *   handles of removed objects are stale;
 * - a copy-up cut short by the kill leaves the lower content, or the content with the WRITE if
 *   that WRITE was answered, and the handle taken before it still works; a second (hard-linked)
 *   name of the file is the same object;
 * - `unionnfsd-ctl check` exits 0 and reports no error and no stale record that an in-flight
 *   change does not explain (those are then dropped with --repair, so each round starts clean).
 *
 * Changes in flight at the kill may end either way, but should leave no stale handle of a live
 * object, no new fileid and no stale record: a copy-up cut short is found again by its origin,
 * a RENAME or REMOVE is settled from its intent at start. A RENAME of a lower file copies it
 * up first, in a change of its own: one that leaves the file at its old name with a stale
 * handle is counted as a copy-up. Such leftovers are counted
 * and printed, and fail the test only with CRASH_STRICT_INFLIGHT=1 (every kind) or a list of
 * kinds, e.g. CRASH_STRICT_INFLIGHT=rename,remove (kinds: rename, remove, copyup). Everything
 * checked is checked again after every later kill.
 *
 * A kill of the process leaves the kernel's page cache alone: this checks the server's own
 * ordering of branch changes, inode map commits and replies, not what a power cut would lose.
 *
 * CRASH_ROUNDS (default 6) sets the number of kills, CRASH_SEED the random seed (printed).
 */
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T_WORK ".unionnfsd.work"          /* the upper's work directory (README) */
#define T_TMP "copyup."                   /* copies being built there */
#define T_DEFAULT_ROUNDS 6
#define T_NS_THREADS 4                    /* namespace storms per round ... */
#define T_NS_PER_DIR 2                    /* ... this many in each directory, at once */
#define T_LOWER_FILES 12                  /* lower files in each storm's directory */
#define T_LOWER_DIRS 3                    /* lower directories in it */
#define T_LOWER_DIR_FILES 3               /* lower files in each of those */
#define T_MAX_OBJS 60000
#define T_PATH 160
#define T_DEEPEST 80                      /* no new directory below a path this long */
#define T_DATA 64                         /* an object's own bytes, at offset 0 */
#define T_CHUNK 6000                      /* data file chunks: not page aligned */
#define T_MAX_CHUNKS 2048
#define T_COMMIT_EVERY 4                  /* UNSTABLE writes per COMMIT */
#define T_CU_SIZE (4u << 20)              /* a lower file big enough that copying takes a while */
#define T_CU_WRITE 4096
#define T_KILL_MIN_MS 80                  /* a random kill lands in [MIN, MAX) after the start */
#define T_KILL_MAX_MS 600
#define T_COPYUP_WAIT_MS 5000             /* for the copy-up to start in a copy-up round */
#define T_READ 32768
#define T_OUT 65536
#define T_SHOW 20                         /* failures printed in full */

/* An RPC that got no reply: the server died with the call in flight. */
#define T_INFLIGHT (-1)

enum obj_state {
	OBJ_LIVE,          /* acknowledged: exists at o_path, o_fh works */
	OBJ_REMOVED,       /* acknowledged removed: o_path absent, o_fh stale */
	OBJ_ABSENT,        /* never made (an unacknowledged create that did not happen) */
	OBJ_CREATING,      /* CREATE or MKDIR in flight at the kill */
	OBJ_REMOVING,      /* REMOVE in flight */
	OBJ_RENAMING,      /* RENAME to o_alt in flight */
};

enum content {
	CONTENT_EXACT,     /* o_data (o_len bytes) is the whole file */
	CONTENT_MAYBE,     /* the WRITE of o_data was in flight: o_data or empty */
};

struct obj {
	nfs_fh3 o_fh;
	uint64_t o_fileid;
	bool o_dir;
	enum obj_state o_state;
	enum content o_content;
	char o_path[T_PATH];       /* from the export root */
	char o_alt[T_PATH];        /* OBJ_RENAMING: the name it was being renamed to */
	char o_data[T_DATA];
	size_t o_len;
	uint64_t o_old_fileid;     /* before an in-flight op changed it */
	int o_gone;                /* removed: its entry in gone[]; created again: the one it reuses */
	uint64_t o_replaces;       /* created again over a removed name: the removed object's fileid */
	bool o_lower;              /* a lower file no acknowledged RENAME has copied up yet */
	const char *o_inflight;    /* the operation in flight at a kill, for the report */
	int o_inflight_round;      /* the round whose kill it was in flight at */
};

/* Names acknowledged as gone (removed, renamed away): never to reappear. */
struct gone_name {
	char g_path[T_PATH];
	bool g_reused;             /* created again (acknowledged or in flight): checked as such */
};

struct datafile {
	nfs_fh3 d_fh;
	uint64_t d_fileid;
	char d_path[T_PATH];
	bool d_unstable;
	uint32_t d_seed;
	int d_sent;                /* chunks written (answered or not) */
	bool d_acked[T_MAX_CHUNKS];
};

enum cu_state { CU_IDLE, CU_INFLIGHT, CU_ACKED, CU_SETTLED_LOWER };

struct copyup {
	char c_path[T_PATH];
	nfs_fh3 c_fh;
	uint64_t c_fileid;
	uint32_t c_seed;           /* lower content */
	uint32_t c_wseed;          /* the WRITE's bytes at c_woff */
	uint64_t c_woff;
	uint64_t c_old_fileid;
	char c_link[T_PATH];       /* a second lower name of the same file, or "" */
	bool c_read_all;           /* read whole once: later rounds read around the WRITE */
	int c_inflight_round;
	enum cu_state c_state;
};

/* Kinds of acknowledged operations, counted for the report. */
enum ack_kind {
	ACK_CREATE, ACK_MKDIR, ACK_RENAME, ACK_RENAME_DIR, ACK_REMOVE, ACK_CREATE_AGAIN,
	ACK_FILE_SYNC, ACK_UNSTABLE_STABLE, ACK_COMMIT, ACK_COPYUP_WRITE, ACK_KINDS
};

static const char *const ack_names[ACK_KINDS] = {
	"CREATE", "MKDIR", "RENAME of a file", "RENAME of a directory", "REMOVE",
	"CREATE over a removed name", "WRITE FILE_SYNC", "WRITE UNSTABLE answered FILE_SYNC",
	"COMMIT (of 4 UNSTABLE WRITEs)", "first WRITE to a lower file (copy-up)",
};

/* What one client thread does in a round and what it saw acknowledged. */
struct worker {
	CLIENT *w_clnt;
	int w_round;
	int w_id;
	uint64_t w_rand;
	nfs_fh3 w_dir;             /* storm: its directory */
	char w_dir_path[T_PATH];
	int w_subdirs[64];         /* storm: objects of its directories below w_dir */
	int w_nsubdirs;
	int *w_files;              /* storm: objects of live files it may rename or remove */
	int w_nfiles;
	int *w_all;                /* storm: all its objects */
	int w_nall;
	int *w_removed;            /* storm: objects it removed (acknowledged) */
	int w_nremoved;
	int w_counter;
	struct datafile *w_data;   /* writer */
	struct copyup *w_cu;       /* copy-up */
	int w_delay_ms;            /* copy-up: wait before the WRITE */
	int w_acked;               /* acknowledged operations */
	int w_acked_by[ACK_KINDS];
	int w_errors;              /* wrong replies (not failures of the connection) */
	char w_first_error[256];
};

static struct it_server srv;
static nfs_fh3 root;
static struct obj *objs;
static atomic_int nobjs;
static struct gone_name *gone;
static int ngone, gone_cap;
static pthread_mutex_t gone_lock = PTHREAD_MUTEX_INITIALIZER;
static struct datafile *datafiles[512];
static int ndatafiles;
static struct copyup copyups[256];
static int ncopyups;
static pthread_barrier_t start_line;  /* the clients and the killer start together */
static int cur_round = -1;

/* Figures of the whole run, printed at the end. */
static struct {
	int kills, copyup_kills;
	long acked_ops;
	long acked_by[ACK_KINDS];
	long verified;
	int inflight_renames, inflight_copyups, inflight_creates, inflight_removes;
	int rename_stale, copyup_stale;           /* kept handles stale after an in-flight op */
	int rename_new_fileid, copyup_new_fileid; /* the name's fileid changed */
	int copyup_links, link_split;             /* copy-ups of hard-linked files; names apart */
	int stale_after_remove, stale_after_rename, stale_after_copyup; /* check's stale records */
	int check_runs;
	int failures;
} fig;

/*
 * Whether leftovers of an in-flight change of kind ("rename", "remove", "copyup") fail the
 * test: CRASH_STRICT_INFLIGHT=1 for every kind, or a comma-separated list of kinds.
 */
static bool strict_inflight(const char *kind)
{
	const char *v = getenv("CRASH_STRICT_INFLIGHT");
	size_t len = strlen(kind);

	if (!v)
		return false;
	if (!strcmp(v, "1"))
		return true;
	for (const char *p = v; (p = strstr(p, kind)); p += len)
		if ((p == v || p[-1] == ',') && (p[len] == '\0' || p[len] == ','))
			return true;
	return false;
}

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int rand_between(uint64_t *x, int lo, int hi)
{
	return lo + (int)(next_rand(x) % (uint64_t)(hi - lo));
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void werr(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void werr(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->w_errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(w->w_first_error, sizeof(w->w_first_error), fmt, ap);
		va_end(ap);
	}
}

/* A failed check after a restart: printed (the first T_SHOW), counted, failed at the end. */
static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
	va_list ap;

	if (fig.failures++ < T_SHOW) {
		fprintf(stderr, "FAILURE: ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
	}
}

static void ack(struct worker *w, enum ack_kind k)
{
	w->w_acked++;
	w->w_acked_by[k]++;
}

/* --- calls from the client threads: the nfsstat3, or T_INFLIGHT without a reply --- */

static int call(CLIENT *c, uint32_t proc, xdrproc_t xa, void *a, xdrproc_t xr, void *r)
{
	return it_call(c, proc, xa, a, xr, r) == RPC_SUCCESS ? 0 : T_INFLIGHT;
}

static void fh_from(nfs_fh3 *dst, const post_op_fh3 *fh)
{
	memset(dst, 0, sizeof(*dst));
	if (fh->handle_follows)
		it_fh_copy(dst, &fh->post_op_fh3_u.handle);
}

/* CREATE (UNCHECKED, 0644) or MKDIR (0755) of name in dir; fills fh and fileid on OK. */
static int make_obj(CLIENT *c, const nfs_fh3 *dir, const char *name, bool is_dir, nfs_fh3 *fh,
		    uint64_t *fileid)
{
	int st;

	memset(fh, 0, sizeof(*fh));
	*fileid = 0;
	if (is_dir) {
		MKDIR3args a = { .where = { .dir = *dir, .name = (char *)name } };
		MKDIR3res r;

		a.attributes.mode.set_it = 1;
		a.attributes.mode.set_mode3_u.mode = 0755;
		memset(&r, 0, sizeof(r));
		if (call(c, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &a, (xdrproc_t)xdr_MKDIR3res,
			 &r) != 0)
			return T_INFLIGHT;
		st = r.status;
		if (st == NFS3_OK) {
			fh_from(fh, &r.MKDIR3res_u.resok.obj);
			if (r.MKDIR3res_u.resok.obj_attributes.attributes_follow)
				*fileid = r.MKDIR3res_u.resok.obj_attributes.post_op_attr_u.attributes.fileid;
		}
		it_free((xdrproc_t)xdr_MKDIR3res, &r);
	} else {
		CREATE3args a = { .where = { .dir = *dir, .name = (char *)name } };
		CREATE3res r;

		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
		memset(&r, 0, sizeof(r));
		if (call(c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a,
			 (xdrproc_t)xdr_CREATE3res, &r) != 0)
			return T_INFLIGHT;
		st = r.status;
		if (st == NFS3_OK) {
			fh_from(fh, &r.CREATE3res_u.resok.obj);
			if (r.CREATE3res_u.resok.obj_attributes.attributes_follow)
				*fileid = r.CREATE3res_u.resok.obj_attributes.post_op_attr_u.attributes.fileid;
		}
		it_free((xdrproc_t)xdr_CREATE3res, &r);
	}
	return st;
}

/* A WRITE; on OK, committed and verf tell how stable it is and in which server life. */
static int write_at(CLIENT *c, const nfs_fh3 *fh, uint64_t off, const void *data, size_t len,
		    stable_how how, stable_how *committed, char verf[NFS3_WRITEVERFSIZE])
{
	WRITE3args a = { .file = *fh, .offset = off, .count = (count3)len, .stable = how,
			 .data = { (u_int)len, (char *)data } };
	WRITE3res r;
	int st;

	*committed = UNSTABLE;
	memset(&r, 0, sizeof(r));
	if (call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a, (xdrproc_t)xdr_WRITE3res, &r) != 0)
		return T_INFLIGHT;
	st = r.status;
	if (st == NFS3_OK) {
		if (r.WRITE3res_u.resok.count != len)
			st = NFS3ERR_IO;   /* a short write is not what the tests send */
		*committed = r.WRITE3res_u.resok.committed;
		memcpy(verf, r.WRITE3res_u.resok.verf, NFS3_WRITEVERFSIZE);
	}
	it_free((xdrproc_t)xdr_WRITE3res, &r);
	return st;
}

static int commit_all(CLIENT *c, const nfs_fh3 *fh, char verf[NFS3_WRITEVERFSIZE])
{
	COMMIT3args a = { .file = *fh, .offset = 0, .count = 0 };
	COMMIT3res r;
	int st;

	memset(&r, 0, sizeof(r));
	if (call(c, NFSPROC3_COMMIT, (xdrproc_t)xdr_COMMIT3args, &a, (xdrproc_t)xdr_COMMIT3res,
		 &r) != 0)
		return T_INFLIGHT;
	st = r.status;
	if (st == NFS3_OK)
		memcpy(verf, r.COMMIT3res_u.resok.verf, NFS3_WRITEVERFSIZE);
	it_free((xdrproc_t)xdr_COMMIT3res, &r);
	return st;
}

static int rename_obj(CLIENT *c, const nfs_fh3 *from, const char *fname, const nfs_fh3 *to,
		      const char *tname)
{
	RENAME3args a = { .from = { .dir = *from, .name = (char *)fname },
			  .to = { .dir = *to, .name = (char *)tname } };
	RENAME3res r;
	int st;

	memset(&r, 0, sizeof(r));
	if (call(c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a, (xdrproc_t)xdr_RENAME3res,
		 &r) != 0)
		return T_INFLIGHT;
	st = r.status;
	it_free((xdrproc_t)xdr_RENAME3res, &r);
	return st;
}

static int remove_obj(CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	REMOVE3args a = { .object = { .dir = *dir, .name = (char *)name } };
	REMOVE3res r;
	int st;

	memset(&r, 0, sizeof(r));
	if (call(c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a, (xdrproc_t)xdr_REMOVE3res,
		 &r) != 0)
		return T_INFLIGHT;
	st = r.status;
	it_free((xdrproc_t)xdr_REMOVE3res, &r);
	return st;
}

/* --- the model --- */

static int obj_new(void)
{
	int i = atomic_fetch_add(&nobjs, 1);

	if (i >= T_MAX_OBJS) {
		atomic_fetch_sub(&nobjs, 1);
		return -1;
	}
	memset(&objs[i], 0, sizeof(objs[i]));
	return i;
}

static int gone_add(const char *path)
{
	int i = -1;

	pthread_mutex_lock(&gone_lock);
	if (ngone == gone_cap) {
		gone_cap = gone_cap ? 2 * gone_cap : 1024;
		gone = realloc(gone, (size_t)gone_cap * sizeof(*gone));
	}
	if (gone) {
		snprintf(gone[ngone].g_path, T_PATH, "%s", path);
		gone[ngone].g_reused = false;
		i = ngone++;
	}
	pthread_mutex_unlock(&gone_lock);
	return i;
}

static void gone_reuse(int i, bool reused)
{
	pthread_mutex_lock(&gone_lock);
	if (i >= 0 && i < ngone)
		gone[i].g_reused = reused;
	pthread_mutex_unlock(&gone_lock);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* --- the namespace storm: CREATE (with its own bytes), MKDIR, RENAME, REMOVE --- */

static void files_drop(struct worker *w, int k)
{
	w->w_files[k] = w->w_files[--w->w_nfiles];
}

/* A directory for a new name: the storm's own, or one of the directories it made. */
static void pick_dir(struct worker *w, const nfs_fh3 **fh, const char **path)
{
	int k = rand_between(&w->w_rand, 0, w->w_nsubdirs + 1);

	if (k == w->w_nsubdirs) {
		*fh = &w->w_dir;
		*path = w->w_dir_path;
	} else {
		*fh = &objs[w->w_subdirs[k]].o_fh;
		*path = objs[w->w_subdirs[k]].o_path;
	}
}

/* The directory holding a live object of this storm. */
static const nfs_fh3 *dir_of(struct worker *w, const struct obj *o)
{
	size_t dl = (size_t)(base_name(o->o_path) - o->o_path) - 1;

	for (int k = 0; k < w->w_nsubdirs; k++) {
		const struct obj *d = &objs[w->w_subdirs[k]];

		if (strlen(d->o_path) == dl && !strncmp(d->o_path, o->o_path, dl))
			return &d->o_fh;
	}
	return &w->w_dir;
}

static int storm_obj_new(struct worker *w)
{
	int i = obj_new();

	if (i >= 0)
		w->w_all[w->w_nall++] = i;
	return i;
}

/*
 * After a directory moved from old to new: the paths of the objects in it, and the names
 * acknowledged as gone there (they must stay gone at the new place). idx NULL: all objects
 * (only while no storm runs).
 */
static void rewrite_prefix(const char *old, const char *new, const int *idx, int n)
{
	size_t ol = strlen(old);
	char tmp[T_PATH];

	if (!idx)
		n = atomic_load(&nobjs);
	for (int k = 0; k < n; k++) {
		struct obj *o = &objs[idx ? idx[k] : k];

		if (!strncmp(o->o_path, old, ol) && o->o_path[ol] == '/' &&
		    snprintf(tmp, T_PATH, "%s%s", new, o->o_path + ol) < T_PATH)
			memcpy(o->o_path, tmp, T_PATH);
	}
	pthread_mutex_lock(&gone_lock);
	for (int k = 0; k < ngone; k++)
		if (!strncmp(gone[k].g_path, old, ol) && gone[k].g_path[ol] == '/' &&
		    snprintf(tmp, T_PATH, "%s%s", new, gone[k].g_path + ol) < T_PATH)
			memcpy(gone[k].g_path, tmp, T_PATH);
	pthread_mutex_unlock(&gone_lock);
}

static bool storm_make(struct worker *w, bool is_dir)
{
	const nfs_fh3 *dfh;
	const char *dpath;
	char name[32];
	int i = storm_obj_new(w), st;
	struct obj *o;
	stable_how committed;
	char verf[NFS3_WRITEVERFSIZE];

	if (i < 0 || (is_dir && w->w_nsubdirs == (int)(sizeof(w->w_subdirs) / sizeof(int))))
		return true;
	o = &objs[i];
	pick_dir(w, &dfh, &dpath);
	if (is_dir && strlen(dpath) > T_DEEPEST) {
		dfh = &w->w_dir;
		dpath = w->w_dir_path;
	}
	snprintf(name, sizeof(name), "%s%d-%d", is_dir ? "d" : "f", w->w_id, w->w_counter++);
	if (snprintf(o->o_path, T_PATH, "%s/%s", dpath, name) >= T_PATH)
		return true;
	o->o_dir = is_dir;
	o->o_state = OBJ_CREATING;
	st = make_obj(w->w_clnt, dfh, name, is_dir, &o->o_fh, &o->o_fileid);
	if (st == T_INFLIGHT)
		return false;
	if (st != NFS3_OK || o->o_fh.data.data_len == 0 || o->o_fileid == 0) {
		werr(w, "%s %s: %s (or no handle/attributes)", is_dir ? "MKDIR" : "CREATE", o->o_path,
		     it_nfsstat_name(st));
		o->o_state = OBJ_ABSENT;
		return true;
	}
	o->o_state = OBJ_LIVE;
	ack(w, is_dir ? ACK_MKDIR : ACK_CREATE);
	if (is_dir) {
		w->w_subdirs[w->w_nsubdirs++] = i;
		return true;
	}
	w->w_files[w->w_nfiles++] = i;
	o->o_len = (size_t)snprintf(o->o_data, T_DATA, "object %d, round %d, %s\n", i, w->w_round,
				    o->o_path);
	if (o->o_len >= T_DATA)
		o->o_len = T_DATA - 1;
	o->o_content = CONTENT_MAYBE;
	st = write_at(w->w_clnt, &o->o_fh, 0, o->o_data, o->o_len, FILE_SYNC, &committed, verf);
	if (st == T_INFLIGHT)
		return false;
	if (st != NFS3_OK || committed != FILE_SYNC) {
		werr(w, "WRITE FILE_SYNC %s: %s, committed %d", o->o_path, it_nfsstat_name(st),
		     (int)committed);
		return true;
	}
	o->o_content = CONTENT_EXACT;
	ack(w, ACK_FILE_SYNC);
	return true;
}

static bool storm_rename(struct worker *w)
{
	int k = rand_between(&w->w_rand, 0, w->w_nfiles), st;
	struct obj *o = &objs[w->w_files[k]];
	const nfs_fh3 *to;
	const char *tpath;
	char name[32];

	pick_dir(w, &to, &tpath);
	snprintf(name, sizeof(name), "r%d-%d", w->w_id, w->w_counter++);
	if (snprintf(o->o_alt, T_PATH, "%s/%s", tpath, name) >= T_PATH)
		return true;
	o->o_state = OBJ_RENAMING;
	st = rename_obj(w->w_clnt, dir_of(w, o), base_name(o->o_path), to, name);
	if (st == T_INFLIGHT)
		return false;
	o->o_state = OBJ_LIVE;
	if (st != NFS3_OK) {
		werr(w, "RENAME %s to %s: %s", o->o_path, o->o_alt, it_nfsstat_name(st));
		return true;
	}
	gone_add(o->o_path);
	memcpy(o->o_path, o->o_alt, T_PATH);
	o->o_lower = false;
	ack(w, ACK_RENAME);
	return true;
}

/* A directory (made by the storm, or a lower one) moves to the storm's own under a new name. */
static bool storm_rename_dir(struct worker *w)
{
	int k = rand_between(&w->w_rand, 0, w->w_nsubdirs), st;
	struct obj *o = &objs[w->w_subdirs[k]];
	char name[32], old[T_PATH];

	snprintf(name, sizeof(name), "rd%d-%d", w->w_id, w->w_counter++);
	if (snprintf(o->o_alt, T_PATH, "%s/%s", w->w_dir_path, name) >= T_PATH)
		return true;
	o->o_state = OBJ_RENAMING;
	st = rename_obj(w->w_clnt, dir_of(w, o), base_name(o->o_path), &w->w_dir, name);
	if (st == T_INFLIGHT)
		return false;
	o->o_state = OBJ_LIVE;
	if (st != NFS3_OK) {
		werr(w, "RENAME %s to %s: %s", o->o_path, o->o_alt, it_nfsstat_name(st));
		return true;
	}
	memcpy(old, o->o_path, T_PATH);
	memcpy(o->o_path, o->o_alt, T_PATH);
	rewrite_prefix(old, o->o_path, w->w_all, w->w_nall);
	gone_add(old);
	ack(w, ACK_RENAME_DIR);
	return true;
}

static bool storm_remove(struct worker *w)
{
	int k = rand_between(&w->w_rand, 0, w->w_nfiles), st;
	struct obj *o = &objs[w->w_files[k]];

	o->o_state = OBJ_REMOVING;
	files_drop(w, k);
	st = remove_obj(w->w_clnt, dir_of(w, o), base_name(o->o_path));
	if (st == T_INFLIGHT)
		return false;
	if (st != NFS3_OK) {
		werr(w, "REMOVE %s: %s", o->o_path, it_nfsstat_name(st));
		o->o_state = OBJ_LIVE;
		return true;
	}
	o->o_state = OBJ_REMOVED;
	o->o_gone = gone_add(o->o_path);
	w->w_removed[w->w_nremoved++] = (int)(o - objs);
	ack(w, ACK_REMOVE);
	return true;
}

/* CREATE again a name the storm removed: over a whiteout where a lower file has it. */
static bool storm_recreate(struct worker *w)
{
	int k = rand_between(&w->w_rand, 0, w->w_nremoved), i = storm_obj_new(w), st;
	const struct obj *old = &objs[w->w_removed[k]];
	struct obj *o;
	stable_how committed;
	char verf[NFS3_WRITEVERFSIZE];

	if (i < 0)
		return true;
	o = &objs[i];
	w->w_removed[k] = w->w_removed[--w->w_nremoved];
	memcpy(o->o_path, old->o_path, T_PATH);
	o->o_replaces = old->o_fileid;
	o->o_gone = old->o_gone;
	gone_reuse(o->o_gone, true);
	o->o_state = OBJ_CREATING;
	st = make_obj(w->w_clnt, dir_of(w, o), base_name(o->o_path), false, &o->o_fh, &o->o_fileid);
	if (st == T_INFLIGHT)
		return false;
	if (st != NFS3_OK || o->o_fh.data.data_len == 0 || o->o_fileid == 0) {
		werr(w, "CREATE again %s: %s (or no handle/attributes)", o->o_path,
		     it_nfsstat_name(st));
		o->o_state = OBJ_ABSENT;
		gone_reuse(o->o_gone, false);
		return true;
	}
	o->o_state = OBJ_LIVE;
	ack(w, ACK_CREATE_AGAIN);
	w->w_files[w->w_nfiles++] = i;
	o->o_len = (size_t)snprintf(o->o_data, T_DATA, "object %d again, round %d\n", i, w->w_round);
	o->o_content = CONTENT_MAYBE;
	st = write_at(w->w_clnt, &o->o_fh, 0, o->o_data, o->o_len, FILE_SYNC, &committed, verf);
	if (st == T_INFLIGHT)
		return false;
	if (st != NFS3_OK || committed != FILE_SYNC) {
		werr(w, "WRITE FILE_SYNC %s: %s", o->o_path, it_nfsstat_name(st));
		return true;
	}
	o->o_content = CONTENT_EXACT;
	ack(w, ACK_FILE_SYNC);
	return true;
}

static void *storm_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&start_line);
	for (;;) {
		int dice = rand_between(&w->w_rand, 0, 100);
		bool answered;

		if (w->w_nfiles == 0 || dice < 35)
			answered = storm_make(w, false);
		else if (dice < 45)
			answered = storm_make(w, true);
		else if (dice < 52 && w->w_nsubdirs > 0)
			answered = storm_rename_dir(w);
		else if (dice < 58 && w->w_nremoved > 0)
			answered = storm_recreate(w);
		else if (dice < 75)
			answered = storm_rename(w);
		else
			answered = storm_remove(w);
		if (!answered)
			break;
	}
	return NULL;
}

/* --- data writers: FILE_SYNC chunks, or UNSTABLE chunks with a COMMIT every few --- */

static void chunk_bytes(const struct datafile *d, int k, uint8_t *buf)
{
	it_fill(buf, T_CHUNK, d->d_seed * 7919u + (uint32_t)k);
}

static void *writer_main(void *arg)
{
	struct worker *w = arg;
	struct datafile *d = w->w_data;
	uint8_t buf[T_CHUNK];
	char verf[NFS3_WRITEVERFSIZE], first[NFS3_WRITEVERFSIZE];
	stable_how committed;
	int pending_from = d->d_sent;

	pthread_barrier_wait(&start_line);
	while (d->d_sent < T_MAX_CHUNKS) {
		int k = d->d_sent++, st;

		chunk_bytes(d, k, buf);
		st = write_at(w->w_clnt, &d->d_fh, (uint64_t)k * T_CHUNK, buf, T_CHUNK,
			      d->d_unstable ? UNSTABLE : FILE_SYNC, &committed, verf);
		if (st == T_INFLIGHT)
			break;
		if (st != NFS3_OK || (!d->d_unstable && committed != FILE_SYNC)) {
			werr(w, "WRITE %s chunk %d: %s, committed %d", d->d_path, k,
			     it_nfsstat_name(st), (int)committed);
			continue;
		}
		if (!d->d_unstable || committed == FILE_SYNC) {
			d->d_acked[k] = true;
			ack(w, d->d_unstable ? ACK_UNSTABLE_STABLE : ACK_FILE_SYNC);
			if (d->d_unstable && k == pending_from)
				pending_from++;
			continue;
		}
		if (k == pending_from)
			memcpy(first, verf, sizeof(first));
		else if (memcmp(first, verf, sizeof(first)))
			werr(w, "WRITE %s chunk %d: the verifier changed without a restart", d->d_path, k);
		if (k + 1 - pending_from < T_COMMIT_EVERY)
			continue;
		st = commit_all(w->w_clnt, &d->d_fh, verf);
		if (st == T_INFLIGHT)
			break;
		if (st != NFS3_OK || memcmp(first, verf, sizeof(first))) {
			werr(w, "COMMIT %s: %s, or a verifier other than the WRITEs'", d->d_path,
			     it_nfsstat_name(st));
		} else {
			for (int j = pending_from; j <= k; j++)
				d->d_acked[j] = true;
			ack(w, ACK_COMMIT);
		}
		pending_from = k + 1;
	}
	return NULL;
}

/* --- the copy-up: the first WRITE to a large lower file --- */

static void *copyup_main(void *arg)
{
	struct worker *w = arg;
	struct copyup *cu = w->w_cu;
	uint8_t buf[T_CU_WRITE];
	char verf[NFS3_WRITEVERFSIZE];
	stable_how committed;
	int st;

	pthread_barrier_wait(&start_line);
	sleep_ms(w->w_delay_ms);
	it_fill(buf, sizeof(buf), cu->c_wseed);
	cu->c_state = CU_INFLIGHT;
	st = write_at(w->w_clnt, &cu->c_fh, cu->c_woff, buf, sizeof(buf), FILE_SYNC, &committed,
		      verf);
	if (st == T_INFLIGHT)
		return NULL;
	if (st != NFS3_OK || committed != FILE_SYNC) {
		werr(w, "WRITE %s (copy-up): %s", cu->c_path, it_nfsstat_name(st));
		cu->c_state = CU_SETTLED_LOWER;
		return NULL;
	}
	cu->c_state = CU_ACKED;
	ack(w, ACK_COPYUP_WRITE);
	return NULL;
}

/* --- checks after a restart (main thread) --- */

/* Reads len bytes at off; returns the nfsstat3 and how many bytes came. */
static int read_at(CLIENT *c, const nfs_fh3 *fh, uint64_t off, uint8_t *buf, size_t len,
		   size_t *got)
{
	*got = 0;
	while (*got < len) {
		size_t want = len - *got < T_READ ? len - *got : T_READ;
		READ3args a = { .file = *fh, .offset = off + *got, .count = (count3)want };
		READ3res r;
		int st;
		bool eof;

		memset(&r, 0, sizeof(r));
		assert_int_equal(it_call(c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &a,
					 (xdrproc_t)xdr_READ3res, &r),
				 RPC_SUCCESS);
		st = r.status;
		if (st != NFS3_OK) {
			it_free((xdrproc_t)xdr_READ3res, &r);
			return st;
		}
		if (r.READ3res_u.resok.data.data_len)   /* an empty reply has no buffer */
			memcpy(buf + *got, r.READ3res_u.resok.data.data_val,
			       r.READ3res_u.resok.data.data_len);
		*got += r.READ3res_u.resok.data.data_len;
		eof = r.READ3res_u.resok.eof || r.READ3res_u.resok.data.data_len == 0;
		it_free((xdrproc_t)xdr_READ3res, &r);
		if (eof)
			break;
	}
	return NFS3_OK;
}

/* GETATTR of a kept handle: OK with the same fileid. Returns the nfsstat3. */
static int handle_alive(CLIENT *c, const nfs_fh3 *fh, uint64_t fileid, const char *what)
{
	fattr3 a;
	int st = it_getattr(c, fh, &a);

	if (st == NFS3_OK && a.fileid != fileid)
		bad("%s: the kept handle now has fileid %llu, was %llu", what,
		    (unsigned long long)a.fileid, (unsigned long long)fileid);
	return st;
}

static void check_obj_content(CLIENT *c, struct obj *o)
{
	uint8_t buf[T_DATA + 16];
	size_t got;
	int st = read_at(c, &o->o_fh, 0, buf, sizeof(buf), &got);

	if (st != NFS3_OK) {
		bad("%s: READ through the kept handle: %s", o->o_path, it_nfsstat_name(st));
		return;
	}
	if (o->o_content == CONTENT_MAYBE) {
		if (got == 0) {
			o->o_len = 0;
		} else if (got != o->o_len || memcmp(buf, o->o_data, got)) {
			bad("%s: %zu bytes that are neither nothing nor the in-flight WRITE's", o->o_path,
			    got);
		}
		o->o_content = CONTENT_EXACT;
		fig.verified++;
		return;
	}
	if (got != o->o_len || memcmp(buf, o->o_data, got))
		bad("%s: READ gives %zu bytes, not the %zu acknowledged", o->o_path, got, o->o_len);
	fig.verified++;
}

/* An acknowledged live object: its name, its handle, its bytes. */
static void check_live(CLIENT *c, struct obj *o)
{
	fattr3 a;
	int st = it_lookup_path(c, &root, o->o_path, NULL, &a);

	if (st != NFS3_OK)
		bad("%s: LOOKUP of an acknowledged name: %s", o->o_path, it_nfsstat_name(st));
	else if (a.fileid != o->o_fileid)
		bad("%s: fileid %llu, acknowledged %llu", o->o_path, (unsigned long long)a.fileid,
		    (unsigned long long)o->o_fileid);
	st = handle_alive(c, &o->o_fh, o->o_fileid, o->o_path);
	if (st != NFS3_OK) {
		bad("%s: GETATTR of the kept handle: %s", o->o_path, it_nfsstat_name(st));
		return;
	}
	fig.verified++;
	if (!o->o_dir)
		check_obj_content(c, o);
}

static void check_removed(CLIENT *c, struct obj *o)
{
	fattr3 a;
	int st = it_getattr(c, &o->o_fh, &a);

	if (st != NFS3ERR_STALE)
		bad("%s: the handle of a removed object answers %s, not NFS3ERR_STALE", o->o_path,
		    it_nfsstat_name(st));
	fig.verified++;
}

/* An object whose CREATE/MKDIR was in flight: there or not; from now on what it is. */
static void settle_creating(CLIENT *c, struct obj *o)
{
	fattr3 a;
	int st = it_lookup_path(c, &root, o->o_path, &o->o_fh, &a);

	fig.inflight_creates++;
	o->o_inflight = "create";
	o->o_inflight_round = cur_round;
	if (st == NFS3ERR_NOENT) {
		o->o_state = OBJ_ABSENT;
		if (o->o_replaces)
			gone_reuse(o->o_gone, false);   /* the removal stands */
		else
			gone_add(o->o_path);
		return;
	}
	if (st == NFS3_OK && o->o_replaces && a.fileid == o->o_replaces)
		bad("%s: removed, and after an in-flight CREATE of the name the removed object (fileid "
		    "%llu) is back", o->o_path, (unsigned long long)a.fileid);
	if (st != NFS3_OK) {
		bad("%s: LOOKUP after an in-flight create: %s", o->o_path, it_nfsstat_name(st));
		o->o_state = OBJ_ABSENT;
		return;
	}
	o->o_fileid = a.fileid;
	o->o_state = OBJ_LIVE;
	o->o_len = 0;
	o->o_content = CONTENT_EXACT;
	if (!o->o_dir && a.size != 0)
		bad("%s: a file whose CREATE was in flight has %llu bytes", o->o_path,
		    (unsigned long long)a.size);
}

static void settle_removing(CLIENT *c, struct obj *o)
{
	fattr3 a;
	int st = it_lookup_path(c, &root, o->o_path, NULL, &a);

	fig.inflight_removes++;
	o->o_inflight = "remove";
	o->o_inflight_round = cur_round;
	if (st == NFS3ERR_NOENT) {
		o->o_state = OBJ_REMOVED;
		gone_add(o->o_path);
		check_removed(c, o);
		return;
	}
	if (st != NFS3_OK || a.fileid != o->o_fileid)
		bad("%s: after an in-flight REMOVE: %s, fileid %llu (was %llu)", o->o_path,
		    it_nfsstat_name(st), (unsigned long long)a.fileid,
		    (unsigned long long)o->o_fileid);
	o->o_state = OBJ_LIVE;
	check_live(c, o);
}

/*
 * An object whose RENAME was in flight: exactly one of its names. Its kept handle may be
 * stale (its intent did not settle it): counted; then the handle and fileid the name has now are kept.
 */
static void settle_renaming(CLIENT *c, struct obj *o)
{
	fattr3 at_old, at_new;
	int s_old = it_lookup_path(c, &root, o->o_path, NULL, &at_old);
	int s_new = it_lookup_path(c, &root, o->o_alt, NULL, &at_new);
	const fattr3 *found = s_new == NFS3_OK ? &at_new : &at_old;
	int st;

	fig.inflight_renames++;
	o->o_inflight = "rename";
	o->o_inflight_round = cur_round;
	if ((s_old == NFS3_OK) == (s_new == NFS3_OK)) {
		bad("%s -> %s (RENAME in flight): %s at the old name, %s at the new one", o->o_path,
		    o->o_alt, it_nfsstat_name(s_old), it_nfsstat_name(s_new));
		o->o_state = OBJ_ABSENT;
		return;
	}
	if (s_new == NFS3_OK) {
		char old[T_PATH];

		memcpy(old, o->o_path, T_PATH);
		memcpy(o->o_path, o->o_alt, T_PATH);
		if (o->o_dir)
			rewrite_prefix(old, o->o_path, NULL, 0);
		gone_add(old);
		o->o_lower = false;
	} else {
		gone_add(o->o_alt);
		/*
		 * A lower file still at its old name: a RENAME copies it up first, in a change of
		 * its own, and what that copy-up leaves is counted as a copy-up's.
		 */
		if (o->o_lower)
			o->o_inflight = "copyup";
	}
	o->o_state = OBJ_LIVE;
	if (found->fileid != o->o_fileid) {
		if (o->o_lower)
			fig.copyup_new_fileid++;
		else
			fig.rename_new_fileid++;
		fprintf(stderr, "in flight: %s (RENAME at the kill) has fileid %llu, was %llu\n",
			o->o_path, (unsigned long long)found->fileid, (unsigned long long)o->o_fileid);
	}
	st = handle_alive(c, &o->o_fh, o->o_fileid, o->o_path);
	if (st == NFS3_OK && found->fileid == o->o_fileid) {
		if (!o->o_dir)
			check_obj_content(c, o);
		return;
	}
	if (st != NFS3_OK) {
		if (o->o_lower)
			fig.copyup_stale++;
		else
			fig.rename_stale++;
		fprintf(stderr, "in flight: %s (RENAME at the kill): the kept handle answers %s\n",
			o->o_path, it_nfsstat_name(st));
	}
	if (strict_inflight(o->o_inflight))
		bad("%s: after an in-flight RENAME (%s) the kept handle answers %s (fileid %llu, "
		    "was %llu)", o->o_path, o->o_inflight, it_nfsstat_name(st),
		    (unsigned long long)found->fileid, (unsigned long long)o->o_fileid);
	it_fh_free(&o->o_fh);
	assert_int_equal(it_lookup_path(c, &root, o->o_path, &o->o_fh, NULL), NFS3_OK);
	o->o_old_fileid = o->o_fileid;
	o->o_fileid = found->fileid;
	if (!o->o_dir)
		check_obj_content(c, o);
}

static void check_objects(CLIENT *c)
{
	int n = atomic_load(&nobjs);

	/* first where directories are: the paths of everything in them follow */
	for (int i = 0; i < n; i++)
		if (objs[i].o_dir && objs[i].o_state == OBJ_RENAMING)
			settle_renaming(c, &objs[i]);

	for (int i = 0; i < n; i++) {
		struct obj *o = &objs[i];

		switch (o->o_state) {
		case OBJ_LIVE:
			check_live(c, o);
			break;
		case OBJ_REMOVED:
			check_removed(c, o);
			break;
		case OBJ_ABSENT:
			break;
		case OBJ_CREATING:
			settle_creating(c, o);
			break;
		case OBJ_REMOVING:
			settle_removing(c, o);
			break;
		case OBJ_RENAMING:
			settle_renaming(c, o);
			break;
		}
	}
}

static void check_gone_names(CLIENT *c)
{
	for (int i = 0; i < ngone; i++) {
		int st;

		if (gone[i].g_reused)
			continue;
		st = it_lookup_path(c, &root, gone[i].g_path, NULL, NULL);

		if (st != NFS3ERR_NOENT)
			bad("%s: a name acknowledged as gone answers %s, not NFS3ERR_NOENT",
			    gone[i].g_path, it_nfsstat_name(st));
		fig.verified++;
	}
}

static void check_datafile(CLIENT *c, struct datafile *d)
{
	size_t len = (size_t)d->d_sent * T_CHUNK, got;
	uint8_t *buf = malloc(len + 1), want[T_CHUNK];
	fattr3 a;
	int st;

	assert_non_null(buf);
	st = it_lookup_path(c, &root, d->d_path, NULL, &a);
	if (st != NFS3_OK || a.fileid != d->d_fileid)
		bad("%s: LOOKUP %s, fileid %llu (acknowledged %llu)", d->d_path, it_nfsstat_name(st),
		    (unsigned long long)a.fileid, (unsigned long long)d->d_fileid);
	st = handle_alive(c, &d->d_fh, d->d_fileid, d->d_path);
	if (st != NFS3_OK) {
		bad("%s: GETATTR of the kept handle: %s", d->d_path, it_nfsstat_name(st));
		free(buf);
		return;
	}
	st = read_at(c, &d->d_fh, 0, buf, len, &got);
	if (st != NFS3_OK) {
		bad("%s: READ: %s", d->d_path, it_nfsstat_name(st));
		free(buf);
		return;
	}
	for (int k = 0; k < d->d_sent; k++) {
		if (!d->d_acked[k])
			continue;
		chunk_bytes(d, k, want);
		if (got < (size_t)(k + 1) * T_CHUNK ||
		    memcmp(buf + (size_t)k * T_CHUNK, want, T_CHUNK)) {
			bad("%s: acknowledged chunk %d (%s) is not there (file has %zu bytes)", d->d_path,
			    k, d->d_unstable ? "UNSTABLE + COMMIT" : "FILE_SYNC", got);
			break;
		}
		fig.verified++;
	}
	free(buf);
}

/*
 * After an in-flight copy-up the kept handle may be stale, or the name may have a new fileid
 * (its origin did not lead back to it): counted; then the handle and fileid the name has now are kept.
 */
static bool copyup_identity(CLIENT *c, struct copyup *cu)
{
	bool inflight = cu->c_state == CU_INFLIGHT;
	fattr3 a;
	int sl = it_lookup_path(c, &root, cu->c_path, NULL, &a);
	int sh = handle_alive(c, &cu->c_fh, cu->c_fileid, cu->c_path);

	if (sl != NFS3_OK) {
		bad("%s: LOOKUP: %s", cu->c_path, it_nfsstat_name(sl));
		return false;
	}
	if (sh == NFS3_OK && a.fileid == cu->c_fileid)
		return true;
	if (!inflight) {
		bad("%s: the kept handle answers %s; the name has fileid %llu, was %llu", cu->c_path,
		    it_nfsstat_name(sh), (unsigned long long)a.fileid,
		    (unsigned long long)cu->c_fileid);
		return false;
	}
	fprintf(stderr, "in flight: %s (copy-up at the kill): the kept handle answers %s, the "
			"name has fileid %llu (was %llu)\n",
		cu->c_path, it_nfsstat_name(sh), (unsigned long long)a.fileid,
		(unsigned long long)cu->c_fileid);
	if (sh != NFS3_OK)
		fig.copyup_stale++;
	if (a.fileid != cu->c_fileid)
		fig.copyup_new_fileid++;
	if (strict_inflight("copyup"))
		bad("%s: after an in-flight copy-up the kept handle answers %s, fileid %llu (was "
		    "%llu)", cu->c_path, it_nfsstat_name(sh), (unsigned long long)a.fileid,
		    (unsigned long long)cu->c_fileid);
	it_fh_free(&cu->c_fh);
	it_assert_status(it_lookup_path(c, &root, cu->c_path, &cu->c_fh, NULL), NFS3_OK);
	cu->c_old_fileid = cu->c_fileid;
	cu->c_fileid = a.fileid;
	return true;
}

/* What to read of a copy-up's file: all of it the first time, then around the WRITE. */
static void copyup_span(const struct copyup *cu, size_t *from, size_t *to)
{
	*from = 0;
	*to = T_CU_SIZE;
	if (!cu->c_read_all)
		return;
	*from = cu->c_woff > T_CU_WRITE ? cu->c_woff - T_CU_WRITE : 0;
	*to = cu->c_woff + 2 * T_CU_WRITE < T_CU_SIZE ? cu->c_woff + 2 * T_CU_WRITE : T_CU_SIZE;
}

/*
 * The second name of a copied-up file: the same object (fileid, bytes, two links). An
 * in-flight copy-up that left the names apart is counted.
 */
static void check_copyup_link(CLIENT *c, struct copyup *cu, const uint8_t *content)
{
	bool inflight = cu->c_inflight_round == cur_round;
	uint8_t *buf = malloc(T_CU_SIZE);
	nfs_fh3 fh;
	fattr3 a;
	size_t got, from, to;
	bool same;
	int st = it_lookup_path(c, &root, cu->c_link, &fh, &a);

	assert_non_null(buf);
	copyup_span(cu, &from, &to);
	fig.copyup_links++;
	if (st != NFS3_OK) {
		bad("%s: LOOKUP of the second name: %s", cu->c_link, it_nfsstat_name(st));
		free(buf);
		return;
	}
	st = read_at(c, &fh, from, buf + from, to - from, &got);
	same = st == NFS3_OK && got == to - from && !memcmp(buf + from, content + from, got);
	if (a.fileid != cu->c_fileid || a.nlink != 2 || !same) {
		if (inflight) {
			fig.link_split++;
			fprintf(stderr, "in flight: %s (copy-up at the kill through %s): fileid %llu "
					"(the other name's %llu), %u links, READ %s, %s bytes\n",
				cu->c_link, cu->c_path, (unsigned long long)a.fileid,
				(unsigned long long)cu->c_fileid, (unsigned)a.nlink, it_nfsstat_name(st),
				same ? "the same" : "other");
		}
		if (!inflight || strict_inflight("copyup"))
			bad("%s: the second name has fileid %llu (first %llu), %u links, READ %s, %s "
			    "bytes", cu->c_link, (unsigned long long)a.fileid,
			    (unsigned long long)cu->c_fileid, (unsigned)a.nlink, it_nfsstat_name(st),
			    same ? "the same" : "other");
		if (inflight)
			cu->c_link[0] = '\0';   /* apart for good: not a failure of later rounds */
	}
	fig.verified++;
	it_fh_free(&fh);
	free(buf);
}

/* The copy-up's file: lower bytes, with the WRITE's where it was acknowledged (or may be). */
static void check_copyup(CLIENT *c, struct copyup *cu)
{
	uint8_t *buf = malloc(T_CU_SIZE), *lower = malloc(T_CU_SIZE), wbuf[T_CU_WRITE];
	size_t got, at = 0, from, to;
	bool has_write, has_lower;
	int st;

	assert_true(buf && lower);
	if (cu->c_state == CU_INFLIGHT) {
		fig.inflight_copyups++;
		cu->c_inflight_round = cur_round;
	}
	if (!copyup_identity(c, cu))
		goto out;
	it_fill(lower, T_CU_SIZE, cu->c_seed);
	it_fill(wbuf, sizeof(wbuf), cu->c_wseed);
	copyup_span(cu, &from, &to);
	st = read_at(c, &cu->c_fh, from, buf + from, to - from, &got);
	if (st != NFS3_OK || got != to - from) {
		bad("%s: READ: %s, %zu bytes of %zu", cu->c_path, it_nfsstat_name(st), got, to - from);
		goto out;
	}
	has_write = !memcmp(buf + cu->c_woff, wbuf, sizeof(wbuf));
	has_lower = !memcmp(buf + cu->c_woff, lower + cu->c_woff, sizeof(wbuf));
	if (!has_write && !has_lower)
		bad("%s: the WRITE's range holds neither the WRITE's bytes nor the lower's", cu->c_path);
	else if (cu->c_state == CU_ACKED && !has_write)
		bad("%s: the acknowledged WRITE (the copy-up's) is not there", cu->c_path);
	for (at = from; at < to; at++)
		if (buf[at] != lower[at] && (at < cu->c_woff || at >= cu->c_woff + T_CU_WRITE))
			break;
	if (at < to)
		bad("%s: bytes other than the lower file's from offset %zu", cu->c_path, at);
	if (cu->c_link[0])
		check_copyup_link(c, cu, buf);
	/* from now on what it is */
	if (cu->c_state == CU_INFLIGHT || cu->c_state == CU_IDLE)
		cu->c_state = has_write ? CU_ACKED : CU_SETTLED_LOWER;
	cu->c_read_all = true;
	fig.verified++;
out:
	free(buf);
	free(lower);
}

static const char *ctl_binary(void)
{
	static char path[PATH_MAX];
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/unionnfsd-ctl", build && *build ? build : "build");
	return path;
}

/*
 * Which operation in flight at this round's kill left check's stale record ino: counted by
 * kind. A stale record no in-flight operation explains is a failure.
 */
static void attribute_stale(int round, unsigned long long ino)
{
	int n = atomic_load(&nobjs);

	for (int i = 0; i < n; i++) {
		const struct obj *o = &objs[i];

		if ((o->o_fileid != ino && o->o_old_fileid != ino) || !o->o_inflight ||
		    o->o_inflight_round != round)
			continue;
		fprintf(stderr, "in flight: %s (%s at the kill) left stale record ino %llu\n",
			o->o_path, o->o_inflight, ino);
		if (!strcmp(o->o_inflight, "rename"))
			fig.stale_after_rename++;
		else if (!strcmp(o->o_inflight, "remove"))
			fig.stale_after_remove++;
		else if (!strcmp(o->o_inflight, "copyup"))
			fig.stale_after_copyup++;
		if (strict_inflight(o->o_inflight) || (strcmp(o->o_inflight, "rename") &&
						       strcmp(o->o_inflight, "remove") &&
						       strcmp(o->o_inflight, "copyup")))
			bad("%s: stale record ino %llu after an in-flight %s", o->o_path, ino,
			    o->o_inflight);
		return;
	}
	for (int i = 0; i < ncopyups; i++) {
		if ((copyups[i].c_fileid == ino || copyups[i].c_old_fileid == ino) &&
		    copyups[i].c_inflight_round == round) {
			fprintf(stderr, "in flight: %s (copy-up at the kill) left stale record ino %llu\n",
				copyups[i].c_path, ino);
			fig.stale_after_copyup++;
			if (strict_inflight("copyup"))
				bad("%s: stale record ino %llu after an in-flight copy-up",
				    copyups[i].c_path, ino);
			return;
		}
	}
	bad("round %d: check's stale record ino %llu is no object whose change was in flight at "
	    "the kill", round, ino);
}

static int ctl_check(char *out, bool repair)
{
	char *argv[] = { (char *)ctl_binary(), "--state", srv.is_state, "check",
			 repair ? "--repair" : NULL, NULL };

	return it_run(argv, 60, out, T_OUT);
}

/* The total line of check: false if there is none. */
static bool check_totals(const char *out, unsigned long long *stale, unsigned long long *dropped,
			 unsigned long long *errors)
{
	const char *total = strstr(out, " dropped, ");

	while (total && total > out && total[-1] != '\n')
		total--;
	return total && sscanf(total, "%llu stale, %llu dropped, %llu errors", stale, dropped,
			       errors) == 3;
}

/*
 * unionnfsd-ctl check after a restart: exits 0, no error, and every stale record is one an
 * in-flight change explains (none of a kind CRASH_STRICT_INFLIGHT names). Those are dropped with
 * --repair, so that each round's check starts clean.
 */
static void run_check(int round)
{
	static char out[T_OUT];
	unsigned long long stale, dropped, errors;
	int rc = ctl_check(out, false);

	fig.check_runs++;
	/* Exit status 4: errors, 3: stale records left (both looked at below), else 0. */
	if (!check_totals(out, &stale, &dropped, &errors) || rc != (errors ? 4 : stale ? 3 : 0)) {
		bad("round %d: unionnfsd-ctl check exited %d:\n%s", round, rc, out);
		return;
	}
	if (errors)
		bad("round %d: unionnfsd-ctl check reports %llu errors:\n%s", round, errors, out);
	if (stale == 0)
		return;
	fprintf(stderr, "round %d: unionnfsd-ctl check:\n%s", round, out);
	for (const char *p = strstr(out, " ino "); p; p = strstr(p + 1, " ino ")) {
		unsigned long long ino;

		if (sscanf(p, " ino %llu: stale", &ino) == 1)
			attribute_stale(round, ino);
	}
	rc = ctl_check(out, true);
	if (rc != 0 || !check_totals(out, &stale, &dropped, &errors) || dropped != stale || errors)
		bad("round %d: unionnfsd-ctl check --repair exited %d:\n%s", round, rc, out);
}

/* --- one round: storms, a kill, a restart, the checks --- */

struct round {
	int r_no;
	bool r_copyup_kill;
	struct worker r_w[T_NS_THREADS + 3];
	int r_nw;
	pthread_t r_t[T_NS_THREADS + 3];
};

static void lower_file(const char *rel, const void *data, size_t len)
{
	char path[PATH_MAX], dir[PATH_MAX];

	it_path(path, "%s/%s", srv.is_lower, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	mkdir(dir, 0755);
	it_write_file(path, data, len);
}

static void new_worker(struct round *r, struct worker *w, CLIENT *c)
{
	memset(w, 0, sizeof(*w));
	w->w_clnt = c;
	w->w_round = r->r_no;
	w->w_id = r->r_nw;
	w->w_rand = 0x9E3779B97F4A7C15ull * (uint64_t)(r->r_no * 16 + r->r_nw + 1) ^ (uint64_t)rand();
	if (!w->w_rand)
		w->w_rand = 1;
}

/* A lower object of the storm's directory, in the model (looked up once all are made). */
static int lower_obj(struct worker *w, const char *rel, bool is_dir)
{
	int i = obj_new();
	struct obj *o = &objs[i];

	assert_true(i >= 0);
	w->w_all[w->w_nall++] = i;
	snprintf(o->o_path, T_PATH, "%s", rel);
	o->o_dir = is_dir;
	if (!is_dir) {
		o->o_len = (size_t)snprintf(o->o_data, T_DATA, "lower file %s\n", rel);
		lower_file(rel, o->o_data, o->o_len);
	}
	return i;
}

/*
 * A storm works in a merged directory of lower files and directories, so its creates copy
 * directories up, and its renames and removes copy files up, white names out and redirect
 * directories.
 */
static void setup_storm(struct round *r, struct worker *w, CLIENT *c)
{
	char rel[T_PATH], dir[T_PATH];
	int first = atomic_load(&nobjs);
	fattr3 a;

	new_worker(r, w, c);
	/* Storms that share a directory: their changes there are in flight together. */
	snprintf(w->w_dir_path, T_PATH, "ns%d-%d", r->r_no, w->w_id / T_NS_PER_DIR);
	w->w_files = calloc(T_MAX_OBJS, sizeof(int));
	w->w_all = calloc(T_MAX_OBJS, sizeof(int));
	w->w_removed = calloc(T_MAX_OBJS, sizeof(int));
	assert_true(w->w_files && w->w_all && w->w_removed);
	for (int k = 0; k < T_LOWER_FILES; k++) {
		snprintf(rel, sizeof(rel), "%s/low%d-%d", w->w_dir_path, w->w_id, k);
		lower_obj(w, rel, false);
	}
	for (int k = 0; k < T_LOWER_DIRS; k++) {
		snprintf(dir, sizeof(dir), "%s/ld%d-%d", w->w_dir_path, w->w_id, k);
		w->w_subdirs[w->w_nsubdirs++] = lower_obj(w, dir, true);
		for (int j = 0; j < T_LOWER_DIR_FILES; j++) {
			if (snprintf(rel, sizeof(rel), "%s/x%d", dir, j) >= (int)sizeof(rel))
				fail_msg("path too long");
			lower_obj(w, rel, false);
		}
	}
	it_assert_status(it_lookup_path(c, &root, w->w_dir_path, &w->w_dir, NULL), NFS3_OK);
	for (int i = first; i < atomic_load(&nobjs); i++) {
		it_assert_status(it_lookup_path(c, &root, objs[i].o_path, &objs[i].o_fh, &a), NFS3_OK);
		objs[i].o_fileid = a.fileid;
		objs[i].o_state = OBJ_LIVE;
		objs[i].o_lower = !objs[i].o_dir;
		/* renaming one copies it up: in a copy-up round only the large file's may be seen */
		if (!objs[i].o_dir && !r->r_copyup_kill)
			w->w_files[w->w_nfiles++] = i;
	}
}

static void setup_writer(struct round *r, struct worker *w, CLIENT *c, bool unstable)
{
	struct datafile *d = calloc(1, sizeof(*d));
	char name[32];

	assert_non_null(d);
	assert_true(ndatafiles < (int)(sizeof(datafiles) / sizeof(datafiles[0])));
	new_worker(r, w, c);
	snprintf(name, sizeof(name), "%s%d", unstable ? "unstable" : "sync", r->r_no);
	snprintf(d->d_path, T_PATH, "%s", name);
	d->d_unstable = unstable;
	d->d_seed = (uint32_t)(r->r_no * 2 + unstable + 1);
	it_assert_status(make_obj(c, &root, name, false, &d->d_fh, &d->d_fileid), NFS3_OK);
	datafiles[ndatafiles++] = d;
	w->w_data = d;
}

static void setup_copyup(struct round *r, struct worker *w, CLIENT *c, uint64_t *rnd)
{
	struct copyup *cu;
	uint8_t *data = malloc(T_CU_SIZE);
	fattr3 a;

	assert_non_null(data);
	if (ncopyups == (int)(sizeof(copyups) / sizeof(copyups[0])))
		fail_msg("CRASH_ROUNDS: at most %d", ncopyups - 1);
	cu = &copyups[ncopyups++];
	new_worker(r, w, c);
	snprintf(cu->c_path, T_PATH, "big%d/file", r->r_no);
	cu->c_seed = 1000u + (uint32_t)r->r_no;
	cu->c_wseed = 2000u + (uint32_t)r->r_no;
	cu->c_woff = (uint64_t)rand_between(rnd, 0, (T_CU_SIZE - T_CU_WRITE) / 512) * 512;
	it_fill(data, T_CU_SIZE, cu->c_seed);
	lower_file(cu->c_path, data, T_CU_SIZE);
	free(data);
	it_assert_status(it_lookup_path(c, &root, cu->c_path, &cu->c_fh, &a), NFS3_OK);
	cu->c_fileid = a.fileid;
	/* rounds 0-3, 8-11, ... the file has a second name: copy-up through the index */
	if ((r->r_no / 4) % 2 == 0) {
		char from[PATH_MAX], to[PATH_MAX];

		snprintf(cu->c_link, T_PATH, "big%d/link", r->r_no);
		it_path(from, "%s/%s", srv.is_lower, cu->c_path);
		it_path(to, "%s/%s", srv.is_lower, cu->c_link);
		assert_int_equal(link(from, to), 0);
		it_assert_status(it_lookup_path(c, &root, cu->c_link, NULL, &a), NFS3_OK);
		assert_int_equal(a.fileid, cu->c_fileid);
		assert_int_equal(a.nlink, 2);
	}
	w->w_cu = cu;
	w->w_delay_ms = r->r_copyup_kill ? rand_between(rnd, 20, 200)
					 : rand_between(rnd, 0, T_KILL_MAX_MS);
}

/*
 * Waits for a copy in the work directory to be started (IN_CREATE) or renamed into place
 * (IN_MOVED_FROM); false after T_COPYUP_WAIT_MS.
 */
static bool wait_copyup_event(int ino, uint32_t mask)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = ino, .events = POLLIN };
		const struct inotify_event *e;
		ssize_t n;
		long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = T_COPYUP_WAIT_MS - ((t.tv_sec - t0.tv_sec) * 1000 +
					   (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		n = read(ino, buf, sizeof(buf));
		for (const char *q = buf; n > 0 && q < buf + n; q += sizeof(*e) + e->len) {
			e = (const struct inotify_event *)(const void *)q;
			if ((e->mask & mask) && e->len &&
			    !strncmp(e->name, T_TMP, strlen(T_TMP)))
				return true;
		}
	}
}

static void drain(int ino)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(ino, buf, sizeof(buf)) > 0)
		;
}

static void kill_server(void)
{
	int status;

	assert_true(srv.is_pid > 0);
	assert_int_equal(kill(srv.is_pid, SIGKILL), 0);
	assert_int_equal(waitpid(srv.is_pid, &status, 0), srv.is_pid);
	srv.is_pid = 0;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
		it_server_dump_log(&srv);
		fail_msg("the server ended by itself before the kill (status 0x%x)", status);
	}
}

static void run_round(struct round *r, int ino, uint64_t *rnd, int copyup_ms)
{
	void *(*mains[T_NS_THREADS + 3])(void *);
	int acked = 0, errors = 0;
	long t0, t1;
	CLIENT *c;

	r->r_nw = 0;
	for (int t = 0; t < T_NS_THREADS; t++) {
		setup_storm(r, &r->r_w[r->r_nw], it_nfs_clnt(&srv, IPPROTO_TCP));
		mains[r->r_nw++] = storm_main;
	}
	for (int t = 0; t < 2; t++) {
		setup_writer(r, &r->r_w[r->r_nw], it_nfs_clnt(&srv, IPPROTO_TCP), t == 1);
		mains[r->r_nw++] = writer_main;
	}
	setup_copyup(r, &r->r_w[r->r_nw], it_nfs_clnt(&srv, IPPROTO_TCP), rnd);
	mains[r->r_nw++] = copyup_main;

	drain(ino);
	assert_int_equal(pthread_barrier_init(&start_line, NULL, (unsigned)r->r_nw + 1), 0);
	for (int t = 0; t < r->r_nw; t++)
		assert_int_equal(pthread_create(&r->r_t[t], NULL, mains[t], &r->r_w[t]), 0);
	pthread_barrier_wait(&start_line);
	if (r->r_copyup_kill) {
		/*
		 * Every other copy-up round: right after the copy is renamed into place, while its
		 * inode map change commits; the others: anywhere from its start to its usual end.
		 */
		bool at_rename = r->r_no % 4 == 3;

		if (!wait_copyup_event(ino, at_rename ? IN_MOVED_FROM : IN_CREATE))
			fprintf(stderr, "round %d: no copy-up seen %s within %d ms\n", r->r_no,
				at_rename ? "renamed into place" : "starting", T_COPYUP_WAIT_MS);
		else
			fig.copyup_kills++;
		sleep_ms(at_rename ? rand_between(rnd, 0, 3) : rand_between(rnd, 0, copyup_ms + 1));
	} else {
		sleep_ms(rand_between(rnd, T_KILL_MIN_MS, T_KILL_MAX_MS));
	}
	kill_server();
	fig.kills++;
	for (int t = 0; t < r->r_nw; t++) {
		struct worker *w = &r->r_w[t];

		pthread_join(r->r_t[t], NULL);
		it_clnt_destroy(w->w_clnt);
		free(w->w_files);
		free(w->w_all);
		free(w->w_removed);
		it_fh_free(&w->w_dir);
		acked += w->w_acked;
		for (int k = 0; k < ACK_KINDS; k++)
			fig.acked_by[k] += w->w_acked_by[k];
		if (w->w_errors) {
			errors += w->w_errors;
			bad("round %d client %d: %d wrong replies before the kill, first: %s", r->r_no, t,
			    w->w_errors, w->w_first_error);
		}
	}
	pthread_barrier_destroy(&start_line);
	fig.acked_ops += acked;

	cur_round = r->r_no;
	t0 = now_ms();
	if (it_server_start(&srv) != 0)
		fail_msg("round %d: the server did not start again after kill -9", r->r_no);
	t1 = now_ms();
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	check_objects(c);
	check_gone_names(c);
	for (int i = 0; i < ndatafiles; i++)
		check_datafile(c, datafiles[i]);
	for (int i = 0; i < ncopyups; i++)
		check_copyup(c, &copyups[i]);
	it_clnt_destroy(c);
	run_check(r->r_no);
	fprintf(stderr, "round %d (%s kill): %d operations acknowledged, %d wrong replies; "
			"%d failures so far; restart %ld ms, checks %ld ms\n",
		r->r_no, r->r_copyup_kill ? "mid copy-up" : "random", acked, errors, fig.failures,
		t1 - t0, now_ms() - t1);
}

/* A first copy-up, timed: the copy-up rounds kill somewhere within that time. */
static int time_copyup(void)
{
	CLIENT *c = it_nfs_clnt(&srv, IPPROTO_TCP);
	struct copyup *cu = &copyups[ncopyups++];
	uint8_t *data = malloc(T_CU_SIZE), wbuf[T_CU_WRITE];
	char verf[NFS3_WRITEVERFSIZE];
	stable_how committed;
	struct timespec t0, t1;
	fattr3 a;

	assert_non_null(data);
	snprintf(cu->c_path, T_PATH, "big-first");
	cu->c_seed = 999;
	cu->c_wseed = 1999;
	cu->c_woff = T_CU_WRITE;
	it_fill(data, T_CU_SIZE, cu->c_seed);
	lower_file(cu->c_path, data, T_CU_SIZE);
	free(data);
	it_assert_status(it_lookup_path(c, &root, cu->c_path, &cu->c_fh, &a), NFS3_OK);
	cu->c_fileid = a.fileid;
	it_fill(wbuf, sizeof(wbuf), cu->c_wseed);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	it_assert_status(write_at(c, &cu->c_fh, cu->c_woff, wbuf, sizeof(wbuf), FILE_SYNC,
				  &committed, verf),
			 NFS3_OK);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cu->c_state = CU_ACKED;
	it_clnt_destroy(c);
	return (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
}

static void test_kill9_durability(void **state)
{
	int rounds = env_int("CRASH_ROUNDS", T_DEFAULT_ROUNDS);
	unsigned seed = (unsigned)env_int("CRASH_SEED", (int)(time(NULL) & 0x7fffffff));
	uint64_t rnd = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
	char path[PATH_MAX];
	int ino, copyup_ms;

	(void)state;
	srand(seed);
	fprintf(stderr, "CRASH_SEED=%u CRASH_ROUNDS=%d CRASH_STRICT_INFLIGHT=%s\n", seed, rounds,
		getenv("CRASH_STRICT_INFLIGHT") ? getenv("CRASH_STRICT_INFLIGHT") : "");
	objs = calloc(T_MAX_OBJS, sizeof(*objs));
	assert_non_null(objs);
	it_server_init(&srv, true);
	/* The work directory made beforehand (the server takes one that exists) and watched. */
	it_path(path, "%s/%s", srv.is_upper, T_WORK);
	assert_int_equal(mkdir(path, 0700), 0);
	ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, path, IN_CREATE | IN_MOVED_FROM) >= 0);
	assert_int_equal(it_server_start(&srv), 0);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	copyup_ms = time_copyup();
	fprintf(stderr, "a copy-up of %u MiB takes %d ms\n", T_CU_SIZE >> 20, copyup_ms);

	for (int n = 0; n < rounds; n++) {
		struct round *r = calloc(1, sizeof(*r));

		assert_non_null(r);
		r->r_no = n;
		r->r_copyup_kill = n % 2 == 1;
		run_round(r, ino, &rnd, copyup_ms);
		free(r);
	}
	close(ino);

	fprintf(stderr,
		"\n%d kills (%d in the middle of a copy-up); %ld operations acknowledged, %ld checks "
		"of acknowledged state passed, %d failures\n"
		"in flight at the kills: %d creates, %d removes, %d renames, %d copy-ups\n"
		"after in-flight RENAME: %d kept handles stale, %d names with a new fileid\n"
		"after in-flight copy-up: %d kept handles stale, %d names with a new fileid, %d second "
		"names apart (of %d checks of hard-linked copy-ups)\n"
		"unionnfsd-ctl check (%d runs): stale records left by in-flight changes: %d by REMOVE, "
		"%d by RENAME, %d by copy-up\n",
		fig.kills, fig.copyup_kills, fig.acked_ops, fig.verified, fig.failures,
		fig.inflight_creates, fig.inflight_removes, fig.inflight_renames, fig.inflight_copyups,
		fig.rename_stale, fig.rename_new_fileid, fig.copyup_stale, fig.copyup_new_fileid,
		fig.link_split, fig.copyup_links,
		fig.check_runs, fig.stale_after_remove, fig.stale_after_rename, fig.stale_after_copyup);
	for (int k = 0; k < ACK_KINDS; k++)
		fprintf(stderr, "  acknowledged %s: %ld\n", ack_names[k], fig.acked_by[k]);
	if (fig.failures)
		fail_msg("%d checks of acknowledged state failed after kill -9 (first ones above; "
			 "rerun with CRASH_SEED=%u)",
			 fig.failures, seed);
}

static void free_model(void)
{
	for (int i = 0; i < atomic_load(&nobjs); i++)
		it_fh_free(&objs[i].o_fh);
	free(objs);
	for (int i = 0; i < ndatafiles; i++) {
		it_fh_free(&datafiles[i]->d_fh);
		free(datafiles[i]);
	}
	for (int i = 0; i < ncopyups; i++)
		it_fh_free(&copyups[i].c_fh);
	free(gone);
}

static int teardown(void **state)
{
	(void)state;
	free_model();
	if (!srv.is_dir[0])
		return 0;
	it_fh_free(&root);
	return it_server_finish(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_kill9_durability, teardown),
	};

	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
