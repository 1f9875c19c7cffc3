"""What the built book needs at build time: the Sphinx hooks of the book (``sphinx_fixes``, enabled in
``_config.yml``).  The developer tools (benchmarks, the browser check) live outside the installed
package, in the repository's top-level ``tools/`` folder."""
