/*
 * Configuration: flags and config file lines go through the same setters, so a
 * directive in the file and the flag of the same name behave identically and give the
 * same message; only the prefix differs ("option --port: " versus "FILE:LINE: ").
 * Settings apply in the order they are read, so a later one wins; exports accumulate.
 */
#include "config.h"
#include "exports.h"
#include "hostmap.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_DEFAULT_STATE "/var/lib/unionnfsd"
#define CONFIG_DEFAULT_PORT 2049
#define CONFIG_DEFAULT_MOUNT_PORT 20048
#define CONFIG_DEFAULT_PORTMAP_PORT 111
#define CONFIG_DEFAULT_WORKERS 32
#define CONFIG_DEFAULT_MAX_RECORD (1024 * 1024 + 4096)
/* FSINFO advertises 1 MiB reads and writes on TCP: a WRITE of that size plus its headers must fit. */
#define CONFIG_MIN_MAX_RECORD CONFIG_DEFAULT_MAX_RECORD
#define CONFIG_MAX_MAX_RECORD (64 * 1024 * 1024)
#define CONFIG_MAX_WORKERS 256
#define CONFIG_DEFAULT_MAX_CONNS 1024
#define CONFIG_MAX_MAX_CONNS 1000000
/* A kernel client needs one or two connections (nconnect: up to 16); a NAT gateway more. */
#define CONFIG_DEFAULT_MAX_CONNS_PER_HOST 128
/* Room for a few /24 rooms of netboot clients per rule; each open view holds descriptors. */
#define CONFIG_DEFAULT_MAX_VIEWS_PER_RULE 1024
#define CONFIG_MAX_MAX_VIEWS_PER_RULE 65535
#define CONFIG_DEFAULT_IDLE_TIMEOUT 300
#define CONFIG_MAX_IDLE_TIMEOUT 604800           /* a week */
#define CONFIG_DEFAULT_MAX_REQUESTS 64
#define CONFIG_MAX_MAX_REQUESTS 4096
#define CONFIG_DEFAULT_MAX_BUFFERED (256ull << 20)
#define CONFIG_MIN_MAX_BUFFERED (4ull << 20)
#define CONFIG_MAX_MAX_BUFFERED (1ull << 40)
#define CONFIG_NAME_MAX 400      /* the inode map keys exports by name (store.c); MOUNT allows 1024 */
#define CONFIG_ANON_ID 65534

#define EXPORT_OPTS_EXPECTED \
	"expected ro, rw, root_squash, no_root_squash, all_squash, anonuid=N, anongid=N, " \
	"secure, insecure, sync, async, upper=TEMPLATE"

static const char config_usage[] =
	"usage: unionnfsd [-f] [-c FILE] [--listen ADDR] [--port N] [--mount-port N] [--state DIR]\n"
	"                 [--portmap auto|rpcbind|builtin|off] [-e NAME=BRANCH[:BRANCH...]\n"
	"                 [-o OPTS | --client CLIENT(OPTS)...]]...\n"
	"                 [--workers N] [--max-record BYTES] [--portmap-port N] [--help]\n"
	"                 [--max-connections N] [--max-connections-per-host N]\n"
	"                 [--idle-timeout SECONDS]\n"
	"                 [--max-requests-per-connection N] [--max-buffered BYTES]\n"
	"                 [--max-views-per-rule N]\n"
	"                 [--metrics ADDR:PORT] [--hosts FILE] [--udp]\n"
	"\n"
	"  -f                  stay in the foreground and log to stderr (default: daemon, syslog)\n"
	"  -c FILE             read settings from FILE at this point; later settings win\n"
	"  -e NAME=BRANCHES    export the ':'-separated absolute BRANCHES, top first (the first\n"
	"                      is the writable upper), under the mount path NAME, e.g.\n"
	"                      -e /union=/srv/upper:/srv/base\n"
	"  -o OPTS             exports(5) options for the preceding -e, comma-separated:\n"
	"                      rw (default) | ro, root_squash (default) | no_root_squash |\n"
	"                      all_squash, anonuid=N, anongid=N, secure (default) | insecure,\n"
	"                      sync (default) | async (namespace changes answered before\n"
	"                      they are on disk), upper=/srv/clients/%a (every client gets\n"
	"                      its own writable upper there; all BRANCHES become read-only\n"
	"                      lowers; %h instead of %a names it by the client's host\n"
	"                      name, from --hosts or confirmed reverse DNS); the export is\n"
	"                      then open to every client:\n"
	"                      the rule *(OPTS)\n"
	"  --client CLIENT(OPTS)  instead of -o: a client rule for the preceding -e; repeat it,\n"
	"                      the first matching rule wins. CLIENT is *, an IPv4 or IPv6\n"
	"                      address, a CIDR network (10.0.0.0/8, fd00::/8) or a host name\n"
	"                      (resolved at start and on SIGHUP); CLIENT() takes the defaults\n"
	"  --listen ADDR       numeric IPv4 or IPv6 address to listen on (default: all)\n"
	"  --port N            NFS port (default 2049; 0 picks a free port)\n"
	"  --mount-port N      MOUNT port (default 20048; 0 picks a free port)\n"
	"  --udp               serve NFS, MOUNT and the built-in portmapper over UDP too\n"
	"                      (default: TCP only)\n"
	"  --state DIR         state directory holding the inode map (default /var/lib/unionnfsd)\n"
	"  --portmap MODE      auto (default): rpcbind if it runs, else built-in, else warn;\n"
	"                      rpcbind | builtin | off\n"
	"  --portmap-port N    port of the built-in portmapper (default 111)\n"
	"  --workers N         file system worker threads (default 32)\n"
	"  --max-record BYTES  largest RPC record accepted (default 1052672)\n"
	"  --max-connections N open TCP connections; past it a new connection closes the\n"
	"                      one idle longest, or is closed if none is idle (default 1024)\n"
	"  --max-connections-per-host N  the same for the connections of one client\n"
	"                      address (default 128)\n"
	"  --idle-timeout SECONDS  close a TCP connection without a call received or a reply\n"
	"                      sent, and with no call being served, for this long; 0 never\n"
	"                      (default 300)\n"
	"  --max-requests-per-connection N  calls served at once per TCP connection; reading\n"
	"                      pauses beyond it (default 64)\n"
	"  --max-buffered BYTES  request and reply bytes held for all clients together;\n"
	"                      beyond it only clients holding nothing are read (default 268435456)\n"
	"  --max-views-per-rule N  client views (upper=) open for the clients of one client\n"
	"                      rule; past it the view idle longest of a client without a\n"
	"                      mount is closed, else MNT fails (default 1024)\n"
	"  --metrics ADDR:PORT serve the statistics as Prometheus text on http://ADDR:PORT/metrics\n"
	"                      (numeric address, IPv6 in brackets; e.g. 127.0.0.1:9249; default off)\n"
	"  --hosts FILE        client host names for upper=...%h: lines of ADDRESS NAME, as in\n"
	"                      /etc/hosts (re-read on SIGHUP); addresses it lacks are named by\n"
	"                      reverse DNS confirmed forward\n"
	"  -h, --help          show this text\n";

void config_init(struct config *cf)
{
	memset(cf, 0, sizeof(*cf));
	cf->cf_foreground = false;
	/* UDP is opt-in, as in current nfs-utils: its replies go wherever a datagram claims. */
	cf->cf_udp = false;
	cf->cf_listen = NULL;
	cf->cf_port = CONFIG_DEFAULT_PORT;
	cf->cf_mount_port = CONFIG_DEFAULT_MOUNT_PORT;
	cf->cf_portmap_port = CONFIG_DEFAULT_PORTMAP_PORT;
	/* NULL here is reported by config_validate: config_init has no way to fail. */
	cf->cf_state_dir = strdup(CONFIG_DEFAULT_STATE);
	cf->cf_portmap = PORTMAP_AUTO;
	cf->cf_workers = CONFIG_DEFAULT_WORKERS;
	cf->cf_max_record = CONFIG_DEFAULT_MAX_RECORD;
	cf->cf_max_conns = CONFIG_DEFAULT_MAX_CONNS;
	cf->cf_max_conns_per_host = CONFIG_DEFAULT_MAX_CONNS_PER_HOST;
	cf->cf_max_views_per_rule = CONFIG_DEFAULT_MAX_VIEWS_PER_RULE;
	cf->cf_idle_timeout = CONFIG_DEFAULT_IDLE_TIMEOUT;
	cf->cf_max_requests = CONFIG_DEFAULT_MAX_REQUESTS;
	cf->cf_max_buffered = CONFIG_DEFAULT_MAX_BUFFERED;
	cf->cf_exports = NULL;
	cf->cf_nexports = 0;
}

static void config_export_free(struct export_conf *ec)
{
	int i;

	free(ec->ec_name);
	for (i = 0; i < ec->ec_nbranches; i++)
		free(ec->ec_branches[i]);
	free(ec->ec_branches);
	exports_rules_free(ec->ec_rules, ec->ec_nrules);
	free(ec->ec_upper);
	memset(ec, 0, sizeof(*ec));
}

void config_free(struct config *cf)
{
	int i;

	for (i = 0; i < cf->cf_nexports; i++)
		config_export_free(&cf->cf_exports[i]);
	free(cf->cf_exports);
	free(cf->cf_listen);
	free(cf->cf_metrics);
	free(cf->cf_state_dir);
	hostmap_free(cf->cf_hosts);
	memset(cf, 0, sizeof(*cf));
}

/* Puts prefix in front of the message already in err (truncating the tail if needed). */
static void config_err_prefix(char *err, size_t errlen, const char *prefix)
{
	size_t plen, mlen;

	if (!err || errlen == 0)
		return;
	plen = strlen(prefix);
	if (plen >= errlen - 1) {
		snprintf(err, errlen, "%s", prefix);
		return;
	}
	mlen = strnlen(err, errlen - 1);
	if (plen + mlen > errlen - 1)
		mlen = errlen - 1 - plen;
	memmove(err + plen, err, mlen);
	memcpy(err, prefix, plen);
	err[plen + mlen] = '\0';
}

/* Decimal only: no sign, no spaces, no 0x, so "-1" and " 5" are rejected, not wrapped. */
static int config_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

static int config_parse_range(const char *value, uint64_t min, uint64_t max, uint64_t *out,
			      char *err, size_t errlen)
{
	if (config_parse_uint(value, max, out) < 0 || *out < min) {
		err_set(err, errlen, "'%s' is not a number in %llu..%llu", value,
			   (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	return 0;
}

static int config_set_string(char **field, const char *value, char *err, size_t errlen)
{
	char *copy = strdup(value);

	if (!copy) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	free(*field);
	*field = copy;
	return 0;
}

int config_parse_export_opts(struct export_opts *opts, const char *words, char *err,
			     size_t errlen)
{
	struct export_opts o = *opts;
	const char *p = words, *end;
	char word[64];
	size_t len;
	uint64_t id;
	int rc = -1;

	if (!words || !*words) {
		err_set(err, errlen, "no export options given (" EXPORT_OPTS_EXPECTED ")");
		goto out;
	}
	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0) {
			err_set(err, errlen, "empty export option in '%s' (" EXPORT_OPTS_EXPECTED ")",
				   words);
			goto out;
		}
		if (len >= sizeof(word)) {
			err_set(err, errlen, "unknown export option '%.*s' (" EXPORT_OPTS_EXPECTED ")",
				   (int)len, p);
			goto out;
		}
		memcpy(word, p, len);
		word[len] = '\0';
		if (!strcmp(word, "rw")) {
			o.eo_ro = false;
		} else if (!strcmp(word, "ro")) {
			o.eo_ro = true;
		} else if (!strcmp(word, "root_squash")) {
			o.eo_squash = SQUASH_ROOT;
		} else if (!strcmp(word, "no_root_squash")) {
			o.eo_squash = SQUASH_NONE;
		} else if (!strcmp(word, "all_squash")) {
			o.eo_squash = SQUASH_ALL;
		} else if (!strcmp(word, "secure")) {
			o.eo_secure = true;
		} else if (!strcmp(word, "insecure")) {
			o.eo_secure = false;
		} else if (!strcmp(word, "sync")) {
			o.eo_async = false;
		} else if (!strcmp(word, "async")) {
			o.eo_async = true;
		} else if (!strncmp(word, "anonuid=", 8) || !strncmp(word, "anongid=", 8)) {
			/* (uint32_t)-1 means "no id" to the kernel, so it cannot be an identity. */
			if (config_parse_uint(word + 8, UINT32_MAX - 1, &id) < 0) {
				err_set(err, errlen,
					   "export option '%s': '%s' is not an id in 0..%u", word,
					   word + 8, UINT32_MAX - 1);
				goto out;
			}
			if (word[4] == 'u')
				o.eo_anonuid = (uint32_t)id;
			else
				o.eo_anongid = (uint32_t)id;
		} else {
			err_set(err, errlen, "unknown export option '%s' (" EXPORT_OPTS_EXPECTED ")",
				   word);
			goto out;
		}
		if (!end)
			break;
		p = end + 1;
	}
	*opts = o;
	rc = 0;
out:
	return rc;
}

#define CONFIG_MAX_RULES 256

int config_upper_check(const char *tmpl, char *err, size_t errlen)
{
	bool has_addr = false, has_name = false;
	const char *p;

	if (tmpl[0] != '/') {
		err_set(err, errlen,
			   "upper=%.200s is not an absolute path; give a template like upper=/srv/clients/%%a",
			   tmpl);
		return -1;
	}
	if (strlen(tmpl) > PATH_MAX / 2) {
		err_set(err, errlen, "upper= template is longer than %d bytes; use a shorter path",
			   PATH_MAX / 2);
		return -1;
	}
	for (p = tmpl; *p; p++) {
		if (*p != '%')
			continue;
		p++;
		if (*p == 'a') {
			has_addr = true;
		} else if (*p == 'h') {
			has_name = true;
		} else if (*p != '%') {
			err_set(err, errlen,
				   "upper=%.200s: unknown '%%%c' (expected %%a for the client address, %%h for its host name or %%%% for a '%%')",
				   tmpl, *p ? *p : ' ');
			return -1;
		}
	}
	if (has_addr && has_name) {
		err_set(err, errlen,
			   "upper=%.200s names the client by both %%a and %%h; one of them names a client's layer, keep one",
			   tmpl);
		return -1;
	}
	if (!has_addr && !has_name) {
		err_set(err, errlen,
			   "upper=%.200s has no %%a or %%h, so every client would share one upper branch; put %%a (address) or %%h (host name) in it, e.g. upper=/srv/clients/%%a",
			   tmpl);
		return -1;
	}
	return 0;
}

bool config_upper_by_name(const char *tmpl)
{
	for (const char *p = tmpl; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] == 'h')
			return true;
		if (p[1])
			p++;
	}
	return false;
}

int config_upper_expand(const char *tmpl, const char *client, char *out, size_t outlen)
{
	size_t n = 0, clen = strlen(client);
	const char *p;

	for (p = tmpl; *p; p++) {
		if (*p == '%' && (p[1] == 'a' || p[1] == 'h')) {
			if (n + clen >= outlen)
				return -1;
			memcpy(out + n, client, clen);
			n += clen;
			p++;
			continue;
		}
		if (*p == '%' && p[1] == '%')
			p++;
		if (n + 1 >= outlen)
			return -1;
		out[n++] = *p;
	}
	if (n >= outlen)
		return -1;
	out[n] = '\0';
	return 0;
}

/*
 * Takes the export-wide option upper=TEMPLATE out of the comma-separated words: it is
 * stored in ec (a second, different template is an error) and *rest receives the other
 * words (malloc'ed, possibly ""), which apply per client as before.
 */
static int config_take_upper(struct export_conf *ec, const char *words, char **rest, char *err,
			     size_t errlen)
{
	const char *p = words, *end;
	char *out, *q, *tmpl;
	size_t len;

	*rest = NULL;
	out = malloc(strlen(words) + 1);
	if (!out) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	q = out;
	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len >= 6 && !strncmp(p, "upper=", 6)) {
			tmpl = strndup(p + 6, len - 6);
			if (!tmpl) {
				err_set(err, errlen, "out of memory");
				goto fail;
			}
			if (config_upper_check(tmpl, err, errlen) < 0) {
				free(tmpl);
				goto fail;
			}
			if (ec->ec_upper && strcmp(ec->ec_upper, tmpl)) {
				err_set(err, errlen,
					   "export %s has two upper= templates (%.150s and %.150s); an export has one, give it once",
					   ec->ec_name, ec->ec_upper, tmpl);
				free(tmpl);
				goto fail;
			}
			free(ec->ec_upper);
			ec->ec_upper = tmpl;
		} else {
			if (q != out)
				*q++ = ',';
			memcpy(q, p, len);
			q += len;
		}
		if (!end)
			break;
		p = end + 1;
	}
	*q = '\0';
	*rest = out;
	return 0;
fail:
	free(out);
	return -1;
}

/* The one-rule forms' OPTS: upper= for the export, the rest as the rule's options. */
static int config_export_opts(struct export_conf *ec, const char *words, char *err,
			      size_t errlen)
{
	char *rest;
	int rc = 0;

	if (!words || !*words)
		return config_parse_export_opts(&ec->ec_opts, words, err, errlen);
	if (config_take_upper(ec, words, &rest, err, errlen) < 0)
		return -1;
	if (*rest)
		rc = config_parse_export_opts(&ec->ec_opts, rest, err, errlen);
	free(rest);
	return rc;
}

/* Exports with upper= serve their own branches read-only: only the views write. */
static void config_upper_ro(struct config *cf)
{
	for (int i = 0; i < cf->cf_nexports; i++)
		if (cf->cf_exports[i].ec_upper)
			cf->cf_exports[i].ec_opts.eo_ro = true;
}

static void config_default_opts(struct export_opts *o)
{
	o->eo_ro = false;
	o->eo_squash = SQUASH_ROOT;
	o->eo_anonuid = CONFIG_ANON_ID;
	o->eo_anongid = CONFIG_ANON_ID;
	o->eo_secure = true;
}

/* Appends rule r (taken over, even on failure) to ec. */
static int config_push_rule(struct export_conf *ec, struct export_rule *r, char *err,
			    size_t errlen)
{
	struct export_rule *grown;

	if (ec->ec_nrules >= CONFIG_MAX_RULES) {
		err_set(err, errlen, "export %s has more than %d client rules; use CIDR networks",
			   ec->ec_name, CONFIG_MAX_RULES);
		goto fail;
	}
	grown = realloc(ec->ec_rules, (size_t)(ec->ec_nrules + 1) * sizeof(*grown));
	if (!grown) {
		err_set(err, errlen, "out of memory");
		goto fail;
	}
	ec->ec_rules = grown;
	ec->ec_rules[ec->ec_nrules++] = *r;
	memset(r, 0, sizeof(*r));
	return 0;
fail:
	exports_rule_free(r);
	return -1;
}

int config_add_rule(struct export_conf *ec, const char *word, char *err, size_t errlen)
{
	struct export_rule r;
	const char *open = strchr(word, '(');
	size_t wlen = strlen(word);
	char *spec = NULL, *opts = NULL, *rest = NULL;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	if (!open || wlen < 2 || word[wlen - 1] != ')' || strchr(open + 1, '(') ||
	    strchr(open, ')') != word + wlen - 1) {
		err_set(err, errlen,
			   "client rule '%.200s' is not CLIENT(OPTIONS); write e.g. 10.0.0.0/8(rw,no_root_squash) or *(ro), CLIENT() for the defaults",
			   word);
		goto out;
	}
	spec = strndup(word, (size_t)(open - word));
	opts = strndup(open + 1, (size_t)(word + wlen - 1 - (open + 1)));
	if (!spec || !opts) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	if (exports_parse_spec(spec, &r, err, errlen) < 0)
		goto out;
	config_default_opts(&r.er_opts);
	if (config_take_upper(ec, opts, &rest, err, errlen) < 0)
		goto out;
	if (*rest && config_parse_export_opts(&r.er_opts, rest, err, errlen) < 0)
		goto out;
	if (exports_rule_resolve(&r, err, errlen) < 0)
		goto out;
	rc = config_push_rule(ec, &r, err, errlen);
out:
	exports_rule_free(&r);
	free(spec);
	free(opts);
	free(rest);
	return rc;
}

/* The one-rule forms: "*" with the export's own options. */
static int config_add_default_rule(struct export_conf *ec, char *err, size_t errlen)
{
	struct export_rule r;

	if (exports_parse_spec("*", &r, err, errlen) < 0)
		return -1;
	r.er_opts = ec->ec_opts;
	return config_push_rule(ec, &r, err, errlen);
}

/*
 * Canonical export name: collapses repeated slashes and drops a trailing one, so
 * "/union/" and "//union" are the export "/union" that MOUNT requests are matched against.
 */
static char *config_export_name(const char *name, char *err, size_t errlen)
{
	char *out = NULL, *q;
	const char *p, *comp;
	size_t clen;

	if (name[0] != '/') {
		err_set(err, errlen, "export name '%s' must start with '/', e.g. /union", name);
		goto fail;
	}
	if (strlen(name) > CONFIG_NAME_MAX) {
		err_set(err, errlen, "export name is longer than %d bytes; use a shorter one",
			   CONFIG_NAME_MAX);
		goto fail;
	}
	out = malloc(strlen(name) + 1);
	if (!out) {
		err_set(err, errlen, "out of memory");
		goto fail;
	}
	q = out;
	for (p = name; *p;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		comp = p;
		while (*p && *p != '/')
			p++;
		clen = (size_t)(p - comp);
		if ((clen == 1 && comp[0] == '.') || (clen == 2 && comp[0] == '.' && comp[1] == '.')) {
			err_set(err, errlen,
				   "export name '%s' contains '.' or '..'; give a plain path like /union",
				   name);
			goto fail;
		}
		*q++ = '/';
		memcpy(q, comp, clen);
		q += clen;
	}
	if (q == out)
		*q++ = '/';
	*q = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

/* Adds an export from its name and ':'-separated branch list; opts start at the defaults. */
static int config_add_export(struct config *cf, const char *name, const char *branches,
			     char *err, size_t errlen)
{
	struct export_conf ec, *grown;
	const char *p, *end;
	size_t len;
	int i, n = 1, rc = -1;

	memset(&ec, 0, sizeof(ec));
	config_default_opts(&ec.ec_opts);

	ec.ec_name = config_export_name(name, err, errlen);
	if (!ec.ec_name)
		goto out;
	for (i = 0; i < cf->cf_nexports; i++) {
		if (!strcmp(cf->cf_exports[i].ec_name, ec.ec_name)) {
			err_set(err, errlen,
				   "export %s is given twice; give each export a different name",
				   ec.ec_name);
			goto out;
		}
	}
	if (!*branches) {
		err_set(err, errlen, "export %s has no branches; give at least one directory",
			   ec.ec_name);
		goto out;
	}
	for (p = branches; *p; p++)
		if (*p == ':')
			n++;
	if (n > CONFIG_MAX_BRANCHES) {
		err_set(err, errlen, "export %s has %d branches; at most %d are supported",
			   ec.ec_name, n, CONFIG_MAX_BRANCHES);
		goto out;
	}
	ec.ec_branches = calloc((size_t)n, sizeof(*ec.ec_branches));
	if (!ec.ec_branches) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	for (p = branches;; p = end + 1) {
		end = strchr(p, ':');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0) {
			err_set(err, errlen,
				   "export %s: empty branch path in '%s'; separate branches with one ':'",
				   ec.ec_name, branches);
			goto out;
		}
		if (p[0] != '/') {
			err_set(err, errlen,
				   "export %s: branch '%.*s' is not an absolute path; give the full path, e.g. /srv/upper",
				   ec.ec_name, (int)len, p);
			goto out;
		}
		if (len >= PATH_MAX) {
			err_set(err, errlen, "export %s: a branch path is longer than %d bytes",
				   ec.ec_name, PATH_MAX - 1);
			goto out;
		}
		/* A trailing slash would make "/a/" and "/a" look like two branches. */
		while (len > 1 && p[len - 1] == '/')
			len--;
		ec.ec_branches[ec.ec_nbranches] = strndup(p, len);
		if (!ec.ec_branches[ec.ec_nbranches]) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		ec.ec_nbranches++;
		for (i = 0; i < ec.ec_nbranches - 1; i++) {
			if (!strcmp(ec.ec_branches[i], ec.ec_branches[ec.ec_nbranches - 1])) {
				err_set(err, errlen,
					   "export %s: branch %s is listed twice; list each directory once",
					   ec.ec_name, ec.ec_branches[i]);
				goto out;
			}
		}
		if (!end)
			break;
	}
	if (cf->cf_nexports >= 65535) {
		err_set(err, errlen, "too many exports (at most 65535)");
		goto out;
	}
	grown = realloc(cf->cf_exports, (size_t)(cf->cf_nexports + 1) * sizeof(*grown));
	if (!grown) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	cf->cf_exports = grown;
	cf->cf_exports[cf->cf_nexports++] = ec;
	memset(&ec, 0, sizeof(ec));
	rc = 0;
out:
	config_export_free(&ec);
	return rc;
}

/* "-e NAME=BRANCHES": the name ends at the first '='. */
static int config_add_export_spec(struct config *cf, const char *spec, char *err, size_t errlen)
{
	const char *eq = strchr(spec, '=');
	char *name;
	int rc;

	if (!eq) {
		err_set(err, errlen,
			   "'%s' is not NAME=BRANCH[:BRANCH...]; e.g. -e /union=/srv/upper:/srv/base",
			   spec);
		return -1;
	}
	name = strndup(spec, (size_t)(eq - spec));
	if (!name) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	rc = config_add_export(cf, name, eq + 1, err, errlen);
	free(name);
	return rc;
}

enum config_key {
	KEY_LISTEN,
	KEY_PORT,
	KEY_MOUNT_PORT,
	KEY_PORTMAP_PORT,
	KEY_STATE,
	KEY_PORTMAP,
	KEY_WORKERS,
	KEY_MAX_RECORD,
	KEY_MAX_CONNS,
	KEY_MAX_CONNS_PER_HOST,
	KEY_MAX_VIEWS_PER_RULE,
	KEY_IDLE_TIMEOUT,
	KEY_MAX_REQUESTS,
	KEY_MAX_BUFFERED,
	KEY_METRICS,
	KEY_HOSTS,
};

/* Scalar settings: the flag --NAME and the config file directive NAME. */
static const struct {
	const char *ck_name;
	enum config_key ck_key;
} config_keys[] = {
	{ "listen", KEY_LISTEN },
	{ "port", KEY_PORT },
	{ "mount-port", KEY_MOUNT_PORT },
	{ "portmap-port", KEY_PORTMAP_PORT },
	{ "state", KEY_STATE },
	{ "portmap", KEY_PORTMAP },
	{ "workers", KEY_WORKERS },
	{ "max-record", KEY_MAX_RECORD },
	{ "max-connections", KEY_MAX_CONNS },
	{ "max-connections-per-host", KEY_MAX_CONNS_PER_HOST },
	{ "max-views-per-rule", KEY_MAX_VIEWS_PER_RULE },
	{ "idle-timeout", KEY_IDLE_TIMEOUT },
	{ "max-requests-per-connection", KEY_MAX_REQUESTS },
	{ "max-buffered", KEY_MAX_BUFFERED },
	{ "metrics", KEY_METRICS },
	{ "hosts", KEY_HOSTS },
};

static int config_find_key(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(config_keys) / sizeof(config_keys[0]); i++)
		if (strlen(config_keys[i].ck_name) == len && !strncmp(config_keys[i].ck_name, name, len))
			return (int)i;
	return -1;
}

/* "ADDR:PORT" with a numeric IPv4 address, or "[ADDR]:PORT" with IPv6; port 1..65535. */
static int config_metrics_check(const char *value, char *err, size_t errlen)
{
	unsigned char addr[sizeof(struct in6_addr)];
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon = strrchr(value, ':');
	size_t len;
	uint64_t v;
	bool v6 = value[0] == '[';

	if (colon == NULL || (v6 && (colon == value || colon[-1] != ']')))
		goto bad;
	len = (size_t)(colon - value) - (v6 ? 2 : 0);
	if (len == 0 || len >= sizeof(host))
		goto bad;
	memcpy(host, value + (v6 ? 1 : 0), len);
	host[len] = '\0';
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, addr) != 1)
		goto bad;
	if (config_parse_range(colon + 1, 1, 65535, &v, err, errlen) < 0)
		return -1;
	return 0;
bad:
	err_set(err, errlen, "'%s' is not ADDR:PORT with a numeric address, e.g. 127.0.0.1:9249 or [::1]:9249",
		value);
	return -1;
}

static int config_set(struct config *cf, enum config_key key, const char *value, char *err,
		      size_t errlen)
{
	unsigned char addr[sizeof(struct in6_addr)];
	uint64_t v;

	switch (key) {
	case KEY_LISTEN:
		if (inet_pton(AF_INET, value, addr) != 1 && inet_pton(AF_INET6, value, addr) != 1) {
			err_set(err, errlen,
				   "'%s' is not a numeric IPv4 or IPv6 address, e.g. 0.0.0.0 or ::1", value);
			return -1;
		}
		return config_set_string(&cf->cf_listen, value, err, errlen);
	case KEY_METRICS:
		if (config_metrics_check(value, err, errlen) < 0)
			return -1;
		return config_set_string(&cf->cf_metrics, value, err, errlen);
	case KEY_HOSTS: {
		struct hostmap *hm;

		if (value[0] != '/') {
			err_set(err, errlen,
				   "'%s' is not an absolute path; give the full path of the host name map, e.g. /etc/unionnfsd/hosts",
				   value);
			return -1;
		}
		if (hostmap_load(value, &hm, err, errlen) < 0)
			return -1;
		hostmap_free(cf->cf_hosts);
		cf->cf_hosts = hm;
		return 0;
	}
	case KEY_PORT:
	case KEY_MOUNT_PORT:
	case KEY_PORTMAP_PORT:
		if (config_parse_range(value, 0, 65535, &v, err, errlen) < 0)
			return -1;
		if (key == KEY_PORT)
			cf->cf_port = (int)v;
		else if (key == KEY_MOUNT_PORT)
			cf->cf_mount_port = (int)v;
		else
			cf->cf_portmap_port = (int)v;
		return 0;
	case KEY_STATE:
		if (value[0] != '/') {
			err_set(err, errlen,
				   "'%s' is not an absolute path; give the full path, e.g. /var/lib/unionnfsd",
				   value);
			return -1;
		}
		return config_set_string(&cf->cf_state_dir, value, err, errlen);
	case KEY_PORTMAP:
		if (!strcmp(value, "auto")) {
			cf->cf_portmap = PORTMAP_AUTO;
		} else if (!strcmp(value, "rpcbind")) {
			cf->cf_portmap = PORTMAP_RPCBIND;
		} else if (!strcmp(value, "builtin")) {
			cf->cf_portmap = PORTMAP_BUILTIN;
		} else if (!strcmp(value, "off")) {
			cf->cf_portmap = PORTMAP_OFF;
		} else {
			err_set(err, errlen,
				   "unknown portmap mode '%s' (expected auto, rpcbind, builtin or off)", value);
			return -1;
		}
		return 0;
	case KEY_WORKERS:
		if (config_parse_range(value, 1, CONFIG_MAX_WORKERS, &v, err, errlen) < 0)
			return -1;
		cf->cf_workers = (int)v;
		return 0;
	case KEY_MAX_RECORD:
		if (config_parse_uint(value, CONFIG_MAX_MAX_RECORD, &v) < 0 ||
		    v < CONFIG_MIN_MAX_RECORD) {
			err_set(err, errlen,
				   "'%s' is not a number in %d..%d (smaller records could not carry the 1 MiB writes the server offers)",
				   value, CONFIG_MIN_MAX_RECORD, CONFIG_MAX_MAX_RECORD);
			return -1;
		}
		cf->cf_max_record = (uint32_t)v;
		return 0;
	case KEY_MAX_CONNS:
		if (config_parse_range(value, 1, CONFIG_MAX_MAX_CONNS, &v, err, errlen) < 0)
			return -1;
		cf->cf_max_conns = (unsigned)v;
		return 0;
	case KEY_MAX_CONNS_PER_HOST:
		if (config_parse_range(value, 1, CONFIG_MAX_MAX_CONNS, &v, err, errlen) < 0)
			return -1;
		cf->cf_max_conns_per_host = (unsigned)v;
		return 0;
	case KEY_MAX_VIEWS_PER_RULE:
		if (config_parse_range(value, 1, CONFIG_MAX_MAX_VIEWS_PER_RULE, &v, err, errlen) < 0)
			return -1;
		cf->cf_max_views_per_rule = (unsigned)v;
		return 0;
	case KEY_IDLE_TIMEOUT:
		if (config_parse_range(value, 0, CONFIG_MAX_IDLE_TIMEOUT, &v, err, errlen) < 0)
			return -1;
		cf->cf_idle_timeout = (unsigned)v;
		return 0;
	case KEY_MAX_REQUESTS:
		if (config_parse_range(value, 1, CONFIG_MAX_MAX_REQUESTS, &v, err, errlen) < 0)
			return -1;
		cf->cf_max_requests = (unsigned)v;
		return 0;
	case KEY_MAX_BUFFERED:
		if (config_parse_range(value, CONFIG_MIN_MAX_BUFFERED, CONFIG_MAX_MAX_BUFFERED, &v, err,
				       errlen) < 0)
			return -1;
		cf->cf_max_buffered = v;
		return 0;
	}
	err_set(err, errlen, "internal error: unknown setting");
	return -1;
}

/* Splits line into whitespace-separated words in place; '#' at a word's start ends the line. */
static int config_split(char *line, char **words, int max)
{
	int n = 0;
	char *p = line;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\f' || *p == '\v')
			p++;
		if (!*p || *p == '#')
			break;
		if (n == max)
			return max + 1;
		words[n++] = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '\f' &&
		       *p != '\v')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n;
}

#define CONFIG_FILE_KEYS \
	"listen, port, mount-port, portmap-port, state, portmap, workers, max-record, " \
	"max-connections, max-connections-per-host, idle-timeout, max-requests-per-connection, " \
	"max-buffered, max-views-per-rule, metrics, hosts, export, " \
	"foreground, udp"

#define CONFIG_MAX_WORDS (3 + CONFIG_MAX_RULES)

/*
 * "export NAME BRANCHES [OPTS]" is the one rule "*(OPTS)"; "export NAME BRANCHES
 * CLIENT(OPTS)..." lists the rules. A lone word without '(' stays OPTS, as before rules.
 */
static int config_file_export(struct config *cf, char **w, int n, char *err, size_t errlen)
{
	struct export_conf *ec;
	int i;

	if (n < 3) {
		err_set(err, errlen,
			   "export takes NAME BRANCH[:BRANCH...] [OPTIONS | CLIENT(OPTIONS)...], e.g. export /union /srv/upper:/srv/base 10.0.0.0/8(rw) *(ro)");
		return -1;
	}
	if (config_add_export(cf, w[1], w[2], err, errlen) < 0)
		return -1;
	ec = &cf->cf_exports[cf->cf_nexports - 1];
	if (n == 3 || (n == 4 && !strchr(w[3], '('))) {
		if (n == 4 && config_export_opts(ec, w[3], err, errlen) < 0)
			return -1;
		return config_add_default_rule(ec, err, errlen);
	}
	for (i = 3; i < n; i++) {
		if (config_add_rule(ec, w[i], err, errlen) < 0) {
			char prefix[64];

			snprintf(prefix, sizeof(prefix), "export %.40s: ", ec->ec_name);
			config_err_prefix(err, errlen, prefix);
			return -1;
		}
	}
	return 0;
}

/* A directive that is on or off: "NAME" or "NAME yes" turn it on, "NAME no" off. */
static int config_file_switch(char **w, int n, bool *field, char *err, size_t errlen)
{
	if (n == 1 || (n == 2 && !strcmp(w[1], "yes"))) {
		*field = true;
	} else if (n == 2 && !strcmp(w[1], "no")) {
		*field = false;
	} else {
		err_set(err, errlen, "%s takes no value, yes or no", w[0]);
		return -1;
	}
	return 0;
}

static int config_file_line(struct config *cf, char *line, char *err, size_t errlen)
{
	char *w[CONFIG_MAX_WORDS + 1];
	int n, k;

	n = config_split(line, w, CONFIG_MAX_WORDS);
	if (n == 0)
		return 0;
	if (n > CONFIG_MAX_WORDS) {
		err_set(err, errlen, "more than %d words on one line; an export takes at most %d client rules",
			   CONFIG_MAX_WORDS, CONFIG_MAX_RULES);
		return -1;
	}
	if (!strcmp(w[0], "export"))
		return config_file_export(cf, w, n, err, errlen);
	if (!strcmp(w[0], "foreground"))
		return config_file_switch(w, n, &cf->cf_foreground, err, errlen);
	if (!strcmp(w[0], "udp"))
		return config_file_switch(w, n, &cf->cf_udp, err, errlen);
	k = config_find_key(w[0], strlen(w[0]));
	if (k < 0) {
		err_set(err, errlen, "unknown option '%s' (expected " CONFIG_FILE_KEYS ")", w[0]);
		return -1;
	}
	if (n != 2) {
		err_set(err, errlen, "%s takes exactly one value", w[0]);
		return -1;
	}
	if (config_set(cf, config_keys[k].ck_key, w[1], err, errlen) < 0) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "%s: ", w[0]);
		config_err_prefix(err, errlen, prefix);
		return -1;
	}
	return 0;
}

int config_parse_file(struct config *cf, const char *path, char *err, size_t errlen)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;
	char prefix[PATH_MAX + 32];
	int rc = -1;

	f = fopen(path, "re");
	if (!f) {
		err_set(err, errlen, "cannot read config file %s: %s; check the path given to -c",
			   path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		snprintf(prefix, sizeof(prefix), "%s:%lu: ", path, lineno);
		if ((size_t)len != strlen(line)) {
			err_set(err, errlen, "%sNUL byte in line; the config file must be text",
				   prefix);
			goto out;
		}
		if (config_file_line(cf, line, err, errlen) < 0) {
			config_err_prefix(err, errlen, prefix);
			goto out;
		}
	}
	if (ferror(f)) {
		err_set(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
		goto out;
	}
	config_upper_ro(cf);
	rc = 0;
out:
	free(line);
	fclose(f);
	return rc;
}

/*
 * Gets an option's value: "--port=5" carries it inline, "--port 5" in the next argument.
 * Returns NULL (with a message) when it is missing.
 */
static const char *config_arg_value(int argc, char **argv, int *i, const char *inl,
				    const char *opt, char *err, size_t errlen)
{
	if (inl)
		return inl;
	if (*i + 1 >= argc) {
		err_set(err, errlen, "option %s needs a value; see unionnfsd --help", opt);
		return NULL;
	}
	return argv[++*i];
}

int config_parse_args(struct config *cf, int argc, char **argv, char *err, size_t errlen)
{
	const char *arg, *val, *eq;
	char optname[48];
	int i, k, last_e = -1, first_e = -1;
	bool last_e_opts = false;
	size_t nlen;

	for (i = 1; i < argc; i++) {
		arg = argv[i];
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			err_set(err, errlen, "%s", config_usage);
			return 1;
		}
		if (!strcmp(arg, "-f")) {
			cf->cf_foreground = true;
		} else if (!strcmp(arg, "--udp")) {
			cf->cf_udp = true;
		} else if (!strncmp(arg, "--udp=", 6)) {
			err_set(err, errlen,
				   "option --udp takes no value ('%.200s'); give --udp alone to serve UDP as well as TCP, leave it out for TCP only",
				   arg);
			return -1;
		} else if (!strcmp(arg, "-c")) {
			if (!(val = config_arg_value(argc, argv, &i, NULL, "-c", err, errlen)))
				return -1;
			if (config_parse_file(cf, val, err, errlen) < 0)
				return -1;
			/* An -o after the file would be ambiguous: the last -e, or the file's export? */
			last_e = -1;
		} else if (!strcmp(arg, "-e")) {
			if (!(val = config_arg_value(argc, argv, &i, NULL, "-e", err, errlen)))
				return -1;
			if (config_add_export_spec(cf, val, err, errlen) < 0) {
				config_err_prefix(err, errlen, "option -e: ");
				return -1;
			}
			last_e = cf->cf_nexports - 1;
			last_e_opts = false;
			if (first_e < 0)
				first_e = last_e;
		} else if (!strcmp(arg, "--client") || !strncmp(arg, "--client=", 9)) {
			if (!(val = config_arg_value(argc, argv, &i, arg[8] == '=' ? arg + 9 : NULL,
						     "--client", err, errlen)))
				return -1;
			if (last_e < 0 || last_e_opts) {
				err_set(err, errlen,
					   "option --client: '%.200s' must follow the -e it applies to, without -o (put the options in the rule), e.g. -e /union=/srv/upper --client '10.0.0.0/8(rw)'",
					   val);
				return -1;
			}
			if (config_add_rule(&cf->cf_exports[last_e], val, err, errlen) < 0) {
				config_err_prefix(err, errlen, "option --client: ");
				return -1;
			}
		} else if (!strcmp(arg, "-o")) {
			if (!(val = config_arg_value(argc, argv, &i, NULL, "-o", err, errlen)))
				return -1;
			if (last_e >= 0 && cf->cf_exports[last_e].ec_nrules > 0) {
				err_set(err, errlen,
					   "option -o: '%.200s' follows --client rules of the same -e; put the options in the rules, e.g. --client '*(%.200s)'",
					   val, val);
				return -1;
			}
			last_e_opts = true;
			if (last_e < 0) {
				err_set(err, errlen,
					   "option -o: '%s' must follow the -e it applies to, e.g. -e /union=/srv/upper -o %s",
					   val, val);
				return -1;
			}
			if (config_export_opts(&cf->cf_exports[last_e], val, err,
						     errlen) < 0) {
				config_err_prefix(err, errlen, "option -o: ");
				return -1;
			}
		} else if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
			eq = strchr(arg + 2, '=');
			nlen = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
			k = config_find_key(arg + 2, nlen);
			if (k < 0) {
				err_set(err, errlen, "unknown option '%.*s'; see unionnfsd --help",
					   (int)(nlen + 2 < 200 ? nlen + 2 : 200), arg);
				return -1;
			}
			snprintf(optname, sizeof(optname), "--%s", config_keys[k].ck_name);
			if (!(val = config_arg_value(argc, argv, &i, eq ? eq + 1 : NULL, optname, err,
						     errlen)))
				return -1;
			if (config_set(cf, config_keys[k].ck_key, val, err, errlen) < 0) {
				char prefix[64];

				snprintf(prefix, sizeof(prefix), "option %s: ", optname);
				config_err_prefix(err, errlen, prefix);
				return -1;
			}
		} else if (arg[0] == '-') {
			err_set(err, errlen, "unknown option '%.200s'; see unionnfsd --help", arg);
			return -1;
		} else {
			err_set(err, errlen,
				   "unexpected argument '%.200s'; exports are given as -e NAME=BRANCH[:BRANCH...]",
				   arg);
			return -1;
		}
	}
	/* -e exports without --client rules are open to "*" with their -o options. */
	for (k = first_e < 0 ? cf->cf_nexports : first_e; k < cf->cf_nexports; k++) {
		if (cf->cf_exports[k].ec_nrules == 0 &&
		    config_add_default_rule(&cf->cf_exports[k], err, errlen) < 0) {
			config_err_prefix(err, errlen, "option -e: ");
			return -1;
		}
	}
	config_upper_ro(cf);
	return 0;
}

int config_validate(const struct config *cf, char *err, size_t errlen)
{
	int i, j;

	if (!cf->cf_state_dir) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	if (cf->cf_nexports == 0) {
		err_set(err, errlen,
			   "nothing to export; give -e NAME=BRANCH[:BRANCH...] (e.g. -e /union=/srv/upper:/srv/base) or an export line in the config file");
		return -1;
	}
	for (i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];

		if (!ec->ec_name || ec->ec_name[0] != '/') {
			err_set(err, errlen, "export name '%s' must start with '/'",
				   ec->ec_name ? ec->ec_name : "");
			return -1;
		}
		if (ec->ec_nbranches < 1 || ec->ec_nbranches > CONFIG_MAX_BRANCHES) {
			err_set(err, errlen, "export %s has %d branches; give 1 to %d", ec->ec_name,
				   ec->ec_nbranches, CONFIG_MAX_BRANCHES);
			return -1;
		}
		for (j = 0; j < ec->ec_nbranches; j++) {
			if (!ec->ec_branches[j] || ec->ec_branches[j][0] != '/') {
				err_set(err, errlen, "export %s: branch '%s' is not an absolute path",
					   ec->ec_name, ec->ec_branches[j] ? ec->ec_branches[j] : "");
				return -1;
			}
		}
		for (j = 0; j < i; j++) {
			if (!strcmp(cf->cf_exports[j].ec_name, ec->ec_name)) {
				err_set(err, errlen,
					   "export %s is given twice; give each export a different name",
					   ec->ec_name);
				return -1;
			}
		}
	}
	if (cf->cf_port < 0 || cf->cf_port > 65535 || cf->cf_mount_port < 0 ||
	    cf->cf_mount_port > 65535 || cf->cf_portmap_port < 0 || cf->cf_portmap_port > 65535) {
		err_set(err, errlen, "a port is outside 0..65535");
		return -1;
	}
	if (cf->cf_workers < 1 || cf->cf_workers > CONFIG_MAX_WORKERS) {
		err_set(err, errlen, "workers must be 1..%d", CONFIG_MAX_WORKERS);
		return -1;
	}
	if (cf->cf_max_record < CONFIG_MIN_MAX_RECORD || cf->cf_max_record > CONFIG_MAX_MAX_RECORD) {
		err_set(err, errlen, "max-record must be %d..%d", CONFIG_MIN_MAX_RECORD,
			   CONFIG_MAX_MAX_RECORD);
		return -1;
	}
	if (cf->cf_max_conns < 1 || cf->cf_max_conns > CONFIG_MAX_MAX_CONNS ||
	    cf->cf_max_conns_per_host < 1 || cf->cf_max_conns_per_host > CONFIG_MAX_MAX_CONNS ||
	    cf->cf_max_views_per_rule < 1 ||
	    cf->cf_max_views_per_rule > CONFIG_MAX_MAX_VIEWS_PER_RULE ||
	    cf->cf_idle_timeout > CONFIG_MAX_IDLE_TIMEOUT || cf->cf_max_requests < 1 ||
	    cf->cf_max_requests > CONFIG_MAX_MAX_REQUESTS ||
	    cf->cf_max_buffered < CONFIG_MIN_MAX_BUFFERED ||
	    cf->cf_max_buffered > CONFIG_MAX_MAX_BUFFERED) {
		err_set(err, errlen,
			   "max-connections and max-connections-per-host must be 1..%d, max-views-per-rule 1..%d, idle-timeout 0..%d, max-requests-per-connection 1..%d and max-buffered %llu..%llu",
			   CONFIG_MAX_MAX_CONNS, CONFIG_MAX_MAX_VIEWS_PER_RULE, CONFIG_MAX_IDLE_TIMEOUT,
			   CONFIG_MAX_MAX_REQUESTS,
			   CONFIG_MIN_MAX_BUFFERED, CONFIG_MAX_MAX_BUFFERED);
		return -1;
	}
	return 0;
}
