/* The guest's lock driver for tests/e2e/test_locking.sh: one process holding the locks of one
 * VM, so that the host can take, test and drop locks step by step. It runs the commands the
 * host writes into the share, one per file (DIR/cmd.1, DIR/cmd.2, ...), and answers each in
 * DIR/rep.N (written whole, then renamed, so the host never reads half a reply):
 *   lk serve DIR
 * Commands (one line each; the reply's first word is "ok" or the errno's name):
 *   open PATH                   opens PATH read-write (creating it)
 *   setlk w|r START LEN         fcntl F_SETLK (LEN 0: to the end of the file)
 *   setlkw w|r START LEN        fcntl F_SETLKW; the reply gives the seconds it blocked: "ok 1.234"
 *   unlock START LEN            fcntl F_SETLK F_UNLCK
 *   flock ex|sh|un nb|wait      flock(2); "wait" blocks, with the seconds as for setlkw
 *   write OFFSET TEXT           pwrite TEXT at OFFSET (then fsync)
 *   read OFFSET LEN             pread; the reply is "ok TEXT"
 *   close                       closes the file (drops its fcntl locks)
 *   cycles N PATH               N times: F_SETLKW write lock on PATH, read the decimal
 *                               counter in it, write counter+1, fsync, unlock; "ok SECONDS"
 *   crash                       powers the VM off at once, holding every lock (a client crash)
 *   exit                        ends the server
 * Lock waits and file opens are the kernel's: whatever the NFS client does shows as is. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>

static int fd = -1;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *errname(int e)
{
	switch (e) {
	case EAGAIN: return "EAGAIN";
	case EACCES: return "EACCES";
	case ENOLCK: return "ENOLCK";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case EBADF: return "EBADF";
	case EDEADLK: return "EDEADLK";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case ETIMEDOUT: return "ETIMEDOUT";
	default: return "EOTHER";
	}
}

static int reply(char *out, size_t len, int err, const char *fmt, ...)
{
	int n = snprintf(out, len, "%s", err ? errname(err) : "ok");
	va_list ap;
	if (fmt) {
		va_start(ap, fmt);
		out[n++] = ' ';
		vsnprintf(out + n, len - n, fmt, ap);
		va_end(ap);
	}
	if (err)
		snprintf(out + strlen(out), len - strlen(out), " (%s)", strerror(err));
	return 0;
}

static int set_lock(int cmd, short type, long start, long len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	return fcntl(fd, cmd, &fl) < 0 ? errno : 0;
}

static int cycles(long n, const char *path, char *out, size_t len)
{
	int f = open(path, O_RDWR | O_CREAT, 0644);
	double t0 = now();
	char buf[32];
	long i, v;
	ssize_t got;
	if (f < 0)
		return reply(out, len, errno, "open %s", path);
	for (i = 0; i < n; i++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		if (fcntl(f, F_SETLKW, &fl) < 0)
			return reply(out, len, errno, "lock in cycle %ld", i);
		got = pread(f, buf, sizeof(buf) - 1, 0);
		if (got < 0)
			return reply(out, len, errno, "read in cycle %ld", i);
		buf[got] = 0;
		v = strtol(buf, NULL, 10) + 1;
		got = snprintf(buf, sizeof(buf), "%020ld\n", v);
		if (pwrite(f, buf, got, 0) != got || fsync(f) < 0)
			return reply(out, len, errno, "write in cycle %ld", i);
		fl.l_type = F_UNLCK;
		if (fcntl(f, F_SETLK, &fl) < 0)
			return reply(out, len, errno, "unlock in cycle %ld", i);
	}
	close(f);
	return reply(out, len, 0, "%.3f", now() - t0);
}

static void run(char *line, char *out, size_t len)
{
	char a[4096] = "", b[64] = "";
	long x = 0, y = 0;
	double t0 = now();
	int e;

	if (sscanf(line, "open %4095s", a) == 1) {
		if (fd >= 0)
			close(fd);
		fd = open(a, O_RDWR | O_CREAT, 0644);
		reply(out, len, fd < 0 ? errno : 0, NULL);
	} else if (sscanf(line, "setlkw %1s %ld %ld", a, &x, &y) == 3) {
		e = set_lock(F_SETLKW, a[0] == 'w' ? F_WRLCK : F_RDLCK, x, y);
		reply(out, len, e, "%.3f", now() - t0);
	} else if (sscanf(line, "setlk %1s %ld %ld", a, &x, &y) == 3) {
		reply(out, len, set_lock(F_SETLK, a[0] == 'w' ? F_WRLCK : F_RDLCK, x, y), NULL);
	} else if (sscanf(line, "unlock %ld %ld", &x, &y) == 2) {
		reply(out, len, set_lock(F_SETLK, F_UNLCK, x, y), NULL);
	} else if (sscanf(line, "flock %2s %4s", a, b) == 2) {
		int op = !strcmp(a, "ex") ? LOCK_EX : !strcmp(a, "sh") ? LOCK_SH : LOCK_UN;
		if (!strcmp(b, "nb"))
			op |= LOCK_NB;
		e = flock(fd, op) < 0 ? errno : 0;
		reply(out, len, e, "%.3f", now() - t0);
	} else if (sscanf(line, "write %ld %4095s", &x, a) == 2) {
		ssize_t n = pwrite(fd, a, strlen(a), x);
		e = n != (ssize_t)strlen(a) ? (n < 0 ? errno : EIO) : fsync(fd) < 0 ? errno : 0;
		reply(out, len, e, NULL);
	} else if (sscanf(line, "read %ld %ld", &x, &y) == 2) {
		ssize_t n = y < (long)sizeof(a) ? pread(fd, a, y, x) : -1;
		if (n >= 0)
			a[n] = 0;
		reply(out, len, n < 0 ? errno : 0, "%s", n < 0 ? "" : a);
	} else if (!strncmp(line, "close", 5)) {
		e = fd >= 0 && close(fd) < 0 ? errno : 0;
		fd = -1;
		reply(out, len, e, NULL);
	} else if (sscanf(line, "cycles %ld %4095s", &x, a) == 2) {
		cycles(x, a, out, len);
	} else if (!strncmp(line, "crash", 5)) {
		reboot(RB_POWER_OFF);
		reply(out, len, errno, "reboot");
	} else {
		reply(out, len, EINVAL, "unknown command: %s", line);
	}
}

/* waits for PATH to appear; the 9p share has no change notification */
static FILE *await(const char *path)
{
	FILE *f;
	while (!(f = fopen(path, "r")))
		usleep(20000);
	return f;
}

int main(int argc, char **argv)
{
	char path[4200], tmp[4300], line[8192], out[8192];
	FILE *f;
	unsigned k;

	if (argc != 3 || strcmp(argv[1], "serve")) {
		fprintf(stderr, "usage: lk serve DIR\n");
		return 2;
	}
	for (k = 1;; k++) {
		snprintf(path, sizeof(path), "%s/cmd.%u", argv[2], k);
		f = await(path);
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "exit"))
			return 0;
		run(line, out, sizeof(out));
		snprintf(tmp, sizeof(tmp), "%s/rep.%u.tmp", argv[2], k);
		snprintf(path, sizeof(path), "%s/rep.%u", argv[2], k);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%s\n", out) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
			perror(path);
			return 1;
		}
	}
}
