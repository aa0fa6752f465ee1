#!/bin/bash
# The man pages (deploy/man/) against the programs they document, so that they never disagree:
#  - unionnfsd.8's OPTIONS are exactly the options `unionnfsd --help` lists;
#  - unionnfsd.conf.5's DIRECTIVES are exactly the directives unionnfsd names when a config
#    file has an unknown one; its EXPORT OPTIONS hold every word unionnfsd names for an unknown
#    export option, and unionnfsd accepts every word they hold; its "Branch words" are the
#    ones unionnfsd names for an unknown branch word; its config examples parse;
#  - unionnfsd-ctl.8's COMMANDS and OPTIONS are exactly those of `unionnfsd-ctl --help`, and
#    the environment variable that usage names is in its ENVIRONMENT;
#  - every page formats without a warning: `groff -man -ww -z`, `man -l`, `mandoc -T lint`
#    (when mandoc is installed: deploy/install-deps installs it).
# Run by tests/run-tests (BUILD=build by default), or alone: bash tests/docs/test_man.sh
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
MAN=deploy/man
SERVER=$BUILD/unionnfsd
CTL=$BUILD/unionnfsd-ctl
failures=0

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

for f in "$SERVER" "$CTL"; do
	if [ ! -x "$f" ]; then
		echo "FAIL: $f is not built; run make (or make test)"
		exit 1
	fi
done
for f in "$MAN/unionnfsd.8" "$MAN/unionnfsd.conf.5" "$MAN/unionnfsd-ctl.8"; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f is missing"
		exit 1
	fi
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# tags PAGE SECTION [SUBSECTION]: the tag line of every .TP paragraph of the section (.SH) or
# of its subsection (.SS), as plain text: escapes, fonts, quotes and the macro name removed.
tags() {
	awk -v sh="$2" -v ss="${3:-}" '
		/^\.SH / { s = substr($0, 5); gsub(/"/, "", s); insh = (s == sh); inss = 0; next }
		/^\.SS / { s = substr($0, 5); gsub(/"/, "", s); inss = (s == ss); next }
		!insh || (ss != "" && !inss) { tp = 0; next }
		/^\.TP/ { tp = 1; next }
		tp { print; tp = 0 }
	' "$1" | sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\%//g' -e 's/\\&//g' \
		-e 's/^\.[A-Z]* *//' -e 's/"//g'
}

# The option names (-x, --long-name) of the given text, one a line, sorted.
option_names() {
	grep -oE '(^|[^a-zA-Z0-9-])--?[a-zA-Z][a-zA-Z0-9-]*' | grep -oE '\-\-?[a-zA-Z][a-zA-Z0-9-]*' |
		sort -u
}

# same WHAT SOURCE PROG_LIST PAGE_LIST WHERE: the lists (files, one name a line) of the program
# (as SOURCE says it) and of the page (WHERE) hold the same names.
same() {
	local what=$1 source=$2 prog=$3 page=$4 where=$5 name
	if [ ! -s "$prog" ]; then
		fail "no ${what}s found in $source: this check cannot read it any more"
		return
	fi
	while read -r name; do
		grep -qxF -- "$name" "$page" ||
			fail "$where: $what '$name' is missing (it is in $source)"
	done < "$prog"
	while read -r name; do
		grep -qxF -- "$name" "$prog" ||
			fail "$where: $what '$name' is documented but not in $source"
	done < "$page"
}

# unionnfsd: the options of --help (usage lines and option lines) against unionnfsd.8's OPTIONS.
"$SERVER" --help > "$tmp/help" 2>&1 || fail "$SERVER --help exited $?"
grep -q -- '--help *show this text' "$tmp/help" ||
	fail "unionnfsd --help lacks its last line ('-h, --help  show this text'): cut short?"
{
	sed -n '/^usage:/,/^$/p' "$tmp/help" | grep -oE '\[--?[a-zA-Z][a-zA-Z0-9-]*' | tr -d '['
	grep -E '^  -' "$tmp/help" | sed -E 's/^  (-[a-zA-Z](, --[a-z-]+)?|--[a-z-]+).*/\1/' |
		tr ',' '\n' | tr -d ' '
} | sort -u > "$tmp/help.opts"
tags "$MAN/unionnfsd.8" OPTIONS | option_names > "$tmp/man.opts"
same option "unionnfsd --help" "$tmp/help.opts" "$tmp/man.opts" "$MAN/unionnfsd.8 OPTIONS"

# unionnfsd.conf: the directives unionnfsd lists for an unknown one, against DIRECTIVES.
printf 'unionnfsd-man-probe\n' > "$tmp/directive.conf"
"$SERVER" -c "$tmp/directive.conf" > "$tmp/directive.out" 2>&1
sed -n 's/.*unknown option .unionnfsd-man-probe. (expected \(.*\))$/\1/p' "$tmp/directive.out" |
	tr ',' '\n' | tr -d ' ' | sed '/^$/d' | sort -u > "$tmp/conf.keys"
# the message's list is cut at a buffer's size: every setting of include/config.h must be in it
grep -oE '^[[:space:]]*X\([A-Z_]+, "[a-z-]+"' include/config.h | sed -E 's/.*"(.*)"/\1/' |
	while read -r name; do
		grep -qxF "$name" "$tmp/conf.keys" ||
			fail "setting '$name' (include/config.h) is not in unionnfsd's list of directives: $(cat "$tmp/directive.out")"
	done
tags "$MAN/unionnfsd.conf.5" DIRECTIVES | awk '{ print $1 }' | sort -u > "$tmp/man.keys"
same directive "unionnfsd's list for an unknown directive" "$tmp/conf.keys" "$tmp/man.keys" "$MAN/unionnfsd.conf.5 DIRECTIVES"

# Export options: every word of unionnfsd's "unknown export option" list is documented...
printf 'export /probe /srv/probe unionnfsd-man-probe\n' > "$tmp/opt.conf"
"$SERVER" -c "$tmp/opt.conf" > "$tmp/opt.out" 2>&1
sed -n 's/.*unknown export option .unionnfsd-man-probe. (expected \(.*\))$/\1/p' "$tmp/opt.out" |
	tr ',' '\n' | sed -E 's/^ *//; s/=.*/=/' | sed '/^$/d' | sort -u > "$tmp/opts.prog"
[ -s "$tmp/opts.prog" ] || fail "no export options found in: $(cat "$tmp/opt.out")"
# the page's words: "name", "name=value", or "name=" followed by its placeholder
tags "$MAN/unionnfsd.conf.5" "EXPORT OPTIONS" | tr ',|' '  ' |
	awk '{ for (i = 1; i <= NF; i++) { print $i; if ($i ~ /=$/) i++ } }' |
	sort -u > "$tmp/opts.page"
sed -E 's/=.*/=/' "$tmp/opts.page" | sort -u > "$tmp/opts.page.names"
while read -r name; do
	grep -qxF -- "$name" "$tmp/opts.page.names" ||
		fail "$MAN/unionnfsd.conf.5 EXPORT OPTIONS: option '$name' is missing (unionnfsd lists it: $(cat "$tmp/opt.out"))"
done < "$tmp/opts.prog"
# ...and unionnfsd takes every word documented: the config's error is then on the next line
while read -r word; do
	case $word in
	anonuid= | anongid=) word=${word}0 ;;
	create=) word=create=tdp ;;
	upper=) word=upper=/srv/probe-clients/%a ;;
	*=) fail "$MAN/unionnfsd.conf.5 EXPORT OPTIONS: '$word' has no sample value in $0"; continue ;;
	esac
	printf 'export /probe /srv/probe %s\nunionnfsd-man-probe\n' "$word" > "$tmp/word.conf"
	"$SERVER" -c "$tmp/word.conf" > "$tmp/word.out" 2>&1
	grep -q "word.conf:2: unknown option 'unionnfsd-man-probe'" "$tmp/word.out" ||
		fail "$MAN/unionnfsd.conf.5 EXPORT OPTIONS: unionnfsd does not take '$word': $(cat "$tmp/word.out")"
done < "$tmp/opts.page"

# The examples of unionnfsd.conf.5 are valid config (the blocks whose every line starts with a
# directive): the error is then the probe line after them.
awk '/^\.EX/ { n++; ex = 1; next } /^\.EE/ { ex = 0; next } ex { print > (dir "/example." n) }' \
	dir="$tmp" "$MAN/unionnfsd.conf.5"
examples=0
for ex in "$tmp"/example.*; do
	[ -e "$ex" ] || continue
	sed -e 's/\\-/-/g' -e 's/\\(aq/'"'"'/g' "$ex" > "$ex.conf"
	awk '{ print $1 }' "$ex.conf" | grep -qvxFf "$tmp/conf.keys" && continue
	lines=$(wc -l < "$ex.conf")
	echo unionnfsd-man-probe >> "$ex.conf"
	"$SERVER" -c "$ex.conf" > "$ex.out" 2>&1
	grep -q "$(basename "$ex").conf:$((lines + 1)): unknown option 'unionnfsd-man-probe'" "$ex.out" ||
		fail "$MAN/unionnfsd.conf.5: an example does not parse: $(cat "$ex.out"); the example: $(cat "$ex")"
	examples=$((examples + 1))
done
[ $examples -ge 3 ] || fail "$MAN/unionnfsd.conf.5: only $examples config examples found (EXAMPLES has at least 3)"

# Branch words: those unionnfsd names for an unknown one, against "Branch words".
printf 'export /probe /srv/probe=unionnfsdmanprobe\n' > "$tmp/branch.conf"
"$SERVER" -c "$tmp/branch.conf" > "$tmp/branch.out" 2>&1
sed -n 's/.*unknown branch word .*; give \(.*\) after the path$/\1/p' "$tmp/branch.out" |
	grep -oE '=[a-z]+' | sort -u > "$tmp/words.prog"
tags "$MAN/unionnfsd.conf.5" EXPORTS "Branch words" | awk '{ print $1 }' | sort -u > "$tmp/words.page"
same "branch word" "unionnfsd's message for an unknown branch word" "$tmp/words.prog" "$tmp/words.page" "$MAN/unionnfsd.conf.5 Branch words"

# unionnfsd-ctl: commands and options of its --help against unionnfsd-ctl.8.
"$CTL" --help > "$tmp/ctl.help" 2>&1 || fail "$CTL --help exited $?"
sed -n '/^commands:/,/^exit status/p' "$tmp/ctl.help" | grep -oE '^  [a-z][a-z-]*' | tr -d ' ' |
	sort -u > "$tmp/ctl.cmds"
tags "$MAN/unionnfsd-ctl.8" COMMANDS | awk '{ print $1 }' | sort -u > "$tmp/man.cmds"
same command "unionnfsd-ctl --help" "$tmp/ctl.cmds" "$tmp/man.cmds" "$MAN/unionnfsd-ctl.8 COMMANDS"
grep -E '^ *(usage: )?unionnfsd-ctl ' "$tmp/ctl.help" | grep -oE -- '--[a-z][a-z-]*' | sort -u \
	> "$tmp/ctl.opts"
tags "$MAN/unionnfsd-ctl.8" OPTIONS | option_names | grep -- '^--' > "$tmp/man.ctlopts"
same option "unionnfsd-ctl --help" "$tmp/ctl.opts" "$tmp/man.ctlopts" "$MAN/unionnfsd-ctl.8 OPTIONS"
grep -oE '\$[A-Z_]+' "$tmp/ctl.help" | tr -d '$' | sort -u > "$tmp/ctl.env"
tags "$MAN/unionnfsd-ctl.8" ENVIRONMENT | awk '{ print $1 }' | sort -u > "$tmp/man.env"
same "environment variable" "unionnfsd-ctl --help" "$tmp/ctl.env" "$tmp/man.env" "$MAN/unionnfsd-ctl.8 ENVIRONMENT"

# Formatting: no warning from groff, man or mandoc.
have_mandoc=0
command -v mandoc > /dev/null && have_mandoc=1
# quiet WHAT COMMAND...: COMMAND prints nothing and exits 0.
quiet() {
	local what=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] || fail "$what (exit $rc): $out"
}

for page in "$MAN"/*.[1-9]; do
	quiet "groff -man -ww -z $page" groff -man -ww -z "$page"
	out=$(MANWIDTH=80 man -l "$page" 2>&1 > "$tmp/rendered")
	rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] || fail "MANWIDTH=80 man -l $page (exit $rc): $out"
	grep -q '^NAME' "$tmp/rendered" || fail "man -l $page rendered no NAME section"
	if [ $have_mandoc = 1 ]; then
		quiet "mandoc -T lint $page" mandoc -T lint "$page"
	fi
done

if [ $have_mandoc = 0 ]; then
	echo "note: mandoc is not installed, mandoc -T lint not run (deploy/install-deps installs it)"
fi
if [ $failures -gt 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "man pages agree: $(wc -l < "$tmp/help.opts") unionnfsd options," \
	"$(wc -l < "$tmp/conf.keys") directives, $(wc -l < "$tmp/opts.page") export option words," \
	"$(wc -l < "$tmp/words.prog") branch words, $examples config examples, $(wc -l < "$tmp/ctl.cmds") unionnfsd-ctl commands," \
	"$(wc -l < "$tmp/ctl.opts") options; groff, man$([ $have_mandoc = 1 ] && echo ', mandoc') silent"
