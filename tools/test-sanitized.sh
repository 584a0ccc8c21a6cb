#!/usr/bin/env bash
# Builds the extension with -fsanitize=address,undefined into a private folder and runs the tests
# against it, the sanitizer runtimes preloaded into Python. NNKERN_TEST_QUICK trims the sweeps,
# which are slow under ASan.
set -euo pipefail
cd "$(dirname "$0")/.."
target=build/asan-site
rm -rf "$target"
NNKERN_SANITIZE=address,undefined python -m pip install -q --no-deps --target "$target" \
  --config-settings=build-dir=build/asan .
preload="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
# Leak reports would flag CPython's own allocations; aborting on the first error keeps CI honest.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  NNKERN_TEST_QUICK=1 NNKERN_SANITIZED=1 PYTHONPATH="$PWD/$target" LD_PRELOAD="$preload" \
  python -m pytest tests -p no:cacheprovider "$@"
