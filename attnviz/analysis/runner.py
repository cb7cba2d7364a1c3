"""Run a model over probe items and score its heads: each distinct sentence is run once.

The model object only needs `.run(text) -> AttentionTrace`; if it has `.run_batch(list[str]) ->
list[AttentionTrace]` that is used, `batch_size` texts at a time, or as many of them as its `.texts_that_fit(batch)`
says fit its memory. Traces are scored batch by batch
and then dropped, so memory does not grow with the number of sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attnviz.analysis.items import ProbeItem
from attnviz.analysis.scoring import RelationScore, ScoreAccumulator
from attnviz.trace import AttentionTrace


def _score_batch(model, batch: list[str], by_text: dict[str, list[ProbeItem]], accumulator) -> None:
    """Run and score one batch; its traces are dropped on return, before the next batch runs (a loop's variables
    would hold the last batch's traces while the next one is computed)."""
    for text, trace in zip(batch, _run(model, batch)):
        accumulator.add(trace, by_text[text])


def _run(model, texts: list[str]) -> list[AttentionTrace]:
    run_batch = getattr(model, "run_batch", None)
    if callable(run_batch):
        traces = list(run_batch(texts))
        if len(traces) != len(texts):
            raise ValueError(f"run_batch returned {len(traces)} traces for {len(texts)} texts")
        return traces
    return [model.run(text) for text in texts]


def score_model(
    model,
    items: Sequence[ProbeItem],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    sink_aware: bool = False,
) -> dict[str, RelationScore]:
    """Scores of every relation in `items` (order of first appearance) for `model`.

    `progress(done, total)` is called with counts of distinct texts, once before the first batch and
    after every batch. `sink_aware`: word 0 is no candidate of a head's argmax (see `scoring`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    by_text: dict[str, list[ProbeItem]] = {}
    for item in items:
        by_text.setdefault(item.text, []).append(item)
    texts = sorted(by_text, key=len)  # similar lengths share a batch: less padding
    accumulator = ScoreAccumulator((item.relation for item in items), sink_aware=sink_aware)
    if progress is not None:
        progress(0, len(texts))
    fits = getattr(model, "texts_that_fit", None)  # a model under a memory ceiling sizes its batches itself
    start = 0
    while start < len(texts):
        batch = texts[start : start + batch_size]
        batch = batch[: fits(batch)] if callable(fits) else batch
        _score_batch(model, batch, by_text, accumulator)
        start += len(batch)
        if progress is not None:
            progress(start, len(texts))
    return accumulator.result()
