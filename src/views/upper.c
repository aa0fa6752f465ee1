/*
 * A view's upper directory on disk: made on the client's first MNT, set aside and removed
 * by a reset. The template's fixed part (up to the '/' before the client's key) is the
 * admin's, opened like any configured path; below it, where a client may write, every
 * directory is made or opened a name at a time, never through a symbolic link (fsio).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fsio.h"
#include "views_int.h"

/* The length of tmpl's fixed part: up to the last '/' before its first %a or %h. */
static size_t upper_fixed_len(const char *tmpl)
{
	size_t slash = 0;

	for (size_t k = 0; tmpl[k]; k++) {
		if (tmpl[k] == '/')
			slash = k;
		else if (tmpl[k] == '%' && (tmpl[k + 1] == 'a' || tmpl[k + 1] == 'h'))
			break;
		else if (tmpl[k] == '%' && tmpl[k + 1])
			k++;
	}
	return slash;
}

/* Opens absolute directory path (symlinks followed), making what is missing of it. */
static int upper_open_fixed(const char *path, bool create, int *fd)
{
	char canon[PATH_MAX], have[PATH_MAX];
	char *cut;
	int r, below;

	r = fsio_open_root(path, canon, sizeof(canon), fd);
	if (r != -ENOENT || !create)
		return r;
	if (snprintf(have, sizeof(have), "%s", path) >= (int)sizeof(have))
		return -ENAMETOOLONG;
	/* The nearest ancestor there is, then the rest made below it. */
	do {
		cut = strrchr(have, '/');
		if (!cut)
			return -ENOENT;
		*cut = '\0';
		r = fsio_open_root(have[0] ? have : "/", canon, sizeof(canon), fd);
	} while (r == -ENOENT && have[0]);
	if (r < 0)
		return r;
	below = *fd;
	r = fsio_mkdir_p(below, path + strlen(have) + 1, 0755, fd);
	fsio_close(below);
	return r < 0 ? r : 0;
}

/*
 * Opens the directory that holds the upper of client key (made if missing, with create)
 * as *fd; upper receives the upper's path, *leaf points at its own name in upper.
 */
static int upper_open_parent(const struct export_conf *ec, const char *key, bool create,
			     char *upper, size_t uplen, const char **leaf, int *fd)
{
	size_t fixed_len = upper_fixed_len(ec->ec_upper), len;
	char tmpl_fixed[PATH_MAX], fixed[PATH_MAX];
	const char *between;
	char *slash;
	int r, ffd;

	if (views_upper_expand(ec->ec_upper, key, upper, uplen) < 0 || fixed_len >= PATH_MAX)
		return -ENAMETOOLONG;
	len = strlen(upper);
	while (len > 1 && upper[len - 1] == '/')
		upper[--len] = '\0';
	slash = strrchr(upper, '/');
	*leaf = slash + 1;
	memcpy(tmpl_fixed, ec->ec_upper, fixed_len);
	tmpl_fixed[fixed_len] = '\0';
	if (views_upper_expand(tmpl_fixed[0] ? tmpl_fixed : "/", key, fixed, sizeof(fixed)) < 0)
		return -ENAMETOOLONG;
	r = upper_open_fixed(fixed, create, &ffd);
	if (r < 0)
		return r;
	/* What lies between the fixed part and the upper's own name, relative to the first. */
	*slash = '\0';
	between = upper + (strcmp(fixed, "/") ? strlen(fixed) : 0);
	between += strspn(between, "/");
	if (create)
		r = fsio_mkdir_p(ffd, between, 0755, fd);
	else
		r = fsio_open_dir_path(ffd, between, fd);
	*slash = '/';
	fsio_close(ffd);
	return r < 0 ? r : 0;
}

/* Makes upper leaf in pfd like the base's root: its owner and mode, which a client sees. */
static int upper_make_like(int pfd, const char *leaf, const struct stat *like)
{
	struct stat st;
	int r = fsio_statat(pfd, leaf, &st);

	if (r == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	r = fsio_mkdir(pfd, leaf, like->st_mode & 07777);
	if (r == -EEXIST) { /* made by someone else meanwhile */
		r = fsio_statat(pfd, leaf, &st);
		return r < 0 ? r : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	}
	if (r == 0)
		r = fsio_chown(pfd, leaf, like->st_uid, like->st_gid);
	if (r == 0) /* the umask may have taken bits off */
		r = fsio_chmod(pfd, leaf, like->st_mode & 07777);
	return r;
}

int views_upper_make(const struct export_conf *ec, const char *key, char *err, size_t errlen)
{
	char canon[PATH_MAX], upper[PATH_MAX];
	const char *leaf;
	struct stat base;
	int r, fd;

	r = fsio_open_root(ec->ec_branches[0], canon, sizeof(canon), &fd);
	if (r == 0) {
		r = fsio_stat(fd, &base);
		fsio_close(fd);
	}
	if (r < 0) {
		snprintf(err, errlen, "export %s: branch %s: %s; create it or fix -e", ec->ec_name,
			 ec->ec_branches[0], strerror(-r));
		return r;
	}
	r = upper_open_parent(ec, key, true, upper, sizeof(upper), &leaf, &fd);
	if (r == 0) {
		r = upper_make_like(fd, leaf, &base);
		fsio_close(fd);
	}
	if (r < 0) {
		if (views_upper_expand(ec->ec_upper, key, upper, sizeof(upper)) < 0)
			snprintf(upper, sizeof(upper), "%s", ec->ec_upper);
		snprintf(err, errlen, "export %s: cannot create the upper %s of client %s: %s; "
			 "check upper= and the permissions of its parent", ec->ec_name, upper, key,
			 strerror(-r));
	}
	return r;
}

/* Whether path lies inside (or is) directory dir, compared as canonical text. */
static bool upper_inside(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, len) && (path[len] == '\0' || path[len] == '/');
}

int views_upper_check_overlap(const struct export_conf *ec, const char *upper, char *err,
			      size_t errlen)
{
	char canon[PATH_MAX];
	int fd;

	for (int j = 0; j < ec->ec_nbranches; j++) {
		if (fsio_open_root(ec->ec_branches[j], canon, sizeof(canon), &fd) < 0)
			continue; /* union_open reports a missing branch */
		fsio_close(fd);
		if (upper_inside(upper, canon) || upper_inside(canon, upper)) {
			snprintf(err, errlen, "export %s: the client upper %s would overlap the "
				 "branch %s, which must stay unchanged; move upper= outside the "
				 "branches", ec->ec_name, upper, ec->ec_branches[j]);
			return -EINVAL;
		}
	}
	return 0;
}

int views_upper_set_aside(const struct export_conf *ec, const char *key, char *gone,
			  size_t gonelen)
{
	char upper[PATH_MAX], aside[NAME_MAX + 1];
	const char *leaf;
	int r, fd;

	gone[0] = '\0';
	r = upper_open_parent(ec, key, false, upper, sizeof(upper), &leaf, &fd);
	if (r < 0)
		return r;
	if ((size_t)snprintf(aside, sizeof(aside), "%s.unionnfsd-reset.%ld", leaf,
			     (long)time(NULL)) >= sizeof(aside) ||
	    (size_t)snprintf(gone, gonelen, "%.*s%s", (int)(leaf - upper), upper, aside) >=
		    gonelen) {
		fsio_close(fd);
		return -ENAMETOOLONG;
	}
	r = fsio_rename(fd, leaf, fd, aside, false);
	fsio_close(fd);
	if (r < 0)
		gone[0] = '\0';
	return r;
}

int views_upper_remove(const struct export_conf *ec, const char *key, const char *gone)
{
	char upper[PATH_MAX];
	const char *leaf;
	int r, fd;

	r = upper_open_parent(ec, key, false, upper, sizeof(upper), &leaf, &fd);
	if (r < 0)
		return r;
	r = fsio_remove_tree(fd, strrchr(gone, '/') + 1);
	fsio_close(fd);
	return r;
}
