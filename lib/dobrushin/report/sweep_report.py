"""``python -m dobrushin report DIR`` prints the per-model table of a sweep folder and draws its all-models figure.

Reads what ``python -m dobrushin sweep ... --out DIR`` wrote (shards checked against their SHA-256; measures nothing;
Wilson 95%, pairs counted as independent) and writes ``DIR/models.csv`` and ``DIR/figures/sweep-all-models.{png,svg}``.
Exit status 1 when a shard is missing or damaged, 2 when DIR holds no sweep.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Tuple

import pandas as pd

from ..math.stats import wilson
from ..store.results import ResultStore, atomic_write_csv, empty
from .chapter import weights_kind
from .names import display_name, pct, range_text, weights_label

COLUMNS = ["model", "weights", "weights_source", "shards", "shards_missing", "inputs", "pairs",
           "content_k", "content_n", "content", "content_low", "content_high",
           "special_k", "special_n", "with_special", "with_special_low", "with_special_high"]


class ReportError(Exception):
    """DIR holds no sweep."""


def read_sweep(folder) -> Tuple[pd.DataFrame, dict, List[Tuple[str, dict, str]]]:
    """``(table, entries, missing)``: intact measured shards' rows in sweep order, the manifest's entries (status
    ``"damaged"`` where an ``"ok"`` shard's file is missing or damaged) and ``(key, entry, reason)`` per absent
    shard; raises ``ReportError`` without a manifest."""
    folder = Path(folder).expanduser().resolve()
    if not (folder / "manifest.json").is_file():
        raise ReportError(f"{folder}: no sweep here (no manifest.json; run python -m dobrushin sweep --out {folder})")
    store = ResultStore(folder.parent, folder.name)
    entries = dict(store.manifest().get("entries", {}))
    frames, missing = [], []
    for k, e in sorted(entries.items(), key=lambda kv: (kv[1].get("order", 0), kv[0])):
        st = e.get("status")
        if st == "ok":
            t = store.read(e)
            if t is None:
                missing.append((k, e, f"file {e.get('file')} is missing or damaged (SHA-256 differs); run the sweep again"))
                entries[k] = {**e, "status": "damaged"}  # a damaged file is not a measured shard
            else:
                frames.append(t)
        elif st != "empty":
            missing.append((k, e, e.get("error") or st or "no status"))
    return (pd.concat(frames, ignore_index=True) if frames else empty()), entries, missing


def model_table(table: pd.DataFrame, entries: dict) -> pd.DataFrame:
    """One row per model x weights in manifest order (``COLUMNS``), fractions with Wilson 95% bounds."""
    order = {}
    for e in sorted(entries.values(), key=lambda e: e.get("order", 0)):
        order.setdefault((e.get("model"), e.get("weights")), []).append(e)
    rows = []
    for (model, weights), es in order.items():
        t = table[(table["model"] == model) & (table["weights"] == weights)]
        kinds = {weights_kind(e.get("provenance")) for e in es if e.get("status") == "ok"} - {""}
        r = {"model": model, "weights": weights, "weights_source": ", ".join(sorted(kinds)),
             "shards": sum(e.get("status") == "ok" for e in es),
             "shards_missing": sum(e.get("status") not in ("ok", "empty") for e in es),
             "inputs": int(t["input_id"].nunique()), "pairs": int((t["variant"] == "content").sum())}
        for v, kk, nn in (("content", "content_k", "content_n"), ("with_special", "special_k", "special_n")):
            g = t[t["variant"] == v]
            k, n = int(g["holds"].sum()), len(g)
            p, lo, hi = wilson(k, n)
            r.update({kk: k, nn: n, v: p, f"{v}_low": lo, f"{v}_high": hi})
        rows.append(r)
    return pd.DataFrame(rows, columns=COLUMNS)


def _label(weights: str, source: str) -> str:
    """``"trained weights, original"`` or ``", proxy"`` (the weights' source, where known), ``"untrained control"``."""
    return weights_label(weights) + (f", {source}" if weights == "pretrained" and source else "")


def _interval(p, lo, hi) -> str:
    return "—" if p != p else f"{pct(p)} [{range_text(lo, hi)}]"


def print_table(mt: pd.DataFrame, out=None) -> None:
    w = max([len("model")] + [len(display_name(m)) for m in mt["model"]])
    print(f"{'model':<{w}}  {'weights':<25}  {'shards':>6}  {'inputs':>6}  {'pairs':>6}  "
          f"{'holds (content) [95% CI]':>28}  {'holds (with special) [95% CI]':>30}", file=out)
    for r in mt.itertuples():
        shards = f"{r.shards}/{r.shards + r.shards_missing}"
        print(f"{display_name(r.model):<{w}}  {_label(r.weights, r.weights_source):<25}  {shards:>6}  {r.inputs:>6}  {r.pairs:>6}  "
              f"{_interval(r.content, r.content_low, r.content_high):>28}  "
              f"{_interval(r.with_special, r.with_special_low, r.with_special_high):>30}", file=out)


def all_models_figure(mt: pd.DataFrame):
    """Fraction of pairs holding per model and weights: content (filled), with special (open), Wilson 95% bars."""
    import matplotlib.pyplot as plt

    from .style import color_for

    if mt.empty:
        raise ValueError("nothing to plot: the sweep has no measured shard")
    labels = [f"{display_name(m)} ({_label(w, src)})" for m, w, src in zip(mt["model"], mt["weights"], mt["weights_source"])]
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.45 * len(mt)), layout="constrained")
    y = list(range(len(mt)))[::-1]
    for v, off, fill in (("content", 0.12, True), ("with_special", -0.12, False)):
        for yi, r in zip(y, mt.itertuples()):
            p, lo, hi = getattr(r, v), getattr(r, f"{v}_low"), getattr(r, f"{v}_high")
            if p != p:
                continue
            c = color_for(r.weights)
            ax.errorbar(p, yi + off, xerr=[[p - lo], [hi - p]], fmt="o", color=c, capsize=3,
                        markerfacecolor=c if fill else "white")
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of input × layer pairs where the equality condition holds")
    from matplotlib.lines import Line2D

    grey = "#4D4D4D"  # the legend says what the marker means; the colour is the weights (row label)
    ax.legend([Line2D([], [], marker="o", ls="", color=grey),
               Line2D([], [], marker="o", ls="", color=grey, markerfacecolor="white")],
              ["content tokens", "with special tokens"], loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return fig


def report(folder, out=None, err=None) -> int:
    """Print the table, list missing shards, write ``models.csv`` and the figure; the exit status."""
    err = sys.stderr if err is None else err  # print's file=None is sys.stdout
    table, entries, missing = read_sweep(folder)
    folder = Path(folder).expanduser().resolve()
    mt = model_table(table, entries)
    print(f"sweep in {folder}: {len(mt)} model x weights setting(s), {len(table)} rows", file=out)
    print_table(mt, out)
    for k, e, why in missing:
        print(f"not measured: {k} ({e.get('model')}, {e.get('weights')}, inputs {e.get('start', '?')}-"
              f"{(e.get('stop') or 0) - 1}): {why}", file=err)
    atomic_write_csv(folder / "models.csv", mt)
    if not table.empty:
        from .plots import save_figure

        import matplotlib.pyplot as plt

        fig = all_models_figure(mt[mt["pairs"] > 0])
        paths = save_figure(fig, "sweep", "all-models", results_dir=folder)
        plt.close(fig)
        print(f"wrote {folder / 'models.csv'} and {', '.join(str(p) for p in paths)}", file=out)
    else:
        print(f"wrote {folder / 'models.csv'} (no measured shard: no figure)", file=out)
    return 1 if missing else 0


def add_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser("report", help="per-model table and all-models figure of a sweep folder",
                       description=__doc__.splitlines()[0].replace("``", ""))
    r.add_argument("folder", type=Path, metavar="DIR", help="the --out folder of python -m dobrushin sweep")
    r.set_defaults(func=main)
    return r


def main(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    try:
        return report(args.folder)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
