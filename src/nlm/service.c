/*
 * The NLM service's state: the lock table, the hosts NSM monitors for it, the grace period
 * after a restart, and the calls back to clients (GRANTED_MSG for granted waiters, *_RES for
 * the *_MSG procedures). No call goes out while a mutex is held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nlm_internal.h"
#include "nsm.h"
#include "rpc_client.h"

#define NLM_RES_ATTEMPTS 3
#define NLM_RES_INTERVAL_MS 2000

void nlm_addr_key(const struct sockaddr *sa, socklen_t len, char key[NLM_KEY_LEN])
{
	if (!rpc_addr_text(sa, len, key, NLM_KEY_LEN))
		snprintf(key, NLM_KEY_LEN, "unknown");
}

/* ---- outside calls, through the hooks when a test set them ---- */

static int nlm_send(struct nlm_service *s, const struct rpc_client_call *call)
{
	if (s->s_hooks.nh_send != NULL)
		return s->s_hooks.nh_send(s->s_hooks.nh_arg, call);
	if (s->s_rc == NULL)
		return -ENOTCONN;
	return rpc_client_send(s->s_rc, call);
}

/*
 * Every host holding something is monitored by NSM under the caller_name it gave: NSM must
 * list as many hosts as the table serves by default, and keep any name NLM decodes.
 */
_Static_assert(LOCKS_DEFAULT_HOSTS <= NSM_MAX_CLIENTS, "NSM lists every host holding locks");
_Static_assert(LM_MAXSTRLEN <= NSM_MAX_NAME, "NSM keeps every caller_name");

static int nlm_nsm_monitor(struct nlm_service *s, const struct rpc_req *rq, const char *name)
{
	const struct sockaddr *local = rq->rq_locallen ? (const struct sockaddr *)&rq->rq_local
						       : NULL;

	if (s->s_hooks.nh_monitor != NULL)
		return s->s_hooks.nh_monitor(s->s_hooks.nh_arg, (const struct sockaddr *)&rq->rq_peer,
					     rq->rq_peerlen, name, local, rq->rq_locallen);
	if (s->s_nsm == NULL)
		return 0;
	return nsm_monitor(s->s_nsm, (const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, name,
			   local, rq->rq_locallen);
}

static void nlm_nsm_unmonitor(struct nlm_service *s, const struct nlm_host *h)
{
	const struct sockaddr *sa = (const struct sockaddr *)&h->h_addr;

	if (s->s_hooks.nh_unmonitor != NULL)
		s->s_hooks.nh_unmonitor(s->s_hooks.nh_arg, sa, h->h_addrlen);
	else if (s->s_nsm != NULL)
		nsm_unmonitor(s->s_nsm, sa, h->h_addrlen);
}

void nlm_host_reclaimed(struct nlm_service *s, const struct rpc_req *rq)
{
	if (s->s_nsm != NULL)
		nsm_reclaimed(s->s_nsm, (const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen);
}

static bool nlm_previous_clients(struct nlm_service *s)
{
	if (s->s_hooks.nh_previous != NULL)
		return s->s_hooks.nh_previous(s->s_hooks.nh_arg);
	return s->s_nsm != NULL && nsm_previous_clients(s->s_nsm);
}

/* ---- hosts ---- */

static struct nlm_host *nlm_host_find(struct nlm_service *s, const char *key)
{
	for (struct nlm_host *h = s->s_hosts; h != NULL; h = h->h_next)
		if (strcmp(h->h_key, key) == 0)
			return h;
	return NULL;
}

/* Under s_mu. */
static struct nlm_host *nlm_host_add(struct nlm_service *s, const struct rpc_req *rq,
				     const char *key)
{
	bool udp = rq->rq_protocol == IPPROTO_UDP;
	struct nlm_host *h;
	time_t now;

	if (s->s_nhosts >= s->s_hosts_max)
		return NULL;
	if (udp && s->s_nudp >= NLM_UDP_HOSTS_MAX) {
		now = time(NULL);
		if (now - s->s_udp_warned >= 60) {
			s->s_udp_warned = now;
			log_warn("nlm: %u hosts that lock only over UDP hold locks already; %s is "
				 "refused with DENIED_NOLOCKS (a datagram's sender can be forged: "
				 "clients should lock over TCP, as they do by default)",
				 NLM_UDP_HOSTS_MAX, key);
		}
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	snprintf(h->h_key, sizeof(h->h_key), "%s", key);
	memcpy(&h->h_addr, &rq->rq_peer, rq->rq_peerlen);
	h->h_addrlen = rq->rq_peerlen;
	h->h_udp = udp;
	h->h_next = s->s_hosts;
	s->s_hosts = h;
	s->s_nhosts++;
	s->s_nudp += udp;
	return h;
}

nlm4_stats nlm_host_enter(struct nlm_service *s, const struct rpc_req *rq, const char *key)
{
	struct nlm_host *h;

	pthread_mutex_lock(&s->s_mu);
	h = nlm_host_find(s, key);
	if (h == NULL)
		h = nlm_host_add(s, rq, key);
	if (h != NULL) {
		h->h_calls++;
		if (h->h_udp && rq->rq_protocol != IPPROTO_UDP) {
			h->h_udp = false;
			s->s_nudp--;
		}
	}
	pthread_mutex_unlock(&s->s_mu);
	return h != NULL ? NLM4_GRANTED : NLM4_DENIED_NOLOCKS;
}

/* Under s_mu: the entry of a host that holds nothing and has no call under way goes. */
static void nlm_host_drop_if_idle(struct nlm_service *s, const char *key)
{
	struct nlm_host **pp = &s->s_hosts, *h;

	while (*pp != NULL && strcmp((*pp)->h_key, key) != 0)
		pp = &(*pp)->h_next;
	h = *pp;
	if (h == NULL || h->h_calls > 0 || nlm_shares_held(s, key) ||
	    locks_host_active(s->s_locks, key))
		return;
	*pp = h->h_next;
	s->s_nhosts--;
	s->s_nudp -= h->h_udp;
	if (h->h_name != NULL)
		nlm_nsm_unmonitor(s, h);
	free(h->h_name);
	free(h);
}

void nlm_host_leave(struct nlm_service *s, const char *key)
{
	struct nlm_host *h;

	pthread_mutex_lock(&s->s_mu);
	h = nlm_host_find(s, key);
	if (h != NULL && h->h_calls > 0)
		h->h_calls--;
	nlm_host_drop_if_idle(s, key);
	pthread_mutex_unlock(&s->s_mu);
}

void nlm_host_settle(struct nlm_service *s, const char *key)
{
	pthread_mutex_lock(&s->s_mu);
	nlm_host_drop_if_idle(s, key);
	pthread_mutex_unlock(&s->s_mu);
}

/*
 * NSM monitors a host from its first lock or share on, under the name it gave: asked again
 * when the name changes. Durable before the lock is granted, so a reboot of ours tells it.
 */
bool nlm_host_monitored(struct nlm_service *s, const char *key, const char *caller_name)
{
	struct nlm_host *h;
	bool known;

	pthread_mutex_lock(&s->s_mu);
	h = nlm_host_find(s, key);
	known = h != NULL && h->h_name != NULL && strcmp(h->h_name, caller_name) == 0;
	pthread_mutex_unlock(&s->s_mu);
	return known;
}

nlm4_stats nlm_monitor_host(struct nlm_service *s, const struct rpc_req *rq, const char *key,
			    const char *caller_name)
{
	struct nlm_host *h;
	char *name;
	int err;

	if (nlm_host_monitored(s, key, caller_name))
		return NLM4_GRANTED;
	err = nlm_nsm_monitor(s, rq, caller_name);
	if (err != 0) {
		log_warn("nlm: cannot have NSM monitor %s (%s): %s; its lock is refused with "
			 "DENIED_NOLOCKS (check the state directory is writable)", key, caller_name,
			 strerror(-err));
		return NLM4_DENIED_NOLOCKS;
	}
	name = strdup(caller_name);
	if (name == NULL)
		return NLM4_DENIED_NOLOCKS;
	pthread_mutex_lock(&s->s_mu);
	h = nlm_host_find(s, key);  /* entered by the caller: still there */
	if (h != NULL) {
		free(h->h_name);
		h->h_name = name;
		name = NULL;
	}
	pthread_mutex_unlock(&s->s_mu);
	free(name);
	return NLM4_GRANTED;
}

/* ---- waiters and granted callbacks ---- */

struct nlm_waiter *nlm_waiter_new(const struct rpc_req *rq, const nlm4_lock *l, bool exclusive)
{
	size_t namelen = strlen(l->caller_name) + 1;
	struct nlm_waiter *w = malloc(sizeof(*w) + namelen + l->fh.nlm4_netobj_len +
				      l->oh.nlm4_netobj_len);
	char *p;

	if (w == NULL)
		return NULL;
	memset(w, 0, sizeof(*w));
	memcpy(&w->w_addr, &rq->rq_peer, rq->rq_peerlen);
	w->w_addrlen = rq->rq_peerlen;
	w->w_protocol = rq->rq_protocol;
	w->w_exclusive = exclusive;
	w->w_lock = *l;
	p = (char *)(w + 1);
	w->w_lock.caller_name = memcpy(p, l->caller_name, namelen);
	p += namelen;
	w->w_lock.fh.nlm4_netobj_val = memcpy(p, l->fh.nlm4_netobj_val, l->fh.nlm4_netobj_len);
	p += l->fh.nlm4_netobj_len;
	w->w_lock.oh.nlm4_netobj_val = memcpy(p, l->oh.nlm4_netobj_val, l->oh.nlm4_netobj_len);
	return w;
}

void nlm_waiter_free(struct nlm_waiter *w)
{
	free(w);
}

static struct nlm_grant *nlm_grant_unlink(struct nlm_service *s, uint64_t seq)
{
	for (struct nlm_grant **pp = &s->s_grants; *pp != NULL; pp = &(*pp)->g_next) {
		struct nlm_grant *g = *pp;

		if (g->g_seq == seq) {
			*pp = g->g_next;
			s->s_ngrants--;
			return g;
		}
	}
	return NULL;
}

/*
 * Remembers a grant until its GRANTED_RES; the oldest goes when there are too many, its lock
 * kept (a client that never answers GRANTED_MSG's call took it, as far as we can tell).
 */
static void nlm_grant_remember(struct nlm_service *s, struct nlm_grant *g)
{
	struct nlm_grant **pp, *oldest = NULL;

	pthread_mutex_lock(&s->s_mu);
	if (s->s_ngrants >= NLM_GRANTS_MAX) {
		for (pp = &s->s_grants; (*pp)->g_next != NULL; pp = &(*pp)->g_next)
			;
		oldest = *pp;
		*pp = NULL;
		s->s_ngrants--;
	}
	g->g_next = s->s_grants;
	s->s_grants = g;
	s->s_ngrants++;
	pthread_mutex_unlock(&s->s_mu);
	if (oldest != NULL) {
		locks_grant_keep(s->s_locks, oldest->g_grant);
		free(oldest);
	}
}

/*
 * The client never learns of (or refuses) the lock it was granted: it is given back, and the
 * owner's locks on the range are again what they were before the grant.
 */
/*
 * Where to call a client's lock manager: its address with port 0, which has rpc_client ask
 * the client's portmapper (the lock manager does not listen at the port a call came from).
 */
static void nlm_manager_addr(const struct sockaddr_storage *peer, socklen_t len,
			     struct sockaddr_storage *to)
{
	memcpy(to, peer, len);
	if (to->ss_family == AF_INET)
		((struct sockaddr_in *)to)->sin_port = 0;
	else if (to->ss_family == AF_INET6)
		((struct sockaddr_in6 *)to)->sin6_port = 0;
}

static void nlm_grant_undo(struct nlm_service *s, uint64_t grant, const char *key)
{
	struct locks_event *events = NULL;

	if (locks_ungrant(s->s_locks, grant, &events) == LOCKS_CHANGED)
		log_info("nlm: %s changed its locks on a range it was granted since; the grant is "
			 "not undone there", key);
	nlm_events(s, events);
	nlm_host_settle(s, key);
}

/* A caller over UDP may be a forged address: what we send it is bounded. */
static unsigned nlm_callback_attempts(int protocol, unsigned attempts)
{
	if (protocol == IPPROTO_UDP && attempts > NLM_UDP_CALLBACK_ATTEMPTS)
		return NLM_UDP_CALLBACK_ATTEMPTS;
	return attempts;
}

struct nlm_callback {
	struct nlm_service *cb_s;
	uint64_t cb_seq;
};

static void nlm_granted_done(void *arg, int status, XDR *reply)
{
	struct nlm_callback *cb = arg;
	struct nlm_service *s = cb->cb_s;
	struct nlm_grant *g = NULL;

	(void)reply;
	if (status != 0) {
		pthread_mutex_lock(&s->s_mu);
		g = nlm_grant_unlink(s, cb->cb_seq);
		pthread_mutex_unlock(&s->s_mu);
	}
	if (g != NULL) {
		char key[NLM_KEY_LEN];

		snprintf(key, sizeof(key), "%s", g->g_key);
		log_warn("nlm: could not tell %s its blocked lock was granted (%s); the lock is "
			 "given back", key, strerror(-status));
		nlm_grant_undo(s, g->g_grant, key);
		free(g);
	}
	atomic_fetch_sub(&s->s_callbacks, 1);
	free(cb);
}

/* GRANTED_MSG to a waiter the table just granted; false when it cannot even be queued. */
static bool nlm_call_granted(struct nlm_service *s, const struct locks_event *ev,
			     const struct nlm_waiter *w)
{
	struct nlm_grant *g = calloc(1, sizeof(*g));
	struct nlm_callback *cb = malloc(sizeof(*cb));
	uint64_t seq = atomic_fetch_add(&s->s_seq, 1);
	uint8_t cookie[8];
	nlm4_testargs args;
	struct rpc_client_call call;
	struct sockaddr_storage to;
	int err;

	if (g == NULL || cb == NULL) {
		free(g);
		free(cb);
		return false;
	}
	g->g_seq = seq;
	g->g_grant = ev->le_grant;
	snprintf(g->g_key, sizeof(g->g_key), "%s", ev->le_owner.lw_host);
	nlm_grant_remember(s, g);

	memcpy(cookie, &seq, sizeof(cookie));
	memset(&args, 0, sizeof(args));
	args.cookie.nlm4_netobj_len = sizeof(cookie);
	args.cookie.nlm4_netobj_val = (char *)cookie;
	args.exclusive = w->w_exclusive;
	args.alock = w->w_lock;
	nlm_manager_addr(&w->w_addr, w->w_addrlen, &to);
	cb->cb_s = s;
	cb->cb_seq = seq;
	call = (struct rpc_client_call){
		.to = (const struct sockaddr *)&to, .tolen = w->w_addrlen,
		.protocol = w->w_protocol, .prog = NLM_PROG, .vers = NLM_VERS4,
		.proc = NLMPROC4_GRANTED_MSG, .xdr_args = RPC_XDRPROC(xdr_nlm4_testargs),
		.args = &args,
		.attempts = nlm_callback_attempts(w->w_protocol,
						  s->s_retry_total_ms / s->s_retry_ms + 1),
		.interval_ms = s->s_retry_ms, .done = nlm_granted_done, .arg = cb,
	};
	/* counted first: done may run on the client's thread before nlm_send returns */
	atomic_fetch_add(&s->s_callbacks, 1);
	err = nlm_send(s, &call);
	if (err != 0) {
		atomic_fetch_sub(&s->s_callbacks, 1);
		pthread_mutex_lock(&s->s_mu);
		g = nlm_grant_unlink(s, seq);
		pthread_mutex_unlock(&s->s_mu);
		free(g);
		free(cb);
		return false;
	}
	return true;
}

void nlm_events(struct nlm_service *s, struct locks_event *events)
{
	/* Undoing a grant that cannot be sent may grant others: they come back in this list. */
	while (events != NULL) {
		struct locks_event *more = NULL;

		for (struct locks_event *ev = events; ev != NULL; ev = ev->le_next) {
			struct nlm_waiter *w = ev->le_cookie;
			bool gone = ev->le_kind != LOCKS_EV_GRANTED;

			if (!gone && !nlm_call_granted(s, ev, w)) {
				log_warn("nlm: cannot call %s back for its granted lock; given back",
					 ev->le_owner.lw_host);
				locks_ungrant(s->s_locks, ev->le_grant, &more);
				gone = true;
			}
			nlm_waiter_free(w);
			/* its host may hold nothing now */
			if (gone)
				nlm_host_settle(s, ev->le_owner.lw_host);
		}
		locks_events_free(events);
		events = more;
	}
}

void nlm_granted_res(struct nlm_service *s, const struct rpc_req *rq, const nlm4_netobj *cookie,
		     nlm4_stats stat)
{
	struct nlm_grant *g = NULL;
	char key[NLM_KEY_LEN];
	uint64_t seq;

	if (cookie->nlm4_netobj_len != sizeof(seq))
		return;
	memcpy(&seq, cookie->nlm4_netobj_val, sizeof(seq));
	nlm_addr_key((const struct sockaddr *)&rq->rq_peer, rq->rq_peerlen, key);
	pthread_mutex_lock(&s->s_mu);
	/* Only the host the lock was granted to may give it back. */
	for (struct nlm_grant *i = s->s_grants; i != NULL && g == NULL; i = i->g_next)
		if (i->g_seq == seq && strcmp(i->g_key, key) == 0)
			g = nlm_grant_unlink(s, seq);
	pthread_mutex_unlock(&s->s_mu);
	if (g == NULL)
		return;
	if (stat != NLM4_GRANTED)
		nlm_grant_undo(s, g->g_grant, key);
	else
		locks_grant_keep(s->s_locks, g->g_grant);
	free(g);
}

static void nlm_res_done(void *arg, int status, XDR *reply)
{
	(void)arg;
	(void)reply;
	if (status != 0)
		log_debug("nlm: a *_RES call back failed: %s", strerror(-status));
}

void nlm_send_res(struct nlm_service *s, const struct rpc_req *rq, uint32_t proc, xdrproc_t xdr,
		  const void *res)
{
	struct sockaddr_storage to;
	struct rpc_client_call call;
	int err;

	nlm_manager_addr(&rq->rq_peer, rq->rq_peerlen, &to);
	call = (struct rpc_client_call){
		.to = (const struct sockaddr *)&to, .tolen = rq->rq_peerlen,
		.protocol = rq->rq_protocol, .prog = NLM_PROG, .vers = NLM_VERS4, .proc = proc,
		.xdr_args = xdr, .args = res,
		.attempts = rq->rq_protocol == IPPROTO_UDP ? 1 : NLM_RES_ATTEMPTS,
		.interval_ms = NLM_RES_INTERVAL_MS, .done = nlm_res_done, .arg = NULL,
	};
	err = nlm_send(s, &call);
	if (err != 0)
		log_debug("nlm: cannot send a *_RES call back: %s", strerror(-err));
}

/* ---- freeing hosts ---- */

static void nlm_grants_drop_host(struct nlm_service *s, const char *key)
{
	for (struct nlm_grant **pp = &s->s_grants; *pp != NULL;) {
		struct nlm_grant *g = *pp;

		if (strcmp(g->g_key, key) == 0) {
			*pp = g->g_next;
			s->s_ngrants--;
			free(g);
		} else {
			pp = &g->g_next;
		}
	}
}

void nlm_free_host(struct nlm_service *s, const char *key)
{
	struct locks_event *events = NULL;

	pthread_mutex_lock(&s->s_mu);
	nlm_shares_drop_host(s, key);
	nlm_grants_drop_host(s, key);
	pthread_mutex_unlock(&s->s_mu);
	locks_release_host(s->s_locks, key, &events);
	nlm_events(s, events);
	nlm_host_settle(s, key);
}

/* A host known by this caller name at another address than key's, for the log; "" if none. */
static void nlm_named_elsewhere(struct nlm_service *s, const char *name, const char *key,
				char other[NLM_KEY_LEN])
{
	other[0] = '\0';
	pthread_mutex_lock(&s->s_mu);
	for (struct nlm_host *h = s->s_hosts; h != NULL && !other[0]; h = h->h_next)
		if (h->h_name != NULL && strcmp(h->h_name, name) == 0 && strcmp(h->h_key, key) != 0)
			snprintf(other, NLM_KEY_LEN, "%s", h->h_key);
	pthread_mutex_unlock(&s->s_mu);
}

/*
 * A reboot notice frees the host at the address it comes from, whatever name it gives: a
 * client's statd sends it from the client. The name proves nothing (anyone can send any
 * name, and two clients may both be "guest"), so a notice never frees a host elsewhere.
 */
void nlm_host_rebooted(struct nlm_service *s, const char *mon_name, const struct sockaddr *from,
		       socklen_t fromlen)
{
	char key[NLM_KEY_LEN], other[NLM_KEY_LEN];

	if (from == NULL || fromlen == 0)
		return;
	nlm_addr_key(from, fromlen, key);
	nlm_named_elsewhere(s, mon_name ? mon_name : "", key, other);
	if (other[0])
		log_info("nlm: reboot notice for %s from %s: the locks of %s there are freed, not "
			 "those of %s by the same name (a notice frees only the host it comes from)",
			 mon_name, key, key, other);
	else
		log_info("nlm: %s%s%s rebooted: its locks are freed", mon_name ? mon_name : "",
			 mon_name ? " at " : "", key);
	nlm_free_host(s, key);
}

static void nlm_reboot_hook(void *arg, const char *mon_name, const struct sockaddr *from,
			    socklen_t fromlen)
{
	nlm_host_rebooted(arg, mon_name, from, fromlen);
}

/* ---- grace ---- */

static bool nlm_before(const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec < end->tv_sec || (now.tv_sec == end->tv_sec && now.tv_nsec < end->tv_nsec);
}

bool nlm_in_grace(struct nlm_service *s)
{
	if (!atomic_load_explicit(&s->s_grace_on, memory_order_relaxed))
		return false;
	if (nlm_before(&s->s_grace_end))
		return true;
	if (atomic_exchange(&s->s_grace_on, false))
		log_info("nlm: grace period over: new locks are granted");
	return false;
}

static void nlm_grace_start(struct nlm_service *s, unsigned seconds)
{
	if (seconds == 0 || !nlm_previous_clients(s))
		return;
	clock_gettime(CLOCK_MONOTONIC, &s->s_grace_end);
	s->s_grace_end.tv_sec += seconds;
	atomic_store(&s->s_grace_on, true);
	log_info("nlm: grace period of %u s: clients of the last run reclaim their locks, new "
		 "locks wait", seconds);
}

/* ---- the service ---- */

int nlm_service_new(struct nfs_server *ns, struct nsm *nsm, struct rpc_client *rc,
		    const struct nlm_opts *o, struct nlm_service **out, char *err, size_t len)
{
	static const struct nlm_opts none;
	struct nlm_service *s;
	enum locks_status ls;
	int e;

	if (o == NULL)
		o = &none;
	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto nomem;
	s->s_ns = ns;
	s->s_nsm = nsm;
	s->s_rc = rc;
	if (o->no_hooks != NULL)
		s->s_hooks = *o->no_hooks;
	s->s_retry_ms = o->no_retry_ms ? o->no_retry_ms : CONFIG_DEFAULT_NLM_RETRY_MS;
	s->s_retry_total_ms = o->no_retry_total_ms ? o->no_retry_total_ms
						   : CONFIG_NLM_RETRY_TOTAL_MS;
	s->s_shares_max = o->no_shares ? o->no_shares : NLM_DEFAULT_SHARES;
	s->s_hosts_max = o->no_limits ? o->no_limits->ll_hosts : LOCKS_DEFAULT_HOSTS;
	atomic_init(&s->s_seq, (uint64_t)time(NULL) << 20);
	pthread_mutex_init(&s->s_mu, NULL);
	s->s_shares = calloc(s->s_shares_max, sizeof(*s->s_shares));
	if (s->s_shares == NULL)
		goto nomem;
	ls = locks_table_create(o->no_limits, &s->s_locks);
	if (ls != LOCKS_OK) {
		snprintf(err, len, "nlm: cannot create the lock table: %s", locks_strerror(ls));
		e = ls == LOCKS_NOMEM ? -ENOMEM : -EINVAL;
		goto fail;
	}
	nlm_grace_start(s, o->no_grace_seconds);
	if (nsm != NULL)
		nsm_set_reboot_hook(nsm, nlm_reboot_hook, s);
	*out = s;
	return 0;
nomem:
	snprintf(err, len, "nlm: out of memory");
	e = -ENOMEM;
fail:
	nlm_service_free(s);
	return e;
}

void nlm_service_free(struct nlm_service *s)
{
	struct locks_event *events = NULL;

	if (s == NULL)
		return;
	if (s->s_nsm != NULL)
		nsm_set_reboot_hook(s->s_nsm, NULL, NULL);
	if (s->s_locks != NULL) {
		locks_release_all(s->s_locks, &events);
		for (struct locks_event *ev = events; ev != NULL; ev = ev->le_next)
			nlm_waiter_free(ev->le_cookie);
		locks_events_free(events);
		locks_table_free(s->s_locks);
	}
	while (s->s_hosts != NULL) {
		struct nlm_host *h = s->s_hosts;

		s->s_hosts = h->h_next;
		free(h->h_name);
		free(h);
	}
	while (s->s_grants != NULL) {
		struct nlm_grant *g = s->s_grants;

		s->s_grants = g->g_next;
		free(g);
	}
	free(s->s_shares);
	pthread_mutex_destroy(&s->s_mu);
	free(s);
}

struct locks_table *nlm_service_locks(struct nlm_service *s)
{
	return s->s_locks;
}

uint64_t nlm_service_callbacks_pending(struct nlm_service *s)
{
	return atomic_load(&s->s_callbacks);
}
