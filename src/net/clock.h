/* The monotonic clock in nanoseconds, as src/net's timing (pool, polling, stages) reads it. */
#ifndef UNFS_NET_CLOCK_H
#define UNFS_NET_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t net_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
