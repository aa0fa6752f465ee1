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
# Each VM's qemu runs in its own network namespace (tests/e2e/netboot/lib.sh), so the server
# sees VM N as 10.213.N.2.
#
# Ports 14061 (NFS) and 14062 (MOUNT), no portmapper. Needs root (network namespaces,
# no_root_squash root), qemu-system-x86, a kernel in /boot with its modules, busybox-static,
# cpio and iproute2: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

NB_NS=nb NB_NET=10.213
source "$E2E_HERE/netboot/lib.sh"

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
