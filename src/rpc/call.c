/*
 * The ONC RPC call header (RFC 5531 section 9) and AUTH_SYS credentials (appendix A),
 * decoded in place with XDR primitives. Nothing here allocates: opaque bodies are
 * walked through a second memory stream over the record, and every length is checked
 * against both its protocol bound and the bytes actually present.
 */
#include <limits.h>
#include <string.h>

#include "rpc.h"

#define RPC_VERSION 2
#define RPC_MAX_AUTH_BYTES 400

/* An opaque_auth as found on the wire: flavor and where its body lies. */
struct call_auth {
	uint32_t ca_flavor;
	u_int ca_off;
	u_int ca_len;
};

/*
 * Reads flavor and length, then skips the padded body. False when the record ends
 * early; *toolong is set when the body exceeds the 400 bytes RFC 5531 allows.
 */
static bool call_auth_skip(XDR *xdrs, u_int reclen, struct call_auth *a, bool *toolong)
{
	u_int pos, padded;

	if (!xdr_u_int(xdrs, &a->ca_flavor) || !xdr_u_int(xdrs, &a->ca_len))
		return false;
	if (a->ca_len > RPC_MAX_AUTH_BYTES) {
		*toolong = true;
		return false;
	}
	pos = xdr_getpos(xdrs);
	padded = (a->ca_len + 3) & ~3u;
	if (pos > reclen || reclen - pos < padded)
		return false;
	a->ca_off = pos;
	return xdr_setpos(xdrs, pos + padded);
}

/* Decodes an AUTH_SYS body (authsys_parms); false means AUTH_BADCRED. */
static bool call_authsys(const uint8_t *body, u_int len, struct rpc_cred *cred)
{
	XDR xdrs;
	uint32_t stamp, namelen, ngroups;
	u_int pos;
	bool ok = false;

	xdrmem_create(&xdrs, (char *)body, len, XDR_DECODE);
	if (!xdr_u_int(&xdrs, &stamp) || !xdr_u_int(&xdrs, &namelen))
		goto out;
	if (namelen > RPC_MAX_MACHINE)
		goto out;
	pos = xdr_getpos(&xdrs);
	if (pos > len || len - pos < ((namelen + 3) & ~3u))
		goto out;
	memcpy(cred->rc_machine, body + pos, namelen);
	cred->rc_machine[namelen] = '\0';
	if (!xdr_setpos(&xdrs, pos + ((namelen + 3) & ~3u)))
		goto out;
	if (!xdr_u_int(&xdrs, &cred->rc_uid) || !xdr_u_int(&xdrs, &cred->rc_gid) ||
	    !xdr_u_int(&xdrs, &ngroups))
		goto out;
	if (ngroups > RPC_MAX_GROUPS)
		goto out;
	for (uint32_t i = 0; i < ngroups; i++)
		if (!xdr_u_int(&xdrs, &cred->rc_groups[i]))
			goto out;
	cred->rc_ngroups = ngroups;
	cred->rc_flavor = AUTH_SYS;
	ok = true;
out:
	xdr_destroy(&xdrs);
	return ok;
}

enum rpc_parse rpc_parse_call(const void *rec, size_t len, struct rpc_call *call)
{
	XDR xdrs;
	uint32_t mtype, rpcvers;
	struct call_auth cred, verf;
	bool toolong = false;
	enum rpc_parse st = RPC_PARSE_DROP;

	memset(call, 0, sizeof(*call));
	if (len > UINT_MAX)
		return RPC_PARSE_DROP;
	xdrmem_create(&xdrs, (char *)rec, (u_int)len, XDR_DECODE);
	if (!xdr_u_int(&xdrs, &call->rc_xid) || !xdr_u_int(&xdrs, &mtype) || mtype != CALL)
		goto out;
	if (!xdr_u_int(&xdrs, &rpcvers))
		goto out;
	if (rpcvers != RPC_VERSION) {
		st = RPC_PARSE_RPC_MISMATCH;
		goto out;
	}
	if (!xdr_u_int(&xdrs, &call->rc_prog) || !xdr_u_int(&xdrs, &call->rc_vers) ||
	    !xdr_u_int(&xdrs, &call->rc_proc))
		goto out;
	if (!call_auth_skip(&xdrs, (u_int)len, &cred, &toolong) ||
	    !call_auth_skip(&xdrs, (u_int)len, &verf, &toolong)) {
		/* An oversized body is a malformed credential the client should hear about. */
		if (toolong)
			st = RPC_PARSE_BADCRED;
		goto out;
	}
	call->rc_args_off = xdr_getpos(&xdrs);

	switch (cred.ca_flavor) {
	case AUTH_NONE:
		call->rc_cred.rc_flavor = AUTH_NONE;
		call->rc_cred.rc_uid = 65534;
		call->rc_cred.rc_gid = 65534;
		st = RPC_PARSE_OK;
		break;
	case AUTH_SYS:
		st = call_authsys((const uint8_t *)rec + cred.ca_off, cred.ca_len, &call->rc_cred)
			? RPC_PARSE_OK : RPC_PARSE_BADCRED;
		break;
	default:
		/*
		 * RPCSEC_GSS, AUTH_DH and the rest: AUTH_REJECTEDCRED, not AUTH_TOOWEAK, which
		 * stays reserved for export policy (e.g. "secure") so the two causes can be told
		 * apart in a client's error.
		 */
		st = RPC_PARSE_REJECTEDCRED;
		break;
	}
out:
	xdr_destroy(&xdrs);
	return st;
}
