#!/bin/bash
# End to end through a real Linux kernel NFS client: boots the host's kernel under qemu
# (tests/e2e/build-initrd, run-in-vm), which mounts the server on the host through the
# portmapper without port options and runs tests/e2e/guest_kernel_client.sh: a tree, a
# 100 MiB file written and read back, rename, hard links, symlinks, chmod, truncate, ls -l,
# cp -a of a tree compared with its source, rm -rf, then a server restart while mounted
# (the guest asks through /host/restart-request; this script stops the server with SIGTERM,
# starts it on the same state directory and answers with /host/restart-done) after which
# the guest checks inode numbers and carries on. Finally the upper branch must hold exactly
# what the guest saw. A second restart happens while the guest is writing a file.
#
# Uses the fixed ports 2049 (NFS) and 20048 (MOUNT) and the portmapper on 111: the built-in
# one, or the system rpcbind when one runs. Needs root (port 111), qemu-system-x86, a
# kernel in /boot with its modules, busybox-static and cpio: deploy/install-deps installs them.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
here=tests/e2e
# shared helpers: e2e_fail, e2e_cleanup (both use $srv and $work), e2e_port_busy
source "$here/lib.sh"
bin=$BUILD/unionnfsd
vm=$BUILD/e2e/vm
srv=
work=

trap e2e_cleanup EXIT

# --- prerequisites: missing ones fail with the fix, never skip ---
command -v rpcinfo > /dev/null || e2e_fail "rpcinfo is missing; run deploy/install-deps (package rpcbind)"
[ -x "$bin" ] || e2e_fail "$bin is missing; run make"
[ "$(id -u)" = 0 ] || e2e_fail "needs root (the portmapper port 111); run as root"

for p in 2049 20048; do
	e2e_port_busy $p && e2e_fail "port $p is in use (a kernel nfsd or another unionnfsd?); stop it first"
done

# --- qemu, a kernel and the VM image (built once per build directory and kernel) ---
e2e_vm_ready

work=$(mktemp -d /tmp/unfs-e2e.XXXXXX)
chmod 755 "$work"
upper=$work/upper
state=$work/state
share=$work/share
log=$work/server.log
mkdir -p "$upper" "$share"

if rpcinfo -p 127.0.0.1 > /dev/null 2>&1; then
	portmap=rpcbind
	echo "a system rpcbind runs: the server registers with it"
else
	e2e_port_busy 111 && e2e_fail "port 111 is busy but no portmapper answers there; free it"
	portmap=builtin
fi

start_server() {
	local i
	"$bin" -f --port 2049 --mount-port 20048 --portmap "$portmap" --state "$state" \
		-e "/union=$upper" -o no_root_squash,insecure >> "$log" 2>&1 &
	srv=$!
	for i in $(seq 1 150); do
		kill -0 "$srv" 2> /dev/null || { wait "$srv"; e2e_fail "the server exited at start-up (status $?)"; }
		# through the portmapper, the way the guest's kernel will find it
		if rpcinfo -t 127.0.0.1 100003 3 > /dev/null 2>&1 &&
			rpcinfo -t 127.0.0.1 100005 3 > /dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	e2e_fail "the server did not answer through the portmapper within 30 s"
}

stop_server() {
	local rc i
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

# --- a source tree for cp -a with the awkward cases ---
make_tree() {
	local t=$1 i
	mkdir -p "$t/deep/1/2/3/4/5/6" "$t/empty-dir" "$t/wide" "$t/modes"
	for size in 0 1 4095 4096 4097 65537 1048579; do
		head -c $size /dev/urandom > "$t/size-$size"
	done
	echo deepest > "$t/deep/1/2/3/4/5/6/file"
	for i in $(seq 1 300); do echo "$i" > "$t/wide/entry-number-$i"; done
	echo "long" > "$t/$(printf 'L%.0s' $(seq 1 255))"
	echo "spaces" > "$t/name with spaces"
	echo "utf-8" > "$t/café-日本"
	ln -s size-4096 "$t/rel-link"
	ln -s /etc/hostname "$t/abs-link"
	ln -s does/not/exist "$t/dangling-link"
	ln "$t/size-1" "$t/hard-link-of-size-1"
	mkfifo "$t/fifo"
	mknod "$t/chardev" c 1 3 2> /dev/null || echo "note: no mknod here, the tree has no device node"
	echo x > "$t/modes/600" && chmod 600 "$t/modes/600"
	echo x > "$t/modes/4755" && chmod 4755 "$t/modes/4755"
	echo x > "$t/modes/2755" && chmod 2755 "$t/modes/2755"
	mkdir "$t/modes/1777" && chmod 1777 "$t/modes/1777"
	echo x > "$t/owned" && chown 1234:5678 "$t/owned"
	touch -h -d "2001-09-09 01:46:40" "$t/size-0" "$t/rel-link"
}
make_tree "$share/src"
cp "$here/manifest.sh" "$share/manifest.sh"

start_server
echo "server started ($portmap portmapper), upper $upper"

t0=$(date +%s.%N)
"$here/run-in-vm" "$vm" "$share" "$here/guest_kernel_client.sh" 600 > "$work/vm.out" 2>&1 &
vmpid=$!
restarted=0
while kill -0 "$vmpid" 2> /dev/null; do
	for n in 1 2; do
		if [ -f "$share/restart-request.$n" ] && [ ! -f "$share/restart-done.$n" ]; then
			echo "host: restart $n of the server (the guest has it mounted)"
			stop_server
			start_server
			restarted=$((restarted + 1))
			touch "$share/restart-done.$n"
		fi
	done
	sleep 0.2
done
wait "$vmpid"
vmrc=$?
cat "$work/vm.out"
echo "host: VM ran $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
[ $vmrc = 0 ] || e2e_fail "the guest script failed (status $vmrc)"
[ $restarted = 2 ] || e2e_fail "the guest asked for $restarted restarts, want 2"

# --- the host's view: the upper branch holds exactly what the guest saw ---
busybox sh "$here/manifest.sh" "$upper" > "$work/manifest.host" || e2e_fail "listing the upper branch"
if ! diff "$share/manifest.guest" "$work/manifest.host" > "$work/manifest.diff"; then
	head -40 "$work/manifest.diff"
	e2e_fail "the upper branch differs from what the guest listed through NFS"
fi
got=$(md5sum < "$upper/big" | cut -c1-32)
[ "$got" = "$(cat "$share/big.md5")" ] || e2e_fail "upper/big has md5 $got, the guest wrote $(cat "$share/big.md5")"
[ -f "$upper/after/new" ] && [ "$(cat "$upper/after/new")" = new ] ||
	e2e_fail "upper/after/new is missing or wrong"
echo "host: the upper branch matches the guest's listing ($(wc -l < "$work/manifest.host") entries)"

stop_server
if grep -E "AddressSanitizer|LeakSanitizer|runtime error:" "$log"; then
	e2e_fail "sanitizer report in the server log"
fi
echo "PASS: kernel client end to end"
