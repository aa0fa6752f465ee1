/*
 * Configuration: flags and config file lines go through the same setters, so a
 * directive in the file and the flag of the same name behave identically and give the
 * same message; only the prefix differs ("option --port: " versus "FILE:LINE: ").
 * Settings apply in the order they are read, so a later one wins; exports accumulate.
 *
 * Every scalar setting is one row of CONFIG_SETTINGS (config.h); defaults, parsing,
 * validation and config_diff are all generated from it. Parsing never blocks: host names
 * and the --hosts map wait for config_resolve, which knows where each was written.
 */
#include "config.h"
#include "exports.h"
#include "hostmap.h"
#include "log.h"
#include "store.h"
#include "union.h"
#include "views.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char config_usage[] =
	"usage: unionnfsd [-f] [-c FILE] [--listen ADDR] [--port N] [--mount-port N] [--state DIR]\n"
	"                 [--portmap auto|rpcbind|builtin|off] [-e NAME=BRANCH[:BRANCH...]\n"
	"                 [-o OPTS | --client CLIENT(OPTS)...]]...\n"
	"                 [--workers N] [--max-record BYTES] [--portmap-port N] [--help]\n"
	"                 [--max-connections N] [--max-connections-per-host N]\n"
	"                 [--idle-timeout SECONDS] [--busy-poll MICROSECONDS]\n"
	"                 [--max-requests-per-connection N] [--max-buffered BYTES]\n"
	"                 [--max-views-per-rule N] [--nlm-port N|off] [--grace SECONDS]\n"
	"                 [--nlm-retry MILLISECONDS] [--check-pace MICROSECONDS]\n"
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
	"  --nlm-port N|off    port of the lock manager (NLM v4) and status monitor (NSM), TCP\n"
	"                      and UDP, registered with the portmapper (default 0: a free port);\n"
	"                      off: no file locking is served (clients must mount with nolock)\n"
	"  --grace SECONDS     after a restart that left clients holding locks, only their\n"
	"                      reclaims are granted for this long (default 90; 0: none)\n"
	"  --nlm-retry MILLISECONDS  call a client whose blocked lock was granted back this\n"
	"                      often, for a minute, until it answers (default 5000)\n"
	"  --workers N         file system worker threads (default 32)\n"
	"  --max-record BYTES  largest RPC record accepted (default 1052672)\n"
	"  --max-connections N open TCP connections; past it a new connection closes the\n"
	"                      one idle longest but not in use (calls recently), or is\n"
	"                      closed if none may go (default 1024)\n"
	"  --max-connections-per-host N  the same for the connections of one client\n"
	"                      address (default 128)\n"
	"  --idle-timeout SECONDS  close a TCP connection without a call received or a reply\n"
	"                      sent, and with no call being served, for this long; 0 never\n"
	"                      (default 300)\n"
	"  --busy-poll MICROSECONDS  after a call, poll the sockets this long before sleeping,\n"
	"                      so a client waiting for each reply finds the server awake;\n"
	"                      shrinks by itself for clients that call less often; 0 never\n"
	"                      (default 100)\n"
	"  --max-requests-per-connection N  calls served at once per TCP connection; reading\n"
	"                      pauses beyond it (default 64)\n"
	"  --max-buffered BYTES  request and reply bytes held for all clients together;\n"
	"                      beyond it only clients holding nothing are read (default 268435456)\n"
	"  --max-views-per-rule N  client views (upper=) open for the clients of one client\n"
	"                      rule; past it the view idle longest of a client without a\n"
	"                      mount is closed, else MNT fails (default 1024)\n"
	"  --check-pace MICROSECONDS  `unionnfsd-ctl check` pauses this long after each\n"
	"                      record, in each of its threads, to spare a slow disk (default 0)\n"
	"  --metrics ADDR:PORT serve the statistics as Prometheus text on http://ADDR:PORT/metrics\n"
	"                      (numeric address, IPv6 in brackets; e.g. 127.0.0.1:9249; default off)\n"
	"  --hosts FILE        client host names for upper=...%h: lines of ADDRESS NAME, as in\n"
	"                      /etc/hosts (re-read on SIGHUP); addresses it lacks are named by\n"
	"                      reverse DNS confirmed forward\n"
	"  -h, --help          show this text\n";

const char *config_usage_text(void)
{
	return config_usage;
}

/* Settings of string kinds own a copy of their text; NULL stays NULL. */
static char *config_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

#define CONFIG_INIT_UINT(f, d) (f) = (d)
#define CONFIG_INIT_PORTMAP(f, d) (f) = (d)
#define CONFIG_INIT_PORTOFF(f, d) (f) = (d)
#define CONFIG_INIT_SWITCH(f, d) (f) = (d)
#define CONFIG_INIT_ADDR(f, d) (f) = config_strdup(d)
#define CONFIG_INIT_PATH(f, d) (f) = config_strdup(d)
#define CONFIG_INIT_METRICS(f, d) (f) = config_strdup(d)

void config_init(struct config *cf)
{
	memset(cf, 0, sizeof(*cf));
	/* A NULL from a failed strdup is reported by config_validate: this cannot fail. */
#define CONFIG_X_INIT(id, name, kind, field, def, min, max, apply, hint) \
	CONFIG_INIT_##kind(cf->field, def);
	CONFIG_SETTINGS(CONFIG_X_INIT)
#undef CONFIG_X_INIT
}

static void config_export_free(struct export_conf *ec)
{
	int i;

	free(ec->ec_name);
	for (i = 0; i < ec->ec_nbranches; i++)
		free(ec->ec_branches[i]);
	free(ec->ec_branches);
	free(ec->ec_roles);
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
	free(cf->cf_hosts_file);
	free(cf->cf_hosts_where);
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

#define CONFIG_MAX_RULES 256

static const char *const config_create_names[] = UNION_CREATE_NAMES;
static const char *const config_statfs_names[] = UNION_STATFS_NAMES;
static const char *const config_on_off[] = { "on", "off" };
static const char *const config_role_names[] = UNION_ROLE_NAMES;

/* The index of the len bytes at word in names (n of them), or -1. */
static int config_word_index(const char *const *names, int n, const char *word, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == len && !strncmp(names[i], word, len))
			return i;
	return -1;
}

/* "create=POLICY[:SECONDS]", the len bytes at value. */
static int config_create_policy(struct export_conf *ec, const char *value, size_t len,
				char *err, size_t errlen)
{
	const char *colon = memchr(value, ':', len);
	size_t wlen = colon ? (size_t)(colon - value) : len;
	int i = config_word_index(config_create_names, 4, value, wlen);
	unsigned long secs = UNION_MFS_DEFAULT_SECS;
	char num[16], *end;

	if (i < 0) {
		err_set(err, errlen,
			"export %s: unknown create policy '%.*s'; give create=tdp, rr, mfs[:SECONDS] or pmfs",
			ec->ec_name, (int)wlen, value);
		return -1;
	}
	if (colon) {
		size_t nlen = len - wlen - 1;

		if (i != UNION_CREATE_MFS || nlen == 0 || nlen >= sizeof(num)) {
			err_set(err, errlen,
				"export %s: '%.*s': only mfs takes seconds, as create=mfs:30",
				ec->ec_name, (int)len, value);
			return -1;
		}
		memcpy(num, colon + 1, nlen);
		num[nlen] = '\0';
		secs = strtoul(num, &end, 10);
		if (*end || num[0] == '-' || secs > 86400) {
			err_set(err, errlen,
				"export %s: create=mfs:%s: give whole seconds from 0 to 86400",
				ec->ec_name, num);
			return -1;
		}
	}
	ec->ec_policy.up_create = (enum union_create)i;
	ec->ec_policy.up_mfs_secs = (unsigned)secs;
	return 0;
}

/* One export-wide word (upper=, create=, statfs=, metacopy=): 1 when taken, 0 when not one, -1. */
static int config_export_word(struct export_conf *ec, const char *p, size_t len, char *err,
			      size_t errlen)
{
	char *tmpl;
	int i;

	if (len >= 7 && !strncmp(p, "create=", 7))
		return config_create_policy(ec, p + 7, len - 7, err, errlen) < 0 ? -1 : 1;
	if (len >= 7 && !strncmp(p, "statfs=", 7)) {
		i = config_word_index(config_statfs_names, 2, p + 7, len - 7);
		if (i < 0) {
			err_set(err, errlen,
				"export %s: unknown statfs= word '%.*s'; give statfs=sum or statfs=policy",
				ec->ec_name, (int)(len - 7), p + 7);
			return -1;
		}
		ec->ec_policy.up_statfs = (enum union_statfs_mode)i;
		return 1;
	}
	if (len >= 9 && !strncmp(p, "metacopy=", 9)) {
		i = config_word_index(config_on_off, 2, p + 9, len - 9);
		if (i < 0) {
			err_set(err, errlen,
				"export %s: unknown metacopy= word '%.*s'; give metacopy=on or metacopy=off",
				ec->ec_name, (int)(len - 9), p + 9);
			return -1;
		}
		ec->ec_policy.up_no_metacopy = i == 1;
		return 1;
	}
	if (len < 6 || strncmp(p, "upper=", 6))
		return 0;
	tmpl = strndup(p + 6, len - 6);
	if (!tmpl) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	if (views_upper_check(tmpl, err, errlen) < 0) {
		free(tmpl);
		return -1;
	}
	if (ec->ec_upper && strcmp(ec->ec_upper, tmpl)) {
		err_set(err, errlen,
			   "export %s has two upper= templates (%.150s and %.150s); an export has one, give it once",
			   ec->ec_name, ec->ec_upper, tmpl);
		free(tmpl);
		return -1;
	}
	free(ec->ec_upper);
	ec->ec_upper = tmpl;
	return 1;
}

/*
 * Takes the export-wide options (upper=TEMPLATE, create=, statfs=, metacopy=) out of the
 * comma-separated words: they are stored in ec (a second, different template is an error)
 * and *rest receives the other words (malloc'ed, possibly ""), which apply per client.
 */
static int config_take_export_words(struct export_conf *ec, const char *words, char **rest,
				    char *err, size_t errlen)
{
	const char *p = words, *end;
	char *out, *q;
	size_t len;
	int r;

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
		r = config_export_word(ec, p, len, err, errlen);
		if (r < 0) {
			free(out);
			return -1;
		}
		if (r == 0) {
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
}

/* The one-rule forms' OPTS: upper=, create=, statfs=, metacopy= for the export, the rest the rule's. */
static int config_export_opts(struct export_conf *ec, const char *words, char *err,
			      size_t errlen)
{
	char *rest;
	int rc = 0;

	if (!words || !*words)
		return exports_parse_opts(&ec->ec_opts, words, err, errlen);
	if (config_take_export_words(ec, words, &rest, err, errlen) < 0)
		return -1;
	if (*rest)
		rc = exports_parse_opts(&ec->ec_opts, rest, err, errlen);
	free(rest);
	return rc;
}

/*
 * Exports with upper= serve their own branches read-only: only the views write, and the
 * client's upper is their top writable branch, so the first listed branch is read-only
 * unless its word says otherwise.
 */
static void config_upper_ro(struct config *cf)
{
	for (int i = 0; i < cf->cf_nexports; i++) {
		struct export_conf *ec = &cf->cf_exports[i];

		if (!ec->ec_upper)
			continue;
		ec->ec_opts.eo_ro = true;
		if (!ec->ec_top_role_given && ec->ec_nbranches > 0)
			ec->ec_roles[0] = UNION_BRANCH_RO;
	}
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

int config_add_rule(struct export_conf *ec, const char *word, const char *where, char *err,
		    size_t errlen)
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
	exports_default_opts(&r.er_opts);
	if (config_take_export_words(ec, opts, &rest, err, errlen) < 0)
		goto out;
	if (*rest && exports_parse_opts(&r.er_opts, rest, err, errlen) < 0)
		goto out;
	if (where && !(r.er_where = strdup(where))) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
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
	if (strlen(name) > STORE_EXPORT_NAME_MAX) {
		err_set(err, errlen, "export name is longer than %d bytes; use a shorter one",
			   STORE_EXPORT_NAME_MAX);
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

/*
 * A branch's word: "PATH=rw", "=ro" or "=rr" after the path (the len bytes at p), taken off
 * *len into *role. A path may hold '=' itself as long as it ends with a word.
 */
static int config_branch_word(struct export_conf *ec, const char *p, size_t *len,
			      enum union_role *role, char *err, size_t errlen)
{
	const char *eq = memrchr(p, '=', *len);
	size_t wlen;
	int i;

	if (!eq)
		return 0;
	wlen = *len - (size_t)(eq - p) - 1;
	i = config_word_index(config_role_names, 3, eq + 1, wlen);
	if (i < 0) {
		err_set(err, errlen,
			"export %s: unknown branch word '%.*s' in '%.*s'; give =rw, =ro or =rr after the path",
			ec->ec_name, (int)wlen, eq + 1, (int)*len, p);
		return -1;
	}
	*role = (enum union_role)i;
	if (ec->ec_nbranches == 0)
		ec->ec_top_role_given = true;
	*len = (size_t)(eq - p);
	return 0;
}

/* Adds an export from its name and ':'-separated branch list; opts start at the defaults. */
static int config_add_export(struct config *cf, const char *name, const char *branches,
			     char *err, size_t errlen)
{
	struct export_conf ec, *grown;
	enum union_role role;
	const char *p, *end;
	size_t len;
	int i, n = 1, rc = -1;

	memset(&ec, 0, sizeof(ec));
	exports_default_opts(&ec.ec_opts);
	ec.ec_policy.up_mfs_secs = UNION_MFS_DEFAULT_SECS;

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
	if (n > UNION_MAX_BRANCHES) {
		err_set(err, errlen, "export %s has %d branches; at most %d are supported",
			   ec.ec_name, n, UNION_MAX_BRANCHES);
		goto out;
	}
	ec.ec_branches = calloc((size_t)n, sizeof(*ec.ec_branches));
	ec.ec_roles = calloc((size_t)n, sizeof(*ec.ec_roles));
	if (!ec.ec_branches || !ec.ec_roles) {
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
		role = ec.ec_nbranches == 0 ? UNION_BRANCH_RW : UNION_BRANCH_RO;
		if (config_branch_word(&ec, p, &len, &role, err, errlen) < 0)
			goto out;
		/* A trailing slash would make "/a/" and "/a" look like two branches. */
		while (len > 1 && p[len - 1] == '/')
			len--;
		ec.ec_roles[ec.ec_nbranches] = role;
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

/* One row of CONFIG_SETTINGS, for code that walks the table. */
enum config_kind { CONFIG_K_UINT, CONFIG_K_ADDR, CONFIG_K_PATH, CONFIG_K_PORTMAP,
		   CONFIG_K_METRICS, CONFIG_K_SWITCH, CONFIG_K_PORTOFF };

static const struct config_row {
	const char *cr_name;
	enum config_kind cr_kind;
	uint64_t cr_min, cr_max;
	enum config_apply cr_apply;
	const char *cr_hint;
} config_rows[CONFIG_NSETTINGS] = {
#define CONFIG_X_ROW(id, name, kind, field, def, min, max, apply, hint) \
	[CONFIG_##id] = { name, CONFIG_K_##kind, min, max, CONFIG_##apply, hint },
	CONFIG_SETTINGS(CONFIG_X_ROW)
#undef CONFIG_X_ROW
};

const char *config_setting_name(enum config_setting s)
{
	return config_rows[s].cr_name;
}

enum config_apply config_setting_apply(enum config_setting s)
{
	return config_rows[s].cr_apply;
}

bool config_setting_bounds(enum config_setting s, uint64_t *min, uint64_t *max)
{
	if (config_rows[s].cr_kind != CONFIG_K_UINT)
		return false;
	*min = config_rows[s].cr_min;
	*max = config_rows[s].cr_max;
	return true;
}

static bool config_str_differs(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

#define CONFIG_DIFF_UINT(a, b) ((a) != (b))
#define CONFIG_DIFF_PORTMAP(a, b) ((a) != (b))
#define CONFIG_DIFF_PORTOFF(a, b) ((a) != (b))
#define CONFIG_DIFF_SWITCH(a, b) ((a) != (b))
#define CONFIG_DIFF_ADDR(a, b) config_str_differs(a, b)
#define CONFIG_DIFF_PATH(a, b) config_str_differs(a, b)
#define CONFIG_DIFF_METRICS(a, b) config_str_differs(a, b)

uint64_t config_diff(const struct config *a, const struct config *b)
{
	uint64_t mask = 0;

#define CONFIG_X_DIFF(id, name, kind, field, def, min, max, apply, hint) \
	if (CONFIG_DIFF_##kind(a->field, b->field)) \
		mask |= 1ull << CONFIG_##id;
	CONFIG_SETTINGS(CONFIG_X_DIFF)
#undef CONFIG_X_DIFF
	return mask;
}

_Static_assert(CONFIG_NSETTINGS <= 64, "config_diff returns one bit per setting");

unsigned config_diff_export(const struct config *live, const struct config *next,
			    const char *name, bool opened_ro)
{
	int i = config_find_export(live, name), j = config_find_export(next, name);
	const struct export_conf *a, *b;
	unsigned changes = 0;

	if (i < 0)
		return j < 0 ? 0 : CONFIG_EXPORT_NEW;
	if (j < 0)
		return CONFIG_EXPORT_GONE;
	a = &live->cf_exports[i];
	b = &next->cf_exports[j];
	if (config_str_differs(a->ec_upper, b->ec_upper))
		changes |= CONFIG_EXPORT_UPPER;
	if (!config_same_branches(a, b))
		return changes | CONFIG_EXPORT_BRANCHES;
	if (memcmp(&a->ec_policy, &b->ec_policy, sizeof(a->ec_policy)) != 0)
		changes |= CONFIG_EXPORT_POLICY;
	/* The union was opened read-only: only opening it again makes it writable. */
	if (opened_ro && !b->ec_opts.eo_ro)
		changes |= CONFIG_EXPORT_WRITABLE;
	return changes;
}

/* The setting named by the len bytes at name; -1 when there is none. */
static int config_find_key(const char *name, size_t len)
{
	for (int i = 0; i < CONFIG_NSETTINGS; i++)
		if (strlen(config_rows[i].cr_name) == len && !strncmp(config_rows[i].cr_name, name, len))
			return i;
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

/* A value as a setting's kind parsed it: a number or text. */
struct config_value {
	uint64_t cv_num;
	const char *cv_text;
};

static int config_check_uint(const struct config_row *row, const char *value, uint64_t *out,
			     char *err, size_t errlen)
{
	if (config_parse_uint(value, row->cr_max, out) == 0 && *out >= row->cr_min)
		return 0;
	err_set(err, errlen, "'%s' is not a number in %llu..%llu%s%s%s", value,
		(unsigned long long)row->cr_min, (unsigned long long)row->cr_max,
		row->cr_hint ? " (" : "", row->cr_hint ? row->cr_hint : "", row->cr_hint ? ")" : "");
	return -1;
}

/* Checks value against the kind of row and parses it into *v. */
static int config_check(const struct config_row *row, const char *value, struct config_value *v,
			char *err, size_t errlen)
{
	static const char *const portmap_modes[] = {
		[PORTMAP_AUTO] = "auto", [PORTMAP_RPCBIND] = "rpcbind",
		[PORTMAP_BUILTIN] = "builtin", [PORTMAP_OFF] = "off",
	};
	unsigned char addr[sizeof(struct in6_addr)];

	v->cv_num = 0;
	v->cv_text = value;
	switch (row->cr_kind) {
	case CONFIG_K_UINT:
		return config_check_uint(row, value, &v->cv_num, err, errlen);
	case CONFIG_K_PORTOFF:
		if (!strcmp(value, "off")) {
			v->cv_num = (uint64_t)(int64_t)CONFIG_NLM_OFF;
			return 0;
		}
		if (config_parse_uint(value, row->cr_max, &v->cv_num) == 0 &&
		    v->cv_num >= row->cr_min)
			return 0;
		err_set(err, errlen, "'%s' is neither a port in %llu..%llu nor off", value,
			(unsigned long long)row->cr_min, (unsigned long long)row->cr_max);
		return -1;
	case CONFIG_K_ADDR:
		if (inet_pton(AF_INET, value, addr) == 1 || inet_pton(AF_INET6, value, addr) == 1)
			return 0;
		err_set(err, errlen, "'%s' is not a numeric IPv4 or IPv6 address, e.g. 0.0.0.0 or ::1",
			value);
		return -1;
	case CONFIG_K_PATH:
		if (value[0] == '/')
			return 0;
		err_set(err, errlen, "'%s' is not an absolute path; give %s", value, row->cr_hint);
		return -1;
	case CONFIG_K_METRICS:
		return config_metrics_check(value, err, errlen);
	case CONFIG_K_PORTMAP:
		for (size_t i = 0; i < sizeof(portmap_modes) / sizeof(portmap_modes[0]); i++) {
			if (!strcmp(value, portmap_modes[i])) {
				v->cv_num = i;
				return 0;
			}
		}
		err_set(err, errlen,
			"unknown portmap mode '%s' (expected auto, rpcbind, builtin or off)", value);
		return -1;
	case CONFIG_K_SWITCH:
		if (!strcmp(value, "yes") || !strcmp(value, "no")) {
			v->cv_num = value[0] == 'y';
			return 0;
		}
		err_set(err, errlen, "%s takes no value, yes or no", row->cr_name);
		return -1;
	}
	err_set(err, errlen, "internal error: unknown kind of setting");
	return -1;
}

#define CONFIG_STORE_UINT(f, v) ((f) = (__typeof__(f))(v)->cv_num, 0)
#define CONFIG_STORE_PORTMAP(f, v) ((f) = (enum portmap_mode)(v)->cv_num, 0)
#define CONFIG_STORE_PORTOFF(f, v) ((f) = (int)(int64_t)(v)->cv_num, 0)
#define CONFIG_STORE_SWITCH(f, v) ((f) = (v)->cv_num != 0, 0)
#define CONFIG_STORE_ADDR(f, v) config_set_string(&(f), (v)->cv_text, err, errlen)
#define CONFIG_STORE_PATH(f, v) config_set_string(&(f), (v)->cv_text, err, errlen)
#define CONFIG_STORE_METRICS(f, v) config_set_string(&(f), (v)->cv_text, err, errlen)

/* Sets setting s from its text; err gets the message without the "where" prefix. */
static int config_set(struct config *cf, enum config_setting s, const char *value, char *err,
		      size_t errlen)
{
	struct config_value v;

	if (config_check(&config_rows[s], value, &v, err, errlen) < 0)
		return -1;
	switch (s) {
#define CONFIG_X_STORE(id, name, kind, field, def, min, max, apply, hint) \
	case CONFIG_##id: \
		return CONFIG_STORE_##kind(cf->field, &v);
	CONFIG_SETTINGS(CONFIG_X_STORE)
#undef CONFIG_X_STORE
	case CONFIG_NSETTINGS:
		break;
	}
	err_set(err, errlen, "internal error: unknown setting");
	return -1;
}

/* Remembers where --hosts was given: config_resolve reads the file and names that place. */
static int config_set_where(struct config *cf, enum config_setting s, const char *where,
			    char *err, size_t errlen)
{
	if (s != CONFIG_HOSTS)
		return 0;
	return config_set_string(&cf->cf_hosts_where, where, err, errlen);
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

#define CONFIG_MAX_WORDS (3 + CONFIG_MAX_RULES)

/*
 * "export NAME BRANCHES [OPTS]" is the one rule "*(OPTS)"; "export NAME BRANCHES
 * CLIENT(OPTS)..." lists the rules. A lone word without '(' stays OPTS, as before rules.
 */
static int config_file_export(struct config *cf, char **w, int n, const char *origin, char *err,
			      size_t errlen)
{
	struct export_conf *ec;
	char where[PATH_MAX + 96];
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
	snprintf(where, sizeof(where), "%sexport %.40s: ", origin, ec->ec_name);
	for (i = 3; i < n; i++) {
		if (config_add_rule(ec, w[i], where, err, errlen) < 0) {
			config_err_prefix(err, errlen, where + strlen(origin));
			return -1;
		}
	}
	return 0;
}

/* The names of the config file's directives, in the order of the table, for a message. */
static void config_file_keys(char *out, size_t len)
{
	size_t used = 0;
	int n;

	out[0] = '\0';
	for (int i = 0; i < CONFIG_NSETTINGS && used < len; i++) {
		/* export is no setting; it is listed before the switches, which take no value */
		n = snprintf(out + used, len - used, "%s%s%s", used ? ", " : "",
			     config_rows[i].cr_kind == CONFIG_K_SWITCH &&
			     config_rows[i - 1].cr_kind != CONFIG_K_SWITCH ? "export, " : "",
			     config_rows[i].cr_name);
		if (n < 0)
			return;
		used += (size_t)n;
	}
}

/* The words after the directive's name: one value; a switch also takes none ("udp"). */
static const char *config_file_value(const struct config_row *row, char **w, int n, char *err,
				     size_t errlen)
{
	if (row->cr_kind == CONFIG_K_SWITCH) {
		if (n == 1)
			return "yes";
		if (n == 2 && (!strcmp(w[1], "yes") || !strcmp(w[1], "no")))
			return w[1];
		err_set(err, errlen, "%s takes no value, yes or no", w[0]);
		return NULL;
	}
	if (n != 2) {
		err_set(err, errlen, "%s takes exactly one value", w[0]);
		return NULL;
	}
	return w[1];
}

/* origin: "FILE:LINE: ", the prefix of this line's messages. */
static int config_file_line(struct config *cf, char *line, const char *origin, char *err,
			    size_t errlen)
{
	char *w[CONFIG_MAX_WORDS + 1];
	char keys[512], where[PATH_MAX + 64];
	const char *value;
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
		return config_file_export(cf, w, n, origin, err, errlen);
	k = config_find_key(w[0], strlen(w[0]));
	if (k < 0) {
		config_file_keys(keys, sizeof(keys));
		err_set(err, errlen, "unknown option '%s' (expected %s)", w[0], keys);
		return -1;
	}
	value = config_file_value(&config_rows[k], w, n, err, errlen);
	if (!value)
		return -1;
	snprintf(where, sizeof(where), "%s%s: ", origin, w[0]);
	if (config_set(cf, (enum config_setting)k, value, err, errlen) < 0) {
		config_err_prefix(err, errlen, where + strlen(origin));
		return -1;
	}
	return config_set_where(cf, (enum config_setting)k, where, err, errlen);
}

/*
 * Read with stdio by the path given to -c, following symbolic links as the administrator
 * would expect: an exception to fsio, whose rules are for what clients put in branches
 * (include/README).
 */
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
		if (config_file_line(cf, line, prefix, err, errlen) < 0) {
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
	char optname[48], where[64];
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
			if (config_add_rule(&cf->cf_exports[last_e], val, "option --client: ", err,
					    errlen) < 0) {
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
			/* switches have their own flags (-f, --udp) */
			if (k < 0 || config_rows[k].cr_kind == CONFIG_K_SWITCH) {
				err_set(err, errlen, "unknown option '%.*s'; see unionnfsd --help",
					   (int)(nlen + 2 < 200 ? nlen + 2 : 200), arg);
				return -1;
			}
			snprintf(optname, sizeof(optname), "--%s", config_rows[k].cr_name);
			if (!(val = config_arg_value(argc, argv, &i, eq ? eq + 1 : NULL, optname, err,
						     errlen)))
				return -1;
			snprintf(where, sizeof(where), "option %s: ", optname);
			if (config_set(cf, (enum config_setting)k, val, err, errlen) < 0) {
				config_err_prefix(err, errlen, where);
				return -1;
			}
			if (config_set_where(cf, (enum config_setting)k, where, err, errlen) < 0)
				return -1;
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

#define CONFIG_NUM_UINT(f) ((uint64_t)(f))
#define CONFIG_NUM_SWITCH(f) ((uint64_t)(f))
#define CONFIG_NUM_PORTMAP(f) ((uint64_t)(f))
#define CONFIG_NUM_PORTOFF(f) 0
#define CONFIG_NUM_ADDR(f) 0
#define CONFIG_NUM_PATH(f) 0
#define CONFIG_NUM_METRICS(f) 0

/* Numbers set by hand (not parsed) must still lie in the table's bounds. */
static int config_validate_settings(const struct config *cf, char *err, size_t errlen)
{
	uint64_t v, lo, hi;

#define CONFIG_X_VALIDATE(id, name, kind, field, def, min, max, apply, hint) \
	v = CONFIG_NUM_##kind(cf->field); \
	if (config_setting_bounds(CONFIG_##id, &lo, &hi) && (v < lo || v > hi)) { \
		err_set(err, errlen, "%s must be %llu..%llu", name, (unsigned long long)lo, \
			(unsigned long long)hi); \
		return -1; \
	}
	CONFIG_SETTINGS(CONFIG_X_VALIDATE)
#undef CONFIG_X_VALIDATE
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
		if (ec->ec_nbranches < 1 || ec->ec_nbranches > UNION_MAX_BRANCHES) {
			err_set(err, errlen, "export %s has %d branches; give 1 to %d", ec->ec_name,
				   ec->ec_nbranches, UNION_MAX_BRANCHES);
			return -1;
		}
		for (j = 0; j < ec->ec_nbranches; j++) {
			if (!ec->ec_branches[j] || ec->ec_branches[j][0] != '/') {
				err_set(err, errlen, "export %s: branch '%s' is not an absolute path",
					   ec->ec_name, ec->ec_branches[j] ? ec->ec_branches[j] : "");
				return -1;
			}
			if (j > 0 && ec->ec_roles && ec->ec_roles[j] == UNION_BRANCH_RW &&
			    ec->ec_roles[j - 1] != UNION_BRANCH_RW) {
				err_set(err, errlen,
					"export %s: branch %s is =rw below the read-only branch %s; list the writable branches first",
					ec->ec_name, ec->ec_branches[j], ec->ec_branches[j - 1]);
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
	return config_validate_settings(cf, err, errlen);
}


int config_resolve(struct config *cf, char *err, size_t errlen)
{
	struct hostmap *hm = NULL;

	for (int i = 0; i < cf->cf_nexports; i++) {
		struct export_conf *ec = &cf->cf_exports[i];

		for (int j = 0; j < ec->ec_nrules; j++)
			if (exports_rule_resolve(&ec->ec_rules[j], err, errlen) < 0)
				return -1;
	}
	if (cf->cf_hosts_file) {
		if (hostmap_load(cf->cf_hosts_file, &hm, err, errlen) < 0) {
			if (cf->cf_hosts_where)
				config_err_prefix(err, errlen, cf->cf_hosts_where);
			return -1;
		}
	}
	hostmap_free(cf->cf_hosts);
	cf->cf_hosts = hm;
	return 0;
}

int config_reserve_exports(struct config *cf, int cap)
{
	struct export_conf *grown;

	if (cap <= cf->cf_nexports)
		return 0;
	grown = realloc(cf->cf_exports, (size_t)cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	memset(grown + cf->cf_nexports, 0, (size_t)(cap - cf->cf_nexports) * sizeof(*grown));
	cf->cf_exports = grown;
	return 0;
}

void config_take_export(struct config *live, struct config *next, int j)
{
	live->cf_exports[live->cf_nexports++] = next->cf_exports[j];
	memset(&next->cf_exports[j], 0, sizeof(next->cf_exports[j]));
}

void config_swap_branches(struct export_conf *a, struct export_conf *b)
{
	struct export_conf t = *a;

	a->ec_branches = b->ec_branches;
	a->ec_roles = b->ec_roles;
	a->ec_nbranches = b->ec_nbranches;
	a->ec_top_role_given = b->ec_top_role_given;
	b->ec_branches = t.ec_branches;
	b->ec_roles = t.ec_roles;
	b->ec_nbranches = t.ec_nbranches;
	b->ec_top_role_given = t.ec_top_role_given;
}

int config_find_export(const struct config *cf, const char *name)
{
	for (int i = 0; i < cf->cf_nexports; i++)
		if (cf->cf_exports[i].ec_name && !strcmp(cf->cf_exports[i].ec_name, name))
			return i;
	return -1;
}

/* Branch i's role; an export built without roles has the default ones. */
enum union_role config_branch_role(const struct export_conf *ec, int i)
{
	if (ec->ec_roles)
		return ec->ec_roles[i];
	return i == 0 && !ec->ec_upper ? UNION_BRANCH_RW : UNION_BRANCH_RO;
}

int config_writable_count(const struct export_conf *ec)
{
	int n = 0;

	while (n < ec->ec_nbranches && config_branch_role(ec, n) == UNION_BRANCH_RW)
		n++;
	return n;
}

char *config_base_text(const struct export_conf *ec)
{
	size_t len = 1;
	char *text;
	int first = config_writable_count(ec);

	for (int i = first; i < ec->ec_nbranches; i++)
		len += strlen(ec->ec_branches[i]) + 1;
	text = calloc(1, len);
	for (int i = first; text && i < ec->ec_nbranches; i++) {
		if (i > first)
			strcat(text, "\n");
		strcat(text, ec->ec_branches[i]);
	}
	return text;
}

int config_set_base(struct export_conf *ec, const char *text)
{
	int keep = config_writable_count(ec), n = keep;
	char **branches;
	enum union_role *roles;
	const char *p = text;

	for (const char *q = text; *q; q++)
		n += *q == '\n';
	n += *text != '\0';
	if (n > UNION_MAX_BRANCHES || n == keep)
		return -EINVAL;
	branches = calloc((size_t)n, sizeof(*branches));
	roles = calloc((size_t)n, sizeof(*roles));
	if (!branches || !roles) {
		free(branches);
		free(roles);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		if (i < keep) {
			branches[i] = ec->ec_branches[i];
			ec->ec_branches[i] = NULL;
			roles[i] = UNION_BRANCH_RW;
			continue;
		}
		size_t len = strcspn(p, "\n");

		branches[i] = strndup(p, len);
		roles[i] = UNION_BRANCH_RO;
		p += len + (p[len] == '\n');
		if (!branches[i] || branches[i][0] != '/') {
			int rc = branches[i] ? -EINVAL : -ENOMEM;

			for (int k = keep; k <= i; k++)
				free(branches[k]);
			for (int k = 0; k < keep; k++)
				ec->ec_branches[k] = branches[k];
			free(branches);
			free(roles);
			return rc;
		}
	}
	for (int i = 0; i < ec->ec_nbranches; i++)
		free(ec->ec_branches[i]);
	free(ec->ec_branches);
	free(ec->ec_roles);
	ec->ec_branches = branches;
	ec->ec_roles = roles;
	ec->ec_nbranches = n;
	return 0;
}

bool config_same_branches(const struct export_conf *a, const struct export_conf *b)
{
	if (a->ec_nbranches != b->ec_nbranches)
		return false;
	for (int i = 0; i < a->ec_nbranches; i++) {
		if (strcmp(a->ec_branches[i], b->ec_branches[i]) != 0)
			return false;
		/* The top's default follows upper=, which is compared on its own. */
		if (i == 0 && !a->ec_top_role_given && !b->ec_top_role_given)
			continue;
		if (config_branch_role(a, i) != config_branch_role(b, i))
			return false;
	}
	return true;
}
