/* Unmapping the inode map's pages past a budget of mapped file pages (see trim.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsio.h"
#include "log.h"
#include "trim.h"

/*
 * File pages mapped into the process (the binary, libraries and the map) above which the
 * map's pages are unmapped: a working set of the map up to about this size never pays a
 * re-fault, and a walk of a huge map leaves RSS bounded.
 */
#define STRIM_MAPPED_BUDGET ((size_t)12 << 20)
/*
 * Every STRIM_EVERY reads a thread looks at its minor faults, and past STRIM_FAULTS of
 * them since its last look at the process's mapped pages. A read fault maps up to 16
 * pages the page cache holds around the one asked for (fault-around), so growth between
 * looks stays within a few MiB per thread.
 */
#define STRIM_FAULTS 16
#define STRIM_READ_CHUNK 4096

/* The whole of /proc/self/<name>, NUL-terminated, in a malloc()ed *out; 0 or -errno. */
static int strim_proc_read(const char *name, char **out)
{
	char proc[PATH_MAX], *buf = NULL, *grown;
	size_t len = 0, cap = 0, done;
	int dirfd, fd, r;

	*out = NULL;
	r = fsio_open_root("/proc/self", proc, sizeof(proc), &dirfd);
	if (r < 0)
		return r;
	r = fsio_open_file(dirfd, name, O_RDONLY, 0, &fd);
	fsio_close(dirfd);
	if (r < 0)
		return r;
	do {
		if (cap - len < STRIM_READ_CHUNK + 1) {
			cap = cap ? 2 * cap : 4 * STRIM_READ_CHUNK;
			grown = realloc(buf, cap);
			if (!grown) {
				r = -ENOMEM;
				break;
			}
			buf = grown;
		}
		r = fsio_pread(fd, buf + len, STRIM_READ_CHUNK, len, &done);
		len += done;
	} while (r == 0 && done == STRIM_READ_CHUNK);
	fsio_close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

void strim_find_map(struct strim *tr, MDB_env *env)
{
	unsigned long start, end;
	unsigned long long off, ino;
	unsigned maj, min;
	char perms[5], *maps, *line, *save;
	struct stat sb;
	mdb_filehandle_t fd;

	if (mdb_env_get_fd(env, &fd) != 0 || fsio_stat(fd, &sb) < 0 ||
	    strim_proc_read("maps", &maps) < 0)
		return;
	for (line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%lx-%lx %4s %llx %x:%x %llu", &start, &end, perms, &off, &maj, &min,
			   &ino) != 7)
			continue;
		if (ino == (unsigned long long)sb.st_ino && maj == major(sb.st_dev) &&
		    min == minor(sb.st_dev) && off == 0 && perms[3] == 's' && end > start) {
			tr->tr_map = (void *)start;
			tr->tr_maplen = end - start;
			break;
		}
	}
	free(maps);
}

/* Bytes of file-backed (and shared) pages mapped into the process, or -errno. */
static long long strim_mapped_file_bytes(void)
{
	unsigned long long size, resident, shared;
	char *statm;
	int r;

	r = strim_proc_read("statm", &statm);
	if (r < 0)
		return r;
	r = sscanf(statm, "%llu %llu %llu", &size, &resident, &shared);
	free(statm);
	if (r != 3)
		return -EIO;
	return (long long)(shared * (unsigned long long)sysconf(_SC_PAGESIZE));
}

int strim_trim(struct strim *tr, MDB_env *env, size_t budget)
{
	MDB_envinfo info;
	MDB_stat ms;
	long long mapped;
	size_t len;

	if (!tr->tr_map)
		return -ENOENT;
	mapped = strim_mapped_file_bytes();
	/* Without /proc we cannot tell, and trimming too often only costs minor faults. */
	if (mapped >= 0 && (unsigned long long)mapped <= budget)
		return 0;
	if (mdb_env_info(env, &info) != 0 || mdb_env_stat(env, &ms) != 0)
		return -EIO;
	/* Pages past the last one in use were never read; a newer one is trimmed next time. */
	len = (info.me_last_pgno + 1) * (size_t)ms.ms_psize;
	if (len > tr->tr_maplen)
		len = tr->tr_maplen;
	/* LMDB's map of its own file (store.c: LMDB is the exception to fsio in store/). */
	if (madvise(tr->tr_map, len, MADV_DONTNEED) < 0)
		return -errno;
	return 1;
}

__thread unsigned strim_reads;

void strim_look(struct strim *tr, MDB_env *env, const char *dir)
{
	static __thread long faults;
	struct rusage ru;
	int r;

	if (!tr->tr_map || atomic_load(&tr->tr_off))
		return;
	if (getrusage(RUSAGE_THREAD, &ru) < 0 || ru.ru_minflt - faults < STRIM_FAULTS)
		return;
	faults = ru.ru_minflt;
	r = strim_trim(tr, env, STRIM_MAPPED_BUDGET);
	if (r < 0 && !atomic_exchange(&tr->tr_off, true))
		log_warn("inode map in %s: cannot unmap its pages (%s): the server's memory may "
			 "grow up to the map's size; check that /proc is mounted", dir, strerror(-r));
}
