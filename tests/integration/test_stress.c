/*
 * Many clients at once: threads with their own TCP or UDP connections create, write, read
 * back, rename, list and remove files in one shared directory and in their own ones, so
 * the worker pool, the inode map's transactions and the listing cache all see concurrent
 * work. Every reply must be right; the directory must end up exactly as expected.
 */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { THREADS = 8, ROUNDS = 150, FILE_LEN = 20000 };

static nfs_fh3 root, shared;

struct worker {
	int w_id;
	int w_errors;
	char w_first_error[256];
};

static void werr(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void werr(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->w_errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(w->w_first_error, sizeof(w->w_first_error), fmt, ap);
		va_end(ap);
	}
}

static bool call(struct worker *w, CLIENT *c, uint32_t proc, xdrproc_t xa, void *a, xdrproc_t xr,
		 void *r, const char *what)
{
	struct timeval tv = { IT_CALL_TIMEOUT, 0 };
	enum clnt_stat cs = clnt_call(c, proc, xa, a, xr, r, tv);

	if (cs != RPC_SUCCESS) {
		werr(w, "%s: %s", what, clnt_sperrno(cs));
		return false;
	}
	return true;
}

/* Creates name in dir and returns its handle (malloc'd) or a zero-length one on error. */
static nfs_fh3 w_create(struct worker *w, CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	CREATE3args a;
	CREATE3res r;
	nfs_fh3 fh = { { 0, NULL } };

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.where.dir = *dir;
	a.where.name = (char *)name;
	a.how.mode = GUARDED;
	if (!call(w, c, NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args, &a, (xdrproc_t)xdr_CREATE3res,
		  &r, "CREATE"))
		return fh;
	if (r.status != NFS3_OK)
		werr(w, "CREATE %s: %s", name, it_nfsstat_name(r.status));
	else if (!r.CREATE3res_u.resok.obj.handle_follows)
		werr(w, "CREATE %s: no handle", name);
	else
		it_fh_copy(&fh, &r.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
	it_free((xdrproc_t)xdr_CREATE3res, &r);
	return fh;
}

static void w_write_read(struct worker *w, CLIENT *c, const nfs_fh3 *fh, uint32_t seed,
			 uint32_t max)
{
	static __thread char data[FILE_LEN];
	WRITE3args wa;
	WRITE3res wr;
	READ3args ra;
	READ3res rr;
	uint32_t done = 0;

	it_fill(data, FILE_LEN, seed);
	while (done < FILE_LEN) {
		uint32_t n = FILE_LEN - done < max ? FILE_LEN - done : max;

		memset(&wr, 0, sizeof(wr));
		wa.file = *fh;
		wa.offset = done;
		wa.count = n;
		wa.stable = done % 2 ? FILE_SYNC : UNSTABLE;
		wa.data.data_len = n;
		wa.data.data_val = data + done;
		if (!call(w, c, NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args, &wa,
			  (xdrproc_t)xdr_WRITE3res, &wr, "WRITE"))
			return;
		if (wr.status != NFS3_OK || wr.WRITE3res_u.resok.count == 0) {
			werr(w, "WRITE: %s", it_nfsstat_name(wr.status));
			it_free((xdrproc_t)xdr_WRITE3res, &wr);
			return;
		}
		done += wr.WRITE3res_u.resok.count;
		it_free((xdrproc_t)xdr_WRITE3res, &wr);
	}
	done = 0;
	while (done < FILE_LEN) {
		memset(&rr, 0, sizeof(rr));
		ra.file = *fh;
		ra.offset = done;
		ra.count = max;
		if (!call(w, c, NFSPROC3_READ, (xdrproc_t)xdr_READ3args, &ra, (xdrproc_t)xdr_READ3res,
			  &rr, "READ"))
			return;
		if (rr.status != NFS3_OK || rr.READ3res_u.resok.count == 0) {
			werr(w, "READ at %u: %s", done, it_nfsstat_name(rr.status));
			it_free((xdrproc_t)xdr_READ3res, &rr);
			return;
		}
		if (memcmp(rr.READ3res_u.resok.data.data_val, data + done,
			   rr.READ3res_u.resok.count) != 0)
			werr(w, "READ at %u: wrong data", done);
		done += rr.READ3res_u.resok.count;
		it_free((xdrproc_t)xdr_READ3res, &rr);
	}
}

static void w_remove(struct worker *w, CLIENT *c, const nfs_fh3 *dir, const char *name)
{
	REMOVE3args a = { .object = { .dir = *dir, .name = (char *)name } };
	REMOVE3res r;

	memset(&r, 0, sizeof(r));
	if (!call(w, c, NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args, &a, (xdrproc_t)xdr_REMOVE3res,
		  &r, "REMOVE"))
		return;
	if (r.status != NFS3_OK)
		werr(w, "REMOVE %s: %s", name, it_nfsstat_name(r.status));
	it_free((xdrproc_t)xdr_REMOVE3res, &r);
}

static void w_rename(struct worker *w, CLIENT *c, const nfs_fh3 *dir, const char *from,
		     const char *to)
{
	RENAME3args a = { .from = { .dir = *dir, .name = (char *)from },
			  .to = { .dir = *dir, .name = (char *)to } };
	RENAME3res r;

	memset(&r, 0, sizeof(r));
	if (!call(w, c, NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args, &a, (xdrproc_t)xdr_RENAME3res,
		  &r, "RENAME"))
		return;
	if (r.status != NFS3_OK)
		werr(w, "RENAME %s: %s", from, it_nfsstat_name(r.status));
	it_free((xdrproc_t)xdr_RENAME3res, &r);
}

/* A full READDIRPLUS listing of the shared directory; every entry must have a fileid. */
static void w_list(struct worker *w, CLIENT *c)
{
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	bool eof = false;
	int pages = 0;

	while (!eof && pages++ < 1000) {
		READDIRPLUS3args a = { .dir = shared, .cookie = cookie, .dircount = 1024,
				       .maxcount = 8192 };
		READDIRPLUS3res r;

		memcpy(a.cookieverf, verf, 8);
		memset(&r, 0, sizeof(r));
		if (!call(w, c, NFSPROC3_READDIRPLUS, (xdrproc_t)xdr_READDIRPLUS3args, &a,
			  (xdrproc_t)xdr_READDIRPLUS3res, &r, "READDIRPLUS"))
			return;
		if (r.status != NFS3_OK) {
			werr(w, "READDIRPLUS: %s", it_nfsstat_name(r.status));
			it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
			return;
		}
		for (entryplus3 *e = r.READDIRPLUS3res_u.resok.reply.entries; e; e = e->nextentry) {
			if (e->fileid == 0)
				werr(w, "READDIRPLUS: %s has fileid 0", e->name);
			cookie = e->cookie;
		}
		memcpy(verf, r.READDIRPLUS3res_u.resok.cookieverf, 8);
		eof = r.READDIRPLUS3res_u.resok.reply.eof;
		it_free((xdrproc_t)xdr_READDIRPLUS3res, &r);
	}
	if (!eof)
		werr(w, "READDIRPLUS never reached eof");
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int proto = w->w_id % 2 ? IPPROTO_UDP : IPPROTO_TCP;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(it_srv.is_nfs_port) };
	int sock = RPC_ANYSOCK;
	CLIENT *c;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (proto == IPPROTO_TCP) {
		c = clnttcp_create(&sin, NFS_PROGRAM, NFS_V3, &sock, 0, 0);
	} else {
		struct timeval retry = { 1, 0 };

		c = clntudp_bufcreate(&sin, NFS_PROGRAM, NFS_V3, retry, &sock, 65000, 65000);
	}
	if (!c) {
		werr(w, "no client");
		return NULL;
	}
	auth_destroy(c->cl_auth);
	c->cl_auth = authunix_create("unfs-stress", 0, 0, 0, NULL);
	for (int round = 0; round < ROUNDS; round++) {
		char name[64], renamed[64];
		nfs_fh3 fh;

		snprintf(name, sizeof(name), "w%d-r%d", w->w_id, round);
		snprintf(renamed, sizeof(renamed), "w%d-r%d-renamed", w->w_id, round);
		fh = w_create(w, c, &shared, name);
		if (!fh.data.data_len)
			continue;
		w_write_read(w, c, &fh, (uint32_t)(w->w_id * 1000 + round), proto == IPPROTO_UDP ? 8192 : 65536);
		w_rename(w, c, &shared, name, renamed);
		if (round % 4 == 0)
			w_list(w, c);
		/* keep every other file so the final listing has a known shape */
		if (round % 2)
			w_remove(w, c, &shared, renamed);
		it_fh_free(&fh);
	}
	auth_destroy(c->cl_auth);
	c->cl_auth = NULL;
	clnt_destroy(c);
	return NULL;
}

static void test_concurrent_clients(void **state)
{
	pthread_t tid[THREADS];
	struct worker w[THREADS];
	CLIENT *c;
	char p[PATH_MAX];
	int errors = 0;

	(void)state;
	assert_int_equal(it_mnt(&it_srv, IPPROTO_TCP, IT_EXPORT, &root), IT_MNT_OK);
	it_path(p, "%s/shared", it_srv.is_upper);
	assert_int_equal(mkdir(p, 0777), 0);
	c = it_nfs_clnt(&it_srv, IPPROTO_TCP);
	it_assert_status(it_lookup(c, &root, "shared", &shared, NULL), NFS3_OK);
	for (int i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].w_id = i;
		assert_int_equal(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		if (w[i].w_errors) {
			fprintf(stderr, "worker %d: %d errors, first: %s\n", i, w[i].w_errors,
				w[i].w_first_error);
			errors += w[i].w_errors;
		}
	}
	assert_int_equal(errors, 0);
	/* exactly the kept files, with the right contents, on disk and over NFS */
	for (int i = 0; i < THREADS; i++)
		for (int round = 0; round < ROUNDS; round++) {
			char want[FILE_LEN], *disk;
			size_t len;

			it_path(p, "%s/shared/w%d-r%d-renamed", it_srv.is_upper, i, round);
			disk = it_read_file(p, &len);
			if (round % 2) {
				if (disk)
					fail_msg("%s should have been removed", p);
				continue;
			}
			if (!disk)
				fail_msg("%s is missing", p);
			it_fill(want, FILE_LEN, (uint32_t)(i * 1000 + round));
			assert_int_equal(len, FILE_LEN);
			assert_memory_equal(disk, want, FILE_LEN);
			free(disk);
			it_path(p, "w%d-r%d-renamed", i, round);
			it_assert_status(it_lookup(c, &shared, p, NULL, NULL), NFS3_OK);
		}
	it_fh_free(&shared);
	it_fh_free(&root);
	it_clnt_destroy(c);
}

/* Half the clients talk UDP. */
static int setup(void **state)
{
	(void)state;
	return it_group_setup_udp(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_clients),
	};

	return cmocka_run_group_tests_name("concurrent clients", tests, setup, it_group_teardown);
}
