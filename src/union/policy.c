/*
 * Where a new object goes when a union has several writable branches (the export's
 * create= policy, aufs's names), and what FSSTAT reports of them (statfs=).
 *
 * mfs and pmfs compare free space measured at most every up_mfs_secs seconds: a statvfs
 * per branch per create would cost more than the create. A branch that answered ENOSPC
 * counts as full until it is measured again, so it stops being chosen at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fsio.h"
#include "uint.h"

struct upolicy {
	pthread_mutex_t pl_lock;
	struct union_policy pl_conf;
	unsigned pl_next;                        /* rr: where the next turn starts */
	int64_t pl_measured_ms;                  /* mfs: when pl_free was read; -1: never */
	uint64_t pl_free[UNION_MAX_BRANCHES];    /* bytes available, per writable branch */
};

int upol_new(struct upolicy **out)
{
	struct upolicy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->pl_lock, NULL);
	p->pl_conf.up_mfs_secs = UNION_MFS_DEFAULT_SECS;
	p->pl_measured_ms = -1;
	*out = p;
	return 0;
}

void upol_free(struct upolicy *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->pl_lock);
	free(p);
}

void union_set_policy(struct union_export *ux, const struct union_policy *conf)
{
	struct upolicy *p = ux->ux_policy;

	pthread_mutex_lock(&p->pl_lock);
	p->pl_conf = *conf;
	p->pl_measured_ms = -1;
	pthread_mutex_unlock(&p->pl_lock);
}

bool upol_metacopy(const struct union_export *ux)
{
	struct upolicy *p = ux->ux_policy;
	bool on;

	pthread_mutex_lock(&p->pl_lock);
	on = !p->pl_conf.up_no_metacopy;
	pthread_mutex_unlock(&p->pl_lock);
	return on;
}

int union_writable_branches(const struct union_export *ux)
{
	return ux->ux_nwritable;
}

/* Free space of every writable branch, read again when older than the policy allows. */
static void upol_measure(const struct union_export *ux, struct upolicy *p)
{
	int64_t now = umono_ms();
	struct statvfs sv;

	if (p->pl_measured_ms >= 0 &&
	    now - p->pl_measured_ms < (int64_t)p->pl_conf.up_mfs_secs * 1000)
		return;
	for (int b = 0; b < ux->ux_nwritable; b++)
		p->pl_free[b] = fsio_statvfs(ux->ux_rootfd[b], &sv) == 0 ?
				(uint64_t)sv.f_bavail * sv.f_frsize : 0;
	p->pl_measured_ms = now;
}

/*
 * Among writable branches b with want[b] (want NULL: any) and not full[b]: the one with
 * most free space.
 */
static int upol_most_free(const struct union_export *ux, struct upolicy *p, const bool *want,
			  const bool *full)
{
	int best = -1;

	upol_measure(ux, p);
	for (int b = 0; b < ux->ux_nwritable; b++)
		if ((!want || want[b]) && !full[b] &&
		    (best < 0 || p->pl_free[b] > p->pl_free[best]))
			best = b;
	return best;
}

int upol_choose(const struct union_export *ux, const struct udirset *parent, const bool *full)
{
	struct upolicy *p = ux->ux_policy;
	bool holds[UNION_MAX_BRANCHES] = { false };
	int b = -1, top = -1;

	for (int i = 0; i < parent->ds_n; i++) {
		if (!ubr_writable(ux, parent->ds_branch[i]))
			break;
		holds[parent->ds_branch[i]] = true;
		if (top < 0)
			top = parent->ds_branch[i];
	}
	pthread_mutex_lock(&p->pl_lock);
	switch (p->pl_conf.up_create) {
	case UNION_CREATE_TDP:
		b = top >= 0 ? top : 0;
		break;
	case UNION_CREATE_PMFS:
		b = upol_most_free(ux, p, holds, full);
		break;
	case UNION_CREATE_MFS:
		b = upol_most_free(ux, p, NULL, full);
		break;
	case UNION_CREATE_RR:
		for (int n = 0; n < ux->ux_nwritable && b < 0; n++) {
			int c = (int)(p->pl_next++ % (unsigned)ux->ux_nwritable);

			if (!full[c])
				b = c;
		}
		break;
	}
	pthread_mutex_unlock(&p->pl_lock);
	/* pmfs with no writable copy of the parent: as tdp, into the top branch. */
	if (b < 0 && p->pl_conf.up_create == UNION_CREATE_PMFS && !full[0])
		b = 0;
	return b < 0 ? -ENOSPC : b;
}

bool upol_top_down(const struct union_export *ux)
{
	struct upolicy *p = ux->ux_policy;
	bool tdp;

	pthread_mutex_lock(&p->pl_lock);
	tdp = p->pl_conf.up_create == UNION_CREATE_TDP;
	pthread_mutex_unlock(&p->pl_lock);
	return tdp;
}

bool upol_retries(const struct union_export *ux)
{
	return !upol_top_down(ux) && ux->ux_nwritable > 1;
}

void upol_full(const struct union_export *ux, int b)
{
	struct upolicy *p = ux->ux_policy;

	pthread_mutex_lock(&p->pl_lock);
	p->pl_free[b] = 0;
	pthread_mutex_unlock(&p->pl_lock);
}

/* sv += add, in sv's fragment size. */
static void upol_add(struct statvfs *sv, const struct statvfs *add)
{
	double k = sv->f_frsize ? (double)add->f_frsize / (double)sv->f_frsize : 1.0;

	sv->f_blocks += (fsblkcnt_t)((double)add->f_blocks * k);
	sv->f_bfree += (fsblkcnt_t)((double)add->f_bfree * k);
	sv->f_bavail += (fsblkcnt_t)((double)add->f_bavail * k);
	sv->f_files += add->f_files;
	sv->f_ffree += add->f_ffree;
	sv->f_favail += add->f_favail;
}

int upol_statfs(const struct union_export *ux, struct statvfs *sv)
{
	struct udirset root;
	struct statvfs one;
	bool full[UNION_MAX_BRANCHES] = { false }, by_policy;
	int r, b;

	if (ux->ux_nwritable <= 1)
		return fsio_statvfs(ux->ux_rootfd[0], sv);
	pthread_mutex_lock(&ux->ux_policy->pl_lock);
	by_policy = ux->ux_policy->pl_conf.up_statfs == UNION_STATFS_POLICY;
	pthread_mutex_unlock(&ux->ux_policy->pl_lock);
	if (by_policy) {
		uds_root(ux, &root);
		b = upol_choose(ux, &root, full);
		uds_release(&root);
		return fsio_statvfs(ux->ux_rootfd[b < 0 ? 0 : b], sv);
	}
	r = fsio_statvfs(ux->ux_rootfd[0], sv);
	for (b = 1; r == 0 && b < ux->ux_nwritable; b++) {
		bool counted = false;

		/* Branches on one file system share its space: counted once. */
		for (int a = 0; a < b; a++)
			counted = counted || ux->ux_dev[a] == ux->ux_dev[b];
		if (counted)
			continue;
		r = fsio_statvfs(ux->ux_rootfd[b], &one);
		if (r == 0)
			upol_add(sv, &one);
	}
	return r;
}
