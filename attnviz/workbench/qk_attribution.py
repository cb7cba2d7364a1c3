"""Query-key attribution (attnviz.readouts.qk_attribution) for the query-key view: one score, or a row's
difference of two keys, split by the components that made its query and its key; one recorded forward pass,
computed once per (model, texts, layer, head, query, key, key2) and shared, under the memory budget."""

from __future__ import annotations

from attnviz.readouts.qk_attribution import layer_of, qk_attribution
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for
from attnviz.workbench.traces import trace_bytes

__all__ = ["attribution", "attribution_bytes", "layer_of"]  # layer_of: for the page (ui sits above interventions)


def attribution_bytes(model, n_tokens: int) -> int:
    """Peak bytes of one attribution: a forward pass (as a trace's, an upper bound: no map is kept) and what it
    records for every layer (each head's output, each MLP's, the queries and keys), float32."""
    c, info = model.config, model.info  # an encoder-decoder's info counts its encoder (the side split)
    dim = getattr(c, "dim_per_head", None) or c.head_dim
    recorded = 4 * info.n_layers * n_tokens * (2 * info.n_heads * dim + info.n_kv_heads * dim + c.d_model)
    return trace_bytes(model, n_tokens) + recorded


def attribution(bench: Workbench, name: str, text: str, text_pair: str | None, layer: int, head: int, query: int,
                key: int, key2: int | None = None):
    """The QKAttribution of these plain values (positions count the trace's tokens, special tokens included);
    ValueError for a key the query does not see."""
    def compute():
        model = model_for(bench, name)
        need = attribution_bytes(model, len(model.encode(text, text_pair).ids))
        with bench.reserve(need, keep_model=name):
            split = qk_attribution(model, text, layer, head, query, key, key2, text_pair)
        split.matrix.setflags(write=False)  # shared by every visitor who asks the same
        return split

    store_key = ("qk_attribution", name, text, text_pair, layer, head, query, key, key2)
    return bench.shared_value(store_key, compute, lambda split: split.matrix.nbytes + 64 * len(split.position_terms))
