/*
 * The control socket: STATE_DIR/control.sock, a UNIX stream socket (mode 0600) served
 * on the event loop, which build/unionnfsd-ctl talks to. One line of text in
 * ("status", "clients", "stats", "locks", "check [--repair]", "reload", "reset CLIENT", "help"),
 * the reply out, then
 * the server closes the connection. A reply that failed begins with "error: ". While a
 * check runs, progress lines (CONTROL_PROGRESS_PREFIX) come before its reply.
 *
 * Nothing here blocks the loop: requests are bounded (CONTROL_MAX_REQUEST), replies are
 * composed in memory from counters and lists guarded by short locks and written with the
 * loop's write watcher, and a connection that stalls is closed after CONTROL_TIMEOUT.
 * One descriptor is kept in reserve for the control socket, so it answers even when
 * client connections or views used up the open files limit.
 */
#ifndef UNFS_CONTROL_H
#define UNFS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifndef UNIONNFSD_VERSION
#define UNIONNFSD_VERSION "0.6-dev"
#endif

#define CONTROL_SOCKET_NAME "control.sock"
#define CONTROL_MAX_REQUEST 1024      /* bytes of the request line, newline included */

/* The commands, as the server's `help` and unionnfsd-ctl's usage list them. */
#define CONTROL_COMMANDS_HELP \
	"commands:\n" \
	"  status         version, uptime, exports and their branches (role, space, objects),\n" \
	"                 mounts\n" \
	"  clients        who mounted what, from where, first and last call\n" \
	"  stats          calls, latency percentiles, bytes, copy-ups, whiteouts, STALE replies,\n" \
	"                 NLM locks held and waiting\n" \
	"  locks          NLM locks held and waiting, by client and file\n" \
	"  check [--repair]  resolve every inode map record (per-client views too) against the\n" \
	"                 branches; report stale ones; --repair drops their records\n" \
	"  reload         re-read the configuration, as SIGHUP does\n" \
	"  reset CLIENT [--force]  discard a client's own upper branch (exports with upper=...)\n" \
	"  base EXPORT [set DIR...]  the export's base (its read-only branches); set gives it\n" \
	"                 a new one, kept over restarts, which each client of an export with\n" \
	"                 upper= gets at its next mount\n" \
	"  conflicts CLIENT [--json]  the client's own files that hide a base file changed\n" \
	"                 between its old base and its new one (exports with upper=...)\n" \
	"  take-base CLIENT PATH...  drop the client's own copy (or deletion) of each PATH, so\n" \
	"                 the base's version shows from its next mount\n" \
	"  help           this list\n"
#define CONTROL_TIMEOUT 10.0          /* seconds a connection may take to send and read */
/*
 * A long command (check) sends, before its reply, a line "progress: WHAT: DONE/TOTAL
 * records" every CONTROL_PROGRESS_EVERY seconds in which it moved on; unionnfsd-ctl shows
 * them on a terminal and takes each as a sign of life.
 */
#define CONTROL_PROGRESS_PREFIX "progress: "
#define CONTROL_PROGRESS_EVERY 0.25
/* The totals line of check's reply (its first three numbers), which unionnfsd-ctl reads. */
#define CONTROL_CHECK_TOTALS "%llu stale, %llu dropped, %llu errors"
#define CONTROL_MAX_CONNS 16          /* control socket connections open at once */
/*
 * --metrics connections have a budget of their own, so scrapes (or a crowd holding HTTP
 * connections open) never lock out the control socket; a scrape sends its request at
 * once, so an HTTP connection gets only a short while, and a new one past the budget
 * closes the oldest still waiting for its request.
 */
#define CONTROL_HTTP_MAX_CONNS 16
#define CONTROL_HTTP_TIMEOUT 2.0

struct ev_loop;
struct config;
struct nfs_server;
struct views;
struct control;
struct locks_table;

struct control_env {
	const struct config *ce_cfg;      /* exports, branches, state directory */
	struct nfs_server *ce_nfs;        /* the MOUNT list, the exports' unions and options */
	struct views *ce_views;           /* per-client views (upper=); NULL: none */
	struct locks_table *ce_locks;     /* the NLM lock table (nlm_service_locks); NULL: no NLM */
	/* GRANTED callbacks queued or retried (nlm_service_callbacks_pending); NULL: no NLM */
	uint64_t (*ce_lock_callbacks)(void *arg);
	void *ce_lock_callbacks_arg;
	void (*ce_reload)(void *arg);     /* what SIGHUP does; runs on the loop */
	void *ce_reload_arg;
};

/*
 * Creates STATE_DIR/control.sock (replacing a stale one: the state directory's lock is
 * already ours, so no other server uses it) and serves it on loop. Returns 0, or -1 with
 * a message naming the cause and the fix in err.
 */
int control_open(struct ev_loop *loop, const struct control_env *env, struct control **out,
		 char *err, size_t errlen);
/*
 * Also serves the statistics as Prometheus text over HTTP on addrport ("ADDR:PORT",
 * "[ADDR6]:PORT"): GET /metrics, one request per connection. Returns 0, or -1 with the
 * cause and fix in err.
 */
int control_metrics_open(struct control *ctl, const char *addrport, char *err, size_t errlen);
/* Closes every control connection and removes the socket. NULL is fine. */
void control_close(struct control *ctl);

/*
 * The reply to one request line (without its newline), malloc()ed and NUL-terminated,
 * NULL when out of memory. Exposed for tests; the socket code calls it.
 */
char *control_answer(struct control *ctl, const char *line);

#endif
