#!/usr/bin/env bash
# The real-GPU smoke test, for a machine with an NVIDIA GPU (never run in CI). It builds gpucap,
# lists the GPUs, exports resnet50 and mobilenet_v2, sweeps the batch size of each (throughput,
# window max and mean power per batch size, unprivileged: nothing is written to the GPU), holds a
# software cap of 60 % of the power at the largest batch with batchsizer, and compares the sweep
# with the twin's prediction for the same GPU. It NEVER changes clocks, the power limit or any
# other GPU setting: every run is unprivileged (no --allow-gpu-control).
#
#   scripts/gpu-smoke.sh [OUT_DIR]       # default docs/measurements
#
# Writes OUT_DIR/DATE-GPU-smoke.md and the raw JSON beside it.
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir=${1:-docs/measurements}
seconds=${SMOKE_SECONDS:-10}
batches=${SMOKE_BATCHES:-1,2,4,8,16,32,64,128,256}
models=${SMOKE_MODELS:-resnet50,mobilenet_v2}
# SMOKE_ENGINE=cpu runs the engine on the CPU in FP32 (to try the script without a GPU, with
# GPUCAP_NVML_LIB pointing at the tests' fake NVML).
if [ "${SMOKE_ENGINE:-cuda}" = cpu ]; then
  engine=(--engine-device cpu --precision fp32)
else
  engine=(--engine-device cuda --precision fp16)
fi

./scripts/setup.sh
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$(nproc)" --target gpucap gpucap_torch_engine
gpucap=build-ci/gpucap

mkdir -p "$out_dir"
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$gpucap" devices
"$gpucap" devices --json > "$raw/devices.json"
gpu_name=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["name"])' "$raw/devices.json")
max_limit=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["power_limit_w"]["max"])' "$raw/devices.json")
case "$gpu_name" in
  *H200*) twin=h200 ;;
  *H100*) twin=h100 ;;
  *A100*) twin=a100 ;;
  *V100*) twin=v100 ;;
  *3080*) twin=rtx3080ti ;;
  *) twin="" ;;
esac
scripts/export_models.py --out "$raw/models" --models "$models"

# One unprivileged run per model and batch size: batchsizer with a one-element batch set holds
# that batch; the cap is the board's highest limit, so the controller never has to act.
for model in ${models//,/ }; do
  for b in ${batches//,/ }; do
    "$gpucap" run --platform nvml --model-file "$raw/models/$model.pt" "${engine[@]}" \
      --algorithm batchsizer --batch-sizes "$b" --power-cap "$max_limit" --duration "$seconds" --json \
      > "$raw/real-$model-$b.json"
    if [ -n "$twin" ]; then
      "$gpucap" run --gpu "$twin" --model "$model" --precision "${engine[3]}" --algorithm batchsizer --batch-sizes "$b" \
        --power-cap "$max_limit" --duration "$seconds" --json > "$raw/twin-$model-$b.json" || true
    fi
  done
done

# batchsizer holding a software cap at 60 % of the power of the largest batch (first model).
first=${models%%,*}
largest=${batches##*,}
cap=$(/usr/bin/python3 -c 'import json,sys; print(round(0.6 * json.load(open(sys.argv[1]))["max_power_w"]))' \
  "$raw/real-$first-$largest.json")
"$gpucap" run --platform nvml --model-file "$raw/models/$first.pt" "${engine[@]}" --algorithm batchsizer \
  --power-cap "$cap" --duration "${SMOKE_CAPPED_SECONDS:-60}" --trace "$raw/capped-trace.csv" --json > "$raw/capped.json"

stem="$(date +%Y-%m-%d)-$(echo "$gpu_name" | tr ' /' '__')-smoke"
report="$out_dir/$stem.md"
/usr/bin/python3 - "$raw" "$gpu_name" "$twin" "$models" "$batches" "$cap" "$seconds" "${engine[*]}" > "$report" <<'PY'
import json, sys, datetime
raw, gpu, twin, models, batches, cap, seconds, engine = sys.argv[1:]
print(f"# Smoke test on a real {gpu} — {datetime.date.today()}\n")
print(f"`scripts/gpu-smoke.sh`; engine `{engine}`, synthetic inputs, {seconds} s per point, unprivileged (no GPU setting "
      "was changed). **real**: measured on the GPU; **twin**: gpucap's simulated "
      f"`{twin or 'none'}` for the same batch size.\n")
for model in models.split(","):
    print(f"## {model}\n\n| batch | real img/s | real max W | real mean W | twin img/s | twin max W |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in batches.split(","):
        r = json.load(open(f"{raw}/real-{model}-{b}.json"))
        try:
            t = json.load(open(f"{raw}/twin-{model}-{b}.json"))
            twin_cols = f"{t['throughput_img_s']:.1f} | {t['max_power_w']:.1f}"
        except (OSError, ValueError):
            twin_cols = "– | –"
        print(f"| {b} | {r['throughput_img_s']:.1f} | {r['max_power_w']:.1f} | {r['mean_power_w']:.1f} | {twin_cols} |")
    print()
c = json.load(open(f"{raw}/capped.json"))
print(f"## batchsizer under a software cap of {cap} W (60 % of the largest batch's peak)\n")
print(f"throughput {c['throughput_img_s']:.1f} img/s, windows over the cap {c['over_cap_windows_pct']:.2f} %, "
      f"max {c['max_power_w']:.1f} W, mean {c['mean_power_w']:.1f} W [real]")
PY
mkdir -p "$out_dir/$stem"
cp "$raw"/*.json "$raw/capped-trace.csv" "$out_dir/$stem/"
echo "gpu-smoke: wrote $report"
