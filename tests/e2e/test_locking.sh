#!/bin/bash
# File locking end to end through the real Linux kernel NFS client, mounted WITHOUT nolock:
# two VMs (qemu, tests/e2e/locking/build-initrd) lock the same files through their kernels'
# lockd, with rpcbind and rpc.statd running in each guest, against unionnfsd's NLM and NSM.
#   1. fcntl exclusion both ways (F_SETLK: EAGAIN), and flock() likewise (the client maps it
#      to whole-file NLM locks)
#   2. a blocked F_SETLKW is granted by the server's GRANTED callback soon after the holder
#      unlocks (well under the client's own 30 s re-poll)
#   3. a lock on a lower-branch file stays exclusive when its holder writes (copy-up)
#   4. server crash (SIGKILL) and restart with --grace on the same state directory: the
#      server's SM_NOTIFY makes VM 1's kernel reclaim its lock; VM 2 is refused during the
#      grace period and after it; VM 1 unlocks and VM 2 gets the lock
#   5. client crash: VM 2 powers off holding a lock; its fresh boot (statd state on its share)
#      sends SM_NOTIFY, the server drops VM 2's locks and VM 1's blocked F_SETLKW is granted
#   6. both VMs increment one counter file under fcntl locks; the sum must be exact
#
# Networking: the server must call the guests back (NLM GRANTED to the guest's lockd, SM_NOTIFY
# to its statd, both through the guest's portmapper), and the guest's lockd accepts a GRANTED
# only from the address it sent the lock to. qemu's user networking can forward inbound ports,
# but forwarded calls arrive from 10.0.2.2, which the guest's lockd rejects. So each VM gets a
# tap device: unfslkN (in namespace unfs-lk, below) is 10.214.N.1, the guest is 10.214.N.2,
# and each side calls the other's real address.
#
# The guests are driven step by step: the host writes a command into VM N's share
# (vmN/cmd/cmd.K) and the guest's lock driver (locking/lk.c) answers in vmN/cmd/rep.K.
#
# The server runs on ports 14071 (NFS) and 14072 (MOUNT) with its built-in portmapper on port
# 111 (the guests' kernels find NFS, MOUNT and NLM through it, and sm-notify the server's NSM),
# all in network namespace unfs-lk with the tap devices. LK_SERVER=ganesha runs the same steps
# against nfs-ganesha with NLM on (with its own rpcbind and rpc.statd), to check the guest
# side against a known server; it is not part of make test, and holds /tmp/unfs-ganesha.lock
# (rpcbind's and statd's files are the machine's). Needs root, qemu-system-x86, a kernel in /boot with its modules,
# busybox-static, cpio, iproute2, rpcbind and nfs-common: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

LK_DIR=$E2E_HERE/locking
LK_VM=$BUILD/e2e/lockvm
LK_MODE=${LK_SERVER:-unionnfsd}
LK_GRACE=10
LK_TAPS=()
LK_QEMU=([1]= [2]=)
LK_SEQ=([1]=0 [2]=0)
LK_BOOTS=([1]=0 [2]=0)
LK_T0=$(date +%s.%N)
host_daemons=()

lk_now() { date +%s.%N; }
lk_since() { awk -v a="$1" -v b="$(lk_now)" 'BEGIN { printf "%.2f", b - a }'; }

# lk_tap_up N: tap device unfslkN (10.214.N.1) for VM N (10.214.N.2)
lk_tap_up() {
	local n=$1
	lk_tap_down "$n"
	LK_TAPS+=("$n")
	ip tuntap add dev "unfslk$n" mode tap &&
		ip addr add "10.214.$n.1/24" dev "unfslk$n" &&
		ip link set "unfslk$n" up ||
		e2e_fail "cannot make tap device unfslk$n with 10.214.$n.1/24 (needs root, iproute2 and /dev/net/tun; is 10.214.$n.0/24 free?)"
}

lk_tap_down() { ip link del "unfslk$1" 2> /dev/null; return 0; }

lk_cleanup() {
	local n p
	for n in 1 2; do # (timeout passes the TERM on to its qemu)
		[ -n "${LK_QEMU[$n]}" ] && kill -TERM "${LK_QEMU[$n]}" 2> /dev/null
	done
	[ "$LK_MODE" = ganesha ] && lk_ganesha_stop
	for p in "${host_daemons[@]}"; do kill "$p" 2> /dev/null; done
	for n in "${LK_TAPS[@]}"; do lk_tap_down "$n"; done
	e2e_cleanup
}

# lk_boot N: boots VM N in the background (its share is $work/vmN); lk_await_ready N waits
# until it has mounted the server and its lock driver runs
lk_boot() {
	local n=$1 sh=$work/vm$1
	LK_BOOTS[$n]=$((LK_BOOTS[$n] + 1))
	rm -rf "$sh/cmd" "$sh/ready" "$sh/failed"
	LK_SEQ[$n]=0
	cp "$LK_DIR/guest.sh" "$sh/run.sh"
	timeout --foreground -k 5 600 qemu-system-x86_64 \
		-machine "q35,accel=${ACCEL:-tcg}" -cpu "${CPU:-max}" -m 512 -smp 1 \
		-nographic -no-reboot -nodefaults -serial stdio \
		-kernel "$LK_VM/vmlinuz" -initrd "$LK_VM/initrd.cpio.gz" \
		-append "console=ttyS0 panic=-1 quiet" \
		-netdev "tap,id=n0,ifname=unfslk$n,script=no,downscript=no" \
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:4c:4b:0$n" \
		-fsdev "local,id=fs0,path=$sh,security_model=none" \
		-device virtio-9p-pci,fsdev=fs0,mount_tag=hostshare \
		< /dev/null > "$work/console-$n.${LK_BOOTS[$n]}.log" 2>&1 &
	LK_QEMU[$n]=$!
}

lk_await_ready() {
	local n=$1 sh=$work/vm$1 t0 i
	t0=$(lk_now)
	for i in $(seq 1 1200); do
		[ -e "$sh/ready" ] && { echo "host: VM $n (boot ${LK_BOOTS[$n]}) mounted, $(lk_since "$t0") s after the wait began"; return 0; }
		if [ -e "$sh/failed" ] || ! kill -0 "${LK_QEMU[$n]}" 2> /dev/null; then
			break
		fi
		sleep 0.1
	done
	echo "---- VM $n log ----"
	cat "$sh/out.log" 2> /dev/null
	tail -20 "$work/console-$n.${LK_BOOTS[$n]}.log"
	e2e_fail "VM $n did not boot and mount the server (guest: $(cat "$sh/failed" 2> /dev/null || echo 'no failure noted; see the console'))"
}

# lk_send N COMMAND: hands VM N's lock driver one command (locking/lk.c lists them)
lk_send() {
	local n=$1 d=$work/vm$1/cmd
	LK_SEQ[$n]=$((LK_SEQ[$n] + 1))
	echo "$2" > "$d/cmd.${LK_SEQ[$n]}.tmp"
	mv "$d/cmd.${LK_SEQ[$n]}.tmp" "$d/cmd.${LK_SEQ[$n]}"
}

# lk_reply N [SECONDS]: waits for the answer to VM N's last command; REPLY gets it ("timeout"
# when none came)
lk_reply() {
	local n=$1 f=$work/vm$1/cmd/rep.${LK_SEQ[$1]} end
	end=$((${EPOCHREALTIME//[.,]/} + ${2:-60} * 1000000))
	while [ "${EPOCHREALTIME//[.,]/}" -lt "$end" ]; do
		if [ -e "$f" ]; then
			REPLY=$(cat "$f")
			return 0
		fi
		kill -0 "${LK_QEMU[$n]}" 2> /dev/null || lk_vm_gone "$n"
		sleep 0.02
	done
	REPLY=timeout
	return 1
}

lk_vm_gone() {
	echo "---- VM $1 log ----"
	cat "$work/vm$1/out.log" 2> /dev/null
	tail -5 "$work/console-$1.${LK_BOOTS[$1]}.log"
	e2e_fail "VM $1 stopped while the host waited for its answer to '$(cat "$work/vm$1/cmd/cmd.${LK_SEQ[$1]}")' (its log is above)"
}

# lk_do N COMMAND [SECONDS]: sends and waits; prints the exchange. No answer in time ends the
# test: the VM's lock driver is stuck in a call, so no later step could run.
lk_do() {
	lk_send "$1" "$2"
	lk_reply "$1" "${3:-60}" ||
		e2e_fail "VM $1 did not answer '$2' within ${3:-60} s: its NFS client hangs in the call (the server stopped answering NLM or NFS? see the server log; the VM's kernel log is in its console)"
	echo "  vm$1: $2 -> $REPLY"
}

# lk_expect ROW N COMMAND WANT WHY: runs COMMAND on VM N; the row passes when the reply starts
# with WANT; WHY names the likely cause when it does not
lk_expect() {
	lk_do "$2" "$3"
	case $REPLY in
	"$4"*) e2e_result "$1" "vm$2" 1 ;;
	*) e2e_result "$1" "vm$2" 0 "'$3' answered '$REPLY', want '$4': $5" ;;
	esac
}

# lk_pending N: the answer to VM N's last command has not come (it blocks)
lk_pending() { [ ! -e "$work/vm$1/cmd/rep.${LK_SEQ[$1]}" ]; }

# lk_await_waiter: until the server lists a lock waiter (unionnfsd-ctl stats); a server
# that cannot tell (nfs-ganesha) gets a second to receive the blocking LOCK
lk_await_waiter() {
	local i out
	for i in $(seq 1 100); do
		out=$("$BUILD/unionnfsd-ctl" --state "$state" stats 2> /dev/null)
		case $out in
		*"waiters "[1-9]*) return 0 ;;
		*waiters*) ;;
		*) break ;;
		esac
		sleep 0.1
	done
	sleep 1
}

lk_step_time() { echo "TIME step $1: $(lk_since "$2") s"; echo "TIME step $1 $(lk_since "$2")" >> "$work/times"; }

lk_start_server() { # [GRACE]
	if [ "$LK_MODE" = ganesha ]; then
		lk_ganesha_start
		return
	fi
	"$E2E_BIN" -f --port "$E2E_PORT" --mount-port "$E2E_MPORT" --portmap builtin --state "$state" \
		--grace "${1:-$LK_GRACE}" "${E2E_EXPORTS[@]}" >> "$work/server.log" 2>&1 &
	srv=$!
	e2e_await_server e2e_port_busy 127.0.0.1
}

lk_kill_server() { # a crash: no clean shutdown
	if [ "$LK_MODE" = ganesha ]; then
		lk_ganesha_stop KILL
		return
	fi
	kill -KILL "$srv"
	wait "$srv" 2> /dev/null
	srv=
}

# lk_await CMD...: up to 10 s until CMD succeeds
lk_await() {
	local i
	for i in $(seq 1 100); do
		"$@" > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# --- nfs-ganesha (LK_SERVER=ganesha): NLM on, with an rpcbind and rpc.statd of our own in the
# namespace for NSM (ganesha asks the local statd to monitor its clients) ---
lk_ganesha_start() {
	if ! rpcinfo -p 127.0.0.1 > /dev/null 2>&1; then
		rpcbind -f -w & host_daemons+=($!)
		lk_await rpcinfo -p 127.0.0.1 || e2e_fail "rpcbind did not answer on 127.0.0.1:111 within 10 s"
	fi
	if ! rpcinfo -T udp 127.0.0.1 100024 1 > /dev/null 2>&1; then
		mkdir -p "$work/hoststatd/sm" "$work/hoststatd/sm.bak"
		rpc.statd -F -d -L -P "$work/hoststatd" 2> "$work/hoststatd.log" & host_daemons+=($!)
		lk_await rpcinfo -T udp 127.0.0.1 100024 1 ||
			e2e_fail "the host's rpc.statd did not register within 10 s: $(tail -3 "$work/hoststatd.log")"
	fi
	sed -e "s#@EXPORT@#$U#" -e "s#@NFS_PORT@#$E2E_PORT#" -e "s#@MNT_PORT@#$E2E_MPORT#" \
		-e "s#@NLM_PORT@#14073#" -e "s#@GRACE@#$LK_GRACE#g" "$LK_DIR/ganesha.conf.in" > "$work/ganesha.conf"
	ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/server.log" -p "$work/ganesha.pid" &
	srv=$!
	e2e_await_server e2e_port_busy 127.0.0.1
}

lk_ganesha_stop() {
	[ -n "$srv" ] || return 0
	[ "${1:-}" = KILL ] && cp -a "$work/hoststatd" "$work/hoststatd.crash"
	kill "-${1:-TERM}" "$srv" 2> /dev/null
	wait "$srv" 2> /dev/null
	srv=
}

# ------------------------------------------------------------------------------------------
# The whole run happens in network namespace unfs-lk: the server, its portmapper on port 111
# and the VMs' tap devices are private to it, so nothing on the host (rpcbind, another
# test's server) collides with them.
if [ -z "${LK_IN_NETNS:-}" ]; then
	[ "$(id -u)" = 0 ] || e2e_fail "needs root (a network namespace, tap devices, port 111)"
	command -v ip > /dev/null || e2e_fail "ip is missing; run deploy/install-deps (package iproute2)"
	if [ "$LK_MODE" = ganesha ]; then
		# rpcbind's and statd's files (/run/rpcbind.sock, ...) are the machine's, namespace or not
		exec 9> /tmp/unfs-ganesha.lock
		flock -w 600 9 || e2e_fail "another run holds /tmp/unfs-ganesha.lock (nfs-ganesha, rpcbind, rpc.statd) for over 10 min"
	fi
	# one run at a time: a second would take the first's namespace away
	exec 8> /tmp/unfs-locking.lock
	flock -w 900 8 || e2e_fail "another run of test_locking.sh holds /tmp/unfs-locking.lock for over 15 min"
	ip netns del unfs-lk 2> /dev/null
	ip netns add unfs-lk && ip -n unfs-lk link set lo up ||
		e2e_fail "cannot make network namespace unfs-lk (needs root and iproute2)"
	LK_IN_NETNS=1 ip netns exec unfs-lk bash "$E2E_HERE/$(basename "$0")" "$@"
	rc=$?
	ip netns del unfs-lk
	exit $rc
fi
e2e_init locking 14071 14072
trap lk_cleanup EXIT
command -v rpcinfo > /dev/null || e2e_fail "rpcinfo is missing; run deploy/install-deps (package rpcbind)"
# (the locking image is the base image and more: rebuilt when the base builder changes too)
[ "$E2E_HERE/build-initrd" -nt "$LK_VM/initrd.cpio.gz" ] && rm -f "$LK_VM/initrd.cpio.gz"
e2e_initrd_ready "$LK_DIR/build-initrd" "$LK_VM"
mkdir -p "$BUILD/e2e"
LK_BIN=$BUILD/e2e/lk
if [ ! -x "$LK_BIN" ] || [ "$LK_DIR/lk.c" -nt "$LK_BIN" ]; then
	gcc -std=gnu11 -O1 -Wall -Wextra -Werror -static -o "$LK_BIN" "$LK_DIR/lk.c" ||
		e2e_fail "cannot build $LK_DIR/lk.c with gcc -static; run deploy/install-deps (build-essential)"
fi
: > "$work/vm.out"

L=$work/lower
U=$work/upper
mkdir -p "$L" "$U"
echo lower-data > "$L/base"
echo 0 > "$L/counter"
for n in 1 2; do
	mkdir -p "$work/vm$n/nfs"
	cp "$LK_BIN" "$work/vm$n/lk"
	cat > "$work/vm$n/env.sh" <<-ENV
		LK_NAME=lab0$n
		LK_IP=10.214.$n.2
		LK_SERVER=10.214.$n.1
		LK_EXPORT=$([ "$LK_MODE" = ganesha ] && echo "$U" || echo /union)
	ENV
	lk_tap_up "$n"
done
# each guest is its own client, by address
E2E_EXPORTS+=(-e "/union=$U:$L" --client "10.214.1.2(rw,no_root_squash,insecure)"
	--client "10.214.2.2(rw,no_root_squash,insecure)")
if [ "$LK_MODE" = ganesha ]; then
	cp "$L/base" "$L/counter" "$U/"
fi
lk_start_server
echo "host: $LK_MODE started; booting two VMs"

t=$(lk_now)
lk_boot 1
lk_boot 2
lk_await_ready 1
lk_await_ready 2
lk_step_time boot "$t"
if [ -e "$work/vm1/nsm-udp" ]; then
	e2e_result nsm_udp vm1 0 "$(cat "$work/vm1/nsm-udp"): a rebooted client's sm-notify asks the server's portmapper for NSM over UDP only; the portmapper must answer on UDP (the built-in one does while locking is served)"
else
	e2e_result nsm_udp vm1 1
fi

# --- 1. exclusion both ways ---
t=$(lk_now)
lk_do 1 "open /mnt/base"
lk_do 2 "open /mnt/base"
lk_expect fcntl_lock1 1 "setlk w 0 0" ok "VM 1's first lock failed: ENOLCK means its statd or the server's NLM/NSM is unreachable (see the server log)"
lk_expect fcntl_excl_2 2 "setlk w 0 0" EAGAIN "the server granted a conflicting lock (or did not answer)"
lk_expect fcntl_unlock1 1 "unlock 0 0" ok "unlock failed"
lk_expect fcntl_lock2 2 "setlk w 0 0" ok "VM 1's unlock did not release the lock on the server"
lk_expect fcntl_excl_1 1 "setlk w 0 0" EAGAIN "the server granted a conflicting lock (or did not answer)"
lk_expect fcntl_unlock2 2 "unlock 0 0" ok "unlock failed"
lk_expect flock_lock1 1 "flock ex nb" ok "flock() failed"
lk_expect flock_excl_2 2 "flock ex nb" EAGAIN "a second whole-file lock was granted"
lk_expect flock_unlock1 1 "flock un nb" ok "flock(LOCK_UN) failed"
lk_expect flock_lock2 2 "flock ex nb" ok "VM 1's flock(LOCK_UN) did not release the lock"
lk_expect flock_excl_1 1 "flock ex nb" EAGAIN "a second whole-file lock was granted"
lk_expect flock_unlock2 2 "flock un nb" ok "flock(LOCK_UN) failed"
lk_step_time 1-exclusion "$t"

# --- 2. a blocked F_SETLKW is granted by callback ---
t=$(lk_now)
lk_expect block_hold1 1 "setlk w 0 0" ok "lock failed"
lk_send 2 "setlkw w 0 0"
lk_await_waiter
if lk_pending 2; then
	e2e_result block_waits vm2 1
else
	lk_reply 2 1
	e2e_result block_waits vm2 0 "F_SETLKW returned '$REPLY' while VM 1 holds the lock"
fi
lk_do 1 "unlock 0 0"
tu=$(lk_now)
lk_reply 2 40
lat=$(lk_since "$tu")
echo "  vm2: setlkw -> $REPLY (granted $lat s after VM 1's unlock returned)"
if [[ $REPLY == ok* ]] && awk -v l="$lat" 'BEGIN { exit !(l < 10) }'; then
	e2e_result block_granted vm2 1
else
	e2e_result block_granted vm2 0 "F_SETLKW answered '$REPLY' $lat s after the unlock, want ok within 10 s: the server's GRANTED callback did not reach VM 2's lockd (the client re-polls only every 30 s); check the server log for the callback's error"
fi
echo "TIME grant-latency $lat" >> "$work/times"
lk_expect block_unlock2 2 "unlock 0 0" ok "unlock failed"
lk_step_time 2-granted "$t"

# --- 3. lock on a lower file, then copy-up by the holder ---
t=$(lk_now)
lk_expect copyup_lock1 1 "setlk w 0 0" ok "lock failed"
lk_expect copyup_write1 1 "write 0 copied-up" ok "writing the locked lower file failed"
if [ "$LK_MODE" != ganesha ]; then
	[ "$(head -c 9 "$U/base" 2> /dev/null)" = copied-up ]
	e2e_result copyup_happened host $((! $?)) "upper/base does not start with copied-up: the write did not copy the file up"
fi
lk_expect copyup_excl_2 2 "setlk w 0 0" EAGAIN "after copy-up the lock no longer guards the file (the lock is keyed to the lower object?)"
lk_expect copyup_unlock1 1 "unlock 0 0" ok "unlock failed"
lk_expect copyup_lock2 2 "setlk w 0 0" ok "VM 1's unlock after copy-up did not release the lock"
lk_expect copyup_read2 2 "read 0 9" "ok copied-up" "VM 2 does not see the holder's write"
lk_expect copyup_unlock2 2 "unlock 0 0" ok "unlock failed"
lk_step_time 3-copyup "$t"

# --- 4. server crash and restart: reclaim in the grace period ---
t=$(lk_now)
lk_expect restart_hold1 1 "setlk w 0 0" ok "lock failed"
lk_kill_server
lk_start_server "$LK_GRACE"
if [ "$LK_MODE" = ganesha ]; then
	# ganesha leaves SM_NOTIFY after a restart to the host's sm-notify (nfs-ganesha-lock
	# runs it) and clears statd's list at start (SM_UNMON_ALL): notify from the crash's copy
	sm-notify -f -d -P "$work/hoststatd.crash" > "$work/host-sm-notify.log" 2>&1 &
	host_daemons+=($!)
fi
tg=$(lk_now)
echo "host: server restarted with a ${LK_GRACE} s grace period"
lk_do 2 "setlk w 0 0" $((LK_GRACE + 40))
case $REPLY in
EAGAIN*) e2e_result restart_grace_refused vm2 1 ;;
*) e2e_result restart_grace_refused vm2 0 "F_SETLK in the grace period answered '$REPLY', want EAGAIN: the server granted a lock in grace, or VM 1 did not reclaim (no SM_NOTIFY to VM 1's statd?)" ;;
esac
echo "host: VM 2's F_SETLK in grace returned $(lk_since "$tg") s after the restart"
# the client retries a lock the server refuses for grace until the grace ends
lk_expect restart_after_grace_refused 2 "setlk w 0 0" EAGAIN "after the grace period VM 2 got the lock VM 1 held before the crash: VM 1 did not reclaim it (did the server send SM_NOTIFY to 10.214.1.2?)"
lk_expect restart_unlock1 1 "unlock 0 0" ok "VM 1's unlock after the restart failed"
lk_expect restart_lock2 2 "setlk w 0 0" ok "VM 1's unlock did not release its reclaimed lock"
lk_expect restart_unlock2 2 "unlock 0 0" ok "unlock failed"
lk_step_time 4-restart "$t"

# --- 5. client crash: VM 2 reboots holding a lock ---
t=$(lk_now)
lk_expect crash_hold2 2 "setlk w 0 0" ok "lock failed"
lk_send 2 crash
wait "${LK_QEMU[2]}" 2> /dev/null
LK_QEMU[2]=
echo "host: VM 2 powered off holding its lock"
lk_expect crash_still_held 1 "setlk w 0 0" EAGAIN "the server dropped VM 2's lock before VM 2 rebooted"
lk_send 1 "setlkw w 0 0"
tb=$(lk_now)
lk_boot 2
lk_reply 1 45
echo "  vm1: setlkw -> $REPLY ($(lk_since "$tb") s after VM 2's reboot began)"
case $REPLY in
ok*) e2e_result crash_released vm1 1 ;;
*)
	e2e_result crash_released vm1 0 "VM 1's F_SETLKW answered '$REPLY': the rebooted VM 2's SM_NOTIFY did not free its locks (its log: vm2/sm-notify.2.log; did it reach the server's NSM through the portmapper over UDP, and did the server match lab02?)"
	# VM 1's lock driver still waits in F_SETLKW: no later step can run
	e2e_finish
	;;
esac
lk_await_ready 2
lk_expect crash_unlock1 1 "unlock 0 0" ok "unlock failed"
lk_step_time 5-client-reboot "$t"

# --- 6. a lock-heavy program on both VMs at once ---
t=$(lk_now)
N=${LK_CYCLES:-100}
lk_do 1 close
lk_send 1 "cycles $N /mnt/counter"
lk_send 2 "cycles $N /mnt/counter"
lk_reply 1 120; r1=$REPLY
lk_reply 2 120; r2=$REPLY
echo "  vm1: cycles $N -> $r1"
echo "  vm2: cycles $N -> $r2"
[[ $r1 == ok* && $r2 == ok* ]]
e2e_result cycles_done both $((! $?)) "the lock cycles failed: vm1 '$r1', vm2 '$r2'"
lk_do 1 "open /mnt/counter"
lk_do 1 "read 0 20"
want=$(printf 'ok %020d' $((2 * N)))
[ "$REPLY" = "$want" ]
e2e_result cycles_sum vm1 $((! $?)) "the counter reads '$REPLY', want '$want': an update was lost, so two clients held the lock at once"
lk_step_time 6-cycles "$t"

for n in 1 2; do
	lk_send "$n" exit
done
for n in 1 2; do
	wait "${LK_QEMU[$n]}" 2> /dev/null
	LK_QEMU[$n]=
	sed "s/^/vm$n: /" "$work/vm$n/out.log"
done
echo "TIME total $(lk_since "$LK_T0") s"
cat "$work/times"
[ "$LK_MODE" = ganesha ] && lk_ganesha_stop
e2e_finish
