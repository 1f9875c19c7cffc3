"""Paper-vs-this-build summary: the paper's claims, the decision rule, and the summary table.

The rule (written once, here, and quoted in the book's summary chapter):

* a claim is a range ``[low, high]`` of the fraction of (input, layer) pairs where the equality
  condition holds: a stated range ("24–30%") is taken as is; a rounded percentage ("91%") as the
  interval of values that round to it (90.5–91.5%); "essentially every" as ``[0.99, 1]``;
* a measured fraction **reproduces** the claim when its Wilson 95% interval overlaps ``[low, high]``,
  and **differs** otherwise;
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

from ..math.stats import wilson
from ..random.ensembles import parse_ensemble
from ..store.results import ResultStore
from .claims import CLAIMS, Claim, content_claim, special_claim
from .names import family_label

COLUMNS = ["claim", "model", "variant", "paper_value", "measured", "ci_low", "ci_high", "n_pairs", "status", "detail"]
VARIANT_LABEL = {"content": "content", "with_special": "with special tokens"}
FAMILY_NOTEBOOKS = ("dinov2", "language", "supervised_vit", "tabular")


def decide(ci_low: float, ci_high: float, claim: Claim, n: int = 1) -> str:
    """``reproduced`` iff the Wilson interval [ci_low, ci_high] overlaps [claim.low, claim.high];
    ``not run: no measurement`` when there are no pairs (``n = 0``)."""
    if n <= 0 or not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "not run: no measurement"
    return "reproduced" if (ci_high >= claim.low and ci_low <= claim.high) else "differs"


def _row(claim: Optional[Claim], model, variant, k, n, detail="", weights="pretrained") -> dict:
    p, lo, hi = wilson(k, n)
    if weights == "untrained":
        variant_label = f"untrained control ({VARIANT_LABEL.get(variant, variant)})"
        claim_used = None
    else:
        variant_label = VARIANT_LABEL.get(variant, variant)
        claim_used = claim
    status = decide(lo, hi, claim_used, n) if claim_used else "no paper value"
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
    r = _row(claim, model, "content", k, len(rel),
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
        for variant, claim_key in (("content", cc), ("with_special", sc)):
            claim = CLAIMS[claim_key] if claim_key else None
            part = pre[pre["variant"] == variant] if len(pre) else pre
            if len(part):
                n_tok = float(part["n_tokens"].median())
                ref = baseline_at(reference, n_tok)
                detail = (f"random baseline at n = {n_tok:g}: {100 * ref:.1f}%" if np.isfinite(ref) else "")
                if e.get("inputs"):
                    detail = f"{detail}; inputs: {e['inputs']}" if detail else f"inputs: {e['inputs']}"
                rows.append(_row(claim, model, variant, int(part["holds"].sum()), len(part), detail=detail))
            else:
                reason = status if status != "ok" else "no pretrained results"
                rows.append(_not_run(claim, model, variant, reason))
        if cc == "deit" or cc == "vit":
            part = pre[pre["variant"] == "content"] if len(pre) else pre
            if len(part):
                rows.append(late_depth_row(part, model))
            else:
                rows.append(_not_run(CLAIMS["late"], model, "content", status if status != "ok" else "no results"))
        un = sub[sub["weights"] == "untrained"] if len(sub) else sub
        for variant in ("content", "with_special"):
            part = un[un["variant"] == variant] if len(un) else un
            if len(part):
                rows.append(_row(CLAIMS[cc] if cc else None, model, variant, int(part["holds"].sum()), len(part),
                                 weights="untrained", detail="seeded random initialisation of the same architecture"))
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out


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
def plot_depth_profiles(table: pd.DataFrame, baseline_grid: Optional[pd.DataFrame] = None):
    """Fraction holding vs relative depth, faceted by variant: one coloured line per trained model (with a
    dotted line of the same colour at the random baseline for its token count) and every untrained
    control as a thin grey line."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    t = table.assign(rel=relative_depth(table))
    variants = [v for v in ("content", "with_special") if v in set(t["variant"])]
    fig, axes = plt.subplots(1, len(variants), figsize=(6.5 * len(variants), 4.6), sharey=True, squeeze=False)
    trained = sorted(t.loc[t["weights"] == "pretrained", "model"].unique())
    cmap = plt.get_cmap("tab10")
    colours = {m: cmap(i % 10) for i, m in enumerate(trained)}
    handles = []
    for ax, variant in zip(axes[0], variants):
        sub = t[t["variant"] == variant]
        for model, g in sub[sub["weights"] == "untrained"].groupby("model"):
            prof = g.groupby("rel")["holds"].mean()
            ax.plot(prof.index, prof.values, "-", color="0.6", lw=0.8, alpha=0.6, zorder=1)
        for model, g in sub[sub["weights"] == "pretrained"].groupby("model"):
            prof = g.groupby("rel")["holds"].mean()
            ax.plot(prof.index, prof.values, "-", marker="o", ms=3.5, lw=2, color=colours[model], zorder=3)
            ref = baseline_at(baseline_grid, float(g["n_tokens"].median()))
            if np.isfinite(ref):
                ax.axhline(ref, color=colours[model], ls=":", lw=1.2, zorder=2)
        ax.set_title({"content": "content tokens", "with_special": "with special tokens"}[variant])
        ax.set_xlabel("relative depth  layer / (L − 1)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of inputs where equality holds")
    handles = [Line2D([], [], color=colours[m], lw=2, marker="o", ms=3.5, label=f"{m} (trained)") for m in trained]
    handles.append(Line2D([], [], color="0.6", lw=0.8, label="untrained controls (every architecture)"))
    handles.append(Line2D([], [], color="k", ls=":", lw=1.2, label="random baseline at the model's token count"))
    fig.legend(handles=handles, loc="upper center", ncol=2, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout()
    return fig


def plot_slack_by_family(table: pd.DataFrame):
    """Box plots of the slack per family (content tokens), trained vs untrained."""
    import matplotlib.pyplot as plt

    t = table[table["variant"] == "content"].copy()
    t["family"] = [family_label(m, nb) for m, nb in zip(t["model"], t.get("notebook", [""] * len(t)))]
    fams = sorted(t["family"].unique())
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(fams)), 4.2))
    pos, data, colours = [], [], []
    for i, fam in enumerate(fams):
        for j, (w, c) in enumerate((("pretrained", "#1f77b4"), ("untrained", "#ff7f0e"))):
            v = t[(t["family"] == fam) & (t["weights"] == w)]["slack"].to_numpy()
            if len(v):
                pos.append(i + (j - 0.5) * 0.35)
                data.append(v)
                colours.append(c)
    bp = ax.boxplot(data, positions=pos, widths=0.3, patch_artist=True, showfliers=False)
    for patch, c in zip(bp["boxes"], colours):
        patch.set_facecolor(c)
        patch.set_alpha(0.6)
    ax.set_xticks(range(len(fams)), fams)
    ax.set_ylabel("slack  ½(1+κ(A)) − κ(½(I+A))")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="#1f77b4", alpha=0.6, label="trained"), Patch(color="#ff7f0e", alpha=0.6, label="untrained control")])
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def headlines(table: pd.DataFrame) -> dict:
    """Short strings for the introduction: counts by status and the main measured fractions."""
    st = table["status"].str.replace(r"^not run:.*", "not run", regex=True)
    out = {
        "n_rows": str(len(table)),
        "n_reproduced": str(int((st == "reproduced").sum())),
        "n_differs": str(int((st == "differs").sum())),
        "n_not_run": str(int((st == "not run").sum())),
        "n_no_paper_value": str(int((st == "no paper value").sum())),
    }
    pre = table[(table["variant"].isin(["content", "with special tokens"])) & table["measured"].notna()]

    def frac(model_frag, variant):
        r = pre[pre["model"].str.lower().str.contains(model_frag, regex=False) & (pre["variant"] == variant)
                & ~pre["claim"].str.contains("late in depth")]
        if not len(r):
            return "not measured"
        k = (r["measured"] * r["n_pairs"]).sum()
        n = r["n_pairs"].sum()
        p, lo, hi = wilson(int(round(k)), int(n))
        return f"{100 * p:.1f}% (95% CI {100 * lo:.1f}–{100 * hi:.1f}%, {int(n)} pairs)"

    out["minilm_content"] = frac("minilm", "content")
    out["minilm_special"] = frac("minilm", "with special tokens")
    out["tabular_california"] = frac("ft-transformer/california", "content")
    out["tabular_adult"] = frac("ft-transformer/adult", "content")
    base = table[table["claim"] == CLAIMS["baseline"].text]
    base = base[base["measured"].notna()]
    out["baseline_range"] = (f"{100 * base['measured'].min():.1f}–{100 * base['measured'].max():.1f}%"
                             f" (n = {', '.join(m.split('= ')[-1] for m in base['model'])})") if len(base) else "not measured"
    untrained = table[table["variant"].str.startswith("untrained") & table["measured"].notna()]
    out["untrained_content"] = (f"{100 * untrained[untrained['variant'].str.contains('content')]['measured'].median():.1f}%"
                                if len(untrained) else "not measured")
    return out


# --- reproducibility tables -----------------------------------------------------------------------
def parameter_table(notebooks_dir, params_dir) -> pd.DataFrame:
    """Every notebook parameter: name, default (from the ``parameters`` cell), comment, and the value
    each profile sets (from ``params/<profile>/<notebook>.yml``)."""
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
                "quick": _short(profiles["quick"].get(name, "(default)")),
                "paper": _short(profiles["paper"].get(name, "(default)")),
                "meaning": comment,
            })
    return pd.DataFrame(rows)


def _short(v, width: int = 60) -> str:
    s = v if isinstance(v, str) else json.dumps(v)
    return s if len(s) <= width else s[: width - 1] + "…"


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
    }
    return pd.DataFrame([{"column": c, "dtype": t, "meaning": meaning[c]} for c, t in SCHEMA.items()])


class Text:
    """A string that displays without quotes (for ``myst_nb.glue`` of prose values)."""

    def __init__(self, s: str):
        self.s = str(s)

    def __repr__(self) -> str:
        return self.s

    def _repr_html_(self) -> str:  # pasted inline as plain text, not as a code literal
        import html

        return f'<span class="pasted-text">{html.escape(self.s)}</span>'



def bench_table(bench: pd.DataFrame) -> pd.DataFrame:
    """The benchmark in a few rows: the exact kernel's speed and agreement against SciPy per size and
    matrix source, peak memory of a large batch, and the cost of attention capture."""
    rows = []
    k = bench[bench["method"] == "kernel f64 (batch)"]
    s = bench[bench["method"] == "scipy+test"].set_index(["n", "source"])
    for _, r in k.iterrows():
        sc = s.loc[(r["n"], r["source"])] if (r["n"], r["source"]) in s.index else None
        rows.append({
            "measurement": f"κ + equality test, n = {int(r['n'])}, {r['source']}",
            "this kernel": f"{r['matrices_per_s']:,.0f} matrices/s",
            "scipy pdist + test": f"{sc['matrices_per_s']:,.0f} matrices/s" if sc is not None else "—",
            "ratio": f"{r['speedup_vs_scipy']:.1f}× faster",
            "identical answers": "yes" if bool(r["agree_exact"]) and float(r["holds_agree"]) == 1.0 else "NO",
        })
    for _, r in bench[bench["method"].str.startswith("memory:")].iterrows():
        rows.append({
            "measurement": f"peak memory, {r['method'][8:]}, {int(r['matrices'])} matrices, n = {int(r['n'])}",
            "this kernel": f"+{r['peak_mem_mb']:.0f} MB",
            "scipy pdist + test": "—",
            "ratio": f"{r['mem_ratio']:.2f}× the batch ({r['batch_mb']:.0f} MB)",
            "identical answers": "",
        })
    for _, r in bench[bench["method"] == "capture + test overhead"].iterrows():
        rows.append({
            "measurement": f"attention capture + test vs eager forward, {r['source']} ({r['note']})",
            "this kernel": "", "scipy pdist + test": "", "ratio": f"+{r['overhead_pct']:.1f}%", "identical answers": "",
        })
    return pd.DataFrame(rows)
