"""Head detectors on repeated random tokens (Olsson et al. 2022; TransformerLens's `detect_head`).

The input: `sequences` sequences, each `n` random non-special token ids repeated twice (length 2n,
positions 0..2n-1, no special tokens added). The second copy is positions n..2n-1. For every head,
with a the attention probabilities of one sequence:
- previous_token: mean of a[i, i-1] over i = 1..2n-1 (the whole sequence);
- duplicate_token: mean of a[i, i-n] over i = n..2n-1 (the same token in the first copy);
- induction: mean of a[i, i-n+1] over i = n..2n-1 (the token after that one: what came next last time);
each then averaged over the sequences. Scores are [L, H] float64 arrays in [0, 1]; layers and heads
are 0-based. With n = 2 the induction target i-n+1 is i-1, the previous token: use n >= 3 to tell
them apart (the default is 50).

Pure numpy on attention arrays. `detect_heads` runs a model, but takes any object with
`run_ids(ids) -> [B, L, H, T, T]` (`LoadedModel.run_ids`); this package never imports a model class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

DETECTORS = ("previous_token", "duplicate_token", "induction")


def detector_scores(attentions: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """The three scores, each [L, H], from attentions [B, L, H, 2n, 2n] on repeated sequences."""
    a = np.asarray(attentions)
    if a.ndim != 5 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected attentions of shape [B, L, H, T, T], got {a.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    if a.shape[-1] != 2 * n:
        raise ValueError(f"attentions cover {a.shape[-1]} positions, but 2n = {2 * n}")
    if a.shape[0] == 0:
        raise ValueError("no sequences: attentions have batch size 0")
    a = a.astype(np.float64, copy=False)
    whole = np.arange(1, 2 * n)
    second = np.arange(n, 2 * n)
    return {
        "previous_token": a[..., whole, whole - 1].mean(axis=(0, -1)),
        "duplicate_token": a[..., second, second - n].mean(axis=(0, -1)),
        "induction": a[..., second, second - n + 1].mean(axis=(0, -1)),
    }


def random_repeated_tokens(
    vocab_size: int, special_ids: Iterable[int], n: int, sequences: int, seed: int = 0
) -> list[list[int]]:
    """`sequences` lists of 2n ids: n ids drawn uniformly (with replacement) from 0..vocab_size-1
    minus `special_ids`, with numpy's `default_rng(seed)`, then the same n again."""
    if n < 1 or sequences < 1:
        raise ValueError(f"n and sequences must be >= 1, got n={n}, sequences={sequences}")
    special = {int(i) for i in special_ids}
    allowed = np.asarray([i for i in range(int(vocab_size)) if i not in special], dtype=np.int64)
    if allowed.size == 0:
        raise ValueError(f"no non-special token among the {vocab_size} ids")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(sequences):
        first = rng.choice(allowed, size=n).tolist()
        out.append(first + first)
    return out


def vocabulary(model) -> tuple[int, list[int]]:
    """(vocab size, special ids) of a model exposing `config.vocab_size` and a `tokenizers.Tokenizer`
    as `tokenizer`: ids the embedding has and the tokenizer knows; added tokens marked special."""
    size = int(model.config.vocab_size)
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return size, []
    size = min(size, tokenizer.get_vocab_size(with_added_tokens=True))
    special = sorted(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)
    return size, special


def detect_heads(
    model,
    n: int = 50,
    sequences: int = 4,
    seed: int = 0,
    vocab_size: int | None = None,
    special_ids: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """The three [L, H] scores of a model: `model.run_ids` is called once per sequence (so memory
    stays at one sequence's attentions). `vocab_size` / `special_ids` default to `vocabulary(model)`;
    `progress(done, total)` is told after each sequence."""
    if n < 2 or sequences < 1:
        raise ValueError(f"need n >= 2 and sequences >= 1, got n={n}, sequences={sequences}")
    if vocab_size is None or special_ids is None:
        size, special = vocabulary(model)
        vocab_size = size if vocab_size is None else vocab_size
        special_ids = special if special_ids is None else special_ids
    ids = random_repeated_tokens(vocab_size, special_ids, n, sequences, seed)
    totals = None
    for done, sequence in enumerate(ids, start=1):
        scores = detector_scores(np.asarray(model.run_ids([sequence])), n)
        totals = scores if totals is None else {k: totals[k] + scores[k] for k in DETECTORS}
        if progress is not None:
            progress(done, sequences)
    return {k: totals[k] / sequences for k in DETECTORS}


def top_heads(scores: np.ndarray, k: int = 5) -> list[tuple[int, int, float]]:
    """The k highest-scoring heads of an [L, H] grid as (layer, head, score), best first (ties in
    (layer, head) order)."""
    scores = np.asarray(scores)
    order = np.argsort(-scores, axis=None, kind="stable")[:k]
    return [(int(i // scores.shape[1]), int(i % scores.shape[1]), float(scores.flat[i])) for i in order]
