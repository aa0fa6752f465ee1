#!/bin/bash
# Where one call's time goes: runs a unionnfsd built with `make STAGES=1 BUILD=build/stages`
# under one load at a time and prints the mean time of each step it logs at shutdown (record
# complete -> a worker takes it -> served -> back on the loop -> written).
#   tests/bench/stages.sh [WORKLOAD.INFLIGHT ...]     (default: null.1 getattr.1 getattr.32)
# Environment: BIN (default build/stages/unionnfsd), LOADGEN (build/bench/loadgen),
# SECONDS_PER (3), PORT (13081, and the next one), TASKSET (e.g. "taskset -c 0": the server's
# CPUs).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$ROOT/build/stages/unionnfsd}
LOADGEN=${LOADGEN:-$ROOT/build/bench/loadgen}
SECS=${SECONDS_PER:-3}
PORT=${PORT:-13081}
TASKSET=${TASKSET:-}
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(null.1 getattr.1 getattr.32)

die() {
	echo "stages: $*" >&2
	exit 2
}
[ -x "$BIN" ] || die "$BIN is missing: make STAGES=1 BUILD=build/stages build/stages/unionnfsd"
[ -x "$LOADGEN" ] || die "$LOADGEN is missing: make bench-tools"

WORK=$(mktemp -d /tmp/stages.XXXXXX) || die "cannot make a work directory"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/upper" "$WORK/lower/dir" "$WORK/state"
chmod 700 "$WORK/state"
for n in $(seq 1 50); do echo x > "$WORK/lower/dir/f$n"; done

port_busy() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }

for c in "${CASES[@]}"; do
	wl=${c%.*} inflight=${c#*.} path=''
	[ "$wl" = lookup ] && path="--path dir"
	# shellcheck disable=SC2086
	$TASKSET "$BIN" -f --listen 127.0.0.1 --port "$PORT" --mount-port $((PORT + 1)) \
		--portmap off --nlm-port off --state "$WORK/state" \
		-e "/s=$WORK/upper:$WORK/lower" -o rw,no_root_squash,insecure > "$WORK/log" 2>&1 &
	pid=$!
	for _ in $(seq 1 150); do
		port_busy $((PORT + 1)) && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	out=$("$LOADGEN" --url "nfs://127.0.0.1/s?nfsport=$PORT&mountport=$((PORT + 1))" \
		--workload "$wl" --inflight "$inflight" --seconds "$SECS" $path 2>&1)
	kill -TERM "$pid"
	wait "$pid"
	rate=$(echo "$out" | grep -oE ' rate=[0-9.]+' | head -n 1 | cut -d= -f2)
	echo "== $wl, $inflight in flight: ${rate:-?} calls/s"
	grep -A5 'stage times' "$WORK/log" | sed 's/^unionnfsd: net: *//'
done
