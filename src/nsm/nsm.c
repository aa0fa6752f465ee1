/*
 * The NSM state: the state number, this run's monitored clients and what earlier runs
 * left to notify (files in store.c), and SM_NOTIFY to those after a restart through the
 * RPC client.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsio.h"
#include "log.h"
#include "nsm_int.h"
#include "rpc_client.h"
#include "sm_inter.h"

/* One SM_NOTIFY under way (the entry itself may move in the list meanwhile). */
struct nsm_notify {
	struct nsm *nn_nsm;
	char nn_addr[INET6_ADDRSTRLEN];
	char nn_local[INET6_ADDRSTRLEN];
	bool nn_slow;            /* in the slow part of the schedule */
};

uint32_t nsm_state(const struct nsm *n)
{
	return n->sm_state;
}

void nsm_set_notify_interval(struct nsm *n, unsigned ms)
{
	n->sm_fast_ms = ms;
}

bool nsm_previous_clients(const struct nsm *n)
{
	struct nsm *m = (struct nsm *)n;
	bool any;

	pthread_mutex_lock(&m->sm_prev_lock);
	any = m->sm_prev.nl_n > 0;
	pthread_mutex_unlock(&m->sm_prev_lock);
	return any;
}

void nsm_set_reboot_hook(struct nsm *n, nsm_reboot_fn fn, void *arg)
{
	pthread_mutex_lock(&n->sm_prev_lock);
	n->sm_hook = fn;
	n->sm_hook_arg = arg;
	pthread_mutex_unlock(&n->sm_prev_lock);
}

/* ---- opening ---- */

/* The next state number: odd, 2 past the last run's; from the clock when none is known. */
static uint32_t next_state(struct nsm *n)
{
	uint32_t last;
	int r = nsm_read_state(n, &last);

	if (r == -ENOENT)
		return 1;
	if (r < 0)
		return (uint32_t)time(NULL) | 1u;
	return (last & 1u) ? last + 2 : last + 1;
}

static int write_state(struct nsm *n)
{
	char text[16];
	int len = snprintf(text, sizeof(text), "%u\n", n->sm_state);

	return nsm_write_atomic(n, NSM_STATE_FILE, text, (size_t)len);
}

/*
 * The last run's clients join those earlier runs left unnotified, in clients.previous,
 * before the clients file goes: a crash in between leaves both, and the next open merges
 * them again.
 */
static int take_previous(struct nsm *n)
{
	int r = nsm_read_clients(n, NSM_PREVIOUS_FILE, &n->sm_prev);
	int had;

	if (r < 0 && r != -ENOENT && r != -EBADMSG)
		return r;
	had = nsm_read_clients(n, NSM_CLIENTS_FILE, &n->sm_prev);
	if (had == -ENOENT)
		return 0;
	if (had < 0 && had != -EBADMSG)
		return had;
	r = nsm_write_clients(n, NSM_PREVIOUS_FILE, &n->sm_prev);
	if (r == 0)
		r = fsio_unlink(n->sm_dirfd, NSM_CLIENTS_FILE, false);
	if (r == 0)
		r = fsio_fsync_dir(n->sm_dirfd);
	return r;
}

static void nsm_free(struct nsm *n)
{
	if (n->sm_cur_fd >= 0)
		fsio_close(n->sm_cur_fd);
	if (n->sm_dirfd >= 0)
		fsio_close(n->sm_dirfd);
	nsm_list_free(&n->sm_cur);
	nsm_list_free(&n->sm_prev);
	pthread_mutex_destroy(&n->sm_cur_lock);
	pthread_mutex_destroy(&n->sm_prev_lock);
	free(n);
}

static int open_dir(struct nsm *n, const char *state_dir, char *err, size_t errlen)
{
	char canon[PATH_MAX];
	int sfd, r;

	r = fsio_open_root(state_dir, canon, sizeof(canon), &sfd);
	if (r == 0) {
		r = fsio_mkdir_p(sfd, NSM_DIR, 0700, &n->sm_dirfd);
		fsio_close(sfd);
	}
	if (r < 0) {
		err_set(err, errlen, "nsm: cannot open %s/%s: %s (the state directory must be a "
			"writable directory)", state_dir, NSM_DIR, strerror(-r));
		return r;
	}
	if (snprintf(n->sm_path, sizeof(n->sm_path), "%s/%s", canon, NSM_DIR) >= (int)sizeof(n->sm_path))
		snprintf(n->sm_path, sizeof(n->sm_path), "STATE_DIR/%s", NSM_DIR); /* only for messages */
	/* Left by a crash between writing and renaming: the file they were to replace stands. */
	(void)fsio_unlink(n->sm_dirfd, NSM_STATE_FILE NSM_TMP_SUFFIX, false);
	(void)fsio_unlink(n->sm_dirfd, NSM_PREVIOUS_FILE NSM_TMP_SUFFIX, false);
	return 0;
}

int nsm_open(const char *state_dir, struct rpc_client *rc, struct nsm **out, char *err,
	     size_t errlen)
{
	struct nsm *n = calloc(1, sizeof(*n));
	int r;

	if (!n) {
		err_set(err, errlen, "nsm: out of memory");
		return -ENOMEM;
	}
	n->sm_dirfd = -1;
	n->sm_cur_fd = -1;
	n->sm_rc = rc;
	pthread_mutex_init(&n->sm_cur_lock, NULL);
	pthread_mutex_init(&n->sm_prev_lock, NULL);
	r = open_dir(n, state_dir, err, errlen);
	if (r < 0)
		goto fail;
	r = take_previous(n);
	if (r < 0) {
		err_set(err, errlen, "nsm: cannot keep the last run's clients in %s/%s: %s",
			n->sm_path, NSM_PREVIOUS_FILE, strerror(-r));
		goto fail;
	}
	n->sm_state = next_state(n);
	r = write_state(n);
	if (r < 0) {
		err_set(err, errlen, "nsm: cannot write %s/%s: %s", n->sm_path, NSM_STATE_FILE,
			strerror(-r));
		goto fail;
	}
	*out = n;
	return 0;
fail:
	nsm_free(n);
	return r;
}

static void clients_compact(struct nsm *n);

void nsm_close(struct nsm *n)
{
	bool last;

	if (!n)
		return;
	pthread_mutex_lock(&n->sm_cur_lock);
	if (n->sm_cur_idle > 0)
		clients_compact(n);
	pthread_mutex_unlock(&n->sm_cur_lock);
	pthread_mutex_lock(&n->sm_prev_lock);
	n->sm_closed = true;
	last = n->sm_inflight == 0;
	pthread_mutex_unlock(&n->sm_prev_lock);
	if (last)
		nsm_free(n);
}

/* ---- monitoring ---- */

/*
 * Opens the clients file for the next line: made (empty) for the first client, else
 * reopened where the last rewrite left it.
 */
static int clients_open(struct nsm *n, bool *made)
{
	struct stat st;
	int r;

	*made = n->sm_cur.nl_n == 0;
	r = fsio_open_file(n->sm_dirfd, NSM_CLIENTS_FILE,
			   O_WRONLY | O_CREAT | (*made ? O_TRUNC : 0), 0600, &n->sm_cur_fd);
	if (r < 0)
		return r;
	r = fsio_stat(n->sm_cur_fd, &st);
	if (r < 0) {
		fsio_close(n->sm_cur_fd);
		n->sm_cur_fd = -1;
		return r;
	}
	n->sm_cur_off = (uint64_t)st.st_size;
	return 0;
}

/* Appends c's line to the clients file; durable on return. */
static int append_client(struct nsm *n, const struct nsm_client *c)
{
	char line[NSM_LINE_MAX + sizeof(NSM_CLIENTS_HEADER) + 1];
	size_t len = 0, done;
	bool made = false;
	int r;

	if (n->sm_cur_fd < 0) {
		r = clients_open(n, &made);
		if (r < 0)
			return r;
	}
	if (n->sm_cur_off == 0) {
		memcpy(line, NSM_CLIENTS_HEADER, strlen(NSM_CLIENTS_HEADER));
		len = strlen(NSM_CLIENTS_HEADER);
	}
	len += nsm_format_line(c, line + len);
	/* A failed write leaves sm_cur_off: the next line overwrites what it left. */
	r = fsio_pwrite(n->sm_cur_fd, line, len, n->sm_cur_off, &done);
	if (r == 0)
		r = fsio_fdatasync(n->sm_cur_fd);
	if (r == 0 && made)
		r = fsio_fsync_dir(n->sm_dirfd);
	if (r == 0)
		n->sm_cur_off += len;
	return r;
}

/*
 * Drops the clients that hold nothing from the list and the file (rewritten atomically, or
 * removed when none is left); the next line reopens it. Under sm_cur_lock.
 */
static void clients_compact(struct nsm *n)
{
	int r;

	for (unsigned i = 0; i < n->sm_cur.nl_n;) {
		if (n->sm_cur.nl_v[i].nc_idle)
			nsm_list_remove(&n->sm_cur, i);
		else
			i++;
	}
	n->sm_cur_idle = 0;
	n->sm_full_logged = false;
	if (n->sm_cur_fd >= 0)
		fsio_close(n->sm_cur_fd);
	n->sm_cur_fd = -1;
	r = nsm_write_clients(n, NSM_CLIENTS_FILE, &n->sm_cur);
	if (r < 0)
		log_err("nsm: cannot rewrite %s/%s without the clients that hold nothing: %s (they "
			"are told of the next start all the same)", n->sm_path, NSM_CLIENTS_FILE,
			strerror(-r));
}

/* A new client: listed (after dropping the idle ones when due) and its line durable. */
static int add_client(struct nsm *n, struct nsm_client *c)
{
	int r;

	/* A failed rewrite is logged; the old file, a superset, is appended to. */
	if (n->sm_cur_idle > 0 &&
	    (n->sm_cur.nl_n >= NSM_MAX_CLIENTS || n->sm_cur_idle >= NSM_COMPACT_IDLE))
		clients_compact(n);
	if (n->sm_cur.nl_n >= NSM_MAX_CLIENTS) {
		if (!n->sm_full_logged)
			log_err("nsm: %d clients hold locks already; %s (%s) is refused locks until "
				"one releases all of its own", NSM_MAX_CLIENTS, c->nc_addr,
				c->nc_name);
		n->sm_full_logged = true;
		return -ENOSPC;
	}
	r = append_client(n, c);
	if (r == 0)
		r = nsm_list_add(&n->sm_cur, c->nc_addr, c->nc_local, c->nc_name);
	else
		log_err("nsm: cannot note client %s in %s/%s: %s", c->nc_addr, n->sm_path,
			NSM_CLIENTS_FILE, strerror(-r));
	return r;
}

int nsm_monitor(struct nsm *n, const struct sockaddr *client, socklen_t len,
		const char *caller_name, const struct sockaddr *local, socklen_t locallen)
{
	struct nsm_client c = { .nc_name = (char *)(caller_name ? caller_name : "") };
	int i, r = 0;

	if (!rpc_addr_text(client, len, c.nc_addr, sizeof(c.nc_addr)) ||
	    !rpc_addr_text(local, locallen, c.nc_local, sizeof(c.nc_local)) ||
	    strlen(c.nc_name) > NSM_MAX_NAME)
		return -EINVAL;
	pthread_mutex_lock(&n->sm_cur_lock);
	i = nsm_list_find(&n->sm_cur, c.nc_addr, c.nc_local);
	if (i < 0) {
		r = add_client(n, &c);
	} else if (n->sm_cur.nl_v[i].nc_idle) {
		n->sm_cur.nl_v[i].nc_idle = false;
		n->sm_cur_idle--;
	}
	pthread_mutex_unlock(&n->sm_cur_lock);
	return r;
}

void nsm_unmonitor(struct nsm *n, const struct sockaddr *client, socklen_t len)
{
	char addr[INET6_ADDRSTRLEN];

	if (!rpc_addr_text(client, len, addr, sizeof(addr)))
		return;
	pthread_mutex_lock(&n->sm_cur_lock);
	for (unsigned i = 0; i < n->sm_cur.nl_n; i++) {
		struct nsm_client *c = &n->sm_cur.nl_v[i];

		if (!c->nc_idle && strcmp(c->nc_addr, addr) == 0) {
			c->nc_idle = true;
			n->sm_cur_idle++;
		}
	}
	pthread_mutex_unlock(&n->sm_cur_lock);
}

/* ---- SM_NOTIFY to the last run's clients ---- */

static void notify_done(void *arg, int status, XDR *reply);

static int notify_send(struct nsm_notify *nn)
{
	struct nsm *n = nn->nn_nsm;
	struct sockaddr_storage to = { 0 };
	stat_chge args = { .mon_name = nn->nn_local, .state = (int)n->sm_state };
	unsigned slow_tries = (NSM_NOTIFY_GIVE_UP_MS - NSM_NOTIFY_FAST_TRIES * NSM_NOTIFY_FAST_MS) /
			      NSM_NOTIFY_SLOW_MS;
	unsigned fast_ms = n->sm_fast_ms ? n->sm_fast_ms : NSM_NOTIFY_FAST_MS;
	struct rpc_client_call call = {
		.to = (struct sockaddr *)&to,
		.protocol = IPPROTO_UDP,
		.prog = SM_PROG, .vers = SM_VERS, .proc = SM_NOTIFY,
		.xdr_args = RPC_XDRPROC(xdr_stat_chge), .args = &args,
		.attempts = nn->nn_slow ? slow_tries : NSM_NOTIFY_FAST_TRIES,
		.interval_ms = nn->nn_slow ? NSM_NOTIFY_SLOW_MS : fast_ms,
		.done = notify_done, .arg = nn,
	};
	struct sockaddr_in *sin = (struct sockaddr_in *)&to;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&to;

	if (inet_pton(AF_INET, nn->nn_addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		call.tolen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, nn->nn_addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		call.tolen = sizeof(*sin6);
	} else {
		return -EINVAL;
	}
	return rpc_client_send(n->sm_rc, &call);
}

/*
 * clients.previous is rewritten in batches, not once per answer (quadratic for many
 * clients): after NSM_PREVIOUS_BATCH answers, or once no call is in the fast part of its
 * schedule. A crash before a rewrite only tells those clients again at the next start.
 * Under sm_prev_lock.
 */
static int previous_settle(struct nsm *n)
{
	int r = 0;

	if (n->sm_prev_unsaved > 0 &&
	    (n->sm_fast == 0 || n->sm_prev_unsaved >= NSM_PREVIOUS_BATCH)) {
		r = nsm_write_clients(n, NSM_PREVIOUS_FILE, &n->sm_prev);
		n->sm_prev_unsaved = 0;
	}
	return r;
}

static void previous_settle_failed(const struct nsm *n, int r)
{
	if (r < 0)
		log_err("nsm: cannot rewrite %s/%s: %s (clients told of this start may be told "
			"again at the next)", n->sm_path, NSM_PREVIOUS_FILE, strerror(-r));
}

/* The call for nn is over: its entry is no longer being sent; the last one frees. */
static void notify_end(struct nsm_notify *nn, bool delivered)
{
	struct nsm *n = nn->nn_nsm;
	bool free_now;
	int i, r;

	pthread_mutex_lock(&n->sm_prev_lock);
	i = nsm_list_find(&n->sm_prev, nn->nn_addr, nn->nn_local);
	if (i >= 0 && delivered) {
		nsm_list_remove(&n->sm_prev, (unsigned)i);
		n->sm_prev_unsaved++;
	} else if (i >= 0) {
		n->sm_prev.nl_v[i].nc_sending = false;
	}
	n->sm_inflight--;
	if (!nn->nn_slow)
		n->sm_fast--;
	r = previous_settle(n);
	free_now = n->sm_closed && n->sm_inflight == 0;
	pthread_mutex_unlock(&n->sm_prev_lock);
	previous_settle_failed(n, r);
	free(nn);
	if (free_now)
		nsm_free(n);
}

void nsm_reclaimed(struct nsm *n, const struct sockaddr *client, socklen_t len)
{
	char addr[INET6_ADDRSTRLEN];
	int r;

	if (!rpc_addr_text(client, len, addr, sizeof(addr)))
		return;
	pthread_mutex_lock(&n->sm_prev_lock);
	/* A call still under way finds its entry gone and only ends (notify_end). */
	for (unsigned i = 0; i < n->sm_prev.nl_n;) {
		if (strcmp(n->sm_prev.nl_v[i].nc_addr, addr) == 0) {
			nsm_list_remove(&n->sm_prev, i);
			n->sm_prev_unsaved++;
		} else {
			i++;
		}
	}
	r = previous_settle(n);
	pthread_mutex_unlock(&n->sm_prev_lock);
	previous_settle_failed(n, r);
}

/* No answer in the fast part of the schedule: the slow part follows. */
static int notify_slow(struct nsm_notify *nn)
{
	struct nsm *n = nn->nn_nsm;
	int r;

	pthread_mutex_lock(&n->sm_prev_lock);
	nn->nn_slow = true;
	n->sm_fast--;
	r = previous_settle(n);
	pthread_mutex_unlock(&n->sm_prev_lock);
	previous_settle_failed(n, r);
	return notify_send(nn);
}

static void notify_done(void *arg, int status, XDR *reply)
{
	struct nsm_notify *nn = arg;
	int r;

	(void)reply;
	if (status == 0) {
		log_info("nsm: told %s that we restarted (SM_NOTIFY as %s, state %u)", nn->nn_addr,
			 nn->nn_local, nn->nn_nsm->sm_state);
		notify_end(nn, true);
		return;
	}
	if (status != -ECANCELED && !nn->nn_slow) {
		r = notify_slow(nn);
		if (r == 0)
			return;
		status = r;
	}
	if (status != -ECANCELED)
		log_warn("nsm: SM_NOTIFY to %s (as %s) failed: %s; its programs may believe they "
			 "still hold locks this server no longer keeps. It stays in %s/%s for the "
			 "next start", nn->nn_addr, nn->nn_local, strerror(-status),
			 nn->nn_nsm->sm_path, NSM_PREVIOUS_FILE);
	notify_end(nn, false);
}

void nsm_notify_previous(struct nsm *n)
{
	if (!n->sm_rc)
		return;
	pthread_mutex_lock(&n->sm_prev_lock);
	for (unsigned i = 0; i < n->sm_prev.nl_n; i++) {
		struct nsm_client *c = &n->sm_prev.nl_v[i];
		struct nsm_notify *nn;
		int r;

		if (c->nc_sending)
			continue;
		nn = calloc(1, sizeof(*nn));
		if (!nn) {
			log_err("nsm: out of memory: not all clients are told that we restarted");
			break;
		}
		nn->nn_nsm = n;
		strcpy(nn->nn_addr, c->nc_addr);
		strcpy(nn->nn_local, c->nc_local);
		r = notify_send(nn);
		if (r < 0) {
			log_err("nsm: cannot send SM_NOTIFY to %s: %s", c->nc_addr, strerror(-r));
			free(nn);
			continue;
		}
		c->nc_sending = true;
		n->sm_inflight++;
		n->sm_fast++;
	}
	pthread_mutex_unlock(&n->sm_prev_lock);
}
