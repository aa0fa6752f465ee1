#!/bin/sh
# The guest half of tests/e2e/test_locking.sh, run by busybox sh in each VM as /host/run.sh.
# Takes the address and host name the host gave it (/host/env.sh), starts rpcbind and
# rpc.statd (its state in /host/nfs, so it outlives the VM: a fresh boot then sends
# SM_NOTIFY for the hosts the last one monitored), mounts the server WITHOUT nolock, says
# /host/ready, and hands over to the lock driver (lk, locking/lk.c), which the host drives.
. /host/env.sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
up() { cut -d' ' -f1 /proc/uptime; }
fail() {
	echo "FAIL: $*"
	echo "---- dmesg tail ----"
	dmesg | tail -20
	echo "$*" > /host/failed
	exit 1
}
echo "guest: $LK_NAME at $LK_IP, server $LK_SERVER:$LK_EXPORT"
hostname "$LK_NAME" || fail "hostname $LK_NAME"
# init's user-networking address is of no use on the tap
ip addr flush dev eth0
ip addr add "$LK_IP/24" dev eth0 || fail "ip addr add $LK_IP/24 dev eth0"
mkdir -p /host/nfs/sm /host/nfs/sm.bak /var/lib/nfs
mount -o bind /host/nfs /var/lib/nfs || fail "bind-mounting /host/nfs on /var/lib/nfs"
rpcbind || fail "rpcbind did not start (its libraries or /etc/netconfig missing from locking/build-initrd?)"
# statd's log (-d) goes to the host, one per boot
boot=1
while [ -e /host/statd.$boot.log ]; do boot=$((boot + 1)); done
rpc.statd -F -d -L > /host/statd.$boot.log 2>&1 &
i=0
until rpcinfo -T udp 127.0.0.1 100024 1 > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "rpc.statd did not register with the local rpcbind within 10 s: $(tail -3 /host/statd.$boot.log)"
	usleep 50000
done
echo "guest: statd up at $(up) s"
# sm-notify tells the hosts a previous boot monitored (sm/ on the share) that this client
# rebooted; run apart from statd (-L), which would wait for it before serving
sm-notify -d > /host/sm-notify.$boot.log 2>&1 &
# The kernel's lockd finds the server's NLM (over TCP, like the mount) and, after a reboot,
# sm-notify its NSM (over UDP) through the server's portmapper. (Asked from here: the server
# admits only the guests' addresses.)
rpcinfo -t "$LK_SERVER" 100021 4 > /dev/null ||
	fail "no NLM v4 over TCP behind the portmapper on $LK_SERVER: does the server serve and register it? rpcinfo -p: $(rpcinfo -p "$LK_SERVER" 2>&1 | tr '\n' ' ')"
# sm-notify asks the portmapper over UDP only: without it a rebooted client cannot tell the
# server, which keeps the dead client's locks (the host fails a row on this note)
rpcinfo -u "$LK_SERVER" 100024 1 > /dev/null 2>&1 ||
	echo "NSM v1 over UDP through the portmapper on $LK_SERVER:111 fails: $(rpcinfo -u "$LK_SERVER" 100024 1 2>&1 | tr '\n' ' ')" > /host/nsm-udp
# no nolock
mount -t nfs -o vers=3,proto=tcp "$LK_SERVER:$LK_EXPORT" /mnt ||
	fail "mount -t nfs -o vers=3,proto=tcp $LK_SERVER:$LK_EXPORT /mnt (is the server's portmapper up on $LK_SERVER:111?)"
echo "guest: mounted at $(up) s"
mkdir -p /host/cmd
touch /host/ready
/host/lk serve /host/cmd || fail "lk serve ended with status $?"
