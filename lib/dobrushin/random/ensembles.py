r"""Random row-stochastic matrices (``dirichlet``, ``softmax_gaussian``) and the Monte-Carlo law of the
equality condition.

For the pair (i, j) attaining κ(A) (unique almost surely), X = [A_ii ≥ A_ji], Y = [A_jj ≥ A_ij]:
*holds* iff X and Y, *both reversed* iff neither, *mixed* otherwise.  With P, N, Z the numbers of columns
where A_i − A_j is > 0, < 0, = 0, the column-averaged score s(A) = ((P+Z)(N+Z) − Z) / (n(n−1)) is
P(holds) after a uniform column permutation: for a column-exchangeable law an unbiased, lower-variance
estimator of P(holds).  ``simulate`` is bit-for-bit reproducible: matrices depend only on
``(seed, ensemble, n)`` and their index, never on the batch size, and every count is an integer.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import pandas as pd

from ..math.coefficient import analyse, kappa, rollout_factor
from ..math.stats import wilson
from ..math.validation import check_integer, check_positive
from .exact import exact_equality

#: the subpackages a random-matrix cell's counts depend on (the sampler here, the kernel, the store)
CELL_CODE = ("math", "random", "store")
#: matrix entries per random-number block: block ``b`` of ``(seed, ensemble, n)`` holds matrices
#: ``b·m … (b+1)·m − 1`` with ``m = max(1, BLOCK_ELEMENTS // n²)``, independent of any batch size
BLOCK_ELEMENTS = 2**20
#: matrices below this float64 gap between the layer bound and the directly computed κ(½(I+A)), per
#: unit of n, are treated as "equal" by the float64 direct comparison (rounding of n-term sums)
DIRECT_RESOLUTION_PER_N = 16 * np.finfo(np.float64).eps

COUNT_FIELDS = (
    "trials", "holds", "both_reversed", "mixed", "first_only", "ties", "checked", "float_mismatches",
    "disagreements", "rb_holds_num", "rb_holds_num_sq", "rb_reversed_num", "rb_reversed_num_sq",
    "imbalance_sq",
)


# ------------------------------------------------------------------------------------------- input
def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


# ---------------------------------------------------------------------------------------- samplers
def dirichlet(n: int, alpha: float, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``(batch, n, n)`` float64 with rows i.i.d. Dirichlet(α, …, α), as normalised Gamma(α) weights."""
    n, batch = check_integer("n", n, 1), check_integer("batch", batch, 0)
    alpha = check_positive("alpha", alpha)
    G = _check_rng(rng).standard_gamma(alpha, size=(batch, n, n))
    S = G.sum(-1, keepdims=True)
    if batch and not (S > 0).all():  # probability ~ 1e-30 per row even for α = 0.1
        raise RuntimeError("a Dirichlet row underflowed to all zeros; use a larger alpha")
    return G / S


def softmax_gaussian(n: int, temperature: float, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``(batch, n, n)`` float64 with rows ``softmax(z / T)``, ``z`` i.i.d. N(0, 1)."""
    n, batch = check_integer("n", n, 1), check_integer("batch", batch, 0)
    T = check_positive("temperature", temperature)
    Z = _check_rng(rng).standard_normal(size=(batch, n, n)) / T
    Z -= Z.max(-1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(-1, keepdims=True)
    return Z


@dataclass(frozen=True)
class Ensemble:
    """A named ensemble: ``kind`` is ``"dirichlet"`` (``param`` = α) or ``"softmax_gaussian"`` (``param`` = T)."""

    kind: str
    param: float

    def __post_init__(self):
        if self.kind not in _SAMPLERS:
            raise ValueError(f"unknown ensemble kind {self.kind!r}; expected one of {sorted(_SAMPLERS)}")
        object.__setattr__(self, "param", check_positive("ensemble parameter", self.param))

    @property
    def name(self) -> str:
        return f"{self.kind}({self.param:g})"

    @property
    def label(self) -> str:
        """Human-readable label for plots and tables."""
        if self.kind == "dirichlet":
            return f"Dirichlet(α={self.param:g})"
        return f"softmax(z/T), T={self.param:g}"

    def sample(self, n: int, batch: int, rng: np.random.Generator) -> np.ndarray:
        return _SAMPLERS[self.kind](n, self.param, batch, rng)

    def code(self) -> int:
        """A stable 32-bit integer naming the ensemble in the random-number streams."""
        return int(hashlib.sha256(self.name.encode()).hexdigest()[:8], 16)


_SAMPLERS: dict[str, Callable] = {"dirichlet": dirichlet, "softmax_gaussian": softmax_gaussian}
_SPEC = re.compile(r"^\s*([a-z_]+)\s*\(\s*([^()]+?)\s*\)\s*$")


def parse_ensemble(spec: "str | Ensemble") -> Ensemble:
    """``"dirichlet(1)"``, ``"dirichlet(0.1)"``, ``"softmax_gaussian(0.5)"`` (or an :class:`Ensemble`)."""
    if isinstance(spec, Ensemble):
        return spec
    m = _SPEC.match(str(spec))
    if not m:
        raise ValueError(f"cannot parse ensemble {spec!r}; write e.g. 'dirichlet(1)' or 'softmax_gaussian(0.5)'")
    return Ensemble(m.group(1), m.group(2))


# ------------------------------------------------------------------------------- random numbers
def block_size(n: int) -> int:
    """Matrices per random-number block for size ``n`` (depends on n only)."""
    return max(1, BLOCK_ELEMENTS // (check_integer("n", n, 1) ** 2))


def block_rng(seed: int, ensemble: "str | Ensemble", n: int, block: int) -> np.random.Generator:
    """The generator of block ``block`` of the stream ``(seed, ensemble, n)``."""
    seed = check_integer("seed", seed, 0)
    ens = parse_ensemble(ensemble)
    ss = np.random.SeedSequence(seed, spawn_key=(ens.code(), check_integer("n", n, 1), check_integer("block", block, 0)))
    return np.random.Generator(np.random.PCG64(ss))


def sample_matrices(ensemble, n: int, start: int, stop: int, seed: int) -> np.ndarray:
    """Matrices ``start … stop−1`` of the stream ``(seed, ensemble, n)``, ``(stop−start, n, n)``; matrix
    ``k`` is the ``k mod m``-th of block ``k // m`` (``m = block_size(n)``), whatever ``start``/``stop``."""
    ens = parse_ensemble(ensemble)
    n = check_integer("n", n, 1)
    start, stop = check_integer("start", start, 0), check_integer("stop", stop, 0)
    if stop < start:
        raise ValueError(f"stop={stop} < start={start}")
    m = block_size(n)
    out = []
    k = start
    while k < stop:
        b, off = divmod(k, m)
        take = min(stop - k, m - off)
        # drawing off + take matrices and dropping the first off reproduces the block prefix exactly
        X = ens.sample(n, off + take, block_rng(seed, ens, n, b))
        out.append(X[off:])
        k += take
    return np.concatenate(out) if out else np.empty((0, n, n))


# ------------------------------------------------------------------------ per-matrix statistics
def pair_statistics(A: np.ndarray, witness: np.ndarray) -> dict:
    """Comparisons (bool) and sign counts of ``A_i − A_j`` (int64) on the pair ``witness`` ``(b, 2)`` of
    each matrix of ``A`` ``(b, n, n)``."""
    b = A.shape[0]
    r = np.arange(b)
    i, j = witness[:, 0], witness[:, 1]
    if b and (i.min() < 0 or j.min() < 0):
        raise ValueError("no witness pair (n = 1)")
    u = A[r, i] - A[r, j]  # (b, n): row i minus row j (sign exact in IEEE arithmetic)
    aii, aji, ajj, aij = A[r, i, i], A[r, j, i], A[r, j, j], A[r, i, j]
    pos = (u > 0).sum(1)
    neg = (u < 0).sum(1)
    return {
        "x_ok": aii >= aji, "y_ok": ajj >= aij, "strict": (aii != aji) & (ajj != aij),
        "pos": pos, "neg": neg, "zero": A.shape[-1] - pos - neg,
    }


def _resolution(n: int) -> float:
    return DIRECT_RESOLUTION_PER_N * max(n, 8)


# ---------------------------------------------------------------------------------- simulation
def simulate(
    ensemble: "str | Ensemble",
    n: int,
    trials: int,
    seed: int = 0,
    *,
    batch: int | None = None,
    check: bool = True,
    start: int = 0,
) -> dict:
    """Integer counts (``COUNT_FIELDS``) over ``trials`` matrices of the stream, from matrix ``start`` on.

    ``holds`` is decided by ``analyse`` at tol = 0 (exact on float64 entries).  With ``check``, the direct
    float64 comparison κ(½(I+A)) vs ½(1+κ(A)) too: a mismatch (``float_mismatches``) is settled by
    ``exact_equality`` and only one that survives counts in ``disagreements``.  ``rb_*_num`` are Σ
    ((P+Z)(N+Z) − Z) and Σ P·N (divide by ``trials·n(n−1)``).  ``batch`` changes no count.
    """
    ens = parse_ensemble(ensemble)
    n = check_integer("n", n, 2)
    trials = check_integer("trials", trials, 0)
    seed = check_integer("seed", seed, 0)
    start = check_integer("start", start, 0)
    chunk = block_size(n) if batch is None else check_integer("batch", batch, 0)
    if chunk == 0:
        raise ValueError("batch must be at least 1")
    c = {f: 0 for f in COUNT_FIELDS}
    c["trials"] = trials
    m = block_size(n)
    stop_all = start + trials
    for b in range(start // m, -(-stop_all // m)):
        lo, hi = max(start, b * m) - b * m, min(stop_all, (b + 1) * m) - b * m
        # one random-number block at a time (≤ BLOCK_ELEMENTS entries); its first `hi` matrices do not
        # depend on how many are drawn, because the samplers fill the array sequentially
        block = ens.sample(n, hi, block_rng(seed, ens, n, b))
        for k in range(lo, hi, chunk):
            _accumulate(c, block[k:min(hi, k + chunk)], n, check)
    return c


def _accumulate(c: dict, A: np.ndarray, n: int, check: bool) -> None:
    res = analyse(A, tol=0.0)
    st = pair_statistics(A, res.witness)
    holds = np.asarray(res.holds, dtype=bool)
    x, y = st["x_ok"], st["y_ok"]
    if not np.array_equal(holds, x & y):  # analyse's witness is an attaining pair
        raise AssertionError("analyse's witness pair is inconsistent with its verdict")
    c["holds"] += int(holds.sum())
    c["both_reversed"] += int((~x & ~y).sum())
    c["mixed"] += int((x ^ y).sum())
    c["first_only"] += int((x & ~y).sum())
    c["ties"] += int(((~st["strict"]) | (st["zero"] > 0)).sum())
    P, N, Z = (st[f].astype(object) for f in ("pos", "neg", "zero"))  # Python ints: exact sums
    h = (P + Z) * (N + Z) - Z
    r = P * N
    c["rb_holds_num"] += int(h.sum())
    c["rb_holds_num_sq"] += int((h * h).sum())
    c["rb_reversed_num"] += int(r.sum())
    c["rb_reversed_num_sq"] += int((r * r).sum())
    c["imbalance_sq"] += int(((P - N) * (P - N)).sum())
    if check:
        kB = np.asarray(kappa(rollout_factor(A, validate=False), validate=False))
        direct = (res.bound - kB) <= _resolution(n)
        c["checked"] += len(A)
        for m in np.flatnonzero(direct != holds):
            c["float_mismatches"] += 1
            c["disagreements"] += int(exact_equality(A[m]) != bool(holds[m]))


# ------------------------------------------------------------------------------------- summary
def _t_quantile(df: int, conf: float = 0.95) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + conf / 2, df))


def _mean_ci(total: int, total_sq: int, trials: int, scale: int) -> tuple[float, float, float]:
    """Mean of per-matrix values v = num/scale from exact integer sums, with a Student-t 95% interval."""
    if trials == 0:
        return float("nan"), float("nan"), float("nan")
    mean = Fraction(total, trials * scale)
    if trials == 1:
        return float(mean), float("nan"), float("nan")
    # exact sample variance of num, then scaled
    var_num = Fraction(total_sq * trials - total * total, trials * (trials - 1))
    se = math.sqrt(max(float(var_num), 0.0) / trials) / scale
    h = _t_quantile(trials - 1) * se
    return float(mean), max(0.0, float(mean) - h), float(mean) + h


def summarise(cells: pd.DataFrame) -> pd.DataFrame:
    """Tidy table from count rows: direct fractions with Wilson 95% intervals, column-averaged
    estimates with Student-t 95% intervals, the phi coefficient ``corr`` of X and Y with its predicted
    ``4·p − 1``, and ``imbalance_c`` = E[(P − n/2)²]/n of the attaining pair."""
    rows = []
    for rec in cells.to_dict("records"):
        n, T = int(rec["n"]), int(rec["trials"])
        out = dict(rec)
        for ev in ("holds", "both_reversed", "mixed"):
            p, lo, hi = wilson(int(rec[ev]), T)
            out[f"p_{ev}"], out[f"{ev}_ci_low"], out[f"{ev}_ci_high"] = p, lo, hi
        out["p"], out["ci_low"], out["ci_high"] = out["p_holds"], out["holds_ci_low"], out["holds_ci_high"]
        nn1 = n * (n - 1)
        out["rb_p_holds"], out["rb_ci_low"], out["rb_ci_high"] = _mean_ci(
            int(rec["rb_holds_num"]), int(rec["rb_holds_num_sq"]), T, nn1)
        out["rb_p_reversed"], out["rb_reversed_ci_low"], out["rb_reversed_ci_high"] = _mean_ci(
            int(rec["rb_reversed_num"]), int(rec["rb_reversed_num_sq"]), T, nn1)
        # mixed = 1 − holds − reversed per matrix: its numerator is nn1 − h − r
        mixed_num = T * nn1 - int(rec["rb_holds_num"]) - int(rec["rb_reversed_num"])
        out["rb_p_mixed"] = mixed_num / (T * nn1) if T else float("nan")
        a, b = int(rec["holds"]), int(rec["first_only"])
        c_, d = int(rec["mixed"]) - b, int(rec["both_reversed"])
        den = (a + b) * (c_ + d) * (a + c_) * (b + d)
        out["corr"] = (a * d - b * c_) / math.sqrt(den) if den else float("nan")
        out["corr_predicted"] = 4 * out["rb_p_holds"] - 1
        out["imbalance_c"] = int(rec["imbalance_sq"]) / (4 * n * T) if T else float("nan")
        rows.append(out)
    df = pd.DataFrame(rows)
    first = ["n", "ensemble", "trials", "holds", "both_reversed", "mixed", "p", "ci_low", "ci_high"]
    return df[first + [c for c in df.columns if c not in first]]


# ----------------------------------------------------------------------------------- exact values
def holds_bounds(n: int) -> tuple[Fraction, Fraction]:
    """``(1/n, ⌊n²/4⌋ / (n(n−1)))``: bounds on P(holds) for every column-exchangeable continuous ensemble."""
    n = check_integer("n", n, 2)
    return Fraction(1, n), Fraction((n * n) // 4, n * (n - 1))


def exact_probability(n: int):
    """The ensemble-free exact P(holds) as a sympy Rational: ½ for n = 2, ⅓ for n = 3 (P(holds) =
    E[P·N]/(n(n−1)) with P + N = n, constant only for n ≤ 3); ValueError otherwise."""
    import sympy as sp

    n = check_integer("n", n, 2)
    products = {p * (n - p) for p in range(1, n)}
    if len(products) != 1:
        lo, hi = holds_bounds(n)
        raise ValueError(f"P(holds) at n={n} depends on the ensemble (only bounds {lo} ≤ P ≤ {hi} are universal)")
    return sp.Rational(products.pop(), n * (n - 1))


def pair_split_constant(ensemble: "str | Ensemble") -> float:
    r"""The split constant of a *fixed* pair of rows, c_W = lim_n E[(P − n/2)²]/n, to first order.

    For rows W_k / Σ W, W i.i.d. (mean μ, variance σ², density f), p′ = −∫ w f(w)² dw:
    c_W = ¼ + 2p′²σ²/μ² + p′·E|W − W′|/μ.  Dirichlet(α), W ~ Gamma(α): by quadrature (1/8 at α = 1).
    softmax(z/T), s = 1/T: p′ = −1/(2s√π), σ²/μ² = e^{s²} − 1, E|W − W′|/μ = 2(2Φ(s/√2) − 1).
    """
    from scipy import integrate, stats

    ens = parse_ensemble(ensemble)
    if ens.kind == "dirichlet":
        a = ens.param
        dist = stats.gamma(a)
        pprime = -integrate.quad(lambda w: w * dist.pdf(w) ** 2, 0, np.inf, limit=500)[0]
        # E|W − W'| = 2 ∫ F (1 − F)
        gmd = 2 * integrate.quad(lambda x: dist.cdf(x) * dist.sf(x), 0, np.inf, limit=500)[0]
        return 0.25 + 2 * pprime**2 * a / a**2 + pprime * gmd / a
    s = 1.0 / ens.param
    pprime = -1.0 / (2 * s * math.sqrt(math.pi))
    return 0.25 + 2 * pprime**2 * math.expm1(s * s) + pprime * 2 * (2 * stats.norm.cdf(s / math.sqrt(2)) - 1)
