/*
 * Making "mount -t nfs server:/union /mnt" work without port options: register NFS and
 * MOUNT with the system rpcbind, or answer portmapper queries ourselves (program 100000:
 * v2 NULL/GETPORT/DUMP, v3/v4 NULL/GETADDR) when no rpcbind runs.
 */
#ifndef UNFS_PORTMAP_H
#define UNFS_PORTMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc.h"

struct portmap_mapping {
	uint32_t pm_prog;
	uint32_t pm_vers;
	uint32_t pm_prot;        /* IPPROTO_TCP / IPPROTO_UDP */
	uint32_t pm_port;
};

/* True when a system rpcbind answers on 127.0.0.1:111. */
bool portmap_rpcbind_running(void);

/*
 * The port the system rpcbind lists for prog/vers/prot (IPPROTO_*), 0 when none; only when
 * portmap_rpcbind_running() (it may wait for rpcbind's answer).
 */
uint16_t portmap_rpcbind_port(uint32_t prog, uint32_t vers, uint32_t prot);

/* Registers (and on exit unregisters) our mappings with the system rpcbind. */
int portmap_register(const struct portmap_mapping *maps, int n);
void portmap_unregister(const struct portmap_mapping *maps, int n);

/* The built-in portmapper: its answers come from this table (set before serving). */
void portmap_builtin_set(const struct portmap_mapping *maps, int n);
/*
 * Whether the built-in portmapper answers DUMP over UDP (default yes). Without --udp the
 * server still answers lookups over UDP when it serves locking (a rebooted client's
 * sm-notify asks over UDP only), but not DUMP: its reply is many times its call.
 */
void portmap_builtin_dump_udp(bool answer);
extern const struct rpc_program portmap_program;

#endif
