"""Rewrite the pins of constraints.txt with the versions installed now (run after an upgrade; then
``make reproduce``: new versions of the key packages give a new cache key, so the published results are not
reused until it publishes again).  A version's local tag (``2.14.1+cu130``) is dropped: the package index
serves the public version; a pinned package that is not installed keeps its pin, with a warning."""
import importlib.metadata as md
import re
import sys
from pathlib import Path

from packaging.version import Version

path = Path(__file__).resolve().parents[1] / "constraints.txt"
out, missing = [], []
for line in path.read_text().splitlines():
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==\S+", line.strip())
    if m:
        try:
            line = f"{m.group(1)}=={Version(md.version(m.group(1))).public}"
        except md.PackageNotFoundError:
            missing.append(m.group(1))
    out.append(line)
path.write_text("\n".join(out) + "\n")
print(f"{path}: {sum(1 for line in out if '==' in line)} pins")
if missing:
    print(f"warning: not installed, pins kept: {', '.join(missing)}", file=sys.stderr)
