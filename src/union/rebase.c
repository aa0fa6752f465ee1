/*
 * Base versions (union.h): which of a client's own upper entries hide base files that
 * differ between its old stack of lower branches and a new one, and dropping a chosen
 * entry so the base shows through.
 *
 * A stack is looked up as the union would look it up with no upper: the topmost branch
 * having a name decides, a whiteout (or an OCI ".wh.NAME" beside the absent name) hides it
 * from there down, and a directory merges with those of the same name below it until one
 * is opaque (or has a ".wh.NAME" beside it) or something else is found. Redirects and
 * metacopies inside the lower branches are not followed: a lower branch's renamed
 * directory shows its own contents only, a lower metacopy its own bytes.
 *
 * Everything runs as root: the report must not depend on what its caller may read.
 *
 * Before an upper moves to a new stack, its metacopies are completed from the old one
 * (union_complete_metacopies, at the end).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "log.h"
#include "uint.h"

#define RB_CHUNK 65536

/* The roots of one stack of lower branches, top first. */
struct rb_stack {
	int st_n;
	int st_fd[UNION_MAX_BRANCHES];
};

/* What a stack shows at one path. */
struct rb_view {
	bool vw_present;
	struct stat vw_st;               /* lstat of the copy that decides */
	int vw_pfd;                      /* non-directories: the directory holding it (owned) */
	char vw_name[STORE_NAME_MAX + 1];
	int vw_n;                        /* directories: every merged copy (owned) */
	int vw_fd[UNION_MAX_BRANCHES];
};

static void rb_view_init(struct rb_view *v)
{
	memset(v, 0, sizeof(*v));
	v->vw_pfd = -1;
}

static void rb_view_release(struct rb_view *v)
{
	fsio_close(v->vw_pfd);
	for (int i = 0; i < v->vw_n; i++)
		fsio_close(v->vw_fd[i]);
	rb_view_init(v);
}

static bool rb_is_dir(const struct rb_view *v)
{
	return v->vw_present && S_ISDIR(v->vw_st.st_mode);
}

static void rb_stack_close(struct rb_stack *s)
{
	for (int i = 0; i < s->st_n; i++)
		fsio_close(s->st_fd[i]);
	s->st_n = 0;
}

static int rb_stack_open(const char *which, char *const *paths, int n, struct rb_stack *s,
			 char *err, size_t errlen)
{
	char canon[4096];
	int r;

	s->st_n = 0;
	if (n < 1 || n > UNION_MAX_BRANCHES) {
		err_set(err, errlen, "%s base: %d branches; give 1 to %d", which, n,
			UNION_MAX_BRANCHES);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		r = fsio_open_root(paths[i], canon, sizeof(canon), &s->st_fd[i]);
		if (r < 0) {
			err_set(err, errlen, "%s base: branch %s: %s; give an existing directory",
				which, paths[i], strerror(-r));
			rb_stack_close(s);
			return r;
		}
		s->st_n++;
	}
	return 0;
}

/* The root of a stack: every branch's root merged. */
static int rb_root(const struct rb_stack *s, struct rb_view *v)
{
	int r;

	rb_view_init(v);
	r = fsio_statat(s->st_fd[0], "", &v->vw_st);
	for (int i = 0; r == 0 && i < s->st_n; i++) {
		r = fsio_dup(s->st_fd[i], &v->vw_fd[i]);
		if (r == 0)
			v->vw_n++;
	}
	if (r < 0)
		rb_view_release(v);
	else
		v->vw_present = true;
	return r;
}

/* Adds directory name of pfd to the merge; 1 when copies below may join, 0 when not. */
static int rb_merge_add(struct rb_view *v, int pfd, const char *name)
{
	char *redirect = NULL;
	bool opaque;
	int r, fd;

	r = fsio_open_dir(pfd, name, &fd);
	if (r < 0)
		return r;
	v->vw_fd[v->vw_n++] = fd;
	r = uwh_dir_read(fd, &opaque, &redirect);
	free(redirect);
	if (r < 0)
		return r;
	return !opaque && !uwh_oci(pfd, name);
}

/* What dir shows at its entry name: v (initialised here) tells. */
static int rb_step(const struct rb_view *dir, const char *name, struct rb_view *v)
{
	struct stat st;
	int r, i;

	rb_view_init(v);
	for (i = 0; i < dir->vw_n; i++) {
		r = fsio_statat(dir->vw_fd[i], name, &v->vw_st);
		if (r == 0)
			break;
		if (r != -ENOENT)
			return r;
		if (uwh_oci(dir->vw_fd[i], name))
			return 0;
	}
	if (i == dir->vw_n || uwh_is_whiteout(dir->vw_fd[i], name, &v->vw_st))
		return 0;
	v->vw_present = true;
	if (!S_ISDIR(v->vw_st.st_mode)) {
		strcpy(v->vw_name, name);
		r = fsio_dup(dir->vw_fd[i], &v->vw_pfd);
		goto out;
	}
	r = rb_merge_add(v, dir->vw_fd[i], name);
	while (r == 1 && ++i < dir->vw_n) {
		r = fsio_statat(dir->vw_fd[i], name, &st);
		if (r == -ENOENT) {
			r = uwh_oci(dir->vw_fd[i], name) ? 0 : 1;
			continue;
		}
		/* A whiteout or a non-directory ends the merge. */
		if (r == 0 && S_ISDIR(st.st_mode))
			r = rb_merge_add(v, dir->vw_fd[i], name);
	}
out:
	if (r < 0)
		rb_view_release(v);
	return r < 0 ? r : 0;
}

/* What a stack shows at path ("/a/b"): made by the walk, from names the upper lists. */
static int rb_lookup(const struct rb_stack *s, const char *path, struct rb_view *v)
{
	char name[STORE_NAME_MAX + 1];
	const char *p = path, *e;
	struct rb_view next;
	int r;

	r = rb_root(s, v);
	while (r == 0 && *p == '/' && p[1]) {
		size_t len;

		p++;
		e = strchrnul(p, '/');
		len = (size_t)(e - p);
		if (len > STORE_NAME_MAX) {
			rb_view_release(v);
			return -ENAMETOOLONG;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p = e;
		if (!rb_is_dir(v)) {
			rb_view_release(v);
			return 0; /* absent: nothing lies below a non-directory */
		}
		r = rb_step(v, name, &next);
		rb_view_release(v);
		*v = next;
	}
	return r;
}

/* Whether two regular files hold the same bytes (sizes are equal): 1 when they differ. */
static int rb_bytes_differ(const struct rb_view *a, const struct rb_view *b)
{
	char *buf = NULL;
	int fa = -1, fb = -1, r;
	size_t da, db;

	r = fsio_open_file(a->vw_pfd, a->vw_name, O_RDONLY, 0, &fa);
	if (r == 0)
		r = fsio_open_file(b->vw_pfd, b->vw_name, O_RDONLY, 0, &fb);
	if (r == 0 && !(buf = malloc(2 * RB_CHUNK)))
		r = -ENOMEM;
	for (uint64_t off = 0; r == 0 && off < (uint64_t)a->vw_st.st_size; off += da) {
		r = fsio_pread(fa, buf, RB_CHUNK, off, &da);
		if (r == 0)
			r = fsio_pread(fb, buf + RB_CHUNK, RB_CHUNK, off, &db);
		if (r < 0)
			break;
		if (da != db || memcmp(buf, buf + RB_CHUNK, da))
			r = 1;
		else if (da == 0)
			break; /* shrunk while read: the sizes said they match */
	}
	free(buf);
	fsio_close(fa);
	fsio_close(fb);
	return r;
}

static int rb_link_differs(const struct rb_view *a, const struct rb_view *b)
{
	char ta[4096], tb[4096];
	size_t la, lb;
	int r;

	r = fsio_readlink(a->vw_pfd, a->vw_name, ta, sizeof(ta), &la);
	if (r == 0)
		r = fsio_readlink(b->vw_pfd, b->vw_name, tb, sizeof(tb), &lb);
	if (r < 0)
		return r;
	return la != lb || memcmp(ta, tb, la);
}

/* The sorted, distinct names the copies of two directories show, the union's own left out. */
struct rb_names {
	char **nm_v;
	size_t nm_n, nm_cap;
};

static void rb_names_free(struct rb_names *l)
{
	for (size_t i = 0; i < l->nm_n; i++)
		free(l->nm_v[i]);
	free(l->nm_v);
	memset(l, 0, sizeof(*l));
}

static int rb_names_add(struct rb_names *l, const char *name)
{
	if (l->nm_n == l->nm_cap) {
		size_t cap = l->nm_cap ? 2 * l->nm_cap : 32;
		char **v = realloc(l->nm_v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->nm_v = v;
		l->nm_cap = cap;
	}
	l->nm_v[l->nm_n] = strdup(name);
	if (!l->nm_v[l->nm_n])
		return -ENOMEM;
	l->nm_n++;
	return 0;
}

static int rb_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void rb_names_sort(struct rb_names *l)
{
	size_t out = 0;

	if (l->nm_n == 0)
		return; /* nm_v may be NULL, which qsort must not get */
	qsort(l->nm_v, l->nm_n, sizeof(*l->nm_v), rb_strcmp);
	for (size_t i = 0; i < l->nm_n; i++) {
		if (out > 0 && !strcmp(l->nm_v[out - 1], l->nm_v[i]))
			free(l->nm_v[i]);
		else
			l->nm_v[out++] = l->nm_v[i];
	}
	l->nm_n = out;
}

/* Whether a name in a directory (at the root when top) is the union's own. */
static bool rb_hidden(bool top, const char *name)
{
	return uname_hidden(top ? STORE_ROOT_INO : 0, name);
}

static int rb_list(const struct rb_view *v, bool top, struct rb_names *l)
{
	struct fsio_dir *d;
	const char *ent;
	unsigned char type;
	int r = 0;

	for (int i = 0; r == 0 && i < v->vw_n; i++) {
		d = NULL;
		r = fsio_dir_open(v->vw_fd[i], &d);
		while (r == 0 && (r = fsio_dir_next(d, &ent, &type, NULL)) == 1)
			r = rb_hidden(top, ent) ? 0 : rb_names_add(l, ent);
		fsio_dir_close(d);
	}
	return r;
}

static int rb_differ(const struct rb_view *a, const struct rb_view *b, bool top, int depth);

/* Whether any name under two directories shows differently: 1 when so. */
static int rb_dir_differs(const struct rb_view *a, const struct rb_view *b, bool top, int depth)
{
	struct rb_names l = { 0 };
	struct rb_view ca, cb;
	int r;

	if (depth >= UNION_MAX_DEPTH)
		return -ELOOP;
	r = rb_list(a, top, &l);
	if (r == 0)
		r = rb_list(b, top, &l);
	if (r == 0)
		rb_names_sort(&l);
	for (size_t i = 0; r == 0 && i < l.nm_n; i++) {
		r = rb_step(a, l.nm_v[i], &ca);
		if (r < 0)
			break;
		r = rb_step(b, l.nm_v[i], &cb);
		if (r == 0) {
			if (ca.vw_present != cb.vw_present)
				r = 1;
			else if (ca.vw_present)
				r = rb_differ(&ca, &cb, false, depth + 1);
			rb_view_release(&cb);
		}
		rb_view_release(&ca);
	}
	rb_names_free(&l);
	return r;
}

/* Whether two present views differ: 1 when so, 0 when not, or -errno. */
static int rb_differ(const struct rb_view *a, const struct rb_view *b, bool top, int depth)
{
	const struct stat *sa = &a->vw_st, *sb = &b->vw_st;

	if (sa->st_mode != sb->st_mode || sa->st_uid != sb->st_uid || sa->st_gid != sb->st_gid)
		return 1;
	switch (sa->st_mode & S_IFMT) {
	case S_IFREG:
		return sa->st_size != sb->st_size ? 1 : rb_bytes_differ(a, b);
	case S_IFLNK:
		return rb_link_differs(a, b);
	case S_IFCHR:
	case S_IFBLK:
		return sa->st_rdev != sb->st_rdev;
	case S_IFDIR:
		return rb_dir_differs(a, b, top, depth);
	default:
		return 0;
	}
}

/* One walk of an upper. */
struct rb_walk {
	struct rb_stack wk_old, wk_new;
	struct union_conflict *wk_found;
	size_t wk_n, wk_cap;
	const char *wk_upper;
	char *wk_err;
	size_t wk_errlen;
};

static int rb_found(struct rb_walk *w, const char *upath, enum union_upper_kind kind,
		    enum union_base_change change)
{
	struct union_conflict *c;

	if (w->wk_n == w->wk_cap) {
		size_t cap = w->wk_cap ? 2 * w->wk_cap : 16;

		c = realloc(w->wk_found, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		w->wk_found = c;
		w->wk_cap = cap;
	}
	c = &w->wk_found[w->wk_n];
	c->uc_path = strdup(upath);
	if (!c->uc_path)
		return -ENOMEM;
	c->uc_kind = kind;
	c->uc_change = change;
	w->wk_n++;
	return 0;
}

/* Looks bpath up in both stacks. */
static int rb_both(struct rb_walk *w, const char *bpath, struct rb_view *o, struct rb_view *n)
{
	int r = rb_lookup(&w->wk_old, bpath, o);

	if (r < 0)
		return r;
	r = rb_lookup(&w->wk_new, bpath, n);
	if (r < 0)
		rb_view_release(o);
	return r;
}

/* Reports upath (of kind) when the base at bpath differs between the stacks. */
static int rb_check(struct rb_walk *w, const char *upath, const char *bpath,
		    enum union_upper_kind kind)
{
	struct rb_view o, n;
	int r = rb_both(w, bpath, &o, &n);

	if (r < 0)
		return r;
	if (o.vw_present && !n.vw_present)
		r = rb_found(w, upath, kind, UNION_BASE_REMOVED);
	else if (!o.vw_present && n.vw_present)
		r = rb_found(w, upath, kind, UNION_BASE_ADDED);
	else if (o.vw_present) {
		r = rb_differ(&o, &n, !strcmp(bpath, "/"), 0);
		if (r == 1)
			r = rb_found(w, upath, kind, UNION_BASE_CHANGED);
	}
	rb_view_release(&o);
	rb_view_release(&n);
	return r;
}

/*
 * An entry whose lower copies are at a redirect's target (target: the base path it names):
 * redirect-missing when the target was there as wanted (a directory when dir) in the old
 * stack and is not in the new one; otherwise, for a metacopy, its data compared.
 */
static int rb_check_redirect(struct rb_walk *w, const char *upath, const char *target,
			     bool dir)
{
	enum union_base_change change;
	struct rb_view o, n;
	bool was, is;
	int r = rb_both(w, target, &o, &n);

	if (r < 0)
		return r;
	was = dir ? rb_is_dir(&o) : o.vw_present;
	is = dir ? rb_is_dir(&n) : n.vw_present;
	change = n.vw_present ? UNION_BASE_CHANGED : UNION_BASE_REMOVED;
	rb_view_release(&o);
	rb_view_release(&n);
	if (was && !is)
		return rb_found(w, upath, UNION_UPPER_REDIRECT_MISSING, change);
	return dir ? 0 : rb_check(w, upath, target, UNION_UPPER_METACOPY);
}

/* parent + "/" + name, or "/" + name at the root (malloc). */
static char *rb_join(const char *parent, const char *name)
{
	size_t pl = strlen(parent);
	char *p;

	if (pl == 1)
		pl = 0;
	p = malloc(pl + 1 + strlen(name) + 1);
	if (p) {
		memcpy(p, parent, pl);
		p[pl] = '/';
		strcpy(p + pl + 1, name);
	}
	return p;
}

/* Where a redirect read beside base path bpath sends the lookup (malloc). */
static char *rb_redirect_target(const char *bpath, const char *redirect)
{
	char *parent, *t;

	if (redirect[0] == '/')
		return strdup(redirect);
	parent = strdup(bpath);
	if (!parent)
		return NULL;
	*strrchr(parent, '/') = '\0';
	t = rb_join(*parent ? parent : "/", redirect);
	free(parent);
	return t;
}

static int rb_walk_dir(struct rb_walk *w, int ufd, const char *upath, const char *bpath,
		       int depth);

/* The upper's directory name in ufd: opaque, redirected or merged. */
static int rb_upper_dir(struct rb_walk *w, int ufd, const char *name, const char *upath,
			const char *bpath, int depth)
{
	char *redirect = NULL, *target = NULL;
	bool opaque;
	int r, fd;

	r = fsio_open_dir(ufd, name, &fd);
	if (r < 0)
		return r;
	r = uwh_dir_read(fd, &opaque, &redirect);
	if (r == 0 && (opaque || uwh_oci(ufd, name))) {
		/* Nothing under it shows the base: the base directory as a whole is hidden. */
		r = rb_check(w, upath, bpath, UNION_UPPER_OPAQUE);
		goto out;
	}
	if (r == 0 && redirect) {
		target = rb_redirect_target(bpath, redirect);
		r = target ? rb_check_redirect(w, upath, target, true) : -ENOMEM;
	}
	if (r == 0)
		r = rb_walk_dir(w, fd, upath, target ? target : bpath, depth + 1);
out:
	free(target);
	free(redirect);
	fsio_close(fd);
	return r;
}

/* One name of an upper directory. */
static int rb_upper_entry(struct rb_walk *w, int ufd, const char *name, const char *upath,
			  const char *bpath, int depth)
{
	char *redirect = NULL, *target;
	struct stat st;
	bool meta;
	int r;

	r = uwh_statat(ufd, name, &st);
	if (r == -ENOENT)
		return 0; /* gone since listed */
	if (r < 0)
		return r;
	if (uwh_is_whiteout(ufd, name, &st))
		return rb_check(w, upath, bpath, UNION_UPPER_WHITEOUT);
	if (S_ISDIR(st.st_mode))
		return rb_upper_dir(w, ufd, name, upath, bpath, depth);
	if (!S_ISREG(st.st_mode))
		return rb_check(w, upath, bpath, UNION_UPPER_COPY);
	r = uwh_metacopy_read(ufd, name, &meta, &redirect);
	if (r < 0 || !meta)
		return r < 0 ? r : rb_check(w, upath, bpath, UNION_UPPER_COPY);
	if (!redirect)
		return rb_check(w, upath, bpath, UNION_UPPER_METACOPY);
	target = rb_redirect_target(bpath, redirect);
	r = target ? rb_check_redirect(w, upath, target, false) : -ENOMEM;
	free(target);
	free(redirect);
	return r;
}

/*
 * The name an OCI whiteout ".wh.NAME" in ufd deletes, or NULL: none for the union's own
 * markers (the opaque marker, temporary names), nor when NAME itself is there (it decides).
 */
static const char *rb_oci_target(int ufd, bool top, const char *marker)
{
	const char *name = marker + strlen(UWH_PREFIX);
	struct stat st;

	if (!strncmp(marker, UWH_TMP_PREFIX, strlen(UWH_TMP_PREFIX)) || uname_check(name) ||
	    uname_dot(name) || rb_hidden(top, name))
		return NULL;
	return uwh_statat(ufd, name, &st) == -ENOENT ? name : NULL;
}

/* Every name of an upper directory, as listed (a snapshot: the walk changes nothing). */
static int rb_upper_names(int ufd, struct rb_names *l)
{
	struct fsio_dir *d = NULL;
	const char *ent;
	unsigned char type;
	int r;

	r = fsio_dir_open(ufd, &d);
	while (r == 0 && (r = fsio_dir_next(d, &ent, &type, NULL)) == 1)
		r = rb_names_add(l, ent);
	fsio_dir_close(d);
	return r;
}

static int rb_walk_dir(struct rb_walk *w, int ufd, const char *upath, const char *bpath,
		       int depth)
{
	struct rb_names l = { 0 };
	const char *name;
	bool top = depth == 0;
	int r;

	if (depth >= UNION_MAX_DEPTH)
		return -ELOOP;
	r = rb_upper_names(ufd, &l);
	for (size_t i = 0; r == 0 && i < l.nm_n; i++) {
		char *up, *bp;

		name = l.nm_v[i];
		if (uwh_marker(name)) {
			name = rb_oci_target(ufd, top, name);
			if (!name)
				continue;
		} else if (rb_hidden(top, name)) {
			continue;
		}
		up = rb_join(upath, name);
		bp = rb_join(bpath, name);
		if (!up || !bp)
			r = -ENOMEM;
		else if (name != l.nm_v[i])
			r = rb_check(w, up, bp, UNION_UPPER_WHITEOUT);
		else
			r = rb_upper_entry(w, ufd, name, up, bp, depth);
		/* The deepest failure says where; the directories above it keep its words. */
		if (r < 0 && w->wk_err && w->wk_errlen && !*w->wk_err)
			err_set(w->wk_err, w->wk_errlen, "upper %s, at %s: %s; make it readable "
				"(and the same path in each base) and run again", w->wk_upper,
				up ? up : upath, strerror(-r));
		free(up);
		free(bp);
	}
	rb_names_free(&l);
	return r;
}

static int rb_by_path(const void *a, const void *b)
{
	return strcmp(((const struct union_conflict *)a)->uc_path,
		      ((const struct union_conflict *)b)->uc_path);
}

const char *union_upper_kind_name(enum union_upper_kind kind)
{
	switch (kind) {
	case UNION_UPPER_COPY:
		return "copy";
	case UNION_UPPER_WHITEOUT:
		return "whiteout";
	case UNION_UPPER_METACOPY:
		return "metacopy";
	case UNION_UPPER_OPAQUE:
		return "opaque";
	case UNION_UPPER_REDIRECT_MISSING:
		return "redirect-missing";
	}
	return "?";
}

const char *union_base_change_name(enum union_base_change change)
{
	switch (change) {
	case UNION_BASE_CHANGED:
		return "changed";
	case UNION_BASE_ADDED:
		return "added";
	case UNION_BASE_REMOVED:
		return "removed";
	}
	return "?";
}

int union_conflicts(const char *upper, char *const *old_base, int nold, char *const *new_base,
		    int nnew, int (*fn)(const struct union_conflict *c, void *arg), void *arg,
		    char *err, size_t errlen)
{
	struct rb_walk w = { .wk_upper = upper, .wk_err = err, .wk_errlen = errlen };
	char canon[4096];
	struct fsio_ids ids;
	int r, ufd = -1;

	if (err && errlen)
		*err = '\0';
	fsio_become_root(&ids);
	r = rb_stack_open("old", old_base, nold, &w.wk_old, err, errlen);
	if (r == 0)
		r = rb_stack_open("new", new_base, nnew, &w.wk_new, err, errlen);
	if (r == 0) {
		r = fsio_open_root(upper, canon, sizeof(canon), &ufd);
		if (r < 0)
			err_set(err, errlen, "upper %s: %s; give the client's upper directory",
				upper, strerror(-r));
	}
	if (r == 0)
		r = rb_walk_dir(&w, ufd, "/", "/", 0);
	fsio_close(ufd);
	rb_stack_close(&w.wk_old);
	rb_stack_close(&w.wk_new);
	fsio_restore(&ids);
	if (r == 0 && w.wk_n)
		qsort(w.wk_found, w.wk_n, sizeof(*w.wk_found), rb_by_path);
	for (size_t i = 0; r == 0 && i < w.wk_n; i++)
		r = fn(&w.wk_found[i], arg);
	for (size_t i = 0; i < w.wk_n; i++)
		free((char *)w.wk_found[i].uc_path);
	free(w.wk_found);
	return r;
}

/*
 * Splits a union path into its parent (relative to the root, "" for the root itself) and
 * last name, refusing what cannot name an upper entry of a client's.
 */
static int rb_split(const char *path, char *parent, size_t plen, char *last, char *err,
		    size_t errlen)
{
	const char *p, *e;
	size_t len;

	if (!path || path[0] != '/') {
		err_set(err, errlen, "path \"%s\" is not from the union's root; give it with a "
			"leading '/', as \"/etc/motd\"", path ? path : "");
		return -EINVAL;
	}
	if (!path[1]) {
		err_set(err, errlen, "path \"/\" is the union's root, which the upper always "
			"keeps; give a path below it");
		return -EINVAL;
	}
	if (strlen(path) >= plen) {
		err_set(err, errlen, "path \"%s\" is too long; give a shorter one", path);
		return -ENAMETOOLONG;
	}
	for (p = path + 1;; p = e + 1) {
		e = strchrnul(p, '/');
		len = (size_t)(e - p);
		if (len > STORE_NAME_MAX) {
			err_set(err, errlen, "path \"%s\" has a name longer than %d bytes; give "
				"an existing path", path, STORE_NAME_MAX);
			return -ENAMETOOLONG;
		}
		memcpy(last, p, len);
		last[len] = '\0';
		if (uname_check(last) || uname_dot(last)) {
			err_set(err, errlen, "path \"%s\" has an empty, \".\" or \"..\" component; "
				"give it plainly, as \"/etc/motd\"", path);
			return -EINVAL;
		}
		if (rb_hidden(p == path + 1, last)) {
			err_set(err, errlen, "path \"%s\" names the union's own \"%s\", which is no "
				"client's entry; give the path of the file the client sees", path,
				last);
			return -EINVAL;
		}
		if (!*e)
			break;
	}
	len = (size_t)(p - path);
	memcpy(parent, path + 1, len - 1);
	parent[len - 1] = '\0';
	return 0;
}

int union_take_base(const char *upper, const char *path, char *err, size_t errlen)
{
	char parent[4096], last[STORE_NAME_MAX + 1], oci[STORE_NAME_MAX + sizeof(UWH_PREFIX)], canon[4096];
	bool has, has_oci;
	struct fsio_ids ids;
	struct stat st;
	int r, rootfd = -1, pfd = -1;

	if (err && errlen)
		*err = '\0';
	r = rb_split(path, parent, sizeof(parent), last, err, errlen);
	if (r < 0)
		return r;
	fsio_become_root(&ids);
	r = fsio_open_root(upper, canon, sizeof(canon), &rootfd);
	if (r < 0) {
		err_set(err, errlen, "upper %s: %s; give the client's upper directory", upper,
			strerror(-r));
		goto out;
	}
	r = fsio_open_dir_path(rootfd, parent, &pfd);
	if (r == -ENOENT) {
		err_set(err, errlen, "upper %s has nothing at %s: a directory above it is not "
			"there, so the base already shows; nothing to do", upper, path);
		goto out;
	}
	if (r == -ENOTDIR) {
		err_set(err, errlen, "upper %s: a name above %s is no directory there (a file, "
			"symlink or whiteout of the client's hides the base below it); take the "
			"base at that name instead", upper, path);
		goto out;
	}
	if (r < 0) {
		err_set(err, errlen, "upper %s: cannot open the directory holding %s: %s; make "
			"it readable and run again", upper, path, strerror(-r));
		goto out;
	}
	r = fsio_statat(pfd, last, &st);
	if (r < 0 && r != -ENOENT)
		goto failed;
	has = r == 0;
	snprintf(oci, sizeof(oci), "%s%s", UWH_PREFIX, last);
	has_oci = strlen(UWH_PREFIX) + strlen(last) <= STORE_NAME_MAX && uwh_oci(pfd, last);
	if (!has && !has_oci) {
		err_set(err, errlen, "upper %s has nothing at %s: the base already shows there; "
			"check the path", upper, path);
		r = -ENOENT;
		goto out;
	}
	r = has ? fsio_remove_tree(pfd, last) : 0;
	if (r == 0 && has_oci)
		r = fsio_remove_tree(pfd, oci);
	if (r == 0)
		r = fsio_fsync_dir(pfd);
	if (r == 0)
		goto out;
failed:
	err_set(err, errlen, "upper %s: removing %s: %s; make sure nothing is mounted there and "
		"the upper is writable, and run again (what was removed stays removed)", upper,
		path, strerror(-r));
out:
	fsio_close(pfd);
	fsio_close(rootfd);
	fsio_restore(&ids);
	return r;
}

/*
 * Completing metacopies before a new base. A metacopy's data is its base's, cut to its
 * own size: over a new base it would show the new base's bytes. So each is made whole
 * from the old stack, found as the union finds it there (metacopy.c): at its own base
 * path, or at its redirect's, an absolute one from the stack's root, a plain name beside
 * its own base path. An upper directory that is opaque has no base below it: a metacopy
 * in it has no data but by an absolute redirect.
 */

/* One completion run over an upper. */
struct rb_fill {
	struct rb_stack fl_old;
	const char *fl_upper;
	int fl_done;
	int fl_err;                      /* the first failure; the others are still done */
	char *fl_errbuf;
	size_t fl_errlen;
};

/*
 * Notes the failure of upath (missing: a metacopy whose data the old stack lacks); the
 * first one is what the run returns and tells.
 */
static void rb_fill_fail(struct rb_fill *f, int r, const char *upath, bool missing)
{
	if (f->fl_err)
		return;
	f->fl_err = r;
	if (missing)
		err_set(f->fl_errbuf, f->fl_errlen, "upper %s: metacopy %s has no data in the old "
			"base (no regular file where it points), so it was left a metacopy; put "
			"its file back in the old base and run again, or drop the client's copy "
			"(unionnfsd-ctl take-base CLIENT PATH) before the new base", f->fl_upper,
			upath);
	else
		err_set(f->fl_errbuf, f->fl_errlen, "upper %s, at %s: %s; make it readable and "
			"writable (and the old base readable) and run again (what was completed "
			"stays completed)", f->fl_upper, upath, strerror(-r));
}

/*
 * Where the base of name (in an upper directory whose base path is bpath, NULL when
 * nothing of the base shows below it) is, given its redirect: *out (malloc), or NULL when
 * nowhere.
 */
static int rb_fill_base(const char *bpath, const char *name, const char *redirect,
			char **out)
{
	char *own;

	*out = NULL;
	if (redirect && redirect[0] == '/')
		*out = strdup(redirect);
	else if (!bpath)
		return 0;
	else if (!redirect)
		*out = rb_join(bpath, name);
	else if ((own = rb_join(bpath, name))) {
		*out = rb_redirect_target(own, redirect);
		free(own);
	}
	return *out ? 0 : -ENOMEM;
}


/*
 * The regular file name in ufd (st: its lstat), completed when it is a metacopy: 1 when it
 * was, -ENOENT when its data is not in the old stack.
 */
static int rb_fill_file(struct rb_fill *f, int ufd, const char *name, const struct stat *lst,
			const char *bpath)
{
	char *redirect = NULL, *data = NULL;
	struct rb_view v;
	struct stat st;
	bool meta;
	int r, fd = -1, in = -1, pfd = -1;

	rb_view_init(&v);
	if (lst->st_size == 0)
		return 0; /* the union reads none of its data (umc_candidate): empty on any base */
	r = uwh_metacopy_read(ufd, name, &meta, &redirect);
	if (r < 0 || !meta)
		goto out;
	r = rb_fill_base(bpath, name, redirect, &data);
	if (r == 0)
		r = data ? rb_lookup(&f->fl_old, data, &v) : 0;
	if (r == 0 && !(v.vw_present && S_ISREG(v.vw_st.st_mode)))
		r = -ENOENT;
	if (r == 0) {
		r = fsio_open_file(v.vw_pfd, v.vw_name, O_RDONLY | O_NOATIME, 0, &in);
		if (r == -EPERM) /* O_NOATIME on a file system that refuses it */
			r = fsio_open_file(v.vw_pfd, v.vw_name, O_RDONLY, 0, &in);
	}
	/*
	 * Opened as a path first and for writing only once it is a regular file: a name the
	 * client swapped for a device node meanwhile is never opened (as root) as one.
	 */
	if (r == 0) {
		r = fsio_open_node(ufd, name, &pfd);
		if (r == -ENOENT) {
			r = 0; /* gone since listed */
			goto out;
		}
	}
	if (r == 0)
		r = fsio_stat(pfd, &st);
	if (r == 0 && !S_ISREG(st.st_mode))
		r = -ESTALE;
	if (r == 0)
		r = fsio_reopen_file(pfd, O_WRONLY, &fd);
	/* Read again on what was opened: the name may have been replaced since. */
	if (r == 0)
		r = uwh_metacopy_read(fd, "", &meta, NULL);
	if (r == 0 && meta)
		r = ucopy_fill_metacopy(fd, in, &st);
	if (r == 0)
		r = meta;
out:
	fsio_close(fd);
	fsio_close(pfd);
	fsio_close(in);
	rb_view_release(&v);
	free(data);
	free(redirect);
	return r;
}

static int rb_fill_dir(struct rb_fill *f, int ufd, const char *upath, const char *bpath,
		       int depth);

/* The upper's directory name in ufd, whose base path it continues or redirects. */
static int rb_fill_subdir(struct rb_fill *f, int ufd, const char *name, const char *upath,
			  const char *bpath, int depth)
{
	char *redirect = NULL, *base = NULL;
	bool opaque;
	int r, fd;

	r = fsio_open_dir(ufd, name, &fd);
	if (r < 0)
		return r;
	r = uwh_dir_read(fd, &opaque, &redirect);
	if (r == 0 && !opaque && !uwh_oci(ufd, name))
		r = rb_fill_base(bpath, name, redirect, &base);
	if (r == 0)
		r = rb_fill_dir(f, fd, upath, base, depth + 1);
	free(base);
	free(redirect);
	fsio_close(fd);
	return r;
}

/* Every metacopy under an upper directory; a failure is noted and the walk goes on. */
static int rb_fill_dir(struct rb_fill *f, int ufd, const char *upath, const char *bpath,
		       int depth)
{
	struct rb_names l = { 0 };
	struct stat st;
	int r;

	if (depth >= UNION_MAX_DEPTH)
		return -ELOOP;
	r = rb_upper_names(ufd, &l);
	if (r == 0)
		rb_names_sort(&l); /* the first failure told is the same on each run */
	for (size_t i = 0; r == 0 && i < l.nm_n; i++) {
		const char *name = l.nm_v[i];
		bool file = false;
		char *up;
		int e;

		if (rb_hidden(depth == 0, name))
			continue; /* the work directory, markers, temporary names */
		up = rb_join(upath, name);
		if (!up) {
			r = -ENOMEM;
			break;
		}
		e = uwh_statat(ufd, name, &st);
		if (e == -ENOENT)
			e = 0; /* gone since listed */
		else if (e == 0 && S_ISDIR(st.st_mode))
			e = rb_fill_subdir(f, ufd, name, up, bpath, depth);
		else if (e == 0 && S_ISREG(st.st_mode) && !uwh_is_whiteout(ufd, name, &st)) {
			file = true;
			e = rb_fill_file(f, ufd, name, &st, bpath);
		}
		if (e == 1)
			f->fl_done++;
		else if (e < 0)
			rb_fill_fail(f, e, up, file && e == -ENOENT);
		free(up);
	}
	rb_names_free(&l);
	return r;
}

int union_complete_metacopies(const char *upper, char *const *old_base, int nold, int *done,
			      char *err, size_t errlen)
{
	struct rb_fill f = { .fl_upper = upper, .fl_errbuf = err, .fl_errlen = errlen };
	char canon[4096];
	struct fsio_ids ids;
	int r, ufd = -1;

	*done = 0;
	if (err && errlen)
		*err = '\0';
	fsio_become_root(&ids);
	r = rb_stack_open("old", old_base, nold, &f.fl_old, err, errlen);
	if (r == 0) {
		r = fsio_open_root(upper, canon, sizeof(canon), &ufd);
		if (r < 0)
			err_set(err, errlen, "upper %s: %s; give the client's upper directory",
				upper, strerror(-r));
	}
	if (r == 0) {
		r = rb_fill_dir(&f, ufd, "/", "/", 0);
		if (r < 0)
			rb_fill_fail(&f, r, "/", false);
		r = f.fl_err;
	}
	fsio_close(ufd);
	rb_stack_close(&f.fl_old);
	fsio_restore(&ids);
	*done = f.fl_done;
	return r;
}
