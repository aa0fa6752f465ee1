/* Unit tests for the persistent inode map (store/store.c). */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <semaphore.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "blocking.h"
#include "log.h"
#include "store.h"
#include "../rmtree.h"

/* Fallbacks so this test links on its own; the real logger wins when it is linked in. */
__attribute__((weak)) void log_init(bool to_stderr, const char *ident)
{
	(void)to_stderr;
	(void)ident;
}

__attribute__((weak)) void log_msg(int priority, const char *fmt, ...)
{
	va_list ap;

	(void)priority;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

struct fixture {
	char dir[64];
	char state[96];
	bool mounted;            /* state is a tmpfs of the test's */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_store.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->mounted)
		umount2(f->state, MNT_DETACH);
	rm_tree(f->dir);
	free(f);
	return 0;
}

static struct store *open_ok(const struct fixture *f)
{
	struct store *st = NULL;
	char err[512] = "";
	int rc = store_open(f->state, &st, err, sizeof(err));

	if (rc != 0)
		fail_msg("store_open: %d %s", rc, err);
	return st;
}

static const struct store_branch_id stack_ab[] = {
	{ .sb_path = "/a", .sb_root_ino = 11 },
	{ .sb_path = "/b", .sb_root_ino = 22 },
};

static uint16_t bind_ok(struct store *st, const char *name, const struct store_branch_id *br, int n)
{
	char err[512] = "";
	uint16_t id = 0;
	int rc = store_bind_export(st, name, br, n, &id, err, sizeof(err));

	if (rc != 0)
		fail_msg("store_bind_export: %d %s", rc, err);
	return id;
}

static struct store_inode make_rec(uint64_t parent, const char *name, uint8_t type, uint8_t branch,
				   uint64_t real)
{
	struct store_inode r = { .si_parent = parent, .si_type = type, .si_branch = branch,
				 .si_real_ino = real };

	snprintf(r.si_name, sizeof(r.si_name), "%s", name);
	return r;
}

static uint64_t insert_one(struct store *st, uint16_t exp, uint64_t parent, const char *name,
			   uint8_t branch, uint64_t real)
{
	struct store_txn *txn;
	struct store_inode r = make_rec(parent, name, 8, branch, real);

	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_insert(txn, exp, &r), 0);
	assert_int_equal(store_commit(txn), 0);
	return r.si_ino;
}

/* Export exp's count in branch b, which must be kept. */
static uint64_t tally_of(struct store *st, uint16_t exp, int b)
{
	uint64_t n = UINT64_MAX;

	assert_int_equal(store_tally(st, exp, b, &n), 0);
	return n;
}

static void test_open_creates_private_dir(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct stat sb;
	char path[160];

	assert_int_equal(stat(f->state, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/inodes.mdb", f->state);
	assert_int_equal(stat(path, &sb), 0);
	snprintf(path, sizeof(path), "%s/lock", f->state);
	assert_int_equal(stat(path, &sb), 0);
	store_close(st);
}

/* The meta "schema" value of the map in dir, after writing set (be32) if not 0. */
static uint32_t raw_schema(const char *dir, uint32_t set)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_val key = { .mv_size = 6, .mv_data = "schema" }, val;
	uint8_t buf[4] = { set >> 24, set >> 16, set >> 8, set };
	char path[256];
	uint32_t v;

	snprintf(path, sizeof(path), "%s/inodes.mdb", dir);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_set_mapsize(env, 1u << 30), 0);
	assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	if (set) {
		val = (MDB_val){ .mv_size = 4, .mv_data = buf };
		assert_int_equal(mdb_put(txn, meta, &key, &val, 0), 0);
	}
	assert_int_equal(mdb_get(txn, meta, &key, &val), 0);
	assert_int_equal(val.mv_size, 4);
	v = (uint32_t)((const uint8_t *)val.mv_data)[0] << 24 |
	    (uint32_t)((const uint8_t *)val.mv_data)[1] << 16 |
	    (uint32_t)((const uint8_t *)val.mv_data)[2] << 8 | ((const uint8_t *)val.mv_data)[3];
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	return v;
}

/*
 * A map of schema 1 (records without identity) opens, keeps its records, and is marked
 * schema 2, which servers that cannot read identities refuse.
 */
static void test_schema_upgrade(void **state)
{
	struct fixture *f = *state;
	struct store_inode rec;
	struct store_txn *txn;
	struct store *st = open_ok(f);
	uint64_t ino;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	ino = insert_one(st, 1, STORE_ROOT_INO, "old", 1, 4242);
	store_close(st);
	assert_int_equal(raw_schema(f->state, 0), 2);
	assert_int_equal(raw_schema(f->state, 1), 1);

	st = open_ok(f);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, ino, &rec), 0);
	assert_string_equal(rec.si_name, "old");
	assert_int_equal(rec.si_real_id, 0);
	store_abort(txn);
	store_close(st);
	assert_int_equal(raw_schema(f->state, 0), 2);
}

/*
 * A record keeps its copy's identity across a reopen; one without (as every record of a
 * map made before identities were kept reads) reads as 0; and moving a record to another
 * copy without naming that copy's identity forgets the old one.
 */
static void test_real_identity(void **state)
{
	struct fixture *f = *state;
	struct store_inode with = make_rec(STORE_ROOT_INO, "with", 8, 1, 77);
	struct store_inode without = make_rec(STORE_ROOT_INO, "without", 8, 1, 78);
	struct store_inode rec;
	struct store_txn *txn;
	struct store *st = open_ok(f);

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	with.si_real_id = 0x1234567890abcdefull;
	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_insert(txn, 1, &with), 0);
	assert_int_equal(store_insert(txn, 1, &without), 0);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);

	st = open_ok(f);
	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_get(txn, 1, with.si_ino, &rec), 0);
	assert_int_equal(rec.si_real_id, 0x1234567890abcdefull);
	assert_string_equal(rec.si_name, "with");
	assert_int_equal(store_get(txn, 1, without.si_ino, &rec), 0);
	assert_int_equal(rec.si_real_id, 0);
	assert_string_equal(rec.si_name, "without");
	/* The same copy renamed keeps its identity; another copy without one has none. */
	assert_int_equal(store_get(txn, 1, with.si_ino, &rec), 0);
	strcpy(rec.si_name, "renamed");
	assert_int_equal(store_update(txn, 1, &rec), 0);
	assert_int_equal(store_get(txn, 1, with.si_ino, &rec), 0);
	assert_int_equal(rec.si_real_id, 0x1234567890abcdefull);
	rec.si_branch = 0;
	rec.si_real_ino = 99;
	assert_int_equal(store_update(txn, 1, &rec), 0);
	assert_int_equal(store_get(txn, 1, with.si_ino, &rec), 0);
	assert_int_equal(rec.si_real_id, 0);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

static void test_reopen_keeps_everything(void **state)
{
	struct fixture *f = *state;
	uint8_t key1[STORE_KEY_LEN], key2[STORE_KEY_LEN], zero[STORE_KEY_LEN] = { 0 };
	struct store_branch_id other[] = { { .sb_path = "/srv/x", .sb_root_ino = 5 } };
	struct store_inode rec, root;
	struct store_txn *txn;
	struct store *st;
	uint64_t ino, found;

	st = open_ok(f);
	store_handle_key(st, key1);
	assert_memory_not_equal(key1, zero, STORE_KEY_LEN);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(bind_ok(st, "/other", other, 1), 2);
	ino = insert_one(st, 1, STORE_ROOT_INO, "hello", 1, 4242);
	assert_int_equal(ino, 2);
	store_close(st);

	st = open_ok(f);
	store_handle_key(st, key2);
	assert_memory_equal(key1, key2, STORE_KEY_LEN);
	assert_int_equal(bind_ok(st, "/other", other, 1), 2);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, ino, &rec), 0);
	assert_int_equal(rec.si_ino, ino);
	assert_int_equal(rec.si_parent, STORE_ROOT_INO);
	assert_int_equal(rec.si_branch, 1);
	assert_int_equal(rec.si_real_ino, 4242);
	assert_int_equal(rec.si_type, 8);
	assert_string_equal(rec.si_name, "hello");
	assert_int_not_equal(rec.si_gen, 0);

	/* The root of each export, created at first bind. */
	assert_int_equal(store_get(txn, 1, STORE_ROOT_INO, &root), 0);
	assert_int_equal(root.si_parent, STORE_ROOT_INO);
	assert_int_equal(root.si_type, S_IFDIR >> 12);
	assert_int_equal(root.si_branch, 0);
	assert_int_equal(root.si_real_ino, 11);
	assert_string_equal(root.si_name, "");
	assert_int_equal(store_find_real(txn, 1, 0, 11, &found), 0);
	assert_int_equal(found, STORE_ROOT_INO);
	assert_int_equal(store_get(txn, 2, STORE_ROOT_INO, &root), 0);
	assert_int_equal(root.si_real_ino, 5);
	assert_int_equal(store_get(txn, 3, STORE_ROOT_INO, &root), -ENOENT);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

static void test_second_open_is_refused(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f), *st2 = (struct store *)1;
	char err[512] = "", pid[32];
	int rc;

	rc = store_open(f->state, &st2, err, sizeof(err));
	assert_true(rc == -EWOULDBLOCK || rc == -EBUSY);
	assert_null(st2);
	assert_non_null(strstr(err, "in use"));
	assert_non_null(strstr(err, f->state));
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	assert_non_null(strstr(err, pid));
	store_close(st);

	/* Closing releases the lock. */
	st = open_ok(f);
	store_close(st);
}

static void test_bad_state_dir(void **state)
{
	struct fixture *f = *state;
	struct store *st = NULL;
	char err[512] = "", path[160];
	FILE *fp;

	/* A plain file where the directory should be. */
	fp = fopen(f->state, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(store_open(f->state, &st, err, sizeof(err)), -ENOTDIR);
	assert_null(st);
	assert_non_null(strstr(err, "not a directory"));
	assert_int_equal(unlink(f->state), 0);

	/* Only the last component is created. */
	snprintf(path, sizeof(path), "%s/missing/state", f->dir);
	assert_int_equal(store_open(path, &st, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "parent"));

	/* Garbage in place of the map: a clear refusal, no crash. */
	assert_int_equal(mkdir(f->state, 0700), 0);
	snprintf(path, sizeof(path), "%s/inodes.mdb", f->state);
	fp = fopen(path, "w");
	assert_non_null(fp);
	for (int i = 0; i < 3 * 4096; i++)
		fputc((i * 7919) & 0xff, fp);
	fclose(fp);
	err[0] = '\0';
	assert_true(store_open(f->state, &st, err, sizeof(err)) < 0);
	assert_null(st);
	assert_non_null(strstr(err, "inodes.mdb"));
	assert_non_null(strstr(err, "--state"));
}

static void test_bind_mismatch(void **state)
{
	struct fixture *f = *state;
	struct store_branch_id stack_cb[] = {
		{ .sb_path = "/c", .sb_root_ino = 33 },
		{ .sb_path = "/b", .sb_root_ino = 22 },
	};
	struct store_branch_id stack_ab_moved[] = {
		{ .sb_path = "/a", .sb_root_ino = 11 },
		{ .sb_path = "/b", .sb_root_ino = 99 },
	};
	struct store_branch_id none[] = { { .sb_path = NULL, .sb_root_ino = 1 } };
	struct store *st = open_ok(f);
	struct store_inode root;
	struct store_txn *txn;
	char err[512] = "";
	uint16_t id = 77;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);

	assert_int_equal(store_bind_export(st, "/union", stack_cb, 2, &id, err, sizeof(err)), -EINVAL);
	assert_int_equal(id, 77);
	assert_non_null(strstr(err, "export /union"));
	assert_non_null(strstr(err, "/a:/b"));
	assert_non_null(strstr(err, "/c:/b"));
	assert_non_null(strstr(err, f->state));
	assert_non_null(strstr(err, "empty --state"));

	assert_int_equal(store_bind_export(st, "/union", stack_ab, 1, &id, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/a:/b"));

	err[0] = '\0';
	assert_int_equal(store_bind_export(st, "/union", stack_ab_moved, 2, &id, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "different directory"));
	assert_non_null(strstr(err, "99"));

	assert_int_equal(store_bind_export(st, "/union", stack_ab, 0, &id, err, sizeof(err)), -EINVAL);
	assert_int_equal(store_bind_export(st, "/union", none, 1, &id, err, sizeof(err)), -EINVAL);
	assert_int_equal(store_bind_export(st, "", stack_ab, 2, &id, err, sizeof(err)), -EINVAL);
	store_close(st);

	/* Nothing was written: the binding, the root and the export counter are unchanged. */
	st = open_ok(f);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, STORE_ROOT_INO, &root), 0);
	assert_int_equal(root.si_real_ino, 11);
	store_abort(txn);
	assert_int_equal(bind_ok(st, "/next", stack_cb, 2), 2);
	store_close(st);
}

static void test_records_and_indexes(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_inode a, b, got;
	struct store_txn *txn;
	uint64_t ino;
	uint32_t gen;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, true, &txn), 0);

	a = make_rec(STORE_ROOT_INO, "a", 4, 1, 100);
	assert_int_equal(store_insert(txn, 1, &a), 0);
	assert_int_equal(a.si_ino, 2);
	assert_int_not_equal(a.si_gen, 0);
	b = make_rec(STORE_ROOT_INO, "b", 8, 1, 101);
	assert_int_equal(store_insert(txn, 1, &b), 0);
	assert_int_equal(b.si_ino, 3);

	assert_int_equal(store_get(txn, 1, a.si_ino, &got), 0);
	assert_int_equal(got.si_gen, a.si_gen);
	assert_string_equal(got.si_name, "a");
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "a", &ino), 0);
	assert_int_equal(ino, a.si_ino);
	assert_int_equal(store_find_real(txn, 1, 1, 100, &ino), 0);
	assert_int_equal(ino, a.si_ino);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "nope", &ino), -ENOENT);
	assert_int_equal(store_find_name(txn, 2, STORE_ROOT_INO, "a", &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 0, 100, &ino), -ENOENT);
	assert_int_equal(store_get(txn, 1, 999, &got), -ENOENT);

	/* Rename a into b's directory and move it to branch 0 (a copy-up). */
	gen = a.si_gen;
	a.si_parent = b.si_ino;
	strcpy(a.si_name, "a2");
	a.si_branch = 0;
	a.si_real_ino = 200;
	a.si_gen = 0;
	assert_int_equal(store_update(txn, 1, &a), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "a", &ino), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, b.si_ino, "a2", &ino), 0);
	assert_int_equal(ino, a.si_ino);
	assert_int_equal(store_find_real(txn, 1, 1, 100, &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 0, 200, &ino), 0);
	assert_int_equal(ino, a.si_ino);
	assert_int_equal(store_get(txn, 1, a.si_ino, &got), 0);
	assert_int_equal(got.si_gen, gen);
	assert_int_equal(got.si_parent, b.si_ino);
	assert_string_equal(got.si_name, "a2");
	got.si_ino = 999;
	assert_int_equal(store_update(txn, 1, &got), -ENOENT);

	/* A second name (hard link) and its removal. */
	assert_int_equal(store_add_name(txn, 1, STORE_ROOT_INO, "link", b.si_ino), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "link", &ino), 0);
	assert_int_equal(ino, b.si_ino);
	assert_int_equal(store_add_name(txn, 1, STORE_ROOT_INO, "dangling", 999), -ENOENT);
	assert_int_equal(store_add_name(txn, 1, STORE_ROOT_INO, "", b.si_ino), -EINVAL);
	assert_int_equal(store_del_name(txn, 1, STORE_ROOT_INO, "link"), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "link", &ino), -ENOENT);
	assert_int_equal(store_del_name(txn, 1, STORE_ROOT_INO, "link"), -ENOENT);
	assert_int_equal(store_get(txn, 1, b.si_ino, &got), 0);

	/* Delete removes the record and its own index entries. */
	assert_int_equal(store_delete(txn, 1, a.si_ino), 0);
	assert_int_equal(store_get(txn, 1, a.si_ino, &got), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, b.si_ino, "a2", &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 0, 200, &ino), -ENOENT);
	assert_int_equal(store_delete(txn, 1, a.si_ino), -ENOENT);
	assert_int_equal(store_commit(txn), 0);

	/* The changes were committed. */
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, a.si_ino, &got), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "b", &ino), 0);
	assert_int_equal(ino, b.si_ino);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

static void test_index_entries_taken_over(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_inode d, e;
	struct store_txn *txn;
	uint64_t ino;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, true, &txn), 0);
	d = make_rec(STORE_ROOT_INO, "shared", 8, 1, 500);
	assert_int_equal(store_insert(txn, 1, &d), 0);
	/* e replaces d's name and claims d's real inode. */
	e = make_rec(STORE_ROOT_INO, "shared", 8, 1, 500);
	assert_int_equal(store_insert(txn, 1, &e), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "shared", &ino), 0);
	assert_int_equal(ino, e.si_ino);

	/* Moving or deleting d must not take e's entries with it. */
	strcpy(d.si_name, "d2");
	d.si_real_ino = 501;
	assert_int_equal(store_update(txn, 1, &d), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "shared", &ino), 0);
	assert_int_equal(ino, e.si_ino);
	assert_int_equal(store_find_real(txn, 1, 1, 500, &ino), 0);
	assert_int_equal(ino, e.si_ino);
	assert_int_equal(store_add_name(txn, 1, STORE_ROOT_INO, "d2", e.si_ino), 0);
	assert_int_equal(store_delete(txn, 1, d.si_ino), 0);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "d2", &ino), 0);
	assert_int_equal(ino, e.si_ino);
	assert_int_equal(store_find_real(txn, 1, 1, 501, &ino), -ENOENT);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

static void test_misuse(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_inode r = make_rec(STORE_ROOT_INO, "x", 8, 0, 1);
	struct store_txn *txn;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_insert(txn, 1, &r), -EINVAL);
	assert_int_equal(store_update(txn, 1, &r), -EINVAL);
	assert_int_equal(store_delete(txn, 1, 1), -EINVAL);
	assert_int_equal(store_add_name(txn, 1, 1, "x", 1), -EINVAL);
	assert_int_equal(store_del_name(txn, 1, 1, "x"), -EINVAL);
	store_abort(txn);

	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_insert(txn, 9, &r), -EINVAL);
	store_abort(txn);
	store_abort(NULL);
	store_close(NULL);
	store_close(st);
}

static void test_name_length(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_inode r = make_rec(STORE_ROOT_INO, "", 8, 0, 1), got;
	struct store_txn *txn;
	char longname[STORE_NAME_MAX + 2];
	uint64_t ino;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, true, &txn), 0);

	memset(r.si_name, 'n', STORE_NAME_MAX);
	r.si_name[STORE_NAME_MAX] = '\0';
	assert_int_equal(store_insert(txn, 1, &r), 0);
	assert_int_equal(store_get(txn, 1, r.si_ino, &got), 0);
	assert_int_equal(strlen(got.si_name), STORE_NAME_MAX);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, r.si_name, &ino), 0);
	assert_int_equal(ino, r.si_ino);

	/* No terminator inside the array: 256 bytes of name. */
	memset(r.si_name, 'm', sizeof(r.si_name));
	assert_int_equal(store_insert(txn, 1, &r), -ENAMETOOLONG);
	r.si_ino = ino;
	assert_int_equal(store_update(txn, 1, &r), -ENAMETOOLONG);

	memset(longname, 'l', STORE_NAME_MAX + 1);
	longname[STORE_NAME_MAX + 1] = '\0';
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, longname, &ino), -ENAMETOOLONG);
	assert_int_equal(store_add_name(txn, 1, STORE_ROOT_INO, longname, 2), -ENAMETOOLONG);
	assert_int_equal(store_del_name(txn, 1, STORE_ROOT_INO, longname), -ENAMETOOLONG);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

static void test_inos_never_reused(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *txn;
	uint64_t a, b, c;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	a = insert_one(st, 1, STORE_ROOT_INO, "a", 0, 1000);
	b = insert_one(st, 1, STORE_ROOT_INO, "b", 0, 1001);
	assert_true(b > a);
	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_delete(txn, 1, b), 0);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);

	st = open_ok(f);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	c = insert_one(st, 1, STORE_ROOT_INO, "b", 0, 1001);
	assert_true(c > b);

	/* An aborted insert commits nothing, so its ino was never visible to anyone. */
	struct store_inode r = make_rec(STORE_ROOT_INO, "z", 8, 0, 7);
	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_insert(txn, 1, &r), 0);
	store_abort(txn);
	assert_true(insert_one(st, 1, STORE_ROOT_INO, "z", 0, 7) > c);
	store_close(st);
}

/*
 * Read transactions are kept for the next reader once done: a renewed one sees every
 * commit made since, and more readers at once than are kept all work.
 */
static void test_readers_renewed(void **state)
{
	enum { NR = 200 };
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *rd[NR];
	uint64_t n;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < NR; i++)
			assert_int_equal(store_begin(st, false, &rd[i]), 0);
		for (int i = 0; i < NR; i++) {
			assert_int_equal(store_count(rd[i], 1, &n), 0);
			assert_int_equal(n, 1 + (uint64_t)round);
			if (i % 2)
				assert_int_equal(store_commit(rd[i]), 0);
			else
				store_abort(rd[i]);
		}
		insert_one(st, 1, STORE_ROOT_INO, round == 0 ? "a" : round == 1 ? "b" : "c", 0,
			   1000 + (uint64_t)round);
	}
	assert_int_equal(store_begin(st, false, &rd[0]), 0);
	assert_int_equal(store_count(rd[0], 1, &n), 0);
	assert_int_equal(n, 4);
	store_abort(rd[0]);
	store_close(st);
}

static void test_count(void **state)
{
	struct fixture *f = *state;
	struct store_branch_id other[] = { { .sb_path = "/o", .sb_root_ino = 3 } };
	struct store *st = open_ok(f);
	struct store_txn *txn;
	uint64_t n;
	char name[16];

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(bind_ok(st, "/other", other, 1), 2);
	assert_int_equal(store_begin(st, true, &txn), 0);
	for (int i = 0; i < 50; i++) {
		struct store_inode r;
		snprintf(name, sizeof(name), "f%d", i);
		r = make_rec(STORE_ROOT_INO, name, 8, 0, 100 + (uint64_t)i);
		assert_int_equal(store_insert(txn, i % 5 ? 1 : 2, &r), 0);
	}
	assert_int_equal(store_count(txn, 1, &n), 0);
	assert_int_equal(n, 1 + 40);
	assert_int_equal(store_count(txn, 2, &n), 0);
	assert_int_equal(n, 1 + 10);
	assert_int_equal(store_count(txn, 3, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
}

/* store_each_ino's callback: keeps the inos seen, stops after want of them (0: never). */
struct each_seen {
	uint64_t es_inos[64];
	int es_n;
	int es_stop_after;
};

static int each_keep(uint64_t ino, void *arg)
{
	struct each_seen *e = arg;

	if (e->es_n < 64)
		e->es_inos[e->es_n] = ino;
	e->es_n++;
	return e->es_stop_after && e->es_n == e->es_stop_after ? 7 : 0;
}

/* One cursor pass sees every ino of one export, ascending, and nothing of another. */
static void test_each_ino(void **state)
{
	struct fixture *f = *state;
	struct store_branch_id other[] = { { .sb_path = "/o", .sb_root_ino = 3 } };
	struct store *st = open_ok(f);
	struct store_txn *txn;
	struct each_seen seen = { 0 }, stopped = { .es_stop_after = 3 }, none = { 0 };
	char name[16];

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(bind_ok(st, "/other", other, 1), 2);
	assert_int_equal(store_begin(st, true, &txn), 0);
	for (int i = 0; i < 50; i++) {
		struct store_inode r;

		snprintf(name, sizeof(name), "f%d", i);
		r = make_rec(STORE_ROOT_INO, name, 8, 0, 100 + (uint64_t)i);
		assert_int_equal(store_insert(txn, i % 5 ? 1 : 2, &r), 0);
	}
	assert_int_equal(store_commit(txn), 0);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_each_ino(txn, 1, each_keep, &seen), 0);
	assert_int_equal(seen.es_n, 1 + 40);
	assert_int_equal(seen.es_inos[0], STORE_ROOT_INO);
	for (int i = 1; i < seen.es_n; i++)
		assert_true(seen.es_inos[i] > seen.es_inos[i - 1]);
	/* A nonzero answer of the callback ends the walk and is returned. */
	assert_int_equal(store_each_ino(txn, 2, each_keep, &stopped), 7);
	assert_int_equal(stopped.es_n, 3);
	assert_int_equal(store_each_ino(txn, 3, each_keep, &none), 0);
	assert_int_equal(none.es_n, 0);
	store_abort(txn);
	store_close(st);
}

struct worker {
	struct store *w_store;
	int w_id;
	int w_failures;
	uint64_t w_inos[50];
};

/* Each worker commits its own inserts and reads them back through fresh read txns. */
static void *worker_run(void *arg)
{
	struct worker *w = arg;
	struct store_inode r, got;
	struct store_txn *txn;
	char name[32];
	uint64_t ino;

	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "w%d-%d", w->w_id, i);
		r = make_rec(STORE_ROOT_INO, name, 8, 0, (uint64_t)(w->w_id * 1000 + i));
		if (store_begin(w->w_store, true, &txn) || store_insert(txn, 1, &r) ||
		    store_commit(txn)) {
			w->w_failures++;
			continue;
		}
		w->w_inos[i] = r.si_ino;
		if (store_begin(w->w_store, false, &txn)) {
			w->w_failures++;
			continue;
		}
		if (store_find_name(txn, 1, STORE_ROOT_INO, name, &ino) || ino != r.si_ino ||
		    store_get(txn, 1, ino, &got) || strcmp(got.si_name, name) != 0)
			w->w_failures++;
		store_commit(txn);
	}
	return NULL;
}

static void test_threads(void **state)
{
	enum { NW = 4 };
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct worker w[NW];
	pthread_t th[NW];
	struct store_txn *snap;
	uint64_t n;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	/* A read txn opened here and ended on another thread's watch (MDB_NOTLS). */
	assert_int_equal(store_begin(st, false, &snap), 0);
	for (int i = 0; i < NW; i++) {
		w[i] = (struct worker){ .w_store = st, .w_id = i };
		assert_int_equal(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
	}
	for (int i = 0; i < NW; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* The snapshot still sees the map as it was. */
	assert_int_equal(store_count(snap, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_commit(snap), 0);

	for (int i = 0; i < NW; i++)
		assert_int_equal(w[i].w_failures, 0);
	/* Every ino was handed out exactly once. */
	for (int i = 0; i < NW * 50; i++)
		for (int j = i + 1; j < NW * 50; j++)
			assert_int_not_equal(w[i / 50].w_inos[i % 50], w[j / 50].w_inos[j % 50]);
	assert_int_equal(store_begin(st, false, &snap), 0);
	assert_int_equal(store_count(snap, 1, &n), 0);
	assert_int_equal(n, 1 + NW * 50);
	store_abort(snap);
	store_close(st);
}

/* Changes share parent transactions (group commit): an aborted one must not ride along. */
static void test_group_abort_isolated(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *keep, *drop, *t;
	struct store_inode a, b;
	uint64_t ino;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	for (int i = 0; i < 50; i++) {
		char an[32], bn[32];

		snprintf(an, sizeof(an), "dropped-%d", i);
		snprintf(bn, sizeof(bn), "kept-%d", i);
		a = make_rec(STORE_ROOT_INO, an, 8, 0, (uint64_t)(5000 + i));
		b = make_rec(STORE_ROOT_INO, bn, 8, 0, (uint64_t)(6000 + i));
		assert_int_equal(store_begin(st, true, &drop), 0);
		assert_int_equal(store_insert(drop, 1, &a), 0);
		store_abort(drop);
		assert_int_equal(store_begin(st, true, &keep), 0);
		assert_int_equal(store_insert(keep, 1, &b), 0);
		assert_int_equal(store_commit(keep), 0);
	}
	store_close(st);
	st = open_ok(f);
	assert_int_equal(store_begin(st, false, &t), 0);
	for (int i = 0; i < 50; i++) {
		char an[32], bn[32];

		snprintf(an, sizeof(an), "dropped-%d", i);
		snprintf(bn, sizeof(bn), "kept-%d", i);
		assert_int_equal(store_find_name(t, 1, STORE_ROOT_INO, an, &ino), -ENOENT);
		assert_int_equal(store_find_name(t, 1, STORE_ROOT_INO, bn, &ino), 0);
	}
	store_abort(t);
	store_close(st);
}

static void count_undo(void *arg)
{
	(*(int *)arg)++;
}

/*
 * A change's undo runs when the map does not take the change (here: it is aborted), before
 * store_abort returns and exactly once; a change the map took never runs its undo, its
 * store closed or not. (Failed commits: tests/integration/test_nospc.)
 */
static void test_undo_only_when_dropped(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_undo u1, u2, u3;
	struct store_txn *t;
	struct store_inode a = make_rec(STORE_ROOT_INO, "undone", 8, 0, 7001);
	struct store_inode b = make_rec(STORE_ROOT_INO, "kept", 8, 0, 7002);
	int dropped = 0, kept = 0;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	u1 = (struct store_undo){ .su_fn = count_undo, .su_arg = &dropped };
	u2 = (struct store_undo){ .su_fn = count_undo, .su_arg = &dropped };
	u3 = (struct store_undo){ .su_fn = count_undo, .su_arg = &kept };
	assert_int_equal(store_begin(st, true, &t), 0);
	assert_int_equal(store_insert(t, 1, &a), 0);
	store_on_undo(t, &u1);
	store_on_undo(t, &u2);
	store_abort(t);
	assert_int_equal(dropped, 2);

	assert_int_equal(store_begin(st, true, &t), 0);
	assert_int_equal(store_insert(t, 1, &b), 0);
	store_on_undo(t, &u3);
	assert_int_equal(store_commit(t), 0);
	/* Another change in the next group must not run the committed one's undo either. */
	assert_int_equal(store_begin(st, true, &t), 0);
	store_abort(t);
	store_close(st);
	assert_int_equal(kept, 0);
	assert_int_equal(dropped, 2);
}

/* Two changes in one group commit that fails: undone newest first. */
struct undo_order {
	char uo_seq[8];
	pthread_mutex_t uo_lock;
};

struct undo_mark {
	struct undo_order *um_order;
	char um_name;
};

static void mark_undo(void *arg)
{
	struct undo_mark *m = arg;
	size_t n;

	pthread_mutex_lock(&m->um_order->uo_lock);
	n = strlen(m->um_order->uo_seq);
	if (n + 1 < sizeof(m->um_order->uo_seq))
		m->um_order->uo_seq[n] = m->um_name;
	pthread_mutex_unlock(&m->um_order->uo_lock);
}

static pthread_t second_thread;
static sem_t second_waits;

/* The second change's thread says when it waits for its turn (sgroup_begin). */
static void hook_enter(void)
{
	if (pthread_equal(pthread_self(), second_thread))
		sem_post(&second_waits);
}

static void hook_leave(void)
{
}

struct second_change {
	struct store *sc_st;
	struct undo_order *sc_order;
	int sc_rc;
};

static int insert_many(struct store_txn *t, const char *prefix, uint64_t real)
{
	for (int i = 0; i < 400; i++) {
		char name[STORE_NAME_MAX + 1];
		struct store_inode r;

		snprintf(name, sizeof(name), "%s-%d-%0200d", prefix, i, 0);
		r = make_rec(STORE_ROOT_INO, name, 8, 0, real + (uint64_t)i);
		if (store_insert(t, 1, &r) != 0)
			return -1;
	}
	return 0;
}

static void *second_main(void *arg)
{
	struct second_change *sc = arg;
	struct undo_mark m = { .um_order = sc->sc_order, .um_name = 'B' };
	struct store_undo u = { .su_fn = mark_undo, .su_arg = &m };
	struct store_txn *t;

	sc->sc_rc = store_begin(sc->sc_st, true, &t);
	if (sc->sc_rc != 0)
		return NULL;
	if (insert_many(t, "b", 20000) != 0) {
		store_abort(t);
		sc->sc_rc = -1;
		return NULL;
	}
	store_on_undo(t, &u);
	sc->sc_rc = store_commit(t);
	return NULL;
}

static void fill_fs(const char *dir)
{
	static char block[65536];
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/filler", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	while (write(fd, block, sizeof(block)) > 0)
		;
	while (write(fd, block, 1) == 1)
		;
	close(fd);
}

/*
 * Group commit on a full state file system: change A, then change B in the same parent
 * (B waits for its turn while A runs). The parent's commit fails; both changes get ENOSPC
 * and their undos run newest first, B before A, so a change is taken back before the one
 * it may have built on.
 */
static void test_failed_group_undone_newest_first(void **state)
{
	static const struct blocking_hooks hooks = { .bh_enter = hook_enter,
						     .bh_leave = hook_leave };
	struct fixture *f = *state;
	struct undo_order order = { .uo_lock = PTHREAD_MUTEX_INITIALIZER };
	struct undo_mark m = { .um_order = &order, .um_name = 'A' };
	struct store_undo u = { .su_fn = mark_undo, .su_arg = &m };
	struct second_change sc = { .sc_order = &order };
	struct store_txn *t;
	struct store *st;
	int rc;

	assert_int_equal(mkdir(f->state, 0700), 0);
	if (mount("test-store", f->state, "tmpfs", 0, "size=1m,mode=0700") < 0) {
		fprintf(stderr, "cannot mount a tmpfs (%s): needs root; skipped\n", strerror(errno));
		skip();
	}
	f->mounted = true;
	st = open_ok(f);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	fill_fs(f->state);
	assert_int_equal(sem_init(&second_waits, 0, 0), 0);
	blocking_set_hooks(&hooks);

	assert_int_equal(store_begin(st, true, &t), 0);
	assert_int_equal(insert_many(t, "a", 10000), 0);
	store_on_undo(t, &u);
	sc.sc_st = st;
	assert_int_equal(pthread_create(&second_thread, NULL, second_main, &sc), 0);
	sem_wait(&second_waits);
	rc = store_commit(t);
	pthread_join(second_thread, NULL);
	blocking_set_hooks(NULL);
	sem_destroy(&second_waits);
	/* Neither commit reached the disk: the counts still show the root alone. */
	assert_int_equal(tally_of(st, 1, 0), 1);
	assert_int_equal(tally_of(st, 1, 1), 0);
	store_close(st);
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(sc.sc_rc, -ENOSPC);
	assert_string_equal(order.uo_seq, "BA");
}

static const struct store_branch_id stack_abcdef[] = {
	{ .sb_path = "/a", .sb_root_ino = 11 }, { .sb_path = "/b", .sb_root_ino = 12 },
	{ .sb_path = "/c", .sb_root_ino = 13 }, { .sb_path = "/d", .sb_root_ino = 14 },
	{ .sb_path = "/e", .sb_root_ino = 15 }, { .sb_path = "/f", .sb_root_ino = 16 },
};

/*
 * Per-branch counts: counted from the map at start, moved by committed inserts, branch
 * moves and deletes, not by aborted ones, nor by updates that keep the branch; the same
 * when counted again after a reopen; cleared by unbinding; kept per export.
 */
static void test_tally(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *t;
	struct store_inode r;
	uint64_t a, b, c, n;
	uint16_t other;

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	other = bind_ok(st, "/other", stack_abcdef, 6);
	assert_int_equal(store_tally(st, 1, 0, &n), -ENOENT);
	/* Records made before counting starts are found by its pass (the root is in 0). */
	a = insert_one(st, 1, STORE_ROOT_INO, "a", 0, 100);
	b = insert_one(st, 1, STORE_ROOT_INO, "b", 1, 200);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	assert_int_equal(store_tally_start(st, other, 6), 0);
	assert_int_equal(tally_of(st, 1, 0), 2);
	assert_int_equal(tally_of(st, 1, 1), 1);
	assert_int_equal(store_tally(st, 1, 2, &n), -ENOENT);
	assert_int_equal(store_tally_start(st, 1, 3), -EINVAL);

	c = insert_one(st, 1, STORE_ROOT_INO, "c", 1, 300);
	assert_int_equal(tally_of(st, 1, 1), 2);
	/* Not committed yet: not counted; aborted: never. */
	assert_int_equal(store_begin(st, true, &t), 0);
	r = make_rec(STORE_ROOT_INO, "d", 8, 0, 400);
	assert_int_equal(store_insert(t, 1, &r), 0);
	assert_int_equal(store_delete(t, 1, b), 0);
	assert_int_equal(tally_of(st, 1, 0), 2);
	assert_int_equal(tally_of(st, 1, 1), 2);
	store_abort(t);
	assert_int_equal(tally_of(st, 1, 0), 2);
	assert_int_equal(tally_of(st, 1, 1), 2);

	/* One transaction: c moves to branch 0, a is renamed in place, b goes. */
	assert_int_equal(store_begin(st, true, &t), 0);
	assert_int_equal(store_get(t, 1, c, &r), 0);
	r.si_branch = 0;
	r.si_real_ino = 301;
	assert_int_equal(store_update(t, 1, &r), 0);
	assert_int_equal(store_get(t, 1, a, &r), 0);
	snprintf(r.si_name, sizeof(r.si_name), "a2");
	assert_int_equal(store_update(t, 1, &r), 0);
	assert_int_equal(store_delete(t, 1, b), 0);
	assert_int_equal(store_commit(t), 0);
	assert_int_equal(tally_of(st, 1, 0), 3);
	assert_int_equal(tally_of(st, 1, 1), 0);

	/* More branches in one transaction than it keeps notes for without allocating. */
	assert_int_equal(store_begin(st, true, &t), 0);
	for (int i = 0; i < 6; i++)
		for (int k = 0; k <= i; k++) {
			char name[16];

			snprintf(name, sizeof(name), "f%d.%d", i, k);
			r = make_rec(STORE_ROOT_INO, name, 8, (uint8_t)i, (uint64_t)(1000 + 10 * i + k));
			assert_int_equal(store_insert(t, other, &r), 0);
		}
	assert_int_equal(store_commit(t), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(tally_of(st, other, i), (uint64_t)(i + 1) + (i == 0));
	/* The other export's counts did not move. */
	assert_int_equal(tally_of(st, 1, 0), 3);

	/* A restart counts the same again. */
	store_close(st);
	st = open_ok(f);
	assert_int_equal(store_tally(st, 1, 0, &n), -ENOENT);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	assert_int_equal(store_tally_start(st, other, 6), 0);
	assert_int_equal(tally_of(st, 1, 0), 3);
	assert_int_equal(tally_of(st, 1, 1), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(tally_of(st, other, i), (uint64_t)(i + 1) + (i == 0));

	/* Unbound: every record gone, and so are the counts. */
	assert_int_equal(store_unbind_export(st, "/other"), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(tally_of(st, other, i), 0);
	assert_int_equal(tally_of(st, 1, 0), 3);
	store_close(st);
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * 100,000 files with 12-character names spread over 100 directories, inserted in hash
 * order with scattered real inode numbers (the worst order for B-tree fill), committed
 * at once: the map must stay well under 200 bytes per object, index entries included.
 * (Many large commits of random inserts cost more for a while, because LMDB copies every
 * page a commit touches; the server's small commits do not.)
 */
static void test_size_per_entry(void **state)
{
	enum { N = 100000 };
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *txn;
	struct store_inode got;
	struct timespec t0, t1, t2, t3;
	struct stat sb;
	char path[160];
	uint64_t n, ino;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, true, &txn), 0);
	for (int i = 0; i < N; i++) {
		struct store_inode r = { .si_parent = 2 + (uint64_t)(i % 100), .si_type = 8,
					 .si_branch = (uint8_t)(i & 1),
					 .si_real_ino = 1000000 + mix64((uint64_t)i) % 50000000 };
		snprintf(r.si_name, sizeof(r.si_name), "%012" PRIx64, mix64((uint64_t)i + N) >> 16);
		assert_int_equal(store_insert(txn, 1, &r), 0);
	}
	assert_int_equal(store_commit(txn), 0);
	store_close(st);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* Everything is there after a reopen, and counted by branch in one pass. */
	st = open_ok(f);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	clock_gettime(CLOCK_MONOTONIC, &t3);
	fprintf(stderr, "# counted %d records by branch in %.1f ms\n", N + 1,
		(double)(t3.tv_sec - t2.tv_sec) * 1e3 + (double)(t3.tv_nsec - t2.tv_nsec) / 1e6);
	assert_int_equal(tally_of(st, 1, 0), N / 2 + 1);
	assert_int_equal(tally_of(st, 1, 1), N / 2);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_count(txn, 1, &n), 0);
	assert_int_equal(n, N + 1);
	for (int i = 0; i < N; i += 997) {
		snprintf(path, sizeof(path), "%012" PRIx64, mix64((uint64_t)i + N) >> 16);
		assert_int_equal(store_find_name(txn, 1, 2 + (uint64_t)(i % 100), path, &ino), 0);
		assert_int_equal(store_get(txn, 1, ino, &got), 0);
		assert_string_equal(got.si_name, path);
		assert_int_equal(got.si_real_ino, 1000000 + mix64((uint64_t)i) % 50000000);
	}
	store_abort(txn);
	store_close(st);

	snprintf(path, sizeof(path), "%s/inodes.mdb", f->state);
	assert_int_equal(stat(path, &sb), 0);
	double per = (double)sb.st_blocks * 512 / N;
	printf("inode map: %d entries, %lld bytes allocated (%lld file size), %.1f bytes per "
	       "entry, %.2f s\n", N, (long long)sb.st_blocks * 512, (long long)sb.st_size, per,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	assert_true(per < 200);
}

/*
 * Unmapping the map's pages (store_trim) under a read transaction that is still in use:
 * the next reads fault the pages back in and see the same records.
 */
static void test_trim(void **state)
{
	enum { N = 20000 };
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *txn;
	struct store_inode got;
	uint64_t ino;
	char name[32];

	assert_int_equal(bind_ok(st, "/union", stack_ab, 2), 1);
	assert_int_equal(store_begin(st, true, &txn), 0);
	for (int i = 0; i < N; i++) {
		struct store_inode r = make_rec(STORE_ROOT_INO, "", 8, 1, 5000 + (uint64_t)i);

		snprintf(r.si_name, sizeof(r.si_name), "file%06d", i);
		assert_int_equal(store_insert(txn, 1, &r), 0);
	}
	assert_int_equal(store_commit(txn), 0);

	assert_int_equal(store_trim(st, SIZE_MAX), 0); /* within budget: nothing to do */
	assert_int_equal(store_begin(st, false, &txn), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < N; i += 7) {
			snprintf(name, sizeof(name), "file%06d", i);
			assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, name, &ino), 0);
			assert_int_equal(store_get(txn, 1, ino, &got), 0);
			assert_string_equal(got.si_name, name);
			assert_int_equal(got.si_real_ino, 5000 + (uint64_t)i);
		}
		if (pass == 0)
			assert_int_equal(store_trim(st, 0), 1);
	}
	store_abort(txn);
	store_close(st);
}

/* --- intents --- */

struct seen {
	uint64_t ino[200];
	int n;
	int keep_ino;                 /* fn returns 1 (keep) for this ino */
};

static int intent_seen(void *arg, const struct store_intent *in)
{
	struct seen *s = arg;

	assert_true(s->n < 200);
	s->ino[s->n++] = in->sn_ino;
	return (int)in->sn_ino == s->keep_ino;
}

static bool seen_has(const struct seen *s, uint64_t ino)
{
	for (int i = 0; i < s->n; i++)
		if (s->ino[i] == ino)
			return true;
	return false;
}

static void put_intent(struct store *st, uint16_t exp, uint64_t ino, int *slot)
{
	struct store_intent in = { .sn_op = STORE_INTENT_RENAME, .sn_exp = exp, .sn_ino = ino,
				   .sn_from = 1, .sn_to = 1, .sn_real_ino = ino + 1000 };

	snprintf(in.sn_from_name, sizeof(in.sn_from_name), "from%llu", (unsigned long long)ino);
	snprintf(in.sn_to_name, sizeof(in.sn_to_name), "to%llu", (unsigned long long)ino);
	*slot = store_intent_begin(st, &in);
	assert_true(*slot >= 0);
}

/*
 * Intents not ended survive the process (the next open sees them, of their export only),
 * ended ones do not; more intents in flight than the first slots hold; a kept intent is seen
 * again at the next open, a dropped one is not.
 */
static void test_intents_survive_reopen(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct seen s = { .keep_ino = 0 };
	int slot[150];

	for (int i = 0; i < 150; i++)
		put_intent(st, i < 100 ? 7 : 8, (uint64_t)i + 1, &slot[i]);
	for (int i = 0; i < 150; i += 2)
		store_intent_end(st, slot[i]);           /* every odd ino stays in flight */
	assert_int_equal(store_intent_recover(st, 9, intent_seen, &s), 0);
	assert_int_equal(s.n, 0);
	store_close(st);                                 /* the intents are written already */

	st = open_ok(f);
	s.keep_ino = 6;
	assert_int_equal(store_intent_recover(st, 7, intent_seen, &s), 0);
	assert_int_equal(s.n, 50);
	for (uint64_t ino = 1; ino <= 100; ino++)
		assert_int_equal(seen_has(&s, ino), ino % 2 == 0);
	/* a new change takes a free slot, never one still waiting for recovery */
	put_intent(st, 7, 500, &slot[0]);
	store_close(st);

	st = open_ok(f);
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_intent_recover(st, 7, intent_seen, &s), 0);
	assert_int_equal(s.n, 2);
	assert_true(seen_has(&s, 6) && seen_has(&s, 500));
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_intent_recover(st, 8, intent_seen, &s), 0);
	assert_int_equal(s.n, 25);
	assert_true(seen_has(&s, 102) && !seen_has(&s, 101));
	store_close(st);
}

/* ---- new bases (store_rebind_export) ---- */

static const struct store_branch_id stack_v1[] = {
	{ .sb_path = "/up", .sb_root_ino = 11 },
	{ .sb_path = "/v1", .sb_root_ino = 22 },
};
static const struct store_branch_id stack_v2[] = {
	{ .sb_path = "/up", .sb_root_ino = 11 },
	{ .sb_path = "/v2", .sb_root_ino = 33 },
};
static const struct store_branch_id stack_v3[] = {
	{ .sb_path = "/up", .sb_root_ino = 11 },
	{ .sb_path = "/v3", .sb_root_ino = 44 },
	{ .sb_path = "/v3b", .sb_root_ino = 45 },
};

static uint16_t rebind_ok(struct store *st, const char *name, const struct store_branch_id *br,
			  int n, int nw)
{
	char err[512] = "";
	uint16_t id = 0;
	int rc = store_rebind_export(st, name, br, n, nw, &id, err, sizeof(err));

	if (rc != 0)
		fail_msg("store_rebind_export: %d %s", rc, err);
	return id;
}

/* The recorded (or previous) stack of name, joined with ':'; "" when there is none. */
static void stack_of(struct store *st, const char *name, bool previous, char *out, size_t len)
{
	char **paths;
	int n, rc = store_export_stack(st, name, previous, &paths, &n);

	out[0] = '\0';
	if (rc == -ENOENT) {
		assert_null(paths);
		assert_int_equal(n, 0);
		return;
	}
	assert_int_equal(rc, 0);
	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		if (i)
			strncat(out, ":", len - strlen(out) - 1);
		strncat(out, paths[i], len - strlen(out) - 1);
	}
	store_export_stack_free(paths, n);
}

static uint64_t insert_typed(struct store *st, uint16_t exp, uint64_t parent, const char *name,
			     uint8_t type, uint8_t branch, uint64_t real)
{
	struct store_txn *txn;
	struct store_inode r = make_rec(parent, name, type, branch, real);

	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_insert(txn, exp, &r), 0);
	assert_int_equal(store_commit(txn), 0);
	return r.si_ino;
}

/* The size of meta key key in the map in dir, read with LMDB itself; 0 when absent. */
static size_t raw_meta_size(const char *dir, const char *key)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_val k = { .mv_size = strlen(key), .mv_data = (void *)key }, val;
	char path[256];
	size_t size = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/inodes.mdb", dir);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_set_mapsize(env, 1u << 30), 0);
	assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	rc = mdb_get(txn, meta, &k, &val);
	if (rc == 0)
		size = val.mv_size;
	else
		assert_int_equal(rc, MDB_NOTFOUND);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return size;
}

#define T_FILE 8   /* S_IFREG >> 12 */
#define T_DIR 4    /* S_IFDIR >> 12 */

struct rebase_recs {
	uint64_t up_file, lo_file, lo_dir, up_in_lo_dir, lo_in_lo_dir, up_dir, lo_in_up_dir;
};

/* Records of export 1 over stack_v1: some in the upper (branch 0), some in the base. */
static void rebase_fill(struct store *st, struct rebase_recs *r)
{
	struct store_txn *txn;

	r->up_file = insert_typed(st, 1, STORE_ROOT_INO, "u", T_FILE, 0, 100);
	r->lo_file = insert_typed(st, 1, STORE_ROOT_INO, "l", T_FILE, 1, 200);
	r->lo_dir = insert_typed(st, 1, STORE_ROOT_INO, "d", T_DIR, 1, 300);
	r->up_in_lo_dir = insert_typed(st, 1, r->lo_dir, "x", T_FILE, 0, 101);
	r->lo_in_lo_dir = insert_typed(st, 1, r->lo_dir, "y", T_FILE, 1, 201);
	r->up_dir = insert_typed(st, 1, STORE_ROOT_INO, "e", T_DIR, 0, 102);
	r->lo_in_up_dir = insert_typed(st, 1, r->up_dir, "z", T_FILE, 1, 202);
	/* A second name of the base's file, as a lower hard link has. */
	assert_int_equal(store_begin(st, true, &txn), 0);
	assert_int_equal(store_add_name(txn, 1, r->up_dir, "l2", r->lo_file), 0);
	assert_int_equal(store_commit(txn), 0);
}

/*
 * What a rebase leaves of rebase_fill's records (the map may have been reopened), with
 * added records made since.
 */
static void rebase_check(struct store *st, const struct rebase_recs *r, uint64_t added)
{
	struct store_inode rec;
	struct store_txn *txn;
	uint64_t ino, count;

	assert_int_equal(store_begin(st, false, &txn), 0);
	/* The upper's objects keep their inos, records and index entries. */
	assert_int_equal(store_get(txn, 1, r->up_file, &rec), 0);
	assert_int_equal(rec.si_branch, 0);
	assert_int_equal(rec.si_real_ino, 100);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "u", &ino), 0);
	assert_int_equal(ino, r->up_file);
	assert_int_equal(store_find_real(txn, 1, 0, 100, &ino), 0);
	assert_int_equal(ino, r->up_file);
	assert_int_equal(store_get(txn, 1, r->up_in_lo_dir, &rec), 0);
	assert_int_equal(rec.si_parent, r->lo_dir);
	assert_int_equal(store_find_name(txn, 1, r->lo_dir, "x", &ino), 0);
	assert_int_equal(ino, r->up_in_lo_dir);
	assert_int_equal(store_get(txn, 1, r->up_dir, &rec), 0);
	assert_int_equal(rec.si_real_ino, 102);
	assert_int_equal(store_find_real(txn, 1, 0, 102, &ino), 0);
	assert_int_equal(store_get(txn, 1, STORE_ROOT_INO, &rec), 0);
	assert_int_equal(rec.si_branch, 0);
	assert_int_equal(rec.si_real_ino, 11);

	/* The old base's files are gone, with every name and index entry of theirs. */
	assert_int_equal(store_get(txn, 1, r->lo_file, &rec), -ENOENT);
	assert_int_equal(store_get(txn, 1, r->lo_in_lo_dir, &rec), -ENOENT);
	assert_int_equal(store_get(txn, 1, r->lo_in_up_dir, &rec), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "l", &ino), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, r->up_dir, "l2", &ino), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, r->lo_dir, "y", &ino), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, r->up_dir, "z", &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 1, 200, &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 1, 201, &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 1, 202, &ino), -ENOENT);

	/* The base's directory keeps its ino and name, and is to be found again by path. */
	assert_int_equal(store_get(txn, 1, r->lo_dir, &rec), 0);
	assert_int_equal(rec.si_type, T_DIR);
	assert_int_equal(rec.si_branch, 0);
	assert_int_equal(rec.si_real_ino, 0);
	assert_int_equal(rec.si_real_id, 0);
	assert_string_equal(rec.si_name, "d");
	assert_int_equal(store_find_name(txn, 1, STORE_ROOT_INO, "d", &ino), 0);
	assert_int_equal(ino, r->lo_dir);
	assert_int_equal(store_find_real(txn, 1, 1, 300, &ino), -ENOENT);
	assert_int_equal(store_find_real(txn, 1, 0, 0, &ino), -ENOENT);

	assert_int_equal(store_count(txn, 1, &count), 0);
	assert_int_equal(count, 5 + added); /* root, u, d, x, e */
	store_abort(txn);
}

/*
 * A new base below the same upper: the export keeps its id, its inode counter and its
 * upper's records; the old base's files go (names too), its directories stay to be
 * re-keyed; the old stack is kept as the previous one, and the counts follow the new one.
 */
static void test_rebind_new_base(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct rebase_recs r;
	struct store_txn *txn;
	struct store_inode rec;
	char buf[256], err[512];
	uint64_t fresh, other;
	uint16_t id;

	assert_int_equal(bind_ok(st, "/union", stack_v1, 2), 1);
	assert_int_equal(bind_ok(st, "/other", stack_ab, 2), 2);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	rebase_fill(st, &r);
	/* Another export's records with the same branch numbers are not touched. */
	other = insert_one(st, 2, STORE_ROOT_INO, "l", 1, 200);
	assert_int_equal(tally_of(st, 1, 1), 4);

	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, ""); /* never rebound: no previous stack */
	assert_int_equal(rebind_ok(st, "/union", stack_v2, 2, 1), 1);
	rebase_check(st, &r, 0);
	stack_of(st, "/union", false, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v2");
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v1");

	/* The binding keeps the format servers before it read: id, count, branches. */
	assert_int_equal(raw_meta_size(f->state, "export//union"), 3 + 2 * 10 + 3 + 3);

	/* The new stack is bound; the old one is refused; counts are taken afresh. */
	assert_int_equal(bind_ok(st, "/union", stack_v2, 2), 1);
	assert_int_equal(store_bind_export(st, "/union", stack_v1, 2, &id, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(store_tally(st, 1, 0, &fresh), -ENOENT);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	assert_int_equal(tally_of(st, 1, 0), 5);
	assert_int_equal(tally_of(st, 1, 1), 0);

	/* Inos go on from where they were: none of the deleted ones comes back. */
	fresh = insert_typed(st, 1, STORE_ROOT_INO, "n", T_FILE, 1, 400);
	assert_true(fresh > r.lo_in_up_dir);
	assert_int_equal(tally_of(st, 1, 1), 1);

	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 2, other, &rec), 0);
	assert_int_equal(store_find_real(txn, 2, 1, 200, &fresh), 0);
	assert_int_equal(fresh, other);
	store_abort(txn);
	store_close(st);

	/* All of it is on disk. */
	st = open_ok(f);
	rebase_check(st, &r, 1);
	assert_int_equal(bind_ok(st, "/union", stack_v2, 2), 1);
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v1");
	store_close(st);
}

/* A second new base replaces the previous stack; the branch count may change. */
static void test_rebind_twice(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct rebase_recs r;
	struct store_txn *txn;
	struct store_inode rec;
	uint64_t v2file, ino;
	char buf[256];

	assert_int_equal(bind_ok(st, "/union", stack_v1, 2), 1);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	rebase_fill(st, &r);
	assert_int_equal(rebind_ok(st, "/union", stack_v2, 2, 1), 1);
	v2file = insert_typed(st, 1, r.lo_dir, "w", T_FILE, 1, 500);
	assert_int_equal(rebind_ok(st, "/union", stack_v3, 3, 1), 1);
	assert_int_equal(store_tally_start(st, 1, 3), 0);
	assert_int_equal(tally_of(st, 1, 0), 5);
	assert_int_equal(tally_of(st, 1, 2), 0);
	store_close(st);

	st = open_ok(f);
	stack_of(st, "/union", false, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v3:/v3b");
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v2");
	rebase_check(st, &r, 0);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, v2file, &rec), -ENOENT);
	assert_int_equal(store_find_name(txn, 1, r.lo_dir, "w", &ino), -ENOENT);
	store_abort(txn);
	/* Back to fewer branches: a count of 2 again. */
	assert_int_equal(rebind_ok(st, "/union", stack_v2, 2, 1), 1);
	assert_int_equal(store_tally_start(st, 1, 2), 0);
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v3:/v3b");
	store_close(st);
}

/*
 * Another writable branch (by path or root inode) is refused with both stacks and the fix,
 * and nothing changes; an equal stack is a no-op; an export never bound is bound.
 */
static void test_rebind_refused_and_noop(void **state)
{
	struct fixture *f = *state;
	struct store_branch_id other_up[] = {
		{ .sb_path = "/up2", .sb_root_ino = 11 },
		{ .sb_path = "/v2", .sb_root_ino = 33 },
	};
	struct store_branch_id moved_up[] = {
		{ .sb_path = "/up", .sb_root_ino = 12 },
		{ .sb_path = "/v2", .sb_root_ino = 33 },
	};
	struct store *st = open_ok(f);
	struct rebase_recs r;
	struct store_txn *txn;
	struct store_inode rec;
	char err[1024] = "", buf[256];
	uint16_t id = 77;

	assert_int_equal(bind_ok(st, "/union", stack_v1, 2), 1);
	rebase_fill(st, &r);

	assert_int_equal(store_rebind_export(st, "/union", other_up, 2, 1, &id, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(id, 77);
	assert_non_null(strstr(err, "export /union"));
	assert_non_null(strstr(err, "/up:/v1"));
	assert_non_null(strstr(err, "/up2:/v2"));
	assert_non_null(strstr(err, "writable"));
	assert_non_null(strstr(err, "restore the writable branches"));
	err[0] = '\0';
	assert_int_equal(store_rebind_export(st, "/union", moved_up, 2, 1, &id, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "root inode"));
	/* Both of the map's branches are writable here, and the second is not given. */
	assert_int_equal(store_rebind_export(st, "/union", stack_v2, 2, 2, &id, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(store_rebind_export(st, "/union", stack_v2, 2, 3, &id, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(store_rebind_export(st, "/union", stack_v2, 0, 0, &id, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(id, 77);

	/* The same stack: nothing to do, nothing written. */
	assert_int_equal(rebind_ok(st, "/union", stack_v1, 2, 1), 1);
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "");
	store_close(st);

	st = open_ok(f);
	stack_of(st, "/union", false, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v1");
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, r.lo_file, &rec), 0);
	assert_int_equal(store_get(txn, 1, r.lo_dir, &rec), 0);
	assert_int_equal(rec.si_branch, 1);
	assert_int_equal(rec.si_real_ino, 300);
	store_abort(txn);

	/* Not bound yet: bound as store_bind_export binds. */
	assert_int_equal(rebind_ok(st, "/fresh", stack_v2, 2, 1), 2);
	stack_of(st, "/fresh", false, buf, sizeof(buf));
	assert_string_equal(buf, "/up:/v2");
	stack_of(st, "/fresh", true, buf, sizeof(buf));
	assert_string_equal(buf, "");
	stack_of(st, "/nowhere", false, buf, sizeof(buf));
	assert_string_equal(buf, "");

	/* Unbinding forgets the previous stack too. */
	assert_int_equal(rebind_ok(st, "/union", stack_v2, 2, 1), 1);
	assert_int_equal(store_unbind_export(st, "/union"), 0);
	stack_of(st, "/union", true, buf, sizeof(buf));
	assert_string_equal(buf, "");
	assert_int_equal(raw_meta_size(f->state, "export-prev//union"), 0);
	store_close(st);
}

/* Every branch read-only (a read-only union): all records of the base go, the root stays. */
static void test_rebind_whole_stack(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	struct store_txn *txn;
	struct store_inode rec;
	uint64_t ino, dir, file;

	assert_int_equal(bind_ok(st, "/ro", stack_v1, 2), 1);
	dir = insert_typed(st, 1, STORE_ROOT_INO, "d", T_DIR, 0, 300);
	file = insert_typed(st, 1, dir, "f", T_FILE, 1, 301);
	assert_int_equal(rebind_ok(st, "/ro", stack_ab, 2, 0), 1);
	assert_int_equal(store_begin(st, false, &txn), 0);
	assert_int_equal(store_get(txn, 1, STORE_ROOT_INO, &rec), 0);
	assert_int_equal(rec.si_branch, 0);
	assert_int_equal(rec.si_real_ino, 11); /* /a's root */
	assert_int_equal(store_find_real(txn, 1, 0, 11, &ino), 0);
	assert_int_equal(ino, STORE_ROOT_INO);
	assert_int_equal(store_get(txn, 1, dir, &rec), 0);
	assert_int_equal(rec.si_real_ino, 0);
	assert_int_equal(store_find_real(txn, 1, 0, 300, &ino), -ENOENT);
	assert_int_equal(store_get(txn, 1, file, &rec), -ENOENT);
	store_abort(txn);
	store_close(st);
}

/* A base set at run time: kept over a reopen, replaced, forgotten; none: -ENOENT. */
static void test_base_set(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_ok(f);
	char *set, *was;

	assert_int_equal(store_base_get(st, "/lab", &set, &was), -ENOENT);
	assert_null(set);
	assert_int_equal(store_base_set(st, "/lab", "/srv/v2\n/srv/common", "/srv/v1"), 0);
	assert_int_equal(store_base_set(st, "/other", "/x", ""), 0);
	store_close(st);
	st = open_ok(f);
	assert_int_equal(store_base_get(st, "/lab", &set, &was), 0);
	assert_string_equal(set, "/srv/v2\n/srv/common");
	assert_string_equal(was, "/srv/v1");
	free(set);
	free(was);
	assert_int_equal(store_base_set(st, "/lab", "/srv/v3", "/srv/v1"), 0);
	assert_int_equal(store_base_get(st, "/lab", &set, &was), 0);
	assert_string_equal(set, "/srv/v3");
	free(set);
	free(was);
	assert_int_equal(store_base_set(st, "/lab", NULL, NULL), 0);
	assert_int_equal(store_base_get(st, "/lab", &set, &was), -ENOENT);
	assert_int_equal(store_base_set(st, "/lab", NULL, NULL), 0); /* nothing to forget */
	assert_int_equal(store_base_get(st, "/other", &set, &was), 0);
	assert_string_equal(set, "/x");
	assert_string_equal(was, "");
	free(set);
	free(was);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_creates_private_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_identity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_upgrade, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_open_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_state_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bind_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_records_and_indexes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index_entries_taken_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_misuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inos_never_reused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_ino, setup, teardown),
		cmocka_unit_test_setup_teardown(test_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readers_renewed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_abort_isolated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undo_only_when_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_group_undone_newest_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intents_survive_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_per_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tally, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_new_base, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_refused_and_noop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_whole_stack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_base_set, setup, teardown),
	};

	log_init(true, "test_store");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
