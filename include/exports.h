/*
 * Client rules of an export, exports(5) style: who may use it and with which options.
 * A rule names its clients as "*", a numeric IPv4 or IPv6 address, a CIDR network
 * (v4 or v6) or a host name. Parsing never blocks: host names are resolved in a separate
 * step (exports_rule_resolve) once the configuration is (re)loaded, never per request.
 * The first rule that admits a peer wins.
 *
 * Every address is kept as an IPv6 address (IPv4 as ::ffff:a.b.c.d with the prefix
 * length plus 96), so an IPv4 peer and an IPv4-mapped IPv6 peer match the same rules.
 * Matching is a pure function of the rule table and the peer address.
 */
#ifndef UNFS_EXPORTS_H
#define UNFS_EXPORTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EXPORTS_SPEC_MAX 255     /* longest client specifier (a DNS name) */
#define EXPORTS_ANON_ID 65534    /* anonuid and anongid unless a rule names others */

enum squash_mode { SQUASH_ROOT = 0, SQUASH_NONE, SQUASH_ALL };

/* exports(5) words that apply to one rule (or one export). */
struct export_opts {
	bool eo_ro;              /* "ro"; default rw */
	enum squash_mode eo_squash;
	uint32_t eo_anonuid;     /* default EXPORTS_ANON_ID */
	uint32_t eo_anongid;     /* default EXPORTS_ANON_ID */
	bool eo_secure;          /* default true: client source port must be < 1024 */
	bool eo_async;           /* "async": namespace changes answered before they are on disk */
};

/* The defaults: rw, root_squash, anonuid/anongid EXPORTS_ANON_ID, secure, sync. */
void exports_default_opts(struct export_opts *opts);

/*
 * Applies comma-separated exports(5) words to opts (ro, rw, root_squash, no_root_squash,
 * all_squash, anonuid=N, anongid=N, secure, insecure, sync, async). Returns 0, or -1
 * naming the bad word in err, opts unchanged.
 */
int exports_parse_opts(struct export_opts *opts, const char *words, char *err, size_t errlen);

enum exports_kind { EXPORTS_ANY = 0, EXPORTS_NET, EXPORTS_HOST };

/* One address block: the first xn_prefix bits of xn_addr. */
struct exports_net {
	struct in6_addr xn_addr;
	unsigned xn_prefix;      /* 0..128 */
};

struct export_rule {
	char *er_spec;           /* the specifier as written, e.g. "10.0.0.0/8" */
	enum exports_kind er_kind;
	struct exports_net *er_nets;  /* NET: one; HOST: every resolved address */
	int er_nnets;
	struct export_opts er_opts;
	char *er_where;          /* where it was written, to prefix messages; NULL: nowhere */
};

/*
 * Parses the specifier of one rule (without options). Numeric forms are complete;
 * a host name gets kind EXPORTS_HOST and no addresses until exports_rule_resolve().
 * Returns 0, or -1 with a message naming the specifier and the fix in err.
 */
int exports_parse_spec(const char *spec, struct export_rule *out, char *err, size_t errlen);

/*
 * Resolves an EXPORTS_HOST rule's name to all its addresses (getaddrinfo; may block on
 * DNS). Other kinds return 0 at once. Returns 0, or -1 with a message in err, prefixed
 * with er_where when set.
 */
int exports_rule_resolve(struct export_rule *r, char *err, size_t errlen);

/* The peer address as an IPv6 address (IPv4 mapped). False for other families. */
bool exports_peer_addr(const struct sockaddr *sa, struct in6_addr *out);

/* Index of the first rule admitting the peer, or -1 when none does. */
int exports_match(const struct export_rule *rules, int nrules, const struct sockaddr *peer);

/* The resolved addresses of a rule as text ("10.0.0.1, ::1"), for the log. */
void exports_rule_addrs(const struct export_rule *r, char *buf, size_t len);

void exports_rule_free(struct export_rule *r);
void exports_rules_free(struct export_rule *rules, int nrules);

#endif
