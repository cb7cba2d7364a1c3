"""The Explore page's logit lens (readouts.logit_lens): the residual stream after every layer and every
attention sub-block read through the model's own final norm and head, at one position: the rank and
probability of a target token across reads, the top tokens of each read, and the layers x positions picture
of top-1 tokens."""

from __future__ import annotations

import streamlit as st

from attnviz.plots import readout as figures
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.readout import computed, opening, token_box
from attnviz.ui.tokens import each_token, text_tokens
from attnviz.workbench import readout as work


@st.fragment
@guarded
def logit_lens_section(model, source: str, text: str, trace, paired: bool) -> None:
    opened = opening(model, "lens_title", "lens_caption", paired, trace, source, text, "lens")
    if opened is None:
        return
    where, (right,) = opened
    with right:
        target = token_box(model, "readout_target", "lens_target", "readout_target_help")
    bench = workbench()
    result = computed("lens_run", t("lens_run"), work.lens_key(source, text, where, target),
                      lambda progress: work.logit_lens(bench, source, text, where, target, progress), len(trace.tokens))
    if result is None:
        return
    # Tokens are data: they go in a table's token column, never in a sentence of the page's language.
    st.dataframe({t("column_token"): each_token(model, [result.target_id]),
                  t("readout_role"): [t("readout_role_target")],
                  t("lens_column_target_rank"): [int(result.target_rank[-1]) + 1]}, hide_index=True,
                 key="lens_target_table")
    labels = read_labels(result.labels)
    st.plotly_chart(figures.target_curve(labels, result.target_rank, result.target_prob,
                                         each_token(model, [result.target_id])[0],
                                         t("lens_curve_title"), t("lens_column_target_rank")), key="lens_curve",
                    width="stretch")
    st.dataframe({
        t("lens_column_read"): labels,
        t("column_token"): [" · ".join(each_token(model, row)) for row in result.top_ids],
        t("column_probability"): [round(float(p), 4) for p in result.top_probs[:, 0]],
        t("lens_column_target_rank"): [int(r) + 1 for r in result.target_rank],
    }, hide_index=True, key="lens_table")
    grid = each_token(model, result.grid_ids.ravel())
    columns = result.grid_ids.shape[1]
    cells = [grid[row * columns:(row + 1) * columns] for row in range(result.grid_ids.shape[0])]
    st.plotly_chart(figures.lens_grid(cells, result.grid_probs, text_tokens(model, text), t("lens_grid_title"),
                                      plot_text(), t("lens_embed")), key="lens_grid", width="stretch")


def read_labels(labels: list[str]) -> list[str]:
    """The reads' names in the visitor's language: "embed", "L3 attn" (after layer 3's attention), "L3"."""
    return [t("lens_embed") if label == "embed" else label.replace(".attn", t("lens_after_attention"))
            for label in labels]
