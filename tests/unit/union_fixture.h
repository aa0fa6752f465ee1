/*
 * The fixture of the union unit tests (test_union*.c): an export over real temporary
 * branches with its own store, helpers that build branches by hand (paths on
 * disk) and helpers that act through the union. Every helper asserts that what it does
 * succeeds, unless it returns the result.
 */
#ifndef UNION_FIXTURE_H
#define UNION_FIXTURE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "store.h"
#include "union.h"

#define FX_MAXB 4

struct fx {
	char base[PATH_MAX];
	char br[FX_MAXB][PATH_MAX];  /* [0] upper, then the lowers top-down */
	char state[PATH_MAX];
	char *branches[FX_MAXB];
	char *up, *lo;               /* the upper and the lowest branch (of 2 or more) */
	int n;
	bool ro;
	const enum union_role *roles;    /* given to union_open when not NULL */
	const struct union_policy *policy; /* set after each open when not NULL */
	union_clock_fn clock;        /* given to every union fx_open opens, when not NULL */
	struct store *st;
	struct union_export *ux;
};

extern const struct union_setattr no_sa;

/* Branches "upper", ["middle",] "lower" in a new temporary directory; fx_open opens them. */
struct fx *fx_new(int nbranches);
void fx_open(struct fx *f);
void fx_close(struct fx *f);
void fx_restart(struct fx *f); /* a server restart */
void fx_free(struct fx *f);
/* CMocka setups (1 branch: opened; 2 or 3: to be filled, then fx_open) and teardown. */
int fx_setup1(void **state);
int fx_setup2(void **state);
int fx_setup3(void **state);
/* Branches "w0", "w1", "w2" (writable) over "base" (read-only), create=tdp; opened. */
int fx_setup_rw3(void **state);
extern const enum union_role fx_rw3_roles[FX_MAXB];
int fx_teardown(void **state);

/* A manual clock for the resolve cache: fx_clock_advance lets time pass at once. */
int64_t fx_clock_now(void);
void fx_clock_advance(int64_t ms);

/* ---- on disk, by hand ---- */
void fx_path(struct fx *f, char *out, const char *dir, const char *rel);
const char *P(struct fx *f, int b, const char *rel); /* one of the last 4 returned is kept */
void put_file(const char *dir, const char *rel, const char *data, mode_t mode);
void put_dir(const char *dir, const char *rel, mode_t mode);
void get_file(const char *dir, const char *rel, char *buf, size_t size);

/* ---- through the union ---- */
uint64_t lk(struct fx *f, uint64_t dir, const char *name);
/* The ino of a slash-separated path from the root; 0 when it is not there. */
uint64_t walk(struct fx *f, const char *path);
uint64_t W(struct fx *f, const char *path); /* walk, and it must be there */
void gone(struct fx *f, const char *path);
uint64_t mk_file(struct fx *f, uint64_t dir, const char *name);
uint64_t mk_dir(struct fx *f, uint64_t dir, const char *name);
void wr(struct fx *f, uint64_t ino, uint64_t off, const char *data);
void rd(struct fx *f, uint64_t ino, char *buf, uint32_t size); /* the whole file */

#endif
