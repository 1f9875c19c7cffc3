"""The sections that show why the condition holds or fails: the case rule of the atlas, the attaining pair and its
margins, the atlas kept as a keyed analysis, the whole-rollout split, identical controls, downloads."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from dobrushin.experiments.atlas import choose_cases, pair_and_margins
from dobrushin.math.coefficient import attaining_pairs, equality_holds
from dobrushin.report.insight import download_links
from dobrushin.report.tables import rollout_summary


def _table():
    rows = []
    for inp in range(6):
        for layer in range(4):
            holds = (inp + layer) % 3 != 0
            rows.append({"model": "m", "weights": "pretrained", "variant": "content", "input_id": f"x{inp}",
                         "layer": layer, "holds": holds, "slack": 0.0 if holds else 0.01 * (inp + 1) + 0.001 * layer})
    return pd.DataFrame(rows)


def test_cases_follow_the_stated_rule():
    t = _table()
    c = choose_cases(t, model="m", weights="pretrained", variant="content", seed=3, n_random=2)
    assert list(c["rule"]) == ["largest", "random", "random", "holding"]
    fails = t[~t["holds"]]
    assert c.iloc[0]["slack"] == fails["slack"].max()
    assert not c.iloc[1:3]["holds"].any() and c.iloc[3]["holds"]
    # the random draws never repeat the largest case, and the same seed gives the same cases
    assert len(c.iloc[:3].drop_duplicates(["input_id", "layer"])) == 3
    again = choose_cases(t, model="m", weights="pretrained", variant="content", seed=3, n_random=2)
    pd.testing.assert_frame_equal(c, again)
    none = choose_cases(t, model="other", weights="pretrained", variant="content")
    assert len(none) == 0


def test_pair_and_margins_against_the_definition():
    rng = np.random.default_rng(0)
    for _ in range(200):
        A = rng.dirichlet(np.ones(5), size=5)
        i, j, a, b, npairs = pair_and_margins(A)
        assert (i, j) in attaining_pairs(A)
        assert npairs == len(attaining_pairs(A))
        assert a == pytest.approx(A[i, i] - A[j, i]) and b == pytest.approx(A[j, j] - A[i, j])
        # the drawn pair is mutually self-dominant exactly when the condition holds
        assert (a >= -1e-12 and b >= -1e-12) == bool(equality_holds(A))


def test_atlas_values_count_agreement_and_how_failing_cases_fail():
    from dobrushin.report.insight import atlas_values

    cf = pd.DataFrame({"holds": [False, False, False, True], "table_holds": [False, True, False, True],
                       "margin_i": [-0.1, 0.2, -0.3, 0.1], "margin_j": [-0.2, -0.1, 0.4, 0.0]})
    assert atlas_values(cf) == {"cases": 4, "agree": 3, "failing": 3, "both": 1, "one": 2}
    # the supervised-ViT chapter's sentence reads them whether or not its overview draws an atlas
    import types

    from dobrushin.report.insight import InsightSections

    got = InsightSections.overview(types.SimpleNamespace(table=pd.DataFrame(), notebook="supervised_vit")).values
    assert got == {f"supervised_vit-atlas-{k}": "—" for k in ("cases", "agree", "failing", "both", "one")}


def test_rollout_summary_splits_the_ratio_into_its_two_factors():
    roll = pd.DataFrame({"model": "m", "weights": "pretrained", "variant": "content", "input_id": ["a", "b", "c"],
                         "n_layers": 4, "n_tokens": 9, "kappa_rollout": [0.1, 0.2, 0.3],
                         "factor_product": [0.4, 0.4, 0.6], "bound": [0.4, 0.5, 0.6], "layers_holding": [4, 3, 4]})
    g = rollout_summary(roll).iloc[0]
    assert g["median_ratio"] == pytest.approx(np.median([0.25, 0.4, 0.5]))
    assert g["median_submult"] == pytest.approx(0.5) and g["median_layers"] == pytest.approx(1.0)


def test_download_links_point_from_executed_into_results(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("title: x\n")
    (tmp_path / "lib" / "dobrushin").mkdir(parents=True)
    res = tmp_path / "results"
    (res / "language").mkdir(parents=True)
    (res / "language" / "m.parquet").write_bytes(b"x")
    (res / "language" / "manifest.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    links = download_links(res, "language")
    assert links[0] == "{download}`m.parquet <../results/language/m.parquet>`"
    assert not any("manifest" in x for x in links)
    assert links[-2:] == ["{download}`summary.csv <../results/summary.csv>`",
                          "{download}`scorecard.csv <../results/scorecard.csv>`"]


def _tiny_vit(ids, seed: int):
    """``(lm, inputs, extraction, table)``: an untrained 2-layer ViT on random 32 px images ``ids``, measured."""
    from types import SimpleNamespace

    from transformers import ViTConfig, ViTModel

    from dobrushin import extract_attention
    from dobrushin.experiments.measure import measure

    torch.manual_seed(0)
    model = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               image_size=32, patch_size=8, attn_implementation="eager"), add_pooling_layer=False).eval()
    g = torch.Generator().manual_seed(seed)
    pix = [torch.randn(3, 32, 32, generator=g) for _ in ids]
    lm = SimpleNamespace(model=model, kind="vision", preprocess=lambda items: {"pixel_values": torch.stack(items)})
    inputs = SimpleNamespace(ids=list(ids), items=lambda a, b: pix[a:b])
    ex = extract_attention(model, lm.preprocess(pix))
    return lm, inputs, ex, measure(ex.attention, ex.roles, model="tiny", input_ids=inputs.ids, weights="untrained")


def test_recompute_finds_the_tables_verdict_pair_and_margins_on_a_tiny_vit():
    """The atlas re-runs the model: on a tiny ViT its κ, slack and verdict are the measurement's, its pair attains κ
    and its margins are the definition's, and the pair's token positions and roles are those of the sequence."""
    from dobrushin.experiments.atlas import recompute
    from dobrushin.math.coefficient import restrict

    lm, inputs, ex, table = _tiny_vit(["a", "b", "c"], seed=0)
    chosen = table.assign(rule="random")
    cases = recompute(lm, inputs, chosen)
    assert len(cases) == len(table)
    for c, r in zip(cases, table.itertuples()):
        assert c.holds == r.holds == c.table_holds
        assert c.kappa == pytest.approx(r.kappa, abs=1e-6) and c.slack == pytest.approx(r.slack, abs=1e-6)
        b = inputs.ids.index(c.input_id)
        keep = np.asarray(ex.keep(b, c.variant))
        A = restrict(ex.attention[b, c.layer].double(), keep).numpy()
        assert (c.i, c.j) in attaining_pairs(A)
        assert c.margin_i == pytest.approx(A[c.i, c.i] - A[c.j, c.i]) and c.margin_j == pytest.approx(A[c.j, c.j] - A[c.i, c.j])
        assert (c.ti, c.tj) == (int(keep[c.i]), int(keep[c.j]))
        assert c.role_i == ex.roles[b][c.ti] and c.image.shape == (32, 32, 3)
    assert {c.role_i for c in cases if c.variant == "content"} == {"content"}


def test_measured_atlas_is_kept_reused_and_checked(tmp_path):
    """The atlas as a keyed analysis: computed once (the model is built only on a miss), read back equal (the photo
    within its 8-bit rounding), made again for other chosen cases, and passed by make verify's check."""
    from dobrushin.experiments.atlas import check_atlas, measured_atlas, recompute
    from dobrushin.store.results import ResultStore

    lm, inputs, _, table = _tiny_vit(["a", "b"], seed=1)
    chosen = table.assign(rule="random")
    store, built = ResultStore(tmp_path, "ch"), []

    def make():
        built.append(1)
        return lm

    first = measured_atlas(store, "atlas-tiny", chosen, "k1", make, inputs, seed=0)
    again = measured_atlas(store, "atlas-tiny", chosen, "k1", make, inputs, seed=0)
    assert len(built) == 1 and len(first) == len(chosen)
    direct = recompute(lm, inputs, chosen)
    for a, b, c in zip(first, again, direct):
        assert (a.holds, a.i, a.j, a.kappa, a.margin_i) == (b.holds, b.i, b.j, b.kappa, b.margin_i) \
            == (c.holds, c.i, c.j, c.kappa, c.margin_i)
        assert np.abs(a.image - c.image).max() <= 0.5 / 255 + 1e-12
    from dobrushin.experiments.atlas import cases_frame
    from dobrushin.report.insight import atlas_values
    from dobrushin.report.kappa_figures import atlas_figure

    v, cf = atlas_values(cases_frame(first)), cases_frame(first)  # the counts the chapter's sentence glues
    assert (v["cases"], v["agree"], v["failing"]) == (len(first), len(first), int((~cf["holds"]).sum()))
    assert v["both"] + v["one"] == v["failing"] and set(atlas_values().values()) == {"—"}  # no atlas: every count "—"
    assert sum(ax.get_visible() for ax in atlas_figure(first).axes) == len(first)  # a panel per case
    measured_atlas(store, "atlas-tiny", chosen.iloc[:2], "k1", make, inputs, seed=0)
    assert len(built) == 2
    value = json.loads((tmp_path / "ch" / "atlas-tiny.analysis.json").read_text())["value"]
    r = check_atlas(value, lm, inputs, atol=1e-6)
    assert r["rows"] == 2 and r["mismatches"] == r["number_failures"] == 0 and r["max_abs_diff"] <= 1e-6
    value["cases"][1]["ti"] += 1  # drawn at another token: a mismatch, as a different verdict or pair would be
    assert check_atlas(value, lm, inputs, atol=1e-6)["mismatches"] == 1


def test_tabular_tokens_follow_the_ft_transformer_order():
    from dobrushin.data.tabular_data import from_splits
    from dobrushin.experiments.atlas import tabular_tokens
    from dobrushin.experiments.tabular import TabularInputs

    rng = np.random.default_rng(0)
    parts = ("train", "val", "test")
    d = from_splits("toy", "regression", y={p: rng.normal(size=5).astype(np.float32) for p in parts},
                    X_num={p: rng.normal(size=(5, 2)).astype(np.float32) for p in parts},
                    X_cat={p: rng.integers(0, 3, size=(5, 1)) for p in parts}, cat_cardinalities=[3])
    inp = TabularInputs(d, "test", np.array([3, 1]))
    toks = tabular_tokens(inp, 1)
    assert toks[0] == "[CLS]" and len(toks) == d.n_tokens
    assert toks[1] == f"num0={float(d.X_num['test'][1, 0]):+.2f}" and toks[3] == f"cat0=#{int(d.X_cat['test'][1, 0])}"


def test_the_why_figure_and_its_numbers_are_computed_from_the_files(tmp_path):
    import json
    from types import SimpleNamespace

    from scipy.stats import spearmanr

    import matplotlib

    matplotlib.use("Agg")
    from dobrushin.report.summary_chapter import SummaryChapter
    from dobrushin.report.summary_figures import why_points

    rng = np.random.default_rng(0)
    rows = []
    for m, w, p, tr in (("a/x", "pretrained", 0.9, 3.0), ("a/x", "untrained", 0.3, 1.1), ("b/y", "pretrained", 0.5, 1.5),
                        ("c/z", "pretrained", 0.1, 0.2), ("c/z", "untrained", 0.25, 1.0)):
        for i in range(40):
            rows.append({"model": m, "weights": w, "variant": "content", "input_id": str(i), "layer": 0,
                         "holds": bool(rng.random() < p), "trace": tr + 0.1 * rng.random(), "n_tokens": 5})
    table = pd.DataFrame(rows)
    pts = why_points(table)
    for r in pts.itertuples():  # one point per model and weights: its mean over the rows
        g = table[(table.model == r.model) & (table.weights == r.weights)]
        assert r.fraction == g.holds.mean() and abs(r.trace - g.trace.mean()) < 1e-12 and r.n == len(g)
    (tmp_path / "language").mkdir()
    layers = [{"model": "m", "weights": "pretrained", "condition": c, "variant": "content", "layer": l, "k": k,
               "n": 16, "fraction": k / 16, "trace": t} for c, k, t in (("original", 0, 0.01), ("ablated", 15, 2.0))
              for l in range(2)]
    (tmp_path / "language" / "mpnet-ablation.analysis.json").write_text(json.dumps({"value": {"pretrained": {
        "layers": layers, "cosine": [0.9] * 16, "info": {"before": [-6.0, -8.0]}}}}))
    baseline = pd.DataFrame({"n": [4, 8, 64], "p": [0.3044, 0.27, 0.255]})  # as results_loading.load_baseline
    glued = {k: str(v) for k, v in SummaryChapter.why(SimpleNamespace(results=tmp_path, family_table=table,
                                                                       baseline=baseline)).items()}
    assert (tmp_path / "figures" / "summary-why.png").is_file()  # the introduction shows it
    tr = pts[pts.weights == "pretrained"]
    assert glued["why_trained"] == "3"
    assert glued["why_rho"] == f"{spearmanr(tr.trace, tr.fraction)[0]:+.2f}".replace("-", "−")
    assert glued["why_random"] == "25.5%–30.4%" and glued["why_below"] == "z"  # the trained model with trace < 1
    assert (glued["why_mpnet_before_k"], glued["why_mpnet_after_k"], glued["why_mpnet_n"]) == ("0", "30", "32")
    assert (glued["why_mpnet_before_trace"], glued["why_mpnet_after_trace"], glued["why_mpnet_bias"]) == ("0.01", "2", "−7.0")


def test_the_ablation_category_follows_the_counts():
    from dobrushin.report.insight import ablation_verdict

    assert ablation_verdict(0, 192, 187, 192) == "the cause"  # none before, nearly all after
    assert ablation_verdict(20, 192, 90, 192) == "part of the cause"  # raised, failures left
    assert ablation_verdict(100, 192, 90, 192) == "not the cause"  # lowered
    assert ablation_verdict(192, 192, 192, 192) == "nothing to explain"
    assert ablation_verdict(0, 0, 0, 0) == "not run"
    # monotone: from the same start, more pairs holding after never reads as a weaker conclusion
    rank = {"not the cause": 0, "part of the cause": 1, "the cause": 2}
    for k0 in (0, 50, 96, 97, 150, 191):
        levels = [rank[ablation_verdict(k0, 192, k1, 192)] for k1 in range(193)]
        assert levels == sorted(levels), k0
        assert levels[-1] == 2  # every pair holding after: the cause


def test_tabular_uniformity_pools_the_seeds_of_a_benchmark(monkeypatch):
    """The tabular chapter's κ(A) table: one row per benchmark and weights, its seeds pooled, with the values of
    kappa_table on the pooled rows (checked against pandas on the same rows)."""
    import types

    import dobrushin.report.tabular_chapter as TC

    rng = np.random.default_rng(0)
    rows = []
    for seed in (0, 1):
        for w, scale in (("pretrained", 0.05), ("untrained", 0.5)):
            for i in range(6):
                for layer in range(3):
                    rows.append({"model": f"FT-Transformer/Adult seed {seed}", "weights": w, "variant": "content",
                                 "layer": layer, "n_tokens": 14, "kappa": scale * (0.4 + 0.3 * layer) * rng.uniform(0.9, 1.1),
                                 "holds": bool(rng.random() < 0.3)})
    table = pd.DataFrame(rows)
    monkeypatch.setattr(TC.F, "table", lambda df, **kw: df)  # the frame the page would show
    got = TC.TabularChapter.uniformity(types.SimpleNamespace(table=table), count=16)[0].set_index("weights")
    assert len(got) == 2 and set(got["model"]) == {"Adult"}  # both seeds in one row per weights
    from dobrushin.experiments.structure import random_kappa

    rk = float(np.median(random_kappa(14, count=16, seed=0)))
    for w, label in (("pretrained", "trained weights"), ("untrained", "untrained control")):
        g = table[table["weights"] == w]  # both seeds' rows
        per = g.groupby("layer")["kappa"].median()
        r = got.loc[label]
        assert r["κ(A) per layer"].startswith(f"{per.min():.2f}") and r["κ(A) per layer"].endswith(f"{per.max():.2f}")
        assert r["holds"] == f"{100 * g['holds'].mean():.1f}%" and r["random κ"] == f"{rk:.2f} (n = 14)"
