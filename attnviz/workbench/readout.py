"""The Explore page's logit lens, direct logit attribution and information-flow routes (attnviz.interventions):
each computed once per (model, text, position, its own settings) and shared, under the memory budget. The
three read one recorded forward pass of the text, itself held in the views store while it fits (a recorded
pass was a third of the three views' CPU time at 64 tokens). A text of up to SHORT_TOKENS tokens is computed
on every Enter; a longer one waits for its button (ui/heavy.py)."""

from __future__ import annotations

from attnviz.readouts import attribution as attribution_work
from attnviz.readouts import logit_lens as lens_work
from attnviz.readouts import recorded_run
from attnviz.readouts import routes as routes_work
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for
from attnviz.workbench.traces import TRACE_OVERHEAD

RUN_NAMES = routes_work.ROUTE_NAMES  # the routes read every name the lens and the attribution read
THRESHOLD = routes_work.THRESHOLD  # the routes' default, Ferrando & Voita's
SHORT_TOKENS = 64  # SmolLM2's three views at 100 tokens take a few CPU-s (docs/views/readout.md)


def run_bytes(model, n_tokens: int) -> int:
    """Peak bytes of one recorded run and its reads: the forward pass's records (every block's input,
    attention and MLP outputs, head contexts, values, float32) and attention maps, the logit rows the lens
    holds (its reads and a block of the grid), and the parts of the decomposition (float64)."""
    c = model.config
    width = c.d_model
    records = 4 * c.n_layers * n_tokens * (4 * width + c.kv_heads * c.dim_per_head)
    maps = 4 * c.n_layers * c.n_heads * n_tokens * n_tokens
    logits = 4 * c.vocab_size * (2 * c.n_layers + 1 + lens_work.GRID_ROWS) * 2  # the logits and their softmax
    parts = 8 * (c.n_layers * (c.n_heads + 1) + 4) * width * 4
    return records + maps + logits + parts + TRACE_OVERHEAD


def is_short(n_tokens: int) -> bool:
    return n_tokens <= SHORT_TOKENS


def default_position(bench: Workbench, name: str, text: str) -> int:
    """Where the views read by default (readouts.recorded_run.default_position)."""
    model = model_for(bench, name)
    return recorded_run.default_position(model, recorded_run.encode_text(model, text))


def held(bench: Workbench, key: tuple):
    """A result some visitor has computed under `key` (the keys below), or None."""
    return bench.views.get(key)


def lens_key(name: str, text: str, position: int, target: str | None) -> tuple:
    return ("logit_lens", name, text, position, target or None)


def attribution_key(name: str, text: str, position: int, target: str | None, contrast: str | None) -> tuple:
    return ("attribution", name, text, position, target or None, contrast or None)


def routes_key(name: str, text: str, position: int, threshold: float) -> tuple:
    return ("routes", name, text, position, round(float(threshold), 4))


def run_key(name: str, text: str) -> tuple:
    return ("readout_run", name, text)


def _computed(bench: Workbench, key: tuple, compute, nbytes, progress=None):
    """`compute(model, run)` under `key`, `run` the text's shared recorded pass (read at the view's position)."""
    name, text = key[1], key[2]

    def make():
        model = model_for(bench, name)
        need = run_bytes(model, len(recorded_run.encode_text(model, text).ids))
        if progress:
            progress(0, 1)  # a cancelled job stops here (workbench.jobs)
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            run = bench.shared_value(run_key(name, text), lambda: recorded_run.recorded_run(model, text, RUN_NAMES),
                                     lambda made: made.nbytes)  # past the store's share it is not kept
            result = compute(model, run)
        if progress:
            progress(1, 1)
        return result

    return bench.shared_value(key, make, nbytes)


def logit_lens(bench: Workbench, name: str, text: str, position: int, target: str | None, progress=None):
    """readouts.logit_lens.logit_lens of `text` at `position`, following `target` (default: the model's
    own top prediction)."""
    return _computed(bench, lens_key(name, text, position, target),
                     lambda model, run: lens_work.logit_lens(model, text, position, target or None, run=run),
                     lambda r: r.grid_ids.nbytes + r.grid_probs.nbytes + 64 * r.top_ids.size + 4096, progress)


def attribution(bench: Workbench, name: str, text: str, position: int, target: str | None, contrast: str | None,
                progress=None):
    """readouts.attribution.attribute of `target` (minus `contrast`) at `position`."""
    return _computed(bench, attribution_key(name, text, position, target, contrast),
                     lambda model, run: attribution_work.attribute(model, text, target or None, contrast or None,
                                                                   position, run=run),
                     lambda r: r.parts.values.element_size() * r.parts.values.numel() + r.heads.nbytes + 4096,
                     progress)


def head_tokens(bench: Workbench, name: str, result, key: tuple, layer: int, head: int):
    """What head (layer, head) promotes and suppresses at the attribution `result` (held under `key`)."""
    def make():
        model = model_for(bench, name)
        need = 8 * attribution_work.VOCAB_CHUNK * model.config.d_model * 3 + 8 * model.config.vocab_size
        with bench.reserve(need, keep_model=name):
            return attribution_work.head_tokens(model, result, layer, head)

    return bench.shared_value((*key, "head_tokens", layer, head), make, lambda _: 4096)


def routes(bench: Workbench, name: str, text: str, position: int, threshold: float, progress=None):
    """readouts.routes.routes at `position`, pruned at `threshold`."""
    return _computed(bench, routes_key(name, text, position, threshold),
                     lambda model, run: routes_work.routes(model, text, position, threshold, run=run),
                     lambda r: 200 * (len(r.nodes) + len(r.edges)) + 4096, progress)
