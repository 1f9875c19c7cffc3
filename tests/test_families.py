"""The model-family registry (dobrushin.experiments.families) is the one declaration of the family chapters:
every place that needs the list reads it, and each entry's notebook, parameter files and table-of-contents line
exist and agree with it."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from dobrushin.experiments import families as F
from dobrushin.experiments import params as P
from dobrushin.experiments import verify as V
from dobrushin.report import results_loading as RL

ROOT = Path(__file__).resolve().parents[1]


def _cell(nb: str) -> dict:
    src = next(c.source for c in nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells
               if "parameters" in c.metadata.get("tags", []))
    return {s.targets[0].id: s.value for s in ast.parse(src).body}


@pytest.mark.parametrize("fam", F.FAMILIES, ids=lambda f: f.notebook)
def test_each_family_has_its_notebook_parameter_files_and_toc_line(fam):
    assert (ROOT / "notebooks" / f"{fam.notebook}.ipynb").is_file()
    for profile in ("quick", "paper"):
        assert (ROOT / "params" / profile / f"{fam.notebook}.yml").is_file()
    assert f"executed/{fam.notebook}" in yaml.safe_load((ROOT / "_toc.yml").read_text()).__repr__()
    if fam.transformer:
        cell = _cell(fam.notebook)
        assert tuple(ast.literal_eval(cell["models"])) == fam.models  # the parameters cell measures these
        names = list(P.declared(fam.notebook))
        assert names[-len(fam.parameters.split()) - 4:-4] == fam.parameters.split()  # before the run's four
        assert P.NOTEBOOKS[fam.notebook].kind == fam.inputs


def test_every_list_of_family_chapters_is_the_registrys():
    assert list(F.NOTEBOOKS) == [m for m in re.findall(r"executed/(\w+)", (ROOT / "_toc.yml").read_text())
                                 if m in F.NOTEBOOKS]  # the book's order
    assert V.FAMILY_KINDS == {"dinov2": "image", "language": "text", "supervised_vit": "image"}
    assert V.FAMILY_KINDS == F.TRANSFORMER_INPUTS and RL.FAMILY_NOTEBOOKS == F.NOTEBOOKS
    assert {nb for nb, cls in P.NOTEBOOKS.items() if issubclass(cls, P.FamilyParameters)} == set(F.TRANSFORMER_INPUTS)
    with pytest.raises(KeyError, match="no model family 'nope'; the families are dinov2, language"):
        F.family("nope")


def test_the_makefile_runs_the_registrys_chapters():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-o", ".venv/.installed", "notebooks", "PROFILE=quick"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert f"for nb in theory baseline baseline_law {' '.join(F.NOTEBOOKS)} summary;" in out
    # -S: no site-packages, so no package is importable: the registry imports nothing
    printed = subprocess.run([sys.executable, "-S", "lib/dobrushin/experiments/families.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True, env={}).stdout.split()
    assert printed == list(F.NOTEBOOKS)
