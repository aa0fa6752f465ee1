/*
 * The table of per-client views (views.h, views_int.h). Views are looked up by export id
 * on every call, so that lookup is a lock-free read of an array indexed by id; making,
 * opening and closing a view change its state under vt_lock and do their file system work
 * without it.
 *
 * Open views are bounded (views_make_room_locked): a view whose client has no MOUNT entry
 * and made no call for VIEWS_IDLE_SECONDS may be closed to make room for another. Closing
 * frees its union (descriptors, caches) but keeps the struct, its binding and its upper:
 * its next MNT or call opens it again. So a struct view lives until the server stops, and
 * calls hold its union with vw_refs (views_hold, views_put).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred.h"
#include "fsio.h"
#include "log.h"
#include "stats.h"
#include "store.h"
#include "union.h"
#include "views_int.h"

/* --- the table --- */

struct view *views_new_view(struct views *vt, int i, const char *key)
{
	struct view *vw = calloc(1, sizeof(*vw));

	if (!vw)
		return NULL;
	vw->vw_export = i;
	vw->vw_by_name = views_upper_by_name(views_export(vt, i)->ec_upper);
	vw->vw_rule = -1;
	vw->vw_state = VIEW_CLOSED;
	snprintf(vw->vw_key, sizeof(vw->vw_key), "%s", key);
	pthread_mutex_init(&vw->vw_lock, NULL);
	if (!vw->vw_by_name)
		snprintf(vw->vw_seen, sizeof(vw->vw_seen), "%s", key);
	return vw;
}

void views_free_view(struct view *vw)
{
	union_close(atomic_load(&vw->vw_ux));
	pthread_mutex_destroy(&vw->vw_lock);
	free(vw);
}

int views_list_add_locked(struct views *vt, struct view *vw)
{
	if (vt->vt_n == vt->vt_cap) {
		int cap = vt->vt_cap ? 2 * vt->vt_cap : 64;
		struct view **list = realloc(vt->vt_list, (size_t)cap * sizeof(*list));

		if (!list)
			return -ENOMEM;
		vt->vt_list = list;
		vt->vt_cap = cap;
	}
	vt->vt_list[vt->vt_n++] = vw;
	return 0;
}

void views_list_remove_locked(struct views *vt, struct view *vw)
{
	for (int k = 0; k < vt->vt_n; k++)
		if (vt->vt_list[k] == vw)
			vt->vt_list[k] = vt->vt_list[--vt->vt_n];
}

/* The view of export i for client key in the table, or NULL (vt_lock held). */
struct view *views_find_locked(struct views *vt, int i, const char *key)
{
	for (int k = 0; k < vt->vt_n; k++)
		if (vt->vt_list[k]->vw_export == i && !strcmp(vt->vt_list[k]->vw_key, key))
			return vt->vt_list[k];
	return NULL;
}

/* Whether vw is between two states: wait (views_wait_locked) and look it up again. */
bool views_passing(const struct view *vw)
{
	return vw->vw_state == VIEW_OPENING || vw->vw_state == VIEW_CLOSING ||
	       vw->vw_state == VIEW_RETIRING;
}

/*
 * Waits for a view to change state (vt_lock held). vw is only counted as waited on: the
 * caller looks it up again, as it may have left the table.
 */
void views_wait_locked(struct views *vt, struct view *vw)
{
	vw->vw_waiting++;
	pthread_cond_wait(&vt->vt_changed, &vt->vt_lock);
	vw->vw_waiting--;
}

/* True at most once a minute per *last: a client retrying must not flood the log. */
bool views_log_due(_Atomic time_t *last)
{
	time_t now = time(NULL), prev = atomic_load(last);

	return now - prev >= 60 && atomic_compare_exchange_strong(last, &prev, now);
}

/* --- holding and closing a view's union --- */

/* A union reference for a call, or NULL when vw is not open. Release with views_put. */
static struct union_export *views_hold(struct view *vw)
{
	struct union_export *ux;

	atomic_fetch_add(&vw->vw_refs, 1);
	ux = atomic_load(&vw->vw_ux);
	if (!ux)
		atomic_fetch_sub(&vw->vw_refs, 1);
	return ux;
}

static void views_put(struct view *vw)
{
	if (!vw)
		return;
	atomic_store(&vw->vw_used, time(NULL));
	atomic_fetch_sub(&vw->vw_refs, 1);
}

/*
 * Starts closing open view vw unless a call holds it (vt_lock held): it becomes CLOSING
 * with its union in vw_closing, for views_finish_close after vt_lock is let go. False when
 * a call holds it or it is not open.
 */
bool views_close_locked(struct views *vt, struct view *vw)
{
	struct union_export *ux;

	if (vw->vw_state != VIEW_OPEN)
		return false;
	ux = atomic_exchange(&vw->vw_ux, NULL);
	if (atomic_load(&vw->vw_refs) != 0) {
		atomic_store(&vw->vw_ux, ux);
		return false;
	}
	vw->vw_closing = ux;
	vw->vw_state = VIEW_CLOSING;
	vt->vt_nopen--;
	return true;
}

/* Closes the union views_close_locked took from vw (NULL: none), without vt_lock. */
void views_finish_close(struct views *vt, struct view *vw)
{
	if (!vw)
		return;
	union_close(vw->vw_closing);
	pthread_mutex_lock(&vt->vt_lock);
	vw->vw_closing = NULL;
	vw->vw_state = VIEW_CLOSED;
	pthread_cond_broadcast(&vt->vt_changed);
	pthread_mutex_unlock(&vt->vt_lock);
}

/* --- opening --- */

/*
 * The lower branches a view of export i opens on: with current (a MNT), the export's base
 * now, to which the view's map binding moves (UNION_OPEN_NEW_BASE), with *gen set to its
 * nfs_export_base_gen + 1; else (a handle) the base the binding records, so a client keeps
 * the base it mounted until it mounts again (the export's base if the binding records none).
 */
static int views_base(struct views *vt, int i, const char *name, bool current, char ***lowers,
		      enum union_role **roles, int *n, unsigned *gen, unsigned *flags)
{
	struct store *st = union_store(nfs_export_union(vt->vt_ns, i));
	enum union_role *base_roles;
	char **paths;
	int np, r, had;

	*gen = nfs_export_base_gen(vt->vt_ns, i) + 1;
	*flags = UNION_OPEN_NEW_BASE;
	r = nfs_export_branches(vt->vt_ns, i, lowers, roles, n);
	if (r < 0 || current)
		return r;
	*gen = 0;
	*flags = 0;
	if (store_export_stack(st, name, false, &paths, &np) < 0 || np < 1)
		return 0; /* never bound: the export's base */
	/* the recorded paths (after the view's upper), in the export's roles if as many */
	base_roles = *roles;
	had = *n;
	nfs_export_branches_free(*lowers, NULL, had);
	*n = np - 1;
	*lowers = calloc((size_t)np, sizeof(**lowers));
	*roles = calloc((size_t)np, sizeof(**roles));
	for (int k = 1; *lowers && *roles && k < np; k++) {
		(*lowers)[k - 1] = paths[k];
		paths[k] = NULL;
		(*roles)[k - 1] = *n == had ? base_roles[k - 1] : UNION_BRANCH_RO;
	}
	free(base_roles);
	store_export_stack_free(paths, np);
	return *lowers && *roles ? 0 : -ENOMEM;
}

/*
 * Before a MNT moves view name to the export's base now (lowers, n of them) from the one
 * its binding records, its metacopies get their data from that old base: over the new one
 * they would show other bytes. Its union is not open (the view is OPENING).
 */
static void views_settle_metacopies(struct views *vt, int i, const char *name, const char *upper,
				    char *const *lowers, int n)
{
	struct store *st = union_store(nfs_export_union(vt->vt_ns, i));
	char **rec, err[600];
	int nrec, done = 0, r;

	if (store_export_stack(st, name, false, &rec, &nrec) < 0)
		return; /* never bound: nothing made over another base */
	if (nrec > 1 && !views_same_stack(rec + 1, nrec - 1, lowers, n)) {
		r = union_complete_metacopies(upper, rec + 1, nrec - 1, &done, err, sizeof(err));
		if (r < 0)
			log_warn("view %s moves to a new base with a metadata-only copy it could not "
				 "make whole (it shows the new base's data): %s", name, err);
		if (done)
			log_info("view %s: %d metadata-only cop%s made whole from its old base before "
				 "it moves to the new one", name, done, done == 1 ? "y" : "ies");
	}
	store_export_stack_free(rec, nrec);
}

/*
 * The file system work of opening view vw (without vt_lock; vw is OPENING): its upper,
 * made first with create (a view is only ever made by a MNT), and its union over the
 * export's base (views_base: a MNT's the export's base now). *gen says which base.
 */
static int views_open_union(struct views *vt, struct view *vw, bool create,
			    struct union_export **ux, unsigned *gen, char *err, size_t errlen)
{
	int i = vw->vw_export;
	const struct export_conf *ec = views_export(vt, i);
	char upper[PATH_MAX], name[STORE_EXPORT_NAME_MAX + 1];
	enum union_role *roles = NULL, *lroles = NULL;
	char **branches = NULL, **lowers = NULL;
	unsigned flags;
	int r, n = 0;

	if (views_upper_expand(ec->ec_upper, vw->vw_key, upper, sizeof(upper)) < 0 ||
	    (size_t)snprintf(name, sizeof(name), "%s%%%s", ec->ec_name, vw->vw_key) >=
		    sizeof(name)) {
		snprintf(err, errlen, "export %s: the upper path or view name for client %s is "
			 "too long; shorten upper= or the export name", ec->ec_name, vw->vw_key);
		return -ENAMETOOLONG;
	}
	r = views_upper_check_overlap(ec, upper, err, errlen);
	if (r < 0)
		return r;
	cred_restore(); /* the upper is made and opened as the server */
	if (create) {
		r = views_upper_make(ec, vw->vw_key, err, errlen);
		if (r < 0)
			return r;
	}
	r = views_base(vt, i, name, create, &lowers, &lroles, &n, gen, &flags);
	if (r == 0 && (flags & UNION_OPEN_NEW_BASE))
		views_settle_metacopies(vt, i, name, upper, lowers, n);
	if (r == 0) {
		branches = calloc((size_t)n + 1, sizeof(*branches));
		roles = calloc((size_t)n + 1, sizeof(*roles));
	}
	if (!branches || !roles) {
		snprintf(err, errlen, "export %s: out of memory opening the view of %s",
			 ec->ec_name, vw->vw_key);
		r = -ENOMEM;
		goto out;
	}
	branches[0] = upper;
	roles[0] = UNION_BRANCH_RW;
	for (int j = 0; j < n; j++) {
		branches[j + 1] = lowers[j];
		roles[j + 1] = lroles[j];
	}
	/* The view writes to its upper, and to the base's branches marked =rw (shared). */
	r = union_open(name, branches, n + 1, roles, flags,
		       "fix the export's upper= or its branches",
		       union_store(nfs_export_union(vt->vt_ns, i)), ux, err, errlen);
	if (r == 0)
		union_set_policy(*ux, &ec->ec_policy);
out:
	free(branches);
	free(roles);
	nfs_export_branches_free(lowers, lroles, n);
	return r;
}

/* Makes vw OPEN with union ux (vt_lock held). */
static void views_set_open_locked(struct views *vt, struct view *vw, struct union_export *ux,
				  unsigned gen)
{
	const struct export_conf *ec = views_export(vt, vw->vw_export);
	char upper[PATH_MAX];

	if (views_upper_expand(ec->ec_upper, vw->vw_key, upper, sizeof(upper)) < 0)
		upper[0] = '\0'; /* it fit when the view was opened */
	if (!vw->vw_known)
		log_info("export %s: client %s served from its own upper %s", ec->ec_name,
			 vw->vw_key, upper);
	else
		log_debug("export %s: client %s served again from its own upper %s", ec->ec_name,
			  vw->vw_key, upper);
	vw->vw_known = true;
	vw->vw_base_gen = gen;
	atomic_store(&vw->vw_used, time(NULL));
	atomic_store(&vw->vw_ux, ux);
	vw->vw_state = VIEW_OPEN;
	atomic_store(&vt->vt_byid[union_export_id(ux)], vw);
}

/*
 * Holds the union of vw, which is CLOSED or OPEN (vt_lock held, and held again on return),
 * opening it first if it is closed: addr is the client calling (or NULL: the control
 * socket's check), whose rule's bound applies when bounded. vt_lock is let go while the
 * view is OPENING. Returns 0 with *ux held, or -errno with the cause and fix in err.
 */
static int views_hold_open_locked(struct views *vt, struct view *vw, const char *addr,
				  bool create, bool bounded, struct union_export **ux,
				  char *err, size_t errlen)
{
	struct union_export *opened = NULL;
	struct view *evicted = NULL;
	unsigned gen = 0;
	int r = 0;

	*ux = views_hold(vw);
	if (*ux)
		return 0; /* OPEN, and nobody closes it while we hold vt_lock */
	if (addr) {
		vw->vw_rule = views_rule_of(vt, vw->vw_export, addr);
		vw->vw_rule_gen = nfs_names_gen(vt->vt_ns) + 1;
	}
	if (bounded) {
		r = views_make_room_locked(vt, vw->vw_export,
					   addr ? vw->vw_rule : views_rule_locked(vt, vw), &evicted,
					   err, errlen);
		if (r < 0)
			return r;
	}
	vw->vw_state = VIEW_OPENING;
	vt->vt_nopen++;
	pthread_mutex_unlock(&vt->vt_lock);
	views_finish_close(vt, evicted);
	r = views_open_union(vt, vw, create, &opened, &gen, err, errlen);
	pthread_mutex_lock(&vt->vt_lock);
	if (r == 0) {
		views_set_open_locked(vt, vw, opened, gen);
		*ux = views_hold(vw);
	} else {
		vw->vw_state = VIEW_CLOSED;
		vt->vt_nopen--;
	}
	pthread_cond_broadcast(&vt->vt_changed);
	return r;
}

/*
 * The view of export i for client key in the table, made (CLOSED) if it has none, once it
 * is in no passing state (vt_lock held). NULL: no memory.
 */
static struct view *views_settled_locked(struct views *vt, int i, const char *key)
{
	struct view *vw;

	for (;;) {
		vw = views_find_locked(vt, i, key);
		if (!vw) {
			vw = views_new_view(vt, i, key);
			if (vw && views_list_add_locked(vt, vw) < 0) {
				views_free_view(vw);
				vw = NULL;
			}
			return vw;
		}
		if (!views_passing(vw))
			return vw;
		views_wait_locked(vt, vw);
	}
}

/*
 * A MNT moves its client to the export's base of the time: an open view on another base
 * is closed first (vt_lock held, let go meanwhile), unless calls hold it (then the client
 * stays on its base until its next MNT). True when it was closed: look it up again.
 */
static bool views_close_for_base_locked(struct views *vt, struct view *vw)
{
	if (vw->vw_state != VIEW_OPEN ||
	    vw->vw_base_gen == nfs_export_base_gen(vt->vt_ns, vw->vw_export) + 1)
		return false;
	if (!views_close_locked(vt, vw)) {
		log_info("export %s: client %s mounts again while calls of it run: it stays on its "
			 "base until its next mount", views_export(vt, vw->vw_export)->ec_name,
			 vw->vw_key);
		return false;
	}
	pthread_mutex_unlock(&vt->vt_lock);
	views_finish_close(vt, vw);
	pthread_mutex_lock(&vt->vt_lock);
	return true;
}

static int views_for_client(void *table, int i, const char *addr, struct view **vwp,
			    struct union_export **ux, char *err, size_t errlen)
{
	struct views *vt = table;
	char key[VIEWS_KEY_MAX];
	struct view *vw;
	unsigned gen = nfs_names_gen(vt->vt_ns);
	int r;

	*vwp = NULL;
	if (strlen(addr) >= VIEWS_ADDR_MAX) {
		snprintf(err, errlen, "client address '%.80s' is too long", addr);
		return -EINVAL;
	}
	r = views_client_key(vt, i, addr, key, sizeof(key), err, errlen);
	if (r < 0)
		return r;
	pthread_mutex_lock(&vt->vt_lock);
	vw = views_settled_locked(vt, i, key);
	if (vw && views_close_for_base_locked(vt, vw))
		vw = views_settled_locked(vt, i, key);
	if (!vw) {
		snprintf(err, errlen, "export %s: out of memory opening the view of %s",
			 views_export(vt, i)->ec_name, key);
		r = -ENOMEM;
	} else {
		r = views_hold_open_locked(vt, vw, addr, true, true, ux, err, errlen);
		/* A view never opened nor bound goes, unless another first call waits for it. */
		if (r < 0 && !vw->vw_known && vw->vw_state == VIEW_CLOSED && !vw->vw_waiting) {
			views_list_remove_locked(vt, vw);
			views_free_view(vw);
		}
	}
	pthread_mutex_unlock(&vt->vt_lock);
	if (r < 0)
		return r;
	/* A host whose address changed (a new DHCP lease) keeps its layer, by its name. */
	views_set_found(vw, addr, true, gen);
	*vwp = vw;
	return 0;
}

/*
 * The view bound under id in the inode map that the server has not had since it started,
 * made (closed) and put in vt_byid (vt_lock held). NULL when id names no view of an export
 * with upper=; *why then says whether the map knows it.
 */
static struct view *views_bound_locked(struct views *vt, uint16_t id,
				       enum stats_stale_cause *why)
{
	struct nfs_server *ns = vt->vt_ns;
	int n = nfs_export_count(ns);
	char name[STORE_EXPORT_NAME_MAX + 1];
	struct view *vw;
	char *sep;
	int i;

	if (!n || store_export_name(union_store(nfs_export_union(ns, 0)), id, name,
				    sizeof(name)) < 0)
		return NULL;
	sep = strrchr(name, '%');
	if (!sep)
		return NULL; /* an export that is no view (one removed from the config) */
	/* The map knows the view: from here on a failure is the view's, not the handle's. */
	*why = STATS_STALE_VIEW_UNAVAILABLE;
	*sep = '\0';
	for (i = 0; i < n; i++) {
		const struct export_conf *ec = views_export(vt, i);

		if (ec->ec_upper && nfs_export_union(ns, i) && !strcmp(ec->ec_name, name))
			break;
	}
	if (i == n)
		return NULL; /* its export lost upper= (or went away): the handle is stale */
	vw = views_settled_locked(vt, i, sep + 1);
	if (!vw)
		return NULL;
	vw->vw_known = true;
	atomic_store(&vt->vt_byid[id], vw);
	return vw;
}

/* The view with export id, from the table or the map's binding. */
static struct view *views_by_id_find(struct views *vt, uint16_t id, enum stats_stale_cause *why)
{
	struct view *vw = atomic_load(&vt->vt_byid[id]);

	if (vw)
		return vw;
	pthread_mutex_lock(&vt->vt_lock);
	vw = atomic_load(&vt->vt_byid[id]);
	if (!vw)
		vw = views_bound_locked(vt, id, why);
	pthread_mutex_unlock(&vt->vt_lock);
	return vw;
}

/*
 * Holds view vw, found under id, for a call from addr (addr NULL: the check, past the
 * bounds), opening it if it is closed. -ESTALE when a reset took it meanwhile.
 */
static int views_hold_by_id(struct views *vt, uint16_t id, struct view *vw, const char *addr,
			    struct union_export **ux, char *err, size_t errlen)
{
	int r;

	pthread_mutex_lock(&vt->vt_lock);
	while (views_passing(vw) && atomic_load(&vt->vt_byid[id]) == vw)
		views_wait_locked(vt, vw); /* a view bound by id stays allocated: no lookup */
	if (atomic_load(&vt->vt_byid[id]) != vw) {
		snprintf(err, errlen, "the view of client %s was reset", vw->vw_key);
		r = -ESTALE;
	} else {
		r = views_hold_open_locked(vt, vw, addr, false, addr != NULL, ux, err, errlen);
	}
	pthread_mutex_unlock(&vt->vt_lock);
	return r;
}

/*
 * Opens closed view vw for a call from addr; a refusal is logged (once a minute): -EAGAIN
 * when it may open later (no room, descriptors or memory now), else -ESTALE.
 */
static int views_reopen(struct views *vt, uint16_t id, struct view *vw, const char *addr,
			struct union_export **ux)
{
	static _Atomic time_t last_full, last_gone;
	char err[600];
	int r = views_hold_by_id(vt, id, vw, addr, ux, err, sizeof(err));

	if (r == 0)
		return 0;
	/*
	 * Room comes back as other views fall idle, descriptors and memory as calls end: the
	 * client is told to retry, its handles are not stale.
	 */
	if (r == -ENOSPC || fsio_short_of_resources(r)) {
		if (views_log_due(&last_full))
			log_warn("NFS call from %s answered NFS3ERR_JUKEBOX: %s", addr, err);
		return -EAGAIN;
	}
	if (views_log_due(&last_gone))
		log_warn("cannot open again the view of client %s (%s); its handles get "
			 "NFS3ERR_STALE until it mounts again", vw->vw_key, err);
	return stats_stale(-ESTALE, STATS_STALE_VIEW_UNAVAILABLE);
}

static int views_by_id(void *table, uint16_t id, const char *addr, int *i, struct view **vwp,
		       struct union_export **ux)
{
	static _Atomic time_t last;
	struct views *vt = table;
	enum stats_stale_cause why = STATS_STALE_UNKNOWN_EXPORT;
	struct union_export *held;
	struct view *vw;
	int st;

	vw = views_by_id_find(vt, id, &why);
	if (!vw)
		return stats_stale(-ESTALE, why);
	if (!nfs_export_union(vt->vt_ns, vw->vw_export))
		return stats_stale(-ESTALE, STATS_STALE_UNKNOWN_EXPORT); /* a reload removed it */
	/* A handle names one client's view: no other client may reach that upper with it. */
	st = views_owned_by(vt, vw, addr);
	if (st == -EACCES && views_log_due(&last))
		log_warn("refusing NFS call from %s with NFS3ERR_ACCES: its handle belongs "
			 "to the view of client %s of export %s", addr, vw->vw_key,
			 views_export(vt, vw->vw_export)->ec_name);
	if (st != 0)
		return st;
	held = views_hold(vw);
	if (!held) {
		st = views_reopen(vt, id, vw, addr, &held);
		if (st != 0)
			return st;
	}
	*i = vw->vw_export;
	*vwp = vw;
	*ux = held;
	return 0;
}

static const struct nfs_views_ops views_nfs_ops = {
	.vo_for_client = views_for_client,
	.vo_by_id = views_by_id,
	.vo_put = views_put,
};

int views_new(struct nfs_server *ns, const struct config *cf, struct views **out)
{
	struct views *vt = calloc(1, sizeof(*vt));

	*out = NULL;
	if (!vt)
		return -ENOMEM;
	vt->vt_byid = calloc(VIEWS_IDS, sizeof(*vt->vt_byid));
	if (!vt->vt_byid) {
		free(vt);
		return -ENOMEM;
	}
	vt->vt_ns = ns;
	vt->vt_cfg = cf;
	pthread_mutex_init(&vt->vt_lock, NULL);
	pthread_cond_init(&vt->vt_changed, NULL);
	nfs_server_set_views(ns, &views_nfs_ops, vt);
	*out = vt;
	return 0;
}

void views_free(struct views *vt)
{
	if (!vt)
		return;
	nfs_server_set_views(vt->vt_ns, NULL, NULL);
	for (int i = 0; i < vt->vt_n; i++)
		views_free_view(vt->vt_list[i]);
	while (vt->vt_retired) {
		struct view *vw = vt->vt_retired;

		vt->vt_retired = vw->vw_next;
		views_free_view(vw);
	}
	free(vt->vt_list);
	free(vt->vt_byid);
	pthread_cond_destroy(&vt->vt_changed);
	pthread_mutex_destroy(&vt->vt_lock);
	free(vt);
}

/* --- for the control socket --- */

int views_walk(struct views *vt, int i,
	       int (*fn)(struct union_export *ux, const char *key, void *arg), void *arg)
{
	const struct export_conf *ec;
	char name[STORE_EXPORT_NAME_MAX + 1];
	struct union_export *base;
	size_t len;
	int r = 0;

	if (!vt)
		return 0;
	ec = views_export(vt, i);
	len = strlen(ec->ec_name);
	base = nfs_export_union(vt->vt_ns, i);
	if (!ec->ec_upper || !base)
		return 0;
	for (uint32_t id = 0; id < VIEWS_IDS && r == 0; id++) {
		enum stats_stale_cause why;
		struct union_export *ux;
		struct view *vw;
		char err[600] = "";
		bool opened;

		if (store_export_name(union_store(base), (uint16_t)id, name, sizeof(name)) < 0 ||
		    strncmp(name, ec->ec_name, len) || name[len] != '%')
			continue;
		vw = views_by_id_find(vt, (uint16_t)id, &why);
		ux = vw ? views_hold(vw) : NULL;
		/* Opened for the check alone, past the bounds: closed again right after. */
		opened = vw && !ux &&
			 views_hold_by_id(vt, (uint16_t)id, vw, NULL, &ux, err, sizeof(err)) == 0;
		r = fn(ux, name + len + 1, arg);
		if (ux)
			views_put(vw);
		if (opened) {
			pthread_mutex_lock(&vt->vt_lock);
			opened = views_close_locked(vt, vw);
			pthread_mutex_unlock(&vt->vt_lock);
			if (opened)
				views_finish_close(vt, vw);
		}
	}
	return r;
}

int views_open_count(struct views *vt, int i)
{
	int n = 0;

	if (!vt)
		return 0;
	pthread_mutex_lock(&vt->vt_lock);
	for (int k = 0; k < vt->vt_n; k++)
		n += vt->vt_list[k]->vw_export == i && vt->vt_list[k]->vw_state == VIEW_OPEN;
	pthread_mutex_unlock(&vt->vt_lock);
	return n;
}

int views_upper_of(struct views *vt, int i, const char *addr, char *dir, size_t len)
{
	const struct export_conf *ec;
	char key[VIEWS_KEY_MAX] = "";

	if (!vt)
		return -1;
	ec = views_export(vt, i);
	if (!ec->ec_upper)
		return -1;
	if (!views_upper_by_name(ec->ec_upper))
		return views_upper_expand(ec->ec_upper, addr, dir, len);
	nfs_host_name(vt->vt_ns, addr, key, sizeof(key), NULL, 0);
	if (!key[0]) {
		pthread_mutex_lock(&vt->vt_lock);
		for (int k = 0; k < vt->vt_n && !key[0]; k++) {
			struct view *vw = vt->vt_list[k];

			pthread_mutex_lock(&vw->vw_lock);
			if (vw->vw_export == i && !strcmp(vw->vw_seen, addr))
				snprintf(key, sizeof(key), "%s", vw->vw_key);
			pthread_mutex_unlock(&vw->vw_lock);
		}
		pthread_mutex_unlock(&vt->vt_lock);
	}
	return key[0] ? views_upper_expand(ec->ec_upper, key, dir, len) : -1;
}
