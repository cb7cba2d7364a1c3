"""The Explore page's information-flow routes (readouts.routes; Ferrando & Voita 2024): the graph of
heads and MLPs that carry the prediction at one position, pruned at a threshold the visitor sets, drawn
layer by layer; a click on a head opens it."""

from __future__ import annotations

import streamlit as st

from attnviz.plots import readout as figures
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.readout import computed, opening
from attnviz.ui.tokens import text_tokens
from attnviz.ui.widgets import head_grid
from attnviz.workbench import readout as work

# How many heads the graph shows (Routes.strongest), or all of it.
ALL = 10_000
HEADS_SHOWN = (5, 10, 20, 40, ALL)


@st.fragment
@guarded
def routes_section(model, source: str, text: str, trace, paired: bool) -> None:
    opened = opening(model, "routes_title", "routes_caption", paired, trace, source, text, "routes",
                     n_columns=3)
    if opened is None:
        return
    where, (middle, right) = opened
    with middle:
        threshold = st.slider(t("routes_threshold"), 0.01, 0.5, work.THRESHOLD, 0.01, key="routes_threshold",
                              help=t("routes_threshold_help"))
    with right:
        shown = st.select_slider(t("routes_heads_shown"), HEADS_SHOWN, value=HEADS_SHOWN[1], key="routes_heads_shown",
                                 format_func=lambda k: t("routes_all") if k == ALL else str(k),
                                 help=t("routes_heads_shown_help"))
    bench = workbench()
    graph = computed("routes_run", t("routes_run"), work.routes_key(source, text, where, threshold),
                     lambda progress: work.routes(bench, source, text, where, threshold, progress), len(trace.tokens))
    if graph is None:
        return
    heads = graph.heads()
    st.caption(t("routes_summary", nodes=len(graph.nodes), edges=len(graph.edges), heads=len(heads)))
    cut = graph.strongest(shown)  # the whole graph is hundreds of nodes: the heads that carry the most first
    if cut is not graph:
        st.caption(t("routes_cut", k=shown, nodes=len(cut.nodes), heads=", ".join(
            f"L{layer} H{head}" for layer, head in cut.heads())))
    tokens = text_tokens(model, text)
    head_grid(st, figures.routes_graph(cut.nodes, cut.edges, tokens, graph.n_heads, t("routes_graph_title"),
                                       plot_text(), names={"resid": t("routes_resid"), "mid": t("routes_mid"),
                                                           "mlp": "MLP", "embed": t("lens_embed")}),
              key="routes_graph", in_fragment=True)
