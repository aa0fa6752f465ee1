# Guest side of tests/e2e/test_security.sh, run by busybox sh in the VM as /host/run.sh.
# Root mounts; the checks of denied operations run as uid 1000 (uxattr runas, no
# supplementary groups). The host checks the branches afterwards.
. /host/lib.sh
R=/mntro
U1="$H/uxattr runas 1000 1000"
MARKER=$(cat $H/marker)
OUTSIDE=$(cat $H/outside)

echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd
echo 'user:x:1000:1000:user:/tmp:/bin/sh' >> /etc/passwd
echo 'root:x:0:' > /etc/group
echo 'user:x:1000:' >> /etc/group

refused() { # refused CMD...: must fail with EROFS or EACCES
	if out=$("$@" 2>&1); then
		bad "'$*' succeeded on the read-only export"
		return 1
	fi
	case $out in
	*Read-only*|*"Permission denied"*) return 0 ;;
	*) bad "'$*' failed with '$out', want Read-only file system or Permission denied"; return 1 ;;
	esac
}

mount_ro() {
	mkdir -p $R
	mount -t nfs -o "vers=3,proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT,mountproto=tcp,nolock,addr=10.0.2.2" \
		10.0.2.2:/ro $R
}

row mount
mount_union /union || { bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }
mount_ro || { bad "mount of 10.0.2.2:/ro failed"; summary; exit 1; }
ck "whoami as uid 1000" "$($U1 id -u)" 1000

# --- as uid 1000, changes to root's 0644 file in root's 0755 directory are refused ---
row denied
ck "d/f mode" "$(stat -c '%a %u' $M/d/f 2>&1)" "644 0"
ck "d mode" "$(stat -c '%a %u' $M/d 2>&1)" "755 0"
fails "not permitted" $U1 chmod 600 $M/d/f
fails "denied" $U1 truncate -s 0 $M/d/f
fails "denied" $U1 sh -c "echo x >> $M/d/f"
fails "denied" $U1 sh -c "echo x > $M/d/f"
fails "denied" $U1 rm -f $M/d/f
fails "denied" $U1 mv $M/d/f $M/d/g
fails "denied" $U1 sh -c "echo new > $M/d/g"
fails "denied" $U1 mkdir $M/d/g
fails "not permitted" $U1 touch -d 2001-01-01 $M/d/f
fails "denied" $U1 rm -f $M/top
fails "denied" $U1 mv $M/top $M/topmoved
fails "denied" $U1 ln -s x $M/d/g
echo 3 > /proc/sys/vm/drop_caches
ck "d/f content after" "$(cat $M/d/f 2>&1)" "root data"
ck "d/f mode after" "$(stat -c '%a %u %s' $M/d/f 2>&1)" "644 0 10"
ck "d listing after" "$(listing $M/d)" f
ck "top content after" "$(cat $M/top 2>&1)" "top data"

# --- POSIX ACLs grant what the mode bits do not: the client believes ACCESS ---
row acl
ck "aclf as uid 1000 (user:1000:rw-)" "$($U1 cat $M/aclf 2>&1)" "acl data"
run $U1 sh -c "echo more >> $M/aclf"
run $U1 sh -c "echo new > $M/acld/new"
ck "acld as uid 1000 (user:1000:rwx)" "$($U1 ls $M/acld 2>&1)" new
ck "aclm as uid 1000 (mask r--)" "$($U1 cat $M/aclm 2>&1)" masked
fails "denied" $U1 sh -c "echo x >> $M/aclm"

# --- root squash: the guest's root creates as 65534 ---
row root_squash
echo root > $M/sq/rootfile || bad "root's create in sq (1777) failed"
echo root > $M/sql/rootfile || bad "root's create in sql (lower, 1777) failed"
mkdir $M/sq/rootdir || bad "root's mkdir in sq failed"
ck "sq/rootfile owner" "$(stat -c %u:%g $M/sq/rootfile 2>&1)" 65534:65534
ck "sql/rootfile owner" "$(stat -c %u:%g $M/sql/rootfile 2>&1)" 65534:65534
$U1 sh -c "echo user > $M/sq/userfile" || bad "uid 1000's create in sq failed"
ck "sq/userfile owner" "$(stat -c %u:%g $M/sq/userfile 2>&1)" 1000:1000
# squashed root is not root: it may not change root's file
fails "denied" sh -c "echo x >> $M/d/f"
fails "not permitted" chmod 600 $M/d/f

# --- the read-only export refuses every write ---
row read_only
ck "rofile content" "$(cat $R/rofile 2>&1)" "ro data"
fails "Read-only" sh -c "echo x > $R/new"
# rofile is 0666: only the export's ro can stop these (EROFS from the server, or EACCES
# when its ACCESS reply already withholds the write bits)
refused sh -c "echo x >> $R/rofile" && echo "guest: an append to /ro/rofile (0666) said: $out"
refused sh -c "echo x > $R/rofile"
refused $U1 sh -c "echo x >> $R/rofile"
fails "Read-only" sh -c "echo x > $R/rodir/new"
fails "Read-only" mkdir $R/newdir
fails "Read-only" rm -f $R/rofile
fails "Read-only" mv $R/rofile $R/moved
fails "Read-only" chmod 600 $R/rofile
refused truncate -s 0 $R/rofile
refused $U1 truncate -s 0 $R/rofile
fails "Read-only" ln -s x $R/sym
fails "Read-only" rmdir $R/rodir
$U1 sh -c "echo x > $R/rodir/new2" 2> /tmp/ro.err && bad "uid 1000's create in /ro/rodir succeeded"
echo 3 > /proc/sys/vm/drop_caches
ck "ro listing after" "$(listing $R)" "rodir rofile"
ck "ro/rodir listing after" "$(listing $R/rodir)" ""
ck "rofile content after" "$(cat $R/rofile 2>&1)" "ro data"

# --- symlinks pointing out of the branches show as symlinks and never reach the host ---
row symlink_escape
[ -e "$OUTSIDE" ] && bad "the host path $OUTSIDE exists in the guest; the check would mean nothing"
for s in esc esc2 escroot; do
	[ -L $M/$s ] || bad "$s is not a symlink: $(stat -c %F $M/$s 2>&1)"
done
ck "readlink esc" "$(readlink $M/esc 2>&1)" "$OUTSIDE"
ck "readlink esc2" "$(readlink $M/esc2 2>&1)" ../outside
for p in esc/marker esc2/marker escroot$OUTSIDE/marker; do
	out=$(cat $M/$p 2>&1)
	case $out in *"$MARKER"*) bad "$p printed the host's marker" ;; esac
	$U1 cat $M/$p 2>&1 | grep -q "$MARKER" && bad "$p as uid 1000 printed the host's marker"
done
out=$(grep -r "$MARKER" $M $R 2>&1) && bad "the marker is readable through NFS: $out"
fails "" sh -c "echo x > $M/esc/planted"
ck "escroot target" "$(readlink $M/escroot 2>&1)" ../../../../../../../..
# the export root's parent is the export root itself
ck "ino of /mnt/.. from inside" "$(cd $M/d/.. && stat -c %i . 2>&1)" "$(stat -c %i $M 2>&1)"

# --- a client no rule admits cannot mount; a rule for 127.0.0.1 admits it ---
row client_rules
umount $M || bad "umount $M failed"
umount $R || bad "umount $R failed"
host_hook deny
if out=$(timeout 60 mount -t nfs -o "vers=3,proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT,mountproto=tcp,nolock,addr=10.0.2.2,retry=0" 10.0.2.2:/union $M 2>&1); then
	bad "mount of /union succeeded under a rule admitting only 192.0.2.1"
	ls $M > /dev/null 2>&1 && bad "and the mount can list the root"
	umount $M
else
	echo "guest: the refused mount said: $out"
	case $out in
	*ermission*|*denied*|*ACCES*) ;;
	*) bad "the refused mount failed with '$out', want permission denied" ;;
	esac
fi
mount_ro || bad "mount of /ro (open to all) failed under the deny rules of /union"
umount $R 2> /dev/null
host_hook allow
mount_union /union || bad "mount of /union failed under a rule admitting 127.0.0.1"
ck "listing after the allow" "$(listing $M)" "acld aclf aclm d esc esc2 escroot sq sql top"
$U1 sh -c "echo allowed > $M/sq/allowed" || bad "uid 1000's create after the allow failed"
umount $M || bad "umount after the allow failed"
kernel_complaints
summary
