"""The book's presentation helpers (``dobrushin.report.page``), the build-noise filter of
``dobrushin.bookbuild.sphinx_fixes`` and the terminal gate of progress bars.

Pure parts are checked directly. One test renders the helpers' real notebook outputs (captured from
the calls, no kernel) into a tiny Jupyter Book and reads the built HTML: numbered figures with alt
text and computed captions, numbered tables, the hidden parameter cells; it runs when jupyter-book is
installed, and in Chromium (``check_html``) when the browser is there too.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from dobrushin.report import page as F  # noqa: E402
from dobrushin.report.style import COLORS, color_for  # noqa: E402
from dobrushin.report import layout as L  # noqa: E402
from dobrushin.report.display import Display  # noqa: E402
from dobrushin.report import plots  # noqa: E402
from dobrushin.experiments.environment import progress_enabled  # noqa: E402
from dobrushin.bookbuild.sphinx_fixes import HIDDEN_CELL_TAGS, hide_build_cells, proof_index_entries  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JB = Path(sys.executable).with_name("jupyter-book")


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize("v,expected", [
    (768.0, "768"), (np.float64(1370.0), "1370"), (np.int64(42), "42"), (0, "0"), (0.0, "0"),
    (3.43e-07, "3.43e-07"), (-2.5e-5, "-2.50e-05"), (0.4831, "0.483"), (17.84, "17.8"),
    (0.5, "0.5"), (1234.5, "1230"), (2.5e6, "2.50e+06"), (0.001, "0.001"),
    (float("nan"), "–"), (None, "–"), (True, "True"), (np.bool_(False), "False"), ("x", "x"),
])
def test_format_number(v, expected):
    assert F.format_number(v) == expected


def test_format_number_round_trips_within_digits():
    rng = np.random.default_rng(1)
    for x in 10.0 ** rng.uniform(-9, 7, size=200) * rng.choice([-1, 1], size=200):
        s = F.format_number(x)
        assert abs(float(s) - x) <= 5e-3 * abs(x), (x, s)  # 3 significant digits
        assert "e" in s or abs(x) >= 1e-3  # tiny values never print as 0.000


# ---------------------------------------------------------------- tables


def _cells(md: str) -> list:
    """Rows of the pipe table in ``md``, cells un-escaped (CommonMark backslash escapes) and without the
    zero-width spaces that let long words wrap (:func:`dobrushin.report.layout.breakable`)."""
    rows = [ln.replace("<wbr>", "") for ln in md.splitlines() if ln.startswith("|")]
    return [[re.sub(r"\\(.)", r"\1", c.strip()) for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]


def test_table_formats_without_index_and_escapes():
    df = pd.DataFrame({"model": ["a/b", "c"], "count": [768.0, 12.0], "median slack": [3.43e-7, 0.25],
                       "holds": [True, False], "note": ["<reason>", "$5 | $10"]}, index=[7, 9])
    t = F.table(df, caption="Computed: n = 2.", name="tab-x")
    md = t._repr_markdown_()
    assert md.startswith(":::{table} Computed: n = 2.\n:class: dobrushin-table\n:name: tab-x\n")
    rows = _cells(md)
    assert rows[0] == ["model", "count", "median slack", "holds", "note"]  # no index column
    assert rows[1] == [":---", "---:", "---:", ":---", ":---"]  # numbers right-aligned, bool not
    assert rows[2] == ["a/b", "768", "3.43e-07", "True", "<reason>"]
    assert rows[3] == ["c", "12", "0.25", "False", "$5 | $10"]
    assert r"\<reason\>" in md and r"\$5 \| \$10" in md  # shown literally, not a tag / math / column
    assert list(t.frame.columns) == list(df.columns) and len(t.frame) == 2


def test_table_truncates_nothing():
    df = pd.DataFrame({"n": np.arange(100), "p": np.linspace(0, 1, 100)})
    rows = _cells(F.table(df)._repr_markdown_())
    assert rows[0] == ["n", "p"] and len(rows) == 2 + 100
    assert rows[-1] == ["99", "1"]


def test_table_drop_constant_and_rename():
    df = pd.DataFrame({"weights": ["pretrained"] * 3, "layer": [0, 1, 2], "k": [1.0, 2.0, 3.0]})
    t = F.table(df, drop_constant=True, columns={"k": "holding"})
    assert _cells(t._repr_markdown_())[0] == ["layer", "holding"]
    assert t.note == "All rows: weights = pretrained."
    with pytest.raises(ValueError, match="not in the table"):
        F.table(df, columns={"nope": "x"})
    with pytest.raises(TypeError, match="DataFrame"):
        F.table([[1, 2]])
    with pytest.raises(ValueError, match="table name"):
        F.table(df, name="bad name")


def _wide(rows: int, cols: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"model": [f"model {i}" for i in range(rows)], "weights": ["trained"] * rows,
                         **{f"quantity_{j} of the run": rng.random(rows) for j in range(cols)}})


def test_table_fits_the_column_as_is_transposed_or_split():
    # a narrow table is left alone
    t = F.table(pd.DataFrame({"n": [2, 3], "p": [0.5, 0.33]}))
    assert t.layout == "as is" and len(t.parts) == 1
    # few rows, many columns: one column per row, headed by the rows' leading text cells
    t = F.table(_wide(2, 12), caption="Wide and short.", name="tab-short")
    assert t.layout == "transposed" and len(t.parts) == 1
    frame, numeric = t.parts[0]
    assert list(frame.columns) == ["", "model 0, trained", "model 1, trained"]
    assert frame[""].tolist() == [f"quantity_{j} of the run" for j in range(12)]
    assert frame["model 1, trained"].tolist() == t.frame.iloc[1, 2:].tolist()  # the same cells, swapped
    assert L.table_min_px(frame, numeric) <= L.TABLE_WIDTH_PX
    # many rows and columns: split into tables below one another, each naming the rows again
    t = F.table(_wide(9, 14), caption="Wide and long.", name="tab-long")
    assert t.layout == "split" and len(t.parts) >= 2
    shown = [c for f, _ in t.parts for c in f.columns if c not in ("model", "weights")]
    assert shown == list(t.frame.columns[2:])  # every column once, in order
    for f, num in t.parts:
        assert list(f.columns[:2]) == ["model", "weights"] and len(f) == 9
        assert L.table_min_px(f, num) <= L.TABLE_WIDTH_PX
    md = t._repr_markdown_()
    assert md.count(":::{table}") == len(t.parts) and md.count(":name: tab-long") == 1
    assert f"Wide and long. (Its columns are split over {len(t.parts)} tables, one below the other, each " \
           "repeating the columns “model” and “weights”.)" in md
    # without a text column, the first column names the rows in every part
    num = pd.DataFrame({"n": [2, 4, 8, 16, 32, 64], **{f"softmax(z/T), T={j}": np.linspace(0, 1, 6) for j in range(9)}})
    t2 = F.table(num)
    assert t2.layout == "split" and all(f.columns[0] == "n" for f, _ in t2.parts)
    # a full-width cell has room for more columns side by side
    full = F.table(_wide(9, 14), width="full")
    assert 1 <= len(full.parts) < len(t.parts)
    assert all(L.table_min_px(f, num) <= L.TABLE_WIDTHS_PX["full"] for f, num in full.parts)
    with pytest.raises(ValueError, match="width must be one of"):
        F.table(_wide(2, 2), width="page")
    assert F.table(_wide(9, 14), fit=False).layout == "as is"


def test_table_width_estimate():
    # numbers never wrap: the longest sets the width; text is as wide as its longest word (capped);
    # a header wraps between words and after "_" and "/"
    assert L.column_min_px("p", ["0.5", "3.43e-07"], True) == 8 * L.CHAR_PX + L.CELL_PAD_PX
    assert L.column_min_px("model", ["a b c", "sentence transformers"], False) == 12 * L.CHAR_PX + L.CELL_PAD_PX
    assert L.column_min_px("x", ["f" * 64], False) == L.LONGEST_UNBROKEN * L.CHAR_PX + L.CELL_PAD_PX
    # long words get break opportunities (zero-width spaces) and keep their characters; short ones stay whole
    digest = "ab12" * 16
    assert L.breakable(digest).split("\u200b") == [digest[i:i + 16] for i in range(0, 64, 16)]
    assert L.breakable("sentence-transformers/all-mpnet-base-v2 x").split("\u200b") == [
        "sentence-", "transformers/", "all-", "mpnet-", "base-", "v2 x"]
    assert L.breakable("kappa_factor float64") == "kappa_factor float64"
    md = F.table(pd.DataFrame({"sha256": [digest], "n": [12345678901234567]}))._repr_markdown_()
    assert "<wbr>".join(digest[i:i + 16] for i in range(0, 64, 16)) in md and "12345678901234567" in md
    assert "\u200b" not in md  # break opportunities are <wbr>: an id copied from the page is the id
    assert L.column_min_px("ci_low / ci_high", [], True) == 4 * L.CHAR_PX + L.CELL_PAD_PX  # "high"
    assert L.header_text("ci_low / x") == "ci_\u200blow / x"
    assert L.header_text("holds/pairs") == "holds/\u200bpairs"


def test_details_nests_a_table_in_a_collapsed_block():
    inner = F.table(pd.DataFrame({"a": [1, 2]}), caption="Inner.")
    d = F.details("All rows", inner, "Some *text*.")
    md = d._repr_markdown_()
    assert md.startswith("::::{admonition} All rows\n:class: dropdown dobrushin-details\n")
    assert md.rstrip().endswith("::::") and ":::{table} Inner." in md and "Some *text*." in md
    # the outer fence is longer than every inner one, so the block closes where it should
    fences = re.findall(r"^(:{3,})", md, re.M)
    assert max(len(f) for f in fences[1:-1]) < len(fences[0]) == len(fences[-1])


# ---------------------------------------------------------------- banner, colours


def test_banner_escapes_the_reason():
    b = F.banner("Not reproduced in this build", "weights unavailable: <reason> & more")
    assert isinstance(b, Display)
    h = b._repr_html_()
    assert h.startswith('<div class="admonition warning dobrushin-banner">')
    assert "weights unavailable: &lt;reason&gt; &amp; more" in h and "<reason>" not in h
    with pytest.raises(ValueError, match="reason is empty"):
        F.banner("t", "  ")


def test_one_colour_convention():
    assert len(set(COLORS.values())) == len(COLORS) == 4
    assert color_for("pretrained") == color_for("trained") == COLORS["trained"] == plots.WEIGHT_STYLE["pretrained"]["color"]
    assert plots.WEIGHT_STYLE["untrained"]["color"] == COLORS["untrained"]
    with pytest.raises(ValueError, match="no colour"):
        color_for("purple")


# ---------------------------------------------------------------- figures


def test_figure_markdown_and_validation():
    md = F.figure_markdown("fig-nb-depth", "What is plotted; what to see: $x$ = 0.5.", "A line plot.", "full")
    assert md.splitlines()[:5] == [":::{glue:figure} fig-nb-depth", ":name: fig-nb-depth",
                                   ":alt: A line plot.", ":width: 100%", ":figclass: dobrushin-figure full-width"]
    assert "What is plotted; what to see: $x$ = 0.5." in md
    assert F.figure_label("dinov2", "per_head") == "fig-dinov2-per-head"
    for bad in [dict(alt=" "), dict(caption=""), dict(caption="one\n\ntwo"), dict(width="half")]:
        kw = dict(label="fig-a", caption="c", alt="a", width="column") | bad
        with pytest.raises(ValueError):
            F.figure_markdown(**kw)
    with pytest.raises(ValueError, match="letters"):
        F.figure_label("my notebook", "x")


class _Capture:
    """Records what the helpers display, as nbformat outputs (what the kernel would write)."""

    def __init__(self, monkeypatch):
        import IPython.display
        import myst_nb.ext.glue as glue_mod
        from IPython.core.formatters import format_display_data

        self.outputs = []

        def display(obj, raw=False, metadata=None, **_):
            data, md = (obj, metadata or {}) if raw else format_display_data(obj)
            data = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in data.items()}
            self.outputs.append({"output_type": "display_data", "data": data, "metadata": md})

        monkeypatch.setattr(IPython.display, "display", display)
        monkeypatch.setattr(glue_mod, "ipy_display", display)

    def result(self, obj):
        from IPython.core.formatters import format_display_data

        data, md = format_display_data(obj)
        if data:
            self.outputs.append({"output_type": "execute_result", "data": data, "metadata": md,
                                 "execution_count": 1})


def _three_panel():
    fig, axes = plt.subplots(1, 3, figsize=(12, 3), layout="constrained")
    for i, ax in enumerate(axes):
        ax.plot([1, 2, 3], [i, i + 1, i * 2], color=COLORS["trained"])
    return fig


def test_figure_saves_150dpi_sized_png_and_glues_it(tmp_path, monkeypatch):
    cap = _Capture(monkeypatch)
    fig = _three_panel()
    paths = F.figure(fig, notebook="nb", name="depth", width="full", results_dir=tmp_path,
                     caption="Three panels; computed 0.25.", alt="Three line plots.")
    assert [p.name for p in paths] == ["nb-depth.png", "nb-depth.svg"]
    assert all(p.parent == tmp_path / "figures" for p in paths)
    png = paths[0].read_bytes()
    w, h = struct.unpack(">II", png[16:24])
    # scaled to the full width; a 12 x 3 in row of panels would be 2.35 in high there, so it is drawn
    # at the minimum height instead (not squashed)
    assert 3 * F.WIDTHS_IN["full"] / 12 < F.MIN_HEIGHTS_IN["full"]
    assert w == round(F.WIDTHS_IN["full"] * 150) and abs(h - round(F.MIN_HEIGHTS_IN["full"] * 150)) <= 1
    assert not plt.fignum_exists(fig.number)  # closed: the inline backend will not show it again
    assert cap.outputs == []  # shown when it is displayed (a cell's value, or in a section)
    cap.result(paths)
    glued, shown = cap.outputs
    assert glued["metadata"]["scrapbook"]["name"] == "fig-nb-depth"
    assert glued["metadata"]["scrapbook"]["mime_prefix"]  # stored, not displayed in place
    import base64

    (key,) = [k for k in glued["data"] if k.endswith("image/png")]
    assert base64.b64decode(glued["data"][key]) == png  # the page shows exactly the saved PNG
    assert shown["data"]["text/markdown"].startswith(":::{glue:figure} fig-nb-depth\n")


def test_figure_keeps_the_aspect_of_a_tall_figure(tmp_path, monkeypatch):
    _Capture(monkeypatch)
    fig, ax = plt.subplots(figsize=(6, 6))
    paths = F.figure(fig, notebook="nb", name="square", width="column", results_dir=tmp_path,
                     caption="A square.", alt="A square plot.")
    w, h = struct.unpack(">II", paths[0].read_bytes()[16:24])
    assert w == round(F.WIDTHS_IN["column"] * 150) and abs(h - w) <= 1


def test_figure_rejects_before_writing(tmp_path, monkeypatch):
    _Capture(monkeypatch)
    fig = _three_panel()
    with pytest.raises(ValueError, match="alt text is empty"):
        F.figure(fig, notebook="nb", name="x", caption="c", alt="", results_dir=tmp_path)
    assert not (tmp_path / "figures").exists()
    plt.close(fig)


# ---------------------------------------------------------------- build noise


def test_hide_build_cells_tags_parameter_cells_only():
    nb = {"cells": [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "a = 1"},
        {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "a = 2"},
        {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": "print(a)"},
        {"cell_type": "code", "metadata": {}, "source": "b = 3"},
        {"cell_type": "markdown", "metadata": {"tags": ["parameters", "remove-cell"]}, "source": "x"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    out = json.loads(hide_build_cells(json.dumps(nb)))
    tags = [c["metadata"].get("tags") for c in out["cells"]]
    assert tags == [["parameters", "remove-cell"], ["injected-parameters", "remove-cell"], ["hide-input"],
                    None, ["parameters", "remove-cell"]]
    assert set(HIDDEN_CELL_TAGS) == {"parameters", "injected-parameters"}
    untouched = json.dumps({"cells": [nb["cells"][2]]})
    assert hide_build_cells(untouched) == untouched
    assert hide_build_cells("# a MyST text notebook") == "# a MyST text notebook"


def test_proof_index_names_statements_as_the_page_does():
    # env.proof_list as sphinx-proof 0.4 writes it (label -> where and what), in an arbitrary order
    proofs = {"conj-rate": {"docname": "executed/law", "realtype": "conjecture", "countertype": "conjecture",
                            "ids": ["conj-rate"], "nonumber": False},
              "lem-generic": {"docname": "executed/law", "realtype": "lemma", "countertype": "lemma",
                              "ids": ["lem-generic"], "nonumber": False},
              "thm-equality": {"docname": "executed/theory", "realtype": "theorem", "countertype": "theorem",
                               "ids": ["thm-equality"], "nonumber": False},
              "lem-pair": {"docname": "executed/theory", "realtype": "lemma", "countertype": "lemma",
                           "ids": ["lem-pair"], "nonumber": False},
              "remark-7": {"docname": "executed/theory", "realtype": "remark", "countertype": "remark",
                           "ids": ["remark-7"], "nonumber": True}}
    titles = {"conj-rate": "Order of the approach", "lem-generic": "Genericity",
              "thm-equality": "Equality characterisation", "lem-pair": "Pair identity"}
    numbers = {"executed/theory": {"theorem": {"thm-equality": (2,)}, "lemma": {"lem-pair": (1,)}},
               "executed/law": {"conjecture": {"conj-rate": (1,)}, "lemma": {"lem-generic": (1,)}}}
    chapters = {"executed/theory": "The equality condition", "executed/law": "The baseline's law"}
    got = proof_index_entries(proofs, titles, numbers, chapters, ["intro", "executed/theory", "executed/law"])
    # chapters in reading order, statements by kind then number, named as on the page, no raw label shown
    assert [k for k, _ in got] == ["The equality condition", "The baseline's law"]
    assert [(e[0], e[6]) for e in got[0][1]] == [("Lemma 1", "Pair identity"), ("Remark", ""),
                                                 ("Theorem 2", "Equality characterisation")]
    assert [(e[0], e[6]) for e in got[1][1]] == [("Conjecture 1", "Order of the approach"), ("Lemma 1", "Genericity")]
    # each entry links to its statement: (name, subtype, docname, anchor, extra, qualifier, description)
    assert got[1][1][1][2:4] == ("executed/law", "lem-generic")
    assert all(e[0] not in proofs for _, es in got for e in es)
    # where the places on the page are known, the index follows the page
    got = proof_index_entries(proofs, titles, numbers, chapters, ["executed/theory", "executed/law"],
                              positions={"lem-pair": 0, "thm-equality": 1, "remark-7": 2})
    assert [e[0] for e in got[0][1]] == ["Lemma 1", "Theorem 2", "Remark"]


def test_progress_bars_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress_enabled(True, Tty()) is True
    assert progress_enabled(False, Tty()) is False
    assert progress_enabled(True, io.StringIO()) is False  # papermill / the book: not a terminal
    closed = io.StringIO()
    closed.close()  # isatty() raises ValueError on a closed stream
    assert progress_enabled(True, closed) is False
    assert progress_enabled(True, object()) is False  # no isatty at all


def test_pipeline_progress_never_prints_to_stdout(capfd):
    from dobrushin.store.progress import Progress

    with Progress(3, "demo") as bar:  # stdout is what a notebook shows: progress goes to stderr only
        bar.update(3)
    out = capfd.readouterr()
    assert out.out == "" and "demo  3/3 inputs" in out.err


# ---------------------------------------------------------------- a tiny book


def _notebook(cells) -> dict:
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.skipif(not JB.exists(), reason="jupyter-book not installed next to this Python")
def test_helpers_render_in_a_jupyter_book(tmp_path, monkeypatch):
    book = tmp_path / "book"
    (book / "executed").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    shutil.copytree(ROOT / "_static", book / "_static")
    (book / "book").mkdir()
    shutil.copy(ROOT / "book" / "references.bib", book / "book" / "references.bib")
    (book / "_toc.yml").write_text("format: jb-book\nroot: executed/demo\n")

    cap = _Capture(monkeypatch)
    cap.result(F.figure(_three_panel(), notebook="demo", name="panels", width="full", results_dir=tmp_path / "results",
                        caption=f"Three panels with a computed value {0.1 + 0.2:.2f} and math $\\kappa(A)$.",
                        alt="Three line plots side by side."))
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 1])
    cap.result(F.figure(fig, notebook="demo", name="line", results_dir=tmp_path / "results",
                        caption="One panel.", alt="A rising line."))
    figs = cap.outputs[:]
    cap.outputs.clear()
    cap.result(F.banner("Not reproduced in this build", "weights unavailable: <reason>"))
    banner = cap.outputs[:]
    cap.outputs.clear()
    wide = pd.DataFrame({f"column_{i}": [3.43e-7 * i, 768.0] for i in range(1, 16)})
    cap.result(F.details("Wide table", F.table(wide, caption="Fifteen columns.", name="tab-wide")))
    tables = cap.outputs[:]

    code = lambda src, outputs, tags: {"cell_type": "code", "execution_count": 1, "metadata": {"tags": tags},
                                       "source": src, "outputs": outputs, "id": f"c{len(src)}{len(tags)}"}
    nb = _notebook([
        {"cell_type": "markdown", "metadata": {}, "source": "# Demo\n\nSee {numref}`fig-demo-line`.", "id": "m1"},
        # a section heading gives the page its "Contents" sidebar, which the theme's script for
        # full-width content expects (without one it throws a console error that check_html reports)
        {"cell_type": "markdown", "metadata": {}, "source": "## Results", "id": "m2"},
        {"cell_type": "markdown", "metadata": {}, "id": "m3",
         "source": "```{prf:theorem} Layer bound\n:label: thm-demo-bound\nA statement.\n```"},
        code("profile = 'quick'  # SECRET-PARAMETERS-CELL", [], ["parameters"]),
        code("# Parameters\nprofile = 'paper'  # SECRET-INJECTED-CELL", [], ["injected-parameters"]),
        code("banner", banner, ["remove-input"]),
        code("figures", figs, ["remove-input"]),
        code("tables", tables, ["remove-input"]),
    ])
    (book / "executed" / "demo.ipynb").write_text(json.dumps(nb))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "lib") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([str(JB), "build", str(book), "-W", "-n", "--keep-going"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    html = (book / "_build" / "html" / "executed" / "demo.html").read_text()
    assert "SECRET-PARAMETERS-CELL" not in html and "SECRET-INJECTED-CELL" not in html
    figs_html = re.findall(r"<figure[^>]*>.*?</figure>", html, re.S)
    assert len(figs_html) == 2
    assert 'id="fig-demo-panels"' in figs_html[0] and "full-width" in figs_html[0]
    assert 'alt="Three line plots side by side."' in figs_html[0] and "Fig. 1" in figs_html[0]
    assert "computed value 0.30" in figs_html[0] and r"\(\kappa(A)\)" in figs_html[0]
    assert 'alt="A rising line."' in figs_html[1] and "Fig. 2" in figs_html[1]
    assert re.search(r'href="#fig-demo-line"><span class="std std-numref">Fig\. 2', html)
    assert "weights unavailable: &lt;reason&gt;" in html and "dobrushin-banner" in html
    assert "dobrushin-table" in html and "Table 1" in html and "3.43e-07" in html
    assert "dropdown" in html and "dobrushin.css" in html
    # the table of fifteen columns is shown transposed, so it fits the column
    assert "dobrushin-transposed" in html
    # the proof index names the statement as the page does, not by its raw label
    index = (book / "_build" / "html" / "prf-prf.html").read_text()
    entry = re.search(r'<a href="executed/demo\.html#thm-demo-bound">(.*?)</td>\s*<td>(.*?)</td>', index, re.S)
    assert entry, index[-3000:]
    assert "Theorem 1" in entry.group(1) and "thm-demo-bound" not in re.sub(r"<[^>]+>", "", entry.group(1))
    assert "Layer bound" in entry.group(2)

    from tools import check_html as ch

    if not (Path(ch.CHROMIUM).is_file() and os.access(ch.CHROMIUM, os.X_OK)):
        return
    report = ch.check_site(book / "_build" / "html", screenshots=tmp_path / "shots")
    page = report.page("executed/demo.html")
    # the banner shows the literal placeholder, which check_html must flag; nothing else is wrong
    assert page.problems and all("placeholder" in x and "<reason>" in x for x in page.problems), page.problems
    assert page.images == 2 and page.screenshot


# ---------------------------------------------------------------- provenance


@pytest.mark.parametrize("text,expected", [
    ("/tmp/abc/results", "(local path)"),
    ("results at /home/u/x.npy, ok", "results at (local path), ok"),
    ("{root}/results/figures", "results/figures"),
    ("C:\\Users\\me\\f.txt", "(local path)"),
    ("~/data", "(local path)"),
    ("facebook/dinov2-small", "facebook/dinov2-small"),
    ("ratio 1/2, n = 5/8", "ratio 1/2, n = 5/8"),
    ("http://x.org/a/b", "http://x.org/a/b"),
    ("in (/tmp/x)", "in ((local path))"),
])
def test_scrub_paths(tmp_path, monkeypatch, text, expected):
    from dobrushin.store import paths

    monkeypatch.setattr(paths, "project_root", lambda: tmp_path)
    assert F.scrub_paths(text.format(root=tmp_path)) == expected


def test_provenance_block_has_no_machine_paths(tmp_path, monkeypatch):
    from dobrushin.store import paths

    monkeypatch.setattr(paths, "project_root", lambda: tmp_path)
    md = F.how_run({"profile": "quick", "results_dir": "/tmp/x/results", "cache": None,
                       "models": ["facebook/dinov2-small", str(tmp_path / "w.bin")], "n": 768.0},
                      packages=("pandas",), device="cpu", timings={"measure": 12.345})._repr_markdown_()
    assert md.startswith("::::{admonition} How this chapter was run\n:class: dropdown")
    rows = [r for t in md.split(":::{table}")[1:] for r in _cells(t)]
    assert ["results_dir", "(local path)"] in rows and ["cache", "default"] in rows
    assert ["models", "facebook/dinov2-small, w.bin"] in rows and ["n", "768"] in rows
    assert ["device", "cpu"] in rows and ["pandas", pd.__version__] in rows and ["measure", "12.3"] in rows
    assert {"python", "numpy", "torch"} <= {r[0] for r in rows}
    assert "/tmp" not in md and str(tmp_path) not in md


def test_the_slack_panels_share_a_limit_above_every_panels_largest_slack():
    """slack_by_layer's panels share their y axis; its upper limit is above the largest slack of every panel
    (each panel setting its own limit clipped the others' boxes at the last panel's)."""
    import matplotlib.pyplot as plt

    from dobrushin.report import plots

    rows = [dict(model=m, weights="pretrained", variant="content", layer=layer, slack=s * (layer + 1) / 3, input_id=i)
            for m, s in (("big", 0.17), ("small", 0.03)) for layer in range(3) for i in range(4)]
    fig = plots.slack_by_layer(pd.DataFrame(rows), ncols=2)
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["big", "small"]
    for ax in axes:
        assert ax.get_ylim()[1] > 0.17
    plt.close(fig)
