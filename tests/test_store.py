"""dobrushin.store.results.ResultStore.keyed: an analysis made once, reused while its key holds, from the
results folder or the published one."""
from __future__ import annotations

import json

from dobrushin.store.results import ResultStore


def test_a_keyed_analysis_is_made_once_and_reused_from_the_published_folder(tmp_path, monkeypatch):
    calls = []

    def compute(v=1):
        calls.append(v)
        return {"k": [v, 2], "x": 0.5}

    monkeypatch.delenv("DOBRUSHIN_PUBLISHED", raising=False)
    pub = ResultStore(tmp_path / "pub", "language")
    pub.update_manifest()
    assert pub.keyed("abl", {"n": 16}, compute) == {"k": [1, 2], "x": 0.5} and calls == [1]
    assert pub.keyed("abl", {"n": 16}, lambda: compute(2)) == {"k": [1, 2], "x": 0.5} and calls == [1]  # reused
    assert pub.keyed("abl", {"n": 8}, lambda: compute(3))["k"] == [3, 2] and calls == [1, 3]  # other parameters
    pub.keyed("abl", {"n": 16}, compute)  # back to the first parameters: made again (one record per name)
    assert calls == [1, 3, 1]
    # a fresh results folder finds it in the published one, copies it and says where from
    monkeypatch.setenv("DOBRUSHIN_PUBLISHED", str(tmp_path / "pub"))
    run = ResultStore(tmp_path / "run", "language")
    assert run.keyed("abl", {"n": 16}, lambda: compute(4)) == {"k": [1, 2], "x": 0.5} and calls == [1, 3, 1]
    rec = json.loads((run.dir / "abl.analysis.json").read_text())
    assert rec["published_from"] == str(tmp_path / "pub" / "language") and rec["params"] == {"n": 16}
    # another code digest is another key: made again
    assert run.keyed("abl", {"n": 16, "code_digest": "other"}, lambda: compute(5))["k"] == [5, 2]


def test_an_unreadable_analysis_record_is_made_again(tmp_path, monkeypatch):
    monkeypatch.delenv("DOBRUSHIN_PUBLISHED", raising=False)
    store = ResultStore(tmp_path, "language")
    store.keyed("abl", {"n": 1}, lambda: {"v": 1})
    (store.dir / "abl.analysis.json").write_text("{not json")
    assert store.keyed("abl", {"n": 1}, lambda: {"v": 2}) == {"v": 2}


def test_the_documented_results_schema_is_the_stores():
    """The results-schema table in book/reproducing.md (written by hand) names every SCHEMA column, in order,
    with its dtype."""
    import re
    from pathlib import Path

    from dobrushin.store.results import SCHEMA

    text = (Path(__file__).resolve().parents[1] / "book" / "reproducing.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", text, flags=re.M)
    assert rows == list(SCHEMA.items())
