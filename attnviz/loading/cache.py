"""The converted-model cache: a GGUF checkpoint converted once, opened from plain float32 safetensors after.

A first load of a GGUF file dequantises every tensor and converts the tokenizer through transformers
(SmolLM2: about 30-70 s here, Gemma 3 270M: about 3 minutes). Its result is kept in a folder keyed by
the SHA-256 of the source file, so a later start reads it back in seconds:

    $ATTNVIZ_CACHE_DIR (default ~/.cache/attnviz)/
      index.json                       (path, size, mtime_ns) -> sha256: a file is hashed once, not at
                                       every start (250 MB take about a second to hash)
      models/<sha256>-<code>/          one converted model; <code> fingerprints the loader, the core
        weights.safetensors            and transformers, so a change to any rebuilds the entry
        tokenizer.json                 the fast tokenizer (tokenizers' own format)
        meta.json                      the HF config dict, special tokens, the tokenizer's limit
        complete.json                  written last: the size of each file above
      offline/                         the joined Gemma 3 GGUF (attnviz.loading.offline)

Every write goes to a temporary name in the same folder and is renamed into place, and an entry is
renamed into place only once complete, so neither two processes nor a crash leave half a file under a
real name. An entry whose files are missing or of another size than `complete.json` says is removed
and rebuilt. Weights are safetensors only, never pickles; they are read with plain reads into fresh
tensors (no memory map, so the file's pages do not count twice in resident memory).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CACHE_DIR_VARIABLE = "ATTNVIZ_CACHE_DIR"
FORMAT = 1  # of an entry's files; part of the code fingerprint
WEIGHTS, TOKENIZER, META, COMPLETE = "weights.safetensors", "tokenizer.json", "meta.json", "complete.json"
HASH_CHUNK = 8 * 1024 * 1024
_INDEX_LOCK = threading.Lock()

# safetensors dtype names <-> torch (only what a converted model holds)
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
           "BOOL": torch.bool}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
HEADER_LIMIT = 100_000_000  # the safetensors format's own cap on its JSON header


def cache_dir(environ=os.environ) -> Path | None:
    """The cache folder: $ATTNVIZ_CACHE_DIR, default ~/.cache/attnviz; None when set to "" or "off"."""
    value = environ.get(CACHE_DIR_VARIABLE)
    if value is None:
        return Path.home() / ".cache" / "attnviz"
    value = value.strip()
    return None if value in ("", "off") else Path(value).expanduser()


# --- atomic writes ---------------------------------------------------------------------------------

@contextlib.contextmanager
def atomic_path(target: Path):
    """A temporary path beside `target`; renamed onto it when the block ends without error, removed if not."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    os.chmod(temporary, 0o644)  # as a plain write would leave it (mkstemp makes it private)
    try:
        yield Path(temporary)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def atomic_write_text(target: Path, text: str) -> None:
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf-8")


def remove_tree(path: Path) -> None:
    """Remove a folder safely even while another process reads it: rename it aside first."""
    aside = path.with_name(f".trash-{path.name}-{os.getpid()}-{threading.get_ident()}")
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, aside)
        shutil.rmtree(aside, ignore_errors=True)


# --- hashing, once per (path, size, mtime) ---------------------------------------------------------

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _read_index(root: Path) -> dict:
    try:
        index = json.loads((root / "index.json").read_text(encoding="utf-8"))
        return index if isinstance(index, dict) else {}
    except (OSError, ValueError):
        return {}


def known_sha256(path: Path, root: Path | None = None) -> str | None:
    """The SHA-256 the index holds for `path` as it is now (same size and mtime), or None."""
    root = root or cache_dir()
    if root is None:
        return None
    path = Path(path).resolve()
    entry = _read_index(root).get(str(path))
    with contextlib.suppress(OSError):
        if isinstance(entry, dict) and {k: entry.get(k) for k in ("size", "mtime_ns")} == _stamp(path):
            return entry.get("sha256")
    return None


def remember_sha256(path: Path, sha256: str, root: Path | None = None) -> None:
    """Note `path`'s hash in the index (read, update, atomic replace; a lost race only costs a rehash)."""
    root = root or cache_dir()
    if root is None:
        return
    path = Path(path).resolve()
    with _INDEX_LOCK:
        index = _read_index(root)
        index[str(path)] = {**_stamp(path), "sha256": sha256}
        index = {p: e for p, e in index.items() if os.path.exists(p)}  # forget files that are gone
        atomic_write_text(root / "index.json", json.dumps(index, indent=1, sort_keys=True))


def source_sha256(path: Path, root: Path | None = None) -> str:
    """The SHA-256 of `path`, hashed only when the index does not know it at its size and mtime."""
    known = known_sha256(path, root)
    if known is not None:
        return known
    sha256 = file_sha256(path)
    with contextlib.suppress(OSError):
        remember_sha256(path, sha256, root)
    return sha256


# --- the code fingerprint --------------------------------------------------------------------------

@functools.cache
def code_fingerprint() -> str:
    """What the converted numbers depend on besides the source file: the loader and the core (their
    source files), the cache format and the versions of transformers and gguf (GGUF names, processors)."""
    import importlib.metadata

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(f"format {FORMAT}".encode())
    for folder in ("loading", "transformer"):  # with their subfolders (loading/converters/)
        for file in sorted((package / folder).rglob("*.py")):
            digest.update(file.relative_to(package).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    for distribution in ("transformers", "gguf", "tokenizers"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{distribution} {importlib.metadata.version(distribution)}".encode())
    return digest.hexdigest()[:16]


# --- safetensors, written and read without copies --------------------------------------------------

def write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """The safetensors format (8-byte little-endian header length, JSON header, raw little-endian
    data), written tensor by tensor from the tensors' own memory."""
    header, offset = {}, 0
    for name, tensor in tensors.items():
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": _NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        for tensor in tensors.values():
            data = tensor.detach().contiguous().cpu()
            if data.numel():
                file.write(memoryview(data.view(torch.uint8).numpy()) if data.dtype != torch.bool
                           else data.numpy().tobytes())
        file.flush()
        os.fsync(file.fileno())


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, each read into a fresh tensor (checked: dtypes, shapes and
    offsets must tile the file exactly)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        (length,) = struct.unpack("<Q", _read_exactly(file, 8))
        if length > min(HEADER_LIMIT, size - 8):
            raise ValueError(f"{path.name}: bad safetensors header length")
        header = json.loads(_read_exactly(file, length))
        header.pop("__metadata__", None)
        entries = sorted(header.items(), key=lambda item: item[1]["data_offsets"][0])
        tensors, expected = {}, 0
        for name, meta in entries:
            dtype = _DTYPES[meta["dtype"]]
            start, end = (int(v) for v in meta["data_offsets"])
            shape = [int(n) for n in meta["shape"]]
            tensor = torch.empty(shape, dtype=dtype)
            if start != expected or end - start != tensor.numel() * tensor.element_size():
                raise ValueError(f"{path.name}: tensor {name!r} does not match its offsets")
            if tensor.numel():
                target = memoryview(tensor.view(torch.uint8).numpy() if dtype != torch.bool
                                    else tensor.view(torch.uint8).numpy())
                if file.readinto(target) != end - start:
                    raise ValueError(f"{path.name}: truncated")
            tensors[name] = tensor
            expected = end
        if 8 + length + expected != size:
            raise ValueError(f"{path.name}: {size - 8 - length - expected} bytes beyond the last tensor")
    return tensors


def _read_exactly(file, n: int) -> bytes:
    raw = file.read(n)
    if len(raw) != n:
        raise ValueError("truncated safetensors file")
    return raw


# --- entries ---------------------------------------------------------------------------------------

@dataclass
class Entry:
    """A converted model read back from the cache."""

    config: dict
    state: dict[str, torch.Tensor]  # our module's state dict, tied tensors stored once
    tokenizer: object  # tokenizers.Tokenizer
    max_length: int | None
    special_tokens: dict[str, str]
    folder: Path


def entry_folder(sha256: str, root: Path) -> Path:
    return root / "models" / f"{sha256}-{code_fingerprint()}"


def _complete(folder: Path) -> bool:
    """The entry's marker exists and every file has the size it records."""
    try:
        sizes = json.loads((folder / COMPLETE).read_text(encoding="utf-8"))
        return all((folder / name).stat().st_size == sizes[name] for name in (WEIGHTS, TOKENIZER, META))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def has_entry(source: Path, root: Path | None = None) -> bool:
    """Whether a complete entry for `source` exists (hashing it if the index does not know it yet)."""
    root = root or cache_dir()
    if root is None:
        return False
    try:
        return _complete(entry_folder(source_sha256(Path(source), root), root))
    except OSError:
        return False


def open_entry(source: Path, progress=None, root: Path | None = None) -> Entry | None:
    """The cached conversion of `source`, or None (no cache, no entry, or a broken one, which is removed)."""
    root = root or cache_dir()
    if root is None:
        return None
    progress = progress or (lambda stage: None)
    try:
        folder = entry_folder(source_sha256(Path(source), root), root)
    except OSError as error:
        log.warning("model cache not used: %s", error)
        return None
    if not folder.is_dir():
        return None
    if not _complete(folder):
        log.warning("removing an incomplete model cache entry %s", folder)
        remove_tree(folder)
        return None
    from tokenizers import Tokenizer

    progress("reading cached weights")
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        # The tokenizer first: parsing Gemma 3's 262k-token tokenizer.json takes a few hundred MB for a
        # moment, handed back before the weights are held (the peak is the load's reservation).
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER))
        trim_heap()
        state = read_safetensors(folder / WEIGHTS)
    except Exception as error:  # noqa: BLE001 - any unreadable entry is rebuilt (tokenizers raises Exception)
        log.warning("removing an unreadable model cache entry %s (%s)", folder, error)
        remove_tree(folder)
        return None
    config = _config_from_json(meta["config"])
    return Entry(config, state, tokenizer, meta["max_length"], meta["special_tokens"], folder)


def store_entry(source: Path, state: dict[str, torch.Tensor], config: dict, tokenizer, max_length,
                special_tokens: dict, root: Path | None = None) -> Path | None:
    """Write an entry for `source` (our module's state dict with each tied tensor once, the fast
    tokenizer, the config): built in a temporary folder, renamed into place when complete. A failure to
    write is logged, never raised: the model is loaded either way."""
    root = root or cache_dir()
    if root is None:
        return None
    try:
        meta = json.dumps({"format": FORMAT, "config": config, "max_length": max_length,
                           "special_tokens": special_tokens, "source": str(source)}, indent=1)
        if _config_from_json(json.loads(meta)["config"]) != config:  # JSON cannot carry it exactly: no cache
            raise ValueError("the config does not survive JSON")
        folder = entry_folder(source_sha256(Path(source), root), root)
        folder.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".build-{folder.name}-"))
        try:
            write_safetensors(building / WEIGHTS, state)
            (building / TOKENIZER).write_text(tokenizer.to_str(), encoding="utf-8")
            (building / META).write_text(meta, encoding="utf-8")
            sizes = {name: (building / name).stat().st_size for name in (WEIGHTS, TOKENIZER, META)}
            (building / COMPLETE).write_text(json.dumps(sizes), encoding="utf-8")
            if folder.exists() and not _complete(folder):
                remove_tree(folder)
            try:
                os.rename(building, folder)  # atomic; fails if another process finished first
            except OSError:
                if not _complete(folder):
                    raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
        _prune_other_versions(folder)
        return folder
    except (OSError, TypeError, ValueError) as error:
        log.warning("could not write the model cache for %s: %s", source, error)
        return None


def _prune_other_versions(folder: Path) -> None:
    """Entries of the same source made by other code versions are dead weight: remove them."""
    sha256 = folder.name.split("-")[0]
    for other in folder.parent.glob(f"{sha256}-*"):
        if other != folder and other.is_dir():
            remove_tree(other)


def trim_heap() -> None:
    """Collect garbage and hand freed heap back to the OS (glibc keeps it otherwise), so that a transient
    step's memory is gone before the next one raises the peak."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def _config_from_json(config: dict) -> dict:
    """JSON object keys are strings: HF configs' id2label has int keys (as transformers reads them back)."""
    if isinstance(config.get("id2label"), dict):
        config = {**config, "id2label": {int(k): v for k, v in config["id2label"].items()}}
    return config
