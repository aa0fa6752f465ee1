/*
 * NFS file handles: 24 bytes, never a boot time, so they survive restarts and fit the
 * 32 bytes netboot loaders keep.
 *   version(1) flags(1) export id(2) union ino(8) generation(4) MAC(8)
 * The MAC is SipHash-2-4 (libsodium crypto_shorthash) over the first 16 bytes, keyed by
 * the secret in the state directory: an altered or forged handle fails to decode.
 */
#ifndef UNFS_FH_H
#define UNFS_FH_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define FH_LEN 24
#define FH_VERSION 1

struct fh {
	uint16_t fh_export;
	uint64_t fh_ino;
	uint32_t fh_gen;
};

void fh_encode(const struct fh *fh, const uint8_t key[STORE_KEY_LEN], uint8_t out[FH_LEN]);

/* Returns 0, or -1 when the bytes are not a handle of ours (wrong length, version or MAC). */
int fh_decode(const uint8_t *data, size_t len, const uint8_t key[STORE_KEY_LEN], struct fh *fh);

#endif
