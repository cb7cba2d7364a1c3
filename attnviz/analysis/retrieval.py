"""Retrieval scores of attention heads (Wu et al. 2024, "Retrieval Head Mechanistically Explains
Long-Context Factuality"), from what greedy decoding recorded: no model here, numpy only.

A needle-in-a-haystack prompt holds a needle sentence k at the token positions [start, end). While the
model generates token w, head h copies it when both hold:

1. w is a token of the needle, and
2. the key position j that gets the head's strongest attention (argmax over keys) lies in the needle,
   start <= j < end, and holds that same token: prompt_ids[j] == w.

g_h is the set of needle positions head h copied from; its retrieval score is |g_h ∩ k| / |k|, the share
of the needle's tokens it copied. (2) implies (1), so (1) needs no separate check. Wu et al.'s code adds
1/|k| at every copying step, so a needle token copied twice (a model that repeats itself) counts twice and
a score can pass 1; here each needle position counts once, as the set formula reads, and a score is a
share in [0, 1]. Scores of several prompts are averaged over those the model answered, as Wu et al.
accumulate only successful retrievals (they use ROUGE recall > 50; we use exact match of the answer).
"""

from __future__ import annotations

import numpy as np


def copy_events(argmax_keys, generated, prompt_ids, span: tuple[int, int]) -> np.ndarray:
    """bool [steps, L, H]: head (l, h) copied the token generated at that step.

    argmax_keys: int [steps, L, H], the key position of each head's largest attention probability while the
    model produced generated[step] (the query is the position just before that token);
    generated: int [steps], the tokens produced; prompt_ids: int [T]; span: the needle's [start, end)."""
    keys = np.asarray(argmax_keys)
    gen = np.asarray(generated)
    prompt = np.asarray(prompt_ids)
    start, end = _check(keys, gen, prompt, span)
    inside = (keys >= start) & (keys < end)
    token_at_key = prompt[np.where(inside, keys, start)]  # clipped where outside: masked out by `inside`
    return inside & (token_at_key == gen[:, None, None])


def retrieval_scores(argmax_keys, generated, prompt_ids, span: tuple[int, int]) -> np.ndarray:
    """float64 [L, H]: each head's |g_h ∩ k| / |k| on one prompt (distinct needle positions copied)."""
    keys = np.asarray(argmax_keys)
    copied = copy_events(keys, generated, prompt_ids, span)
    start, end = span
    scores = np.zeros(keys.shape[1:], dtype=np.float64)  # L, H (copy_events checked the shape)
    for layer, head in zip(*np.nonzero(copied.any(axis=0)), strict=True):
        scores[layer, head] = len(set(keys[copied[:, layer, head], layer, head].tolist())) / (end - start)
    return scores


def mean_scores(grids, answered) -> np.ndarray | None:
    """The mean [L, H] grid over the prompts the model answered; None when it answered none."""
    kept = [np.asarray(g, dtype=np.float64) for g, ok in zip(grids, answered, strict=True) if ok]
    return np.mean(kept, axis=0) if kept else None


def top_heads(grid, n: int) -> list[tuple[int, int]]:
    """The n heads with the largest scores, (layer, head), best first; ties in (layer, head) order."""
    scores = np.asarray(grid, dtype=np.float64)
    order = np.argsort(-scores.ravel(), kind="stable")[: max(0, n)]
    return [(int(i // scores.shape[1]), int(i % scores.shape[1])) for i in order]


def answer_found(answer: str, continuation: str) -> bool:
    """Exact match: the answer appears in the continuation, case and runs of whitespace aside."""
    def norm(s: str) -> str:
        return " ".join(s.split()).casefold()

    return bool(answer.strip()) and norm(answer) in norm(continuation)


def _check(keys: np.ndarray, gen: np.ndarray, prompt: np.ndarray, span: tuple[int, int]) -> tuple[int, int]:
    start, end = (int(v) for v in span)
    if keys.ndim != 3 or gen.ndim != 1 or keys.shape[0] != gen.shape[0]:
        raise ValueError(f"argmax keys must be [steps, L, H] with one step per generated token; got "
                         f"{keys.shape} for {gen.shape[0] if gen.ndim == 1 else gen.shape} tokens")
    if not 0 <= start < end <= prompt.shape[0]:
        raise ValueError(f"needle span [{start}, {end}) is not inside a prompt of {prompt.shape[0]} tokens")
    return start, end
