"""Traces (full, and reduced for long texts), their exports and the figures drawn from them, computed once per
(model, texts, options) and shared by every visitor, each under the memory budget. The views of a trace are
workbench.views'."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from attnviz.analysis.export import reduced_npz, reduced_npz_bytes
from attnviz.analysis.long_views import head_window_view, view_positions
from attnviz.analysis.profile import profile_reduced
from attnviz.plots.pooling import tile_cells
from attnviz.trace import HAN_SEGMENTER_BYTES, han_segmenter_needed
from attnviz.workbench import shelf
from attnviz.workbench.memory import trim_heap
from attnviz.workbench.shared import OverBudget, Workbench
from attnviz.workbench.shelf import model_for

# Peak bytes per attention cell of one run: the float32 probabilities (4), the float16 copy the store keeps
# (2), and the forward pass's per-layer scores and the allocator's slack; and a fixed allowance for the
# activations and, in a fresh process, torch's first-pass scratch. VmHWM measured on 300-token texts
# (tests/workbench/test_workbench.py): SmolLM2 191 MB for 24 M cells, MiniLM 87-92 MB for 6.6 M cells (91.8 MB in a CI
# run, 0.2 MB over the 32 MB allowance then; now 40 MB).
TRACE_BYTES_PER_CELL, TRACE_OVERHEAD = 9, 40_000_000


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


def n_tokens(model, text: str, text_pair: str | None = None) -> int:
    """Tokens of the text as the full-map pages cut it (the model's own limit, FULL_MAPS_TOKENS)."""
    return len(model.encode(text, text_pair).ids)


def long_tokens(model, text: str, text_pair: str | None = None) -> int:
    """Tokens of the text as the Explore page's long path cuts it (shelf.long_token_limit)."""
    return len(model.encode(text, text_pair, shelf.long_token_limit(model)).ids)


def is_long(model, text: str, text_pair: str | None = None) -> bool:
    """Whether the Explore page draws this text from a reduced trace (`reduced`): past FULL_MAPS_TOKENS, the
    full maps of SmolLM2 would be 1.1 GB in float32 at 1,024 tokens and 18 GB at 4,096."""
    return long_tokens(model, text, text_pair) > shelf.FULL_MAPS_TOKENS


# A reduced run's peak beyond what it keeps: each block of REDUCED_CHUNK_ROWS query rows [H, rows, T] in float32
# and the copies made while reducing it (scores, softmax, the products of the statistics and poolings), and a
# fixed allowance for the activations and the heap the allocator keeps. Blocks of 128 rows, not run_reduced's
# 256: the same CPU (28-35 s a pass either way) and about 100 MB less at 3,100 tokens. The blocks grow with
# their rows (the causal skip), so glibc's heap keeps freed ones it cannot reuse: in a warm process, each pass in
# a thread of its own with a full-map trace between (as in the app; SmolLM2, ~3,100 tokens, four passes,
# benchmarks/bench_reduced_peak.py), 380-623 MB over the RSS before a pass (held 161 MB included), and
# 560-676 MB before the kept queries and keys were filled in place; a 2.5 GB server reached 2.59 GB on three
# tabs with 20 blocks + 200 MB (655 MB at 3,100 tokens). What is not held grows little with T (~460 MB at
# 3,100 tokens, ~565 MB at 8,192 in a fresh server), so the allowance is mostly fixed: 782 MB at 3,100 tokens,
# 887 MB at 4,096, 1,316 MB at 8,192 (which then still fits a 2.5 GB budget beside SmolLM2's 0.98 GB).
# Checked against VmHWM by tests/ui/test_long_explore.py and, on one server, by tests/browser/test_hostile_memory.py.
REDUCED_CHUNK_ROWS, REDUCED_BLOCK_COPIES, REDUCED_OVERHEAD = 128, 12, 450_000_000


def reduced_held_bytes(model, n: int) -> int:
    """What a reduced trace of `n` tokens keeps (ReducedTrace.nbytes): queries and keys in float16, each row's
    argmax (int32), the hidden states (float32), and the tiles of at most six views (float32, fixed in size)."""
    c = model.config
    tiles = 6 * 4 * c.n_layers * c.n_heads * tile_cells(c.n_layers, c.n_heads) ** 2
    return c.n_layers * (c.n_heads + c.kv_heads) * n * c.dim_per_head * 2 + 4 * c.n_layers * c.n_heads * n \
        + 4 * n * c.d_model + tiles


def reduced_bytes(model, n: int) -> int:
    """Peak bytes of one reduced run of `n` tokens (LoadedModel.run_reduced)."""
    block = 4 * model.config.n_heads * min(REDUCED_CHUNK_ROWS, n) * n
    return reduced_held_bytes(model, n) + REDUCED_BLOCK_COPIES * block + REDUCED_OVERHEAD


def held_reduced(bench: Workbench, name: str, text: str, text_pair: str | None):
    """The reduced trace of this text if some visitor has computed it and it is still held, else None."""
    return bench.traces.get(("reduced", name, text, text_pair))


def reduced(bench: Workbench, name: str, text: str, text_pair: str | None, progress=None):
    """The shared reduced trace of one long text (docs/performance.md, "Long contexts"): its mosaic tiles for
    every view option, head profiles, first-token shares, and the queries and keys from which a head's window is
    recomputed; `progress(done, total)` after each layer (a heavy action's, which may cancel there). Computed
    once under the memory budget, its peak reserved first; OverBudget when even what it keeps would not fit
    the traces' share of the budget."""
    held = held_reduced(bench, name, text, text_pair)
    if held is not None:
        return held
    model = model_for(bench, name)
    n = long_tokens(model, text, text_pair)
    keeps = reduced_held_bytes(model, n)
    if keeps > bench.traces.capacity:  # it would be dropped as soon as it was made, and asked for again
        raise OverBudget(keeps, bench.traces.capacity, bench.traces.total_bytes)
    need = reduced_bytes(model, n)
    if han_segmenter_needed(text + (text_pair or "")):
        need += HAN_SEGMENTER_BYTES
    info = model.info
    with bench.run_slot(need):
        held = held_reduced(bench, name, text, text_pair)  # another visitor may have run it meanwhile
        if held is None:
            with bench.reserve(need, keep_model=name):
                held = model.run_reduced(text, text_pair, tile=tile_cells(info.n_layers, info.n_heads),
                                         max_tokens=shelf.long_token_limit(model), chunk_rows=REDUCED_CHUNK_ROWS,
                                         progress=None if progress is None else lambda layer, n_layers:
                                         progress(layer + 1, n_layers))
                trim_heap()  # the blocks just freed
            bench.traces.put(("reduced", name, text, text_pair), held, held.nbytes)
    return held


def reduced_positions(bench: Workbench, view_key: tuple):
    """The view positions (analysis.long_views.view_positions) of a held reduced trace under the page's view
    key (name, text, text_pair, level, hide_special, lens, normalise, first_aside), shared."""
    def make():
        held = held_reduced(bench, *view_key[:3])
        if held is None:
            raise ValueError("this long text's trace is no longer held: enter it again")
        return view_positions(held, view_key[3], view_key[4], view_key[7])

    return bench.shared_value(("reduced_positions", *view_key), make, lambda p: 200 * len(p.labels) + 100_000)


def reduced_window(bench: Workbench, view_key: tuple, layer: int, head: int, window: slice) -> np.ndarray:
    """One head's window of a long text's view (analysis.long_views.head_window_view), shared read-only."""
    def make():
        held = held_reduced(bench, *view_key[:3])
        if held is None:
            raise ValueError("this long text's trace is no longer held: enter it again")
        matrix = head_window_view(held, layer, head, reduced_positions(bench, view_key), window)
        matrix.setflags(write=False)
        return matrix

    key = ("reduced_window", *view_key, layer, head, window.start, window.stop)
    return bench.shared_value(key, make, lambda m: m.nbytes)


def reduced_profile(bench: Workbench, trace_key: tuple):
    """Every head's profile of a held reduced trace (analysis.profile_reduced), shared."""
    def make():
        held = held_reduced(bench, *trace_key)
        if held is None:
            raise ValueError("this long text's trace is no longer held: enter it again")
        return profile_reduced(held)

    return bench.shared_value(("reduced_profile", *trace_key), make,
                              lambda p: sum(np.asarray(getattr(p, f.name)).nbytes for f in dataclasses.fields(p)))


# Peak bytes per attention cell of building an export, beside the float32 trace (checked against VmHWM by
# tests/workbench/test_workbench.py): NPZ, the compressed buffer as it grows and its copy; JSON, the text pieces and
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


def reduced_export(bench: Workbench, held) -> bytes:
    """analysis.export.reduced_npz of a held reduced trace, its peak reserved first; OverBudget when it does not fit."""
    with bench.reserve(reduced_npz_bytes(held)):
        return reduced_npz(held)


def held_figure(bench: Workbench, key: tuple):
    """The figure kept under `key` (`keep_figure`), else None: the page builds it then (the mosaic: pooling
    70 M weights of a 512-token SmolLM2 trace is the costly part of a rerun)."""
    return bench.views.get(("figure", *key))


def keep_figure(bench: Workbench, key: tuple, built):
    """Keep a figure the page built, shared read-only like the views; returns it."""
    bench.views.put(("figure", *key), built, figure_bytes(built))
    return built


def figure_bytes(built) -> int:
    return sum(np.asarray(part.z).nbytes for part in built.data if getattr(part, "z", None) is not None)
