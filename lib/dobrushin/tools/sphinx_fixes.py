"""Sphinx extension for the book: remove inline ``<script>``s that Sphinx 7.4 writes twice.

Jupyter Book 1.x pins Sphinx < 8. In Sphinx 7.4 an inline script (``app.add_js_file(None,
body=...)``) registered after the HTML builder started (sphinx-thebe does so in
``env-before-read-docs``, sphinx-togglebutton likewise) is put on every page twice: once as given
(filename ``None``) and once more by ``prepare_writing`` as filename ``''``, which is not equal to
``None``, so Sphinx's own de-duplication misses it. sphinx-thebe's script declares
``const THEBE_JS_URL``; the second copy is a SyntaxError in every reader's browser console
("Identifier 'THEBE_JS_URL' has already been declared"), which ``make check-html`` reports.

This extension keeps the first of each identical script on every page. Enable it with
``sphinx: extra_extensions: [dobrushin.tools.sphinx_fixes]`` in ``_config.yml``.

It also keeps build noise off the rendered pages: before myst-nb parses a notebook (Sphinx's
``source-read`` event), every cell tagged ``parameters`` or papermill's ``injected-parameters`` gets
the ``remove-cell`` tag, which myst-nb honours (the cell is dropped, source and output). The executed
notebook on disk keeps its cells; only the page loses them. So no chapter needs to remember the tags.
"""
from __future__ import annotations

import json

# Cell tags whose cells never appear on a page: the notebook's defaults and papermill's overrides.
HIDDEN_CELL_TAGS = ("parameters", "injected-parameters")


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


def hide_build_cells(text: str) -> str:
    """Notebook JSON ``text`` with ``remove-cell`` added to the tags of every cell tagged with one of
    :data:`HIDDEN_CELL_TAGS`; returned unchanged when nothing is tagged or it is not notebook JSON."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text  # not JSON (e.g. a text-based notebook): leave it to myst-nb
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return text
    changed = False
    for cell in nb["cells"]:
        meta = cell.get("metadata")
        tags = meta.get("tags") if isinstance(meta, dict) else None
        if isinstance(tags, list) and any(t in HIDDEN_CELL_TAGS for t in tags) and "remove-cell" not in tags:
            tags.append("remove-cell")
            changed = True
    return json.dumps(nb, ensure_ascii=False, indent=1) if changed else text


def _on_source_read(app, docname, source):
    path = app.env.doc2path(docname)
    if str(path).endswith(".ipynb"):
        source[0] = hide_build_cells(source[0])


def setup(app):
    # late priority: after every extension that adds page-specific scripts
    app.connect("html-page-context", _on_page_context, priority=900)
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
