"""What a model predicts, read from one forward pass, optionally with some heads switched off by a head mask.

- decoders: the log-probability of a continuation given a prefix (`continuation_logprob`) and the top-k
  next tokens (`next_token_top_k`);
- encoders with a masked-LM head: the top-k fills of one mask token (`mask_fill_top_k`);
- encoders without a head (sentence-embedding models such as all-MiniLM-L6-v2): the cosine change of
  the mean-pooled sentence embedding (`embedding_cosine_change`).

`head_mask` everywhere is the model's own ([L, H], or [L, B, H] with one mask per batch row; 1 keeps a
head's output, 0 zeroes it before `o_proj`), as a tensor, an array or nested lists. The ablation and the
importance scan (attnviz.interventions.ablation) compare these with and without a mask. Nothing here calls
transformers: tokenizing is the tokenizer's Rust backend and the forward pass is ours.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from attnviz.models.inputs import MASK_SPELLINGS, has_mlm_head, mask_token, text_ids
from attnviz.models.loaded_model import LoadedModel
from attnviz.transformer.record import Recorder

TOP_K = 5


class Prediction(NamedTuple):
    text: str  # the token's text as the tokenizer decodes it alone (a leading space shows as one)
    logprob: float  # natural log
    id: int

    @property
    def prob(self) -> float:
        return float(np.exp(self.logprob))


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
    require_decoder(model)
    ids, first = continuation_ids(model, prefix, continuation)
    logprobs = _continuation_logprobs(model, ids, first, as_head_mask(model, head_mask))[0]  # N
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
    require_decoder(model)
    ids = text_ids(model, text)
    logprobs = next_logprobs(model, ids, as_head_mask(model, head_mask))[0]  # V
    return top_predictions(model, logprobs, k)


def mask_fill_top_k(model: LoadedModel, text_with_mask: str, head_mask=None, k: int = TOP_K) -> list[Prediction]:
    """The k likeliest fills of the one mask token in `text_with_mask` (encoders with a masked-LM head),
    best first. The mask may be typed as `[MASK]` or `<mask>` whatever the model's own spelling."""
    ids, position = mask_ids(model, text_with_mask)
    logprobs = mask_logprobs(model, ids, position, as_head_mask(model, head_mask))[0]  # V
    return top_predictions(model, logprobs, k)


def masked_token_logprob(model: LoadedModel, ids: list[int], position: int, head_mask=None) -> float:
    """log P(ids[position]) with that token replaced by the mask token: one term of a pseudo-log-likelihood
    (encoders with a masked-LM head; the minimal pairs' masked score)."""
    masked = list(ids)
    masked[position] = model.tokenizer.token_to_id(mask_token(model))
    logprobs = mask_logprobs(model, masked, position, as_head_mask(model, head_mask))[0]  # V
    return float(logprobs[ids[position]])


def mask_ids(model: LoadedModel, text_with_mask: str) -> tuple[list[int], int]:
    """The token ids of a text holding exactly one mask token, and the mask's position."""
    if not has_mlm_head(model):
        raise ValueError("this model has no masked-LM head: mask filling needs a checkpoint that has one")
    spelling = mask_token(model)
    if not isinstance(text_with_mask, str):
        raise ValueError("the text must be a string")
    for typed in MASK_SPELLINGS:
        text_with_mask = text_with_mask.replace(typed, spelling)
    ids = text_ids(model, text_with_mask)
    mask_id = model.tokenizer.token_to_id(spelling)
    positions = [i for i, t in enumerate(ids) if t == mask_id]
    if len(positions) != 1:
        raise ValueError(f"place exactly one {spelling} in the text (found {len(positions)})")
    return ids, positions[0]


def embedding_cosine_change(model: LoadedModel, text: str, head_mask) -> float:
    """1 - cosine(sentence embedding with `head_mask`, without it): the embedding is the mean of the last
    hidden state over the text's tokens (specials included, padding excluded), as sentence-transformers'
    mean pooling. 0 means the heads switched off change nothing."""
    ids = text_ids(model, text)
    mask = as_head_mask(model, head_mask)
    if mask is None:
        return 0.0
    plain, ablated = _pooled(model, ids, None), _pooled(model, ids, mask)
    return float(cosine_change(plain, ablated)[0])


# --- forward passes --------------------------------------------------------------------------------------


@torch.inference_mode()
def hidden_states(model: LoadedModel, ids: list[int], head_mask: torch.Tensor | None, rows: int = 1) -> torch.Tensor:
    """Final hidden states [rows, T, C] of `ids` repeated `rows` times (one head mask per row). Nothing is
    recorded (no attentions kept) and no logits computed: the callers unembed only the positions they read."""
    device = model.info.device
    tensor = torch.tensor([ids], dtype=torch.long, device=device).expand(rows, -1)
    types = torch.zeros_like(tensor)
    out = model.module(tensor, None, types, head_mask=head_mask, with_logits=False, record=Recorder())
    return out.hidden


@torch.inference_mode()
def continuation_logprobs_from(model, hidden, ids, first) -> torch.Tensor:
    """float32 [B, N] on the CPU: log P(ids[t] | ids[:t]) for t = first .. len(ids) - 1."""
    logits = model.module.unembed(hidden[:, first - 1 : len(ids) - 1])  # B, N, V
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    targets = torch.tensor(ids[first:], device=logprobs.device).expand(hidden.shape[0], -1)
    return logprobs.gather(-1, targets[..., None])[..., 0].cpu()


@torch.inference_mode()
def next_logprobs_from(model, hidden) -> torch.Tensor:
    """float32 [B, V] on the CPU: the next-token log-probabilities after the last token."""
    return torch.log_softmax(model.module.unembed(hidden[:, -1]).float(), dim=-1).cpu()


@torch.inference_mode()
def mask_logprobs_from(model, hidden, position) -> torch.Tensor:
    """float32 [B, V] on the CPU: the masked-LM head's log-probabilities at `position`."""
    return torch.log_softmax(model.module.mlm_head(hidden[:, position]).float(), dim=-1).cpu()


def mean_pooled(hidden) -> torch.Tensor:
    """float32 [B, C] on the CPU: the mean of the last hidden state over all tokens (one unpadded
    sequence, so sentence-transformers' mask-weighted mean is the plain mean)."""
    return hidden.float().mean(dim=1).cpu()


def _continuation_logprobs(model, ids, first, head_mask) -> torch.Tensor:
    return continuation_logprobs_from(model, hidden_states(model, ids, head_mask), ids, first)


def next_logprobs(model, ids, head_mask) -> torch.Tensor:
    return next_logprobs_from(model, hidden_states(model, ids, head_mask))


def mask_logprobs(model, ids, position, head_mask) -> torch.Tensor:
    return mask_logprobs_from(model, hidden_states(model, ids, head_mask), position)


def _pooled(model, ids, head_mask) -> torch.Tensor:
    return mean_pooled(hidden_states(model, ids, head_mask))


def cosine_change(plain: torch.Tensor, ablated: torch.Tensor) -> torch.Tensor:
    return 1.0 - torch.nn.functional.cosine_similarity(plain.double(), ablated.double(), dim=-1)


# --- small helpers ---------------------------------------------------------------------------------------


def require_decoder(model: LoadedModel) -> None:
    if not model.config.causal or model.module.lm_head is None:
        raise ValueError("this needs a decoder with a language-model head (GPT-2, Llama family); "
                         "this model is an encoder")


def head_mask_of(model: LoadedModel, off) -> np.ndarray:
    """float32 [L, H] ones with a 0 at each (layer, head) of `off`."""
    mask = np.ones((model.config.n_layers, model.config.n_heads), dtype=np.float32)
    for layer, head in off:
        if not (0 <= layer < mask.shape[0] and 0 <= head < mask.shape[1]):
            raise ValueError(f"no head {layer}.{head} in {mask.shape[0]} layers x {mask.shape[1]} heads")
        mask[layer, head] = 0.0
    return mask


def as_head_mask(model: LoadedModel, head_mask) -> torch.Tensor | None:
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


def _decode_each(model: LoadedModel, ids: list[int]) -> list[str]:
    return model.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)


def top_predictions(model: LoadedModel, logprobs: torch.Tensor, k: int) -> list[Prediction]:
    top = logprobs.topk(max(1, min(k, logprobs.shape[-1])))
    ids = top.indices.tolist()
    return [Prediction(text, float(lp), i) for text, lp, i in zip(_decode_each(model, ids), top.values.tolist(), ids)]
