/* Client rules of exports: parsing specifiers and options, resolving host names, matching peers. */
#include "exports.h"
#include "log.h"
#include "rpc.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORTS_OPTS_EXPECTED \
	"expected ro, rw, root_squash, no_root_squash, all_squash, anonuid=N, anongid=N, " \
	"secure, insecure, sync, async, upper=TEMPLATE"

void exports_default_opts(struct export_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->eo_ro = false;
	o->eo_squash = SQUASH_ROOT;
	o->eo_anonuid = EXPORTS_ANON_ID;
	o->eo_anongid = EXPORTS_ANON_ID;
	o->eo_secure = true;
	o->eo_async = false;
}

/* Decimal 0..UINT32_MAX - 1: (uint32_t)-1 means "no id" to the kernel, so it is no identity. */
static int exports_parse_id(const char *s, uint32_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX - 1)
			return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* One word of exports_parse_opts. */
static int exports_opt_word(struct export_opts *o, const char *word, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		int squash;          /* -1: not a squash word */
		int ro, secure, async;
	} words[] = {
		{ "rw", -1, 0, -1, -1 },           { "ro", -1, 1, -1, -1 },
		{ "root_squash", SQUASH_ROOT, -1, -1, -1 },
		{ "no_root_squash", SQUASH_NONE, -1, -1, -1 },
		{ "all_squash", SQUASH_ALL, -1, -1, -1 },
		{ "secure", -1, -1, 1, -1 },       { "insecure", -1, -1, 0, -1 },
		{ "sync", -1, -1, -1, 0 },         { "async", -1, -1, -1, 1 },
	};
	uint32_t id;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strcmp(word, words[i].name))
			continue;
		if (words[i].squash >= 0)
			o->eo_squash = (enum squash_mode)words[i].squash;
		if (words[i].ro >= 0)
			o->eo_ro = words[i].ro;
		if (words[i].secure >= 0)
			o->eo_secure = words[i].secure;
		if (words[i].async >= 0)
			o->eo_async = words[i].async;
		return 0;
	}
	if (!strncmp(word, "anonuid=", 8) || !strncmp(word, "anongid=", 8)) {
		if (exports_parse_id(word + 8, &id) < 0) {
			err_set(err, errlen, "export option '%s': '%s' is not an id in 0..%u", word,
				word + 8, UINT32_MAX - 1);
			return -1;
		}
		if (word[4] == 'u')
			o->eo_anonuid = id;
		else
			o->eo_anongid = id;
		return 0;
	}
	err_set(err, errlen, "unknown export option '%s' (" EXPORTS_OPTS_EXPECTED ")", word);
	return -1;
}

int exports_parse_opts(struct export_opts *opts, const char *words, char *err, size_t errlen)
{
	struct export_opts o = *opts;
	const char *p = words, *end;
	char word[64];
	size_t len;

	if (!words || !*words) {
		err_set(err, errlen, "no export options given (" EXPORTS_OPTS_EXPECTED ")");
		return -1;
	}
	for (;; p = end + 1) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0) {
			err_set(err, errlen, "empty export option in '%s' (" EXPORTS_OPTS_EXPECTED ")",
				words);
			return -1;
		}
		if (len >= sizeof(word)) {
			err_set(err, errlen, "unknown export option '%.*s' (" EXPORTS_OPTS_EXPECTED ")",
				(int)len, p);
			return -1;
		}
		memcpy(word, p, len);
		word[len] = '\0';
		if (exports_opt_word(&o, word, err, errlen) < 0)
			return -1;
		if (!end)
			break;
	}
	*opts = o;
	return 0;
}

static void exports_map_v4(const struct in_addr *a4, struct in6_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->s6_addr[10] = 0xff;
	out->s6_addr[11] = 0xff;
	memcpy(&out->s6_addr[12], a4, 4);
}

/* Clears the bits past the prefix, so "10.1.2.3/8" and "10.0.0.0/8" are one network. */
static void exports_mask(struct in6_addr *a, unsigned prefix)
{
	unsigned i;

	for (i = 0; i < 16; i++) {
		if (prefix >= 8 * (i + 1))
			continue;
		if (prefix <= 8 * i)
			a->s6_addr[i] = 0;
		else
			a->s6_addr[i] &= (uint8_t)(0xff << (8 * (i + 1) - prefix));
	}
}

static bool exports_in_net(const struct exports_net *xn, const struct in6_addr *a)
{
	struct in6_addr m = *a;

	exports_mask(&m, xn->xn_prefix);
	return memcmp(&m, &xn->xn_addr, sizeof(m)) == 0;
}

/* Letters, digits, '-', '.' and '_' (seen in lab host names), not starting with '-' or '.'. */
static bool exports_host_name_ok(const char *s)
{
	const char *p;

	if (!*s || *s == '-' || *s == '.')
		return false;
	for (p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_'))
			return false;
	return true;
}

/* Decimal 0..max, no sign or spaces. */
static int exports_prefix(const char *s, unsigned max, unsigned *out)
{
	unsigned v = 0;

	if (!*s || strlen(s) > 3)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

int exports_parse_spec(const char *spec, struct export_rule *out, char *err, size_t errlen)
{
	char addr[EXPORTS_SPEC_MAX + 1];
	const char *slash;
	struct in_addr a4;
	struct in6_addr a6;
	unsigned prefix;
	size_t len;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	len = strlen(spec);
	if (len == 0 || len > EXPORTS_SPEC_MAX) {
		err_set(err, errlen,
			    "client '%.64s' is empty or longer than %d bytes; give *, an address, a CIDR network or a host name",
			    spec, EXPORTS_SPEC_MAX);
		goto out;
	}
	out->er_spec = strdup(spec);
	if (!out->er_spec) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	if (!strcmp(spec, "*")) {
		out->er_kind = EXPORTS_ANY;
		return 0;
	}
	slash = strchr(spec, '/');
	memcpy(addr, spec, slash ? (size_t)(slash - spec) : len);
	addr[slash ? (size_t)(slash - spec) : len] = '\0';
	out->er_nets = calloc(1, sizeof(*out->er_nets));
	if (!out->er_nets) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	if (inet_pton(AF_INET, addr, &a4) == 1) {
		prefix = 32;
		if (slash && exports_prefix(slash + 1, 32, &prefix) < 0) {
			err_set(err, errlen,
				    "client '%s': '%s' is not an IPv4 prefix length 0..32; write e.g. 10.0.0.0/8",
				    spec, slash + 1);
			goto out;
		}
		exports_map_v4(&a4, &out->er_nets[0].xn_addr);
		prefix += 96;
	} else if (inet_pton(AF_INET6, addr, &a6) == 1) {
		prefix = 128;
		if (slash && exports_prefix(slash + 1, 128, &prefix) < 0) {
			err_set(err, errlen,
				    "client '%s': '%s' is not an IPv6 prefix length 0..128; write e.g. fd00::/8",
				    spec, slash + 1);
			goto out;
		}
		out->er_nets[0].xn_addr = a6;
	} else if (!slash && exports_host_name_ok(spec)) {
		free(out->er_nets);
		out->er_nets = NULL;
		out->er_kind = EXPORTS_HOST;
		return 0;
	} else {
		err_set(err, errlen,
			    "client '%s' is not *, an IPv4 or IPv6 address, a CIDR network (10.0.0.0/8, fd00::/8) or a host name",
			    spec);
		goto out;
	}
	out->er_kind = EXPORTS_NET;
	out->er_nets[0].xn_prefix = prefix;
	exports_mask(&out->er_nets[0].xn_addr, prefix);
	out->er_nnets = 1;
	rc = 0;
out:
	if (rc < 0)
		exports_rule_free(out);
	return rc;
}

int exports_rule_resolve(struct export_rule *r, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct exports_net *nets = NULL;
	struct in6_addr a;
	int n = 0, i, gai, rc = -1;

	if (r->er_kind != EXPORTS_HOST)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	gai = getaddrinfo(r->er_spec, NULL, &hints, &res);
	if (gai != 0) {
		err_set(err, errlen,
			    "%sclient host name '%s' does not resolve (%s); fix the name, add it to /etc/hosts, or give its address",
			    r->er_where ? r->er_where : "", r->er_spec, gai_strerror(gai));
		goto out;
	}
	for (ai = res; ai; ai = ai->ai_next)
		n++;
	nets = calloc((size_t)n, sizeof(*nets));
	if (!nets) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	n = 0;
	for (ai = res; ai; ai = ai->ai_next) {
		if (!exports_peer_addr(ai->ai_addr, &a))
			continue;
		for (i = 0; i < n; i++)
			if (!memcmp(&nets[i].xn_addr, &a, sizeof(a)))
				break;
		if (i < n)
			continue;
		nets[n].xn_addr = a;
		nets[n].xn_prefix = 128;
		n++;
	}
	if (n == 0) {
		err_set(err, errlen,
			    "%sclient host name '%s' has no IPv4 or IPv6 address; give its address instead",
			    r->er_where ? r->er_where : "", r->er_spec);
		goto out;
	}
	free(r->er_nets);
	r->er_nets = nets;
	r->er_nnets = n;
	nets = NULL;
	rc = 0;
out:
	free(nets);
	if (res)
		freeaddrinfo(res);
	return rc;
}

bool exports_peer_addr(const struct sockaddr *sa, struct in6_addr *out)
{
	if (sa->sa_family == AF_INET) {
		exports_map_v4(&((const struct sockaddr_in *)sa)->sin_addr, out);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		*out = ((const struct sockaddr_in6 *)sa)->sin6_addr;
		return true;
	}
	return false;
}

int exports_match(const struct export_rule *rules, int nrules, const struct sockaddr *peer)
{
	struct in6_addr a;
	bool have;
	int i, j;

	have = exports_peer_addr(peer, &a);
	for (i = 0; i < nrules; i++) {
		if (rules[i].er_kind == EXPORTS_ANY)
			return i;
		if (!have)
			continue;
		for (j = 0; j < rules[i].er_nnets; j++)
			if (exports_in_net(&rules[i].er_nets[j], &a))
				return i;
	}
	return -1;
}

void exports_rule_addrs(const struct export_rule *r, char *buf, size_t len)
{
	char one[INET6_ADDRSTRLEN];
	size_t used = 0;
	int i, n;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < r->er_nnets; i++) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6,
					  .sin6_addr = r->er_nets[i].xn_addr };

		rpc_addr_text((const struct sockaddr *)&a, sizeof(a), one, sizeof(one));
		n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", one);
		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
}

void exports_rule_free(struct export_rule *r)
{
	free(r->er_spec);
	free(r->er_nets);
	free(r->er_where);
	memset(r, 0, sizeof(*r));
}

void exports_rules_free(struct export_rule *rules, int nrules)
{
	int i;

	for (i = 0; i < nrules; i++)
		exports_rule_free(&rules[i]);
	free(rules);
}
