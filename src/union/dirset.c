/*
 * The copies of one union directory, one fd per branch (struct udirset). A leaf: every
 * union file uses it, and it calls nothing else of the union layer.
 */
#include <errno.h>
#include <unistd.h>

#include "fsio.h"
#include "uint.h"

void uds_init(struct udirset *ds)
{
	ds->ds_n = 0;
	ds->ds_borrowed = false;
}

void uds_root(const struct union_export *ux, struct udirset *ds)
{
	ds->ds_n = ux->ux_nbranches;
	ds->ds_borrowed = true;
	for (int i = 0; i < ux->ux_nbranches; i++) {
		ds->ds_fd[i] = ux->ux_rootfd[i];
		ds->ds_branch[i] = (uint8_t)i;
	}
}

void uds_release(struct udirset *ds)
{
	if (!ds->ds_borrowed)
		for (int i = 0; i < ds->ds_n; i++)
			fsio_close(ds->ds_fd[i]);
	ds->ds_n = 0;
	ds->ds_borrowed = false;
}

int uds_take(struct udirset *ds, int i)
{
	int fd, r;

	if (ds->ds_borrowed) {
		r = fsio_dup(ds->ds_fd[i], &fd);
		return r < 0 ? r : fd;
	}
	fd = ds->ds_fd[i];
	ds->ds_fd[i] = -1;
	return fd;
}

int uds_index_of(const struct udirset *ds, uint8_t b)
{
	for (int i = 0; i < ds->ds_n; i++)
		if (ds->ds_branch[i] == b)
			return i;
	return -1;
}

int uds_fd_of(const struct udirset *ds, uint8_t b)
{
	int i = uds_index_of(ds, b);

	return i < 0 ? -1 : ds->ds_fd[i];
}

int uds_fd_or_top(const struct udirset *ds, uint8_t b)
{
	int fd = uds_fd_of(ds, b);

	return fd >= 0 ? fd : ds->ds_fd[0];
}

int uds_may_search(const struct udirset *ds, int n)
{
	struct stat st;
	int r = 0;

	/* "." is a name like any other: the kernel checks search permission to look it up. */
	for (int i = 0; i < n && i < ds->ds_n && r == 0; i++)
		r = fsio_statat(ds->ds_fd[i], ".", &st);
	return r;
}

int uds_may_list(const struct udirset *ds)
{
	int r = 0, fd;

	for (int i = 0; i < ds->ds_n && r == 0; i++) {
		r = fsio_access(ds->ds_fd[i], R_OK);
		if (r != -ENOSYS)
			continue;
		/* Before Linux 5.8 (no faccessat2): opening it for reading, as a listing does. */
		r = fsio_reopen_dir(ds->ds_fd[i], &fd);
		if (r == 0)
			fsio_close(fd);
	}
	return r;
}
