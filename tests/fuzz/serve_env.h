/*
 * The served world of fuzz_serve, fuzz_conn, fuzz_control and the seed generator: a real
 * two-branch union over a small tree in a temporary directory, a real store, NFS + MOUNT +
 * the built-in portmapper + NLM (no callbacks) + NSM registered, and a fixed handle key so
 * stored seeds carry valid handles.
 */
#ifndef FUZZ_SERVE_ENV_H
#define FUZZ_SERVE_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "fh.h"

/* The names looked up at setup, in this order, so their handles never change. */
enum senv_obj {
	SENV_ROOT, SENV_FILE, SENV_DIR, SENV_INNER, SENV_LINK, SENV_UPFILE,
	SENV_BIG,               /* 1 MiB (sparse), for replies as large as READs get */
	SENV_NOBJ
};

#define SENV_BIG_SIZE (1u << 20)

extern const char *const senv_names[SENV_NOBJ];

/* Creates the tree and starts serving it; aborts with a message on failure. */
void senv_open(void);
/* Stops serving and removes the whole temporary directory. */
void senv_close(void);
/* Starts again from the pristine tree: same handles, no trace of earlier calls. */
void senv_reset(void);
/* The handle of one of the setup objects. */
void senv_handle(enum senv_obj o, uint8_t out[FH_LEN]);

struct config;
struct nfs_server;

/* What other servers over the same world need: its config, its NFS server, its directory. */
const struct config *senv_config(void);
struct nfs_server *senv_nfs(void);
const char *senv_dir(void);

#endif
