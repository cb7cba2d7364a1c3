"""Cached model and trace access for the pages: models in st.cache_resource, traces in st.cache_data."""

from __future__ import annotations

import logging
import os
import threading

import streamlit as st

import attnviz
from attnviz.loading import estimate_bytes, resolve_source
from attnviz.loading.offline import OFFLINE_MODELS, offline_path
from attnviz.loading.random_model import RANDOM_MODEL_NAME, random_model

log = logging.getLogger(__name__)

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


def is_hub_id(source: str) -> bool:
    return resolve_source(source) == source and not os.path.exists(os.path.expanduser(source))


@st.cache_data(max_entries=32, show_spinner=False)
def memory_problem(source: str) -> tuple[float, float] | None:
    """(needed GB, free GB) when a hub model is estimated not to fit, from its config.json alone, before
    downloading any weights. Raises OSError when the hub cannot be reached (reported by the caller)."""
    from attnviz.loading import hf

    if not is_hub_id(source):
        return None  # already on disk: its size is the user's choice
    need = estimate_bytes(hf.read_config(source))
    free = available_memory()
    return (need / 1e9, free / 1e9) if need > free else None


MAX_MODELS = 2  # models kept in memory at once, across sessions


@st.cache_resource(show_spinner=False)
def _model_store() -> dict:
    """Loaded models shared by every session, with a lock so two sessions never load the same one twice.
    A plain dict in st.cache_resource (rather than caching `load` itself) lets the page show loading
    stages only when a load really happens."""
    return {"models": {}, "lock": threading.Lock()}


def cached_model(source: str):
    return _model_store()["models"].get(source)


def load_model(source: str, progress=None):
    """The model for `source`, loaded once; `progress(stage)` hears the stages of a real load."""
    store = _model_store()
    with store["lock"]:
        loaded = store["models"]
        if source not in loaded:
            while len(loaded) >= MAX_MODELS:
                loaded.pop(next(iter(loaded)))  # the oldest goes first
            loaded[source] = attnviz.load(source, max_tokens=MAX_TOKENS, progress=progress)
        return loaded[source]


@st.cache_resource(show_spinner=False)
def load_random_model():
    return random_model()


def allow_random_fallback() -> bool:
    """Never in CI: there a missing pretrained model must fail loudly, not turn into random weights."""
    return os.environ.get("CI", "").lower() not in ("1", "true")


@st.cache_data(max_entries=16, show_spinner=False)
def run_text(source: str, text: str, text_pair: str | None):
    """The trace of one text. Bounded: a 512-token trace of a 30-layer model is ~280 MB."""
    model = load_random_model() if source == RANDOM_MODEL_NAME else load_model(source)
    return model.run(text, text_pair)
