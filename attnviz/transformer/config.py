"""Model configuration: one small frozen dataclass (in the spirit of nanoGPT's GPTConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Activation = Literal["gelu", "gelu_tanh", "relu", "silu"]
# Where a block's norms sit: "post" norm(x + f(x)) (BERT, OPT-350m); "pre" x + f(norm(x)) (GPT-2, Llama);
# "sandwich" x + norm2(f(norm1(x))) (Gemma 2/3); "after" x + norm(f(x)) (OLMo 2).
NormPlacement = Literal["post", "pre", "sandwich", "after"]
# How attention and MLP share the residual: one after the other, or side by side on the same input with
# two norms (GPT-NeoX) or one shared norm (Phi).
Residual = Literal["sequential", "parallel", "parallel_shared"]


@dataclass(frozen=True)
class ModelConfig:
    family: str  # the converter's name for the architecture (loading.registry's model types)
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    n_kv_heads: int | None = None  # None: one KV head per query head (MHA)
    head_dim: int | None = None  # None: d_model // n_heads
    causal: bool = False
    norm: Literal["layernorm", "rmsnorm", "gemma_rmsnorm"] = "layernorm"  # gemma_rmsnorm scales by (1 + w)
    norm_eps: float = 1e-12
    norm_placement: NormPlacement = "post"
    residual: Residual = "sequential"
    final_norm: bool | None = None  # a norm after the last block; None: every placement but "post" has one
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
    sliding_window: int | None = None  # Mistral-style local attention window (every layer, unless layer_windows)
    # --- per-layer attention: what differs between layers (Gemma 2/3, GPT-Neo, gpt-oss, SmolLM3) ---
    layer_windows: tuple[int | None, ...] | None = None  # each layer's window (None: full); None: sliding_window
    nope_layers: tuple[int, ...] = ()  # layers without rotary (SmolLM3's NoPE layers)
    local_rope_theta: float | None = None  # rotary base of windowed layers (Gemma 3), default rope there
    # --- the score: softmax(scale * q.k + bias) with optional extras ---
    attn_scale: float | None = None  # None: 1/sqrt(head_dim); GPT-Neo 1.0; Gemma 2 query_pre_attn_scalar^-1/2
    attn_softcap: float | None = None  # Gemma 2: scores -> cap * tanh(scores / cap) before the mask
    qk_norm: Literal["head", "projection"] | None = None  # norm q and k per head (Qwen3, Gemma 3) or whole (OLMo 2)
    attn_sinks: bool = False  # gpt-oss: a learned logit per head joins each row's softmax denominator
    alibi: bool = False  # BLOOM: a per-head linear bias on the key position instead of position embeddings
    rotary_dim: int | None = None  # rotate only the first rotary_dim dims of each head (Pythia, Phi); None: all
    # --- embeddings and unembedding ---
    embed_scale: float | None = None  # Gemma: token embeddings times sqrt(d_model)
    embed_proj_dim: int | None = None  # OPT-350m: embeddings of this width, projected in and out of d_model
    positions_from_mask: bool = False  # OPT: position = (number of real tokens so far) - 1, + position_offset
    lm_head_bias: bool = False  # Phi
    final_softcap: float | None = None  # Gemma 2: logits -> cap * tanh(logits / cap)
    # ALBERT, ELECTRA: token, position and type embeddings and their norm this wide, then a Linear (with
    # bias) into d_model; a masked-LM head maps back to this width before its decoder. None: d_model.
    embedding_size: int | None = None
    first_attn_norm: bool = True  # False: layer 0 has no norm before attention (ModernBERT's Identity)
    shared_layers: bool = False  # ALBERT: one block's weights run n_layers times
    # --- DeBERTa-v2/v3's disentangled attention (attnviz.transformer.deberta) ---
    pos_att_type: tuple[str, ...] = ()  # ("c2p", "p2c"): score terms from relative embeddings; (): none
    relative_span: int = 0  # rows of the relative embedding table: 2 * span (position_buckets or max_relative)
    position_buckets: int = 0  # > 0: log buckets of relative distance (make_log_bucket_position)
    max_relative_positions: int = 0  # the distance the buckets reach
    share_att_key: bool = False  # the position terms reuse the content query/key projections
    norm_rel_ebd: bool = False  # a LayerNorm on the relative embedding table
    # --- mixture of experts (Mixtral, gpt-oss) ---
    n_experts: int | None = None  # None: a dense MLP
    experts_per_token: int = 2
    # Mixtral / gpt-oss order; DeepSeek-V2's softmax and V3's sigmoid, group-limited (attnviz.transformer.deepseek_moe)
    router: Literal["softmax_topk", "topk_softmax", "softmax_group", "sigmoid_group"] = "softmax_topk"
    expert_glu: Literal["gated", "clamped_swiglu"] = "gated"  # clamped_swiglu: gpt-oss (alpha 1.702, limit)
    glu_limit: float | None = None
    # --- DeepSeek-V2/V3's multi-head latent attention and mixture of experts (attnviz.transformer.mla) ---
    # kv_lora_rank set: MLA. Keys and values are rebuilt per head from one latent of this width per token,
    # plus one rotary key of qk_rope_head_dim shared by every head; head_dim is then qk_nope + qk_rope (the
    # query-key width), rotary_dim qk_rope_head_dim, attn_scale 1/sqrt(head_dim) times YaRN's mscale^2.
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None  # the query's low-rank path (q_a_proj, q_a_layernorm, q_b_proj); None: q_proj
    qk_rope_head_dim: int = 0
    v_head_dim: int | None = None  # each head's value width; None: head_dim
    n_shared_experts: int = 0  # experts every token goes through beside the routed ones (DeepSeekMoE)
    moe_d_ff: int | None = None  # each expert's width (d_ff is the dense layers'); None: d_ff
    dense_layers: int = 0  # the first layers with a dense MLP instead of experts (first_k_dense_replace)
    n_group: int = 1  # experts in groups; a token picks its topk_group best groups, then experts in them
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = False

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
        if self.rope_theta is None and self.max_positions is None and not self.alibi and not self.pos_att_type:
            raise ValueError("a model needs positions: set rope_theta, max_positions, alibi or pos_att_type")
        if self.layer_windows is not None and len(self.layer_windows) != self.n_layers:
            raise ValueError(f"layer_windows has {len(self.layer_windows)} entries for {self.n_layers} layers")

    @property
    def pre_norm(self) -> bool:
        """Norms before each sublayer (and a final norm): every placement but BERT's post-norm."""
        return self.norm_placement in ("pre", "sandwich")

    @property
    def has_final_norm(self) -> bool:
        return self.norm_placement != "post" if self.final_norm is None else self.final_norm

    def window(self, layer: int) -> int | None:
        """Layer `layer`'s attention window (keys within `window` positions of the query), or None: full."""
        return self.sliding_window if self.layer_windows is None else self.layer_windows[layer]

    def rope_at(self, layer: int) -> tuple[float, dict | None] | None:
        """(theta, scaling) of layer `layer`'s rotary embedding, or None for a layer without rotary."""
        if self.rope_theta is None or layer in self.nope_layers:
            return None
        if self.local_rope_theta is not None and self.window(layer) is not None:
            return self.local_rope_theta, None
        return self.rope_theta, self.rope_scaling

    def layer_kind(self, layer: int) -> str:
        """A short name of how layer `layer` attends, for the mosaic's strip and the Learn page:
        'full', 'sliding 512', 'NoPE', 'ALiBi', with ', soft-capped' and ', sinks' when they apply."""
        window = self.window(layer)
        kind = "full" if window is None else f"{'sliding' if self.causal else 'local'} {window}"
        if self.alibi:
            kind += ", ALiBi"
        elif self.rope_theta is not None and layer in self.nope_layers:
            kind += ", NoPE"
        if self.attn_softcap is not None:
            kind += ", soft-capped"
        if self.attn_sinks:
            kind += ", sinks"
        return kind

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def value_dim(self) -> int:
        """Each head's value (and head output) width: head_dim but for MLA's v_head_dim."""
        return self.v_head_dim or self.dim_per_head

    @property
    def attention_kind(self) -> str:
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"
