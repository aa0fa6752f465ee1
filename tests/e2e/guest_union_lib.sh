# Guest-side helpers of the union end-to-end tests, sourced by busybox sh in the VM from
# /host/lib.sh (tests/e2e/lib.sh copies it there, with /host/env.sh giving the ports).
#
# Checks never stop the script: each one that fails prints "FAIL[row/phase] what: got, want"
# and marks its row, and `summary` prints one "RESULT <row> <phase> PASS|FAIL <first symptom>"
# line per row and phase, then exits 1 when anything failed. Rows are checked once before a
# server restart (phase "live") and again after it (phase "restart").
M=/mnt
H=/host
. $H/env.sh
PHASE=live
ROW=setup
: > /tmp/rows
: > /tmp/failed

up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }'; }

# row NAME: the checks that follow belong to NAME
row() {
	ROW=$1
	grep -qx "$ROW $PHASE" /tmp/rows || echo "$ROW $PHASE" >> /tmp/rows
	echo "== $ROW ($PHASE) at $(up) s"
}
bad() { # bad SYMPTOM: marks the current row failed
	echo "FAIL[$ROW/$PHASE] $*"
	grep -q "^$ROW $PHASE " /tmp/failed || echo "$ROW $PHASE $*" >> /tmp/failed
}
ck() { # ck WHAT GOT WANT
	[ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"
}
# run CMD...: the command must succeed
run() {
	out=$("$@" 2>&1) || { bad "'$*' failed: $out"; return 1; }
	return 0
}
# fails ERRTEXT CMD...: the command must fail with a message containing ERRTEXT
fails() {
	want=$1
	shift
	if out=$("$@" 2>&1); then
		bad "'$*' succeeded, want an error '$want'"
		return 1
	fi
	case $out in
	*"$want"*) return 0 ;;
	*) bad "'$*' failed with '$out', want '$want'"; return 1 ;;
	esac
}
gone() { # gone PATH: lookup must say ENOENT
	if [ -e "$1" ] || [ -L "$1" ]; then
		bad "$1 exists ($(stat -c %F "$1" 2>&1)), want ENOENT"
	fi
}
ino() { stat -c %i "$1" 2>&1; }
# keep KEY VALUE / kept KEY: values remembered across the restart (the guest's /tmp stays)
keep() { echo "$2" > "/tmp/keep.$1"; }
kept() { cat "/tmp/keep.$1" 2> /dev/null; }
# listing DIR: the names in DIR, sorted, on one line
listing() { ls -A "$1" 2>&1 | sort | tr '\n' ' ' | sed 's/ $//'; }
md5() { md5sum < "$1" 2>&1 | cut -c1-32; }

mount_union() { # mount_union EXPORT [DIR [MORE_OPTIONS]]
	mkdir -p "${2:-$M}"
	mount -t nfs -o "vers=3,proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT,mountproto=tcp,nolock,addr=10.0.2.2${3:+,$3}" \
		"10.0.2.2:$1" "${2:-$M}"
}

# restart_server N: asks the host for restart number N and waits until it is done
restart_server() {
	touch $H/restart-request.$1
	i=0
	while [ ! -f $H/restart-done.$1 ]; do
		usleep 200000
		i=$((i + 1))
		if [ $i -ge 900 ]; then
			bad "the host did not restart the server within 180 s"
			return 1
		fi
	done
	echo 3 > /proc/sys/vm/drop_caches
}

# host_hook NAME: has the host run its e2e_hook_NAME and waits until it is done
host_hook() {
	touch $H/hook-request.$1
	i=0
	while [ ! -f $H/hook-done.$1 ]; do
		usleep 200000
		i=$((i + 1))
		if [ $i -ge 900 ]; then
			bad "the host did not run e2e_hook_$1 within 180 s"
			return 1
		fi
	done
}

# rows_do_check / rows_check: each row of $ROWS made and checked, or only checked again
rows_do_check() {
	for r in $ROWS; do
		row $r
		${r}_do
		${r}_check
	done
}
rows_check() {
	for r in $ROWS; do
		row $r
		${r}_check
	done
}

kernel_complaints() { # the NFS client noticed changed fileids or stale handles
	row kernel-log
	if dmesg | grep -i -E "stale|fileid changed" > /tmp/dmesg.bad; then
		bad "the kernel logged: $(head -3 /tmp/dmesg.bad | tr '\n' ' ')"
	fi
}

summary() {
	echo "---- results ----"
	while read -r r p; do
		f=$(grep "^$r $p " /tmp/failed | head -1)
		if [ -n "$f" ]; then
			echo "RESULT $r $p FAIL ${f#"$r $p "}"
		else
			echo "RESULT $r $p PASS"
		fi
	done < /tmp/rows
	[ ! -s /tmp/failed ]
}
