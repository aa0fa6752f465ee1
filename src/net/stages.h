/*
 * Where a TCP call's time goes, as a build option (make STAGES=1, which defines
 * NET_STAGE_TIMES): each call is stamped when its record is complete on the loop, when a
 * worker starts and ends it, when the loop takes its reply back and when the reply's last
 * byte is written; the server logs the mean of each step at shutdown. Without the option
 * every stamp compiles to nothing.
 */
#ifndef UNFS_NET_STAGES_H
#define UNFS_NET_STAGES_H

#include <stdint.h>

enum net_stage {
	NET_ST_READ,     /* record complete, on the loop */
	NET_ST_START,    /* a worker took it */
	NET_ST_END,      /* the worker has the reply */
	NET_ST_DONE,     /* the loop took the reply back */
	NET_ST_SENT,     /* its last byte written */
	NET_ST_N,
};

#ifdef NET_STAGE_TIMES
#include "clock.h"

struct net_stamps {
	uint64_t ts_at[NET_ST_N];
};

struct net_stage_sums {
	uint64_t ss_calls;
	uint64_t ss_ns[NET_ST_N];  /* [s]: time from stage s - 1 to s, summed */
};

static inline void net_stamp(struct net_stamps *s, enum net_stage st)
{
	s->ts_at[st] = (uint64_t)net_now_ns();
}

static inline void net_stages_add(struct net_stage_sums *sums, const struct net_stamps *s)
{
	sums->ss_calls++;
	for (int i = 1; i < NET_ST_N; i++)
		sums->ss_ns[i] += s->ts_at[i] - s->ts_at[i - 1];
}

#define NET_STAMP(stamps, st) net_stamp(stamps, st)
#define NET_STAGES_ADD(sums, stamps) net_stages_add(sums, stamps)
#else
#define NET_STAMP(stamps, st) ((void)0)
#define NET_STAGES_ADD(sums, stamps) ((void)0)
#endif

#endif
