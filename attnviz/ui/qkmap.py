"""The Explore page's map of one head's queries and keys across a corpus (AttentionViz, Yeh et al. 2023): the
built-in probe sentences, a treebank of the reference data or the visitor's file; PCA of the normalised
vectors, coloured by query/key, relative position or part of speech; a click on a point opens its sentence
on this page at this head. A heavy action (ui/heavy.py), computed once per (model, head, corpus) for everyone
(workbench.qkmap)."""

from __future__ import annotations

import streamlit as st

from attnviz import plots
from attnviz.ui.escape import md
from attnviz.ui.focus import set_focus
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.widgets import OPENED, head_picker, parsed_upload
from attnviz.workbench import qkmap as work

UPLOAD = "upload"


def corpus_label(choice: str) -> str:
    if choice == UPLOAD:
        return t("qkmap_corpus_upload")
    kind, _, rest = choice.partition(":")
    return t(f"qkmap_corpus_builtin_{rest}") if kind == "builtin" else t("qkmap_corpus_treebank", name=rest)


def _corpus(choice: str):
    """(corpus key, sentences) of the choice; (None, None) until a file is given or when it cannot be read."""
    if choice != UPLOAD:
        return choice, work.named_corpus(choice)
    try:
        upload = parsed_upload(t("qkmap_upload"), ["txt", "conllu"], "qkmap_file", work.uploaded_corpus)
    except ValueError as error:
        st.warning(t("qkmap_unreadable", error=md(error)))
        return None, None
    if upload is None:
        return None, None
    if upload.more:  # only the first MAX_SENTENCES are read: the slider asks for no more
        st.caption(t("qkmap_first_taken", n=len(upload.sentences)))
    return upload.key, upload.sentences


def _open_sentence(found) -> None:
    """The click's callback: the point's sentence becomes the page's text, at this head."""
    points = ((st.session_state.get("qkmap_plot") or {}).get("selection") or {}).get("points") or []
    for point in points:
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and len(data) >= 1:
            set_focus(text=found.sentences[int(data[0])], text_b="", layer=found.layer, head=found.head)
            st.session_state[OPENED] = True
            return


@st.fragment
@guarded
def qk_corpus_map(model, source: str) -> None:
    with st.expander(t("qkmap_title")):
        st.caption(t("qkmap_caption"))
        columns = st.columns(4)
        layer, head = head_picker(columns, model.info.n_layers, model.info.n_heads, prefix="qkmap_")
        choices = [*work.corpora(), UPLOAD]
        labels = {c: corpus_label(c) for c in choices}  # in this run's language (ui/sinks.py says why)
        choice = columns[2].selectbox(t("qkmap_corpus"), choices, key="qkmap_corpus", format_func=labels.get,
                                             placeholder=t("choose_option"))
        n = columns[3].slider(t("qkmap_sentences"), 10, work.MAX_SENTENCES, work.DEFAULT_SENTENCES, 10,
                              key="qkmap_n")
        corpus, sentences = _corpus(choice)
        if corpus is None:
            return
        n = min(n, len(sentences))
        bench = workbench()
        found = work.result(bench, source, layer, head, corpus, n)
        if found is None:
            found = heavy_action(
                "qkmap_run", t("qkmap_run", n=n, layer=layer, head=head), (source, layer, head, corpus, n),
                lambda job: work.qk_map(bench, model, source, layer, head, corpus, sentences, n,
                                        progress=job.progress),
                lambda done, total: t("qkmap_progress", done=done, total=total))
            if found is None:
                return
        tagged = any(found.tags)
        colourings = ("kind", "position", "pos") if tagged else ("kind", "position")
        names = {c: t(f"qkmap_colour_{c}") for c in colourings}
        colour = st.radio(t("qkmap_colour"), colourings, horizontal=True, key="qkmap_colour", format_func=names.get)
        figure = plots.qk_map_figure(found, colour if colour in colourings else "kind",
                                     t("qkmap_figure_title", layer=layer, head=head, n=len(found.sentences)),
                                     t("qkmap_query"), t("qkmap_key"), t("qkmap_relative"))
        st.plotly_chart(figure, key="qkmap_plot", width="stretch", on_select=lambda: _open_sentence(found),
                        selection_mode="points", config={"displaylogo": False})
        if st.session_state.pop(OPENED, False):
            st.rerun()  # scope "app": the page draws the sentence and its head detail
        st.caption(t("qkmap_note", points=2 * found.n_points, scale=found.scale,
                     pc1=found.explained[0], pc2=found.explained[1]))
