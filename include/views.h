/*
 * Per-client views of exports with the option upper=TEMPLATE: each client gets its own
 * writable upper branch (TEMPLATE expanded with its key: its address for %a, its host name
 * for %h) over the export's branches, all read-only lowers. A view is a union of its own,
 * bound in the inode map under the name "EXPORT%KEY" (so it has its own export id: handles
 * name the view), made on the client's first MNT and, after a restart, opened again from
 * the id in a client's handle.
 *
 * Views sit above nfs: views_new hands nfs the three calls it needs (struct nfs_views_ops:
 * a client's view for a MNT, the view a handle names, and giving a view back), and views
 * reach nfs, union and store only through their public headers. The table is thread-safe.
 * A view's union may be closed to make room for other clients' views (bounded per client
 * rule by max-views-per-rule, and VIEWS_MAX in all) once its client has no MOUNT entry and
 * made no call for a while; its upper and inode map binding stay, and its next MNT or call
 * opens it again.
 */
#ifndef UNFS_VIEWS_H
#define UNFS_VIEWS_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct nfs_server;
struct union_export;
struct views;

#define VIEWS_MAX 4096           /* views open at once, all exports together */

/*
 * The table of views of ns's exports (cf: the config ns serves), attached to ns
 * (nfs_server_set_views) until views_free, which must come before nfs_server_free.
 */
int views_new(struct nfs_server *ns, const struct config *cf, struct views **out);
void views_free(struct views *vt);

/*
 * Discards the own upper branches of client (an address, or a host name for exports with
 * %h) in every export with upper=: refused with -EBUSY while the client has one of them
 * mounted (the MOUNT list), unless force. The view leaves the table (calls already running
 * finish on it), its inode map binding and records go (its handles are stale from then
 * on), and its upper directory is removed; the client's next MNT starts again from the
 * pristine base. -ENOENT when the client has no layer, -EINVAL when no export has upper=.
 * msg receives a line for the admin.
 */
int views_reset(struct views *vt, const char *client, bool force, char *msg, size_t msglen);

/*
 * Calls fn for every per-client view of export index i that the inode map binds, opening
 * views that are not open (not for any client: for the control socket's check, off the
 * loop; such a view is closed again after fn). ux is NULL for a view that cannot be
 * opened (its upper is gone). Stops at the first non-zero return of fn and returns it; 0
 * when done.
 */
int views_walk(struct views *vt, int i,
	       int (*fn)(struct union_export *ux, const char *key, void *arg), void *arg);

/*
 * Base versions (a reload gave an export with upper= new lower branches; each client moves
 * at its next MNT). For the control socket, off the loop: both read the uppers.
 *
 * views_conflicts: for client (an address, or a host name where upper= has %h), in every
 * export with upper= where it has two bases, calls fn for each entry of its own upper that
 * hides a base path differing between them (union_conflicts): the base it is on and the
 * export's base now when it has not moved yet, else the base it had before and the one it
 * is on. *moved counts the exports compared. 0, fn's non-zero return, or -errno with the
 * cause in msg (-ENOENT: the client has no layer; -EINVAL: no export has upper=).
 * views_take_base: drops client's own entry at path (union_take_base) in every export with
 * upper= where it has one, so the base's version shows from its next mount. 0, or -errno
 * with msg (-ENOENT: no copy there); msg also says what was done.
 */
struct union_conflict;
int views_conflicts(struct views *vt, const char *client,
		    int (*fn)(const char *export, const struct union_conflict *c, void *arg),
		    void *arg, int *moved, char *msg, size_t msglen);
int views_take_base(struct views *vt, const char *client, const char *path, char *msg,
		    size_t msglen);

/* How many client views of export index i are open now. */
int views_open_count(struct views *vt, int i);

/*
 * Where the own upper of the client at addr is for export index i, without waiting for a
 * name lookup (for the control socket, on the loop): -1 when the export has no upper= or,
 * for %h, the address is in neither the hosts map nor a view's last-seen address.
 */
int views_upper_of(struct views *vt, int i, const char *addr, char *dir, size_t len);

/*
 * upper= templates, as text (config checks them when it reads them).
 *
 * views_upper_check: absolute, naming the client by %a (address) or by %h (host name), not
 * both, %% for a '%', nothing else after a '%'. Returns 0, or -1 naming the fault and the
 * fix in err.
 */
int views_upper_check(const char *tmpl, char *err, size_t errlen);

/* Whether a checked template names clients by host name (%h) rather than address (%a). */
bool views_upper_by_name(const char *tmpl);

/*
 * Expands a checked template for the client named client (its address as text for %a,
 * its host name for %h) into out. Returns 0, or -1 if it does not fit outlen bytes.
 */
int views_upper_expand(const char *tmpl, const char *client, char *out, size_t outlen);

#endif
