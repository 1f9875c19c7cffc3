"""Notebook parameters: read what people type, reject what cannot be right, say why.

Every notebook's first code cell after its ``parameters`` cell is::

    import dobrushin.experiments.params  # check and convert the parameters above (papermill -p passes strings)
    _params = dobrushin.experiments.params.resolve(globals(), "supervised_vit")

Each parameter name has one type (:data:`TYPES`; spellings: :mod:`dobrushin.experiments.param_types`); each
notebook's parameters are one pydantic model (:data:`NOTEBOOKS`, ``extra="forbid"``), whose instance is also a
read-only mapping.  Unknown names, which papermill only warns about, are caught: under IPython those assigned by
the previous cell (papermill's ``# Parameters`` cell or the parameters cell), else every public name that is not
a module, function, class or Jupyter name.  Errors are :class:`ParameterError` (a ``ValueError``).
"""
from __future__ import annotations

import ast
import collections.abc
import difflib
import os
import re
import shutil
import time
import types
from pathlib import Path
from typing import Any, ClassVar, Dict, List, MutableMapping, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .families import FAMILIES
from .param_types import (Bool, Folder, ParameterError, choice, coerce, describe, integer, list_of, mapping, number,
                          optional, text)


# ------------------------------------------------------------------------------------------------
# every parameter name, with its one type

_SIZES = list_of(integer(ge=2), nonempty=True)  # matrix sizes: a pair of tokens needs n >= 2
_TRIALS = mapping(integer(ge=2), integer(ge=1))  # matrices per size
_COUNT = integer(ge=1)
_SEED = integer(ge=0)
_MODEL_ID = text(r"\S+", "a Hugging Face or timm model id (no spaces)")

#: the type of every notebook parameter, by name (shared by every notebook that declares the name)
TYPES: Dict[str, Any] = {
    "profile": text(r"[A-Za-z0-9_.-]+", "a profile name such as quick or paper"),
    "results_dir": optional(Folder),
    "models": list_of(_MODEL_ID, nonempty=True, unique=True),
    "weights": list_of(choice("pretrained", "untrained"), nonempty=True, unique=True),
    "n_inputs": optional(_COUNT),
    "n_untrained": optional(_COUNT),
    "head_inputs": integer(ge=0),
    "image_source": optional(text()),
    "text_source": optional(text()),
    "image_size": _COUNT,
    "extra_image_size": optional(_COUNT),
    "extra_size_models": list_of(text(r"\S+", "a model id of the models parameter (no spaces)"), unique=True),
    "max_length": integer(ge=2),
    "batch_size": _COUNT,
    "seed": _SEED,
    "split_seed": _SEED,
    "seeds": list_of(_SEED, nonempty=True, unique=True),
    "device": text(r"auto|cpu|mps|cuda(:\d+)?", '"auto", "cpu", "cuda", "cuda:<index>" or "mps"'),
    "force": Bool,
    "check_theorem": Bool,
    "datasets": list_of(text(), nonempty=True, unique=True),
    "max_epochs": optional(_COUNT),
    "patience": _COUNT,
    "train_rows": optional(_COUNT),
    "attention_rows": optional(_COUNT),
    "epoch_datasets": list_of(text(), unique=True),
    "epoch_rows": optional(_COUNT),
    "torch_threads": _COUNT,
    "ns": _SIZES, "ensemble_ns": _SIZES, "reference_ns": _SIZES, "baseline_ns": _SIZES,
    "trials_small": _COUNT, "ensemble_trials_small": _COUNT, "small_trials": _COUNT,
    "check_max_n": integer(ge=0),
    "trials_large": _TRIALS, "ensemble_trials_large": _TRIALS, "trials": _TRIALS, "large_ns": _TRIALS,
    "reference_trials": _TRIALS,
    "alphas": list_of(number(gt=0)), "temperatures": list_of(number(gt=0)),
    "ensembles": list_of(text(), nonempty=True, unique=True), "large_ensembles": list_of(text(), unique=True),
    "reference_ensembles": list_of(text(), nonempty=True, unique=True),
}


# ------------------------------------------------------------------------------------------------
# the notebooks' models


class Parameters(BaseModel, collections.abc.Mapping):
    """The validated parameters of one notebook: a frozen pydantic model that is also a read-only
    mapping name -> value in declaration order (``dict(p)``, ``**p``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the notebook these parameters belong to (``"dinov2"``)
    notebook: ClassVar[str] = ""

    @classmethod
    def parse(cls, values: MutableMapping[str, Any]) -> "Parameters":
        """Validate ``values`` (name -> value as given); :class:`ParameterError` for an unknown or
        missing name or a value that cannot be converted."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as e:
            errors = e.errors()
        known = list(cls.model_fields)
        bad = [str(err["loc"][0]) for err in errors if err["type"] == "extra_forbidden"]
        if bad:
            msgs = []
            for b in bad:
                close = difflib.get_close_matches(b, known, n=1, cutoff=0.6)
                msgs.append(f"{b!r}" + (f" (did you mean {close[0]!r}?)" if close else " (no similar name)"))
            raise ParameterError(f"{cls.notebook}: unknown parameter{'s' if len(bad) > 1 else ''} {', '.join(msgs)}; "
                                 f"the known parameters are: {', '.join(known)}")
        missing = [str(err["loc"][0]) for err in errors if err["type"] == "missing"]
        if missing:
            raise ParameterError(f"{cls.notebook}: parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                 f"not defined; run the parameters cell first")
        err = errors[0]
        name = str(err["loc"][0])
        raise ParameterError(describe(name, TYPES[name], {**err, "loc": err["loc"][1:]}, values[name]))

    def as_dict(self, exclude: Sequence[str] = ()) -> Dict[str, Any]:
        """The values, name -> value in declaration order (lists as lists: JSON-ready)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k not in exclude}

    # the read-only mapping protocol (keys, values, items, get, ``in``: collections.abc.Mapping's)
    def __getitem__(self, name: str):
        if name not in type(self).model_fields:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):  # names, as a mapping iterates (pydantic's own yields pairs)
        return iter(type(self).model_fields)

    def __len__(self) -> int:
        return len(type(self).model_fields)


class FamilyParameters(Parameters):
    """A transformer family chapter's parameters; ``kind``: ``"image"`` or ``"text"``, the inputs the models take."""

    kind: ClassVar[str] = ""

    @property
    def source(self) -> Optional[str]:
        """Where the inputs come from: ``image_source`` or ``text_source``."""
        return self.get("image_source") if self.kind == "image" else self.get("text_source")

    def measure_config(self, **changes):
        """The ``MeasureConfig`` for these parameters (``changes``: its other fields, e.g. ``progress=False``)."""
        from .pipeline import MeasureConfig

        own = {k: self[k] for k in ("n_untrained", "batch_size", "seed", "image_size", "max_length", "head_inputs",
                                    "device", "force") if k in self}
        return MeasureConfig(weights=tuple(self.weights), **own, **changes)

    def recorded(self) -> Dict[str, Any]:
        """What the results' manifest records: every value but ``results_dir``."""
        return self.as_dict(exclude=("results_dir",))


#: notebook name -> its parameters model
NOTEBOOKS: Dict[str, type] = {}


def declare(notebook: str, names: str, base: type = Parameters, **classvars) -> type:
    """Declare and register (:data:`NOTEBOOKS`) the parameters model of ``notebook``: ``names``
    (whitespace-separated, in parameters-cell order) typed by :data:`TYPES`; ``classvars`` set on the model."""
    fields = names.split()
    unknown = [n for n in fields if n not in TYPES]
    if unknown:
        raise ParameterError(f"{notebook}: no type for parameter{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(unknown)}; add {'them' if len(unknown) > 1 else 'it'} to TYPES")
    title = "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", notebook) if w)
    cls = create_model(f"{title}Parameters", __base__=base, __module__=__name__,
                       **{n: (TYPES[n], ...) for n in fields})
    cls.notebook = notebook
    for k, v in classvars.items():
        setattr(cls, k, v)
    NOTEBOOKS[notebook] = cls
    return cls


_FAMILY = "profile results_dir models weights n_inputs n_untrained head_inputs"
_RUN = "batch_size seed device force"
declare("theory", "profile results_dir")
declare("summary", "profile results_dir baseline_ns")
declare("baseline", "profile results_dir seed ns trials_small trials_large alphas temperatures ensemble_ns "
                    "ensemble_trials_small ensemble_trials_large check_theorem")
declare("baseline_law", "profile results_dir seed ensembles small_trials ns trials large_ns large_ensembles "
                        "check_max_n reference_ns reference_ensembles reference_trials")
declare("tabular", "profile results_dir datasets seeds split_seed max_epochs patience batch_size train_rows "
                   "attention_rows head_inputs epoch_datasets epoch_rows torch_threads force")
for _f in FAMILIES:  # the transformer families of the registry: the common names, their own, the run's
    if _f.transformer:
        declare(_f.notebook, f"{_FAMILY} {_f.parameters} {_RUN}", FamilyParameters, kind=_f.inputs)


def parameters_for(notebook: Union[str, os.PathLike, type]) -> type:
    """The parameters model of a notebook: its name (``"language"``), a path whose stem is the name, or
    a :class:`Parameters` subclass (returned as is)."""
    if isinstance(notebook, type) and issubclass(notebook, Parameters):
        return notebook
    name = Path(notebook).stem
    if name not in NOTEBOOKS:
        raise ParameterError(f"no parameters are declared for the notebook {name!r} (known: {', '.join(NOTEBOOKS)}); "
                             "declare them with dobrushin.experiments.params.declare")
    return NOTEBOOKS[name]


# ------------------------------------------------------------------------------------------------
# unknown names

#: names IPython / Jupyter put into every namespace
JUPYTER_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open", "display"})

#: papermill --inject-paths adds PAPERMILL_INPUT_PATH / PAPERMILL_OUTPUT_PATH: its own, never unknown
PAPERMILL_PREFIX = "PAPERMILL_"


def _assigned_names(source: str) -> Optional[List[str]]:
    """Names assigned by a cell made only of ``name = value`` statements (papermill's injected cell,
    a parameters cell); None for any other cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            names += [t.id for t in stmt.targets]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
        else:
            return None
    return names


def _previous_cell(ns: MutableMapping[str, Any]) -> Optional[str]:
    """The source of the cell executed before the current one (IPython's input history), or None."""
    hist = ns.get("In", ns.get("_ih"))
    if not isinstance(hist, list) or len(hist) < 2 or not all(isinstance(h, str) for h in hist[-2:]):
        return None
    return hist[-2]


def unknown_names(ns: MutableMapping[str, Any], known: Sequence[str]) -> List[str]:
    """Names set as parameters in ``ns`` that are not in ``known`` (see the module docstring)."""
    known = set(known)
    prev = _previous_cell(ns)
    if prev is not None:
        names = _assigned_names(prev)
        if names is None:
            return []
        injected = prev.lstrip().startswith("# Parameters")
        if not injected and sum(n in known for n in names) * 2 < len(names):
            return []  # an assignment cell run by hand that is not a parameters cell
        return [n for n in dict.fromkeys(names) if n not in known and not n.startswith(PAPERMILL_PREFIX)]
    out = []
    for k, v in ns.items():
        if k.startswith(("_", PAPERMILL_PREFIX)) or k in known or k in JUPYTER_NAMES:
            continue
        if isinstance(v, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
            continue
        out.append(k)
    return out


# ------------------------------------------------------------------------------------------------
# the entry point


def resolve(ns: MutableMapping[str, Any], notebook: Union[str, os.PathLike, type], *,
            check_unknown: bool = True) -> Parameters:
    """Validate a notebook's parameters in its namespace ``ns`` (``globals()``), write the converted values back
    and return the model instance.  ``notebook``: as :func:`parameters_for`.  Raises :class:`ParameterError` for
    an unknown name (``check_unknown``), a missing parameter or a value that cannot be converted."""
    cls = parameters_for(notebook)
    known = list(cls.model_fields)
    extra = unknown_names(ns, known) if check_unknown else []
    params = cls.parse({**{n: ns[n] for n in known if n in ns}, **{n: ns.get(n) for n in extra}})
    if params.get("results_dir", "") is None:
        params = cls.parse({**params.as_dict(), "results_dir": str(results_folder(params))})
    ns.update(params.as_dict())
    return params


# ------------------------------------------------------------------------------------------------
# where a run's results go

#: parameters that say how a run goes, not what it measures: left out of a run's key
RUN_ONLY = ("results_dir", "force", "device")
#: run folders kept under ``results/runs/`` (older ones untouched for a day are removed)
RUNS_KEPT = 20
#: the folder a notebook writes, where it is not the notebook's own name
WRITES = {"baseline_law": "baseline"}
#: caches keyed entry by entry inside a chapter folder: a run by hand links the book's
KEYED_CACHES = {"baseline": "cells"}


def results_folder(params: "Parameters") -> Path:
    """Where a run by hand writes when ``results_dir`` is not given: ``<results>/runs/<notebook>-<key>/`` (key:
    hash of the parameters but :data:`RUN_ONLY`), so it never overwrites the book's results.  The folder gets
    links to the book's other chapter folders and ``run.json``; only :data:`RUNS_KEPT` run folders are kept."""
    from ..store.paths import results_dir
    from ..store.results import atomic_write_json, params_key

    notebook = type(params).notebook
    mine = params.as_dict(exclude=RUN_ONLY)
    base = results_dir()
    folder = base / "runs" / f"{notebook}-{params_key(mine)[:8]}"
    folder.mkdir(parents=True, exist_ok=True)
    own = WRITES.get(notebook, notebook)
    links = [(base / name, folder / name) for name in NOTEBOOKS if name != own]  # the other chapters' folders
    if own in KEYED_CACHES:  # this run's own folder, with the book's keyed cache in it
        (folder / own).mkdir(exist_ok=True)
        links.append((base / own / KEYED_CACHES[own], folder / own / KEYED_CACHES[own]))
    for other, link in links:  # figures and this chapter's tables stay apart
        if other.is_dir() and not link.exists() and not link.is_symlink():
            link.symlink_to(other.resolve(), target_is_directory=True)
    atomic_write_json(folder / "run.json", {"notebook": notebook, "parameters": mine})
    runs = sorted((f.parent for f in (base / "runs").glob("*/run.json")), key=lambda d: (d / "run.json").stat().st_mtime)
    stale = time.time() - 86400  # a run still going keeps its folder
    for old in [d for d in runs if d != folder][:max(0, len(runs) - RUNS_KEPT)]:
        if (old / "run.json").stat().st_mtime < stale:
            shutil.rmtree(old, ignore_errors=True)  # links inside are removed, not followed
    print(f"results_dir not given: this run's results go to {folder} (named by its parameters), apart from the "
          "book's (make book writes those)")
    return folder
