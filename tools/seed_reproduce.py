"""Seed a fresh ``make reproduce`` folder with the keyed products of an earlier published run:
``python -m tools.seed_reproduce PUBLISHED RUN`` (``make reproduce SEED=1`` calls it).

What is copied is what carries its own cache key and was made by today's code (the digest its key holds
is the one today's code gives; a cell or checkpoint of another digest can never be reused, and is left
out), so the run reuses it only where its whole key matches — the same rule by which every cache here is
reused (same parameters, same code, same weights):

* the random baseline's cells (``baseline/cells/*.json``; keyed by the parameters of the cell and by the
  digest of ``math/``, ``random/`` and ``store/``, :data:`dobrushin.random.ensembles.CELL_CODE`);
* the FT-Transformer checkpoints (``checkpoints/tabular/*``; keyed by the training settings, the data,
  the seed and the digest of the training code, :data:`dobrushin.models.ft_transformer.TRAINING_CODE`),
  into the run's checkpoint cache;
* the FT-Transformer trajectories along training (``tabular/epochs.csv``, one per data set and seed; keyed
  like a checkpoint, with the test rows and the digest of :mod:`dobrushin.experiments.epochs`), into the
  run's ``epochs`` cache.

Everything else — the model chapters' tables, the tabular tables, the summary — is computed by the run.
A cell or checkpoint whose key no longer matches (its code changed) is simply not found and is computed
again.  The wall-time records of the chapters whose products are seeded (``baseline`` and ``baseline_law``
for the cells, ``tabular`` for the checkpoints) are carried over too, so that, with the run's ``--add``, a
chapter's time stays the whole time spent on what it shows, over all passes; a chapter none of whose
products could be seeded starts its record afresh.  ``SEEDED.json`` in the run folder says where the seed came
from; publishing copies it into ``PUBLISHED.json`` as ``seeded_from``.

A cell, checkpoint or trajectory made by the code that an accepted attestation carries over to today's
(:mod:`dobrushin.store.attest`) is **re-keyed**: copied under the key today's code gives it (its record's
digest replaced, its counts, weights or rows as they are), so the run reuses it as the attestation allows.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from dobrushin.store.results import atomic_write_json

#: chapters whose keyed products the seed carries, and which count of ``copied`` those are: a chapter's
#: wall-time record comes along when any of its products did
SEEDED_CHAPTERS = {"baseline": "baseline cells", "baseline_law": "baseline cells",
                   "tabular": "FT-Transformer checkpoints"}


def seed(published, run) -> dict:
    """Copy the keyed products of ``published`` (a ``published/<profile>`` folder) into the fresh run folder
    ``run``; returns the ``SEEDED.json`` record.  ValueError when ``published`` has no ``PUBLISHED.json``
    or ``run`` already holds results (seeding never mixes into a run in progress)."""
    published, run = Path(published), Path(run)
    meta_file = published / "PUBLISHED.json"
    if not meta_file.is_file():
        raise ValueError(f"{published} has no PUBLISHED.json: nothing published to seed from")
    if run.exists() and any(p.name != ".cache" for p in run.iterdir()):
        raise ValueError(f"{run} already holds results: seed only a fresh run folder")
    meta = json.loads(meta_file.read_text())
    copied = {"baseline cells": 0, "FT-Transformer checkpoints": 0, "FT-Transformer checkpoint files": 0,
              "trajectories along training": 0, "timing records": 0}
    current = _current_digests()
    carried = _attested(published, current)  # product -> the published digest an attestation carries to today's
    skipped = {"baseline cells": 0, "FT-Transformer checkpoints": 0, "trajectories along training": 0}  # other code
    rekeyed = {"baseline cells": 0, "FT-Transformer checkpoints": 0, "trajectories along training": 0}
    for f in sorted((published / "baseline" / "cells").glob("*.json")):
        d = _digest_of(f, "params")
        if d == current["cells"]:  # another digest can never match a key of today's
            _copy(f, run / "baseline" / "cells" / f.name)
            copied["baseline cells"] += 1
        elif d is not None and d == carried.get("cells"):
            _rekey_cell(f, run / "baseline" / "cells", current["cells"])
            copied["baseline cells"] += 1
            rekeyed["baseline cells"] += 1
        else:
            skipped["baseline cells"] += 1
    for f in sorted((published / "checkpoints" / "tabular").glob("*.json")):
        d = _digest_of(f)
        if d == current["training"]:
            copied["FT-Transformer checkpoints"] += 1
            for g in (f, f.with_suffix(".pt")):
                if g.is_file():
                    _copy(g, run / ".cache" / "tabular" / g.name)
                    copied["FT-Transformer checkpoint files"] += 1
        elif d is not None and d == carried.get("training") and f.with_suffix(".pt").is_file():
            copied["FT-Transformer checkpoint files"] += _rekey_checkpoint(f, run / ".cache" / "tabular",
                                                                           current["training"])
            copied["FT-Transformer checkpoints"] += 1
            rekeyed["FT-Transformer checkpoints"] += 1
        else:
            skipped["FT-Transformer checkpoints"] += 1
    rows = None  # the published epochs.csv, read once when a trajectory is seeded
    loaded: dict = {}  # the data sets a re-keying loaded
    trajectories = _epochs_meta(published)
    for rec in (trajectories.get("trajectories") or {}).values():
        d = rec.get("code_digest")
        now = rec if d == current["epochs"] else (
            _rekeyed_trajectory(published, trajectories, rec, current["epochs"], loaded) if d is not None and d == carried.get("epochs")
            else None)
        if now is None:
            skipped["trajectories along training"] += 1
            continue
        if rows is None:
            import pandas as pd

            from dobrushin.experiments.epochs import conform_epochs

            rows = conform_epochs(pd.read_csv(published / "tabular" / "epochs.csv"))
        mine = rows[rows.key == rec["key"]]
        if not len(mine):  # a record without its rows is no finished trajectory
            skipped["trajectories along training"] += 1
            continue
        _seed_trajectory(mine.assign(key=now["key"]), now, run / ".cache" / "epochs")
        copied["trajectories along training"] += 1
        rekeyed["trajectories along training"] += now is not rec
    carried = [nb for nb, products in SEEDED_CHAPTERS.items() if copied[products]]
    for nb in carried:
        for f in sorted((published / "timings").glob(f"*/{nb}.json")):
            _copy(f, run / "timings" / f.parent.name / f.name)
            copied["timing records"] += 1
    rec = {"from": str(published), "commit": meta.get("commit"), "code_digest": meta.get("code_digest"),
           "published": meta.get("published"), "copied": copied, "skipped_other_code": skipped,
           "rekeyed_under_attestation": rekeyed,
           "chapters": carried, "seeded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(run / "SEEDED.json", rec)
    return rec


def _current_digests() -> dict:
    """The digests today's code gives the cells' and the checkpoints' keys."""
    from dobrushin.store.code import product_digest

    return {p: product_digest(p) for p in ("cells", "training", "epochs")}


def _attested(published: Path, current: dict) -> dict:
    """``{product: published digest}`` for the products whose code today an accepted attestation in
    ``published`` carries over (:func:`dobrushin.store.attest.resolve`)."""
    from dobrushin.store.attest import resolve

    out = {}
    for product, now in current.items():
        old = resolve(product, now, published)
        if old != now:
            out[product] = old
    return out


def _epochs_meta(published: Path) -> dict:
    """The published tabular manifest's ``epochs`` record (its trajectories under ``trajectories``), {} when absent."""
    man = published / "tabular" / "manifest.json"
    return (json.loads(man.read_text()).get("epochs") or {}) if man.is_file() else {}


def _seed_trajectory(rows, rec: dict, cache: Path) -> None:
    """Write the trajectory ``rec``'s ``rows`` where :func:`dobrushin.experiments.epochs.trajectory` finds a finished
    one of its key (its rows and their record, the SHA-256 of the rows as written)."""
    from dobrushin.store.results import atomic_write_csv, sha256_bytes

    stem = cache / f"{rec['dataset']}-seed{int(rec['seed'])}-{rec['key']}"
    atomic_write_csv(Path(f"{stem}.csv"), rows.reset_index(drop=True))
    atomic_write_json(Path(f"{stem}.json"), {**rec, "sha256": sha256_bytes(Path(f"{stem}.csv").read_bytes())})


def _rekeyed_trajectory(published: Path, meta: dict, rec: dict, digest: str, loaded: dict) -> "dict | None":
    """The trajectory record ``rec`` (made by code an accepted attestation carries over to today's) under the key
    today's code gives it, or None when its key cannot be rebuilt.  A trajectory's record holds its key, not the
    parameters behind it, so they are rebuilt as the tabular chapter builds them — the data set (read again), the
    published epoch rows, split seed and training rows, the model and training settings of its checkpoint — and used
    only if they give the published key under the published digest.  ``meta``: the published ``epochs`` record."""
    from dobrushin.data import tabular_data
    from dobrushin.experiments import epochs as E
    from dobrushin.models import ft_transformer as ft

    ck = published / "checkpoints" / "tabular" / f"{rec['dataset']}-seed{int(rec['seed'])}-{rec.get('checkpoint_key')}.json"
    if not ck.is_file():
        return None
    ck = json.loads(ck.read_text())
    split = int(meta.get("split_seed", 0))
    try:
        if rec["dataset"] not in loaded:
            loaded[rec["dataset"]] = tabular_data.load(rec["dataset"], split).subsample("train", meta.get("train_rows"),
                                                                                      seed=split)
    except tabular_data.DataUnavailable:
        return None
    d = loaded[rec["dataset"]]
    rows = ft.select_rows(d.size("test"), meta.get("epoch_rows"), seed=split)

    def key(under: str) -> str:
        return E.trajectory_key(d, int(rec["seed"]), rows, settings=ck["settings"], config=ft.model_config(d),
                                digest=under)

    if key(rec["code_digest"]) != rec["key"]:
        return None
    return {**rec, "key": key(digest), "code_digest": digest}


def _rekey_cell(f: Path, cells: Path, digest: str) -> None:
    """Write the cell record ``f`` under the key today's code gives it (its parameters' digest replaced)."""
    from dobrushin.random.cells import cell_path
    from dobrushin.store.results import atomic_write_json as write

    rec = json.loads(f.read_text())
    rec["params"] = {**rec["params"], "code_digest": digest}
    write(cell_path(cells, rec["params"]), rec)


def _rekey_checkpoint(f: Path, cache: Path, digest: str) -> int:
    """Write the checkpoint record ``f`` and its weights under the key today's training code gives them (the
    key recomputed as :func:`dobrushin.models.ft_transformer.cache_key` computes it, with ``digest``); the
    number of files written."""
    from dobrushin.models.ft_transformer import CHECKPOINT_FORMAT
    from dobrushin.store.results import atomic_write_bytes, atomic_write_json, params_key

    rec = json.loads(f.read_text())
    key = params_key({"format": CHECKPOINT_FORMAT, "data": rec["data_checksum"], "config": rec["config"],
                      "train": rec["settings"], "seed": int(rec["seed"]), "code_digest": digest})
    stem = f"{rec['dataset']}-seed{int(rec['seed'])}-{key}"
    atomic_write_bytes(cache / f"{stem}.pt", f.with_suffix(".pt").read_bytes())
    atomic_write_json(cache / f"{stem}.json", {**rec, "key": key, "code_digest": digest})
    return 2


def _digest_of(f: Path, *within: str):
    """The ``code_digest`` a cell (under ``params``) or a checkpoint record holds, or None if unreadable."""
    try:
        d = json.loads(f.read_text())
        for k in within:
            d = d[k]
        return d.get("code_digest")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)


def main(argv) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    try:
        rec = seed(argv[0], argv[1])
    except ValueError as e:
        print(f"seed_reproduce: {e}", file=sys.stderr)
        return 2
    parts = ", ".join(f"{v} {k}" for k, v in rec["copied"].items())
    parts += "; re-keyed under attestation: " + ", ".join(f"{v} {k}" for k, v in rec["rekeyed_under_attestation"].items())
    other = ", ".join(f"{v} {k}" for k, v in rec["skipped_other_code"].items())
    print(f"seeded {argv[1]} from {argv[0]} (commit {rec['commit']}, code digest {str(rec['code_digest'])[:8]}): "
          f"{parts} (reused only where their keys match); left out, made by other code: {other}; wall times "
          "carried for: " + (", ".join(rec["chapters"]) or "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
