"""What every page shares: the language switch, the model picker and the URL query string."""

from __future__ import annotations

import html

import streamlit as st

from attnviz.loading.random_model import RANDOM_MODEL_NAME
from attnviz.ui import models
from attnviz.ui.strings import LANGUAGES, translate

# Widget keys that live in the URL, so a copied link reproduces the view.
QUERY_KEYS = ("model", "text", "text_b", "layer", "head")


def t(key: str, **values) -> str:
    return translate(st.session_state.get("lang", "en"), key, **values)


def restore_from_url() -> None:
    """On a session's first run, seed widget state from the query string (?model=...&text=...)."""
    if st.session_state.get("_restored"):
        return
    st.session_state["_restored"] = True
    params = st.query_params
    for key in QUERY_KEYS:
        if key in params:
            value = params[key]
            if key in ("layer", "head"):  # a hand-edited link may hold anything: ignore what is not an index
                if not value.isdigit():
                    continue
                value = int(value)
            st.session_state[f"url_{key}"] = value


def url_value(key: str, default=None):
    """A value from the query string (first run only), else `default`."""
    return st.session_state.pop(f"url_{key}", default)


def write_url(**values) -> None:
    for key, value in values.items():
        if value is None or value == "":
            st.query_params.pop(key, None)
        else:
            st.query_params[key] = str(value)


def language_switch() -> None:
    st.sidebar.radio(
        "Language / 语言", list(LANGUAGES), format_func=LANGUAGES.get, key="lang", horizontal=True
    )


def pick_model_source() -> str:
    """The sidebar's model choice: a preset, or whatever the user typed (hub id, folder, .gguf)."""
    st.sidebar.subheader(t("model"))
    from_url = url_value("model")
    if "model_preset" not in st.session_state:
        default = from_url if from_url in models.PRESETS else models.default_model()
        st.session_state["model_preset"] = default
        if from_url and from_url not in models.PRESETS:
            st.session_state["model_custom"] = from_url
    st.sidebar.selectbox(t("model_preset"), models.PRESETS, key="model_preset")
    st.sidebar.text_input(t("model_custom"), key="model_custom", help=t("model_custom_help"))
    return (st.session_state.get("model_custom") or "").strip() or st.session_state["model_preset"]


def get_model(source: str):
    """(model, source actually shown) or (None, source) after showing why it failed.

    Falls back to a random model only when no pretrained model can be had at all, and says so."""
    if source == RANDOM_MODEL_NAME:  # chosen on purpose: untrained attention, for comparison
        return models.load_random_model(), source
    # A failed source is not retried on every rerun (offline, each hub attempt costs ~12 s of timeouts)
    # until the user asks to.
    failures = st.session_state.setdefault("load_failures", {})
    if source in failures and st.sidebar.button(t("retry"), key="retry_load"):
        del failures[source]
    if source not in failures:
        try:
            problem = models.memory_problem(source)
            if problem is not None:
                need, free = problem
                st.sidebar.error(t("too_large", name=source, need=need, free=free))
                return None, source
            return _load_with_progress(source), source
        except Exception as error:  # any loading failure is shown to the user; the page keeps working
            failures[source] = t("model_failed", name=html.escape(source), error=html.escape(str(error)))
    st.sidebar.error(failures[source])
    default = models.default_model()
    if default != source and models.offline_path(default) is not None:
        st.sidebar.info(t("fallback_note", name=default))
        try:
            return _load_with_progress(default), default
        except Exception as error:  # a broken offline package: say so, then fall through
            st.sidebar.error(t("model_failed", name=default, error=html.escape(str(error))))
    if models.allow_random_fallback():
        st.sidebar.warning(t("random_warning"))
        return models.load_random_model(), RANDOM_MODEL_NAME
    return None, source


def _load_with_progress(source: str):
    """Load (or reuse) a model, showing the loading stages in the sidebar only when it really loads."""
    cached = models.cached_model(source)
    if cached is not None:
        return cached
    with st.sidebar.status(t("loading_model", name=source), expanded=True) as status:
        model = models.load_model(source, progress=lambda stage: status.write(stage))
        status.update(label=source, state="complete", expanded=False)
    return model


def model_facts(model) -> None:
    info = model.info
    st.sidebar.caption(t(
        "facts", family=info.model_type, layers=info.n_layers, heads=info.n_heads, kind=info.attention_kind,
        kv=info.n_kv_heads, params=f"{info.n_parameters / 1e6:.0f}M", device=info.device, dtype=info.dtype,
    ))
    if info.name == RANDOM_MODEL_NAME:
        st.warning(t("random_note"))
    elif info.name != info.path and models.offline_path(info.name) is not None:
        st.sidebar.caption(t("offline_note", name=info.name))


# Widgets in the shared sidebar are new widgets on every page (Streamlit keys them by page), so their
# values would reset on a page switch; re-assigning them at the top of each run keeps them.
SHARED_WIDGETS = ("lang", "model_preset", "model_custom")


def sidebar():
    """Language, model picker and model facts. Returns (model or None, source shown)."""
    for key in SHARED_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    restore_from_url()
    language_switch()
    source = pick_model_source()
    model, shown = get_model(source)
    if model is not None:
        model_facts(model)
    return model, shown
