"""Widgets used by more than one page: the word-pair ranking, the head picker, a clickable layers x heads
grid, a token position, an upload parsed once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from attnviz.analysis import rank_heads
from attnviz.analysis.views import token_labels
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus, follow_focus_change, head_label, set_focus
from attnviz.ui.language import t
from attnviz.ui.url_state import seed_from_url

TOP_HEADS_SHOWN = 10
Parsed = TypeVar("Parsed")


def word_pair_ranking(trace, key_prefix: str) -> list[tuple[int, int, float]]:
    """Pick a source and a target word of the trace; show every head ranked by word-level attention from
    source to target (docs/api.md word rule). Returns the full ranking ([] until two words are chosen)."""
    words = trace.words
    # Only words that have tokens, at most one a token: a truncated 4 MB text has millions of words, and
    # sending them all as options crashed the browser tab.
    choices = sorted({word for word in trace.word_of_token if word is not None})
    if len(choices) < 2:
        return []
    label = lambda i: f"{i}: {words[i]}"  # noqa: E731
    cols = st.columns(2)
    source = cols[0].selectbox(t("source_word"), choices, format_func=label,
                               key=f"{key_prefix}_source", index=None, placeholder=t("choose_option"))
    target = cols[1].selectbox(t("target_word"), choices, format_func=label,
                               key=f"{key_prefix}_target", index=None, placeholder=t("choose_option"))
    if source is None or target is None:
        return []
    if source == target:
        st.info(t("same_word"))
        return []
    try:
        ranking = rank_heads(trace, source, target)
    except ValueError as error:  # a word lost to truncation has no token
        st.warning(md(error))
        return []
    st.markdown(t("top_heads", source=md(words[source]), target=md(words[target])))
    top = ranking[:TOP_HEADS_SHOWN]
    head_table(st, {t("column_head"): [head_label(layer, head) for layer, head, _ in top],
                    t("column_attention"): [round(r[2], 4) for r in top]},
               [(layer, head) for layer, head, _ in top], f"{key_prefix}_ranking")
    return ranking


def head_table(container, columns: dict, heads: list[tuple[int, int] | None], key: str) -> None:
    """A table with one head a row (`heads`, None for a row with none): a click on a row makes its head the
    focus head, as a grid's click does (head_grid), and every one-head view follows."""
    def open_head() -> None:
        rows = ((st.session_state.get(key) or {}).get("selection") or {}).get("rows") or []
        if rows and 0 <= rows[0] < len(heads) and heads[rows[0]] is not None:
            set_focus(layer=heads[rows[0]][0], head=heads[rows[0]][1])
            st.session_state[OPENED] = True

    container.dataframe(columns, hide_index=True, key=key, on_select=open_head, selection_mode="single-row")
    container.caption(t("table_opens_head"))


def picked_head(event) -> tuple[int, int] | None:
    """(layer, head) of the first selected point that carries one in its customdata (the pick points of
    plots.score_grid and plots.model_view), else None. `event` is st.plotly_chart's selection state."""
    selection = (event or {}).get("selection") or {}
    for point in selection.get("points") or []:
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and len(data) >= 2:
            return int(data[0]), int(data[1])
    return None


OPENED = "_grid_opened_head"  # set by a grid's click callback; a fragment then reruns the whole page


def head_grid(container, figure, key: str, keys: tuple[str, str] | None = None, also: dict | None = None,
              in_fragment: bool = False) -> None:
    """A layers x heads grid whose click opens that head: the click's callback (which runs before the page)
    makes it the focus head (ui/focus.py), so every one-head view follows, or, with `keys`, puts it in those
    two state keys instead (the Translate page's own model); `also`'s values go into their keys. Inside a
    fragment (`in_fragment`) the click reruns only the fragment, so the page is rerun to draw the head where
    it is shown (the URL follows from there)."""
    def open_head() -> None:
        picked = picked_head(st.session_state.get(key))
        if picked is not None:
            if keys is None:
                set_focus(layer=picked[0], head=picked[1])
            else:
                st.session_state[keys[0]], st.session_state[keys[1]] = picked
            st.session_state.update(also or {})
            st.session_state[OPENED] = True

    container.plotly_chart(figure, key=key, width="stretch", on_select=open_head, selection_mode="points",
                           config={"displaylogo": False})
    if st.session_state.pop(OPENED, False) and in_fragment:
        st.rerun()  # scope "app": the head detail lies outside this fragment


# Past this many tokens a position is typed, not picked: a selectbox sends every option's label each rerun.
POSITION_OPTIONS = 512


def position_input(label: str, trace, key: str, default: int, follows_focus: bool = True) -> int:
    """A token position: a selectbox of "i: token" for a short text, a number input for a long one (with the
    chosen token named below it). It shows and sets the focus's read position (`follows_focus`; the default
    position while the focus has none or one outside this text), else a position of its own under `key`."""
    labels, n = token_labels(trace), len(trace.tokens)
    if follows_focus:
        pos = focus().pos
        binding = bound(key, "pos", shown=pos if isinstance(pos, int) and 0 <= pos < n else default,
                        convert=int)
    else:
        if not isinstance(st.session_state.get(key), int) or not 0 <= st.session_state[key] < n:
            st.session_state[key] = default  # a first run, or another text
        binding = {"key": key}
    if n <= POSITION_OPTIONS:
        position = st.selectbox(label, range(n), format_func=lambda i: f"{i}: {labels[i]}",
                                placeholder=t("choose_option"), **binding)
    else:
        position = st.number_input(label, 0, n - 1, step=1, **binding)
        st.caption(t("position_token", token=md(labels[position])))
    if follows_focus:
        follow_focus_change()
    return int(position)


def head_picker(columns, n_layers: int, n_heads: int, prefix: str = "", url_prefix: str = "",
                head_off: str | None = None, follows_focus: bool = True) -> tuple[int, int]:
    """A layer and a head, picked in two of `columns`, labelled `{prefix}layer` and `{prefix}head`: the focus
    head (`follows_focus`), else a head of their own keyed `{prefix}layer`/`{prefix}head` and seeded from the
    link's `{url_prefix}layer`/`{url_prefix}head`; 0 where it is out of range (a smaller model, or a stale
    link). `head_off`: why the head cannot be picked now (it is then disabled)."""
    bindings = {}
    for name, limit in (("layer", n_layers), ("head", n_heads)):
        key = prefix + name
        if follows_focus:
            value = getattr(focus(), name)
            bindings[name] = bound(key, name, shown=value if 0 <= value < limit else 0, convert=int)
        else:
            seed_from_url(key, 0, url_prefix + name)
            if not 0 <= st.session_state[key] < limit:
                st.session_state[key] = 0
            bindings[name] = {"key": key}
    layer = columns[0].selectbox(t(prefix + "layer"), range(n_layers), placeholder=t("choose_option"),
                                 **bindings["layer"])
    head = columns[1].selectbox(t(prefix + "head"), range(n_heads), disabled=head_off is not None, help=head_off,
                                placeholder=t("choose_option"), **bindings["head"])
    if follows_focus:
        follow_focus_change()
    return layer, head


def parsed_upload(label: str, types: list[str], key: str, parse: Callable[[str, object], Parsed]) -> Parsed | None:
    """A file uploader (`key`) and what `parse(name, stream)` made of its file, parsed once per file, not on every
    rerun: the page reruns on every click while the file stays in the uploader, and the corpus map's 19.9 MB
    file parsed each time took 20-29 s a click (issue 36, F2). The session keeps only what `parse` made (small:
    the sentences taken, never the bytes) of the uploader's latest file, by its `file_id`. None before a file is
    given; a file that cannot be read raises its ValueError on every run without being read again."""
    file = st.file_uploader(label, type=types, key=key)
    slot = f"_{key}_parsed"
    if file is None:
        st.session_state.pop(slot, None)
        return None
    held = st.session_state.get(slot)
    if held is None or held[0] != file.file_id:
        file.seek(0)
        try:
            held = (file.file_id, parse(file.name, file), None)
        except ValueError as error:
            held = (file.file_id, None, str(error))
        st.session_state[slot] = held
    if held[2] is not None:
        raise ValueError(held[2])
    return held[1]
