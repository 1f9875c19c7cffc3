"""The benchmark's own reference computations (no timings are asserted)."""
from __future__ import annotations

import numpy as np
import pytest

from dobrushin import analyse
from tools import bench


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
    # in a fresh process: after the rest of the suite this process's C heap may hold enough free, resident
    # memory to serve the 160 MB array without new pages, and the peak above the start would then be ~0
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = ("import json, numpy as np\nfrom tools import bench\n"
            "out, peak = bench.measure_peak(lambda: np.ones(20_000_000).sum())\n"
            "print(json.dumps([float(out), peak]))")
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out, peak = json.loads(p.stdout.strip().splitlines()[-1])
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


def test_plain_loop_reference_matches_scipy_bitwise():
    """The hardware reference sums in index order, as pdist does: the same κ bits."""
    from scipy.spatial.distance import pdist

    A = bench.dirichlet(30, 3, alpha=0.2, seed=4)
    ks = bench.plain_loop_kappa(A)
    assert [0.5 * pdist(a, "cityblock").max() for a in A] == ks.tolist()


def test_ci_plan_keeps_the_issue_ratios():
    ci = bench.plan(profile="ci")
    sizes = {(n, s) for n, s, _ in ci["groups"]}
    assert {(257, "dirichlet"), (1370, "dirichlet")} <= sizes
    assert any(n == 257 and s != "dirichlet" for n, s in sizes)  # real attention at n = 257
    assert ci["memory"] is None and ci["extraction"][1] >= 5
    with pytest.raises(ValueError, match="unknown bench profile"):
        bench.plan(profile="huge")


def test_spread():
    assert bench._spread([1.0]) == 0.0
    assert bench._spread([2.0, 3.0, 2.5]) == pytest.approx(0.5)


def test_run_group_rows_agree_and_summarise():
    """A tiny group through every method: all exact methods agree with scipy+test, and the summary
    names the targets."""
    b = bench.Bench("ci")
    A = bench.dirichlet(20, 3, seed=2)
    sub = dict(scipy=3, torch=2, cdist=2, naive=2, hwref=2, slow_reps=1)
    b.run_group(20, "dirichlet", A, sub, reps=2)
    import pandas as pd

    df = pd.DataFrame(b.rows).reindex(columns=bench.COLUMNS)
    exact = df[df.method.isin(["kernel f64 (batch)", "analyse f64 (validate+kernel)", "kernel f32 input (batch)",
                               "kernel-torch (CUDA path, on CPU)", "hardware ref (plain loop, 1 thread)"])]
    assert len(exact) == 5 and exact.agree_exact.all()
    assert (df.wall_s.dropna() > 0).all()
    env = dict(cpu="x", cpu_count=2, loadavg_start=0, loadavg_end=0, wall_s=1, reps=2)
    text = bench.summary(df, env)
    assert "analyse" in text and "torch path on CPU" in text and "hw ref" in text


def test_the_rows_fit_the_store_schema_the_report_reads():
    """What the benchmark (outside the package) writes is the schema in ``dobrushin.store.bench``: every
    column a row carries is in it (none dropped by the reindex), and the chapter's table reads the result."""
    import pandas as pd

    from dobrushin.report.reproducing_tables import bench_table
    from dobrushin.store.bench import BENCH_COLUMNS

    b = bench.Bench("ci")
    b.run_group(12, "dirichlet", bench.dirichlet(12, 3, seed=4), dict(scipy=3, torch=2, cdist=2, naive=2, hwref=2,
                                                                       slow_reps=1), reps=1)
    assert set(pd.DataFrame(b.rows).columns) <= set(BENCH_COLUMNS)
    t = bench_table(pd.DataFrame(b.rows).reindex(columns=BENCH_COLUMNS))
    assert len(t) == 1 and (t["n"][0], t["source"][0]) == (12, "dirichlet") and t["ratio"][0] > 0
    assert t["identical answers"][0] == "yes"
