"""The scorecard: one row per claim of the paper, judged from the summary table (``results/summary.csv``).
A claim's evidence is the best measured rows of the models that carry it (the paper's checkpoints, or "trained
here" for FT-Transformer; else proxy weights, marked; never an untrained control, named in the note). The
verdict is :func:`dobrushin.report.claims.judge` on the interval clustered by input (``wilson_verdict``: on the
Wilson interval); models of one claim are judged separately (:func:`dobrushin.report.claims.combine`), seeds of
one benchmark pooled, a range pooled over models judged on their pooled inputs with one row per model beneath
it (``parent``); the theorem's row is its proof plus the exact check on every sampled random matrix."""
from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd

from ..math.stats import add_sums, clustered, wilson
from ..models.configs import model_family
from .claims import CLAIMS, SCORECARD, TOO_WIDE, ScorecardRow, Verdict, combine, judge
from .summary_table import row_sums
from .names import VARIANT_TABLE_LABELS, and_join, display_name, pct, proxy_name, range_text

COLUMNS = ["key", "claim", "paper_value", "evidence", "weights", "measured", "verdict", "note",
           "k", "n", "fraction", "ci_low", "ci_high", "n_inputs", "cl_low", "cl_high", "wilson", "parent",
           "wilson_verdict"]
#: the columns the page shows, in its order: the verdict beside the claim and the measurement it rests on (a
#: table too wide for the page is split into parts one below the other, and the first part is what is read)
SHOWN = {"claim": "claim of the paper", "paper_value": "paper", "verdict": "verdict",
         "measured": "measured [95% CI clustered by input]", "evidence": "best evidence in this build",
         "weights": "weights", "n_inputs": "inputs", "n": "pairs"}
_RANK = {"original": 0, "trained here": 0, "unrecorded": 0, "proxy": 1}


def interval_text(k: int, n: int) -> str:
    """``"97.9% [92.7–99.4%]"`` for k of n (Wilson interval)."""
    p, lo, hi = wilson(k, n)
    return f"{pct(p)} [{range_text(lo, hi)}]"


def clustered_text(sums: dict) -> str:
    """``"97.9% [88.1–99.6%]"``: the fraction and its interval clustered by input."""
    p, lo, hi = clustered(sums)
    return f"{pct(p)} [{range_text(lo, hi)}]"


def _label(model: str) -> str:
    """The name of an evidence model in the scorecard (FT-Transformer: the benchmark, seeds pooled)."""
    name = str(model)
    if name.startswith("FT-Transformer/"):
        return re.sub(r" seed \d+$", "", name.split("/", 1)[1])
    return display_name(name)


def _evidence_label(model: str, weights: str) -> str:
    """:func:`_label`, and "(packaged proxy)" after a proxy whose display name does not say so already."""
    return proxy_name(_label(model), weights)


def _k(row) -> int:
    return int(round(float(row["measured"]) * int(row["n_pairs"]))) if int(row["n_pairs"]) else 0


def _reason(status: str, model: str) -> str:
    """``"not run: weights unavailable: X is not in the local cache ..."`` → the reason without the
    ``not run:`` prefix and without the model's own id."""
    r = re.sub(r"^not run:\s*", "", str(status))
    return " ".join(r.replace(f"{model} is ", "").replace(str(model), "this model").split())


def _variant_rows(summary: pd.DataFrame, variant: str) -> pd.Series:
    label = VARIANT_TABLE_LABELS[variant]
    return summary["variant"] == label


def _candidates(summary: pd.DataFrame, row: ScorecardRow) -> pd.DataFrame:
    """Rows of the summary table about the models of ``row`` (its claim, its families)."""
    if row.kind == "related":
        fam = summary["model"].map(model_family).isin(row.families)
        return summary[fam & (summary["claim"] == "(not in the paper)")]
    claim_text = CLAIMS[row.band].text
    fam = summary["model"].map(model_family).isin(row.families)
    if row.models:
        fam &= summary["model"].map(lambda m: any(f in str(m).lower() for f in row.models))
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
    label = VARIANT_TABLE_LABELS[variant]
    un = cands[cands["variant"] == f"untrained control ({label})"]
    un = un[un["n_pairs"] > 0]
    if not len(un):
        return ""
    sums = add_sums(*(row_sums(r) for _, r in un.iterrows()))
    models = ", ".join(dict.fromkeys(_label(m) for m in un["model"]))
    # clustered by input, as every interval of the scorecard's measured column
    return f"untrained control ({models}): {clustered_text(sums)} (clustered), not evidence"


def _result(row: ScorecardRow, **kw) -> dict:
    out = {"key": row.key, "claim": row.text,
           "paper_value": CLAIMS[row.band].paper_value if row.band else "—",
           "evidence": "—", "weights": "none", "measured": "—", "verdict": "", "note": "",
           "k": np.nan, "n": 0, "fraction": np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "n_inputs": 0, "cl_low": np.nan, "cl_high": np.nan, "wilson": "—", "parent": row.parent or "",
           "wilson_verdict": ""}
    out.update(kw)
    return out


def _law_note(law: Optional[pd.DataFrame], ns, claim) -> str:
    """The law chapter's column-averaged estimates at the sizes ``ns`` (those it has), and which of them lie
    outside the paper's range by their whole interval: a sentence for the baseline row's note, or ``""``."""
    if law is None or not len(law):
        return ""
    at = law[law["n"].isin([int(n) for n in ns])]
    if not len(at):
        return ""
    parts = [f"n = {int(r.n)} {pct(r.p, 2)} [{pct(r.ci_low, 2)[:-1]}–{pct(r.ci_high, 2)}]" for r in at.itertuples()]
    out = [f"at n = {int(r.n)} its interval lies wholly {'above' if r.ci_low > claim.high else 'below'} the "
           "paper's range" for r in at.itertuples() if r.ci_low > claim.high or r.ci_high < claim.low]
    return ("; the law chapter's column-averaged estimates of the same probability, far more precise: "
            + ", ".join(parts) + (" — " + "; ".join(out) if out else " — none lies wholly outside the paper's range")
            + " (the verdict, like every row's, is judged on the direct counts)")


def _baseline(summary: pd.DataFrame, row: ScorecardRow, law: Optional[pd.DataFrame] = None) -> dict:
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
    span = f"n = {b['n_tok'].min()}–{b['n_tok'].max()}"
    measured = (f"{interval_text(_k(lo_r), int(lo_r['n_pairs']))} to "
                f"{interval_text(_k(hi_r), int(hi_r['n_pairs']))}")
    verdict = combine(verdicts)
    off = [f"{v} at n = {n}" for n, v in zip(b["n_tok"], verdicts) if v != "reproduced"]
    rep = [n for n, v in zip(b["n_tok"], verdicts) if v == "reproduced"]
    if off and rep:  # the verdict states its sizes, the combined verdict's first (Verdict.of reads the first word)
        first = sorted(off, key=lambda t: not t.startswith(str(verdict)))
        verdict = f"{', '.join(first)}; reproduced at n = {', '.join(map(str, rep))}"
    note = (f"{len(b)} sizes ({', '.join(map(str, b['n_tok']))}), {int(b['n_pairs'].min()):,}–"
            f"{int(b['n_pairs'].max()):,} matrices each (independent draws: the clustered interval is Wilson's); "
            f"lowest at n = {lo_r['n_tok']}, highest at n = {hi_r['n_tok']}"
            + (f"; every size reproduces {claim.paper_value}" if not off else
               f"; {', '.join(off)}" + (", reproduced at the other sizes" if len(off) < len(b) else ""))
            + _law_note(law, b["n_tok"], claim))
    return _result(row, evidence=f"Dirichlet(1) random matrices, {span}", weights="random matrices",
                   measured=measured, wilson="as clustered (independent matrices)", verdict=verdict, note=note,
                   n=int(b["n_pairs"].sum()), n_inputs=int(b["n_pairs"].sum()))


def _theorem(row: ScorecardRow, check: Optional[dict]) -> dict:
    """The theorem's row: proved in the theory chapter; checked exactly on every sampled random matrix."""
    proof = "proof in the theory chapter (its theorem \"Equality characterisation\")"
    if not check or not int(check.get("checked", 0)):
        return _result(row, paper_value="theorem (proved)", evidence=proof, weights="—",
                       verdict="not run: no random matrices were checked in this build",
                       note="the exact check runs in the baseline chapter")
    checked, dis = int(check["checked"]), int(check["disagreements"])
    fm = int(check.get("float_mismatches", 0))
    verdict = "reproduced" if dis == 0 else "differs"
    note = (f"{checked:,} of {int(check['trials']):,} sampled matrices checked directly "
            f"({check.get('ensembles', '?')} ensembles, {check.get('sizes', '?')} sizes); {fm} float64 mismatch"
            f"{'' if fm == 1 else 'es'}, each settled in exact integer arithmetic; {dis} disagreement"
            f"{'' if dis == 1 else 's'} with the theorem remain")
    return _result(row, paper_value="theorem (proved)", evidence=f"{proof}; exact check on {checked:,} random matrices",
                   weights="random matrices", measured=f"{dis} disagreement{'' if dis == 1 else 's'} in {checked:,}",
                   wilson="—", verdict=verdict, note=note, n=checked, n_inputs=checked)


def _judge(groups: list, claim) -> tuple:
    """``groups``: ``[(label, sums)]`` → (clustered text, Wilson text, verdict, overlap-only labels, verdicts,
    the verdict the same rule would give on Wilson's interval over pairs)."""
    parts, wparts, verdicts, overlap_only, wverdicts = [], [], [], [], []
    for label, sums in groups:
        p, lo, hi = clustered(sums)
        v = judge(p, lo, hi, claim, sums["n"])
        verdicts.append(v)
        wverdicts.append(judge(*wilson(sums["k"], sums["n"]), claim, sums["n"]))
        if v == "consistent":
            overlap_only.append(f"{label} {pct(p)}")
        txt = f"{clustered_text(sums)}"
        w = interval_text(sums["k"], sums["n"]).split(" ", 1)[1]
        many = len(groups) > 1
        parts.append(f"{label}: {txt} ({sums['clusters']:,} inputs, {sums['n']:,} pairs)" if many else txt)
        wparts.append(f"{label}: {w}" if many else w)
    return "; ".join(parts), "; ".join(wparts), combine(verdicts), overlap_only, verdicts, combine(wverdicts)


def _seed_spread(ev: pd.DataFrame) -> str:
    """Per benchmark that pools several seeds, each seed's fraction: the pooled interval counts every seed's
    pairs and says nothing of how much the trained networks differ from one another, which this does."""
    per = {}
    for _, r in ev.iterrows():
        m = re.search(r" seed (\d+)$", str(r["model"]))
        if m and np.isfinite(float(r["measured"])):
            per.setdefault(_label(r["model"]), []).append((int(m.group(1)), float(r["measured"])))
    parts = [f"{lab} " + ", ".join(f"{pct(f)} (seed {sd})" for sd, f in sorted(v))
             for lab, v in per.items() if len(v) > 1]
    if not parts:
        return ""
    return ("per seed: " + "; ".join(parts) + " (each benchmark's interval pools its seeds' pairs, the same test "
            "rows once per seed: it does not include the spread between the trained networks)")


def _groups(ev: pd.DataFrame) -> dict:
    """Evidence rows grouped by their label (FT-Transformer seeds of one benchmark pooled): label → sums."""
    groups = {}
    for _, r in ev.iterrows():
        lab = _label(r["model"])
        groups[lab] = add_sums(groups[lab], row_sums(r)) if lab in groups else row_sums(r)
    return groups


def evidence(summary: pd.DataFrame, row: ScorecardRow):
    """``(cands, var, best evidence rows, not-run note)`` of a fraction row."""
    cands = _candidates(summary, row)
    var = cands[_variant_rows(cands, row.variant)]
    measured = var[(var["n_pairs"] > 0) & var["weights_source"].isin(list(_RANK))]
    if len(measured):
        best = min(_RANK[w] for w in measured["weights_source"])
        measured = measured[measured["weights_source"].map(_RANK) == best]
    return cands, var, measured, _not_run_note(var)


def _fraction(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    claim = CLAIMS[row.band]
    cands, var, ev, not_run = evidence(summary, row)
    if not len(ev):
        untrained = _untrained_note(cands, row.variant)
        if not_run:
            verdict = "not run: " + not_run[1].split(":")[0]
        else:
            verdict = "not run: no model of this claim in this build's notebooks"
        notes = [n for n in (not_run[0] if not_run else "", untrained) if n]
        return _result(row, verdict=verdict, note="; ".join(notes),
                       evidence="none (only an untrained control, not evidence)" if untrained else "—")
    groups = _groups(ev)
    glist = list(groups.items())
    text, wtext, verdict, overlap_only, _, wverdict = _judge(glist, claim)
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
        per = {}  # benchmark -> [(seed, epochs)]
        for (_, m), e in entries.items():
            if m in set(ev["model"]) and e.get("epochs"):
                per.setdefault(_label(m), []).append((e.get("seed"), int(e["epochs"])))
        ep = "; ".join(f"{lab} " + ", ".join(f"{n} (seed {sd})" if sd is not None else str(n) for sd, n in
                                             sorted(v, key=lambda t: (t[0] is None, t[0])))
                       for lab, v in per.items())
        notes.append("trained in this build" + (f" (epochs to early stopping: {ep})" if ep else ""))
        spread = _seed_spread(ev)
        if spread:
            notes.append(spread)
    if not_run and weights != "original":
        notes.append(f"not run: {not_run[0]}")
    if overlap_only:
        one = len(overlap_only) == 1
        notes.append(f"{and_join(overlap_only)} {'lies' if one else 'lie'} outside {claim.paper_value}, but "
                     f"{'its' if one else 'each'} clustered 95% interval reaches into it: consistent, not reproduced")
    if verdict.startswith("inconclusive"):
        notes.append(f"the clustered interval reaches more than {100 * TOO_WIDE:g} points beyond "
                     f"{claim.paper_value}: too wide to decide at this scale")
    total = add_sums(*groups.values())
    k, n = total["k"], total["n"]
    if len(glist) == 1:
        p, lo, hi = wilson(k, n)
        _, clo, chi = clustered(total)
    else:
        p = lo = hi = clo = chi = np.nan
    labels = {lab: lab for lab in groups}
    for _, r in ev.iterrows():
        labels[_label(r["model"])] = _evidence_label(r["model"], r["weights_source"])
    return _result(row, evidence=", ".join(labels[g] for g in groups), weights=weights, measured=text, wilson=wtext,
                   verdict=verdict, note="; ".join(notes), k=k, n=n, fraction=p, ci_low=lo, ci_high=hi,
                   n_inputs=total["clusters"], cl_low=clo, cl_high=chi, wilson_verdict=str(wverdict))


def _pooled(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    """A range the paper states once for several models: judged on the pooled inputs of the models measured
    (best evidence per model family), with the models that could not be run named."""
    claim = CLAIMS[row.band]
    children = [r for r in SCORECARD if r.parent == row.key]
    parts, missing, weights = [], [], set()
    for child in children:
        _, _, ev, _ = evidence(summary, child)
        if len(ev):
            parts.append((child, ev))
            weights |= set(ev["weights_source"])
        else:
            missing.append(child.short.replace(" with special tokens", ""))
    if not parts:
        return _result(row, verdict="not run: none of its models could be measured",
                       note=f"not measured: {and_join(missing)}" if missing else "")
    ev = pd.concat([e for _, e in parts])
    total = add_sums(*(row_sums(r) for _, r in ev.iterrows()))
    p, lo, hi = clustered(total)
    verdict = judge(p, lo, hi, claim, total["n"])
    w = sorted(weights, key=lambda x: _RANK[x])[-1]  # the weakest evidence pooled decides the label
    if w == "proxy":
        verdict += " (proxy weights)"
    names = [_evidence_label(m, s) for m, s in dict.fromkeys(zip(ev["model"], ev["weights_source"]))]
    notes = [f"pooled over {and_join(names)}; each model's row is beneath"
             + ("; a model measured at two resolutions enters once per resolution, each (input, resolution) a "
                "cluster" if ev["model"].astype(str).str.contains("@").any() else "")]
    if missing:
        notes.append(f"not measured in this build: {and_join(missing)} (the paper's range pools them too)")
    wp, wlo, whi = wilson(total["k"], total["n"])
    return _result(row, evidence=", ".join(names), weights=w, measured=clustered_text(total),
                   wilson=range_text(wlo, whi), verdict=verdict, note="; ".join(notes), k=total["k"], n=total["n"],
                   fraction=p, ci_low=wlo, ci_high=whi, n_inputs=total["clusters"], cl_low=lo, cl_high=hi,
                   wilson_verdict=str(judge(wp, wlo, whi, claim, total["n"])))


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
    n_inputs = int(pd.to_numeric(ev.get("n_inputs", pd.Series(0, index=ev.index)), errors="coerce").fillna(0).sum())
    return _result(row, evidence=", ".join(dict.fromkeys(_label(m) for m in ev["model"])), weights=weights,
                   measured="; ".join(parts), verdict=verdict, n=int(ev["n_pairs"].sum()), n_inputs=n_inputs,
                   note="failing pairs at relative depth ≥ ½ (a statement about every failure: no interval; "
                        "inputs and pairs count the failing ones)")


def _related(summary: pd.DataFrame, row: ScorecardRow, entries: dict) -> dict:
    cands = _candidates(summary, row)
    ok = cands[(cands["n_pairs"] > 0) & cands["weights_source"].isin(list(_RANK))]
    content = ok[ok["variant"] == "content"]
    if not len(content):
        return _result(row, verdict="no paper value", note="no such model measured in this build")
    parts, wparts, specials = [], [], []
    for m in dict.fromkeys(content["model"]):
        r = content[content["model"] == m].iloc[0]
        parts.append(f"{_label(m)}: {clustered_text(row_sums(r))}")
        wparts.append(f"{_label(m)}: {interval_text(_k(r), int(r['n_pairs'])).split(' ', 1)[1]}")
        s = ok[(ok["model"] == m) & (ok["variant"] == "with special tokens")]
        if len(s):
            specials.append(f"{_label(m)} {clustered_text(row_sums(s.iloc[0]))}")
    weights = ", ".join(sorted(set(content["weights_source"])))
    note = ("different models from RoBERTa and DistilBERT: not evidence for their rows"
            + (f"; with special tokens: {'; '.join(specials)}" if specials else ""))
    src = dict(zip(content["model"], content["weights_source"]))
    total = add_sums(*(row_sums(r) for _, r in content.drop_duplicates("model").iterrows()))
    return _result(row, evidence=", ".join(_evidence_label(m, src[m]) for m in dict.fromkeys(content["model"])),
                   weights=weights, wilson="; ".join(wparts), n=total["n"], n_inputs=total["clusters"],
                   measured="; ".join(parts), verdict="related evidence (no paper value)", note=note)


def _provenance(entries: dict, model: str) -> dict:
    for (_, m), e in (entries or {}).items():
        if m == model:
            prov = (e.get("provenance") or {}).get("pretrained")
            if prov is None:
                prov = ((e.get("runs") or {}).get("pretrained") or {}).get("provenance")
            return prov or {}
    return {}


def build_scorecard(summary: pd.DataFrame, entries: Optional[dict] = None,
                    theorem_check: Optional[dict] = None, law: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """The scorecard (:data:`COLUMNS`), one row per :data:`~dobrushin.report.claims.SCORECARD` entry,
    from the summary table (``results/summary.csv``), the manifest entries of
    :func:`dobrushin.report.results_loading.load_family_results` (for the proxies' provenance and training notes),
    the baseline's exact check of the theorem (:func:`dobrushin.report.results_loading.load_theorem_check`) and the
    law chapter's column-averaged estimates (:func:`dobrushin.report.results_loading.load_law_estimates`: shown in
    the baseline row's note beside the direct counts it is judged on)."""
    need = {"claim", "model", "variant", "measured", "n_pairs", "status", "weights_source"}
    missing = need - set(summary.columns)
    if missing:
        raise ValueError(f"the summary table lacks columns {sorted(missing)}")
    entries = entries or {}
    rows = []
    for row in SCORECARD:
        if row.kind == "theorem":
            rows.append(_theorem(row, theorem_check))
        elif row.kind == "baseline":
            rows.append(_baseline(summary, row, law))
        elif row.kind == "pooled":
            rows.append(_pooled(summary, row, entries))
        elif row.kind == "late":
            rows.append(_late(summary, row, entries))
        elif row.kind == "related":
            rows.append(_related(summary, row, entries))
        else:
            rows.append(_fraction(summary, row, entries))
    return pd.DataFrame(rows, columns=COLUMNS)


def top_rows(card: pd.DataFrame) -> pd.DataFrame:
    """The scorecard's rows of the claims themselves, without the per-model rows beneath a pooled claim
    (``parent``; empty, or NaN when read back from CSV)."""
    return card[card["parent"].fillna("") == ""] if "parent" in card.columns else card


def judged_rows(card: pd.DataFrame) -> pd.DataFrame:
    """:func:`top_rows` that carry a verdict (the related evidence left out): the claims the scorecard judges."""
    top = top_rows(card)
    return top[top["verdict"].map(Verdict.of) != Verdict.RELATED]


#: the introduction's column order: the verdict before the details, so a narrow page shows it first
COMPACT = ("claim", "paper_value", "verdict", "measured", "weights")


def shown(card: pd.DataFrame, columns=tuple(SHOWN)) -> pd.DataFrame:
    """The scorecard as the page shows it (``columns`` of :data:`SHOWN`, with its headers; the counts of
    inputs and pairs with thousands separators)."""
    out = card[list(columns)].copy()
    for c in ("n_inputs", "n"):
        if c in out.columns:
            out[c] = [f"{int(v):,}" if pd.notna(v) else "—" for v in out[c]]
    return out.rename(columns=SHOWN)


def notes(card: pd.DataFrame) -> list:
    """``[(claim, note)]`` for the rows that have a note (provenance, reasons, untrained controls)."""
    return [(r["claim"], r["note"]) for _, r in card.iterrows() if r["note"]]


#: the verdict kinds the introduction lists, in its order
KINDS = ("reproduced", "consistent", "differs", "inconclusive", "not run")


def verdict_groups(card: pd.DataFrame) -> dict:
    """What the introduction's answer box glues (its sentences are in ``book/intro.md``): ``judged``, how many
    claims the scorecard judges (the per-model rows beneath a pooled claim not counted again), and per verdict
    kind of :data:`KINDS` (``not run`` as ``not_run``) how many (``n_<kind>``) and which (``<kind>``: their short
    names, a claim judged on proxy weights naming the evidence; for ``not run`` the reasons too; "none")."""
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
    """``[(claim, verdict, verdict under Wilson)]``: the claims (their short names) whose verdict would change if
    the (input, layer) pairs were independent draws (the same rule on Wilson's interval over pairs instead of the
    clustered one)."""
    short = {r.key: r.short for r in SCORECARD}
    out = []
    for r in top_rows(card).itertuples():
        w = getattr(r, "wilson_verdict", "")
        if isinstance(w, str) and w and Verdict.of(w) is not Verdict.of(r.verdict):
            out.append((short[r.key], Verdict.of(r.verdict).value, Verdict.of(w).value))
    return out


__all__ = ["COLUMNS", "SHOWN", "KINDS", "build_scorecard", "interval_text", "judged_rows", "notes", "shown", "verdict_groups",
           "top_rows", "wilson_changes"]
