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
from attnviz.analysis.views import visible_token
from attnviz.plots.patching import layer_column, residual_heatmap
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus, set_focus
from attnviz.ui.guard import guarded, public_message, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.patch_estimate import estimate_section
from attnviz.ui.readout import spaced_hint
from attnviz.ui.tokens import shown_tokens
from attnviz.ui.url_state import MAX_TEXT, MAX_TOKEN_TEXT
from attnviz.ui.widgets import head_grid
from attnviz.workbench import patching as work
from attnviz.workbench.patching import builtin_patch_pairs

TYPED = "typed"  # the selectbox's first option: the Sentence and the Second sentence above


@functools.cache
def _builtin() -> dict:
    return {spec.id: spec for spec in builtin_patch_pairs()}


def _pick(prefix: str) -> None:
    """A built-in pair fills the clean and corrupted boxes, and its target and contrast become the focus's."""
    spec = _builtin().get(st.session_state.get(f"{prefix}_pair"))
    if spec is not None:
        st.session_state.update({f"{prefix}_clean": spec.clean, f"{prefix}_corrupt": spec.corrupt})
        set_focus(target=spec.target, contrast=spec.contrast)


# Agreement's tokens, while the focus has no target or contrast of its own.
DEFAULT_TARGET, DEFAULT_CONTRAST = " are", " is"
# A clean-minus-corrupted difference smaller than this (logits) is too small to normalise by: every cell is
# divided by it, so noise reads as a large effect.
MIN_GAP = 0.25


def pair_prefixes(model, text: str, second: str, position: int | None) -> tuple[str, str]:
    """The pair's default: each text up to the read position (its token included), the second text cut at
    as many tokens; the whole texts while no position is set. The prediction read there is the one patched:
    a pair that runs on past the verb reads a prediction after "table.", not the verb's."""
    if position is None:
        return text, second
    cut = []
    for one in (text, second):
        if not one:
            cut.append(one)
            continue
        offsets = model.encode(one).offsets
        end = max((e for _, e in offsets[:position + 1]), default=len(one))
        cut.append(one[:end] if end else one)
    return cut[0], cut[1]


def pair_inputs(model, source: str, prefix: str) -> tuple:
    """A minimal pair's boxes, as patching ("patch") and the circuit of heads ("circuit") show them, their widget
    keys `{prefix}_...`: the focus's pair up to its read position (again whenever it changes), a built-in pair, the
    clean and corrupted sentences, the target and contrast (the focus's). Returns (left, right, clean, corrupt,
    target, contrast): the two columns, for what a section adds under them, and the texts."""
    now = focus()
    seeded = (source, now.text, now.text_b, now.pos)
    if st.session_state.get(f"_{prefix}_seeded") != seeded:
        st.session_state[f"_{prefix}_seeded"] = seeded
        clean, corrupt = pair_prefixes(model, now.text, now.text_b, now.pos)
        st.session_state.update({f"{prefix}_clean": clean, f"{prefix}_corrupt": corrupt})
    labels = {pid: f"{pid}: {spec.clean} / {spec.corrupt} → {visible_token(spec.target)} / "
                   f"{visible_token(spec.contrast)}" for pid, spec in _builtin().items()}
    st.selectbox(t("patch_builtin"), list(labels), index=None, key=f"{prefix}_pair", format_func=labels.get,
                 on_change=_pick, args=(prefix,), placeholder="…")
    left, right = st.columns(2)
    # As long as the sentence boxes they are cut from; work.pair_of bounds the tokens.
    clean = left.text_input(t("patch_clean"), key=f"{prefix}_clean", max_chars=MAX_TEXT)
    corrupt = right.text_input(t("patch_corrupt"), key=f"{prefix}_corrupt", max_chars=MAX_TEXT)
    target = left.text_input(t("patch_target"), help=t("patch_token_help"), max_chars=MAX_TOKEN_TEXT,
                             **bound(f"{prefix}_target", "target", shown=now.target or DEFAULT_TARGET))
    contrast = right.text_input(t("patch_contrast"), help=t("patch_token_help"), max_chars=MAX_TOKEN_TEXT,
                                **bound(f"{prefix}_contrast", "contrast", shown=now.contrast or DEFAULT_CONTRAST))
    spaced_hint(model, target, "target", f"{prefix}_target", left)
    spaced_hint(model, contrast, "contrast", f"{prefix}_contrast", right)
    return left, right, clean, corrupt, target, contrast


def patching_section(model, source: str) -> None:
    with st.expander(t("patch_title")):
        st.caption(t("patch_caption"))
        if not model.info.causal and not model.info.mlm_head:
            st.caption(t("patch_embedding_metric"))
        _, _, clean, corrupt, target, contrast = pair_inputs(model, source, "patch")
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
    if model.info.causal or model.info.mlm_head:  # a logit difference to take the gradient of
        estimate_section(model, inputs, result)
        st.markdown(t("patch_exact_title"))
    if result is None:
        result = heavy_action(
            "patch_run", t("patch_run"), inputs,
            lambda job: work.patch(bench, model, *inputs, progress=job.progress),
            lambda done, total: t("patch_progress", done=done, total=total))
        if result is None:
            return
    st.caption(t("patch_values", clean=result.clean_value, corrupt=result.corrupt_value))
    pair_guards(model, result)
    text = plot_text()
    receiving = result.pair.corrupt_ids if result.direction == "denoise" else result.pair.clean_ids
    tokens = shown_tokens(model, receiving)
    grid_col, mlp_col = st.columns([4, 1])
    figure = plots.score_grid(np.asarray(result.heads), t("patch_heads_title"), diverging=True, text=text)
    head_grid(grid_col, figure, "patch_grid", in_fragment=True)
    mlp_col.plotly_chart(layer_column(np.asarray(result.mlps), t("patch_mlps_title"), text), key="patch_mlps",
                         width="stretch")
    st.plotly_chart(residual_heatmap(np.asarray(result.residual), tokens, t("patch_residual_title"), text),
                    key="patch_residual", width="stretch")
    if np.isnan(result.residual).any():
        st.caption(t("patch_unaligned"))
    one_head(model, source, result, inputs, tokens)


def pair_guards(model, result) -> None:
    """What each run reads and where, and a warning when the pair cannot say what patching claims: the
    corrupted run prefers the target as much as the clean one, or the difference is too small to divide by."""
    pair = result.pair
    if pair.metric != "logit_diff":
        return
    clean_tokens, corrupt_tokens = shown_tokens(model, pair.clean_ids), shown_tokens(model, pair.corrupt_ids)
    scored = [shown_tokens(model, [i])[0] for i in (pair.target_id, pair.contrast_id) if i is not None]
    st.caption(t("patch_reads", clean=md(clean_tokens[pair.clean_position]), clean_at=pair.clean_position,
                 corrupt=md(corrupt_tokens[pair.corrupt_position]), corrupt_at=pair.corrupt_position,
                 tokens=md(" − ".join(scored))))
    gap = result.clean_value - result.corrupt_value
    if gap <= 0:
        st.warning(t("patch_reversed", clean=result.clean_value, corrupt=result.corrupt_value))
    elif gap < MIN_GAP:
        st.warning(t("patch_small_gap", gap=gap, least=MIN_GAP))


def one_head(model, source: str, result, inputs: tuple, tokens: list[str]) -> None:
    """The focus head (a click on the grid above, or on any grid, sets it) patched at one position at a time."""
    n_layers, n_heads = result.heads.shape
    layer, head = focus().layer, focus().head
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        layer, head = 0, 0
    st.markdown(t("patch_head_title", layer=layer, head=head, effect=float(result.heads[layer, head])))
    values = work.head_positions(workbench(), model, *inputs, layer, head)
    st.dataframe({t("patch_column_token"): tokens,
                  t("patch_column_effect"): [None if np.isnan(v) else round(float(v), 4) for v in values]},
                 hide_index=True, key="patch_positions")
