"""The summary chapter: ``SummaryChapter`` reads the other notebooks' results (it measures nothing), writes
``results/summary.csv`` and ``results/scorecard.csv``, shows them, and glues what ``book/intro.md`` and
``book/reproducing.md`` paste (as HTML: cross-document ``{glue}`` does not paste Markdown)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from ..store import paths
from ..store.results import atomic_write_csv
from .names import and_join, benchmark, pct
from . import page as F
from . import scorecard as S
from . import reproducing_tables as RT
from ..experiments import results_loading as RL
from . import summary_figures as SF
from . import summary_table as ST
from .claims import CLAIMS, SCORECARD, TOO_WIDE, Verdict
from .display import Section, html_block
from .insight import show_downloads
from .plots import save_figure

NOTEBOOK = "summary"


class SummaryChapter:
    """Builds the tables at once; each section is then a method that returns what its cell shows."""

    def __init__(self, *, profile: str, results_dir=None, baseline_ns: Sequence[int] = (4, 8, 16, 64, 256),
                 root=None):
        self.t_start = time.perf_counter()
        self.profile = profile
        self.results = Path(results_dir) if results_dir else paths.results_dir()
        self.root = Path(root) if root is not None else (paths.project_root() or Path.cwd().parent)
        self.baseline_ns = [int(n) for n in baseline_ns]
        grid = RL.load_baseline(self.results)
        self.baseline = grid[grid["n"].isin(self.baseline_ns)] if grid is not None else None
        self.reference = RL.load_reference_grid(self.results)
        # read once; claims are judged without the second-resolution runs (518 px), which the notes show
        runs = RL.load_family_runs(self.results, profile)
        self.family_table, self.entries = runs.primary()
        every_table, self.every_entry = runs.every()
        self.table = ST.build_summary(self.results, self.baseline, self.reference, profile,
                                           family=(self.family_table, self.entries))
        self.theorem_check = RL.load_theorem_check(self.results)
        self.card = S.add_resolution_notes(S.build_scorecard(self.table, self.entries, self.theorem_check), every_table)
        # trained models measured (a benchmark's seeds one model; a second resolution one more)
        self.n_trained = (int(every_table.loc[every_table["weights"] == "pretrained", "model"].map(benchmark).nunique())
                          if len(every_table) else 0)
        atomic_write_csv(self.results / "summary.csv", self.table)
        atomic_write_csv(self.results / "scorecard.csv", self.card)

    # ------------------------------------------------------------------ the scorecard
    def scale_values(self) -> dict:
        """The introduction's scale: profile, trained models measured, results published, inputs (or the fallback's)."""
        entries = list(self.every_entry.values())
        other = fallback_inputs(self.every_entry)
        return {"scale_profile": self.profile, "scale_models": str(self.n_trained),
                "scale_reused": f"{sum(1 for e in entries if e.get('published_from'))} of {len(entries)}",
                "scale_inputs": "; ".join(f"{nb.replace('_', ' ')} chapter: {src}" for nb, src in other.items())
                or "the book's own (ImageNet sample photos, SST-2 dev sentences, the tabular benchmarks)"}

    def verification_failed(self) -> bool:
        """Were published results used although the last ``make verify`` failed?"""
        rep = self.results / "verify" / "report.json"
        used = any(e.get("published_from") for e in self.every_entry.values())
        return bool(used and rep.exists() and not json.loads(rep.read_text()).get("passed"))

    def scorecard(self):
        """The scorecard, notes and sources; published numbers that failed ``make verify`` flagged first."""
        out = Section()
        if self.verification_failed():
            out.append(F.banner("Published results failed verification",
                              "the last make verify re-measured a sample with the current code and found differences "
                              "(results/verify/report.json): the published numbers below are not current; run "
                              "make reproduce"))
        n = len(S.judged_rows(self.card))
        out.append(F.table(S.shown(self.card), name="tab-summary-scorecard", width="full",
                         caption=f"The scorecard: the paper's {n} claims against this build ({self.profile} "
                                 "profile). Measured: share of (input, layer) pairs where the equality condition "
                                 "holds, with its 95% interval clustered by input (the verdict uses it). Inputs, "
                                 "pairs: how many inputs and (input, layer) pairs the row rests on. Rows marked ↳ are "
                                 "the models of the pooled range above them."))
        changes = S.wilson_changes(self.card)
        out.md("**Under Wilson's interval**, which treats the pairs as independent draws, "
            + ("; ".join(f"the claim *{c}* would read “{w}” instead of “{v}”" for c, v, w in changes) if changes
               else "no verdict would change") + ".")
        notes = S.notes(self.card)
        if len(notes):
            out.append(F.table(notes, name="tab-summary-notes", width="full",
                               caption="Beside the verdicts (explained under How to read the scorecard)."))
        sources = pd.DataFrame(result_sources(self.results, self.every_entry), columns=["", "value"])
        out.append(F.table(sources, name="tab-summary-sources",
                         caption="Where the numbers of this build come from."))
        return out

    def rule(self):
        """Glue the rule's constants ``too_wide`` (points) and ``essentially_all`` (the threshold, %)."""
        return Section(values={"too_wide": f"{100 * TOO_WIDE:g}",
                               "essentially_all": f"{100 * CLAIMS['essentially_all'].low:g}"})

    # ------------------------------------------------------------------ glue for the introduction
    def for_introduction(self):
        """Glue the answer box's values, the scale in one line, the scorecard and the "Why" paragraph's numbers for
        book/intro.md, and write the two figures it shows (``results/figures/summary-{claims,why}.png``)."""
        out = Section(values=self.why())
        _save(SF.claims_figure(self.card, self.table), "claims", self.results)
        for k, v in S.verdict_groups(self.card).items():
            out.values[f"verdicts_{k}"] = v
        out.values.update(self.scale_values())
        top = S.top_rows(self.card)
        short = {r.key: r.short for r in SCORECARD}  # the claim's name; its words, inputs and pairs are in the summary
        card = RT.html_table(S.shown(top.assign(claim=top["key"].map(short)), S.COMPACT), width="full")
        html = colour_verdicts(card.html, S.COMPACT.index("verdict"))
        out.values["scorecard_html"] = html_block(f'<div class="full-width">{html}</div>', card.text)
        return out

    def why(self) -> dict:
        """The "Why" numbers (``why_*``); writes the figure, with the random baseline and the MPNet ablation's arrow,
        when the table records the attention's trace."""
        pts = SF.why_points(self.family_table if len(self.family_table) else pd.DataFrame(columns=["variant"]))
        abl = _ablation(self.results)
        arrow = None
        if abl is not None:
            (k0, n0, t0), (k1, n1, t1) = abl["original"], abl["ablated"]
            arrow = ((t0, k0 / n0), (t1, k1 / n1), f"MPNet, distance-0 bias ablated ({abl['sentences']} sentences)")
        band = None
        if self.baseline is not None and len(self.baseline):
            band = (float(self.baseline["p"].min()), float(self.baseline["p"].max()))
        trained = pts[pts["weights"] == "pretrained"]
        rho = trained[["trace", "fraction"]].corr("spearman").iloc[0, 1] if len(trained) > 2 else float("nan")
        glued = {"why_trained": len(trained),
                 "why_rho": f"{rho:+.2f}".replace("-", "−") if np.isfinite(rho) else "—",
                 "why_random": (f"{pct(band[0])}–{pct(band[1])}" if band else "—"),
                 "why_below": and_join(list(dict.fromkeys(trained.loc[trained["trace"] < 1, "label"]))) or "none"}
        for name, part in (("before", "original"), ("after", "ablated")):
            k, n, t = abl[part] if abl is not None else ("—", "—", float("nan"))
            glued.update({f"why_mpnet_{name}_k": k, "why_mpnet_n": n,
                          f"why_mpnet_{name}_trace": f"{t:.3g}" if np.isfinite(t) else "—"})
        glued["why_mpnet_bias"] = f"{abl['bias0']:.1f}".replace("-", "−") if abl is not None else "—"
        if len(pts):
            _save(SF.plot_why(pts, arrow, band), "why", self.results)
        return glued

    # ------------------------------------------------------------------ timings and reproducibility
    def timings(self):
        """Wall time per notebook, in book order, quick and paper profile; glued for reproducing.md."""
        timings, profiles = RL.load_timings(self.results), ("quick", "paper")
        pub = paths.published_dir()
        if pub is not None and (pub / "timings").exists():  # the wall times of the run that was published
            pt = RL.load_timings(pub)
            if len(pt):
                pt = pt.assign(profile=pt["profile"] + " (published run)")
                timings = pd.concat([timings, pt], ignore_index=True)
                profiles = (*profiles, *dict.fromkeys(pt["profile"]))
        return Section(values={"timings_table": RT.html_table(RT.timings_table(timings, RT.notebook_order(self.root),
                                                                               profiles))})

    def for_reproducing(self):
        """Glue the paper scale, the summary.csv columns and the benchmark for reproducing.md."""
        out = Section()
        out.values["summary_columns"] = html_block(", ".join(f"<code>{c}</code>" for c in ST.COLUMNS),
                                                   ", ".join(ST.COLUMNS))
        scale = RT.paper_scale(self.root / "params")
        for key in ("inputs", "seeds", "trials"):
            out.values[f"paper_{key}"] = "(not set)" if scale[key] is None else RT.grouped(scale[key])
        full, short = self.results / "bench" / "bench.csv", self.results / "bench-ci" / "bench.csv"
        bench_csv = full if full.exists() else short  # the full run when there is one, else CI's short profile
        if bench_csv.exists():
            bench = pd.read_csv(bench_csv)
            out.values["bench_table"] = RT.html_table(RT.bench_table(bench))
            day = time.strftime("%Y-%m-%d", time.gmtime(bench_csv.stat().st_mtime))
            what = "the full profile (make bench)" if bench_csv == full else "the short CI profile (make bench-ci)"
            out.values["bench_status"] = f"{what}, measured on {day}"
        else:
            out.values["bench_table"] = RT.html_table(pd.DataFrame({"benchmark": ["not run in this build"]}))
            out.values["bench_status"] = "not run in this build"
        return out

    def finish(self, parameters: Optional[dict] = None):
        """The download links of summary.csv and scorecard.csv, and the collapsed "how this chapter was run" block."""
        out = show_downloads(NOTEBOOK, self.results)
        wall = time.perf_counter() - self.t_start
        out.append(F.how_run(parameters or {"profile": self.profile}, timings={"summary notebook": round(wall, 1)}))
        return out


def _save(fig, name: str, results_dir):
    """Write ``fig`` as ``<results_dir>/figures/summary-<name>.{png,svg}`` (the introduction shows the PNG), closed."""
    import matplotlib.pyplot as plt

    save_figure(fig, NOTEBOOK, name, results_dir=results_dir)
    plt.close(fig)


def colour_verdicts(html: str, column: int) -> str:
    """``html`` with each body cell of ``column`` classed ``dobrushin-verdict-<name>`` by the verdict it starts with."""
    def row(m):
        cells = re.split(r"(?=<td[ >])", m.group(1))  # the row's opening, then one piece per cell
        if column + 1 < len(cells) and cells[column + 1].startswith("<td>"):
            v = Verdict.of(re.sub(r"<[^>]+>", "", cells[column + 1]))
            if v is not Verdict.RELATED:
                cells[column + 1] = f'<td class="dobrushin-verdict-{v.name.lower()}">' + cells[column + 1][4:]
        return "".join(cells) + "</tr>"

    return re.sub(r"(<tr>(?:(?!</tr>).)*?<td.*?)</tr>", row, html, flags=re.S)


def fallback_inputs(entries: dict) -> dict:
    """``{notebook: inputs}`` for photo or sentence chapters whose measured inputs are not the paper profile's."""
    from ..data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE
    from ..experiments.families import TRANSFORMER_INPUTS

    canonical = {"image": IMAGENET_SAMPLES_SOURCE, "text": SST2_SOURCE}  # per kind of input (the family registry's)
    out = {}
    for (nb, _), e in entries.items():
        text = str(e.get("inputs") or "")
        if nb in TRANSFORMER_INPUTS and text and canonical[TRANSFORMER_INPUTS[nb]] not in text:
            out.setdefault(nb, text.split(" (")[0])
    return out


def result_sources(results_dir, entries: dict) -> list:
    """Where this build's model results come from, as ``(what, value)`` rows (publication, attestations, seeding,
    checkpoint files left out, fresh results, the last ``make verify``); the count reused is the introduction's."""
    from ..experiments.verify import PRODUCT_NAMES, carry_over
    from ..store.attest import attestations

    rows = []
    reused = [e for e in entries.values() if e.get("published_from")]
    if reused:
        pub = Path(str(reused[0]["published_from"])).parent
        meta = json.loads((pub / "PUBLISHED.json").read_text()) if (pub / "PUBLISHED.json").exists() else {}
        rows.append(("the publication", f"commit {str(meta.get('commit', '?'))[:12]}, {str(meta.get('published', '?'))[:10]}, "
                                        f"code digest {str(meta.get('code_digest', '?'))[:12]}"))
        recs = {v["products"][p]["now"]: v for v in attestations(pub) for p in v["products"]}
        for p, v in carry_over(pub).items():
            rec = recs.get(v["now"]) if v["how"] == "attested" else None
            if v["how"] != "same":
                rows.append((f"{PRODUCT_NAMES[p]}: made by other code", f"digest {v['now'][:12]}: " + (
                    f"attested {rec['date'][:10]} ({rec['products'][p]['evidence']})" if rec else "not attested, not reused")))
        seed = meta.get("seeded_from")
        if isinstance(seed, dict):
            c = seed.get("copied") or {}
            rows.append(("seeded from (make reproduce SEED=1)", f"the run of {str(seed.get('published', '?'))[:10]} "
                         f"(commit {str(seed.get('commit', '?'))[:12]}): {c.get('baseline cells', 0):,} baseline cells, "
                         f"{c.get('FT-Transformer checkpoints', 0)} FT-Transformer checkpoints"))
        if meta.get("checkpoints_left_out"):
            rows.append(("checkpoints left out for size (retrained when needed)", ", ".join(meta["checkpoints_left_out"])))
    fresh = sorted(str(e.get("model") or "?") for e in entries.values()
                   if not e.get("published_from") and str(e.get("status", "ok")) == "ok")
    if fresh:
        rows.append(("model results computed in this build", ", ".join(fresh)))
    if reused or fresh:
        rows.append(("last make verify", _verify_value(Path(results_dir))))
    return rows


def _verify_value(results_dir: Path) -> str:
    """What the last ``make verify`` (``results/verify/report.json``) found."""
    from ..store.code import product_digest

    f = results_dir / "verify" / "report.json"
    if not f.exists():
        return "not run in this build (it re-measures a seeded sample of the published results: minutes)"
    rep = json.loads(f.read_text())
    comps = rep.get("comparisons") or []
    then, now = str(rep.get("current_digest")), product_digest("tables")
    return (f"{'passed' if rep.get('passed') else 'FAILED'}: {len(comps)} groups, "
            f"{sum(int(c.get('rows') or 0) for c in comps):,} rows re-measured, {str(rep.get('finished', '?'))[:10]}, "
            + (f"this code (digest {now[:12]})" if then == now else
               f"earlier code (digest {then[:12]}; this code is {now[:12]}: run make verify again)"))


def _ablation(results) -> "dict | None":
    """The MPNet ablation, trained, content tokens: ``{"original": (k, n, mean trace), "ablated": ..., "sentences",
    "bias0"}``; None when it was not run."""
    p = results / "language" / "mpnet-ablation.analysis.json"
    if not p.is_file():
        return None
    v = json.loads(p.read_text())["value"]["pretrained"]
    lay = pd.DataFrame(v["layers"])
    c = lay[lay["variant"] == "content"]
    out = {cond: (int(g["k"].sum()), int(g["n"].sum()), float(g["trace"].mean())) for cond, g in c.groupby("condition")}
    return {**out, "sentences": len(v["cosine"]), "bias0": float(np.mean(v["info"]["before"]))}
