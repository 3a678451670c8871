#!/usr/bin/env bash
# Installs what is missing, builds with the CI preset (warnings are errors) and runs the whole
# test suite. SANITIZERS=1 also runs the suite under ASan+UBSan and the concurrent code's tests
# under TSan (scripts/test-sanitizers.sh; not yet in CI: on 2 cores the ASan stage alone takes
# longer than CI's budget, see docs/testing.md). The shared reference data must be at
# ../shared/data (tests fail loudly otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset ci
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci -j "$(nproc)"
if [ "${SANITIZERS:-0}" = 1 ]; then
  ./scripts/test-sanitizers.sh
fi
