#!/usr/bin/env bash
# Runs a test command, its output streamed as usual and kept in a file, and
# when it fails ends with the lines that say what failed: each "--- FAIL"
# with the messages logged under it, panics and races. A CI log that keeps
# only its tail then still names the failing test.
# Usage: scripts/test-summary.sh CMD [ARGS...]
set -uo pipefail

log="$(mktemp "${TMPDIR:-/tmp}/redlock-test.XXXXXX")"
trap 'rm -f "$log"' EXIT

"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [[ $rc -ne 0 ]]; then
	echo
	echo "=== what failed (rc $rc) ==="
	# Each failing test's own stretch of the log (from its "=== RUN" or
	# "=== CONT" to the next test's), its last 40 lines, then the verdicts.
	awk '
		NR == FNR { if (match($0, /--- FAIL: [^ ]+/)) failed[substr($0, RSTART + 10, RLENGTH - 10)] = 1; next }
		/^=== (RUN|CONT|PAUSE|NAME)/ { cur = $3; next }
		/^[[:space:]]*--- (FAIL|PASS|SKIP)/ { next }
		cur in failed { buf[cur, ++n[cur]] = $0 }
		END {
			for (t in failed) {
				if (!(t in n)) continue
				print "--- " t ":"
				from = n[t] > 40 ? n[t] - 39 : 1
				for (i = from; i <= n[t]; i++) print buf[t, i]
			}
		}
	' "$log" "$log"
	grep -E '^[[:space:]]*--- FAIL|^(panic:|fatal error:|WARNING: DATA RACE|FAIL[[:space:]])' "$log" | tail -n 60
fi
exit "$rc"
