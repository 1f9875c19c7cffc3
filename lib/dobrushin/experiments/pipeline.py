"""The measurement loop, the one loop of the project, with its cache: one model (trained weights and/or the
untrained control) over a set of inputs, to the tidy result tables (:func:`measure_model`; everything that
changes the numbers is one :class:`MeasureConfig`).

Per weights setting and batch: capture the head-averaged attention; test every (input, layer) for ``content``
(CLS, registers, distillation, separator and padding removed) and ``with_special`` (padding removed), each
renormalised; roll out those restricted matrices Ã_l (not the full attention): κ(R), R = F_L⋯F_1,
F_l = ½(I + Ã_l), against ∏ κ(F_l) and ∏ ½(1 + κ(Ã_l)); test each head of the first ``head_inputs`` inputs.
Unavailable trained weights are recorded as ``status`` (and re-checked on a cache hit); the untrained control
still runs.  Files: ``<slug>.parquet``, ``.heads.parquet``, ``.rollout.parquet`` and a manifest entry, reused
while the key (:func:`cache_params`) matches and the SHA-256s hold.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import torch

from ..capture.extract import to_device
from ..math.coefficient import DEFAULT_TOL
from ..math.validation import check_choices, check_integer
from ..models.base import INPUT_KIND
from ..models.configs import display_name
from ..store.results import HEAD_COLUMNS, ROLLOUT_COLUMNS, VARIANTS, WEIGHTS, ResultStore, conform, empty, frame, slugify
from ..store.code import code_digest
from ..store.progress import Progress
from .environment import describe_device, key_versions, resolve_device, steady_heap, versions
from .heads import HeadSink, head_rows
from .measure import BatchMeasure, measure_batch
from .partial import PartialBatches, pause_point


@dataclass(frozen=True)
class MeasureConfig:
    """Everything that decides how a model is measured, checked on construction (ValueError naming the field).
    ``n_untrained``, ``head_inputs``: prefixes of the inputs for the untrained control (None: all) and the
    per-head table; ``seed``: of the untrained initialisation; ``tol``: the equality test's; ``atol``: on captured
    row sums; ``recheck_unavailable``: retry trained weights a cached entry found unavailable."""

    weights: Tuple[str, ...] = WEIGHTS
    n_untrained: Optional[int] = None
    batch_size: int = 8
    seed: int = 0
    image_size: int = 224
    max_length: int = 128
    head_inputs: int = 4
    head_variants: Tuple[str, ...] = ("content",)
    variants: Tuple[str, ...] = VARIANTS
    tol: float = DEFAULT_TOL
    atol: float = 1e-4
    device: str = "auto"
    force: bool = False
    progress: bool = True
    recheck_unavailable: bool = True

    def __post_init__(self):
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen: normalise in place once)
        s("weights", check_choices("weights", self.weights, WEIGHTS))
        s("variants", check_choices("variants", self.variants, VARIANTS))
        s("head_variants", check_choices("head_variants", self.head_variants, VARIANTS))
        for name, lo in (("batch_size", 1), ("head_inputs", 0), ("image_size", 1), ("max_length", 2)):
            s(name, check_integer(name, getattr(self, name), lo))
        s("seed", check_integer("seed", self.seed))
        s("n_untrained", check_integer("n_untrained", self.n_untrained, 1, optional=True))
        for name in ("tol", "atol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite non-negative number, got {v!r}")
            s(name, float(v))

    def replace(self, **changes) -> "MeasureConfig":
        return dataclasses.replace(self, **changes)

    def key(self) -> dict:
        """The fields that change the numbers (for the cache key; the device enters as its type)."""
        return {"weights": list(self.weights), "n_untrained": self.n_untrained, "batch_size": self.batch_size,
                "seed": self.seed, "image_size": self.image_size, "max_length": self.max_length,
                "head_inputs": self.head_inputs, "head_variants": list(self.head_variants),
                "variants": list(self.variants), "tol": self.tol, "atol": self.atol}


@dataclass
class ModelRun:
    """Everything measured for one model: ``table`` (both weights), ``heads``, ``rollout``; ``status`` of the
    trained weights (``"ok"`` or ``"weights unavailable: <reason>"``); ``runs``: per weights setting its info;
    ``entry``: the manifest entry; ``cached``: reused."""

    model_id: str
    slug: str
    status: str
    table: pd.DataFrame
    heads: pd.DataFrame
    rollout: pd.DataFrame
    runs: Dict[str, dict]
    entry: dict
    cached: bool = False


#: the stages of :func:`run_weights` whose seconds it reports (``info["stages"]``); ``prepare``: loading,
#: preprocessing and moving the inputs to the device
STAGES = ("prepare", "forward", "restrict", "test", "rollout", "heads", "write")


def run_weights(lm, inputs, *, extractor: Callable, weights: str, config: MeasureConfig,
                device: torch.device, partial: Optional[PartialBatches] = None,
                progress: Optional[Progress] = None) -> dict:
    """The loop over one loaded model ``lm`` (``model``, ``preprocess``, ``model_id``): batches of ``inputs`` →
    ``extractor`` → tidy table, rollout and per-head table (first ``config.head_inputs`` inputs, same forward
    pass).  With :func:`dobrushin.extract_attention` each layer is measured as captured (no stack held); any
    other extractor's stack is measured whole, with identical tables.  ``partial``: completed batches are saved
    and reused.  Returns ``{"table", "rollout", "heads", "info"}``; ``info["stages"]``: seconds per :data:`STAGES`."""
    from ..capture.extract import extract_attention
    from ..capture.hooks import is_placeholder, layer_sink, map_sink

    model_id, cfg = lm.model_id, config
    streaming = extractor is extract_attention  # a custom extractor may read the stack: keep it
    steady_heap()
    model = lm.model.to(device)
    model.eval()
    tables, rolls, heads = [], [], []
    n = len(inputs)
    k_heads = min(cfg.head_inputs, n)
    clock = {s: 0.0 for s in STAGES}

    def prepared(a: int, b: int):
        """Inputs ``a``–``b`` loaded, preprocessed and on the device, the time counted in ``prepare``."""
        tp = time.perf_counter()
        x = to_device(lm.preprocess(inputs.items(a, b)), device)
        clock["prepare"] += time.perf_counter() - tp
        return x

    resumed = 0
    t0 = time.perf_counter()
    for bi, start in enumerate(range(0, n, cfg.batch_size)):
        stop = min(start + cfg.batch_size, n)
        ids = inputs.ids[start:stop]
        got = partial.load(bi, ids) if partial is not None else None
        if got is None:
            kh = max(0, min(k_heads - start, stop - start))
            sink = HeadSink(kh, ids, model=model_id, weights=weights, variants=cfg.head_variants, tol=cfg.tol,
                            atol=cfg.atol, on_layer=lambda layer, bi=bi: layer == 0 and pause_point("forward", bi))
            # the head-averaged maps measured layer by layer as they are captured (no (B, L, n, n) stack)
            measure_clock: dict = {}
            bm = BatchMeasure(model=model_id, input_ids=ids, weights=weights, variants=cfg.variants, tol=cfg.tol,
                              atol=cfg.atol, clock=measure_clock)
            x = prepared(start, stop)
            tf = time.perf_counter()
            with layer_sink(sink), map_sink(bm.layer if streaming else None):
                ex = extractor(model, x)
            inside = sum(measure_clock.values())  # measuring done during the forward pass
            clock["forward"] += time.perf_counter() - tf - sink.seconds - inside
            if ex.attention.ndim != 4:
                raise ValueError(f"{model_id}: expected head-averaged attention (B, L, n, n), "
                                 f"got shape {tuple(ex.attention.shape)}")
            if bm.layers == ex.n_layers:
                table, roll = bm.finish(ex.roles)
            elif bm.layers or is_placeholder(ex.attention):
                raise ValueError(f"{model_id}: the map sink received {bm.layers} layers, the extraction has "
                                 f"{ex.n_layers}")
            else:  # a custom extractor, or one that does not capture through the stacked transform: the stack
                table, roll = measure_batch(ex.attention, ex.roles, model=model_id, input_ids=ids,
                                            weights=weights, variants=cfg.variants, tol=cfg.tol, atol=cfg.atol,
                                            clock=measure_clock)
            for k_, v_ in measure_clock.items():
                clock[k_] = clock.get(k_, 0.0) + v_
            if kh and sink.layers == ex.n_layers:
                hd = sink.rows(ex.roles)
                clock["heads"] += sink.seconds
            elif kh:  # the extractor does not capture through the hook transform: one more pass, heads kept
                xh = prepared(start, start + kh)
                th = time.perf_counter()
                exh = extractor(model, xh, average_heads=False)
                hd = head_rows(exh.attention, exh.roles, model=model_id, input_ids=ids[:kh], weights=weights,
                               variants=cfg.head_variants, tol=cfg.tol, atol=cfg.atol)
                del exh, xh
                clock["heads"] += time.perf_counter() - th
            else:
                hd = frame([], HEAD_COLUMNS)
            del ex
            got = {"table": table, "rollout": roll, "heads": hd}
            if partial is not None:
                tw = time.perf_counter()
                partial.save(bi, ids, table, roll, hd)
                clock["write"] += time.perf_counter() - tw
        else:
            resumed += len(ids)
        tables.append(got["table"])
        rolls.append(got["rollout"])
        heads.append(got["heads"])
        if progress is not None:
            progress.update(len(ids), note="(resumed)" if got is not None and resumed and start < resumed else "")
    wall = time.perf_counter() - t0
    model.to("cpu")
    done = n - resumed
    return {
        "table": pd.concat(tables, ignore_index=True),
        "rollout": pd.concat(rolls, ignore_index=True),
        "heads": frame(heads, HEAD_COLUMNS),
        "info": {"status": "ok", "n_inputs": n, "wall_s": round(wall, 3),
                 "inputs_per_s": round(done / wall, 4) if wall > 0 and done else None,
                 "resumed_inputs": resumed, "head_inputs": k_heads, "head_wall_s": round(clock["heads"], 3),
                 "stages": {k: round(v, 4) for k, v in clock.items()},
                 "versions": versions(),  # what made them, Python included (the key holds key_versions)
                 "family": getattr(lm, "family", "") or "", "notes": getattr(lm, "notes", "") or "",
                 "source": getattr(lm, "source", "") or "",
                 "provenance": dict(getattr(lm, "provenance", None) or {})},
    }


# ------------------------------------------------------------------------------------------------
# the cache key


def _inputs_key(inputs) -> dict:
    """The selection's identity: source, seed, count and a SHA-256 of the ordered ids."""
    k = dict(inputs.key())
    ids = k.pop("ids")
    k["n"] = len(ids)
    k["ids_sha256"] = hashlib.sha256("\n".join(map(str, ids)).encode()).hexdigest()
    return k


def cache_params(model_id: str, inputs, config: MeasureConfig, device: torch.device,
                 provenance: Mapping[str, dict], extra: Optional[Mapping[str, Any]] = None) -> dict:
    """The mapping whose hash keys the cache: everything that affects the numbers, each weights setting's
    provenance and the code digest; ``extra`` adds caller fields (e.g. a checkpoint key)."""
    return {
        "code_digest": code_digest(), "model_id": model_id,
        "inputs": _inputs_key(inputs), "n_inputs": len(inputs), **config.key(), "device_type": device.type,
        "versions": key_versions(), "provenance": {w: dict(provenance[w]) for w in config.weights},
        **dict(extra or {}),
    }


ProvenanceArg = Union[None, Callable[..., dict], Mapping[str, dict]]


def _provenance(model_id: str, config: MeasureConfig, provenance: ProvenanceArg, loader) -> Dict[str, dict]:
    if provenance is None and loader is None:
        from ..models.loading import weights_provenance

        provenance = weights_provenance
    if provenance is None:
        provenance = getattr(loader, "provenance", None)
    out = {}
    for w in config.weights:
        pre = w == "pretrained"
        if isinstance(provenance, Mapping):
            if w not in provenance:
                raise ValueError(f"provenance has no entry for the {w!r} weights (it has {sorted(provenance)})")
            out[w] = dict(provenance[w])
        elif callable(provenance):
            out[w] = dict(provenance(model_id, pretrained=pre, seed=config.seed))
        else:  # a loader that says nothing about its weights: keyed by what is known
            out[w] = {"source": "loader", "loader": f"{type(loader).__module__}.{type(loader).__qualname__}"} \
                if pre else {"source": "untrained", "seed": config.seed}
    return out


# ------------------------------------------------------------------------------------------------
# one model


def measure_model(model_id: str, inputs, *, store: ResultStore, config: Optional[MeasureConfig] = None,
                  loader: Optional[Callable] = None, extractor: Optional[Callable] = None,
                  provenance: ProvenanceArg = None, slug: Optional[str] = None,
                  key_extra: Optional[Mapping[str, Any]] = None, info: Optional[Mapping[str, Any]] = None
                  ) -> ModelRun:
    """Measure ``model_id`` on ``inputs`` (anything with ``ids``, ``kind``, ``items(start, stop)``, ``head(n)``,
    ``key()``, ``describe()``), cached in ``store``.  ``loader(model_id, pretrained=, seed=, image_size=,
    max_length=)`` and ``extractor(model, x, average_heads=)`` default to ``load_model`` and
    ``extract_attention``; ``provenance``: ``{weights: dict}`` or a callable ``(model_id, pretrained=, seed=)``
    (default: ``weights_provenance``, else the loader's ``provenance`` attribute, else its name);
    ``key_extra``, ``info``: more cache-key and manifest fields."""
    cfg = MeasureConfig() if config is None else config
    if not isinstance(cfg, MeasureConfig):
        raise ValueError(f"config must be a MeasureConfig, got {type(cfg).__name__}")
    if len(inputs) == 0:
        raise ValueError("no inputs to measure")
    from ..models.loading import ArchitectureUnavailable, WeightsUnavailable, model_family, unavailable_status

    prov = _provenance(model_id, cfg, provenance, loader)
    if loader is None:
        from ..models.loading import load_model as loader
    if extractor is None:
        from ..capture.extract import extract_attention as extractor
    dev = resolve_device(cfg.device)
    slug = slugify(slug or model_id)
    params = cache_params(model_id, inputs, cfg, dev, prov, key_extra)
    load_kw = dict(seed=cfg.seed, image_size=cfg.image_size, max_length=cfg.max_length)
    unavailable = (WeightsUnavailable, ArchitectureUnavailable)

    if not cfg.force:
        hit = store.load_all(slug, params)
        if hit is not None:
            entry = hit["entry"]
            stale = False
            if cfg.recheck_unavailable and "pretrained" in cfg.weights and entry.get("status", "ok") != "ok":
                try:  # trained weights may have become available since
                    loader(model_id, pretrained=True, **load_kw)
                    stale = True
                except unavailable:
                    pass
            if not stale:
                return ModelRun(model_id, slug, entry.get("status", "ok"), hit["table"], hit["heads"],
                                hit["rollout"], entry.get("runs", {}), entry, cached=True)

    t_all = time.perf_counter()
    runs: Dict[str, dict] = {}
    results = []
    status = "ok"
    family = ""
    for w in cfg.weights:
        pretrained = w == "pretrained"
        subset = inputs if pretrained or cfg.n_untrained is None else inputs.head(cfg.n_untrained)
        tl = time.perf_counter()
        try:
            lm = loader(model_id, pretrained=pretrained, **load_kw)
        except unavailable as e:
            st = unavailable_status(e)
            runs[w] = {"status": st, "n_inputs": 0, "provenance": prov[w]}
            if pretrained:
                status = st
            continue
        load_s = time.perf_counter() - tl
        kind = getattr(lm, "kind", None)
        if kind is not None and INPUT_KIND.get(kind, kind) != inputs.kind:
            raise ValueError(f"{model_id} is a {kind} model but the inputs are {inputs.kind}s")
        prog = Progress(len(subset), f"{store.notebook}: {display_name(model_id)} [{w}]",
                        log=store.dir / "progress.log", terminal=cfg.progress)
        with prog:
            r = run_weights(lm, subset, extractor=extractor, weights=w, config=cfg, device=dev,
                            partial=PartialBatches(store, slug, params, w), progress=prog)
        r["info"]["load_s"] = round(load_s, 3)
        r["info"]["device"] = describe_device(dev)
        r["info"]["provenance"] = r["info"]["provenance"] or prov[w]
        family = family or r["info"]["family"]
        runs[w] = r["info"]
        results.append(r)
        del lm
    family = family or model_family(model_id)
    wall = time.perf_counter() - t_all
    measured = [runs[w] for w in cfg.weights if runs.get(w, {}).get("status") == "ok"]
    n_done = sum(r["n_inputs"] for r in measured)
    loop_s = sum(r["wall_s"] for r in measured)
    entry_info = {
        "status": status, "model": model_id, "display": display_name(model_id), "family": family,
        "wall_s": round(wall, 3), "device": describe_device(dev),
        "inputs_per_s": round(n_done / loop_s, 4) if loop_s > 0 else None,
        "inputs": inputs.describe(), "runs": runs, "provenance": prov, **dict(info or {}),
    }
    if not results:  # nothing could be loaded at all
        entry = store.record(slug, params, **entry_info)
        return ModelRun(model_id, slug, status, empty("table"), empty("heads"), empty("rollout"), runs, entry)
    table = conform(pd.concat([r["table"] for r in results], ignore_index=True))
    heads = frame([r["heads"] for r in results], HEAD_COLUMNS)
    roll = frame([r["rollout"] for r in results], ROLLOUT_COLUMNS)
    tw = time.perf_counter()
    entry = store.save(slug, params, table, secondary={"heads": heads, "rollout": roll}, **entry_info)
    entry["save_s"] = round(time.perf_counter() - tw, 4)
    PartialBatches(store, slug, params, "").discard()  # the final tables are in place
    return ModelRun(model_id, slug, status, table, heads, roll, runs, entry)


def measure_models(model_ids: Sequence[str], inputs, *, store: ResultStore, config: Optional[MeasureConfig] = None,
                   **kw) -> List[ModelRun]:
    """:func:`measure_model` for each id, in order (``kw``: its other keyword arguments)."""
    if isinstance(model_ids, str):
        model_ids = [model_ids]
    if not model_ids:
        raise ValueError("no models to measure")
    return [measure_model(m, inputs, store=store, config=config, **kw) for m in model_ids]
