"""Fitting a table to the text column of a 1280 px window without horizontal scrolling (``fit_table``): break
opportunities in headers and long words; a too-wide table is transposed (few rows) or split into stacked tables."""
from __future__ import annotations

import re
from typing import Optional

from .names import and_join


#: Table width budget (CSS px): the text column is 666 px at a 1280 px window; some is kept free for error.
TABLE_WIDTH_PX = 640.0
#: ... and in a cell tagged ``full-width`` (the text column and the margin, about 900 px).
TABLE_WIDTHS_PX = {"column": TABLE_WIDTH_PX, "full": 880.0}
#: CSS px per character of the table font and a cell's padding + border; both err wide, so a table judged to fit does.
CHAR_PX, CELL_PAD_PX = 8.0, 19.0
#: The same for text set in the theme's monospace code style (``<code>``: wider glyphs, its own padding).
CODE_CHAR_PX, CODE_PAD_PX = 8.6, 12.0
#: Text-cell words longer than this get break opportunities (``breakable``); numbers never break.
LONGEST_UNBROKEN = 16
#: A table of at most this many rows is shown transposed (one column per row) when it is too wide.
TRANSPOSE_MAX_ROWS = 5
_WORD_BREAK = re.compile(r"[\s\u200b]+")


def header_text(name) -> str:
    """A header with a break opportunity (zero-width space; ``<wbr>`` on the page) after each ``_`` and ``/``."""
    return re.sub(r"([_/])(?=\S)", "\\1\u200b", str(name))


def breakable(text) -> str:
    """Cell text with zero-width spaces in words longer than ``LONGEST_UNBROKEN``: after ``/ _ - .``, then every
    ``LONGEST_UNBROKEN`` characters where still too long (a checksum)."""
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
    """The least width (CSS px) of a column: its longest header word, number (unwrapped) or text word, plus padding."""
    words = lambda s: [w for w in _WORD_BREAK.split(str(s)) if w]  # noqa: E731
    head = max((len(w) for w in words(header_text(header))), default=0) * CHAR_PX
    if numeric:
        body = max((len(str(v)) for v in cells), default=0)
    else:
        body = max((len(w) for v in cells for w in words(breakable(v))), default=0)
    body = body * CODE_CHAR_PX + CODE_PAD_PX if code else body * CHAR_PX
    return max(head, body) + CELL_PAD_PX


def table_min_px(frame, numeric: dict, code=()) -> float:
    """The least width of a formatted table (CSS px); ``code``: the columns shown as ``<code>``."""
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
    nth = pd.Series(labels).groupby(labels).cumcount() + 1  # column names must be unique: "a", "a (2)", ...
    heads = [lab if k == 1 else f"{lab} ({k})" for lab, k in zip(labels, nth)]
    rest = [c for c in frame.columns if c not in keys]
    t = pd.DataFrame({"": [str(c) for c in rest],
                      **{h: [frame.iloc[i][c] for c in rest] for i, h in enumerate(heads)}}, columns=["", *heads])
    # a column now mixes quantities: right-aligned (numbers stay on one line) only when every cell is a number
    num = {"": False, **{h: all(bool(numeric.get(c)) for c in rest) for h in heads}}
    return t, num


def _split(frame, numeric: dict, budget: float, code=()) -> list:
    # the columns that name a row are repeated in every part; without a text one, the first column (``n``)
    keys = _key_columns(frame, numeric) or list(frame.columns[:1])
    base = table_min_px(frame[keys], numeric, code)
    if base > budget / 2:
        keys, base = [], 0.0
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
    """Fit a formatted table to ``budget`` CSS px: ``(parts, layout)``, ``parts`` a list of ``(frame, numeric)``,
    ``layout`` ``"as is"``, ``"transposed"`` or ``"split"`` (each part repeats the row-naming columns).  A table with
    ``code`` columns is never transposed."""
    if table_min_px(frame, numeric, code) <= budget or len(frame.columns) < 2:
        return [(frame, numeric)], "as is"
    if len(frame) <= TRANSPOSE_MAX_ROWS and not code:
        t, tn = _transpose(frame, numeric)
        if table_min_px(t, tn) <= budget:
            return [(t, tn)], "transposed"
    parts = _split(frame, numeric, budget, code)
    return parts, ("split" if len(parts) > 1 else "as is")


def fitted_caption(caption: Optional[str], parts, layout: str) -> str:
    """The caption of a fitted table (``fit_table``) on one line; a split table's says so."""
    cap = " ".join(caption.split()) if caption else ""
    if layout == "split":
        shared = [c for c in parts[0][0].columns if all(c in f.columns for f, _ in parts[1:])]
        again = (f", each repeating the column{'s' if len(shared) > 1 else ''} " + and_join(f"“{c}”" for c in shared)
                 if shared else "")
        split = f"(Its columns are split over {len(parts)} tables, one below the other{again}.)"
        cap = f"{cap} {split}" if cap else split
    return cap


def wbr(text: str) -> str:
    """Each break opportunity as ``<wbr>`` (adds no character, so an id copied from the page is the id)."""
    return str(text).replace("\u200b", "<wbr>")
