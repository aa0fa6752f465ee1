/*
 * The rules for names in a union directory: which a client may use, and which the union
 * keeps to itself. A leaf: every union file uses it, and it calls nothing else of the
 * union layer.
 */
#include <errno.h>
#include <string.h>

#include "uint.h"

int uname_check(const char *name)
{
	size_t len;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	len = strlen(name);
	return len > STORE_NAME_MAX ? -ENAMETOOLONG : 0;
}

bool uname_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

bool uname_hidden(uint64_t dir, const char *name)
{
	return uwh_marker(name) || (dir == STORE_ROOT_INO && !strcmp(name, UNION_WORK_NAME));
}
