"""Sink anatomy (Gu et al. 2024, "When Attention Sink Emerges in Language Models", their Table 1 and sec. 3):
how much of each head's weight goes to the first token over a set of texts, the share of heads that are
sinks at a threshold epsilon, and the first key's geometry that explains it.

Rules (docs/views/sink-anatomy.md, "Sink anatomy"):
- a head's *mean* is, for each text, the mean over its query positions after the first (1..n-1) of the
  attention weight on position 0, then the mean of that over the texts. Texts are tokenized as
  `LoadedModel.run` tokenizes them (special tokens included: the first token is BOS where the tokenizer adds
  one), cut at `max_tokens` when given (the built-in texts: 64 tokens, as Gu et al.). A text of one token
  has no query after the first and is left out (counted in `skipped`).
- the *sink ratio* at epsilon is the share of heads whose mean is >= epsilon.
- per head, over the same texts: the first key's norm, the mean norm of the other keys, and the mean over
  query positions after the first of cos(q_i, k_0), with k the head's own key/value head (after rotary:
  the vectors whose dot product is the score); and the learned-sink mass, 1 - sum_j a_ij over the same rows
  (gpt-oss's per-head sink logit takes it; 0 up to rounding for every other model).

Gu et al. average alpha_1 over every row, row 0 included (where the weight on position 0 is 1), and count
alpha > epsilon: attnviz.analysis.sink.first_token_share keeps their form for one trace. Here the issue's
rule holds: row 0 (which has no choice) is left out and the threshold is inclusive.

Texts run in right-padded batches (`LoadedModel.forward_encodings`); only each text's own positions count.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.analysis.sink import FIRST_TOKEN_EPSILON
from attnviz.memory import ceiling
from attnviz.models.batch_bytes import scan_bytes
from attnviz.models.loaded_model import LoadedModel
from attnviz.probesets import PROBESET_DIR
from attnviz.transformer.record import Recorder

DEFAULT_EPSILON = FIRST_TOKEN_EPSILON  # Gu et al.'s epsilon, 0.3
TEXT_TOKENS = 64  # Gu et al.'s inputs: the built-in texts are cut here
BATCH_SIZE = 8
BUILTIN_PATH = PROBESET_DIR / "sink_texts.jsonl"


@dataclass(frozen=True)
class SinkAnatomy:
    """[L, H] float64 arrays over `n_texts` texts (see the module docstring)."""

    means: np.ndarray  # mean weight on the first token
    first_key_norm: np.ndarray  # ||k_0||
    other_key_norm: np.ndarray  # mean ||k_j||, j >= 1
    query_cosine: np.ndarray  # mean cos(q_i, k_0), i >= 1
    sink_mass: np.ndarray  # mean learned-sink mass, i >= 1
    n_texts: int
    skipped: int  # texts of one token, left out

    def ratio(self, epsilon: float = DEFAULT_EPSILON) -> float:
        return sink_ratio(self.means, epsilon)


def sink_ratio(means: np.ndarray, epsilon: float = DEFAULT_EPSILON) -> float:
    """The share of heads whose mean first-token weight is >= epsilon."""
    means = np.asarray(means)
    if means.size == 0:
        raise ValueError("no heads")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must lie in [0, 1], got {epsilon}")
    return float((means >= epsilon).sum() / means.size)


def builtin_texts() -> list[str]:
    """The built-in texts (attnviz/probesets/sink_texts.jsonl, self-written prose of 60+ tokens each)."""
    with BUILTIN_PATH.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def first_token_means(model: LoadedModel, texts: Sequence[str], max_tokens: int | None = None,
                      batch_size: int = BATCH_SIZE, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """[L, H] float64: each head's mean weight on the first token over `texts` (the module docstring's rule)."""
    return _accumulate(model, texts, max_tokens, batch_size, progress, with_keys=False).means


def sink_anatomy(model: LoadedModel, texts: Sequence[str], max_tokens: int | None = None,
                 batch_size: int = BATCH_SIZE, progress: Callable[[int, int], None] | None = None) -> SinkAnatomy:
    """The means, the first key's norm beside the others', its cosine with the queries, and the learned-sink
    mass of every head over `texts`; `progress(done, total)` after each batch (it may raise to cancel)."""
    return _accumulate(model, texts, max_tokens, batch_size, progress, with_keys=True)


def encode_texts(model: LoadedModel, texts: Sequence[str], max_tokens: int | None = None) -> list:
    """The encodings `run` would make (cut at `max_tokens` when given, at most the model's own limit)."""
    if not texts:
        raise ValueError("no texts")
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("a text is empty")
    cut = None if max_tokens is None else min(max_tokens, model.context_tokens)
    return [model.encode(text, max_tokens=cut) for text in texts]


def anatomy_bytes(model: LoadedModel, n_tokens: int, batch_size: int = BATCH_SIZE) -> int:
    """Transient bytes of one batch of `n_tokens`-token texts: the float32 maps [L, B, H, T, T], the queries
    and keys twice (as recorded per layer, and stacked), one text's float64 copies of its rows and vectors, and
    the forward pass's own transient (batch_bytes.scan_bytes, no logits)."""
    c = model.config
    vectors = 2 * (c.n_heads + c.kv_heads) * c.dim_per_head  # queries and keys, recorded and stacked
    kept = 4 * c.n_layers * batch_size * n_tokens * (c.n_heads * n_tokens + vectors)
    one_text = 8 * c.n_layers * c.n_heads * n_tokens * (n_tokens + 2 * c.dim_per_head)
    return kept + one_text + scan_bytes(model, n_tokens, batch_size, scored=0)


def _accumulate(model, texts, max_tokens, batch_size, progress, with_keys: bool) -> SinkAnatomy:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    encodings = [e for e in encode_texts(model, texts, max_tokens) if len(e.ids) >= 2]
    skipped = len(texts) - len(encodings)
    if not encodings:
        raise ValueError("every text has a single token: a head's mean needs a query after the first")
    sums = np.zeros((5, model.info.n_layers, model.info.n_heads))
    kv = torch.tensor(model.module.kv_group)
    names = ("attentions", "queries", "keys") if with_keys else ("attentions",)
    start = 0
    while start < len(encodings):
        longest = max(len(e.ids) for e in encodings[start:start + batch_size])
        per_text = anatomy_bytes(model, longest, 2) - anatomy_bytes(model, longest, 1)
        batch = encodings[start:start + ceiling.fit(per_text, batch_size, anatomy_bytes(model, longest, 0))]
        recorder = Recorder(*names)
        out = model.forward_encodings(batch, with_logits=False, record=recorder)
        attentions = out.attentions.float()  # L, B, H, T, S
        queries = recorder.stacked("queries") if with_keys else None  # L, B, H, T, D
        keys = recorder.stacked("keys") if with_keys else None  # L, B, K, S, D
        for b, enc in enumerate(batch):
            n = len(enc.ids)
            # one text's float64 copies of its rows and vectors, spent where the memory ceiling sees them
            with ceiling.spending(anatomy_bytes(model, n, 0) - scan_bytes(model, n, 0, scored=0), "a text's rows"):
                _add_text(sums, b, n, attentions, queries, keys, kv)
        start += len(batch)
        if progress is not None:
            progress(start, len(encodings))
    means = sums / len(encodings)
    if not with_keys:
        means[1:4] = np.nan
    return SinkAnatomy(*means[[0, 1, 2, 3, 4]], n_texts=len(encodings), skipped=skipped)


def _add_text(sums: np.ndarray, b: int, n: int, attentions, queries, keys, kv) -> None:
    """Add batch row `b` (a text of `n` tokens) to the five sums; `queries`, `keys` None when not recorded."""
    rows = attentions[:, b, :, 1:n, :n].double()  # L, H, n-1, n: the real rows after the first
    sums[0] += rows[..., 0].mean(-1).cpu().numpy()
    sums[4] += (1.0 - rows.sum(-1)).mean(-1).cpu().numpy()
    if queries is not None:
        k = keys[:, b, :, :n].double()[:, kv]  # L, H, n, D: each query head's own key/value head
        q = queries[:, b, :, 1:n].double()  # L, H, n-1, D
        norms = k.norm(dim=-1)
        sums[1] += norms[..., 0].cpu().numpy()
        sums[2] += norms[..., 1:].mean(-1).cpu().numpy()
        cosine = torch.nn.functional.cosine_similarity(q, k[..., :1, :], dim=-1)  # L, H, n-1
        sums[3] += cosine.mean(-1).cpu().numpy()
