"""The Learn page's "how position enters attention": for each positional scheme, the position-only part of
one head's pre-softmax score as a T x T matrix (query i, key j), computed with our own modules:

- sinusoidal (Marian): p_i . p_j / sqrt(d) of the fixed sinusoid table (transformer/seq2seq.py);
- learned (BERT, GPT-2): cos(P_i, P_j) of a model's learned position embeddings: the dot product is drowned
  by position 0, whose vector is several times longer than the rest (MiniLM: 2.4 against 0.45), so it
  showed one bright cell and not how alike nearby positions are;
- rotary (Llama, SmolLM2): (R_i v) . (R_j v) / sqrt(D), one vector v at every position, rotated;
- relative buckets (T5): one head's learned bias b_h(bucket(j - i)) (transformer/relative.py);
- disentangled (DeBERTa): one token repeated at every position through layer 0, so the content-to-content
  term is the same in every cell and what varies is c2p + p2c (shown minus its mean);
- ALiBi (BLOOM): slope_h * j on the keys a causal query sees (transformer/alibi.py).

A scheme's numbers come from a real model where one is loaded (the visitor's model on the Learn page, or a
model another page loaded), else from a fixed function of the real model's settings (sinusoids, rotary,
ALiBi: the same numbers as the real model) or from a tiny untrained model built from transformers' default
config of the family (learned, buckets, DeBERTa: random numbers, labelled so). Each panel is computed once
per process and shared through the views store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.loading.registry import CONVERTERS
from attnviz.transformer.alibi import alibi_slopes
from attnviz.transformer.record import Recorder
from attnviz.transformer.rope import apply_rotary, inverse_frequencies, rotary_cos_sin
from attnviz.transformer.seq2seq import sinusoidal_positions
from attnviz.workbench import shelf
from attnviz.workbench.shared import Workbench

SCHEMES = ("sinusoidal", "learned", "rotary", "relative", "disentangled", "alibi")
MIN_POSITIONS, MAX_POSITIONS = 2, 24
# Real checkpoints a panel uses when some page has loaded them (on the host, with the hub), in this order.
REAL_MODELS = {
    "learned": ("bert-base-uncased", "sentence-transformers/all-MiniLM-L6-v2", "gpt2", "roberta-base"),
    "relative": ("google-t5/t5-small", "google/flan-t5-small"),
    "disentangled": ("microsoft/deberta-v3-base", "microsoft/deberta-v3-small"),
}
DEBERTA_TYPE = "deberta-v2"  # DeBERTa v2 and v3 (the encoders issue's family)
MARIAN_WIDTH, ROTARY = 512, {"theta": 10000.0, "head_dim": 64}  # opus-mt; Llama's base and SmolLM2's head width
BLOOM_HEADS = 16  # bigscience/bloom-560m
# Tiny sizes of the untrained stand-ins (transformers' default config of the family, shrunk).
TINY = {"hidden_size": 64, "d_model": 64, "num_hidden_layers": 1, "num_layers": 1, "num_decoder_layers": 1,
        "intermediate_size": 128, "d_ff": 128, "vocab_size": 128, "num_attention_heads": 8, "num_heads": 8,
        "d_kv": 8}
# transformers' DebertaV2Config defaults to absolute positions without relative attention; v3's settings:
DEBERTA_V3 = {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "position_biased_input": False,
              "position_buckets": 256, "max_relative_positions": -1, "norm_rel_ebd": "layer_norm",
              "share_att_key": True}


@dataclass(frozen=True)
class PositionPanel:
    scheme: str
    model: str  # whose numbers: a loaded model's name, or a description of the stand-in
    source: str  # "loaded" (a real model), "exact" (a fixed function of the real settings), "untrained", "absent"
    n_heads: int
    matrix: np.ndarray | None  # [T, T] float32, NaN where a causal query may not look; None when absent

    @property
    def nbytes(self) -> int:
        return 0 if self.matrix is None else self.matrix.nbytes


def n_positions(n_words: int) -> int:
    return max(MIN_POSITIONS, min(MAX_POSITIONS, n_words))


def panel(bench: Workbench, scheme: str, t: int, head: int, model=None, model_name: str | None = None) -> PositionPanel:
    """One scheme's panel for T = t positions and head `head` (taken modulo the model's heads). `model` is the
    visitor's loaded model (LoadedModel), used where its positions are of this scheme."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown positional scheme {scheme!r}; one of {SCHEMES}")
    t = n_positions(t)
    if model is None or _scheme_of(model) != scheme:
        # a real model of this scheme that some page loaded, if any (in the key: it may be loaded later)
        model, model_name = _real(bench, scheme)
    key = ("learn_positions", scheme, t, head, model_name)
    return bench.shared_value(key, lambda: _compute(bench, scheme, t, head, model, model_name),
                              lambda p: p.nbytes + 512)


def _scheme_of(model) -> str | None:
    """The positional scheme of a loaded decoder/encoder (LoadedModel) model."""
    module, config = getattr(model, "module", None), getattr(model, "config", None)
    if module is None or config is None:
        return None
    if getattr(config, "alibi", False):
        return "alibi"
    if getattr(module, "position_embedding", None) is not None:
        return "learned"
    if getattr(module, "inv_freq", None) is not None:
        return "rotary"
    if str(getattr(model.info, "model_type", "")).startswith("deberta"):
        return "disentangled"
    return None


def _compute(bench, scheme, t, head, model, name) -> PositionPanel:
    return {"sinusoidal": _sinusoidal, "learned": _learned, "rotary": _rotary, "relative": _relative,
            "disentangled": _disentangled, "alibi": _alibi}[scheme](bench, t, head, model, name)


def _gram(table: torch.Tensor) -> np.ndarray:
    p = table.detach().float()
    return (p @ p.T / math.sqrt(p.shape[-1])).numpy().astype(np.float32)


def _cosine(table: torch.Tensor) -> np.ndarray:
    p = table.detach().float()
    p = p / p.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (p @ p.T).numpy().astype(np.float32)


def _sinusoidal(bench, t, head, model, name) -> PositionPanel:
    return PositionPanel("sinusoidal", f"Marian opus-mt, d_model {MARIAN_WIDTH}", "exact", 1,
                         _gram(sinusoidal_positions(t, MARIAN_WIDTH)))


def _learned(bench, t, head, model, name) -> PositionPanel:
    if model is not None:
        table = model.module.position_embedding.weight
        offset = model.config.position_offset  # RoBERTa's first real position is padding_idx + 1
        return PositionPanel("learned", name, "loaded", model.config.n_heads, _cosine(table[offset:offset + t]))
    module = _tiny("bert")
    return PositionPanel("learned", "BERT", "untrained", module.config.n_heads,
                         _cosine(module.position_embedding.weight[:t]))


def _rotary(bench, t, head, model, name) -> PositionPanel:
    if model is not None:
        inv_freq, source, label = model.module.inv_freq.float().cpu(), "loaded", name
    else:
        inv_freq = inverse_frequencies(ROTARY["head_dim"], ROTARY["theta"])
        source, label = "exact", f"Llama, θ {ROTARY['theta']:g}, head_dim {ROTARY['head_dim']}"
    dim = 2 * inv_freq.shape[0]
    v = torch.randn(dim, generator=torch.Generator().manual_seed(head))  # one vector, at every position
    cos, sin = rotary_cos_sin(inv_freq, torch.arange(t)[None], torch.float32)  # 1, T, D
    rotated = apply_rotary(v.expand(1, 1, t, dim), cos, sin)[0, 0]  # T, D
    scores = (rotated @ rotated.T / math.sqrt(dim)).numpy().astype(np.float32)
    n_heads = model.config.n_heads if model is not None else 1  # one vector: the same for every head
    return PositionPanel("rotary", label, source, n_heads, scores)


def _relative(bench, t, head, model, name) -> PositionPanel:
    module = model.module if model is not None else _tiny("t5")
    h = head % module.config.n_heads
    with torch.no_grad():
        bias = module.position_bias("encoder", t, t)[0, h].float().cpu().numpy()
    label = name if model is not None else "T5 (t5-small: 32 buckets, max_distance 128)"
    return PositionPanel("relative", label, "loaded" if model is not None else "untrained", module.config.n_heads,
                         bias.astype(np.float32))


def _disentangled(bench, t, head, model, name) -> PositionPanel:
    if DEBERTA_TYPE not in CONVERTERS:
        return PositionPanel("disentangled", "DeBERTa-v3", "absent", 0, None)
    module = model.module if model is not None else _tiny(DEBERTA_TYPE)
    ids = torch.full((1, t), 5, dtype=torch.long)  # one token at every position: content terms alike
    record = Recorder("scores")
    with torch.no_grad():
        module(ids, torch.ones_like(ids), torch.zeros_like(ids), with_logits=False, record=record)
    scores = record.stacked("scores")[0, 0, head % module.config.n_heads].float().cpu().numpy()
    label = name if model is not None else "DeBERTa-v3"
    return PositionPanel("disentangled", label, "loaded" if model is not None else "untrained",
                         module.config.n_heads, (scores - scores.mean()).astype(np.float32))


def _alibi(bench, t, head, model, name) -> PositionPanel:
    n_heads = model.config.n_heads if model is not None else BLOOM_HEADS
    slope = float(alibi_slopes(n_heads)[head % n_heads])
    keys = np.arange(t, dtype=np.float32)
    matrix = np.where(keys[None, :] <= np.arange(t)[:, None], slope * keys[None, :], np.nan).astype(np.float32)
    label = name if model is not None else f"BLOOM bloom-560m, {BLOOM_HEADS} heads"
    return PositionPanel("alibi", label, "loaded" if model is not None else "exact", n_heads, matrix)


def _real(bench, scheme):
    """The first of REAL_MODELS[scheme] some page has loaded, and its name; else (None, None)."""
    for candidate in REAL_MODELS.get(scheme, ()):
        loaded = shelf.cached_model(bench, candidate, use=False)  # a look: the visitor's model stays theirs
        if loaded is not None and (scheme != "relative" or getattr(loaded.config, "positions", None) == "relative"):
            return loaded, candidate
    return None, None


def _tiny(model_type: str):
    """A tiny untrained module of `model_type` through our converter, from transformers' default config
    of the family with its sizes shrunk (TINY)."""
    from attnviz.loading import hf

    config = hf.default_config(model_type)
    config.update({k: v for k, v in TINY.items() if k in config})
    if model_type == DEBERTA_TYPE:
        config.update(DEBERTA_V3)
    converter = CONVERTERS[model_type]
    torch.manual_seed(0)
    module = converter.module(converter.config(config)).eval()
    return module
