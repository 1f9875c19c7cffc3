"""The condition along training (dobrushin.experiments.epochs): the trajectory trains the weights fit() trains,
its fractions are the model tables' own, and it is cached and resumable."""
import math

import numpy as np
import pandas as pd
import pytest

from dobrushin.data import tabular_data
from dobrushin.experiments import epochs as E
from dobrushin.experiments.tabular import measure_tabular
from dobrushin.models import ft_transformer as ft
from dobrushin.store.results import ResultStore

CAP = 3  # the protocol's epoch cap here: it stops there, and training goes on to ⌈1.5 × early-stopping epoch⌉


@pytest.fixture(scope="module")
def data():
    return tabular_data.load("breast_cancer", 0)


@pytest.fixture(scope="module")
def rows(data):
    return ft.select_rows(data.size("test"), 40, seed=0)


@pytest.fixture(scope="module")
def run(data, rows, tmp_path_factory):
    return E.trajectory(data, 1, rows, cache_root=tmp_path_factory.mktemp("epochs"), max_epochs=CAP)


def test_every_epoch_from_initialisation_to_the_extension(run):
    rec, t = run.record, run.rows
    es = rec["early_stopping_epoch"]
    assert rec["stop_epoch"] == CAP and 1 <= es <= CAP
    assert rec["epochs"] == max(CAP, math.ceil(1.5 * es))
    assert sorted(t.epoch.unique()) == list(range(rec["epochs"] + 1))
    assert (t.early_stopping_epoch == es).all() and (t.stop_epoch == CAP).all()
    # per epoch and variant: the pooled row is the sum of the per-layer rows
    for (_, _), g in t.groupby(["epoch", "variant"]):
        pooled, layers = g[g.layer.isna()], g[g.layer.notna()]
        assert len(pooled) == 1 and len(layers) == 3  # FT-Transformer's default: three blocks
        assert pooled.pairs.iloc[0] == layers.pairs.sum() == 40 * 3
        assert pooled.holds.iloc[0] == layers.holds.sum()
    assert np.allclose(t.fraction, t.holds / t.pairs)


def test_the_early_stopping_epoch_is_the_checkpoint(data, rows, run, tmp_path):
    """The trajectory's weights at the early-stopping epoch are fit()'s checkpoint, bit for bit, and its rows
    there are what the model tables measure from that checkpoint."""
    r = ft.fit(data, 1, cache_root=tmp_path / "ckpt", max_epochs=CAP)
    assert r.best_epoch == run.record["early_stopping_epoch"]
    assert r.sha256 == run.record["early_stopping_sha256"]
    table = measure_tabular(ResultStore(tmp_path, "t"), "t", models={"pretrained": r.model},
                            provenance={"pretrained": r.provenance}, data=data, rows=rows, model_name="m").table
    es = run.rows[(run.rows.epoch == r.best_epoch) & run.rows.layer.isna()].set_index("variant")
    for variant, g in table.groupby("variant"):
        assert es.loc[variant, "pairs"] == len(g)
        assert es.loc[variant, "holds"] == int(g.holds.sum())
    # the validation metric is the checkpoint's
    acc = ft.score(data, ft.predict(r.model, data, "val"), "val")["accuracy"]
    assert es.val_value.iloc[0] == pytest.approx(acc)
    assert (es.val_metric == "accuracy").all()


def test_cached_and_resumed(data, rows, run, tmp_path, monkeypatch):
    # an interrupted run resumes after its last finished epoch and gives the same rows
    calls = {"n": 0}
    real = E.condition_counts

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 4:  # epoch 0, 1 and 2 measured; stop while measuring epoch 3
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(E, "condition_counts", interrupted)
    with pytest.raises(KeyboardInterrupt):
        E.trajectory(data, 1, rows, cache_root=tmp_path, max_epochs=CAP)
    monkeypatch.setattr(E, "condition_counts", real)
    again = E.trajectory(data, 1, rows, cache_root=tmp_path, max_epochs=CAP)
    assert again.record["resumed_after_epoch"] == 2
    pd.testing.assert_frame_equal(again.rows, run.rows)
    assert again.record["early_stopping_sha256"] == run.record["early_stopping_sha256"]
    # a finished trajectory is read back, not trained again
    monkeypatch.setattr(ft, "_loss", lambda *a: (_ for _ in ()).throw(AssertionError("trained again")))
    pd.testing.assert_frame_equal(E.trajectory(data, 1, rows, cache_root=tmp_path, max_epochs=CAP).rows, run.rows)


def test_bad_extension(data, rows, tmp_path):
    with pytest.raises(ValueError, match="extend must be at least 1"):
        E.trajectory(data, 0, rows, cache_root=tmp_path, extend=0.5)


def _synthetic():
    """Two seeds of one benchmark, epochs 0-4, one layer: fractions and accuracies chosen by hand."""
    frac = {0: [0.05, 0.10, 0.20, 0.30, 0.25], 1: [0.04, 0.12, 0.15, 0.50, 0.45]}
    acc = {0: [0.5, 0.6, 0.7, 0.8, 0.75], 1: [0.5, 0.7, 0.6, 0.9, 0.8]}
    es = {0: 3, 1: 3}
    rows = []
    for seed in (0, 1):
        for e in range(5):
            for layer in (pd.NA, 0):
                rows.append({"dataset": "adult", "seed": seed, "epoch": e, "variant": "content", "layer": layer,
                             "pairs": 100, "holds": round(100 * frac[seed][e]), "fraction": frac[seed][e],
                             "val_metric": "accuracy", "val_value": acc[seed][e], "early_stopping_epoch": es[seed],
                             "stop_epoch": 4, "key": "k"})
    return E.conform_epochs(pd.DataFrame(rows)), frac, acc


def test_epochs_values():
    from scipy.stats import spearmanr

    from dobrushin.report.claims import CLAIMS
    from dobrushin.report.training import epochs_figure, epochs_values

    t, frac, acc = _synthetic()
    v = epochs_values(t, CLAIMS["tabular"])
    assert v["california"]["init"] == "—"  # not measured: the sentence's placeholders
    a = v["adult"]
    assert (a["seeds"], a["init"], a["one"], a["es"], a["es_epochs"], a["end"], a["end_epochs"]) == (
        "2 seeds", "4.0–5.0%", "10.0–12.0%", "30.0–50.0%", "3", "25.0–45.0%", "4")
    inside = sum(0.11 <= f <= 0.44 for s in (0, 1) for f in frac[s][1:])  # the paper's 11–44%, trained epochs only
    assert a["inside"] == f"{inside} of 8"
    last = [max(e for e in range(1, 5) if 0.11 <= frac[s][e] <= 0.44) for s in (0, 1)]
    assert a["last_inside"] == ", ".join(map(str, last))
    rho = [spearmanr(frac[s][1:], acc[s][1:]).statistic for s in (0, 1)]
    assert a["rho"] == ", ".join(f"{r:+.2f}" for r in rho)
    assert epochs_values(t[t.seed == 0], CLAIMS["tabular"])["adult"]["init"] == "5.0%"  # one seed: a value
    assert len(epochs_figure(t, CLAIMS["tabular"]).axes) == 3


@pytest.fixture()
def published(data, rows, run, tmp_path):
    """A published folder holding the trajectory (rows and record, as the chapter writes them) and its checkpoint."""
    import json

    from dobrushin.store.code import code_digest
    from dobrushin.store.results import atomic_write_csv

    root = tmp_path / "published"
    r = ft.fit(data, 1, cache_root=root / "checkpoints" / "tabular", max_epochs=CAP)
    atomic_write_csv(root / "tabular" / "epochs.csv", run.rows)
    rec = {**run.record, "checkpoint_key": r.key, "code_digest": code_digest(E.EPOCHS_CODE)}
    (root / "tabular" / "manifest.json").write_text(json.dumps({"notebook": "tabular", "entries": {}, "epochs": {
        "file": "epochs.csv", "epoch_rows": len(rows), "split_seed": 0, "train_rows": None,
        "trajectories": {"breast_cancer-seed1": rec}}}))
    (root / "PUBLISHED.json").write_text(json.dumps({"commit": "test"}))
    return root


def test_verify_remeasures_the_early_stopping_epoch(published, monkeypatch):
    from dobrushin.experiments import verify_products as VP

    # the published checkpoint is found by its key; verify loads the data set as the chapter does
    (c,) = VP.verify_epochs(published)
    assert c.passed and c.rows == 2 * 4  # two variants x (all layers, three layers)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # verify's process may use more threads than the trajectory was trained with
    try:
        (r,) = VP.verify_epochs_replay(published)  # trained again for epochs 0-2, with one thread: the published rows
    finally:
        torch.set_num_threads(threads)
    assert r.passed and r.rows == 3 * 2 * 4 and r.group.endswith("breast_cancer-seed1, epochs 0–2")
    assert torch.get_num_threads() == threads
    # a published count that the checkpoint does not give is a failure
    csv = published / "tabular" / "epochs.csv"
    t = pd.read_csv(csv)
    es = (t.epoch == t.early_stopping_epoch) & t.layer.isna() & (t.variant == "content")
    t.loc[es, "holds"] += 3
    t.to_csv(csv, index=False)
    (c,) = VP.verify_epochs(published)
    assert not c.passed and c.decision_mismatches[0]["published holds"] == c.decision_mismatches[0]["now"] + 3
    t.loc[(t.epoch == 1) & t.layer.isna(), "val_value"] += 0.01
    t.to_csv(csv, index=False)
    (r,) = VP.verify_epochs_replay(published)
    assert not r.passed and r.number_failures == 2 and r.max_abs_diff == pytest.approx(0.01)


def test_seeded_from_the_publication(published, run, rows, data, tmp_path, monkeypatch):
    from tools.seed_reproduce import seed

    rec = seed(published, tmp_path / "run")
    assert rec["copied"]["trajectories along training"] == 1
    monkeypatch.setattr(ft, "_loss", lambda *a: (_ for _ in ()).throw(AssertionError("trained again")))
    got = E.trajectory(data, 1, rows, cache_root=tmp_path / "run" / ".cache" / "epochs", max_epochs=CAP)
    pd.testing.assert_frame_equal(got.rows, run.rows)
