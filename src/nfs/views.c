/*
 * The table of per-client views (see views.h). Views are looked up by export id on every
 * call, so that lookup is a lock-free read of an array indexed by id; making or opening a
 * view takes the table's mutex, which also keeps two first calls of one client from
 * opening the same view twice.
 *
 * Open views are bounded (views_make_room_locked): a view whose client has no MOUNT entry
 * and made no call for VIEWS_IDLE_SECONDS may be closed to make room for another. Closing
 * frees its union (descriptors, caches) but keeps the struct, its binding and its upper:
 * its next MNT or call opens it again. So a struct nfs_view lives until the server stops,
 * and calls hold its union with vw_refs (views_hold, nfs_views_put).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cred.h"
#include "exports.h"
#include "fsio.h"
#include "hostmap.h"
#include "log.h"
#include "nfs.h"
#include "nfs_internal.h"
#include "stats.h"
#include "union.h"
#include "views.h"

#define VIEWS_IDS 65536
#define VIEWS_ADDR_MAX 64        /* INET6_ADDRSTRLEN and then some */
#define VIEWS_KEY_MAX (HOSTMAP_NAME_MAX + 1)
#define VIEWS_DENY_SECONDS 60    /* a refused address is not looked up again for this long */
/*
 * A view without a call for this long (and without a mount) may be closed for another:
 * reopening costs a few milliseconds, so this only keeps clients that call all the time
 * from closing each other's views over and over.
 */
#define VIEWS_IDLE_SECONDS 2

/*
 * A client is known by its key: its address for upper=...%a, its host name for %h. For %h
 * the address a call comes from is checked against the key by a name lookup, which may
 * block, so the view remembers the last address found to be its client (and the last one
 * found not to be).
 */
struct nfs_view {
	struct nfs_view *vw_next; /* vt_retired */
	int vw_export;           /* index of the export it is a view of */
	bool vw_by_name;         /* keyed by host name (%h) */
	bool vw_listed;          /* in vt_list (a view is listed once it was first opened) */
	char vw_key[VIEWS_KEY_MAX]; /* the client it belongs to */
	pthread_mutex_t vw_lock; /* guards the four below */
	char vw_seen[VIEWS_ADDR_MAX];
	char vw_denied[VIEWS_ADDR_MAX];
	time_t vw_denied_at;
	unsigned vw_names_gen;   /* ns_names_gen they were found under: a reload voids them */
	/*
	 * The union; NULL while the view is closed. A call adds to vw_refs before it loads
	 * vw_ux and subtracts when done with it; views_close_locked sets vw_ux NULL before it
	 * reads vw_refs, so either the call sees NULL or the closer sees the call.
	 */
	_Atomic(struct union_export *) vw_ux;
	atomic_uint vw_refs;
	_Atomic time_t vw_used;  /* when the last call or MNT ended (or the view opened) */
	int vw_rule;             /* the client rule of its client, -1 none (vt_lock) */
	unsigned vw_rule_gen;    /* ns_names_gen + 1 it was found under; 0 never */
};

#define VIEWS_NONAME_KEPT 64     /* addresses remembered as having no host name */
#define VIEWS_REVERSE_MAX 4      /* reverse DNS lookups at once; more calls are refused */

/* An address whose host name could not be found, and when (see views_client_key). */
struct views_noname {
	char nn_addr[VIEWS_ADDR_MAX];
	time_t nn_at;
	unsigned nn_gen;
};

struct nfs_views {
	pthread_mutex_t vt_lock; /* guards vt_list, vt_n, vt_retired, vt_noname and vt_byid's changes */
	/*
	 * Also taken, briefly and inside vt_lock, by whoever changes vt_list or vt_n: the
	 * control socket reads them on the event loop, which must not wait for vt_lock while a
	 * worker holds it to open a view (file system work).
	 */
	pthread_mutex_t vt_list_lock;
	struct views_noname vt_noname[VIEWS_NONAME_KEPT];
	unsigned vt_noname_next;
	atomic_uint vt_reversing;    /* reverse lookups running */
	struct nfs_view **vt_list;   /* every view a MNT or a handle named since the start */
	int vt_n, vt_cap;
	int vt_nopen;                /* those with a union open */
	struct nfs_view *vt_retired; /* reset views: calls may still run on them until stop */
	_Atomic(struct nfs_view *) *vt_byid; /* [export id]; cleared only by a reset */
};

int nfs_views_new(struct nfs_views **out)
{
	struct nfs_views *vt = calloc(1, sizeof(*vt));

	*out = NULL;
	if (!vt)
		return -ENOMEM;
	vt->vt_byid = calloc(VIEWS_IDS, sizeof(*vt->vt_byid));
	if (!vt->vt_byid) {
		free(vt);
		return -ENOMEM;
	}
	pthread_mutex_init(&vt->vt_lock, NULL);
	pthread_mutex_init(&vt->vt_list_lock, NULL);
	*out = vt;
	return 0;
}

static void views_free_one(struct nfs_view *vw)
{
	union_close(atomic_load(&vw->vw_ux));
	pthread_mutex_destroy(&vw->vw_lock);
	free(vw);
}

void nfs_views_free(struct nfs_views *vt)
{
	if (!vt)
		return;
	for (int i = 0; i < vt->vt_n; i++)
		views_free_one(vt->vt_list[i]);
	while (vt->vt_retired) {
		struct nfs_view *vw = vt->vt_retired;

		vt->vt_retired = vw->vw_next;
		views_free_one(vw);
	}
	free(vt->vt_list);
	free(vt->vt_byid);
	pthread_mutex_destroy(&vt->vt_list_lock);
	pthread_mutex_destroy(&vt->vt_lock);
	free(vt);
}

/* Creates dir's missing parents (mode 0755, as the server) and dir itself like like. */
static int views_make_upper(const char *dir, const struct stat *like)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);
	struct stat st;

	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	if (lstat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(dir, like->st_mode & 07777) < 0)
		return errno == EEXIST ? 0 : -errno;
	/* mkdir applies the umask; the base root's mode is what the client expects to see. */
	if (chown(dir, like->st_uid, like->st_gid) < 0 || chmod(dir, like->st_mode & 07777) < 0)
		return -errno;
	return 0;
}

/* Whether path lies inside (or is) directory dir, compared as canonical text. */
static bool views_inside(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, len) && (path[len] == '\0' || path[len] == '/');
}

/* Refuses an upper in a lower: creating it there would change the base. */
static int views_check_upper(const struct export_conf *ec, const char *upper, char *err,
			     size_t errlen)
{
	char canon[PATH_MAX];

	for (int j = 0; j < ec->ec_nbranches; j++) {
		if (!realpath(ec->ec_branches[j], canon))
			continue; /* union_open reports a missing branch */
		if (views_inside(upper, canon) || views_inside(canon, upper)) {
			snprintf(err, errlen, "export %s: the client upper %s would overlap the "
				 "branch %s, which must stay unchanged; move upper= outside the "
				 "branches", ec->ec_name, upper, ec->ec_branches[j]);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * Reverse DNS for addr, bounded: an address that had no name is not looked up again for a
 * minute (until a reload), and at most VIEWS_REVERSE_MAX lookups run at once, so clients
 * without names cannot tie the workers up in resolver timeouts. -EACCES with the cause in
 * why, or -EAGAIN when too many lookups run.
 */
static int views_reverse(struct nfs_server *ns, const char *addr, char *key, size_t keylen,
			 char *why, size_t whylen)
{
	struct nfs_views *vt = ns->ns_views;
	unsigned gen = atomic_load(&ns->ns_names_gen);
	time_t now = time(NULL);
	struct views_noname *nn;
	bool recent = false;
	int r;

	pthread_mutex_lock(&vt->vt_lock);
	for (unsigned k = 0; k < VIEWS_NONAME_KEPT && !recent; k++) {
		nn = &vt->vt_noname[k];
		recent = nn->nn_gen == gen && now - nn->nn_at < VIEWS_DENY_SECONDS &&
			 !strcmp(nn->nn_addr, addr);
	}
	pthread_mutex_unlock(&vt->vt_lock);
	if (recent) {
		snprintf(why, whylen, "no name was found for it less than %d s ago",
			 VIEWS_DENY_SECONDS);
		return -EACCES;
	}
	if (atomic_fetch_add(&vt->vt_reversing, 1) >= VIEWS_REVERSE_MAX) {
		atomic_fetch_sub(&vt->vt_reversing, 1);
		snprintf(why, whylen, "%d reverse DNS lookups are running already",
			 VIEWS_REVERSE_MAX);
		return -EAGAIN;
	}
	r = hostmap_reverse(addr, key, keylen, why, whylen);
	atomic_fetch_sub(&vt->vt_reversing, 1);
	if (r == 0)
		return 0;
	pthread_mutex_lock(&vt->vt_lock);
	nn = &vt->vt_noname[vt->vt_noname_next++ % VIEWS_NONAME_KEPT];
	snprintf(nn->nn_addr, sizeof(nn->nn_addr), "%s", addr);
	nn->nn_at = now;
	nn->nn_gen = gen;
	pthread_mutex_unlock(&vt->vt_lock);
	return -EACCES;
}

/*
 * The key of the client at addr for export i (see struct nfs_view): its address, or for
 * upper=...%h its host name from the hosts map or confirmed reverse DNS. May block on the
 * resolver: never on the loop. Returns 0, or -errno with the cause and fix in err.
 */
static int views_client_key(struct nfs_server *ns, int i, const char *addr, char *key,
			    size_t keylen, char *err, size_t errlen)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char why[300], hosts[PATH_MAX + 40];
	const char *name;
	int r;

	if (!config_upper_by_name(ec->ec_upper)) {
		if (strlen(addr) >= keylen || strchr(addr, '/') || strchr(addr, '%')) {
			snprintf(err, errlen, "client address '%.80s' cannot name an upper", addr);
			return -EINVAL;
		}
		snprintf(key, keylen, "%s", addr);
		return 0;
	}
	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	name = hostmap_find(ns->ns_cfg->cf_hosts, addr);
	if (name)
		snprintf(key, keylen, "%s", name);
	if (ns->ns_cfg->cf_hosts)
		snprintf(hosts, sizeof(hosts), "add the line '%s NAME' to %s", addr,
			 hostmap_path(ns->ns_cfg->cf_hosts));
	else
		snprintf(hosts, sizeof(hosts), "name it in a hosts map (setting hosts FILE, lines "
			 "of ADDRESS NAME)");
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	if (name)
		return 0;
	r = views_reverse(ns, addr, key, keylen, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errlen, "export %s names client layers by host name (upper=%s) but "
			 "client %s has none: %s; %s and send SIGHUP", ec->ec_name, ec->ec_upper,
			 addr, why, hosts);
		return r;
	}
	return 0;
}

/* True at most once a minute per *last: a client retrying must not flood the log. */
static bool views_log_due(_Atomic time_t *last)
{
	time_t now = time(NULL), prev = atomic_load(last);

	return now - prev >= 60 && atomic_compare_exchange_strong(last, &prev, now);
}

/* A union reference for a call, or NULL when vw is closed. Release with nfs_views_put. */
static struct union_export *views_hold(struct nfs_view *vw)
{
	struct union_export *ux;

	atomic_fetch_add(&vw->vw_refs, 1);
	ux = atomic_load(&vw->vw_ux);
	if (!ux)
		atomic_fetch_sub(&vw->vw_refs, 1);
	return ux;
}

void nfs_views_put(struct nfs_view *vw)
{
	if (!vw)
		return;
	atomic_store(&vw->vw_used, time(NULL));
	atomic_fetch_sub(&vw->vw_refs, 1);
}

/* The first client rule of export i admitting addr (text), -1 if none; 0 without rules. */
static int views_rule_of(struct nfs_server *ns, int i, const char *addr)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const struct sockaddr *sa;
	int r;

	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1)
		sa = (const struct sockaddr *)&s4;
	else if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1)
		sa = (const struct sockaddr *)&s6;
	else
		return -1;
	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	r = ec->ec_nrules == 0 ? 0 : exports_match(ec->ec_rules, ec->ec_nrules, sa);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	return r;
}

/* The address vw's client was last seen at ("" if unknown): its key for %a. */
static void views_client_addr(struct nfs_view *vw, char *addr, size_t len)
{
	if (!vw->vw_by_name) {
		snprintf(addr, len, "%.*s", VIEWS_ADDR_MAX - 1, vw->vw_key);
		return;
	}
	pthread_mutex_lock(&vw->vw_lock);
	snprintf(addr, len, "%s", vw->vw_seen);
	pthread_mutex_unlock(&vw->vw_lock);
}

/* The client rule vw's client falls under now (a reload may move it); vt_lock held. */
static int views_rule_locked(struct nfs_server *ns, struct nfs_view *vw)
{
	unsigned gen = atomic_load(&ns->ns_names_gen) + 1;
	char addr[VIEWS_ADDR_MAX];

	if (vw->vw_rule_gen != gen) {
		views_client_addr(vw, addr, sizeof(addr));
		vw->vw_rule = addr[0] ? views_rule_of(ns, vw->vw_export, addr) : -1;
		vw->vw_rule_gen = gen;
	}
	return vw->vw_rule;
}

/* The index of the upper= export a MOUNT entry's path lies in, or -1. */
static int views_mount_export(const struct nfs_server *ns, const char *path)
{
	for (int i = 0; i < ns->ns_nexports; i++) {
		const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
		size_t len = strlen(ec->ec_name);

		if (ec->ec_upper && !strncmp(path, ec->ec_name, len) &&
		    (path[len] == '\0' || path[len] == '/'))
			return i;
	}
	return -1;
}

/* A view that might be closed to make room, with its client's address. */
struct views_cand {
	struct nfs_view *vc_view;
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

/* Marks the candidates whose client has a MOUNT entry of their export (one pass). */
static void views_mark_mounted(struct nfs_server *ns, struct views_cand *c, int n)
{
	struct views_cand key;
	struct nfs_view probe;

	if (n == 0)
		return;
	qsort(c, (size_t)n, sizeof(*c), views_cand_cmp);
	key.vc_view = &probe;
	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (struct mount_entry *me = ns->ns_mounts; me; me = me->me_next) {
		struct views_cand *hit;

		probe.vw_export = views_mount_export(ns, me->me_path);
		if (probe.vw_export < 0)
			continue;
		snprintf(key.vc_addr, sizeof(key.vc_addr), "%s", me->me_host);
		hit = bsearch(&key, c, (size_t)n, sizeof(*c), views_cand_cmp);
		if (hit)
			hit->vc_mounted = true;
	}
	pthread_mutex_unlock(&ns->ns_mounts_lock);
}

/* Closes vw's union unless a call holds it (vt_lock held). False when one does. */
static bool views_close_locked(struct nfs_views *vt, struct nfs_view *vw)
{
	struct union_export *ux = atomic_exchange(&vw->vw_ux, NULL);

	if (!ux)
		return true;
	if (atomic_load(&vw->vw_refs) != 0) {
		atomic_store(&vw->vw_ux, ux);
		return false;
	}
	union_close(ux);
	pthread_mutex_lock(&vt->vt_list_lock);
	vt->vt_nopen--;
	pthread_mutex_unlock(&vt->vt_list_lock);
	return true;
}

/*
 * Closes the view idle longest of export i under client rule rule (i < 0: of any export):
 * open, no call holding it, none for VIEWS_IDLE_SECONDS, its client without a MOUNT entry
 * of the export. Its upper and binding stay. False when none may be closed.
 */
static bool views_evict_locked(struct nfs_server *ns, int i, int rule, const char *why)
{
	static _Atomic time_t last;
	struct nfs_views *vt = ns->ns_views;
	time_t now = time(NULL);
	struct views_cand *c;
	int n = 0, best;
	bool done = false;

	c = calloc((size_t)(vt->vt_nopen > 0 ? vt->vt_nopen : 1), sizeof(*c));
	if (!c)
		return false;
	for (int k = 0; k < vt->vt_n && n < vt->vt_nopen; k++) {
		struct nfs_view *vw = vt->vt_list[k];

		if (!atomic_load(&vw->vw_ux) || atomic_load(&vw->vw_refs) != 0 ||
		    now - atomic_load(&vw->vw_used) < VIEWS_IDLE_SECONDS ||
		    (i >= 0 && (vw->vw_export != i || views_rule_locked(ns, vw) != rule)))
			continue;
		c[n].vc_view = vw;
		views_client_addr(vw, c[n].vc_addr, sizeof(c[n].vc_addr));
		c[n].vc_mounted = false;
		n++;
	}
	views_mark_mounted(ns, c, n);
	while (!done) {
		best = -1;
		for (int k = 0; k < n; k++)
			if (!c[k].vc_mounted && (best < 0 || atomic_load(&c[k].vc_view->vw_used) <
							   atomic_load(&c[best].vc_view->vw_used)))
				best = k;
		if (best < 0)
			break;
		c[best].vc_mounted = true; /* tried */
		done = views_close_locked(vt, c[best].vc_view);
		if (!done)
			continue;
		log_debug("export %s: closed the view of client %s, idle %lld s and not mounted, "
			  "to make room (%s)", ns->ns_cfg->cf_exports[c[best].vc_view->vw_export].ec_name,
			  c[best].vc_view->vw_key,
			  (long long)(now - atomic_load(&c[best].vc_view->vw_used)), why);
		if (views_log_due(&last))
			log_info("%s reached: closing client views idle for %d s or more whose client "
				 "has no mount (first %s; its upper stays, and it opens again on the "
				 "client's next call or mount)", why, VIEWS_IDLE_SECONDS,
				 c[best].vc_view->vw_key);
	}
	free(c);
	return done;
}

/*
 * Makes room to open one more view of export i for a client under client rule rule: past
 * max-views-per-rule open views under that rule, or NFS_VIEWS_MAX in all, one that may be
 * closed is closed. -ENOSPC naming the limit and its fix in err when none may be.
 */
static int views_make_room_locked(struct nfs_server *ns, int i, int rule, char *err,
				  size_t errlen)
{
	struct nfs_views *vt = ns->ns_views;
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	unsigned max = ns->ns_cfg->cf_max_views_per_rule, under = 0;
	char spec[64];

	if (max > 0 && rule >= 0) {
		for (int k = 0; k < vt->vt_n; k++) {
			struct nfs_view *vw = vt->vt_list[k];

			under += atomic_load(&vw->vw_ux) && vw->vw_export == i &&
				 views_rule_locked(ns, vw) == rule;
		}
		if (under >= max && !views_evict_locked(ns, i, rule, "max-views-per-rule")) {
			pthread_rwlock_rdlock(&ns->ns_rules_lock);
			snprintf(spec, sizeof(spec), "%s", ec->ec_nrules > rule ?
				 ec->ec_rules[rule].er_spec : "*");
			pthread_rwlock_unlock(&ns->ns_rules_lock);
			snprintf(err, errlen, "export %s: the clients of rule %s have %u views open, the "
				 "max-views-per-rule limit, and each of them has a mount or made a call "
				 "in the last %d s; raise max-views-per-rule, or unmount clients that left",
				 ec->ec_name, spec, under, VIEWS_IDLE_SECONDS);
			return -ENOSPC;
		}
	}
	if (vt->vt_nopen >= NFS_VIEWS_MAX && !views_evict_locked(ns, -1, -1, "the view table")) {
		snprintf(err, errlen, "export %s: %d client views are open, the most the server "
			 "keeps, and each of them has a mount or made a call in the last %d s; "
			 "lower max-views-per-rule, or unmount clients that left", ec->ec_name,
			 NFS_VIEWS_MAX, VIEWS_IDLE_SECONDS);
		return -ENOSPC;
	}
	return 0;
}

/* A closed view of export i for the client key, not yet in the table. NULL: no memory. */
static struct nfs_view *views_new(struct nfs_server *ns, int i, const char *key)
{
	struct nfs_view *vw = calloc(1, sizeof(*vw));

	if (!vw)
		return NULL;
	vw->vw_export = i;
	vw->vw_by_name = config_upper_by_name(ns->ns_cfg->cf_exports[i].ec_upper);
	vw->vw_rule = -1;
	snprintf(vw->vw_key, sizeof(vw->vw_key), "%s", key);
	pthread_mutex_init(&vw->vw_lock, NULL);
	if (!vw->vw_by_name)
		snprintf(vw->vw_seen, sizeof(vw->vw_seen), "%s", key);
	return vw;
}

/* Adds vw to vt_list (vt_lock held). */
static int views_list_add_locked(struct nfs_views *vt, struct nfs_view *vw)
{
	if (vt->vt_n == vt->vt_cap) {
		int cap = vt->vt_cap ? 2 * vt->vt_cap : 64;
		struct nfs_view **list = malloc((size_t)cap * sizeof(*list));

		if (!list)
			return -ENOMEM;
		pthread_mutex_lock(&vt->vt_list_lock);
		if (vt->vt_n)
			memcpy(list, vt->vt_list, (size_t)vt->vt_n * sizeof(*list));
		free(vt->vt_list);
		vt->vt_list = list;
		vt->vt_cap = cap;
		pthread_mutex_unlock(&vt->vt_list_lock);
	}
	pthread_mutex_lock(&vt->vt_list_lock);
	vt->vt_list[vt->vt_n++] = vw;
	pthread_mutex_unlock(&vt->vt_list_lock);
	vw->vw_listed = true;
	return 0;
}

/*
 * Opens the union of view vw (vt_lock held), unless it is open: addr is the client
 * calling (or NULL: the control socket's check), whose rule's bound applies when bounded.
 * With create, a missing upper is made; without, it is an error (a view is only ever made
 * by a MNT). A view opened for the first time joins the table.
 */
static int views_open_locked(struct nfs_server *ns, struct nfs_view *vw, const char *addr,
			     bool create, bool bounded, char *err, size_t errlen)
{
	struct nfs_views *vt = ns->ns_views;
	int i = vw->vw_export;
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char upper[PATH_MAX], name[STORE_EXPORT_NAME_MAX + 1];
	struct union_export *ux;
	struct stat base;
	char **branches;
	bool first;
	int r;

	if (atomic_load(&vw->vw_ux))
		return 0;
	if (addr) {
		vw->vw_rule = views_rule_of(ns, i, addr);
		vw->vw_rule_gen = atomic_load(&ns->ns_names_gen) + 1;
	}
	if (bounded) {
		r = views_make_room_locked(ns, i, addr ? vw->vw_rule : views_rule_locked(ns, vw),
					   err, errlen);
		if (r < 0)
			return r;
	}
	if (config_upper_expand(ec->ec_upper, vw->vw_key, upper, sizeof(upper)) < 0 ||
	    (size_t)snprintf(name, sizeof(name), "%s%%%s", ec->ec_name, vw->vw_key) >=
		    sizeof(name)) {
		snprintf(err, errlen, "export %s: the upper path or view name for client %s is "
			 "too long; shorten upper= or the export name", ec->ec_name, vw->vw_key);
		return -ENAMETOOLONG;
	}
	r = views_check_upper(ec, upper, err, errlen);
	if (r < 0)
		return r;
	cred_restore(); /* the upper is made and opened as the server */
	if (create) {
		if (stat(ec->ec_branches[0], &base) < 0) {
			r = -errno;
			snprintf(err, errlen, "export %s: branch %s: %s; create it or fix -e",
				 ec->ec_name, ec->ec_branches[0], strerror(errno));
			return r;
		}
		r = views_make_upper(upper, &base);
		if (r < 0) {
			snprintf(err, errlen, "export %s: cannot create the upper %s of client %s: "
				 "%s; check upper= and the permissions of its parent", ec->ec_name,
				 upper, vw->vw_key, strerror(-r));
			return r;
		}
	}
	branches = calloc((size_t)ec->ec_nbranches + 1, sizeof(*branches));
	if (!branches) {
		snprintf(err, errlen, "export %s: out of memory opening the view of %s",
			 ec->ec_name, vw->vw_key);
		return -ENOMEM;
	}
	branches[0] = upper;
	for (int j = 0; j < ec->ec_nbranches; j++)
		branches[j + 1] = ec->ec_branches[j];
	/* The base is read-only; the view writes to its upper. */
	r = union_open(name, branches, ec->ec_nbranches + 1, 0, "fix the export's upper= or its branches",
		       union_store(ns->ns_exports[i]), &ux, err, errlen);
	free(branches);
	if (r < 0)
		return r;
	first = !vw->vw_listed;
	if (first && views_list_add_locked(vt, vw) < 0) {
		union_close(ux);
		snprintf(err, errlen, "export %s: out of memory opening the view of %s",
			 ec->ec_name, vw->vw_key);
		return -ENOMEM;
	}
	atomic_store(&vw->vw_used, time(NULL));
	atomic_store(&vw->vw_ux, ux);
	pthread_mutex_lock(&vt->vt_list_lock);
	vt->vt_nopen++;
	pthread_mutex_unlock(&vt->vt_list_lock);
	atomic_store(&vt->vt_byid[union_export_id(ux)], vw);
	if (first)
		log_info("export %s: client %s served from its own upper %s", ec->ec_name,
			 vw->vw_key, upper);
	else
		log_debug("export %s: client %s served again from its own upper %s", ec->ec_name,
			  vw->vw_key, upper);
	return 0;
}

/* The open view of export i for client key, or NULL (caller holds vt_lock). */
static struct nfs_view *views_find_locked(struct nfs_views *vt, int i, const char *key)
{
	for (int k = 0; k < vt->vt_n; k++)
		if (vt->vt_list[k]->vw_export == i && !strcmp(vt->vt_list[k]->vw_key, key))
			return vt->vt_list[k];
	return NULL;
}

/* Records addr as vw's client (seen) or not its client, as found under names generation gen. */
static void views_set_found(struct nfs_view *vw, const char *addr, bool seen, unsigned gen)
{
	pthread_mutex_lock(&vw->vw_lock);
	if (gen != vw->vw_names_gen) {
		vw->vw_seen[0] = vw->vw_denied[0] = '\0';
		vw->vw_names_gen = gen;
	}
	if (seen) {
		snprintf(vw->vw_seen, sizeof(vw->vw_seen), "%s", addr);
	} else {
		snprintf(vw->vw_denied, sizeof(vw->vw_denied), "%s", addr);
		vw->vw_denied_at = time(NULL);
	}
	pthread_mutex_unlock(&vw->vw_lock);
}

int nfs_views_for_client(struct nfs_server *ns, int i, const char *addr,
			 struct nfs_view **vwp, struct union_export **ux, char *err,
			 size_t errlen)
{
	struct nfs_views *vt = ns->ns_views;
	char key[VIEWS_KEY_MAX];
	struct nfs_view *vw;
	unsigned gen = atomic_load(&ns->ns_names_gen);
	bool fresh = false;
	int r = 0;

	*vwp = NULL;
	if (!vt) {
		snprintf(err, errlen, "export %s: no memory for client views; restart the server",
			 ns->ns_cfg->cf_exports[i].ec_name);
		return -ENOMEM;
	}
	if (strlen(addr) >= VIEWS_ADDR_MAX) {
		snprintf(err, errlen, "client address '%.80s' is too long", addr);
		return -EINVAL;
	}
	r = views_client_key(ns, i, addr, key, sizeof(key), err, errlen);
	if (r < 0)
		return r;
	pthread_mutex_lock(&vt->vt_lock);
	vw = views_find_locked(vt, i, key);
	if (!vw) {
		vw = views_new(ns, i, key);
		fresh = true;
		if (!vw) {
			snprintf(err, errlen, "export %s: out of memory opening the view of %s",
				 ns->ns_cfg->cf_exports[i].ec_name, key);
			r = -ENOMEM;
		}
	}
	if (vw)
		r = views_open_locked(ns, vw, addr, true, true, err, errlen);
	if (r == 0) {
		*ux = views_hold(vw);
	} else if (fresh && vw) {
		views_free_one(vw); /* never in the table: nobody else saw it */
		vw = NULL;
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
 * made (closed) and put in vt_byid; the caller holds vt_lock and opens it. NULL when id
 * names no view of an export with upper=; *why then says whether the map knows it.
 */
static struct nfs_view *views_bound_locked(struct nfs_server *ns, uint16_t id,
					   enum stats_stale_cause *why)
{
	char name[STORE_EXPORT_NAME_MAX + 1];
	struct nfs_view *vw;
	char *sep;
	int i;

	if (!ns->ns_nexports || store_export_name(union_store(ns->ns_exports[0]), id, name,
						  sizeof(name)) < 0)
		return NULL;
	sep = strrchr(name, '%');
	if (!sep)
		return NULL; /* an export that is no view (one removed from the config) */
	/* The map knows the view: from here on a failure is the view's, not the handle's. */
	*why = STATS_STALE_VIEW_UNAVAILABLE;
	*sep = '\0';
	for (i = 0; i < ns->ns_nexports; i++) {
		const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];

		if (ec->ec_upper && ns->ns_exports[i] && !strcmp(ec->ec_name, name))
			break;
	}
	if (i == ns->ns_nexports)
		return NULL; /* its export lost upper= (or went away): the handle is stale */
	vw = views_find_locked(ns->ns_views, i, sep + 1);
	if (!vw) {
		vw = views_new(ns, i, sep + 1);
		if (!vw)
			return NULL;
		if (views_list_add_locked(ns->ns_views, vw) < 0) {
			views_free_one(vw);
			return NULL;
		}
	}
	atomic_store(&ns->ns_views->vt_byid[id], vw);
	return vw;
}

/*
 * Whether a call from addr may use view vw: addr is its client. For %h that takes a name
 * lookup the first time an address shows up (after a restart, or a new lease).
 */
static nfsstat3 views_owned_by(struct nfs_server *ns, struct nfs_view *vw, const char *addr)
{
	char key[VIEWS_KEY_MAX], err[512];
	unsigned gen = atomic_load(&ns->ns_names_gen);
	bool known = false, denied = false, ok;
	int r;

	if (!vw->vw_by_name)
		return strcmp(vw->vw_key, addr) ? NFS3ERR_ACCES : NFS3_OK;
	pthread_mutex_lock(&vw->vw_lock);
	if (vw->vw_names_gen == gen) {
		known = !strcmp(vw->vw_seen, addr);
		denied = !strcmp(vw->vw_denied, addr) &&
			 time(NULL) - vw->vw_denied_at < VIEWS_DENY_SECONDS;
	}
	pthread_mutex_unlock(&vw->vw_lock);
	if (known || denied)
		return known ? NFS3_OK : NFS3ERR_ACCES;
	r = views_client_key(ns, vw->vw_export, addr, key, sizeof(key), err, sizeof(err));
	/* The lookups are all busy: no answer yet, so the client is told to try again. */
	if (r == -EAGAIN)
		return NFS3ERR_JUKEBOX;
	ok = r == 0 && !strcmp(key, vw->vw_key);
	views_set_found(vw, addr, ok, gen);
	return ok ? NFS3_OK : NFS3ERR_ACCES;
}

/* Opens closed view vw for a call from addr; a refusal is logged (once a minute). */
static nfsstat3 views_reopen(struct nfs_server *ns, struct nfs_view *vw, const char *addr,
			     struct union_export **ux)
{
	static _Atomic time_t last_full, last_gone;
	struct nfs_views *vt = ns->ns_views;
	char err[600];
	int r;

	pthread_mutex_lock(&vt->vt_lock);
	r = views_open_locked(ns, vw, addr, false, true, err, sizeof(err));
	if (r == 0)
		*ux = views_hold(vw); /* open, and nobody closes it while we hold vt_lock */
	pthread_mutex_unlock(&vt->vt_lock);
	if (r == 0)
		return NFS3_OK;
	/*
	 * Room comes back as other views fall idle, descriptors and memory as calls end: the
	 * client is told to retry, its handles are not stale.
	 */
	if (r == -ENOSPC || fsio_short_of_resources(r)) {
		if (views_log_due(&last_full))
			log_warn("NFS call from %s answered NFS3ERR_JUKEBOX: %s", addr, err);
		return NFS3ERR_JUKEBOX;
	}
	if (views_log_due(&last_gone))
		log_warn("cannot open again the view of client %s (%s); its handles get "
			 "NFS3ERR_STALE until it mounts again", vw->vw_key, err);
	return (nfsstat3)stats_stale(NFS3ERR_STALE, STATS_STALE_VIEW_UNAVAILABLE);
}

nfsstat3 nfs_views_by_id(struct nfs_server *ns, uint16_t id, const char *addr, int *i,
			 struct nfs_view **vwp, struct union_export **ux)
{
	static _Atomic time_t last;
	struct nfs_views *vt = ns->ns_views;
	struct union_export *held;
	struct nfs_view *vw;

	enum stats_stale_cause why = STATS_STALE_UNKNOWN_EXPORT;
	nfsstat3 st;

	if (!vt)
		return (nfsstat3)stats_stale(NFS3ERR_STALE, why);
	vw = atomic_load(&vt->vt_byid[id]);
	if (!vw) {
		pthread_mutex_lock(&vt->vt_lock);
		vw = atomic_load(&vt->vt_byid[id]);
		if (!vw)
			vw = views_bound_locked(ns, id, &why);
		pthread_mutex_unlock(&vt->vt_lock);
		if (!vw)
			return (nfsstat3)stats_stale(NFS3ERR_STALE, why);
	}
	/* A handle names one client's view: no other client may reach that upper with it. */
	st = views_owned_by(ns, vw, addr);
	if (st == NFS3ERR_ACCES && views_log_due(&last))
		log_warn("refusing NFS call from %s with NFS3ERR_ACCES: its handle belongs "
			 "to the view of client %s of export %s", addr, vw->vw_key,
			 ns->ns_cfg->cf_exports[vw->vw_export].ec_name);
	if (st != NFS3_OK)
		return st;
	held = views_hold(vw);
	if (!held) {
		st = views_reopen(ns, vw, addr, &held);
		if (st != NFS3_OK)
			return st;
	}
	*i = vw->vw_export;
	*vwp = vw;
	*ux = held;
	return NFS3_OK;
}

int nfs_views_walk(struct nfs_server *ns, int i,
		   int (*fn)(struct union_export *ux, const char *key, void *arg), void *arg)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char name[STORE_EXPORT_NAME_MAX + 1];
	struct nfs_views *vt = ns->ns_views;
	size_t len = strlen(ec->ec_name);
	int r = 0;

	if (!vt || !ec->ec_upper || !ns->ns_exports[i])
		return 0;
	for (uint32_t id = 0; id < VIEWS_IDS && r == 0; id++) {
		enum stats_stale_cause why;
		struct union_export *ux;
		struct nfs_view *vw;
		char err[600] = "";
		bool opened;

		if (store_export_name(union_store(ns->ns_exports[i]), (uint16_t)id, name,
				      sizeof(name)) < 0 ||
		    strncmp(name, ec->ec_name, len) || name[len] != '%')
			continue;
		pthread_mutex_lock(&vt->vt_lock);
		vw = atomic_load(&vt->vt_byid[id]);
		if (!vw)
			vw = views_bound_locked(ns, (uint16_t)id, &why);
		ux = vw ? views_hold(vw) : NULL;
		/* Opened for the check alone, past the bounds: closed again right after. */
		opened = vw && !ux &&
			 views_open_locked(ns, vw, NULL, false, false, err, sizeof(err)) == 0;
		if (opened)
			ux = views_hold(vw);
		pthread_mutex_unlock(&vt->vt_lock);
		r = fn(ux, name + len + 1, arg);
		if (ux)
			nfs_views_put(vw);
		if (opened) {
			pthread_mutex_lock(&vt->vt_lock);
			views_close_locked(vt, vw);
			pthread_mutex_unlock(&vt->vt_lock);
		}
	}
	return r;
}

int nfs_views_open_count(struct nfs_server *ns, int i)
{
	struct nfs_views *vt = ns->ns_views;
	int n = 0;

	if (!vt)
		return 0;
	pthread_mutex_lock(&vt->vt_list_lock);
	for (int k = 0; k < vt->vt_n; k++)
		n += vt->vt_list[k]->vw_export == i && atomic_load(&vt->vt_list[k]->vw_ux);
	pthread_mutex_unlock(&vt->vt_list_lock);
	return n;
}

int nfs_views_upper_of(struct nfs_server *ns, int i, const char *addr, char *dir, size_t len)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char key[VIEWS_KEY_MAX] = "";
	struct nfs_views *vt = ns->ns_views;
	const char *name;

	if (!ec->ec_upper)
		return -1;
	if (!config_upper_by_name(ec->ec_upper))
		return config_upper_expand(ec->ec_upper, addr, dir, len);
	pthread_rwlock_rdlock(&ns->ns_rules_lock);
	name = hostmap_find(ns->ns_cfg->cf_hosts, addr);
	if (name)
		snprintf(key, sizeof(key), "%s", name);
	pthread_rwlock_unlock(&ns->ns_rules_lock);
	if (!key[0] && vt) {
		pthread_mutex_lock(&vt->vt_list_lock);
		for (int k = 0; k < vt->vt_n && !key[0]; k++) {
			struct nfs_view *vw = vt->vt_list[k];

			pthread_mutex_lock(&vw->vw_lock);
			if (vw->vw_export == i && !strcmp(vw->vw_seen, addr))
				snprintf(key, sizeof(key), "%s", vw->vw_key);
			pthread_mutex_unlock(&vw->vw_lock);
		}
		pthread_mutex_unlock(&vt->vt_list_lock);
	}
	return key[0] ? config_upper_expand(ec->ec_upper, key, dir, len) : -1;
}

uint64_t nfs_views_fileid(const struct nfs_server *ns, const struct union_export *ux,
			  uint64_t ino)
{
	uint16_t id = union_export_id(ux);

	if (!ns || !ns->ns_views || !atomic_load(&ns->ns_views->vt_byid[id]))
		return ino;
	return (uint64_t)id << 48 | (ino & ((UINT64_C(1) << 48) - 1));
}

/* Whether addr has a path of export ec mounted (the MOUNT list). */
static bool views_mounted(struct nfs_server *ns, const struct export_conf *ec, const char *addr)
{
	size_t len = strlen(ec->ec_name);
	bool found = false;

	if (!addr[0])
		return false;
	pthread_mutex_lock(&ns->ns_mounts_lock);
	for (struct mount_entry *me = ns->ns_mounts; me && !found; me = me->me_next)
		found = !strcmp(me->me_host, addr) && !strncmp(me->me_path, ec->ec_name, len) &&
			(me->me_path[len] == '\0' || me->me_path[len] == '/');
	pthread_mutex_unlock(&ns->ns_mounts_lock);
	return found;
}

static int views_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) < 0 ? -1 : 0;
	return unlink(path) < 0 ? -1 : 0;
}

/*
 * The key of the client an admin named for a reset of export i: an address, or for %h
 * also a host name. Returns 0, 1 when client cannot name a client of this export, or
 * -errno with the cause in err.
 */
static int views_reset_key(struct nfs_server *ns, int i, const char *client, char *key,
			   size_t keylen, char *err, size_t errlen)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];

	if (hostmap_is_address(client))
		return views_client_key(ns, i, client, key, keylen, err, errlen);
	if (!config_upper_by_name(ec->ec_upper) || !hostmap_name_key(client, key, keylen))
		return 1;
	return 0;
}

/* The address client key was last seen at (its own text for %a), or "" (vt_lock held). */
static void views_seen_locked(struct nfs_views *vt, int i, const char *key, char *addr,
			      size_t len)
{
	struct nfs_view *vw = views_find_locked(vt, i, key);

	addr[0] = '\0';
	if (!vw)
		return;
	pthread_mutex_lock(&vw->vw_lock);
	snprintf(addr, len, "%s", vw->vw_seen);
	pthread_mutex_unlock(&vw->vw_lock);
}

/* Takes client key's view of export i out of service (vt_lock held): table, map, upper name. */
static int views_retire_locked(struct nfs_server *ns, int i, const char *key, char *gone,
			       size_t gonelen)
{
	struct nfs_views *vt = ns->ns_views;
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char upper[PATH_MAX], name[STORE_EXPORT_NAME_MAX + 1];
	struct nfs_view *vw = views_find_locked(vt, i, key);
	bool had = false;
	int r;

	if (vw) {
		for (uint32_t id = 0; id < VIEWS_IDS; id++)
			if (atomic_load(&vt->vt_byid[id]) == vw)
				atomic_store(&vt->vt_byid[id], NULL);
		/* Calls still running on it finish; it is freed when the server stops. */
		views_close_locked(vt, vw);
		pthread_mutex_lock(&vt->vt_list_lock);
		for (int k = 0; k < vt->vt_n; k++)
			if (vt->vt_list[k] == vw)
				vt->vt_list[k] = vt->vt_list[--vt->vt_n];
		if (atomic_load(&vw->vw_ux))
			vt->vt_nopen--;
		pthread_mutex_unlock(&vt->vt_list_lock);
		vw->vw_next = vt->vt_retired;
		vt->vt_retired = vw;
		had = true;
	}
	if (config_upper_expand(ec->ec_upper, key, upper, sizeof(upper)) < 0 ||
	    (size_t)snprintf(name, sizeof(name), "%s%%%s", ec->ec_name, key) >= sizeof(name))
		return -ENAMETOOLONG;
	r = store_unbind_export(union_store(ns->ns_exports[i]), name);
	if (r == 0)
		had = true;
	else if (r != -ENOENT)
		return r;
	/* Renamed away under the lock, removed after it: a new MNT never sees half a layer. */
	if ((size_t)snprintf(gone, gonelen, "%s.unionnfsd-reset.%ld", upper, (long)time(NULL)) >=
	    gonelen)
		return -ENAMETOOLONG;
	if (rename(upper, gone) == 0)
		had = true;
	else if (errno == ENOENT)
		gone[0] = '\0';
	else
		return -errno;
	return had ? 0 : -ENOENT;
}

int nfs_views_reset(struct nfs_server *ns, const char *client, bool force, char *msg,
		    size_t msglen)
{
	struct nfs_views *vt = ns->ns_views;
	char gone[PATH_MAX + 64], seen[VIEWS_ADDR_MAX], err[600];
	char (*keys)[VIEWS_KEY_MAX];
	int done = 0, r = -EINVAL, kr;

	msg[0] = '\0';
	if (!vt || !ns->ns_nexports)
		goto out;
	keys = calloc((size_t)ns->ns_nexports, sizeof(*keys));
	if (!keys) {
		snprintf(msg, msglen, "out of memory");
		return -ENOMEM;
	}
	/* First every key and the mounted check, so a refusal discards nothing. */
	for (int i = 0; i < ns->ns_nexports; i++) {
		const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];

		if (!ec->ec_upper || !ns->ns_exports[i])
			continue;
		if (r == -EINVAL)
			r = -ENOENT;
		kr = views_reset_key(ns, i, client, keys[i], sizeof(keys[i]), err, sizeof(err));
		if (kr < 0) {
			snprintf(msg, msglen, "%s", err);
			free(keys);
			return kr;
		}
		if (kr > 0) {
			keys[i][0] = '\0';
			continue;
		}
		pthread_mutex_lock(&vt->vt_lock);
		views_seen_locked(vt, i, keys[i], seen, sizeof(seen));
		pthread_mutex_unlock(&vt->vt_lock);
		if (!force && (views_mounted(ns, ec, client) || views_mounted(ns, ec, seen))) {
			snprintf(msg, msglen, "client %s has %s mounted; unmount it there first, or "
				 "reset --force (its calls then get NFS3ERR_STALE)", client, ec->ec_name);
			free(keys);
			return -EBUSY;
		}
	}
	for (int i = 0; i < ns->ns_nexports; i++) {
		const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
		int rr;

		if (!ec->ec_upper || !ns->ns_exports[i] || !keys[i][0])
			continue;
		cred_restore();
		pthread_mutex_lock(&vt->vt_lock);
		rr = views_retire_locked(ns, i, keys[i], gone, sizeof(gone));
		pthread_mutex_unlock(&vt->vt_lock);
		if (rr == -ENOENT)
			continue;
		if (rr < 0) {
			snprintf(msg, msglen, "cannot reset client %s of export %s: %s; see the log",
				 client, ec->ec_name, strerror(-rr));
			free(keys);
			return rr;
		}
		if (gone[0] && nftw(gone, views_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
			log_warn("reset of client %s: cannot remove %s completely: %s; remove it by "
				 "hand", keys[i], gone, strerror(errno));
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
