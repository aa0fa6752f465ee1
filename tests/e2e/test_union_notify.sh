#!/bin/bash
# A file replaced directly in the lower branch, then shadowed by a copy put directly in the
# upper, while a real Linux kernel NFS client in qemu (tests/e2e/guest_union_notify.sh)
# reads it in a loop: never bytes that are neither the old nor a new content (a torn mix),
# each new content seen by the first open after the change, no crash, and afterwards
# `unionnfsd-ctl check` finds no record it cannot check; --repair drops the records of the
# objects gone and the next check is clean (README, "Branches changed while serving").
#   lower: d/f (1 MiB of A)   then, by hand: d/f replaced by a new file (1 MiB of B)
#   upper: -                  then, by hand: d/f (1 MiB of C) over it
#
# Ports 12063 (NFS) and 12064 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-notify 12063 12064
upper=$work/upper
lower=$work/lower
mkdir -p "$upper" "$lower/d"
fill() { head -c 1048576 /dev/zero | tr '\0' "$1"; }
fill A > "$lower/d/f"

e2e_hook_replace() {
	fill B > "$lower/d/f.new" && mv "$lower/d/f.new" "$lower/d/f"
}
e2e_hook_shadow() {
	mkdir "$upper/d" && fill C > "$upper/d/f"
}

e2e_export /union "$upper:$lower"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$upper:$lower"
e2e_run_vm "$E2E_HERE/guest_union_notify.sh" 120

ctl() { "$BUILD/unionnfsd-ctl" --state "$state" "$@" > "$work/ctl.out" 2>&1; }
kill -0 "$srv" 2> /dev/null || e2e_result server end 0 "the server is gone after the guest's reads"
ctl check
rc=$?
echo "host: unionnfsd-ctl check (status $rc): $(tr '\n' ' ' < "$work/ctl.out")"
{ [ $rc = 0 ] || [ $rc = 3 ]; } && grep -q ' 0 errors' "$work/ctl.out" ||
	e2e_result ctl-check end 0 "check: status $rc, want 0 or 3 (stale records) with 0 errors"
ctl check --repair || e2e_result ctl-check end 0 "check --repair: $(tr '\n' ' ' < "$work/ctl.out")"
ctl check && grep -q '0 stale, 0 dropped, 0 errors' "$work/ctl.out" ||
	e2e_result ctl-check end 0 "check after --repair: $(tr '\n' ' ' < "$work/ctl.out")"
e2e_finish
