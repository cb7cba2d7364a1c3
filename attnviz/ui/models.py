"""Cached model and trace access for the pages: models in st.cache_resource, traces in st.cache_data."""

from __future__ import annotations

import os
import threading

import streamlit as st
import torch

import attnviz
from attnviz.loading import estimate_bytes, is_local_path, resolve_source
from attnviz.loading.offline import OFFLINE_MODELS, offline_path
from attnviz.loading.random_model import RANDOM_MODEL_NAME, random_model

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


def default_model() -> str:
    """The first preset that works without network (the offline packages), else the first preset."""
    for model_id in OFFLINE_MODELS:
        if offline_path(model_id) is not None:
            return model_id
    return PRESETS[0]


def available_memory() -> int:
    import psutil

    return psutil.virtual_memory().available


@st.cache_data(max_entries=32, show_spinner=False)
def memory_problem(source: str) -> tuple[float, float] | None:
    """(needed GB, free GB) when a hub model is estimated not to fit, from its config.json alone, before
    downloading any weights. Raises OSError when the hub cannot be reached (reported by the caller)."""
    from attnviz.loading import hf

    if is_local_path(resolve_source(source)):
        return None  # already on disk: its size is the user's choice
    need = estimate_bytes(hf.read_config(source))
    free = available_memory()
    return (need / 1e9, free / 1e9) if need > free else None


MAX_MODELS = 2  # models kept in memory at once, across sessions


@st.cache_resource(show_spinner=False)
def _model_store() -> dict:
    """Loaded models shared by every session. A plain dict in st.cache_resource (rather than caching
    `load` itself) lets the page show loading stages only when a load really happens. One lock per
    source: a long download of one model never blocks sessions using another."""
    return {"models": {}, "locks": {}, "guard": threading.Lock()}


def cached_model(source: str):
    return _model_store()["models"].get(source)


def load_model(source: str, progress=None):
    """The model for `source`, loaded once; `progress(stage)` hears the stages of a real load."""
    store = _model_store()
    model = store["models"].get(source)
    if model is not None:
        return model
    with store["guard"]:
        lock = store["locks"].setdefault(source, threading.Lock())
    with lock:  # a second session asking for the same model waits for the first load
        model = store["models"].get(source)
        if model is None:
            model = attnviz.load(source, max_tokens=MAX_TOKENS, progress=progress)
            with store["guard"]:
                while len(store["models"]) >= MAX_MODELS:
                    store["models"].pop(next(iter(store["models"])))  # the oldest goes first
                store["models"][source] = model
        return model


@st.cache_resource(show_spinner=False)
def load_random_model():
    return random_model()


def allow_random_fallback() -> bool:
    """Never in CI: there a missing pretrained model must fail loudly, not turn into random weights."""
    return os.environ.get("CI", "").lower() not in ("1", "true")


@st.cache_data(max_entries=8, show_spinner=False)
def run_text(source: str, text: str, text_pair: str | None):
    """The trace of one text. Few entries: a 512-token trace of a 30-layer, 9-head model is ~280 MB."""
    model = load_random_model() if source == RANDOM_MODEL_NAME else load_model(source)
    return model.run(text, text_pair)
