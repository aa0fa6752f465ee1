#!/bin/bash
# A directory of 50,000 entries split over two branches, listed through a real Linux kernel
# NFS client in qemu (tests/e2e/guest_union_bigdir.sh) with `ls -l` and `find`: complete,
# correct (exact names, no duplicates, upper copies shadow lower ones, whited-out names
# absent) and the listing time logged on lines starting with "TIMING". Listed again after a
# server restart, once more (ls -l) with a restart in the middle of the listing, and (ls)
# while names are created and removed.
#   lower: n00000..n29999 (n00000..n00009 are directories) and gone00000..gone00099
#   upper: n25000..n49999 (5,000 names in both branches) and whiteouts of gone*
#
# Ports 12055 (NFS) and 12056 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-bigdir 12055 12056
upper=$work/upper
lower=$work/lower
mkdir -p "$upper/big" "$lower/big"

t0=$(date +%s.%N)
(
	cd "$lower/big" || exit 1
	for i in $(seq 0 9); do mkdir "n0000$i"; done
	for i in $(seq -w 10 29999); do echo "L n$i" > "n$i"; done
	for i in $(seq -w 0 99); do echo "gone" > "gone000$i"; done
	cd "$upper/big" || exit 1
	for i in $(seq 25000 49999); do echo "U n$i" > "n$i"; done
	for i in $(seq -w 0 99); do "$E2E_TOOL" whiteout "gone000$i" || exit 1; done
) || e2e_fail "preparing the branches"
echo "host: branches prepared in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s:" \
	"$(ls "$lower/big" | wc -l) lower entries, $(ls "$upper/big" | wc -l) upper entries"

e2e_export /union "$upper:$lower"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$upper:$lower"
e2e_run_vm "$E2E_HERE/guest_union_bigdir.sh" 600
[ "$E2E_RESTARTS" = 2 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 2"
grep '^TIMING' "$work/vm.out" > "$work/host.timing"
e2e_finish
