/*
 * Directory permissions through the server's caches: a listing or a name that one user's
 * calls left in the listing cache or the resolve cache is served to another user only when
 * the kernel would let that user read the directory (READDIR, READDIRPLUS) or search it
 * (LOOKUP, "." and ".." included), as it decides on the uncached path: mode bits,
 * supplementary groups and POSIX ACLs.
 *
 * alice (uid 1000, gid 1000) owns the directories; bob (uid 1001, gid 1001) asks, with and
 * without alice's group among his supplementary groups. Every check runs twice: before
 * alice's calls fill the caches and right after (within the resolve cache's 1 s).
 *
 * All of it runs again with faccessat2(2) failing with ENOSYS, as before Linux 5.8
 * (tests/no_syscall.h; the server inherits the filter): the checks must not depend on it.
 */
#include "common.h"
#include "../no_syscall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define ALICE 1000
#define BOB 1001
#ifndef SYS_faccessat2
#define SYS_faccessat2 439 /* as in src/fsio/fsio.c: C libraries older than the call */
#endif
/* A listing is cached only once its directory has been still this long (dir.c: 20 ms). */
#define SETTLE_NS 30000000LL

static nfs_fh3 root;

static int setup(void **state)
{
	(void)state;
	it_server_init(&it_srv, true);
	/* alice makes her directories in the export root. */
	chmod(it_srv.is_upper, 0777);
	if (it_server_start(&it_srv) != 0) {
		it_server_cleanup(&it_srv);
		return -1;
	}
	if (it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK) {
		fprintf(stderr, "MNT %s failed\n", IT_EXPORT);
		return -1;
	}
	return 0;
}

static int setup_no_faccessat2(void **state)
{
	int r = test_no_syscall(SYS_faccessat2);

	if (r < 0) {
		fprintf(stderr, "cannot make faccessat2 fail (seccomp): %s\n", strerror(-r));
		return -1;
	}
	return setup(state);
}

static int teardown(void **state)
{
	it_fh_free(&root);
	return it_group_teardown(state);
}

/* An NFS client acting as uid/gid with the supplementary groups given (ngroups may be 0). */
static CLIENT *user(uid_t uid, gid_t gid, int ngroups, gid_t *groups)
{
	CLIENT *c = it_nfs_clnt(&it_srv, IPPROTO_TCP);

	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("it-perms", uid, gid, ngroups, groups);
	assert_non_null(c->cl_auth);
	return c;
}

static void mkdir_as(CLIENT *c, const nfs_fh3 *dir, const char *name, mode3 mode, nfs_fh3 *fh)
{
	MKDIR3args a;
	MKDIR3res r;
	enum clnt_stat cs;

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.attributes.mode.set_it = TRUE;
	a.attributes.mode.set_mode3_u.mode = mode;
	cs = it_call(c, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &a, (xdrproc_t)xdr_MKDIR3res,
		     &r);
	if (cs != RPC_SUCCESS)
		fail_msg("MKDIR %s: %s", name, clnt_sperrno(cs));
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_MKDIR3res, &r);
	it_assert_status(it_lookup(c, dir, name, fh, NULL), NFS3_OK);
}

static void chmod_as(CLIENT *c, const nfs_fh3 *fh, mode3 mode)
{
	SETATTR3args a;
	SETATTR3res r;
	enum clnt_stat cs;

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.object = *fh;
	a.new_attributes.mode.set_it = TRUE;
	a.new_attributes.mode.set_mode3_u.mode = mode;
	cs = it_call(c, NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args, &a,
		     (xdrproc_t)xdr_SETATTR3res, &r);
	if (cs != RPC_SUCCESS)
		fail_msg("SETATTR: %s", clnt_sperrno(cs));
	it_assert_status(r.status, NFS3_OK);
	it_free((xdrproc_t)xdr_SETATTR3res, &r);
}

/*
 * READDIR (or READDIRPLUS) of dir from the start; returns the status and, when it is
 * NFS3_OK, wants want among the names (and, for READDIRPLUS, its attributes).
 */
static nfsstat3 list(CLIENT *c, const nfs_fh3 *dir, bool plus, const char *want)
{
	bool seen = false;
	enum clnt_stat cs;
	nfsstat3 st;

	if (!plus) {
		READDIR3args a = { .dir = *dir, .cookie = 0, .count = 8192 };
		READDIR3res r;

		memset(&r, 0, sizeof(r));
		cs = it_call(c, NFSPROC3_READDIR, (xdrproc_t)xdr_READDIR3args, &a,
			     (xdrproc_t)xdr_READDIR3res, &r);
		if (cs != RPC_SUCCESS)
			fail_msg("READDIR: %s", clnt_sperrno(cs));
		st = r.status;
		for (entry3 *e = st == NFS3_OK ? r.READDIR3res_u.resok.reply.entries : NULL; e;
		     e = e->nextentry)
			seen = seen || (want && !strcmp(e->name, want));
		it_free((xdrproc_t)xdr_READDIR3res, &r);
	} else {
		READDIRPLUS3args a = { .dir = *dir, .cookie = 0, .dircount = 8192,
				       .maxcount = 32768 };
		READDIRPLUS3res r;

		memset(&r, 0, sizeof(r));
		cs = it_call(c, NFSPROC3_READDIRPLUS, (xdrproc_t)xdr_READDIRPLUS3args, &a,
			     (xdrproc_t)xdr_READDIRPLUS3res, &r);
		if (cs != RPC_SUCCESS)
			fail_msg("READDIRPLUS: %s", clnt_sperrno(cs));
		st = r.status;
		for (entryplus3 *e = st == NFS3_OK ? r.READDIRPLUS3res_u.resok.reply.entries : NULL;
		     e; e = e->nextentry)
			seen = seen || (want && !strcmp(e->name, want) &&
					e->name_attributes.attributes_follow);
		it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	}
	if (st == NFS3_OK && want && !seen)
		fail_msg("%s of a directory: no '%s' (with attributes) in it",
			 plus ? "READDIRPLUS" : "READDIR", want);
	return st;
}

/* Waits until the host directory path has been still long enough for its listing to be kept. */
static void settle(const char *path)
{
	struct timespec now, wait;
	struct stat st;
	long long last, left;

	if (lstat(path, &st) != 0)
		fail_msg("lstat %s: %s", path, strerror(errno));
	last = (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
	if ((long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec > last)
		last = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	clock_gettime(CLOCK_REALTIME, &now);
	left = last + SETTLE_NS - ((long long)now.tv_sec * 1000000000LL + now.tv_nsec);
	if (left <= 0)
		return;
	wait.tv_sec = left / 1000000000LL;
	wait.tv_nsec = left % 1000000000LL;
	while (nanosleep(&wait, &wait) != 0 && errno == EINTR)
		;
}

/* alice's own calls, which leave the listing and the names in the caches. */
static void warm(CLIENT *alice, const nfs_fh3 *dir, const char *const *names)
{
	nfs_fh3 fh;

	it_assert_status(list(alice, dir, false, names[0]), NFS3_OK);
	it_assert_status(list(alice, dir, true, names[0]), NFS3_OK);
	for (; *names; names++) {
		it_assert_status(it_lookup(alice, dir, *names, &fh, NULL), NFS3_OK);
		/* by handle too: a directory is cached by its resolution, reachable by name */
		it_assert_status(it_getattr(alice, &fh, NULL), NFS3_OK);
		it_fh_free(&fh);
	}
}

/*
 * What went wrong in a test, every check of every phase, so that one run shows them all;
 * judge() fails the test at its end if anything did.
 */
static char wrongs[4096];
static size_t nwrong;

static void wrong(const char *when, const char *what, const char *name, nfsstat3 got,
		  nfsstat3 want)
{
	int n = snprintf(wrongs + nwrong, sizeof(wrongs) - nwrong, "\n  %s: %s%s%s: %s, want %s",
			 when, what, name ? " of " : "", name ? name : "", it_nfsstat_name(got),
			 it_nfsstat_name(want));

	if (n > 0 && (size_t)n < sizeof(wrongs) - nwrong)
		nwrong += (size_t)n;
}

static void judge(void)
{
	size_t n = nwrong;

	nwrong = 0;
	if (n) {
		/* on stderr: cmocka cuts long failure messages short */
		fprintf(stderr, "wrong answers:%s\n", wrongs);
		fail_msg("some answers were wrong (listed above)");
	}
}

/* Every way bob could see into dir is refused (NFS3ERR_ACCES). */
static void refused(CLIENT *bob, const nfs_fh3 *dir, const char *const *names, const char *when)
{
	static const char *const dots[] = { ".", "..", NULL };
	const nfsstat3 no = NFS3ERR_ACCES;
	nfsstat3 st;

	if ((st = list(bob, dir, false, NULL)) != no)
		wrong(when, "READDIR", NULL, st, no);
	if ((st = list(bob, dir, true, NULL)) != no)
		wrong(when, "READDIRPLUS", NULL, st, no);
	for (; *names; names++)
		if ((st = it_lookup(bob, dir, *names, NULL, NULL)) != no)
			wrong(when, "LOOKUP", *names, st, no);
	for (const char *const *d = dots; *d; d++)
		if ((st = it_lookup(bob, dir, *d, NULL, NULL)) != no)
			wrong(when, "LOOKUP", *d, st, no);
}

/* Every way bob could see into dir works, each name with the fileid alice sees. */
static void allowed(CLIENT *bob, CLIENT *alice, const nfs_fh3 *dir, const char *const *names,
		    const char *when)
{
	fattr3 want, got;
	nfsstat3 st;

	if ((st = list(bob, dir, false, names[0])) != NFS3_OK)
		wrong(when, "READDIR", NULL, st, NFS3_OK);
	if ((st = list(bob, dir, true, names[0])) != NFS3_OK)
		wrong(when, "READDIRPLUS", NULL, st, NFS3_OK);
	for (; *names; names++) {
		if ((st = it_lookup(bob, dir, *names, NULL, &got)) != NFS3_OK) {
			wrong(when, "LOOKUP", *names, st, NFS3_OK);
			continue;
		}
		it_assert_status(it_lookup(alice, dir, *names, NULL, &want), NFS3_OK);
		assert_int_equal(got.fileid, want.fileid);
	}
	if ((st = it_lookup(bob, dir, ".", NULL, NULL)) != NFS3_OK)
		wrong(when, "LOOKUP", ".", st, NFS3_OK);
}

/* A directory alice made 0700 through the server: closed to bob, cached or not. */
static void test_private_dir(void **state)
{
	static const char *const names[] = { "pub", "sub", NULL };
	CLIENT *alice = user(ALICE, ALICE, 0, NULL), *bob = user(BOB, BOB, 0, NULL);
	nfs_fh3 d, sub;
	char path[PATH_MAX];

	(void)state;
	mkdir_as(alice, &root, "private", 0700, &d);
	it_assert_status(it_create(alice, &d, "pub"), NFS3_OK);
	mkdir_as(alice, &d, "sub", 0755, &sub);
	it_path(path, "%s/private", it_srv.is_upper);
	settle(path);
	refused(bob, &d, names, "cold");
	warm(alice, &d, names);
	refused(bob, &d, names, "after alice's calls");
	/* bob's refusals took nothing from alice */
	warm(alice, &d, names);
	it_fh_free(&sub);
	it_fh_free(&d);
	it_clnt_destroy(alice);
	it_clnt_destroy(bob);
	judge();
}

/*
 * A lower directory open to all that alice closed through the server: the upper copy is
 * 0700, the lower one, which holds the names, stays 0755. The union directory is closed.
 */
static void test_closed_over_open_lower(void **state)
{
	static const char *const names[] = { "f", "sd", NULL };
	CLIENT *alice = user(ALICE, ALICE, 0, NULL), *bob = user(BOB, BOB, 0, NULL);
	char path[PATH_MAX];
	nfs_fh3 d;

	(void)state;
	it_path(path, "%s/shared", it_srv.is_lower);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, ALICE, ALICE), 0);
	it_path(path, "%s/shared/f", it_srv.is_lower);
	it_write_file(path, "lower", 5);
	it_path(path, "%s/shared/sd", it_srv.is_lower);
	assert_int_equal(mkdir(path, 0755), 0);
	it_assert_status(it_lookup(alice, &root, "shared", &d, NULL), NFS3_OK);
	chmod_as(alice, &d, 0700);
	it_path(path, "%s/shared", it_srv.is_upper);
	settle(path);
	it_path(path, "%s/shared", it_srv.is_lower);
	settle(path);
	refused(bob, &d, names, "cold");
	warm(alice, &d, names);
	refused(bob, &d, names, "after alice's calls");
	it_fh_free(&d);
	it_clnt_destroy(alice);
	it_clnt_destroy(bob);
	judge();
}

/* 0750: a member of alice's group is served (cached or not), anyone else is not. */
static void test_group_member_allowed(void **state)
{
	static const char *const names[] = { "pub", "sub", NULL };
	gid_t alices[] = { 4242, ALICE };
	CLIENT *alice = user(ALICE, ALICE, 0, NULL);
	CLIENT *member = user(BOB, BOB, 2, alices), *other = user(BOB, BOB, 0, NULL);
	CLIENT *primary = user(BOB, ALICE, 0, NULL);
	nfs_fh3 d, sub;
	char path[PATH_MAX];

	(void)state;
	mkdir_as(alice, &root, "team", 0750, &d);
	it_assert_status(it_create(alice, &d, "pub"), NFS3_OK);
	mkdir_as(alice, &d, "sub", 0755, &sub);
	it_path(path, "%s/team", it_srv.is_upper);
	settle(path);
	refused(other, &d, names, "not in the group, cold");
	allowed(member, alice, &d, names, "supplementary group, cold");
	refused(other, &d, names, "not in the group, after the member's calls");
	warm(alice, &d, names);
	allowed(member, alice, &d, names, "supplementary group, after alice's calls");
	allowed(primary, alice, &d, names, "primary group, after alice's calls");
	refused(other, &d, names, "not in the group, after alice's and the members' calls");
	it_fh_free(&sub);
	it_fh_free(&d);
	it_clnt_destroy(alice);
	it_clnt_destroy(member);
	it_clnt_destroy(other);
	it_clnt_destroy(primary);
	judge();
}

/* POSIX ACL entries (acl_ea_entry of <linux/posix_acl_xattr.h>) by tag. */
enum { ACL_UOBJ = 0x01, ACL_U = 0x02, ACL_GOBJ = 0x04, ACL_M = 0x10, ACL_O = 0x20 };
#define ACL_NO_ID 0xffffffffu

struct acl_ent {
	uint16_t tag;
	uint16_t perm;
	uint32_t id;
};

/*
 * Sets the access ACL of a host path in the kernel's xattr format (the acl package and its
 * setfacl are not needed): user::rwx, user:bob:BOBPERM, group::---, mask::MASK, other::OTHER.
 * Entries are little-endian and sorted by tag, then id.
 */
static void set_acl(const char *path, unsigned bob_perm, unsigned mask, unsigned other)
{
	struct acl_ent e[] = {
		{ ACL_UOBJ, 7, ACL_NO_ID }, { ACL_U, (uint16_t)bob_perm, BOB },
		{ ACL_GOBJ, 0, ACL_NO_ID }, { ACL_M, (uint16_t)mask, ACL_NO_ID },
		{ ACL_O, (uint16_t)other, ACL_NO_ID },
	};
	unsigned char buf[4 + sizeof(e) / sizeof(e[0]) * 8];
	size_t off = 4;

	memset(buf, 0, sizeof(buf));
	buf[0] = 2; /* POSIX_ACL_XATTR_VERSION */
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++, off += 8) {
		buf[off] = (unsigned char)e[i].tag;
		buf[off + 1] = (unsigned char)(e[i].tag >> 8);
		buf[off + 2] = (unsigned char)e[i].perm;
		buf[off + 3] = (unsigned char)(e[i].perm >> 8);
		for (int k = 0; k < 4; k++)
			buf[off + 4 + k] = (unsigned char)(e[i].id >> (8 * k));
	}
	if (setxattr(path, "system.posix_acl_access", buf, sizeof(buf), 0) != 0) {
		if (errno == EOPNOTSUPP)
			skip(); /* /tmp without POSIX ACLs: nothing to check here */
		fail_msg("setxattr system.posix_acl_access on %s: %s", path, strerror(errno));
	}
}

/* A directory of alice's in the upper branch, with a file "f" and a directory "s" in it. */
static void acl_dir(const char *name, mode_t mode, char *path)
{
	char p[PATH_MAX];

	it_path(path, "%s/%s", it_srv.is_upper, name);
	assert_int_equal(mkdir(path, mode), 0);
	assert_int_equal(chmod(path, mode), 0);
	assert_int_equal(chown(path, ALICE, ALICE), 0);
	it_path(p, "%s/f", path);
	it_write_file(p, "x", 1);
	it_path(p, "%s/s", path);
	assert_int_equal(mkdir(p, 0755), 0);
}

/*
 * ACLs decide where the mode bits would answer the other way: 0700 with user:bob:r-x lets
 * bob in (the mode shows 0750 then, the group bits being the mask, and bob is not in the
 * group), and 0755 with user:bob:--- keeps him out though "other" may read and search.
 */
static void test_acl(void **state)
{
	static const char *const names[] = { "f", "s", NULL };
	CLIENT *alice = user(ALICE, ALICE, 0, NULL), *bob = user(BOB, BOB, 0, NULL);
	char grant[PATH_MAX], deny[PATH_MAX];
	nfs_fh3 g, d;

	(void)state;
	acl_dir("acl-grant", 0700, grant);
	set_acl(grant, 5, 5, 0);
	acl_dir("acl-deny", 0755, deny);
	set_acl(deny, 0, 5, 5);
	settle(grant);
	settle(deny);
	it_assert_status(it_lookup(alice, &root, "acl-grant", &g, NULL), NFS3_OK);
	it_assert_status(it_lookup(alice, &root, "acl-deny", &d, NULL), NFS3_OK);
	allowed(bob, alice, &g, names, "user:bob:r-x, cold");
	refused(bob, &d, names, "user:bob:---, cold");
	warm(alice, &g, names);
	warm(alice, &d, names);
	allowed(bob, alice, &g, names, "user:bob:r-x, after alice's calls");
	refused(bob, &d, names, "user:bob:---, after alice's calls");
	it_fh_free(&g);
	it_fh_free(&d);
	it_clnt_destroy(alice);
	it_clnt_destroy(bob);
	judge();
}

#define ACC_ALL (ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | \
		 ACCESS3_DELETE | ACCESS3_EXECUTE)
#define ACC_RW_FILE (ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND)
#define ACC_RWX_DIR (ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE | ACCESS3_MODIFY | \
		     ACCESS3_EXTEND | ACCESS3_DELETE)

/* The ACCESS bits the server grants c on fh, of all there are. */
static uint32_t access_of(CLIENT *c, const nfs_fh3 *fh)
{
	ACCESS3args a = { .object = *fh, .access = ACC_ALL };
	ACCESS3res r;
	enum clnt_stat cs;
	uint32_t bits;

	memset(&r, 0, sizeof(r));
	cs = it_call(c, NFSPROC3_ACCESS, (xdrproc_t)xdr_ACCESS3args, &a,
		     (xdrproc_t)xdr_ACCESS3res, &r);
	if (cs != RPC_SUCCESS)
		fail_msg("ACCESS: %s", clnt_sperrno(cs));
	it_assert_status(r.status, NFS3_OK);
	bits = r.ACCESS3res_u.resok.access;
	it_free((xdrproc_t)xdr_ACCESS3res, &r);
	return bits;
}

static nfsstat3 write_as(CLIENT *c, const nfs_fh3 *fh)
{
	WRITE3args a;
	WRITE3res r;
	enum clnt_stat cs;
	nfsstat3 st;

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.file = *fh;
	a.count = 3;
	a.stable = FILE_SYNC;
	a.data.data_len = 3;
	a.data.data_val = "bob";
	cs = it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a, (xdrproc_t)xdr_WRITE3res,
		     &r);
	if (cs != RPC_SUCCESS)
		fail_msg("WRITE: %s", clnt_sperrno(cs));
	st = r.status;
	it_free((xdrproc_t)xdr_WRITE3res, &r);
	return st;
}

static const char *branch_of(bool lower)
{
	return lower ? it_srv.is_lower : it_srv.is_upper;
}

/* alice's file name (0600 before the ACL) at the root of a branch, with bob's ACL entry. */
static void acl_file(bool lower, const char *name, unsigned bob_perm, unsigned mask)
{
	char path[PATH_MAX];

	it_path(path, "%s/%s", branch_of(lower), name);
	it_write_file(path, "alice", 5);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(chown(path, ALICE, ALICE), 0);
	set_acl(path, bob_perm, mask, 0);
}

static void check_access(const char *what, uint32_t got, uint32_t want)
{
	if (got != want)
		fail_msg("ACCESS of %s: 0x%x, want 0x%x", what, got, want);
}

/*
 * ACCESS says what the kernel lets the caller do, POSIX ACLs included (RFC 1813 3.3.4):
 * clients decide open() and lookups from it, so an ACL that grants must show, and one
 * whose mask holds back must not. A lower object answers for what bob may do once it is
 * copied up, which keeps its ACL: his WRITE or CREATE then works.
 */
static void test_access_acl(void **state)
{
	CLIENT *alice = user(ALICE, ALICE, 0, NULL), *bob = user(BOB, BOB, 0, NULL);
	char path[PATH_MAX];
	nfs_fh3 fh, dir;

	(void)state;
	for (int lower = 0; lower <= 1; lower++) {
		const char *f = lower ? "acc-lf" : "acc-uf", *m = lower ? "acc-lm" : "acc-um";
		const char *d = lower ? "acc-ld" : "acc-ud";

		acl_file(lower, f, 6, 6);
		acl_file(lower, m, 6, 4);
		acl_dir(d, 0700, path);
		if (lower) { /* acl_dir makes it in the upper: move it down */
			char low[PATH_MAX];

			it_path(low, "%s/%s", it_srv.is_lower, d);
			assert_int_equal(rename(path, low), 0);
			strcpy(path, low);
		}
		set_acl(path, 7, 7, 0);

		it_assert_status(it_lookup(alice, &root, f, &fh, NULL), NFS3_OK);
		check_access(f, access_of(bob, &fh), ACC_RW_FILE);
		it_assert_status(write_as(bob, &fh), NFS3_OK);
		check_access(f, access_of(bob, &fh), ACC_RW_FILE);
		it_fh_free(&fh);

		it_assert_status(it_lookup(alice, &root, m, &fh, NULL), NFS3_OK);
		check_access(m, access_of(bob, &fh), ACCESS3_READ);
		it_assert_status(write_as(bob, &fh), NFS3ERR_ACCES);
		it_fh_free(&fh);

		it_assert_status(it_lookup(alice, &root, d, &dir, NULL), NFS3_OK);
		check_access(d, access_of(bob, &dir), ACC_RWX_DIR);
		it_assert_status(it_create(bob, &dir, "bobs"), NFS3_OK);
		check_access(d, access_of(bob, &dir), ACC_RWX_DIR);
		it_fh_free(&dir);
	}
	it_clnt_destroy(alice);
	it_clnt_destroy(bob);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_dir),
		cmocka_unit_test(test_closed_over_open_lower),
		cmocka_unit_test(test_group_member_allowed),
		cmocka_unit_test(test_acl),
		cmocka_unit_test(test_access_acl),
	};

	int failed;

	fprintf(stderr, "== faccessat2 as the kernel has it\n");
	failed = cmocka_run_group_tests_name("kernel", tests, setup, teardown);
	fprintf(stderr, "== faccessat2 failing with ENOSYS (kernels before 5.8)\n");
	failed += cmocka_run_group_tests_name("no_faccessat2", tests, setup_no_faccessat2,
					      teardown);
	return failed;
}
