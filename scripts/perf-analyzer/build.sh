#!/usr/bin/env bash
# Builds Triton's perf_analyzer from checkouts of three of its repositories, with Debian's packages
# only, to check `gpucap serve` against it by hand (check.sh). Not part of the test suite: the
# sources are not packaged in Debian.
#
#   sudo apt-get install -y --no-install-recommends libcurl4-openssl-dev rapidjson-dev libgrpc++-dev \
#       protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libb64-dev zlib1g-dev
#   git clone https://github.com/triton-inference-server/perf_analyzer   # and client, common
#   # tried with perf_analyzer 263c5f6e, client 58a44caa, common 83adf7cf (2026-11-30); a later
#   # perf_analyzer may add or rename sources, which the Makefile lists
#   scripts/perf-analyzer/build.sh PERF_ANALYZER_DIR CLIENT_DIR COMMON_DIR [BUILD_DIR]
#
# Prints the path of the binary. JOBS (default 2) compiles in parallel.
set -euo pipefail
if [[ $# -lt 3 || $# -gt 4 ]]; then
  echo "usage: $0 PERF_ANALYZER_DIR CLIENT_DIR COMMON_DIR [BUILD_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
pa=$(cd "$1" && pwd); client=$(cd "$2" && pwd); common=$(cd "$3" && pwd)
build=$(mkdir -p "${4:-/tmp/perf-analyzer-build}" && cd "${4:-/tmp/perf-analyzer-build}" && pwd)
for need in "$pa/src/perf_analyzer.cc" "$client/src/c++/library/http_client.cc" "$common/protobuf/grpc_service.proto"; do
  [[ -f $need ]] || { echo "build.sh: $need not found: are the three folders perf_analyzer, client, common?" >&2; exit 2; }
done
sha=$(git -C "$pa" rev-parse --short HEAD 2>/dev/null || echo unknown)
make -s -f "$here/Makefile" -j "${JOBS:-2}" PA_SRC="$pa" CLIENT_SRC="$client" COMMON_SRC="$common" BUILD="$build" PA_SHA="$sha" >&2
echo "$build/perf_analyzer"
