/*
 * Room for one more open view: past max-views-per-rule open views under a client rule, or
 * VIEWS_MAX in all, the view idle longest whose client has no mount is closed (its upper
 * and binding stay; its next MNT or call opens it again).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "views_int.h"

/* A view that might be closed to make room, with its client's address. */
struct views_cand {
	struct view *vc_view;
	char vc_addr[VIEWS_ADDR_MAX];
	bool vc_mounted;
};

static int views_cand_cmp(const void *a, const void *b)
{
	const struct views_cand *x = a, *y = b;

	if (x->vc_view->vw_export != y->vc_view->vw_export)
		return x->vc_view->vw_export < y->vc_view->vw_export ? -1 : 1;
	return strcmp(x->vc_addr, y->vc_addr);
}

struct views_marking {
	struct views *vm_vt;
	struct views_cand *vm_cand;
	int vm_n;
};

/* The index of the upper= export a MOUNT entry's path lies in, or -1. */
static int views_mount_export(const struct views *vt, const char *path)
{
	for (int i = 0; i < nfs_export_count(vt->vt_ns); i++) {
		const struct export_conf *ec = views_export(vt, i);
		size_t len = strlen(ec->ec_name);

		if (ec->ec_upper && !strncmp(path, ec->ec_name, len) &&
		    (path[len] == '\0' || path[len] == '/'))
			return i;
	}
	return -1;
}

static int views_mark_one(const char *host, const char *path, void *arg)
{
	struct views_marking *vm = arg;
	struct views_cand key, *hit;
	struct view probe;

	probe.vw_export = views_mount_export(vm->vm_vt, path);
	if (probe.vw_export < 0)
		return 0;
	key.vc_view = &probe;
	snprintf(key.vc_addr, sizeof(key.vc_addr), "%s", host);
	hit = bsearch(&key, vm->vm_cand, (size_t)vm->vm_n, sizeof(key), views_cand_cmp);
	if (hit)
		hit->vc_mounted = true;
	return 0;
}

/* Marks the candidates whose client has a MOUNT entry of their export (one pass). */
static void views_mark_mounted(struct views *vt, struct views_cand *c, int n)
{
	struct views_marking vm = { vt, c, n };

	if (n == 0)
		return;
	qsort(c, (size_t)n, sizeof(*c), views_cand_cmp);
	nfs_mounts_each(vt->vt_ns, views_mark_one, &vm);
}

/*
 * Starts closing the view idle longest of export i under client rule rule (i < 0: of any
 * export): open, no call holding it, none for VIEWS_IDLE_SECONDS, its client without a
 * MOUNT entry of the export. Its upper and binding stay. NULL when none may be closed;
 * else the view, for views_finish_close.
 */
static struct view *views_evict_locked(struct views *vt, int i, int rule, const char *why)
{
	static _Atomic time_t last;
	time_t now = time(NULL);
	struct views_cand *c;
	struct view *done = NULL;
	int n = 0, best;

	c = calloc((size_t)(vt->vt_nopen > 0 ? vt->vt_nopen : 1), sizeof(*c));
	if (!c)
		return NULL;
	for (int k = 0; k < vt->vt_n && n < vt->vt_nopen; k++) {
		struct view *vw = vt->vt_list[k];

		if (vw->vw_state != VIEW_OPEN || atomic_load(&vw->vw_refs) != 0 ||
		    now - atomic_load(&vw->vw_used) < VIEWS_IDLE_SECONDS ||
		    (i >= 0 && (vw->vw_export != i || views_rule_locked(vt, vw) != rule)))
			continue;
		c[n].vc_view = vw;
		views_client_addr(vw, c[n].vc_addr, sizeof(c[n].vc_addr));
		c[n].vc_mounted = false;
		n++;
	}
	views_mark_mounted(vt, c, n);
	while (!done) {
		best = -1;
		for (int k = 0; k < n; k++)
			if (!c[k].vc_mounted && (best < 0 || atomic_load(&c[k].vc_view->vw_used) <
							   atomic_load(&c[best].vc_view->vw_used)))
				best = k;
		if (best < 0)
			break;
		c[best].vc_mounted = true; /* tried */
		if (!views_close_locked(vt, c[best].vc_view))
			continue;
		done = c[best].vc_view;
		log_debug("export %s: closed the view of client %s, idle %lld s and not mounted, "
			  "to make room (%s)", views_export(vt, done->vw_export)->ec_name,
			  done->vw_key, (long long)(now - atomic_load(&done->vw_used)), why);
		if (views_log_due(&last))
			log_info("%s reached: closing client views idle for %d s or more whose client "
				 "has no mount (first %s; its upper stays, and it opens again on the "
				 "client's next call or mount)", why, VIEWS_IDLE_SECONDS, done->vw_key);
	}
	free(c);
	return done;
}

/*
 * Makes room to open one more view of export i for a client under client rule rule: past
 * max-views-per-rule open views under that rule, or VIEWS_MAX in all, one that may be
 * closed starts closing (*evicted, for views_finish_close). -ENOSPC naming the limit and
 * its fix in err when none may be.
 */
int views_make_room_locked(struct views *vt, int i, int rule, struct view **evicted,
			   char *err, size_t errlen)
{
	const struct export_conf *ec = views_export(vt, i);
	unsigned max = vt->vt_cfg->cf_max_views_per_rule, under = 0;
	char spec[64];

	*evicted = NULL;
	if (max > 0 && rule >= 0) {
		for (int k = 0; k < vt->vt_n; k++) {
			struct view *vw = vt->vt_list[k];

			under += (vw->vw_state == VIEW_OPEN || vw->vw_state == VIEW_OPENING) &&
				 vw->vw_export == i && views_rule_locked(vt, vw) == rule;
		}
		if (under >= max) {
			*evicted = views_evict_locked(vt, i, rule, "max-views-per-rule");
			if (!*evicted) {
				nfs_rule_spec(vt->vt_ns, i, rule, spec, sizeof(spec));
				snprintf(err, errlen, "export %s: the clients of rule %s have %u views "
					 "open, the max-views-per-rule limit, and each of them has a mount "
					 "or made a call in the last %d s; raise max-views-per-rule, or "
					 "unmount clients that left", ec->ec_name, spec, under,
					 VIEWS_IDLE_SECONDS);
				return -ENOSPC;
			}
		}
	}
	if (!*evicted && vt->vt_nopen >= VIEWS_MAX) {
		*evicted = views_evict_locked(vt, -1, -1, "the view table");
		if (!*evicted) {
			snprintf(err, errlen, "export %s: %d client views are open, the most the "
				 "server keeps, and each of them has a mount or made a call in the last "
				 "%d s; lower max-views-per-rule, or unmount clients that left",
				 ec->ec_name, VIEWS_MAX, VIEWS_IDLE_SECONDS);
			return -ENOSPC;
		}
	}
	return 0;
}
