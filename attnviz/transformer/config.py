"""Model configuration: one small frozen dataclass (in the spirit of nanoGPT's GPTConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Family = Literal["bert", "roberta", "distilbert", "gpt2", "llama"]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu"]


@dataclass(frozen=True)
class ModelConfig:
    family: Family
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    n_kv_heads: int | None = None  # None: one KV head per query head (MHA)
    head_dim: int | None = None  # None: d_model // n_heads
    causal: bool = False
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    norm_eps: float = 1e-12
    pre_norm: bool = False  # False: post-norm (BERT); True: pre-norm with a final norm (GPT-2, Llama)
    gated_mlp: bool = False  # Llama's down(act(gate(x)) * up(x))
    activation: Activation = "gelu"
    max_positions: int | None = 512  # learned absolute positions; None with RoPE
    type_vocab_size: int | None = None  # BERT token types; None when the model has none
    position_offset: int = 0  # RoBERTa counts positions from padding_idx + 1
    pad_token_id: int | None = None
    rope_theta: float | None = None  # None: no rotary embedding
    rope_scaling: dict | None = field(default=None, hash=False)  # HF rope_parameters beyond "default"
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    embedding_norm: bool = False  # LayerNorm right after the embeddings (BERT family)
    lm_head: bool = False  # keep an unembedding for next-token predictions
    tie_word_embeddings: bool = False
    # A masked-LM head (BERT's cls.predictions, RoBERTa's lm_head) and the activation of its transform;
    # None: the checkpoint has none (sentence-embedding and fine-tuned encoders).
    mlm_head: Activation | None = None
    sliding_window: int | None = None  # Mistral-style local attention window

    def __post_init__(self) -> None:
        bad = {
            name: getattr(self, name)
            for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff")
            if getattr(self, name) < 1
        }
        if bad:
            raise ValueError(f"ModelConfig values must be positive: {bad}")
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads):
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}"
            )
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.rope_theta is None and self.max_positions is None:
            raise ValueError("a model needs positions: set rope_theta or max_positions")

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def attention_kind(self) -> str:
        if self.kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"
