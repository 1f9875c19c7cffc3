"""Reading the results notebooks wrote: the family notebooks' tables and manifest entries, the random baseline
(frequency table, exact theorem check, reference grid) and the wall times.  Every reader takes ``results_dir``
and returns a data frame (or ``None`` when the notebook has not run)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from .families import NOTEBOOKS
from ..math.stats import wilson
from ..models.configs import resolution_id
from ..random.ensembles import parse_ensemble
from ..store.results import ResultStore


def _run_kind(manifest: dict, entry: dict, profile: Optional[str]) -> Optional[str]:
    """``"run"`` for an entry of the notebook's latest run (its ``models``, the profile asked for),
    ``"resolution"`` for its run at ``extra_image_size`` (``"<id>@518px"``), None for a leftover."""
    prof = entry.get("profile", manifest.get("profile"))
    if not (profile is None or prof is None or prof == profile):
        return None
    params = manifest.get("parameters") or {}
    models = params.get("models")
    if models is None or entry.get("model") in models:
        return "run"
    extra = params.get("extra_image_size")
    if extra and entry.get("model") in {resolution_id(m, int(extra))
                                        for m in params.get("extra_size_models") or () if m in models}:
        return "resolution"
    return None


@dataclass
class FamilyRuns:
    """The family notebooks' latest runs: ``frames`` (``[((notebook, model), table)]``) and ``entries`` of every
    run; ``resolution_runs`` names those at a second resolution."""
    frames: list
    entries: dict
    resolution_runs: frozenset

    def _view(self, keep) -> tuple[pd.DataFrame, dict]:
        frames = [t for k, t in self.frames if keep(k)]
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return table, {k: e for k, e in self.entries.items() if keep(k)}

    def primary(self) -> tuple[pd.DataFrame, dict]:
        """``(table, entries)`` without the runs at a second resolution (what the claims are judged on)."""
        return self._view(lambda k: k not in self.resolution_runs)

    def every(self) -> tuple[pd.DataFrame, dict]:
        """``(table, entries)`` of every run."""
        return self._view(lambda k: True)


def load_family_runs(results_dir, profile: Optional[str] = None, notebooks=NOTEBOOKS) -> FamilyRuns:
    """The per-model tables and manifest entries of the family notebooks' latest runs (:class:`FamilyRuns`)."""
    frames, entries, second = [], {}, set()
    for nb in notebooks:
        d = Path(results_dir) / nb
        if not (d / "manifest.json").exists():
            continue
        store = ResultStore(results_dir, nb)
        m = store.manifest()
        for slug, e in m["entries"].items():
            kind = _run_kind(m, e, profile)
            if kind is None:
                continue
            model = e.get("model") or e.get("params", {}).get("model_id") or slug
            entries[(nb, model)] = e
            if kind == "resolution":
                second.add((nb, model))
            t = store.read(e, "table")
            if t is not None:
                frames.append(((nb, model), t.assign(notebook=nb)))
    return FamilyRuns(frames, entries, frozenset(second))


def load_family_results(results_dir, profile: Optional[str] = None) -> tuple[pd.DataFrame, dict]:
    """``(table, entries)`` of the family notebooks' latest runs but the second-resolution ones (the same inputs
    again are not new evidence): ``table`` in the results schema plus ``notebook``, ``entries`` keyed
    ``(notebook, model)``."""
    return load_family_runs(results_dir, profile).primary()


def _is_uniform(name: str) -> bool:
    """Is ``name`` a spelling of the Dirichlet(1) ensemble (rows uniform on the simplex)?"""
    try:
        return parse_ensemble(str(name)) == parse_ensemble("dirichlet(1)")
    except ValueError:
        return False


def load_baseline(results_dir) -> Optional[pd.DataFrame]:
    """Dirichlet(1) estimates ``(n, trials, holds, p, ci_low, ci_high)`` from results/baseline/baseline.csv
    (the baseline chapter's grid, counted matrices); None when it does not exist."""
    path = Path(results_dir) / "baseline" / "baseline.csv"
    if not path.exists():
        return None
    f = pd.read_csv(path)
    f = f[f["ensemble"].map(_is_uniform)][["n", "trials", "holds"]].copy()
    if not len(f):
        return None
    ci = [wilson(h, t) for h, t in zip(f["holds"], f["trials"])]
    f["p"], f["ci_low"], f["ci_high"] = zip(*ci)
    return f.sort_values("n").reset_index(drop=True)


def load_theorem_check(results_dir) -> Optional[dict]:
    """The baseline chapter's exact check of the theorem, summed over results/baseline/baseline.csv
    (``trials``, ``checked``, ``float_mismatches``, ``disagreements``, ``ensembles``, ``sizes``); None without one."""
    path = Path(results_dir) / "baseline" / "baseline.csv"
    if not path.exists():
        return None
    f = pd.read_csv(path)
    if not {"trials", "checked", "disagreements"} <= set(f.columns):
        return None
    out = {c: int(f[c].sum()) for c in ("trials", "checked", "float_mismatches", "disagreements") if c in f.columns}
    out["ensembles"] = int(f["ensemble"].nunique()) if "ensemble" in f.columns else 0
    out["sizes"] = int(f["n"].nunique()) if "n" in f.columns else 0
    return out


def load_reference_grid(results_dir) -> Optional[pd.DataFrame]:
    """The Dirichlet(1) baseline ``(n, p)`` on every known n (None if none), each from its most precise source:
    reference.csv, then law.csv's column-averaged estimates, then the baseline grid's direct counts."""
    frames = []
    ref = Path(results_dir) / "baseline" / "reference.csv"
    if ref.exists():
        r = pd.read_csv(ref)
        frames.append(r[r["ensemble"].map(_is_uniform)][["n", "p"]])
    law = load_law_estimates(results_dir)
    if law is not None:
        frames.append(law[["n", "p"]])
    grid = load_baseline(results_dir)
    if grid is not None:
        frames.append(grid[["n", "p"]])
    if not frames:
        return None
    f = pd.concat(frames).drop_duplicates("n", keep="first").sort_values("n")
    return f.reset_index(drop=True)


def load_law_estimates(results_dir) -> Optional[pd.DataFrame]:
    """The law chapter's column-averaged estimates of the Dirichlet(1) baseline (results/baseline/law.csv):
    ``(n, p, ci_low, ci_high, trials)`` sorted by n, None when the table or its estimates do not exist."""
    path = Path(results_dir) / "baseline" / "law.csv"
    if not path.exists():
        return None
    w = pd.read_csv(path)
    if not {"n", "ensemble", "trials", "rb_p_holds", "rb_ci_low", "rb_ci_high"} <= set(w.columns):
        return None
    w = w[w["ensemble"].map(_is_uniform) & w["rb_p_holds"].notna()]
    if not len(w):
        return None
    # law.csv's own p, ci_low, ci_high are the direct counts: the column-averaged columns replace them
    out = pd.DataFrame({"n": w["n"], "p": w["rb_p_holds"], "ci_low": w["rb_ci_low"], "ci_high": w["rb_ci_high"],
                        "trials": w["trials"]})
    return out.sort_values("n").reset_index(drop=True)


def baseline_at(grid: Optional[pd.DataFrame], n: float) -> float:
    """Baseline probability at token count ``n``, interpolated in log n on the grid (nan if no grid)."""
    if grid is None or not len(grid):
        return float("nan")
    x = np.log(grid["n"].to_numpy(float))
    return float(np.interp(np.log(max(n, 2)), x, grid["p"].to_numpy(float)))


def baseline_for(table: pd.DataFrame, results_dir) -> dict:
    """Model id → the Dirichlet(1) baseline P(condition holds) at the model's median number of content tokens
    (:func:`load_reference_grid`); empty when none exists or ``table`` is empty."""
    grid = load_reference_grid(results_dir)
    if grid is None or not len(table):
        return {}
    c = table[table["variant"] == "content"]
    return {m: baseline_at(grid, float(g["n_tokens"].median())) for m, g in c.groupby("model", sort=False)}


# --- timings --------------------------------------------------------------------------------------

def load_timings(results_dir) -> pd.DataFrame:
    """Wall times ``make notebooks`` recorded (``timings/<profile>/<notebook>.json``): columns ``notebook, profile,
    seconds, finished``."""
    records = {}
    for f in sorted((Path(results_dir) / "timings").glob("*/*.json")):
        try:
            r = json.loads(f.read_text())
        except ValueError as exc:
            raise ValueError(f"{f}: not a JSON timing record ({exc})") from None
        missing = [k for k in ("notebook", "profile", "seconds") if k not in r]
        if missing:
            raise ValueError(f"{f}: timing record lacks {missing}")
        if f.parent.name != r["profile"]:
            raise ValueError(f"{f}: profile {r['profile']!r} does not match its folder {f.parent.name!r}")
        records[(r["notebook"], r["profile"])] = {"notebook": r["notebook"], "profile": r["profile"],
                                                  "seconds": float(r["seconds"]), "finished": r.get("finished", "")}
    return pd.DataFrame(list(records.values()), columns=["notebook", "profile", "seconds", "finished"])
