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


def test_uniform_values_follow_the_numbers():
    v = BF.uniform_values(_uni([0.5, 0.333, 0.31, 0.275, 0.255, 0.2505]), (0.24, 0.30))
    assert (v["p8"], v["p8-where"], v["band"]) == ("27.5%", "inside", "24%–30%")
    assert v["inside"] == "n = 8 to 512" and v["above"] == "n = 2 to 3" and v["below"] == "no n"
    assert (v["p2"], v["p2-ci"], v["nmax"], v["pmax"]) == ("0.5000", "0.4900–0.5100", "512", "25.1%")
    assert BF.uniform_values(_uni([0.5, 0.333, 0.31, 0.35, 0.255, 0.2505]), (0.24, 0.30))["p8-where"] == "outside"


def test_ensembles_facets_one_panel_each():
    rows = [{"ensemble": e, "n": n, "p": 0.3, "ci_low": 0.29, "ci_high": 0.31} for e in ("a", "b", "c", "d")
            for n in (2, 8, 64)]
    fig = BF.ensembles_facets(pd.DataFrame(rows), ["a", "b", "c", "d"], {"a": "A", "b": "B"}, (0.24, 0.3), "band")
    vis = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in vis] == ["A", "B", "c", "d"]
    with pytest.raises(ValueError, match="not in the table"):
        BF.ensembles_facets(pd.DataFrame(rows), ["a", "x"], {}, (0.24, 0.3), "band")


def test_bound_values():
    v = BF.bound_values((0.24, 0.30))
    assert (v["ref"], v["ref-decimal"], v["from"]) == ("2/7", "0.2857", "7")  # 2/7 at n = 8, not exceeded from 7 on
    assert (v["top-from"], v["top-at"], v["upper-part"]) == ("5", "n = 5 and n = 6", "28.6%–30%")
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


def test_ensembles_and_theorem_check_values():
    rows = [{"ensemble": e, "n": n, "p": p, "trials": 400, "ci_low": p - 0.02, "ci_high": p + 0.03,
             "checked": 400, "float_mismatches": int(e == "b"), "disagreements": 0, "ties": 2}
            for e, shift in (("a", 0.0), ("b", 0.01)) for n, p in ((2, 0.5 + shift), (3, 1 / 3), (8, 0.28 + shift))]
    res = pd.DataFrame(rows)
    v = BF.ensembles_values(res, {"a": "A"})
    assert (v["at8-min"], v["at8-min-label"], v["at8-max"], v["at8-max-label"]) == ("28.0%", "A", "29.0%", "b")
    assert v["z"] == f"{0.01 / (0.25 / 400) ** 0.5:.1f}" and v["small"] == "2"  # b at n = 2: 0.01 off ½
    assert (v["big"], v["big-lo"], v["big-hi"]) == ("8", "26.0%", "32.0%")
    t = BF.theorem_check_values(res)
    assert (t["trials"], t["checked"], t["mismatches"], t["disagreements"], t["ties"]) == ("2,400", "2,400", "3", "0", "12")
