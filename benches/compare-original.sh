#!/usr/bin/env bash
# Runs the original system's kernel benchmark and ours alternately and prints, per workload,
# each side's lowest median, its allocations per operation and the ratios; with
# --instructions, counts each side's instructions per iteration under callgrind instead.
# Documented in docs/performance.md ("Kernel engine"). Run by hand, not by CI.
#
#   benches/compare-original.sh [--rounds N] [--counted | --instructions] <clone of spice-agent> <go binary>
set -euo pipefail

usage() {
    cat >&2 <<'USAGE'
usage: benches/compare-original.sh [--rounds N] [--counted | --instructions] <original-clone> <go-binary>

  <original-clone>  a work tree of spice-framework/spice-agent (holds agent/runtime_benchmark_test.go)
  <go-binary>       the go command to build it with (GOTOOLCHAIN defaults to local)
  --rounds N        alternations of the two benchmarks, at least 3 (default 3)
  --counted         time our side with its counting allocator (bench `kernel`) instead of
                    the plain system allocator (bench `kernel_uncounted`, the default)
  --instructions    time nothing: count both sides' instructions per iteration with
                    valgrind's callgrind (each workload run at two iteration counts, the
                    difference divided by the extra iterations); the same on any load

Our allocation counts always come from one run of bench `kernel` before the first round.

Extra arguments for criterion can be given in KERNEL_BENCH_ARGS (default: none).
USAGE
    exit 2
}

die() {
    printf 'compare-original: %s\n' "$*" >&2
    exit 1
}

rounds=3
timing=kernel_uncounted
mode="time"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds)
            [ $# -ge 2 ] || usage
            rounds="$2"
            shift 2
            ;;
        --rounds=*)
            rounds="${1#--rounds=}"
            shift
            ;;
        --counted)
            timing=kernel
            shift
            ;;
        --instructions)
            mode=instructions
            shift
            ;;
        -h | --help) usage ;;
        --) shift; break ;;
        -*) printf 'compare-original: unknown option %s\n' "$1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 2 ] || usage
case "$rounds" in
    '' | *[!0-9]*) die "--rounds must be a whole number, got '$rounds'" ;;
esac
[ "$rounds" -ge 3 ] || die "--rounds must be at least 3, got $rounds"
if [ "$mode" = instructions ] && [ "$timing" = kernel ]; then
    die "--counted times the counting allocator; --instructions times nothing"
fi

original="$1"
go_bin="$2"
[ -d "$original" ] || die "no such directory: $original"
[ -f "$original/agent/runtime_benchmark_test.go" ] ||
    die "$original is not a clone of spice-agent (no agent/runtime_benchmark_test.go)"
if ! command -v "$go_bin" >/dev/null 2>&1; then
    die "not an executable go binary: $go_bin"
fi
go_version="$("$go_bin" version 2>&1)" || die "'$go_bin version' failed: $go_version"
case "$go_version" in
    'go version '*) ;;
    *) die "$go_bin does not look like the go command ('$go_bin version' said: $go_version)" ;;
esac
command -v cargo >/dev/null 2>&1 || die "cargo is not on PATH"
if [ "$mode" = instructions ]; then
    command -v valgrind >/dev/null 2>&1 || die "--instructions needs valgrind on PATH"
fi

repo="$(cd "$(dirname "$0")/.." && pwd)"
original="$(cd "$original" && pwd)"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

target_dir="$(cd "$repo" && cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
[ -n "$target_dir" ] || die "cannot find cargo's target directory"

workloads="engine_construction text_run tool_round cancellation"
# The primitives the contracts make every run pay, timed by kernel_uncounted in the same process
# as the workloads (agent-core/benches/support/floors.rs).
floors="floor_spawn_and_wake floor_cancellation_token floor_cancellation_token_cancelled
floor_boxed_contained_call floor_log_six_appends floor_run_id_reserve_release floor_allocation"
go_name() {
    case "$1" in
        engine_construction) echo BenchmarkKernelEngineConstruction ;;
        text_run) echo BenchmarkKernelTextRun ;;
        tool_round) echo BenchmarkKernelToolRound ;;
        cancellation) echo BenchmarkKernelCancellation ;;
    esac
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Every figure taken, as "side workload value" lines (timings: the lowest counts).
best="$work/best"
: >"$best"
record() { # side workload value
    printf '%s %s %s\n' "$1" "$2" "$3" >>"$best"
}

# --instructions: each workload runs $short_run and then $long_run iterations in a process of
# its own; the difference of the two processes' instruction totals, divided by the extra
# iterations, is one iteration's cost with the process's setup, the benchmark's warm-up and
# the first iterations' growth taken out, on both sides alike.
short_run=500
long_run=2500

# Instructions callgrind counted in the whole process of the command given.
callgrind_total() { # log command...
    local log="$1" total
    shift
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >"$log" 2>&1 ||
        { cat "$log" >&2; die "under callgrind, this failed: $*"; }
    total="$(sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$log")"
    [ -n "$total" ] || { cat "$log" >&2; die "callgrind printed no total for: $*"; }
    printf '%s\n' "$total"
}

count_instructions() {
    local fixed w name side n short long total
    (cd "$repo" && cargo bench -p agent-core --bench kernel_fixed --no-run --message-format=json) \
        >"$work/cargo-build.log" 2>"$work/cargo-build.err" ||
        { cat "$work/cargo-build.err" >&2; die "our fixed-iteration runner does not build"; }
    fixed="$(sed -n 's/.*"executable":"\([^"]*kernel_fixed[^"]*\)".*/\1/p' "$work/cargo-build.log" | tail -n 1)"
    [ -x "$fixed" ] || die "cargo named no kernel_fixed executable"
    echo "counting (each side's workloads at $short_run and $long_run iterations)"
    for w in $workloads; do
        name="$(go_name "$w")"
        for n in "$short_run" "$long_run"; do
            # Assignments, so that a failure inside the substitutions stops the script. The
            # test binary runs in its package's directory, as `go test` runs it; without
            # asynchronous preemption, whose signals (SIGURG) callgrind's signal tracking
            # fails an assertion on (a goroutine is then preempted at calls only, which a
            # benchmark on one P with goroutines that block or return does not notice).
            total="$(cd "$original/agent" && GODEBUG=asyncpreemptoff=1 callgrind_total "$work/go-$w-$n.log" \
                "$work/original.test" -test.run '^$' -test.bench "^$name\$" \
                -test.benchtime="${n}x" -test.count=1 -test.cpu=1)"
            record original "$w" "$total"
            total="$(callgrind_total "$work/ours-$w-$n.log" "$fixed" "$w" "$n")"
            record ours "$w" "$total"
        done
    done
    echo
    printf 'Instructions per iteration ((total at %s - total at %s) / %s)\n\n' \
        "$long_run" "$short_run" "$((long_run - short_run))"
    printf '| workload | original | ours | ratio |\n| --- | ---: | ---: | ---: |\n'
    for w in $workloads; do
        for side in original ours; do
            # Recorded in order: the short run's total, then the long run's.
            read -r short long <<<"$(awk -v s="$side" -v w="$w" '$1 == s && $2 == w { printf "%s ", $3 }' "$best")"
            printf '%s %s %s\n' "$side" "$w" "$(( (long - short) / (long_run - short_run) ))" >>"$work/per-iteration"
        done
        awk -v w="$w" '$2 == w { v[$1] = $3 } END {
            printf "| %s | %d | %d | %.1fx |\n", w, v["original"], v["ours"], v["original"] / v["ours"] }' \
            "$work/per-iteration"
    done
}

printf 'original: %s (%s)\n' "$original" "$(git -C "$original" rev-parse --short HEAD 2>/dev/null || echo 'not a git work tree')"
printf 'go:       %s\n' "$go_version"
printf 'ours:     %s (%s)\n' "$repo" "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
if [ "$mode" = time ]; then
    printf 'rounds:   %s (our timings: bench %s)\n\n' "$rounds" "$timing"
else
    printf 'mode:     instructions per iteration (callgrind, %s and %s iterations)\n\n' \
        "$short_run" "$long_run"
fi

echo "building both benchmarks"
(cd "$original" && "$go_bin" test -c -o "$work/original.test" ./agent) >"$work/go-build.log" 2>&1 ||
    { cat "$work/go-build.log" >&2; die "the original's benchmark does not build"; }
if [ "$mode" = instructions ]; then
    count_instructions
    exit 0
fi
(cd "$repo" && cargo bench -p agent-core --bench kernel --bench kernel_uncounted --no-run) \
    >"$work/cargo-build.log" 2>&1 ||
    { cat "$work/cargo-build.log" >&2; die "our kernel benchmarks do not build"; }

echo "counting our allocations (bench kernel, no timing)"
# The filter matches no benchmark id, so criterion times nothing; the counts print anyway.
(cd "$repo" && cargo bench -p agent-core --bench kernel -- count-only-no-such-benchmark) \
    >"$work/ours-counts.txt" 2>&1 ||
    { cat "$work/ours-counts.txt" >&2; die "our allocation count failed"; }

# The median's point estimate of bench id <id> in round <round>, in nanoseconds.
criterion_median() { # id round
    local estimates="$target_dir/criterion/$timing/$1/new/estimates.json" median
    [ -f "$estimates" ] || die "round $2: criterion wrote no $estimates"
    median="$(sed -n 's/.*"median":{"confidence_interval":{[^}]*},"point_estimate":\([0-9.eE+-]*\).*/\1/p' \
        "$estimates")"
    [ -n "$median" ] || die "round $2: no median in $estimates"
    printf '%s\n' "$median"
}

for round in $(seq 1 "$rounds"); do
    echo "round $round/$rounds: original"
    (cd "$original" && "$go_bin" test -run '^$' -bench '^BenchmarkKernel' -benchtime=500x \
        -count=5 -cpu=1 ./agent) >"$work/go-$round.txt" 2>&1 ||
        { cat "$work/go-$round.txt" >&2; die "the original's benchmark failed in round $round"; }
    for w in $workloads; do
        name="$(go_name "$w")"
        # Lines: Name[-P] N <ns> ns/op <bytes> B/op <allocations> allocs/op.
        values="$(awk -v n="$name" '$1 == n || index($1, n "-") == 1 { print $3 }' "$work/go-$round.txt")"
        [ -n "$values" ] || die "round $round: no result for $name in the original's output"
        median="$(printf '%s\n' "$values" | sort -g | awk '{ v[NR] = $1 } END {
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
        # The middle one of the -count runs, like the time (the first may differ by one).
        allocs="$(awk -v n="$name" '($1 == n || index($1, n "-") == 1) && $8 == "allocs/op" { print $7 }' \
            "$work/go-$round.txt" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')"
        record original "$w" "$median"
        [ -n "$allocs" ] || die "round $round: no allocs/op for $name in the original's output"
        record original-allocs "$w" "$allocs"
    done

    echo "round $round/$rounds: ours"
    # shellcheck disable=SC2086 # KERNEL_BENCH_ARGS is a word list on purpose
    (cd "$repo" && cargo bench -p agent-core --bench "$timing" -- ${KERNEL_BENCH_ARGS:-}) \
        >"$work/ours-$round.txt" 2>&1 ||
        { cat "$work/ours-$round.txt" >&2; die "our benchmark failed in round $round"; }
    for w in $workloads; do
        # An assignment, so that a failure inside the substitution stops the script (set -e).
        median="$(criterion_median "$w" "$round")"
        record ours "$w" "$median"
    done
    if [ "$timing" = kernel_uncounted ]; then
        for f in $floors; do
            median="$(criterion_median "$f" "$round")"
            record floor "$f" "$median"
        done
    fi
done

for w in $workloads; do
    allocs="$(awk -v n="kernel/$w:" '$1 == n && $3 == "allocations/iter," { print $2 }' \
        "$work/ours-counts.txt" | tail -n 1)"
    [ -n "$allocs" ] || die "no allocation count for $w in our output"
    record ours-allocs "$w" "$allocs"
done

lowest() { # side workload
    awk -v s="$1" -v w="$2" '$1 == s && $2 == w { print $3 }' "$best" | sort -g | head -n 1
}

echo
printf 'Lowest median of %s rounds per side (original: median of -count=5; ours: criterion median of bench %s)\n\n' "$rounds" "$timing"
printf '| workload | original | ours | ratio | original allocs/op | our allocs/iter | allocation ratio |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for w in $workloads; do
    o="$(lowest original "$w")"
    u="$(lowest ours "$w")"
    oa="$(lowest original-allocs "$w")"
    ua="$(lowest ours-allocs "$w")"
    awk -v w="$w" -v o="$o" -v u="$u" -v oa="$oa" -v ua="$ua" 'function t(ns) {
            if (ns >= 1000) return sprintf("%.2f µs", ns / 1000); return sprintf("%.1f ns", ns) }
        BEGIN {
            ar = (ua > 0) ? sprintf("%.1fx fewer", oa / ua) : "n/a"
            printf "| %s | %s | %s | %.1fx | %s | %s | %s |\n", w, t(o), t(u), o / u, oa, ua, ar
        }'
done
if [ "$timing" = kernel_uncounted ]; then
    echo
    echo "Contract floors, lowest median of the same rounds (what each costs a run: docs/performance.md)"
    echo
    printf '| floor | time |\n| --- | ---: |\n'
    for f in $floors; do
        awk -v f="$f" -v v="$(lowest floor "$f")" 'BEGIN { printf "| %s | %.1f ns |\n", f, v }'
    done
    awk -v n="kernel/text_run:" '$1 == n { printf "\nEvents per run: text_run %s", $6 }' "$work/ours-counts.txt"
    awk -v n="kernel/tool_round:" '$1 == n { printf ", tool_round %s", $6 }' "$work/ours-counts.txt"
    awk -v n="kernel/cancellation:" '$1 == n { printf ", cancellation %s\n", $6 }' "$work/ours-counts.txt"
fi
echo
echo "Per-round figures:"
for side in original ours; do
    for w in $workloads; do
        printf '  %-8s %-20s %s\n' "$side" "$w" \
            "$(awk -v s="$side" -v w="$w" '$1 == s && $2 == w { printf "%.0f ns  ", $3 }' "$best")"
    done
done
