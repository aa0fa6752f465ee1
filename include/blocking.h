/*
 * Marks the stretches where a worker thread waits for the disk (fsync, a group commit, a
 * long copy), so the worker pool can run another thread meanwhile. Outside a worker pool
 * the marks cost a load and a branch.
 */
#ifndef UNFS_BLOCKING_H
#define UNFS_BLOCKING_H

struct blocking_hooks {
	void (*bh_enter)(void);
	void (*bh_leave)(void);
};

/* Set once, before serving, by whoever owns the threads. */
void blocking_set_hooks(const struct blocking_hooks *h);

void blocking_enter(void);
void blocking_leave(void);

#endif
