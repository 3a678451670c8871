#!/usr/bin/env bash
# Installs the Debian packages gpucap needs to build and test, if any are missing.
# Debian 12 (bookworm); needs root or sudo only when something must be installed.
set -euo pipefail

packages=(
  g++ cmake make ccache
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libceres-dev libboost-dev gnuplot-nox
  python3  # scripts/make-fidelity.sh edits a copy of the data files
  libdlib-dev  # kernel ridge regression for the fitted predictor (gpucap fit)
  libgtest-dev libgmock-dev libbenchmark-dev
  # The LibTorch engine (optional at build time) and the model export its tests run:
  libtorch-dev libturbojpeg0-dev pkg-config python3-torchvision
  # gpucap bso serve: HTTP, the embedded SQLite store, the PostgreSQL store (libpqxx), and the
  # PostgreSQL server that the tests start themselves in a temporary directory
  libcpp-httplib-dev libsqlite3-dev libpqxx-dev postgresql
  # The exporters' tests check the metrics text with Prometheus's own promtool, and scrape a paced
  # run with a real Prometheus server
  prometheus
  # gpucap serve's dashboard: its charting library, served by gpucap (no CDN); its test loads the
  # page in headless Chromium through Selenium
  libjs-chart.js chromium chromium-driver python3-selenium
  # The cluster's power budget: etcd's client over its JSON gateway (base64 from OpenSSL's
  # libcrypto; TLS to https:// members), and the etcd server that the tests start themselves
  # (three members on loopback; one over TLS, with a CA the test makes with the openssl command)
  libssl-dev etcd-server etcd-client openssl
  # The fuzz targets (tests/fuzz, `cmake --preset fuzz`): clang and its libFuzzer (Debian 12's
  # clang is 14)
  clang libfuzzer-14-dev
  # The sanitizer builds link with lld (cmake/sanitizers.cmake): 4x faster than GNU ld on their
  # debug info
  lld
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: error: need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
