#!/usr/bin/env bash
# Regenerates docs/results-sim-p40.md: the 30-job BatchDVFS matrix (and its four dynamic-cap
# runs) under every seed controller on the simulated Tesla P40. Deterministic: the same build and
# seed give the same file.
set -euo pipefail
cd "$(dirname "$0")/.."

gpucap=${GPUCAP:-build/gpucap}
if [ ! -x "$gpucap" ]; then
  echo "make-results: $gpucap not found; build first (cmake --preset dev && cmake --build --preset dev)" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$gpucap" bench --matrix batchdvfs-p40 --algorithms batchsizer,batchdvfs,dvfs,clipper --seed 1 \
  --jobs "$(nproc)" --out "$out" >/dev/null
{
  cat "$out/report.md"
  echo
  echo "Regenerate this page with \`scripts/make-results.sh\` (it runs the command above and copies report.md)."
} > docs/results-sim-p40.md
echo "make-results: wrote docs/results-sim-p40.md"
