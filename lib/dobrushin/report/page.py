"""Figures, tables, collapsed blocks and banners on the book's pages (Jupyter Book 1.x + myst-nb): ``figure``,
``table``, ``details``, ``how_run``, ``banner``.  A figure is glued and a ``text/markdown`` output holds its directive,
so captions may hold computed text and ``$math$``; a live Jupyter session shows the directives as plain Markdown."""
from __future__ import annotations

import html
import math
import numbers
import re
from pathlib import Path
from typing import Mapping, Optional, Sequence

from .display import Display  # noqa: E402
from .layout import TABLE_WIDTHS_PX, breakable, fit_table, fitted_caption, header_text, wbr  # noqa: E402


# ---------------------------------------------------------------- figures

# Drawing widths (in) that put matplotlib's 10 pt text at ~13-14 CSS px in the text column / a full-width figure.
WIDTHS_IN = {"column": 6.9, "full": 9.4}
# Least drawing heights (in): a row of three panels would otherwise shrink to ~2.3 in, too low for its labels.
MIN_HEIGHTS_IN = {"column": 2.8, "full": 3.8}
_KEY_RX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def _check_text(what: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    v = value.strip()
    if not v:
        raise ValueError(f"{what} is empty; every figure needs one")
    return v


def figure_label(notebook: str, name: str) -> str:
    """The cross-reference label of a figure: ``fig-<notebook>-<name>`` (ASCII letters, digits, ``-``)."""
    label = f"fig-{notebook}-{name}".replace("_", "-")
    if not _KEY_RX.match(label):
        raise ValueError(f"notebook {notebook!r} and name {name!r} must be letters, digits, '-' or '_'")
    return label


def figure_markdown(label: str, caption: str, alt: str, width: str = "column") -> str:
    """The MyST ``{glue:figure}`` block that shows the glued image ``label`` as a numbered figure."""
    if width not in WIDTHS_IN:
        raise ValueError(f"width must be one of {sorted(WIDTHS_IN)}, got {width!r}")
    alt = " ".join(_check_text("alt text", alt).split())  # one line: it is a directive option
    caption = _check_text("caption", caption)
    if "\n\n" in caption:
        raise ValueError("the caption must be one paragraph (no blank line)")
    fence = ":" * max(3, 1 + max((len(m) for m in re.findall(r"^:{3,}", caption, re.M)), default=0))
    classes = "dobrushin-figure" + (" full-width" if width == "full" else "")
    return (f"{fence}{{glue:figure}} {label}\n:name: {label}\n:alt: {alt}\n:width: 100%\n"
            f":figclass: {classes}\n\n{caption}\n{fence}\n")


def figure(fig, *, notebook: str, name: str, caption: str, alt: str, width: str = "column",
           results_dir=None) -> list:
    """Save ``fig`` (PNG at 150 dpi + SVG) as numbered figure ``fig-<notebook>-<name>``, rescaled to ``width``
    (``"column"`` or ``"full"``) and closed; returns a ``SavedFigure``.  ``caption``: one MyST paragraph; ``alt``: plain
    text.  A full-width figure needs a page with a section heading (else sphinx-book-theme's script errors)."""
    from .plots import save_figure

    label = figure_label(notebook, name)
    md = figure_markdown(label, caption, alt, width)  # validates before anything is written
    w, h = fig.get_size_inches()
    fig.set_size_inches(WIDTHS_IN[width], max(h * WIDTHS_IN[width] / w, MIN_HEIGHTS_IN[width]))
    paths = save_figure(fig, notebook, name, results_dir=results_dir)  # [png, svg]
    import matplotlib.pyplot as plt

    plt.close(fig)
    return SavedFigure(paths, label=label, markdown=md, png=Path(paths[0]).read_bytes())


class SavedFigure(list):
    """The paths ``figure`` wrote; displayed, it glues the image under its label and shows the numbered figure."""

    def __init__(self, paths, *, label: str, markdown: str, png: bytes):
        super().__init__(paths)
        self.label, self.markdown, self.png = label, markdown, png

    def _ipython_display_(self):
        from IPython.display import Image, Markdown, display
        from myst_nb import glue

        glue(self.label, Image(data=self.png, format="png"), display=False)
        display(Markdown(self.markdown))


# ---------------------------------------------------------------- numbers and tables


def format_number(v, digits: int = 3) -> str:
    """A table number: integers without ``.0``; 0 < |v| < 1e-3 or |v| ≥ 1e6 scientific; else ``digits`` significant
    digits, trailing zeros dropped.  None, NaN, ``pd.NA``, ``pd.NaT``: ``–``; booleans, non-numbers: ``str``."""
    import pandas as pd

    if v is None or v is pd.NA or v is pd.NaT:
        return "–"
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return str(v)
    if isinstance(v, numbers.Integral):
        return str(int(v))
    x = float(v)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e6:
        return f"{x:.{digits - 1}e}"
    if x.is_integer():
        return str(int(x))
    import numpy as np

    return np.format_float_positional(x, precision=digits, unique=False, fractional=False, trim="-")


_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|$~^&:\"'=%@,;?/])")


def _md_escape(s: str) -> str:
    """One line with all ASCII punctuation escaped, so cell text shows literally (``<reason>``, ``$5``)."""
    s = " ".join(str(s).split())  # a table cell is one line
    return _MD_PUNCT.sub(r"\\\1", s)


class Table(Display):
    """A formatted table (made by ``table``): ``.frame`` (strings), ``.parts`` and ``.layout`` from ``fit_table``."""

    def __init__(self, markdown: str, frame, note: str, parts: list, layout: str):
        super().__init__(frame.to_string(index=False) + (f"\n{note}" if note else ""), markdown=markdown)
        self.frame, self.note, self.parts, self.layout = frame, note, parts, layout


def _pipe_table(frame, numeric: dict) -> list:
    head = "| " + " | ".join(wbr(_md_escape(header_text(c))) if str(c) else " " for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if numeric.get(c) else ":---" for c in frame.columns) + "|"
    body = ["| " + " | ".join((wbr(_md_escape(v if numeric.get(c) else breakable(v))) if v != "" else " ")
                              for c, v in zip(frame.columns, row)) + " |"
            for row in frame.itertuples(index=False)]
    return [head, rule, *body]


def table(df, *, caption: Optional[str] = None, name: Optional[str] = None, digits: int = 3,
          columns: Optional[dict] = None, drop_constant: bool = False, fit: bool = True, width: str = "column",
          code: Sequence[str] = ()) -> Table:
    """A data frame as a book table: no index, no truncation, numbers by ``format_number``.  ``drop_constant`` states
    single-valued columns under the table; ``fit`` fits it to ``width`` (``fit_table``)."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"table() needs a pandas DataFrame, got {type(df).__name__}")
    if name is not None and not _KEY_RX.match(name):
        raise ValueError(f"table name {name!r} must be letters, digits, '-' or '_'")
    df = df.reset_index(drop=True)
    if columns:
        unknown = [c for c in columns if c not in df.columns]
        if unknown:
            raise ValueError(f"columns to rename {unknown} are not in the table ({list(df.columns)})")
        df = df.rename(columns=columns)
    note = ""
    if drop_constant and len(df) > 1:
        const = [c for c in df.columns if df[c].nunique(dropna=False) == 1]
        if const and len(const) < len(df.columns):
            note = "All rows: " + ", ".join(f"{c} = {format_number(df[c].iloc[0], digits)}" for c in const) + "."
            df = df.drop(columns=const)
    if df.shape[1] == 0:
        raise ValueError("the table has no columns")
    if width not in TABLE_WIDTHS_PX:
        raise ValueError(f"width must be one of {sorted(TABLE_WIDTHS_PX)}, got {width!r}")
    numeric = {c: pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns}
    shown = pd.DataFrame({c: [format_number(v, digits) for v in df[c]] for c in df.columns}, columns=list(df.columns))
    parts, layout = (fit_table(shown, numeric, TABLE_WIDTHS_PX[width], tuple(code)) if fit
                     else ([(shown, numeric)], "as is"))
    cap = fitted_caption(caption, parts, layout)
    blocks = []
    for i, (frame, num) in enumerate(parts):
        lines = [":::{table}" + (f" {cap}" if cap and i == 0 else ""),
                 ":class: dobrushin-table" + (f" dobrushin-{layout}" if layout != "as is" else "")]
        if name and i == 0:
            lines.append(f":name: {name}")
        lines += ["", *_pipe_table(frame, num), ":::"]
        blocks.append("\n".join(lines) + "\n")
    md = "\n".join(blocks)
    if note:
        md += f"\n{_md_escape(note)}\n"
    return Table(md, shown, note, parts=parts, layout=layout)


def details(summary: str, *content) -> Display:
    """A collapsed block showing ``summary``; ``content`` (tables, Markdown strings) appears when opened."""
    summary = " ".join(_check_text("summary", summary).split())
    parts, texts = [], []
    for c in content:
        md = c._repr_markdown_() if hasattr(c, "_repr_markdown_") else None
        parts.append((str(c) if md is None else md).strip("\n"))
        texts.append(str(c) if md is None else repr(c))
    inner = "\n\n".join(parts)
    depth = max((len(m) for m in re.findall(r"^(:{3,})", inner, re.M)), default=2)
    fence = ":" * (depth + 1)
    md = f"{fence}{{admonition}} {summary}\n:class: dropdown dobrushin-details\n\n{inner}\n{fence}\n"
    return Display(summary + "\n" + "\n".join(texts), markdown=md)


# ---------------------------------------------------------------- how the chapter was run

# An absolute path of this machine (POSIX, home-relative or Windows), inside any text.
_PATH_RX = re.compile(r"(?<![\w.:/\\])(?:~[/\\]|[A-Za-z]:[/\\]|/)[^\s,;:'\"()<>]*")


def scrub_paths(value) -> str:
    """``value`` as text, absolute paths made relative to the project root or ``(local path)``."""
    from ..store.paths import project_root

    root = project_root()

    def repl(m):
        s = m.group(0)
        if s == "/":
            return s
        try:
            q = Path(s).expanduser()
            if root is not None and q.is_absolute():  # (a Windows path is not absolute on POSIX)
                rel = q.resolve().relative_to(root.resolve())
                return rel.as_posix() or "."
        except (ValueError, OSError):
            pass
        return "(local path)"

    return _PATH_RX.sub(repl, str(value))


def how_run(parameters: Mapping, *, packages: Sequence[str] = ("dobrushin", "pandas", "matplotlib"),
            device: Optional[str] = None, timings: Optional[dict] = None) -> Display:
    """The collapsed "How this chapter was run" block (timings in seconds, paths scrubbed, ``None`` as ``default``)
    with the installed versions of python, numpy, torch and ``packages``."""
    import pandas as pd

    from ..experiments.environment import versions as installed

    def val(v):
        if v is None:
            return "default"
        if isinstance(v, (list, tuple)):
            return ", ".join(scrub_paths(x) for x in v)
        return scrub_paths(v) if not isinstance(v, (bool, numbers.Number)) else v

    parts = [table(pd.DataFrame({"parameter": list(parameters), "value": [val(v) for v in parameters.values()]}))]
    env = {"device": device} if device is not None else {}
    env.update(installed(packages))
    parts.append(table(pd.DataFrame({"software / hardware": list(env),
                                     "version": [scrub_paths(v) for v in env.values()]})))
    if timings:
        parts.append(table(pd.DataFrame({"step": list(timings), "seconds": [float(v) for v in timings.values()]})))
    return details("How this chapter was run", *parts)


# ---------------------------------------------------------------- banner


def banner(title: str, reason: str) -> Display:
    """The warning ``dobrushin-banner`` atop a chapter missing trained weights or data; ``reason`` is shown literally
    (HTML, which glue pastes across documents, with Markdown and plain-text fallbacks)."""
    title, reason = _check_text("title", title), _check_text("reason", reason)
    return Display(f"WARNING: {title}: {reason}",
                   html=(f'<div class="admonition warning dobrushin-banner"><p class="admonition-title">'
                         f"{html.escape(title)}</p><p>{html.escape(reason)}</p></div>"),
                   markdown=f"**{title}**: {reason}")
