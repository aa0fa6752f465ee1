#!/bin/bash
# Inode-map scaling: the map's size on disk per entry, the server's start-up time and its
# memory while serving a large map (targets: under 200 B per entry, under 200 ms, under
# 32 MiB RSS with 1,000,000 entries).
#
#   tests/bench/map-scale.sh [ENTRIES]        (default 1000000)
#
# Environment: BUILD (default build), MAP_DIR (default $BUILD/bench/mapscale-ENTRIES: the
# tree and state directory, kept for the next run; REBUILD=1 makes them again),
# STARTS (start-up measurements, default 5), LOOKUP_DIRS (directories the LOOKUP workload
# visits, default 10), MAP_NFSPORT and MAP_MOUNTPORT (default 13057 and 13058; no
# portmapper registration).
#
# Prints RESULT lines:
#   RESULT workload=map-bytes-per-entry value=V unit=B
#   RESULT workload=map-startup value=V unit=ms        (median of STARTS starts)
#   RESULT workload=map-startup-cold value=V unit=ms   (the map file evicted from the page cache first)
#   RESULT workload=map-rss-idle value=V unit=MiB      (VmRSS after start-up)
#   RESULT workload=map-rss value=V unit=MiB           (VmHWM after the workloads)
#   RESULT workload=map-check value=V unit=s           (unionnfsd-ctl check of every record)
#   RESULT workload=map-getattr value=V unit=ops/s     (GETATTR, 32 in flight, no check running)
#   RESULT workload=map-check-getattr value=V unit=ops/s (the same while the check runs)
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
N=${1:-1000000}
MAP_DIR=${MAP_DIR:-$PWD/$BUILD/bench/mapscale-$N}
STARTS=${STARTS:-5}
LOOKUP_DIRS=${LOOKUP_DIRS:-10}
NFSPORT=${MAP_NFSPORT:-13057}
MOUNTPORT=${MAP_MOUNTPORT:-13058}
URL="nfs://127.0.0.1/bench?nfsport=$NFSPORT&mountport=$MOUNTPORT"
SERVER_PID=

say() { echo "map-scale: $*" >&2; }
die() { say "$*"; exit 1; }

cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

for t in nfs-ls timeout od; do
	command -v $t >/dev/null || die "$t is missing; run deploy/install-deps"
done
make -s "$BUILD/unionnfsd" "$BUILD/unionnfsd-ctl" "$BUILD/bench/mkmap" >&2
LOADGEN=$BUILD/bench/loadgen
[ -x "$LOADGEN" ] || make -s "$LOADGEN" >&2 2>/dev/null || LOADGEN=

for p in $NFSPORT $MOUNTPORT; do
	if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
		die "port $p is in use; stop whatever listens there"
	fi
done

now_ns() { date +%s%N; }

# The map and its tree, made once (a million empty files take about half a minute). A map
# from before mkmap kept the files' identities ("done" without "done.ids") is made again:
# its first check would spend its time writing them.
if [ "${REBUILD:-0}" = 1 ] || [ ! -f "$MAP_DIR/done.ids" ]; then
	say "building a $N-entry map in $MAP_DIR"
	rm -rf "$MAP_DIR"
	mkdir -p "$MAP_DIR"
	"$BUILD/bench/mkmap" --state "$MAP_DIR/state" --entries "$N" \
		--branches "$MAP_DIR/up:$MAP_DIR/low" >&2
	touch "$MAP_DIR/done" "$MAP_DIR/done.ids"
fi
sync

map_bytes=$(stat -c %s "$MAP_DIR/state/inodes.mdb")
# Bytes the B-trees really use (the file can hold free pages after deletes).
say "map file $map_bytes bytes for $N entries"
echo "RESULT workload=map-bytes-per-entry value=$(awk -v b="$map_bytes" -v n="$N" \
	'BEGIN { printf "%.1f", b / n }') unit=B"

# One NFSv3 NULL call over TCP (rpcinfo -n still asks rpcbind for the port): succeeds
# only on an accepted, successful reply to our xid.
null_call() (
	exec 3<>"/dev/tcp/127.0.0.1/$NFSPORT" || exit 1
	printf '\x80\x00\x00\x28\x12\x34\x56\x78\x00\x00\x00\x00\x00\x00\x00\x02''\x00\x01\x86\xa3\x00\x00\x00\x03\x00\x00\x00\x00''\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' >&3
	reply=$(timeout 2 head -c 28 <&3 | od -An -tx1 | tr -d ' \n')
	[ "$reply" = 80000018123456780000000100000000000000000000000000000000 ]
) 2>/dev/null

start_server() {
	local log=$MAP_DIR/server.log t0 t1 tries=0
	t0=$(now_ns)
	"$BUILD/unionnfsd" -f --state "$MAP_DIR/state" -e "/bench=$MAP_DIR/up:$MAP_DIR/low" \
		--port $NFSPORT --mount-port $MOUNTPORT --portmap off >"$log" 2>&1 &
	SERVER_PID=$!
	until null_call; do
		kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(cat "$log")"
		tries=$((tries + 1))
		[ $tries -lt 20000 ] || die "the server did not answer NULL within a minute"
		sleep 0.002
	done
	t1=$(now_ns)
	START_US=$(( (t1 - t0) / 1000 ))
}

stop_server() {
	kill "$SERVER_PID"
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=
}

status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
show_mem() {
	say "$1: VmRSS $(mib "$(status_kib "$SERVER_PID" VmRSS)") MiB" \
		"(anon $(mib "$(status_kib "$SERVER_PID" RssAnon)")," \
		"file $(mib "$(status_kib "$SERVER_PID" RssFile)")), VmHWM" \
		"$(mib "$(status_kib "$SERVER_PID" VmHWM)") MiB"
}

# Start-up: exec to the first answered NULL call, several times.
times=()
for i in $(seq "$STARTS"); do
	start_server
	us=$START_US
	times+=("$us")
	say "start-up $i: $(awk -v u="$us" 'BEGIN { printf "%.1f", u / 1000 }') ms"
	[ "$i" = "$STARTS" ] || stop_server
done
# Once more with the map file out of the page cache (only this file's pages are dropped).
stop_server
dd if="$MAP_DIR/state/inodes.mdb" iflag=nocache count=0 status=none
start_server
cold_us=$START_US
say "start-up with the map out of the page cache: $(awk -v u="$cold_us" 'BEGIN { printf "%.1f", u / 1000 }') ms"
median_us=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "RESULT workload=map-startup value=$(awk -v u="$median_us" 'BEGIN { printf "%.1f", u / 1000 }') unit=ms"
echo "RESULT workload=map-startup-cold value=$(awk -v u="$cold_us" 'BEGIN { printf "%.1f", u / 1000 }') unit=ms"

sleep 1
show_mem "idle"
echo "RESULT workload=map-rss-idle value=$(mib "$(status_kib "$SERVER_PID" VmRSS)") unit=MiB"

# Every entry once: a recursive READDIRPLUS listing looks up each name in the map.
t0=$(now_ns)
listed=$(nfs-ls -R "$URL" | wc -l)
t1=$(now_ns)
say "listed $listed entries in $(( (t1 - t0) / 1000000 )) ms"
show_mem "after listing everything"

# LOOKUPs spread over directories across the map.
if [ -n "$LOADGEN" ]; then
	ndirs=$(( (N + 1000) / 1001 ))
	for i in $(seq 0 $((LOOKUP_DIRS - 1))); do
		d=$(printf 'd%06d' $(( i * ndirs / LOOKUP_DIRS )))
		"$LOADGEN" --url "$URL" --workload lookup --path "$d" --seconds 1 >&2 ||
			die "loadgen lookup in $d failed"
	done
	show_mem "after LOOKUPs in $LOOKUP_DIRS directories"
else
	say "no $BUILD/bench/loadgen: LOOKUP workload skipped"
fi

echo "RESULT workload=map-rss value=$(mib "$(status_kib "$SERVER_PID" VmHWM)") unit=MiB"

# unionnfsd-ctl check of every record, with a GETATTR load beside it when loadgen is there:
# the check must not stall the clients.
getattr_rate() { awk '/^RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^rate=/) print substr($i, 6) }'; }
if [ -n "$LOADGEN" ]; then
	idle_rate=$("$LOADGEN" --url "$URL" --workload getattr --inflight 32 --seconds 3 | getattr_rate)
	echo "RESULT workload=map-getattr value=$idle_rate unit=ops/s"
	say "GETATTR without a check: $idle_rate ops/s"
fi
t0=$(now_ns)
if [ -n "$LOADGEN" ]; then
	"$LOADGEN" --url "$URL" --workload getattr --inflight 32 --seconds "${CHECK_LOAD_SECONDS:-10}" \
		> "$MAP_DIR/check-getattr.out" &
	LOAD_PID=$!
fi
"$BUILD/unionnfsd-ctl" --state "$MAP_DIR/state" --timeout 60 check > "$MAP_DIR/check.out" ||
	die "unionnfsd-ctl check failed (exit $?): $(tail -n 3 "$MAP_DIR/check.out")"
t1=$(now_ns)
check_s=$(awk -v n=$((t1 - t0)) 'BEGIN { printf "%.1f", n / 1e9 }')
count=$N; [ "$N" != 1000000 ] || count=1M
say "check $count records: $check_s s ($(grep ' records, ' "$MAP_DIR/check.out" | sed 's/^ *//'))"
echo "RESULT workload=map-check value=$check_s unit=s"
if [ -n "$LOADGEN" ]; then
	wait "$LOAD_PID" || die "loadgen getattr beside the check failed"
	busy_rate=$(getattr_rate < "$MAP_DIR/check-getattr.out")
	say "GETATTR while the check runs: $busy_rate ops/s (the first ${CHECK_LOAD_SECONDS:-10} s of it)"
	echo "RESULT workload=map-check-getattr value=$busy_rate unit=ops/s"
fi
stop_server
