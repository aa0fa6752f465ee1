/*
 * What `status` shows of each branch (union_branch_usage): its records, counted by the
 * inode map as changes commit (store_tally_start), and its space, as last measured here.
 *
 * `status` is answered on the event loop, which must never wait for a file system, so it
 * reads only memory: a statvfs of each branch is taken when the export opens and then by
 * the sweeper thread every UNION_SPACE_EVERY_S seconds (uspace_measure), and status says
 * how old the figures are. The create policy's own measurement (policy.c) is separate: it
 * follows create=mfs's interval and marks a branch full on ENOSPC, neither of which status
 * should show as space.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fsio.h"
#include "uint.h"

struct uspace_branch {
	int sb_err;              /* 0, or -errno of its last statvfs */
	uint64_t sb_avail;       /* bytes available to unprivileged writers */
	uint64_t sb_total;
};

struct uspace {
	pthread_mutex_t sp_lock;
	int64_t sp_measured_ms;  /* -1: never */
	struct uspace_branch sp_br[];
};

int uspace_new(int nbranches, struct uspace **out)
{
	struct uspace *sp = calloc(1, sizeof(*sp) + (size_t)nbranches * sizeof(sp->sp_br[0]));

	if (!sp)
		return -ENOMEM;
	pthread_mutex_init(&sp->sp_lock, NULL);
	sp->sp_measured_ms = -1;
	*out = sp;
	return 0;
}

void uspace_free(struct uspace *sp)
{
	if (!sp)
		return;
	pthread_mutex_destroy(&sp->sp_lock);
	free(sp);
}

void uspace_measure(struct union_export *ux)
{
	struct uspace *sp = ux->ux_space;
	struct uspace_branch br[UNION_MAX_BRANCHES];
	struct statvfs sv;

	/* The statvfs calls outside the lock: a slow branch holds up no reader. */
	for (int b = 0; b < ux->ux_nbranches; b++) {
		br[b].sb_err = fsio_statvfs(ux->ux_rootfd[b], &sv);
		br[b].sb_avail = br[b].sb_err ? 0 : (uint64_t)sv.f_bavail * sv.f_frsize;
		br[b].sb_total = br[b].sb_err ? 0 : (uint64_t)sv.f_blocks * sv.f_frsize;
	}
	pthread_mutex_lock(&sp->sp_lock);
	for (int b = 0; b < ux->ux_nbranches; b++)
		sp->sp_br[b] = br[b];
	sp->sp_measured_ms = umono_ms();
	pthread_mutex_unlock(&sp->sp_lock);
}

int union_branch_count(const struct union_export *ux)
{
	return ux->ux_nbranches;
}

void union_branch_usage(const struct union_export *ux, int b, struct union_branch_usage *out)
{
	struct uspace *sp = ux->ux_space;

	out->bu_records_err = store_tally(ux->ux_store, ux->ux_id, b, &out->bu_records);
	pthread_mutex_lock(&sp->sp_lock);
	if (sp->sp_measured_ms < 0) {
		out->bu_space_err = -EAGAIN;
		out->bu_avail = out->bu_total = 0;
		out->bu_age_ms = 0;
	} else {
		out->bu_space_err = sp->sp_br[b].sb_err;
		out->bu_avail = sp->sp_br[b].sb_avail;
		out->bu_total = sp->sp_br[b].sb_total;
		out->bu_age_ms = umono_ms() - sp->sp_measured_ms;
	}
	pthread_mutex_unlock(&sp->sp_lock);
}
