/*
 * upper= templates as text: checked when the config is read, expanded with a client's
 * key when its view is made or found (see views.h).
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "log.h"
#include "views.h"

int views_upper_check(const char *tmpl, char *err, size_t errlen)
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

bool views_upper_by_name(const char *tmpl)
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

int views_upper_expand(const char *tmpl, const char *client, char *out, size_t outlen)
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
