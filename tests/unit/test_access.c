/* ACCESS bits from what the kernel lets the caller do; credential squashing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_internal.h"
#include "fsio.h"

#define ALL (ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | \
	     ACCESS3_DELETE | ACCESS3_EXECUTE)
#define RW_FILE (ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND)
#define DIR_ALL (ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | \
		 ACCESS3_DELETE | ACCESS3_EXECUTE)

static void test_file_bits(void **state)
{
	(void)state;
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK, false, ALL), RW_FILE);
	assert_int_equal(nfs_access_bits(false, R_OK, false, ALL), ACCESS3_READ);
	assert_int_equal(nfs_access_bits(false, W_OK, false, ALL),
			 ACCESS3_MODIFY | ACCESS3_EXTEND);
	assert_int_equal(nfs_access_bits(false, X_OK, false, ALL), ACCESS3_EXECUTE);
	assert_int_equal(nfs_access_bits(false, 0, false, ALL), 0);
	/* Files have nothing to look up or delete in them. */
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK | X_OK, false, ALL),
			 RW_FILE | ACCESS3_EXECUTE);
}

static void test_directory_bits(void **state)
{
	(void)state;
	assert_int_equal(nfs_access_bits(true, R_OK | W_OK | X_OK, false, ALL), DIR_ALL);
	assert_int_equal(nfs_access_bits(true, R_OK | X_OK, false, ALL),
			 ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE);
	/* Write without search permission cannot change entries. */
	assert_int_equal(nfs_access_bits(true, R_OK | W_OK, false, ALL), ACCESS3_READ);
	assert_int_equal(nfs_access_bits(true, W_OK | X_OK, false, ALL),
			 ACCESS3_LOOKUP | ACCESS3_EXECUTE | ACCESS3_MODIFY | ACCESS3_EXTEND |
			 ACCESS3_DELETE);
}

static void test_read_only_and_mask(void **state)
{
	(void)state;
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK | X_OK, true, ALL),
			 ACCESS3_READ | ACCESS3_EXECUTE);
	assert_int_equal(nfs_access_bits(true, R_OK | W_OK | X_OK, true, ALL),
			 ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_EXECUTE);
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK, false, ACCESS3_MODIFY),
			 ACCESS3_MODIFY);
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK, false, 0), 0);
	assert_int_equal(nfs_access_bits(false, R_OK | W_OK | X_OK, false, 0xffffffffu),
			 RW_FILE | ACCESS3_EXECUTE);
}

/* Only the checks the requested bits need are made. */
static void test_want(void **state)
{
	(void)state;
	assert_int_equal(nfs_access_want(0), 0);
	assert_int_equal(nfs_access_want(ACCESS3_READ), R_OK);
	assert_int_equal(nfs_access_want(ACCESS3_LOOKUP), X_OK);
	assert_int_equal(nfs_access_want(ACCESS3_EXECUTE), X_OK);
	assert_int_equal(nfs_access_want(ACCESS3_MODIFY), W_OK | X_OK);
	assert_int_equal(nfs_access_want(ACCESS3_EXTEND), W_OK | X_OK);
	assert_int_equal(nfs_access_want(ACCESS3_DELETE), W_OK | X_OK);
	assert_int_equal(nfs_access_want(ALL), R_OK | W_OK | X_OK);
}

static struct rpc_cred mkrc(uint32_t flavor, uint32_t uid, uint32_t gid, uint32_t ngroups,
			    const uint32_t *groups)
{
	struct rpc_cred rc;

	memset(&rc, 0, sizeof(rc));
	rc.rc_flavor = flavor;
	rc.rc_uid = uid;
	rc.rc_gid = gid;
	rc.rc_ngroups = ngroups;
	memcpy(rc.rc_groups, groups, ngroups * sizeof(*groups));
	return rc;
}

static void test_squash(void **state)
{
	struct export_opts eo = { .eo_squash = SQUASH_ROOT, .eo_anonuid = 65534,
				  .eo_anongid = 65533, .eo_secure = true };
	const uint32_t groups[] = { 5, 0, 6 };
	struct rpc_cred rc = mkrc(AUTH_SYS, 0, 0, 3, groups);
	struct cred cr;

	(void)state;
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_uid, 65534);
	assert_int_equal(cr.cr_gid, 65533);
	assert_int_equal(cr.cr_ngroups, 3);
	assert_int_equal(cr.cr_groups[0], 5);
	assert_int_equal(cr.cr_groups[1], 65533);
	assert_int_equal(cr.cr_groups[2], 6);

	rc = mkrc(AUTH_SYS, 1000, 100, 3, groups);
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_uid, 1000);
	assert_int_equal(cr.cr_gid, 100);
	assert_int_equal(cr.cr_groups[1], 65533);

	eo.eo_squash = SQUASH_NONE;
	rc = mkrc(AUTH_SYS, 0, 0, 3, groups);
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_uid, 0);
	assert_int_equal(cr.cr_gid, 0);
	assert_int_equal(cr.cr_groups[1], 0);

	eo.eo_squash = SQUASH_ALL;
	rc = mkrc(AUTH_SYS, 1000, 100, 3, groups);
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_uid, 65534);
	assert_int_equal(cr.cr_gid, 65533);
	assert_int_equal(cr.cr_ngroups, 0);

	eo.eo_squash = SQUASH_NONE;
	rc = mkrc(AUTH_NONE, 0, 0, 0, groups);
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_uid, 65534);
	assert_int_equal(cr.cr_gid, 65533);

	/* A count beyond the array (never produced by the parser) is clamped, not trusted. */
	rc = mkrc(AUTH_SYS, 1, 1, 0, groups);
	rc.rc_ngroups = 1000;
	cred_squash(&rc, &eo, &cr);
	assert_int_equal(cr.cr_ngroups, RPC_MAX_GROUPS);
}

/* The thread's fsuid/fsgid and supplementary groups, without changing them. */
static void thread_ids(uint32_t *fsuid, uint32_t *fsgid, int *ngroups)
{
	gid_t groups[64];

	*fsuid = (uint32_t)syscall(SYS_setfsuid, (uid_t)-1);
	*fsgid = (uint32_t)syscall(SYS_setfsgid, (gid_t)-1);
	*ngroups = (int)syscall(SYS_getgroups, 64, groups);
}

struct cred_sync {
	pthread_mutex_t cs_lock;
	pthread_cond_t cs_cond;
	int cs_stage;
};

static void cred_wait(struct cred_sync *cs, int stage)
{
	pthread_mutex_lock(&cs->cs_lock);
	while (cs->cs_stage < stage)
		pthread_cond_wait(&cs->cs_cond, &cs->cs_lock);
	pthread_mutex_unlock(&cs->cs_lock);
}

static void cred_step(struct cred_sync *cs, int stage)
{
	pthread_mutex_lock(&cs->cs_lock);
	cs->cs_stage = stage;
	pthread_cond_broadcast(&cs->cs_cond);
	pthread_mutex_unlock(&cs->cs_lock);
}

static void *cred_thread(void *arg)
{
	struct cred_sync *cs = arg;
	struct cred cr = { .cr_uid = 1234, .cr_gid = 5678, .cr_ngroups = 2,
			   .cr_groups = { 11, 12 } };
	uint32_t u, g;
	int n;

	if (cred_apply(&cr) != 0) {
		cred_step(cs, 1);
		return (void *)1;
	}
	thread_ids(&u, &g, &n);
	cred_step(cs, 1);
	if (u != 1234 || g != 5678 || n != 2) {
		cred_restore();
		return (void *)2;
	}
	cred_wait(cs, 2);
	cred_restore();
	thread_ids(&u, &g, &n);
	return (void *)(intptr_t)(u == 0 && g == 0 && n == 0 ? 0 : 3);
}

static void test_cred_per_thread(void **state)
{
	struct cred_sync cs = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	pthread_t t;
	void *rv;
	uint32_t u, g;
	int n;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(pthread_create(&t, NULL, cred_thread, &cs), 0);
	cred_wait(&cs, 1);
	/* While the other thread acts as 1234, this one is still root with no groups. */
	thread_ids(&u, &g, &n);
	assert_int_equal(u, 0);
	assert_int_equal(g, 0);
	cred_step(&cs, 2);
	assert_int_equal(pthread_join(t, &rv), 0);
	assert_null(rv);
	(void)n;
}

/* The calling thread's effective capabilities. */
static uint64_t thread_cap_eff(void)
{
	FILE *f = fopen("/proc/thread-self/status", "re");
	char line[256];
	uint64_t v = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7))
			v = strtoull(line + 7, NULL, 16);
	fclose(f);
	return v;
}

static char cap_has(int cap)
{
	return thread_cap_eff() >> cap & 1 ? '1' : '0';
}

/*
 * The steps of a worker's life, each noting whether the thread then has CAP_SYS_RESOURCE
 * ('1'/'0'; 'E' when the switch failed). See SYSRES_WANT.
 */
static void *sysres_thread(void *arg)
{
	struct cred user = { .cr_uid = 1000, .cr_gid = 1000 };
	struct cred other = { .cr_uid = 2000, .cr_gid = 2000, .cr_ngroups = 1, .cr_groups = { 7 } };
	struct cred root = { 0 };
	struct fsio_ids ids;
	char *out = arg;
	int i = 0;

	out[i++] = cap_has(CAP_SYS_RESOURCE);
	out[i++] = cred_apply(&user) == 0 ? cap_has(CAP_SYS_RESOURCE) : 'E';
	out[i++] = cap_has(CAP_DAC_OVERRIDE);
	out[i++] = cred_apply(&other) == 0 ? cap_has(CAP_SYS_RESOURCE) : 'E';
	fsio_become_root(&ids);
	out[i++] = cap_has(CAP_SYS_RESOURCE);
	fsio_restore(&ids);
	out[i++] = cap_has(CAP_SYS_RESOURCE);
	cred_restore();
	out[i++] = cap_has(CAP_SYS_RESOURCE);
	out[i++] = cred_apply(&user) == 0 ? cap_has(CAP_SYS_RESOURCE) : 'E';
	out[i++] = cred_apply(&root) == 0 ? cap_has(CAP_SYS_RESOURCE) : 'E';
	out[i] = '\0';
	return NULL;
}

#define SYSRES_WANT "100010101"
static const char *const sysres_steps[] = {
	"a fresh thread", "acting as uid 1000", "CAP_DAC_OVERRIDE as uid 1000",
	"acting as uid 2000", "copy-up as root (fsio_become_root)", "back to uid 2000 (fsio_restore)",
	"cred_restore", "uid 1000 again", "client root without squashing",
};

/* The child: a user namespace of its own, where it holds every capability. */
static void sysres_child(int go, int res)
{
	char c, out[16];
	pthread_t t;

	if (unshare(CLONE_NEWUSER) != 0) {
		(void)!write(res, "U", 1);
		_exit(1);
	}
	if (write(res, "R", 1) != 1 || read(go, &c, 1) != 1)
		_exit(1);
	if (pthread_create(&t, NULL, sysres_thread, out) != 0 || pthread_join(t, NULL) != 0)
		_exit(1);
	(void)!write(res, out, strlen(out));
	_exit(0);
}

static void write_map(pid_t pid, const char *which)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0 0 65536\n", 10), 10);
	close(fd);
}

/*
 * CAP_SYS_RESOURCE follows the fsuid, as in knfsd: a worker acting for a client user has
 * lost it (so that user can neither exceed a quota nor take root's reserved blocks), one
 * acting as root has it. Checked in a user namespace of a child process, where the thread
 * holds every capability whatever the host's bounding set lacks.
 */
static void test_cred_sys_resource(void **state)
{
	int go[2], res[2], status;
	char out[32] = "";
	ssize_t n;
	pid_t pid;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		close(res[0]);
		sysres_child(go[0], res[1]);
	}
	close(go[0]);
	close(res[1]);
	assert_int_equal(read(res[0], out, 1), 1);
	if (out[0] == 'U') {
		waitpid(pid, &status, 0);
		fprintf(stderr, "# no user namespaces on this host: cannot check CAP_SYS_RESOURCE\n");
		skip();
	}
	/* Map the namespace's ids 0..65535 to the same ids outside, so setfsuid works in it. */
	write_map(pid, "uid_map");
	write_map(pid, "gid_map");
	assert_int_equal(write(go[1], "G", 1), 1);
	n = read(res[0], out, sizeof(out) - 1);
	out[n > 0 ? n : 0] = '\0';
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(go[1]);
	close(res[0]);
	fprintf(stderr, "# CAP_SYS_RESOURCE along a worker's steps: %s (want %s)\n", out,
		SYSRES_WANT);
	for (size_t i = 0; i < strlen(SYSRES_WANT); i++)
		if (out[i] != SYSRES_WANT[i])
			fail_msg("%s: CAP_SYS_RESOURCE (or, third, CAP_DAC_OVERRIDE) is %c, want %c",
				 sysres_steps[i], out[i] ? out[i] : '?', SYSRES_WANT[i]);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_bits),
		cmocka_unit_test(test_directory_bits),
		cmocka_unit_test(test_read_only_and_mask),
		cmocka_unit_test(test_want),
		cmocka_unit_test(test_squash),
		cmocka_unit_test(test_cred_per_thread),
		cmocka_unit_test(test_cred_sys_resource),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
