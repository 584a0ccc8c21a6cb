"""The documentation's references hold: every measurement the code cites by title exists, and every relative link
of the README and the docs pages names a file of the checkout (none points outside it)."""
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTES = ROOT / "bench" / "decisions.md"

pytestmark = pytest.mark.skipif(not (ROOT / "csrc").is_dir() or not NOTES.is_file(),
                                reason="needs the source checkout (csrc/, bench/decisions.md)")


def _sources():
    for pattern in ("csrc/**/*.cc", "csrc/**/*.h", "csrc/**/*.inc", "python/**/*.py", "docs/*.md"):
        yield from ROOT.glob(pattern)


def _cited_titles(text):
    """The titles quoted after 'docs/performance.md:' (or ','), comment markers and line breaks removed."""
    flat = re.sub(r"\s*\n\s*(?://|#)?\s*", " ", text)
    for m in re.finditer(r'docs/performance\.md[:,] ((?:"[^"]+"(?:,? (?:and )?)?)+)', flat):
        yield from re.findall(r'"([^"]+)"', m.group(1))


def test_cited_measurements_exist():
    titles = set(re.findall(r"^#{2,4} (.+)$", NOTES.read_text(), re.M))
    cited = {(str(p.relative_to(ROOT)), t) for p in _sources() for t in _cited_titles(p.read_text(errors="ignore"))}
    assert len(cited) > 20  # the scan finds the citations at all
    missing = sorted((f, t) for f, t in cited if t not in titles)
    assert not missing, f"cited but not in bench/decisions.md: {missing}"


def test_relative_links_exist():
    pages = [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            generated = target.endswith("performance.md")  # tools/performance_page.py writes it
            path = (page.parent / target).resolve()
            outside = not path.is_relative_to(ROOT)  # users have the repository only, nothing beside it
            if outside or (not path.exists() and not generated):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_readme_quick_start_runs(capsys):
    """The README's Python blocks, run in order in one namespace, as a reader pasting them would."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 4
    namespace = {}
    for block in blocks:
        if "import onnx" in block and importlib.util.find_spec("onnx") is None:
            continue  # the ONNX quick start needs the optional onnx package (test_onnx_session runs the session)
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["c"].shape == (512, 128) and namespace["c32"].dtype.name == "int32"
    assert namespace["pooled"].shape == (1, 28, 28, 64)
