"""The head detail of the Explore page, for a full or a long text: one head's heatmap and bertviz-style lines
over a window of tokens, the sentence-pair filter, the head's profile in numbers, its query-key view and its
CSV. A fragment: picking a layer, head, threshold or token reruns only this part."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis import export, profile_head, sentence_pairs
from attnviz.analysis.profile import has_learned_sinks, profile_map
from attnviz.analysis.sink import first_aside_positions
from attnviz.ui import attention_lenses as lens_ui
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.query_key import query_key_view
from attnviz.ui.url_state import seed_from_url, write_url
from attnviz.ui.widgets import head_picker
from attnviz.workbench import heads as head_work
from attnviz.workbench import traces, views
from attnviz.workbench.views import PER_LAYER


@st.fragment
@guarded
def head_detail(info, view_key, scale, palette, long: bool = False) -> None:
    """One head in detail, so the mosaic is neither rebuilt nor sent again when it changes. `long`: a long
    text's, drawn from its reduced trace (the window recomputed from the kept queries and keys, the profile
    from the pass's sums)."""
    st.subheader(t("head_detail"))
    bench, lens = workbench(), view_key[5]
    if long:
        trace = traces.held_reduced(bench, *view_key[:3])
        if trace is None:  # evicted since the page was drawn: the whole page computes it again
            st.rerun()
        all_labels, n_layers = traces.reduced_positions(bench, view_key).labels, info.n_layers
    else:
        view = views.view(bench, *view_key)  # shared: a lookup, not a recomputation
        trace = traces.trace(bench, *view_key[:3])
        all_labels, n_layers = view.labels, view.attentions.shape[0]  # a per-layer lens: one map per layer
    seed_from_url("threshold", 0.02)
    cols = st.columns([1, 1, 2, 2])
    layer, head = head_picker(cols, n_layers, info.n_heads, head_off=t("lens_head_disabled", lens=t(f"lens_{lens}"))
                              if lens in PER_LAYER else None)
    threshold = cols[2].slider(t("threshold"), 0.0, 0.5, step=0.01, key="threshold")
    window = token_window(len(all_labels))
    labels = all_labels[window]
    focus = focus_token(cols[3], labels, window.start)
    kv_note(info, trace, head)
    if long:
        view_head, matrix = head, traces.reduced_window(bench, view_key, layer, head, window)
    else:
        view_head = lens_ui.lens_head(head, lens)
        matrix = np.asarray(view.attentions[layer, view_head, window, window], dtype=np.float32)
    head_figures(info, matrix, sentence_pair(info, trace, view_key, window, labels, focus), scale, palette, threshold)
    detectors = head_work.detector_scores(bench, view_key[0])
    if long:  # the profile of the raw head, from the sums its pass kept (first token included)
        head_profile(trace, layer, head, detectors, stats=traces.reduced_profile(bench, view_key[:3]).head(layer, head))
    else:
        head_profile(trace, layer, head, detectors, views.lens_map(bench, *view_key[:3], lens, layer, head),
                     lens, view_key[7])
    query_key_view(info, trace, *view_key[:3], layer, head)
    if long:  # the window drawn: a whole head of 4,096 tokens would be a 100 MB CSV
        full, full_labels = traces.reduced_window(bench, view_key, layer, head, window), labels
        st.caption(t("download_csv_window", first=window.start, last=window.start + len(labels) - 1))
    else:
        full, full_labels = np.asarray(view.attentions[layer, view_head], dtype=np.float32), view.labels
    st.download_button(t("download_csv"), lambda: export.head_csv(full, full_labels),
                       file_name=f"attnviz_L{layer}_H{head}.csv", mime="text/csv", on_click="ignore", key="csv")
    write_url(threshold=threshold if threshold != 0.02 else None,
              start=window.start or None)


def focus_token(column, labels: list[str], start: int) -> int | None:
    """The token whose lines the head view singles out (an index into the window), or None for all."""
    all_tokens = t("all_tokens")
    return column.selectbox(
        t("focus_token"), [None, *range(len(labels))], key="focus",
        format_func=lambda i: all_tokens if i is None else f"{i + start}: {labels[i]}",
        placeholder=t("choose_option"))


def kv_note(info, trace, head: int) -> None:
    """Under grouped or multi-query attention: the KV head this head reads, and the heads that share it."""
    if trace.kv_group and info.n_kv_heads != info.n_heads:
        group = trace.kv_group[head]
        peers = [h for h, g in enumerate(trace.kv_group) if g == group and h != head]
        st.caption(t("kv_note", head=head, kv=group, peers=", ".join(map(str, peers)) or "-",
                     kind=info.attention_kind))


def head_figures(info, matrix, part, scale: str, palette: str, threshold: float) -> None:
    """The window's heatmap and its bertviz-style lines, side by side, as the sentence filter cut them."""
    matrix = part.take(matrix)
    left, right = st.columns([3, 2])
    if matrix.size == 0:
        st.info(t("pair_empty"))
        return
    left.plotly_chart(
        plots.head_heatmap(matrix, part.row_labels, part.col_labels, scale=scale, colorscale=palette,
                           causal=info.causal, text=plot_text(), row_divider=part.row_divider,
                           col_divider=part.col_divider),
        key="head_heatmap", width="stretch",
    )
    right.plotly_chart(plots.head_view(matrix, part.row_labels, part.col_labels, threshold=threshold,
                                       focus=part.focus_row, focus_in=part.focus_col,
                                       left_divider=part.row_divider, right_divider=part.col_divider),
                       key="head_view", width="stretch")


HEAD_WINDOW = 96  # tokens the head detail shows at once: beyond this, labels overlap and the figure grows


def token_window(n: int) -> slice:
    """The tokens the head detail shows: all of them, or a window of HEAD_WINDOW picked with a slider
    (rows and columns alike; the mosaic above always shows the whole input)."""
    if n <= HEAD_WINDOW:
        return slice(0, n)
    seed_from_url("window_start", 0, "start")
    st.session_state["window_start"] = min(st.session_state["window_start"], n - HEAD_WINDOW)
    start = st.slider(t("window"), 0, n - HEAD_WINDOW, key="window_start", step=1,
                      help=t("window_help", n=HEAD_WINDOW))
    return slice(start, start + HEAD_WINDOW)


def sentence_pair(info, trace, view_key, window: slice, labels: list[str], focus: int | None):
    """The sentence filter (encoders given a second sentence, as bertviz) and the line direction of the
    head detail: which rows and columns of the window its figures draw, where the sentences split, and
    the focused token's lines (sentence_pairs.slice_pair)."""
    seed_from_url("pair_filter", "all", "pair")
    seed_from_url("line_direction", "out", "lines")
    level, hide_special, first_aside = view_key[3], view_key[4], view_key[7]
    positions = first_aside_positions(trace, hide_special) if first_aside else trace
    sides = sentence_pairs.label_sentences(sentence_pairs.view_sequence(
        positions, level, hide_special or (first_aside and level == "token")))
    cols = st.columns(2)
    pair = "all"
    if not info.causal and view_key[2] is not None and sentence_pairs.is_pair(sides):
        options = list(sentence_pairs.PAIR_FILTERS)
        pair = cols[0].radio(t("pair_filter"), options, key="pair_filter", horizontal=True,
                             help=t("pair_filter_help"), format_func={v: t(f"pair_{v}") for v in options}.get)
    directions = sentence_pairs.LINE_DIRECTIONS
    direction = cols[1].radio(t("pair_lines"), directions, key="line_direction", horizontal=True,
                              help=t("pair_lines_help"), format_func={v: t(f"pair_lines_{v}") for v in directions}.get)
    part = sentence_pairs.slice_pair(sides[window], labels, pair, focus, direction)
    if focus is not None and part.focus_row is None and part.focus_col is None:
        st.caption(t("pair_focus_outside"))
    write_url(pair=pair if pair != "all" else None, lines=direction if direction != "out" else None)
    return part


def head_profile(trace, layer: int, head: int, detectors: dict | None = None, matrix=None, lens: str = "raw",
                 first_aside: bool = False, stats: dict | None = None) -> None:
    """What kind of head this is, in numbers (Clark et al. 2019 sec. 3; Voita et al. 2019), on the token-level
    map the page draws: the raw head, or the lens's map (`matrix`, analysis.profile.profile_map). The
    first-token share is read before the first token is set aside (after, it is 0 by construction)."""
    if stats is None:  # a long text's come from its reduced trace (analysis.profile_reduced)
        stats = profile_head(trace, layer, head) if matrix is None else profile_map(trace, matrix)
    st.markdown(f"**{t('profile')}**")
    if lens in PER_LAYER:
        st.caption(t("profile_of_layer_map", lens=t(f"lens_{lens}"), layer=layer))
    elif lens != "raw":
        st.caption(t("profile_of_lens_map", lens=t(f"lens_{lens}"), layer=layer, head=head))
    if first_aside:
        st.caption(t("profile_first_aside"))
    positional = (t("positional_yes", offset=f"{stats['positional_offset']:+d}") if stats["positional"]
                  else t("positional_no"))
    st.dataframe([{
        t("profile_entropy"): round(stats["entropy"], 3),
        t("profile_distance"): round(stats["mean_distance"], 2),
        t("profile_confidence"): round(stats["confidence"], 3),
        t("profile_special"): round(stats["special"], 3),
        t("profile_first_token"): round(stats["first"], 3),
        t("profile_previous"): round(stats["previous"], 3),
        t("profile_next"): round(stats["next"], 3),
        t("profile_self"): round(stats["self"], 3),
        t("profile_punctuation"): round(stats["punctuation"], 3),
        t("profile_positional"): positional,
        **({t("profile_sink_mass"): round(stats["sink_mass"], 3)} if has_learned_sinks(trace) else {}),
        **({} if lens in PER_LAYER else  # detector scores are of raw heads, not of a layer's map
           {t(f"detector_{name}"): round(float(grid[layer, head]), 3) for name, grid in (detectors or {}).items()}),
    }], hide_index=True)
