"""The supported-architectures table and the refusal of unknown architectures."""

from __future__ import annotations

import pytest
import transformers as tf

import attnviz
from attnviz.loading.families import FAMILIES, families_by_type, markdown_table
from attnviz.loading.registry import CONVERTERS, UnsupportedArchitecture
from tests.conftest import ROOT


def test_every_converter_has_a_family_and_every_family_a_converter():
    assert sorted(families_by_type()) == sorted(CONVERTERS)
    assert len({t for f in FAMILIES for t in f.model_types}) == sum(len(f.model_types) for f in FAMILIES)


@pytest.mark.parametrize("document", ["README.md", "docs/models.md"])
def test_the_documents_carry_the_current_table(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    assert markdown_table() in text, f"{document}: run .venv/bin/python scripts/families_table.py"


def test_an_unsupported_architecture_is_refused_before_any_weight_is_read(tmp_path, monkeypatch):
    """A model type transformers knows but we do not convert: the error lists our families, and the
    weights file is never opened (safetensors' loader would raise if it were)."""
    config = tf.MambaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1)
    (tmp_path / "config.json").write_text(config.to_json_string())
    (tmp_path / "model.safetensors").write_bytes(b"not read")
    import safetensors.torch

    def never(*args, **kwargs):
        raise AssertionError("a weight file was read")

    monkeypatch.setattr(safetensors.torch, "load_file", never)
    with pytest.raises(UnsupportedArchitecture, match="unsupported architecture 'mamba'.*Llama, Mistral, Qwen2"):
        attnviz.load(str(tmp_path), memory_limit=10**12)
