#!/bin/bash
# The union semantics table (../shared/spec/union-semantics.md) through a real Linux kernel
# NFS client in qemu, on a 2-branch stack: the host prepares a lower branch (files, dirs, a
# symlink, a hard-linked pair, a sparse file) and a few shadowing entries in the upper, then
# tests/e2e/guest_union_semantics.sh changes it row by row through NFS, checks each row,
# asks for a server restart while mounted and checks every row again (fileids with stat,
# contents, listings). Afterwards the host checks that the lower branch is unchanged byte
# for byte and that the upper holds overlayfs-format whiteouts and opaque markers.
#
# Ports 12049 (NFS) and 12050 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-semantics 12049 12050
upper=$work/upper
lower=$work/lower
mkdir -p "$upper" "$lower"

# --- the lower branch ---
L=$lower
printf 'getattr\n' > "$L/f_getattr"
printf 'chmod-data\n' > "$L/f_chmod" && chmod 644 "$L/f_chmod"
head -c 10000 /dev/urandom > "$L/f_trunc"
printf 'otrunc\n' > "$L/f_otrunc"
printf 'line1\n' > "$L/f_append"
printf '0123456789abcdef\n' > "$L/f_middle"
printf 'old lower data\n' > "$L/f_recreate"
printf 'unlink me\n' > "$L/f_unlink"
printf 'lower version\n' > "$L/f_both"
printf 'lower shadowed\n' > "$L/f_shadow"
mkdir "$L/dir_alldel" && for n in a b c; do echo "$n" > "$L/dir_alldel/$n"; done
mkdir "$L/dir_notempty" && echo x > "$L/dir_notempty/x"
mkdir -p "$L/dir_rmrf/sub" && echo 1 > "$L/dir_rmrf/f1" && echo 2 > "$L/dir_rmrf/f2" &&
	echo deep > "$L/dir_rmrf/sub/deep"
printf 'rename me\n' > "$L/f_rename"
mkdir -p "$L/dir_rename/sub" && echo c1 > "$L/dir_rename/c1" && echo c2 > "$L/dir_rename/c2" &&
	echo c3 > "$L/dir_rename/sub/c3"
printf 'hardlink data\n' > "$L/hl_a" && ln "$L/hl_a" "$L/hl_b"
printf 'replaced by a symlink\n' > "$L/f_symover"
ln -s f_getattr "$L/sym_lower"
printf 'lower f_mknod\n' > "$L/f_mknod"
mkdir "$L/dir_setattr" && echo k1 > "$L/dir_setattr/k1" && chmod 755 "$L/dir_setattr"
mkdir -p "$L/fod" && echo child > "$L/fod/child"
printf 'lower file\n' > "$L/dof"
mkdir "$L/merged" && echo l1 > "$L/merged/l1" && echo l2 > "$L/merged/l2"
printf 'excl\n' > "$L/f_excl"
printf 'link source\n' > "$L/f_linksrc"
printf 'pair\n' > "$L/hl_c" && ln "$L/hl_c" "$L/hl_d"
printf 'rsrc\n' > "$L/f_rsrc"
printf 'rdst\n' > "$L/f_rdst"
printf 'rename back\n' > "$L/f_rb"
printf 'into\n' > "$L/f_into"
mkdir "$L/dir_target" && echo t1 > "$L/dir_target/t1"
mkdir -p "$L/dir_rn2/inner" && echo x > "$L/dir_rn2/inner/x"
mkdir "$L/dir_mix" && echo l > "$L/dir_mix/l"
mkdir -p "$L/dir_deep/a"
printf 'no permission\n' > "$L/f_noperm" && chmod 644 "$L/f_noperm"
for i in $(seq 0 29); do head -c 65536 /dev/zero | tr '\0' x > "$L/cc$i"; done
printf 'renamed link\n' > "$L/hr_a" && ln "$L/hr_a" "$L/hr_b"
# a 64 MiB sparse file: data at 0, 32 MiB and the last bytes
truncate -s 64M "$L/sparse"
printf 'start' | dd of="$L/sparse" conv=notrunc status=none
printf 'middle' | dd of="$L/sparse" bs=1M seek=32 conv=notrunc status=none
printf 'end' | dd of="$L/sparse" bs=1 seek=$((64 * 1048576 - 3)) conv=notrunc status=none
touch -d @1000000000 "$L/f_getattr" "$L/f_chmod" "$L/dir_rename" "$L/hl_a"

# --- shadowing prepared in the upper ---
printf 'upper file\n' > "$upper/fod"                 # a file over a lower directory
mkdir "$upper/dof" && echo u > "$upper/dof/u"       # a directory over a lower file
printf 'upper version\n' > "$upper/f_both"
printf 'upper shadow\n' > "$upper/f_shadow"
mkdir "$upper/merged" && echo u1 > "$upper/merged/u1"

# what the guest's reads of the sparse file must give, before and after its write
md5sum < "$L/sparse" | cut -c1-32 > "$share/sparse.md5"
cp --sparse=always "$L/sparse" "$work/sparse.after"
printf 'Z' | dd of="$work/sparse.after" bs=1M seek=16 conv=notrunc status=none
md5sum < "$work/sparse.after" | cut -c1-32 > "$share/sparse-after.md5"
rm "$work/sparse.after"
md5sum < "$L/f_trunc" | cut -c1-32 > "$share/f_trunc.md5"
head -c 100 "$L/f_trunc" | md5sum | cut -c1-32 > "$share/f_trunc-100.md5"

e2e_tree_manifest "$lower" > "$work/lower.before"

e2e_export /union "$upper:$lower"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$upper:$lower"
e2e_run_vm "$E2E_HERE/guest_union_semantics.sh" 400
[ "$E2E_RESTARTS" = 1 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 1"
e2e_stop_server

# --- the host's view of the branches ---
e2e_tree_manifest "$lower" > "$work/lower.after"
if diff "$work/lower.before" "$work/lower.after" > "$work/lower.diff"; then
	e2e_result lower_unchanged host 1
else
	head -20 "$work/lower.diff"
	e2e_result lower_unchanged host 0 "the lower branch changed: $(head -3 "$work/lower.diff" | tr '\n' ' ')"
fi

U=$upper
desc() { # what is at a path, for messages
	if [ -L "$1" ]; then echo "symlink to $(readlink "$1")"
	elif [ -e "$1" ]; then stat -c '%F %t:%T mode %a size %s' "$1"
	else echo "nothing"; fi
}
whiteout() { # whiteout ROW NAME: the upper must hold an overlayfs whiteout at NAME
	if e2e_is_whiteout "$U/$2"; then
		e2e_result "$1" host 1
	else
		e2e_result "$1" host 0 "upper/$2 is $(desc "$U/$2"), want a whiteout (char 0/0)"
	fi
}
whiteout unlink_lower_whiteout f_unlink
whiteout unlink_both_whiteout f_both
whiteout rmdir_merged_whiteout dir_alldel
whiteout rename_file_whiteout f_rename

for d in dir_rmrf dir_rename; do
	if e2e_is_opaque "$U/$d"; then
		e2e_result "mkdir_opaque_marker_$d" host 1
	else
		e2e_result "mkdir_opaque_marker_$d" host 0 \
			"upper/$d is $(desc "$U/$d") with xattrs '$("$E2E_TOOL" list "$U/$d" 2>&1 | tr '\n' ' ')', want trusted.overlay.opaque=y"
	fi
done

ok=1 why=
[ -f "$U/f_chmod" ] && [ ! -L "$U/f_chmod" ] || { ok=0 why="upper/f_chmod is $(desc "$U/f_chmod")"; }
[ $ok = 1 ] && [ "$(stat -c %a "$U/f_chmod")" != 600 ] && { ok=0 why="upper/f_chmod has mode $(stat -c %a "$U/f_chmod"), want 600"; }
# a metadata-only copy: the lower's size, no data of its own, the overlayfs metacopy marker
[ $ok = 1 ] && [ "$(stat -c %s "$U/f_chmod")" != "$(stat -c %s "$L/f_chmod")" ] &&
	{ ok=0 why="upper/f_chmod has size $(stat -c %s "$U/f_chmod"), want the lower's"; }
[ $ok = 1 ] && ! "$E2E_TOOL" list "$U/f_chmod" | grep -qx '\(trusted\|user\)\.overlay\.metacopy' &&
	{ ok=0 why="upper/f_chmod has no overlay.metacopy xattr (has: $("$E2E_TOOL" list "$U/f_chmod" | tr '\n' ' ')): a full copy"; }
[ $ok = 1 ] && [ "$(cat "$L/f_chmod")" != chmod-data ] && { ok=0 why="lower/f_chmod changed"; }
e2e_result chmod_upper_copy host $ok "$why"

if [ -e "$U/dir_setattr/k1" ]; then
	e2e_result setattr_dir_alone host 0 "chmod of a lower directory copied its child up (upper/dir_setattr/k1 exists)"
elif [ -d "$U/dir_setattr" ] && [ "$(stat -c %a "$U/dir_setattr")" = 700 ]; then
	e2e_result setattr_dir_alone host 1
else
	e2e_result setattr_dir_alone host 0 "upper/dir_setattr is $(desc "$U/dir_setattr"), want a directory of mode 700"
fi

if [ -f "$U/sparse" ]; then
	kib=$(( $(stat -c '%b * %B' "$U/sparse") / 1024 ))
	if [ "$kib" -le 1024 ]; then
		e2e_result sparse_copy_stays_sparse host 1
	else
		e2e_result sparse_copy_stays_sparse host 0 "upper/sparse occupies $kib KiB for 64 MiB of mostly holes"
	fi
else
	e2e_result sparse_copy_stays_sparse host 0 "upper/sparse is $(desc "$U/sparse") after a write, want the copied-up file"
fi

# refused changes (EEXIST, EPERM, EACCES) and a pure-upper file's removal leave no trace
for n in f_excl f_noperm f_pure; do
	if [ -e "$U/$n" ] || [ -L "$U/$n" ]; then
		e2e_result "no_copy_$n" host 0 "upper/$n is $(desc "$U/$n"), want nothing there"
	else
		e2e_result "no_copy_$n" host 1
	fi
done

if [ -f "$U/f_linksrc" ] && [ "$(stat -c %i "$U/f_linksrc")" = "$(stat -c %i "$U/f_linknew" 2> /dev/null)" ]; then
	e2e_result link_lower_upper host 1
else
	e2e_result link_lower_upper host 0 "upper/f_linksrc is $(desc "$U/f_linksrc") and upper/f_linknew $(desc "$U/f_linknew"), want one file under both names"
fi

if [ -L "$U/f_symover" ]; then
	e2e_result symlink_over_removed_upper host 1
else
	e2e_result symlink_over_removed_upper host 0 "upper/f_symover is $(desc "$U/f_symover"), want the symlink"
fi

if [ -f "$U/f_recreate" ] && [ "$(cat "$U/f_recreate")" = "new data" ]; then
	e2e_result create_over_removed_upper host 1
else
	e2e_result create_over_removed_upper host 0 "upper/f_recreate is $(desc "$U/f_recreate"), want a file with 'new data'"
fi

# The marker of a user's char device 0/0 must not be a bare whiteout (it would read as a deletion).
if grep -q '^mknod refused' "$share/mknod.result" 2> /dev/null; then
	e2e_result mknod_0_0_upper host 1
elif e2e_is_whiteout "$U/f_mknod" && [ -z "$("$E2E_TOOL" list "$U/f_mknod")" ]; then
	e2e_result mknod_0_0_upper host 0 "a user's char device 0/0 is stored as a bare whiteout at upper/f_mknod"
else
	e2e_result mknod_0_0_upper host 1
fi
echo "host: upper/f_mknod is $(desc "$U/f_mknod"), xattrs: $("$E2E_TOOL" list "$U/f_mknod" 2> /dev/null | tr '\n' ' ')"

echo "---- upper branch at the end ----"
(cd "$upper" && find . -printf '%y %m %s %p\n' | sort -k4) | head -80

e2e_finish
