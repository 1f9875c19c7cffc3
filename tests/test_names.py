"""Every ``dobrushin.*`` name and every ``lib/dobrushin/...py`` path that the project's text mentions exists:
docstrings and comments of the package, the Makefile, README, the book's chapters, the tools, the tests
and the notebooks.  A module that moves takes its mentions with it (no names of an old layout)."""
from __future__ import annotations

import dataclasses
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: a dotted name starting with the package (not part of a longer word, path or URL)
DOTTED = re.compile(r"(?<![\w./-])dobrushin(?:\.[A-Za-z_]\w*)+")
#: a path into the package's source
PATH = re.compile(r"(?<![\w./-])(?:lib/)?dobrushin/[\w/]+\.py\b")
#: file names that look dotted (the stylesheet ``dobrushin.css``)
FILE_SUFFIXES = {"css", "js", "py", "json", "yml", "yaml", "csv", "ipynb", "png", "svg", "html", "parquet", "toml"}


def texts():
    """(label, text) of every file whose text may name the package's modules."""
    files = sorted((ROOT / "lib" / "dobrushin").rglob("*.py")) + [ROOT / "Makefile", ROOT / "README.md"]
    files += sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "tools").glob("*.py"))
    files += sorted(f for f in (ROOT / "tests").glob("*.py") if f.name != Path(__file__).name)  # not the examples here
    for f in files:
        yield str(f.relative_to(ROOT)), f.read_text(encoding="utf-8")
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        yield str(nb.relative_to(ROOT)), "\n".join("".join(c["source"]) for c in cells)


def resolves(name: str) -> bool:
    """``name`` is an importable module, or an attribute (a dataclass field counts) of the longest
    importable module it starts with."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif dataclasses.is_dataclass(obj) and attr in {f.name for f in dataclasses.fields(obj)}:
                obj = None
            else:
                return False
        return True
    return False


def mentions():
    out = []
    for label, text in texts():
        for ln, line in enumerate(text.splitlines(), 1):
            for m in DOTTED.finditer(line):
                name = m.group(0)
                if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES:
                    out.append((label, ln, "name", name))
            for m in PATH.finditer(line):
                out.append((label, ln, "path", m.group(0)))
    return out


def test_the_scan_finds_the_mentions():
    found = mentions()
    assert ("README.md", "dobrushin.experiments.params") in {(a, n) for a, _, _, n in found}
    assert any(label == "Makefile" and kind == "path" for label, _, kind, _ in found)
    assert len(found) > 100


def test_every_dotted_name_and_path_resolves():
    bad = []
    for label, ln, kind, name in mentions():
        if kind == "name" and not resolves(name):
            bad.append(f"{label}:{ln}: {name}")
        if kind == "path" and not (ROOT / (name if name.startswith("lib/") else f"lib/{name}")).is_file():
            bad.append(f"{label}:{ln}: {name} (no such file)")
    assert bad == []


@pytest.mark.parametrize("name, ok", [("dobrushin.math.kernel", True), ("dobrushin.kernel", False),
                                      ("dobrushin.models.LoadedModel.provenance", True),
                                      ("dobrushin.models.load_model", True), ("dobrushin.params", False),
                                      ("dobrushin.experiments.params.resolve", True)])
def test_resolution(name, ok):
    assert resolves(name) is ok


def test_and_join_lists_items_as_a_sentence_does():
    from dobrushin.report.names import and_join

    assert and_join([]) == ""
    assert and_join(["a"]) == "a"
    assert and_join(["a", "b"]) == "a and b"
    assert and_join(x for x in ["a", "b", "c"]) == "a, b and c"
