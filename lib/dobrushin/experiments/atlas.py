"""The failure atlas: which (input, layer) cases to draw and, for each, the κ-attaining pair of tokens and its
two self-dominance margins, recomputed from the model.

:func:`choose_cases` picks cases from the tidy table by a stated rule (:data:`RULES`); :func:`recompute` runs the
model again on them, restricts the layer's attention as the measurement does, and finds the attaining pair and
the margins ``A_ii − A_ji``, ``A_jj − A_ij`` (both ≥ 0 exactly when the pair is mutually self-dominant).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from ..capture.extract import extract_attention
from ..math.coefficient import DEFAULT_TOL, analyse, attaining_pairs, restrict

#: the rule by which :func:`choose_cases` picks cases, in the words the captions use
RULES = {"largest": "failing, largest slack", "random": "failing, seeded random draw", "holding": "holding, seeded random draw"}


def choose_cases(table: pd.DataFrame, *, model: str, weights: str, variant: str, seed: int = 0,
                 n_random: int = 1) -> pd.DataFrame:
    """Rows of the tidy ``table`` to draw for one (model, weights, variant), with a column ``rule``: the failing
    row of largest slack, ``n_random`` further failing rows and one holding row (both drawn with
    ``default_rng(seed)``).  Fewer rows when fewer exist."""
    t = table[(table["model"] == model) & (table["weights"] == weights) & (table["variant"] == variant)]
    rng = np.random.default_rng(int(seed))
    fail, hold = t[~t["holds"]], t[t["holds"]]
    out = []
    if len(fail):
        top = fail.sort_values(["slack", "input_id", "layer"], ascending=[False, True, True], kind="stable").iloc[:1]
        out.append(top.assign(rule="largest"))
        rest = fail.drop(index=top.index)
        if len(rest) and n_random > 0:
            pick = rng.choice(len(rest), size=min(int(n_random), len(rest)), replace=False)
            out.append(rest.iloc[np.sort(pick)].assign(rule="random"))
    if len(hold):
        out.append(hold.iloc[[int(rng.integers(len(hold)))]].assign(rule="holding"))
    return pd.concat(out, ignore_index=True) if out else t.iloc[:0].assign(rule=pd.Series(dtype="string"))


@dataclass
class Case:
    """One drawn case.  ``i, j``: the attaining pair, indices into the variant's kept tokens (``ti, tj``: in the
    full sequence); ``margin_i = A_ii − A_ji``, ``margin_j = A_jj − A_ij`` on the restricted matrix;
    ``holds``/``slack``/``kappa`` recomputed (``table_holds``: the table's); ``image`` (H, W, 3 in [0, 1]) for a
    photo, ``tokens`` for a sentence or tabular row."""

    model: str
    weights: str
    variant: str
    input_id: str
    layer: int
    rule: str
    i: int
    j: int
    ti: int
    tj: int
    role_i: str
    role_j: str
    margin_i: float
    margin_j: float
    kappa: float
    slack: float
    holds: bool
    table_holds: bool
    n_pairs: int
    roles: List[str] = field(default_factory=list)
    image: Optional[np.ndarray] = None
    tokens: Optional[List[str]] = None


def _tokenizer_of(lm):
    """The tokenizer inside a text model's ``preprocess`` (None when there is none to find)."""
    try:
        return inspect.getclosurevars(lm.preprocess).nonlocals.get("tokenizer")
    except (TypeError, ValueError):
        return None


def _display_image(pixels: torch.Tensor) -> np.ndarray:
    x = pixels.detach().double().cpu().numpy().transpose(1, 2, 0)
    lo, hi = x.min(axis=(0, 1)), x.max(axis=(0, 1))
    return np.clip((x - lo) / np.where(hi > lo, hi - lo, 1.0), 0, 1)


def pair_and_margins(A, tol: float = DEFAULT_TOL):
    """``(i, j, margin_i, margin_j, n_pairs)`` for one row-stochastic matrix: the first attaining pair that is
    mutually self-dominant, else the one whose smaller margin is largest (the nearest miss)."""
    X = np.asarray(A, dtype=np.float64)
    pairs = attaining_pairs(X, tol, validate=False)
    if not pairs:
        raise ValueError("no attaining pair (n < 2)")
    m = [(X[i, i] - X[j, i], X[j, j] - X[i, j]) for i, j in pairs]
    ok = [k for k, (a, b) in enumerate(m) if a >= -tol and b >= -tol]
    k = ok[0] if ok else int(np.argmax([min(a, b) for a, b in m]))
    (i, j), (a, b) = pairs[k], m[k]
    return int(i), int(j), float(a), float(b), len(pairs)


def recompute(lm, input_set, cases: pd.DataFrame, *, tol: float = DEFAULT_TOL) -> List[Case]:
    """The :class:`Case` of every row of ``cases`` (:func:`choose_cases`), running ``lm`` on those inputs again."""
    ids = list(input_set.ids)
    tok = _tokenizer_of(lm) if lm.kind == "text" else None
    out, memo = [], {}
    for r in cases.itertuples(index=False):
        if r.input_id not in ids:
            raise ValueError(f"input {r.input_id!r} is not in the input selection")
        if r.input_id not in memo:
            k = ids.index(r.input_id)
            inputs = lm.preprocess(input_set.items(k, k + 1))
            memo[r.input_id] = (inputs, extract_attention(lm.model, inputs))
        inputs, ex = memo[r.input_id]
        keep = ex.keep(0, r.variant)
        A = restrict(ex.attention[0, int(r.layer)].double(), np.asarray(keep), validate=False)
        res = analyse(A, tol, validate=False)
        i, j, a, b, npairs = pair_and_margins(A.numpy(), tol=tol)
        image = tokens = None
        if lm.kind == "tabular":
            tokens = tabular_tokens(input_set, ids.index(r.input_id))
        elif lm.kind != "text":
            px = inputs["pixel_values"] if isinstance(inputs, dict) else inputs
            image = _display_image(px[0])
        else:
            ii = inputs["input_ids"][0].tolist()
            tokens = tok.convert_ids_to_tokens(ii) if tok is not None else [f"#{k}" for k in range(len(ii))]
        roles = list(ex.roles[0])
        out.append(Case(model=r.model, weights=r.weights, variant=r.variant, input_id=r.input_id, layer=int(r.layer),
                        rule=r.rule, i=i, j=j, ti=int(keep[i]), tj=int(keep[j]), role_i=roles[int(keep[i])],
                        role_j=roles[int(keep[j])], margin_i=a, margin_j=b, kappa=float(res.kappa),
                        slack=float(res.slack), holds=bool(res.holds), table_holds=bool(r.holds), n_pairs=npairs,
                        roles=roles, image=image, tokens=tokens))
    return out


def tabular_tokens(inputs, k: int) -> List[str]:
    """The tokens of row ``k`` of a ``TabularInputs`` in FT-Transformer order: ``[CLS]``, numeric features as
    ``name=value`` (quantile-normalised, as the model sees them), categorical ones as ``name=#code``."""
    d = inputs.data
    row = int(inputs.items(k, k + 1)[0])
    out = ["[CLS]"]
    if d.X_num is not None:
        out += [f"{n}={float(v):+.2f}" for n, v in zip(d.num_names, d.X_num[inputs.part][row])]
    if d.X_cat is not None:
        out += [f"{n}=#{int(v)}" for n, v in zip(d.cat_names, d.X_cat[inputs.part][row])]
    return out


_SCALARS = ("model", "weights", "variant", "input_id", "layer", "rule", "i", "j", "ti", "tj", "role_i", "role_j",
            "margin_i", "margin_j", "kappa", "slack", "holds", "table_holds", "n_pairs")


def _png(image: np.ndarray) -> str:
    """A drawn photo (H, W, 3 in [0, 1]) as base64 PNG of its 8-bit pixels (it is only drawn, never measured)."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(buf, "PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _unpng(text: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(text))).convert("RGB"), dtype=np.float64) / 255.0


def atlas_value(cases: Sequence[Case]) -> dict:
    """``cases`` as a JSON-able value: ``{"cases": [...], "images": {input_id: base64 PNG}}``."""
    images = {k.input_id: _png(k.image) for k in cases if k.image is not None}
    return {"cases": [{**{c: getattr(k, c) for c in _SCALARS}, "roles": list(k.roles), "tokens": k.tokens}
                      for k in cases], "images": images}


def atlas_cases(value: dict) -> List[Case]:
    """The :class:`Case` list of an :func:`atlas_value` (images decoded)."""
    images = {i: _unpng(b) for i, b in (value.get("images") or {}).items()}
    return [Case(**{**d, "image": images.get(d["input_id"])}) for d in value["cases"]]


def measured_atlas(store, name: str, chosen: pd.DataFrame, table_key: str, make_model, input_set, *,
                   seed: int) -> List[Case]:
    """The cases of ``chosen`` recomputed as a keyed analysis of ``store`` (``<name>.analysis.json``), reused
    while the chosen rows, ``table_key`` and the code are the same; ``make_model()`` is called only on a miss."""
    from .environment import key_versions

    rows = chosen[["model", "weights", "variant", "input_id", "layer", "rule", "holds"]]
    params = {"analysis": "failure atlas", "table_key": str(table_key), "seed": int(seed),
              "cases": [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                        for r in rows.to_dict("records")], "versions": key_versions(), "device": "cpu"}
    return atlas_cases(store.keyed(name, params, lambda: atlas_value(recompute(make_model(), input_set, chosen))))


def check_atlas(value: dict, lm, input_set, *, atol: float) -> dict:
    """``make verify``'s check of a published atlas ``value``: recomputed cases must have the same verdict, pair and
    drawing (the photo within one 8-bit level), κ and margins within ``atol``.
    ``{"rows", "mismatches", "number_failures", "max_abs_diff"}``."""
    old = atlas_cases(value)
    chosen = pd.DataFrame([{c: getattr(k, c) for c in ("model", "weights", "variant", "input_id", "layer", "rule")}
                           | {"holds": k.table_holds} for k in old])
    new = recompute(lm, input_set, chosen)
    diffs = [abs(getattr(a, f) - getattr(b, f)) for a, b in zip(old, new) for f in ("kappa", "margin_i", "margin_j")]

    def drawn(k: Case) -> tuple:
        return k.holds, k.i, k.j, k.ti, k.tj, list(k.roles), k.tokens

    mism = sum(drawn(a) != drawn(b) or (a.image is None) != (b.image is None)
               or (a.image is not None and np.abs(a.image - b.image).max() > 1.5 / 255) for a, b in zip(old, new))
    return {"rows": len(old), "mismatches": int(mism), "number_failures": int(sum(d > atol for d in diffs)),
            "max_abs_diff": float(max(diffs, default=0.0))}


def cases_frame(cases: Sequence[Case]) -> pd.DataFrame:
    """The cases as a table (no image or token arrays)."""
    return pd.DataFrame([{c: getattr(k, c) for c in _SCALARS} for k in cases], columns=list(_SCALARS))
