"""Put the parameter-checking cell right after each notebook's ``parameters`` cell (idempotent).

    python tools/add_params_cell.py            # every notebooks/*.ipynb
    python tools/add_params_cell.py --check    # exit 1 if any notebook lacks the cell or has it wrong

The cell (id ``resolve-parameters``, tagged ``remove-input``) is::

    import dobrushin.experiments.params  # check and convert the parameters above (papermill -p passes strings)
    _params = dobrushin.experiments.params.resolve(globals(), "<notebook name>")

When the code cell after the ``parameters`` cell already has that id it is rewritten in place;
otherwise the cell is inserted.  Nothing else in the notebook changes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "resolve-parameters"
TAGS = ["remove-input"]


def cell_source(name: str) -> str:
    return ("import dobrushin.experiments.params  # check and convert the parameters above (papermill -p passes strings)\n"
            f'_params = dobrushin.experiments.params.resolve(globals(), "{name}")')


def apply(path: Path, check: bool = False) -> bool:
    """True when the notebook already had the right cell (nothing written)."""
    nb = nbformat.read(path, as_version=4)
    idx = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if len(idx) != 1:
        raise SystemExit(f"{path}: expected one cell tagged 'parameters', found {len(idx)}")
    i = idx[0] + 1
    src = cell_source(path.stem)
    nxt = nb.cells[i] if i < len(nb.cells) else None
    if nxt is not None and nxt.get("id") == CELL_ID:
        ok = nxt.source == src and list(nxt.metadata.get("tags", [])) == TAGS and not nxt.get("outputs")
        if ok or check:
            return ok
        nxt.source, nxt.metadata["tags"], nxt.outputs, nxt.execution_count = src, list(TAGS), [], None
    else:
        if check:
            return False
        cell = nbformat.v4.new_code_cell(src, metadata={"tags": list(TAGS)})
        cell["id"] = CELL_ID
        nb.cells.insert(i, cell)
    nbformat.write(nb, path)
    return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path)
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    paths = a.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    bad = [q for q in paths if not apply(q, a.check)]
    if a.check and bad:
        print("missing or outdated parameter cell: " + ", ".join(str(q) for q in bad), file=sys.stderr)
        return 1
    for q in ([] if a.check else bad):
        print(f"updated {q}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
