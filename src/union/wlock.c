/*
 * Per-file serialisation of a WRITE with its attribute snapshots: the attributes before and
 * after a write (wcc_data) must bracket that write alone, or a client cannot tell whether
 * only it changed the file and keeps or drops its cache wrongly. Files share a fixed table
 * of mutexes by device and inode number (a hash, not an identity): two files on one stripe
 * only wait for each other's stat, write and stat, never for a sync to disk.
 */
#include <pthread.h>

#include "uint.h"

#define UWL_STRIPES 256 /* a power of two */

static pthread_mutex_t uwl_table[UWL_STRIPES] = {
	[0 ... UWL_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER
};

pthread_mutex_t *uwl_lock(const struct stat *st)
{
	uint64_t h = ((uint64_t)st->st_ino ^ ((uint64_t)st->st_dev << 17)) * 0x9e3779b97f4a7c15ULL;
	pthread_mutex_t *m = &uwl_table[h >> 56 & (UWL_STRIPES - 1)];

	pthread_mutex_lock(m);
	return m;
}

void uwl_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}
