"""How much memory loading a checkpoint takes, known before any weight is read.

Two sources, and the larger wins, so neither a config that understates its weights nor weights that
understate their config get past: the config (our module built on the meta device, which allocates
nothing) and the weight files' headers (safetensors and GGUF list every tensor's shape and dtype
before the data). The converted checkpoint becomes the module's parameters; only a cast to another
dtype holds a second copy.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import torch

from attnviz.loading.registry import converter_for

SAFETENSORS_HEADER_LIMIT = 100_000_000  # the safetensors format's own cap on its JSON header
FLOAT32_BYTES = 4


class ModelTooLarge(ValueError):
    def __init__(self, need: int, limit: int, what: str = "available memory", hint: str = "") -> None:
        self.need, self.limit = need, limit
        super().__init__(f"loading this model needs about {need / 1e9:.1f} GB, more than the {limit / 1e9:.1f} GB "
                         f"of {what}" + (f"; {hint}" if hint else ""))


def parameter_count(hf_config: dict) -> int:
    """Parameters of our module for this config, counted on the meta device."""
    config = converter_for(hf_config).config(hf_config)
    with torch.device("meta"), ParametersUninitialised():
        return sum(p.numel() for p in converter_for(hf_config).module(config).parameters())


class ParametersUninitialised(torch.overrides.TorchFunctionMode):
    """While active (this thread only), `torch.nn.init` functions leave Parameters as allocated: random
    initialisation would write, and so make resident, every page of a model about to be thrown away (and
    on the meta device it only costs time). Buffers and other tensors are computed as usual."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")
        if getattr(func, "__module__", "") == "torch.nn.init" and isinstance(target, torch.nn.Parameter):
            return target
        return func(*args, **kwargs)


def checkpoint_bytes(location: Path) -> int | None:
    """Bytes the checkpoint's tensors take once read (GGUF is dequantized to float32), from the file
    headers alone; None where there are no weight files to look at yet (a hub id before download)."""
    found = _checkpoint(location)
    return None if found is None else found[0]


def _checkpoint(location: Path) -> tuple[int, set[str]] | None:
    """(bytes, safetensors dtype names) of the checkpoint's tensors once read, from the headers."""
    location = Path(location)
    if location.suffix == ".gguf":
        return _gguf_elements(location) * FLOAT32_BYTES, {"F32"}
    files = sorted(location.glob("*.safetensors")) if location.is_dir() else []
    if not files:
        return None
    headers = [_safetensors_bytes(f) for f in files]
    return sum(n for n, _ in headers), set().union(*(dtypes for _, dtypes in headers))


_SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def load_bytes(hf_config: dict, location: Path | None = None, dtype: torch.dtype = torch.float32) -> int:
    """Peak bytes of loading: the checkpoint held while converting, and our module in `dtype` beside it
    when it must be cast. The converted checkpoint's tensors become the module's parameters
    (`attnviz.loading.build_module(consume=True)`), so where the checkpoint already is `dtype` (a GGUF
    file, dequantised to float32, loaded as float32) there is no second copy. Without weight files
    (before a download) the checkpoint is taken as float32 parameters."""
    n_parameters = parameter_count(hf_config)
    module = n_parameters * torch.tensor([], dtype=dtype).element_size()
    found = _checkpoint(location) if location is not None else None
    if found is None:  # before a download: the dtype the config says the weights are saved in
        saved = _config_dtype(hf_config)
        found = n_parameters * torch.tensor([], dtype=saved).element_size(), {_SAFETENSORS_DTYPES[saved]}
    held, dtypes = found
    cast = dtypes != {_SAFETENSORS_DTYPES.get(dtype)}
    return max(module, held + (module if cast else 0))


def _config_dtype(hf_config: dict) -> torch.dtype:
    """The dtype a config says its checkpoint is saved in (`dtype`, before transformers 5 `torch_dtype`)."""
    name = str(hf_config.get("dtype") or hf_config.get("torch_dtype") or "float32").removeprefix("torch.")
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(name, torch.float32)


def check_split(bytes_by_device: dict, capacity: dict, host_need: int, host_limit: int,
                host_what: str = "available memory") -> None:
    """Refuse, before any weight is read, a split model that fits nowhere.

    bytes_by_device: the module's bytes per device of its device map (GPU index, "cpu", "disk");
    capacity: what each device offers (max_memory resolved; "disk" only where an offload_folder is given);
    host_need: host bytes the load holds at its peak (the checkpoint while converting and the CPU part).
    Admitted: the whole model fits the devices together, each device holds its part, and the host its
    peak; so a model larger than any one device loads once split."""
    def names(sizes: dict) -> str:
        return ", ".join(f"{f'cuda:{d}' if isinstance(d, int) else d} {b / 1e9:.2f} GB" for d, b in sizes.items())

    total, offered = sum(bytes_by_device.values()), sum(capacity.values())
    no_disk = "" if "disk" in capacity else "nothing can go to disk without an offload_folder"
    if total > offered:
        raise ModelTooLarge(total, offered, f"all the devices the device map may use ({names(capacity)})",
                            no_disk or "give more max_memory")
    for device, need in bytes_by_device.items():
        if need > capacity.get(device, 0):
            name = f"cuda:{device}" if isinstance(device, int) else device
            hint = no_disk if device == "disk" else f"the device map puts {need / 1e9:.2f} GB on {name}"
            raise ModelTooLarge(need, capacity.get(device, 0), f"{name} (max_memory or what it has free)",
                                hint)
    if host_need > host_limit:
        raise ModelTooLarge(host_need, host_limit, host_what,
                            "the host holds the checkpoint while converting, and the CPU part of the map")


def _safetensors_bytes(path: Path) -> tuple[int, set[str]]:
    """Data bytes and dtypes listed in a safetensors header: 8 bytes of little-endian length, then JSON."""
    with open(path, "rb") as file:
        raw = file.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path.name} is not a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > SAFETENSORS_HEADER_LIMIT:
            raise ValueError(f"{path.name}: safetensors header too large")
        try:
            header = json.loads(file.read(length))
            tensors = [meta for name, meta in header.items() if name != "__metadata__"]
            return (sum(int(meta["data_offsets"][1]) - int(meta["data_offsets"][0]) for meta in tensors),
                    {str(meta["dtype"]) for meta in tensors})
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise ValueError(f"{path.name}: malformed safetensors header") from error


def _gguf_elements(path: Path) -> int:
    """Elements of every tensor in a GGUF file, from its tensor table (`gguf_stream.read_table`, which skips
    the metadata with seeks: gguf's own GGUFReader takes seconds to build a tokenizer vocabulary)."""
    from attnviz.loading.gguf_stream import read_table

    return sum(int(np.prod(entry.dims, dtype=np.int64)) for entry in read_table(path).tensors)
