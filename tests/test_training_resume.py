"""An FT-Transformer training killed with SIGKILL in the middle of an epoch checkpoint save, then run
again, resumes after the last completed epoch and ends with the weights and record of an uninterrupted
run; no half-written file is ever read or left under a real name.  Real subprocesses, a tiny data set."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from dobrushin.models import ft_transformer as tb

LIB = Path(__file__).resolve().parents[1] / "lib"
EPOCHS = 4
PAUSE_AT = 3  # killed while writing epoch 3's checkpoint: epoch 2 is the last completed one

CHILD = textwrap.dedent(f'''
    import json, sys
    import numpy as np, torch
    from dobrushin.data import tabular_data as td
    from dobrushin.models import ft_transformer as tb

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    parts = dict(zip(td.PARTS, (96, 32, 32)))
    Xn = {{p: rng.standard_normal((m, 3)).astype(np.float32) for p, m in parts.items()}}
    Xc = {{p: rng.integers(0, 3, (m, 1)) for p, m in parts.items()}}
    y = {{p: (Xn[p] @ np.array([1.0, -0.5, 0.2])).astype(np.float32) for p in parts}}
    data = td.from_splits("resume-synthetic", "regression", y, X_num=Xn, X_cat=Xc, cat_cardinalities=[3])
    tiny = {{"n_blocks": 1, "d_block": 8, "attention_n_heads": 2, "attention_dropout": 0.2,
            "ffn_d_hidden_multiplier": 4 / 3, "ffn_dropout": 0.1, "residual_dropout": 0.0}}
    r = tb.fit(data, 0, cache_root=sys.argv[1], max_epochs={EPOCHS}, batch_size=32, lr=1e-3, patience=10,
               model_overrides=tiny)
    print(json.dumps({{"sha256": r.sha256, "epochs": r.epochs, "best_epoch": r.best_epoch, "history": r.history,
                      "key": r.key, "resumed_from": r.resumed_from, "from_cache": r.from_cache}}))
''')


def _env(**extra):
    env = {**os.environ, "PYTHONPATH": str(LIB), "OMP_NUM_THREADS": "1", **extra}
    env.pop(tb.PAUSE_IN_SAVE_ENV, None)
    env.update(extra)
    return env


def _run(script, root) -> dict:
    p = subprocess.run([sys.executable, str(script), str(root)], env=_env(), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_training_killed_during_a_checkpoint_save_resumes_to_the_same_weights(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(CHILD)
    reference = _run(script, tmp_path / "reference")
    assert reference["resumed_from"] is None and reference["epochs"] == EPOCHS and not reference["from_cache"]

    root = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, str(script), str(root)], env=_env(**{tb.PAUSE_IN_SAVE_ENV: str(PAUSE_AT)}),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        for line in child.stderr:  # wait for the child to stop half-way through writing epoch 3's state
            if line.startswith(tb.PAUSE_MARKER):
                assert line.split()[-1] == str(PAUSE_AT)
                break
            assert time.monotonic() < deadline
        else:
            pytest.fail(f"the child ended without pausing in the save (rc {child.wait()})")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL

    # what the kill left: the last completed epoch's state, complete and loadable; the half-written save only
    # as a hidden temporary file; no final checkpoint
    progress = list(root.glob("*.epoch.pt"))
    assert len(progress) == 1
    state = torch.load(progress[0], map_location="cpu", weights_only=True)
    assert state["epoch"] == PAUSE_AT - 1 and state["key"] == reference["key"]
    assert [h["epoch"] for h in state["history"]] == list(range(1, PAUSE_AT))
    half = list(root.glob(".*.tmp"))
    assert len(half) == 1 and half[0].stat().st_size > 0
    with pytest.raises(Exception):
        torch.load(half[0], map_location="cpu", weights_only=True)  # it really is half a file
    assert not [p for p in root.glob("*.pt") if not p.name.endswith(".epoch.pt")] and not list(root.glob("*.json"))

    resumed = _run(script, root)
    assert resumed["resumed_from"] == PAUSE_AT - 1 and not resumed["from_cache"]
    for k in ("sha256", "epochs", "best_epoch", "history", "key"):
        assert resumed[k] == reference[k], k  # the same weights (SHA-256 of the state dict) and record
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in (tmp_path / "reference").iterdir())
    assert not list(root.glob(".*.tmp")) and not list(root.glob("*.epoch.pt"))
    again = _run(script, root)
    assert again["from_cache"] and again["sha256"] == reference["sha256"]
