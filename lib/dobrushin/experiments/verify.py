"""``make verify``: re-measure a seeded random sample of the published results with the current code, compare
it with the published rows, and attest a changed code when every decision agrees.

The sample (seed :data:`SEED`): per family model, weights and resolution, :data:`PER_GROUP` inputs plus
:func:`focus_inputs`, with their rollout rows and one input's per-head rows; the random baseline at three
sizes; one FT-Transformer checkpoint on :data:`TABULAR_ROWS` rows; the trajectories,
ablation and atlases (:mod:`dobrushin.experiments.verify_products`).  It passes when every decision agrees
(except margins below :data:`FLOAT_ERROR`), numbers agree within :data:`KAPPA_TOL` and baseline counts are
identical; changed code is then attested (:func:`attest`; exit 1 when it cannot be).  ``--digest-only`` exits 0
when the published results are valid here, 3 when not.  The report goes to ``results/verify/report.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np
import pandas as pd

# tolerances on κ/slack and the float32 decision margin, defined with the attestations
from ..store.attest import FLOAT_ERROR, KAPPA_TOL
from .families import TRANSFORMER_INPUTS
from .comparison import (HEAD_KEY, HEAD_NUMBERS, PER_GROUP, ROLLOUT_KEY,
                         ROLLOUT_NUMBERS, SEED, Comparison, compare, focus_inputs, margin_of_rows,
                         published_inputs, sample_inputs, subset_inputs)

_START = [time.perf_counter()]  # reset by run()


def _say(c: "Comparison") -> None:
    """One progress line per comparison on stderr, with the seconds since :func:`run` started."""
    state = "ok" if c.passed else "FAILED"
    print(f"verify: {c.group}: {state}, {c.rows} rows ({time.perf_counter() - _START[0]:.0f} s)",
          file=sys.stderr, flush=True)


def verify_baseline(published_root: Path) -> Comparison:
    """Re-simulate the published Dirichlet(1) cells at three sizes (smallest, middle, largest n); counts must
    match exactly."""
    from ..random.cells import load_cell
    from ..random.ensembles import parse_ensemble, simulate

    c = Comparison("random baseline")
    cells = []
    for f in sorted((published_root / "baseline" / "cells").glob("*.json")):
        try:
            rec = json.loads(f.read_text())
        except ValueError:
            continue
        p = rec.get("params") or {}
        uniform = p.get("ensemble") and parse_ensemble(p["ensemble"]) == parse_ensemble("dirichlet(1)")
        if uniform and load_cell(f.parent, p) is not None:
            cells.append(rec)
    if not cells:
        c.error = "no published Dirichlet(1) cells"
        return c
    cells.sort(key=lambda r: r["params"]["n"])
    for rec in [cells[i] for i in sorted({0, len(cells) // 2, len(cells) - 1})]:
        p = rec["params"]
        now = simulate(p["ensemble"], p["n"], p["trials"], p["seed"], check=p["check"])
        c.rows += 1
        diff = {k: (rec["counts"][k], now[k]) for k in rec["counts"] if rec["counts"][k] != now.get(k)}
        if diff:
            c.decision_mismatches.append({"n": p["n"], "trials": p["trials"], "counts differ": diff})
    return c


def verify_family(published_root: Path, notebook: str, seed: int = SEED, per_group: int = PER_GROUP,
                  measure: Optional[Callable] = None) -> List[Comparison]:
    """Re-measure the sampled inputs of every model of a family notebook's published results;
    ``measure(model_id, inputs, config) -> table`` (default: a fresh, uncached measurement)."""
    from .pipeline import MeasureConfig
    from ..store.results import ResultStore

    d = published_root / notebook
    if not (d / "manifest.json").exists():
        return []
    store = ResultStore(published_root, notebook)  # the folder exists: nothing is written
    man = store.manifest()
    measure = measure or _measure_fresh
    out, inputs = [], None
    for slug, e in sorted(man["entries"].items()):
        table = store.read(e, "table") if e.get("file") else None
        if table is None:
            continue
        heads, rollout = store.read(e, "heads"), store.read(e, "rollout")
        for (model, weights), ids in sample_inputs(table, seed, per_group).items():
            c = Comparison(f"{notebook}: {model} ({weights})")
            try:
                if inputs is None:
                    inputs = published_inputs(published_root, notebook)
                rows = table[(table["model"] == model) & (table["weights"] == weights)]
                mine = lambda t: t[(t["model"] == model) & (t["weights"] == weights)]  # noqa: E731
                # one seeded input of the per-head table first (the heads are measured on a prefix)
                head_ids = sorted(set(mine(heads)["input_id"].astype(str))) if heads is not None else []
                head_pick = ([str(np.random.default_rng([seed, zlib.crc32(f"{model}|{weights}|heads".encode())])
                                  .choice(head_ids))] if head_ids else [])
                order = head_pick + [i for i in sorted(set(ids) | set(focus_inputs(rows))) if i not in head_pick]
                p = e.get("params") or {}
                fields = {k: p[k] for k in ("batch_size", "seed", "image_size", "max_length", "tol", "atol",
                                            "variants", "head_variants") if k in p}
                config = MeasureConfig(**fields, weights=(weights,), head_inputs=len(head_pick), progress=False,
                                       n_untrained=None)
                base = str(p.get("model_id") or model).split("@")[0]
                now = measure(base, subset_inputs(inputs, order), config)
                now = now if isinstance(now, dict) else {"table": now}
                t = now["table"]
                pub = rows[rows["input_id"].astype(str).isin(order)]
                c = compare(pub, t, c.group, margins=t["_margin"] if "_margin" in t.columns else None)
                if head_pick and now.get("heads") is not None:
                    hp = mine(heads)
                    c.absorb(compare(hp[hp["input_id"].astype(str).isin(head_pick)], now["heads"], c.group,
                                     key=HEAD_KEY, numbers=HEAD_NUMBERS), "heads")
                if rollout is not None and now.get("rollout") is not None:
                    rp = mine(rollout)
                    rp = rp[rp["input_id"].astype(str).isin(order)]
                    # a rollout's count of holding layers may differ only where a layer of it is a near-tie
                    near = (pub.assign(_m=margin_of_rows(pub).to_numpy()).astype({"input_id": str})
                            .groupby(["input_id", "variant"])["_m"].min())
                    pm = [near.get((str(i), str(v)), np.nan) for i, v in zip(rp["input_id"], rp["variant"])]
                    c.absorb(compare(rp, now["rollout"], c.group, key=ROLLOUT_KEY, numbers=ROLLOUT_NUMBERS,
                                     decision="layers_holding", published_margins=pd.Series(pm, index=rp.index)),
                             "rollout")
            except Exception as exc:  # noqa: BLE001 - a sample that cannot be re-measured fails, with why
                c.error = f"{type(exc).__name__}: {exc}"
            out.append(c)
            _say(c)
    return out


def _measure_fresh(model_id: str, inputs, config):
    """Measure into a temporary store (nothing read from or written to a cache); every row gets its decision
    margin (column ``_margin``) from the kernel's margin columns."""
    import tempfile

    from .pipeline import measure_model
    from ..store.results import ResultStore

    with tempfile.TemporaryDirectory() as tmp:
        run = measure_model(model_id, inputs, store=ResultStore(tmp, "verify"), config=config.replace(force=True))
    return {"table": run.table.assign(_margin=margin_of_rows(run.table).to_numpy()), "heads": run.heads,
            "rollout": run.rollout}


def run(published_root, seed: int = SEED, per_group: int = PER_GROUP) -> dict:
    """The report of every comparison (baseline, families, ablation, atlases, tabular, trajectories)."""
    from ..store.code import PRODUCTS, product_digest

    root = Path(published_root)
    at_start = {p: product_digest(p) for p in PRODUCTS}  # what is measured: attest() refuses code edited since
    t0 = _START[0] = time.perf_counter()
    comps = [verify_baseline(root)] if (root / "baseline").exists() else []
    for c in comps:
        _say(c)
    for nb in TRANSFORMER_INPUTS:
        comps += verify_family(root, nb, seed, per_group)
    from .verify_products import verify_ablation, verify_atlases, verify_epochs, verify_epochs_replay, verify_tabular

    for c in (verify_ablation(root) + verify_atlases(root) + verify_tabular(root, seed) + verify_epochs(root)
              + verify_epochs_replay(root)):
        _say(c)
        comps.append(c)
    meta = json.loads((root / "PUBLISHED.json").read_text()) if (root / "PUBLISHED.json").exists() else {}
    return {"published": str(root), "published_digest": meta.get("code_digest"), "current_digest": at_start["tables"],
            "digests": at_start,
            "seed": seed, "per_group": per_group, "kappa_tol": KAPPA_TOL, "float_error": FLOAT_ERROR,
            "passed": bool(comps) and all(c.passed for c in comps), "comparisons": [c.as_dict() for c in comps],
            "wall_s": round(time.perf_counter() - t0, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def print_report(rep: dict, out=sys.stdout) -> None:
    for c in rep["comparisons"]:
        mark = "ok  " if c["passed"] else "FAIL"
        extra = (f"error: {c['error']}" if c["error"] else
                 f"{c['rows']} rows, max |Δ| {c['max_abs_diff']:.2e}, {len(c['decision_mismatches'])} decision(s) "
                 f"differ, {c['number_failures']} beyond {KAPPA_TOL:g}, {c['missing']} missing")
        print(f"{mark} {c['group']}: {extra}", file=out)
        for e in c["excused"]:
            print(f"     excused (margin {e['margin']:.1e} < {FLOAT_ERROR:g}): {e}", file=out)
        for e in c["decision_mismatches"]:
            print(f"     decision differs: {e}", file=out)
    print(f"verify {'PASSED' if rep['passed'] else 'FAILED'}: published digest {rep['published_digest']}, "
          f"current {rep['current_digest']}", file=out)


def _published_versions(root: Path) -> Optional[dict]:
    """The package versions in the cache key of the first published model entry (None when none has one)."""
    for _, e in _published_entries(root):
        v = (e.get("params") or {}).get("versions")
        if isinstance(v, dict):
            return v
    return None


#: what each product (:data:`dobrushin.store.code.PRODUCTS`) is, in words
PRODUCT_NAMES = {"tables": "model tables", "cells": "random-baseline cells", "training": "FT-Transformer checkpoints",
                 "epochs": "FT-Transformer measured along training"}


def carry_over(root) -> dict:
    """``{product: {"published", "now", "how"}}``: the published and current code digests of each product in
    ``root`` and ``how``: ``"same"``, ``"attested"`` (:mod:`dobrushin.store.attest`) or ``"changed"``."""
    from ..store.attest import published_digests, resolve
    from ..store.code import PRODUCTS, product_digest

    out = {}
    for product, published in published_digests(root).items():
        if product not in PRODUCTS:
            continue
        now = product_digest(product)
        how = "same" if now == published else ("attested" if resolve(product, now, root) == published else "changed")
        out[product] = {"published": published, "now": now, "how": how}
    return out


def digest_status(root) -> "tuple[bool, str]":
    """``(valid, message)``: whether the published results in ``root`` are valid here: every product's code is
    the code that made it or attested to it (:func:`carry_over`), and the key package versions match."""
    from .environment import key_versions

    meta = json.loads((Path(root) / "PUBLISHED.json").read_text())
    co = carry_over(root)
    changed = [PRODUCT_NAMES[p] for p, v in co.items() if v["how"] == "changed"]
    if changed:
        return False, (f"=== WARNING: the code that makes the {' and the '.join(changed)} changed since the publication "
                       f"in {root} (commit {str(meta.get('commit', '?'))[:12]}) and no attestation carries it over: "
                       "they are not reused, so this build recomputes them (hours at paper scale); make verify "
                       "re-measures a sample and, when every decision agrees, writes the attestation to commit; "
                       "make reproduce publishes afresh")
    want, have = _published_versions(root), key_versions()
    diff = {} if want is None else {k: (want.get(k), have.get(k)) for k in sorted(set(want) | set(have))
                                    if want.get(k) != have.get(k)}
    if diff:
        return False, ("=== WARNING: the published results were made with other package versions ("
                       + ", ".join(f"{k} {a} here {b}" for k, (a, b) in diff.items())
                       + "): they are not reused, so this build recomputes the paper profile (hours); make install "
                       "pins the published versions (constraints.txt)")
    attested = [PRODUCT_NAMES[p] for p, v in co.items() if v["how"] == "attested"]
    line = (f"=== the published results ({root}, commit {str(meta.get('commit', '?'))[:12]}) are valid for the code "
            "here" + (f" (the {' and the '.join(attested)} by attestation)" if attested else "")
            + " and the installed package versions: each is reused where its parameters, weights and device match")
    notes = [n for n in (data_dir_note(root), hub_note(root)) if n]
    return True, "\n".join([line, *notes])


def _schema_gap(root) -> List[str]:
    """The non-derived schema columns a published model table lacks: a schema change no attestation carries."""
    import pyarrow.parquet as pq

    from ..store.results import DERIVED, SCHEMA

    for folder, e in _published_entries(root):
        if e.get("file") and (folder / e["file"]).is_file():
            have = set(pq.read_schema(folder / e["file"]).names)
            return [c for c in SCHEMA if c not in have and c not in DERIVED]
    return []


def attest(root, rep: dict) -> dict:
    """After a passing :func:`run`, attest each product whose code changed, with its evidence (re-measured
    tables, re-simulated cells, replayed trajectories when the training code is unchanged).  Returns
    ``{product: evidence or ""}`` for the changed products (``""``: not attested)."""
    from ..store import attest as A

    changed = {p: v for p, v in carry_over(root).items() if v["how"] == "changed"}
    edited = [p for p, d in (rep.get("digests") or {}).items() if p in changed and d != changed[p]["now"]]
    if not changed or not rep.get("passed") or edited:  # never attest code that was not the code measured
        return {p: "" for p in changed}
    groups = [c for c in rep["comparisons"] if c["passed"]]
    measured = [c for c in groups if c["group"] != "random baseline"]
    along = [c for c in groups if c["group"].startswith("tabular along training:")]
    replayed = [c for c in groups if c["group"].startswith("tabular along training, replayed")]
    evidence = {}
    for p, v in changed.items():
        if p == "tables" and measured and not _schema_gap(root):
            evidence[p] = (f"re-measured: {len(measured)} groups, {sum(c['rows'] for c in measured)} rows, every "
                           "decision agreed (near-ties below the float error excepted) and κ within tolerance")
        elif p == "cells" and any(c["group"] == "random baseline" for c in groups):
            evidence[p] = "re-simulated: the sampled baseline cells gave identical counts"
        elif p == "epochs" and replayed and along and "training" not in changed:
            evidence[p] = (f"retrained and re-measured: {replayed[0]['group'].split(': ', 1)[1]} trained again gave the "
                           f"published rows, and the early-stopping rows of {len(along)} trajectories re-measured from "
                           "their published checkpoints agreed (the training code unchanged)")
        else:
            evidence[p] = ""
    attested = {p: {"published": changed[p]["published"], "now": changed[p]["now"], "evidence": e}
                for p, e in evidence.items() if e}
    if attested:
        rep["attestation"] = str(A.write(root, attested, rep))
    return evidence


def data_dir_note(root) -> str:
    """A warning when ``DOBRUSHIN_DATA`` is not set: chapters that measured the canonical inputs are reused only
    if those download and match their checksums (else other inputs are measured again)."""
    import os

    from ..data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE

    if os.environ.get("DOBRUSHIN_DATA"):
        return ""
    canonical = [nb for nb in TRANSFORMER_INPUTS if {str(((e.get("params") or {}).get("inputs") or {}).get("source", ""))
                                                for _, e in _published_entries(root, nb)} & {IMAGENET_SAMPLES_SOURCE, SST2_SOURCE}]
    lines = []
    if canonical:
        lines.append(f"=== DOBRUSHIN_DATA is not set: the published results of {', '.join(sorted(canonical))} are "
                     "reused once their inputs (the 100 ImageNet sample photos from GitHub; SST-2's dev.tsv from "
                     "GLUE) are downloaded and match their checksums; where that fails, those "
                     "chapters measure other inputs again (hours at paper scale): set DOBRUSHIN_DATA to the "
                     "data folder (README: Data and model weights)")
    names = {str(e.get("dataset")) for _, e in _published_entries(root, "tabular")}
    tab = [label for key, label in _DOWNLOADED_TABULAR.items() if key in names]  # their display names
    if tab:
        lines.append(f"=== DOBRUSHIN_DATA is not set: the tabular chapter downloads {' and '.join(tab)}; where that "
                     "fails, it says that benchmark was not reproduced in this build although its results are "
                     "published: set DOBRUSHIN_DATA to the data folder (README: Data and model weights)")
    return "\n".join(lines)


#: the tabular benchmarks that come from a download (the breast-cancer extra ships with scikit-learn)
_DOWNLOADED_TABULAR = {"california": "California Housing (by scikit-learn's fetcher)",
                       "adult": "UCI Adult (from the UCI repository, checked against its SHA-256)"}


def _published_entries(root, notebook: str = "*"):
    """``(folder, entry)`` for each entry of ``root``'s manifest of ``notebook`` (default: of every manifest, in
    folder name order)."""
    for man in sorted(Path(root).glob(f"{notebook}/manifest.json")):
        for e in (json.loads(man.read_text()).get("entries") or {}).values():
            yield man.parent, e


def hub_note(root) -> str:
    """A line naming the models whose trained weights the published run lacked, and that ``make book HUB=1``
    (the hub is off by default) measures them, with a time estimate from the published wall times."""
    from ..data.availability import hub_offline

    missing = [e for nb in TRANSFORMER_INPUTS for _, e in _published_entries(root, nb)
               if ((e.get("provenance") or {}).get("pretrained") or {}).get("source") == "unavailable"]
    if not missing:
        return ""
    names = [str(e.get("model") or e.get("display")) for e in missing]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    hours = 2 * sum(float(e.get("wall_s") or 0) for e in missing) / 3600
    if hub_offline():
        return (f"=== the published run could not obtain the trained weights of {len(names)} model"
                f"{'s' if len(names) > 1 else ''} ({shown}): their chapters show untrained controls; make book HUB=1 "
                f"measures them with their trained weights where the hub answers (about {max(hours, 0.1):.1f} h on "
                "the published machine's 2 cores; a GPU is used when present)")
    return (f"=== HUB=1: where the hub answers, the {len(names)} model{'s' if len(names) > 1 else ''} whose trained "
            f"weights the published run could not obtain ({shown}) are measured with them, and their untrained "
            f"controls again, instead of reusing their published tables (about {max(hours, 0.1):.1f} h on 2 cores)")


def main(argv=None) -> int:
    from ..store import paths
    from ..store.results import atomic_write_json

    ap = argparse.ArgumentParser(prog="python -m dobrushin.experiments.verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("published", nargs="?", default=None, help="published folder (default published/paper)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--per-group", type=int, default=PER_GROUP)
    ap.add_argument("--report", default=None, help="where to write the JSON report (default results/verify/report.json)")
    ap.add_argument("--digest-only", action="store_true",
                    help="only say whether the published results are valid for the code here (made by it, or "
                         "attested to it): exit 0 when they are, 3 when they are not")
    a = ap.parse_args(argv)
    root = Path(a.published) if a.published else (paths.project_root() or Path.cwd()) / "published" / "paper"
    if not (root / "PUBLISHED.json").exists():
        print(f"=== no published results to verify: {root} holds no PUBLISHED.json (make reproduce publishes "
              "the paper profile there); nothing compared, exit 0 ===")
        return 0
    if a.digest_only:
        ok, line = digest_status(root)
        print(line)
        return 0 if ok else 3
    rep = run(root, a.seed, a.per_group)
    try:
        evidence = attest(root, rep)
    except ValueError as e:  # the publication carries the most attestations it may
        print(f"verify: {e}")
        evidence = {p: "" for p, v in carry_over(root).items() if v["how"] == "changed"}
    rep["carry_over"] = carry_over(root)
    print_report(rep)
    gap = _schema_gap(root) if "tables" in evidence else []
    for p, e in evidence.items():
        print(f"attested: the {PRODUCT_NAMES[p]} ({e}); commit {rep['attestation']}" if e else
              f"NOT attested: the published tables lack the schema's columns {', '.join(gap)}: make reproduce "
              "publishes afresh" if p == "tables" and gap else
              f"NOT attested: the code that makes the {PRODUCT_NAMES[p]} changed and this run cannot attest it (it "
              "failed, the code was edited while it ran, or the code changed beyond what it checks): make verify "
              "again, or make reproduce publishes afresh")
    atomic_write_json(Path(a.report) if a.report else paths.results_dir() / "verify" / "report.json", rep)
    return 0 if rep["passed"] and all(evidence.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
