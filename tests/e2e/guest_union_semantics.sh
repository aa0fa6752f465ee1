#!/bin/sh
# The guest half of test_union_semantics.sh, run by busybox sh in the VM as /host/run.sh.
# Each row has an action (X_do, run once) and checks (X_check, run right after the action
# and again after a server restart with the page, dentry and inode caches dropped).
. /host/lib.sh

# --- lookup: shadowing in both directions, prepared on the host ---
lookup_shadow_do() { :; }
lookup_shadow_check() {
	[ -f $M/fod ] && [ ! -d $M/fod ] || bad "fod (upper file over a lower dir) is not a regular file: $(stat -c %F $M/fod 2>&1)"
	ck "fod content" "$(cat $M/fod 2>&1)" "upper file"
	fails "Not a directory" ls $M/fod/child
	[ -d $M/dof ] || bad "dof (upper dir over a lower file) is not a directory: $(stat -c %F $M/dof 2>&1)"
	ck "dof listing" "$(listing $M/dof)" "u"
	ck "f_shadow (both branches) content" "$(cat $M/f_shadow 2>&1)" "upper shadow"
	ck "merged dir listing" "$(listing $M/merged)" "l1 l2 u1"
	ck "merged/l2 content" "$(cat $M/merged/l2 2>&1)" "l2"
	ck "merged/u1 content" "$(cat $M/merged/u1 2>&1)" "u1"
	ck "readlink of the lower symlink" "$(readlink $M/sym_lower 2>&1)" f_getattr
	ck "read through the lower symlink" "$(cat $M/sym_lower 2>&1)" getattr
}

# --- getattr: the fileid stays through a copy-up (utimes) ---
getattr_fileid_do() {
	keep f_getattr.ino "$(ino $M/f_getattr)"
	run touch -d "2010-01-02 03:04:05" $M/f_getattr
}
getattr_fileid_check() {
	ck "f_getattr fileid after copy-up" "$(ino $M/f_getattr)" "$(kept f_getattr.ino)"
	ck "f_getattr mtime" "$(stat -c %Y $M/f_getattr)" "$(date -d '2010-01-02 03:04:05' +%s)"
	ck "f_getattr content" "$(cat $M/f_getattr 2>&1)" getattr
}

# --- setattr: chmod of a lower file, chmod of a lower directory ---
setattr_chmod_do() {
	keep f_chmod.ino "$(ino $M/f_chmod)"
	ck "f_chmod mode before" "$(stat -c %a $M/f_chmod)" 644
	run chmod 600 $M/f_chmod
}
setattr_chmod_check() {
	ck "f_chmod mode" "$(stat -c %a $M/f_chmod 2>&1)" 600
	ck "f_chmod content" "$(cat $M/f_chmod 2>&1)" chmod-data
	ck "f_chmod fileid" "$(ino $M/f_chmod)" "$(kept f_chmod.ino)"
	ck "f_chmod mtime kept" "$(stat -c %Y $M/f_chmod)" 1000000000
}
setattr_dir_do() {
	keep dir_setattr.ino "$(ino $M/dir_setattr)"
	keep dir_setattr.k1.ino "$(ino $M/dir_setattr/k1)"
	run chmod 700 $M/dir_setattr
}
setattr_dir_check() {
	ck "dir_setattr mode" "$(stat -c %a $M/dir_setattr 2>&1)" 700
	ck "dir_setattr fileid" "$(ino $M/dir_setattr)" "$(kept dir_setattr.ino)"
	ck "dir_setattr listing" "$(listing $M/dir_setattr)" k1
	ck "dir_setattr/k1 fileid" "$(ino $M/dir_setattr/k1)" "$(kept dir_setattr.k1.ino)"
	ck "dir_setattr/k1 content" "$(cat $M/dir_setattr/k1 2>&1)" k1
}

# --- truncate (SETATTR size) and an O_TRUNC open ---
truncate_do() {
	keep f_trunc.ino "$(ino $M/f_trunc)"
	ck "f_trunc content before" "$(md5 $M/f_trunc)" "$(cat $H/f_trunc.md5)"
	run truncate -s 100 $M/f_trunc
	keep f_otrunc.ino "$(ino $M/f_otrunc)"
	: > $M/f_otrunc || bad "O_TRUNC open of f_otrunc failed"
}
truncate_check() {
	ck "f_trunc size" "$(stat -c %s $M/f_trunc 2>&1)" 100
	ck "f_trunc content" "$(md5 $M/f_trunc)" "$(cat $H/f_trunc-100.md5)"
	ck "f_trunc fileid" "$(ino $M/f_trunc)" "$(kept f_trunc.ino)"
	ck "f_otrunc size" "$(stat -c %s $M/f_otrunc 2>&1)" 0
	ck "f_otrunc fileid" "$(ino $M/f_otrunc)" "$(kept f_otrunc.ino)"
}

# --- write: append, and in the middle ---
write_do() {
	keep f_append.ino "$(ino $M/f_append)"
	keep f_middle.ino "$(ino $M/f_middle)"
	echo line2 >> $M/f_append || bad "append to f_append failed"
	printf XY | dd of=$M/f_middle bs=1 seek=4 conv=notrunc 2> /dev/null || bad "dd into f_middle failed"
}
write_check() {
	ck "f_append content" "$(cat $M/f_append 2>&1 | tr '\n' ' ')" "line1 line2 "
	ck "f_append fileid" "$(ino $M/f_append)" "$(kept f_append.ino)"
	ck "f_middle content" "$(cat $M/f_middle 2>&1)" "0123XY6789abcdef"
	ck "f_middle fileid" "$(ino $M/f_middle)" "$(kept f_middle.ino)"
}

# --- a sparse lower file: read, then a write in the middle copies it up ---
sparse_do() {
	keep sparse.ino "$(ino $M/sparse)"
	ck "sparse md5 before the write" "$(md5 $M/sparse)" "$(cat $H/sparse.md5)"
	printf Z | dd of=$M/sparse bs=1M seek=16 conv=notrunc 2> /dev/null || bad "dd into sparse failed"
	sync
	echo 3 > /proc/sys/vm/drop_caches
}
sparse_check() {
	ck "sparse size" "$(stat -c %s $M/sparse 2>&1)" 67108864
	ck "sparse md5" "$(md5 $M/sparse)" "$(cat $H/sparse-after.md5)"
	ck "sparse fileid" "$(ino $M/sparse)" "$(kept sparse.ino)"
}

# --- create over a removed lower name ---
create_over_removed_do() {
	keep f_recreate.ino "$(ino $M/f_recreate)"
	run rm $M/f_recreate
	gone $M/f_recreate
	echo "new data" > $M/f_recreate || bad "create of f_recreate failed"
}
create_over_removed_check() {
	ck "f_recreate content" "$(cat $M/f_recreate 2>&1)" "new data"
	ck "f_recreate size" "$(stat -c %s $M/f_recreate 2>&1)" 9
	[ "$(ino $M/f_recreate)" != "$(kept f_recreate.ino)" ] ||
		bad "the new f_recreate has the fileid of the removed lower file ($(kept f_recreate.ino))"
}

# --- unlink of a lower file, and of a file in both branches ---
unlink_lower_do() { run rm $M/f_unlink; }
unlink_lower_check() {
	gone $M/f_unlink
	case " $(listing $M) " in *" f_unlink "*) bad "f_unlink still listed" ;; esac
	fails "No such file" cat $M/f_unlink
}
unlink_both_do() { run rm $M/f_both; }
unlink_both_check() {
	gone $M/f_both
	case " $(listing $M) " in *" f_both "*) bad "f_both still listed" ;; esac
}

# --- rmdir: a merged dir whose lower entries are all deleted; a dir with lower entries ---
rmdir_merged_do() {
	run rm $M/dir_alldel/a $M/dir_alldel/b $M/dir_alldel/c
	ck "dir_alldel listing after the removes" "$(listing $M/dir_alldel)" ""
	run rmdir $M/dir_alldel
}
rmdir_merged_check() {
	gone $M/dir_alldel
	case " $(listing $M) " in *" dir_alldel "*) bad "dir_alldel still listed" ;; esac
}
rmdir_notempty_do() { fails "not empty" rmdir $M/dir_notempty; }
rmdir_notempty_check() {
	ck "dir_notempty listing" "$(listing $M/dir_notempty)" x
	ck "dir_notempty/x content" "$(cat $M/dir_notempty/x 2>&1)" x
}

# --- mkdir after rm -rf of a lower dir: a new empty (opaque) dir ---
mkdir_opaque_do() {
	run rm -rf $M/dir_rmrf
	gone $M/dir_rmrf
	run mkdir $M/dir_rmrf
}
mkdir_opaque_check() {
	[ -d $M/dir_rmrf ] || bad "dir_rmrf is not a directory: $(stat -c %F $M/dir_rmrf 2>&1)"
	ck "dir_rmrf listing" "$(listing $M/dir_rmrf)" ""
	gone $M/dir_rmrf/f1
	gone $M/dir_rmrf/sub
	ck "dir_rmrf link count" "$(stat -c %h $M/dir_rmrf 2>&1)" 2
}

# --- rename of a lower file ---
rename_file_do() {
	keep f_rename.ino "$(ino $M/f_rename)"
	run mv $M/f_rename $M/f_renamed
}
rename_file_check() {
	gone $M/f_rename
	ck "f_renamed content" "$(cat $M/f_renamed 2>&1)" "rename me"
	ck "f_renamed fileid" "$(ino $M/f_renamed)" "$(kept f_rename.ino)"
}

# --- rename of a lower directory (a redirect, never EXDEV), then a new dir at its old name ---
rename_dir_do() {
	for p in dir_rename dir_rename/c1 dir_rename/c2 dir_rename/sub dir_rename/sub/c3; do
		echo "${p#dir_rename} $(ino $M/$p)"
	done > /tmp/keep.dir_rename.inos
	run mv $M/dir_rename $M/dir_renamed
	[ -e $M/dir_renamed/c1 ] || return
	run mkdir $M/dir_rename
}
rename_dir_check() {
	[ -d $M/dir_renamed ] || { bad "dir_renamed is missing: $(ls -la $M/dir_renamed 2>&1)"; return; }
	ck "dir_renamed listing" "$(listing $M/dir_renamed)" "c1 c2 sub"
	ck "dir_renamed/sub listing" "$(listing $M/dir_renamed/sub)" "c3"
	ck "dir_renamed/c2 content" "$(cat $M/dir_renamed/c2 2>&1)" c2
	ck "dir_renamed/sub/c3 content" "$(cat $M/dir_renamed/sub/c3 2>&1)" c3
	for p in "" /c1 /c2 /sub /sub/c3; do
		echo "$p $(ino $M/dir_renamed$p)"
	done > /tmp/dir_renamed.inos
	ck "fileids in the renamed tree" "$(cat /tmp/dir_renamed.inos | tr '\n' ,)" \
		"$(cat /tmp/keep.dir_rename.inos | tr '\n' ,)"
	ck "dir_renamed mtime kept" "$(stat -c %Y $M/dir_renamed)" 1000000000
	[ -d $M/dir_rename ] || bad "the new dir_rename at the old name is missing"
	ck "new dir_rename listing (opaque)" "$(listing $M/dir_rename)" ""
}

# --- hard links: write through one lower alias ---
hardlink_do() {
	ck "hl_a and hl_b fileids before" "$(ino $M/hl_a)" "$(ino $M/hl_b)"
	ck "hl_b link count before" "$(stat -c %h $M/hl_b)" 2
	keep hl.ino "$(ino $M/hl_a)"
	# descriptors opened before the copy-up, read after it (5) and after the restart (6)
	exec 5< $M/hl_b 6< $M/hl_b
	echo more >> $M/hl_a || bad "append to hl_a failed"
}
hardlink_check() {
	ck "hl_a content" "$(cat $M/hl_a 2>&1 | tr '\n' ' ')" "hardlink data more "
	ck "hl_b content (the other alias)" "$(cat $M/hl_b 2>&1 | tr '\n' ' ')" "hardlink data more "
	ck "hl_a fileid" "$(ino $M/hl_a)" "$(kept hl.ino)"
	ck "hl_b fileid" "$(ino $M/hl_b)" "$(kept hl.ino)"
	ck "hl_a link count" "$(stat -c %h $M/hl_a 2>&1)" 2
	ck "hl_b link count" "$(stat -c %h $M/hl_b 2>&1)" 2
	if [ $PHASE = live ]; then
		ck "hl_b through a descriptor opened before the copy-up" "$(cat <&5 | tr '\n' ' ')" "hardlink data more "
	else
		ck "hl_b through a descriptor opened before the copy-up" "$(cat <&6 | tr '\n' ' ')" "hardlink data more "
	fi
}

# --- symlink over a removed name ---
symlink_over_removed_do() {
	run rm $M/f_symover
	run ln -s f_getattr $M/f_symover
}
symlink_over_removed_check() {
	[ -L $M/f_symover ] || bad "f_symover is not a symlink: $(stat -c %F $M/f_symover 2>&1)"
	ck "readlink f_symover" "$(readlink $M/f_symover 2>&1)" f_getattr
	ck "read through f_symover" "$(cat $M/f_symover 2>&1)" getattr
}

# --- a user's char device 0/0 over a removed lower name: refused, or kept as a device ---
mknod_0_0_do() {
	run rm $M/f_mknod
	if out=$(mknod $M/f_mknod c 0 0 2>&1); then
		keep mknod made
		echo "mknod made" > $H/mknod.result
	else
		keep mknod refused
		echo "mknod refused: $out" > $H/mknod.result
		echo "note: mknod c 0 0 refused: $out"
	fi
}
mknod_0_0_check() {
	if [ "$(kept mknod)" = made ]; then
		[ -c $M/f_mknod ] || bad "the char device 0/0 made through NFS is gone or changed: $(ls -la $M/f_mknod 2>&1)"
		ck "f_mknod device numbers" "$(stat -c %t:%T $M/f_mknod 2>&1)" 0:0
	else
		gone $M/f_mknod
	fi
}

# --- refused changes: O_EXCL create and mkdir over existing names, chmod and truncate
#     without permission (no copy-up may follow; the host checks the upper) ---
refused_do() {
	fails "exists" sh -c "set -C; echo new > $M/f_excl"
	fails "exists" mkdir $M/f_excl
	fails "exists" mkdir $M/f_shadow
	fails "not permitted" $H/uxattr runas 1000 1000 chmod 600 $M/f_noperm
	fails "denied" $H/uxattr runas 1000 1000 truncate -s 0 $M/f_noperm
	fails "denied" $H/uxattr runas 1000 1000 sh -c "echo x >> $M/f_noperm"
}
refused_check() {
	ck "f_excl content" "$(cat $M/f_excl 2>&1)" excl
	ck "f_noperm mode" "$(stat -c %a $M/f_noperm 2>&1)" 644
	ck "f_noperm content" "$(cat $M/f_noperm 2>&1)" "no permission"
}

# --- link of a lower file: one fileid, nlink 2 ---
link_lower_do() {
	keep f_linksrc.ino "$(ino $M/f_linksrc)"
	run ln $M/f_linksrc $M/f_linknew
	fails "exists" ln $M/f_linksrc $M/f_excl
	fails "" ln $M/dir_target $M/dir_link
}
link_lower_check() {
	ck "f_linksrc fileid" "$(ino $M/f_linksrc)" "$(kept f_linksrc.ino)"
	ck "f_linknew fileid" "$(ino $M/f_linknew)" "$(kept f_linksrc.ino)"
	ck "f_linksrc link count" "$(stat -c %h $M/f_linksrc 2>&1)" 2
	ck "f_linknew link count" "$(stat -c %h $M/f_linknew 2>&1)" 2
	ck "f_linknew content" "$(cat $M/f_linknew 2>&1)" "link source"
	gone $M/dir_link
}

# --- unlink one alias of a lower hard link: the other's nlink drops ---
hardlink_unlink_do() {
	keep hl_d.ino "$(ino $M/hl_d)"
	run rm $M/hl_c
}
hardlink_unlink_check() {
	gone $M/hl_c
	ck "hl_d link count" "$(stat -c %h $M/hl_d 2>&1)" 1
	ck "hl_d content" "$(cat $M/hl_d 2>&1)" pair
	ck "hl_d fileid" "$(ino $M/hl_d)" "$(kept hl_d.ino)"
}

# --- renames: over an existing lower file, there and back, into a lower-only dir, inside a
#     renamed dir ---
rename_more_do() {
	keep f_rsrc.ino "$(ino $M/f_rsrc)"
	run mv $M/f_rsrc $M/f_rdst
	keep f_rb.ino "$(ino $M/f_rb)"
	run mv $M/f_rb $M/f_rb2
	run mv $M/f_rb2 $M/f_rb
	keep f_into.ino "$(ino $M/f_into)"
	run mv $M/f_into $M/dir_target/
	keep dir_rn2.x.ino "$(ino $M/dir_rn2/inner/x)"
	run mv $M/dir_rn2 $M/dir_rn2b
	run mv $M/dir_rn2b/inner/x $M/dir_rn2b/x2
}
rename_more_check() {
	gone $M/f_rsrc
	ck "f_rdst content (renamed over)" "$(cat $M/f_rdst 2>&1)" rsrc
	ck "f_rdst fileid" "$(ino $M/f_rdst)" "$(kept f_rsrc.ino)"
	gone $M/f_rb2
	ck "f_rb content" "$(cat $M/f_rb 2>&1)" "rename back"
	ck "f_rb fileid" "$(ino $M/f_rb)" "$(kept f_rb.ino)"
	ck "dir_target listing" "$(listing $M/dir_target)" "f_into t1"
	ck "dir_target/f_into fileid" "$(ino $M/dir_target/f_into)" "$(kept f_into.ino)"
	gone $M/dir_rn2
	ck "dir_rn2b listing" "$(listing $M/dir_rn2b)" "inner x2"
	ck "dir_rn2b/inner listing" "$(listing $M/dir_rn2b/inner)" ""
	ck "dir_rn2b/x2 fileid" "$(ino $M/dir_rn2b/x2)" "$(kept dir_rn2.x.ino)"
	ck "dir_rn2b/x2 content" "$(cat $M/dir_rn2b/x2 2>&1)" x
}

# --- rmdir of a dir holding an upper-only file; a pure-upper file removed; mkdir -p ---
misc_do() {
	run rm $M/dir_mix/l
	echo new > $M/dir_mix/new || bad "create dir_mix/new"
	fails "not empty" rmdir $M/dir_mix
	echo pure > $M/f_pure || bad "create f_pure"
	run rm $M/f_pure
	run mkdir -p $M/dir_deep/a/b/c
	fails "Not a directory" rmdir $M/f_excl
}
misc_check() {
	ck "dir_mix listing" "$(listing $M/dir_mix)" new
	gone $M/f_pure
	ck "dir_deep/a listing" "$(listing $M/dir_deep/a)" b
	[ -d $M/dir_deep/a/b/c ] || bad "dir_deep/a/b/c is missing"
}

# --- first writes to lower files from two clients at once (a second mount that shares no
#     cache with the first): one copy-up, both writes kept, one fileid ---
M2=/mnt2
CC=$(seq 0 29)
concurrent_copyup_do() {
	mount_union /union $M2 nosharecache || { bad "second mount with nosharecache failed"; return; }
	: > /tmp/cc.err
	for i in $CC; do
		printf A | dd of=$M/cc$i bs=1 seek=100 conv=notrunc 2>> /tmp/cc.err &
		printf B | dd of=$M2/cc$i bs=1 seek=60000 conv=notrunc 2>> /tmp/cc.err &
	done
	wait
	grep -v -E 'records (in|out)|bytes .* copied' /tmp/cc.err > /tmp/cc.bad
	[ -s /tmp/cc.bad ] && bad "concurrent first writes failed: $(head -3 /tmp/cc.bad | tr '\n' ' ')"
	sync
	echo 3 > /proc/sys/vm/drop_caches
}
concurrent_copyup_check() {
	for i in $CC; do
		for m in $M $M2; do
			ck "$m/cc$i: the bytes other than x (A at 100, B at 60000)" \
				"$(dd if=$m/cc$i bs=1 skip=100 count=1 2> /dev/null)$(tr -d x < $m/cc$i)" AAB
		done
		ck "cc$i fileid on both mounts" "$(ino $M2/cc$i)" "$(ino $M/cc$i)"
	done
	ck "cc0 size" "$(stat -c %s $M/cc0 2>&1)" 65536
}

# --- rename of a copied-up lower hard link ---
hardlink_rename_do() {
	keep hr.ino "$(ino $M/hr_a)"
	run chmod 600 $M/hr_a
	run mv $M/hr_a $M/hr_c
}
hardlink_rename_check() {
	gone $M/hr_a
	for n in hr_b hr_c; do
		ck "$n fileid" "$(ino $M/$n)" "$(kept hr.ino)"
		ck "$n mode" "$(stat -c %a $M/$n 2>&1)" 600
		ck "$n link count" "$(stat -c %h $M/$n 2>&1)" 2
		ck "$n content" "$(cat $M/$n 2>&1)" "renamed link"
	done
}

# --- readdir: exact listing, no duplicates, no markers, fileids equal to GETATTR's ---
readdir_do() { :; }
readdir_check() {
	want="$(for i in $CC; do echo cc$i; done | sort | tr '\n' ' ')dir_deep dir_mix dir_notempty dir_rename dir_renamed dir_rmrf dir_rn2b dir_setattr dir_target dof f_append f_chmod f_excl f_getattr f_linknew f_linksrc f_middle f_noperm f_otrunc f_rb f_rdst f_recreate f_renamed f_shadow f_symover f_trunc fod hl_a hl_b hl_d hr_b hr_c merged sparse sym_lower"
	[ "$(kept mknod)" = made ] && want=$(echo "$want f_mknod" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
	ck "root listing" "$(listing $M)" "$want"
	ck "duplicate names in the root" "$(ls -A $M | sort | uniq -d | tr '\n' ' ')" ""
	ck "marker or internal names anywhere" "$(find $M | grep -E '/\.wh\.|unionnfsd|/\.nfs' | tr '\n' ' ')" ""
	ck "duplicates anywhere" "$(find $M | sort | uniq -d | tr '\n' ' ')" ""
	for n in .wh.f_unlink .wh.f_both .unionnfsd.work .wh..wh..opq; do
		gone "$M/$n"
	done
	gone $M/dir_rmrf/.wh..wh..opq
	# READDIR(PLUS) fileid (ls -i) against GETATTR (stat) for every entry
	ls -Ai $M | while read -r i n; do
		[ "$i" = "$(stat -c %i "$M/$n")" ] || echo "$n: readdir $i, getattr $(stat -c %i "$M/$n")"
	done > /tmp/ino.mismatch
	ck "readdir fileids differing from getattr" "$(cat /tmp/ino.mismatch | tr '\n' ' ')" ""
	# two distinct objects never share a fileid (hl_a/hl_b are one object)
	find $M ! -name hl_b ! -name f_linknew ! -name hr_c -exec stat -c %i {} + | sort | uniq -d > /tmp/ino.dup
	ck "fileids shared by distinct objects" "$(cat /tmp/ino.dup | tr '\n' ' ')" ""
	# entry types from READDIR (find -type) agree with stat
	ck "directories by find -type d" "$(cd $M && find . -maxdepth 1 -type d | sort | tr '\n' ' ')" \
		". ./dir_deep ./dir_mix ./dir_notempty ./dir_rename ./dir_renamed ./dir_rmrf ./dir_rn2b ./dir_setattr ./dir_target ./dof ./merged "
}

ROWS="lookup_shadow getattr_fileid setattr_chmod setattr_dir truncate write sparse create_over_removed unlink_lower unlink_both rmdir_merged rmdir_notempty mkdir_opaque rename_file rename_dir hardlink symlink_over_removed mknod_0_0 refused link_lower hardlink_unlink rename_more misc concurrent_copyup hardlink_rename readdir"

ROW=mount
row mount
mount_union /union || { bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }
echo "guest: mounted; $(ls $M | wc -l) entries at the top"
rows_do_check
kernel_complaints

t=$(up)
restart_server 1
echo "time: restart handshake $(since "$t") s"
PHASE=restart
rows_check
kernel_complaints

ROW=unmount
row unmount
exec 5<&- 6<&-
umount $M2 || bad "umount $M2 failed"
umount $M || bad "umount failed"
summary
