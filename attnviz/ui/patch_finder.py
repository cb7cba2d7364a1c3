"""The Head Finder page's "looks or matters" grid: beside each head's attention score on a relation
(subject-verb, coreference: the page's probe scores above), its activation-patching effect on the built-in
pairs of that relation (attnviz/probesets/patch_pairs.jsonl, denoising, the mean over the pairs this model
can score), drawn as Dodrio's grid: the size is the attention score, the colour the patching effect. The
patching is a heavy action computed by workbench.patching and shared by every visitor."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.analysis.scoring import DIRECTIONS
from attnviz.plots.patching import looks_and_matters
from attnviz.ui.escape import md
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.widgets import head_grid
from attnviz.workbench import head_finder
from attnviz.workbench import patching as work

RELATIONS = ("subject-verb", "coreference")
BUILTIN_SETS = ("builtin:en", "builtin:zh")  # the page's built-in sets (ui/head_finder.py)


def attention_grid(source: str, relation: str, shape: tuple[int, int]) -> np.ndarray | None:
    """[L, H]: the best of the two directions' scores of this relation, from this visitor's scores on the
    page or a built-in set's shared ones; None when nobody has scored it."""
    blocks = []
    stored = st.session_state.get("finder_result")
    if stored and stored[0].startswith(f"{source}|") and f"|{relation}|" in stored[0]:
        blocks.append(stored[1])
    bench = workbench()
    blocks += [b for b in (head_finder.shared_score(bench, source, name, relation) for name in BUILTIN_SETS) if b]
    for block in blocks:
        grids = [np.array(block[d], dtype=float) for d in DIRECTIONS if block.get(d) is not None]
        grids = [g for g in grids if g.shape == shape and not np.isnan(g).all()]
        if grids:
            return np.fmax.reduce(grids)
    return None


@st.fragment
@guarded
def looks_or_matters(model, source: str) -> None:
    st.subheader(t("finder_patch_title"))
    st.caption(t("finder_patch_caption"))
    relation = st.radio(t("finder_patch_relation"), RELATIONS, horizontal=True, key="finder_patch_relation",
                        format_func={r: t(f"relation_{r}") for r in RELATIONS}.get)
    bench = workbench()
    result = work.builtin_result(bench, source, relation)
    if result is None:
        result = heavy_action(
            "finder_patch_run", t("finder_patch_run"), (source, relation),
            lambda job: work.builtin_grid(bench, model, source, relation, progress=job.progress),
            lambda done, total: t("patch_progress", done=done, total=total))
        if result is None:
            return
    st.caption(t("finder_patch_pairs", pairs=md(", ".join(result["pairs"]) or "-"),
                 skipped=md("; ".join(f"{pid}: {why}" for pid, why in result["skipped"].items()) or "-")))
    if result["grid"] is None:
        st.info(t("finder_patch_none"))
        return
    effect = np.asarray(result["grid"])
    attention = attention_grid(source, relation, effect.shape)
    if attention is None:
        st.caption(t("finder_patch_no_scores"))
        attention = np.full(effect.shape, 0.5)
    figure = looks_and_matters(attention, effect, t(f"relation_{relation}"), t("finder_patch_size"),
                               t("finder_patch_colour"), plot_text())
    head_grid(st, figure, "finder_patch_grid", also={"finder_example_direction": "source_to_target"},
              in_fragment=True)
