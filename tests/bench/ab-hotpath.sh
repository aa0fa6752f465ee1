#!/bin/bash
# A/B of the per-call cost: GETATTR and LOOKUP at 1 and 32 calls in flight, two unionnfsd
# binaries, the same two-branch stack, rounds that alternate which binary goes first.
#   tests/bench/ab-hotpath.sh OLD_BIN NEW_BIN
# Environment:
#   ROUNDS=N      rounds (default 5); each runs every workload once on each binary
#   SECONDS_PER=S length of each timed load, after loadgen's 0.5 s warm-up (default 3)
#   LOADGEN=path  the load generator (default build/bench/loadgen: make bench-tools)
#   PORT=P        first of the four ports used on 127.0.0.1 (default 13071)
#   CASES="W.N ..." workloads and in-flight counts (default "getattr.1 getattr.32 lookup.1
#                 lookup.32"; "lock.1 lock.32" measures NLM LOCK+UNLOCK pairs on a file,
#                 "cwr.1 cwr.32" CREATE + WRITE FILE_SYNC + REMOVE chains, per file)
# Prints two tables, per workload, in-flight count and binary: the rate in calls/s and the
# server's CPU time per call (all its threads, from /proc/PID/task/*/schedstat), each as the
# median with the lowest and highest round, then NEW's median against OLD's. On a machine
# shared with other work rates move by tens of percent from round to round; CPU time per
# call moves much less, as it does not count time spent waiting for a core.
# Needs no portmapper (the servers run with --portmap off, loadgen is given the ports).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_PER:-3}
LOADGEN=${LOADGEN:-$ROOT/build/bench/loadgen}
PORT=${PORT:-13071}
NAMES=200

log() { echo "ab-hotpath: $*" >&2; }
die() {
	log "$*"
	exit 2
}

[ $# = 2 ] || die "usage: $0 OLD_BIN NEW_BIN"
BIN=("$1" "$2")
LABEL=(old new)
for b in "${BIN[@]}"; do
	[ -x "$b" ] || die "$b is not an executable unionnfsd"
done
[ -x "$LOADGEN" ] || die "$LOADGEN is missing; run make bench-tools (or set LOADGEN)"

WORK=$(mktemp -d /tmp/ab-hotpath.XXXXXX) || die "cannot make a work directory under /tmp"
PIDS=()
cleanup() {
	local p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2> /dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2> /dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_busy() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }

# server I: binary I on ports PORT+2I (NFS) and PORT+2I+1 (MOUNT), its own upper and map
server_start() {
	local i=$1 port=$((PORT + 2 * $1)) n
	port_busy "$port" && die "port $port is in use; stop what listens there (ss -ltnp 'sport = :$port') or set PORT"
	mkdir -p "$WORK/upper$i" "$WORK/state$i"
	"${BIN[$i]}" -f --listen 127.0.0.1 --port "$port" --mount-port $((port + 1)) --portmap off \
		--state "$WORK/state$i" -e "/ab=$WORK/upper$i:$WORK/lower" -o rw,no_root_squash,insecure \
		> "$WORK/server$i.log" 2>&1 &
	PIDS+=($!)
	# Nothing to wait on but the listening socket itself: poll it, bounded.
	for n in $(seq 1 150); do
		kill -0 "${PIDS[$i]}" 2> /dev/null ||
			die "${BIN[$i]} exited at start-up: $(tail -n 5 "$WORK/server$i.log")"
		port_busy "$port" && port_busy $((port + 1)) && return 0
		sleep 0.1
	done
	die "${BIN[$i]} did not listen on port $port within 15 s; see $WORK/server$i.log"
}

# the NLM port server I printed at start
nlm_port() { sed -n 's/^nlm port \([0-9]*\)$/\1/p' "$WORK/server$1.log" | tail -n 1; }

# CPU time all threads of process PID have used so far, in ns (the scheduler's own count)
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

# measure WORKLOAD INFLIGHT I: one timed load on server I; prints its rate in calls/s and the
# server's CPU time per measured call in us (the warm-up's and the mount's CPU included)
measure() {
	local wl=$1 inflight=$2 port=$((PORT + 2 * $3)) pid=${PIDS[$3]} path='' out c0 c1 rate ops
	[ "$wl" = lookup ] && path="--path dir"
	[ "$wl" = lock ] && path="--path lockfile --nlm-port $(nlm_port "$3")"
	[ "$wl" = cwr ] && path="--path cwr"
	c0=$(cpu_ns "$pid")
	# shellcheck disable=SC2086
	out=$("$LOADGEN" --url "nfs://127.0.0.1/ab?nfsport=$port&mountport=$((port + 1))" \
		--workload "$wl" --inflight "$inflight" --seconds "$SECS" $path 2>&1)
	c1=$(cpu_ns "$pid")
	rate=$(echo "$out" | grep -oE ' rate=[0-9.]+' | head -n 1 | cut -d= -f2)
	ops=$(echo "$out" | grep -oE ' ops=[0-9]+' | head -n 1 | cut -d= -f2)
	if [ -z "$rate" ] || [ -z "$ops" ] || [ "$ops" = 0 ]; then
		die "loadgen failed on ${BIN[$3]} ($wl, $inflight in flight): $out"
	fi
	awk -v r="$rate" -v c=$((c1 - c0)) -v n="$ops" 'BEGIN { printf "%s %.2f\n", r, c / n / 1000 }'
}

# median, lowest and highest of the numbers on stdin, with FORMAT for each
summary() { sort -n | awk -v f="$1" '{ v[NR] = $1 } END { printf f " " f " " f, v[int((NR + 1) / 2)], v[1], v[NR] }'; }

mkdir -p "$WORK/lower/dir" "$WORK/lower/cwr"
echo x > "$WORK/lower/lockfile"
for n in $(seq 1 $NAMES); do
	echo x > "$WORK/lower/dir/f$n"
done
server_start 0
server_start 1

# A first load on each server, not counted: its first mount and first look at the files
# cost what no later round pays.
for i in 0 1; do
	SECS=1 measure lookup 32 "$i" > /dev/null || exit 1
done

declare -A RATES=() CPU=()
CASES=${CASES:-getattr.1 getattr.32 lookup.1 lookup.32}
for r in $(seq 1 "$ROUNDS"); do
	# odd rounds old first, even rounds new first
	order="0 1"
	[ $((r % 2)) = 0 ] && order="1 0"
	for c in $CASES; do
		for i in $order; do
			read -r v u < <(measure "${c%.*}" "${c#*.}" "$i") || exit 1
			[ -n "$u" ] || exit 1
			RATES[$c.$i]="${RATES[$c.$i]:-} $v"
			CPU[$c.$i]="${CPU[$c.$i]:-} $u"
		done
	done
	log "round $r of $ROUNDS done"
done

# report NAME ARRAY FORMAT: per case and binary, median, lowest, highest and every round
report() {
	local -n vals=$2
	local c i med lo hi
	local -a MED
	echo "== $1"
	printf '%-8s %8s %-4s %10s %10s %10s  %s\n' workload inflight bin median lowest highest rounds
	for c in $CASES; do
		for i in 0 1; do
			read -r med lo hi < <(echo "${vals[$c.$i]}" | tr ' ' '\n' | grep . | summary "$3")
			MED[i]=$med
			printf '%-8s %8s %-4s %10s %10s %10s %s\n' "${c%.*}" "${c#*.}" "${LABEL[$i]}" \
				"$med" "$lo" "$hi" "${vals[$c.$i]}"
		done
		awk -v a="${MED[0]}" -v b="${MED[1]}" -v w="${c%.*}" -v n="${c#*.}" \
			'BEGIN { printf "%-8s %8s new/old median %+.1f%%\n", w, n, (b / a - 1) * 100 }'
	done
}

report "calls/s" RATES "%.0f"
report "server CPU us per call" CPU "%.2f"
