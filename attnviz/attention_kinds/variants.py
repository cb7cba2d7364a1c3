"""MHA, GQA and MQA side by side, measured: parameters, the bytes a KV cache really holds after
decoding N tokens, and the time of one decoding step at a few cache lengths.

Each variant is a stack of `n_layers` attention layers (`MultiHeadAttention`, pre-norm residual, no
MLP: the MLP is the same in all three and would only dilute the difference) with the same d_model and
query heads; only the number of key/value heads differs (H, g, 1). Inputs are random vectors standing for
token embeddings, and no positions are added: neither changes what is stored or how long a step takes.
The cache is `attnviz.transformer.kv_cache`'s, grown with `torch.cat` as HF's DynamicCache, so its `nbytes` is what
the tensors hold, set beside the formula 2 * layers * N * K * head_dim * bytes per element.

Timing: for each cache length the three caches are filled, then decoding steps of the three are
interleaved (the order rotating every round; a few untimed rounds first) and the median per variant is
reported, so that a slower or busier moment of the machine falls on all three alike. After each step
the cache is cut back to its length, so every step appends to a cache of exactly that many positions.

What the times show is this kernel's: it reads each of GQA's KV heads once for its group of query heads (a
grouped matmul; HF's eager attention copies them out with `repeat_kv`, as much memory traffic as MHA's cache),
and MQA's single head is broadcast without a copy. So both GQA's and MQA's steps get cheaper than MHA's as the
cache grows.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.kv_cache import KVCache

# Who uses which variant, as published in each model's paper or configuration: (model, query heads,
# KV heads), sizes separated by " / " where one name covers several.
NAMED_MODELS = {
    "MHA": [
        ("Transformer (Vaswani et al. 2017), base / big", "8 / 16", "8 / 16"),
        ("BERT-base / BERT-large", "12 / 16", "12 / 16"),
        ("GPT-2 (small to XL)", "12 - 25", "12 - 25"),
        ("Llama 2 7B / 13B", "32 / 40", "32 / 40"),
    ],
    "MQA": [
        ("PaLM 540B (Chowdhery et al. 2022)", "48", "1"),
        ("Falcon-7B", "71", "1"),  # Falcon-40B and 180B use 8 KV heads
    ],
    "GQA": [
        ("Llama 2 70B", "64", "8"),
        ("Llama 3 8B / 70B", "32 / 64", "8"),
        ("Mistral 7B", "32", "8"),
        ("Qwen2-7B", "28", "4"),
        ("SmolLM2-135M", "9", "3"),
    ],
    # MLA (attnviz.attention_kinds.latent_kv): no KV heads are cached but one latent and one rotary key per token,
    # shared by every head; the "KV heads" column gives their widths (config.json of each checkpoint).
    "MLA": [
        ("DeepSeek-V2 (DeepSeek-AI 2024), V2-Lite", "128 / 16", "latent 512 + rotary key 64"),
        ("DeepSeek-V3 / R1", "128", "latent 512 + rotary key 64"),
        ("Kimi K2 (Moonshot AI 2025)", "64", "latent 512 + rotary key 64"),
    ],
}
# Gemini's architecture is not published, so it is named under no variant; Gemma, its open sibling,
# documents its own: MQA in Gemma 2B, MHA in Gemma 7B (Gemma report, 2024).
UNPUBLISHED = "Gemini: architecture not published (Gemma 2B, its open sibling, uses MQA; Gemma 7B MHA)"

VARIANTS = ("MHA", "GQA", "MQA")


@dataclass
class VariantResult:
    name: str  # MHA, GQA, MQA
    n_kv_heads: int
    parameters: int
    cache_elements: int  # after decoding n_tokens, summed over layers, keys and values
    cache_bytes: int  # LayerCache.nbytes summed: what the tensors hold
    formula_bytes: int  # 2 * layers * N * K * head_dim * element size
    formula_ratio: float  # K / H: the formula's share of MHA's cache
    measured_ratio: float  # cache_bytes / MHA's cache_bytes
    ms_per_token: dict[int, float] = field(default_factory=dict)  # cache length -> median ms of one step


@dataclass
class Comparison:
    d_model: int
    n_heads: int
    n_groups: int
    n_layers: int
    n_tokens: int
    lengths: tuple[int, ...]
    repeats: int
    dtype: str
    threads: int
    rows: list[VariantResult]


def kv_heads_of(n_heads: int, n_groups: int) -> dict[str, int]:
    """The KV heads of each variant: MHA H, GQA g, MQA 1."""
    if n_heads < 1 or n_groups < 1 or n_heads % n_groups:
        raise ValueError(f"groups ({n_groups}) must divide the heads ({n_heads})")
    return {"MHA": n_heads, "GQA": n_groups, "MQA": 1}


class AttentionStack(nn.Module):
    """`n_layers` pre-norm residual attention layers: x + attn(norm(x)), one KV cache entry per layer."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, n_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, n_heads, n_kv_heads) for _ in range(n_layers))

    def forward(self, x: torch.Tensor, cache: KVCache, causal: bool = False) -> torch.Tensor:
        """x [B, T, C], the new positions; a causal mask only where T > 1 (a prefill)."""
        t, past = x.shape[1], cache.length
        mask = None
        if causal and t > 1:
            mask = torch.ones(t, past + t, dtype=torch.bool, device=x.device).tril(past)  # T, S
        for layer, attn in enumerate(self.layers):
            out, _ = attn(F.layer_norm(x, x.shape[-1:]), mask, cache=cache[layer])
            x = x + out
        return x


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def build_stacks(d_model: int, n_heads: int, n_groups: int, n_layers: int, dtype=torch.float32,
                 seed: int = 0) -> dict[str, AttentionStack]:
    kv = kv_heads_of(n_heads, n_groups)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by the heads ({n_heads})")
    stacks = {}
    for name in VARIANTS:
        torch.manual_seed(seed)
        stacks[name] = AttentionStack(d_model, n_heads, kv[name], n_layers).to(dtype).eval()
    return stacks


def parameter_counts(d_model: int, n_heads: int, n_groups: int, n_layers: int) -> dict[str, int]:
    """Each variant's parameters, counted on a stack built on the meta device (no memory, no init)."""
    kv = kv_heads_of(n_heads, n_groups)
    with torch.device("meta"):
        return {name: count_parameters(AttentionStack(d_model, n_heads, kv[name], n_layers)) for name in VARIANTS}


@torch.inference_mode()
def decode(stack: AttentionStack, inputs: torch.Tensor) -> KVCache:
    """Feed inputs [1, N, C] one position at a time, as decoding does; returns the filled cache."""
    cache = KVCache(len(stack.layers))
    for i in range(inputs.shape[1]):
        stack(inputs[:, i:i + 1], cache)
    return cache


def prefill(stack: AttentionStack, prompt: torch.Tensor) -> KVCache:
    """A cache of S positions for timing: every layer's keys and values projected from the same prompt
    [1, S, C] (not what a real pass would give from layer 1 on; what a step costs does not depend on the
    cached numbers), skipping the S x S attention a real prefill computes."""
    cache = KVCache(len(stack.layers))
    x = F.layer_norm(prompt, prompt.shape[-1:])
    for layer, attn in enumerate(stack.layers):
        cache[layer].append(*attn.project_kv(x))
    return cache


def _truncate(cache: KVCache, length: int) -> None:
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys[:, :, :length], layer.values[:, :, :length]


@torch.inference_mode()
def step_times(stacks: dict[str, AttentionStack], d_model: int, lengths, repeats: int, dtype=torch.float32,
               seed: int = 0, progress=None, done: int = 0, total: int = 0) -> dict[str, dict[int, float]]:
    """Median milliseconds of one decoding step (one new token through every layer, appended to a cache
    of `length` positions), interleaved across the variants."""
    gen = torch.Generator().manual_seed(seed)
    names = list(stacks)
    times: dict[str, dict[int, float]] = {name: {} for name in names}
    for length in lengths:
        prompt = torch.randn(1, length, d_model, generator=gen).to(dtype)
        token = torch.randn(1, 1, d_model, generator=gen).to(dtype)
        caches = {name: prefill(stacks[name], prompt) for name in names}
        samples: dict[str, list[float]] = {name: [] for name in names}
        warm_up = max(2, repeats // 5)  # untimed rounds: the allocator and caches settle at each new length
        for r in range(warm_up + repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                start = time.perf_counter()
                stacks[name](token, caches[name])
                if r >= warm_up:
                    samples[name].append((time.perf_counter() - start) * 1e3)
                _truncate(caches[name], length)
        for name in names:
            times[name][length] = statistics.median(samples[name])
        done += 1
        if progress is not None:
            progress(done, total)
    return times


def compare(d_model: int = 512, n_heads: int = 8, n_groups: int = 2, n_layers: int = 6, n_tokens: int = 256,
            lengths=(64, 256, 1024), repeats: int = 30, dtype=torch.float32, seed: int = 0,
            progress=None) -> Comparison:
    """Build the three stacks, decode `n_tokens` with each and measure the cache, then time decoding
    steps at each cache length. `progress(done, total)` is told after each stage."""
    if n_tokens < 1 or n_layers < 1 or repeats < 1 or not lengths or min(lengths) < 1:
        raise ValueError("n_tokens, n_layers, repeats and every cache length must be positive")
    stacks = build_stacks(d_model, n_heads, n_groups, n_layers, dtype, seed)
    total = len(VARIANTS) + len(lengths)
    inputs = torch.randn(1, n_tokens, d_model, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
    element = torch.empty((), dtype=dtype).element_size()
    head_dim = d_model // n_heads
    rows = []
    for done, (name, stack) in enumerate(stacks.items(), 1):
        cache = decode(stack, inputs)
        k = stack.layers[0].n_kv_heads
        rows.append(VariantResult(
            name=name, n_kv_heads=k, parameters=count_parameters(stack), cache_elements=cache.numel,
            cache_bytes=cache.nbytes, formula_bytes=2 * n_layers * n_tokens * k * head_dim * element,
            formula_ratio=k / n_heads, measured_ratio=0.0))
        del cache
        if progress is not None:
            progress(done, total)
    for row in rows:
        row.measured_ratio = row.cache_bytes / rows[0].cache_bytes
    times = step_times(stacks, d_model, tuple(lengths), repeats, dtype, seed, progress, len(VARIANTS), total)
    for row in rows:
        row.ms_per_token = times[row.name]
    return Comparison(d_model, n_heads, n_groups, n_layers, n_tokens, tuple(lengths), repeats,
                      str(dtype).removeprefix("torch."), torch.get_num_threads(), rows)


def peak_bytes(d_model: int, n_heads: int, n_layers: int, n_tokens: int, lengths, element: int = 4) -> int:
    """An upper bound of what `compare` holds at once, for reserve(): three stacks' weights (at most
    MHA's 4 C^2 + 4 C a layer each) and three caches at the longest length, each at most MHA's and held
    twice while `torch.cat` copies it. No S x S attention matrix: caches are filled by `prefill`."""
    weights = 3 * n_layers * (4 * d_model * d_model + 4 * d_model)
    longest = max(n_tokens, max(lengths) + 1)
    cache = 2 * n_layers * longest * d_model  # MHA: K = H, so K * head_dim = d_model
    return (weights + 3 * 2 * cache) * element


def format_table(result: Comparison) -> str:
    """A plain-text table of a comparison (the benchmark's output)."""
    lengths = result.lengths
    head = (f"{'variant':8} {'KV heads':>8} {'parameters':>11} {'cache bytes':>12} {'formula bytes':>13} "
            f"{'measured/MHA':>12} {'formula/MHA':>11} " + " ".join(f"{f'ms@{n}':>9}" for n in lengths))
    lines = [head, "-" * len(head)]
    for row in result.rows:
        lines.append(
            f"{row.name:8} {row.n_kv_heads:>8} {row.parameters:>11,} {row.cache_bytes:>12,} {row.formula_bytes:>13,} "
            f"{row.measured_ratio:>12.4f} {row.formula_ratio:>11.4f} "
            + " ".join(f"{row.ms_per_token[n]:>9.3f}" for n in lengths))
    return "\n".join(lines)
