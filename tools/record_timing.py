"""Write the wall-time record of one notebook run (``make notebooks`` calls it after each notebook):
``python tools/record_timing.py FILE NOTEBOOK PROFILE SECONDS [--add]``.

The record is ``{"notebook", "profile", "seconds", "passes", "last_pass_seconds", "finished"}``, written
atomically.  ``--add`` (a resumed ``make reproduce``, and the pass of ``make reproduce LANES=2|3`` that renders
again the model chapters that ran beside the baseline lane) adds this pass to the record already there, so
``seconds`` stays the whole time the run spent on the chapter over its passes (``passes`` of them: interrupted,
resumed, rendered again), not just the last pass, which may have found most of the work done."""
import json
import sys
import time
from pathlib import Path

from dobrushin.store.results import atomic_write_json


def main(argv) -> int:
    add = "--add" in argv
    args = [a for a in argv if a != "--add"]
    if len(args) != 4:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    path, notebook, profile, seconds = Path(args[0]), args[1], args[2], int(args[3])
    total, passes = seconds, 1
    if add and path.exists():
        try:
            old = json.loads(path.read_text())
            if old.get("notebook") == notebook and old.get("profile") == profile:
                total, passes = int(old["seconds"]) + seconds, int(old.get("passes", 1)) + 1
        except (ValueError, KeyError, TypeError):
            pass  # an unreadable record is replaced by this pass
    rec = {"notebook": notebook, "profile": profile, "seconds": total, "passes": passes,
           "last_pass_seconds": seconds, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(path, rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
