#!/usr/bin/env bash
# Counts the functions, and the files they are in, that one Mutex.Lock of
# a free lock runs, for each commit given ("." is the working tree): the
# module's coverage counts after three lock+unlock pairs on five miniredis
# nodes, with and without one more Lock (scripts/lock-path/), compared
# block by block; a function runs on the path when one of its blocks ran
# more often with the Lock. Background work that happens to run in the
# same 200 ms counts too.
#
# Usage: scripts/lock-path.sh [-v] REV...   (-v lists the functions)
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
here="$root/scripts/lock-path"
verbose=0
if [[ "${1:-}" == "-v" ]]; then
	verbose=1
	shift
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [-v] REV..." >&2; exit 64; }
work="$(mktemp -d)"
trees=()
cleanup() {
	for t in "${trees[@]}"; do
		git -C "$root" worktree remove --force "$t" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap "exit 130" INT TERM

for rev in "$@"; do
	tree="$root"
	if [[ "$rev" != "." ]]; then
		tree="$work/tree-$(echo "$rev" | tr -c 'A-Za-z0-9\n' _)"
		git -C "$root" worktree add --detach --quiet "$tree" "$rev"
		trees+=("$tree")
	fi
	test="$tree/redlock/zz_path_test.go"
	cp "$here/zz_path_test.go.in" "$test"
	for run in pairs lock; do
		if ! (cd "$tree" && PATHRUN=$run go test -count=1 -covermode=count -coverpkg=./... \
			-coverprofile="$work/$run.out" -run TestZZPathOfFreeLock ./redlock >"$work/$run.log" 2>&1); then
			rm -f "$test"
			cat "$work/$run.log" >&2
			exit 1
		fi
	done
	rm -f "$test"
	python3 "$here/grown.py" "$work/pairs.out" "$work/lock.out" >"$work/grown.out"
	(cd "$tree" && go tool cover -func="$work/grown.out") | awk '$1 != "total:" && $NF != "0.0%"' |
		sed 's|^github.com/redlock-go/redlock/||' >"$work/funcs"
	printf '%s: %d functions in %d files\n' "$rev" "$(wc -l <"$work/funcs")" "$(cut -d: -f1 "$work/funcs" | sort -u | wc -l)"
	if [[ $verbose -eq 1 ]]; then
		awk '{print "  " $1 " " $2}' "$work/funcs"
	fi
done
