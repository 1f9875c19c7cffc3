"""The one hook mechanism of the capture layer, used by every adapter.

A :class:`HookPoint` names a submodule (dotted path) and what to read there: its output, an element of a
tuple output, or a positional input.  :func:`recording` hooks every point during a ``with`` block and
collects what passes (optionally transformed at once); the hooks are removed after, also on an error.  An
absent optional module (``None``, e.g. rtdl's dropout at rate 0) is stood in for by ``torch.nn.Identity``.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import torch

from .errors import AttentionUnavailable


@dataclass(frozen=True)
class HookPoint:
    """``name``: dotted path of the submodule; ``read``: ``"output"`` or ``"input"``; ``index``: the
    element of a tuple output or the positional input to read (None: the output itself)."""

    name: str
    read: str = "output"
    index: Optional[int] = None

    def __post_init__(self):
        if self.read not in ("output", "input"):
            raise ValueError(f"hook point {self.name!r}: read must be 'output' or 'input', got {self.read!r}")
        if self.read == "input" and self.index is None:
            raise ValueError(f"hook point {self.name!r}: reading an input needs the argument index")

    def pick(self, value) -> Optional[torch.Tensor]:
        """The tensor this point reads from a module's output or positional-argument tuple (None if absent)."""
        if self.index is None:
            return value if isinstance(value, torch.Tensor) else None
        if isinstance(value, (tuple, list)) and len(value) > self.index:
            v = value[self.index]
            return v if isinstance(v, torch.Tensor) else None
        return None


class Recording:
    """What the hooks of :func:`recording` saw: per point name, one entry per call (None when the
    point carried no tensor, e.g. an attention module that returned no weights)."""

    def __init__(self, points: Sequence[HookPoint]):
        self.points = list(points)
        self.values: Dict[str, List[Optional[torch.Tensor]]] = {p.name: [] for p in self.points}

    def per_point(self, what: str) -> List[torch.Tensor]:
        """Exactly one tensor per point, in the order of the points; :class:`AttentionUnavailable`
        naming the points that saw no call, several calls or no tensor."""
        counts = {p.name: len(self.values[p.name]) for p in self.points}
        wrong = [n for n, c in counts.items() if c != 1]
        if wrong:
            raise AttentionUnavailable(f"{what}: hook point(s) {wrong} were called {[counts[n] for n in wrong]} "
                                       f"times in one forward pass, expected once each")
        out = [self.values[p.name][0] for p in self.points]
        missing = [i for i, v in enumerate(out) if v is None]
        if missing:
            raise AttentionUnavailable(f"{what}: layer(s) {missing} returned no attention weights")
        return out


def _resolve(model: torch.nn.Module, name: str):
    """``(parent, attribute, module)`` of the dotted path ``name`` (module None when the attribute is None)."""
    parent_name, _, attr = name.rpartition(".")
    try:
        parent = model.get_submodule(parent_name) if parent_name else model
    except AttributeError as e:
        raise AttentionUnavailable(f"hook point {name!r}: no such submodule ({e})") from None
    if not hasattr(parent, attr):
        raise AttentionUnavailable(f"hook point {name!r}: {type(parent).__name__} has no attribute {attr!r}")
    mod = getattr(parent, attr)
    if mod is not None and not isinstance(mod, torch.nn.Module):
        raise AttentionUnavailable(f"hook point {name!r} is a {type(mod).__name__}, not a module")
    return parent, attr, mod


@contextlib.contextmanager
def recording(model: torch.nn.Module, points: Sequence[HookPoint],
              transform: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> Iterator[Recording]:
    """Hook every point of ``model`` while the block runs; yields the :class:`Recording`.

    ``transform`` is applied to every captured tensor at once (after ``detach``)."""
    rec = Recording(points)
    handles, stand_ins = [], []
    try:
        for p in points:
            parent, attr, mod = _resolve(model, p.name)
            if mod is None:  # an absent optional module: an identity stands in while the block runs
                mod = torch.nn.Identity()
                setattr(parent, attr, mod)
                stand_ins.append((parent, attr))
            store = rec.values[p.name]

            def keep(value, p=p, store=store):
                t = p.pick(value)
                if t is not None:
                    t = t.detach()
                    t = transform(t) if transform is not None else t
                store.append(t)

            if p.read == "output":
                handles.append(mod.register_forward_hook(lambda m, args, out, keep=keep: keep(out)))
            else:
                handles.append(mod.register_forward_pre_hook(lambda m, args, keep=keep: keep(args)))
        yield rec
    finally:
        for h in handles:
            h.remove()
        for parent, attr in stand_ins:
            setattr(parent, attr, None)


_SINK: contextvars.ContextVar = contextvars.ContextVar("dobrushin_layer_sink", default=None)
_MAP_SINK: contextvars.ContextVar = contextvars.ContextVar("dobrushin_map_sink", default=None)
_ROLES: contextvars.ContextVar = contextvars.ContextVar("dobrushin_announced_roles", default=None)


@contextlib.contextmanager
def layer_sink(fn: Optional[Callable[[torch.Tensor], None]]) -> Iterator[None]:
    """While the block runs, every :func:`attention_maps` transform hands ``fn`` each layer's per-head
    attention ``(B, H, n, n)`` (float32, on the model's device) before averaging, in forward order."""
    token = _SINK.set(fn)
    try:
        yield
    finally:
        _SINK.reset(token)


@contextlib.contextmanager
def map_sink(fn: Optional[Callable[[torch.Tensor], None]]) -> Iterator[None]:
    """While the block runs, every stacked head-averaging :func:`attention_maps` transform (``layers`` given)
    hands ``fn`` each layer's map ``(B, n, n)`` (float32, on the model's device) and does not keep it: the
    extraction's ``attention`` is then a data-less placeholder (:func:`is_placeholder`), so ``fn`` must
    take every layer it needs.  Other transforms are unaffected."""
    token = _MAP_SINK.set(fn)
    try:
        yield
    finally:
        _MAP_SINK.reset(token)


def _placeholder(shape: tuple) -> torch.Tensor:
    """A float32 tensor of ``shape`` holding no data: one stored 0 that every index reads (all strides 0)."""
    return torch.zeros((), dtype=torch.float32).expand(shape)


def is_placeholder(t: torch.Tensor) -> bool:
    """Whether ``t`` is the data-less attention an extraction returns under :func:`map_sink`: a tensor of
    more than one element whose strides are all 0 (one stored element read at every index), that
    element being 0, which no attention row summing to 1 can be."""
    return (isinstance(t, torch.Tensor) and t.numel() > 1 and all(s == 0 for s in t.stride())
            and float(t[(0,) * t.ndim]) == 0.0)


@contextlib.contextmanager
def announce_roles(fn: Callable[[int], List[List[str]]]) -> Iterator[None]:
    """An adapter announces the token roles of the batch before its forward pass (``fn(n)``: the roles
    of every input for ``n`` tokens), so a :func:`layer_sink` consumer can restrict each layer as it is
    captured."""
    token = _ROLES.set(fn)
    try:
        yield
    finally:
        _ROLES.reset(token)


def announced_roles(n: int) -> Optional[List[List[str]]]:
    """The roles announced for the running forward pass (:func:`announce_roles`), or None."""
    fn = _ROLES.get()
    return None if fn is None else fn(n)


def _per_head(w: torch.Tensor) -> torch.Tensor:
    """The captured per-head weights ``(B, H, n_q, n)`` as float32, after the :func:`layer_sink` in force (if
    any) has seen them; :class:`AttentionUnavailable` for another shape."""
    if w.ndim != 4:
        raise AttentionUnavailable(f"captured attention has shape {tuple(w.shape)}, expected (B, H, n, n)")
    w = w.float()
    sink = _SINK.get()
    if sink is not None:
        sink(w)
    return w


class _Stacked:
    """The transform of :func:`attention_maps` with ``layers`` given: each layer's map is copied into
    slot ``i`` of one ``(B, layers, ...)`` float32 CPU buffer as it is captured, so that
    :meth:`stack` returns the buffer itself instead of ``torch.stack`` copying every layer once more."""

    def __init__(self, average_heads: bool, layers: int):
        self.average_heads, self.layers = average_heads, int(layers)
        self.buf: Optional[torch.Tensor] = None
        self.i = 0
        self.handed: Optional[tuple] = None  # (B, n_q, n) of the maps handed to a map sink, not kept

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        w = _per_head(w)
        m = w.mean(1) if self.average_heads else w
        consumer = _MAP_SINK.get() if self.average_heads else None
        if consumer is not None:
            consumer(m)
            self.handed = tuple(m.shape)
            self.i += 1
            return _placeholder(tuple(m.shape))
        if self.buf is None and self.i == 0:
            self.buf = torch.empty((m.shape[0], self.layers) + tuple(m.shape[1:]), dtype=torch.float32)
        if self.buf is None or self.i >= self.layers or tuple(self.buf.shape[2:]) != tuple(m.shape[1:]) \
                or self.buf.shape[0] != m.shape[0]:
            self.buf = None  # an unexpected call: fall back to separate tensors
            self.i += 1
            return m.to("cpu")
        self.buf[:, self.i].copy_(m)
        self.i += 1
        return self.buf[:, self.i - 1]

    def stack(self, maps: List[torch.Tensor]) -> torch.Tensor:
        """``torch.stack(maps, dim=1)``, without the copy when every layer went into the buffer (a
        placeholder holding no data when they went to a :func:`map_sink`)."""
        if self.handed is not None and self.i == len(maps):
            B, rest = self.handed[0], self.handed[1:]
            return _placeholder((B, len(maps)) + rest)
        if self.buf is not None and self.i == self.layers == len(maps):
            return self.buf
        return torch.stack(maps, dim=1)


def attention_maps(average_heads: bool, layers: Optional[int] = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The transform for attention weights ``(B, H, n_q, n)``: float32, averaged over heads unless
    ``average_heads=False``, on the CPU; :class:`AttentionUnavailable` for another shape.  A
    :func:`layer_sink` in force sees the per-head weights first.  With ``layers`` (the number of hook
    points) the maps go straight into one stacked buffer (the transform's ``stack(maps)`` returns it)."""
    if layers is not None:
        return _Stacked(average_heads, layers)

    def transform(w: torch.Tensor) -> torch.Tensor:
        w = _per_head(w)
        return (w.mean(1) if average_heads else w).to("cpu")

    return transform
