"""The Explore page's lens switch (raw, value-weighted, rollout, flow) and how a lens changes what the
mosaic and the head detail say.

The page calls `lens_switch` once per run (it returns the lens whose view, workbench.views.view, the mosaic
and the head detail draw), `mosaic_caption`, `mosaic_columns` and `peak_note` around the mosaic it builds,
`lens_head` inside the head detail fragment. The arrays come from attnviz/workbench/attention_lenses.py and views.py
(shared, under the memory budget); the arithmetic from attnviz.analysis.attention_lenses.
"""

from __future__ import annotations

import streamlit as st

from attnviz.analysis import attention_lenses
from attnviz.ui.guard import workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.url_state import seed_from_url, write_url
from attnviz.workbench import attention_lenses as lens_store
from attnviz.workbench import views
from attnviz.workbench.views import PER_LAYER, view_head

LENSES = list(attention_lenses.LENSES)  # option values: "raw", "value", "rollout", "flow"


def lens_switch(info, trace, source: str, text: str, text_b: str | None) -> tuple[str, bool]:
    """The lens radio (and the row-normalise toggle of the value-weighted lens). Returns the lens to
    draw and whether value weights are row-normalised: "raw" while flow is not available (too many
    tokens, not computed yet) or the stack is not self-attention."""
    seed_from_url("lens", "raw")
    seed_from_url("lens_norm", True)
    cols = st.columns([4, 1])
    lens = cols[0].radio(t("lens"), LENSES, key="lens", horizontal=True, help=t("lens_help"),
                         format_func={v: t(f"lens_{v}") for v in LENSES}.get)
    normalise = True
    if lens == "value":
        normalise = cols[1].toggle(t("lens_normalise"), key="lens_norm", help=t("lens_normalise_help"))
    st.caption(t(f"lens_{lens}_caption", limit=attention_lenses.FLOW_MAX_TOKENS))
    write_url(lens=lens if lens != "raw" else None, lens_norm=None if normalise else False)
    if lens in PER_LAYER and trace.attentions.shape[-1] != trace.attentions.shape[-2]:
        st.info(t("lens_self_only"))
        return "raw", normalise
    if lens == "flow" and not flow_ready(trace, source, text, text_b):
        return "raw", normalise
    return lens, normalise


def lens_switch_unavailable(reason: str) -> None:
    """The lens radio where the short page draws it, disabled at raw weights, and `reason` beside it: a page
    that cannot offer the lenses (the long-text body) says so where a visitor looks for them, not below."""
    st.radio(t("lens"), LENSES[:1], key="lens_unavailable", horizontal=True, disabled=True, help=reason,
             format_func={v: t(f"lens_{v}") for v in LENSES}.get)
    st.caption(reason)


def flow_ready(trace, source: str, text: str, text_b: str | None) -> bool:
    """Whether the flow of this text is there to draw; offers to compute it (a heavy action: the
    process's heavy-work slot, a progress bar per layer, a Cancel that stops it by rerunning)."""
    n = len(trace.tokens)
    if n > attention_lenses.FLOW_MAX_TOKENS:
        st.warning(t("lens_flow_too_long", limit=attention_lenses.FLOW_MAX_TOKENS, n=n))
        return False
    if lens_store.lens_attentions(workbench(), source, text, text_b, "flow") is not None:
        return True
    st.info(t("lens_flow_pending"))
    bench = workbench()
    flow = heavy_action("lens_flow_run", t("lens_flow_run"), (source, text, text_b),
                        lambda job: lens_store.compute_flow(bench, source, text, text_b, progress=job.progress),
                        lambda done, total: t("lens_flow_progress", done=done, total=total))
    if flow is None:
        return False
    st.rerun()  # the whole page draws the flow now
    return True


def peak_note(view_key: tuple) -> None:
    """Under the mosaic of unnormalised value weights: what the colours are relative to."""
    if len(view_key) > 5 and view_key[5] == "value" and not view_key[6]:
        peak = views.lens_peak(workbench(), *view_key)
        if peak is not None:
            st.caption(t("lens_peak", peak=peak))


def mosaic_columns(figure, lens: str):
    """A per-layer lens's mosaic has one column of tiles (explore draws it without a mean column): name it
    "all heads", not "H0"."""
    if lens in PER_LAYER:
        ticktext = list(figure.layout.xaxis.ticktext or [])
        if ticktext:
            ticktext[0] = t("lens_all_heads")
            figure.update_xaxes(ticktext=ticktext)
    return figure


def mosaic_caption(lens: str) -> str:
    """The mosaic's caption: heads as columns, or one map per layer for rollout and flow."""
    return t("lens_mosaic_caption", lens=t(f"lens_{lens}")) if lens in PER_LAYER else t("model_view_caption")


def lens_head(head: int, lens: str) -> int:
    """The head index into a lens view (workbench.views.view_head), saying so when a per-layer lens has
    one map per layer."""
    if lens in PER_LAYER:
        st.caption(t("lens_head_note", lens=t(f"lens_{lens}")))
    return view_head(lens, head)
