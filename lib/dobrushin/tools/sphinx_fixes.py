"""Sphinx extension for the book: remove inline ``<script>``s that Sphinx 7.4 writes twice.

Jupyter Book 1.x pins Sphinx < 8. In Sphinx 7.4 an inline script (``app.add_js_file(None,
body=...)``) registered after the HTML builder started (sphinx-thebe does so in
``env-before-read-docs``, sphinx-togglebutton likewise) is put on every page twice: once as given
(filename ``None``) and once more by ``prepare_writing`` as filename ``''``, which is not equal to
``None``, so Sphinx's own de-duplication misses it. sphinx-thebe's script declares
``const THEBE_JS_URL``; the second copy is a SyntaxError in every reader's browser console
("Identifier 'THEBE_JS_URL' has already been declared"), which ``make check-html`` reports.

This extension keeps the first of each identical script on every page. Enable it with
``sphinx: extra_extensions: [dobrushin.sphinx_fixes]`` in ``_config.yml``.
"""
from __future__ import annotations


def _key(js):
    filename = getattr(js, "filename", js) or ""
    attrs = getattr(js, "attributes", {}) or {}
    return (str(filename), getattr(js, "priority", None), tuple(sorted((k, str(v)) for k, v in attrs.items())))


def dedupe_script_files(scripts) -> list:
    """``scripts`` without repeats, where ``None`` and ``''`` count as the same (inline) filename."""
    seen, out = set(), []
    for js in scripts:
        k = _key(js)
        if k not in seen:
            seen.add(k)
            out.append(js)
    return out


def _on_page_context(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        # a new list: the builder restores its own list after each page anyway
        context["script_files"] = dedupe_script_files(scripts)


def setup(app):
    # late priority: after every extension that adds page-specific scripts
    app.connect("html-page-context", _on_page_context, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
