/*
 * Client host names for upper= templates with %h: a map file in the form of /etc/hosts
 * ("ADDRESS NAME [ALIAS...]", '#' comments; the first name counts) and, for addresses it
 * does not list, reverse DNS confirmed by a forward lookup (a PTR record alone is anyone's
 * claim). A host name names a directory, so only names of letters, digits, '-', '_' and
 * '.' are accepted, kept in lower case.
 */
#ifndef UNFS_HOSTMAP_H
#define UNFS_HOSTMAP_H

#include <stdbool.h>
#include <stddef.h>

#define HOSTMAP_NAME_MAX 253     /* a DNS name's longest text form */
#define HOSTMAP_MAX_ENTRIES 65536

struct hostmap;

/* Reads the map file path. Returns 0, or -1 with "PATH:LINE: message" (cause and fix) in err. */
int hostmap_load(const char *path, struct hostmap **out, char *err, size_t errlen);
void hostmap_free(struct hostmap *hm);

/* The file it was read from. */
const char *hostmap_path(const struct hostmap *hm);

/* The name the map gives the numeric address addr (any text form), or NULL. */
const char *hostmap_find(const struct hostmap *hm, const char *addr);

/*
 * The host name of addr by reverse DNS, confirmed: the name must resolve back to addr.
 * May block on the resolver: never call it on the event loop. Returns 0, or -1 with the
 * cause and the fix in err.
 */
int hostmap_reverse(const char *addr, char *name, size_t len, char *err, size_t errlen);

/* Whether name is a host name that can name a directory (see above); upper case allowed. */
bool hostmap_name_ok(const char *name);

/* Whether name is such a host name and fits len bytes; out receives it in lower case. */
bool hostmap_name_key(const char *name, char *out, size_t len);

/* Whether text is a numeric IPv4 or IPv6 address. */
bool hostmap_is_address(const char *text);

#endif
