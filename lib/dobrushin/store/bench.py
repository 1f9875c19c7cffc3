"""Columns of the benchmark CSV files that ``tools/`` writes and ``dobrushin.report`` reads.  Extended
only: a new column goes at the end, and readers of an older file find it missing."""
from __future__ import annotations

#: results/bench/bench.csv and results/bench-ci/bench.csv (``tools/bench.py`` appends ``profile`` and the
#: machine's columns)
BENCH_COLUMNS = ["n", "source", "method", "target", "matrices", "wall_s", "matrices_per_s", "cpu_ms_per_matrix",
                 "speedup_vs_scipy", "batch_mb", "peak_mem_mb", "mem_ratio", "agree_exact", "max_abs_dkappa",
                 "holds_agree", "overhead_pct", "note", "speedup_vs_pdist", "vs_hwref", "reps", "wall_spread"]

#: results/bench/stages.csv: one row per configuration of the whole measurement, seconds per stage
STAGE_COLUMNS = ["config", "model", "tokens", "inputs", "batch", "load", "forward", "capture", "restrict", "test",
                 "rollout", "heads", "write", "measure_s", "ratio", "ratio_without_heads", "target", "met", "peak_rss_mb",
                 "note"]

#: results/bench-sweep/sweep.csv: one row per run of the sweep (serial, then on Dask)
SWEEP_BENCH_COLUMNS = ["run", "workers", "threads_per_worker", "tasks", "ran", "skipped", "rows", "wall_s", "startup_s",
                       "speedup_vs_serial", "rows_vs_serial", "max_abs_dkappa", "verdicts_differing"]
