/*
 * Configuration: the command line and the optional config file (-c) folded into one
 * struct that is read-only once the server runs. Every error names its origin:
 * "FILE:LINE: message" for the file, "option --x: message" for flags.
 */
#ifndef UNFS_CONFIG_H
#define UNFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exports.h"
#include "net.h"
#include "union.h"

#define CONFIG_ERRLEN 512

struct hostmap;              /* hostmap.h */

struct export_conf {
	char *ec_name;           /* mount path as clients name it, e.g. "/union" */
	char **ec_branches;      /* absolute paths, top-down */
	/*
	 * Each branch's role: its word (=rw, =ro, =rr), else the default: [0] writable, the
	 * rest read-only (under upper=, all read-only: the client's upper is the writable one).
	 * Writable branches come first.
	 */
	enum union_role *ec_roles;
	bool ec_top_role_given;  /* branch [0] had a word */
	int ec_nbranches;
	struct union_policy ec_policy; /* create= and statfs= */
	/*
	 * The options of the one-rule forms ("-e ... -o OPTS", "export NAME BRANCHES OPTS");
	 * the union layer takes eo_ro from here at open. The rule form leaves the defaults.
	 */
	struct export_opts ec_opts;
	/*
	 * Client rules, first match wins. A parsed config always has at least one ("*" with
	 * ec_opts for the one-rule forms); an export built by hand with none admits every
	 * client with ec_opts. Host names are resolved by config_resolve(), not by parsing.
	 */
	struct export_rule *ec_rules;
	int ec_nrules;
	/*
	 * The export option "upper=TEMPLATE": NULL, or an absolute path with %a (the client's
	 * address) or %h (its host name) that names each client's own writable upper branch. Then every branch of
	 * ec_branches is a read-only lower, the export itself is opened read-only (ec_opts.eo_ro)
	 * and each client is served its own view: its upper over these lowers (src/views/).
	 */
	char *ec_upper;
};

enum portmap_mode { PORTMAP_AUTO = 0, PORTMAP_RPCBIND, PORTMAP_BUILTIN, PORTMAP_OFF };

struct config {
	bool cf_foreground;      /* -f */
	bool cf_udp;             /* --udp: also listen on UDP; default TCP only */
	char *cf_listen;         /* NULL: all addresses */
	char *cf_metrics;        /* --metrics ADDR:PORT of the Prometheus endpoint; NULL: none */
	int cf_port;             /* NFS port, default 2049; 0 picks a free one */
	int cf_mount_port;       /* default 20048; 0 picks a free one */
	int cf_portmap_port;     /* built-in portmapper port, default 111 */
	int cf_nlm_port;         /* NLM and NSM (locking), TCP and UDP; 0 picks a free one;
				    CONFIG_NLM_OFF: no locking served */
	unsigned cf_grace;       /* seconds of lock reclaim after a restart, 0: none; default 90 */
	unsigned cf_nlm_retry_ms; /* GRANTED callback interval, default CONFIG_DEFAULT_NLM_RETRY_MS */
	char *cf_state_dir;      /* default /var/lib/unionnfsd */
	enum portmap_mode cf_portmap;
	int cf_workers;          /* file system worker threads, default NET_DEFAULT_WORKERS */
	uint32_t cf_max_record;  /* largest accepted RPC record, default NET_DEFAULT_MAX_RECORD */
	unsigned cf_max_conns;   /* open TCP connections, default 1024 */
	unsigned cf_max_conns_per_host; /* open TCP connections of one client address, default 128 */
	unsigned cf_max_views_per_rule; /* open client views (upper=) per client rule, default 1024 */
	unsigned cf_busy_poll_us;     /* microseconds the loop polls after a call; 0: never */
	unsigned cf_check_pace_us;    /* pause of a check thread after each record; 0: none */
	unsigned cf_idle_timeout;     /* seconds before an idle connection closes, 0: never; default 300 */
	unsigned cf_max_requests;     /* calls in flight per TCP connection, default 64 */
	uint64_t cf_max_buffered;     /* buffered bytes across all connections, default 256 MiB */
	struct export_conf *cf_exports;
	int cf_nexports;
	char *cf_hosts_file;          /* --hosts FILE, names for upper=...%h; NULL: none */
	char *cf_hosts_where;         /* where --hosts was given, to prefix messages about FILE */
	struct hostmap *cf_hosts;     /* cf_hosts_file as read by config_resolve(); NULL: none */
};

/*
 * The settings of the command line (--NAME VALUE) and the config file (NAME VALUE), one
 * row each: X(id, name, kind, field, default, min, max, apply, hint)
 *   kind    how the value is written: UINT (decimal in min..max), ADDR (numeric IP
 *           address), PATH (absolute), PORTMAP (a mode), METRICS (ADDR:PORT), SWITCH (file
 *           only: NAME, NAME yes, NAME no; the command line has its own flags -f, --udp),
 *           PORTOFF (a port in min..max, or "off": CONFIG_NLM_OFF)
 *   apply   RELOAD: a SIGHUP takes it up; RESTART: only a restart does
 *   hint    UINT: why the bounds are what they are; PATH: an example; else NULL
 * The "unknown option" message lists the names in this order.
 */
#define CONFIG_SETTINGS(X) \
	X(LISTEN, "listen", ADDR, cf_listen, NULL, 0, 0, RESTART, NULL) \
	X(PORT, "port", UINT, cf_port, 2049, 0, 65535, RESTART, NULL) \
	X(MOUNT_PORT, "mount-port", UINT, cf_mount_port, 20048, 0, 65535, RESTART, NULL) \
	X(PORTMAP_PORT, "portmap-port", UINT, cf_portmap_port, 111, 0, 65535, RESTART, NULL) \
	X(NLM_PORT, "nlm-port", PORTOFF, cf_nlm_port, 0, 0, 65535, RESTART, NULL) \
	X(GRACE, "grace", UINT, cf_grace, CONFIG_DEFAULT_GRACE, 0, 3600, RESTART, \
	  "an hour is far longer than any client needs to reclaim its locks") \
	X(NLM_RETRY, "nlm-retry", UINT, cf_nlm_retry_ms, CONFIG_DEFAULT_NLM_RETRY_MS, 100, \
	  CONFIG_NLM_RETRY_TOTAL_MS, RESTART, \
	  "a grant is called back for a minute: 2 to 601 tries") \
	X(STATE, "state", PATH, cf_state_dir, "/var/lib/unionnfsd", 0, 0, RESTART, \
	  "the full path, e.g. /var/lib/unionnfsd") \
	X(PORTMAP, "portmap", PORTMAP, cf_portmap, PORTMAP_AUTO, 0, 0, RESTART, NULL) \
	X(WORKERS, "workers", UINT, cf_workers, NET_DEFAULT_WORKERS, 1, 256, RESTART, NULL) \
	X(MAX_RECORD, "max-record", UINT, cf_max_record, NET_DEFAULT_MAX_RECORD, \
	  NET_DEFAULT_MAX_RECORD, 64 * 1024 * 1024, RESTART, \
	  "smaller records could not carry the 1 MiB writes the server offers") \
	X(MAX_CONNS, "max-connections", UINT, cf_max_conns, NET_DEFAULT_MAX_CONNS, 1, 1000000, \
	  RESTART, NULL) \
	X(MAX_CONNS_PER_HOST, "max-connections-per-host", UINT, cf_max_conns_per_host, \
	  CONFIG_DEFAULT_MAX_CONNS_PER_HOST, 1, 1000000, RESTART, NULL) \
	X(IDLE_TIMEOUT, "idle-timeout", UINT, cf_idle_timeout, 300, 0, 604800, RESTART, NULL) \
	X(MAX_REQUESTS, "max-requests-per-connection", UINT, cf_max_requests, \
	  NET_DEFAULT_MAX_REQUESTS, 1, 4096, RESTART, NULL) \
	X(MAX_BUFFERED, "max-buffered", UINT, cf_max_buffered, NET_DEFAULT_MAX_BUFFERED, \
	  4ull << 20, 1ull << 40, RESTART, NULL) \
	X(MAX_VIEWS_PER_RULE, "max-views-per-rule", UINT, cf_max_views_per_rule, \
	  CONFIG_DEFAULT_MAX_VIEWS_PER_RULE, 1, 65535, RESTART, NULL) \
	X(METRICS, "metrics", METRICS, cf_metrics, NULL, 0, 0, RESTART, NULL) \
	X(HOSTS, "hosts", PATH, cf_hosts_file, NULL, 0, 0, RELOAD, \
	  "the full path of the host name map, e.g. /etc/unionnfsd/hosts") \
	X(FOREGROUND, "foreground", SWITCH, cf_foreground, false, 0, 1, RESTART, NULL) \
	X(UDP, "udp", SWITCH, cf_udp, false, 0, 1, RESTART, NULL) \
	X(BUSY_POLL, "busy-poll", UINT, cf_busy_poll_us, NET_DEFAULT_BUSY_POLL_US, 0, 1000, \
	  RESTART, "longer than a millisecond spends a core on clients that are not calling") \
	X(CHECK_PACE, "check-pace", UINT, cf_check_pace_us, 0, 0, 1000000, RESTART, \
	  "a second per record makes a check of a large map last weeks")

/* nlm-port off: no lock manager (NLM) or status monitor (NSM) is served. */
#define CONFIG_NLM_OFF (-1)
/* Clients retry a lock refused for grace every few seconds: 90 s as knfsd and ganesha. */
#define CONFIG_DEFAULT_GRACE 90
/*
 * A client whose blocked lock was granted is called back (GRANTED_MSG) every nlm-retry ms
 * for CONFIG_NLM_RETRY_TOTAL_MS, then the grant is taken back: a client that missed one
 * call gets another soon, one that is gone holds the lock no longer than a minute.
 */
#define CONFIG_DEFAULT_NLM_RETRY_MS 5000
#define CONFIG_NLM_RETRY_TOTAL_MS 60000

/* A kernel client needs one or two connections (nconnect: up to 16); a NAT gateway more. */
#define CONFIG_DEFAULT_MAX_CONNS_PER_HOST 128
/* Room for a few /24 rooms of netboot clients per rule; each open view holds descriptors. */
#define CONFIG_DEFAULT_MAX_VIEWS_PER_RULE 1024

enum config_setting {
#define CONFIG_X_ENUM(id, ...) CONFIG_##id,
	CONFIG_SETTINGS(CONFIG_X_ENUM)
#undef CONFIG_X_ENUM
	CONFIG_NSETTINGS
};

enum config_apply { CONFIG_RESTART = 0, CONFIG_RELOAD };

/* The name of setting s as the config file spells it ("max-record"). */
const char *config_setting_name(enum config_setting s);

/* Whether a reload (SIGHUP) applies a change of setting s, or only a restart does. */
enum config_apply config_setting_apply(enum config_setting s);

/* The bounds of a UINT setting; false for settings of other kinds. */
bool config_setting_bounds(enum config_setting s, uint64_t *min, uint64_t *max);

/*
 * The settings that differ between a and b: bit (1 << s) for every setting s. Exports and
 * client rules are not settings (a reload compares them export by export:
 * config_diff_export).
 */
uint64_t config_diff(const struct config *a, const struct config *b);

/* What a reload cannot apply to an export: only a restart does (config_diff_export). */
enum config_export_change {
	CONFIG_EXPORT_NEW = 1 << 0,      /* in the new config only: not served until then */
	CONFIG_EXPORT_GONE = 1 << 1,     /* in the running one only: served with its old rules */
	CONFIG_EXPORT_BRANCHES = 1 << 2, /* another branch stack: served as before, old rules */
	CONFIG_EXPORT_UPPER = 1 << 3,    /* another upper=: clients keep their layers */
	CONFIG_EXPORT_WRITABLE = 1 << 4, /* served read-only, no longer 'ro': stays read-only */
	CONFIG_EXPORT_POLICY = 1 << 5,   /* another create= or statfs=: applied at once */
};

/*
 * The changes of export name from the running config live to next (a reload's) that only a
 * restart applies: CONFIG_EXPORT_* bits, 0 when its client rules and options are all that
 * changed. GONE comes alone, BRANCHES with UPPER at most; UPPER and WRITABLE may come
 * together. opened_ro:
 * the export is served read-only now. Before nfs_server_swap_rules: next's options are
 * compared, and the swap hands next the old ones.
 */
unsigned config_diff_export(const struct config *live, const struct config *next,
			    const char *name, bool opened_ro);


/* Sets every default. */
void config_init(struct config *cf);

/*
 * Parsing (config_parse_args, config_parse_file) reads the config text and nothing else:
 * no DNS, no other file (so it is quick enough for the event loop). config_resolve() then
 * does what may block: resolves the host names of client rules and reads the --hosts map.
 */

/*
 * Parses argv (including any -c FILE, read at the point it appears) into cf, which must
 * have been config_init()ed. Returns 0, or -1 with a one-line message in err.
 * On "--help" returns 1 with the usage text in err, cut to errlen: config_usage_text() is
 * the whole of it.
 */
int config_parse_args(struct config *cf, int argc, char **argv, char *err, size_t errlen);

/* The text --help prints: the usage line and every option. */
const char *config_usage_text(void);

/* Reads a config file into cf. Returns 0, or -1 with "FILE:LINE: message" in err. */
int config_parse_file(struct config *cf, const char *path, char *err, size_t errlen);

/*
 * Appends the client rule "CLIENT(OPTS)" to export ec ("CLIENT()" takes the defaults:
 * rw, root_squash, anonuid/anongid 65534, secure); a host name stays unresolved until
 * config_resolve(). where (may be NULL) says where the rule was written, e.g.
 * "FILE:LINE: export /u: ", for the messages of that step.
 * Returns 0, or -1 naming the bad word and the fix in err.
 */
int config_add_rule(struct export_conf *ec, const char *word, const char *where, char *err,
		    size_t errlen);

/* Checks the whole config (at least one export, no duplicate names, ...). */
int config_validate(const struct config *cf, char *err, size_t errlen);

/*
 * The step after parsing that may block (DNS, reading the --hosts file): resolves every
 * host name rule and loads cf_hosts. Returns 0, or -1 with a message naming where the
 * failing rule or setting was written (as parsing does) and the fix.
 */
int config_resolve(struct config *cf, char *err, size_t errlen);

/* Index of the export named name, or -1. */
int config_find_export(const struct config *cf, const char *name);

/* Whether two exports stack the same branches in the same order, in the same roles. */
bool config_same_branches(const struct export_conf *a, const struct export_conf *b);

/*
 * A reload's moves between the running config (live) and the new one (next):
 * config_reserve_exports makes room for cap exports in cf at once, so an export taken in
 * later never moves the ones that calls read (0, or -ENOMEM); config_take_export appends
 * next's export j to live, within that room, leaving j empty in next (config_find_export
 * passes it over); config_swap_branches exchanges two exports' branch stacks and roles.
 */
int config_reserve_exports(struct config *cf, int cap);
void config_take_export(struct config *live, struct config *next, int j);
void config_swap_branches(struct export_conf *a, struct export_conf *b);

/*
 * An export's base: its branches below the writable ones (all of them under upper=).
 * config_writable_count: how many branches from the top are writable. config_base_text:
 * the base's paths joined by '\n' (malloc()ed; NULL: no memory). config_set_base: makes
 * the '\n'-joined absolute paths of text the export's base, read-only (0, -EINVAL, or
 * -ENOMEM; ec unchanged on failure).
 */
int config_writable_count(const struct export_conf *ec);
/* Branch i's role: its word, else the default ([0] writable unless upper=, the rest not). */
enum union_role config_branch_role(const struct export_conf *ec, int i);
char *config_base_text(const struct export_conf *ec);
int config_set_base(struct export_conf *ec, const char *text);

void config_free(struct config *cf);

#endif
