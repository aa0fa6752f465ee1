#!/bin/sh
# The guest half of test_kernel_client.sh, run by busybox sh inside the VM as /host/run.sh.
# Mounts the host's export through the portmapper (no port options), uses it like a normal
# file system, asks the host to restart the server while mounted, and carries on.
# Every check prints what it expected; the first failure ends the script with status 1.
M=/mnt
H=/host

up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }'; }
step() { echo "== $*"; }
fail() {
	echo "FAIL: $*"
	echo "---- dmesg tail ----"
	dmesg | tail -25
	exit 1
}
expect() { # expect WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}
manifest() { sh "$H/manifest.sh" "$1"; }
# restart_server N: ask the host for restart number N and wait until it is done
restart_server() {
	touch $H/restart-request.$1
	i=0
	while [ ! -f $H/restart-done.$1 ]; do
		usleep 200000
		i=$((i + 1))
		[ $i -lt 900 ] || fail "the host did not restart the server within 180 s"
	done
}

step "mount 10.0.2.2:/union through the portmapper"
t=$(up)
mount -t nfs -o vers=3,proto=tcp,nolock 10.0.2.2:/union $M || fail "mount -t nfs 10.0.2.2:/union"
echo "time: mount $(since "$t") s"
grep " $M nfs" /proc/mounts || fail "no nfs entry for $M in /proc/mounts"
[ -z "$(ls -A $M)" ] || fail "the export is not empty at the start: $(ls -A $M)"

step "create a tree"
mkdir -p $M/tree/a/b/c $M/tree/d $M/tree/empty || fail "mkdir -p"
echo hello > $M/tree/a/hello || fail "write a/hello"
for i in $(seq 1 50); do echo "file $i" > $M/tree/d/f$i || fail "write d/f$i"; done
expect "entries in tree/d" "$(ls $M/tree/d | wc -l)" 50
expect "tree/a/hello" "$(cat $M/tree/a/hello)" hello
expect "tree/d/f37" "$(cat $M/tree/d/f37)" "file 37"

step "write a 100 MiB file and read it back"
t=$(up)
dd if=/dev/urandom bs=1M count=100 2>/dev/null | tee $M/big | md5sum | cut -c1-32 > /tmp/big.md5 ||
	fail "writing $M/big"
sync
echo "time: write 100 MiB (including /dev/urandom) $(since "$t") s"
expect "size of big" "$(stat -c %s $M/big)" 104857600
echo 3 > /proc/sys/vm/drop_caches
t=$(up)
got=$(md5sum < $M/big | cut -c1-32)
echo "time: read 100 MiB $(since "$t") s"
expect "md5 of big read back" "$got" "$(cat /tmp/big.md5)"
cp /tmp/big.md5 $H/big.md5

step "rename"
echo data > $M/tree/r1
ino=$(stat -c %i $M/tree/r1)
mv $M/tree/r1 $M/tree/a/b/r2 || fail "mv across directories"
[ ! -e $M/tree/r1 ] || fail "tree/r1 still exists after mv"
expect "inode after rename" "$(stat -c %i $M/tree/a/b/r2)" "$ino"
expect "content after rename" "$(cat $M/tree/a/b/r2)" data
mv $M/tree/d $M/tree/d2 || fail "mv a directory"
expect "entries after renaming the directory" "$(ls $M/tree/d2 | wc -l)" 50
mv $M/tree/a/b/r2 $M/tree/a/b/r3 || fail "mv within a directory"
echo replaced > $M/tree/victim
mv $M/tree/a/b/r3 $M/tree/victim || fail "mv over an existing file"
expect "content after mv over a file" "$(cat $M/tree/victim)" data

step "hard links"
echo linked > $M/tree/h1
ln $M/tree/h1 $M/tree/a/h2 || fail "ln"
ls -li $M/tree/h1 $M/tree/a/h2
expect "inode of the second name" "$(stat -c %i $M/tree/a/h2)" "$(stat -c %i $M/tree/h1)"
expect "link count" "$(stat -c %h $M/tree/h1)" 2
echo more >> $M/tree/a/h2
expect "content through the other name" "$(cat $M/tree/h1 | tr '\n' ' ')" "linked more "

step "symlinks"
ln -s ../hello $M/tree/a/b/sl || fail "ln -s"
expect "readlink" "$(readlink $M/tree/a/b/sl)" "../hello"
expect "read through the symlink" "$(cat $M/tree/a/b/sl)" hello
ln -s /nonexistent/absolute $M/tree/dangling || fail "ln -s dangling"
expect "readlink dangling" "$(readlink $M/tree/dangling)" /nonexistent/absolute
[ -L $M/tree/dangling ] || fail "dangling is not a symlink"

step "chmod"
chmod 600 $M/tree/a/hello && expect "mode 600" "$(stat -c %a $M/tree/a/hello)" 600
chmod 4755 $M/tree/h1 && expect "mode 4755" "$(stat -c %a $M/tree/h1)" 4755
chmod 1777 $M/tree/empty && expect "mode 1777" "$(stat -c %a $M/tree/empty)" 1777
chown 1234:5678 $M/tree/victim && expect "owner" "$(stat -c %u:%g $M/tree/victim)" 1234:5678

step "truncate"
dd if=/dev/urandom of=$M/tree/t bs=1k count=64 2>/dev/null
truncate -s 1000 $M/tree/t && expect "size after truncate" "$(stat -c %s $M/tree/t)" 1000
head -c 1000 $M/tree/t > /tmp/t.head
truncate -s 1048576 $M/tree/t && expect "size after extending" "$(stat -c %s $M/tree/t)" 1048576
echo 3 > /proc/sys/vm/drop_caches
expect "bytes kept" "$(head -c 1000 $M/tree/t | md5sum)" "$(md5sum < /tmp/t.head)"
expect "non-zero bytes in the extension" "$(tail -c +1001 $M/tree/t | tr -d '\000' | wc -c)" 0
rm /tmp/t.head

step "ls -l"
ls -la $M $M/tree $M/tree/a $M/tree/a/b || fail "ls -l"

step "cp -a a tree in and compare it"
mkdir -p /tmp/src
cp -a /bin /lib /etc /tmp/src/ || fail "assembling the source tree"
cp -a $H/src /tmp/src/host || fail "copying the host's tree out of /host"
t=$(up)
cp -a /tmp/src $M/copy || fail "cp -a into the mount"
sync
echo "time: cp -a $(du -sk /tmp/src | cut -f1) KiB, $(find /tmp/src | wc -l) entries: $(since "$t") s"
echo 3 > /proc/sys/vm/drop_caches
manifest /tmp/src > /tmp/src.manifest
manifest $M/copy > /tmp/copy.manifest
if ! diff /tmp/src.manifest /tmp/copy.manifest > /tmp/manifest.diff; then
	head -40 /tmp/manifest.diff
	fail "the copied tree differs from its source"
fi
diff -r /tmp/src/lib $M/copy/lib || fail "diff -r of lib"
echo "compared $(wc -l < /tmp/src.manifest) entries"

step "rm -rf"
rm -rf $M/copy || fail "rm -rf"
[ ! -e $M/copy ] || fail "copy still exists after rm -rf"
rm -rf /tmp/src /tmp/*.manifest /tmp/manifest.diff

step "restart the server while mounted"
exec 3< $M/tree/a/b/sl
exec 4>> $M/tree/appended
echo before >&4
for f in big tree/a/hello tree/h1 tree/a/h2 tree/victim tree/d2/f1 tree/d2 tree/a/b/sl; do
	echo "$f $(stat -c '%i %s' $M/$f)"
done > /tmp/inodes.before
t=$(up)
restart_server 1
echo "time: restart handshake $(since "$t") s"
echo 3 > /proc/sys/vm/drop_caches
for f in big tree/a/hello tree/h1 tree/a/h2 tree/victim tree/d2/f1 tree/d2 tree/a/b/sl; do
	echo "$f $(stat -c '%i %s' $M/$f)" || fail "stat $f after the restart"
done > /tmp/inodes.after
if ! diff /tmp/inodes.before /tmp/inodes.after; then
	fail "inode numbers or sizes changed across the restart"
fi
expect "read a file after the restart" "$(cat $M/tree/a/hello)" hello
expect "read through a descriptor opened before" "$(cat <&3)" hello
echo after >&4 || fail "write through a descriptor opened before"
exec 3<&- 4>&-
expect "appended file" "$(cat $M/tree/appended | tr '\n' ' ')" "before after "
t=$(up)
got=$(md5sum < $M/big | cut -c1-32)
echo "time: read 100 MiB after the restart $(since "$t") s"
expect "md5 of big after the restart" "$got" "$(cat /tmp/big.md5)"
mkdir $M/after || fail "mkdir after the restart"
echo new > $M/after/new || fail "write after the restart"
ln $M/after/new $M/after/new-link || fail "ln after the restart"
mv $M/tree/d2/f2 $M/after/f2-moved || fail "mv after the restart"
rm $M/tree/d2/f3 || fail "rm after the restart"
ls -l $M $M/after > /dev/null || fail "ls after the restart"
if dmesg | grep -i -E "stale|fileid changed"; then
	fail "the kernel logged stale handles or changed fileids"
fi

step "restart the server in the middle of a write"
( dd if=/dev/urandom bs=1M count=40 2>/dev/null | tee $M/inflight | md5sum | cut -c1-32 \
	> /tmp/inflight.md5 ) &
writer=$!
# let some data reach the server first
i=0
while [ "$(stat -c %s $M/inflight 2>/dev/null || echo 0)" -lt 4194304 ]; do
	usleep 100000
	i=$((i + 1))
	[ $i -lt 600 ] || fail "the background write did not start"
done
restart_server 2
wait $writer || fail "the write across the restart failed"
sync || fail "sync after the restart"
echo 3 > /proc/sys/vm/drop_caches
expect "size of the file written across the restart" "$(stat -c %s $M/inflight)" 41943040
expect "md5 of the file written across the restart" "$(md5sum < $M/inflight | cut -c1-32)" \
	"$(cat /tmp/inflight.md5)"
if dmesg | grep -i -E "stale|fileid changed"; then
	fail "the kernel logged stale handles or changed fileids"
fi

step "final listing"
manifest $M > $H/manifest.guest || fail "listing the mount"
echo "$(wc -l < $H/manifest.guest) entries in the mount"

step "unmount"
umount $M || fail "umount"
echo "guest: all steps passed"
