"""What a model predicts, with or without some attention heads switched off (head ablation).

The quantities the Explore page's ablation shows and the importance scan ranks heads by:

- decoders: the log-probability of a continuation given a prefix (`continuation_logprob`) and the top-k
  next tokens (`next_token_top_k`);
- encoders with a masked-LM head: the top-k fills of one mask token (`mask_fill_top_k`);
- encoders without a head (sentence-embedding models such as all-MiniLM-L6-v2): the cosine change of
  the mean-pooled sentence embedding (`embedding_cosine_change`).

`head_mask` everywhere is the model's own ([L, H], or [L, B, H] with one mask per batch row; 1 keeps a
head's output, 0 zeroes it before `o_proj`), as a tensor, an array or nested lists. Nothing here calls
transformers: tokenizing is the tokenizer's Rust backend and the forward pass is ours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch

from attnviz.tracing.model import LoadedModel
from attnviz.transformer.record import Recorder

TOP_K = 5
# What one batch of an importance scan may hold in transient activations (bytes); the app reserves this
# much before a scan (see `scan_bytes`).
SCAN_BATCH_BYTES = 256 * 2**20
MAX_SCAN_BATCH = 64
QUANTITIES = ("continuation", "next_token", "mask_fill", "embedding")
MASK_SPELLINGS = ("[MASK]", "<mask>")  # what a user may type for the mask token, whatever the model's


class Prediction(NamedTuple):
    text: str  # the token's text as the tokenizer decodes it alone (a leading space shows as one)
    logprob: float  # natural log
    id: int

    @property
    def prob(self) -> float:
        return float(np.exp(self.logprob))


class ScanStopped(Exception):
    """`importance_scan` was told to stop (its `should_stop()` returned True)."""


# --- the quantities --------------------------------------------------------------------------------------


def continuation_logprob(
    model: LoadedModel, prefix: str, continuation: str, head_mask=None
) -> tuple[float, list[tuple[str, float]]]:
    """log P(continuation | prefix) under a decoder, natural log, and each scored token's (text, logprob).

    Tokenisation: `prefix + continuation` is tokenised as ONE text (with the tokenizer's usual special
    tokens, e.g. a BOS), so the BPE boundary between the two is the one the model really sees. Boundary
    rule: a token is scored (belongs to the continuation) when its character span ends after
    `len(prefix)`, i.e. it holds at least one character of the continuation; special tokens are never
    scored. So a leading space belongs to the continuation (" cat" is one token " cat", scored); a
    prefix ending in a space, "The " + "cat", gives the token " cat", scored whole, its space included;
    and a token that straddles the boundary ("The ca" + "t") is scored whole, since a model cannot score
    part of a token. Each scored token t is predicted from the logits at t - 1, so the continuation's
    first token needs a token before it (a non-empty prefix or the tokenizer's BOS).

    Raises ValueError for an encoder, an empty continuation, no token before the continuation, or a
    text longer than the model's token limit (a truncated continuation would be scored wrongly).
    """
    _require_decoder(model)
    ids, first = continuation_ids(model, prefix, continuation)
    logprobs = _continuation_logprobs(model, ids, first, _head_mask(model, head_mask))[0]  # N
    texts = _decode_each(model, ids[first:])
    per_token = [(text, float(lp)) for text, lp in zip(texts, logprobs.tolist())]
    return float(logprobs.double().sum()), per_token


def continuation_ids(model: LoadedModel, prefix: str, continuation: str) -> tuple[list[int], int]:
    """The token ids of `prefix + continuation` and the index of the first scored token (the boundary
    rule of `continuation_logprob`)."""
    if not isinstance(continuation, str) or not continuation:
        raise ValueError("the continuation is empty: type the words to score")
    if not isinstance(prefix, str):
        raise ValueError("the prefix must be text")
    enc = model.encode(prefix + continuation)
    if enc.overflowing:
        raise ValueError(f"the text is longer than this model's limit of {model.info.max_tokens} tokens")
    special = [bool(s) for s in enc.special_tokens_mask]
    scored = [i for i, (start, end) in enumerate(enc.offsets) if not special[i] and end > len(prefix)]
    if not scored:
        raise ValueError("the continuation produced no tokens")
    first, last = scored[0], scored[-1]
    if first == 0:
        raise ValueError("the prefix is empty and this tokenizer adds no start token: type a prefix")
    # Specials after the continuation (an EOS some tokenizers append) are cut off, not scored.
    return list(enc.ids[: last + 1]), first


def next_token_top_k(model: LoadedModel, text: str, head_mask=None, k: int = TOP_K) -> list[Prediction]:
    """The k likeliest tokens after the whole of `text` (decoders), best first."""
    _require_decoder(model)
    ids = _ids(model, text)
    logprobs = _last_logprobs(model, ids, _head_mask(model, head_mask))[0]  # V
    return _top(model, logprobs, k)


def mask_fill_top_k(model: LoadedModel, text_with_mask: str, head_mask=None, k: int = TOP_K) -> list[Prediction]:
    """The k likeliest fills of the one mask token in `text_with_mask` (encoders with a masked-LM head),
    best first. The mask may be typed as `[MASK]` or `<mask>` whatever the model's own spelling."""
    ids, position = mask_ids(model, text_with_mask)
    logprobs = _mask_logprobs(model, ids, position, _head_mask(model, head_mask))[0]  # V
    return _top(model, logprobs, k)


def masked_token_logprob(model: LoadedModel, ids: list[int], position: int, head_mask=None) -> float:
    """log P(ids[position]) with that token replaced by the mask token: one term of a pseudo-log-likelihood
    (encoders with a masked-LM head; the minimal pairs' masked score)."""
    masked = list(ids)
    masked[position] = model.tokenizer.token_to_id(_mask_token(model))
    logprobs = _mask_logprobs(model, masked, position, _head_mask(model, head_mask))[0]  # V
    return float(logprobs[ids[position]])


def mask_ids(model: LoadedModel, text_with_mask: str) -> tuple[list[int], int]:
    """The token ids of a text holding exactly one mask token, and the mask's position."""
    if not has_mlm_head(model):
        raise ValueError("this model has no masked-LM head: mask filling needs a checkpoint that has one")
    mask_token = _mask_token(model)
    if not isinstance(text_with_mask, str):
        raise ValueError("the text must be a string")
    for spelling in MASK_SPELLINGS:
        text_with_mask = text_with_mask.replace(spelling, mask_token)
    ids = _ids(model, text_with_mask)
    mask_id = model.tokenizer.token_to_id(mask_token)
    positions = [i for i, t in enumerate(ids) if t == mask_id]
    if len(positions) != 1:
        raise ValueError(f"place exactly one {mask_token} in the text (found {len(positions)})")
    return ids, positions[0]


def embedding_cosine_change(model: LoadedModel, text: str, head_mask) -> float:
    """1 - cosine(sentence embedding with `head_mask`, without it): the embedding is the mean of the last
    hidden state over the text's tokens (specials included, padding excluded), as sentence-transformers'
    mean pooling. 0 means the heads switched off change nothing."""
    ids = _ids(model, text)
    mask = _head_mask(model, head_mask)
    if mask is None:
        return 0.0
    plain, ablated = _pooled(model, ids, None), _pooled(model, ids, mask)
    return float(_cosine_change(plain, ablated)[0])


def has_mlm_head(model: LoadedModel) -> bool:
    """Whether the model can fill a mask: an encoder loaded with its masked-LM head (ModelInfo.mlm_head)."""
    return getattr(model.module, "mlm_head", None) is not None


def default_quantity(model: LoadedModel, continuation: str | None = None) -> str:
    """What an ablation of this model is measured by (the order of the module docstring)."""
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
    mask = _head_mask(model, head_mask)
    if quantity == "embedding":
        return Effect(quantity, [], [], [], cosine_change=embedding_cosine_change(model, text, mask))
    if quantity == "next_token":
        ids = _ids(model, text)
        plain, ablated = _last_logprobs(model, ids, None)[0], _last_logprobs(model, ids, mask)[0]
    else:
        ids, position = mask_ids(model, text)
        plain, ablated = _mask_logprobs(model, ids, position, None)[0], _mask_logprobs(model, ids, position, mask)[0]
    before = _top(model, plain, k)
    effect = Effect(quantity, before, _top(model, ablated, k), [float(ablated[p.id]) for p in before])
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


def scan_bytes(model: LoadedModel, n_tokens: int, batch: int, scored: int | None = None) -> int:
    """Transient bytes of one scan batch: per row the attention scores and probabilities of one layer,
    the hidden states, the MLP's inner width and the log-softmax over the vocabulary at the `scored`
    positions (default n_tokens; 1 for the next token or a mask); plus the plain run's residual stream
    at every layer, kept once."""
    c = model.config
    itemsize = next(model.module.parameters()).element_size()
    scored = n_tokens if scored is None else min(scored, n_tokens)
    per_row = itemsize * n_tokens * (6 * c.d_model + 2 * c.d_ff + 3 * c.n_heads * n_tokens)
    per_row += 4 * 2 * scored * c.vocab_size if c.causal or has_mlm_head(model) else 0
    return batch * per_row + itemsize * (c.n_layers + 1) * n_tokens * c.d_model


def scan_batch_size(model: LoadedModel, n_tokens: int, budget: int = SCAN_BATCH_BYTES,
                    scored: int | None = None) -> int:
    """Rows per batch: what fits `budget`, at most MAX_SCAN_BATCH (`scored` as in `scan_bytes`). Large batches
    pay: on a CPU a short text's forward pass is bound by reading the weights, which a batch reads once for
    all its rows."""
    per_row = max(1, scan_bytes(model, n_tokens, 2, scored) - scan_bytes(model, n_tokens, 1, scored))
    return int(max(1, min(MAX_SCAN_BATCH, budget // per_row)))


def _measure(model: LoadedModel, text: str, quantity: str, continuation: str | None):
    """The text's token ids, and `change(hidden [B, T, C]) -> [B]` for the quantity, against the
    unablated run computed here once (by the same forward pass as the single-run functions)."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; choose one of {', '.join(QUANTITIES)}")
    if quantity in ("continuation", "next_token"):
        _require_decoder(model)
    if quantity == "continuation":
        ids, first = continuation_ids(model, text, continuation or "")
        base = _continuation_from(model, _hidden(model, ids, None), ids, first)[0].double().sum()
        return ids, lambda hidden: (base - _continuation_from(model, hidden, ids, first).double().sum(-1)).numpy()
    if quantity == "next_token":
        ids = _ids(model, text)
        base = _last_from(model, _hidden(model, ids, None))[0]
        top = int(base.argmax())
        return ids, lambda hidden: (base[top] - _last_from(model, hidden)[:, top]).double().numpy()
    if quantity == "mask_fill":
        ids, position = mask_ids(model, text)
        base = _mask_from(model, _hidden(model, ids, None), position)[0]
        top = int(base.argmax())
        return ids, lambda hidden: (base[top] - _mask_from(model, hidden, position)[:, top]).double().numpy()
    ids = _ids(model, text)
    plain = _pooled_from(_hidden(model, ids, None))
    return ids, lambda hidden: _cosine_change(plain, _pooled_from(hidden)).numpy()


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


# --- forward passes --------------------------------------------------------------------------------------


@torch.inference_mode()
def _hidden(model: LoadedModel, ids: list[int], head_mask: torch.Tensor | None, rows: int = 1) -> torch.Tensor:
    """Final hidden states [rows, T, C] of `ids` repeated `rows` times (one head mask per row). Nothing is
    recorded (no attentions kept) and no logits computed: the callers unembed only the positions they read."""
    device = model.info.device
    tensor = torch.tensor([ids], dtype=torch.long, device=device).expand(rows, -1)
    types = torch.zeros_like(tensor)
    out = model.module(tensor, None, types, head_mask=head_mask, with_logits=False, record=Recorder())
    return out.hidden


@torch.inference_mode()
def _continuation_from(model, hidden, ids, first) -> torch.Tensor:
    """float32 [B, N] on the CPU: log P(ids[t] | ids[:t]) for t = first .. len(ids) - 1."""
    logits = model.module.unembed(hidden[:, first - 1 : len(ids) - 1])  # B, N, V
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    targets = torch.tensor(ids[first:], device=logprobs.device).expand(hidden.shape[0], -1)
    return logprobs.gather(-1, targets[..., None])[..., 0].cpu()


@torch.inference_mode()
def _last_from(model, hidden) -> torch.Tensor:
    """float32 [B, V] on the CPU: the next-token log-probabilities after the last token."""
    return torch.log_softmax(model.module.unembed(hidden[:, -1]).float(), dim=-1).cpu()


@torch.inference_mode()
def _mask_from(model, hidden, position) -> torch.Tensor:
    """float32 [B, V] on the CPU: the masked-LM head's log-probabilities at `position`."""
    return torch.log_softmax(model.module.mlm_head(hidden[:, position]).float(), dim=-1).cpu()


def _pooled_from(hidden) -> torch.Tensor:
    """float32 [B, C] on the CPU: the mean of the last hidden state over all tokens (one unpadded
    sequence, so sentence-transformers' mask-weighted mean is the plain mean)."""
    return hidden.float().mean(dim=1).cpu()


def _continuation_logprobs(model, ids, first, head_mask) -> torch.Tensor:
    return _continuation_from(model, _hidden(model, ids, head_mask), ids, first)


def _last_logprobs(model, ids, head_mask) -> torch.Tensor:
    return _last_from(model, _hidden(model, ids, head_mask))


def _mask_logprobs(model, ids, position, head_mask) -> torch.Tensor:
    return _mask_from(model, _hidden(model, ids, head_mask), position)


def _pooled(model, ids, head_mask) -> torch.Tensor:
    return _pooled_from(_hidden(model, ids, head_mask))


def _cosine_change(plain: torch.Tensor, ablated: torch.Tensor) -> torch.Tensor:
    return 1.0 - torch.nn.functional.cosine_similarity(plain.double(), ablated.double(), dim=-1)


# --- small helpers ---------------------------------------------------------------------------------------


def _require_decoder(model: LoadedModel) -> None:
    if not model.config.causal or model.module.lm_head is None:
        raise ValueError("this needs a decoder with a language-model head (GPT-2, Llama family); "
                         "this model is an encoder")


def _ids(model: LoadedModel, text: str) -> list[int]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the text is empty: type a sentence")
    enc = model.encode(text)
    if enc.overflowing:
        raise ValueError(f"the text is longer than this model's limit of {model.info.max_tokens} tokens")
    if not enc.ids:
        raise ValueError("the text produced no tokens")
    return list(enc.ids)


def head_mask_of(model: LoadedModel, off) -> np.ndarray:
    """float32 [L, H] ones with a 0 at each (layer, head) of `off`."""
    mask = np.ones((model.config.n_layers, model.config.n_heads), dtype=np.float32)
    for layer, head in off:
        if not (0 <= layer < mask.shape[0] and 0 <= head < mask.shape[1]):
            raise ValueError(f"no head {layer}.{head} in {mask.shape[0]} layers x {mask.shape[1]} heads")
        mask[layer, head] = 0.0
    return mask


def _head_mask(model: LoadedModel, head_mask) -> torch.Tensor | None:
    """The mask as a tensor on the model's device and dtype, its shape checked ([L, H] or [L, B, H])."""
    if head_mask is None:
        return None
    weight = next(model.module.parameters())
    mask = torch.as_tensor(np.asarray(head_mask, dtype=np.float32) if not torch.is_tensor(head_mask) else head_mask)
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    if mask.dim() not in (2, 3) or mask.shape[0] != n_layers or mask.shape[-1] != n_heads:
        raise ValueError(f"head_mask must be [{n_layers}, {n_heads}] or [{n_layers}, B, {n_heads}], "
                         f"got {list(mask.shape)}")
    return mask.to(device=weight.device, dtype=weight.dtype)


def _mask_token(model: LoadedModel) -> str:
    for spelling in MASK_SPELLINGS:
        if model.tokenizer.token_to_id(spelling) is not None:
            return spelling
    raise ValueError("this tokenizer has no mask token ([MASK] or <mask>)")


def _decode_each(model: LoadedModel, ids: list[int]) -> list[str]:
    return model.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)


def _top(model: LoadedModel, logprobs: torch.Tensor, k: int) -> list[Prediction]:
    top = logprobs.topk(max(1, min(k, logprobs.shape[-1])))
    ids = top.indices.tolist()
    return [Prediction(text, float(lp), i) for text, lp, i in zip(_decode_each(model, ids), top.values.tolist(), ids)]
