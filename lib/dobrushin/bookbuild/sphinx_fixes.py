"""Sphinx extension for the book (``extra_extensions`` in ``_config.yml``), with three fixes:

* keeps the first of identical ``<script>``s on each page: Sphinx 7.4 writes an inline script added
  after the builder started twice (as filename ``None`` and ``''``), a SyntaxError in the browser;
* adds ``remove-cell`` to cells tagged ``parameters`` or ``injected-parameters`` before myst-nb reads a
  notebook, so they stay off the page (the notebook on disk keeps them);
* groups sphinx-proof's Proof Index by chapter, entries named as on the page ("Theorem 2" and title).
"""
from __future__ import annotations

import json
from typing import Optional

# the notebook's defaults and papermill's overrides
HIDDEN_CELL_TAGS = ("parameters", "injected-parameters")


def _on_page_context(app, pagename, templatename, context, doctree):
    """The page's ``script_files`` without repeats, where ``None`` and ``''`` count as the same (inline) filename
    (a new list: the builder restores its own list after each page anyway)."""
    first = {}
    for js in context.get("script_files") or ():
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js) or ""), getattr(js, "priority", None),
               tuple(sorted((k, str(v)) for k, v in attrs.items())))
        first.setdefault(key, js)
    if first:
        context["script_files"] = list(first.values())


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


def _title_of(node) -> str:
    """The title a sphinx-proof directive was given (``{prf:theorem} Layer bound`` → ``Layer bound``)."""
    from docutils import nodes

    t = next(iter(node.findall(nodes.title)), None)
    text = " ".join((t.astext() if t is not None else str(node.get("title", ""))).split())
    if text.startswith("(") and text.endswith(")"):  # sphinx-proof's default proof_title_format " (%t)"
        text = text[1:-1].strip()
    return text


def proof_index_entries(proofs: dict, titles: dict, numbers: dict, chapter_titles: dict, order,
                        positions: Optional[dict] = None) -> list:
    """The Proof Index as ``[(chapter title, [(name, 0, docname, anchor, "", "", title), ...]), ...]``
    (a Sphinx ``Index``'s content), chapters in ``order`` (others after, sorted), entries in page order.

    ``proofs``: ``env.proof_list``; ``titles``: label → title; ``numbers``: ``env.toc_fignumbers``;
    ``positions``: label → place on its page (else entries sort by kind, then number)."""
    positions = positions or {}
    rank = {d: i for i, d in enumerate(order)}
    groups: dict = {}
    for label, v in proofs.items():
        doc, real, counter = v["docname"], v["realtype"], v.get("countertype", v["realtype"])
        anchor = (v.get("ids") or [label])[0]
        num = tuple(numbers.get(doc, {}).get(counter, {}).get(anchor, ()))
        name = real.title() + (" " + ".".join(map(str, num)) if num and not v.get("nonumber") else "")
        key = (0, positions[label], "", (), label) if label in positions else (1, 0, real, num, label)
        groups.setdefault(doc, []).append((key, (name, 0, doc, anchor, "", "", titles.get(label, ""))))
    docs = sorted(groups, key=lambda d: (rank.get(d, len(rank)), d))
    return [(chapter_titles.get(d, d), [e for _, e in sorted(groups[d], key=lambda x: x[0])]) for d in docs]


def _reading_order(env) -> list:
    """Docnames depth first from the root document through the toctrees (the book's reading order)."""
    root = getattr(env.config, "root_doc", None) or getattr(env.config, "master_doc", "index")
    out, seen, stack = [], set(), [root]
    while stack:
        d = stack.pop()
        if d in seen:
            continue
        seen.add(d)
        out.append(d)
        stack.extend(reversed(env.toctree_includes.get(d, [])))
    return out


def _titled_proof_domain():
    """sphinx-proof's domain with an index that names each statement as the page does."""
    from sphinx_proof.domain import ProofDomain, ProofIndex
    from sphinx_proof.nodes import NODE_TYPES, unenumerable_node

    statement_nodes = (*NODE_TYPES.values(), unenumerable_node)  # one node class per kind of statement

    class TitledProofIndex(ProofIndex):
        def generate(self, docnames=None):
            env = self.domain.env
            proofs = getattr(env, "proof_list", {}) or {}
            titles, positions = {}, {}
            for doc in sorted({v["docname"] for v in proofs.values()}):
                try:
                    tree = env.get_doctree(doc)
                except Exception:  # pragma: no cover  (a doctree Sphinx could not pickle)
                    continue
                for i, node in enumerate(tree.findall(lambda n: isinstance(n, statement_nodes))):
                    if node.get("label"):
                        titles[node["label"]] = _title_of(node)
                        positions[node["label"]] = i
            chapters = {d: t.astext() for d, t in env.titles.items()}
            content = proof_index_entries(proofs, titles, env.toc_fignumbers, chapters, _reading_order(env), positions)
            if docnames is not None:
                keep = set(docnames)
                content = [(k, [e for e in es if e[2] in keep]) for k, es in content]
                content = [(k, es) for k, es in content if es]
            return content, False  # False: the groups are chapters, shown as headings, not collapsed

    class TitledProofDomain(ProofDomain):
        indices = [TitledProofIndex]

    return TitledProofDomain


def setup(app):
    # sphinx-proof's domain (_config.yml loads it first), re-registered with an index that shows titles
    app.setup_extension("sphinx_proof")
    app.add_domain(_titled_proof_domain(), override=True)
    # late priority: after every extension that adds page-specific scripts
    app.connect("html-page-context", _on_page_context, priority=900)
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
