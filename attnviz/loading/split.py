"""A model split across devices and disk by accelerate: `from_pretrained`'s device_map, max_memory and
offload_folder, for our own `Transformer`.

The semantics follow transformers (`check_and_set_device_map`, `_get_device_map` in
transformers/integrations/accelerate.py):

- device_map "auto", "balanced", "balanced_low_0": accelerate's `get_balanced_memory`, then
  `infer_auto_device_map`; "sequential": the devices filled in order; a device name, torch.device or
  GPU index: the whole model there ({"": device}); a dict {module name: device}: as given;
- max_memory {0: "10GiB", "cpu": "2GB", "disk": "20GB"}: accelerate's keys and sizes. Left out, every GPU's
  free memory and 90% of the host's (transformers' rule), less the checkpoint held while converting;
- offload_folder: where the weights a map sends to "disk" go, as numpy memmaps with an index.json
  (accelerate's `offload_state_dict` format; never pickles), in a fresh folder of its own per load,
  removed when the module is garbage-collected.

The split unit is a block (`no_split_module_classes`: the blocks' classes), so one layer's attention is
computed, and recorded, on the device where that layer runs. Our module is built on the
meta device and each converted tensor goes straight to its place, so the host never holds the whole
model twice. `dispatch_model` leaves the map on the module as `hf_device_map`.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch

from attnviz.loading.registry import converter_for
from attnviz.transformer.model import Transformer

DEVICE_MAP_NAMES = ("auto", "balanced", "balanced_low_0", "sequential")
OFFLOADED = ("cpu", "disk")
HOST_SHARE = 0.9  # transformers' get_max_memory: 90% of the host when max_memory is not given


@dataclass
class SplitPlan:
    module: Transformer  # on the meta device, in the load's dtype
    device_map: dict[str, int | str | torch.device]  # as accelerate returns it (or as the caller gave it)
    bytes_by_device: dict[int | str, int]  # the module's bytes per device of the map (keys: GPU index, "cpu", ...)
    capacity: dict[int | str, int]  # what each device offers: max_memory resolved; "disk" only with a folder
    offload_folder: Path | None
    dtype: torch.dtype

    @property
    def main_device(self) -> int | str:
        return main_device(self.device_map)

    @property
    def device_type(self) -> str:
        """The main device as ModelInfo.device names devices ("cuda", "mps", "cpu")."""
        main = self.main_device
        return "cuda" if isinstance(main, int) else torch.device(main).type


def main_device(device_map: dict) -> int | str:
    """Where inputs go and offloaded layers run: the first accelerator of the map, else the CPU
    (dispatch_model's rule, made deterministic)."""
    accelerators = [d for d in map(device_key, device_map.values()) if d not in OFFLOADED]
    gpus = sorted(d for d in accelerators if isinstance(d, int))
    return gpus[0] if gpus else (accelerators[0] if accelerators else "cpu")


def normalize_device_map(device_map) -> str | dict:
    """from_pretrained's accepted values (check_and_set_device_map): a name of DEVICE_MAP_NAMES stays a
    name; a device name, torch.device or GPU index becomes {"": device}; a dict is copied."""
    if isinstance(device_map, dict):
        if not device_map:
            raise ValueError("device_map is an empty dict: give each module a device, or a name such as 'auto'")
        return dict(device_map)
    if isinstance(device_map, torch.device):
        return {"": device_map}
    if isinstance(device_map, bool) or not isinstance(device_map, (str, int)):
        raise ValueError(f"device_map must be a name, a device, a GPU index or a dict, not {device_map!r}")
    if isinstance(device_map, int):
        if device_map < 0:
            raise ValueError("device_map cannot be a negative GPU index; pass device_map='cpu' for the CPU")
        return {"": device_map}
    if device_map in DEVICE_MAP_NAMES:
        return device_map
    try:
        return {"": torch.device(device_map)}
    except RuntimeError:
        raise ValueError(f"device_map {device_map!r} is neither a device name (cpu, cuda:0, ...) nor one of "
                         f"{', '.join(DEVICE_MAP_NAMES)}") from None


def device_key(device) -> int | str:
    """A map value as max_memory names devices: a GPU index, "cpu", "mps" or "disk"."""
    if isinstance(device, int) or device == "disk":
        return device
    device = torch.device(device)
    if device.type == "cuda":
        return device.index if device.index is not None else 0
    return device.type


def empty_module(hf_config: dict, dtype: torch.dtype) -> Transformer:
    """Our module for this config with every parameter on the meta device (nothing allocated)."""
    converter = converter_for(hf_config)
    if converter.module is not Transformer:
        raise ValueError(f"device_map is supported for encoders and decoders, not for {hf_config.get('model_type')!r} "
                         "translation models")
    config = converter.config(hf_config)
    with torch.device("meta"):  # thread-local, unlike accelerate's init_empty_weights (a global patch)
        module = converter.module(config).to(dtype)
    # Plain tensor attributes (rotary frequencies, ALiBi slopes) are no parameters: the module builds them on
    # the CPU whatever the default device; one left on "meta" would hold no numbers.
    for name, sub in module.named_modules():
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and value.is_meta:
                raise RuntimeError(f"{name or 'the module'}.{attr} is a plain tensor built on the meta device: "
                                   "build it under `with torch.device('cpu')` as Transformer.__init__ does")
    return module


def no_split_classes(module: Transformer) -> list[str]:
    """The classes a device map never cuts: the blocks (attention and MLP with their residuals)."""
    return sorted({type(block).__name__ for block in module.blocks})


def plan(hf_config: dict, device_map, max_memory: dict | None, offload_folder, dtype: torch.dtype,
         host_reserved: int = 0) -> SplitPlan:
    """The device map of this config's module, before any weight is read. `host_reserved`: host bytes the
    load holds besides the CPU part (the checkpoint while converting), left out of the default CPU share."""
    from accelerate.utils import check_device_map, get_balanced_memory, get_max_memory, infer_auto_device_map

    module = empty_module(hf_config, dtype)
    device_map = normalize_device_map(device_map)
    folder = None if offload_folder is None else Path(offload_folder).expanduser()
    given = None if max_memory is None else dict(max_memory)
    disk = None if given is None else given.pop("disk", None)
    resolved = get_max_memory(None if given is None else dict(given))  # sizes as ints, devices in order
    if given is None:  # transformers' defaults: 90% of a lone GPU when balancing, and of the host less what
        gpus = [key for key in resolved if isinstance(key, int)]  # the load holds anyway (the checkpoint)
        if len(gpus) == 1 and device_map != "sequential":
            resolved[gpus[0]] = int(HOST_SHARE * resolved[gpus[0]])
        if "cpu" in resolved:
            resolved["cpu"] = max(0, int(HOST_SHARE * (resolved["cpu"] - host_reserved)))
    if isinstance(device_map, str):
        classes = no_split_classes(module)
        if device_map == "sequential":
            budget = dict(resolved)
        else:  # accelerate's balancing counts devices with torch.device(key): "disk" must stay out of it
            budget = get_balanced_memory(module, dict(resolved), classes, dtype=dtype,
                                         low_zero=device_map == "balanced_low_0")
        device_map = dict(infer_auto_device_map(module, max_memory=budget, no_split_module_classes=classes,
                                                dtype=dtype))
    else:
        check_device_map(module, device_map)
        machine = get_max_memory(None)  # devices the dict names but max_memory leaves out: what the machine has
        for device in set(map(device_key, device_map.values())) - set(resolved) - {"disk"}:
            resolved[device] = machine.get(device, 0)
    capacity = {key: int(value) for key, value in resolved.items()}
    if folder is not None:
        capacity["disk"] = _convert_size(disk) if disk is not None else _free_disk(folder)
    return SplitPlan(module, device_map, bytes_by_device(module, device_map), capacity, folder, dtype)


def bytes_by_device(module: torch.nn.Module, device_map: dict) -> dict[int | str, int]:
    """Bytes of the module's parameters and buffers (tied ones once) per device of the map."""
    totals: dict[int | str, int] = {}
    tensors = list(module.named_parameters()) + list(module.named_buffers())
    for name, tensor in tensors:
        device = device_key(_device_of(name, device_map))
        totals[device] = totals.get(device, 0) + tensor.numel() * tensor.element_size()
    return totals


def materialize(split: SplitPlan, hf_config: dict, tensors: dict) -> Transformer:
    """Convert the checkpoint into the planned module, each tensor straight to its device (GPU, CPU or a
    memmap on disk), then attach accelerate's hooks. `tensors` is emptied as it is consumed."""
    from accelerate import dispatch_model
    from accelerate.utils import (
        find_tied_parameters,
        offload_weight,
        retie_parameters,
        save_offload_index,
        set_module_tensor_to_device,
    )

    module = split.module
    state = converter_for(hf_config).weights(hf_config, tensors, module)
    tensors.clear()  # the converted dict holds the only references now: each is freed once placed
    tied = find_tied_parameters(module)
    primary = {name for name, _ in module.named_parameters()} | {name for name, _ in module.named_buffers()}
    folder, index = None, {}
    if "disk" in map(device_key, split.device_map.values()):
        if split.offload_folder is None:
            raise ValueError("the device_map sends weights to disk: give an offload_folder")
        split.offload_folder.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="attnviz-offload-", dir=split.offload_folder))
    for name in list(state):
        tensor = state.pop(name)
        if tensor.is_floating_point():
            tensor = tensor.to(split.dtype)
        device = _device_of(name, split.device_map)
        if device_key(device) == "disk":  # every name of a tied group gets its own file: the hooks look up by name
            offload_weight(tensor, name, str(folder), index)
        elif name in primary:  # tied aliases are retied below
            set_module_tensor_to_device(module, name, _torch_device(device), value=tensor)
        del tensor
    retie_parameters(module, tied)
    if folder is not None:
        save_offload_index(index, str(folder))
        weakref.finalize(module, shutil.rmtree, folder, ignore_errors=True)
    # A block loads all of its weights at the start of its forward (the attention reads o_proj.weight
    # directly for value norms), not each linear layer at its own call.
    dispatch_model(module, split.device_map, main_device=split.main_device,
                   offload_dir=None if folder is None else str(folder), preload_module_classes=no_split_classes(module))
    return module.eval()


def _device_of(name: str, device_map: dict):
    """The device of a parameter: its own entry or its closest ancestor's (accelerate's rule)."""
    parts = name.split(".")
    for end in range(len(parts), -1, -1):
        key = ".".join(parts[:end])
        if key in device_map:
            return device_map[key]
    raise ValueError(f"the device_map gives no device for {name}")


def _torch_device(device):
    return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)


def _convert_size(size) -> int:
    from accelerate.utils import convert_file_size_to_int

    return convert_file_size_to_int(size)


def _free_disk(folder: Path) -> int:
    """Free bytes on the file system that holds (or will hold) `folder`."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free
