"""The browser check of the built book (``tools.check_html``).

Three layers:
* pure-Python parts (page discovery, link resolution, raw-TeX detection) — always run;
* the checker in headless Chromium on a small synthetic site with one known defect per page, so each
  kind of failure must be detected and the clean pages must pass — runs when /usr/bin/chromium exists;
* the checker on the real built book (``_build/html``) — runs when the book has been built.
"""
from __future__ import annotations

import importlib.util
import os
import struct
import zlib
from pathlib import Path

import pytest

from tools import check_html as ch

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "_build" / "html"
HAVE_CHROMIUM = Path(ch.CHROMIUM).is_file() and os.access(ch.CHROMIUM, os.X_OK)
HAVE_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None
needs_browser = pytest.mark.skipif(
    not (HAVE_CHROMIUM and HAVE_PLAYWRIGHT),
    reason=f"needs {ch.CHROMIUM} (.ci/install-chromium.sh) and the playwright package")


def _mathjax_dir():
    """MathJax 3 as shipped by sphinx-mathjax-offline (the copy the book serves), or None."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"
    return d if (d / "tex-chtml.js").is_file() else None


MATHJAX = _mathjax_dir()


def png_bytes(w: int, h: int) -> bytes:
    """A valid RGB PNG of size w×h, written by hand so the test relies on no image library."""
    raw = b"".join(b"\x00" + b"".join(bytes([(x * 40) % 256, (y * 40) % 256, 128]) for x in range(w))
                   for y in range(h))  # each row: filter byte 0, then RGB pixels

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def page(title: str, body: str, head: str = "") -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"{head}</head><body><h1 id='top'>{title}</h1>{body}</body></html>")


MATHJAX_HEAD = ("<script>window.MathJax = {options: {processHtmlClass: 'math'}}</script>"
                "<script defer src='_static/mathjax/tex-chtml.js'></script>")


def _fake_math(width_px: int, container_style: str, outer: str = "") -> str:
    """A display equation as MathJax lays it out (mjx-container > mjx-math), of a given width,
    in a 300 px text column; no MathJax needed."""
    return (f"<div style='width:300px;{outer}'><mjx-container class='MathJax' jax='CHTML' display='true' "
            f"style='display:block;{container_style}'><mjx-math style='display:inline-block;"
            f"width:{width_px}px;height:1em'></mjx-math></mjx-container></div>")


def _table(n_cols: int, box_style: str, wrap: bool = False) -> str:
    """A table of ``n_cols`` columns in a 300 px text column, inside a box styled ``box_style``
    (``overflow-x:auto`` is what the book theme's scroll container does). Each cell is 80 px of
    unbreakable text unless ``wrap``."""
    cell = ("<td>some words that wrap</td>" if wrap else
            "<td style='white-space:nowrap'><span style='display:inline-block;width:80px'>x</span></td>")
    head = "".join(f"<th>c{i}</th>" for i in range(n_cols))
    return (f"<div style='width:300px'><div style='{box_style}'><table><caption>Table {n_cols}: test "
            f"table</caption><thead><tr>{head}</tr></thead><tbody><tr>{cell * n_cols}</tr></tbody></table>"
            "</div></div>")


def write_site(root: Path) -> dict:
    """A synthetic built site: {page: what is wrong with it} ('' for the clean ones)."""
    (root / "_static").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "pic.png").write_bytes(png_bytes(12, 8))
    (root / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    # a template under _static is an asset, not a page: it must not be opened
    (root / "_static" / "macros.html").write_text("<p>{{ template }} <a href='nowhere.html'>x</a></p>")
    pages = {
        "index.html": ("", page(
            "Index",
            "<p>A clean page: an image, links to pages and anchors, and prose dollars "
            "($5 and $10) that are not math, a comparison κ < 1 and n > 2, a placeholder in code "
            "<code>&lt;reason&gt;</code>, a custom element <my-note>note</my-note>.</p>"
            "<img src='pic.png' alt='a small test gradient'><img src='pic.png' alt='' role='presentation'>"
            "<p id='here'><a href='#here'>self</a> <a href='other.html#sec'>other</a> "
            "<a href='sub/'>sub folder</a> <a href='pic.png'>file</a> "
            "<a href='https://example.com/page'>an external link is fine to have</a></p>")),
        "other.html": ("", page("Other", "<h2 id='sec'>Section</h2><a href='index.html#top'>back</a>")),
        "sub/index.html": ("", page("Sub", "<a href='../index.html'>up</a>")),
        "broken_link.html": ("link", page(
            "Broken link", "<a href='missing.html'>gone</a> <a href='other.html#nope'>bad anchor</a>")),
        "broken_image.html": ("image", page(
            "Broken image", "<img src='nothere.png' alt='a'><img src='corrupt.png' alt='b'>")),
        "external.html": ("external", page(
            "External request", "<img src='https://example.com/tracker.png' alt='ext'>",
            head="<script src='https://cdn.example.org/lib.js'></script>")),
        "console_error.html": ("console", page(
            "Console error", "<p>text</p><script>console.error('boom from the page');"
            "throw new Error('kaboom');</script>")),
        # meta-refresh pages (Jupyter Book writes index.html so when the root is in a subfolder)
        "moved.html": ("", "<meta http-equiv='Refresh' content='0; url=other.html#sec' />"),
        "moved_broken.html": ("redirect", "<meta http-equiv='refresh' content='0; URL=nowhere.html'>"),
        "raw_tex.html": ("rawtex", page(
            "Raw TeX", r"<p>The value $\kappa(A)$ was never typeset, nor was \(x^2\).</p>")),
        # a `<reason>` placeholder that Markdown passed through as a tag: its text is gone
        "swallowed_tag.html": ("unknown-element", page(
            "Swallowed", "<p>weights unavailable: “<reason>”</p>")),
        "visible_placeholder.html": ("placeholder", page(
            "Visible", "<p>weights unavailable: &lt;reason&gt;</p>")),
        "entity_text.html": ("entity", page(
            "Entity", "<p>weights unavailable: &amp;lt;reason&amp;gt;</p>")),
        "alt_text.html": ("alt", page(
            "Alt text", "<img src='pic.png'><img src='pic.png' alt=''><img src='pic.png' alt='pic.png'>"
            "<img src='sub/../pic.png' alt='pic'><img src='pic.png' alt='A described picture'>")),
        # display math measured without MathJax: mjx-math of a given width in a 300 px column
        "math_fits.html": ("", page("Fits", _fake_math(200, ""))),
        "math_cut.html": ("math-cut", page("Cut", _fake_math(800, "", outer="overflow:hidden"))),
        "math_scroll.html": ("math-scroll", page("Scroll", _fake_math(800, "overflow-x:auto"))),
        "math_past.html": ("math-past", page("Past", _fake_math(800, ""))),
        # tables in a 300 px column: one that fits (its text wraps), three that do not
        "table_fits.html": ("", page("Table fits", _table(3, "", wrap=True))),
        "table_scroll.html": ("table-scroll", page("Table scroll", _table(12, "overflow-x:auto"))),
        "table_past.html": ("table-past", page("Table past", _table(12, ""))),
        "table_cut.html": ("table-cut", page("Table cut", _table(12, "overflow:hidden"))),
        # a wide table inside a closed <details> is measured too (the reader may open it)
        "table_details.html": ("table-details", page(
            "Table in details", f"<details><summary>more</summary>{_table(12, 'overflow-x:auto')}</details>")),
        # contrast: #767676 on white is 4.54:1 (passes), #949494 is 3.03:1 (passes only as large text)
        "contrast_ok.html": ("", page(
            "Contrast ok", "<p style='color:#767676'>grey but readable</p>"
                           "<p style='color:#949494;font-size:28px'>large light grey heading-size text</p>"
                           "<p style='color:#fff;background:#0072b2'>white on blue</p>"
                           "<div style='background:#333'><p style='color:#ddd'>light on a dark box</p></div>")),
        "contrast_low.html": ("contrast", page(
            "Contrast low", "<p style='color:#949494'>light grey caption text</p>"
                            "<div style='background:#333'><p style='color:#555'>dark on dark</p></div>"
                            "<p style='color:rgba(0,0,0,0.3)'>faint translucent text</p>"
                            "<p style='opacity:0.3'>faded paragraph</p>")),
        "figure_ok.html": ("", page(
            "Figure ok", "<figure><img src='pic.png' width='200' height='120' alt='a test gradient'>"
                         "<figcaption><span>Fig. 1 </span>A test gradient, captioned.</figcaption></figure>")),
        "figure_nocaption.html": ("figure-caption", page(
            "Figure no caption", "<figure><img src='pic.png' width='200' height='120' alt='a test gradient'></figure>"
                                 "<figure><img src='pic.png' width='200' height='120' alt='numbered only'>"
                                 "<figcaption>Fig. 2</figcaption></figure>"
                                 "<div class='cell_output'><img src='pic.png' width='300' height='200' "
                                 "alt='a bare plot output'></div>")),
    }
    if MATHJAX is not None:
        (root / "_static" / "mathjax").symlink_to(MATHJAX, target_is_directory=True)
        pages["theory.html"] = ("", page(
            "Theory", r"<p>Inline <span class='math notranslate nohighlight'>\(\kappa(A)\le 1\)</span>"
            r" and display</p><div class='math notranslate nohighlight'>"
            r"\[\kappa(\tfrac12(I+A)) \le \tfrac12(1+\kappa(A))\]</div>", head=MATHJAX_HEAD))
        long_sum = " + ".join(f"\\kappa(A_{{{i}}})" for i in range(40))
        pages["theory_wide.html"] = ("math-wide", page(
            "Wide", f"<div style='width:400px'><div class='math notranslate nohighlight'>\\[{long_sum}\\]</div></div>",
            head=MATHJAX_HEAD))
        pages["math_error.html"] = ("mathjax-error", page(
            "Math error", r"<p><span class='math'>\(\frac{1}\)</span></p>", head=MATHJAX_HEAD))
    for rel, (_, html) in pages.items():
        (root / rel).write_text(html, encoding="utf-8")
    return {rel: defect for rel, (defect, _) in pages.items()}


# ---------------------------------------------------------------- no browser needed


def test_find_pages_skips_asset_folders(tmp_path):
    expected = write_site(tmp_path)
    assert ch.find_pages(tmp_path) == sorted(expected)
    assert ch.redirect_of(tmp_path / "moved.html") == "other.html#sec"
    assert ch.redirect_of(tmp_path / "index.html") is None
    assert "_static/macros.html" not in ch.find_pages(tmp_path)


def test_check_link_resolves_files_folders_and_anchors(tmp_path):
    write_site(tmp_path)
    base = "http://127.0.0.1:1/"
    ok = ["other.html#sec", "other.html", "sub/", "sub/index.html#top", "pic.png", "index.html"]
    for href in ok:
        assert ch.check_link(tmp_path, "index.html", base + href, base, set()) is None, href
    assert "no such file" in ch.check_link(tmp_path, "index.html", base + "missing.html", base, set())
    assert "no such anchor" in ch.check_link(tmp_path, "index.html", base + "other.html#nope", base, set())
    # an anchor that only the rendered page has (added by a script) counts on that page
    assert ch.check_link(tmp_path, "index.html", base + "index.html#live", base, {"live"}) is None
    assert ch.check_link(tmp_path, "index.html", "https://example.com/x", base, set()) is None


@pytest.mark.parametrize("text,kinds", [
    (r"value $\kappa(A)$ here", ["$…$"]),
    ("value $n=10$.", ["$…$"]),
    ("$$x^2$$", ["$$…$$"]),
    (r"see \(a_1\) and \[b\]", [r"\(…\)", r"\[…\]"]),
    (r"\begin{align} x \end{align}", [r"\begin{…}"]),
    ("costs $5 and $10, or $5–$10", []),
    ("no math at all", []),
])
def test_raw_tex_detection(text, kinds):
    found = ch._raw_tex([text])
    assert [f.split(":")[0] for f in found] == kinds


def test_cli_without_pages_exits_2(tmp_path, capsys):
    assert ch.main([str(tmp_path)]) == 2
    assert "no .html pages" in capsys.readouterr().err


# ---------------------------------------------------------------- synthetic site in Chromium


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    if not (HAVE_CHROMIUM and HAVE_PLAYWRIGHT):
        pytest.skip(f"needs {ch.CHROMIUM} and playwright")
    root = tmp_path_factory.mktemp("site")
    defects = write_site(root)
    shots = tmp_path_factory.mktemp("shots")
    report = ch.check_site(root, screenshots=shots)
    return root, defects, report, shots


@needs_browser
def test_every_page_checked_and_clean_pages_pass(synthetic):
    root, defects, report, _ = synthetic
    assert [p.path for p in report.pages] == sorted(defects)
    for rel, defect in defects.items():
        p = report.page(rel)
        if not defect:
            assert p.ok, (rel, p.problems)
    assert not report.ok


@needs_browser
def test_clean_page_counts(synthetic):
    _, _, report, _ = synthetic
    p = report.page("index.html")
    assert p.images == 2  # one described, one decorative (alt="" with role="presentation")
    assert p.links_checked == 4  # #here, other.html#sec, sub/, pic.png
    assert p.external_links == 1


@needs_browser
def test_broken_links_detected(synthetic):
    probs = synthetic[2].page("broken_link.html").problems
    assert any("missing.html" in x and "no such file" in x for x in probs), probs
    assert any("other.html#nope" in x and "no such anchor" in x for x in probs), probs


@needs_browser
def test_broken_images_detected(synthetic):
    probs = synthetic[2].page("broken_image.html").problems
    assert any(x.startswith("image") and "nothere.png" in x for x in probs), probs
    assert any(x.startswith("image") and "corrupt.png" in x for x in probs), probs
    assert any("HTTP 404" in x and "nothere.png" in x for x in probs), probs


@needs_browser
def test_external_requests_blocked_and_reported(synthetic):
    p = synthetic[2].page("external.html")
    assert "https://example.com/tracker.png" in p.blocked_requests
    assert "https://cdn.example.org/lib.js" in p.blocked_requests
    assert any("leaving the machine" in x for x in p.problems)
    # the browser's own "failed to load" note about a blocked request is not a second error
    assert not p.console_errors, p.console_errors


@needs_browser
def test_redirect_pages_checked_without_loading(synthetic):
    report = synthetic[2]
    assert report.page("moved.html").redirect == "other.html#sec"
    assert report.page("moved.html").ok
    probs = report.page("moved_broken.html").problems
    assert len(probs) == 1 and "redirect" in probs[0] and "nowhere.html" in probs[0], probs
    # the 0-second refresh did not hijack the pages checked after it
    assert all("navigated away" not in x and "could not be checked" not in x
               for p in report.pages for x in p.problems)


@needs_browser
def test_screenshot_follows_index_redirect(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "index.html").write_text("<meta http-equiv='Refresh' content='0; url=book/intro.html' />")
    (tmp_path / "book" / "intro.html").write_text(page("Intro", "<p>first page</p>"))
    report = ch.check_site(tmp_path, screenshots=tmp_path / "shots")
    assert report.ok, [p.problems for p in report.pages]
    assert report.page("book/intro.html").screenshot == str(tmp_path / "shots" / "book__intro.png")
    assert (tmp_path / "shots" / "book__intro.png").is_file()


@needs_browser
def test_console_errors_detected(synthetic):
    p = synthetic[2].page("console_error.html")
    assert any("boom from the page" in e for e in p.console_errors), p.console_errors
    assert any("kaboom" in e for e in p.console_errors), p.console_errors


@needs_browser
def test_raw_tex_detected(synthetic):
    probs = synthetic[2].page("raw_tex.html").problems
    assert any("raw TeX" in x and r"\kappa(A)" in x for x in probs), probs
    assert any("raw TeX" in x and "x^2" in x for x in probs), probs


@needs_browser
@pytest.mark.skipif(MATHJAX is None, reason="sphinx-mathjax-offline (local MathJax) not installed")
def test_local_mathjax_typesets(synthetic):
    p = synthetic[2].page("theory.html")
    assert p.ok, p.problems
    assert p.math_elements == 2 and p.mathjax_outputs == 2


@needs_browser
@pytest.mark.skipif(MATHJAX is None, reason="sphinx-mathjax-offline (local MathJax) not installed")
def test_mathjax_error_detected(synthetic):
    probs = synthetic[2].page("math_error.html").problems
    assert any(x.startswith("MathJax error") for x in probs), probs


def test_placeholder_detection():
    found = ch._placeholders(["weights unavailable: <reason>", "see <model id> and </b>",
                              "shown &lt;reason&gt; and &#60;", "κ < 1 and n > 2", "a<-b", "x <= y"])
    kinds = [f.split(":")[0] for f in found]
    assert kinds == ["placeholder <…>"] * 3 + ["HTML entity as text"] * 2, found
    assert "'&lt;reason&gt;'" in found[3]
    assert "'<reason>'" in found[0] and "weights unavailable" in found[0]


@pytest.mark.parametrize("src,alt,problem", [
    ("pic.png", None, "no alt"),
    ("pic.png", "  ", "empty"),
    ("_images/abc123.png", "_images/abc123.png", "file name"),
    ("../_images/abc123.png", "_images/abc123.png", "file name"),
    ("../_images/abc123.png", "abc123", "file name"),
    ("pic.png", "Fraction holding per layer", None),
    ("data:image/png;base64,AAAA", "a plot", None),
    ("pic.png", "", None),  # decorative (see below)
])
def test_alt_problem(src, alt, problem):
    decorative = problem is None and alt == ""
    got = ch.alt_problem(src, alt, decorative)
    assert (got is None) if problem is None else (problem in got), got


def test_math_problem():
    assert ch.math_problem({"need": 300.5, "avail": 300, "how": "is cut off"}) is None  # sub-pixel
    msg = ch.math_problem({"need": 812, "avail": 690, "how": "is cut off", "tex": r"\kappa(A) + 2\kappa"})
    assert "cut off" in msg and "812 px" in msg and "690 px" in msg and "2\\kappa" in msg


@needs_browser
def test_placeholders_and_unknown_elements_detected(synthetic):
    report = synthetic[2]
    probs = report.page("swallowed_tag.html").problems
    assert len(probs) == 1 and "unknown HTML element <reason>" in probs[0] and "weights unavailable" in probs[0], probs
    probs = report.page("visible_placeholder.html").problems
    assert len(probs) == 1 and "raw placeholder" in probs[0] and "'<reason>'" in probs[0], probs
    probs = report.page("entity_text.html").problems
    assert len(probs) == 1 and "HTML entity as text" in probs[0] and "&lt;" in probs[0], probs


@needs_browser
def test_missing_alt_text_detected(synthetic):
    p = synthetic[2].page("alt_text.html")
    assert p.images == 5
    alt = [x for x in p.problems if "alt text" in x]
    assert len(alt) == 4 and len(p.problems) == 4, p.problems
    assert sum("no alt text" in x for x in alt) == 1 and sum("empty alt" in x for x in alt) == 1
    assert sum("is the file name" in x for x in alt) == 2


@needs_browser
@pytest.mark.parametrize("rel,how", [("math_cut.html", "is cut off"),
                                     ("math_scroll.html", "needs a horizontal scroll bar"),
                                     ("math_past.html", "runs past the text column")])
def test_clipped_display_math_detected(synthetic, rel, how):
    p = synthetic[2].page(rel)
    assert p.display_math == 1
    assert len(p.problems) == 1 and how in p.problems[0] and "800 px" in p.problems[0] \
        and "300 px" in p.problems[0], p.problems
    assert synthetic[2].page("math_fits.html").display_math == 1


@needs_browser
@pytest.mark.skipif(MATHJAX is None, reason="sphinx-mathjax-offline (local MathJax) not installed")
def test_wide_mathjax_equation_detected(synthetic):
    p = synthetic[2].page("theory_wide.html")
    assert p.display_math == 1 and p.mathjax_outputs == 1
    assert len(p.problems) == 1 and "runs past the text column" in p.problems[0] \
        and "400 px column" in p.problems[0] and "kappa(A_{39})" in p.problems[0], p.problems
    assert synthetic[2].page("theory.html").display_math == 1  # the short one fits


@needs_browser
def test_screenshots_of_every_page(synthetic):
    root, defects, report, shots = synthetic
    want = {p.path for p in report.pages if not p.redirect}
    got = {p.path for p in report.pages if p.screenshot}
    assert got == want
    for rel in want:
        png = shots / (rel[:-5].replace("/", "__") + ".png")
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        assert width == 1280 and height >= 900  # full page at the 1280×900 viewport


@needs_browser
def test_cli_exit_status(tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    (good / "pic.png").write_bytes(png_bytes(4, 4))
    (good / "index.html").write_text(page("Good", "<img src='pic.png' alt='p'><a href='#top'>top</a>"))
    assert ch.main([str(good), "--screenshots", str(tmp_path / "s")]) == 0
    assert "all 1 pages passed" in capsys.readouterr().out
    (good / "bad.html").write_text(page("Bad", "<a href='gone.html'>x</a>"))
    assert ch.main([str(good), "--screenshots", str(tmp_path / "s")]) == 1
    out = capsys.readouterr().out
    assert "bad.html" in out and "gone.html" in out and "FAILED" in out


@needs_browser
@pytest.mark.parametrize("rel,how", [("table_scroll.html", "needs a horizontal scroll bar"),
                                     ("table_past.html", "runs past the text column"),
                                     ("table_cut.html", "is cut off"),
                                     ("table_details.html", "needs a horizontal scroll bar")])
def test_wide_tables_detected(synthetic, rel, how):
    p = synthetic[2].page(rel)
    assert p.tables == 1
    assert len(p.problems) == 1 and p.problems[0].startswith(f"table {how}"), p.problems
    # 12 cells of at least 80 px each cannot fit 300 px: the width is the table's own, measured
    need = float(p.problems[0].split(" px wide")[0].rsplit(" ", 1)[1])
    assert need >= 12 * 80 and "in a 300 px column" in p.problems[0] and "Table 12: test table" in p.problems[0]
    fits = synthetic[2].page("table_fits.html")
    assert fits.tables == 1 and fits.ok, fits.problems


def test_table_problem():
    assert ch.table_problem({"need": 300.4, "avail": 300, "how": "runs past the text column"}) is None
    msg = ch.table_problem({"need": 980, "avail": 690, "how": "needs a horizontal scroll bar", "caption": "",
                            "head": ["model", "weights"]})
    assert "980 px wide in a 690 px column" in msg and "model | weights" in msg


@pytest.mark.parametrize("fg,bg,ratio", [("#000000", "#ffffff", 21.0), ("#ffffff", "#ffffff", 1.0),
                                         ("#767676", "#ffffff", 4.54), ("#949494", "#fff", 3.03),
                                         ((0, 114, 178), (255, 255, 255), 5.19)])
def test_contrast_ratio(fg, bg, ratio):
    # reference values: #767676 is the lightest grey that passes AA on white (4.54:1) and #949494 gives
    # 3.03:1, as in WebAIM's contrast checker; #0072B2 (the book's blue) by hand from WCAG 2's relative
    # luminance: L = 0.7152·0.1683 + 0.0722·0.4452 = 0.1525, (1 + 0.05) / (0.1525 + 0.05) = 5.19
    assert ch.contrast_ratio(fg, bg) == pytest.approx(ratio, abs=0.01)
    assert ch.contrast_ratio(bg, fg) == pytest.approx(ratio, abs=0.01)  # symmetric


@needs_browser
def test_low_contrast_detected(synthetic):
    report = synthetic[2]
    ok = report.page("contrast_ok.html")
    assert ok.ok and ok.texts_checked >= 4, ok.problems
    probs = report.page("contrast_low.html").problems
    # one problem per style: rgba(0,0,0,0.3) over white is #b3b3b3, and an opacity of 0.3 fades black
    # text to the same colour, so those two elements are one problem that counts both
    assert len(probs) == 3 and all(x.startswith("text contrast") for x in probs), probs
    grey = next(x for x in probs if "light grey caption" in x)
    assert "#949494 on #ffffff" in grey and "3.03:1 below 4.5:1" in grey
    assert any("dark on dark" in x and "on #333333" in x for x in probs), probs
    faint = [x for x in probs if "#b3b3b3 on #ffffff" in x]
    assert len(faint) == 1 and "2 elements" in faint[0], probs


@needs_browser
def test_figures_without_caption_detected(synthetic):
    report = synthetic[2]
    ok = report.page("figure_ok.html")
    assert ok.ok and ok.figures == 1, ok.problems
    p = report.page("figure_nocaption.html")
    assert p.figures == 2
    assert sum(x.startswith("figure without a caption") for x in p.problems) == 2, p.problems
    assert sum(x.startswith("image outside a captioned figure") and "a bare plot output" in x
               for x in p.problems) == 1, p.problems
    assert len(p.problems) == 3


@needs_browser
def test_tables_fitted_by_the_report_fit_a_book_column(tmp_path):
    """The book's own table layout (figures.table via RT.html_table, with _static/dobrushin.css and the
    theme's font) fits a 690 px text column where the same tables laid out as given do not."""
    import numpy as np
    import pandas as pd

    from dobrushin.report import reproducing_tables as RT

    rng = np.random.default_rng(1)

    def wide(rows, cols):
        return pd.DataFrame({"model": [f"sentence-transformers/all-MiniLM-L6-v2 {i}" for i in range(rows)],
                             "weights": ["untrained control"] * rows,
                             **{f"median_κ(R) / bound {j}": rng.random(rows) * 1e-7 for j in range(cols)}})

    frames = [wide(2, 12), wide(9, 14),
              pd.DataFrame({"": ["sha256", "file"], "MiniLM": ["ab12" * 16, "model.safetensors"],
                            "MPNet": ["cd34" * 16, "pytorch_model.bin"]})]
    css = (ROOT / "_static" / "dobrushin.css").read_text()
    head = (f"<style>body {{ font-family: system-ui, sans-serif; font-size: 16px; }}</style><style>{css}</style>")
    col = "<div style='width:690px'>{}</div>"
    site = tmp_path / "site"
    site.mkdir()
    (site / "fitted.html").write_text(page("Fitted", col.format("".join(RT.html_table(f).html for f in frames)),
                                           head=head))
    (site / "as_given.html").write_text(page("As given", col.format(RT.html_table(frames[1], fit=False).html),
                                             head=head))
    report = ch.check_site(site)
    fitted = report.page("fitted.html")
    assert fitted.tables >= 4 and fitted.ok, fitted.problems  # the 9-row table is split in two or more
    probs = report.page("as_given.html").problems
    assert len(probs) == 1 and "needs a horizontal scroll bar" in probs[0], probs


# ---------------------------------------------------------------- the real book


@needs_browser
@pytest.mark.skipif(not (BOOK / "index.html").is_file(),
                    reason="book not built (_build/html/index.html missing; run make html)")
def test_built_book_passes_in_browser(tmp_path):
    report = ch.check_site(BOOK, screenshots=tmp_path)
    failures = {p.path: p.problems for p in report.failures}
    assert not failures, failures
    assert sum(p.mathjax_outputs for p in report.pages) > 0, "no page of the book has typeset math"
    for p in report.pages:
        if ch._wants_screenshot(p.path) and not p.redirect:  # every page except genindex/search
            assert p.screenshot and Path(p.screenshot).is_file()
    shot = {p.path for p in report.pages if p.screenshot}
    for p in report.pages:
        if p.redirect and ch._wants_screenshot(p.path):
            assert any(s.endswith(p.redirect.split("#")[0]) for s in shot), p


def test_zero_width_spaces_are_a_problem(tmp_path):
    from tools.check_html import zero_width_problem

    page = tmp_path / "p.html"
    page.write_text("<p>sentence-<wbr>transformers/<wbr>all-MiniLM-L6-v2</p>", encoding="utf-8")
    assert zero_width_problem(page) == ""
    page.write_text("<p>sentence-\u200btransformers/\u200ball</p>", encoding="utf-8")
    assert zero_width_problem(page) == "2 zero-width spaces (U+200B) in the page"
