/*
 * What the control socket's two halves share: socket.c (the socket, its connections and
 * the --metrics listener, all on the loop) and control.c (requests parsed, replies
 * formatted, jobs).
 */
#ifndef UNFS_CTL_INTERNAL_H
#define UNFS_CTL_INTERNAL_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>

#include "control.h"
#include "hostmap.h"
#include "metrics.h"
#include "stats.h"

/* A reply being composed: stats_appendf's growing string and its first error. */
struct ctl_out {
	char *co_buf;
	size_t co_len, co_cap;
	int co_err;
};

#define ctl_put(o, ...) \
	do { \
		if ((o)->co_err == 0) \
			(o)->co_err = stats_appendf(&(o)->co_buf, &(o)->co_len, &(o)->co_cap, __VA_ARGS__); \
	} while (0)

/* What the job thread does (ctl_job_of): the long commands, off the loop. */
enum ctl_job {
	CTL_JOB_CHECK,
	CTL_JOB_RESET,
	CTL_JOB_CONFLICTS,
	CTL_JOB_TAKE_BASE,
	CTL_JOB_BASE,
};

struct ctl_conn {
	struct ctl_conn *cn_prev, *cn_next;
	struct control *cn_ctl;
	int cn_fd;
	ev_io cn_rio;
	ev_io cn_wio;
	ev_timer cn_timer;
	bool cn_http;                     /* a metrics scrape, not a control command */
	bool cn_streaming;                /* progress lines go out; the reply is yet to come */
	char cn_in[METRICS_HEAD_MAX + 1];
	size_t cn_inlen;
	char *cn_out;
	size_t cn_outlen, cn_outoff;
};

struct control {
	struct ev_loop *ct_loop;
	struct control_env ct_env;
	int ct_fd;
	ev_io ct_accept;
	int ct_http_fd;                   /* --metrics listener, -1 if none */
	ev_io ct_http_accept;
	ev_timer ct_backoff;              /* accepting paused: out of descriptors */
	ev_timer ct_http_backoff;
	int ct_spare;                     /* a descriptor kept free for one control connection */
	ev_tstamp ct_emfile_warned;
	char ct_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t ct_dev;                     /* the socket file we made, so close removes only it */
	ino_t ct_ino;
	time_t ct_started;
	struct ctl_conn *ct_conns;
	unsigned ct_nconns;               /* control socket connections */
	unsigned ct_nhttp;                /* --metrics connections */
	/*
	 * `check` walks the whole map, so it runs on a thread of its own; the connection that
	 * asked waits (ct_check_conn, NULL if it went away) and ct_check_done brings the report
	 * back to the loop.
	 */
	bool ct_checking;
	enum ctl_job ct_job;
	char ct_job_line[CONTROL_MAX_REQUEST + 1]; /* conflicts, take-base, base: the request */
	bool ct_job_reload;               /* the job asks for a reload once it is done */
	char ct_reset_addr[HOSTMAP_NAME_MAX + 1]; /* an address, or a host name (upper=...%h) */
	bool ct_reset_force;
	bool ct_check_repair;             /* check --repair: drop the stale records found */
	pthread_t ct_check_thread;
	struct ctl_conn *ct_check_conn;
	atomic_bool ct_check_cancel;
	char *ct_check_report;
	ev_async ct_check_done;
	/* Where the check is (ctl_check_progress), sent to its connection now and then. */
	pthread_mutex_t ct_prog_lock;
	char ct_prog_label[320];
	uint64_t ct_prog_done, ct_prog_total;
	uint64_t ct_prog_gen;             /* +1 by every update */
	uint64_t ct_prog_sent;            /* the update last sent (loop only) */
	ev_timer ct_progress;
};

/* socket.c: sends out (malloc()ed; NULL: out of memory) after anything still going out, then closes. */
void ctl_conn_send(struct ctl_conn *c, char *out);
/* socket.c: writes what the socket takes; closes once all is out unless cn_streaming. */
void ctl_conn_flush(struct ctl_conn *c);

/* control.c: answers the request line in c->cn_in (or starts its job). */
void ctl_request(struct ctl_conn *c);
/* control.c: the --metrics response to a request head. */
char *ctl_metrics(struct control *ctl, const char *head);
/* rollout.c: the jobs `conflicts CLIENT [--json]` and `take-base CLIENT PATH...` (line). */
void ctl_conflicts(struct control *ctl, struct ctl_out *o, const char *line);
void ctl_take_base(struct control *ctl, struct ctl_out *o, const char *line);
/* rollout.c: the job `base EXPORT [set DIR...]`; a set asks for a reload (ct_job_reload). */
void ctl_base(struct control *ctl, struct ctl_out *o, const char *line);
/* control.c: the job thread's watchers, made and stopped with the socket. */
void ctl_jobs_init(struct control *ctl);
void ctl_jobs_close(struct control *ctl);

#endif
