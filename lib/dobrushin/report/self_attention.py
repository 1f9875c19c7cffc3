"""How much attention a token gives *itself*: the head-averaged diagonal ``A_ii`` per layer (content
tokens), the first superdiagonal ``A_{i,i+1}`` for comparison, and, for models with a learned relative
position bias (MPNet), that bias at distance 0 (bucket 0) against the mean of the other buckets.

The equality condition needs a κ-attaining pair ``(i, j)`` that is mutually self-dominant
(``A_ii ≥ A_ji`` and ``A_jj ≥ A_ij``); a model whose tokens give themselves almost no attention fails it
for almost every pair.  :func:`self_attention_note` turns these numbers into the language chapter's
sentence and table, and says nothing when the measured fraction of a model does not call for it.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .names import pct as _pct

#: the trained fraction (content tokens) below which the chapter explains a model's self-attention
LOW_FRACTION = 0.05


def diagonal_profile(lm, texts: Sequence[str], *, batch_size: int = 8, renormalise: bool = True) -> pd.DataFrame:
    """Per layer: the mean over inputs and content tokens of the head-averaged diagonal ``A_ii``
    (``diag``) and of the first superdiagonal ``A_{i,i+1}`` (``superdiag``, content tokens ``i, i+1``),
    where ``A`` is the content-token block of the model's attention with its rows renormalised to sum
    to 1 — the matrix the equality test uses — or, with ``renormalise=False``, the full attention
    (rows over all real tokens).
    ``lm``: a :class:`dobrushin.models.LoadedModel` of kind ``"text"``; ``texts``: a non-empty list.
    Columns ``layer`` (0-based), ``diag``, ``superdiag``, ``n_tokens`` (content tokens averaged)."""
    import torch

    from ..capture.extract import extract_attention

    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("diagonal_profile expects a non-empty list of strings")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size!r}")
    diag = sup = None
    n_diag = n_sup = 0
    for s in range(0, len(texts), int(batch_size)):
        ex = extract_attention(lm.model, lm.preprocess(texts[s:s + int(batch_size)]))  # (B, L, n, n)
        for b in range(ex.attention.shape[0]):
            idx = torch.as_tensor(ex.keep(b, "content"), dtype=torch.long)
            if not len(idx):
                continue
            A = ex.attention[b].double().index_select(-2, idx)  # (L, n_content, n)
            if renormalise:
                A = A.index_select(-1, idx)
                A = A / A.sum(-1, keepdim=True)
                cols = torch.arange(len(idx))
            else:
                cols = idx
            rows = torch.arange(len(idx))
            d = A[:, rows, cols].sum(-1)
            nx = torch.nonzero((idx[1:] - idx[:-1]) == 1).flatten()  # content i whose right neighbour is content
            u = A[:, nx, cols[nx + 1]].sum(-1)
            nxt = nx
            diag = d if diag is None else diag + d
            sup = u if sup is None else sup + u
            n_diag += len(idx)
            n_sup += len(nxt)
    if diag is None:
        raise ValueError("no input has a content token")
    return pd.DataFrame({"layer": np.arange(len(diag)), "diag": (diag / n_diag).numpy(),
                         "superdiag": (sup / max(n_sup, 1)).numpy() if n_sup else np.nan, "n_tokens": n_diag})


def relative_bias_profile(model) -> Optional[dict]:
    """For a model with a learned relative position bias ``encoder.relative_attention_bias`` (an
    ``Embedding(buckets, heads)``, as MPNet's): ``{"bucket0": mean over heads of bucket 0 (distance 0),
    "others": mean over heads and the other buckets, "buckets", "heads"}``; ``None`` for a model without one."""
    enc = getattr(model, "encoder", None)
    emb = getattr(enc, "relative_attention_bias", None)
    w = getattr(emb, "weight", None)
    if w is None or w.ndim != 2 or w.shape[0] < 2:
        return None
    w = w.detach().double().cpu().numpy()
    return {"bucket0": float(w[0].mean()), "others": float(w[1:].mean()), "buckets": int(w.shape[0]),
            "heads": int(w.shape[1])}


def _range(x) -> str:
    """``min–max`` with two significant digits each (a small value is not rounded to 0.000)."""
    lo, hi = (f"{float(v):.2g}" for v in (np.min(x), np.max(x)))
    return lo if lo == hi else f"{lo}–{hi}"


def _labelled(model_id: str, lm) -> str:
    """The display name, with "(packaged proxy)" for packaged weights standing in for a hub checkpoint."""
    from .names import display_name, proxy_name

    from ..models.provenance import is_proxy

    proxy = is_proxy(getattr(lm, "provenance", None))
    # marked once, whether or not the chapter has marked the model already (names.mark_proxies)
    return proxy_name(display_name(model_id), "proxy" if proxy else "")


def _num(x: float) -> str:
    return f"{x:.1f}".replace("-", "\u2212")


def self_attention_note(summ: pd.DataFrame, texts: Sequence[str], *, subject: str, reference: Optional[str],
                        max_length: int = 128, loader=None, threshold: float = LOW_FRACTION):
    """``(markdown, table)`` explaining a low trained fraction of ``subject`` by its self-attention, with
    ``reference`` (a model with a high fraction) for comparison; ``(None, None)`` when ``subject``'s trained
    content-token fraction in ``summ`` (:func:`dobrushin.report.tables.fractions` by model, weights,
    variant) is missing or not below ``threshold``.  Both models are loaded with ``loader``
    (default :func:`dobrushin.models.load_model`) and measured on ``texts``."""
    from .plots import display_name

    if loader is None:
        from ..models.loading import load_model as loader

    def frac(m, w="pretrained"):
        g = summ[(summ["model"] == m) & (summ["weights"] == w) & (summ["variant"] == "content")]
        return g.iloc[0] if len(g) else None

    t = frac(subject)
    if t is None or not float(t["fraction"]) < threshold:
        return None, None
    lm = loader(subject, max_length=max_length)
    prof = diagonal_profile(lm, texts)
    bias = relative_bias_profile(lm.model)
    short = display_name(subject)
    name = _labelled(subject, lm)
    mpnet = type(lm.model).__name__.startswith("MPNet")
    rows = [{"model": short, "layer": int(r.layer) + 1, "diag": r.diag, "superdiag": r.superdiag}
            for r in prof.itertuples()]
    u = frac(subject, "untrained")
    s = (f"Why {name} fails: its trained weights satisfy the condition on **{int(t['k'])} of {int(t['n'])}** "
         f"(input, layer) pairs ({_pct(t['fraction'])})"
         + (f", against {_pct(u['fraction'])} for its untrained control" if u is not None else "") + ". "
         f"Its tokens give themselves little attention: the head-averaged diagonal $A_{{ii}}$ (content tokens, "
         f"rows renormalised as in the test, mean over {len(texts)} sentences) is {_range(prof['diag'])} per layer, "
         + ("less in every layer than" if bool((prof["diag"] < prof["superdiag"]).all()) else "against")
         + f" the attention to the next token, $A_{{i,i+1}}$ = {_range(prof['superdiag'])}")
    r = None
    if reference is not None and frac(reference) is not None:
        ref = loader(reference, max_length=max_length)
        rp = diagonal_profile(ref, texts)
        r = frac(reference)
        rows += [{"model": display_name(reference), "layer": int(x.layer) + 1, "diag": x.diag,
                  "superdiag": x.superdiag} for x in rp.itertuples()]
        s += (f"; in {_labelled(reference, ref)}, where the condition holds on {_pct(r['fraction'])}, the diagonal "
              f"is {_range(rp['diag'])}")
    s += ". "
    if bias is not None and bias["bucket0"] < bias["others"]:
        s += (f"The cause is the learned relative position bias of {short}: at distance 0 (bucket 0 of its "
              f"{bias['buckets']} buckets) it is {_num(bias['bucket0'])} on average over the {bias['heads']} heads, "
              f"against {_num(bias['others'])} for the other buckets, so the score of a token with itself is pushed "
              "far down before the softmax. ")
    s += ("With $A_{ii}$ this small, mutual self-dominance ($A_{ii} \\ge A_{ji}$ and $A_{jj} \\ge A_{ij}$) fails "
          "for the κ-attaining pair.")
    if mpnet:
        s += (" This is not a capture error: the captured maps agree with an independent recomputation of the "
              "softmax with the relative position bias and with the model's own `output_attentions` "
              "(tests/test_mpnet.py). A plausible reason is MPNet's two-stream pretraining, in which the query "
              "stream may not see its own token.")
    table = pd.DataFrame(rows).rename(columns={"diag": "self", "superdiag": "next"})
    return s, table


__all__ = ["LOW_FRACTION", "diagonal_profile", "relative_bias_profile", "self_attention_note"]
