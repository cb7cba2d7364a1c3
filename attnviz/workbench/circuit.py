"""A circuit of heads for the pages (interventions.circuit): one pair's EAP-IG edge scores, the circuit of about
n edges, its faithfulness beside size-matched random circuits and the exact check of the top edges, as plain data
(`CircuitView`: numbers and labels, no tensors) for ui/circuit_view.py; computed once per plain inputs and shared
in the views store, under the memory budget."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.interventions import circuit as circuits
from attnviz.models.batch_bytes import SCAN_BATCH_BYTES
from attnviz.workbench.patching import pair_of
from attnviz.workbench.shared import Workbench

SIZES = (20, 50, 100, 200, 500)  # the circuit sizes the page offers (edges)
CONTROLS = 10  # random circuits of each kind
CHECKED = 10  # top edges patched exactly


@dataclass(frozen=True)
class CircuitView:
    """What the page draws. Nodes: every node of the graph (labels, layers, rows as plots.circuit reads them);
    edges: the circuit's (source, receiver) indices with their scores; faithfulness (0 the corrupted run, 1 the
    clean run) of the circuit, of the whole graph (`complete`) and of the random circuits per kind; the exact check
    of the top edges (node indices, estimates and exact effects) and the Pearson r between them."""

    labels: tuple
    layers: tuple
    rows: tuple
    n_layers: int
    n_heads: int
    edges: tuple
    scores: np.ndarray
    requested: int
    top: int
    n_all_edges: int
    faithfulness: float
    complete: float
    controls: dict
    clean_value: float
    corrupt_value: float
    steps: int
    direction: str
    checked: tuple  # (source, receiver, estimate, exact) of the top edges
    checked_r: float


def circuit_bytes(model, n_tokens: int) -> int:
    """Transient bytes: both runs recorded at every node, the scoring (one backward pass's interpolation points, as
    many as fit SCAN_BATCH_BYTES or one, with the float64 differences and gradient sums the scores are made of) and
    one batch of path-patched passes."""
    c = model.config
    module = model.module
    itemsize = next(module.parameters()).element_size()
    n_nodes = 2 + c.n_layers * (c.n_heads + 1)
    stream = n_tokens * c.d_model
    recorded = 2 * (c.n_layers * (c.n_heads + 6) + 2) * stream * itemsize
    per_point = circuits.gradient_row_bytes(module, n_tokens)
    points = max(1, min(circuits.DEFAULT_STEPS, SCAN_BATCH_BYTES // per_point))
    scoring = points * per_point + 3 * n_nodes * stream * 8
    passes = circuits.batch_rows(module, n_tokens) * circuits.row_bytes(module, n_tokens)
    # The sum, not the larger of the two phases: what the scoring freed stays resident in the allocator's heap while
    # the passes run (measured at 32 tokens on SmolLM2: 560 MB above the start, the phases 180 and 220 MB alone).
    return recorded + scoring + passes


def refusal(model) -> str | None:
    """Why this model has no circuit here (interventions.circuit.graph_of's reason), or None."""
    try:
        circuits.graph_of(model.module)
    except ValueError as error:
        return str(error)
    return None


def _key(name: str, clean, corrupt, target, contrast, direction, n_edges) -> tuple:
    return ("circuit", name, clean, corrupt, target or "", contrast or "", direction, n_edges)


def result(bench: Workbench, name: str, clean: str, corrupt: str, target, contrast, direction: str, n_edges: int):
    """The CircuitView of these inputs, if some visitor has computed it."""
    return bench.views.get(_key(name, clean, corrupt, target, contrast, direction, n_edges))


def find(bench: Workbench, model, name: str, clean: str, corrupt: str, target, contrast, direction: str,
         n_edges: int, progress=None) -> CircuitView:
    """The circuit of about n_edges edges of one pair (interventions.circuit.find_circuit, CONTROLS random
    circuits of each kind, the top CHECKED edges checked exactly); the caller holds the heavy-work slot. ValueError
    for a model or pair the circuit cannot take (an encoder, a target of several tokens, too long)."""
    key = _key(name, clean, corrupt, target, contrast, direction, n_edges)
    done = bench.views.get(key)
    if done is not None:
        return done
    circuits.graph_of(model.module)  # the refusal's message before any work
    pair = pair_of(model, clean, corrupt, target, contrast)
    need = circuit_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        found = circuits.find_circuit(model.module, pair, direction, n_edges, samples=CONTROLS, check=CHECKED,
                                      progress=progress)
    value = view_of(found)
    bench.views.put(key, value, value.scores.nbytes + 64 * len(value.labels) + 64 * len(value.edges) + 4096)
    return value


def view_of(found: circuits.CircuitResult) -> CircuitView:
    """The plain data of a CircuitResult."""
    edges, graph, chosen = found.edges, found.edges.graph, found.circuit
    nodes = range(graph.n_nodes)
    checked = found.checked
    rows = () if checked is None else tuple(
        (u, v, float(a), float(e)) for (u, v), a, e in zip(checked.edges, checked.approx, checked.exact))
    scores = np.array(chosen.scores, dtype=np.float64)
    scores.setflags(write=False)
    controls = {}
    for kind, values in found.controls.items():
        values = np.array(values, dtype=np.float64)
        values.setflags(write=False)
        controls[kind] = values
    return CircuitView(
        tuple(edges.labels), tuple(graph.layer(n) for n in nodes), tuple(graph.row(n) for n in nodes),
        graph.n_layers, graph.n_heads, tuple(chosen.edges), scores, chosen.requested, chosen.top,
        int(graph.valid().sum()), found.faithfulness, found.complete, controls, edges.clean_value,
        edges.corrupt_value, edges.steps, edges.direction, rows,
        float("nan") if checked is None else float(checked.agreement.r))
