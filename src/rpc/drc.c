/*
 * Duplicate request cache (see drc.h). A table of buckets of DRC_WAYS entries; the key
 * hash picks the bucket, and the bucket's own mutex guards its entries, so two calls
 * contend only when they land in the same bucket. Stored replies are copied into a
 * buffer the entry keeps for its next tenant, so a warm cache does not allocate.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "drc.h"
#include "log.h"

#define DRC_WAYS 8

struct drc_entry {
	struct drc_key de_key;
	uint64_t de_seq;           /* 0: empty */
	uint32_t de_time;          /* when the call began (running) or was answered */
	bool de_busy;              /* the original is still running */
	uint32_t de_len;           /* reply bytes in de_reply */
	uint32_t de_cap;
	uint8_t *de_reply;
};

struct drc_bucket {
	pthread_mutex_t db_lock;
	uint64_t db_seq;           /* last de_seq handed out here */
	struct drc_entry db_ent[DRC_WAYS];
};

struct drc {
	struct drc_bucket *d_buckets;
	uint32_t d_mask;           /* buckets - 1 (a power of two) */
	uint32_t d_ttl;
	uint64_t d_seed;           /* so a client cannot aim its xids at one bucket */
	uint32_t (*d_now)(void);
};

static uint32_t drc_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)ts.tv_sec;
}

struct drc *drc_new(unsigned entries, unsigned ttl)
{
	struct drc *d;
	uint32_t n = 1;

	if (entries == 0)
		return NULL;
	while (n * DRC_WAYS < entries && n < (1u << 24))
		n <<= 1;
	d = calloc(1, sizeof(*d));
	if (d == NULL || (d->d_buckets = calloc(n, sizeof(*d->d_buckets))) == NULL)
		abort();
	for (uint32_t i = 0; i < n; i++)
		pthread_mutex_init(&d->d_buckets[i].db_lock, NULL);
	d->d_mask = n - 1;
	d->d_ttl = ttl;
	d->d_now = drc_clock;
	if (getrandom(&d->d_seed, sizeof(d->d_seed), GRND_NONBLOCK) != sizeof(d->d_seed))
		d->d_seed = (uint64_t)(uintptr_t)d ^ ((uint64_t)drc_clock() << 32);
	return d;
}

void drc_free(struct drc *d)
{
	if (d == NULL)
		return;
	for (uint32_t i = 0; i <= d->d_mask; i++) {
		struct drc_bucket *b = &d->d_buckets[i];

		for (int w = 0; w < DRC_WAYS; w++)
			free(b->db_ent[w].de_reply);
		pthread_mutex_destroy(&b->db_lock);
	}
	free(d->d_buckets);
	free(d);
}

void drc_set_clock(struct drc *d, uint32_t (*now)(void))
{
	d->d_now = now != NULL ? now : drc_clock;
}

unsigned drc_count(struct drc *d)
{
	unsigned n = 0;

	if (d == NULL)
		return 0;
	for (uint32_t i = 0; i <= d->d_mask; i++) {
		struct drc_bucket *b = &d->d_buckets[i];

		pthread_mutex_lock(&b->db_lock);
		for (int w = 0; w < DRC_WAYS; w++)
			n += b->db_ent[w].de_seq != 0;
		pthread_mutex_unlock(&b->db_lock);
	}
	return n;
}

/* FNV-1a: cheap, and only has to separate two different calls that share an xid. */
static uint32_t drc_sum(const void *args, size_t len)
{
	const uint8_t *p = args;
	uint32_t h = 2166136261u;

	if (len > DRC_SUM_BYTES)
		len = DRC_SUM_BYTES;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

void drc_key_make(struct drc_key *k, const struct sockaddr *peer, socklen_t peerlen,
		  int protocol, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		  const void *args, size_t arglen)
{
	memset(k, 0, sizeof(*k));
	if (peer != NULL && peer->sa_family == AF_INET && peerlen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)peer;

		memcpy(k->dk_addr, &s->sin_addr, 4);
		k->dk_port = s->sin_port;
		k->dk_family = AF_INET;
	} else if (peer != NULL && peer->sa_family == AF_INET6 &&
		   peerlen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)peer;

		memcpy(k->dk_addr, &s->sin6_addr, 16);
		k->dk_port = s->sin6_port;
		k->dk_family = AF_INET6;
	}
	if (protocol == IPPROTO_TCP)
		k->dk_port = 0;
	k->dk_protocol = (uint8_t)protocol;
	k->dk_xid = xid;
	k->dk_prog = prog;
	k->dk_vers = vers;
	k->dk_proc = proc;
	k->dk_sum = drc_sum(args, arglen);
	k->dk_arglen = (uint32_t)(arglen > UINT32_MAX ? UINT32_MAX : arglen);
}

/* FNV-1a over who the caller claims to be, as drc_sum over what it asks. */
static uint32_t drc_cred_sum(const struct rpc_cred *rc)
{
	uint32_t words[4 + RPC_MAX_GROUPS];
	uint32_t n = rc->rc_ngroups < RPC_MAX_GROUPS ? rc->rc_ngroups : RPC_MAX_GROUPS;
	const uint8_t *p = (const uint8_t *)words;
	uint32_t h = 2166136261u;

	words[0] = rc->rc_flavor;
	words[1] = rc->rc_uid;
	words[2] = rc->rc_gid;
	words[3] = n;
	memcpy(words + 4, rc->rc_groups, n * sizeof(words[0]));
	for (size_t i = 0; i < (4 + n) * sizeof(words[0]); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static uint64_t drc_mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static uint32_t drc_hash(const struct drc *d, const struct drc_key *k)
{
	uint64_t a, b, h = d->d_seed;

	memcpy(&a, k->dk_addr, 8);
	memcpy(&b, k->dk_addr + 8, 8);
	h = drc_mix(h, a);
	h = drc_mix(h, b);
	h = drc_mix(h, ((uint64_t)k->dk_xid << 32) | k->dk_proc);
	h = drc_mix(h, ((uint64_t)k->dk_port << 32) | k->dk_sum);
	h = drc_mix(h, ((uint64_t)k->dk_prog << 32) | k->dk_vers);
	return (uint32_t)(h >> 32) & d->d_mask;
}

static bool drc_expired(const struct drc *d, const struct drc_entry *e, uint32_t now)
{
	/* a running call is never expired: its finish is on its way */
	return !e->de_busy && now - e->de_time >= d->d_ttl;
}

static enum drc_verdict drc_find(struct drc *d, const struct drc_key *k, bool resumed,
				  struct drc_ticket *t, void **reply, size_t *replylen)
{
	struct drc_bucket *b;
	struct drc_entry *e, *victim = NULL;
	enum drc_verdict v = DRC_MISS;
	uint32_t bi, now;
	int w;

	memset(t, 0, sizeof(*t));
	if (d == NULL)
		return DRC_MISS;
	bi = drc_hash(d, k);
	b = &d->d_buckets[bi];
	now = d->d_now();
	pthread_mutex_lock(&b->db_lock);
	for (w = 0; w < DRC_WAYS; w++) {
		e = &b->db_ent[w];
		if (e->de_seq != 0 && drc_expired(d, e, now))
			e->de_seq = 0;
		if (e->de_seq == 0) {
			if (victim == NULL || victim->de_seq != 0)
				victim = e;
			continue;
		}
		if (memcmp(&e->de_key, k, sizeof(*k)) == 0)
			break;
		/* with no free entry, the oldest finished one is recycled */
		if (!e->de_busy && (victim == NULL || (victim->de_seq != 0 &&
				    now - e->de_time > now - victim->de_time)))
			victim = e;
	}
	if (w < DRC_WAYS) {
		e = &b->db_ent[w];
		if (e->de_busy && resumed) {
			t->dt_drc = d;
			t->dt_bucket = bi;
			t->dt_way = (uint32_t)w;
			t->dt_seq = e->de_seq;
		} else if (e->de_busy) {
			v = DRC_BUSY;
		} else {
			void *copy = malloc(e->de_len);

			if (copy != NULL) {
				memcpy(copy, e->de_reply, e->de_len);
				*reply = copy;
				*replylen = e->de_len;
				v = DRC_HIT;
			} else {
				/* no memory to answer from the cache: dropping beats running twice */
				v = DRC_BUSY;
			}
		}
	} else if (victim != NULL) {
		victim->de_key = *k;
		victim->de_seq = ++b->db_seq;
		victim->de_time = now;
		victim->de_busy = true;
		victim->de_len = 0;
		t->dt_drc = d;
		t->dt_bucket = bi;
		t->dt_way = (uint32_t)(victim - b->db_ent);
		t->dt_seq = victim->de_seq;
	}
	pthread_mutex_unlock(&b->db_lock);
	return v;
}

enum drc_verdict drc_lookup(struct drc *d, const struct drc_key *k, struct drc_ticket *t,
			    void **reply, size_t *replylen)
{
	return drc_find(d, k, false, t, reply, replylen);
}

enum drc_verdict drc_resume(struct drc *d, const struct drc_key *k, struct drc_ticket *t,
			    void **reply, size_t *replylen)
{
	return drc_find(d, k, true, t, reply, replylen);
}

void drc_store_slow(struct drc_ticket *t, const void *reply, size_t len)
{
	struct drc *d = t->dt_drc;
	struct drc_bucket *b = &d->d_buckets[t->dt_bucket];
	struct drc_entry *e = &b->db_ent[t->dt_way];

	pthread_mutex_lock(&b->db_lock);
	/* running entries are never recycled, so this holds; checked so a stray ticket is harmless */
	if (e->de_seq == t->dt_seq) {
		if (reply != NULL && len > 0 && len <= DRC_REPLY_MAX && e->de_cap < len) {
			uint8_t *buf = realloc(e->de_reply, len);

			if (buf != NULL) {
				e->de_reply = buf;
				e->de_cap = (uint32_t)len;
			}
		}
		if (reply != NULL && len > 0 && len <= e->de_cap) {
			memcpy(e->de_reply, reply, len);
			e->de_len = (uint32_t)len;
			e->de_busy = false;
			e->de_time = d->d_now();
		} else {
			e->de_seq = 0;
			e->de_busy = false;
			e->de_len = 0;
		}
	}
	pthread_mutex_unlock(&b->db_lock);
	t->dt_drc = NULL;
}

static pthread_once_t drc_once = PTHREAD_ONCE_INIT;
static struct drc *drc_global;

static void drc_global_init(void)
{
	drc_global = drc_new(DRC_DEFAULT_ENTRIES, DRC_DEFAULT_TTL);
}

enum drc_verdict drc_begin(const struct rpc_call *call, const void *rec, size_t len,
			   const struct sockaddr *peer, socklen_t peerlen, int protocol,
			   bool resumed, struct drc_ticket *t, void **reply, size_t *replylen)
{
	struct drc_key k;
	enum drc_verdict v;

	pthread_once(&drc_once, drc_global_init);
	drc_key_make(&k, peer, peerlen, protocol, call->rc_xid, call->rc_prog, call->rc_vers,
		     call->rc_proc, (const uint8_t *)rec + call->rc_args_off,
		     len - call->rc_args_off);
	k.dk_cred = drc_cred_sum(&call->rc_cred);
	v = drc_find(drc_global, &k, resumed, t, reply, replylen);
	if (v != DRC_MISS)
		log_debug("rpc: retransmitted call xid %#x procedure %u %s", call->rc_xid,
			  call->rc_proc, v == DRC_HIT ? "answered from the cache" :
			  "dropped: the original is still running");
	return v;
}
