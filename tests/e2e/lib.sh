# Shared host-side helpers of the union end-to-end tests (tests/e2e/test_union_*.sh), sourced
# by bash. Each test runs its own server on its own fixed ports with the portmapper off, so
# it never collides with test_kernel_client.sh (2049/20048/111) or with another union test:
#
#   source tests/e2e/lib.sh
#   e2e_init NAME NFS_PORT MOUNT_PORT   # checks prerequisites, makes $work and $share
#   ... prepare branches ...
#   e2e_export /union UP:L1:L2                   # any number of exports
#   e2e_start_server
#   e2e_run_vm tests/e2e/guest_union_x.sh 300    # serves restart requests while it runs
#   e2e_stop_server
#   e2e_finish                                   # sanitizer check, result summary, exit
#
# The guest side is tests/e2e/guest_union_lib.sh (copied to the share with $share/env.sh,
# which tells the guest the ports). A guest asks for a server restart by creating
# /host/restart-request.N; the host stops the server with SIGTERM (it must exit 0), starts
# it on the same state directory and answers with /host/restart-done.N. Likewise
# /host/hook-request.NAME runs the test's function e2e_hook_NAME on the host, then
# /host/hook-done.NAME appears.
#
# Results: every check reports "RESULT <row> <phase> PASS|FAIL <symptom>"; the host adds
# its own rows with e2e_result. The test fails when any row failed.

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$E2E_ROOT" || exit 1
BUILD=${BUILD:-build}
E2E_HERE=tests/e2e
E2E_BIN=$BUILD/unionnfsd
E2E_VM=$BUILD/e2e/vm
E2E_EXPORTS=()
E2E_FAILED=0
srv=
work=

e2e_fail() {
	echo "FAIL: $*"
	if [ -n "$work" ] && [ -f "$work/server.log" ]; then
		echo "---- server log (tail) ----"
		tail -n 40 "$work/server.log"
	fi
	exit 1
}

e2e_cleanup() {
	if [ -n "$srv" ] && kill -0 "$srv" 2> /dev/null; then
		kill -KILL "$srv" 2> /dev/null
		wait "$srv" 2> /dev/null
	fi
	if [ -n "$work" ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$work"
	elif [ -n "$work" ]; then
		echo "kept $work (KEEP is set)"
	fi
}

# e2e_result ROW PHASE OK [SYMPTOM]: a host-side row in the same format as the guest's
e2e_result() {
	local line="RESULT $1 $2 PASS"
	if [ "$3" != 1 ]; then
		line="RESULT $1 $2 FAIL ${4:-}"
		E2E_FAILED=$((E2E_FAILED + 1))
	fi
	echo "$line" | tee -a "$work/host.results"
}

e2e_port_busy() { # is anything listening on TCP port $1?
	(exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}

# e2e_vm_ready: checks what booting the VM needs and builds the VM image when it is
# missing or stale (also used without e2e_init, e.g. by tests/bench/kernel-bench.sh)
e2e_vm_ready() {
	local kver
	command -v qemu-system-x86_64 > /dev/null ||
		e2e_fail "qemu-system-x86_64 is missing; run deploy/install-deps (package qemu-system-x86)"
	kver=$(ls /lib/modules 2> /dev/null | sort -V | tail -1)
	[ -n "$kver" ] && [ -r "/boot/vmlinuz-$kver" ] ||
		e2e_fail "no kernel in /boot with modules in /lib/modules; run deploy/install-deps (package linux-image-amd64)"
	[ -x /bin/busybox ] || e2e_fail "/bin/busybox is missing; run deploy/install-deps (package busybox-static)"
	command -v cpio > /dev/null || e2e_fail "cpio is missing; run deploy/install-deps"
	e2e_initrd_ready "$E2E_HERE/build-initrd" "$E2E_VM"
}

# e2e_initrd_ready BUILDER OUTDIR: runs BUILDER OUTDIR (a build-initrd script) unless
# OUTDIR/initrd.cpio.gz exists, was built for the newest kernel in /lib/modules and is
# newer than BUILDER
e2e_initrd_ready() {
	local kver
	kver=$(ls /lib/modules 2> /dev/null | sort -V | tail -1)
	if [ ! -r "$2/initrd.cpio.gz" ] || [ "$(cat "$2/kernel-version" 2> /dev/null)" != "$kver" ] ||
		[ "$1" -nt "$2/initrd.cpio.gz" ]; then
		echo "building the VM image in $2"
		"$1" "$2" > /dev/null || e2e_fail "$1 failed"
	fi
}

# e2e_init NAME NFS_PORT MOUNT_PORT
e2e_init() {
	local p
	E2E_NAME=$1
	E2E_PORT=$2
	E2E_MPORT=$3
	trap e2e_cleanup EXIT
	e2e_vm_ready
	command -v gcc > /dev/null || e2e_fail "gcc is missing; run deploy/install-deps (package build-essential)"
	[ -x "$E2E_BIN" ] || e2e_fail "$E2E_BIN is missing; run make"
	[ "$(id -u)" = 0 ] || e2e_fail "needs root (whiteouts are character devices, opaque markers trusted.* xattrs)"
	for p in "$E2E_PORT" "$E2E_MPORT"; do
		e2e_port_busy "$p" &&
			e2e_fail "port $p is in use (another run of $E2E_NAME?); stop it first"
	done
	e2e_build_tool
	work=$(mktemp -d /tmp/unfs-$E2E_NAME.XXXXXX)
	chmod 755 "$work"
	share=$work/share
	state=$work/state
	mkdir -p "$share"
	cp "$E2E_HERE/guest_union_lib.sh" "$share/lib.sh"
	cp "$E2E_TOOL" "$share/uxattr"
	cat > "$share/env.sh" <<-EOF
		NFS_PORT=$E2E_PORT
		MOUNT_PORT=$E2E_MPORT
	EOF
}

# The branches need character devices and trusted.* xattrs set and read byte for byte, on
# the host and in the guest, and neither has getfattr/setfattr (package attr) for sure:
# a small static helper does it. It never follows symlinks.
#   uxattr get PATH NAME          prints the value; status 1 when the xattr is absent
#   uxattr set PATH NAME VALUE
#   uxattr hexget PATH NAME       the value in hex
#   uxattr hexset PATH NAME HEX
#   uxattr list PATH              one name per line
#   uxattr whiteout PATH          makes the character device 0/0 (an overlayfs whiteout)
#   uxattr runas UID GID CMD...   runs CMD with that identity and no supplementary groups
e2e_build_tool() {
	mkdir -p "$BUILD/e2e"
	E2E_TOOL=$(cd "$BUILD/e2e" && pwd)/uxattr
	[ -x "$E2E_TOOL" ] && [ "$E2E_TOOL" -nt "$E2E_HERE/lib.sh" ] && return 0
	gcc -std=gnu11 -O1 -Wall -Werror -static -x c -o "$E2E_TOOL.tmp" - <<-'EOF' ||
		#include <errno.h>
		#include <grp.h>
		#include <stdio.h>
		#include <stdlib.h>
		#include <string.h>
		#include <sys/stat.h>
		#include <sys/sysmacros.h>
		#include <sys/xattr.h>
		#include <unistd.h>
		int main(int argc, char **argv)
		{
			char buf[65536];
			ssize_t n, i;
			if (argc == 4 && !strcmp(argv[1], "get")) {
				n = lgetxattr(argv[2], argv[3], buf, sizeof(buf));
				if (n < 0)
					return errno == ENODATA ? 1 : (perror(argv[2]), 2);
				fwrite(buf, 1, n, stdout);
				return 0;
			}
			if (argc == 5 && !strcmp(argv[1], "set")) {
				if (lsetxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0) < 0)
					return perror(argv[2]), 2;
				return 0;
			}
			if (argc == 4 && !strcmp(argv[1], "hexget")) {
				n = lgetxattr(argv[2], argv[3], buf, sizeof(buf));
				if (n < 0)
					return errno == ENODATA ? 1 : (perror(argv[2]), 2);
				for (i = 0; i < n; i++)
					printf("%02x", (unsigned char)buf[i]);
				putchar('\n');
				return 0;
			}
			if (argc == 5 && !strcmp(argv[1], "hexset")) {
				for (n = 0; argv[4][2 * n] && argv[4][2 * n + 1] && n < (ssize_t)sizeof(buf); n++) {
					unsigned v;
					if (sscanf(argv[4] + 2 * n, "%2x", &v) != 1)
						return fprintf(stderr, "uxattr: bad hex value\n"), 2;
					buf[n] = (char)v;
				}
				if (lsetxattr(argv[2], argv[3], buf, n, 0) < 0)
					return perror(argv[2]), 2;
				return 0;
			}
			if (argc == 3 && !strcmp(argv[1], "list")) {
				n = llistxattr(argv[2], buf, sizeof(buf));
				if (n < 0)
					return perror(argv[2]), 2;
				for (i = 0; i < n; i += strlen(buf + i) + 1)
					puts(buf + i);
				return 0;
			}
			if (argc >= 5 && !strcmp(argv[1], "runas")) {
				if (setgroups(0, NULL) < 0 || setgid(atoi(argv[3])) < 0 ||
				    setuid(atoi(argv[2])) < 0)
					return perror("runas"), 2;
				execvp(argv[4], argv + 4);
				return perror(argv[4]), 127;
			}
			if (argc == 3 && !strcmp(argv[1], "whiteout")) {
				if (mknod(argv[2], S_IFCHR | 0, makedev(0, 0)) < 0)
					return perror(argv[2]), 2;
				return 0;
			}
			fprintf(stderr, "usage: uxattr get|hexget PATH NAME | set|hexset PATH NAME VALUE | list PATH | whiteout PATH | runas UID GID CMD...\n");
			return 2;
		}
	EOF
		e2e_fail "cannot build the xattr helper with gcc -static; run deploy/install-deps (build-essential)"
	mv "$E2E_TOOL.tmp" "$E2E_TOOL"
}

# e2e_export NAME BRANCHES [OPTIONS]: one more export (the guest is root and its ports are
# high), with more export options if given
e2e_export() {
	E2E_EXPORTS+=(-e "$1=$2" -o "no_root_squash,insecure${3:+,$3}")
}

e2e_start_server() {
	"$E2E_BIN" -f --port "$E2E_PORT" --mount-port "$E2E_MPORT" --portmap off --state "$state" \
		"${E2E_EXPORTS[@]}" >> "$work/server.log" 2>&1 &
	srv=$!
	# (rpcinfo -n still asks a portmapper first, and there is none here)
	e2e_await_server e2e_port_busy 127.0.0.1
}

# e2e_await_server PROBE WHERE: waits up to 30 s until PROBE PORT succeeds for both ports of
# the server just started as $srv (listening on WHERE); fails the test if it exits first
e2e_await_server() {
	local i
	for i in $(seq 1 150); do
		kill -0 "$srv" 2> /dev/null || { wait "$srv"; e2e_fail "the server exited at start-up (status $?)"; }
		if "$1" "$E2E_PORT" && "$1" "$E2E_MPORT"; then
			return 0
		fi
		sleep 0.2
	done
	e2e_fail "the server did not answer on $2 ports $E2E_PORT/$E2E_MPORT within 30 s"
}

e2e_stop_server() {
	local rc i
	[ -n "$srv" ] || return 0
	kill -TERM "$srv"
	for i in $(seq 1 200); do
		kill -0 "$srv" 2> /dev/null || break
		sleep 0.1
	done
	kill -0 "$srv" 2> /dev/null && e2e_fail "the server did not exit within 20 s of SIGTERM"
	wait "$srv"
	rc=$?
	srv=
	[ $rc = 0 ] || e2e_fail "the server exited with status $rc after SIGTERM, want 0"
}

# e2e_run_vm GUEST_SCRIPT TIMEOUT: boots the VM, serves the guest's restart requests, prints
# the guest's log; E2E_VMRC gets the guest script's status and E2E_RESTARTS the count.
e2e_run_vm() {
	local vmpid t0 req n
	t0=$(date +%s.%N)
	"$E2E_HERE/run-in-vm" "$E2E_VM" "$share" "$1" "$2" > "$work/vm.out" 2>&1 &
	vmpid=$!
	E2E_RESTARTS=0
	while kill -0 "$vmpid" 2> /dev/null; do
		for req in "$share"/hook-request.*; do
			[ -e "$req" ] || continue
			n=${req##*/hook-request.}
			[ -e "$share/hook-done.$n" ] && continue
			echo "host: the guest asks for e2e_hook_$n"
			"e2e_hook_$n"
			touch "$share/hook-done.$n"
		done
		for req in "$share"/restart-request.*; do
			[ -e "$req" ] || continue
			n=${req##*.}
			[ -e "$share/restart-done.$n" ] && continue
			echo "host: restart $n of the server (the guest has it mounted)"
			e2e_stop_server
			e2e_start_server
			E2E_RESTARTS=$((E2E_RESTARTS + 1))
			touch "$share/restart-done.$n"
		done
		sleep 0.2
	done
	wait "$vmpid"
	E2E_VMRC=$?
	cat "$work/vm.out"
	echo "host: VM ran $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
	grep -q '^RESULT ' "$work/vm.out" || e2e_fail "the guest reported no results (status $E2E_VMRC)"
	E2E_FAILED=$((E2E_FAILED + $(grep -c '^RESULT .* FAIL' "$work/vm.out")))
	if [ "$E2E_VMRC" != 0 ] && ! grep -q '^RESULT .* FAIL' "$work/vm.out"; then
		e2e_result guest-script end 0 "the guest script failed (status $E2E_VMRC) without a failed row"
	fi
}

# e2e_tree_manifest DIR: every entry with type, mode, owner, size, all times but atime,
# link count, device numbers, symlink target, content checksum and xattrs (in hex: ACLs are
# binary), so that any change to a branch shows.
e2e_tree_manifest() {
	local p
	(cd "$1" && find . -printf '%p %y %m %U:%G %s %n %T@ %C@\n' | sort)
	(cd "$1" && find . -type f -print0 | sort -z | xargs -0r md5sum)
	(cd "$1" && find . -type l -printf '%p -> %l\n' | sort)
	(cd "$1" && find . -type c -printf '%p\n' | sort | while read -r p; do
		echo "$p $(stat -c '%t:%T' "$p")"
	done)
	(cd "$1" && find . -print | sort | while read -r p; do
		"$E2E_TOOL" list "$p" | sort | while read -r x; do
			[ -n "$x" ] && echo "$p xattr $x=$("$E2E_TOOL" hexget "$p" "$x")"
		done
	done)
}

# e2e_unchanged NAME DIR: a result row NAME saying whether DIR still matches the manifest
# taken into $work/NAME.before
e2e_unchanged() {
	e2e_tree_manifest "$2" > "$work/$1.after"
	if diff "$work/$1.before" "$work/$1.after" > "$work/$1.diff"; then
		e2e_result "$1" host 1
	else
		e2e_result "$1" host 0 "${2#"$work/"} changed: $(head -4 "$work/$1.diff" | tr '\n' ' ')"
	fi
}

# e2e_netboot_upper_checks DIR: the changes of the netboot root's write phase
# (tests/e2e/netboot/build-rootfs), as the host sees them in the client's upper branch DIR
e2e_netboot_upper_checks() {
	if e2e_is_whiteout "$1/etc/base-only"; then
		e2e_result upper_whiteout host 1
	else
		e2e_result upper_whiteout host 0 "${1#"$work/"}/etc/base-only is $(stat -c '%F' "$1/etc/base-only" 2>&1), want a whiteout"
	fi
	[ "$(cat "$1/etc/netboot-marker" 2>&1)" = client-marker ]
	e2e_result upper_marker host $((! $?)) "${1#"$work/"}/etc/netboot-marker: $(cat "$1/etc/netboot-marker" 2>&1)"
	[ "$(cat "$1/var/lib/netboot/state" 2>&1)" = "state 1" ]
	e2e_result upper_var host $((! $?)) "${1#"$work/"}/var/lib/netboot/state: $(cat "$1/var/lib/netboot/state" 2>&1)"
}

# e2e_is_whiteout PATH: a character device 0/0
e2e_is_whiteout() {
	[ -c "$1" ] && [ ! -L "$1" ] && [ "$(stat -c '%t:%T' "$1")" = 0:0 ]
}

# e2e_is_opaque DIR: the overlayfs opaque marker (trusted or, unprivileged, user namespace)
e2e_is_opaque() {
	[ -d "$1" ] || return 1
	[ "$("$E2E_TOOL" get "$1" trusted.overlay.opaque 2> /dev/null)" = y ] ||
		[ "$("$E2E_TOOL" get "$1" user.overlay.opaque 2> /dev/null)" = y ]
}

e2e_finish() {
	e2e_stop_server
	if grep -E "AddressSanitizer|LeakSanitizer|runtime error:" "$work/server.log"; then
		e2e_result sanitizers end 0 "sanitizer report in the server log"
	fi
	echo "---- summary of $E2E_NAME ----"
	grep -h '^RESULT ' "$work/vm.out" "$work/host.results" 2> /dev/null
	if [ "$E2E_FAILED" -gt 0 ]; then
		echo "FAIL: $E2E_NAME: $E2E_FAILED failed row checks"
		exit 1
	fi
	echo "PASS: $E2E_NAME"
	exit 0
}
