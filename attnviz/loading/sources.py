"""What a model source string names: a local folder or .gguf file, or a model id on the hub."""

from __future__ import annotations

import os

from attnviz.loading.offline import offline_path


def resolve_source(source: str) -> str:
    """A hub id that ships in an installed package loads from there (no network needed)."""
    local = offline_path(source)
    return str(local) if local is not None else source


def is_local_path(source: str) -> bool:
    """A folder or .gguf file on disk, or text written as a path. Anything else is a hub id, and hub
    ids may contain dots (Qwen/Qwen2.5-0.5B), so a suffix alone does not make a path."""
    return (source.endswith(".gguf") or source.startswith((".", "/", "~"))
            or os.path.exists(os.path.expanduser(source)))
