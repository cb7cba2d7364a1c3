"""Shared fixtures. A missing model package or data folder FAILS the test (never a silent skip)."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnviz
from attnviz.loading.offline import install_hint, offline_path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"


def require_offline(model_id: str) -> Path:
    path = offline_path(model_id)
    if path is None:
        pytest.fail(f"model fixture {model_id} is not installed: {install_hint(model_id)}")
    return path


def require_data(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.fail(f"shared data {path} is missing")
    return path


@pytest.fixture(scope="session")
def minilm():
    require_offline(MINILM)
    return attnviz.load(MINILM)


@pytest.fixture(scope="session")
def smollm():
    require_offline(SMOLLM)
    return attnviz.load(SMOLLM)
