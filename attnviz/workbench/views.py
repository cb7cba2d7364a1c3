"""The views the Explore page draws: raw weights or a lens's (value-weighted, rollout, flow), at token or word
level, special tokens hidden or not, the first token set aside or not. `view` is the one place that decides
between the trace's raw weights (workbench.traces) and a lens's weights (workbench.attention_lenses); every view is
shared like the trace, under the memory budget."""

from __future__ import annotations

import dataclasses

import numpy as np

from attnviz.analysis import attention_lenses
from attnviz.analysis.sink import first_aside_positions, trace_first_aside
from attnviz.analysis.views import attention_view
from attnviz.workbench.attention_lenses import lens_attentions, value_norms
from attnviz.workbench.memory import trim_heap
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for
from attnviz.workbench.traces import compact, n_tokens, trace, trace_bytes

PER_LAYER = ("rollout", "flow")  # lenses with one map per layer, shaped as one head


def view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
         lens: str = "raw", normalise: bool = True, first_aside: bool = False):
    """The attention view the page draws (analysis.views.attention_view), shared like the trace; a `lens`
    other than "raw" is applied to the token-level weights first (`lens_view`). With `first_aside`, each row
    is renormalised without the first position (analysis.sink.trace_first_aside)."""
    if lens != "raw":
        return lens_view(bench, name, text, text_pair, level, hide_special, lens, normalise, first_aside)
    held = trace(bench, name, text, text_pair)
    if level == "token" and not hide_special and not first_aside:
        return attention_view(held, level, False)  # the trace's own array, no copy

    def make():
        if first_aside:
            made = first_aside_view(bench, name, text, text_pair, level, hide_special)
        else:  # the view's float32 layer beside the float16 trace
            with bench.run_slot(4 * held.attentions.nbytes), bench.reserve(held.attentions.nbytes):
                made = aside_view(held, level, hide_special, False)
        made.attentions.setflags(write=False)
        return made

    key = (name, text, text_pair, level, hide_special) + (("first_aside",) if first_aside else ())
    return bench.shared_value(key, make, lambda v: v.attentions.nbytes)


def view_head(lens: str, head: int) -> int:
    """The head index into a view: a per-layer lens has one map per layer (index 0)."""
    return 0 if lens in PER_LAYER else head


def lens_map(bench: Workbench, name: str, text: str, text_pair: str | None, lens: str, layer: int, head: int):
    """The token-level map [T, T] float32 a head's profile describes: None for raw weights (the head itself,
    read from the trace), else the lens's map of this layer (and head, for the value-weighted lens), its rows
    normalised: the profile's statistics (entropy, shares) read rows as distributions."""
    if lens == "raw":
        return None
    weights = lens_attentions(bench, name, text, text_pair, lens, True)
    if weights is None or weights.shape[-1] != len(trace(bench, name, text, text_pair).tokens):
        return None
    return np.asarray(weights[layer, view_head(lens, head)], dtype=np.float32)


def first_aside_view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
                     weigh=None, extra_bytes: int = 0):
    """The view with the first token set aside (aside_view), renormalised in float32 and then kept in float16.
    The app's float16 trace cannot be renormalised: a sink head leaves 1e-7 of a row's weight off the first
    token, below float16's resolution next to 1, and such rows came out 0 or 1 (SmolLM2 layer 18 head 8: 0.99
    off the float32 view). So a float32 trace is computed for it (the trace's own peak, reserved again) and set
    aside in place, then its float16 copy and the view (2 bytes a cell each) are made as for any view.
    `weigh`, when given, first turns the float32 probabilities into lens weights [L, H or 1, T, S] float32
    (`lens_first_aside_view`), in place or within `extra_bytes` more."""
    model = model_for(bench, name)
    n = n_tokens(model, text, text_pair)
    need = trace_bytes(model, n) + 4 * model.info.n_layers * model.info.n_heads * n * n + extra_bytes
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        full = model.run(text, text_pair)
        weights = full.attentions if weigh is None else weigh(full.attentions)
        for layer in weights:  # first_token_aside, in place: no second float32 copy
            layer[..., 0] = 0.0
            totals = layer.sum(axis=-1, keepdims=True)
            np.divide(layer, totals, out=layer, where=totals > 0)
        aside = compact(dataclasses.replace(first_aside_positions(full, hide_special), attentions=weights))
        del full, weights
        made = attention_view(aside, level, level == "token")
        trim_heap()
    return made


def aside_view(held, level: str, hide_special: bool, first_aside: bool):
    """attention_view of `held`, with the first token set aside first when asked: its position is then
    marked special, so a token view hides it (and the real special tokens only when `hide_special`)."""
    if not first_aside:
        return attention_view(held, level, hide_special)
    return attention_view(trace_first_aside(held, hide_special), level, level == "token")


def lens_view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
              lens: str, normalise: bool = True, first_aside: bool = False):
    """The view of lens weights, made as for raw weights (token or word level, special tokens hidden).
    Value weights that are not row-normalised are norms, not shares: the view is divided by its
    largest value (`lens_peak`) so colours keep the [0, 1] scale. `first_aside` renormalises each row
    without the first position, as for raw weights (`aside_view`)."""
    key = ("lens_view", name, text, text_pair, level, hide_special, lens, bool(normalise), bool(first_aside))
    held = bench.views.get(key)
    if held is None:
        if first_aside and lens in ("value", "rollout"):
            made, peak = lens_first_aside_view(bench, name, text, text_pair, level, hide_special, lens, normalise), None
        else:
            made, peak = float16_lens_view(bench, name, text, text_pair, level, hide_special, lens, normalise,
                                           first_aside)
        made.attentions.setflags(write=False)
        held = (made, peak)
        bench.views.put(key, held, made.attentions.nbytes)
    return held[0]


def float16_lens_view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
                      lens: str, normalise: bool, first_aside: bool):
    """(view, peak) of the shared float16 lens weights (workbench.attention_lenses.lens_attentions)."""
    weights = lens_attentions(bench, name, text, text_pair, lens, normalise)
    if weights is None:
        raise ValueError(f"the {lens} lens has not been computed for this text")
    weighted = dataclasses.replace(trace(bench, name, text, text_pair), attentions=weights)
    with bench.reserve(3 * weights.nbytes, keep_model=name):
        made = aside_view(weighted, level, hide_special, first_aside)
        peak = None
        if lens == "value" and not normalise and not hide_special and not first_aside:
            peak = float(np.max(made.attentions, initial=0.0))
            if peak > 0:
                made = dataclasses.replace(made, attentions=(made.attentions / np.float32(peak)).astype(
                    made.attentions.dtype))
    return made, peak


def lens_first_aside_view(bench: Workbench, name: str, text: str, text_pair: str | None, level: str,
                          hide_special: bool, lens: str, normalise: bool):
    """The value or rollout view with the first token set aside, from float32 weights (`first_aside_view`):
    set aside from the float16 lens weights, a sink head's rows lose what float16 cannot hold next to its
    first-token weight, as raw weights do. Flow keeps its float16 weights (computed once, as a heavy action)."""
    if lens == "value":
        norms = value_norms(bench, name, text, text_pair)  # before the reservation: it may load

        def weigh(attentions):
            return attention_lenses.value_weighted(attentions, norms, normalise, out=attentions)

        return first_aside_view(bench, name, text, text_pair, level, hide_special, weigh)
    model = model_for(bench, name)
    n = n_tokens(model, text, text_pair)
    # rollout: its float64 residual steps and the float32 [L, 1, T, T] result beside the probabilities
    return first_aside_view(bench, name, text, text_pair, level, hide_special,
                            lambda attentions: attention_lenses.rollout(attentions)[:, None],
                            extra_bytes=12 * model.info.n_layers * n * n)


def lens_peak(bench: Workbench, name: str, text: str, text_pair: str | None, level: str, hide_special: bool,
              lens: str, normalise: bool = True, first_aside: bool = False) -> float | None:
    """The value an unnormalised value-weighted view was divided by (None when it was not)."""
    held = bench.views.get(("lens_view", name, text, text_pair, level, hide_special, lens, bool(normalise),
                            bool(first_aside)))
    return None if held is None else held[1]
