/*
 * Opening and closing an export's branch stack, and its public accessors. The top of the
 * union layer: it calls the other union files, none of them calls it.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "uint.h"

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

/* A change an earlier run was killed in, settled by its kind (intent.c knows no kinds). */
static int union_settle(struct union_export *ux, struct store_txn *t,
			const struct store_intent *in)
{
	switch (in->sn_op) {
	case STORE_INTENT_RENAME:
		return urn_settle(ux, t, in);
	case STORE_INTENT_REMOVE:
		return urm_settle(ux, t, in);
	default:
		return -EINVAL;
	}
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
	free(ux->ux_roles);
	upol_free(ux->ux_policy);
	uspace_free(ux->ux_space);
	free(ux->ux_name);
	free(ux);
}

static int union_load_root(struct union_export *ux)
{
	struct store_txn *t;
	int r = store_begin(ux->ux_store, false, &t);

	if (r < 0)
		return r;
	r = store_get(t, ux->ux_id, STORE_ROOT_INO, &ux->ux_root_rec);
	store_abort(t);
	return r;
}

/* Each branch's role into ux: writable ones first, and none written in a read-only union. */
static int union_roles(struct union_export *ux, const enum union_role *roles, const char *fix,
		       char *err, size_t errlen)
{
	for (int i = 0; i < ux->ux_nbranches; i++) {
		ux->ux_roles[i] = roles ? roles[i] : i == 0 ? UNION_BRANCH_RW : UNION_BRANCH_RO;
		if (ux->ux_roles[i] != UNION_BRANCH_RW)
			continue;
		if (i != ux->ux_nwritable) {
			snprintf(err, errlen, "export %s: branch %s is writable below the read-only "
				 "branch %s; list the writable branches first: %s", ux->ux_name,
				 ux->ux_paths[i], ux->ux_paths[i - 1], fix);
			return -EINVAL;
		}
		ux->ux_nwritable++;
	}
	if (ux->ux_nwritable == 0)
		ux->ux_ro = true;
	if (ux->ux_ro)
		ux->ux_nwritable = 0;
	return 0;
}

/*
 * Branches the roles make writable, even under UNION_OPEN_RO: their objects are the
 * upper's, which a new base leaves alone.
 */
static int union_roles_writable(const struct union_export *ux)
{
	int nw = 0;

	while (nw < ux->ux_nbranches && ux->ux_roles[nw] == UNION_BRANCH_RW)
		nw++;
	return nw;
}

int union_open(const char *name, char *const *branches, int nbranches,
	       const enum union_role *roles, unsigned flags, const char *fix, struct store *st,
	       struct union_export **out, char *err, size_t errlen)
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
	ux->ux_roles = calloc((size_t)n, sizeof(*ux->ux_roles));
	ids = calloc((size_t)n, sizeof(*ids));
	r = -ENOMEM;
	if (!ux->ux_name || !ux->ux_rootfd || !ux->ux_dev || !ux->ux_paths || !ux->ux_roles ||
	    !ids || upol_new(&ux->ux_policy) < 0 || uspace_new(n, &ux->ux_space) < 0)
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
	r = union_roles(ux, roles, fix, err, errlen);
	if (r < 0)
		goto fail;
	/* Only writes are held to it: for a read-only export, whatever size files have. */
	ux->ux_max_size = (uint64_t)INT64_MAX;
	for (int i = 0; i < ux->ux_nwritable; i++) {
		uint64_t max = (uint64_t)INT64_MAX;

		fsio_max_file_size(ux->ux_rootfd[i], &max);
		if (max < ux->ux_max_size)
			ux->ux_max_size = max;
	}
	r = union_check_overlap(name, ux->ux_paths, n, fix, err, errlen);
	if (r < 0)
		goto fail;
	r = udir_cache_new(&ux->ux_dcache);
	if (r == 0)
		r = ucache_new(n, &ux->ux_ucache);
	if (r < 0)
		goto fail;
	if (flags & UNION_OPEN_NEW_BASE)
		r = store_rebind_export(st, name, ids, n, union_roles_writable(ux), &ux->ux_id,
					err, errlen);
	else
		r = store_bind_export(st, name, ids, n, &ux->ux_id, err, errlen);
	if (r < 0)
		goto fail;
	union_cookie_key(st, ux->ux_cookie_key);
	r = union_load_root(ux);
	if (r < 0) {
		snprintf(err, errlen, "export %s: cannot read its root in the inode map: %s; run "
			 "unionnfsd-ctl check", name, strerror(-r));
		goto fail;
	}
	/* Before anything below writes a record: from here on commits keep the counts. */
	r = store_tally_start(st, ux->ux_id, n);
	if (r < 0) {
		snprintf(err, errlen, "export %s: cannot count its records in the inode map: %s; "
			 "run unionnfsd-ctl check", name, strerror(-r));
		goto fail;
	}
	uspace_measure(ux);
	r = uhl_open(ux);
	if (r < 0) {
		snprintf(err, errlen, "export %s: hard-link index in %s/%s: %s; check the upper "
			 "branch", name, ux->ux_paths[0], UNION_WORK_NAME, strerror(-r));
		goto fail;
	}
	r = usw_export_open(ux);
	if (r < 0)
		goto fail;
	r = uint_recover(ux, union_settle);
	if (r < 0) {
		/* registered above: the sweeper must not meet it once freed */
		usw_export_close(ux);
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
		usw_export_close(ux);
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
	return uexp_fsid(ux);
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
		r = upol_statfs(ux, sv);
	uobj_release(&o);
	return r;
}
