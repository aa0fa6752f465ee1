# Host-side helpers of the tests that boot VMs from the netboot root with qemu's -kernel and
# -initrd (tests/e2e/test_netboot.sh, test_base_rollout.sh), sourced by bash after
# tests/e2e/lib.sh and e2e_init:
#
#   NB_NS=nb NB_NET=10.213       # namespace name part and /16 of this test (unique per test)
#   source tests/e2e/netboot/lib.sh
#   trap nb_cleanup EXIT         # after e2e_init: also stops a VM and removes the namespaces
#   nb_initrd_ready
#   nb_ns_up 1                   # namespace unfs-nb1: host 10.213.1.1, the VM's qemu 10.213.1.2
#   nb_boot 1 PHASE              # boots VM 1 from 10.213.1.1:/union with netboot.phase=PHASE
#
# Distinct client addresses: each VM's qemu runs in its own network namespace, joined to the
# host by a veth pair (host side NET.N.1, namespace side NET.N.2). The guest mounts from
# NET.N.1; qemu's user networking makes the connection from inside the namespace, so the
# server sees the client as NET.N.2. Traffic never leaves this host.

NB_DIR=$E2E_HERE/netboot
NB_VM=$BUILD/e2e/netboot
NB_NETS=()
NB_QEMU=
NB_NFSOPTS=${NB_NFSOPTS:-}     # more mount options for the root, e.g. ,lookupcache=none
NB_CONSOLE_IN=${NB_CONSOLE_IN:-/dev/null} # the VMs' serial input

# nb_ns_up N: namespace unfs-$NB_NS$N with veth unfs$NB_NS${N}h (host, $NB_NET.N.1) <->
# unfs$NB_NS${N}n ($NB_NET.N.2)
nb_ns_up() {
	local n=$1 ns=unfs-$NB_NS$1 veth=unfs$NB_NS$1
	nb_ns_down "$n"
	NB_NETS+=("$n")
	ip netns add "$ns" &&
		ip link add "${veth}h" type veth peer name "${veth}n" &&
		ip link set "${veth}n" netns "$ns" &&
		ip addr add "$NB_NET.$n.1/24" dev "${veth}h" &&
		ip link set "${veth}h" up &&
		ip netns exec "$ns" ip link set lo up &&
		ip netns exec "$ns" ip addr add "$NB_NET.$n.2/24" dev "${veth}n" &&
		ip netns exec "$ns" ip link set "${veth}n" up ||
		e2e_fail "cannot make network namespace $ns with a veth pair (needs root and iproute2; is $NB_NET.$n.0/24 free?)"
}

nb_ns_down() { # deleting the namespace deletes its end of the veth, and with it the pair
	ip link del "unfs$NB_NS${1}h" 2> /dev/null
	ip netns del "unfs-$NB_NS$1" 2> /dev/null
	return 0
}

nb_cleanup() {
	local n
	[ -z "$NB_QEMU" ] || kill "$NB_QEMU" 2> /dev/null
	for n in "${NB_NETS[@]}"; do nb_ns_down "$n"; done
	e2e_cleanup
}

nb_initrd_ready() {
	command -v ip > /dev/null || e2e_fail "ip is missing; run deploy/install-deps (package iproute2)"
	e2e_initrd_ready "$NB_DIR/build-initrd" "$NB_VM"
}

# nb_boot_start N PHASE: starts VM N in namespace N with its root from $NB_NET.N.1:/union
# in the background ($NB_QEMU), its console in $NB_LOG
nb_boot_start() {
	local n=$1 phase=$2
	NB_LOG=$work/console-$n-$phase.log
	NB_T0=$(date +%s.%N)
	ip netns exec "unfs-$NB_NS$n" timeout --foreground -k 5 120 qemu-system-x86_64 \
		-machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" -m 512 -smp 1 \
		-nographic -no-reboot -nodefaults -serial stdio \
		-kernel "$NB_VM/vmlinuz" -initrd "$NB_VM/initrd.cpio.gz" \
		-append "console=ttyS0 panic=-1 quiet nfsroot=$NB_NET.$n.1:/union,port=$E2E_PORT,mountport=$E2E_MPORT$NB_NFSOPTS netboot.phase=$phase" \
		-netdev user,id=n0,restrict=off -device virtio-net-pci,netdev=n0 \
		< "$NB_CONSOLE_IN" > "$NB_LOG" 2>&1 &
	NB_QEMU=$!
}

# nb_boot_end N PHASE: waits for the VM of nb_boot_start and collects its RESULT rows; a
# boot that does not reach the end of its phase fails a row
nb_boot_end() {
	local n=$1 phase=$2 rc
	wait "$NB_QEMU"
	rc=$?
	NB_QEMU=
	tr -d '\r' < "$NB_LOG" | grep -E '^(RESULT|NETBOOT|netboot:)' | sed "s/^/client $n: /"
	echo "host: VM $n ($phase) ran $(awk -v a="$NB_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, qemu status $rc"
	tr -d '\r' < "$NB_LOG" | grep '^RESULT ' | sed "s/^RESULT \([^ ]*\) /RESULT c${n}_\1 /" >> "$work/vm.out"
	E2E_FAILED=$((E2E_FAILED + $(tr -d '\r' < "$NB_LOG" | grep -c '^RESULT .* FAIL')))
	# grep reads a file, not a pipe: with pipefail, grep -q ending early would fail tr
	if ! grep -q "^NETBOOT done: phase '$phase'" <(tr -d '\r' < "$NB_LOG"); then
		e2e_result "c${n}_boot" "$phase" 0 "the VM did not finish its phase (qemu status $rc); console tail: $(tail -5 "$NB_LOG" | tr -d '\r' | tr '\n' ' ')"
	fi
}

# nb_boot N PHASE: boots VM N through PHASE to its power-off
nb_boot() {
	nb_boot_start "$1" "$2"
	nb_boot_end "$1" "$2"
}
