"""The Translate page's runs: an encoder-decoder's three attention kinds for one source (and target), bounded
and shared through the trace store."""

from __future__ import annotations

from attnviz.workbench.shared import Workbench

MAX_TOKENS = 128  # source and target tokens
MAX_NEW_TOKENS = 64  # greedy decoding steps
# An untrained model's greedy output is one token repeated ("il il il ..." to the 64-step limit, and a 2,000 px
# mosaic): a few steps show the mechanics as well.
UNTRAINED_NEW_TOKENS = 8


def new_tokens(model) -> int:
    """Greedy decoding steps for `model`: UNTRAINED_NEW_TOKENS for an untrained one, else MAX_NEW_TOKENS."""
    return UNTRAINED_NEW_TOKENS if getattr(model, "untrained", False) else MAX_NEW_TOKENS


def trace_need(model) -> int:
    """Peak bytes of one bounded run: the three attention kinds in float32, and the activations."""
    c = model.config
    n = MAX_TOKENS + 1
    return 4 * c.n_heads * n * n * (c.encoder_layers + 2 * c.decoder_layers) + 8 * n * c.d_ff * 4 + 16_000_000


def cached_translation(bench: Workbench, name: str, source: str, target: str, language: str | None):
    return bench.traces.get(("translate", name, source, target, language))


def translation(bench: Workbench, model, name: str, source: str, target: str, language: str | None):
    """The trace of `source` (decoded greedily when `target` is empty), computed once; the caller holds the
    heavy-work slot."""
    key = ("translate", name, source, target, language)
    held = bench.traces.get(key)
    if held is None:
        with bench.reserve(trace_need(model), keep_model=name):
            held = model.run(source, target or None, language_code=language, max_new_tokens=new_tokens(model),
                             max_tokens=MAX_TOKENS)
        bench.traces.put(key, held, sum(a.nbytes for a in (held.attentions, held.decoder_attentions,
                                                            held.cross_attentions)))
    return held
