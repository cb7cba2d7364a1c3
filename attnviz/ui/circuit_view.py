"""The Explore page's circuit of heads (interventions.circuit through workbench.circuit): for a clean and a
corrupted sentence (seeded from the focus's pair, or a built-in pair), a target and a contrast token, the edges
between the embedding, the heads, the MLPs and the logits scored by edge attribution patching with integrated
gradients, the strongest connected ones drawn as a graph, how much of the logit difference that circuit alone
keeps (patched exactly) beside random circuits of its size, and the top edges' estimates beside their exact
effects. A heavy action (ui/heavy.py: progress, Cancel, the heavy-work slot), computed by workbench.circuit and
shared. `circuit_section(model, source)` draws it (Explore's "Does it matter" tab)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.plots.circuit import circuit_graph
from attnviz.ui.escape import md
from attnviz.ui.guard import guarded, public_message, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.patching import MIN_GAP, pair_inputs
from attnviz.workbench import circuit as work
from attnviz.workbench.patching import pair_of

DEFAULT_SIZE = 100  # edges: readable as a graph, and enough to carry a share of the difference on SmolLM2's pairs


def circuit_section(model, source: str) -> None:
    """The section: its inputs, then the circuit (a fragment). `source`: the model's name as the page loaded it."""
    with st.expander(t("circuit_title")):
        st.caption(t("circuit_caption"))
        if not model.info.causal:
            st.info(t("circuit_decoders_only"))
            return
        left, right, clean, corrupt, target, contrast = pair_inputs(model, source, "circuit")
        direction = left.radio(t("circuit_direction"), ("denoise", "noise"), horizontal=True,
                               key="circuit_direction",
                               format_func={d: t(f"circuit_{d}") for d in ("denoise", "noise")}.get)
        size = right.select_slider(t("circuit_size"), work.SIZES, value=DEFAULT_SIZE, key="circuit_size")
        circuit_results(model, source, clean.strip(), corrupt.strip(), target, contrast, direction, int(size))


@st.fragment
@guarded
def circuit_results(model, source: str, clean: str, corrupt: str, target: str, contrast: str, direction: str,
                    size: int) -> None:
    if not clean or not corrupt:
        st.info(t("patch_empty"))
        return
    refusal = work.refusal(model)
    if refusal is not None:
        st.info(t("circuit_unsupported", reason=md(refusal)))
        return
    try:
        pair_of(model, clean, corrupt, target, contrast)
    except ValueError as error:
        st.warning(t("circuit_refused", error=md(public_message(error, source))))
        return
    bench = workbench()
    inputs = (source, clean, corrupt, target, contrast, direction, size)
    found = work.result(bench, *inputs)
    if found is None:
        found = heavy_action(
            "circuit_run", t("circuit_run", size=size), inputs,
            lambda job: work.find(bench, model, *inputs, progress=job.progress),
            lambda done, total: t("circuit_progress", done=done, total=total))
        if found is None:
            return
    show_circuit(found)


def show_circuit(found) -> None:
    """The values, the faithfulness against the controls, the graph and the checked edges of a CircuitView."""
    gap = found.clean_value - found.corrupt_value
    st.caption(t("circuit_values", clean=found.clean_value, corrupt=found.corrupt_value, steps=found.steps))
    if gap <= 0:
        st.warning(t("patch_reversed", clean=found.clean_value, corrupt=found.corrupt_value))
    elif gap < MIN_GAP:
        st.warning(t("patch_small_gap", gap=gap, least=MIN_GAP))
    if not found.edges:
        st.info(t("circuit_none", top=found.top))
        return
    paths, edges = found.controls.get("paths", np.zeros(0)), found.controls.get("edges", np.zeros(0))
    st.markdown(t("circuit_faithfulness", edges=len(found.edges), top=found.top, total=found.n_all_edges,
                  faithfulness=found.faithfulness, paths=float(np.mean(paths)) if paths.size else float("nan"),
                  paths_max=float(np.max(paths)) if paths.size else float("nan"),
                  uniform=float(np.mean(edges)) if edges.size else float("nan"), samples=paths.size))
    if abs(found.complete - 1) > 1e-3:  # a pair of two lengths: some positions have no partner
        st.caption(t("circuit_complete", complete=found.complete))
    labels = shown_labels(found.labels)
    figure = circuit_graph(labels, list(found.layers), list(found.rows), list(found.edges), found.scores,
                           found.n_layers, found.n_heads, t("circuit_graph_title", edges=len(found.edges)),
                           t("circuit_score"), plot_text(), (labels[0], labels[-1]))
    st.plotly_chart(figure, key="circuit_graph", width="stretch", config={"displaylogo": False})
    st.caption(t("circuit_graph_caption"))
    if found.checked:
        st.caption(t("circuit_checked", k=len(found.checked), r=found.checked_r))
        st.dataframe({t("circuit_column_edge"): [f"{labels[u]} → {labels[v]}" for u, v, _, _ in found.checked],
                      t("circuit_column_estimate"): [round(a, 4) for _, _, a, _ in found.checked],
                      t("circuit_column_exact"): [round(e, 4) for _, _, _, e in found.checked]},
                     hide_index=True, key="circuit_checked")


def shown_labels(labels) -> list[str]:
    """The nodes' labels in the visitor's language: the embedding's and the logits' words translated, a head's
    ("L26 H0") and an MLP's ("MLP 3") as every view writes them."""
    words = {"embed": t("circuit_embed"), "logits": t("circuit_logits")}
    return [words.get(label, label) for label in labels]
