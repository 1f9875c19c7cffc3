"""Rewrite the pins of constraints.txt with the versions installed now (run after an upgrade; then
``make reproduce``, since new versions of the key packages give a new cache key)."""
import importlib.metadata as md
import re
from pathlib import Path

path = Path(__file__).resolve().parents[1] / "constraints.txt"
out = []
for line in path.read_text().splitlines():
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==\S+", line.strip())
    out.append(f"{m.group(1)}=={md.version(m.group(1))}" if m else line)
path.write_text("\n".join(out) + "\n")
print(f"{path}: {sum(1 for line in out if '==' in line)} pins")
