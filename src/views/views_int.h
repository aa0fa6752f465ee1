/*
 * Shared by the files of src/views/ only: the table, one client's view, and the calls
 * between registry.c (the table and its latches), room.c (closing idle views for others),
 * naming.c (who a client is), upper.c (a view's upper directory on disk) and reset.c.
 *
 * Locking. vt_lock guards the table (vt_list, vt_byid's changes, every view's vw_state)
 * and is only ever held for work in memory: the file system work of opening or closing a
 * view's union happens without it, while the view is OPENING or CLOSING (or RETIRING for a
 * reset). A thread that finds a view in one of those states waits on vt_changed and then
 * looks the view up again (it may have left the table meanwhile); so two first calls of
 * one client open its view once, and other clients' calls go on meanwhile.
 */
#ifndef UNFS_VIEWS_INT_H
#define UNFS_VIEWS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "hostmap.h"
#include "nfs.h"
#include "views.h"

#define VIEWS_IDS 65536
#define VIEWS_ADDR_MAX 64        /* INET6_ADDRSTRLEN and then some */
#define VIEWS_KEY_MAX (HOSTMAP_NAME_MAX + 1)
#define VIEWS_DENY_SECONDS 60    /* a refused address is not looked up again for this long */
#define VIEWS_NONAME_KEPT 64     /* addresses remembered as having no host name */
#define VIEWS_REVERSE_MAX 4      /* reverse DNS lookups at once; more calls are refused */
/*
 * A view without a call for this long (and without a mount) may be closed for another:
 * reopening costs a few milliseconds, so this only keeps clients that call all the time
 * from closing each other's views over and over.
 */
#define VIEWS_IDLE_SECONDS 2

enum view_state {
	VIEW_CLOSED,   /* no union; the next MNT or call opens it */
	VIEW_OPENING,  /* a thread makes its upper and opens its union, without vt_lock */
	VIEW_OPEN,
	VIEW_CLOSING,  /* its union is being closed, without vt_lock (vw_closing) */
	VIEW_RETIRING, /* a reset takes it out of service: map binding and upper go */
	VIEW_RETIRED,  /* off the table; calls that held it before finish on it */
};

/*
 * A client is known by its key: its address for upper=...%a, its host name for %h. For %h
 * the address a call comes from is checked against the key by a name lookup, which may
 * block, so the view remembers the last address found to be its client (and the last one
 * found not to be).
 */
struct view {
	struct view *vw_next;    /* vt_retired */
	int vw_export;           /* index of the export it is a view of */
	bool vw_by_name;         /* keyed by host name (%h) */
	char vw_key[VIEWS_KEY_MAX]; /* the client it belongs to */
	pthread_mutex_t vw_lock; /* guards the four below */
	char vw_seen[VIEWS_ADDR_MAX];
	char vw_denied[VIEWS_ADDR_MAX];
	time_t vw_denied_at;
	unsigned vw_names_gen;   /* nfs_names_gen they were found under: a reload voids them */
	/* vt_lock guards these five. */
	enum view_state vw_state;
	unsigned vw_waiting;     /* threads waiting for it to leave OPENING, CLOSING, RETIRING */
	bool vw_known;           /* ever opened, or bound in the map: kept when an open fails */
	int vw_rule;             /* the client rule of its client, -1 none */
	unsigned vw_rule_gen;    /* nfs_names_gen + 1 it was found under; 0 never */
	/*
	 * The union; NULL unless OPEN. A call adds to vw_refs before it loads vw_ux and
	 * subtracts when done with it; views_close_locked sets vw_ux NULL before it reads
	 * vw_refs, so either the call sees NULL or the closer sees the call.
	 */
	_Atomic(struct union_export *) vw_ux;
	atomic_uint vw_refs;
	struct union_export *vw_closing; /* the union being closed while CLOSING */
	/*
	 * The base its union was opened on: nfs_export_base_gen + 1 when a MNT opened it on
	 * the export's base of the time; 0 when a handle did, on the base the view's map
	 * binding records (what its client mounted last, maybe before a reload or restart).
	 */
	unsigned vw_base_gen;
	_Atomic time_t vw_used;  /* when the last call or MNT ended (or the view opened) */
};

/* An address whose host name could not be found, and when (see views_client_key). */
struct views_noname {
	char nn_addr[VIEWS_ADDR_MAX];
	time_t nn_at;
	unsigned nn_gen;
};

struct views {
	struct nfs_server *vt_ns;
	const struct config *vt_cfg; /* the exports; their rules only through vt_ns */
	pthread_mutex_t vt_lock;
	pthread_cond_t vt_changed;   /* a view left OPENING, CLOSING or RETIRING */
	struct views_noname vt_noname[VIEWS_NONAME_KEPT];
	unsigned vt_noname_next;
	atomic_uint vt_reversing;    /* reverse lookups running */
	struct view **vt_list;       /* every view a MNT or a handle named since the start */
	int vt_n, vt_cap;
	int vt_nopen;                /* OPENING or OPEN: room is taken when opening starts */
	struct view *vt_retired;     /* reset views: calls may still run on them until stop */
	_Atomic(struct view *) *vt_byid; /* [export id] of the views opened or bound */
};

static inline const struct export_conf *views_export(const struct views *vt, int i)
{
	return &vt->vt_cfg->cf_exports[i];
}

/* registry.c */
struct view *views_find_locked(struct views *vt, int i, const char *key);
struct view *views_new_view(struct views *vt, int i, const char *key);
void views_free_view(struct view *vw);
int views_list_add_locked(struct views *vt, struct view *vw);
void views_list_remove_locked(struct views *vt, struct view *vw);
bool views_passing(const struct view *vw);
void views_wait_locked(struct views *vt, struct view *vw);
bool views_close_locked(struct views *vt, struct view *vw);
void views_finish_close(struct views *vt, struct view *vw);
bool views_log_due(_Atomic time_t *last);

/* room.c */
int views_make_room_locked(struct views *vt, int i, int rule, struct view **evicted,
			   char *err, size_t errlen);

/* base.c: whether two stacks name the same branches in the same order. */
bool views_same_stack(char *const *a, int na, char *const *b, int nb);

/* naming.c */
int views_client_key(struct views *vt, int i, const char *addr, char *key, size_t keylen,
		     char *err, size_t errlen);
/*
 * The key of the client an admin named (control socket) for export i: an address, or for
 * %h also a host name. Returns 0, 1 when client cannot name a client of this export, or
 * -errno with the cause in err.
 */
int views_named_key(struct views *vt, int i, const char *client, char *key, size_t keylen,
		    char *err, size_t errlen);
int views_rule_of(struct views *vt, int i, const char *addr);
int views_rule_locked(struct views *vt, struct view *vw);
void views_client_addr(struct view *vw, char *addr, size_t len);
void views_set_found(struct view *vw, const char *addr, bool seen, unsigned gen);
int views_owned_by(struct views *vt, struct view *vw, const char *addr);
bool views_mounted(struct views *vt, int i, const char *addr);

/* upper.c */
int views_upper_make(const struct export_conf *ec, const char *key, char *err, size_t errlen);
int views_upper_check_overlap(const struct export_conf *ec, const char *upper, char *err,
			      size_t errlen);
int views_upper_set_aside(const struct export_conf *ec, const char *key, char *gone,
			  size_t gonelen);
int views_upper_remove(const struct export_conf *ec, const char *key, const char *gone);

#endif
