# Shared by tests/deploy/test_*.sh: named checks, counted, and the result line.
passed=0
failed=0

check() { # check NAME COMMAND...: passes when COMMAND succeeds
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "ok   $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name${out:+: $(echo "$out" | tail -5 | tr '\n' ' ')}"
		failed=$((failed + 1))
	fi
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}
