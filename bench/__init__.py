"""pytest-benchmark suites (not collected by the default ``python -m pytest``; see README.md).

A package so that its module names never clash with tests/ (e.g. tests/test_sgemm.py)."""
