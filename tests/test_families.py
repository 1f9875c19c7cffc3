"""The model-family registry (dobrushin.experiments.families) is the one declaration of the family chapters:
every place that needs the list reads it, and each entry's notebook, parameter files and table-of-contents line
exist and agree with it."""
from __future__ import annotations

import ast
import json
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
        names = list(P.NOTEBOOKS[fam.notebook].model_fields)
        assert names[-len(fam.parameters.split()) - 4:-4] == fam.parameters.split()  # before the run's four
        assert P.NOTEBOOKS[fam.notebook].kind == fam.inputs


def test_every_list_of_family_chapters_is_the_registrys():
    assert list(F.NOTEBOOKS) == [m for m in re.findall(r"executed/(\w+)", (ROOT / "_toc.yml").read_text())
                                 if m in F.NOTEBOOKS]  # the book's order
    assert F.TRANSFORMER_INPUTS == {"dinov2": "image", "language": "text", "supervised_vit": "image"}
    assert {nb for nb, cls in P.NOTEBOOKS.items() if issubclass(cls, P.FamilyParameters)} == set(F.TRANSFORMER_INPUTS)


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


def test_a_toy_family_added_through_the_registry_alone_builds_its_chapter(tmp_path):
    """Adding a family touches its registry entry, its notebook, its two parameter files and its line in _toc.yml
    (the module docstring of dobrushin.experiments.families): in a copy of the repository with just those added,
    the script the Makefile runs lists the new chapter and papermill builds it (an untrained control on two bundled photos,
    offline), writing its results under its own name."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "lib", copy / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("notebooks", "params"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in ("_toc.yml", "_config.yml", "Makefile"):
        shutil.copy(ROOT / name, copy / name)
    reg = copy / "lib" / "dobrushin" / "experiments" / "families.py"
    entry = '    Family("toy", "image", "image_source image_size", ("facebook/deit-base-patch16-224",)),\n'
    reg.write_text(reg.read_text().replace('    Family("tabular", "tabular"),\n', entry + '    Family("tabular", "tabular"),\n'))
    nb = nbformat.read(ROOT / "notebooks" / "supervised_vit.ipynb", as_version=4)
    for c in nb.cells:  # its notebook: the chapter's name, and the model it measures by default
        c.source = c.source.replace('"supervised_vit"', '"toy"').replace(', "google/vit-base-patch16-224"', "")
    nbformat.write(nb, copy / "notebooks" / "toy.ipynb")
    for profile in ("quick", "paper"):
        shutil.copy(ROOT / "params" / profile / "supervised_vit.yml", copy / "params" / profile / "toy.yml")
    toc = copy / "_toc.yml"
    toc.write_text(re.sub(r"^( *)- file: executed/supervised_vit$", r"\g<0>\n\1- file: executed/toy", toc.read_text(),
                          flags=re.M))
    listed = subprocess.run([sys.executable, str(reg)], capture_output=True, text=True, check=True).stdout.split()
    assert listed == [*F.NOTEBOOKS[:-1], "toy", F.NOTEBOOKS[-1]]
    env = {**__import__("os").environ, "PYTHONPATH": str(copy / "lib"), "HF_HUB_OFFLINE": "1",
           "DOBRUSHIN_RESULTS": str(tmp_path / "results"), "TQDM_DISABLE": "1"}
    env.pop("DOBRUSHIN_PUBLISHED", None)
    run = subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", "-k", "python3", "--cwd",
                          str(copy / "notebooks"), "-f", str(copy / "params" / "quick" / "toy.yml"),
                          "-p", "weights", '["untrained"]', "-p", "n_inputs", "2", "-p", "image_source", "embedded",
                          "-p", "results_dir", str(tmp_path / "results"), str(copy / "notebooks" / "toy.ipynb"),
                          str(tmp_path / "toy.ipynb")], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    man = json.loads((tmp_path / "results" / "toy" / "manifest.json").read_text())
    (e,) = man["entries"].values()
    assert e["model"] == "facebook/deit-base-patch16-224" and e["rows"] == 2 * 12 * 2  # inputs × layers × variants
