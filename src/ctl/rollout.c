/*
 * The control socket's commands for rolling out a new base (ctl_internal.h): which of a
 * client's own files hide a base file that changed, and dropping them. Jobs: they read the
 * client's upper, so they run on the job thread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_internal.h"
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
