/*
 * A network namespace of the test's own: port 111 and the reserved ports are then free
 * whatever else runs on the machine, and only loopback exists.
 */
#ifndef UNFS_TESTS_NETNS_H
#define UNFS_TESTS_NETNS_H

#include <stdbool.h>

/*
 * Moves the calling process (before it starts threads) into a new network namespace with
 * its loopback up. False, with errno set, when it cannot (not root): the process then
 * stays where it was.
 */
bool netns_enter_own(void);

#endif
