"""The random baseline's cells, cached: ``run_grid`` runs or reads one JSON file per cell under
``results/baseline/cells`` (atomic writes; keyed by the parameters and the digest of ``CELL_CODE``; on a
miss the published folder's copy is used), and ``write_table`` writes a table with its manifest record."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from ..store.code import code_digest
from ..store.results import atomic_write_csv, atomic_write_json, params_key, sha256_file
from .ensembles import COUNT_FIELDS, BLOCK_ELEMENTS, CELL_CODE, parse_ensemble, simulate, summarise


def cell_params(ensemble, n: int, trials: int, seed: int, check: bool) -> dict:
    return {
        "code_digest": code_digest(CELL_CODE), "block_elements": BLOCK_ELEMENTS, "ensemble": parse_ensemble(ensemble).name,
        "n": int(n), "trials": int(trials), "seed": int(seed), "check": bool(check), "tol": 0.0,
    }


def cell_path(cache: Path, params: Mapping[str, Any]) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", params["ensemble"]).strip("-")
    return cache / f"{slug}_n{params['n']}_{params_key(params)}.json"


def load_cell(cache: Path, params: Mapping[str, Any]) -> dict | None:
    """The cached cell for ``params`` if present and intact, else None."""
    p = cell_path(Path(cache), params)
    try:
        rec = json.loads(p.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("params") != dict(params):
        return None
    counts = rec.get("counts")
    if not isinstance(counts, dict) or set(counts) != set(COUNT_FIELDS):
        return None
    # in the order of a fresh cell's counts (the file keeps its keys sorted), so that a table is written
    # with the same columns in the same order whether its cells were computed or read back
    return {**rec, "counts": {k: counts[k] for k in COUNT_FIELDS}}


def run_cell(ensemble, n: int, trials: int, seed: int, *, check: bool, cache: "Path | None") -> dict:
    """Counts for one cell, from the cache when the same parameters were run before; ``wall_s``/``cpu_s``
    are the cost of the run that produced them."""
    params = cell_params(ensemble, n, trials, seed, check)
    if cache is not None:
        rec = load_cell(cache, params)
        if rec is None:  # the published folder's copy of the same cell (same file name, same parameters)
            from ..store.paths import published_counterpart

            pub = published_counterpart(Path(cache) / "x")
            rec = load_cell(pub.parent, params) if pub is not None else None
            if rec is not None:
                atomic_write_json(cell_path(Path(cache), params), rec)
        if rec is not None:
            return {**rec, "cached": True}
    t0, c0 = time.perf_counter(), time.process_time()
    counts = simulate(ensemble, n, trials, seed, check=check)
    rec = {"params": params, "counts": counts, "wall_s": time.perf_counter() - t0,
           "cpu_s": time.process_time() - c0}
    if cache is not None:
        atomic_write_json(cell_path(Path(cache), params), rec)
    return {**rec, "cached": False}


def run_grid(
    cells: Iterable[tuple[Any, int, int]],
    seed: int,
    *,
    check: "bool | Callable[[int], bool]" = True,
    cache: "Path | None" = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run (or load) every ``(ensemble, n, trials)`` cell; the ``summarise`` table.  ``check`` may be a
    function of n."""
    rows = []
    for ens, n, trials in cells:
        ens = parse_ensemble(ens)
        chk = check(n) if callable(check) else bool(check)
        rec = run_cell(ens, n, trials, seed, check=chk, cache=cache)
        rows.append({"n": int(n), "ensemble": ens.name, **rec["counts"], "seed": int(seed), "check": chk,
                     "wall_s": rec["wall_s"], "cpu_s": rec["cpu_s"], "cached": rec["cached"]})
        if progress:
            how = "cached" if rec["cached"] else "%.1f s" % rec["wall_s"]
            progress(f"{ens.name} n={n} trials={trials}: {how}")
    if not rows:
        raise ValueError("no cells to run")
    return summarise(pd.DataFrame(rows))


# ------------------------------------------------------------------------ tidy files + manifest
def write_table(df: pd.DataFrame, path: Path, params: Mapping[str, Any]) -> dict:
    """Write ``df`` to ``path`` (CSV) atomically and record it in ``<folder>/manifest.json``."""
    path = Path(path)
    atomic_write_csv(path, df)
    man_path = path.parent / "manifest.json"
    try:
        man = json.loads(man_path.read_text())
        if not isinstance(man, dict):
            raise ValueError
    except (FileNotFoundError, ValueError):
        man = {}
    entry = {"file": path.name, "params_key": params_key(params), "params": dict(params),
             "sha256": sha256_file(path), "rows": int(len(df)),
             "code_digest": str(params.get("code_digest") or code_digest(CELL_CODE)),
             "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    man.setdefault("files", {})[path.name] = entry
    atomic_write_json(man_path, man)
    return entry


def baseline_dir(results_dir=None) -> Path:
    from ..store.paths import results_dir as _rd

    return Path(results_dir if results_dir is not None else _rd()) / "baseline"
