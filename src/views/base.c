/*
 * Base versions seen from one client (views.h): which two bases its own upper sits between,
 * what of its upper hides a base file that changed between them, and dropping such copies.
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

/* Two stacks of lower branches: a client's old base and its new one. */
struct views_bases {
	char **vb_old, **vb_new;
	int vb_nold, vb_nnew;
	char **vb_rec, **vb_prev;    /* the map binding's stacks (their [0] is the upper) */
	int vb_nrec, vb_nprev;
	enum union_role *vb_roles;
};

static void views_bases_free(struct views_bases *b)
{
	store_export_stack_free(b->vb_rec, b->vb_nrec);
	store_export_stack_free(b->vb_prev, b->vb_nprev);
	nfs_export_branches_free(b->vb_new, NULL, b->vb_nnew);
	free(b->vb_roles);
	memset(b, 0, sizeof(*b));
}

bool views_same_stack(char *const *a, int na, char *const *b, int nb)
{
	if (na != nb)
		return false;
	for (int k = 0; k < na; k++)
		if (strcmp(a[k], b[k]))
			return false;
	return true;
}

/*
 * The bases of view name of export i: the one it is on (what its binding records) and the
 * export's base now, when they differ (the view moves at its next MNT); else the one it had
 * before and the one it is on. 0; 1 when it has had one base only; -errno.
 */
static int views_bases_of(struct views *vt, int i, const char *name, struct views_bases *b)
{
	struct store *st = union_store(nfs_export_union(vt->vt_ns, i));
	int r;

	memset(b, 0, sizeof(*b));
	r = store_export_stack(st, name, false, &b->vb_rec, &b->vb_nrec);
	if (r < 0)
		return r;
	r = nfs_export_branches(vt->vt_ns, i, &b->vb_new, &b->vb_roles, &b->vb_nnew);
	if (r < 0 || b->vb_nrec < 2) {
		views_bases_free(b);
		return r < 0 ? r : -EIO;
	}
	if (!views_same_stack(b->vb_rec + 1, b->vb_nrec - 1, b->vb_new, b->vb_nnew)) {
		b->vb_old = b->vb_rec + 1;
		b->vb_nold = b->vb_nrec - 1;
		return 0;
	}
	r = store_export_stack(st, name, true, &b->vb_prev, &b->vb_nprev);
	if (r == -ENOENT || (r == 0 && b->vb_nprev < 2)) {
		views_bases_free(b);
		return 1;
	}
	if (r < 0) {
		views_bases_free(b);
		return r;
	}
	b->vb_old = b->vb_prev + 1;
	b->vb_nold = b->vb_nprev - 1;
	return 0;
}

/* The client's key, view name and upper in export i; 1 when it names no client there. */
static int views_client_place(struct views *vt, int i, const char *client, char *name,
			      size_t namelen, char *upper, size_t upperlen, char *msg,
			      size_t msglen)
{
	const struct export_conf *ec = views_export(vt, i);
	char key[VIEWS_KEY_MAX];
	int r = views_named_key(vt, i, client, key, sizeof(key), msg, msglen);

	if (r != 0)
		return r;
	if ((size_t)snprintf(name, namelen, "%s%%%s", ec->ec_name, key) >= namelen ||
	    views_upper_expand(ec->ec_upper, key, upper, upperlen) < 0) {
		snprintf(msg, msglen, "export %s: the view name or upper of client %s is too long",
			 ec->ec_name, client);
		return -ENAMETOOLONG;
	}
	return 0;
}

struct views_conflict_walk {
	const char *cw_export;
	int (*cw_fn)(const char *export, const struct union_conflict *c, void *arg);
	void *cw_arg;
};

static int views_conflict_one(const struct union_conflict *c, void *arg)
{
	struct views_conflict_walk *w = arg;

	return w->cw_fn(w->cw_export, c, w->cw_arg);
}

int views_conflicts(struct views *vt, const char *client,
		    int (*fn)(const char *export, const struct union_conflict *c, void *arg),
		    void *arg, int *moved, char *msg, size_t msglen)
{
	char name[STORE_EXPORT_NAME_MAX + 1], upper[PATH_MAX], err[600];
	bool any = false, known = false;
	int r = 0;

	*moved = 0;
	msg[0] = '\0';
	for (int i = 0; vt && i < nfs_export_count(vt->vt_ns) && r == 0; i++) {
		const struct export_conf *ec = views_export(vt, i);
		struct views_conflict_walk w = { ec->ec_name, fn, arg };
		struct views_bases b;

		if (!ec->ec_upper || !nfs_export_union(vt->vt_ns, i))
			continue;
		any = true;
		r = views_client_place(vt, i, client, name, sizeof(name), upper, sizeof(upper), msg,
				       msglen);
		if (r > 0) {
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		r = views_bases_of(vt, i, name, &b);
		if (r == -ENOENT) { /* no layer in this export */
			r = 0;
			continue;
		}
		known = true;
		if (r > 0) {
			r = 0;
			continue;
		}
		if (r < 0) {
			snprintf(msg, msglen, "export %s: cannot read the bases of client %s from the "
				 "inode map: %s", ec->ec_name, client, strerror(-r));
			break;
		}
		(*moved)++;
		cred_restore();
		r = union_conflicts(upper, b.vb_old, b.vb_nold, b.vb_new, b.vb_nnew,
				    views_conflict_one, &w, err, sizeof(err));
		if (r < 0)
			snprintf(msg, msglen, "export %s, client %s: %s", ec->ec_name, client, err);
		views_bases_free(&b);
	}
	if (r == 0 && !any) {
		snprintf(msg, msglen, "no export has per-client upper branches (option upper=...)");
		return -EINVAL;
	}
	if (r == 0 && !known) {
		snprintf(msg, msglen, "client %s has no layer of its own (see `clients`; name a "
			 "client by its address, or by its host name where upper= has %%h)", client);
		return -ENOENT;
	}
	return r;
}

int views_take_base(struct views *vt, const char *client, const char *path, char *msg,
		    size_t msglen)
{
	char name[STORE_EXPORT_NAME_MAX + 1], upper[PATH_MAX], err[600];
	int r = 0, done = 0, tried = 0;

	msg[0] = '\0';
	for (int i = 0; vt && i < nfs_export_count(vt->vt_ns); i++) {
		const struct export_conf *ec = views_export(vt, i);

		if (!ec->ec_upper || !nfs_export_union(vt->vt_ns, i))
			continue;
		r = views_client_place(vt, i, client, name, sizeof(name), upper, sizeof(upper), msg,
				       msglen);
		if (r < 0)
			return r;
		if (r > 0)
			continue;
		tried++;
		cred_restore();
		r = union_take_base(upper, path, err, sizeof(err));
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			snprintf(msg, msglen, "export %s, client %s: %s", ec->ec_name, client, err);
			return r;
		}
		log_info("export %s: client %s takes the base's %s (its own copy dropped)",
			 ec->ec_name, client, path);
		done++;
	}
	if (!tried) {
		snprintf(msg, msglen, "no export has per-client upper branches for client %s "
			 "(option upper=...)", client);
		return -EINVAL;
	}
	if (!done) {
		snprintf(msg, msglen, "client %s has no copy of its own at %s (nothing to drop; "
			 "`conflicts %s` lists what it has)", client, path, client);
		return -ENOENT;
	}
	snprintf(msg, msglen, "client %s: its copy of %s dropped in %d export%s; the base's "
		 "version shows from its next mount", client, path, done, done == 1 ? "" : "s");
	return 0;
}
