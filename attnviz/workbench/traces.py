"""Traces and the views the Explore page draws from them, computed once per (model, texts, options) and
shared by every visitor, each under the memory budget."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from attnviz.analysis.sink import trace_first_aside
from attnviz.analysis.views import attention_view
from attnviz.trace import HAN_SEGMENTER_BYTES, han_segmenter_needed
from attnviz.workbench.memory import trim_heap
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for

# Peak bytes per attention cell of one run: the float32 probabilities (4), the float16 copy the store keeps
# (2), and the forward pass's per-layer scores and the allocator's slack; and a fixed allowance for the
# activations and, in a fresh process, torch's first-pass scratch. VmHWM measured on 300-token texts
# (tests/test_workbench.py): SmolLM2 191 MB for 24 M cells, MiniLM 87 MB for 6.6 M cells.
TRACE_BYTES_PER_CELL, TRACE_OVERHEAD = 9, 32_000_000


def trace_bytes(model, n_tokens: int, n_texts: int = 1) -> int:
    """Peak bytes of one run of `n_texts` texts of up to `n_tokens` tokens (TRACE_BYTES_PER_CELL a cell, the
    hidden states, and TRACE_OVERHEAD once)."""
    info = model.info
    cells = info.n_layers * info.n_heads * n_tokens * n_tokens
    return n_texts * (TRACE_BYTES_PER_CELL * cells + 4 * n_tokens * model.config.d_model) + TRACE_OVERHEAD


def compact(trace):
    """The app's copy of a trace: attentions in float16 (display needs no more: 3 significant digits;
    the NPZ export recomputes float32) and every array read-only, since sessions share it."""
    attentions = torch.from_numpy(trace.attentions).to(torch.float16).numpy()  # 3x faster than numpy's cast
    attentions.setflags(write=False)
    if trace.hidden is not None:
        trace.hidden.setflags(write=False)
    return dataclasses.replace(trace, attentions=attentions)


def nbytes(trace) -> int:
    return trace.attentions.nbytes + (trace.hidden.nbytes if trace.hidden is not None else 0)


def trace(bench: Workbench, name: str, text: str, text_pair: str | None):
    """The shared, compact trace of one text (computed once, while it fits the budget)."""
    key = (name, text, text_pair)
    held = bench.traces.get(key)
    if held is None:
        model = model_for(bench, name)
        need = trace_bytes(model, len(model.encode(text, text_pair).ids))
        if han_segmenter_needed(text + (text_pair or "")):  # the word rule's jieba, built once per process
            need += HAN_SEGMENTER_BYTES
        with bench.run_slot(need):
            held = bench.traces.get(key)  # another visitor may have run it meanwhile
            if held is None:
                with bench.reserve(need, keep_model=name):
                    held = compact(model.run(text, text_pair))
                    trim_heap()  # the float32 probabilities just freed
                bench.traces.put(key, held, nbytes(held))
    return held


def view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
         lens: str = "raw", normalise: bool = True, first_aside: bool = False):
    """The attention view the page draws (analysis.views.attention_view), shared like the trace; a `lens`
    other than "raw" is applied to the token-level weights first (workbench.lenses.lens_view). With
    `first_aside`, each row is renormalised without the first position (analysis.sink.trace_first_aside)."""
    if lens != "raw":
        from attnviz.workbench.lenses import lens_view

        return lens_view(bench, name, text, text_pair, level, hide_special, lens, normalise, first_aside)
    held = trace(bench, name, text, text_pair)
    if level == "token" and not hide_special and not first_aside:
        return attention_view(held, level, False)  # the trace's own array, no copy

    def make():
        # the set-aside copy (float16, as the trace) and the view's float32 layer
        with bench.run_slot(4 * held.attentions.nbytes), bench.reserve((2 if first_aside else 1)
                                                                         * held.attentions.nbytes):
            made = aside_view(held, level, hide_special, first_aside)
        made.attentions.setflags(write=False)
        return made

    key = (name, text, text_pair, level, hide_special) + (("first_aside",) if first_aside else ())
    return bench.shared_value(key, make, lambda v: v.attentions.nbytes)


def aside_view(held, level: str, hide_special: bool, first_aside: bool):
    """attention_view of `held`, with the first token set aside first when asked: its position is then
    marked special, so a token view hides it (and the real special tokens only when `hide_special`)."""
    if not first_aside:
        return attention_view(held, level, hide_special)
    return attention_view(trace_first_aside(held, hide_special), level, level == "token")


# Peak bytes per attention cell of building an export, beside the float32 trace (checked against VmHWM by
# tests/test_workbench.py): NPZ, the compressed buffer as it grows and its copy; JSON, the text pieces and
# the joined text (about 8 characters a cell each), and Streamlit's encoded copy of it.
EXPORT_BYTES_PER_CELL = {"npz": 16, "json": 24}


def export_bytes(model, n_tokens: int, kind: str) -> int:
    info = model.info
    cells = info.n_layers * info.n_heads * n_tokens * n_tokens
    return trace_bytes(model, n_tokens) + EXPORT_BYTES_PER_CELL[kind] * cells


def export_room(bench: Workbench) -> int:
    """The most an export could be given: what is not resident, and what evicting every trace and view frees
    (reservations of running work are not counted: the export's own reservation waits for them)."""
    return bench.budget - bench.rss() + bench.traces.total_bytes + bench.views.total_bytes


def export(bench: Workbench, model, text: str, text_pair: str | None, kind: str, write) -> bytes | str:
    """`write(trace)` (analysis.export's trace_npz or trace_json) of a float32 trace computed for it, with the
    export's whole peak reserved first; OverBudget when it does not fit."""
    need = export_bytes(model, len(model.encode(text, text_pair).ids), kind)
    with bench.run_slot(need), bench.reserve(need):
        return write(model.run(text, text_pair))


def figure(bench: Workbench, key: tuple, build, work_bytes: int = 0):
    """A figure built once per key (the mosaic: pooling 70 M weights of a 512-token SmolLM2 trace is
    the costly part of a rerun), shared read-only like the views; `work_bytes`, the size of the arrays it
    pools, puts a large one in the run slot."""
    def make():
        with bench.run_slot(work_bytes):
            return build()

    return bench.shared_value(("figure", *key), make, figure_bytes)


def figure_bytes(built) -> int:
    return sum(np.asarray(part.z).nbytes for part in built.data if getattr(part, "z", None) is not None)
