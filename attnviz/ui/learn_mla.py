"""The Learn page's MLA section: MHA, GQA, MQA and DeepSeek's multi-head latent attention side by side, how
each shares K and V, the cache bytes per token measured after decoding, and who uses it, at the original
Transformer's size and the loaded model's (attnviz.workbench.latent_kv)."""

from __future__ import annotations

import streamlit as st

from attnviz.ui.guard import workbench
from attnviz.ui.language import t
from attnviz.workbench.latent_kv import original_and_model
from attnviz.workbench.learn import NAMED_MODELS


def render(model) -> None:
    st.subheader(t("mla_title"))
    st.markdown(t("mla_text"))
    for index, result in enumerate(original_and_model(workbench(), None if model is None else model.config)):
        st.markdown(t("mla_original") if index == 0 else t("mla_loaded", name=model.info.name))
        st.table(rows(result))
        latent = result.latent
        st.caption(t("mla_caption", d_model=result.d_model, heads=result.n_heads, head_dim=result.head_dim,
                     layers=result.n_layers, groups=result.groups, rank=latent.kv_lora_rank,
                     rope=latent.qk_rope_head_dim, nope=latent.qk_nope_head_dim, v=latent.v_head_dim,
                     dtype=result.dtype))


def rows(result) -> list[dict]:
    latent = result.latent
    sharing = {"MHA": t("mla_share_mha"), "GQA": t("mla_share_gqa", group=result.n_heads // result.groups),
               "MQA": t("mla_share_mqa"),
               "MLA": t("mla_share_mla", rank=latent.kv_lora_rank, rope=latent.qk_rope_head_dim)}
    return [{t("column_variant"): row.kind, t("mla_col_sharing"): sharing[row.kind],
             t("mla_col_memory"): t("mla_memory", layer=f"{row.bytes_per_token:,}", layers=result.n_layers,
                                    model=f"{row.model_bytes_per_token:,}",
                                    share=f"{row.bytes_per_token / result.rows[0].bytes_per_token:.1%}"),
             t("mla_col_users"): ", ".join(name for name, _, _ in NAMED_MODELS[row.kind])}
            for row in result.rows]
