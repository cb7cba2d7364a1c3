"""Which model a page shows: the picker's source, loading it with progress under the budget, the fallback
when it cannot load, and the model's facts."""

from __future__ import annotations

import contextlib
import logging

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus
from attnviz.ui.guard import over_budget_message, public_message, workbench
from attnviz.ui.language import COUNTED_STAGES, stage_label, t
from attnviz.ui.url_state import MAX_MODEL
from attnviz.workbench import OverBudget, shelf
from attnviz.workbench.shelf import RANDOM_MODEL_NAME, ModelTooLarge, SourceRefused

log = logging.getLogger(__name__)


def pick_model_source() -> str:
    """The sidebar's model choice, bound to the focus's model: a preset, or whatever the user typed (hub id,
    folder, .gguf). The same on every page: no page shows another model unless it says so (get_model)."""
    st.sidebar.subheader(t("model"))
    asked = focus().model or shelf.default_model()
    last_preset = st.session_state.get("model_preset")
    preset_shown = asked if asked in shelf.PRESETS else (
        last_preset if last_preset in shelf.PRESETS else shelf.default_model())
    # Each preset by its name without the owner, and where it comes from: the sidebar's box cut the full ids
    # ("sentence-transformers/all-MiniLI"); the full id is the caption under it.
    origins = {name: shelf.preset_origin(name) for name in shelf.PRESETS}
    shown = {name: t("preset_builtin") if origin == "builtin" else t(f"preset_{origin}", name=name.rsplit("/", 1)[-1])
             for name, origin in origins.items()}
    preset = st.sidebar.selectbox(t("model_preset"), shelf.PRESETS, format_func=shown.get,
                                  placeholder=t("choose_option"),
                                  **bound("model_preset", "model", shown=preset_shown))
    st.sidebar.text_input(t("model_custom"), help=t("model_custom_help"), max_chars=MAX_MODEL,
                          **bound("model_custom", "model", shown="" if asked in shelf.PRESETS else asked,
                                  convert=_typed_model))
    # A hub preset says so before anyone waits (with no route, get_model refuses it at once and says why); an
    # offline one needs no line here: its box reads "· offline" and, once loaded, `offline_note` says the rest.
    if asked == preset and origins.get(preset) == "hub":
        st.sidebar.caption(t("preset_from_hub" if shelf.hub_reachable() else "preset_hub_unreachable",
                             name=md(preset)))
    return asked


def _typed_model(typed: str) -> str:
    """The model a typed name asks for: the name, or the preset in the box above when the name is cleared."""
    return typed.strip() or st.session_state.get("model_preset") or shelf.default_model()


def load_failure(name: str, error: Exception) -> str:
    """The message shown for a model that could not be loaded (Markdown, every user text escaped)."""
    if isinstance(error, SourceRefused):
        return t("source_refused")
    if isinstance(error, OverBudget):
        return over_budget_message(error, name)
    if isinstance(error, ModelTooLarge):
        return t("too_large", name=md(name), need=error.need / 1e9, free=error.limit / 1e9)
    if isinstance(error, OSError):  # the hub client's messages carry cache paths and URLs
        return t("hub_failed", name=md(name))
    if isinstance(error, ValueError):  # unsupported architecture, no safetensors, a strict-loading mismatch
        return t("model_failed", name=md(name), error=md(public_message(error, name)))
    log.exception("loading %r failed", name)  # the server's log gets the traceback, the page does not
    return t("model_failed", name=md(name), error=type(error).__name__)


def get_model(source: str):
    """(model, source actually shown) or (None, source) after showing why it failed.

    A model that cannot be shown is said so in the sidebar and the main area, with what is shown instead: the
    offline default, else a random model, only when no pretrained model can be had at all."""
    if source == RANDOM_MODEL_NAME:  # chosen on purpose: untrained attention, for comparison
        return shelf.random_encoder(workbench()), source
    # A failed source is not retried on every rerun (offline, each hub attempt costs ~12 s of timeouts)
    # until the user asks to.
    failures = st.session_state.setdefault("load_failures", {})
    message = failures.get(source)
    if message is None and hub_unreachable(source):  # said at once, not after the hub client's retries
        message = failures[source] = t("hub_unreachable", name=md(source))
    if message is None:
        try:
            model = _load_with_progress(source)
            if shelf.is_seq2seq(model):  # an encoder-decoder: its views are on the Translate page
                message = failures[source] = t("seq2seq_elsewhere", name=md(source))
            else:
                return model, source
        except Exception as error:  # every failure becomes a message; the page keeps working
            message = load_failure(source, error)
            # An import race between threads (transformers' lazy names) passes; the next run tries again.
            # Anything else stays until the visitor presses Retry: a refused size must not evict every
            # visitor's caches again on each of this visitor's reruns.
            if not isinstance(error, ImportError):
                failures[source] = message
    st.sidebar.error(message)
    st.sidebar.button(t("retry"), key="retry_load", on_click=_retry, args=(source,))
    model, shown = _fallback(source)
    name = asked_name(source)
    if model is None:
        st.error(t("not_shown", name=name) + "\n\n" + message)
    else:
        shown_name = t("random_model") if shown == RANDOM_MODEL_NAME else shown
        st.sidebar.caption(t("model_shown", name=md(shown_name)))
        st.warning(t("fallback_main", name=name, shown=md(shown_name)) + "\n\n" + message)
    return model, shown


def asked_name(source: str) -> str:
    """The model asked for, as the page may name it (Markdown-escaped). A refused source is never echoed:
    the answer must not tell a visitor whether a path exists."""
    return t("refused_source") if is_refused(source) else md(source)


def _retry(source: str) -> None:
    """Retry's callback, before the rerun it starts: forget the failure, and ask the hub route again."""
    st.session_state.setdefault("load_failures", {}).pop(source, None)
    shelf.forget_hub_route()  # the network may be back


def is_refused(source: str) -> bool:
    try:
        shelf.check_source(source)
    except SourceRefused:
        return True
    return False


def _fallback(source: str):
    """(model, name) shown in place of `source`: the offline default, else the random model; (None, source)."""
    default = shelf.default_model()
    if default != source and shelf.offline_path(default) is not None:
        try:
            return _load_with_progress(default), default
        except Exception as error:  # a broken offline package, or no memory left: say so, then fall through
            st.sidebar.error(load_failure(default, error))
    if shelf.allow_random_fallback():
        st.sidebar.warning(t("random_warning"))
        return shelf.random_encoder(workbench()), RANDOM_MODEL_NAME
    return None, source


def hub_unreachable(source: str) -> bool:
    """A hub source not loaded yet, with no route to the hub (decided once, quickly: loading.sources)."""
    if shelf.cached_model(workbench(), source, use=False) is not None:
        return False
    return not is_refused(source) and shelf.check_source(source).from_hub and not shelf.hub_reachable()


def _load_with_progress(name: str):
    """Load (or reuse) a model, showing the loading stages in the sidebar only when it really loads."""
    cached = shelf.cached_model(workbench(), name)
    if cached is not None:
        return cached
    source = shelf.check_source(name)
    _drop_last_runs_fragments()
    box = st.sidebar.empty()  # emptied when the load fails: no "Loading ..." left beside what is shown
    try:
        return _load_in(box, name, source)
    except BaseException:
        box.empty()
        raise


def _drop_last_runs_fragments() -> None:
    """Before a real load: Streamlit keeps the previous run's fragments, with the model they were drawn with
    as an argument, until this run ends, so the model this visitor just left could not be let go to make
    room (a 2.5 GB budget refused Gemma 3 after SmolLM2 with 0.97 GB "in use"). The sidebar runs before any
    fragment of this run registers, and this run registers its own again."""
    ctx = get_script_run_ctx()
    if ctx is not None and not ctx.fragment_ids_this_run:  # a full run: sidebar() is never in a fragment
        with contextlib.suppress(AttributeError):  # Streamlit's own storage: absent in another version
            ctx.fragment_storage.clear()


def _load_in(box, name: str, source):
    with box.status(t("loading_model", name=md(name)), expanded=True) as status:
        counted = {}

        def show(stage: str) -> None:
            prefix = next((p for p in COUNTED_STAGES if stage.startswith(p)), None)
            if prefix is None:
                status.write(stage_label(stage))
                return
            if prefix not in counted:
                counted[prefix] = status.empty()
            counted[prefix].write(stage_label(stage))

        model = shelf.load_model(workbench(), source, progress=show)
        status.update(label=md(name), state="complete", expanded=False)
    return model


def model_facts(model) -> None:
    info = model.info
    st.sidebar.caption(t(
        "facts", family=info.model_type, layers=info.n_layers, heads=info.n_heads, kind=info.attention_kind,
        kv=info.n_kv_heads, params=f"{info.n_parameters / 1e6:.0f}M", device=info.device, dtype=info.dtype,
    ))
    if info.dtype == "bfloat16":
        st.sidebar.info(t("bfloat16_note"))
    if info.name == RANDOM_MODEL_NAME:
        st.warning(t("random_note"))
    elif info.name != info.path and shelf.offline_path(info.name) is not None:
        st.sidebar.caption(t("offline_note", name=info.name))
