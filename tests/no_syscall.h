/*
 * For tests only: makes one system call fail with ENOSYS, as on kernels older than the
 * call, so that the server's fallback for those kernels runs whatever kernel the tests run
 * on. A seccomp filter does it, for the calling process and everything it starts afterwards
 * (a server started by an integration test inherits it). It cannot be undone: run the
 * tests that want the real system call first, or fork. Filters add up: calling this again
 * makes another call fail too.
 */
#ifndef TEST_NO_SYSCALL_H
#define TEST_NO_SYSCALL_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 0, or -errno when the kernel refuses the filter. */
static inline int test_no_syscall(long nr)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

	/* Without it only a process with CAP_SYS_ADMIN may install a filter. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
}

#endif
