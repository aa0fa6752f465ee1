#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "union_fixture.h"
#include "../rmtree.h"

const struct union_setattr no_sa;

static atomic_int_fast64_t fx_clock_ms = 1000000;

int64_t fx_clock_now(void)
{
	return atomic_load(&fx_clock_ms);
}

void fx_clock_advance(int64_t ms)
{
	atomic_fetch_add(&fx_clock_ms, ms);
}

void fx_path(struct fx *f __attribute__((unused)), char *out, const char *dir, const char *rel)
{
	assert_true(snprintf(out, PATH_MAX, "%s/%s", dir, rel) < PATH_MAX);
}

void fx_open(struct fx *f)
{
	char err[512] = "";

	if (store_open(f->state, &f->st, err, sizeof(err)) < 0)
		fail_msg("store_open: %s", err);
	if (union_open("/union", f->branches, f->n, f->roles, f->ro ? UNION_OPEN_RO : 0, "fix -e",
		       f->st, &f->ux, err, sizeof(err)) < 0)
		fail_msg("union_open: %s", err);
	if (f->policy)
		union_set_policy(f->ux, f->policy);
	if (f->clock)
		union_set_clock(f->ux, f->clock);
}

void fx_close(struct fx *f)
{
	union_close(f->ux);
	store_close(f->st);
	f->ux = NULL;
	f->st = NULL;
}

void fx_restart(struct fx *f)
{
	fx_close(f);
	fx_open(f);
}

struct fx *fx_new(int nbranches)
{
	static const char *const names[FX_MAXB] = { "upper", "middle", "lower", "" };
	static const char *const names4[FX_MAXB] = { "w0", "w1", "w2", "base" };
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_true(nbranches >= 1 && nbranches <= FX_MAXB);
	strcpy(f->base, "/tmp/test_union.XXXXXX");
	assert_non_null(mkdtemp(f->base));
	fx_path(f, f->state, f->base, "state");
	for (int i = 0; i < nbranches; i++) {
		fx_path(f, f->br[i], f->base, nbranches == 4 ? names4[i] :
					      names[nbranches == 2 && i == 1 ? 2 : i]);
		assert_int_equal(mkdir(f->br[i], 0755), 0);
		f->branches[i] = f->br[i];
	}
	f->up = f->br[0];
	f->lo = nbranches > 1 ? f->br[nbranches - 1] : NULL;
	f->n = nbranches;
	return f;
}

void fx_free(struct fx *f)
{
	if (f->ux)
		fx_close(f);
	rm_tree(f->base);
	free(f);
}

int fx_setup1(void **state)
{
	struct fx *f = fx_new(1);

	fx_open(f);
	*state = f;
	return 0;
}

int fx_setup2(void **state)
{
	*state = fx_new(2);
	return 0;
}

int fx_setup3(void **state)
{
	*state = fx_new(3);
	return 0;
}

const enum union_role fx_rw3_roles[FX_MAXB] = { UNION_BRANCH_RW, UNION_BRANCH_RW,
						 UNION_BRANCH_RW, UNION_BRANCH_RO };

int fx_setup_rw3(void **state)
{
	struct fx *f = fx_new(4);

	f->roles = fx_rw3_roles;
	fx_open(f);
	*state = f;
	return 0;
}

int fx_teardown(void **state)
{
	if (*state)
		fx_free(*state);
	union_watch_budget(SIZE_MAX); /* a test that lowered it may have failed on the way */
	return 0;
}

const char *P(struct fx *f, int b, const char *rel)
{
	static char buf[4][PATH_MAX];
	static int k;

	k = (k + 1) % 4;
	fx_path(f, buf[k], f->br[b], rel);
	return buf[k];
}

void put_file(const char *dir, const char *rel, const char *data, mode_t mode)
{
	char p[PATH_MAX];
	int fd;

	assert_true(snprintf(p, sizeof(p), "%s/%s", dir, rel) < (int)sizeof(p));
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	fchmod(fd, mode);
	close(fd);
}

void put_dir(const char *dir, const char *rel, mode_t mode)
{
	char p[PATH_MAX];

	assert_true(snprintf(p, sizeof(p), "%s/%s", dir, rel) < (int)sizeof(p));
	assert_int_equal(mkdir(p, mode), 0);
	chmod(p, mode);
}

void get_file(const char *dir, const char *rel, char *buf, size_t size)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	assert_true(snprintf(p, sizeof(p), "%s/%s", dir, rel) < (int)sizeof(p));
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, size - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
}

uint64_t lk(struct fx *f, uint64_t dir, const char *name)
{
	struct stat st;
	uint64_t ino = 0;

	assert_int_equal(union_lookup(f->ux, dir, name, &ino, &st), 0);
	assert_true(ino != 0);
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(st.st_dev, union_fsid(f->ux));
	return ino;
}

uint64_t walk(struct fx *f, const char *path)
{
	char buf[PATH_MAX], *save = NULL, *c;
	uint64_t ino = STORE_ROOT_INO;
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int r = union_lookup(f->ux, ino, c, &ino, &st);

		if (r == -ENOENT)
			return 0;
		assert_int_equal(r, 0);
		assert_int_equal(st.st_ino, ino);
	}
	return ino;
}

uint64_t W(struct fx *f, const char *path)
{
	uint64_t ino = walk(f, path);

	if (!ino)
		fail_msg("%s: not found through the union", path);
	return ino;
}

void gone(struct fx *f, const char *path)
{
	if (walk(f, path))
		fail_msg("%s: still visible through the union", path);
}

uint64_t mk_file(struct fx *f, uint64_t dir, const char *name)
{
	uint64_t ino = 0;
	struct stat st;

	assert_int_equal(union_create(f->ux, dir, name, UNION_GUARDED, &no_sa, NULL, &ino, &st,
				      NULL, NULL), 0);
	return ino;
}

uint64_t mk_dir(struct fx *f, uint64_t dir, const char *name)
{
	uint64_t ino = 0;
	struct stat st;

	assert_int_equal(union_mkdir(f->ux, dir, name, &no_sa, &ino, &st, NULL, NULL), 0);
	assert_true(S_ISDIR(st.st_mode));
	return ino;
}

void wr(struct fx *f, uint64_t ino, uint64_t off, const char *data)
{
	enum union_stable c;
	uint32_t n;

	assert_int_equal(union_write(f->ux, ino, off, (uint32_t)strlen(data), data,
				     UNION_FILE_SYNC, &n, &c, NULL, NULL), 0);
	assert_int_equal(n, strlen(data));
}

void rd(struct fx *f, uint64_t ino, char *buf, uint32_t size)
{
	uint32_t n;
	bool eof;

	assert_int_equal(union_read(f->ux, ino, 0, size - 1, buf, &n, &eof, NULL), 0);
	buf[n] = '\0';
	assert_true(eof);
}
