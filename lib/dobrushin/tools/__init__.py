"""Developer tools: the benchmark (``python -m dobrushin.tools.bench``), the browser check of the built
book (``python -m dobrushin.tools.check_html``) and the Sphinx hooks of the book (``sphinx_fixes``)."""
