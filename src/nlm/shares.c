/*
 * DOS share reservations (NLM SHARE and UNSHARE): an open of a file saying what it does
 * (access: read, write) and what it forbids others (mode: deny read, deny write). Two
 * reservations of different owners on one object conflict when one's access is what the
 * other denies. An owner is (host key, oh); its new reservation on an object replaces its
 * old one. A fixed array, bounded: past it, DENIED_NOLOCKS. Callers hold s_mu.
 */
#include <string.h>

#include "nlm_internal.h"

static bool share_same_owner(const struct nlm_share *h, const char *key, const nlm4_share *sh)
{
	return strcmp(h->sh_key, key) == 0 && h->sh_ohlen == sh->oh.nlm4_netobj_len &&
	       memcmp(h->sh_oh, sh->oh.nlm4_netobj_val, h->sh_ohlen) == 0;
}

static bool share_on(const struct nlm_share *h, const struct locks_object *o)
{
	return h->sh_object.lo_export == o->lo_export && h->sh_object.lo_fileid == o->lo_fileid;
}

nlm4_stats nlm_share_add(struct nlm_service *s, const struct locks_object *o, const char *key,
			 const nlm4_share *sh)
{
	struct nlm_share *mine = NULL;

	if (sh->oh.nlm4_netobj_len > MAXNETOBJ_SZ || (uint32_t)sh->mode > fsm_DRW ||
	    (uint32_t)sh->access > fsa_RW)
		return NLM4_FAILED;
	for (unsigned i = 0; i < s->s_nshares; i++) {
		struct nlm_share *h = &s->s_shares[i];

		if (!share_on(h, o))
			continue;
		if (share_same_owner(h, key, sh)) {
			mine = h;
			continue;
		}
		if ((sh->access & h->sh_mode) || (sh->mode & h->sh_access))
			return NLM4_DENIED;
	}
	if (mine == NULL) {
		if (s->s_nshares >= s->s_shares_max)
			return NLM4_DENIED_NOLOCKS;
		mine = &s->s_shares[s->s_nshares++];
		mine->sh_object = *o;
		strncpy(mine->sh_key, key, sizeof(mine->sh_key) - 1);
		mine->sh_key[sizeof(mine->sh_key) - 1] = '\0';
		mine->sh_ohlen = sh->oh.nlm4_netobj_len;
		memcpy(mine->sh_oh, sh->oh.nlm4_netobj_val, mine->sh_ohlen);
	}
	mine->sh_mode = sh->mode;
	mine->sh_access = sh->access;
	return NLM4_GRANTED;
}

static void share_drop(struct nlm_service *s, unsigned i)
{
	s->s_shares[i] = s->s_shares[--s->s_nshares];
}

void nlm_share_remove(struct nlm_service *s, const struct locks_object *o, const char *key,
		      const nlm4_share *sh)
{
	for (unsigned i = 0; i < s->s_nshares; i++) {
		if (share_on(&s->s_shares[i], o) && share_same_owner(&s->s_shares[i], key, sh)) {
			share_drop(s, i);
			return;
		}
	}
}

void nlm_shares_drop_host(struct nlm_service *s, const char *key)
{
	for (unsigned i = 0; i < s->s_nshares;) {
		if (strcmp(s->s_shares[i].sh_key, key) == 0)
			share_drop(s, i);
		else
			i++;
	}
}

bool nlm_shares_held(const struct nlm_service *s, const char *key)
{
	for (unsigned i = 0; i < s->s_nshares; i++)
		if (strcmp(s->s_shares[i].sh_key, key) == 0)
			return true;
	return false;
}
