"""The original Transformer's encoder-decoder, built from the same `MultiHeadAttention` as every other model.

Three kinds of attention, one class: encoder self-attention (every source token sees every source token),
causal decoder self-attention (target position t sees positions <= t) and cross-attention (decoder
queries, the encoder's keys and values: `MultiHeadAttention(x, kv=encoder_hidden)`). The layout is
Marian's (Helsinki-NLP opus-mt, Junczys-Dowmunt et al. 2018) as Hugging Face's `MarianMTModel` writes it:
post-norm blocks (norm(x + f(x)), "Attention Is All You Need" order), token embeddings scaled by
sqrt(d_model), fixed sinusoidal positions, no final norm, logits = lm_head(h) + final_logits_bias.
The default config is the paper's base model: d_model 512, 8 heads of 64, 6 + 6 layers, FFN 2048
(Marian uses swish/SiLU where the paper used ReLU).

The other encoder-decoders are the same module with other config values:
- BART: learned positions read at row position + 2 (`position_offset`), a LayerNorm on the embeddings of
  each stack (`embedding_norm`), post-norm, gelu, no embedding scale for bart-base.
- T5 / Flan-T5: no position embeddings; relative position buckets (attnviz.transformer.relative) add a
  per-head bias to the scores of every self-attention layer (bidirectional in the encoder, causal in the
  decoder; cross-attention has none), scores unscaled (`attn_scale` 1), T5's RMSNorm before each sublayer
  with a final norm after each stack (`norm_placement` "pre"), no linear biases, ReLU (T5 1.0) or
  gated-GELU (v1.1, Flan) feed-forward, and T5 1.0's tied head reading h * d_model^-0.5 (`logits_scale`).

Shape legend: B batch, S source positions, T target positions, C model width, H heads, V target vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.layers import MLP, GatedMLP, make_norm
from attnviz.transformer.masks import causal_mask, padding_mask
from attnviz.transformer.record import Recorder
from attnviz.transformer.relative import RelativePositionBias

POSITIONS = ("sinusoidal", "learned", "relative")


@dataclass(frozen=True)
class Seq2SeqConfig:
    vocab_size: int  # source (and, when shared, target) vocabulary
    d_model: int = 512
    n_heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    d_ff: int = 2048
    decoder_vocab_size: int | None = None  # None: the source vocabulary (shared embeddings)
    activation: str = "silu"  # Marian's "swish"
    max_positions: int = 512
    norm_eps: float = 1e-5  # nn.LayerNorm's default, which HF's Marian layers use
    scale_embedding: bool = True  # token embeddings times sqrt(d_model)
    share_embeddings: bool = True  # one token embedding for encoder and decoder
    tie_word_embeddings: bool = True  # lm_head reuses the decoder's token embedding
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0  # Marian starts the decoder with <pad>
    bad_token_ids: tuple[int, ...] = field(default=())  # never generated (Marian's bad_words_ids: <pad>)
    forced_eos: bool = True  # the last token greedy decoding may emit is EOS (HF's forced_eos_token_id)
    forced_bos_token_id: int | None = None  # the first generated token (BART's forced_bos_token_id)
    d_kv: int | None = None  # per-head width when not d_model / n_heads (T5's d_kv)
    positions: str = "sinusoidal"  # "sinusoidal" (Marian), "learned" (BART), "relative" (T5's buckets)
    position_offset: int = 0  # learned positions: row of position 0 (BART: 2)
    relative_buckets: int = 32  # T5's relative_attention_num_buckets
    relative_max_distance: int = 128  # T5's relative_attention_max_distance
    norm: str = "layernorm"  # or "rmsnorm" (T5LayerNorm: no mean, no bias, float32)
    norm_placement: str = "post"  # "post": norm(x + f(x)); "pre": x + f(norm(x)), a final norm per stack
    embedding_norm: bool = False  # a norm on each stack's embeddings (BART's layernorm_embedding)
    attn_scale: float | None = None  # of q.k; None: 1/sqrt(head_dim); T5: 1 (unscaled)
    bias: bool = True  # biases in the attention and MLP projections (T5 has none)
    gated_mlp: bool = False  # down(act(gate(x)) * up(x)) (T5 v1.1's gated-gelu)
    logits_scale: float = 1.0  # the decoder's output times this before the head (T5 1.0: d_model^-0.5)

    def __post_init__(self) -> None:
        bad = {n: getattr(self, n) for n in ("vocab_size", "d_model", "n_heads", "encoder_layers",
                                              "decoder_layers", "d_ff", "max_positions") if getattr(self, n) < 1}
        if bad:
            raise ValueError(f"Seq2SeqConfig values must be positive: {bad}")
        if self.d_kv is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.norm_placement not in ("post", "pre"):
            raise ValueError(f"norm_placement must be 'post' or 'pre', got {self.norm_placement!r}")
        if self.share_embeddings and self.decoder_vocab_size not in (None, self.vocab_size):
            raise ValueError("shared embeddings need one vocabulary: decoder_vocab_size must equal vocab_size")

    @property
    def target_vocab_size(self) -> int:
        return self.decoder_vocab_size or self.vocab_size

    @property
    def head_dim(self) -> int:
        return self.d_kv or self.d_model // self.n_heads


def sinusoidal_positions(n_positions: int, dim: int) -> torch.Tensor:
    """[n_positions, dim] float32, HF's MarianSinusoidalPositionalEmbedding: angle pos / 10000^(2i/dim),
    sin of the even-indexed angles in the first half and cos of the odd-indexed ones in the second half
    (not interleaved as in the paper's formula). Computed in float64 with numpy as HF does, then cast."""
    position = np.arange(n_positions, dtype=np.float64)[:, None]
    angle = position / np.power(10000, 2 * (np.arange(dim) // 2) / dim)[None, :]
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out = np.empty((n_positions, dim), dtype=np.float32)
    out[:, :half] = np.sin(angle[:, 0::2])
    out[:, half:] = np.cos(angle[:, 1::2])
    return torch.from_numpy(out)


def _attention(c: Seq2SeqConfig) -> MultiHeadAttention:
    return MultiHeadAttention(c.d_model, c.n_heads, head_dim=c.head_dim, qkv_bias=c.bias, out_bias=c.bias,
                              scale=c.attn_scale)


def _mlp(c: Seq2SeqConfig) -> nn.Module:
    return GatedMLP(c.d_model, c.d_ff, c.activation, c.bias) if c.gated_mlp else MLP(
        c.d_model, c.d_ff, c.activation, c.bias)


def _sublayer(x, norm, f, pre: bool):
    """Post-norm: norm(x + f(x)) ("Attention Is All You Need", Marian, BART); pre-norm: x + f(norm(x)) (T5)."""
    return x + f(norm(x)) if pre else norm(x + f(x))


class _Block(nn.Module):
    """Sublayers, each `name` (an attention or the "mlp") with its norm `name_norm`, applied by `_sublayer`;
    made in the order named, the order a seeded model's weights are drawn in."""

    def __init__(self, c: Seq2SeqConfig, *names: str) -> None:
        super().__init__()
        self.pre = c.norm_placement == "pre"
        for name in names:
            setattr(self, name, _mlp(c) if name == "mlp" else _attention(c))
            setattr(self, f"{name}_norm", make_norm(c.norm, c.d_model, c.norm_eps))


class EncoderBlock(_Block):
    """x = norm(x + self_attn(x)); x = norm(x + mlp(x)) (pre-norm: x + self_attn(norm(x)), ...)."""

    def __init__(self, c: Seq2SeqConfig) -> None:
        super().__init__(c, "self_attn", "mlp")

    def forward(self, x, mask=None, record=None, bias=None):
        """x [B, S, C] -> [B, S, C]; bias: position scores [1, H, S, S] (T5). `record` keeps, when asked, the
        MLP's output ("mlp_outputs"): with the heads' outputs it makes up the encoder's residual stream, which
        query-key attribution splits (interventions/qk_attribution.attribute_encoder)."""
        def mlp(h):
            out = self.mlp(h)
            if record is not None:
                record.keep("mlp_outputs", out)
            return out

        x = _sublayer(x, self.self_attn_norm, lambda h: self.self_attn(h, mask, record=record, bias=bias)[0],
                      self.pre)
        return _sublayer(x, self.mlp_norm, mlp, self.pre)


class DecoderBlock(_Block):
    """x = norm(x + causal_self_attn(x)); x = norm(x + cross_attn(x, encoder)); x = norm(x + mlp(x))."""

    def __init__(self, c: Seq2SeqConfig) -> None:
        super().__init__(c, "self_attn", "cross_attn", "mlp")

    def forward(self, x, encoder_hidden, self_mask=None, cross_mask=None, self_record=None, cross_record=None,
                self_cache=None, cross_cache=None, bias=None):
        """x [B, T, C], encoder_hidden [B, S, C] -> [B, T, C]; bias: self-attention position scores (T5)."""
        x = _sublayer(x, self.self_attn_norm, lambda h: self.self_attn(
            h, self_mask, record=self_record, cache=self_cache, bias=bias)[0], self.pre)
        x = _sublayer(x, self.cross_attn_norm, lambda h: self.cross_attn(
            h, cross_mask, kv=encoder_hidden, record=cross_record, cache=cross_cache)[0], self.pre)
        return _sublayer(x, self.mlp_norm, self.mlp, self.pre)


class Seq2SeqCache:
    """Incremental decoding state: per decoder layer, the self-attention keys/values of the target so far
    (one position longer each step) and the cross-attention keys/values of the encoder (filled on the
    first step, then reused: the source does not change)."""

    def __init__(self, n_layers: int) -> None:
        self.self_attention = KVCache(n_layers)
        self.cross_attention = KVCache(n_layers)

    @property
    def length(self) -> int:
        return self.self_attention.length

    @property
    def nbytes(self) -> int:
        return self.self_attention.nbytes + self.cross_attention.nbytes


@dataclass
class Seq2SeqOutput:
    encoder_hidden: torch.Tensor  # B, S, C
    hidden: torch.Tensor  # B, T, C: the decoder's last block
    logits: torch.Tensor | None  # B, T, V
    encoder_attentions: torch.Tensor | None  # L_enc, B, H, S, S
    decoder_attentions: torch.Tensor | None  # L_dec, B, H, T, T (T, past + T with a cache)
    cross_attentions: torch.Tensor | None  # L_dec, B, H, T, S
    records: dict[str, Recorder] = field(default_factory=dict)  # "encoder", "decoder", "cross"


def _attentions(record: Recorder):
    return record.stacked("attentions") if "attentions" in record.names else None


class EncoderDecoder(nn.Module):
    def __init__(self, config: Seq2SeqConfig | None = None) -> None:
        super().__init__()
        c = self.config = config or Seq2SeqConfig(vocab_size=32000)
        self.encoder_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.decoder_embedding = (self.encoder_embedding if c.share_embeddings
                                  else nn.Embedding(c.target_vocab_size, c.d_model))
        if c.positions == "sinusoidal":
            # A buffer, not a parameter: fixed, recomputed from the shape (not saved in the state dict).
            self.register_buffer("positions", sinusoidal_positions(c.max_positions, c.d_model), persistent=False)
        elif c.positions == "learned":
            self.encoder_positions = nn.Embedding(c.max_positions + c.position_offset, c.d_model)
            self.decoder_positions = nn.Embedding(c.max_positions + c.position_offset, c.d_model)
        else:  # T5: one table per stack, held by its first layer in HF and shared by all its layers
            self.encoder_relative = RelativePositionBias(c.n_heads, c.relative_buckets, c.relative_max_distance, True)
            self.decoder_relative = RelativePositionBias(c.n_heads, c.relative_buckets, c.relative_max_distance,
                                                         False)
        if c.embedding_norm:
            self.encoder_embedding_norm = make_norm(c.norm, c.d_model, c.norm_eps)
            self.decoder_embedding_norm = make_norm(c.norm, c.d_model, c.norm_eps)
        if c.norm_placement == "pre":
            self.encoder_norm = make_norm(c.norm, c.d_model, c.norm_eps)
            self.decoder_norm = make_norm(c.norm, c.d_model, c.norm_eps)
        self.encoder_blocks = nn.ModuleList(EncoderBlock(c) for _ in range(c.encoder_layers))
        self.decoder_blocks = nn.ModuleList(DecoderBlock(c) for _ in range(c.decoder_layers))
        self.lm_head = nn.Linear(c.d_model, c.target_vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.decoder_embedding.weight
        self.register_buffer("final_logits_bias", torch.zeros(c.target_vocab_size))
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0

    @property
    def kv_group(self) -> list[int]:
        return self.encoder_blocks[0].self_attn.kv_group

    def _embed(self, side: str, ids: torch.Tensor, past: int = 0) -> torch.Tensor:
        """Token embeddings (+ absolute positions, + the embedding norm) of one stack ("encoder"/"decoder")."""
        c, t = self.config, ids.shape[1]
        if past + t > c.max_positions:
            raise ValueError(f"{past + t} positions exceed the model's {c.max_positions}")
        x = getattr(self, f"{side}_embedding")(ids) * self.embed_scale  # B, T, C
        if c.positions == "sinusoidal":
            x = x + self.positions[past:past + t]
        elif c.positions == "learned":  # BART: position p reads row p + 2, whatever the padding
            rows = torch.arange(past, past + t, device=ids.device) + c.position_offset
            x = x + getattr(self, f"{side}_positions")(rows)
        if c.embedding_norm:
            x = getattr(self, f"{side}_embedding_norm")(x)
        return x

    def position_bias(self, side: str, query_length: int, key_length: int, past: int = 0):
        """[1, H, T, S] relative-position scores of a stack's self-attention (T5), or None."""
        if self.config.positions != "relative":
            return None
        return getattr(self, f"{side}_relative")(query_length, key_length, past)

    def encode(self, input_ids, attention_mask=None, record: Recorder | None = None) -> torch.Tensor:
        """input_ids [B, S] (attention_mask [B, S], 1 = token) -> encoder hidden states [B, S, C]."""
        record = Recorder("attentions") if record is None else record
        x = self._embed("encoder", input_ids)
        mask = _padding(attention_mask)
        bias = self.position_bias("encoder", x.shape[1], x.shape[1])
        record.begin(len(self.encoder_blocks))
        for layer, block in enumerate(self.encoder_blocks):
            x = block(x, mask, record=record.at(layer), bias=bias)
        return self.encoder_norm(x) if self.config.norm_placement == "pre" else x

    def decode(self, decoder_input_ids, encoder_hidden, attention_mask=None, decoder_attention_mask=None,
               record: Recorder | None = None, cross_record: Recorder | None = None,
               cache: Seq2SeqCache | None = None, with_logits: bool = True):
        """decoder_input_ids [B, T] -> (hidden [B, T, C], logits [B, T, V] or None).

        attention_mask [B, S] is the encoder's padding (cross-attention never reads padded source
        positions); with a cache, decoder_input_ids are the new positions only (no padding)."""
        record = Recorder("attentions") if record is None else record
        cross_record = Recorder("attentions") if cross_record is None else cross_record
        past = 0 if cache is None else cache.length
        t = decoder_input_ids.shape[1]
        x = self._embed("decoder", decoder_input_ids, past)
        self_mask = causal_mask(t, past + t, device=x.device) if t > 1 else None
        if decoder_attention_mask is not None and not bool(decoder_attention_mask.all()):
            if past:
                raise ValueError("padding is not supported when decoding with a KV cache")
            self_mask = padding_mask(decoder_attention_mask) & self_mask if t > 1 else padding_mask(
                decoder_attention_mask)
        cross_mask = _padding(attention_mask)
        bias = self.position_bias("decoder", t, past + t, past)
        record.begin(len(self.decoder_blocks))
        cross_record.begin(len(self.decoder_blocks))
        for layer, block in enumerate(self.decoder_blocks):
            x = block(
                x, encoder_hidden, self_mask, cross_mask, record.at(layer), cross_record.at(layer),
                None if cache is None else cache.self_attention[layer],
                None if cache is None else cache.cross_attention[layer], bias,
            )
        if self.config.norm_placement == "pre":
            x = self.decoder_norm(x)
        logits = self.unembed(x) if with_logits else None
        return x, logits

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """The decoder's last hidden states [B, T, C] -> logits [B, T, V]."""
        scale = self.config.logits_scale
        return self.lm_head(hidden * scale if scale != 1.0 else hidden) + self.final_logits_bias

    def forward(self, input_ids, decoder_input_ids, attention_mask=None, decoder_attention_mask=None,
                encoder_record: Recorder | None = None, decoder_record: Recorder | None = None,
                cross_record: Recorder | None = None, with_logits: bool = True) -> Seq2SeqOutput:
        """Teacher forcing: the source through the encoder, the whole target prefix through the decoder.
        One Recorder per attention kind (default: the attention probabilities of each)."""
        records = {
            "encoder": Recorder("attentions") if encoder_record is None else encoder_record,
            "decoder": Recorder("attentions") if decoder_record is None else decoder_record,
            "cross": Recorder("attentions") if cross_record is None else cross_record,
        }
        encoder_hidden = self.encode(input_ids, attention_mask, records["encoder"])
        hidden, logits = self.decode(decoder_input_ids, encoder_hidden, attention_mask, decoder_attention_mask,
                                     records["decoder"], records["cross"], with_logits=with_logits)
        return Seq2SeqOutput(encoder_hidden, hidden, logits, _attentions(records["encoder"]),
                             _attentions(records["decoder"]), _attentions(records["cross"]), records)

    @torch.inference_mode()
    def greedy(self, input_ids, max_new_tokens: int, attention_mask=None, forced_eos: bool | None = None,
               cache: Seq2SeqCache | None = None) -> torch.Tensor:
        """Greedy decoding with a KV cache, as HF's generate(num_beams=1, do_sample=False): starts from
        decoder_start_token_id, never picks `bad_token_ids`, forces `forced_bos_token_id` first (BART), forces
        EOS as the last of max_new_tokens (HF's ForcedEOSTokenLogitsProcessor with forced_eos_token_id), stops
        when every row has produced EOS and pads finished rows. Returns [B, 1 + n] including the start token."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        c = self.config
        forced_eos = c.forced_eos if forced_eos is None else forced_eos
        b = input_ids.shape[0]
        encoder_hidden = self.encode(input_ids, attention_mask, Recorder())
        cache = Seq2SeqCache(c.decoder_layers) if cache is None else cache
        out = torch.full((b, 1), c.decoder_start_token_id, dtype=torch.long, device=input_ids.device)
        done = torch.zeros(b, dtype=torch.bool, device=input_ids.device)
        step_ids = out
        for step in range(max_new_tokens):
            _, logits = self.decode(step_ids, encoder_hidden, attention_mask, record=Recorder(),
                                    cross_record=Recorder(), cache=cache)
            scores = logits[:, -1].float()  # B, V
            if c.bad_token_ids:
                scores[:, list(c.bad_token_ids)] = -math.inf
            if c.forced_bos_token_id is not None and step == 0:  # HF's ForcedBOSTokenLogitsProcessor
                scores = torch.full_like(scores, -math.inf)
                scores[:, c.forced_bos_token_id] = 0
            if forced_eos and step == max_new_tokens - 1:
                scores = torch.full_like(scores, -math.inf)
                scores[:, c.eos_token_id] = 0
            token = scores.argmax(dim=-1)  # B
            token = torch.where(done, torch.full_like(token, c.pad_token_id), token)
            out = torch.cat((out, token[:, None]), dim=1)
            done |= token == c.eos_token_id
            if bool(done.all()):
                break
            step_ids = token[:, None]
        return out


def _padding(attention_mask):
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return padding_mask(attention_mask)  # B, 1, 1, S
