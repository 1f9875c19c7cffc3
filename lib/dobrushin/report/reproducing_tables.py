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


def paper_scale(params_dir) -> dict:
    """The paper profile's scale from ``params/paper/``: fewest ``inputs`` of a transformer chapter, FT-Transformer
    ``seeds``, fewest baseline ``trials`` up to n = 64; None where the file or key is absent."""
    import yaml

    from ..experiments.families import TRANSFORMER_INPUTS

    def load(nb):  # the values params/paper/<notebook>.yml sets ({} when none)
        p = Path(params_dir) / "paper" / f"{nb}.yml"
        return (yaml.safe_load(p.read_text()) or {}) if p.exists() else {}

    inputs = [v for v in (load(nb).get("n_inputs") for nb in TRANSFORMER_INPUTS) if isinstance(v, int)]
    seeds, base = load("tabular").get("seeds"), load("baseline")
    trials = [base.get(k) for k in ("trials_small", "ensemble_trials_small") if isinstance(base.get(k), int)]
    return {"inputs": min(inputs) if inputs else None, "seeds": len(seeds) if isinstance(seeds, list) else None,
            "trials": min(trials) if trials else None}


def grouped(n: int) -> str:
    """``20000`` → ``"20 000"`` (thousands apart by a space, as the book writes them)."""
    return f"{int(n):,}".replace(",", " ")


def notebook_order(root) -> list:
    """The notebooks in the book's order (``<root>/_toc.yml``: ``executed/<notebook>`` entries)."""
    toc = Path(root) / "_toc.yml"
    if not toc.exists():
        return []
    return list(dict.fromkeys(re.findall(r"file:\s*executed/([A-Za-z0-9_]+)", toc.read_text())))


def format_duration(seconds: float) -> str:
    """``42`` → ``"42 s"``, ``185`` → ``"3 min 05 s"``, ``7260`` → ``"2 h 01 min"``; NaN → ``"—"``."""
    if pd.isna(seconds):
        return "—"
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def timings_table(timings: pd.DataFrame, order=(), profiles=("quick", "paper")) -> pd.DataFrame:
    """Wall time per notebook (``order`` first, then any other timed one) and profile, the last record of each, "—"
    where none; then the total, marked incomplete where a time is missing."""
    sec = timings.groupby(["notebook", "profile"])["seconds"].last().unstack() if len(timings) else pd.DataFrame()
    sec = sec.reindex(index=list(order) + sorted(set(sec.index) - set(order)), columns=list(profiles))
    total = [format_duration(c.sum(min_count=1)) + (" (incomplete)" if c.isna().any() and c.notna().any() else "")
             for _, c in sec.items()]
    out = pd.concat([sec.map(format_duration), pd.DataFrame([total], index=["total"], columns=sec.columns)])
    return out.rename(columns=lambda p: f"{p} profile").rename_axis(index="notebook", columns=None).reset_index()


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
    return html_block("".join(out), (caption + "\n" if caption else "") + t.frame.to_string(index=False))


#: the kernel's speed target: one ``analyse`` call at least this many times faster than SciPy's pdist
BENCH_TARGET = 6.0


def bench_table(bench: pd.DataFrame, target: float = BENCH_TARGET) -> pd.DataFrame:
    """Per size and source of the kernel: ``analyse`` against SciPy's ``pdist`` (``ratio``; met when ≥ ``target``),
    against a one-thread numba loop, the torch path against ``torch.cdist`` and the paired runs' note; then peak
    memory over the batch's size and the cost of attention capture, with the benchmark's notes."""
    kernel = bench[bench["method"] == "kernel f64 (batch)"].set_index(["n", "source"])

    def col(method, c):  # one column of a method's rows, on the kernel's (n, source)
        return bench[bench["method"] == method].set_index(["n", "source"])[c].reindex(kernel.index)

    ratio = col("analyse f64 (validate+kernel)", "speedup_vs_pdist").fillna(kernel["speedup_vs_scipy"]).astype(float)
    rows = pd.DataFrame({
        "measurement": "κ + equality test: analyse vs SciPy pdist", "ratio": ratio, "target": target,
        "met": (ratio >= target).map({True: "yes", False: "no"}),
        "vs plain loop": col("analyse f64 (validate+kernel)", "vs_hwref").fillna(kernel["vs_hwref"]).astype(float),
        "torch vs cdist": (col("kernel-torch (CUDA path, on CPU)", "matrices_per_s")
                           / col("torch.cdist(p=1)+test", "matrices_per_s")).astype(float),
        "identical answers": (kernel["agree_exact"].eq(True) & kernel["holds_agree"].eq(1)).map({True: "yes", False: "NO"}),
        "note": col("analyse vs pdist (paired)", "note")}).reset_index()
    mem = bench[bench["method"].str.startswith("memory:")]
    mem = mem.assign(measurement="peak memory / batch: " + mem["method"].str[8:], ratio=mem["mem_ratio"],
                     note=[f"{m:.0f} matrices, batch {b:.0f} MB" for m, b in zip(mem["matrices"], mem["batch_mb"])])
    cap = bench[bench["method"] == "capture + test overhead"].assign(measurement="attention capture + test vs eager forward")
    return pd.concat([rows, mem[["n", "source", "measurement", "ratio", "note"]], cap[["n", "source", "measurement", "note"]]],
                     ignore_index=True).fillna({"note": ""})
