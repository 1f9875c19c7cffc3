"""The package's layering, checked from the source: every subpackage imports only those before it in
README's list (imports inside functions count), no import cycles, no private names imported across
modules, capture without pandas, the store on the standard library, numpy and pandas only, models
reaching capture only through its registry."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
PKG = LIB / "dobrushin"


def _modules():
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(LIB).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return mods


def _imports(mods):
    """``{module: [(imported module, imported name or None, line)]}`` for every import in the package."""
    out = {}
    for mod, (p, is_pkg) in mods.items():
        rows = []
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                rows += [(src, a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.Import):
                rows += [(a.name, None, node.lineno) for a in node.names]
        out[mod] = rows
    return out


def _target(mods, src, name):
    full = f"{src}.{name}" if name else src
    t = full if full in mods else src
    while t and t not in mods:
        t = t.rpartition(".")[0]
    return t


def test_no_import_cycles_between_modules():
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, rows in _imports(mods).items():
        if mods[m][1]:
            continue  # a package __init__ only re-exports
        for src, name, _ in rows:
            t = _target(mods, src, name)
            if t and t != m and not mods[t][1]:
                edges[m].add(t)
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in edges[v]:
            if state.get(w) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(w):] + [w]))
            if w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in mods:
        if v not in state:
            visit(v)


def test_no_private_names_across_modules():
    mods = _modules()
    bad = [f"{m}:{line} imports {name} from {src}" for m, rows in _imports(mods).items() for src, name, line in rows
           if name and name.startswith("_") and not name.startswith("__") and src in mods and src != m
           and f"{src}.{name}" not in mods]
    assert bad == []


def test_layers():
    mods = _imports(_modules())
    third_party = lambda rows: {s.split(".")[0] for s, _, _ in rows if not s.startswith("dobrushin")}  # noqa: E731
    inside = lambda rows: {s.split(".")[1] for s, _, _ in rows if s.startswith("dobrushin.") and "." in s}  # noqa: E731
    for m, rows in mods.items():
        if m.startswith("dobrushin.store"):
            assert third_party(rows) <= set(sys.stdlib_module_names) | {"numpy", "pandas"}, m
            assert inside(rows) <= {"store"}, m
        if m.startswith("dobrushin.capture"):
            assert "pandas" not in third_party(rows) and inside(rows) <= {"capture"}, m
        if m.startswith("dobrushin.models"):
            assert {s for s, _, _ in rows if s.startswith("dobrushin.capture")} <= {"dobrushin.capture"}, m
            assert {n for s, n, _ in rows if s == "dobrushin.capture"} <= {"prepare_for_capture"}, m


def readme_layer_order() -> list:
    """The subpackages in the order README's Layout section lists them ("each depends only on those above
    it in this list")."""
    text = (LIB.parent / "README.md").read_text()
    layout = text[text.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 1)]
    assert "each depends only on those" in layout
    return re.findall(r"^  - `(\w+)/`", layout, re.M)


def test_readme_lists_every_subpackage():
    pkgs = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
    assert sorted(readme_layer_order()) == pkgs


def test_every_subpackage_imports_only_those_before_it_in_readme():
    """README: each subpackage depends only on those above it in the list; imports inside functions
    count, and so do the package __init__ files (the top-level dobrushin package and the command line
    may import every layer)."""
    order = readme_layer_order()
    rank = {p: i for i, p in enumerate(order)}
    mods = _modules()
    bad = []
    for m, rows in _imports(mods).items():
        parts = m.split(".")
        if len(parts) < 2 or parts[1] not in rank:
            continue  # dobrushin/__init__.py, dobrushin/__main__.py
        for src, name, line in rows:
            t = _target(mods, src, name)
            other = t.split(".")[1] if t and t.startswith("dobrushin.") else None
            if other in rank and rank[other] > rank[parts[1]]:
                bad.append(f"{m}:{line} imports {t} ({other} comes after {parts[1]} in README)")
    assert bad == []


def test_the_order_check_sees_a_violation(tmp_path, monkeypatch):
    """The check above is not vacuous: a math module importing the report layer is caught."""
    pkg = PKG.name
    low, high = f"{pkg}.math.fake_low", f"{pkg}.report.fake_high"  # modules that do not exist
    fake = {low: (tmp_path / "x.py", False), high: (tmp_path / "y.py", False)}
    (tmp_path / "x.py").write_text("def f():\n    from ..report import fake_high\n")
    (tmp_path / "y.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "_modules", lambda: fake)
    with pytest.raises(AssertionError, match=f"{low}:2 imports {high}"):
        test_every_subpackage_imports_only_those_before_it_in_readme()


def test_capture_imports_no_pandas():
    code = "import sys, dobrushin.capture; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(LIB), "PATH": ""})
    assert out.stdout.strip() == "False"


def test_the_package_ships_no_developer_tool():
    """The benchmarks and the browser check (dev extras, Chromium) live in the repository's tools/, not in
    the installed package: dobrushin.tools holds only what the book's build needs (the Sphinx hooks named in
    _config.yml), and no module of the package imports the top-level tools or playwright."""
    assert sorted(p.name for p in (PKG / "tools").glob("*.py")) == ["__init__.py", "sphinx_fixes.py"]
    assert "dobrushin.tools.sphinx_fixes" in (LIB.parent / "_config.yml").read_text()
    bad = [f"{m}:{line} imports {src}" for m, rows in _imports(_modules()).items() for src, _, line in rows
           if src.split(".")[0] in ("tools", "playwright")]
    assert bad == []
    for name in ("bench.py", "bench_stages.py", "sweep_bench.py", "check_html.py"):
        assert (LIB.parent / "tools" / name).is_file(), name
