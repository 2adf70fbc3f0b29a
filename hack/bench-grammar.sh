#!/usr/bin/env bash
# bench-grammar.sh BASE: compares the constrained-decoding cost per token
# of this tree's grammar package (the pushdown matcher) with commit BASE's
# (the regular automaton before it), interleaved: REPS rounds (default
# 5), each running every arm once for BENCHTIME iterations (default
# 20000x); prints each arm's min and median ns/op and the ratios to the
# regular automaton's arm of the same kind.
#
# Two kinds of arm, at a 151,936-token vocabulary:
#   matcher: the matcher alone (mask, advance): BenchmarkMatcherStep on a
#     non-recursive schema, built from internal/scheduler/grammar/
#     bench_matcher_test.go, which this script copies into BASE's tree
#     unchanged (it uses only the API both versions have);
#   step: a decoding step (mask, masking the logits, advance):
#     BenchmarkConstrainedStep, the benchmark BASE already has.
# The pushdown arms add a recursive tree schema, llama.cpp's JSON grammar
# in GBNF and lists nested without bound (deep: new stacks at most
# steps), which only the pushdown matcher runs.
set -euo pipefail
base=${1:?usage: hack/bench-grammar.sh BASE-COMMIT}
reps=${REPS:-5}
benchtime=${BENCHTIME:-20000x}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
cp "$root/internal/scheduler/grammar/bench_matcher_test.go" "$tmp/base/internal/scheduler/grammar/"
(cd "$tmp/base" && go test -c -o "$tmp/regular.test" ./internal/scheduler/grammar/)
(cd "$root" && go test -c -o "$tmp/pushdown.test" ./internal/scheduler/grammar/)

# arm name, binary, benchmark
arms=(
	"regular-matcher regular BenchmarkMatcherStep"
	"pushdown-matcher pushdown BenchmarkMatcherStep"
	"pushdown-matcher-recursive pushdown BenchmarkMatcherStepRecursive"
	"pushdown-matcher-gbnf pushdown BenchmarkMatcherStepGBNF"
	"pushdown-matcher-deep pushdown BenchmarkMatcherStepDeep"
	"regular-step regular BenchmarkConstrainedStep"
	"pushdown-step pushdown BenchmarkConstrainedStep"
	"pushdown-step-recursive pushdown BenchmarkConstrainedStepRecursive"
	"pushdown-step-gbnf pushdown BenchmarkConstrainedStepGBNF"
)
declare -A results
for rep in $(seq "$reps"); do
	for arm in "${arms[@]}"; do
		read -r name bin bench <<<"$arm"
		ns=$("$tmp/$bin.test" -test.run '^$' -test.bench "^$bench\$" -test.benchtime "$benchtime" | awk '/ns\/op/ {print $3}')
		results[$name]+="$ns "
	done
	echo "round $rep done" >&2
done
stats() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%d %d", a[1], a[int((NR+1)/2)]}'; }
printf '%-28s %12s %12s %14s %14s\n' arm min_ns/op median_ns/op min/regular median/regular
for arm in "${arms[@]}"; do
	read -r name _ _ <<<"$arm"
	ref=regular-step
	[[ $name == *matcher* ]] && ref=regular-matcher
	read -r rmin rmed <<<"$(stats "${results[$ref]}")"
	read -r mn md <<<"$(stats "${results[$name]}")"
	printf '%-28s %12d %12d %14.2f %14.2f\n' "$name" "$mn" "$md" "$(bc -l <<<"$mn/$rmin")" "$(bc -l <<<"$md/$rmed")"
done
