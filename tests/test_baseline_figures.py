"""Figures and generated text of the baseline chapter and its appendix (report.baseline_figures,
report.law_figures): the sentences follow the numbers they are given."""
import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from dobrushin.random import cells as C

from dobrushin.random import ensembles as E
from dobrushin.random import law
from dobrushin.report import baseline_figures as BF
from dobrushin.report import law_figures as LF


def test_size_ranges():
    grid = [2, 3, 4, 5, 6, 8, 16, 256, 384, 512]
    assert BF.size_ranges([5, 6, 8, 16, 256, 512], grid) == "n = 5 to 256 and n = 512"
    assert BF.size_ranges([2, 4, 512], grid) == "n = 2, n = 4 and n = 512"
    assert BF.size_ranges([8], grid) == "n = 8"
    assert BF.size_ranges([], grid) == "no n"


def _uni(ps):
    ns = [2, 3, 4, 8, 64, 512][:len(ps)]
    return pd.DataFrame({"ensemble": "dirichlet(1)", "n": ns, "trials": 1000, "p": ps,
                         "ci_low": [p - 0.01 for p in ps], "ci_high": [p + 0.01 for p in ps]})


def test_uniform_text_follows_the_numbers():
    uni = _uni([0.5, 0.333, 0.31, 0.275, 0.255, 0.2505])
    t = BF.uniform_text(uni, (0.24, 0.30))
    assert "27.5%" in t and "inside the paper's band 24%–30%" in t
    assert "inside the band at n = 8 to 512" in t
    assert "entirely above it at n = 2 to 3" in t
    assert "acceptance" not in t and "of the grid" not in t
    t2 = BF.uniform_text(_uni([0.5, 0.333, 0.31, 0.35, 0.255, 0.2505]), (0.24, 0.30))
    assert "outside the paper's band" in t2


def test_ensembles_facets_one_panel_each():
    rows = [{"ensemble": e, "n": n, "p": 0.3, "ci_low": 0.29, "ci_high": 0.31} for e in ("a", "b", "c", "d")
            for n in (2, 8, 64)]
    fig = BF.ensembles_facets(pd.DataFrame(rows), ["a", "b", "c", "d"], {"a": "A", "b": "B"}, (0.24, 0.3), "band")
    vis = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in vis] == ["A", "B", "c", "d"]
    with pytest.raises(ValueError, match="not in the table"):
        BF.ensembles_facets(pd.DataFrame(rows), ["a", "x"], {}, (0.24, 0.3), "band")


def test_bound_text():
    t = BF.bound_text((0.24, 0.30))
    assert "$2/7\\approx 0.2857$ at $n=8$" in t
    assert "at any $n\\ge7$" in t and "$n\\ge5$" in t and "$n=5$ and $n=6$" in t
    assert "the top" not in t.split("Values above")[0]  # 2/7 is not called the top of the band
    df = LF.bounds_table(10)
    assert list(df["upper (decimal)"].round(6))[5:7] == [round(2 / 7, 6)] * 2


def test_law_figures_draw():
    grid = C.run_grid([(e, n, 200) for e in ("dirichlet(1)", "softmax_gaussian(1)") for n in (3, 8, 16)], 1,
                      check=False, cache=None)
    ens = ["dirichlet(1)", "softmax_gaussian(1)"]
    assert len(LF.curve_figure(grid, ens).axes) == 2


def test_rate_table_is_the_split_constant_at_the_largest_size():
    """¼ − c_n at the largest size of each ensemble with c_W of order one."""
    grid = C.run_grid([(e, n, 200) for e in ("dirichlet(1)", "softmax_gaussian(1)") for n in (3, 8, 16)], 1,
                      check=False, cache=None)
    rt = LF.rate_table(grid, ["dirichlet(1)", "softmax_gaussian(1)"], min_n=8)
    assert list(rt["ensemble"]) == [E.parse_ensemble(e).label for e in law.finite_first_order(["dirichlet(1)", "softmax_gaussian(1)"])]
    r = grid[(grid["ensemble"] == "dirichlet(1)") & (grid["n"] == 16)]
    assert rt["largest n"].iloc[0] == 16
    # the appendix's identity P(holds) = ¼ + (¼ − c_n)/(n − 1), on the column-averaged estimate
    assert rt["¼ − c_n"].iloc[0] == pytest.approx(15 * (float(r["rb_p_holds"].iloc[0]) - 0.25), abs=1e-12)
    assert rt["limit ¼ − c_W"].iloc[0] == 0.25 - E.pair_split_constant("dirichlet(1)")
