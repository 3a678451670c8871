#!/usr/bin/env bash
# Regenerates docs/fidelity.md (and the plots in docs/fidelity/): the twin's error against the
# P40 logs (leave-one-job-out), the PctoDL fit (held-out grid points), published curves and Zeus's
# training traces under power limits (V100 and RTX 6000 fitted, P100 held out), then in-sample
# diagnostics (the P40 with the shipped files, the P100 fitted to its own trace).
# Takes about 13 minutes on 2 cores: every P40 fold refits the twin, and the P100 diagnostic refits
# the Zeus traces. Needs gnuplot and python3 (scripts/setup.sh).
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

# In-sample diagnostics: the twin fitted to the very data a held-out figure is measured on. They
# separate what the model cannot express from what the fitted data cannot tell about the held-out
# data, and bound what any held-out figure can reach with this model.
shared=${GPUCAP_SHARED_DATA_DIR:-../shared/data}
selffit=$(mktemp -d)
trap 'rm -rf "$plots" "$selffit"' EXIT
cp -r data "$selffit/"
python3 - "$selffit/data/calibration/zeus.json" <<'EOF'
import json, sys
path = sys.argv[1]
setup = json.load(open(path))
setup["fit"].append("p100")
setup["check"].remove("p100")
setup["derive"].remove("p100")
json.dump(setup, open(path, "w"), indent=1)
EOF
"$gpucap" --data-dir "$selffit/data" calibrate --sources zeus > /dev/null
{
  echo
  echo "## In-sample diagnostics: how far the model gets on the data it is fitted to"
  echo
  echo "Not fidelity figures: each fits the twin to the data it is then compared with. A held-out error"
  echo "mixes what the twin's model cannot express with what the fitted data cannot tell about the"
  echo "held-out data; these separate the two."
  echo
  echo "**P40, every job fitted.** \`gpucap fidelity --p40-logs $shared/batchdvfs-p40\` compares each"
  echo "job with the shipped data files, which \`gpucap calibrate\` fitted to all 20 jobs:"
  echo
  echo '```'
  # Without the target column: an in-sample figure is not measured against the targets.
  "$gpucap" fidelity --p40-logs "$shared/batchdvfs-p40" | grep -v '^p40 power ' |
    sed -E 's/  (target|median <=.*|MAPE <=.*)$//'
  echo '```'
  echo
  echo "**The P100 fitted to its own trace.** A copy of \`data/\` with the P100 moved from \"check\" and"
  echo "\"derive\" to \"fit\" in \`calibration/zeus.json\`, then \`gpucap --data-dir COPY calibrate --sources zeus\`"
  echo "and \`gpucap --data-dir COPY fidelity --zeus-power-trace $shared/zeus/nsdi23/summary_power_p100.csv\`:"
  echo
  echo '```'
  "$gpucap" --data-dir "$selffit/data" fidelity --zeus-power-trace "$shared/zeus/nsdi23/summary_power_p100.csv"
  echo '```'
  echo
  echo "The constants that calibration derives for a testbed no trace fits (the fitted testbeds'"
  echo "geometric mean, docs/simulator.md), as shipped and as the P100's own trace fits them:"
  echo
  # The keys of kDerivedTestbedKeys (src/calibrate/zeus_source.cpp). A copy of the shipped files
  # with only these set to their self-fitted values shows how much of the held-out error they carry.
  mkdir "$selffit/swapped"
  cp -r data "$selffit/swapped/"
  python3 - data/gpus/p100.json "$selffit/data/gpus/p100.json" "$selffit/swapped/data/gpus/p100.json" <<'EOF'
import json, sys
derived, fitted, swapped = (json.load(open(p)) for p in sys.argv[1:4])
print("| constant | derived (shipped) | fitted to the P100's trace |")
print("|---|---:|---:|")
for key in ("host.training_loop_scale", "host.layer_launch_s", "host.allocator_s", "fp32_efficiency_scale",
            "fp16_efficiency_scale"):
    *path, last = key.split(".")
    def holder(spec):
        for part in path:
            spec = spec[part]
        return spec
    print(f"| `{key}` | {holder(derived)[last]:.3g} | {holder(fitted)[last]:.3g} |")
    holder(swapped)[last] = holder(fitted)[last]
json.dump(swapped, open(sys.argv[3], "w"), indent=2)
EOF
  echo
  echo "The shipped files with only these five set to the P100's self-fitted values, the rest (its"
  echo "derived power model, every shared figure) unchanged:"
  echo
  echo '```'
  "$gpucap" --data-dir "$selffit/swapped/data" fidelity --zeus-power-trace "$shared/zeus/nsdi23/summary_power_p100.csv" |
    tail -n 1
  echo '```'
} >> docs/fidelity.md


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
