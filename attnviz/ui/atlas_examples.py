"""The Atlas dashboard's section on one head's examples (issue 37, "Browse"), as HeadVis shows them: the head's
sampled sequences (the top interval first, then the lower ones, each labelled with its interval and max), each
drawn as its tokens shaded by the head's attention, and the head's histograms (sequences per bin of their max,
attention mass per |q - k| bin) and top query and key tokens. Drawn for our atlas and for a published one alike
(`prefix` keeps their widgets apart).

Every token comes from a corpus: in HTML it is escaped once (`html.escape`), in figures by the plots, in tables it
is a cell (shown as text). The shading is the largest weight each token gets as a key in the kept COO (each
query's 8 largest >= 0.005), or, once a query token is picked, that query's row; darkest is the example's largest
past position 0 (position 0 is shown at most as dark).
"""

from __future__ import annotations

import html

import streamlit as st

from attnviz import plots
from attnviz.analysis.views import visible_token
from attnviz.ui.focus import set_focus
from attnviz.ui.guard import workbench
from attnviz.ui.language import t
from attnviz.ui.url_state import MAX_TEXT
from attnviz.workbench import atlas as work

EXPLORE_PAGE = "app_pages/0_Explore.py"
SHOWN = 4  # examples drawn at once (a 512-token example is ~60 KB of HTML); the others are picked one at a time
EVERY_QUERY = -1  # the query picker's "no query": each token shaded by the most it receives
TOP_ROWS = 10  # rows of each top-tokens table (HeadVis keeps 50)
SHADE = (76, 120, 168)  # plots.atlas_head.BAR_COLOR as RGB
CSS = ("<style>.avx-ex{font-family:monospace;line-height:2.1;margin:0 0 10px 0}"
       ".avx-ex span.tk{white-space:pre;padding:1px 2px;margin:0 1px;border-radius:3px}"
       ".avx-ex span.q{outline:2px solid #ff7f0e}.avx-ex.picked{border-left:3px solid #ff7f0e;padding-left:6px}"
       ".avx-lab{font-family:sans-serif;font-size:0.85em;color:#555;display:block;line-height:1.4}</style>")


def shown_token(token: str) -> str:
    """A token as one inline chip shows it (before HTML escaping): blank ones and line breaks as signs."""
    if not token.strip():
        return visible_token(token) or "∅"
    return token.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎").replace("\t", "⇥")


def example_label(example, number: int, n_intervals: int, say=t) -> str:
    """"#1 · interval 5 of 5 (top) · max 0.6734 · 13 tokens" in the page's language (plain text)."""
    key = "atlas_example_label_top" if example.interval >= n_intervals else "atlas_example_label"
    value = "–" if example.max is None else f"{example.max:.4f}"
    return say(key, n=number, interval=example.interval, of=n_intervals, max=value, tokens=example.seq_len)


def for_explore(text: str, limit: int = MAX_TEXT) -> str:
    """An example's text as Explore takes it: whole, or cut at the last space within `limit` characters (what a
    link holds: url_state.MAX_TEXT), so that no word is cut in two; at `limit` where there is no space."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > 0 else cut


def tokens_html(example, label: str, query: int = EVERY_QUERY, picked: bool = False, say=t) -> str:
    """One example as HTML: its label, then its tokens, each shaded by the attention it gets (module docstring)
    with the exact weight in its tooltip. Every piece of text is escaped here, once."""
    tokens = [shown_token(token) for token in example.tokens]
    if query == EVERY_QUERY:
        weights, sources = example.received()
    else:
        weights, sources = example.row(query), None
    # the scale leaves position 0 out, as the example's max does: many heads park most of their attention there
    # (a sink), and on its scale every other token would be white
    top = next((float(part.max()) for part in (weights[1:], weights) if len(part) and part.max() > 0), 1.0)
    spans = []
    for k, (token, weight) in enumerate(zip(tokens, weights)):
        if query != EVERY_QUERY:
            tip = (say("atlas_tip_from", k=k, token=token, q=query, query=tokens[query], weight=f"{weight:.4f}")
                   if weight > 0 else say("atlas_tip_from_none", k=k, token=token, q=query, query=tokens[query]))
        elif weight > 0:
            q = int(sources[k])
            tip = say("atlas_tip_received", k=k, token=token, weight=f"{weight:.4f}", q=q, query=tokens[q])
        else:
            tip = say("atlas_tip_none", k=k, token=token)
        alpha = min(1.0, weight / top)
        style = (f' style="background:rgba({SHADE[0]},{SHADE[1]},{SHADE[2]},{alpha:.2f})'
                 f'{";color:#fff" if alpha > 0.55 else ""}"') if weight > 0 else ""
        kind = "tk q" if k == query else "tk"
        spans.append(f'<span class="{kind}"{style} title="{html.escape(tip)}">{html.escape(token)}</span>')
    return (f'<div class="avx-ex{" picked" if picked else ""}"><span class="avx-lab">{html.escape(label)}</span>'
            f'{"".join(spans)}</div>')


def section(model, folder, layer: int, head: int, label: str, prefix: str, own: bool, seq_len: int) -> None:
    """The head's examples and histograms from the atlas at `folder` (ours, or the published one: `own` False),
    read once per file version and head (workbench.atlas.head_read)."""
    try:
        read = work.head_read(workbench(), folder, layer, head)
    except ValueError:
        st.warning(t("atlas_unreadable"))
        return
    if read is None:
        return
    if not read.has_examples:
        st.caption(t("atlas_examples_absent"))
        return
    examples(model, read, label, prefix, own, seq_len)
    histograms(read, prefix)


def _kept_for(key: str, owner: tuple, options, first) -> None:
    """A picker's choice holds for one `owner` (a head, an example): for another one, or when the choice is no
    longer among the options (a rebuilt atlas), the picker starts again from `first`. The keys stay the same, so
    that the language switch can redraw them with their new labels (language.TRANSLATED_WIDGETS)."""
    if st.session_state.get(f"_{key}_for") != owner or st.session_state.get(key, first) not in options:
        st.session_state[key] = first
    st.session_state[f"_{key}_for"] = owner


def examples(model, read, label: str, prefix: str, own: bool, seq_len: int) -> None:
    found = read.examples
    st.markdown(t("atlas_examples_title", head=label, n=len(found)))
    if not found:
        st.caption(t("atlas_examples_none"))
        return
    st.caption(t("atlas_examples_caption", shown=min(SHOWN, len(found))))
    # labels made now, in this run's language (ui/sinks.py says why)
    labels = [example_label(e, i + 1, read.n_intervals) for i, e in enumerate(found)]
    left, middle, right = st.columns([3, 2, 2])
    options = list(range(len(found)))
    _kept_for(f"{prefix}_example", (read.layer, read.head), options, 0)
    chosen = left.selectbox(t("atlas_example_pick"), options, format_func=labels.__getitem__,
                            key=f"{prefix}_example")
    example = found[chosen]
    queries = {EVERY_QUERY: t("atlas_example_every_query")} | {
        q: f"{q}: {shown_token(token)}" for q, token in enumerate(example.tokens)}
    _kept_for(f"{prefix}_query", (read.layer, read.head, chosen), queries, EVERY_QUERY)
    query = middle.selectbox(t("atlas_example_query"), list(queries), key=f"{prefix}_query",
                             format_func=queries.__getitem__)
    text = work.example_text(model, example, own, seq_len)
    if right.button(t("atlas_example_open", head=label), key=f"{prefix}_open"):
        set_focus(text=for_explore(text), text_b="", layer=read.layer, head=read.head)
        st.switch_page(EXPLORE_PAGE)
    if len(text) > MAX_TEXT:
        right.caption(t("atlas_example_cut", n=len(text), limit=MAX_TEXT))
    drawn = [*range(min(SHOWN, len(found))), *([chosen] if chosen >= SHOWN else [])]
    st.html(CSS + "".join(tokens_html(found[i], labels[i], query if i == chosen else EVERY_QUERY, i == chosen)
                          for i in drawn))
    if len(found) > SHOWN:
        st.caption(t("atlas_examples_more", n=len(found) - SHOWN))


def histograms(read, prefix: str) -> None:
    """The head's two histograms side by side, then its top query and key tokens as two small tables."""
    left, right = st.columns(2)
    if read.max_histogram is not None:
        h = read.max_histogram
        left.plotly_chart(plots.max_histogram(h.edges, h.values, t("atlas_max_histogram_title"),
                                              t("atlas_max_histogram_x"), t("atlas_max_histogram_y")),
                          key=f"{prefix}_max_histogram", width="stretch", config={"displaylogo": False})
        if h.mean is not None:
            left.caption(t("atlas_max_histogram_mean", mean=f"{h.mean:.4f}"))
    else:
        left.caption(t("atlas_max_histogram_absent"))
    if read.qk_distance is not None:
        h = read.qk_distance
        right.plotly_chart(plots.qk_distance_histogram(h.edges, h.values, t("atlas_qk_histogram_title"),
                                                       t("atlas_qk_histogram_x"), t("atlas_qk_histogram_y")),
                           key=f"{prefix}_qk_histogram", width="stretch", config={"displaylogo": False})
        right.caption(t("atlas_qk_histogram_corpus" if h.source == "corpus" else "atlas_qk_histogram_examples"))
    left, right = st.columns(2)
    for column, rows, title, key in ((left, read.top_query_tokens, "atlas_top_query_tokens", "query"),
                                     (right, read.top_key_tokens, "atlas_top_key_tokens", "key")):
        column.markdown(t(title))
        column.dataframe({t("column_token"): [visible_token(token) or "∅" for token, _ in rows[:TOP_ROWS]],
                          t("atlas_column_weight"): [f"{weight:.4f}" for _, weight in rows[:TOP_ROWS]]},
                         hide_index=True, key=f"{prefix}_top_{key}_tokens")
