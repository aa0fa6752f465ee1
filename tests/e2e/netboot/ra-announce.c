/*
 * ra-announce IFNAME: sends an ICMPv6 router advertisement to all nodes on IFNAME twice a
 * second, from the device's link-local address, with router lifetime 0 and no options, so
 * it configures nothing in a guest. It only ends the wait of qemu's PXE ROM (iPXE) for a
 * router advertisement (about 13 s per boot when none comes). Built and run by
 * tests/e2e/test_pxe.sh.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	/*
	 * ICMPv6 router advertisement: type 134, hop limit 64, no flags, router lifetime 0,
	 * no options (the kernel fills in the checksum)
	 */
	unsigned char ra[16] = { 134, 0, 0, 0, 64, 0, 0, 0 };
	struct sockaddr_in6 to;
	unsigned ifi;
	int s, hops = 255;

	if (argc != 2 || !(ifi = if_nametoindex(argv[1])))
		return fprintf(stderr, "usage: ra-announce IFNAME\n"), 2;
	s = socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	if (s < 0)
		return perror("ra-announce: socket"), 1;
	setsockopt(s, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof(hops));
	setsockopt(s, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifi, sizeof(ifi));
	memset(&to, 0, sizeof(to));
	to.sin6_family = AF_INET6;
	to.sin6_scope_id = ifi;
	inet_pton(AF_INET6, "ff02::1", &to.sin6_addr);
	for (;;) { /* fails until the device has its link-local address */
		sendto(s, ra, sizeof(ra), 0, (struct sockaddr *)&to, sizeof(to));
		usleep(500000);
	}
}
