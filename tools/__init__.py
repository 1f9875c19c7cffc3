"""Developer tools, outside the installed package (they need the dev extras, and the browser check
Debian's Chromium): run from the repository root as ``python -m tools.<name>``:

* ``tools.bench`` — the κ / equality kernel benchmark (``make bench``, ``make bench-ci``), with the stage
  table of the whole measurement in ``tools.bench_stages``;
* ``tools.sweep_bench`` — ``python -m dobrushin sweep`` serially and on Dask (``make bench-sweep``);
* ``tools.gpu_check`` — the CUDA figures, on a machine with a CUDA device (``make bench-gpu``);
* ``tools.check_html`` — the built book in a real browser (``make check-html``);
* ``tools/add_params_cell.py``, ``tools/gen_environment.py`` — notebook and environment helpers
  (``python3 tools/gen_environment.py``).

The column lists of the CSV files they write, which the reproducibility chapter reads, live in the
package (:mod:`dobrushin.store.bench`)."""
