"""The Explore page's lens switch (raw, value-weighted, rollout, flow) and its query-key view.

explore.py calls `lens_switch` once per run (it returns the lens whose view the mosaic and the head
detail draw), `mosaic_columns` on the mosaic figure it builds, `lens_head` and `query_key_view` inside
the head detail fragment. The arrays come from attnviz/workbench/lenses.py (shared, under the memory budget); the
arithmetic from attnviz.analysis.lenses and attnviz.analysis.query_key.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis import lenses
from attnviz.analysis.query_key import query_key
from attnviz.analysis.views import token_labels
from attnviz.trace import ReducedTrace
from attnviz.ui.common import (
    over_budget_message,
    seed_from_url,
    t,
    workbench,
    write_url,
)
from attnviz.ui.escape import md
from attnviz.ui.heavy import heavy_action
from attnviz.ui.widgets import position_input
from attnviz.workbench import OverBudget, shelf
from attnviz.workbench import lenses as lens_store

LENSES = list(lenses.LENSES)  # option values: "raw", "value", "rollout", "flow"
PER_LAYER = ("rollout", "flow")  # one map per layer, drawn as a single head
QK_KEYS = 48  # keys the query-key view draws at most: the visible ones with the highest weight


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
    st.caption(t(f"lens_{lens}_caption", limit=lenses.FLOW_MAX_TOKENS))
    write_url(lens=lens if lens != "raw" else None, lens_norm=None if normalise else False)
    if lens in PER_LAYER and trace.attentions.shape[-1] != trace.attentions.shape[-2]:
        st.info(t("lens_self_only"))
        return "raw", normalise
    if lens == "flow" and not flow_ready(trace, source, text, text_b):
        return "raw", normalise
    return lens, normalise


def flow_ready(trace, source: str, text: str, text_b: str | None) -> bool:
    """Whether the flow of this text is there to draw; offers to compute it (a heavy action: the
    process's heavy-work slot, a progress bar per layer, a Cancel that stops it by rerunning)."""
    n = len(trace.tokens)
    if n > lenses.FLOW_MAX_TOKENS:
        st.warning(t("lens_flow_too_long", limit=lenses.FLOW_MAX_TOKENS, n=n))
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
        peak = lens_store.lens_peak(workbench(), *view_key)
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


def profiled_map(trace, view_key: tuple, layer: int, view_head: int):
    """The token-level map [T, T] the head profile describes: None for raw weights (the head itself),
    else the lens's map of this layer (and head, for the value-weighted lens)."""
    source, text, text_b, _, _, lens = view_key[:6]
    if lens == "raw":
        return None
    # Row-normalised value weights: the profile's statistics (entropy, shares) read rows as distributions.
    weights = lens_store.lens_attentions(workbench(), source, text, text_b, lens, True)
    if weights is None or weights.shape[-1] != len(trace.tokens):
        return None
    return np.asarray(weights[layer, view_head], dtype=np.float32)


def lens_head(view, head: int, lens: str) -> int:
    """The head index into a lens view: a per-layer lens has one map per layer (index 0)."""
    if view.attentions.shape[1] == 1 and lens in PER_LAYER:
        st.caption(t("lens_head_note", lens=t(f"lens_{lens}")))
        return 0
    return head


def query_key_view(info, trace, source: str, text: str, text_b: str | None, layer: int, head: int) -> None:
    """Why one key wins (bertviz's neuron view, on the model's own queries and keys): for the chosen
    query token, each visible key's score split into positive and negative per-dimension products,
    and the products themselves, keys x dimensions."""
    labels = token_labels(trace)
    n = len(labels)
    long = isinstance(trace, ReducedTrace)  # a long text's: queries and keys kept by its pass, no maps
    seed_from_url("qk_query", n - 1 if info.causal else min(1, n - 1), "query")
    if not 0 <= st.session_state["qk_query"] < n:  # another text, or a stale link
        st.session_state["qk_query"] = n - 1
    # Lazy: the body (one more recorded forward pass) runs only while the expander is open; a link with
    # `query` opens it.
    box = st.expander(t("qk_title"), expanded="query" in st.query_params, key="qk_open", on_change="rerun")
    with box:
        if not box.open:
            return
        position = position_input(t("qk_query"), trace, "qk_query", n - 1)
        write_url(query=position)
        try:
            recorded = ({"queries": trace.queries[layer], "keys": trace.keys[layer]} if long
                        else lens_store.query_keys(workbench(), source, text, text_b, layer))
        except OverBudget as error:
            st.error(over_budget_message(error))
            return
        model = shelf.model_for(workbench(), source)
        setup = model.score_setup(layer, head)  # scale, window, soft-cap, ALiBi slope, learned sink
        names = model.score_term_names(layer)  # DeBERTa: c2c is q.k; c2p and p2c join as position terms
        terms = {name: recorded["score_terms"][i, head, position] for i, name in enumerate(names) if i} or None
        view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, head, position, terms=terms, **setup)
        config = model.config
        rotary = t("qk_rotary") if getattr(config, "rope_theta", None) is not None else ""
        st.caption(t("qk_caption", head=head, layer=layer, kv=view.kv_head, rotary=rotary, dim=view.head_dim))
        for key, applies in (("qk_alibi", setup["slope"] is not None), ("qk_disentangled", terms is not None),
                             ("qk_capped", view.capped),
                             ("qk_window", setup["window"] is not None), ("qk_sink", setup["sink"] is not None)):
            if applies:
                st.caption(t(key, slope=f"{setup['slope'] or 0:.4g}", cap=f"{setup['softcap'] or 0:g}",
                             window=setup["window"], share=f"{view.sink_share:.3f}"))
        row = (trace.head_window(layer, head, [position])[0] if long
               else np.asarray(trace.attentions[layer, head, position], dtype=np.float64))
        st.caption(t("qk_check", diff=float(np.abs(view.probabilities - row).max())))
        visible = np.flatnonzero(view.visible)
        shown = np.sort(visible[np.argsort(-view.probabilities[visible], kind="stable")[:QK_KEYS]])
        if len(shown) < len(visible):
            st.caption(t("qk_shown", n=len(shown), total=len(visible)))
        key_labels = [labels[j] for j in shown]
        words = {name: t(f"qk_{name}") for name in ("positive", "negative", "score", "weight", "key", "bias",
                                                     "dimension", "product")}
        st.plotly_chart(plots.query_key_bars(view.positive[shown], view.negative[shown], view.scores[shown],
                                             view.probabilities[shown], key_labels, shown.tolist(), words,
                                             bias=view.bias[shown] if setup["slope"] is not None or terms
                                             else None),
                        key="qk_bars", width="stretch")
        st.plotly_chart(plots.query_key_products(view.products[shown], view.query, view.keys[shown], key_labels,
                                                 shown.tolist(), words),
                        key="qk_products", width="stretch")
        top = int(shown[np.argmax(view.probabilities[shown])])
        st.caption(md(f"{position}: {labels[position]} → {top}: {labels[top]}  ({t('qk_score')} "
                      f"{view.scores[top]:.3f}, {t('qk_weight')} {view.probabilities[top]:.3f})"))
