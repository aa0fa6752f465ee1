#!/bin/sh
# The guest half of test_union_notify.sh, run by busybox sh in the VM as /host/run.sh.
# A reader opens and reads /mnt/d/f in a loop while the host replaces it in the lower and
# then shadows it with a copy in the upper; every read must be one whole content.
#
# The client caches attributes and names: the mount uses actimeo=0 and lookupcache=none and
# the reader opens the file anew each time (close-to-open), so each open looks the name up
# and each read asks the server; what is checked is then what the server answers.
. /host/lib.sh
F=$M/d/f

sum_of() { head -c 1048576 /dev/zero | tr '\0' "$1" | md5sum | cut -c1-32; }
A=$(sum_of A)
B=$(sum_of B)
C=$(sum_of C)
name_of() {
	case $1 in
	"$A") echo A ;;
	"$B") echo B ;;
	"$C") echo C ;;
	*) echo "torn:$1" ;;
	esac
}

# read_now: what one open and read of the file gives (A, B, C, torn:SUM, or err: why)
read_now() {
	if cat $F > /tmp/one 2> /tmp/one.err; then
		name_of "$(md5 /tmp/one)"
	else
		echo "err: $(head -c 80 /tmp/one.err)"
	fi
}

row mount
mount_union /union "$M" "actimeo=0,lookupcache=none,rsize=65536" ||
	{ bad "mount of 10.0.2.2:/union failed"; summary; exit 1; }
ck "first read" "$(read_now)" A

# Reads until /tmp/stop; one line per read: A, B, C, torn:SUM, or err (a read of a file
# replaced between its open and its read may fail with ESTALE: allowed, never wrong bytes).
reader() {
	while [ ! -f /tmp/stop ]; do
		if cat $F > /tmp/got 2> /dev/null; then
			name_of "$(md5 /tmp/got)"
		else
			echo err
		fi
	done > /tmp/reads
}
# more_reads N: until the reader has done N more reads (at most 60 s)
more_reads() {
	want=$(($(wc -l < /tmp/reads) + $1))
	i=0
	while [ "$(wc -l < /tmp/reads)" -lt $want ] && [ $i -lt 600 ]; do
		usleep 100000
		i=$((i + 1))
	done
	[ $i -lt 600 ] || bad "the reader did not do $1 more reads within 60 s"
}
: > /tmp/reads
reader &
rpid=$!
more_reads 5

row replaced-in-lower
host_hook replace
ck "first open after the replacement" "$(read_now)" B
more_reads 5

row shadowed-by-upper
host_hook shadow
ck "first open after the upper copy" "$(read_now)" C
more_reads 5

row reader
touch /tmp/stop
wait $rpid
echo "reads: $(sort /tmp/reads | uniq -c | tr '\n' ' ')"
ck "torn reads" "$(grep -c '^torn' /tmp/reads)" 0
# A, then B, then C: once a newer content was read, an older one never comes back.
ck "reads of an older content after a newer one" "$(awk '{ v = index("ABC", $1) } v && v < max { n++ } v > max { max = v } END { print n + 0 }' /tmp/reads)" 0
ck "contents read in turn" "$(grep -v err /tmp/reads | uniq | tr '\n' ' ')" "A B C "

kernel_complaints
umount $M || bad "umount failed"
summary
