#!/usr/bin/env bash
# Measurements on a GPU machine one may only READ from (issue 15): it never changes clocks, the
# power limit, the compute mode, persistence or MIG, and never resets the GPU. Every gpucap call
# below is unprivileged (no --allow-gpu-control): gpucap reads power, runs inference and training
# steps, and varies the batch size — nothing else. Caps are gpucap's own targets (software caps).
#
#   scripts/gpu-measure.sh [OUT_ROOT]     # default docs/measurements; writes OUT_ROOT/DATE-GPU/
#
# What it records (each real figure beside the twin's prediction where the twin knows the GPU, in the
# README.md that scripts/gpu_measure_report.py writes):
#   1. a batch sweep of MEASURE_MODELS (resnet50, mobilenet_v2, vgg19) in MEASURE_PRECISIONS (fp16,
#      fp32) at the GPU's own clocks: throughput, batch latency, mean and window-max power
#      (`gpucap tune --platform nvml --algorithm oracle`, resumable through its --out files);
#   2. under three software caps (50, 65 and 80 % of the highest power of the first model's sweep,
#      or MEASURE_CAPS, W, lowest first):
#      gpucap's capfit with that sweep as its profile, and batchsizer at its own window (10 batches)
#      and at a 1-s window, each against the best static batch of the sweep under the cap;
#   3. `gpucap share --platform torch`: a high-priority BS-1 inference beside a training job,
#      threads against switchflow (low-priority device: the CPU), and the inference alone;
#   4. `gpucap serve --platform nvml` under the same three software caps (issue 36): gpucap's
#      capserve against the static Triton-style setting (batch cap 32, 2-ms delay: the serve
#      matrix's; 32 also bounds capserve's batch), each taking a
#      Poisson stream from `gpucap load --binary` on the same machine at MEASURE_SERVE_LOAD (0.7) of
#      the sweep's capacity within the SLO under the lowest cap (at most MEASURE_SERVE_MAX_RPS,
#      2000), MEASURE_SERVE_SECONDS (30) per run, the first MEASURE_SERVE_WARMUP_SECONDS (5) a warm-up, p99 SLO
#      MEASURE_SERVE_SLO_MS (100), on 127.0.0.1:MEASURE_SERVE_PORT (default: a free port). Software caps
#      move the batch cap, the delay and admission only: nothing is written to the GPU.
#
# MEASURE_STEPS (default sweep,capped,share,serve) picks the steps; serve needs the first model's
# sweep and runs it when the sweep step is not picked (resumed from its --out file when there).
#
# What the machine needs (no package manager, no network is assumed):
#   - this repository's working tree;
#   - a gpucap build: GPUCAP_BUILD_DIR pointing at a build tree that holds gpucap and
#     libgpucap_torch_engine.so built against a CUDA LibTorch (docs/real-gpus.md) — on a machine
#     without Debian's -dev packages, the bin/ of a bundle that scripts/gpu-bundle.sh made on a
#     Debian 12 machine and installed there (it needs only a C++ compiler, CMake and PyTorch) —
#     or, when the machine has CMake, a C++20 compiler, Debian 12's -dev packages of
#     scripts/setup.sh and a CUDA LibTorch with the C++11 ABI, nothing: the script configures and
#     builds build-measure/;
#   - the NVIDIA driver and a C compiler: every gpucap call reads NVML through a shim that refuses
#     NVML's write calls (scripts/nvml-readonly.c; MEASURE_READONLY_NVML=0 goes without it);
#   - python3 with torch and torchvision to export the models (or MEASURE_MODELS_DIR and
#     MEASURE_TRAIN_MODELS_DIR with models exported elsewhere by scripts/export_models.py).
#
# To try it without a GPU: MEASURE_ENGINE=cpu GPUCAP_NVML_LIB=<the tests' libfake_nvml.so> with
# GPUCAP_FAKE_NVML_STATE set (short runs: MEASURE_SECONDS=1 MEASURE_BATCHES=1,8). Lengths:
# MEASURE_WARMUP_SECONDS (2) and MEASURE_SECONDS (10) per sweep point, MEASURE_CAPPED_SECONDS (60)
# per capped run.
set -euo pipefail
cd "$(dirname "$0")/.."

out_root=${1:-docs/measurements}
seconds=${MEASURE_SECONDS:-10}
warmup_seconds=${MEASURE_WARMUP_SECONDS:-2}
capped_seconds=${MEASURE_CAPPED_SECONDS:-60}
steps=",${MEASURE_STEPS:-sweep,capped,share,serve},"
steps=${steps// /}
for step in ${steps//,/ }; do
  case $step in sweep | capped | share | serve) ;; *)
    echo "gpu-measure: MEASURE_STEPS: unknown step '$step' (sweep, capped, share, serve)" >&2
    exit 2
    ;;
  esac
done
picked() { [[ $steps == *",$1,"* ]]; }
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

# --- a read-only NVML: the driver's library behind a shim that refuses every write call
# (scripts/nvml-readonly.c). gpucap writes nothing without --allow-gpu-control anyway; with the shim
# it cannot. Skipped when GPUCAP_NVML_LIB is set (a fake NVML, say) or MEASURE_READONLY_NVML=0. ---
if [ -z "${GPUCAP_NVML_LIB:-}" ] && [ "${MEASURE_READONLY_NVML:-1}" != 0 ]; then
  shim="$build/libnvml-readonly.so"
  if [ ! -f "$shim" ]; then
    nvml_dir=$(ldconfig -p | awk '/libnvidia-ml\.so\.1 / {print $NF; exit}' | xargs -r dirname)
    [ -n "$nvml_dir" ] || { echo "gpu-measure: no libnvidia-ml.so.1 (the NVIDIA driver) on this machine" >&2; exit 1; }
    ${CC:-cc} -shared -fPIC -o "$shim" scripts/nvml-readonly.c -L"$nvml_dir" -Wl,--no-as-needed -l:libnvidia-ml.so.1 ||
      { echo "gpu-measure: could not build the read-only NVML shim (MEASURE_READONLY_NVML=0 runs without it)" >&2; exit 1; }
  fi
  export GPUCAP_NVML_LIB="$shim"
fi

# --- the GPU ---
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$gpucap" devices
"$gpucap" devices --json > "$raw/devices.json"
field() { "$python" -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; print(eval(sys.argv[2], {}, {"d": d}))' "$raw/devices.json" "$1"; }
gpu_name=$(field 'd["name"]')
max_limit=$(field 'd["power_limit_w"]["max"]')
stem="$(date +%Y-%m-%d)-$(echo "$gpu_name" | tr ' /' '__')"
out="$out_root/$stem"
mkdir -p "$out"

# --- models (in a folder that stays, so that a second start resumes the sweeps: their trial
# files name the model file) ---
work=${MEASURE_WORK:-$build/measure-work}
models_dir=${MEASURE_MODELS_DIR:-$work/models}
train_dir=${MEASURE_TRAIN_MODELS_DIR:-$work/train-models}
export_models=$models
picked sweep || picked capped || export_models=${models%%,*}  # serve alone serves the first
picked sweep || picked capped || picked serve || export_models=""
for model in ${export_models//,/ }; do
  [ -f "$models_dir/$model.pt" ] || "$python" scripts/export_models.py --out "$models_dir" --models "$model"
done
if picked share; then
  [ -f "$train_dir/resnet18.train.stages.json" ] && [ -f "$train_dir/mobilenet_v2.train.stages.json" ] ||
    "$python" scripts/export_models.py --out "$train_dir" --models resnet18,mobilenet_v2 --train --stages 4
fi

# --- 1. batch sweeps (trials kept in $out, so a second start resumes); serve without the sweep
# step sweeps its first model only ---
first_model=${models%%,*}
first_precision=${precisions%%,*}
sweep_models=$models sweep_precisions=$precisions
picked sweep || { sweep_models=$first_model sweep_precisions=$first_precision; }
picked sweep || picked capped || picked serve || sweep_models=""
for model in ${sweep_models//,/ }; do
  for precision in ${sweep_precisions//,/ }; do
    "$gpucap" tune --platform nvml --model-file "$models_dir/$model.pt" --engine-device "$engine_device" \
      --precision "$precision" --algorithm oracle --batch-sizes "$batches" --power-cap "$max_limit" \
      --warmup-s "$warmup_seconds" --measure-s "$seconds" --out "$out/sweep-$model-$precision.json" --json > "$raw/sweep-$model-$precision.out"
  done
done

# --- 2. under three software caps: batchsizer at its own window (10 batches) and at 1 s, and
# gpucap's capfit with the sweep as its profile ---
profile="$out/sweep-$first_model-$first_precision.json"
caps=""
if picked capped || picked serve; then
  peak=$("$python" -c 'import json,sys; print(max(t["max_power_w"] for t in json.load(open(sys.argv[1]))["trials"]))' "$profile")
  caps=$("$python" -c 'import sys; p=float(sys.argv[1]); print(" ".join(str(round(f*p)) for f in (0.5, 0.65, 0.8)))' "$peak")
  [ -n "${MEASURE_CAPS:-}" ] && caps=${MEASURE_CAPS//,/ }  # W, lowest first
fi
capped() {  # NAME CAP OPTIONS...
  local name=$1 cap=$2
  shift 2
  "$gpucap" run --platform nvml --model-file "$models_dir/$first_model.pt" --engine-device "$engine_device" \
    --precision "$first_precision" --power-cap "$cap" --duration "$capped_seconds" \
    --trace "$out/capped-$name-$cap-trace.csv" --json "$@" > "$out/capped-$name-$cap.json"
}
picked capped && for cap in $caps; do
  capped capfit "$cap" --algorithm capfit --profile "$profile"
  capped batchsizer "$cap" --algorithm batchsizer
  capped batchsizer-1s "$cap" --algorithm batchsizer --window 1s
done

# --- 3. a latency-critical inference beside training ---
if picked share; then
  share=("$gpucap" share --platform torch --model-dir "$train_dir" --device "$engine_device" --json)
  fg="fg=infer:mobilenet_v2:batch=1:priority=high:requests=${MEASURE_REQUESTS:-300}:warmup=${MEASURE_WARMUP:-20}:start=3"
  "${share[@]}" --policy threads --job "$fg" > "$out/share-solo.json"
  "${share[@]}" --policy threads --job bg=train:resnet18:batch=32:until=fg --job "$fg" > "$out/share-threads.json"
  "${share[@]}" --policy switchflow --lpu cpu --job bg=train:resnet18:batch=32:until=fg --job "$fg" > "$out/share-switchflow.json"
fi

# --- 4. gpucap serve under the same software caps: capserve against the static Triton-style
# setting, the same Poisson load for both (issue 36) ---
serve_seconds=${MEASURE_SERVE_SECONDS:-30}
serve_slo_ms=${MEASURE_SERVE_SLO_MS:-100}
serve_warmup=${MEASURE_SERVE_WARMUP_SECONDS:-5}
serve_pid=""
trap 'if [ -n "$serve_pid" ]; then kill "$serve_pid" 2> /dev/null || true; fi; rm -rf "$raw"' EXIT
serve_run() {  # ALGORITHM CAP RATE: a server, then gpucap load against it, then SIGTERM (it drains)
  local algorithm=$1 cap=$2 rate=$3 name="$out/serve-$1-$2"
  local banner="$raw/serve-$1-$2.out"
  rm -f "$name.json" "$name.load.json"  # a failed run leaves no earlier run's figures behind
  # -v: every window's decision and the controller's state (learnt host time, κ, room) go to
  # $name.log, the timeline a real-GPU run is explained by.
  "$gpucap" -v serve --platform nvml --model-file "$models_dir/$first_model.pt" --engine-device "$engine_device" \
    --precision "$first_precision" --profile "$profile" --algorithm "$algorithm" --power-cap "$cap" \
    --slo-ms "$serve_slo_ms" --max-batch-size 32 --max-queue-delay-us 2000 --listen "127.0.0.1:${MEASURE_SERVE_PORT:-0}" --json > "$banner" 2> "$name.log" &
  serve_pid=$!
  local pid=$serve_pid waited=0
  until grep -qs "stop with Ctrl-C" "$banner"; do
    if ! kill -0 "$pid" 2> /dev/null || [ $waited -ge 600 ]; then
      echo "gpu-measure: gpucap serve ($algorithm, $cap W) did not start; its log: $name.log" >&2
      kill "$pid" 2> /dev/null || true
      wait "$pid" 2> /dev/null || true
      serve_pid=""
      return 1
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  local url
  url=$(sed -n 's|^ *inference (KServe v2) *\(http://[^/]*\)/.*|\1|p' "$banner")
  "$gpucap" load --url "$url" --model "$first_model" --rate "$rate" \
    --duration "$serve_seconds" --warmup "$serve_warmup" --slo-ms "$serve_slo_ms" --binary --connections 256 --json > "$name.load.json" ||
    echo "gpu-measure: gpucap load against $algorithm at $cap W failed (exit $?)" >&2
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" || echo "gpu-measure: gpucap serve ($algorithm, $cap W) exited with $?" >&2
  serve_pid=""
  sed -n '/^{/,$p' "$banner" > "$name.json"
  sed -n '/^{/q;p' "$banner" >> "$name.log"  # the banner: the server's warm-up and its time
}
if picked serve; then
  lowest_cap=${caps%% *}
  # The sweep's capacity within the SLO under the lowest cap: its fastest batch up to the servers'
  # batch cap (32) whose window maximum stays under the cap and whose two batch times (one queued,
  # one running) fit in the SLO.
  serve_rate=$("$python" -c '
import json, sys
cap, slo_ms, share, most = (float(a) for a in sys.argv[2:6])
slo_s = slo_ms / 1000
fit = [t["throughput_img_s"] for t in json.load(open(sys.argv[1]))["trials"]
       if t["max_power_w"] <= cap and t["throughput_img_s"] > 0 and t["batch_size"] <= 32
       and 2 * t["batch_size"] / t["throughput_img_s"] <= slo_s]
print(f"{min(most, share * max(fit)):.1f}" if fit else "")' \
    "$profile" "$lowest_cap" "$serve_slo_ms" "${MEASURE_SERVE_LOAD:-0.7}" "${MEASURE_SERVE_MAX_RPS:-2000}")
  if [ -z "$serve_rate" ]; then
    echo "gpu-measure: no batch of the sweep fits under $lowest_cap W within the SLO: serve step skipped" >&2
  else
    for cap in $caps; do
      serve_run capserve "$cap" "$serve_rate" || true  # said why; the other runs still go
      serve_run static "$cap" "$serve_rate" || true
    done
  fi
fi

# --- the report: the twin's figure beside every real one ---
cp "$raw/devices.json" "$out/"
"$python" scripts/gpu_measure_report.py "$out" --gpucap "$gpucap" > "$out/README.md"
echo "gpu-measure: wrote $out/README.md"
