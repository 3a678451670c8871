#!/usr/bin/env bash
# Regenerates docs/fidelity.md (and the plots in docs/fidelity/): the twin's error against the
# P40 logs (leave-one-job-out), the PctoDL fit (held-out grid points), published curves and Zeus's
# training traces under power limits (V100 and RTX 6000 fitted, P100 held out).
# Takes about two minutes on 2 cores: every P40 fold refits the twin. Needs gnuplot (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

gpucap=${GPUCAP:-build/gpucap}
if [ ! -x "$gpucap" ]; then
  echo "make-fidelity: $gpucap not found; build first (cmake --preset dev && cmake --build --preset dev)" >&2
  exit 1
fi
plots=$(mktemp -d)
trap 'rm -rf "$plots"' EXIT
"$gpucap" fidelity --report docs/fidelity.md --plots "$plots" > /dev/null

# The A40 has no CSV trace, only the rounded tables of power_limit_tables.txt (ResNet-50 and
# ShuffleNet; the two BERT workloads share one table there and cannot be told apart): compare the
# twin's unfitted A40 with them through the same path a user's trace takes.
tables=${GPUCAP_SHARED_DATA_DIR:-../shared/data}/zeus/power_limit_tables.txt
if [ -f "$tables" ]; then
  a40="$plots/summary_power_a40.csv"
  awk '
    BEGIN { print "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power" }
    /^## / { gpu = $2; net = $3; ds = (net == "resnet50") ? "imagenet" : (net == "shufflenetv2") ? "cifar100" : ""; next }
    /^bs=/ {
      if (gpu != "a40" || ds == "") next
      split($1, b, "="); bs = b[2]; sub(":", "", bs)
      for (i = 2; i <= NF; i++) {
        split($i, p, ":"); pl = substr(p[1], 3); split(p[2], tw, "/")
        t = tw[1]; sub("s", "", t); w = tw[2]; sub("W", "", w)
        print ds "," net "," bs ",table," pl "," t "," w
      }
    }' "$tables" > "$a40"
  {
    echo
    echo "## Training under power limits: the A40 (nothing fitted; Zeus's rounded tables)"
    echo
    echo "\`power_limit_tables.txt\` gives the A40's ResNet-50 and ShuffleNet rows (whole seconds and watts) as"
    echo "tables; \`scripts/make-fidelity.sh\` turns them into the CSV format and runs"
    echo "\`gpucap fidelity --zeus-power-trace summary_power_a40.csv\` against the A40 twin, whose figures are"
    echo "datasheet values and hand priors:"
    echo
    echo '```'
    "$gpucap" fidelity --zeus-power-trace "$a40"
    echo '```'
  } >> docs/fidelity.md
fi


# A few runs as pictures (all 60 would bloat the repository; `gpucap fidelity --plots DIR` draws them all).
mkdir -p docs/fidelity
rm -f docs/fidelity/*.svg
shown=(15_ResNetV2_152_DVFS 01_InceptionV1_BatchDVFS 05_MobilenetV1_1_BatchDVFS 15_ResNetV2_152_Clipper)
{
  echo
  echo "## Plots"
  echo
  echo "Logged window maxima of the real P40 (points), the twin's prediction for each step (line) and the cap,"
  echo "for four runs; \`gpucap fidelity --plots DIR\` draws every run."
  echo
  for run in "${shown[@]}"; do
    cp "$plots/$run.svg" docs/fidelity/
    echo "![$run](fidelity/$run.svg)"
    echo
  done
} >> docs/fidelity.md
# Zeus's workloads: the fitted V100 and the held-out P100, every workload.
{
  echo
  echo "Zeus's training traces: time per epoch and average power against the power limit, measured (points)"
  echo "and the twin (lines, simulated), at four batch sizes, for the V100 (fitted) and the P100 (held out)."
  echo
  for svg in "$plots"/zeus-v100-*.svg "$plots"/zeus-p100-*.svg; do
    name=$(basename "$svg" .svg)
    cp "$svg" docs/fidelity/
    echo "![$name](fidelity/$name.svg)"
    echo
  done
} >> docs/fidelity.md
echo "make-fidelity: wrote docs/fidelity.md and docs/fidelity/*.svg"
