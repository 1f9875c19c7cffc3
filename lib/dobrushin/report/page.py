"""How the notebooks put figures, tables and banners on the page of the book.

One place decides how a result looks in the rendered book (Jupyter Book 1.x + myst-nb), so every
chapter reads the same way:

* :func:`figure` — a matplotlib figure as a **numbered, captioned figure with alt text**, sized for
  the text column or the full width, saved at 150 dpi as PNG + SVG by :func:`dobrushin.report.plots.save_figure`
  (``results/figures/<notebook>-<name>.{png,svg}``); the page shows exactly that PNG.
* :data:`COLORS` / :data:`LINESTYLES` — the one colour convention of the book (trained, untrained
  control, random baseline, with-special-tokens variant); :mod:`dobrushin.report.plots` uses it.
* :func:`table` — a data frame as a (numbered, when captioned) table: no pandas index, numbers
  formatted for reading (``3.43e-07``, ``768`` not ``768.0``), never truncated, and fitted to the
  text column of a 1280 px window (:func:`fit_table`): headers and text wrap, and a table whose
  columns still cannot stand side by side is shown with rows and columns swapped (few rows) or with
  its columns split over tables one below the other (``_static/dobrushin.css``).
* :func:`details` — a collapsed block ("click to show") for long tables or provenance.
* :func:`banner` — the one "not reproduced in this build" warning at the top of a chapter.
* :func:`provenance` — the collapsed "how this chapter was run" block at its end (parameters,
  versions, device, timings; no machine paths).

How it works (verified with Jupyter Book 1.0.4.post1 / myst-nb 1.4 and ``nb_render_markdown_format:
myst`` in ``_config.yml``): :func:`figure` glues the PNG into the notebook (``myst_nb.glue``, not
shown in place) and displays a ``text/markdown`` output holding a MyST ``{glue:figure}`` directive;
myst-nb parses that output as MyST, so the caption may contain computed text and ``$math$``, the
figure gets ``:name:`` (a label for ``{numref}``) and ``:alt:``, and Sphinx numbers it (``numfig``,
"Fig. 1", per chapter). :func:`table` and :func:`details` likewise return objects whose
``text/markdown`` form is a MyST ``{table}`` directive (numbered "Table 1" when captioned) or a
collapsed admonition. In a live Jupyter session the directives show as plain Markdown text.

Usage in a notebook cell::

    from dobrushin.report import page as F, plots

    fig = plots.layer_profile(table)
    F.figure(fig, notebook="dinov2", name="depth", width="full",
             caption=f"Fraction of inputs where equality holds, per layer ({n} inputs). "
                     "The dotted line is the random baseline.",
             alt="Line plot of the fraction holding against layer, one panel per model.")
    F.table(per_head, caption="Per-head fractions.", name="tab-dinov2-heads")
    F.details("All 87 parameters", F.table(params_df))
    F.banner("Not reproduced in this build", "weights unavailable: no network (HF_HUB_OFFLINE=1)")
    # last cell of the chapter
    F.provenance({"profile": profile, "results_dir": results_dir}, versions={"torch": torch.__version__},
                 device="cpu", timings={"measure": 12.3})

Refer to a figure from prose with ``{numref}`fig-dinov2-depth``` (label ``fig-<notebook>-<name>``).
"""
from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Mapping, Optional, Sequence

# ---------------------------------------------------------------- colours

from .display import Display, admonition, markdown_block  # noqa: E402
from .style import COLORS, LINESTYLES, color_for  # noqa: E402,F401  (the one colour convention; re-exported)
from .names import and_join  # noqa: E402


# ---------------------------------------------------------------- figures

# Width in inches that a figure is drawn at, so that matplotlib's 10 pt text lands at about 13-14 CSS px
# on the page: the book theme's text column is about 690 px wide at a 1280 px window and a full-width
# figure (``figure.full-width`` in _static/dobrushin.css) about 136 % of it.
WIDTHS_IN = {"column": 6.9, "full": 9.4}
# The least height a figure is drawn at (inches): a row of three panels scaled to the full width would
# otherwise be squashed to about 2.3 in, its axes too low for their labels.
MIN_HEIGHTS_IN = {"column": 2.8, "full": 3.8}
_KEY_RX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def _check_text(what: str, value, *, allow_empty=False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    v = value.strip()
    if not v and not allow_empty:
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
           results_dir=None, resize: bool = True, close: bool = True) -> list:
    """Save ``fig`` (PNG at 150 dpi + SVG) and show it as a numbered figure with caption and alt text.

    ``caption``: MyST Markdown, one paragraph — what is plotted and what to see; it may be an f-string
    with computed numbers and may hold ``$…$`` math. ``alt``: plain text for readers who cannot see
    the image (not the file name). ``width``: ``"column"`` (single panel) or ``"full"`` (multi-panel;
    spans the text column and the margin). With ``resize`` the figure is scaled to the chosen width
    (height in proportion) so its text is legible there. ``close`` closes it, so the inline backend
    does not show it a second time without caption; it is never drawn less tall than
    :data:`MIN_HEIGHTS_IN` (a single row of panels would be squashed). The label is ``fig-<notebook>-<name>``.
    A full-width figure needs a page with at least one section heading: sphinx-book-theme folds its
    "Contents" sidebar away while full-width content is in view, and its script throws a console
    error (which ``make check-html`` reports) when the page has no such sidebar.
    Returns the paths written by :func:`dobrushin.report.plots.save_figure` (a list that displays as nothing).
    """
    from IPython.display import Image, Markdown, display
    from myst_nb import glue

    from .plots import save_figure

    label = figure_label(notebook, name)
    md = figure_markdown(label, caption, alt, width)  # validates before anything is written
    if resize:
        w, h = fig.get_size_inches()
        target = WIDTHS_IN[width]
        fig.set_size_inches(target, max(h * target / w, MIN_HEIGHTS_IN[width]))
    paths = save_figure(fig, notebook, name, results_dir=results_dir)
    png = next(p for p in paths if Path(p).suffix == ".png")
    if close:
        import matplotlib.pyplot as plt

        plt.close(fig)
    glue(label, Image(data=Path(png).read_bytes(), format="png"), display=False)
    display(Markdown(md))
    return SavedFigure(paths)


class SavedFigure(list):
    """The paths :func:`figure` wrote. Shows nothing when it is a cell's last value (the figure
    itself was already displayed), so no list of paths appears on the page."""

    def _ipython_display_(self):
        pass


# ---------------------------------------------------------------- numbers and tables


def format_number(v, digits: int = 3) -> str:
    """A number as a reader wants it in a table: integers (also integral floats) without ``.0``;
    0 < |v| < 1e-3 or |v| ≥ 1e6 in scientific notation (``3.43e-07``); otherwise ``digits``
    significant digits, trailing zeros dropped (``0.483``, ``17.8``, ``1230``). NaN is ``–``.
    Booleans and non-numbers are returned as ``str``."""
    if v is None:
        return "–"
    if isinstance(v, bool) or type(v).__name__ in ("bool_", "bool"):
        return str(bool(v))
    if not isinstance(v, numbers.Real):
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

    s = np.format_float_positional(x, precision=digits, unique=False, fractional=False, trim="-")
    return s


_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|$~^&:\"'=%@,;?/])")


def _md_escape(s: str) -> str:
    """Escape every ASCII punctuation character (CommonMark allows it): cell text is shown literally,
    so ``<reason>`` stays visible text and ``$5`` is not math."""
    s = " ".join(str(s).split())  # a table cell is one line
    return _MD_PUNCT.sub(r"\\\1", s)


class Table(Display):
    """A formatted table; :func:`table` makes one. ``.frame`` is the formatted data frame (strings);
    ``.parts`` the ``(frame, numeric)`` pairs shown, one table each (:func:`fit_table`), and
    ``.layout`` how it was fitted (``"as is"``, ``"transposed"`` or ``"split"``)."""

    def __init__(self, markdown: str, frame, note: str = "", parts=None, layout: str = "as is"):
        super().__init__(frame.to_string(index=False) + (f"\n{note}" if note else ""), markdown=markdown)
        self.frame, self.note = frame, note
        self.parts = parts if parts is not None else [(frame, {c: False for c in frame.columns})]
        self.layout = layout


# ---------------------------------------------------------------- fitting a table to the column

#: The width a table may take: the text column of the book theme at a 1280 px window is 666 CSS px
#: inside its padding (measured by ``make check-html``); the estimate below is rough, so some is kept free.
TABLE_WIDTH_PX = 640.0
#: ... and in a cell tagged ``full-width`` (the text column and the margin, about 900 px).
TABLE_WIDTHS_PX = {"column": TABLE_WIDTH_PX, "full": 880.0}
#: Average advance of one character of the table's font (0.9 em of the 16 px body text, the theme's system
#: sans-serif) in CSS px, and the horizontal padding + border of a cell (0.6 em each side). Both err on
#: the wide side, so that a table judged to fit does.
CHAR_PX, CELL_PAD_PX = 8.0, 19.0
#: The same for text set in the theme's monospace code style (``<code>``: wider glyphs, its own padding).
CODE_CHAR_PX, CODE_PAD_PX = 8.6, 12.0
#: A word of a text cell longer than this many characters is given break opportunities (:func:`breakable`),
#: so that no word sets a text column wider; numbers never break.
LONGEST_UNBROKEN = 16
#: A table of at most this many rows is shown transposed (one column per row) when it is too wide.
TRANSPOSE_MAX_ROWS = 5
_WORD_BREAK = re.compile(r"[\s\u200b]+")


def header_text(name) -> str:
    """A header as laid out: a break opportunity (a zero-width space here, ``<wbr>`` on the page: :func:`wbr`)
    after ``_`` and ``/``, so that names such as ``ci_low`` or ``holds / pairs`` may wrap there like words."""
    return re.sub(r"([_/])(?=\S)", "\\1\u200b", str(name))


def breakable(text) -> str:
    """Cell text as shown: each word longer than :data:`LONGEST_UNBROKEN` characters gets a zero-width
    space after its ``/``, ``_``, ``-`` and ``.`` and, where a piece is still too long (a checksum), every
    :data:`LONGEST_UNBROKEN` characters, so it can wrap in a narrow column. Shorter words are left
    whole: a column is never squeezed below its longest ordinary word."""
    def word(w):
        if len(w) <= LONGEST_UNBROKEN:
            return w
        pieces = re.sub(r"([/_.-])(?=\S)", "\\1\u200b", w).split("\u200b")
        out = []
        for piece in pieces:
            out += [piece[i:i + LONGEST_UNBROKEN] for i in range(0, len(piece), LONGEST_UNBROKEN)] or [""]
        return "\u200b".join(out)

    return re.sub(r"\S+", lambda m: word(m.group(0)), str(text))


def column_min_px(header, cells, numeric: bool, code: bool = False) -> float:
    """The least width (CSS px) a column of the book's tables can be laid out in: its longest header word,
    its longest number (numeric columns never wrap) or its longest word up to :data:`LONGEST_UNBROKEN`
    characters (text wraps), in :data:`CHAR_PX` per character plus the cell padding (:data:`CODE_CHAR_PX`
    and the code padding more for cells shown as ``<code>``)."""
    words = lambda s: [w for w in _WORD_BREAK.split(str(s)) if w]  # noqa: E731
    head = max((len(w) for w in words(header_text(header))), default=0) * CHAR_PX
    if numeric:
        body = max((len(str(v)) for v in cells), default=0)
    else:
        body = max((len(w) for v in cells for w in words(breakable(v))), default=0)
    body = body * CODE_CHAR_PX + CODE_PAD_PX if code else body * CHAR_PX
    return max(head, body) + CELL_PAD_PX


def table_min_px(frame, numeric: dict, code=()) -> float:
    """The least width of a formatted table (:func:`column_min_px` summed over its columns; ``code``:
    the columns shown as ``<code>``)."""
    return sum(column_min_px(c, frame[c].tolist(), bool(numeric.get(c)), c in code) for c in frame.columns)


def _key_columns(frame, numeric: dict) -> list:
    """The leading text columns that name a row (``model``, ``weights``, ...), at most two."""
    keys = []
    for c in frame.columns[:2]:
        if numeric.get(c):
            break
        keys.append(c)
    return keys if len(keys) < len(frame.columns) else keys[:-1]


def _transpose(frame, numeric: dict):
    import pandas as pd

    keys = _key_columns(frame, numeric)
    labels = ([", ".join(str(v) for v in row if str(v).strip()) for row in frame[keys].itertuples(index=False)]
              if keys else [f"row {i + 1}" for i in range(len(frame))])
    seen: dict = {}
    heads = []
    for lab in labels:  # column names must be unique
        seen[lab] = seen.get(lab, 0) + 1
        heads.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    rest = [c for c in frame.columns if c not in keys]
    t = pd.DataFrame({"": [str(c) for c in rest],
                      **{h: [frame.iloc[i][c] for c in rest] for i, h in enumerate(heads)}}, columns=["", *heads])
    # a column now mixes quantities: right-aligned (numbers stay on one line) only when every cell is a number
    num = {"": False, **{h: all(bool(numeric.get(c)) for c in rest) for h in heads}}
    return t, num


def _split(frame, numeric: dict, budget: float, code=()) -> list:
    # the columns that name a row are repeated in every part; without a text one, the first column (``n``)
    keys = _key_columns(frame, numeric) or list(frame.columns[:1])
    if keys and table_min_px(frame[keys], numeric, code) > budget / 2:
        keys = []
    base = table_min_px(frame[keys], numeric, code) if keys else 0.0
    parts, cur, width = [], [], base
    for c in frame.columns:
        if c in keys:
            continue
        w = column_min_px(c, frame[c].tolist(), bool(numeric.get(c)), c in code)
        if cur and width + w > budget:
            parts.append(cur)
            cur, width = [], base
        cur.append(c)
        width += w
    parts.append(cur)
    return [(frame[keys + cols], {c: numeric.get(c, False) for c in keys + cols}) for cols in parts]


def fit_table(frame, numeric: dict, budget: float = TABLE_WIDTH_PX, code=()):
    """Lay a formatted table out to fit ``budget`` CSS px (the text column at a 1280 px window), without
    relying on horizontal scrolling: ``(parts, layout)``, ``parts`` a list of ``(frame, numeric)``.

    * ``"as is"``: its columns fit side by side once headers and text wrap (:func:`table_min_px`);
    * ``"transposed"``: a table of at most :data:`TRANSPOSE_MAX_ROWS` rows gets one column per row,
      headed by the row's leading text cells (``model, weights``), when that fits;
    * ``"split"``: otherwise its columns are split over tables shown one below the other, each
      repeating the leading text columns that name a row (or else the first column), each as wide as
      fits (a single column wider than the budget stands alone).

    ``code``: the columns whose cells are shown as ``<code>`` (measured wider); a table with such
    columns is not transposed (a column would then mix code and text)."""
    if table_min_px(frame, numeric, code) <= budget or len(frame.columns) < 2:
        return [(frame, numeric)], "as is"
    if len(frame) <= TRANSPOSE_MAX_ROWS and not code:
        t, tn = _transpose(frame, numeric)
        if table_min_px(t, tn) <= budget:
            return [(t, tn)], "transposed"
    parts = _split(frame, numeric, budget, code)
    return parts, ("split" if len(parts) > 1 else "as is")


def fitted_caption(caption: Optional[str], parts, layout: str) -> str:
    """The caption of a fitted table (:func:`fit_table`) on one line; a split table's says so."""
    cap = " ".join(caption.split()) if caption else ""
    if layout == "split":
        shared = [c for c in parts[0][0].columns if all(c in f.columns for f, _ in parts[1:])]
        names = [f"“{c}”" for c in shared]
        again = (f", each repeating the column{'s' if len(names) > 1 else ''} "
                 + and_join(names)
                 if shared else "")
        cap = (cap + " " if cap else "") + f"(Its columns are split over {len(parts)} tables, one below the other{again}.)"
    return cap


def wbr(text: str) -> str:
    """Text as the page shows it: each break opportunity (:func:`breakable`, :func:`header_text`) an HTML
    ``<wbr>``, which adds no character, so an id copied from the page is the id."""
    return str(text).replace("\u200b", "<wbr>")


def _pipe_table(frame, numeric: dict) -> list:
    head = "| " + " | ".join(wbr(_md_escape(header_text(c))) if str(c) else " " for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if numeric.get(c) else ":---" for c in frame.columns) + "|"
    body = ["| " + " | ".join((wbr(_md_escape(v if numeric.get(c) else breakable(v))) if v != "" else " ")
                              for c, v in zip(frame.columns, row)) + " |"
            for row in frame.itertuples(index=False)]
    return [head, rule, *body]


def _is_numeric(series) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def table(df, *, caption: Optional[str] = None, name: Optional[str] = None, digits: int = 3,
          columns: Optional[dict] = None, drop_constant: bool = False, formats: Optional[dict] = None,
          fit: bool = True, width: str = "column", code: Sequence[str] = ()) -> Table:
    """A data frame as a table of the book (display it, or return it as a cell's last value).

    * the pandas index is not shown; a *named* index (e.g. after ``groupby``) becomes columns;
    * every row and column is shown (no "…" truncation);
    * numbers are formatted by :func:`format_number` (``digits`` significant digits) unless
      ``formats`` maps a column to a format string or callable; numeric columns are right-aligned
      and do not break across lines; cell text is shown literally (``<reason>`` stays visible);
    * ``columns`` renames columns for display; ``drop_constant`` drops columns that have one value
      in every row and states them once under the table ("all rows: weights = pretrained");
    * ``caption`` (MyST, may be computed) makes it a numbered table; ``name`` its label for
      ``{numref}``;
    * it is fitted to the text column (:func:`fit_table`): headers and text wrap, and a table whose
      columns cannot stand side by side is transposed (few rows) or split into tables one below the
      other (the first carries the caption and says so); ``fit=False`` keeps the columns as given;
      ``width="full"`` fits it to a cell tagged ``full-width`` instead of the text column; ``code``
      names (displayed) columns that the caller shows as ``<code>`` (:func:`dobrushin.report.reproducing_tables.html_table`).
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"table() needs a pandas DataFrame, got {type(df).__name__}")
    if name is not None and not _KEY_RX.match(name):
        raise ValueError(f"table name {name!r} must be letters, digits, '-' or '_'")
    if isinstance(df.columns, pd.MultiIndex):
        df = df.copy()
        df.columns = [" ".join(str(c) for c in col if str(c)) for col in df.columns]
    if not (isinstance(df.index, pd.RangeIndex) and df.index.name is None):
        if any(n is not None for n in df.index.names):
            df = df.reset_index()
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
            note = "All rows: " + ", ".join(f"{c} = {_fmt_cell(df[c].iloc[0], c, digits, formats)}"
                                             for c in const) + "."
            df = df.drop(columns=const)
    if df.shape[1] == 0:
        raise ValueError("the table has no columns")
    if width not in TABLE_WIDTHS_PX:
        raise ValueError(f"width must be one of {sorted(TABLE_WIDTHS_PX)}, got {width!r}")
    numeric = {c: _is_numeric(df[c]) for c in df.columns}
    shown = pd.DataFrame({c: [_fmt_cell(v, c, digits, formats) for v in df[c]] for c in df.columns},
                         columns=list(df.columns))
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


def _fmt_cell(v, col, digits, formats) -> str:
    f = (formats or {}).get(col)
    if f is not None:
        return f(v) if callable(f) else format(v, f)
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return "–"
    except ImportError:  # pragma: no cover
        pass
    return format_number(v, digits)


def details(summary: str, *content) -> Display:
    """A collapsed block: ``summary`` is shown, ``content`` (tables from :func:`table`, Markdown
    strings, or objects with ``_repr_markdown_``) appears when the reader opens it."""
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
    return markdown_block(md, summary + "\n" + "\n".join(texts))


# ---------------------------------------------------------------- provenance

# An absolute path of this machine (POSIX, home-relative or Windows), inside any text.
_PATH_RX = re.compile(r"(?<![\w.:/\\])(?:~[/\\]|[A-Za-z]:[/\\]|/)[^\s,;:'\"()<>]*")


def scrub_paths(value, root=None) -> str:
    """``value`` as text with this machine's absolute paths taken out: a path inside the project
    ``root`` (default :func:`dobrushin.store.paths.project_root`) becomes relative to it, any other becomes
    ``(local path)``. For the provenance block: a page shows no ``/tmp/…`` or ``/home/…``."""
    from ..store.paths import project_root

    root = Path(root) if root is not None else project_root()
    text = str(value)

    def repl(m):
        s = m.group(0)
        if s == "/":
            return s
        try:
            q = Path(s).expanduser()
            if root is not None and q.is_absolute():  # (a Windows path is not absolute on POSIX)
                rel = q.resolve().relative_to(Path(root).resolve())
                return rel.as_posix() or "."
        except (ValueError, OSError):
            pass
        return "(local path)"

    return _PATH_RX.sub(repl, text)


def provenance(parameters: Mapping, *, versions: Optional[dict] = None, device: Optional[str] = None,
               timings: Optional[dict] = None, title: str = "How this chapter was run", root=None) -> Display:
    """The one collapsed "how this chapter was run" block at the end of a chapter: the notebook's
    parameters, package versions, device and timings (seconds), each a small table; machine paths are
    removed (:func:`scrub_paths`); ``None`` parameters show as ``default``."""
    import pandas as pd

    if not isinstance(parameters, Mapping):
        raise TypeError("parameters must be a mapping of name -> value")
    parameters = dict(parameters)  # a dict, or the notebook's validated parameters

    def val(v):
        if v is None:
            return "default"
        if isinstance(v, (list, tuple)):
            return ", ".join(scrub_paths(x, root) for x in v)
        return scrub_paths(v, root) if not isinstance(v, (bool, numbers.Number)) else v

    parts = [table(pd.DataFrame({"parameter": list(parameters), "value": [val(v) for v in parameters.values()]}),
                   formats={"value": lambda v: v if isinstance(v, str) else format_number(v)})]
    env = dict(versions or {})
    if device is not None:
        env = {"device": device, **env}
    if env:
        parts.append(table(pd.DataFrame({"software / hardware": list(env),
                                         "version": [scrub_paths(v, root) for v in env.values()]})))
    if timings:
        parts.append(table(pd.DataFrame({"step": list(timings), "seconds": [float(v) for v in timings.values()]})))
    return details(title, *parts)


# ---------------------------------------------------------------- banner


def banner(title: str, reason: str, kind: str = "warning"):
    """The one banner at the top of a chapter whose trained weights (or data) were not available,
    e.g. ``banner("Not reproduced in this build", "weights unavailable: no network")``. The reason is
    shown literally (``<placeholder>`` text stays visible). Returns a :func:`dobrushin.report.display.admonition`
    with the extra class ``dobrushin-banner``."""
    return admonition(_check_text("title", title), _check_text("reason", reason), kind,
                      classes=("dobrushin-banner",))


__all__ = ["COLORS", "LINESTYLES", "SavedFigure", "TABLE_WIDTHS_PX", "TABLE_WIDTH_PX", "Table", "WIDTHS_IN", "banner", "color_for",
           "breakable", "wbr", "column_min_px", "details", "figure", "figure_label", "figure_markdown", "fit_table", "fitted_caption", "format_number",
           "header_text", "provenance", "scrub_paths", "table", "table_min_px"]
