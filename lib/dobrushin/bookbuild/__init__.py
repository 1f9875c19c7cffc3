"""The book's Sphinx hooks at build time (``sphinx_fixes``, enabled in ``_config.yml``).  Developer tools
live in the repository's ``tools/`` folder, outside the package."""
