#!/bin/bash
# Kernel client rows of the benchmark: a real Linux NFS client booted under qemu (the
# tests/e2e VM) works on a server that already runs on the host.
#   tests/bench/kernel-bench.sh NAME NFSPORT MOUNTPORT EXPORT
# The guest mounts 10.0.2.2:EXPORT (vers=3,tcp,nolock,port=NFSPORT,mountport=MOUNTPORT; qemu
# rewrites source ports, so the export must admit non-privileged ones) and times, in
# tests/bench/guest_kernel_bench.sh, untar of a source tree into the export, find | xargs
# stat over it, and rm -rf of it, each on a cold mount. Prints on stdout:
#   RESULT workload=kernel-untar server=NAME seconds=T
#   RESULT workload=kernel-find-stat server=NAME seconds=T
#   RESULT workload=kernel-rm server=NAME seconds=T
# Everything else (VM log, progress) goes to stderr. KERNEL_BENCH_ROUNDS=N (default 1) runs
# N rounds in one boot and reports the medians. The export must be writable; the tree goes
# to EXPORT/kernel-bench-tree and is removed again.
#
# The tree is a tarball of the kernel headers that build-essential installs on every Debian
# machine (deploy/install-deps), about 830 entries and 5 MB, made once and kept in
# build/bench/kernel-tree.tar. The guest CPU is emulated (TCG), so absolute times are slow:
# compare servers from the same run.
set -uo pipefail

usage() {
	echo "usage: tests/bench/kernel-bench.sh NAME NFSPORT MOUNTPORT EXPORT (the server must already run)" >&2
	exit 2
}
[ $# = 4 ] || usage
kb_name=$1
kb_port=$2
kb_mport=$3
kb_export=$4
case $kb_port$kb_mport in *[!0-9]* | '') usage ;; esac
case $kb_export in /*) ;; *) usage ;; esac
kb_rounds=${KERNEL_BENCH_ROUNDS:-1}
case $kb_rounds in '' | *[!0-9]* | 0) echo "kernel-bench: KERNEL_BENCH_ROUNDS must be a positive number" >&2; exit 2 ;; esac

KB_SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
# e2e_vm_ready, e2e_run_vm, e2e_port_busy, e2e_cleanup; lib.sh changes to the repository root
source "$(dirname "$0")/../e2e/lib.sh"
KB_TAR=$BUILD/bench/kernel-tree.tar
srv=
work=
trap e2e_cleanup EXIT

kb_fail() {
	echo "kernel-bench: $*" >&2
	exit 1
}

# The kernel's uapi headers (linux-libc-dev, pulled in by build-essential): a real source
# tree of about 830 entries and 5 MB, which the emulated guest unpacks in 10 to 60 s.
kb_tarball() {
	local d dirs=()
	[ -s "$KB_TAR" ] && [ "$KB_TAR" -nt "$KB_SELF" ] && [ -s "$KB_TAR.entries" ] && return 0
	mkdir -p "$BUILD/bench"
	for d in linux asm-generic; do
		[ -d "/usr/include/$d" ] && dirs+=("$d")
	done
	[ ${#dirs[@]} -gt 0 ] ||
		kb_fail "/usr/include/linux is missing; run deploy/install-deps (package build-essential brings linux-libc-dev)"
	tar -C /usr/include --sort=name --owner=0 --group=0 --numeric-owner -cf "$KB_TAR.tmp" "${dirs[@]}" ||
		kb_fail "tar of /usr/include into $KB_TAR.tmp failed"
	# find in the guest also lists the tree's top directory
	echo $(($(tar -tf "$KB_TAR.tmp" | wc -l) + 1)) > "$KB_TAR.entries"
	mv "$KB_TAR.tmp" "$KB_TAR"
}

# median of the numbers on stdin
kb_median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

e2e_vm_ready >&2
e2e_port_busy "$kb_port" && e2e_port_busy "$kb_mport" ||
	kb_fail "no server listens on 127.0.0.1 ports $kb_port (NFS) and $kb_mport (MOUNT); start $kb_name first"
kb_tarball

work=$(mktemp -d /tmp/unfs-kbench.XXXXXX)
chmod 755 "$work"
share=$work/share
mkdir -p "$share"
cp "$KB_TAR" "$share/tree.tar" || kb_fail "cannot copy $KB_TAR into $share"
cat > "$share/env.sh" <<-EOF
	NFS_PORT=$kb_port
	MOUNT_PORT=$kb_mport
	EXPORT='$kb_export'
	ROUNDS=$kb_rounds
	ENTRIES=$(cat "$KB_TAR.entries")
EOF

echo "kernel-bench: $kb_name, $(cat "$KB_TAR.entries") entries, $kb_rounds round(s)" >&2
e2e_run_vm tests/bench/guest_kernel_bench.sh $((180 + 400 * kb_rounds)) >&2
[ "$E2E_VMRC" = 0 ] && [ "$E2E_FAILED" = 0 ] ||
	kb_fail "the guest failed on $kb_name (status $E2E_VMRC); its log is above"

for kb_phase in untar find-stat rm; do
	kb_t=$(sed -n "s/^RESULT kbench round=[0-9]* phase=$kb_phase seconds=\([0-9.]*\)\$/\1/p" "$work/vm.out" | kb_median)
	[ -n "$kb_t" ] || kb_fail "the guest reported no time for $kb_phase"
	echo "RESULT workload=kernel-$kb_phase server=$kb_name seconds=$kb_t"
done
