#!/bin/sh
# The guest half of tests/bench/kernel-bench.sh, run by busybox sh in the VM as /host/run.sh.
# /host/env.sh gives NFS_PORT, MOUNT_PORT, EXPORT, ROUNDS and ENTRIES (what `find` must see
# in the unpacked tree); /host/tree.tar is the source tree. Each round times, through the
# kernel NFS client, on a fresh mount with the page and inode caches dropped so that every
# phase really talks to the server:
#   untar      tar -x of the tree into the mount, then sync (all data on the server)
#   find-stat  find | xargs stat over the tree (LOOKUP, GETATTR, READDIR(PLUS))
#   rm         rm -rf of the tree, then sync
# and prints "RESULT kbench round=N phase=P seconds=T". Any failure prints
# "RESULT kbench guest FAIL <cause>" and exits 1.
set -o pipefail
. /host/env.sh
M=/mnt/bench
D=$M/kernel-bench-tree

up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }'; }
die() {
	echo "RESULT kbench guest FAIL $*"
	umount $M 2> /dev/null
	exit 1
}

# opstats PHASE: the NFS calls of the phase with the client's mean round trip of each, from
# /proc/self/mountstats of the fresh mount (for the log only: it shows where time goes)
opstats() {
	awk -v m=" $M " -v phase="$1" '
		/^device / { mine = index($0, m) > 0; ops = 0 }
		mine && /per-op statistics/ { ops = 1; next }
		mine && ops && NF >= 9 && $2 > 0 {
			name = $1; sub(":", "", name)
			line = line sprintf(" %s=%d(%.1fms)", name, $2, $8 / $2)
		}
		END { print "ops " phase ":" line }' /proc/self/mountstats
}

# cold_mount: (re)mounts the export with nothing of it left in the client's caches
cold_mount() {
	umount $M 2> /dev/null
	sync
	echo 3 > /proc/sys/vm/drop_caches
	mount -t nfs -o "vers=3,proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT,mountproto=tcp,nolock,addr=10.0.2.2" \
		"10.0.2.2:$EXPORT" $M ||
		die "cannot mount 10.0.2.2:$EXPORT (NFS port $NFS_PORT, MOUNT port $MOUNT_PORT): is the server running, is $EXPORT exported, and does it admit non-privileged source ports (insecure)?"
}

mkdir -p $M
# The tree comes from guest memory, so 9p reads never count in the timings.
cp /host/tree.tar /tmp/tree.tar || die "cannot copy /host/tree.tar into the guest's /tmp"
cold_mount
if [ -e $D ]; then
	echo "removing $D left by an interrupted run"
	rm -rf $D || die "cannot remove $D left by an earlier run"
fi

r=1
while [ "$r" -le "$ROUNDS" ]; do
	cold_mount
	t=$(up)
	mkdir $D || die "mkdir $D failed"
	# -o: no chown, so root squashing on the export does not change the work done
	tar -xof /tmp/tree.tar -C $D || die "tar -x into $D failed"
	sync
	echo "RESULT kbench round=$r phase=untar seconds=$(since "$t")"
	opstats untar

	cold_mount
	t=$(up)
	n=$(find $D | xargs stat -c %i | wc -l) || die "find | xargs stat over $D failed"
	echo "RESULT kbench round=$r phase=find-stat seconds=$(since "$t")"
	opstats find-stat
	[ "$n" = "$ENTRIES" ] || die "find | xargs stat saw $n entries in $D, the tarball has $ENTRIES"

	cold_mount
	t=$(up)
	rm -rf $D || die "rm -rf $D failed"
	sync
	echo "RESULT kbench round=$r phase=rm seconds=$(since "$t")"
	opstats rm
	[ -e $D ] && die "$D still exists after rm -rf"
	r=$((r + 1))
done
umount $M || die "umount $M failed"
exit 0
