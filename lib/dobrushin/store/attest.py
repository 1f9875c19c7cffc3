"""Attestations: published results stay valid for changed code once ``make verify`` has re-measured a
sample with it and every decision agreed; it then writes ``<published>/attestations/<tables digest>.json``
mapping each product to ``{"published": digest, "now": digest, "evidence": why}``.

``resolve`` accepts an attestation only for the publication it names, under the same ``SCHEMA_VERSION``
and tolerances, and only among its oldest ``MAX_ATTESTATIONS``; then the cache key uses the published
digest, so published entries are reused as they are.  Otherwise ``make reproduce`` publishes afresh.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Dict, Optional

#: version of the results schema (columns and their meaning); an attestation made under another is refused
SCHEMA_VERSION = 1
#: absolute tolerance on κ(A), κ(½(I+A)) and the slack: the attention is captured in float32 (unit
#: roundoff 6e-8); head averaging and a softmax over up to 1 370 tokens move an entry by at most a few
#: hundred of those on another machine or thread count, and κ is a sum of at most n of them, halved
KAPPA_TOL = 1e-5
#: a decision whose margin is below this may flip under float32 rounding (a few ulps of an entry ≤ 1)
FLOAT_ERROR = 1e-6
#: attestations one publication carries at most; the next code change needs ``make reproduce``
MAX_ATTESTATIONS = 5


def _read_json(path: Path) -> Optional[dict]:
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def published_digests(root) -> Dict[str, str]:
    """``{product: digest}`` of the code that made the publication in ``root`` (``PUBLISHED.json``'s ``digests``;
    without them, its ``code_digest`` as the tables'); empty when there is none."""
    meta = _read_json(Path(root) / "PUBLISHED.json")
    if meta is None:
        return {}
    if isinstance(meta.get("digests"), dict):
        return {str(k): str(v) for k, v in meta["digests"].items()}
    return {"tables": str(meta.get("code_digest"))}


def attestations(root) -> list:
    """The attestations stored with the publication in ``root`` (oldest first; unreadable files skipped)."""
    folder = Path(root) / "attestations"
    recs = [r for r in (_read_json(f) for f in sorted(folder.glob("*.json"))) if r and "products" in r]
    return sorted(recs, key=lambda r: str(r.get("date", "")))


def refusal(rec: dict, root) -> str:
    """Why the attestation ``rec`` is not accepted for the publication in ``root`` ("" when it is)."""
    pub = published_digests(root)
    if rec.get("schema") != SCHEMA_VERSION:
        return f"made under results schema {rec.get('schema')}, not {SCHEMA_VERSION}"
    if rec.get("kappa_tol") != KAPPA_TOL or rec.get("float_error") != FLOAT_ERROR:
        return "made under other tolerances"
    if any(v.get("published") != pub.get(p) for p, v in rec["products"].items()):
        return "made for another publication"
    return ""


def resolve(product: str, digest: str, root) -> str:
    """The digest that keys ``product`` made by code of ``digest``: the published one when an accepted
    attestation in ``root`` carries ``digest`` over to it, else ``digest`` itself."""
    for rec in attestations(root)[:MAX_ATTESTATIONS]:  # the oldest ones: a later one beyond the limit never counts
        v = rec["products"].get(product) or {}
        if v.get("now") == digest and not refusal(rec, root):
            return str(v["published"])
    return digest


def write(root, products: Dict[str, dict], report: dict) -> Path:
    """Write the attestation of ``products`` with the figures of verify's ``report`` atomically into
    ``root/attestations/``; ValueError when the publication already carries ``MAX_ATTESTATIONS``."""
    root = Path(root)
    path = root / "attestations" / f"{products.get('tables', {}).get('now') or next(iter(products.values()))['now']}.json"
    if len(attestations(root)) >= MAX_ATTESTATIONS and not path.exists():
        raise ValueError(f"the publication in {root} already carries {MAX_ATTESTATIONS} attestations: "
                         "make reproduce publishes results of the current code")
    comps = report.get("comparisons") or []
    rec = {"products": products, "schema": SCHEMA_VERSION, "kappa_tol": KAPPA_TOL, "float_error": FLOAT_ERROR,
           "groups": len(comps), "rows_compared": int(sum(c.get("rows", 0) for c in comps)),
           "max_abs_diff": float(max([c.get("max_abs_diff", 0.0) for c in comps] or [0.0])),
           "excused_near_ties": int(sum(len(c.get("excused") or ()) for c in comps)),
           "sample": {k: report.get(k) for k in ("seed", "per_group")},
           "machine": {"node": platform.node(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # written beside it, then renamed: never half a file
    tmp.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
