#!/bin/bash
# `make install` into a DESTDIR, as root or not: the files, their modes and the paths
# rewritten for PREFIX and sysconfdir; a second install keeps the configuration; the unit's
# ExecCondition tells a configuration with an export from one without; `make uninstall`.
# Uses the binaries of $BUILD (tests/run-tests sets it; `make test` builds them first).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/deploy/lib.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

install_to() { # install_to DESTDIR [VAR=VALUE...]
	local dest=$1
	shift
	# -o: the binaries $BUILD has (a sanitizer build's too), never rebuilt here
	make -s --no-print-directory BUILD="$BUILD" -o "$BUILD/unionnfsd" -o "$BUILD/unionnfsd-ctl" \
		DESTDIR="$dest" "$@" install
}

# The ExecCondition's shell command with the config path replaced by $2; prints its exit status.
condition_status() { # condition_status UNIT CONFIG
	local cmd
	cmd=$(sed -n "s/^ExecCondition=\/bin\/sh -c '\(.*\)'$/\1/p" "$1")
	[ -n "$cmd" ] || { echo "no ExecCondition=/bin/sh -c '...' line in $1"; return; }
	sh -c "${cmd//\/etc\/unionnfsd.conf/$2}" 2>"$tmp/condition.err"
	echo $?
}

# --- PREFIX=/usr/local (the default)
a=$tmp/a
out=$(install_to "$a" 2>&1)
check "make install succeeds" test $? -eq 0
echo "$out"
for bin in unionnfsd unionnfsd-ctl; do
	check "sbin/$bin installed 0755" test "$(stat -c %a "$a/usr/local/sbin/$bin" 2>&1)" = 755
	check "sbin/$bin is the built binary" cmp "$BUILD/$bin" "$a/usr/local/sbin/$bin"
done
pages=0
for page in deploy/man/*.[1-9]; do
	[ -e "$page" ] || continue
	pages=$((pages + 1))
	gz=$a/usr/local/share/man/man${page##*.}/${page##*/}.gz
	check "man page $page installed gzip-ed, 0644" test "$(stat -c %a "$gz" 2>&1)" = 644
	check "man page $page content" sh -c 'gzip -dc "$1" | cmp - "$2"' sh "$gz" "$page"
done
echo "($pages man pages in deploy/man)"
installed=$(find "$a/usr/local/share/man" -type f 2>/dev/null | wc -l)
check "no other man pages installed" test "$installed" -eq "$pages"

unit=$a/usr/local/lib/systemd/system/unionnfsd.service
check "unit installed 0644" test "$(stat -c %a "$unit" 2>&1)" = 644
check "unit runs the PREFIX binary" grep -qx 'ExecStart=/usr/local/sbin/unionnfsd -f -c /etc/unionnfsd.conf' "$unit"
check "unit otherwise as in deploy/" sh -c 'diff "$1" "$2" | grep "^[<>]" | grep -v "ExecStart=" | grep -q . && exit 1 || exit 0' \
	sh deploy/unionnfsd.service "$unit"

conf=$a/etc/unionnfsd.conf
check "config installed to /etc (PREFIX=/usr/local)" cmp deploy/example.conf "$conf"
check "config installed 0644" test "$(stat -c %a "$conf" 2>&1)" = 644
check "config as installed has no export" test "$(grep -cE '^[[:space:]]*export[[:space:]]' "$conf")" = 0
check "state directory 0700" test "$(stat -c %a "$a/var/lib/unionnfsd" 2>&1)" = 700

# the unit's condition: no export line (as installed), a commented one, a missing file: skipped;
# an export line, indented or not: started
check "condition: installed config skipped" test "$(condition_status "$unit" "$conf")" = 1
check "condition: skip names the cause and the fix" grep -q "no export line in $conf.*systemctl start unionnfsd" "$tmp/condition.err"
check "condition: missing config skipped" test "$(condition_status "$unit" "$tmp/none.conf")" = 1
printf 'port 2049\n#export /u /srv/u rw\n' > "$tmp/commented.conf"
check "condition: commented export skipped" test "$(condition_status "$unit" "$tmp/commented.conf")" = 1
printf 'port 2049\n\texport /u /srv/u:/srv/b *(rw)\n' > "$tmp/export.conf"
check "condition: export line starts" test "$(condition_status "$unit" "$tmp/export.conf")" = 0

# a second install keeps the administrator's configuration and the state directory's content
echo "export /u /srv/u rw" >> "$conf"
cp "$conf" "$tmp/edited.conf"
touch "$a/var/lib/unionnfsd/inodes.mdb"
out=$(install_to "$a" 2>&1)
check "second make install succeeds" test $? -eq 0
check "second install keeps the config" cmp "$tmp/edited.conf" "$conf"
check "second install says it kept the config" grep -q "kept $conf" <<< "$out"
check "second install keeps the state" test -e "$a/var/lib/unionnfsd/inodes.mdb"

# uninstall: programs, unit and man pages go; the config and the state directory stay
make -s --no-print-directory BUILD="$BUILD" DESTDIR="$a" uninstall
check "uninstall leaves only config and state" sh -c \
	'test "$(cd "$1" && find . -type f | sort | tr "\n" " ")" = "./etc/unionnfsd.conf ./var/lib/unionnfsd/inodes.mdb "' sh "$a"

# --- PREFIX=/usr (the package's layout)
b=$tmp/b
install_to "$b" PREFIX=/usr > /dev/null
check "PREFIX=/usr: binaries in /usr/sbin" test -x "$b/usr/sbin/unionnfsd" -a -x "$b/usr/sbin/unionnfsd-ctl"
check "PREFIX=/usr: unit in /lib/systemd/system" grep -qx 'ExecStart=/usr/sbin/unionnfsd -f -c /etc/unionnfsd.conf' \
	"$b/lib/systemd/system/unionnfsd.service"
check "PREFIX=/usr: config in /etc" cmp deploy/example.conf "$b/etc/unionnfsd.conf"

# --- a self-contained tree elsewhere: the config under PREFIX, and the unit says so
c=$tmp/c
install_to "$c" PREFIX=/opt/unionnfsd > /dev/null
unit=$c/opt/unionnfsd/lib/systemd/system/unionnfsd.service
check "PREFIX=/opt/unionnfsd: config in PREFIX/etc" cmp deploy/example.conf "$c/opt/unionnfsd/etc/unionnfsd.conf"
check "PREFIX=/opt/unionnfsd: unit's paths" grep -qx \
	'ExecStart=/opt/unionnfsd/sbin/unionnfsd -f -c /opt/unionnfsd/etc/unionnfsd.conf' "$unit"
check "PREFIX=/opt/unionnfsd: condition reads that config" grep -q \
	'^ExecCondition=.* /opt/unionnfsd/etc/unionnfsd.conf ||' "$unit"
check "PREFIX=/opt/unionnfsd: no /etc/unionnfsd.conf left in the unit" sh -c '! grep -v "^#" "$1" | grep -q " /etc/unionnfsd.conf"' sh "$unit"

finish
