#!/bin/bash
# Interoperability with the kernel's own overlayfs: an upper branch written through
# unionnfsd must mean, to overlayfs, what it meant to the NFS clients.
# The branches (upper : lower1 : lower2; lower1 has an overlayfs whiteout and an opaque dir
# of its own) live under the VM's 9p share. tests/e2e/guest_union_overlay_interop.sh
# changes the union through NFS (creates, removes of lower files and dirs, mkdir over a
# removed dir, file and directory renames, a write through a lower hard link, chmod,
# symlinks), records a manifest of the NFS view, restarts the server, records it again,
# unmounts, copies the branches into tmpfs with their xattrs (see e2e_hook_xattrs), then
# mounts overlayfs read-only over them in the same VM
#   mount -t overlay overlay -o lowerdir=UPPER:LOWER1:LOWER2 /ovl
# and compares its tree with the NFS view (names, types, modes, owners, sizes, link counts,
# md5 of contents, symlink targets), directory by directory.
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
mkdir -p "$L2"/{create,delete,deldir/b,mkdirover,hardlink,renamefile,chmod,symlink,overwrite,shadow/fileoverdir,opq}
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
echo f > "$L2/chmod/f" && chmod 644 "$L2/chmod/f"
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
mkdir -p "$L1"/{create,delete,renamedir/src/sub,shadow/diroverfile,opq}
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

e2e_export /union "$U:$L1:$L2"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$U:$L1:$L2"
e2e_run_vm "$E2E_HERE/guest_union_overlay_interop.sh" 300
[ "$E2E_RESTARTS" = 1 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 1"
e2e_stop_server

for b in lower1 lower2; do
	e2e_tree_manifest "$br/$b" > "$work/$b.after"
	if diff "$work/$b.before" "$work/$b.after" > "$work/diff"; then
		e2e_result "${b}_unchanged" host 1
	else
		e2e_result "${b}_unchanged" host 0 "$b changed: $(head -4 "$work/diff" | tr '\n' ' ')"
	fi
done
echo "---- upper branch at the end (type mode size path, xattrs) ----"
(cd "$U" && find . -printf '%y %m %s %p\n' | sort -k4 | while read -r y m s p; do
	x=$("$E2E_TOOL" list "$p" 2> /dev/null | while read -r n; do
		[ -n "$n" ] && printf ' %s=%s' "$n" "$("$E2E_TOOL" get "$p" "$n")"; done)
	[ "$y" = c ] && y="c$(stat -c '%t:%T' "$p")"
	echo "$y $m $s $p$x"
done)
e2e_finish
