#!/bin/sh
# manifest.sh DIR [NAME...]: one line per entry under DIR (sorted by path) giving its type, mode,
# owner, size, mtime, link count and content checksum (symlinks: their target; devices:
# major:minor). Runs under busybox sh both in the guest (over NFS) and on the host (on the
# branch directory), so the two listings can be compared byte for byte. Directory times
# and sizes are left out (they differ between file systems and say nothing about the data),
# and so are symlink times (busybox cp -a does not copy them).
# Further arguments name top-level entries to leave out, without even looking inside them.
cd "$1" || exit 1
shift
prune=
for n in "$@"; do prune="$prune -path ./$n -prune -o"; done
find . ! -name . \( $prune -print \) | sort | while IFS= read -r p; do
	if [ -L "$p" ]; then
		printf '%s L %s -> %s\n' "$p" "$(stat -c '%u:%g' "$p")" "$(readlink "$p")"
	elif [ -d "$p" ]; then
		printf '%s D %s\n' "$p" "$(stat -c '%a|%u:%g' "$p")"
	elif [ -f "$p" ]; then
		printf '%s F %s %s\n' "$p" "$(stat -c '%a|%u:%g|%s|%Y|%h' "$p")" \
			"$(md5sum < "$p" | cut -c1-32)"
	else
		printf '%s O %s\n' "$p" "$(stat -c '%F|%a|%u:%g|%Y|%h|%t:%T' "$p")"
	fi
done
