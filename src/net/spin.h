/*
 * Busy polling (private to src/net): how long the loop keeps polling its sockets without
 * sleeping after a call arrived or a reply went out. A client with one call in flight
 * sends its next call tens of microseconds after our reply; a loop asleep by then pays
 * the wake-up of an idle CPU, which on a virtual machine costs more than the call itself.
 *
 * The window adapts, as KVM's halt polling does: a call that arrived within the longest
 * window (busy_poll) would have been caught by polling, so the window grows back to it;
 * one that came later shrinks it by half, down to nothing, so a client calling now and
 * then does not cost a core spinning after each of its calls.
 */
#ifndef UNFS_NET_SPIN_H
#define UNFS_NET_SPIN_H

#include <stdbool.h>
#include <stdint.h>

/* Windows shorter than this are not worth a poll: the window is then 0. */
#define SPIN_MIN_NS 10000

struct spin {
	int64_t sp_max_ns;      /* 0: never poll */
	int64_t sp_window_ns;   /* the current window */
	int64_t sp_last_ns;     /* the last call arrival or reply sent; 0: none yet */
};

void spin_init(struct spin *sp, unsigned max_us);
/* A call arrived at now (CLOCK_MONOTONIC ns): the window adapts to the gap since the last event. */
void spin_call(struct spin *sp, int64_t now);
/* Something else worth polling after happened at now (replies went out). */
void spin_event(struct spin *sp, int64_t now);
/* Whether to keep polling at now. */
bool spin_keep(const struct spin *sp, int64_t now);

#endif
