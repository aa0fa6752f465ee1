/* Busy polling's window (spin.h). Pure arithmetic on the times given: no clock of its own. */
#include "spin.h"

void spin_init(struct spin *sp, unsigned max_us)
{
	sp->sp_max_ns = (int64_t)max_us * 1000;
	sp->sp_window_ns = sp->sp_max_ns >= SPIN_MIN_NS ? sp->sp_max_ns : 0;
	sp->sp_last_ns = 0;
}

void spin_call(struct spin *sp, int64_t now)
{
	if (sp->sp_max_ns < SPIN_MIN_NS)
		return;
	if (sp->sp_last_ns != 0 && now - sp->sp_last_ns <= sp->sp_max_ns) {
		sp->sp_window_ns = sp->sp_max_ns;
	} else if (sp->sp_last_ns != 0) {
		sp->sp_window_ns /= 2;
		if (sp->sp_window_ns < SPIN_MIN_NS)
			sp->sp_window_ns = 0;
	}
	sp->sp_last_ns = now;
}

void spin_event(struct spin *sp, int64_t now)
{
	if (sp->sp_max_ns >= SPIN_MIN_NS)
		sp->sp_last_ns = now;
}

bool spin_keep(const struct spin *sp, int64_t now)
{
	return sp->sp_window_ns > 0 && sp->sp_last_ns != 0 && now - sp->sp_last_ns < sp->sp_window_ns;
}
