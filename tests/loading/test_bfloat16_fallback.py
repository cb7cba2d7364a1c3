"""A hub model whose float32 load does not fit the memory budget loads in bfloat16 where that fits
(workbench/shelf.py, size.load_bytes per dtype); a local model never changes dtype."""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from attnviz.loading import hf
from attnviz.workbench import OverBudget, Workbench, shelf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

MB = 1_000_000
HUB_ID = "someone/tiny-llama-bf16"


@pytest.fixture
def hub_folder(tmp_path, monkeypatch):
    """A tiny Llama saved as the hub would hold it (bfloat16 safetensors), 'downloaded' from a folder."""
    tokenizer = bpe_tokenizer(bos=True)
    config = tf.LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=256, intermediate_size=512,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=128, dtype="bfloat16")
    torch.manual_seed(0)
    tf.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>").save_pretrained(tmp_path)
    monkeypatch.setattr(hf, "_download", lambda repo_id, progress: tmp_path)
    real_read_config = hf.read_config
    monkeypatch.setattr(hf, "read_config", lambda source: real_read_config(tmp_path))
    monkeypatch.setattr(shelf, "HUB_LOAD_OVERHEAD", 0)
    shelf.hub_load_bytes.cache_clear()
    yield tmp_path
    shelf.hub_load_bytes.cache_clear()


def _bench(budget_over_rss: int) -> Workbench:
    bench = Workbench(budget=1_000 * MB + budget_over_rss)
    bench.rss = lambda: 1_000 * MB
    return bench


def test_a_hub_model_too_large_in_float32_loads_in_bfloat16(hub_folder):
    source = shelf.check_source(HUB_ID)
    need32, need16 = shelf.source_load_bytes(source), shelf.source_load_bytes(source, torch.bfloat16)
    assert need16 * 3 == need32  # bfloat16 checkpoint: 2 bytes a parameter, float32 adds a 4-byte cast
    stages = []
    model = shelf.load_model(_bench((need16 + need32) // 2), source, progress=stages.append)
    assert model.info.dtype == "bfloat16" and shelf.BFLOAT16_STAGE in stages
    roomy = shelf.load_model(_bench(2 * need32), source)
    assert roomy.info.dtype == "float32"
    text = "The keys to the cabinet are on the table."
    difference = abs(model.run(text).attentions - roomy.run(text).attentions).max()
    assert 0 < difference < 2e-2  # what the parity badge then shows: bfloat16's own rounding
    with pytest.raises(OverBudget):
        shelf.load_model(_bench(need16 // 2), source)


def test_a_local_model_is_never_loaded_in_another_dtype(hub_folder, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(hub_folder))
    source = shelf.check_source(str(hub_folder))
    assert not source.from_hub
    with pytest.raises((OverBudget, ValueError)):
        shelf.load_model(_bench(shelf.source_load_bytes(source) // 2), source)
