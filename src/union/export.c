/* Opening an export's branch stack, and the small helpers every union file uses. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "uint.h"

#define UNION_FSID_BASE 0x756e696f6e000000ULL /* "union" */

void uds_init(struct udirset *ds)
{
	ds->ds_n = 0;
	ds->ds_borrowed = false;
}

void uds_root(const struct union_export *ux, struct udirset *ds)
{
	ds->ds_n = ux->ux_nbranches;
	ds->ds_borrowed = true;
	for (int i = 0; i < ux->ux_nbranches; i++) {
		ds->ds_fd[i] = ux->ux_rootfd[i];
		ds->ds_branch[i] = (uint8_t)i;
	}
}

void uds_release(struct udirset *ds)
{
	if (!ds->ds_borrowed)
		for (int i = 0; i < ds->ds_n; i++)
			fsio_close(ds->ds_fd[i]);
	ds->ds_n = 0;
	ds->ds_borrowed = false;
}

int uds_take(struct udirset *ds, int i)
{
	int fd, r;

	if (ds->ds_borrowed) {
		r = fsio_dup(ds->ds_fd[i], &fd);
		return r < 0 ? r : fd;
	}
	fd = ds->ds_fd[i];
	ds->ds_fd[i] = -1;
	return fd;
}

int uds_index_of(const struct udirset *ds, uint8_t b)
{
	for (int i = 0; i < ds->ds_n; i++)
		if (ds->ds_branch[i] == b)
			return i;
	return -1;
}

int uds_fd_of(const struct udirset *ds, uint8_t b)
{
	int i = uds_index_of(ds, b);

	return i < 0 ? -1 : ds->ds_fd[i];
}

int uds_may_search(const struct udirset *ds, int n)
{
	struct stat st;
	int r = 0;

	/* "." is a name like any other: the kernel checks search permission to look it up. */
	for (int i = 0; i < n && i < ds->ds_n && r == 0; i++)
		r = fsio_statat(ds->ds_fd[i], ".", &st);
	return r;
}

int uds_may_list(const struct udirset *ds)
{
	int r = 0, fd;

	for (int i = 0; i < ds->ds_n && r == 0; i++) {
		r = fsio_access(ds->ds_fd[i], R_OK);
		if (r != -ENOSYS)
			continue;
		/* Before Linux 5.8 (no faccessat2): opening it for reading, as a listing does. */
		r = fsio_reopen_dir(ds->ds_fd[i], &fd);
		if (r == 0)
			fsio_close(fd);
	}
	return r;
}

int uname_check(const char *name)
{
	size_t len;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	len = strlen(name);
	return len > STORE_NAME_MAX ? -ENAMETOOLONG : 0;
}

bool uname_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

bool uname_hidden(uint64_t dir, const char *name)
{
	return uwh_marker(name) || (dir == STORE_ROOT_INO && !strcmp(name, UNION_WORK_NAME));
}

void ures_fix_stat(const struct union_export *ux, struct stat *st, uint64_t ino)
{
	uhl_fix_nlink(ux, st, ino);
	st->st_ino = (ino_t)ino;
	st->st_dev = (dev_t)union_fsid(ux);
}

/* Whether path a lies inside (or is) directory b. */
static bool union_inside(const char *a, const char *b)
{
	size_t len = strlen(b);

	if (!strcmp(b, "/"))
		return true;
	return !strncmp(a, b, len) && (a[len] == '\0' || a[len] == '/');
}

/* A branch inside another would show the union its own copy-ups through the other. */
static int union_check_overlap(const char *name, char **paths, int n, const char *fix,
			       char *err, size_t errlen)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			if (i == j || !union_inside(paths[i], paths[j]))
				continue;
			if (!strcmp(paths[i], paths[j]))
				snprintf(err, errlen, "export %s: branch %s is listed twice; give "
					 "each branch once: %s", name, paths[i], fix);
			else
				snprintf(err, errlen, "export %s: branch %s lies inside branch %s; "
					 "branches must not overlap, %s", name, paths[i],
					 paths[j], fix);
			return -EINVAL;
		}
	return 0;
}

/*
 * Listing cookies must survive restarts but not be predictable to clients (or they could
 * make names collide): key them with a secret derived from the persistent handle key.
 */
static void union_cookie_key(const struct store *st, uint8_t out[STORE_KEY_LEN])
{
	static const char label[] = "unionnfsd readdir cookies";
	uint8_t key[STORE_KEY_LEN];

	store_handle_key(st, key);
	crypto_generichash(out, STORE_KEY_LEN, (const unsigned char *)label, sizeof(label) - 1,
			   key, sizeof(key));
	sodium_memzero(key, sizeof(key));
}

static void union_free(struct union_export *ux)
{
	if (!ux)
		return;
	for (int i = 0; i < ux->ux_nbranches; i++) {
		fsio_close(ux->ux_rootfd[i]);
		free(ux->ux_paths[i]);
	}
	fsio_close(ux->ux_workfd);
	uhl_close(ux);
	udir_cache_free(ux->ux_dcache);
	ucache_free(ux->ux_ucache);
	pthread_mutex_destroy(&ux->ux_work_lock);
	free(ux->ux_rootfd);
	free(ux->ux_dev);
	free(ux->ux_paths);
	free(ux->ux_name);
	free(ux);
}

int union_open(const char *name, char *const *branches, int nbranches, unsigned flags,
	       const char *fix, struct store *st, struct union_export **out, char *err,
	       size_t errlen)
{
	struct store_branch_id *ids = NULL;
	struct union_export *ux;
	char canon[PATH_MAX];
	int n = nbranches, r;

	*out = NULL;
	if (n < 1 || n > UNION_MAX_BRANCHES) {
		snprintf(err, errlen, "export %s: %d branches; give 1 to %d: %s", name, n,
			 UNION_MAX_BRANCHES, fix);
		return -EINVAL;
	}
	if (sodium_init() < 0) {
		snprintf(err, errlen, "export %s: libsodium failed to initialise", name);
		return -EIO;
	}
	ux = calloc(1, sizeof(*ux));
	if (!ux) {
		snprintf(err, errlen, "export %s: out of memory", name);
		return -ENOMEM;
	}
	pthread_mutex_init(&ux->ux_work_lock, NULL);
	ux->ux_workfd = -1;
	ux->ux_store = st;
	ux->ux_ro = (flags & UNION_OPEN_RO) != 0;
	ux->ux_name = strdup(name);
	ux->ux_rootfd = malloc((size_t)n * sizeof(*ux->ux_rootfd));
	ux->ux_dev = calloc((size_t)n, sizeof(*ux->ux_dev));
	ux->ux_paths = calloc((size_t)n, sizeof(*ux->ux_paths));
	ids = calloc((size_t)n, sizeof(*ids));
	r = -ENOMEM;
	if (!ux->ux_name || !ux->ux_rootfd || !ux->ux_dev || !ux->ux_paths || !ids)
		goto fail;
	for (int i = 0; i < n; i++)
		ux->ux_rootfd[i] = -1;
	for (int i = 0; i < n; i++, ux->ux_nbranches++) {
		struct stat rst;

		r = fsio_open_root(branches[i], canon, sizeof(canon), &ux->ux_rootfd[i]);
		if (r == 0)
			r = fsio_stat(ux->ux_rootfd[i], &rst);
		if (r < 0) {
			if (fsio_short_of_resources(r))
				snprintf(err, errlen, "export %s: branch %s: %s; raise the open "
					 "files limit (ulimit -n, LimitNOFILE=)", name, branches[i],
					 strerror(-r));
			else
				snprintf(err, errlen, "export %s: branch %s: %s; create it or %s",
					 name, branches[i], strerror(-r), fix);
			ux->ux_nbranches++;
			goto fail;
		}
		ux->ux_paths[i] = strdup(canon);
		if (!ux->ux_paths[i]) {
			ux->ux_nbranches++;
			r = -ENOMEM;
			goto fail;
		}
		ids[i].sb_path = ux->ux_paths[i];
		ids[i].sb_root_ino = rst.st_ino;
		ux->ux_dev[i] = rst.st_dev;
	}
	/* Only writes are held to it: for a read-only export, whatever size files have. */
	ux->ux_max_size = (uint64_t)INT64_MAX;
	if (!ux->ux_ro)
		fsio_max_file_size(ux->ux_rootfd[0], &ux->ux_max_size);
	r = union_check_overlap(name, ux->ux_paths, n, fix, err, errlen);
	if (r < 0)
		goto fail;
	r = udir_cache_new(&ux->ux_dcache);
	if (r == 0)
		r = ucache_new(n, &ux->ux_ucache);
	if (r < 0)
		goto fail;
	r = store_bind_export(st, name, ids, n, &ux->ux_id, err, errlen);
	if (r < 0)
		goto fail;
	union_cookie_key(st, ux->ux_cookie_key);
	r = uhl_open(ux);
	if (r < 0) {
		snprintf(err, errlen, "export %s: hard-link index in %s/%s: %s; check the upper "
			 "branch", name, ux->ux_paths[0], UNION_WORK_NAME, strerror(-r));
		goto fail;
	}
	r = ufd_register(ux);
	if (r < 0)
		goto fail;
	r = uint_recover(ux);
	if (r < 0) {
		snprintf(err, errlen, "export %s: settling changes cut short by a crash: %s; check "
			 "the state directory and the upper branch", name, strerror(-r));
		goto fail;
	}
	free(ids);
	*out = ux;
	return 0;
fail:
	if (r == -ENOMEM)
		snprintf(err, errlen, "export %s: out of memory", name);
	free(ids);
	union_free(ux);
	return r;
}

void union_close(struct union_export *ux)
{
	if (ux)
		ufd_unregister(ux);
	union_free(ux);
}

uint16_t union_export_id(const struct union_export *ux)
{
	return ux->ux_id;
}

struct store *union_store(const struct union_export *ux)
{
	return ux->ux_store;
}

uint64_t union_fsid(const struct union_export *ux)
{
	return UNION_FSID_BASE | ux->ux_id;
}

bool union_read_only(const struct union_export *ux)
{
	return ux->ux_ro;
}

uint64_t union_max_file_size(const struct union_export *ux)
{
	return ux->ux_max_size;
}

int union_statfs(struct union_export *ux, uint64_t ino, struct statvfs *sv)
{
	struct uobj o;
	int r;

	uobj_init(&o);
	r = ures_resolve_cached(ux, ino, &o);
	if (r == 0)
		r = fsio_statvfs(ux->ux_rootfd[0], sv);
	uobj_release(&o);
	return r;
}
