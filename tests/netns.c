#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netns.h"

static bool netns_loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;
	int e;

	if (fd < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	ok = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
	ifr.ifr_flags |= IFF_UP;
	ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	e = errno;
	close(fd);
	errno = e;
	return ok;
}

bool netns_enter_own(void)
{
	return unshare(CLONE_NEWNET) == 0 && netns_loopback_up();
}
