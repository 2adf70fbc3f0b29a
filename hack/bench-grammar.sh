#!/usr/bin/env bash
# bench-grammar.sh BASE: compares one constrained-decoding step (mask,
# masking 151,936 logits, advance) of this tree's grammar package with
# the same benchmark on commit BASE (the regular automaton before the
# pushdown matcher), interleaved: REPS rounds (default 5), each running
# every arm once for BENCHTIME iterations (default 20000x); prints each
# arm's min and median ns/op and the ratios to the base.
#
# Arms: regular@BASE (BenchmarkConstrainedStep, a non-recursive schema,
# on BASE), pushdown (the same benchmark here), pushdown-recursive (a
# recursive tree schema), pushdown-gbnf (llama.cpp's JSON grammar).
set -euo pipefail
base=${1:?usage: hack/bench-grammar.sh BASE-COMMIT}
reps=${REPS:-5}
benchtime=${BENCHTIME:-20000x}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
(cd "$tmp/base" && go test -c -o "$tmp/regular.test" ./internal/scheduler/grammar/)
(cd "$root" && go test -c -o "$tmp/pushdown.test" ./internal/scheduler/grammar/)

run() { # binary benchmark-regexp
	"$1" -test.run '^$' -test.bench "$2" -test.benchtime "$benchtime" | awk '/ns\/op/ {print $3}'
}
declare -A results
for rep in $(seq "$reps"); do
	results[regular]+="$(run "$tmp/regular.test" '^BenchmarkConstrainedStep$') "
	results[pushdown]+="$(run "$tmp/pushdown.test" '^BenchmarkConstrainedStep$') "
	results[pushdown-recursive]+="$(run "$tmp/pushdown.test" '^BenchmarkConstrainedStepRecursive$') "
	results[pushdown-gbnf]+="$(run "$tmp/pushdown.test" '^BenchmarkConstrainedStepGBNF$') "
	echo "round $rep done" >&2
done
stats() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%d %d", a[1], a[int((NR+1)/2)]}'; }
read -r rmin rmed <<<"$(stats "${results[regular]}")"
printf '%-20s %12s %12s %10s %10s\n' arm min_ns/op median_ns/op min/base median/base
for arm in regular pushdown pushdown-recursive pushdown-gbnf; do
	read -r mn md <<<"$(stats "${results[$arm]}")"
	printf '%-20s %12d %12d %10.2f %10.2f\n' "$arm" "$mn" "$md" "$(bc -l <<<"$mn/$rmin")" "$(bc -l <<<"$md/$rmed")"
done
