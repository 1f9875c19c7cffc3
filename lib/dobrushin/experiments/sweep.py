"""``python -m dobrushin sweep``: many models x weights x input shards, serially or on Dask distributed.

    python -m dobrushin sweep MODEL_ID... --text sentences.txt --n 512 --out sweep/ --scheduler local:2

One task per (model, weights, shard of ``--shard-size`` inputs, a multiple of ``--batch-size``), so a shard's
rows are those ``measure`` gives (:func:`run_shard`).  A worker keeps loaded models in an LRU cache
(:mod:`.model_cache`); tasks go model by model.  The driver writes each shard atomically to
``OUT/table/<slug>/<weights>/shard-00000.parquet`` with a manifest entry; a re-run skips shards with the
same parameters and an intact file.  A failing task is retried ``--retries`` times, then recorded ``failed``
(exit status 1); unavailable weights are recorded, not retried.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ..store.results import (ResultStore, atomic_write_json, atomic_write_parquet, conform, params_key, sha256_file,
                             slugify)
from .measure_cli import (CliError, add_shared_options, check_scheduler, check_shared_options, exit_2_on_cli_error,
                          inputs_for, measure_inputs, one_line)
from .model_cache import PLUGIN_NAME, current_cache

#: bump when a shard's output for the same parameters changes
SWEEP_VERSION = 1
DEFAULT_SHARD_SIZE = 64


# ------------------------------------------------------------------------------------------------
# what is asked for


@dataclass(frozen=True)
class SweepSpec:
    """``models`` x ``weights`` on ``measure``'s selection of ``n`` inputs, in shards of ``shard_size`` (a multiple
    of ``batch_size``); ``retries``: extra attempts per task.  ValueError naming a field that cannot be right."""

    models: Tuple[str, ...]
    weights: Tuple[str, ...] = ("pretrained",)
    inputs: Optional[str] = None
    text: Optional[str] = None
    n: int = 32
    shard_size: int = DEFAULT_SHARD_SIZE
    seed: int = 0
    batch_size: int = 8
    image_size: int = 224
    max_length: int = 128
    device: str = "auto"
    retries: int = 2

    def __post_init__(self):
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen: normalise once)
        models = tuple(dict.fromkeys(str(m).strip() for m in self.models))
        if not models or "" in models:
            raise ValueError("no models to sweep (give MODEL_ID... or --models-file)" if not models
                             else "a model id is empty")
        s("models", models)
        from .pipeline import MeasureConfig

        cfg = MeasureConfig(weights=self.weights, batch_size=self.batch_size, seed=self.seed,
                            image_size=self.image_size, max_length=self.max_length)  # the same checks as measure
        s("weights", cfg.weights)
        for name, lo in (("n", 1), ("shard_size", 1), ("retries", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if self.shard_size % self.batch_size:
            raise ValueError(f"shard size {self.shard_size} must be a multiple of the batch size {self.batch_size} "
                             "(so that a shard's forward passes are the batches of a serial run)")
        if self.inputs is not None and self.text is not None:
            raise ValueError("give --inputs or --text, not both")

    def shards(self) -> List[Tuple[int, int]]:
        """``[(start, stop), ...]`` covering the ``n`` selected inputs."""
        return [(a, min(a + self.shard_size, self.n)) for a in range(0, self.n, self.shard_size)]

    def tasks(self) -> List["ShardTask"]:
        """One task per model x weights x shard, model by model (so a worker's cache keeps hitting)."""
        return [ShardTask(m, w, k, a, b, self) for m in self.models for w in self.weights
                for k, (a, b) in enumerate(self.shards())]


@dataclass(frozen=True)
class ShardTask:
    """Inputs ``start:stop`` of the sweep's selection, for one model and weights setting."""

    model: str
    weights: str
    index: int
    start: int
    stop: int
    spec: SweepSpec = field(repr=False)

    @property
    def key(self) -> str:
        return f"{slugify(self.model)}.{self.weights}.shard-{self.index:05d}"

    @property
    def file(self) -> str:
        return f"table/{slugify(self.model)}/{self.weights}/shard-{self.index:05d}.parquet"


def source_fingerprint(spec: SweepSpec) -> dict:
    """The inputs' source as given, plus a file's SHA-256 or a hash of a folder's names, sizes and mtimes."""
    src = spec.text if spec.text is not None else spec.inputs
    out = {"inputs": spec.inputs, "text": spec.text}
    if src is None or (spec.text is None and (src in ("embedded", "auto", "glue") or src.startswith("hf:"))):
        return out
    p = Path(src).expanduser()
    if p.is_file():
        out["sha256"] = sha256_file(p)
    elif p.is_dir():
        h = hashlib.sha256()
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            st = f.stat()
            h.update(f"{f.relative_to(p).as_posix()}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
        out["listing_sha256"] = h.hexdigest()
    return out


def task_params(task: ShardTask, fingerprint: dict, provenance: dict) -> dict:
    """The parameters that key a shard's entry (a re-run with the same ones skips the shard)."""
    from ..store.code import code_digest
    from .pipeline import MeasureConfig

    spec = task.spec
    cfg = MeasureConfig(weights=(task.weights,), batch_size=spec.batch_size, seed=spec.seed,
                        image_size=spec.image_size, max_length=spec.max_length, head_inputs=0)
    return {"sweep_version": SWEEP_VERSION, "code_digest": code_digest(),
            "model": task.model, "weights": task.weights, "shard": task.index, "start": task.start,
            "stop": task.stop, "n": spec.n, "source": fingerprint, "device": spec.device,
            "config": cfg.key(), "provenance": provenance}


# ------------------------------------------------------------------------------------------------
# the worker side


def run_shard(task: ShardTask, loader: Optional[Callable] = None) -> dict:
    """Measure one shard (on a Dask worker or in this process): ``{"status", "table" (or None), "info"}``;
    raises what the loop raises (the caller retries)."""
    import warnings

    from ..models.base import input_kind
    from ..models.loading import ArchitectureUnavailable, WeightsUnavailable, unavailable_status

    spec = task.spec
    if loader is None:
        from ..models import load_model as loader
    cache, worker = current_cache()
    pretrained = task.weights == "pretrained"
    key = (task.model, task.weights, spec.seed, spec.image_size, spec.max_length)
    t0 = time.perf_counter()
    info = {"worker": worker, "start": task.start, "stop": task.stop}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. "switched to eager attention" (in the notes)
        try:
            lm, lock, loaded = cache.model(key, lambda: loader(task.model, pretrained=pretrained, seed=spec.seed,
                                                               image_size=spec.image_size,
                                                               max_length=spec.max_length))
        except (WeightsUnavailable, ArchitectureUnavailable) as e:
            return {"status": unavailable_status(e), "table": None, "info": info}
        info["loaded_model"] = loaded
        info["load_s"] = round(time.perf_counter() - t0, 3) if loaded else 0.0
        kind = input_kind(lm.kind)
        inputs = cache.inputs((kind, spec.inputs, spec.text, spec.n, spec.seed),
                              lambda: inputs_for(kind, model_id=task.model, inputs=spec.inputs,
                                                 text=None if spec.text is None else Path(spec.text), n=spec.n,
                                                 seed=spec.seed))
        shard = Shard(inputs, task.start, task.stop)
        info["available"] = len(inputs)
        if len(shard) == 0:
            info["reason"] = f"the inputs hold {len(inputs)} of the {spec.n} asked for"
            return {"status": "empty", "table": None, "info": info}
        with lock:
            run = measure_inputs(task.model, shard, weights=(task.weights,), loader=lambda *a, **k: lm,
                                 batch_size=spec.batch_size, seed=spec.seed, image_size=spec.image_size,
                                 max_length=spec.max_length, device=spec.device, progress=False)
    r = run.runs.get(task.weights, {})
    info.update({"inputs": shard.describe(), "n_inputs": len(shard), "measure_s": r.get("wall_s"),
                 "device": r.get("device"), "notes": r.get("notes", ""), "provenance": r.get("provenance", {}),
                 "family": r.get("family", ""), "wall_s": round(time.perf_counter() - t0, 3)})
    status = r.get("status", "not measured")
    return {"status": status, "table": run.table if status == "ok" else None, "info": info}


class Shard:
    """Inputs ``start:stop`` of an ``InputSet``, with the interface the measurement loop reads."""

    def __init__(self, inputs, start: int, stop: int):
        self.base, self.start = inputs, min(start, len(inputs))
        self.stop = max(self.start, min(stop, len(inputs)))
        self.ids = list(inputs.ids[self.start:self.stop])
        self.kind = inputs.kind

    def __len__(self) -> int:
        return len(self.ids)

    def items(self, start: int, stop: int) -> list:
        return self.base.items(self.start + start, self.start + stop)

    def key(self) -> dict:
        """The base selection's key for this shard's range (:meth:`~dobrushin.data.inputs.InputSet.key`)."""
        return self.base.key(self.start, self.stop)

    def describe(self) -> str:
        return f"inputs {self.start}-{self.stop - 1} of {self.base.describe()}"


# ------------------------------------------------------------------------------------------------
# the driver


@dataclass
class SweepResult:
    """What a sweep did: entry per shard key, and the keys ``ran``, ``skipped`` and ``failed`` (any
    status other than ``ok`` and ``empty``)."""

    out: Path
    entries: Dict[str, dict]
    ran: List[str]
    skipped: List[str]
    failed: List[str]
    wall_s: float

    def table(self):
        """The rows of every ``ok`` shard (the others have no file), in the sweep's order (model, weights, shard)."""
        ordered = sorted(self.entries.items(), key=lambda ke: ke[1]["order"])
        return open_store(self.out).tables(entries=dict(ordered))


def open_store(out) -> ResultStore:
    """The sweep folder as a :class:`~dobrushin.store.results.ResultStore` (its manifest is ``OUT/manifest.json``)."""
    out = Path(out).expanduser().resolve()
    return ResultStore(out.parent, out.name)


def _provenance(model: str, weights: str, seed: int) -> dict:
    from ..models.loading import weights_provenance

    try:
        return weights_provenance(model, pretrained=weights == "pretrained", seed=seed)
    except Exception as e:  # noqa: BLE001 - the key then says so; the worker reports the real failure
        return {"source": "unknown", "reason": one_line(e)}


def plan(spec: SweepSpec, store: ResultStore):
    """``(params, done, pending)``: the parameters of every task by key, the manifest entries of the
    finished ones (same parameters; ``ok`` with an intact file, or ``empty``) and ``[(order, task)]`` to run."""
    fingerprint = source_fingerprint(spec)
    prov = {(m, w): _provenance(m, w, spec.seed) for m in spec.models for w in spec.weights}
    params, done, pending = {}, {}, []
    for order, t in enumerate(spec.tasks()):
        params[t.key] = p = task_params(t, fingerprint, prov[(t.model, t.weights)])
        e = store.entry(t.key, p)
        if e is not None and (e.get("status") == "empty" or (e.get("status") == "ok" and store.read(e) is not None)):
            done[t.key] = {**e, "order": order}
        else:
            pending.append((order, t))
    return params, done, pending


def run_sweep(spec: SweepSpec, out, *, client=None, loader: Optional[Callable] = None,
              torch_threads: Optional[int] = None, log=None) -> SweepResult:
    """Run the shards of ``spec`` not finished in ``out``: serially when ``client`` is None, else as Dask tasks.
    ``loader``: as ``load_model`` (the default); progress and failures go to ``log`` (default stderr)."""
    log = sys.stderr if log is None else log
    t_all = time.perf_counter()
    store = open_store(out)
    params, done, pending = plan(spec, store)
    store.update_manifest(sweep=asdict(spec))
    entries, skipped = dict(done), list(done)
    print(f"sweep: {len(spec.models)} model(s) x {len(spec.weights)} weights x {len(spec.shards())} shard(s) = "
          f"{len(params)} tasks; {len(skipped)} finished before, {len(pending)} to run "
          f"({'serial' if client is None else 'on ' + str(getattr(client, 'scheduler', None) and client.scheduler.address)})",
          file=log, flush=True)
    failed, ran = [], []

    def record(order, t, status, result=None, error=None, attempts=None):
        entry = {"status": status, "model": t.model, "weights": t.weights, "shard": t.index, "order": order,
                 "params_key": params_key(params[t.key]), "params": params[t.key], "file": None,
                 **(result["info"] if result else {})}
        if status == "ok":
            table = conform(result["table"])
            path = store.dir / t.file
            atomic_write_parquet(path, table)
            entry.update(file=t.file, sha256=sha256_file(path), rows=len(table))
        if error is not None:
            entry.update(error=error, attempts=attempts)
        entry["saved"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        m = store.manifest()
        m["entries"][t.key] = entry
        atomic_write_json(store.manifest_path, m)
        entries[t.key] = entry
        ran.append(t.key)
        if status not in ("ok", "empty"):
            failed.append(t.key)
            why = error if error is not None else status
            print(f"sweep: shard {t.key} ({t.model}, {t.weights}, inputs {t.start}-{t.stop - 1}) "
                  f"{'failed after ' + str(attempts) + ' attempts: ' if error is not None else 'not measured: '}{why}",
                  file=log, flush=True)

    def reason(e: BaseException) -> str:
        return f"{type(e).__name__}: {one_line(e)}"

    if client is None:
        for order, t in pending:
            for attempt in range(1, spec.retries + 2):
                try:
                    res = run_shard(t, loader)
                except Exception as e:  # noqa: BLE001 - retried, then recorded with its reason
                    if attempt <= spec.retries:
                        print(f"sweep: shard {t.key} attempt {attempt} failed ({reason(e)}); retrying",
                              file=log, flush=True)
                        continue
                    record(order, t, "failed", error=reason(e), attempts=attempt)
                else:
                    record(order, t, res["status"], res)
                break
    elif pending:
        from distributed import as_completed

        from .sweep_dask import ModelCachePlugin

        client.register_plugin(ModelCachePlugin(torch_threads=torch_threads), name=PLUGIN_NAME)
        futures = {}
        for order, t in pending:
            f = client.submit(run_shard, t, loader, key=f"shard-{t.key}-{uuid.uuid4().hex[:8]}",
                              retries=spec.retries, pure=False)
            futures[f] = (order, t)
        for f in as_completed(list(futures)):
            order, t = futures[f]
            if f.status == "finished":
                record(order, t, (res := f.result())["status"], res)
            else:
                try:
                    exc = f.exception()
                except Exception as e:  # noqa: BLE001 - e.g. the future was cancelled
                    exc = e
                record(order, t, "failed", error=reason(exc), attempts=spec.retries + 1)
            f.release()
    wall = time.perf_counter() - t_all
    store.update_manifest(last_run={"wall_s": round(wall, 3), "ran": len(ran), "skipped": len(skipped),
                                    "failed": len(failed), "scheduler": "serial" if client is None else "dask",
                                    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    n_ok = sum(1 for k in ran if entries[k]["status"] == "ok")
    print(f"sweep: ran {len(ran)} shard(s) ({n_ok} ok, {len(failed)} not measured), skipped {len(skipped)} "
          f"finished before; {wall:.1f} s; results in {store.dir}", file=log, flush=True)
    return SweepResult(store.dir, entries, ran, skipped, failed, wall)


# ------------------------------------------------------------------------------------------------
# the command line


def add_parser(sub) -> argparse.ArgumentParser:
    s = sub.add_parser("sweep", help="measure many models on shards of the inputs, serially or on Dask",
                       description=__doc__.splitlines()[0].replace("``", ""))
    s.add_argument("models", nargs="*", metavar="MODEL_ID", help="Hugging Face or timm ids")
    s.add_argument("--models-file", type=Path, metavar="F", help="more ids, one per line (# starts a comment)")
    add_shared_options(s, inputs="as for measure: image folder, .tsv, 'embedded' or 'hf:<id>'",
                       text="as for measure: .tsv with a 'sentence' column or one per line",
                       n="number of inputs (the seeded selection of measure; default 32)",
                       weights="pretrained, untrained or pretrained,untrained",
                       device='"auto", "cpu" or "cuda" (on each worker)')
    s.add_argument("--out", type=Path, required=True, metavar="DIR", help="results folder (partitioned parquet + manifest)")
    s.add_argument("--scheduler", default="serial", help="serial (default), local:K or tcp://HOST:PORT")
    s.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE,
                   help=f"inputs per task, a multiple of --batch-size (default {DEFAULT_SHARD_SIZE})")
    s.add_argument("--retries", type=int, default=2, help="extra attempts for a task that fails (default 2)")
    s.set_defaults(func=main)
    return s


def read_models_file(path: Path) -> List[str]:
    if not path.is_file():
        raise CliError(f"--models-file {path}: no such file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"--models-file {path}: {one_line(e)}") from None
    return [w for w in (ln.split("#", 1)[0].strip() for ln in lines) if w]


def spec_from_args(args) -> SweepSpec:
    models = list(args.models) + (read_models_file(args.models_file) if args.models_file else [])
    weights = check_shared_options(args)
    resolve = lambda p: None if p is None or (not Path(p).expanduser().exists()) else str(Path(p).expanduser().resolve())  # noqa: E731
    try:
        return SweepSpec(models=tuple(models), weights=tuple(weights),
                         inputs=resolve(args.inputs) or args.inputs, text=resolve(args.text), n=args.n,
                         shard_size=args.shard_size, seed=args.seed, batch_size=args.batch_size,
                         image_size=args.image_size, max_length=args.max_length, device=args.device,
                         retries=args.retries)
    except ValueError as e:
        raise CliError(str(e)) from None


@exit_2_on_cli_error
def main(args) -> int:
    spec = spec_from_args(args)
    check_scheduler(args.scheduler)
    if args.scheduler == "serial" or not plan(spec, open_store(args.out))[2]:
        return 1 if run_sweep(spec, args.out).failed else 0  # nothing to run: no cluster to start
    try:
        from .sweep_dask import connect

        client, cluster = connect(args.scheduler)
    except (ValueError, OSError) as e:
        raise CliError(one_line(e)) from None
    try:
        threads = None if cluster is None else 1
        return 1 if run_sweep(spec, args.out, client=client, torch_threads=threads).failed else 0
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
