"""The scorecard (``build_scorecard``): one row per claim, judged from the summary table by ``claims.judge`` on the
input-clustered interval.  Evidence is the best measured rows of a claim's models (the paper's checkpoints or "trained
here", else proxy weights, marked; never an untrained control); models judged separately, a benchmark's seeds pooled."""
from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd

from ..math.stats import add_sums, clustered, wilson
from ..models.configs import RESOLUTION_SEP, base_id, model_family
from .claims import CLAIMS, SCORECARD, ScorecardRow, Verdict, combine, judge
from .summary_table import pretrained_provenance, row_sums
from .names import VARIANT_TABLE_LABELS, and_join, display_name, pct, proxy_name, range_text, short_label
from .tables import input_sums

#: the note columns beside a verdict, with their headers
NOTES = {"proxy_for": "proxy for (weights from)", "not_run": "not run here", "untrained": "untrained control",
         "per_seed": "per seed", "epochs": "epochs per seed", "second_resolution": "same inputs at a second resolution"}
COLUMNS = ["key", "claim", "paper_value", "evidence", "weights", "measured", "verdict", *NOTES,
           "k", "n", "fraction", "ci_low", "ci_high", "n_inputs", "cl_low", "cl_high", "wilson", "parent",
           "wilson_verdict"]
#: the columns the page shows, in order (the verdict early: a split table's first part is what is read)
SHOWN = {"claim": "claim of the paper", "paper_value": "paper", "verdict": "verdict",
         "measured": "measured [95% CI clustered by input]", "evidence": "best evidence in this build",
         "weights": "weights", "n_inputs": "inputs", "n": "pairs"}
_RANK = {"original": 0, "trained here": 0, "unrecorded": 0, "proxy": 1}


def estimate_text(p: float, lo: float, hi: float) -> str:
    """``"97.9% [92.7–99.4%]"``: a fraction and its interval (``wilson(k, n)`` or ``clustered(sums)``)."""
    return f"{pct(p)} [{range_text(lo, hi)}]"


def _evidence_label(model: str, weights: str) -> str:
    """The short label, marked "(packaged proxy)" unless the name already says proxy."""
    return proxy_name(short_label(model), weights)


def _reason(status: str) -> str:
    """``"not run: weights unavailable: not in the local cache ..."`` → ``"weights unavailable"``."""
    return re.sub(r"^not run:\s*", "", str(status)).split(":")[0].strip()


def _about(row: ScorecardRow, model: str) -> bool:
    """Is ``model`` one of ``row``'s models (its families, narrowed by its id fragments)?"""
    return model_family(model) in row.families and (not row.models or any(f in model.lower() for f in row.models))


def _candidates(summary: pd.DataFrame, row: ScorecardRow) -> pd.DataFrame:
    """Rows of the summary table about the models of ``row`` (its claim, its families)."""
    claim_text = CLAIMS[row.band].text if row.band else "(not in the paper)"
    return summary[summary["model"].map(lambda m: _about(row, m)) & (summary["claim"] == claim_text)]


def _best(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``rows`` with trained weights (``_RANK``) of the best rank among them."""
    rank = rows["weights_source"].map(_RANK)
    return rows[rank == rank.min()]


def _not_run(rows: pd.DataFrame) -> tuple:
    """``(the not-run checkpoints with their reason, the first reason)`` in ``rows`` (none: ``""``, "no model …")."""
    nr = rows[rows["status"].astype(str).str.startswith("not run")]
    if not len(nr):
        return "", "no model of this claim in this build's notebooks"
    text = ", ".join(dict.fromkeys(f"{m} ({_reason(s)})" for m, s in zip(nr["model"], nr["status"])))
    return text, _reason(nr["status"].iloc[0])


def _untrained(cands: pd.DataFrame, variant: str) -> str:
    """The untrained controls' fraction with its clustered interval (``""``: none measured)."""
    un = cands[(cands["variant"] == f"untrained control ({VARIANT_TABLE_LABELS[variant]})") & (cands["n_pairs"] > 0)]
    return estimate_text(*clustered(add_sums(*(row_sums(r) for _, r in un.iterrows())))) if len(un) else ""


def _result(row: ScorecardRow, **kw) -> dict:
    out = {"key": row.key, "claim": row.text,
           "paper_value": CLAIMS[row.band].paper_value if row.band else "—",
           "evidence": "—", "weights": "none", "measured": "—", "verdict": "", **dict.fromkeys(NOTES, ""),
           "k": np.nan, "n": 0, "fraction": np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "n_inputs": 0, "cl_low": np.nan, "cl_high": np.nan, "wilson": "—", "parent": row.parent or "",
           "wilson_verdict": ""}
    out.update(kw)
    return out


def _baseline(summary: pd.DataFrame, row: ScorecardRow) -> dict:
    claim = CLAIMS[row.band]
    b = summary[(summary["claim"] == claim.text) & (summary["n_pairs"] > 0)]
    if not len(b):
        st = summary.loc[summary["claim"] == claim.text, "status"]
        return _result(row, verdict=st.iloc[0] if len(st) else "not run: baseline results missing")
    ns = [int(re.search(r"n = (\d+)", m).group(1)) for m in b["model"]]
    b = b.assign(n_tok=ns).sort_values("n_tok")
    lo_r, hi_r = b.loc[b["measured"].idxmin()], b.loc[b["measured"].idxmax()]
    verdicts = [judge(float(r["measured"]), float(r["ci_low"]), float(r["ci_high"]), claim, int(r["n_pairs"]))
                for _, r in b.iterrows()]  # independent matrices: the clustered interval is Wilson's
    measured = " to ".join(estimate_text(r["measured"], r["ci_low"], r["ci_high"]) for r in (lo_r, hi_r))
    verdict = combine(verdicts)
    off = [f"{v} at n = {n}" for n, v in zip(b["n_tok"], verdicts) if v != "reproduced"]
    rep = [n for n, v in zip(b["n_tok"], verdicts) if v == "reproduced"]
    if off and rep:  # the verdict states its sizes, the combined verdict's first (Verdict.of reads the first word)
        first = sorted(off, key=lambda t: not t.startswith(str(verdict)))
        verdict = f"{', '.join(first)}; reproduced at n = {', '.join(map(str, rep))}"
    return _result(row, evidence=f"Dirichlet(1) random matrices, n = {b['n_tok'].min()}–{b['n_tok'].max()}",
                   weights="random matrices", measured=measured, wilson="as clustered (independent matrices)",
                   verdict=verdict, n=int(b["n_pairs"].sum()), n_inputs=int(b["n_pairs"].sum()))


def _theorem(row: ScorecardRow, check: Optional[dict]) -> dict:
    """The theorem's row: proved in the theory chapter; checked exactly on every sampled random matrix."""
    proof = "proof in the theory chapter (its theorem \"Equality characterisation\")"
    if not check or not int(check.get("checked", 0)):
        return _result(row, paper_value="theorem (proved)", evidence=proof, weights="—",
                       verdict="not run: no random matrices were checked in this build")
    checked, dis = int(check["checked"]), int(check["disagreements"])
    return _result(row, paper_value="theorem (proved)", evidence=f"{proof}; exact check on {checked:,} random matrices",
                   weights="random matrices", measured=f"{dis} disagreement{'' if dis == 1 else 's'} in {checked:,}",
                   wilson="—", verdict="reproduced" if dis == 0 else "differs", n=checked, n_inputs=checked)


def _judge(groups: list, claim) -> tuple:
    """``[(label, sums)]`` → (clustered text, Wilson text, verdict, the verdict on Wilson's interval over pairs)."""
    parts, wparts, verdicts, wverdicts = [], [], [], []
    many = len(groups) > 1
    for label, sums in groups:
        p, lo, hi = clustered(sums)
        wl = wilson(sums["k"], sums["n"])
        verdicts.append(judge(p, lo, hi, claim, sums["n"]))
        wverdicts.append(judge(*wl, claim, sums["n"]))
        w = estimate_text(*wl).split(" ", 1)[1]
        parts.append(f"{label}: {estimate_text(p, lo, hi)} ({sums['clusters']:,} inputs, {sums['n']:,} pairs)" if many
                     else estimate_text(p, lo, hi))
        wparts.append(f"{label}: {w}" if many else w)
    return "; ".join(parts), "; ".join(wparts), combine(verdicts), combine(wverdicts)


def _per_seed(ev: pd.DataFrame, entries: dict) -> dict:
    """``per_seed`` fractions and ``epochs`` to early stopping (the pooled interval hides how the seeds differ)."""
    seeds = sorted((int(m.group(1)), r) for _, r in ev.iterrows()
                   if (m := re.search(r" seed (\d+)$", str(r["model"]))))
    epochs = {m: e.get("epochs") for (_, m), e in entries.items()}
    return {"per_seed": ", ".join(pct(float(r["measured"])) for _, r in seeds),
            "epochs": ", ".join(str(epochs.get(r["model"]) or "—") for _, r in seeds)}


def _groups(ev: pd.DataFrame) -> dict:
    """Evidence rows grouped by their label (FT-Transformer seeds of one benchmark pooled): label → sums."""
    groups = {}
    for _, r in ev.iterrows():
        lab = short_label(r["model"])
        groups[lab] = add_sums(groups[lab], row_sums(r)) if lab in groups else row_sums(r)
    return groups


def evidence(summary: pd.DataFrame, row: ScorecardRow):
    """``(cands, best evidence rows, _not_run of its variant's rows)`` of a fraction row."""
    cands = _candidates(summary, row)
    var = cands[cands["variant"] == VARIANT_TABLE_LABELS[row.variant]]
    return cands, _best(var[var["n_pairs"] > 0]), _not_run(var)


def _fraction(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    claim = CLAIMS[row.band]
    cands, ev, (not_run, reason) = evidence(summary, row)
    if not len(ev):
        return _result(row, verdict=f"not run: {reason}", not_run=not_run, untrained=_untrained(cands, row.variant))
    groups = _groups(ev)
    text, wtext, verdict, wverdict = _judge(list(groups.items()), claim)
    weights = sorted(set(ev["weights_source"]))[0]
    extra = {"not_run": not_run if weights != "original" else ""}
    if weights == "proxy":
        verdict += " (proxy weights)"
        provs = [_provenance(entries, m) for m in dict.fromkeys(ev["model"])]
        extra["proxy_for"] = ", ".join(f"{p.get('proxy_for') or '—'} ({p.get('package', 'a package')} "
                                       f"{p.get('version', '')})".replace(" )", ")") for p in provs)
    if weights == "trained here":
        extra.update(_per_seed(ev, entries))
    total = add_sums(*groups.values())
    k, n = total["k"], total["n"]
    p = lo = hi = clo = chi = np.nan
    if len(groups) == 1:
        p, lo, hi = wilson(k, n)
        _, clo, chi = clustered(total)
    labels = {short_label(r["model"]): _evidence_label(r["model"], r["weights_source"]) for _, r in ev.iterrows()}
    return _result(row, evidence=", ".join(labels[g] for g in groups), weights=weights, measured=text, wilson=wtext,
                   verdict=verdict, k=k, n=n, fraction=p, ci_low=lo, ci_high=hi, n_inputs=total["clusters"],
                   cl_low=clo, cl_high=chi, wilson_verdict=str(wverdict), **extra)


def _pooled(summary: pd.DataFrame, row: ScorecardRow) -> dict:
    """A range stated once for several models: judged on the pooled inputs of those measured (best evidence each);
    the unmeasured ones named in ``not_run``."""
    claim = CLAIMS[row.band]
    parts, missing = [], []
    for child in (r for r in SCORECARD if r.parent == row.key):
        ev = evidence(summary, child)[1]
        if len(ev):
            parts.append(ev)
        else:
            missing.append(child.short.replace(" with special tokens", ""))
    if not parts:
        return _result(row, verdict="not run: none of its models could be measured", not_run=", ".join(missing))
    ev = pd.concat(parts)
    total = add_sums(*(row_sums(r) for _, r in ev.iterrows()))
    p, lo, hi = clustered(total)
    verdict = judge(p, lo, hi, claim, total["n"])
    w = sorted(set(ev["weights_source"]), key=lambda x: _RANK[x])[-1]  # the weakest evidence pooled decides the label
    if w == "proxy":
        verdict += " (proxy weights)"
    names = [_evidence_label(m, s) for m, s in dict.fromkeys(zip(ev["model"], ev["weights_source"]))]
    wp, wlo, whi = wilson(total["k"], total["n"])
    return _result(row, evidence=", ".join(names), weights=w, measured=estimate_text(p, lo, hi),
                   wilson=range_text(wlo, whi), verdict=verdict, not_run=", ".join(missing), k=total["k"],
                   n=total["n"], fraction=p, ci_low=wlo, ci_high=whi, n_inputs=total["clusters"], cl_low=lo,
                   cl_high=hi, wilson_verdict=str(judge(wp, wlo, whi, claim, total["n"])))


def _late(summary: pd.DataFrame, row: ScorecardRow) -> dict:
    cands = _candidates(summary, row)
    ev = _best(cands[~cands["status"].str.startswith("not run")])
    if not len(ev):
        not_run, reason = _not_run(cands)
        return _result(row, verdict=f"not run: {reason}", not_run=not_run)
    parts = [f"{short_label(r['model'])}: " + (f"{row_sums(r)['k']} of {int(r['n_pairs'])} failures in the second half"
                                          if int(r["n_pairs"]) else "no failing pair") for _, r in ev.iterrows()]
    verdict = "reproduced" if (ev["status"] == "reproduced").all() else "differs"
    weights = sorted(set(ev["weights_source"]))[0]
    if weights == "proxy":
        verdict += " (proxy weights)"
    return _result(row, evidence=", ".join(dict.fromkeys(short_label(m) for m in ev["model"])), weights=weights,
                   measured="; ".join(parts), verdict=verdict, n=int(ev["n_pairs"].sum()),
                   n_inputs=int(ev["n_inputs"].sum()))


def _related(summary: pd.DataFrame, row: ScorecardRow) -> dict:
    cands = _candidates(summary, row)
    ok = cands[(cands["n_pairs"] > 0) & cands["weights_source"].isin(list(_RANK))]
    content = ok[ok["variant"] == "content"].drop_duplicates("model")
    if not len(content):
        return _result(row, verdict="no paper value")
    parts = [f"{short_label(r['model'])}: {estimate_text(*clustered(row_sums(r)))}" for _, r in content.iterrows()]
    wparts = [f"{short_label(r['model'])}: [{range_text(r['ci_low'], r['ci_high'])}]" for _, r in content.iterrows()]
    total = add_sums(*(row_sums(r) for _, r in content.iterrows()))
    return _result(row, evidence=", ".join(_evidence_label(m, s) for m, s in zip(content["model"], content["weights_source"])),
                   weights=", ".join(sorted(set(content["weights_source"]))), wilson="; ".join(wparts), n=total["n"],
                   n_inputs=total["clusters"], measured="; ".join(parts), verdict="related evidence (no paper value)")


def _provenance(entries: dict, model: str) -> dict:
    entry = next((e for (_, m), e in entries.items() if m == model), None)
    return (pretrained_provenance(entry) if entry else None) or {}


def build_scorecard(summary: pd.DataFrame, entries: Optional[dict] = None,
                    theorem_check: Optional[dict] = None) -> pd.DataFrame:
    """The scorecard (``COLUMNS``), one row per ``SCORECARD`` entry, from the summary table, the manifest ``entries``
    (provenance, epochs) and the theorem check; raises if the summary lacks columns."""
    missing = {"claim", "model", "variant", "measured", "n_pairs", "status", "weights_source"} - set(summary.columns)
    if missing:
        raise ValueError(f"the summary table lacks columns {sorted(missing)}")
    kinds = {"baseline": _baseline, "pooled": _pooled, "late": _late, "related": _related}
    rows = [_theorem(row, theorem_check) if row.kind == "theorem" else
            _fraction(summary, row, entries or {}) if row.kind == "fraction" else
            kinds[row.kind](summary, row) for row in SCORECARD]
    return pd.DataFrame(rows, columns=COLUMNS)


def top_rows(card: pd.DataFrame) -> pd.DataFrame:
    """The claims' own rows, without per-model rows beneath a pooled claim (``parent`` empty, or NaN from CSV)."""
    return card[card["parent"].fillna("") == ""]


def judged_rows(card: pd.DataFrame) -> pd.DataFrame:
    """``top_rows`` that carry a verdict (the related evidence left out): the claims the scorecard judges."""
    top = top_rows(card)
    return top[top["verdict"].map(Verdict.of) != Verdict.RELATED]


#: the introduction's column order: the verdict before the details, so a narrow page shows it first
COMPACT = ("claim", "paper_value", "verdict", "measured", "weights")


def shown(card: pd.DataFrame, columns=tuple(SHOWN)) -> pd.DataFrame:
    """The scorecard as the page shows it: ``columns`` of ``SHOWN`` with its headers, counts with separators."""
    out = card[list(columns)].copy()
    for c in ("n_inputs", "n"):
        if c in out.columns:
            out[c] = [f"{int(v):,}" if pd.notna(v) else "—" for v in out[c]]
    return out.rename(columns=SHOWN)


def notes(card: pd.DataFrame) -> pd.DataFrame:
    """The rows' value columns (``NOTES``) beside their claims: only the rows, and the columns, that have one."""
    vals = card[list(NOTES)].fillna("").astype(str)
    keep = vals.ne("").any(axis=1)
    cols = [c for c in NOTES if vals.loc[keep, c].ne("").any()]
    return card.loc[keep, ["claim", *cols]].fillna("").rename(columns=NOTES)


#: the verdict kinds the introduction lists, in its order
KINDS = ("reproduced", "consistent", "differs", "inconclusive", "not run")


def verdict_groups(card: pd.DataFrame) -> dict:
    """The introduction's answer box values: ``judged`` and, per kind of ``KINDS`` (``not_run``), ``n_<kind>`` and
    ``<kind>`` (the claims' short names with proxy or not-run notes, or "none")."""
    judged = judged_rows(card)
    short = {r.key: r.short for r in SCORECARD}
    kinds = judged["verdict"].map(lambda v: Verdict.of(v).value)
    out = {"judged": str(len(judged))}
    for kind in KINDS:
        g = judged[kinds == kind]
        names = []
        for _, r in g.iterrows():
            ev = str(r.get("evidence") or "").replace("(", "").replace(")", "")
            proxy = f" (on {ev} only: proxy weights)" if "proxy" in r["verdict"] and kind != "not run" else ""
            reason = f" ({r['verdict'].split(': ', 1)[1]})" if kind == "not run" and ": " in r["verdict"] else ""
            names.append(short[r["key"]] + proxy + reason)
        key = kind.replace(" ", "_")
        out[f"n_{key}"], out[key] = str(len(g)), (and_join(names) if names else "none")
    return out


def wilson_changes(card: pd.DataFrame) -> list:
    """``[(claim, verdict, verdict under Wilson)]`` for claims whose verdict changes if pairs were independent."""
    short = {r.key: r.short for r in SCORECARD}
    out = []
    for r in top_rows(card).itertuples():
        w = r.wilson_verdict  # NaN, not "", in a card read from CSV
        if isinstance(w, str) and w and Verdict.of(w) is not Verdict.of(r.verdict):
            out.append((short[r.key], Verdict.of(r.verdict).value, Verdict.of(w).value))
    return out


def add_resolution_notes(card: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``card`` with ``second_resolution`` set from ``table``'s ``"<id>@518px"`` rows (shown beside the verdicts, never
    pooled into them): that run's fraction and clustered interval on the row's variant, trained weights
    (``"518 px: 100.0% [96.3–100.0%]"``)."""
    if not len(table) or "model" not in table.columns:
        return card
    card = card.copy()
    by_key = {r.key: r for r in SCORECARD}
    for model in sorted({str(m) for m in table["model"] if RESOLUTION_SEP in str(m)}):
        base = base_id(model)
        for i, crow in card.iterrows():
            r = by_key.get(crow["key"])
            if r is None or r.kind != "fraction" or not _about(r, base):
                continue
            part = table[(table["model"] == model) & (table["weights"] == "pretrained") & (table["variant"] == r.variant)]
            if len(part):
                text = f"{display_name(model).rsplit(', ', 1)[-1]}: {estimate_text(*clustered(input_sums(part)))}"
                card.at[i, "second_resolution"] = "; ".join(x for x in (crow["second_resolution"], text) if x)
    return card
