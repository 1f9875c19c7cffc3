"""The book's display wrapper ``Display`` (given MIME types plus a plain-text fallback) and ``Section``.  Glued across
documents, myst-nb pastes ``text/html``, images and ``text/plain``, not Markdown (``html_block``, ``plain_text``,
``page.banner``); on the notebook's own page it parses ``text/markdown`` as MyST (``page.table``, ``page.details``).
"""
from __future__ import annotations

import html as _html
from typing import Optional


class Display:
    """A block shown as ``html`` and/or ``markdown`` (``None``: not offered), ``text`` the plain fallback and repr."""

    def __init__(self, text: str, *, html: Optional[str] = None, markdown: Optional[str] = None):
        self.text, self.html, self.markdown = str(text), html, markdown

    def _repr_html_(self) -> Optional[str]:
        return self.html

    def _repr_markdown_(self) -> Optional[str]:
        return self.markdown

    def __repr__(self) -> str:
        return self.text


def html_block(html_text: str, text: str = "") -> Display:
    """An HTML block (pastable into a Markdown chapter with ``{glue}``); ``text`` defaults to the HTML itself."""
    return Display(text or html_text, html=html_text)


def plain_text(s) -> Display:
    """A prose value for ``myst_nb.glue``: pasted inline as a plain ``<span>`` (not quoted, bold or code)."""
    s = str(s)
    return Display(s, html=f'<span class="dobrushin-text">{_html.escape(s)}</span>')


class Section(list):
    """A chapter section: blocks shown in order as a cell's value, and ``values`` glued for the notebook's sentences."""

    def __init__(self, *blocks, values: Optional[dict] = None):
        super().__init__(b for b in blocks if b is not None)
        self.values = dict(values or {})

    def md(self, text: str) -> "Section":
        """Add a sentence (Markdown) of the page."""
        from IPython.display import Markdown

        self.append(Markdown(text))
        return self

    def glue(self, prefix: str, values: dict) -> "Section":
        """Add ``values`` to be glued as ``<prefix>-<key>``."""
        self.values.update({f"{prefix}-{k}": v for k, v in values.items()})
        return self

    def include(self, other: "Section") -> "Section":
        """Add the blocks and glued values of ``other``."""
        self.extend(other)
        self.values.update(other.values)
        return self

    def _ipython_display_(self):
        from IPython.display import display
        from myst_nb import glue

        for k, v in self.values.items():  # an HTML block or an image as it is; anything else as plain text
            html = getattr(v, "_repr_html_", lambda: None)()
            glue(k, v if html is not None or hasattr(v, "_repr_png_") else plain_text(v), display=False)
        display(*self)

