"""The Translate page's runs: an encoder-decoder's three attention kinds for one source (and target), bounded
and shared through the trace store."""

from __future__ import annotations

from attnviz.workbench.shared import Workbench

MAX_TOKENS = 128  # source and target tokens
MAX_NEW_TOKENS = 64  # greedy decoding steps


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
            held = model.run(source, target or None, language_code=language, max_new_tokens=MAX_NEW_TOKENS,
                             max_tokens=MAX_TOKENS)
        bench.traces.put(key, held, sum(a.nbytes for a in (held.attentions, held.decoder_attentions,
                                                            held.cross_attentions)))
    return held
