/*
 * Intents of namespace changes, in DIR/intents (see store_intent_begin in store.h).
 *
 * The file is an array of fixed slots, one per change in flight; a slot whose magic is not
 * ours is free. A slot is written with one pwrite before the change touches a branch, and
 * freed with one pwrite once the inode map holds the change's outcome on disk. Neither
 * waits for the disk: a kill -9 loses nothing that write() handed to the kernel, and a
 * slot never straddles a page, so it is never seen half written after a kill.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsio.h"
#include "intent.h"
#include "log.h"
#include "store.h"

#define SINTENT_FILE "intents"         /* in the state directory */
#define SINTENT_MAGIC 0x31544e49u      /* "INT1": a slot in use, this layout */
#define SINTENT_SLOT 1024              /* bytes; divides the page size */
#define SINTENT_FIRST 64               /* slots to start with; doubled when all are in use */

struct sintent_slot {
	uint32_t ss_magic;
	uint32_t ss_pad;
	struct store_intent ss_in;
};

_Static_assert(sizeof(struct sintent_slot) <= SINTENT_SLOT, "an intent fits its slot");

struct sintent {
	int si_fd;
	pthread_mutex_t si_lock;
	bool *si_used;
	unsigned si_n;
};

/*
 * Room for n slots, with the file's blocks allocated up front: writing an intent then never
 * needs space, so a full state file system fails the map commit (which the change handles),
 * not the intent.
 */
static int sintent_grow(struct sintent *si, unsigned n)
{
	off_t len = (off_t)n * SINTENT_SLOT;
	struct stat sb;
	bool *used;
	int r;

	/* Only when short: an open that changes nothing leaves the file as it was (mtime too). */
	r = fsio_stat(si->si_fd, &sb);
	if (r < 0)
		return r;
	if (sb.st_size < len)
		r = fsio_allocate(si->si_fd, 0, (uint64_t)len);
	if (r < 0 && r != -EOPNOTSUPP && r != -EINVAL)
		return r;
	used = realloc(si->si_used, n * sizeof(*used));
	if (!used)
		return -ENOMEM;
	memset(used + si->si_n, 0, (n - si->si_n) * sizeof(*used));
	si->si_used = used;
	si->si_n = n;
	return 0;
}

/* Marks the slots a previous run left in use: their changes still await recovery. */
static int sintent_scan(struct sintent *si)
{
	struct sintent_slot s;
	struct stat sb;
	size_t got;
	unsigned n;
	int r;

	r = fsio_stat(si->si_fd, &sb);
	if (r < 0)
		return r;
	n = (unsigned)((sb.st_size + SINTENT_SLOT - 1) / SINTENT_SLOT); /* the last slot may be short */
	r = sintent_grow(si, n > SINTENT_FIRST ? n : SINTENT_FIRST);
	for (unsigned i = 0; r == 0 && i < n; i++) {
		r = fsio_pread(si->si_fd, &s, sizeof(s), (uint64_t)i * SINTENT_SLOT, &got);
		if (r < 0)
			return r;
		si->si_used[i] = got == sizeof(s) && s.ss_magic == SINTENT_MAGIC;
	}
	return r;
}

int sintent_open(int dirfd, const char *dir, struct sintent **out, char *err, size_t errlen)
{
	struct sintent *si;
	char path[4096];
	int r;

	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/" SINTENT_FILE, dir) >= sizeof(path)) {
		snprintf(err, errlen, "state directory path %s is too long; choose a shorter --state",
			 dir);
		return -ENAMETOOLONG;
	}
	si = calloc(1, sizeof(*si));
	if (!si) {
		snprintf(err, errlen, "out of memory opening %s; free memory", path);
		return -ENOMEM;
	}
	pthread_mutex_init(&si->si_lock, NULL);
	r = fsio_open_file(dirfd, SINTENT_FILE, O_RDWR | O_CREAT, 0600, &si->si_fd);
	if (r == 0)
		r = sintent_scan(si);
	if (r < 0) {
		snprintf(err, errlen, "cannot open the intent file %s: %s; fix the state directory's "
			 "permissions or choose another --state", path, strerror(-r));
		sintent_close(si);
		return r;
	}
	*out = si;
	return 0;
}

void sintent_close(struct sintent *si)
{
	if (!si)
		return;
	fsio_close(si->si_fd);
	pthread_mutex_destroy(&si->si_lock);
	free(si->si_used);
	free(si);
}

/* A free slot, taken (lock held). */
static int sintent_take(struct sintent *si)
{
	unsigned i;

	for (i = 0; i < si->si_n; i++)
		if (!si->si_used[i])
			break;
	if (i == si->si_n) {
		int r = sintent_grow(si, si->si_n * 2);

		if (r < 0)
			return r;
	}
	si->si_used[i] = true;
	return (int)i;
}

static int sintent_write(struct sintent *si, int slot, const void *buf, size_t len)
{
	size_t done;
	int r = fsio_pwrite(si->si_fd, buf, len, (uint64_t)slot * SINTENT_SLOT, &done);

	if (r < 0)
		return r;
	return done == len ? 0 : -EIO;
}

int sintent_put(struct sintent *si, const struct store_intent *in)
{
	struct sintent_slot s = { .ss_magic = SINTENT_MAGIC, .ss_in = *in };
	int slot, r;

	/* Under the lock, so that a walk never reads a slot half way through its writing. */
	pthread_mutex_lock(&si->si_lock);
	slot = sintent_take(si);
	r = slot < 0 ? slot : sintent_write(si, slot, &s, sizeof(s));
	if (r < 0 && slot >= 0)
		si->si_used[slot] = false;
	pthread_mutex_unlock(&si->si_lock);
	if (r < 0) {
		log_err("cannot write a change's intent to the state directory: %s", strerror(-r));
		return r;
	}
	return slot;
}

void sintent_drop(struct sintent *si, int slot)
{
	uint32_t free_magic = 0;
	int r;

	if (slot < 0)
		return;
	pthread_mutex_lock(&si->si_lock);
	r = sintent_write(si, slot, &free_magic, sizeof(free_magic));
	/* Kept in use on failure: a restart checks the change again, which is harmless. */
	if (r == 0)
		si->si_used[slot] = false;
	pthread_mutex_unlock(&si->si_lock);
	if (r < 0)
		log_warn("cannot clear a change's intent in the state directory: %s", strerror(-r));
}

/* Slot i of a walk (lock taken): 1 when it holds an intent of exp, 0 not, -ENOENT past the end. */
static int sintent_read(struct sintent *si, unsigned i, uint16_t exp, struct sintent_slot *s)
{
	size_t got;
	int r = 0;

	pthread_mutex_lock(&si->si_lock);
	if (i >= si->si_n) {
		r = -ENOENT;
	} else if (si->si_used[i]) {
		r = fsio_pread(si->si_fd, s, sizeof(*s), (uint64_t)i * SINTENT_SLOT, &got);
		if (r == 0)
			r = got == sizeof(*s) && s->ss_magic == SINTENT_MAGIC &&
			    s->ss_in.sn_exp == exp;
	}
	pthread_mutex_unlock(&si->si_lock);
	return r;
}

int sintent_walk(struct sintent *si, uint16_t exp,
		 int (*fn)(void *arg, const struct store_intent *in), void *arg)
{
	struct sintent_slot s;
	int r = 0;

	for (unsigned i = 0; r >= 0; i++) {
		r = sintent_read(si, i, exp, &s);
		if (r == -ENOENT)
			return 0;
		if (r == 1) {
			r = fn(arg, &s.ss_in);
			if (r == 0)
				sintent_drop(si, (int)i);
		}
	}
	return r;
}
