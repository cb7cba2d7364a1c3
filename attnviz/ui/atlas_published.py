"""The Atlas dashboard's published atlas beside ours (issue 37, "Browse"): a HeadVis tree imported for the loaded
model (`atlas import --headvis TREE --for-model SOURCE`, into `<atlas folder>.published`: workbench.atlas.
published_folder, never a path a visitor gives). For the selected head its six published metrics next to ours
with the difference; one scatter per metric of ours against the published over every head; the published
examples where the tree had them. Without one, the command that imports one."""

from __future__ import annotations

import shlex

import streamlit as st

from attnviz import plots
from attnviz.ui import atlas_examples
from attnviz.ui.escape import md
from attnviz.ui.guard import workbench
from attnviz.ui.language import t
from attnviz.workbench import atlas as work


def _number(value) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{value:.4f}"


def _shape(grid) -> tuple[int, int]:
    return len(grid or []), max((len(row) for row in grid or []), default=0)


def differences(ours: dict, theirs: dict, names: list[str], layer: int, head: int) -> list[tuple]:
    """(metric, our value, the published one, ours - published) of one head; None where either is missing."""
    rows = []
    for name in names:
        mine = work.head_ranks(ours.get(name) or [], layer, head)[0]
        other = work.head_ranks(theirs.get(name) or [], layer, head)[0]
        # rounded as shown, + 0.0: a published value's own rounding (4 decimals) is no "-0.0000" difference
        rows.append((name, mine, other, None if mine is None or other is None else round(mine - other, 4) + 0.0))
    return rows


def section(model, source: str, found: dict, names: list[str], labels: dict, layer: int, head: int,
            label: str) -> None:
    bench = workbench()
    st.subheader(t("atlas_published_title"))
    try:
        theirs = work.published(bench, source)
    except ValueError:
        st.warning(t("atlas_unreadable"))
        return
    if theirs is None:
        st.caption(t("atlas_published_none"))
        st.code(f"python -m attnviz atlas import --headvis TREE --for-model {shlex.quote(source)}", language="bash")
        return
    ours_grids, their_grids = found.get("metrics") or {}, theirs.get("metrics") or {}
    st.caption(t("atlas_published_about", model=md(theirs.get("model", "")), texts=theirs.get("n_texts", 0)))
    shared = [name for name in names if name in their_grids]
    if not shared or _shape(ours_grids[shared[0]]) != _shape(their_grids[shared[0]]):
        n_layers, n_heads = _shape(their_grids[shared[0]]) if shared else (0, 0)
        st.warning(t("atlas_published_other_shape", layers=n_layers, heads=n_heads))
        return
    rows = differences(ours_grids, their_grids, shared, layer, head)
    st.markdown(t("atlas_published_head", head=label))
    st.dataframe({
        t("atlas_column_metric"): [labels[name] for name, *_ in rows],
        t("atlas_column_ours"): [_number(mine) for _, mine, _, _ in rows],
        t("atlas_column_published"): [_number(other) for _, _, other, _ in rows],
        t("atlas_column_difference"): [_number(gap) for *_, gap in rows],
    }, hide_index=True, key="atlas_published_metrics")
    figure = plots.metric_agreement({name: ours_grids[name] for name in shared},
                                    {name: their_grids[name] for name in shared}, labels,
                                    t("atlas_column_ours"), t("atlas_column_published"), selected=(layer, head))
    st.plotly_chart(figure, key="atlas_published_scatter", width="stretch", config={"displaylogo": False})
    st.caption(t("atlas_published_scatter_caption"))
    with st.expander(t("atlas_published_examples", head=label)):
        atlas_examples.section(model, work.published_folder(bench, source), layer, head, label, "atlas_pub",
                               own=False, seq_len=int(theirs.get("seq_len") or 0))
