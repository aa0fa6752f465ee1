/* NFS file handles: layout and MAC in include/fh.h. */
#include <sodium.h>
#include <string.h>

#include "fh.h"

#define FH_BODY_LEN 16
/* MOUNT v1 hands out fixed 32-byte handles: ours, zero-padded. */
#define FH_PADDED_LEN 32

_Static_assert(FH_BODY_LEN + crypto_shorthash_BYTES == FH_LEN, "handle layout");
_Static_assert(crypto_shorthash_KEYBYTES == STORE_KEY_LEN, "handle key size");

static void fh_put_be(uint8_t *p, uint64_t v, int n)
{
	while (n-- > 0) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t fh_get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

void fh_encode(const struct fh *fh, const uint8_t key[STORE_KEY_LEN], uint8_t out[FH_LEN])
{
	out[0] = FH_VERSION;
	out[1] = 0; /* flags: none defined yet */
	fh_put_be(out + 2, fh->fh_export, 2);
	fh_put_be(out + 4, fh->fh_ino, 8);
	fh_put_be(out + 12, fh->fh_gen, 4);
	crypto_shorthash(out + FH_BODY_LEN, out, FH_BODY_LEN, key);
}

int fh_decode(const uint8_t *data, size_t len, const uint8_t key[STORE_KEY_LEN], struct fh *fh)
{
	uint8_t mac[crypto_shorthash_BYTES];
	size_t i;

	if (data == NULL || (len != FH_LEN && len != FH_PADDED_LEN))
		return -1;
	for (i = FH_LEN; i < len; i++)
		if (data[i] != 0)
			return -1;
	if (data[0] != FH_VERSION || data[1] != 0)
		return -1;
	crypto_shorthash(mac, data, FH_BODY_LEN, key);
	if (sodium_memcmp(mac, data + FH_BODY_LEN, sizeof(mac)) != 0)
		return -1;
	fh->fh_export = (uint16_t)fh_get_be(data + 2, 2);
	fh->fh_ino = fh_get_be(data + 4, 8);
	fh->fh_gen = (uint32_t)fh_get_be(data + 12, 4);
	/* Only a forged key could produce these; refuse them anyway. */
	if (fh->fh_ino == 0 || fh->fh_export == 0)
		return -1;
	return 0;
}
