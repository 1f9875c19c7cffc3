"""README's result table, generated from the published scorecard: ``python -m tools.readme_table`` rewrites the
lines between the two markers in README.md from ``published/paper/scorecard.csv`` (one row per claim; the
per-model rows of a pooled claim are in the book); ``--check`` exits 1 when README is not current."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
START = "<!-- scorecard: generated from published/paper/scorecard.csv by python -m tools.readme_table -->"
END = "<!-- /scorecard -->"


def render(scorecard) -> str:
    """The Markdown table of ``scorecard`` (a scorecard CSV): claim, the paper's value, what was measured, the
    verdict; sub-rows (``↳``) left out."""
    df = pd.read_csv(scorecard, dtype=str, keep_default_na=False)
    df = df[~df["claim"].str.startswith("↳")]
    cell = lambda s: str(s).replace("|", "\\|").strip() or "—"  # noqa: E731
    lines = ["| claim | paper | measured | verdict |", "|---|---|---|---|"]
    lines += [f"| {cell(r.claim)} | {cell(r.paper_value)} | {cell(r.measured)} | **{cell(r.verdict)}** |"
              for r in df.itertuples(index=False)]
    return "\n".join(lines)


def updated(readme: str, table: str) -> str:
    """``readme`` with the lines between the markers replaced by ``table``; ValueError without the markers."""
    if START not in readme or END not in readme:
        raise ValueError(f"README lacks the markers {START!r} and {END!r}")
    head, rest = readme.split(START, 1)
    return head + START + "\n" + table + "\n" + END + rest.split(END, 1)[1]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = updated(text, render(ROOT / "published" / "paper" / "scorecard.csv"))
    if "--check" in argv:
        if new != text:
            print("README's result table is not the published scorecard's: python -m tools.readme_table")
            return 1
        return 0
    readme.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
