"""The caches are keyed by the code that computes the numbers (dobrushin.store.code.code_digest).

In a temporary copy of lib/, imported by a subprocess (PYTHONPATH pointing at the copy), a tiny untrained
ViT is measured by the real pipeline; an identical second run reuses the tables, a one-line change in
capture/hooks.py makes the third run recompute, and a change to report/ alone (presentation) reuses."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dobrushin.store import code as code_mod

LIB = Path(__file__).resolve().parents[1] / "lib"

CHILD = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import numpy as np, torch
    from PIL import Image
    import dobrushin
    from dobrushin.data.inputs import load_images
    from dobrushin.experiments.pipeline import MeasureConfig, measure_model
    from dobrushin.models import LoadedModel
    from dobrushin.store.results import ResultStore

    lib, work = Path(sys.argv[1]), Path(sys.argv[2])
    assert Path(dobrushin.__file__).resolve().is_relative_to(lib.resolve()), dobrushin.__file__

    def tiny(seed):
        from transformers import ViTConfig, ViTModel
        cfg = ViTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        image_size=16, patch_size=8, attn_implementation="eager")
        torch.manual_seed(seed)
        return ViTModel(cfg, add_pooling_layer=False).eval()

    def pixels(images):
        a = [np.asarray(im.convert("RGB").resize((16, 16)), dtype=np.float32) / 255.0 for im in images]
        return torch.from_numpy(np.stack(a)).permute(0, 3, 1, 2).contiguous()

    def loader(model_id, *, pretrained=True, seed=0, **kw):
        return LoadedModel(model=tiny(seed), preprocess=pixels, kind="vision", source="hf",
                           weights="untrained", model_id=model_id, family="vit")

    imgs = work / "imgs"
    imgs.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(imgs / f"im{i}.png")
    store = ResultStore(work / "results", "nb")
    run = measure_model("tiny/vit", load_images(imgs, seed=0), store=store, loader=loader,
                        config=MeasureConfig(weights=("untrained",), batch_size=3, head_inputs=1, device="cpu",
                                             progress=False),
                        provenance={"untrained": {"source": "untrained", "seed": 0}})
    entry = store.manifest()["entries"]["tiny--vit"]
    print(json.dumps({"cached": bool(run.cached), "entry_digest": entry["code_digest"],
                      "key_digest": entry["params"]["code_digest"], "rows": len(run.table)}))
''')


def test_code_digest_follows_the_files(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(LIB / "dobrushin", root, ignore=shutil.ignore_patterns("__pycache__"))
    d0 = code_mod.code_digest(root=root)
    assert d0 == code_mod.code_digest(root=LIB / "dobrushin")  # the same bytes, the same digest
    assert len(d0) == 64 and int(d0, 16) >= 0
    (root / "report" / "names.py").write_text((root / "report" / "names.py").read_text() + "\nX = 1\n")
    assert code_mod.code_digest(root=root) == d0  # presentation makes no product
    hooks = root / "capture" / "hooks.py"
    hooks.write_text(hooks.read_text() + "\nX = 1\n")
    d1 = code_mod.code_digest(root=root)
    assert d1 != d0
    assert code_mod.code_digest(("math",), root=root) == code_mod.code_digest(("math",), root=LIB / "dobrushin")
    # a single file can be named, and moving a file changes the digest even with the same bytes
    one = code_mod.code_digest(("capture/hooks.py",), root=root)
    (root / "capture" / "hooks2.py").write_bytes(hooks.read_bytes())
    hooks.unlink()
    assert code_mod.code_digest(("capture/hooks2.py",), root=root) != one
    with pytest.raises(ValueError, match="neither a subpackage nor a .py file"):
        code_mod.code_digest(("nonesuch",), root=root)
    with pytest.raises(TypeError, match="sequence of names"):
        code_mod.code_digest("math", root=root)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_code_change_recomputes_and_a_report_change_reuses(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(LIB, lib, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(lib), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DOBRUSHIN_CACHE": str(tmp_path / "cache"),
           "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run() -> dict:
        p = subprocess.run([sys.executable, str(script), str(lib), str(work)], env=env, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = run()
    assert not first["cached"] and first["rows"] > 0
    assert first["entry_digest"] == first["key_digest"] == code_mod.code_digest(root=lib / "dobrushin")
    second = run()
    assert second["cached"] and second["key_digest"] == first["key_digest"]

    hooks = lib / "dobrushin" / "capture" / "hooks.py"
    hooks.write_text(hooks.read_text() + "\n_ONE_ADDED_LINE = True\n")
    third = run()
    assert not third["cached"], "an edit to capture/hooks.py must recompute, not reuse the old tables"
    assert third["key_digest"] != first["key_digest"]
    assert third["entry_digest"] == third["key_digest"] == code_mod.code_digest(root=lib / "dobrushin")

    names = lib / "dobrushin" / "report" / "names.py"
    names.write_text(names.read_text() + "\n_PRESENTATION_ONLY = True\n")
    fourth = run()
    assert fourth["cached"] and fourth["key_digest"] == third["key_digest"]


def test_each_product_is_keyed_by_the_closure_of_its_own_code(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(LIB / "dobrushin", root, ignore=shutil.ignore_patterns("__pycache__"))
    rel = lambda p: {f.relative_to(root).as_posix() for f in code_mod.product_files(p, root)}  # noqa: E731
    tables = rel("tables")
    # what measures is in: the pipeline and everything it imports, the FT-Transformer measurement
    assert {"experiments/pipeline.py", "experiments/tabular.py", "capture/hooks.py", "math/kernel.py",
            "models/base.py", "store/results.py", "__init__.py"} <= tables
    # parsing, publishing, verifying, the presentation and the keying modules are out
    assert not tables & {"experiments/params.py", "experiments/publish.py", "experiments/verify.py", *code_mod.KEYING}
    assert not any(r.startswith(("report/", "tools/")) for r in tables)
    assert rel("training") == {"models/ft_transformer.py", "data/tabular_data.py"}
    assert "random/ensembles.py" in rel("cells") and not rel("cells") & set(code_mod.KEYING)
    with pytest.raises(ValueError, match="unknown product"):
        code_mod.product_files("nonesuch", root)

    d0 = code_mod.product_digest("tables", root)
    verify = root / "experiments" / "verify.py"
    verify.write_text(verify.read_text() + "\n_ORCHESTRATION_ONLY = True\n")
    assert code_mod.product_digest("tables", root) == d0  # an edit to verify.py keeps the published results valid
    # ... until a measuring module imports it: then it is part of what measures
    measure = root / "experiments" / "measure.py"
    measure.write_text(measure.read_text() + "\n\ndef _late():\n    from . import verify  # noqa: F401\n")
    assert "experiments/verify.py" in rel("tables")
    d1 = code_mod.product_digest("tables", root)
    assert d1 != d0
    verify.write_text(verify.read_text() + "\n_AGAIN = True\n")
    assert code_mod.product_digest("tables", root) != d1


def test_comments_docstrings_and_formatting_do_not_count(tmp_path):
    """The digest hashes the syntax tree without docstrings: a comment, a docstring, blank lines or another
    layout keep it; a changed value, name or statement does not."""
    norm = code_mod.normalized_source
    base = b'"""Module."""\nimport os\n\n\ndef f(a, b=2):\n    """Doc."""\n    return a + b  # sum\n'
    same = (b'import os\ndef f(a,\n      b=2):\n    """Another doc, longer.\n\n    More."""\n    # why\n'
            b'    return (a + b)\n')
    assert norm(base) == norm(same)
    for other in (base.replace(b"b=2", b"b=3"), base.replace(b"a + b", b"a - b"),
                  base.replace(b"return a + b", b"x = 1\n    return a + b"), base.replace(b"def f", b"def g")):
        assert norm(other) != norm(base)
    # a function whose body is only a docstring keeps a body (is not the same as one with a statement)
    assert norm(b"def f():\n    'doc'\n") != norm(b"def f():\n    return 1\n")


def test_digest_only_in_a_copy_keeps_a_comment_edit_and_refuses_a_code_edit(tmp_path):
    """In a copy of lib/, run as a new user would: a published folder made by that code is valid (exit 0); a
    comment and a docstring edit in capture/ keep it so; a real code edit there makes it exit 3."""
    lib = tmp_path / "lib"
    shutil.copytree(LIB, lib, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pkg = lib / "dobrushin"
    pub = tmp_path / "published" / "paper"
    pub.mkdir(parents=True)
    digests = {p: code_mod.product_digest(p, pkg) for p in code_mod.PRODUCTS}
    (pub / "PUBLISHED.json").write_text(json.dumps({"code_digest": digests["tables"], "digests": digests,
                                                    "commit": "abc"}))
    env = {**os.environ, "PYTHONPATH": str(lib), "HF_HUB_OFFLINE": "1"}
    env.pop("DOBRUSHIN_PUBLISHED", None)

    def status() -> int:
        p = subprocess.run([sys.executable, "-m", "dobrushin.experiments.verify", "--digest-only", str(pub)],
                           env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert p.returncode in (0, 3), p.stderr[-2000:]
        return p.returncode

    assert status() == 0
    hooks = pkg / "capture" / "hooks.py"
    src = hooks.read_text()
    first_def = src.index("\ndef ")
    edited = src[:first_def] + "\n# a comment added by a reviewer\n" + src[first_def:]
    edited = edited.replace('"""', '"""Reworded. ', 1)
    hooks.write_text(edited)
    assert status() == 0
    hooks.write_text(edited + "\n_A_REAL_CHANGE = 1\n")
    assert status() == 3


def test_the_digest_is_the_same_from_many_threads_at_once():
    """A Dask worker measures in threads, each computing the digest; parsing the imports must not race."""
    from concurrent.futures import ThreadPoolExecutor

    code_mod._imported.cache_clear()
    want = code_mod.code_digest()
    code_mod._imported.cache_clear()
    code_mod.normalized_source.cache_clear()
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda _: code_mod.code_digest(), range(32)))
    assert got == [want] * 32


def test_the_normalized_source_is_the_same_for_nested_format_specs():
    """Python 3.12 parses f"{x:<{w}}" with an extra empty string in the spec; the digest leaves empty strings of
    an f-string out, so it does not depend on that."""
    import ast

    tree = ast.parse('f"{x:<{w}}"')
    spec = tree.body[0].value.values[0].format_spec
    spec.values.append(ast.Constant(""))  # as 3.12 has it
    assert code_mod.normalized_tree(tree) == code_mod.normalized_source(b'f"{x:<{w}}"\n')
    assert code_mod.normalized_source(b'f"{x:<{w}}"\n') != code_mod.normalized_source(b'f"{x:>{w}}"\n')
