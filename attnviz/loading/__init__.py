"""attnviz.load: read a pretrained checkpoint and copy its numbers into our own transformer."""

from __future__ import annotations

import dataclasses
import logging

import torch

from attnviz.loading import cache
from attnviz.loading.registry import CONVERTERS, converter_for
from attnviz.loading.size import (
    ModelTooLarge,
    ParametersUninitialised,
    check_split,
    checkpoint_bytes,
    load_bytes,
    parameter_count,
)
from attnviz.loading.sources import is_local_path, resolve_source
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.transformer.model import Transformer
from attnviz.transformer.seq2seq import EncoderDecoder

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def pick_device(device: str | None = None) -> str:
    if device is not None:
        return device
    if torch.cuda.is_available():
        return "cuda"
    if _has_mps():
        return "mps"
    return "cpu"


def _has_mps() -> bool:
    """Whether this machine has an Apple GPU torch can use."""
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def load(source: str, device: str | None = None, dtype=None, max_tokens: int = 512, progress=None, *,
         from_hub: bool = False, memory_limit: int | None = None, device_map=None, max_memory: dict | None = None,
         offload_folder=None) -> LoadedModel:
    """Load `source` (hub id, local directory or .gguf file) into our from-scratch model.

    progress: optional callable(stage: str), told what is happening (download, conversion, ...).
    from_hub: `source` is a hub id even where a local folder of that name exists (the app's rule).
    memory_limit: host bytes the load may take (default: the machine's available memory); a model estimated
    to need more, from its config and weight-file headers, is refused with ModelTooLarge before any
    weight is read.
    device_map, max_memory, offload_folder: from_pretrained's, split by accelerate (attnviz.loading.split):
    device_map "auto", "balanced", "balanced_low_0", "sequential", a device, a GPU index or a dict
    {module name: device}; max_memory {0: "20GiB", "cpu": "8GB", "disk": "100GB"}; offload_folder, where
    weights the map sends to disk go. A model that fits nowhere is refused with ModelTooLarge first.
    """
    from attnviz.loading import hf  # transformers is imported only when a model is loaded

    progress = progress or (lambda stage: log.info(stage))
    _check_arguments(source, max_tokens, device, device_map, max_memory, offload_folder)
    torch_dtype = _dtype(dtype)
    location = hf.locate(source.strip() if from_hub else resolve_source(source.strip()), progress, from_hub)
    gate = _SizeGate(location, torch_dtype, memory_limit, device_map, max_memory, offload_folder)
    # A GGUF file converted before opens from the cache (attnviz.loading.cache): no transformers, no
    # dequantisation, no tokenizer conversion. (A device map splits the HF checkpoint itself: no cache.)
    entry = cache.open_entry(location, progress) if location.suffix == ".gguf" and device_map is None else None
    if entry is not None:
        module, checkpoint = _from_cache(entry, location, gate, progress)
    else:
        module, checkpoint = _converted(location, gate, progress)
    module, device = _placed(module, gate.plan, device, torch_dtype)
    split_device = device if gate.plan is not None else None
    return _traced(module, checkpoint, source, max_tokens, split_device, progress)


def _check_arguments(source, max_tokens: int, device, device_map, max_memory, offload_folder) -> None:
    """Refuse what cannot be loaded before anything is read."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("give a model: a hub id, a local directory or a .gguf file")
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be at least 2, got {max_tokens}")
    if device_map is None and (max_memory is not None or offload_folder is not None):
        raise ValueError("max_memory and offload_folder go with a device_map (e.g. device_map='auto')")
    if device_map is not None and device is not None:
        raise ValueError("give either device or device_map, not both")
    if device is not None:
        check_device(device)


def check_device(device) -> None:
    """Refuse, with a sentence, a device this machine does not have ("cuda:9" on one GPU, "cuda" on none) and
    the "meta" device, which holds shapes and no numbers: a model there loads but can compute nothing."""
    try:
        where = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{device!r} is not a device: give 'cpu', 'cuda', 'cuda:N' or 'mps'") from error
    if where.type == "meta":
        raise ValueError("'meta' holds tensors' shapes and no numbers: a model there cannot compute attention; "
                         "give 'cpu', 'cuda' or 'mps'")
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (where.index is not None and where.index >= count):
            have = f"{count} CUDA device(s): cuda:0..cuda:{count - 1}" if count else "no CUDA device"
            raise ValueError(f"no device {device!r}: this machine has {have}")
    if where.type == "mps" and not _has_mps():
        raise ValueError("no device 'mps': this machine has no Apple GPU")


class _SizeGate:
    """Called with the HF config before any weight is read: refuses an architecture we cannot convert and a
    model that does not fit (ModelTooLarge); with a device map, plans the split (`plan`) from the config."""

    def __init__(self, location, torch_dtype, memory_limit, device_map, max_memory, offload_folder) -> None:
        self.location, self.torch_dtype = location, torch_dtype
        self.device_map, self.max_memory, self.offload_folder = device_map, max_memory, offload_folder
        self.limit = available_memory() if memory_limit is None else memory_limit
        self.limit_what = "available memory" if memory_limit is None else "memory allowed"
        self.plan = None  # the split, planned from the config before the weights are read

    def __call__(self, hf_config: dict) -> None:
        converter_for(hf_config)  # an architecture we cannot convert is refused before any weight is read
        if self.device_map is None:
            need = load_bytes(hf_config, self.location, self.torch_dtype)
            if need > self.limit:
                raise ModelTooLarge(need, self.limit, self.limit_what)
            return
        from attnviz.loading import split

        held = checkpoint_bytes(self.location)
        held = parameter_count(hf_config) * 4 if held is None else held
        plan = split.plan(hf_config, self.device_map, self.max_memory, self.offload_folder, self.torch_dtype,
                          host_reserved=held)
        on_host = plan.bytes_by_device.get("cpu", 0)
        check_split(plan.bytes_by_device, plan.capacity, held + on_host, self.limit, self.limit_what)
        self.plan = plan


def _from_cache(entry, location, gate: _SizeGate, progress):
    """The module and checkpoint description of a cached conversion (its tensors are the module's)."""
    from attnviz.loading import hf

    gate(entry.config)
    progress("building the model")
    module = cached_module(entry.config, entry.state)
    checkpoint = hf.Checkpoint(entry.config, {}, entry.tokenizer, entry.max_length, entry.special_tokens,
                               str(location))
    return module, checkpoint


def _converted(location, gate: _SizeGate, progress):
    """The checkpoint read (through `gate` before its weights) and converted: split by the gate's plan, or whole
    (a GGUF conversion is then written to the cache)."""
    from attnviz.loading import hf

    hf.import_transformers()
    checkpoint = hf.read_checkpoint(location, progress, before_weights=gate)
    progress("converting weights")
    if gate.plan is not None:
        from attnviz.loading import split

        return split.materialize(gate.plan, checkpoint.config, checkpoint.tensors), checkpoint
    module = build_module(checkpoint.config, checkpoint.tensors, consume=True)
    checkpoint.tensors = {}
    if location.suffix == ".gguf" and cache.cache_dir() is not None:
        progress("writing cache")
        cache.store_entry(location, unique_state(module), checkpoint.config, checkpoint.tokenizer,
                          checkpoint.max_length, checkpoint.special_tokens)
    return module, checkpoint


def _placed(module, plan, device: str | None, torch_dtype):
    """(module, device): a split module stays where its plan put it; a whole one moves to `device`."""
    if plan is not None:
        return module, plan.device_type
    device = pick_device(device)
    return module.to(device=device, dtype=torch_dtype).eval(), device


def _traced(module, checkpoint, source: str, max_tokens: int, split_device, progress):
    """The facade that runs texts into traces: LoadedSeq2Seq for a translation model (Marian, T5, BART), else
    LoadedModel. split_device: a split module's main device, None for a whole one."""
    if isinstance(module, EncoderDecoder):  # a translation model: its own run() and trace
        from attnviz.models.loaded_seq2seq import LoadedSeq2Seq, seq2seq_info

        limit = min([max_tokens] + [checkpoint.max_length] * (checkpoint.max_length is not None))
        info = seq2seq_info(module, source, checkpoint.path, checkpoint.config["model_type"], limit)
        progress("ready")
        return LoadedSeq2Seq(module, checkpoint.tokenizer, info)
    config = module.config
    info = ModelInfo.describe(module, source, checkpoint.path, checkpoint.config["model_type"],
                              _token_limit(max_tokens, config, checkpoint))
    if split_device is not None:  # its first weight may sit on "meta" (offloaded): inputs go to the main device
        info = dataclasses.replace(info, device=split_device)
    progress("ready")
    return LoadedModel(module, checkpoint.tokenizer, info, checkpoint.special_tokens,
                       context_tokens=_token_limit(CONTEXT_UNBOUNDED, config, checkpoint))


def build_module(hf_config: dict, tensors: dict, consume: bool = False) -> Transformer | EncoderDecoder:
    """Our transformer holding the checkpoint's numbers (strict: every tensor accounted for).

    consume: the checkpoint's tensors become the module's parameters (no second copy: a load's peak is
    one model, not two); only for a checkpoint nobody else holds. Otherwise they are copied in."""
    converter = converter_for(hf_config)
    config = converter.config(hf_config)
    if not consume:
        module = converter.module(config)
        module.load_state_dict(converter.weights(hf_config, tensors, module), strict=True)
        return module
    with torch.device("meta"), ParametersUninitialised():  # allocates nothing: the checkpoint's tensors will do
        module = converter.module(config)
    return _assigned(module, converter.weights(hf_config, tensors, module),
                     lambda: converter.module(config))


def cached_module(hf_config: dict, state: dict[str, torch.Tensor]) -> Transformer | EncoderDecoder:
    """Our transformer from a converted state dict (the model cache's: each tied tensor stored once)."""
    converter = converter_for(hf_config)
    config = converter.config(hf_config)
    with torch.device("meta"), ParametersUninitialised():
        module = converter.module(config)
    for aliases in _tied(module):
        for alias in aliases[1:]:
            state.setdefault(alias, state[aliases[0]])
    return _assigned(module, state, lambda: converter.module(config))


def unique_state(module) -> dict[str, torch.Tensor]:
    """The module's state dict with each tied tensor once (safetensors refuses shared tensors)."""
    aliases = {alias for group in _tied(module) for alias in group[1:]}
    return {name: tensor for name, tensor in module.state_dict().items() if name not in aliases}


def _tied(module) -> list[list[str]]:
    """Names of parameters that are one tensor (lm_head.weight and token_embedding.weight when tied)."""
    groups: dict[int, list[str]] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        groups.setdefault(id(parameter), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _assigned(module, state: dict, build_real):
    """`module` (built on the meta device) with `state`'s tensors as its parameters, ties restored.

    What the module computes at construction outside its state dict (the rotary `inv_freq`, a
    non-persistent buffer) is still on the meta device then: it is taken from a real build whose
    parameters are allocated but never written (`size.ParametersUninitialised`), so their pages never
    become resident, and which is dropped at once."""
    ties = _tied(module)
    module.load_state_dict(state, strict=True, assign=True)
    for aliases in ties:
        first = module.get_parameter(aliases[0])
        for alias in aliases[1:]:
            owner, _, leaf = alias.rpartition(".")
            setattr(module.get_submodule(owner), leaf, first)
    for name, parameter in list(module.named_parameters()):
        if not parameter.is_contiguous():  # a converter's transpose: lay it out once, as a copy would
            owner, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(owner), leaf,
                    torch.nn.Parameter(parameter.detach().contiguous(), requires_grad=parameter.requires_grad))
    left = [(path, name) for path, sub in module.named_modules() for name, value in vars(sub).items()
            if isinstance(value, torch.Tensor) and value.is_meta]
    left += [(path, name) for path, sub in module.named_modules() for name, value in sub._buffers.items()
             if value is not None and value.is_meta]
    if any(p.is_meta for p in module.parameters()):
        raise ValueError("the converted state dict left a parameter unfilled")
    if left:
        with ParametersUninitialised():
            real = build_real()
        for path, name in left:
            sub, value = module.get_submodule(path), getattr(real.get_submodule(path), name)
            if name in sub._buffers:
                sub._buffers[name] = value
            else:
                setattr(sub, name, value)
        del real
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


CONTEXT_UNBOUNDED = 1 << 20  # a model that names no limit of its own (ALiBi, relative buckets): a million tokens


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
           "cached_module", "unique_state",
           "CONVERTERS", "ModelTooLarge"]
