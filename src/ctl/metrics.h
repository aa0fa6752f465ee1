/*
 * The --metrics endpoint's HTTP side (metrics.c): its listening socket and the response to
 * a request head. Connections are the control socket's (control.c): it reads a head of at
 * most METRICS_HEAD_MAX bytes and writes what these return.
 */
#ifndef UNFS_CTL_METRICS_H
#define UNFS_CTL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_HEAD_MAX 4096       /* bytes of a metrics request's head */

/* A whole HTTP/1.0 response: status ("200 OK") and body. malloc()ed; NULL: out of memory. */
char *metrics_response(const char *status, const char *body);
/*
 * The response to a request head: GET /metrics (or /) gets the statistics and the gauges
 * given here; anything else gets a short error.
 */
struct locks_counts;
/*
 * locks: the NLM lock table's figures, as gauges, with lock_callbacks, the GRANTED callbacks
 * pending; NULL: the server has no lock manager (and lock_callbacks is not shown).
 */
char *metrics_answer(const char *head, long long uptime, unsigned mounts,
		     const struct locks_counts *locks, uint64_t lock_callbacks);
/*
 * A non-blocking socket listening on addrport ("ADDR:PORT", "[ADDR6]:PORT"), or -1 with
 * the cause and fix in err.
 */
int metrics_listen(const char *addrport, char *err, size_t errlen);

#endif
