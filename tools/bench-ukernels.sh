#!/usr/bin/env bash
# Configures, builds and runs the micro-kernel benchmark (bench/native, nnkern_ubench) in build/bench.
# Arguments go to the benchmark, e.g.  tools/bench-ukernels.sh --family qgemm --json ukernels.json
# Only the library and the benchmark are built (-j2 unless JOBS is set): the host is shared.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DNNKERN_PYTHON=OFF -DNNKERN_BENCH=ON >/dev/null
cmake --build build/bench --target nnkern_ubench -j"${JOBS:-2}"
echo "load: $(uptime)"
exec build/bench/bench/native/nnkern_ubench "$@"
