"""A tiny random Llama-family GGUF file written with gguf's own GGUFWriter (llama.cpp's layout: q/k
permuted as convert_hf_to_gguf.py permutes them, a byte-level BPE vocabulary), so the model cache and the
streaming reader can be tested in seconds against transformers' own GGUF load."""

from __future__ import annotations

from pathlib import Path

import numpy as np

D, LAYERS, HEADS, KV_HEADS, FF = 64, 2, 4, 2, 96


def _byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode table: the 256 one-byte tokens of a byte-level BPE vocabulary."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes, strict=True))
    return [chr(table[b]) for b in range(256)]


def _permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k permutation (convert_hf_to_gguf.py LlamaModel.permute), the inverse of the one
    transformers undoes."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = ["<s>", "</s>"] + _byte_tokens() + ["Ġt", "he", "Ġthe"]
    merges = ["Ġ t", "h e", "Ġt he"]
    vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(128)
    writer.add_embedding_length(D)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FF)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3] + [1] * (vocab - 2))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)

    def tensor(name: str, shape: tuple[int, ...], qtype=None, scale: float = 0.05, offset: float = 0.0):
        values = (rng.standard_normal(shape) * scale + offset).astype(np.float32)
        if name.endswith("attn_q.weight"):
            values = _permute(values, HEADS)
        elif name.endswith("attn_k.weight"):
            values = _permute(values, KV_HEADS)
        if qtype is None:
            writer.add_tensor(name, values)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)

    q8, q4 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0
    head_dim = D // HEADS
    tensor("token_embd.weight", (vocab, D), q8, scale=0.5)
    for i in range(LAYERS):
        tensor(f"blk.{i}.attn_norm.weight", (D,), offset=1.0)
        tensor(f"blk.{i}.attn_q.weight", (D, D), q8)
        tensor(f"blk.{i}.attn_k.weight", (KV_HEADS * head_dim, D), q4)
        tensor(f"blk.{i}.attn_v.weight", (KV_HEADS * head_dim, D), gguf.GGMLQuantizationType.F16)
        tensor(f"blk.{i}.attn_output.weight", (D, D), q8)
        tensor(f"blk.{i}.ffn_norm.weight", (D,), offset=1.0)
        tensor(f"blk.{i}.ffn_gate.weight", (FF, D), q8)
        tensor(f"blk.{i}.ffn_up.weight", (FF, D), q4)
        tensor(f"blk.{i}.ffn_down.weight", (D, FF), q8)
    tensor("output_norm.weight", (D,), offset=1.0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
