#!/usr/bin/env bash
# Installs what is missing, builds with the CI preset (warnings are errors) and runs the whole
# test suite. The shared reference data must be at ../shared/data (tests fail loudly otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset ci
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci -j "$(nproc)"
