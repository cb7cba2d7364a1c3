"""Translate: an encoder-decoder's three kinds of attention (encoder self, causal decoder self, cross) on a
source sentence and its translation (the model's own greedy one, or a target the visitor types).

Bounded work for a public host: source and target at most MAX_TOKENS tokens each, greedy decoding at most
MAX_NEW_TOKENS steps, every run under the workbench's budget and in the heavy-work slot, traces shared through the
process's trace store.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.alignment import alignment, best_source_words
from attnviz.ui.escape import md
from attnviz.ui.focus import set_focus
from attnviz.ui.guard import guarded, heavy_slot, public_message, refused, workbench
from attnviz.ui.language import language_switch, plot_text, t
from attnviz.ui.model_choice import hub_unreachable, load_failure
from attnviz.ui.qk_attribution import qk_attribution_section
from attnviz.ui.tokens import token_chips
from attnviz.ui.url_state import restore_from_url, seed_from_url, url_value, write_url
from attnviz.ui.widgets import head_grid, head_picker, position_input
from attnviz.workbench import shelf, traces
from attnviz.workbench import translate as translations
from attnviz.workbench.shelf import RANDOM_MARIAN_NAME
from attnviz.workbench.translate import MAX_TOKENS

PRESETS = [RANDOM_MARIAN_NAME, "Helsinki-NLP/opus-mt-en-zh", "Helsinki-NLP/opus-mt-zh-en", "Helsinki-NLP/opus-mt-en-de",
           "google/flan-t5-small", "google-t5/t5-small", "facebook/bart-base"]
KINDS = ("cross", "encoder", "decoder")
MAX_CHARS = 500  # the source and target inputs' max_chars, and the URL's bound on them
LANGUAGE_TOKEN = re.compile(r">>[A-Za-z0-9_]{1,32}<<", re.ASCII)
EXAMPLE = "The keys to the cabinet are on the table."
# A written translation of EXAMPLE, offered beside the untrained model's noise (it decodes only a few tokens:
# workbench.translate.new_tokens), so its three attention kinds can be read over real words.
EXAMPLE_TARGET = "柜子的钥匙在桌子上。"
PREFERRED_LANGUAGE = ">>cmn_Hans<<"  # simplified Chinese, where a multilingual-target model offers it
# T5 is told its task in the text itself. The prefix is shown and editable, never added out of sight: it is
# part of the source the model reads, so it has tokens (and attention) of its own.
T5_PREFIX = "translate English to German: "
MAX_PREFIX = 100


def load_random_marian():
    """The offline, untrained translation model (44.7M parameters, 179 MB), once per process."""
    return shelf.untrained_translator(workbench())


def pick_model() -> str:
    st.sidebar.subheader(t("translate_model"))
    seed_from_url("translate_preset", PRESETS[0], "tmodel")
    if st.session_state["translate_preset"] not in PRESETS:  # a link's custom model
        st.session_state.setdefault("translate_custom", st.session_state["translate_preset"])
        st.session_state["translate_preset"] = PRESETS[0]
    shown = {name: t("translate_random") if name == RANDOM_MARIAN_NAME else name for name in PRESETS}
    st.sidebar.selectbox(t("translate_model"), PRESETS, key="translate_preset", format_func=shown.get,
                         placeholder=t("choose_option"))
    st.sidebar.text_input(t("translate_model_custom"), key="translate_custom", max_chars=300,
                          help=t("translate_model_custom_help"))
    return (st.session_state.get("translate_custom") or "").strip() or st.session_state["translate_preset"]


def get_model(name: str) -> tuple[object, str]:
    """The translation model for `name`; on any failure (offline hub, not a Marian model) a message and the
    untrained offline model, which is always at hand."""
    if name == RANDOM_MARIAN_NAME:
        return load_random_marian(), name
    failures = st.session_state.setdefault("translate_failures", {})
    if name not in failures and hub_unreachable(name):  # said at once, as Explore does, not after ~26 s of retries
        failures[name] = t("hub_unreachable", name=md(name))
    if name not in failures:
        try:
            model = shelf.cached_model(workbench(), name)
            if model is None:
                source = shelf.check_source(name)
                with st.sidebar.status(t("loading_model", name=md(name)), expanded=False) as status:
                    model = shelf.load_model(workbench(), source)
                    status.update(label=md(name), state="complete")
            if shelf.is_seq2seq(model):
                return model, name
            failures[name] = t("translate_not_seq2seq", name=md(name))
        except Exception as error:  # every failure is a message (load_failure logs the unforeseen ones)
            failures[name] = load_failure(name, error)
    st.sidebar.error(failures[name])
    st.sidebar.info(t("translate_fallback"))
    return load_random_marian(), RANDOM_MARIAN_NAME


def run_translation(model, name: str, source: str, target: str, language: str | None):
    """The trace, shared by every session through the trace store; computed in the heavy-work slot."""
    trace = translations.cached_translation(workbench(), name, source, target, language)
    if trace is not None:
        return trace
    with st.spinner(t("translate_running")), heavy_slot():
        return translations.translation(workbench(), model, name, source, target, language)


def attention_of(trace, kind: str) -> tuple[np.ndarray, list[str], list[str]]:
    """[L, H, T, S] of one kind, with its query (row) and key (column) token labels."""
    if kind == "encoder":
        return trace.attentions, trace.tokens, trace.tokens
    if kind == "decoder":
        return trace.decoder_attentions, trace.target_tokens, trace.target_tokens
    return trace.cross_attentions, trace.target_tokens, trace.tokens


def render() -> None:
    restore_from_url()
    language_switch()
    name = pick_model()
    st.title(t("translate_title"))
    st.caption(t("translate_caption"))
    model, shown = get_model(name)
    if model.untrained:
        st.warning(t("translate_untrained"))
    c = model.config
    st.caption(t("translate_facts", name=md(t("translate_random") if shown == RANDOM_MARIAN_NAME else shown),
                 d=c.d_model, heads=c.n_heads, enc=c.encoder_layers, dec=c.decoder_layers,
                 params=model.info.n_parameters / 1e6))

    language = None
    if model.language_codes:
        seed_from_url("translate_language", None, "tlang")
        if st.session_state["translate_language"] not in model.language_codes:
            preferred = PREFERRED_LANGUAGE if PREFERRED_LANGUAGE in model.language_codes else None
            st.session_state["translate_language"] = preferred or model.language_codes[0]
        language = st.selectbox(t("translate_language"), model.language_codes, key="translate_language",
                                help=t("translate_language_help"), placeholder=t("choose_option"))
    prefix = task_prefix(model)
    seed_from_url("translate_source", EXAMPLE, "src")
    # Its target text's key was `target` before the focus took it: a link opened on this page still gives it.
    legacy = None
    if st.session_state.get("_landing_page", "Translate") == "Translate" and "url_ttarget" not in st.session_state:
        legacy = url_value("target")
        if legacy:  # a sentence, not the focus's target token
            set_focus(target="")
    seed_from_url("translate_target", legacy or "", "ttarget")
    source = st.text_area(t("translate_source"), key="translate_source", max_chars=MAX_CHARS, height=80)
    target = st.text_input(t("translate_target"), key="translate_target", max_chars=MAX_CHARS,
                           help=t("translate_target_help"))
    if model.untrained:  # its greedy output is noise: offer a written translation to read its attention over
        st.caption(t("translate_untrained_example", n=translations.new_tokens(model)))

        def use_example() -> None:
            st.session_state["translate_source"], st.session_state["translate_target"] = EXAMPLE, EXAMPLE_TARGET

        st.button(t("translate_use_example", target=EXAMPLE_TARGET), key="translate_use_example",
                  on_click=use_example)
    seed_from_url("translate_kind", "cross", "kind")
    write_url(tmodel=None if name == PRESETS[0] else name, src=source, ttarget=target, tlang=language,
              kind=st.session_state.get("translate_kind"), tprefix=prefix)
    if not source.strip():
        st.info(t("translate_empty"))
        return
    trace = None
    with refused(shown):
        try:
            trace = run_translation(model, shown, (prefix or "") + source, target.strip(), language)
        except ValueError as error:
            st.error(t("translate_error", error=md(public_message(error, shown))))
    if trace is None:  # refused, or a bad input: said so above
        return
    show_output(trace)
    token_chips(trace)
    views(trace, shown, splittable=c.norm_placement == "pre")


def task_prefix(model) -> str | None:
    """T5's task prefix: an input prefilled with T5_PREFIX, read in front of the source; None for other models."""
    if model.info.model_type != "t5":
        return None
    seed_from_url("translate_prefix", T5_PREFIX, "tprefix")
    return st.text_input(t("translate_prefix"), key="translate_prefix", max_chars=MAX_PREFIX,
                         help=t("translate_prefix_help"))


def show_output(trace) -> None:
    label = t("translate_output_generated") if trace.generated else t("translate_output_given")
    st.markdown(f"**{label}**")
    st.markdown(md(trace.target_text) if trace.target_text else t("translate_output_empty"))
    notes = [t("translate_tokens", s=len(trace.tokens), t=len(trace.target_tokens))]
    if trace.truncated or trace.target_truncated:
        notes.append(t("translate_truncated", n=MAX_TOKENS))
    st.caption(" · ".join(notes))


def views(trace, name: str, splittable: bool = False) -> None:
    # Labels translated now, not in format_func: Streamlit may call it outside this run (AppTest does).
    labels = {kind: t(f"translate_kind_{kind}") for kind in KINDS}
    st.radio(t("translate_kind"), KINDS, key="translate_kind", horizontal=True, format_func=labels.get)
    kind = st.session_state["translate_kind"]
    st.caption(t(f"translate_kind_caption_{kind}", start=md(trace.target_tokens[0])))
    attentions, rows, cols = attention_of(trace, kind)
    n_layers, n_heads = attentions.shape[:2]
    text = dataclasses.replace(plot_text(), open_head=t("translate_open_head"))
    # The token ids, not only the texts: the same source under another >>lang<< token reads differently.
    key = ("translate", name, tuple(trace.input_ids), tuple(trace.target_input_ids), trace.texts, trace.target_text,
           trace.generated, kind, text)
    figure = traces.held_figure(workbench(), key)
    if figure is None:
        figure = traces.keep_figure(workbench(), key,
                                    plots.model_view(attentions, row_labels=rows, col_labels=cols, text=text))
    # A click on a tile opens that head in the detail below (its layer and head selectors, then the URL).
    head_grid(st, figure, "translate_mosaic", keys=("translate_layer", "translate_head"))
    head_detail(trace, kind, n_layers, n_heads, name, splittable)


@st.fragment
@guarded
def head_detail(trace, kind: str, n_layers: int, n_heads: int, name: str, splittable: bool) -> None:
    """One head: a fragment, so picking a layer or head redraws only this part. `splittable`: the encoder's
    scores can be attributed to earlier components (a pre-norm encoder-decoder: T5)."""
    layer, head = head_picker(st.columns(2), n_layers, n_heads, prefix="translate_", url_prefix="t",
                              follows_focus=False)
    write_url(tlayer=layer, thead=head)
    attentions, rows, cols = attention_of(trace, kind)
    figure = plots.head_heatmap(attentions[layer, head], rows, cols, causal=kind == "decoder", text=plot_text())
    st.plotly_chart(figure, key="translate_head_view", width="stretch", config={"displaylogo": False})
    if kind == "cross":
        alignment_table(trace, layer, head)
    elif kind == "encoder" and splittable:
        encoder_attribution(trace, name, layer, head)


def encoder_attribution(trace, name: str, layer: int, head: int) -> None:
    """T5's encoder self-attention: which earlier components made a query seek a key, its relative-position
    bucket a term of its own (the query-key attribution of Explore's head detail, on the source text)."""
    query = position_input(t("translate_qka_query"), trace, "translate_qka_query", len(trace.tokens) - 1,
                           follows_focus=False)
    qk_attribution_section(trace, name, trace.texts[0], None, layer, head, query)


def alignment_table(trace, layer: int, head: int) -> None:
    """Cross-attention as word alignment: each target word and the source word it weighs most."""
    st.subheader(t("translate_alignment_title"))
    mean = st.toggle(t("translate_alignment_mean"), key="translate_alignment_mean", value=True)
    matrix = alignment(trace, layer, None if mean else head)
    which = t("translate_alignment_all_heads") if mean else t("translate_alignment_one_head", head=head)
    st.caption(t("translate_alignment_caption", layer=layer, which=which))
    if not trace.target_words or not trace.words:
        st.info(t("translate_alignment_none"))
        return
    st.plotly_chart(plots.head_heatmap(matrix, trace.target_words, trace.words, text=plot_text()),
                    key="translate_alignment_grid", width="stretch", config={"displaylogo": False})
    pairs = best_source_words(matrix)
    st.dataframe({t("translate_column_target"): [trace.target_words[i] for i, _, _ in pairs],
                  t("translate_column_source"): [trace.words[j] for _, j, _ in pairs],
                  t("translate_column_weight"): [round(w, 3) for _, _, w in pairs]}, hide_index=True)
