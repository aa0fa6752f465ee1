#!/bin/sh
# The guest half of test_union_mfs.sh, run by busybox sh in the VM as /host/run.sh.
# /union (t1=rw : t2=rw : base=ro, create=mfs:0) on /mnt/u; /host/tree.tar holds the tree
# and its MANIFEST (md5sum lines); /host/env.sh gives WANT_DF_KB (the two branches' size
# added up) and TREE_FILES.
. /host/lib.sh
U=/mnt/u
S=$U/shared

# content: every file of the MANIFEST there with its checksum, and no other file
content_check() {
	[ -f $S/MANIFEST ] || { bad "$S/MANIFEST is missing"; return; }
	(cd $S && md5sum -c MANIFEST 2>&1) | grep -v ': OK$' > /tmp/md5.bad
	ck "files failing their checksum" "$(head -5 /tmp/md5.bad | tr '\n' ' ')" ""
	ck "files in the tree" "$(find $S/d0 $S/d1 $S/d2 $S/d3 -type f | wc -l)" "$TREE_FILES"
	ck "shared/ listing" "$(listing $S)" "MANIFEST base-note d0 d1 d2 d3"
	ck "base-note" "$(cat $S/base-note 2>&1)" "base note"
	ck "/ listing" "$(listing $U)" "etc shared"
}

row mount
mount_union /union $U || { bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }

row statfs_sum
# busybox df -k: Filesystem 1K-blocks Used Available Use% Mounted on
kb=$(df -k $U | awk 'NR == 2 { print $2 }')
echo "df -k $U: $(df -k $U | tail -1)"
awk -v k="$kb" -v w="$WANT_DF_KB" 'BEGIN { exit !(k >= w * 0.97 && k <= w * 1.03) }' ||
	bad "df shows $kb KiB in all, want about $WANT_DF_KB (both branches added up)"

row untar
t0=$(up)
run tar -xf /host/tree.tar -C $S
sync
echo "untar and sync took $(since "$t0") s"
echo "df -k $U after: $(df -k $U | tail -1)"

# read back from the server, not from the pages the untar left in the client's cache
echo 3 > /proc/sys/vm/drop_caches
row content
content_check
kernel_complaints

restart_server 1
PHASE=restart
row content
content_check
kernel_complaints

row unmount
umount $U || bad "umount $U failed"
summary
