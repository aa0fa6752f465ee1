/*
 * XDR strings for names and paths. libtirpc's xdr_string accepts NUL bytes inside a
 * string and the decoded C string then silently ends early ("a\0b" would name "a").
 * The generated code calls this instead (the Makefile rewrites rpcgen's output), so such a
 * call fails to decode and gets GARBAGE_ARGS, as knfsd answers.
 */
#ifndef UNFS_XDR_STRICT_H
#define UNFS_XDR_STRICT_H

#include <rpc/rpc.h>

bool_t xdr_string_strict(XDR *xdrs, char **sp, u_int maxsize);

#endif
