"""The only module that imports transformers (lazily): it reads configs, weights and tokenizers.

Weights come from safetensors or GGUF only (never pickles), and remote code is never trusted. What
leaves this module is plain data: a config dict, a {name: tensor} checkpoint and the tokenizer's
Rust backend (`tokenizers.Tokenizer`), so running our model needs no transformers code.
"""

from __future__ import annotations

import inspect
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnviz.loading.cache import trim_heap
from attnviz.loading.sources import is_local_path

# Files a hub download fetches: configs, tokenizers, safetensors. Never *.bin / *.pt (pickles).
HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken", "merges.txt", "*.spm"]  # .spm: Marian


@dataclass
class Checkpoint:
    config: dict  # HF config as a dict (transformers 5 layout: rope settings in rope_parameters)
    tensors: dict[str, torch.Tensor]
    tokenizer: object  # tokenizers.Tokenizer, with the model's special-token post-processing
    max_length: int | None  # the tokenizer's real limit, or None when it reports none
    special_tokens: dict[str, str]  # e.g. {"pad_token": "[PAD]"}
    path: str


_IMPORT_LOCK = threading.Lock()


def import_transformers() -> None:
    """Import the transformers names this module uses, once, one thread at a time. transformers resolves
    them lazily, and four visitors opening a model together on a cold server saw "cannot import name
    'AutoConfig' from 'transformers'" from the threads that came second. Cheap after the first call."""
    with _IMPORT_LOCK:
        import transformers
        from transformers import modeling_gguf_pytorch_utils  # noqa: F401

        for name in ("AutoConfig", "AutoModel", "AutoModelForCausalLM", "AutoTokenizer"):
            getattr(transformers, name)


def read_config(source: str | Path) -> dict:
    """Only the HF config of a hub id, local directory or .gguf file, without weights (size estimates
    before a download or before reading weights)."""
    import_transformers()
    from transformers import AutoConfig

    try:
        if Path(source).suffix == ".gguf" or Path(source).is_dir():
            return _from_pretrained(AutoConfig, source, trust_remote_code=False).to_dict()
        return AutoConfig.from_pretrained(source, trust_remote_code=False).to_dict()
    except OSError as error:
        raise OSError(f"could not read the config of {str(source)!r} ({error})".split("\n")[0]) from error


def default_config(model_type: str) -> dict:
    """transformers' default config of a model type, as a dict: the sizes of the reference checkpoint its
    docstring names (Gemma2Config: gemma-2-9b's layer pattern, window and caps). No file is read."""
    import_transformers()
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type).to_dict()


def locate(source: str, progress=None, from_hub: bool = False) -> Path:
    """The local folder or .gguf file holding `source`: a path as given, or a hub id downloaded first
    (safetensors only). With `from_hub`, `source` is a hub id even where a folder of that name exists."""
    progress = progress or (lambda stage: None)
    if not from_hub:
        path = Path(source).expanduser()
        if path.suffix == ".gguf":
            if not path.is_file():
                raise FileNotFoundError(f"no GGUF file at {path}")
            return path
        if path.is_dir():
            return path
        if is_local_path(source):
            raise FileNotFoundError(f"{source!r} is neither a model directory nor a .gguf file")
    return _download(source, progress)


def read_checkpoint(location: str | Path, progress=None, before_weights=None) -> Checkpoint:
    """Config, weights and tokenizer of a local folder or .gguf file (see `locate`).

    `before_weights(config)` runs once the config is read and before any weight is: the size check."""
    progress = progress or (lambda stage: None)
    before_weights = before_weights or (lambda config: None)
    path = Path(location)
    read = _read_gguf if path.suffix == ".gguf" else _read_directory
    return read(path, progress, before_weights)


def _download(repo_id: str, progress) -> Path:
    from huggingface_hub import snapshot_download

    progress(f"downloading {repo_id}")
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except Exception as error:  # the hub client raises many types for "offline" / "not found"
        raise OSError(
            f"could not download {repo_id!r} from the Hugging Face hub ({type(error).__name__}: {error}). "
            "Check the id and the network, or pass a local directory or .gguf file."
        ) from error


def _read_directory(path: Path, progress, before_weights) -> Checkpoint:
    from safetensors.torch import load_file
    from transformers import AutoConfig

    files = sorted(path.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt")]
        raise ValueError(
            f"{path} has no .safetensors weights"
            + (f" (only {', '.join(pickles)}: pickled weights are never loaded)" if pickles else "")
        )
    progress("reading config")
    config = _from_pretrained(AutoConfig, path, trust_remote_code=False).to_dict()
    before_weights(config)
    progress("reading weights")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(_read_safetensors(file, load_file))
    progress("reading tokenizer")
    if config.get("model_type") == "marian":
        return _marian_checkpoint(config, tensors, path)
    return _checkpoint(config, tensors, reference_tokenizer(path), path)


def _read_safetensors(file: Path, load_file) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors in fresh memory (attnviz.loading.cache.read_safetensors: plain reads,
    header checked), so the load, not the model's first run, is what makes them resident (they become
    the module's parameters); the library's memory-mapped reader for dtypes ours does not know (float8)."""
    from attnviz.loading.cache import read_safetensors

    try:
        return read_safetensors(file)
    except KeyError:
        return load_file(str(file))


def _marian_checkpoint(config: dict, tensors: dict, path: Path) -> Checkpoint:
    """Marian's tokenizer has no Rust backend: read its SentencePiece files directly (attnviz.loading.spm),
    which also gives the offsets."""
    from attnviz.loading.spm import MarianSentencePiece

    tokenizer = MarianSentencePiece.from_folder(path)
    # Greedy decoding's rules live in the generation settings, which transformers 5 no longer keeps in the
    # model config: never emit <pad> (bad_words_ids), end with </s> at the length limit (forced_eos_token_id).
    config = dict(config)
    for name in ("config.json", "generation_config.json"):  # the second wins, as in transformers
        if (path / name).is_file():
            raw = json.loads((path / name).read_text(encoding="utf-8"))
            config.update({k: raw[k] for k in ("bad_words_ids", "forced_eos_token_id") if k in raw})
    specials = {"eos_token": tokenizer.eos, "unk_token": tokenizer.unk, "pad_token": tokenizer.pad}
    return Checkpoint(config, tensors, tokenizer, tokenizer.max_length, specials, str(path))


def _read_gguf(path: Path, progress, before_weights) -> Checkpoint:
    """A GGUF file, tensor by tensor (`gguf_stream`): the tokenizer first, so that its conversion's
    garbage is gone before the weights are held; then each tensor dequantised, named and processed as
    transformers does (`read_gguf_tensors`), so the checkpoint is the only float32 copy."""
    from transformers import AutoConfig

    progress("reading GGUF config")
    hf_config = _from_pretrained(AutoConfig, path)
    before_weights(hf_config.to_dict())
    progress("converting tokenizer")
    tokenizer = reference_tokenizer(path)
    checkpoint = _checkpoint(hf_config.to_dict(), {}, tokenizer, path)
    del tokenizer
    trim_heap()
    checkpoint.tensors = read_gguf_tensors(path, hf_config, progress)
    return checkpoint


def read_gguf_tensors(path: Path, hf_config, progress=None) -> dict[str, torch.Tensor]:
    """The float32 tensors transformers' `load_gguf_checkpoint` returns, under the same Hugging Face names,
    read one at a time: the GGUF -> HF name map of a skeleton model on the meta device, and the
    architecture's tensor processor (Llama's q/k reverse permutation, Gemma's norm weights stored + 1 by
    llama.cpp, ...), both transformers' own."""
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    from attnviz.loading.gguf_stream import stream_tensors

    # transformers hands its processors the config parsed from the GGUF metadata, which is what AutoConfig
    # was built from: the keys they read (head counts) are the same in the config's dict.
    parsed_config = hf_config.to_dict()
    parsed = {"tensors": {}}  # where transformers' MoE processors put the experts they merge
    processor, names = None, {}

    def prepare(architecture: str):
        nonlocal processor, names
        processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=parsed_config)
        with torch.device("meta"):  # transformers maps names through a model skeleton; meta allocates nothing
            skeleton = AutoModelForCausalLM.from_config(hf_config)
        names = _gguf_names(get_gguf_hf_weights_map, skeleton, processor)
        return take

    def take(name: str, weights) -> None:
        result = processor.process(weights=weights, name=name, tensor_key_mapping=names, parsed_parameters=parsed)
        if result.name is None or result.name not in names:
            return
        array = result.weights
        if array is not weights and not (array.flags.writeable and array.flags.c_contiguous):
            array = array.copy()
        parsed["tensors"][names[result.name]] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))

    stream_tensors(path, prepare, progress)
    return parsed["tensors"]


_NAME_MAP_LOCK = threading.Lock()


def _gguf_names(get_map, skeleton, processor) -> dict[str, str]:
    """transformers' GGUF -> HF name map, computed by its own function with gguf's `get_tensor_name_map`
    memoised while it runs: it rebuilds that table for each of the ~400 submodules it walks, 25 s of a
    SmolLM2 load on a busy machine, and the table depends only on (architecture, layer count)."""
    import functools

    import gguf

    with _NAME_MAP_LOCK:
        original = gguf.get_tensor_name_map
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=4)(original)
        try:
            return get_map(skeleton, processor)
        finally:
            gguf.get_tensor_name_map = original


def read_gguf_with_transformers(path: Path) -> Checkpoint:
    """transformers' own GGUF load (`load_gguf_checkpoint` on the whole file): the reference the streaming
    reader is tested and benchmarked against (benchmarks/bench_load.py)."""
    import_transformers()
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = Path(path)
    hf_config = _from_pretrained(AutoConfig, path)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(hf_config)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=skeleton)["tensors"]
    return _checkpoint(hf_config.to_dict(), tensors, reference_tokenizer(path), path)


def _checkpoint(config: dict, tensors: dict, tokenizer, path: Path) -> Checkpoint:
    if not getattr(tokenizer, "is_fast", False) or getattr(tokenizer, "backend_tokenizer", None) is None:
        raise ValueError(f"{path}: the tokenizer has no fast (Rust) backend, which attnviz needs for offsets")
    # Some tokenizers report a huge placeholder limit (SmolLM2: 1e30): then the config's is the real one.
    limit = tokenizer.model_max_length
    max_length = limit if isinstance(limit, int) and limit < 1_000_000 else None
    specials = {k: str(v) for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    backend = type(tokenizer.backend_tokenizer).from_str(tokenizer.backend_tokenizer.to_str())  # a copy
    backend.no_truncation()  # truncation is ours (max_tokens), padding too
    backend.no_padding()
    return Checkpoint(config, tensors, backend, max_length, specials, str(path))


def reference_model(path: str):
    """HF's own base model on the same weights, eager attention in float32: the parity reference."""
    import_transformers()
    from transformers import AutoModel

    safetensors = {} if Path(path).suffix == ".gguf" else {"use_safetensors": True}
    return _from_pretrained(
        AutoModel, path, attn_implementation="eager", dtype=torch.float32, trust_remote_code=False, **safetensors
    ).eval()


@torch.inference_mode()
def reference_outputs(model, input_ids, attention_mask=None, token_type_ids=None):
    """(attentions [L, B, H, T, T], last hidden state [B, T, C]) from an HF model."""
    kwargs = {"attention_mask": attention_mask}
    if token_type_ids is not None and "token_type_ids" in inspect.signature(model.forward).parameters:
        kwargs["token_type_ids"] = token_type_ids
    out = model(input_ids=input_ids, output_attentions=True, **kwargs)
    return torch.stack(out.attentions), out.last_hidden_state


def reference_tokenizer(path: str | Path):
    """HF's tokenizer of a checkpoint: its Rust backend serves our runs, and the benchmark's HF side
    tokenizes with it."""
    import_transformers()
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, path, trust_remote_code=False)


def _from_pretrained(loader, path: str | Path, **kwargs):
    """`loader.from_pretrained` on a local checkpoint: a folder, or a GGUF file given as folder + gguf_file."""
    path = Path(path)
    if path.suffix == ".gguf":
        return loader.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    return loader.from_pretrained(str(path), **kwargs)
