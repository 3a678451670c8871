#!/usr/bin/env bash
# Regenerates docs/results/MATRIX/report.md for the three task matrices (batchdvfs-p40,
# pctodl-3080ti, pctodl-a100) under every algorithm on the twin, with the chart of % of oracle,
# BOBD's best so far against evaluations and the timelines of the jobs whose cap steps (the other
# jobs' timelines are left out to keep the repository small; `gpucap bench --out DIR` writes them
# all), and docs/results/serve/ for the serving matrix (`serve`: capserve against the static
# Triton-style setting, the seeds and the per-segment oracle; its report, summary files and every
# plot). Deterministic: the same build and seed give the same files. Needs gnuplot (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

gpucap=${GPUCAP:-build/gpucap}
if [ ! -x "$gpucap" ]; then
  echo "make-results: $gpucap not found; build first (cmake --preset dev && cmake --build --preset dev)" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for matrix in batchdvfs-p40 pctodl-3080ti pctodl-a100; do
  "$gpucap" bench --matrix "$matrix" --algorithms all --seed 1 --jobs "$(nproc)" --out "$out/$matrix" >/dev/null
  dest=docs/results/$matrix
  rm -rf "$dest"
  mkdir -p "$dest/plots"
  cp "$out/$matrix/plots/pct_of_oracle.svg" "$out/$matrix/plots/search_progress.svg" "$dest/plots/"
  # Jobs with a cap schedule: their summary rows have an empty cap_w (5th column).
  for job in $(awk -F, 'NR > 1 && $5 == "" {print $2}' "$out/$matrix/summary.csv" | sort -u); do
    cp "$out/$matrix/plots/timeline-$job.svg" "$dest/plots/"
  done
  {
    cat "$out/$matrix/report.md"
    echo
    echo "Regenerate this page with \`scripts/make-results.sh\` (it runs the command above and copies report.md;"
    echo "only the timelines of the jobs whose cap steps are kept here — the links of the others need the bench's own --out folder)."
  } > "$dest/report.md"
  echo "make-results: wrote $dest/report.md"
done
# The serving matrix: 2 to 6 minutes on 2 cores (docs/benchmarks.md).
"$gpucap" bench --matrix serve --seed 1 --jobs "$(nproc)" --out "$out/serve" >/dev/null
rm -rf docs/results/serve
mkdir -p docs/results/serve
cp -r "$out/serve/plots" "$out/serve/summary.csv" "$out/serve/summary.json" docs/results/serve/
{
  cat "$out/serve/report.md"
  echo
  echo "Regenerate this page with \`scripts/make-results.sh\` (it runs the command above and copies report.md, the plots and the summary files)."
} > docs/results/serve/report.md
echo "make-results: wrote docs/results/serve/report.md"
