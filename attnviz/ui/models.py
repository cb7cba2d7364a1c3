"""Models, traces and the views drawn from them, shared by every session under one memory budget.

Everything here lives in one `st.cache_resource` object: shared, read-only, never pickled or copied per
read (st.cache_data would copy a 140 MB trace on every rerun). Models, traces and views are held in
stores bounded by bytes; before anything new is computed, `reserve` checks the process's resident
memory against the budget (attnviz.workbench.memory), evicting the oldest traces, views and unused models first,
and refuses what still does not fit.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import gc
import os
import threading
from pathlib import Path

import numpy as np
import streamlit as st
import torch

import attnviz
from attnviz.analysis import lenses
from attnviz.analysis.detectors import detect_heads
from attnviz.analysis.views import attention_view
from attnviz.interventions import effects
from attnviz.loading import ModelTooLarge, load_bytes
from attnviz.loading.offline import OFFLINE_MODELS, offline_path
from attnviz.loading.random_model import RANDOM_MODEL_NAME, random_model
from attnviz.loading.size import checkpoint_bytes
from attnviz.loading.sources import AppSource, allowed_model_dirs, app_source
from attnviz.ui.strings import translate
from attnviz.workbench.memory import ByteStore, memory_budget, process_rss

# Leave one core to the Streamlit server and the browser, which usually run on the same machine: with
# every core busy in torch's thread pool, a 2-core machine took 2-4x longer per forward pass while the
# page redrew (measured with benchmarks/bench_explore.py).
torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))

PRESETS = [
    "sentence-transformers/all-MiniLM-L6-v2",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
    "bert-base-uncased",
    "distilbert-base-uncased",
    "roberta-base",
    "gpt2",
    "HuggingFaceTB/SmolLM2-135M",
    "Qwen/Qwen2.5-0.5B",
    "bert-base-chinese",
    RANDOM_MODEL_NAME,  # untrained, for comparison: what attention looks like before learning
]
# Suggested when a text is mostly [UNK] for the current vocabulary.
WIDE_VOCABULARY_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
MAX_TOKENS = 512
# Shares of the budget the caches may fill at most; the rest is models, the runtime and per-session state.
TRACE_SHARE, VIEW_SHARE = 0.2, 0.1
# Heavy actions (model loads, parity, scoring a probe set) at once in the whole process: on a shared CPU,
# one at a time keeps every light visitor's rerun fast.
HEAVY_SLOTS = 1


class OverBudget(Exception):
    """What was asked for does not fit the memory budget, even with every cache emptied."""

    def __init__(self, need: int, budget: int, used: int) -> None:
        self.need, self.budget, self.used = need, budget, used
        super().__init__(f"needs {need / 1e9:.2f} GB; budget {budget / 1e9:.1f} GB, {used / 1e9:.2f} GB in use")


class Busy(Exception):
    """This session already runs a heavy action."""


def default_model() -> str:
    """The first preset that works without network (the offline packages), else the first preset."""
    for model_id in OFFLINE_MODELS:
        if offline_path(model_id) is not None:
            return model_id
    return PRESETS[0]


@st.cache_resource(show_spinner=False)
def shared() -> dict:
    """The process-wide stores and locks. One lock per model source: a long download of one model never
    blocks sessions using another."""
    budget = memory_budget()
    return {
        "models": ByteStore(budget), "traces": ByteStore(int(TRACE_SHARE * budget)),
        "views": ByteStore(int(VIEW_SHARE * budget)), "locks": {}, "guard": threading.Lock(),
        "reserved": 0, "heavy": threading.BoundedSemaphore(HEAVY_SLOTS), "heavy_sessions": set(),
    }


def _release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc keeps them otherwise), so that
    resident memory, which the budget is checked against, follows what is really held."""
    gc.collect()
    _trim_heap()


def _trim_heap() -> None:
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc():
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc_trim  # glibc only  # noqa: B018
        return libc
    return None


_LIBC = _libc()


@contextlib.contextmanager
def reserve(need: int, keep_model: str | None = None):
    """Hold `need` bytes of the budget while the block computes; evict the oldest views, traces and
    models (never `keep_model`) until they fit; OverBudget when even that is not enough."""
    store = shared()
    budget = memory_budget()
    with store["guard"]:
        evictable = [store["views"], store["traces"]]
        while process_rss() + store["reserved"] + need > budget:
            if not (any(s.evict_oldest() for s in evictable) or _evict_model(store["models"], keep_model)):
                raise OverBudget(need, budget, process_rss() + store["reserved"])
            _release_memory()
        store["reserved"] += need
    try:
        yield
    finally:
        with store["guard"]:
            store["reserved"] -= need


def _evict_model(models: ByteStore, keep: str | None) -> bool:
    """Drop the oldest model other than `keep` (sessions using it reload it on their next run)."""
    held = [key for key in models.keys() if key != keep]
    if not held:
        return False
    models.discard(held[0])
    return True


@contextlib.contextmanager
def heavy_slot(session_id: str):
    """One heavy action per session, HEAVY_SLOTS in the whole process; waits for a free slot (the page
    shows a status meanwhile, and a rerun by the visitor cancels the wait)."""
    store = shared()
    with store["guard"]:
        if session_id in store["heavy_sessions"]:
            raise Busy()
        store["heavy_sessions"].add(session_id)
    try:
        waiting = st.empty()
        while not store["heavy"].acquire(timeout=0.5):
            # Each Streamlit call is a point where a rerun by this visitor (Cancel) stops the wait.
            waiting.caption(translate(st.session_state.get("lang", "en"), "waiting_slot"))
        waiting.empty()
        try:
            yield
        finally:
            store["heavy"].release()
    finally:
        with store["guard"]:
            store["heavy_sessions"].discard(session_id)


# ---------------------------------------------------------------------------------------------------
# models


def check_source(text: str) -> AppSource:
    """The source a visitor may load (attnviz.loading.sources.app_source); SourceRefused otherwise."""
    return app_source(text, allowed_model_dirs())


@st.cache_data(max_entries=64, show_spinner=False, ttl=3600)
def hub_load_bytes(hub_id: str) -> int:
    """Bytes loading a hub model takes, from its config.json alone, before any weight is downloaded.
    Raises OSError when the hub cannot be reached (reported by the caller)."""
    from attnviz.loading import hf

    return load_bytes(hf.read_config(hub_id))


def cached_model(name: str):
    return shared()["models"].get(name)


def load_model(source: AppSource, progress=None):
    """The model for `source`, loaded once for every session; `progress(stage)` hears a real load."""
    store = shared()
    model = store["models"].get(source.name)
    if model is not None:
        return model
    with store["guard"]:
        lock = store["locks"].setdefault(source.name, threading.Lock())
    with lock:  # a second session asking for the same model waits for the first load
        model = store["models"].get(source.name)
        if model is None:
            # A hub model's size is known from its config before the download; a local one's from its
            # config and weight headers inside `attnviz.load`, which refuses it if it does not fit what is
            # left: then make room for what it said it needs, and try once more.
            need = hub_load_bytes(source.location) if source.from_hub else 0
            try:
                model = _load_within(source, need, progress)
            except ModelTooLarge as error:
                model = _load_within(source, error.need, progress)
            # A GGUF load leaves ~450 MB of freed dequantisation buffers in glibc's heap (SmolLM2: RSS +952
            # MB for 538 MB of parameters, +498 MB once trimmed): hand them back.
            _release_memory()
            store["models"].put(source.name, model, _parameter_bytes(model.module))
        return model


def _parameter_bytes(module) -> int:
    """What a loaded model holds, as the model store counts it."""
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _load_within(source: AppSource, need: int, progress):
    with reserve(need):
        limit = memory_budget() - process_rss() - shared()["reserved"] + need
        model = attnviz.load(source.location, max_tokens=MAX_TOKENS, progress=progress, from_hub=source.from_hub,
                             memory_limit=limit)
    # Pages show the model by what the visitor typed, never by the server path it resolved to.
    model.info = dataclasses.replace(model.info, name=source.name)
    return model


@st.cache_resource(show_spinner=False)
def load_random_model():
    return random_model()


def model_for(name: str):
    return load_random_model() if name == RANDOM_MODEL_NAME else load_model(check_source(name))


def allow_random_fallback() -> bool:
    """Never in CI: there a missing pretrained model must fail loudly, not turn into random weights."""
    return os.environ.get("CI", "").lower() not in ("1", "true")


# ---------------------------------------------------------------------------------------------------
# traces and views


def trace_bytes(model, n_tokens: int) -> int:
    """Peak bytes of one run: the float32 probabilities, and the float16 copy the store keeps."""
    info = model.info
    return info.n_layers * info.n_heads * n_tokens * n_tokens * (4 + 2) + 4 * n_tokens * model.config.d_model


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


def run_text(name: str, text: str, text_pair: str | None):
    """The shared, compact trace of one text (computed once, while it fits the budget)."""
    key = (name, text, text_pair)
    traces = shared()["traces"]
    trace = traces.get(key)
    if trace is None:
        model = model_for(name)
        n_tokens = len(model.encode(text, text_pair).ids)
        with reserve(trace_bytes(model, n_tokens), keep_model=name):
            trace = compact(model.run(text, text_pair))
            _trim_heap()  # the float32 probabilities just freed
        traces.put(key, trace, nbytes(trace))
    return trace


def view_of(name: str, text: str, text_pair: str | None, level: str, hide_special: bool, lens: str = "raw",
            normalise: bool = True):
    """The attention view the page draws (analysis.views.attention_view), shared like the trace; a `lens`
    other than "raw" is applied to the token-level weights first (`lens_view`)."""
    if lens != "raw":
        return lens_view(name, text, text_pair, level, hide_special, lens, normalise)
    trace = run_text(name, text, text_pair)
    if level == "token" and not hide_special:
        return attention_view(trace, level, False)  # the trace's own array, no copy

    def make():
        with reserve(trace.attentions.nbytes):
            view = attention_view(trace, level, hide_special)
        view.attentions.setflags(write=False)
        return view

    return shared_value((name, text, text_pair, level, hide_special), make, lambda view: view.attentions.nbytes)


def full_trace(model, text: str, text_pair: str | None):
    """A float32 trace for the full-precision exports, computed on demand within the budget."""
    with reserve(trace_bytes(model, len(model.encode(text, text_pair).ids))):
        return model.run(text, text_pair)


def reference_for(model, progress=None):
    """Hugging Face's eager model on the same weights (the parity reference), held in the model store
    so that it counts against the budget and is the first to go when memory is short."""
    from attnviz.loading import hf

    key = ("reference", model.info.path)
    store = shared()["models"]
    reference = store.get(key)
    if reference is None:
        # HF holds its dequantized checkpoint beside the model while it loads.
        need = 2 * (checkpoint_bytes(Path(model.info.path)) or 0)
        with reserve(need, keep_model=model.info.name):
            if progress is not None:
                progress(f"loading the Hugging Face reference of {model.info.name}")
            reference = hf.reference_model(model.info.path)
            _release_memory()
        store.put(key, reference, _parameter_bytes(reference))
    return reference


def detector_scores(name: str):
    """The head detectors' [L, H] grids of a model, if some session has computed them."""
    return shared()["views"].get(("detectors", name))


def detect(model, name: str, progress=None):
    """Previous-token, duplicate-token and induction scores of every head (analysis.detectors, the
    defaults of `python -m attnviz heads`), computed once per model and shared."""
    n, sequences = 50, 4
    info = model.info
    with reserve(info.n_layers * info.n_heads * (2 * n) ** 2 * 4 * 2, keep_model=name):
        scores = detect_heads(model, n=n, sequences=sequences, progress=progress)
    shared()["views"].put(("detectors", name), scores, sum(grid.nbytes for grid in scores.values()))
    return scores


def shared_value(key: tuple, compute, nbytes):
    """The value the views store holds under `key`: computed by `compute()` the first time, then shared by
    every session as it is (arrays read-only), with `nbytes(value)` counted against the store."""
    views = shared()["views"]
    value = views.get(key)
    if value is None:
        value = compute()
        views.put(key, value, nbytes(value))
    return value


def cached_figure(key: tuple, build):
    """A figure built once per key (the mosaic: pooling 70 M weights of a 512-token SmolLM2 trace is
    the costly part of a rerun), shared read-only like the views."""
    return shared_value(("figure", *key), build, _figure_bytes)


def _figure_bytes(figure) -> int:
    return sum(np.asarray(trace.z).nbytes for trace in figure.data if getattr(trace, "z", None) is not None)


# ---------------------------------------------------------------------------------------------------
# head ablation (attnviz.interventions.effects; the Explore page's "Switch heads off", attnviz/ui/ablation.py)


def ablation_effect(model, name: str, text: str, off: tuple[tuple[int, int], ...], continuation: str | None):
    """The prediction before and after switching the heads `off` ((layer, head) pairs) off, shared by
    every session (two forward passes of one text, within the budget)."""
    def compute():
        n_tokens = len(model.encode(text + (continuation or "")).ids)
        scored = n_tokens - len(model.encode(text).ids) + 1 if continuation else 1  # positions read out
        with reserve(2 * effects.scan_bytes(model, n_tokens, 1, scored), keep_model=name):
            return effects.ablation_effect(model, text, effects.head_mask_of(model, off), continuation)

    return shared_value(("ablation", name, text, off, continuation), compute, lambda effect: 1024)


def scan_scores(name: str, text: str, quantity: str, continuation: str | None):
    """An importance scan's [L, H] grid, if some session has computed it."""
    return shared()["views"].get(("scan", name, text, quantity, continuation))


def scan_heads(model, name: str, text: str, quantity: str, continuation: str | None, progress=None):
    """Every head switched off alone (effects.importance_scan), batched within SCAN_BATCH_BYTES and the
    budget; computed once per (model, text, quantity, continuation) and shared."""
    n_tokens = len(model.encode(text + (continuation or "")).ids)
    batch = effects.scan_batch_size(model, n_tokens)
    with reserve(effects.scan_bytes(model, n_tokens, batch), keep_model=name):
        scores = effects.importance_scan(model, text, quantity, continuation, progress=progress, batch_size=batch)
    scores.setflags(write=False)
    shared()["views"].put(("scan", name, text, quantity, continuation), scores, scores.nbytes)
    return scores


# ---------------------------------------------------------------------------------------------------
# lenses (analysis.lenses) and the query-key view, from one more recorded forward pass; shared like views


def value_norms(name: str, text: str, text_pair: str | None) -> np.ndarray:
    """||f_h(x_j)|| [L, H, S] float32 of a text (Recorder "value_norms"; model.run records none of it)."""
    def compute():
        model = model_for(name)
        with reserve(trace_bytes(model, len(model.encode(text, text_pair).ids)), keep_model=name):
            norms = model.record(text, text_pair, names=("value_norms",))["value_norms"]
            _trim_heap()
        norms.setflags(write=False)
        return norms

    return shared_value(("value_norms", name, text, text_pair), compute, lambda norms: norms.nbytes)


def lens_attentions(name: str, text: str, text_pair: str | None, lens: str, normalise: bool = True):
    """Token-level lens weights, float16 read-only: [L, H, T, S] for "value", [L, 1, T, T] (one map per
    layer, shaped as one head) for "rollout" and "flow". Flow is a heavy action (`compute_flow`): None
    until some session has computed it."""
    if lens not in lenses.LENSES or lens == "raw":
        raise ValueError(f"lens must be one of {lenses.LENSES[1:]}, got {lens!r}")
    key = ("lens", name, text, text_pair, lens, bool(normalise) if lens == "value" else None)
    views = shared()["views"]
    weights = views.get(key)
    if weights is None and lens != "flow":
        trace = run_text(name, text, text_pair)
        with reserve(3 * trace.attentions.nbytes, keep_model=name):  # float32 result + its float16 copy
            if lens == "value":
                norms = value_norms(name, text, text_pair)
                weights = lenses.value_weighted(trace.attentions, norms, normalise)
            else:
                weights = lenses.rollout(trace.attentions)[:, None]
            weights = weights.astype(np.float16)
        weights.setflags(write=False)
        views.put(key, weights, weights.nbytes)
    return weights


def compute_flow(name: str, text: str, text_pair: str | None, progress=None) -> np.ndarray:
    """Attention flow (analysis.lenses.flow, at most FLOW_MAX_TOKENS tokens), computed once and shared."""
    trace = run_text(name, text, text_pair)
    # The deepest layer's graph has (L + 1) T nodes, held as Python lists of floats (~32 bytes a cell: a
    # pointer and a float object), plus one residual copy per max-flow.
    nodes = (trace.n_layers + 1) * len(trace.tokens)
    with reserve(2 * 32 * nodes * nodes, keep_model=name):
        weights = lenses.flow(trace.attentions, progress=progress)[:, None].astype(np.float16)
    weights.setflags(write=False)
    shared()["views"].put(("lens", name, text, text_pair, "flow", None), weights, weights.nbytes)
    return weights


def lens_view(name: str, text: str, text_pair: str | None, level: str, hide_special: bool, lens: str,
              normalise: bool = True):
    """The view of lens weights, made as for raw weights (token or word level, special tokens hidden).
    Value weights that are not row-normalised are norms, not shares: the view is divided by its
    largest value (`lens_peak`) so colours keep the [0, 1] scale."""
    key = ("lens_view", name, text, text_pair, level, hide_special, lens, bool(normalise))
    views = shared()["views"]
    held = views.get(key)
    if held is None:
        weights = lens_attentions(name, text, text_pair, lens, normalise)
        if weights is None:
            raise ValueError(f"the {lens} lens has not been computed for this text")
        trace = dataclasses.replace(run_text(name, text, text_pair), attentions=weights)
        with reserve(2 * weights.nbytes, keep_model=name):
            view = attention_view(trace, level, hide_special)
            peak = None
            if lens == "value" and not normalise and not hide_special:
                peak = float(np.max(view.attentions, initial=0.0))
                if peak > 0:
                    view = dataclasses.replace(view, attentions=(view.attentions / np.float32(peak)).astype(
                        view.attentions.dtype))
        view.attentions.setflags(write=False)
        held = (view, peak)
        views.put(key, held, view.attentions.nbytes)
    return held[0]


def lens_peak(name: str, text: str, text_pair: str | None, level: str, hide_special: bool, lens: str,
              normalise: bool = True) -> float | None:
    """The value an unnormalised value-weighted view was divided by (None when it was not)."""
    held = shared()["views"].get(("lens_view", name, text, text_pair, level, hide_special, lens, bool(normalise)))
    return None if held is None else held[1]


def query_keys(name: str, text: str, text_pair: str | None, layer: int) -> dict:
    """One layer's queries [H, T, D] and keys [K, S, D] (after rotary), recorded for that layer only."""
    def compute():
        model = model_for(name)
        with reserve(trace_bytes(model, len(model.encode(text, text_pair).ids)), keep_model=name):
            held = model.record(text, text_pair, names=("queries", "keys"), layer=layer)
        for array in held.values():
            array.setflags(write=False)
        return held

    return shared_value(("query_keys", name, text, text_pair, layer), compute,
                        lambda held: sum(array.nbytes for array in held.values()))
