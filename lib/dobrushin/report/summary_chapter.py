"""The summary chapter: ``SummaryChapter`` reads the other notebooks' results (it measures nothing), writes
``results/summary.csv`` and ``results/scorecard.csv``, shows them, and glues what ``book/intro.md`` and
``book/reproducing.md`` paste (as HTML: cross-document ``{glue}`` does not paste Markdown)."""
from __future__ import annotations

import platform
import re
import time
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from ..store import paths
from ..store.results import atomic_write_csv
from .names import and_join, ft_model_name, is_proxy
from . import page as F
from . import scorecard as S
from .resolution_notes import add_resolution_notes
from . import reproducing_tables as RT
from ..experiments import results_loading as RL
from . import summary_figures as SF
from . import summary_table as ST
from .claims import CLAIMS, SCORECARD, Verdict
from .summary_insight import SummaryInsights
from .display import Section, html_block

NOTEBOOK = "summary"


class SummaryChapter(SummaryInsights):
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
        # read once; claims are judged without the second-resolution runs (518 px), which scale and notes show
        runs = RL.load_family_runs(self.results, profile)
        self.family_table, self.entries = runs.primary()
        every_table, self.every_entry = runs.every()
        self.table = ST.build_summary(self.results, self.baseline, self.reference, profile,
                                           family=(self.family_table, self.entries))
        self.theorem_check = RL.load_theorem_check(self.results)
        self.card = add_resolution_notes(S.build_scorecard(self.table, self.entries, self.theorem_check), every_table)
        self.scale = ST.scale_table(every_table, self.every_entry)
        atomic_write_csv(self.results / "summary.csv", self.table)
        atomic_write_csv(self.results / "scorecard.csv", self.card)

    # ------------------------------------------------------------------ the scorecard
    def scale_values(self) -> dict:
        """The introduction's scale: profile, trained models measured, results published, inputs (or the fallback's)."""
        entries = list(self.every_entry.values())
        other = fallback_inputs(self.every_entry)
        return {"scale_profile": self.profile, "scale_models": str(int((self.scale["weights"] != "untrained only").sum())),
                "scale_reused": f"{sum(1 for e in entries if e.get('published_from'))} of {len(entries)}",
                "scale_inputs": "; ".join(f"{nb.replace('_', ' ')} chapter: {src}" for nb, src in other.items())
                or "the book's own (ImageNet sample photos, SST-2 dev sentences, the tabular benchmarks)"}

    def sources_table(self) -> pd.DataFrame:
        """Where this build's numbers come from, led by the models whose trained weights no profile can reach."""
        hub = ST.hub_only(self.entries)
        rows = [("trained weights not available here (hub needed)", ", ".join(hub))] if hub else []
        return pd.DataFrame(rows + result_sources(self.results, self.every_entry), columns=["", "value"])

    def verification_failed(self) -> bool:
        """Were published results used although the last ``make verify`` failed?"""
        import json

        rep = self.results / "verify" / "report.json"
        used = any(e.get("published_from") for e in self.every_entry.values())
        return bool(used and rep.exists() and not json.loads(rep.read_text()).get("passed"))

    def scorecard(self):
        """The scorecard, notes, scale and sources; published numbers that failed ``make verify`` flagged first."""
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
        scale = self.scale.assign(model=[_model_name(m) for m in self.scale["model"]])
        out.append(F.table(scale, name="tab-summary-scale", caption=f"What this build ({self.profile} profile) "
                           "measured: inputs, layers and resolution per model; seeds and epochs per trained network."))
        out.append(F.table(self.sources_table(), name="tab-summary-sources",
                         caption="Where the numbers of this build come from."))
        return out

    def rule(self):
        """Glue the rule's constants ``too_wide`` (points) and ``essentially_all`` (the threshold, %)."""
        from .claims import TOO_WIDE

        out = Section()
        out.values["too_wide"] = f"{100 * TOO_WIDE:g}"
        out.values["essentially_all"] = f"{100 * CLAIMS['essentially_all'].low:g}"
        return out

    # ------------------------------------------------------------------ figures
    def depth(self):
        """Fraction holding against relative depth, one panel per family."""
        out = Section()
        t = self.family_table
        if not len(t):
            return out.md("No family results were found: run the family notebooks first.")
        content = t[(t["variant"] == "content") & (t["weights"] == "pretrained")]
        src = self.table[self.table["variant"] == "content"].drop_duplicates("model").set_index("model")["weights_source"]
        named = [_model_name(m) + ("" if is_proxy(m) else f" ({src.get(m, 'unrecorded')})")
                 for m in dict.fromkeys(content["model"]) if not str(m).startswith("FT-Transformer/")]
        named += ["FT-Transformer (trained here)"] if content["model"].str.startswith("FT-Transformer/").any() else []
        out.append(F.figure(SF.plot_depth(t, self.reference), notebook=NOTEBOOK, name="depth", width="full",
                 caption="Fraction of inputs for which the equality condition holds on content tokens, against "
                         "relative depth $\\ell/(L-1)$, one panel per family. Blue: trained weights (line styles tell "
                         "a family's models apart; an FT-Transformer benchmark's seeds pooled); orange: the family's "
                         "untrained controls, each network once, pooled on the layer grid of its shallowest network; "
                         "dotted grey: the random baseline (Dirichlet(1) rows) at the family's median token count. "
                         f"Trained weights: {and_join(named) or 'none in this build'}.",
                 alt="Grid of line plots, one per model family, of the fraction holding against relative depth, "
                     "trained in blue, untrained in orange, random baseline dotted grey."))
        return out

    # ------------------------------------------------------------------ glue for the introduction
    def for_introduction(self):
        """Glue the answer box's values, the scale in one line and the scorecard for book/intro.md."""
        out = Section()
        for k, v in S.verdict_groups(self.card).items():
            out.values[f"verdicts_{k}"] = v
        out.values.update(self.scale_values())
        top = S.top_rows(self.card)
        short = {r.key: r.short for r in SCORECARD}  # the claim's name; its words, inputs and pairs are in the summary
        card = RT.html_table(S.shown(top.assign(claim=top["key"].map(short)), S.COMPACT), width="full")
        html = colour_verdicts(card.html, S.COMPACT.index("verdict"))
        out.values["scorecard_html"] = html_block(f'<div class="full-width">{html}</div>', card.text)
        return out

    # ------------------------------------------------------------------ timings and reproducibility
    def timings(self):
        """Wall time per notebook, in book order, quick and paper profile; glued for reproducing.md."""
        out = Section()
        timings, profiles = RL.load_timings(self.results), ("quick", "paper")
        pub = paths.published_dir()
        if pub is not None and (pub / "timings").exists():  # the wall times of the run that was published
            pt = RL.load_timings(pub)
            if len(pt):
                pt = pt.assign(profile=pt["profile"] + " (published run)")
                timings = pd.concat([timings, pt], ignore_index=True)
                profiles = (*profiles, *dict.fromkeys(pt["profile"]))
        tt = RT.timings_table(timings, RT.notebook_order(self.root), profiles,
                                   rendering=(NOTEBOOK, self.profile))
        out.values["timings_table"] = RT.html_table(tt)
        return out

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
        """The collapsed "how this chapter was run" block."""
        import matplotlib

        import dobrushin

        out = Section()
        wall = time.perf_counter() - self.t_start
        out.append(F.how_run(parameters or {"profile": self.profile},
                              versions={"dobrushin": dobrushin.__version__, "pandas": pd.__version__,
                                        "matplotlib": matplotlib.__version__, "python": platform.python_version()},
                              timings={"summary notebook": round(wall, 1)}))
        return out


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
    checkpoints left out, fresh results, the last ``make verify``)."""
    import json

    from ..experiments.verify import PRODUCT_NAMES, carry_over
    from ..store.attest import attestations

    rows = []
    reused = [e for e in entries.values() if e.get("published_from")]
    if reused:
        pub = Path(str(reused[0]["published_from"])).parent
        meta = json.loads((pub / "PUBLISHED.json").read_text()) if (pub / "PUBLISHED.json").exists() else {}
        rows += [("model results reused from the publication", f"{len(reused)} of {len(entries)}"),
                 ("the publication", f"commit {str(meta.get('commit', '?'))[:12]}, {str(meta.get('published', '?'))[:10]}, "
                                     f"code digest {str(meta.get('code_digest', '?'))[:12]}")]
        recs = {v["products"][p]["now"]: v for v in attestations(pub) for p in v["products"]}
        for p, v in carry_over(pub).items():
            rec = recs.get(v["now"]) if v["how"] == "attested" else None
            if v["how"] != "same":
                rows.append((f"{PRODUCT_NAMES[p]}: made by other code", f"digest {v['now'][:12]}: " + (
                    f"attested {rec['date'][:10]} ({rec['products'][p]['evidence']})" if rec else "not attested, not reused")))
        seed = meta.get("seeded_from")
        if isinstance(seed, dict):
            c = seed.get("copied") or {}
            ck = c.get("FT-Transformer checkpoints", c.get("FT-Transformer checkpoint files", 0) // 2)
            rows.append(("seeded from (make reproduce SEED=1)", f"the run of {str(seed.get('published', '?'))[:10]} "
                         f"(commit {str(seed.get('commit', '?'))[:12]}): {c.get('baseline cells', 0):,} baseline cells, "
                         f"{ck} FT-Transformer checkpoints"))
        left = [_checkpoint_name(re.sub(r"-[0-9a-f]{8,}\.pt$", "", str(c))) for c in meta.get("checkpoints_left_out") or []]
        if left:
            rows.append(("checkpoints left out for size (retrained when needed)", ", ".join(left)))
    fresh = sorted(str(e.get("model") or "?") for e in entries.values()
                   if not e.get("published_from") and str(e.get("status", "ok")) == "ok")
    if fresh:
        rows.append(("model results computed in this build", ", ".join(fresh)))
    if reused or fresh:
        rows.append(("last make verify", _verify_value(Path(results_dir))))
    return rows


def _verify_value(results_dir: Path) -> str:
    """What the last ``make verify`` (``results/verify/report.json``) found."""
    import json

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


def _checkpoint_name(stem: str) -> str:
    """``"breast_cancer-seed2"`` (a checkpoint's file name, its key taken off) → the model's name in the report."""
    data, _, seed = stem.partition("-seed")
    return ft_model_name(data, seed) if seed else stem


def _model_name(model: str) -> str:
    from .names import display_name

    return model if str(model).startswith(("random ", "FT-Transformer/")) else display_name(model)
