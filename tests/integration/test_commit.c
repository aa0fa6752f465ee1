/*
 * COMMIT and the write verifier when write-back fails (RFC 1813 3.3.7): the upper is an ext4
 * image on a loop device whose backing file lives on a tmpfs too small for it, so data the
 * server accepted UNSTABLE cannot be written back. The kernel reports that error to one
 * fsync only; after someone has seen it, an fsync through a new descriptor succeeds. A client
 * must still learn that its UNSTABLE data is gone: COMMIT fails or its verifier differs from
 * the one the WRITEs returned, so the client sends the data again.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKING_MIB 6   /* the tmpfs holding the image: far less than the data written */
#define IMAGE_MIB 64
#define DATA_MIB 16
#define CHUNK (1024 * 1024)
#define COMMIT_TRIES 10

static struct it_server srv;
static char small[PATH_MAX], image[PATH_MAX], loopdev[64];

/* The upper becomes ext4 on a loop device backed by a file on a tiny tmpfs. */
static int failing_upper(void)
{
	char size[32];

	it_path(small, "%s/small", srv.is_dir);
	it_path(image, "%s/img", small);
	if (mkdir(small, 0700) < 0)
		return -1;
	snprintf(size, sizeof(size), "size=%dm", BACKING_MIB);
	if (mount("tmpfs", small, "tmpfs", 0, size) < 0) {
		perror("mount tmpfs");
		return -1;
	}
	return it_ext4_mount(image, IMAGE_MIB, NULL, srv.is_upper, loopdev, sizeof(loopdev));
}

static void release_upper(void)
{
	it_ext4_umount(srv.is_upper, loopdev);
	umount2(small, MNT_DETACH);
}

static int setup(void **state)
{
	(void)state;
	it_server_init(&srv, false);
	if (geteuid() != 0) {
		fprintf(stderr, "test_commit needs root (mount, losetup)\n");
		return -1;
	}
	if (failing_upper() < 0 || it_server_start(&srv) < 0) {
		release_upper();
		it_server_cleanup(&srv);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	int st;

	(void)state;
	st = it_server_stop(&srv);
	release_upper();
	it_server_cleanup(&srv);
	return st == 0 ? 0 : -1;
}

static nfsstat3 write_chunk(CLIENT *c, const nfs_fh3 *fh, uint64_t off, void *data, uint32_t len,
			    stable_how stable, uint8_t verf[NFS3_WRITEVERFSIZE])
{
	WRITE3args a = { .file = *fh, .offset = off, .count = len, .stable = stable };
	WRITE3res r;
	nfsstat3 st;

	a.data.data_len = len;
	a.data.data_val = data;
	memset(&r, 0, sizeof(r));
	assert_int_equal(it_call(c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a,
				 (xdrproc_t)xdr_WRITE3res, &r),
			 RPC_SUCCESS);
	st = r.status;
	if (st == NFS3_OK && verf)
		memcpy(verf, r.WRITE3res_u.resok.verf, NFS3_WRITEVERFSIZE);
	it_free((xdrproc_t)xdr_WRITE3res, &r);
	return st;
}

static void test_commit_after_lost_writeback(void **state)
{
	uint8_t verf[NFS3_WRITEVERFSIZE], first[NFS3_WRITEVERFSIZE];
	COMMIT3args ca;
	COMMIT3res cr;
	nfs_fh3 root, f;
	CLIENT *c;
	char *data;
	int unstable_ok = 0, failed = 0;
	bool committed = false;

	(void)state;
	data = malloc(CHUNK);
	assert_non_null(data);
	it_fill(data, CHUNK, 7);
	assert_int_equal(it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	c = it_nfs_clnt(&srv, IPPROTO_TCP);
	it_assert_status(it_create(c, &root, "f"), NFS3_OK);
	it_assert_status(it_lookup(c, &root, "f", &f, NULL), NFS3_OK);

	/* Accepted into the page cache: far more than the backing tmpfs can hold. */
	for (int i = 0; i < DATA_MIB; i++) {
		if (write_chunk(c, &f, (uint64_t)i * CHUNK, data, CHUNK, UNSTABLE, verf) != NFS3_OK)
			continue;
		if (unstable_ok++ == 0)
			memcpy(first, verf, sizeof(first));
		assert_memory_equal(verf, first, sizeof(verf));
	}
	assert_true(unstable_ok > 0);
	/*
	 * The first COMMITs see the write-back error. Once it has been reported, a sync through
	 * a new descriptor succeeds: a COMMIT that then answers OK must not carry the verifier
	 * of the lost WRITEs.
	 */
	for (int i = 0; i < COMMIT_TRIES && !committed; i++) {
		memset(&ca, 0, sizeof(ca));
		memset(&cr, 0, sizeof(cr));
		ca.file = f;
		assert_int_equal(it_call(c, NFSPROC3_COMMIT, (xdrproc_t)xdr_COMMIT3args, &ca,
					 (xdrproc_t)xdr_COMMIT3res, &cr),
				 RPC_SUCCESS);
		if (cr.status == NFS3_OK) {
			committed = true;
			assert_memory_not_equal(cr.COMMIT3res_u.resok.verf, first, sizeof(first));
		} else {
			failed++;
		}
		it_free((xdrproc_t)xdr_COMMIT3res, &cr);
	}
	assert_true(failed > 0);

	/* The verifier stays changed: later WRITEs carry the new one, not the old. */
	if (write_chunk(c, &f, 0, data, 512, UNSTABLE, verf) == NFS3_OK)
		assert_memory_not_equal(verf, first, sizeof(verf));

	it_fh_free(&f);
	it_fh_free(&root);
	it_clnt_destroy(c);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_after_lost_writeback),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
