/*
 * Resetting a client to the pristine base: its views leave the table, their inode map
 * bindings go and their uppers are set aside and removed. While that runs the view is
 * RETIRING, so the client's next MNT waits for it (and never sees half a layer) while
 * other clients go on.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred.h"
#include "log.h"
#include "store.h"
#include "union.h"
#include "views_int.h"

/* The address client key was last seen at (its own text for %a), or "". */
static void views_seen(struct views *vt, int i, const char *key, char *addr, size_t len)
{
	struct view *vw;

	addr[0] = '\0';
	pthread_mutex_lock(&vt->vt_lock);
	vw = views_find_locked(vt, i, key);
	if (vw) {
		pthread_mutex_lock(&vw->vw_lock);
		snprintf(addr, len, "%s", vw->vw_seen);
		pthread_mutex_unlock(&vw->vw_lock);
	}
	pthread_mutex_unlock(&vt->vt_lock);
}

/*
 * Takes the view of export i for client key out of the table's service and makes it
 * RETIRING (vt_lock held): no handle finds it any more, its union is closed unless calls
 * still run on it. A placeholder stands for a view the server has not had since it
 * started. *had: whether it was a layer of the client's. NULL: no memory.
 */
static struct view *views_retire_begin_locked(struct views *vt, int i, const char *key,
					      bool *had)
{
	struct view *vw;

	for (;;) {
		vw = views_find_locked(vt, i, key);
		if (!vw || !views_passing(vw))
			break;
		views_wait_locked(vt, vw);
	}
	if (!vw) {
		vw = views_new_view(vt, i, key);
		if (vw && views_list_add_locked(vt, vw) < 0) {
			views_free_view(vw);
			vw = NULL;
		}
		if (!vw)
			return NULL;
	}
	*had = vw->vw_known;
	for (uint32_t id = 0; id < VIEWS_IDS; id++)
		if (atomic_load(&vt->vt_byid[id]) == vw)
			atomic_store(&vt->vt_byid[id], NULL);
	/* Calls still running on it finish; it is freed when the server stops. */
	if (!views_close_locked(vt, vw) && vw->vw_state == VIEW_OPEN)
		vt->vt_nopen--;
	vw->vw_state = VIEW_RETIRING;
	return vw;
}

/* The view leaves the table for good (vt_lock held); waiters look again. */
static void views_retire_end_locked(struct views *vt, struct view *vw)
{
	views_list_remove_locked(vt, vw);
	vw->vw_state = VIEW_RETIRED;
	vw->vw_next = vt->vt_retired;
	vt->vt_retired = vw;
	pthread_cond_broadcast(&vt->vt_changed);
}

/*
 * Takes client key's view of export i out of service: the table, the map binding, the
 * upper's name (set aside as gone, removed by the caller). -ENOENT when it had none.
 */
static int views_retire(struct views *vt, int i, const char *key, char *gone, size_t gonelen)
{
	const struct export_conf *ec = views_export(vt, i);
	char name[STORE_EXPORT_NAME_MAX + 1];
	struct view *vw;
	bool had = false;
	int r;

	gone[0] = '\0';
	if ((size_t)snprintf(name, sizeof(name), "%s%%%s", ec->ec_name, key) >= sizeof(name))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&vt->vt_lock);
	vw = views_retire_begin_locked(vt, i, key, &had);
	pthread_mutex_unlock(&vt->vt_lock);
	if (!vw)
		return -ENOMEM;
	union_close(vw->vw_closing);
	vw->vw_closing = NULL;
	r = store_unbind_export(union_store(nfs_export_union(vt->vt_ns, i)), name);
	if (r == 0)
		had = true;
	else if (r == -ENOENT)
		r = 0;
	/* Set aside before the view leaves the table: a new MNT never sees half a layer. */
	if (r == 0) {
		r = views_upper_set_aside(ec, key, gone, gonelen);
		if (r == 0)
			had = true;
		else if (r == -ENOENT)
			r = 0;
	}
	pthread_mutex_lock(&vt->vt_lock);
	views_retire_end_locked(vt, vw);
	pthread_mutex_unlock(&vt->vt_lock);
	if (r < 0)
		return r;
	return had ? 0 : -ENOENT;
}

/*
 * Every export's key for client ("" where client names none), refused with -EBUSY when the
 * client has one of them mounted, unless force. *any: whether an export has upper=.
 */
static int views_reset_keys(struct views *vt, const char *client, bool force,
			    char (*keys)[VIEWS_KEY_MAX], bool *any, char *msg, size_t msglen)
{
	char seen[VIEWS_ADDR_MAX], err[600];
	int kr;

	*any = false;
	for (int i = 0; i < nfs_export_count(vt->vt_ns); i++) {
		const struct export_conf *ec = views_export(vt, i);

		if (!ec->ec_upper || !nfs_export_union(vt->vt_ns, i))
			continue;
		*any = true;
		kr = views_named_key(vt, i, client, keys[i], sizeof(keys[i]), err, sizeof(err));
		if (kr < 0) {
			snprintf(msg, msglen, "%s", err);
			return kr;
		}
		if (kr > 0) {
			keys[i][0] = '\0';
			continue;
		}
		views_seen(vt, i, keys[i], seen, sizeof(seen));
		if (!force && (views_mounted(vt, i, client) || views_mounted(vt, i, seen))) {
			snprintf(msg, msglen, "client %s has %s mounted; unmount it there first, or "
				 "reset --force (its calls then get NFS3ERR_STALE)", client, ec->ec_name);
			return -EBUSY;
		}
	}
	return 0;
}

int views_reset(struct views *vt, const char *client, bool force, char *msg, size_t msglen)
{
	char gone[PATH_MAX + 64];
	char (*keys)[VIEWS_KEY_MAX];
	int n, done = 0, r = -EINVAL;
	bool any;

	msg[0] = '\0';
	n = vt ? nfs_export_count(vt->vt_ns) : 0;
	if (!n)
		goto out;
	keys = calloc((size_t)n, sizeof(*keys));
	if (!keys) {
		snprintf(msg, msglen, "out of memory");
		return -ENOMEM;
	}
	/* First every key and the mounted check, so a refusal discards nothing. */
	r = views_reset_keys(vt, client, force, keys, &any, msg, msglen);
	if (r < 0) {
		free(keys);
		return r;
	}
	r = any ? -ENOENT : -EINVAL;
	for (int i = 0; i < n; i++) {
		const struct export_conf *ec = views_export(vt, i);
		int rr;

		if (!ec->ec_upper || !nfs_export_union(vt->vt_ns, i) || !keys[i][0])
			continue;
		cred_restore();
		rr = views_retire(vt, i, keys[i], gone, sizeof(gone));
		if (rr == -ENOENT)
			continue;
		if (rr < 0) {
			snprintf(msg, msglen, "cannot reset client %s of export %s: %s; see the log",
				 client, ec->ec_name, strerror(-rr));
			free(keys);
			return rr;
		}
		if (gone[0]) {
			rr = views_upper_remove(ec, keys[i], gone);
			if (rr < 0)
				log_warn("reset of client %s: cannot remove %s completely: %s; remove "
					 "it by hand", keys[i], gone, strerror(-rr));
		}
		log_info("export %s: client %s reset to the pristine base", ec->ec_name, keys[i]);
		done++;
		r = 0;
	}
	free(keys);
out:
	if (r == 0)
		snprintf(msg, msglen, "client %s: %d layer%s discarded; its next mount starts from "
			 "the pristine base, its old handles are stale", client, done, done == 1 ? "" : "s");
	else if (r == -ENOENT)
		snprintf(msg, msglen, "client %s has no layer of its own to discard (see `clients`; "
			 "name a client by its address, or by its host name where upper= has %%h)",
			 client);
	else
		snprintf(msg, msglen, "no export has per-client upper branches (option upper=...); "
			 "there is no layer of %s to discard", client);
	return r;
}
