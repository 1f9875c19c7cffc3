"""The package's size, checked by make test (issue: a codebase a newcomer can change in ten minutes): at most
4,000 lines in report/, 16,000 in the package and 500 in any module."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "dobrushin"
#: generated code, outside the limits
GENERATED = {"math/_kernel_numba.py"}
MODULE_LIMIT = 500
#: the package and report/ at most these many lines
CEILINGS = {"": 16_000, "report": 4_000}


def _lines(p: Path) -> int:
    return len(p.read_text(encoding="utf-8").splitlines())


def _modules():
    return {p.relative_to(PACKAGE).as_posix(): _lines(p) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def test_no_module_grows_past_its_limit():
    sizes = _modules()
    over = {m: n for m, n in sizes.items() if m not in GENERATED and n > MODULE_LIMIT}
    assert over == {}, f"modules over {MODULE_LIMIT} lines: {over}"


def test_the_package_and_report_stay_within_their_limits():
    sizes = _modules()
    for folder, ceiling in CEILINGS.items():
        n = sum(v for m, v in sizes.items() if m.startswith(folder) and m not in GENERATED)
        assert n <= ceiling, f"{folder or 'the package'}: {n} lines, over its limit {ceiling}"
