"""The transformer stack: embeddings, blocks, final norm and optional unembedding.

One class covers encoders (BERT, RoBERTa, DistilBERT) and decoders (GPT-2, Llama family); what
differs is data in `ModelConfig`. Shape legend: B batch, T positions, C model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from attnviz.memory.ceiling import kept, spending
from attnviz.transformer.alibi import alibi_bias, alibi_slopes
from attnviz.transformer.blocks import Block
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.deberta import RelativeEmbeddings
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.layers import MaskedLMHead, make_norm
from attnviz.transformer.masks import band_mask, causal_mask, padding_mask
from attnviz.transformer.record import Recorder
from attnviz.transformer.rope import rope_frequencies, rotary_cos_sin


@dataclass
class ForwardOutput:
    hidden: torch.Tensor  # B, T, C: after the last block (and the final norm of pre-norm models)
    attentions: torch.Tensor | None  # L, B, H, T, S (S = T without a cache); None if not recorded
    logits: torch.Tensor | None = None  # B, T, V when the model has an LM head
    record: Recorder | None = None  # everything else the caller asked to record


class LayerInput(NamedTuple):
    """What one layer's attention needs besides x, made once per forward pass and shared by the layers
    that attend alike: keep-mask [B or 1, 1, T, S], rotary (cos, sin) [B, T, R] or None, additive bias."""

    mask: torch.Tensor | None
    rotary: tuple[torch.Tensor, torch.Tensor] | None
    bias: torch.Tensor | None


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        embed_dim = c.embed_proj_dim or c.embedding_size or c.d_model
        self.token_embedding = nn.Embedding(c.vocab_size, embed_dim)
        # OPT-350m: narrower embeddings, projected into the model's width and back out before the head.
        self.project_in = nn.Linear(embed_dim, c.d_model, bias=False) if c.embed_proj_dim else None
        self.project_out = nn.Linear(c.d_model, embed_dim, bias=False) if c.embed_proj_dim else None
        # ALBERT, ELECTRA: positions, types and the norm at the embedding width, then projected in.
        side = c.embedding_size or c.d_model
        self.embedding_project = nn.Linear(side, c.d_model) if c.embedding_size else None
        learned = c.rope_theta is None and c.max_positions is not None and not c.alibi
        self.position_embedding = nn.Embedding(c.max_positions, side) if learned else None
        self.type_embedding = nn.Embedding(c.type_vocab_size, side) if c.type_vocab_size else None
        self.embedding_norm = make_norm(c.norm, side, c.norm_eps) if c.embedding_norm else None
        # ALBERT: one block run n_layers times (the list holds the same module; state_dict names each).
        shared = Block(c) if c.shared_layers else None
        self.blocks = nn.ModuleList(Block(c, layer) if shared is None else shared for layer in range(c.n_layers))
        if not c.first_attn_norm:  # ModernBERT: layer 0 reads the (already normed) embeddings as they are
            self.blocks[0].attn_norm = None
        self.relative = RelativeEmbeddings(c) if c.pos_att_type else None  # DeBERTa's shared table
        self.final_norm = make_norm(c.norm, c.d_model, c.norm_eps) if c.has_final_norm else None
        self.lm_head = nn.Linear(embed_dim, c.vocab_size, bias=c.lm_head_bias) if c.lm_head else None
        if self.lm_head is not None and c.tie_word_embeddings:
            self.lm_head.weight = self.token_embedding.weight
        self.mlm_head = None
        if c.mlm_head is not None:
            self.mlm_head = MaskedLMHead(c.d_model, c.vocab_size, c.mlm_head, c.norm_eps, c.embedding_size)
            if c.tie_word_embeddings:
                self.mlm_head.decoder.weight = self.token_embedding.weight
        # Plain attributes, not buffers: `model.to(bfloat16)` must not round the frequencies (the angles
        # are computed in float32 whatever the model's dtype); forward moves them to the input's device.
        # One rotary per distinct (theta, scaling): Gemma 3's local and global layers have two bases.
        # Built on the CPU even where the parameters are built on "meta" (a model split by a device map).
        with torch.device("cpu"):
            self.layer_ropes = [c.rope_at(layer) for layer in range(c.n_layers)]
            self.inv_freq = None  # the first rotary's frequencies (the Learn page and older callers read it)
            for rope in self.layer_ropes:
                if rope is not None:
                    self.inv_freq = self._frequencies(rope, 0)[0]
                    break
            self.slopes = alibi_slopes(c.n_heads) if c.alibi else None

    def _frequencies(self, rope, seq_len: int):
        theta, scaling = rope
        return rope_frequencies(self.config.rotary_dim or self.config.dim_per_head, theta, scaling, seq_len)

    @property
    def kv_group(self) -> list[int]:
        return self.blocks[0].attn.kv_group

    def positions(self, input_ids: torch.Tensor, past: int = 0, attention_mask=None) -> torch.Tensor:
        """[B, T] position ids, from `past` on (the positions a KV cache already holds). RoBERTa skips
        padding and starts after padding_idx; OPT counts real tokens and adds its offset (HF's rules)."""
        c = self.config
        if c.positions_from_mask:
            b, t = input_ids.shape
            mask = torch.ones(b, past + t, dtype=torch.long, device=input_ids.device) if attention_mask is None \
                else attention_mask.long()
            counted = torch.cumsum(mask, dim=1) * mask - 1
            return counted[:, past:] + c.position_offset
        if c.position_offset:
            not_pad = (input_ids != c.pad_token_id).long()
            return torch.cumsum(not_pad, dim=1) * not_pad + c.pad_token_id
        b, t = input_ids.shape
        return torch.arange(past, past + t, device=input_ids.device).expand(b, t)

    def embed(self, input_ids, token_type_ids=None, positions=None):
        x = self.token_embedding(input_ids)  # B, T, C (or OPT's narrower width)
        if self.config.embed_scale is not None:  # Gemma: the scale rounded to the model's dtype, as HF
            x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)
        if self.project_in is not None:
            x = self.project_in(x)
        if self.position_embedding is not None:
            x = x + self.position_embedding(positions)
        if self.type_embedding is not None:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.type_embedding(types)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        return x if self.embedding_project is None else self.embedding_project(x)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """The last block's output -> the final hidden states (final norm, OPT's projection out)."""
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.project_out(x) if self.project_out is not None else x

    def _layer_bytes(self, x: torch.Tensor) -> int:
        """A block's transient besides its attention maps (the kernel spends those), where the memory ceiling
        is kept (attnviz.memory.ceiling): for x [B, T, C], the norms' and residuals' [B, T, C], the queries,
        keys, values and context, and the MLP's gate, up and activation [B, T, d_ff]."""
        c = self.config
        return x.element_size() * x.shape[0] * x.shape[1] * (8 * x.shape[2] + 3 * (c.d_ff or 4 * c.d_model))

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """Final hidden states [..., C] -> next-token logits [..., V], soft-capped where the model caps them."""
        logits = kept(hidden[..., :1].numel() * self.lm_head.out_features * hidden.element_size(), "the logits",
                      lambda: self.lm_head(hidden))
        cap = self.config.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def score_setup(self, layer: int, head: int) -> dict:
        """How layer `layer`'s head `head` turns q.k into a score, as plain numbers (analysis.query_key's
        keyword arguments): causal, scale, window, soft-cap, ALiBi slope, learned sink logit, and for MLA
        where each head's rotary dimensions start."""
        attn, config = self.blocks[layer].attn, self.config
        return {"causal": config.causal, "scale": attn.scale, "window": config.window(layer),
                "softcap": attn.softcap, "slope": None if self.slopes is None else float(self.slopes[head]),
                "sink": None if attn.sinks is None else float(attn.sinks[head].detach()),
                "rope_from": getattr(attn, "nope", None)}  # MLA: where the rotary part of q and k starts

    def layer_inputs(self, input_ids, attention_mask=None, past: int = 0, positions=None) -> list[LayerInput]:
        """Each layer's mask, rotary and bias for this input (shared between layers that attend alike)."""
        positions = self.positions(input_ids, past, attention_mask) if positions is None else positions
        dtype = self.token_embedding.weight.dtype
        masks, rotaries = {}, {}
        bias = None
        if self.relative is not None:  # DeBERTa: the relative table and indices its attention reads
            bias = self.relative(past + input_ids.shape[1])
        if self.slopes is not None:
            bias = alibi_bias(self.slopes, input_ids.shape[0], past + input_ids.shape[1], attention_mask,
                              input_ids.device).to(dtype)
        inputs = []
        for layer, rope in enumerate(self.layer_ropes):
            window = self.config.window(layer)
            if window not in masks:
                masks[window] = self._keep_mask(input_ids, attention_mask, past, window)
            key = repr(rope)  # (theta, scaling dict): a dict is not hashable
            if rope is not None and key not in rotaries:
                seq_len = int(positions.max()) + 1 if positions.numel() else 0
                inv_freq, factor = self._frequencies(rope, seq_len)
                rotaries[key] = rotary_cos_sin(inv_freq, positions, dtype, factor)
            inputs.append(LayerInput(masks[window], None if rope is None else rotaries[key], bias))
        return inputs

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, head_mask=None, with_logits=True,
        record: Recorder | None = None, cache: KVCache | None = None,
    ) -> ForwardOutput:
        """input_ids [B, T]; attention_mask [B, T] 1 = token, 0 = padding; head_mask [L, H] (or [L, B, H],
        one mask per batch row) 1 keeps a head's output, 0 switches it off.

        record: what to keep (attnviz.transformer.record); by default the attention probabilities only.
        cache: a KVCache (attnviz.transformer.kv_cache) for incremental decoding: input_ids are the new tokens,
        placed after the cache's positions; padding is not supported with a cache.
        """
        record = Recorder("attentions") if record is None else record
        past = 0 if cache is None else cache.length
        if past and attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("padding is not supported when decoding with a KV cache")
        if past:
            attention_mask = None  # all real tokens: the rules above need no mask
        positions = self.positions(input_ids, past, attention_mask)
        x = self.embed(input_ids, token_type_ids, positions)
        inputs = self.layer_inputs(input_ids, attention_mask, past, positions)
        record.begin(len(self.blocks))
        for layer, block in enumerate(self.blocks):
            layer_mask = None if head_mask is None else head_mask[layer]
            layer_cache = None if cache is None else cache[layer]
            mask, rotary, bias = inputs[layer]
            with spending(self._layer_bytes(x), "a layer's activations"):
                x, _ = block(x, mask, rotary, layer_mask, record=record.at(layer), cache=layer_cache, bias=bias)
        x = self.finish(x)
        logits = self.unembed(x) if self.lm_head is not None and with_logits else None
        attentions = record.stacked("attentions") if "attentions" in record.names else None
        return ForwardOutput(x, attentions, logits, record)

    def _keep_mask(self, input_ids, attention_mask, past: int = 0, window: int | None = None):
        """Boolean keep-mask broadcastable to [B, H, T, past + T], or None when every position may attend.
        `window`: a causal model's sliding window, an encoder's local band (|i - j| <= window // 2)."""
        t = input_ids.shape[1]
        mask = None
        if self.config.causal and (t > 1 or window is not None):
            mask = causal_mask(t, past + t, window=window, device=input_ids.device)
        elif not self.config.causal and window is not None:
            mask = band_mask(t, window // 2, device=input_ids.device)
        if attention_mask is not None and not bool(attention_mask.all()):
            pad = padding_mask(attention_mask)  # B, 1, 1, T
            mask = pad if mask is None else mask & pad
        return mask
