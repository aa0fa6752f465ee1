/*
 * A caller's address as text (include/rpc.h). A dual-stack socket shows an IPv4 client as
 * ::ffff:a.b.c.d: written as a.b.c.d, so a client has one name in logs, host keys and files
 * whichever socket its call came in on.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "rpc.h"

bool rpc_addr_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t buflen)
{
	const struct in6_addr *a6;

	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
				 (socklen_t)buflen) != NULL;
	if (sa->sa_family != AF_INET6 || len < sizeof(struct sockaddr_in6))
		return false;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6))
		return inet_ntop(AF_INET, &a6->s6_addr[12], buf, (socklen_t)buflen) != NULL;
	return inet_ntop(AF_INET6, a6, buf, (socklen_t)buflen) != NULL;
}
