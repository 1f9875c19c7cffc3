"""README stays short and its result table is the published scorecard's."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tools import readme_table as R

ROOT = Path(__file__).resolve().parents[1]


def test_the_result_table_is_the_published_scorecards():
    readme = (ROOT / "README.md").read_text()
    assert R.updated(readme, R.render(ROOT / "published" / "paper" / "scorecard.csv")) == readme
    assert R.main(["--check"]) == 0
    # one row per claim of the scorecard, sub-rows left out, each verdict as the scorecard states it
    card = pd.read_csv(ROOT / "published" / "paper" / "scorecard.csv", dtype=str, keep_default_na=False)
    top = card[~card["claim"].str.startswith("↳")]
    table = readme.split(R.START)[1].split(R.END)[0].strip().splitlines()
    assert len(table) == 2 + len(top)
    for line, (_, row) in zip(table[2:], top.iterrows()):
        assert line.startswith(f"| {row['claim']} |") and line.endswith(f"| **{row['verdict']}** |")


def test_a_stale_table_is_found_and_rewritten(tmp_path):
    card = tmp_path / "scorecard.csv"
    card.write_text("claim,paper_value,measured,verdict\nA | B,1%,2%,differs\n↳ sub,1%,3%,differs\n")
    text = f"# t\n\n{R.START}\n| old |\n{R.END}\n\nrest\n"
    new = R.updated(text, R.render(card))
    assert new == (f"# t\n\n{R.START}\n| claim | paper | measured | verdict |\n|---|---|---|---|\n"
                   f"| A \\| B | 1% | 2% | **differs** |\n{R.END}\n\nrest\n")
    with pytest.raises(ValueError, match="markers"):
        R.updated("no markers", "x")


def test_readme_is_at_most_150_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
