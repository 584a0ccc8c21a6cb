#!/usr/bin/env bash
# Builds the extension with -fsanitize=address,undefined into a private folder and runs the tests
# against it, the sanitizer runtimes preloaded into Python. NNKERN_TEST_QUICK trims the sweeps,
# which are slow under ASan.
set -euo pipefail
cd "$(dirname "$0")/.."
target=build/asan-site
rm -rf "$target"
# Only the x86 kernel levels this CPU can run (a superset of what dispatch asks, from /proc/cpuinfo): the others
# would never execute under the sanitizers, and instrumenting them is a large part of the build.
levels=""
if [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { local f; for f; do [[ $flags == *" $f "* ]] || return 1; done; }
  if has avx2 fma f16c; then
    levels="avx2"
    has avx_vnni && levels+=";avxvnni"
    if has avx512f avx512bw avx512dq avx512vl; then
      levels+=";avx512"
      has avx512_vnni && levels+=";avx512vnni"
      has avx512_bf16 && levels+=";avx512bf16"
      has amx_tile && levels+=";amx"
    fi
  fi
  echo "sanitizer build: kernel levels ${levels:-all}"
fi
NNKERN_ISA_LEVELS=$levels NNKERN_SANITIZE=address,undefined python -m pip install -q --no-deps --target "$target" \
  --config-settings=build-dir=build/asan .
preload="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
# Leak reports would flag CPython's own allocations; aborting on the first error keeps CI honest.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  NNKERN_TEST_QUICK=1 NNKERN_SANITIZED=1 PYTHONPATH="$PWD/$target" LD_PRELOAD="$preload" \
  python -m pytest tests -p no:cacheprovider "$@"
