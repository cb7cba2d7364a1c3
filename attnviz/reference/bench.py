"""Benchmark: `model.run(text)` against HF eager (tokenize + forward with attentions + numpy).

Same weights, same text, same thread count, inference mode on both, no result caching; after a
warm-up the two are timed alternately and the median of the per-pair ratios is reported.
"""

from __future__ import annotations

import statistics
import time

import torch

SENTENCE = (
    "The keys to the old wooden cabinet in the hall are on the kitchen table, and the children who "
    "found them yesterday said that they would bring them back before their parents came home. "
)


def text_of_length(model, n_tokens: int) -> str:
    """A text that tokenizes to about n_tokens tokens (specials included)."""
    words = (SENTENCE * (n_tokens // 8 + 4)).split()
    low, high = 1, len(words)
    while low < high:  # the longest prefix of words that fits
        mid = (low + high + 1) // 2
        if len(model.encode(" ".join(words[:mid])).ids) <= n_tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def check_lengths(model, lengths) -> None:
    """Lengths must be positive and within the model's token limit (longer texts are truncated)."""
    limit = model.info.max_tokens
    for n in lengths:
        if not 1 <= n <= limit:
            raise ValueError(f"length {n} is outside 1..{limit}, the token limit of {model.info.name}")


def bench(model, lengths=(16, 64, 256), repeats: int = 15, warmup: int = 3) -> list[dict]:
    from attnviz.loading import hf

    check_lengths(model, lengths)
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")

    # Both sides on the model's device, each ending in numpy on the CPU.
    device = model.info.device
    reference = hf.reference_model(model.info.path).to(device)
    tokenizer = hf.reference_tokenizer(model.info.path)

    def ours(text):
        return model.run(text).attentions

    def theirs(text):
        with torch.inference_mode():
            enc = tokenizer(text, return_tensors="pt").to(device)
            out = reference(**enc, output_attentions=True)
            return torch.stack(out.attentions)[:, 0].cpu().numpy()

    rows = []
    for n in lengths:
        text = text_of_length(model, n)
        for _ in range(warmup):
            ours(text), theirs(text)
        pairs = []
        for _ in range(repeats):
            pairs.append((_timed(ours, text), _timed(theirs, text)))
        rows.append({
            "tokens": len(model.encode(text).ids),
            "ours_ms": 1000 * statistics.median(p[0] for p in pairs),
            "hf_ms": 1000 * statistics.median(p[1] for p in pairs),
            "ratio": statistics.median(p[0] / p[1] for p in pairs),
        })
    return rows


def _timed(fn, text) -> float:
    _synchronize()
    start = time.perf_counter()
    fn(text)
    _synchronize()  # a GPU runs asynchronously: wait for it before reading the clock
    return time.perf_counter() - start


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
