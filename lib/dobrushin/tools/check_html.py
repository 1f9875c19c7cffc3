"""Check the built book in a real browser: ``python -m dobrushin.tools.check_html _build/html``.

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
  (``role="presentation"`` or ``aria-hidden="true"``).

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
                raw = _raw_tex(dom["text"])
                for t in raw[:5]:
                    res.problems.append(f"raw TeX in visible text, {t}")
                if len(raw) > 5:
                    res.problems.append(f"raw TeX in visible text: {len(raw) - 5} more places")
                for m in dom["math"]:
                    res.display_math += 1
                    prob = math_problem(m)
                    if prob:
                        res.problems.append(prob)
                # placeholders shown as text or swallowed as tags
                ph = _placeholders(dom["text"])
                for t in ph[:5]:
                    res.problems.append(f"raw placeholder in visible text, {t}")
                if len(ph) > 5:
                    res.problems.append(f"raw placeholder in visible text: {len(ph) - 5} more places")
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
    ap = argparse.ArgumentParser(prog="python -m dobrushin.tools.check_html", description=__doc__.split("\n")[0])
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
