"""Transient bytes of a batch of forward passes over one text, and the batch size that fits a byte budget:
what the importance scan, patching, sink anatomy and the cards size their batches and reservations by."""

from __future__ import annotations

from attnviz.memory import ceiling
from attnviz.models.inputs import has_mlm_head
from attnviz.models.loaded_model import LoadedModel

# What one batch of an importance scan may hold in transient activations (bytes); the app reserves this
# much before a scan (see `scan_bytes`).
SCAN_BATCH_BYTES = 256 * 2**20
MAX_SCAN_BATCH = 64  # rows: past this a CPU batch gains nothing


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
    """Rows per batch: what fits `budget` and what is free under the memory ceiling now (attnviz.memory.ceiling),
    at most MAX_SCAN_BATCH (`scored` as in `scan_bytes`). Large batches pay: on a CPU a short text's forward
    pass is bound by reading the weights, which a batch reads once for all its rows."""
    per_row = max(1, scan_bytes(model, n_tokens, 2, scored) - scan_bytes(model, n_tokens, 1, scored))
    most = int(max(1, min(MAX_SCAN_BATCH, budget // per_row)))
    return ceiling.fit(per_row, most, fixed=scan_bytes(model, n_tokens, 0, scored))
