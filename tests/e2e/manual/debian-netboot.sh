#!/bin/bash
# Manual end-to-end proof of deploy/README.md sections 2 and 5 (slow, downloads packages;
# not part of make test): builds a Debian base with deploy/build-base, serves it with
# build/unionnfsd as the lower of an export with per-client uppers, and boots it in qemu with
# the base's own kernel and initramfs and the guide's kernel command line:
#   boot 1 (write):   systemd reaches multi-user; writes /etc, /var, deletes and renames base
#                     files, installs a package with dpkg, dpkg -V verifies every file
#   boot 2 (persist): the same client finds all of it
#   boot 3 (unit):    unionnfsd and deploy/unionnfsd.service run under the guest's systemd
#   package (only when named in PHASES): the Debian package of make deb installed in the
#                     guest with apt-get, an export configured, started, mounted, reloaded,
#                     killed and restarted by systemd, stopped, purged without a trace
# then checks that the base is unchanged and the client's changes are in its upper.
#
#   tests/e2e/manual/debian-netboot.sh [BASE_DIR [WORK_DIR]]
#       BASE_DIR  default /work/debbase (built when missing; about 800 MB, 2-3 minutes)
#       WORK_DIR  default BASE_DIR.run (server state, client uppers, console logs)
#   PHASES="write persist unit"  the boots to run, in order (persist needs write before it);
#                 "package" (make test-package) boots once more for the .deb
#   DEB=FILE      the package for the package phase (default: the newest build/unionnfsd_*_amd64.deb);
#                 its Depends are installed in the base
#   VERIFY_ALL=1  boot 1 runs dpkg -V over every package (reads all ~800 MB; +8 min under TCG)
#
# Networking: qemu user networking, the server is 10.0.2.100 in the guest, reached through
# guestfwd commands (socat to 127.0.0.1:14081 and :14082, and tests/e2e/manual/pmap-stub
# for port 111), so no port but 14081/14082 is used on the host. Needs root, qemu, socat,
# python3, debootstrap (deploy/install-deps), and make has built build/unionnfsd.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
base=${1:-/work/debbase}
work=${2:-$base.run}
NFS_PORT=14081 MOUNT_PORT=14082
SERVER=10.0.2.100
fail() {
	echo "debian-netboot: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || fail "must run as root"
for c in qemu-system-x86_64 socat python3; do
	command -v $c > /dev/null || fail "$c is missing; run deploy/install-deps and apt-get install socat"
done
[ -x "$repo/build/unionnfsd" ] || fail "build/unionnfsd is missing; run make"

# --- the base ----------------------------------------------------------------------------------
# The libraries of the host-built unionnfsd and rpcbind (rpcinfo) for the unit phase.
include=libtirpc3,liblmdb0,libev4,libsodium23,rpcbind
deb=
if [[ " ${PHASES:-} " == *" package "* ]]; then
	deb=${DEB:-$(ls "$repo"/build/unionnfsd_*_amd64.deb 2> /dev/null | sort -V | tail -1)}
	[ -f "$deb" ] || fail "no Debian package (build/unionnfsd_*_amd64.deb) for the package phase; run make deb (or give DEB=FILE)"
	# The guest has no package lists: the package's dependencies come with the base.
	deps=$(dpkg-deb -f "$deb" Pre-Depends Depends | sed 's/^[A-Za-z-]*: //' | tr ',' '\n' |
		sed 's/|.*//; s/(.*)//; s/:.*//; s/[[:space:]]//g' | grep . | sort -u | paste -sd,)
	include+=${deps:+,$deps}
fi
"$repo/deploy/build-base" --include "$include" "$base" || fail "deploy/build-base failed"
kernel=$(ls "$base"/boot/vmlinuz-* | sort -V | tail -1)
initrd=$base/boot/initrd.img-${kernel##*/vmlinuz-}
# The test's own files in the base (before it is served; the base is then checked unchanged)
T=$base/opt/netboot-test
mkdir -p "$T"
install -m 0755 "$here/debian-netboot-check" "$T/check"
install -m 0755 "$repo/build/unionnfsd" "$repo/build/unionnfsd-ctl" "$T/"
install -m 0644 "$repo/deploy/unionnfsd.service" "$T/"
rm -f "$T/unionnfsd.deb"
[ -z "$deb" ] || install -m 0644 "$deb" "$T/unionnfsd.deb"
if [ ! -s "$T/hello.deb" ]; then
	(cd "$T" && apt-get download -q hello > /dev/null 2>&1 && mv hello_*.deb hello.deb) || fail "apt-get download hello failed"
fi
cat > "$base/etc/systemd/system/netboot-check.service" << 'UNIT'
[Unit]
Description=netboot check (tests/e2e/manual/debian-netboot.sh)
ConditionKernelCommandLine=netboot.check
After=multi-user.target
# agetty's vhangup() on the serial console would cut off the check's output
Conflicts=serial-getty@ttyS0.service
After=serial-getty@ttyS0.service
[Service]
# simple: the boot is complete (is-system-running says running) while the check runs
Type=simple
ExecStart=/opt/netboot-test/check
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/netboot-check.service "$base/etc/systemd/system/multi-user.target.wants/netboot-check.service"
manifest() { (cd "$base" && find . -xdev -printf '%p %y %m %U %G %s %T@ %l\n' | sort | md5sum | cut -d' ' -f1); }
sum_before=$(manifest)

# --- the server --------------------------------------------------------------------------------
rm -rf "$work" && mkdir -p "$work/clients" || fail "cannot make $work"
"$repo/build/unionnfsd" -f --state "$work/state" --port $NFS_PORT --mount-port $MOUNT_PORT --portmap off \
	-e "/union=$base" -o "rw,no_root_squash,insecure,upper=$work/clients/%a" 2> "$work/server.log" &
srv=$!
trap 'kill $srv 2> /dev/null; wait $srv 2> /dev/null' EXIT
for _ in $(seq 50); do grep -q ready "$work/server.log" && break; sleep 0.1; done
grep -q ready "$work/server.log" || fail "server did not start: $(cat "$work/server.log")"

total_fails=0
boot() { # boot PHASE
	local phase=$1 log=$work/console-$1.log t0 t1 rc
	t0=$(date +%s.%N)
	timeout -k 5 "${BOOT_TIMEOUT:-900}" qemu-system-x86_64 -machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" \
		-m 1024 -smp 2 -nographic -no-reboot -serial "file:$log" -monitor none \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 root=/dev/nfs nfsroot=$SERVER:/union,vers=3,tcp ip=dhcp rw netboot.check=$phase${VERIFY_ALL:+ netboot.verify=all}" \
		-netdev "user,id=n0,guestfwd=tcp:$SERVER:111-cmd:$here/pmap-stub 2049 20048,guestfwd=tcp:$SERVER:2049-cmd:socat - TCP:127.0.0.1:$NFS_PORT,guestfwd=tcp:$SERVER:20048-cmd:socat - TCP:127.0.0.1:$MOUNT_PORT" \
		-device virtio-net-pci,netdev=n0 > "$work/qemu-$phase.out" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	printf 'boot %-8s %5.1fs (qemu exit %d); ' "$phase" "$(echo "$t1 - $t0" | bc)" $rc
	grep -a -m1 'CHECK system state' "$log" | tr -d '\r'
	grep -a -E '^(RESULT|CHECK)' "$log" | tr -d '\r' | sed 's/^/    /'
	grep -aq "CHECK done phase=$phase fails=0" "$log" || {
		echo "    boot $phase did not finish cleanly; console: $log"
		total_fails=$((total_fails + 1))
	}
}
for phase in ${PHASES:-write persist unit}; do boot "$phase"; done

# --- after the boots ---------------------------------------------------------------------------
up=$work/clients/127.0.0.1
[ "$(manifest)" = "$sum_before" ] && echo "RESULT ok base unchanged" ||
	{ echo "RESULT FAIL base changed"; total_fails=$((total_fails + 1)); }
if [[ " ${PHASES:-write} " == *" write "* ]]; then
	if grep -qx boot1 "$up/etc/netboot-test" 2> /dev/null && [ "$(stat -c %t:%T "$up/etc/motd" 2> /dev/null)" = 0:0 ]; then
		echo "RESULT ok the client's changes are in its upper ($up: $(du -sh "$up" | cut -f1), whiteout etc/motd)"
	else
		echo "RESULT FAIL the client's upper lacks its changes"
		total_fails=$((total_fails + 1))
	fi
fi
"$repo/build/unionnfsd-ctl" --state "$work/state" stats 2>&1 | sed -n '2,5p'
if grep -iE 'error|stale|warn' "$work/server.log" | grep -q .; then
	echo "server log lines with error/stale/warn:"
	grep -iE 'error|stale|warn' "$work/server.log" | head -20
fi
echo "debian-netboot: $((total_fails == 0 ? 1 : 0)) passed, $((total_fails == 0 ? 0 : 1)) failed (logs in $work)"
[ $total_fails -eq 0 ]
