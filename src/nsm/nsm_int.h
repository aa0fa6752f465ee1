/* Shared between the files of src/nsm: the struct nsm, the lists and their files. */
#ifndef UNFS_NSM_INT_H
#define UNFS_NSM_INT_H

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nsm.h"

#define NSM_DIR "nsm"
#define NSM_STATE_FILE "state"
#define NSM_CLIENTS_FILE "clients"
#define NSM_PREVIOUS_FILE "clients.previous"
#define NSM_TMP_SUFFIX ".tmp"
/*
 * The clients file drops the lines of clients that hold nothing once this many are idle (or
 * the list is full), when the next new client comes: not at each unlock, which would cost an
 * fsync a lock (nsm_unmonitor).
 */
#define NSM_COMPACT_IDLE 64
/* clients.previous is rewritten after this many answers (see previous_settle). */
#define NSM_PREVIOUS_BATCH 64
/* The first line of a clients file: what it is, and the version of its format. */
#define NSM_CLIENTS_HEADER "unionnfsd-nsm-clients 1\n"
/* A line: address, space, '=' and the escaped name (3 bytes a byte), space, address, \n. */
#define NSM_LINE_MAX (2 * INET6_ADDRSTRLEN + 3 * NSM_MAX_NAME + 4)
#define NSM_FILE_MAX (sizeof(NSM_CLIENTS_HEADER) + (size_t)NSM_MAX_CLIENTS * NSM_LINE_MAX)

struct nsm_client {
	char nc_addr[INET6_ADDRSTRLEN];   /* the client, numeric (IPv4-mapped as IPv4) */
	char nc_local[INET6_ADDRSTRLEN];  /* our address it reached: what its statd monitors */
	char *nc_name;                    /* its caller name (malloc) */
	bool nc_sending;                  /* previous list: an SM_NOTIFY is under way */
	bool nc_idle;                     /* this run's list: it holds nothing now */
};

struct nsm_list {
	struct nsm_client *nl_v;
	unsigned nl_n;
};

typedef void (*nsm_reboot_fn)(void *arg, const char *mon_name, const struct sockaddr *from,
			      socklen_t fromlen);

struct nsm {
	int sm_dirfd;                     /* STATE_DIR/nsm, O_PATH */
	char sm_path[PATH_MAX];           /* STATE_DIR/nsm, for messages */
	uint32_t sm_state;
	struct rpc_client *sm_rc;
	unsigned sm_fast_ms;              /* SM_NOTIFY's fast retry interval (tests shorten it) */

	pthread_mutex_t sm_cur_lock;      /* this run's clients and their file */
	struct nsm_list sm_cur;
	int sm_cur_fd;                    /* the clients file, -1 until the first client */
	uint64_t sm_cur_off;              /* where the next line goes */
	unsigned sm_cur_idle;             /* entries of sm_cur that hold nothing (nc_idle) */
	bool sm_full_logged;

	pthread_mutex_t sm_prev_lock;     /* the previous runs' clients, the calls, the end */
	struct nsm_list sm_prev;
	unsigned sm_inflight;             /* SM_NOTIFY calls not finished */
	unsigned sm_fast;                 /* of those, in the fast part of the schedule */
	unsigned sm_prev_unsaved;         /* told, still in clients.previous on disk */
	bool sm_closed;                   /* nsm_close ran: the last call's end frees */
	nsm_reboot_fn sm_hook;
	void *sm_hook_arg;

	atomic_bool sm_mon_logged;        /* SM_MON and friends refused: said once */
	atomic_bool sm_crash_logged;
};

/* store.c: the files of STATE_DIR/nsm. */
int nsm_list_add(struct nsm_list *l, const char *addr, const char *local, const char *name);
int nsm_list_find(const struct nsm_list *l, const char *addr, const char *local);
void nsm_list_remove(struct nsm_list *l, unsigned i);
void nsm_list_free(struct nsm_list *l);
/* One line of a clients file for c, NUL-terminated, into buf (NSM_LINE_MAX + 1). */
size_t nsm_format_line(const struct nsm_client *c, char *buf);
/*
 * Reads clients file name into l (appending, skipping entries listed): 0, -ENOENT when
 * missing, -EBADMSG (logged, with the path and the fix) when it cannot be read as one, or
 * -errno.
 */
int nsm_read_clients(struct nsm *n, const char *name, struct nsm_list *l);
/* Replaces file name with the lines of l atomically; removes it when l is empty. */
int nsm_write_clients(struct nsm *n, const char *name, const struct nsm_list *l);
/* Writes buf as file name atomically: temporary file, fsync, rename, directory fsync. */
int nsm_write_atomic(struct nsm *n, const char *name, const void *buf, size_t len);
/* Reads the state number: 0, -ENOENT, -EBADMSG (logged). */
int nsm_read_state(struct nsm *n, uint32_t *state);

#endif
