"""The vocabulary of :mod:`dobrushin.experiments.params`: pydantic annotations that read what people type, each
saying what it accepts (:class:`Says`), and :func:`coerce`, which converts a value or raises
:class:`ParameterError` naming the parameter, the value and what is allowed.  Accepted spellings:

* lists: a list/tuple, a JSON or YAML list string, a comma-separated string (commas inside brackets do not
  split: ``dirichlet(1),dirichlet(0.1)``) or a bare single value; a string starting with ``[`` must parse;
* ints / floats / bools: numbers or their string spellings (``"200_000"``, ``"1e-3"``, ``"no"``), never a bool
  for a number; mappings: a mapping or a JSON/YAML mapping string, keys and values converted;
* ``"None"``/``"null"``/``"~"``/``""`` mean ``None`` wherever ``None`` is allowed.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Union

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, TypeAdapter, ValidationError

class ParameterError(ValueError):
    """A notebook parameter that is unknown or has a value that cannot be right."""


# ------------------------------------------------------------------------------------------------
# the vocabulary of types: pydantic annotations carrying a description of what they accept


@dataclass(frozen=True)
class Says:
    """Annotation metadata: what a value must be, in words (for errors), and a list's or mapping's element types."""

    text: str
    item: Any = None
    key: Any = None
    choices: tuple = ()
    nonempty: bool = False


class _Full(ValueError):
    """Raised inside a validator: the whole message after ``parameter NAME: `` ({given}: the value given)."""


class _Hint(ValueError):
    """Raised inside a validator: appended to the standard ``got ...; expected ...`` message."""


def _not_bool(v):
    if isinstance(v, bool):
        raise _Hint("")
    return v


def integer(*, ge: int):
    """An integer (``8``, ``8.0``, ``"8"``, ``"200_000"``; not a bool), at least ``ge``."""
    return Annotated[int, BeforeValidator(_not_bool), Field(ge=ge), Says(f"an integer >= {ge:g}")]


def number(*, gt: float):
    """A finite number (``0.5``, ``"1e-3"``; not a bool), greater than ``gt``."""
    return Annotated[float, BeforeValidator(_not_bool), Field(gt=gt, allow_inf_nan=False), Says(f"a number > {gt:g}")]


Bool = Annotated[bool, Says("true or false")]


def _is_string(v):
    if not isinstance(v, str) and isinstance(v, (bool, int, float)):
        raise _Hint(" (papermill -p turns numbers, True/False and None into those types; "
                    "pass a string with -r NAME VALUE)")
    return v


def text(pattern: Optional[str] = None, help: str = ""):
    """A string; with ``pattern``, stripped and matching it in full (``help`` says in words what it means)."""
    says = Says("a string" + (f" ({help})" if help else ""))
    if pattern is None:
        return Annotated[str, BeforeValidator(_is_string), says]
    return Annotated[str, BeforeValidator(_is_string),
                     StringConstraints(strip_whitespace=True, pattern=f"^(?:{pattern})$"), says]


def choice(*values: str):
    """One of ``values`` (a misspelling gets the closest one in the message)."""
    return Annotated[Literal[values], Says("one of " + ", ".join(map(repr, values)), choices=values)]


Folder = Annotated[Union[str, Path], Says("a folder path")]

_NONE_WORDS = ("none", "null", "~", "")


def _none_word(v):
    return None if isinstance(v, str) and v.strip().lower() in _NONE_WORDS else v


def optional(t):
    """``t`` or ``None`` (also spelt ``"None"``, ``"null"``, ``"~"``, ``""``)."""
    return Annotated[Optional[t], BeforeValidator(_none_word), _says(t)]


def _parse_structured(s: str):
    """A JSON value, else a YAML value (``[a, b]`` is valid YAML but not JSON); ValueError if neither."""
    try:
        return json.loads(s)
    except ValueError as e:
        json_err = e
    try:
        import yaml  # comes with papermill
    except ImportError:  # pragma: no cover
        raise ValueError(f"not valid JSON ({json_err})") from None
    try:
        return yaml.safe_load(s)
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"not valid JSON ({json_err}) nor YAML ({first})") from None


_COMMA = re.compile(r",(?![^()\[\]]*[)\]])")  # commas outside brackets: "dirichlet(1),dirichlet(0.1)"


def _as_list(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = _parse_structured(s)
            except ValueError as e:
                raise _Full("cannot read {given} as a list: " + f"{e}; write it as '[\"a\", \"b\"]' (JSON), "
                            "'[a, b]' (YAML) or a single value") from None
            if not isinstance(parsed, list):
                raise _Full("{given} is not a list " + f"(read as {_show(parsed)})")
            return parsed
        if s.startswith("{"):
            raise _Full("got the mapping {given}; expected a list")
        return [p.strip() for p in _COMMA.split(s)] if _COMMA.search(s) else [s]
    if isinstance(value, dict):
        raise _Full("got the mapping {given}; expected a list")
    return [value]  # a single number or bool: a one-element list


def _unique(values: list) -> list:
    dup = sorted({repr(v) for v in values if values.count(v) > 1})
    if dup:
        raise _Full(f"{', '.join(dup)} given more than once in " + "{given}")
    return values


def list_of(item, *, nonempty: bool = False, unique: bool = False):
    """A list of ``item`` (every spelling of the module docstring), optionally non-empty or without
    repeats."""
    meta = [BeforeValidator(_as_list), Field(min_length=1 if nonempty else None)]
    if unique:
        meta.append(AfterValidator(_unique))
    return Annotated[List[item], *meta, Says("a list", item=item, nonempty=nonempty)]


def _as_dict(value):
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = _parse_structured(value.strip())
        except ValueError as e:
            raise _Full("cannot read {given} as a mapping: " + f"{e}; write it as " + """'{"96": 2000}' (JSON) """
                        "or '{96: 2000}' (YAML)") from None
        if isinstance(parsed, dict):
            return parsed
        raise _Full("{given} is not a mapping " + f"(read as {_show(parsed)})")
    raise _Full("got {given}; expected a mapping such as {96: 2000}")


def mapping(key, value):
    """A mapping ``key -> value`` (or its JSON/YAML text)."""
    return Annotated[Dict[key, value], BeforeValidator(_as_dict), Says("a mapping", key=key, item=value)]


def _says(t) -> Says:
    return next((m for m in getattr(t, "__metadata__", ()) if isinstance(m, Says)), Says("a value"))


# ------------------------------------------------------------------------------------------------
# error messages


def _show(v: Any) -> str:
    """``v`` for a message: repr, whole (never shortened), with its type when that helps."""
    r = repr(v)
    return r if isinstance(v, (str, list, tuple, dict)) or v is None else f"{r} ({type(v).__name__})"


def describe(name: str, annotation, err: dict, given: Any) -> str:
    """One pydantic error of parameter ``name`` as ``parameter NAME[ where]: got ...; expected ...``."""
    says, where, loc = _says(annotation), "", list(err["loc"])
    while loc:
        part = loc.pop(0)
        if says.key is not None:  # a mapping: the key's error ends in "[key]", the value's does not
            is_key = bool(loc) and loc[0] == "[key]"
            says, where = _says(says.key if is_key else says.item), " (key)" if is_key else f" [{part!r}]"
            loc = loc[1:] if is_key else loc
        elif isinstance(part, int) and says.item is not None:
            says, where = _says(says.item), f" (item {part})"
    exc = (err.get("ctx") or {}).get("error")
    if isinstance(exc, _Full):
        return f"parameter {name}{where}: " + str(exc).replace("{given}", _show(given))
    got = err.get("input")
    if err["type"] == "too_short":  # a non-empty list given empty
        choices = _says(says.item).choices
        return (f"parameter {name}: got an empty list ({_show(given)}); expected at least one value"
                + (f" of {', '.join(map(repr, choices))}" if choices else ""))
    extra = str(exc) if isinstance(exc, _Hint) else ""
    if says.choices and isinstance(got, str):
        close = difflib.get_close_matches(got, list(says.choices), n=1)
        extra += f" (did you mean {close[0]!r}?)" if close else ""
    if err["type"] == "finite_number":
        extra += " (finite)"
    inside = f" (in {_show(given)})" if where else ""
    return f"parameter {name}{where}: got {_show(got)}{inside}; expected {says.text}{extra}"


def coerce(name: str, value: Any, annotation) -> Any:
    """``value`` converted to ``annotation``; :class:`ParameterError` naming ``name``, the value given and what is
    allowed when that is impossible."""
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError as e:
        raise ParameterError(describe(name, annotation, e.errors()[0], value)) from None
