/*
 * The intent file of the inode map (private to store/): see store_intent_* in store.h.
 */
#ifndef UNFS_STORE_INTENT_H
#define UNFS_STORE_INTENT_H

#include <stddef.h>
#include <stdint.h>

struct sintent;
struct store_intent;

/*
 * Opens (creating) the file intents in the state directory dirfd, whose path dir is for
 * messages; -errno with a message naming the cause and the fix.
 */
int sintent_open(int dirfd, const char *dir, struct sintent **out, char *err, size_t errlen);
void sintent_close(struct sintent *si);
/* As store_intent_begin, store_intent_end and store_intent_recover. */
int sintent_put(struct sintent *si, const struct store_intent *in);
void sintent_drop(struct sintent *si, int slot);
int sintent_walk(struct sintent *si, uint16_t exp,
		 int (*fn)(void *arg, const struct store_intent *in), void *arg);

#endif
