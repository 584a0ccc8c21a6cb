#!/usr/bin/env bash
# Builds the documentation site into build/site with warnings as errors: the README is the front page (index,
# its docs/ links made relative to docs/), docs/ holds the guide, design, kernels, performance and contributing
# pages and the API reference, generated from the docstrings by mkdocstrings (static analysis of
# python/nnkern: nothing is imported, so no build of the extension is needed). PYTHON selects the
# interpreter (default python); the [docs] extra is pip-installed into it when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if ! "$PY" -c "import mkdocs, mkdocstrings_handlers.python" >/dev/null 2>&1; then
  echo "::: installing mkdocs and mkdocstrings[python]"
  "$PY" -m pip install -q "mkdocs>=1.5" "mkdocstrings[python]>=0.24"
fi
rm -rf build/docs-src build/site
mkdir -p build/docs-src
cp -r docs/. build/docs-src/
sed 's#](docs/#](#g' README.md >build/docs-src/index.md
"$PY" -m mkdocs build --strict --quiet
echo "documentation: build/site/index.html"
