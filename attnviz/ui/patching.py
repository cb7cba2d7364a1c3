"""The Explore page's activation patching (interventions.patching): a clean and a corrupted sentence (the
"Compare two sentences" pair, or a built-in pair), a target and a contrast token, and how much of the clean
run's logit difference each head, each MLP and the residual stream at each position restores (denoising)
or destroys (noising). A heavy action (ui/heavy.py: progress, Cancel, the heavy-work slot), computed by
workbench.patching and shared."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.plots.patching import layer_column, residual_heatmap
from attnviz.ui.escape import md
from attnviz.ui.guard import guarded, public_message, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.widgets import head_grid
from attnviz.workbench import patching as work
from attnviz.workbench.patching import builtin_patch_pairs

TYPED = "typed"  # the selectbox's first option: the Sentence and the Second sentence above


@functools.cache
def _builtin() -> dict:
    return {spec.id: spec for spec in builtin_patch_pairs()}


def _pick() -> None:
    """A built-in pair fills the inputs (the clean, corrupted, target and contrast boxes)."""
    spec = _builtin().get(st.session_state.get("patch_pair"))
    if spec is not None:
        st.session_state.update(patch_clean=spec.clean, patch_corrupt=spec.corrupt, patch_target=spec.target,
                                patch_contrast=spec.contrast)


def patching_section(model, source: str) -> None:
    with st.expander(t("patch_title")):
        st.caption(t("patch_caption"))
        if not model.info.causal and not model.info.mlm_head:
            st.caption(t("patch_embedding_metric"))
        # First visit: the Compare two sentences pair, and agreement's tokens.
        state = st.session_state
        seeds = {"patch_clean": state.get("text", ""), "patch_corrupt": state.get("minpair_text", ""),
                 "patch_target": " are", "patch_contrast": " is"}
        for key, value in seeds.items():
            st.session_state.setdefault(key, value)
        labels = {pid: f"{pid}: {spec.clean} / {spec.corrupt} → {spec.target!r} / {spec.contrast!r}"
                  for pid, spec in _builtin().items()}
        st.selectbox(t("patch_builtin"), list(labels), index=None, key="patch_pair", format_func=labels.get,
                     on_change=_pick, placeholder="…")
        left, right = st.columns(2)
        clean = left.text_input(t("patch_clean"), key="patch_clean", max_chars=400)
        corrupt = right.text_input(t("patch_corrupt"), key="patch_corrupt", max_chars=400)
        target = left.text_input(t("patch_target"), key="patch_target", help=t("patch_token_help"), max_chars=100)
        contrast = right.text_input(t("patch_contrast"), key="patch_contrast", help=t("patch_token_help"),
                                 max_chars=100)
        direction = st.radio(t("patch_direction"), ("denoise", "noise"), horizontal=True, key="patch_direction",
                             format_func={d: t(f"patch_{d}") for d in ("denoise", "noise")}.get)
        patch_results(model, source, clean.strip(), corrupt.strip(), target, contrast, direction)


@st.fragment
@guarded
def patch_results(model, source: str, clean: str, corrupt: str, target: str, contrast: str, direction: str) -> None:
    if not clean or not corrupt:
        st.info(t("patch_empty"))
        return
    try:
        work.pair_of(model, clean, corrupt, target, contrast)
    except ValueError as error:
        st.warning(t("patch_refused", error=md(public_message(error, source))))
        return
    bench = workbench()
    inputs = (source, clean, corrupt, target, contrast, direction)
    result = work.result(bench, *inputs)
    if result is None:
        result = heavy_action(
            "patch_run", t("patch_run"), inputs,
            lambda job: work.patch(bench, model, *inputs, progress=job.progress),
            lambda done, total: t("patch_progress", done=done, total=total))
        if result is None:
            return
    st.caption(t("patch_values", clean=result.clean_value, corrupt=result.corrupt_value))
    text = plot_text()
    grid_col, mlp_col = st.columns([4, 1])
    figure = plots.score_grid(np.asarray(result.heads), t("patch_heads_title"), diverging=True, text=text)
    head_grid(grid_col, figure, "patch_grid", "patch_layer", "patch_head", in_fragment=True)
    mlp_col.plotly_chart(layer_column(np.asarray(result.mlps), t("patch_mlps_title"), text), key="patch_mlps",
                         width="stretch")
    st.plotly_chart(residual_heatmap(np.asarray(result.residual), list(result.tokens), t("patch_residual_title"),
                                     text), key="patch_residual", width="stretch")
    if np.isnan(result.residual).any():
        st.caption(t("patch_unaligned"))
    one_head(model, source, result, inputs)


def one_head(model, source: str, result, inputs: tuple) -> None:
    n_layers, n_heads = result.heads.shape
    best = np.unravel_index(int(np.nanargmax(np.abs(result.heads))), result.heads.shape)
    layer = int(st.session_state.get("patch_layer", best[0]))
    head = int(st.session_state.get("patch_head", best[1]))
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        layer, head = int(best[0]), int(best[1])
    st.markdown(t("patch_head_title", layer=layer, head=head, effect=float(result.heads[layer, head])))
    values = work.head_positions(workbench(), model, *inputs, layer, head)
    st.dataframe({t("patch_column_token"): list(result.tokens),
                  t("patch_column_effect"): [None if np.isnan(v) else round(float(v), 4) for v in values]},
                 hide_index=True, key="patch_positions")
