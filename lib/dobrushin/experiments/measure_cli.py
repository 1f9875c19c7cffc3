"""``python -m dobrushin measure MODEL_ID``: the equality condition on any model, without the book.

    python -m dobrushin measure sentence-transformers/all-MiniLM-L6-v2 --n 16 --out minilm.csv
    python -m dobrushin measure facebook/dinov2-small --inputs photos/ --weights pretrained,untrained

The model is loaded as the notebooks load it (local cache, then the hub unless ``HF_HUB_OFFLINE=1``) and
measured by their loop (:func:`measure_inputs`).  Prints a per-layer table; ``--out`` writes the tidy table
(.csv or .parquet, atomically).  Load failures give one ``error: ...`` line and exit status 2.
"""
from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from pathlib import Path
from typing import Optional

from ..math.stats import pct
from ..models.base import input_kind

OUT_SUFFIXES = (".csv", ".parquet")


class CliError(Exception):
    """A problem to report in one line with exit status 2."""


def add_parser(sub) -> argparse.ArgumentParser:
    m = sub.add_parser("measure", help="measure the equality condition on a model's attention, layer by layer",
                       description=__doc__.splitlines()[0].strip("`"))
    m.add_argument("model_id", metavar="MODEL_ID", help="Hugging Face or timm id, or a local model folder")
    add_shared_options(m)
    m.add_argument("--out", type=Path, metavar="FILE", help="write the tidy table to FILE.csv or FILE.parquet")
    m.set_defaults(func=main)
    return m


def add_shared_options(p: argparse.ArgumentParser, **help: str) -> None:
    """The options ``measure`` shares with ``sweep``; ``help`` overrides the help of an option by name."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--inputs", metavar="PATH", help=help.get("inputs", "image folder, .tsv, 'embedded' or "
                     "'hf:<dataset id>' (default: the notebooks' source for the model's kind)"))
    src.add_argument("--text", metavar="FILE", type=Path, help=help.get(
        "text", "sentences: .tsv with a 'sentence' column, or one input per non-empty line"))
    p.add_argument("--n", type=int, default=32, help=help.get("n", "number of inputs (a seeded selection; default 32)"))
    p.add_argument("--weights", default="pretrained",
                   help=help.get("weights", "pretrained, untrained or pretrained,untrained (default: pretrained)"))
    p.add_argument("--seed", type=int, default=0, help="seed of the input selection and untrained init (default 0)")
    p.add_argument("--batch-size", type=int, default=8, help="inputs per forward pass (default 8)")
    p.add_argument("--image-size", type=int, default=224, help="input resolution of vision models (default 224)")
    p.add_argument("--max-length", type=int, default=128, help="truncation length of text models (default 128)")
    p.add_argument("--device", default="auto", help=help.get("device", '"auto" (CUDA when available), "cpu" or "cuda"'))


def check_scheduler(scheduler: str) -> None:
    """CliError unless ``sweep --scheduler`` is ``serial``, ``local:K`` (K >= 1) or a ``tcp://``/``tls://`` address."""
    if scheduler.startswith("local:"):
        k = scheduler.split(":", 1)[1]
        if not k.isdigit() or int(k) < 1:
            raise CliError(f"--scheduler {scheduler}: local:K needs a positive number of workers K")
    elif scheduler != "serial" and not scheduler.startswith(("tcp://", "tls://")):
        raise CliError(f"--scheduler {scheduler}: use serial, local:K or tcp://HOST:PORT")


def check_shared_options(args) -> tuple:
    """The weights ``--weights`` names; :class:`CliError` for bad weights or a missing ``--text`` / ``--inputs``
    (reported before any model is loaded)."""
    from .params import TYPES, ParameterError, coerce

    try:
        weights = coerce("weights", args.weights, TYPES["weights"])
    except ParameterError as e:
        raise CliError(str(e).replace("parameter weights", "--weights")) from None
    if args.text is not None and args.text.is_dir():
        raise CliError(f"cannot load inputs: --text {args.text} is a folder (--text takes a file; --inputs takes a folder of images)")
    if args.text is not None and not args.text.is_file():
        raise CliError(f"cannot load inputs: --text {args.text}: no such file")
    if args.inputs is not None and args.inputs not in ("embedded", "auto", "glue") \
            and not args.inputs.startswith("hf:") and not Path(args.inputs).expanduser().exists():
        raise CliError(f"cannot load inputs: --inputs {args.inputs}: no such file or folder")
    return weights


def exit_2_on_cli_error(command):
    """``command(args)``, with a :class:`CliError` reported as one line ``error: ...`` on stderr and exit status 2."""
    @functools.wraps(command)
    def run(args) -> int:
        try:
            return command(args)
        except CliError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return run


# ------------------------------------------------------------------------------------------------


def measure_inputs(model_id: str, inputs, *, weights, loader, batch_size: int = 8, seed: int = 0,
                   image_size: int = 224, max_length: int = 128, device: str = "auto", progress: bool = False):
    """The notebooks' loop (``pipeline.measure_model``) on ``inputs`` in a throw-away store, no per-head
    subset; returns the ``ModelRun``.  ``sweep`` calls it per shard, so a shard's rows are ``measure``'s."""
    from ..store.results import ResultStore
    from .pipeline import MeasureConfig, measure_model

    config = MeasureConfig(weights=tuple(weights), force=True, recheck_unavailable=False, n_untrained=None,
                           batch_size=batch_size, seed=seed, image_size=image_size, max_length=max_length,
                           head_inputs=0, device=device, progress=progress)
    with tempfile.TemporaryDirectory(prefix="dobrushin-measure-") as tmp:
        return measure_model(model_id, inputs, store=ResultStore(tmp, "measure"), config=config, loader=loader)


def inputs_for(kind: str, *, model_id: str, inputs: Optional[str], text: Optional[Path], n: int, seed: int):
    """The inputs ``measure`` gives a model of ``kind`` for ``--inputs`` / ``--text`` / neither (the notebooks'
    source); :class:`CliError` when they cannot be loaded."""
    from ..data.inputs import DataUnavailable, load_inputs

    try:
        if text is not None:
            if kind != "text":
                raise CliError(f"{model_id} is a vision model; --text gives it sentences (use --inputs FOLDER)")
            return _text_file(text, n, seed)
        return load_inputs(kind, inputs, n, seed=seed)
    except (DataUnavailable, ValueError, OSError) as e:
        raise CliError(f"cannot load inputs: {one_line(e)}") from None


def one_line(e: BaseException) -> str:
    """An exception's reason on one line."""
    s = getattr(e, "reason", None) or str(e) or type(e).__name__
    return " ".join(str(s).split())


def _load_models(model_id: str, weights, seed: int, image_size: int, max_length: int) -> dict:
    """Every requested weights setting, loaded now so a failure stops before any work."""
    from ..models import ModelUnavailable, load_model

    out = {}
    for w in weights:
        try:
            out[w] = load_model(model_id, pretrained=(w == "pretrained"), seed=seed, image_size=image_size,
                                max_length=max_length)
        except Exception as e:  # noqa: BLE001 - whatever the loader raises, the model cannot be loaded
            what = "trained weights" if w == "pretrained" else "untrained control"
            why = one_line(e) if isinstance(e, (ModelUnavailable, ValueError, OSError)) \
                else f"{type(e).__name__}: {one_line(e)}"
            raise CliError(f"cannot load {model_id} ({what}): {why}") from None
    return out


def _text_file(path: Path, n: int, seed: int):
    from ..data.inputs import row_ids, text_set, load_texts

    if not path.is_file():
        raise CliError(f"cannot load inputs: {path}: no such file")
    if path.suffix.lower() == ".tsv":
        return load_texts(str(path), n, seed=seed)
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot load inputs: {path}: {one_line(e)}") from None
    sents = [s for s in lines if s]
    if not sents:
        raise CliError(f"cannot load inputs: {path} has no non-empty line")
    return text_set(sents, row_ids(path.name, len(sents)), n, seed, f"text file {path}")


def layer_table(table):
    """Per weights x layer: inputs, median content tokens, fraction holding (content / with special
    tokens) and the median slack of the layer bound on content tokens."""
    import pandas as pd

    keys = ["weights", "layer"]
    content = table[table["variant"] == "content"].groupby(keys)
    special = table[table["variant"] == "with_special"].groupby(keys)
    return pd.DataFrame({"inputs": table.groupby(keys)["input_id"].nunique(),
                         "content_tokens": content["n_tokens"].median(), "holds_content": content["holds"].mean(),
                         "holds_with_special": special["holds"].mean(),
                         "median_slack": content["slack"].median()}).reset_index()


def print_report(run, inputs) -> None:
    lt = layer_table(run.table)
    print(f"{run.model_id}: {inputs.describe()}")
    for w, g in lt.groupby("weights", sort=False):
        notes = run.runs.get(w, {}).get("notes")
        label = "trained weights" if w == "pretrained" else "untrained control"
        print(f"\n{label} ({notes})" if notes else f"\n{label}")
        print(f"{'layer':>5}  {'tokens':>6}  {'holds (content)':>15}  {'holds (with special)':>20}  "
              f"{'median slack':>12}")
        for r in g.itertuples():
            print(f"{r.layer:>5}  {r.content_tokens:>6.0f}  {pct(r.holds_content):>15}  "
                  f"{pct(r.holds_with_special):>20}  {r.median_slack:>12.3g}")
        t = run.table[run.table["weights"] == w]
        c, s = t[t["variant"] == "content"], t[t["variant"] == "with_special"]
        print(f"{'all':>5}  {'':>6}  {pct(c['holds'].mean()):>15}  {pct(s['holds'].mean()):>20}  "
              f"{c['slack'].median():>12.3g}   ({len(c)} input x layer pairs per variant)")


@exit_2_on_cli_error
def main(args) -> int:
    if args.out is not None and args.out.suffix.lower() not in OUT_SUFFIXES:
        raise CliError(f"--out {args.out}: use a .csv or .parquet file name")
    if args.n < 1:
        raise CliError(f"--n must be a positive number of inputs, got {args.n}")
    if not args.model_id.strip():
        raise CliError("MODEL_ID is empty")
    weights = check_shared_options(args)

    import warnings

    from ..capture import AttentionUnavailable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. "switched to eager attention" (recorded in the notes)
        loaded = _load_models(args.model_id, weights, args.seed, args.image_size, args.max_length)
        kind = input_kind(next(iter(loaded.values())).kind)
        inputs = inputs_for(kind, model_id=args.model_id, inputs=args.inputs, text=args.text, n=args.n, seed=args.seed)

        def loader(model_id, *, pretrained, **kw):  # hand over the models loaded above, once each
            from ..models import load_model

            lm = loaded.pop("pretrained" if pretrained else "untrained", None)
            return lm if lm is not None else load_model(model_id, pretrained=pretrained, **kw)

        try:
            run = measure_inputs(args.model_id, inputs, weights=weights, loader=loader,
                                 batch_size=args.batch_size, seed=args.seed, image_size=args.image_size,
                                 max_length=args.max_length, device=args.device, progress=sys.stdout.isatty())
        except ValueError as e:
            raise CliError(one_line(e)) from None
        except AttentionUnavailable as e:
            raise CliError(f"cannot measure {args.model_id}: {one_line(e)}") from None
    failed = {w: i.get("status") for w, i in run.runs.items() if i.get("status") != "ok"}
    if failed:
        raise CliError("; ".join(f"{args.model_id} ({w}): {s}" for w, s in failed.items()))
    print_report(run, inputs)
    if args.out is not None:
        from ..store.results import atomic_write_csv, atomic_write_parquet

        (atomic_write_parquet if args.out.suffix.lower() == ".parquet" else atomic_write_csv)(args.out, run.table)
        print(f"\nwrote {len(run.table)} rows to {args.out}")
    return 0
