"""The Theory chapter's worked examples: their table, picture and glued values.  Entries are multiples of 1/8
(exact in binary), so every comparison is decided exactly at ``tol = 0``."""
from __future__ import annotations

from fractions import Fraction
from typing import Mapping

import numpy as np
import pandas as pd

from ..math.coefficient import (attaining_pairs, equality_holds, kappa, layer_bound, mutually_self_dominant,
                                rollout_factor)
from .style import COLORS

#: In eighths: every attaining pair self-dominant; the only one not; two attaining pairs, one self-dominant.
EXAMPLES_EIGHTHS = {
    "holds": [[6, 1, 1], [1, 6, 1], [1, 1, 6]],
    "fails": [[1, 7, 0], [7, 1, 0], [4, 0, 4]],
    "tie": [[5, 2, 1], [3, 2, 3], [1, 6, 1]],
}


def examples() -> dict:
    """The chapter's examples as float64 matrices (exact: multiples of 1/8)."""
    return {k: np.array(v, dtype=np.float64) / 8 for k, v in EXAMPLES_EIGHTHS.items()}


def _check(A) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"a worked example is one n x n matrix with n >= 2, got shape {A.shape}")
    return A


def fraction_text(x: float, max_denominator: int = 64) -> str:
    """``x`` as a short fraction (``3/8``, ``0``, ``1``) for labelling a matrix entry."""
    f = Fraction(float(x)).limit_denominator(max_denominator)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def witness(A) -> tuple:
    """The marked pair: the first mutually self-dominant attaining pair, else the first attaining pair (``tol = 0``)."""
    A = _check(A)
    pairs = attaining_pairs(A, tol=0)
    good = [p for p in pairs if mutually_self_dominant(A, *p, tol=0)]
    return (good or pairs)[0]


def describe(name: str, A) -> dict:
    """One row of the worked-examples table (all values from the library at ``tol = 0``)."""
    A = _check(A)
    pairs = attaining_pairs(A, tol=0)
    msd = [p for p in pairs if mutually_self_dominant(A, *p, tol=0)]
    return {
        "matrix": name,
        "n": A.shape[0],
        "κ(A)": kappa(A),
        "κ(½(I+A))": kappa(rollout_factor(A)),
        "bound ½(1+κ(A))": layer_bound(A),
        "equality_holds": bool(equality_holds(A, tol=0)),
        "attaining pairs": ", ".join(map(str, pairs)),
        "self-dominant ones": ", ".join(map(str, msd)) or "none",
    }


def example_rows(exs: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The worked-examples table; raises if ``equality_holds`` disagrees with κ(½(I+A)) == ½(1+κ(A)) on any example."""
    rows = []
    for name, A in exs.items():
        r = describe(name, A)
        direct = r["κ(½(I+A))"] == r["bound ½(1+κ(A))"]
        if direct != r["equality_holds"]:
            raise AssertionError(f"example {name!r}: equality_holds = {r['equality_holds']} but the direct "
                                 f"comparison gives {direct}")
        rows.append(r)
    return pd.DataFrame(rows)


def worked_examples_figure(exs: Mapping[str, np.ndarray]):
    """One annotated heatmap per example: the ``witness`` pair's rows outlined, ``A_ii``, ``A_jj`` boxed and ``A_ji``,
    ``A_ij`` dashed; the title says whether the condition holds."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if not exs:
        raise ValueError("no examples to draw")
    k = len(exs)
    fig, axes = plt.subplots(1, k, figsize=(2.6 * k, 3.0), layout="constrained", squeeze=False)
    mark = COLORS["special"]
    for ax, (name, A) in zip(axes[0], exs.items()):
        A = _check(A)
        n = A.shape[0]
        i, j = witness(A)
        holds = bool(equality_holds(A, tol=0))
        ax.imshow(A, cmap="Greys", vmin=0, vmax=1.6)  # light greys: black text stays readable
        for r in range(n):
            for c in range(n):
                ax.text(c, r, fraction_text(A[r, c]), ha="center", va="center", fontsize=10,
                        fontweight="bold" if (r, c) in ((i, i), (j, j)) else "normal")
        for r in (i, j):  # the two rows of the pair
            ax.add_patch(Rectangle((-0.5, r - 0.5), n, 1, fill=False, ec=mark, lw=1.0, alpha=0.6))
        for (r, c) in ((i, i), (j, j)):  # diagonal entries of the pair
            ax.add_patch(Rectangle((c - 0.42, r - 0.42), 0.84, 0.84, fill=False, ec=mark, lw=2.4))
        for (r, c) in ((j, i), (i, j)):  # the entries they must dominate
            ax.add_patch(Rectangle((c - 0.42, r - 0.42), 0.84, 0.84, fill=False, ec=mark, lw=1.4, ls="--"))
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("column k")
        ax.set_ylabel("row")
        verdict = "condition holds ✓" if holds else "condition fails ✗"
        ax.set_title(f"{name}: pair {(int(i), int(j))}\n{verdict}", fontsize=10)
    return fig


def worked_example_values(exs: Mapping[str, np.ndarray]) -> dict:
    """The worked-example paragraph's values (``ex-*``, ``tol = 0``); raises unless ``holds``, ``fails`` and ``tie``
    are all given."""
    missing = {"holds", "fails", "tie"} - set(exs)
    if missing:
        raise ValueError(f"the text needs the examples {sorted(missing)}")
    out = {}
    for name in ("holds", "fails", "tie"):
        r = describe(name, exs[name])
        out.update({f"ex-{name}-kappa": fraction_text(r["κ(A)"]), f"ex-{name}-b": fraction_text(r["κ(½(I+A))"]),
                    f"ex-{name}-bound": fraction_text(r["bound ½(1+κ(A))"]), f"ex-{name}-pairs": r["attaining pairs"],
                    f"ex-{name}-msd": r["self-dominant ones"]})
        A = np.asarray(exs[name], dtype=np.float64)
        for p, (i, j) in enumerate(attaining_pairs(A, tol=0)[:2] if name != "holds" else []):
            out.update({f"ex-{name}-{p}-{k}": fraction_text(A[r_, c]) for k, (r_, c) in
                        (("aii", (i, i)), ("aji", (j, i)), ("ajj", (j, j)), ("aij", (i, j)))})
    return out


def rollout_values(exs: Mapping[str, np.ndarray]) -> dict:
    """The corollary's chain for the examples stacked as layers: κ(rollout), ∏κ(B), ∏ bound (``ex-rollout*``)."""
    from ..math.coefficient import rollout, rollout_bound

    layers = np.stack([np.asarray(A, dtype=np.float64) for A in exs.values()])
    return {"ex-rollout": f"{kappa(rollout(layers)):.6f}",
            "ex-rollout-b": f"{np.prod([kappa(rollout_factor(A)) for A in layers]):.6f}",
            "ex-rollout-bound": f"{rollout_bound(layers):.6f}"}
