"""Check the built book in a real browser: ``python -m tools.check_html _build/html``.

Every ``.html`` page of the built site is opened in headless Chromium (Debian's ``/usr/bin/chromium``,
driven by Playwright; no browser is ever downloaded) and served from a throwaway HTTP server on
127.0.0.1. The network is blocked: every request that is not to that server is aborted and recorded.
For each page the check asserts

* **math typeset** — every Sphinx math element (``.math``) holds MathJax output (``mjx-container``),
  MathJax reports no TeX error, and no raw TeX (``$…$``, ``$$``, ``\\(…\\)``, ``\\[…\\]``,
  ``\\begin{…}``) is left in the visible text;
* **images decoded** — every ``<img>`` finished loading with ``naturalWidth > 0``;
* **no console errors** — no ``console.error`` message and no uncaught exception;
* **nothing leaves the machine** — no request to any origin other than the local server;
* **no broken local resources** — no local request answered with an HTTP error;
* **no broken internal links** — every ``<a href>`` to a local page resolves to an existing file,
  and its ``#fragment`` names an ``id`` (or ``<a name>``) in that page;
* **no raw placeholders** — no ``<word>`` text (e.g. ``weights unavailable: <reason>``) and no HTML
  entity shown as text (``&lt;reason&gt;``) in the visible text outside code and math, and no unknown
  HTML element in the page (a placeholder such as ``<reason>`` that the Markdown parser took for a
  tag, so its text vanished: the browser makes it an ``HTMLUnknownElement``);
* **no clipped display equation** — the typeset formula of every display ``mjx-container`` fits the
  width of its container: not cut off by ``overflow: hidden``, not running past the text column and
  not needing a horizontal scroll bar (at the 1280 px window the reader and the screenshots see);
* **alt text on images** — every ``<img>`` has a non-empty ``alt`` that is not its file name (as
  Sphinx writes for an image output that has none), unless it is marked decorative
  (``role="presentation"`` or ``aria-hidden="true"``);
* **no table wider than its column** — every rendered ``<table>`` (also one inside a collapsed
  dropdown or ``<details>``, which are opened for the measurement) fits the width of the block that
  holds it at the 1280 px window: neither hidden behind a horizontal scroll bar, nor cut off, nor
  running past the text column (Sphinx's own index tables and code line-number tables excepted);
* **readable text contrast** — every visible text has a contrast ratio of at least 4.5:1 against
  its background (3:1 for large text: ≥ 24 px, or ≥ 18.66 px bold), WCAG 2 AA, with the colours
  the browser computed (text and background alpha and element opacity composited over white);
* **every figure captioned** — every ``<figure>`` (or Sphinx ``div.figure``) has a non-empty
  caption, and no content image (at least 64 × 64 px, outside the navigation) stands outside a
  captioned figure, as a plot shown as a bare notebook output would.

A full-page screenshot of every page that is loaded (at the 1280×900 window; Sphinx's ``genindex``
and ``search`` pages excepted) is written to ``--screenshots`` (default ``_build/screenshots``, next
to the site), named after the page (``executed/theory.html`` -> ``executed__theory.png``).
The report lists each page; the exit status is 0 when every page passes, 1 on any failure, 2 when
the check could not run (no site, no Chromium).
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

# Debian's package; DOBRUSHIN_CHROMIUM may name another binary (never a downloaded one).
CHROMIUM = os.environ.get("DOBRUSHIN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # runs as root in CI containers
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    # Defence in depth: should anything bypass request routing, no name resolves except loopback.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Folders of a Sphinx build that hold assets or templates, not pages.
NON_PAGE_DIRS = {"_static", "_sources", "_images", "_downloads", ".doctrees", "reports"}
# Pages that Sphinx generates for every site: checked, but not worth a screenshot.
NO_SCREENSHOT = {"genindex.html", "search.html", "py-modindex.html"}
MAX_LISTED = 25  # problems printed per page (all are kept in the PageResult)

# Raw TeX that MathJax should have replaced. `$…$` follows pandoc's rule for inline math: the
# opening `$` is not followed by a space, the closing one is not preceded by a space nor followed
# by a digit (so "$5 and $10" in prose is not math).
RAW_TEX = [
    ("$$…$$", re.compile(r"\$\$.+?\$\$", re.S)),
    ("$…$", re.compile(r"(?<![\\$])\$(?![\s$])[^$\n]*?(?<![\s\\])\$(?![\d$])")),
    (r"\(…\)", re.compile(r"\\\(.+?\\\)", re.S)),
    (r"\[…\]", re.compile(r"\\\[.+?\\\]", re.S)),
    (r"\begin{…}", re.compile(r"\\begin\{[A-Za-z*]+\}")),
]


# Text that a reader should never see: an unfilled `<placeholder>` and an HTML entity shown as text.
# `<` must be followed directly by a letter (so "κ < 1 and n > 2" is not a placeholder).
PLACEHOLDER = [
    ("placeholder <…>", re.compile(r"</?[A-Za-z][A-Za-z0-9_.:/ -]{0,60}>")),
    ("HTML entity as text", re.compile(r"&lt;[^\s&<>]{1,60}&gt;|&(?:lt|gt|amp|quot|apos|nbsp|#\d{1,6}|#x[0-9A-Fa-f]{1,6});")),
]


@dataclass
class PageResult:
    """What the browser saw on one page; ``problems`` is empty when the page passes."""

    path: str  # relative to the site root, with "/" separators
    problems: list = field(default_factory=list)
    math_elements: int = 0
    mathjax_outputs: int = 0
    images: int = 0
    links_checked: int = 0
    external_links: int = 0
    display_math: int = 0  # display equations measured for clipping
    tables: int = 0  # tables measured for width
    figures: int = 0  # figures checked for a caption
    texts_checked: int = 0  # visible text elements checked for contrast
    blocked_requests: list = field(default_factory=list)
    console_errors: list = field(default_factory=list)
    screenshot: Optional[str] = None
    redirect: Optional[str] = None  # target of a meta-refresh page (checked as a link, not loaded)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class SiteReport:
    root: Path
    pages: list

    @property
    def failures(self) -> list:
        return [p for p in self.pages if not p.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def page(self, rel: str) -> PageResult:
        for p in self.pages:
            if p.path == rel:
                return p
        raise KeyError(f"no page {rel!r} in the report; pages: {[p.path for p in self.pages]}")


# ---------------------------------------------------------------- static side: pages, ids, links


class _PageParser(HTMLParser):
    """Collects the anchors of a page and the target of a ``<meta http-equiv="refresh">``."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set = set()
        self.refresh: Optional[str] = None

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        for k, v in attrs:
            if v and (k == "id" or (k == "name" and tag == "a")):
                self.ids.add(v)
        if tag == "meta" and (d.get("http-equiv") or "").lower() == "refresh" and self.refresh is None:
            m = re.search(r"url\s*=\s*['\"]?([^'\";]+)", d.get("content") or "", re.I)
            if m:
                self.refresh = m.group(1).strip()


def find_pages(root: Path) -> list:
    """Every page of a built site: ``*.html`` below ``root`` outside the asset folders, sorted."""
    pages = []
    for p in sorted(root.rglob("*.html")):
        rel = p.relative_to(root)
        if any(part in NON_PAGE_DIRS for part in rel.parts[:-1]):
            continue
        pages.append(rel.as_posix())
    return pages


@functools.lru_cache(maxsize=None)
def _parse(path: str, mtime: float) -> tuple:
    c = _PageParser()
    c.feed(Path(path).read_text(encoding="utf-8", errors="replace"))
    return frozenset(c.ids), c.refresh


def ids_in(path: Path) -> frozenset:
    """The anchors (``id`` attributes and ``<a name>``) of an HTML file."""
    return _parse(str(path), path.stat().st_mtime)[0]


def redirect_of(path: Path) -> Optional[str]:
    """The URL a page redirects to with ``<meta http-equiv="refresh">`` (as written), or None.

    Jupyter Book writes such a page as ``index.html`` when the book's root is in a subfolder.
    """
    return _parse(str(path), path.stat().st_mtime)[1]


def check_link(root: Path, page_rel: str, href_abs: str, base: str, live_ids: set) -> Optional[str]:
    """Problem with one resolved ``href`` of page ``page_rel`` (None when fine or not local).

    ``href_abs`` is the browser-resolved URL; ``base`` the server origin with trailing "/";
    ``live_ids`` the ids of the page as rendered (scripts may add anchors to the page itself).
    """
    if not href_abs.startswith(base):
        return None  # external, mailto:, javascript: ... are not ours to check
    url, frag = urldefrag(href_abs)
    rel = unquote(urlsplit(url).path)[len(urlsplit(base).path):]
    target = (root / rel) if rel else root
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return f"broken link to {rel or '/'} (no such file)"
    frag = unquote(frag)
    if frag and target.suffix.lower() in (".html", ".htm"):
        same_page = target.resolve() == (root / page_rel).resolve()
        if same_page and frag in live_ids:
            return None
        if frag not in ids_in(target):
            return f"broken link to {rel}#{frag} (no such anchor)"
    return None


# ---------------------------------------------------------------- local server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the report readable
        pass


class LocalServer:
    """Serves ``root`` on 127.0.0.1 at a free port, in a daemon thread."""

    def __init__(self, root: Path):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------- in-page JavaScript

_WAIT_MATHJAX_JS = """
async (timeoutMs) => {
  const sleep = (ms) => new Promise(r => setTimeout(r, ms));
  const t0 = Date.now();
  // Called after the load event, so a (deferred) MathJax script has already run if it loaded;
  // window.MathJax may still be only the configuration object Sphinx writes before it.
  if (!(window.MathJax && window.MathJax.startup)) return {present: false, ready: false};
  while (!window.MathJax.startup.promise) {
    if (Date.now() - t0 > timeoutMs) return {present: true, ready: false};
    await sleep(50);
  }
  const done = await Promise.race([
    window.MathJax.startup.promise.then(() => true, () => false),
    sleep(Math.max(0, timeoutMs - (Date.now() - t0))).then(() => false),
  ]);
  if (document.fonts) await document.fonts.ready;
  return {present: true, ready: done};
}
"""

_IMAGES_JS = """
async (timeoutMs) => {
  const imgs = Array.from(document.querySelectorAll('img'));
  for (const img of imgs) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const settle = (img) => img.complete ? Promise.resolve() :
      new Promise(r => { img.addEventListener('load', r, {once: true});
                         img.addEventListener('error', r, {once: true}); });
  await Promise.race([Promise.all(imgs.map(settle)),
                      new Promise(r => setTimeout(r, timeoutMs))]);
  const out = [];
  for (const img of imgs) {
    let decoded = false;
    if (img.complete && img.naturalWidth > 0) decoded = true;
    else if (img.complete && /\\.svg(\\?|#|$)/i.test(img.currentSrc || img.src)) {
      // an SVG without intrinsic size has naturalWidth 0 but still decodes
      try { await img.decode(); decoded = true; } catch (e) { decoded = false; }
    }
    out.push({src: (img.getAttribute('src') || '').slice(0, 200), complete: img.complete,
              naturalWidth: img.naturalWidth, decoded,
              alt: img.hasAttribute('alt') ? img.getAttribute('alt') : null,
              decorative: img.getAttribute('role') === 'presentation' || img.getAttribute('aria-hidden') === 'true'});
  }
  return out;
}
"""

_DOM_JS = """
() => {
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'TEXTAREA', 'PRE', 'CODE',
                        'MJX-CONTAINER', 'MJX-ASSISTIVE-MML', 'svg', 'SVG']);
  const visibleText = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let el = node.parentElement; el; el = el.parentElement) {
        if (SKIP.has(el.tagName) || SKIP.has(el.tagName.toUpperCase())) return NodeFilter.FILTER_REJECT;
        if (el.classList && (el.classList.contains('highlight') || el.classList.contains('MathJax_Preview')))
          return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }});
  // Text is joined per block so that TeX split over several text nodes is still seen whole.
  let node, lastBlock = null, buf = [];
  const blockOf = (n) => { let e = n.parentElement;
    while (e && getComputedStyle(e).display.startsWith('inline')) e = e.parentElement; return e; };
  while ((node = walker.nextNode())) {
    const el = node.parentElement;
    if (!el || !(el.offsetParent || el.getClientRects().length)) continue;  // not rendered
    const b = blockOf(node);
    if (b !== lastBlock && buf.length) { visibleText.push(buf.join('')); buf = []; }
    lastBlock = b; buf.push(node.nodeValue);
  }
  if (buf.length) visibleText.push(buf.join(''));
  // Sphinx wraps each formula in span.math / div.math; count the outermost ones
  const mathEls = Array.from(document.querySelectorAll('.math'))
      .filter(e => !(e.parentElement && e.parentElement.closest('.math')));
  const untypeset = mathEls.filter(e => !e.querySelector('mjx-container'))
      .map(e => (e.textContent || '').trim().slice(0, 80));
  const errors = Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
      .map(e => (e.getAttribute('data-mjx-error') || e.textContent || '').slice(0, 120));
  const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id)
      .concat(Array.from(document.querySelectorAll('a[name]')).map(e => e.getAttribute('name')));
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  // Elements the HTML parser did not know (a `<reason>` placeholder read as a tag). Custom elements
  // (with a "-", e.g. MathJax's mjx-*) and SVG/MathML content are not HTMLUnknownElements.
  const unknown = Array.from(document.body.querySelectorAll('*'))
      .filter(e => e instanceof HTMLUnknownElement)
      .map(e => { const p = e.parentElement;
                  const ctx = (p ? p.textContent : '').replace(/\\s+/g, ' ').trim().slice(0, 100);
                  return {tag: e.tagName.toLowerCase(), context: ctx}; });
  // Display equations: the typeset formula (mjx-math) must fit the box that shows it.
  const math = [];
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const inner = c.querySelector('mjx-math');
    if (!inner || !c.getClientRects().length) continue;  // not rendered (e.g. in a closed block)
    const avail = c.clientWidth;
    if (avail === 0) continue;
    const r = inner.getBoundingClientRect();
    const need = Math.max(r.width, inner.scrollWidth);
    // the first ancestor (from the container up) that does not let content overflow visibly
    let how = 'runs past the text column', el = c;
    for (; el && el !== document.body; el = el.parentElement) {
      const ox = getComputedStyle(el).overflowX;
      if (ox !== 'visible') {
        how = (ox === 'auto' || ox === 'scroll') ? 'needs a horizontal scroll bar' : 'is cut off';
        break;
      }
    }
    let tex = null;  // the TeX source, from MathJax's own record of what it typeset here
    try {
      const items = window.MathJax.startup.document.getMathItemsWithin(c);
      if (items && items.length) tex = items[0].math;
    } catch (e) { tex = null; }
    math.push({need: need, avail: avail, how: how, tex: tex,
               text: (c.querySelector('mjx-assistive-mml') || c).textContent.replace(/\\s+/g, ' ').trim().slice(0, 80)});
  }
  return {text: visibleText, mathElements: mathEls.length, untypeset, errors,
          mjx: document.querySelectorAll('mjx-container').length, ids, links, unknown, math};
}
"""


# Tables, text contrast and figure captions, measured in the page as laid out at the 1280 px window.
_LAYOUT_JS = r"""
() => {
  const oneLine = (s, n) => (s || '').replace(/\s+/g, ' ').trim().slice(0, n);
  // ---- tables: each must fit the block that holds it. A closed <details> is opened for the
  // measurement and closed again (layout is computed synchronously, so nothing is painted);
  // sphinx-togglebutton's collapsed dropdowns keep their content laid out (height 0), so their
  // tables are measured as the reader will see them when opened.
  const opened = [];
  for (const d of document.querySelectorAll('details:not([open])')) { d.open = true; opened.push(d); }
  const tables = [];
  for (const t of document.querySelectorAll('table')) {
    if (!t.getClientRects().length) continue;
    if (t.parentElement && t.parentElement.closest('table')) continue;  // nested: its outer table counts
    if (t.closest('.highlight, .highlighttable, mjx-container, svg, nav, .bd-sidebar-primary, .bd-sidebar-secondary'))
      continue;
    if (t.classList.contains('indextable') || t.classList.contains('modindextable')) continue;  // Sphinx's index pages
    // the block that holds it: the first ancestor that is not inline / table-internal / contents
    let box = t.parentElement;
    while (box && box !== document.body) {
      const d = getComputedStyle(box).display;
      if (!(d.startsWith('inline') || d.startsWith('table') || d === 'contents')) break;
      box = box.parentElement;
    }
    if (!box) continue;
    const cs = getComputedStyle(box);
    const avail = box.clientWidth - parseFloat(cs.paddingLeft || 0) - parseFloat(cs.paddingRight || 0);
    if (avail <= 0) continue;
    const need = Math.max(t.getBoundingClientRect().width, t.scrollWidth);
    let how = 'runs past the text column';
    for (let el = box; el && el !== document.body; el = el.parentElement) {
      const ox = getComputedStyle(el).overflowX;
      if (ox !== 'visible') { how = (ox === 'auto' || ox === 'scroll') ? 'needs a horizontal scroll bar' : 'is cut off'; break; }
    }
    const cap = t.querySelector('caption');
    const head = Array.from(t.querySelectorAll('thead th, tr:first-child th, tr:first-child td')).slice(0, 6)
        .map(e => oneLine(e.textContent, 30));
    tables.push({need, avail, how, caption: cap ? oneLine(cap.textContent, 100) : '', head,
                 right: t.getBoundingClientRect().right + window.scrollX, viewport: document.documentElement.clientWidth});
  }
  for (const d of opened) d.open = false;

  // ---- text contrast (WCAG 2): every visible, non-empty text node against its composited background
  const parse = (c) => {
    let m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:[\s,\/]+([\d.]+%?))?\s*\)$/.exec(c);
    if (m) { let a = m[4] === undefined ? 1 : (m[4].endsWith('%') ? parseFloat(m[4]) / 100 : parseFloat(m[4]));
             return [+m[1], +m[2], +m[3], a]; }
    m = /^color\(srgb\s+([\d.e-]+)\s+([\d.e-]+)\s+([\d.e-]+)(?:\s*\/\s*([\d.]+%?))?\s*\)$/.exec(c);
    if (m) { let a = m[4] === undefined ? 1 : (m[4].endsWith('%') ? parseFloat(m[4]) / 100 : parseFloat(m[4]));
             return [m[1] * 255, m[2] * 255, m[3] * 255, a]; }
    return null;  // another colour space: not judged
  };
  const over = (top, under) => { const a = top[3];
    return [top[0] * a + under[0] * (1 - a), top[1] * a + under[1] * (1 - a), top[2] * a + under[2] * (1 - a), 1]; };
  const bgCache = new Map();
  const background = (el) => {  // the opaque colour behind el: its and its ancestors' backgrounds over white
    if (bgCache.has(el)) return bgCache.get(el);
    let res;
    if (!el || el.nodeType !== 1) res = [255, 255, 255, 1];
    else {
      const cs = getComputedStyle(el);
      const under = background(el.parentElement);
      if (under === null || (cs.backgroundImage && cs.backgroundImage !== 'none')) res = null;  // an image: not judged
      else { const bg = parse(cs.backgroundColor); res = bg === null ? null : (bg[3] > 0 ? over(bg, under) : under); }
    }
    bgCache.set(el, res);
    return res;
  };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'MJX-CONTAINER', 'MJX-ASSISTIVE-MML', 'SVG', 'OPTION']);
  const opCache = new Map();
  const opacityOf = (el) => {  // the product of the opacities of el and its ancestors; null inside SKIP
    if (!el || el.nodeType !== 1) return 1;
    if (opCache.has(el)) return opCache.get(el);
    let res = null;
    if (!SKIP.has(el.tagName.toUpperCase())) {
      const up = opacityOf(el.parentElement);
      const o = parseFloat(getComputedStyle(el).opacity);
      res = up === null ? null : up * (isNaN(o) ? 1 : o);
    }
    opCache.set(el, res);
    return res;
  };
  const low = new Map();
  let textsChecked = 0;
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    if (!node.nodeValue.trim()) continue;
    const el = node.parentElement;
    if (!el || seen.has(el)) continue;
    seen.add(el);
    const opacity = opacityOf(el);
    if (opacity === null || !el.getClientRects().length) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility !== 'visible' || opacity === 0) continue;  // e.g. a collapsed dropdown's content
    const fg = parse(cs.color), bg = background(el);
    if (fg === null || bg === null) continue;
    const text = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
    const L1 = lum(text), L2 = lum(bg);
    const ratio = (Math.max(L1, L2) + 0.05) / (Math.min(L1, L2) + 0.05);
    const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
    const large = size >= 24 || (bold && size >= 18.66);
    const need = large ? 3 : 4.5;
    textsChecked += 1;
    if (ratio + 1e-9 < need) {
      const where = el.tagName.toLowerCase() + (el.classList.length ? '.' + Array.from(el.classList).slice(0, 2).join('.') : '');
      const hex = (c) => '#' + c.slice(0, 3).map(v => Math.round(v).toString(16).padStart(2, '0')).join('');
      const key = where + ' ' + hex(text) + ' ' + hex(bg);
      if (!low.has(key)) low.set(key, {where, color: hex(text), background: hex(bg), ratio, need,
                                       size, text: oneLine(node.nodeValue, 60), count: 0});
      low.get(key).count += 1;
    }
  }

  // ---- figures: a caption on each; no content image outside a captioned figure
  const figures = [];
  const capText = (f) => { const c = f.querySelector(':scope > figcaption, :scope > .caption, figcaption, p.caption');
    return c ? oneLine(c.textContent, 200) : ''; };
  for (const f of document.querySelectorAll('figure, div.figure')) {
    if (!f.getClientRects().length) continue;
    const img = f.querySelector('img');
    const t = capText(f);
    const bare = !t || /^(Fig(ure)?\.?|Table)\s*[\d.]*\s*$/i.test(t);  // only a number, no words
    figures.push({caption: t, ok: !bare, src: img ? (img.getAttribute('src') || '').slice(0, 120) : ''});
  }
  const orphans = [];
  for (const img of document.querySelectorAll('img')) {
    if (img.closest('figure, div.figure, nav, header, footer, aside, .bd-sidebar-primary, .bd-sidebar-secondary, .navbar-brand'))
      continue;
    if (img.getAttribute('role') === 'presentation' || img.getAttribute('aria-hidden') === 'true') continue;
    const r = img.getBoundingClientRect();
    if (r.width < 64 || r.height < 64) continue;  // icons and inline marks
    orphans.push({src: (img.getAttribute('src') || '').slice(0, 120), alt: oneLine(img.getAttribute('alt'), 80)});
  }
  return {tables, contrast: Array.from(low.values()), textsChecked, figures, orphans};
}
"""


def zero_width_problem(path) -> str:
    """How many zero-width spaces (U+200B) the page at ``path`` holds, as a problem ("" when none): they break
    copying and searching an id; the book's long words wrap at ``<wbr>`` instead."""
    n = Path(path).read_text(encoding="utf-8", errors="replace").count("\u200b")
    return f"{n} zero-width space{'s' if n > 1 else ''} (U+200B) in the page" if n else ""


def _first_few(problems: list, found: list, what: str, k: int = 5) -> None:
    """Report the first ``k`` places of ``found`` one by one as ``"<what>, <place>"``, then how many more."""
    problems.extend(f"{what}, {t}" for t in found[:k])
    if len(found) > k:
        problems.append(f"{what}: {len(found) - k} more places")


def _raw_tex(texts) -> list:
    found = []
    for t in texts:
        for name, rx in RAW_TEX:
            for m in rx.finditer(t):
                found.append(f"{name}: {m.group(0)[:80]!r}")
    return found


def _placeholders(texts) -> list:
    """Unfilled ``<placeholder>`` text and HTML entities shown as text in ``texts``."""
    found = []
    for t in texts:
        for name, rx in PLACEHOLDER:
            for m in rx.finditer(t):
                a, b = max(0, m.start() - 30), min(len(t), m.end() + 30)
                found.append(f"{name}: {m.group(0)!r} in {' '.join(t[a:b].split())!r}")
    return found


def alt_problem(src: str, alt: Optional[str], decorative: bool = False) -> Optional[str]:
    """What is wrong with the ``alt`` of an image ``src`` (None when fine): missing, empty, or the
    file name (with or without extension, as Sphinx writes for image outputs that have none)."""
    if decorative:
        return None
    if alt is None:
        return "no alt text"
    a = alt.strip()
    if not a:
        return "empty alt text"
    path = unquote(urlsplit(src).path) if not src.startswith("data:") else ""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if name and (a in {path, name, stem} or a.rsplit("/", 1)[-1] in {name, stem}):
        return f"alt text is the file name ({a[:80]!r})"
    return None


def math_problem(m: dict, tol_px: float = 1.0) -> Optional[str]:
    """A display equation that does not fit: ``m`` has the formula's width ``need``, the container's
    ``avail`` and ``how`` (what the page does with the overflow)."""
    if m["need"] > m["avail"] + tol_px:
        what = " ".join(str(m.get("tex") or m.get("text") or "?").split())
        if len(what) > 90:
            what = f"{what[:40]} … {what[-40:]}"
        return (f"display equation {m['how']}: {m['need']:.0f} px wide in a {m['avail']:.0f} px "
                f"column: “{what}”")
    return None


def table_problem(t: dict, tol_px: float = 1.0) -> Optional[str]:
    """A table wider than its column: ``t`` has the table's width ``need``, the width ``avail`` of the
    block that holds it, ``how`` (what the page does with the overflow), and its ``caption`` or the
    first cells of its ``head`` row to name it."""
    if t["need"] <= t["avail"] + tol_px:
        return None
    name = t.get("caption") or ("columns: " + " | ".join(t.get("head") or []) if t.get("head") else "no caption")
    return (f"table {t['how']}: {t['need']:.0f} px wide in a {t['avail']:.0f} px column: “{name[:120]}”")


def contrast_ratio(fg, bg) -> float:
    """The WCAG 2 contrast ratio of two opaque sRGB colours (0–255 triples or ``#rrggbb``), 1–21."""
    def rgb(c):
        if isinstance(c, str):
            c = c.lstrip("#")
            if len(c) == 3:
                c = "".join(ch * 2 for ch in c)
            if not re.fullmatch(r"[0-9A-Fa-f]{6}", c):
                raise ValueError(f"not a #rrggbb colour: {c!r}")
            return [int(c[i:i + 2], 16) for i in (0, 2, 4)]
        return list(c)[:3]

    def lum(c):
        f = [(v / 255) / 12.92 if v / 255 <= 0.04045 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in rgb(c)]
        return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]

    a, b = lum(fg), lum(bg)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def contrast_problem(c: dict) -> str:
    """One low-contrast text style of a page (``c`` from the in-page measurement)."""
    many = f", {c['count']} elements" if c.get("count", 1) > 1 else ""
    return (f"text contrast {c['ratio']:.2f}:1 below {c['need']:g}:1 ({c['where']}, {c['color']} on "
            f"{c['background']}, {c['size']:.0f} px{many}): “{c['text']}”")


# ---------------------------------------------------------------- the browser run


def _wants_screenshot(rel: str) -> bool:
    return rel not in NO_SCREENSHOT


def check_site(
    root,
    screenshots=None,
    chromium: str = CHROMIUM,
    page_timeout_s: float = 30.0,
    math_timeout_s: float = 20.0,
    pages=None,
    log=None,
) -> SiteReport:
    """Open every page of the built site ``root`` in headless Chromium and check it (see module doc).

    ``screenshots``: folder for full-page screenshots of every loaded page (None: none).
    ``pages``: relative page paths to check (default: all of ``find_pages(root)``).
    ``log``: callable receiving one line per page as it is checked (e.g. ``print``).
    Raises ValueError when ``root`` holds no pages and FileNotFoundError when Chromium is missing.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder; build the book first (make html)")
    pages = list(pages) if pages is not None else find_pages(root)
    if not pages:
        raise ValueError(f"no .html pages under {root}; build the book first (make html)")
    if not (Path(chromium).is_file() and os.access(chromium, os.X_OK)):
        raise FileNotFoundError(
            f"Chromium not found at {chromium}; install it with .ci/install-chromium.sh "
            "(apt-get install chromium)")
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import Error as PWError
    from playwright.sync_api import sync_playwright

    if screenshots is not None:
        screenshots = Path(screenshots)
        screenshots.mkdir(parents=True, exist_ok=True)

    results = []
    profile = tempfile.mkdtemp(prefix="check-html-profile-")
    try:
        with LocalServer(root) as server, sync_playwright() as pw:
            base = server.base
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900}, service_workers="block",
                accept_downloads=False)
            state = {"blocked": [], "console": [], "bad_local": []}

            def route(r):
                url = r.request.url
                if url.startswith(base) or url.startswith(("data:", "blob:", "about:")):
                    r.continue_()
                else:
                    state["blocked"].append(url)
                    r.abort("blockedbyclient")

            ctx.route("**/*", route)
            if hasattr(ctx, "route_web_socket"):
                def ws_route(ws):
                    state["blocked"].append(ws.url)
                    ws.close()
                ctx.route_web_socket(re.compile(".*"), ws_route)

            # Every page is checked as a reader's first visit: nothing remembered from earlier pages.
            ctx.add_init_script("try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}")
            page = ctx.pages[0] if ctx.pages else ctx.new_page()

            def on_console(msg):
                if msg.type == "error":
                    loc = (msg.location or {}).get("url", "")
                    state["console"].append((msg.text, loc))

            def on_response(resp):
                if resp.url.startswith(base) and resp.status >= 400:
                    state["bad_local"].append(f"HTTP {resp.status} for {resp.url[len(base):]}")

            def on_failed(req):
                if req.url.startswith(base):
                    state["bad_local"].append(f"request failed ({req.failure}) for {req.url[len(base):]}")

            page.on("console", on_console)
            page.on("pageerror", lambda exc: state["console"].append((f"uncaught: {exc}", "")))
            page.on("response", on_response)
            page.on("requestfailed", on_failed)

            # A redirect page is checked statically (its target must exist) and not loaded: its
            # delayed navigation would land in the middle of the next page's check. Its target
            # inherits its screenshot (index.html usually redirects to the book's first page).
            redirects = {rel: redirect_of(root / rel) for rel in pages}
            shoot = {rel for rel in pages if _wants_screenshot(rel) and not redirects[rel]}
            for rel, target in redirects.items():
                if target and _wants_screenshot(rel):
                    abs_target = urljoin(base + rel, target)
                    shoot.add(unquote(urldefrag(abs_target)[0][len(base):]))

            for rel in pages:
                t0 = time.perf_counter()
                for k in state:
                    state[k] = []
                res = PageResult(path=rel)
                url = base + rel
                if redirects[rel]:
                    res.redirect = redirects[rel]
                    res.links_checked = 1
                    prob = check_link(root, rel, urljoin(url, res.redirect), base, set())
                    if prob:
                        res.problems.append(f"redirect: {prob}")
                    res.seconds = time.perf_counter() - t0
                    results.append(res)
                    _log(log, res)
                    continue
                zw = zero_width_problem(root / rel)
                if zw:
                    res.problems.append(zw)
                try:
                    page.goto("about:blank")  # leave the previous page completely
                    for k in state:
                        state[k] = []
                    page.goto(url, wait_until="load", timeout=page_timeout_s * 1000)
                    mj = page.evaluate(_WAIT_MATHJAX_JS, math_timeout_s * 1000)
                    try:
                        page.wait_for_load_state("networkidle", timeout=3000)
                    except PWError:
                        pass
                    imgs = page.evaluate(_IMAGES_JS, page_timeout_s * 1000 / 2)
                    dom = page.evaluate(_DOM_JS)
                    lay = page.evaluate(_LAYOUT_JS)
                    if urldefrag(page.url)[0] != url:
                        res.problems.append(f"page navigated away to {page.url}")
                except PWError as e:
                    res.problems.append(f"page could not be checked: {str(e).splitlines()[0]}")
                    res.seconds = time.perf_counter() - t0
                    results.append(res)
                    _log(log, res)
                    continue

                # math
                res.math_elements, res.mathjax_outputs = dom["mathElements"], dom["mjx"]
                if dom["mathElements"] and not mj["present"]:
                    res.problems.append(f"{dom['mathElements']} math elements but MathJax did not load")
                elif mj["present"] and not mj["ready"]:
                    res.problems.append("MathJax did not finish typesetting")
                for t in dom["untypeset"]:
                    res.problems.append(f"math not typeset: {t!r}")
                for t in dom["errors"]:
                    res.problems.append(f"MathJax error: {t!r}")
                _first_few(res.problems, _raw_tex(dom["text"]), "raw TeX in visible text")
                for m in dom["math"]:
                    res.display_math += 1
                    prob = math_problem(m)
                    if prob:
                        res.problems.append(prob)
                # placeholders shown as text or swallowed as tags
                _first_few(res.problems, _placeholders(dom["text"]), "raw placeholder in visible text")
                for u in dom["unknown"]:
                    res.problems.append(f"unknown HTML element <{u['tag']}> (a placeholder taken for a tag?) "
                                        f"in {u['context']!r}")
                # images
                res.images = len(imgs)
                for im in imgs:
                    if not im["decoded"]:
                        why = "did not load" if not im["complete"] else "not decoded (naturalWidth 0)"
                        res.problems.append(f"image {why}: {im['src']!r}")
                    prob = alt_problem(im["src"], im["alt"], im["decorative"])
                    if prob:
                        res.problems.append(f"image {prob}: {im['src'][:100]!r}")
                # tables, contrast, captions
                for t in lay["tables"]:
                    res.tables += 1
                    prob = table_problem(t)
                    if prob:
                        res.problems.append(prob)
                res.texts_checked = lay["textsChecked"]
                for c in lay["contrast"]:
                    res.problems.append(contrast_problem(c))
                res.figures = len(lay["figures"])
                for f in lay["figures"]:
                    if not f["ok"]:
                        res.problems.append(f"figure without a caption: {f['src'] or f['caption'] or '(no image)'}")
                for o in lay["orphans"]:
                    res.problems.append(f"image outside a captioned figure: {o['src']!r} (alt {o['alt']!r})")
                # network
                res.blocked_requests = sorted(set(state["blocked"]))
                for u in res.blocked_requests:
                    res.problems.append(f"request leaving the machine (blocked): {u[:200]}")
                for b in sorted(set(state["bad_local"])):
                    res.problems.append(f"local resource missing: {b}")
                # console errors; the browser's own note on a request we blocked is not a second error
                blocked = set(state["blocked"])
                for text, loc in state["console"]:
                    if loc in blocked or (loc.startswith(base) and "Failed to load resource" in text):
                        continue  # already reported as a blocked request / missing local resource
                    res.console_errors.append(text)
                    res.problems.append(f"console error: {text[:300]}")
                # links
                live_ids = set(dom["ids"])
                seen = set()
                for href in dom["links"]:
                    if href in seen:
                        continue
                    seen.add(href)
                    if not href.startswith(base):
                        res.external_links += href.startswith(("http:", "https:"))
                        continue
                    res.links_checked += 1
                    prob = check_link(root, rel, href, base, live_ids)
                    if prob:
                        res.problems.append(prob)
                # screenshot
                if screenshots is not None and rel in shoot:
                    shot = screenshots / (rel[:-5].replace("/", "__") + ".png")
                    # the whole page, but only the 1280 px a reader's window shows: content running
                    # past the right edge (reported above) must not widen the picture
                    height = page.evaluate("() => Math.max(document.documentElement.scrollHeight, "
                                           "document.body ? document.body.scrollHeight : 0)")
                    vw = (page.viewport_size or {}).get("width", 1280)
                    page.screenshot(path=str(shot), full_page=True,
                                    clip={"x": 0, "y": 0, "width": vw, "height": max(1, height)})
                    res.screenshot = str(shot)
                res.seconds = time.perf_counter() - t0
                results.append(res)
                _log(log, res)
            ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return SiteReport(root=root, pages=results)


def _log(log, res: PageResult) -> None:
    if log is None:
        return
    head = "ok  " if res.ok else "FAIL"
    if res.redirect is not None:
        log(f"{head} {res.path}  (redirects to {res.redirect})")
        for p in res.problems:
            log(f"       - {p}")
        return
    log(f"{head} {res.path}  (math {res.mathjax_outputs} typeset/{res.math_elements} elements, "
        f"{res.images} img, {res.links_checked} local links, {res.external_links} external links"
        f"{', screenshot' if res.screenshot else ''}; {res.seconds:.1f} s)")
    for p in res.problems[:MAX_LISTED]:
        log(f"       - {p}")
    if len(res.problems) > MAX_LISTED:
        log(f"       - ... and {len(res.problems) - MAX_LISTED} more")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.check_html", description=__doc__.split("\n")[0])
    ap.add_argument("html_dir", help="the built site, e.g. _build/html")
    ap.add_argument("--screenshots", default=None,
                    help="folder for screenshots (default: <html_dir>/../screenshots)")
    ap.add_argument("--chromium", default=CHROMIUM, help=f"browser binary (default {CHROMIUM})")
    args = ap.parse_args(argv)
    root = Path(args.html_dir)
    shots = Path(args.screenshots) if args.screenshots else root.resolve().parent / "screenshots"
    t0 = time.perf_counter()
    try:
        report = check_site(root, screenshots=shots, chromium=args.chromium, log=print)
    except (ValueError, FileNotFoundError) as e:
        print(f"check-html: cannot run: {e}", file=sys.stderr)
        return 2
    dt = time.perf_counter() - t0
    fails = report.failures
    if fails:
        print(f"\ncheck-html: {len(fails)} of {len(report.pages)} pages FAILED:")
        for p in fails:
            print(f"  {p.path}:")
            for prob in p.problems[:MAX_LISTED]:
                print(f"    - {prob}")
            if len(p.problems) > MAX_LISTED:
                print(f"    - ... and {len(p.problems) - MAX_LISTED} more")
        print(f"check-html: FAILED ({len(fails)}/{len(report.pages)} pages, {dt:.0f} s)")
        return 1
    print(f"check-html: all {len(report.pages)} pages passed ({dt:.0f} s); screenshots in {shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
