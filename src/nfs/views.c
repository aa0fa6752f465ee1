/*
 * The table of per-client views (see views.h). Views are looked up by export id on every
 * call, so that lookup is a lock-free read of an array indexed by id; making or opening a
 * view takes the table's mutex, which also keeps two first calls of one client from
 * opening the same view twice.
 */
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
#define VIEWS_NAME_MAX 400       /* the inode map's limit on export names */
#define VIEWS_DENY_SECONDS 60    /* a refused address is not looked up again for this long */

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
	char vw_key[VIEWS_KEY_MAX]; /* the client it belongs to */
	pthread_mutex_t vw_lock; /* guards the four below */
	char vw_seen[VIEWS_ADDR_MAX];
	char vw_denied[VIEWS_ADDR_MAX];
	time_t vw_denied_at;
	unsigned vw_names_gen;   /* ns_names_gen they were found under: a reload voids them */
	struct union_export *vw_ux;
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
	struct nfs_view *vt_list[NFS_VIEWS_MAX];
	int vt_n;
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
	union_close(vw->vw_ux);
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

/*
 * Opens the view of export i for the client key and adds it to the table (caller holds
 * vt_lock). With create, a missing upper is made; without, it is an error (a view is only
 * ever made by a MNT).
 */
static int views_open_locked(struct nfs_server *ns, int i, const char *key, bool create,
			     struct nfs_view **out, char *err, size_t errlen)
{
	struct nfs_views *vt = ns->ns_views;
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char upper[PATH_MAX], name[VIEWS_NAME_MAX + 1];
	struct export_conf vc;
	struct nfs_view *vw;
	struct stat base;
	char **branches;
	int r;

	if (vt->vt_n >= NFS_VIEWS_MAX) {
		snprintf(err, errlen, "export %s: %d clients already have a view, the most the "
			 "server keeps; restart it to drop views of clients that left",
			 ec->ec_name, NFS_VIEWS_MAX);
		return -ENOSPC;
	}
	if (config_upper_expand(ec->ec_upper, key, upper, sizeof(upper)) < 0 ||
	    (size_t)snprintf(name, sizeof(name), "%s%%%s", ec->ec_name, key) >= sizeof(name)) {
		snprintf(err, errlen, "export %s: the upper path or view name for client %s is "
			 "too long; shorten upper= or the export name", ec->ec_name, key);
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
				 upper, key, strerror(-r));
			return r;
		}
	}
	branches = calloc((size_t)ec->ec_nbranches + 1, sizeof(*branches));
	vw = calloc(1, sizeof(*vw));
	if (!branches || !vw) {
		free(branches);
		free(vw);
		snprintf(err, errlen, "export %s: out of memory opening the view of %s",
			 ec->ec_name, key);
		return -ENOMEM;
	}
	branches[0] = upper;
	for (int j = 0; j < ec->ec_nbranches; j++)
		branches[j + 1] = ec->ec_branches[j];
	memset(&vc, 0, sizeof(vc));
	vc.ec_name = name;
	vc.ec_branches = branches;
	vc.ec_nbranches = ec->ec_nbranches + 1;
	vc.ec_opts = ec->ec_opts;
	vc.ec_opts.eo_ro = false; /* the base is read-only; the view writes to its upper */
	r = union_open(&vc, union_store(ns->ns_exports[i]), &vw->vw_ux, err, errlen);
	free(branches);
	if (r < 0) {
		free(vw);
		return r;
	}
	vw->vw_export = i;
	vw->vw_by_name = config_upper_by_name(ec->ec_upper);
	snprintf(vw->vw_key, sizeof(vw->vw_key), "%s", key);
	pthread_mutex_init(&vw->vw_lock, NULL);
	if (!vw->vw_by_name)
		snprintf(vw->vw_seen, sizeof(vw->vw_seen), "%s", key);
	pthread_mutex_lock(&vt->vt_list_lock);
	vt->vt_list[vt->vt_n++] = vw;
	pthread_mutex_unlock(&vt->vt_list_lock);
	atomic_store(&vt->vt_byid[union_export_id(vw->vw_ux)], vw);
	log_info("export %s: client %s served from its own upper %s", ec->ec_name, key, upper);
	*out = vw;
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
			 struct union_export **ux, char *err, size_t errlen)
{
	struct nfs_views *vt = ns->ns_views;
	char key[VIEWS_KEY_MAX];
	struct nfs_view *vw;
	unsigned gen = atomic_load(&ns->ns_names_gen);
	int r = 0;

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
	if (!vw)
		r = views_open_locked(ns, i, key, true, &vw, err, errlen);
	pthread_mutex_unlock(&vt->vt_lock);
	if (r < 0)
		return r;
	/* A host whose address changed (a new DHCP lease) keeps its layer, by its name. */
	views_set_found(vw, addr, true, gen);
	*ux = vw->vw_ux;
	return 0;
}

/* True at most once a minute per *last: a client retrying must not flood the log. */
static bool views_log_due(_Atomic time_t *last)
{
	time_t now = time(NULL), prev = atomic_load(last);

	return now - prev >= 60 && atomic_compare_exchange_strong(last, &prev, now);
}

/*
 * Finds the view bound under id in the inode map and opens it (caller holds vt_lock). On
 * failure *why says whether the id is unknown or the view could not be opened.
 */
static struct nfs_view *views_reopen_locked(struct nfs_server *ns, uint16_t id,
					    enum stats_stale_cause *why)
{
	static _Atomic time_t last;
	char name[VIEWS_NAME_MAX + 1], err[512];
	const char *key;
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
	key = sep + 1;
	for (i = 0; i < ns->ns_nexports; i++) {
		const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];

		if (ec->ec_upper && ns->ns_exports[i] && !strcmp(ec->ec_name, name))
			break;
	}
	if (i == ns->ns_nexports)
		return NULL; /* its export lost upper= (or went away): the handle is stale */
	if (views_open_locked(ns, i, key, false, &vw, err, sizeof(err)) < 0) {
		if (views_log_due(&last))
			log_warn("cannot open again the view of client %s (%s); its handles get "
				 "NFS3ERR_STALE until it mounts again", key, err);
		return NULL;
	}
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

nfsstat3 nfs_views_by_id(struct nfs_server *ns, uint16_t id, const char *addr, int *i,
			 struct union_export **ux)
{
	static _Atomic time_t last;
	struct nfs_views *vt = ns->ns_views;
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
			vw = views_reopen_locked(ns, id, &why);
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
	*i = vw->vw_export;
	*ux = vw->vw_ux;
	return NFS3_OK;
}

int nfs_views_walk(struct nfs_server *ns, int i,
		   int (*fn)(struct union_export *ux, const char *key, void *arg), void *arg)
{
	const struct export_conf *ec = &ns->ns_cfg->cf_exports[i];
	char name[VIEWS_NAME_MAX + 1];
	struct nfs_views *vt = ns->ns_views;
	size_t len = strlen(ec->ec_name);
	int r = 0;

	if (!vt || !ec->ec_upper || !ns->ns_exports[i])
		return 0;
	for (uint32_t id = 0; id < VIEWS_IDS && r == 0; id++) {
		enum stats_stale_cause why;
		struct nfs_view *vw;

		if (store_export_name(union_store(ns->ns_exports[i]), (uint16_t)id, name,
				      sizeof(name)) < 0 ||
		    strncmp(name, ec->ec_name, len) || name[len] != '%')
			continue;
		pthread_mutex_lock(&vt->vt_lock);
		vw = atomic_load(&vt->vt_byid[id]);
		if (!vw)
			vw = views_reopen_locked(ns, (uint16_t)id, &why);
		pthread_mutex_unlock(&vt->vt_lock);
		/* Views stay open until the server stops: vw outlives the lock. */
		r = fn(vw ? vw->vw_ux : NULL, name + len + 1, arg);
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
		n += vt->vt_list[k]->vw_export == i;
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
	char upper[PATH_MAX], name[VIEWS_NAME_MAX + 1];
	struct nfs_view *vw = views_find_locked(vt, i, key);
	bool had = false;
	int r;

	if (vw) {
		atomic_store(&vt->vt_byid[union_export_id(vw->vw_ux)], NULL);
		pthread_mutex_lock(&vt->vt_list_lock);
		for (int k = 0; k < vt->vt_n; k++)
			if (vt->vt_list[k] == vw)
				vt->vt_list[k] = vt->vt_list[--vt->vt_n];
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
