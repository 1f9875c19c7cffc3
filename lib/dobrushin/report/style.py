"""The book's one colour convention, shared by every figure (no dependencies)."""
from __future__ import annotations

# Okabe–Ito colour-blind-safe palette. One meaning per colour across the whole book.
COLORS = {
    "trained": "#0072B2",    # blue: trained (pretrained) weights
    "untrained": "#E69F00",  # orange: the untrained control (same architecture, random init)
    "random": "#4D4D4D",     # dark grey: the random row-stochastic baseline
    "special": "#CC79A7",    # reddish purple: the with-special-tokens variant when it is its own series
}
# Line styles that go with them: variants by style, the baseline dotted.
LINESTYLES = {"content": "-", "with_special": "--", "random": ":"}


def color_for(kind: str) -> str:
    """The book's colour for ``kind``: a key of ``COLORS`` or a weights setting (``pretrained`` is ``trained``)."""
    try:
        return COLORS["trained" if kind == "pretrained" else kind]
    except KeyError:
        raise ValueError(f"no colour for {kind!r}; known: pretrained, {', '.join(COLORS)}") from None
