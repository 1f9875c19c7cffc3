"""``make verify``'s checks besides the family tables and the random baseline: an FT-Transformer checkpoint
re-measured, the trajectories along training (early-stopping rows re-measured, one replayed), the MPNet
ablation run again and the failure atlases recomputed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

from ..store.attest import FLOAT_ERROR, KAPPA_TOL
from .comparison import (SEED, TABULAR_ROWS, Comparison, compare, focus_inputs, margin_of_rows, published_inputs)


def verify_tabular(published_root: Path, seed: int = SEED, rows: int = TABULAR_ROWS) -> List[Comparison]:
    """One FT-Transformer checkpoint (seeded choice among those published) re-measured on ``rows`` of its
    published test rows; the checkpoint's SHA-256 and the data set's checksum must be the published ones."""
    from ..store.results import ResultStore

    d = published_root / "tabular"
    if not (d / "manifest.json").exists():
        return []
    store = ResultStore(published_root, "tabular")  # the folder exists: nothing is written
    left_out, tables_left_out = _left_out(published_root)  # what publish left out for size: not drawn

    def key(e):
        return ((e.get("provenance") or {}).get("pretrained") or {}).get("checkpoint_key")

    # left out for size: not drawn; missing for another reason: drawn, and fails
    ents = [(slug, e) for slug, e in sorted(store.manifest()["entries"].items())
            if e.get("file") and key(e) and slug not in tables_left_out
            and not any(n.endswith(f"-{key(e)}.pt") for n in left_out)]
    if not ents:
        c = Comparison("tabular: one FT-Transformer checkpoint")
        c.error = "no published FT-Transformer entry with a checkpoint"
        return [c]
    slug, e = ents[int(np.random.default_rng([seed, 1]).integers(len(ents)))]
    c = Comparison(f"tabular: {e.get('model', slug)} ({rows} test rows)")
    try:
        prov = e["provenance"]["pretrained"]
        ck = _checkpoint(published_root, prov["checkpoint_key"], prov.get("sha256") or "")
        table = store.read(e, "table")
        pub = table[table["weights"] == "pretrained"]
        ids = sorted(set(pub["input_id"].astype(str)))
        pick = sorted(set(np.random.default_rng([seed, 2]).choice(ids, size=min(rows, len(ids)), replace=False).tolist())
                      | set(focus_inputs(pub)))
        model, data = _checkpoint_model(e, ck)
        now = _measure(model, {"pretrained": dict(prov)}, data, _test_rows(data, pick),
                       str(e.get("model", "FT-Transformer")))
        c = compare(pub[pub["input_id"].astype(str).isin(pick)], now, c.group,
                    margins=now["_margin"] if "_margin" in now.columns else None)
    except Exception as exc:  # noqa: BLE001 - a checkpoint that cannot be re-measured fails, with why
        c.error = f"{type(exc).__name__}: {exc}"
    return [c]


def _left_out(published_root: Path):
    """``(checkpoint names, table slugs)`` publish left out for size (PUBLISHED.json)."""
    meta = published_root / "PUBLISHED.json"
    pub = json.loads(meta.read_text()) if meta.exists() else {}
    return set(pub.get("checkpoints_left_out") or ()), set(pub.get("tables_left_out") or ())


def _checkpoint(published_root: Path, key: str, sha256: Optional[str] = None, *,
                may_be_left_out: bool = False) -> Optional[Path]:
    """The published checkpoint ``*-<key>.pt``, FileNotFoundError when missing (None instead when
    ``may_be_left_out`` and publish left it out for size); with ``sha256``, ValueError when it is not the file's
    (an entry that records none passes ``""``, which no file matches, so it fails)."""
    from ..store.results import sha256_file

    ck = sorted((published_root / "checkpoints" / "tabular").glob(f"*-{key}.pt"))
    if not ck and may_be_left_out and any(n.endswith(f"-{key}.pt") for n in _left_out(published_root)[0]):
        return None
    if not ck:
        raise FileNotFoundError(f"checkpoint {key} is not in the published folder")
    if sha256 is not None and sha256_file(ck[0]) != sha256:
        raise ValueError(f"{ck[0].name} does not match the SHA-256 its entry records")
    return ck[0]


def _load_ft(checkpoint: Path):
    """``(model, record)``: the FT-Transformer of a published ``checkpoint`` (eval mode) and its ``.json``."""
    import torch

    from ..models import ft_transformer as ft

    rec = json.loads(checkpoint.with_suffix(".json").read_text())
    model = ft.rtdl.FTTransformer(**rec["config"])
    model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=True))
    return model.eval(), rec


def _checkpoint_model(entry: dict, checkpoint: Path):
    """``(model, data)``: the published ``checkpoint`` of ``entry`` and its data set (published split seed and
    checksum)."""
    from ..data import tabular_data

    model, rec = _load_ft(checkpoint)
    man = checkpoint.parents[2] / "tabular" / "manifest.json"  # <published>/checkpoints/tabular/<name>.pt
    split = int((json.loads(man.read_text()).get("parameters") or {}).get("split_seed", 0)) if man.exists() else 0
    data = tabular_data.load(entry.get("dataset") or rec["dataset"], split)
    want = ((entry.get("params") or {}).get("inputs") or {}).get("source", "")
    if data.checksum not in want:
        raise ValueError(f"the data set today ({data.checksum[:12]}) is not the published one ({want})")
    return model, data


def _test_rows(data, ids: Sequence[str]) -> np.ndarray:
    index = {f"test/{int(v)}": r for r, v in enumerate(data.index["test"])}
    return np.array([index[i] for i in ids], dtype=np.int64)


def _measure(model, provenance: dict, data, rows, model_name: str) -> pd.DataFrame:
    """The table of ``model`` measured on the test ``rows`` of ``data`` (a throwaway store)."""
    import tempfile

    from .tabular import measure_tabular
    from ..store.results import ResultStore

    with tempfile.TemporaryDirectory() as tmp:
        return measure_tabular(ResultStore(tmp, "verify"), "verify", models={"pretrained": model},
                               provenance=provenance, data=data, rows=rows, model_name=model_name).table


def _published_trajectories(published_root: Path):
    """``(manifest's epochs record, epochs.csv rows)`` of a published folder; None when it has none."""
    from .epochs import conform_epochs

    d = published_root / "tabular"
    man = json.loads((d / "manifest.json").read_text()).get("epochs") if (d / "manifest.json").exists() else None
    return (man, conform_epochs(pd.read_csv(d / man["file"]))) if man else None


def _trajectory_inputs(man: dict, dataset: str, loaded: dict):
    """``(data, rows)`` a trajectory of ``dataset`` was measured on; ``loaded`` caches each data set."""
    from ..data import tabular_data
    from ..models import ft_transformer as ft

    if dataset not in loaded:
        split = int(man["split_seed"])
        data = tabular_data.load(dataset, split).subsample("train", man["train_rows"], seed=split)
        loaded[dataset] = (data, ft.select_rows(data.size("test"), man["epoch_rows"], seed=split))
    return loaded[dataset]


def verify_epochs(published_root: Path) -> List[Comparison]:
    """Per trajectory: its early-stopping weights must be the published checkpoint (SHA-256), which re-measured
    must give that epoch's published counts per variant and layer, up to near-ties below the float error."""
    from ..store.results import sha256_file

    got = _published_trajectories(published_root)
    if got is None:
        return []
    man, rows_all = got
    out, loaded = [], {}
    for slug, tr in sorted(man["trajectories"].items()):
        mine = rows_all[rows_all.key == tr["key"]]
        es = int(tr["early_stopping_epoch"])
        c = Comparison(f"tabular along training: {slug}, early-stopping epoch {es}")
        try:
            ck = _checkpoint(published_root, tr["checkpoint_key"])
            if sha256_file(ck) != tr["early_stopping_sha256"]:
                raise ValueError("the trajectory's weights at its early-stopping epoch are not the published checkpoint")
            model, rec = _load_ft(ck)
            data, rows = _trajectory_inputs(man, rec["dataset"], loaded)
            now = _measure(model, {"pretrained": {"sha256": rec["sha256"]}}, data, rows, slug)
            now = now.assign(margin=margin_of_rows(now))
            pub = mine[mine.epoch == es]
            groups = ([(v, None, g) for v, g in now.groupby("variant")]
                      + [(v, int(layer), g) for (v, layer), g in now.groupby(["variant", "layer"])])
            for variant, layer, g in groups:  # every layer together, then each layer
                p = pub[(pub.variant == variant) & (pub.layer.isna() if layer is None else pub.layer == layer)]
                if len(p) != 1 or int(p.pairs.iloc[0]) != len(g):
                    c.missing += 1
                    continue
                c.rows += 1
                held, holds, near = int(p.holds.iloc[0]), int(g.holds.sum()), g[g.margin < FLOAT_ERROR]
                c.max_abs_diff = max(c.max_abs_diff, abs(held - holds) / len(g))
                what = {"variant": variant, "layer": layer, "published holds": held, "now": holds}
                if abs(held - holds) > len(near):
                    c.decision_mismatches.append(what)
                elif held != holds:
                    c.excused.append({**what, "margin": float(near.margin.min())})
        except Exception as exc:  # noqa: BLE001 - a trajectory that cannot be checked fails, with why
            c.error = f"{type(exc).__name__}: {exc}"
        out.append(c)
    return out


def verify_epochs_replay(published_root: Path) -> List[Comparison]:
    """One trajectory (California's first seed when there is one) retrained from initialisation to epoch 2,
    with its recorded ``torch_threads`` (default 1): counts per variant and layer and the validation metric
    must be the published rows of epochs 0–2."""
    import tempfile

    import torch

    from .epochs import trajectory

    got = _published_trajectories(published_root)
    if got is None:
        return []
    man, published = got
    slug, tr = sorted(man["trajectories"].items(), key=lambda kv: (kv[1]["dataset"] != "california", kv[0]))[0]
    c = Comparison(f"tabular along training, replayed: {slug}, epochs 0–2")
    try:
        rec = json.loads(_checkpoint(published_root, tr["checkpoint_key"]).with_suffix(".json").read_text())
        data, rows = _trajectory_inputs(man, rec["dataset"], {})
        threads = torch.get_num_threads()
        torch.set_num_threads(int(man.get("torch_threads", 1)))  # as it was trained (more threads: other sums)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                now = trajectory(data, int(tr["seed"]), rows, cache_root=Path(tmp),
                                 **{**rec["settings"], "max_epochs": 1}).rows
        finally:
            torch.set_num_threads(threads)
        pub = published[(published.key == tr["key"]) & (published.epoch <= 2)]
        key = ["epoch", "variant", "layer"]
        m = pub.assign(layer=pub.layer.fillna(-1)).merge(now.assign(layer=now.layer.fillna(-1)), on=key, how="left",
                                                         suffixes=("", "_now"))
        c.missing = int(m.holds_now.isna().sum())
        got = m[m.holds_now.notna()]
        c.rows = len(got)
        c.decision_mismatches = [{"epoch": int(r.epoch), "variant": r.variant, "layer": int(r.layer),
                                  "published holds": int(r.holds), "now": int(r.holds_now)}
                                 for r in got[got.holds != got.holds_now].itertuples()]
        diff = (got.val_value - got.val_value_now).abs()
        c.max_abs_diff = float(diff.max()) if len(diff) else 0.0
        c.number_failures = int((diff > KAPPA_TOL).sum())
    except Exception as exc:  # noqa: BLE001 - a trajectory that cannot be replayed fails, with why
        c.error = f"{type(exc).__name__}: {exc}"
    return [c]


def verify_ablation(published_root: Path) -> List[Comparison]:
    """The published MPNet ablation run again (trained weights): same counts, mean trace within KAPPA_TOL."""
    f = published_root / "language" / "mpnet-ablation.analysis.json"
    if not f.is_file():
        return []
    rec = json.loads(f.read_text())
    p, c = rec["params"], Comparison("language: MPNet distance-0 ablation (trained)")
    try:
        from ..models.loading import load_model
        from .ablation import check_ablation

        inputs = published_inputs(published_root, "language", p["inputs"])
        lm = load_model(p["model"], pretrained=True, seed=p["seed"], max_length=p["max_length"])
        r = check_ablation(rec["value"], lm, inputs.items(0, len(p["inputs"])), atol=KAPPA_TOL)
        c.rows, c.max_abs_diff, c.number_failures = r["rows"], r["max_abs_diff"], r["number_failures"]
        c.decision_mismatches = [{"layers whose count holding differs": r["mismatches"]}] if r["mismatches"] else []
    except Exception as exc:  # noqa: BLE001 - an ablation that cannot be run again fails, with why
        c.error = f"{type(exc).__name__}: {exc}"
    return [c]


def verify_atlases(published_root: Path) -> List[Comparison]:
    """Every published ``<chapter>/atlas-*.analysis.json`` recomputed: same verdict and pair per case, κ and
    margins within KAPPA_TOL (a tabular atlas whose checkpoint was left out is skipped)."""
    from ..models.loading import load_model
    from .atlas import check_atlas
    from .tabular import TabularInputs, TabularModel

    out = []
    for f in sorted(published_root.glob("*/atlas-*.analysis.json")):
        notebook, rec = f.parent.name, json.loads(f.read_text())
        cases = rec["value"]["cases"]
        model, ids = cases[0]["model"], list(dict.fromkeys(c["input_id"] for c in cases))
        man = json.loads((f.parent / "manifest.json").read_text())
        entry = next((e for e in man["entries"].values() if e.get("model") == model and e.get("file")), None)
        c = Comparison(f"{notebook}: failure atlas of {model}")
        try:
            if entry is None:
                raise ValueError(f"no published table of {model}")
            if notebook == "tabular":
                prov = entry["provenance"]["pretrained"]
                ck = _checkpoint(published_root, prov["checkpoint_key"], prov.get("sha256") or "", may_be_left_out=True)
                if ck is None:
                    continue  # left out for size (PUBLISHED.json): the chapter retrains it in seconds
                net, data = _checkpoint_model(entry, ck)
                inputs = TabularInputs(data, "test", _test_rows(data, ids))
                lm = TabularModel(net, inputs.preprocess, model, "pretrained", {})
            else:
                p, inputs = entry.get("params") or {}, published_inputs(published_root, notebook, ids)
                lm = load_model(model, pretrained=True, seed=int(p.get("seed", 0)), image_size=p.get("image_size"),
                                max_length=p.get("max_length"))
            r = check_atlas(rec["value"], lm, inputs, atol=KAPPA_TOL)
            c.rows, c.max_abs_diff, c.number_failures = r["rows"], r["max_abs_diff"], r["number_failures"]
            c.decision_mismatches = [{"cases whose verdict or pair differs": r["mismatches"]}] if r["mismatches"] else []
        except Exception as exc:  # noqa: BLE001 - an atlas that cannot be recomputed fails, with why
            c.error = f"{type(exc).__name__}: {exc}"
        out.append(c)
    return out
