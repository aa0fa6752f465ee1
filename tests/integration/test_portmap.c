/*
 * Mounting without port options, both ways the server offers:
 *   (a) registering with the system rpcbind (started here, and stopped again, when none
 *       runs), and unregistering on exit;
 *   (b) the built-in portmapper on port 111 when no rpcbind runs (v2 GETPORT/DUMP, v3/v4
 *       GETADDR), used by rpcinfo and by libnfs with a URL that names no ports.
 * The tests run one after the other; rpcbind is never left running by them.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <rpc/pmap_prot.h>
#include <rpc/rpcb_prot.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define RPCBIND "/usr/sbin/rpcbind"

static char out[65536];
static pid_t rpcbind_pid;
static struct it_server cur;    /* the server of the running test, cleaned up after it */

static bool rpcbind_answers(void)
{
	char *argv[] = { "rpcinfo", "-p", "127.0.0.1", NULL };

	return it_run(argv, 10, out, sizeof(out)) == 0;
}

static bool rpcbind_answers_now(void *unused)
{
	(void)unused;
	return rpcbind_answers();
}

/* Starts our own rpcbind unless one runs already; returns false if it cannot. */
static bool rpcbind_start(void)
{
	char *argv[] = { RPCBIND, "-f", NULL };

	if (rpcbind_answers())
		return true;
	if (access(RPCBIND, X_OK) != 0) {
		fprintf(stderr, "%s is missing; run deploy/install-deps (package rpcbind)\n", RPCBIND);
		return false;
	}
	rpcbind_pid = fork();
	if (rpcbind_pid < 0)
		return false;
	if (rpcbind_pid == 0) {
		int null = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execv(RPCBIND, argv);
		_exit(127);
	}
	if (wait_until(rpcbind_answers_now, NULL, 10000))
		return true;
	fprintf(stderr, "rpcbind did not answer within 10 s\n");
	return false;
}

static void rpcbind_stop(void)
{
	if (rpcbind_pid > 0) {
		kill(rpcbind_pid, SIGTERM);
		if (wait_exit(rpcbind_pid, 5000) < 0) {
			kill(rpcbind_pid, SIGKILL);
			waitpid(rpcbind_pid, NULL, 0);
		}
		rpcbind_pid = 0;
	}
}

/* Whether `rpcinfo -p` output has "prog vers proto port". */
static bool rpcinfo_has(const char *text, uint32_t prog, uint32_t vers, const char *proto, int port)
{
	const char *line = text;

	while (line && *line) {
		unsigned p, v;
		int po;
		char pr[8];

		if (sscanf(line, " %u %u %7s %d", &p, &v, pr, &po) == 4 && p == prog && v == vers &&
		    !strcmp(pr, proto) && (port == 0 || po == port))
			return true;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

static void check_rpcinfo_lists(const struct it_server *s)
{
	char *argv[] = { "rpcinfo", "-p", "127.0.0.1", NULL };
	int rc = it_run(argv, 15, out, sizeof(out));

	if (rc != 0)
		fail_msg("rpcinfo -p 127.0.0.1: exit %d\n%s", rc, out);
	if (!rpcinfo_has(out, 100003, 3, "tcp", s->is_nfs_port) ||
	    !rpcinfo_has(out, 100003, 3, "udp", s->is_nfs_port) ||
	    !rpcinfo_has(out, 100005, 3, "tcp", s->is_mount_port) ||
	    !rpcinfo_has(out, 100005, 3, "udp", s->is_mount_port) ||
	    !rpcinfo_has(out, 100005, 1, "tcp", s->is_mount_port) ||
	    !rpcinfo_has(out, 100005, 1, "udp", s->is_mount_port))
		fail_msg("rpcinfo -p does not list NFS v3 on %d and MOUNT v1/v3 on %d (tcp, udp):\n%s",
			 s->is_nfs_port, s->is_mount_port, out);
}

static void check_rpcinfo_null(void)
{
	char *tcp[] = { "rpcinfo", "-t", "127.0.0.1", "100003", "3", NULL };
	char *udp[] = { "rpcinfo", "-u", "127.0.0.1", "100003", "3", NULL };
	char *mnt[] = { "rpcinfo", "-t", "127.0.0.1", "100005", "3", NULL };
	char **cmds[] = { tcp, udp, mnt };

	for (int i = 0; i < 3; i++) {
		int rc = it_run(cmds[i], 15, out, sizeof(out));

		if (rc != 0 || !strstr(out, "ready and waiting"))
			fail_msg("rpcinfo %s 127.0.0.1 %s 3: exit %d\n%s", cmds[i][1], cmds[i][3], rc,
				 out);
	}
}

static void check_portless_mount(void)
{
	struct nfs_context *nfs = it_nfs_mount_url("nfs://127.0.0.1" IT_EXPORT);
	struct nfs_stat_64 st;

	if (!nfs)
		fail_msg("libnfs could not mount nfs://127.0.0.1%s through the portmapper", IT_EXPORT);
	assert_int_equal(nfs_stat64(nfs, "/", &st), 0);
	it_nfs_unmount(nfs);
}

static void test_with_rpcbind(void **state)
{
	bool ours;

	(void)state;
	if (!rpcbind_start())
		fail_msg("cannot run rpcbind for this test; run deploy/install-deps");
	ours = rpcbind_pid > 0;
	it_server_init(&cur, false);
	cur.is_extra[0] = "--udp"; /* the checks below look for the UDP mappings too */
	cur.is_portmap = "rpcbind";
	if (it_server_start(&cur) != 0) {
		it_server_cleanup(&cur);
		rpcbind_stop();
		fail_msg("the server did not start with --portmap rpcbind%s",
			 ours ? "" : " (is the portmapper on port 111 a real rpcbind? another "
				     "unionnfsd's built-in one refuses registrations: run the tests "
				     "one at a time)");
	}
	check_rpcinfo_lists(&cur);
	check_rpcinfo_null();
	check_portless_mount();
	assert_int_equal(it_server_stop(&cur), 0);
	/* unregistered on exit */
	{
		char *argv[] = { "rpcinfo", "-p", "127.0.0.1", NULL };

		assert_int_equal(it_run(argv, 15, out, sizeof(out)), 0);
		if (rpcinfo_has(out, 100003, 3, "tcp", 0) || rpcinfo_has(out, 100005, 3, "tcp", 0))
			fail_msg("NFS or MOUNT still registered after the server stopped:\n%s", out);
	}
	it_server_cleanup(&cur);
	/* --portmap auto with rpcbind running registers with it too */
	it_server_init(&cur, false);
	cur.is_extra[0] = "--udp"; /* the checks below look for the UDP mappings too */
	cur.is_portmap = "auto";
	if (it_server_start(&cur) != 0)
		fail_msg("the server did not start with --portmap auto and rpcbind running");
	check_rpcinfo_lists(&cur);
	check_portless_mount();
	assert_int_equal(it_server_stop(&cur), 0);
	it_server_cleanup(&cur);
	rpcbind_stop();
	if (ours && rpcbind_answers())
		fail_msg("rpcbind still answers after stopping it");
}

static uint32_t t_getport(CLIENT *c, uint32_t prog, uint32_t vers, uint32_t prot)
{
	struct pmap args = { prog, vers, prot, 0 };
	u_int port = 12345;
	enum clnt_stat cs;

	cs = it_call(c, PMAPPROC_GETPORT, (xdrproc_t)xdr_pmap, &args, (xdrproc_t)xdr_u_int, &port);
	if (cs != RPC_SUCCESS)
		fail_msg("PMAP GETPORT: %s", clnt_sperrno(cs));
	return port;
}

/* RPCB GETADDR (v3 or v4); returns the port in the universal address, 0 if none. */
static int t_getaddr(int proto, int pmport, uint32_t vers, uint32_t prog, uint32_t pvers,
			const char *netid)
{
	CLIENT *c = it_clnt(proto, PMAPPROG, vers, pmport);
	RPCB args = { prog, pvers, (char *)netid, "", "" };
	char *uaddr = NULL;
	enum clnt_stat cs;
	int port = 0;

	cs = it_call(c, RPCBPROC_GETADDR, (xdrproc_t)xdr_rpcb, &args, (xdrproc_t)xdr_wrapstring,
		     &uaddr);
	if (cs != RPC_SUCCESS)
		fail_msg("RPCB v%u GETADDR: %s", vers, clnt_sperrno(cs));
	if (uaddr && *uaddr) {
		/* h1.h2.h3.h4.p1.p2 (or an IPv6 form ending in .p1.p2) */
		char *last = strrchr(uaddr, '.');
		char *prev;

		assert_non_null(last);
		*last = '\0';
		prev = strrchr(uaddr, '.');
		assert_non_null(prev);
		port = atoi(prev + 1) * 256 + atoi(last + 1);
	}
	free(uaddr);
	it_clnt_destroy(c);
	return port;
}

static void check_builtin(const struct it_server *s, int pmport)
{
	int protos[2] = { IPPROTO_TCP, IPPROTO_UDP };

	for (int i = 0; i < 2; i++) {
		CLIENT *c = it_clnt(protos[i], PMAPPROG, PMAPVERS, pmport);
		struct pmaplist *list = NULL;
		bool nfs_tcp = false, mnt_udp = false;

		assert_int_equal(it_call(c, PMAPPROC_NULL, (xdrproc_t)it_xdr_void, NULL,
					 (xdrproc_t)it_xdr_void, NULL),
				 RPC_SUCCESS);
		assert_int_equal(t_getport(c, 100003, 3, IPPROTO_TCP), s->is_nfs_port);
		assert_int_equal(t_getport(c, 100003, 3, IPPROTO_UDP), s->is_nfs_port);
		assert_int_equal(t_getport(c, 100005, 3, IPPROTO_TCP), s->is_mount_port);
		assert_int_equal(t_getport(c, 100005, 3, IPPROTO_UDP), s->is_mount_port);
		assert_int_equal(t_getport(c, 100005, 1, IPPROTO_TCP), s->is_mount_port);
		assert_int_equal(t_getport(c, 100005, 1, IPPROTO_UDP), s->is_mount_port);
		assert_int_equal(t_getport(c, 100227, 3, IPPROTO_TCP), 0);
		/* like rpcbind: another version's port, so the client learns of the mismatch */
		{
			uint32_t v2 = t_getport(c, 100003, 2, IPPROTO_TCP);

			assert_true(v2 == 0 || v2 == (uint32_t)s->is_nfs_port);
		}
		assert_int_equal(t_getport(c, 100003, 3, 99), 0);
		assert_int_equal(t_getport(c, PMAPPROG, PMAPVERS, IPPROTO_TCP), pmport);
		assert_int_equal(it_call(c, PMAPPROC_DUMP, (xdrproc_t)it_xdr_void, NULL,
					 (xdrproc_t)xdr_pmaplist_ptr, &list),
				 RPC_SUCCESS);
		for (struct pmaplist *p = list; p; p = p->pml_next) {
			nfs_tcp |= p->pml_map.pm_prog == 100003 && p->pml_map.pm_vers == 3 &&
				   p->pml_map.pm_prot == IPPROTO_TCP &&
				   p->pml_map.pm_port == (u_long)s->is_nfs_port;
			mnt_udp |= p->pml_map.pm_prog == 100005 && p->pml_map.pm_vers == 3 &&
				   p->pml_map.pm_prot == IPPROTO_UDP &&
				   p->pml_map.pm_port == (u_long)s->is_mount_port;
		}
		xdr_free((xdrproc_t)xdr_pmaplist_ptr, &list);
		assert_true(nfs_tcp);
		assert_true(mnt_udp);
		/* PMAP SET/UNSET from a client is refused */
		{
			struct pmap m = { 100003, 3, IPPROTO_TCP, 1 };
			bool_t ok = TRUE;
			enum clnt_stat cs = it_call(c, PMAPPROC_SET, (xdrproc_t)xdr_pmap, &m,
						    (xdrproc_t)xdr_bool, &ok);

			if (cs == RPC_SUCCESS)
				assert_false(ok);
			assert_int_equal(t_getport(c, 100003, 3, IPPROTO_TCP), s->is_nfs_port);
		}
		it_clnt_destroy(c);
		for (uint32_t v = 3; v <= 4; v++) {
			assert_int_equal(t_getaddr(protos[i], pmport, v, 100003, 3, "tcp"),
					 s->is_nfs_port);
			assert_int_equal(t_getaddr(protos[i], pmport, v, 100003, 3, "udp"),
					 s->is_nfs_port);
			assert_int_equal(t_getaddr(protos[i], pmport, v, 100005, 3, "tcp"),
					 s->is_mount_port);
			assert_int_equal(t_getaddr(protos[i], pmport, v, 100227, 3, "tcp"), 0);
		}
	}
}

static void run_builtin(const char *mode)
{
	bool rpcbind = rpcbind_answers();
	bool port111 = !rpcbind && it_tcp_port_free(111);
	char pmport[16];
	int port = 111;

	it_server_init(&cur, false);
	cur.is_extra[0] = "--udp"; /* the checks below look for the UDP mappings too */
	if (!strcmp(mode, "auto") && rpcbind) {
		/* with a system rpcbind, auto must register with it */
		cur.is_portmap = mode;
		if (it_server_start(&cur) != 0)
			fail_msg("the server did not start with --portmap auto");
		check_rpcinfo_lists(&cur);
		assert_int_equal(it_server_stop(&cur), 0);
		it_server_cleanup(&cur);
		return;
	}
	if (!port111 && !rpcbind)
		fail_msg("port 111 is busy but no portmapper answers there; free it");
	if (!port111) {
		/* a system rpcbind holds 111: check the built-in one on a spare port instead */
		for (port = 40111; port < 40200 && !it_tcp_port_free(port); port++)
			;
		fprintf(stderr,
			"note: port 111 is busy (a system rpcbind); checking the built-in portmapper "
			"on port %d, without rpcinfo -p and the port-less libnfs mount\n",
			port);
	}
	snprintf(pmport, sizeof(pmport), "%d", port);
	cur.is_portmap = mode;
	if (port != 111) {
		cur.is_extra[1] = "--portmap-port";
		cur.is_extra[2] = pmport;
	}
	if (it_server_start(&cur) != 0) {
		it_server_cleanup(&cur);
		fail_msg("the server did not start with --portmap %s", mode);
	}
	check_builtin(&cur, port);
	if (port == 111) {
		check_rpcinfo_lists(&cur);
		check_rpcinfo_null();
		check_portless_mount();
	}
	assert_int_equal(it_server_stop(&cur), 0);
	it_server_cleanup(&cur);
	if (port == 111)
		assert_true(it_tcp_port_free(111));
}

static void test_builtin_portmapper(void **state)
{
	(void)state;
	run_builtin("builtin");
}

static void test_auto_without_rpcbind(void **state)
{
	(void)state;
	run_builtin("auto");
}

/*
 * With file locking served (the default) the built-in portmapper answers over UDP too, even
 * without --udp: a rebooted client's sm-notify looks up the server's NSM over UDP only, and
 * without an answer the server would keep that client's locks for good.
 */
static void test_builtin_udp_for_nsm(void **state)
{
	char pmport[16];
	uint32_t nsm, nlm;
	CLIENT *c;
	int port;

	(void)state;
	for (port = 40211; port < 40300 && !it_tcp_port_free(port); port++)
		;
	snprintf(pmport, sizeof(pmport), "%d", port);
	it_server_init(&cur, false);
	cur.is_portmap = "builtin";
	cur.is_extra[0] = "--portmap-port";
	cur.is_extra[1] = pmport;
	if (it_server_start(&cur) != 0) {
		it_server_cleanup(&cur);
		fail_msg("the server did not start with --portmap builtin --portmap-port %d", port);
	}
	c = it_clnt(IPPROTO_UDP, PMAPPROG, PMAPVERS, port);
	if (it_call(c, PMAPPROC_NULL, (xdrproc_t)it_xdr_void, NULL, (xdrproc_t)it_xdr_void,
		    NULL) != RPC_SUCCESS)
		fail_msg("the built-in portmapper on port %d does not answer over UDP (no --udp): "
			 "a rebooted client's sm-notify could not find NSM; it must listen on UDP "
			 "while locking is served", port);
	nsm = t_getport(c, 100024, 1, IPPROTO_UDP);
	nlm = t_getport(c, 100021, 4, IPPROTO_TCP);
	it_clnt_destroy(c);
	assert_int_not_equal(nlm, 0);
	assert_int_equal(nsm, nlm);
	assert_int_equal(it_server_stop(&cur), 0);
	it_server_cleanup(&cur);
}

/* A failed test leaves its server (or rpcbind) behind: stop them before the next test. */
static int after_each(void **state)
{
	(void)state;
	it_server_cleanup(&cur);
	memset(&cur, 0, sizeof(cur));
	rpcbind_stop();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_with_rpcbind, after_each),
		cmocka_unit_test_teardown(test_builtin_portmapper, after_each),
		cmocka_unit_test_teardown(test_auto_without_rpcbind, after_each),
		cmocka_unit_test_teardown(test_builtin_udp_for_nsm, after_each),
	};
	int rc = cmocka_run_group_tests_name("portmapper", tests, NULL, NULL);

	rpcbind_stop();
	return rc;
}
