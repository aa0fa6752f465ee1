/*
 * Markers: how a branch says "this name is deleted", "do not look below this directory"
 * and "this directory's lower copies live elsewhere", in the formats of overlayfs and of
 * OCI image layers (aufs), so branches stay interchangeable with those systems.
 *
 *   whiteout of name   name is a character device 0/0, or a zero-size regular file with
 *                      the xattr trusted.overlay.whiteout or user.overlay.whiteout
 *                      (overlayfs); or a file ".wh.<name>" beside it (OCI, aufs)
 *   opaque directory   xattr trusted.overlay.opaque or user.overlay.opaque = "y"
 *                      (overlayfs); or an entry ".wh..wh..opq" in it (OCI, aufs)
 *   redirect           xattr trusted.overlay.redirect (or user.) on a directory: its lower
 *                      copies are at that path from the branch roots ("/a/b"), or at that
 *                      name in the same parent (a plain name), not at its own path
 *   metacopy           xattr trusted.overlay.metacopy (or user.) on a regular file: it
 *                      holds the attributes only, its data is the next lower copy's (at
 *                      its own path, or at its absolute redirect "/a/b/f"); kernel
 *                      overlayfs's metacopy=on format, with an empty value
 *
 * All of them are read in every branch. The upper gets overlayfs's trusted.* format, or
 * user.* when the server may not write trusted.* xattrs (it does not run as root).
 * Markers are read with the server's identity when the client's is not enough: whether
 * a name exists must not depend on who asks.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "log.h"
#include "stats.h"
#include "uint.h"

#define UWH_XATTR_BUF 1024

static const char *const uwh_ns[] = { "trusted.overlay.", "user.overlay." };

/* Retries a marker read as root when the client's identity may not make it. */
static int uwh_getx(int dirfd, const char *name, const char *attr, char *buf, size_t size,
		    size_t *len)
{
	struct fsio_ids ids;
	int r;

	r = fsio_getxattr(dirfd, name, attr, buf, size, len);
	if (r == -EACCES || r == -EPERM) {
		fsio_become_root(&ids);
		r = fsio_getxattr(dirfd, name, attr, buf, size, len);
		fsio_restore(&ids);
	}
	return r;
}

static int uwh_listx(int dirfd, const char *name, char *buf, size_t size, size_t *len)
{
	struct fsio_ids ids;
	int r;

	r = fsio_listxattr(dirfd, name, buf, size, len);
	if (r == -EACCES || r == -EPERM) {
		fsio_become_root(&ids);
		r = fsio_listxattr(dirfd, name, buf, size, len);
		fsio_restore(&ids);
	}
	return r;
}

int uwh_statat(int dirfd, const char *name, struct stat *st)
{
	struct fsio_ids ids;
	int r;

	r = fsio_statat(dirfd, name, st);
	if (r == -EACCES) {
		fsio_become_root(&ids);
		r = fsio_statat(dirfd, name, st);
		fsio_restore(&ids);
	}
	return r;
}

/* Which overlay attributes (by suffix) name carries: bit i for sfx[i], either namespace. */
static int uwh_which(int dirfd, const char *name, const char *const *sfx, int nsfx,
		     unsigned *bits)
{
	char list[UWH_XATTR_BUF], attr[64];
	size_t len, one;
	int r;

	*bits = 0;
	r = uwh_listx(dirfd, name, list, sizeof(list), &len);
	if (r == -ENOTSUP || r == -ENODATA)
		return 0;
	if (r == -ERANGE) {
		/* Too many attributes to list here: ask for each one instead. */
		for (int i = 0; i < nsfx; i++)
			for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]); n++) {
				snprintf(attr, sizeof(attr), "%s%s", uwh_ns[n], sfx[i]);
				if (uwh_getx(dirfd, name, attr, NULL, 0, &one) == 0)
					*bits |= 1u << i;
			}
		return 0;
	}
	if (r < 0)
		return r;
	if (len > 0)
		list[len - 1] = '\0';
	for (size_t off = 0; off < len; off += strlen(list + off) + 1) {
		for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]); n++) {
			size_t pl = strlen(uwh_ns[n]);

			if (strncmp(list + off, uwh_ns[n], pl))
				continue;
			for (int i = 0; i < nsfx; i++)
				if (!strcmp(list + off + pl, sfx[i]))
					*bits |= 1u << i;
		}
	}
	return 0;
}

/* The value of an overlay attribute from whichever namespace has it (trusted first). */
static int uwh_value(int dirfd, const char *name, const char *sfx, char *buf, size_t size,
		     size_t *len)
{
	char attr[64];
	int r = -ENODATA;

	for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]) && r == -ENODATA; n++) {
		snprintf(attr, sizeof(attr), "%s%s", uwh_ns[n], sfx);
		r = uwh_getx(dirfd, name, attr, buf, size, len);
	}
	return r;
}

bool uwh_is_whiteout(int dirfd, const char *name, const struct stat *st)
{
	static const char *const sfx[] = { "whiteout" };
	unsigned bits;

	if (S_ISCHR(st->st_mode))
		return st->st_rdev == 0;
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return false;
	return uwh_which(dirfd, name, sfx, 1, &bits) == 0 && bits;
}

bool uwh_oci(int dirfd, const char *name)
{
	char wh[STORE_NAME_MAX + 1];
	struct stat st;

	if (strlen(name) + strlen(UWH_PREFIX) > STORE_NAME_MAX)
		return false;
	snprintf(wh, sizeof(wh), "%s%s", UWH_PREFIX, name);
	return uwh_statat(dirfd, wh, &st) == 0;
}

/* Whether a redirect value is one we can follow: "/a/b" or a plain name. */
static bool uwh_redirect_ok(const char *r)
{
	const char *p = r, *e;

	if (*p != '/')
		return uname_check(r) == 0 && !uname_dot(r) && !uwh_marker(r);
	while (*p == '/') {
		char comp[STORE_NAME_MAX + 1];
		size_t len;

		p++;
		e = strchr(p, '/');
		len = e ? (size_t)(e - p) : strlen(p);
		if (len == 0 || len > STORE_NAME_MAX)
			return false;
		memcpy(comp, p, len);
		comp[len] = '\0';
		if (uname_dot(comp) || uwh_marker(comp))
			return false;
		p += len;
	}
	return *p == '\0';
}

/*
 * The redirect of name in dirfd (malloc), which overlayfs sets on a renamed directory or
 * metacopy: absolute, or a plain name for a rename within one directory. NULL (and 0)
 * when there is none or it is malformed (logged: ignored, as overlayfs ignores it).
 */
static int uwh_redirect_read(int dirfd, const char *name, char **redirect)
{
	char val[PATH_MAX];
	size_t len;
	int r;

	*redirect = NULL;
	r = uwh_value(dirfd, name, "redirect", val, sizeof(val) - 1, &len);
	if (r == -ENODATA)
		return 0;
	if (r < 0)
		return r;
	val[len] = '\0';
	if (len == 0 || strlen(val) != len || !uwh_redirect_ok(val)) {
		log_warn("ignoring a malformed overlay redirect \"%s\"", val);
		return 0;
	}
	*redirect = strdup(val);
	return *redirect ? 0 : -ENOMEM;
}

int uwh_dir_read(int dirfd, bool *opaque, char **redirect)
{
	static const char *const sfx[] = { "opaque", "redirect" };
	char val[PATH_MAX];
	struct stat st;
	unsigned bits;
	size_t len;
	int r;

	*opaque = false;
	*redirect = NULL;
	r = uwh_statat(dirfd, UWH_OPAQUE, &st);
	if (r == 0) {
		*opaque = true;
		return 0;
	}
	r = uwh_which(dirfd, "", sfx, 2, &bits);
	if (r < 0)
		return r;
	if ((bits & 1) && uwh_value(dirfd, "", "opaque", val, sizeof(val), &len) == 0 &&
	    len >= 1 && val[0] == 'y') {
		*opaque = true;
		return 0;
	}
	return (bits & 2) ? uwh_redirect_read(dirfd, "", redirect) : 0;
}

int uwh_metacopy_read(int dirfd, const char *name, bool *metacopy, char **redirect)
{
	static const char *const sfx[] = { "metacopy", "redirect" };
	unsigned bits;
	int r;

	*metacopy = false;
	if (redirect)
		*redirect = NULL;
	r = uwh_which(dirfd, name, sfx, 2, &bits);
	if (r < 0 || !(bits & 1))
		return r;
	*metacopy = true;
	return redirect && (bits & 2) ? uwh_redirect_read(dirfd, name, redirect) : 0;
}

int uwh_make(int dirfd, const char *name)
{
	struct fsio_ids ids;
	int r, fd;

	/* Since Linux 5.8 anyone may make a whiteout, so the kernel checks the caller. */
	r = fsio_mknod(dirfd, name, S_IFCHR, 0);
	if (r != -EPERM)
		return stats_whiteout(r);
	fsio_become_root(&ids);
	r = fsio_mknod(dirfd, name, S_IFCHR, 0);
	if (r == -EPERM) {
		/* Not privileged at all: overlayfs's unprivileged form. */
		r = fsio_open_file(dirfd, name, O_CREAT | O_EXCL | O_WRONLY, 0, &fd);
		if (r == 0) {
			fsio_close(fd);
			r = fsio_setxattr(dirfd, name, "user.overlay.whiteout", "y", 1);
			if (r < 0)
				fsio_unlink(dirfd, name, false);
		}
	}
	fsio_restore(&ids);
	return stats_whiteout(r);
}

/* Sets an overlay attribute as root, trusted.* or else user.*. */
static int uwh_setx(int dirfd, const char *name, const char *sfx, const char *val)
{
	struct fsio_ids ids;
	char attr[64];
	int r = -EPERM;

	fsio_become_root(&ids);
	for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]) &&
			   (r == -EPERM || r == -ENOTSUP); n++) {
		snprintf(attr, sizeof(attr), "%s%s", uwh_ns[n], sfx);
		r = fsio_setxattr(dirfd, name, attr, val, strlen(val));
	}
	fsio_restore(&ids);
	return r;
}

int uwh_set_opaque(int dirfd, const char *name)
{
	return uwh_setx(dirfd, name, "opaque", "y");
}

int uwh_set_redirect(int dirfd, const char *name, const char *path)
{
	return uwh_setx(dirfd, name, "redirect", path);
}

int uwh_set_metacopy(int dirfd, const char *name)
{
	return uwh_setx(dirfd, name, "metacopy", "");
}

int uwh_clear_metacopy(int dirfd, const char *name)
{
	struct fsio_ids ids;
	char attr[64];
	int r = 0;

	fsio_become_root(&ids);
	for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]) && r == 0; n++) {
		snprintf(attr, sizeof(attr), "%smetacopy", uwh_ns[n]);
		r = fsio_removexattr(dirfd, name, attr);
		if (r == -ENODATA || r == -ENOTSUP || r == -EPERM)
			r = 0;
	}
	/* A whole file's redirect means nothing (overlayfs reads none): kept if it sticks. */
	for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]) && r == 0; n++) {
		snprintf(attr, sizeof(attr), "%sredirect", uwh_ns[n]);
		fsio_removexattr(dirfd, name, attr);
	}
	fsio_restore(&ids);
	return r;
}

int uwh_tmp_name(char *buf, size_t len)
{
	return fsio_random_name(UWH_TMP_PREFIX, buf, len);
}

bool uwh_internal_xattr(const char *attr)
{
	if (!strncmp(attr, "trusted.unionnfsd.", 18) || !strncmp(attr, "user.unionnfsd.", 15))
		return true;
	for (size_t n = 0; n < sizeof(uwh_ns) / sizeof(uwh_ns[0]); n++) {
		size_t pl = strlen(uwh_ns[n]);

		/* overlay.overlay.* is overlayfs's escape for a client's own attribute. */
		if (!strncmp(attr, uwh_ns[n], pl))
			return strncmp(attr + pl, "overlay.", strlen("overlay.")) != 0;
	}
	return false;
}

int uwh_purge_dir(int parentfd, const char *name)
{
	struct fsio_dir *d = NULL;
	struct fsio_ids ids;
	const char *ent;
	unsigned char type;
	struct stat st;
	int r, fd = -1;

	fsio_become_root(&ids);
	r = fsio_open_dir(parentfd, name, &fd);
	if (r == 0)
		r = fsio_dir_open(fd, &d);
	while (r == 0 && (r = fsio_dir_next(d, &ent, &type, NULL)) == 1) {
		r = fsio_statat(fd, ent, &st);
		/* Only markers: anything else is a client's, and the directory stays. */
		if (r == 0 && (uwh_marker(ent) || uwh_is_whiteout(fd, ent, &st)) &&
		    !S_ISDIR(st.st_mode))
			r = fsio_unlink(fd, ent, false);
		if (r == -ENOENT)
			r = 0;
	}
	fsio_dir_close(d);
	fsio_close(fd);
	if (r == 0)
		r = fsio_unlink(parentfd, name, true);
	fsio_restore(&ids);
	return r;
}
