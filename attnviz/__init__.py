"""attnviz: see where every head of a real transformer attends, computed by our own attention module."""

from __future__ import annotations

__version__ = "0.1.0"


def load(source: str, device=None, dtype=None, max_tokens: int = 512, progress=None, **options):
    """Load a pretrained model into attnviz's from-scratch transformer (see attnviz.loading.load, which
    also takes the keyword-only `from_hub` and `memory_limit`)."""
    from attnviz.loading import load as _load  # keeps `import attnviz` light

    return _load(source, device=device, dtype=dtype, max_tokens=max_tokens, progress=progress, **options)


__all__ = ["load", "__version__"]
