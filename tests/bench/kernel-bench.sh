#!/bin/bash
# Kernel client rows of the benchmark: a real Linux NFS client booted under qemu (the
# tests/e2e VM) works on a server that already runs on the host.
#   tests/bench/kernel-bench.sh NAME NFSPORT MOUNTPORT EXPORT [LOWER [DIR...]]
#   tests/bench/kernel-bench.sh --tarball     (makes the tarball; prints its path)
# The guest mounts 10.0.2.2:EXPORT (vers=3,tcp,nolock,port=NFSPORT,mountport=MOUNTPORT; qemu
# rewrites source ports, so the export must admit non-privileged ones) and runs
# tests/bench/guest_kernel_bench.sh: a lab user's workload on a tree of about 2,700 files,
# each phase on a cold mount: untar, find, ls -lR, read, cp -a, rename, rm -rf on a new
# directory, then read, chmod -R, chown -R, touch, append, rm -rf on LOWER (relative to the
# export), a copy of the same tree already on the server: on a union, one only in the lower
# branch. Without LOWER the lower-only phases are left out. The DIRs are host directories
# holding what the server writes for LOWER (a union's upper branch; ganesha's plain copy of the
# tree): between the phases the host measures their disk usage (du, allocated bytes, hard
# links once) and reports what chmod, chown and touch each added. Prints on stdout:
#   RESULT workload=kw-PHASE server=NAME seconds=T       (untar find ls read cp rename rm
#                                                        lower-read lower-chmod lower-chown
#                                                        lower-touch lower-append lower-rm)
#   RESULT workload=kw-PHASE-upper server=NAME bytes=B   (with DIRs: lower-chmod lower-chown
#                                                        lower-touch; may be negative)
#   RESULT checksum=SUM server=NAME md5=M                (read, lower-read, lower-append)
# Everything else (VM log, progress) goes to stderr. The export must be writable; the guest
# works in EXPORT/kw-fresh and EXPORT/kw-fresh.copy, removed again, and removes LOWER.
#
# The tree is the headers (files of at most 64 KiB) of packages deploy/install-deps brings on
# every Debian 12 machine: a real source tree of about 2,700 files in 250 directories and
# 19 MB, the same on every such machine, made once and kept in build/bench/kernel-tree.tar
# (with .entries and .files: what find must see). The guest CPU is emulated (TCG), so
# absolute times are slow: compare servers from the same run.
set -uo pipefail

usage() {
	echo "usage: tests/bench/kernel-bench.sh NAME NFSPORT MOUNTPORT EXPORT [LOWER [DIR...]] (the server must already run)" >&2
	echo "       tests/bench/kernel-bench.sh --tarball" >&2
	exit 2
}
kb_only_tar=0
if [ "${1:-}" = --tarball ]; then
	kb_only_tar=1
else
	[ $# -ge 4 ] || usage
	kb_name=$1
	kb_port=$2
	kb_mport=$3
	kb_export=$4
	kb_lower=${5:-}
	shift 4
	[ $# -gt 0 ] && shift
	kb_measure=("$@")
	case $kb_port$kb_mport in *[!0-9]* | '') usage ;; esac
	case $kb_export in /*) ;; *) usage ;; esac
	case $kb_lower in /* | *..* | *[!A-Za-z0-9._/-]*) usage ;; esac
	[ ${#kb_measure[@]} = 0 ] || [ -n "$kb_lower" ] || usage
	for kb_d in "${kb_measure[@]}"; do
		[ -d "$kb_d" ] || { echo "kernel-bench.sh: $kb_d is no directory: give the directories the server writes LOWER's changes to" >&2; exit 2; }
	done
fi

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

# The packages' headers, not the machine's whole /usr/include: the tree must be the same on
# every machine with the deps. Files over 64 KiB (a few dozen, a quarter of the bytes) stay
# out to keep the tarball near 19 MB, names with characters the guest's plain xargs would
# split (none today) too.
KB_PACKAGES="linux-libc-dev libc6-dev libstdc++-12-dev libgcc-12-dev libclang-common-14-dev valgrind libtirpc-dev libsodium-dev libnfs-dev liblmdb-dev libev-dev libcmocka-dev"
kb_tarball() {
	local p list
	[ -s "$KB_TAR" ] && [ "$KB_TAR" -nt "$KB_SELF" ] && [ -s "$KB_TAR.entries" ] && [ -s "$KB_TAR.files" ] && return 0
	command -v dpkg > /dev/null || kb_fail "dpkg is missing: the tree is made of Debian packages' headers (deploy/install-deps)"
	mkdir -p "$BUILD/bench"
	list=$BUILD/bench/kernel-tree.list
	for p in $KB_PACKAGES; do
		dpkg -L "$p" > /dev/null 2>&1 || kb_fail "package $p is not installed; run deploy/install-deps"
	done
	for p in $KB_PACKAGES; do
		dpkg -L "$p"
	done | grep -E '^/usr/(include|lib/[^ ]*/include)/[A-Za-z0-9._/+-]*$' | sort -u | while read -r p; do
		[ -f "$p" ] && [ ! -L "$p" ] && [ "$(stat -c %s "$p")" -le 65536 ] && echo "${p#/}"
	done > "$list"
	[ "$(wc -l < "$list")" -gt 1000 ] || kb_fail "only $(wc -l < "$list") header files found in $KB_PACKAGES"
	# directories come along as the files' parents, with --no-recursion not a file more
	tar -C / --sort=name --owner=0 --group=0 --numeric-owner --mode=u+w -cf "$KB_TAR.tmp" \
		--no-recursion -T <(awk -F/ '{ p = $1; print p; for (i = 2; i < NF; i++) { p = p "/" $i; print p } }' "$list" | sort -u; cat "$list") ||
		kb_fail "tar of the headers into $KB_TAR.tmp failed"
	# find in the guest also lists the tree's top directory
	echo $(($(tar -tf "$KB_TAR.tmp" | wc -l) + 1)) > "$KB_TAR.entries"
	wc -l < "$list" > "$KB_TAR.files"
	mv "$KB_TAR.tmp" "$KB_TAR"
}

if [ $kb_only_tar = 1 ]; then
	kb_tarball
	echo "$KB_TAR"
	exit 0
fi

# The guest's hooks (e2e_run_vm runs e2e_hook_NAME when the guest asks, output to stderr):
# usage after lower-read, then after each phase what it added, into $work/usage.
kb_used() { # allocated bytes under the DIRs; a hard link counts once
	du --block-size=1 -s -c "${kb_measure[@]}" | awk 'END { print $1 }'
}
kb_usage_step() { # kb_usage_step PHASE
	local now
	now=$(kb_used) || now=
	if [ -z "$now" ] || [ -z "$kb_used_before" ]; then
		echo "kernel-bench: cannot measure the disk usage of ${kb_measure[*]} after $1" >&2
		kb_used_before=
		return 0
	fi
	echo "$1 $((now - kb_used_before))" >> "$work/usage"
	echo "kernel-bench: $1 added $((now - kb_used_before)) bytes under ${kb_measure[*]} (now $now)" >&2
	kb_used_before=$now
}
kb_used_before=
e2e_hook_usage_base() {
	kb_used_before=$(kb_used) || kb_used_before=
	echo "kernel-bench: after lower-read ${kb_used_before:-?} bytes under ${kb_measure[*]}" >&2
}
e2e_hook_usage_chmod() { kb_usage_step lower-chmod; }
e2e_hook_usage_chown() { kb_usage_step lower-chown; }
e2e_hook_usage_touch() { kb_usage_step lower-touch; }
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
	LOWER='$kb_lower'
	MEASURE=$([ ${#kb_measure[@]} -gt 0 ] && echo 1 || echo 0)
	ENTRIES=$(cat "$KB_TAR.entries")
	FILES=$(cat "$KB_TAR.files")
EOF

echo "kernel-bench: $kb_name, $(cat "$KB_TAR.entries") entries, lower-only tree: ${kb_lower:-none}" >&2
e2e_run_vm tests/bench/guest_kernel_bench.sh 2400 >&2
[ "$E2E_VMRC" = 0 ] && [ "$E2E_FAILED" = 0 ] ||
	kb_fail "the guest failed on $kb_name (status $E2E_VMRC); its log is above"

kb_phases="untar find ls read cp rename rm"
[ -n "$kb_lower" ] && kb_phases="$kb_phases lower-read lower-chmod lower-chown lower-touch lower-append lower-rm"
for kb_phase in $kb_phases; do
	kb_t=$(sed -n "s/^RESULT kw phase=$kb_phase seconds=\([0-9.]*\)\$/\1/p" "$work/vm.out" | tail -n 1)
	[ -n "$kb_t" ] || kb_fail "the guest reported no time for $kb_phase"
	echo "RESULT workload=kw-$kb_phase server=$kb_name seconds=$kb_t"
done
if [ ${#kb_measure[@]} -gt 0 ]; then
	for kb_phase in lower-chmod lower-chown lower-touch; do
		kb_b=$(awk -v p="$kb_phase" '$1 == p { print $2 }' "$work/usage" 2> /dev/null | tail -n 1)
		[ -n "$kb_b" ] || kb_fail "no disk usage measured after $kb_phase (see the messages above)"
		echo "RESULT workload=kw-$kb_phase-upper server=$kb_name bytes=$kb_b"
	done
fi
sed -n 's/^RESULT kw sum=\([a-z-]*\) md5=\([0-9a-f]*\)$/RESULT checksum=\1 server='"$kb_name"' md5=\2/p' "$work/vm.out"
