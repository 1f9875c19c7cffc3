"""The paper-vs-this-build summary, by job (this module re-exports every name, so
``from dobrushin.report import summary`` keeps working):

* :mod:`dobrushin.report.summary_table`: the decision rule and the summary table (``build_summary``);
* :mod:`dobrushin.report.results_loading`: reading the notebooks' results, the baseline and the timings;
* :mod:`dobrushin.report.summary_figures`: the depth profiles;
* :mod:`dobrushin.report.reproducing_tables`: parameter, timing, schema, stage and benchmark tables
  and their HTML form;
* :mod:`dobrushin.report.display`: the one display wrapper (``Html`` and ``Text`` here are its
  constructors :func:`~dobrushin.report.display.html_block` and :func:`~dobrushin.report.display.plain_text`).
"""
from __future__ import annotations

from .summary_table import (  # noqa: F401
    COLUMNS,
    SUM_COLUMNS,
    WEIGHTS_SOURCES,
    VARIANT_LABEL,
    input_sums,
    independent_sums,
    row_sums,
    weights_source,
    late_depth_row,
    build_summary,
    SCALE_COLUMNS,
    scale_table,
    scale_items,
    scale_line,
    hub_only,
    relative_depth,
)
from .results_loading import (  # noqa: F401
    FAMILY_NOTEBOOKS,
    load_family_results,
    load_family_runs,
    load_baseline,
    load_theorem_check,
    load_law_estimates,
    load_reference_grid,
    baseline_at,
    load_timings,
)
from .summary_figures import (  # noqa: F401
    FAMILY_ORDER,
    summary_family,
    families_of,
    family_order,
    pooled_profile,
    same_control,
    control_twins,
    distinct_controls,
    plot_depth_profiles,
)
from .reproducing_tables import (  # noqa: F401
    notebook_order,
    format_duration,
    PAPER_NOT_RUN,
    timings_table,
    html_table,
    schema_table,
    BENCH_TARGET,

    bench_table,
)
from .display import html_block as Html, plain_text as Text  # noqa: F401  (the one display wrapper)

__all__ = ['BENCH_TARGET', 'COLUMNS', 'FAMILY_NOTEBOOKS', 'FAMILY_ORDER', 'Html', 'PAPER_NOT_RUN', 'SCALE_COLUMNS', 'SUM_COLUMNS', 'Text', 'VARIANT_LABEL', 'WEIGHTS_SOURCES', 'baseline_at', 'bench_table', 'build_summary', 'control_twins', 'distinct_controls', 'families_of', 'family_order', 'format_duration', 'html_table', 'hub_only', 'independent_sums', 'input_sums', 'late_depth_row', 'load_baseline', 'load_family_results', 'load_family_runs', 'load_law_estimates', 'load_reference_grid', 'load_theorem_check', 'load_timings', 'notebook_order', 'plot_depth_profiles', 'pooled_profile', 'relative_depth', 'row_sums', 'scale_items', 'scale_line', 'same_control', 'scale_table', 'schema_table', 'summary_family', 'timings_table', 'weights_source']
