#!/bin/bash
# The proof of the PXE path of the netboot guide (deploy/README.md sections 3 and 4): a qemu
# VM with no -kernel/-initrd boots from its NIC's PXE ROM (qemu's iPXE), gets its address by
# DHCP from dnsmasq (fixed by MAC with dhcp-host), loads PXELINUX, its configuration, the
# kernel and an initramfs by TFTP from dnsmasq; the initramfs configures the interface by
# DHCP (ip=dhcp) and mounts / over NFSv3/TCP from unionnfsd (nfsroot= on the kernel line).
# The lower branch is the busybox root of tests/e2e/netboot/build-rootfs; its /sbin/init runs
# one phase and prints RESULT rows on the console. Boots of the same machine:
#   boot 1: Debian's own initramfs (initramfs-tools, built with mkinitramfs as the guide's
#           section 2 configures it: BOOT=nfs, MODULES=netboot) and the guide's kernel line
#           unchanged, from pxelinux.cfg/default; the server runs a portmapper, as with
#           rpcbind. Phase write: writes /etc and /var, deletes a base file.
#   boot 2: the guide's proxy variant: busybox udhcpd hands out the address (fixed by MAC)
#           and dnsmasq, as a proxy, only the boot information; the test's busybox initramfs
#           (tests/e2e/netboot/build-initrd, ip=dhcp by udhcpc) from pxelinux.cfg/0AD60265
#           (the machine's address in hex, which PXELINUX prefers to default), after a
#           server restart without a portmapper, so nfsroot= names the ports. Phase
#           changed: finds the changes of boot 1.
#   boot 3, only with PXE_UEFI=1 (about 35 s more; needs the packages ovmf and
#           grub-efi-amd64-bin): UEFI firmware (OVMF with qemu's iPXE EFI ROM), dnsmasq as in
#           boot 1 (its dhcp-match/dhcp-boot tag:efi lines, always present, now used), GRUB
#           built by grub-mkimage as the guide says with section 4's line in grub/grub.cfg,
#           Debian's initramfs, the portmapper back on. Phase changed again.
# The export gives every client its own upper, upper=$work/clients/%a, and its only client
# rule names the address the DHCP server hands out, so a boot proves the server saw the DHCP
# address; the host then checks that this upper holds the guest's writes, that
# unionnfsd-ctl clients lists it, that no other client directory appeared and that the
# lower is byte-for-byte unchanged.
#
# Network (10.214.2.0/24 only; nothing leaves the namespace): namespace unfs-pxe holds the
# tap device unfspxet (10.214.2.1/24) for qemu, and on it, like the guide's lab server,
# dnsmasq (DHCP and TFTP, no DNS; for boot 2 beside udhcpd) and unionnfsd (NFS 14071, MOUNT
# 14072, and for boots 1 and 3 its built-in portmapper on port 111: Debian's initramfs asks
# the portmapper on 111, and the namespace's ports are its own, so nothing on the host
# collides). A small helper sends
# IPv6 router advertisements without prefix or route on the tap device, only to end the
# wait of about 13 s per boot that iPXE spends on IPv6 otherwise (px_start_ra).
#
# Needs root, qemu-system-x86 with its iPXE ROMs (ipxe-qemu), dnsmasq-base, pxelinux,
# syslinux-common, initramfs-tools, a kernel in /boot with its modules, busybox-static, cpio
# and iproute2: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

NB_DIR=$E2E_HERE/netboot
NB_VM=$BUILD/e2e/netboot # the busybox netboot image, shared with test_netboot.sh
PX_VM=$BUILD/e2e/pxe     # Debian's NFS initramfs for the host kernel
PX_NS=unfs-pxe
PX_MAC=52:54:00:14:07:01
PX_GUEST=10.214.2.101
PX_SERVER=10.214.2.1
PX_PXELINUX=/usr/lib/PXELINUX/pxelinux.0
PX_LDLINUX=/usr/lib/syslinux/modules/bios/ldlinux.c32
PX_BOOT_LIMIT=${PX_BOOT_LIMIT:-120}
PX_UEFI=${PXE_UEFI:-0} # 1: a third boot, by UEFI (OVMF, GRUB); about 35 s more
PX_OVMF=
dnsmasq_pid=
vm_pid=
ra_pid=
udhcpd_pid=

px_cleanup() {
	if [ -n "$vm_pid" ] && kill -0 "$vm_pid" 2> /dev/null; then
		kill -TERM "$vm_pid" 2> /dev/null # timeout passes it on to qemu
		wait "$vm_pid" 2> /dev/null
	fi
	if [ -n "$dnsmasq_pid" ] && kill -0 "$dnsmasq_pid" 2> /dev/null; then
		kill -TERM "$dnsmasq_pid" 2> /dev/null
		wait "$dnsmasq_pid" 2> /dev/null
	fi
	if [ -n "$ra_pid" ] && kill -0 "$ra_pid" 2> /dev/null; then
		kill -TERM "$ra_pid" 2> /dev/null
		wait "$ra_pid" 2> /dev/null
	fi
	if [ -n "$udhcpd_pid" ] && kill -0 "$udhcpd_pid" 2> /dev/null; then
		kill -TERM "$udhcpd_pid" 2> /dev/null
		wait "$udhcpd_pid" 2> /dev/null
	fi
	e2e_cleanup # kills the server
	ip netns del "$PX_NS" 2> /dev/null # and with it the tap device
}

px_net_up() {
	local ns="ip netns exec $PX_NS"
	ip netns del "$PX_NS" 2> /dev/null
	ip netns add "$PX_NS" &&
		$ns ip link set lo up &&
		$ns ip tuntap add dev unfspxet mode tap &&
		$ns ip addr add "$PX_SERVER/24" dev unfspxet &&
		$ns ip link set unfspxet up ||
		e2e_fail "cannot make namespace $PX_NS with the tap device unfspxet (needs root, iproute2 and /dev/net/tun)"
}

px_prereqs() {
	local kver f
	command -v ip > /dev/null || e2e_fail "ip is missing; run deploy/install-deps (package iproute2)"
	command -v dnsmasq > /dev/null || e2e_fail "dnsmasq is missing; run deploy/install-deps (package dnsmasq-base)"
	command -v mkinitramfs > /dev/null || e2e_fail "mkinitramfs is missing; run deploy/install-deps (package initramfs-tools)"
	[ -r "$PX_PXELINUX" ] || e2e_fail "$PX_PXELINUX is missing; run deploy/install-deps (package pxelinux)"
	[ -r "$PX_LDLINUX" ] || e2e_fail "$PX_LDLINUX is missing; run deploy/install-deps (package syslinux-common)"
	for f in /usr/lib/ipxe/qemu/efi-virtio.rom /usr/lib/ipxe/qemu/pxe-virtio.rom; do
		[ -r "$f" ] && break
	done
	[ -r "$f" ] || e2e_fail "qemu's iPXE ROM for virtio-net is missing; run deploy/install-deps (qemu-system-x86 brings ipxe-qemu)"
	if [ "$PX_UEFI" = 1 ]; then
		for f in /usr/share/ovmf/OVMF.fd /usr/share/qemu/OVMF.fd; do
			[ -r "$f" ] && PX_OVMF=$f && break
		done
		[ -n "$PX_OVMF" ] || e2e_fail "PXE_UEFI=1 needs OVMF.fd; apt-get install ovmf"
		[ -r /usr/lib/grub/x86_64-efi/efinet.mod ] && command -v grub-mkimage > /dev/null ||
			e2e_fail "PXE_UEFI=1 needs GRUB's EFI modules; apt-get install grub-efi-amd64-bin"
	fi
	kver=$(ls /lib/modules | sort -V | tail -1)
	e2e_initrd_ready "$NB_DIR/build-initrd" "$NB_VM"
	# Debian's initramfs, configured as the guide's section 2 does in the base image (the
	# host's /etc/initramfs-tools stands in for the image's).
	if [ ! -r "$PX_VM/initrd-nfs.img" ] || [ "$(cat "$PX_VM/kernel-version" 2> /dev/null)" != "$kver" ] ||
		[ /etc/initramfs-tools/initramfs.conf -nt "$PX_VM/initrd-nfs.img" ]; then
		echo "building Debian's NFS initramfs (mkinitramfs, BOOT=nfs MODULES=netboot) in $PX_VM"
		rm -rf "$PX_VM/conf"
		mkdir -p "$PX_VM"
		cp -a /etc/initramfs-tools "$PX_VM/conf" &&
			sed -i 's/^BOOT=.*/BOOT=nfs/; s/^MODULES=.*/MODULES=netboot/' "$PX_VM/conf/initramfs.conf" &&
			mkinitramfs -d "$PX_VM/conf" -o "$PX_VM/initrd-nfs.img.tmp" "$kver" > "$PX_VM/mkinitramfs.log" 2>&1 ||
			e2e_fail "mkinitramfs failed (log: $PX_VM/mkinitramfs.log); run deploy/install-deps (initramfs-tools)"
		mv "$PX_VM/initrd-nfs.img.tmp" "$PX_VM/initrd-nfs.img"
		echo "$kver" > "$PX_VM/kernel-version"
	fi
}

# qemu's PXE ROM (iPXE) waits about 13 s per boot for an IPv6 router advertisement before it
# loads anything, when none comes. px_start_ra sends one twice a second on the tap device:
# from the device's link-local address, with no prefix and router lifetime 0, so it
# configures nothing in the guest (no address, no route); it only ends that wait.
px_start_ra() {
	local bin=$PX_VM/ra-announce
	if [ ! -x "$bin" ] || [ "$E2E_HERE/netboot/ra-announce.c" -nt "$bin" ]; then
		mkdir -p "$PX_VM"
		gcc -std=gnu11 -O1 -Wall -Wextra -Werror -o "$bin.tmp" "$E2E_HERE/netboot/ra-announce.c" ||
			e2e_fail "cannot build the router advertisement helper with gcc; run deploy/install-deps (build-essential)"
		mv "$bin.tmp" "$bin"
	fi
	ip netns exec "$PX_NS" "$bin" unfspxet > /dev/null 2>&1 &
	ra_pid=$!
}

# px_pxe_config FILE PHASE INITRD NFSOPTS: a PXELINUX configuration with the guide's kernel
# line (NFSOPTS after vers=3,tcp), then what the test adds: the serial console, the phase
px_pxe_config() {
	cat > "$1" <<-EOF
		DEFAULT lab
		LABEL lab
		  KERNEL vmlinuz
		  APPEND initrd=$3 root=/dev/nfs nfsroot=$PX_SERVER:/union,vers=3,tcp$4 ip=dhcp rw console=ttyS0 panic=-1 quiet netboot.phase=$2
	EOF
	chmod 644 "$1"
}

# px_start_dnsmasq NAME: dnsmasq with $work/NAME.conf, which logs to $work/NAME.log
px_start_dnsmasq() {
	local i log=$work/$1.log
	ip netns exec "$PX_NS" dnsmasq --conf-file="$work/$1.conf" > "$work/$1.out" 2>&1 &
	dnsmasq_pid=$!
	for i in $(seq 1 50); do
		kill -0 "$dnsmasq_pid" 2> /dev/null ||
			e2e_fail "dnsmasq exited at start-up: $(cat "$work/$1.out" "$log" 2> /dev/null | tail -3 | tr '\n' ' ')"
		grep -q 'TFTP root is' "$log" 2> /dev/null && return 0
		sleep 0.1
	done
	e2e_fail "dnsmasq did not report its TFTP root within 5 s: $(tail -3 "$log" 2> /dev/null | tr '\n' ' ')"
}

px_stop_dnsmasq() {
	kill -TERM "$dnsmasq_pid" 2> /dev/null
	wait "$dnsmasq_pid" 2> /dev/null
	dnsmasq_pid=
}

px_port_busy() { # is anything listening on TCP port $1 of the server's address in the namespace?
	ip netns exec "$PX_NS" bash -c "exec 3<> /dev/tcp/$PX_SERVER/$1" 2> /dev/null
}

# px_start_server [ARGS...]: unionnfsd in the namespace with the test's configuration file,
# then ARGS (later settings win)
px_start_server() {
	ip netns exec "$PX_NS" "$E2E_BIN" -f -c "$work/unionnfsd.conf" "$@" >> "$work/server.log" 2>&1 &
	srv=$!
	e2e_await_server px_port_busy "$PX_SERVER"
}

# px_boot LABEL PHASE [QEMU ARGS...]: boots the VM from the network (console in
# $work/console-LABEL.log) and collects its RESULT rows; a boot that does not reach the end
# of its phase fails the row "boot LABEL"
px_boot() {
	local label=$1 phase=$2 log t0 rc
	shift 2
	log=$work/console-$label.log
	t0=$(date +%s.%N)
	ip netns exec "$PX_NS" timeout --foreground -k 5 "$PX_BOOT_LIMIT" qemu-system-x86_64 \
		-machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" -m 512 -smp 1 \
		-nographic -no-reboot -nodefaults -serial stdio -boot n \
		-netdev tap,id=n0,ifname=unfspxet,script=no,downscript=no \
		-device "virtio-net-pci,netdev=n0,mac=$PX_MAC" "$@" \
		< /dev/null > "$log" 2>&1 &
	vm_pid=$! # waited for in the background, so that a signal to the test ends it at once
	wait "$vm_pid"
	rc=$?
	vm_pid=
	tr -d '\r' < "$log" | grep -E '^(RESULT|NETBOOT|netboot:|IP-Config|nfsmount|PXELINUX [0-9]|Welcome to GRUB)' | sed 's/^/client: /'
	echo "host: VM ($label) ran $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, qemu status $rc"
	tr -d '\r' < "$log" | grep '^RESULT ' >> "$work/vm.out"
	E2E_FAILED=$((E2E_FAILED + $(tr -d '\r' < "$log" | grep -c '^RESULT .* FAIL')))
	if tr -d '\r' < "$log" | grep "^NETBOOT done: phase '$phase'" > /dev/null; then
		e2e_result boot "$label" 1
	else
		e2e_result boot "$label" 0 "the VM did not finish its phase (qemu status $rc); console tail: $(tail -5 "$log" | tr -d '\r' | tr '\n' ' ')"
	fi
}

# px_logged ROW PHASE FILE REGEX WHAT: a row for a line FILE must hold (grep without -q:
# with pipefail, tr killed by SIGPIPE when grep -q stops early would fail the row)
px_logged() {
	if tr -d '\r' < "$3" | grep -E "$4" > /dev/null; then
		e2e_result "$1" "$2" 1
	else
		e2e_result "$1" "$2" 0 "${3#"$work/"} does not show $5"
	fi
}

e2e_init pxe 14071 14072
trap px_cleanup EXIT
trap 'exit 143' TERM INT
px_prereqs
: > "$work/vm.out"

L=$work/lower
"$NB_DIR/build-rootfs" "$L" || e2e_fail "tests/e2e/netboot/build-rootfs failed"
mkdir -m 755 "$L/run" # Debian's initramfs moves its /run there
e2e_tree_manifest "$L" > "$work/lower_unchanged.before"

# The TFTP root, laid out as the guide's section 2 does.
T=$work/tftp
mkdir -p "$T/pxelinux.cfg"
cp "$PX_PXELINUX" "$PX_LDLINUX" "$T/"
cp "$NB_VM/vmlinuz" "$T/vmlinuz"
cp "$PX_VM/initrd-nfs.img" "$T/initrd.img"
cp "$NB_VM/initrd.cpio.gz" "$T/initrd-busybox.img"
chmod -R a+rX "$T" # dnsmasq serves TFTP as its own user
px_pxe_config "$T/pxelinux.cfg/default" write initrd.img ""
if [ "$PX_UEFI" = 1 ]; then
	# GRUB as the guide's section 3 builds it, and its grub.cfg with section 4's kernel line
	grub-mkimage -O x86_64-efi -p '(tftp)/grub' -o "$T/grubx64.efi" efinet tftp linux normal configfile ||
		e2e_fail "grub-mkimage failed"
	mkdir -p "$T/grub"
	cat > "$T/grub/grub.cfg" <<-EOF
		set timeout=0
		menuentry lab {
		  linux /vmlinuz root=/dev/nfs nfsroot=$PX_SERVER:/union,vers=3,tcp ip=dhcp rw console=ttyS0 panic=-1 quiet netboot.phase=changed
		  initrd /initrd.img
		}
	EOF
	chmod -R a+rX "$T"
fi

# The guide's section 3 line for line (its comments too) on the test's network, then the
# test's own settings.
cat > "$work/dnsmasq.conf" <<-EOF
	interface=unfspxet                   # the lab interface of the server
	bind-interfaces
	dhcp-range=10.214.2.100,10.214.2.199,12h
	# Fixed addresses: the address names the machine (and its layer on the server).
	dhcp-host=$PX_MAC,$PX_GUEST,pxe01
	enable-tftp
	tftp-root=$T
	dhcp-boot=pxelinux.0                 # BIOS PXE clients
	# UEFI clients: GRUB (section 3, booted only with PXE_UEFI=1)
	dhcp-match=set:efi,option:client-arch,7
	dhcp-boot=tag:efi,grubx64.efi
	# test only: no DNS, in the foreground, its files in the test's directory
	port=0
	keep-in-foreground
	dhcp-leasefile=$work/dnsmasq.leases
	log-facility=$work/dnsmasq.log
	log-dhcp
EOF
# The guide's proxy variant: another DHCP server hands out the addresses and dnsmasq only
# adds the boot information (its dhcp-range and dhcp-boot lines replaced as the guide says).
sed -e 's/^dhcp-range=.*/dhcp-range=10.214.2.0,proxy/' \
	-e 's/^dhcp-boot=pxelinux.0 .*/pxe-service=x86PC,"Network boot",pxelinux/' \
	-e "s|=$work/dnsmasq\\.|=$work/dnsmasq-proxy.|" "$work/dnsmasq.conf" > "$work/dnsmasq-proxy.conf"

px_net_up
px_start_dnsmasq dnsmasq
px_start_ra

# The server reads the guide's kind of configuration file (deploy/lab.conf); the only client
# rule names the guest's DHCP address; kernel NFS clients use privileged ports (no insecure).
CL=$work/clients
mkdir -p "$CL"
cat > "$work/unionnfsd.conf" <<-EOF
	listen $PX_SERVER
	port $E2E_PORT
	mount-port $E2E_MPORT
	portmap builtin
	state $state
	export /union $L $PX_GUEST(rw,no_root_squash,upper=$CL/%a)
EOF
px_start_server
echo "server started in $PX_NS on $PX_SERVER, ports $E2E_PORT/$E2E_MPORT and a portmapper on 111: /union over a busybox root, uppers $CL/%a"

# Boot 1: Debian's initramfs, the guide's kernel line unchanged.
px_boot write write
D=$work/dnsmasq.log
px_logged dhcp_ack write "$D" "DHCPACK\(unfspxet\) $PX_GUEST $PX_MAC" "a DHCPACK of $PX_GUEST to $PX_MAC"
px_logged tftp_pxelinux write "$D" "sent $T/pxelinux.0 to $PX_GUEST" "pxelinux.0 sent"
px_logged tftp_config write "$D" "sent $T/pxelinux.cfg/default to $PX_GUEST" "pxelinux.cfg/default sent"
px_logged tftp_kernel write "$D" "sent $T/vmlinuz to $PX_GUEST" "vmlinuz sent"
px_logged tftp_initrd write "$D" "sent $T/initrd.img to $PX_GUEST" "initrd.img sent"
px_logged initramfs_dhcp write "$work/console-write.log" "^ address: $PX_GUEST " "Debian's initramfs (ipconfig) configuring $PX_GUEST by DHCP"
px_logged initramfs_nfs_root write "$work/console-write.log" "^NETBOOT init: phase 'write', root $PX_SERVER:/union nfs" "the root mounted from $PX_SERVER:/union"

# Boot 2: dnsmasq as a proxy beside another DHCP server (busybox udhcpd, the address fixed
# by MAC); the server without a portmapper; the busybox initramfs, nfsroot= names the
# ports; from the file PXELINUX prefers to default: the machine's address in hex.
px_stop_dnsmasq
cat > "$work/udhcpd.conf" <<-EOF
	interface unfspxet
	start 10.214.2.100
	end 10.214.2.199
	max_leases 100
	lease_file $work/udhcpd.leases
	static_lease $PX_MAC $PX_GUEST
	option subnet 255.255.255.0
	option router $PX_SERVER
EOF
: > "$work/udhcpd.leases"
ip netns exec "$PX_NS" busybox udhcpd -f "$work/udhcpd.conf" > "$work/udhcpd.out" 2>&1 &
udhcpd_pid=$!
px_start_dnsmasq dnsmasq-proxy
e2e_stop_server
px_start_server --portmap off
hexname=$(printf '%02X' ${PX_GUEST//./ })
px_pxe_config "$T/pxelinux.cfg/$hexname" changed initrd-busybox.img ",port=$E2E_PORT,mountport=$E2E_MPORT"
px_boot changed changed
D=$work/dnsmasq-proxy.log
px_logged dhcp_other_server changed "$work/udhcpd.out" "sending ACK to $PX_GUEST" "udhcpd acknowledging $PX_GUEST"
px_logged proxy_boot_file changed "$D" "PXE\(unfspxet\) $PX_GUEST $PX_MAC pxelinux\.0" "the proxy naming pxelinux.0 for $PX_GUEST"
px_logged tftp_config_hex changed "$D" "sent $T/pxelinux.cfg/$hexname to $PX_GUEST" "pxelinux.cfg/$hexname sent"
px_logged tftp_initrd_busybox changed "$D" "sent $T/initrd-busybox.img to $PX_GUEST" "initrd-busybox.img sent"
px_logged initramfs_dhcp changed "$work/console-changed.log" "^netboot: DHCP lease $PX_GUEST/24, router $PX_SERVER" "the busybox initramfs configuring $PX_GUEST/24 by DHCP"

if [ "$PX_UEFI" = 1 ]; then
	# Boot 3 (PXE_UEFI=1): UEFI firmware (OVMF), dnsmasq as in boot 1, GRUB and its
	# grub.cfg, Debian's initramfs, the portmapper back on. Phase changed again.
	px_stop_dnsmasq
	kill -TERM "$udhcpd_pid" 2> /dev/null
	wait "$udhcpd_pid" 2> /dev/null
	udhcpd_pid=
	sed "s|=$work/dnsmasq\\.|=$work/dnsmasq-uefi.|" "$work/dnsmasq.conf" > "$work/dnsmasq-uefi.conf"
	px_start_dnsmasq dnsmasq-uefi
	e2e_stop_server
	px_start_server
	px_boot uefi changed -bios "$PX_OVMF"
	D=$work/dnsmasq-uefi.log
	px_logged uefi_client uefi "$D" "vendor class: PXEClient:Arch:00007" "a UEFI x64 client (client-arch 7)"
	px_logged tftp_grub uefi "$D" "sent $T/grubx64.efi to $PX_GUEST" "grubx64.efi sent"
	px_logged tftp_grub_cfg uefi "$D" "sent $T/grub/grub.cfg to $PX_GUEST" "grub/grub.cfg sent"
	px_logged tftp_initrd uefi "$D" "sent $T/initrd.img to $PX_GUEST" "initrd.img sent"
fi

"$BUILD/unionnfsd-ctl" --state "$state" clients > "$work/clients.out" 2>&1
echo "host: unionnfsd-ctl clients:"
sed 's/^/  /' "$work/clients.out"
grep -q "^ *$PX_GUEST " "$work/clients.out" && grep -qF "$CL/$PX_GUEST" "$work/clients.out"
e2e_result ctl_clients host $((! $?)) "unionnfsd-ctl clients does not list $PX_GUEST with its layer $CL/$PX_GUEST"
e2e_stop_server

U=$CL/$PX_GUEST
echo "---- the guest's upper branch ($U) ----"
(cd "$U" && find . -printf '%y %m %s %p\n' | sort -k4)
others=$(ls -A "$CL" | grep -vxF "$PX_GUEST" | tr '\n' ' ')
[ -d "$U" ] && [ -z "$others" ]
e2e_result upper_named_by_dhcp_address host $((! $?)) "$CL holds '$(ls -A "$CL" | tr '\n' ' ')', want only $PX_GUEST"
e2e_netboot_upper_checks "$U"

e2e_unchanged lower_unchanged "$L"
e2e_finish
