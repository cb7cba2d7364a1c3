"""The same ids decoded one token at a time with a cache, to set beside one full forward pass."""

from __future__ import annotations

import torch

from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.record import Recorder
from attnviz.transformer.seq2seq import Seq2SeqCache


def step_by_step(model, ids, first: int | tuple[int, ...]):
    """Chunks of the sizes in `first` (the prompt, then e.g. a chunk of 3 on top of a filled cache),
    then one token a call; returns logits [T, V] and per-layer attention rows [L, H, T, T] padded with
    zeros beyond each row's keys."""
    cache = KVCache(len(model.blocks))
    logits, rows = [], []
    t = ids.shape[1]
    bounds, filled = [], 0
    for size in (first,) if isinstance(first, int) else first:
        bounds.append((filled, filled + size))
        filled += size
    for start, end in bounds + [(i, i + 1) for i in range(filled, t)]:
        out = model(ids[:, start:end], cache=cache)
        logits.append(out.logits[0])
        attn = out.attentions[:, 0]  # L, H, new, S
        rows.append(torch.nn.functional.pad(attn, (0, t - attn.shape[-1])))
    return torch.cat(logits), torch.cat(rows, dim=2)


@torch.no_grad()
def decode_step_by_step(ours, src, src_mask, tgt):
    """The full forward pass, and the same target decoded one token at a time with a Seq2SeqCache: (full,
    the steps' logits joined, the cache, the last step's self- and cross-attention Recorders)."""
    full = ours(src, tgt, attention_mask=src_mask)
    encoder_hidden = ours.encode(src, src_mask)
    cache = Seq2SeqCache(ours.config.decoder_layers)
    steps = []
    for t in range(tgt.shape[1]):
        record, cross = Recorder("attentions"), Recorder("attentions")
        _, logits = ours.decode(tgt[:, t:t + 1], encoder_hidden, src_mask, record=record, cross_record=cross,
                                cache=cache)
        steps.append(logits)
    return full, torch.cat(steps, dim=1), cache, record, cross
