/* The blocking marks and parking (see include/blocking.h). */
#include <stddef.h>

#include "blocking.h"

static const struct blocking_hooks *blocking_hooks;

void blocking_set_hooks(const struct blocking_hooks *h)
{
	blocking_hooks = h;
}

void blocking_enter(void)
{
	if (blocking_hooks)
		blocking_hooks->bh_enter();
}

void blocking_leave(void)
{
	if (blocking_hooks)
		blocking_hooks->bh_leave();
}

bool blocking_park(struct blocking_queue *q)
{
	return blocking_hooks && blocking_hooks->bh_park(q);
}

void blocking_wake(struct blocking_queue *q)
{
	struct blocking_parked *p = q->bq_head, *next;

	q->bq_head = q->bq_tail = NULL;
	for (; p != NULL; p = next) {
		next = p->bp_next;
		p->bp_next = NULL;
		blocking_hooks->bh_wake(p); /* only the hooks' owner parks anything */
	}
}

bool blocking_parked(void)
{
	return blocking_hooks && blocking_hooks->bh_parked();
}

uint64_t blocking_parked_ns(void)
{
	return blocking_hooks ? blocking_hooks->bh_parked_ns() : 0;
}

bool blocking_resumed(void)
{
	return blocking_parked_ns() > 0;
}

bool blocking_long_begin(void)
{
	return !blocking_hooks || blocking_hooks->bh_long_begin();
}

void blocking_long_end(void)
{
	if (blocking_hooks)
		blocking_hooks->bh_long_end();
}
