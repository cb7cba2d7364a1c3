"""Query-key attribution in the query-key view (and so in the Explore page's head detail): which earlier
components made this query seek this key, as the largest terms in sentences and as the query components x
key components matrix, one layer's heads together or apart. The split is attnviz.readouts.qk_attribution's,
computed by workbench.qk_attribution (one more recorded forward pass, shared, under the budget)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.profile import has_learned_sinks
from attnviz.analysis.views import token_labels
from attnviz.trace import ReducedTrace
from attnviz.ui.escape import md
from attnviz.ui.guard import workbench
from attnviz.ui.language import t
from attnviz.workbench import qk_attribution as qk_work

LARGEST = 10  # terms told as sentences
EMBEDDINGS = ("embed", "pos_embed", "type_embed")


def qk_attribution_section(trace, source: str, text: str, text_b: str | None, layer: int, head: int,
                           query: int) -> None:
    """Behind a toggle (the split costs a forward pass): the key (and a second key of the row to compare
    with), the rule, the check against the model's score, the largest terms, the matrix."""
    if not st.toggle(t("qka_toggle"), key="qka_on", help=t("qka_help")):
        return
    if isinstance(trace, ReducedTrace):  # a long text: every layer's head outputs would be recorded
        st.caption(t("qka_long"))
        return
    labels = token_labels(trace)
    n = len(labels)
    if st.session_state.get("qka_key") not in range(n):  # another text: the head's strongest key
        st.session_state["qka_key"] = int(np.argmax(np.asarray(trace.attentions[layer, head, query], np.float32)))
    if st.session_state.get("qka_key2") not in (None, *range(n)):
        st.session_state["qka_key2"] = None
    cols = st.columns([2, 2, 1])
    key = cols[0].selectbox(t("qka_key"), list(range(n)), key="qka_key", format_func=lambda j: f"{j}: {labels[j]}",
                            placeholder=t("choose_option"))
    key2 = cols[1].selectbox(t("qka_key2"), [None, *range(n)], key="qka_key2", placeholder=t("choose_option"),
                             format_func=lambda j: t("qka_no_key2") if j is None else f"{j}: {labels[j]}")
    # By layer first: a 30-layer model's matrix by component is 262 x 262, unreadable as a first view.
    grouped = cols[2].toggle(t("qka_grouped"), key="qka_grouped", value=True)
    try:
        split = qk_work.attribution(workbench(), source, text, text_b, layer, head, query, key, key2)
    except ValueError:  # the only one a page's positions can raise: a key the query does not see
        st.info(t("qka_hidden", k=key if key2 is None else f"{key}, {key2}", query=query))
        return
    st.caption(t("qka_caption", head=head, layer=layer, kv=split.kv_head))
    if key2 is not None:
        st.caption(t("qka_caption_difference", query=query, k=key, k2=key2))
    if split.softcap is not None:
        st.caption(t("qka_capped", cap=f"{split.softcap:g}", capped=split.capped))
    if has_learned_sinks(trace):
        st.caption(t("qka_sinks"))
    st.caption(t("qka_check", score=split.score, total=split.total, diff=abs(split.total - split.score)))
    st.markdown(f"**{t('qka_largest')}**")
    quoted = [f"'{label}'" for label in labels]
    key_token = quoted[key] if key2 is None else t("qka_versus", token=quoted[key], other=quoted[key2])
    st.markdown("\n".join(f"- {md(sentence(term, quoted[query], key_token))}" for term in split.largest(LARGEST)))
    rows, columns, matrix = split.table(grouped)
    words = {"query": t("qka_query"), "key": t("qka_key_axis"), "term": t("qka_term")}
    figure = plots.qk_attribution_heatmap(matrix, [label_of(r) for r in rows], [label_of(c) for c in columns],
                                          [qk_work.layer_of(r) for r in rows], [qk_work.layer_of(c) for c in columns],
                                          words)
    st.plotly_chart(figure, key="qka_matrix", width="stretch")


def part(name: str, side: str, token: str) -> str:
    """A component in words: 'the embedding of 'keys'', 'L2 H5 at 'are''."""
    if name in EMBEDDINGS:
        return t(f"qka_part_{name}", token=token)
    if name == "rest":
        return t("qka_part_rest", token=token)
    if name == "bias":
        return t(f"qka_part_bias_{side}")
    if name.endswith(".mlp"):
        return t("qka_part_mlp", layer=qk_work.layer_of(name), token=token)
    return t("qka_part_head", name=head_name(name), token=token)


def sentence(term, query_token: str, key_token: str) -> str:
    """One term as a sentence: 'query from L2 H5 at 'are' × key from the embedding of 'keys': 0.731'."""
    value = f"{term.value:+.3f}"
    if term.query in ("alibi", "t5_bucket"):
        return t(f"qka_sentence_{term.query}", value=value)
    if term.key == "c2p":
        return t("qka_sentence_c2p", query=part(term.query, "query", query_token), value=value)
    if term.query == "p2c":
        return t("qka_sentence_p2c", k=part(term.key, "key", key_token), value=value)
    return t("qka_sentence", query=part(term.query, "query", query_token), k=part(term.key, "key", key_token),
             value=value)


def label_of(name: str) -> str:
    """A matrix row's or column's label: heads as everywhere (L2 H5), the rest in words."""
    if name in (*EMBEDDINGS, "embeddings", "rest", "bias", "t5_bucket"):
        return t(f"qka_label_{name}")
    if name.endswith(".heads"):
        return f"L{qk_work.layer_of(name)} {t('qka_label_heads')}"
    if name.endswith(".mlp"):
        return f"L{qk_work.layer_of(name)}.MLP"
    return "ALiBi" if name == "alibi" else head_name(name)


def head_name(name: str) -> str:
    """The split's component name of a head, "L2.H5", as the app labels a head: "L2 H5"."""
    return name.replace(".H", " H", 1) if name.startswith("L") and ".H" in name else name
