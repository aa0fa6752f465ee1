#!/bin/sh
# The guest half of test_union_bigdir.sh, run by busybox sh in the VM as /host/run.sh.
# Lists /mnt/big (50,000 merged entries) with ls -li and find, cold, and checks it; again
# after a server restart; then ls -l once more with a restart while it runs; then ls while
# names are created and removed.
. /host/lib.sh
D=$M/big
N=50000

seq -w 0 $((N - 1)) | sed 's/^/n/' > /tmp/want

# check_listing WHAT FILE: FILE holds one name per line; it must be exactly the expected set
check_listing() {
	ck "$1: names" "$(wc -l < "$2")" $N
	sort "$2" > /tmp/got.sorted
	ck "$1: duplicates" "$(uniq -d /tmp/got.sorted | head -5 | tr '\n' ' ')" ""
	if ! cmp -s /tmp/got.sorted /tmp/want; then
		bad "$1: names differ from n00000..n49999: $(diff /tmp/want /tmp/got.sorted | grep '^[-+][^-+]' | head -5 | tr '\n' ' ')"
	fi
}

# READDIRPLUS calls this client has sent on the mount (the kernel's per-operation counts).
rdplus_calls() {
	awk '$1 == "READDIRPLUS:" { n = $2 } END { print n + 0 }' /proc/self/mountstats
}

listing_rows() { # listing_rows LABEL
	echo 3 > /proc/sys/vm/drop_caches
	row ls_l
	t=$(up)
	calls=$(rdplus_calls)
	ls -li $D > /tmp/ls-l || bad "ls -li $D failed"
	echo "TIMING ls -li of $N merged entries ($1, cold caches): $(since "$t") s," \
		"$(($(rdplus_calls) - calls)) READDIRPLUS calls"
	ck "ls -l lines" "$(wc -l < /tmp/ls-l)" $((N + 1))
	ck "ls -l entries without attributes" "$(grep -c '?' /tmp/ls-l)" 0
	awk 'NR > 1 { print $NF }' /tmp/ls-l > /tmp/ls-names
	check_listing "ls -l" /tmp/ls-names
	ck "directories in ls -l" "$(awk '$2 ~ /^d/' /tmp/ls-l | wc -l)" 10
	ck "files of 9 bytes (L/U nNNNNN) in ls -l" "$(awk '$6 == 9' /tmp/ls-l | wc -l)" $((N - 10))

	echo 3 > /proc/sys/vm/drop_caches
	row find
	t=$(up)
	find $D > /tmp/find || bad "find $D failed"
	echo "TIMING find of $N merged entries ($1, cold caches): $(since "$t") s"
	ck "find lines" "$(wc -l < /tmp/find)" $((N + 1))
	grep -v "^$D\$" /tmp/find | sed 's|.*/||' > /tmp/find-names
	check_listing "find" /tmp/find-names

	row fileids
	ck "fileids shared by two names" "$(awk 'NR > 1 { print $1 }' /tmp/ls-l | sort | uniq -d | head -5 | tr '\n' ' ')" ""
	awk '$NF ~ /^n(00000|00010|24999|25000|29999|30000|49999)$/ { print $NF, $1 }' /tmp/ls-l > /tmp/some-inos
	while read -r n i; do
		ck "ls -i against stat for $n" "$i" "$(stat -c %i $D/$n)"
	done < /tmp/some-inos
	ck "names checked against stat" "$(wc -l < /tmp/some-inos)" 7

	row contents
	ck "n00010 (lower only)" "$(cat $D/n00010 2>&1)" "L n00010"
	ck "n24999 (lower only)" "$(cat $D/n24999 2>&1)" "L n24999"
	ck "n25000 (both, upper wins)" "$(cat $D/n25000 2>&1)" "U n25000"
	ck "n29999 (both, upper wins)" "$(cat $D/n29999 2>&1)" "U n29999"
	ck "n49999 (upper only)" "$(cat $D/n49999 2>&1)" "U n49999"
	gone $D/gone00000
	gone $D/gone00099
	gone $D/.wh.gone00000
}

row mount
mount_union /union || { bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }
listing_rows "live"
kernel_complaints

restart_server 1
PHASE=restart
listing_rows "after a restart"
kernel_complaints

# A restart while the listing runs: the kernel resumes with the cookies it holds.
PHASE=mid-listing
echo 3 > /proc/sys/vm/drop_caches
row ls_l
t=$(up)
ls -l $D > /tmp/ls-l2 2> /tmp/ls-l2.err &
lister=$!
usleep 500000
kill -0 $lister 2> /dev/null || echo "note: ls -l ended before the restart was asked for"
restart_server 2
if kill -0 $lister 2> /dev/null; then
	echo "the listing was still running when the restarted server answered"
else
	echo "note: ls -l ended before the restart was done; the mid-listing case was not exercised"
fi
wait $lister || bad "ls -l failed across the restart: $(head -3 /tmp/ls-l2.err | tr '\n' ' ')"
echo "TIMING ls -l of $N merged entries with a restart in the middle: $(since "$t") s"
ck "ls -l lines" "$(wc -l < /tmp/ls-l2)" $((N + 1))
ck "ls -l entries without attributes" "$(grep -c '?' /tmp/ls-l2)" 0
awk 'NR > 1 { print $NF }' /tmp/ls-l2 > /tmp/ls-l2-names
check_listing "ls -l across a restart" /tmp/ls-l2-names
kernel_complaints

# Creates and removes while ls lists: every name that stays must come exactly once, and
# nothing twice; the names that come or go may or may not be in that listing.
PHASE=churn
echo 3 > /proc/sys/vm/drop_caches
row ls
t=$(up)
extras=$(seq -w 0 99 | sed "s|^|$D/extra000|")
removed=$(seq 100 199 | sed "s|^|$D/n00|"; seq 40000 40099 | sed "s|^|$D/n|")
ls $D > /tmp/churn 2> /tmp/churn.err &
lister=$!
for f in $extras; do echo x > $f; done &
rm $removed &
# busybox ls stats each name after reading the directory: a name removed in between is
# an error of ls, not of the listing
wait $lister
wait
echo "time: ls, 100 creates and 200 removes (100 of lower names) at once: $(since "$t") s"
grep -v -E "^ls: $D/n(001[0-9][0-9]|400[0-9][0-9]): No such file or directory\$" /tmp/churn.err > /tmp/churn.bad
ck "ls errors (other than removed names) while the directory changed" "$(head -3 /tmp/churn.bad | tr '\n' ' ')" ""
echo "ls while the directory changed: $(wc -l < /tmp/churn) names, $(wc -l < /tmp/churn.err) removed before ls could stat them"
ck "duplicates in the listing taken while the directory changed" "$(sort /tmp/churn | uniq -d | head -5 | tr '\n' ' ')" ""
# the survivors: all but n00100..n00199 and n40000..n40099
grep -v -E '^n(001[0-9][0-9]|400[0-9][0-9])$' /tmp/want > /tmp/survivors
sort /tmp/churn | grep -v '^extra' > /tmp/churn.sorted
ck "survivors missing from the listing taken while the directory changed" \
	"$(awk 'NR == FNR { seen[$0] = 1; next } !($0 in seen)' /tmp/churn.sorted /tmp/survivors | head -5 | tr '\n' ' ')" ""
echo 3 > /proc/sys/vm/drop_caches
ls $D > /tmp/after-churn
seq -w 0 99 | sed 's/^/extra000/' > /tmp/extras
sort /tmp/survivors /tmp/extras > /tmp/want-after
ck "names after the creates and removes" "$(sort /tmp/after-churn | cmp - /tmp/want-after 2>&1)" ""
ck "gone00000 still hidden" "$(ls -a $D | grep -c '^gone')" 0

row unmount
umount $M || bad "umount failed"
summary
