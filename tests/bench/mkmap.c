/*
 * mkmap: builds a large inode map and the tree it describes, so the map's size, the
 * server's start-up time and its memory can be measured without a client first walking
 * a million names (see /work/notes/mkmap.md and tests/bench/map-scale.sh).
 *
 *   mkmap --state DIR --entries N --branches UPPER:LOWER[:LOWER...]
 *         [--export NAME] [--per-dir K] [--txn-size T]
 *
 * The bottom branch gets directories d000000.. of K empty files f00000.. each; the
 * other branches are only created (empty). The map gets exactly the records a server
 * exporting NAME with these branches would write when a client looks every name up:
 * the export bound with the canonical branch paths and root inode numbers (as
 * union_open does), then per name a record parent/name/type/bottom branch/real inode
 * (and, for a file, the identity its file system gives it) inserted through store_insert
 * (as ures_map_write does for a name it has never seen).
 * N counts every record, the root included.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsio.h"
#include "store.h"

#define MKMAP_MAX_BRANCHES 128

struct mkmap_opts {
	const char *mo_state;
	const char *mo_export;
	char *mo_branches;
	uint64_t mo_entries;
	uint64_t mo_per_dir;
	uint64_t mo_txn_size;
};

struct mkmap {
	struct store *mm_store;
	struct store_txn *mm_txn;
	uint16_t mm_exp;
	uint8_t mm_branch;        /* index of the bottom branch, where the tree lives */
	uint64_t mm_in_txn;
	uint64_t mm_txn_size;
	uint64_t mm_records;
};

static void mkmap_usage(FILE *f)
{
	fprintf(f, "usage: mkmap --state DIR --entries N --branches UPPER:LOWER[:LOWER...]\n"
		   "             [--export NAME] [--per-dir K] [--txn-size T]\n"
		   "  Creates K-file directories in the bottom branch and the inode map in DIR\n"
		   "  that a server exporting NAME (default /bench) would have recorded for them.\n"
		   "  N counts all records, the root included; K defaults to 1000, T (records per\n"
		   "  write transaction) to 100000.\n");
}

static int mkmap_number(const char *opt, const char *s, uint64_t min, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min) {
		fprintf(stderr, "mkmap: %s %s: give a whole number of at least %" PRIu64 "\n",
			opt, s, min);
		return -1;
	}
	*out = v;
	return 0;
}

static double mkmap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Creates a directory that must not hold anything yet, so the map matches it exactly. */
static int mkmap_empty_dir(const char *path)
{
	struct stat st;
	char probe[PATH_MAX];

	if (mkdir(path, 0755) == 0)
		return 0;
	if (errno != EEXIST || stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "mkmap: cannot create branch %s: %s; fix the path or its parent\n",
			path, strerror(errno == EEXIST ? ENOTDIR : errno));
		return -1;
	}
	snprintf(probe, sizeof(probe), "%s/d000000", path);
	if (access(probe, F_OK) == 0) {
		fprintf(stderr, "mkmap: branch %s already holds a tree; remove it first (the map "
			"must describe a fresh tree)\n", path);
		return -1;
	}
	return 0;
}

static int mkmap_flush(struct mkmap *mm, bool reopen)
{
	int r;

	if (mm->mm_txn) {
		r = store_commit(mm->mm_txn);
		mm->mm_txn = NULL;
		if (r < 0) {
			fprintf(stderr, "mkmap: commit failed: %s\n", strerror(-r));
			return -1;
		}
	}
	mm->mm_in_txn = 0;
	if (!reopen)
		return 0;
	r = store_begin(mm->mm_store, true, &mm->mm_txn);
	if (r < 0) {
		fprintf(stderr, "mkmap: cannot begin a write transaction: %s\n", strerror(-r));
		return -1;
	}
	return 0;
}

/*
 * One record, as the server's first LOOKUP of the name records it: for a file, with the
 * identity its file system gives it (name in dirfd), as ures_map_write keeps.
 */
static int mkmap_record(struct mkmap *mm, uint64_t parent, int dirfd, const char *name,
			const struct stat *st, uint64_t *ino)
{
	struct store_inode rec;
	int r;

	if (mm->mm_in_txn >= mm->mm_txn_size && mkmap_flush(mm, true) < 0)
		return -1;
	memset(&rec, 0, sizeof(rec));
	rec.si_parent = parent;
	snprintf(rec.si_name, sizeof(rec.si_name), "%s", name);
	rec.si_type = (uint8_t)((st->st_mode & S_IFMT) >> 12);
	rec.si_branch = mm->mm_branch;
	rec.si_real_ino = (uint64_t)st->st_ino;
	r = S_ISDIR(st->st_mode) ? 0 : fsio_ident(dirfd, name, &rec.si_real_id);
	if (r == 0)
		r = store_insert(mm->mm_txn, mm->mm_exp, &rec);
	if (r < 0) {
		fprintf(stderr, "mkmap: inserting %s: %s\n", name, strerror(-r));
		return -1;
	}
	mm->mm_in_txn++;
	mm->mm_records++;
	*ino = rec.si_ino;
	return 0;
}

static int mkmap_tree(struct mkmap *mm, const char *bottom, uint64_t entries, uint64_t per_dir)
{
	uint64_t left = entries - 1; /* the root exists already */
	int rootfd, dfd = -1, fd, rc = -1;
	char name[32];
	struct stat st;
	double t0 = mkmap_now();

	rootfd = open(bottom, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		fprintf(stderr, "mkmap: cannot open %s: %s\n", bottom, strerror(errno));
		return -1;
	}
	if (mkmap_flush(mm, true) < 0)
		goto out;
	for (uint64_t d = 0; left > 0; d++) {
		uint64_t dino, fino, files = left - 1 < per_dir ? left - 1 : per_dir;

		snprintf(name, sizeof(name), "d%06" PRIu64, d);
		if (mkdirat(rootfd, name, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "mkmap: mkdir %s/%s: %s\n", bottom, name, strerror(errno));
			goto out;
		}
		dfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fstat(dfd, &st) < 0) {
			fprintf(stderr, "mkmap: open %s/%s: %s\n", bottom, name, strerror(errno));
			goto out;
		}
		if (mkmap_record(mm, STORE_ROOT_INO, rootfd, name, &st, &dino) < 0)
			goto out;
		left--;
		for (uint64_t i = 0; i < files; i++, left--) {
			snprintf(name, sizeof(name), "f%05" PRIu64, i);
			fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (fd < 0 || fstat(fd, &st) < 0) {
				fprintf(stderr, "mkmap: create %s/d%06" PRIu64 "/%s: %s\n", bottom, d,
					name, strerror(errno));
				if (fd >= 0)
					close(fd);
				goto out;
			}
			close(fd);
			if (mkmap_record(mm, dino, dfd, name, &st, &fino) < 0)
				goto out;
		}
		close(dfd);
		dfd = -1;
		if ((d + 1) % 100 == 0)
			fprintf(stderr, "mkmap: %" PRIu64 " records, %.1f s\n", mm->mm_records + 1,
				mkmap_now() - t0);
	}
	rc = mkmap_flush(mm, false);
out:
	if (dfd >= 0)
		close(dfd);
	close(rootfd);
	return rc;
}

static int mkmap_parse(int argc, char **argv, struct mkmap_opts *o)
{
	static const struct option longs[] = {
		{ "state", required_argument, NULL, 's' },
		{ "entries", required_argument, NULL, 'n' },
		{ "branches", required_argument, NULL, 'b' },
		{ "export", required_argument, NULL, 'e' },
		{ "per-dir", required_argument, NULL, 'k' },
		{ "txn-size", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct mkmap_opts){ .mo_export = "/bench", .mo_per_dir = 1000,
				  .mo_txn_size = 100000 };
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 's': o->mo_state = optarg; break;
		case 'b': o->mo_branches = optarg; break;
		case 'e': o->mo_export = optarg; break;
		case 'n':
			if (mkmap_number("--entries", optarg, 1, &o->mo_entries) < 0)
				return -1;
			break;
		case 'k':
			if (mkmap_number("--per-dir", optarg, 1, &o->mo_per_dir) < 0)
				return -1;
			break;
		case 't':
			if (mkmap_number("--txn-size", optarg, 1, &o->mo_txn_size) < 0)
				return -1;
			break;
		case 'h':
			mkmap_usage(stdout);
			exit(0);
		default:
			mkmap_usage(stderr);
			return -1;
		}
	}
	if (optind != argc || !o->mo_state || !o->mo_branches || !o->mo_entries) {
		mkmap_usage(stderr);
		return -1;
	}
	if (o->mo_export[0] != '/' || (strlen(o->mo_export) > 1 &&
				       o->mo_export[strlen(o->mo_export) - 1] == '/')) {
		fprintf(stderr, "mkmap: --export %s: give the normalized mount path, e.g. /bench\n",
			o->mo_export);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct store_branch_id ids[MKMAP_MAX_BRANCHES];
	char *paths[MKMAP_MAX_BRANCHES] = { NULL };
	struct mkmap_opts o;
	struct mkmap mm = { 0 };
	char err[1024], probe[PATH_MAX];
	struct stat st;
	int n = 0, rc = 1;
	double t0;

	if (mkmap_parse(argc, argv, &o) < 0)
		return 2;
	snprintf(probe, sizeof(probe), "%s/inodes.mdb", o.mo_state);
	if (access(probe, F_OK) == 0) {
		fprintf(stderr, "mkmap: %s already holds an inode map; remove the state directory "
			"first\n", o.mo_state);
		return 2;
	}
	for (char *save = NULL, *b = strtok_r(o.mo_branches, ":", &save); b;
	     b = strtok_r(NULL, ":", &save)) {
		if (n == MKMAP_MAX_BRANCHES) {
			fprintf(stderr, "mkmap: at most %d branches\n", MKMAP_MAX_BRANCHES);
			goto out;
		}
		if (mkmap_empty_dir(b) < 0)
			goto out;
		/* The server binds the canonical path and the root's inode number. */
		paths[n] = realpath(b, NULL);
		if (!paths[n] || stat(paths[n], &st) < 0) {
			fprintf(stderr, "mkmap: branch %s: %s\n", b, strerror(errno));
			goto out;
		}
		ids[n].sb_path = paths[n];
		ids[n].sb_root_ino = (uint64_t)st.st_ino;
		n++;
	}
	if (n < 1) {
		fprintf(stderr, "mkmap: --branches: give at least one directory\n");
		goto out;
	}
	if (store_open(o.mo_state, &mm.mm_store, err, sizeof(err)) < 0) {
		fprintf(stderr, "mkmap: %s\n", err);
		goto out;
	}
	if (store_bind_export(mm.mm_store, o.mo_export, ids, n, &mm.mm_exp, err, sizeof(err)) < 0) {
		fprintf(stderr, "mkmap: %s\n", err);
		goto out;
	}
	mm.mm_branch = (uint8_t)(n - 1);
	mm.mm_txn_size = o.mo_txn_size;
	t0 = mkmap_now();
	if (mkmap_tree(&mm, paths[n - 1], o.mo_entries, o.mo_per_dir) < 0)
		goto out;
	printf("mkmap: export %s (id %u): %" PRIu64 " records in %.1f s\n", o.mo_export,
	       mm.mm_exp, mm.mm_records + 1, mkmap_now() - t0);
	rc = 0;
out:
	if (mm.mm_txn)
		store_abort(mm.mm_txn);
	store_close(mm.mm_store);
	for (int i = 0; i < n; i++)
		free(paths[i]);
	return rc;
}
