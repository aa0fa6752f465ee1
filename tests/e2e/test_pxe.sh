#!/bin/bash
# The proof of the PXE path of the netboot guide (deploy/README.md sections 3 and 4): a qemu
# VM with no -kernel/-initrd boots from its NIC's PXE ROM (iPXE), gets its address by DHCP
# from dnsmasq (fixed by MAC with dhcp-host), loads PXELINUX, its configuration, the kernel
# and the initramfs by TFTP from dnsmasq, and the initramfs configures eth0 by DHCP (ip=dhcp)
# and mounts / over NFSv3/TCP from unionnfsd (nfsroot= on the kernel line PXELINUX passes).
# The lower branch is the busybox root of tests/e2e/netboot/build-rootfs; its /sbin/init
# runs one phase and prints RESULT rows on the console:
#   boot 1, pxelinux.cfg/default,             phase write: writes /etc and /var, deletes a base file
#   boot 2, pxelinux.cfg/0AD60265 (its IP in hex, which PXELINUX prefers to default),
#                                             phase changed: finds those changes
# The export gives every client its own upper, upper=$work/clients/%a, and its only client
# rule names the address dnsmasq gives the VM, so a boot proves the server saw the DHCP
# address; the host then checks that upper directory holds the guest's writes, that no
# other client directory appeared and that the lower is byte-for-byte unchanged.
#
# Network (only 10.214.0.0/16; traffic never leaves this host): namespace unfs-pxe, joined
# to the host by the veth pair unfspxeh (host, 10.214.1.1) <-> unfspxen (10.214.1.2); in the
# namespace the tap device unfspxet (10.214.2.1) for qemu, where dnsmasq serves DHCP for
# 10.214.2.0/24 and TFTP; the namespace forwards, and the host routes 10.214.2.0/24 via
# 10.214.1.2, so the guest (10.214.2.101) reaches the server on 10.214.1.1 without NAT.
#
# Ports 14071 (NFS) and 14072 (MOUNT), no portmapper (so nfsroot= names the ports). Needs
# root, qemu-system-x86 with its iPXE ROMs (ipxe-qemu), dnsmasq-base, pxelinux,
# syslinux-common, a kernel in /boot with its modules, busybox-static, cpio and iproute2:
# deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

NB_DIR=$E2E_HERE/netboot
NB_VM=$BUILD/e2e/netboot # the netboot image, shared with test_netboot.sh
PX_NS=unfs-pxe
PX_MAC=52:54:00:14:07:01
PX_GUEST=10.214.2.101
PX_SERVER=10.214.1.1
PX_PXELINUX=/usr/lib/PXELINUX/pxelinux.0
PX_LDLINUX=/usr/lib/syslinux/modules/bios/ldlinux.c32
PX_BOOT_LIMIT=${PX_BOOT_LIMIT:-150}
dnsmasq_pid=

px_net_down() { # deleting the namespace deletes the tap and its end of the veth pair
	ip route del 10.214.2.0/24 via 10.214.1.2 2> /dev/null
	ip link del unfspxeh 2> /dev/null
	ip netns del "$PX_NS" 2> /dev/null
	return 0
}

px_cleanup() {
	if [ -n "$dnsmasq_pid" ] && kill -0 "$dnsmasq_pid" 2> /dev/null; then
		kill -TERM "$dnsmasq_pid" 2> /dev/null
		wait "$dnsmasq_pid" 2> /dev/null
	fi
	px_net_down
	e2e_cleanup
}

px_net_up() {
	local ns="ip netns exec $PX_NS"
	px_net_down
	ip netns add "$PX_NS" &&
		ip link add unfspxeh type veth peer name unfspxen &&
		ip link set unfspxen netns "$PX_NS" &&
		ip addr add 10.214.1.1/24 dev unfspxeh &&
		ip link set unfspxeh up &&
		$ns ip link set lo up &&
		$ns ip addr add 10.214.1.2/24 dev unfspxen &&
		$ns ip link set unfspxen up &&
		$ns ip tuntap add dev unfspxet mode tap &&
		$ns ip addr add 10.214.2.1/24 dev unfspxet &&
		$ns ip link set unfspxet up &&
		$ns sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward' &&
		ip route add 10.214.2.0/24 via 10.214.1.2 ||
		e2e_fail "cannot make namespace $PX_NS with a veth pair, a tap device and a route (needs root, iproute2 and /dev/net/tun; is 10.214.0.0/16 free?)"
}

px_prereqs() {
	local kver f
	command -v ip > /dev/null || e2e_fail "ip is missing; run deploy/install-deps (package iproute2)"
	command -v dnsmasq > /dev/null || e2e_fail "dnsmasq is missing; run deploy/install-deps (package dnsmasq-base)"
	[ -r "$PX_PXELINUX" ] || e2e_fail "$PX_PXELINUX is missing; run deploy/install-deps (package pxelinux)"
	[ -r "$PX_LDLINUX" ] || e2e_fail "$PX_LDLINUX is missing; run deploy/install-deps (package syslinux-common)"
	for f in /usr/lib/ipxe/qemu/efi-virtio.rom /usr/lib/ipxe/qemu/pxe-virtio.rom; do
		[ -r "$f" ] && break
	done
	[ -r "$f" ] || e2e_fail "qemu's iPXE ROM for virtio-net is missing; run deploy/install-deps (qemu-system-x86 brings ipxe-qemu)"
	kver=$(ls /lib/modules | sort -V | tail -1)
	if [ ! -r "$NB_VM/initrd.cpio.gz" ] || [ "$(cat "$NB_VM/kernel-version" 2> /dev/null)" != "$kver" ] ||
		[ "$NB_DIR/build-initrd" -nt "$NB_VM/initrd.cpio.gz" ]; then
		echo "building the netboot VM image in $NB_VM"
		"$NB_DIR/build-initrd" "$NB_VM" > /dev/null || e2e_fail "tests/e2e/netboot/build-initrd failed"
	fi
}

# px_pxe_config FILE PHASE: a PXELINUX configuration with the guide's kernel line, plus what
# the test needs: the ports (no rpcbind here), the serial console, the phase for /sbin/init
px_pxe_config() {
	cat > "$1" <<-EOF
		SERIAL 0 115200
		DEFAULT lab
		LABEL lab
		  KERNEL vmlinuz
		  APPEND initrd=initrd.img root=/dev/nfs nfsroot=$PX_SERVER:/union,vers=3,tcp,port=$E2E_PORT,mountport=$E2E_MPORT ip=dhcp rw console=ttyS0 panic=-1 quiet netboot.phase=$2
	EOF
}

px_start_dnsmasq() {
	local i
	# The guide's section 3 on the test's network, then the test's own settings.
	cat > "$work/dnsmasq.conf" <<-EOF
		interface=unfspxet
		bind-interfaces
		dhcp-range=10.214.2.100,10.214.2.199,12h
		dhcp-host=$PX_MAC,$PX_GUEST,pxe01
		enable-tftp
		tftp-root=$T
		dhcp-boot=pxelinux.0
		# test only: no DNS, in the foreground, its files in the test's directory
		port=0
		keep-in-foreground
		dhcp-leasefile=$work/dnsmasq.leases
		log-facility=$work/dnsmasq.log
		log-dhcp
	EOF
	ip netns exec "$PX_NS" dnsmasq --conf-file="$work/dnsmasq.conf" > "$work/dnsmasq.out" 2>&1 &
	dnsmasq_pid=$!
	for i in $(seq 1 50); do
		kill -0 "$dnsmasq_pid" 2> /dev/null ||
			e2e_fail "dnsmasq exited at start-up: $(cat "$work/dnsmasq.out" "$work/dnsmasq.log" 2> /dev/null | tail -3 | tr '\n' ' ')"
		grep -q 'TFTP root is' "$work/dnsmasq.log" 2> /dev/null && return 0
		sleep 0.1
	done
	e2e_fail "dnsmasq did not report its TFTP root within 5 s: $(tail -3 "$work/dnsmasq.log" 2> /dev/null | tr '\n' ' ')"
}

# px_boot PHASE: boots the VM from the network and collects its RESULT rows; a boot that
# does not reach the end of its phase fails a row
px_boot() {
	local phase=$1 log t0 rc
	log=$work/console-$phase.log
	t0=$(date +%s.%N)
	ip netns exec "$PX_NS" timeout --foreground -k 5 "$PX_BOOT_LIMIT" qemu-system-x86_64 \
		-machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" -m 512 -smp 1 \
		-nographic -no-reboot -nodefaults -serial stdio -boot n \
		-netdev tap,id=n0,ifname=unfspxet,script=no,downscript=no \
		-device "virtio-net-pci,netdev=n0,mac=$PX_MAC" \
		< /dev/null > "$log" 2>&1
	rc=$?
	tr -d '\r' < "$log" | grep -E '^(RESULT|NETBOOT|netboot:|udhcpc)' | sed 's/^/client: /'
	echo "host: VM ($phase) ran $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, qemu status $rc"
	tr -d '\r' < "$log" | grep '^RESULT ' >> "$work/vm.out"
	E2E_FAILED=$((E2E_FAILED + $(tr -d '\r' < "$log" | grep -c '^RESULT .* FAIL')))
	if tr -d '\r' < "$log" | grep -q "^NETBOOT done: phase '$phase'"; then
		e2e_result boot "$phase" 1
	else
		e2e_result boot "$phase" 0 "the VM did not finish its phase (qemu status $rc); console tail: $(tail -5 "$log" | tr -d '\r' | tr '\n' ' ')"
	fi
}

# px_logged ROW PHASE REGEX WHAT: a row for a line dnsmasq must have logged
px_logged() {
	if grep -Eq "$3" "$work/dnsmasq.log"; then
		e2e_result "$1" "$2" 1
	else
		e2e_result "$1" "$2" 0 "dnsmasq did not log $4"
	fi
}

e2e_init pxe 14071 14072
trap px_cleanup EXIT
trap 'exit 143' TERM INT
px_prereqs
: > "$work/vm.out"

L=$work/lower
"$NB_DIR/build-rootfs" "$L" || e2e_fail "tests/e2e/netboot/build-rootfs failed"
e2e_tree_manifest "$L" > "$work/lower.before"

# The TFTP root, laid out as the guide's section 2 does.
T=$work/tftp
mkdir -p "$T/pxelinux.cfg"
cp "$PX_PXELINUX" "$PX_LDLINUX" "$T/"
cp "$NB_VM/vmlinuz" "$T/vmlinuz"
cp "$NB_VM/initrd.cpio.gz" "$T/initrd.img"
px_pxe_config "$T/pxelinux.cfg/default" write
chmod -R a+rX "$T" # dnsmasq serves TFTP as its own user

px_net_up
px_start_dnsmasq

# The server reads the guide's kind of configuration file; the only client rule names
# the guest's DHCP address, and kernel NFS clients use privileged ports (no insecure).
CL=$work/clients
mkdir -p "$CL"
cat > "$work/unionnfsd.conf" <<-EOF
	port $E2E_PORT
	mount-port $E2E_MPORT
	portmap off
	state $state
	export /union $L $PX_GUEST(rw,no_root_squash,upper=$CL/%a)
EOF
E2E_EXPORTS=(-c "$work/unionnfsd.conf")
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union over a busybox root, uppers $CL/%a"

px_boot write
px_logged dhcp_ack write "DHCPACK\(unfspxet\) $PX_GUEST $PX_MAC" "a DHCPACK of $PX_GUEST to $PX_MAC"
px_logged tftp_pxelinux write "sent $T/pxelinux.0 to $PX_GUEST" "sending pxelinux.0"
px_logged tftp_config write "sent $T/pxelinux.cfg/default to $PX_GUEST" "sending pxelinux.cfg/default"
px_logged tftp_kernel write "sent $T/vmlinuz to $PX_GUEST" "sending vmlinuz"
px_logged tftp_initrd write "sent $T/initrd.img to $PX_GUEST" "sending initrd.img"
if tr -d '\r' < "$work/console-write.log" | grep -q "^netboot: DHCP lease $PX_GUEST/24, router 10.214.2.1"; then
	e2e_result initramfs_dhcp write 1
else
	e2e_result initramfs_dhcp write 0 "the initramfs did not report the lease $PX_GUEST/24 via 10.214.2.1"
fi

# Boot 2: PXELINUX prefers the file named after the client's address in hex to default.
px_pxe_config "$T/pxelinux.cfg/$(printf '%02X' ${PX_GUEST//./ })" changed
chmod a+r "$T/pxelinux.cfg/"*
px_boot changed
px_logged tftp_config_hex changed "sent $T/pxelinux.cfg/0AD60265 to $PX_GUEST" "sending pxelinux.cfg/0AD60265"

"$BUILD/unionnfsd-ctl" --state "$state" clients > "$work/clients.out" 2>&1
echo "host: unionnfsd-ctl clients:"
sed 's/^/  /' "$work/clients.out"
e2e_stop_server

U=$CL/$PX_GUEST
echo "---- the guest's upper branch ($U) ----"
(cd "$U" && find . -printf '%y %m %s %p\n' | sort -k4)
others=$(ls -A "$CL" | grep -vxF "$PX_GUEST" | tr '\n' ' ')
[ -d "$U" ] && [ -z "$others" ]
e2e_result upper_named_by_dhcp_address host $((! $?)) "$CL holds '$(ls -A "$CL" | tr '\n' ' ')', want only $PX_GUEST"
if e2e_is_whiteout "$U/etc/base-only"; then
	e2e_result upper_whiteout host 1
else
	e2e_result upper_whiteout host 0 "etc/base-only in the upper is $(stat -c '%F' "$U/etc/base-only" 2>&1), want a whiteout"
fi
[ "$(cat "$U/etc/netboot-marker" 2>&1)" = client-marker ]
e2e_result upper_marker host $((! $?)) "etc/netboot-marker in the upper: $(cat "$U/etc/netboot-marker" 2>&1)"
[ "$(cat "$U/var/lib/netboot/state" 2>&1)" = "state 1" ]
e2e_result upper_var host $((! $?)) "var/lib/netboot/state in the upper: $(cat "$U/var/lib/netboot/state" 2>&1)"

e2e_tree_manifest "$L" > "$work/lower.after"
if diff "$work/lower.before" "$work/lower.after" > "$work/diff"; then
	e2e_result lower_unchanged host 1
else
	e2e_result lower_unchanged host 0 "the lower branch changed: $(head -4 "$work/diff" | tr '\n' ' ')"
fi
e2e_finish
