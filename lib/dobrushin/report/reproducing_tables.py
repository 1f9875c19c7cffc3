"""The reproducing chapter's tables (paper scale, wall times, kernel benchmark) and ``html_table``, the HTML form
of a table that a Markdown chapter pastes with ``{glue}``."""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from . import layout, page
from .display import Display, html_block


def paper_scale(params_dir, profile: str = "paper") -> dict:
    """A profile's scale from ``params/<profile>/``: fewest ``inputs`` of a transformer chapter, FT-Transformer
    ``seeds``, fewest baseline ``trials`` up to n = 64; None where the file or key is absent."""
    import yaml

    def load(nb):  # the values params/<profile>/<notebook>.yml sets ({} when none)
        p = Path(params_dir) / profile / f"{nb}.yml"
        return (yaml.safe_load(p.read_text()) or {}) if p.exists() else {}

    from ..experiments.families import TRANSFORMER_INPUTS

    inputs = [load(nb).get("n_inputs") for nb in TRANSFORMER_INPUTS]
    inputs = [v for v in inputs if isinstance(v, int)]
    seeds = load("tabular").get("seeds")
    base = load("baseline")
    trials = [base.get(k) for k in ("trials_small", "ensemble_trials_small") if isinstance(base.get(k), int)]
    return {"inputs": min(inputs) if inputs else None, "seeds": len(seeds) if isinstance(seeds, list) else None,
            "trials": min(trials) if trials else None}


def grouped(n: int) -> str:
    """``20000`` → ``"20 000"`` (thousands apart by a space, as the book writes them)."""
    return f"{int(n):,}".replace(",", " ")


def notebook_order(root=None) -> list:
    """The notebooks in the book's order (``_toc.yml``: ``executed/<notebook>`` entries)."""
    import re

    from ..store.paths import project_root

    root = Path(root) if root is not None else (project_root() or Path.cwd())
    toc = Path(root) / "_toc.yml"
    if not toc.exists():
        return []
    return list(dict.fromkeys(re.findall(r"file:\s*executed/([A-Za-z0-9_]+)", toc.read_text())))


def format_duration(seconds: float) -> str:
    """``42`` → ``"42 s"``, ``185`` → ``"3 min 05 s"``, ``7260`` → ``"2 h 01 min"``."""
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


PAPER_NOT_RUN = "not run end to end in this build"


#: the timings cell of the notebook rendering the table, in its own profile
SELF_NOT_YET = "timed after this page is made"


def timings_table(timings: pd.DataFrame, order=(), profiles=("quick", "paper"),
                  rendering: tuple = ()) -> pd.DataFrame:
    """One row per notebook in ``order`` (then any other timed one), a column per profile, then totals (marked
    incomplete where a time is missing).  ``rendering``: ``(notebook, profile)`` showing the table."""
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
                row[f"{prof} profile"] = (SELF_NOT_YET if tuple(rendering) == (nb, prof) else
                                          PAPER_NOT_RUN if prof != "quick" else "not recorded")
                complete[prof] = False
        rows.append(row)
    if rows:
        rows.append({"notebook": "total", **{f"{p} profile": (format_duration(totals[p]) if complete[p] else
                                                            (f"{format_duration(totals[p])} (incomplete)" if totals[p] else "—"))
                                            for p in profiles}})
    return pd.DataFrame(rows, columns=["notebook", *[f"{p} profile" for p in profiles]])


#: a ``<placeholder>`` span of an escaped cell (``hf:&lt;dataset id&gt;``)
_PLACEHOLDER_RX = re.compile(r"[\w:./\u200b-]*&lt;/?[A-Za-z][^&<>]{0,60}&gt;[\w:./\u200b-]*")


def _cell_html(text: str, code: bool) -> str:
    """A cell's text as escaped HTML: all ``<code>`` when ``code``, else only its ``<placeholder>`` spans."""
    esc = html.escape(str(text))
    if code:
        return f"<code>{layout.wbr(esc)}</code>" if esc else ""
    return layout.wbr(_PLACEHOLDER_RX.sub(lambda m: f"<code>{m.group(0)}</code>", esc))


def html_table(df: pd.DataFrame, caption: Optional[str] = None, code_columns=(), **kwargs) -> Display:
    """``df`` as an HTML table formatted by ``page.table`` (``kwargs``), ``code_columns`` shown as code."""
    t = page.table(df, code=tuple(code_columns), **kwargs)
    shown = t.frame
    out = []
    for i, (part, numeric) in enumerate(t.parts):  # fitted to the text column, as page.table does
        cls = lambda c: ' class="text-right"' if numeric.get(c) else ""  # noqa: E731
        head = "".join(f"<th{cls(c)}>{layout.wbr(html.escape(layout.header_text(c)))}</th>" for c in part.columns)
        body = "".join("<tr>" + "".join(f"<td{cls(c)}>{_cell_html(v if numeric.get(c) else layout.breakable(v), c in code_columns)}</td>"
                                        for c, v in zip(part.columns, row))
                       + "</tr>" for row in part.itertuples(index=False))
        text = layout.fitted_caption(caption, t.parts, t.layout)
        cap = f"<caption>{html.escape(text)}</caption>" if text and i == 0 else ""
        extra = f" dobrushin-{t.layout}" if t.layout != "as is" else ""
        out.append(f'<div class="pst-scrollable-table-container"><table class="table dobrushin-table{extra}">{cap}'
                   f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
    return html_block("".join(out), (caption + "\n" if caption else "") + shown.to_string(index=False))


#: the kernel's speed target: one ``analyse`` call at least this many times faster than SciPy's pdist
BENCH_TARGET = 6.0


def bench_table(bench: pd.DataFrame, target: float = BENCH_TARGET) -> pd.DataFrame:
    """The benchmark in a few rows: per size and source, ``analyse`` against SciPy's ``pdist`` (the target), against a
    one-thread numba loop (``vs plain loop``) and the torch path against ``torch.cdist``; then peak memory and the
    cost of attention capture."""
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
