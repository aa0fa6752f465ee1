/*
 * unionnfsd: the wiring. Parses the configuration, checks the branches, daemonizes
 * (unless -f), opens the inode map and the exports, starts the listeners and the
 * portmapper side, then runs the event loop until SIGTERM or SIGINT.
 *
 * Start-up errors exit 2 with one line on stderr. As a daemon the parent waits on a pipe
 * until the child has finished starting, so "unionnfsd ... && mount ..." is race-free and
 * a failure (a locked state directory, a busy port) still reaches the terminal.
 *
 * The file system calls here are exceptions to fsio (include/README): the start-up checks
 * stat the branch and state directory paths as the administrator gave them (symbolic links
 * followed), a relative -c path is made absolute (realpath) for reloads, and daemonizing
 * points stdio at /dev/null and leaves the working directory for /.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "exports.h"
#include "exportset.h"
#include "fsio.h"
#include "log.h"
#include "net.h"
#include "nfs.h"
#include "nlm.h"
#include "nsm.h"
#include "portmap.h"
#include "rpc.h"
#include "rpc_client.h"
#include "store.h"
#include "union.h"
#include "views.h"

#define MAIN_EXIT_OK 0
#define MAIN_EXIT_START 2
#define MAIN_ERRLEN 1024
#define MAIN_REPORT_LEN 4096
#define MAIN_MAX_MAPS 16

struct main_ctx {
	struct config mc_cfg;
	struct store *mc_store;
	struct exportset *mc_exports;       /* the served exports' unions */
	struct nfs_server mc_nfs;
	struct views *mc_views;              /* per-client views (upper=) */
	bool mc_nfs_ready;
	struct ev_loop *mc_loop;
	struct net_server *mc_net;
	struct control *mc_ctl;             /* STATE_DIR/control.sock, NULL if it could not be made */
	struct {
		int lp_port;
		bool lp_udp;                /* UDP served there too */
	} mc_ports[4];                      /* bound ports, so one port is listened on once */
	int mc_nports;
	int mc_nfs_port;
	int mc_mount_port;
	int mc_nlm_port;                    /* NLM and NSM; 0: locking is off */
	struct rpc_client *mc_rc;           /* NLM callbacks and SM_NOTIFY */
	struct nsm *mc_nsm;
	struct nlm_service *mc_nlm;
	struct portmap_mapping mc_maps[MAIN_MAX_MAPS];
	int mc_nmaps;                       /* NFS and MOUNT: what rpcbind gets */
	bool mc_registered;                 /* with the system rpcbind: undo on exit */
	ev_signal mc_sigterm;
	ev_signal mc_sigint;
	ev_signal mc_sighup;
	int mc_argc;                        /* the command line, re-read on SIGHUP */
	char **mc_argv;                     /* with -c paths made absolute (we chdir to /) */
	/*
	 * A reload parses on the loop (parsing never blocks) and resolves host names on its
	 * own thread, so a slow DNS server never stalls the loop; the loop applies the result
	 * when mc_reload_done fires.
	 */
	pthread_t mc_resolve_thread;
	bool mc_reloading;                  /* the resolve thread runs or its result waits */
	bool mc_reload_again;               /* SIGHUP during a reload: one more after it */
	ev_async mc_reload_done;
	struct config mc_reload_cfg;        /* parsed and valid; being resolved */
	struct exportset_change *mc_reload_exports; /* prepared with it, off the loop */
	int mc_reload_rc;
	char mc_reload_err[MAIN_ERRLEN];
	bool mc_signals;
	char mc_report[MAIN_REPORT_LEN];    /* start-up lines for the waiting parent */
	size_t mc_report_len;
};

/* A start-up line the user must see: stderr in the foreground, else via the parent. */
static void main_report(struct main_ctx *mc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void main_report(struct main_ctx *mc, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (mc->mc_cfg.cf_foreground) {
		fprintf(stderr, "%s\n", line);
		fflush(stderr);
		return;
	}
	n = snprintf(mc->mc_report + mc->mc_report_len, sizeof(mc->mc_report) - mc->mc_report_len,
		     "%s\n", line);
	if (n > 0)
		mc->mc_report_len += (size_t)n;
	if (mc->mc_report_len >= sizeof(mc->mc_report))
		mc->mc_report_len = sizeof(mc->mc_report) - 1;
}

/* A warning goes to the log and, as a daemon, also to the terminal that started us. */
static void main_warn(struct main_ctx *mc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void main_warn(struct main_ctx *mc, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_warn("%s", line);
	if (!mc->mc_cfg.cf_foreground)
		main_report(mc, "unionnfsd: warning: %s", line);
}

/*
 * Locks belong to an export's union objects: two exports reaching one directory as the top
 * branch of either are two lock spaces over the same files. Said at start, not refused (a
 * read-only and a read-write export of one tree is a common set-up).
 */
static void main_warn_shared_top(const struct config *cf, int i, const struct stat *top)
{
	struct stat st;

	for (int k = 0; k < cf->cf_nexports; k++) {
		const struct export_conf *ek = &cf->cf_exports[k];

		if (k == i)
			continue;
		for (int j = 0; j < ek->ec_nbranches; j++) {
			/* two tops are one pair: said once, from the first export */
			if (k < i && j == 0 && ek->ec_upper == NULL)
				continue;
			if (stat(ek->ec_branches[j], &st) == 0 && st.st_dev == top->st_dev &&
			    st.st_ino == top->st_ino) {
				log_warn("exports %s and %s both serve the directory %s: file locks "
					 "taken through one are not seen through the other (each "
					 "export is a lock space of its own); export it once, with "
					 "client rules for the different options",
					 cf->cf_exports[i].ec_name, ek->ec_name, ek->ec_branches[j]);
				break;
			}
		}
	}
}

/*
 * Every branch must be an existing directory before anything touches the state
 * directory: a typo in -e must not leave a fresh, empty inode map behind.
 */
static int main_check_branches(const struct config *cf, char *err, size_t errlen)
{
	struct stat st;
	int i, j;

	for (i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];

		for (j = 0; j < ec->ec_nbranches; j++) {
			const char *b = ec->ec_branches[j];

			if (stat(b, &st) < 0) {
				snprintf(err, errlen,
					 "export %s: branch %s: %s; create the directory (mkdir -p %s) or fix the export's branch list",
					 ec->ec_name, b, strerror(errno), b);
				return -1;
			}
			if (!S_ISDIR(st.st_mode)) {
				snprintf(err, errlen,
					 "export %s: branch %s is not a directory; every branch must be a directory",
					 ec->ec_name, b);
				return -1;
			}
			/* the top branch of an export without per-client uppers */
			if (j == 0 && ec->ec_upper == NULL)
				main_warn_shared_top(cf, i, &st);
		}
	}
	return 0;
}

/* net_opts.no_admit: a TCP client no rule of any export admits gets no connection. */
static bool main_admit(void *arg, const struct sockaddr *peer, socklen_t peerlen)
{
	struct main_ctx *mc = arg;

	(void)peerlen;
	return nfs_peer_admitted(&mc->mc_nfs, peer);
}

/* Listens on port unless an earlier listener already has it; returns the bound port. */
/*
 * Listens on port over TCP, and over UDP too when --udp is given or udp asks for it (the lock
 * manager's clients use either). A port already listened on serves again when it serves what
 * is asked. option names the setting that chose port, for the message.
 */
static int main_listen(struct main_ctx *mc, int port, bool udp, const char *option, char *err,
		       size_t errlen)
{
	int bound;

	for (int i = 0; i < mc->mc_nports && port != 0; i++) {
		if (mc->mc_ports[i].lp_port != port)
			continue;
		if (!udp || mc->mc_ports[i].lp_udp)
			return port;
		snprintf(err, errlen,
			 "port %d is the NFS or MOUNT port too, served over TCP only, and locking needs UDP as well; give --udp, or another %s",
			 port, option);
		return -EADDRINUSE;
	}
	bound = udp ? net_listen_udp(mc->mc_net, port, err, errlen)
		    : net_listen(mc->mc_net, port, err, errlen);
	if (bound < 0)
		return bound;
	if (mc->mc_nports < (int)(sizeof(mc->mc_ports) / sizeof(mc->mc_ports[0]))) {
		mc->mc_ports[mc->mc_nports].lp_port = bound;
		mc->mc_ports[mc->mc_nports++].lp_udp = udp || mc->mc_cfg.cf_udp;
	}
	return bound;
}

/* TCP, and UDP when it is served: a mapping that is not served would only mislead. */
static void main_add_map_on(struct main_ctx *mc, uint32_t prog, uint32_t vers, int port, bool udp)
{
	static const uint32_t prots[] = { IPPROTO_TCP, IPPROTO_UDP };
	size_t i, n = udp ? 2 : 1;

	for (i = 0; i < n; i++) {
		if (mc->mc_nmaps >= MAIN_MAX_MAPS)
			return;
		mc->mc_maps[mc->mc_nmaps++] = (struct portmap_mapping){
			.pm_prog = prog, .pm_vers = vers, .pm_prot = prots[i], .pm_port = (uint32_t)port,
		};
	}
}

static void main_add_map(struct main_ctx *mc, uint32_t prog, uint32_t vers, int port)
{
	main_add_map_on(mc, prog, vers, port, mc->mc_cfg.cf_udp);
}

/* The versions come from the program tables, so what we advertise is what we serve. */
static void main_build_maps(struct main_ctx *mc, bool with_nsm)
{
	uint32_t v;

	mc->mc_nmaps = 0;
	for (v = nfs3_program.rg_vers_min; v <= nfs3_program.rg_vers_max; v++)
		main_add_map(mc, nfs3_program.rg_prog, v, mc->mc_nfs_port);
	for (v = mount_program.rg_vers_min; v <= mount_program.rg_vers_max; v++)
		main_add_map(mc, mount_program.rg_prog, v, mc->mc_mount_port);
	if (mc->mc_nlm_port == 0)
		return;
	/* Lock managers and status monitors call each other over UDP as often as TCP. */
	for (v = nlm_program.rg_vers_min; v <= nlm_program.rg_vers_max; v++)
		main_add_map_on(mc, nlm_program.rg_prog, v, mc->mc_nlm_port, true);
	for (v = nsm_program.rg_vers_min; v <= nsm_program.rg_vers_max && with_nsm; v++)
		main_add_map_on(mc, nsm_program.rg_prog, v, mc->mc_nlm_port, true);
}

/*
 * The machine's own rpc.statd may hold NSM at rpcbind: taking its registration away would
 * break the machine's NFS client locks, so NSM is left out and the user told.
 */
static bool main_nsm_free_at_rpcbind(struct main_ctx *mc)
{
	uint16_t port;

	if (mc->mc_nlm_port == 0)
		return true;
	port = portmap_rpcbind_port(nsm_program.rg_prog, nsm_program.rg_vers_min, IPPROTO_UDP);
	if (port == 0 || port == mc->mc_nlm_port)
		return true;
	main_warn(mc,
		  "rpcbind lists another status monitor (NSM, program 100024, port %u: the machine's rpc.statd) so clients' reboot notices will not reach unionnfsd and a rebooted client's locks stay until it unlocks; stop it (systemctl stop rpc-statd) and restart unionnfsd",
		  port);
	return false;
}

static int main_rpcbind_register(struct main_ctx *mc)
{
	int rc;

	if (!main_nsm_free_at_rpcbind(mc)) {
		main_build_maps(mc, false);
		portmap_builtin_set(mc->mc_maps, mc->mc_nmaps);
	}
	rc = portmap_register(mc->mc_maps, mc->mc_nmaps);
	if (rc == 0) {
		mc->mc_registered = true;
		log_info("registered with rpcbind");
	}
	return rc;
}


static int main_portmap_builtin(struct main_ctx *mc, char *err, size_t errlen)
{
	struct portmap_mapping all[MAIN_MAX_MAPS + 2];
	bool udp = mc->mc_cfg.cf_udp || mc->mc_nlm_port != 0;
	int port, n;

	/* A rebooted client's sm-notify asks for our NSM over UDP only: without an answer
	 * there, the server would keep its locks. */
	port = main_listen(mc, mc->mc_cfg.cf_portmap_port, udp, "--portmap-port", err, errlen);
	if (port < 0)
		return port;
	n = mc->mc_nmaps;
	memcpy(all, mc->mc_maps, (size_t)n * sizeof(all[0]));
	/* The portmapper's own entry, as rpcbind lists it: version 2. */
	all[n++] = (struct portmap_mapping){ portmap_program.rg_prog, portmap_program.rg_vers_min,
					     IPPROTO_TCP, (uint32_t)port };
	if (udp)
		all[n++] = (struct portmap_mapping){ portmap_program.rg_prog,
						     portmap_program.rg_vers_min, IPPROTO_UDP,
						     (uint32_t)port };
	portmap_builtin_set(all, n);
	log_info("built-in portmapper on port %d", port);
	return 0;
}

/*
 * What a client must add to its mount options when no portmapper answers for us: the ports,
 * and nolock, since a client's lock manager finds ours only through the portmapper.
 */
static const char *main_no_portmap_options(struct main_ctx *mc, char *buf, size_t len)
{
	snprintf(buf, len, "-o port=%d,mountport=%d,nolock", mc->mc_nfs_port, mc->mc_mount_port);
	return buf;
}

static int main_portmap(struct main_ctx *mc, char *err, size_t errlen)
{
	const struct config *cf = &mc->mc_cfg;
	char lerr[MAIN_ERRLEN], opts[64];
	int rc;

	main_build_maps(mc, true);
	/* Harmless in every mode: portmapper calls that reach our own ports get true answers. */
	portmap_builtin_set(mc->mc_maps, mc->mc_nmaps);
	switch (cf->cf_portmap) {
	case PORTMAP_OFF:
		log_info("no portmapper (--portmap off): clients mount with %s (file locks then "
			 "stay local to each client)", main_no_portmap_options(mc, opts, sizeof(opts)));
		return 0;
	case PORTMAP_RPCBIND:
		/* Asking first keeps a missing rpcbind from costing libtirpc's long timeouts. */
		if (!portmap_rpcbind_running()) {
			snprintf(err, errlen,
				 "--portmap rpcbind: no rpcbind answers on 127.0.0.1:111; start it (systemctl start rpcbind) or use --portmap builtin or --portmap off");
			return -ECONNREFUSED;
		}
		rc = main_rpcbind_register(mc);
		if (rc < 0) {
			snprintf(err, errlen,
				 "--portmap rpcbind: rpcbind refused our registration (%s); run unionnfsd as root, or use --portmap builtin or --portmap off",
				 strerror(-rc));
			return rc;
		}
		return 0;
	case PORTMAP_BUILTIN:
		rc = main_portmap_builtin(mc, lerr, sizeof(lerr));
		if (rc < 0) {
			snprintf(err, errlen,
				 "--portmap builtin: %s; or use --portmap rpcbind or --portmap off",
				 lerr);
			return rc;
		}
		return 0;
	case PORTMAP_AUTO:
		if (portmap_rpcbind_running()) {
			rc = main_rpcbind_register(mc);
			if (rc == 0)
				return 0;
			main_warn(mc,
				  "rpcbind runs but registering with it failed (%s); clients must mount with %s (or run as root)",
				  strerror(-rc), main_no_portmap_options(mc, opts, sizeof(opts)));
			return 0;
		}
		if (main_portmap_builtin(mc, lerr, sizeof(lerr)) == 0)
			return 0;
		main_warn(mc,
			  "no portmapper: rpcbind is not running and %s; clients must mount with %s (or start rpcbind, or run as root)",
			  lerr, main_no_portmap_options(mc, opts, sizeof(opts)));
		return 0;
	}
	return 0;
}

static void main_on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	log_info("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

/* Host names in client rules were resolved by config_resolve; say to what. */
static void main_log_rules(const struct config *cf)
{
	char addrs[512];
	int i, j;

	for (i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];

		for (j = 0; j < ec->ec_nrules; j++) {
			if (ec->ec_rules[j].er_kind != EXPORTS_HOST)
				continue;
			exports_rule_addrs(&ec->ec_rules[j], addrs, sizeof(addrs));
			log_info("export %s: client %s resolves to %s", ec->ec_name,
				 ec->ec_rules[j].er_spec, addrs);
		}
	}
}

/* "serving /u (2 branches; clients 10.0.0.0/8 rw, * ro)" */
static void main_log_serving(const struct export_conf *ec)
{
	char rules[400];
	size_t used = 0;
	int j, n;

	rules[0] = '\0';
	for (j = 0; j < ec->ec_nrules; j++) {
		n = snprintf(rules + used, sizeof(rules) - used, "%s%s %s", j ? ", " : "",
			     ec->ec_rules[j].er_spec, ec->ec_rules[j].er_opts.eo_ro ? "ro" : "rw");
		if (n < 0 || (size_t)n >= sizeof(rules) - used)
			break;
		used += (size_t)n;
	}
	if (ec->ec_upper)
		log_info("serving %s (%d read-only lower branch%s; every client writes to its own upper %s; clients %s)",
			 ec->ec_name, ec->ec_nbranches, ec->ec_nbranches == 1 ? "" : "es",
			 ec->ec_upper, rules);
	else
		log_info("serving %s (%d branch%s; clients %s)", ec->ec_name, ec->ec_nbranches,
			 ec->ec_nbranches == 1 ? "" : "es", rules);
}

/* Names each setting a reload cannot apply, so nobody waits for it to take effect. */
static void main_reload_other_settings(const struct config *oc, const struct config *nc)
{
	uint64_t changed = config_diff(oc, nc);

	for (int s = 0; s < CONFIG_NSETTINGS; s++)
		if ((changed & (1ull << s)) && config_setting_apply(s) == CONFIG_RESTART)
			log_warn("SIGHUP: the setting %s changed; it takes effect only after a restart of unionnfsd",
				 config_setting_name(s));
}

/*
 * SIGHUP, on the loop once the new configuration (the original command line, and so the
 * -c file, parsed again) is resolved and its exports prepared (exportset_prepare): adds,
 * removes and serves again exports, then swaps in the client rules of every export whose
 * branch stack is unchanged. What else needs a restart is said and left as it was.
 */
static void main_reload_apply(struct main_ctx *mc, struct config *nc)
{
	struct config *oc = &mc->mc_cfg;
	int i, n;

	main_log_rules(nc);
	main_reload_other_settings(oc, nc);
	/* Compared before the swap, which hands nc the old rules and options. */
	for (i = 0; i < oc->cf_nexports; i++) {
		const struct export_conf *o = &oc->cf_exports[i];
		struct union_export *ux = nfs_export_union(&mc->mc_nfs, i);
		unsigned changes = config_diff_export(oc, nc, o->ec_name, ux && union_read_only(ux));

		if (!ux || (changes & CONFIG_EXPORT_GONE))
			continue; /* exportset_apply says */
		if (changes & CONFIG_EXPORT_UPPER)
			log_warn("SIGHUP: the upper= template of export %s changed; that needs a restart of unionnfsd, until then it is served as before and clients keep their layers under %s",
				 o->ec_name, o->ec_upper ? o->ec_upper : "the export's own upper");
		if ((changes & CONFIG_EXPORT_POLICY) && !(changes & CONFIG_EXPORT_BRANCHES)) {
			union_set_policy(ux, &nc->cf_exports[config_find_export(nc, o->ec_name)].ec_policy);
			log_info("SIGHUP: export %s creates and reports space by its new create=, statfs= and metacopy=",
				 o->ec_name);
		}
		if (changes & CONFIG_EXPORT_WRITABLE)
			log_warn("SIGHUP: export %s was started 'ro'; it becomes writable only after a restart of unionnfsd",
				 o->ec_name);
	}
	if (mc->mc_reload_exports)
		exportset_apply(mc->mc_exports, mc->mc_reload_exports, &mc->mc_nfs, nc);
	n = nfs_server_swap_rules(&mc->mc_nfs, nc);
	/* After the swap: every export served with the rules of nc, as it now has them. */
	for (i = 0; i < oc->cf_nexports; i++)
		if (nfs_export_union(&mc->mc_nfs, i) &&
		    !(config_diff_export(oc, nc, oc->cf_exports[i].ec_name, false) &
		      (CONFIG_EXPORT_GONE | CONFIG_EXPORT_BRANCHES)))
			main_log_serving(&oc->cf_exports[i]);
	log_info("SIGHUP: configuration reloaded; new client rules apply to %d export%s (other settings, such as ports, need a restart)",
		 n, n == 1 ? "" : "s");
}

/* The part of a reload that may block on DNS, off the loop. */
static void *main_resolve_thread(void *arg)
{
	struct main_ctx *mc = arg;

	mc->mc_reload_rc = config_resolve(&mc->mc_reload_cfg, mc->mc_reload_err,
					  sizeof(mc->mc_reload_err));
	if (mc->mc_reload_rc == 0)
		mc->mc_reload_exports = exportset_prepare(mc->mc_exports, &mc->mc_cfg,
							  &mc->mc_reload_cfg);
	ev_async_send(mc->mc_loop, &mc->mc_reload_done);
	return NULL;
}

/* Parses and checks the configuration again on the loop; 0 when it may be applied. */
static int main_reload_parse(struct main_ctx *mc, struct config *nc)
{
	char err[MAIN_ERRLEN];

	config_init(nc);
	if (config_parse_args(nc, mc->mc_argc, mc->mc_argv, err, sizeof(err)) == 0 &&
	    config_validate(nc, err, sizeof(err)) == 0)
		return 0;
	log_err("SIGHUP: the new configuration has an error, keeping the running one: %s", err);
	config_free(nc);
	return -1;
}

static void main_reload_start(struct main_ctx *mc)
{
	int rc;

	if (mc->mc_reloading) {
		log_info("SIGHUP: a reload is still running; another one follows it");
		mc->mc_reload_again = true;
		return;
	}
	log_info("SIGHUP: reloading the configuration");
	if (main_reload_parse(mc, &mc->mc_reload_cfg) < 0)
		return;
	rc = pthread_create(&mc->mc_resolve_thread, NULL, main_resolve_thread, mc);
	if (rc != 0) {
		log_err("SIGHUP: cannot start the thread resolving host names: %s; the configuration is unchanged, send SIGHUP again",
			strerror(rc));
		config_free(&mc->mc_reload_cfg);
		return;
	}
	mc->mc_reloading = true;
}

/* Waits for a resolve thread (a DNS timeout at most). */
static void main_reload_join(struct main_ctx *mc)
{
	if (!mc->mc_reloading)
		return;
	pthread_join(mc->mc_resolve_thread, NULL);
	mc->mc_reloading = false;
}

static void main_on_reload_done(struct ev_loop *loop, ev_async *w, int revents)
{
	struct main_ctx *mc = w->data;

	(void)loop;
	(void)revents;
	if (!mc->mc_reloading)
		return;
	main_reload_join(mc);
	if (mc->mc_reload_rc != 0)
		log_err("SIGHUP: the new configuration has an error, keeping the running one: %s",
			mc->mc_reload_err);
	else
		main_reload_apply(mc, &mc->mc_reload_cfg);
	exportset_change_free(mc->mc_reload_exports);
	mc->mc_reload_exports = NULL;
	config_free(&mc->mc_reload_cfg);
	if (mc->mc_reload_again) {
		mc->mc_reload_again = false;
		main_reload_start(mc);
	}
}

/* `unionnfsd-ctl reload`: the same path as SIGHUP. */
static void main_ctl_reload(void *arg)
{
	main_reload_start(arg);
}

/* `unionnfsd-ctl stats` and /metrics: the NLM service's GRANTED callbacks pending. */
static uint64_t main_lock_callbacks(void *arg)
{
	return nlm_service_callbacks_pending(arg);
}

static void main_on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)revents;
	main_reload_start(w->data);
}

/*
 * A copy of argv for reloading, with every -c path made absolute: a daemon runs in /,
 * where a relative path would name another file.
 */
static int main_save_argv(struct main_ctx *mc, int argc, char **argv)
{
	int i;

	mc->mc_argv = calloc((size_t)argc + 1, sizeof(char *));
	if (!mc->mc_argv)
		return -1;
	mc->mc_argc = argc;
	for (i = 0; i < argc; i++) {
		if (i > 0 && !strcmp(argv[i - 1], "-c") && argv[i][0] != '/')
			mc->mc_argv[i] = realpath(argv[i], NULL);
		else
			mc->mc_argv[i] = strdup(argv[i]);
		if (!mc->mc_argv[i])
			return -1;
	}
	return 0;
}

static void main_free_argv(struct main_ctx *mc)
{
	int i;

	if (!mc->mc_argv)
		return;
	for (i = 0; i < mc->mc_argc; i++)
		free(mc->mc_argv[i]);
	free(mc->mc_argv);
	mc->mc_argv = NULL;
}

/* Undoes whatever start-up got to, in reverse order. Safe on a half-built context. */
static void main_teardown(struct main_ctx *mc)
{
	control_close(mc->mc_ctl);
	mc->mc_ctl = NULL;
	if (mc->mc_net) {
		net_server_shutdown(mc->mc_net);
		net_server_free(mc->mc_net);
		mc->mc_net = NULL;
	}
	if (mc->mc_registered) {
		portmap_unregister(mc->mc_maps, mc->mc_nmaps);
		mc->mc_registered = false;
	}
	/* Callbacks in flight reference the lock service and NSM: they end first. */
	rpc_client_stop(mc->mc_rc);
	mc->mc_rc = NULL;
	nlm_service_free(mc->mc_nlm);
	mc->mc_nlm = NULL;
	nsm_close(mc->mc_nsm);
	mc->mc_nsm = NULL;
	if (mc->mc_signals) {
		main_reload_join(mc);
		exportset_change_free(mc->mc_reload_exports);
		mc->mc_reload_exports = NULL;
		config_free(&mc->mc_reload_cfg);
		ev_async_stop(mc->mc_loop, &mc->mc_reload_done);
		ev_signal_stop(mc->mc_loop, &mc->mc_sigterm);
		ev_signal_stop(mc->mc_loop, &mc->mc_sigint);
		ev_signal_stop(mc->mc_loop, &mc->mc_sighup);
		mc->mc_signals = false;
	}
	exportset_close(mc->mc_exports);
	mc->mc_exports = NULL;
	if (mc->mc_store) {
		store_close(mc->mc_store);
		mc->mc_store = NULL;
	}
	if (mc->mc_nfs_ready) {
		views_free(mc->mc_views);
		mc->mc_views = NULL;
		nfs_server_free(&mc->mc_nfs);
		mc->mc_nfs_ready = false;
	}
	if (mc->mc_loop) {
		ev_loop_destroy(mc->mc_loop);
		mc->mc_loop = NULL;
	}
}

/*
 * The control socket is a convenience: without it the server still serves, and says why.
 * A --metrics endpoint that was asked for and cannot be served stops the start (exit 2).
 */
static int main_control(struct main_ctx *mc, char *err, size_t errlen)
{
	struct control_env env = {
		.ce_cfg = &mc->mc_cfg, .ce_nfs = &mc->mc_nfs, .ce_views = mc->mc_views,
		.ce_locks = mc->mc_nlm != NULL ? nlm_service_locks(mc->mc_nlm) : NULL,
		.ce_lock_callbacks = mc->mc_nlm != NULL ? main_lock_callbacks : NULL,
		.ce_lock_callbacks_arg = mc->mc_nlm,
		.ce_reload = main_ctl_reload, .ce_reload_arg = mc,
	};
	char lerr[MAIN_ERRLEN];

	if (control_open(mc->mc_loop, &env, &mc->mc_ctl, lerr, sizeof(lerr)) < 0) {
		if (mc->mc_cfg.cf_metrics != NULL) {
			snprintf(err, errlen, "--metrics needs the control socket: %s", lerr);
			return -1;
		}
		main_warn(mc, "%s; unionnfsd-ctl will not reach this server", lerr);
		return 0;
	}
	if (mc->mc_cfg.cf_metrics != NULL &&
	    control_metrics_open(mc->mc_ctl, mc->mc_cfg.cf_metrics, err, errlen) < 0)
		return -1;
	if (mc->mc_cfg.cf_metrics != NULL)
		log_info("statistics for Prometheus at http://%s/metrics", mc->mc_cfg.cf_metrics);
	return 0;
}

/*
 * The state directory holds the handle key: whoever can read the map can forge handles
 * (the client rules are still checked on every call). It is made 0700, but an existing
 * directory keeps whatever mode it was given.
 */
static void main_check_state_mode(struct main_ctx *mc)
{
	const char *dir = mc->mc_cfg.cf_state_dir;
	struct stat st;

	if (stat(dir, &st) < 0 || (st.st_mode & 077) == 0)
		return;
	main_warn(mc,
		  "state directory %s is accessible to its group or others (mode %04o); it holds the file handle key, with which handles can be forged: chmod 700 %s",
		  dir, (unsigned)(st.st_mode & 07777), dir);
}

/* The lock service: outbound calls, NSM's state in the state directory, the lock table. */
static int main_locking(struct main_ctx *mc, char *err, size_t errlen)
{
	struct nlm_opts o = { .no_grace_seconds = mc->mc_cfg.cf_grace,
			      .no_retry_ms = mc->mc_cfg.cf_nlm_retry_ms };
	char lerr[MAIN_ERRLEN];

	if (mc->mc_cfg.cf_nlm_port == CONFIG_NLM_OFF)
		return 0;
	if (rpc_client_start(&mc->mc_rc, lerr, sizeof(lerr)) < 0) {
		snprintf(err, errlen, "file locking: %s; or --nlm-port off to serve no locking",
			 lerr);
		return -1;
	}
	if (nsm_open(mc->mc_cfg.cf_state_dir, mc->mc_rc, &mc->mc_nsm, lerr, sizeof(lerr)) < 0) {
		snprintf(err, errlen, "file locking: %s; or --nlm-port off to serve no locking",
			 lerr);
		return -1;
	}
	if (nlm_service_new(&mc->mc_nfs, mc->mc_nsm, mc->mc_rc, &o, &mc->mc_nlm, lerr,
			    sizeof(lerr)) < 0) {
		snprintf(err, errlen, "file locking: %s", lerr);
		return -1;
	}
	rpc_dispatch_set_ctx(nlm_program.rg_prog, mc->mc_nlm);
	rpc_dispatch_set_ctx(nsm_program.rg_prog, mc->mc_nsm);
	return 0;
}

/* Everything from opening the store to serving. Returns 0, or -1 with a message in err. */
static int main_start(struct main_ctx *mc, char *err, size_t errlen)
{
	/* Without locking, NLM and NSM are not served at all. */
	static const struct rpc_program *const with_locking[] = {
		&nfs3_program, &mount_program, &portmap_program, &nlm_program, &nsm_program,
	};
	static const struct rpc_program *const without_locking[] = {
		&nfs3_program, &mount_program, &portmap_program,
	};
	struct config *cf = &mc->mc_cfg;
	struct net_opts no;
	char lerr[MAIN_ERRLEN];
	int i, rc;

	rc = store_open(cf->cf_state_dir, &mc->mc_store, lerr, sizeof(lerr));
	if (rc < 0) {
		snprintf(err, errlen, "%s", lerr);
		return -1;
	}
	main_check_state_mode(mc);
	if (exportset_open(cf, mc->mc_store, &mc->mc_exports, err, errlen) < 0)
		return -1;

	nfs_server_init(&mc->mc_nfs, cf);
	mc->mc_nfs_ready = true;
	mc->mc_nfs.ns_exports = exportset_table(mc->mc_exports);
	mc->mc_nfs.ns_nexports = cf->cf_nexports;
	if (views_new(&mc->mc_nfs, cf, &mc->mc_views) < 0)
		log_warn("no memory for the table of client views; exports with upper= will "
			 "refuse mounts");
	store_handle_key(mc->mc_store, mc->mc_nfs.ns_handle_key);
	if (cf->cf_nlm_port != CONFIG_NLM_OFF)
		rpc_dispatch_init(with_locking, (int)(sizeof(with_locking) / sizeof(with_locking[0])),
				  &mc->mc_nfs);
	else
		rpc_dispatch_init(without_locking,
				  (int)(sizeof(without_locking) / sizeof(without_locking[0])),
				  &mc->mc_nfs);
	/*
	 * Locking opens UDP ports (NLM's, the built-in portmapper's) even without --udp; they
	 * must not serve NFS and MOUNT there, whose replies (READ's) are many times their calls:
	 * UDP off is about not reflecting traffic at a forged source address.
	 */
	rpc_dispatch_set_udp(nfs3_program.rg_prog, cf->cf_udp);
	rpc_dispatch_set_udp(mount_program.rg_prog, cf->cf_udp);
	portmap_builtin_dump_udp(cf->cf_udp);
	if (main_locking(mc, err, errlen) < 0)
		return -1;

	mc->mc_loop = ev_default_loop(EVFLAG_AUTO);
	if (!mc->mc_loop) {
		snprintf(err, errlen, "cannot create the event loop (libev); check the LIBEV_FLAGS environment variable");
		return -1;
	}
	/* Before any worker thread exists, so no thread can take these signals' default action. */
	ev_signal_init(&mc->mc_sigterm, main_on_stop, SIGTERM);
	ev_signal_init(&mc->mc_sigint, main_on_stop, SIGINT);
	ev_signal_init(&mc->mc_sighup, main_on_hup, SIGHUP);
	mc->mc_sighup.data = mc;
	ev_async_init(&mc->mc_reload_done, main_on_reload_done);
	mc->mc_reload_done.data = mc;
	ev_async_start(mc->mc_loop, &mc->mc_reload_done);
	ev_signal_start(mc->mc_loop, &mc->mc_sigterm);
	ev_signal_start(mc->mc_loop, &mc->mc_sigint);
	ev_signal_start(mc->mc_loop, &mc->mc_sighup);
	mc->mc_signals = true;

	no = (struct net_opts){
		.no_listen = cf->cf_listen,
		.no_workers = cf->cf_workers,
		.no_max_record = cf->cf_max_record,
		.no_max_conns = cf->cf_max_conns,
		.no_max_conns_per_host = cf->cf_max_conns_per_host,
		.no_admit = main_admit,
		.no_admit_arg = mc,
		.no_idle_timeout = cf->cf_idle_timeout,
		.no_max_requests = cf->cf_max_requests,
		.no_max_buffered = cf->cf_max_buffered,
		.no_udp = cf->cf_udp,
		.no_busy_poll_us = cf->cf_busy_poll_us,
	};
	rc = net_server_create(mc->mc_loop, &no, &mc->mc_net);
	if (rc < 0) {
		mc->mc_net = NULL;
		snprintf(err, errlen, "cannot start the network server: %s", strerror(-rc));
		return -1;
	}
	rc = main_listen(mc, cf->cf_port, false, "--port", lerr, sizeof(lerr));
	if (rc < 0) {
		snprintf(err, errlen, "--port: %s", lerr);
		return -1;
	}
	mc->mc_nfs_port = rc;
	/* Every listener serves every program, so equal ports (both 0 too) share one. */
	if (cf->cf_mount_port == cf->cf_port)
		rc = mc->mc_nfs_port;
	else
		rc = main_listen(mc, cf->cf_mount_port, false, "--mount-port", lerr, sizeof(lerr));
	if (rc < 0) {
		snprintf(err, errlen, "--mount-port: %s", lerr);
		return -1;
	}
	mc->mc_mount_port = rc;
	if (mc->mc_nlm != NULL) {
		rc = main_listen(mc, cf->cf_nlm_port, true, "--nlm-port", lerr, sizeof(lerr));
		if (rc < 0) {
			snprintf(err, errlen, "--nlm-port: %s; or --nlm-port off to serve no locking",
				 lerr);
			return -1;
		}
		mc->mc_nlm_port = rc;
	}
	if (main_portmap(mc, err, errlen) < 0)
		return -1;
	if (main_control(mc, err, errlen) < 0)
		return -1;
	main_report(mc, "nfs port %d", mc->mc_nfs_port);
	main_report(mc, "mount port %d", mc->mc_mount_port);
	if (mc->mc_nlm != NULL) {
		main_report(mc, "nlm port %d", mc->mc_nlm_port);
		log_info("file locking: NLM v4 and NSM on port %d (TCP and UDP)", mc->mc_nlm_port);
		/* The last run's clients reclaim their locks once they know we are back. */
		nsm_notify_previous(mc->mc_nsm);
	} else {
		log_info("file locking is off (--nlm-port off): clients must mount with -o nolock");
	}
	for (i = 0; i < cf->cf_nexports; i++)
		main_log_serving(&cf->cf_exports[i]);
	return 0;
}

/* The parent side of daemonizing: relays the child's start-up result, then exits. */
static int main_parent_wait(int fd)
{
	char buf[MAIN_REPORT_LEN + MAIN_ERRLEN + 8];
	size_t have = 0;
	ssize_t n;

	while (have < sizeof(buf) - 1) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = '\0';
	close(fd);
	if (have == 0) {
		fprintf(stderr, "unionnfsd: the server died during start-up; run it with -f to see why\n");
		return MAIN_EXIT_START;
	}
	fputs(buf + 1, stderr);
	return buf[0] == '0' ? MAIN_EXIT_OK : MAIN_EXIT_START;
}

static void main_child_tell(int fd, char status, const char *text)
{
	size_t len = strlen(text), off = 0;
	ssize_t n;

	if (write(fd, &status, 1) != 1)
		return;
	while (off < len) {
		n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

/* Detaches stdio from the terminal once nothing more will be said there. */
static void main_detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * Client connections and the resolve cache's open directories both want descriptors; the
 * soft limit (often 1024) is only a default, the hard one is what the admin allows.
 */
static void main_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("cannot raise the open file limit to %llu: %s; connections and the "
			 "resolve cache are bounded by the soft limit", (unsigned long long)rl.rlim_max,
			 strerror(errno));
}

int main(int argc, char **argv)
{
	static struct main_ctx mc;
	char err[MAIN_REPORT_LEN];
	char msg[MAIN_REPORT_LEN + 32];
	int pipefd[2] = { -1, -1 };
	int rc, status = MAIN_EXIT_START;
	pid_t pid;

	config_init(&mc.mc_cfg);
	rc = config_parse_args(&mc.mc_cfg, argc, argv, err, sizeof(err));
	if (rc == 1) {
		/* the whole text: it is longer than a message buffer */
		fputs(config_usage_text(), stdout);
		config_free(&mc.mc_cfg);
		return MAIN_EXIT_OK;
	}
	if (rc < 0 || config_validate(&mc.mc_cfg, err, sizeof(err)) < 0 ||
	    config_resolve(&mc.mc_cfg, err, sizeof(err)) < 0 ||
	    main_check_branches(&mc.mc_cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "unionnfsd: %s\n", err);
		config_free(&mc.mc_cfg);
		return MAIN_EXIT_START;
	}
	if (main_save_argv(&mc, argc, argv) < 0) {
		fprintf(stderr, "unionnfsd: cannot keep the command line for SIGHUP reloads: %s\n",
			strerror(errno ? errno : ENOMEM));
		main_free_argv(&mc);
		config_free(&mc.mc_cfg);
		return MAIN_EXIT_START;
	}

	if (!mc.mc_cfg.cf_foreground) {
		if (pipe2(pipefd, O_CLOEXEC) < 0) {
			fprintf(stderr, "unionnfsd: cannot create a pipe: %s\n", strerror(errno));
			goto out;
		}
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "unionnfsd: cannot fork: %s; run with -f\n", strerror(errno));
			close(pipefd[0]);
			close(pipefd[1]);
			goto out;
		}
		if (pid > 0) {
			close(pipefd[1]);
			status = main_parent_wait(pipefd[0]);
			goto out;
		}
		close(pipefd[0]);
		setsid();
		if (chdir("/") < 0) {
			/* Nothing below uses relative paths; the cwd only pins a mount. */
		}
	}

	log_init(mc.mc_cfg.cf_foreground, "unionnfsd");
	main_log_rules(&mc.mc_cfg);
	main_raise_fd_limit();
	signal(SIGPIPE, SIG_IGN);
	fsio_init();

	if (main_start(&mc, err, sizeof(err)) < 0) {
		snprintf(msg, sizeof(msg), "unionnfsd: %s\n", err);
		if (mc.mc_cfg.cf_foreground) {
			fputs(msg, stderr);
		} else {
			log_err("%s", err);
			main_child_tell(pipefd[1], '2', msg);
			close(pipefd[1]);
		}
		main_teardown(&mc);
		goto out;
	}
	if (!mc.mc_cfg.cf_foreground) {
		mc.mc_report[mc.mc_report_len] = '\0';
		main_child_tell(pipefd[1], '0', mc.mc_report);
		close(pipefd[1]);
		main_detach_stdio();
	}
	log_info("ready");

	ev_run(mc.mc_loop, 0);

	main_teardown(&mc);
	log_info("stopped");
	status = MAIN_EXIT_OK;
out:
	main_free_argv(&mc);
	config_free(&mc.mc_cfg);
	return status;
}
