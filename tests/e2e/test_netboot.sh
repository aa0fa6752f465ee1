#!/bin/bash
# The proof of the netboot use: a qemu VM boots from the union. The lower branch is a small
# busybox root file system (tests/e2e/netboot/build-rootfs); the VM's initramfs
# (tests/e2e/netboot/build-initrd) mounts / over NFSv3/TCP from unionnfsd and switch_roots
# into it; the root's /sbin/init runs one phase, prints RESULT rows on the console and
# powers off:
#   boot 1, phase write:    sees the base, writes /etc and /var, deletes a base file
#   boot 2, phase changed:  the same client sees its changes after a fresh boot
# With per-client upper branches (the default; the export option upper=/path/%h, layers
# named by the --hosts map: 10.213.1.2 is lab01, 10.213.2.2 is lab02):
#   boot 3, VM 2 from another address, phase pristine: sees the base, none of VM 1's changes
#   unionnfsd-ctl reset is refused while client 1 counts as mounted, reset --force
#   discards its layer; boot 4, VM 1, phase pristine
# With one shared upper (NETBOOT_SHARED=1):
#   boot 3, VM 2 from another address, admitted read-only by the rules: cannot write
# The host checks that the lower is byte-for-byte unchanged and that client 1's changes
# sit in its upper (a whiteout for the deleted file).
#
# Distinct client addresses: each VM's qemu runs in its own network namespace, joined to
# the host by a veth pair (host side 10.213.N.1, namespace side 10.213.N.2). The guest
# mounts from 10.213.N.1; qemu's user networking makes the connection from inside the
# namespace, so the server sees the client as 10.213.N.2. Traffic never leaves this host.
#
# Ports 14061 (NFS) and 14062 (MOUNT), no portmapper. Needs root (network namespaces,
# no_root_squash root), qemu-system-x86, a kernel in /boot with its modules, busybox-static,
# cpio and iproute2: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

NB_DIR=$E2E_HERE/netboot
NB_VM=$BUILD/e2e/netboot
NB_NETS=()

# nb_ns_up N: namespace unfs-nbN with veth unfsnbNh (host, 10.213.N.1) <-> unfsnbNn (10.213.N.2)
nb_ns_up() {
	local n=$1 ns=unfs-nb$1
	nb_ns_down "$n"
	NB_NETS+=("$n")
	ip netns add "$ns" &&
		ip link add "unfsnb${n}h" type veth peer name "unfsnb${n}n" &&
		ip link set "unfsnb${n}n" netns "$ns" &&
		ip addr add "10.213.$n.1/24" dev "unfsnb${n}h" &&
		ip link set "unfsnb${n}h" up &&
		ip netns exec "$ns" ip link set lo up &&
		ip netns exec "$ns" ip addr add "10.213.$n.2/24" dev "unfsnb${n}n" &&
		ip netns exec "$ns" ip link set "unfsnb${n}n" up ||
		e2e_fail "cannot make network namespace $ns with a veth pair (needs root and iproute2; is 10.213.$n.0/24 free?)"
}

nb_ns_down() { # deleting the namespace deletes its end of the veth, and with it the pair
	ip link del "unfsnb${1}h" 2> /dev/null
	ip netns del "unfs-nb$1" 2> /dev/null
	return 0
}

nb_cleanup() {
	local n
	for n in "${NB_NETS[@]}"; do nb_ns_down "$n"; done
	e2e_cleanup
}

nb_initrd_ready() {
	command -v ip > /dev/null || e2e_fail "ip is missing; run deploy/install-deps (package iproute2)"
	e2e_initrd_ready "$NB_DIR/build-initrd" "$NB_VM"
}

# nb_boot N PHASE: boots a VM in namespace N with its root from 10.213.N.1:/union and
# collects its RESULT rows; a boot that does not reach the end of its phase fails a row
nb_boot() {
	local n=$1 phase=$2 log t0 rc
	log=$work/console-$n-$phase.log
	t0=$(date +%s.%N)
	ip netns exec "unfs-nb$n" timeout --foreground -k 5 120 qemu-system-x86_64 \
		-machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" -m 512 -smp 1 \
		-nographic -no-reboot -nodefaults -serial stdio \
		-kernel "$NB_VM/vmlinuz" -initrd "$NB_VM/initrd.cpio.gz" \
		-append "console=ttyS0 panic=-1 quiet nfsroot=10.213.$n.1:/union,port=$E2E_PORT,mountport=$E2E_MPORT netboot.phase=$phase" \
		-netdev user,id=n0,restrict=off -device virtio-net-pci,netdev=n0 \
		< /dev/null > "$log" 2>&1
	rc=$?
	tr -d '\r' < "$log" | grep -E '^(RESULT|NETBOOT|netboot:)' | sed "s/^/client $n: /"
	echo "host: VM $n ($phase) ran $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, qemu status $rc"
	tr -d '\r' < "$log" | grep '^RESULT ' | sed "s/^RESULT \([^ ]*\) /RESULT c${n}_\1 /" >> "$work/vm.out"
	E2E_FAILED=$((E2E_FAILED + $(tr -d '\r' < "$log" | grep -c '^RESULT .* FAIL')))
	# grep reads a file, not a pipe: with pipefail, grep -q ending early would fail tr
	if ! grep -q "^NETBOOT done: phase '$phase'" <(tr -d '\r' < "$log"); then
		e2e_result "c${n}_boot" "$phase" 0 "the VM did not finish its phase (qemu status $rc); console tail: $(tail -5 "$log" | tr -d '\r' | tr '\n' ' ')"
	fi
}

e2e_init netboot 14061 14062
trap nb_cleanup EXIT
nb_initrd_ready
: > "$work/vm.out"

L=$work/lower
"$NB_DIR/build-rootfs" "$L" || e2e_fail "tests/e2e/netboot/build-rootfs failed"
e2e_tree_manifest "$L" > "$work/lower_unchanged.before"

nb_ns_up 1
nb_ns_up 2
# The rules name each client's address: a guest seen as 127.0.0.1 or 10.213.N.1 would
# match none and could not mount, so a boot proves the server sees the namespace's address.
if [ -z "${NETBOOT_SHARED:-}" ]; then
	# Per-client upper branches named by host name: the export lists only the base; each
	# client gets $work/clients/<its name in the hosts map>, made on its first mount.
	# (tests/e2e/test_pxe.sh boots with upper=.../%a.)
	NB_MODE=per-client
	CL=$work/clients
	mkdir -p "$CL"
	printf '# the lab\n10.213.1.2 lab01\n10.213.2.2 lab02\n' > "$work/hosts"
	E2E_EXPORTS+=(--hosts "$work/hosts" -e "/union=$L"
		--client "10.213.1.2(rw,no_root_squash,insecure,upper=$CL/%h)"
		--client "10.213.2.2(rw,no_root_squash,insecure,upper=$CL/%h)")
else
	# NETBOOT_SHARED=1: all clients share one upper, so the second client is admitted
	# read-only instead of booting its own pristine view.
	NB_MODE=shared
	U=$work/upper
	mkdir -p "$U"
	E2E_EXPORTS+=(-e "/union=$U:$L" --client "10.213.1.2(rw,no_root_squash,insecure)"
		--client "10.213.2.2(ro,no_root_squash,insecure)")
fi
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union over a busybox root ($NB_MODE uppers)"

nb_boot 1 write
nb_boot 1 changed
if [ $NB_MODE = per-client ]; then
	nb_boot 2 pristine
	U=$CL/lab01
	e2e_netboot_upper_checks "$U"
	if [ ! -d "$CL/lab02" ]; then
		e2e_result upper2_clean host 0 "client 2's upper $CL/lab02 (named by the hosts map) was not made"
	elif [ -e "$CL/lab02/etc/netboot-marker" ] || [ -e "$CL/lab02/etc/base-only" ]; then
		e2e_result upper2_clean host 0 "client 2's upper holds etc/netboot-marker or etc/base-only"
	else
		e2e_result upper2_clean host 1
	fi
	echo "---- client 1's upper branch before the reset ----"
	(cd "$U" && find . -printf '%y %m %s %p\n' | sort -k4)
	CTL=$BUILD/unionnfsd-ctl
	# A powered-off NFS-root client never unmounts, so the server still counts its mount
	# and must refuse a plain reset: then --force, which this case is for.
	"$CTL" --state "$state" reset lab01 > "$work/reset.out" 2>&1
	rc=$?
	echo "host: unionnfsd-ctl reset lab01 (status $rc): $(head -2 "$work/reset.out" | tr '\n' ' ')"
	if [ $rc = 1 ] && grep -q "mounted" "$work/reset.out"; then
		e2e_result reset_refused_while_mounted host 1
	else
		e2e_result reset_refused_while_mounted host 0 "status $rc: $(head -1 "$work/reset.out")"
	fi
	"$CTL" --state "$state" reset lab01 --force > "$work/reset.out" 2>&1
	rc=$?
	echo "host: unionnfsd-ctl reset lab01 --force (status $rc): $(head -2 "$work/reset.out" | tr '\n' ' ')"
	if [ $rc = 0 ] && [ ! -e "$U" ]; then
		e2e_result reset host 1
		nb_boot 1 pristine
	else
		e2e_result reset host 0 "status $rc: $(head -1 "$work/reset.out")"
	fi
	e2e_stop_server
else
	nb_boot 2 readonly
	e2e_stop_server
	e2e_netboot_upper_checks "$U"
fi

e2e_unchanged lower_unchanged "$L"
e2e_finish
