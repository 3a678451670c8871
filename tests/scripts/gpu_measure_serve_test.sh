#!/usr/bin/env bash
# scripts/gpu-measure.sh's serve step end to end, without a GPU: the fake NVML (one A100-like GPU
# that draws 120 W) and an exported model on the CPU engine, one software cap. It checks that both
# servers answered, that nothing was written to the GPU (the fake's write log stays empty), and that
# the report's section 4 shows both runs. The SLO is 1 s: on a busy 2-core machine the CPU engine's
# batch of 4 took over 50 ms, and with the step's 100 ms no batch of the sweep fit (step skipped).
#
#   tests/scripts/gpu_measure_serve_test.sh GPUCAP LIBFAKE_NVML MODELS_DIR FAKE_STATE_JSON
set -euo pipefail
gpucap=$(realpath "$1") fake_nvml=$(realpath "$2") models=$(realpath "$3") fake_state=$(realpath "$4")
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$fake_state" "$work/nvml.json"
fail() { echo "gpu_measure_serve_test: FAIL: $*" >&2; exit 1; }

MEASURE_ENGINE=cpu GPUCAP_NVML_LIB="$fake_nvml" GPUCAP_FAKE_NVML_STATE="$work/nvml.json" \
  GPUCAP_BUILD_DIR="$(dirname "$gpucap")" MEASURE_WORK="$work/measure-work" MEASURE_MODELS=mnasnet0_5 MEASURE_MODELS_DIR="$models" MEASURE_STEPS=serve \
  MEASURE_BATCHES=1,4 MEASURE_WARMUP_SECONDS=0.5 MEASURE_SECONDS=1 MEASURE_CAPS=200 \
  MEASURE_SERVE_SECONDS=3 MEASURE_SERVE_WARMUP_SECONDS=1 MEASURE_SERVE_SLO_MS=1000 PYTHON=/usr/bin/python3 \
  scripts/gpu-measure.sh "$work/out" > "$work/log" 2>&1 || { rc=$?; cat "$work/log"; fail "gpu-measure.sh exited with $rc"; }

out=$(echo "$work"/out/*-NVIDIA_A100-SXM4-40GB)
for algorithm in capserve static; do
  [ -s "$out/serve-$algorithm-200.json" ] || { cat "$work/log"; fail "no server summary for $algorithm"; }
  /usr/bin/python3 - "$out/serve-$algorithm-200.json" "$out/serve-$algorithm-200.load.json" "$algorithm" <<'PY' || exit 1
import json, sys
server, client = (json.load(open(p)) for p in sys.argv[1:3])
algorithm = sys.argv[3]
problems = []
if server["simulated"]:
    problems.append("the server says simulated")
if server["device_writes"] != 0:
    problems.append(f"the server wrote to the GPU {server['device_writes']} times")
if client["answered"] < 1 or client["sent"] < 1:
    problems.append(f"the load generator got {client['answered']} answers of {client['sent']} sent")
if client["failed"] != 0:
    problems.append(f"{client['failed']} requests failed")
if problems:
    sys.exit(f"gpu_measure_serve_test: FAIL: {algorithm}: " + "; ".join(problems))
PY
done
# MEASURE_STEPS=serve: the first model's sweep (serve's profile) and nothing of the other steps.
for other in capped-\* share-\*; do
  ! compgen -G "$out/$other" > /dev/null || fail "MEASURE_STEPS=serve ran another step ($other)"
done
[ -s "$out/sweep-mnasnet0_5-fp32.json" ] || fail "no sweep for serve's profile"
writes=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("writes", [])))' "$work/nvml.json")
[ "$writes" = 0 ] || fail "the fake NVML logged $writes writes"
grep -q '^## 4. `gpucap serve` under software caps (mnasnet0_5)' "$out/README.md" || fail "the report has no serve section"
# The last column, goodput against static's, is "–" only when static's goodput is 0.0: it answered
# nothing within the SLO in the measured seconds, as on a machine loaded by other work (the likely
# cause of one failure beside a sanitizer build).
grep -Eq '^\| 200 \| capserve \| [0-9]+ \| [0-9.]+ \|.*\| 0 \| ([0-9.]+|–) \|$' "$out/README.md" || fail "no capserve row with 0 writes"
grep -Eq '^\| 200 \| static \| [0-9]+ \| ([0-9.]+ \|.*\| 0 \| 1\.000|0\.0 \|.*\| 0 \| –) \|$' "$out/README.md" || fail "no static row with 0 writes"
echo "gpu_measure_serve_test: ok"
sed -n '/^## 4/,$p' "$out/README.md"
