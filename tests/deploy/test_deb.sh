#!/bin/bash
# The Debian package deploy/debian/build-deb makes of the binaries in $BUILD (`make deb`
# does the same with build/deb): its control fields, its exact file list with owners and
# modes, the conffile, the maintainer scripts, the unit's paths, and lintian finds no error.
# Installing, running and purging it under systemd is not tested here.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/deploy/lib.sh

for tool in dpkg-deb dpkg-shlibdeps lintian; do
	if ! command -v $tool >/dev/null; then
		echo "$tool not found: install dpkg-dev and lintian (sudo deploy/install-deps)"
		exit 1
	fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

upstream=$(sed -n 's/^#define UNIONNFSD_VERSION "\(.*\)"$/\1/p' include/control.h)
version=${upstream//-/\~}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=$(deploy/debian/build-deb "$BUILD" "$tmp/out")
check "build-deb succeeds" test $? -eq 0
check "package name has the source's version" test "$deb" = "$tmp/out/unionnfsd_${version}_$arch.deb"

field() { dpkg-deb -f "$deb" "$1"; }
check "Package" test "$(field Package)" = unionnfsd
check "Version is UNIONNFSD_VERSION ($upstream as $version)" test "$(field Version)" = "$version"
check "Architecture" test "$(field Architecture)" = "$arch"
depends=$(field Depends)
echo "Depends: $depends"
for lib in libc6 libtirpc3 liblmdb0 libev4 libsodium23; do
	check "Depends on $lib (versioned, from dpkg-shlibdeps)" grep -qE "(^|, )$lib \(>= [^)]+\)(,|$)" <<< "$depends"
done
check "Recommends rpcbind" test "$(field Recommends)" = rpcbind
check "Section, Priority" test "$(field Section) $(field Priority)" = "net optional"
check "Maintainer" grep -q '^.* <.*@.*>$' <<< "$(field Maintainer)"
check "Installed-Size" grep -qE '^[1-9][0-9]*$' <<< "$(field Installed-Size)"

# the files, exactly: what `make install PREFIX=/usr` puts there (no state directory: postinst
# makes it) and the documentation; all root's, 0755 programs, 0644 the rest
{
	printf '%s\n' -rw-r--r--:./etc/unionnfsd.conf -rw-r--r--:./lib/systemd/system/unionnfsd.service \
		-rwxr-xr-x:./usr/sbin/unionnfsd -rwxr-xr-x:./usr/sbin/unionnfsd-ctl
	for page in deploy/man/*.[1-9]; do
		[ -e "$page" ] && echo "-rw-r--r--:./usr/share/man/man${page##*.}/${page##*/}.gz"
	done
	for doc in README.md.gz changelog.gz copyright netboot-guide.md.gz examples/lab.conf examples/lab-hosts; do
		echo "-rw-r--r--:./usr/share/doc/unionnfsd/$doc"
	done
} | sort > "$tmp/expected"
dpkg-deb -c "$deb" > "$tmp/contents"
grep -v '^d' "$tmp/contents" | awk '{print $1 ":" $6}' | sort > "$tmp/files"
check "file list and modes" diff "$tmp/expected" "$tmp/files"
check "every entry root/root" test "$(awk '$2 != "root/root"' "$tmp/contents" | wc -l)" = 0
check "directories 0755" test "$(awk '/^d/ && $1 != "drwxr-xr-x"' "$tmp/contents" | wc -l)" = 0

dpkg-deb -x "$deb" "$tmp/root"
dpkg-deb -e "$deb" "$tmp/DEBIAN"
check "conffiles: /etc/unionnfsd.conf" test "$(cat "$tmp/DEBIAN/conffiles")" = /etc/unionnfsd.conf
check "conffile is the example, exporting nothing" cmp deploy/example.conf "$tmp/root/etc/unionnfsd.conf"
check "unit runs /usr/sbin/unionnfsd" grep -qx 'ExecStart=/usr/sbin/unionnfsd -f -c /etc/unionnfsd.conf' \
	"$tmp/root/lib/systemd/system/unionnfsd.service"
check "unit has the no-export condition" grep -q '^ExecCondition=.* /etc/unionnfsd.conf ||' \
	"$tmp/root/lib/systemd/system/unionnfsd.service"
for script in postinst prerm postrm; do
	check "$script is deploy/debian's, 0755" sh -c 'cmp "$1" "$2" && test "$(stat -c %a "$2")" = 755' sh \
		"deploy/debian/$script" "$tmp/DEBIAN/$script"
	check "$script parses (sh -n)" sh -n "$tmp/DEBIAN/$script"
done
check "postinst makes the state directory 0700" grep -q 'install -d -m 0700 .*/var/lib/unionnfsd' "$tmp/DEBIAN/postinst"
check "postinst enables the unit" grep -q 'deb-systemd-helper enable unionnfsd.service' "$tmp/DEBIAN/postinst"
check "prerm stops it" grep -q 'deb-systemd-invoke stop unionnfsd.service' "$tmp/DEBIAN/prerm"
check "postrm purge removes the state directory" grep -q 'rm -rf /var/lib/unionnfsd' "$tmp/DEBIAN/postrm"
check "md5sums match the files" sh -c 'cd "$1" && md5sum --quiet -c "$2"' sh "$tmp/root" "$tmp/DEBIAN/md5sums"
check "md5sums list every file but the conffile" test "$(wc -l < "$tmp/DEBIAN/md5sums")" = "$(($(wc -l < "$tmp/expected") - 1))"
check "binaries stripped" sh -c '! readelf -S "$1" | grep -q "\.symtab"' sh "$tmp/root/usr/sbin/unionnfsd"
changelog=$(gzip -dc "$tmp/root/usr/share/doc/unionnfsd/changelog.gz")
check "changelog's entry is this version" grep -q "^unionnfsd ($version) " <<< "$changelog"

lintian --fail-on error "$deb" > "$tmp/lintian" 2>&1
status=$?
cat "$tmp/lintian"
check "lintian: no errors" test $status -eq 0

finish
