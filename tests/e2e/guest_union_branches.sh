#!/bin/sh
# The guest half of test_union_branches.sh, run by busybox sh in the VM as /host/run.sh.
# /tdp (three writable branches over a read-only base, create=tdp) on /mnt/tdp, /rr (the
# same with create=rr, each writable branch a 16 MiB tmpfs) on /mnt/rr. Each row: X_do
# once, X_check after it and again after a restart; the host checks the branches after.
. /host/lib.sh
T=/mnt/tdp
R=/mnt/rr

write_in_place_do() { keep mid "$(ino $T/mid)"; run sh -c "echo appended >> $T/mid"; }
write_in_place_check() {
	ck "mid" "$(cat $T/mid 2>&1 | tr '\n' ' ')" "w1 mid appended "
	ck "mid's fileid" "$(ino $T/mid)" "$(kept mid)"
}
copy_up_top_do() { keep low "$(ino $T/low)"; run sh -c "echo more >> $T/low"; }
copy_up_top_check() {
	ck "low" "$(cat $T/low 2>&1 | tr '\n' ' ')" "base low more "
	ck "low's fileid (copy-up keeps it)" "$(ino $T/low)" "$(kept low)"
}
create_tdp_do() { run sh -c "echo new > $T/d1/new"; keep new "$(ino $T/d1/new)"; }
create_tdp_check() {
	ck "d1/new" "$(cat $T/d1/new 2>&1)" "new"
	ck "d1/new's fileid" "$(ino $T/d1/new)" "$(kept new)"
}
remove_across_do() { run rm $T/x; }
remove_across_check() { gone $T/x; ck "listing has no x" "$(listing $T | grep -cw x)" "0"; }
remove_writable_only_do() { run rm $T/y; }
remove_writable_only_check() { gone $T/y; }
rmdir_spread_do() {
	ck "spread listing" "$(listing $T/spread)" "in-w0 in-w1 in-w2"
	run rm $T/spread/in-w0 $T/spread/in-w1 $T/spread/in-w2
	run rmdir $T/spread
}
rmdir_spread_check() { gone $T/spread; }
rename_across_do() { keep f2 "$(ino $T/f2)"; run mv $T/f2 $T/only1/g; }
rename_across_check() {
	gone $T/f2
	ck "only1/g" "$(cat $T/only1/g 2>&1)" "w2 f2"
	ck "only1/g's fileid" "$(ino $T/only1/g)" "$(kept f2)"
}
rename_over_do() {
	keep src "$(ino $T/src)"
	run mv $T/src $T/over
	ck "over after the move" "$(cat $T/over 2>&1)" "w1 src"
	ck "over's fileid" "$(ino $T/over)" "$(kept src)"
	run rm $T/over
}
rename_over_check() { gone $T/src; gone $T/over; }
rr_spread_do() {
	i=1
	while [ $i -le 30 ]; do
		echo "$i" > $R/dd/f.$i || bad "create dd/f.$i failed"
		i=$((i + 1))
	done
	ls -i $R/dd | sort > /tmp/rr.inos
}
rr_spread_check() {
	ck "dd entries" "$(ls $R/dd | wc -l)" "30"
	ck "dd/f.17" "$(cat $R/dd/f.17 2>&1)" "17"
	ck "dd fileids" "$(ls -i $R/dd | sort | diff - /tmp/rr.inos | grep -c '^[-+][^-+]')" "0"
}
df_sum_do() { :; }
df_sum_check() { # the three 16 MiB tmpfs added up
	ck "df of /rr in bytes" "$(stat -f -c '%b %S' $R | awk '{ print $1 * $2 }')" "50331648"
}

ROWS="write_in_place copy_up_top create_tdp remove_across remove_writable_only rmdir_spread rename_across rename_over rr_spread df_sum"

row mount
mount_union /tdp $T || { bad "mount of 10.0.2.2:/tdp failed"; summary; exit 1; }
mount_union /rr $R || { bad "mount of 10.0.2.2:/rr failed"; summary; exit 1; }
rows_do_check
kernel_complaints
restart_server 1
PHASE=restart
rows_check
kernel_complaints
row unmount
umount $T || bad "umount $T failed"
umount $R || bad "umount $R failed"
summary
