/*
 * An object's identity is more than its inode number: a reused number is not the old object,
 * and a copy-up cut short by a kill is found again by its origin.
 *
 * - Reuse: a lower file is removed by hand and a new file gets its inode number (forced:
 *   files are made until one has it), then takes another name (over d/b) or the same one.
 *   The handle of the removed file must answer NFS3ERR_STALE to GETATTR and READ, never
 *   with the other file's attributes or bytes; the name's LOOKUP gives a new fileid; the
 *   handle of a file nobody touched still works. Run on an ext4 image (which hands a freed
 *   number out again at once) and on tmpfs (which, on recent kernels, counts numbers up per
 *   mount and so never reuses one: that case is skipped, saying so).
 * - Origin: the state a kill leaves between a copy-up's rename into place and the map's
 *   update is made by hand (server stopped; the copy, with the origin the server puts on
 *   it, renamed to the file's name in the upper): after a restart the handle taken before
 *   still works with the same fileid, LOOKUP gives that fileid, and `unionnfsd-ctl check`
 *   counts nothing stale; with a file of two lower names, both keep the fileid.
 * - Upgrade: a record without identity (as older maps hold) resolves and learns it.
 *
 * Needs root (mount, losetup, trusted.* xattrs).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsio.h"
#include "store.h"

#define T_IMAGE_MIB 32
#define T_REUSE_TRIES 2000        /* files made, at most, for a number to come back */
#define T_YOUNG_ROUNDS 40         /* replacements of a file just looked up */
#define T_OUT 8192
#define T_ORIGIN_XATTR "trusted.unionnfsd.origin"   /* copyup.c */
#define T_EXPORT_ID 1             /* the first export bound in a fresh map */
#define T_LOWER_BRANCH 1
#define T_WORK ".unionnfsd.work"                    /* README: the work directory */
#define T_PENDING_XATTR "trusted.unionnfsd.pending"  /* hlink.c */

static struct it_server srv;
static char image[PATH_MAX], loopdev[64];
static bool mounted;
static CLIENT *clnt;
static nfs_fh3 root;

/* The lower branch becomes a fresh ext4 image on a loop device, or a tmpfs. */
static int mount_lower(bool ext4)
{
	char size[32];

	if (!ext4) {
		snprintf(size, sizeof(size), "size=%dm", T_IMAGE_MIB);
		if (mount("tmpfs", srv.is_lower, "tmpfs", 0, size) < 0) {
			perror("mount tmpfs");
			return -1;
		}
		mounted = true;
		return 0;
	}
	it_path(image, "%s/lower.img", srv.is_dir);
	mounted = true; /* a failed mount still leaves a loop device to detach */
	return it_ext4_mount(image, T_IMAGE_MIB, NULL, srv.is_lower, loopdev, sizeof(loopdev));
}

static void unmount_lower(void)
{
	if (mounted)
		it_ext4_umount(srv.is_lower, loopdev);
	mounted = false;
}

static int start(bool ext4)
{
	it_server_init(&srv, true);
	if (geteuid() != 0) {
		fprintf(stderr, "test_identity needs root (mount, losetup)\n");
		return -1;
	}
	if (mount_lower(ext4) < 0)
		goto fail;
	if (it_server_start(&srv) < 0)
		goto fail;
	if (it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		goto fail;
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	return 0;
fail:
	unmount_lower();
	it_server_cleanup(&srv);
	return -1;
}

static int setup_ext4(void **state)
{
	(void)state;
	return start(true);
}

static int setup_tmpfs(void **state)
{
	(void)state;
	return start(false);
}

static int setup_plain(void **state)
{
	(void)state;
	it_server_init(&srv, true);
	if (it_server_start(&srv) < 0) {
		it_server_cleanup(&srv);
		return -1;
	}
	if (it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	return 0;
}

static int teardown(void **state)
{
	int st;

	(void)state;
	if (clnt)
		it_clnt_destroy(clnt);
	clnt = NULL;
	it_fh_free(&root);
	st = it_server_stop(&srv);
	unmount_lower();
	it_server_cleanup(&srv);
	return st == 0 ? 0 : -1;
}

static void write_lower(const char *rel, const char *text)
{
	char path[PATH_MAX];

	it_path(path, "%s/%s", srv.is_lower, rel);
	it_write_file(path, text, strlen(text));
}

static uint64_t ino_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		fail_msg("lstat %s: %s", path, strerror(errno));
	return (uint64_t)st.st_ino;
}

/* The fileid READDIRPLUS of dir shows for name (fails the test when it is not listed). */
static uint64_t listed_fileid(const nfs_fh3 *dir, const char *name)
{
	READDIRPLUS3args a = { .dir = *dir, .cookie = 0, .dircount = 65536, .maxcount = 262144 };
	READDIRPLUS3res r;
	uint64_t fileid = 0;
	bool found = false;

	memset(&r, 0, sizeof(r));
	if (it_call(clnt, NFSPROC3_READDIRPLUS, (xdrproc_t)xdr_READDIRPLUS3args, &a,
		    (xdrproc_t)xdr_READDIRPLUS3res, &r) != RPC_SUCCESS)
		fail_msg("READDIRPLUS: no reply");
	it_assert_status(r.status, NFS3_OK);
	for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry)
		if (!strcmp(e->name, name)) {
			found = true;
			fileid = e->fileid;
		}
	it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	if (!found)
		fail_msg("READDIRPLUS does not list %s", name);
	return fileid;
}

/*
 * In lower directory dir, makes files until one gets inode number want; returns its name
 * in name (the others stay, so the number search moves on). false when none did.
 */
static bool make_with_ino(const char *dir, uint64_t want, char *name, size_t len)
{
	char path[PATH_MAX];

	for (int i = 0; i < T_REUSE_TRIES; i++) {
		struct stat st;
		int fd;

		snprintf(name, len, "n%d", i);
		it_path(path, "%s/%s", dir, name);
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			fail_msg("create %s: %s", path, strerror(errno));
		if (fstat(fd, &st) < 0)
			fail_msg("fstat %s: %s", path, strerror(errno));
		close(fd);
		if ((uint64_t)st.st_ino == want)
			return true;
	}
	return false;
}

/*
 * d/a is removed by hand and a new file with its inode number takes the name d/b (or d/a
 * when same_name): a's handle is stale, never the new file. The client then finds the
 * name by LOOKUP, or first in a READDIRPLUS listing (listing).
 */
static void replaced_by_reuse(const char *d, bool same_name, bool listing)
{
	char dir[PATH_MAX], path[PATH_MAX], from[PATH_MAX], name[32], buf[256];
	const char *target = same_name ? "a" : "b";
	nfs_fh3 dfh, ha, hc, hn;
	fattr3 attr;
	uint64_t fileid_a, old;

	it_path(dir, "%s/%s", srv.is_lower, d);
	if (mkdir(dir, 0755) < 0)
		fail_msg("mkdir %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/a", d);
	write_lower(path, "old a");
	snprintf(path, sizeof(path), "%s/b", d);
	write_lower(path, "old b");
	snprintf(path, sizeof(path), "%s/c", d);
	write_lower(path, "kept c");

	it_assert_status(it_lookup(clnt, &root, d, &dfh, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &dfh, "a", &ha, &attr), NFS3_OK);
	fileid_a = attr.fileid;
	it_assert_status(it_lookup(clnt, &dfh, "c", &hc, NULL), NFS3_OK);
	it_assert_status(it_getattr(clnt, &ha, NULL), NFS3_OK);

	it_path(path, "%s/a", dir);
	old = ino_of(path);
	if (unlink(path) < 0)
		fail_msg("unlink %s: %s", path, strerror(errno));
	if (!make_with_ino(dir, old, name, sizeof(name))) {
		it_fh_free(&dfh);
		it_fh_free(&ha);
		it_fh_free(&hc);
		skip(); /* said by the caller */
	}
	it_path(from, "%s/%s", dir, name);
	it_write_file(from, "NEW FILE", strlen("NEW FILE"));
	it_path(path, "%s/%s", dir, target);
	if (rename(from, path) < 0)
		fail_msg("rename %s: %s", from, strerror(errno));
	assert_int_equal(ino_of(path), old);

	/* A client listing or looking the name up, as any would: not as a's. */
	if (listing && listed_fileid(&dfh, target) == fileid_a)
		fail_msg("READDIRPLUS of %s lists %s with the removed a's fileid %" PRIu64, d,
			 target, fileid_a);
	it_assert_status(it_lookup(clnt, &dfh, target, &hn, &attr), NFS3_OK);
	if (attr.fileid == fileid_a)
		fail_msg("LOOKUP %s/%s gives the removed a's fileid %" PRIu64, d, target, fileid_a);
	assert_int_equal(it_read_all(clnt, &hn, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "NEW FILE");

	it_assert_status(it_getattr(clnt, &ha, NULL), NFS3ERR_STALE);
	if (it_read_all(clnt, &ha, buf, sizeof(buf)) != NFS3ERR_STALE)
		fail_msg("READ of the removed a's handle answered \"%s\", not STALE", buf);

	it_assert_status(it_getattr(clnt, &hc, NULL), NFS3_OK);
	assert_int_equal(it_read_all(clnt, &hc, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "kept c");
	it_fh_free(&dfh);
	it_fh_free(&ha);
	it_fh_free(&hc);
	it_fh_free(&hn);
}

static void test_ext4_reuse_other_name(void **state)
{
	(void)state;
	replaced_by_reuse("d1", false, false);
}

static void test_ext4_reuse_same_name(void **state)
{
	(void)state;
	replaced_by_reuse("d2", true, false);
}

static void test_ext4_reuse_listed(void **state)
{
	(void)state;
	replaced_by_reuse("d3", false, true);
}

/* Inode number and birth time (ns; 0 when the file system keeps none) of path. */
static void birth_of(const char *path, uint64_t *ino, int64_t *birth)
{
	struct statx sx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &sx) < 0)
		fail_msg("statx %s: %s", path, strerror(errno));
	*ino = sx.stx_ino;
	*birth = (sx.stx_mask & STATX_BTIME) ?
			 (int64_t)sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec : 0;
}

/*
 * A file looked up right after it was made, then replaced at once by a file with its
 * number: birth times tick coarsely (4 ms on ext4), so the two often have the same one,
 * and the resolve cache must not take the new file for the old. Every round's handle must
 * be stale; the rounds where number and birth time both came back are counted.
 */
static void test_ext4_young_replaced(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX], buf[64];
	int same_birth = 0, reused = 0;
	nfs_fh3 dfh, hx;

	(void)state;
	it_path(dir, "%s/d4", srv.is_lower);
	if (mkdir(dir, 0755) < 0)
		fail_msg("mkdir %s: %s", dir, strerror(errno));
	it_assert_status(it_lookup(clnt, &root, "d4", &dfh, NULL), NFS3_OK);
	it_path(path, "%s/x", dir);
	it_path(tmp, "%s/y", dir);
	for (int i = 0; i < T_YOUNG_ROUNDS; i++) {
		uint64_t ino, nino;
		int64_t birth, nbirth;

		it_write_file(path, "old", 3);
		birth_of(path, &ino, &birth);
		it_assert_status(it_lookup(clnt, &dfh, "x", &hx, NULL), NFS3_OK);
		it_assert_status(it_getattr(clnt, &hx, NULL), NFS3_OK);
		if (unlink(path) < 0)
			fail_msg("unlink %s: %s", path, strerror(errno));
		it_write_file(tmp, "NEW", 3);
		if (rename(tmp, path) < 0)
			fail_msg("rename %s: %s", tmp, strerror(errno));
		birth_of(path, &nino, &nbirth);
		reused += nino == ino;
		same_birth += nino == ino && nbirth == birth;
		if (it_getattr(clnt, &hx, NULL) != NFS3ERR_STALE ||
		    it_read_all(clnt, &hx, buf, sizeof(buf)) != NFS3ERR_STALE)
			fail_msg("round %d: the handle of the replaced x works (inode number %s, birth "
				 "time %s)", i, nino == ino ? "reused" : "new",
				 nbirth == birth ? "the same" : "new");
		it_fh_free(&hx);
		if (unlink(path) < 0)
			fail_msg("unlink %s: %s", path, strerror(errno));
	}
	fprintf(stderr, "young files replaced: %d rounds, %d with the number reused, %d of those "
		"with the same birth time\n", T_YOUNG_ROUNDS, reused, same_birth);
	it_fh_free(&dfh);
}

static void test_tmpfs_reuse_other_name(void **state)
{
	(void)state;
	fprintf(stderr, "tmpfs: skipped when no inode number comes back within %d files "
		"(tmpfs counts them up per mount)\n", T_REUSE_TRIES);
	replaced_by_reuse("d1", false, false);
}

static void test_tmpfs_reuse_same_name(void **state)
{
	(void)state;
	replaced_by_reuse("d2", true, false);
}

/* --- origin --- */

static const char *ctl_binary(void)
{
	static char path[PATH_MAX];
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/unionnfsd-ctl", build && *build ? build : "build");
	return path;
}

/* unionnfsd-ctl check's count of stale records (the server runs). */
static unsigned long long check_stale(void)
{
	static char out[T_OUT];
	char *argv[] = { (char *)ctl_binary(), "--state", srv.is_state, "check", NULL };
	unsigned long long stale, dropped, errors;
	const char *total;
	int rc = it_run(argv, 60, out, sizeof(out));

	total = strstr(out, " dropped, ");
	while (total && total > out && total[-1] != '\n')
		total--;
	/* Exit status 4: errors, 3: stale records left, else 0. */
	if (!total ||
	    sscanf(total, "%llu stale, %llu dropped, %llu errors", &stale, &dropped, &errors) != 3 ||
	    rc != (errors ? 4 : stale ? 3 : 0))
		fail_msg("unionnfsd-ctl check exited %d:\n%s", rc, out);
	if (errors)
		fail_msg("unionnfsd-ctl check reports errors:\n%s", out);
	if (stale)
		fprintf(stderr, "%s", out);
	return stale;
}

/*
 * The hard-link index entry a copy-up of a file with several names makes before the rename
 * into place: a link named BRANCH-LOWERINO (hex) in the work directory's index, and the
 * number of lower names still to link up on the copy.
 */
static void fake_index(const char *copy, uint64_t lower_ino, nlink_t lower_nlink)
{
	char path[PATH_MAX], pending[32];

	it_path(path, "%s/%s", srv.is_upper, T_WORK);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	it_path(path, "%s/%s/index", srv.is_upper, T_WORK);
	if (mkdir(path, 0711) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	snprintf(pending, sizeof(pending), "%u", (unsigned)lower_nlink - 1);
	if (setxattr(copy, T_PENDING_XATTR, pending, strlen(pending), 0) < 0)
		fail_msg("setxattr %s: %s", copy, strerror(errno));
	it_path(path, "%s/%s/index/%u-%" PRIx64, srv.is_upper, T_WORK, T_LOWER_BRANCH, lower_ino);
	if (link(copy, path) < 0)
		fail_msg("link %s: %s", path, strerror(errno));
}

/*
 * What a copy-up of lower DIR/NAME (union ino fileid) leaves when killed right after
 * renaming its copy into place: the copy, with its origin, at DIR/NAME in the upper (and in
 * the hard-link index when the lower file has several names); the map unchanged.
 */
static void fake_cut_copyup(const char *rel, uint64_t fileid, const char *content)
{
	char lower[PATH_MAX], upper[PATH_MAX], tmp[PATH_MAX], origin[128];
	struct stat st;
	uint64_t id;

	it_path(lower, "%s/%s", srv.is_lower, rel);
	it_path(upper, "%s/%s", srv.is_upper, rel);
	it_path(tmp, "%s/%.*s", srv.is_upper, (int)strcspn(rel, "/"), rel);
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", tmp, strerror(errno));
	if (lstat(lower, &st) < 0)
		fail_msg("lstat %s: %s", lower, strerror(errno));
	assert_int_equal(fsio_ident(AT_FDCWD, lower, &id), 0);
	it_path(tmp, "%s/e/copy.tmp", srv.is_upper);
	it_write_file(tmp, content, strlen(content));
	snprintf(origin, sizeof(origin), "1 %u %" PRIu64 " %u %" PRIu64 " %" PRIx64, T_EXPORT_ID,
		 fileid, T_LOWER_BRANCH, (uint64_t)st.st_ino, id);
	if (setxattr(tmp, T_ORIGIN_XATTR, origin, strlen(origin), 0) < 0)
		fail_msg("setxattr %s: %s", tmp, strerror(errno));
	if (st.st_nlink > 1)
		fake_index(tmp, (uint64_t)st.st_ino, st.st_nlink);
	if (rename(tmp, upper) < 0)
		fail_msg("rename to %s: %s", upper, strerror(errno));
}

static void test_origin_after_cut_copyup(void **state)
{
	nfs_fh3 efh, ffh, again;
	fattr3 attr;
	uint64_t fileid;
	char buf[256], path[PATH_MAX];

	(void)state;
	it_path(path, "%s/e", srv.is_lower);
	if (mkdir(path, 0755) < 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	write_lower("e/f", "lower bytes");
	it_assert_status(it_lookup(clnt, &root, "e", &efh, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &efh, "f", &ffh, &attr), NFS3_OK);
	fileid = attr.fileid;
	it_fh_free(&efh);
	it_clnt_destroy(clnt);
	clnt = NULL;
	assert_int_equal(it_server_stop(&srv), 0);

	fake_cut_copyup("e/f", fileid, "upper copy");

	assert_int_equal(it_server_start(&srv), 0);
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(clnt, &ffh, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	assert_int_equal(it_read_all(clnt, &ffh, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "upper copy");
	it_assert_status(it_lookup_path(clnt, &root, "e/f", &again, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	assert_true(it_fh_equal(&again, &ffh));
	assert_int_equal(check_stale(), 0);
	it_fh_free(&again);
	it_fh_free(&ffh);
}

/* The same with a file of two lower names: both keep the one fileid, and see the copy. */
static void test_origin_hardlinks_after_cut_copyup(void **state)
{
	char buf[256], path[PATH_MAX], other[PATH_MAX];
	nfs_fh3 hfh, fh1, fh2, again;
	fattr3 attr;
	uint64_t fileid;

	(void)state;
	it_path(path, "%s/h", srv.is_lower);
	if (mkdir(path, 0755) < 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	write_lower("h/l1", "lower bytes");
	it_path(path, "%s/h/l1", srv.is_lower);
	it_path(other, "%s/h/l2", srv.is_lower);
	if (link(path, other) < 0)
		fail_msg("link %s: %s", other, strerror(errno));
	it_assert_status(it_lookup(clnt, &root, "h", &hfh, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &hfh, "l1", &fh1, &attr), NFS3_OK);
	fileid = attr.fileid;
	it_assert_status(it_lookup(clnt, &hfh, "l2", &fh2, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	it_fh_free(&hfh);
	it_clnt_destroy(clnt);
	clnt = NULL;
	assert_int_equal(it_server_stop(&srv), 0);

	fake_cut_copyup("h/l1", fileid, "upper copy");

	assert_int_equal(it_server_start(&srv), 0);
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(clnt, &fh1, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	assert_int_equal(attr.nlink, 2);
	it_assert_status(it_lookup_path(clnt, &root, "h/l2", &again, &attr), NFS3_OK);
	if (attr.fileid != fileid)
		fail_msg("after the cut copy-up h/l2 has fileid %" PRIu64 ", h/l1 %" PRIu64,
			 (uint64_t)attr.fileid, fileid);
	assert_int_equal(it_read_all(clnt, &again, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "upper copy");
	it_assert_status(it_getattr(clnt, &fh2, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	assert_int_equal(check_stale(), 0);
	it_fh_free(&again);
	it_fh_free(&fh1);
	it_fh_free(&fh2);
}

/* The real identity of record ino in the stopped server's map, after setting it to set. */
static uint64_t map_identity(uint64_t ino, const uint64_t *set)
{
	char err[256];
	struct store_inode rec;
	struct store_txn *t;
	struct store *st;

	if (store_open(srv.is_state, &st, err, sizeof(err)) < 0)
		fail_msg("store_open: %s", err);
	assert_int_equal(store_begin(st, set != NULL, &t), 0);
	assert_int_equal(store_get(t, T_EXPORT_ID, ino, &rec), 0);
	if (set) {
		rec.si_real_id = *set;
		assert_int_equal(store_update(t, T_EXPORT_ID, &rec), 0);
		assert_int_equal(store_commit(t), 0);
	} else {
		store_abort(t);
	}
	store_close(st);
	return rec.si_real_id;
}

/*
 * A record as maps made before identities were kept hold it (no identity) still resolves,
 * and learns its copy's identity on that first match.
 */
static void test_old_record_learns_identity(void **state)
{
	const uint64_t none = 0;
	nfs_fh3 kfh;
	fattr3 attr;
	uint64_t fileid, id;
	char buf[64];

	(void)state;
	write_lower("k", "kept");
	it_assert_status(it_lookup(clnt, &root, "k", &kfh, &attr), NFS3_OK);
	fileid = attr.fileid;
	it_clnt_destroy(clnt);
	clnt = NULL;
	assert_int_equal(it_server_stop(&srv), 0);
	id = map_identity(fileid, NULL);
	assert_int_not_equal(id, 0);
	assert_int_equal(map_identity(fileid, &none), 0);

	assert_int_equal(it_server_start(&srv), 0);
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(clnt, &kfh, &attr), NFS3_OK);
	assert_int_equal(attr.fileid, fileid);
	assert_int_equal(it_read_all(clnt, &kfh, buf, sizeof(buf)), NFS3_OK);
	assert_string_equal(buf, "kept");
	it_clnt_destroy(clnt);
	clnt = NULL;
	assert_int_equal(it_server_stop(&srv), 0);
	assert_int_equal(map_identity(fileid, NULL), id);
	assert_int_equal(it_server_start(&srv), 0);
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_fh_free(&kfh);
}

/* A copy with an origin naming another object is not taken for this one. */
static void test_origin_of_another_object(void **state)
{
	nfs_fh3 efh, gfh;
	fattr3 attr;
	uint64_t fileid;
	char path[PATH_MAX];

	(void)state;
	it_path(path, "%s/e", srv.is_lower);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	write_lower("e/g", "lower g");
	it_assert_status(it_lookup(clnt, &root, "e", &efh, NULL), NFS3_OK);
	it_assert_status(it_lookup(clnt, &efh, "g", &gfh, &attr), NFS3_OK);
	fileid = attr.fileid;
	it_fh_free(&efh);
	it_clnt_destroy(clnt);
	clnt = NULL;
	assert_int_equal(it_server_stop(&srv), 0);

	fake_cut_copyup("e/g", fileid + 1000, "someone else");

	assert_int_equal(it_server_start(&srv), 0);
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_getattr(clnt, &gfh, NULL), NFS3ERR_STALE);
	it_fh_free(&gfh);
}

int main(void)
{
	const struct CMUnitTest ext4[] = {
		cmocka_unit_test(test_ext4_reuse_other_name),
		cmocka_unit_test(test_ext4_reuse_same_name),
		cmocka_unit_test(test_ext4_reuse_listed),
		cmocka_unit_test(test_ext4_young_replaced),
	};
	const struct CMUnitTest tmpfs[] = {
		cmocka_unit_test(test_tmpfs_reuse_other_name),
		cmocka_unit_test(test_tmpfs_reuse_same_name),
	};
	const struct CMUnitTest origin[] = {
		cmocka_unit_test(test_origin_after_cut_copyup),
		cmocka_unit_test(test_origin_hardlinks_after_cut_copyup),
		cmocka_unit_test(test_origin_of_another_object),
		cmocka_unit_test(test_old_record_learns_identity),
	};
	int fails = 0;

	fails += cmocka_run_group_tests_name("identity on ext4", ext4, setup_ext4, teardown);
	fails += cmocka_run_group_tests_name("identity on tmpfs", tmpfs, setup_tmpfs, teardown);
	fails += cmocka_run_group_tests_name("copy-up origin, old records", origin, setup_plain,
					     teardown);
	return fails ? 1 : 0;
}
