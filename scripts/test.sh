#!/usr/bin/env bash
# Installs what is missing, builds with the CI preset (warnings are errors) and runs the whole
# test suite; then the suite again under ASan+UBSan and the concurrent code's tests under TSan
# (scripts/test-sanitizers.sh, docs/testing.md). CI runs all three. SANITIZERS=0 stops after the
# normal build's tests (a quicker run by hand). The shared reference data must be at
# ../shared/data (tests fail loudly otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
./scripts/setup.sh
cmake --preset ci
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci -j "$(nproc)"
echo "test.sh: normal build and tests: $((SECONDS - start)) s"
if [ "${SANITIZERS:-1}" != 0 ]; then
  ./scripts/test-sanitizers.sh
fi
echo "test.sh: $((SECONDS - start)) s in all"

