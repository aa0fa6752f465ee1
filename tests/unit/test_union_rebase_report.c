/*
 * Base versions (rebase.c): union_conflicts over an old and a new stack of lower branches
 * with an upper made by hand in overlayfs's and OCI's formats, and union_take_base.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../rmtree.h"
#include "union.h"

struct rx {
	char dir[PATH_MAX];
	char old[PATH_MAX];          /* old base: one branch */
	char newtop[PATH_MAX];       /* new base: two branches, newtop over newbot */
	char newbot[PATH_MAX];
	char upper[PATH_MAX];
};

static void path_of(char *out, const char *root, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", root, rel);

	assert_true(n > 0 && n < PATH_MAX);
}

static void mkd(const char *root, const char *rel, mode_t mode)
{
	char p[PATH_MAX];

	path_of(p, root, rel);
	assert_int_equal(mkdir(p, mode), 0);
	assert_int_equal(chmod(p, mode), 0);
}

static void put(const char *root, const char *rel, const char *text, mode_t mode)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, root, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void sym(const char *root, const char *rel, const char *target)
{
	char p[PATH_MAX];

	path_of(p, root, rel);
	assert_int_equal(symlink(target, p), 0);
}

static void whiteout(const char *root, const char *rel)
{
	char p[PATH_MAX];

	path_of(p, root, rel);
	assert_int_equal(mknod(p, S_IFCHR, makedev(0, 0)), 0);
}

/* An overlay attribute as the union writes it: trusted.* as root, else user.*. */
static void mark(const char *root, const char *rel, const char *sfx, const char *val)
{
	char p[PATH_MAX], attr[64];

	path_of(p, root, rel);
	snprintf(attr, sizeof(attr), "trusted.overlay.%s", sfx);
	if (lsetxattr(p, attr, val, strlen(val), 0) == 0)
		return;
	snprintf(attr, sizeof(attr), "user.overlay.%s", sfx);
	assert_int_equal(lsetxattr(p, attr, val, strlen(val), 0), 0);
}

/* A metacopy as overlayfs makes one: size of the data, no bytes, the marker. */
static void metacopy(const char *root, const char *rel, off_t size, const char *redirect)
{
	char p[PATH_MAX];

	put(root, rel, "", 0644);
	path_of(p, root, rel);
	assert_int_equal(truncate(p, size), 0);
	mark(root, rel, "metacopy", "");
	if (redirect)
		mark(root, rel, "redirect", redirect);
}

static bool exists(const char *root, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;

	path_of(p, root, rel);
	return lstat(p, &st) == 0;
}

static int setup(void **state)
{
	struct rx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	strcpy(x->dir, "/tmp/test_rebase.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	path_of(x->old, x->dir, "old");
	path_of(x->newtop, x->dir, "newtop");
	path_of(x->newbot, x->dir, "newbot");
	path_of(x->upper, x->dir, "upper");
	assert_int_equal(mkdir(x->old, 0755), 0);
	assert_int_equal(mkdir(x->newtop, 0755), 0);
	assert_int_equal(mkdir(x->newbot, 0755), 0);
	assert_int_equal(mkdir(x->upper, 0755), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct rx *x = *state;

	assert_int_equal(rm_tree(x->dir), 0);
	free(x);
	return 0;
}

/*
 * The same tree in the old base and the new base's bottom branch; what differs is added by
 * each test. The upper gets plain directories at the same places.
 */
static void common(struct rx *x)
{
	const char *both[] = { x->old, x->newbot };

	for (int i = 0; i < 2; i++) {
		mkd(both[i], "etc", 0755);
		put(both[i], "etc/same", "same\n", 0644);
		mkd(both[i], "bin", 0755);
		put(both[i], "bin/keep", "keep\n", 0755);
		mkd(both[i], "data", 0755);
		put(both[i], "data/meta_same", "0123456789", 0644);
	}
	mkd(x->upper, "etc", 0755);
	mkd(x->upper, "bin", 0755);
	mkd(x->upper, "data", 0755);
}

#define MAX_FOUND 64

struct got {
	int n;
	char line[MAX_FOUND][PATH_MAX];
	int stop_at;                 /* the call that returns non-zero; 0: none */
};

static int collect(const struct union_conflict *c, void *arg)
{
	struct got *g = arg;

	assert_true(g->n < MAX_FOUND);
	snprintf(g->line[g->n++], PATH_MAX, "%s %s %s", c->uc_path,
		 union_upper_kind_name(c->uc_kind), union_base_change_name(c->uc_change));
	return g->n == g->stop_at ? 42 : 0;
}

static void report(struct rx *x, struct got *g)
{
	char *old[] = { x->old };
	char *new[] = { x->newtop, x->newbot };
	char err[512] = "";

	memset(g, 0, sizeof(*g));
	assert_int_equal(union_conflicts(x->upper, old, 1, new, 2, collect, g, err,
					 sizeof(err)), 0);
	assert_string_equal(err, "");
}

/* The report is exactly want, in that order. */
static void expect(const struct got *g, const char *const *want, int n)
{
	for (int i = 0; i < g->n; i++)
		print_message("  got: %s\n", g->line[i]);
	assert_int_equal(g->n, n);
	for (int i = 0; i < n; i++)
		assert_string_equal(g->line[i], want[i]);
}

/* Files a client copied, deleted or changed the attributes of, against base changes. */
static void test_files(void **state)
{
	struct rx *x = *state;
	const char *both[] = { x->old, x->newbot };
	struct got g;

	common(x);
	/* Changed in the new base, copied by the client. */
	put(x->old, "etc/motd", "hello\n", 0644);
	put(x->newbot, "etc/motd", "hello v2\n", 0644);
	put(x->upper, "etc/motd", "client's\n", 0644);
	/* The same length, other bytes. */
	put(x->old, "etc/issue", "abcd", 0644);
	put(x->newbot, "etc/issue", "abce", 0644);
	put(x->upper, "etc/issue", "mine", 0644);
	/* Unchanged, copied. */
	put(x->upper, "etc/same", "client's own\n", 0644);
	/* Removed in the new base, modified by the client. */
	put(x->old, "etc/hosts", "127.0.0.1\n", 0644);
	put(x->upper, "etc/hosts", "10.0.0.1\n", 0644);
	/* Added in the new base where the client has a file of its own. */
	put(x->newbot, "new.txt", "new\n", 0644);
	put(x->upper, "new.txt", "client's\n", 0644);
	/* Deleted by the client (a whiteout of each form): changed and unchanged ones. */
	put(x->old, "bin/tool", "a", 0755);
	put(x->newbot, "bin/tool", "b", 0755);
	whiteout(x->upper, "bin/tool");
	put(x->old, "bin/tool2", "a", 0755);
	put(x->newbot, "bin/tool2", "bb", 0755);
	put(x->upper, "bin/.wh.tool2", "", 0644);
	whiteout(x->upper, "bin/keep");
	put(x->upper, "bin/.wh.same_too", "", 0644);
	for (int i = 0; i < 2; i++)
		put(both[i], "bin/same_too", "s", 0755);
	/* Metacopies: of a changed file, and of an unchanged one. */
	put(x->old, "data/meta", "0123456789", 0644);
	put(x->newbot, "data/meta", "9876543210", 0644);
	metacopy(x->upper, "data/meta", 10, NULL);
	metacopy(x->upper, "data/meta_same", 10, NULL);
	/* A symlink whose target changed; a mode-only change; an owner-only change. */
	sym(x->old, "link", "a");
	sym(x->newbot, "link", "b");
	sym(x->upper, "link", "c");
	put(x->old, "modeonly", "m", 0644);
	put(x->newbot, "modeonly", "m", 0600);
	put(x->upper, "modeonly", "m", 0644);
	put(x->old, "owner", "o", 0644);
	put(x->newbot, "owner", "o", 0644);
	{
		char p[PATH_MAX];

		path_of(p, x->newbot, "owner");
		assert_int_equal(lchown(p, 1234, 1234), 0);
	}
	put(x->upper, "owner", "o", 0644);
	report(x, &g);
	const char *want[] = {
		"/bin/tool whiteout changed",
		"/bin/tool2 whiteout changed",
		"/data/meta metacopy changed",
		"/etc/hosts copy removed",
		"/etc/issue copy changed",
		"/etc/motd copy changed",
		"/link copy changed",
		"/modeonly copy changed",
		"/new.txt copy added",
		"/owner copy changed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));
}

/* The new base's own markers: a whiteout in its top branch removes what its bottom has. */
static void test_lower_markers(void **state)
{
	struct rx *x = *state;
	const char *both[] = { x->old, x->newbot };
	struct got g;

	common(x);
	for (int i = 0; i < 2; i++) {
		put(both[i], "gone", "g", 0644);
		put(both[i], "gone_oci", "g", 0644);
		mkd(both[i], "lib", 0755);
		put(both[i], "lib/x", "x", 0644);
		put(both[i], "lib/y", "y", 0644);
		put(both[i], "lib/z", "z", 0644);
	}
	whiteout(x->newtop, "gone");
	put(x->newtop, ".wh.gone_oci", "", 0644);
	/* An opaque directory in the new top hides the bottom's lib/y and lib/z. */
	mkd(x->newtop, "lib", 0755);
	mark(x->newtop, "lib", "opaque", "y");
	put(x->newtop, "lib/x", "x", 0644);
	put(x->newtop, "lib/z", "z", 0644);
	/* The OCI form: ".wh.share" beside the top's share; the user.* xattr form on etc2. */
	for (int i = 0; i < 2; i++) {
		mkd(both[i], "share", 0755);
		put(both[i], "share/a", "a", 0644);
		mkd(both[i], "etc2", 0755);
		put(both[i], "etc2/a", "a", 0644);
	}
	mkd(x->newtop, "share", 0755);
	put(x->newtop, ".wh.share", "", 0644);
	mkd(x->newtop, "etc2", 0755);
	{
		char p[PATH_MAX];

		path_of(p, x->newtop, "etc2");
		assert_int_equal(lsetxattr(p, "user.overlay.opaque", "y", 1, 0), 0);
	}
	mkd(x->upper, "share", 0755);
	put(x->upper, "share/a", "client's", 0644);
	mkd(x->upper, "etc2", 0755);
	put(x->upper, "etc2/a", "client's", 0644);
	put(x->upper, "gone", "client's", 0644);
	put(x->upper, "gone_oci", "client's", 0644);
	mkd(x->upper, "lib", 0755);
	put(x->upper, "lib/x", "client's", 0644);
	put(x->upper, "lib/y", "client's", 0644);
	put(x->upper, "lib/z", "client's", 0644);
	report(x, &g);
	const char *want[] = {
		"/etc2/a copy removed",
		"/gone copy removed",
		"/gone_oci copy removed",
		"/lib/y copy removed",
		"/share/a copy removed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));
}

/* Opaque upper directories: reported when anything under the base directory differs. */
static void test_opaque(void **state)
{
	struct rx *x = *state;
	const char *both[] = { x->old, x->newbot };
	struct got g;

	common(x);
	for (int i = 0; i < 2; i++) {
		mkd(both[i], "opq", 0755);
		mkd(both[i], "opq/a", 0755);
		put(both[i], "opq/a/b", "b", 0644);
		mkd(both[i], "same", 0755);
		mkd(both[i], "same/a", 0755);
		put(both[i], "same/a/b", "b", 0644);
		mkd(both[i], "deep", 0755);
		mkd(both[i], "deep/a", 0755);
	}
	put(x->newbot, "opq/a/b", "B", 0644);            /* changed deep down */
	put(x->newbot, "deep/a/added", "new", 0644);     /* added deep down */
	/* Each opaque form: the xattr, ".wh..wh..opq" inside, ".wh.NAME" beside. */
	mkd(x->upper, "opq", 0755);
	mark(x->upper, "opq", "opaque", "y");
	mkd(x->upper, "same", 0755);
	put(x->upper, "same/.wh..wh..opq", "", 0644);
	put(x->upper, "same/mine", "m", 0644);
	mkd(x->upper, "deep", 0755);
	put(x->upper, ".wh.deep", "", 0644);
	put(x->upper, "deep/a", "a file where the base has a directory", 0644);
	report(x, &g);
	const char *want[] = {
		"/deep opaque changed",
		"/opq opaque changed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));
}

/* Redirected directories and metacopies: lower copies found at the redirect's target. */
static void test_redirects(void **state)
{
	struct rx *x = *state;
	const char *both[] = { x->old, x->newbot };
	struct got g;

	common(x);
	for (int i = 0; i < 2; i++) {
		mkd(both[i], "src", 0755);
		put(both[i], "src/x", i ? "x2" : "x1", 0644);
		put(both[i], "data/same_data", "0123", 0644);
	}
	mkd(x->old, "olddir", 0755);
	put(x->old, "data/orig", "0123", 0644);
	/* A directory renamed by the client: its entries hide the base's src/... */
	mkd(x->upper, "moved", 0755);
	mark(x->upper, "moved", "redirect", "/src");
	put(x->upper, "moved/x", "client's", 0644);
	/* ... one renamed within its parent (a relative redirect) from what the new base lost. */
	mkd(x->upper, "renamed", 0755);
	mark(x->upper, "renamed", "redirect", "olddir");
	/* Metacopies renamed by the client: data gone, data unchanged. */
	metacopy(x->upper, "data/mc_gone", 4, "/data/orig");
	metacopy(x->upper, "data/mc_same", 4, "/data/same_data");
	report(x, &g);
	const char *want[] = {
		"/data/mc_gone redirect-missing removed",
		"/moved/x copy changed",
		"/renamed redirect-missing removed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));
}

/* The union's own names are never reported; the report is sorted by path. */
static void test_internal_and_order(void **state)
{
	struct rx *x = *state;
	struct got g;

	common(x);
	mkd(x->upper, ".unionnfsd.work", 0700);
	put(x->upper, ".unionnfsd.work/copyup.1", "half a copy", 0644);
	put(x->upper, ".wh..unionnfsd.tmp1", "", 0644);
	put(x->upper, "etc/.wh..unionnfsd.tmp2", "", 0644);
	/* Changed in the base, under names the union keeps to itself. */
	mkd(x->old, ".unionnfsd.work", 0700);
	put(x->old, ".unionnfsd.work/copyup.1", "old", 0644);
	put(x->old, ".unionnfsd.tmp1", "old", 0644);
	/* Paths whose order differs from a walk's: "/a.b" sorts before "/a/x". */
	mkd(x->old, "a", 0755);
	mkd(x->newbot, "a", 0755);
	put(x->old, "a/x", "1", 0644);
	put(x->newbot, "a/x", "2", 0644);
	put(x->old, "a.b", "1", 0644);
	put(x->newbot, "a.b", "2", 0644);
	put(x->old, "a-", "1", 0644);
	put(x->newbot, "a-", "2", 0644);
	mkd(x->upper, "a", 0755);
	put(x->upper, "a/x", "mine", 0644);
	put(x->upper, "a.b", "mine", 0644);
	put(x->upper, "a-", "mine", 0644);
	report(x, &g);
	const char *want[] = {
		"/a- copy changed",
		"/a.b copy changed",
		"/a/x copy changed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));
	for (int i = 1; i < g.n; i++)
		assert_true(strcmp(g.line[i - 1], g.line[i]) < 0);
}

/* fn's non-zero return stops the report and is returned; bad arguments are refused. */
static void test_stop_and_errors(void **state)
{
	struct rx *x = *state;
	char *old[] = { x->old };
	char *new[] = { x->newtop, x->newbot };
	char *missing[] = { "/nonexistent/base" };
	char err[512];
	struct got g = { .stop_at = 1 };

	common(x);
	put(x->old, "etc/motd", "1", 0644);
	put(x->newbot, "etc/motd", "2", 0644);
	put(x->upper, "etc/motd", "3", 0644);
	put(x->old, "etc/hosts", "1", 0644);
	put(x->upper, "etc/hosts", "3", 0644);
	assert_int_equal(union_conflicts(x->upper, old, 1, new, 2, collect, &g, err,
					 sizeof(err)), 42);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.line[0], "/etc/hosts copy removed");

	assert_int_equal(union_conflicts(x->upper, old, 0, new, 2, collect, &g, err,
					 sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "old base"));
	assert_int_equal(union_conflicts(x->upper, old, 1, missing, 1, collect, &g, err,
					 sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/base"));
	assert_int_equal(union_conflicts("/nonexistent/upper", old, 1, new, 2, collect, &g,
					 err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/upper"));
}

/* A listing of a tree with each entry's type, mode, owner, size, target or bytes. */
static char *snap;
static size_t snap_len;

static int snap_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	char buf[256] = "";
	FILE *f;
	int n;

	(void)flag;
	(void)ftw;
	if (S_ISLNK(st->st_mode)) {
		n = (int)readlink(path, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
	} else if (S_ISREG(st->st_mode) && (f = fopen(path, "r"))) {
		buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
		fclose(f);
	}
	n = snprintf(NULL, 0, "%s %o %u %u %lld [%s]\n", path, st->st_mode, st->st_uid,
		     st->st_gid, (long long)st->st_size, buf);
	snap = realloc(snap, snap_len + (size_t)n + 1);
	assert_non_null(snap);
	snprintf(snap + snap_len, (size_t)n + 1, "%s %o %u %u %lld [%s]\n", path, st->st_mode,
		 st->st_uid, st->st_gid, (long long)st->st_size, buf);
	snap_len += (size_t)n;
	return 0;
}

static char *snapshot(const struct rx *x)
{
	char *s;

	snap = NULL;
	snap_len = 0;
	assert_int_equal(nftw(x->old, snap_one, 16, FTW_PHYS), 0);
	assert_int_equal(nftw(x->newtop, snap_one, 16, FTW_PHYS), 0);
	assert_int_equal(nftw(x->newbot, snap_one, 16, FTW_PHYS), 0);
	s = snap;
	snap = NULL;
	return s;
}

static int take(struct rx *x, const char *path, char *err, size_t len)
{
	err[0] = '\0';
	return union_take_base(x->upper, path, err, len);
}

static void test_take_base(void **state)
{
	struct rx *x = *state;
	char err[512], *before, *after;
	struct got g;

	common(x);
	put(x->old, "etc/motd", "1", 0644);
	put(x->newbot, "etc/motd", "2", 0644);
	put(x->upper, "etc/motd", "3", 0644);
	put(x->old, "bin/tool", "1", 0755);
	put(x->newbot, "bin/tool", "2", 0755);
	whiteout(x->upper, "bin/tool");
	put(x->old, "bin/tool2", "1", 0755);
	put(x->newbot, "bin/tool2", "2", 0755);
	put(x->upper, "bin/.wh.tool2", "", 0644);
	mkd(x->old, "opq", 0755);
	mkd(x->newbot, "opq", 0755);
	put(x->old, "opq/f", "1", 0644);
	put(x->newbot, "opq/f", "2", 0644);
	mkd(x->upper, "opq", 0755);
	mark(x->upper, "opq", "opaque", "y");
	mkd(x->upper, "opq/sub", 0755);
	put(x->upper, "opq/sub/deep", "d", 0644);
	sym(x->upper, "opq/sub/out", x->old);
	/* A client's symlink into a base: what is below it must never be reached. */
	{
		char target[PATH_MAX];

		path_of(target, x->old, "etc");
		sym(x->upper, "sl", target);
	}
	before = snapshot(x);
	report(x, &g);
	const char *want[] = {
		"/bin/tool whiteout changed",
		"/bin/tool2 whiteout changed",
		"/etc/motd copy changed",
		"/opq opaque changed",
	};
	expect(&g, want, sizeof(want) / sizeof(want[0]));

	assert_int_equal(take(x, "/etc/motd", err, sizeof(err)), 0);
	assert_false(exists(x->upper, "etc/motd"));
	assert_true(exists(x->upper, "etc"));
	assert_int_equal(take(x, "/bin/tool", err, sizeof(err)), 0);
	assert_false(exists(x->upper, "bin/tool"));
	assert_int_equal(take(x, "/bin/tool2", err, sizeof(err)), 0);
	assert_false(exists(x->upper, "bin/.wh.tool2"));
	assert_int_equal(take(x, "/opq", err, sizeof(err)), 0);
	assert_false(exists(x->upper, "opq"));
	report(x, &g);
	expect(&g, NULL, 0);

	/* Nothing there: the base shows already. */
	assert_int_equal(take(x, "/etc/motd", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "nothing at /etc/motd"));
	assert_int_equal(take(x, "/nodir/x", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nodir/x"));
	/* Paths that name no client entry. */
	assert_int_equal(take(x, "/", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "root"));
	assert_int_equal(take(x, "/etc/../etc/same", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "\"..\""));
	assert_int_equal(take(x, "/etc/./same", err, sizeof(err)), -EINVAL);
	assert_int_equal(take(x, "//etc", err, sizeof(err)), -EINVAL);
	assert_int_equal(take(x, "/etc/", err, sizeof(err)), -EINVAL);
	assert_int_equal(take(x, "etc/same", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "leading '/'"));
	assert_int_equal(take(x, "/.unionnfsd.work", err, sizeof(err)), -EINVAL);
	assert_int_equal(take(x, "/etc/.wh.same", err, sizeof(err)), -EINVAL);
	/* A symlinked parent is not followed: the base file it points at stays. */
	assert_int_equal(take(x, "/sl/same", err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "/sl/same"));
	assert_true(exists(x->old, "etc/same"));
	/* The symlink itself is the client's entry. */
	assert_int_equal(take(x, "/sl", err, sizeof(err)), 0);
	assert_false(exists(x->upper, "sl"));

	after = snapshot(x);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lower_markers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_opaque, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redirects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_internal_and_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_base, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
