/*
 * wcc_data brackets its own change alone: clients compare a reply's pre-op
 * attributes with what they cached to decide whether they alone changed an object.
 *
 * CREATE: 8 connections make 60 files each in one directory at once. Every reply must
 * carry pre- and post-op attributes, and the size steps the replies report must add up to
 * the directory's growth, without two replies claiming the same step.
 * WRITE: 8 connections send 100 FILE_SYNC writes each to one file at once, each past the
 * others' ends; each reply's post-op size must be what its own write made of its pre-op
 * size, max(pre, offset + count).
 */
#include "common.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_CLIENTS 8
#define T_CREATES 60
#define T_WRITES 100
#define T_WRITE_LEN 4096
#define T_NAME_LEN 200       /* long names: the directory grows often */

struct step {
	bool s_have;             /* pre and post both present */
	uint64_t s_pre, s_post;
	uint64_t s_off;          /* WRITE */
};

struct worker {
	pthread_t w_thread;
	int w_id;
	CLIENT *w_clnt;
	nfs_fh3 w_fh;            /* the directory, or the file */
	struct step w_steps[T_WRITES > T_CREATES ? T_WRITES : T_CREATES];
	char w_err[256];
};

static struct it_server srv;
static nfs_fh3 root;
static CLIENT *clnt;
static struct worker workers[T_CLIENTS];

static int setup(void **state)
{
	(void)state;
	it_server_init(&srv, false);
	if (it_server_start(&srv) < 0)
		return -1;
	if (it_mnt(&srv, IPPROTO_TCP, IT_EXPORT, &root) != IT_MNT_OK)
		return -1;
	clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	it_clnt_destroy(clnt);
	it_fh_free(&root);
	return it_server_finish(&srv);
}

static void step_of(const wcc_data *w, struct step *s)
{
	s->s_have = w->before.attributes_follow && w->after.attributes_follow;
	if (s->s_have) {
		s->s_pre = w->before.pre_op_attr_u.attributes.size;
		s->s_post = w->after.post_op_attr_u.attributes.size;
	}
}

static void *creator(void *arg)
{
	struct worker *w = arg;
	char name[T_NAME_LEN + 1];

	for (int i = 0; i < T_CREATES && !w->w_err[0]; i++) {
		CREATE3args a;
		CREATE3res res;

		memset(name, 'a' + w->w_id, T_NAME_LEN);
		snprintf(name, 16, "c%d-%d-", w->w_id, i);
		name[strlen(name)] = 'x';
		name[T_NAME_LEN] = '\0';
		memset(&a, 0, sizeof(a));
		memset(&res, 0, sizeof(res));
		a.where.dir = w->w_fh;
		a.where.name = name;
		a.how.mode = GUARDED;
		if (it_call(w->w_clnt, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a,
			    (xdrproc_t)xdr_CREATE3res, &res) != RPC_SUCCESS)
			snprintf(w->w_err, sizeof(w->w_err), "CREATE %d: RPC failed", i);
		else if (res.status != NFS3_OK)
			snprintf(w->w_err, sizeof(w->w_err), "CREATE %d: %s", i,
				 it_nfsstat_name(res.status));
		else
			step_of(&res.CREATE3res_u.resok.dir_wcc, &w->w_steps[i]);
		it_free((xdrproc_t)xdr_CREATE3res, &res);
	}
	return NULL;
}

static void *writer(void *arg)
{
	static uint8_t data[T_WRITE_LEN];
	struct worker *w = arg;

	for (int i = 0; i < T_WRITES && !w->w_err[0]; i++) {
		WRITE3args a;
		WRITE3res res;

		memset(&a, 0, sizeof(a));
		memset(&res, 0, sizeof(res));
		a.file = w->w_fh;
		a.offset = ((uint64_t)i * T_CLIENTS + (uint64_t)w->w_id) * T_WRITE_LEN;
		a.count = T_WRITE_LEN;
		a.stable = FILE_SYNC;
		a.data.data_len = T_WRITE_LEN;
		a.data.data_val = (char *)data;
		if (it_call(w->w_clnt, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &a,
			    (xdrproc_t)xdr_WRITE3res, &res) != RPC_SUCCESS)
			snprintf(w->w_err, sizeof(w->w_err), "WRITE %d: RPC failed", i);
		else if (res.status != NFS3_OK)
			snprintf(w->w_err, sizeof(w->w_err), "WRITE %d: %s", i,
				 it_nfsstat_name(res.status));
		else
			step_of(&res.WRITE3res_u.resok.file_wcc, &w->w_steps[i]);
		w->w_steps[i].s_off = a.offset;
		it_free((xdrproc_t)xdr_WRITE3res, &res);
	}
	return NULL;
}

static void run_workers(const nfs_fh3 *fh, void *(*fn)(void *))
{
	for (int i = 0; i < T_CLIENTS; i++) {
		memset(&workers[i], 0, sizeof(workers[i]));
		workers[i].w_id = i;
		workers[i].w_clnt = it_nfs_clnt(&srv, IPPROTO_TCP);
		workers[i].w_fh = *fh;
	}
	for (int i = 0; i < T_CLIENTS; i++)
		assert_int_equal(pthread_create(&workers[i].w_thread, NULL, fn, &workers[i]), 0);
	for (int i = 0; i < T_CLIENTS; i++) {
		pthread_join(workers[i].w_thread, NULL);
		it_clnt_destroy(workers[i].w_clnt);
		if (workers[i].w_err[0])
			fail_msg("connection %d: %s", i, workers[i].w_err);
	}
}

static int by_pre(const void *a, const void *b)
{
	const struct step *x = a, *y = b;

	return x->s_pre < y->s_pre ? -1 : x->s_pre > y->s_pre;
}

static void test_create_wcc_chains(void **state)
{
	static struct step grew[T_CLIENTS * T_CREATES];
	MKDIR3args md;
	MKDIR3res mres;
	nfs_fh3 dir;
	fattr3 before, after;
	uint64_t sum = 0, overlaps = 0;
	size_t n = 0;

	(void)state;
	memset(&md, 0, sizeof(md));
	memset(&mres, 0, sizeof(mres));
	md.where.dir = root;
	md.where.name = "wccdir";
	assert_int_equal(it_call(clnt, NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args, &md,
				 (xdrproc_t)xdr_MKDIR3res, &mres), RPC_SUCCESS);
	it_assert_status(mres.status, NFS3_OK);
	it_free((xdrproc_t)xdr_MKDIR3res, &mres);
	it_assert_status(it_lookup(clnt, &root, "wccdir", &dir, &before), NFS3_OK);

	run_workers(&dir, creator);
	it_assert_status(it_getattr(clnt, &dir, &after), NFS3_OK);
	for (int i = 0; i < T_CLIENTS; i++)
		for (int k = 0; k < T_CREATES; k++) {
			struct step *s = &workers[i].w_steps[k];

			if (!s->s_have)
				fail_msg("a CREATE reply without pre- and post-op attributes");
			if (s->s_post < s->s_pre)
				fail_msg("a CREATE reply with post size %" PRIu64 " below pre %" PRIu64,
					 s->s_post, s->s_pre);
			sum += s->s_post - s->s_pre;
			if (s->s_post > s->s_pre)
				grew[n++] = *s;
		}
	qsort(grew, n, sizeof(grew[0]), by_pre);
	for (size_t i = 1; i < n; i++)
		if (grew[i].s_pre < grew[i - 1].s_post)
			overlaps++;
	fprintf(stderr, "%d CREATEs: replies' post.size - pre.size sum to %" PRIu64 " bytes, the "
		"directory grew %" PRIu64 " (%" PRIu64 " to %" PRIu64 "); %" PRIu64
		" overlapping steps\n", T_CLIENTS * T_CREATES, sum, after.size - before.size,
		before.size, after.size, overlaps);
	assert_int_equal(overlaps, 0);
	assert_int_equal(sum, after.size - before.size);
	it_fh_free(&dir);
}

static void test_write_wcc_own(void **state)
{
	nfs_fh3 file;
	unsigned bad = 0, total = 0;

	(void)state;
	it_assert_status(it_create(clnt, &root, "wccfile"), NFS3_OK);
	it_assert_status(it_lookup(clnt, &root, "wccfile", &file, NULL), NFS3_OK);
	run_workers(&file, writer);
	for (int i = 0; i < T_CLIENTS; i++)
		for (int k = 0; k < T_WRITES; k++) {
			struct step *s = &workers[i].w_steps[k];
			uint64_t end = s->s_off + T_WRITE_LEN;

			if (!s->s_have)
				fail_msg("a WRITE reply without pre- and post-op attributes");
			total++;
			if (s->s_post != (s->s_pre > end ? s->s_pre : end))
				bad++;
		}
	fprintf(stderr, "%u concurrent FILE_SYNC WRITEs: %u replies with a post size their own "
		"write does not explain\n", total, bad);
	assert_int_equal(bad, 0);
	it_fh_free(&file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_wcc_chains),
		cmocka_unit_test(test_write_wcc_own),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
