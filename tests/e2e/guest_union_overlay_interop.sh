#!/bin/sh
# The guest half of test_union_overlay_interop.sh, run by busybox sh in the VM as /host/run.sh.
# Changes the union through NFS, records the NFS view (before and after a server restart),
# unmounts, stacks the same branches with the kernel's overlayfs (read-only, the upper as
# the top lowerdir, metacopy=on) and compares the two views directory by directory.
# Then the way back: changes lower files' attributes in a read-write overlayfs (metacopy=on),
# ships its upper to the host and reads it through NFS as the upper of the export /back.
. /host/lib.sh
BR=$H/br
# The xattr helper runs once per xattr: from the 9p share (no page cache) each start
# reads the whole static binary through 9p, so it runs from a copy in tmpfs
cp $H/uxattr /tmp/uxattr || exit 1
X=/tmp/uxattr
DIRS="back chmod create deldir delete hardlink meta mkdirover opq overwrite renamedir renamefile shadow symlink"

# manifest DIR: manifest.sh without the server's work directory (compared separately) and
# without hardlazy/, where no NFS lookup may happen (see the end)
manifest() { sh $H/manifest.sh "$1" .unionnfsd.work hardlazy; }
# nolinks: a manifest without the link counts of regular files. The server keeps an index
# link to every copied-up lower hard link in its work directory and reports the union's
# count; overlayfs without its own index reports the upper's raw count. That difference is
# logged, not failed: the names, types, modes, owners, sizes, times and contents must agree.
nolinks() { sed -E 's/^([^ ]+ F [^|]*[|][^|]*[|][^|]*[|][^|]*)[|][0-9]+ /\1 /' "$1"; }

row mount
mount_union /union || { bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }

row nfs_changes
cd $M || exit 1
echo n1 > create/new1 || bad "create create/new1"
run mkdir create/sub
echo n2 > create/sub/new2 || bad "create create/sub/new2"
run rm delete/x delete/y delete/w
ck "delete listing" "$(listing delete)" z
run rm -rf deldir
gone deldir
run rm -rf mkdirover
run mkdir mkdirover
echo new > mkdirover/new || bad "create mkdirover/new"
ck "mkdirover listing" "$(listing mkdirover)" new
run mv renamefile/a renamefile/a2
run mv renamefile/b create/b-moved
run mv renamedir/src renamedir/dst
ck "renamedir/dst listing" "$(listing renamedir/dst)" "f1 sub"
run mkdir renamedir/src
echo more >> hardlink/h1 || bad "append to hardlink/h1"
echo more >> hardlazy/h5 || bad "append to hardlazy/h5"
ck "hardlink/h2 after a write to h1" "$(cat hardlink/h2 | tr '\n' ' ')" "hard more "
run chmod 600 hardlink/h3
ck "hardlink/h4 mode after chmod of h3" "$(stat -c %a hardlink/h4)" 600
run chmod 600 chmod/f
run chmod 700 chmod/d
# attribute-only changes of lower files: metadata-only copies (the host checks them)
run chown 1234:5678 meta/own
run touch -d @1500000000 meta/time
# an attribute change then a write: the write completes the copy
run chmod 640 meta/append
echo tail >> meta/append || bad "append to meta/append"
run ln -s target symlink/new
run rm symlink/old
run ln -s target symlink/old
printf 'XYZ' | dd of=overwrite/f bs=1 seek=5000 conv=notrunc 2> /dev/null || bad "write into overwrite/f"
echo o2 > opq/o2 || bad "create opq/o2"
ck "opq listing" "$(listing opq)" "o1 o2"
ck "shadow/fileoverdir" "$(cat shadow/fileoverdir)" "l1 file"
ck "shadow/diroverfile listing" "$(listing shadow/diroverfile)" y
gone hidden_by_mid
cd /
sync
echo 3 > /proc/sys/vm/drop_caches
manifest $M > /tmp/nfs.manifest
cp /tmp/nfs.manifest $H/nfs.manifest
echo "NFS view: $(wc -l < /tmp/nfs.manifest) entries"

row nfs_restart
restart_server 1
manifest $M > /tmp/nfs2.manifest
if ! diff /tmp/nfs.manifest /tmp/nfs2.manifest > /tmp/d; then
	head -20 /tmp/d
	bad "the NFS view changed across the restart: $(grep '^[-+][^-+]' /tmp/d | head -3 | tr '\n' ' ')"
fi
kernel_complaints
row unmount
umount $M || bad "umount $M failed"

row overlay_mount
# 9p carries whiteouts but not trusted.* xattrs: copy the branches into tmpfs (tar keeps
# device nodes, hard links, modes, owners and times) and set the xattrs the host read from
# the branches (e2e_hook_xattrs) on the copy.
host_hook xattrs
mkdir -p /tmp/br /ovl
(cd $BR && tar -cf - .) | (cd /tmp/br && tar -xf -) || bad "tar copy of the branches into tmpfs"
tab=$(printf '\t')
while IFS="$tab" read -r p n v; do
	$X hexset "/tmp/br/$p" "$n" "$v" || bad "setting $n on $p in the copy"
	ck "$n of $p in the copy" "$($X hexget "/tmp/br/$p" "$n")" "$v"
done < $H/xattrs.dump
echo "set $(wc -l < $H/xattrs.dump) xattrs on the tmpfs copy:"
sed 's/^/  /' $H/xattrs.dump
for b in upper lower1 lower2; do
	sh $H/manifest.sh $BR/$b > /tmp/m.share
	sh $H/manifest.sh /tmp/br/$b > /tmp/m.copy
	diff /tmp/m.share /tmp/m.copy > /tmp/d ||
		bad "the tmpfs copy of $b differs: $(grep '^[-+][^-+]' /tmp/d | head -4 | tr '\n' ' ')"
done
# metacopy=on: follow the server's metadata-only copies to their data below (it implies
# following redirects, overlayfs's default here anyway)
mount -t overlay overlay -o "lowerdir=/tmp/br/upper:/tmp/br/lower1:/tmp/br/lower2,metacopy=on" /ovl ||
	{ bad "mount -t overlay failed: $(dmesg | tail -3 | tr '\n' ' ')"; summary; exit 1; }
echo "overlayfs: $(grep ' /ovl ' /proc/mounts)"
manifest /ovl > /tmp/ovl.manifest
cp /tmp/ovl.manifest $H/ovl.manifest
if [ -e /ovl/.unionnfsd.work ]; then
	echo "note: overlayfs shows the server's work directory .unionnfsd.work (left out of the comparison); it holds: $(ls -A /ovl/.unionnfsd.work | tr '\n' ' ')"
fi

if ! diff /tmp/nfs.manifest /tmp/ovl.manifest > /tmp/d; then
	echo "note: link counts (or more) differ between the NFS view (-) and overlayfs (+):"
	grep '^[-+][^-+]' /tmp/d | sed 's/^/    /'
fi
nolinks /tmp/nfs.manifest > /tmp/nfs.cmp
nolinks /tmp/ovl.manifest > /tmp/ovl.cmp

# one row per top-level directory, so a difference points at the operation that made it
for d in $DIRS; do
	row "same_$d"
	grep "^\./$d[/ ]" /tmp/nfs.cmp > /tmp/a
	grep "^\./$d[/ ]" /tmp/ovl.cmp > /tmp/b
	if ! diff /tmp/a /tmp/b > /tmp/d; then
		sed 's/^/    /' /tmp/d
		bad "NFS view (-) and overlayfs view (+) differ: $(grep '^[-+][^-+]' /tmp/d | head -4 | tr '\n' ' ')"
	fi
done
row same_top
grep -v -E "^\./($(echo $DIRS | tr ' ' '|'))[/ ]" /tmp/nfs.cmp > /tmp/a
grep -v -E "^\./($(echo $DIRS | tr ' ' '|'))[/ ]" /tmp/ovl.cmp > /tmp/b
if ! diff /tmp/a /tmp/b > /tmp/d; then
	sed 's/^/    /' /tmp/d
	bad "NFS view (-) and overlayfs view (+) differ: $(grep '^[-+][^-+]' /tmp/d | head -4 | tr '\n' ' ')"
fi
row same_everything
ck "entries in the NFS and overlayfs views" "$(wc -l < /tmp/ovl.manifest)" "$(wc -l < /tmp/nfs.manifest)"
diff /tmp/nfs.cmp /tmp/ovl.cmp > /dev/null || bad "the views differ (see the rows above)"
# A lower hard link written through one name whose other name no NFS client ever looked
# up: the server links that name to the copy lazily, through its own index, which
# overlayfs cannot read. Logged, not failed (overlayfs's own index works the same way).
got=$(cat /ovl/hardlazy/h6 2>&1 | tr '\n' ' ')
if [ "$got" = "lazy more " ]; then
	echo "hardlazy: overlayfs shows the new data through the alias never looked up ($(stat -c %h /ovl/hardlazy/h6) links)"
else
	echo "note: overlayfs shows '$got' through hardlazy/h6, the alias no NFS client looked up after hardlazy/h5 was written (NFS shows 'lazy more')"
fi

# The metadata-only copies the server made: overlayfs shows the new attributes over the
# lower data (the middle layer's for meta/time, which the bottom layer also holds)
row metacopy_in_overlay
ck "chmod/f mode" "$(stat -c %a /ovl/chmod/f)" 600
ck "chmod/f content" "$(md5 /ovl/chmod/f)" "$(md5 $BR/lower2/chmod/f)"
ck "meta/own owner" "$(stat -c %u:%g /ovl/meta/own)" 1234:5678
ck "meta/own content" "$(md5 /ovl/meta/own)" "$(md5 $BR/lower2/meta/own)"
ck "meta/time mtime" "$(stat -c %Y /ovl/meta/time)" 1500000000
ck "meta/time content (lower1's)" "$(md5 /ovl/meta/time)" "$(md5 $BR/lower1/meta/time)"
ck "meta/append mode" "$(stat -c %a /ovl/meta/append)" 640
ck "meta/append content" "$(md5 /ovl/meta/append)" "$({ cat $BR/lower2/meta/append; echo tail; } | md5sum | cut -c1-32)"
umount /ovl || bad "umount /ovl failed"

# The way back: overlayfs itself makes metadata-only copies in a read-write mount over the
# same lowers, and one renamed into another directory (an absolute redirect to its data).
row overlay_rw_changes
mkdir -p /tmp/ou/upper /tmp/ou/work /ovl2
mount -t overlay overlay -o "lowerdir=/tmp/br/lower1:/tmp/br/lower2,upperdir=/tmp/ou/upper,workdir=/tmp/ou/work,metacopy=on" /ovl2 ||
	{ bad "mount -t overlay (read-write, metacopy=on) failed: $(dmesg | tail -3 | tr '\n' ' ')"; summary; exit 1; }
echo "overlayfs: $(grep ' /ovl2 ' /proc/mounts)"
run chmod 751 /ovl2/back/mode
run chown 4321:8765 /ovl2/back/own
run touch -d @1400000000 /ovl2/back/time
run chmod 604 /ovl2/back/src
run mv /ovl2/back/src /ovl2/back/sub/dst
ck "back/mode mode" "$(stat -c %a /ovl2/back/mode)" 751
ck "back/own owner" "$(stat -c %u:%g /ovl2/back/own)" 4321:8765
ck "back/time mtime" "$(stat -c %Y /ovl2/back/time)" 1400000000
ck "back/time content (lower1's)" "$(md5 /ovl2/back/time)" "$(md5 /tmp/br/lower1/back/time)"
ck "back/sub/dst mode" "$(stat -c %a /ovl2/back/sub/dst)" 604
ck "back/sub/dst content" "$(md5 /ovl2/back/sub/dst)" "$(md5 /tmp/br/lower2/back/src)"
ck "back listing" "$(listing /ovl2/back)" "mode own sub time"
# what makes this test worth its time: overlayfs made metadata-only copies, not full ones
for f in mode own time sub/dst; do
	$X get /tmp/ou/upper/back/$f trusted.overlay.metacopy > /dev/null ||
		bad "overlayfs made no metacopy of back/$f (no trusted.overlay.metacopy in its upper)"
done
ck "redirect of back/sub/dst in overlayfs's upper" "$($X get /tmp/ou/upper/back/sub/dst trusted.overlay.redirect)" /back/src
sh $H/manifest.sh /ovl2/back > /tmp/back.ovl
umount /ovl2 || bad "umount /ovl2 failed"

row overlay_upper_shipped
# tar keeps the whiteout, modes, owners and times (the metacopies' holes become zeros: the
# size stays); the xattrs go in a dump like the host's xattrs.dump
(cd /tmp/ou/upper && tar -cf $H/back-upper.tar .) || bad "tar of overlayfs's upper onto the share"
(cd /tmp/ou/upper && find . | sort | while IFS= read -r p; do
	$X list "$p" | while IFS= read -r n; do
		[ -n "$n" ] && printf '%s\t%s\t%s\n' "$p" "$n" "$($X hexget "$p" "$n")"
	done
done) > $H/back-xattrs.dump || bad "dump of the xattrs of overlayfs's upper"
host_hook backupper
restart_server 2

row back_through_nfs
mount_union /back || { bad "mount of 10.0.2.2:/back failed"; summary; exit 1; }
sh $H/manifest.sh $M/back > /tmp/back.nfs
if ! diff /tmp/back.ovl /tmp/back.nfs > /tmp/d; then
	sed 's/^/    /' /tmp/d
	bad "overlayfs's view (-) and the NFS view of its upper (+) differ: $(grep '^[-+][^-+]' /tmp/d | head -4 | tr '\n' ' ')"
fi
gone $M/back/src
echo "back/ through NFS, as overlayfs showed it:"
sed 's/^/    /' /tmp/back.nfs

row back_write
# the first write to the renamed metacopy completes the copy from its redirect's data
echo more >> $M/back/sub/dst || bad "append to back/sub/dst"
ck "back/sub/dst content after the append" "$(md5 $M/back/sub/dst)" "$({ cat /tmp/br/lower2/back/src; echo more; } | md5sum | cut -c1-32)"
ck "back/sub/dst mode after the append" "$(stat -c %a $M/back/sub/dst)" 604
umount $M || bad "umount $M failed"
kernel_complaints
summary
