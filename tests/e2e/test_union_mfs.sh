#!/bin/bash
# Several writable branches through a real Linux kernel NFS client in qemu: an export
#   /union = T1=rw : T2=rw : BASE=ro   -o create=mfs:0 (statfs=sum, the default)
# where T1 and T2 are two 8 MiB tmpfs file systems mounted here, over a read-only base
# directory. The guest (tests/e2e/guest_union_mfs.sh) untars a tree of about 10 MiB into
# shared/, a directory only the base holds: larger than either branch, so the untar
# succeeds only when new names go to both. With mfs:0 every new name goes to the branch with
# the most space free at that moment (its parent directories made there first), so the two
# fill about evenly. The guest checks df (the branches' sizes added up) and every file's
# checksum from the tarball's MANIFEST, before and after a server restart. The host then
# checks that each branch holds at least 30% of the bytes, every file is in exactly one
# branch with the right content, the base is unchanged and unionnfsd-ctl check is clean.
#
# Ports 12065 (NFS) and 12066 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
# When tmpfs cannot be mounted here (a container without CAP_SYS_ADMIN) it says so and skips.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

BRANCH_MIB=8

e2e_init union-mfs 12065 12066
T1=$work/t1
T2=$work/t2
B=$work/base
mkdir -p "$T1" "$T2" "$B"

mfs_cleanup() {
	local t
	if [ -n "$srv" ] && kill -0 "$srv" 2> /dev/null; then
		kill -KILL "$srv" 2> /dev/null
		wait "$srv" 2> /dev/null
	fi
	for t in "$T1" "$T2"; do
		mountpoint -q "$t" && { umount "$t" || umount -l "$t"; }
	done
	e2e_cleanup
}
trap mfs_cleanup EXIT

for t in "$T1" "$T2"; do
	if ! out=$(mount -t tmpfs -o "size=${BRANCH_MIB}m,mode=0755" unfs-mfs "$t" 2>&1); then
		echo "SKIP: union-mfs: cannot mount tmpfs (size ${BRANCH_MIB} MiB) on $t ($out); the test needs two small file systems of their own as branches (run it as root outside a restricted container)"
		exit 0
	fi
done

# --- the base: shared/ holds the tree after the untar, but only the base has it ---
mkdir -p "$B/shared" "$B/etc"
echo "base note" > "$B/shared/base-note"
echo "base conf" > "$B/etc/conf"
e2e_tree_manifest "$B" > "$work/base_unchanged.before"

# --- the tree: 4 directories of 2 subdirectories each, 200 files of mixed sizes, ~10 MiB:
# more than one branch's 8 MiB (small: the emulated guest's NFS client is slow). Every 4 KiB
# block names its file and its place, so data landing in the wrong file or offset shows in
# the checksums. Bash builtins only: a process per file costs seconds on a busy machine. ---
src=$work/src
printf -v pad '%4096s' ''
pad=${pad// /x}
# mkfile PATH SIZE
mkfile() {
	local k=0 left=$2 blk line
	{
		while [ "$left" -gt 0 ]; do
			printf -v line '%s block %06d ' "${1#"$src/"}" "$k"
			blk=$line${pad:0:$((4095 - ${#line}))}
			blk=$blk$'\n'
			[ "$left" -lt 4096 ] && blk=${blk:0:$left}
			printf '%s' "$blk"
			left=$((left - ${#blk}))
			k=$((k + 1))
		done
	} > "$1"
}
for d in 0 1 2 3; do mkdir -p "$src/d$d/s0" "$src/d$d/s1"; done
for i in $(seq 0 199); do
	if [ $((i % 20)) = 0 ]; then
		size=$((512 * 1024 + (i * 7919) % (256 * 1024)))    # 10 files of 512-768 KiB
	elif [ $((i % 3)) = 0 ]; then
		size=$((24 * 1024 + (i * 4099) % (48 * 1024)))      # 63 of 24-72 KiB
	else
		size=$((1 + (i * 811) % (8 * 1024)))                # 127 of up to 8 KiB
	fi
	d=$src/d$((i % 4))
	[ $((i % 3)) = 1 ] || d=$d/s$((i % 2))
	mkfile "$d/f$i" "$size" || e2e_fail "cannot write $d/f$i"
done
tree_bytes=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
(cd "$src" && find d0 d1 d2 d3 -type f | sort | xargs md5sum) > "$src/MANIFEST" ||
	e2e_fail "cannot checksum the tree"
tar -C "$src" -cf "$share/tree.tar" MANIFEST d0 d1 d2 d3 || e2e_fail "cannot make the tarball"
echo "host: the tree holds $(wc -l < "$src/MANIFEST") files, $tree_bytes bytes; each branch $BRANCH_MIB MiB"
[ "$tree_bytes" -gt $((BRANCH_MIB * 1024 * 1024)) ] ||
	e2e_fail "the tree ($tree_bytes bytes) fits in one branch; the test would prove nothing"
cat >> "$share/env.sh" <<-EOF
	WANT_DF_KB=$((2 * BRANCH_MIB * 1024))
	TREE_FILES=$(wc -l < "$src/MANIFEST")
EOF

E2E_EXPORTS=(-e "/union=$T1=rw:$T2=rw:$B=ro" -o create=mfs:0,no_root_squash,insecure)
e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union = t1=rw:t2=rw:base=ro, create=mfs:0"
e2e_run_vm "$E2E_HERE/guest_union_mfs.sh" 240
[ "$E2E_RESTARTS" = 1 ] || e2e_result restarts host 0 "the guest asked for $E2E_RESTARTS restarts, want 1"

# the inode map against the branches, while the server still runs
"$BUILD/unionnfsd-ctl" --state "$state" check > "$work/check.out" 2>&1
rc=$?
echo "host: unionnfsd-ctl check (status $rc): $(tail -n 1 "$work/check.out")"
e2e_result ctl_check host $((rc == 0)) "unionnfsd-ctl check exited $rc: $(tail -n 3 "$work/check.out" | tr '\n' ' ')"
e2e_stop_server

e2e_unchanged base_unchanged "$B"

# Every file of the tree in exactly one branch, with its content; the bytes per branch
for t in t1 t2; do
	(cd "$work/$t/shared" && find . -type f ! -name MANIFEST -printf '%P\n' | sort | xargs -r md5sum) |
		sed "s/^/$t /"
	(cd "$work/$t/shared" && find . -type f ! -name MANIFEST -printf 'size %s %P\n') | sed "s/^/$t /"
done > "$work/branches.sums"
awk -v out="$work/spread.bytes" '
	NR == FNR { want[$2] = $1; next }
	$2 == "size" { bytes[$1] += $3; next }
	{ seen[$3]++; if (!($3 in want)) print $3 " in " $1 " is not in the tree"
	  else if (want[$3] != $2) print $3 " in " $1 ": md5 " $2 ", want " want[$3] }
	END { for (p in want) if (seen[p] != 1) print p " is in " seen[p] + 0 " branches, want 1"
	      print bytes["t1"] + 0, bytes["t2"] + 0 > out }' "$src/MANIFEST" - < "$work/branches.sums" > "$work/spread.bad"
read -r b1 b2 < "$work/spread.bytes"
e2e_result files_in_one_branch host "$([ -s "$work/spread.bad" ] && echo 0 || echo 1)" \
	"$(wc -l < "$work/spread.bad") problems: $(head -3 "$work/spread.bad" | tr '\n' ' ')"
echo "host: t1 holds $b1 bytes of the tree, t2 $b2 (of $tree_bytes)"
for t in 1 2; do
	v=b$t
	[ $((${!v} * 10)) -ge $((tree_bytes * 3)) ]
	e2e_result "t${t}_share" host $((! $?)) "t$t holds ${!v} of the tree's $tree_bytes bytes, want at least 30%"
done

echo "---- branches at the end (directories) ----"
(cd "$work" && find t1 t2 -type d -printf '%m %p\n' | sort -k2)
df -k "$T1" "$T2"
e2e_finish
