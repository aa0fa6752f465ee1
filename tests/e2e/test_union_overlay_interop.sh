#!/bin/bash
# Interoperability with the kernel's own overlayfs, both ways: an upper branch written
# through unionnfsd must mean, to overlayfs, what it meant to the NFS clients; and an upper
# written by overlayfs must mean, to unionnfsd's NFS clients, what it meant to overlayfs.
#
# unionnfsd -> overlayfs. The branches (upper : lower1 : lower2; lower1 has an overlayfs
# whiteout and an opaque dir of its own) live under the VM's 9p share.
# tests/e2e/guest_union_overlay_interop.sh changes the union through NFS (creates, removes
# of lower files and dirs, mkdir over a removed dir, file and directory renames, a write
# through a lower hard link, chmod, chown and touch of lower files, which leave metadata-only
# copies, and a chmod then an append, which leaves a full copy, symlinks), records a
# manifest of the NFS view, restarts the server, records it again, unmounts, copies the
# branches into tmpfs with their xattrs (see e2e_hook_xattrs), then mounts overlayfs
# read-only over them in the same VM
#   mount -t overlay overlay -o lowerdir=UPPER:LOWER1:LOWER2,metacopy=on /ovl
# and compares its tree with the NFS view (names, types, modes, owners, sizes, link counts,
# md5 of contents, symlink targets), directory by directory. The host checks that the
# attribute-only changes left metacopies in the upper (metacopy_uppers) and the append a
# full copy (full_copy).
#
# overlayfs -> unionnfsd. The guest then mounts overlayfs read-write with metacopy=on over
# its copies of lower1:lower2 (upper and work dir in its tmpfs), changes modes, an owner and
# times of lower files under back/ and renames one into another directory (an absolute
# trusted.overlay.redirect), records that view, unmounts and ships the upper to the host
# (a tar and a dump of its xattrs). The host unpacks it (e2e_hook_backupper) as the upper of
# a second export /back over the same lowers and restarts the server; the guest reads /back
# through NFS and wants the very view overlayfs showed, then writes to the renamed file
# (the server completes the copy from the redirect's data: no_metacopy_after_write).
#
# Ports 12053 (NFS) and 12054 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-overlay-interop 12053 12054
br=$share/br
U=$br/upper
L1=$br/lower1
L2=$br/lower2
mkdir -p "$U" "$L1" "$L2"

# --- lower2, the bottom ---
mkdir -p "$L2"/{create,delete,deldir/b,mkdirover,hardlink,renamefile,chmod,symlink,overwrite,shadow/fileoverdir,opq,meta,back/sub}
echo l2 > "$L2/create/l2"
echo y2 > "$L2/delete/y"
echo w2 > "$L2/delete/w"
echo a > "$L2/deldir/a"
echo c > "$L2/deldir/b/c"
echo old1 > "$L2/mkdirover/old1"
echo old2 > "$L2/mkdirover/old2"
echo "hard" > "$L2/hardlink/h1" && ln "$L2/hardlink/h1" "$L2/hardlink/h2"
echo "hard other" > "$L2/hardlink/h3" && ln "$L2/hardlink/h3" "$L2/hardlink/h4"
mkdir "$L2/hardlazy" && echo lazy > "$L2/hardlazy/h5" && ln "$L2/hardlazy/h5" "$L2/hardlazy/h6"
echo a > "$L2/renamefile/a"
echo b > "$L2/renamefile/b"
# the files whose attributes alone change (in the union, or in overlayfs for back/) are
# 64 KiB, so that an upper copy without their data shows in its allocated size
data() { head -c 65536 /dev/urandom > "$1" && chmod 644 "$1"; }
data "$L2/chmod/f"
for f in meta/own meta/time meta/append back/mode back/own back/time back/src; do data "$L2/$f"; done
echo keep > "$L2/back/sub/keep"
mkdir "$L2/chmod/d" && chmod 755 "$L2/chmod/d" && echo k > "$L2/chmod/d/k"
ln -s nowhere "$L2/symlink/old"
echo keep > "$L2/symlink/target"
head -c 10000 /dev/urandom > "$L2/overwrite/f"
echo x > "$L2/shadow/fileoverdir/x"
echo "l2 file" > "$L2/shadow/diroverfile"
echo "hidden" > "$L2/hidden_by_mid"
echo p1 > "$L2/opq/p1"
echo keep2 > "$L2/keep2"
# --- lower1, the middle ---
mkdir -p "$L1"/{create,delete,renamedir/src/sub,shadow/diroverfile,opq,meta,back}
echo l1 > "$L1/create/l1"
echo x1 > "$L1/delete/x"
echo y1 > "$L1/delete/y"
echo z1 > "$L1/delete/z"
echo f1 > "$L1/renamedir/src/f1"
echo f2 > "$L1/renamedir/src/sub/f2"
echo "l1 file" > "$L1/shadow/fileoverdir"
echo y > "$L1/shadow/diroverfile/y"
"$E2E_TOOL" whiteout "$L1/hidden_by_mid"
"$E2E_TOOL" set "$L1/opq" trusted.overlay.opaque y && echo o1 > "$L1/opq/o1"
echo keep1 > "$L1/keep1"
# the data of these metacopies is the middle layer's, not the bottom's
data "$L1/meta/time"
data "$L1/back/time"
touch -d @1000000000 "$L2/chmod/f" "$L2/hardlink/h1" "$L1/renamedir/src"
cp "$E2E_HERE/manifest.sh" "$share/manifest.sh"

e2e_tree_manifest "$L1" > "$work/lower1.before"
e2e_tree_manifest "$L2" > "$work/lower2.before"

# The 9p share carries character devices (whiteouts) but no trusted.* xattrs (qemu passes
# only user.* through), so overlayfs on the shared branches would silently ignore opaque
# dirs and redirects. The guest copies the branches into tmpfs with tar and asks for this
# dump of every xattr on the branches, taken when the server has written them, to set them
# on its copy: then overlayfs reads the very markers unionnfsd left on disk.
e2e_hook_xattrs() {
	(cd "$br" && find . | sort | while IFS= read -r p; do
		"$E2E_TOOL" list "$p" | while IFS= read -r n; do
			[ -n "$n" ] && printf '%s\t%s\t%s\n' "$p" "$n" "$("$E2E_TOOL" hexget "$p" "$n")"
		done
	done) > "$share/xattrs.dump"
	echo "host: $(wc -l < "$share/xattrs.dump") xattrs on the branches: $(cut -f1,2 "$share/xattrs.dump" | tr '\t\n' '= ')"
}

# The upper the guest's read-write overlayfs wrote comes back as back-upper.tar and a dump
# of its xattrs in the format above (tar carries no xattrs). Unpacked with them, it is the
# upper of a second export /back over the same lowers, served from the next restart on.
U2=$work/upper2
e2e_hook_backupper() {
	local p n v why=
	mkdir "$U2" && tar -xpf "$share/back-upper.tar" --numeric-owner -C "$U2" ||
		why="tar -xpf back-upper.tar failed"
	while IFS=$'\t' read -r p n v; do
		"$E2E_TOOL" hexset "$U2/$p" "$n" "$v" || why="${why:-cannot set $n on $p}"
	done < "$share/back-xattrs.dump"
	echo "host: the guest's overlayfs upper: $(cd "$U2" && find . ! -name . | sort | tr '\n' ' ')"
	echo "host: with $(wc -l < "$share/back-xattrs.dump") xattrs: $(cut -f1,2 "$share/back-xattrs.dump" | tr '\t\n' '= ')"
	# what the guest saw in its upper must have survived the trip
	for p in back/mode back/own back/time back/sub/dst; do
		"$E2E_TOOL" get "$U2/$p" trusted.overlay.metacopy > /dev/null ||
			why="${why:-$p has no trusted.overlay.metacopy}"
	done
	[ "$("$E2E_TOOL" get "$U2/back/sub/dst" trusted.overlay.redirect)" = /back/src ] ||
		why="${why:-back/sub/dst has no redirect /back/src}"
	e2e_is_whiteout "$U2/back/src" || why="${why:-back/src is no whiteout}"
	[ -z "$why" ]
	e2e_result back_upper_unpacked host $((! $?)) "$why"
	e2e_export /back "$U2:$L1:$L2"
}

e2e_export /union "$U:$L1:$L2"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$U:$L1:$L2"
e2e_run_vm "$E2E_HERE/guest_union_overlay_interop.sh" 300
[ "$E2E_RESTARTS" = 2 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 2"
e2e_stop_server

# metacopy_upper FILE LOWER: FILE is a metadata-only copy of LOWER in overlayfs's format (empty
# metacopy marker, LOWER's size, hardly any blocks); prints what is wrong otherwise
metacopy_upper() {
	local v
	if [ -L "$1" ] || [ ! -f "$1" ]; then
		echo "${1#"$br/"} is $(stat -c %F "$1" 2>&1), want a regular file"
	elif ! v=$("$E2E_TOOL" hexget "$1" trusted.overlay.metacopy); then
		echo "${1#"$br/"} has no trusted.overlay.metacopy: a full copy, want a metadata-only one"
	elif [ -n "$v" ]; then
		echo "${1#"$br/"}: trusted.overlay.metacopy is $v, want an empty value"
	elif [ "$(stat -c %s "$1")" != "$(stat -c %s "$2")" ]; then
		echo "${1#"$br/"}: size $(stat -c %s "$1"), want the lower's $(stat -c %s "$2")"
	elif [ $(($(stat -c '%b * %B' "$1") * 4)) -ge "$(stat -c %s "$1")" ]; then
		echo "${1#"$br/"}: $(($(stat -c '%b * %B' "$1"))) bytes allocated of $(stat -c %s "$1"): data copied, want a sparse file"
	fi
}
# full_copy FILE WANT_MD5: a plain copy (no metacopy marker in either name space) holding
# WANT_MD5; prints what is wrong otherwise
full_copy() {
	if "$E2E_TOOL" get "$1" trusted.overlay.metacopy > /dev/null ||
		"$E2E_TOOL" get "$1" user.overlay.metacopy > /dev/null; then
		echo "${1#"$work/"} still has the metacopy marker after a write"
	elif [ "$(md5sum < "$1" | cut -c1-32)" != "$2" ]; then
		echo "${1#"$work/"}: content differs from the lower's followed by the appended line"
	fi
}
why=$(metacopy_upper "$U/chmod/f" "$L2/chmod/f"; metacopy_upper "$U/meta/own" "$L2/meta/own"
	metacopy_upper "$U/meta/time" "$L1/meta/time")
e2e_result metacopy_uppers host $((! ${#why})) "$(echo "$why" | tr '\n' ' ')"
why=$(full_copy "$U/meta/append" "$({ cat "$L2/meta/append"; echo tail; } | md5sum | cut -c1-32)")
e2e_result full_copy host $((! ${#why})) "$why"
why=$(full_copy "$U2/back/sub/dst" "$({ cat "$L2/back/src"; echo more; } | md5sum | cut -c1-32)"
	for f in back/mode back/own back/time; do
		"$E2E_TOOL" get "$U2/$f" trusted.overlay.metacopy > /dev/null ||
			echo "upper2/$f lost its metacopy marker though NFS only read it"
	done)
e2e_result no_metacopy_after_write host $((! ${#why})) "$(echo "$why" | tr '\n' ' ')"

for b in lower1 lower2; do
	e2e_tree_manifest "$br/$b" > "$work/$b.after"
	if diff "$work/$b.before" "$work/$b.after" > "$work/diff"; then
		e2e_result "${b}_unchanged" host 1
	else
		e2e_result "${b}_unchanged" host 0 "$b changed: $(head -4 "$work/diff" | tr '\n' ' ')"
	fi
done
for d in "$U" "$U2"; do
	echo "---- upper branch ${d#"$work/"} at the end (type mode size blocks path, xattrs) ----"
	(cd "$d" && find . -printf '%y %m %s %b %p\n' | sort -k5 | while read -r y m s b p; do
		x=$("$E2E_TOOL" list "$p" 2> /dev/null | while read -r n; do
			[ -n "$n" ] && printf ' %s=%s' "$n" "$("$E2E_TOOL" get "$p" "$n" | tr -c '[:print:]' '?')"; done)
		[ "$y" = c ] && y="c$(stat -c '%t:%T' "$p")"
		echo "$y $m $s $b $p$x"
	done)
done
e2e_finish
