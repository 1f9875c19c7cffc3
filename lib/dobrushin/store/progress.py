"""Progress of long work (``Progress``) for the person at the terminal, never in a notebook: a live bar
on a terminal, one line per update otherwise, and the same line appended to a log file.  It is written
with ``os.write`` to the descriptor of ``sys.stderr``, which under papermill is the kernel's original
standard error (the terminal), not the stream into the executed notebook.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Optional


def _fmt(s: float) -> str:
    s = int(round(max(0.0, s)))
    h, r = divmod(s, 3600)
    m, s = divmod(r, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def _stderr_fd() -> Optional[int]:
    try:
        return int(sys.stderr.fileno())
    except (AttributeError, ValueError, OSError):  # a stream without a descriptor (pytest capture, …)
        try:
            return int(sys.__stderr__.fileno())
        except (AttributeError, ValueError, OSError):
            return None


class Progress:
    """``done``/``total`` with elapsed time and ETA; ``log``: file to append each line to (None: none);
    ``terminal``: draw on standard error."""

    def __init__(self, total: int, desc: str, *, unit: str = "inputs", log=None, terminal: bool = True,
                 done: int = 0):
        self.total, self.desc, self.unit = int(total), desc, unit
        self.done = int(done)
        self.start = time.perf_counter()
        self.first = self.done  # work already done when we started (resumed batches): not in the rate
        self.log = Path(log) if log else None
        self.fd = _stderr_fd() if terminal else None
        try:
            self.tty = self.fd is not None and os.isatty(self.fd)
        except OSError:
            self.tty = False
        self._last = 0.0

    def line(self, note: str = "") -> str:
        el = time.perf_counter() - self.start
        if self.total <= 0:  # no known total: the count and the elapsed time
            return f"{self.desc}  {self.done} {self.unit}  elapsed {_fmt(el)}" + (f"  {note}" if note else "")
        rate_n = self.done - self.first
        eta = el / rate_n * (self.total - self.done) if rate_n > 0 else None
        pct = 100.0 * self.done / self.total if self.total else 100.0
        s = (f"{self.desc}  {self.done}/{self.total} {self.unit} ({pct:.0f}%)  elapsed {_fmt(el)}  "
             f"ETA {_fmt(eta) if eta is not None else '?'}")
        return s + (f"  {note}" if note else "")

    def _write(self, text: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            self.fd = None

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += int(n)
        if self.total > 0:
            self.done = min(self.total, self.done)
        s = self.line(note)
        if self.log is not None:
            try:
                self.log.parent.mkdir(parents=True, exist_ok=True)
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + s + "\n")
            except OSError:
                self.log = None
        if self.tty:
            now = time.perf_counter()
            if now - self._last >= 0.5 or self.done >= self.total:
                self._last = now
                width = 24
                fill = int(width * self.done / self.total) if self.total > 0 else 0
                self._write("\r\x1b[K[" + "#" * fill + "." * (width - fill) + "] " + s)
        else:
            self._write(s + "\n")

    def close(self) -> None:
        if self.tty:
            self._write("\n")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
