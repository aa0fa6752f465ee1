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

#define CONFIG_MAX_BRANCHES 128
#define CONFIG_ERRLEN 512

enum squash_mode { SQUASH_ROOT = 0, SQUASH_NONE, SQUASH_ALL };

/* exports(5) words that apply to one export. */
struct export_opts {
	bool eo_ro;              /* "ro"; default rw */
	enum squash_mode eo_squash;
	uint32_t eo_anonuid;     /* default 65534 */
	uint32_t eo_anongid;     /* default 65534 */
	bool eo_secure;          /* default true: client source port must be < 1024 */
	bool eo_async;           /* "async": namespace changes answered before they are on disk */
};

struct export_rule;          /* exports.h */
struct hostmap;              /* hostmap.h */

struct export_conf {
	char *ec_name;           /* mount path as clients name it, e.g. "/union" */
	char **ec_branches;      /* absolute paths, top-down: [0] is the writable upper */
	int ec_nbranches;
	/*
	 * The options of the one-rule forms ("-e ... -o OPTS", "export NAME BRANCHES OPTS");
	 * the union layer takes eo_ro from here at open. The rule form leaves the defaults.
	 */
	struct export_opts ec_opts;
	/*
	 * Client rules, first match wins. A parsed config always has at least one ("*" with
	 * ec_opts for the one-rule forms); an export built by hand with none admits every
	 * client with ec_opts. Host names are already resolved.
	 */
	struct export_rule *ec_rules;
	int ec_nrules;
	/*
	 * The export option "upper=TEMPLATE": NULL, or an absolute path with %a (the client's
	 * address) or %h (its host name) that names each client's own writable upper branch. Then every branch of
	 * ec_branches is a read-only lower, the export itself is opened read-only (ec_opts.eo_ro)
	 * and each client is served its own view: its upper over these lowers (nfs/views.c).
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
	char *cf_state_dir;      /* default /var/lib/unionnfsd */
	enum portmap_mode cf_portmap;
	int cf_workers;          /* file system worker threads, default 32 */
	uint32_t cf_max_record;  /* largest accepted RPC record, default 1 MiB + 4 KiB */
	unsigned cf_max_conns;   /* open TCP connections, default 1024 */
	unsigned cf_max_conns_per_host; /* open TCP connections of one client address, default 128 */
	unsigned cf_max_views_per_rule; /* open client views (upper=) per client rule, default 1024 */
	unsigned cf_idle_timeout;     /* seconds before an idle connection closes, 0: never; default 300 */
	unsigned cf_max_requests;     /* calls in flight per TCP connection, default 64 */
	uint64_t cf_max_buffered;     /* buffered bytes across all connections, default 256 MiB */
	struct export_conf *cf_exports;
	int cf_nexports;
	struct hostmap *cf_hosts;     /* --hosts FILE, names for upper=...%h; NULL: none */
};

/* Sets every default. */
void config_init(struct config *cf);

/*
 * Parses argv (including any -c FILE, read at the point it appears) into cf, which must
 * have been config_init()ed. Returns 0, or -1 with a one-line message in err.
 * On "--help" returns 1 with the usage text in err.
 */
int config_parse_args(struct config *cf, int argc, char **argv, char *err, size_t errlen);

/* Reads a config file into cf. Returns 0, or -1 with "FILE:LINE: message" in err. */
int config_parse_file(struct config *cf, const char *path, char *err, size_t errlen);

/* Applies comma-separated exports(5) words to opts. Returns 0, or -1 naming the bad word. */
int config_parse_export_opts(struct export_opts *opts, const char *words, char *err, size_t errlen);

/*
 * Appends the client rule "CLIENT(OPTS)" to export ec ("CLIENT()" takes the defaults:
 * rw, root_squash, anonuid/anongid 65534, secure), resolving a host name at once.
 * Returns 0, or -1 naming the bad word and the fix in err.
 */
int config_add_rule(struct export_conf *ec, const char *word, char *err, size_t errlen);

/*
 * Checks an upper= template: absolute, naming the client by %a (address) or by %h (host
 * name), not both, %% for a '%', nothing else after a '%'. Returns 0, or -1 naming the
 * fault and the fix in err.
 */
int config_upper_check(const char *tmpl, char *err, size_t errlen);

/* Whether a checked template names clients by host name (%h) rather than address (%a). */
bool config_upper_by_name(const char *tmpl);

/*
 * Expands a checked template for the client named client (its address as text for %a,
 * its host name for %h) into out. Returns 0, or -1 if it does not fit outlen bytes.
 */
int config_upper_expand(const char *tmpl, const char *client, char *out, size_t outlen);

/* Checks the whole config (at least one export, no duplicate names, ...). */
int config_validate(const struct config *cf, char *err, size_t errlen);

void config_free(struct config *cf);

#endif
