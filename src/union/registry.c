/*
 * The open exports: what the sweeper (sweep.c) visits, and what a shortage of descriptors
 * empties the resolve caches of.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "uint.h"

static pthread_mutex_t ureg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct union_export **ureg_open;
static size_t ureg_n, ureg_cap;

int ureg_add(struct union_export *ux)
{
	int r = 0;

	pthread_mutex_lock(&ureg_lock);
	if (ureg_n == ureg_cap) {
		size_t cap = ureg_cap ? 2 * ureg_cap : 16;
		struct union_export **n = realloc(ureg_open, cap * sizeof(*n));

		if (n) {
			ureg_open = n;
			ureg_cap = cap;
		} else {
			r = -ENOMEM;
		}
	}
	if (r == 0)
		ureg_open[ureg_n++] = ux;
	pthread_mutex_unlock(&ureg_lock);
	return r;
}

bool ureg_remove(struct union_export *ux)
{
	bool last;

	pthread_mutex_lock(&ureg_lock);
	for (size_t i = 0; i < ureg_n; i++)
		if (ureg_open[i] == ux) {
			ureg_open[i] = ureg_open[--ureg_n];
			break;
		}
	last = ureg_n == 0;
	if (last) {
		free(ureg_open);
		ureg_open = NULL;
		ureg_cap = 0;
	}
	pthread_mutex_unlock(&ureg_lock);
	return last;
}

void ureg_each(void (*fn)(struct union_export *ux, void *arg), void *arg)
{
	pthread_mutex_lock(&ureg_lock);
	for (size_t i = 0; i < ureg_n; i++)
		fn(ureg_open[i], arg);
	pthread_mutex_unlock(&ureg_lock);
}
