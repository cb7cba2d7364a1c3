"""What a predicted piece of a character completes to: a decoder's next-token row that is only part of a UTF-8
character ("⟨e4 bb⟩") is extended with the model's own greedy next tokens until its bytes make whole
characters ("他"), at most COMPLETION_STEPS more, shared like the other results and under the memory budget.

The prefix (the input up to the predicted position) is run once into a KV cache, which the rows then share,
each row one sequence of a batch: one token a step after that."""

from __future__ import annotations

import codecs

import torch

from attnviz.analysis.views import completed_text
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.record import Recorder
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for
from attnviz.workbench.traces import TRACE_OVERHEAD

COMPLETION_STEPS = 3
# Bytes per cell of one layer's [H, T, T] scores in the prefix pass (the scores, their softmax, the mask and
# the allocator's slack; nothing is recorded), as TRACE_BYTES_PER_CELL counts them for a whole trace.
PREFIX_BYTES_PER_CELL = 16


def completion_bytes(model, n_tokens: int, n_rows: int) -> int:
    """Peak bytes of completing `n_rows` rows after `n_tokens` tokens: one layer's scores of the prefix pass,
    the KV cache once and once a row (float32), the activations, and TRACE_OVERHEAD once."""
    c = model.config
    cache = 2 * 4 * c.n_layers * c.kv_heads * c.dim_per_head * (n_tokens + COMPLETION_STEPS + 1)
    return (PREFIX_BYTES_PER_CELL * c.n_heads * n_tokens * n_tokens + (n_rows + 1) * cache
            + 16 * n_tokens * c.d_model + TRACE_OVERHEAD)


def completions(bench: Workbench, name: str, input_ids: list[int], position: int,
                pieces: list[int]) -> tuple[bytes, dict[int, tuple[str, list[int]] | None]]:
    """(lead, completed) for the predicted token ids in `pieces` (each a piece of a character) after `position`
    of `input_ids`. `lead`: the bytes of a character the input itself leaves unfinished at `position` (its
    first pieces), which a predicted continuation byte completes. `completed[id]`: (the characters lead + the
    piece complete to, the ids the model predicts after it to get there, none when the piece itself finishes
    the character), or None when COMPLETION_STEPS tokens did not complete it. Shared under (model, the
    prefix, the ids)."""
    prefix = tuple(input_ids[: position + 1])

    def make():
        model = model_for(bench, name)
        lead = unfinished(model, prefix)
        need = completion_bytes(model, len(prefix), len(pieces))
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            return lead, complete(model, list(prefix), list(pieces), lead)

    return bench.shared_value(("completions", name, prefix, tuple(pieces)), make,
                              lambda made: 200 * len(made[1]) + 1000)


def unfinished(model, prefix: tuple[int, ...]) -> bytes:
    """The bytes at the end of `prefix` that do not yet make a whole character (a UTF-8 character is at most 4
    bytes, so the last 4 tokens hold them)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    decoder.decode(b"".join(model.token_bytes(i) or b"" for i in prefix[-4:]))
    return decoder.getstate()[0]


@torch.inference_mode()
def complete(model, prefix: list[int], pieces: list[int], lead: bytes = b"") -> dict[int, tuple[str, list[int]] | None]:
    """`completions`' work: greedy steps from a shared KV cache of `prefix`, one batch row per piece, stopping
    when every row's bytes (`lead`, then LoadedModel.token_bytes) make whole characters
    (analysis.views.completed_text)."""
    after: list[list[int]] = [[] for _ in pieces]
    done: dict[int, tuple[str, list[int]] | None] = {}

    def check(row: int, piece: int) -> None:
        text = completed_text([lead + (model.token_bytes(piece) or b"")]
                              + [model.token_bytes(i) or b"" for i in after[row]])
        if text is not None:
            done[piece] = (text, after[row])

    for row, piece in enumerate(pieces):  # a continuation byte may finish the input's own character
        check(row, piece)
    todo = [row for row, piece in enumerate(pieces) if piece not in done]
    if todo:
        module, device = model.module, model.info.device
        cache = KVCache(len(module.blocks))
        module(torch.tensor([prefix], device=device), record=Recorder(), cache=cache, with_logits=False)
        for layer in cache.layers:  # the prefix's keys and values, one view a row (the first step's cat copies)
            layer.keys = layer.keys.expand(len(todo), -1, -1, -1)
            layer.values = layer.values.expand(len(todo), -1, -1, -1)
        steps = torch.tensor([pieces[row] for row in todo], device=device)[:, None]
        for _ in range(COMPLETION_STEPS):
            steps = module(steps, record=Recorder(), cache=cache).logits[:, -1].argmax(dim=-1, keepdim=True)
            for row, next_id in zip(todo, steps[:, 0].tolist()):
                if pieces[row] not in done:
                    after[row].append(next_id)
                    check(row, pieces[row])
            if all(pieces[row] in done for row in todo):
                break
    return {piece: done.get(piece) for piece in pieces}
