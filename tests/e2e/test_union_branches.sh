#!/bin/bash
# Several writable branches through a real Linux kernel NFS client in qemu (README: "Several
# writable branches"), one row per line of the spec's table:
#   /tdp = w0=rw : w1=rw : w2=rw : base=ro        create=tdp (the default)
#   /rr  = r0=rw : r1=rw : r2=rw : rbase=ro       create=rr, each r* a 16 MiB tmpfs
# tests/e2e/guest_union_branches.sh makes the changes and checks what the client sees, live
# and after a server restart (fileids kept); this script then checks where each change
# landed in the branches: in place on a middle writable branch, copy-up only to the top,
# new names next to their parent (tdp) or evenly (rr), removes through every writable
# branch with one whiteout only over a read-only copy, renames across branches, and that
# the read-only bases are unchanged. `df` in the guest must show the three tmpfs added up.
#
# Ports 12057 (NFS) and 12058 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-branches 12057 12058
T=$work/tdp
R=$work/rr
mkdir -p "$T/w0" "$T/w1" "$T/w2" "$T/base" "$R/r0" "$R/r1" "$R/r2" "$R/rbase/dd"
umount_branches() {
	local b
	for b in r0 r1 r2; do mountpoint -q "$R/$b" && umount "$R/$b"; done
}
trap 'umount_branches; e2e_cleanup' EXIT
for b in r0 r1 r2; do
	mount -t tmpfs -o size=16m unfs-e2e "$R/$b" || e2e_fail "cannot mount a tmpfs on $R/$b"
done

# --- /tdp ---
echo "base mid" > "$T/base/mid"
echo "w1 mid" > "$T/w1/mid"               # write_in_place: changed in w1
echo "base low" > "$T/base/low"           # copy_up_top: copied to w0 only
mkdir "$T/w1/d1"                          # create_tdp: new names go to w1/d1
for b in w1 w2 base; do echo "$b x" > "$T/$b/x"; done   # remove_across
for b in w0 w2; do echo "$b y" > "$T/$b/y"; done        # remove_writable_only
for b in w0 w1 w2; do mkdir "$T/$b/spread" && echo "$b" > "$T/$b/spread/in-$b"; done
echo "w2 f2" > "$T/w2/f2" && mkdir "$T/w1/only1"        # rename_across
echo "w1 src" > "$T/w1/src"                             # rename_over
for b in w0 w2; do echo "$b over" > "$T/$b/over"; done
e2e_tree_manifest "$T/base" > "$work/tdp-base.before"
e2e_tree_manifest "$R/rbase" > "$work/rr-base.before"

e2e_export /tdp "$T/w0=rw:$T/w1=rw:$T/w2=rw:$T/base=ro"
e2e_export /rr "$R/r0=rw:$R/r1=rw:$R/r2=rw:$R/rbase=ro" create=rr
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /tdp and /rr"
e2e_run_vm "$E2E_HERE/guest_union_branches.sh" 300
[ "$E2E_RESTARTS" = 1 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 1"
e2e_stop_server

# host_has ROW PATH... / host_lacks ROW PATH...: where the changes landed
host_has() {
	local row=$1 p
	shift
	for p in "$@"; do
		[ -e "$p" ] || [ -L "$p" ] || { e2e_result "$row" host 0 "${p#"$work/"} is missing"; return; }
	done
	e2e_result "$row" host 1
}
host_lacks() {
	local row=$1 p
	shift
	for p in "$@"; do
		if [ -e "$p" ] || [ -L "$p" ]; then
			e2e_result "$row" host 0 "${p#"$work/"} is there ($(stat -c %F "$p")), want nothing"
			return
		fi
	done
	e2e_result "$row" host 1
}
[ "$(cat "$T/w1/mid")" = "$(printf 'w1 mid\nappended')" ]
e2e_result write_in_place_w1 host $((! $?)) "w1/mid holds '$(cat "$T/w1/mid" | tr '\n' ' ')'"
host_lacks write_in_place_no_copy "$T/w0/mid" "$T/w2/mid"
host_has copy_up_top "$T/w0/low"
host_lacks copy_up_not_middle "$T/w1/low" "$T/w2/low"
host_has create_tdp_next_to_parent "$T/w1/d1/new"
host_lacks create_tdp_not_top "$T/w0/d1"
e2e_is_whiteout "$T/w1/x"
e2e_result remove_across_one_whiteout host $((! $?)) "w1/x is $(stat -c %F "$T/w1/x" 2>&1), want a whiteout"
host_lacks remove_across_copies_gone "$T/w0/x" "$T/w2/x"
host_lacks remove_writable_only_no_whiteout "$T/w0/y" "$T/w1/y" "$T/w2/y"
host_lacks rmdir_spread_gone "$T/w0/spread" "$T/w1/spread" "$T/w2/spread"
host_lacks rename_across_old_name "$T/w0/f2" "$T/w1/f2" "$T/w2/f2"
host_lacks rename_over_gone "$T/w0/over" "$T/w1/over" "$T/w2/over" "$T/w1/src"
e2e_unchanged tdp-base "$T/base"
e2e_unchanged rr-base "$R/rbase"
for b in r0 r1 r2; do
	n=$(find "$R/$b/dd" -name 'f.*' 2> /dev/null | wc -l)
	[ "$n" = 10 ]
	e2e_result "rr_even_$b" host $((! $?)) "$b/dd holds $n of the 30 new files, want 10"
done
e2e_finish
