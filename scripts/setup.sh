#!/usr/bin/env bash
# Installs the Debian packages kvparity needs and builds it (Release) into ./build, the Python
# package included (build/python/kvparity: PYTHONPATH=build/python python3 -c 'import kvparity').
# Usage: scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(build-essential cmake g++ pkg-config ninja-build
      nlohmann-json3-dev libcli11-dev libfmt-dev libhwy-dev libpcre2-dev libssl-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libboost-context-dev  # the CPU suite's fibers that run CUDA kernels' source (src/cuda/simt_host.h)
      python3 python3-numpy python3-sentencepiece
      python3-dev pybind11-dev python3-pytest python3-matplotlib  # the Python package (python/)
      clang libclang-rt-dev  # clang + libFuzzer/ASan runtimes: the sanitizer CI stage and fuzz/
      chromium)              # headless rendering check of report.html in the tests
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$(nproc)"
