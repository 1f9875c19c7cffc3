"""dobrushin.experiments.params: what papermill / YAML / a parameters cell can pass is read as meant, and
everything else is refused with a message that names the parameter, the value and what is allowed."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import nbformat
import pytest
import yaml

from dobrushin.experiments import params as P

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def cell_defaults(nb) -> dict:
    """The defaults of a notebook's parameters cell, read here independently of the package (which
    never reads the notebook): name -> value, in order."""
    src = next(c.source for c in nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells
               if "parameters" in c.metadata.get("tags", []))
    out = {}
    for stmt in ast.parse(src).body:
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1, f"{nb}: only 'name = value' lines"
        out[stmt.targets[0].id] = eval(compile(ast.Expression(stmt.value), nb, "eval"), {"__builtins__": {}},
                                       {"list": list, "range": range})
    return out


@pytest.fixture(autouse=True)
def _results_elsewhere(tmp_path, monkeypatch):
    """A run with other parameters than the book's writes under the results folder: a temporary one here."""
    monkeypatch.setenv("DOBRUSHIN_RESULTS", str(tmp_path / "results"))


def test_a_run_by_hand_gets_a_folder_of_its_own(tmp_path, capsys):
    """A run without results_dir (by hand; make book gives it) never writes into the book's folders: its results
    go to results/runs/<notebook>-<key>/, named by its parameters, which links the book's other chapters."""
    base = tmp_path / "results"
    (base / "baseline").mkdir(parents=True)
    (base / "baseline" / "reference.csv").write_text("n,p\n")
    (base / "language").mkdir()
    (base / "figures").mkdir()
    values = {**cell_defaults("language"), **yaml.safe_load((ROOT / "params" / "quick" / "language.yml").read_text()),
              "n_inputs": 4}
    p = P.resolve(dict(values), "language")
    folder = Path(p["results_dir"])
    assert folder.parent == base / "runs" and folder.name.startswith("language-")
    assert f"this run's results go to {folder}" in capsys.readouterr().out
    assert (folder / "baseline").resolve() == (base / "baseline").resolve()  # the other chapters, linked
    assert not (folder / "language").exists() and not (folder / "figures").exists()  # its own, written apart
    run = json.loads((folder / "run.json").read_text())
    assert run["notebook"] == "language" and run["parameters"]["n_inputs"] == 4 and "results_dir" not in run["parameters"]
    assert P.resolve(dict(values), "language")["results_dir"] == str(folder)  # the same parameters, the same folder
    assert P.resolve(dict(values, force=True, device="cpu"), "language")["results_dir"] == str(folder)
    assert P.resolve(dict(values, n_inputs=5), "language")["results_dir"] != str(folder)
    mine = str(tmp_path / "mine")
    assert P.resolve(dict(values, results_dir=mine), "language")["results_dir"] == mine  # given: used as is


@pytest.mark.parametrize("nb", ["baseline", "baseline_law"])
def test_a_random_baseline_run_by_hand_writes_its_own_baseline_folder(tmp_path, nb):
    """Both random-baseline chapters write baseline/: a run by hand gets one of its own (the book's tables
    stay as they are), with the book's keyed cell cache linked."""
    base = tmp_path / "results"
    (base / "baseline" / "cells").mkdir(parents=True)
    (base / "language").mkdir()
    values = {**cell_defaults(nb), **yaml.safe_load((ROOT / "params" / "quick" / f"{nb}.yml").read_text()), "seed": 7}
    folder = Path(P.resolve(dict(values), nb)["results_dir"])
    own = folder / "baseline"
    assert own.is_dir() and not own.is_symlink()  # written by the run, not the book's
    assert (own / "cells").is_symlink() and (own / "cells").resolve() == (base / "baseline" / "cells").resolve()
    assert (folder / "language").resolve() == (base / "language").resolve()


def test_only_the_newest_run_folders_are_kept(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(P, "RUNS_KEPT", 3)
    (tmp_path / "results" / "baseline").mkdir(parents=True)
    values = {**cell_defaults("language"), **yaml.safe_load((ROOT / "params" / "quick" / "language.yml").read_text())}
    made = []
    for i, n in enumerate(range(2, 7)):
        made.append(Path(P.resolve(dict(values, n_inputs=n), "language")["results_dir"]))
        os.utime(made[-1] / "run.json", (1000 + i, 1000 + i))  # made one after another
    assert sorted(p.name for p in (tmp_path / "results" / "runs").iterdir()) == sorted(p.name for p in made[-3:])
    assert (tmp_path / "results" / "baseline").is_dir()  # the linked book folders are untouched


def rule(nb, name):
    """The type of parameter ``name`` as notebook ``nb`` declares it (one type per name: :data:`P.TYPES`)."""
    assert name in P.parameters_for(nb).model_fields, f"{nb} declares no parameter {name}"
    return P.TYPES[name]


def ns_for(nb, **overrides):
    """A namespace as the parameters cell leaves it (defaults), with overrides as papermill injects them."""
    ns = cell_defaults(nb)
    ns.update(overrides)
    return ns


# ------------------------------------------------------------------------------------------------
# the declarations


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_notebook_has_a_model_that_matches_its_parameters_cell(nb):
    defaults = cell_defaults(nb)
    src = next(c.source for c in nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells
               if "parameters" in c.metadata.get("tags", []))
    # the model declares exactly the names the cell assigns, in order, each with the one type of its name
    cls = P.parameters_for(nb)
    assert list(cls.model_fields) == list(defaults) == re.findall(r"^([A-Za-z_]\w*)\s*=", src, re.M)
    hints = typing.get_type_hints(cls, include_extras=True)
    assert all(hints[n] is P.TYPES[n] for n in defaults)
    assert cls.notebook == nb and cls.model_config["extra"] == "forbid"
    # every default passes its own type unchanged
    assert P.parameters_for(nb).parse(defaults).as_dict() == defaults
    for name, v in defaults.items():
        assert P.coerce(name, v, P.TYPES[name]) == v, f"{nb}.{name}: the default does not pass its own type"


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_defaults_survive_the_ways_papermill_passes_them(nb):
    """-p passes JSON text for lists and dicts, -y/-f pass YAML: both read back to the default."""
    for name, v in cell_defaults(nb).items():
        if isinstance(v, (list, dict)):
            t = P.TYPES[name]
            assert P.coerce(name, json.dumps(v), t) == v, name
            flow = yaml.safe_dump(v, default_flow_style=True).strip()
            assert P.coerce(name, flow, t) == v, name
            assert P.coerce(name, yaml.safe_load(yaml.safe_dump({name: v}))[name], t) == v


def test_every_notebook_calls_resolve_right_after_its_parameters_cell():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "add_params_cell.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for nb in NOTEBOOKS:
        cells = nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells
        i = next(k for k, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
        assert f'dobrushin.experiments.params.resolve(globals(), "{nb}")' in cells[i + 1].source


def test_no_notebook_repeats_its_parameter_names_after_resolving_them():
    """The resolved parameters are the one object that flows on: no later cell lists the names one by one
    again (``FamilyChapter(_params, ...)``, ``SummaryChapter(**_params)``, ``_params.as_dict()``).  A call
    that hands a function the few knobs it takes (``fit(..., max_epochs=max_epochs, patience=patience)``)
    is not a re-listing; four or more ``name=name`` of the declared names in one cell is."""
    for nb in NOTEBOOKS:
        names = [n for n in P.parameters_for(nb).model_fields if n != "profile"]
        for c in nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4).cells:
            if c.cell_type != "code" or "parameters" in c.metadata.get("tags", []):
                continue
            repeated = [n for n in names if re.search(rf"\b{n}={n}\b", c.source)]
            assert len(repeated) < 4, f"{nb}: a cell passes {repeated} again"


def test_the_package_does_not_read_notebooks_to_learn_parameters(monkeypatch, tmp_path):
    """resolve works from the namespace alone: no notebook file is opened."""
    monkeypatch.chdir(tmp_path)  # no notebooks/ folder here
    ns = ns_for("language", n_inputs="3")
    real_open = open

    def guard(f, *a, **k):
        assert not str(f).endswith(".ipynb"), f"opened {f}"
        return real_open(f, *a, **k)

    monkeypatch.setattr("builtins.open", guard)
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: pytest.fail(f"read {self}"))
    assert P.resolve(ns, "language")["n_inputs"] == 3


def test_a_name_has_one_type_in_every_notebook():
    with pytest.raises(P.ParameterError, match="no type for parameter spam; add it to TYPES"):
        P.declare("spam_notebook", "profile spam")
    assert "spam_notebook" not in P.NOTEBOOKS
    with pytest.raises(P.ParameterError, match="no parameters are declared for the notebook 'nope'"):
        P.resolve({}, "nope")


# ------------------------------------------------------------------------------------------------
# lists


MODEL = "facebook/deit-small-patch16-224"
TIMM = "timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k"


@pytest.mark.parametrize("given, want", [
    ([MODEL], [MODEL]),                                     # parameters cell, -y, -f
    ((MODEL, TIMM), [MODEL, TIMM]),
    (f'["{MODEL}"]', [MODEL]),                              # -p models '["..."]' (the README command)
    (f'["{MODEL}", "{TIMM}"]', [MODEL, TIMM]),
    (f"[{MODEL}, {TIMM}]", [MODEL, TIMM]),                  # YAML flow list
    (f"  [ '{MODEL}' ]  ", [MODEL]),
    (MODEL, [MODEL]),                                       # bare id
    (f"{MODEL},{TIMM}", [MODEL, TIMM]),                     # comma separated
])
def test_models_accepts_every_list_spelling(given, want):
    assert P.coerce("models", given, rule("supervised_vit", "models")) == want


def test_broken_list_string_is_an_error_not_a_model_id():
    bad = f'["{MODEL}"'
    with pytest.raises(P.ParameterError) as e:
        P.coerce("models", bad, rule("supervised_vit", "models"))
    msg = str(e.value)
    assert msg.startswith("parameter models:") and bad in msg  # the value whole, as given


@pytest.mark.parametrize("given, want", [
    ('["pretrained"]', ["pretrained"]), ("pretrained", ["pretrained"]), ("pretrained,untrained", ["pretrained", "untrained"]),
    (["untrained"], ["untrained"]), ("[pretrained, untrained]", ["pretrained", "untrained"]),
])
def test_weights(given, want):
    assert P.coerce("weights", given, rule("language", "weights")) == want


@pytest.mark.parametrize("given, needle", [
    ("pretrainde", "did you mean 'pretrained'"), ("[]", "empty list"), ('["pretrained", "pretrained"]', "more than once"),
    ("[1]", "one of 'pretrained', 'untrained'"),
])
def test_weights_errors_say_what_is_allowed(given, needle):
    with pytest.raises(P.ParameterError) as e:
        P.coerce("weights", given, rule("language", "weights"))
    assert str(e.value).startswith("parameter weights") and needle in str(e.value)


@pytest.mark.parametrize("given, want", [
    ("[0, 1, 2]", [0, 1, 2]), ("3", [3]), (3, [3]), ("0,1", [0, 1]), ([0.0, 1], [0, 1]), ("[1e1]", [10]),
])
def test_int_lists(given, want):
    out = P.coerce("seeds", given, rule("tabular", "seeds"))
    assert out == want and all(type(v) is int for v in out)


def test_list_rules():
    with pytest.raises(P.ParameterError, match=r"parameter baseline_ns \(item 1\): got 1 .*>= 2"):
        P.coerce("baseline_ns", "[4, 1]", rule("summary", "baseline_ns"))
    alphas = rule("baseline", "alphas")  # a list of bounded floats
    assert P.coerce("alphas", "[0.2, 3]", alphas) == [0.2, 3.0]
    with pytest.raises(P.ParameterError, match=r"parameter alphas \(item 1\): got 0 .*expected a number > 0"):
        P.coerce("alphas", "[0.2, 0]", alphas)
    ens = P.coerce("ensembles", "dirichlet(1),softmax_gaussian(0.3)", rule("baseline_law", "ensembles"))
    assert ens == ["dirichlet(1)", "softmax_gaussian(0.3)"]  # commas inside brackets do not split
    with pytest.raises(P.ParameterError, match="expected a list"):
        P.coerce("models", '{"a": 1}', rule("dinov2", "models"))
    with pytest.raises(P.ParameterError, match="no spaces"):
        P.coerce("models", ["facebook/dinov2 small"], rule("dinov2", "models"))


# ------------------------------------------------------------------------------------------------
# scalars and mappings


def test_numbers_and_bools_from_strings():
    assert P.coerce("n_inputs", "8", rule("language", "n_inputs")) == 8
    assert P.coerce("n_inputs", 8.0, rule("language", "n_inputs")) == 8
    assert P.coerce("small_trials", "200_000", rule("baseline_law", "small_trials")) == 200_000
    assert P.coerce("x", "1e-3", P.number(gt=0)) == 1e-3
    for s, b in (("true", True), ("False", False), ("yes", True), ("0", False), (1, True)):
        assert P.coerce("force", s, rule("language", "force")) is b


@pytest.mark.parametrize("name, value, needle", [
    ("n_inputs", "eight", "parameter n_inputs: got 'eight'; expected an integer >= 1"),
    ("n_inputs", 0, "parameter n_inputs: got 0 (int); expected an integer >= 1"),
    ("n_inputs", 2.5, "expected an integer"),
    ("n_inputs", True, "expected an integer"),
    ("force", "maybe", "parameter force: got 'maybe'; expected true or false"),
    ("device", "gpu", "parameter device: got 'gpu'; expected a string"),
    ("text_source", 3, "pass a string with -r NAME VALUE"),
    ("seed", -1, ">= 0"),
    ("batch_size", None, "parameter batch_size: got None"),
])
def test_scalar_errors(name, value, needle):
    with pytest.raises(P.ParameterError) as e:
        P.coerce(name, value, rule("language", name))
    assert needle in str(e.value)


def test_optional_parameters_take_none_spellings():
    for v in (None, "None", "null", ""):
        assert P.coerce("n_untrained", v, rule("language", "n_untrained")) is None
        assert P.coerce("text_source", v, rule("language", "text_source")) is None
    assert P.coerce("n_untrained", "4", rule("language", "n_untrained")) == 4
    assert P.coerce("results_dir", "/tmp/x", rule("language", "results_dir")) == "/tmp/x"


def test_dicts():
    r = rule("baseline", "trials_large")
    assert P.coerce("trials_large", '{"96": "2000", "128": 10}', r) == {96: 2000, 128: 10}
    assert P.coerce("trials_large", "{96: 5}", r) == {96: 5}
    with pytest.raises(P.ParameterError, match="as a mapping"):
        P.coerce("trials_large", "{96: ", r)
    with pytest.raises(P.ParameterError, match=r"trials_large \['x'\]|trials_large \(key\)"):
        P.coerce("trials_large", {"x": 1}, r)


# ------------------------------------------------------------------------------------------------
# resolve and unknown names


def test_resolve_converts_in_place_and_returns_in_declaration_order():
    ns = ns_for("supervised_vit", models=f'["{MODEL}"]', weights="pretrained", n_inputs="4")
    out = P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")
    assert list(out) == list(P.parameters_for(ROOT / "notebooks" / "supervised_vit.ipynb").model_fields)
    assert ns["models"] == out["models"] == [MODEL]
    assert ns["weights"] == ["pretrained"] and ns["n_inputs"] == 4
    assert P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb") == out  # idempotent


def test_resolve_takes_a_name_a_path_or_a_model(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the notebook is not needed, only its name
    own = str(P.results_folder(P.NOTEBOOKS["theory"].parse({"profile": "quick", "results_dir": None})))
    assert dict(P.resolve(ns_for("theory"), "theory")) == {"profile": "quick", "results_dir": own}
    assert dict(P.resolve(ns_for("theory"), P.NOTEBOOKS["theory"])) == {"profile": "quick", "results_dir": own}
    assert dict(P.resolve(ns_for("theory"), "elsewhere/theory.ipynb")) == {"profile": "quick", "results_dir": own}


def test_unknown_name_in_a_plain_namespace():
    import math as some_module

    ns = ns_for("supervised_vit", model=MODEL, some_module=some_module, helper=lambda: 0, _private=1, In=[], Out={})
    with pytest.raises(P.ParameterError) as e:
        P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")
    msg = str(e.value)
    assert "unknown parameter 'model' (did you mean 'models'?)" in msg
    assert "the known parameters are: profile, results_dir, models, weights" in msg


def injected_cell(**kw):
    """The cell papermill injects (papermill's own translator)."""
    from papermill.translators import translate_parameters

    return translate_parameters("python3", "python", kw, "Parameters")


def test_unknown_name_from_papermills_injected_cell():
    src = injected_cell(model=MODEL, n_inputs=4)
    assert src.startswith("# Parameters")
    ns = ns_for("supervised_vit", model=MODEL, n_inputs=4, table=object(), In=["", "<params>", src, "<this>"])
    with pytest.raises(P.ParameterError, match="unknown parameter 'model' .did you mean 'models'"):
        P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")
    # a misspelling with no near match still lists what is known
    ns["In"][-2] = injected_cell(zzz=1)
    with pytest.raises(P.ParameterError, match="'zzz' .no similar name.; the known parameters are: profile"):
        P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")


def test_papermill_inject_paths_are_not_unknown_parameters():
    src = injected_cell(PAPERMILL_INPUT_PATH="in.ipynb", PAPERMILL_OUTPUT_PATH="out.ipynb", n_inputs=4)
    ns = ns_for("supervised_vit", PAPERMILL_INPUT_PATH="in.ipynb", PAPERMILL_OUTPUT_PATH="out.ipynb", n_inputs=4,
                In=["", "<params>", src, "<this>"])
    assert P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")["n_inputs"] == 4
    del ns["In"]
    assert P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")["n_inputs"] == 4


def test_interactive_reruns_are_not_mistaken_for_parameters():
    """Under IPython, names left by later cells (a second Run All) are not parameters."""
    ns = ns_for("supervised_vit", table=object(), RESULTS="/tmp", r=1)
    for prev in ("import numpy as np\ntable = np.zeros(3)", "r = table.sum()\nRESULTS = '/tmp'",
                 'import dobrushin.experiments.params\n_params = dobrushin.experiments.params.resolve(globals(), "supervised_vit")'):
        ns["In"] = ["", prev, "<this>"]
        P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")
    # ...but the parameters cell itself, edited by hand with a misspelt name, is checked
    ns["In"] = ["", 'profile = "quick"\nmodels = ["a/b"]\nweights = ["untrained"]\nmodel = "a/b"', "<this>"]
    with pytest.raises(P.ParameterError, match="'model' .did you mean 'models'"):
        P.resolve(ns, ROOT / "notebooks" / "supervised_vit.ipynb")


def test_missing_parameter():
    ns = ns_for("theory")
    del ns["results_dir"]
    with pytest.raises(P.ParameterError, match="results_dir not defined; run the parameters cell first"):
        P.resolve(ns, ROOT / "notebooks" / "theory.ipynb")


def test_resolved_parameters_are_one_frozen_read_only_mapping():
    from collections.abc import Mapping

    from pydantic import ValidationError

    p = P.resolve(ns_for("language", n_inputs="5"), "language")
    assert isinstance(p, Mapping) and isinstance(p, P.FamilyParameters) and p.kind == "text"
    declared = list(P.parameters_for("language").model_fields)
    assert list(p) == list(p.keys()) == declared and len(p) == len(declared)
    assert dict(p) == dict(zip(p.keys(), p.values())) == dict(p.items()) == p.as_dict()
    assert p["n_inputs"] == p.n_inputs == 5 and "n_inputs" in p and "nope" not in p and p.get("nope", 7) == 7
    with pytest.raises(KeyError):
        p["nope"]
    with pytest.raises(ValidationError):
        p.n_inputs = 6  # frozen: the one object cannot drift from what was validated
    assert (lambda **kw: kw)(**p) == dict(p)  # SummaryChapter(**_params)
    assert "results_dir" not in p.recorded() and len(p.recorded()) == len(p) - 1


@pytest.mark.parametrize("nb, kind", [("dinov2", "image"), ("supervised_vit", "image"), ("language", "text")])
def test_the_measurement_config_is_built_from_the_parameters(nb, kind):
    from dobrushin.experiments.pipeline import MeasureConfig

    p = P.resolve(ns_for(nb, weights="untrained", n_untrained="2", batch_size="3", seed="5", force="yes"), nb)
    assert p.kind == kind and p.source is None
    cfg = p.measure_config(progress=False)
    by_hand = MeasureConfig(weights=("untrained",), n_untrained=2, batch_size=3, seed=5, head_inputs=p["head_inputs"],
                            device="auto", force=True, progress=False,
                            **({"image_size": p["image_size"]} if kind == "image" else {"max_length": p["max_length"]}))
    assert cfg == by_hand


@pytest.mark.parametrize("profile", sorted(p.name for p in (ROOT / "params").iterdir() if p.is_dir()))
def test_every_profile_passes_as_make_book_passes_it(profile):
    """`make book` runs papermill with -f params/<profile>/<nb>.yml -p profile <profile>: every value is valid."""
    for nb in NOTEBOOKS:
        given = {**(yaml.safe_load((ROOT / "params" / profile / f"{nb}.yml").read_text()) or {}), "profile": profile}
        ns = ns_for(nb, **given, In=["", "<parameters cell>", injected_cell(**given), "<this>"])
        out = P.resolve(ns, ROOT / "notebooks" / f"{nb}.ipynb")
        assert out["profile"] == profile
        for k, v in given.items():
            assert out[k] == v or (isinstance(v, dict) and out[k] == {int(a): int(b) for a, b in v.items()}), (nb, k)
