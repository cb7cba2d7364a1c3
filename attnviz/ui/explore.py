"""The Explore page: type a sentence, see every layer and head at once, zoom into one head. A text past
FULL_MAPS_TOKENS is drawn by the page's long-text body (ui/long_explore.py)."""

from __future__ import annotations

import streamlit as st

from attnviz.ui import ablation, long_explore
from attnviz.ui import attention_lenses as lens_ui
from attnviz.ui import minimal_pairs as pairs_ui
from attnviz.ui.attribution import attribution_section
from attnviz.ui.circuit_view import circuit_section
from attnviz.ui.detectors import head_detectors
from attnviz.ui.downloads import exports
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, set_focus
from attnviz.ui.focus_line import focus_line
from attnviz.ui.guard import guarded, heavy_slot, public_message, refused, workbench
from attnviz.ui.head_detail import head_detail
from attnviz.ui.language import stage_label, t
from attnviz.ui.logit_lens import logit_lens_section
from attnviz.ui.mosaic import full_mosaic
from attnviz.ui.patching import patching_section
from attnviz.ui.predictions import next_token_predictions
from attnviz.ui.qkmap import qk_corpus_map
from attnviz.ui.routes import routes_section
from attnviz.ui.sidebar import sidebar
from attnviz.ui.sinks import sink_anatomy
from attnviz.ui.tokens import input_notices, token_chips
from attnviz.ui.url_state import EXPLORE_VIEWS, MAX_TEXT, url_value, write_url
from attnviz.ui.view_options import view_options
from attnviz.ui.widgets import word_pair_ranking
from attnviz.workbench import parity, shelf, traces, views

EXAMPLES = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired.",
    "The author that the critics praise writes beautiful books.",
    "The doctor told the nurse that she would arrive at the hospital soon.",
    "小明告诉老师他生病了。",
    "那只猫没有吃鱼，因为它不饿。",
    "桌子上的钥匙不见了。",
]


def render() -> None:
    model, source = sidebar()
    st.title(t("app_title"))
    st.caption(t("app_caption"))
    if model is None:
        return
    text, text_b = sentence_inputs(model)
    if not text.strip():
        st.info(t("empty_text"))
        return
    text_b = text_b or None
    if len(text) > MAX_TEXT or len(text_b or "") > MAX_TEXT:
        st.caption(t("link_without_text", limit=MAX_TEXT))
    if traces.is_long(model, text, text_b):  # past the full maps' length: a reduced trace
        long_explore.render(model, source, text, text_b)
        return
    # A trace or view over the memory budget ends the page with guarded's message (app.py runs it guarded).
    try:
        trace = traces.trace(workbench(), source, text, text_b)
    except ValueError as error:
        st.error(t("run_failed", error=md(error)))
        return
    input_notices(model, trace)
    token_chips(trace, model.token_bytes)
    level, hide_special, scale, palette, first_aside = view_options(trace)
    lens, normalise = lens_ui.lens_switch(model.info, trace, source, text, text_b)
    view_key = (source, text, text_b, level, hide_special, lens, normalise, first_aside)
    try:
        view = views.view(workbench(), *view_key)
    except ValueError as error:  # e.g. nothing but special tokens left to show
        st.warning(md(error))
        return
    if view.attentions.shape[-1] == 0:
        st.warning(t("no_words"))
        return
    highlight = token_focus(trace)
    focus_line(source, trace)  # above the first figure: what every number below is computed on
    full_mosaic(view, trace, highlight, palette, scale, view_key)
    # The views by the question they answer, one tab each, so the page is as long as one question's views
    # (it was 9,400 px collapsed, 14,000 px in use). Only the open tab's views run (Streamlit's stateful
    # tabs: a switch reruns the page), so a page costs the server one question's work, not five; the link
    # names the open tab (`view`), and the focus carries head, position and target from one tab to the next.
    paired = text_b is not None
    looks, writes, matters, which, check = question_tabs()
    if looks.open:
        with looks:
            head_detail(model.info, view_key, scale, palette)  # the one head, and why it looks there (query-key)
    if writes.open:
        with writes:
            next_token_predictions(model, (source, text, text_b))
            logit_lens_section(model, source, text, trace, paired)
            attribution_section(model, source, text, trace, paired)
            routes_section(model, source, text, trace, paired)
    if matters.open:
        with matters:
            ablation.head_ablation(model, source, text, paired)
            pairs_ui.minimal_pair(model, source, text, paired)
            patching_section(model, source)
            circuit_section(model, source)
    if which.open:
        with which:
            head_detectors(model, source)
            sink_anatomy(model, source)  # its own section (ui/sinks.py)
            qk_corpus_map(model, source)  # its own section (ui/qkmap.py)
    if check.open:
        with check:
            parity_badge(model, text, text_b)
            exports(model, text, text_b)


def question_tabs():
    """Explore's tabs (EXPLORE_VIEWS), the open one from this session, else the link, else the first. The
    tab's state is its label, which the language changes: the name (`_explore_view`) is what is kept."""
    labels = [t(f"tab_{name}") for name in EXPLORE_VIEWS]
    if "_explore_view" not in st.session_state:
        st.session_state["_explore_view"] = url_value("view", EXPLORE_VIEWS[0])
    st.session_state["explore_view"] = labels[EXPLORE_VIEWS.index(st.session_state["_explore_view"])]
    tabs = st.tabs(labels, key="explore_view", on_change=_view_chosen, args=(labels,))
    write_url(view=None if st.session_state["_explore_view"] == EXPLORE_VIEWS[0] else st.session_state["_explore_view"])
    return tabs


def _view_chosen(labels: list[str]) -> None:
    """The tabs' callback: the label clicked, kept as its name."""
    st.session_state["_explore_view"] = EXPLORE_VIEWS[labels.index(st.session_state["explore_view"])]


def sentence_inputs(model) -> tuple[str, str]:
    """The focus's text and second text. An encoder reads both as one input (sentence A and B); a decoder's
    second text is the other sentence of a pair (minimal pairs, patching), typed below, not read here."""
    def use_example() -> None:
        set_focus(text=st.session_state["example"])

    st.selectbox(t("examples"), EXAMPLES, key="example", on_change=use_example, index=None,
                 placeholder="…")
    limit = max_input_chars()
    text = st.text_input(t("sentence"), max_chars=limit, **bound("text", "text"),
                         help=t("sentence_help", n=shelf.long_token_limit(model), full=shelf.FULL_MAPS_TOKENS))
    if model.info.causal:
        return text, ""
    text_b = st.text_input(t("sentence_b"), help=t("sentence_b_help"), max_chars=limit,
                           **bound("text_b", "text_b"))
    return text, text_b.strip()


def max_input_chars() -> int:
    """The sentence box's limit: room for the longest text the app takes (16 characters a token is more than
    any tokenizer here averages), never less than a link may hold (MAX_TEXT)."""
    return max(MAX_TEXT, 16 * shelf.max_tokens_setting())


def token_focus(trace) -> list[tuple[int, int]]:
    """Rank every head by word-level attention between two chosen words; the top five are outlined."""
    with st.expander(t("token_focus"), expanded=False):
        ranking = word_pair_ranking(trace, key_prefix="explore")
    return [(layer, head) for layer, head, _ in ranking[:5]]



@st.fragment
@guarded
def parity_badge(model, text, text_b) -> None:
    """Compare with Hugging Face's eager attention on this sentence: a heavy action (it loads HF's own
    model beside ours), so it takes the process's heavy-work slot and a share of the memory budget."""
    if not st.button(t("parity"), key="parity"):
        return
    def progress(stage: str) -> None:
        status.update(label=t("parity_comparing") if stage == parity.COMPARING else stage_label(stage))

    report = None
    try:
        with refused(model.info.name), st.status(t("parity_running"), expanded=False) as status:
            with heavy_slot():
                report = parity.parity(workbench(), model, text, text_b, progress=progress)
            status.update(label=t("parity_done"), state="complete")
    except Exception as error:  # e.g. the random fallback has no HF counterpart
        st.warning(t("parity_failed", error=md(public_message(error, model.info.name, model.info.path))))
        return
    if report is None:  # refused: said so above
        return
    if model.info.dtype != "float32":  # loaded in bfloat16 to fit the budget: the measured difference, no bound
        st.info(t("parity_result_bfloat16", attn=report.max_attention_diff, hidden=report.max_hidden_diff,
                  n=report.n_tokens, dtype=model.info.dtype))
        return
    message = t("parity_result", attn=report.max_attention_diff, hidden=report.max_hidden_diff, n=report.n_tokens)
    (st.success if report.passed() else st.error)(message)
