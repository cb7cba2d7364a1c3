"""Strict key accounting for weight conversion (as nanoGPT's from_pretrained): every checkpoint tensor
is consumed or explicitly ignored, and every shape is checked against the module it fills."""

from __future__ import annotations

import re

import torch


class WeightLedger:
    def __init__(self, checkpoint: dict[str, torch.Tensor], prefix: str = "") -> None:
        self._remaining = dict(checkpoint)
        self.prefix = prefix
        self.converted: dict[str, torch.Tensor] = {}

    def take(self, key: str) -> torch.Tensor:
        full = self.prefix + key
        if full not in self._remaining:
            raise ValueError(f"checkpoint has no tensor {full!r}")
        return self._remaining.pop(full)

    def has(self, key: str) -> bool:
        """Whether the checkpoint holds `key` (under the prefix), not yet taken."""
        return self.prefix + key in self._remaining

    def put(self, our_key: str, tensor: torch.Tensor) -> None:
        self.converted[our_key] = tensor

    def move(self, hf_key: str, our_key: str) -> None:
        self.put(our_key, self.take(hf_key))

    def move_params(self, names: dict[str, str], theirs: str = "", ours: str = "",
                    kinds: tuple[str, ...] = ("weight", "bias")) -> None:
        """Each module of `names` (HF name -> ours) moved whole: theirs + name + "." + kind -> ours + name + ...
        for each of `kinds` (a linear's or a LayerNorm's weight and bias, by default)."""
        for hf_name, our_name in names.items():
            for kind in kinds:
                self.move(f"{theirs}{hf_name}.{kind}", f"{ours}{our_name}.{kind}")

    def unembedding(self, tied: bool, key: str = "lm_head.weight") -> None:
        """Tied models reuse the token embedding; others bring their own lm_head (outside the prefix)."""
        if tied:
            self.put("lm_head.weight", self.converted["token_embedding.weight"])
            self._remaining.pop(key, None)
        elif key in self._remaining:
            self.put("lm_head.weight", self._remaining.pop(key))
        else:
            raise ValueError(f"untied model without an unembedding tensor {key!r}")

    def ignore(self, pattern: str) -> None:
        """Drop tensors the visualiser does not need (task heads, pooler, cached buffers)."""
        for key in [k for k in self._remaining if re.fullmatch(pattern, k)]:
            del self._remaining[key]

    def finish(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Check nothing is left over and every tensor fits the module; return its state dict."""
        if self._remaining:
            raise ValueError(f"checkpoint tensors not consumed by the converter: {sorted(self._remaining)}")
        expected = model.state_dict()
        missing = sorted(set(expected) - set(self.converted))
        extra = sorted(set(self.converted) - set(expected))
        if missing or extra:
            raise ValueError(f"conversion mismatch: missing {missing}, unexpected {extra}")
        wrong = {
            k: (tuple(t.shape), tuple(expected[k].shape))
            for k, t in self.converted.items()
            if t.shape != expected[k].shape
        }
        if wrong:
            raise ValueError(f"shape mismatch (checkpoint, ours): {wrong}")
        return self.converted


def detect_prefix(checkpoint: dict, marker: str, prefixes: tuple[str, ...]) -> str:
    """The prefix under which `marker` appears (e.g. 'bert.' for BertForMaskedLM, '' for BertModel)."""
    for prefix in prefixes:
        if prefix + marker in checkpoint:
            return prefix
    raise ValueError(f"cannot find {marker!r} under any of the prefixes {prefixes}")
