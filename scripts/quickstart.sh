#!/usr/bin/env bash
# Quick start: install what is missing, build, and run a power-capped job on the simulated
# Tesla P40 (BatchDVFS job 1: Inception V1 on 15,000 ImageNet images under a 131 W cap).
# Prints a summary and writes one trace row per window to trace.csv.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$(nproc)" --target gpucap
./build/gpucap run --gpu p40 --model inception_v1 --dataset imagenet --power-cap 131 \
  --algorithm batchdvfs --trace trace.csv
