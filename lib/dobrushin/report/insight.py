"""Sections that show *why* the condition holds or fails, mixed into the family chapters
(:class:`InsightSections`, a base of :class:`dobrushin.report.chapter.FamilyChapter`):

* :meth:`~InsightSections.kappa_profile` — κ(A) per layer (trained, untrained control, random matrices of the
  same n) beside κ(R)/bound, and the split of the whole-rollout gap into its two factors;
* :meth:`~InsightSections.structure` — the diagonal of the attention on a few inputs against random matrices
  (why untrained controls hold more often than random matrices), and whether two untrained controls are the
  same network;
* :meth:`~InsightSections.atlas` — the failure atlas: failing and holding cases drawn on the photo or sentence;
* :meth:`~InsightSections.mpnet_ablation` — the MPNet distance-0 bias ablation (language chapter);
* :meth:`~InsightSections.downloads` — links to the chapter's result files.

Every number in the sentences is computed from the result tables or measured here.
"""
from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import pandas as pd

from ..store.results import atomic_write_csv, atomic_write_json
from . import page as F
from .names import VARIANT_LABELS, pct, weights_label
from .plots import display_name

MPNET = "sentence-transformers/all-mpnet-base-v2"


def _display(*objs):
    from IPython.display import display

    display(*objs)


def _md(text: str):
    from IPython.display import Markdown

    _display(Markdown(text))


def value_range(x) -> str:
    """``min–max`` of ``x`` with two decimals each (``0.05–0.07``; one value when they agree)."""
    lo, hi = float(np.min(x)), float(np.max(x))
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"


def _srng(x) -> str:
    """``min–max`` with two significant digits each (small values are not rounded to 0.00)."""
    lo, hi = f"{float(np.min(x)):.2g}", f"{float(np.max(x)):.2g}"
    return lo if lo == hi else f"{lo}–{hi}"


def _prng(x) -> str:
    """A range of fractions as percentages with one decimal (``29.5–29.7%``; one value when they agree)."""
    lo, hi = pct(float(np.min(x))), pct(float(np.max(x)))
    return lo if lo == hi else f"{lo[:-1]}–{hi}"


def fingerprint(model) -> str:
    """SHA-256 over the names, shapes and bytes of every tensor of ``model``'s state dict."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(str(tuple(v.shape)).encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def rollout_gap(roll: pd.DataFrame) -> pd.DataFrame:
    """Per (model, weights, variant): the median κ(R)/bound and its two factors, κ(R)/∏κ(F_ℓ)
    (submultiplicativity) and ∏κ(F_ℓ)/∏½(1+κ(A_ℓ)) (the layer bounds), and the median number of tight layers."""
    r = roll.assign(ratio=roll["kappa_rollout"] / roll["bound"],
                    submult=roll["kappa_rollout"] / roll["factor_product"],
                    layers=roll["factor_product"] / roll["bound"])
    return (r.groupby(["model", "weights", "variant"], sort=False)
            .agg(inputs=("ratio", "size"), ratio=("ratio", "median"), submult=("submult", "median"),
                 layers=("layers", "median"), tight=("layers_holding", "median"), L=("n_layers", "max"))
            .reset_index())


def near_tie_text(table: pd.DataFrame, name=None) -> str:
    """A paragraph on the decisions a rounding could turn: of the (input, layer, variant) rows of ``table``, those
    whose decision margin (the smallest of the κ gap and the two self-margins: how far the κ-attaining pair is from
    another pair, and each token's self-attention from the other's attention to it) is below
    :data:`dobrushin.experiments.verify.FLOAT_ERROR`, the size of float32 rounding in the captured attention,
    and how far counting all of them the other way could move a fraction (per model, weights and variant).
    ``name``: how a model id is shown.  "" when the table has no margin columns."""
    from ..experiments.verify import FLOAT_ERROR, MARGIN_COLUMNS, margin_of_rows

    if not len(table) or not set(MARGIN_COLUMNS) <= set(table.columns):
        return ""
    name = name or display_name
    m = margin_of_rows(table).to_numpy(float)
    tie = np.isfinite(m) & (m < FLOAT_ERROR)
    n_tie = int(tie.sum())
    if not n_tie:
        return (f"**Near-ties.** None of the {len(table):,} decisions above has a margin below {FLOAT_ERROR:g} (the "
                "smallest of κ's lead over the best non-attaining pair and the deciding pair's two self-margins), "
                "far above the float32 rounding of the captured attention: no decision here rests on a near-tie.")
    t = table.assign(_tie=tie)
    share = t.groupby(["model", "weights", "variant"], observed=True, sort=False)["_tie"].mean()
    (mm, w, v), top = share.idxmax(), float(share.max())
    overall = n_tie / len(table)
    return (f"**Near-ties.** {n_tie:,} of the {len(table):,} (input, layer, variant) decisions above "
            f"({pct(overall, 2 if overall < 0.001 else 1)}) have a margin below {FLOAT_ERROR:g} (the smallest of κ's lead over the best "
            "non-attaining pair and the deciding pair's two self-margins): there float32 rounding of the captured attention could decide either "
            "way, and another machine may. Counting every one of them the other way would move no fraction by more "
            f"than {100 * top:.1f} points (the most: {name(mm)}, {weights_label(w)}, "
            f"{VARIANT_LABELS.get(v, v)}). `make verify` excuses a differing decision only below this margin.")


def _runs(nums) -> str:
    """``[2, 3, 4, 7]`` → ``"2–4, 7"``: sorted integers with consecutive runs as ranges."""
    out, nums = [], sorted(nums)
    for x in nums:
        if out and x == out[-1][1] + 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in out)


def uniformity_clause(kappa_per_layer, fraction: float, holds_per_layer=None) -> str:
    """What the per-layer median κ(A) says about the test's fraction ``fraction`` (a clause starting ". ",
    or "" when κ is neither high in every layer nor low in any).  ``holds_per_layer``: the fraction holding per
    layer (indexed like ``kappa_per_layer``, by 0-based layer, each layer with the same number of pairs); with it,
    layers near uniform among others are named (1-based) with the fraction there and in the other layers."""
    k = np.asarray(kappa_per_layer, dtype=float)
    if float(k.min()) >= 0.3 and fraction == 0:
        return ". The attention is far from uniform in every layer, and the layer bound is tight in none of them"
    if float(k.min()) >= 0.3:
        return (". The attention is far from uniform in every layer, so where the bound is tight it is "
                "tight for tokens that attend to clearly different sets, not because every row is alike")
    if float(k.max()) < 0.1:
        return (". The rows of the attention are nearly alike in every layer (every token attends in nearly "
                "the same way, as in near-uniform attention or attention all on one token); since κ(½(I+A)) ≥ ½(1−κ(A)), the "
                "slack is at most κ(A), so the layer bound is nearly tight in value whether the condition "
                "holds or not: the fraction says little here")
    low = int((k < 0.1).sum())
    if not low:
        return ""
    one = low == 1
    those = "that layer" if one else "those layers"
    what = ("the rows are nearly alike, the slack is at most κ(A), and the layer bound is nearly tight in value "
            f"whether the condition holds or not, so the fraction says little about {those}")
    if holds_per_layer is None or not hasattr(kappa_per_layer, "index"):
        return f". In {low} of {k.size} layers the median κ(A) is below 0.1: there {what}"
    idx = list(kappa_per_layer.index)
    near = [i for i, v in zip(idx, k) if v < 0.1]
    h = pd.Series(holds_per_layer).reindex(idx).astype(float)
    names = _runs([int(i) + 1 for i in near])
    rest = h.drop(index=near)
    return (f". In layer{'' if one else 's'} {names} (of {k.size}) the median κ(A) is below 0.1: there {what}. "
            f"The condition holds on {pct(float(h.loc[near].mean()))} of the pairs of {those} and on "
            f"{pct(float(rest.mean()))} of the pairs of the other layer{'' if k.size - low == 1 else 's'}")


def ablation_verdict(k0: int, n0: int, k1: int, n1: int, bias: float) -> Tuple[str, bool]:
    """The conclusion of the MPNet ablation from its counts — the condition held on ``k0`` of ``n0`` pairs
    before and ``k1`` of ``n1`` after setting the distance-0 bias (mean ``bias`` before) to its neighbours'
    mean — and whether the ablation alone removes the failures: the sentence follows the numbers of the build,
    "the cause" only when at least 90% of the share failing before is gone after (monotone: more pairs holding
    after never reads as less)."""
    if n0 <= 0 or n1 <= 0:
        return "", False
    f0, f1 = 1 - k0 / n0, 1 - k1 / n1  # the shares failing before and after
    sign = "negative " if bias < 0 else ""
    if f0 == 0:
        return "The condition held on every pair before the ablation, so there are no failures to explain.", False
    if f1 <= 0.1 * f0:
        return (f"So the {sign}distance-0 bias is the cause of the failures: removing it alone restores mutual "
                "self-dominance of the κ-attaining pairs.", True)
    if f1 < f0:
        return (f"So the {sign}distance-0 bias accounts for some of the failures, not all: removing it alone "
                "lowers the share failing without removing it.", False)
    return ("So the distance-0 bias does not explain the failures: removing it does not lower the share "
            "failing.", False)


class InsightSections:
    """Mixin for :class:`dobrushin.report.chapter.FamilyChapter` (uses its ``table``, ``roll``, ``runs``,
    ``featured``, ``input_set``, ``config``, ``results``, ``store``, ``notebook``, ``kind``, ``title``, ``_fig``)."""

    # ------------------------------------------------------------------ §1 κ(A) per layer
    def _random_kappa(self, models, count: int = 32):
        from ..experiments.structure import random_kappa

        c = self.table[self.table["variant"] == "content"]
        out = {}
        for m in models:
            g = c[c["model"] == m]
            if len(g):
                out[m] = random_kappa(int(g["n_tokens"].median()), count=count, seed=self.config.seed)
        return out

    def kappa_profile(self):
        """κ(A) per layer per model (trained, untrained control, random matrices of the same n), κ(R)/bound in the
        panel titles, and what it implies, in computed sentences."""
        if not len(self.table):
            return
        models = [m for m in self.featured if (self.table["model"] == m).any()]
        rk = self._random_kappa(models)
        from .kappa_figures import kappa_by_layer

        fig = kappa_by_layer(
            self.table, self.roll, models=models, random_kappa=rk, ncols=self.ncols)
        c = self.table[(self.table["variant"] == "content") & self.table["model"].isin(models)]
        ns = {m: int(c.loc[c["model"] == m, "n_tokens"].median()) for m in models}
        self._fig(fig, "kappa", f"{self.title}: the Dobrushin coefficient κ(A) of the head-averaged attention per "
                  "layer (content tokens; median over inputs, band: interquartile range), with the "
                  + ("trained weights and the untrained control" if (c["weights"] == "pretrained").any()
                     else "untrained control")
                  + ", against κ of Dirichlet(1) random matrices of the model's median number of content tokens ("
                  + (f"n = {next(iter(ns.values()))}" if len(set(ns.values())) == 1 else
                     ", ".join(f"{display_name(m)} n = {ns[m]}" for m in models))
                  + f"; {len(next(iter(rk.values()), []))} matrices: median dotted, interquartile range as a grey "
                  "band, which at these sizes is often thinner than the line). Panel titles: the median over inputs of κ(R)/bound for the whole "
                  "rollout. κ near 0 means every row is nearly alike (every token attends in nearly the same way, as in "
                  "near-uniform attention), where the layer bound is nearly tight in value for any matrix; κ near 1 "
                  "means two tokens attend to nearly disjoint sets.",
                  f"Line plots of kappa of the attention against layer, one panel per model ({', '.join(map(display_name, models))}), "
                  "trained in blue, untrained in orange, random matrices as a dotted grey line.", len(models))
        lines, explained = [], False
        gap = rollout_gap(self.roll[self.roll["model"].isin(models)]) if len(self.roll) else pd.DataFrame()
        for m in models:
            for w, g in c[c["model"] == m].groupby("weights", sort=False):
                per = g.groupby("layer")["kappa"].median()
                fr = float(g["holds"].mean())
                s = (f"- {display_name(m)}, {weights_label(w)}: median κ(A) per layer {value_range(per)} "
                     f"(random matrices of n = {ns[m]}: {np.median(rk[m]):.2f}); the condition holds on {pct(fr)}")
                s += uniformity_clause(per, fr, g.groupby("layer")["holds"].mean())
                gg = gap[(gap["model"] == m) & (gap["weights"] == w) & (gap["variant"] == "content")] if len(gap) else gap
                if len(gg):
                    r = gg.iloc[0]
                    s += (f". Whole rollout: median κ(R)/bound {r['ratio']:.2f} = κ(R)/∏κ(F_ℓ) {r['submult']:.2f} × "
                          f"∏κ(F_ℓ)/bound {r['layers']:.2f} (median {int(r['tight'])} of {int(r['L'])} layers tight)")
                    if r["layers"] > 0.95 and r["ratio"] < 0.8:
                        s += (f"; the per-layer bounds lose almost nothing, so the {1 / r['ratio']:.1f}-fold gap is "
                              "the slack of submultiplicativity, κ(F_L⋯F_1) < ∏κ(F_ℓ)")
                        if not explained:  # why, once per paragraph
                            s += (": the product bound assumes that each factor contracts the row differences left "
                                  "by the factors before it as little as it contracts its own worst pair, and the "
                                  "worst pairs of successive layers are not aligned that way")
                            explained = True
                lines.append(s + ".")
        _md("**What κ(A) says.**\n\n" + "\n".join(lines))

    # ------------------------------------------------------------------ §1 diagonal structure
    def structure(self, n_items: Optional[int] = None):
        """Mean diagonal vs off-diagonal attention and the share of mutually self-dominant pairs, per model and
        weights on ``n_items`` inputs, against random matrices of the same n; and which untrained controls are
        the same network (same architecture and seed)."""
        from ..experiments.structure import diagonal_structure, random_structure
        from ..models.loading import load_model
        from .results_loading import baseline_for

        if not len(self.table) or self.input_set is None:
            return
        if n_items is None:  # sentences are short: more of them; photos at full size are costly in large models
            n_items = 8 if self.kind == "text" else 2
        items = self.input_set.items(0, max(1, int(n_items)))
        base = baseline_for(self.table, self.results)
        c = self.table[self.table["variant"] == "content"]
        rows, prints = [], {}
        for r in self.runs:
            m = r.model_id
            if plots_sep(m):
                continue
            for w, info in r.runs.items():
                if info.get("status") != "ok":
                    continue
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        lm = load_model(m, pretrained=(w == "pretrained"), seed=self.config.seed, image_size=self.config.image_size,
                                        max_length=self.config.max_length)
                        st = diagonal_structure(lm, items)
                except Exception as e:  # noqa: BLE001 — a model that cannot be reloaded is named, not hidden
                    _md(f"{display_name(m)}, {weights_label(w)}: not re-measured ({type(e).__name__}: {e}).")
                    continue
                if w == "untrained":
                    prints[m] = fingerprint(lm.model)
                del lm
                n = int(st["n_tokens"].median())
                rnd = random_structure(n, count=64, seed=self.config.seed)
                rows.append({"model": display_name(m), "weights": "trained" if w == "pretrained" else "untrained",
                             "n": n, "self ×n": float(st["diag_x_n"].mean()), "excess (sd)": float(st["excess_sd"].mean()),
                             "MSD pairs": float(st["msd_all_pairs"].mean()),
                             "holds": float(c.loc[(c["model"] == m) & (c["weights"] == w), "holds"].mean()),
                             "random MSD": rnd["msd_all_pairs"], "random holds": base.get(m, rnd["holds"]),
                             "random excess": rnd["excess_sd"]})
        if not rows:
            return
        df = pd.DataFrame(rows)
        shown = df.drop(columns=["random MSD", "random holds", "random excess"]).assign(
            random=[f"{pct(a)} / {pct(b)}" for a, b in zip(df["random MSD"], df["random holds"])])
        _display(F.table(shown, name=f"tab-{self.notebook}-structure",
                         formats={"MSD pairs": pct, "holds": pct, "excess (sd)": "+.2f"},
                         caption=f"The diagonal of the attention on the first "
                                 f"{'input' if len(items) == 1 else f'{len(items)} inputs'} (content tokens, rows "
                                 "renormalised, mean over layers). self ×n: the mean $A_{ii}$ times n (1 = uniform); "
                                 "excess (sd): how far the diagonal lies above the off-diagonal entries, in standard "
                                 "deviations of the off-diagonal entries; MSD pairs: the share of all token pairs "
                                 "(i, j) that are mutually self-dominant (these three on the first inputs); holds: the "
                                 "share of all the chapter's (input, layer) pairs where a κ-attaining pair is mutually "
                                 "self-dominant (the condition holds); random: "
                                 "the share of mutually self-dominant pairs in 64 Dirichlet(1) matrices of the same n, "
                                 "and the random baseline of the condition at that n."))
        tr = df[df["weights"] == "trained"]
        if len(tr):
            _md("With trained weights: " + "; ".join(
                f"in {r['model']} a token gives itself {r['self ×n']:.2g} times the uniform share "
                f"(diagonal excess {r['excess (sd)']:+.2f} sd) and {pct(r['MSD pairs'])} of all pairs are "
                f"mutually self-dominant (random: {pct(r['random MSD'])}), so the κ-attaining pair is one in "
                f"{pct(r['holds'])} of the chapter's pairs" for _, r in tr.iterrows())
                + ". Where nearly every pair is mutually self-dominant, the condition holds whichever pair attains κ: "
                  "tightness then follows from strong self-attention; where almost no pair is, it cannot hold.")
        u = df[df["weights"] == "untrained"]
        if len(u):
            ex = u[u["excess (sd)"] > 0.1]  # random matrices: |excess| ≤ 0.05
            flat = u.drop(index=ex.index)
            s = (f"Random matrices first: with exchangeable entries, each of $A_{{ii}} \\ge A_{{ji}}$ and "
                 f"$A_{{jj}} \\ge A_{{ij}}$ is a coin flip, so about a quarter of all pairs are mutually self-dominant "
                 f"({_prng(u['random MSD'])} here; diagonal excess {value_range(u['random excess'])} sd), and a "
                 f"κ-attaining pair about as often (the random baseline at these n: {_prng(u['random holds'])}). ")
            if len(ex):
                s += (f"The untrained attention of {', '.join(ex['model'])} is nearly uniform (self ×n "
                      f"{value_range(ex['self ×n'])}), but its diagonal stands {value_range(ex['excess (sd)'])} standard deviations "
                      f"of the off-diagonal entries above them: the score of a token with itself is a quadratic form "
                      f"$x_i^\\top W_q^\\top W_k x_i$ of one vector, and its size relative to the scores with other tokens "
                      f"depends on the random weights, so controls of different shapes need not agree. That makes "
                      f"{_prng(ex['MSD pairs'])} of all pairs mutually self-dominant, and "
                      + ("far more of the " if bool((ex["holds"] > ex["MSD pairs"] + 0.05).all()) else "about as many of the ")
                      + f"κ-attaining pairs ({_prng(ex['holds'])} of the chapter's pairs): the attaining pair "
                      f"is the pair of most different rows, and in near-uniform attention a diagonal entry above the "
                      f"rest is what makes two rows differ, in exactly the direction that makes the pair "
                      f"self-dominant. ")
            if len(flat):
                s += (f"In {', '.join(flat['model'])} untrained the diagonal does not stand out (excess "
                      f"{value_range(flat['excess (sd)'])} sd) and {_prng(flat['MSD pairs'])} of all pairs are mutually "
                      f"self-dominant; the condition holds on {_prng(flat['holds'])} of the chapter's pairs, "
                      f"against {_prng(flat['random holds'])} for random matrices of the same n.")
                high = flat[flat["holds"] > flat["random holds"] + 0.05]
                if len(high):  # said, not explained away: the averages here do not account for it
                    s += (f" For {', '.join(high['model'])} that is well above the random baseline although the "
                          f"average diagonal does not stand out: the averages measured here (over the first "
                          f"{len(items)} input{'' if len(items) == 1 else 's'} and every layer) do not explain it, "
                          "and this chapter leaves it open.")
            _md(s)
        groups = {}
        for m, fp in prints.items():
            groups.setdefault(fp, []).append(m)
        same = [g for g in groups.values() if len(g) > 1]
        c = self.table[(self.table["variant"] == "content") & (self.table["weights"] == "untrained")]
        for g in same:
            counts = "; ".join(f"{display_name(m)} {int(c.loc[c['model'] == m, 'holds'].sum())}/"
                               f"{int((c['model'] == m).sum())}" for m in g)
            rows = [c[c["model"] == m].sort_values(["input_id", "layer"])[["input_id", "layer", "kappa", "holds"]]
                    .reset_index(drop=True) for m in g]
            alike = all(len(r) == len(rows[0]) and r.equals(rows[0]) for r in rows[1:])
            _md(f"The untrained controls of {' and '.join(display_name(m) for m in g)} are **the same network**: the "
                f"same architecture initialised with the same seed ({self.config.seed}) gives identical weights (SHA-256 of "
                f"every tensor: {next(iter(k for k, v in groups.items() if v == g))[:12]}… for each). "
                + (f"Their tables on content tokens are identical, row for row ({counts}): they see the photos "
                   "prepared the same way too; " if alike else
                   f"Their tables on content tokens ({counts}) are not identical row for row, so what the network "
                   "is given differs between the two runs ("
                   + ("each model's own image processor prepares the photos: the network sees different pixels"
                      if self.kind == "image" else
                      "each model's own tokenizer prepares the sentences, so the tokens may differ")
                   + "); ")
                + ("they are one control, not two." if alike else
                   "they are one untrained network seen through two preprocessings, not two independent controls."))

    # ------------------------------------------------------------------ §2 the failure atlas
    def atlas(self, n_random: int = 1):
        """For each featured model and variant, failing cases (largest slack, then ``n_random`` seeded random
        ones) and one holding case, drawn on the input with the κ-attaining pair and its margins."""
        from ..experiments.atlas import RULES, cases_frame, choose_cases, recompute
        from ..models.loading import load_model
        from .kappa_figures import atlas_figure

        if not len(self.table) or self.input_set is None:
            return
        all_cases = []
        for m in [x for x in self.featured if not plots_sep(x)]:
            run = next(r for r in self.runs if r.model_id == m)
            ws = ["pretrained"] if self._trained_ok(run) else ["untrained"]
            t = self.table[self.table["model"] == m]
            if ws == ["pretrained"] and not (~t.loc[t["weights"] == "pretrained", "holds"]).any() \
                    and (t["weights"] == "untrained").any():
                ws.append("untrained")  # no trained failure to draw: the control's failures for contrast
            chosen = pd.concat([choose_cases(self.table, model=m, weights=w, variant=v, seed=self.config.seed,
                                             n_random=n_random) for w in ws for v in ("content", "with_special")],
                               ignore_index=True)
            if not len(chosen):
                continue
            cases = []
            for w in ws:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lm = load_model(m, pretrained=(w == "pretrained"), seed=self.config.seed, image_size=self.config.image_size,
                                    max_length=self.config.max_length)
                    cases += recompute(lm, self.input_set, chosen[chosen["weights"] == w])
                del lm
            all_cases += cases
            fig = atlas_figure(cases)
            what = "photo as the model sees it (after its preprocessing), the two patches outlined" \
                if self.kind == "image" else ("sentence as the model's tokens (· starts a word piece that continues the previous "
                                           "token; special tokens in grey italics), the two tokens highlighted")
            from .kappa_figures import SPECIAL_NAMES

            special = [f"{'trained' if k.weights == 'pretrained' else 'untrained'}, {RULES[k.rule]} case, "
                       f"layer {k.layer + 1}: "
                       + " and ".join(f"{'ij'[q]} is {SPECIAL_NAMES.get(role, role)}"
                                      for q, role in enumerate((k.role_i, k.role_j)) if role != "content")
                       for k in cases if (k.role_i, k.role_j) != ("content", "content")]
            tw = t[t["weights"].isin(ws)]
            nfail = {(w, v): int((~g["holds"]).sum()) for (w, v), g in tw.groupby(["weights", "variant"], sort=False)}
            counts = "; ".join(f"{'trained' if w == 'pretrained' else 'untrained'}, "
                               f"{'content' if v == 'content' else 'with special'}: {k} failing of "
                               f"{int(((tw['weights'] == w) & (tw['variant'] == v)).sum())}"
                               for (w, v), k in nfail.items())
            extra = (" The trained weights fail on no (input, layer) pair, so the untrained control's cases follow "
                     "for contrast." if "untrained" in ws and ws[0] == "pretrained" else "")
            self._fig(fig, f"atlas-{_key(m)}",
                      f"Failure atlas of {display_name(m)}. Cases chosen by this rule, per weights and variant: the "
                      f"failing (input, layer) pair of largest slack, then {n_random} failing pair(s) drawn with "
                      f"numpy's default_rng({self.config.seed}), then one holding pair drawn with the same generator "
                      f"(failing pairs available: {counts}).{extra} Each panel shows the {what}: token i vermillion, "
                      "token j green, the κ-attaining pair (among several attaining pairs, the mutually self-dominant "
                      "one when there is one, else the nearest miss). Margins: i = $A_{ii}-A_{ji}$, "
                      "j = $A_{jj}-A_{ij}$; the pair is mutually self-dominant exactly when both are ≥ 0"
                      + (f". Special tokens in the pair: {'; '.join(special)}." if special else
                         ". No special token is in any drawn pair."),
                      f"Panels of the {'photos' if self.kind == 'image' else 'sentences'} of {display_name(m)} with "
                      "two tokens marked in each.", 3)
        if not all_cases:
            return
        cf = cases_frame(all_cases)
        agree = int((cf["holds"] == cf["table_holds"]).sum())
        f = cf[~cf["holds"]]
        both = int(((f["margin_i"] < 0) & (f["margin_j"] < 0)).sum())
        _md(f"Recomputed from the models for the atlas: {len(cf)} cases; the recomputed verdict agrees with the "
            f"result table in {agree} of them."
            + (f" Of the {len(f)} drawn failing cases, {both} fail on both margins and {len(f) - both} on one: "
               "there the pair is one-sidedly dominated (one token attends to the other more than the other "
               "attends to itself)." if len(f) else ""))
        atomic_write_csv(self.store.dir / "atlas.csv", cf)

    # ------------------------------------------------------------------ §3 MPNet ablation
    def mpnet_ablation(self, n_sentences: int = 16, subject: str = MPNET):
        """Set MPNet's distance-0 relative position bias to the mean of distance ±1 and measure again (trained
        and untrained), with the cosine of the sentence embeddings to the original."""
        from ..experiments.ablation import run_ablation
        from ..models.loading import load_model

        if self.input_set is None or subject not in self.params.models:
            return
        texts = self.input_set.items(0, int(n_sentences))
        res = {}
        for w in ("pretrained", "untrained"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lm = load_model(subject, pretrained=(w == "pretrained"), seed=self.config.seed,
                                    max_length=self.config.max_length)
                    res[w] = run_ablation(lm, texts)
            except Exception as e:  # noqa: BLE001 — missing weights are stated, not hidden
                _md(f"{display_name(subject)}, {weights_label(w)}: ablation not run ({type(e).__name__}: {e}).")
        if "pretrained" not in res:
            return
        lay = pd.concat([r.layers for r in res.values()], ignore_index=True)
        atomic_write_csv(self.store.dir / "mpnet-ablation.csv", lay)
        tr = res["pretrained"]
        L = tr.layers
        c = L[L["variant"] == "content"]
        o, a = c[c["condition"] == "original"], c[c["condition"] == "ablated"]
        ws = L[L["variant"] == "with_special"]
        k0, n0 = int(o["k"].sum()), int(o["n"].sum())
        k1, n1 = int(a["k"].sum()), int(a["n"].sum())
        s0, s1 = int(ws.loc[ws["condition"] == "original", "k"].sum()), int(ws.loc[ws["condition"] == "ablated", "k"].sum())
        nw = int(ws.loc[ws["condition"] == "original", "n"].sum())
        info = tr.info
        cos = tr.cosine
        from .plots import panel_grid

        fig, axes = panel_grid(2, 2, panel=(3.4, 2.6), sharey=False)
        for cond, style in (("original", "-"), ("ablated", "--")):
            for w, r in res.items():
                cc = r.layers[(r.layers["variant"] == "content") & (r.layers["condition"] == cond)]
                col = F.COLORS["trained" if w == "pretrained" else "untrained"]
                lab = f"{'trained' if w == 'pretrained' else 'untrained'}, {cond}"
                axes[0].plot(cc["layer"] + 1, cc["fraction"], ls=style, color=col, marker="o", ms=3, label=lab)
                axes[1].plot(cc["layer"] + 1, cc["mean_self"], ls=style, color=col, marker="o", ms=3, label=lab)
        axes[0].set_ylabel("fraction holding")
        axes[0].set_ylim(-0.03, 1.03)
        axes[1].set_ylabel("mean $A_{ii}$ (content)")
        axes[1].set_yscale("log")
        for ax in axes:
            ax.set_xlabel("layer")
        h, lab = axes[0].get_legend_handles_labels()
        fig.legend(h, lab, loc="outside lower center", ncols=2, frameon=False)
        u = res.get("untrained")
        self._fig(fig, "mpnet-ablation",
                  f"{display_name(subject)} with its distance-0 relative position bias set to the mean of the "
                  f"distance −1 and +1 buckets (ablated, dashed) against the original (solid), on the first "
                  f"{len(texts)} sentences, content tokens. Left: fraction of sentences where the condition holds, "
                  "per layer. Right: mean head-averaged self-attention $A_{ii}$ (log axis). Blue: trained weights; "
                  "orange: the untrained control.",
                  "Two line plots against layer: fraction holding and mean self-attention, original solid and "
                  "ablated dashed, trained in blue and untrained in orange.", 2)
        ou = u.layers[(u.layers["variant"] == "content")] if u is not None else None
        verdict, restores = ablation_verdict(k0, n0, k1, n1, float(info["before"].mean()))
        text = (f"**The ablation.** In {display_name(subject)} the learned bias of distance 0 (bucket "
                f"{info['buckets'][0]}) is {info['before'].mean():.2f} on average over the {len(info['before'])} heads "
                f"(range {info['before'].min():.2f} to {info['before'].max():.2f}), against "
                f"{info['minus1'].mean():.2f} at distance −1 (bucket {info['buckets'][-1]}) and "
                f"{info['plus1'].mean():.2f} at +1 (bucket {info['buckets'][1]}). Setting it to the mean of the "
                f"two, {info['after'].mean():.2f} on average, and changing nothing else, the condition holds on "
                f"content tokens on **{k1} of {n1}** (sentence, layer) pairs instead of {k0} of {n0} "
                f"({pct(k1 / n1)} against {pct(k0 / n0)}), and with the special tokens on {s1} of {nw} instead of "
                f"{s0}. The mean self-attention {'rises' if a['mean_self'].mean() > o['mean_self'].mean() else 'falls'} from "
                f"{_srng(o['mean_self'])} to {_srng(a['mean_self'])} per layer. "
                f"The sentence embeddings (mean-pooled last hidden states, as sentence-transformers pools this "
                f"model) change {'little' if cos.min() >= 0.9 else 'noticeably'}: cosine to the original median "
                f"{np.median(cos):.3f}, lowest {cos.min():.3f}. " + verdict)
        if ou is not None:
            uo, ua = ou[ou["condition"] == "original"], ou[ou["condition"] == "ablated"]
            text += (f" The untrained MPNet (bias initialised near 0: distance-0 mean {u.info['before'].mean():.3f}) "
                     f"holds on {int(uo['k'].sum())} of {int(uo['n'].sum())} pairs, and {int(ua['k'].sum())} after the "
                     f"same ablation (cosine median {np.median(u.cosine):.4f}; in an untrained model even this small "
                     "change of the scores can move close cases)"
                     + (": training made the bias, and the bias makes the failures." if restores else "."))
        _md(text)
        per = (c.pivot_table(index="layer", columns="condition", values=["k", "mean_self"]).reset_index())
        per.columns = [" ".join(x for x in col if x).strip() for col in per.columns]
        shown = pd.DataFrame({"layer": per["layer"] + 1, "holds (original)": per["k original"].astype(int),
                              "holds (ablated)": per["k ablated"].astype(int),
                              "self (original)": per["mean_self original"],
                              "self (ablated)": per["mean_self ablated"]})
        _display(F.table(shown, name=f"tab-{self.notebook}-mpnet-ablation",
                         caption=f"{display_name(subject)} (trained), per layer: sentences (of {len(texts)}) where the "
                                 "condition holds on content tokens, and the mean self-attention $A_{ii}$ (self), before "
                                 "and after the ablation."))
        atomic_write_json(self.store.dir / "mpnet-ablation.json", {
            "model": subject, "sentences": len(texts), "bias0": float(info["before"].mean()),
            "bias_minus1": float(info["minus1"].mean()), "bias_plus1": float(info["plus1"].mean()),
            "content_original": [k0, n0], "content_ablated": [k1, n1], "special_original": [s0, nw],
            "special_ablated": [s1, nw], "cosine_median": float(np.median(cos)), "cosine_min": float(cos.min()),
            "untrained_original": [int(ou.loc[ou["condition"] == "original", "k"].sum()),
                                   int(ou.loc[ou["condition"] == "original", "n"].sum())] if ou is not None else None})

    # ------------------------------------------------------------------ a chapter with no trained weights
    def overview(self):
        """A chapter whose trained weights may be missing (supervised ViTs): when none was measured, one table and
        one figure of the untrained controls and what the controls are (:meth:`structure`); when some were, every
        section in turn (fractions, depth, slack, heads, rollout, κ(A), structure, atlas, controls)."""
        from .tables import fractions

        if not len(self.table):
            _md("No model could be measured in this build.")
            return
        if any(self._trained_ok(r) for r in self.runs):
            for title, fn in (("How often the condition holds", self.fractions), ("Where in depth", self.depth),
                              ("The slack of the layer bound", self.slack), ("Individual heads", self.heads),
                              ("The whole rollout", self.rollout), ("κ(A) per layer", self.kappa_profile),
                              ("The diagonal of the attention", self.structure), ("Failure atlas", self.atlas),
                              ("Untrained controls", self.controls)):
                _md(f"**{title}.**")
                fn()
            return
        summ = fractions(self.table, ("model", "weights", "variant"))
        atomic_write_csv(self.results / self.notebook / "fractions.csv", summ)
        self._fractions_table(summ, "Untrained controls (no trained weights were measured in this build): fraction of "
                                    "(input, layer) pairs where the equality condition holds, content tokens and with "
                                    "special tokens.", f"tab-{self.notebook}-controls")
        self._depth_figure(self.table, [r.model_id for r in self.runs if len(r.table)], "controls",
                           "Untrained controls")
        self.structure()

    # ------------------------------------------------------------------ §4 downloads
    def downloads(self):
        """Links to the chapter's result files (tables, fractions, atlas, ablation) and the summary's."""
        links = download_links(self.results, self.notebook)
        if links:
            _md("**Result files of this chapter** (download): " + ", ".join(links) + ".")


def tabular_atlas(runs, trained, *, attention_rows, split_seed: int, results_dir=None, n_random: int = 1):
    """The failure atlas of the tabular chapter: for each trained FT-Transformer (``runs`` and ``trained`` as the
    notebook keeps them, keyed by (data set, seed)), the cases of :func:`dobrushin.experiments.atlas.choose_cases`
    recomputed on those test rows and drawn as the row's tokens ([CLS] and one per feature, with the value the model
    sees), the two features of the κ-attaining pair highlighted."""
    from ..experiments.atlas import cases_frame, choose_cases, recompute
    from ..experiments.tabular import TabularInputs, TabularModel
    from ..models import ft_transformer as tb
    from .kappa_figures import atlas_figure

    drawn = []
    for key, run in runs.items():
        if key not in trained or not len(run.table):
            continue
        d, r = trained[key]
        rows = tb.select_rows(d.size("test"), attention_rows, seed=split_seed)
        inputs = TabularInputs(d, "test", rows)
        lm = TabularModel(r.model, inputs.preprocess, run.model_id, "pretrained", {})
        chosen = pd.concat([choose_cases(run.table, model=run.model_id, weights="pretrained", variant=v,
                                         seed=split_seed, n_random=n_random) for v in ("content", "with_special")],
                           ignore_index=True)
        if not len(chosen):
            continue
        cases = recompute(lm, inputs, chosen)
        drawn += cases
        name = display_name(run.model_id)
        F.figure(atlas_figure(cases), notebook="tabular", name=f"atlas-{_key(name)}", width="full",
                 results_dir=results_dir,
                 caption=f"Failure atlas of {name} (trained here). Rows: content tokens (features), then with [CLS]. "
                         "Cases chosen by this rule, per variant: the failing (test row, layer) pair of largest slack, "
                         f"then {n_random} failing pair(s) drawn with numpy's default_rng({split_seed}), then one holding "
                         "pair drawn with the same generator. Each panel shows the row as the model's tokens: [CLS], "
                         "then each feature as name=value (numeric features quantile-normalised as the model sees "
                         "them, categorical ones as their code); feature i vermillion, feature j green, the "
                         "κ-attaining pair. Margins: i = $A_{ii}-A_{ji}$, j = $A_{jj}-A_{ij}$; the pair is mutually "
                         "self-dominant exactly when both are ≥ 0.",
                 alt=f"Panels of test rows of {name} as lists of features, two features highlighted in each.")
    if drawn:
        cf = cases_frame(drawn)
        agree = int((cf["holds"] == cf["table_holds"]).sum())
        _md(f"Recomputed for the atlas: {len(cf)} cases; the recomputed verdict agrees with the result table in "
            f"{agree} of them.")


def show_downloads(notebook: str, results_dir=None):
    """Display the download links of ``notebook``'s result files (for the chapters that are not
    :class:`~dobrushin.report.chapter.FamilyChapter` notebooks)."""
    from ..store.paths import results_dir as default

    links = download_links(Path(results_dir) if results_dir else default(), notebook)
    if links:
        _md("**Result files of this chapter** (download): " + ", ".join(links) + ".")


def _key(model_id: str) -> str:
    """A figure-name fragment for ``model_id``: lower-case letters, digits and single hyphens."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", str(model_id).lower()).strip("-") or "model"


def plots_sep(model_id: str) -> bool:
    from .plots import RESOLUTION_SEP

    return RESOLUTION_SEP in str(model_id)


def download_links(results_dir, notebook: str, page_dir: str = "executed") -> list:
    """MyST ``{download}`` roles for ``results/<notebook>/*`` (parquet and csv) and ``results/summary.csv`` /
    ``scorecard.csv``, with paths relative to the executed notebooks' folder (``../results/...``), so Sphinx copies
    them into the built book's ``_downloads``.  The chapter's own files are listed as they exist; the two summary
    files always (the summary notebook writes them before the book is built)."""
    root = Path(results_dir)
    try:
        rel = Path("..") / root.resolve().relative_to(_project_root().resolve())
    except (ValueError, TypeError):
        return []
    files = sorted(p for p in (root / notebook).glob("*") if p.suffix in (".parquet", ".csv") and not p.name.startswith("."))
    # the summary notebook writes these after the family chapters run; the book is built after it
    files += [root / f for f in ("summary.csv", "scorecard.csv")]
    out = []
    for p in files:
        r = (rel / p.relative_to(root)).as_posix()
        out.append(f"{{download}}`{p.name} <{r}>`")
    return out


def _project_root():
    from ..store.paths import project_root

    return project_root()


__all__ = ["InsightSections", "MPNET", "download_links", "fingerprint", "rollout_gap", "show_downloads", "tabular_atlas",
           "uniformity_clause", "value_range"]
