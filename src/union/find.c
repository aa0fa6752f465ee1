/*
 * One name in the copies of a union directory, top-down.
 *
 * The topmost copy that is not a whiteout decides what the name is; a whiteout, or an
 * OCI ".wh.<name>" beside the absent name, hides it from there down. A directory merges
 * with the directories of the same name below it until one of them is opaque, something
 * other than a directory (or a whiteout) is found, or a ".wh.<name>" beside a copy says
 * stop. A redirect on a copy sends the rest of the merge to the directory's old place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "uint.h"

void ufound_init(struct ufound *f)
{
	memset(f, 0, sizeof(*f));
	uds_init(&f->uf_dirs);
}

void ufound_release(struct ufound *f)
{
	uds_release(&f->uf_dirs);
	free(f->uf_redirect);
	f->uf_redirect = NULL;
}

/* lstat that treats anything on another file system (a mount point) as absent. */
static int ufind_stat(const struct union_export *ux, int pfd, uint8_t b, const char *name,
		      struct stat *st)
{
	int r = fsio_statat(pfd, name, st);

	if (r == 0 && st->st_dev != ux->ux_dev[b])
		r = -ENOENT;
	return r;
}

/* Where the next lower copy of a merging directory is looked for. */
struct umerge {
	const struct udirset *mg_parent;
	int mg_next;                     /* next parent copy, while following the parent */
	char mg_name[STORE_NAME_MAX + 1];/* the name looked up there */
	char *mg_path;                   /* after an absolute redirect: the path from each root */
	int mg_branch;                   /* ... and the next branch to walk it in */
};

/*
 * The directory in branch b that holds the last component of path (an owned fd), and
 * that component. -ENOENT: not in this branch; -ENOTDIR: something in the way hides it.
 */
int ufind_walk(const struct union_export *ux, uint8_t b, const char *path, int *pfd,
	       char *last)
{
	const char *p = path + 1, *e;
	struct stat st;
	int r, fd, next;

	r = fsio_dup(ux->ux_rootfd[b], &fd);
	if (r < 0)
		return r;
	for (;;) {
		size_t len;

		e = strchr(p, '/');
		len = e ? (size_t)(e - p) : strlen(p);
		memcpy(last, p, len);
		last[len] = '\0';
		if (!e)
			break;
		r = ufind_stat(ux, fd, b, last, &st);
		if (r == -ENOENT && uwh_oci(fd, last))
			r = -ENOTDIR;
		if (r == 0 && !S_ISDIR(st.st_mode))
			r = -ENOTDIR; /* a whiteout or a file: nothing below it in this branch */
		if (r == 0)
			r = fsio_open_dir(fd, last, &next);
		fsio_close(fd);
		if (r < 0)
			return r;
		fd = next;
		p = e + 1;
	}
	*pfd = fd;
	return 0;
}

/*
 * The next place a lower copy may be: (*pfd, *b, name). *own is set when *pfd must be
 * closed. 1 when there is one, 0 when the branches are exhausted, 2 when a marker in the
 * way ends the merge, or -errno.
 */
static int ufind_next(const struct union_export *ux, struct umerge *m, int *pfd, int *own,
		      uint8_t *b, char *name)
{
	int r;

	*own = -1;
	if (!m->mg_path) {
		if (m->mg_next >= m->mg_parent->ds_n)
			return 0;
		*pfd = m->mg_parent->ds_fd[m->mg_next];
		*b = m->mg_parent->ds_branch[m->mg_next++];
		strcpy(name, m->mg_name);
		return 1;
	}
	while (m->mg_branch < ux->ux_nbranches) {
		*b = (uint8_t)m->mg_branch++;
		r = ufind_walk(ux, *b, m->mg_path, own, name);
		if (r == -ENOTDIR)
			return 2;
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		*pfd = *own;
		return 1;
	}
	return 0;
}

/* Takes a redirect read on a copy: the rest of the merge follows it. */
static int ufind_redirect(struct umerge *m, const char *redirect)
{
	char *slash;
	size_t keep;

	if (redirect[0] == '/') {
		free(m->mg_path);
		m->mg_path = strdup(redirect);
		return m->mg_path ? 0 : -ENOMEM;
	}
	if (!m->mg_path) {
		strcpy(m->mg_name, redirect);
		return 0;
	}
	/* A sibling of the place we were sent to. */
	slash = strrchr(m->mg_path, '/');
	keep = (size_t)(slash - m->mg_path) + 1;
	slash = malloc(keep + strlen(redirect) + 1);
	if (!slash)
		return -ENOMEM;
	memcpy(slash, m->mg_path, keep);
	strcpy(slash + keep, redirect);
	free(m->mg_path);
	m->mg_path = slash;
	return 0;
}

static int ufind_add(struct ufound *f, int pfd, uint8_t b, const char *name, int *fd)
{
	int r = fsio_open_dir(pfd, name, fd);

	if (r < 0)
		return r == -ENOTDIR ? -ESTALE : r;
	f->uf_dirs.ds_fd[f->uf_dirs.ds_n] = *fd;
	f->uf_dirs.ds_branch[f->uf_dirs.ds_n++] = b;
	return 0;
}

/*
 * After a copy joined the merge: whether anything below may join too (1) or not (0).
 * Its own markers decide, and a ".wh.<name>" beside it.
 */
static int ufind_go_on(const struct union_export *ux, struct ufound *f, struct umerge *m,
		       int fd, uint8_t b, int pfd, const char *name)
{
	char *redirect = NULL;
	bool opaque;
	int r;

	if (b + 1 >= ux->ux_nbranches)
		return 0;
	r = uwh_dir_read(fd, &opaque, &redirect);
	if (r < 0)
		return r;
	if (!opaque && uwh_oci(pfd, name))
		opaque = true;
	if (!opaque && redirect) {
		if (b == 0 && !f->uf_redirect) {
			f->uf_redirect = redirect;
			redirect = NULL;
			r = ufind_redirect(m, f->uf_redirect);
		} else {
			r = ufind_redirect(m, redirect);
		}
		if (m->mg_path && m->mg_branch <= b)
			m->mg_branch = b + 1;
	}
	free(redirect);
	return r < 0 ? r : !opaque;
}

/*
 * The next lower copy of a merging directory: 1 with it at (*pfd, *b, name), 0 when
 * nothing below may join, or -errno.
 */
static int ufind_lower(const struct union_export *ux, struct umerge *m, int *pfd, int *own,
		       uint8_t *b, char *name)
{
	struct stat st;
	int r;

	for (;;) {
		fsio_close(*own);
		r = ufind_next(ux, m, pfd, own, b, name);
		if (r != 1)
			return r == 2 ? 0 : r;
		r = ufind_stat(ux, *pfd, *b, name, &st);
		if (r == -ENOENT) {
			/* Not in this branch: a ".wh.<name>" here still hides the ones below. */
			if (uwh_oci(*pfd, name))
				return 0;
			continue;
		}
		if (r < 0)
			return r;
		/* A whiteout or a non-directory ends the merge. */
		return S_ISDIR(st.st_mode) ? 1 : 0;
	}
}

/* Collects the directory copies below the topmost one, which f describes. */
static int ufind_merge(const struct union_export *ux, const struct udirset *parent,
		       const char *name, struct ufound *f)
{
	struct umerge m = { .mg_parent = parent, .mg_next = f->uf_pidx + 1 };
	char cur[STORE_NAME_MAX + 1];
	uint8_t b = f->uf_branch;
	int r, fd, pfd = parent->ds_fd[f->uf_pidx], own = -1;

	strcpy(m.mg_name, name);
	strcpy(cur, name);
	r = ufind_add(f, pfd, b, cur, &fd);
	while (r == 0) {
		r = ufind_go_on(ux, f, &m, fd, b, pfd, cur);
		if (r == 1)
			r = ufind_lower(ux, &m, &pfd, &own, &b, cur);
		if (r <= 0)
			break;
		r = ufind_add(f, pfd, b, cur, &fd);
	}
	fsio_close(own);
	free(m.mg_path);
	return r < 0 ? r : 0;
}

/* Whether a copy below the topmost one would show if the topmost went away. */
static int ufind_below(const struct union_export *ux, const struct udirset *parent,
		       const char *name, struct ufound *f)
{
	struct stat st;
	int r;

	if (f->uf_pidx + 1 >= parent->ds_n || uwh_oci(parent->ds_fd[f->uf_pidx], name))
		return 0;
	for (int i = f->uf_pidx + 1; i < parent->ds_n; i++) {
		r = ufind_stat(ux, parent->ds_fd[i], parent->ds_branch[i], name, &st);
		if (r == -ENOENT) {
			if (i + 1 < parent->ds_n && uwh_oci(parent->ds_fd[i], name))
				return 0;
			continue;
		}
		if (r < 0)
			return r;
		if (uwh_is_whiteout(parent->ds_fd[i], name, &st))
			return 0;
		f->uf_below = true;
		f->uf_below_dir = S_ISDIR(st.st_mode);
		return 0;
	}
	return 0;
}

int ures_find(struct union_export *ux, const struct udirset *parent, const char *name,
	      int flags, struct ufound *f)
{
	bool found = false;
	int r = 0;

	ufound_init(f);
	for (int i = 0; i < parent->ds_n && !found; i++) {
		int pfd = parent->ds_fd[i];

		r = ufind_stat(ux, pfd, parent->ds_branch[i], name, &f->uf_st);
		if (r == 0) {
			if (uwh_is_whiteout(pfd, name, &f->uf_st))
				return -ENOENT;
			found = true;
			f->uf_dir = S_ISDIR(f->uf_st.st_mode);
			f->uf_branch = parent->ds_branch[i];
			f->uf_pidx = i;
			break;
		}
		if (r != -ENOENT)
			return r;
		if (i + 1 < parent->ds_n && uwh_oci(pfd, name))
			return -ENOENT;
	}
	if (!found)
		return -ENOENT;
	if (f->uf_dir && !(flags & UFIND_STAT))
		r = ufind_merge(ux, parent, name, f);
	if (r == 0 && (flags & UFIND_BELOW))
		r = ufind_below(ux, parent, name, f);
	if (r < 0)
		ufound_release(f);
	return r;
}

bool ures_lower_has(struct union_export *ux, const struct udirset *parent, int at,
		    const char *name)
{
	struct stat st;

	for (int i = at + 1; i < parent->ds_n; i++)
		if (ufind_stat(ux, parent->ds_fd[i], parent->ds_branch[i], name, &st) == 0)
			return true;
	return false;
}
