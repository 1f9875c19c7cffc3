"""Notebook parameters: read what people type, reject what cannot be right, say why.

Every notebook's first code cell after its ``parameters`` cell is::

    import dobrushin.params  # check and convert the parameters above (papermill -p passes strings)
    _params = dobrushin.params.resolve(globals(), "supervised_vit")

:func:`resolve` reads the notebook's own ``parameters`` cell (``notebooks/<name>.ipynb``, parsed with
:mod:`ast`, so the defaults there are the single source of truth for the names and their types), then
for every declared parameter converts the value now in the namespace to the type of its default and
writes it back:

* **lists** (``models``, ``weights``, ``seeds``, ``baseline_ns``, ...) accept a Python list or tuple
  (the parameters cell, ``papermill -y`` / ``-f`` YAML), a JSON or YAML list given as a string (what
  ``papermill -p NAME '[...]'`` passes), a comma-separated string (``pretrained,untrained``) and a bare
  single value (``-p models facebook/deit-small-patch16-224``, ``-p seeds 3``).  A string that starts
  with ``[`` but is not a valid list is an error, never a one-element list holding the brackets;
* **ints / floats / bools** accept numbers and their spellings as strings (``"8"``, ``"1e-3"``,
  ``"true"``/``"no"``); **dicts** accept a mapping or a JSON/YAML mapping string, keys and values
  converted like the default's (``{"96": "2000"}`` -> ``{96: 2000}``);
* parameters whose default is ``None`` take their type from :data:`RULES`; ``"None"``/``"null"``/``""``
  mean ``None`` for every parameter that may be ``None``.

Unknown names.  papermill only warns about a parameter the notebook does not declare, so ``-p model x``
(for ``models``) would silently do nothing.  Under IPython the cell executed just before this one is
read from the input history (``In``): papermill's injected cell (it starts with ``# Parameters``) or
the parameters cell itself; every name it assigns must be declared.  Outside IPython (a plain
namespace), every public name in the namespace that is not declared and is not a module, function,
class or one of Jupyter's own names is reported.  The error lists the known parameters and the
closest match.

Errors are :class:`ParameterError` (a ``ValueError``): the message names the parameter, what was given
(whole: a model id is never shortened) and what is allowed.
"""
from __future__ import annotations

import ast
import difflib
import json
import math
import os
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, MutableMapping, Optional, Sequence, Tuple, Union

__all__ = ["ParameterError", "Param", "Rule", "RULES", "declared", "find_notebook", "coerce", "resolve",
           "unknown_names"]


class ParameterError(ValueError):
    """A notebook parameter that is unknown or has a value that cannot be right."""


@dataclass(frozen=True)
class Rule:
    """Extra knowledge about a parameter beyond its default.

    ``type``: ``"str" | "int" | "float" | "bool" | "list" | "dict" | "path" | "any"`` (needed when the
    default is ``None``); ``item``: the element type of a list (or the value type of a dict);
    ``key``: the key type of a dict; ``optional``: ``None`` is allowed; ``min``/``max``: bounds of a
    number (of each element of a list, of each value of a dict); ``key_min``: bound of dict keys;
    ``choices``: allowed values (of each element of a list); ``nonempty``/``unique``: for lists;
    ``length``: exact length of a list; ``pattern``: a regular expression a string must match in full,
    with ``pattern_help`` saying in words what it means.
    """

    type: Optional[str] = None
    item: Optional[str] = None
    key: Optional[str] = None
    optional: Optional[bool] = None
    min: Optional[float] = None
    max: Optional[float] = None
    key_min: Optional[float] = None
    choices: Optional[Tuple[Any, ...]] = None
    nonempty: bool = False
    unique: bool = False
    length: Optional[int] = None
    pattern: Optional[str] = None
    pattern_help: str = ""
    excl_min: bool = False


_SIZES = Rule(item="int", min=2, nonempty=True)  # matrix sizes: a pair of tokens needs n >= 2
_TRIALS = Rule(key="int", item="int", key_min=2, min=1)

#: what the defaults do not say, by parameter name (shared by every notebook that declares the name)
RULES: Dict[str, Rule] = {
    "profile": Rule(type="str", pattern=r"[A-Za-z0-9_.-]+", pattern_help="a profile name such as quick or paper"),
    "results_dir": Rule(type="path", optional=True),
    "models": Rule(type="list", item="str", nonempty=True, unique=True, pattern=r"\S+",
                   pattern_help="a Hugging Face or timm model id (no spaces)"),
    "weights": Rule(type="list", item="str", nonempty=True, unique=True, choices=("pretrained", "untrained")),
    "n_inputs": Rule(type="int", optional=True, min=1),
    "n_untrained": Rule(type="int", optional=True, min=1),
    "head_inputs": Rule(type="int", min=0),
    "image_source": Rule(type="str", optional=True),
    "text_source": Rule(type="str", optional=True),
    "image_size": Rule(type="int", min=1),
    "extra_image_size": Rule(type="int", optional=True, min=1),
    "extra_size_models": Rule(type="list", item="str", unique=True, pattern=r"\S+",
                              pattern_help="a model id of the models parameter (no spaces)"),
    "max_length": Rule(type="int", min=2),
    "batch_size": Rule(type="int", min=1),
    "seed": Rule(type="int", min=0),
    "split_seed": Rule(type="int", min=0),
    "seeds": Rule(type="list", item="int", min=0, nonempty=True, unique=True),
    "device": Rule(type="str", pattern=r"auto|cpu|mps|cuda(:\d+)?",
                   pattern_help='"auto", "cpu", "cuda", "cuda:<index>" or "mps"'),
    "force": Rule(type="bool"),
    "datasets": Rule(type="list", item="str", nonempty=True, unique=True),
    "max_epochs": Rule(type="int", optional=True, min=1),
    "patience": Rule(type="int", min=1),
    "train_rows": Rule(type="int", optional=True, min=1),
    "attention_rows": Rule(type="int", optional=True, min=1),
    "torch_threads": Rule(type="int", min=1),
    "ns": _SIZES, "ensemble_ns": _SIZES, "typical_ns": _SIZES, "reference_ns": _SIZES, "baseline_ns": _SIZES,
    "trials_small": Rule(type="int", min=1), "ensemble_trials_small": Rule(type="int", min=1),
    "small_trials": Rule(type="int", min=1), "typical_matrices": Rule(type="int", min=1),
    "check_max_n": Rule(type="int", min=0),
    "trials_large": _TRIALS, "ensemble_trials_large": _TRIALS, "trials": _TRIALS, "large_ns": _TRIALS,
    "reference_trials": _TRIALS,
    "alphas": Rule(item="float", min=0, excl_min=True), "temperatures": Rule(item="float", min=0, excl_min=True),
    "ensembles": Rule(item="str", nonempty=True, unique=True), "large_ensembles": Rule(item="str", unique=True),
    "reference_ensembles": Rule(item="str", nonempty=True, unique=True),
    "target_halfwidth": Rule(type="float", min=0, excl_min=True),
}

#: names IPython / Jupyter put into every namespace
JUPYTER_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open", "display"})

#: papermill --inject-paths adds PAPERMILL_INPUT_PATH / PAPERMILL_OUTPUT_PATH: its own, never unknown
PAPERMILL_PREFIX = "PAPERMILL_"

_NONE_WORDS = ("none", "null", "~", "")


@dataclass
class Param:
    """One declared parameter: its name, default (as written in the parameters cell), the comment
    after it, and the conversion rule (type inferred from the default, completed by :data:`RULES`)."""

    name: str
    default: Any
    help: str = ""
    rule: Rule = field(default_factory=Rule)

    @property
    def type(self) -> str:
        return self.rule.type or "any"


# ------------------------------------------------------------------------------------------------
# the parameters cell


def _safe_eval(node: ast.AST) -> Any:
    """A literal, or a small expression of literals (``list(range(8, 61)) + [196]``) with no names but
    a few harmless builtins."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    code = compile(ast.Expression(node), "<parameters>", "eval")
    allowed = {"list": list, "range": range, "tuple": tuple, "dict": dict, "int": int, "float": float,
               "str": str, "sorted": sorted, "True": True, "False": False, "None": None}
    for n in code.co_names:
        if n not in allowed:
            raise ValueError(f"name {n!r} is not allowed in a parameter default")
    return eval(code, {"__builtins__": {}}, allowed)  # noqa: S307 - names restricted to the list above


def _kind(v: Any) -> Optional[str]:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "dict"
    return None


def _common(values) -> Optional[str]:
    kinds = {_kind(v) for v in values}
    if not kinds:
        return None
    if kinds == {"int", "float"}:
        return "float"
    return kinds.pop() if len(kinds) == 1 else None


def _infer(name: str, default: Any) -> Rule:
    r = RULES.get(name, Rule())
    t = r.type or _kind(default)
    item, key = r.item, r.key
    if t == "list" and item is None and isinstance(default, (list, tuple)):
        item = _common(default)
    if t == "dict" and isinstance(default, dict):
        key = key or _common(default.keys())
        item = item or _common(default.values())
    if t is None and (r.item is not None and r.key is None):
        t = "list"
    if t is None and r.key is not None:
        t = "dict"
    optional = r.optional if r.optional is not None else default is None
    return Rule(**{**r.__dict__, "type": t or "any", "item": item, "key": key, "optional": optional})


def parse_parameters_cell(source: str) -> Dict[str, Param]:
    """The parameters declared by a ``parameters`` cell's source, in order."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out: Dict[str, Param] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, value = stmt.target.id, stmt.value
        else:
            raise ParameterError(f"parameters cell line {stmt.lineno}: only 'name = value' assignments are "
                                 f"allowed there, found {type(stmt).__name__}")
        try:
            default = _safe_eval(value)
        except Exception as e:  # noqa: BLE001
            raise ParameterError(f"parameters cell line {stmt.lineno}: the default of {name} is not a "
                                 f"literal value ({e})") from None
        line = lines[stmt.end_lineno - 1] if stmt.end_lineno else ""
        m = re.search(r"#\s*(.*)$", line[stmt.end_col_offset:] if stmt.end_col_offset else "")
        out[name] = Param(name, default, m.group(1).strip() if m else "", _infer(name, default))
    return out


def find_notebook(notebook: Union[str, os.PathLike]) -> Path:
    """The source notebook for a name (``"language"``) or a path; the folder the kernel runs in first
    (papermill ``--cwd notebooks`` and Jupyter both start the kernel beside the notebook), then the
    project's ``notebooks/`` folder."""
    p = Path(notebook)
    if p.suffix == ".ipynb":
        if p.is_file():
            return p
        raise ParameterError(f"notebook {str(p)!r} does not exist")
    name = p.name
    cands = [Path.cwd() / f"{name}.ipynb", Path.cwd() / "notebooks" / f"{name}.ipynb"]
    try:
        from ..store.paths import project_root

        root = project_root()
        if root is not None:
            cands.append(root / "notebooks" / f"{name}.ipynb")
    except Exception:  # noqa: BLE001 - the package layout may change; the next candidate still works
        pass
    cands.append(Path(__file__).resolve().parents[2] / "notebooks" / f"{name}.ipynb")
    for c in cands:
        if c.is_file():
            return c
    raise ParameterError(f"cannot find the notebook {name}.ipynb (looked in: {', '.join(str(c.parent) for c in cands)})")


_CACHE: Dict[Tuple[str, float], Dict[str, Param]] = {}


def declared(notebook: Union[str, os.PathLike]) -> Dict[str, Param]:
    """The parameters declared by a notebook's ``parameters`` cell (a name such as ``"language"`` or a
    path to an ``.ipynb``), in order."""
    path = find_notebook(notebook)
    key = (str(path.resolve()), path.stat().st_mtime)
    if key not in _CACHE:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"
                 and "parameters" in c.get("metadata", {}).get("tags", [])]
        if len(cells) != 1:
            raise ParameterError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
        src = cells[0]["source"]
        _CACHE[key] = parse_parameters_cell("".join(src) if isinstance(src, list) else src)
    return dict(_CACHE[key])


# ------------------------------------------------------------------------------------------------
# conversion


def _show(v: Any) -> str:
    """``v`` for a message: repr, whole (never shortened), with its type when that helps."""
    r = repr(v)
    return r if isinstance(v, (str, list, tuple, dict)) or v is None else f"{r} ({type(v).__name__})"


_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
               "list": "a list", "dict": "a mapping", "path": "a folder path", "any": "a value"}


def _allowed(rule: Rule, t: Optional[str] = None) -> str:
    t = t or rule.type
    s = _TYPE_WORDS.get(t, t)
    if rule.min is not None and rule.max is not None:
        s += f" in [{rule.min:g}, {rule.max:g}]"
    elif rule.min is not None:
        s += f" {'>' if rule.excl_min else '>='} {rule.min:g}"
    elif rule.max is not None:
        s += f" <= {rule.max:g}"
    return s


def _parse_structured(text: str):
    """A JSON value, else a YAML value (``[a, b]`` is valid YAML but not JSON); ValueError if neither."""
    try:
        return json.loads(text)
    except ValueError as e:
        json_err = e
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml comes with papermill
        raise ValueError(f"not valid JSON ({json_err})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"not valid JSON ({json_err}) nor YAML ({first})") from None


def _scalar(v: Any, t: Optional[str], name: str, rule: Rule, given: Any, what: str = "") -> Any:
    """Convert one scalar to type ``t`` and check its bounds / choices / pattern."""
    where = f"parameter {name}{what}"

    def fail(extra: str = ""):
        allowed = ("one of " + ", ".join(map(repr, rule.choices))) if rule.choices else _allowed(rule, t)
        if rule.pattern_help:
            allowed += f" ({rule.pattern_help})"
        raise ParameterError(f"{where}: got {_show(v)}" + (f" (in {_show(given)})" if given is not v else "")
                             + f"; expected {allowed}{extra}")

    if t in (None, "any"):
        out = v
    elif t == "bool":
        if isinstance(v, bool):
            out = v
        elif isinstance(v, (int, float)) and v in (0, 1):
            out = bool(v)
        elif isinstance(v, str) and v.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
            out = v.strip().lower() in ("true", "yes", "on", "1")
        else:
            fail()
    elif t == "int":
        if isinstance(v, bool):
            fail()
        if isinstance(v, int):
            out = v
        elif isinstance(v, float) and v.is_integer():
            out = int(v)
        elif isinstance(v, str):
            s = v.strip()
            try:
                out = int(s.replace("_", ""))
            except ValueError:
                try:
                    f = float(s)
                except ValueError:
                    fail()
                if not f.is_integer():
                    fail()
                out = int(f)
        else:
            try:  # numpy integers
                import numpy as np

                if isinstance(v, np.integer):
                    out = int(v)
                else:
                    fail()
            except ImportError:  # pragma: no cover
                fail()
    elif t == "float":
        if isinstance(v, bool):
            fail()
        if isinstance(v, (int, float)):
            out = float(v)
        elif isinstance(v, str):
            try:
                out = float(v.strip().replace("_", ""))
            except ValueError:
                fail()
        else:
            try:
                out = float(v)
            except (TypeError, ValueError):
                fail()
        if not math.isfinite(out):
            fail(" (finite)")
    elif t == "str":
        if not isinstance(v, str):
            fail(" (papermill -p turns numbers, True/False and None into those types; pass a string with -r NAME VALUE)"
                 if isinstance(v, (int, float, bool)) else "")
        out = v.strip() if rule.pattern else v
    elif t == "path":
        if isinstance(v, os.PathLike):
            out = v
        elif isinstance(v, str):
            out = v
        else:
            fail()
    else:
        raise ParameterError(f"{where}: internal error: unknown type {t!r}")

    if isinstance(out, (int, float)) and not isinstance(out, bool):
        if rule.min is not None and (out < rule.min or (rule.excl_min and out == rule.min)):
            fail()
        if rule.max is not None and out > rule.max:
            fail()
    if rule.choices is not None and out not in rule.choices:
        close = difflib.get_close_matches(str(out), [str(c) for c in rule.choices], n=1)
        fail(f" (did you mean {close[0]!r}?)" if close else "")
    if rule.pattern is not None and isinstance(out, str) and not re.fullmatch(rule.pattern, out):
        fail()
    return out


_COMMA = re.compile(r",(?![^()\[\]]*[)\]])")  # commas outside brackets: "dirichlet(1),dirichlet(0.1)"


def _as_list(value: Any, name: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = _parse_structured(s)
            except ValueError as e:
                raise ParameterError(f"parameter {name}: cannot read {value!r} as a list: {e}; write it as "
                                     f"'[\"a\", \"b\"]' (JSON), '[a, b]' (YAML) or a single value") from None
            if not isinstance(parsed, list):
                raise ParameterError(f"parameter {name}: {value!r} is not a list (read as {_show(parsed)})")
            return parsed
        if s.startswith("{"):
            raise ParameterError(f"parameter {name}: got the mapping {value!r}; expected a list")
        if _COMMA.search(s):
            return [p.strip() for p in _COMMA.split(s)]
        return [s]
    if isinstance(value, dict):
        raise ParameterError(f"parameter {name}: got the mapping {_show(value)}; expected a list")
    return [value]  # a single number or bool: a one-element list


def _as_dict(value: Any, name: str) -> dict:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = _parse_structured(value.strip())
        except ValueError as e:
            raise ParameterError(f"parameter {name}: cannot read {value!r} as a mapping: {e}; write it as "
                                 f"'{{\"96\": 2000}}' (JSON) or '{{96: 2000}}' (YAML)") from None
        if isinstance(parsed, dict):
            return parsed
        raise ParameterError(f"parameter {name}: {value!r} is not a mapping (read as {_show(parsed)})")
    raise ParameterError(f"parameter {name}: got {_show(value)}; expected a mapping such as {{96: 2000}}")


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS)


def coerce(name: str, value: Any, rule: Rule) -> Any:
    """``value`` converted to what ``rule`` asks for; :class:`ParameterError` naming ``name``, the value
    given and what is allowed when that is impossible."""
    t = rule.type or "any"
    if _is_none(value) and (rule.optional or t == "any"):
        return None
    if value is None:
        raise ParameterError(f"parameter {name}: got None; expected {_allowed(rule)}")
    if t == "list":
        items = _as_list(value, name)
        scalar_rule = Rule(**{**rule.__dict__, "type": rule.item})
        out = [_scalar(v, rule.item, name, scalar_rule, value, f" (item {i})") for i, v in enumerate(items)]
        if rule.nonempty and not out:
            raise ParameterError(f"parameter {name}: got an empty list ({_show(value)}); expected at least one value"
                                 + (f" of {', '.join(map(repr, rule.choices))}" if rule.choices else ""))
        if rule.length is not None and len(out) != rule.length:
            raise ParameterError(f"parameter {name}: got {len(out)} values ({_show(value)}); expected exactly "
                                 f"{rule.length}")
        if rule.unique:
            dup = sorted({repr(v) for v in out if out.count(v) > 1})
            if dup:
                raise ParameterError(f"parameter {name}: {', '.join(dup)} given more than once in {_show(value)}")
        return out
    if t == "dict":
        d = _as_dict(value, name)
        krule = Rule(type=rule.key, min=rule.key_min)
        vrule = Rule(**{**rule.__dict__, "type": rule.item})
        return {_scalar(k, rule.key, name, krule, value, " (key)"): _scalar(v, rule.item, name, vrule, value, f" [{k!r}]")
                for k, v in d.items()}
    return _scalar(value, t, name, rule, value)


# ------------------------------------------------------------------------------------------------
# unknown names


def _assigned_names(source: str) -> Optional[List[str]]:
    """Names assigned by a cell made only of ``name = value`` statements (papermill's injected cell,
    a parameters cell); None for any other cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            names += [t.id for t in stmt.targets]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
        else:
            return None
    return names


def _previous_cell(ns: MutableMapping[str, Any]) -> Optional[str]:
    """The source of the cell executed before the current one (IPython's input history), or None."""
    hist = ns.get("In", ns.get("_ih"))
    if not isinstance(hist, list) or len(hist) < 2 or not all(isinstance(h, str) for h in hist[-2:]):
        return None
    return hist[-2]


def unknown_names(ns: MutableMapping[str, Any], known: Sequence[str]) -> List[str]:
    """Names set as parameters in ``ns`` that are not in ``known`` (see the module docstring)."""
    known = set(known)
    prev = _previous_cell(ns)
    if prev is not None:
        names = _assigned_names(prev)
        if names is None:
            return []
        injected = prev.lstrip().startswith("# Parameters")
        if not injected and sum(n in known for n in names) * 2 < len(names):
            return []  # an assignment cell run by hand that is not a parameters cell
        return [n for n in dict.fromkeys(names) if n not in known and not n.startswith(PAPERMILL_PREFIX)]
    out = []
    for k, v in ns.items():
        if k.startswith(("_", PAPERMILL_PREFIX)) or k in known or k in JUPYTER_NAMES:
            continue
        if isinstance(v, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
            continue
        out.append(k)
    return out


# ------------------------------------------------------------------------------------------------
# the entry point


def resolve(ns: MutableMapping[str, Any], notebook: Union[str, os.PathLike], *,
            check_unknown: bool = True) -> Dict[str, Any]:
    """Check and convert a notebook's parameters in its namespace ``ns`` (``globals()``).

    ``notebook``: the notebook's name (``"language"``) or the path of its ``.ipynb``; its
    ``parameters`` cell declares the names, defaults and types.  Every declared parameter is read
    from ``ns``, converted (see the module docstring) and written back; the converted values are
    returned as a dict in declaration order.  Raises :class:`ParameterError` for an unknown name
    (``check_unknown``), a missing parameter or a value that cannot be converted.
    """
    params = declared(notebook)
    label = Path(notebook).stem
    if check_unknown:
        bad = unknown_names(ns, list(params))
        if bad:
            msgs = []
            for b in bad:
                close = difflib.get_close_matches(b, list(params), n=1, cutoff=0.6)
                msgs.append(f"{b!r}" + (f" (did you mean {close[0]!r}?)" if close else " (no similar name)"))
            raise ParameterError(
                f"{label}: unknown parameter{'s' if len(bad) > 1 else ''} {', '.join(msgs)}; "
                f"the known parameters are: {', '.join(params)}")
    missing = [n for n in params if n not in ns]
    if missing:
        raise ParameterError(f"{label}: parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                             f"not defined; run the parameters cell first")
    out = {}
    for name, p in params.items():
        out[name] = coerce(name, ns[name], p.rule)
        ns[name] = out[name]
    return out
