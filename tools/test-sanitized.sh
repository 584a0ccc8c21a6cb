#!/usr/bin/env bash
# Builds the extension with -fsanitize=address,undefined into a private folder and runs the tests
# against it, the sanitizer runtimes preloaded into Python. NNKERN_TEST_QUICK trims the sweeps,
# which are slow under ASan.
set -euo pipefail
cd "$(dirname "$0")/.."
target=build/asan-site
rm -rf "$target"
# Only the kernel levels this CPU runs, as the installed nnkern's dispatch sees them (its own CPU and OS checks):
# the others would never execute under the sanitizers, and instrumenting them is a large part of the build.
# Every level where no nnkern is installed; a level this tree lacks is left out.
pick='import nnkern, os, sys; print(";".join(l for l in nnkern.supported_isas()
                                         if l != "scalar" and os.path.isdir(os.path.join(sys.argv[1], l))))'
kernels=$PWD/csrc/kernels
levels=$(cd / && python -c "$pick" "$kernels" 2>/dev/null) || levels=""  # from /: the installed nnkern
echo "sanitizer build: kernel levels ${levels:-all}"
NNKERN_ISA_LEVELS=$levels NNKERN_SANITIZE=address,undefined python -m pip install -q --no-deps --target "$target" \
  --config-settings=build-dir=build/asan .
preload="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
# Leak reports would flag CPython's own allocations; aborting on the first error keeps CI honest.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  NNKERN_TEST_QUICK=1 NNKERN_SANITIZED=1 PYTHONPATH="$PWD/$target" LD_PRELOAD="$preload" \
  python -m pytest tests -p no:cacheprovider "$@"
