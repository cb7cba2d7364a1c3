"""Loading refuses what it cannot do faithfully, with messages that say what went wrong."""

from __future__ import annotations

import pytest
import torch
import transformers as tf

import attnviz
from attnviz.loading import build_module


def tiny_bert():
    return tf.BertModel(tf.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=20))


def test_unsupported_architecture_lists_supported():
    config = tf.FalconConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, vocab_size=50).to_dict()
    with pytest.raises(ValueError, match="unsupported architecture 'falcon'.*bert.*gpt2.*llama"):
        build_module(config, {})


def test_leftover_checkpoint_key_is_an_error():
    model = tiny_bert()
    state = dict(model.state_dict(), **{"encoder.layer.0.mystery.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match="not consumed.*mystery"):
        build_module(model.config.to_dict(), state)


def test_missing_key_and_wrong_shape_are_errors():
    model = tiny_bert()
    state = dict(model.state_dict())
    del state["encoder.layer.0.attention.self.key.bias"]
    with pytest.raises(ValueError, match="key.bias"):
        build_module(model.config.to_dict(), state)
    state = dict(model.state_dict())
    state["encoder.layer.0.attention.self.key.bias"] = torch.zeros(7)
    with pytest.raises(ValueError, match="shape mismatch"):
        build_module(model.config.to_dict(), state)


def test_unknown_rope_type_is_a_clear_error():
    config = tf.LlamaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=20).to_dict()
    config["rope_parameters"] = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    with pytest.raises(ValueError, match="rope_type 'dynamic' is not implemented"):
        build_module(config, {})


def test_pickled_weights_are_never_loaded(tmp_path):
    model = tiny_bert()
    (tmp_path / "config.json").write_text(model.config.to_json_string())
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # a pickle, as old checkpoints ship
    with pytest.raises(ValueError, match="no .safetensors weights.*pytorch_model.bin.*never loaded"):
        attnviz.load(str(tmp_path))


def test_unknown_paths_and_ids_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="GGUF"):
        attnviz.load(str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="neither a model directory"):
        attnviz.load("./no/such/dir")
    with pytest.raises(OSError, match="could not download 'nobody/no-such-model-xyz'"):
        attnviz.load("nobody/no-such-model-xyz")
    with pytest.raises(ValueError, match="give a model"):
        attnviz.load("  ")


@pytest.mark.parametrize("device, said", [("meta", "'meta' holds tensors' shapes and no numbers"),
                                          ("cuda:9", "no device 'cuda:9'"),
                                          ("gpu", "'gpu' is not a device")])
def test_a_device_the_machine_does_not_have_is_refused_before_anything_is_read(device, said, tmp_path):
    """The check comes before the source is even looked up: a folder that does not exist is not the error."""
    if device == "cuda:9" and torch.cuda.device_count() > 9:
        pytest.skip("this machine has ten GPUs")
    with pytest.raises(ValueError, match=said):
        attnviz.load(str(tmp_path / "no-such-model"), device=device)
