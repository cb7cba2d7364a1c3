"""GGUF tensors one at a time: memory-mapped, dequantised to float32 with the `gguf` package's `dequantize`
(the function transformers calls), each handed on before the next is read.

transformers' own GGUF load keeps its whole dequantised checkpoint and then builds and fills a model beside
it. Here the only float32 copy is the one handed on; the file's pages are dropped from this process once a
tensor is read (they stay in the OS's page cache), so resident memory grows by the dequantised tensors alone.

The tensor table is read here, not with gguf's `GGUFReader`: that reader builds an object for every
metadata value first, and a 262k-token vocabulary took it 10-30 s (Gemma 3 270M; SmolLM2: 3-10 s, on a busy
2-core machine). The metadata is skipped with seeks (only `general.architecture` and `general.alignment` are
read), and each tensor's array is the same view of the map that `GGUFReader` gives (its `_build_tensors`).
Names stay GGUF's (`blk.0.attn_q.weight`): mapping them to Hugging Face's is `hf.py`'s job.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

PROGRESS_STEPS = 10  # "dequantising tensor i/N" about this many times, not once per tensor
# gguf's dequantize holds every group of rows of a tensor before joining them, twice the float32 tensor:
# Gemma 3's 262k x 640 embedding (671 MB) peaked 520 MB above what it keeps. Larger tensors are
# dequantised this many float32 bytes of rows at a time, into the one array that is kept.
CHUNK_BYTES = 32 * 1024 * 1024
_COUNT_LIMIT = 10_000_000  # tensors, metadata entries or array items: far beyond any real model
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # gguf value types -> bytes
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_PLAIN = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
          "I32": np.int32, "I64": np.int64}  # stored as values, not blocks


class TensorEntry(NamedTuple):
    name: str
    qtype: object  # gguf.GGMLQuantizationType
    dims: tuple[int, ...]  # GGUF order (fastest-moving first)
    offset: int  # absolute, in the file
    n_bytes: int


class TensorTable(NamedTuple):
    architecture: str
    tensors: list[TensorEntry]


def read_table(path) -> TensorTable:
    """The architecture and the tensor table of a GGUF file (version 2 or 3, little-endian)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    wanted = {"general.architecture": None, "general.alignment": 32}
    name_only = Path(path).name  # errors name the file, never the server's folders
    with open(path, "rb") as file:
        def number(fmt: str):
            raw = file.read(struct.calcsize(fmt))
            if len(raw) != struct.calcsize(fmt):
                raise ValueError(f"{name_only}: truncated GGUF header")
            return struct.unpack(fmt, raw)[0]

        def count() -> int:
            value = number("<Q")
            if value > _COUNT_LIMIT:
                raise ValueError(f"{name_only}: implausible GGUF header")
            return value

        def string() -> str:
            return file.read(count()).decode("utf-8")

        def skip(kind: int) -> None:
            if kind == _STRING:
                file.seek(count(), 1)
            elif kind == _ARRAY:
                item, n = number("<I"), count()
                if item in _FIXED:
                    file.seek(_FIXED[item] * n, 1)
                else:
                    for _ in range(n):
                        skip(item)
            elif kind in _FIXED:
                file.seek(_FIXED[kind], 1)
            else:
                raise ValueError(f"{name_only}: unknown GGUF value type {kind}")

        if file.read(4) != b"GGUF" or number("<I") not in (2, 3):
            raise ValueError(f"{name_only} is not a GGUF file of version 2 or 3")
        n_tensors, n_metadata = count(), count()
        for _ in range(n_metadata):
            key, kind = string(), number("<I")
            if key == "general.architecture" and kind == _STRING:
                wanted[key] = string()
            elif key == "general.alignment" and kind == _UINT32:
                wanted[key] = number("<I")
            else:
                skip(kind)
        infos = []
        for _ in range(n_tensors):
            name, n_dims = string(), number("<I")
            if n_dims > 8:
                raise ValueError(f"{name_only}: implausible GGUF tensor rank {n_dims}")
            dims = tuple(number("<Q") for _ in range(n_dims))
            infos.append((name, dims, number("<I"), number("<Q")))
        alignment = wanted["general.alignment"]
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"{name_only}: invalid GGUF alignment {alignment}")
        start = -(-file.tell() // alignment) * alignment
    if wanted["general.architecture"] is None:
        raise ValueError(f"{name_only}: no general.architecture in the GGUF metadata")
    tensors, names = [], set()
    for name, dims, kind, offset in infos:
        if name in names:
            raise ValueError(f"{name_only}: duplicated tensor {name}")
        names.add(name)
        qtype = GGMLQuantizationType(kind)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        n_bytes = int(np.prod(dims, dtype=np.int64)) * type_size // block_size
        tensors.append(TensorEntry(name, qtype, dims, start + offset, n_bytes))
    return TensorTable(wanted["general.architecture"], tensors)


def tensor_view(data: np.ndarray, entry: TensorEntry) -> np.ndarray:
    """The tensor's array in the mapped file, shaped as gguf's GGUFReader shapes it."""
    from gguf import quant_shape_to_byte_shape

    np_dims = tuple(reversed(entry.dims))
    raw = data[entry.offset:entry.offset + entry.n_bytes]
    if len(raw) != entry.n_bytes:
        raise ValueError(f"GGUF tensor {entry.name} lies beyond the end of the file")
    plain = _PLAIN.get(entry.qtype.name)
    if plain is not None:
        return raw.view(plain).reshape(np_dims)
    return raw.reshape(quant_shape_to_byte_shape(np_dims, entry.qtype))


def stream_tensors(path, prepare: Callable[[str], Callable[[str, np.ndarray], None]], progress=None) -> int:
    """`take = prepare(architecture)` (the file's `general.architecture`), then `take(gguf_name, float32
    array)` for every tensor of the GGUF file at `path`, in file order; each array is freshly allocated
    and writable (the caller may keep it without a copy). Returns the number of tensors."""
    from gguf import dequantize

    progress = progress or (lambda stage: None)
    progress("reading GGUF")
    table = read_table(path)
    take = prepare(table.architecture)
    data = np.memmap(path, mode="r")
    total, told = len(table.tensors), -1
    for i, entry in enumerate(table.tensors, 1):
        step = i * PROGRESS_STEPS // total
        if step != told:
            progress(f"dequantising tensor {i}/{total}")
            told = step
        take(entry.name, _dequantised(data, entry, dequantize))
        _drop_pages(data, entry.offset, entry.n_bytes)
    return total


def _dequantised(data: np.memmap, entry: TensorEntry, dequantize) -> np.ndarray:
    """One tensor as a fresh, writable float32 array (large ones row chunk by row chunk, identical values:
    every GGUF block lies within one row)."""
    view = tensor_view(data, entry)
    shape = tuple(reversed(entry.dims))
    row = shape[-1] if shape else 1
    if entry.qtype.name in _PLAIN or view.ndim < 2 or int(np.prod(shape)) * 4 <= CHUNK_BYTES:
        weights = dequantize(view, entry.qtype)
        if weights.dtype != np.float32:
            return weights.astype(np.float32)
        if np.shares_memory(weights, data) or not weights.flags.writeable:
            return np.array(weights)  # F32 tensors come back as a view of the read-only map
        return weights
    rows = view.reshape(-1, view.shape[-1])
    out = np.empty(shape, dtype=np.float32)
    flat = out.reshape(-1, row)
    step = max(1, CHUNK_BYTES // (4 * row))
    row_bytes = entry.n_bytes // rows.shape[0]
    for start in range(0, rows.shape[0], step):
        flat[start:start + step] = dequantize(rows[start:start + step], entry.qtype)
        _drop_pages(data, entry.offset + start * row_bytes, min(step, rows.shape[0] - start) * row_bytes)
    return out


def _drop_pages(data: np.memmap, offset: int, length: int) -> None:
    """Drop the file pages of a tensor already read from this process's resident set (MADV_DONTNEED on a
    read-only map: a later access reads the file again)."""
    mapping = getattr(data, "_mmap", None)
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if mapping is None or advice is None or length <= 0:
        return
    start = offset - offset % mmap.PAGESIZE
    try:
        mapping.madvise(advice, start, offset + length - start)
    except (OSError, ValueError):
        pass
