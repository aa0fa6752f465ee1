#!/bin/bash
# Deeper stacks through a real Linux kernel NFS client in qemu: two exports of one server,
#   /three = upper : mid : base    mid in overlayfs format: a whiteout (char 0/0) hiding a
#                                  file of base, one inside a merged dir, an opaque dir
#                                  (trusted.overlay.opaque=y), a file shadowing base's
#   /oci   = upper : layer : base  layer in OCI/aufs format: .wh.<name> whiteouts and an
#                                  opaque dir (.wh..wh..opq), as an unpacked image layer
# tests/e2e/guest_union_layers.sh checks that hidden names are invisible (lookup and
# listings), that markers never show, and that changes through NFS over the hidden names
# (create, mkdir, remove, rmdir) do the right thing, before and after a server restart.
# A third export, /hand, has its lower changed by hand while the guest has it mounted: new
# names must appear, removed ones go (ENOENT, or ESTALE through an open descriptor), and the
# server must neither crash nor serve wrong data.
# The host then checks that the lower branches of /three and /oci are unchanged.
#
# Ports 12051 (NFS) and 12052 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init union-layers 12051 12052
T=$work/three
O=$work/oci
mkdir -p "$T/upper" "$T/mid" "$T/base" "$O/upper" "$O/layer" "$O/base"

# --- /three: base ---
B=$T/base
for n in a b b2 c keep; do echo "base $n" > "$B/$n"; done
mkdir -p "$B/d" "$B/e" "$B/f/g" "$B/rmd" "$B/hd"
echo "base hd x" > "$B/hd/x"
echo "base d1" > "$B/d/d1"
echo "base d2" > "$B/d/d2"
echo "base e1" > "$B/e/e1"
echo "base e2" > "$B/e/e2"
echo "base g" > "$B/f/g/gfile"
echo "base rmd1" > "$B/rmd/r1"
# --- /three: mid, overlayfs format ---
Mi=$T/mid
for n in b b2 hd; do "$E2E_TOOL" whiteout "$Mi/$n" || e2e_fail "mknod of a whiteout in mid"; done
echo "mid c" > "$Mi/c"
mkdir "$Mi/d" && "$E2E_TOOL" whiteout "$Mi/d/d1" && echo "mid m" > "$Mi/d/m"
mkdir "$Mi/e" && "$E2E_TOOL" set "$Mi/e" trusted.overlay.opaque y && echo "mid new1" > "$Mi/e/new1"
echo "mid only" > "$Mi/mid_only"
mkdir "$Mi/rmd" && "$E2E_TOOL" whiteout "$Mi/rmd/r1"   # rmd: every lower entry hidden
"$E2E_TOOL" whiteout "$Mi/ghost"                        # a whiteout of nothing

# --- /oci: base ---
B=$O/base
for n in o1 o2 o3 keep; do echo "base $n" > "$B/$n"; done
mkdir -p "$B/odir" "$B/odir2" "$B/odir3"
echo "base k1" > "$B/odir/k1"
echo "base k2" > "$B/odir/k2"
echo "base z" > "$B/odir2/z"
echo "base w" > "$B/odir3/w"
# --- /oci: layer, OCI/aufs format ---
Ly=$O/layer
: > "$Ly/.wh.o1"
: > "$Ly/.wh.o3"
mkdir "$Ly/odir" && : > "$Ly/odir/.wh..wh..opq" && echo "layer fresh" > "$Ly/odir/fresh"
mkdir "$Ly/odir2" && : > "$Ly/odir2/.wh.z"
mkdir "$Ly/odir3" && echo "layer v" > "$Ly/odir3/v"
echo "layer file" > "$Ly/layerfile"
: > "$Ly/.wh.nothing"

# --- /hand: a lower changed by hand while served (e2e_hook_hand) ---
Hd=$work/hand
mkdir -p "$Hd/upper" "$Hd/lower/gd"
echo a > "$Hd/lower/a"
echo b > "$Hd/lower/b"
echo g > "$Hd/lower/gd/g"
e2e_hook_hand() {
	echo "by hand" > "$Hd/lower/c"
	rm "$Hd/lower/b"
	mkdir "$Hd/lower/d" && echo e > "$Hd/lower/d/e"
	rm -r "$Hd/lower/gd"
}

for b in mid base; do e2e_tree_manifest "$T/$b" > "$work/three-$b.before"; done
for b in layer base; do e2e_tree_manifest "$O/$b" > "$work/oci-$b.before"; done

e2e_export /three "$T/upper:$T/mid:$T/base"
e2e_export /oci "$O/upper:$O/layer:$O/base"
e2e_export /hand "$Hd/upper:$Hd/lower"
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /three and /oci"
e2e_run_vm "$E2E_HERE/guest_union_layers.sh" 300
[ "$E2E_RESTARTS" = 1 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 1"
e2e_stop_server

for b in mid base; do
	e2e_tree_manifest "$T/$b" > "$work/three-$b.after"
	if diff "$work/three-$b.before" "$work/three-$b.after" > "$work/diff"; then
		e2e_result "three_${b}_unchanged" host 1
	else
		e2e_result "three_${b}_unchanged" host 0 "/three's $b branch changed: $(head -4 "$work/diff" | tr '\n' ' ')"
	fi
done
for b in layer base; do
	e2e_tree_manifest "$O/$b" > "$work/oci-$b.after"
	if diff "$work/oci-$b.before" "$work/oci-$b.after" > "$work/diff"; then
		e2e_result "oci_${b}_unchanged" host 1
	else
		e2e_result "oci_${b}_unchanged" host 0 "/oci's $b branch changed: $(head -4 "$work/diff" | tr '\n' ' ')"
	fi
done

# Names removed through NFS leave overlayfs-format markers in the upper, whatever format
# the lower that held them used.
for p in "$T/upper/a" "$T/upper/d/d2" "$T/upper/rmd" "$O/upper/o2" "$O/upper/odir3/w"; do
	r=whiteout_${p#"$work/"}
	r=${r//\//_}
	if e2e_is_whiteout "$p"; then
		e2e_result "$r" host 1
	else
		e2e_result "$r" host 0 "${p#"$work/"} is $(stat -c '%F' "$p" 2>&1), want a whiteout (char 0/0)"
	fi
done

for p in "$T/upper/hd" "$O/upper/odir2"; do
	r=opaque_${p#"$work/"}
	r=${r//\//_}
	if e2e_is_opaque "$p"; then
		e2e_result "$r" host 1
	else
		e2e_result "$r" host 0 "${p#"$work/"} is $(stat -c '%F' "$p" 2>&1) with xattrs '$("$E2E_TOOL" list "$p" 2>&1 | tr '\n' ' ')', want trusted.overlay.opaque=y"
	fi
done

echo "---- upper branches at the end ----"
(cd "$work" && find three/upper oci/upper -printf '%y %m %s %p\n' | sort -k4)
e2e_finish
