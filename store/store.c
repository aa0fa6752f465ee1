/*
 * The persistent inode map on LMDB (see include/store.h for the tables).
 *
 * Records are variable-length and numbers inside values are LEB128 varints, so that a
 * typical inode with its two index entries costs on the order of a hundred bytes on
 * disk; a server exporting millions of files keeps its map small and in page cache.
 *
 * On-disk formats (schema 2):
 *   inodes value:  parent(varint) gen(be32) type(u8) branch(u8) real ino(varint)
 *                  name length(u8) name [real identity(be64), when known]
 *   Schema 1 (no real identity) is the same without the last field: such a map is
 *   marked schema 2 when opened, and its records learn their identity as they are used.
 *   names, reals value: ino(varint)
 *   meta "schema": be32; "handle-key": 16 bytes; "next-export": be16;
 *        "next-ino/" be16 export: be64;
 *        "export/" name: id(be16) nbranches(u8) then per branch root ino(be64)
 *                        path length(be16) path
 *        "export-prev/" name: the same, of the stack the export had before its last
 *                        store_rebind_export (absent when it never had another); a key of
 *                        its own, so that servers that predate it still read the binding
 *        "base-set/" name: the lower branches `unionnfsd-ctl base` set, '\n'-joined, then
 *                        NUL and the config's lower branches of the time (store_base_set)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fsio.h"
#include "group.h"
#include "intent.h"
#include "log.h"
#include "store.h"
#include "tally.h"
#include "trim.h"

#define STORE_SCHEMA 2
#define STORE_LOCK_FILE "lock"   /* in the state directory: the instance lock, our pid */
#define STORE_SCHEMA_NO_ID 1     /* before records kept the real identity */
/* LMDB files are sparse and grow as written, so a large map costs only address space. */
#define STORE_MAPSIZE (sizeof(size_t) > 4 ? (size_t)16 << 30 : (size_t)1 << 30)
/* Free bytes on the state file system under which a short write means it is full. */
#define STORE_NEARLY_FULL ((uint64_t)1 << 20)
#define STORE_MAXREADERS 512
/* Read transactions kept reset for the next reader: a fraction of STORE_MAXREADERS. */
#define STORE_IDLE_READERS 64
#define STORE_MAXDBS 8
#define STORE_MAX_EXPORTS 65535
#define STORE_MAX_BRANCHES 255           /* si_branch is one byte */

#define META_SCHEMA "schema"
#define META_KEY "handle-key"
#define META_NEXT_EXPORT "next-export"
#define META_NEXT_INO "next-ino/"
#define META_EXPORT "export/"
#define META_EXPORT_PREV "export-prev/"   /* sorts before META_EXPORT: scans of it miss these */

#define INO_KEY_LEN 10                   /* export(2) ino(8) */
#define REAL_KEY_LEN 11                  /* export(2) branch(1) real ino(8) */
#define NAME_KEY_MAX (10 + STORE_NAME_MAX) /* export(2) parent(8) name */
#define VARINT_MAX 10
#define REC_MAX (VARINT_MAX + 4 + 1 + 1 + VARINT_MAX + 1 + STORE_NAME_MAX + 8)
#define NEXT_INO_KEY_LEN (sizeof(META_NEXT_INO) - 1 + 2)

struct store {
	MDB_env *st_env;
	MDB_dbi st_inodes;
	MDB_dbi st_names;
	MDB_dbi st_reals;
	MDB_dbi st_meta;
	int st_lockfd;
	struct strim st_trim;            /* keeps the map's pages out of our memory (trim.h) */
	uint8_t st_key[STORE_KEY_LEN];
	uint32_t st_gen;                 /* the generation of records made in this run */
	char *st_dir;
	pthread_mutex_t st_group_lock;   /* guards making st_group */
	struct sgroup *_Atomic st_group; /* write transactions, made on the first one */
	struct sintent *st_intent;       /* DIR/intents */
	/*
	 * Read transactions done with, reset: renewing one keeps its reader slot and its
	 * memory, where beginning one takes the readers' lock and two allocations.
	 */
	pthread_mutex_t st_idle_lock;
	struct store_txn *st_idle[STORE_IDLE_READERS];
	int st_nidle;
	struct stally_table st_tally;    /* per-branch record counts (store_tally_start) */
};

struct store_txn {
	struct store *tx_store;
	MDB_txn *tx_txn;
	bool tx_write;
	struct store_undo *tx_undo;      /* newest first */
	struct stally_notes tx_tally;    /* what its record changes do to the counts */
};

/* ---- byte order and varints ---- */

static void be16_put(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void be32_put(uint8_t *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint16_t be16_get(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32_get(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Returns 0, or -1 when the bytes are truncated or encode more than 64 bits. */
static int varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p == end)
			return -1;
		uint8_t b = *p++;
		if (shift == 63 && b > 1)
			return -1;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*out = v;
			return 0;
		}
	}
	return -1;
}

/* An index value is exactly one varint. */
static int ino_value_get(const MDB_val *val, uint64_t *ino)
{
	const uint8_t *p = val->mv_data;
	const uint8_t *end = p + val->mv_size;

	if (varint_get(&p, end, ino) < 0 || p != end)
		return -1;
	return 0;
}

/* ---- keys and records ---- */

static MDB_val ino_key(uint8_t *buf, uint16_t exp, uint64_t ino)
{
	be16_put(buf, exp);
	be64_put(buf + 2, ino);
	return (MDB_val){ .mv_size = INO_KEY_LEN, .mv_data = buf };
}

static MDB_val real_key(uint8_t *buf, uint16_t exp, uint8_t branch, uint64_t real_ino)
{
	be16_put(buf, exp);
	buf[2] = branch;
	be64_put(buf + 3, real_ino);
	return (MDB_val){ .mv_size = REAL_KEY_LEN, .mv_data = buf };
}

static MDB_val name_key(uint8_t *buf, uint16_t exp, uint64_t parent, const char *name, size_t len)
{
	be16_put(buf, exp);
	be64_put(buf + 2, parent);
	memcpy(buf + 10, name, len);
	return (MDB_val){ .mv_size = 10 + len, .mv_data = buf };
}

static MDB_val next_ino_key(uint8_t *buf, uint16_t exp)
{
	memcpy(buf, META_NEXT_INO, sizeof(META_NEXT_INO) - 1);
	be16_put(buf + sizeof(META_NEXT_INO) - 1, exp);
	return (MDB_val){ .mv_size = NEXT_INO_KEY_LEN, .mv_data = buf };
}

static MDB_val str_key(const char *s)
{
	return (MDB_val){ .mv_size = strlen(s), .mv_data = (void *)s };
}

static size_t rec_encode(const struct store_inode *r, size_t namelen, uint8_t *buf)
{
	size_t n = varint_put(buf, r->si_parent);

	be32_put(buf + n, r->si_gen);
	n += 4;
	buf[n++] = r->si_type;
	buf[n++] = r->si_branch;
	n += varint_put(buf + n, r->si_real_ino);
	buf[n++] = (uint8_t)namelen;
	memcpy(buf + n, r->si_name, namelen);
	n += namelen;
	/* Optional, after the name: records of maps made before it end with the name. */
	if (r->si_real_id) {
		be64_put(buf + n, r->si_real_id);
		n += 8;
	}
	return n;
}

/* Returns 0, or -1 when the value is not a well-formed record. */
static int rec_decode(const MDB_val *val, uint64_t ino, struct store_inode *out)
{
	const uint8_t *p = val->mv_data;
	const uint8_t *end = p + val->mv_size;
	uint64_t parent, real_ino;

	if (varint_get(&p, end, &parent) < 0 || end - p < 6)
		return -1;
	out->si_gen = be32_get(p);
	out->si_type = p[4];
	out->si_branch = p[5];
	p += 6;
	if (varint_get(&p, end, &real_ino) < 0 || p == end)
		return -1;
	size_t namelen = *p++;
	size_t rest = (size_t)(end - p);
	if ((rest != namelen && rest != namelen + 8) || memchr(p, '\0', namelen))
		return -1;
	memcpy(out->si_name, p, namelen);
	out->si_name[namelen] = '\0';
	out->si_real_id = rest == namelen ? 0 : be64_get(p + namelen);
	out->si_ino = ino;
	out->si_parent = parent;
	out->si_real_ino = real_ino;
	return 0;
}

/* ---- errors ---- */

/* Translates an LMDB or system error from a data operation; MDB_NOTFOUND is not logged. */
static int store_errno(const struct store *st, int rc, const char *what)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case ENOMEM:
		return -ENOMEM;
	case MDB_MAP_FULL:
		log_err("inode map in %s is full (%zu bytes) during %s; remove unused exports from it "
			"or start with an empty --state directory", st->st_dir, (size_t)STORE_MAPSIZE, what);
		return -ENOSPC;
	case ENOSPC:
	case EDQUOT:
		log_err("inode map in %s: %s failed: %s; free space on that file system",
			st->st_dir, what, mdb_strerror(rc));
		return -ENOSPC;
	default:
		log_err("inode map in %s: %s failed: %s; check the state directory's file system",
			st->st_dir, what, mdb_strerror(rc));
		return -EIO;
	}
}

static int store_corrupt(const struct store *st, const char *what, uint16_t exp, uint64_t id)
{
	log_err("inode map in %s: malformed %s (export %u, %" PRIu64 "); restore the state "
		"directory from a backup or start with an empty one", st->st_dir, what, exp, id);
	return -EIO;
}

static int store_need_write(const struct store_txn *txn, const char *what)
{
	if (txn->tx_write)
		return 0;
	log_err("inode map: %s needs a write transaction (internal error)", what);
	return -EINVAL;
}

/* Length of a name, or -ENAMETOOLONG. bufsize bounds the read for fixed arrays. */
static int store_name_len(const char *name, size_t bufsize, size_t *len)
{
	size_t n = strnlen(name, bufsize);

	if (n > STORE_NAME_MAX)
		return -ENAMETOOLONG;
	*len = n;
	return 0;
}

/* ---- opening ---- */

/* Makes the state directory unless it is there, and opens it (O_PATH) into *dirfd. */
static int store_open_dir(const char *dir, int *dirfd, char *err, size_t errlen)
{
	char canon[PATH_MAX];
	int r;

	r = fsio_make_root(dir, 0700);
	if (r == -ENOTDIR) {
		err_set(err, errlen, "state directory %s exists but is not a directory; remove it or "
			"choose another --state", dir);
		return r;
	}
	if (r == -ENOENT) {
		err_set(err, errlen, "cannot create state directory %s: its parent directory does not "
			"exist; create the parent or choose another --state", dir);
		return r;
	}
	if (r < 0) {
		err_set(err, errlen, "cannot create state directory %s: %s; fix its permissions or "
			"choose another --state", dir, strerror(-r));
		return r;
	}
	r = fsio_open_root(dir, canon, sizeof(canon), dirfd);
	if (r < 0)
		err_set(err, errlen, "cannot open state directory %s: %s; fix its permissions or "
			"choose another --state", dir, strerror(-r));
	return r;
}

/*
 * Takes the instance lock (the file lock in the state directory dirfd, whose path dir is for
 * messages) and records our pid in it; returns the fd or -errno.
 */
static int store_lock(int dirfd, const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	char buf[32];
	size_t n, done;
	int fd = -1, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/" STORE_LOCK_FILE, dir) >= sizeof(path)) {
		err_set(err, errlen, "state directory path %s is too long; choose a shorter --state", dir);
		rc = -ENAMETOOLONG;
		goto out;
	}
	rc = fsio_open_file(dirfd, STORE_LOCK_FILE, O_RDWR | O_CREAT, 0600, &fd);
	if (rc < 0) {
		err_set(err, errlen, "cannot open lock file %s: %s; fix the state directory's "
			"permissions or choose another --state", path, strerror(-rc));
		goto out;
	}
	rc = fsio_try_lock(fd);
	if (rc < 0) {
		if (rc == -EWOULDBLOCK) {
			(void)fsio_pread(fd, buf, sizeof(buf) - 1, 0, &done);
			buf[done] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			err_set(err, errlen, "state directory %s is in use by another unionnfsd (pid %s); "
				"stop it or choose another --state", dir, buf[0] ? buf : "unknown");
		} else {
			err_set(err, errlen, "cannot lock %s: %s; use a state directory on a local file "
				"system (--state)", path, strerror(-rc));
		}
		goto out;
	}
	n = (size_t)snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	rc = fsio_ftruncate(fd, 0);
	if (rc == 0)
		rc = fsio_pwrite(fd, buf, n, 0, &done);
	if (rc == 0 && done != n)
		rc = -EIO;
	if (rc < 0) {
		err_set(err, errlen, "cannot write lock file %s: %s; free space or fix permissions in "
			"the state directory", path, strerror(-rc));
		goto out;
	}
	rc = fd;
	fd = -1;
out:
	fsio_close(fd);
	return rc;
}

/*
 * LMDB makes its own file system calls on inodes.mdb and inodes.mdb-lock, by path: the
 * exception to fsio in store/ (include/README). It owns those files, their locks and its
 * map of them, and offers no way to hand it descriptors.
 */
static int store_open_env(struct store *st, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int rc, dead;

	if ((size_t)snprintf(path, sizeof(path), "%s/inodes.mdb", st->st_dir) >= sizeof(path)) {
		err_set(err, errlen, "state directory path %s is too long; choose a shorter --state",
			st->st_dir);
		return -ENAMETOOLONG;
	}
	rc = mdb_env_create(&st->st_env);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(st->st_env, STORE_MAXREADERS);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(st->st_env, STORE_MAXDBS);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->st_env, STORE_MAPSIZE);
	if (rc == 0)
		/* Lookups are random: readahead would only fill memory with pages nobody asked for. */
		/*
		 * MDB_NOMETASYNC: a commit flushes its data pages only; the meta page is flushed
		 * by an explicit sync after every commit (group.c overlaps it with the next
		 * changes). Integrity never depends on it, durability waits for it.
		 */
		rc = mdb_env_open(st->st_env, path,
				  MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC, 0600);
	if (rc == 0)
		rc = mdb_reader_check(st->st_env, &dead);
	if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED) {
		err_set(err, errlen, "%s is not a usable inode map (%s); move it away and start with an "
			"empty --state directory (clients will have to remount)", path, mdb_strerror(rc));
		return -EINVAL;
	}
	if (rc != 0) {
		err_set(err, errlen, "cannot open inode map %s: %s; fix the state directory's "
			"permissions or free space, or choose another --state", path, mdb_strerror(rc));
		return rc > 0 ? -rc : -EIO;
	}
	strim_find_map(&st->st_trim, st->st_env);
	return 0;
}

/*
 * A schema 1 map reads as schema 2 (its records have no identity yet); marking it 2 keeps
 * older servers, which cannot read records that have one, from opening it afterwards.
 */
static int store_schema_upgrade(struct store *st, MDB_txn *txn)
{
	uint8_t buf[4];
	MDB_val key = str_key(META_SCHEMA), val = { .mv_size = 4, .mv_data = buf };
	int rc;

	be32_put(buf, STORE_SCHEMA);
	rc = mdb_put(txn, st->st_meta, &key, &val, 0);
	if (rc == 0)
		log_info("inode map in %s: schema %d -> %d (records learn the identity of their "
			 "copies as they are next used; older unionnfsd versions cannot open it now)",
			 st->st_dir, STORE_SCHEMA_NO_ID, STORE_SCHEMA);
	return rc;
}

/* Opens the tables and checks (or, in a new map, writes) the schema version and key. */
static int store_init_tables(struct store *st, char *err, size_t errlen)
{
	MDB_txn *txn = NULL;
	MDB_val key, val;
	MDB_stat ms;
	uint8_t buf[4];
	int rc;

	rc = mdb_txn_begin(st->st_env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "inodes", MDB_CREATE, &st->st_inodes);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "names", MDB_CREATE, &st->st_names);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "reals", MDB_CREATE, &st->st_reals);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &st->st_meta);
	if (rc != 0)
		goto lmdb_fail;

	key = str_key(META_SCHEMA);
	rc = mdb_get(txn, st->st_meta, &key, &val);
	if (rc == MDB_NOTFOUND) {
		rc = mdb_stat(txn, st->st_inodes, &ms);
		if (rc != 0)
			goto lmdb_fail;
		if (ms.ms_entries != 0) {
			err_set(err, errlen, "inode map in %s has records but no schema version; it is "
				"damaged: start with an empty --state directory", st->st_dir);
			rc = -EINVAL;
			goto out;
		}
		be32_put(buf, STORE_SCHEMA);
		val = (MDB_val){ .mv_size = 4, .mv_data = buf };
		rc = mdb_put(txn, st->st_meta, &key, &val, 0);
		if (rc != 0)
			goto lmdb_fail;
		randombytes_buf(st->st_key, sizeof(st->st_key));
		key = str_key(META_KEY);
		val = (MDB_val){ .mv_size = sizeof(st->st_key), .mv_data = st->st_key };
		rc = mdb_put(txn, st->st_meta, &key, &val, 0);
		if (rc != 0)
			goto lmdb_fail;
	} else if (rc != 0) {
		goto lmdb_fail;
	} else if (val.mv_size != 4 || (be32_get(val.mv_data) != STORE_SCHEMA &&
					be32_get(val.mv_data) != STORE_SCHEMA_NO_ID)) {
		err_set(err, errlen, "inode map in %s has schema version %" PRIu32 " but this "
			"unionnfsd understands version %d; run a matching unionnfsd or start with an "
			"empty --state directory", st->st_dir,
			val.mv_size == 4 ? be32_get(val.mv_data) : 0, STORE_SCHEMA);
		rc = -EPROTONOSUPPORT;
		goto out;
	} else if (be32_get(val.mv_data) == STORE_SCHEMA_NO_ID &&
		   (rc = store_schema_upgrade(st, txn)) != 0) {
		goto lmdb_fail;
	} else {
		key = str_key(META_KEY);
		rc = mdb_get(txn, st->st_meta, &key, &val);
		if (rc != 0 || val.mv_size != sizeof(st->st_key)) {
			err_set(err, errlen, "inode map in %s has no valid handle key; it is damaged: "
				"start with an empty --state directory", st->st_dir);
			rc = -EINVAL;
			goto out;
		}
		memcpy(st->st_key, val.mv_data, sizeof(st->st_key));
	}
	rc = mdb_txn_commit(txn);
	if (rc == 0)
		rc = mdb_env_sync(st->st_env, 1);
	txn = NULL;
	if (rc != 0)
		goto lmdb_fail;
	goto out;

lmdb_fail:
	err_set(err, errlen, "cannot initialise the inode map in %s: %s; free space or fix "
		"permissions there, or choose another --state", st->st_dir, mdb_strerror(rc));
	rc = rc > 0 ? -rc : -EIO;
out:
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

int store_open(const char *dir, struct store **out, char *err, size_t errlen)
{
	struct store *st = NULL;
	int dirfd = -1, rc;

	*out = NULL;
	if (sodium_init() < 0) {
		err_set(err, errlen, "libsodium failed to initialise; check that /dev/urandom is "
			"readable");
		rc = -EIO;
		goto out;
	}
	st = calloc(1, sizeof(*st));
	if (st)
		st->st_gen = randombytes_uniform(UINT32_MAX) + 1;
	if (!st || !(st->st_dir = strdup(dir))) {
		err_set(err, errlen, "out of memory opening state directory %s; free memory", dir);
		rc = -ENOMEM;
		goto out;
	}
	st->st_lockfd = -1;
	pthread_mutex_init(&st->st_group_lock, NULL);
	pthread_mutex_init(&st->st_idle_lock, NULL);
	stally_table_init(&st->st_tally);
	rc = store_open_dir(dir, &dirfd, err, errlen);
	if (rc < 0)
		goto out;
	rc = store_lock(dirfd, dir, err, errlen);
	if (rc < 0)
		goto out;
	st->st_lockfd = rc;
	rc = store_open_env(st, err, errlen);
	if (rc < 0)
		goto out;
	rc = store_init_tables(st, err, errlen);
	if (rc < 0)
		goto out;
	rc = sintent_open(dirfd, dir, &st->st_intent, err, errlen);
	if (rc < 0)
		goto out;
	*out = st;
	st = NULL;
out:
	fsio_close(dirfd);
	store_close(st);
	return rc < 0 ? rc : 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	sgroup_free(st->st_group);
	sintent_close(st->st_intent);
	pthread_mutex_destroy(&st->st_group_lock);
	while (st->st_nidle > 0) {
		struct store_txn *txn = st->st_idle[--st->st_nidle];

		mdb_txn_abort(txn->tx_txn);
		free(txn);
	}
	pthread_mutex_destroy(&st->st_idle_lock);
	stally_table_destroy(&st->st_tally);
	if (st->st_env)
		mdb_env_close(st->st_env);
	if (st->st_lockfd >= 0) {
		/* An empty lock file tells a reader that nobody holds the directory. */
		int r = fsio_ftruncate(st->st_lockfd, 0);

		if (r < 0)
			log_warn("cannot clear lock file in %s: %s", st->st_dir, strerror(-r));
		fsio_close(st->st_lockfd);
	}
	sodium_memzero(st->st_key, sizeof(st->st_key));
	free(st->st_dir);
	free(st);
}

void store_handle_key(const struct store *st, uint8_t key[STORE_KEY_LEN])
{
	memcpy(key, st->st_key, STORE_KEY_LEN);
}

int store_intent_begin(struct store *st, const struct store_intent *in)
{
	return sintent_put(st->st_intent, in);
}

void store_intent_end(struct store *st, int slot)
{
	sintent_drop(st->st_intent, slot);
}

int store_intent_recover(struct store *st, uint16_t exp,
			 int (*fn)(void *arg, const struct store_intent *in), void *arg)
{
	return sintent_walk(st->st_intent, exp, fn, arg);
}

/* ---- transactions ---- */

/* The group committer, started by the first write (after any fork into the background). */
static int store_group(struct store *st, struct sgroup **g)
{
	int rc = 0;

	*g = atomic_load(&st->st_group);
	if (*g)
		return 0;
	pthread_mutex_lock(&st->st_group_lock);
	*g = atomic_load(&st->st_group);
	if (!*g) {
		rc = sgroup_new(st->st_env, g);
		if (rc == 0)
			atomic_store(&st->st_group, *g);
	}
	pthread_mutex_unlock(&st->st_group_lock);
	return rc;
}

/* A reset read transaction renewed, or NULL. */
static struct store_txn *store_renew_reader(struct store *st)
{
	struct store_txn *txn = NULL;

	pthread_mutex_lock(&st->st_idle_lock);
	if (st->st_nidle > 0)
		txn = st->st_idle[--st->st_nidle];
	pthread_mutex_unlock(&st->st_idle_lock);
	if (txn && mdb_txn_renew(txn->tx_txn) != 0) {
		mdb_txn_abort(txn->tx_txn);
		free(txn);
		txn = NULL;
	}
	return txn;
}

/* Ends a read transaction, kept reset for the next one while there is room. */
static void store_end_reader(struct store_txn *txn)
{
	struct store *st = txn->tx_store;

	mdb_txn_reset(txn->tx_txn);
	pthread_mutex_lock(&st->st_idle_lock);
	if (st->st_nidle < STORE_IDLE_READERS) {
		st->st_idle[st->st_nidle++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&st->st_idle_lock);
	if (txn) {
		mdb_txn_abort(txn->tx_txn);
		free(txn);
	}
}

int store_begin(struct store *st, bool write, struct store_txn **out)
{
	struct store_txn *txn;
	struct sgroup *g;
	int rc;

	*out = NULL;
	if (!write) {
		txn = store_renew_reader(st);
		if (txn) {
			*out = txn;
			return 0;
		}
	}
	txn = malloc(sizeof(*txn));
	if (!txn)
		return -ENOMEM;
	if (write) {
		rc = store_group(st, &g);
		if (rc == 0)
			rc = sgroup_begin(g, &txn->tx_txn);
	} else {
		rc = mdb_txn_begin(st->st_env, NULL, MDB_RDONLY, &txn->tx_txn);
	}
	if (rc != 0) {
		free(txn);
		return store_errno(st, rc, "begin transaction");
	}
	txn->tx_store = st;
	txn->tx_write = write;
	txn->tx_undo = NULL;
	stally_notes_init(&txn->tx_tally);
	*out = txn;
	return 0;
}

/*
 * LMDB reports a write that stopped short as EIO: on a state file system with almost no
 * space left, that is the file system being full.
 */
static int store_short_write(const struct store *st, int rc)
{
	struct statvfs vfs;

	if (rc == EIO && fsio_statvfs(st->st_lockfd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bfree * vfs.f_frsize < STORE_NEARLY_FULL)
		return ENOSPC;
	return rc;
}

int store_commit_meanwhile(struct store_txn *txn, struct store_meanwhile *meanwhile)
{
	struct store *st = txn->tx_store;
	int rc = 0;

	if (!txn->tx_write) {
		store_end_reader(txn);
		return 0;
	}
	rc = store_errno(st, store_short_write(st, sgroup_commit(st->st_group, txn->tx_txn,
								 txn->tx_undo, meanwhile)),
			 "commit");
	/* On disk: only now do the counts move (a failed commit leaves them as they were). */
	if (rc == 0)
		stally_apply(&st->st_tally, &txn->tx_tally);
	if (rc == 0 && meanwhile)
		rc = meanwhile->sm_rc;
	stally_notes_free(&txn->tx_tally);
	free(txn);
	return rc;
}

int store_commit(struct store_txn *txn)
{
	return store_commit_meanwhile(txn, NULL);
}

void store_abort(struct store_txn *txn)
{
	if (!txn)
		return;
	if (!txn->tx_write) {
		store_end_reader(txn);
		return;
	}
	/* Before the abort: the turn is still this change's. */
	sgroup_run_undo(txn->tx_undo);
	sgroup_abort(txn->tx_store->st_group, txn->tx_txn);
	stally_notes_free(&txn->tx_tally);
	free(txn);
}

void store_on_undo(struct store_txn *txn, struct store_undo *u)
{
	u->su_next = txn->tx_undo;
	txn->tx_undo = u;
}

/* ---- export bindings ---- */

/* The meta key prefix + name into *key; returns its malloc()ed bytes, or NULL. */
static void *binding_key(const char *prefix, const char *name, MDB_val *key)
{
	size_t plen = strlen(prefix), namelen = strlen(name);
	char *buf = malloc(plen + namelen);

	if (!buf)
		return NULL;
	memcpy(buf, prefix, plen);
	memcpy(buf + plen, name, namelen);
	*key = (MDB_val){ .mv_size = plen + namelen, .mv_data = buf };
	return buf;
}

/* Walks one branch entry of a binding value; returns 0 or -1 when malformed. */
static int binding_next(const uint8_t **pp, const uint8_t *end, const char **path,
			size_t *len, uint64_t *root_ino)
{
	const uint8_t *p = *pp;

	if (end - p < 10)
		return -1;
	*root_ino = be64_get(p);
	*len = be16_get(p + 8);
	p += 10;
	if ((size_t)(end - p) < *len || *len == 0)
		return -1;
	*path = (const char *)p;
	*pp = p + *len;
	return 0;
}

/* Validates a stored binding and returns its branch count, or -1. */
static int binding_check(const MDB_val *val)
{
	const uint8_t *p = val->mv_data;
	const uint8_t *end = p + val->mv_size;
	const char *path;
	size_t len;
	uint64_t ino;
	int n;

	if (val->mv_size < 3 || be16_get(p) == 0)
		return -1;
	n = p[2];
	p += 3;
	for (int i = 0; i < n; i++)
		if (binding_next(&p, end, &path, &len, &ino) < 0)
			return -1;
	return p == end && n > 0 ? n : -1;
}

/* Joins the branch paths of a stored binding with ':' into a new string. */
static char *binding_stored_paths(const MDB_val *val)
{
	const uint8_t *p = (const uint8_t *)val->mv_data + 3;
	const uint8_t *end = (const uint8_t *)val->mv_data + val->mv_size;
	int n = ((const uint8_t *)val->mv_data)[2];
	char *s = malloc(val->mv_size + 1);
	size_t off = 0, len;
	const char *path;
	uint64_t ino;

	if (!s)
		return NULL;
	for (int i = 0; i < n && binding_next(&p, end, &path, &len, &ino) == 0; i++) {
		if (i)
			s[off++] = ':';
		memcpy(s + off, path, len);
		off += len;
	}
	s[off] = '\0';
	return s;
}

static char *binding_given_paths(const struct store_branch_id *br, int n)
{
	size_t total = 1;
	char *s;

	for (int i = 0; i < n; i++)
		total += strlen(br[i].sb_path) + 1;
	s = malloc(total);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (i)
			strcat(s, ":");
		strcat(s, br[i].sb_path);
	}
	return s;
}

/*
 * Compares a stored binding with the given stack; returns 0 when equal, otherwise -EINVAL
 * with the message in err.
 */
static int binding_compare(const struct store *st, const char *name, const MDB_val *val,
			   const struct store_branch_id *br, int n, char *err, size_t errlen)
{
	const uint8_t *p = (const uint8_t *)val->mv_data + 3;
	const uint8_t *end = (const uint8_t *)val->mv_data + val->mv_size;
	int stored_n = ((const uint8_t *)val->mv_data)[2];
	int ino_diff = -1;
	uint64_t stored_root = 0;
	bool paths_diff = stored_n != n;
	char *was = NULL, *now = NULL;
	const char *path;
	size_t len;
	uint64_t root;

	for (int i = 0; i < n && !paths_diff; i++) {
		binding_next(&p, end, &path, &len, &root);
		if (len != strlen(br[i].sb_path) || memcmp(path, br[i].sb_path, len) != 0)
			paths_diff = true;
		else if (root != br[i].sb_root_ino && ino_diff < 0) {
			ino_diff = i;
			stored_root = root;
		}
	}
	if (!paths_diff && ino_diff < 0)
		return 0;
	was = binding_stored_paths(val);
	now = binding_given_paths(br, n);
	if (paths_diff)
		err_set(err, errlen, "export %s: the inode map in %s was built for branches %s but is "
			"now given %s; restore the original branches or start with an empty --state "
			"directory", name, st->st_dir, was ? was : "?", now ? now : "?");
	else
		err_set(err, errlen, "export %s: the inode map in %s was built for branches %s, but "
			"branch %s is now a different directory (root inode %" PRIu64 ", was %" PRIu64
			"); restore the original directory or start with an empty --state directory",
			name, st->st_dir, was ? was : "?", br[ino_diff].sb_path,
			br[ino_diff].sb_root_ino, stored_root);
	free(was);
	free(now);
	return -EINVAL;
}

static int binding_validate(const char *name, const struct store_branch_id *br, int n,
			    size_t *vallen, char *err, size_t errlen)
{
	size_t total = 3;

	if (!name || !*name || strlen(name) > STORE_EXPORT_NAME_MAX) {
		err_set(err, errlen, "export name \"%.64s\" must be 1 to %d bytes long; choose "
			"another export path", name ? name : "", STORE_EXPORT_NAME_MAX);
		return -EINVAL;
	}
	if (n < 1 || n > STORE_MAX_BRANCHES) {
		err_set(err, errlen, "export %s has %d branches but must have 1 to %d; give a "
			"shorter branch list", name, n, STORE_MAX_BRANCHES);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		size_t len = br[i].sb_path ? strlen(br[i].sb_path) : 0;
		if (len == 0 || len > PATH_MAX) {
			err_set(err, errlen, "export %s: branch %d has an empty or overlong path; give "
				"an absolute directory path", name, i + 1);
			return -EINVAL;
		}
		total += 10 + len;
	}
	*vallen = total;
	return 0;
}

static void binding_encode(uint8_t *buf, uint16_t id, const struct store_branch_id *br, int n)
{
	size_t off = 3;

	be16_put(buf, id);
	buf[2] = (uint8_t)n;
	for (int i = 0; i < n; i++) {
		size_t len = strlen(br[i].sb_path);
		be64_put(buf + off, br[i].sb_root_ino);
		be16_put(buf + off + 8, (uint16_t)len);
		memcpy(buf + off + 10, br[i].sb_path, len);
		off += 10 + len;
	}
}

/* Creates a binding, its root record and its ino counter in a write txn. */
static int binding_create(struct store *st, MDB_txn *txn, MDB_val *key, uint8_t *buf,
			  size_t buflen, const struct store_branch_id *br, int n, uint16_t *id,
			  char *err, size_t errlen)
{
	uint8_t nbuf[2], ikey[NEXT_INO_KEY_LEN], kbuf[REAL_KEY_LEN], vbuf[REC_MAX], inobuf[8];
	struct store_inode root = { 0 };
	MDB_val k, v;
	uint32_t next = 1;
	int rc;

	k = str_key(META_NEXT_EXPORT);
	rc = mdb_get(txn, st->st_meta, &k, &v);
	if (rc == 0 && v.mv_size == 2)
		next = be16_get(v.mv_data);
	else if (rc == 0 && v.mv_size == 4)
		next = be32_get(v.mv_data);
	else if (rc != MDB_NOTFOUND)
		goto fail;
	if (next == 0 || next > STORE_MAX_EXPORTS) {
		err_set(err, errlen, "inode map in %s already holds %d exports; start with an empty "
			"--state directory", st->st_dir, STORE_MAX_EXPORTS);
		return -ENOSPC;
	}
	*id = (uint16_t)next;
	/* After 65535 the counter is stored wide, so it reads as exhausted rather than 0. */
	if (next < STORE_MAX_EXPORTS) {
		be16_put(nbuf, (uint16_t)(next + 1));
		v = (MDB_val){ .mv_size = 2, .mv_data = nbuf };
	} else {
		be32_put(vbuf, next + 1);
		v = (MDB_val){ .mv_size = 4, .mv_data = vbuf };
	}
	rc = mdb_put(txn, st->st_meta, &k, &v, 0);
	if (rc != 0)
		goto fail;

	binding_encode(buf, *id, br, n);
	v = (MDB_val){ .mv_size = buflen, .mv_data = buf };
	rc = mdb_put(txn, st->st_meta, key, &v, 0);
	if (rc != 0)
		goto fail;

	root.si_parent = STORE_ROOT_INO;
	root.si_gen = randombytes_uniform(UINT32_MAX) + 1;
	root.si_type = S_IFDIR >> 12;
	root.si_branch = 0;
	root.si_real_ino = br[0].sb_root_ino;
	k = ino_key(kbuf, *id, STORE_ROOT_INO);
	v = (MDB_val){ .mv_size = rec_encode(&root, 0, vbuf), .mv_data = vbuf };
	rc = mdb_put(txn, st->st_inodes, &k, &v, 0);
	if (rc != 0)
		goto fail;
	k = real_key(kbuf, *id, 0, br[0].sb_root_ino);
	v = (MDB_val){ .mv_size = varint_put(vbuf, STORE_ROOT_INO), .mv_data = vbuf };
	rc = mdb_put(txn, st->st_reals, &k, &v, 0);
	if (rc != 0)
		goto fail;
	k = next_ino_key(ikey, *id);
	be64_put(inobuf, STORE_ROOT_INO + 1);
	v = (MDB_val){ .mv_size = 8, .mv_data = inobuf };
	rc = mdb_put(txn, st->st_meta, &k, &v, 0);
	if (rc != 0)
		goto fail;
	return 0;
fail:
	err_set(err, errlen, "cannot record export in the inode map in %s: %s; free space or "
		"fix permissions there", st->st_dir, mdb_strerror(rc));
	return rc == MDB_MAP_FULL || rc == ENOSPC ? -ENOSPC : -EIO;
}

int store_bind_export(struct store *st, const char *name, const struct store_branch_id *branches,
		      int nbranches, uint16_t *export_id, char *err, size_t errlen)
{
	uint8_t *keybuf = NULL, *buf = NULL;
	MDB_txn *txn = NULL;
	MDB_val key, val;
	size_t vallen, namelen;
	uint16_t id = 0;
	int rc;

	rc = binding_validate(name, branches, nbranches, &vallen, err, errlen);
	if (rc < 0)
		goto out;
	namelen = strlen(name);
	keybuf = malloc(sizeof(META_EXPORT) - 1 + namelen);
	buf = malloc(vallen);
	if (!keybuf || !buf) {
		err_set(err, errlen, "out of memory binding export %s; free memory", name);
		rc = -ENOMEM;
		goto out;
	}
	memcpy(keybuf, META_EXPORT, sizeof(META_EXPORT) - 1);
	memcpy(keybuf + sizeof(META_EXPORT) - 1, name, namelen);
	key = (MDB_val){ .mv_size = sizeof(META_EXPORT) - 1 + namelen, .mv_data = keybuf };

	rc = mdb_txn_begin(st->st_env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_get(txn, st->st_meta, &key, &val);
	if (rc == 0) {
		if (binding_check(&val) < 0) {
			err_set(err, errlen, "export %s: its record in the inode map in %s is damaged; "
				"start with an empty --state directory", name, st->st_dir);
			rc = -EIO;
			goto out;
		}
		rc = binding_compare(st, name, &val, branches, nbranches, err, errlen);
		if (rc == 0)
			id = be16_get(val.mv_data);
		goto out;
	}
	if (rc != MDB_NOTFOUND) {
		err_set(err, errlen, "cannot read the inode map in %s: %s; check the state "
			"directory's file system", st->st_dir, mdb_strerror(rc));
		rc = rc == MDB_MAP_FULL ? -ENOSPC : -EIO;
		goto out;
	}
	rc = binding_create(st, txn, &key, buf, vallen, branches, nbranches, &id, err, errlen);
	if (rc < 0)
		goto out;
	rc = mdb_txn_commit(txn);
	if (rc == 0)
		rc = mdb_env_sync(st->st_env, 1);
	txn = NULL;
	if (rc != 0) {
		err_set(err, errlen, "cannot save export %s in the inode map in %s: %s; free space "
			"or fix permissions there", name, st->st_dir, mdb_strerror(rc));
		rc = rc == MDB_MAP_FULL || rc == ENOSPC ? -ENOSPC : -EIO;
	}
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc == 0)
		*export_id = id;
	free(keybuf);
	free(buf);
	return rc;
}

/* ---- lookups ---- */

int store_get(struct store_txn *txn, uint16_t exp, uint64_t ino, struct store_inode *out)
{
	struct store *st = txn->tx_store;
	uint8_t kbuf[INO_KEY_LEN];
	MDB_val key = ino_key(kbuf, exp, ino), val;
	int rc;

	strim_tick(&st->st_trim, st->st_env, st->st_dir);
	rc = mdb_get(txn->tx_txn, st->st_inodes, &key, &val);
	if (rc != 0)
		return store_errno(st, rc, "inode lookup");
	if (rec_decode(&val, ino, out) < 0)
		return store_corrupt(st, "inode record", exp, ino);
	return 0;
}

/* Looks up an index entry whose value is an ino. */
static int index_get(struct store_txn *txn, MDB_dbi dbi, MDB_val *key, uint64_t *ino,
		     const char *what, uint16_t exp)
{
	struct store *st = txn->tx_store;
	MDB_val val;
	int rc;

	strim_tick(&st->st_trim, st->st_env, st->st_dir);
	rc = mdb_get(txn->tx_txn, dbi, key, &val);
	if (rc != 0)
		return store_errno(st, rc, what);
	if (ino_value_get(&val, ino) < 0)
		return store_corrupt(st, what, exp, 0);
	return 0;
}

int store_find_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name, uint64_t *ino)
{
	uint8_t kbuf[NAME_KEY_MAX];
	size_t len;
	MDB_val key;
	int rc;

	rc = store_name_len(name, STORE_NAME_MAX + 1, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return -ENOENT;
	key = name_key(kbuf, exp, parent, name, len);
	return index_get(txn, txn->tx_store->st_names, &key, ino, "name index", exp);
}

int store_find_real(struct store_txn *txn, uint16_t exp, uint8_t branch, uint64_t real_ino, uint64_t *ino)
{
	uint8_t kbuf[REAL_KEY_LEN];
	MDB_val key = real_key(kbuf, exp, branch, real_ino);

	return index_get(txn, txn->tx_store->st_reals, &key, ino, "real inode index", exp);
}

/* ---- changes ---- */

static int index_put(struct store_txn *txn, MDB_dbi dbi, MDB_val *key, uint64_t ino,
		     const char *what)
{
	uint8_t vbuf[VARINT_MAX];
	MDB_val val = { .mv_size = varint_put(vbuf, ino), .mv_data = vbuf };

	return store_errno(txn->tx_store, mdb_put(txn->tx_txn, dbi, key, &val, 0), what);
}

/* Removes an index entry if it still names ino; another object may have taken it since. */
static int index_del_if(struct store_txn *txn, MDB_dbi dbi, MDB_val *key, uint64_t ino,
			const char *what, uint16_t exp)
{
	uint64_t cur;
	int rc;

	rc = index_get(txn, dbi, key, &cur, what, exp);
	if (rc == -ENOENT || (rc == 0 && cur != ino))
		return 0;
	if (rc < 0)
		return rc;
	return store_errno(txn->tx_store, mdb_del(txn->tx_txn, dbi, key, NULL), what);
}

static int rec_put(struct store_txn *txn, uint16_t exp, const struct store_inode *rec,
		   size_t namelen, unsigned flags)
{
	uint8_t kbuf[INO_KEY_LEN], vbuf[REC_MAX];
	MDB_val key = ino_key(kbuf, exp, rec->si_ino);
	MDB_val val = { .mv_size = rec_encode(rec, namelen, vbuf), .mv_data = vbuf };

	return store_errno(txn->tx_store, mdb_put(txn->tx_txn, txn->tx_store->st_inodes, &key, &val,
						  flags), "inode write");
}

/* Adds the names (if the record has a name) and reals entries of a record. */
static int rec_index(struct store_txn *txn, uint16_t exp, const struct store_inode *rec,
		     size_t namelen)
{
	struct store *st = txn->tx_store;
	uint8_t kbuf[NAME_KEY_MAX];
	MDB_val key;
	int rc;

	if (namelen > 0) {
		key = name_key(kbuf, exp, rec->si_parent, rec->si_name, namelen);
		rc = index_put(txn, st->st_names, &key, rec->si_ino, "name index write");
		if (rc < 0)
			return rc;
	}
	key = real_key(kbuf, exp, rec->si_branch, rec->si_real_ino);
	return index_put(txn, st->st_reals, &key, rec->si_ino, "real inode index write");
}

int store_insert(struct store_txn *txn, uint16_t exp, struct store_inode *rec)
{
	struct store *st = txn->tx_store;
	struct store_inode r = *rec;
	uint8_t kbuf[NEXT_INO_KEY_LEN], nbuf[8];
	MDB_val key = next_ino_key(kbuf, exp), val;
	size_t namelen;
	int rc;

	rc = store_need_write(txn, "insert");
	if (rc == 0)
		rc = store_name_len(rec->si_name, sizeof(rec->si_name), &namelen);
	if (rc == 0)
		rc = stally_notes_reserve(&txn->tx_tally, 1);
	if (rc < 0)
		return rc;
	rc = mdb_get(txn->tx_txn, st->st_meta, &key, &val);
	if (rc == MDB_NOTFOUND) {
		log_err("inode map: insert into export %u, which was never bound (internal error)", exp);
		return -EINVAL;
	}
	if (rc != 0)
		return store_errno(st, rc, "inode counter read");
	if (val.mv_size != 8)
		return store_corrupt(st, "inode counter", exp, 0);
	r.si_ino = be64_get(val.mv_data);
	if (r.si_ino == UINT64_MAX) {
		log_err("inode map in %s: export %u has used every inode number; start with an "
			"empty --state directory", st->st_dir, exp);
		return -ENOSPC;
	}
	be64_put(nbuf, r.si_ino + 1);
	val = (MDB_val){ .mv_size = 8, .mv_data = nbuf };
	rc = store_errno(st, mdb_put(txn->tx_txn, st->st_meta, &key, &val, 0), "inode counter write");
	if (rc < 0)
		return rc;
	/*
	 * Inos are never reused, so the generation only has to differ between state dirs: one
	 * drawn per run will do (a draw per record was a system call per new name).
	 */
	r.si_gen = st->st_gen;
	rc = rec_put(txn, exp, &r, namelen, MDB_NOOVERWRITE);
	if (rc == 0)
		rc = rec_index(txn, exp, &r, namelen);
	if (rc < 0)
		return rc;
	stally_note(&txn->tx_tally, exp, r.si_branch, 1);
	rec->si_ino = r.si_ino;
	rec->si_gen = r.si_gen;
	return 0;
}

int store_update(struct store_txn *txn, uint16_t exp, const struct store_inode *rec)
{
	struct store *st = txn->tx_store;
	struct store_inode old, r = *rec;
	uint8_t kbuf[NAME_KEY_MAX];
	size_t namelen, oldlen;
	MDB_val key;
	int rc;

	rc = store_need_write(txn, "update");
	if (rc == 0)
		rc = store_name_len(rec->si_name, sizeof(rec->si_name), &namelen);
	if (rc == 0)
		rc = stally_notes_reserve(&txn->tx_tally, 2);
	if (rc == 0)
		rc = store_get(txn, exp, rec->si_ino, &old);
	if (rc < 0)
		return rc;
	/* An ino keeps its generation for life: handles already given out carry it. */
	r.si_gen = old.si_gen;
	/* Moved to another copy by a caller that did not say what identity it has: unknown. */
	if ((old.si_branch != r.si_branch || old.si_real_ino != r.si_real_ino) &&
	    r.si_real_id == old.si_real_id)
		r.si_real_id = 0;
	oldlen = strlen(old.si_name);
	if (oldlen > 0 && (old.si_parent != r.si_parent || strcmp(old.si_name, r.si_name) != 0)) {
		key = name_key(kbuf, exp, old.si_parent, old.si_name, oldlen);
		rc = index_del_if(txn, st->st_names, &key, r.si_ino, "name index delete", exp);
		if (rc < 0)
			return rc;
	}
	if (old.si_branch != r.si_branch || old.si_real_ino != r.si_real_ino) {
		key = real_key(kbuf, exp, old.si_branch, old.si_real_ino);
		rc = index_del_if(txn, st->st_reals, &key, r.si_ino, "real inode index delete", exp);
		if (rc < 0)
			return rc;
	}
	rc = rec_put(txn, exp, &r, namelen, 0);
	if (rc == 0)
		rc = rec_index(txn, exp, &r, namelen);
	if (rc < 0)
		return rc;
	if (old.si_branch != r.si_branch) {
		stally_note(&txn->tx_tally, exp, old.si_branch, -1);
		stally_note(&txn->tx_tally, exp, r.si_branch, 1);
	}
	return 0;
}

int store_add_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name, uint64_t ino)
{
	struct store_inode rec;
	uint8_t kbuf[NAME_KEY_MAX];
	size_t len;
	MDB_val key;
	int rc;

	rc = store_need_write(txn, "add name");
	if (rc == 0)
		rc = store_name_len(name, STORE_NAME_MAX + 1, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return -EINVAL;
	/* A name pointing at no record would only ever resolve to ENOENT; refuse it early. */
	rc = store_get(txn, exp, ino, &rec);
	if (rc < 0)
		return rc;
	key = name_key(kbuf, exp, parent, name, len);
	return index_put(txn, txn->tx_store->st_names, &key, ino, "name index write");
}

int store_del_name(struct store_txn *txn, uint16_t exp, uint64_t parent, const char *name)
{
	uint8_t kbuf[NAME_KEY_MAX];
	size_t len;
	MDB_val key;
	int rc;

	rc = store_need_write(txn, "delete name");
	if (rc == 0)
		rc = store_name_len(name, STORE_NAME_MAX + 1, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return -ENOENT;
	key = name_key(kbuf, exp, parent, name, len);
	return store_errno(txn->tx_store, mdb_del(txn->tx_txn, txn->tx_store->st_names, &key, NULL),
			   "name index delete");
}

int store_delete(struct store_txn *txn, uint16_t exp, uint64_t ino)
{
	struct store *st = txn->tx_store;
	struct store_inode old;
	uint8_t kbuf[NAME_KEY_MAX];
	size_t len;
	MDB_val key;
	int rc;

	rc = store_need_write(txn, "delete");
	if (rc == 0)
		rc = stally_notes_reserve(&txn->tx_tally, 1);
	if (rc == 0)
		rc = store_get(txn, exp, ino, &old);
	if (rc < 0)
		return rc;
	len = strlen(old.si_name);
	if (len > 0) {
		key = name_key(kbuf, exp, old.si_parent, old.si_name, len);
		rc = index_del_if(txn, st->st_names, &key, ino, "name index delete", exp);
		if (rc < 0)
			return rc;
	}
	key = real_key(kbuf, exp, old.si_branch, old.si_real_ino);
	rc = index_del_if(txn, st->st_reals, &key, ino, "real inode index delete", exp);
	if (rc < 0)
		return rc;
	key = ino_key(kbuf, exp, ino);
	rc = store_errno(st, mdb_del(txn->tx_txn, st->st_inodes, &key, NULL), "inode delete");
	if (rc == 0)
		stally_note(&txn->tx_tally, exp, old.si_branch, -1);
	return rc;
}


int store_trim(struct store *st, size_t budget)
{
	return strim_trim(&st->st_trim, st->st_env, budget);
}

int store_count(struct store_txn *txn, uint16_t exp, uint64_t *count)
{
	struct store *st = txn->tx_store;
	uint8_t kbuf[INO_KEY_LEN];
	MDB_cursor *cur;
	MDB_val key = ino_key(kbuf, exp, 0), val;
	MDB_cursor_op op = MDB_SET_RANGE;
	uint64_t n = 0;
	int rc;

	rc = mdb_cursor_open(txn->tx_txn, st->st_inodes, &cur);
	if (rc != 0)
		return store_errno(st, rc, "count");
	while ((rc = mdb_cursor_get(cur, &key, &val, op)) == 0) {
		if (key.mv_size != INO_KEY_LEN || be16_get(key.mv_data) != exp)
			break;
		n++;
		op = MDB_NEXT;
	}
	mdb_cursor_close(cur);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return store_errno(st, rc, "count");
	*count = n;
	return 0;
}

int store_tally_start(struct store *st, uint16_t exp, int nbranches)
{
	uint8_t kbuf[INO_KEY_LEN];
	struct store_txn *txn;
	MDB_cursor *cur;
	MDB_val key = ino_key(kbuf, exp, 0), val;
	MDB_cursor_op op = MDB_SET_RANGE;
	uint64_t *count;
	int rc, r;

	if (nbranches < 1 || nbranches > STORE_MAX_BRANCHES)
		return -EINVAL;
	count = calloc((size_t)nbranches, sizeof(*count));
	if (!count)
		return -ENOMEM;
	r = store_begin(st, false, &txn);
	if (r < 0) {
		free(count);
		return r;
	}
	rc = mdb_cursor_open(txn->tx_txn, st->st_inodes, &cur);
	if (rc != 0) {
		r = store_errno(st, rc, "count by branch");
		goto out;
	}
	while ((rc = mdb_cursor_get(cur, &key, &val, op)) == 0) {
		const uint8_t *p = val.mv_data, *end = p + val.mv_size;
		uint64_t parent;

		if (key.mv_size != INO_KEY_LEN || be16_get(key.mv_data) != exp)
			break;
		/*
		 * The branch byte only (see rec_encode): a pass over millions must be quick. A
		 * malformed record is on no branch (store_get and `check` report it).
		 */
		if (varint_get(&p, end, &parent) == 0 && end - p >= 6 && p[5] < nbranches)
			count[p[5]]++;
		strim_tick(&st->st_trim, st->st_env, st->st_dir);
		op = MDB_NEXT;
	}
	mdb_cursor_close(cur);
	if (r == 0 && rc != 0 && rc != MDB_NOTFOUND)
		r = store_errno(st, rc, "count by branch");
	if (r == 0)
		r = stally_set(&st->st_tally, exp, count, nbranches);
out:
	store_abort(txn);
	free(count);
	return r;
}

int store_tally(struct store *st, uint16_t exp, int branch, uint64_t *count)
{
	return stally_get(&st->st_tally, exp, branch, count);
}

int store_each_ino(struct store_txn *txn, uint16_t exp, int (*fn)(uint64_t ino, void *arg),
		   void *arg)
{
	struct store *st = txn->tx_store;
	uint8_t kbuf[INO_KEY_LEN];
	MDB_cursor *cur;
	MDB_val key = ino_key(kbuf, exp, 0), val;
	MDB_cursor_op op = MDB_SET_RANGE;
	int rc, r = 0;

	rc = mdb_cursor_open(txn->tx_txn, st->st_inodes, &cur);
	if (rc != 0)
		return store_errno(st, rc, "walk");
	while (r == 0 && (rc = mdb_cursor_get(cur, &key, &val, op)) == 0) {
		if (key.mv_size != INO_KEY_LEN || be16_get(key.mv_data) != exp)
			break;
		r = fn(be64_get((const uint8_t *)key.mv_data + 2), arg);
		strim_tick(&st->st_trim, st->st_env, st->st_dir);
		op = MDB_NEXT;
	}
	mdb_cursor_close(cur);
	if (r == 0 && rc != 0 && rc != MDB_NOTFOUND)
		r = store_errno(st, rc, "walk");
	return r;
}

int store_next_ino(struct store_txn *txn, uint16_t exp, uint64_t after, uint64_t *ino)
{
	struct store *st = txn->tx_store;
	uint8_t kbuf[INO_KEY_LEN];
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, r = -ENOENT;

	if (after == UINT64_MAX)
		return -ENOENT;
	key = ino_key(kbuf, exp, after + 1);
	rc = mdb_cursor_open(txn->tx_txn, st->st_inodes, &cur);
	if (rc != 0)
		return store_errno(st, rc, "next ino");
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	if (rc == 0 && key.mv_size == INO_KEY_LEN && be16_get(key.mv_data) == exp) {
		*ino = be64_get((const uint8_t *)key.mv_data + 2);
		r = 0;
	} else if (rc != 0 && rc != MDB_NOTFOUND) {
		r = store_errno(st, rc, "next ino");
	}
	mdb_cursor_close(cur);
	return r;
}

int store_export_name(struct store *st, uint16_t id, char *name, size_t len)
{
	static const char prefix[] = META_EXPORT;
	const size_t plen = sizeof(prefix) - 1;
	struct store_txn *txn;
	MDB_cursor *cur;
	MDB_val key = { .mv_size = plen, .mv_data = (void *)prefix }, val;
	MDB_cursor_op op = MDB_SET_RANGE;
	int rc, r = -ENOENT;

	rc = store_begin(st, false, &txn);
	if (rc < 0)
		return rc;
	rc = mdb_cursor_open(txn->tx_txn, st->st_meta, &cur);
	if (rc != 0) {
		store_abort(txn);
		return store_errno(st, rc, "export name");
	}
	/* Bindings are few (one per export and per client view): a scan is cheap enough. */
	while ((rc = mdb_cursor_get(cur, &key, &val, op)) == 0) {
		op = MDB_NEXT;
		if (key.mv_size < plen || memcmp(key.mv_data, prefix, plen) != 0)
			break;
		if (val.mv_size < 2 || be16_get(val.mv_data) != id)
			continue;
		if (key.mv_size - plen >= len) {
			r = -ENAMETOOLONG;
		} else {
			memcpy(name, (const char *)key.mv_data + plen, key.mv_size - plen);
			name[key.mv_size - plen] = '\0';
			r = 0;
		}
		break;
	}
	mdb_cursor_close(cur);
	if (rc != 0 && rc != MDB_NOTFOUND)
		r = store_errno(st, rc, "export name");
	store_abort(txn);
	return r;
}

/*
 * Deletes the keys of table dbi from start on that begin with export id exp and that
 * drop(val, arg) picks (NULL: all of them), in a write txn. drop returns 1 to delete, 0 to
 * keep, or an LMDB error. Returns 0 or an LMDB error.
 */
static int store_sweep(MDB_txn *txn, MDB_dbi dbi, uint16_t exp, MDB_val start,
		       int (*drop)(const MDB_val *val, void *arg), void *arg)
{
	uint8_t prefix[2];
	MDB_cursor *cur;
	MDB_val key = start, val;
	int rc, d;

	be16_put(prefix, exp);
	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc != 0)
		return rc;
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	while (rc == 0 && key.mv_size >= 2 && !memcmp(key.mv_data, prefix, 2)) {
		d = drop ? drop(&val, arg) : 1;
		if (d == 0) {
			rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
			continue;
		}
		rc = d == 1 ? mdb_cursor_del(cur, 0) : d;
		if (rc != 0)
			break;
		rc = mdb_cursor_get(cur, &key, &val, MDB_GET_CURRENT);
		if (rc == MDB_NOTFOUND || rc == EINVAL)
			rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Deletes every key of table dbi that starts with export id exp (write txn). */
static int store_drop_prefix(MDB_txn *txn, MDB_dbi dbi, uint16_t exp)
{
	uint8_t prefix[2];

	be16_put(prefix, exp);
	return store_sweep(txn, dbi, exp, (MDB_val){ .mv_size = 2, .mv_data = prefix }, NULL,
			   NULL);
}

int store_unbind_export(struct store *st, const char *name)
{
	size_t plen = sizeof(META_EXPORT) - 1, namelen = strlen(name);
	uint8_t next[NEXT_INO_KEY_LEN];
	struct store_txn *txn;
	MDB_val key, val;
	uint16_t exp;
	char *keybuf;
	int rc, r;

	keybuf = malloc(plen + namelen);
	if (!keybuf)
		return -ENOMEM;
	memcpy(keybuf, META_EXPORT, plen);
	memcpy(keybuf + plen, name, namelen);
	key = (MDB_val){ .mv_size = plen + namelen, .mv_data = keybuf };
	r = store_begin(st, true, &txn);
	if (r < 0) {
		free(keybuf);
		return r;
	}
	rc = mdb_get(txn->tx_txn, st->st_meta, &key, &val);
	if (rc == 0 && val.mv_size < 2)
		rc = MDB_CORRUPTED;
	if (rc == 0) {
		exp = be16_get(val.mv_data);
		rc = mdb_del(txn->tx_txn, st->st_meta, &key, NULL);
	}
	if (rc == 0) {
		memcpy(next, META_NEXT_INO, sizeof(META_NEXT_INO) - 1);
		be16_put(next + sizeof(META_NEXT_INO) - 1, exp);
		key = (MDB_val){ .mv_size = sizeof(next), .mv_data = next };
		rc = mdb_del(txn->tx_txn, st->st_meta, &key, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0) {
		free(keybuf);
		keybuf = binding_key(META_EXPORT_PREV, name, &key);
		rc = keybuf ? mdb_del(txn->tx_txn, st->st_meta, &key, NULL) : ENOMEM;
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0)
		rc = store_drop_prefix(txn->tx_txn, st->st_inodes, exp);
	if (rc == 0)
		rc = store_drop_prefix(txn->tx_txn, st->st_names, exp);
	if (rc == 0)
		rc = store_drop_prefix(txn->tx_txn, st->st_reals, exp);
	free(keybuf);
	if (rc != 0) {
		store_abort(txn);
		return store_errno(st, rc, "unbind export");
	}
	r = store_commit(txn);
	if (r == 0)
		stally_clear(&st->st_tally, exp);
	return r;
}

/* ---- new bases ---- */

/*
 * Whether the first nw branches of a stored binding are br's (path and root ino); otherwise
 * -EINVAL with the message in err.
 */
static int binding_compare_writable(const struct store *st, const char *name,
				    const MDB_val *val, const struct store_branch_id *br, int n,
				    int nw, char *err, size_t errlen)
{
	const uint8_t *p = (const uint8_t *)val->mv_data + 3;
	const uint8_t *end = (const uint8_t *)val->mv_data + val->mv_size;
	int stored_n = ((const uint8_t *)val->mv_data)[2];
	bool same = stored_n >= nw;
	char *was, *now;
	const char *path;
	size_t len;
	uint64_t root;

	for (int i = 0; i < nw && same; i++) {
		binding_next(&p, end, &path, &len, &root);
		same = len == strlen(br[i].sb_path) && !memcmp(path, br[i].sb_path, len) &&
		       root == br[i].sb_root_ino;
	}
	if (same)
		return 0;
	was = binding_stored_paths(val);
	now = binding_given_paths(br, n);
	err_set(err, errlen, "export %s: the inode map in %s was built for branches %s, now given "
		"%s, whose %d writable branch%s (first) differ from those (by path or root inode); "
		"a new base replaces only the read-only branches below the same writable ones: "
		"restore the writable branches or start with an empty --state directory", name,
		st->st_dir, was ? was : "?", now ? now : "?", nw, nw == 1 ? "" : "es");
	free(was);
	free(now);
	return -EINVAL;
}

struct rebase_names {
	MDB_txn *rn_txn;
	MDB_dbi rn_inodes;
	uint16_t rn_exp;
};

/* A names entry whose ino has no record any more (store_sweep's drop). */
static int rebase_dangling_name(const MDB_val *val, void *arg)
{
	struct rebase_names *rn = arg;
	uint8_t kbuf[INO_KEY_LEN];
	MDB_val key, rec;
	uint64_t ino;
	int rc;

	if (ino_value_get(val, &ino) < 0)
		return 0; /* not ours to judge: `check` reports it */
	key = ino_key(kbuf, rn->rn_exp, ino);
	rc = mdb_get(rn->rn_txn, rn->rn_inodes, &key, &rec);
	if (rc == MDB_NOTFOUND)
		return 1;
	return rc;
}

/*
 * Forgets export exp's copies in branches nw and below (write txn): a non-directory's
 * record goes (its copy was in the old base), a directory's is left to be found again by
 * its path (branch 0, real ino 0: no copy matches it, so the union re-keys it), and no
 * index entry of those branches, nor a name of a record gone, is left behind. The root
 * (only when every branch is replaced, nw 0) is where store_bind_export puts it: branch
 * 0's root, root_real.
 */
static int rebase_records(struct store_txn *txn, uint16_t exp, int nw, uint64_t root_real)
{
	struct store *st = txn->tx_store;
	struct rebase_names rn = { txn->tx_txn, st->st_inodes, exp };
	uint8_t kbuf[REAL_KEY_LEN];
	struct store_inode rec;
	uint64_t ino = 0;
	int r, rc;

	while ((r = store_next_ino(txn, exp, ino, &ino)) == 0) {
		r = store_get(txn, exp, ino, &rec);
		if (r < 0)
			return r;
		if (rec.si_branch < nw)
			continue;
		if (rec.si_type != S_IFDIR >> 12) {
			r = store_delete(txn, exp, ino);
			if (r < 0)
				return r;
			continue;
		}
		r = stally_notes_reserve(&txn->tx_tally, 2);
		if (r < 0)
			return r;
		stally_note(&txn->tx_tally, exp, rec.si_branch, -1);
		stally_note(&txn->tx_tally, exp, 0, 1);
		rec.si_branch = 0;
		rec.si_real_ino = ino == STORE_ROOT_INO ? root_real : 0;
		rec.si_real_id = 0;
		/* No reals entry for (0, 0), nobody's copy. The sweep below drops the old one. */
		r = rec_put(txn, exp, &rec, strlen(rec.si_name), 0);
		if (r < 0)
			return r;
	}
	if (r != -ENOENT)
		return r;
	rc = store_sweep(txn->tx_txn, st->st_reals, exp, real_key(kbuf, exp, (uint8_t)nw, 0),
			 NULL, NULL);
	if (rc == 0)
		rc = store_sweep(txn->tx_txn, st->st_names, exp, ino_key(kbuf, exp, 0),
				 rebase_dangling_name, &rn);
	r = store_errno(st, rc, "rebase sweep");
	if (r == 0 && nw == 0) {
		r = store_get(txn, exp, STORE_ROOT_INO, &rec);
		if (r == 0)
			r = rec_index(txn, exp, &rec, 0);
	}
	return r;
}

int store_rebind_export(struct store *st, const char *name, const struct store_branch_id *branches,
			int nbranches, int nwritable, uint16_t *export_id, char *err, size_t errlen)
{
	struct store_txn *txn = NULL;
	void *keybuf = NULL, *prevbuf = NULL;
	char *was = NULL, *now = NULL;
	uint8_t *buf = NULL, *old = NULL;
	MDB_val key, prevkey, val;
	size_t vallen;
	uint16_t id;
	int r;

	r = binding_validate(name, branches, nbranches, &vallen, err, errlen);
	if (r < 0)
		return r;
	if (nwritable < 0 || nwritable > nbranches) {
		err_set(err, errlen, "export %s: %d writable branches of %d (internal error)", name,
			nwritable, nbranches);
		return -EINVAL;
	}
	keybuf = binding_key(META_EXPORT, name, &key);
	prevbuf = binding_key(META_EXPORT_PREV, name, &prevkey);
	buf = malloc(vallen);
	r = -ENOMEM;
	if (!keybuf || !prevbuf || !buf)
		goto fail;
	r = store_begin(st, true, &txn);
	if (r < 0)
		goto fail;
	r = store_errno(st, mdb_get(txn->tx_txn, st->st_meta, &key, &val), "export binding read");
	if (r == -ENOENT) {
		store_abort(txn);
		txn = NULL;
		r = store_bind_export(st, name, branches, nbranches, export_id, err, errlen);
		goto out;
	}
	if (r < 0)
		goto fail;
	if (binding_check(&val) < 0) {
		err_set(err, errlen, "export %s: its record in the inode map in %s is damaged; "
			"start with an empty --state directory", name, st->st_dir);
		r = -EIO;
		goto out;
	}
	id = be16_get(val.mv_data);
	if (binding_compare(st, name, &val, branches, nbranches, err, errlen) == 0) {
		*export_id = id;
		r = 0;
		goto out;
	}
	r = binding_compare_writable(st, name, &val, branches, nbranches, nwritable, err, errlen);
	if (r < 0)
		goto out;
	was = binding_stored_paths(&val);
	/*
	 * val points into the map, maybe into a page this transaction is writing: LMDB must
	 * not be handed it to write.
	 */
	old = malloc(val.mv_size);
	if (!old) {
		r = -ENOMEM;
		goto fail;
	}
	memcpy(old, val.mv_data, val.mv_size);
	val.mv_data = old;
	r = store_errno(st, mdb_put(txn->tx_txn, st->st_meta, &prevkey, &val, 0),
			"export binding write");
	if (r == 0) {
		binding_encode(buf, id, branches, nbranches);
		val = (MDB_val){ .mv_size = vallen, .mv_data = buf };
		r = store_errno(st, mdb_put(txn->tx_txn, st->st_meta, &key, &val, 0),
				"export binding write");
	}
	if (r == 0)
		r = rebase_records(txn, id, nwritable, branches[0].sb_root_ino);
	if (r < 0)
		goto fail;
	r = store_commit(txn);
	txn = NULL;
	if (r < 0)
		goto fail;
	/* Its records are counted afresh, over the new stack (store_tally_start). */
	stally_forget(&st->st_tally, id);
	now = binding_given_paths(branches, nbranches);
	log_info("export %s: moved to the branches %s (a new base below its %d writable "
		 "branch%s; were %s): files of the old base are stale now", name, now ? now : "?",
		 nwritable, nwritable == 1 ? "" : "es", was ? was : "?");
	*export_id = id;
	goto out;
fail:
	err_set(err, errlen, "cannot move export %s to its new branches in the inode map in %s: "
		"%s; free space or fix permissions there", name, st->st_dir, strerror(-r));
out:
	store_abort(txn);
	free(keybuf);
	free(prevbuf);
	free(buf);
	free(old);
	free(was);
	free(now);
	return r;
}

int store_export_stack(struct store *st, const char *name, bool previous, char ***paths, int *n)
{
	struct store_txn *txn;
	const uint8_t *p, *end;
	const char *path;
	char **out = NULL;
	void *keybuf;
	MDB_val key, val;
	uint64_t root;
	size_t len;
	int r, k = 0, count = 0;

	*paths = NULL;
	*n = 0;
	keybuf = binding_key(previous ? META_EXPORT_PREV : META_EXPORT, name, &key);
	if (!keybuf)
		return -ENOMEM;
	r = store_begin(st, false, &txn);
	if (r < 0) {
		free(keybuf);
		return r;
	}
	r = store_errno(st, mdb_get(txn->tx_txn, st->st_meta, &key, &val), "export binding read");
	if (r == 0 && (count = binding_check(&val)) < 0)
		r = store_corrupt(st, "export binding", 0, 0);
	if (r == 0 && !(out = calloc((size_t)count, sizeof(*out))))
		r = -ENOMEM;
	p = r == 0 ? (const uint8_t *)val.mv_data + 3 : NULL;
	end = r == 0 ? (const uint8_t *)val.mv_data + val.mv_size : NULL;
	for (; r == 0 && k < count; k++) {
		binding_next(&p, end, &path, &len, &root);
		out[k] = strndup(path, len);
		if (!out[k])
			r = -ENOMEM;
	}
	store_abort(txn);
	free(keybuf);
	if (r < 0) {
		store_export_stack_free(out, k);
		return r;
	}
	*paths = out;
	*n = count;
	return 0;
}

void store_export_stack_free(char **paths, int n)
{
	for (int i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

/* ---- bases set at run time ---- */

#define META_BASE_SET "base-set/"

int store_base_set(struct store *st, const char *name, const char *set_lowers,
		   const char *config_lowers)
{
	struct store_txn *txn;
	size_t a = set_lowers ? strlen(set_lowers) : 0, b = config_lowers ? strlen(config_lowers) : 0;
	char *value = NULL;
	void *keybuf;
	MDB_val key, val;
	int r;

	keybuf = binding_key(META_BASE_SET, name, &key);
	if (!keybuf)
		return -ENOMEM;
	r = store_begin(st, true, &txn);
	if (r < 0) {
		free(keybuf);
		return r;
	}
	if (set_lowers) {
		value = malloc(a + 1 + b);
		if (!value) {
			r = -ENOMEM;
		} else {
			memcpy(value, set_lowers, a + 1);
			memcpy(value + a + 1, config_lowers, b);
			val = (MDB_val){ .mv_size = a + 1 + b, .mv_data = value };
			r = store_errno(st, mdb_put(txn->tx_txn, st->st_meta, &key, &val, 0),
					"base write");
		}
	} else {
		r = mdb_del(txn->tx_txn, st->st_meta, &key, NULL);
		r = r == MDB_NOTFOUND ? 0 : store_errno(st, r, "base write");
	}
	if (r == 0)
		r = store_commit(txn);
	else
		store_abort(txn);
	free(value);
	free(keybuf);
	return r;
}

int store_base_get(struct store *st, const char *name, char **set_lowers, char **config_lowers)
{
	struct store_txn *txn;
	const char *v, *nul;
	void *keybuf;
	MDB_val key, val;
	int r;

	*set_lowers = *config_lowers = NULL;
	keybuf = binding_key(META_BASE_SET, name, &key);
	if (!keybuf)
		return -ENOMEM;
	r = store_begin(st, false, &txn);
	if (r == 0) {
		r = store_errno(st, mdb_get(txn->tx_txn, st->st_meta, &key, &val), "base read");
		v = r == 0 ? val.mv_data : NULL;
		nul = v ? memchr(v, '\0', val.mv_size) : NULL;
		if (r == 0 && !nul)
			r = store_corrupt(st, "base record", 0, 0);
		if (r == 0) {
			*set_lowers = strndup(v, (size_t)(nul - v));
			*config_lowers = strndup(nul + 1, val.mv_size - (size_t)(nul + 1 - v));
			if (!*set_lowers || !*config_lowers)
				r = -ENOMEM;
		}
		store_abort(txn);
	}
	free(keybuf);
	if (r < 0) {
		free(*set_lowers);
		free(*config_lowers);
		*set_lowers = *config_lowers = NULL;
	}
	return r;
}
