"""Publish a results folder: ``make reproduce`` computes the paper profile into ``results/paper-run`` and
then calls ``python -m dobrushin.experiments.publish results/paper-run published/paper --profile paper``.

The published folder holds the manifests, their tables, the CSV tables, the baseline's cells, the timings and
``PUBLISHED.json`` (digests, commit, machine, parameters, provenance, wall times), copied atomically (assembled
beside the destination and renamed).  The other tables over :data:`MAX_BYTES` are an error; FT-Transformer
checkpoints and tables that do not fit are left out (listed in ``PUBLISHED.json``; a build retrains or
re-measures them).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..store.code import PRODUCTS, product_digest  # the digests of the code that made each product

#: the published folder's size limit (the repository carries it)
MAX_BYTES = 64 * 2**20
#: the data sets whose checkpoints are published first (the paper's two benchmarks)
CHECKPOINT_ORDER = ("california", "adult")
#: files copied (globs relative to the results folder); figures and caches are recomputed
PATTERNS = ("*/manifest.json", "*/*.parquet", "*/*.csv", "*/*.analysis.json", "baseline/cells/*.json",
            "timings/*/*.json", "*.csv")


def _commit(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict:
    import torch

    return {"node": platform.node(), "platform": platform.platform(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def _manifest_summary(src: Path) -> dict:
    """Per notebook: its parameters, and per model entry its parameter key, provenance and wall time."""
    out = {}
    for man in sorted(src.glob("*/manifest.json")):
        m = json.loads(man.read_text())
        ents = {slug: {k: e[k] for k in ("model", "params_key", "status", "provenance", "wall_s", "rows") if k in e}
                for slug, e in (m.get("entries") or {}).items()}
        out[man.parent.name] = {"parameters": m.get("parameters") or {}, "profile": m.get("profile"),
                                "entries": ents, "files": sorted((m.get("files") or {}))}
    return out


def checkpoint_files(src: Path, cache=None) -> list:
    """``[(file, path in the published folder)]``: the FT-Transformer checkpoints (``.pt`` + ``.json``) the
    tabular entries of ``src`` record, looked up in ``cache`` (default ``<src>/.cache/tabular``, then the cache dir)."""
    from ..store.paths import cache_dir

    man = src / "tabular" / "manifest.json"
    if not man.exists():
        return []
    keys = {((e.get("provenance") or {}).get("pretrained") or {}).get("checkpoint_key")
            for e in (json.loads(man.read_text()).get("entries") or {}).values()} - {None}
    roots = [Path(cache) / "tabular"] if cache else [src / ".cache" / "tabular", cache_dir() / "tabular"]
    out = []
    for key in sorted(keys):
        for root in roots:
            hits = sorted(root.glob(f"*-{key}.pt"))
            if hits:
                for f in (hits[0], hits[0].with_suffix(".json")):
                    if f.exists():
                        out.append((f, Path("checkpoints") / "tabular" / f.name))
                break
    return out


def _checkpoint_pairs(files: list) -> list:
    """:func:`checkpoint_files` grouped per checkpoint, :data:`CHECKPOINT_ORDER` first, then by name."""
    groups = {}
    for f, rel in files:
        groups.setdefault(f.with_suffix("").name, []).append((f, rel))

    def rank(name: str):
        hit = [i for i, d in enumerate(CHECKPOINT_ORDER) if name.startswith(f"{d}-")]
        return (hit[0] if hit else len(CHECKPOINT_ORDER), name)

    return [sorted(groups[k], key=lambda p: p[0].suffix != ".pt") for k in sorted(groups, key=rank)]


def _tabular_entry_files(src: Path) -> dict:
    """``{slug: [files]}``: the main, heads and rollout tables of each FT-Transformer entry of ``src``."""
    man = src / "tabular" / "manifest.json"
    if not man.exists():
        return {}
    out = {}
    for slug, e in (json.loads(man.read_text()).get("entries") or {}).items():
        group = [src / "tabular" / e[k] for k in ("file", "heads_file", "rollout_file") if e.get(k)]
        group = [f for f in group if f.is_file()]
        if group:
            out[slug] = group
    return out


def _fill(named_groups: list, size: int, size_of) -> tuple:
    """Take each ``(name, group)`` in order while ``size`` plus its ``size_of(group)`` stays within
    :data:`MAX_BYTES`: ``(groups taken, names left out, the new size)``."""
    taken, left = [], []
    for name, group in named_groups:
        more = size_of(group)
        if size + more <= MAX_BYTES:
            taken.append(group)
            size += more
        else:
            left.append(name)
    return taken, left, size


def losses(old: dict, new: dict) -> list:
    """One line per model entry of ``old`` (:func:`_manifest_summary`) that ``new`` lacks, no longer measures
    (status not ``ok``) or holds fewer rows for (e.g. bundled samples used for want of a data folder)."""
    out = []
    for nb, v in sorted(old.items()):
        got = (new.get(nb) or {}).get("entries") or {}
        for slug, e in sorted((v.get("entries") or {}).items()):
            f = got.get(slug)
            if f is None:
                out.append(f"{nb}/{slug}: not in the new run")
            elif (e.get("status") or "ok") == "ok" and (f.get("status") or "ok") != "ok":  # no status: measured
                out.append(f"{nb}/{slug}: was measured, now {f.get('status')}")
            elif (f.get("rows") or 0) < (e.get("rows") or 0):
                out.append(f"{nb}/{slug}: {f.get('rows') or 0} rows, {e.get('rows')} published")
    return out


def publish(src, dest, profile: str, repo=None, cache=None, allow_losses: bool = False) -> dict:
    """Copy the publishable files and checkpoints of ``src`` to ``dest`` atomically, with ``PUBLISHED.json``;
    returns it.  ValueError (nothing written) if it would lose entries or rows of the publication in ``dest``
    (:func:`losses`), unless ``allow_losses``."""
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise FileNotFoundError(f"{src} is not a results folder")
    notebooks = _manifest_summary(src)  # read once: the loss check and PUBLISHED.json both use it
    if (dest / "PUBLISHED.json").is_file() and not allow_losses:
        lost = losses(json.loads((dest / "PUBLISHED.json").read_text()).get("notebooks") or {}, notebooks)
        if lost:
            raise ValueError(f"{src} would publish less than {dest} holds ({len(lost)} entries; were the canonical "
                             "inputs had, from DOBRUSHIN_DATA or the download, and are the weights cached?): " + "; ".join(lost[:6]) + ("; …" if len(lost) > 6 else "")
                             + ". Nothing was published; --allow-losses publishes it anyway.")
    files = sorted({f for pat in PATTERNS for f in src.glob(pat) if f.is_file()})
    optional = _tabular_entry_files(src)  # FT-Transformer tables: recomputed from a checkpoint in a minute
    files = [f for f in files if f not in {g for group in optional.values() for g in group}]
    size = sum(f.stat().st_size for f in files)
    if size > MAX_BYTES:
        raise ValueError(f"{len(files)} files of {size / 2**20:.1f} MiB exceed the {MAX_BYTES / 2**20:.0f} MiB limit")
    # fill order: the paper's checkpoints (hours of training), each entry's tables (all or none, smallest
    # first), then the other checkpoints (seconds to train)
    pairs = _checkpoint_pairs(checkpoint_files(src, cache))
    paper = [p for p in pairs if any(p[0][0].name.startswith(f"{d}-") for d in CHECKPOINT_ORDER)]
    pair_size = lambda pair: sum(f.stat().st_size for f, _ in pair)  # noqa: E731
    taken, left_out, size = _fill([(p[0][0].name, p) for p in paper], size, pair_size)
    by_size = sorted(optional.items(), key=lambda kv: (sum(f.stat().st_size for f in kv[1]), kv[0]))
    tables, tables_left_out, size = _fill(by_size, size, lambda group: sum(f.stat().st_size for f in group))
    files += [f for group in tables for f in group]
    more, more_left_out, size = _fill([(p[0][0].name, p) for p in pairs if p not in paper], size, pair_size)
    left_out += more_left_out
    extra = [fp for pair in taken + more for fp in pair]
    timings = {}
    for f in sorted((src / "timings").glob("*/*.json")):
        r = json.loads(f.read_text())
        timings[f"{f.parent.name}/{r['notebook']}"] = r.get("seconds")
    seeded = src / "SEEDED.json"  # a run started from an earlier run's keyed products (tools/seed_reproduce.py)
    digests = {p: product_digest(p) for p in PRODUCTS}
    meta = {"profile": profile, "code_digest": digests["tables"], "digests": digests, "commit": _commit(Path(repo or Path.cwd())),
            **({"seeded_from": json.loads(seeded.read_text())} if seeded.is_file() else {}),
            "machine": machine(), "published": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_times_s": timings, "notebooks": notebooks, "files": len(files) + len(extra),
            "bytes": size, "checkpoints_left_out": left_out, "tables_left_out": sorted(tables_left_out)}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for f, rel in [(f, f.relative_to(src)) for f in files] + extra:
        out = tmp / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, out)
    (tmp / "PUBLISHED.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    old = dest.parent / f".{dest.name}.old-{os.getpid()}"
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dobrushin.experiments.publish", description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dest")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--allow-losses", action="store_true",
                    help="publish even when the new run has fewer measured entries or rows than the publication it replaces")
    a = ap.parse_args(argv)
    try:
        meta = publish(a.src, a.dest, a.profile, allow_losses=a.allow_losses)
    except ValueError as e:
        print(f"publish: {e}", file=sys.stderr)
        return 2
    print(f"published {meta['files']} files ({meta['bytes'] / 2**20:.1f} MiB) to {a.dest}: code digest "
          f"{meta['code_digest']}, commit {meta['commit']}")
    if meta["tables_left_out"]:
        print(f"FT-Transformer tables left out (over {MAX_BYTES / 2**20:.0f} MiB; a build measures them again from "
              "the published checkpoint): " + ", ".join(meta["tables_left_out"]))
    if meta["checkpoints_left_out"]:
        print(f"checkpoints left out (over {MAX_BYTES / 2**20:.0f} MiB; a build retrains them): "
              + ", ".join(meta["checkpoints_left_out"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
