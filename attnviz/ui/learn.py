"""The Learn page: the formulas, MHA vs MQA vs GQA run live on attnviz's own module, the original
Transformer's configuration beside the loaded model's, and the code that computes every view."""

from __future__ import annotations

import inspect

import streamlit as st
import torch

from attnviz.attention import MultiHeadAttention
from attnviz.ui.common import sidebar, t

# Vaswani et al. 2017, Table 3: the base and big models, by row; a row's name is t(f"row_{row}"), or
# the symbol itself where there is no such key (d_model, d_ff, d_k = d_v).
ORIGINAL_TRANSFORMER = {
    "layers": (6, 6),
    "d_model": (512, 1024),
    "d_ff": (2048, 4096),
    "heads": (8, 16),
    "d_k = d_v": (64, 64),
    "dropout": (0.1, 0.3),
    "label_smoothing": (0.1, 0.1),
    "parameters": ("65M", "213M"),
}
NAMED_ROWS = {"layers", "heads", "dropout", "label_smoothing", "parameters"}


def render() -> None:
    model, _ = sidebar()
    st.title(t("learn_title"))
    formulas()
    variants()
    original(model)
    with st.expander(t("learn_code")):
        st.code(inspect.getsource(MultiHeadAttention.forward), language="python")


def formulas() -> None:
    st.subheader(t("learn_formulas"))
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V")
    st.latex(r"\mathrm{head}_i = \mathrm{Attention}\big(XW^Q_i,\; XW^K_{g(i)},\; XW^V_{g(i)}\big), \qquad "
             r"g(i) = \left\lfloor \frac{i}{H / K} \right\rfloor")
    st.latex(r"\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W^O")
    st.markdown(t("learn_formulas_text"))


def variants() -> None:
    """One class, three variants: the user picks sizes and sees shapes, groups and memory."""
    st.subheader(t("learn_variants"))
    cols = st.columns(3)
    d_model = cols[0].select_slider("d_model", [64, 128, 256, 512, 768, 1024], value=512, key="learn_d_model")
    n_heads = cols[1].select_slider("n_heads", [1, 2, 4, 8, 16], value=8, key="learn_heads")
    divisors = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
    n_kv_heads = cols[2].select_slider("n_kv_heads", divisors, value=divisors[-1], key="learn_kv_heads")
    kind = "MHA" if n_kv_heads == n_heads else ("MQA" if n_kv_heads == 1 else "GQA")
    layer = MultiHeadAttention(d_model, n_heads, n_kv_heads)
    with torch.no_grad():
        out, attn = layer(torch.randn(2, 10, d_model))
    head_dim = d_model // n_heads
    st.dataframe([{
        t("column_variant"): kind,
        "x": f"(2, 10, {d_model})",
        t("column_out"): str(tuple(out.shape)),
        t("column_attn"): str(tuple(attn.shape)),
        "head_dim": head_dim,
        t("column_parameters"): sum(p.numel() for p in layer.parameters()),
        t("column_kv_cache"): 2 * n_kv_heads * head_dim,
        t("column_kv_map"): " ".join(f"{h}→{g}" for h, g in enumerate(layer.kv_group)),
    }], hide_index=True, key="learn_table")
    st.caption(t("learn_variants_text"))


def original(model) -> None:
    st.subheader(t("learn_original"))
    base, big = t("column_base"), t("column_big")
    rows = {key: {"": t(f"row_{key}") if key in NAMED_ROWS else key, base: str(b), big: str(g)}
            for key, (b, g) in ORIGINAL_TRANSFORMER.items()}
    if model is not None:
        config, info = model.config, model.info
        kind = t("kind_decoder") if config.causal else t("kind_encoder")
        ours = {
            "layers": f"{config.n_layers} ({kind})", "d_model": config.d_model, "d_ff": config.d_ff,
            "heads": f"{config.n_heads} ({info.attention_kind}, {config.kv_heads} KV)",
            "d_k = d_v": config.dim_per_head, "dropout": t("inference"), "label_smoothing": "-",
            "parameters": f"{info.n_parameters / 1e6:.0f}M",
        }
        for key, row in rows.items():
            row[info.name] = str(ours[key])
    st.dataframe(list(rows.values()), hide_index=True)
    st.caption(t("learn_original_text"))
