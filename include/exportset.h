/*
 * The unions of the served exports, owned here: opened at start, changed by reloads (an
 * export added, removed, served again, or moved to a new base), closed at exit.
 *
 * A reload is two steps so that the loop never waits for a file system: exportset_prepare,
 * on the reload's own thread, works out what changes and opens the unions the new config
 * needs; exportset_apply, on the loop, only swaps them in (nfs_server_add_export,
 * nfs_server_set_union) and says what it did. A union taken out of service stays open
 * until exit, since calls that began before may still run on it; an export removed and
 * then configured again with the same branches is served by it again.
 */
#ifndef UNFS_EXPORTSET_H
#define UNFS_EXPORTSET_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct exportset;
struct exportset_change;
struct nfs_server;
struct store;
struct union_export;

/*
 * Opens the union of every export of cf in st, and makes room in cf for the exports later
 * reloads add. Returns 0, or -1 with the cause and fix in err.
 */
int exportset_open(struct config *cf, struct store *st, struct exportset **out, char *err,
		   size_t errlen);
/* The table nfs serves from (nfs_server.ns_exports): NFS_MAX_EXPORTS slots. */
struct union_export **exportset_table(struct exportset *es);
void exportset_close(struct exportset *es);

/*
 * Makes the base `unionnfsd-ctl base EXPORT set` gave an export (kept in st) its base in
 * cf, where the configuration still has the base it had then; forgets it (logged) where
 * the configuration's base changed since. exportset_open and exportset_prepare call it.
 */
void exportset_take_set_bases(struct store *st, struct config *cf);

/*
 * Off the loop: what next changes against live (the running config, which only the loop
 * changes, and not while a reload is prepared), with the unions it needs opened; next
 * gets the bases set at run time first. A union
 * that cannot be opened is logged, naming the export, the cause and the fix, and that
 * export is left as it is. NULL: out of memory (logged; nothing changes).
 */
struct exportset_change *exportset_prepare(struct exportset *es, const struct config *live,
					   struct config *next);
/*
 * On the loop: applies ch to ns (whose config is live) before its client rules are
 * swapped; exports added are taken out of next. Logs one line per export changed.
 */
void exportset_apply(struct exportset *es, struct exportset_change *ch, struct nfs_server *ns,
		     struct config *next);
/* Closes what ch opened and apply did not take; NULL is fine. */
void exportset_change_free(struct exportset_change *ch);

#endif
