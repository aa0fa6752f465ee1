#!/bin/bash
# Security through a real Linux kernel NFS client in qemu, with a non-root user in
# the guest (uid 1000, via uxattr runas): denied operations leave no trace in the upper (no
# copy-up, no whiteout), root squash maps the guest's root to 65534, a read-only export
# refuses writes, a symlink in a branch that points outside the branches never exposes the
# host's files, and a client no rule admits cannot mount. The guest side is
# tests/e2e/guest_security.sh.
#
# Ports 12061 (NFS) and 12062 (MOUNT), no portmapper. Needs root, qemu-system-x86, a kernel
# in /boot with its modules, busybox-static, cpio and gcc: deploy/install-deps installs them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

e2e_init security 12061 12062
upper=$work/upper
lower=$work/lower
rodir=$work/ro
outside=$work/outside
mkdir -p "$upper" "$lower" "$rodir" "$outside"
chmod 755 "$upper" "$lower" "$rodir"

# --- the lower branch: root-owned file 0644 in a root-owned 0755 directory ---
mkdir "$lower/d" && chmod 755 "$lower/d"
printf 'root data\n' > "$lower/d/f" && chmod 644 "$lower/d/f"
printf 'top data\n' > "$lower/top" && chmod 644 "$lower/top"
# a world-writable sticky directory for the root squash row, in the upper and in the lower
mkdir "$upper/sq" && chmod 1777 "$upper/sq"
mkdir "$lower/sql" && chmod 1777 "$lower/sql"
# symlinks out of the branches: absolute, and relative climbing out of the lower
marker="security-marker-$$-$RANDOM"
printf '%s\n' "$marker" > "$outside/marker"
ln -s "$outside" "$lower/esc"
ln -s ../outside "$lower/esc2"
ln -s ../../../../../../../.. "$lower/escroot"
# the read-only export
printf 'ro data\n' > "$rodir/rofile" && chmod 666 "$rodir/rofile"
mkdir "$rodir/rodir" && chmod 777 "$rodir/rodir"
chown -R root:root "$lower" "$upper" "$rodir"
# POSIX ACLs in the lower: user::rwx, user:1000:PERM, group::---, mask::MASK,
# other::--- in the kernel's xattr format, so the guest's uid 1000 may do what ACCESS says
acl_hex() { # acl_hex PERM MASK
	printf '02000000%s%s%s%s%s' 01000700ffffffff "02000${1}00e8030000" 04000000ffffffff \
		"10000${2}00ffffffff" 20000000ffffffff
}
printf 'acl data\n' > "$lower/aclf" && chmod 600 "$lower/aclf"
printf 'masked\n' > "$lower/aclm" && chmod 600 "$lower/aclm"
mkdir "$lower/acld" && chmod 700 "$lower/acld"
"$E2E_TOOL" hexset "$lower/aclf" system.posix_acl_access "$(acl_hex 6 6)" &&
	"$E2E_TOOL" hexset "$lower/aclm" system.posix_acl_access "$(acl_hex 6 4)" &&
	"$E2E_TOOL" hexset "$lower/acld" system.posix_acl_access "$(acl_hex 7 7)" ||
	e2e_fail "cannot set POSIX ACLs in $lower"

printf '%s\n' "$marker" > "$share/marker"
echo "$outside" > "$share/outside"

e2e_tree_manifest "$lower" > "$work/lower.before"
e2e_tree_manifest "$rodir" > "$work/ro.before"
e2e_tree_manifest "$outside" > "$work/outside.before"

RO_EXPORT=(-e "/ro=$rodir" -o ro,insecure)
E2E_EXPORTS=(-e "/union=$upper:$lower" --client '*(rw,root_squash,insecure)' "${RO_EXPORT[@]}")

# the guest asks for these between its rows: rules that do not admit it, then rules that do
e2e_hook_deny() {
	e2e_stop_server
	E2E_EXPORTS=(-e "/union=$upper:$lower" --client '192.0.2.1(rw,insecure)' "${RO_EXPORT[@]}")
	e2e_start_server
}
e2e_hook_allow() {
	e2e_stop_server
	E2E_EXPORTS=(-e "/union=$upper:$lower" --client '192.0.2.1(rw,insecure)'
		--client '127.0.0.1(rw,root_squash,insecure)' "${RO_EXPORT[@]}")
	e2e_start_server
}

e2e_start_server
echo "server started on ports $E2E_PORT/$E2E_MPORT: /union=$upper:$lower, /ro=$rodir (ro)"
e2e_run_vm "$E2E_HERE/guest_security.sh" 150
e2e_stop_server

# --- the host's view ---
U=$upper
desc() { # what is at a path, for messages
	if [ -L "$1" ]; then echo "symlink to $(readlink "$1")"
	elif [ -e "$1" ]; then stat -c '%F %t:%T mode %a owner %u:%g size %s' "$1"
	else echo "nothing"; fi
}
ok=1 why=
for p in d/f d/g d/.wh.f top topmoved; do
	if [ -e "$U/$p" ] || [ -L "$U/$p" ]; then
		ok=0 why="upper/$p is $(desc "$U/$p") after denied operations, want nothing"
		break
	fi
done
if [ $ok = 1 ] && [ -e "$U/d" ]; then
	ok=0 why="upper/d is $(desc "$U/d") after denied operations (a copy-up of the directory), want nothing"
fi
e2e_result denied_no_trace host $ok "$why"

diff_manifest() { # diff_manifest ROW DIR BEFORE
	e2e_tree_manifest "$2" > "$work/$1.after"
	if diff "$3" "$work/$1.after" > "$work/$1.diff"; then
		e2e_result "$1" host 1
	else
		e2e_result "$1" host 0 "$2 changed: $(head -4 "$work/$1.diff" | tr '\n' ' ')"
	fi
}
diff_manifest lower_unchanged "$lower" "$work/lower.before"
diff_manifest ro_unchanged "$rodir" "$work/ro.before"
diff_manifest outside_unchanged "$outside" "$work/outside.before"

for p in sq/rootfile sql/rootfile sq/rootdir; do
	if [ -e "$U/$p" ] && [ "$(stat -c %u:%g "$U/$p")" = 65534:65534 ]; then
		e2e_result "root_squash_owner_${p//\//_}" host 1
	else
		e2e_result "root_squash_owner_${p//\//_}" host 0 "upper/$p is $(desc "$U/$p"), want owner 65534:65534"
	fi
done
if [ -e "$U/sq/userfile" ] && [ "$(stat -c %u:%g "$U/sq/userfile")" = 1000:1000 ]; then
	e2e_result user_owner host 1
else
	e2e_result user_owner host 0 "upper/sq/userfile is $(desc "$U/sq/userfile"), want owner 1000:1000"
fi
if [ -e "$U/sq/allowed" ] && [ "$(stat -c %u "$U/sq/allowed")" = 1000 ]; then
	e2e_result allow_write host 1
else
	e2e_result allow_write host 0 "upper/sq/allowed is $(desc "$U/sq/allowed"), want a file of uid 1000"
fi
e2e_finish
