/*
 * Reading a netboot trace (tests/bench/boot/README) for loadgen's boot workload: every call
 * line into a table, every path into a node of one tree, so a replaying client keeps one
 * handle per node.
 */
#include "loadgen_trace.h"
#include "loadgen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct lg_trace_proc lg_trace_procs[LT_NPROCS] = {
	[LT_GETATTR] = { "GETATTR", 0 },   [LT_SETATTR] = { "SETATTR", 1 },
	[LT_LOOKUP] = { "LOOKUP", 0 },     [LT_ACCESS] = { "ACCESS", 0 },
	[LT_READLINK] = { "READLINK", 0 }, [LT_READ] = { "READ", 0 },
	[LT_WRITE] = { "WRITE", 1 },       [LT_CREATE] = { "CREATE", 1 },
	[LT_MKDIR] = { "MKDIR", 1 },       [LT_SYMLINK] = { "SYMLINK", 1 },
	[LT_REMOVE] = { "REMOVE", 1 },     [LT_RMDIR] = { "RMDIR", 1 },
	[LT_RENAME] = { "RENAME", 1 },     [LT_READDIR] = { "READDIR", 0 },
	[LT_READDIRPLUS] = { "READDIRPLUS", 0 }, [LT_FSSTAT] = { "FSSTAT", 0 },
	[LT_FSINFO] = { "FSINFO", 0 },     [LT_PATHCONF] = { "PATHCONF", 0 },
	[LT_COMMIT] = { "COMMIT", 1 },
};

static uint64_t lg_trace_hash(uint32_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

static int lg_trace_index_grow(struct lg_trace *t)
{
	uint32_t size = t->t_index_size ? t->t_index_size * 2 : 4096, i;
	uint32_t *idx = malloc(size * sizeof(*idx));

	if (!idx)
		return -1;
	memset(idx, 0xff, size * sizeof(*idx));
	for (i = 1; i < t->t_nnodes; i++) {
		uint64_t h = lg_trace_hash(t->t_nodes[i].n_parent, t->t_nodes[i].n_name);
		uint32_t at = (uint32_t)h & (size - 1);

		while (idx[at] != UINT32_MAX)
			at = (at + 1) & (size - 1);
		idx[at] = i;
	}
	free(t->t_index);
	t->t_index = idx;
	t->t_index_size = size;
	return 0;
}

/* The node of one component under parent, made if new; UINT32_MAX when out of memory. */
static uint32_t lg_trace_child(struct lg_trace *t, uint32_t parent, const char *name)
{
	uint32_t at;

	if (!strcmp(name, "."))
		return parent;
	if (!strcmp(name, ".."))
		return t->t_nodes[parent].n_parent;
	if ((t->t_nnodes + 1) * 2 > t->t_index_size && lg_trace_index_grow(t))
		return UINT32_MAX;
	at = (uint32_t)lg_trace_hash(parent, name) & (t->t_index_size - 1);
	while (t->t_index[at] != UINT32_MAX) {
		struct lg_trace_node *n = &t->t_nodes[t->t_index[at]];

		if (n->n_parent == parent && !strcmp(n->n_name, name))
			return t->t_index[at];
		at = (at + 1) & (t->t_index_size - 1);
	}
	if (t->t_nnodes == t->t_cap_nodes) {
		uint32_t cap = t->t_cap_nodes * 2;
		struct lg_trace_node *nn = realloc(t->t_nodes, cap * sizeof(*nn));

		if (!nn)
			return UINT32_MAX;
		t->t_nodes = nn;
		t->t_cap_nodes = cap;
	}
	t->t_nodes[t->t_nnodes].n_parent = parent;
	if (!(t->t_nodes[t->t_nnodes].n_name = strdup(name)))
		return UINT32_MAX;
	t->t_index[at] = t->t_nnodes;
	return t->t_nnodes++;
}

/* Undoes the trace's percent-encoding in place. */
static void lg_trace_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		unsigned v;

		if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1) {
			*w++ = (char)v;
			s += 2;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

/* The node of an encoded absolute path ("/" is the root, under --path). */
static uint32_t lg_trace_path(struct lg_trace *t, char *path)
{
	uint32_t node = 0;
	char *save = NULL, *comp;

	lg_trace_unescape(path);
	if (path[0] != '/')
		return UINT32_MAX;
	for (comp = strtok_r(path, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		node = lg_trace_child(t, node, comp);
		if (node == UINT32_MAX)
			return UINT32_MAX;
	}
	return node;
}

static uint32_t lg_trace_num(const char *s)
{
	return !s || !strcmp(s, "-") ? LT_NO_VALUE : (uint32_t)strtoul(s, NULL, 10);
}

static uint32_t lg_trace_mode(const char *s)
{
	return !s || !strcmp(s, "-") ? LT_NO_VALUE : (uint32_t)strtoul(s, NULL, 8);
}

/* One "c GAP PROC PATH ARGS..." line into the call table. */
static int lg_trace_parse_call(struct lg_trace *t, char *line, unsigned lineno, const char *file)
{
	char *f[8] = { 0 }, *save = NULL;
	struct lg_trace_call k;
	int n = 0, p;

	for (char *t = strtok_r(line, " \n", &save); t && n < 8; t = strtok_r(NULL, " \n", &save))
		f[n++] = t;
	if (n < 4)
		goto bad;
	for (p = 0; p < LT_NPROCS; p++)
		if (!strcmp(f[2], lg_trace_procs[p].name))
			break;
	if (p == LT_NPROCS) {
		fprintf(stderr, "loadgen: %s line %u: procedure %s is not replayed; record the trace "
			"again with tests/bench/boot/record-trace\n", file, lineno, f[2]);
		return -1;
	}
	memset(&k, 0, sizeof(k));
	k.k_proc = (uint8_t)p;
	k.k_gap_us = (uint32_t)strtoul(f[1], NULL, 10);
	k.k_node = lg_trace_path(t, f[3]);
	k.k_node2 = LT_NO_VALUE;
	if (k.k_node == UINT32_MAX)
		goto bad;
	switch (p) {
	case LT_LOOKUP: k.k_arg = lg_trace_num(f[4]); break;
	case LT_ACCESS: k.k_arg = lg_trace_num(f[4]); break;
	case LT_READ:
	case LT_COMMIT:
	case LT_WRITE:
		if (!f[5])
			goto bad;
		k.k_off = strtoull(f[4], NULL, 10);
		k.k_count = lg_trace_num(f[5]);
		k.k_arg = p == LT_WRITE ? lg_trace_num(f[6]) : 0;
		if (k.k_count > LG_MIB)
			goto bad;
		break;
	case LT_SETATTR:
		k.k_arg = lg_trace_mode(f[4]);
		k.k_off = f[5] && strcmp(f[5], "-") ? strtoull(f[5], NULL, 10) : UINT64_MAX;
		break;
	case LT_CREATE:
	case LT_MKDIR: k.k_arg = lg_trace_mode(f[4]); break;
	case LT_SYMLINK:
		if (!f[4])
			goto bad;
		lg_trace_unescape(f[4]);
		if (!(k.k_text = strdup(f[4])))
			return -1;
		break;
	case LT_RENAME:
		if (!f[4] || (k.k_node2 = lg_trace_path(t, f[4])) == UINT32_MAX)
			goto bad;
		break;
	case LT_READDIR: k.k_count = lg_trace_num(f[4]); break;
	case LT_READDIRPLUS:
		k.k_count = lg_trace_num(f[4]);
		k.k_arg = lg_trace_num(f[5]);
		break;
	default: break;
	}
	if (k.k_node == 0 && (p == LT_LOOKUP || p == LT_CREATE || p == LT_MKDIR ||
			      p == LT_SYMLINK || p == LT_REMOVE || p == LT_RMDIR || p == LT_RENAME))
		goto bad; /* names the root as an entry of a directory */
	if (t->t_ncalls == t->t_cap_calls) {
		uint32_t cap = t->t_cap_calls ? t->t_cap_calls * 2 : 4096;
		struct lg_trace_call *nc = realloc(t->t_calls, cap * sizeof(*nc));

		if (!nc)
			return -1;
		t->t_calls = nc;
		t->t_cap_calls = cap;
	}
	t->t_calls[t->t_ncalls++] = k;
	return 0;
bad:
	fprintf(stderr, "loadgen: %s line %u is no call line the boot workload knows "
		"(c GAP PROC /PATH ARGS...); see tests/bench/boot/README\n", file, lineno);
	return -1;
}

int lg_trace_load(struct lg_trace *t, const char *file)
{
	FILE *f = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "loadgen: cannot open --trace %s: %s\n", file, strerror(errno));
		return -1;
	}
	t->t_cap_nodes = 4096;
	t->t_nodes = calloc(t->t_cap_nodes, sizeof(*t->t_nodes));
	if (!t->t_nodes || !(t->t_nodes[0].n_name = strdup("")) || lg_trace_index_grow(t)) {
		fclose(f);
		return -1;
	}
	t->t_nnodes = 1;
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		/* the tree lines (d, f, l) are for tests/bench/boot/make-tree */
		if (line[0] == 'c' && line[1] == ' ' && (rc = lg_trace_parse_call(t, line, lineno, file)))
			break;
	}
	free(line);
	fclose(f);
	if (!rc && !t->t_ncalls) {
		fprintf(stderr, "loadgen: --trace %s holds no call line (c ...)\n", file);
		rc = -1;
	}
	return rc;
}

void lg_trace_free(struct lg_trace *t)
{
	uint32_t i;

	for (i = 0; i < t->t_nnodes; i++)
		free(t->t_nodes[i].n_name);
	for (i = 0; i < t->t_ncalls; i++)
		free(t->t_calls[i].k_text);
	free(t->t_nodes);
	free(t->t_calls);
	free(t->t_index);
	memset(t, 0, sizeof(*t));
}
