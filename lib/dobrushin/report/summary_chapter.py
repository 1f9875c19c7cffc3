"""The summary chapter as calls: :class:`SummaryChapter` reads the result files of the other notebooks
(it measures nothing), builds the per-model table (``results/summary.csv``) and the scorecard
(``results/scorecard.csv``), shows them, and glues what the Markdown chapters paste:

* into the introduction (``book/intro.md``): ``verdicts_*`` (how many claims and which per verdict, in the
  answer box), ``scorecard_html`` (the claims' rows of the scorecard, verdicts coloured) and ``scale_short`` (the
  scale in one line, with how many results are the published ones);
* into the reproducibility chapter (``book/reproducing.md``): ``timings_table`` (quick and paper
  profile per notebook), ``schema_table``, ``summary_columns``, ``paper_inputs`` / ``paper_seeds`` /
  ``paper_trials`` and ``bench_table`` / ``bench_status``.

Cross-document ``{glue}`` in myst-nb pastes HTML, images and plain text (not Markdown), so what the
Markdown chapters paste is HTML (:func:`dobrushin.report.reproducing_tables.html_table`); on this chapter's own
page tables are :func:`dobrushin.report.page.table` and figures :func:`dobrushin.report.page.figure`.
"""
from __future__ import annotations

import platform
import re
import time
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from ..store import paths
from ..store.results import atomic_write_csv
from . import names
from .names import and_join, ft_model_name, is_proxy
from . import page as F
from .display import html_block, plain_text
from . import scorecard as S
from .resolution_notes import add_resolution_notes
from . import reproducing_tables as RT
from . import results_loading as RL
from . import summary_figures as SF
from . import summary_table as ST
from .claims import CLAIMS, SCORECARD, Verdict
from .summary_insight import SummaryInsights

NOTEBOOK = "summary"


def _display(*objs):
    from IPython.display import display

    display(*objs)


def _md(text: str):
    from IPython.display import Markdown

    _display(Markdown(text))


def _glue(key: str, value):
    from myst_nb import glue

    glue(key, value, display=False)


class SummaryChapter(SummaryInsights):
    """``SummaryChapter(profile=..., results_dir=..., baseline_ns=...)`` builds the tables at once;
    then one call per section: :meth:`scorecard`, :meth:`sources`, :meth:`rule`, :meth:`for_introduction`,
    :meth:`claims_figure`, :meth:`why`, :meth:`depth`, :meth:`timings`, :meth:`for_reproducing`,
    :meth:`downloads`, :meth:`finish`."""

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
        # the family results read once: the claims are judged without the runs at a second resolution
        # (518 px), which the scale line and the scorecard's notes show
        runs = RL.load_family_runs(self.results, profile)
        self.family_table, self.entries = runs.primary()
        every_table, self.every_entry = runs.every()
        self.table = ST.build_summary(self.results, self.baseline, self.reference, profile,
                                           family=(self.family_table, self.entries))
        self.theorem_check = RL.load_theorem_check(self.results)
        self.card = add_resolution_notes(S.build_scorecard(self.table, self.entries, self.theorem_check,
                                                           RL.load_law_estimates(self.results)),
                                         every_table)
        self.scale = ST.scale_table(every_table, self.every_entry)
        atomic_write_csv(self.results / "summary.csv", self.table)
        atomic_write_csv(self.results / "scorecard.csv", self.card)

    # ------------------------------------------------------------------ the scorecard
    def scale_text(self) -> str:
        """The scale line, what no profile can change (rows needing hub weights) and where the numbers come
        from (published results: digest, commit; the last ``make verify``), as one paragraph."""
        return " ".join(x for x in [ST.scale_line(self.scale, self.profile), self.scale_after()] if x)

    def scale_after(self) -> str:
        """What follows the scale: the rows no profile can change and where the numbers come from."""
        out = []
        hub = ST.hub_only(self.entries)
        if hub:
            out.append(f"No profile of this build can change the rows of {len(hub)} model"
                       f"{'s' if len(hub) != 1 else ''} whose trained weights are not available here "
                       f"(they need the hub or a local cache): {', '.join(hub)}.")
        out.append(published_text(self.root, self.results, self.every_entry))
        return " ".join(x for x in out if x)

    def scale_short(self) -> str:
        """The scale in one line, and how many of the model results are the published ones (the introduction's:
        which code made them is in this chapter)."""
        entries = list(self.every_entry.values())
        reused = sum(1 for e in entries if e.get("published_from"))
        other = fallback_inputs(self.every_entry)
        return (ST.scale_line(self.scale, self.profile) + (
            f" {reused} of the {len(entries)} model results are the published paper-scale ones, reused as made by "
            "make reproduce." if reused else "")
            + (" A fallback build: " + "; ".join(f"the {nb.replace('_', ' ')} chapter measured {src}"
                                                 for nb, src in other.items())
               + ", not the paper profile's inputs." if other else ""))

    def scale_markdown(self) -> str:
        """**Scale.**, a line per measured model, then :meth:`scale_after` (Markdown)."""
        items = ST.scale_items(self.scale)
        if not items:
            return f"**Scale.** {_md_text(self.scale_text())}"
        lines = "\n".join(f"- {_md_text(x)}" for x in items)
        return f"**Scale.** This build ({self.profile} profile) measured:\n\n{lines}\n\n{_md_text(self.scale_after())}"

    def verification_failed(self) -> bool:
        """Were published results used although the last ``make verify`` failed?"""
        import json

        rep = self.results / "verify" / "report.json"
        used = any(e.get("published_from") for e in self.every_entry.values())
        return bool(used and rep.exists() and not json.loads(rep.read_text()).get("passed"))

    def scorecard(self):
        """The scale line, then the scorecard, numbered and captioned.
        Published numbers that failed the last ``make verify`` are flagged above everything."""
        if self.verification_failed():
            _display(F.banner("Published results failed verification",
                              "the last make verify re-measured a sample with the current code and found differences "
                              "(results/verify/report.json): the published numbers below are not current; run "
                              "make reproduce"))
        _md(self.scale_markdown())
        n = len(S.judged_rows(self.card))
        _display(F.table(S.shown(self.card), name="tab-summary-scorecard", width="full",
                         caption=f"The scorecard: the paper's {n} claims against this build ({self.profile} "
                                 "profile). Measured: share of (input, layer) pairs where the equality condition "
                                 "holds, with its 95% interval clustered by input (the verdict uses it). Inputs, "
                                 "pairs: how many inputs and (input, layer) pairs the row rests on. Rows marked ↳ are "
                                 "the models of the pooled range above them."))
        changes = S.wilson_changes(self.card)
        _md("**Under Wilson's interval**, which treats the pairs as independent draws, "
            + ("; ".join(f"the claim *{c}* would read “{w}” instead of “{v}”" for c, v, w in changes) if changes
               else "no verdict would change") + ".")
        rows = S.notes(self.card)
        if rows:
            _display(F.details("Notes on the rows: provenance of the weights, reasons, untrained controls",
                               "\n".join(f"- **{c}**: {_md_text(n)}" for c, n in rows)))

    def rule(self):
        """Glue the decision rule's constants for the notebook's hand-written rule: ``too_wide`` (points) and
        ``essentially_all`` (the "essentially every" threshold, %)."""
        from .claims import TOO_WIDE

        _glue("too_wide", plain_text(f"{100 * TOO_WIDE:g}"))
        _glue("essentially_all", plain_text(f"{100 * CLAIMS['essentially_all'].low:g}"))

    # ------------------------------------------------------------------ figures
    def depth(self):
        """Fraction holding against relative depth, one panel per family."""
        t = self.family_table
        if not len(t):
            _md("No family results were found: run the family notebooks first.")
            return
        content = t[t["variant"] == "content"]
        fams = SF.family_order(SF.families_of(content))
        trained = [SF.summary_family(m) for m in content.loc[content["weights"] == "pretrained", "model"]]
        trained = [f for f in fams if f in set(trained)]
        src = self.table[self.table["variant"] == "content"].drop_duplicates("model").set_index("model")["weights_source"]
        named = [_model_name(m) + ("" if is_proxy(m) else f" ({src.get(m, 'unrecorded')})")
                 for m in dict.fromkeys(content.loc[content["weights"] == "pretrained", "model"])
                 if not str(m).startswith("FT-Transformer/")]
        ft = any(str(m).startswith("FT-Transformer/") for m in content.loc[content["weights"] == "pretrained", "model"])
        if ft:
            named.append("FT-Transformer (trained here)")
        fig = SF.plot_depth_profiles(t, self.reference)
        twins = _once_clause(content)
        F.figure(fig, notebook=NOTEBOOK, name="depth", width="full",
                 caption=("Fraction of inputs for which the equality condition holds on content tokens, against "
                          "relative depth $\\ell/(L-1)$, one panel per family. "
                          + ("Blue: trained weights; orange" if trained else "Orange") + ": the family's "
                          "untrained controls (same architectures, seeded random initialisation), pooled into one "
                          "line on the layer grid of the family's shallowest network (a deeper network's layers "
                          "share its points)" + twins + "; dotted grey: the random baseline "
                          "(Dirichlet(1) rows) at the family's median token count"
                          + ("; line styles tell trained models of one family apart" if trained else "")
                          + (" (the seeds of one FT-Transformer benchmark pooled into one line)" if ft else "") + ". "
                          + (f"Trained weights: {and_join(named)}; " if trained else
                             "No trained weights were measured in this build; ")
                          + f"{len(fams) - len(trained)} of the {len(fams)} families show only untrained controls."),
                 alt=f"Grid of {len(fams)} line plots, one per model family, of the fraction holding against "
                     "relative depth, trained in blue, untrained in orange, random baseline dotted grey.")

    # ------------------------------------------------------------------ glue for the introduction
    def for_introduction(self):
        """Glue the answer box's values (:func:`~dobrushin.report.scorecard.verdict_groups`), the scale in one line
        and the scorecard for book/intro.md."""
        for k, v in S.verdict_groups(self.card).items():
            _glue(f"verdicts_{k}", plain_text(v))
        _glue("scale_short", plain_text(self.scale_short()))
        top = S.top_rows(self.card)
        short = {r.key: r.short for r in SCORECARD}  # the claim's name; its words, inputs and pairs are in the summary
        card = RT.html_table(S.shown(top.assign(claim=top["key"].map(short)), S.COMPACT), width="full")
        html = colour_verdicts(card.html, S.COMPACT.index("verdict"))
        _glue("scorecard_html", html_block(f'<div class="full-width">{html}</div>', card.text))

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
        tt = RT.timings_table(timings, RT.notebook_order(self.root), profiles,
                                   rendering=(NOTEBOOK, self.profile))
        _glue("timings_table", RT.html_table(tt))

    def for_reproducing(self):
        """Glue the paper scale, the schema, the summary.csv columns and the benchmark for reproducing.md."""
        _glue("schema_table", RT.html_table(RT.schema_table()))
        _glue("summary_columns", html_block(", ".join(f"<code>{c}</code>" for c in ST.COLUMNS),
                                              ", ".join(ST.COLUMNS)))
        scale = RT.paper_scale(self.root / "params")
        for key in ("inputs", "seeds", "trials"):
            _glue(f"paper_{key}", plain_text("(not set)" if scale[key] is None else RT.grouped(scale[key])))
        full, short = self.results / "bench" / "bench.csv", self.results / "bench-ci" / "bench.csv"
        bench_csv = full if full.exists() else short  # the full run when there is one, else CI's short profile
        if bench_csv.exists():
            bench = pd.read_csv(bench_csv)
            _glue("bench_table", RT.html_table(RT.bench_table(bench)))
            day = time.strftime("%Y-%m-%d", time.gmtime(bench_csv.stat().st_mtime))
            what = "the full profile (make bench)" if bench_csv == full else "the short CI profile (make bench-ci)"
            _glue("bench_status", plain_text(f"{what}, measured on {day}"))
        else:
            _glue("bench_table", RT.html_table(pd.DataFrame({"benchmark": ["not run in this build"]})))
            _glue("bench_status", plain_text("not run in this build"))

    def finish(self, parameters: Optional[dict] = None):
        """The collapsed "how this chapter was run" block."""
        import matplotlib

        import dobrushin

        wall = time.perf_counter() - self.t_start
        _display(F.provenance(parameters or {"profile": self.profile},
                              versions={"dobrushin": dobrushin.__version__, "pandas": pd.__version__,
                                        "matplotlib": matplotlib.__version__, "python": platform.python_version()},
                              timings={"summary notebook": round(wall, 1)}))


def colour_verdicts(html: str, column: int) -> str:
    """``html`` (tables of :func:`dobrushin.report.reproducing_tables.html_table`) with each body cell of column
    ``column`` classed by the verdict it starts with (``dobrushin-verdict-<name>``, coloured by
    ``_static/dobrushin.css``); other cells, and cells naming no verdict, as they are."""
    def row(m):
        cells = re.split(r"(?=<td[ >])", m.group(1))  # the row's opening, then one piece per cell
        if column + 1 < len(cells) and cells[column + 1].startswith("<td>"):
            v = Verdict.of(re.sub(r"<[^>]+>", "", cells[column + 1]))
            if v is not Verdict.RELATED:
                cells[column + 1] = f'<td class="dobrushin-verdict-{v.name.lower()}">' + cells[column + 1][4:]
        return "".join(cells) + "</tr>"

    return re.sub(r"(<tr>(?:(?!</tr>).)*?<td.*?)</tr>", row, html, flags=re.S)


def fallback_inputs(entries: dict) -> dict:
    """``{notebook: inputs}`` for the chapters of photos or sentences whose measured inputs are not the paper
    profile's (the 100 ImageNet sample photos, SST-2's dev.tsv: :mod:`dobrushin.data.canonical`), as each manifest
    entry records them (``inputs``, the selection's description): a fallback build says so on the introduction."""
    from ..data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE
    from ..experiments.families import TRANSFORMER_INPUTS

    canonical = {"image": IMAGENET_SAMPLES_SOURCE, "text": SST2_SOURCE}  # per kind of input (the family registry's)
    out = {}
    for (nb, _), e in entries.items():
        text = str(e.get("inputs") or "")
        if nb in TRANSFORMER_INPUTS and text and canonical[TRANSFORMER_INPUTS[nb]] not in text:
            out.setdefault(nb, text.split(" (")[0])
    return out


def published_text(root, results_dir, entries: dict) -> str:
    """Where the numbers of this build come from: how many entries were reused from the published results
    (``published/<profile>/PUBLISHED.json``: code digest, commit, machine) and what the last ``make verify``
    found (``results/verify/report.json``); when no entry was reused, that every result was measured in this
    build, and what the last ``make verify`` found where it ran; empty without entries."""
    import json

    reused = [e for e in entries.values() if e.get("published_from")]
    if not reused:
        measured = [e for e in entries.values() if str(e.get("status", "ok")) == "ok"]
        if not measured:
            return _verify_text(Path(results_dir)).strip()
        return ("Every model result of this build was measured in it; none was taken from the published results."
                + _verify_text(Path(results_dir)))
    pub_dir = Path(str(reused[0]["published_from"])).parent
    meta = {}
    if (pub_dir / "PUBLISHED.json").exists():
        meta = json.loads((pub_dir / "PUBLISHED.json").read_text())
    out = (f"{len(reused)} of the {len(entries)} model results are the published ones (code digest "
           f"{meta.get('code_digest', 'unknown')}, commit {str(meta.get('commit', 'unknown'))[:12]}, published "
           f"{meta.get('published', '?')}).")
    out += _attested_text(pub_dir)
    seed = meta.get("seeded_from")
    if isinstance(seed, dict):
        copied = seed.get("copied") or {}
        out += (f" That run started from the keyed products of the run published {seed.get('published', '?')} (commit "
                f"{str(seed.get('commit', 'unknown'))[:12]}): {copied.get('baseline cells', 0):,} cells of the random "
                f"baseline and {copied.get('FT-Transformer checkpoints', copied.get('FT-Transformer checkpoint files', 0) // 2)}"
                " FT-Transformer checkpoints, "
                "reused where their keys (parameters and the digest of the code that made them) still matched, "
                "with everything else computed again (make reproduce SEED=1).")
    left = [re.sub(r"-[0-9a-f]{8,}\.pt$", "", str(c)) for c in meta.get("checkpoints_left_out") or []]
    if left:
        names = and_join(_checkpoint_name(c) for c in left)
        out += (f" The checkpoint{'s' if len(left) > 1 else ''} of {names} did not fit under the published folder's "
                f"size limit and {'was' if len(left) == 1 else 'were'} left out: {'its' if len(left) == 1 else 'their'} published tables are reused as they "
                f"are, but a build that needs {'that network' if len(left) == 1 else 'those networks'} again (another "
                "parameter, or its tables recomputed) trains it again, on another CPU possibly into another network.")
    fresh = sorted(str(e.get("model") or "?") for e in entries.values()
                   if not e.get("published_from") and str(e.get("status", "ok")) == "ok")
    if fresh:
        why = (" (the published folder leaves the FT-Transformer tables of its largest data sets out for size: they "
               "are re-measured from its checkpoints)"
               if all(m.startswith("FT-Transformer/") for m in fresh) else "")
        out += (f" {'One other model result' if len(fresh) == 1 else f'The {len(fresh)} other measured model results'}"
                f" ({', '.join(fresh)}) {'was' if len(fresh) == 1 else 'were'} computed in this build{why}.")
    verified = _verify_text(Path(results_dir))
    return out + (verified or " make verify has not been run against them in this build (it re-measures a seeded "
                               "sample of them from scratch and compares: minutes, not hours).")


def _attested_text(pub_dir: Path) -> str:
    """Which attestations carry the published results over to the code here (:mod:`dobrushin.store.attest`), as
    a sentence; "" when the code here made them."""
    from ..experiments.verify import PRODUCT_NAMES, carry_over
    from ..store.attest import attestations

    co = {p: v for p, v in carry_over(pub_dir).items() if v["how"] != "same"}
    if not co:
        return ""
    recs = {v["products"][p]["now"]: v for v in attestations(pub_dir) for p in v["products"]}
    parts = []
    for p, v in co.items():
        rec = recs.get(v["now"]) if v["how"] == "attested" else None
        parts.append(f"the {PRODUCT_NAMES[p]} by code of digest {v['now'][:12]}, "
                     + (f"attested on {rec['date'][:10]} ({rec['products'][p]['evidence']})" if rec else
                        "not attested: they are not reused"))
    return " The code here differs from the code that made them: " + "; ".join(parts) + "."


def _verify_text(results_dir: Path) -> str:
    """What the last ``make verify`` (``results/verify/report.json``) found, as a sentence; "" when it has not run."""
    import json

    rep_path = results_dir / "verify" / "report.json"
    if not rep_path.exists():
        return ""
    from ..store.code import product_digest

    rep = json.loads(rep_path.read_text())
    comps = rep.get("comparisons") or []
    rows = sum(int(c.get("rows") or 0) for c in comps)
    took = f" in {rep['wall_s']:.0f} s" if isinstance(rep.get("wall_s"), (int, float)) else ""
    then, now = str(rep.get("current_digest")), product_digest("tables")
    code = (f"the current code (digest {then})" if then == now else
            f"earlier code (digest {then}; the code here has digest {now}, so this says nothing about it: run make "
            "verify again)")
    return (f" make verify re-measured a sample of the published results ({len(comps)} groups, {rows:,} rows) from "
            f"scratch with {code} on {rep.get('finished', '?')}{took}: {'passed' if rep.get('passed') else 'FAILED'}.")


def _md_text(s: str) -> str:
    """Plain text for a Markdown list item: characters Markdown would read as markup escaped."""
    import re

    return re.sub(r"([\\`*_{}\[\]<>#|$~])", r"\\\1", str(s))


def _claim_short(text: str) -> str:
    by_text = {c.text: c for c in CLAIMS.values()}
    c = by_text.get(text)
    if c is None:
        return text
    names = {"baseline": "random baseline", "essentially_all": "essentially all",
             "deit": "DeiT-B 91%", "vit": "ViT-B/16 64%", "late": "failures late in depth",
             "tabular": "FT-Transformer 11–44%", "special": "with special tokens 82–97%"}
    return names.get(c.key, c.text)


def _once_clause(content: pd.DataFrame) -> str:
    """", each untrained network once (...)" when ``content`` has the untrained control of a packaged proxy and of
    the checkpoint it stands in for (the same network: :func:`dobrushin.report.summary_figures.distinct_controls`)."""
    return "".join(f", each untrained network once (the control of `{a}`, a packaged proxy, is the same network as "
                   f"that of `{b}`, the checkpoint it stands in for: same architecture, same seed)"
                   for a, b in SF.control_twins(content))


def _checkpoint_name(stem: str) -> str:
    """``"breast_cancer-seed2"`` (a checkpoint's file name, its key taken off) → the model's name in the report."""
    data, _, seed = stem.partition("-seed")
    return ft_model_name(data, seed) if seed else stem


def _model_name(model: str) -> str:
    from .names import display_name

    return model if str(model).startswith(("random ", "FT-Transformer/")) else display_name(model)


def _short_status(st: str) -> str:
    """``"not run: weights unavailable: <long reason>"`` → ``"not run: weights unavailable"`` (the
    reason is listed once under the table)."""
    st = str(st)
    return ": ".join(st.split(": ")[:2]) if st.startswith("not run") else st


def _baseline_part(detail) -> str:
    d = str(detail) if isinstance(detail, str) else ""
    part = d.split(";")[0]
    return part.replace("random baseline at ", "") if part.startswith("random baseline at") else ""


__all__ = ["SummaryChapter", "published_text"]
