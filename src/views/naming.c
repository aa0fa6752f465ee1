/*
 * Who a client is: its key (its address for upper=...%a, its host name for %h, from the
 * hosts map or confirmed reverse DNS), the client rule it falls under, whether an address
 * is a view's client, and whether it has the export mounted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "views_int.h"

/*
 * Reverse DNS for addr, bounded: an address that had no name is not looked up again for a
 * minute (until a reload), and at most VIEWS_REVERSE_MAX lookups run at once, so clients
 * without names cannot tie the workers up in resolver timeouts. -EACCES with the cause in
 * why, or -EAGAIN when too many lookups run.
 */
static int views_reverse(struct views *vt, const char *addr, char *key, size_t keylen,
			 char *why, size_t whylen)
{
	unsigned gen = nfs_names_gen(vt->vt_ns);
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
 * The key of the client at addr for export i (see struct view): its address, or for
 * upper=...%h its host name from the hosts map or confirmed reverse DNS. May block on the
 * resolver: never on the loop. Returns 0, or -errno with the cause and fix in err.
 */
int views_client_key(struct views *vt, int i, const char *addr, char *key, size_t keylen,
		     char *err, size_t errlen)
{
	const struct export_conf *ec = views_export(vt, i);
	char why[300], map[PATH_MAX], hosts[PATH_MAX + 40];
	int r;

	if (!views_upper_by_name(ec->ec_upper)) {
		if (strlen(addr) >= keylen || strchr(addr, '/') || strchr(addr, '%')) {
			snprintf(err, errlen, "client address '%.80s' cannot name an upper", addr);
			return -EINVAL;
		}
		snprintf(key, keylen, "%s", addr);
		return 0;
	}
	if (nfs_host_name(vt->vt_ns, addr, key, keylen, map, sizeof(map)))
		return 0;
	if (map[0])
		snprintf(hosts, sizeof(hosts), "add the line '%s NAME' to %s", addr, map);
	else
		snprintf(hosts, sizeof(hosts), "name it in a hosts map (setting hosts FILE, lines "
			 "of ADDRESS NAME)");
	r = views_reverse(vt, addr, key, keylen, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errlen, "export %s names client layers by host name (upper=%s) but "
			 "client %s has none: %s; %s and send SIGHUP", ec->ec_name, ec->ec_upper,
			 addr, why, hosts);
		return r;
	}
	return 0;
}

int views_rule_of(struct views *vt, int i, const char *addr)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const struct sockaddr *sa;

	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1)
		sa = (const struct sockaddr *)&s4;
	else if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1)
		sa = (const struct sockaddr *)&s6;
	else
		return -1;
	return nfs_rule_index(vt->vt_ns, i, sa);
}

void views_client_addr(struct view *vw, char *addr, size_t len)
{
	if (!vw->vw_by_name) {
		snprintf(addr, len, "%.*s", VIEWS_ADDR_MAX - 1, vw->vw_key);
		return;
	}
	pthread_mutex_lock(&vw->vw_lock);
	snprintf(addr, len, "%s", vw->vw_seen);
	pthread_mutex_unlock(&vw->vw_lock);
}

int views_rule_locked(struct views *vt, struct view *vw)
{
	unsigned gen = nfs_names_gen(vt->vt_ns) + 1;
	char addr[VIEWS_ADDR_MAX];

	if (vw->vw_rule_gen != gen) {
		views_client_addr(vw, addr, sizeof(addr));
		vw->vw_rule = addr[0] ? views_rule_of(vt, vw->vw_export, addr) : -1;
		vw->vw_rule_gen = gen;
	}
	return vw->vw_rule;
}

void views_set_found(struct view *vw, const char *addr, bool seen, unsigned gen)
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

/*
 * Whether a call from addr may use view vw: 0 when addr is its client, -EACCES when not,
 * -EAGAIN when the name lookups are all busy. For %h that takes a name lookup the first
 * time an address shows up (after a restart, or a new lease).
 */
int views_owned_by(struct views *vt, struct view *vw, const char *addr)
{
	char key[VIEWS_KEY_MAX], err[512];
	unsigned gen = nfs_names_gen(vt->vt_ns);
	bool known = false, denied = false, ok;
	int r;

	if (!vw->vw_by_name)
		return strcmp(vw->vw_key, addr) ? -EACCES : 0;
	pthread_mutex_lock(&vw->vw_lock);
	if (vw->vw_names_gen == gen) {
		known = !strcmp(vw->vw_seen, addr);
		denied = !strcmp(vw->vw_denied, addr) &&
			 time(NULL) - vw->vw_denied_at < VIEWS_DENY_SECONDS;
	}
	pthread_mutex_unlock(&vw->vw_lock);
	if (known || denied)
		return known ? 0 : -EACCES;
	r = views_client_key(vt, vw->vw_export, addr, key, sizeof(key), err, sizeof(err));
	/* The lookups are all busy: no answer yet, so the client is told to try again. */
	if (r == -EAGAIN)
		return -EAGAIN;
	ok = r == 0 && !strcmp(key, vw->vw_key);
	views_set_found(vw, addr, ok, gen);
	return ok ? 0 : -EACCES;
}

struct views_mount_probe {
	const char *mp_export;
	const char *mp_addr;
};

static int views_mount_match(const char *host, const char *path, void *arg)
{
	const struct views_mount_probe *mp = arg;
	size_t len = strlen(mp->mp_export);

	return !strcmp(host, mp->mp_addr) && !strncmp(path, mp->mp_export, len) &&
	       (path[len] == '\0' || path[len] == '/');
}

bool views_mounted(struct views *vt, int i, const char *addr)
{
	struct views_mount_probe mp = { views_export(vt, i)->ec_name, addr };

	return addr[0] && nfs_mounts_each(vt->vt_ns, views_mount_match, &mp) != 0;
}

int views_named_key(struct views *vt, int i, const char *client, char *key, size_t keylen,
		    char *err, size_t errlen)
{
	const struct export_conf *ec = views_export(vt, i);

	if (hostmap_is_address(client))
		return views_client_key(vt, i, client, key, keylen, err, errlen);
	if (!views_upper_by_name(ec->ec_upper) || !hostmap_name_key(client, key, keylen))
		return 1;
	return 0;
}
