/*
 * The control socket's commands for rolling out a new base (ctl_internal.h): which of a
 * client's own files hide a base file that changed, and dropping them. Jobs: they read the
 * client's upper, so they run on the job thread.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_internal.h"
#include "fsio.h"
#include "log.h"
#include "nfs.h"
#include "store.h"
#include "union.h"
#include "views.h"

#define CTL_ROLLOUT_WORDS 64     /* take-base: CLIENT and up to this many paths, less two */

/* The words of line, in place; returns how many (at most max). */
static int ctl_words(char *line, char **w, int max)
{
	char *save = NULL;
	int n = 0;

	for (char *t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save))
		w[n++] = t;
	return n;
}

/* s as a JSON string's contents: paths are the clients' to choose. */
static void ctl_json_str(struct ctl_out *o, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			ctl_put(o, "\\%c", c);
		else if (c < 0x20)
			ctl_put(o, "\\u%04x", c);
		else
			ctl_put(o, "%c", c);
	}
}

struct ctl_conflicts {
	struct ctl_out *cc_out;
	bool cc_json;
	unsigned cc_n;
};

static const char *const ctl_kind_words[] = {
	[UNION_UPPER_COPY] = "its own copy hides the base's",
	[UNION_UPPER_WHITEOUT] = "it deleted it",
	[UNION_UPPER_METACOPY] = "it changed its attributes only: the data is the new base's",
	[UNION_UPPER_OPAQUE] = "its own directory hides the base's",
	[UNION_UPPER_REDIRECT_MISSING] = "it renamed it, and the new base has no such thing to rename",
};

static int ctl_conflict_line(const char *export, const struct union_conflict *c, void *arg)
{
	struct ctl_conflicts *cc = arg;
	struct ctl_out *o = cc->cc_out;

	if (cc->cc_json) {
		ctl_put(o, "%s{\"export\":\"", cc->cc_n ? "," : "");
		ctl_json_str(o, export);
		ctl_put(o, "\",\"path\":\"");
		ctl_json_str(o, c->uc_path);
		ctl_put(o, "\",\"upper\":\"%s\",\"base\":\"%s\"}", union_upper_kind_name(c->uc_kind),
			union_base_change_name(c->uc_change));
	} else {
		ctl_put(o, "%s %s: %s in the base; %s (%s)\n", export, c->uc_path,
			union_base_change_name(c->uc_change), ctl_kind_words[c->uc_kind],
			union_upper_kind_name(c->uc_kind));
	}
	cc->cc_n++;
	return o->co_err;
}

void ctl_conflicts(struct control *ctl, struct ctl_out *o, const char *line)
{
	char copy[CONTROL_MAX_REQUEST + 1], *w[4], msg[1024];
	struct ctl_conflicts cc = { .cc_out = o };
	int n, r, moved;

	snprintf(copy, sizeof(copy), "%s", line);
	n = ctl_words(copy, w, 4);
	if (n < 2 || n > 3 || (n == 3 && strcmp(w[2], "--json"))) {
		ctl_put(o, "error: usage: conflicts CLIENT [--json] (CLIENT as `clients` shows it)\n");
		return;
	}
	cc.cc_json = n == 3;
	if (cc.cc_json) {
		ctl_put(o, "{\"client\":\"");
		ctl_json_str(o, w[1]);
		ctl_put(o, "\",\"conflicts\":[");
	}
	r = views_conflicts(ctl->ct_env.ce_views, w[1], ctl_conflict_line, &cc, &moved, msg,
			    sizeof(msg));
	if (r < 0) {
		/* a half-written JSON document is no use to a script: the error alone */
		o->co_len = 0;
		if (o->co_buf)
			o->co_buf[0] = '\0';
		ctl_put(o, "error: conflicts: %s\n", msg);
		return;
	}
	if (cc.cc_json)
		ctl_put(o, "],\"exports_compared\":%d}\n", moved);
	else if (moved == 0)
		ctl_put(o, "client %s has been on one base only: nothing to compare\n", w[1]);
	else
		ctl_put(o, "%u conflict%s (client %s; %d export%s compared; `take-base %s PATH` "
			"drops the client's copy)\n", cc.cc_n, cc.cc_n == 1 ? "" : "s", w[1], moved,
			moved == 1 ? "" : "s", w[1]);
}

void ctl_take_base(struct control *ctl, struct ctl_out *o, const char *line)
{
	char copy[CONTROL_MAX_REQUEST + 1], *w[CTL_ROLLOUT_WORDS], msg[1024];
	struct ctl_out lines = { 0 };
	int n, failed = 0;

	snprintf(copy, sizeof(copy), "%s", line);
	n = ctl_words(copy, w, CTL_ROLLOUT_WORDS);
	if (n < 3 || n == CTL_ROLLOUT_WORDS) {
		ctl_put(o, "error: usage: take-base CLIENT PATH... (at most %d paths; PATH from the "
			"export's root, e.g. /etc/motd)\n", CTL_ROLLOUT_WORDS - 3);
		return;
	}
	for (int k = 2; k < n; k++) {
		int r = views_take_base(ctl->ct_env.ce_views, w[1], w[k], msg, sizeof(msg));

		if (r < 0)
			failed++;
		ctl_put(&lines, "%s%s\n", r < 0 ? "  failed: " : "", msg);
	}
	/* unionnfsd-ctl exits non-zero on a reply that begins with "error: " */
	if (failed)
		ctl_put(o, "error: take-base: %d of %d path%s failed:\n", failed, n - 2,
			n - 2 == 1 ? "" : "s");
	ctl_put(o, "%s", lines.co_buf ? lines.co_buf : "");
	if (lines.co_err)
		o->co_err = lines.co_err;
	free(lines.co_buf);
}

/* The served export named name, or -1. */
static int ctl_export_index(struct control *ctl, const char *name)
{
	struct nfs_server *ns = ctl->ct_env.ce_nfs;

	for (int i = 0; i < nfs_export_count(ns); i++)
		if (nfs_export_union(ns, i) && !strcmp(ctl->ct_env.ce_cfg->cf_exports[i].ec_name, name))
			return i;
	return -1;
}

/*
 * Each of dirs must be an existing directory named by an absolute path: their canonical
 * paths, '\n'-joined, in *out (malloc()ed). 0, or -errno with an error line in o.
 */
static int ctl_base_dirs(struct ctl_out *o, char **dirs, int n, char **out)
{
	struct ctl_out joined = { 0 };
	char canon[PATH_MAX];

	*out = NULL;
	for (int k = 0; k < n; k++) {
		int fd, r = dirs[k][0] == '/' ? fsio_open_root(dirs[k], canon, sizeof(canon), &fd) :
						-EINVAL;

		if (r < 0) {
			ctl_put(o, "error: base: branch %s: %s; give existing directories by absolute "
				"paths\n", dirs[k], r == -EINVAL ? "not an absolute path" : strerror(-r));
			free(joined.co_buf);
			return r;
		}
		fsio_close(fd);
		ctl_put(&joined, "%s%s", k ? "\n" : "", canon);
	}
	if (joined.co_err) {
		free(joined.co_buf);
		return -ENOMEM;
	}
	*out = joined.co_buf;
	return 0;
}

/* For a reply: text's '\n' as ':', in place. */
static char *ctl_colons(char *text)
{
	for (char *p = text; p && *p; p++)
		if (*p == '\n')
			*p = ':';
	return text;
}

void ctl_base(struct control *ctl, struct ctl_out *o, const char *line)
{
	char copy[CONTROL_MAX_REQUEST + 1], *w[CTL_ROLLOUT_WORDS], *now = NULL, *set = NULL;
	char *was_set = NULL, *was_config = NULL;
	struct store *st;
	int n, i, r;

	snprintf(copy, sizeof(copy), "%s", line);
	n = ctl_words(copy, w, CTL_ROLLOUT_WORDS);
	if (n < 2 || n == 3 || (n > 3 && strcmp(w[2], "set")) || n == CTL_ROLLOUT_WORDS) {
		ctl_put(o, "error: usage: base EXPORT [set DIR...] (the export's read-only branches, "
			"top first)\n");
		return;
	}
	i = ctl_export_index(ctl, w[1]);
	if (i < 0) {
		ctl_put(o, "error: base: no export %s is served (see `status`)\n", w[1]);
		return;
	}
	st = union_store(nfs_export_union(ctl->ct_env.ce_nfs, i));
	now = nfs_export_base_text(ctl->ct_env.ce_nfs, i);
	r = store_base_get(st, w[1], &was_set, &was_config);
	if (!now || (r < 0 && r != -ENOENT)) {
		ctl_put(o, "error: base: cannot read the base of %s: %s\n", w[1],
			now ? strerror(-r) : "out of memory");
		goto out;
	}
	if (n == 2) {
		ctl_put(o, "export %s: base %s", w[1], ctl_colons(now));
		if (was_set)
			ctl_put(o, " (set by `base %s set`; the configuration has %s)\n", w[1],
				ctl_colons(was_config));
		else
			ctl_put(o, " (from the configuration)\n");
		goto out;
	}
	if (ctl_base_dirs(o, w + 3, n - 3, &set) < 0)
		goto out;
	/* the configuration's base of the time: what a later edit of it is told apart from */
	r = store_base_set(st, w[1], set, was_config ? was_config : now);
	if (r < 0) {
		ctl_put(o, "error: base: cannot record the new base of %s in the inode map: %s; free "
			"space in the state directory\n", w[1], strerror(-r));
		goto out;
	}
	ctl->ct_job_reload = true;
	log_info("control socket: export %s gets the base %s", w[1], ctl_colons(set));
	ctl_put(o, "export %s: base set to %s; it is applied as a reload does (see the log): "
		"clients of an export with upper= move to it at their next mount\n", w[1], set);
out:
	free(now);
	free(set);
	free(was_set);
	free(was_config);
}
