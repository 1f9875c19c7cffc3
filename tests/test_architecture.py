"""The package's layering, checked from the source: the import-linter layers contract (pyproject.toml; make test
runs lint-imports) names every subpackage and catches an upward import, no import cycles, no private names imported across
modules, capture without pandas, the store on the standard library, numpy and pandas only, models
reaching capture only through its registry."""
from __future__ import annotations

import ast
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


def contract_layers() -> list:
    """The layers of the import-linter contract in pyproject.toml, top first."""
    import tomllib

    conf = tomllib.loads((LIB.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in conf["contracts"] if c["type"] == "layers"]
    return layers


def test_the_layers_contract_names_every_subpackage():
    pkgs = sorted(f"dobrushin.{p.name}" for p in PKG.iterdir() if (p / "__init__.py").is_file())
    assert sorted(contract_layers()) == pkgs


def test_the_layers_contract_catches_an_upward_import(tmp_path):
    """lint-imports (make test runs it) is not vacuous: in a copy of the package, a math module importing the
    report layer inside a function breaks the contract; the package as it is keeps it."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (make install installs it)")
    import shutil

    lib = tmp_path / "lib"
    shutil.copytree(LIB, lib, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(LIB.parent / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {"PYTHONPATH": str(lib), "PATH": str(Path(sys.executable).parent)}

    def run():
        return subprocess.run([str(lint), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True)

    kept = run()
    assert kept.returncode == 0, kept.stdout[-2000:] + kept.stderr[-2000:]
    (lib / "dobrushin" / "math" / "fake_low.py").write_text("def f():\n    from ..report import names\n")
    broken = run()
    fake = f"{PKG.name}.math.fake_low"  # a module of the copy only
    assert broken.returncode != 0 and f"{fake} -> {PKG.name}.report.names" in broken.stdout


def test_capture_imports_no_pandas():
    code = "import sys, dobrushin.capture; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(LIB), "PATH": ""})
    assert out.stdout.strip() == "False"


def test_the_package_ships_no_developer_tool():
    """The benchmarks and the browser check (dev extras, Chromium) live in the repository's tools/, not in
    the installed package: dobrushin.bookbuild holds only what the book's build needs (the Sphinx hooks named in
    _config.yml), and no module of the package imports the top-level tools or playwright."""
    assert sorted(p.name for p in (PKG / "bookbuild").glob("*.py")) == ["__init__.py", "sphinx_fixes.py"]
    assert "dobrushin.bookbuild.sphinx_fixes" in (LIB.parent / "_config.yml").read_text()
    bad = [f"{m}:{line} imports {src}" for m, rows in _imports(_modules()).items() for src, _, line in rows
           if src.split(".")[0] in ("tools", "playwright")]
    assert bad == []
    for name in ("bench.py", "bench_stages.py", "sweep_bench.py", "check_html.py"):
        assert (LIB.parent / "tools" / name).is_file(), name
