#include "xdr_strict.h"

#include <stdlib.h>
#include <string.h>

bool_t xdr_string_strict(XDR *xdrs, char **sp, u_int maxsize)
{
	u_int size;
	char *s;

	if (xdrs->x_op != XDR_DECODE)
		return xdr_string(xdrs, sp, maxsize);
	if (!xdr_u_int(xdrs, &size) || size > maxsize)
		return FALSE;
	s = *sp;
	if (s == NULL && (s = malloc((size_t)size + 1)) == NULL)
		return FALSE;
	if (!xdr_opaque(xdrs, s, size) || memchr(s, '\0', size) != NULL) {
		if (*sp == NULL)
			free(s);
		return FALSE;
	}
	s[size] = '\0';
	*sp = s;
	return TRUE;
}
