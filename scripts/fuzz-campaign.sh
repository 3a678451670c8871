#!/usr/bin/env bash
# A fuzzing campaign: builds the fuzz preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz
# target of tests/fuzz for N seconds, then prints one Markdown row per target (docs/testing.md,
# "Fuzzing campaign").
#   scripts/fuzz-campaign.sh [SECONDS] [TARGET...]     (default: 600 s, every target)
#   JOBS=2 scripts/fuzz-campaign.sh 600                (two targets at a time; default 1)
#   NO_BUILD=1 ...                                     (use build-fuzz as it is)
# Each target starts from its seeds (tests/fuzz/corpus/<t>) and every crash ever found
# (tests/fuzz/regressions/<t>); what it adds to the corpus stays in build-fuzz/fuzz-work/<t>/corpus
# (not committed), a finding's input in build-fuzz/fuzz-work/<t>/ (crash-*, leak-*, timeout-*,
# oom-*) and its log beside it. Findings: crashes, sanitizer reports, leaks, inputs that take
# more than 10 s (-timeout=10) and more than 2 GiB (-rss_limit_mb=2048). libFuzzer stops at a
# target's first finding: its row then says how long it ran. Runs under nice; exit status 1 when
# any target had a finding.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
jobs="${JOBS:-1}"
build=build-fuzz
work="$build/fuzz-work"

if [ -z "${NO_BUILD:-}" ]; then
  cmake --preset fuzz >/dev/null
  nice -n 10 cmake --build "$build" --target fuzz_all -j"${BUILD_JOBS:-2}"
fi

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for source in tests/fuzz/*_fuzz.cpp; do
    name="$(basename "$source" _fuzz.cpp)"
    targets+=("$name")
  done
fi

run_target() {
  local name="$1"
  local dir="$work/$name"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  local inputs=("$dir/corpus" "tests/fuzz/corpus/$name")
  [ -d "tests/fuzz/regressions/$name" ] && inputs+=("tests/fuzz/regressions/$name")
  local start end
  start=$(date +%s)
  set +e
  nice -n 10 "$build/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${inputs[@]}" >"$dir/log" 2>&1
  echo $? >"$dir/status"
  set -e
  end=$(date +%s)
  echo $((end - start)) >"$dir/seconds"
}

running=0
for name in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/${name}_fuzz" ]; then
    echo "fuzz-campaign: no $build/fuzz/${name}_fuzz" >&2
    exit 2
  fi
  echo "fuzz-campaign: $name for $seconds s" >&2
  run_target "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

any_finding=0
echo
echo "Fuzzing campaign: $seconds s per target asked, $(date -u +%Y-%m-%d), $(nproc) cores, JOBS=$jobs"
echo
echo "| target | ran (s) | executions | cov | ft | findings |"
echo "|---|---:|---:|---:|---:|---|"
for name in "${targets[@]}"; do
  dir="$work/$name"
  log="$dir/log"
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  findings=$(cd "$dir" && ls -1 crash-* leak-* timeout-* oom-* slow-unit-* 2>/dev/null | grep -v '^slow-unit' | tr '\n' ' ' || true)
  status=$(cat "$dir/status")
  if [ -z "$findings" ] && [ "$status" != 0 ]; then findings="exit status $status (see $log)"; fi
  [ -n "$findings" ] && any_finding=1
  echo "| $name | $(cat "$dir/seconds") | ${executions:-?} | ${cov:-?} | ${ft:-?} | ${findings:-none} |"
done
exit "$any_finding"
