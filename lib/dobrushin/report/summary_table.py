"""Paper-vs-this-build summary table (``build_summary``): one row per claim × model × variant.  Each fraction has
Wilson's 95% interval over pairs (``ci_low``, ``ci_high``) and one clustered by input (``cl_low``, ``cl_high``), which
the verdict uses since one input's layers are not independent.  Unmeasured rows get ``not run: <reason>``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from ..math.stats import clustered, wilson
from .claims import CLAIMS, Claim, content_claim, judge, special_claim
from .names import VARIANT_TABLE_LABELS
from ..experiments.results_loading import baseline_at, load_family_results
from .tables import input_sums

COLUMNS = ["claim", "model", "variant", "paper_value", "measured", "ci_low", "ci_high", "n_pairs", "status", "detail",
           "weights_source", "n_inputs", "cl_low", "cl_high", "sum_kk", "sum_kn", "sum_nn"]


def independent_sums(k: int, n: int) -> dict:
    """The sums of ``n`` independent draws (each its own cluster), ``k`` of them hits: random matrices."""
    return {"clusters": int(n), "k": int(k), "n": int(n), "kk": int(k), "kn": int(k), "nn": int(n)}


def _baseline_detail(reference, n_tokens: pd.Series) -> str:
    """The random baseline at the pairs' token count or, for varying lengths, its mean over the pairs' counts."""
    counts = n_tokens.astype(int).value_counts()
    refs = {int(n): baseline_at(reference, float(n)) for n in counts.index}
    if not all(np.isfinite(v) for v in refs.values()):
        return ""
    if len(counts) == 1:
        n = int(counts.index[0])
        return f"random baseline at the token count, n = {n}: {100 * refs[n]:.1f}%"
    ref = float(sum(refs[n] * c for n, c in counts.items()) / counts.sum())
    return (f"random baseline averaged over the pairs' token counts (n = {int(counts.index.min())}–"
            f"{int(counts.index.max())}, median {float(n_tokens.median()):g}): {100 * ref:.1f}%")


def row_sums(row) -> dict:
    """The cluster sums recorded in a summary row (as ``input_sums`` returns them)."""
    n = int(row["n_pairs"])
    k = int(round(float(row["measured"]) * n)) if n else 0
    return {"clusters": int(row["n_inputs"]), "k": k, "n": n, "kk": int(row["sum_kk"]), "kn": int(row["sum_kn"]),
            "nn": int(row["sum_nn"])}


def pretrained_provenance(entry: dict) -> Optional[dict]:
    """A manifest entry's trained weights' provenance: its ``provenance["pretrained"]``, else its pretrained run's."""
    prov = (entry.get("provenance") or {}).get("pretrained")
    return prov if prov is not None else ((entry.get("runs") or {}).get("pretrained") or {}).get("provenance")


def weights_source(entry: Optional[dict]) -> str:
    """Where an entry's trained weights came from: ``"original"`` (the paper's checkpoint, or a package holding it bit
    for bit), ``"proxy"`` (a stand-in, not that checkpoint), ``"trained here"``, ``"none"`` or ``"unrecorded"``."""
    if not entry:
        return "none"
    prov = pretrained_provenance(entry)
    run = (entry.get("runs") or {}).get("pretrained") or {}
    failed = str(run.get("status", entry.get("status", "ok"))) != "ok"
    if prov is None:
        return "none" if failed else "unrecorded"
    source = str(prov.get("source", ""))
    if source in ("unavailable", "untrained") or failed:
        return "none"
    from ..models.provenance import original_from_package

    if original_from_package(prov):
        return "original"
    if prov.get("proxy_for") or source == "package":
        return "proxy"
    if source == "trained in this build":
        return "trained here"
    return "original"


def _row(claim: Optional[Claim], model, variant, sums: dict, detail="", source="") -> dict:
    """A measured row from its cluster ``sums``; ``source`` ``"untrained"``: an untrained control, judged against
    nothing."""
    n = sums["n"]
    p, lo, hi = wilson(sums["k"], n)
    _, clo, chi = clustered(sums)
    label = VARIANT_TABLE_LABELS.get(variant, variant)
    judged = None if source == "untrained" else claim
    return {
        "claim": claim.text if claim else "(not in the paper)",
        "model": model,
        "variant": f"untrained control ({label})" if source == "untrained" else label,
        "paper_value": judged.paper_value if judged else "—",
        "measured": p,
        "ci_low": lo,
        "ci_high": hi,
        "n_pairs": n,
        "status": judge(p, clo, chi, judged, n) if judged else "no paper value",
        "detail": detail,
        "weights_source": source,
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
        "variant": VARIANT_TABLE_LABELS.get(variant, variant),
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


def late_depth_row(df: pd.DataFrame, model: str) -> dict:
    """"All failures late in depth": share of failing pairs at relative depth ≥ ½ (no failure: trivially reproduced)."""
    claim = CLAIMS["late"]
    L = int(df["layer"].max()) + 1
    if L < 2:
        return _not_run(claim, model, "content", "a single layer has no depth")
    fails = df[~df["holds"]]
    rel = fails["layer"].to_numpy() / (L - 1)
    late = fails.assign(holds=rel >= 0.5)  # clustered by input: the failing pairs of one input
    detail = (f"share of failures in the second half of {L} layers; mean relative depth {rel.mean():.2f}" if len(rel)
              else f"no failing pair in {L} layers: trivially true")
    r = _row(claim, model, "content", input_sums(late), detail=detail)
    return {**r, "status": "reproduced" if (rel >= 0.5).all() else "differs"}


def build_summary(results_dir, baseline: Optional[pd.DataFrame] = None,
                  reference: Optional[pd.DataFrame] = None, profile: Optional[str] = None,
                  family: Optional[tuple] = None) -> pd.DataFrame:
    """One row per claim x model x variant (``COLUMNS``).  ``baseline``: ``(n, holds, trials)`` rows; ``reference``:
    the baseline's ``(n, p)`` grid for ``detail``; ``family``: ``(table, entries)`` if the caller has read them."""
    rows: list[dict] = []
    if baseline is not None and len(baseline):
        for _, b in baseline.sort_values("n").iterrows():
            rows.append(_row(CLAIMS["baseline"], f"random Dirichlet(1) rows, n = {int(b['n'])}", "all tokens",
                             independent_sums(b["holds"], b["trials"]), detail="rows i.i.d. uniform on the simplex",
                             source="random matrices"))
    else:
        rows.append(_not_run(CLAIMS["baseline"], "random Dirichlet(1) rows", "content", "baseline results missing"))

    table, entries = family if family is not None else load_family_results(results_dir, profile)
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
                detail = _baseline_detail(reference, part["n_tokens"])
                if e.get("inputs"):
                    detail = f"{detail}; inputs: {e['inputs']}" if detail else f"inputs: {e['inputs']}"
                rows.append(_row(claim, model, variant, input_sums(part), detail=detail, source=source))
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
                rows.append(_row(CLAIMS[cc] if cc else None, model, variant, input_sums(part), source="untrained",
                                 detail="seeded random initialisation of the same architecture"))
    return pd.DataFrame(rows, columns=COLUMNS)
