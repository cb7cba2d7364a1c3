"""The mosaic section of the Explore page: every layer and head at once, one tile each, for a full text (from
its view: raw weights or a lens's) or a long one (from the tiles its reduced pass pooled). A click on a tile
picks that layer and head for the head detail below. Each figure is built here, by the page, once per view
and options (kept by workbench.traces.keep_figure)."""

from __future__ import annotations

import streamlit as st

from attnviz import plots
from attnviz.analysis.profile import has_learned_sinks
from attnviz.trace import ReducedTrace
from attnviz.ui import attention_lenses as lens_ui
from attnviz.ui.focus import set_focus
from attnviz.ui.guard import workbench
from attnviz.ui.kinds import kind_label
from attnviz.ui.language import plot_text, t
from attnviz.workbench import traces
from attnviz.workbench.views import PER_LAYER


def full_mosaic(view, trace, highlight, palette: str, scale: str, view_key: tuple) -> None:
    """The mosaic of a full text's view (workbench.views.view under `view_key`), the heads in `highlight` outlined."""
    st.subheader(t("model_view"))
    lens = view_key[5]
    st.caption(lens_ui.mosaic_caption(lens))
    bench, text = workbench(), plot_text()
    work_bytes = 4 * view.attentions.nbytes
    key = (*view_key, palette, scale, tuple(highlight), text)
    figure = traces.held_figure(bench, key)
    if figure is None:
        kv_group = trace.kv_group if view.attentions.shape[1] == len(trace.kv_group) else None
        with bench.run_slot(work_bytes):
            figure = lens_ui.mosaic_columns(plots.model_view(
                view.attentions, kv_group=kv_group, highlight=highlight, scale=scale, row_labels=view.labels,
                col_labels=view.labels, colorscale=palette, text=text, head_mean=lens not in PER_LAYER,
                layer_kinds=shown_kinds(trace)), lens)
        traces.keep_figure(bench, key, figure)
    lens_ui.peak_note(view_key)
    show(figure, trace, work_bytes, per_layer=lens in PER_LAYER)


def reduced_mosaic(held, view_key: tuple, palette: str, scale: str) -> None:
    """Every head at once, from the tiles the reduced pass pooled for this view."""
    st.subheader(t("model_view"))
    bench, text = workbench(), plot_text()
    level, hide_special, first_aside = view_key[3], view_key[4], view_key[7]
    positions = traces.reduced_positions(bench, view_key)
    key = ("reduced", *view_key, palette, scale, text)
    figure = traces.held_figure(bench, key)
    if figure is None:
        figure = traces.keep_figure(bench, key, plots.model_view(
            held.view_tiles(level, hide_special, first_aside), kv_group=held.kv_group, max_cells=held.tile,
            row_labels=positions.labels, scale=scale, colorscale=palette, text=text,
            layer_kinds=shown_kinds(held), pooled_tiles=True))
    show(figure, held, 0)


def show(figure, trace, work_bytes: int, per_layer: bool = False) -> None:
    """The mosaic under its notes; a click on a tile picks that head."""
    sink_mass_line(trace)
    meta = figure.layout.meta or {}
    if meta.get("pooled"):
        st.info(t("pooled", cells=meta["tile"][0]))
    # Serialising a long text's mosaic holds the interpreter for a while: one at a time (Workbench.run_slot).
    with workbench().run_slot(work_bytes):
        event = st.plotly_chart(figure, key="model_view", width="stretch", config={"displaylogo": False},
                                on_select="rerun", selection_mode="points")
    select_clicked_head(event, per_layer)


def sink_mass_line(trace) -> None:
    """Where the rest of a row went when the model has learned sinks (rows sum to less than 1; never
    renormalised): the mean over every row, and the most of one row."""
    if not has_learned_sinks(trace):
        return
    if isinstance(trace, ReducedTrace):  # each head's mean over its rows, and its largest row's
        mean, most = float(trace.statistics["sink_mass"].mean()), float(trace.statistics["sink_mass_max"].max())
    else:
        rows = trace.attentions.sum(-1)  # L, H, T
        mean, most = float(1 - rows.mean()), float(1 - rows.min())
    st.caption(t("sink_mass_line", mean=f"{mean:.3f}", most=f"{most:.3f}"))


def shown_kinds(trace) -> list[str] | None:
    """Each layer's attention kind in the visitor's language, for the mosaic's strip; None when every layer
    attends in full (no strip)."""
    kinds = trace.metadata.get("layer_kinds") or []
    return [kind_label(kind) for kind in kinds] if any(kind != "full" for kind in kinds) else None


def select_clicked_head(event, per_layer: bool = False) -> None:
    """A click on a tile picks that layer and head (the widgets below are created after this, so their
    state may still be set). Only a new click applies: the selection persists across reruns. A per-layer
    lens's one column picks the layer only: the head choice is kept for the raw weights."""
    points = [p for p in (event.selection.points if event else []) if p.get("customdata") is not None]
    if not points:
        return
    layer, head = (int(v) for v in points[0]["customdata"][:2])
    if st.session_state.get("_applied_click") != (layer, head):
        st.session_state["_applied_click"] = (layer, head)
        set_focus(layer=layer) if per_layer else set_focus(layer=layer, head=head)
