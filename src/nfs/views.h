/*
 * Per-client views of exports with the option upper=TEMPLATE: each client gets its own
 * writable upper branch (TEMPLATE expanded with its key: its address for %a, its host name
 * for %h) over the export's branches, all read-only lowers. A view is a union of its own,
 * bound in the inode map under the name "EXPORT%KEY" (so it has its own export id: handles
 * name the view), made on the client's first MNT and, after a restart, opened again from
 * the id in a client's handle.
 *
 * The table is owned by the NFS server and thread-safe. A struct nfs_view stays valid for
 * the server's lifetime, but its union may be closed to make room for other clients' views
 * (bounded per client rule by max-views-per-rule, and NFS_VIEWS_MAX in all) once its
 * client has no MOUNT entry and made no call for a while; its upper and inode map binding
 * stay, and its next MNT or call opens it again. So the union is handed out with a
 * reference, which the caller gives back with nfs_views_put() when done with it.
 */
#ifndef UNFS_NFS_VIEWS_H
#define UNFS_NFS_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nfs3.h"

struct nfs_server;
struct union_export;
struct nfs_views;
struct nfs_view;

#define NFS_VIEWS_MAX 4096       /* views open at once, all exports together */

int nfs_views_new(struct nfs_views **out);
void nfs_views_free(struct nfs_views *vt);

/*
 * The view of export index i for the client whose address (nfs_peer_host's text) is addr:
 * found, or made (its upper created if missing with the owner and mode of the top lower's
 * root) and bound, and opened. For %h the address is named by the hosts map or reverse
 * DNS, which may block (MNT runs on a worker). Returns 0 with *vw held (nfs_views_put)
 * and its union in *ux, or -errno with a message naming cause and fix in err (-EACCES:
 * the client has no usable host name; -ENOSPC: no room under the bounds).
 */
int nfs_views_for_client(struct nfs_server *ns, int i, const char *addr,
			 struct nfs_view **vw, struct union_export **ux, char *err,
			 size_t errlen);

/* Gives back the reference of nfs_views_for_client or nfs_views_by_id. NULL is fine. */
void nfs_views_put(struct nfs_view *vw);

/*
 * The view with export id for a call from addr: opened from its inode map binding if it
 * is not open (the server has not opened it since it started, or closed it to make
 * room). *i receives its export's index, *vw the view held (nfs_views_put) and *ux its
 * union. Returns NFS3_OK, NFS3ERR_STALE when no view has the id (or it cannot be opened),
 * NFS3ERR_ACCES when the view belongs to another client, or NFS3ERR_JUKEBOX when the
 * host name of addr (%h) cannot be looked up now or no room can be made to open it.
 */
nfsstat3 nfs_views_by_id(struct nfs_server *ns, uint16_t id, const char *addr, int *i,
			 struct nfs_view **vw, struct union_export **ux);

/*
 * Discards the own upper branches of client (an address, or a host name for exports with
 * %h) in every export with upper=: refused with
 * -EBUSY while the client has one of them mounted (the MOUNT list), unless force. The view
 * leaves the table (calls already running finish on it), its inode map binding and records
 * go (its handles are stale from then on), and its upper directory is removed; the
 * client's next MNT starts again from the pristine base. -ENOENT when the client has no
 * layer, -EINVAL when no export has upper=. msg receives a line for the admin.
 */
int nfs_views_reset(struct nfs_server *ns, const char *client, bool force, char *msg,
		    size_t msglen);

/*
 * Calls fn for every per-client view of export index i that the inode map binds, opening
 * views that are not open (not for any client: for the control socket's check, off the
 * loop; such a view is closed again after fn). ux is NULL for a view that cannot be
 * opened (its upper is gone). Stops at the first non-zero return of fn and returns it; 0
 * when done.
 */
int nfs_views_walk(struct nfs_server *ns, int i,
		   int (*fn)(struct union_export *ux, const char *key, void *arg), void *arg);

/* How many client views of export index i are open now. */
int nfs_views_open_count(struct nfs_server *ns, int i);

/*
 * Where the own upper of the client at addr is for export index i, without waiting for a
 * name lookup (for the control socket, on the loop): -1 when the export has no upper= or,
 * for %h, the address is in neither the hosts map nor a view's last-seen address.
 */
int nfs_views_upper_of(struct nfs_server *ns, int i, const char *addr, char *dir, size_t len);

/*
 * The NFS fileid of union inode ino of ux: ino itself for an export of the config; for a
 * view, ino with the view's export id in the top 16 bits, so copies of one path in two
 * clients' views never share a fileid (each view numbers its inodes from 1).
 */
uint64_t nfs_views_fileid(const struct nfs_server *ns, const struct union_export *ux,
			  uint64_t ino);

#endif
