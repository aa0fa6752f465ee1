/*
 * loadgen's netboot traces (tests/bench/boot/README): the file's calls, with their paths
 * interned as nodes of one tree (a node is a parent and a name; node 0 is the root), for the
 * boot workload (loadgen_boot.c) to replay.
 */
#ifndef LOADGEN_TRACE_H
#define LOADGEN_TRACE_H

#include <stdint.h>

/* The procedures a trace holds (the replay sends each as the recording did). */
enum lg_trace_procedure {
	LT_GETATTR, LT_SETATTR, LT_LOOKUP, LT_ACCESS, LT_READLINK, LT_READ, LT_WRITE, LT_CREATE,
	LT_MKDIR, LT_SYMLINK, LT_REMOVE, LT_RMDIR, LT_RENAME, LT_READDIR, LT_READDIRPLUS,
	LT_FSSTAT, LT_FSINFO, LT_PATHCONF, LT_COMMIT, LT_NPROCS
};

struct lg_trace_proc {
	const char *name;
	int changes; /* left out by --read-only */
};

/* Their names in the trace, indexed by enum lg_trace_procedure */
extern const struct lg_trace_proc lg_trace_procs[LT_NPROCS];

/* a number the call line left out ("-") */
#define LT_NO_VALUE UINT32_MAX

/* One path of the trace: its parent's index and its last component. Node 0 is the root. */
struct lg_trace_node {
	uint32_t n_parent;
	char *n_name;
};

/* One call of the trace. */
struct lg_trace_call {
	uint8_t k_proc;
	uint32_t k_gap_us;      /* since the call before it, in the recording */
	uint32_t k_node;
	uint32_t k_node2;       /* RENAME's target */
	uint64_t k_off;         /* READ, WRITE, COMMIT; SETATTR's size */
	uint32_t k_count;       /* READ, WRITE, COMMIT; READDIR(PLUS)'s dircount */
	uint32_t k_arg;         /* LOOKUP's status, ACCESS's bits, WRITE's stable, a mode; maxcount */
	char *k_text;           /* SYMLINK's target */
};

struct lg_trace {
	struct lg_trace_node *t_nodes;
	uint32_t t_nnodes, t_cap_nodes;
	struct lg_trace_call *t_calls;
	uint32_t t_ncalls, t_cap_calls;
	/* (parent, name) -> node, open addressing */
	uint32_t *t_index;
	uint32_t t_index_size;
};

/* Reads the call lines of a trace file (the tree lines are make-tree's); 0 or -1, said why. */
int lg_trace_load(struct lg_trace *t, const char *file);
void lg_trace_free(struct lg_trace *t);

#endif
