"""The Explore page: type a sentence, see every layer and head at once, zoom into one head."""

from __future__ import annotations

import functools
import html

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis import export, pair_filter, profile_head
from attnviz.analysis.profile import has_learned_sinks, profile_map
from attnviz.analysis.sink import FIRST_TOKEN_EPSILON, FirstTokenShare, first_aside_positions, first_token_share
from attnviz.analysis.views import token_labels, visible_token, word_runs
from attnviz.trace import ReducedTrace
from attnviz.ui import ablation
from attnviz.ui import lenses as lens_ui
from attnviz.ui import pairs as pairs_ui
from attnviz.ui.common import (
    MAX_TEXT,
    guarded,
    heavy_slot,
    over_budget_message,
    plot_text,
    public_message,
    seed_from_url,
    session_id,
    sidebar,
    stage_label,
    t,
    workbench,
    write_url,
)
from attnviz.ui.escape import md
from attnviz.ui.heavy import heavy_action
from attnviz.ui.kinds import kind_label
from attnviz.ui.strings import translate
from attnviz.ui.widgets import head_grid, position_input, word_pair_ranking
from attnviz.workbench import Busy, OverBudget, parity, shelf, traces
from attnviz.workbench import heads as head_work
from attnviz.workbench.memory import VISITOR

EXAMPLES = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired.",
    "The author that the critics praise writes beautiful books.",
    "The doctor told the nurse that she would arrive at the hospital soon.",
    "小明告诉老师他生病了。",
    "那只猫没有吃鱼，因为它不饿。",
    "桌子上的钥匙不见了。",
]
# Option values stay the same in every language (the URL and the widget state hold them); their display
# goes through t() (format_func: Streamlit keys these widgets by key, so a new language keeps the choice).
# Each format_func is a dict of this run's labels, not a call of t(): a format_func may be called after
# the run (AppTest does), where it must still agree with the options drawn.
LEVELS = ["token", "word"]
SCALES = ["linear", "power", "log"]
PALETTES = ["default", "colorblind", "blues"]
UNKNOWN_TOKENS = ("[UNK]", "<unk>", "<UNK>")
UNKNOWN_SHARE_NOTICE = 0.2  # above this share of unknown tokens, suggest a model with a wider vocabulary


def render() -> None:
    model, source = sidebar()
    st.title(t("app_title"))
    st.caption(t("app_caption"))
    if model is None:
        return
    text, text_b = sentence_inputs(model)
    if not text.strip():
        st.info(t("empty_text"))
        write_url(text=None, text_b=None, layer=None, head=None)
        return
    text_b = text_b or None
    write_url(text=text if len(text) <= MAX_TEXT else None, text_b=text_b)
    if len(text) > MAX_TEXT or len(text_b or "") > MAX_TEXT:
        st.caption(t("link_without_text", limit=MAX_TEXT))
    if traces.is_long(model, text, text_b):  # past the full maps' length: a reduced trace (ui.long_explore)
        from attnviz.ui import long_explore

        long_explore.render(model, source, text, text_b)
        return
    try:
        trace = traces.trace(workbench(), source, text, text_b)
    except OverBudget as error:
        st.error(over_budget_message(error))
        return
    except ValueError as error:
        st.error(t("run_failed", error=md(error)))
        return
    input_notices(model, trace)
    token_chips(trace)
    level, hide_special, scale, palette, first_aside = view_options(trace)
    lens, normalise = lens_ui.lens_switch(model.info, trace, source, text, text_b)
    view_key = (source, text, text_b, level, hide_special, lens, normalise, first_aside)
    try:
        view = traces.view(workbench(), *view_key)
    except OverBudget as error:
        st.error(over_budget_message(error))
        return
    except ValueError as error:  # e.g. nothing but special tokens left to show
        st.warning(md(error))
        return
    if view.attentions.shape[-1] == 0:
        st.warning(t("no_words"))
        return
    highlight = token_focus(trace)
    model_view(view, trace, highlight, palette, scale, view_key)
    head_detail(model.info, view_key, scale, palette)
    next_token_predictions(model, (source, text, text_b))
    ablation.head_ablation(model, source, text, text_b is not None)
    pairs_ui.minimal_pair(model, source, text, text_b is not None)
    head_detectors(model, source)
    parity_badge(model, text, text_b)
    exports(model, text, text_b)



def sentence_inputs(model) -> tuple[str, str]:
    seed_from_url("text", EXAMPLES[0])
    seed_from_url("text_b", "")

    def use_example() -> None:
        st.session_state["text"] = st.session_state["example"]

    st.selectbox(t("examples"), EXAMPLES, key="example", on_change=use_example, index=None,
                 placeholder="…")
    limit = max_input_chars()
    text = st.text_input(t("sentence"), key="text", max_chars=limit,
                         help=t("sentence_help", n=shelf.long_token_limit(model), full=shelf.FULL_MAPS_TOKENS))
    text_b = ""
    if not model.info.causal:
        text_b = st.text_input(t("sentence_b"), key="text_b", help=t("sentence_b_help"), max_chars=limit)
    elif st.session_state.get("text_b", "").strip():
        # Kept for when an encoder is chosen again: re-assigning keeps the state of an undrawn widget.
        st.session_state["text_b"] = st.session_state["text_b"]
        st.caption(t("sentence_b_dropped"))
    return text, text_b.strip()


def max_input_chars() -> int:
    """The sentence box's limit: room for the longest text the app takes (16 characters a token is more than
    any tokenizer here averages), never less than a link may hold (MAX_TEXT)."""
    return max(MAX_TEXT, 16 * shelf.max_tokens_setting())


def input_notices(model, trace, limit: int | None = None) -> None:
    """Truncation at `limit` (default: the model's full-map limit) and a text mostly of unknown tokens."""
    if trace.truncated:
        st.warning(t("truncated", n=limit or model.info.max_tokens))
    unknown = [i for i, (tok, special) in enumerate(zip(trace.input_ids, trace.special_mask))
               if not special and model.tokenizer.id_to_token(tok) in UNKNOWN_TOKENS]
    real = sum(not s for s in trace.special_mask)
    if real and len(unknown) / real > UNKNOWN_SHARE_NOTICE:
        unk = model.tokenizer.id_to_token(trace.input_ids[unknown[0]])
        st.warning(t("many_unk", share=len(unknown) / real, unk=md(unk), suggestion=shelf.WIDE_VOCABULARY_MODEL))


# Past this many tokens the chips are shown a window at a time: 4,096 chips would be about 1 MB each rerun.
CHIP_WINDOW = 256


def token_chips(trace) -> None:
    """Tokens as chips with their ids, the chips of one word underlined together (its word in the tooltip);
    every piece of text is escaped, so markup in the input stays text. A long text's chips are shown
    CHIP_WINDOW at a time, from a token the visitor picks."""
    n = len(trace.tokens)
    with st.expander(f"{t('tokens')} ({n})", expanded=n <= 40):
        start, stop = 0, n
        if n > CHIP_WINDOW:
            if not 0 <= st.session_state.get("chips_start", 0) < n:  # a shorter text than the last one
                st.session_state["chips_start"] = 0
            start = int(st.number_input(t("tokens_from"), 0, n - 1, step=CHIP_WINDOW, key="chips_start",
                                        help=t("tokens_from_help", n=CHIP_WINDOW)))
            stop = min(start + CHIP_WINDOW, n)
            st.caption(t("tokens_window", first=start, last=stop - 1, n=n))
        # st.html, not st.markdown: Markdown and LaTeX would read `$`, backticks, `_` or `~` in a token as
        # formulas, code or emphasis and swallow the chips' own markup.
        st.html(f'<div style="line-height:1.9">{"".join(_chips(trace, start, stop))}</div>')


def _chips(trace, start: int, stop: int) -> list[str]:
    """The HTML of tokens start..stop, a run of one word's tokens wrapped in one underlined span."""
    chips = []
    for token, token_id, special in zip(token_labels(trace)[start:stop], trace.input_ids[start:stop],
                                        trace.special_mask[start:stop]):
        # escape_label makes blank tokens visible ("␣"); HTML escaping is html.escape's job alone here, as
        # escape_label's own entities (for plotly) would be escaped twice and show as "&lt;".
        shown = html.escape(token if special or token.strip() else plots.escape_label(token))
        style = "background:#eee;color:#555" if special else "background:#e8f0fe"
        chips.append(
            f'<span style="{style};border-radius:6px;padding:1px 6px;margin:2px;display:inline-block;'
            f'font-family:monospace">{shown}<sub style="color:#888"> {token_id}</sub></span>'
        )
    runs = [(word, max(a, start) - start, min(b, stop) - start) for word, a, b in word_runs(trace)
            if a < stop and b > start]
    for word, a, b in reversed(runs):  # word boundaries (docs/architecture.md word rule)
        if word is not None:
            name = html.escape(trace.words[word])
            chips[a:b] = [f'<span class="attnviz-word" data-word="{name}" title="{name}" style="display:'
                          f'inline-block;border-bottom:2px solid #8ab4f8;margin:0 5px 0 0">'
                          f'{"".join(chips[a:b])}</span>']
    return chips


def view_options(trace):
    for key, url_key, default in (("level", "level", "token"), ("hide_special", "hide", False),
                                  ("scale", "scale", "linear"), ("palette", "palette", "default"),
                                  ("first_aside", "first_aside", False)):
        seed_from_url(key, default, url_key)
    causal = bool(trace.metadata.get("causal"))
    cols = st.columns(4)
    level = cols[0].radio(t("level"), LEVELS, key="level", horizontal=True,
                          format_func={v: t(f"level_{v}") for v in LEVELS}.get)
    why_not = (t("hide_special_word_level") if level == "word"
               else t("hide_special_none") if not any(trace.special_mask) else None)
    hide_special = cols[1].toggle(t("hide_special"), key="hide_special", disabled=why_not is not None,
                                  help=why_not or t("hide_special_help")) and why_not is None
    scale = cols[2].radio(t("scale"), SCALES, key="scale", horizontal=True,
                          format_func={v: t(f"scale_{v}") for v in SCALES}.get)
    palette = cols[3].selectbox(t("palette"), PALETTES, key="palette",
                                format_func={v: t(f"palette_{v}") for v in PALETTES}.get,
                                placeholder=t("choose_option"))
    first_aside = False
    if causal:  # a decoder's first token is its attention sink (docs/architecture.md, "The first-token sink")
        alone = len(trace.tokens) < 2  # nothing would be left to show
        first_aside = st.toggle(t("first_aside"), key="first_aside", disabled=alone,  # a row of its own
                                help=t("first_aside_alone") if alone else t("first_aside_help")) and not alone
        first_token_line(trace, first_aside)
    write_url(level=level if level != "token" else None, hide=hide_special or None,
              scale=scale if scale != "linear" else None, palette=palette if palette != "default" else None,
              first_aside=first_aside or None)
    return level, hide_special, scale, palette, first_aside


def first_token_line(trace, first_aside: bool) -> None:
    """The model-level first-token share of this input (analysis.sink): the mean weight on the first token
    over every head, and the share of heads above Gu et al. 2024's epsilon."""
    share = first_shares(trace)
    st.caption(t("first_token_line", mean=share.mean, above=share.above, heads=share.per_head.size,
                 share=share.share_above, epsilon=FIRST_TOKEN_EPSILON)
               + (" " + t("first_aside_on") if first_aside else ""))


def first_shares(trace) -> FirstTokenShare:
    """The first-token shares of a full trace, or of a reduced one (the mean weight on position 0 its pass kept)."""
    if isinstance(trace, ReducedTrace):
        return FirstTokenShare(trace.statistics["first"])
    return first_token_share(trace.attentions)


def token_focus(trace) -> list[tuple[int, int]]:
    """Rank every head by word-level attention between two chosen words; the top five are outlined."""
    with st.expander(t("token_focus"), expanded=False):
        ranking = word_pair_ranking(trace, key_prefix="explore")
    return [(layer, head) for layer, head, _ in ranking[:5]]


def model_view(view, trace, highlight, palette, scale, view_key) -> None:
    st.subheader(t("model_view"))
    st.caption(lens_ui.mosaic_caption(view_key[5]))
    text = plot_text()
    figure = traces.figure(workbench(),
        (*view_key, palette, scale, tuple(highlight), text),
        lambda: lens_ui.mosaic_columns(plots.model_view(
            view.attentions, kv_group=trace.kv_group if view.attentions.shape[1] == len(trace.kv_group) else None,
            highlight=highlight, scale=scale, row_labels=view.labels, col_labels=view.labels, colorscale=palette,
            text=text, head_mean=view_key[5] not in lens_ui.PER_LAYER, layer_kinds=shown_kinds(trace)),
            view_key[5]),
        work_bytes=4 * view.attentions.nbytes,
    )
    lens_ui.peak_note(view_key)
    sink_mass_line(trace)
    meta = figure.layout.meta or {}
    if meta.get("pooled"):
        st.info(t("pooled", cells=meta["tile"][0]))
    # Serialising a long text's mosaic holds the interpreter for a while: one at a time (Workbench.run_slot).
    with workbench().run_slot(4 * view.attentions.nbytes):
        event = st.plotly_chart(figure, key="model_view", width="stretch", config={"displaylogo": False},
                                on_select="rerun", selection_mode="points")
    select_clicked_head(event, per_layer=view_key[5] in lens_ui.PER_LAYER)


def sink_mass_line(trace) -> None:
    """Where the rest of a row went when the model has learned sinks (rows sum to less than 1; never
    renormalised): the mean over every row, and the most of one row."""
    if not has_learned_sinks(trace):
        return
    if isinstance(trace, ReducedTrace):  # each head's mean over its rows, and its largest row's
        mean, most = float(trace.statistics["sink_mass"].mean()), float(trace.statistics["sink_mass_max"].max())
    else:
        rows = trace.attentions.sum(-1)  # L, H, T
        mean, most = float(1 - rows.mean()), float(1 - rows.min())
    st.caption(t("sink_mass_line", mean=f"{mean:.3f}", most=f"{most:.3f}"))


def shown_kinds(trace) -> list[str] | None:
    """Each layer's attention kind in the visitor's language, for the mosaic's strip; None when every layer
    attends in full (no strip)."""
    kinds = trace.metadata.get("layer_kinds") or []
    return [kind_label(kind) for kind in kinds] if any(kind != "full" for kind in kinds) else None


def select_clicked_head(event, per_layer: bool = False) -> None:
    """A click on a tile picks that layer and head (the widgets below are created after this, so their
    state may still be set). Only a new click applies: the selection persists across reruns. A per-layer
    lens's one column picks the layer only: the head choice is kept for the raw weights."""
    points = [p for p in (event.selection.points if event else []) if p.get("customdata") is not None]
    if not points:
        return
    layer, head = (int(v) for v in points[0]["customdata"][:2])
    if st.session_state.get("_applied_click") != (layer, head):
        st.session_state["_applied_click"] = (layer, head)
        st.session_state["layer"] = layer
        if not per_layer:
            st.session_state["head"] = head


@st.fragment
@guarded
def head_detail(info, view_key, scale, palette, long: bool = False) -> None:
    """One head in detail. A fragment: picking a layer, head, threshold or token reruns only this part,
    so the mosaic is neither rebuilt nor sent again. `long`: a long text's, drawn from its reduced trace (the
    window recomputed from the kept queries and keys, the profile from the pass's sums)."""
    st.subheader(t("head_detail"))
    bench = workbench()
    if long:
        trace = traces.held_reduced(bench, *view_key[:3])
        if trace is None:  # evicted since the page was drawn: the whole page computes it again
            st.rerun()
        positions = traces.reduced_positions(bench, view_key)
        all_labels, n_layers = positions.labels, info.n_layers
    else:
        view = traces.view(bench, *view_key)  # shared: a lookup, not a recomputation
        trace = traces.trace(bench, *view_key[:3])
        all_labels, n_layers = view.labels, view.attentions.shape[0]  # a per-layer lens: one map per layer
    n_heads = info.n_heads
    for key, limit in (("layer", n_layers), ("head", n_heads)):
        seed_from_url(key, 0)
        if not 0 <= st.session_state[key] < limit:  # a smaller model, or a stale link
            st.session_state[key] = 0
    seed_from_url("threshold", 0.02)
    cols = st.columns([1, 1, 2, 2])
    per_layer = view_key[5] in lens_ui.PER_LAYER
    layer = cols[0].selectbox(t("layer"), range(n_layers), key="layer", placeholder=t("choose_option"))
    head = cols[1].selectbox(t("head"), range(n_heads), key="head", disabled=per_layer,
                             help=t("lens_head_disabled", lens=t(f"lens_{view_key[5]}")) if per_layer else None,
                             placeholder=t("choose_option"))
    threshold = cols[2].slider(t("threshold"), 0.0, 0.5, step=0.01, key="threshold")
    window = token_window(len(all_labels))
    labels = all_labels[window]
    all_tokens = t("all_tokens")
    focus = cols[3].selectbox(
        t("focus_token"), [None, *range(len(labels))], key="focus",
        format_func=lambda i: all_tokens if i is None else f"{i + window.start}: {labels[i]}",
        placeholder=t("choose_option"))
    if trace.kv_group and info.n_kv_heads != info.n_heads:
        group = trace.kv_group[head]
        peers = [h for h, g in enumerate(trace.kv_group) if g == group and h != head]
        st.caption(t("kv_note", head=head, kv=group, peers=", ".join(map(str, peers)) or "-",
                     kind=info.attention_kind))
    if long:
        view_head, matrix = head, traces.reduced_window(bench, view_key, layer, head, window)
    else:
        view_head = lens_ui.lens_head(view, head, view_key[5])
        matrix = np.asarray(view.attentions[layer, view_head, window, window], dtype=np.float32)
    part = sentence_pair(info, trace, view_key, window, labels, focus)
    matrix = part.take(matrix)
    left, right = st.columns([3, 2])
    if matrix.size == 0:
        st.info(t("pair_empty"))
    else:
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
    detectors = head_work.detector_scores(bench, view_key[0])
    if long:  # the profile of the raw head, from the sums its pass kept (first token included)
        head_profile(trace, layer, head, detectors, stats=traces.reduced_profile(bench, view_key[:3]).head(layer, head))
    else:
        head_profile(trace, layer, head, detectors, lens_ui.profiled_map(trace, view_key, layer, view_head),
                     view_key[5], view_key[7])
    lens_ui.query_key_view(info, trace, *view_key[:3], layer, head)
    if long:  # the window drawn: a whole head of 4,096 tokens would be a 100 MB CSV
        full, full_labels = traces.reduced_window(bench, view_key, layer, head, window), labels
        st.caption(t("download_csv_window", first=window.start, last=window.start + len(labels) - 1))
    else:
        full, full_labels = np.asarray(view.attentions[layer, view_head], dtype=np.float32), view.labels
    st.download_button(t("download_csv"), lambda: export.head_csv(full, full_labels),
                       file_name=f"attnviz_L{layer}_H{head}.csv", mime="text/csv", on_click="ignore", key="csv")
    write_url(layer=layer, head=head, threshold=threshold if threshold != 0.02 else None,
              start=window.start or None)


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
    the focused token's lines (pair_filter.slice_pair)."""
    seed_from_url("pair_filter", "all", "pair")
    seed_from_url("line_direction", "out", "lines")
    level, hide_special, first_aside = view_key[3], view_key[4], view_key[7]
    positions = first_aside_positions(trace, hide_special) if first_aside else trace
    sides = pair_filter.label_sentences(pair_filter.view_sequence(
        positions, level, hide_special or (first_aside and level == "token")))
    cols = st.columns(2)
    pair = "all"
    if not info.causal and view_key[2] is not None and pair_filter.is_pair(sides):
        options = list(pair_filter.PAIR_FILTERS)
        pair = cols[0].radio(t("pair_filter"), options, key="pair_filter", horizontal=True,
                             help=t("pair_filter_help"), format_func={v: t(f"pair_{v}") for v in options}.get)
    directions = pair_filter.LINE_DIRECTIONS
    direction = cols[1].radio(t("pair_lines"), directions, key="line_direction", horizontal=True,
                              help=t("pair_lines_help"), format_func={v: t(f"pair_lines_{v}") for v in directions}.get)
    part = pair_filter.slice_pair(sides[window], labels, pair, focus, direction)
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
    if lens in lens_ui.PER_LAYER:
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
        **({} if lens in lens_ui.PER_LAYER else  # detector scores are of raw heads, not of a layer's map
           {t(f"detector_{name}"): round(float(grid[layer, head]), 3) for name, grid in (detectors or {}).items()}),
    }], hide_index=True)


@st.fragment
@guarded
def next_token_predictions(model, trace_key, long: bool = False) -> None:
    if not model.info.causal or model.module.lm_head is None:
        return
    trace = traces.held_reduced(workbench(), *trace_key) if long else traces.trace(workbench(), *trace_key)
    if trace is None or trace.hidden is None:
        return
    st.subheader(t("predictions"))
    position = position_input(t("position"), trace, "prediction_position", len(trace.tokens) - 1)
    rows = model.next_tokens(trace, position)
    st.dataframe({t("column_token"): [visible_token(text, model.token_bytes(i)) for text, _, i in rows],
                  t("column_probability"): [round(p, 4) for _, p, _ in rows]}, hide_index=True)


@st.fragment
@guarded
def head_detectors(model, name: str) -> None:
    """Previous-token, duplicate-token and induction heads (Olsson et al. 2022), found on repeated random
    tokens: a heavy action, run once per model for everyone, on request."""
    with st.expander(t("detectors_title")):
        st.caption(t("detectors_caption"))
        bench = workbench()
        scores = head_work.detector_scores(bench, name)
        if scores is None:
            scores = heavy_action("detectors_run", t("detectors_run"), (name,),
                                  lambda job: head_work.detect(bench, model, name, progress=job.progress),
                                  lambda done, total: t("detectors_progress", done=done, total=total))
            if scores is None:
                return
            st.rerun()  # the whole page: the head profile above shows the new scores too
        # One grid a row, the page's whole width: three side by side left the numbers about 5 px high.
        for detector, grid in scores.items():
            figure = plots.score_grid(grid, t(f"detector_{detector}"), text=plot_text())
            head_grid(st, figure, f"detector_{detector}", in_fragment=True)
        if figure.layout.meta["values"] == "hover":
            st.caption(t("grid_values_hover"))


@st.fragment
@guarded
def parity_badge(model, text, text_b) -> None:
    """Compare with Hugging Face's eager attention on this sentence: a heavy action (it loads HF's own
    model beside ours), so it takes the process's heavy-work slot and a share of the memory budget."""
    if not st.button(t("parity"), key="parity"):
        return
    def progress(stage: str) -> None:
        status.update(label=t("parity_comparing") if stage == parity.COMPARING else stage_label(stage))

    try:
        with st.status(t("parity_running"), expanded=False) as status:
            with heavy_slot():
                report = parity.parity(workbench(), model, text, text_b, progress=progress)
            status.update(label=t("parity_done"), state="complete")
    except Busy:
        st.warning(t("busy"))
        return
    except OverBudget as error:
        st.error(t("over_budget", name=md(model.info.name), need=error.need / 1e9, budget=error.budget / 1e9,
                   used=error.used / 1e9))
        return
    except Exception as error:  # e.g. the random fallback has no HF counterpart
        st.warning(t("parity_failed", error=md(public_message(error, model.info.name, model.info.path))))
        return
    if model.info.dtype != "float32":  # loaded in bfloat16 to fit the budget: the measured difference, no bound
        st.info(t("parity_result_bfloat16", attn=report.max_attention_diff, hidden=report.max_hidden_diff,
                  n=report.n_tokens, dtype=model.info.dtype))
        return
    message = t("parity_result", attn=report.max_attention_diff, hidden=report.max_hidden_diff, n=report.n_tokens)
    (st.success if report.passed() else st.error)(message)


def exports(model, text, text_b) -> None:
    """Full-precision exports recompute the trace on click (the app keeps only a float16 copy)."""
    st.caption(t("share"))
    cols = st.columns(2)
    bench, n_tokens = workbench(), len(model.encode(text, text_b).ids)
    formats = (("npz", export.trace_npz, "application/octet-stream"), ("json", export.trace_json, "application/json"))
    for column, (kind, write, mime) in zip(cols, formats):
        need = traces.export_bytes(model, n_tokens, kind)
        if need > traces.export_room(bench):  # refused here, visibly, rather than after the click
            column.caption(t("export_too_large", kind=kind.upper(), need=need / 1e9, budget=bench.budget / 1e9))
            continue
        write_export = functools.partial(traces.export, bench, model, text, text_b, kind, write)
        build = functools.partial(export_or_refusal, write_export, session_id(), st.session_state.get("lang", "en"))
        column.download_button(t(f"download_{kind}"), build, file_name=f"attnviz_trace.{kind}", mime=mime,
                               on_click="ignore", key=kind)


def export_or_refusal(build, visitor: str, lang: str):
    """The export's bytes, `build()`; if memory ran short since the page was drawn, a short text that says so
    (the download is the only place the visitor will look). Streamlit calls this in a worker thread of its
    own, outside the script run: the visitor and the language come from the page, not from the session."""
    VISITOR.set(visitor)
    try:
        return build()
    except OverBudget as error:
        return translate(lang, "export_refused", need=error.need / 1e9, budget=error.budget / 1e9,
                         used=error.used / 1e9)
