"""The one display wrapper (``dobrushin.report.display``) and the chapters' small helpers."""
import pytest
from IPython.core.formatters import DisplayFormatter

from dobrushin.report import display as D
from dobrushin.report.baseline_chapter import trials_for
from dobrushin.report.display import Display, html_block, plain_text
from dobrushin.report.page import banner, details


def _mimes(obj) -> dict:
    data, _ = DisplayFormatter().format(obj)  # what IPython (and so myst_nb.glue) records
    return data


def test_glued_blocks_carry_html_and_plain_text_only():
    """Glue across documents pastes text/html and text/plain, not Markdown: html_block and plain_text
    must offer exactly those two."""
    h = _mimes(html_block("<b>x</b>", "x"))
    assert set(h) == {"text/html", "text/plain"} and h["text/html"] == "<b>x</b>" and h["text/plain"] == "x"
    t = _mimes(plain_text("a <b> & c"))
    assert set(t) == {"text/html", "text/plain"}
    assert t["text/plain"] == "a <b> & c" and t["text/html"] == '<span class="dobrushin-text">a &lt;b&gt; &amp; c</span>'


def test_page_blocks_carry_markdown_and_the_aliases_are_the_same_wrapper():
    m = _mimes(details("x", "**y**"))
    assert set(m) == {"text/markdown", "text/plain"} and m["text/plain"] == "x\n**y**"
    assert m["text/markdown"].startswith(":::{admonition} x\n") and "\n**y**\n" in m["text/markdown"]
    a = _mimes(banner("Title", "body <r>"))
    assert set(a) == {"text/html", "text/markdown", "text/plain"} and "body &lt;r&gt;" in a["text/html"]
    assert isinstance(D.html_block("<i>y</i>"), Display) and repr(D.html_block("<i>y</i>")) == "<i>y</i>"
    assert isinstance(D.plain_text("z"), Display) and repr(D.plain_text("z")) == "z"


def test_trial_counts_of_the_baseline_chapter():
    assert trials_for(64, 4000, {96: 2000}) == 4000 and trials_for(96, 4000, {96: 2000}) == 2000
    with pytest.raises(ValueError, match="no trial count for n=128"):
        trials_for(128, 4000, {96: 2000})
