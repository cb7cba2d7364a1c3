"""Models split by accelerate (attnviz.loading.split): `attnviz.load(..., device_map=, max_memory=, offload_folder=)`.

The reference is the same model loaded whole: a split moves weights, never numbers, so attentions, hidden
states, recorded tensors and next-token predictions must agree within 1e-6 (on one CPU they are equal).
Two subjects: a tiny random Llama saved as a safetensors folder (seconds), and SmolLM2-135M from the
offline GGUF, split across the CPU and disk with a small max_memory.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import attnviz
from attnviz.loading import ModelTooLarge, build_module, split
from attnviz.loading.split import normalize_device_map
from tests.conftest import SMOLLM, require_offline
from tests.helpers.tiny_hf import DECODERS, ENCODERS, batch, block_bytes, gpt_oss, hf_model, mixtral, phi3

TOL = 1e-6
TEXTS = ["The keys to the cabinet are on the table.", "The cat sat on the mat, and the dog watched."]
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


def assert_same_runs(split, whole, texts=TEXTS):
    for text in texts:
        a, b = split.run(text), whole.run(text)
        assert a.tokens == b.tokens
        assert np.abs(a.attentions - b.attentions).max() <= TOL
        assert np.abs(a.hidden - b.hidden).max() <= TOL
    padded = zip(split.run_batch(texts), whole.run_batch(texts))  # right padding, one forward pass
    assert all(np.abs(a.attentions - b.attentions).max() <= TOL for a, b in padded)


def assert_offload_folder_holds_memmaps(root: Path, disk_modules: list[str]):
    """accelerate's format: one raw .dat memmap per tensor and an index.json of dtypes and shapes; no pickles."""
    (folder,) = list(root.iterdir())  # one fresh folder for this load
    files = sorted(p.name for p in folder.iterdir())
    assert "index.json" in files and not any(name.endswith(PICKLE_SUFFIXES) for name in files)
    index = json.loads((folder / "index.json").read_text())
    assert set(files) == {"index.json"} | {f"{name}.dat" for name in index}
    assert all(any(name.startswith(m + ".") for m in disk_modules) for name in index)
    for name, info in index.items():
        data = (folder / f"{name}.dat").read_bytes()
        assert len(data) == np.prod(info["shape"]) * np.dtype(info["dtype"]).itemsize  # raw numbers, no header
    return folder


def test_device_map_takes_from_pretrained_values():
    for name in ("auto", "balanced", "balanced_low_0", "sequential"):
        assert normalize_device_map(name) == name
    assert normalize_device_map("cpu") == {"": torch.device("cpu")}
    assert normalize_device_map(torch.device("cpu")) == {"": torch.device("cpu")}
    assert normalize_device_map(1) == {"": 1}
    assert normalize_device_map({"blocks": "disk", "": "cpu"}) == {"blocks": "disk", "": "cpu"}
    for bad in (-1, "nowhere", {}, True, 1.5):
        with pytest.raises(ValueError):
            normalize_device_map(bad)


FAMILIES = {**ENCODERS, **DECODERS, "phi4-mini-partial": phi3(partial=0.75, tie_word_embeddings=True),
            "mixtral-window": mixtral(sliding_window=4), "gpt-oss": gpt_oss()}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@torch.inference_mode()
def test_every_family_split_with_a_block_on_disk_equals_the_whole(family, tmp_path):
    """The module level, on every tiny family of the parity tests (experts, learned sinks, partial rotary
    included): block 1 offloaded to disk, the rest on the CPU; the padded batch's attentions and hidden
    states equal the whole module's."""
    reference = hf_model(FAMILIES[family])
    config, weights = reference.config.to_dict(), reference.state_dict()
    whole = build_module(config, dict(weights)).eval()
    device_map = {name: "cpu" for name, _ in whole.named_children() if name != "blocks"}
    device_map |= {f"blocks.{i}": "disk" if i == 1 else "cpu" for i in range(len(whole.blocks))}
    module = split.materialize(split.plan(config, device_map, None, tmp_path, torch.float32), config, dict(weights))
    assert module.hf_device_map == device_map and all(p.is_meta for p in module.blocks[1].parameters())
    ids, mask, types = batch(whole.config.pad_token_id or 0, pair=family == "bert")
    types = None if whole.config.causal else types
    a, b = module(ids, mask, types, with_logits=False), whole(ids, mask, types, with_logits=False)
    assert (a.attentions - b.attentions).abs().max() <= TOL and (a.hidden - b.hidden).abs().max() <= TOL


def test_tiny_llama_split_across_cpu_and_disk_equals_the_whole(tiny_llama, tmp_path):
    whole = attnviz.load(str(tiny_llama))
    cpu = 4 * block_bytes(whole)  # the embedding and one block fit next to the reserve for one offloaded layer
    split = attnviz.load(str(tiny_llama), device_map="auto", max_memory={"cpu": cpu, "disk": "10MB"},
                         offload_folder=tmp_path)
    device_map = split.module.hf_device_map
    on_disk = [name for name, device in device_map.items() if device == "disk"]
    assert set(device_map.values()) == {"cpu", "disk"} and any(name.startswith("blocks.") for name in on_disk)
    assert all(p.is_meta for name in on_disk for p in split.module.get_submodule(name).parameters())
    assert split.info.device == "cpu" and split.info.n_parameters == whole.info.n_parameters
    assert_same_runs(split, whole)
    text = TEXTS[0]
    for name, array in split.record(text, names=("queries", "keys", "value_norms")).items():
        assert np.abs(array - whole.record(text, names=(name,))[name]).max() <= TOL, name
    trace = split.run(text)
    assert [t for t, _, _ in split.next_tokens(trace, 3)] == [t for t, _, _ in whole.next_tokens(whole.run(text), 3)]
    folder = assert_offload_folder_holds_memmaps(tmp_path, on_disk)
    del split, trace
    gc.collect()
    assert not folder.exists()  # the offloaded weights go with the model


def test_tiny_llama_with_a_dict_and_a_device_name(tiny_llama, tmp_path):
    whole = attnviz.load(str(tiny_llama))
    device_map = {"token_embedding": "cpu", "blocks.0": "cpu", "blocks.1": "disk", "blocks.2": "cpu",
                  "blocks.3": "disk", "final_norm": "disk", "lm_head": "cpu"}
    split = attnviz.load(str(tiny_llama), device_map=device_map, offload_folder=tmp_path)
    assert split.module.hf_device_map == device_map
    assert_same_runs(split, whole)
    assert_offload_folder_holds_memmaps(tmp_path, ["blocks.1", "blocks.3", "final_norm"])
    one = attnviz.load(str(tiny_llama), device_map="cpu")
    assert one.module.hf_device_map == {"": torch.device("cpu")} and not any(p.is_meta for p in one.module.parameters())
    assert_same_runs(one, whole, TEXTS[:1])


def test_size_check_admits_what_fits_once_split_and_refuses_what_fits_nowhere(tiny_llama, tmp_path):
    stages = []
    whole_bytes = attnviz.load(str(tiny_llama)).info.n_parameters * 4
    with pytest.raises(ModelTooLarge, match="offload_folder") as nowhere:  # no disk, and the CPU is too small
        attnviz.load(str(tiny_llama), device_map="auto", max_memory={"cpu": whole_bytes // 4}, progress=stages.append)
    assert "reading weights" not in stages  # refused from the config and the safetensors header alone
    assert "cpu 0.00 GB" in str(nowhere.value) and "all the devices" in str(nowhere.value)
    with pytest.raises(ModelTooLarge, match="disk"):  # disk allowed, but too little of it
        attnviz.load(str(tiny_llama), device_map="auto", max_memory={"cpu": whole_bytes // 4, "disk": 1000},
                     offload_folder=tmp_path)
    # The plain load's peak is the checkpoint alone (its tensors become the module's parameters, no cast):
    # refused below it, admitted above it; the split holds the checkpoint beside its CPU part.
    with pytest.raises(ModelTooLarge):
        attnviz.load(str(tiny_llama), memory_limit=int(0.9 * whole_bytes))
    limit = int(1.6 * whole_bytes)
    assert attnviz.load(str(tiny_llama), memory_limit=limit).info.n_parameters * 4 == whole_bytes
    split = attnviz.load(str(tiny_llama), memory_limit=limit, device_map="auto",
                         max_memory={"cpu": whole_bytes // 2, "disk": "10MB"}, offload_folder=tmp_path)
    assert "disk" in split.module.hf_device_map.values()


def test_bad_combinations_are_refused(tiny_llama, tmp_path):
    with pytest.raises(ValueError, match="device_map"):
        attnviz.load(str(tiny_llama), max_memory={"cpu": "1GB"})
    with pytest.raises(ValueError, match="device_map"):
        attnviz.load(str(tiny_llama), offload_folder=tmp_path)
    with pytest.raises(ValueError, match="either device or device_map"):
        attnviz.load(str(tiny_llama), device="cpu", device_map="auto")
    with pytest.raises(ValueError, match="does not give any device"):
        attnviz.load(str(tiny_llama), device_map={"token_embedding": "cpu"})


@pytest.mark.slow
def test_smollm2_split_across_cpu_and_disk_equals_the_unsplit_model(smollm, tmp_path):
    """The real model: 300 MB of CPU for about 540 MB of float32 weights, the rest offloaded to disk. (A split
    load still reads the checkpoint whole, so since the plain load takes the checkpoint's tensors as its own
    parameters, a split saves no host memory while loading: only after it.)"""
    require_offline(SMOLLM)
    split = attnviz.load(SMOLLM, device_map="auto",
                         max_memory={"cpu": "300MB", "disk": "2GB"}, offload_folder=tmp_path)
    device_map = split.module.hf_device_map
    on_disk = [name for name, device in device_map.items() if device == "disk"]
    assert device_map["token_embedding"] == "cpu" and len([n for n in on_disk if n.startswith("blocks.")]) >= 10
    texts = TEXTS + ["小明告诉老师他生病了。"]
    assert_same_runs(split, smollm, texts)
    for name, array in split.record(texts[0], names=("queries", "value_norms")).items():
        assert np.abs(array - smollm.record(texts[0], names=(name,))[name]).max() <= TOL, name
    assert_offload_folder_holds_memmaps(tmp_path, on_disk)
