"""The query-key view of one head (bertviz's neuron view, on the model's own queries and keys), drawn in the
Explore page's head detail, for a full or a long text. The queries and keys come from
workbench.attention_lenses.query_keys (one more recorded pass) or a long text's reduced trace; the arithmetic from
attnviz.analysis.query_key."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.query_key import query_key
from attnviz.analysis.views import token_labels
from attnviz.trace import ReducedTrace
from attnviz.ui.escape import md
from attnviz.ui.guard import refused, workbench
from attnviz.ui.language import t
from attnviz.ui.qk_attribution import qk_attribution_section
from attnviz.ui.url_state import write_url
from attnviz.ui.widgets import position_input
from attnviz.workbench import attention_lenses as lens_store
from attnviz.workbench import shelf

QK_KEYS = 48  # keys the query-key view draws at most: the visible ones with the highest weight
QK_PARTS = 8  # keys whose MLA score terms are listed


def query_key_view(info, trace, source: str, text: str, text_b: str | None, layer: int, head: int) -> None:
    """Why one key wins (bertviz's neuron view, on the model's own queries and keys): for the chosen
    query token, each visible key's score split into positive and negative per-dimension products,
    and the products themselves, keys x dimensions."""
    labels = token_labels(trace)
    n = len(labels)
    long = isinstance(trace, ReducedTrace)  # a long text's: queries and keys kept by its pass, no maps
    # Lazy: the body (one more recorded forward pass) runs only while the expander is open; a link with
    # `query` opens it.
    box = st.expander(t("qk_title"), expanded="query" in st.query_params, key="qk_open", on_change="rerun")
    with box:
        if not box.open:
            return
        # The focus's read position: the query whose scores are split (a link's `query` opens this view).
        position = position_input(t("qk_query"), trace, "qk_query", n - 1 if info.causal else min(1, n - 1))
        write_url(query=position)
        with refused():
            recorded = ({"queries": trace.queries[layer], "keys": trace.keys[layer]} if long
                        else lens_store.query_keys(workbench(), source, text, text_b, layer))
            query_key_figures(trace, labels, source, recorded, layer, head, position)
            qk_attribution_section(trace, source, text, text_b, layer, head, position)


def query_key_figures(trace, labels: list[str], source: str, recorded: dict, layer: int, head: int,
                      position: int) -> None:
    """The query's scores against each visible key, split in positive and negative products, and the
    products themselves; checked against the weights the page draws."""
    long = isinstance(trace, ReducedTrace)
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
    if view.parts is not None:  # MLA: the latent's no-rope term and the shared rotary key's term
        latent_parts(view, shown, key_labels)


def latent_parts(view, shown, key_labels: list[str]) -> None:
    """MLA's content score as its two terms, for the keys with the highest weight."""
    st.caption(t("qk_mla"))
    best = np.argsort(-view.probabilities[shown], kind="stable")[:QK_PARTS]
    st.table([{t("qk_key"): key_labels[i], t("qk_nope"): round(float(view.parts["no-rope"][shown[i]]), 4),
               t("qk_rope"): round(float(view.parts["rope"][shown[i]]), 4),
               t("qk_weight"): round(float(view.probabilities[shown[i]]), 4)} for i in best])
