"""attnviz.load: read a pretrained checkpoint and copy its numbers into our own transformer."""

from __future__ import annotations

import logging

import torch

from attnviz.loaded.model import LoadedModel, ModelInfo
from attnviz.loading.registry import CONVERTERS, converter_for
from attnviz.loading.size import ModelTooLarge, load_bytes
from attnviz.loading.sources import is_local_path, resolve_source
from attnviz.transformer.model import Transformer
from attnviz.transformer.seq2seq import EncoderDecoder

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def pick_device(device: str | None = None) -> str:
    if device is not None:
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def load(source: str, device: str | None = None, dtype=None, max_tokens: int = 512, progress=None, *,
         from_hub: bool = False, memory_limit: int | None = None) -> LoadedModel:
    """Load `source` (hub id, local directory or .gguf file) into our from-scratch model.

    progress: optional callable(stage: str), told what is happening (download, conversion, ...).
    from_hub: `source` is a hub id even where a local folder of that name exists (the app's rule).
    memory_limit: bytes the load may take (default: the machine's available memory); a model estimated
    to need more, from its config and weight-file headers, is refused with ModelTooLarge before any
    weight is read.
    """
    from attnviz.loading import hf  # transformers is imported only when a model is loaded

    hf.import_transformers()

    progress = progress or (lambda stage: log.info(stage))
    if not isinstance(source, str) or not source.strip():
        raise ValueError("give a model: a hub id, a local directory or a .gguf file")
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be at least 2, got {max_tokens}")
    torch_dtype = _dtype(dtype)
    location = hf.locate(source.strip() if from_hub else resolve_source(source.strip()), progress, from_hub)
    limit = available_memory() if memory_limit is None else memory_limit

    def check_size(hf_config: dict) -> None:
        converter_for(hf_config)  # an architecture we cannot convert is refused before any weight is read
        need = load_bytes(hf_config, location, torch_dtype)
        if need > limit:
            raise ModelTooLarge(need, limit, "available memory" if memory_limit is None else "memory allowed")

    checkpoint = hf.read_checkpoint(location, progress, before_weights=check_size)
    progress("converting weights")
    module = build_module(checkpoint.config, checkpoint.tensors)
    config = module.config
    device = pick_device(device)
    module = module.to(device=device, dtype=torch_dtype).eval()
    if isinstance(module, EncoderDecoder):  # a translation model (Marian): its own run() and trace
        from attnviz.loaded.seq2seq import LoadedSeq2Seq, seq2seq_info

        limit = min([max_tokens] + [checkpoint.max_length] * (checkpoint.max_length is not None))
        info = seq2seq_info(module, source, checkpoint.path, checkpoint.config["model_type"], limit)
        progress("ready")
        return LoadedSeq2Seq(module, checkpoint.tokenizer, info)
    info = ModelInfo.describe(module, source, checkpoint.path, checkpoint.config["model_type"],
                              _token_limit(max_tokens, config, checkpoint))
    progress("ready")
    return LoadedModel(module, checkpoint.tokenizer, info, checkpoint.special_tokens)


def build_module(hf_config: dict, tensors: dict) -> Transformer | EncoderDecoder:
    """Our transformer holding the checkpoint's numbers (strict: every tensor accounted for)."""
    converter = converter_for(hf_config)
    module = converter.module(converter.config(hf_config))
    module.load_state_dict(converter.weights(hf_config, tensors, module), strict=True)
    return module


def available_memory() -> int:
    import psutil

    return psutil.virtual_memory().available


def _dtype(dtype) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _token_limit(max_tokens: int, config, checkpoint) -> int:
    """The user's cap, never beyond what the model's positions or tokenizer allow."""
    limits = [max_tokens]
    if config.max_positions is not None:
        limits.append(config.max_positions - config.position_offset)
    if checkpoint.max_length is not None:
        limits.append(checkpoint.max_length)
    if config.rope_theta is not None and checkpoint.config.get("max_position_embeddings"):
        limits.append(checkpoint.config["max_position_embeddings"])
    return min(limits)


__all__ = ["load", "build_module", "available_memory", "is_local_path", "load_bytes", "pick_device", "resolve_source",
           "CONVERTERS", "ModelTooLarge"]
