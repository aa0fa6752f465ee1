#!/bin/sh
# The guest half of test_union_layers.sh, run by busybox sh in the VM as /host/run.sh.
# /three (upper : mid in overlayfs format : base) on /mnt/three, /oci (upper : OCI layer :
# base) on /mnt/oci. Each row: X_do once, X_check after it and again after a restart.
. /host/lib.sh
T=/mnt/three
O=/mnt/oci
Hd=/mnt/hand

# common: fileids from READDIR equal GETATTR's, no two names share one, no marker names
consistent() { # consistent DIR
	ls -Ai "$1" | while read -r i n; do
		[ "$i" = "$(stat -c %i "$1/$n")" ] || echo "$n: readdir $i, getattr $(stat -c %i "$1/$n")"
	done > /tmp/ino.mismatch
	ck "readdir fileids differing from getattr in $1" "$(cat /tmp/ino.mismatch | tr '\n' ' ')" ""
	ck "fileids shared in $1" "$(find "$1" -exec stat -c %i {} + | sort | uniq -d | tr '\n' ' ')" ""
	ck "marker names under $1" "$(find "$1" | grep -E '/\.wh\.|unionnfsd' | tr '\n' ' ')" ""
	ck "duplicates under $1" "$(find "$1" | sort | uniq -d | tr '\n' ' ')" ""
}

# ---------------- /three: mid in overlayfs format ----------------
three_whiteout_mid_do() { :; }
three_whiteout_mid_check() {
	gone $T/b
	fails "No such file" cat $T/b
	gone $T/ghost
	case " $(listing $T) " in *" b "* | *" ghost "*) bad "a whited-out name is listed: $(listing $T)" ;; esac
}
three_shadow_mid_do() { :; }
three_shadow_mid_check() {
	ck "c (mid over base)" "$(cat $T/c 2>&1)" "mid c"
	ck "keep (base only)" "$(cat $T/keep 2>&1)" "base keep"
	ck "mid_only" "$(cat $T/mid_only 2>&1)" "mid only"
	ck "f/g/gfile (deep in base)" "$(cat $T/f/g/gfile 2>&1)" "base g"
}
three_merged_whiteout_do() {
	ck "d listing before" "$(listing $T/d)" "d2 m"
	run rm $T/d/d2
}
three_merged_whiteout_check() {
	ck "d listing" "$(listing $T/d)" "m"
	gone $T/d/d1
	gone $T/d/d2
	ck "d/m" "$(cat $T/d/m 2>&1)" "mid m"
}
three_opaque_mid_do() { :; }
three_opaque_mid_check() {
	ck "e listing (opaque in mid)" "$(listing $T/e)" "new1"
	gone $T/e/e1
	gone $T/e/e2
	ck "e/new1" "$(cat $T/e/new1 2>&1)" "mid new1"
}
three_rmdir_hidden_do() {
	ck "rmd listing before (all hidden by mid)" "$(listing $T/rmd)" ""
	run rmdir $T/rmd
}
three_rmdir_hidden_check() { gone $T/rmd; }
three_unlink_base_do() { run rm $T/a; }
three_unlink_base_check() {
	gone $T/a
	fails "No such file" cat $T/a
}
three_create_over_mid_whiteout_do() {
	gone $T/b2
	echo "new b2" > $T/b2 || bad "create of b2 failed"
}
three_create_over_mid_whiteout_check() { ck "b2" "$(cat $T/b2 2>&1)" "new b2"; }
three_mkdir_over_mid_whiteout_do() {
	gone $T/hd
	run mkdir $T/hd
}
three_mkdir_over_mid_whiteout_check() {
	[ -d $T/hd ] || bad "hd is not a directory: $(stat -c %F $T/hd 2>&1)"
	ck "hd listing (base/hd/x stays hidden)" "$(listing $T/hd)" ""
	gone $T/hd/x
}
three_listing_do() { :; }
three_listing_check() {
	ck "/three listing" "$(listing $T)" "b2 c d e f hd keep mid_only"
	consistent $T
}

# ---------------- /oci: an OCI/aufs-format layer ----------------
oci_whiteout_do() { :; }
oci_whiteout_check() {
	gone $O/o1
	fails "No such file" cat $O/o1
}
oci_marker_names_do() { :; }
oci_marker_names_check() {
	for p in .wh.o1 .wh.o3 .wh.nothing odir/.wh..wh..opq odir2/.wh.z .wh..wh..opq; do
		gone "$O/$p"
	done
	ck "marker names listed" "$(ls -A $O $O/odir $O/odir3 2>&1 | grep '^\.wh\.' | tr '\n' ' ')" ""
}
oci_opaque_do() { :; }
oci_opaque_check() {
	ck "odir listing (.wh..wh..opq)" "$(listing $O/odir)" "fresh"
	gone $O/odir/k1
	ck "odir/fresh" "$(cat $O/odir/fresh 2>&1)" "layer fresh"
}
oci_rmdir_hidden_do() {
	ck "odir2 listing before (z hidden by .wh.z)" "$(listing $O/odir2)" ""
	run rmdir $O/odir2
	gone $O/odir2
	run mkdir $O/odir2
}
oci_rmdir_hidden_check() {
	[ -d $O/odir2 ] || bad "odir2 is not a directory after mkdir: $(stat -c %F $O/odir2 2>&1)"
	ck "odir2 listing" "$(listing $O/odir2)" ""
	gone $O/odir2/z
}
oci_merged_do() {
	ck "odir3 listing before" "$(listing $O/odir3)" "v w"
	run rm $O/odir3/w
}
oci_merged_check() {
	ck "odir3 listing" "$(listing $O/odir3)" "v"
	gone $O/odir3/w
}
oci_unlink_base_do() { run rm $O/o2; }
oci_unlink_base_check() { gone $O/o2; }
oci_create_over_wh_do() {
	gone $O/o3
	echo "new o3" > $O/o3 || bad "create of o3 failed"
}
oci_create_over_wh_check() { ck "o3" "$(cat $O/o3 2>&1)" "new o3"; }
oci_listing_do() { :; }
oci_listing_check() {
	ck "/oci listing" "$(listing $O)" "keep layerfile o3 odir odir2 odir3"
	consistent $O
}

# ---------------- /hand: a lower branch changed by hand ----------------
hand_changed_do() {
	ck "/hand listing before" "$(listing $Hd)" "a b gd"
	ck "/hand/gd listing before" "$(listing $Hd/gd)" "g"
	keep hand.a.ino "$(ino $Hd/a)"
	exec 7< $Hd/b
	host_hook hand
	echo 3 > /proc/sys/vm/drop_caches
	got=$(cat <&7 2>&1)
	exec 7<&-
	case $got in
	b | *"Stale"* | *"No such file"* | *"I/O error"*) echo "read through a descriptor of the removed b: '$got'" ;;
	*) bad "read through a descriptor of the file removed by hand gave '$got', want 'b' or an error" ;;
	esac
	echo 3 > /proc/sys/vm/drop_caches
}
hand_changed_check() {
	ck "/hand listing" "$(listing $Hd)" "a c d"
	ck "c added by hand" "$(cat $Hd/c 2>&1)" "by hand"
	ck "d/e added by hand" "$(cat $Hd/d/e 2>&1)" "e"
	gone $Hd/b
	gone $Hd/gd
	ck "a fileid" "$(ino $Hd/a)" "$(kept hand.a.ino)"
	ck "a" "$(cat $Hd/a 2>&1)" "a"
	consistent $Hd
}

ROWS="three_whiteout_mid three_shadow_mid three_merged_whiteout three_opaque_mid three_rmdir_hidden three_unlink_base three_create_over_mid_whiteout three_mkdir_over_mid_whiteout three_listing oci_whiteout oci_marker_names oci_opaque oci_rmdir_hidden oci_merged oci_unlink_base oci_create_over_wh oci_listing hand_changed"

row mount
mount_union /three $T || { bad "mount of 10.0.2.2:/three failed"; summary; exit 1; }
mount_union /oci $O || { bad "mount of 10.0.2.2:/oci failed"; summary; exit 1; }
# no cached lookups: the server, not the client's dentry cache, must say what is gone
mount_union /hand $Hd lookupcache=none || { bad "mount of 10.0.2.2:/hand failed"; summary; exit 1; }
# every name's fileid before any change, to compare after the restart
(cd /mnt && find three oci -exec stat -c '%n %i' {} + | sort) > /tmp/inos.start
rows_do_check
kernel_complaints
(cd /mnt && find three oci -exec stat -c '%n %i' {} + | sort) > /tmp/inos.live

restart_server 1
PHASE=restart
rows_check
row fileids
(cd /mnt && find three oci -exec stat -c '%n %i' {} + | sort) > /tmp/inos.restart
ck "fileids changed by the restart" "$(diff /tmp/inos.live /tmp/inos.restart | grep '^[-+][^-+]' | tr '\n' ' ')" ""
# names present at the start and still there (not recreated) keep their fileid
awk 'NR == FNR { start[$1] = $2; next }
	($1 in start) && start[$1] != $2 && $1 !~ /(b2|hd|odir2|o3)$/ { print $1, start[$1], "->", $2 }' \
	/tmp/inos.start /tmp/inos.restart > /tmp/inos.changed
ck "fileids changed since the start" "$(cat /tmp/inos.changed | tr '\n' ' ')" ""
kernel_complaints

row unmount
umount $T || bad "umount $T failed"
umount $O || bad "umount $O failed"
umount $Hd || bad "umount $Hd failed"
summary
