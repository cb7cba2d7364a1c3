"""The link's query string: which keys a link may carry, each with the parser of what it may hold (a
hand-edited link may hold anything, and a value that does not parse is ignored), and reading and writing them."""

from __future__ import annotations

import re

import streamlit as st

from attnviz.ui.strings import LANGUAGES

# Widget keys that live in the URL, so a copied link reproduces the view, each with the parser of what it
# may hold: a hand-edited link may hold anything, and a value that does not parse is ignored.
INDEX = re.compile(r"[0-9]{1,4}", re.ASCII)  # isdigit() also accepts "²", which int() refuses


FRACTION = re.compile(r"0(\.[0-9]{1,2})?", re.ASCII)


MAX_TEXT = 20_000  # characters, as the text inputs' own max_chars


MAX_MODEL = 300


HEAD_LABEL = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}", re.ASCII)


MAX_LIST = 2048  # heads in a link's list of heads switched off (a 48 x 40 model has 1920)


MAX_CONTINUATION = 500  # characters, as the continuation input's max_chars


MAX_TOKEN_TEXT = 100  # characters of a typed target or contrast token, as their inputs' max_chars


MAX_PAIR_TEXT = 2_000  # characters, as the minimal pair's Second sentence input (ui/minimal_pairs.py)


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


# Explore's tabs, named by the question each answers (ui/explore.py; ui/locales: tab_<name>), in order.
EXPLORE_VIEWS = ("looks", "writes", "matters", "which", "check")

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
    # Lenses and the query-key view (ui/attention_lenses.py)
    "lens": _choice("raw", "value", "rollout", "flow"), "lens_norm": lambda v: {"0": False, "1": True}.get(v),
    "query": lambda v: int(v) if INDEX.fullmatch(v) else None,
    # Minimal pairs (ui/minimal_pairs.py): the second sentence
    "compare": _text(MAX_PAIR_TEXT),
    # The decoder's first token set aside (ui/view_options.py); the visitor's language, one of ui/strings.LANGUAGES
    "first_aside": lambda v: {"0": False, "1": True}.get(v),
    "lang": lambda v: v if v in LANGUAGES else None,
    # The focus (ui/focus.py): the read position, and the target and contrast tokens (one token each, typed)
    "pos": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "target": _text(MAX_TOKEN_TEXT), "contrast": _text(MAX_TOKEN_TEXT),
    # Explore's open tab, by the question it answers (ui/explore.py); the first one is the default
    "view": _choice(*EXPLORE_VIEWS),
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
# attention kind, target-language token, layer and head. Its target text was `target` before the focus took
# that key for the target token; a link opened on Translate still gives it there (ui/translate.py).
QUERY_KEYS.update({
    "tmodel": _text(MAX_MODEL), "src": _text(500), "ttarget": _text(500),
    "kind": _choice("cross", "encoder", "decoder"),
    "tlang": lambda v: v if re.fullmatch(r">>[A-Za-z0-9_]{1,32}<<", v, re.ASCII) else None,
    "tlayer": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "thead": lambda v: int(v) if INDEX.fullmatch(v) else None,
    "tprefix": _text(100),  # T5's task prefix (ui/translate.py's MAX_PREFIX)
})


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
