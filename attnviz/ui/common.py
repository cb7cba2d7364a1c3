"""What every page shares: the language switch, the model picker and the URL query string."""

from __future__ import annotations

import contextlib
import functools
import logging
import re

# Imported here, before any page runs: Streamlit and plotly import pandas lazily, and two sessions doing
# that at once saw a partially initialised module ("'pandas' has no attribute 'Series'", in a load test).
import pandas  # noqa: F401
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attnviz.plots import PlotText
from attnviz.ui.escape import md
from attnviz.ui.strings import LANGUAGES, translate
from attnviz.workbench import Busy, OverBudget, Workbench, shelf
from attnviz.workbench.memory import VISITOR
from attnviz.workbench.shared import IN_USE_S
from attnviz.workbench.shelf import RANDOM_MODEL_NAME, ModelTooLarge, SourceRefused

log = logging.getLogger(__name__)

# Widget keys that live in the URL, so a copied link reproduces the view, each with the parser of what it
# may hold: a hand-edited link may hold anything, and a value that does not parse is ignored.
INDEX = re.compile(r"[0-9]{1,4}", re.ASCII)  # isdigit() also accepts "²", which int() refuses
FRACTION = re.compile(r"0(\.[0-9]{1,2})?", re.ASCII)
MAX_TEXT = 20_000  # characters, as the text inputs' own max_chars
MAX_MODEL = 300
HEAD_LABEL = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}", re.ASCII)
MAX_LIST = 2048  # heads in a link's list of heads switched off (a 48 x 40 model has 1920)
MAX_CONTINUATION = 500  # characters, as the continuation input's max_chars
MAX_PAIR_TEXT = 2_000  # characters, as the minimal pair's Second sentence input (ui/pairs.py)


def _text(limit: int):
    return lambda value: value if len(value) <= limit else None


def _list(value: str, item: re.Pattern, limit: int = MAX_LIST):
    """Comma-separated items that each match `item`, at most `limit` of them (distinct, in order)."""
    items = value.split(",") if value else []
    if not items or len(items) > limit or not all(item.fullmatch(i) for i in items):
        return None
    return list(dict.fromkeys(items))


def _choice(*options: str):
    return lambda value: value if value in options else None


QUERY_KEYS = {
    "model": _text(MAX_MODEL), "text": _text(MAX_TEXT), "text_b": _text(MAX_TEXT),
    "layer": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "head": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "start": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "threshold": lambda v: float(v) if FRACTION.fullmatch(v) and float(v) <= 0.5 else None,
    "level": _choice("token", "word"), "hide": lambda v: {"0": False, "1": True}.get(v),
    "scale": _choice("linear", "power", "log"), "palette": _choice("default", "colorblind", "blues"),
    "pair": _choice("all", "ab", "ba", "aa", "bb"), "lines": _choice("out", "in", "both"),
    # Head ablation (ui/ablation.py): heads as "layer.head" and whole layers, comma-separated; a continuation.
    "off": lambda v: _list(v, HEAD_LABEL), "off_layers": lambda v: _list(v, INDEX),
    "cont": _text(MAX_CONTINUATION),
    # Lenses and the query-key view (ui/lenses.py)
    "lens": _choice("raw", "value", "rollout", "flow"), "lens_norm": lambda v: {"0": False, "1": True}.get(v),
    "query": lambda v: int(v) if INDEX.fullmatch(v) else None,
    # Minimal pairs (ui/pairs.py): the second sentence
    "compare": _text(MAX_PAIR_TEXT),
    # The decoder's first token set aside (ui/view_options.py); the visitor's language, one of ui/strings.LANGUAGES
    "first_aside": lambda v: {"0": False, "1": True}.get(v),
    "lang": lambda v: v if v in LANGUAGES else None,
}
# The Learn page's variant sizes (ui/learn.py); KV heads and pooled groups must also divide the heads, which
# the page checks against the heads it shows. The sentence there is `text`, shared with Explore.
LEARN_D_MODELS, LEARN_HEADS, LEARN_TOKENS = (64, 128, 256, 512, 768, 1024), (1, 2, 4, 8, 16), (16, 32, 64, 128, 256)
QUERY_KEYS.update({
    "d_model": lambda v: int(v) if v in map(str, LEARN_D_MODELS) else None,
    "heads": lambda v: int(v) if v in map(str, LEARN_HEADS) else None,
    "kv_heads": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "tokens": lambda v: int(v) if v in map(str, LEARN_TOKENS) else None,
    "groups": lambda v: int(v) if INDEX.fullmatch(v) else None,
})
# The Translate page (ui/translate.py): its own model, source and target texts (the inputs' max_chars: 500),
# attention kind, target-language token, layer and head.
QUERY_KEYS.update({
    "tmodel": _text(MAX_MODEL), "src": _text(500), "target": _text(500),
    "kind": _choice("cross", "encoder", "decoder"),
    "tlang": lambda v: v if re.fullmatch(r">>[A-Za-z0-9_]{1,32}<<", v, re.ASCII) else None,
    "tlayer": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "thead": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "tprefix": _text(100),  # T5's task prefix (ui/translate.py's MAX_PREFIX)
})
# An absolute path in a message (a cache folder, a resolved model folder): never shown to visitors.
_SERVER_PATH = re.compile(r"(?<![\w.:/-])(?:~|[A-Za-z]:)?[/\\][^\s'\"),;]+")


@st.cache_resource(show_spinner=False)
def workbench() -> Workbench:
    """The process's one Workbench (attnviz.workbench): every session's models, traces and views, under one
    memory budget. st.cache_resource shares it as it is: never pickled or copied per read (st.cache_data
    would copy a 140 MB trace on every rerun)."""
    return Workbench()


@contextlib.contextmanager
def heavy_slot():
    """This visitor's heavy-work slot (workbench.slots); while others hold the process's slots the page says
    it waits, and each of those calls is a point where a rerun by this visitor stops the wait."""
    waiting = st.empty()
    with workbench().slots.hold(session_id(), waiting=lambda: waiting.caption(t("waiting_slot"))):
        waiting.empty()
        yield


def guarded(render):
    """`render` (a page or a fragment) with every unforeseen error turned into a short message, its
    traceback going to the server's log only. `client.showErrorDetails = "none"` does the same, but
    Community Cloud overrides that setting with one that shows tracebacks. Streamlit's own rerun and
    stop signals are BaseExceptions and pass through."""

    @functools.wraps(render)
    def run(*args, **kwargs):
        VISITOR.set(session_id())  # whose results the stores hold (workbench.memory.VISITOR)
        workbench().jobs.touch_session(session_id())  # this visitor's running heavy actions are still wanted
        try:
            with refused():  # e.g. a fragment's trace was evicted since the page drew, and is refused now
                return render(*args, **kwargs)
        except Exception:
            log.exception("unexpected error in %s", render.__qualname__)
            st.error(t("unexpected_error"))

    return run


@contextlib.contextmanager
def refused(model: str | None = None):
    """The one place a page says that work was refused: this visitor already has a heavy action running
    (Busy), or it does not fit the memory budget (OverBudget; naming `model` when the work was that model's
    own load or run). Either ends the block, and what follows it runs on."""
    try:
        yield
    except Busy:
        st.warning(t("busy"))
    except OverBudget as error:
        st.error(over_budget_message(error, model))


def over_budget_message(error, model: str | None = None) -> str:
    """Markdown, the model's name escaped: the model does not fit, or (no `model`) this input does not now."""
    if model is not None:  # what it would take: others' models let go, or a larger budget
        sizes = dict(name=md(model), need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9)
        if error.waiting_helps:
            return t("over_budget_wait", **sizes, minutes=round(IN_USE_S / 60),
                     models=", ".join(md(other) for other in sorted(error.others)))
        return t("over_budget", **sizes)
    return t("trace_over_budget", need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9)


def t(key: str, **values) -> str:
    return translate(st.session_state.get("lang", "en"), key, **values)


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


def restore_from_url() -> None:
    """On a session's first run, seed widget state from the query string (?model=...&text=...)."""
    if st.session_state.get("_restored"):
        return
    st.session_state["_restored"] = True
    params = st.query_params
    for key, parse in QUERY_KEYS.items():
        value = parse(params[key]) if key in params else None
        if value is not None:
            st.session_state[f"url_{key}"] = value
    # The language at once: every word of this first run, page names included, is in it.
    seed_from_url("lang", "en")


def url_value(key: str, default=None):
    """A value from the query string (first run only), else `default`."""
    return st.session_state.pop(f"url_{key}", default)


def seed_from_url(key: str, default, url_key: str | None = None) -> None:
    """Give widget `key` its value from the link (first run), else `default`, before it is drawn."""
    if key not in st.session_state:
        st.session_state[key] = url_value(url_key or key, default)


def write_url(**values) -> None:
    """Put values in the query string; None or "" removes a key, booleans are written 0/1."""
    for key, value in values.items():
        if value is None or value == "":
            st.query_params.pop(key, None)
        else:
            st.query_params[key] = str(int(value)) if isinstance(value, bool) else str(value)


# Widgets whose option labels are translated. Streamlit keeps a keyed widget mounted when its labels
# change, so after a language switch a radio showed no choice and a selectbox its old label: setting their
# values again sends them to the browser with the new labels.
TRANSLATED_WIDGETS = ("model_preset", "level", "scale", "palette", "focus", "finder_relation", "finder_mode",
                      "finder_builtin", "finder_kind", "finder_example_direction", "pair_filter", "line_direction",
                      "ablation_layers", "translate_preset", "translate_kind", "lens",
                      "sinks_mine", "sinks_show", "qkmap_corpus", "qkmap_colour")


def _language_changed() -> None:
    for key in TRANSLATED_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def language_switch() -> None:
    # The options name each language in itself ("English", "中文"), whichever language is shown.
    language = st.sidebar.radio(t("language"), list(LANGUAGES), format_func=LANGUAGES.get, key="lang",
                                horizontal=True, on_change=_language_changed)
    write_url(lang=None if language == "en" else language)  # a shared link opens in the sender's language


def pick_model_source() -> str:
    """The sidebar's model choice: a preset, or whatever the user typed (hub id, folder, .gguf)."""
    st.sidebar.subheader(t("model"))
    from_url = url_value("model")
    if "model_preset" not in st.session_state:
        default = from_url if from_url in shelf.PRESETS else shelf.default_model()
        st.session_state["model_preset"] = default
        if from_url and from_url not in shelf.PRESETS:
            st.session_state["model_custom"] = from_url
    # Each preset by its name without the owner, and where it comes from: the sidebar's box cut the full ids
    # ("sentence-transformers/all-MiniLI"); the full id is the caption under it.
    origins = {name: shelf.preset_origin(name) for name in shelf.PRESETS}
    shown = {name: t("preset_builtin") if origin == "builtin" else t(f"preset_{origin}", name=name.rsplit("/", 1)[-1])
             for name, origin in origins.items()}
    preset = st.sidebar.selectbox(t("model_preset"), shelf.PRESETS, key="model_preset", format_func=shown.get,
                                  placeholder=t("choose_option"))
    st.sidebar.text_input(t("model_custom"), key="model_custom", help=t("model_custom_help"),
                          max_chars=MAX_MODEL)
    custom = (st.session_state.get("model_custom") or "").strip()
    # A hub preset says so before anyone waits (with no route, get_model refuses it at once and says why); an
    # offline one needs no line here: its box reads "· offline" and, once loaded, `offline_note` says the rest.
    if not custom and origins.get(preset) == "hub":
        st.sidebar.caption(t("preset_from_hub" if shelf.hub_reachable() else "preset_hub_unreachable",
                             name=md(preset)))
    return custom or st.session_state["model_preset"]


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def public_message(error: Exception, name: str, location: str | None = None) -> str:
    """`error` as a visitor may read it: what they typed stands where the server's path was, and any
    other absolute path (a cache folder) is cut out."""
    text = str(error).split("\n")[0]
    if location and location != name:
        text = text.replace(location, name)
    return _SERVER_PATH.sub("…", text)


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
    if message is None and _hub_unreachable(source):  # said at once, not after the hub client's retries
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
    # A refused source is never echoed: the answer must not tell a visitor whether a path exists.
    name = t("refused_source") if _refused(source) else md(source)
    if model is None:
        st.error(t("not_shown", name=name) + "\n\n" + message)
    else:
        shown_name = t("random_model") if shown == RANDOM_MODEL_NAME else shown
        st.sidebar.caption(t("model_shown", name=md(shown_name)))
        st.warning(t("fallback_main", name=name, shown=md(shown_name)) + "\n\n" + message)
    return model, shown


def _retry(source: str) -> None:
    """Retry's callback, before the rerun it starts: forget the failure, and ask the hub route again."""
    st.session_state.setdefault("load_failures", {}).pop(source, None)
    shelf.forget_hub_route()  # the network may be back


def _refused(source: str) -> bool:
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


def _hub_unreachable(source: str) -> bool:
    """A hub source not loaded yet, with no route to the hub (decided once, quickly: loading.sources)."""
    if shelf.cached_model(workbench(), source, use=False) is not None:
        return False
    return not _refused(source) and shelf.check_source(source).from_hub and not shelf.hub_reachable()


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


# Widgets in the shared sidebar are new widgets on every page (Streamlit keys them by page), so their
# values would reset on a page switch; re-assigning them at the top of each run keeps them.
SHARED_WIDGETS = ("lang", "model_preset", "model_custom")


def sidebar():
    """Language, model picker, model facts and the memory budget. Returns (model or None, source shown). The
    link keeps the model asked for, on every page, even while another is shown in its place."""
    for key in SHARED_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    restore_from_url()
    language_switch()
    source = pick_model_source()
    write_url(model=source)
    model, shown = get_model(source)
    if model is not None:
        model_facts(model)
    budget_note()
    return model, shown


def budget_note() -> None:
    """Which memory budget is in force, and why (workbench.memory.budget_in_force)."""
    rule = workbench().budget_rule
    st.sidebar.caption(t(f"budget_{rule.basis}", budget=rule.bytes / 1e9, of=rule.of / 1e9))
