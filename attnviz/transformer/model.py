"""The transformer stack: embeddings, blocks, final norm and optional unembedding.

One class covers encoders (BERT, RoBERTa, DistilBERT) and decoders (GPT-2, Llama family); what
differs is data in `ModelConfig`. Shape legend: B batch, T positions, C model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnviz.transformer.blocks import Block
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.layers import MaskedLMHead, make_norm
from attnviz.transformer.masks import causal_mask, padding_mask
from attnviz.transformer.record import Recorder
from attnviz.transformer.rope import inverse_frequencies, rotary_cos_sin


@dataclass
class ForwardOutput:
    hidden: torch.Tensor  # B, T, C: after the last block (and the final norm of pre-norm models)
    attentions: torch.Tensor | None  # L, B, H, T, S (S = T without a cache); None if not recorded
    logits: torch.Tensor | None = None  # B, T, V when the model has an LM head
    record: Recorder | None = None  # everything else the caller asked to record


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = nn.Embedding(c.max_positions, c.d_model) if c.rope_theta is None else None
        self.type_embedding = nn.Embedding(c.type_vocab_size, c.d_model) if c.type_vocab_size else None
        self.embedding_norm = make_norm(c.norm, c.d_model, c.norm_eps) if c.embedding_norm else None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.final_norm = make_norm(c.norm, c.d_model, c.norm_eps) if c.pre_norm else None
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False) if c.lm_head else None
        if self.lm_head is not None and c.tie_word_embeddings:
            self.lm_head.weight = self.token_embedding.weight
        self.mlm_head = None
        if c.mlm_head is not None:
            self.mlm_head = MaskedLMHead(c.d_model, c.vocab_size, c.mlm_head, c.norm_eps)
            if c.tie_word_embeddings:
                self.mlm_head.decoder.weight = self.token_embedding.weight
        # A plain attribute, not a buffer: `model.to(bfloat16)` must not round the frequencies (the angles
        # are computed in float32 whatever the model's dtype); forward moves it to the input's device.
        self.inv_freq = None
        if c.rope_theta is not None:
            self.inv_freq = inverse_frequencies(c.dim_per_head, c.rope_theta, c.rope_scaling)

    @property
    def kv_group(self) -> list[int]:
        return self.blocks[0].attn.kv_group

    def positions(self, input_ids: torch.Tensor, past: int = 0) -> torch.Tensor:
        """[B, T] position ids, from `past` on (the positions a KV cache already holds). RoBERTa skips
        padding and starts after padding_idx (HF's rule)."""
        if self.config.position_offset:
            not_pad = (input_ids != self.config.pad_token_id).long()
            return torch.cumsum(not_pad, dim=1) * not_pad + self.config.pad_token_id
        b, t = input_ids.shape
        return torch.arange(past, past + t, device=input_ids.device).expand(b, t)

    def embed(self, input_ids, token_type_ids=None, positions=None):
        x = self.token_embedding(input_ids)  # B, T, C
        if self.position_embedding is not None:
            x = x + self.position_embedding(positions)
        if self.type_embedding is not None:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.type_embedding(types)
        return self.embedding_norm(x) if self.embedding_norm is not None else x

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
        positions = self.positions(input_ids, past)
        x = self.embed(input_ids, token_type_ids, positions)
        mask = self._keep_mask(input_ids, attention_mask, past)
        rotary = None
        if self.config.rope_theta is not None:
            rotary = rotary_cos_sin(self.inv_freq, positions, x.dtype)
        record.begin(len(self.blocks))
        for layer, block in enumerate(self.blocks):
            layer_mask = None if head_mask is None else head_mask[layer]
            layer_cache = None if cache is None else cache[layer]
            x, _ = block(x, mask, rotary, layer_mask, record=record.at(layer), cache=layer_cache)
        if self.final_norm is not None:
            x = self.final_norm(x)
        logits = self.lm_head(x) if self.lm_head is not None and with_logits else None
        attentions = record.stacked("attentions") if "attentions" in record.names else None
        return ForwardOutput(x, attentions, logits, record)

    def _keep_mask(self, input_ids, attention_mask, past: int = 0):
        """Boolean keep-mask broadcastable to [B, H, T, past + T], or None when every position may attend."""
        t = input_ids.shape[1]
        mask = None
        if self.config.causal and (t > 1 or self.config.sliding_window is not None):
            mask = causal_mask(t, past + t, window=self.config.sliding_window, device=input_ids.device)
        if attention_mask is not None and not bool(attention_mask.all()):
            pad = padding_mask(attention_mask)  # B, 1, 1, T
            mask = pad if mask is None else mask & pad
        return mask
