"""The benchmark's own reference computations (no timings are asserted)."""
from __future__ import annotations

import numpy as np
import pytest

from dobrushin import analyse
from dobrushin.tools import bench


@pytest.mark.parametrize("n", [1, 2, 5, 40])
@pytest.mark.parametrize("tol", [0.0, 1e-12, 0.05])
def test_scipy_reference_matches_the_library(n, tol):
    """``scipy+test`` (the agreement reference of the benchmark) gives the library's answers bit for bit."""
    A = bench.dirichlet(n, 4, alpha=0.1, seed=n)
    A[0] = np.eye(n)[np.arange(n)[::-1]]  # a permutation: ties everywhere
    iu = np.triu_indices(n, 1)
    res = analyse(A, tol)
    for m in range(4):
        (k, kf, h), t_pdist, t_all = bench.scipy_test(A[m], tol, iu)
        assert (k, kf, h) == (res.kappa[m], res.kappa_factor[m], res.holds[m])
        assert 0 <= t_pdist <= t_all


def test_measure_peak_sees_a_large_allocation():
    out, peak = bench.measure_peak(lambda: np.ones(20_000_000).sum())
    assert out == 20_000_000
    if peak is None:  # said, not passed silently
        pytest.skip("peak memory is not measurable here (needs Linux /proc/self/clear_refs and VmHWM)")
    assert peak >= 100 * 2**20  # the 160 MB temporary was resident at the peak


def test_plans_cover_the_issue_sizes():
    full = bench.plan(quick=False)
    assert {n for n, _, _ in full["groups"]} == {64, 197, 257, 1370}
    assert full["memory"] == (1370, 64)
    assert {s for _, s, _ in full["groups"]} >= {"dirichlet", "minilm", "vit-b16-224"}
    quick = bench.plan(quick=True)
    assert all(c <= 16 for _, _, c in quick["groups"])
