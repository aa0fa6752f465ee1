/*
 * Shared plumbing for the integration tests: run the real server (build/unionnfsd, or
 * $BUILD/unionnfsd) on loopback with fresh temporary branches and state, stop and restart
 * it, and talk to it through libnfs (the high-level client) or through a small libtirpc
 * client using the XDR routines generated from rpc/nfs3.x.
 *
 * libnfs's <nfsc/libnfs-raw*.h> cannot share a translation unit with <rpc/rpc.h>, so only
 * <nfsc/libnfs.h> is used here; the raw protocol goes through libtirpc.
 *
 * Every helper either succeeds or fails the current CMocka test with a message naming what
 * went wrong, unless its comment says it returns a status.
 */
#ifndef IT_COMMON_H
#define IT_COMMON_H

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <rpc/rpc.h>

#include "nfs3.h"
#include "../rmtree.h"
#include "../wait.h"

#include <nfsc/libnfs.h>

#define IT_EXPORT "/union"
#define IT_CALL_TIMEOUT 15       /* seconds for one RPC */
#define IT_START_TIMEOUT 30      /* seconds for the server to print its ports */
#define IT_STOP_TIMEOUT 20       /* seconds for the server to exit after SIGTERM */

/* MOUNT protocol numbers, kept here so the tests do not depend on mount3.x's type names. */
#define IT_MOUNT_PROG 100005
#define IT_MNT_OK 0
#define IT_MNT_NOENT 2
#define IT_MNTPROC_NULL 0
#define IT_MNTPROC_MNT 1
#define IT_MNTPROC_DUMP 2
#define IT_MNTPROC_UMNT 3
#define IT_MNTPROC_UMNTALL 4
#define IT_MNTPROC_EXPORT 5

struct it_server {
	char is_dir[PATH_MAX];      /* temporary directory holding everything below */
	char is_upper[PATH_MAX];    /* writable branch */
	char is_lower[PATH_MAX];    /* read-only branch, "" when the export has one branch */
	char is_state[PATH_MAX];    /* --state (created by the server) */
	char is_log[PATH_MAX];      /* the server's stderr, appended over restarts */
	const char *is_portmap;     /* --portmap value, default "off" */
	const char *is_opts;        /* -o value, default "no_root_squash,insecure" */
	const char *is_branches;    /* if set: the export's whole branch list, words included */
	const char *is_extra[8];    /* more arguments before -e, NULL-terminated */
	const char *is_config;      /* if set: run "-f -c is_config" and nothing else */
	unsigned long is_nofile;    /* if set: the server's open files limit, soft and hard */
	int is_nfs_port;            /* 0 until started; kept so a restart reuses the ports */
	int is_mount_port;
	pid_t is_pid;               /* 0 when not running */
	off_t is_log_off;           /* where the current run's output starts in is_log */
};

/* Path of the server binary: $UNIONNFSD, else $BUILD/unionnfsd, else build/unionnfsd. */
const char *it_server_binary(void);
/* Path of the control tool: $BUILD/unionnfsd-ctl, else build/unionnfsd-ctl. */
const char *it_ctl_binary(void);

/* Makes a fresh temporary tree (upper, and a lower when with_lower). Does not start anything. */
void it_server_init(struct it_server *s, bool with_lower);

/*
 * Starts the server and waits for its port lines. Returns 0, or -1 after printing why
 * (including the server's output). Reuses the ports of a previous run when there was one.
 */
int it_server_start(struct it_server *s);

/* Sends SIGTERM and waits. Returns the exit status, 128+signal if killed, -1 on a timeout. */
int it_server_stop(struct it_server *s);

/* Stop (asserting exit status 0) and start again with the same state directory and ports. */
void it_server_restart(struct it_server *s);

/* Kills the server if it runs and removes the temporary tree. */
void it_server_cleanup(struct it_server *s);

/*
 * The end of a test's server: stops it if it runs, wanting exit status 0 and no sanitizer
 * report in its output, then removes its tree. Returns 0, or -1 after saying why.
 */
int it_server_finish(struct it_server *s);

/* Prints the current run's server output to stderr (for failure diagnostics). */
void it_server_dump_log(const struct it_server *s);

/* Whether the server's output (all runs) contains text. */
bool it_server_log_contains(const struct it_server *s, const char *text);
/* Until the server's log has text (true), or timeout_ms pass (false). */
bool it_server_log_wait(const struct it_server *s, const char *text, int timeout_ms);
/* How many times the server's output (all runs) contains text. */
int it_server_log_count(const struct it_server *s, const char *text);
/* Until the server's output has text n times or more (true), or timeout_ms pass (false). */
bool it_server_log_wait_count(const struct it_server *s, const char *text, int n, int timeout_ms);
/* Sets the running server's soft limit of open files to n (prlimit), keeping the hard one. */
void it_server_nofile(const struct it_server *s, unsigned long long n);
/* How many descriptors the running server has open (/proc/PID/fd). */
int it_server_fds(const struct it_server *s);
/*
 * Attaches strace to every thread of the running server, holding the return of each call
 * of syscalls (strace's syntax: "renameat2,unlinkat" or "/^mkdir(at)?$") for delay_us.
 * Returns once every thread is traced; the caller kills and reaps the returned pid.
 */
pid_t it_server_strace_delay(const struct it_server *s, const char *syscalls, long delay_us);
/*
 * Kills the server held by it_server_strace_delay's tracer with SIGKILL, inside a held
 * syscall; the tracer goes too (it may wait on a tracee dying in a held syscall, and a
 * traced zombie is not the parent's to reap). Both reaped; the server can start again.
 */
void it_server_kill_traced(struct it_server *s, pid_t tracer);
/* Waits (up to timeout_ms, else fails) for an inotify event in mask on name from fd. */
void it_inotify_wait(int fd, uint32_t mask, const char *name, int timeout_ms);

/*
 * Runs argv (argv[0] searched in PATH) with stdout+stderr captured into out (NUL-terminated,
 * truncated to outlen). Returns the exit status, 128+signal if killed, -1 on a timeout
 * (the child is then killed) or when it could not be run.
 */
int it_run(char *const argv[], int timeout_s, char *out, size_t outlen);

/*
 * Makes image a fresh ext4 file system of size_mib MiB (mkfs.ext4 -q -F, then the options in
 * mkfs_opts, NULL-terminated, may be NULL) and mounts it at dir through a loop device, whose
 * name goes to loopdev (loopdev_len bytes). Needs root. Returns 0, or -1 after saying why.
 */
int it_ext4_mount(const char *image, int size_mib, const char *const *mkfs_opts, const char *dir,
		  char *loopdev, size_t loopdev_len);
/* Unmounts dir (if mounted) and detaches loopdev (if not ""), then empties loopdev. */
void it_ext4_umount(const char *dir, char *loopdev);

/* Whether a TCP port (and the UDP port of that number) on all addresses is free to bind. */
bool it_tcp_port_free(int port);
bool it_tcp_udp_port_free(int port);

/* --- file system helpers (paths on the host) --- */

/* snprintf into a PATH_MAX buffer; fails the test if it does not fit. */
void it_path(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void it_write_file(const char *path, const void *data, size_t len);
/* Reads a whole file (malloc, NUL-terminated beyond len); NULL if it does not exist. */
char *it_read_file(const char *path, size_t *len);
bool it_exists(const char *path);
/* Deterministic pseudo-random bytes for file contents. */
void it_fill(void *buf, size_t len, uint32_t seed);
/* Big-endian words of hand-built RPC records: it_put32 returns the offset after the word. */
size_t it_put32(uint8_t *b, size_t off, uint32_t v);
uint32_t it_get32(const uint8_t *b, size_t off);

/* --- libnfs --- */

/* nfs://127.0.0.1/union?nfsport=N&mountport=M */
void it_nfs_url(const struct it_server *s, char *out, size_t outlen);
/* Mounts a URL with libnfs; NULL (after printing the error) on failure. */
struct nfs_context *it_nfs_mount_url(const char *url);
/* Mounts the test server's export; fails the test on error. */
struct nfs_context *it_nfs_mount(const struct it_server *s);
void it_nfs_unmount(struct nfs_context *nfs);
/* The raw handle bytes behind an open libnfs file (libnfs keeps them in nfs_get_fh()). */
void it_nfsfh_bytes(struct nfsfh *fh, const uint8_t **data, size_t *len);

/* --- libtirpc client --- */

/* A client for prog/vers on 127.0.0.1:port over proto (IPPROTO_TCP/UDP), AUTH_SYS root. */
CLIENT *it_clnt(int proto, uint32_t prog, uint32_t vers, int port);
void it_clnt_destroy(CLIENT *c);
/* One call with IT_CALL_TIMEOUT; returns the RPC status. */
enum clnt_stat it_call(CLIENT *c, uint32_t proc, xdrproc_t xargs, void *args, xdrproc_t xres,
		       void *res);
/* xdr_void with a prototype xdrproc_t casts accept. */
bool_t it_xdr_void(XDR *x, void *p);
/* Frees what a result decoded into. */
void it_free(xdrproc_t xres, void *res);

/*
 * MOUNT v3 MNT of path over proto against the test server. Returns the mountstat3; on MNT3_OK
 * fills fh (data malloc()ed, free with it_fh_free) and the auth flavors count.
 */
int it_mnt(const struct it_server *s, int proto, const char *path, nfs_fh3 *fh);
/* The same MNT over client c (destroyed here), e.g. one from it_clnt_from. */
int it_mnt_over(CLIENT *c, const char *path, nfs_fh3 *fh);
/*
 * A TCP client from source address src (127.0.0.x: all of 127/8 is loopback) acting as
 * uid/gid with AUTH_SYS, from a reserved source port (below 1024) when reserved is set.
 */
CLIENT *it_clnt_from(const char *src, uint32_t prog, uint32_t vers, int port, uint32_t uid,
		     uint32_t gid, bool reserved);
/* The same over UDP (the server must run with --udp), as root. */
CLIENT *it_clnt_udp_from(const char *src, uint32_t prog, uint32_t vers, int port);
/*
 * Binds fd (IPv4) to a free reserved port (IT_RESERVED_LOW..IT_RESERVED_HIGH) on me's
 * address, reusing ports left in TIME_WAIT by earlier tests. Returns 0, or -1 with errno.
 */
#define IT_RESERVED_LOW 512
#define IT_RESERVED_HIGH 1023
struct sockaddr_in;
int it_bind_reserved(int fd, const struct sockaddr_in *me);
/*
 * A TCP socket bound to a reserved port on me's address and connected to `to`: a port whose
 * earlier connection to that same address is still in TIME_WAIT is skipped. -1 with errno.
 */
int it_connect_reserved(const struct sockaddr_in *me, const struct sockaddr_in *to);
void it_fh_free(nfs_fh3 *fh);
void it_fh_copy(nfs_fh3 *dst, const nfs_fh3 *src);
bool it_fh_equal(const nfs_fh3 *a, const nfs_fh3 *b);

/* An NFS v3 client for the test server over proto. */
CLIENT *it_nfs_clnt(const struct it_server *s, int proto);

/* NFS helpers over a tirpc client. Each returns the nfsstat3 (asserting the RPC itself worked). */
nfsstat3 it_getattr(CLIENT *c, const nfs_fh3 *fh, fattr3 *attr);
/* CREATE of name in dir, UNCHECKED, mode 0644. */
nfsstat3 it_create(CLIENT *c, const nfs_fh3 *dir, const char *name);
/* fh may be NULL; when not, it receives a copy of the handle (free with it_fh_free). */
nfsstat3 it_lookup(CLIENT *c, const nfs_fh3 *dir, const char *name, nfs_fh3 *fh, fattr3 *attr);
/* READ of the whole of a small file: its bytes in buf (len - 1 at most, NUL-ended) when OK. */
nfsstat3 it_read_all(CLIENT *c, const nfs_fh3 *fh, char *buf, size_t len);
/* Resolves a slash-separated path from dir. */
nfsstat3 it_lookup_path(CLIENT *c, const nfs_fh3 *dir, const char *path, nfs_fh3 *fh,
			fattr3 *attr);

/* Returns the nfsstat3 name, e.g. "NFS3ERR_STALE", for messages. */
const char *it_nfsstat_name(int status);

/* assert_int_equal with nfsstat3 names in the message. */
#define it_assert_status(got, want) \
	do { \
		int it_g_ = (int)(got), it_w_ = (int)(want); \
		if (it_g_ != it_w_) \
			fail_msg("%s:%d: got %s, want %s", __FILE__, __LINE__, \
				 it_nfsstat_name(it_g_), it_nfsstat_name(it_w_)); \
	} while (0)

/* Group setup/teardown for files that share one server with one branch or two. */
extern struct it_server it_srv;
int it_group_setup_upper(void **state);
int it_group_setup_union(void **state);
/* The same with UDP served as well (--udp), for files whose tests talk UDP. */
int it_group_setup_udp(bool with_lower);
int it_group_teardown(void **state);

#endif
