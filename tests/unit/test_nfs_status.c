/* errno -> nfsstat3: the table, sign handling, and the fallback for unknown errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_internal.h"

static void test_table(void **state)
{
	static const struct { int e; nfsstat3 s; } cases[] = {
		{ ENOENT, NFS3ERR_NOENT }, { EACCES, NFS3ERR_ACCES }, { EPERM, NFS3ERR_PERM },
		{ EEXIST, NFS3ERR_EXIST }, { EXDEV, NFS3ERR_XDEV }, { ENOTDIR, NFS3ERR_NOTDIR },
		{ EISDIR, NFS3ERR_ISDIR }, { EINVAL, NFS3ERR_INVAL }, { EFBIG, NFS3ERR_FBIG },
		{ ENOSPC, NFS3ERR_NOSPC }, { EROFS, NFS3ERR_ROFS }, { EMLINK, NFS3ERR_MLINK },
		{ ENAMETOOLONG, NFS3ERR_NAMETOOLONG }, { ENOTEMPTY, NFS3ERR_NOTEMPTY },
		{ EDQUOT, NFS3ERR_DQUOT }, { ESTALE, NFS3ERR_STALE }, { EAGAIN, NFS3ERR_NOT_SYNC },
		{ ENOTSUP, NFS3ERR_NOTSUPP }, { EOPNOTSUPP, NFS3ERR_NOTSUPP },
		{ ELOOP, NFS3ERR_INVAL }, { EIO, NFS3ERR_IO }, { ENXIO, NFS3ERR_NXIO },
		{ ENODEV, NFS3ERR_NODEV },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(nfs_status(-cases[i].e), cases[i].s);
		assert_int_equal(nfs_status(cases[i].e), cases[i].s);
	}
}

static void test_ok(void **state)
{
	(void)state;
	assert_int_equal(nfs_status(0), NFS3_OK);
}

static void test_unknown(void **state)
{
	(void)state;
	/* Unknown errors become IO, also when repeated (logged only once) or out of range. */
	assert_int_equal(nfs_status(-EBADMSG), NFS3ERR_IO);
	assert_int_equal(nfs_status(-EBADMSG), NFS3ERR_IO);
	assert_int_equal(nfs_status(-100000), NFS3ERR_IO);
	assert_int_equal(nfs_status(-2147483647), NFS3ERR_IO);
}

static void test_names(void **state)
{
	char longname[NFS_NAME_MAX + 2];

	(void)state;
	memset(longname, 'a', sizeof(longname));
	longname[NFS_NAME_MAX + 1] = '\0';
	assert_int_equal(nfs_name_check("a", NFS_NAME_CREATE), NFS3_OK);
	assert_int_equal(nfs_name_check(longname, NFS_NAME_CREATE), NFS3ERR_NAMETOOLONG);
	longname[NFS_NAME_MAX] = '\0';
	assert_int_equal(nfs_name_check(longname, NFS_NAME_CREATE), NFS3_OK);
	assert_int_equal(nfs_name_check("", NFS_NAME_LOOKUP), NFS3ERR_NOENT);
	/* Only codes RFC 1813 lists for CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR... */
	assert_int_equal(nfs_name_check(NULL, NFS_NAME_CREATE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("", NFS_NAME_CREATE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("", NFS_NAME_REMOVE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("a/b", NFS_NAME_CREATE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("a/b", NFS_NAME_REMOVE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("a/b", NFS_NAME_LOOKUP), NFS3ERR_NOENT);
	assert_int_equal(nfs_name_check("..", NFS_NAME_LOOKUP), NFS3_OK);
	assert_int_equal(nfs_name_check(".", NFS_NAME_CREATE), NFS3ERR_EXIST);
	/* ... and, as knfsd answers, no removing a dot name */
	assert_int_equal(nfs_name_check("..", NFS_NAME_REMOVE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check(".", NFS_NAME_REMOVE), NFS3ERR_ACCES);
	assert_int_equal(nfs_name_check("...", NFS_NAME_REMOVE), NFS3_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_unknown),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
