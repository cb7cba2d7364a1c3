"""The visitor's language: `t` (a UI string in the language in force), plot labels, the loading stages in
words, and the language switch."""

from __future__ import annotations

import streamlit as st

from attnviz.plots import PlotText
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus, set_focus
from attnviz.ui.strings import LANGUAGES, translate


def t(key: str, **values) -> str:
    return translate(focus().lang, key, **values)


def plot_text() -> PlotText:
    """The words the figures show, in the visitor's language."""
    return PlotText(**{name: t(f"plot_{name.rstrip('_')}") for name in PlotText.__dataclass_fields__})


# Progress stages the loaders report (attnviz.loading, workbench.parity), by their English prefix; the
# rest of a stage is a name (a hub id).
STAGES = (("downloading ", "stage_downloading"), ("reading config", "stage_reading_config"),
          ("reading weights", "stage_reading_weights"), ("reading tokenizer", "stage_reading_tokenizer"),
          ("reading GGUF config", "stage_reading_gguf_config"), ("dequantizing GGUF weights", "stage_dequantizing"),
          ("converting weights", "stage_converting"), ("ready", "stage_ready"),
          ("loading the Hugging Face reference of ", "stage_reference"), ("reading GGUF", "stage_reading_gguf"),
          ("dequantising tensor ", "stage_dequantising_tensor"), ("converting tokenizer", "stage_converting_tokenizer"),
          ("writing cache", "stage_writing_cache"), ("reading cached weights", "stage_reading_cache"),
          ("building the model", "stage_building"),
          ("float32 does not fit the memory budget", "stage_bfloat16"))


# Stages that repeat with a count (a first GGUF load reports its tensors): one line, updated in place.
COUNTED_STAGES = ("dequantising tensor ",)


def stage_label(stage: str) -> str:
    """A loading stage in the visitor's language (Markdown, the name in it escaped); unknown ones as they are."""
    for prefix, key in STAGES:
        if stage.startswith(prefix):
            name = stage[len(prefix):]
            return t(key, name=md(name)) if "{name}" in translate("en", key) else t(key)
    return md(stage)


# Widgets whose option labels are translated. Streamlit keeps a keyed widget mounted when its labels
# change, so after a language switch a radio showed no choice and a selectbox its old label: setting their
# values again sends them to the browser with the new labels.
TRANSLATED_WIDGETS = ("model_preset", "level", "scale", "palette", "focus", "finder_relation", "finder_mode",
                      "finder_builtin", "finder_kind", "finder_example_direction", "pair_filter", "line_direction",
                      "ablation_layers", "translate_preset", "translate_kind", "lens",
                      "sinks_mine", "sinks_show", "qkmap_corpus", "qkmap_colour",
                      "atlas_ours_example", "atlas_ours_query", "atlas_pub_example", "atlas_pub_query",
                      "circuit_direction")


def _language_changed() -> None:
    set_focus(lang=st.session_state["lang"])
    for key in TRANSLATED_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def language_switch() -> None:
    # The options name each language in itself ("English", "中文"), whichever language is shown.
    # The focus keeps the language on every page and in the link (a shared link opens in the sender's language).
    binding = bound("lang", "lang") | {"on_change": _language_changed, "args": ()}
    st.sidebar.radio(t("language"), list(LANGUAGES), format_func=LANGUAGES.get, horizontal=True, **binding)
