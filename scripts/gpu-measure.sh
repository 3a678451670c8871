#!/usr/bin/env bash
# Measurements on a GPU machine one may only READ from (issue 15): it never changes clocks, the
# power limit, the compute mode, persistence or MIG, and never resets the GPU. Every gpucap call
# below is unprivileged (no --allow-gpu-control): gpucap reads power, runs inference and training
# steps, and varies the batch size — nothing else. Caps are gpucap's own targets (software caps).
#
#   scripts/gpu-measure.sh [OUT_ROOT]     # default docs/measurements; writes OUT_ROOT/DATE-GPU/
#
# What it records (each real figure beside the twin's prediction where the twin knows the GPU):
#   1. a batch sweep of MEASURE_MODELS (resnet50, mobilenet_v2, vgg19) in MEASURE_PRECISIONS (fp16,
#      fp32) at the GPU's own clocks: throughput, batch latency, mean and window-max power
#      (`gpucap tune --platform nvml --algorithm oracle`, resumable through its --out files);
#   2. batchsizer under three software caps (50, 65 and 80 % of the peak of the first model's
#      largest batch), against the best static batch of the sweep that stays under each cap;
#   3. `gpucap share --platform torch`: a high-priority BS-1 inference beside a training job,
#      threads against switchflow (low-priority device: the CPU), and the inference alone.
#
# What the machine needs (no package manager, no network is assumed):
#   - this repository's working tree;
#   - a gpucap build: GPUCAP_BUILD_DIR pointing at a build tree that holds gpucap and
#     libgpucap_torch_engine.so built against a CUDA LibTorch (docs/real-gpus.md), or, when the
#     machine has CMake, a C++20 compiler, Debian 12's -dev packages of scripts/setup.sh and a
#     CUDA LibTorch with the C++11 ABI, nothing: the script configures and builds build-measure/;
#   - python3 with torch and torchvision to export the models (or MEASURE_MODELS_DIR and
#     MEASURE_TRAIN_MODELS_DIR with models exported elsewhere by scripts/export_models.py).
#
# To try it without a GPU: MEASURE_ENGINE=cpu GPUCAP_NVML_LIB=<the tests' libfake_nvml.so> with
# GPUCAP_FAKE_NVML_STATE set (short runs: MEASURE_SECONDS=1 MEASURE_BATCHES=1,8).
set -euo pipefail
cd "$(dirname "$0")/.."

out_root=${1:-docs/measurements}
seconds=${MEASURE_SECONDS:-10}
capped_seconds=${MEASURE_CAPPED_SECONDS:-60}
batches=${MEASURE_BATCHES:-1,2,4,8,16,32,48,64,96,128,192,256}
models=${MEASURE_MODELS:-resnet50,mobilenet_v2,vgg19}
precisions=${MEASURE_PRECISIONS:-fp16,fp32}
engine_device=${MEASURE_ENGINE:-cuda}
[ "$engine_device" = cpu ] && precisions=fp32  # FP16 runs on CUDA only
python=${PYTHON:-python3}

# --- gpucap ---
build=${GPUCAP_BUILD_DIR:-}
if [ -z "$build" ]; then
  build=build-measure
  if [ ! -x "$build/gpucap" ]; then
    torch_dir=$("$python" -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUCAP_WITH_TORCH=ON -DBUILD_TESTING=OFF -DTorch_DIR="$torch_dir"
    cmake --build "$build" -j "$(nproc)" --target gpucap gpucap_torch_engine
  fi
fi
gpucap="$build/gpucap"
[ -x "$gpucap" ] || { echo "gpu-measure: no gpucap in $build" >&2; exit 1; }

# --- the GPU ---
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$gpucap" devices
"$gpucap" devices --json > "$raw/devices.json"
field() { "$python" -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; print(eval(sys.argv[2], {}, {"d": d}))' "$raw/devices.json" "$1"; }
gpu_name=$(field 'd["name"]')
max_limit=$(field 'd["power_limit_w"]["max"]')
case "$gpu_name" in
  *H200*) twin=h200 ;; *H100*) twin=h100 ;; *A100*) twin=a100 ;; *V100*) twin=v100 ;; *3080*) twin=rtx3080ti ;;
  *) twin="" ;;
esac
stem="$(date +%Y-%m-%d)-$(echo "$gpu_name" | tr ' /' '__')"
out="$out_root/$stem"
mkdir -p "$out"

# --- models (in a folder that stays, so that a second start resumes the sweeps: their trial
# files name the model file) ---
work=${MEASURE_WORK:-$build/measure-work}
models_dir=${MEASURE_MODELS_DIR:-$work/models}
train_dir=${MEASURE_TRAIN_MODELS_DIR:-$work/train-models}
for model in ${models//,/ }; do
  [ -f "$models_dir/$model.pt" ] || "$python" scripts/export_models.py --out "$models_dir" --models "$model"
done
[ -f "$train_dir/resnet18.train.stages.json" ] && [ -f "$train_dir/mobilenet_v2.train.stages.json" ] ||
  "$python" scripts/export_models.py --out "$train_dir" --models resnet18,mobilenet_v2 --train --stages 4

# --- 1. batch sweeps (trials kept in $out, so a second start resumes) ---
for model in ${models//,/ }; do
  for precision in ${precisions//,/ }; do
    "$gpucap" tune --platform nvml --model-file "$models_dir/$model.pt" --engine-device "$engine_device" \
      --precision "$precision" --algorithm oracle --batch-sizes "$batches" --power-cap "$max_limit" \
      --warmup-s 2 --measure-s "$seconds" --out "$out/sweep-$model-$precision.json" --json > "$raw/sweep-$model-$precision.out"
    if [ -n "$twin" ]; then
      for b in ${batches//,/ }; do
        "$gpucap" run --gpu "$twin" --model "$model" --precision "$precision" --algorithm batchsizer --batch-sizes "$b" \
          --power-cap "$max_limit" --duration "$seconds" --json > "$out/twin-$model-$precision-$b.json" 2>/dev/null ||
          rm -f "$out/twin-$model-$precision-$b.json"
      done
    fi
  done
done

# --- 2. batchsizer under three software caps ---
first_model=${models%%,*}
first_precision=${precisions%%,*}
peak=$("$python" -c 'import json,sys; print(max(t["max_power_w"] for t in json.load(open(sys.argv[1]))["trials"]))' \
  "$out/sweep-$first_model-$first_precision.json")
caps=$("$python" -c 'import sys; p=float(sys.argv[1]); print(" ".join(str(round(f*p)) for f in (0.5, 0.65, 0.8)))' "$peak")
for cap in $caps; do
  "$gpucap" run --platform nvml --model-file "$models_dir/$first_model.pt" --engine-device "$engine_device" \
    --precision "$first_precision" --algorithm batchsizer --power-cap "$cap" --duration "$capped_seconds" \
    --trace "$out/capped-$cap-trace.csv" --json > "$out/capped-$cap.json"
  if [ -n "$twin" ]; then
    "$gpucap" run --gpu "$twin" --model "$first_model" --precision "$first_precision" --algorithm batchsizer \
      --power-cap "$cap" --duration "$capped_seconds" --json > "$out/twin-capped-$cap.json" 2>/dev/null ||
      rm -f "$out/twin-capped-$cap.json"
  fi
done

# --- 3. a latency-critical inference beside training ---
share=("$gpucap" share --platform torch --model-dir "$train_dir" --device "$engine_device" --json)
fg="fg=infer:mobilenet_v2:batch=1:priority=high:requests=${MEASURE_REQUESTS:-300}:warmup=${MEASURE_WARMUP:-20}:start=3"
"${share[@]}" --policy threads --job "$fg" > "$out/share-solo.json"
"${share[@]}" --policy threads --job bg=train:resnet18:batch=32:until=fg --job "$fg" > "$out/share-threads.json"
"${share[@]}" --policy switchflow --lpu cpu --job bg=train:resnet18:batch=32:until=fg --job "$fg" > "$out/share-switchflow.json"

# --- the report ---
"$python" - "$out" "$gpu_name" "$twin" "$models" "$precisions" "$batches" "$caps" "$seconds" "$engine_device" \
  > "$out/README.md" <<'PY'
import json, os, sys, datetime
out, gpu, twin, models, precisions, batches, caps, seconds, device = sys.argv[1:]
load = lambda name: json.load(open(os.path.join(out, name))) if os.path.exists(os.path.join(out, name)) else None
print(f"# Measurements on a real {gpu} — {datetime.date.today()}\n")
print(f"`scripts/gpu-measure.sh`; engine on `{device}`, synthetic inputs, unprivileged: no GPU setting was changed. "
      f"**real**: measured on the GPU; **twin**: gpucap's simulated `{twin or 'none: the twin does not know this GPU'}`.\n")
print("## 1. Batch sweeps at the GPU's own clocks\n")
print(f"Each point: 2 s warm-up, then {seconds} s measured. Batch latency = batch / throughput (batches back to back).\n")
for model in models.split(","):
    for precision in precisions.split(","):
        sweep = load(f"sweep-{model}-{precision}.json")
        if not sweep: continue
        print(f"### {model}, {precision}\n")
        print("| batch | real img/s | real batch ms | real mean W | real max W | twin img/s | twin max W | img/s error | max W error |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in sweep["trials"]:
            b, thr, mx, mean = t["batch_size"], t["throughput_img_s"], t["max_power_w"], t["mean_power_w"]
            tw = load(f"twin-{model}-{precision}-{b}.json")
            twin_cols = (f"{tw['throughput_img_s']:.1f} | {tw['max_power_w']:.1f} | {100*(tw['throughput_img_s']/thr-1):+.1f} % | "
                         f"{100*(tw['max_power_w']/mx-1):+.1f} %") if tw and thr > 0 and mx > 0 else "– | – | – | –"
            print(f"| {b} | {thr:.1f} | {1000*b/thr if thr else 0:.2f} | {mean:.1f} | {mx:.1f} | {twin_cols} |")
        print()
print(f"## 2. batchsizer under software caps ({models.split(',')[0]}, {precisions.split(',')[0]})\n")
print("| cap W | batchsizer img/s | windows over | max W | best static batch | its img/s | batchsizer / static | twin batchsizer img/s |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
sweep = load(f"sweep-{models.split(',')[0]}-{precisions.split(',')[0]}.json")
for cap in caps.split():
    c = load(f"capped-{cap}.json")
    feasible = [t for t in sweep["trials"] if t["max_power_w"] <= float(cap)]
    best = max(feasible, key=lambda t: t["throughput_img_s"]) if feasible else None
    tw = load(f"twin-capped-{cap}.json")
    ratio = f"{c['throughput_img_s']/best['throughput_img_s']:.3f}" if best else "–"
    print(f"| {cap} | {c['throughput_img_s']:.1f} | {c['windows_over_cap']}/{c['windows']} | {c['max_power_w']:.1f} | "
          f"{best['batch_size'] if best else 'none'} | {best['throughput_img_s'] if best else 0:.1f} | {ratio} | "
          f"{tw['throughput_img_s']:.1f} |" if tw else
          f"| {cap} | {c['throughput_img_s']:.1f} | {c['windows_over_cap']}/{c['windows']} | {c['max_power_w']:.1f} | "
          f"{best['batch_size'] if best else 'none'} | {best['throughput_img_s'] if best else 0:.1f} | {ratio} | – |")
print("\n## 3. A BS-1 MobileNetV2 inference (high priority) beside ResNet18 training (BS 32)\n")
print("The share twin models the paper's GPUs (1080 Ti, 2080 Ti, V100) and Keras models only: no twin column.\n")
print("| policy | fg p50 ms | fg p95 ms | fg p99 ms | p95 / solo | background img/s |")
print("|---|---:|---:|---:|---:|---:|")
solo = load("share-solo.json")
solo_p95 = next(j for j in solo["jobs"] if j["name"] == "fg")["latency_ms"]["p95"]
for policy in ("solo", "threads", "switchflow"):
    r = load(f"share-{policy}.json")
    fg = next(j for j in r["jobs"] if j["name"] == "fg")
    bg = next((j for j in r["jobs"] if j["name"] == "bg"), None)
    l = fg["latency_ms"]
    print(f"| {policy} | {l['p50']:.2f} | {l['p95']:.2f} | {l['p99']:.2f} | {l['p95']/solo_p95:.2f} | "
          f"{bg['throughput_img_s']:.1f} |" if bg else f"| {policy} | {l['p50']:.2f} | {l['p95']:.2f} | {l['p99']:.2f} | 1.00 | – |")
PY
cp "$raw/devices.json" "$out/"
echo "gpu-measure: wrote $out/README.md"
