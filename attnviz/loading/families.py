"""What each supported architecture is, for people: the table in README.md and docs/models.md, generated from
the registry (`scripts/families_table.py` rewrites both; tests/contract/test_families.py keeps them in sync), the
list an unsupported model's refusal names, and the families README's opening paragraph counts and names
(tests/contract/test_readme.py).
"""

from __future__ import annotations

from typing import NamedTuple


class Family(NamedTuple):
    name: str  # what people call it
    model_types: tuple[str, ...]  # HF model_type values the registry converts this way
    attention: str  # how its attention differs from softmax(QK^T / sqrt(d)) V with learned positions
    examples: str  # hub ids known to load


FAMILIES = [
    Family("BERT, RoBERTa, XLM-R", ("bert", "roberta", "xlm-roberta"), "MHA, learned positions, post-norm",
           "google-bert/bert-base-uncased, sentence-transformers/all-MiniLM-L6-v2, FacebookAI/roberta-base"),
    Family("DistilBERT", ("distilbert",), "MHA, learned positions, post-norm", "distilbert/distilbert-base-uncased"),
    Family("ModernBERT", ("modernbert",),
           "MHA, rotary (global and local bases), local band of 128 on two layers in three, GeGLU, pre-norm",
           "answerdotai/ModernBERT-base, answerdotai/ModernBERT-large"),
    Family("DeBERTa, DeBERTa-v2/v3", ("deberta", "deberta-v2"),
           "disentangled: content->content + content->position + position->content over 1/sqrt(3d), "
           "log-bucketed relative positions, no absolute ones (v3)",
           "microsoft/deberta-v3-base, microsoft/deberta-v3-small, microsoft/deberta-base "
           "(deberta-v2-xlarge's convolution: refused)"),
    Family("ELECTRA", ("electra",), "MHA, learned positions, post-norm; embeddings projected in when narrower",
           "google/electra-base-discriminator, google/electra-small-generator"),
    Family("ALBERT", ("albert",), "MHA, learned positions, post-norm; factorised embeddings, one shared layer",
           "albert/albert-base-v2"),
    Family("GPT-2", ("gpt2",), "MHA, causal, learned positions", "openai-community/gpt2"),
    Family("Llama, Mistral, Qwen2", ("llama", "mistral", "qwen2"),
           "GQA, rotary (llama3 scaling), Mistral's sliding window",
           "HuggingFaceTB/SmolLM2-135M-Instruct, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B"),
    Family("Gemma", ("gemma",), "MQA (2B) or MHA (7B), rotary, (1 + w) RMSNorm, GeGLU, embeddings × √d",
           "google/gemma-2b, google/gemma-7b"),
    Family("Gemma 2", ("gemma2",), "GQA, sliding/full alternation, score and logit soft-caps, "
           "query_pre_attn_scalar, sandwich norms", "google/gemma-2-2b, google/gemma-2-9b"),
    Family("Gemma 3 (text)", ("gemma3_text", "gemma3"), "GQA/MQA, q/k RMSNorm, 5 sliding : 1 full, local rotary base, "
           "sandwich norms", "google/gemma-3-270m (offline preset), google/gemma-3-1b-pt"),
    Family("Qwen3", ("qwen3",), "GQA, per-head q/k RMSNorm, optional sliding layers", "Qwen/Qwen3-0.6B"),
    Family("OLMo 2", ("olmo2",), "MHA, q/k RMSNorm over the projection, norms after each sublayer",
           "allenai/OLMo-2-0425-1B"),
    Family("SmolLM3", ("smollm3",), "GQA, NoPE layers (every 4th without rotary)", "HuggingFaceTB/SmolLM3-3B"),
    Family("Phi-3, Phi-4", ("phi3",), "GQA, fused qkv, rotary (LongRoPE; partial on Phi-4-mini), sliding window",
           "microsoft/Phi-3-mini-4k-instruct, microsoft/Phi-3-mini-128k-instruct, microsoft/Phi-4-mini-instruct"),
    Family("Mixtral", ("mixtral",), "GQA, rotary, sliding window; mixture-of-experts MLP (top-2 of 8)",
           "mistralai/Mixtral-8x7B-v0.1"),
    Family("gpt-oss", ("gpt_oss",), "GQA, learned sinks (rows sum to < 1), sliding/full layers, YaRN; experts",
           "dequantized checkpoints only (openai/gpt-oss-20b ships MXFP4 experts: refused)"),
    Family("DeepSeek-V2, DeepSeek-V3, Kimi K2", ("deepseek_v2", "deepseek_v3"),
           "multi-head latent attention (keys and values rebuilt per head from a latent, a shared rotary key, "
           "YaRN mscale), latent KV cache; shared and group-routed experts",
           "deepseek-ai/DeepSeek-V2-Lite, moonshotai/Moonlight-16B-A3B (tiny random configs tested)"),
    Family("GPT-NeoX, Pythia", ("gpt_neox",), "MHA, partial rotary (rotary_pct), parallel or sequential residual",
           "EleutherAI/pythia-70m, EleutherAI/pythia-160m"),
    Family("GPT-Neo", ("gpt_neo",), "MHA, learned positions, global/local (windowed) layers, unscaled scores",
           "EleutherAI/gpt-neo-125m"),
    Family("OPT", ("opt",), "MHA, learned positions counted from the mask (offset 2), pre- or post-norm",
           "facebook/opt-125m, facebook/opt-350m"),
    Family("BLOOM", ("bloom",), "MHA, ALiBi, embedding LayerNorm", "bigscience/bloom-560m"),
    Family("Phi 1/1.5/2", ("phi",), "MHA or GQA, partial rotary, parallel attention and MLP on one norm, "
           "optional q/k LayerNorm", "microsoft/phi-1_5, microsoft/phi-2"),
    Family("Marian (translation)", ("marian",), "encoder-decoder, sinusoidal positions, cross-attention",
           "Helsinki-NLP/opus-mt-en-de"),
    Family("T5, Flan-T5 (translation, summarisation)", ("t5",),
           "encoder-decoder, relative position buckets per head (bidirectional / causal), unscaled scores, "
           "RMSNorm pre-norm, ReLU (1.0) or gated-GELU (v1.1, Flan)",
           "google-t5/t5-small, google/flan-t5-small, google/t5-v1_1-small"),
    Family("BART (summarisation)", ("bart",), "encoder-decoder, learned positions (offset 2), embedding LayerNorm, "
           "post-norm", "facebook/bart-base, facebook/bart-large-cnn"),
]


def families_by_type() -> dict[str, Family]:
    return {model_type: family for family in FAMILIES for model_type in family.model_types}


def supported_list() -> str:
    """One line for error messages: 'BERT, RoBERTa, XLM-R (bert, roberta, xlm-roberta); ...'."""
    return "; ".join(f"{f.name} ({', '.join(f.model_types)})" for f in FAMILIES)


TABLE_START, TABLE_END = "<!-- supported-architectures:start -->", "<!-- supported-architectures:end -->"


def markdown_table() -> str:
    """The supported-architectures table, between the markers that README.md and docs/models.md carry."""
    rows = ["| Family | `model_type` | Attention | Checkpoints |", "| --- | --- | --- | --- |"]
    for f in FAMILIES:
        types = ", ".join(f"`{t}`" for t in f.model_types)
        rows.append(f"| {f.name} | {types} | {f.attention} | {f.examples} |")
    return "\n".join([TABLE_START, *rows, TABLE_END])


def replace_table(document: str) -> str:
    """`document` with the text between the markers replaced by the current table."""
    start, end = document.index(TABLE_START), document.index(TABLE_END) + len(TABLE_END)
    return document[:start] + markdown_table() + document[end:]
