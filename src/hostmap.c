/*
 * The client host name map (see hostmap.h). Addresses are kept in the canonical text form
 * the server prints for a peer (rpc_addr_text: IPv4-mapped IPv6 as IPv4), sorted, so a
 * lookup is one canonicalisation and a binary search.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "hostmap.h"
#include "rpc.h"

#define HOSTMAP_ADDR_MAX INET6_ADDRSTRLEN
#define HOSTMAP_LINE_MAX 4096

struct hostmap_entry {
	char he_addr[HOSTMAP_ADDR_MAX];
	char *he_name;
	int he_line;
};

struct hostmap {
	char *hm_path;
	struct hostmap_entry *hm_entries;
	size_t hm_n;
};

/* A numeric address in the sockaddr form getnameinfo wants; IPv4-mapped IPv6 becomes IPv4. */
static bool hostmap_parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *sslen)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		*sslen = sizeof(*s4);
		return true;
	}
	if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
		return false;
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		struct in_addr a4;

		memcpy(&a4, &s6->sin6_addr.s6_addr[12], sizeof(a4));
		memset(ss, 0, sizeof(*ss));
		s4->sin_family = AF_INET;
		s4->sin_addr = a4;
		*sslen = sizeof(*s4);
		return true;
	}
	s6->sin6_family = AF_INET6;
	*sslen = sizeof(*s6);
	return true;
}

/* As the server writes a peer's address (rpc_addr_text), so a peer's text finds its line. */
static bool hostmap_canonical(const char *text, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sslen;

	return hostmap_parse_addr(text, &ss, &sslen) &&
	       rpc_addr_text((const struct sockaddr *)&ss, sslen, out, len);
}

bool hostmap_is_address(const char *text)
{
	struct sockaddr_storage ss;
	socklen_t sslen;

	return hostmap_parse_addr(text, &ss, &sslen);
}

bool hostmap_name_ok(const char *name)
{
	size_t len = strlen(name);

	/* "." and ".." would name the parent; a leading '.' a hidden directory, '-' an option. */
	if (len == 0 || len > HOSTMAP_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
			return false;
	return true;
}

bool hostmap_name_key(const char *name, char *out, size_t len)
{
	size_t n = strlen(name);

	if (!hostmap_name_ok(name) || n >= len)
		return false;
	for (size_t k = 0; k <= n; k++)
		out[k] = (char)tolower((unsigned char)name[k]);
	return true;
}

static int hostmap_cmp(const void *a, const void *b)
{
	const struct hostmap_entry *x = a, *y = b;
	int c = strcmp(x->he_addr, y->he_addr);

	/* Equal addresses stay in file order, so the load can name the first line. */
	return c ? c : (x->he_line > y->he_line) - (x->he_line < y->he_line);
}

void hostmap_free(struct hostmap *hm)
{
	if (!hm)
		return;
	for (size_t i = 0; i < hm->hm_n; i++)
		free(hm->hm_entries[i].he_name);
	free(hm->hm_entries);
	free(hm->hm_path);
	free(hm);
}

/* Adds "ADDRESS NAME" of line lineno; aliases after the name are ignored. */
static int hostmap_add(struct hostmap *hm, size_t *cap, char *line, int lineno, char *err,
		       size_t errlen)
{
	const char *sep = " \t\r\n\f\v";
	char *save = NULL, *addr, *name, *hash = strchr(line, '#');
	char key[HOSTMAP_NAME_MAX + 1];
	struct hostmap_entry *e;

	if (hash)
		*hash = '\0';
	addr = strtok_r(line, sep, &save);
	if (!addr)
		return 0;
	name = strtok_r(NULL, sep, &save);
	if (!name) {
		snprintf(err, errlen, "%s:%d: '%.64s' has no host name; write ADDRESS NAME, e.g. "
			 "192.168.50.101 lab01", hm->hm_path, lineno, addr);
		return -1;
	}
	if (hm->hm_n == HOSTMAP_MAX_ENTRIES) {
		snprintf(err, errlen, "%s:%d: more than %d addresses; split the lab over several "
			 "servers or use %%a", hm->hm_path, lineno, HOSTMAP_MAX_ENTRIES);
		return -1;
	}
	if (hm->hm_n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct hostmap_entry *ne = realloc(hm->hm_entries, ncap * sizeof(*ne));

		if (!ne) {
			snprintf(err, errlen, "%s:%d: out of memory", hm->hm_path, lineno);
			return -1;
		}
		hm->hm_entries = ne;
		*cap = ncap;
	}
	e = &hm->hm_entries[hm->hm_n];
	if (!hostmap_canonical(addr, e->he_addr, sizeof(e->he_addr))) {
		snprintf(err, errlen, "%s:%d: '%.64s' is not a numeric IPv4 or IPv6 address; each "
			 "line is ADDRESS NAME", hm->hm_path, lineno, addr);
		return -1;
	}
	if (!hostmap_name_key(name, key, sizeof(key))) {
		snprintf(err, errlen, "%s:%d: host name '%.64s' cannot name a directory; use "
			 "letters, digits, '-', '_' and '.' (not first)", hm->hm_path, lineno, name);
		return -1;
	}
	e->he_name = strdup(key);
	if (!e->he_name) {
		snprintf(err, errlen, "%s:%d: out of memory", hm->hm_path, lineno);
		return -1;
	}
	e->he_line = lineno;
	hm->hm_n++;
	return 0;
}

/*
 * Read with stdio by the path the hosts setting gives, following symbolic links as the
 * administrator would expect: an exception to fsio, whose rules are for what clients put in
 * branches (include/README).
 */
int hostmap_load(const char *path, struct hostmap **out, char *err, size_t errlen)
{
	struct hostmap *hm = calloc(1, sizeof(*hm));
	char line[HOSTMAP_LINE_MAX];
	size_t cap = 0;
	int lineno = 0;
	FILE *f = NULL;

	*out = NULL;
	if (!hm || !(hm->hm_path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: %s; create it (lines of ADDRESS NAME) or fix the hosts "
			 "setting", path, strerror(errno));
		goto fail;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes; shorten it", path,
				 lineno, HOSTMAP_LINE_MAX - 2);
			goto fail;
		}
		if (hostmap_add(hm, &cap, line, lineno, err, errlen) < 0)
			goto fail;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error; check the file", path);
		goto fail;
	}
	fclose(f);
	if (hm->hm_n > 1)
		qsort(hm->hm_entries, hm->hm_n, sizeof(*hm->hm_entries), hostmap_cmp);
	for (size_t i = 1; i < hm->hm_n; i++) {
		const struct hostmap_entry *a = &hm->hm_entries[i - 1], *b = &hm->hm_entries[i];

		if (!strcmp(a->he_addr, b->he_addr)) {
			snprintf(err, errlen, "%s:%d: %s is already named %.64s on line %d; an address "
				 "has one name (its layer's), remove one line", path, b->he_line,
				 b->he_addr, a->he_name, a->he_line);
			hostmap_free(hm);
			return -1;
		}
	}
	*out = hm;
	return 0;
fail:
	if (f)
		fclose(f);
	hostmap_free(hm);
	return -1;
}

const char *hostmap_path(const struct hostmap *hm)
{
	return hm->hm_path;
}

const char *hostmap_find(const struct hostmap *hm, const char *addr)
{
	struct hostmap_entry key, *e;
	size_t lo = 0, hi;

	if (!hm || !hostmap_canonical(addr, key.he_addr, sizeof(key.he_addr)))
		return NULL;
	hi = hm->hm_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c;

		e = &hm->hm_entries[mid];
		c = strcmp(key.he_addr, e->he_addr);
		if (c == 0)
			return e->he_name;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Whether name resolves (forward) to the address in ss. */
static bool hostmap_confirms(const char *name, const struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_family = ss->ss_family, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	bool ok = false;

	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return false;
	for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET)
			ok = !memcmp(&((struct sockaddr_in *)ai->ai_addr)->sin_addr,
				     &((const struct sockaddr_in *)ss)->sin_addr, sizeof(struct in_addr));
		else if (ai->ai_family == AF_INET6)
			ok = !memcmp(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr,
				     &((const struct sockaddr_in6 *)ss)->sin6_addr,
				     sizeof(struct in6_addr));
	}
	freeaddrinfo(res);
	return ok;
}

int hostmap_reverse(const char *addr, char *name, size_t len, char *err, size_t errlen)
{
	char host[NI_MAXHOST];
	struct sockaddr_storage ss;
	socklen_t sslen;
	size_t hlen;
	int r;

	if (!hostmap_parse_addr(addr, &ss, &sslen)) {
		snprintf(err, errlen, "'%.64s' is not a numeric address", addr);
		return -1;
	}
	r = getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof(host), NULL, 0, NI_NAMEREQD);
	if (r != 0) {
		snprintf(err, errlen, "reverse DNS has no name for %s (%s)", addr, gai_strerror(r));
		return -1;
	}
	hlen = strlen(host);
	if (hlen > 1 && host[hlen - 1] == '.')
		host[--hlen] = '\0';
	if (!hostmap_name_key(host, name, len)) {
		snprintf(err, errlen, "reverse DNS names %s '%.64s', which cannot name a directory",
			 addr, host);
		return -1;
	}
	if (!hostmap_confirms(name, &ss)) {
		snprintf(err, errlen, "reverse DNS names %s '%.64s', but that name does not resolve "
			 "back to %s", addr, name, addr);
		return -1;
	}
	return 0;
}
