/* The served exports' unions and how reloads change them (exportset.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "exportset.h"
#include "log.h"
#include "nfs.h"
#include "union.h"

#define EXPORTSET_ERRLEN 1024

/* A union no export serves any more, kept open for the calls that may still run on it. */
struct exportset_old {
	struct union_export *eo_ux;
	struct exportset_old *eo_next;
};

struct exportset {
	struct store *es_store;
	struct union_export **es_table;      /* [slot]: what nfs serves it by, NULL if removed */
	struct union_export **es_removed;    /* [slot]: its union while removed */
	struct exportset_old *es_old;
};

enum exportset_action {
	EXPORTSET_SAME = 0,      /* nothing for this module: rules and options only */
	EXPORTSET_ADD,           /* a new export: served by its opened union */
	EXPORTSET_REVIVE,        /* removed before, back with the same branches */
	EXPORTSET_BASE,          /* other read-only branches: served by its opened union */
};

struct exportset_change {
	int ch_n;                            /* next's exports */
	enum exportset_action *ch_action;    /* [j] for next's export j */
	struct union_export **ch_ux;         /* [j]: the union opened for it */
};

/* Opens export ec's union by its policy; -errno with the cause and the fix in err. */
static int exportset_open_one(const struct export_conf *ec, struct store *st, unsigned flags,
			      const char *fix, struct union_export **ux, char *err, size_t errlen)
{
	int r = union_open(ec->ec_name, ec->ec_branches, ec->ec_nbranches, ec->ec_roles,
			   flags | (ec->ec_opts.eo_ro ? UNION_OPEN_RO : 0), fix, st, ux, err, errlen);

	if (r == 0)
		union_set_policy(*ux, &ec->ec_policy);
	return r;
}

void exportset_take_set_bases(struct store *st, struct config *cf)
{
	for (int i = 0; i < cf->cf_nexports; i++) {
		struct export_conf *ec = &cf->cf_exports[i];
		char *set = NULL, *was = NULL, *now;
		int r;

		if (!ec->ec_name || store_base_get(st, ec->ec_name, &set, &was) < 0)
			continue;
		now = config_base_text(ec);
		if (now && !strcmp(now, was)) {
			r = config_set_base(ec, set);
			if (r < 0)
				log_err("export %s: cannot serve the base `unionnfsd-ctl base` set (%s); "
					"the configuration's is served", ec->ec_name, strerror(-r));
		} else if (now) {
			log_info("export %s: its branches in the configuration changed since "
				 "`unionnfsd-ctl base ... set`; the configuration's base is served",
				 ec->ec_name);
			store_base_set(st, ec->ec_name, NULL, NULL);
		}
		free(now);
		free(set);
		free(was);
	}
}

int exportset_open(struct config *cf, struct store *st, struct exportset **out, char *err,
		   size_t errlen)
{
	struct exportset *es = calloc(1, sizeof(*es));

	*out = NULL;
	if (es) {
		es->es_table = calloc(NFS_MAX_EXPORTS, sizeof(*es->es_table));
		es->es_removed = calloc(NFS_MAX_EXPORTS, sizeof(*es->es_removed));
	}
	if (!es || !es->es_table || !es->es_removed ||
	    config_reserve_exports(cf, NFS_MAX_EXPORTS) < 0) {
		snprintf(err, errlen, "out of memory");
		exportset_close(es);
		return -1;
	}
	es->es_store = st;
	exportset_take_set_bases(st, cf);
	for (int i = 0; i < cf->cf_nexports; i++) {
		/* union_open's messages already name the export. */
		if (exportset_open_one(&cf->cf_exports[i], st, 0, "fix -e", &es->es_table[i], err,
				       errlen) < 0) {
			exportset_close(es);
			return -1;
		}
	}
	*out = es;
	return 0;
}

struct union_export **exportset_table(struct exportset *es)
{
	return es->es_table;
}

void exportset_close(struct exportset *es)
{
	if (!es)
		return;
	for (int i = 0; es->es_table && i < NFS_MAX_EXPORTS; i++) {
		union_close(es->es_table[i]);
		if (es->es_removed)
			union_close(es->es_removed[i]);
	}
	while (es->es_old) {
		struct exportset_old *o = es->es_old;

		es->es_old = o->eo_next;
		union_close(o->eo_ux);
		free(o);
	}
	free(es->es_table);
	free(es->es_removed);
	free(es);
}

/* ---- reloads ---- */

static bool exportset_same_upper(const struct export_conf *a, const struct export_conf *b)
{
	return a->ec_upper == b->ec_upper || (a->ec_upper && b->ec_upper &&
					       !strcmp(a->ec_upper, b->ec_upper));
}

/*
 * Before export ec (its branches now) moves to a new base: the metacopies of its upper get
 * their data from the old base, which they would otherwise stop showing. Its union still
 * serves meanwhile: a client writing to such a file at this very moment may race the copy
 * (README: Base versions).
 */
static void exportset_settle_metacopies(const struct export_conf *ec)
{
	int nw = config_writable_count(ec), done = 0;
	char err[EXPORTSET_ERRLEN];

	if (nw == 0 || nw == ec->ec_nbranches)
		return;
	if (union_complete_metacopies(ec->ec_branches[0], ec->ec_branches + nw,
				      ec->ec_nbranches - nw, &done, err, sizeof(err)) < 0)
		log_warn("reload: export %s moves to its new base with a metadata-only copy it "
			 "could not make whole (it shows the new base's data): %s", ec->ec_name, err);
	if (done)
		log_info("reload: export %s: %d metadata-only cop%s made whole from the old base",
			 ec->ec_name, done, done == 1 ? "y" : "ies");
}

struct exportset_change *exportset_prepare(struct exportset *es, const struct config *live,
					   struct config *next)
{
	struct exportset_change *ch = calloc(1, sizeof(*ch));
	char err[EXPORTSET_ERRLEN];

	exportset_take_set_bases(es->es_store, next);

	if (ch) {
		ch->ch_n = next->cf_nexports;
		ch->ch_action = calloc((size_t)ch->ch_n + 1, sizeof(*ch->ch_action));
		ch->ch_ux = calloc((size_t)ch->ch_n + 1, sizeof(*ch->ch_ux));
	}
	if (!ch || !ch->ch_action || !ch->ch_ux) {
		log_err("reload: out of memory; the exports are left as they were");
		exportset_change_free(ch);
		return NULL;
	}
	for (int j = 0; j < next->cf_nexports; j++) {
		const struct export_conf *ec = &next->cf_exports[j];
		int i = config_find_export(live, ec->ec_name);
		bool same = i >= 0 && config_same_branches(&live->cf_exports[i], ec);
		unsigned flags = i >= 0 ? UNION_OPEN_NEW_BASE : 0;

		if (same && es->es_removed[i]) {
			ch->ch_action[j] = EXPORTSET_REVIVE;
			continue;
		}
		/* upper= changes need a restart: its clients' layers are where it said */
		if (same || (i >= 0 && !exportset_same_upper(&live->cf_exports[i], ec)))
			continue;
		if (i >= 0)
			exportset_settle_metacopies(&live->cf_exports[i]);
		if (exportset_open_one(ec, es->es_store, flags,
				       "fix the export's branches in the configuration",
				       &ch->ch_ux[j], err, sizeof(err)) < 0)
			log_err("reload: export %s %s: %s", ec->ec_name,
				i < 0 ? "is not served" : "keeps its old branches", err);
		else
			ch->ch_action[j] = i < 0 ? EXPORTSET_ADD : EXPORTSET_BASE;
	}
	return ch;
}

static void exportset_remove(struct exportset *es, struct nfs_server *ns, int i)
{
	const char *name = ns->ns_cfg->cf_exports[i].ec_name;

	es->es_removed[i] = nfs_server_set_union(ns, i, NULL);
	log_info("reload: export %s removed: its clients' file handles are stale from now on, "
		 "and mounting it answers 'no such export'", name);
}

/*
 * Serves slot i by ux, opened on ec's branches (a new base), from now on. The old union
 * (or the one kept while the export was removed) stays open for calls already running.
 */
static void exportset_new_base(struct exportset *es, struct nfs_server *ns, int i,
			       struct export_conf *ec, struct union_export *ux)
{
	struct exportset_old *o = calloc(1, sizeof(*o));
	const char *name = ns->ns_cfg->cf_exports[i].ec_name;
	struct union_export *old;

	nfs_server_swap_branches(ns, i, ec);
	old = nfs_server_set_union(ns, i, ux);
	if (!old) {
		old = es->es_removed[i];
		es->es_removed[i] = NULL;
	}
	if (o) {
		o->eo_ux = old;
		o->eo_next = es->es_old;
		es->es_old = o;
	} else {
		log_warn("reload: out of memory keeping the old union of export %s: its files stay "
			 "open until unionnfsd restarts", name);
	}
	if (ns->ns_cfg->cf_exports[i].ec_upper)
		log_info("reload: export %s has a new base (%d branch%s): each client moves to it at "
			 "its next mount, keeping its own upper", name,
			 ns->ns_cfg->cf_exports[i].ec_nbranches,
			 ns->ns_cfg->cf_exports[i].ec_nbranches == 1 ? "" : "es");
	else
		log_info("reload: export %s is served from its new branches at once; handles of "
			 "files of the branches it no longer has are stale", name);
}

void exportset_apply(struct exportset *es, struct exportset_change *ch, struct nfs_server *ns,
		     struct config *next)
{
	struct config *live = ns->ns_cfg;
	int n = live->cf_nexports;

	for (int i = 0; i < n; i++)
		if (es->es_table[i] && config_find_export(next, live->cf_exports[i].ec_name) < 0)
			exportset_remove(es, ns, i);
	for (int j = 0; j < ch->ch_n; j++) {
		const char *name = next->cf_exports[j].ec_name;
		int i;

		switch (ch->ch_action[j]) {
		case EXPORTSET_SAME:
			break;
		case EXPORTSET_REVIVE:
			i = config_find_export(live, name);
			nfs_server_set_union(ns, i, es->es_removed[i]);
			es->es_removed[i] = NULL;
			log_info("reload: export %s is served again", name);
			break;
		case EXPORTSET_BASE:
			i = config_find_export(live, name);
			exportset_new_base(es, ns, i, &next->cf_exports[j], ch->ch_ux[j]);
			ch->ch_ux[j] = NULL;
			break;
		case EXPORTSET_ADD:
			i = nfs_server_add_export(ns, next, j, ch->ch_ux[j]);
			if (i < 0) {
				log_err("reload: export %s is not served: all %d export slots of this "
					"run are used (removed exports keep theirs); restart unionnfsd "
					"to serve it", name, NFS_MAX_EXPORTS);
				break;
			}
			ch->ch_ux[j] = NULL;
			log_info("reload: export %s added", live->cf_exports[i].ec_name);
			break;
		}
	}
}

void exportset_change_free(struct exportset_change *ch)
{
	if (!ch)
		return;
	for (int j = 0; ch->ch_ux && j < ch->ch_n; j++)
		union_close(ch->ch_ux[j]);
	free(ch->ch_action);
	free(ch->ch_ux);
	free(ch);
}
