"""The paper-vs-build summary: the decision rule, the depth claim and reading result folders."""
from __future__ import annotations

import pandas as pd
import pytest

from dobrushin.report import claims, summary_table as ST
from dobrushin.store.results import ResultStore
from dobrushin.math.stats import wilson


def _table(model, holds_by_layer, weights="pretrained", variant="content", n_tokens=10):
    rows = []
    for layer, holds in enumerate(holds_by_layer):
        for i, h in enumerate(holds):
            rows.append(dict(model=model, input_id=str(i), layer=layer, n_tokens=n_tokens, kappa=0.5,
                             kappa_factor=0.75 if h else 0.7, bound=0.75, slack=0.0 if h else 0.05,
                             holds=bool(h), variant=variant, weights=weights))
    return pd.DataFrame(rows)


def _rule(p, lo, hi, claim):
    """The labels restated from the book's definition, for the test: excluded → differs; reaching more
    than 5 points beyond the range → inconclusive; estimate inside → reproduced; else consistent."""
    if hi < claim.low or lo > claim.high:
        return "differs"
    if lo < claim.low - 0.05 or hi > claim.high + 0.05:
        return "inconclusive"
    return "reproduced" if claim.low <= p <= claim.high else "consistent"


@pytest.mark.parametrize("k,n,claim,expected", [
    (99, 100, "essentially_all", "reproduced"),    # 99% and the interval [94.6, 99.8] reaches ≤ 5 points below
    (80, 100, "essentially_all", "differs"),
    (64, 100, "vit", "inconclusive"),               # interval 54–73%: far wider than 63.5–64.5% ± 5
    (30, 100, "vit", "differs"),
    (25, 100, "baseline", "inconclusive"),
    (2700, 10_000, "baseline", "reproduced"),
    (60, 100, "tabular", "differs"),
    (54, 100, "vit", "differs"),      # Wilson 95% upper end 0.6344, just below the claim's 0.635
    (55, 100, "vit", "inconclusive"),   # upper end 0.6439 reaches into [0.635, 0.645], lower end 45%
    (6500, 10_000, "vit", "consistent"),  # 65.0% [64.1–65.9%]: reaches 64.5%, estimate outside
])
def test_judge_labels(k, n, claim, expected):
    from scipy.stats import binomtest

    p, lo, hi = wilson(k, n)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")  # an independent interval
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
    c = claims.CLAIMS[claim]
    assert claims.judge(p, lo, hi, c, n) == expected == _rule(k / n, ci.low, ci.high, c)


def test_summary_rows_carry_inputs_and_the_clustered_interval(tmp_path):
    """Every layer of an input agrees: the clustered interval is Wilson's at the number of inputs."""
    holds = [[True] * 5 + [False] * 3] * 6  # 6 layers; inputs 0–4 hold everywhere, 5–7 nowhere
    s = ResultStore(tmp_path, "dinov2")
    s.save("facebook/dinov2-small", {"m": 1}, _table("facebook/dinov2-small", holds), model="facebook/dinov2-small",
           provenance={"pretrained": {"source": "cache"}})
    t = ST.build_summary(tmp_path)
    r = t[(t["model"] == "facebook/dinov2-small") & (t["variant"] == "content")].iloc[0]
    assert (r["n_inputs"], r["n_pairs"]) == (8, 48)
    assert (r["cl_low"], r["cl_high"]) == pytest.approx(wilson(5, 8)[1:], abs=1e-12)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx(wilson(30, 48)[1:], abs=1e-12)
    assert r["status"] == "differs"


def test_judge_without_pairs_is_not_run():
    p, lo, hi = wilson(0, 0)
    assert claims.judge(0.5 * (lo + hi), lo, hi, claims.CLAIMS["baseline"], 0).startswith("not run")


def test_claims_match_the_papers_models_only():
    assert claims.content_claim("facebook/dinov2-small") == "essentially_all"
    assert claims.content_claim("timm/vit_small_patch14_reg4_dinov2.lvd142m") == "essentially_all"
    assert claims.content_claim("google/vit-base-patch16-224") == "vit"
    assert claims.content_claim("facebook/deit-base-patch16-224") == "deit"
    assert claims.content_claim("google/vit-large-patch16-224") is None  # not the paper's ViT-B/16
    assert claims.content_claim("facebook/deit-small-patch16-224") is None
    assert claims.content_claim("sentence-transformers/all-MiniLM-L6-v2") is None
    assert claims.special_claim("FacebookAI/roberta-base") == "special"
    assert claims.special_claim("google/vit-base-patch16-224") is None


def test_late_depth_rule():
    L = 4
    late = _table("m", [[1, 1], [1, 1], [1, 0], [0, 0]])  # failures in layers 2, 3 of 0..3
    r = ST.late_depth_row(late, "m")
    assert r["status"] == "reproduced" and r["n_pairs"] == 3
    early = _table("m", [[0, 1], [1, 1], [1, 1], [1, 0]])
    assert ST.late_depth_row(early, "m")["status"] == "differs"
    none = _table("m", [[1]] * L)
    assert ST.late_depth_row(none, "m")["status"] == "reproduced"
    assert ST.late_depth_row(_table("m", [[0, 1]]), "m")["status"].startswith("not run")


def test_build_summary_reads_only_the_latest_run(tmp_path):
    store = ResultStore(tmp_path, "language")
    t_old = _table("old/model", [[1, 1]])
    store.save("old/model", {"x": 1}, t_old, model="old/model", status="ok")
    t = pd.concat([_table("FacebookAI/roberta-base", [[1, 1, 1, 0]] * 2),
                   _table("FacebookAI/roberta-base", [[1, 0, 0, 0]] * 2, weights="untrained")])
    store.save("FacebookAI/roberta-base", {"x": 2}, t, model="FacebookAI/roberta-base", status="ok")
    store.record("distilbert/distilbert-base-uncased", {"x": 3}, model="distilbert/distilbert-base-uncased",
                 status="weights unavailable: offline")
    store.update_manifest(parameters={"models": ["FacebookAI/roberta-base", "distilbert/distilbert-base-uncased"]})
    s = ST.build_summary(tmp_path)
    assert "old/model" not in set(s["model"])
    rob = s[(s["model"] == "FacebookAI/roberta-base") & (s["variant"] == "content")].iloc[0]
    assert rob["n_pairs"] == 8 and rob["measured"] == pytest.approx(6 / 8)
    # 6 of 8: Wilson 95% interval 0.4093–0.9285 (scipy's binomtest), below the paper's [0.99, 1]
    assert (rob["ci_low"], rob["ci_high"]) == pytest.approx((0.4093, 0.9285), abs=1e-4)
    assert rob["status"] == "differs"
    un = s[(s["model"] == "FacebookAI/roberta-base") & s["variant"].str.startswith("untrained")]
    assert set(un["status"]) == {"no paper value"} and un["measured"].iloc[0] == pytest.approx(2 / 8)
    dist = s[s["model"] == "distilbert/distilbert-base-uncased"]
    assert len(dist) and all(st == "not run: weights unavailable: offline" for st in dist["status"])
    assert s.columns.tolist() == ST.COLUMNS


def test_bench_table_reads_the_target_ratio_from_the_analyse_row():
    """The speed row holds analyse's ratio against pdist, the target and whether it is met, the hardware-reference
    ratio and the torch path against cdist + test, as stored in the bench file."""
    from dobrushin.report.reproducing_tables import BENCH_TARGET, bench_table
    from dobrushin.store.bench import BENCH_COLUMNS

    rows = []
    for n, ratio in ((257, 4.5), (1370, 7.5)):
        base = {"n": n, "source": "dirichlet", "agree_exact": True, "holds_agree": 1.0, "note": ""}
        rows += [
            {**base, "method": "kernel f64 (batch)", "speedup_vs_scipy": 9.0, "matrices_per_s": 100.0},
            {**base, "method": "analyse f64 (validate+kernel)", "speedup_vs_pdist": ratio, "vs_hwref": 2 * ratio},
            {**base, "method": "kernel-torch (CUDA path, on CPU)", "matrices_per_s": 3.0},
            {**base, "method": "torch.cdist(p=1)+test", "matrices_per_s": 2.0},
        ]
    t = bench_table(pd.DataFrame(rows).reindex(columns=BENCH_COLUMNS)).set_index("n")
    assert list(t["ratio"]) == [4.5, 7.5] and (t["target"] == BENCH_TARGET).all()
    assert list(t["met"]) == ["no", "yes"]
    assert list(t["vs plain loop"]) == [9.0, 15.0] and list(t["torch vs cdist"]) == [1.5, 1.5]
    assert (t["identical answers"] == "yes").all()


def test_the_reference_grid_takes_the_most_precise_estimate_of_each_size(tmp_path):
    """reference.csv (model token counts) first, then the law chapter's column-averaged estimates, then the
    baseline grid's direct counts; other ensembles are ignored."""
    from dobrushin.experiments.results_loading import baseline_at, load_reference_grid

    d = tmp_path / "baseline"
    d.mkdir()
    pd.DataFrame({"n": [8], "ensemble": ["dirichlet(1)"], "p": [0.2729]}).to_csv(d / "reference.csv", index=False)
    # law.csv's p is its direct count, rb_p_holds its column-averaged estimate
    rb = [0.3, 0.25026, 0.4, 0.25005]
    pd.DataFrame({"n": [8, 512, 512, 2048], "ensemble": ["dirichlet(1)", "dirichlet(1)", "dirichlet(10)", "dirichlet(1)"],
                  "trials": [100] * 4, "p": [0.9] * 4, "ci_low": [0.8] * 4, "ci_high": [1.0] * 4, "rb_p_holds": rb,
                  "rb_ci_low": [x - 1e-4 for x in rb], "rb_ci_high": [x + 1e-4 for x in rb]}).to_csv(d / "law.csv", index=False)
    pd.DataFrame({"n": [4, 512], "ensemble": ["dirichlet(1)"] * 2, "trials": [1000, 1000],
                  "holds": [304, 255]}).to_csv(d / "baseline.csv", index=False)
    g = load_reference_grid(tmp_path).set_index("n")["p"]
    assert list(g.index) == [4, 8, 512, 2048]
    assert g[8] == 0.2729 and g[512] == 0.25026 and g[2048] == 0.25005 and g[4] == pytest.approx(0.304)
    # between two sizes, interpolated in log n
    assert baseline_at(load_reference_grid(tmp_path), 1024) == pytest.approx((0.25026 + 0.25005) / 2)
    (d / "law.csv").unlink()
    assert load_reference_grid(tmp_path).set_index("n")["p"][512] == pytest.approx(0.255)
