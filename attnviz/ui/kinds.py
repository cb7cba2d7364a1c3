"""Attention kinds in the visitor's language: `ModelConfig.layer_kind` names ("sliding 512, soft-capped")
and the Learn table's extras are data in English; these functions word them with the locale's strings."""

from __future__ import annotations

import re

from attnviz.ui.language import t

_WINDOWED = re.compile(r"^(sliding|local) (\d+)$")
_FLAGS = {"NoPE": "kind_nope", "ALiBi": "kind_alibi", "soft-capped": "kind_capped", "sinks": "kind_sinks"}


def kind_label(kind: str) -> str:
    """'sliding 512, soft-capped' -> the locale's words for each part, joined the same way."""
    base, *flags = kind.split(", ")
    windowed = _WINDOWED.match(base)
    words = [t(f"kind_{windowed[1]}", n=windowed[2]) if windowed else t("kind_full")]
    words += [t(_FLAGS[flag]) if flag in _FLAGS else flag for flag in flags]
    return t("kind_separator").join(words)


def layers_label(layers) -> str:
    """((kind, count), ...) -> 'kind × count · kind × count' in the locale's words."""
    return " · ".join(f"{kind_label(kind)} × {n}" for kind, n in layers)


def extras_label(extras) -> str:
    return t("kind_separator").join(t(f"extra_{key}", **values) for key, values in extras) or "—"
