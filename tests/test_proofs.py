"""The Coq statements of proofs/Dobrushin.v, checked in exact rational arithmetic on random matrices.

``pair_identity``, ``pair_bound``, ``pair_eq``, ``layer_bound``, ``layer_bound_eq`` (Dobrushin.v), ``kappa_mul`` and
the rollout bounds (Rollout.v) are restated here over ``fractions.Fraction`` with the same definitions as the Coq files (``dist A i j = 1/2 sum_k |A_ik - A_jk|``,
``kappa`` the maximum over all pairs, ``layer A = 1/2 (I + A)``) and checked with ``==`` (exact: no rounding).
The library computes in float64; on matrices whose entries are multiples of 1/64 every sum it forms is
exact, so its answers must equal the exact ones (its documented ``tol=0`` guarantee); on general rationals
they must agree within a float64 rounding bound stated in :func:`test_library_agrees_with_exact_values`.
``make proofs`` (run by ``make test``) is what compiles the Coq files; here only their text is read.
"""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dobrushin as db
from dobrushin.report import proofs as P

HALF = Fraction(1, 2)


# ---- the Coq definitions, exactly -------------------------------------------------------------

def dist(A, i, j):
    return HALF * sum(abs(a - b) for a, b in zip(A[i], A[j]))


def kappa(A):
    n = len(A)
    return max((dist(A, i, j) for i in range(n) for j in range(n)), default=Fraction(0))


def layer(A):
    n = len(A)
    return [[HALF * ((1 if i == k else 0) + A[i][k]) for k in range(n)] for i in range(n)]


def self_dominant(A, i, j):
    return A[j][i] <= A[i][i] and A[i][j] <= A[j][j]


def pair_identity_rhs(A, i, j):
    """The right-hand side of Coq's ``pair_identity``."""
    rest = sum((abs(A[i][k] - A[j][k]) for k in range(len(A)) if k not in (i, j)), Fraction(0))
    return Fraction(1, 4) * (2 + (A[i][i] - A[j][i]) + (A[j][j] - A[i][j]) + rest)


# ---- random row-stochastic matrices with rational entries ------------------------------------

@st.composite
def stochastic(draw, dyadic=False, min_n=1, max_n=6):
    n = draw(st.integers(min_n, max_n))
    rows = []
    for _ in range(n):
        if dyadic:  # n integers summing to 64: cut [0, 64] at n - 1 points
            cuts = sorted(draw(st.lists(st.integers(0, 64), min_size=n - 1, max_size=n - 1)))
            w = [b - a for a, b in zip([0, *cuts], [*cuts, 64])]
        else:
            w = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n).filter(any))
        s = sum(w)
        rows.append([Fraction(x, s) for x in w])
    return rows


def as_float(A):
    return np.array([[float(x) for x in r] for r in A], dtype=np.float64)


@settings(max_examples=300, deadline=None)
@given(stochastic())
def test_pair_identity_bound_and_equality_exact(A):
    F = layer(A)
    n = len(A)
    for i in range(n):
        for j in range(n):
            bound = HALF * (1 + dist(A, i, j))
            assert dist(F, i, j) <= bound                                          # pair_bound
            if i != j:
                assert dist(F, i, j) == pair_identity_rhs(A, i, j)                 # pair_identity
                assert (dist(F, i, j) == bound) == self_dominant(A, i, j)          # pair_eq


@settings(max_examples=300, deadline=None)
@given(stochastic())
def test_layer_bound_and_equality_case_exact(A):
    n = len(A)
    kA, kF = kappa(A), kappa(layer(A))
    assert kF <= HALF * (1 + kA)                                                    # layer_bound
    witness = any(i != j and dist(A, i, j) == kA and self_dominant(A, i, j)
                  for i in range(n) for j in range(n))
    assert (kF == HALF * (1 + kA)) == witness                                       # layer_bound_eq


def test_equality_case_has_both_outcomes():
    """The property tests above are not vacuous: both sides of layer_bound_eq occur."""
    yes = [[Fraction(3, 4), Fraction(1, 4)], [Fraction(1, 4), Fraction(3, 4)]]
    no = [[Fraction(1, 4), Fraction(3, 4)], [Fraction(3, 4), Fraction(1, 4)]]
    assert kappa(layer(yes)) == HALF * (1 + kappa(yes))
    assert kappa(layer(no)) < HALF * (1 + kappa(no))


@settings(max_examples=200, deadline=None)
@given(stochastic(dyadic=True))
def test_library_equals_exact_values_on_dyadic_matrices(A):
    X = as_float(A)
    assert db.kappa(X) == float(kappa(A))
    assert db.kappa(db.rollout_factor(X)) == float(kappa(layer(A)))
    assert db.layer_bound(X) == float(HALF * (1 + kappa(A)))
    exact = len(A) >= 2 and kappa(layer(A)) == HALF * (1 + kappa(A))
    assert bool(db.equality_holds(X, tol=0)) == exact


@settings(max_examples=200, deadline=None)
@given(stochastic())
def test_library_agrees_with_exact_values(A):
    # Each entry is rounded once to float64 (relative error <= 2^-53, entries <= 1); a row difference
    # and a sum of n absolute values add at most n + 2 further roundings of quantities <= 2, and the
    # rollout factor adds two more: 16 (n + 4) 2^-53 bounds the error of every value compared here.
    X = as_float(A)
    tol = 16 * (len(A) + 4) * 2.0 ** -53
    assert db.kappa(X) == pytest.approx(float(kappa(A)), abs=tol, rel=0)
    assert db.kappa(db.rollout_factor(X)) == pytest.approx(float(kappa(layer(A))), abs=tol, rel=0)


def matmul(P, Q):
    n = len(P)
    return [[sum((P[i][m] * Q[m][k] for m in range(n)), Fraction(0)) for k in range(n)] for i in range(n)]


@st.composite
def layer_stacks(draw):
    n = draw(st.integers(1, 5))
    L = draw(st.integers(1, 4))
    return [draw(stochastic(min_n=n, max_n=n)) for _ in range(L)]


@settings(max_examples=150, deadline=None)
@given(layer_stacks())
def test_submultiplicativity_and_rollout_bounds_exact(As):
    """kappa_mul, rollout_bound_factors and rollout_bound of proofs/Rollout.v, exactly; and the library's
    rollout and rollout_bound within a float64 rounding bound (L products of n-term sums: 64 L n 2^-53)."""
    n = len(As[0])
    R = [[Fraction(int(i == k)) for k in range(n)] for i in range(n)]  # Coq's rollout: foldr, B_L ... B_1
    for A in reversed(As):
        R = matmul(R, layer(A))
    for A1 in As:
        for A2 in As:
            assert kappa(matmul(A1, A2)) <= kappa(A1) * kappa(A2)                           # kappa_mul
    prod_factors, prod_bounds = Fraction(1), Fraction(1)
    for A in As:
        prod_factors *= kappa(layer(A))
        prod_bounds *= HALF * (1 + kappa(A))
    assert kappa(R) <= prod_factors <= prod_bounds                                       # rollout_bound*
    X = np.stack([as_float(A) for A in As])
    tol = 64 * len(As) * (n + 4) * 2.0 ** -53
    assert db.kappa(db.rollout(X)) == pytest.approx(float(kappa(R)), abs=tol, rel=0)
    assert db.rollout_bound(X) == pytest.approx(float(prod_bounds), abs=tol, rel=0)


# ---- the Python statements above are the Coq ones ---------------------------------------------

def squash(s):
    return re.sub(r"\s+", " ", s)


def coq_text():
    return "\n".join((P.proofs_dir() / f).read_text(encoding="utf-8") for f in P.SOURCES)


def coq_definition(name):
    """The Coq ``Definition name ...`` sentence (it ends at the first full stop that ends a line)."""
    m = re.search(rf"^(Definition {re.escape(name)}\b.*?\.)\s*$", coq_text(), re.M | re.S)
    assert m, f"no Definition named {name!r} in proofs/"
    return m.group(1).strip()


def coq_statement(name):
    """The statement of the Coq ``Theorem``/``Lemma`` ``name``: from its keyword up to ``Proof.``."""
    m = re.search(rf"^((?:Theorem|Lemma|Corollary) {re.escape(name)}\b.*?)^Proof\.", coq_text(), re.M | re.S)
    if not m:
        raise KeyError(f"no Theorem or Lemma named {name!r} in proofs/")
    return m.group(1).strip()


def test_coq_statements_are_the_ones_tested_here():
    assert squash(coq_definition("dist")) == "Definition dist A i j : R := 2^-1 * \\sum_k `|A i k - A j k|."
    assert squash(coq_definition("kappa")) == \
        "Definition kappa A : R := \\big[Num.max/0]_(p : 'I_n * 'I_n) dist A p.1 p.2."
    assert squash(coq_definition("layer")) == "Definition layer A : 'M[R]_n := 2^-1 *: (1%:M + A)."
    assert squash(coq_definition("self_dominant")) == \
        "Definition self_dominant A i j := (A j i <= A i i) && (A i j <= A j j)."
    assert "(forall i k, 0 <= A i k) /\\ (forall i, \\sum_k A i k = 1)" in coq_definition("stochastic")
    assert squash(coq_statement("pair_identity")).endswith(
        "dist (layer A) i j = 4^-1 * (2 + (A i i - A j i) + (A j j - A i j) "
        "+ \\sum_(k | (k != i) && (k != j)) `|A i k - A j k|).")
    assert "kappa (layer A) <= 2^-1 * (1 + kappa A)" in coq_statement("layer_bound")
    assert "[/\\ i != j, dist A i j = kappa A & self_dominant A i j]" in coq_statement("layer_bound_eq")
    assert "kappa (P *m Q) <= kappa P * kappa Q" in coq_statement("kappa_mul")
    assert squash(coq_definition("rollout")).endswith(":= foldr (fun A M => M *m layer A) 1%:M As.")
    assert "kappa (rollout As) <= \\prod_(A <- As) (2^-1 * (1 + kappa A))" in coq_statement("rollout_bound")


def test_every_result_shown_as_checked_is_checked_by_make_proofs():
    names = P.checked_names()
    assert [c[0] for c in P.CHECKED if c[0] not in names] == []
    for name in names:
        assert coq_statement(name).split()[1] == name
    text = P.statements_text()
    assert all(f"`{name}`" in text and f"{{prf:ref}}`{label}`" in text for name, label in P.CHECKED)
    assert text.count("{download}`") == len({label for _, label in P.CHECKED})
    with pytest.raises(KeyError, match="nonesuch"):
        coq_statement("nonesuch")


def test_no_escape_hatch_in_the_coq_sources():
    for f in P.proofs_dir().glob("*.v"):
        assert not re.search(r"\b(Admitted|admit|Axiom|Parameter|Conjecture)\b", f.read_text()), f
