#!/usr/bin/env bash
# nnkern on aarch64 without ARM hardware: cross-compile with Debian's g++-aarch64-linux-gnu and run under
# qemu-user. Idempotent: sets up what is missing, builds once, then runs
#   1. the native C++ tests (tests/native) through ctest, on the QEMU CPU models cortex-a57 (plain NEON),
#      cortex-a76 (dot product) and max (dot product, i8mm, SVE), with NNKERN_TEST_QUICK=1 by default;
#   2. the Python test suite with the cross-built extension, under arm64 Debian's python3: all of it on the
#      first model of NNKERN_ARM_CPUS (default "max cortex-a57"), the dispatch tests on the others
#      (NNKERN_ARM_OTHER_TESTS), on pytest-xdist workers.
# No chroot and no binfmt: the arm64 tree comes from `debootstrap --foreign` unpacked with `dpkg -x`,
# and only the test programs run emulated.
#
#   tools/test-aarch64.sh [--setup] [--build] [--native] [--python] [-- PYTEST-ARGS...]
# With no step named, all four run. Environment: NNKERN_ARM_DIR (work folder, default .aarch64 in the
# repository), NNKERN_ARM_CPUS, NNKERN_DEBIAN_MIRROR, NNKERN_TEST_QUICK (default 1 here: shorter
# sweeps; 0 for the full ones, about 10 minutes per model), NNKERN_TEST_SKIP_PORTABLE (default 1 here: the
# Python suite leaves the scalar level's cases to the host; 0 runs them too).
# tools/run-aarch64.sh runs any other command against the same build.
set -euo pipefail
cd "$(dirname "$0")/.."
ARM_DIR=${NNKERN_ARM_DIR:-$PWD/.aarch64}
ROOT=$ARM_DIR/root
BUILD=$ARM_DIR/build
SITE=$ARM_DIR/site
CPUS=${NNKERN_ARM_CPUS:-max cortex-a57}
MIRROR=${NNKERN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-numpy,python3-pytest,python3-pytest-xdist,python3-dev,pybind11-dev

steps=() pytest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --setup|--build|--native|--python) steps+=("${1#--}") ;;
    --) shift; pytest_args=("$@"); break ;;
    *) echo "usage: $0 [--setup] [--build] [--native] [--python] [-- PYTEST-ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
[ ${#steps[@]} -gt 0 ] || steps=(setup build native python)
want() { [[ " ${steps[*]} " == *" $1 "* ]]; }
stamp() { printf '::: %s (%ss)\n' "$1" "$SECONDS"; }

setup() {
  # Host tools: the cross compiler, qemu-user, debootstrap (Debian package names).
  local missing=()
  command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
  # The static build: Debian 12's dynamically linked qemu-aarch64 (package qemu-user) aborts in fork()
  # children of a multi-threaded process (cpu_exec / plugin assertions), failing the thread-pool fork tests.
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v cmake >/dev/null || missing+=(cmake)
  if [ ${#missing[@]} -gt 0 ]; then
    stamp "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # The arm64 Debian tree: python3, numpy, pytest, the Python and pybind11 headers. debootstrap --foreign
  # only downloads and resolves; dpkg -x unpacks on the host (no maintainer scripts, no emulated dpkg).
  # The stamp holds the package list: a tree made for another list is made again.
  if [ "$(cat "$ROOT/.nnkern-ready" 2>/dev/null)" != "$PACKAGES" ]; then
    stamp "arm64 Debian tree in $ROOT"
    rm -rf "$ROOT" "$ROOT.tmp"
    mkdir -p "$ARM_DIR"
    debootstrap --arch=arm64 --variant=minbase --foreign --include=$PACKAGES bookworm "$ROOT.tmp" "$MIRROR" >/dev/null
    for f in "$ROOT.tmp"/var/cache/apt/archives/*.deb; do dpkg -x "$f" "$ROOT.tmp"; done
    rm -f "$ROOT.tmp"/var/cache/apt/archives/*.deb
    # The maintainer scripts did not run: the BLAS/LAPACK alternatives numpy links against.
    ln -sf blas/libblas.so.3 "$ROOT.tmp/usr/lib/aarch64-linux-gnu/libblas.so.3"
    ln -sf lapack/liblapack.so.3 "$ROOT.tmp/usr/lib/aarch64-linux-gnu/liblapack.so.3"
    # Byte-compile the tree with a host Python of the same version (same .pyc magic): each emulated
    # interpreter start then takes ~5 s instead of ~13 s.
    local ver host qemu
    ver=$(basename "$(ls -d "$ROOT.tmp"/usr/lib/python3.[0-9]* | head -1)")
    host=$(command -v "/usr/bin/$ver" || command -v "$ver" || true)
    if [ -z "$host" ]; then  # no host Python of that version: let the emulated one do it (slower)
      qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
      host="$qemu -L $ROOT.tmp $ROOT.tmp/usr/bin/$ver"
    fi
    $host -m compileall -q -j0 "$ROOT.tmp/usr/lib/$ver" "$ROOT.tmp/usr/lib/python3/dist-packages" >/dev/null || true
    echo "$PACKAGES" >"$ROOT.tmp/.nnkern-ready"
    mv "$ROOT.tmp" "$ROOT"
  fi
}

build() {
  stamp "cross build (native tests + extension) in $BUILD"
  cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DNNKERN_NATIVE_TESTS=ON -DNNKERN_TARGET_PYTHON_ROOT="$ROOT" -DARM64_QEMU_LD_PREFIX="$ROOT" >/dev/null
  cmake --build "$BUILD" -j"$(nproc)"
  # The package as Python sees it: python/nnkern plus the cross-built _C.so.
  rm -rf "$SITE"
  mkdir -p "$SITE"
  cp -r python/nnkern "$SITE/nnkern"
  cp "$BUILD/_C.so" "$SITE/nnkern/"
}

native() {
  stamp "native tests under qemu-aarch64 (ctest)"
  # Quick sweeps by default, as for the Python suite (test_f32_activation: 2.2e6 instead of 1.2e8 inputs
  # per kernel, a few seconds instead of 2 minutes per CPU model).
  (cd "$BUILD" && ulimit -c 0 && NNKERN_TEST_QUICK=${NNKERN_TEST_QUICK:-1} ctest --output-on-failure -j"$(nproc)")
}

python_tests() {
  # With pytest-xdist in the arm64 tree, the models run one after the other, each on one emulated worker per
  # core (the controller starts them as QEMU processes: no binfmt); else side by side, one interpreter each
  # (CI has 2 cores). NNKERN_TEST_QUICK defaults to 1 here: emulation is ~20x slower than the
  # host. The first model runs the whole suite; the others (without dot product, i8mm, bf16) run what depends
  # on the CPU model, its dispatch (NNKERN_ARM_OTHER_TESTS, default tests/test_dispatch.py): each level's kernels
  # are compiled for that level's -march (CMakeLists.txt), so what they execute cannot depend on the model, and
  # the native tests run every kernel on each model.
  # NNKERN_TEST_SKIP_PORTABLE defaults to 1: the scalar level's cases are the same C++ the host suite runs
  # natively (tests/conftest.py), and the native tests above run each scalar kernel emulated.
  export NNKERN_TEST_QUICK=${NNKERN_TEST_QUICK:-1} NNKERN_TEST_SKIP_PORTABLE=${NNKERN_TEST_SKIP_PORTABLE:-1}
  local cpu first=1 rc=0 pids=() names=() status=() i workers=()
  if [ -d "$ROOT/usr/lib/python3/dist-packages/xdist" ]; then
    local qemu
    qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
    workers=(--dist load --tx "$(nproc)*popen//python=$qemu -L $ROOT $ROOT/usr/bin/python3")
  fi
  for cpu in $CPUS; do
    # PYTEST-ARGS replace the default targets, so "-- tests/test_qgemm.py" runs just that file on every model.
    local targets=(tests)
    [ $first = 1 ] || read -r -a targets <<<"${NNKERN_ARM_OTHER_TESTS:-tests/test_dispatch.py}"
    [ ${#pytest_args[@]} -eq 0 ] || targets=("${pytest_args[@]}")
    stamp "Python tests under qemu-aarch64 -cpu $cpu: ${targets[*]} (log: $ARM_DIR/pytest-$cpu.log)"
    (ulimit -c 0 && exec tools/run-aarch64.sh --cpu "$cpu" python3 -m pytest -q -p no:cacheprovider \
      ${workers[@]+"${workers[@]}"} "${targets[@]}") >"$ARM_DIR/pytest-$cpu.log" 2>&1 &
    pids+=($!) names+=("$cpu")
    first=0
    if [ ${#workers[@]} -gt 0 ]; then  # one model at a time
      if wait "${pids[-1]}"; then status+=(0); else status+=(1); fi
    fi
  done
  for i in "${!pids[@]}"; do
    if [ ${#workers[@]} -eq 0 ]; then
      if wait "${pids[$i]}"; then status[$i]=0; else status[$i]=1; fi
    fi
    if [ "${status[$i]}" = 0 ]; then
      stamp "-cpu ${names[$i]}: $(tail -n 1 "$ARM_DIR/pytest-${names[$i]}.log")"
    else
      rc=1
      stamp "-cpu ${names[$i]}: FAILED"
      grep -v '^SKIPPED' "$ARM_DIR/pytest-${names[$i]}.log" | tail -n 60
    fi
  done
  return $rc
}

want setup && setup
want build && build
want native && native
want python && python_tests
stamp "aarch64 tests done"
