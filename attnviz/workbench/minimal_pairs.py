"""A minimal pair's per-head attention difference and the model's preference, shared like the views."""

from __future__ import annotations

from attnviz.analysis.minimal_pairs import trace_difference
from attnviz.models import batch_bytes

# The page reads these here (it imports no model code): the built-in pairs, a typed pair, and the message
# for an encoder with no masked-LM head.
from attnviz.readouts.preference import NOT_AVAILABLE, builtin_pairs, pair_from_texts, pair_preference  # noqa: F401
from attnviz.workbench.shared import Workbench
from attnviz.workbench.traces import trace


def difference(bench: Workbench, name: str, text: str, second: str):
    """The pair's PairDifference, computed once (both traces are the shared, budgeted traces)."""
    def compute():
        trace_a, trace_b = trace(bench, name, text, None), trace(bench, name, second, None)
        need = 3 * 8 * trace_a.n_layers * trace_a.n_heads * (len(trace_a.words) + len(trace_b.words)) ** 2
        with bench.reserve(need):
            return trace_difference(trace_a, trace_b)

    return bench.shared_value(("minimal_pair", name, text, second), compute,
                              lambda diff: diff.a.nbytes + diff.b.nbytes + diff.difference.nbytes)


def preference(bench: Workbench, model, name: str, pair, text: str, second: str):
    """Which sentence of `pair` the model prefers (readouts.preference), computed once."""
    def compute():
        n_tokens = max(len(model.encode(s).ids) for s in (text, second))
        with bench.reserve(batch_bytes.scan_bytes(model, n_tokens, 1)):
            return pair_preference(model, pair)

    return bench.shared_value(("minimal_pair_preference", name, text, second), compute, lambda r: 1024)
