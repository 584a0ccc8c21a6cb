#!/usr/bin/env bash
# Runs a command against the cross-built aarch64 nnkern under qemu-user, e.g.
#   tools/run-aarch64.sh python3 -c 'import nnkern; print(nnkern.cpu_info())'
#   tools/run-aarch64.sh --cpu cortex-a57 python3 my_script.py
#   tools/run-aarch64.sh .aarch64/build/tests/native/test_f32_gemm
# --cpu MODEL picks the emulated CPU (qemu-aarch64 -cpu help: cortex-a57 = ARMv8.0 NEON, cortex-a76 =
# dot product, max = everything; default max). python/python3 mean the arm64 Debian tree's python3,
# with the cross-built package on PYTHONPATH. Builds first if there is no build (tools/test-aarch64.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ARM_DIR=${NNKERN_ARM_DIR:-$repo/.aarch64}
ROOT=$ARM_DIR/root
SITE=$ARM_DIR/site
cpu=max
if [ "${1:-}" = --cpu ]; then
  cpu=${2:?--cpu needs a model name}
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: $0 [--cpu MODEL] CMD [ARGS...]" >&2; exit 2; }
if [ ! -e "$SITE/nnkern/_C.so" ] || [ ! -e "$ROOT/.nnkern-ready" ]; then
  "$repo/tools/test-aarch64.sh" --setup --build >&2
fi
QEMU=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
prog=$1
shift
case $prog in
  python|python3) prog=$ROOT/usr/bin/python3 ;;
  */*) ;;
  *) [ -e "$ROOT/usr/bin/$prog" ] && prog=$ROOT/usr/bin/$prog ;;
esac
export QEMU_CPU=$cpu
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
# Without binfmt the emulated process cannot exec aarch64 programs itself: tests/helpers.py puts this
# prefix in front of the child interpreters it starts.
export NNKERN_TEST_EXEC_PREFIX="$QEMU -L $ROOT"
exec "$QEMU" -L "$ROOT" "$prog" "$@"
