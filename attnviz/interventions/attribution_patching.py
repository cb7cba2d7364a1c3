"""Attribution patching: every grid of activation patching (attnviz.interventions.patching) estimated from one
forward and one backward pass of the receiving run (Nanda 2023, "Attribution patching"; Syed et al. 2023;
Kramár et al. 2024, AtP*), and the tools to see how far to trust it.

Exact patching puts the source run's activation a_src into the receiving run in place of its own a_recv and
runs the rest of the model again, once per component. Attribution patching takes the metric m to first order
in the activation instead:

    m(patched) ~ m(receiving) + (a_src - a_recv) . dm/da        (the gradient taken in the receiving run)

summed over the component's elements: a head's [T, D] slice of "head_outputs" (all positions), one position's
[D] (heads x positions), an MLP's [T, C] or [C] slice of "mlp_outputs", one position's [C] of "block_inputs"
(the residual stream entering a layer). Positions without a partner (patching.align_positions) have
a_src = a_recv, so they add nothing; their per-position results are NaN, as patching's. The estimate is then
normalised as patching's: (m_estimated - m_corrupted) / (m_clean - m_corrupted), 0 the corrupted run and
1 the clean one, both directions ("denoise": the gradient in the corrupted run; "noise": in the clean run).

The gradient: the receiving run goes through our own module once more with autograd on (patching's passes run
under inference mode). At each edit point (attnviz.transformer.record) the layer's record returns a + 0 with
the 0 a leaf that requires grad, so the graph stays whole and dm/d0 is dm/da for every edit point of every
layer; one `torch.autograd.grad` gives them all. Nothing in attnviz.transformer changes.

Where the first order is not enough. The estimate is the exact patch when m is linear in the activation; it
drifts where the patch moves a later non-linearity far: an attention softmax or a gate that saturates, a norm,
the final soft-cap. AtP*'s fix for attention saturation recomputes a head's softmax with the patched queries or
keys; it is for query and key nodes, and the nodes here are a head's output, an MLP's and the residual stream,
whose effect runs through every later layer's queries and keys at once, so that recomputation does not apply
and is not made. Instead each grid carries a reliability note (`NOTES`: how it fared against exact patching on
SmolLM2's built-in pairs, and where it fails), `check_top` patches the estimate's top K cells exactly (K runs of
the exact scan instead of the grid's), and `agreement` compares a whole estimate with the exact grid.

Shape legend: L layers, H query heads, T the receiving run's positions, D head dim, C model width, K the
cells checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.interventions import patching
from attnviz.models.loaded_model import LoadedModel
from attnviz.transformer.record import LayerRecord, Recorder

# Each grid, the edit point its components patch, and whether it is per position (the last axis is T).
GRIDS = {
    "heads": ("head_outputs", False),  # [L, H]
    "head_positions": ("head_outputs", True),  # [L, H, T]
    "mlps": ("mlp_outputs", False),  # [L]
    "mlp_positions": ("mlp_outputs", True),  # [L, T]
    "residual": ("block_inputs", True),  # [L, T]
}

# How each grid's estimate compared with exact patching on SmolLM2-135M: the five English built-in pairs, both
# directions (benchmarks/bench_attribution_patching.py --agreement; docs/views/patching.md, "Attribution
# patching"): Pearson r, its range over the ten runs, and the mean count of the exact top 10 found in the top 10.
NOTES = {
    "heads": "good on the whole (SmolLM2, built-in pairs: r 0.88 on average, 0.43 to 1.00; 8.8 of the top 10): "
             "a head's output is one small addition to the residual stream. Its misses are false negatives, "
             "where a later layer reads the head through a saturated attention pattern or gate and the effect "
             "grows at first with the square of the patch (one pair: estimated -0.02, exact 0.72); checking "
             "the top heads exactly catches overestimates, not these",
    "head_positions": "good on the whole, as the heads (SmolLM2: r 0.88, 0.48 to 0.99; 9.1 of the top 10)",
    "mlps": "poor at the first layer, good after it: SmolLM2's first MLP rewrites the token that differs (its "
            "patch is 9 to 18 times the size of the stream it enters), far past the first order (estimated "
            "-3.4 to 1.2 where exact patching reads 1.0 or 0.0); without it r 0.81 to 1.00, with it 0.38 on "
            "average. The whole column costs L exact runs",
    "mlp_positions": "as the MLPs: poor at the first layer (SmolLM2: r 0.36 on average with it)",
    "residual": "poor at a position whose token differs: patching the stream there swaps the token itself (exact "
                "about 1 until its information has moved on), where the estimate is off by as much as the effect "
                "and often of the wrong sign; at the other positions r 0.95 to 1.00 (SmolLM2; 0.31 on average "
                "over the grid, 3.5 of the top 10). Exact patching (patching.residual) costs L x T runs",
}


# --- the gradient at every edit point ----------------------------------------------------------------------


class _Leaves(LayerRecord):
    """A layer's record that keeps each edit point's tensor and goes on with tensor + a zero leaf that requires
    grad, so that the leaf's gradient is the metric's gradient with respect to that activation."""

    def edit(self, name, tensor):
        self.keep(name, tensor.detach())
        zero = torch.zeros_like(tensor, requires_grad=True)
        self.recorder.zeros[self.layer][name] = zero
        return tensor + zero


class _LeafRecorder(Recorder):
    def __init__(self) -> None:
        super().__init__(*patching.POINTS)
        self.zeros: list[dict[str, torch.Tensor]] = []

    def begin(self, n_layers: int) -> None:
        super().begin(n_layers)
        self.zeros = [{} for _ in range(n_layers)]

    def at(self, layer: int) -> LayerRecord:
        return _Leaves(self, layer)


def gradients(runs) -> tuple[float, dict, dict]:
    """The receiving run once with autograd: (its metric, {name: its activations [L, ...]}, {name: dm/da
    [L, ...]}) at every edit point, on the CPU, in float64; [L, ...] as patching.prepare's sources."""
    recorder = _LeafRecorder()
    # Autograd holds what the backward pass needs of every layer until it runs (each softmax's probabilities among
    # them): about what a trace with attentions holds, for the one receiving run.
    # Off inference mode even when the caller is in it: patching's tensors are inference tensors, which autograd
    # may not save, hence the clone of the ids (the module recomputes the masks and rotary itself).
    with torch.inference_mode(False), torch.enable_grad():
        out = runs.module(runs.ids.clone(), record=recorder, with_logits=False)
        value = runs.metric(out.hidden)  # [1]
        names = [(layer, name) for name in patching.POINTS for layer in range(len(recorder.zeros))]
        leaves = [recorder.zeros[layer][name] for layer, name in names]
        grads = torch.autograd.grad(value.sum(), leaves, allow_unused=True)
    by_name: dict[str, list] = {name: [] for name in patching.POINTS}
    for (_, name), leaf, grad in zip(names, leaves, grads):
        by_name[name].append(torch.zeros_like(leaf) if grad is None else grad)
    activations = {name: recorder.stacked(name)[:, 0].detach().cpu().double() for name in patching.POINTS}
    grads = {name: torch.stack(g)[:, 0].detach().cpu().double() for name, g in by_name.items()}
    return float(value[0].detach()), activations, grads


# --- the estimates ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attribution:
    """Every grid of activation patching, estimated to first order, normalised as patching's (0 = the corrupted
    run, 1 = the clean run); per-position grids over the receiving run's positions, NaN where a position has no
    partner. `value`: the receiving run's metric; `notes`: how far each grid can be trusted (NOTES)."""

    heads: np.ndarray  # [L, H]
    head_positions: np.ndarray  # [L, H, T]
    mlps: np.ndarray  # [L]
    mlp_positions: np.ndarray  # [L, T]
    residual: np.ndarray  # [L, T]
    clean_value: float
    corrupt_value: float
    value: float
    notes: dict

    def grid(self, name: str) -> np.ndarray:
        if name not in GRIDS:
            raise ValueError(f"unknown grid {name!r}; choose one of {', '.join(GRIDS)}")
        return getattr(self, name)


def estimate(runs) -> Attribution:
    """All five grids of `runs` (patching.prepare's, either direction) from one forward and one backward pass."""
    value, receiving, grads = gradients(runs)
    unaligned = torch.from_numpy(~runs.aligned)
    terms = {}  # name -> (a_src - a_recv) . dm/da per position: [L, H, T] for head outputs, [L, T] otherwise
    for name in patching.POINTS:
        delta = runs.sources[name].detach().cpu().double() - receiving[name]
        term = (delta * grads[name]).sum(-1)
        term[..., unaligned] = 0.0  # the source there is the receiving run's own: nothing to add but rounding
        terms[name] = term.numpy()

    def normalised(effect):  # an estimated change of the metric -> patching's scale
        return runs.normalised(value + effect)

    def positions(effect):
        out = normalised(effect)
        out[..., ~runs.aligned] = np.nan
        return out

    heads_t, mlps_t = terms["head_outputs"], terms["mlp_outputs"]
    notes = dict(NOTES)
    if runs.metric_kind == "embedding" and abs(runs.normalised(value) - 1) < 1e-6:  # noising
        notes = {name: "poor: the receiving run is the clean run, whose cosine with itself is at its maximum, "
                       "where the gradient is zero: every estimate reads 1; use exact patching" for name in GRIDS}
    return Attribution(normalised(heads_t.sum(-1)), positions(heads_t), normalised(mlps_t.sum(-1)),
                       positions(mlps_t), positions(terms["block_inputs"]), runs.clean_value, runs.corrupt_value,
                       value, notes)


def attribution_patch(model: LoadedModel, pair: patching.PatchPair, direction: str = "denoise"):
    """(the prepared runs, their Attribution): patching.prepare's two recorded runs, then `estimate`. Keep the
    runs for `check_top` or for exact patching of the same pair."""
    runs = patching.prepare(model.module, pair, direction)
    return runs, estimate(runs)


# --- against exact patching ---------------------------------------------------------------------------------


def component(grid: str, index: tuple) -> tuple:
    """The exact scan's component (patching.scan) of one grid cell: heads (l, h) -> (l, "head_outputs", h),
    head_positions (l, h, t) -> (l, "head_outputs", h, t), mlps (l,) -> (l, "mlp_outputs"), mlp_positions
    (l, t) -> (l, "mlp_outputs", t), residual (l, t) -> (l, "block_inputs", t)."""
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}; choose one of {', '.join(GRIDS)}")
    return (int(index[0]), GRIDS[grid][0], *(int(i) for i in index[1:]))


def exact_cells(runs, grid: str, cells: list[tuple], progress=None, should_stop=None,
                batch_size=None) -> np.ndarray:
    """float64 [N]: exact patching of the given cells of `grid`, in the given order (patching.scan, run by
    layer)."""
    order = sorted(range(len(cells)), key=lambda i: cells[i][0])
    values = patching.scan(runs, [component(grid, cells[i]) for i in order], progress, should_stop, batch_size)
    out = np.empty(len(cells))
    out[order] = values
    return out


def exact_grid(runs, grid: str, progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """The whole grid patched exactly, shaped as the estimate's (NaN where a position has no partner): heads,
    mlps and residual are patching.heads, mlps and residual; head_positions costs L x H x T runs."""
    c, t = runs.module.config, runs.aligned.size
    component(grid, (0,))  # the unknown grid's message
    shape = {"heads": (c.n_layers, c.n_heads), "head_positions": (c.n_layers, c.n_heads, t), "mlps": (c.n_layers,),
             "mlp_positions": (c.n_layers, t), "residual": (c.n_layers, t)}[grid]
    cells = [index for index in np.ndindex(*shape) if not GRIDS[grid][1] or runs.aligned[index[-1]]]
    out = np.full(shape, np.nan)
    values = exact_cells(runs, grid, cells, progress, should_stop, batch_size)
    for index, value in zip(cells, values):
        out[index] = value
    return out


@dataclass(frozen=True)
class Agreement:
    """An estimate against the exact grid: Pearson r over the cells both have (NaN when either is constant),
    and how many of the estimate's top k cells by |effect| are among the exact grid's top k."""

    r: float
    overlap: int
    k: int
    cells: int


def top_cells(grid: np.ndarray, k: int) -> list[tuple]:
    """The k cells of largest |value| (NaN never), largest first; ties by position in the grid."""
    flat = np.abs(np.asarray(grid, dtype=float)).ravel()
    finite = np.flatnonzero(np.isfinite(flat))
    ranked = finite[np.argsort(-flat[finite], kind="stable")][:k]
    return [tuple(int(i) for i in np.unravel_index(j, np.shape(grid))) for j in ranked]


def agreement(approx: np.ndarray, exact: np.ndarray, k: int = 10) -> Agreement:
    """Pearson r and top-k overlap (by |effect|) of an estimated grid against the exact one, same shape."""
    approx, exact = np.asarray(approx, dtype=float), np.asarray(exact, dtype=float)
    if approx.shape != exact.shape:
        raise ValueError(f"the grids differ in shape: {approx.shape} and {exact.shape}")
    both = np.isfinite(approx) & np.isfinite(exact)
    a, e = approx[both], exact[both]
    r = float(np.corrcoef(a, e)[0, 1]) if a.size > 1 and a.std() > 0 and e.std() > 0 else float("nan")
    k = min(k, int(both.sum()))
    masked = np.where(both, approx, np.nan), np.where(both, exact, np.nan)
    overlap = len(set(top_cells(masked[0], k)) & set(top_cells(masked[1], k)))
    return Agreement(r, overlap, k, int(both.sum()))


@dataclass(frozen=True)
class Checked:
    """The estimate's top k cells of one grid (largest |estimate| first), each estimated and patched exactly."""

    grid: str
    cells: list  # grid indices, e.g. (layer, head)
    approx: np.ndarray  # [K]
    exact: np.ndarray  # [K]


def check_top(runs, approx: np.ndarray, k: int = 10, grid: str = "heads", progress=None, should_stop=None,
              batch_size=None) -> Checked:
    """Exact patching of the k cells where the estimate `approx` (a grid of `estimate`'s, named by `grid`) is
    largest in size: k patched runs instead of the whole grid's."""
    cells = top_cells(approx, k)
    exact = exact_cells(runs, grid, cells, progress, should_stop, batch_size)
    return Checked(grid, cells, np.array([approx[c] for c in cells], dtype=float), exact)
