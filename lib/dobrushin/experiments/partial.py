"""Resumable batches of the measurement loop: every completed batch is written atomically under
``results/<notebook>/.partial/`` (:class:`PartialBatches`), so a killed run resumes from its last completed
batch; and the pause points of the kill-and-resume test (:data:`PAUSE_ENV`, :func:`pause_point`)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pandas as pd

from ..store.results import HEAD_COLUMNS, ROLLOUT_COLUMNS, ResultStore, conform, frame

#: kill-and-resume test hook: ``"forward:3"`` pauses in batch 3's forward pass, ``"write:3"`` before its
#: folder is renamed into place; the process writes ``DOBRUSHIN_PAUSE_FILE`` and sleeps
PAUSE_ENV = "DOBRUSHIN_PAUSE_AT"


def pause_point(point: str, batch: int) -> None:
    """Pause here (``point`` of batch ``batch``) when :data:`PAUSE_ENV` names it; else return at once."""
    at = os.environ.get(PAUSE_ENV)
    if not at or at != f"{point}:{batch}":
        return
    mark = os.environ.get("DOBRUSHIN_PAUSE_FILE")
    if mark:
        Path(mark).write_text(f"{point}:{batch} {os.getpid()}\n")
    time.sleep(3600)


class PartialBatches:
    """Per-batch tables of one weights setting: ``.partial/<slug>/<params key>/<weights>/batch-00012/`` holding
    ``table``, ``rollout``, ``heads`` (.parquet) and ``ids.json``.  Each folder is renamed into place (atomic),
    reused only for the same key and input ids; :meth:`discard` removes every key of the slug."""

    def __init__(self, store: ResultStore, slug: str, params: Mapping[str, Any], weights: str):
        from ..store.results import params_key

        self.root = store.dir / ".partial" / slug
        self.key = params_key(params)
        self.dir = self.root / self.key / weights

    def _path(self, batch: int) -> Path:
        return self.dir / f"batch-{batch:05d}"

    def load(self, batch: int, ids: Sequence[str]) -> Optional[dict]:
        p = self._path(batch)
        if not p.is_dir():
            return None
        try:
            if json.loads((p / "ids.json").read_text()) != [str(i) for i in ids]:
                raise ValueError("other inputs")
            return {"table": conform(pd.read_parquet(p / "table.parquet")),
                    "rollout": frame(pd.read_parquet(p / "rollout.parquet"), ROLLOUT_COLUMNS),
                    "heads": frame(pd.read_parquet(p / "heads.parquet"), HEAD_COLUMNS)}
        except Exception:  # noqa: BLE001 - unreadable: recompute this batch
            shutil.rmtree(p, ignore_errors=True)
            return None

    def save(self, batch: int, ids: Sequence[str], table: pd.DataFrame, rollout: pd.DataFrame,
             heads: pd.DataFrame) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".batch-{batch:05d}.", dir=self.dir))
        try:
            for name, df in (("table", table), ("rollout", rollout), ("heads", heads)):
                df.to_parquet(tmp / f"{name}.parquet", index=False)
            (tmp / "ids.json").write_text(json.dumps([str(i) for i in ids]))
            for f in tmp.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
            pause_point("write", batch)
            final = self._path(batch)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
