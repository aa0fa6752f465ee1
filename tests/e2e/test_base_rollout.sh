#!/bin/bash
# The roll-out of a new base image to diskless clients, end to end: qemu VMs boot their root
# over NFS from an export with per-client uppers (upper=.../%h, names from the --hosts map:
# 10.216.1.2 is lab01, 10.216.2.2 is lab02), and the admin publishes base v2 by editing the
# export's branch in the config file and sending SIGHUP. The root is the netboot busybox
# root (tests/e2e/netboot/build-rootfs, whose /sbin/init runs the rollout-* phases) plus a
# few files in /etc; v2 is a copy of v1 with one file changed, one added, one removed, and
# /etc/rollout-both changed, which client 1 changes too.
#   boot 1, VM 1, rollout-hold:  sees v1, writes rollout-both and rollout-own, then waits on
#                                its console; the host publishes v2 meanwhile (log: "has a
#                                new base"; conflicts lab01 lists rollout-both) and answers
#                                "published"; the client still sees v1 under its changes
#   boot 2, VM 1, rollout-moved: its next mount: v2 under its own changes;
#                                conflicts lab01 --json lists exactly rollout-both;
#                                take-base lab01 /etc/rollout-both
#   boot 3, VM 1, rollout-took:  v2's rollout-both, its own rollout-own kept
#   boot 4, VM 2, rollout-fresh: v2, none of VM 1's changes
# The host checks that v1 and v2 stay byte-for-byte unchanged (names, contents, modes,
# owners, times, xattrs).
#
# The console is the only channel to a running guest here (its root is the union, and a
# file the host puts in v2 must not show in it): qemu's serial input is a FIFO the host
# writes the answer into when the guest says it waits.
#
# Each VM's qemu runs in its own network namespace (tests/e2e/netboot/lib.sh), so the server
# sees VM N as 10.216.N.2. Ports 14081 (NFS) and 14082 (MOUNT), no portmapper. Needs
# root, qemu-system-x86, a kernel in /boot with its modules, busybox-static, cpio and
# iproute2: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

NB_NS=br NB_NET=10.216 NB_NFSOPTS=,lookupcache=none
source "$E2E_HERE/netboot/lib.sh"
CTL=$BUILD/unionnfsd-ctl

# br_await FILE TEXT SECONDS WHAT: waits until FILE has a line with TEXT while the VM runs
br_await() {
	local i
	for i in $(seq 1 $(($3 * 5))); do
		grep -qF -- "$2" "$1" 2> /dev/null && return 0
		[ -n "$NB_QEMU" ] && ! kill -0 "$NB_QEMU" 2> /dev/null && return 1
		sleep 0.2
	done
	echo "host: no '$2' in ${1#"$work/"} within $3 s ($4)"
	return 1
}

# br_config BASE: the config file with /union over BASE
br_config() {
	cat > "$work/unionnfsd.conf.tmp" <<-EOF
		hosts $work/hosts
		export /union $1 10.216.1.2(rw,no_root_squash,insecure,upper=$CL/%h) 10.216.2.2(rw,no_root_squash,insecure,upper=$CL/%h)
	EOF
	mv "$work/unionnfsd.conf.tmp" "$work/unionnfsd.conf"
}

# br_conflicts ROW WANT: a row saying whether conflicts lab01 --json prints exactly WANT
br_conflicts() {
	local got rc
	got=$("$CTL" --state "$state" conflicts lab01 --json 2>&1)
	rc=$?
	echo "host: unionnfsd-ctl conflicts lab01 --json (status $rc): $got"
	[ $rc = 0 ] && [ "$got" = "$2" ]
	e2e_result "$1" host $((! $?)) "status $rc, got '$got', want '$2'"
}

e2e_init base-rollout 14081 14082
trap nb_cleanup EXIT
nb_initrd_ready
[ -x "$CTL" ] || e2e_fail "$CTL is missing; run make"
: > "$work/vm.out"
NB_CONSOLE_IN=$work/console-in
mkfifo "$NB_CONSOLE_IN" || e2e_fail "cannot make the FIFO $NB_CONSOLE_IN"
# read-write, so that opening it never blocks and qemu never reads end-of-file
exec 7<> "$NB_CONSOLE_IN"

V1=$work/base-v1
V2=$work/base-v2
CL=$work/clients
"$NB_DIR/build-rootfs" "$V1" || e2e_fail "tests/e2e/netboot/build-rootfs failed"
echo "v1 changed" > "$V1/etc/rollout-changed"
echo "v1 removed" > "$V1/etc/rollout-removed"
echo "v1 both" > "$V1/etc/rollout-both"
e2e_tree_manifest "$V1" > "$work/base_v1_unchanged.before"
mkdir -p "$CL"
printf '# the lab\n10.216.1.2 lab01\n10.216.2.2 lab02\n' > "$work/hosts"
br_config "$V1"
nb_ns_up 1
nb_ns_up 2
E2E_EXPORTS+=(-c "$work/unionnfsd.conf")
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union over base v1, uppers $CL/%h"

# boot 1: VM 1 on v1; v2 is made and published while it runs
nb_boot_start 1 rollout-hold
if br_await "$NB_LOG" "NETBOOT waiting for the host" 100 "VM 1 changing /etc on base v1"; then
	cp -a "$V1" "$V2"
	echo "v2 changed" > "$V2/etc/rollout-changed"
	echo "v2 both" > "$V2/etc/rollout-both"
	echo "v2 added" > "$V2/etc/rollout-added"
	rm "$V2/etc/rollout-removed"
	e2e_tree_manifest "$V2" > "$work/base_v2_unchanged.before"
	br_config "$V2"
	reloads=$(grep -c 'SIGHUP: configuration reloaded' "$work/server.log")
	kill -HUP "$srv"
	for i in $(seq 1 150); do
		[ "$(grep -c 'SIGHUP: configuration reloaded' "$work/server.log")" -gt "$reloads" ] && break
		grep -q 'SIGHUP: the new configuration has an error' "$work/server.log" && break
		sleep 0.2
	done
	grep 'reload: export /union has a new base' "$work/server.log" | sed 's/^/host: server log: /'
	grep -q 'reload: export /union has a new base' "$work/server.log"
	e2e_result reload_new_base host $((! $?)) "no 'reload: export /union has a new base' in the server log after SIGHUP: $(grep 'SIGHUP\|reload' "$work/server.log" | tail -2 | tr '\n' ' ')"
	# not moved yet: its base and the export's new one
	br_conflicts conflicts_before_move \
		'{"client":"lab01","conflicts":[{"export":"/union","path":"/etc/rollout-both","upper":"copy","base":"changed"}],"exports_compared":1}'
	echo published >&7
else
	kill "$NB_QEMU" 2> /dev/null # it would wait for the answer until its time limit
fi
nb_boot_end 1 rollout-hold

# boot 2: VM 1's next mount moves it to v2
nb_boot 1 rollout-moved
br_conflicts conflicts_after_move \
	'{"client":"lab01","conflicts":[{"export":"/union","path":"/etc/rollout-both","upper":"copy","base":"changed"}],"exports_compared":1}'
out=$("$CTL" --state "$state" take-base lab01 /etc/rollout-both 2>&1)
rc=$?
echo "host: unionnfsd-ctl take-base lab01 /etc/rollout-both (status $rc): $out"
[ $rc = 0 ] && [ ! -e "$CL/lab01/etc/rollout-both" ] && [ -e "$CL/lab01/etc/rollout-own" ]
e2e_result take_base host $((! $?)) "status $rc ($out); in lab01's upper: $(ls "$CL/lab01/etc" 2>&1 | tr '\n' ' ')"
br_conflicts conflicts_after_take_base '{"client":"lab01","conflicts":[],"exports_compared":1}'

# boot 3: VM 1 sees v2's rollout-both; boot 4: VM 2 boots v2 fresh
nb_boot 1 rollout-took
nb_boot 2 rollout-fresh
if [ -e "$CL/lab02/etc/rollout-own" ] || [ -e "$CL/lab02/etc/rollout-both" ]; then
	e2e_result upper2_clean host 0 "client 2's upper $CL/lab02 holds etc/rollout-own or etc/rollout-both"
else
	e2e_result upper2_clean host 1
fi
e2e_stop_server

e2e_unchanged base_v1_unchanged "$V1"
if [ -e "$work/base_v2_unchanged.before" ]; then
	e2e_unchanged base_v2_unchanged "$V2"
else
	e2e_result base_v2_unchanged host 0 "v2 was never made (boot 1 did not reach its wait)"
fi
e2e_finish
