#!/usr/bin/env bash
# Checks that the simulator finds each deliberately broken variant of the
# lock: for every internal/sim/testdata/mutants/*.patch, the committed code
# (HEAD) in a worktree of its own, the patch applied, runs the simulation
# for MUTANT_TIME (60s by default; a patch's "time:" line gives its own
# budget, for a variant whose schedule is rare) over the workloads the
# patch's "only:" line names, then replays the first failing seed once with its printed
# command. One line per variant; exits 1 when the simulator missed one.
#
# Usage: scripts/sim-mutants.sh [NAME ...]   (default: every patch)
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
budget="${MUTANT_TIME:-60s}"
work="$(mktemp -d)"
tree="$work/tree"
cleanup() {
	git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap "exit 130" INT TERM
git -C "$root" worktree add --detach --quiet "$tree" HEAD

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
	for p in "$root"/internal/sim/testdata/mutants/*.patch; do
		names+=("$(basename "$p" .patch)")
	done
fi

missed=0
for name in "${names[@]}"; do
	patch="$root/internal/sim/testdata/mutants/$name.patch"
	only="$(sed -n 's/^only: //p' "$patch" | head -1)"
	own="$(sed -n 's/^time: //p' "$patch" | head -1)"
	git -C "$tree" checkout --quiet -- .
	git -C "$tree" apply "$patch"
	log="$work/$name.log"
	(cd "$tree" && go test -count=1 -timeout 0 -v -run TestSimulation ./internal/sim \
		-sim.time="${own:-$budget}" -sim.only="$only" >"$log" 2>&1) || true
	summary="$(grep -E 'sim: [0-9]+ schedules \(seeds from 1, in' "$log" | tail -1 | sed 's/.*sim: //' || true)"
	replay="$(grep -m1 -oE 'go test \./internal/sim -run TestSimulation -sim\.seed=[0-9]+ -sim\.only=[a-z,]+ -sim\.digest=[0-9a-f.]+' "$log" || true)"
	if [[ -z "$replay" ]]; then
		missed=1
		printf 'MISSED %s: %s\n' "$name" "${summary:-no summary; see the log below}"
		[[ -n "$summary" ]] || tail -20 "$log"
		continue
	fi
	again="not replayed"
	if (cd "$tree" && $replay -count=1 >"$work/$name.replay" 2>&1); then
		again="its replay passed (another run of the seed)"
	elif grep -q 'is the same run' "$work/$name.replay"; then
		again="its replay was the same run, with the violation"
	elif grep -q 'was the run of digest' "$work/$name.replay"; then
		again="no replay of 10 was the same run"
	else
		again="its replay failed too (violation), as another run of the seed"
	fi
	# The first violation says which check found it: holds that overlap,
	# or a verdict that is false (see internal/sim/check.go, verdicts_check.go).
	what="$(grep -m1 -oE 'violations, the first: .{0,160}' "$log" | sed 's/violations, the first: //' || true)"
	printf 'found %s: %s\n  first: %s\n  %s\n  its first violation: %s\n' "$name" "$summary" "$replay" "$again" "$what"
done
exit "$missed"
