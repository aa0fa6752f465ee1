/*
 * Which copy of a directory a change goes to: the top one (copied up first when it is a
 * lower one), the one holding the name a change acts on, or, for a new name with several
 * writable branches, the one the export's create policy picks (made as copy-up makes
 * directories when the parent has none there).
 */
#include <errno.h>
#include <sys/stat.h>

#include "fsio.h"
#include "uint.h"

int uop_dir(struct union_export *ux, uint64_t dir, const char *name, struct uobj *d)
{
	struct ufound f;
	int r;

	if (ux->ux_ro)
		return -EROFS;
	r = ures_resolve(ux, NULL, dir, 0, d);
	if (r < 0)
		return r;
	if (!S_ISDIR(d->uo_st.st_mode))
		return -ENOTDIR;
	if (d->uo_dirs.ds_branch[0] == 0)
		return 0;
	if (name) {
		/* Nothing to change, nothing to copy. */
		r = ures_find(ux, &d->uo_dirs, name, UFIND_STAT, &f);
		ufound_release(&f);
		if (r < 0)
			return r;
	}
	if (!uobj_may(d, W_OK | X_OK))
		return -EACCES;
	uobj_release(d);
	r = ures_resolve(ux, NULL, dir, URES_UPPER, d);
	if (r == 0 && d->uo_dirs.ds_branch[0] != 0)
		r = -EROFS;
	return r;
}

int uop_dir_as_is(struct union_export *ux, uint64_t dir, struct uobj *d)
{
	int r = ures_resolve(ux, NULL, dir, 0, d);

	return r == 0 && !S_ISDIR(d->uo_st.st_mode) ? -ENOTDIR : r;
}

/*
 * Whether name is in directory d (*exists), and in which branch its topmost copy is (*top,
 * unless NULL).
 */
static int uop_name_look(struct union_export *ux, const struct uobj *d, const char *name,
			 bool *exists, uint8_t *top)
{
	struct ufound f;
	int r = ures_find(ux, &d->uo_dirs, name, UFIND_STAT, &f);

	*exists = r == 0;
	if (top)
		*top = f.uf_branch;
	ufound_release(&f);
	return r == -ENOENT ? 0 : r;
}

int uop_dir_of(struct union_export *ux, uint64_t dir, const char *name, struct uobj *d)
{
	bool exists;
	uint8_t top;
	int r;

	if (ux->ux_nwritable <= 1)
		return uop_dir(ux, dir, name, d);
	r = uop_dir_as_is(ux, dir, d);
	if (r == 0)
		r = uop_name_look(ux, d, name, &exists, &top);
	if (r < 0 || !exists)
		return r < 0 ? r : -ENOENT;
	if (ubr_writable(ux, top))
		return 0;
	uobj_release(d);
	return uop_dir(ux, dir, name, d);
}

/*
 * The writable copy of a directory holding a whiteout of name, which a new name must
 * replace where it is (a copy made below it would stay hidden): its branch, or -1.
 */
static int uop_whiteout_branch(const struct union_export *ux, const struct udirset *ds,
			       const char *name)
{
	for (int i = 0; i < ds->ds_n && ubr_writable(ux, ds->ds_branch[i]); i++) {
		int r = uop_upper_whiteout(ds->ds_fd[i], name);

		if (r != 0)
			return r == 1 ? ds->ds_branch[i] : -1;
	}
	return -1;
}

int uop_place(struct union_export *ux, uint64_t dir, const char *name, const bool *full,
	      struct uobj *d, int *b)
{
	bool exists;
	int r;

	*b = 0;
	if (ux->ux_nwritable <= 1)
		return uop_dir(ux, dir, NULL, d);
	r = uop_dir_as_is(ux, dir, d);
	if (r < 0)
		return r;
	/*
	 * tdp with a writable top copy: there, whatever else holds the name (a whiteout in
	 * a copy below is hidden by what is made above it).
	 */
	if (ubr_writable(ux, d->uo_dirs.ds_branch[0]) && upol_top_down(ux)) {
		*b = d->uo_dirs.ds_branch[0];
		return 0;
	}
	r = uop_name_look(ux, d, name, &exists, NULL);
	if (r < 0)
		return r;
	/* A name that exists is not made: no policy, no new copies for it. */
	if (exists && ubr_writable(ux, d->uo_dirs.ds_branch[0])) {
		*b = d->uo_dirs.ds_branch[0];
		return 0;
	}
	if (exists) {
		uobj_release(d);
		return uop_dir(ux, dir, NULL, d);
	}
	*b = uop_whiteout_branch(ux, &d->uo_dirs, name);
	if (*b >= 0 && full[*b])
		*b = -1; /* nowhere else to put it */
	else if (*b < 0)
		*b = upol_choose(ux, &d->uo_dirs, full);
	if (*b < 0)
		return -ENOSPC;
	if (uds_index_of(&d->uo_dirs, (uint8_t)*b) >= 0)
		return 0;
	if (!uobj_may(d, W_OK | X_OK))
		return -EACCES;
	uobj_release(d);
	r = *b == 0 ? -EXDEV : ucopy_dir_into(ux, dir, (uint8_t)*b, d);
	if (r != -EXDEV)
		return r;
	/* Where a copy would not show: the top branch, as tdp does. */
	*b = 0;
	return uop_dir(ux, dir, NULL, d);
}

void uop_touch_top(const struct uobj *d, int at)
{
	static const struct timespec now[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_NOW } };
	struct fsio_ids ids;

	if (at <= 0)
		return;
	/* Clients see the top copy's times: a change below must move them too. */
	fsio_become_root(&ids);
	fsio_utimens(d->uo_dirs.ds_fd[0], "", now);
	fsio_restore(&ids);
}

int uop_dir_in(struct union_export *ux, uint64_t dir, const char *name, uint8_t b,
	       struct uobj *d)
{
	struct stat st;
	int r, at;

	r = uop_dir_as_is(ux, dir, d);
	if (r == 0 && uds_index_of(&d->uo_dirs, b) < 0) {
		r = uobj_may(d, W_OK | X_OK) ? 0 : -EACCES;
		uobj_release(d);
		if (r == 0)
			r = ucopy_dir_into(ux, dir, b, d);
	}
	if (r == -EXDEV)
		return 1;
	if (r < 0)
		return r;
	at = uds_index_of(&d->uo_dirs, b);
	for (int i = 0; i < at; i++) {
		if (fsio_statat(d->uo_dirs.ds_fd[i], name, &st) == 0 ||
		    uwh_oci(d->uo_dirs.ds_fd[i], name)) {
			uobj_release(d);
			return 1;
		}
	}
	return 0;
}
