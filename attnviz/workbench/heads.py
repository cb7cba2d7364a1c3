"""What heads do: the effect of switching them off, the importance scan, and which heads the detectors find;
computed once per model and input, shared by every visitor, under the memory budget."""

from __future__ import annotations

from attnviz.analysis.detectors import detect_heads
from attnviz.interventions import ablation
from attnviz.interventions.ablation import Effect, default_quantity  # noqa: F401  (the page reads them here)
from attnviz.models import batch_bytes
from attnviz.models.inputs import MASK_SPELLINGS  # noqa: F401  (the page reads it here)
from attnviz.readouts import predictions
from attnviz.workbench.shared import Workbench

DETECTOR_TOKENS, DETECTOR_SEQUENCES = 50, 4  # the defaults of `python -m attnviz heads`


def ablation_effect(bench: Workbench, model, name: str, text: str, off: tuple[tuple[int, int], ...],
                    continuation: str | None):
    """The prediction before and after switching the heads `off` ((layer, head) pairs) off, shared by
    every visitor (two forward passes of one text, within the budget)."""
    def compute():
        n_tokens = len(model.encode(text + (continuation or "")).ids)
        scored = n_tokens - len(model.encode(text).ids) + 1 if continuation else 1  # positions read out
        with bench.reserve(2 * batch_bytes.scan_bytes(model, n_tokens, 1, scored), keep_model=name):
            return ablation.ablation_effect(model, text, predictions.head_mask_of(model, off), continuation)

    return bench.shared_value(("ablation", name, text, off, continuation), compute, lambda effect: 1024)


def scan_scores(bench: Workbench, name: str, text: str, quantity: str, continuation: str | None):
    """An importance scan's [L, H] grid, if some visitor has computed it."""
    return bench.views.get(("scan", name, text, quantity, continuation))


def scan_heads(bench: Workbench, model, name: str, text: str, quantity: str, continuation: str | None,
               progress=None):
    """Every head switched off alone (ablation.importance_scan), batched within SCAN_BATCH_BYTES and the
    budget; computed once per (model, text, quantity, continuation) and shared."""
    done = scan_scores(bench, name, text, quantity, continuation)
    if done is not None:  # another visitor's identical scan finished while this one waited for the slot
        return done
    n_tokens = len(model.encode(text + (continuation or "")).ids)
    batch = batch_bytes.scan_batch_size(model, n_tokens)
    with bench.reserve(batch_bytes.scan_bytes(model, n_tokens, batch), keep_model=name):
        scores = ablation.importance_scan(model, text, quantity, continuation, progress=progress, batch_size=batch)
    scores.setflags(write=False)
    bench.views.put(("scan", name, text, quantity, continuation), scores, scores.nbytes)
    return scores


def detector_scores(bench: Workbench, name: str):
    """The head detectors' [L, H] grids of a model, if some visitor has computed them."""
    return bench.views.get(("detectors", name))


def detect(bench: Workbench, model, name: str, progress=None):
    """Previous-token, duplicate-token and induction scores of every head (analysis.detectors), computed
    once per model and shared."""
    done = detector_scores(bench, name)
    if done is not None:
        return done
    n, info = DETECTOR_TOKENS, model.info
    with bench.reserve(info.n_layers * info.n_heads * (2 * n) ** 2 * 4 * 2, keep_model=name):
        scores = detect_heads(model, n=n, sequences=DETECTOR_SEQUENCES, progress=progress)
    bench.views.put(("detectors", name), scores, sum(grid.nbytes for grid in scores.values()))
    return scores
