"""Head ablation: what switching attention heads off does to a model's prediction (`ablation_effect`), and the
importance scan that switches every head off alone (`importance_scan`), batched so that each batch starts
from the plain run's residual stream at the lowest layer it changes. The quantities compared are
attnviz.readouts.predictions'."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from attnviz.models.batch_bytes import scan_batch_size
from attnviz.models.inputs import has_mlm_head, text_ids
from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts.predictions import (
    TOP_K,
    Prediction,
    as_head_mask,
    continuation_ids,
    continuation_logprob,
    continuation_logprobs_from,
    cosine_change,
    embedding_cosine_change,
    hidden_states,
    mask_ids,
    mask_logprobs,
    mask_logprobs_from,
    mean_pooled,
    next_logprobs,
    next_logprobs_from,
    require_decoder,
    top_predictions,
)

QUANTITIES = ("continuation", "next_token", "mask_fill", "embedding")


class ScanStopped(Exception):
    """`importance_scan` was told to stop (its `should_stop()` returned True)."""


def default_quantity(model: LoadedModel, continuation: str | None = None) -> str:
    """What an ablation of this model is measured by (in the order of attnviz.readouts.predictions' docstring)."""
    if model.config.causal:
        return "continuation" if continuation else "next_token"
    return "mask_fill" if has_mlm_head(model) else "embedding"


# --- one ablation, before and after ----------------------------------------------------------------------


@dataclass(frozen=True)
class Effect:
    """What switching some heads off does to the prediction of one text (`ablation_effect`)."""

    quantity: str  # "next_token" (decoders), "mask_fill" (encoders with an MLM head) or "embedding"
    before: list[Prediction]  # the top-k with every head on (empty for "embedding")
    after: list[Prediction]  # the top-k with the heads switched off
    before_after: list[float]  # the log-probability, heads switched off, of each token of `before`
    continuation_before: tuple[float, list[tuple[str, float]]] | None = None  # decoders given a continuation
    continuation_after: tuple[float, list[tuple[str, float]]] | None = None
    cosine_change: float | None = None  # "embedding": 1 - cosine of the mean-pooled embeddings


def ablation_effect(model: LoadedModel, text: str, head_mask, continuation: str | None = None,
                    k: int = TOP_K) -> Effect:
    """The prediction with every head on and with `head_mask` applied: decoders, the top-k next tokens
    after `text` and, given a continuation, its log-probability with `text` as the prefix; encoders with
    a masked-LM head, the top-k fills of the mask in `text`; other encoders, the embedding's cosine change."""
    quantity = default_quantity(model)
    mask = as_head_mask(model, head_mask)
    if quantity == "embedding":
        return Effect(quantity, [], [], [], cosine_change=embedding_cosine_change(model, text, mask))
    if quantity == "next_token":
        ids = text_ids(model, text)
        plain, ablated = next_logprobs(model, ids, None)[0], next_logprobs(model, ids, mask)[0]
    else:
        ids, position = mask_ids(model, text)
        plain, ablated = mask_logprobs(model, ids, position, None)[0], mask_logprobs(model, ids, position, mask)[0]
    before = top_predictions(model, plain, k)
    effect = Effect(quantity, before, top_predictions(model, ablated, k), [float(ablated[p.id]) for p in before])
    if quantity == "next_token" and continuation:
        return replace(effect, continuation_before=continuation_logprob(model, text, continuation),
                       continuation_after=continuation_logprob(model, text, continuation, mask))
    return effect


# --- the importance scan ---------------------------------------------------------------------------------


def importance_scan(
    model: LoadedModel,
    text: str,
    quantity: str | None = None,
    continuation: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """float64 [L, H]: the change of `quantity` when head (l, h) alone is switched off, every head once.

    quantity (default `default_quantity`): "continuation", the drop of log P(continuation | text) (the
    text is the prefix); "next_token", the drop of the log-probability of the unablated run's top next
    token after `text`; "mask_fill", the drop of the log-probability of the unablated run's top fill of
    the mask in `text`; "embedding", 1 - cosine of the mean-pooled embeddings. Positive means the head
    helped.

    Batched: one ablation per batch row (head mask [L, B, H]), at most `batch_size` rows (default: what
    fits SCAN_BATCH_BYTES), heads in (layer, head) order. Switching off a head of layer l leaves layers
    0..l-1 as in the plain run, so each batch starts from the plain run's residual stream entering the
    lowest layer it ablates: about half the layer passes of running every row from the embeddings.
    `progress(done, total)` is told after each batch; `should_stop()` is asked before each and raises
    ScanStopped when it returns True.
    """
    quantity = quantity or default_quantity(model, continuation)
    ids, measure = _measure(model, text, quantity, continuation)
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    total = n_layers * n_heads
    batch = batch_size or scan_batch_size(model, len(ids))
    stack = _Stack(model, ids)
    scores = np.empty(total, dtype=np.float64)
    for start in range(0, total, batch):
        if should_stop is not None and should_stop():
            raise ScanStopped(f"stopped after {start} of {total} heads")
        rows = torch.arange(start, min(start + batch, total))
        first = start // n_heads  # the lowest layer this batch ablates
        keep = torch.ones(n_layers - first, len(rows), n_heads)  # layers first.., B, H
        keep[rows // n_heads - first, torch.arange(len(rows)), rows % n_heads] = 0.0
        scores[start : start + len(rows)] = measure(stack.run_from(first, keep))
        if progress is not None:
            progress(start + len(rows), total)
    return scores.reshape(n_layers, n_heads)


def _measure(model: LoadedModel, text: str, quantity: str, continuation: str | None):
    """The text's token ids, and `change(hidden [B, T, C]) -> [B]` for the quantity, against the
    unablated run computed here once (by the same forward pass as the single-run functions)."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; choose one of {', '.join(QUANTITIES)}")
    if quantity in ("continuation", "next_token"):
        require_decoder(model)
    if quantity == "continuation":
        ids, first = continuation_ids(model, text, continuation or "")
        base = continuation_logprobs_from(model, hidden_states(model, ids, None), ids, first)[0].double().sum()
        return ids, lambda hidden: (
            base - continuation_logprobs_from(model, hidden, ids, first).double().sum(-1)).numpy()
    if quantity == "next_token":
        ids = text_ids(model, text)
        base = next_logprobs_from(model, hidden_states(model, ids, None))[0]
        top = int(base.argmax())
        return ids, lambda hidden: (base[top] - next_logprobs_from(model, hidden)[:, top]).double().numpy()
    if quantity == "mask_fill":
        ids, position = mask_ids(model, text)
        base = mask_logprobs_from(model, hidden_states(model, ids, None), position)[0]
        top = int(base.argmax())
        return ids, lambda hidden: (base[top] - mask_logprobs_from(model, hidden, position)[:, top]).double().numpy()
    ids = text_ids(model, text)
    plain = mean_pooled(hidden_states(model, ids, None))
    return ids, lambda hidden: cosine_change(plain, mean_pooled(hidden)).numpy()


class _Stack:
    """One unpadded text's forward pass, split by layer: the plain run's residual stream entering each
    layer, kept so that a batch ablating heads of layer l runs only layers l.. . The steps are
    Transformer.forward's (positions, embeddings, layer inputs, blocks, finish) without a cache
    or recording; tests check each scan row against the whole forward pass with the same mask."""

    @torch.inference_mode()
    def __init__(self, model: LoadedModel, ids: list[int]) -> None:
        module = self.module = model.module
        tensor = torch.tensor([ids], dtype=torch.long, device=model.info.device)
        positions = module.positions(tensor)
        x = module.embed(tensor, torch.zeros_like(tensor), positions)
        self.layer_inputs = module.layer_inputs(tensor, None, 0, positions)  # each layer's mask, rotary, bias
        self.inputs = []  # the residual stream entering each layer, [1, T, C]
        for block, (mask, rotary, bias) in zip(module.blocks, self.layer_inputs):
            self.inputs.append(x)
            x, _ = block(x, mask, rotary, bias=bias)

    @torch.inference_mode()
    def run_from(self, first: int, keep: torch.Tensor) -> torch.Tensor:
        """Final hidden states [B, T, C] from the plain run's input to layer `first` on, with head masks
        `keep` [L - first, B, H] for layers first.. (the layers before are the plain run's)."""
        weight = self.inputs[0]
        keep = keep.to(device=weight.device, dtype=weight.dtype)
        x = self.inputs[first].expand(keep.shape[1], -1, -1)
        for index in range(first, len(self.module.blocks)):
            mask, rotary, bias = self.layer_inputs[index]
            x, _ = self.module.blocks[index](x, mask, rotary, keep[index - first], bias=bias)
        return self.module.finish(x)
