"""``make reproduce SEED=1`` (tools/seed_reproduce.py): a fresh run folder starts from the published run's
keyed products — the baseline's cells, the FT-Transformer checkpoints, the wall-time records of the chapters
that reuse them — and nothing else; publishing then records where the seed came from.  The reuse itself is
the caches' own rule (a cell or checkpoint is found only under its key), tested with those caches."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dobrushin.experiments import publish as P
from tools import seed_reproduce as S


def _published(root, cells_digest=None, training_digest=None):
    """A published folder whose cells and checkpoint record carry the given code digests (default: today's)."""
    today = S._current_digests()
    cd = today["cells"] if cells_digest is None else cells_digest
    td = today["training"] if training_digest is None else training_digest
    pub = root / "published" / "paper"
    (pub / "baseline" / "cells").mkdir(parents=True)
    for name, n in (("dirichlet-1_n4_abc.json", 4), ("dirichlet-1_n5_def.json", 5)):
        (pub / "baseline" / "cells" / name).write_text(json.dumps({"counts": [1], "params": {"n": n, "code_digest": cd}}))
    (pub / "baseline" / "baseline.csv").write_text("n,p\n4,0.3\n")
    (pub / "checkpoints" / "tabular").mkdir(parents=True)
    (pub / "checkpoints" / "tabular" / "adult-seed0-0123.pt").write_bytes(b"weights")
    (pub / "checkpoints" / "tabular" / "adult-seed0-0123.json").write_text(json.dumps({"epochs": 3, "code_digest": td}))
    (pub / "language").mkdir()
    (pub / "language" / "m.parquet").write_bytes(b"table")
    (pub / "timings" / "paper").mkdir(parents=True)
    for nb, sec in (("baseline_law", 3890), ("tabular", 4520), ("language", 313)):
        (pub / "timings" / "paper" / f"{nb}.json").write_text(json.dumps({"notebook": nb, "profile": "paper",
                                                                           "seconds": sec, "passes": 1}))
    (pub / "PUBLISHED.json").write_text(json.dumps({"commit": "a98d7e2", "code_digest": "675e7dcc" + "0" * 56,
                                                    "published": "2026-12-01T21:23:45Z"}))
    return pub


def test_seed_copies_the_keyed_products_and_nothing_else(tmp_path):
    pub = _published(tmp_path)
    run = tmp_path / "results" / "paper-run"
    rec = S.seed(pub, run)
    assert sorted(p.name for p in (run / "baseline" / "cells").iterdir()) == ["dirichlet-1_n4_abc.json",
                                                                              "dirichlet-1_n5_def.json"]
    assert (run / ".cache" / "tabular" / "adult-seed0-0123.pt").read_bytes() == b"weights"
    assert (run / ".cache" / "tabular" / "adult-seed0-0123.json").exists()
    # the tables of the chapters are computed by the run, never copied
    assert not (run / "language").exists() and not (run / "baseline" / "baseline.csv").exists()
    assert sorted(p.name for p in (run / "timings" / "paper").iterdir()) == ["baseline_law.json", "tabular.json"]
    assert rec["copied"] == {"baseline cells": 2, "FT-Transformer checkpoints": 1, "FT-Transformer checkpoint files": 2,
                             "trajectories along training": 0, "timing records": 2}
    assert rec["skipped_other_code"] == {"baseline cells": 0, "FT-Transformer checkpoints": 0, "trajectories along training": 0}
    assert rec["chapters"] == ["baseline", "baseline_law", "tabular"]  # products all made by today's code
    assert rec["commit"] == "a98d7e2" and rec["code_digest"].startswith("675e7dcc")
    assert json.loads((run / "SEEDED.json").read_text()) == rec


def test_seed_refuses_a_folder_with_results_and_a_folder_without_a_publication(tmp_path):
    pub = _published(tmp_path)
    run = tmp_path / "run"
    (run / "language").mkdir(parents=True)
    with pytest.raises(ValueError, match="already holds results"):
        S.seed(pub, run)
    with pytest.raises(ValueError, match="no PUBLISHED.json"):
        S.seed(tmp_path / "nowhere", tmp_path / "run2")
    assert S.main([str(tmp_path / "nowhere"), str(tmp_path / "run3")]) == 2


def test_a_resumed_pass_adds_to_the_seeded_wall_time(tmp_path):
    from tools import record_timing

    pub = _published(tmp_path)
    run = tmp_path / "run"
    S.seed(pub, run)
    f = run / "timings" / "paper" / "baseline_law.json"
    assert record_timing.main([str(f), "baseline_law", "paper", "23", "--add"]) == 0
    rec = json.loads(f.read_text())
    assert rec["seconds"] == 3890 + 23 and rec["passes"] == 2 and rec["last_pass_seconds"] == 23


def test_publish_records_the_seed(tmp_path):
    pub = _published(tmp_path)
    run = tmp_path / "run"
    rec = S.seed(pub, run)
    meta = P.publish(run, tmp_path / "out" / "paper", "paper", repo=tmp_path)
    assert meta["seeded_from"] == rec
    assert json.loads((tmp_path / "out" / "paper" / "PUBLISHED.json").read_text())["seeded_from"] == rec
    unseeded = tmp_path / "plain"
    (unseeded / "timings").mkdir(parents=True)
    assert "seeded_from" not in P.publish(unseeded, tmp_path / "out2" / "paper", "paper", repo=tmp_path)



def test_products_of_other_code_are_left_out_with_their_wall_times(tmp_path):
    """Cells made by other code can never be reused: they are not copied (nor published again), and their
    chapters' records start afresh; checkpoints made by today's training code keep the tabular record.  A
    stale cell beside current ones (a results folder accumulates them) is left out alone."""
    pub = _published(tmp_path, cells_digest="0" * 64)
    run = tmp_path / "run"
    rec = S.seed(pub, run)
    assert rec["skipped_other_code"] == {"baseline cells": 2, "FT-Transformer checkpoints": 0, "trajectories along training": 0}
    assert rec["copied"]["baseline cells"] == 0 and not (run / "baseline" / "cells").exists()
    assert rec["chapters"] == ["tabular"]
    assert sorted(p.name for p in (run / "timings" / "paper").iterdir()) == ["tabular.json"]
    today = S._current_digests()["cells"]
    (pub / "baseline" / "cells" / "dirichlet-1_n6_fff.json").write_text(json.dumps({"params": {"code_digest": today}}))
    run2 = tmp_path / "run2"
    rec2 = S.seed(pub, run2)
    assert [p.name for p in (run2 / "baseline" / "cells").iterdir()] == ["dirichlet-1_n6_fff.json"]
    assert rec2["skipped_other_code"]["baseline cells"] == 2 and "baseline_law" in rec2["chapters"]
    stale_ckpt = _published(tmp_path / "other", training_digest="1" * 64)
    rec3 = S.seed(stale_ckpt, tmp_path / "run3")
    assert rec3["skipped_other_code"]["FT-Transformer checkpoints"] == 1
    assert not (tmp_path / "run3" / ".cache").exists() and "tabular" not in rec3["chapters"]


def test_attested_products_are_rekeyed_and_found_by_their_caches(tmp_path, monkeypatch):
    """Cells and checkpoints made by code an accepted attestation carries over to today's are copied under the
    key today's code gives them, so the caches' own look-ups find them (and nothing of other code is)."""
    from dobrushin.models.ft_transformer import CHECKPOINT_FORMAT
    from dobrushin.random import cells as C
    from dobrushin.store import attest as A
    from dobrushin.store.results import params_key

    monkeypatch.delenv("DOBRUSHIN_PUBLISHED", raising=False)
    today = S._current_digests()
    old_cells, old_training = "c" * 64, "d" * 64
    pub = tmp_path / "published" / "paper"
    cells = pub / "baseline" / "cells"
    cells.mkdir(parents=True)
    params = {**C.cell_params("dirichlet(1)", 5, 40, 7, True), "code_digest": old_cells}
    (cells / "old.json").write_text(json.dumps({"counts": {"holds": 11}, "params": params}))
    ck = pub / "checkpoints" / "tabular"
    ck.mkdir(parents=True)
    rec = {"dataset": "adult", "seed": 1, "data_checksum": "ab" * 32, "config": {"d_block": 8}, "epochs": 2,
           "settings": {"lr": 1e-4}, "code_digest": old_training, "key": "0123"}
    (ck / "adult-seed1-0123.json").write_text(json.dumps(rec))
    (ck / "adult-seed1-0123.pt").write_bytes(b"weights")
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "e" * 64, "commit": "abc", "digests": {
        "tables": "e" * 64, "cells": old_cells, "training": old_training}}))
    assert S._attested(pub, today) == {}
    assert S.seed(pub, tmp_path / "run0")["skipped_other_code"] == {"baseline cells": 1, "FT-Transformer checkpoints": 1,
                                                                  "trajectories along training": 0}
    A.write(pub, {"cells": {"published": old_cells, "now": today["cells"], "evidence": "re-simulated"},
                  "training": {"published": old_training, "now": today["training"], "evidence": "byte-identical"}},
            {"comparisons": []})
    run = tmp_path / "run"
    got = S.seed(pub, run)
    assert got["rekeyed_under_attestation"] == {"baseline cells": 1, "FT-Transformer checkpoints": 1,
                                                "trajectories along training": 0}
    new_params = C.cell_params("dirichlet(1)", 5, 40, 7, True)  # today's key, computed by the cache itself
    assert new_params["code_digest"] == today["cells"]
    found = json.loads(C.cell_path(run / "baseline" / "cells", new_params).read_text())
    assert found["params"] == new_params and found["counts"] == {"holds": 11}
    key = params_key({"format": CHECKPOINT_FORMAT, "data": rec["data_checksum"], "config": rec["config"],
                      "train": rec["settings"], "seed": 1, "code_digest": today["training"]})
    assert (run / ".cache" / "tabular" / f"adult-seed1-{key}.pt").read_bytes() == b"weights"
    moved = json.loads((run / ".cache" / "tabular" / f"adult-seed1-{key}.json").read_text())
    assert moved["key"] == key and moved["code_digest"] == today["training"] and moved["epochs"] == 2


def test_an_attested_trajectory_is_rekeyed_where_the_chapter_looks_for_it(tmp_path, monkeypatch):
    """A trajectory along training holds its key, not its parameters: the seed rebuilds them as the tabular chapter
    does (data set, published epoch rows and split, the checkpoint's settings), checks that they give the published
    key under the published digest, and writes the rows under the key the chapter computes with today's code."""
    import pandas as pd

    from dobrushin.data import tabular_data
    from dobrushin.experiments import epochs as E
    from dobrushin.models import ft_transformer as ft
    from dobrushin.store import attest as A

    monkeypatch.delenv("DOBRUSHIN_PUBLISHED", raising=False)
    today, old = S._current_digests(), "f" * 64
    d = tabular_data.load("breast_cancer", 0)
    rows = ft.select_rows(d.size("test"), 20, seed=0)
    settings = ft.train_settings(max_epochs=3)

    def key(digest):
        monkeypatch.setattr(E, "code_digest", lambda *_: digest)
        k = E.trajectory_key(d, 1, rows, settings=settings, config=ft.model_config(d))
        monkeypatch.undo()
        monkeypatch.delenv("DOBRUSHIN_PUBLISHED", raising=False)
        return k

    pub = tmp_path / "published" / "paper"
    (pub / "tabular").mkdir(parents=True)
    (pub / "checkpoints" / "tabular").mkdir(parents=True)
    (pub / "checkpoints" / "tabular" / "breast_cancer-seed1-ck.json").write_text(json.dumps({"settings": settings}))
    rec = {"dataset": "breast_cancer", "seed": 1, "key": key(old), "code_digest": old, "checkpoint_key": "ck"}
    (pub / "tabular" / "manifest.json").write_text(json.dumps({"epochs": {
        "split_seed": 0, "train_rows": None, "epoch_rows": 20, "trajectories": {"breast_cancer-seed1": rec}}}))
    t = pd.DataFrame([{"dataset": "breast_cancer", "seed": 1, "epoch": e, "variant": "content", "layer": None,
                       "pairs": 60, "holds": 9 + e, "fraction": (9 + e) / 60, "val_metric": "accuracy", "val_value": 0.9,
                       "early_stopping_epoch": 1, "stop_epoch": 2, "key": rec["key"]} for e in range(3)])
    t.to_csv(pub / "tabular" / "epochs.csv", index=False)
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": "e" * 64, "commit": "abc", "digests": {"epochs": old}}))
    assert S.seed(pub, tmp_path / "run0")["skipped_other_code"]["trajectories along training"] == 1
    A.write(pub, {"epochs": {"published": old, "now": today["epochs"], "evidence": "replayed"}}, {"comparisons": []})
    got = S.seed(pub, tmp_path / "run")
    assert got["rekeyed_under_attestation"]["trajectories along training"] == 1
    new = key(today["epochs"])
    stem = tmp_path / "run" / ".cache" / "epochs" / f"breast_cancer-seed1-{new}"
    back = pd.read_csv(f"{stem}.csv")
    assert list(back["holds"]) == [9, 10, 11] and set(back["key"]) == {new}
    assert json.loads(Path(f"{stem}.json").read_text())["code_digest"] == today["epochs"]
    # a record whose rebuilt parameters do not give its published key is left out, not re-keyed under a guess
    rec["key"] = "0" * 16
    (pub / "tabular" / "manifest.json").write_text(json.dumps({"epochs": {
        "split_seed": 0, "train_rows": None, "epoch_rows": 20, "trajectories": {"breast_cancer-seed1": rec}}}))
    assert S.seed(pub, tmp_path / "run2")["skipped_other_code"]["trajectories along training"] == 1
