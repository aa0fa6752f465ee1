#!/bin/sh
# The guest half of tests/bench/kernel-bench.sh, run by busybox sh in the VM as /host/run.sh:
# a lab user's day on one export, through the kernel NFS client.
# /host/env.sh gives NFS_PORT, MOUNT_PORT, EXPORT, ENTRIES and FILES (what `find` must see in
# the unpacked tree, all entries and regular files), LOWER (the tree's copy already on the
# server, relative to the export; empty: no lower-only phases) and MEASURE (1: the host
# measures the server's disk usage between the lower-only phases); /host/tree.tar is the tree.
# Every phase starts on a fresh mount with the page, dentry and inode caches dropped, so that
# it really talks to the server, and ends (where it writes) with sync, so that everything it
# wrote is on the server. Phases, one RESULT line each ("RESULT kw phase=P seconds=T"):
#   untar   tar -x of the tree into a new directory kw-fresh
#   find    find over it
#   ls      ls -lR over it
#   read    every file read (find | xargs cat)
#   cp      cp -a of the tree to kw-fresh.copy
#   rename  every file of kw-fresh renamed in place (one RENAME each)
#   rm      rm -rf of both trees
# and on LOWER, the tree that was there before (on a union: only in the lower branch):
#   lower-read    every file read
#   lower-chmod   chmod -R g+w (on a union: a copy-up of every file and directory)
#   lower-chown   chown -R to KW_OWNER (checked untimed: root must not be squashed)
#   lower-touch   every file's access and modification times set to KW_TIME (checked untimed)
#   lower-append  a line appended to every file
#   lower-rm      rm -rf of it (on a union: whiteouts)
# With MEASURE=1 the guest has the host measure, outside the timed phases, the server's disk
# usage after lower-read and after each of lower-chmod, lower-chown and lower-touch (host
# hooks usage_base, usage_chmod, usage_chown, usage_touch; kernel-bench.sh prints the growth).
# "RESULT kw sum=S md5=M" gives a checksum of the tree's content after read, lower-read and
# lower-append (untimed: the host compares them across servers). Any failure prints
# "RESULT kw guest FAIL <cause>" and exits 1.
set -o pipefail
. /host/env.sh
M=/mnt/bench
D=$M/kw-fresh
C=$M/kw-fresh.copy
KW_OWNER=1234:1234
KW_TIME='2020-02-02 02:02:02'

up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }'; }
die() {
	echo "RESULT kw guest FAIL $*"
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
	T0=$(up)
}

done_phase() { # done_phase NAME: the time since cold_mount
	echo "RESULT kw phase=$1 seconds=$(since "$T0")"
	opstats "$1"
}

# host_usage NAME: has the host run kernel-bench.sh's e2e_hook_usage_NAME (e2e_run_vm's hook
# protocol over the 9p share, which offers nothing to block on) and waits until it is done
host_usage() {
	[ "$MEASURE" = 1 ] || return 0
	touch "/host/hook-request.usage_$1" || die "cannot write /host/hook-request.usage_$1"
	i=0
	while [ ! -f "/host/hook-done.usage_$1" ]; do
		usleep 100000
		i=$((i + 1))
		[ $i -lt 1800 ] || die "the host did not measure its disk usage (usage_$1) within 180 s"
	done
}

# sum DIR: one md5 over every file's relative path and content, in path order; the tarball's
# names hold no blanks (kernel-bench.sh leaves such names out), so plain xargs is safe
sum() {
	(cd "$1" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
}

mkdir -p $M
# The tree comes from guest memory, so 9p reads never count in the timings.
cp /host/tree.tar /tmp/tree.tar || die "cannot copy /host/tree.tar into the guest's /tmp"
cold_mount
for x in $D $C; do
	if [ -e $x ]; then
		echo "removing $x left by an interrupted run"
		rm -rf $x || die "cannot remove $x left by an earlier run"
	fi
done
if [ -n "$LOWER" ]; then
	n=$(find "$M/$LOWER" -type f | wc -l)
	[ "$n" = "$FILES" ] || die "$M/$LOWER holds $n files, the tarball $FILES: the lower-only tree is not in place"
fi

cold_mount
mkdir $D || die "mkdir $D failed"
# -o: no chown, so root squashing on the export does not change the work done
tar -xof /tmp/tree.tar -C $D || die "tar -x into $D failed"
sync
done_phase untar

cold_mount
n=$(find $D | wc -l) || die "find over $D failed"
done_phase find
[ "$n" = "$ENTRIES" ] || die "find saw $n entries in $D, the tarball has $ENTRIES"

cold_mount
ls -lR $D > /dev/null || die "ls -lR $D failed"
done_phase ls

cold_mount
find $D -type f | xargs cat > /dev/null || die "reading the files of $D failed"
done_phase read
echo "RESULT kw sum=read md5=$(sum $D)"

cold_mount
cp -a $D $C || die "cp -a $D $C failed"
sync
done_phase cp

# one mv per file: busybox has no batch rename, and a process per file is the same guest
# cost on every server
cold_mount
find $D -type f | while read -r f; do
	mv "$f" "$f.renamed" || exit 1
done || die "renaming the files of $D failed"
sync
done_phase rename
n=$(find $D -type f -name '*.renamed' | wc -l)
[ "$n" = "$FILES" ] || die "$n files of $D renamed, want $FILES"

cold_mount
rm -rf $D $C || die "rm -rf $D $C failed"
sync
done_phase rm
[ -e $D ] || [ -e $C ] && die "$D or $C still exists after rm -rf"

if [ -n "$LOWER" ]; then
	L=$M/$LOWER
	cold_mount
	find "$L" -type f | xargs cat > /dev/null || die "reading the files of $L failed"
	done_phase lower-read
	echo "RESULT kw sum=lower-read md5=$(sum "$L")"
	host_usage base

	cold_mount
	chmod -R g+w "$L" || die "chmod -R g+w $L failed"
	sync
	done_phase lower-chmod
	host_usage chmod

	cold_mount
	chown -R $KW_OWNER "$L" ||
		die "chown -R $KW_OWNER $L failed: the export must not squash root (no_root_squash)"
	sync
	done_phase lower-chown
	n=$(find "$L" ! -user ${KW_OWNER%:*} -o ! -group ${KW_OWNER#*:} | wc -l)
	[ "$n" = 0 ] || die "$n entries of $L are not owned by $KW_OWNER after chown -R"
	host_usage chown

	# xargs: one touch process per batch of names, not one per file
	cold_mount
	find "$L" -type f | xargs touch -d "$KW_TIME" || die "touch -d '$KW_TIME' of the files of $L failed"
	sync
	done_phase lower-touch
	touch -d "$KW_TIME" /tmp/kw-time
	n=$(find "$L" -type f -newer /tmp/kw-time | wc -l)
	[ "$n" = 0 ] || die "$n files of $L are newer than $KW_TIME after touch -d"
	host_usage touch

	# the shell's own echo and redirection: no process per file
	cold_mount
	find "$L" -type f | while read -r f; do
		echo "appended by the kw benchmark" >> "$f" || exit 1
	done || die "appending to the files of $L failed"
	sync
	done_phase lower-append
	echo "RESULT kw sum=lower-append md5=$(sum "$L")"

	cold_mount
	rm -rf "$L" || die "rm -rf $L failed"
	sync
	done_phase lower-rm
	[ -e "$L" ] && die "$L still exists after rm -rf"
fi
umount $M || die "umount $M failed"
exit 0
