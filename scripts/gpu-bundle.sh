#!/usr/bin/env bash
# Takes gpucap to a GPU machine that has no package manager and no network, but a C++ compiler,
# CMake and PyTorch (a CUDA LibTorch): the usual rented or lent GPU box.
#
#   scripts/gpu-bundle.sh make BUNDLE.tar.xz [BUILD_DIR]    # on the Debian 12 build machine
#   scripts/gpu-bundle.sh install BUNDLE.tar.xz DIR         # on the GPU machine, in the repository
#   . DIR/env.sh                                             # then DIR/bin/gpucap runs there
#
# make packs BUILD_DIR's gpucap (default build-ci), the shared libraries it needs beyond glibc and
# the compiler's runtime, libgpucap_lib.a, and the fmt and libjpeg-turbo headers and library:
# about 15 MB compressed. install unpacks it, builds the
# LibTorch engine plugin against the machine's PyTorch (scripts/torch-plugin/CMakeLists.txt) beside
# the binary, and writes DIR/env.sh (LD_LIBRARY_PATH to the bundle's libraries, and GPUCAP_DATA_DIR
# = this repository's data/). The repository itself (sources, data/) must be on the GPU machine too.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "gpu-bundle: error: $*" >&2; exit 1; }

# The C library and the compiler's runtime come from the GPU machine: its own are at least as new,
# and the plugin built there needs its libstdc++.
system_lib() {
  case "$(basename "$1")" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so* | \
    libstdc++.so* | libgcc_s.so* | libgomp.so*) return 0 ;;
  esac
  return 1
}

make_bundle() {
  local bundle=$1 build=${2:-build-ci}
  [ -x "$build/gpucap" ] || die "no gpucap in $build (build it first: cmake --preset ci && cmake --build build-ci)"
  [ -f "$build/src/libgpucap_core.a" ] || die "no $build/src/libgpucap_core.a"
  [ -f /usr/include/turbojpeg.h ] && [ -d /usr/include/fmt ] || die "needs libfmt-dev and libturbojpeg0-dev (scripts/setup.sh)"
  stage=$(mktemp -d)  # global: the EXIT trap removes it however the script ends
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/bin" "$stage/lib" "$stage/static" "$stage/include"
  cp "$build/gpucap" "$stage/bin/"
  strip "$stage/bin/gpucap"
  # The modules' archives (src/CMakeLists.txt: one per module), as the one libgpucap_lib.a the
  # plugin's build links (scripts/torch-plugin/CMakeLists.txt); it takes what it uses of them.
  local archive mri="CREATE $stage/static/libgpucap_lib.a"
  for archive in "$build"/src/libgpucap_*.a; do
    [ "$(basename "$archive")" = libgpucap_torch.a ] || mri+=$'\n'"ADDLIB $archive"
  done
  printf '%s\nSAVE\nEND\n' "$mri" | ar -M
  local lib
  for lib in $(ldd "$build/gpucap" | awk '$3 ~ /^\// {print $3}') $(readlink -f /usr/lib/x86_64-linux-gnu/libturbojpeg.so); do
    system_lib "$lib" || cp -L "$lib" "$stage/lib/"
  done
  # The libturbojpeg.so.0 file under its SONAME (the link above names the versioned file).
  (cd "$stage/lib" && for f in libturbojpeg.so.0.*; do mv "$f" libturbojpeg.so.0; done)
  cp -r /usr/include/fmt /usr/include/turbojpeg.h "$stage/include/"
  tar -C "$stage" -cJf "$bundle" .
  echo "gpu-bundle: wrote $bundle ($(du -h "$bundle" | cut -f1))"
}

install_bundle() {
  local bundle=$1 dir=$2
  [ -f "$bundle" ] || die "no bundle $bundle"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  tar -C "$dir" -xJf "$bundle"
  # gpucap runs with the very libraries it was built against (the machine's C library and compiler
  # runtime aside): a machine's own copy of one of them may be older or built otherwise.
  cat > "$dir/env.sh" <<ENV
export LD_LIBRARY_PATH="$dir/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export GPUCAP_DATA_DIR="$PWD/data"
ENV
  local python=${PYTHON:-python3} torch_dir
  torch_dir=$("$python" -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))') ||
    die "$python has no torch: the plugin needs a LibTorch"
  cmake -S scripts/torch-plugin -B "$dir/plugin-build" -DCMAKE_BUILD_TYPE=Release -DGPUCAP_BUNDLE="$dir" \
    -DTorch_DIR="$torch_dir"
  cmake --build "$dir/plugin-build" -j "$(nproc)"
  cp "$dir/plugin-build/libgpucap_torch_engine.so" "$dir/bin/"
  # shellcheck disable=SC1091
  . "$dir/env.sh"
  "$dir/bin/gpucap" --version
  echo "gpu-bundle: installed in $dir (. $dir/env.sh, then $dir/bin/gpucap)"
}

case "${1:-}" in
  make) [ $# -ge 2 ] || die "usage: scripts/gpu-bundle.sh make BUNDLE.tar.xz [BUILD_DIR]"; make_bundle "$2" "${3:-}" ;;
  install) [ $# -eq 3 ] || die "usage: scripts/gpu-bundle.sh install BUNDLE.tar.xz DIR"; install_bundle "$2" "$3" ;;
  *) die "usage: scripts/gpu-bundle.sh make BUNDLE.tar.xz [BUILD_DIR] | install BUNDLE.tar.xz DIR" ;;
esac
