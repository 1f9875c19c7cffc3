"""Project-level consistency: dependency lists agree, every notebook has its parameters and profiles."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_matches_pyproject():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = {_norm(d) for d in proj["dependencies"]} | {_norm(d) for d in proj["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert {_norm(d) for d in pip} == want
    py = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert py, "environment.yml must pin python"


def _makefile_notebooks() -> list[str]:
    """The notebooks make runs, as make expands them (the family chapters come from their registry)."""
    import subprocess

    out = subprocess.run(["make", "-n", "-o", ".venv/.installed", "notebooks", "PROFILE=quick"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"for nb in ([a-z0-9_ ]+);", out)
    assert m, "make runs the notebooks in one loop"
    return m.group(1).split()


def _toc_files() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = {toc["root"]}

    def walk(items):
        for it in items or []:
            if "file" in it:
                files.add(it["file"])
            walk(it.get("sections"))
            walk(it.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_every_notebook_has_parameters_and_profile_files(profile):
    for name in _makefile_notebooks():
        path = ROOT / "notebooks" / f"{name}.ipynb"
        assert path.exists(), f"Makefile runs {name} but notebooks/{name}.ipynb is missing"
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{name}: exactly one cell must be tagged 'parameters'"
        src = tagged[0].source
        assigned = set(re.findall(r"^([A-Za-z_]\w*)\s*=", src, re.M))
        assert {"profile", "results_dir"} <= assigned, f"{name}: parameters cell lacks profile/results_dir"
        params = yaml.safe_load((ROOT / "params" / profile / f"{name}.yml").read_text()) or {}
        unknown = set(params) - assigned
        assert not unknown, f"params/{profile}/{name}.yml sets {sorted(unknown)} not in the parameters cell"
        first = nb.cells[0]
        assert first.cell_type == "markdown" and first.source.lstrip().startswith("# "), f"{name}: first cell is a # title"


def test_notebooks_are_committed_without_outputs():
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for c in nb.cells:
            if c.cell_type == "code":
                assert not c.get("outputs"), f"{path.name} has stored outputs; strip them before committing"


def test_toc_lists_every_notebook():
    toc = _toc_files()
    for name in _makefile_notebooks():
        assert f"executed/{name}" in toc, f"_toc.yml does not render notebook {name}"


def test_the_cache_key_versions_are_pinned_and_installed_as_pinned():
    """constraints.txt pins every package whose version keys the cache, and make install honoured it: a
    fresh install computes the key the published run computed (so make book reuses its results)."""
    import importlib.metadata as md
    import re

    from dobrushin.experiments.environment import KEY_PACKAGES, key_versions

    root = Path(__file__).resolve().parents[1]
    pins = dict(re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip()).groups()
                for line in (root / "constraints.txt").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#"))
    assert set(KEY_PACKAGES) <= set(pins), sorted(set(KEY_PACKAGES) - set(pins))
    kv = key_versions()
    assert set(kv) == set(KEY_PACKAGES) and "python" not in kv
    for pkg in KEY_PACKAGES:
        assert kv[pkg] == md.version(pkg) == pins[pkg], (pkg, kv[pkg], pins[pkg])
    assert "+" not in kv["torch"]  # the index's version, not the build's local tag
    assert "torch" in pins and pins["torch"] == kv["torch"]
    makefile = (root / "Makefile").read_text()
    assert "-c constraints.txt" in makefile and "constraints.txt" in makefile.split("$(STAMP):")[1].split("\n")[0]
