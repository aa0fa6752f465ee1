/* The blocking marks (see include/blocking.h). */
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
