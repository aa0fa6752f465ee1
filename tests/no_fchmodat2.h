/*
 * For tests only: makes fchmodat2(2) (Linux 6.6) fail with ENOSYS, as on older kernels, so
 * that fsio's fallback for those kernels runs whatever kernel the tests run on (see
 * no_syscall.h: the server started afterwards inherits it, and it cannot be undone).
 */
#ifndef TEST_NO_FCHMODAT2_H
#define TEST_NO_FCHMODAT2_H

#include "no_syscall.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* as in src/fsio/fsio.c: C libraries older than the call */
#endif

/* 0, or -errno when the kernel refuses the filter. */
static inline int test_no_fchmodat2(void)
{
	return test_no_syscall(SYS_fchmodat2);
}

#endif
